//! Preview scratch data: a draft of an app runs against a scratch copy of the
//! app's data with the draft's own migrations applied, so a preview can never
//! touch a live record.
//!
//! A preview is named by its id (32 lowercase hex, chosen by studio-core) and
//! lives at `APP_DATA_ROOT/.previews/<app_id>/<preview>-<tag>.sqlite`, where
//! `<tag>` is the first 16 hex of the draft contract's hash (folders mode
//! 0700). On first use of (app, preview, contract hash) the live file's one
//! committed state is copied in with `VACUUM INTO` (the same copy helper an
//! app data backup uses; read-only on the live file, under the live slot's
//! lock) or, with no live file, the preview starts from an empty file. The
//! scratch file is then opened through the engine's ordinary hardened
//! `open()`: the draft's pending migrations are applied in one
//! transaction (a failure is `APP_MIGRATION_FAILED` and removes the fresh
//! copy), and the same authorizer, limits, deadlines and statement cache
//! apply. Receipts, idempotency keys and audit rows a preview writes stay in
//! the scratch file.
//!
//! The connection is kept in the engine's slot map under
//! `preview:<app_id>:<preview>`, a key no app id can spell (app ids hold no
//! `:`), so a preview never shares a live slot and at most one connection is
//! open per (app, preview). The same preview with another contract hash (the
//! draft changed) closes that connection, deletes the preview's older scratch
//! files (with their `-wal`/`-shm`) and copies live afresh. After a restart a
//! scratch file whose tag matches is opened again as it was left.
//!
//! Lock order: a preview slot, then (only while copying) the app's live slot;
//! nothing holds a live slot while taking a preview slot.
//!
//! This module must never open the live file for writing on behalf of a
//! preview, nor run a migration, receipt or audit write against it: the live
//! file is only ever the read-only source of a copy.

use std::path::{Path, PathBuf};
use std::sync::PoisonError;

use rusqlite::OpenFlags;
use sasha_contract::data::DataContract;
use sasha_proto::{AppError, ErrorCode};
use sha2::{Digest as _, Sha256};

use super::{CopyError, Engine, Handle, copy_committed_state, open, sql_error, valid_app_id};

/// The folder below `APP_DATA_ROOT` that keeps every app's previews.
pub const PREVIEW_DIR: &str = ".previews";

/// The engine slot key of one preview; app ids hold no `:`, so it never
/// equals an app id (a live slot's key).
pub(super) fn slot_key(app_id: &str, preview: &str) -> String {
    format!("preview:{app_id}:{preview}")
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

/// The contract's file-name tag: the first 16 hex of its hash (a hash that
/// does not start with 16 lowercase hex, which the service never passes, is
/// hashed first so the tag is always safe in a file name).
fn hash_tag(hash: &str) -> String {
    let head = hash.get(..16).unwrap_or("");
    if head.len() == 16
        && head
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        head.to_owned()
    } else {
        hex::encode(Sha256::digest(hash.as_bytes()))[..16].to_owned()
    }
}

/// The scratch file's name for (preview, contract hash).
fn scratch_name(preview: &str, contract_hash: &str) -> String {
    format!("{preview}-{}.sqlite", hash_tag(contract_hash))
}

fn unavailable(what: &str, app_id: &str, error: &dyn std::fmt::Display) -> AppError {
    let failure = AppError::new(
        ErrorCode::DatabaseUnavailable,
        "the preview's data is unavailable, try again",
    );
    tracing::error!(diagnostic_id = %failure.diagnostic_id, app_id, %error, "data engine: preview: {what}");
    failure
}

