//! The engine against real files in temporary folders, with the expense-log
//! package's contract (statements are written by hand here: the grammar is not
//! the engine's business).

use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;

use rusqlite::Connection;
use sasha_contract::data::Migration;
use serde_json::json;

use super::*;

pub(super) const APP: &str = "expense-log";

/// The expense-log package's contract, built the way the validator builds it:
/// its migrations in order, the structure their replay leaves, and the
/// manifest's declarations (restated here; the validator's own tests prove the
/// package valid).
pub(super) fn contract() -> DataContract {
    use sasha_contract::data::{Access, TableDeclaration, contract_hash, sha256_hex};
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/packages/valid/expense-log");
    let mut files: Vec<_> = std::fs::read_dir(dir.join("migrations"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    let replay = Connection::open_in_memory().unwrap();
    let migrations: Vec<Migration> = files
        .iter()
        .enumerate()
        .map(|(index, name)| {
            let sql = std::fs::read_to_string(dir.join("migrations").join(name)).unwrap();
            replay.execute_batch(&sql).unwrap();
            Migration {
                file: format!("migrations/{name}"),
                number: u32::try_from(index + 1).unwrap(),
                checksum: sha256_hex(sql.as_bytes()),
                sql,
            }
        })
        .collect();
    let tables = std::collections::BTreeMap::from([
        (
            "expenses".to_owned(),
            TableDeclaration {
                access: Access::Owner,
                owner_field: Some("created_by".to_owned()),
                write: Default::default(),
                managers_read_all: false,
            },
        ),
        (
            "categories".to_owned(),
            TableDeclaration {
                access: Access::Shared,
                owner_field: None,
                write: Default::default(),
                managers_read_all: false,
            },
        ),
    ]);
    DataContract {
        schema: read_schema(&replay).unwrap(),
        hash: contract_hash(&tables, &migrations),
        migrations,
        tables,
    }
}

pub(super) fn raw(dir: &tempfile::TempDir) -> Connection {
    Connection::open(dir.path().join(format!("{APP}.sqlite"))).unwrap()
}

pub(super) fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |row| row.get(0)).unwrap()
}

pub(super) fn table_names(conn: &Connection) -> Vec<String> {
    let mut statement = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap();
    statement
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

pub(super) fn receipt(actor: &str, key: &str, input: &serde_json::Value) -> ReceiptKey {
    ReceiptKey {
        actor: actor.into(),
        operation: "create".into(),
        key: key.into(),
        input_hash: crate::grammar::request_hash("create", "entries", input),
    }
}

pub(super) fn meta() -> AuditMeta {
    AuditMeta {
        source: CallSource::Ui,
        initiator: Initiator::AppView,
        initiator_id: None,
        app_revision: "rev-1".into(),
        action_id: None,
    }
}

/// A write that runs far past any deadline (a recursive CTE of 10^12 rows).
pub(super) const RUNAWAY_INSERT: &str = "INSERT INTO categories (name) WITH RECURSIVE c(x) AS \
     (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000000) SELECT 'n' || x FROM c";

/// A hand-built create of one category, as the grammar would run it.
pub(super) fn create_category(
    name: &str,
) -> impl Fn(&Connection) -> Result<MutationOutcome, AppError> + Send + use<> {
    let name = name.to_owned();
    move |tx| {
        tx.execute("INSERT INTO categories (name) VALUES (?1)", [&name])
            .map_err(sql_error)?;
        let id = tx.last_insert_rowid();
        let row = json!({"id": id, "name": name, "_sasha_version": 1});
        Ok(MutationOutcome {
            result: row.clone(),
            audit: vec![AuditRecord {
                table: "categories".into(),
                record_id: id.to_string(),
                operation: AuditOperation::Create,
                before: None,
                after: Some(row),
            }],
        })
    }
}

pub(super) fn add_category(
    engine: &Engine,
    contract: &DataContract,
    actor: &str,
    key: &str,
    name: &str,
) {
    let input = json!({"name": name});
    engine
        .mutate(
            APP,
            contract,
            receipt(actor, key, &input),
            meta(),
            create_category(name),
        )
        .unwrap();
}

#[test]
fn open_applies_migrations_once_and_records_them() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    engine.open(APP, &contract).unwrap();

    let conn = raw(&dir);
    let recorded: Vec<(u32, String, String)> = applied_migrations(&conn).unwrap();
    let expected: Vec<(u32, String, String)> = contract
        .migrations
        .iter()
        .map(|m| (m.number, m.file.clone(), m.checksum.clone()))
        .collect();
    assert_eq!(recorded, expected);
    assert_eq!(expected.len(), 2);
    let first_applied: String = conn
        .query_row(
            "SELECT applied_at FROM _sasha_migrations WHERE number = 1",
            [],
            |row| row.get(0),
        )
        .unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    for table in ["categories", "expenses"] {
        let live = read_schema(&conn).unwrap();
        let version = live.tables[table].column(VERSION_COLUMN).unwrap();
        assert_eq!(version.declared_type, "INTEGER");
        assert!(version.not_null);
        assert_eq!(version.default_value.as_deref(), Some("1"));
    }

    // The same engine again, then a fresh engine (a restart): nothing re-applied.
    engine.open(APP, &contract).unwrap();
    drop(engine);
    let engine = Engine::new(dir.path());
    engine.open(APP, &contract).unwrap();
    assert_eq!(applied_migrations(&conn).unwrap(), expected);
    let again: String = conn
        .query_row(
            "SELECT applied_at FROM _sasha_migrations WHERE number = 1",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(again, first_applied);
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM pragma_table_info('expenses') WHERE name = '_sasha_version'"
        ),
        1
    );

    // describe is the declared structure, without the platform's additions.
    let described = engine.describe(APP, &contract).unwrap();
    assert_eq!(described, contract.schema);
    assert!(engine.migration_drift(APP, &contract).unwrap().is_empty());
}

