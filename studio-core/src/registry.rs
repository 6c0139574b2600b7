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
use crate::package_sync::{PackageSync, Settled};
use crate::source::SourceTree;
use crate::state::Core;

/// Re-reads the catalogue now (only changed packages are validated again) and
/// registers what became valid, as the file watcher would a moment later.
/// Every package folder is settled with its head first, so a change made
/// here reaches the other replicas before the caller answers.
pub(crate) async fn refresh_catalogue(core: &Core) -> Arc<Snapshot> {
    settle_packages(&core.store, &core.packages, &core.source, Scope::Every).await;
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

/// Which packages [`settle_packages`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every folder, head and base: what a refresh or the watcher needs.
    Every,
    /// Those whose head moved away from this replica's base: what following
    /// the other replicas needs, without reading every folder.
    Moved,
}

/// Settles `scope`'s package folders with their heads in the core database
/// (`crate::package_sync`), each under its app's source lock, off the async
/// threads. Answers whether a folder was written from a head (the caller
/// refreshes the catalogue then). A failure is logged; the next settle
/// tries again.
pub(crate) async fn settle_packages(
    store: &Store,
    packages: &Arc<PackageSync>,
    tree: &Arc<SourceTree>,
    scope: Scope,
) -> bool {
    let (store, packages, tree) = (store.clone(), packages.clone(), tree.clone());
    let settled = tokio::task::spawn_blocking(move || {
        let heads = store.package_head_generations()?;
        let ids: Vec<String> = match scope {
            Scope::Every => packages.known_ids(&heads).into_iter().collect(),
            Scope::Moved => {
                let bases = packages.base_generations();
                heads
                    .iter()
                    .filter(|(id, generation)| bases.get(*id) != Some(generation))
                    .map(|(id, _)| id.clone())
                    .collect()
            }
        };
        let mut took = false;
        for id in ids {
            match tree.with_app_lock(&id, || packages.settle(&store, &id, &heads)) {
                Ok(Settled::Took(_) | Settled::Overtaken(_)) => took = true,
                Ok(_) => {}
                Err(error) => {
                    tracing::error!(app_id = %id, %error, "the package could not be settled with the core database; the next refresh tries again")
                }
            }
        }
        Ok::<bool, studio_store::StoreError>(took)
    })
    .await;
    match settled {
        Ok(Ok(took)) => took,
        Ok(Err(error)) => {
            tracing::error!(%error, "the package heads could not be read from the core database; the next refresh tries again");
            false
        }
        Err(error) => {
            tracing::error!(%error, "settling the package folders failed");
            false
        }
    }
}

/// Settles the package `app_id` after a change this replica made to its
/// folder (under the app's source lock, which the caller holds): the
/// change is advanced as the head, or, when another replica's change got
/// there first, refused with `APP_CONFLICT` (the folder then holds the
/// other change; this one is kept aside). Blocking.
pub(crate) fn settle_change(
    store: &Store,
    packages: &PackageSync,
    app_id: &str,
    overtaken_before: u64,
) -> Result<(), sasha_proto::AppError> {
    let settled = settle_app(store, packages, app_id)?;
    if matches!(settled, Settled::Overtaken(_)) || packages.overtaken(app_id) != overtaken_before {
        return Err(sasha_proto::AppError::new(
            sasha_proto::ErrorCode::Conflict,
            format!(
                "{app_id} was changed through another studio-core at the same moment; this change was not kept: read the app's files again and repeat it"
            ),
        )
        .with_details(serde_json::json!({ "app": app_id, "reason": "changed-elsewhere" })));
    }
    Ok(())
}

/// Settles the package `app_id` alone against its head as the database has
/// it now (blocking; the caller holds the app's source lock): before a
/// source tool reads it, so a change made through another replica a moment
/// ago is read, not the folder's older files.
pub(crate) fn settle_app(
    store: &Store,
    packages: &PackageSync,
    app_id: &str,
) -> Result<Settled, sasha_proto::AppError> {
    let generation = store
        .package_head_generation(app_id)
        .map_err(studio_store::store_error)?;
    let heads = std::collections::BTreeMap::from([(app_id.to_owned(), generation)]);
    packages
        .settle(store, app_id, &heads)
        .map_err(studio_store::store_error)
}
