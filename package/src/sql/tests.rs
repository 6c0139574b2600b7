//! The SQL validator's unit tests: the schema and migration grammar, the
//! authorizer, replay, and every refusal with its line.

use super::*;
use crate::manifest::{Capabilities, Theme};

type Found = Vec<(String, Option<u32>, String, String)>;
type Declared<'a> = &'a [(&'a str, Access, Option<&'a str>)];

fn manifest(data: DataCapability, tables: &[(&str, Access, Option<&str>)]) -> Manifest {
    Manifest {
        id: "time-sheet".to_owned(),
        name: "Time Sheet".to_owned(),
        description: "Log hours".to_owned(),
        version: "1.0.0".to_owned(),
        theme: Theme::None,
        capabilities: Capabilities {
            chat: false,
            files: false,
            data,
        },
        tables: tables
            .iter()
            .map(|(name, access, owner)| {
                let declaration = TableDeclaration {
                    access: *access,
                    owner_field: owner.map(str::to_owned),
                    write: Default::default(),
                    managers_read_all: false,
                };
                ((*name).to_owned(), declaration)
            })
            .collect(),
        actions: Vec::new(),
    }
}

fn time_sheet() -> Manifest {
    manifest(
        DataCapability::ReadWrite,
        &[
            ("entries", Access::Owner, Some("created_by")),
            ("projects", Access::Shared, None),
        ],
    )
}

const SCHEMA: &str = "\
-- Time Sheet Entry: the final structure.
CREATE TABLE projects (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  code TEXT NOT NULL UNIQUE
);

CREATE TABLE entries (
  id INTEGER PRIMARY KEY,
  date TEXT NOT NULL CHECK (length(date) = 10),
  project INTEGER NOT NULL REFERENCES projects(id),
  hours REAL NOT NULL CHECK (hours > 0 AND hours <= 24),
  created_by TEXT NOT NULL,
  note TEXT NOT NULL DEFAULT ''
);
CREATE INDEX entries_by_owner_date ON entries(created_by, date);
";

const INITIAL: &str = "\
CREATE TABLE projects (id INTEGER PRIMARY KEY, name TEXT NOT NULL, code TEXT NOT NULL UNIQUE);
CREATE TABLE entries (
  id INTEGER PRIMARY KEY,
  date TEXT NOT NULL CHECK (length(date) = 10),
  project INTEGER NOT NULL REFERENCES projects(id),
  hours REAL NOT NULL CHECK (hours > 0 AND hours <= 24),
  created_by TEXT NOT NULL
);
CREATE INDEX entries_by_date ON entries(date);
";

const ADD_NOTES: &str = "\
ALTER TABLE entries ADD COLUMN note TEXT NOT NULL DEFAULT '';
DROP INDEX entries_by_date;
CREATE INDEX entries_by_owner_date ON entries(created_by, date);
";

fn time_sheet_files() -> Vec<(&'static str, &'static str)> {
    vec![
        ("schema.sql", SCHEMA),
        ("migrations/001-initial.sql", INITIAL),
        ("migrations/002-add-notes.sql", ADD_NOTES),
        ("index.html", "<!doctype html>"),
    ]
}

fn check(manifest: &Manifest, files: &[(&str, &str)]) -> (Option<DataContract>, Found) {
    let files: BTreeMap<String, String> = files
        .iter()
        .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
        .collect();
    let mut diagnostics = Diagnostics::new();
    let contract = check_data(manifest, &files, &mut diagnostics);
    let found = diagnostics
        .into_sorted()
        .into_iter()
        .map(|d| (d.file, d.line, d.code, d.reason))
        .collect();
    (contract, found)
}

fn codes(found: &Found) -> Vec<&str> {
    found.iter().map(|(_, _, code, _)| code.as_str()).collect()
}

/// Checks `sql` as schema.sql (after the time-sheet schema) and returns
/// the diagnostics for schema.sql.
fn check_schema_statement(sql: &str) -> Found {
    let text = format!("{SCHEMA}{sql}\n");
    let mut files = time_sheet_files();
    files[0] = ("schema.sql", &text);
    let (_, found) = check(&time_sheet(), &files);
    found
        .into_iter()
        .filter(|(file, ..)| file == "schema.sql")
        .collect()
}

/// Checks `sql` as a third migration and returns its diagnostics.
fn check_migration_statement(sql: &str) -> Found {
    let mut files = time_sheet_files();
    files.push(("migrations/003-more.sql", sql));
    let (_, found) = check(&time_sheet(), &files);
    found
        .into_iter()
        .filter(|(file, ..)| file == "migrations/003-more.sql")
        .collect()
}

#[test]
fn the_time_sheet_contract_is_built() {
    let (contract, found) = check(&time_sheet(), &time_sheet_files());
    assert!(found.is_empty(), "{found:#?}");
    let contract = contract.unwrap();
    assert_eq!(contract.migrations.len(), 2);
    assert_eq!(contract.migrations[0].number, 1);
    assert_eq!(contract.migrations[1].file, "migrations/002-add-notes.sql");
    assert_eq!(
        contract.migrations[0].checksum,
        sha256_hex(INITIAL.as_bytes())
    );
    assert_eq!(contract.hash.len(), 64);
    let (declaration, entries) = contract.declared_table("entries").unwrap();
    assert_eq!(declaration.owner_field.as_deref(), Some("created_by"));
    let names: Vec<&str> = entries.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["id", "date", "project", "hours", "created_by", "note"]
    );
    let id = entries.column("id").unwrap();
    assert!(id.primary_key && id.declared_type == "INTEGER");
    let note = entries.column("note").unwrap();
    assert_eq!(note.default_value.as_deref(), Some("''"));
    assert!(note.not_null);
    assert_eq!(entries.foreign_keys[0].parent_table, "projects");
    let projects = &contract.schema.tables["projects"];
    assert_eq!(projects.unique, vec![vec!["code".to_owned()]]);
    let index = &contract.schema.indexes["entries_by_owner_date"];
    assert_eq!(index.columns, ["created_by", "date"]);
    assert!(!index.unique);
    assert_eq!(
        contract.schema.indexes.len(),
        1,
        "constraint indexes are recorded on tables"
    );
    // Serialisable for the registry and the data-worker.
    let json = serde_json::to_value(&contract).unwrap();
    assert_eq!(json["tables"]["entries"]["ownerField"], "created_by");
    assert_eq!(
        json["schema"]["tables"]["entries"]["columns"][0]["declaredType"],
        "INTEGER"
    );
    let back: DataContract = serde_json::from_value(json).unwrap();
    assert_eq!(back, contract);
}