#[test]
fn only_package_shaped_app_ids_become_files() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::new(dir.path());
    let (too_long, longest_once_taken) = ("a".repeat(61), "a".repeat(64));
    for id in [
        "../escape",
        "a/b",
        "",
        ".hidden",
        "UPPER",
        "x.sqlite",
        "-lead",
        // No package can have these ids (sasha_contract::ids): data-worker
        // once made files for them.
        "a--b",
        "trailing-",
        "1app",
        "9",
        &too_long,
        &longest_once_taken,
    ] {
        let error = engine.open(id, &contract()).unwrap_err();
        assert_eq!(error.code, ErrorCode::NotFound, "{id}");
        let error = engine
            .apply_contract(id, &contract(), false, Approval::None, Publisher::default())
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::NotFound, "{id}");
        let error = engine.back_up_and_remove(id).unwrap_err();
        assert_eq!(error.code, ErrorCode::NotFound, "{id}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn configuration_is_hardened() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, _) = open_applying(
        &dir.path().join("x.sqlite"),
        dir.path(),
        &contract(),
        Approval::None,
        Publisher::default(),
    )
    .unwrap();
    let conn = &handle.conn;
    let _trusted = TrustScope::new(&handle.guard, true);
    assert!(conn.db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE).unwrap());
    assert!(
        !conn
            .db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA)
            .unwrap()
    );
    let trusted_schema: i64 = conn
        .query_row("PRAGMA trusted_schema", [], |row| row.get(0))
        .unwrap();
    assert_eq!(trusted_schema, 0);
    let foreign_keys: i64 = conn
        .query_row("PRAGMA foreign_keys", [], |row| row.get(0))
        .unwrap();
    assert_eq!(foreign_keys, 1);
    for (limit, value) in LIMITS {
        assert_eq!(conn.limit(limit).unwrap(), value, "{limit:?}");
    }
    // Even the engine's own statements cannot load an extension or attach.
    assert!(
        conn.query_row("SELECT load_extension('x')", [], |_| Ok(()))
            .is_err()
    );
    assert!(
        conn.execute_batch("ATTACH DATABASE ':memory:' AS other")
            .is_err()
    );
}

#[test]
fn drift_is_reported_and_opening_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    Engine::new(dir.path()).open(APP, &contract).unwrap();

    let mut edited = contract.clone();
    edited.migrations[0].checksum = "0".repeat(64);
    edited.hash = "edited".into();
    let engine = Engine::new(dir.path());
    let drift = engine.migration_drift(APP, &edited).unwrap();
    assert_eq!(
        drift,
        vec![Drift {
            number: 1,
            file: contract.migrations[0].file.clone(),
            kind: DriftKind::ChecksumChanged,
            applied_checksum: contract.migrations[0].checksum.clone(),
            contract_checksum: Some("0".repeat(64)),
        }]
    );
    assert!(
        engine
            .query(APP, &edited, "SELECT * FROM categories", &[])
            .unwrap()
            .is_empty()
    );

    let mut shorter = contract.clone();
    shorter.migrations.truncate(1);
    shorter.hash = "shorter".into();
    let drift = engine.migration_drift(APP, &shorter).unwrap();
    assert_eq!(drift.len(), 1);
    assert_eq!(drift[0].number, 2);
    assert_eq!(drift[0].kind, DriftKind::NotInContract);
    assert_eq!(drift[0].contract_checksum, None);
}

#[test]
fn an_incompatible_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    {
        // A database claiming every migration but holding a different structure.
        let conn = raw(&dir);
        conn.execute_batch(PLATFORM_SQL).unwrap();
        conn.execute_batch(
            "CREATE TABLE categories (id INTEGER PRIMARY KEY, name BLOB NOT NULL);
             CREATE TABLE expenses (id INTEGER PRIMARY KEY);",
        )
        .unwrap();
        for m in &contract.migrations {
            conn.execute(
                "INSERT INTO _sasha_migrations VALUES (?1, ?2, ?3, 'then')",
                (m.number, &m.file, &m.checksum),
            )
            .unwrap();
        }
    }
    let engine = Engine::new(dir.path());
    let error = engine.open(APP, &contract).unwrap_err();
    assert_eq!(error.code, ErrorCode::SchemaIncompatible);
    assert!(!error.retryable);
    assert!(!error.message.contains("categories"));
    // The check rolled back its own additions too.
    let conn = raw(&dir);
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM pragma_table_info('categories') WHERE name = '_sasha_version'"
        ),
        0
    );
    // Every use keeps being refused (and keeps re-checking).
    let error = engine.query(APP, &contract, "SELECT 1", &[]).unwrap_err();
    assert_eq!(error.code, ErrorCode::SchemaIncompatible);
}

#[test]
fn a_failed_migration_rolls_back_everything() {
    let mut broken = contract();
    broken.migrations.push(Migration {
        file: "migrations/003-broken.sql".into(),
        number: 3,
        sql: "CREATE TABLE extra (id INTEGER PRIMARY KEY); CREATE TABLE categories (id INTEGER);"
            .into(),
        checksum: "3".repeat(64),
    });
    broken.hash = "broken".into();

    // On a fresh file: not even migrations 1 and 2 remain.
    let dir = tempfile::tempdir().unwrap();
    let error = Engine::new(dir.path()).open(APP, &broken).unwrap_err();
    assert_eq!(error.code, ErrorCode::MigrationFailed);
    assert!(!error.retryable);
    assert!(!error.message.contains("CREATE"));
    assert!(!error.message.contains("003"));
    assert!(table_names(&raw(&dir)).is_empty());

    // On a database at migration 2: it stays exactly there.
    let dir = tempfile::tempdir().unwrap();
    Engine::new(dir.path()).open(APP, &contract()).unwrap();
    let error = Engine::new(dir.path()).open(APP, &broken).unwrap_err();
    assert_eq!(error.code, ErrorCode::MigrationFailed);
    let conn = raw(&dir);
    assert!(!table_names(&conn).contains(&"extra".to_owned()));
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_migrations"), 2);
}

