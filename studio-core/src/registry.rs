//! The app registry and the revision ledger kept in step with the
//! catalogue: every valid package the catalogue finds is registered in the
//! core database (its first registration grants `manage` to the admin and
//! staff users existing then) and its revision recorded in the ledger.
//! Called at boot, by the file watcher, and by every change that must be
//! live before its answer is sent.
//!
//! What it must never do: register a package that does not validate, or
//! fail a caller because a registration failed (it is logged, and the next
//! refresh registers every valid package again).

use std::collections::BTreeSet;
use std::sync::Arc;

use sasha_package::sql::ReadPolicy;
use studio_store::Store;

use crate::catalogue::Snapshot;
use crate::state::Core;

/// Re-reads the catalogue now (only changed packages are validated again) and
/// registers what became valid, as the file watcher would a moment later.
pub(crate) async fn refresh_catalogue(core: &Core) -> Arc<Snapshot> {
    let catalogue = core.catalogue.clone();
    let snapshot = match tokio::task::spawn_blocking(move || catalogue.refresh()).await {
        Ok(snapshot) => snapshot,
        Err(_) => return core.catalogue.current(),
    };
    register_apps(
        &core.store,
        &snapshot,
        core.revision_retention,
        &BTreeSet::new(),
    )
    .await;
    snapshot
}

/// Registers every valid package in the core database (its first discovery
/// grants `manage` to the admin and staff users existing then), then records
/// its revision in the revision ledger (`seed` for the ids in `seeded`, else
/// found on disk) and applies `retention`.
pub(crate) async fn register_apps(
    store: &Store,
    snapshot: &Arc<Snapshot>,
    retention: usize,
    seeded: &BTreeSet<String>,
) {
    let (store, snapshot, seeded) = (store.clone(), snapshot.clone(), seeded.clone());
    let outcome = tokio::task::spawn_blocking(move || {
        for (id, package) in snapshot.valid() {
            let read_policy: ReadPolicy = package
                .data
                .as_ref()
                .map(|data| data.read_policy())
                .unwrap_or_default();
            match store.register_app(
                id,
                &package.resource.revision,
                package.data.as_ref().map(|data| data.hash.as_str()),
                &serde_json::to_string(&package.actions).unwrap_or_else(|_| "[]".to_owned()),
                &read_policy,
            ) {
                Ok(true) => tracing::debug!(app_id = %id, "app registered for the first time"),
                Ok(false) => {}
                Err(error) => tracing::error!(app_id = %id, %error, "cannot register app"),
            }
        }
        // An app whose registration failed is refused by the ledger, which
        // holds only registered apps, and logged there.
        crate::ledger::record_snapshot(&store, &snapshot, retention, &seeded);
    })
    .await;
    if let Err(error) = outcome {
        tracing::error!(%error, "app registration failed");
    }
}
