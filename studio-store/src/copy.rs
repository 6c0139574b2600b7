//! Moving an installation (`sasha admin migrate-core`): copies a core
//! database from its SQLite file into an empty PostgreSQL database in one
//! PostgreSQL transaction, which commits only once every table is proven
//! equal on both sides: the same row count, and the same sha256 over every
//! row in primary-key order, each side read back through the store's own SQL
//! surface.
//!
//! What is copied is read from the two schemas, not listed here: the tables,
//! their columns, primary keys and foreign keys from SQLite's catalogue, the
//! identity columns and PostgreSQL's own `rowid` columns from PostgreSQL's.
//! A table a later migration adds is copied without a change here, and a
//! table whose columns differ between the two schemas stops the copy before
//! anything is written. Ids are copied as they are; each identity sequence
//! then moves past the ids copied (and past SQLite's AUTOINCREMENT mark), so
//! the next id PostgreSQL hands out is one SQLite never did. Tables that
//! statements order by `rowid` (PostgreSQL assigns it) are inserted in
//! SQLite's rowid order, and the verification checks that order too. The
//! append-only audit log's triggers stay in place: they refuse UPDATE and
//! DELETE and an INSERT of an id already there, never an INSERT of a new id.
//!
//! Rows move a page at a time (keyset pages, sized from the bytes of the
//! rows read so far), so a large revision ledger is never held whole.
//!
//! What it must never do: write to the SQLite file (it is opened read-only,
//! and every read is one read transaction, so the copy is one state of it),
//! write a row into a target that holds any, commit a copy it has not
//! verified, format a value into SQL (only catalogue names that passed
//! [`plain_name`] are), or name a URL's password.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest as _, Sha256};

use crate::db::{Bind, Conn, DbError, OptionalExtension as _, OwnedValue, Row, Sql, Tx};
use crate::{Store, StoreError, system_clock};

/// The rows of a table's first page: few, since one row may hold a megabyte
/// (a ledger blob); later pages are sized by [`PAGE_BYTES`].
const FIRST_PAGE_ROWS: usize = 16;

/// The most rows one page reads and one INSERT writes.
const MAX_PAGE_ROWS: usize = 1000;

/// About what one page of rows should weigh in memory.
const PAGE_BYTES: usize = 8 << 20;

/// The most parameters PostgreSQL binds to one statement.
const MAX_PARAMETERS: usize = 65_535;

/// SQLite's implicit row id, and the column PostgreSQL's tables declare where
/// statements order by it (see `schema/postgres.sql`). Never quoted: SQLite
/// reads an unknown quoted name as a string.
const ROWID: &str = "rowid";

/// What [`copy_to_postgres`] copied and verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyReport {
    /// The target database, without its password.
    pub target: String,
    /// Every table, in the order it was copied (each after the tables its
    /// foreign keys name).
    pub tables: Vec<TableCopy>,
}

/// One table, copied and verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCopy {
    pub table: String,
    pub rows: u64,
    /// sha256 (hex) of the table's column names and every row in
    /// primary-key order, canonically encoded: the same read from both
    /// databases.
    pub sha256: String,
}

/// Why a copy was refused or failed. In every case the target holds no row
/// it did not hold before (the one transaction was rolled back or never
/// began), and the SQLite file is as it was.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The SQLite database is at another schema version than this build's
    /// latest, which is the version the target is created at.
    #[error("{}", source_version(*found, *expected))]
    SourceVersion { found: i64, expected: i64 },
    /// A core table of the target holds a row.
    #[error(
        "the target database is not empty (these tables hold rows: {}); nothing was written: copy into a new, empty database",
        tables.join(", ")
    )]
    TargetNotEmpty { tables: Vec<String> },
    /// The two schemas disagree about a table.
    #[error(
        "table {table}: the SQLite and PostgreSQL schemas differ ({detail}); nothing was written"
    )]
    Schema { table: String, detail: String },
    /// What PostgreSQL holds after the copy is not what SQLite holds.
    #[error(
        "table {table} did not verify: {detail}; the copy was rolled back and nothing was written"
    )]
    Mismatch { table: String, detail: String },
    /// A database could not be opened, reached or read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CopyError {
    /// Whether the input was refused (the source's version, a target that
    /// is not empty), as opposed to a fault.
    pub fn is_refused_input(&self) -> bool {
        matches!(
            self,
            CopyError::SourceVersion { .. } | CopyError::TargetNotEmpty { .. }
        )
    }
}

impl From<DbError> for CopyError {
    fn from(error: DbError) -> CopyError {
        CopyError::Store(error.into())
    }
}

