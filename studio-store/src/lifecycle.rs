//! Withdrawing, restoring and deleting an app: the flags on `app_registry`
//! (migration 7) and their audit entries. Who may is studio-core's `lifecycle`'s
//! decision; this module only records.
//!
//! A withdrawn app keeps its registry row, grants, revision ledger and data:
//! [`Store::access`] and [`Store::access_by_app`] simply answer nothing for
//! it, so every surface that reads access (the catalogue, resources, source
//! and history tools, chat, uploads, Studio's app list) leaves it out at once,
//! on every replica and after a restart. Restoring clears the flag and
//! everything comes back as it was, grants included. Deleting is recorded
//! only for a withdrawn app, which stays withdrawn; a deleted package cannot
//! be restored. The row is never removed, so the id is never reused.

use crate::db::{OptionalExtension as _, Sql, Tx};

use super::{Store, StoreError, audit};

/// Audit actions of an app's lifecycle.
pub mod lifecycle_action {
    /// An admin withdrew an app: `actor` the admin, `before` its revision.
    pub const APP_WITHDRAWN: &str = "app.withdrawn";
    /// An admin restored a withdrawn app: `after` its revision.
    pub const APP_RESTORED: &str = "app.restored";
    /// An admin deleted a withdrawn app's package: `before` its last
    /// registered revision.
    pub const APP_DELETED: &str = "app.deleted";
    /// An admin deleted a deleted app's data file: `after` the backup's name
    /// (relative to `APP_DATA_ROOT`), or `none` when it had no data file.
    pub const APP_DATA_DELETED: &str = "app.data-deleted";
}

/// Where an app stands in its lifecycle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lifecycle {
    /// The last registered revision.
    pub revision: String,
    /// Unix seconds of the withdrawal; `None` for a live app.
    pub withdrawn_at: Option<i64>,
    /// The user id who withdrew it.
    pub withdrawn_by: Option<String>,
    /// Unix seconds when its package was deleted.
    pub package_deleted_at: Option<i64>,
    /// Unix seconds when its data file was deleted.
    pub data_deleted_at: Option<i64>,
}

impl Lifecycle {
    /// Whether the app is withdrawn (deleted apps stay withdrawn).
    pub fn is_withdrawn(&self) -> bool {
        self.withdrawn_at.is_some()
    }
}

/// Why a lifecycle step was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleRefusal {
    #[error("no such app is registered")]
    UnknownApp,
    #[error("the app is not withdrawn")]
    NotWithdrawn,
    #[error("the app's package was deleted")]
    PackageDeleted,
}

/// A lifecycle step's answer: `Ok(true)` when it changed something,
/// `Ok(false)` when the app already was so (nothing written, nothing audited).
pub type LifecycleResult = Result<bool, LifecycleRefusal>;

fn read(transaction: &Tx<'_>, app_id: &str) -> Result<Option<Lifecycle>, StoreError> {
    Ok(transaction
        .query_row(
            "SELECT current_revision, withdrawn_at, withdrawn_by, package_deleted_at, data_deleted_at
             FROM app_registry WHERE app_id = ?1",
            [app_id],
            |row| {
                Ok(Lifecycle {
                    revision: row.get(0)?,
                    withdrawn_at: row.get(1)?,
                    withdrawn_by: row.get(2)?,
                    package_deleted_at: row.get(3)?,
                    data_deleted_at: row.get(4)?,
                })
            },
        )
        .optional()?)
}

