//! The differential model of owner scoping the grammar is checked against,
//! shared by the unit tests' property test and the `grammar` fuzz target:
//! the same governed statements run over a database holding alice's and
//! bob's rows and over one holding alice's alone must answer alike, page by
//! page, and no row of bob's may ever come back to alice. Both databases
//! carry the engine's own authorizer (`engine::govern_for_oracle`), so every
//! statement the grammar accepts, reads and writes alike, must also pass it.
//!
//! Must never be part of a service build: only tests and the fuzz crate
//! (feature `oracle`) compile it, and it panics on anything it cannot set up.

use rusqlite::Connection;
use serde_json::{Map, Value, json};

use super::{
    Access, Column, ID_COLUMN, Request, Statement, TableSpec, VERSION_COLUMN, aggregate_statement,
    create_statement, delete_statement, get_statement, list_statement, parse, quote, row_to_json,
    update_statement,
};

/// The cursor secret of the model.
pub const SECRET: &[u8] = b"0123456789abcdef-test-secret";
/// The owner whose requests are checked, and the one whose rows must stay
/// hidden from them.
pub const ALICE: &str = "alice";
pub const BOB: &str = "bob";
/// The fields of [`items`] a request may name.
pub const FIELDS: [&str; 6] = ["id", "title", "hours", "count", "note", VERSION_COLUMN];

/// A declared column.
pub fn column(name: &str, declared_type: &str, not_null: bool) -> Column {
    Column {
        name: name.to_owned(),
        declared_type: declared_type.to_owned(),
        not_null,
        default_value: None,
        primary_key: name == ID_COLUMN,
        generated: false,
    }
}

/// `items`: an owner table scoped by `created_by`.
pub fn items() -> TableSpec {
    TableSpec {
        name: "items".to_owned(),
        columns: vec![
            column("id", "INTEGER", false),
            column("title", "TEXT", true),
            column("hours", "REAL", false),
            column("count", "INTEGER", false),
            column("note", "TEXT", false),
            column("created_by", "TEXT", true),
        ],
        owner_field: Some("created_by".to_owned()),
        access: Access::Owner,
    }
}

/// An in-memory database with `tables` created as the engine would.
pub fn database(tables: &[&TableSpec]) -> Connection {
    let mut connection = Connection::open_in_memory().expect("an in-memory database");
    for table in tables {
        let columns: Vec<String> = table
            .columns
            .iter()
            .map(|c| {
                let mut sql = format!("{} {}", quote(&c.name), c.declared_type);
                if c.primary_key {
                    sql.push_str(" PRIMARY KEY");
                }
                if c.not_null {
                    sql.push_str(" NOT NULL");
                }
                sql
            })
            .collect();
        connection
            .execute_batch(&format!(
                "CREATE TABLE {} ({}, {VERSION_COLUMN} INTEGER NOT NULL);",
                quote(&table.name),
                columns.join(", ")
            ))
            .expect("the model's table");
    }
    let names: Vec<&str> = tables.iter().map(|table| table.name.as_str()).collect();
    crate::engine::govern_for_oracle(&mut connection, &names);
    connection
}

/// The rows `statement` answers on `connection`.
pub fn run(connection: &Connection, statement: &Statement) -> Vec<Map<String, Value>> {
    let mut prepared = connection.prepare(&statement.sql).unwrap_or_else(|error| {
        panic!("a governed statement does not prepare: {error}: {statement:?}")
    });
    let rows = prepared
        .query_map(rusqlite::params_from_iter(&statement.params), |row| {
            row_to_json(&statement.columns, row)
        })
        .unwrap_or_else(|error| {
            panic!("a governed statement does not run: {error}: {statement:?}")
        });
    rows.map(|row| row.expect("a governed row")).collect()
}

/// Inserts `values` as `actor` through the grammar's own create statement.
pub fn insert(
    connection: &Connection,
    table: &TableSpec,
    actor: &str,
    values: Value,
) -> Map<String, Value> {
    let Value::Object(values) = values else {
        panic!("values must be an object")
    };
    let statement = create_statement(table, &values, actor).expect("a model row");
    run(connection, &statement).remove(0)
}

/// One seeded row: its owner, `title`, `count` (also its `hours`) and `note`.
pub type Seed = (String, Value, Value, Value);

/// The two databases of the model over [`items`].
pub struct Model {
    pub table: TableSpec,
    /// Alice's and Bob's rows.
    pub both: Connection,
    /// The same rows, then Bob's deleted (so ids agree).
    pub alone: Connection,
}