fn source_version(found: i64, expected: i64) -> String {
    if found < expected {
        format!(
            "the SQLite core database has schema version {found}, this build's is {expected}; \
             nothing was written: upgrade it first (start this build's studio-core on it once, \
             or run `sasha admin user list` with DATABASE_URL unset), then copy it"
        )
    } else {
        format!(
            "the SQLite core database has schema version {found}, newer than this build's \
             {expected}; nothing was written: copy it with the sasha build that wrote it"
        )
    }
}

/// Copies the SQLite core database at `source` into the empty PostgreSQL
/// database at `target_url` (`postgres://…`; `ca_file` verifies the server
/// when the URL says `sslmode=require`), creating its schema first, and
/// commits only once every table verifies. Refused, with nothing written,
/// when the source's schema version is not this build's or any core table
/// of the target holds a row.
pub fn copy_to_postgres(
    source: &Path,
    target_url: &str,
    ca_file: Option<&Path>,
) -> Result<CopyReport, CopyError> {
    copy_verified(source, target_url, ca_file, |_| Ok(()))
}

/// [`copy_to_postgres`], running `before_verifying` on the target's
/// transaction between the copy and its verification (tests change a row
/// there to see the verification catch it).
fn copy_verified(
    source: &Path,
    target_url: &str,
    ca_file: Option<&Path>,
    before_verifying: impl FnOnce(&Tx<'_>) -> Result<(), DbError>,
) -> Result<CopyReport, CopyError> {
    // Under a lock of its own, as the store holds its connection.
    let source = Mutex::new(open_read_only(source)?);
    let mut source = Conn::sqlite(source.lock().unwrap_or_else(PoisonError::into_inner));
    let reading = source.read_transaction()?;
    let found: i64 = reading.query_row(
        "SELECT coalesce(max(version), 0) FROM schema_migrations",
        (),
        |row| row.get(0),
    )?;
    let expected = crate::schema::latest_version();
    if found != expected {
        return Err(CopyError::SourceVersion { found, expected });
    }
    let mut tables = source_tables(&reading)?;

    // Connecting creates the target's schema (once: a second run finds it).
    let target = Store::connect(target_url, 1, ca_file, Arc::new(system_clock))?;
    let mut connection = target.connection()?;
    // The writers' lock: a studio-core already on the target waits, so the
    // emptiness checked here is still true when the copy commits.
    let writing = connection.write_transaction()?;
    for table in &mut tables {
        match_target(&writing, table)?;
    }
    let tables = in_foreign_key_order(tables)?;
    let mut occupied = Vec::new();
    for table in &tables {
        let any: bool = writing.query_row(
            &format!("SELECT EXISTS (SELECT 1 FROM {})", quoted(&table.name)),
            (),
            |row| row.get(0),
        )?;
        if any {
            occupied.push(table.name.clone());
        }
    }
    if !occupied.is_empty() {
        return Err(CopyError::TargetNotEmpty { tables: occupied });
    }

    for table in &tables {
        copy_table(&reading, &writing, table)?;
    }
    before_verifying(&writing)?;
    let copied = tables
        .iter()
        .map(|table| verify(&reading, &writing, table))
        .collect::<Result<Vec<_>, _>>()?;
    // Last: a sequence's move is not undone by a rollback.
    for table in &tables {
        move_sequences(&reading, &writing, table)?;
    }
    writing.commit()?;
    Ok(CopyReport {
        target: target.place(),
        tables: copied,
    })
}

/// The SQLite file at `path`, read-only: no journal switch, no migration,
/// no write of any kind.
fn open_read_only(path: &Path) -> Result<rusqlite::Connection, StoreError> {
    use rusqlite::OpenFlags;
    let connection = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|error| match StoreError::from(error) {
        StoreError::Database(detail) => {
            StoreError::Database(format!("cannot open {}: {detail}", path.display()))
        }
        other => other,
    })?;
    connection.busy_timeout(crate::BUSY_TIMEOUT)?;
    Ok(connection)
}

/// One table, as the two schemas declare it.
#[derive(Debug)]
struct Table {
    name: String,
    /// Its columns in declared order: the same on both engines.
    columns: Vec<String>,
    /// Its primary key's columns in key order: the order rows are hashed in.
    key: Vec<String>,
    /// The tables its foreign keys name.
    parents: BTreeSet<String>,
    /// Whether PostgreSQL declares the `rowid` statements order it by, which
    /// it assigns itself: rows go in in SQLite's rowid order.
    by_rowid: bool,
    /// Its identity columns that take explicit values on PostgreSQL, whose
    /// sequences must move past the ids copied.
    identities: Vec<String>,
}

