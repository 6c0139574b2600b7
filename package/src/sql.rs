//! The app's data declarations: `schema.sql`, the ordered `migrations/NNN-name.sql`
//! files and the manifest's `tables`, checked together into one [`DataContract`].
//!
//! SQLite judges the SQL itself. Every statement is prepared on a scratch
//! in-memory database (defensive mode, untrusted schema) under an authorizer that
//! admits structure only: `CREATE TABLE` and `CREATE INDEX` in `schema.sql`, and in
//! migrations additionally `ALTER TABLE … ADD COLUMN | RENAME COLUMN`, `DROP TABLE`,
//! `DROP INDEX` and the table rebuild [`rebuild`] proves (a fresh table, a bare
//! copy of every row and column into it, the old table dropped, the copy renamed
//! to its name). So a package can declare structure but never seed, read or
//! attach anything, and what passes here is exactly what SQLite will do with it.
//! A migration also keeps the owner column of every owner-scoped table the
//! manifest declares: it never renames it away, renames another column onto
//! it, or adds it with a default ([`owner`]), so no row changes hands.
//! The migrations are then replayed on a second scratch database and the
//! resulting structure must equal the one `schema.sql` describes.
//!
//! This module must never open a file-backed database or run a statement whose
//! effect it has not authorised: the data-worker later applies these same
//! migrations to the app's live database, next to the platform's own `_sasha*`
//! tables, which is why every name starting with `_sasha` (or `sqlite_`) is
//! refused in the SQL text before SQLite even sees it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::config::DbConfig;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::{Connection, Error as SqlError};
use sasha_contract::ids::is_kebab_id;

pub use sasha_contract::data::{
    Access, Column, DataContract, EXPRESSION_KEY, ForeignKey, ID_COLUMN, Index, Migration,
    ReadPolicy, Schema, Table, TableDeclaration, VERSION_COLUMN, Widening, contract_hash,
    is_identifier, is_platform_name, is_sqlite_internal, read_schema, sha256_hex, value_format,
    value_kinds, widened_reads,
};

use crate::diagnostics::{Diagnostics, line_of};

mod owner;
mod owner_constraints;
mod rebuild;
mod split;
use crate::manifest::{DataCapability, Manifest};
use owner::OwnerColumns;
use rebuild::Rebuilds;
use split::{Lexed, TooManyStatements, split_statements};

/// The one file that states the app's current structure.
pub const SCHEMA_FILE: &str = "schema.sql";
/// The folder of ordered migrations, with its trailing slash.
pub const MIGRATIONS_DIR: &str = "migrations/";
/// Most bytes of one SQL file; a larger file is refused before SQLite sees it.
pub const MAX_SQL_FILE_BYTES: usize = 256 * 1024;
/// Most statements of one SQL file.
pub const MAX_STATEMENTS: usize = 200;
/// Most characters of a CHECK constraint's name: the rule's wording a
/// violation shows the caller.
pub const MAX_RULE_NAME_CHARS: usize = 120;
const MANIFEST_FILE: &str = "APP.md";
/// Most SQLite virtual-machine steps one scratch database may spend, in units of
/// [`PROGRESS_STEP`]; structure on empty tables costs a tiny fraction of this.
const PROGRESS_BUDGET: u64 = 20_000;
const PROGRESS_STEP: i32 = 1000;

/// Validates `schema.sql`, `migrations/*.sql` and the manifest's `tables`
/// together. `files` holds every package text file by package-relative path.
/// Returns `None`, with every independent problem recorded, when anything is
/// wrong, and always `None` for an app without `capabilities.data`.
pub fn check_data(
    manifest: &Manifest,
    files: &BTreeMap<String, String>,
    diagnostics: &mut Diagnostics,
) -> Option<DataContract> {
    let before = diagnostics.len();
    let migration_paths: Vec<&String> = files
        .keys()
        .filter(|path| path.starts_with(MIGRATIONS_DIR))
        .collect();

    if manifest.capabilities.data == DataCapability::None {
        if files.contains_key(SCHEMA_FILE) {
            diagnostics.push(SCHEMA_FILE, None, "SQL_DATA_NOT_ENABLED", "schema.sql belongs only to data apps: remove it or declare capabilities.data: read or read-write in APP.md");
        }
        for path in migration_paths {
            diagnostics.push(path, None, "SQL_DATA_NOT_ENABLED", "migrations belong only to data apps: remove this file or declare capabilities.data: read or read-write in APP.md");
        }
        if !manifest.tables.is_empty() {
            diagnostics.push(MANIFEST_FILE, None, "SQL_DATA_NOT_ENABLED", "tables belong only to data apps: remove tables or declare capabilities.data: read or read-write");
        }
        return None;
    }

    if manifest.tables.is_empty() {
        diagnostics.push(MANIFEST_FILE, None, "SQL_TABLES_MISSING", "declare at least one table under tables, with access: owner (and ownerField) or access: shared: a data app reaches only declared tables");
    }
    check_declarations(manifest, diagnostics);

    let (migrations, migrations_ordered) = collect_migrations(files, &migration_paths, diagnostics);
    if migration_paths.is_empty() {
        diagnostics.push("migrations", None, "SQL_MIGRATIONS_MISSING", "a data app needs at least one migration, starting with migrations/001-initial.sql, whose replay builds what schema.sql states");
    }

    let stated = match files.get(SCHEMA_FILE) {
        Some(text) => build(
            SCHEMA_FILE,
            Mode::Schema,
            &[(SCHEMA_FILE, text.as_str())],
            OwnerColumns::default(),
            diagnostics,
        ),
        None => {
            diagnostics.push(
                SCHEMA_FILE,
                None,
                "SQL_SCHEMA_MISSING",
                "a data app needs schema.sql stating its tables with CREATE TABLE and CREATE INDEX",
            );
            None
        }
    };
    let replayed = if migrations_ordered && !migrations.is_empty() {
        let sources: Vec<(&str, &str)> = migrations
            .iter()
            .map(|m| (m.file.as_str(), m.sql.as_str()))
            .collect();
        build(
            "migrations",
            Mode::Migration,
            &sources,
            OwnerColumns::of(manifest),
            diagnostics,
        )
    } else {
        None
    };

    if let Some(stated) = &stated {
        check_structure(&stated.schema, &stated.origins, diagnostics);
        check_declared_tables(manifest, &stated.schema, &stated.origins, diagnostics);
        owner_constraints::check_owner_constraints(
            manifest,
            &stated.schema,
            &stated.origins,
            diagnostics,
        );
        if let Some(replayed) = &replayed {
            compare_replay(
                &stated.schema,
                &stated.origins,
                &replayed.schema,
                &replayed.origins,
                diagnostics,
            );
        }
    }

    if diagnostics.len() > before {
        return None;
    }
    let stated = stated?;
    let hash = contract_hash(&manifest.tables, &migrations);
    Some(DataContract {
        schema: stated.schema,
        migrations,
        tables: manifest.tables.clone(),
        hash,
    })
}

