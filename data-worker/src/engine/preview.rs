//! Preview scratch data: a draft of an app runs against one previewer's
//! scratch copy of the app's data with the draft's own migrations applied, so
//! a preview can never touch a live record, nor show its previewer a row they
//! cannot read on the live app.
//!
//! A preview is named by its id (32 lowercase hex, chosen by studio-core),
//! and each person previewing it gets a copy of their own, at
//! `APP_DATA_ROOT/.previews/<app_id>/<preview>-<previewer>-<tag>.sqlite`:
//! `<previewer>` is the first 16 hex of the sha256 of their user id, `<tag>`
//! the first 16 hex of the sha256 of the draft contract's hash and of the
//! [`PreviewScope`] (folders mode 0700, files 0600, see [`super::files`]).
//! On first use of (app, preview, previewer, contract, scope) the live file's
//! one committed state is copied in with `VACUUM INTO` (the same copy helper
//! an app data backup uses; read-only on the live file, under the live slot's
//! lock) or, with no live file, the preview starts from an empty file.
//!
//! Before anything of the draft touches the copy, [`keep_visible`] takes out
//! every row the previewer may not read under the live policy, which
//! studio-core sends as the scope (see `sasha_contract::data::PreviewScope`):
//! of an owner-scoped table only the rows naming the previewer, of a table
//! the live contract does not declare nothing; of the platform's tables only
//! the previewer's idempotency receipts and the audit entries whose row
//! images are of rows they may read (the others, the app's cursor key among
//! them, stay as live has them). Deleted content is overwritten
//! (`secure_delete`). Only then is the copy opened through the engine's
//! ordinary hardened `open()`: the draft's pending migrations are applied in
//! one transaction (a failure is `APP_MIGRATION_FAILED` and removes the fresh
//! copy), and the same authorizer, limits, deadlines and statement cache
//! apply. Receipts, idempotency keys and audit rows a preview writes stay in
//! the copy.
//!
//! The connection is kept in the engine's slot map under
//! `preview:<app_id>:<preview>:<previewer>`, a key no app id can spell (app
//! ids hold no `:`), so a preview never shares a live slot and at most one
//! connection is open per copy. Another contract or scope for the same
//! previewer (the draft changed, the live policy or their grant changed)
//! closes that connection, deletes their older scratch files (with their
//! `-wal`/`-shm`) and copies live afresh. After a restart a scratch file whose
//! name matches is opened again as it was left. Scratch copies are this
//! worker's own, never replicated: on the worker an app moves to, a preview
//! starts again from a fresh copy of live.
//!
//! Lock order: a preview slot, then (only while copying) the app's live slot;
//! nothing holds a live slot while taking a preview slot.
//!
//! This module must never open the live file for writing on behalf of a
//! preview, nor run a migration, receipt or audit write against it: the live
//! file is only ever the read-only source of a copy. And it must never let
//! the draft see the copy before [`keep_visible`] has run.

use std::path::{Path, PathBuf};
use std::sync::PoisonError;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use sasha_contract::data::{
    DataContract, PreviewScope, RowScope, is_identifier, is_platform_name, is_sqlite_internal,
};
use sasha_proto::{AppError, ErrorCode};
use sha2::{Digest as _, Sha256};

use super::{
    Approval, CopyError, Engine, Handle, copy_committed_state, open_applying, sql_error,
    valid_app_id,
};

/// The folder below `APP_DATA_ROOT` that keeps every app's previews.
pub const PREVIEW_DIR: &str = ".previews";

/// One person's preview of a draft: the preview id, who previews (the
/// actor of the call), and what they may read of the live data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preview<'a> {
    /// 32 lowercase hex characters.
    pub id: &'a str,
    /// The previewer's user id.
    pub previewer: &'a str,
    pub scope: &'a PreviewScope,
}

/// The first 16 hex of the sha256 of `parts`, each followed by a newline:
/// always safe in a file name and a slot key.
fn digest16(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update(b"\n");
    }
    hex::encode(hasher.finalize())[..16].to_owned()
}

/// The previewer's part of slot keys and file names.
fn previewer_tag(previewer: &str) -> String {
    digest16(&[previewer])
}

/// The engine slot key of one previewer's copy; app ids hold no `:`, so it
/// never equals an app id (a live slot's key).
pub(super) fn slot_key(app_id: &str, preview: &str, previewer: &str) -> String {
    format!(
        "{}{}",
        preview_key_prefix(app_id, preview),
        previewer_tag(previewer)
    )
}

