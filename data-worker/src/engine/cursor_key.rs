//! The key of the HMAC that binds an app's list cursors to their actor and
//! query (`grammar::sql`): one per app, kept in the app's own database in
//! `_sasha_cursor_key`, so it travels with the data. A cursor one worker
//! issued is accepted by whichever worker serves the app next (a move, a
//! failover, a restore from object storage), and a preview's scratch copy
//! (`VACUUM INTO` from live) holds live's key.
//!
//! The table is made and filled (32 random bytes) by the engine's setup, in
//! its one transaction, the first time a file is opened without it. A file
//! the engine had set up before keys were per app (it has
//! `_sasha_migrations` but no key) takes the worker-wide key an older
//! data-worker kept in `APP_DATA_ROOT/.cursor-key`, when there is one, so
//! the cursors it issued keep working; a new file always gets a random key.
//!
//! This module is the one place the key is read or made. It must never
//! write a key over one a file already holds, nor hand the key to anything
//! but the grammar's cursor MAC: a governed statement cannot reach the
//! table (the authorizer refuses every `_sasha_*` table), and the key never
//! leaves the worker.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension as _, Transaction};
use sasha_proto::AppError;

use super::{internal, sql_error};

/// The file an older data-worker kept its one cursor key in, below
/// `APP_DATA_ROOT`; read only to seed files set up before keys were per app.
pub const LEGACY_FILE: &str = ".cursor-key";

/// The platform table that holds the app's key: one row.
pub const TABLE: &str = "_sasha_cursor_key";

const TABLE_SQL: &str = r#"
CREATE TABLE IF NOT EXISTS _sasha_cursor_key (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    key BLOB NOT NULL CHECK (length(key) = 32)
) STRICT;
"#;

/// An app's cursor key. Its `Debug` never shows the bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CursorKey([u8; 32]);

impl CursorKey {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKey(..)")
    }
}

/// Makes sure the file of `tx` holds a key, making one when it has none:
/// the worker's legacy key (see the module header) for a file set up
/// before, when `app_data_root` holds one, else random. Runs first in the
/// engine's setup, before the platform's other tables are made, so that
/// "set up before" is read from the file as it was.
pub(super) fn ensure(tx: &Transaction<'_>, app_data_root: Option<&Path>) -> Result<(), AppError> {
    if has_table(tx, TABLE)? && stored(tx)?.is_some() {
        return Ok(());
    }
    let set_up_before = has_table(tx, "_sasha_migrations")?;
    let key = app_data_root
        .filter(|_| set_up_before)
        .and_then(legacy)
        .unwrap_or_else(rand::random);
    tx.execute_batch(TABLE_SQL).map_err(sql_error)?;
    tx.execute(
        "INSERT INTO _sasha_cursor_key (id, key) VALUES (1, ?1)",
        [key.as_slice()],
    )
    .map_err(sql_error)?;
    Ok(())
}

/// The key of the file `conn` has open, which the engine's setup made
/// sure of. Read over a connection still trusted (before the authorizer
/// governs it).
pub(super) fn read(conn: &Connection) -> Result<CursorKey, AppError> {
    stored(conn)?.ok_or_else(|| internal("the app's database holds no cursor key"))
}

fn stored(conn: &Connection) -> Result<Option<CursorKey>, AppError> {
    let bytes: Option<Vec<u8>> = conn
        .query_row(
            "SELECT key FROM _sasha_cursor_key WHERE id = 1",
            [],
            |row| row.get(0),
        )
        .optional()
        .map_err(sql_error)?;
    match bytes {
        None => Ok(None),
        Some(bytes) => <[u8; 32]>::try_from(bytes.as_slice())
            .map(|key| Some(CursorKey(key)))
            .map_err(|_| internal("the app's cursor key is not 32 bytes")),
    }
}

fn has_table(conn: &Connection, table: &str) -> Result<bool, AppError> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = ?1)",
        [table],
        |row| row.get(0),
    )
    .map_err(sql_error)
}

/// The worker-wide key an older data-worker kept in `app_data_root`, if it
/// left a usable one (it rewrote any file that was not 32 bytes).
fn legacy(app_data_root: &Path) -> Option<[u8; 32]> {
    let path = app_data_root.join(LEGACY_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => match <[u8; 32]>::try_from(bytes.as_slice()) {
            Ok(key) => Some(key),
            Err(_) => {
                tracing::warn!(
                    path = %path.display(),
                    "data engine: the old cursor key is not 32 bytes; the app gets a new key \
                     and list cursors issued before are refused"
                );
                None
            }
        },
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => {
            tracing::warn!(
                path = %path.display(),
                %error,
                "data engine: cannot read the old cursor key; the app gets a new key and list \
                 cursors issued before are refused"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests;
