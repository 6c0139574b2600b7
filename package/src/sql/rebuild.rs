//! Table rebuilds in migrations: SQLite's one way to change a column's type or
//! give an existing column a `CHECK` rule. A rebuild is, inside one migration
//! file, exactly
//!
//! ```sql
//! CREATE TABLE entries_new (…);
//! INSERT INTO entries_new (id, a, b) SELECT id, a, b FROM entries;
//! DROP TABLE entries;
//! ALTER TABLE entries_new RENAME TO entries;
//! ```
//!
//! The copy names every column of the old table on both sides, in the same
//! order, `id` among them, with nothing else (no expression, filter, join or
//! conflict clause), into a table this file created and nothing has filled.
//! The renamed table must be such a copy and its new name the table it was
//! copied from, dropped earlier in the file.
//!
//! This module must never admit a statement that could move a row into another
//! table than the one it is rebuilt from (a rename of a private table into a
//! shared one would widen who reads it), change a value on the way (an owner
//! field re-pointed at another user), or seed a row the app's users did not
//! write. A rebuild of a table other tables refer to is refused too: SQLite
//! would refuse the `DROP TABLE` on live rows those references hold.

use std::collections::{BTreeMap, BTreeSet};

use sasha_contract::data::{ID_COLUMN, Schema};
use sqlparser::ast::{Expr, SelectItem, SetExpr, Statement, TableFactor, TableObject};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

/// `INSERT INTO target (columns) SELECT columns FROM source`, as parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Copy {
    pub(super) target: String,
    pub(super) source: String,
    pub(super) columns: Vec<String>,
}

/// The strict copy `text` spells, or `None` for any other statement.
pub(super) fn parse_copy(text: &str) -> Option<Copy> {
    let statements = Parser::parse_sql(&SQLiteDialect {}, text).ok()?;
    let [Statement::Insert(insert)] = statements.as_slice() else {
        return None;
    };
    let TableObject::TableName(target) = &insert.table else {
        return None;
    };
    let query = insert.source.as_ref()?;
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let [from] = select.from.as_slice() else {
        return None;
    };
    let TableFactor::Table { name: source, .. } = &from.relation else {
        return None;
    };
    let [target_name] = target.0.as_slice() else {
        return None;
    };
    let [source_name] = source.0.as_slice() else {
        return None;
    };
    let mut columns = Vec::new();
    for (inserted, selected) in insert.columns.iter().zip(&select.projection) {
        let [inserted] = inserted.0.as_slice() else {
            return None;
        };
        let SelectItem::UnnamedExpr(Expr::Identifier(selected)) = selected else {
            return None;
        };
        let inserted = inserted.as_ident()?;
        if !inserted.value.eq_ignore_ascii_case(&selected.value) {
            return None;
        }
        columns.push(inserted.value.clone());
    }
    if columns.is_empty() || insert.columns.len() != select.projection.len() {
        return None;
    }
    // Anything more than the bare copy (WHERE, DISTINCT, an alias, a join,
    // ORDER BY, LIMIT, OR REPLACE, ON CONFLICT, RETURNING, a CTE) prints
    // differently from the statement rebuilt out of the parts read above.
    let listed = |items: Vec<String>| items.join(", ");
    let bare = format!(
        "INSERT INTO {target} ({}) SELECT {} FROM {source}",
        listed(insert.columns.iter().map(ToString::to_string).collect()),
        listed(select.projection.iter().map(ToString::to_string).collect()),
    );
    if statements[0].to_string() != bare {
        return None;
    }
    Some(Copy {
        target: target_name.as_ident()?.value.clone(),
        source: source_name.as_ident()?.value.clone(),
        columns,
    })
}

/// What one migration file has done toward its rebuilds so far. Names are
/// compared as SQLite does, without regard to ASCII case.
#[derive(Debug, Default)]
pub(super) struct Rebuilds {
    /// Tables this file created that no copy has filled yet.
    fresh: BTreeSet<String>,
    /// Copy target → the table it was copied from.
    copies: BTreeMap<String, String>,
    dropped: BTreeSet<String>,
    /// Rebuilt tables (their final names), with the line of their rename.
    done: BTreeMap<String, u32>,
}