/// Why a table name is reserved, or `None`. `__` would make the MCP tool names
/// `app__<app>__<table>__<op>` ambiguous; `sqlite_` belongs to SQLite,
/// `_litestream_` to the replicator and `_sasha` to the platform's own tables.
fn reserved_table_reason(name: &str) -> Option<&'static str> {
    if sasha_contract::data::is_replicator_name(name) {
        Some("names starting with _litestream_ belong to the replicator (Litestream)")
    } else if is_sqlite_internal(name) {
        Some("names starting with sqlite_ belong to SQLite")
    } else if is_platform_name(name) {
        Some("names starting with _sasha belong to the platform")
    } else if name.contains("__") {
        Some(
            "a double underscore would make the table's tool names app__<app>__<table>__<op> ambiguous",
        )
    } else {
        None
    }
}

// ---------------------------------------------------------------------------
// The manifest's declarations on their own

fn check_declarations(manifest: &Manifest, diagnostics: &mut Diagnostics) {
    for (name, declaration) in &manifest.tables {
        if !is_identifier(name) {
            diagnostics.push(MANIFEST_FILE, None, "SQL_IDENTIFIER", format!("table name {name:?} must match ^[A-Za-z_][A-Za-z0-9_]{{0,62}}$ (ASCII letters, digits and underscores)"));
        } else if let Some(reason) = reserved_table_reason(name) {
            diagnostics.push(
                MANIFEST_FILE,
                None,
                "SQL_RESERVED_NAME",
                format!("table name {name:?} is reserved: {reason}; choose another name"),
            );
        }
        match (declaration.access, &declaration.owner_field) {
            (Access::Owner, None) => {
                diagnostics.push(MANIFEST_FILE, None, "SQL_OWNER_FIELD", format!("table {name} has access: owner and needs ownerField naming the TEXT column that holds each row's owner"));
            }
            (Access::Shared, Some(_)) => {
                diagnostics.push(MANIFEST_FILE, None, "SQL_OWNER_FIELD", format!("table {name} has access: shared, where every user sees every row; remove ownerField or use access: owner"));
            }
            (Access::Owner, Some(field)) if !is_identifier(field) => {
                diagnostics.push(MANIFEST_FILE, None, "SQL_IDENTIFIER", format!("ownerField {field:?} of table {name} must match ^[A-Za-z_][A-Za-z0-9_]{{0,62}}$"));
            }
            _ => {}
        }
        if declaration.managers_read_all && declaration.access == Access::Shared {
            diagnostics.push(MANIFEST_FILE, None, "SQL_TABLE_POLICY", format!("table {name} has access: shared, where every user already reads every row; managersReadAll applies to access: owner tables only, so remove it"));
        }
    }
}

/// Checks migration file names and numbering; returns the well-named
/// migrations in order and whether their numbering is 1, 2, 3, … exactly.
fn collect_migrations(
    files: &BTreeMap<String, String>,
    paths: &[&String],
    diagnostics: &mut Diagnostics,
) -> (Vec<Migration>, bool) {
    let mut migrations = Vec::new();
    let mut ordered = true;
    for path in paths {
        let Some(number) = migration_number(path) else {
            diagnostics.push(path, None, "SQL_MIGRATION_NAME", "migrations are named migrations/NNN-kebab-name.sql: three digits from 001, a hyphen, a lowercase kebab-case name (for example migrations/002-add-notes.sql)");
            ordered = false;
            continue;
        };
        let sql = files.get(*path).cloned().unwrap_or_default();
        let checksum = sha256_hex(sql.as_bytes());
        migrations.push(Migration {
            file: (*path).clone(),
            number,
            sql,
            checksum,
        });
    }
    migrations.sort_by(|a, b| (a.number, &a.file).cmp(&(b.number, &b.file)));
    let mut expected = 1;
    for migration in &migrations {
        if migration.number < expected {
            diagnostics.push(&migration.file, None, "SQL_MIGRATION_ORDER", format!("another migration already has number {:03}: give each migration its own number", migration.number));
            ordered = false;
        } else if migration.number > expected {
            diagnostics.push(&migration.file, None, "SQL_MIGRATION_ORDER", format!("migration {expected:03} is missing: number migrations 001, 002, 003, … without gaps"));
            ordered = false;
            expected = migration.number + 1;
        } else {
            expected += 1;
        }
    }
    (migrations, ordered)
}

/// `NNN` of `migrations/NNN-kebab-name.sql`, or `None` for any other name.
fn migration_number(path: &str) -> Option<u32> {
    let name = path.strip_prefix(MIGRATIONS_DIR)?.strip_suffix(".sql")?;
    let (digits, rest) = (name.get(..3)?, name.get(3..)?);
    let slug = rest.strip_prefix('-')?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) || !is_kebab_id(slug) {
        return None;
    }
    digits.parse().ok().filter(|number| *number > 0)
}

