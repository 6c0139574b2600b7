//! Reading a database's structure into a [`Schema`], the same way for the
//! validator's scratch databases and data-worker's live files.

use std::collections::BTreeMap;

use rusqlite::Connection;

use std::ops::ControlFlow;

use sqlparser::ast::{
    ColumnOption, CreateTable, Expr, Statement, TableConstraint, visit_expressions,
};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

use super::{Check, Column, EXPRESSION_KEY, ForeignKey, Index, Schema, Table, is_sqlite_internal};

/// Reads the structure of the `main` database of `conn`, leaving out SQLite's
/// own `sqlite_*` objects. The data-worker can use it on a live database so a
/// package and a database are compared the same way; it then leaves out the
/// platform's own additions (`_sasha*` tables, the `_sasha_version` column)
/// itself, since this function reports everything else as it is.
pub fn read_schema(conn: &Connection) -> rusqlite::Result<Schema> {
    let mut schema = Schema::default();
    let mut listed = Vec::new();
    {
        let mut statement = conn.prepare("PRAGMA main.table_list")?;
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            let name: String = row.get("name")?;
            let kind: String = row.get("type")?;
            let without_rowid: bool = row.get("wr")?;
            let strict: bool = row.get("strict")?;
            if kind == "table" && !is_sqlite_internal(&name) {
                listed.push((name, without_rowid, strict));
            }
        }
    }
    for (name, without_rowid, strict) in listed {
        let mut columns = Vec::new();
        {
            let mut statement = conn.prepare(
                "SELECT name, type, \"notnull\", dflt_value, pk, hidden FROM pragma_table_xinfo(?1, 'main') ORDER BY cid",
            )?;
            let mut rows = statement.query([&name])?;
            while let Some(row) = rows.next()? {
                let hidden: i64 = row.get(5)?;
                let pk: i64 = row.get(4)?;
                columns.push(Column {
                    name: row.get(0)?,
                    declared_type: row.get::<_, String>(1)?.to_ascii_uppercase(),
                    not_null: row.get(2)?,
                    default_value: row.get(3)?,
                    primary_key: pk > 0,
                    generated: hidden != 0,
                });
            }
        }
        let mut unique = Vec::new();
        {
            let mut statement = conn.prepare(
                "SELECT name, \"unique\", origin, partial FROM pragma_index_list(?1, 'main') ORDER BY seq",
            )?;
            let listed: Vec<(String, bool, String, bool)> = statement
                .query_map([&name], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                })?
                .collect::<rusqlite::Result<_>>()?;
            for (index, is_unique, origin, partial) in listed {
                let key = index_columns(conn, &index)?;
                match origin.as_str() {
                    // The primary key is recorded on its columns.
                    "pk" => {}
                    "u" => unique.push(key),
                    _ => {
                        schema.indexes.insert(
                            index.clone(),
                            Index {
                                name: index,
                                table: name.clone(),
                                columns: key,
                                unique: is_unique,
                                partial,
                            },
                        );
                    }
                }
            }
        }
        unique.sort();
        let foreign_keys = foreign_keys(conn, &name)?;
        let definition: Option<String> = conn.query_row(
            "SELECT sql FROM main.sqlite_schema WHERE type = 'table' AND name = ?1",
            [&name],
            |row| row.get(0),
        )?;
        let (checks, checks_unreadable) =
            match definition.as_deref().map(|sql| checks(sql, &columns)) {
                Some(Some(checks)) => (checks, false),
                Some(None) => (Vec::new(), true),
                None => (Vec::new(), false),
            };
        schema.tables.insert(
            name.clone(),
            Table {
                name,
                columns,
                unique,
                foreign_keys,
                checks,
                checks_unreadable,
                strict,
                without_rowid,
            },
        );
    }
    Ok(schema)
}

fn index_columns(conn: &Connection, index: &str) -> rusqlite::Result<Vec<String>> {
    let mut statement =
        conn.prepare("SELECT cid, name FROM pragma_index_info(?1, 'main') ORDER BY seqno")?;
    statement
        .query_map([index], |row| {
            let cid: i64 = row.get(0)?;
            let name: Option<String> = row.get(1)?;
            Ok(match (cid, name) {
                (_, Some(name)) => name,
                (-1, None) => "rowid".to_owned(),
                (_, None) => EXPRESSION_KEY.to_owned(),
            })
        })?
        .collect()
}

