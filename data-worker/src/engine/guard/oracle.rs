//! The model the read guard is checked against, shared by the unit tests'
//! property test and the `read_guard` fuzz target: a populated database
//! (alice's and bob's notes, a shared tags table) set up by the engine for
//! a first contract, then a generated change (migration steps: columns
//! added with or without a default, renamed, dropped; `UPDATE`s of one
//! value or of one column from another; notes duplicated under another
//! owner, deleted, or copied into the shared table; table rebuilds, straight
//! or with two columns crossed; and a new declaration: shared or
//! owner-scoped, by which field, with `managersReadAll` or not, or
//! undeclared) set up through the engine's own `setup`, with or without an
//! admin's approval. What the change does is read from a second copy where
//! it was approved. The rule is restated here by value, independently of
//! the guard's hashes:
//!
//! - without approval, no row of a declared table may end up readable by
//!   someone who could not read it before: every row after must have been
//!   there before, and its readers (its owner, all managers under
//!   `managersReadAll`, everyone when shared; a NULL owner is nobody) must be
//!   among its readers before;
//! - a change that keeps every row and every (id, owner) pair and widens no
//!   policy of a table holding rows is accepted, so the guard is no blanket
//!   refusal;
//! - with approval, whatever SQLite can run is accepted, and a changed
//!   policy is recorded with the approving admin;
//! - a refused or failed change leaves every byte of the database as it was.
//!
//! The values of rows that stay are not part of the model (the guard does
//! not compare them; see `super`).
//!
//! Must never be part of a service build: only tests and the fuzz crate
//! (feature `oracle`) compile it, and it panics on anything it cannot set up.

use std::collections::BTreeMap;

use rusqlite::Connection;
use rusqlite::types::Value;
use sasha_contract::data::{
    Access, DataContract, Migration, Readers, TableDeclaration, contract_hash, read_schema,
    sha256_hex,
};
use sasha_proto::ErrorCode;

use super::{Approval, setup_for_oracle};

/// The admin whose approval the model gives.
pub const ADMIN: &str = "admin-1";
/// Column names a step may use: the owner column, a note's text, and
/// columns an author might plant.
pub const COLUMNS: [&str; 5] = ["owner", "body", "grab", "orig", "note"];
/// Values a step may write: two users, someone else, nobody, an empty text.
pub const VALUES: [Option<&str>; 5] = [Some("alice"), Some("bob"), Some("mallory"), None, Some("")];
/// Most migration steps one change takes.
pub const MAX_STEPS: usize = 8;

/// The first migration: alice's and bob's notes, and the shared tags.
pub const INITIAL: &str = "CREATE TABLE notes (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, body TEXT);\n\
                       CREATE TABLE tags (id INTEGER PRIMARY KEY, label TEXT NOT NULL);\n";

/// One migration step, over the columns the generator believes `notes` has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `ALTER TABLE notes ADD COLUMN c TEXT [DEFAULT v]`.
    Add {
        column: usize,
        default: Option<usize>,
    },
    /// `ALTER TABLE notes RENAME COLUMN a TO b`.
    Rename { from: usize, to: usize },
    /// `ALTER TABLE notes DROP COLUMN c`.
    Drop { column: usize },
    /// `UPDATE notes SET c = v` on the rows of one id parity.
    Set {
        column: usize,
        value: usize,
        parity: bool,
    },
    /// `UPDATE notes SET a = b`: one column's values copied to another.
    Copy { to: usize, from: usize },
    /// `INSERT INTO notes (owner, body) SELECT v, body FROM notes`: every
    /// note's text again, owned by `v`.
    Duplicate { value: usize },
    /// `DELETE FROM notes` on the rows of one id parity.
    Delete { parity: bool },
    /// `INSERT INTO tags (label) SELECT body FROM notes`: every note's text
    /// copied into the shared table.
    Leak,
    /// The platform's table rebuild (new table, copy, drop, rename), with
    /// two columns' values crossed on the way when `cross` names them.
    Rebuild { cross: Option<(usize, usize)> },
}