#[test]
fn the_audit_ledger_is_append_only() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    add_category(&engine, &contract, "alice", "k1", "Travel");

    let conn = raw(&dir);
    let (table, record, operation, actor, source, revision, after): (
        String,
        String,
        String,
        String,
        String,
        String,
        String,
    ) = conn
        .query_row(
            "SELECT table_name, record_id, operation, actor_id, source, app_revision, after_json \
             FROM _sasha_audit",
            [],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            },
        )
        .unwrap();
    assert_eq!(
        (table.as_str(), record.as_str(), operation.as_str()),
        ("categories", "1", "create")
    );
    assert_eq!(
        (actor.as_str(), source.as_str(), revision.as_str()),
        ("alice", "ui", "rev-1")
    );
    let after: serde_json::Value = serde_json::from_str(&after).unwrap();
    assert_eq!(after["name"], "Travel");

    for tamper in [
        "UPDATE _sasha_audit SET actor_id = 'mallory'",
        "DELETE FROM _sasha_audit",
        "INSERT OR REPLACE INTO _sasha_audit (id, table_name, record_id, operation, actor_id, \
         source, app_revision, created_at, hash) VALUES (1, 'categories', '1', 'create', \
         'mallory', 'ui', 'rev-1', 'now', 'forged')",
        "REPLACE INTO _sasha_audit (id, table_name, record_id, operation, actor_id, \
         source, app_revision, created_at, hash) VALUES (1, 'categories', '1', 'delete', \
         'mallory', 'ui', 'rev-1', 'now', 'forged')",
    ] {
        let error = conn.execute_batch(tamper).unwrap_err();
        assert!(
            error.to_string().contains("append-only"),
            "{tamper}: {error}"
        );
    }
    let actor: String = conn
        .query_row("SELECT actor_id FROM _sasha_audit", [], |r| r.get(0))
        .unwrap();
    assert_eq!(actor, "alice");
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_audit"), 1);
}

#[test]
fn the_authorizer_confines_governed_statements_to_declared_tables() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    add_category(&engine, &contract, "alice", "k1", "Travel");

    for sql in [
        "ATTACH DATABASE ':memory:' AS other",
        "DETACH DATABASE other",
        "PRAGMA user_version",
        "PRAGMA foreign_keys = OFF",
        "SELECT * FROM pragma_table_info('categories')",
        "CREATE TABLE sneaky (x)",
        "CREATE TEMP TABLE sneaky (x)",
        "DROP TABLE categories",
        "ALTER TABLE categories ADD COLUMN x",
        "CREATE INDEX i ON categories (name)",
        "CREATE VIEW v AS SELECT 1",
        "CREATE TRIGGER t AFTER INSERT ON categories BEGIN SELECT 1; END",
        "SELECT * FROM _sasha_audit",
        "SELECT * FROM _sasha_idempotency",
        "SELECT * FROM _sasha_migrations",
        "SELECT * FROM _sasha_cursor_key",
        "SELECT hex(key) FROM main._SASHA_CURSOR_KEY",
        "SELECT * FROM sqlite_master",
        "SELECT * FROM sqlite_schema",
        "SELECT * FROM main.sqlite_master",
        "SELECT name FROM categories UNION SELECT actor_id FROM _sasha_audit",
        "SELECT * FROM categories WHERE id IN (SELECT id FROM _sasha_audit)",
        "WITH x AS (SELECT * FROM _sasha_audit) SELECT * FROM x",
        "SELECT * FROM temp.sqlite_master",
        "SELECT * FROM sqlite_temp_master",
        "SELECT sqlite_version()",
        "SELECT load_extension('x')",
        "BEGIN",
        "SAVEPOINT s",
        "ANALYZE",
        "VACUUM",
        "DELETE FROM categories",
    ] {
        let error = engine.query(APP, &contract, sql, &[]).unwrap_err();
        assert_eq!(error.code, ErrorCode::Internal, "{sql}");
        assert!(
            !error.message.contains("sqlite"),
            "{sql}: {}",
            error.message
        );
    }
    // Declared tables read fine.
    let rows = engine
        .query(APP, &contract, "SELECT name FROM categories", &[])
        .unwrap();
    assert_eq!(
        rows,
        vec![json!({"name": "Travel"}).as_object().unwrap().clone()]
    );

    // Inside a mutation too: the work can reach only declared tables, and a refused
    // statement leaves no receipt.
    for sql in [
        "DELETE FROM _sasha_audit",
        "INSERT INTO _sasha_idempotency VALUES ('a', 'b', 'c', 'd', 'e', 'f')",
        "UPDATE _sasha_cursor_key SET key = zeroblob(32)",
        "DELETE FROM _sasha_cursor_key",
        "INSERT OR REPLACE INTO _sasha_cursor_key VALUES (1, zeroblob(32))",
        "DROP TABLE _sasha_cursor_key",
        "PRAGMA foreign_keys = OFF",
        "COMMIT",
        "DROP TABLE expenses",
    ] {
        let input = json!({"sql": sql});
        let error = engine
            .mutate(
                APP,
                &contract,
                receipt("alice", sql, &input),
                meta(),
                |tx| {
                    tx.execute_batch(sql).map_err(sql_error)?;
                    Err(AppError::from_code(ErrorCode::Internal))
                },
            )
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::Internal, "{sql}");
    }
    let conn = raw(&dir);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_idempotency"), 1);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_audit"), 1);
    assert_eq!(count(&conn, "SELECT count(*) FROM categories"), 1);
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM _sasha_cursor_key WHERE key != zeroblob(32)"
        ),
        1
    );
}