#[test]
fn the_hash_covers_declarations_and_migrations() {
    let (first, _) = check(&time_sheet(), &time_sheet_files());
    let (again, _) = check(&time_sheet(), &time_sheet_files());
    assert_eq!(first.as_ref().unwrap().hash, again.unwrap().hash);

    let mut shared = time_sheet();
    shared.tables.get_mut("entries").unwrap().access = Access::Shared;
    shared.tables.get_mut("entries").unwrap().owner_field = None;
    let (other, found) = check(&shared, &time_sheet_files());
    assert!(found.is_empty(), "{found:#?}");
    assert_ne!(first.as_ref().unwrap().hash, other.unwrap().hash);

    let mut files = time_sheet_files();
    let edited = format!("{ADD_NOTES}-- edited\n");
    files[2] = ("migrations/002-add-notes.sql", &edited);
    let (other, found) = check(&time_sheet(), &files);
    assert!(found.is_empty(), "{found:#?}");
    assert_ne!(first.unwrap().hash, other.unwrap().hash);
}

#[test]
fn apps_without_data_have_no_data_files() {
    let none = manifest(DataCapability::None, &[("entries", Access::Shared, None)]);
    let (contract, found) = check(&none, &time_sheet_files());
    assert!(contract.is_none());
    assert_eq!(
        found
            .iter()
            .map(|(file, _, code, _)| (file.as_str(), code.as_str()))
            .collect::<Vec<_>>(),
        [
            ("APP.md", "SQL_DATA_NOT_ENABLED"),
            ("migrations/001-initial.sql", "SQL_DATA_NOT_ENABLED"),
            ("migrations/002-add-notes.sql", "SQL_DATA_NOT_ENABLED"),
            ("schema.sql", "SQL_DATA_NOT_ENABLED"),
        ]
    );
    let plain = manifest(DataCapability::None, &[]);
    let (contract, found) = check(&plain, &[("index.html", "")]);
    assert!(contract.is_none() && found.is_empty(), "{found:#?}");
}

#[test]
fn data_apps_need_schema_migrations_and_tables() {
    let read = manifest(DataCapability::Read, &[]);
    let (contract, found) = check(&read, &[("index.html", "")]);
    assert!(contract.is_none());
    assert_eq!(
        codes(&found),
        [
            "SQL_TABLES_MISSING",
            "SQL_MIGRATIONS_MISSING",
            "SQL_SCHEMA_MISSING"
        ]
    );
}

#[test]
fn statements_outside_the_allowlist_are_refused_in_schema_sql() {
    let cases = [
        (
            "INSERT INTO projects (name, code) VALUES ('a', 'b');",
            "SQL_SEED_REFUSED",
        ),
        (
            "REPLACE INTO projects (id, name, code) VALUES (1, 'a', 'b');",
            "SQL_SEED_REFUSED",
        ),
        ("UPDATE projects SET name = 'x';", "SQL_SEED_REFUSED"),
        ("DELETE FROM projects;", "SQL_SEED_REFUSED"),
        (
            "ATTACH DATABASE ':memory:' AS other;",
            "SQL_STATEMENT_REFUSED",
        ),
        ("DETACH DATABASE other;", "SQL_STATEMENT_REFUSED"),
        ("PRAGMA foreign_keys = ON;", "SQL_STATEMENT_REFUSED"),
        ("PRAGMA writable_schema = 1;", "SQL_STATEMENT_REFUSED"),
        (
            "CREATE TRIGGER stamp AFTER INSERT ON projects BEGIN DELETE FROM projects; END;",
            "SQL_STATEMENT_REFUSED",
        ),
        (
            "CREATE VIEW names AS SELECT name FROM projects;",
            "SQL_STATEMENT_REFUSED",
        ),
        (
            "CREATE VIRTUAL TABLE search USING fts5(body);",
            "SQL_STATEMENT_REFUSED",
        ),
        (
            "CREATE TEMP TABLE scratch (a TEXT);",
            "SQL_STATEMENT_REFUSED",
        ),
        (
            "CREATE TABLE copy AS SELECT * FROM projects;",
            "SQL_STATEMENT_REFUSED",
        ),
        ("SELECT 1;", "SQL_STATEMENT_REFUSED"),
        (
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT x FROM n;",
            "SQL_STATEMENT_REFUSED",
        ),
        ("BEGIN;", "SQL_STATEMENT_REFUSED"),
        ("COMMIT;", "SQL_STATEMENT_REFUSED"),
        ("SAVEPOINT one;", "SQL_STATEMENT_REFUSED"),
        ("VACUUM;", "SQL_STATEMENT_REFUSED"),
        ("ANALYZE;", "SQL_STATEMENT_REFUSED"),
        ("REINDEX;", "SQL_STATEMENT_REFUSED"),
        (
            "EXPLAIN CREATE TABLE other (id INTEGER PRIMARY KEY);",
            "SQL_STATEMENT_REFUSED",
        ),
        (
            "SELECT load_extension('/tmp/evil.so');",
            "SQL_STATEMENT_REFUSED",
        ),
        (
            "CREATE TABLE other (a TEXT DEFAULT (load_extension('x')));",
            "SQL_FUNCTION_REFUSED",
        ),
        (
            "CREATE TABLE other (a BLOB CHECK (randomblob(10) IS NOT NULL));",
            "SQL_FUNCTION_REFUSED",
        ),
        ("DROP TABLE projects;", "SQL_MIGRATION_ONLY"),
        ("DROP INDEX entries_by_owner_date;", "SQL_MIGRATION_ONLY"),
        (
            "ALTER TABLE projects ADD COLUMN color TEXT;",
            "SQL_MIGRATION_ONLY",
        ),
        (
            "CREATE TABLE _sasha_audit (id INTEGER PRIMARY KEY);",
            "SQL_RESERVED_NAME",
        ),
        (
            "CREATE TABLE \"_Sasha_x\" (id INTEGER PRIMARY KEY);",
            "SQL_RESERVED_NAME",
        ),
        ("INSERT INTO sqlite_master VALUES (1);", "SQL_RESERVED_NAME"),
        // Litestream keeps these in every replicated database.
        (
            "CREATE TABLE _litestream_seq (id INTEGER PRIMARY KEY);",
            "SQL_RESERVED_NAME",
        ),
        (
            "CREATE TABLE other (id INTEGER PRIMARY KEY, _sasha_version INTEGER);",
            "SQL_RESERVED_NAME",
        ),
        ("CREATE TABEL other (a);", "SQL_SYNTAX"),
        ("CREATE TABLE other (a", "SQL_SYNTAX"),
        (
            "CREATE INDEX nowhere ON missing(a);",
            "SQL_STATEMENT_FAILED",
        ),
        (
            "CREATE TABLE projects (id INTEGER PRIMARY KEY);",
            "SQL_STATEMENT_FAILED",
        ),
    ];
    let line = u32::try_from(SCHEMA.lines().count()).unwrap() + 1;
    for (sql, code) in cases {
        let found = check_schema_statement(sql);
        assert_eq!(codes(&found), [code], "{sql}: {found:#?}");
        assert_eq!(found[0].1, Some(line), "{sql}");
        let reason = &found[0].3;
        assert!(reason.starts_with(|c: char| c.is_lowercase()), "{reason}");
        assert!(!reason.ends_with('.'), "{reason}");
    }
}