// ---------------------------------------------------------------------------
// Running SQL on a scratch database

/// Which file kind is being run; migrations may do a little more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Schema,
    Migration,
}

/// The structural statement kinds the authorizer admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    CreateTable,
    CreateIndex,
    AlterTable,
    DropTable,
    DropIndex,
    /// A rebuild's copy of rows into its new table (see [`rebuild`]).
    Copy,
}

/// Why the authorizer refused a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refusal {
    /// A write to a user table: packages never seed rows.
    Seed {
        operation: &'static str,
        table: String,
    },
    /// ALTER/DROP in schema.sql.
    MigrationOnly(&'static str),
    Function(String),
    Statement(&'static str),
}

/// The authorizer's memory of the statement being prepared. SQLite calls the
/// authorizer for the statement itself and for the internal SQL it generates
/// (writes to `sqlite_schema`, the rename helpers of ALTER TABLE), so the first
/// structural action decides what the internal actions after it may do.
#[derive(Debug)]
struct AuthState {
    mode: Mode,
    verb: Option<(Verb, String)>,
    refusal: Option<Refusal>,
    /// The (target, source) of the rebuild copy being prepared, already
    /// proven to be one by [`rebuild::parse_copy`] and [`rebuild::Rebuilds`].
    copy: Option<(String, String)>,
    /// The checker's own structure reads between statements.
    trusted: bool,
}

/// Pure built-in functions a CHECK, DEFAULT or index expression may use.
/// Everything else (load_extension, randomblob, zeroblob, sqlite_* helpers, …)
/// is refused: the data-worker evaluates these expressions on every write.
const SCHEMA_FUNCTIONS: &[&str] = &[
    "abs",
    "char",
    "coalesce",
    "concat",
    "concat_ws",
    "date",
    "datetime",
    "format",
    "glob",
    "hex",
    "if",
    "ifnull",
    "iif",
    "instr",
    "json_valid",
    "julianday",
    "length",
    "like",
    "likely",
    "lower",
    "ltrim",
    "max",
    "min",
    "nullif",
    "octet_length",
    "printf",
    "quote",
    "replace",
    "round",
    "rtrim",
    "sign",
    "strftime",
    "substr",
    "substring",
    "time",
    "trim",
    "typeof",
    "unicode",
    "unixepoch",
    "unlikely",
    "upper",
];

/// The helpers SQLite's own ALTER TABLE and DROP machinery calls internally.
const ALTER_FUNCTIONS: &[&str] = &[
    "sqlite_rename_column",
    "sqlite_rename_table",
    "sqlite_rename_test",
    "sqlite_rename_quotefix",
    "sqlite_drop_column",
];

fn is_schema_table(name: &str) -> bool {
    [
        "sqlite_master",
        "sqlite_schema",
        "sqlite_temp_master",
        "sqlite_temp_schema",
    ]
    .iter()
    .any(|internal| name.eq_ignore_ascii_case(internal))
}

impl AuthState {
    fn decide(&mut self, context: AuthContext<'_>) -> Authorization {
        if self.trusted {
            return Authorization::Allow;
        }
        match self.judge(context.action) {
            Ok(()) => Authorization::Allow,
            Err(refusal) => {
                self.refusal.get_or_insert(refusal);
                Authorization::Deny
            }
        }
    }

    fn begin(&mut self, verb: Verb, object: &str) -> Result<(), Refusal> {
        match &self.verb {
            None => {
                self.verb = Some((verb, object.to_owned()));
                Ok(())
            }
            Some((current, _)) if *current == verb => Ok(()),
            // The indexes behind a table's UNIQUE and PRIMARY KEY constraints.
            Some((Verb::CreateTable, _)) if verb == Verb::CreateIndex => Ok(()),
            Some(_) => Err(Refusal::Statement(
                "a statement that mixes structural changes",
            )),
        }
    }

    fn verb(&self) -> Option<Verb> {
        self.verb.as_ref().map(|(verb, _)| *verb)
    }

    fn is_copy_target(&self, table: &str) -> bool {
        self.copy
            .as_ref()
            .is_some_and(|(target, _)| target.eq_ignore_ascii_case(table))
    }

    fn is_copy_source(&self, table: &str) -> bool {
        self.copy
            .as_ref()
            .is_some_and(|(_, source)| source.eq_ignore_ascii_case(table))
    }

    fn judge(&mut self, action: AuthAction<'_>) -> Result<(), Refusal> {
        let migration = self.mode == Mode::Migration;
        match action {
            AuthAction::CreateTable { table_name } if is_sqlite_internal(table_name) => {
                // AUTOINCREMENT creates sqlite_sequence inside a CREATE TABLE;
                // ANALYZE creates sqlite_stat* before it announces itself.
                if table_name.eq_ignore_ascii_case("sqlite_sequence")
                    && self.verb() == Some(Verb::CreateTable)
                {
                    Ok(())
                } else if table_name.to_ascii_lowercase().starts_with("sqlite_stat") {
                    Err(Refusal::Statement("ANALYZE"))
                } else {
                    Err(Refusal::Statement("creating an sqlite_ table"))
                }
            }
            AuthAction::CreateTable { table_name } => self.begin(Verb::CreateTable, table_name),
            AuthAction::CreateIndex { index_name, .. } => self.begin(Verb::CreateIndex, index_name),
            AuthAction::AlterTable { table_name, .. } if migration => {
                self.begin(Verb::AlterTable, table_name)
            }
            AuthAction::AlterTable { .. } => Err(Refusal::MigrationOnly("ALTER TABLE")),
            AuthAction::DropTable { table_name } if migration => {
                self.begin(Verb::DropTable, table_name)
            }
            AuthAction::DropTable { .. } => Err(Refusal::MigrationOnly("DROP TABLE")),
            AuthAction::DropIndex { index_name, .. } if migration => {
                self.begin(Verb::DropIndex, index_name)
            }
            AuthAction::DropIndex { .. } => Err(Refusal::MigrationOnly("DROP INDEX")),
            // SQLite's bookkeeping of the structure it is changing; it comes
            // before the structural action itself. A user statement naming
            // these tables never gets here: `sqlite_` names are refused in the
            // text, and defensive mode forbids writing them anyway.
            AuthAction::Insert { table_name }
            | AuthAction::Delete { table_name }
            | AuthAction::Update { table_name, .. }
                if is_schema_table(table_name) =>
            {
                Ok(())
            }
            // DROP TABLE empties the table it drops.
            AuthAction::Delete { table_name } if matches!(&self.verb, Some((Verb::DropTable, dropped)) if dropped.eq_ignore_ascii_case(table_name)) => {
                Ok(())
            }
            AuthAction::Insert { table_name } if self.is_copy_target(table_name) => {
                self.begin(Verb::Copy, table_name)
            }
            AuthAction::Read { table_name, .. } if self.is_copy_source(table_name) => Ok(()),
            AuthAction::Select if self.copy.is_some() => Ok(()),
            AuthAction::Insert { table_name } => Err(Refusal::Seed {
                operation: "INSERT",
                table: table_name.to_owned(),
            }),
            AuthAction::Update { table_name, .. } => Err(Refusal::Seed {
                operation: "UPDATE",
                table: table_name.to_owned(),
            }),
            AuthAction::Delete { table_name } => Err(Refusal::Seed {
                operation: "DELETE",
                table: table_name.to_owned(),
            }),
            // Column references inside CHECK, index and ALTER machinery; a read
            // that returns rows would need a SELECT, which is refused.
            AuthAction::Read { .. } if self.verb.is_some() => Ok(()),
            AuthAction::Select if self.verb() == Some(Verb::AlterTable) => Ok(()),
            AuthAction::Read { .. } | AuthAction::Select | AuthAction::Recursive => {
                Err(Refusal::Statement("SELECT"))
            }
            AuthAction::Reindex { .. } if self.verb() == Some(Verb::CreateIndex) => Ok(()),
            AuthAction::Function { function_name } => {
                let name = function_name.to_ascii_lowercase();
                let internal = matches!(
                    self.verb(),
                    Some(Verb::AlterTable | Verb::DropTable | Verb::DropIndex)
                ) && ALTER_FUNCTIONS.contains(&name.as_str());
                if self.verb.is_some() && (SCHEMA_FUNCTIONS.contains(&name.as_str()) || internal) {
                    Ok(())
                } else {
                    Err(Refusal::Function(name))
                }
            }
            AuthAction::Pragma { .. } => Err(Refusal::Statement("PRAGMA")),
            AuthAction::Attach { .. } => Err(Refusal::Statement("ATTACH")),
            AuthAction::Detach { .. } => Err(Refusal::Statement("DETACH")),
            AuthAction::Transaction { .. } => Err(Refusal::Statement(
                "a transaction statement (BEGIN, COMMIT, ROLLBACK)",
            )),
            AuthAction::Savepoint { .. } => Err(Refusal::Statement("SAVEPOINT")),
            AuthAction::CreateTrigger { .. } | AuthAction::CreateTempTrigger { .. } => {
                Err(Refusal::Statement("CREATE TRIGGER"))
            }
            AuthAction::CreateView { .. } | AuthAction::CreateTempView { .. } => {
                Err(Refusal::Statement("CREATE VIEW"))
            }
            AuthAction::CreateVtable { .. } => Err(Refusal::Statement("CREATE VIRTUAL TABLE")),
            AuthAction::CreateTempTable { .. } | AuthAction::CreateTempIndex { .. } => {
                Err(Refusal::Statement("a TEMP table or index"))
            }
            AuthAction::DropTrigger { .. } | AuthAction::DropTempTrigger { .. } => {
                Err(Refusal::Statement("DROP TRIGGER"))
            }
            AuthAction::DropView { .. } | AuthAction::DropTempView { .. } => {
                Err(Refusal::Statement("DROP VIEW"))
            }
            AuthAction::DropVtable { .. } => Err(Refusal::Statement("dropping a virtual table")),
            AuthAction::DropTempTable { .. } | AuthAction::DropTempIndex { .. } => {
                Err(Refusal::Statement("dropping a TEMP table or index"))
            }
            AuthAction::Analyze { .. } => Err(Refusal::Statement("ANALYZE")),
            AuthAction::Reindex { .. } => Err(Refusal::Statement("REINDEX")),
            _ => Err(Refusal::Statement("this statement")),
        }
    }
}

/// A scratch database with the authorizer installed.
struct Scratch {
    conn: Connection,
    state: Arc<Mutex<AuthState>>,
    /// Set once a statement in the run failed: later "no such table" errors are
    /// usually its echo, so only refusals and syntax errors are still reported.
    failed: bool,
    /// The current migration file's table rebuilds.
    rebuilds: Rebuilds,
    /// The manifest's owner columns, which migrations keep ([`owner`]).
    owners: OwnerColumns,
}

/// Where each table or index was (last) created: file and line.
type Origins = BTreeMap<String, (String, u32)>;

/// The outcome of running one kind of SQL to the end without a problem.
struct Built {
    schema: Schema,
    origins: Origins,
}

fn lock(state: &Mutex<AuthState>) -> std::sync::MutexGuard<'_, AuthState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Scratch {
    fn open(mode: Mode, owners: OwnerColumns) -> rusqlite::Result<Scratch> {
        let mut conn = Connection::open_in_memory()?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false)?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW, false)?;
        let state = Arc::new(Mutex::new(AuthState {
            mode,
            verb: None,
            refusal: None,
            copy: None,
            trusted: false,
        }));
        let hook_state = Arc::clone(&state);
        conn.authorizer(Some(move |context: AuthContext<'_>| {
            lock(&hook_state).decide(context)
        }))?;
        let mut spent: u64 = 0;
        conn.progress_handler(
            PROGRESS_STEP,
            Some(move || {
                spent += 1;
                spent > PROGRESS_BUDGET
            }),
        )?;
        Ok(Scratch {
            conn,
            state,
            failed: false,
            rebuilds: Rebuilds::default(),
            owners,
        })
    }

    /// Runs one of the checker's own reads past the authorizer.
    fn trusted<T>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        lock(&self.state).trusted = true;
        let result = read(&self.conn);
        lock(&self.state).trusted = false;
        result
    }

    fn columns_of(&self, table: &str) -> Vec<String> {
        self.trusted(|conn| {
            let mut statement = conn.prepare("SELECT name FROM pragma_table_info(?1, 'main')")?;
            let names = statement.query_map([table], |row| row.get(0))?;
            names.collect()
        })
        .unwrap_or_default()
    }

    /// Runs every statement of `text`, recording each problem against `file`.
    fn run(
        &mut self,
        file: &str,
        text: &str,
        origins: &mut Origins,
        diagnostics: &mut Diagnostics,
    ) {
        if text.len() > MAX_SQL_FILE_BYTES {
            diagnostics.push(file, None, "SQL_FILE_TOO_LARGE", format!("an SQL file may hold at most {MAX_SQL_FILE_BYTES} bytes; this one has {}: split the structure or remove what is not structure", text.len()));
            self.failed = true;
            return;
        }
        let statements = match split_statements(text) {
            Ok(statements) => statements,
            Err(TooManyStatements) => {
                diagnostics.push(
                    file,
                    None,
                    "SQL_TOO_MANY_STATEMENTS",
                    format!("an SQL file may hold at most {MAX_STATEMENTS} statements"),
                );
                self.failed = true;
                return;
            }
        };
        self.rebuilds = Rebuilds::default();
        for statement in &statements {
            if let Err(problem) = self.run_statement(statement, origins, file, text) {
                let suppressed = problem.code == "SQL_STATEMENT_FAILED" && self.failed;
                if !suppressed {
                    diagnostics.push(file, Some(problem.line), problem.code, problem.reason);
                }
                self.failed = true;
            }
        }
        let rebuilds = std::mem::take(&mut self.rebuilds);
        if !rebuilds.is_empty() && !self.failed {
            let schema = self.trusted(read_schema).unwrap_or_default();
            for (line, reason) in rebuilds.finish(&schema) {
                diagnostics.push(file, line, "SQL_REBUILD_REFUSED", reason);
                self.failed = true;
            }
        }
    }

    fn run_statement(
        &mut self,
        statement: &Lexed<'_>,
        origins: &mut Origins,
        file: &str,
        text: &str,
    ) -> Result<(), Problem> {
        let line = line_of(text, statement.offset);
        let mode = lock(&self.state).mode;
        let refused = |code: &'static str, reason: String| Problem { line, code, reason };
        if let Some(name) = statement.reserved_name() {
            return Err(refused(
                "SQL_RESERVED_NAME",
                format!(
                    "the name {name:?} is reserved: names starting with _sasha belong to the platform and names starting with sqlite_ to SQLite; choose another name"
                ),
            ));
        }
        let copy = (mode == Mode::Migration && statement.leading_keyword() == "INSERT")
            .then(|| rebuild::parse_copy(statement.text))
            .flatten();
        if let Some(copy) = &copy {
            let columns = self.columns_of(&copy.source);
            if let Some(reason) = self.rebuilds.refuse_copy(copy, &columns) {
                return Err(refused("SQL_REBUILD_REFUSED", reason));
            }
        }
        {
            let mut state = lock(&self.state);
            state.verb = None;
            state.refusal = None;
            state.copy = copy
                .as_ref()
                .map(|copy| (copy.target.clone(), copy.source.clone()));
        }
        let prepared = self.conn.prepare(statement.text);
        let (verb, refusal) = {
            let mut state = lock(&self.state);
            state.copy = None;
            (state.verb.take(), state.refusal.take())
        };
        let mut prepared = match (prepared, refusal) {
            (_, Some(refusal)) => return Err(refusal_problem(line, mode, refusal)),
            (Err(error), None) => return Err(sqlite_problem(error, text, statement, line)),
            (Ok(prepared), None) => prepared,
        };
        if prepared.is_explain() != 0 {
            return Err(refused(
                "SQL_STATEMENT_REFUSED",
                statement_refused(mode, "EXPLAIN"),
            ));
        }
        let Some((verb, object)) = verb else {
            // DROP … IF EXISTS of something absent authorises nothing and does
            // nothing; every other statement that asked for no permission at all
            // (VACUUM, for one) is not structure.
            if mode == Mode::Migration && statement.is_drop_if_exists() {
                return Ok(());
            }
            let what = statement.leading_keyword();
            return Err(refused(
                "SQL_STATEMENT_REFUSED",
                statement_refused(mode, &what),
            ));
        };
        if verb == Verb::AlterTable
            && let Some(reason) = statement.alter_refusal()
        {
            return Err(refused("SQL_ALTER_REFUSED", reason.to_owned()));
        }
        let renamed = (verb == Verb::AlterTable)
            .then(|| statement.renamed_table_to())
            .flatten();
        if let Some(new_name) = &renamed
            && let Some(reason) = self.rebuilds.refuse_rename(&object, new_name, line)
        {
            return Err(refused("SQL_ALTER_REFUSED", reason));
        }
        // The owner column of an owner-scoped table, before a change of its
        // columns; judged against what SQLite did to them.
        let owner_columns = match (verb, &renamed) {
            (Verb::AlterTable, None) => self.owners.field(&object).map(|field| {
                let before = self
                    .trusted(|conn| owner::read_columns(conn, &object))
                    .unwrap_or_default();
                (field.to_owned(), before)
            }),
            _ => None,
        };
        if let Err(error) = prepared.execute([]) {
            return Err(Problem {
                line,
                code: "SQL_STATEMENT_FAILED",
                reason: format!(
                    "this statement failed in SQLite: {}",
                    sanitize(&error_message(&error))
                ),
            });
        }
        drop(prepared);
        if let Some((field, before)) = owner_columns {
            let after = self
                .trusted(|conn| owner::read_columns(conn, &object))
                .unwrap_or_default();
            if let Some(reason) = owner::refuse_alter(&object, &field, &before, &after) {
                return Err(refused("SQL_OWNER_COLUMN", reason));
            }
        }
        match verb {
            Verb::CreateTable => {
                self.rebuilds.created(&object);
                origins.insert(object, (file.to_owned(), line));
            }
            Verb::CreateIndex => {
                origins.insert(object, (file.to_owned(), line));
            }
            Verb::DropTable => {
                self.rebuilds.dropped(&object);
                origins.remove(&object);
            }
            Verb::DropIndex => {
                origins.remove(&object);
            }
            Verb::Copy => {
                if let Some(copy) = &copy {
                    self.rebuilds.copied(copy);
                }
            }
            Verb::AlterTable => {
                if let Some(new_name) = renamed
                    && let Some(origin) = origins.remove(&object)
                {
                    origins.insert(new_name, origin);
                }
            }
        }
        Ok(())
    }
}