/// Removes the files in `dir` that belong to `preview` (its scratch files and
/// their `-wal`/`-shm`), except those of the scratch file named `keep`.
/// Returns how many it removed; a missing folder is 0.
fn remove_preview_files(dir: &Path, preview: &str, keep: Option<&str>) -> std::io::Result<u32> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(error),
    };
    let prefix = format!("{preview}-");
    let mut removed = 0;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(&prefix) {
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

impl Engine {
    /// `APP_DATA_ROOT/.previews/<app_id>` of a (valid) app id.
    fn preview_dir(&self, app_id: &str) -> PathBuf {
        self.inner.root.join(PREVIEW_DIR).join(app_id)
    }

    /// Runs `f` on the preview's connection, making a fresh scratch copy and
    /// opening it for `contract` first when the preview has none for this
    /// contract hash. `app_id` is already valid.
    pub(super) fn with_preview_handle<R>(
        &self,
        app_id: &str,
        preview: &str,
        contract: &DataContract,
        f: impl FnOnce(&mut Handle) -> Result<R, AppError>,
    ) -> Result<R, AppError> {
        check_preview_id(preview)?;
        let slot = self.slot(&slot_key(app_id, preview));
        let mut slot = slot.handle.lock().unwrap_or_else(PoisonError::into_inner);
        if slot
            .as_ref()
            .is_some_and(|handle| handle.contract_hash != contract.hash)
        {
            // The draft changed: close (checkpointing) before its files go.
            drop(slot.take());
        }
        if slot.is_none() {
            *slot = Some(self.open_preview(app_id, preview, contract)?);
        }
        match slot.as_mut() {
            Some(handle) => f(handle),
            None => Err(super::internal("preview handle missing after open")),
        }
    }

    /// Opens the preview's scratch file for `contract`, copying live into it
    /// first when it does not exist; removes the preview's other scratch files.
    /// The caller holds the preview's slot, which is empty.
    fn open_preview(
        &self,
        app_id: &str,
        preview: &str,
        contract: &DataContract,
    ) -> Result<Handle, AppError> {
        let dir = self.preview_dir(app_id);
        super::files::private_folder(&self.inner.root.join(PREVIEW_DIR))
            .and_then(|()| super::files::private_folder(&dir))
            .map_err(|error| unavailable("cannot create the preview folder", app_id, &error))?;
        let name = scratch_name(preview, &contract.hash);
        let path = dir.join(&name);
        remove_preview_files(&dir, preview, Some(&name))
            .map_err(|error| unavailable("cannot remove an older scratch file", app_id, &error))?;
        let fresh = std::fs::symlink_metadata(&path).is_err();
        if fresh {
            // A stale -wal/-shm without its file would be replayed into the copy.
            remove_preview_files(&dir, preview, None).map_err(|error| {
                unavailable("cannot remove a stale scratch file", app_id, &error)
            })?;
            self.copy_live_into(app_id, &path)?;
        }
        match open(&path, contract) {
            Ok(handle) => {
                if fresh {
                    tracing::info!(app_id, preview, "data engine: preview copied from live");
                }
                Ok(handle)
            }
            Err(error) => {
                if fresh {
                    let _ = remove_preview_files(&dir, preview, None);
                }
                Err(error)
            }
        }
    }

    /// Copies the live file's one committed state into `target` (absent), or
    /// does nothing when the app has no live file (the preview then starts
    /// empty). The live file is opened read-only, under the live slot's lock
    /// so it is not removed meanwhile.
    fn copy_live_into(&self, app_id: &str, target: &Path) -> Result<(), AppError> {
        let live_slot = self.slot(app_id);
        let _live = live_slot
            .handle
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let live = self.live_path(app_id);
        if std::fs::symlink_metadata(&live).is_err() {
            return Ok(());
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        copy_committed_state(&live, flags, target).map_err(|error| match error {
            CopyError::Sqlite(error) => sql_error(error),
            other => unavailable("cannot copy the live data", app_id, &other),
        })
    }

    /// Removes one preview's scratch files (`preview` non-empty) or every
    /// preview of the app (`preview` empty), closing their connections first;
    /// gives back how many files it removed (none, or no folder, is 0).
    pub fn remove_previews(&self, app_id: &str, preview: &str) -> Result<u32, AppError> {
        if !valid_app_id(app_id) {
            return Err(AppError::from_code(ErrorCode::NotFound));
        }
        let dir = self.preview_dir(app_id);
        let previews: Vec<String> = if preview.is_empty() {
            let prefix = slot_key(app_id, "");
            let mut ids: std::collections::BTreeSet<String> = self
                .inner
                .slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .keys()
                .filter_map(|key| key.strip_prefix(&prefix).map(str::to_owned))
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
            check_preview_id(preview)?;
            vec![preview.to_owned()]
        };
        let mut removed = 0;
        for id in &previews {
            let slot = self.slot(&slot_key(app_id, id));
            let mut slot = slot.handle.lock().unwrap_or_else(PoisonError::into_inner);
            drop(slot.take());
            removed += remove_preview_files(&dir, id, None)
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