#[test]
fn query_maps_sqlite_values_to_json() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    add_category(&engine, &contract, "alice", "k1", "Travel");
    let input = json!({"amount": 12.5});
    engine
        .mutate(
            APP,
            &contract,
            receipt("alice", "k2", &input),
            meta(),
            |tx| {
                tx.execute(
                    "INSERT INTO expenses (spent_on, amount, category_id, created_by) \
                     VALUES ('2026-01-02', ?1, 1, 'alice')",
                    [12.5],
                )
                .map_err(sql_error)?;
                Ok(MutationOutcome {
                    result: json!({"id": 1}),
                    audit: vec![AuditRecord {
                        table: "expenses".into(),
                        record_id: "1".into(),
                        operation: AuditOperation::Create,
                        before: None,
                        after: Some(json!({"id": 1})),
                    }],
                })
            },
        )
        .unwrap();
    let rows = engine
        .query(
            APP,
            &contract,
            "SELECT id, spent_on, amount, note, _sasha_version FROM expenses WHERE created_by = ?1",
            &[Value::Text("alice".into())],
        )
        .unwrap();
    assert_eq!(
        serde_json::Value::Object(rows[0].clone()),
        json!({"id": 1, "spent_on": "2026-01-02", "amount": 12.5, "note": null, "_sasha_version": 1})
    );
    let error = engine
        .query(APP, &contract, "SELECT x'00' AS b", &[])
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Internal);
    // A write handed to `query` is refused even on a declared table.
    let error = engine
        .query(APP, &contract, "UPDATE categories SET name = 'x'", &[])
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Internal);
    assert_eq!(
        engine
            .query(APP, &contract, "SELECT name FROM categories", &[])
            .unwrap()[0]["name"],
        "Travel"
    );
}

#[test]
fn limits_are_resource_limit_errors() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    let params: Vec<Value> = (0..1101).map(Value::Integer).collect();
    let placeholders = vec!["?"; 1101].join(",");
    let error = engine
        .query(
            APP,
            &contract,
            &format!("SELECT id FROM categories WHERE id IN ({placeholders})"),
            &params,
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::ResourceLimit);

    let huge = "x".repeat(1_000_001);
    let input = json!({"name": "huge"});
    let error = engine
        .mutate(
            APP,
            &contract,
            receipt("alice", "huge", &input),
            meta(),
            create_category(&huge),
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::ResourceLimit);
    assert_eq!(
        count(&raw(&dir), "SELECT count(*) FROM _sasha_idempotency"),
        0
    );
}

#[test]
fn idempotency_replays_refuses_mismatch_and_scopes_by_actor() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    let input = json!({"name": "Travel"});
    let first = engine
        .mutate(
            APP,
            &contract,
            receipt("alice", "k1", &input),
            meta(),
            create_category("Travel"),
        )
        .unwrap();
    assert_eq!(
        first,
        json!({"id": 1, "name": "Travel", "_sasha_version": 1})
    );

    // Replay, also after a restart: the stored result, the work never runs.
    for engine in [engine.clone(), Engine::new(dir.path())] {
        let replay = engine
            .mutate(
                APP,
                &contract,
                receipt("alice", "k1", &json!({"name": "Travel"})),
                meta(),
                |_| -> Result<MutationOutcome, AppError> { panic!("a replay must not run") },
            )
            .unwrap();
        assert_eq!(replay, first);
    }
    let conn = raw(&dir);
    assert_eq!(count(&conn, "SELECT count(*) FROM categories"), 1);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_audit"), 1);

    // Same key, other input: refused, nothing written.
    let error = engine
        .mutate(
            APP,
            &contract,
            receipt("alice", "k1", &json!({"name": "Food"})),
            meta(),
            create_category("Food"),
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::IdempotencyMismatch);
    assert_eq!(count(&conn, "SELECT count(*) FROM categories"), 1);

    // The same key under another operation or actor is another receipt and never
    // sees alice's result.
    let mut other_operation = receipt("alice", "k1", &json!({"name": "Food"}));
    other_operation.operation = "update".into();
    let food = engine
        .mutate(
            APP,
            &contract,
            other_operation,
            meta(),
            create_category("Food"),
        )
        .unwrap();
    assert_eq!(food["name"], "Food");
    let bob = engine
        .mutate(
            APP,
            &contract,
            receipt("bob", "k1", &input),
            meta(),
            create_category("Books"),
        )
        .unwrap();
    assert_eq!(bob["name"], "Books");
    assert_eq!(count(&conn, "SELECT count(*) FROM categories"), 3);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_audit"), 3);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_idempotency"), 3);
}

#[test]
fn failed_work_writes_nothing_and_leaves_the_key_free() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    let input = json!({"name": "Travel"});
    let error = engine
        .mutate(
            APP,
            &contract,
            receipt("alice", "k1", &input),
            meta(),
            |tx| {
                create_category("Travel")(tx)?;
                Err(AppError::new(ErrorCode::Conflict, "stale version"))
            },
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Conflict);
    let conn = raw(&dir);
    assert_eq!(count(&conn, "SELECT count(*) FROM categories"), 0);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_idempotency"), 0);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_audit"), 0);

    // An audit record naming an undeclared table is refused too.
    let error = engine
        .mutate(
            APP,
            &contract,
            receipt("alice", "k1", &input),
            meta(),
            |tx| {
                let mut outcome = create_category("Travel")(tx)?;
                outcome.audit[0].table = "_sasha_audit".into();
                Ok(outcome)
            },
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Internal);
    assert_eq!(count(&conn, "SELECT count(*) FROM categories"), 0);

    // A unique violation maps to a conflict, never to SQLite's words.
    add_category(&engine, &contract, "alice", "k1", "Travel");
    let error = engine
        .mutate(
            APP,
            &contract,
            receipt("alice", "k2", &input),
            meta(),
            create_category("Travel"),
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Conflict);
    assert!(!error.message.contains("UNIQUE"));
    assert_eq!(count(&conn, "SELECT count(*) FROM categories"), 1);
}

