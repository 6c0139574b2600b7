//! The audit ledger's chain: every `_sasha_audit` entry commits to the one
//! before it, so a changed, removed or inserted entry breaks every hash after
//! it, and `sasha audit verify` names the first entry that does not verify.
//!
//! An entry's hash is the lowercase hex sha256 of its canonical bytes: the
//! JSON object of [`Entry`]'s fields (camelCase) plus `prev`, the previous
//! entry's hash ([`GENESIS`] for the first), with keys sorted and no
//! whitespace (`sasha_contract::canonical`). Every value is a string, an
//! integer or null: the row images are hashed as the JSON text stored, so a
//! third party re-hashes the export (`docs/audit.md`) without re-encoding
//! numbers.
//!
//! A ledger written before the chain existed is chained once, when the engine
//! next opens the file ([`upgrade`]): its entries are hashed as they stand and
//! the point is recorded in `_sasha_audit_chain`, so `verify` says from
//! which entry on, and since when, the ledger proves itself. A ledger whose
//! checks predate migration entries is rebuilt once with its entries as
//! they are ([`widen`]).
//!
//! A publication's migration that reshapes a table holding rows is one
//! `migrate` entry for that table ([`record_migration`]), made from the
//! app tables' shapes ([`shapes`]).
//!
//! What it must never do: append an entry without its hash, let the chain be
//! recomputed over an entry outside [`upgrade`]'s one recorded pass, change an
//! entry's bytes when it rebuilds the table, or read more of an app's own
//! tables than their columns and row counts.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{Connection, OptionalExtension as _};
use sasha_contract::caller::Initiator;
use sasha_contract::canonical::canonical_json;
use sasha_contract::data::VERSION_COLUMN;
use sasha_proto::AppError;
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::{quote_identifier, sql_error};

/// The `prev` of a ledger's first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The columns the chain and provenance added to `_sasha_audit`, with their
/// declarations, for files set up before them.
const ADDED_COLUMNS: [(&str, &str); 3] = [
    ("initiator", "TEXT"),
    ("initiator_id", "TEXT"),
    ("hash", "TEXT"),
];

/// The ledger's table, its index and its append-only triggers, run on every
/// open (each statement is idempotent). Entries are `create`, `update` and
/// `delete` of rows and `migrate` of a table's shape; `source` is a data
/// call's `CallSource`, or `publish` for a migration.
pub(super) const TABLE_SQL: &str = r#"
CREATE TABLE IF NOT EXISTS _sasha_audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name TEXT NOT NULL,
    record_id TEXT NOT NULL,
    operation TEXT NOT NULL CHECK (operation IN ('create', 'update', 'delete', 'migrate')),
    actor_id TEXT NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('ui', 'mcp', 'import', 'skill', 'automation', 'publish')),
    app_revision TEXT NOT NULL,
    action_id TEXT,
    before_json TEXT,
    after_json TEXT,
    created_at TEXT NOT NULL,
    initiator TEXT,
    initiator_id TEXT,
    hash TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS _sasha_audit_by_record ON _sasha_audit (table_name, record_id, id);
CREATE TRIGGER IF NOT EXISTS _sasha_audit_no_update
    BEFORE UPDATE ON _sasha_audit
BEGIN
    SELECT RAISE(ABORT, '_sasha_audit is append-only');
END;
CREATE TRIGGER IF NOT EXISTS _sasha_audit_no_delete
    BEFORE DELETE ON _sasha_audit
BEGIN
    SELECT RAISE(ABORT, '_sasha_audit is append-only');
END;
CREATE TRIGGER IF NOT EXISTS _sasha_audit_no_replace
    BEFORE INSERT ON _sasha_audit
    WHEN NEW.id IS NOT NULL
        AND EXISTS (SELECT 1 FROM _sasha_audit WHERE id = NEW.id)
BEGIN
    SELECT RAISE(ABORT, '_sasha_audit is append-only');
END;
"#;