impl Model {
    pub fn seeded(seed: &[Seed]) -> Model {
        let table = items();
        let both = database(&[&table]);
        let alone = database(&[&table]);
        for connection in [&both, &alone] {
            for (actor, title, count, note) in seed {
                insert(
                    connection,
                    &table,
                    actor,
                    json!({"title": title, "count": count, "note": note, "hours": count}),
                );
            }
        }
        alone
            .execute("DELETE FROM items WHERE created_by = ?1", [BOB])
            .expect("bob's rows removed");
        Model { table, both, alone }
    }

    /// Checks one request of `operation` (the wire JSON text `request`) as
    /// alice: a refusal is fine; an accepted read must answer the same on
    /// both databases, every page, with none of bob's rows. `Err` says how
    /// the model was broken.
    pub fn check(&self, operation: &str, request: &str) -> Result<(), String> {
        let Ok(parsed) = parse(operation, &self.table, request) else {
            return Ok(());
        };
        match parsed {
            Request::List(query) | Request::Export(query) => {
                let mut query = query;
                for _ in 0..40 {
                    let Ok((statement, plan)) = list_statement(&self.table, &query, ALICE, SECRET)
                    else {
                        return Ok(());
                    };
                    // The owner term is top level: every other part is
                    // parenthesised.
                    if !statement.sql.contains(" \"created_by\" = ? ORDER BY ") {
                        return Err(format!("no top-level owner term: {}", statement.sql));
                    }
                    let (both, next_both) = plan.finish_page(run(&self.both, &statement), SECRET);
                    let (alone, next_alone) =
                        plan.finish_page(run(&self.alone, &statement), SECRET);
                    self.only_alices(&both, &statement)?;
                    if both != alone || next_both != next_alone {
                        return Err(format!("bob's rows changed alice's page: {statement:?}"));
                    }
                    match next_both {
                        Some(next) => query.cursor = Some(next),
                        None => break,
                    }
                }
                Ok(())
            }
            Request::Aggregate(query) => {
                let Ok(statement) = aggregate_statement(&self.table, &query, ALICE) else {
                    return Ok(());
                };
                if !statement.sql.contains(" \"created_by\" = ?")
                    || statement.sql.contains("\"created_by\" = ?)")
                {
                    return Err(format!("no top-level owner term: {}", statement.sql));
                }
                if run(&self.both, &statement) != run(&self.alone, &statement) {
                    return Err(format!("bob's rows changed alice's totals: {statement:?}"));
                }
                Ok(())
            }
            Request::Get { id } => {
                let Ok(statement) = get_statement(&self.table, &id, ALICE) else {
                    return Ok(());
                };
                let both = run(&self.both, &statement);
                self.only_alices(&both, &statement)?;
                if both != run(&self.alone, &statement) {
                    return Err(format!("bob's rows changed alice's get: {statement:?}"));
                }
                Ok(())
            }
            // Writes bind their owner from the actor; the model checks that
            // the engine's authorizer lets each accepted one prepare.
            Request::Create { values, .. } => {
                self.authorized(create_statement(&self.table, &values, ALICE))
            }
            Request::Update {
                id,
                changes,
                expected_version,
                ..
            } => self.authorized(update_statement(
                &self.table,
                &id,
                &changes,
                expected_version,
                ALICE,
            )),
            Request::Delete {
                id,
                expected_version,
                ..
            } => self.authorized(delete_statement(&self.table, &id, expected_version, ALICE)),
            // History reads the platform's ledger, which the engine reads
            // as itself, not as a governed statement; an import's rows are
            // creates, checked as creates above.
            Request::History { .. } | Request::Import { .. } => Ok(()),
        }
    }

    /// A statement the grammar built must prepare under the authorizer; one
    /// it refused to build is fine.
    fn authorized(
        &self,
        statement: Result<Statement, sasha_proto::AppError>,
    ) -> Result<(), String> {
        let Ok(statement) = statement else {
            return Ok(());
        };
        match self.both.prepare(&statement.sql) {
            Ok(_) => Ok(()),
            Err(error) => Err(format!(
                "an accepted statement does not pass the authorizer: {error}: {statement:?}"
            )),
        }
    }

    fn only_alices(
        &self,
        rows: &[Map<String, Value>],
        statement: &Statement,
    ) -> Result<(), String> {
        // A projection may leave the owner out; look the ids up then.
        for row in rows {
            let owner = match (row.get("created_by"), row.get(ID_COLUMN)) {
                (Some(owner), _) => owner.clone(),
                (None, Some(id)) => self
                    .both
                    .query_row(
                        "SELECT created_by FROM items WHERE id = ?1",
                        [id.as_i64().unwrap_or_default()],
                        |row| row.get::<_, String>(0),
                    )
                    .map(Value::from)
                    .unwrap_or(Value::Null),
                (None, None) => continue,
            };
            if owner == BOB {
                return Err(format!("alice was shown bob's row {row:?}: {statement:?}"));
            }
        }
        Ok(())
    }
}
