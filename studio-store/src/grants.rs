//! The app registry (`app_registry`), grants (`grants`), operators' write
//! consents for tokens (`token_write_consents`) and the authorization audit
//! log's reads and source-change entries.
//!
//! What it must never do: change a grant without its audit entry in the same
//! transaction, give a returning app id new grants, or cache an access
//! decision: every check reads the database, so a revocation applies to the
//! very next call.

use std::collections::BTreeMap;

use crate::db::{DbError, OptionalExtension as _, Row, Sql};
use sasha_contract::data::ReadPolicy;

use super::{
    ACTOR_SYSTEM, AppAccess, AuditEntry, Grant, RegisteredApp, Store, StoreError, TokenKind,
    action, audit, member_apps, secrets, set_grant,
};

impl Store {
    // --- registry and grants -----------------------------------------------

    /// Records a valid app's current revision, schema hash and public action
    /// catalogue. Returns `true` on the app id's first discovery ever; only
    /// then is `manage` granted to every admin and staff user existing at
    /// this moment (audited as `system`). A returning id, including one that
    /// disappeared and came back or one seen again after a restart, keeps its
    /// grants exactly as they are.
    pub fn register_app(
        &self,
        app_id: &str,
        revision: &str,
        schema_hash: Option<&str>,
        actions_json: &str,
        read_policy: &ReadPolicy,
    ) -> Result<bool, StoreError> {
        let read_policy = serde_json::to_string(read_policy).unwrap_or_else(|_| "{}".to_owned());
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let previous: Option<String> = transaction
            .query_row(
                "SELECT current_revision FROM app_registry WHERE app_id = ?1",
                [app_id],
                |row| row.get(0),
            )
            .optional()?;
        let first = previous.is_none();
        match previous {
            Some(previous) => {
                transaction.execute(
                    "UPDATE app_registry
                     SET current_revision = ?2, schema_hash = ?3, actions_json = ?4, last_seen_at = ?5,
                         read_policy = ?6
                     WHERE app_id = ?1",
                    (app_id, revision, schema_hash, actions_json, now, &read_policy),
                )?;
                if previous != revision {
                    audit(
                        &transaction,
                        now,
                        ACTOR_SYSTEM,
                        action::APP_REVISION_CHANGED,
                        Some(app_id),
                        None,
                        Some(&previous),
                        Some(revision),
                    )?;
                }
            }
            None => {
                transaction.execute(
                    "INSERT INTO app_registry
                     (app_id, current_revision, schema_hash, actions_json, first_discovered_at, last_seen_at,
                      read_policy)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)",
                    (app_id, revision, schema_hash, actions_json, now, &read_policy),
                )?;
                audit(
                    &transaction,
                    now,
                    ACTOR_SYSTEM,
                    action::APP_REGISTERED,
                    Some(app_id),
                    None,
                    None,
                    Some(revision),
                )?;
                let privileged: Vec<String> = {
                    let mut statement = transaction.prepare(
                        "SELECT id FROM users WHERE role IN ('admin', 'staff') ORDER BY username",
                    )?;
                    statement
                        .query_map((), |row| row.get(0))?
                        .collect::<Result<_, _>>()?
                };
                for user_id in &privileged {
                    set_grant(
                        &transaction,
                        now,
                        ACTOR_SYSTEM,
                        app_id,
                        user_id,
                        AppAccess::Manage,
                    )?;
                }
            }
        }
        transaction.commit()?;
        Ok(first)
    }

    /// The read policy of `app_id`'s last registered (valid) revision; `None`
    /// for an app never registered, or registered before the policy was kept.
    pub fn read_policy(&self, app_id: &str) -> Result<Option<ReadPolicy>, StoreError> {
        let connection = self.connection()?;
        let text: Option<Option<String>> = connection
            .query_row(
                "SELECT read_policy FROM app_registry WHERE app_id = ?1",
                [app_id],
                |row| row.get(0),
            )
            .optional()?;
        Ok(text
            .flatten()
            .and_then(|text| serde_json::from_str(&text).ok()))
    }

    /// The registry row of `app_id`.
    pub fn registered_app(&self, app_id: &str) -> Result<Option<RegisteredApp>, StoreError> {
        let connection = self.connection()?;
        let app = connection
            .query_row(
                "SELECT app_id, current_revision, schema_hash, actions_json, first_discovered_at, last_seen_at
                 FROM app_registry WHERE app_id = ?1",
                [app_id],
                registered_app_from_row,
            )
            .optional()?;
        Ok(app)
    }

    /// Every registered app id's row, by id (including apps no longer on disk).
    pub fn registered_apps(&self) -> Result<Vec<RegisteredApp>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare(
            "SELECT app_id, current_revision, schema_hash, actions_json, first_discovered_at, last_seen_at
             FROM app_registry ORDER BY app_id",
        )?;
        let apps = statement
            .query_map((), registered_app_from_row)?
            .collect::<Result<_, _>>()?;
        Ok(apps)
    }

    /// Sets `user_id`'s access to `app_id` (creating or changing the grant),
    /// audited with the access before and after. Granting what is already
    /// held changes nothing and writes no audit entry. `actor` is the acting
    /// user's id; `None` records `system`.
    pub fn grant(
        &self,
        app_id: &str,
        user_id: &str,
        access: AppAccess,
        actor: Option<&str>,
    ) -> Result<(), StoreError> {
        let actor = actor.unwrap_or(ACTOR_SYSTEM);
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let app_known = transaction
            .query_row(
                "SELECT 1 FROM app_registry WHERE app_id = ?1",
                [app_id],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if !app_known {
            return Err(StoreError::UnknownApp);
        }
        let user_known = transaction
            .query_row("SELECT 1 FROM users WHERE id = ?1", [user_id], |_| Ok(()))
            .optional()?
            .is_some();
        if !user_known {
            return Err(StoreError::UnknownUser);
        }
        member_apps::check_member_grant(&transaction, app_id, user_id, Some(access), actor)??;
        set_grant(&transaction, now, actor, app_id, user_id, access)?;
        transaction.commit()?;
        Ok(())
    }

    /// Removes `user_id`'s grant on `app_id`, audited; `false` when there was
    /// none. Takes effect on the very next [`Store::access`].
    pub fn revoke(
        &self,
        app_id: &str,
        user_id: &str,
        actor: Option<&str>,
    ) -> Result<bool, StoreError> {
        let actor = actor.unwrap_or(ACTOR_SYSTEM);
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let before: Option<AppAccess> = transaction
            .query_row(
                "SELECT access FROM grants WHERE app_id = ?1 AND user_id = ?2",
                [app_id, user_id],
                |row| row.get(0),
            )
            .optional()?;
        let Some(before) = before else {
            return Ok(false);
        };
        member_apps::check_member_grant(&transaction, app_id, user_id, None, actor)??;
        transaction.execute(
            "DELETE FROM grants WHERE app_id = ?1 AND user_id = ?2",
            [app_id, user_id],
        )?;
        audit(
            &transaction,
            now,
            actor,
            action::GRANT_CHANGED,
            Some(app_id),
            Some(user_id),
            Some(before.as_str()),
            None,
        )?;
        transaction.commit()?;
        Ok(true)
    }

    /// `user_id`'s access to `app_id`, read from the database on every call.
    /// A withdrawn app grants nobody anything until it is restored (its
    /// grants stay as they are; see [`Store::withdraw_app`]).
    pub fn access(&self, app_id: &str, user_id: &str) -> Result<Option<AppAccess>, StoreError> {
        let connection = self.connection()?;
        let access = connection
            .query_row(
                "SELECT g.access FROM grants g JOIN app_registry r ON r.app_id = g.app_id
                 WHERE g.app_id = ?1 AND g.user_id = ?2 AND r.withdrawn_at IS NULL",
                [app_id, user_id],
                |row| row.get(0),
            )
            .optional()?;
        Ok(access)
    }

    /// Records that the access token `secret` may write `app_id` as a script
    /// (an operator's explicit consent at mint time): its writes there need no
    /// model confirmation and are audited with source `automation`. The
    /// token's grants still decide what it may do. Audited as
    /// `token.write-consent`. An app never discovered is `UnknownApp`.
    pub fn consent_writes(
        &self,
        secret: &str,
        app_id: &str,
        actor: &str,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let known: bool = transaction.query_row(
            "SELECT EXISTS (SELECT 1 FROM app_registry WHERE app_id = ?1)",
            [app_id],
            |row| row.get(0),
        )?;
        if !known {
            return Err(StoreError::UnknownApp);
        }
        let hash = secrets::secret_sha256(secret);
        let (token_id, kind): (i64, TokenKind) = transaction
            .query_row(
                "SELECT id, kind FROM tokens WHERE secret_sha256 = ?1 AND revoked_at IS NULL",
                [&hash],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?
            .ok_or(StoreError::UnknownToken)?;
        // Chat-session tokens and API keys are driven by models or read
        // only: neither may write unconfirmed.
        if kind != TokenKind::Access {
            return Err(StoreError::UnknownToken);
        }
        transaction.execute(
            "INSERT INTO token_write_consents (token_sha256, app_id, granted_by, granted_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (token_sha256, app_id) DO NOTHING",
            (&hash, app_id, actor, now),
        )?;
        audit(
            &transaction,
            now,
            actor,
            "token.write-consent",
            Some(app_id),
            Some(&token_id.to_string()),
            None,
            None,
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// Whether the token `secret` was consented to write `app_id` as a
    /// script; read on every call, so revoking the token ends it.
    pub fn write_consent(&self, secret: &str, app_id: &str) -> Result<bool, StoreError> {
        let connection = self.connection()?;
        let consented = connection
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM token_write_consents c JOIN tokens t
                   ON t.secret_sha256 = c.token_sha256
                 WHERE c.token_sha256 = ?1 AND c.app_id = ?2 AND t.revoked_at IS NULL)",
            )?
            .query_row((secrets::secret_sha256(secret), app_id), |row| row.get(0))?;
        Ok(consented)
    }

    /// Every app `user_id` has a grant on, with the access (one query, for
    /// listing apps); withdrawn apps are left out.
    pub fn access_by_app(&self, user_id: &str) -> Result<BTreeMap<String, AppAccess>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare_cached(
            "SELECT g.app_id, g.access FROM grants g JOIN app_registry r ON r.app_id = g.app_id
             WHERE g.user_id = ?1 AND r.withdrawn_at IS NULL",
        )?;
        let grants = statement
            .query_map([user_id], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        Ok(grants)
    }

    /// Every grant on `app_id`, by username.
    pub fn grants(&self, app_id: &str) -> Result<Vec<Grant>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare(
            "SELECT g.app_id, g.user_id, u.username, g.access, g.granted_at, g.granted_by
             FROM grants g JOIN users u ON u.id = g.user_id
             WHERE g.app_id = ?1 ORDER BY u.username",
        )?;
        let grants = statement
            .query_map([app_id], |row| {
                Ok(Grant {
                    app_id: row.get(0)?,
                    user_id: row.get(1)?,
                    username: row.get(2)?,
                    access: row.get(3)?,
                    granted_at: row.get(4)?,
                    granted_by: row.get(5)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(grants)
    }

    // --- audit -------------------------------------------------------------

    /// Records that `actor` changed the app source file `path` (sha256 of the
    /// bytes before and after; `None` for absent).
    pub fn record_source_change(
        &self,
        app_id: &str,
        path: &str,
        actor: &str,
        before_sha256: Option<&str>,
        after_sha256: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        audit(
            &transaction,
            now,
            actor,
            action::APP_SOURCE_CHANGED,
            Some(app_id),
            Some(path),
            before_sha256,
            after_sha256,
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// The audit log, oldest first; only `app_id`'s entries when given.
    pub fn audit_entries(&self, app_id: Option<&str>) -> Result<Vec<AuditEntry>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare(
            "SELECT id, at, actor, action, app_id, subject, before, after
             FROM authorization_audit_log
             WHERE CAST(?1 AS TEXT) IS NULL OR app_id = ?1
             ORDER BY id",
        )?;
        let entries = statement
            .query_map([app_id], |row| {
                Ok(AuditEntry {
                    id: row.get(0)?,
                    at: row.get(1)?,
                    actor: row.get(2)?,
                    action: row.get(3)?,
                    app_id: row.get(4)?,
                    subject: row.get(5)?,
                    before: row.get(6)?,
                    after: row.get(7)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(entries)
    }
}

fn registered_app_from_row(row: &Row<'_>) -> Result<RegisteredApp, DbError> {
    Ok(RegisteredApp {
        app_id: row.get(0)?,
        current_revision: row.get(1)?,
        schema_hash: row.get(2)?,
        actions_json: row.get(3)?,
        first_discovered_at: row.get(4)?,
        last_seen_at: row.get(5)?,
    })
}