/// How the change declares a table: not at all, shared, or owner-scoped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Declared {
    No,
    Shared,
    Owner {
        field: usize,
        managers_read_all: bool,
    },
}

/// One generated change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The first contract's `notes`: owner-scoped by `owner` (with
    /// `managersReadAll` or not) or shared.
    pub notes_before: Declared,
    /// The second contract's `notes` and `tags`.
    pub notes: Declared,
    pub tags: Declared,
    /// The owner of each of the six notes: alice for a 0 bit, bob for a 1.
    pub owners: u8,
    pub steps: Vec<Step>,
    pub approved: bool,
}

impl Change {
    /// A change decoded from arbitrary bytes (the fuzz target's input and
    /// the property test's): every byte string is some change, and its steps
    /// name columns `notes` has at that point, so most changes run.
    pub fn from_bytes(bytes: &[u8]) -> Change {
        let byte = |at: usize| bytes.get(at).copied().unwrap_or(0);
        let index = |name: &str| COLUMNS.iter().position(|c| *c == name).unwrap_or(0);
        // The columns of notes besides id, as each step leaves them.
        let mut columns: Vec<&str> = vec!["owner", "body"];
        let absent = |columns: &Vec<&str>, n: usize| {
            let free: Vec<&str> = COLUMNS
                .iter()
                .copied()
                .filter(|c| !columns.contains(c))
                .collect();
            (!free.is_empty()).then(|| free[n % free.len()])
        };
        let mut steps = Vec::new();
        for chunk in bytes.get(4..).unwrap_or_default().chunks(3).take(MAX_STEPS) {
            let (kind, a, b) = (
                chunk[0],
                usize::from(*chunk.get(1).unwrap_or(&0)),
                usize::from(*chunk.get(2).unwrap_or(&0)),
            );
            let present = |n: usize| columns.get(n % columns.len().max(1)).copied();
            let value = |n: usize| n % VALUES.len();
            let step = match kind % 9 {
                0 => absent(&columns, a).map(|name| {
                    columns.push(name);
                    Step::Add {
                        column: index(name),
                        default: (b % 2 == 1).then(|| value(b / 2)),
                    }
                }),
                1 => present(a).zip(absent(&columns, b)).map(|(from, to)| {
                    for column in &mut columns {
                        if *column == from {
                            *column = to;
                        }
                    }
                    Step::Rename {
                        from: index(from),
                        to: index(to),
                    }
                }),
                2 => present(a).map(|name| {
                    columns.retain(|column| *column != name);
                    Step::Drop {
                        column: index(name),
                    }
                }),
                3 => present(a).map(|name| Step::Set {
                    column: index(name),
                    value: value(b),
                    parity: b & 0x80 != 0,
                }),
                4 => present(a).zip(present(b)).map(|(to, from)| Step::Copy {
                    to: index(to),
                    from: index(from),
                }),
                5 => Some(Step::Duplicate { value: value(a) }),
                6 => Some(Step::Delete { parity: a % 2 == 1 }),
                7 => Some(Step::Leak),
                _ => Some(Step::Rebuild {
                    cross: (a % 2 == 1)
                        .then(|| present(a / 2).zip(present(b)))
                        .flatten()
                        .map(|(x, y)| (index(x), index(y))),
                }),
            };
            steps.extend(step);
        }
        let first = byte(0);
        let notes_before = if first & 1 == 1 {
            Declared::Shared
        } else {
            Declared::Owner {
                field: 0,
                managers_read_all: first & 2 == 2,
            }
        };
        let code = byte(1);
        let notes = match code % 4 {
            0 => Declared::No,
            2 => Declared::Shared,
            _ => Declared::Owner {
                field: columns
                    .get(usize::from(code / 4) % columns.len().max(1))
                    .map_or(0, |name| index(name)),
                managers_read_all: code & 0x80 != 0,
            },
        };
        let tags = if byte(2) % 4 == 0 {
            Declared::No
        } else {
            Declared::Shared
        };
        Change {
            notes_before,
            notes,
            tags,
            owners: byte(3),
            steps,
            // One change in four is approved.
            approved: first & 0x0c == 0x0c,
        }
    }
}