fn key(name: &str) -> String {
    name.to_ascii_lowercase()
}

impl Rebuilds {
    pub(super) fn is_empty(&self) -> bool {
        self.copies.is_empty() && self.done.is_empty()
    }

    pub(super) fn created(&mut self, table: &str) {
        self.fresh.insert(key(table));
    }

    pub(super) fn dropped(&mut self, table: &str) {
        self.fresh.remove(&key(table));
        self.dropped.insert(key(table));
    }

    /// Why `copy` may not run, given the old table's columns; `None` admits it.
    pub(super) fn refuse_copy(&self, copy: &Copy, source_columns: &[String]) -> Option<String> {
        let (target, source) = (&copy.target, &copy.source);
        if !self.fresh.contains(&key(target)) || key(target) == key(source) {
            return Some(format!(
                "rows may only be copied into a table this migration created for a rebuild and has not filled yet; {target} is not one"
            ));
        }
        if source_columns.is_empty() {
            return Some(format!("table {source} does not exist"));
        }
        let copied: BTreeSet<String> = copy.columns.iter().map(|c| key(c)).collect();
        let existing: BTreeSet<String> = source_columns.iter().map(|c| key(c)).collect();
        if copied.len() != copy.columns.len() || copied != existing {
            return Some(format!(
                "a rebuild copies every column of {source} under its own name, so no value changes on the way: list ({}) on both sides",
                source_columns.join(", ")
            ));
        }
        if !copied.contains(ID_COLUMN) {
            return Some(format!("a rebuild keeps every row's {ID_COLUMN}; copy it"));
        }
        None
    }

    pub(super) fn copied(&mut self, copy: &Copy) {
        self.fresh.remove(&key(&copy.target));
        self.copies.insert(key(&copy.target), key(&copy.source));
    }

    /// Why `ALTER TABLE table RENAME TO new_name` may not run; `None` admits it.
    pub(super) fn refuse_rename(
        &mut self,
        table: &str,
        new_name: &str,
        line: u32,
    ) -> Option<String> {
        let source = self.copies.get(&key(table));
        match source {
            Some(source) if *source == key(new_name) && self.dropped.contains(source) => {
                self.done.insert(key(new_name), line);
                None
            }
            _ => Some(format!(
                "renaming a table is refused except to finish a rebuild: declared tables are addressed by name, so only a copy made in this migration may take the name of the table it was copied from, after that table is dropped; {table} → {new_name} is not that"
            )),
        }
    }