#[test]
fn refusals_say_what_to_do() {
    let found = check_schema_statement("INSERT INTO projects (name, code) VALUES ('a', 'b');");
    assert!(found[0].3.contains("never seed rows"), "{found:?}");
    let found = check_schema_statement("PRAGMA foreign_keys = ON;");
    assert!(found[0].3.contains("PRAGMA"), "{found:?}");
    let found = check_schema_statement("DROP TABLE projects;");
    assert!(found[0].3.contains("belongs in a migration"), "{found:?}");
    let found = check_schema_statement("VACUUM;");
    assert!(found[0].3.contains("VACUUM is refused"), "{found:?}");
}

#[test]
fn vacuum_into_writes_nothing() {
    let folder = tempfile::tempdir().unwrap();
    let target = folder.path().join("copy.db");
    let found = check_schema_statement(&format!("VACUUM INTO '{}';", target.display()));
    assert_eq!(codes(&found), ["SQL_STATEMENT_REFUSED"]);
    assert!(!target.exists());
}

#[test]
fn messages_carry_no_absolute_paths() {
    assert_eq!(
        sanitize("unable to open database: /var/lib/x.db."),
        "unable to open database: <path>"
    );
    assert_eq!(
        sanitize("cannot open 'C:\\data\\x.db'"),
        "cannot open <path>"
    );
    assert_eq!(
        sanitize("Near \"x\": syntax error"),
        "near \"x\": syntax error"
    );
}

#[test]
fn every_independent_statement_problem_is_reported() {
    let found = check_schema_statement(
        "INSERT INTO projects (name, code) VALUES ('a', 'b');\nPRAGMA foreign_keys = ON;\nCREATE TABLE broken (a;\nCREATE INDEX on_broken ON broken(a);\nCREATE VIEW v AS SELECT 1;",
    );
    // The failed index is the echo of the broken table and stays quiet.
    assert_eq!(
        codes(&found),
        [
            "SQL_SEED_REFUSED",
            "SQL_STATEMENT_REFUSED",
            "SQL_SYNTAX",
            "SQL_STATEMENT_REFUSED"
        ],
        "{found:#?}"
    );
    let first = u32::try_from(SCHEMA.lines().count()).unwrap() + 1;
    let lines: Vec<Option<u32>> = found.iter().map(|f| f.1).collect();
    assert_eq!(
        lines,
        [
            Some(first),
            Some(first + 1),
            Some(first + 2),
            Some(first + 4)
        ]
    );
}

#[test]
fn internal_tables_and_pure_expressions_are_allowed() {
    let found = check_schema_statement(
        "CREATE TABLE tags (id TEXT PRIMARY KEY, label TEXT NOT NULL CHECK (length(label) <= 40) DEFAULT (lower('x')), at TEXT DEFAULT (datetime('now'))) STRICT;\nCREATE TABLE counters (id INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER) ;\nCREATE UNIQUE INDEX IF NOT EXISTS tags_by_label ON tags(label);",
    );
    // Present in schema.sql but not in the migrations: only replay mismatches.
    assert!(
        found.iter().all(|f| f.2 == "SQL_REPLAY_MISMATCH"),
        "{found:#?}"
    );
    assert_eq!(found.len(), 3, "{found:#?}");
}

