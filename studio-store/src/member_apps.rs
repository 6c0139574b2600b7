//! Member apps in the core database (migration 11): who wrote each, its
//! current revision (whose files are the revision ledger's), the names its
//! author shared it with (migration 14), and the instance setting that lets
//! members make apps at all. Who may ask is studio-core's `member_apps`'s decision;
//! this module keeps the rules that must hold in one transaction: the
//! instance and per-author caps, the bytes one author's apps may keep in the
//! ledger, author-only overwrite and sharing, and the switch.
//!
//! A share names a person by the user name the author typed. The name is
//! kept as the author typed it (`member_app_shares`) and listed back as one
//! of the app's shares whether or not an account holds it; only when one
//! does is it also a `use` grant. So nothing a member sees of their shares
//! says which user names exist, or which accounts are disabled or removed.
//!
//! Deleting a member app reclaims what the ledger kept of it (every revision,
//! its draft, and each blob and resource nothing else references): a deleted
//! member app can never be opened, reverted or promoted again, so nothing of
//! it is needed, and a loop of deploys and deletes leaves nothing behind.
//!
//! What it must never do: let a deploy count the caps or the author's bytes
//! outside the transaction that inserts the revision (two concurrent deploys
//! would both see room), transfer an app's author, let an app with no
//! recorded author be changed by anyone, or answer a share differently for a
//! name no account holds.

use std::collections::{BTreeMap, BTreeSet};

use crate::db::{DbError, OptionalExtension as _, Row, Sql, Tx};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::ledger::insert_revision;
use super::{
    ACTOR_OPERATOR, ACTOR_SYSTEM, AppAccess, Recorded, RevisionContent, RevisionOrigin, Store,
    StoreError, USERNAME_MATCHES, action, audit, set_grant,
};

/// Audit actions of member apps and settings.
pub mod member_action {
    /// A member deployed a new app or a new revision of theirs: `after` the
    /// revision, `before` the one it replaced.
    pub const MEMBER_APP_DEPLOYED: &str = "member-app.deployed";
    /// The author or a moderator deleted a member app: `before` its revision.
    pub const MEMBER_APP_DELETED: &str = "member-app.deleted";
    /// An admin promoted a member app into the catalogue tier.
    pub const MEMBER_APP_PROMOTED: &str = "member-app.promoted";
    /// An admin changed an instance setting: `subject` its name.
    pub const SETTING_CHANGED: &str = "setting.changed";
}

/// The setting "Let members make their own apps" (default on).
pub const MEMBER_APPS_ENABLED: &str = "member_apps_enabled";

/// A package's files: `(path, bytes)`, by path.
pub type Files = Vec<(String, Vec<u8>)>;

/// The bounds a deploy is checked against, in the deploy's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberCaps {
    /// Live member apps in the instance.
    pub instance: usize,
    /// Live member apps one author holds, so nobody starves the shared cap.
    pub per_author: usize,
    /// Bytes the ledger may keep for one author's member apps: every kept
    /// revision's resource and each distinct file of their revisions and
    /// drafts ([`Store::member_ledger_bytes`]).
    pub author_bytes: u64,
}

/// A member app as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberApp {
    pub id: String,
    pub name: String,
    /// `None`: no recorded author (the account was removed).
    pub author_id: Option<String>,
    pub author_name: Option<String>,
    pub revision: String,
    /// Bytes of the current revision's files.
    pub size: i64,
    pub created_at: i64,
    pub updated_at: i64,
    /// Disabled by a moderator (withdrawn: nobody can open it).
    pub disabled: bool,
    /// The user names it is shared with (`use`), by name.
    pub shares: Vec<String>,
}

/// One deploy: a new member app, or a new revision of one.
#[derive(Debug, Clone)]
pub struct MemberDeploy<'a> {
    pub name: &'a str,
    /// The requesting user: the author of a new app; for an update, it
    /// must be the recorded author.
    pub author_id: &'a str,
    /// `None` deploys a new app; `Some` updates one whose current revision
    /// it must be.
    pub expected_revision: Option<&'a str>,
    pub content: RevisionContent<'a>,
    pub origin: RevisionOrigin,
    pub schema_hash: Option<&'a str>,
    pub actions_json: &'a str,
    pub read_policy_json: &'a str,
    pub caps: MemberCaps,
    pub retention: usize,
}