/// One problem with one statement.
struct Problem {
    line: u32,
    code: &'static str,
    reason: String,
}

fn statement_refused(mode: Mode, what: &str) -> String {
    match mode {
        Mode::Schema => format!(
            "schema.sql may only hold CREATE TABLE and CREATE INDEX statements: {what} is refused"
        ),
        Mode::Migration => format!(
            "migrations may only create tables and indexes, add or rename columns, and drop tables or indexes: {what} is refused"
        ),
    }
}

fn refusal_problem(line: u32, mode: Mode, refusal: Refusal) -> Problem {
    let (code, reason) = match refusal {
        Refusal::Seed { operation, table } => (
            "SQL_SEED_REFUSED",
            format!(
                "packages declare structure only and never seed rows: {operation} on {table} is refused; rows come only through the data service (a migration that rebuilds a table copies its rows with exactly INSERT INTO new_table (id, …) SELECT id, … FROM old_table)"
            ),
        ),
        Refusal::MigrationOnly(what) => (
            "SQL_MIGRATION_ONLY",
            format!(
                "schema.sql states the final structure: {what} belongs in a migration, and schema.sql should simply state the result"
            ),
        ),
        Refusal::Function(name) => (
            "SQL_FUNCTION_REFUSED",
            format!(
                "function {name}() is not allowed in package SQL: use a plain value or a pure built-in such as length(), lower() or datetime()"
            ),
        ),
        Refusal::Statement(what) => ("SQL_STATEMENT_REFUSED", statement_refused(mode, what)),
    };
    Problem { line, code, reason }
}