#[test]
fn concurrent_duplicates_run_once() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    let runs = Arc::new(AtomicUsize::new(0));
    let input = json!({"name": "Travel"});
    let results: Vec<serde_json::Value> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..50)
            .map(|_| {
                let engine = engine.clone();
                let (contract, input, runs) = (&contract, &input, Arc::clone(&runs));
                scope.spawn(move || {
                    engine
                        .mutate(
                            APP,
                            contract,
                            receipt("alice", "same", input),
                            meta(),
                            move |tx| {
                                runs.fetch_add(1, Ordering::SeqCst);
                                create_category("Travel")(tx)
                            },
                        )
                        .unwrap()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(results.iter().all(|r| *r == results[0]));
    let conn = raw(&dir);
    assert_eq!(count(&conn, "SELECT count(*) FROM categories"), 1);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_audit"), 1);
}

#[test]
fn a_runaway_query_is_interrupted_and_the_connection_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::with_deadline(dir.path(), Duration::from_millis(200));
    engine.open(APP, &contract).unwrap();
    let started = Instant::now();
    let error = engine
        .query(
            APP,
            &contract,
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000000) \
             SELECT count(*) AS n FROM c",
            &[],
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::DatabaseUnavailable);
    assert!(error.retryable);
    assert!(error.message.contains("time limit"));
    assert!(started.elapsed() < Duration::from_secs(10));

    // The same for a runaway inside a mutation: rolled back, no receipt.
    let error = engine
        .mutate(
            APP,
            &contract,
            receipt("alice", "slow", &json!({})),
            meta(),
            |tx| {
                tx.execute(RUNAWAY_INSERT, []).map_err(sql_error)?;
                create_category("never")(tx)
            },
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::DatabaseUnavailable);

    add_category(&engine, &contract, "alice", "k1", "Travel");
    let rows = engine
        .query(APP, &contract, "SELECT count(*) AS n FROM categories", &[])
        .unwrap();
    assert_eq!(rows[0]["n"], 1);
}

#[test]
fn a_new_contract_revision_migrates_the_open_handle() {
    let dir = tempfile::tempdir().unwrap();
    let full = contract();
    let mut first = full.clone();
    first.migrations.truncate(1);
    first.hash = "first".into();
    // Revision 1 knows only migration 1 (no `note` column yet).
    first
        .schema
        .tables
        .get_mut("expenses")
        .unwrap()
        .columns
        .retain(|c| c.name != "note");
    let engine = Engine::new(dir.path());
    engine.open(APP, &first).unwrap();
    assert_eq!(
        count(&raw(&dir), "SELECT count(*) FROM _sasha_migrations"),
        1
    );
    engine.open(APP, &full).unwrap();
    assert_eq!(
        count(&raw(&dir), "SELECT count(*) FROM _sasha_migrations"),
        2
    );
    assert!(
        engine
            .query(APP, &full, "SELECT note FROM expenses", &[])
            .unwrap()
            .is_empty()
    );
}

/// Statements are cached per connection (keyed by text), so the decisions the
/// authorizer made when preparing them must not leak: a governed text equal to
/// one of the engine's own is refused rather than served the trusted statement,
/// and a contract that no longer declares a table refuses the statement that
/// read it a moment ago.
#[test]
fn cached_statements_keep_trust_and_contract_apart() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    add_category(&engine, &contract, "alice", "k1", "Travel");
    add_category(&engine, &contract, "alice", "k2", "Food");
    // The receipt lookup is cached now, prepared as trusted.
    let engine_text = "/* engine */ SELECT input_hash, result_json FROM _sasha_idempotency \
                       WHERE actor = ?1 AND operation = ?2 AND key = ?3";
    let params = ["alice", "create", "k1"].map(|text| Value::Text(text.into()));
    let error = engine
        .query(APP, &contract, engine_text, &params)
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Internal);
    // Without the mark the authorizer decides, as for any governed text.
    let error = engine
        .query(
            APP,
            &contract,
            &engine_text["/* engine */ ".len()..],
            &params,
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Internal);

    let read = "SELECT name FROM categories ORDER BY name";
    for _ in 0..2 {
        assert_eq!(engine.query(APP, &contract, read, &[]).unwrap().len(), 2);
    }
    let mut narrower = contract.clone();
    narrower.tables.clear();
    narrower.hash = "declares-nothing".into();
    let error = engine.query(APP, &narrower, read, &[]).unwrap_err();
    assert_eq!(error.code, ErrorCode::Internal, "{error:?}");
    // And back: the full contract reads again.
    assert_eq!(engine.query(APP, &contract, read, &[]).unwrap().len(), 2);
}

#[test]
fn a_locked_database_is_a_retryable_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    engine.open(APP, &contract).unwrap();
    // Another connection (another process, in real life) holds the write lock.
    let mut other = raw(&dir);
    let held = other
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    let input = json!({"name": "Travel"});
    let error = engine
        .mutate(
            APP,
            &contract,
            receipt("alice", "k1", &input),
            meta(),
            create_category("Travel"),
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::DatabaseUnavailable);
    assert!(error.retryable);
    drop(held);
    add_category(&engine, &contract, "alice", "k1", "Travel");
    // A CTE that shares a platform table's name is only the CTE.
    let rows = engine
        .query(
            APP,
            &contract,
            "WITH _sasha_audit AS (SELECT name FROM categories) SELECT name FROM _sasha_audit",
            &[],
        )
        .unwrap();
    assert_eq!(rows[0]["name"], "Travel");
}

