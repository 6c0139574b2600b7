//! Drafts: one copy-on-write working set per app (migration 8). A draft
//! begins as the live package's files and is changed file by file; its
//! files are rows naming content-addressed blobs of the revision ledger
//! (`revision_blobs`), so a draft shares every unchanged byte with the live
//! revision and with every other revision. studio-core's `drafts` decides who may
//! do what and validates; this module only stores, compares and swaps.
//!
//! A change is one IMMEDIATE transaction that reads the file's current
//! version, lets the caller's rule decide (the source tools' rules, so of
//! two writers holding the same expectedVersion exactly one succeeds), and
//! writes the result. Ending a draft (publish or discard) removes its rows
//! and every blob no revision and no other draft still references; the
//! ledger's retention never removes a blob a draft references.
//!
//! What it must never do: serve a file whose bytes do not match its
//! address, or touch the live package folder.

use crate::db::{OptionalExtension as _, Sql, Tx};
use sha2::{Digest as _, Sha256};

use super::{Store, StoreError, audit};

/// Audit actions of drafts.
pub mod draft_action {
    /// A draft began: `before` the live revision it began from.
    pub const DRAFT_STARTED: &str = "app-draft.started";
    /// A draft's file changed: `subject` the path, `before`/`after` the
    /// content hashes (absent: no file).
    pub const DRAFT_CHANGED: &str = "app-draft.changed";
    /// A draft was published: `before` the live revision it replaced,
    /// `after` the new one, `subject` how it was approved.
    pub const DRAFT_PUBLISHED: &str = "app-draft.published";
    /// A draft was discarded: `before` its base revision.
    pub const DRAFT_DISCARDED: &str = "app-draft.discarded";
}

/// One app's draft.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    pub app_id: String,
    /// 32 lowercase hex digits; names the draft's preview data.
    pub preview_id: String,
    /// The live revision the draft began from ("" when none validated).
    pub base_revision: String,
    pub created_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One file of a draft: its path, content address and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftFile {
    pub path: String,
    pub sha256: String,
    pub size: u64,
}

/// The file a draft change finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    /// sha256 hex of the bytes (the source tools' version).
    pub version: String,
    pub bytes: Vec<u8>,
}

/// What a draft change's rule sees of the draft besides the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftShape {
    /// Every path of the draft with its size.
    pub files: Vec<(String, u64)>,
}

/// What a change rule decides: the file's new bytes, or `None` to delete it.
pub type Decision = Option<Vec<u8>>;

/// A change's content hashes before and after (`None`: no file).
pub type Versions = (Option<String>, Option<String>);

/// How a draft ended, for its audit row: `action` with `subject`, `before`
/// and `after` as [`draft_action`] documents them.
#[derive(Debug, Clone, Copy)]
pub struct Ending<'a> {
    pub action: &'a str,
    pub subject: Option<&'a str>,
    pub before: Option<&'a str>,
    pub after: Option<&'a str>,
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn read_draft(transaction: &Tx<'_>, app_id: &str) -> Result<Option<Draft>, StoreError> {
    Ok(transaction
        .query_row(
            "SELECT app_id, preview_id, base_revision, created_by, created_at, updated_at
             FROM app_drafts WHERE app_id = ?1",
            [app_id],
            |row| {
                Ok(Draft {
                    app_id: row.get(0)?,
                    preview_id: row.get(1)?,
                    base_revision: row.get(2)?,
                    created_by: row.get(3)?,
                    created_at: row.get(4)?,
                    updated_at: row.get(5)?,
                })
            },
        )
        .optional()?)
}

pub(super) fn put_blob(transaction: &Tx<'_>, bytes: &[u8]) -> Result<String, StoreError> {
    let sha256 = sha256_hex(bytes);
    transaction.execute(
        "INSERT INTO revision_blobs (sha256, content) VALUES (?1, ?2)
         ON CONFLICT (sha256) DO NOTHING",
        (&sha256, bytes),
    )?;
    Ok(sha256)
}