/// Why a member app change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberRefusal {
    #[error("member apps are turned off")]
    Off,
    #[error("the instance holds the most member apps it may ({0})")]
    InstanceCap(usize),
    #[error("the author holds the most member apps one person may ({0})")]
    AuthorCap(usize),
    /// A new app's id is already an app's (any tier, any state).
    #[error("the id is taken")]
    IdTaken,
    /// Not the author's live member app, or no such app: never told apart.
    #[error("not an app you may change")]
    Denied,
    #[error("the app is disabled by a moderator")]
    Disabled,
    /// The app's current revision is not the one the caller expected.
    #[error("the app changed since it was read")]
    Stale { current: String },
    /// The author's apps would keep more bytes in the ledger than
    /// [`MemberCaps::author_bytes`]: `used` is what they would keep.
    #[error("the author's member apps would keep {used} bytes, more than {limit}")]
    AuthorBytes { limit: u64, used: u64 },
    /// The app is shared with as many names as it may be.
    #[error("the app is shared with the most names it may be ({0})")]
    SharesCap(usize),
}

fn enabled(transaction: &Tx<'_>) -> Result<bool, StoreError> {
    let value: Option<String> = transaction
        .query_row(
            "SELECT value FROM settings WHERE name = ?1",
            [MEMBER_APPS_ENABLED],
            |row| row.get(0),
        )
        .optional()?;
    Ok(value.as_deref() != Some("false"))
}

fn count(transaction: &Tx<'_>, author: Option<&str>) -> Result<usize, StoreError> {
    let count: i64 = transaction.query_row(
        "SELECT COUNT(*) FROM member_apps
         WHERE deleted_at IS NULL AND promoted_at IS NULL AND (CAST(?1 AS TEXT) IS NULL OR author_id = ?1)",
        [author],
        |row| row.get(0),
    )?;
    Ok(usize::try_from(count).unwrap_or(usize::MAX))
}

/// The bytes the ledger keeps for `author`'s member apps (live or deleted,
/// not promoted): each kept revision's resource, and each distinct blob their
/// revisions and drafts name. `octet_length` reads a value's size without
/// reading the value.
fn ledger_bytes(transaction: &Tx<'_>, author: &str) -> Result<u64, StoreError> {
    let bytes: i64 = transaction.query_row(
        "WITH apps AS (
             SELECT app_id FROM member_apps WHERE author_id = ?1 AND promoted_at IS NULL
         ),
         revisions AS (
             SELECT id, revision FROM app_revisions WHERE app_id IN (SELECT app_id FROM apps)
         )
         SELECT CAST(
             (SELECT COALESCE(SUM(octet_length(html) + octet_length(meta_json)), 0)
              FROM revision_resources WHERE revision IN (SELECT revision FROM revisions))
           + (SELECT COALESCE(SUM(size), 0) FROM (
                  SELECT sha256, size FROM app_revision_files
                  WHERE revision_id IN (SELECT id FROM revisions)
                  UNION
                  SELECT sha256, size FROM app_draft_files
                  WHERE app_id IN (SELECT app_id FROM apps)) AS files)
           AS BIGINT)",
        [author],
        |row| row.get(0),
    )?;
    Ok(u64::try_from(bytes).unwrap_or(0))
}

/// Removes everything the ledger keeps of `app_id`: its revisions (their
/// file rows go with them), its draft, and every blob and resource no other
/// revision or draft references.
fn reclaim(transaction: &Tx<'_>, app_id: &str) -> Result<(), StoreError> {
    let blobs: Vec<String> = {
        let mut statement = transaction.prepare_cached(
            "SELECT f.sha256 FROM app_revision_files f
             JOIN app_revisions r ON r.id = f.revision_id WHERE r.app_id = ?1
             UNION SELECT sha256 FROM app_draft_files WHERE app_id = ?1",
        )?;
        statement
            .query_map([app_id], |row| row.get(0))?
            .collect::<Result<_, _>>()?
    };
    let resources: Vec<String> = {
        let mut statement =
            transaction.prepare_cached("SELECT revision FROM app_revisions WHERE app_id = ?1")?;
        statement
            .query_map([app_id], |row| row.get(0))?
            .collect::<Result<_, _>>()?
    };
    transaction.execute("DELETE FROM app_revisions WHERE app_id = ?1", [app_id])?;
    transaction.execute("DELETE FROM app_drafts WHERE app_id = ?1", [app_id])?;
    super::drafts::drop_unreferenced_blobs(transaction, &blobs)?;
    for revision in &resources {
        transaction.execute(
            "DELETE FROM revision_resources WHERE revision = ?1
             AND NOT EXISTS (SELECT 1 FROM app_revisions WHERE revision = ?1)",
            [revision],
        )?;
    }
    Ok(())
}