fn sqlite_problem(error: SqlError, text: &str, statement: &Lexed<'_>, line: u32) -> Problem {
    let (message, line) = match &error {
        SqlError::SqlInputError { msg, offset, .. } => {
            let at = usize::try_from(*offset)
                .ok()
                .filter(|at| *at <= statement.text.len());
            let line = at.map_or(line, |at| line_of(text, statement.offset + at));
            (msg.clone(), line)
        }
        SqlError::MultipleStatement => (
            "more than one statement where one was expected".to_owned(),
            line,
        ),
        other => (error_message(other), line),
    };
    let syntax = [
        "syntax error",
        "incomplete input",
        "unrecognized token",
        "near \"",
    ]
    .iter()
    .any(|needle| message.contains(needle));
    if syntax {
        let hint = if message.contains("incomplete input") {
            "; end each statement with ;"
        } else {
            ""
        };
        Problem {
            line,
            code: "SQL_SYNTAX",
            reason: format!(
                "this statement is not valid SQL: {}{hint}",
                sanitize(&message)
            ),
        }
    } else {
        Problem {
            line,
            code: "SQL_STATEMENT_FAILED",
            reason: format!("this statement failed in SQLite: {}", sanitize(&message)),
        }
    }
}

fn error_message(error: &SqlError) -> String {
    match error {
        SqlError::SqliteFailure(_, Some(message)) => message.clone(),
        SqlError::SqlInputError { msg, .. } => msg.clone(),
        other => other.to_string(),
    }
}