#[test]
fn foreign_keys_to_an_undeclared_table_still_check() {
    let dir = tempfile::tempdir().unwrap();
    let mut contract = contract();
    contract.tables.remove("categories");
    contract.hash = "no-categories".into();
    let engine = Engine::new(dir.path());
    engine.open(APP, &contract).unwrap();
    raw(&dir)
        .execute("INSERT INTO categories (name) VALUES ('x')", [])
        .unwrap();
    let insert = |category: i64, key: &str| {
        engine.mutate(
            APP,
            &contract,
            receipt("a", key, &json!({ "category": category })),
            meta(),
            move |tx| {
                tx.execute(
                    "INSERT INTO expenses (spent_on, amount, category_id, created_by) \
                     VALUES ('d', 1, ?1, 'a')",
                    [category],
                )
                .map_err(sql_error)?;
                let id = tx.last_insert_rowid();
                Ok(MutationOutcome {
                    result: json!({ "id": id }),
                    audit: vec![AuditRecord {
                        table: "expenses".into(),
                        record_id: id.to_string(),
                        operation: AuditOperation::Create,
                        before: None,
                        after: None,
                    }],
                })
            },
        )
    };
    // The parent key is checked (the read is allowed) ...
    assert_eq!(insert(1, "k1").unwrap(), json!({"id": 1}));
    assert_eq!(insert(7, "k2").unwrap_err().code, ErrorCode::Conflict);
    // ... and the undeclared parent can be read (SQLite cannot tell a check's
    // read from a statement's) but never written.
    assert!(
        engine
            .query(APP, &contract, "SELECT name FROM categories", &[])
            .is_ok()
    );
    let error = engine
        .mutate(
            APP,
            &contract,
            receipt("a", "k3", &json!({})),
            meta(),
            |tx| {
                tx.execute("DELETE FROM categories", [])
                    .map_err(sql_error)?;
                Err(AppError::from_code(ErrorCode::Internal))
            },
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Internal);
    assert_eq!(count(&raw(&dir), "SELECT count(*) FROM categories"), 1);
}

#[test]
fn tables_with_rows_reads_without_opening_for_writes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::new(dir.path());
    let tables = [
        "categories".to_owned(),
        "expenses".to_owned(),
        "absent".to_owned(),
    ];
    // No file yet: nothing holds rows, and asking creates no file.
    assert_eq!(
        engine.tables_with_rows(APP, &tables).unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert_eq!(
        engine
            .tables_with_rows("../escape", &tables)
            .unwrap_err()
            .code,
        ErrorCode::NotFound
    );
    let contract = contract();
    engine.open(APP, &contract).unwrap();
    assert_eq!(
        engine.tables_with_rows(APP, &tables).unwrap(),
        Vec::<String>::new()
    );
    add_category(&engine, &contract, "user-1", "key-1", "Travel");
    // A table the file does not have is no error, and holds nothing.
    assert_eq!(
        engine.tables_with_rows(APP, &tables).unwrap(),
        ["categories"]
    );
}

#[test]
fn a_removed_data_file_is_backed_up_first() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    engine.open(APP, &contract).unwrap();
    {
        let conn = raw(&dir);
        conn.execute("INSERT INTO categories (name) VALUES ('travel')", [])
            .unwrap();
    }
    let removed = engine.back_up_and_remove(APP).unwrap().unwrap();
    assert!(
        removed.backup.starts_with(&format!("{BACKUP_DIR}/{APP}-")),
        "{removed:?}"
    );
    for suffix in ["", "-wal", "-shm"] {
        assert!(
            !dir.path().join(format!("{APP}.sqlite{suffix}")).exists(),
            "{suffix}"
        );
    }
    // The backup is the whole database, intact, as described.
    let backup = dir.path().join(&removed.backup);
    let bytes = std::fs::read(&backup).unwrap();
    assert_eq!(bytes.len() as u64, removed.bytes);
    assert_eq!(hex::encode(Sha256::digest(&bytes)), removed.sha256);
    let copy = Connection::open(&backup).unwrap();
    assert_eq!(count(&copy, "SELECT count(*) FROM categories"), 1);
    assert_eq!(count(&copy, "SELECT count(*) FROM _sasha_migrations"), 2);
    // Nothing left to remove; an id that is no file name is refused.
    assert!(engine.back_up_and_remove(APP).unwrap().is_none());
    assert_eq!(
        engine.back_up_and_remove("../x").unwrap_err().code,
        ErrorCode::NotFound
    );
}

/// `base` with one more migration (numbered next), its structure replayed
/// and its hash recomputed the way the validator computes them; a migration
/// that does not replay keeps `base`'s structure (it is meant to fail).
pub(super) fn with_migration(base: &DataContract, name: &str, sql: &str) -> DataContract {
    use sasha_contract::data::sha256_hex;
    let mut contract = base.clone();
    let number = u32::try_from(contract.migrations.len() + 1).unwrap();
    contract.migrations.push(Migration {
        file: format!("migrations/{number:03}-{name}.sql"),
        number,
        checksum: sha256_hex(sql.as_bytes()),
        sql: sql.to_owned(),
    });
    rehash(&mut contract);
    contract
}

/// Replays `contract`'s migrations into its structure (when they replay) and
/// recomputes its hash.
pub(super) fn rehash(contract: &mut DataContract) {
    let replay = Connection::open_in_memory().unwrap();
    if contract
        .migrations
        .iter()
        .all(|m| replay.execute_batch(&m.sql).is_ok())
    {
        contract.schema = read_schema(&replay).unwrap();
    }
    contract.hash = sasha_contract::data::contract_hash(&contract.tables, &contract.migrations);
}