#[test]
fn migrations_may_alter_and_drop() {
    let found = check_migration_statement(
        "CREATE TABLE old_things (id INTEGER PRIMARY KEY, a TEXT);\nALTER TABLE old_things RENAME COLUMN a TO b;\nALTER TABLE old_things ADD COLUMN c INTEGER;\nCREATE INDEX old_by_b ON old_things(b);\nDROP INDEX old_by_b;\nDROP TABLE old_things;\nDROP TABLE IF EXISTS never_was;\nDROP INDEX IF EXISTS never_was_either;",
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn migrations_refuse_seeds_and_other_alterations() {
    let cases = [
        (
            "INSERT INTO projects (name, code) VALUES ('a', 'b');",
            "SQL_SEED_REFUSED",
        ),
        ("UPDATE entries SET hours = 1;", "SQL_SEED_REFUSED"),
        ("DELETE FROM entries;", "SQL_SEED_REFUSED"),
        ("ALTER TABLE entries DROP COLUMN note;", "SQL_ALTER_REFUSED"),
        ("ALTER TABLE main.entries DROP note;", "SQL_ALTER_REFUSED"),
        (
            "ALTER TABLE entries RENAME TO entries_old;",
            "SQL_ALTER_REFUSED",
        ),
        ("DROP TABLE IF EXISTS _sasha_audit;", "SQL_RESERVED_NAME"),
        (
            "ALTER TABLE entries RENAME COLUMN note TO _sasha_version;",
            "SQL_RESERVED_NAME",
        ),
        ("PRAGMA journal_mode = DELETE;", "SQL_STATEMENT_REFUSED"),
        (
            "CREATE TRIGGER t AFTER DELETE ON entries BEGIN SELECT 1; END;",
            "SQL_STATEMENT_REFUSED",
        ),
        ("DROP TRIGGER IF EXISTS t;", "SQL_STATEMENT_REFUSED"),
    ];
    for (sql, code) in cases {
        let found = check_migration_statement(sql);
        assert_eq!(codes(&found), [code], "{sql}: {found:#?}");
        assert_eq!(found[0].1, Some(1), "{sql}");
    }
}

#[test]
fn renamed_columns_replay() {
    let schema = SCHEMA.replace("note TEXT", "remark TEXT");
    let mut files = time_sheet_files();
    files[0] = ("schema.sql", &schema);
    files.push((
        "migrations/003-rename-note.sql",
        "ALTER TABLE entries RENAME COLUMN note TO remark;",
    ));
    let (contract, found) = check(&time_sheet(), &files);
    assert!(found.is_empty(), "{found:#?}");
    assert!(
        contract.unwrap().schema.tables["entries"]
            .column("remark")
            .is_some()
    );
}

#[test]
fn replay_mismatches_name_the_table_and_column() {
    let cases: [(&str, &str, &[&str]); 8] = [
        (
            "note TEXT NOT NULL DEFAULT ''",
            "note TEXT NOT NULL DEFAULT 'none'",
            &["entries.note", "default"],
        ),
        (
            "note TEXT NOT NULL DEFAULT ''",
            "note VARCHAR(200) NOT NULL DEFAULT ''",
            &["entries.note", "type"],
        ),
        (
            "note TEXT NOT NULL DEFAULT ''",
            "note TEXT DEFAULT ''",
            &["entries.note", "NOT NULL"],
        ),
        (
            "  created_by TEXT NOT NULL,\n  note TEXT NOT NULL DEFAULT ''\n",
            "  created_by TEXT NOT NULL\n",
            &["entries.note", "add it to schema.sql"],
        ),
        (
            "note TEXT NOT NULL DEFAULT ''",
            "note TEXT NOT NULL DEFAULT '',\n  extra INTEGER",
            &["entries.extra", "not after the migrations"],
        ),
        (
            "CREATE INDEX entries_by_owner_date ON entries(created_by, date);",
            "CREATE INDEX entries_by_owner_date ON entries(date, created_by);",
            &["index entries_by_owner_date"],
        ),
        (
            "CREATE INDEX entries_by_owner_date ON entries(created_by, date);",
            "",
            &["index entries_by_owner_date", "migrations leave"],
        ),
        (
            "code TEXT NOT NULL UNIQUE",
            "code TEXT NOT NULL",
            &["UNIQUE constraints of projects"],
        ),
    ];
    for (from, to, needles) in cases {
        let schema = SCHEMA.replace(from, to);
        assert_ne!(schema, SCHEMA);
        let mut files = time_sheet_files();
        files[0] = ("schema.sql", &schema);
        let (contract, found) = check(&time_sheet(), &files);
        assert!(contract.is_none());
        let mismatches: Vec<_> = found
            .iter()
            .filter(|f| f.2 == "SQL_REPLAY_MISMATCH")
            .collect();
        assert_eq!(mismatches.len(), 1, "{to}: {found:#?}");
        for needle in needles {
            assert!(mismatches[0].3.contains(needle), "{needle}: {found:#?}");
        }
    }
}

#[test]
fn replay_reports_each_difference_and_missing_tables() {
    let schema = format!(
        "{}\nCREATE TABLE extra (id INTEGER PRIMARY KEY);\n",
        SCHEMA.replace("note TEXT NOT NULL DEFAULT ''", "note INTEGER DEFAULT 0")
    );
    let mut files = time_sheet_files();
    files[0] = ("schema.sql", &schema);
    files.push((
        "migrations/003-leftover.sql",
        "CREATE TABLE leftover (id INTEGER PRIMARY KEY);",
    ));
    let (_, found) = check(&time_sheet(), &files);
    let reasons: Vec<&str> = found.iter().map(|f| f.3.as_str()).collect();
    assert_eq!(found.len(), 5, "{found:#?}");
    assert!(found.iter().all(|f| f.2 == "SQL_REPLAY_MISMATCH"));
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("entries.note differs in type"))
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("entries.note differs in NOT NULL"))
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("entries.note differs in default"))
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("table extra is in schema.sql"))
    );
    let leftover = found
        .iter()
        .find(|f| f.3.contains("table leftover"))
        .unwrap();
    assert_eq!(
        (leftover.0.as_str(), leftover.1),
        ("migrations/003-leftover.sql", Some(1))
    );
    // The table mismatch points at the CREATE TABLE line in schema.sql.
    let note = found
        .iter()
        .find(|f| f.3.contains("differs in type"))
        .unwrap();
    assert_eq!(note.1, Some(8));
}

