//! What a test reads straight from an expense-log app file (the
//! `tests/packages/valid/expense-log` fixture) after its processes wrote it:
//! the categories, and that each has exactly one create audit row and one
//! receipt. The replication and placement tests check the same ledger.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

pub fn count(connection: &rusqlite::Connection, sql: &str) -> i64 {
    connection.query_row(sql, [], |row| row.get(0)).unwrap()
}

/// The categories of an app file: name to id.
pub fn categories(file: &Path) -> BTreeMap<String, i64> {
    let connection = rusqlite::Connection::open(file).unwrap();
    connection.busy_timeout(Duration::from_secs(5)).unwrap();
    let rows: Vec<(String, i64)> = connection
        .prepare("SELECT name, id FROM categories")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let names: BTreeSet<&String> = rows.iter().map(|(name, _)| name).collect();
    assert_eq!(names.len(), rows.len(), "no name twice");
    rows.into_iter().collect()
}

/// Every category of the app file has exactly one create audit row and one
/// receipt, and there are no others.
pub fn assert_one_audit_row_and_receipt_per_row(file: &Path) {
    let connection = rusqlite::Connection::open(file).unwrap();
    connection.busy_timeout(Duration::from_secs(5)).unwrap();
    let rows = count(&connection, "SELECT count(*) FROM categories");
    let audited = count(
        &connection,
        "SELECT count(*) FROM _sasha_audit WHERE table_name = 'categories' AND operation = 'create'",
    );
    let receipts = count(
        &connection,
        "SELECT count(*) FROM _sasha_idempotency WHERE operation = 'categories.create'",
    );
    assert_eq!((audited, receipts), (rows, rows), "one of each per row");
    let unaudited = count(
        &connection,
        "SELECT count(*) FROM categories c WHERE (SELECT count(*) FROM _sasha_audit a \
         WHERE a.table_name = 'categories' AND a.operation = 'create' AND a.record_id = CAST(c.id AS TEXT)) != 1",
    );
    assert_eq!(unaudited, 0, "every row has exactly its own audit row");
}