fn migration_rows(dir: &tempfile::TempDir) -> Vec<(u32, String, String, String)> {
    let conn = raw(dir);
    let mut statement = conn
        .prepare("SELECT number, file, checksum, applied_at FROM _sasha_migrations ORDER BY number")
        .unwrap();
    statement
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn apply_contract_dry_run_reports_pending_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::new(dir.path());
    let full = contract();
    let files: Vec<String> = full.migrations.iter().map(|m| m.file.clone()).collect();
    // No file: every migration is pending, nothing drifted, no file made.
    let dry = engine
        .apply_contract(APP, &full, true, Approval::None, Publisher::default())
        .unwrap();
    assert_eq!(dry.applied, files);
    assert!(dry.drift.is_empty());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    // A file at migration 1: 2 and a new 3 are pending.
    let mut first = full.clone();
    first.migrations.truncate(1);
    rehash(&mut first);
    engine.open(APP, &first).unwrap();
    let draft = with_migration(
        &full,
        "colour",
        "ALTER TABLE categories ADD COLUMN colour TEXT;",
    );
    let before = migration_rows(&dir);
    assert_eq!(before.len(), 1);
    let dry = engine
        .apply_contract(APP, &draft, true, Approval::None, Publisher::default())
        .unwrap();
    assert_eq!(
        dry.applied,
        [files[1].clone(), "migrations/003-colour.sql".to_owned()]
    );
    assert!(dry.drift.is_empty());
    assert_eq!(migration_rows(&dir), before);
    assert_eq!(
        count(
            &raw(&dir),
            "SELECT count(*) FROM pragma_table_info('categories') WHERE name = 'colour'"
        ),
        0
    );
    assert_eq!(
        engine
            .apply_contract("../x", &draft, true, Approval::None, Publisher::default())
            .unwrap_err()
            .code,
        ErrorCode::NotFound
    );
}

#[test]
fn apply_contract_applies_pending_migrations_in_one_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::new(dir.path());
    let full = contract();
    engine.open(APP, &full).unwrap();
    add_category(&engine, &full, "alice", "k1", "Travel");
    let draft = with_migration(
        &full,
        "colour",
        "ALTER TABLE categories ADD COLUMN colour TEXT;",
    );

    // A later migration that fails takes the earlier pending one with it.
    let broken = with_migration(&draft, "broken", "CREATE TABLE categories (id INTEGER);");
    let error = engine
        .apply_contract(APP, &broken, false, Approval::None, Publisher::default())
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::MigrationFailed);
    assert_eq!(migration_rows(&dir).len(), 2);
    assert_eq!(
        count(
            &raw(&dir),
            "SELECT count(*) FROM pragma_table_info('categories') WHERE name = 'colour'"
        ),
        0
    );

    let applied = engine
        .apply_contract(APP, &draft, false, Approval::None, Publisher::default())
        .unwrap();
    assert_eq!(applied.applied, ["migrations/003-colour.sql"]);
    assert!(applied.drift.is_empty());
    let rows = migration_rows(&dir);
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2].1, "migrations/003-colour.sql");
    assert_eq!(
        engine
            .query(APP, &draft, "SELECT name, colour FROM categories", &[])
            .unwrap()
            .len(),
        1
    );
    // Applying again applies nothing, from the open slot or a fresh engine.
    assert!(
        engine
            .apply_contract(APP, &draft, false, Approval::None, Publisher::default())
            .unwrap()
            .applied
            .is_empty()
    );
    let engine = Engine::new(dir.path());
    assert!(
        engine
            .apply_contract(APP, &draft, false, Approval::None, Publisher::default())
            .unwrap()
            .applied
            .is_empty()
    );
    assert!(
        engine
            .apply_contract(APP, &draft, true, Approval::None, Publisher::default())
            .unwrap()
            .applied
            .is_empty()
    );
    assert_eq!(migration_rows(&dir), rows);
}

#[test]
fn apply_contract_with_drift_applies_nothing_and_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let full = contract();
    Engine::new(dir.path()).open(APP, &full).unwrap();
    let before = migration_rows(&dir);
    let mut edited = with_migration(
        &full,
        "colour",
        "ALTER TABLE categories ADD COLUMN colour TEXT;",
    );
    edited.migrations[0]
        .sql
        .push_str("\n-- edited after it was applied\n");
    edited.migrations[0].checksum =
        sasha_contract::data::sha256_hex(edited.migrations[0].sql.as_bytes());
    rehash(&mut edited);
    let expected = vec![Drift {
        number: 1,
        file: full.migrations[0].file.clone(),
        kind: DriftKind::ChecksumChanged,
        applied_checksum: full.migrations[0].checksum.clone(),
        contract_checksum: Some(edited.migrations[0].checksum.clone()),
    }];
    // Without an open connection, then with one (the slot's handle is asked).
    for engine in [Engine::new(dir.path()), {
        let engine = Engine::new(dir.path());
        engine.open(APP, &full).unwrap();
        engine
    }] {
        let dry = engine
            .apply_contract(APP, &edited, true, Approval::None, Publisher::default())
            .unwrap();
        assert_eq!(dry.drift, expected);
        assert_eq!(dry.applied, ["migrations/003-colour.sql"]);
        let refused = engine
            .apply_contract(APP, &edited, false, Approval::None, Publisher::default())
            .unwrap();
        assert_eq!(refused.drift, expected);
        assert!(refused.applied.is_empty());
        assert_eq!(migration_rows(&dir), before);
        assert_eq!(
            count(
                &raw(&dir),
                "SELECT count(*) FROM pragma_table_info('categories') WHERE name = 'colour'"
            ),
            0
        );
    }
    // A contract that drops an applied migration is drift too.
    let mut shorter = full.clone();
    shorter.migrations.truncate(1);
    rehash(&mut shorter);
    let refused = Engine::new(dir.path())
        .apply_contract(APP, &shorter, false, Approval::None, Publisher::default())
        .unwrap();
    assert_eq!(refused.drift.len(), 1);
    assert_eq!(refused.drift[0].kind, DriftKind::NotInContract);
    assert_eq!(migration_rows(&dir), before);
}