/// Refuses an entry appended without its hash, and keeps the ledger
/// append-only (the update trigger is re-created after [`upgrade`]'s pass).
const CHAIN_SQL: &str = r#"
CREATE TABLE IF NOT EXISTS _sasha_audit_chain (
    through_id INTEGER NOT NULL,
    chained_at TEXT NOT NULL
) STRICT;
CREATE TRIGGER IF NOT EXISTS _sasha_audit_chained
    BEFORE INSERT ON _sasha_audit
    WHEN NEW.hash IS NULL
BEGIN
    SELECT RAISE(ABORT, '_sasha_audit entries are chained');
END;
"#;

/// One ledger entry as it is hashed and exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub id: i64,
    pub table: String,
    pub record: String,
    /// `create`, `update` or `delete` of a row, or `migrate`: a migration's
    /// change of the table's shape (`record` empty).
    pub operation: String,
    /// The user id the change was made as.
    pub actor: String,
    pub source: String,
    /// `None` for an entry written before provenance was recorded.
    pub initiator: Option<String>,
    pub initiator_id: Option<String>,
    pub revision: String,
    pub action: Option<String>,
    /// The row images as the JSON text stored.
    pub before: Option<String>,
    pub after: Option<String>,
    pub at: String,
}

impl Entry {
    /// The entry's hash after `prev`.
    pub fn hash(&self, prev: &str) -> String {
        let mut object = serde_json::to_value(self).unwrap_or_default();
        if let Some(map) = object.as_object_mut() {
            map.insert("prev".into(), prev.into());
        }
        hex::encode(Sha256::digest(canonical_json(&object).as_bytes()))
    }
}

/// The entry columns in [`Entry`]'s order, then `hash`.
pub(crate) const ENTRY_COLUMNS: &str = "id, table_name, record_id, operation, actor_id, source, initiator, \
    initiator_id, app_revision, action_id, before_json, after_json, created_at, hash";

pub(crate) fn entry_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(Entry, Option<String>)> {
    Ok((
        Entry {
            id: row.get(0)?,
            table: row.get(1)?,
            record: row.get(2)?,
            operation: row.get(3)?,
            actor: row.get(4)?,
            source: row.get(5)?,
            initiator: row.get(6)?,
            initiator_id: row.get(7)?,
            revision: row.get(8)?,
            action: row.get(9)?,
            before: row.get(10)?,
            after: row.get(11)?,
            at: row.get(12)?,
        },
        row.get(13)?,
    ))
}