#[test]
fn column_order_must_match() {
    let schema = SCHEMA.replace(
        "  created_by TEXT NOT NULL,\n  note TEXT NOT NULL DEFAULT ''\n",
        "  note TEXT NOT NULL DEFAULT '',\n  created_by TEXT NOT NULL\n",
    );
    let mut files = time_sheet_files();
    files[0] = ("schema.sql", &schema);
    let (_, found) = check(&time_sheet(), &files);
    assert_eq!(codes(&found), ["SQL_REPLAY_MISMATCH"]);
    assert!(found[0].3.contains("different order"), "{found:#?}");
}

#[test]
fn migration_names_and_numbering() {
    for bad in [
        "migrations/1-initial.sql",
        "migrations/001_initial.sql",
        "migrations/001-Initial.sql",
        "migrations/001-.sql",
        "migrations/000-initial.sql",
        "migrations/001-initial.SQL",
        "migrations/old/001-initial.sql",
        "migrations/README.md",
    ] {
        let mut files = time_sheet_files();
        files.push((bad, "CREATE TABLE x (id INTEGER PRIMARY KEY);"));
        let (_, found) = check(&time_sheet(), &files);
        assert_eq!(codes(&found), ["SQL_MIGRATION_NAME"], "{bad}: {found:#?}");
        assert_eq!(found[0].0, bad);
    }
    let mut files = time_sheet_files();
    files.push(("migrations/004-later.sql", ""));
    let (_, found) = check(&time_sheet(), &files);
    assert_eq!(codes(&found), ["SQL_MIGRATION_ORDER"], "{found:#?}");
    assert!(found[0].3.contains("003 is missing"));

    let mut files = time_sheet_files();
    files.push(("migrations/002-again.sql", ""));
    let (_, found) = check(&time_sheet(), &files);
    assert_eq!(codes(&found), ["SQL_MIGRATION_ORDER"], "{found:#?}");
    assert!(found[0].3.contains("already has number 002"));
}

#[test]
fn oversized_files_are_refused_quickly() {
    let big = format!("{SCHEMA}--{}\n", "x".repeat(MAX_SQL_FILE_BYTES));
    let found = check_schema_statement(&big[SCHEMA.len()..]);
    assert_eq!(codes(&found), ["SQL_FILE_TOO_LARGE"]);
    let many = "CREATE INDEX IF NOT EXISTS entries_by_owner_date ON entries(created_by, date);\n"
        .repeat(MAX_STATEMENTS);
    let found = check_schema_statement(&many);
    assert_eq!(codes(&found), ["SQL_TOO_MANY_STATEMENTS"]);
}