/// `(author, revision, withdrawn)` of a live member app.
fn live(
    transaction: &Tx<'_>,
    app_id: &str,
) -> Result<Option<(Option<String>, String, bool)>, StoreError> {
    Ok(transaction
        .query_row(
            "SELECT m.author_id, m.revision, r.withdrawn_at IS NOT NULL
             FROM member_apps m JOIN app_registry r ON r.app_id = m.app_id
             WHERE m.app_id = ?1 AND m.deleted_at IS NULL AND m.promoted_at IS NULL",
            [app_id],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?)
}

const LISTED: &str = "SELECT m.app_id, m.name, m.author_id, u.username, m.revision, m.size,
            m.created_at, m.updated_at, r.withdrawn_at IS NOT NULL
     FROM member_apps m JOIN app_registry r ON r.app_id = m.app_id
     LEFT JOIN users u ON u.id = m.author_id
     WHERE m.deleted_at IS NULL AND m.promoted_at IS NULL";

fn listed(row: &Row<'_>) -> Result<MemberApp, DbError> {
    Ok(MemberApp {
        id: row.get(0)?,
        name: row.get(1)?,
        author_id: row.get(2)?,
        author_name: row.get(3)?,
        revision: row.get(4)?,
        size: row.get(5)?,
        created_at: row.get(6)?,
        updated_at: row.get(7)?,
        disabled: row.get(8)?,
        shares: Vec::new(),
    })
}

impl Store {
    /// Whether members may make their own apps (default on).
    pub fn member_apps_enabled(&self) -> Result<bool, StoreError> {
        let mut connection = self.connection()?;
        let transaction = connection.read_transaction()?;
        enabled(&transaction)
    }

    /// Turns member apps on or off, audited as `setting.changed`; `false`
    /// when it already was so (nothing written).
    pub fn set_member_apps_enabled(&self, on: bool, actor: &str) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let before = enabled(&transaction)?;
        if before == on {
            return Ok(false);
        }
        let value = if on { "true" } else { "false" };
        transaction.execute(
            "INSERT INTO settings (name, value, changed_at, changed_by) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value,
                changed_at = excluded.changed_at, changed_by = excluded.changed_by",
            (MEMBER_APPS_ENABLED, value, now, actor),
        )?;
        audit(
            &transaction,
            now,
            actor,
            member_action::SETTING_CHANGED,
            None,
            Some(MEMBER_APPS_ENABLED),
            Some(if before { "true" } else { "false" }),
            Some(value),
        )?;
        transaction.commit()?;
        Ok(true)
    }

    /// Deploys a member app in one transaction: the switch, the caps (for a
    /// new app), the author and expected revision (for an update), the
    /// registry row, the author's `manage` grant, the revision in the ledger
    /// and the audit entry commit together or not at all.
    pub fn deploy_member_app(
        &self,
        app_id: &str,
        deploy: &MemberDeploy<'_>,
    ) -> Result<Result<Recorded, MemberRefusal>, StoreError> {
        let now = self.now();
        let revision = deploy.content.resource.revision.as_str();
        let size: i64 = deploy
            .content
            .files
            .iter()
            .map(|(_, bytes)| i64::try_from(bytes.len()).unwrap_or(i64::MAX))
            .sum();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        if !enabled(&transaction)? {
            return Ok(Err(MemberRefusal::Off));
        }
        let bytes_before = ledger_bytes(&transaction, deploy.author_id)?;
        let before = match deploy.expected_revision {
            None => {
                let taken = transaction
                    .query_row(
                        "SELECT 1 FROM app_registry WHERE app_id = ?1",
                        [app_id],
                        |_| Ok(()),
                    )
                    .optional()?
                    .is_some();
                if taken {
                    return Ok(Err(MemberRefusal::IdTaken));
                }
                if count(&transaction, None)? >= deploy.caps.instance {
                    return Ok(Err(MemberRefusal::InstanceCap(deploy.caps.instance)));
                }
                if count(&transaction, Some(deploy.author_id))? >= deploy.caps.per_author {
                    return Ok(Err(MemberRefusal::AuthorCap(deploy.caps.per_author)));
                }
                transaction.execute(
                    "INSERT INTO app_registry
                     (app_id, current_revision, schema_hash, actions_json, first_discovered_at,
                      last_seen_at, read_policy)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)",
                    (
                        app_id,
                        revision,
                        deploy.schema_hash,
                        deploy.actions_json,
                        now,
                        deploy.read_policy_json,
                    ),
                )?;
                transaction.execute(
                    "INSERT INTO member_apps
                     (app_id, author_id, name, revision, size, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
                    (app_id, deploy.author_id, deploy.name, revision, size, now),
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
                // The author alone manages it: the catalogue's first-discovery
                // grant to admin and staff never runs for a member app.
                set_grant(
                    &transaction,
                    now,
                    ACTOR_SYSTEM,
                    app_id,
                    deploy.author_id,
                    AppAccess::Manage,
                )?;
                None
            }
            Some(expected) => {
                let Some((author, current, withdrawn)) = live(&transaction, app_id)? else {
                    return Ok(Err(MemberRefusal::Denied));
                };
                if author.as_deref() != Some(deploy.author_id) {
                    return Ok(Err(MemberRefusal::Denied));
                }
                if withdrawn {
                    return Ok(Err(MemberRefusal::Disabled));
                }
                if current != expected {
                    return Ok(Err(MemberRefusal::Stale { current }));
                }
                transaction.execute(
                    "UPDATE member_apps SET name = ?2, revision = ?3, size = ?4, updated_at = ?5
                     WHERE app_id = ?1",
                    (app_id, deploy.name, revision, size, now),
                )?;
                transaction.execute(
                    "UPDATE app_registry SET current_revision = ?2, schema_hash = ?3,
                        actions_json = ?4, last_seen_at = ?5, read_policy = ?6
                     WHERE app_id = ?1",
                    (
                        app_id,
                        revision,
                        deploy.schema_hash,
                        deploy.actions_json,
                        now,
                        deploy.read_policy_json,
                    ),
                )?;
                if current != revision {
                    audit(
                        &transaction,
                        now,
                        ACTOR_SYSTEM,
                        action::APP_REVISION_CHANGED,
                        Some(app_id),
                        None,
                        Some(&current),
                        Some(revision),
                    )?;
                }
                Some(current)
            }
        };
        audit(
            &transaction,
            now,
            deploy.author_id,
            member_action::MEMBER_APP_DEPLOYED,
            Some(app_id),
            None,
            before.as_deref(),
            Some(revision),
        )?;
        let recorded = insert_revision(
            &transaction,
            now,
            &deploy.content,
            &deploy.origin,
            deploy.retention,
        )?;
        // Measured after retention pruned what this revision pushed out; a
        // deploy that keeps the author's bytes where they were (a budget
        // lowered since) is not refused. Refused, the transaction rolls back.
        let bytes_after = ledger_bytes(&transaction, deploy.author_id)?;
        if bytes_after > deploy.caps.author_bytes && bytes_after > bytes_before {
            return Ok(Err(MemberRefusal::AuthorBytes {
                limit: deploy.caps.author_bytes,
                used: bytes_after,
            }));
        }
        transaction.commit()?;
        Ok(Ok(recorded))
    }

    /// The bytes the ledger keeps for `author`'s member apps, as a deploy
    /// counts them against [`MemberCaps::author_bytes`].
    pub fn member_ledger_bytes(&self, author: &str) -> Result<u64, StoreError> {
        let mut connection = self.connection()?;
        let transaction = connection.read_transaction()?;
        ledger_bytes(&transaction, author)
    }

    /// Shares (or, with `remove`, stops sharing) the live member app `app_id`
    /// with the user name `username` (already checked as a user name), for
    /// its author `actor`: the name is kept as one of the app's shares, and
    /// when an account other than the author's holds it, that account gains
    /// (or loses) `use`, audited. The answer is the same whether or not an
    /// account holds the name. Adding is refused while a moderator has the
    /// app disabled, and past `max_shares` names; removing never is.
    pub fn share_member_app(
        &self,
        app_id: &str,
        actor: &str,
        username: &str,
        remove: bool,
        max_shares: usize,
    ) -> Result<Result<(), MemberRefusal>, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let Some((author, _, withdrawn)) = live(&transaction, app_id)? else {
            return Ok(Err(MemberRefusal::Denied));
        };
        if author.as_deref() != Some(actor) {
            return Ok(Err(MemberRefusal::Denied));
        }
        let holder: Option<String> = transaction
            .query_row(
                &format!(
                    "SELECT id FROM users WHERE username = ?1 {USERNAME_MATCHES} AND id IS DISTINCT FROM ?2"
                ),
                (username, actor),
                |row| row.get(0),
            )
            .optional()?;
        if remove {
            transaction.execute(
                &format!(
                    "DELETE FROM member_app_shares WHERE app_id = ?1 AND username = ?2 {USERNAME_MATCHES}"
                ),
                (app_id, username),
            )?;
            if let Some(user_id) = &holder {
                let removed = transaction.execute(
                    "DELETE FROM grants WHERE app_id = ?1 AND user_id = ?2 AND access = 'use'",
                    (app_id, user_id),
                )?;
                if removed > 0 {
                    audit(
                        &transaction,
                        now,
                        actor,
                        action::GRANT_CHANGED,
                        Some(app_id),
                        Some(user_id),
                        Some(AppAccess::Use.as_str()),
                        None,
                    )?;
                }
            }
        } else {
            if withdrawn {
                return Ok(Err(MemberRefusal::Disabled));
            }
            let added = transaction.execute(
                "INSERT INTO member_app_shares (app_id, username, shared_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (app_id, username) DO NOTHING",
                (app_id, username, now),
            )?;
            let count: i64 = transaction.query_row(
                "SELECT COUNT(*) FROM member_app_shares WHERE app_id = ?1",
                [app_id],
                |row| row.get(0),
            )?;
            if added > 0 && usize::try_from(count).unwrap_or(usize::MAX) > max_shares {
                return Ok(Err(MemberRefusal::SharesCap(max_shares)));
            }
            if let Some(user_id) = &holder {
                set_grant(&transaction, now, actor, app_id, user_id, AppAccess::Use)?;
            }
        }
        transaction.commit()?;
        Ok(Ok(()))
    }

    /// The live member app `app_id` (not deleted, not promoted), with its
    /// shares.
    pub fn member_app(&self, app_id: &str) -> Result<Option<MemberApp>, StoreError> {
        let apps = self.member_apps_where(" AND m.app_id = ?1", app_id)?;
        Ok(apps.into_iter().next())
    }

    /// Every live member app by `author_id`, or every one (moderation) with
    /// `None`, by id.
    pub fn member_apps(&self, author_id: Option<&str>) -> Result<Vec<MemberApp>, StoreError> {
        match author_id {
            Some(author) => self.member_apps_where(" AND m.author_id = ?1", author),
            None => self.member_apps_where(" AND ?1 = ?1", ""),
        }
    }

    fn member_apps_where(&self, filter: &str, value: &str) -> Result<Vec<MemberApp>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare(&format!("{LISTED}{filter} ORDER BY m.app_id"))?;
        let mut apps: Vec<MemberApp> = statement
            .query_map([value], listed)?
            .collect::<Result<_, _>>()?;
        // The names the author shared it with, and anyone else holding `use`
        // (the operator's CLI): never a sign of which names have accounts.
        let mut shares = connection.prepare_cached(
            "SELECT username FROM member_app_shares WHERE app_id = ?1
             UNION
             SELECT lower(u.username) FROM grants g JOIN users u ON u.id = g.user_id
             WHERE g.app_id = ?1 AND g.access = 'use'
             ORDER BY 1",
        )?;
        for app in &mut apps {
            app.shares = shares
                .query_map([&app.id], |row| row.get(0))?
                .collect::<Result<_, _>>()?;
        }
        Ok(apps)
    }

    /// The current files of every live member app, by id: what the catalogue
    /// validates and serves (their bytes are checked against their address).
    pub fn member_sources(&self) -> Result<BTreeMap<String, Files>, StoreError> {
        self.member_sources_of(None)
    }

    /// The live member app `app_id`'s files, as [`Store::member_sources`]
    /// gives them; `None` when it is not a live member app (deleted,
    /// promoted, or never one).
    pub fn member_source(&self, app_id: &str) -> Result<Option<Files>, StoreError> {
        Ok(self.member_sources_of(Some(app_id))?.remove(app_id))
    }

    /// The member apps whose deploys, deletions or promotions were audited
    /// after audit row `after`, and the newest audit row now: how a
    /// studio-core replica learns what another changed. Audit rows are
    /// numbered in commit order (one writer at a time on both backends),
    /// so nothing committed is skipped.
    pub fn member_changes_since(&self, after: i64) -> Result<(i64, BTreeSet<String>), StoreError> {
        let connection = self.connection()?;
        let newest: i64 = connection.query_row(
            "SELECT CAST(coalesce(max(id), 0) AS BIGINT) FROM authorization_audit_log",
            (),
            |row| row.get(0),
        )?;
        let apps = connection
            .query_map(
                "SELECT DISTINCT app_id FROM authorization_audit_log
                 WHERE id > ?1 AND id <= ?2 AND app_id IS NOT NULL
                   AND action IN (?3, ?4, ?5)",
                (
                    after,
                    newest,
                    member_action::MEMBER_APP_DEPLOYED,
                    member_action::MEMBER_APP_DELETED,
                    member_action::MEMBER_APP_PROMOTED,
                ),
                |row| row.get::<_, String>(0),
            )?
            .collect::<Result<_, _>>()?;
        Ok((newest, apps))
    }

    fn member_sources_of(
        &self,
        app_id: Option<&str>,
    ) -> Result<BTreeMap<String, Files>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare(
            "SELECT m.app_id, f.path, f.sha256, b.content
             FROM member_apps m
             JOIN app_revisions r ON r.app_id = m.app_id AND r.revision = m.revision
             JOIN app_revision_files f ON f.revision_id = r.id
             JOIN revision_blobs b ON b.sha256 = f.sha256
             WHERE m.deleted_at IS NULL AND m.promoted_at IS NULL
               AND (CAST(?1 AS TEXT) IS NULL OR m.app_id = ?1)
             ORDER BY m.app_id, f.path",
        )?;
        let mut sources: BTreeMap<String, Files> = BTreeMap::new();
        let rows = statement.query_map((app_id,), |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, Vec<u8>>(3)?,
            ))
        })?;
        for row in rows {
            let (app, path, sha256, bytes) = row?;
            if hex::encode(Sha256::digest(&bytes)) != sha256 {
                return Err(StoreError::Database(format!(
                    "a file of the member app {app} does not match its sha256"
                )));
            }
            sources.entry(app).or_default().push((path, bytes));
        }
        Ok(sources)
    }

    /// Deletes the live member app `app_id`: it leaves every list and
    /// catalogue at once (withdrawn, package deleted), what the ledger kept of
    /// it is reclaimed (see the module), so are its app chat conversations,
    /// its grants and audit stay and its id is never reused. `false` when
    /// there is no such live app.
    pub fn delete_member_app(&self, app_id: &str, actor: &str) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let Some((_, revision, _)) = live(&transaction, app_id)? else {
            return Ok(false);
        };
        transaction.execute(
            "UPDATE member_apps SET deleted_at = ?2 WHERE app_id = ?1",
            (app_id, now),
        )?;
        transaction.execute("DELETE FROM member_app_shares WHERE app_id = ?1", [app_id])?;
        reclaim(&transaction, app_id)?;
        crate::app_chat::forget_app(&transaction, app_id)?;
        transaction.execute(
            "UPDATE app_registry SET withdrawn_at = COALESCE(withdrawn_at, ?2),
                withdrawn_by = COALESCE(withdrawn_by, ?3), package_deleted_at = ?2
             WHERE app_id = ?1",
            (app_id, now, actor),
        )?;
        audit(
            &transaction,
            now,
            actor,
            member_action::MEMBER_APP_DELETED,
            Some(app_id),
            None,
            Some(&revision),
            None,
        )?;
        transaction.commit()?;
        Ok(true)
    }

    /// Reclaims what the ledger still keeps of deleted member apps (deleted
    /// before deletion reclaimed it): at boot. Returns how many apps had some.
    pub fn reclaim_deleted_member_apps(&self) -> Result<usize, StoreError> {
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let apps: Vec<String> = {
            let mut statement = transaction.prepare(
                "SELECT m.app_id FROM member_apps m WHERE m.deleted_at IS NOT NULL
                 AND (EXISTS (SELECT 1 FROM app_revisions r WHERE r.app_id = m.app_id)
                      OR EXISTS (SELECT 1 FROM app_drafts d WHERE d.app_id = m.app_id))",
            )?;
            statement
                .query_map((), |row| row.get(0))?
                .collect::<Result<_, _>>()?
        };
        for app_id in &apps {
            reclaim(&transaction, app_id)?;
        }
        transaction.commit()?;
        Ok(apps.len())
    }

    /// Moves the live member app `app_id` into the catalogue tier: it stops
    /// being a member app (its package is then the one written under
    /// `DOCS_ROOT/apps`), and, as at a catalogue app's first discovery,
    /// every admin and staff user gains `manage`. `false` when there is no
    /// such live app.
    pub fn promote_member_app(&self, app_id: &str, actor: &str) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let Some((_, revision, _)) = live(&transaction, app_id)? else {
            return Ok(false);
        };
        transaction.execute(
            "UPDATE member_apps SET promoted_at = ?2 WHERE app_id = ?1",
            (app_id, now),
        )?;
        let privileged: Vec<String> = {
            let mut statement = transaction.prepare(
                "SELECT id FROM users WHERE role IN ('admin', 'staff')
                 AND id NOT IN (SELECT user_id FROM grants WHERE app_id = ?1 AND access = 'manage')
                 ORDER BY username",
            )?;
            statement
                .query_map([app_id], |row| row.get(0))?
                .collect::<Result<_, _>>()?
        };
        for user_id in &privileged {
            set_grant(&transaction, now, actor, app_id, user_id, AppAccess::Manage)?;
        }
        audit(
            &transaction,
            now,
            actor,
            member_action::MEMBER_APP_PROMOTED,
            Some(app_id),
            None,
            Some(&revision),
            None,
        )?;
        transaction.commit()?;
        Ok(true)
    }
}
/// The one grant rule of a live member app: its author always manages it and
/// nobody else ever does, and only the author (or the operator's CLI, or the
/// platform itself) shares it: a `use` grant is someone reading the app's
/// source and owning rows in it, which an admin or staff member does not
/// decide for the author. `Err` names the refusal for `actor`'s change of
/// `user_id`'s grant to `access` (`None`: revoked); `Ok` for any other app.
pub(super) fn check_member_grant(
    transaction: &Tx<'_>,
    app_id: &str,
    user_id: &str,
    access: Option<AppAccess>,
    actor: &str,
) -> Result<Result<(), StoreError>, StoreError> {
    let Some((author, _, _)) = live(transaction, app_id)? else {
        return Ok(Ok(()));
    };
    let is_author = author.as_deref() == Some(user_id);
    let by_author_or_operator =
        author.as_deref() == Some(actor) || actor == ACTOR_OPERATOR || actor == ACTOR_SYSTEM;
    Ok(match (is_author, access) {
        (true, Some(AppAccess::Manage)) => Ok(()),
        (false, Some(AppAccess::Use) | None) if by_author_or_operator => Ok(()),
        (true, _) => Err(StoreError::MemberAppGrant(
            "the author of a member app always manages it",
        )),
        (false, Some(AppAccess::Manage)) => Err(StoreError::MemberAppGrant(
            "only the author manages a member app; share it with use",
        )),
        (false, _) => Err(StoreError::MemberAppGrant(
            "only its author shares a member app (App Studio's Share); a moderator can \
             disable or delete it",
        )),
    })
}
