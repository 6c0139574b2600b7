//! data-worker's durability gate ([`crate::engine::durable`]): replication
//! of app databases to object storage when `SASHA_REPLICA_URL` is set, and
//! with leases the owner's fence.
//!
//! With one data-worker ([`ReplicatedApps`]), at boot every app database
//! object storage holds but `APP_DATA_ROOT` lacks is restored from its
//! newest generation and every app file is tracked ([`prepare`]); the gate
//! is this role's [`Replicator`]. With leases ([`Fenced`]) nothing is
//! restored or tracked at boot: an app's file is brought up to date when the
//! app is granted ([`crate::placement`]); the gate admits a batch only under
//! the live lease and answers it only if the app is still owned at the
//! epoch it was admitted under once the commit (and, replicating, its sync)
//! is done, with or without replication.
//!
//! What it must never do: let a role serve before a missing app database is
//! back (it would begin an empty history beside the real one), replicate a
//! write of an app this worker no longer owns into a generation of its own,
//! or answer a caller with replication's internals.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use sasha_proto::AppError;
use sasha_replica::{Database, Replicator};

use crate::engine;
use crate::engine::durable::{Admission, Durability};
use crate::ownership::Ownership;

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

/// The engine's durability gate with leases: the owner's fence, around
/// replication when it is on.
pub(crate) struct Fenced {
    pub(crate) ownership: Arc<Ownership>,
    pub(crate) replicator: Option<Replicator>,
}

impl Durability for Fenced {
    fn admit(&self, app_id: &str, path: &Path) -> Result<Admission, AppError> {
        let admission = self.ownership.admit_write(app_id, Instant::now())?;
        if let Some(replicator) = &self.replicator {
            replicator
                .admit(path)
                .map_err(|error| error.to_app_error())?;
        }
        Ok(admission)
    }

    fn committed(&self, app_id: &str, path: &Path, admission: Admission) -> Result<(), AppError> {
        // An app moved away is not replicated under this worker's epoch
        // (its file is being let go of); the write is not answered.
        self.ownership
            .confirm_write(app_id, admission, Instant::now())?;
        if let Some(replicator) = &self.replicator {
            replicator
                .committed_at_epoch_blocking(
                    &Database::App(app_id.to_owned()),
                    path,
                    admission.epoch,
                )
                .map_err(|error| error.to_app_error())?;
        }
        // The sync may have taken until past the lease.
        self.ownership
            .confirm_write(app_id, admission, Instant::now())
    }

    fn removing(&self, app_id: &str, path: &Path) -> Result<(), AppError> {
        // Removing the replica is a write: only the owner, under its lease,
        // and only the history up to its own epoch.
        let admission = self.ownership.admit_write(app_id, Instant::now())?;
        match &self.replicator {
            Some(replicator) => replicator
                .forget_through_epoch_blocking(
                    &Database::App(app_id.to_owned()),
                    path,
                    admission.epoch,
                )
                .map_err(|error| error.to_app_error()),
            None => Ok(()),
        }
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