/// Every core table of the SQLite database: all but SQLite's own and the
/// migrations' record (each engine keeps its own).
fn source_tables(source: &Tx<'_>) -> Result<Vec<Table>, CopyError> {
    let names: Vec<String> = source
        .query_map(
            r"SELECT name FROM sqlite_schema
              WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'
                AND name <> 'schema_migrations'
              ORDER BY name",
            (),
            |row| row.get(0),
        )?
        .collect::<Result<_, _>>()?;
    let mut tables = Vec::with_capacity(names.len());
    for name in names {
        plain_name(&name, &name)?;
        let declared: Vec<(String, i64)> = source
            .query_map(
                "SELECT name, pk FROM pragma_table_info(?1) ORDER BY cid",
                [&name],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?
            .collect::<Result<_, _>>()?;
        for (column, _) in &declared {
            plain_name(&name, column)?;
        }
        let mut key: Vec<&(String, i64)> = declared.iter().filter(|(_, pk)| *pk > 0).collect();
        key.sort_by_key(|(_, pk)| *pk);
        if key.is_empty() {
            return Err(CopyError::Schema {
                table: name,
                detail: "it has no primary key to order its rows by".into(),
            });
        }
        let key = key.into_iter().map(|(column, _)| column.clone()).collect();
        let parents = source
            .query_map(
                r#"SELECT "table" FROM pragma_foreign_key_list(?1)"#,
                [&name],
                |row| row.get(0),
            )?
            .collect::<Result<_, _>>()?;
        tables.push(Table {
            columns: declared.into_iter().map(|(column, _)| column).collect(),
            name,
            key,
            parents,
            by_rowid: false,
            identities: Vec::new(),
        });
    }
    Ok(tables)
}

/// A name from SQLite's catalogue, checked before it goes into SQL text:
/// lowercase letters, digits and `_`, as every name the migrations declare.
fn plain_name(table: &str, name: &str) -> Result<(), CopyError> {
    let plain = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        Ok(())
    } else {
        Err(CopyError::Schema {
            table: table.to_owned(),
            detail: format!("{name:?} is not a name the migrations declare"),
        })
    }
}

/// A catalogue name in SQL: quoted, so a keyword is a name too; `rowid`
/// bare (see [`ROWID`]).
fn quoted(name: &str) -> String {
    if name == ROWID {
        ROWID.to_owned()
    } else {
        format!("\"{name}\"")
    }
}

fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|name| quoted(name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads `table`'s columns on the target, which must be the source's in the
/// same order, with at most PostgreSQL's own `rowid` among them (a later
/// migration's column comes after it); notes that `rowid` and the identity
/// columns.
fn match_target(target: &Tx<'_>, table: &mut Table) -> Result<(), CopyError> {
    let found: Vec<(String, Option<String>)> = target
        .query_map(
            "SELECT CAST(column_name AS TEXT), CAST(identity_generation AS TEXT)
             FROM information_schema.columns
             WHERE table_schema = current_schema() AND CAST(table_name AS TEXT) = ?1
             ORDER BY ordinal_position",
            [&table.name],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?
        .collect::<Result<_, _>>()?;
    let differ = |detail: String| CopyError::Schema {
        table: table.name.clone(),
        detail,
    };
    if found.is_empty() {
        return Err(differ("PostgreSQL has no such table".into()));
    }
    let own_rowid = |(column, generation): &(String, Option<String>)| {
        column == ROWID && generation.as_deref() == Some("ALWAYS")
    };
    let by_rowid = found.iter().any(own_rowid);
    let shared: Vec<&(String, Option<String>)> =
        found.iter().filter(|column| !own_rowid(column)).collect();
    if !shared
        .iter()
        .map(|(column, _)| column)
        .eq(table.columns.iter())
    {
        let names = |columns: Vec<&String>| {
            columns
                .into_iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(differ(format!(
            "columns ({}) in SQLite, ({}) in PostgreSQL",
            names(table.columns.iter().collect()),
            names(found.iter().map(|(column, _)| column).collect())
        )));
    }
    if let Some((column, _)) = shared
        .iter()
        .find(|(_, generation)| generation.as_deref() == Some("ALWAYS"))
    {
        return Err(differ(format!(
            "PostgreSQL assigns {column} itself, so the copied values cannot go in"
        )));
    }
    table.by_rowid = by_rowid;
    table.identities = shared
        .iter()
        .filter(|(_, generation)| generation.is_some())
        .map(|(column, _)| column.clone())
        .collect();
    Ok(())
}

/// `tables` with each after every table its foreign keys name (then by
/// name), so every row's parents are in before it.
fn in_foreign_key_order(tables: Vec<Table>) -> Result<Vec<Table>, CopyError> {
    let mut left: BTreeMap<String, Table> = tables
        .into_iter()
        .map(|table| (table.name.clone(), table))
        .collect();
    let mut ordered = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let ready: Vec<String> = left
            .values()
            .filter(|table| {
                table
                    .parents
                    .iter()
                    .all(|parent| *parent == table.name || !left.contains_key(parent))
            })
            .map(|table| table.name.clone())
            .collect();
        if ready.is_empty() {
            return Err(CopyError::Schema {
                table: left.keys().cloned().collect::<Vec<_>>().join(", "),
                detail: "their foreign keys name each other in a circle".into(),
            });
        }
        for name in ready {
            ordered.extend(left.remove(&name));
        }
    }
    Ok(ordered)
}

/// Reads `columns` of `table` in `key` order, a page at a time (each page
/// starts after the last key read), handing each page's rows to `each`;
/// answers how many rows there were.
fn scan(
    on: &impl Sql,
    table: &str,
    columns: &[String],
    key: &[String],
    mut each: impl FnMut(&[Vec<OwnedValue>]) -> Result<(), CopyError>,
) -> Result<u64, CopyError> {
    let width = columns.len();
    let selected = quoted_list(&[columns, key].concat());
    let keys = quoted_list(key);
    let table = quoted(table);
    let first = format!("SELECT {selected} FROM {table} ORDER BY {keys} LIMIT ?1");
    let marks = (1..=key.len())
        .map(|number| format!("?{number}"))
        .collect::<Vec<_>>()
        .join(", ");
    let next = format!(
        "SELECT {selected} FROM {table} WHERE ({keys}) > ({marks}) ORDER BY {keys} LIMIT ?{}",
        key.len() + 1
    );
    let max_rows = MAX_PAGE_ROWS.min(MAX_PARAMETERS / width.max(1));
    let read = |row: &Row<'_>| {
        (0..width + key.len())
            .map(|index| row.get::<_, OwnedValue>(index))
            .collect::<Result<Vec<_>, _>>()
    };
    let mut after: Option<Vec<OwnedValue>> = None;
    let mut page_rows = FIRST_PAGE_ROWS.min(max_rows);
    let mut total = 0_u64;
    loop {
        let limit = i64::try_from(page_rows).unwrap_or(i64::MAX);
        let mut rows: Vec<Vec<OwnedValue>> = match &after {
            None => on.query_map(&first, (limit,), read)?,
            Some(last) => {
                let mut values: Vec<&dyn Bind> = last.iter().map(|value| value as _).collect();
                values.push(&limit);
                on.query_map(&next, values.as_slice(), read)?
            }
        }
        .collect::<Result<_, _>>()?;
        let Some(last) = rows.last() else {
            break;
        };
        after = Some(last[width..].to_vec());
        for row in &mut rows {
            row.truncate(width);
        }
        each(&rows)?;
        total += rows.len() as u64;
        if rows.len() < page_rows {
            break;
        }
        page_rows = next_page_rows(&rows, max_rows);
    }
    Ok(total)
}

/// How many rows like `rows` make about [`PAGE_BYTES`].
fn next_page_rows(rows: &[Vec<OwnedValue>], max_rows: usize) -> usize {
    let bytes: usize = rows
        .iter()
        .flatten()
        .map(|value| match value {
            OwnedValue::Text(text) => text.len(),
            OwnedValue::Blob(bytes) => bytes.len(),
            _ => 8,
        })
        .sum();
    let per_row = (bytes / rows.len().max(1)).max(1);
    (PAGE_BYTES / per_row).clamp(1, max_rows)
}

/// Copies every row of `table`, as it is, in SQLite's rowid order where
/// PostgreSQL assigns the order itself, else in primary-key order.
fn copy_table(source: &Tx<'_>, target: &Tx<'_>, table: &Table) -> Result<u64, CopyError> {
    let order = if table.by_rowid {
        vec![ROWID.to_owned()]
    } else {
        table.key.clone()
    };
    let width = table.columns.len();
    let insert = format!(
        "INSERT INTO {} ({}) VALUES ",
        quoted(&table.name),
        quoted_list(&table.columns)
    );
    scan(source, &table.name, &table.columns, &order, |rows| {
        let mut sql = insert.clone();
        for row in 0..rows.len() {
            sql.push_str(if row == 0 { "(" } else { ", (" });
            for column in 0..width {
                if column > 0 {
                    sql.push_str(", ");
                }
                let _ = write!(sql, "?{}", row * width + column + 1);
            }
            sql.push(')');
        }
        let values: Vec<&dyn Bind> = rows.iter().flatten().map(|value| value as _).collect();
        target.execute(&sql, values.as_slice())?;
        Ok(())
    })
}

/// Proves `table` the same on both sides: its row count and the sha256 of
/// its rows in primary-key order, and, where PostgreSQL assigns `rowid`, the
/// order of its rows by it.
fn verify(source: &Tx<'_>, target: &Tx<'_>, table: &Table) -> Result<TableCopy, CopyError> {
    let mismatch = |detail: String| CopyError::Mismatch {
        table: table.name.clone(),
        detail,
    };
    let (rows, sha256) = digest(source, &table.name, &table.columns, &table.key)?;
    let (copied, copied_sha256) = digest(target, &table.name, &table.columns, &table.key)?;
    if copied != rows {
        return Err(mismatch(format!(
            "SQLite holds {rows} rows, PostgreSQL {copied}"
        )));
    }
    if copied_sha256 != sha256 {
        return Err(mismatch(format!(
            "its rows differ (sha256 {sha256} in SQLite, {copied_sha256} in PostgreSQL)"
        )));
    }
    if table.by_rowid {
        let rowid = [ROWID.to_owned()];
        let (_, order) = digest(source, &table.name, &table.key, &rowid)?;
        let (_, copied_order) = digest(target, &table.name, &table.key, &rowid)?;
        if copied_order != order {
            return Err(mismatch(
                "its rows are in another order by rowid than in SQLite".into(),
            ));
        }
    }
    Ok(TableCopy {
        table: table.name.clone(),
        rows,
        sha256,
    })
}

/// The rows of `columns` in `key` order and the sha256 of the column names
/// and every value, each value encoded as its kind and its bytes (lengths
/// and numbers as 8 big-endian bytes), so two different tables never encode
/// alike.
fn digest(
    on: &impl Sql,
    table: &str,
    columns: &[String],
    key: &[String],
) -> Result<(u64, String), CopyError> {
    let mut hasher = Sha256::new();
    let length = |bytes: &[u8]| u64::try_from(bytes.len()).unwrap_or(u64::MAX).to_be_bytes();
    for column in columns {
        hasher.update(length(column.as_bytes()));
        hasher.update(column.as_bytes());
    }
    let rows = scan(on, table, columns, key, |rows| {
        for value in rows.iter().flatten() {
            match value {
                OwnedValue::Null => hasher.update([0]),
                OwnedValue::Integer(number) => {
                    hasher.update([1]);
                    hasher.update(number.to_be_bytes());
                }
                OwnedValue::Real(number) => {
                    hasher.update([2]);
                    hasher.update(number.to_bits().to_be_bytes());
                }
                OwnedValue::Text(text) => {
                    hasher.update([3]);
                    hasher.update(length(text.as_bytes()));
                    hasher.update(text.as_bytes());
                }
                OwnedValue::Blob(bytes) => {
                    hasher.update([4]);
                    hasher.update(length(bytes));
                    hasher.update(bytes);
                }
            }
        }
        Ok(())
    })?;
    Ok((rows, hex::encode(hasher.finalize())))
}

/// Moves each identity sequence of `table` past the highest id copied and
/// past SQLite's AUTOINCREMENT mark (an id handed out whose row is gone), so
/// PostgreSQL never hands out an id SQLite did.
fn move_sequences(source: &Tx<'_>, target: &Tx<'_>, table: &Table) -> Result<(), CopyError> {
    for column in &table.identities {
        let copied: Option<i64> = target.query_row(
            &format!(
                "SELECT max({}) FROM {}",
                quoted(column),
                quoted(&table.name)
            ),
            (),
            |row| row.get(0),
        )?;
        let handed_out: Option<i64> = source
            .query_row(
                "SELECT seq FROM sqlite_sequence WHERE name = ?1",
                [&table.name],
                |row| row.get(0),
            )
            .optional()?;
        let Some(last) = copied.max(handed_out).filter(|last| *last > 0) else {
            continue;
        };
        target.query_row(
            "SELECT setval(pg_get_serial_sequence(?1, ?2), ?3)",
            (&table.name, column, last),
            |row| row.get::<_, i64>(0),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
