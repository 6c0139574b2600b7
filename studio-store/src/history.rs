//! What the history tools (studio-core's `history`) need of the core database
//! besides the ledger: the audit entry of a revert, and whether a revision
//! the ledger no longer holds was ever one of the app's (so a pruned revision
//! is told apart from one that never existed).

use crate::db::{OptionalExtension as _, Sql};

use super::{Store, StoreError, action, audit};

/// Audit actions of the history tools.
pub mod history_action {
    /// A user reverted an app's files to an old revision: `actor` the user,
    /// `before` the revision that was current, `after` the one reverted to.
    pub const APP_REVERTED: &str = "app-source.reverted";
}

/// One revert of an app, as the audit log holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevertEntry {
    /// Unix seconds.
    pub at: i64,
    /// The user who reverted.
    pub user_id: String,
    /// The revision that was current, and the one reverted to.
    pub from: String,
    pub to: String,
}

impl Store {
    /// Records that `actor` reverted `app_id` from `before` to `after`.
    pub fn record_app_reverted(
        &self,
        app_id: &str,
        actor: &str,
        before: &str,
        after: &str,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        audit(
            &transaction,
            now,
            actor,
            history_action::APP_REVERTED,
            Some(app_id),
            None,
            Some(before),
            Some(after),
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// The reverts of `app_id`, newest first, from the audit log: the
    /// History panel lists them beside the revisions, because reverting to a
    /// revision the ledger holds adds no row to the ledger.
    pub fn app_reverts(&self, app_id: &str) -> Result<Vec<RevertEntry>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare_cached(
            "SELECT at, actor, before, after FROM authorization_audit_log
             WHERE app_id = ?1 AND action = ?2
             ORDER BY id DESC",
        )?;
        let entries = statement
            .query_map((app_id, history_action::APP_REVERTED), |row| {
                Ok(RevertEntry {
                    at: row.get(0)?,
                    user_id: row.get(1)?,
                    from: row.get::<_, Option<String>>(2)?.unwrap_or_default(),
                    to: row.get::<_, Option<String>>(3)?.unwrap_or_default(),
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(entries)
    }

    /// Whether `revision` was ever registered as `app_id`'s current revision
    /// (its registration or a revision change is in the append-only audit
    /// log), whether or not the ledger still holds it.
    pub fn revision_was_registered(
        &self,
        app_id: &str,
        revision: &str,
    ) -> Result<bool, StoreError> {
        let connection = self.connection()?;
        Ok(connection
            .query_row(
                "SELECT 1 FROM authorization_audit_log
                 WHERE app_id = ?1 AND after = ?2 AND action IN (?3, ?4)
                 LIMIT 1",
                (
                    app_id,
                    revision,
                    action::APP_REGISTERED,
                    action::APP_REVISION_CHANGED,
                ),
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }
}