/// The last entry's id (0 for an empty ledger) and hash, and the time a new
/// entry is stamped with (SQLite's clock, UTC with milliseconds, moved by
/// `offset_ms`, which only tests set): what the next entry needs, read inside
/// the writing transaction.
pub(super) fn next(conn: &Connection, offset_ms: i64) -> rusqlite::Result<(i64, String, String)> {
    let (id, hash, at): (i64, Option<String>, String) = conn
        .prepare_cached(
            "/* engine */ SELECT COALESCE(MAX(id), 0), \
             (SELECT hash FROM _sasha_audit ORDER BY id DESC LIMIT 1), \
             strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', ?1 / 1000.0)) \
             FROM _sasha_audit",
        )?
        .query_row([offset_ms], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?;
    Ok((id + 1, hash.unwrap_or_else(|| GENESIS.to_owned()), at))
}

/// Appends `entry` after `prev`, with its hash; gives the hash back.
pub(super) fn append(conn: &Connection, entry: &Entry, prev: &str) -> rusqlite::Result<String> {
    let hash = entry.hash(prev);
    conn.prepare_cached(&format!(
        "/* engine */ INSERT INTO _sasha_audit ({ENTRY_COLUMNS}) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
    ))?
    .execute(rusqlite::params![
        entry.id,
        entry.table,
        entry.record,
        entry.operation,
        entry.actor,
        entry.source,
        entry.initiator,
        entry.initiator_id,
        entry.revision,
        entry.action,
        entry.before,
        entry.after,
        entry.at,
        hash,
    ])?;
    Ok(hash)
}

/// Inside setup's transaction: adds the provenance and chain columns a file
/// set up before them lacks, and chains the entries written before the chain
/// (recording through which entry, and when). Runs on every open; after the
/// first it only checks.
pub(super) fn upgrade(tx: &Connection, now_sql: &str) -> rusqlite::Result<()> {
    tx.execute_batch(TABLE_SQL)?;
    let present: Vec<String> = tx
        .prepare("SELECT name FROM pragma_table_info('_sasha_audit')")?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for (column, declaration) in ADDED_COLUMNS {
        if !present.iter().any(|name| name == column) {
            tx.execute_batch(&format!(
                "ALTER TABLE _sasha_audit ADD COLUMN {column} {declaration}"
            ))?;
        }
    }
    widen(tx)?;
    tx.execute_batch(CHAIN_SQL)?;
    let unchained: Option<i64> = tx
        .query_row(
            "SELECT MIN(id) FROM _sasha_audit WHERE hash IS NULL",
            [],
            |row| row.get(0),
        )
        .optional()?
        .flatten();
    let Some(first) = unchained else {
        return Ok(());
    };
    // Entries before the first unchained one are chained already (a pass
    // interrupted cannot happen: it is one transaction), so the pass starts
    // from the hash before it.
    let mut prev: String = tx
        .query_row(
            "SELECT hash FROM _sasha_audit WHERE id < ?1 ORDER BY id DESC LIMIT 1",
            [first],
            |row| row.get::<_, Option<String>>(0),
        )
        .optional()?
        .flatten()
        .unwrap_or_else(|| GENESIS.to_owned());
    tx.execute_batch("DROP TRIGGER IF EXISTS _sasha_audit_no_update")?;
    let entries = tx
        .prepare(&format!(
            "SELECT {ENTRY_COLUMNS} FROM _sasha_audit WHERE id >= ?1 ORDER BY id"
        ))?
        .query_map([first], entry_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    let mut through = first;
    for (entry, _) in &entries {
        let hash = entry.hash(&prev);
        tx.execute(
            "UPDATE _sasha_audit SET hash = ?1 WHERE id = ?2",
            (&hash, entry.id),
        )?;
        through = entry.id;
        prev = hash;
    }
    tx.execute(
        &format!("INSERT INTO _sasha_audit_chain (through_id, chained_at) VALUES (?1, {now_sql})"),
        [through],
    )?;
    tx.execute_batch(TABLE_SQL)?;
    Ok(())
}

/// A ledger whose checks predate `migrate` and `publish` (files set up
/// before migrations were recorded) is rebuilt once under [`TABLE_SQL`]:
/// SQLite cannot change a CHECK in place. The entries are copied as they
/// are, so every hash and `prev` still verifies; the triggers go with the
/// old table and come back with the new one.
fn widen(tx: &Connection) -> rusqlite::Result<()> {
    let declared: String = tx.query_row(
        "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = '_sasha_audit'",
        [],
        |row| row.get(0),
    )?;
    if declared.contains("'migrate'") {
        return Ok(());
    }
    let table = &TABLE_SQL[..TABLE_SQL.find(") STRICT;").unwrap_or(0) + ") STRICT;".len()]
        .replacen("IF NOT EXISTS _sasha_audit (", "_sasha_audit_rebuilt (", 1);
    tx.execute_batch(&format!(
        "{table}
         INSERT INTO _sasha_audit_rebuilt ({ENTRY_COLUMNS}) SELECT {ENTRY_COLUMNS} FROM _sasha_audit;
         DROP TRIGGER IF EXISTS _sasha_audit_no_update;
         DROP TRIGGER IF EXISTS _sasha_audit_no_delete;
         DROP TRIGGER IF EXISTS _sasha_audit_no_replace;
         DROP TRIGGER IF EXISTS _sasha_audit_chained;
         DROP TABLE _sasha_audit;
         ALTER TABLE _sasha_audit_rebuilt RENAME TO _sasha_audit;"
    ))?;
    tx.execute_batch(TABLE_SQL)
}

/// Who a contract's migrations are recorded as having been made by: the
/// person whose publication applied them and its revision. A contract a
/// data call or a preview brings in names nobody (`by` empty) and records
/// the contract's hash as the revision.
#[derive(Debug, Clone, Copy, Default)]
pub struct Publisher<'a> {
    pub by: &'a str,
    pub revision: &'a str,
}

/// One app table's shape, as a migration entry records it before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct Shape {
    /// `name TYPE` of each column in order, the platform's version column
    /// left out.
    columns: Vec<String>,
    rows: i64,
}