    /// The file's unfinished rebuilds and rebuilds of referenced tables, each
    /// with the line to report, read against the structure the file left.
    pub(super) fn finish(self, schema: &Schema) -> Vec<(Option<u32>, String)> {
        let mut problems = Vec::new();
        for (target, source) in &self.copies {
            if !self.done.contains_key(source) {
                problems.push((None, format!(
                    "rows of {source} were copied into {target}, but {target} was not renamed to {source}; a rebuild ends with DROP TABLE {source}; ALTER TABLE {target} RENAME TO {source}"
                )));
            }
        }
        for (rebuilt, line) in &self.done {
            let referring: Vec<&str> = schema
                .tables
                .values()
                .filter(|table| {
                    key(&table.name) != *rebuilt && !self.copies.contains_key(&key(&table.name))
                })
                .filter(|table| {
                    table
                        .foreign_keys
                        .iter()
                        .any(|fk| key(&fk.parent_table) == *rebuilt)
                })
                .map(|table| table.name.as_str())
                .collect();
            if !referring.is_empty() {
                problems.push((Some(*line), format!(
                    "table {rebuilt} cannot be rebuilt while {} refer to it: dropping it would fail on the rows those references hold",
                    referring.join(" and ")
                )));
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bare_copy_parses_as_one() {
        let copy =
            parse_copy("INSERT INTO entries_new (id, \"hours\") SELECT id, hours FROM entries")
                .unwrap();
        assert_eq!(copy.target, "entries_new");
        assert_eq!(copy.source, "entries");
        assert_eq!(copy.columns, ["id", "hours"]);
        for other in [
            "INSERT INTO n (id, owner) SELECT id, note FROM entries",
            "INSERT INTO n (id, owner) SELECT id, 'mallory' FROM entries",
            "INSERT INTO n (id, owner) SELECT id, lower(owner) FROM entries",
            "INSERT INTO n (id, owner) SELECT id, owner FROM entries WHERE owner = 'a'",
            "INSERT INTO n (id, owner) SELECT DISTINCT id, owner FROM entries",
            "INSERT INTO n (id, owner) SELECT id, owner FROM entries LIMIT 1",
            "INSERT INTO n (id, owner) SELECT id, owner FROM entries ORDER BY id",
            "INSERT INTO n (id, owner) SELECT e.id, e.owner FROM entries AS e",
            "INSERT INTO n (id, owner) SELECT id, owner FROM entries, other",
            "INSERT INTO n (id) SELECT id FROM entries UNION SELECT id FROM other",
            "INSERT OR REPLACE INTO n (id) SELECT id FROM entries",
            "INSERT INTO n (id) SELECT id FROM entries RETURNING id",
            "WITH x AS (SELECT 1) INSERT INTO n (id) SELECT id FROM entries",
            "INSERT INTO main.n (id) SELECT id FROM entries",
            "INSERT INTO n (id) VALUES (1)",
            "INSERT INTO n SELECT * FROM entries",
            "INSERT INTO n (id, a) SELECT id FROM entries",
        ] {
            assert_eq!(parse_copy(other), None, "{other}");
        }
    }

    fn copy(target: &str, source: &str, columns: &[&str]) -> Copy {
        Copy {
            target: target.to_owned(),
            source: source.to_owned(),
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
        }
    }

    #[test]
    fn a_copy_fills_a_fresh_table_once_with_every_old_column() {
        let old = ["id".to_owned(), "owner".to_owned()];
        let mut rebuilds = Rebuilds::default();
        let whole = copy("n", "entries", &["owner", "id"]);
        assert!(
            rebuilds
                .refuse_copy(&whole, &old)
                .unwrap()
                .contains("created")
        );
        rebuilds.created("N");
        assert!(
            rebuilds
                .refuse_copy(&copy("n", "entries", &["id"]), &old)
                .unwrap()
                .contains("every column")
        );
        assert!(
            rebuilds
                .refuse_copy(&copy("n", "entries", &["id", "id"]), &old)
                .is_some()
        );
        assert!(
            rebuilds
                .refuse_copy(&whole, &[])
                .unwrap()
                .contains("does not exist")
        );
        let no_id = ["owner".to_owned()];
        assert!(
            rebuilds
                .refuse_copy(&copy("n", "entries", &["owner"]), &no_id)
                .unwrap()
                .contains("id")
        );
        assert_eq!(rebuilds.refuse_copy(&whole, &old), None);
        rebuilds.copied(&whole);
        assert!(
            rebuilds.refuse_copy(&whole, &old).is_some(),
            "a second copy into the same table"
        );
    }

    #[test]
    fn only_a_copy_takes_its_dropped_source_s_name() {
        let mut rebuilds = Rebuilds::default();
        rebuilds.created("n");
        assert!(rebuilds.refuse_rename("entries", "shared", 3).is_some());
        let whole = copy("n", "entries", &["id"]);
        rebuilds.copied(&whole);
        assert!(
            rebuilds.refuse_rename("n", "entries", 3).is_some(),
            "source not dropped yet"
        );
        assert!(rebuilds.refuse_rename("n", "elsewhere", 3).is_some());
        rebuilds.dropped("entries");
        assert_eq!(rebuilds.refuse_rename("n", "Entries", 4), None);
        assert!(rebuilds.finish(&Schema::default()).is_empty());

        let mut unfinished = Rebuilds::default();
        unfinished.created("n");
        unfinished.copied(&whole);
        let problems = unfinished.finish(&Schema::default());
        assert!(problems[0].1.contains("was not renamed"), "{problems:?}");
    }
}
