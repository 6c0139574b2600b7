//! Constraints that would answer for other owners' rows. In an `access:
//! owner` table each user sees only the rows that name them, and another
//! owner's row must answer exactly like a missing one. A constraint SQLite
//! checks across the whole table breaks that: a UNIQUE column refuses a
//! value because someone else's row holds it, and a TEXT id (which the
//! writer chooses) refuses an id someone else's row has. So in an owner
//! table every UNIQUE constraint and unique index includes the owner field
//! (the value is then unique per owner), and the id is `INTEGER PRIMARY
//! KEY`, which the platform assigns.
//!
//! References into an owner table are the data service's to police, at the
//! write (a reference to a row the writer does not own answers as a missing
//! row), since what a row references is a value, not structure.
//!
//! This module only reads the structure schema.sql states; it must never
//! refuse a constraint of a shared or undeclared table, whose rows every
//! reader sees anyway.

use super::{Access, Diagnostics, ID_COLUMN, Manifest, Origins, Schema, origin_of};

const CODE: &str = "SQL_OWNER_UNIQUE";

/// One diagnostic per UNIQUE constraint, unique index or TEXT id of a
/// declared owner table that would tell one owner about another's rows.
pub(super) fn check_owner_constraints(
    manifest: &Manifest,
    schema: &Schema,
    origins: &Origins,
    diagnostics: &mut Diagnostics,
) {
    for (name, declaration) in &manifest.tables {
        let (Access::Owner, Some(owner)) = (declaration.access, &declaration.owner_field) else {
            continue;
        };
        let Some(table) = schema.tables.get(name) else {
            continue;
        };
        let (file, line) = origin_of(origins, name);
        if table
            .column(ID_COLUMN)
            .is_some_and(|id| id.primary_key && id.declared_type == "TEXT")
        {
            diagnostics.push(file, line, CODE, format!("table {name} is access: owner, so its id must be declared id INTEGER PRIMARY KEY, which the platform assigns: a TEXT id is chosen by whoever writes the row, and one that is taken would tell them another user's row has it"));
        }
        let covers_owner = |columns: &[String]| {
            columns
                .iter()
                .any(|column| column.eq_ignore_ascii_case(owner))
        };
        for columns in table.unique.iter().filter(|columns| !covers_owner(columns)) {
            diagnostics.push(file, line, CODE, refusal(name, owner, "UNIQUE", columns));
        }
        for (index_name, index) in &schema.indexes {
            if index.table == *name && index.unique && !covers_owner(&index.columns) {
                let (file, line) = origin_of(origins, index_name);
                let what = format!("unique index {index_name}");
                diagnostics.push(
                    file,
                    line,
                    CODE,
                    refusal(name, owner, &what, &index.columns),
                );
            }
        }
    }
}

fn refusal(table: &str, owner: &str, what: &str, columns: &[String]) -> String {
    let listed = columns.join(", ");
    format!(
        "{what} ({listed}) on table {table}, whose rows each user sees only when {owner} names them, would tell a user that another user's row already holds a value: include the owner field, as in UNIQUE ({owner}, {listed}), so values are unique per user"
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::diagnostics::Diagnostics;
    use crate::manifest::{Capabilities, DataCapability, Manifest, Theme};
    use crate::sql::{Access, TableDeclaration, check_data};

    /// `notes` (owner-scoped by `author`) and `tags` (shared), both made by
    /// `sql` as schema.sql and as the one migration: the diagnostics' (file,
    /// line, code).
    fn check(sql: &str) -> Vec<(String, Option<u32>, String, String)> {
        let declaration = |access: Access, owner: Option<&str>| TableDeclaration {
            access,
            owner_field: owner.map(str::to_owned),
            write: Default::default(),
            managers_read_all: false,
        };
        let manifest = Manifest {
            id: "notes".to_owned(),
            name: "Notes".to_owned(),
            description: "Notes".to_owned(),
            version: "1.0.0".to_owned(),
            theme: Theme::None,
            capabilities: Capabilities {
                chat: false,
                files: false,
                data: DataCapability::ReadWrite,
            },
            tables: BTreeMap::from([
                (
                    "notes".to_owned(),
                    declaration(Access::Owner, Some("author")),
                ),
                ("tags".to_owned(), declaration(Access::Shared, None)),
            ]),
            actions: Vec::new(),
        };
        let files = BTreeMap::from([
            ("schema.sql".to_owned(), sql.to_owned()),
            ("migrations/001-initial.sql".to_owned(), sql.to_owned()),
        ]);
        let mut diagnostics = Diagnostics::new();
        check_data(&manifest, &files, &mut diagnostics);
        diagnostics
            .into_sorted()
            .into_iter()
            .map(|d| (d.file, d.line, d.code, d.reason))
            .collect()
    }

    const TAGS: &str = "CREATE TABLE tags (id TEXT PRIMARY KEY, label TEXT NOT NULL UNIQUE);\n";

    #[test]
    fn an_owner_tables_unique_values_are_unique_per_owner() {
        for notes in [
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT UNIQUE, author TEXT NOT NULL);",
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT, day TEXT, author TEXT NOT NULL, UNIQUE (title, day));",
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT, author TEXT NOT NULL);\nCREATE UNIQUE INDEX notes_by_title ON notes (title);",
            "CREATE TABLE notes (id TEXT PRIMARY KEY, title TEXT, author TEXT NOT NULL);",
        ] {
            let found = check(&format!("{TAGS}{notes}\n"));
            let codes: Vec<&str> = found.iter().map(|(_, _, code, _)| code.as_str()).collect();
            assert_eq!(codes, ["SQL_OWNER_UNIQUE"], "{notes}: {found:#?}");
            let (file, line, _, reason) = &found[0];
            assert_eq!(file, "schema.sql");
            let expected_line = if notes.contains("INDEX") { 3 } else { 2 };
            assert_eq!(*line, Some(expected_line), "{notes}");
            assert!(reason.contains("another user's row"), "{reason}");
        }
        let found = check(&format!(
            "{TAGS}CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT UNIQUE, author TEXT NOT NULL);\n"
        ));
        assert!(
            found[0].3.contains("UNIQUE (author, title)"),
            "{}",
            found[0].3
        );
    }

    #[test]
    fn uniqueness_that_includes_the_owner_and_shared_tables_are_allowed() {
        for notes in [
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT, author TEXT NOT NULL, UNIQUE (author, title));",
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT, author TEXT NOT NULL, UNIQUE (title, Author));",
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT, author TEXT NOT NULL UNIQUE);",
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT, author TEXT NOT NULL);\nCREATE UNIQUE INDEX notes_by_title ON notes (title, author);",
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT, author TEXT NOT NULL);\nCREATE INDEX notes_by_title ON notes (title);",
        ] {
            let found = check(&format!("{TAGS}{notes}\n"));
            assert!(found.is_empty(), "{notes}: {found:#?}");
        }
    }
}
