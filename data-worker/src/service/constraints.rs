//! What a constraint violation means, in the caller's terms: which field and
//! which rule, never SQL text. SQLite names the columns of a UNIQUE or NOT
//! NULL failure and the name of a named CHECK constraint, and says nothing
//! about which foreign key failed; for those, the table's declared foreign
//! keys are asked, in the write's own transaction, which reference is missing
//! (a create or update) or which rows still refer to the row (a delete).
//!
//! It must never put SQLite's message, an expression or a value it did not
//! receive from the caller into an error, and never runs a statement that
//! writes.

use rusqlite::ffi;
use sasha_contract::data::{DataContract, ID_COLUMN, is_identifier};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Map, Value, json};

use crate::engine::{prepare_governed, sql_error};

/// What the failed write was doing.
pub(crate) enum Write<'a> {
    /// A create's values or an update's changes.
    Values(&'a Map<String, Value>),
    /// The delete of row `id`.
    Delete(&'a Value),
}

/// The caller's explanation of `error`, raised by a write to `table` in the
/// transaction `conn` is in; anything but a constraint violation is
/// [`sql_error`]'s answer.
pub(crate) fn explain(
    conn: &rusqlite::Connection,
    contract: &DataContract,
    table: &str,
    write: &Write<'_>,
    error: rusqlite::Error,
) -> AppError {
    let (extended, message) = match &error {
        rusqlite::Error::SqliteFailure(failure, message)
            if failure.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            (failure.extended_code, message.clone().unwrap_or_default())
        }
        _ => return sql_error(error),
    };
    // Logged with its diagnostic id like every SQLite failure.
    let logged = sql_error(error);
    let named = failed_columns(&message, table);
    let explained = match extended {
        ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY if !named.is_empty() => {
            AppError::new(
                ErrorCode::Conflict,
                format!(
                    "{} must be unique: another {table} row already has this value",
                    named.join(" and ")
                ),
            )
            .with_details(json!({"table": table, "fields": named, "rule": "unique"}))
        }
        ffi::SQLITE_CONSTRAINT_NOTNULL if !named.is_empty() => AppError::new(
            ErrorCode::InputInvalid,
            format!("{} is required", named.join(" and ")),
        )
        .with_details(json!({"table": table, "fields": named, "rule": "required"})),
        ffi::SQLITE_CONSTRAINT_CHECK => {
            // A named constraint (`CONSTRAINT "hours must be between 0 and
            // 24" CHECK (...)`) is the app's own wording, taken from the
            // contract rather than the message; an unnamed one's message is
            // its expression, which stays in the log.
            let check = message
                .split_once("constraint failed: ")
                .and_then(|(_, name)| contract.schema.tables.get(table)?.check_named(name));
            match check.and_then(|check| Some((check.name.as_deref()?, &check.columns))) {
                Some((name, fields)) => {
                    let mut details = json!({"table": table, "fields": fields, "rule": "check", "constraint": name});
                    if let [field] = fields.as_slice() {
                        details["field"] = json!(field);
                    }
                    // Worded names are the message; an identifier is named.
                    let message = if is_identifier(name) {
                        format!("the {table} row breaks its rule {name}")
                    } else {
                        name.to_owned()
                    };
                    AppError::new(ErrorCode::InputInvalid, message).with_details(details)
                }
                None => AppError::new(
                    ErrorCode::InputInvalid,
                    format!("the {table} row breaks one of its CHECK rules"),
                )
                .with_details(json!({"table": table, "rule": "check"})),
            }
        }
        ffi::SQLITE_CONSTRAINT_FOREIGNKEY => foreign_key(conn, contract, table, write)
            .unwrap_or_else(|| {
                AppError::new(
                    ErrorCode::Conflict,
                    format!("the change to {table} would break a reference between rows"),
                )
                .with_details(json!({"table": table, "rule": "reference"}))
            }),
        _ => return logged,
    };
    AppError {
        diagnostic_id: logged.diagnostic_id,
        ..explained
    }
}

/// `t.a, t.b` after SQLite's "constraint failed: ", for `table` only.
fn failed_columns(message: &str, table: &str) -> Vec<String> {
    let Some((_, list)) = message.split_once("constraint failed: ") else {
        return Vec::new();
    };
    list.split(", ")
        .filter_map(|qualified| qualified.split_once('.'))
        .filter(|(owner, column)| owner.eq_ignore_ascii_case(table) && is_identifier(column))
        .map(|(_, column)| column.to_owned())
        .collect()
}

/// Which declared reference the write broke, asked of the rows themselves.
fn foreign_key(
    conn: &rusqlite::Connection,
    contract: &DataContract,
    table: &str,
    write: &Write<'_>,
) -> Option<AppError> {
    let schema = &contract.schema.tables;
    match write {
        Write::Values(values) => {
            for key in &schema.get(table)?.foreign_keys {
                let [column] = key.columns.as_slice() else {
                    continue;
                };
                let Some(value) = values.get(column).filter(|value| !value.is_null()) else {
                    continue;
                };
                let parent_column = key.parent_columns.first().map_or(ID_COLUMN, String::as_str);
                if !exists(conn, &key.parent_table, parent_column, value)? {
                    return Some(
                        AppError::new(
                            ErrorCode::InputInvalid,
                            format!("{column}: {} {value} does not exist", key.parent_table),
                        )
                        .with_details(json!({
                            "table": table,
                            "field": column,
                            "value": value,
                            "references": key.parent_table,
                            "rule": "reference",
                        })),
                    );
                }
            }
            None
        }
        Write::Delete(id) => {
            let referring: Vec<&str> = schema
                .iter()
                .filter(|(child, definition)| {
                    definition.foreign_keys.iter().any(|key| {
                        key.parent_table.eq_ignore_ascii_case(table)
                            && key.columns.len() == 1
                            && key
                                .parent_columns
                                .first()
                                .is_none_or(|parent| parent == ID_COLUMN)
                            && exists(conn, child, &key.columns[0], id).unwrap_or(false)
                    })
                })
                .map(|(child, _)| child.as_str())
                .collect();
            (!referring.is_empty()).then(|| {
                AppError::new(
                    ErrorCode::Conflict,
                    format!(
                        "a {table} row that {} rows refer to cannot be deleted; change or delete those first",
                        referring.join(" and ")
                    ),
                )
                .with_details(json!({"table": table, "referencedBy": referring, "rule": "referenced"}))
            })
        }
    }
}

/// Whether a row of `table` holds `value` in `column`; `None` when it cannot
/// be asked (the table is out of the governed reach).
fn exists(conn: &rusqlite::Connection, table: &str, column: &str, value: &Value) -> Option<bool> {
    if !is_identifier(table) || !is_identifier(column) {
        return None;
    }
    let bound = match value {
        Value::Number(number) => number
            .as_i64()
            .map(rusqlite::types::Value::Integer)
            .or_else(|| number.as_f64().map(rusqlite::types::Value::Real))?,
        Value::String(text) => rusqlite::types::Value::Text(text.clone()),
        _ => return None,
    };
    let sql = format!("SELECT 1 FROM main.\"{table}\" WHERE \"{column}\" = ?1 LIMIT 1");
    let mut statement = prepare_governed(conn, &sql).ok()?;
    statement.exists([bound]).ok()
}