/// The SQL of `steps`, tracking `notes`' columns as SQLite would change
/// them (a step SQLite refuses fails the whole migration, which the model
/// then only checks for leaving the database untouched).
fn migration_sql(steps: &[Step]) -> String {
    let mut columns: Vec<String> = vec!["id".into(), "owner".into(), "body".into()];
    let literal = |value: usize| match VALUES[value] {
        Some(text) => format!("'{text}'"),
        None => "NULL".to_owned(),
    };
    let mut sql = String::new();
    for step in steps {
        match step {
            Step::Add { column, default } => {
                let default = default.map_or(String::new(), |v| format!(" DEFAULT {}", literal(v)));
                sql.push_str(&format!(
                    "ALTER TABLE notes ADD COLUMN {} TEXT{default};\n",
                    COLUMNS[*column]
                ));
                columns.push(COLUMNS[*column].to_owned());
            }
            Step::Rename { from, to } => {
                sql.push_str(&format!(
                    "ALTER TABLE notes RENAME COLUMN {} TO {};\n",
                    COLUMNS[*from], COLUMNS[*to]
                ));
                for name in &mut columns {
                    if name == COLUMNS[*from] {
                        *name = COLUMNS[*to].to_owned();
                    }
                }
            }
            Step::Drop { column } => {
                sql.push_str(&format!(
                    "ALTER TABLE notes DROP COLUMN {};\n",
                    COLUMNS[*column]
                ));
                columns.retain(|name| name != COLUMNS[*column]);
            }
            Step::Set {
                column,
                value,
                parity,
            } => sql.push_str(&format!(
                "UPDATE notes SET {} = {} WHERE id % 2 = {};\n",
                COLUMNS[*column],
                literal(*value),
                u8::from(*parity)
            )),
            Step::Copy { to, from } => sql.push_str(&format!(
                "UPDATE notes SET {} = {};\n",
                COLUMNS[*to], COLUMNS[*from]
            )),
            Step::Duplicate { value } => sql.push_str(&format!(
                "INSERT INTO notes (owner, body) SELECT {}, body FROM notes;\n",
                literal(*value)
            )),
            Step::Delete { parity } => sql.push_str(&format!(
                "DELETE FROM notes WHERE id % 2 = {};\n",
                u8::from(*parity)
            )),
            Step::Leak => sql.push_str("INSERT INTO tags (label) SELECT body FROM notes;\n"),
            Step::Rebuild { cross } => {
                let definitions: Vec<String> = columns
                    .iter()
                    .map(|name| {
                        if name == "id" {
                            "id INTEGER PRIMARY KEY".to_owned()
                        } else {
                            format!("{name} TEXT")
                        }
                    })
                    .collect();
                let mut selected = columns.clone();
                if let Some((a, b)) = cross {
                    let (a, b) = (COLUMNS[*a], COLUMNS[*b]);
                    for name in &mut selected {
                        if name == a {
                            *name = b.to_owned();
                        } else if name == b {
                            *name = a.to_owned();
                        }
                    }
                }
                sql.push_str(&format!(
                    "CREATE TABLE notes_new ({});\nINSERT INTO notes_new ({}) SELECT {} FROM notes;\n\
                     DROP TABLE notes;\nALTER TABLE notes_new RENAME TO notes;\n",
                    definitions.join(", "),
                    columns.join(", "),
                    selected.join(", ")
                ));
            }
        }
    }
    sql
}