/// The start of the slot keys of every copy of `preview` (empty: of every
/// preview of the app).
fn preview_key_prefix(app_id: &str, preview: &str) -> String {
    if preview.is_empty() {
        format!("preview:{app_id}:")
    } else {
        format!("preview:{app_id}:{preview}:")
    }
}

use sasha_contract::data::is_preview_id;

fn check_preview_id(preview: &str) -> Result<(), AppError> {
    if is_preview_id(preview) {
        Ok(())
    } else {
        Err(AppError::new(
            ErrorCode::InputInvalid,
            "the preview id must be exactly 32 lowercase hexadecimal characters",
        ))
    }
}

/// The scratch file's name for (preview, previewer, contract hash, scope).
fn scratch_name(preview: &Preview<'_>, contract_hash: &str) -> String {
    format!(
        "{}-{}-{}.sqlite",
        preview.id,
        previewer_tag(preview.previewer),
        digest16(&[contract_hash, &preview.scope.fingerprint()])
    )
}

fn unavailable(what: &str, app_id: &str, error: &dyn std::fmt::Display) -> AppError {
    let failure = AppError::new(
        ErrorCode::DatabaseUnavailable,
        "the preview's data is unavailable, try again",
    );
    tracing::error!(diagnostic_id = %failure.diagnostic_id, app_id, %error, "data engine: preview: {what}");
    failure
}

/// Removes the files in `dir` whose names start with `prefix` (a preview's
/// or one previewer's scratch files and their `-wal`/`-shm`), except those of
/// the scratch file named `keep`. Returns how many it removed; a missing
/// folder is 0.
fn remove_preview_files(dir: &Path, prefix: &str, keep: Option<&str>) -> std::io::Result<u32> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(error),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(prefix) {
            continue;
        }
        if let Some(keep) = keep {
            let kept = [
                keep.to_owned(),
                format!("{keep}-wal"),
                format!("{keep}-shm"),
            ];
            if kept.iter().any(|kept| kept == name) {
                continue;
            }
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) => removed += 1,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Ok(removed)
}

