//! A copy of an app's file as it was at an instant, restored from object
//! storage for a point-in-time restore the ledger cannot answer (rows
//! written behind the platform's back, rows older than the ledger): the
//! restore reads it beside the live file and writes the differences to the
//! live file through the grammar like any undo.
//!
//! The copy lives at `APP_DATA_ROOT/.restores/<app_id>-<random>.sqlite`
//! (a folder only data-worker's user reads) while one restore's preview or
//! application runs, and is removed when its [`Snapshot`] is dropped; one a
//! stopped process left is removed by the next restore after ten minutes.
//!
//! What it must never do: write to the copy after it is opened, keep the
//! copy past its use, or name a path outside `.restores/`.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use sasha_proto::AppError;

use super::{Engine, harden, open_file, sql_error, trusted_guard, valid_app_id};

/// The folder below `APP_DATA_ROOT` that holds restored copies.
pub const RESTORE_DIR: &str = ".restores";

/// A restored copy, open for reading; removed on drop.
pub struct Snapshot {
    conn: Connection,
    path: PathBuf,
}

impl Engine {
    /// `app_id`'s live file, and a fresh path for a copy of it (the folder
    /// is made; the file does not exist).
    pub fn snapshot_paths(&self, app_id: &str) -> Result<(PathBuf, PathBuf), AppError> {
        if !valid_app_id(app_id) {
            return Err(AppError::from_code(sasha_proto::ErrorCode::NotFound));
        }
        let folder = self.inner.root.join(RESTORE_DIR);
        // The copy holds the app's rows: a folder only this user reads.
        super::files::private_folder(&folder).map_err(|error| {
            let app = AppError::from_code(sasha_proto::ErrorCode::Internal);
            tracing::error!(diagnostic_id = %app.diagnostic_id, %error, "data engine: cannot make the restore folder");
            app
        })?;
        remove_stale(&folder);
        let copy = folder.join(format!("{app_id}-{:016x}.sqlite", rand::random::<u64>()));
        Ok((self.live_path(app_id), copy))
    }
}

impl Snapshot {
    /// Opens the copy at `path` (made by [`Engine::snapshot_paths`]) for
    /// reading only; it is removed when the snapshot is dropped, and also
    /// when opening fails.
    pub fn open(path: PathBuf) -> Result<Snapshot, AppError> {
        let opened = (|| {
            let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let mut conn = open_file(&path, flags)?;
            harden(&mut conn, &trusted_guard()).map_err(sql_error)?;
            conn.execute_batch("PRAGMA query_only = ON")
                .map_err(sql_error)?;
            Ok(conn)
        })();
        match opened {
            Ok(conn) => Ok(Snapshot { conn, path }),
            Err(error) => {
                remove(&path);
                Err(error)
            }
        }
    }

    /// The copy, read-only.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        remove(&self.path);
    }
}

/// A copy is in use for one call (seconds): one older than this was left
/// by a process that stopped mid-call.
const STALE: std::time::Duration = std::time::Duration::from_secs(600);

/// Removes the copies a stopped process left behind.
fn remove_stale(folder: &Path) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|metadata| metadata.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age > STALE);
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Removes a copy and the files SQLite kept beside it.
pub fn remove(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
}