fn declaration(declared: &Declared) -> Option<TableDeclaration> {
    let (access, owner_field, managers_read_all) = match declared {
        Declared::No => return None,
        Declared::Shared => (Access::Shared, None, false),
        Declared::Owner {
            field,
            managers_read_all,
        } => (
            Access::Owner,
            Some(COLUMNS[*field].to_owned()),
            *managers_read_all,
        ),
    };
    Some(TableDeclaration {
        access,
        owner_field,
        write: Default::default(),
        managers_read_all,
    })
}

/// A contract of `migrations` declaring `notes` and `tags`; its schema is
/// the migrations' replay on an empty database. `None` when SQLite refuses
/// the migrations or nothing is declared.
pub fn contract(migrations: &[&str], notes: &Declared, tags: &Declared) -> Option<DataContract> {
    let replay = Connection::open_in_memory().expect("a replay database");
    for sql in migrations {
        replay.execute_batch(sql).ok()?;
    }
    let migrations: Vec<Migration> = migrations
        .iter()
        .enumerate()
        .map(|(index, sql)| Migration {
            file: format!("migrations/{:03}-step.sql", index + 1),
            number: u32::try_from(index + 1).expect("few migrations"),
            sql: (*sql).to_owned(),
            checksum: sha256_hex(sql.as_bytes()),
        })
        .collect();
    let mut tables = BTreeMap::new();
    for (name, declared) in [("notes", notes), ("tags", tags)] {
        if let Some(declaration) = declaration(declared) {
            tables.insert(name.to_owned(), declaration);
        }
    }
    let schema = read_schema(&replay).expect("the replay's structure");
    // What the validator requires of a declaration: a table of the schema,
    // and an owner field that is one of its columns.
    let consistent = tables.iter().all(|(name, declaration)| {
        schema.tables.get(name).is_some_and(|table| {
            declaration
                .owner_field
                .as_ref()
                .is_none_or(|field| table.column(field).is_some())
        })
    });
    if tables.is_empty() || !consistent {
        return None;
    }
    Some(DataContract {
        schema,
        hash: contract_hash(&tables, &migrations),
        migrations,
        tables,
    })
}

/// Every row of every table (the platform's included) and the structure,
/// as text: what "nothing was written" compares.
fn dump(conn: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    let mut statement = conn
        .prepare("SELECT type, name, sql FROM sqlite_schema ORDER BY type, name")
        .expect("the schema");
    let objects: Vec<(String, String, Option<String>)> = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .expect("the schema's rows")
        .map(|row| row.expect("a schema row"))
        .collect();
    for (kind, name, sql) in objects {
        out.push(format!("{kind} {name} {sql:?}"));
        if kind == "table" {
            let mut rows = conn
                .prepare(&format!("SELECT * FROM \"{name}\" ORDER BY 1"))
                .expect("a table's rows");
            let width = rows.column_count();
            let all: Vec<String> = rows
                .query_map([], |row| {
                    let values: Vec<Value> = (0..width)
                        .map(|index| row.get::<_, Value>(index))
                        .collect::<Result<_, _>>()?;
                    Ok(format!("{values:?}"))
                })
                .expect("the rows")
                .map(|row| row.expect("a row"))
                .collect();
            out.extend(all.into_iter().map(|row| format!("  {name}: {row}")));
        }
    }
    out
}

/// Who reads a row: everyone, or its owner (none for NULL) and, with
/// `managersReadAll`, the managers.
#[derive(Debug, Clone, PartialEq)]
enum Reading {
    Everyone,
    Some {
        owner: Option<Value>,
        managers: bool,
    },
}

impl Reading {
    fn within(&self, before: &Reading) -> bool {
        match (self, before) {
            (_, Reading::Everyone) => true,
            (Reading::Everyone, _) => false,
            (
                Reading::Some { owner, managers },
                Reading::Some {
                    owner: owner_before,
                    managers: managers_before,
                },
            ) => (owner.is_none() || owner == owner_before) && (!managers || *managers_before),
        }
    }
}