/// Takes out of the fresh scratch copy at `path` (no connection open) every
/// row `previewer` may not read under the live policy `scope`, in one
/// transaction, with deleted content overwritten:
///
/// - an app table `scope` keeps every row of: kept;
/// - one it keeps the owner's rows of: the rows whose owner field is not
///   exactly the previewer's id (NULL included) go, and all of them when the
///   field is not a column of the table;
/// - any other app table (the live contract does not declare it): emptied;
/// - `_sasha_idempotency`: only the previewer's receipts stay (a receipt
///   replays its reply, which may hold rows);
/// - `_sasha_audit`: an entry stays when its table is kept whole, or when
///   each row image it holds (before, after) is a row the previewer owns;
///   its append-only triggers are dropped for this and put back by the
///   setup every open runs;
/// - every other platform table (the migrations applied, the read policy,
///   the cursor key): kept as live has it.
///
/// Foreign keys are not enforced here: a kept row may refer to one that went.
fn keep_visible(path: &Path, scope: &PreviewScope, previewer: &str) -> rusqlite::Result<()> {
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    conn.execute_batch("PRAGMA foreign_keys = OFF; PRAGMA secure_delete = ON;")?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let names = |sql: &str| -> rusqlite::Result<Vec<String>> {
        let mut statement = tx.prepare(sql)?;
        let rows = statement.query_map([], |row| row.get(0))?;
        rows.collect()
    };
    let tables = names("SELECT name FROM main.sqlite_schema WHERE type = 'table' ORDER BY name")?;
    let has_column = |table: &str, column: &str| -> rusqlite::Result<bool> {
        tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1, 'main') WHERE name = ?2 COLLATE NOCASE)",
            [table, column],
            |row| row.get(0),
        )
    };
    // An owner field the copy can filter by: a plain identifier that is a column.
    let owner_column = |table: &str, field: &str| -> rusqlite::Result<Option<String>> {
        Ok((is_identifier(field) && has_column(table, field)?).then(|| field.to_owned()))
    };
    for table in &tables {
        if is_sqlite_internal(table) || is_platform_name(table) {
            continue;
        }
        let quoted = quote(table);
        match scope.table(table) {
            Some(RowScope::Every) => {}
            Some(RowScope::OwnedBy(field)) => match owner_column(table, field)? {
                Some(field) => {
                    tx.execute(
                        &format!(
                            "DELETE FROM main.{quoted} WHERE {} IS NOT ?1",
                            quote(&field)
                        ),
                        [previewer],
                    )?;
                }
                None => {
                    tx.execute(&format!("DELETE FROM main.{quoted}"), [])?;
                }
            },
            None => {
                tx.execute(&format!("DELETE FROM main.{quoted}"), [])?;
            }
        }
    }
    let platform = |name: &str| tables.iter().any(|table| table == name);
    if platform("_sasha_idempotency") {
        tx.execute(
            "DELETE FROM main._sasha_idempotency WHERE actor IS NOT ?1",
            [previewer],
        )?;
    }
    if platform("_sasha_audit") {
        for trigger in names(
            "SELECT name FROM main.sqlite_schema WHERE type = 'trigger' AND tbl_name = '_sasha_audit'",
        )? {
            tx.execute_batch(&format!("DROP TRIGGER main.{}", quote(&trigger)))?;
        }
        for table in names("SELECT DISTINCT table_name FROM main._sasha_audit")? {
            let owner = match scope.table(&table) {
                Some(RowScope::Every) => continue,
                Some(RowScope::OwnedBy(field)) if is_identifier(field) => Some(field.as_str()),
                _ => None,
            };
            match owner {
                // Kept when every row image names the previewer, as the
                // history of an owner's row is read.
                Some(field) => {
                    tx.execute(
                        &format!(
                            "DELETE FROM main._sasha_audit WHERE table_name = ?1 AND NOT {}",
                            super::history::images_owned_by("?2", "?3")
                        ),
                        [
                            table.as_str(),
                            &super::history::owner_path(field),
                            previewer,
                        ],
                    )?;
                }
                None => {
                    tx.execute(
                        "DELETE FROM main._sasha_audit WHERE table_name = ?1",
                        [table.as_str()],
                    )?;
                }
            }
        }
    }
    tx.commit()
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Engine {
    /// `APP_DATA_ROOT/.previews/<app_id>` of a (valid) app id.
    fn preview_dir(&self, app_id: &str) -> PathBuf {
        self.inner.root.join(PREVIEW_DIR).join(app_id)
    }

    /// Runs `f` on the previewer's connection to their copy, making a fresh
    /// scratch copy and opening it for `contract` first when they have none
    /// for this contract and scope. `app_id` is already valid.
    pub(super) fn with_preview_handle<R>(
        &self,
        app_id: &str,
        preview: Preview<'_>,
        contract: &DataContract,
        f: impl FnOnce(&mut Handle) -> Result<R, AppError>,
    ) -> Result<R, AppError> {
        check_preview_id(preview.id)?;
        if preview.previewer.is_empty() {
            return Err(AppError::new(
                ErrorCode::InputInvalid,
                "a preview is always someone's: the request names no previewer",
            ));
        }
        let name = scratch_name(&preview, &contract.hash);
        let slot = self.slot(&slot_key(app_id, preview.id, preview.previewer));
        let mut slot = slot.handle.lock().unwrap_or_else(PoisonError::into_inner);
        if slot
            .as_ref()
            .is_some_and(|handle| handle.scratch.as_deref() != Some(name.as_str()))
        {
            // The draft or the scope changed: close (checkpointing) before its files go.
            drop(slot.take());
        }
        if slot.is_none() {
            let mut handle = self.open_preview(app_id, &preview, &name, contract)?;
            handle.scratch = Some(name);
            *slot = Some(handle);
        }
        match slot.as_mut() {
            Some(handle) => f(handle),
            None => Err(super::internal("preview handle missing after open")),
        }
    }

    /// Opens the previewer's scratch file `name` for `contract`, copying
    /// live into it and keeping only what they may read first when it does
    /// not exist; removes their other scratch files of this preview. The
    /// caller holds the copy's slot, which is empty.
    fn open_preview(
        &self,
        app_id: &str,
        preview: &Preview<'_>,
        name: &str,
        contract: &DataContract,
    ) -> Result<Handle, AppError> {
        let dir = self.preview_dir(app_id);
        super::files::private_folder(&self.inner.root.join(PREVIEW_DIR))
            .and_then(|()| super::files::private_folder(&dir))
            .map_err(|error| unavailable("cannot create the preview folder", app_id, &error))?;
        let path = dir.join(name);
        let theirs = format!("{}-{}-", preview.id, previewer_tag(preview.previewer));
        remove_preview_files(&dir, &theirs, Some(name))
            .map_err(|error| unavailable("cannot remove an older scratch file", app_id, &error))?;
        let fresh = std::fs::symlink_metadata(&path).is_err();
        if fresh {
            // A stale -wal/-shm without its file would be replayed into the copy.
            remove_preview_files(&dir, &theirs, None).map_err(|error| {
                unavailable("cannot remove a stale scratch file", app_id, &error)
            })?;
            let copied = self.copy_live_into(app_id, &path).and_then(|copied| {
                if !copied {
                    return Ok(());
                }
                keep_visible(&path, preview.scope, preview.previewer).map_err(|error| {
                    unavailable("cannot keep only the previewer's rows", app_id, &error)
                })
            });
            if let Err(error) = copied {
                let _ = remove_preview_files(&dir, &theirs, None);
                return Err(error);
            }
        }
        // The copy holds only what the previewer reads live, so the draft's
        // contract runs on it whatever it widens (see `Approval::PreviewCopy`).
        let opened = open_applying(
            &path,
            &self.inner.root,
            contract,
            Approval::PreviewCopy,
            super::Publisher::default(),
        );
        match opened.map(|(handle, _)| handle) {
            Ok(handle) => {
                if fresh {
                    tracing::info!(
                        app_id,
                        preview = preview.id,
                        "data engine: preview copied from live"
                    );
                }
                Ok(handle)
            }
            Err(error) => {
                if fresh {
                    let _ = remove_preview_files(&dir, &theirs, None);
                }
                Err(error)
            }
        }
    }

    /// Copies the live file's one committed state into `target` (absent) and
    /// says so, or does nothing when the app has no live file (the preview
    /// then starts empty). The live file is opened read-only, under the live
    /// slot's lock so it is not removed meanwhile.
    fn copy_live_into(&self, app_id: &str, target: &Path) -> Result<bool, AppError> {
        let live_slot = self.slot(app_id);
        let _live = live_slot
            .handle
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let live = self.live_path(app_id);
        if std::fs::symlink_metadata(&live).is_err() {
            return Ok(false);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        copy_committed_state(&live, flags, target).map_err(|error| match error {
            CopyError::Sqlite(error) => sql_error(error),
            other => unavailable("cannot copy the live data", app_id, &other),
        })?;
        Ok(true)
    }

    /// Removes one preview's scratch files, every previewer's (`preview`
    /// non-empty), or every preview of the app (`preview` empty), closing
    /// their connections first; gives back how many files it removed (none,
    /// or no folder, is 0).
    pub fn remove_previews(&self, app_id: &str, preview: &str) -> Result<u32, AppError> {
        if !valid_app_id(app_id) {
            return Err(AppError::from_code(ErrorCode::NotFound));
        }
        let dir = self.preview_dir(app_id);
        if !preview.is_empty() {
            check_preview_id(preview)?;
        }
        // Every open copy of these previews, whoever's.
        let prefix = preview_key_prefix(app_id, preview);
        let open: Vec<String> = self
            .inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .filter(|key| key.starts_with(&prefix))
            .cloned()
            .collect();
        let previews: Vec<String> = if preview.is_empty() {
            let mut ids: std::collections::BTreeSet<String> = open
                .iter()
                .filter_map(|key| key.strip_prefix(&prefix)?.split(':').next())
                .map(str::to_owned)
                .collect();
            match std::fs::read_dir(&dir) {
                Ok(entries) => {
                    for entry in entries.flatten() {
                        if let Some(id) = entry
                            .file_name()
                            .to_str()
                            .and_then(|name| name.get(..sasha_contract::data::PREVIEW_ID_CHARS))
                            && is_preview_id(id)
                        {
                            ids.insert(id.to_owned());
                        }
                    }
                }
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(unavailable("cannot list the previews", app_id, &error)),
            }
            ids.into_iter().collect()
        } else {
            vec![preview.to_owned()]
        };
        for key in &open {
            let slot = self.slot(key);
            let mut slot = slot.handle.lock().unwrap_or_else(PoisonError::into_inner);
            drop(slot.take());
        }
        let mut removed = 0;
        for id in &previews {
            removed += remove_preview_files(&dir, &format!("{id}-"), None)
                .map_err(|error| unavailable("cannot remove a scratch file", app_id, &error))?;
        }
        if preview.is_empty() {
            // Only an empty folder goes; one a concurrent preview just filled stays.
            let _ = std::fs::remove_dir(&dir);
        }
        if removed > 0 {
            tracing::info!(app_id, removed, "data engine: preview files removed");
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests;