fn foreign_keys(conn: &Connection, table: &str) -> rusqlite::Result<Vec<ForeignKey>> {
    let mut statement = conn.prepare(
        "SELECT id, \"table\", \"from\", \"to\", on_update, on_delete FROM pragma_foreign_key_list(?1, 'main') ORDER BY id, seq",
    )?;
    let mut by_id: BTreeMap<i64, ForeignKey> = BTreeMap::new();
    let mut rows = statement.query([table])?;
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        let key = by_id.entry(id).or_insert_with(|| ForeignKey {
            columns: Vec::new(),
            parent_table: String::new(),
            parent_columns: Vec::new(),
            on_update: String::new(),
            on_delete: String::new(),
        });
        key.parent_table = row.get(1)?;
        key.columns.push(row.get(2)?);
        if let Some(parent) = row.get::<_, Option<String>>(3)? {
            key.parent_columns.push(parent);
        }
        key.on_update = row.get(4)?;
        key.on_delete = row.get(5)?;
    }
    let mut keys: Vec<ForeignKey> = by_id.into_values().collect();
    keys.sort();
    Ok(keys)
}

/// The `CHECK` constraints of a `CREATE TABLE` text SQLite stored, with the
/// columns each reads; `None` when the text does not parse (SQLite keeps
/// these constraints only as text: no pragma lists them).
fn checks(definition: &str, columns: &[Column]) -> Option<Vec<Check>> {
    let mentions_check = definition.to_ascii_uppercase().contains("CHECK");
    let parsed = Parser::parse_sql(&SQLiteDialect {}, definition).ok();
    let Some(Statement::CreateTable(CreateTable {
        columns: defined,
        constraints,
        ..
    })) = parsed.as_ref().and_then(|statements| statements.first())
    else {
        // A table without the word has no rule to lose.
        return (!mentions_check).then(Vec::new);
    };
    let read = |expr: &Expr| {
        let mut named = Vec::new();
        let _ = visit_expressions(expr, |expr| {
            let ident = match expr {
                Expr::Identifier(ident) => Some(ident),
                Expr::CompoundIdentifier(parts) => parts.last(),
                _ => None,
            };
            if let Some(ident) = ident {
                named.push(ident.value.to_ascii_lowercase());
            }
            ControlFlow::<()>::Continue(())
        });
        columns
            .iter()
            .filter(|column| named.contains(&column.name.to_ascii_lowercase()))
            .map(|column| column.name.clone())
            .collect()
    };
    let mut checks = Vec::new();
    for column in defined {
        for option in &column.options {
            if let ColumnOption::Check(check) = &option.option {
                let name = option.name.as_ref().or(check.name.as_ref());
                checks.push(Check {
                    name: name.map(|name| name.value.clone()),
                    columns: read(&check.expr),
                    expression: check.expr.to_string(),
                });
            }
        }
    }
    for constraint in constraints {
        if let TableConstraint::Check(check) = constraint {
            checks.push(Check {
                name: check.name.as_ref().map(|name| name.value.clone()),
                columns: read(&check.expr),
                expression: check.expr.to_string(),
            });
        }
    }
    Some(checks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_are_read_with_their_names_and_the_columns_they_read() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            r#"CREATE TABLE entries (
                 id INTEGER PRIMARY KEY,
                 date DATE NOT NULL CONSTRAINT "date must be a calendar date" CHECK (date IS date(date)),
                 hours REAL CHECK (hours >= 0),
                 note TEXT,
                 CONSTRAINT short_note CHECK (length("note") < 200 OR Hours > 1)
               );
               CREATE TABLE plain (id INTEGER PRIMARY KEY, checked TEXT);"#,
        )
        .unwrap();
        let schema = read_schema(&conn).unwrap();
        let entries = &schema.tables["entries"];
        let summary: Vec<(Option<&str>, Vec<&str>)> = entries
            .checks
            .iter()
            .map(|check| {
                (
                    check.name.as_deref(),
                    check.columns.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (Some("date must be a calendar date"), vec!["date"]),
                (None, vec!["hours"]),
                (Some("short_note"), vec!["hours", "note"]),
            ]
        );
        assert_eq!(entries.checks[1].expression, "hours >= 0");
        assert!(!entries.checks_unreadable);
        assert!(schema.tables["plain"].checks.is_empty());
        assert!(!schema.tables["plain"].checks_unreadable);
    }
}