/// `notes`' rows by id with who reads each under `declared` (none when
/// the table is not declared or lacks the owner column).
fn readers(conn: &Connection, declared: &Declared) -> BTreeMap<i64, Reading> {
    let field = match declared {
        Declared::No => return BTreeMap::new(),
        Declared::Shared => None,
        Declared::Owner { field, .. } => Some(COLUMNS[*field]),
    };
    let managers = matches!(
        declared,
        Declared::Owner {
            managers_read_all: true,
            ..
        }
    );
    let owner = field.unwrap_or("NULL");
    let Ok(mut statement) = conn.prepare(&format!("SELECT id, {owner} FROM notes")) else {
        return BTreeMap::new();
    };
    statement
        .query_map([], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, Value>(1)?))
        })
        .expect("notes' rows")
        .map(|row| {
            let (id, owner) = row.expect("a note");
            let reading = match field {
                None => Reading::Everyone,
                Some(_) => Reading::Some {
                    owner: (owner != Value::Null).then_some(owner),
                    managers,
                },
            };
            (id, reading)
        })
        .collect()
}

/// `notes`' (id, owner) pairs by `field`, in id order.
fn pairs(conn: &Connection, field: &str) -> Option<Vec<(Value, Value)>> {
    let mut statement = conn
        .prepare(&format!("SELECT id, {field} FROM notes ORDER BY id"))
        .ok()?;
    let rows = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .ok()?;
    rows.collect::<Result<_, _>>().ok()
}

/// The ids of `table` in order (none when it does not exist).
fn ids(conn: &Connection, table: &str) -> Vec<i64> {
    let Ok(mut statement) = conn.prepare(&format!("SELECT id FROM {table} ORDER BY id")) else {
        return Vec::new();
    };
    statement
        .query_map([], |row| row.get(0))
        .expect("the ids")
        .map(|id| id.expect("an id"))
        .collect()
}

/// The populated database of the model, set up for `first`.
fn populated(first: &DataContract, owners: u8) -> Result<Connection, String> {
    let mut conn = Connection::open_in_memory().expect("the model's database");
    setup_for_oracle(&mut conn, first, Approval::None)
        .map_err(|error| format!("the first contract is refused: {}", error.message))?;
    for row in 0..6u8 {
        let owner = if owners & (1 << row) == 0 {
            "alice"
        } else {
            "bob"
        };
        conn.execute(
            "INSERT INTO notes (owner, body, _sasha_version) VALUES (?1, ?2, 1)",
            (owner, format!("note {row}")),
        )
        .expect("a note");
    }
    conn.execute_batch("INSERT INTO tags (label, _sasha_version) VALUES ('red', 1), ('blue', 1);")
        .expect("the tags");
    Ok(conn)
}

