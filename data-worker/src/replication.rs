//! data-worker's replication of app databases to object storage, when
//! `SASHA_REPLICA_URL` is set: at boot every app database object storage
//! holds but `APP_DATA_ROOT` lacks is restored from its newest generation,
//! and every app file is tracked; afterwards the engine's durability gate
//! ([`crate::engine::durable`]) is this role's [`Replicator`].
//!
//! What it must never do: let a role serve before a missing app database is
//! back (it would begin an empty history beside the real one), or answer a
//! caller with replication's internals.

use std::path::{Path, PathBuf};

use sasha_proto::AppError;
use sasha_replica::{Database, Replicator};

use crate::engine;
use crate::engine::durable::{Admission, Durability};

/// The engine's durability gate over this role's replicator.
pub(crate) struct ReplicatedApps {
    pub(crate) replicator: Replicator,
}

impl Durability for ReplicatedApps {
    fn admit(&self, _app_id: &str, path: &Path) -> Result<Admission, AppError> {
        self.replicator
            .admit(path)
            .map_err(|error| error.to_app_error())?;
        Ok(Admission { epoch: 0 })
    }

    fn committed(&self, app_id: &str, path: &Path, _: Admission) -> Result<(), AppError> {
        self.replicator
            .committed_blocking(&Database::App(app_id.to_owned()), path)
            .map_err(|error| error.to_app_error())
    }

    fn removing(&self, app_id: &str, path: &Path) -> Result<(), AppError> {
        self.replicator
            .forget_blocking(&Database::App(app_id.to_owned()), path)
            .map_err(|error| error.to_app_error())
    }
}

/// Restores every app database missing from `root` that object storage
/// holds, then tracks every app file. The error is the line the role stops
/// with.
pub(crate) async fn prepare(replicator: &Replicator, root: &Path) -> Result<(), String> {
    let replicated = replicator
        .replicated_apps()
        .await
        .map_err(|error| format!("cannot list the replicated apps: {error}"))?;
    let mut restored = 0;
    for app_id in &replicated {
        let Some(path) = engine::live_file_of(root, app_id) else {
            continue;
        };
        if replicator
            .restore_missing(&Database::App(app_id.clone()), &path)
            .await
            .map_err(|error| format!("cannot restore the app database {app_id}: {error}"))?
        {
            restored += 1;
        }
    }
    let local = engine::live_app_ids(root)
        .map_err(|error| format!("cannot list {}: {error}", root.display()))?;
    for app_id in &local {
        let path: PathBuf = root.join(format!("{app_id}.sqlite"));
        replicator
            .track(&Database::App(app_id.clone()), &path)
            .await
            .map_err(|error| format!("cannot replicate the app database {app_id}: {error}"))?;
    }
    tracing::info!(
        restored,
        replicated = local.len(),
        "replication: app databases ready"
    );
    Ok(())
}
