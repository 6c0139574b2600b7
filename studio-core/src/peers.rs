//! What this studio-core replica learns from the others through the core
//! database, every [`FOLLOW_EVERY`]: a package under `DOCS_ROOT` whose head
//! another replica moved is written into this replica's folder
//! (`crate::package_sync`), and a member app deployed, deleted or promoted
//! through another replica is read from the audit log and its files (or its
//! absence) handed to this replica's catalogue, so every replica serves the
//! same apps without sharing a disk.
//!
//! What it must never do: change the database (it only reads; a package it
//! settles is one whose head moved, which it takes), or take an app's files
//! from anywhere but the core database.

use std::sync::Arc;
use std::time::Duration;

use sasha_package::source::PackageSource;
use studio_store::blocking;
use tokio_util::sync::CancellationToken;

use crate::state::Core;

/// How often a replica reads what the others changed: a member app deployed
/// through one replica is served by every other within this.
pub(crate) const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// Follows the other replicas' member app changes from audit row `after`
/// until `shutdown`.
pub(crate) async fn follow(core: Arc<Core>, mut after: i64, shutdown: CancellationToken) {
    let mut every = tokio::time::interval(FOLLOW_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = every.tick() => {}
        }
        match catch_up(&core, after).await {
            Ok(newest) => after = newest,
            Err(error) => tracing::warn!(
                diagnostic_id = %error.diagnostic_id,
                "studio-core could not read the other replicas' member app changes; it tries again"
            ),
        }
    }
}

/// Hands every member app changed after audit row `after` to the catalogue
/// and answers the newest audit row.
pub(crate) async fn catch_up(core: &Core, after: i64) -> Result<i64, sasha_proto::AppError> {
    let took = crate::registry::settle_packages(
        &core.store,
        &core.packages,
        &core.source,
        crate::registry::Scope::Moved,
    )
    .await;
    let store = core.store.clone();
    let (newest, apps) = blocking(move || store.member_changes_since(after)).await?;
    if apps.is_empty() {
        if took {
            crate::registry::refresh_catalogue(core).await;
        }
        return Ok(newest);
    }
    for app in apps {
        let (store, id) = (core.store.clone(), app.clone());
        let files = blocking(move || store.member_source(&id)).await?;
        let source = files.map(|files| {
            let mut source = PackageSource::default();
            for (path, bytes) in &files {
                source.set(path, Some(bytes));
            }
            source
        });
        core.catalogue.set_member(&app, source);
    }
    crate::registry::refresh_catalogue(core).await;
    Ok(newest)
}

/// The newest audit row now: where a starting replica begins following,
/// read before it loads the member apps, so no change falls in between.
pub(crate) async fn head(store: &studio_store::Store) -> Result<i64, sasha_proto::AppError> {
    let store = store.clone();
    blocking(move || store.member_changes_since(i64::MAX))
        .await
        .map(|(newest, _)| newest)
}

#[cfg(test)]
mod tests;