#[test]
fn declared_tables_are_checked_against_the_schema() {
    let cases: [(Declared<'_>, &str); 7] = [
        (&[("missing", Access::Shared, None)], "SQL_TABLE_UNDEFINED"),
        (&[("Projects", Access::Shared, None)], "SQL_TABLE_UNDEFINED"),
        (&[("entries", Access::Owner, None)], "SQL_OWNER_FIELD"),
        (
            &[("projects", Access::Shared, Some("name"))],
            "SQL_OWNER_FIELD",
        ),
        (
            &[("entries", Access::Owner, Some("owner"))],
            "SQL_OWNER_FIELD",
        ),
        (
            &[("entries", Access::Owner, Some("project"))],
            "SQL_OWNER_FIELD",
        ),
        (&[("entries", Access::Owner, Some("id"))], "SQL_OWNER_FIELD"),
    ];
    for (tables, code) in cases {
        let (contract, found) = check(&manifest(DataCapability::Read, tables), &time_sheet_files());
        assert!(contract.is_none());
        assert_eq!(codes(&found), [code], "{tables:?}: {found:#?}");
    }
    // Tables that exist but are not declared are internal and fine.
    let only_projects = manifest(DataCapability::Read, &[("projects", Access::Shared, None)]);
    let (contract, found) = check(&only_projects, &time_sheet_files());
    assert!(found.is_empty(), "{found:#?}");
    assert_eq!(contract.unwrap().tables.len(), 1);
}

#[test]
fn table_policies_are_checked_and_keep_a_policy_free_hash() {
    let plain = check(&time_sheet(), &time_sheet_files()).0.unwrap();
    let mut policies = time_sheet();
    let entries = policies.tables.get_mut("entries").unwrap();
    entries.managers_read_all = true;
    policies.tables.get_mut("projects").unwrap().write = crate::manifest::WritePolicy::Manage;
    let (contract, found) = check(&policies, &time_sheet_files());
    assert!(found.is_empty(), "{found:#?}");
    let contract = contract.unwrap();
    assert!(contract.tables["entries"].managers_read_all);
    assert_ne!(
        contract.hash, plain.hash,
        "policies are part of the contract"
    );
    // Without policies the canonical form, and so the hash, is what it was.
    assert_eq!(
        plain.hash,
        contract_hash(&time_sheet().tables, &plain.migrations),
    );
    let before_policies = serde_json::to_string(&time_sheet().tables["projects"]).unwrap();
    assert_eq!(before_policies, r#"{"access":"shared","ownerField":null}"#);

    // managersReadAll means nothing on a shared table: refused, named.
    let mut shared = time_sheet();
    shared.tables.get_mut("projects").unwrap().managers_read_all = true;
    let (contract, found) = check(&shared, &time_sheet_files());
    assert!(contract.is_none());
    assert_eq!(codes(&found), ["SQL_TABLE_POLICY"]);
    assert!(found[0].3.contains("projects"), "{}", found[0].3);
}

#[test]
fn declared_tables_need_an_id_primary_key() {
    for definition in [
        "CREATE TABLE things (key INTEGER PRIMARY KEY, name TEXT)",
        "CREATE TABLE things (id INT PRIMARY KEY, name TEXT)",
        "CREATE TABLE things (id INTEGER, name TEXT)",
        "CREATE TABLE things (id INTEGER, name TEXT, PRIMARY KEY (id, name))",
        "CREATE TABLE things (id BLOB PRIMARY KEY, name TEXT)",
    ] {
        let sql = format!("{definition};\n");
        let things = manifest(DataCapability::Read, &[("things", Access::Shared, None)]);
        let (_, found) = check(
            &things,
            &[("schema.sql", &sql), ("migrations/001-initial.sql", &sql)],
        );
        assert_eq!(codes(&found), ["SQL_ID_COLUMN"], "{definition}: {found:#?}");
        assert_eq!(found[0].1, Some(1));
    }
    for definition in [
        "CREATE TABLE things (id TEXT PRIMARY KEY, name TEXT)",
        "CREATE TABLE things (id TEXT PRIMARY KEY, name TEXT) WITHOUT ROWID",
        "CREATE TABLE things (id integer primary key, name TEXT)",
    ] {
        let sql = format!("{definition};\n");
        let things = manifest(DataCapability::Read, &[("things", Access::Shared, None)]);
        let (contract, found) = check(
            &things,
            &[("schema.sql", &sql), ("migrations/001-initial.sql", &sql)],
        );
        assert!(found.is_empty(), "{definition}: {found:#?}");
        assert!(contract.is_some());
    }
}

#[test]
fn names_follow_the_identifier_grammar() {
    let cases = [
        (
            "CREATE TABLE \"my things\" (id INTEGER PRIMARY KEY);",
            "SQL_IDENTIFIER",
        ),
        (
            "CREATE TABLE things (id INTEGER PRIMARY KEY, \"first name\" TEXT);",
            "SQL_IDENTIFIER",
        ),
        (
            "CREATE TABLE things (id INTEGER PRIMARY KEY, ünïcode TEXT);",
            "SQL_IDENTIFIER",
        ),
        (
            "CREATE TABLE my__things (id INTEGER PRIMARY KEY);",
            "SQL_RESERVED_NAME",
        ),
        (
            &format!("CREATE TABLE {} (id INTEGER PRIMARY KEY);", "t".repeat(64)),
            "SQL_IDENTIFIER",
        ),
        (
            "CREATE TABLE things (id INTEGER PRIMARY KEY, a TEXT);\nCREATE INDEX \"by a\" ON things(a);",
            "SQL_IDENTIFIER",
        ),
        (
            "CREATE TABLE things (id INTEGER PRIMARY KEY, a TEXT);\nCREATE INDEX by_lower ON things(lower(a));",
            "SQL_INDEX_UNSUPPORTED",
        ),
        (
            "CREATE TABLE things (id INTEGER PRIMARY KEY, a TEXT);\nCREATE INDEX by_some ON things(a) WHERE a IS NOT NULL;",
            "SQL_INDEX_UNSUPPORTED",
        ),
        (
            "CREATE TABLE things (id INTEGER PRIMARY KEY, a TEXT, b TEXT AS (upper(a)));",
            "SQL_COLUMN_UNSUPPORTED",
        ),
    ];
    for (sql, code) in cases {
        let projects = manifest(DataCapability::Read, &[]);
        let (_, found) = check(
            &projects,
            &[("schema.sql", sql), ("migrations/001-initial.sql", sql)],
        );
        let found: Found = found
            .into_iter()
            .filter(|f| f.2 != "SQL_TABLES_MISSING")
            .collect();
        assert_eq!(codes(&found), [code], "{sql}: {found:#?}");
    }
    let bad_names = manifest(
        DataCapability::Read,
        &[
            ("bad name", Access::Shared, None),
            ("a__b", Access::Shared, None),
        ],
    );
    let (_, found) = check(&bad_names, &time_sheet_files());
    let on_manifest: Vec<&str> = found
        .iter()
        .filter(|f| f.0 == "APP.md")
        .map(|f| f.2.as_str())
        .collect();
    assert!(
        on_manifest.contains(&"SQL_IDENTIFIER") && on_manifest.contains(&"SQL_RESERVED_NAME"),
        "{found:#?}"
    );
}

#[test]
fn identifiers() {
    for ok in ["a", "_a", "entries", "Created_By2", &"a".repeat(63)] {
        assert!(is_identifier(ok), "{ok}");
    }
    for bad in ["", "1a", "a-b", "a b", "é", &"a".repeat(64), "a.b"] {
        assert!(!is_identifier(bad), "{bad}");
    }
}

#[test]
fn statements_split_like_sqlite() {
    let text = "-- a; comment\nCREATE TABLE a (x TEXT DEFAULT ';');\n/* b; */ CREATE TABLE \"b;\" (x);\nCREATE TRIGGER t AFTER INSERT ON a BEGIN\n  DELETE FROM a; UPDATE a SET x = 1;\nEND;\nCREATE TABLE [c;] (x)";
    let statements = split_statements(text).ok().unwrap();
    let texts: Vec<&str> = statements.iter().map(|s| s.text).collect();
    assert_eq!(
        texts,
        [
            "CREATE TABLE a (x TEXT DEFAULT ';');",
            "CREATE TABLE \"b;\" (x);",
            "CREATE TRIGGER t AFTER INSERT ON a BEGIN\n  DELETE FROM a; UPDATE a SET x = 1;\nEND;",
            "CREATE TABLE [c;] (x)",
        ]
    );
    let lines: Vec<u32> = statements.iter().map(|s| line_of(text, s.offset)).collect();
    assert_eq!(lines, [2, 3, 4, 7]);
    assert_eq!(statements[1].tokens[2].name().as_deref(), Some("b;"));
    assert!(
        split_statements(";;  -- nothing\n")
            .ok()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn read_schema_ignores_sqlite_internals() {
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch(
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, a TEXT UNIQUE); ANALYZE;",
    )
    .unwrap();
    let schema = read_schema(&conn).unwrap();
    assert_eq!(schema.tables.keys().collect::<Vec<_>>(), ["t"]);
    assert!(schema.indexes.is_empty());
    assert_eq!(schema.tables["t"].unique, vec![vec!["a".to_owned()]]);
}

/// Migration 003 rebuilding `entries` with a DATE column and worded rules,
/// and the schema.sql that states its result.
const REBUILD: &str = "\
CREATE TABLE entries_new (
  id INTEGER PRIMARY KEY,
  date DATE NOT NULL CONSTRAINT \"date must be a calendar date\" CHECK (date IS date(date)),
  project INTEGER NOT NULL REFERENCES projects(id),
  hours REAL NOT NULL CONSTRAINT \"hours must be between 0 and 24\" CHECK (hours >= 0 AND hours <= 24),
  created_by TEXT NOT NULL,
  note TEXT NOT NULL DEFAULT ''
);
INSERT INTO entries_new (id, date, project, hours, created_by, note)
  SELECT id, date, project, hours, created_by, note FROM entries;
DROP TABLE entries;
ALTER TABLE entries_new RENAME TO entries;
CREATE INDEX entries_by_owner_date ON entries(created_by, date);
";

fn rebuilt_files(migration: &'static str) -> (String, Vec<(&'static str, &'static str)>) {
    let entries_start = SCHEMA.find("CREATE TABLE entries").unwrap();
    let new_entries = &REBUILD[..REBUILD.find(");\n").unwrap() + 3];
    let schema = format!(
        "{}{}\nCREATE INDEX entries_by_owner_date ON entries(created_by, date);\n",
        &SCHEMA[..entries_start],
        new_entries.replace("entries_new", "entries")
    );
    let mut files = time_sheet_files();
    files.push(("migrations/003-rebuild-entries.sql", migration));
    (schema, files)
}

#[test]
fn a_migration_rebuilds_a_table_to_give_it_a_type_and_worded_rules() {
    let (schema, mut files) = rebuilt_files(REBUILD);
    files[0] = ("schema.sql", &schema);
    let (contract, found) = check(&time_sheet(), &files);
    assert!(found.is_empty(), "{found:#?}");
    let contract = contract.unwrap();
    let entries = &contract.schema.tables["entries"];
    assert_eq!(entries.column("date").unwrap().declared_type, "DATE");
    let rules: Vec<(Option<&str>, &[String])> = entries
        .checks
        .iter()
        .map(|check| (check.name.as_deref(), check.columns.as_slice()))
        .collect();
    assert_eq!(
        rules,
        [
            (
                Some("date must be a calendar date"),
                &["date".to_owned()][..]
            ),
            (
                Some("hours must be between 0 and 24"),
                &["hours".to_owned()][..]
            ),
        ]
    );

    // schema.sql must state the rules the migrations give, and the reverse.
    let mut stale = files.clone();
    stale[0] = ("schema.sql", SCHEMA);
    let (_, found) = check(&time_sheet(), &stale);
    assert!(
        found
            .iter()
            .any(|(_, _, _, reason)| reason.contains("CHECK constraints of entries differ")),
        "{found:#?}"
    );
}

#[test]
fn a_rebuild_never_moves_changes_or_seeds_rows() {
    let copy = "INSERT INTO entries_new (id, date, project, hours, created_by, note)\n  SELECT id, date, project, hours, created_by, note FROM entries;";
    let cases: Vec<(String, &str, &str)> = vec![
        // The owner field re-pointed at another column's values.
        (REBUILD.replace(copy, "INSERT INTO entries_new (id, date, project, hours, created_by, note) SELECT id, date, project, hours, note, note FROM entries;"), "SQL_SEED_REFUSED", "rebuilds a table copies"),
        // A constant or an expression on the way.
        (REBUILD.replace(copy, "INSERT INTO entries_new (id, date, project, hours, created_by, note) SELECT id, date, project, hours, 'mallory', note FROM entries;"), "SQL_SEED_REFUSED", "never seed"),
        (REBUILD.replace(copy, "INSERT INTO entries_new (id, date, project, hours, created_by, note) SELECT id, date, project, hours, lower(created_by), note FROM entries;"), "SQL_SEED_REFUSED", "never seed"),
        // Some rows only.
        (REBUILD.replace(copy, &copy.replace(";", " WHERE hours > 1;")), "SQL_SEED_REFUSED", "never seed"),
        // A column left behind, or the ids renumbered.
        (REBUILD.replace(copy, "INSERT INTO entries_new (id, date, project, hours, created_by) SELECT id, date, project, hours, created_by FROM entries;"), "SQL_REBUILD_REFUSED", "every column of entries"),
        (REBUILD.replace(copy, "INSERT INTO entries_new (date, project, hours, created_by, note) SELECT date, project, hours, created_by, note FROM entries;"), "SQL_REBUILD_REFUSED", "every column"),
        // Into a table this file did not create.
        (format!("{copy}\n"), "SQL_REBUILD_REFUSED", "created for a rebuild"),
        // The copy renamed to some other name: a private table's rows in a new one.
        (REBUILD.replace("ALTER TABLE entries_new RENAME TO entries;", "ALTER TABLE entries_new RENAME TO everyone;"), "SQL_ALTER_REFUSED", "finish a rebuild"),
        // The copy left under its own name.
        (REBUILD.replace("ALTER TABLE entries_new RENAME TO entries;\n", "").replace("DROP TABLE entries;\n", "").replace("CREATE INDEX entries_by_owner_date ON entries(created_by, date);\n", ""), "SQL_REBUILD_REFUSED", "was not renamed"),
    ];
    for (migration, code, says) in cases {
        let migration: &'static str = Box::leak(migration.into_boxed_str());
        let (schema, mut files) = rebuilt_files(migration);
        files[0] = ("schema.sql", Box::leak(schema.into_boxed_str()));
        let (contract, found) = check(&time_sheet(), &files);
        assert!(contract.is_none(), "{migration}");
        let mine: Vec<_> = found
            .iter()
            .filter(|(file, ..)| file == "migrations/003-rebuild-entries.sql")
            .collect();
        assert!(
            mine.iter()
                .any(|(_, _, found_code, reason)| found_code == code && reason.contains(says)),
            "{migration}\n{found:#?}"
        );
    }
}

#[test]
fn a_table_others_refer_to_is_not_rebuilt() {
    let migration = "\
CREATE TABLE projects_new (id INTEGER PRIMARY KEY, name TEXT NOT NULL, code TEXT NOT NULL UNIQUE CHECK (length(code) < 9));
INSERT INTO projects_new (id, name, code) SELECT id, name, code FROM projects;
DROP TABLE projects;
ALTER TABLE projects_new RENAME TO projects;
";
    let found = check_migration_statement(migration);
    assert!(
        found
            .iter()
            .any(|(_, line, code, reason)| code == "SQL_REBUILD_REFUSED"
                && *line == Some(4)
                && reason.contains("while entries refer to it")),
        "{found:#?}"
    );
}

#[test]
fn rule_names_are_one_short_line() {
    let long = "x".repeat(MAX_RULE_NAME_CHARS + 1);
    let found = check_schema_statement(&format!(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT CONSTRAINT \"{long}\" CHECK (length(body) < 10));"
    ));
    assert!(codes(&found).contains(&"SQL_CONSTRAINT_NAME"), "{found:#?}");
}

#[test]
fn a_check_the_platform_cannot_read_is_refused() {
    // SQLite takes the postfix `ISNULL`; the SQL parser that reads CHECK
    // rules for their wording and columns does not.
    let found = check_schema_statement(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT CHECK (body ISNULL OR length(body) < 10));",
    );
    assert!(
        codes(&found).contains(&"SQL_CHECK_UNREADABLE"),
        "{found:#?}"
    );
}

#[test]
fn a_migration_never_hands_rows_to_another_owner() {
    let lines = |found: &Found| -> Vec<(Option<u32>, String)> {
        found
            .iter()
            .map(|(_, line, code, _)| (*line, code.clone()))
            .collect()
    };
    // The attack pass's three statements: the column added with another
    // person's id passes, the two renames that make it the owner do not.
    let grab = check_migration_statement(
        "ALTER TABLE entries ADD COLUMN grab TEXT NOT NULL DEFAULT 'mallory';\n\
         ALTER TABLE entries RENAME COLUMN created_by TO orig_owner;\n\
         ALTER TABLE entries RENAME COLUMN grab TO created_by;\n",
    );
    assert_eq!(
        lines(&grab),
        [
            (Some(2), "SQL_OWNER_COLUMN".to_owned()),
            (Some(3), "SQL_OWNER_COLUMN".to_owned())
        ],
        "{grab:#?}"
    );
    assert!(
        grab[0]
            .3
            .contains("created_by holds the owner of each row of entries")
    );
    assert!(
        grab[1].3.contains("renaming another column"),
        "{}",
        grab[1].3
    );
    // In any case SQLite accepts.
    let shouted =
        check_migration_statement("ALTER TABLE ENTRIES RENAME COLUMN CREATED_BY TO author;\n");
    assert_eq!(codes(&shouted), ["SQL_OWNER_COLUMN"]);
    // Other columns, and a shared table's, rename freely.
    for fine in [
        "ALTER TABLE entries RENAME COLUMN note TO remark;\n",
        "ALTER TABLE projects RENAME COLUMN name TO title;\n",
        "ALTER TABLE entries ADD COLUMN reviewer TEXT DEFAULT 'mallory';\n",
    ] {
        let found = check_migration_statement(fine);
        assert!(
            !codes(&found).contains(&"SQL_OWNER_COLUMN"),
            "{fine}: {found:#?}"
        );
    }

    // An owner column added to rows that exist: with a default, that value
    // would own them all.
    let mut authored = time_sheet();
    authored.tables.get_mut("entries").unwrap().owner_field = Some("author".to_owned());
    let added = |sql: &'static str| {
        let mut files = time_sheet_files();
        files.push(("migrations/003-author.sql", sql));
        let (_, found) = check(&authored, &files);
        found
            .into_iter()
            .filter(|(file, ..)| file == "migrations/003-author.sql")
            .collect::<Found>()
    };
    let defaulted =
        added("ALTER TABLE entries ADD COLUMN author TEXT NOT NULL DEFAULT 'mallory';\n");
    assert_eq!(codes(&defaulted), ["SQL_OWNER_COLUMN"], "{defaulted:#?}");
    assert!(
        defaulted[0].3.contains("DEFAULT 'mallory'"),
        "{}",
        defaulted[0].3
    );
    assert!(added("ALTER TABLE entries ADD COLUMN author TEXT;\n").is_empty());
}