/// SQLite's message, bounded, lowercase-first, with anything that looks like an
/// absolute path replaced: diagnostics carry package-relative paths only.
fn sanitize(message: &str) -> String {
    let mut words = Vec::new();
    for word in message.split_whitespace() {
        let bare = word
            .trim_matches(|c: char| matches!(c, '\'' | '"' | '`' | '(' | ')' | ',' | ':' | ';'));
        let windows = bare.len() > 2
            && bare.as_bytes()[1] == b':'
            && matches!(bare.as_bytes()[2], b'\\' | b'/');
        let absolute = (bare.starts_with('/') && bare.len() > 1)
            || bare.starts_with("~/")
            || bare.starts_with('\\')
            || windows;
        words.push(if absolute { "<path>" } else { word });
    }
    let mut joined = words.join(" ");
    if joined.chars().count() > 200 {
        joined = joined.chars().take(200).collect::<String>() + "…";
    }
    let joined = joined.trim_end_matches('.').to_owned();
    let mut chars = joined.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => "unknown error".to_owned(),
    }
}

/// Runs `sources` (one file, or the migrations in order) on one scratch
/// database; returns its structure when every statement passed.
fn build(
    label: &str,
    mode: Mode,
    sources: &[(&str, &str)],
    owners: OwnerColumns,
    diagnostics: &mut Diagnostics,
) -> Option<Built> {
    let mut scratch = match Scratch::open(mode, owners) {
        Ok(scratch) => scratch,
        Err(_) => {
            diagnostics.push(
                label,
                None,
                "SQL_CHECK_UNAVAILABLE",
                "the SQL checker could not start; check the package again",
            );
            return None;
        }
    };
    let mut origins = Origins::new();
    for (file, text) in sources {
        scratch.run(file, text, &mut origins, diagnostics);
    }
    if scratch.failed {
        return None;
    }
    // Reading the structure is our own SQL: lift the authorizer for it.
    if scratch
        .conn
        .authorizer(None::<fn(AuthContext<'_>) -> Authorization>)
        .is_err()
    {
        return None;
    }
    match read_schema(&scratch.conn) {
        Ok(schema) => Some(Built { schema, origins }),
        Err(_) => {
            diagnostics.push(
                label,
                None,
                "SQL_CHECK_UNAVAILABLE",
                "the SQL checker could not read the resulting structure; check the package again",
            );
            None
        }
    }
}

// ---------------------------------------------------------------------------
// Checks on the resulting structure

fn origin_of<'a>(origins: &'a Origins, name: &str) -> (&'a str, Option<u32>) {
    origins
        .get(name)
        .map_or((SCHEMA_FILE, None), |(file, line)| {
            (file.as_str(), Some(*line))
        })
}

/// Rules every table, column and index in schema.sql follows, declared or not.
fn check_structure(schema: &Schema, origins: &Origins, diagnostics: &mut Diagnostics) {
    for (name, table) in &schema.tables {
        let (file, line) = origin_of(origins, name);
        if !is_identifier(name) {
            diagnostics.push(file, line, "SQL_IDENTIFIER", format!("table name {name:?} must match ^[A-Za-z_][A-Za-z0-9_]{{0,62}}$ (ASCII letters, digits and underscores)"));
        } else if let Some(reason) = reserved_table_reason(name) {
            diagnostics.push(
                file,
                line,
                "SQL_RESERVED_NAME",
                format!("table name {name:?} is reserved: {reason}; choose another name"),
            );
        }
        for column in &table.columns {
            if !is_identifier(&column.name) {
                diagnostics.push(file, line, "SQL_IDENTIFIER", format!("column {name}.{:?} must match ^[A-Za-z_][A-Za-z0-9_]{{0,62}}$ (ASCII letters, digits and underscores)", column.name));
            } else if column.name.eq_ignore_ascii_case(VERSION_COLUMN) {
                diagnostics.push(
                    file,
                    line,
                    "SQL_RESERVED_NAME",
                    format!("column {name}.{VERSION_COLUMN} is added by the platform; remove it"),
                );
            }
            if column.generated {
                diagnostics.push(file, line, "SQL_COLUMN_UNSUPPORTED", format!("column {name}.{} is generated; generated columns are not supported: store the value or compute it in the app", column.name));
            }
        }
        if table.checks_unreadable {
            diagnostics.push(file, line, "SQL_CHECK_UNREADABLE", format!("the CHECK constraints of table {name} use syntax the platform cannot read, so it could not explain their violations; write each as CHECK (expression) over the table's columns"));
        }
        for check in &table.checks {
            let Some(rule) = &check.name else { continue };
            if rule.chars().count() > MAX_RULE_NAME_CHARS || rule.chars().any(char::is_control) {
                diagnostics.push(file, line, "SQL_CONSTRAINT_NAME", format!("a CHECK constraint's name is the message a violation shows: the one on table {name} must be one line of at most {MAX_RULE_NAME_CHARS} characters"));
            }
        }
    }
    for (name, index) in &schema.indexes {
        let (file, line) = origin_of(origins, name);
        if !is_identifier(name) {
            diagnostics.push(
                file,
                line,
                "SQL_IDENTIFIER",
                format!("index name {name:?} must match ^[A-Za-z_][A-Za-z0-9_]{{0,62}}$"),
            );
        }
        if index.partial
            || index
                .columns
                .iter()
                .any(|column| column == EXPRESSION_KEY || column == "rowid")
        {
            diagnostics.push(file, line, "SQL_INDEX_UNSUPPORTED", format!("index {name} must list plain columns only, without expressions or a WHERE clause"));
        }
    }
}

/// The manifest's tables against the structure schema.sql states.
fn check_declared_tables(
    manifest: &Manifest,
    schema: &Schema,
    origins: &Origins,
    diagnostics: &mut Diagnostics,
) {
    for (name, declaration) in &manifest.tables {
        let Some(table) = schema.tables.get(name) else {
            diagnostics.push(MANIFEST_FILE, None, "SQL_TABLE_UNDEFINED", format!("declared table {name} is not created in schema.sql (names are case-sensitive); create it or remove the declaration"));
            continue;
        };
        let (file, line) = origin_of(origins, name);
        let keys: Vec<&Column> = table
            .columns
            .iter()
            .filter(|column| column.primary_key)
            .collect();
        let id_ok = matches!(keys.as_slice(), [key] if key.name == ID_COLUMN && matches!(key.declared_type.as_str(), "INTEGER" | "TEXT"));
        if !id_ok {
            diagnostics.push(file, line, "SQL_ID_COLUMN", format!("declared table {name} needs a column id that is its only primary key, declared id INTEGER PRIMARY KEY or id TEXT PRIMARY KEY: the data service addresses rows by id"));
        }
        if let (Access::Owner, Some(field)) = (declaration.access, &declaration.owner_field) {
            match table.column(field) {
                None => diagnostics.push(MANIFEST_FILE, None, "SQL_OWNER_FIELD", format!("ownerField {field} of table {name} is not a column of {name}; add it as TEXT or name the existing owner column")),
                Some(_) if field == ID_COLUMN => diagnostics.push(MANIFEST_FILE, None, "SQL_OWNER_FIELD", format!("ownerField of table {name} must not be its id; add a TEXT column such as created_by")),
                Some(column) if column.declared_type != "TEXT" => diagnostics.push(file, line, "SQL_OWNER_FIELD", format!("ownerField {name}.{field} must be declared TEXT (it holds the user id); it is {:?}", column.declared_type)),
                Some(_) => {}
            }
        }
    }
}

/// One diagnostic per difference between what schema.sql states and what the
/// migrations build.
fn compare_replay(
    stated: &Schema,
    stated_origins: &Origins,
    replayed: &Schema,
    replayed_origins: &Origins,
    diagnostics: &mut Diagnostics,
) {
    const CODE: &str = "SQL_REPLAY_MISMATCH";
    for (name, table) in &stated.tables {
        let (file, line) = origin_of(stated_origins, name);
        let Some(built) = replayed.tables.get(name) else {
            diagnostics.push(file, line, CODE, format!("table {name} is in schema.sql but the migrations never create it: add a migration that creates it"));
            continue;
        };
        compare_tables(table, built, file, line, diagnostics);
    }
    for name in replayed
        .tables
        .keys()
        .filter(|name| !stated.tables.contains_key(*name))
    {
        let (file, line) = origin_of(replayed_origins, name);
        diagnostics.push(file, line, CODE, format!("the migrations leave table {name}, which schema.sql does not have: add it to schema.sql or drop it in a migration"));
    }
    for (name, index) in &stated.indexes {
        let (file, line) = origin_of(stated_origins, name);
        match replayed.indexes.get(name) {
            None => diagnostics.push(file, line, CODE, format!("index {name} is in schema.sql but the migrations never create it: add a migration that creates it")),
            Some(built) if built != index => diagnostics.push(file, line, CODE, format!(
                "index {name} differs: schema.sql has {} after the migrations: make them match",
                describe_index_pair(index, built)
            )),
            Some(_) => {}
        }
    }
    for name in replayed
        .indexes
        .keys()
        .filter(|name| !stated.indexes.contains_key(*name))
    {
        let (file, line) = origin_of(replayed_origins, name);
        diagnostics.push(file, line, CODE, format!("the migrations leave index {name}, which schema.sql does not have: add it to schema.sql or drop it in a migration"));
    }
}

fn describe_index(index: &Index) -> String {
    format!(
        "{}INDEX ON {}({}){}",
        if index.unique { "UNIQUE " } else { "" },
        index.table,
        index.columns.join(", "),
        if index.partial { " WHERE …" } else { "" }
    )
}

fn describe_index_pair(stated: &Index, built: &Index) -> String {
    format!(
        "{} but the migrations give {}",
        describe_index(stated),
        describe_index(built)
    )
}

fn compare_tables(
    stated: &Table,
    built: &Table,
    file: &str,
    line: Option<u32>,
    diagnostics: &mut Diagnostics,
) {
    const CODE: &str = "SQL_REPLAY_MISMATCH";
    let name = &stated.name;
    let mut columns_differ = false;
    for column in &stated.columns {
        let Some(other) = built.column(&column.name) else {
            diagnostics.push(file, line, CODE, format!("column {name}.{} is in schema.sql but not after the migrations: add it in a migration", column.name));
            columns_differ = true;
            continue;
        };
        let show_default =
            |value: &Option<String>| value.clone().unwrap_or_else(|| "no default".to_owned());
        let show_type = |value: &str| {
            if value.is_empty() {
                "untyped".to_owned()
            } else {
                value.to_owned()
            }
        };
        let differences = [
            (
                "type",
                show_type(&column.declared_type),
                show_type(&other.declared_type),
            ),
            ("NOT NULL", yes_no(column.not_null), yes_no(other.not_null)),
            (
                "default",
                show_default(&column.default_value),
                show_default(&other.default_value),
            ),
            (
                "PRIMARY KEY",
                yes_no(column.primary_key),
                yes_no(other.primary_key),
            ),
            (
                "generated",
                yes_no(column.generated),
                yes_no(other.generated),
            ),
        ];
        for (attribute, expected, actual) in differences {
            if expected != actual {
                diagnostics.push(file, line, CODE, format!("column {name}.{} differs in {attribute}: schema.sql has {expected}, the migrations give {actual}; make them match", column.name));
                columns_differ = true;
            }
        }
    }
    for column in built
        .columns
        .iter()
        .filter(|column| stated.column(&column.name).is_none())
    {
        diagnostics.push(file, line, CODE, format!("the migrations add column {name}.{} that schema.sql does not have: add it to schema.sql or drop the change", column.name));
        columns_differ = true;
    }
    if !columns_differ && stated.columns != built.columns {
        let order = |table: &Table| {
            table
                .columns
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        diagnostics.push(file, line, CODE, format!("columns of {name} are in a different order: schema.sql has ({}), the migrations give ({}); list columns added by migrations last", order(stated), order(built)));
    }
    if stated.unique != built.unique {
        diagnostics.push(file, line, CODE, format!("UNIQUE constraints of {name} differ: schema.sql has {:?}, the migrations give {:?}", stated.unique, built.unique));
    }
    if stated.checks != built.checks {
        diagnostics.push(file, line, CODE, format!("CHECK constraints of {name} differ between schema.sql and the migrations (a migration that adds one rebuilds the table); make them match"));
    }
    if stated.foreign_keys != built.foreign_keys {
        diagnostics.push(file, line, CODE, format!("REFERENCES constraints of {name} differ between schema.sql and the migrations; make them match"));
    }
    if stated.strict != built.strict {
        diagnostics.push(
            file,
            line,
            CODE,
            format!(
                "table {name} is {}STRICT in schema.sql but {}STRICT after the migrations",
                if stated.strict { "" } else { "not " },
                if built.strict { "" } else { "not " }
            ),
        );
    }
    if stated.without_rowid != built.without_rowid {
        diagnostics.push(
            file,
            line,
            CODE,
            format!("table {name} differs in WITHOUT ROWID between schema.sql and the migrations"),
        );
    }
}

fn yes_no(value: bool) -> String {
    if value { "yes" } else { "no" }.to_owned()
}

#[cfg(test)]
mod tests;
