//! The owner column of an owner-scoped table in migrations: each existing
//! row's owner is the value its owner column holds, so a migration must
//! never change which column that is nor fill it for rows that exist. An
//! `ALTER TABLE` on a table the manifest declares `access: owner` is
//! refused when it renames the owner column away, renames another column
//! onto its name (`ADD COLUMN grab DEFAULT '<someone>'`, then `RENAME
//! COLUMN owner TO x`, then `RENAME COLUMN grab TO owner` hands every row
//! to someone), or adds the owner column with a default (every existing
//! row would then belong to that value). The verdict comes from the scratch
//! database's columns before and after the statement, as SQLite applied
//! it, not from reading the statement's text.
//!
//! The rest of the rule is elsewhere: dropping any column and every
//! `UPDATE`, `INSERT` or `DELETE` in a migration are refused for all
//! tables (`super::AuthState`, `split::Lexed::alter_refusal`), a rebuild
//! copies every column under its own name (`super::rebuild`), and
//! data-worker compares each owner-scoped table's (id, owner) pairs before
//! and after the migrations in their own transaction, which no package text
//! can fool. This module must never be the only guard of the rows: it sees
//! the manifest being validated, not the one the rows were written under.

use std::collections::BTreeMap;

use rusqlite::Connection;

use crate::manifest::Manifest;

use super::Access;

/// The owner field of each owner-scoped table the manifest declares, by
/// table name in lowercase (SQLite's names ignore ASCII case).
#[derive(Debug, Default)]
pub(super) struct OwnerColumns {
    by_table: BTreeMap<String, String>,
}

impl OwnerColumns {
    pub(super) fn of(manifest: &Manifest) -> OwnerColumns {
        OwnerColumns {
            by_table: manifest
                .tables
                .iter()
                .filter(|(_, declaration)| declaration.access == Access::Owner)
                .filter_map(|(table, declaration)| {
                    Some((table.to_ascii_lowercase(), declaration.owner_field.clone()?))
                })
                .collect(),
        }
    }

    /// The owner field of `table`, when the manifest declares it owner-scoped.
    pub(super) fn field(&self, table: &str) -> Option<&str> {
        self.by_table
            .get(&table.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// One column as `pragma_table_info` reports it: its name and the text of
/// its default (`None` without one).
pub(super) type ColumnInfo = (String, Option<String>);

/// The columns of `table` in order, with their defaults.
pub(super) fn read_columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<ColumnInfo>> {
    let mut statement =
        conn.prepare("SELECT name, dflt_value FROM pragma_table_info(?1, 'main') ORDER BY cid")?;
    let columns = statement.query_map([table], |row| Ok((row.get(0)?, row.get(1)?)))?;
    columns.collect()
}

/// Why one `ALTER TABLE` of `table`, whose owner column is `field`, may not
/// turn its columns `before` into `after`; `None` admits it.
pub(super) fn refuse_alter(
    table: &str,
    field: &str,
    before: &[ColumnInfo],
    after: &[ColumnInfo],
) -> Option<String> {
    let has = |columns: &[ColumnInfo]| {
        columns
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case(field))
    };
    match (has(before), has(after)) {
        (true, true) | (false, false) => None,
        (true, false) => Some(format!(
            "{field} holds the owner of each row of {table}: a migration never renames it, \
             since the rows would then be owned through another column; keep {field} as it is"
        )),
        (false, true) => {
            let added = after.len() == before.len() + 1
                && after
                    .last()
                    .is_some_and(|(name, _)| name.eq_ignore_ascii_case(field));
            let default = after
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(field))
                .and_then(|(_, default)| default.as_deref())
                .filter(|default| !default.eq_ignore_ascii_case("NULL"));
            match (added, default) {
                (true, None) => None,
                (true, Some(default)) => Some(format!(
                    "{field} holds the owner of each row of {table}: adding it with DEFAULT {default} \
                     would make that value the owner of every row that exists; add it without a \
                     DEFAULT (existing rows then belong to nobody)"
                )),
                (false, _) => Some(format!(
                    "{field} holds the owner of each row of {table}: renaming another column to \
                     {field} would hand the existing rows to whoever that column names; a \
                     migration never does that"
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(names: &[(&str, Option<&str>)]) -> Vec<ColumnInfo> {
        names
            .iter()
            .map(|(name, default)| ((*name).to_owned(), default.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn the_owner_column_keeps_its_name_and_is_never_filled_by_a_default() {
        let before = columns(&[("id", None), ("owner", None), ("grab", Some("'mallory'"))]);
        let refuse = |after: &[(&str, Option<&str>)]| {
            refuse_alter("notes", "owner", &before, &columns(after))
        };
        // Renamed away, or in case only (SQLite's names ignore case).
        assert!(
            refuse(&[("id", None), ("orig", None), ("grab", Some("'mallory'"))])
                .unwrap()
                .contains("never renames it")
        );
        assert_eq!(
            refuse(&[("id", None), ("Owner", None), ("grab", Some("'mallory'"))]),
            None
        );
        // Another column, added or renamed: untouched owners.
        assert_eq!(
            refuse(&[
                ("id", None),
                ("owner", None),
                ("grab", Some("'mallory'")),
                ("note", Some("''"))
            ]),
            None
        );
        let without = columns(&[("id", None), ("orig", None), ("grab", Some("'mallory'"))]);
        let onto = refuse_alter(
            "notes",
            "owner",
            &without,
            &columns(&[("id", None), ("orig", None), ("owner", Some("'mallory'"))]),
        );
        assert!(onto.unwrap().contains("renaming another column"));
        // Added: without a default nobody owns the old rows; with one, its
        // value would.
        let plain = columns(&[("id", None), ("body", None)]);
        let added = |default: Option<&str>| {
            refuse_alter(
                "notes",
                "owner",
                &plain,
                &columns(&[("id", None), ("body", None), ("owner", default)]),
            )
        };
        assert_eq!(added(None), None);
        assert_eq!(added(Some("NULL")), None);
        assert!(
            added(Some("'mallory'"))
                .unwrap()
                .contains("DEFAULT 'mallory'")
        );
        assert!(added(Some("''")).is_some());
    }
}