#[test]
fn a_rebuilt_table_keeps_its_rows_and_versions_only_rise() {
    let dir = tempfile::tempdir().unwrap();
    Engine::new(dir.path()).open(APP, &contract()).unwrap();
    {
        let conn = raw(&dir);
        conn.execute_batch(
            "INSERT INTO categories (id, name) VALUES (1, 'travel');
             INSERT INTO expenses (id, spent_on, amount, category_id, created_by)
               VALUES (7, '2026-12-01', 12.5, 1, 'alice'), (8, '2026-12-02', 3, 1, 'bob');
             UPDATE expenses SET _sasha_version = 4 WHERE id = 7;",
        )
        .unwrap();
    }
    let mut rebuilt = contract();
    let sql = "CREATE TABLE expenses_new (id INTEGER PRIMARY KEY, spent_on DATE NOT NULL, \
               amount REAL NOT NULL CONSTRAINT \"amount must be positive\" CHECK (amount > 0), \
               category_id INTEGER NOT NULL REFERENCES categories(id), created_by TEXT NOT NULL, note TEXT);
               INSERT INTO expenses_new (id, spent_on, amount, category_id, created_by, note)
                 SELECT id, spent_on, amount, category_id, created_by, note FROM expenses;
               DROP TABLE expenses;
               ALTER TABLE expenses_new RENAME TO expenses;
               CREATE INDEX expenses_by_day ON expenses (created_by, spent_on);";
    rebuilt.migrations.push(Migration {
        file: "migrations/003-rebuild.sql".into(),
        number: 3,
        sql: sql.into(),
        checksum: "3".repeat(64),
    });
    let replay = Connection::open_in_memory().unwrap();
    for migration in &rebuilt.migrations {
        replay.execute_batch(&migration.sql).unwrap();
    }
    rebuilt.schema = read_schema(&replay).unwrap();
    rebuilt.hash = "rebuilt".into();

    Engine::new(dir.path()).open(APP, &rebuilt).unwrap();
    let conn = raw(&dir);
    let rows: Vec<(i64, String, i64)> = conn
        .prepare("SELECT id, created_by, _sasha_version FROM expenses ORDER BY id")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    // Every row kept its id and owner, and is above version 4, which a
    // caller may still hold for row 7.
    assert_eq!(rows, [(7, "alice".to_owned(), 5), (8, "bob".to_owned(), 5)]);
    let declared: String = conn
        .query_row(
            "SELECT type FROM pragma_table_info('expenses') WHERE name = 'spent_on'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(declared, "DATE");
}

/// The process umask for a scope, restored on drop.
struct Umask(rustix::fs::Mode);

impl Umask {
    fn set(mask: u32) -> Umask {
        Umask(rustix::process::umask(rustix::fs::Mode::from_raw_mode(
            mask,
        )))
    }
}

impl Drop for Umask {
    fn drop(&mut self) {
        rustix::process::umask(self.0);
    }
}

#[test]
fn app_data_files_and_folders_are_private_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |path: &std::path::Path| {
        std::fs::metadata(path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
            .permissions()
            .mode()
            & 0o777
    };
    let with_suffix =
        |path: &std::path::Path, suffix: &str| PathBuf::from(format!("{}{suffix}", path.display()));
    // The widest umask: what SQLite's 0644 and a plain mkdir's 0777 keep.
    let _umask = Umask::set(0);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("apps");
    files::private_root(&root).unwrap();
    assert_eq!(mode(&root), 0o700);
    let contract = contract();
    let engine = Engine::new(&root);

    // The live file and the WAL and shared-memory files beside it.
    add_category(&engine, &contract, "alice", "k1", "Travel");
    let live = root.join(format!("{APP}.sqlite"));
    for suffix in ["", "-wal", "-shm"] {
        assert_eq!(mode(&with_suffix(&live, suffix)), 0o600, "live{suffix}");
    }
    // A preview's folders and scratch copy.
    let scope = sasha_contract::data::PreviewScope::of_live(Some(&contract.tables), Some(false));
    engine
        .open(
            Target::Preview {
                app_id: APP,
                preview: preview::Preview {
                    id: "0123456789abcdef0123456789abcdef",
                    previewer: "alice",
                    scope: &scope,
                },
            },
            &contract,
        )
        .unwrap();
    let previews = root.join(preview::PREVIEW_DIR);
    assert_eq!(mode(&previews), 0o700);
    assert_eq!(mode(&previews.join(APP)), 0o700);
    let scratch: Vec<PathBuf> = std::fs::read_dir(previews.join(APP))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert!(scratch.len() >= 2, "{scratch:?}");
    for file in &scratch {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    // A deleted app's backup and its folder.
    let removed = engine.back_up_and_remove(APP).unwrap().unwrap();
    assert_eq!(mode(&root.join(BACKUP_DIR)), 0o700);
    assert_eq!(mode(&root.join(&removed.backup)), 0o600);

    // A file an older version left 0644 is narrowed, with its WAL, on open.
    let old = tempfile::tempdir().unwrap();
    let engine = Engine::new(old.path());
    add_category(&engine, &contract, "alice", "k1", "Travel");
    drop(engine);
    let live = old.path().join(format!("{APP}.sqlite"));
    std::fs::write(with_suffix(&live, "-wal"), b"").unwrap();
    for suffix in ["", "-wal"] {
        std::fs::set_permissions(
            with_suffix(&live, suffix),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
    }
    let engine = Engine::new(old.path());
    add_category(&engine, &contract, "alice", "k2", "Food");
    for suffix in ["", "-wal", "-shm"] {
        assert_eq!(mode(&with_suffix(&live, suffix)), 0o600, "old{suffix}");
    }
}