impl Store {
    /// `app_id`'s lifecycle; `None` for an id never registered.
    /// Every withdrawn app (deleted ones included) with where it stands,
    /// by id.
    pub fn withdrawn_apps(&self) -> Result<Vec<(String, Lifecycle)>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare(
            "SELECT app_id, current_revision, withdrawn_at, withdrawn_by, package_deleted_at, data_deleted_at
             FROM app_registry WHERE withdrawn_at IS NOT NULL
             AND app_id NOT IN (SELECT app_id FROM member_apps WHERE promoted_at IS NULL)
             ORDER BY app_id",
        )?;
        let rows = statement
            .query_map((), |row| {
                Ok((
                    row.get(0)?,
                    Lifecycle {
                        revision: row.get(1)?,
                        withdrawn_at: row.get(2)?,
                        withdrawn_by: row.get(3)?,
                        package_deleted_at: row.get(4)?,
                        data_deleted_at: row.get(5)?,
                    },
                ))
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    pub fn lifecycle(&self, app_id: &str) -> Result<Option<Lifecycle>, StoreError> {
        let mut connection = self.connection()?;
        let transaction = connection.read_transaction()?;
        read(&transaction, app_id)
    }

    /// Withdraws `app_id` for everyone, audited as `app.withdrawn`.
    pub fn withdraw_app(&self, app_id: &str, actor: &str) -> Result<LifecycleResult, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let Some(state) = read(&transaction, app_id)? else {
            return Ok(Err(LifecycleRefusal::UnknownApp));
        };
        if state.is_withdrawn() {
            return Ok(Ok(false));
        }
        transaction.execute(
            "UPDATE app_registry SET withdrawn_at = ?2, withdrawn_by = ?3 WHERE app_id = ?1",
            (app_id, now, actor),
        )?;
        audit(
            &transaction,
            now,
            actor,
            lifecycle_action::APP_WITHDRAWN,
            Some(app_id),
            None,
            Some(&state.revision),
            None,
        )?;
        transaction.commit()?;
        Ok(Ok(true))
    }

    /// Restores a withdrawn `app_id` exactly as it was, audited as
    /// `app.restored`. Refused once its package was deleted.
    pub fn restore_app(&self, app_id: &str, actor: &str) -> Result<LifecycleResult, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let Some(state) = read(&transaction, app_id)? else {
            return Ok(Err(LifecycleRefusal::UnknownApp));
        };
        if state.package_deleted_at.is_some() {
            return Ok(Err(LifecycleRefusal::PackageDeleted));
        }
        if !state.is_withdrawn() {
            return Ok(Ok(false));
        }
        transaction.execute(
            "UPDATE app_registry SET withdrawn_at = NULL, withdrawn_by = NULL WHERE app_id = ?1",
            [app_id],
        )?;
        audit(
            &transaction,
            now,
            actor,
            lifecycle_action::APP_RESTORED,
            Some(app_id),
            None,
            None,
            Some(&state.revision),
        )?;
        transaction.commit()?;
        Ok(Ok(true))
    }

    /// Records that `actor` deleted the package of the withdrawn `app_id`
    /// (`app.deleted`) and removes its app chat conversations. `Ok(false)`
    /// when it was recorded before.
    pub fn record_app_deleted(
        &self,
        app_id: &str,
        actor: &str,
    ) -> Result<LifecycleResult, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let Some(state) = read(&transaction, app_id)? else {
            return Ok(Err(LifecycleRefusal::UnknownApp));
        };
        if !state.is_withdrawn() {
            return Ok(Err(LifecycleRefusal::NotWithdrawn));
        }
        if state.package_deleted_at.is_some() {
            return Ok(Ok(false));
        }
        transaction.execute(
            "UPDATE app_registry SET package_deleted_at = ?2 WHERE app_id = ?1",
            (app_id, now),
        )?;
        crate::app_chat::forget_app(&transaction, app_id)?;
        audit(
            &transaction,
            now,
            actor,
            lifecycle_action::APP_DELETED,
            Some(app_id),
            Some("package"),
            Some(&state.revision),
            None,
        )?;
        transaction.commit()?;
        Ok(Ok(true))
    }

    /// Records that `actor` deleted the data file of the withdrawn `app_id`
    /// after backing it up as `backup` (`app.data-deleted`).
    pub fn record_app_data_deleted(
        &self,
        app_id: &str,
        actor: &str,
        backup: &str,
    ) -> Result<LifecycleResult, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let Some(state) = read(&transaction, app_id)? else {
            return Ok(Err(LifecycleRefusal::UnknownApp));
        };
        if !state.is_withdrawn() {
            return Ok(Err(LifecycleRefusal::NotWithdrawn));
        }
        transaction.execute(
            "UPDATE app_registry SET data_deleted_at = ?2 WHERE app_id = ?1",
            (app_id, now),
        )?;
        audit(
            &transaction,
            now,
            actor,
            lifecycle_action::APP_DATA_DELETED,
            Some(app_id),
            Some("data"),
            None,
            Some(backup),
        )?;
        transaction.commit()?;
        Ok(Ok(true))
    }
}