/// The shape of every app table in the file (not SQLite's, not the
/// platform's).
pub(super) fn shapes(conn: &Connection) -> Result<BTreeMap<String, Shape>, AppError> {
    let mut shapes = BTreeMap::new();
    for table in super::guard::app_tables(conn)? {
        let columns = conn
            .prepare_cached("SELECT name, type FROM pragma_table_info(?1)")
            .and_then(|mut statement| {
                statement
                    .query_map([&table], |row| {
                        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(sql_error)?
            .into_iter()
            .filter(|(name, _)| name != VERSION_COLUMN)
            .map(|(name, declared)| format!("{name} {declared}"))
            .collect();
        let rows = conn
            .query_row(
                &format!("SELECT COUNT(*) FROM main.{}", quote_identifier(&table)),
                [],
                |row| row.get(0),
            )
            .map_err(sql_error)?;
        shapes.insert(table, Shape { columns, rows });
    }
    Ok(shapes)
}

/// After migration `file` ran: one `migrate` entry (initiator `migration`,
/// its id the file) for each app table holding rows that it dropped, renamed
/// or whose columns it changed, with the table's shape before and after it
/// (`None` for a table that did not exist). Rows themselves never change in a migration
/// (the package validator refuses every `INSERT`, `UPDATE` and `DELETE` but
/// a rebuild's proven copy), so a table's shape says all it did; a dropped
/// table's row count says what it took away.
pub(super) fn record_migration(
    tx: &Connection,
    file: &str,
    before: &BTreeMap<String, Shape>,
    publisher: Publisher<'_>,
) -> Result<(), AppError> {
    let after = shapes(tx)?;
    let tables: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for table in tables {
        let (was, now) = (before.get(table), after.get(table));
        let same_columns =
            matches!((was, now), (Some(was), Some(now)) if was.columns == now.columns);
        let held_rows = [was, now].into_iter().flatten().any(|shape| shape.rows > 0);
        // A table without rows on either side changed no data (a new app's
        // first migrations create empty tables): nothing to record.
        if same_columns || !held_rows {
            continue;
        }
        let image = |shape: Option<&Shape>| {
            shape.map(|shape| serde_json::to_string(shape).unwrap_or_default())
        };
        let (id, prev, at) = next(tx, 0).map_err(sql_error)?;
        let entry = Entry {
            id,
            table: table.clone(),
            record: String::new(),
            operation: MIGRATE.to_owned(),
            actor: publisher.by.to_owned(),
            source: PUBLISH.to_owned(),
            initiator: Some(Initiator::Migration.as_str().to_owned()),
            initiator_id: Some(file.to_owned()),
            revision: publisher.revision.to_owned(),
            action: None,
            before: image(was),
            after: image(now),
            at,
        };
        append(tx, &entry, &prev).map_err(sql_error)?;
    }
    Ok(())
}

/// The operation of a migration's entry, and its source.
pub(crate) const MIGRATE: &str = "migrate";
const PUBLISH: &str = "publish";

/// Where a ledger written before the chain was chained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainStart {
    /// Entries up to this one were hashed as they stood at `chainedAt`.
    pub through: i64,
    pub chained_at: String,
}

/// Why an entry does not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Break {
    /// Its content or its predecessor changed since it was written.
    Altered,
    /// The entry before it is gone.
    Missing,
    /// It has no hash: the engine has not opened the file since the chain
    /// began (it chains a ledger when it next opens the app).
    Unchained,
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// Entries read.
    pub entries: u64,
    /// The last entry's hash, which commits to the whole ledger.
    pub head: Option<String>,
    pub chained_from: Option<ChainStart>,
    /// The first entry that does not verify, and why.
    pub first_break: Option<(i64, Break)>,
}

/// Walks the whole ledger in one read transaction, re-hashing every entry;
/// stops at the first that does not verify. `visit` sees each verified entry
/// with its `prev` and `hash` (the export).
pub fn verify(
    conn: &Connection,
    mut visit: impl FnMut(&Entry, &str, &str) -> std::io::Result<()>,
) -> Result<Verification, VerifyError> {
    let chained_from = conn
        .query_row(
            "SELECT through_id, chained_at FROM _sasha_audit_chain ORDER BY through_id LIMIT 1",
            [],
            |row| {
                Ok(ChainStart {
                    through: row.get(0)?,
                    chained_at: row.get(1)?,
                })
            },
        )
        .optional()
        .or_else(|error| no_table(error).map(|()| None))?;
    let mut found = Verification {
        entries: 0,
        head: None,
        chained_from,
        first_break: None,
    };
    let mut statement = match conn.prepare(&format!(
        "SELECT {ENTRY_COLUMNS} FROM _sasha_audit ORDER BY id"
    )) {
        Ok(statement) => statement,
        // A ledger from before provenance and the chain: nothing is proved.
        Err(error) if is_missing(&error) => {
            let first: Option<i64> = conn
                .query_row("SELECT MIN(id) FROM _sasha_audit", [], |row| row.get(0))
                .map_err(VerifyError::Sqlite)?;
            found.first_break = first.map(|id| (id, Break::Unchained));
            return Ok(found);
        }
        Err(error) => return Err(VerifyError::Sqlite(error)),
    };
    let mut rows = statement.query([]).map_err(VerifyError::Sqlite)?;
    let mut prev = GENESIS.to_owned();
    let mut expected_id = 1;
    while let Some(row) = rows.next().map_err(VerifyError::Sqlite)? {
        let (entry, stored) = entry_from_row(row).map_err(VerifyError::Sqlite)?;
        found.entries += 1;
        let broken = match &stored {
            _ if entry.id != expected_id => Some((expected_id, Break::Missing)),
            None => Some((entry.id, Break::Unchained)),
            Some(stored) if *stored != entry.hash(&prev) => Some((entry.id, Break::Altered)),
            _ => None,
        };
        if let Some(broken) = broken {
            found.first_break = Some(broken);
            return Ok(found);
        }
        let hash = stored.unwrap_or_default();
        visit(&entry, &prev, &hash).map_err(VerifyError::Write)?;
        expected_id = entry.id + 1;
        found.head = Some(hash.clone());
        prev = hash;
    }
    Ok(found)
}

/// [`verify`] of the app file at `path`, opened read-only, in one read
/// transaction (one committed state while data-worker keeps writing).
pub fn verify_file(
    path: &std::path::Path,
    visit: impl FnMut(&Entry, &str, &str) -> std::io::Result<()>,
) -> Result<Verification, VerifyError> {
    let conn = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(VerifyError::Sqlite)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(VerifyError::Sqlite)?;
    conn.execute_batch("BEGIN").map_err(VerifyError::Sqlite)?;
    verify(&conn, visit)
}

/// Why a ledger could not be read to the end.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("cannot read the ledger: {0}")]
    Sqlite(rusqlite::Error),
    #[error("cannot write the export: {0}")]
    Write(std::io::Error),
}

fn is_missing(error: &rusqlite::Error) -> bool {
    error.to_string().contains("no such")
}

/// `Ok` for a missing table or column (a ledger from before the chain).
fn no_table(error: rusqlite::Error) -> Result<(), VerifyError> {
    if is_missing(&error) {
        Ok(())
    } else {
        Err(VerifyError::Sqlite(error))
    }
}

/// One exported line: the entry, its `prev` and its `hash`.
#[derive(Serialize)]
pub struct ExportLine<'a> {
    #[serde(flatten)]
    pub entry: &'a Entry,
    pub prev: &'a str,
    pub hash: &'a str,
}

#[cfg(test)]
mod tests;