/// Removes the blobs among `blobs` that no revision, no draft and no package
/// head references.
pub(super) fn drop_unreferenced_blobs(
    transaction: &Tx<'_>,
    blobs: &[String],
) -> Result<(), StoreError> {
    for sha256 in blobs {
        transaction.execute(
            "DELETE FROM revision_blobs WHERE sha256 = ?1
             AND NOT EXISTS (SELECT 1 FROM app_revision_files WHERE sha256 = ?1)
             AND NOT EXISTS (SELECT 1 FROM app_draft_files WHERE sha256 = ?1)
             AND NOT EXISTS (SELECT 1 FROM package_head_files WHERE sha256 = ?1)",
            [sha256],
        )?;
    }
    Ok(())
}

fn size_i64(size: usize) -> i64 {
    i64::try_from(size).unwrap_or(i64::MAX)
}

impl Store {
    /// The app's draft, if it has one.
    pub fn draft(&self, app_id: &str) -> Result<Option<Draft>, StoreError> {
        let mut connection = self.connection()?;
        let transaction = connection.read_transaction()?;
        read_draft(&transaction, app_id)
    }

    /// Starts the app's draft from `files` (the live package's), begun from
    /// `base_revision`, unless it has one: `(draft, true)` when this call
    /// started it. Refuses an app that was never registered.
    pub fn start_draft(
        &self,
        app_id: &str,
        user_id: &str,
        base_revision: &str,
        files: &[(String, Vec<u8>)],
    ) -> Result<(Draft, bool), StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let registered: bool = transaction.query_row(
            "SELECT EXISTS (SELECT 1 FROM app_registry WHERE app_id = ?1)",
            [app_id],
            |row| row.get(0),
        )?;
        if !registered {
            return Err(StoreError::UnknownApp);
        }
        if let Some(draft) = read_draft(&transaction, app_id)? {
            return Ok((draft, false));
        }
        let preview_id = hex::encode(rand::random::<
            [u8; sasha_contract::data::PREVIEW_ID_CHARS / 2],
        >());
        transaction.execute(
            "INSERT INTO app_drafts (app_id, preview_id, base_revision, created_by, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
            (app_id, &preview_id, base_revision, user_id, now),
        )?;
        for (path, bytes) in files {
            let sha256 = put_blob(&transaction, bytes)?;
            transaction.execute(
                "INSERT INTO app_draft_files (app_id, path, sha256, size) VALUES (?1, ?2, ?3, ?4)",
                (app_id, path, &sha256, size_i64(bytes.len())),
            )?;
        }
        audit(
            &transaction,
            now,
            user_id,
            draft_action::DRAFT_STARTED,
            Some(app_id),
            None,
            Some(base_revision).filter(|revision| !revision.is_empty()),
            None,
        )?;
        let draft = read_draft(&transaction, app_id)?
            .ok_or_else(|| StoreError::Database("the draft just written is missing".into()))?;
        transaction.commit()?;
        Ok((draft, true))
    }

    /// The draft's files, by path.
    pub fn draft_files(&self, app_id: &str) -> Result<Vec<DraftFile>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare_cached(
            "SELECT path, sha256, size FROM app_draft_files WHERE app_id = ?1 ORDER BY path",
        )?;
        let files = statement
            .query_map([app_id], |row| {
                Ok(DraftFile {
                    path: row.get(0)?,
                    sha256: row.get(1)?,
                    size: row.get::<_, i64>(2)?.try_into().unwrap_or(0),
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(files)
    }

    /// Every file of the draft with its bytes, by path, each checked against
    /// its address.
    pub fn draft_contents(&self, app_id: &str) -> Result<Vec<(DraftFile, Vec<u8>)>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare_cached(
            "SELECT f.path, f.sha256, f.size, b.content FROM app_draft_files f
             JOIN revision_blobs b ON b.sha256 = f.sha256
             WHERE f.app_id = ?1 ORDER BY f.path",
        )?;
        let rows: Vec<(DraftFile, Vec<u8>)> = statement
            .query_map([app_id], |row| {
                Ok((
                    DraftFile {
                        path: row.get(0)?,
                        sha256: row.get(1)?,
                        size: row.get::<_, i64>(2)?.try_into().unwrap_or(0),
                    },
                    row.get(3)?,
                ))
            })?
            .collect::<Result<_, _>>()?;
        for (file, bytes) in &rows {
            if sha256_hex(bytes) != file.sha256 {
                return Err(StoreError::Database(format!(
                    "the stored bytes of {} do not match their address",
                    file.path
                )));
            }
        }
        Ok(rows)
    }

    /// Changes one file of the app's draft: in one IMMEDIATE transaction,
    /// `rule` sees the file as it is now (None: absent) and the draft's
    /// shape, and decides its new bytes (or its deletion) or refuses with
    /// its own error, which is the answer (`Ok(Err(..))`). Audited as
    /// `app-draft.changed`. `None` when the app has no draft.
    pub fn change_draft_file<E>(
        &self,
        app_id: &str,
        path: &str,
        user_id: &str,
        rule: impl FnOnce(Option<&Current>, &DraftShape) -> Result<Decision, E>,
    ) -> Result<Option<Result<Versions, E>>, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        if read_draft(&transaction, app_id)?.is_none() {
            return Ok(None);
        }
        let current: Option<Current> = transaction
            .query_row(
                "SELECT f.sha256, b.content FROM app_draft_files f
                 JOIN revision_blobs b ON b.sha256 = f.sha256
                 WHERE f.app_id = ?1 AND f.path = ?2",
                (app_id, path),
                |row| {
                    Ok(Current {
                        version: row.get(0)?,
                        bytes: row.get(1)?,
                    })
                },
            )
            .optional()?;
        let shape = DraftShape {
            files: {
                let mut statement = transaction
                    .prepare_cached("SELECT path, size FROM app_draft_files WHERE app_id = ?1")?;
                statement
                    .query_map([app_id], |row| {
                        Ok((row.get(0)?, row.get::<_, i64>(1)?.try_into().unwrap_or(0)))
                    })?
                    .collect::<Result<_, _>>()?
            },
        };
        let decision = match rule(current.as_ref(), &shape) {
            Ok(decision) => decision,
            Err(refusal) => return Ok(Some(Err(refusal))),
        };
        let before = current.map(|file| file.version);
        let after = match &decision {
            Some(bytes) => {
                let sha256 = put_blob(&transaction, bytes)?;
                transaction.execute(
                    "INSERT INTO app_draft_files (app_id, path, sha256, size) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (app_id, path) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size",
                    (app_id, path, &sha256, size_i64(bytes.len())),
                )?;
                Some(sha256)
            }
            None => {
                transaction.execute(
                    "DELETE FROM app_draft_files WHERE app_id = ?1 AND path = ?2",
                    (app_id, path),
                )?;
                None
            }
        };
        if let Some(old) = &before {
            drop_unreferenced_blobs(&transaction, std::slice::from_ref(old))?;
        }
        transaction.execute(
            "UPDATE app_drafts SET updated_at = ?2 WHERE app_id = ?1",
            (app_id, now),
        )?;
        audit(
            &transaction,
            now,
            user_id,
            draft_action::DRAFT_CHANGED,
            Some(app_id),
            Some(path),
            before.as_deref(),
            after.as_deref(),
        )?;
        transaction.commit()?;
        Ok(Some(Ok((before, after))))
    }

    /// Ends the app's draft (published or discarded) if its preview id is
    /// still `preview_id`: removes its rows and the blobs nothing else
    /// references, and audits the `ending`. `false` when there was no such
    /// draft.
    pub fn end_draft(
        &self,
        app_id: &str,
        preview_id: &str,
        user_id: &str,
        ending: Ending<'_>,
    ) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        match read_draft(&transaction, app_id)? {
            Some(draft) if draft.preview_id == preview_id => {}
            _ => return Ok(false),
        }
        let blobs: Vec<String> = {
            let mut statement = transaction
                .prepare_cached("SELECT sha256 FROM app_draft_files WHERE app_id = ?1")?;
            statement
                .query_map([app_id], |row| row.get(0))?
                .collect::<Result<_, _>>()?
        };
        // The files go with the draft (ON DELETE CASCADE).
        transaction.execute("DELETE FROM app_drafts WHERE app_id = ?1", [app_id])?;
        drop_unreferenced_blobs(&transaction, &blobs)?;
        audit(
            &transaction,
            now,
            user_id,
            ending.action,
            Some(app_id),
            ending.subject,
            ending.before,
            ending.after,
        )?;
        transaction.commit()?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