/// Sets up the model for `change` and checks the guard's verdict against
/// the rule; `Err` says how the guard broke it. What the change would do
/// is read from a second copy of the database where an admin approved it
/// (the guard then only records); a change SQLite cannot run there must
/// fail alike and write nothing.
pub fn check(change: &Change) -> Result<(), String> {
    let Some(first) = contract(&[INITIAL], &change.notes_before, &Declared::Shared) else {
        return Err("the first contract does not build".to_owned());
    };
    let step_sql = migration_sql(&change.steps);
    let migrations: Vec<&str> = if step_sql.is_empty() {
        vec![INITIAL]
    } else {
        vec![INITIAL, &step_sql]
    };
    let Some(second) = contract(&migrations, &change.notes, &change.tags) else {
        return Ok(());
    };
    let mut guarded = populated(&first, change.owners)?;
    let mut effect = populated(&first, change.owners)?;
    let dumped = dump(&guarded);
    let reading_before = readers(&guarded, &change.notes_before);
    let pairs_before = pairs(&guarded, "owner");
    let ids_before = [ids(&guarded, "notes"), ids(&guarded, "tags")];
    let approval = if change.approved {
        Approval::Admin(ADMIN)
    } else {
        Approval::None
    };
    let ran = setup_for_oracle(&mut effect, &second, Approval::Admin(ADMIN));
    let outcome = setup_for_oracle(&mut guarded, &second, approval);
    if let Err(error) = &outcome
        && dump(&guarded) != dumped
    {
        return Err(format!(
            "a refused change ({}: {}) wrote to the database",
            error.code.as_str(),
            error.message
        ));
    }
    if let Err(cannot) = ran {
        // SQLite could not run it, or the result does not match the
        // declared structure: the guarded run fails alike.
        return match outcome {
            Ok(_) => Err(format!(
                "a change that cannot run ({}) was applied",
                cannot.message
            )),
            Err(_) => Ok(()),
        };
    }

    // What the change does, by value.
    let reading_after = readers(&effect, &change.notes);
    let tags_after = match change.tags {
        Declared::No => Vec::new(),
        _ => ids(&effect, "tags"),
    };
    let violation = reading_after
        .iter()
        .find(|(id, now)| {
            reading_before
                .get(*id)
                .is_none_or(|before| !now.within(before))
        })
        .map(|(id, now)| {
            format!(
                "note {id} became readable by {now:?} (before: {:?})",
                reading_before.get(id)
            )
        })
        .or_else(|| {
            tags_after
                .iter()
                .find(|id| !ids_before[1].contains(id))
                .map(|id| format!("tag {id} appeared in a shared table"))
        });
    let rows_kept = ["notes", "tags"]
        .iter()
        .zip(&ids_before)
        .all(|(table, before)| {
            let after = ids(&effect, table);
            after.is_empty() || after == *before
        });
    let widened_policy = !reading_after.is_empty()
        && matches!(
            (&change.notes_before, &change.notes),
            (Declared::Owner { .. }, Declared::Shared)
                | (
                    Declared::Owner {
                        managers_read_all: false,
                        ..
                    },
                    Declared::Owner {
                        managers_read_all: true,
                        ..
                    },
                )
        );
    let owners_kept = match (&change.notes_before, &change.notes) {
        (Declared::Owner { .. }, Declared::Owner { field, .. }) => {
            reading_after.is_empty() || pairs(&effect, COLUMNS[*field]) == pairs_before
        }
        _ => true,
    };

    match (outcome, change.approved) {
        (Err(error), true) => Err(format!("an approved change was refused: {}", error.message)),
        (Err(error), false) if error.code != ErrorCode::AccessDenied => Err(format!(
            "a change that runs failed for another reason than the guard: {}",
            error.message
        )),
        (Err(error), false) => {
            if rows_kept && owners_kept && !widened_policy {
                Err(format!(
                    "a change that keeps every row and owner and widens nothing was refused: {}",
                    error.message
                ))
            } else {
                Ok(())
            }
        }
        (Ok(_), false) => match violation {
            Some(violation) => Err(format!("{violation} without approval")),
            None => Ok(()),
        },
        (Ok(_), true) => {
            // Recorded with the admin who approved it.
            let notes: Option<(String, Option<String>)> = guarded
                .query_row(
                    "SELECT readers, approved_by FROM _sasha_read_policy WHERE table_name = 'notes'",
                    [],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .ok();
            match (declaration(&change.notes), notes) {
                (Some(declared), Some((readers, approved_by))) => {
                    let recorded: Readers = serde_json::from_str(&readers)
                        .map_err(|e| format!("an unreadable record: {e}"))?;
                    if recorded != Readers::of(&declared) {
                        return Err(format!("recorded {recorded:?} for {declared:?}"));
                    }
                    let changed = declaration(&change.notes_before)
                        .is_none_or(|before| Readers::of(&before) != recorded);
                    if changed && approved_by.as_deref() != Some(ADMIN) {
                        return Err(format!(
                            "a changed entry names {approved_by:?} as approving"
                        ));
                    }
                    Ok(())
                }
                (Some(_), None) => Err("an approved declaration was not recorded".to_owned()),
                (None, _) => Ok(()),
            }
        }
    }
}
