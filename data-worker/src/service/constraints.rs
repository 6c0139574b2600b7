//! What a constraint violation means, in the caller's terms: which field and
//! which rule, never SQL text. SQLite names the columns of a UNIQUE or NOT
//! NULL failure and the name of a named CHECK constraint, and says nothing
//! about which foreign key failed; for those, the table's declared foreign
//! keys are asked, in the write's own transaction, which reference is missing
//! (a create or update) or which rows still refer to the row (a delete).
//!
//! A reference into an `access: owner` table may point only at a row the
//! writer owns: another owner's row answers exactly like a missing one (the
//! same code, message and details, whichever of the write's references is
//! named first), so a reference is never an oracle for someone else's row
//! id, nor a way to pin their row so they cannot delete it. SQLite only
//! knows that the row exists, so [`unowned_reference`] asks after a write
//! succeeded, in its transaction, and the explanation of a failed write
//! counts an unowned row as missing too.
//!
//! It must never put SQLite's message, an expression or a value it did not
//! receive from the caller into an error, and never runs a statement that
//! writes.

use rusqlite::ffi;
use sasha_contract::data::{Access, DataContract, ForeignKey, ID_COLUMN, is_identifier};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Map, Value, json};

use crate::engine::{prepare_governed, sql_error, sql_error_of};

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
    actor: &str,
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
    // The plain mapping, for a kind of violation the caller cannot be told more about.
    let fallback = sql_error_of(&error);
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
        ffi::SQLITE_CONSTRAINT_FOREIGNKEY => foreign_key(conn, contract, table, write, actor)
            .unwrap_or_else(|| broken_reference(table)),
        _ => fallback.clone(),
    };
    let told = AppError {
        diagnostic_id: fallback.diagnostic_id,
        ..explained
    };
    // A refused write is the caller's, not the platform's: logged once, at
    // info, with the code and diagnostic id the caller was told (SQLite's own
    // message, which may quote SQL, only here).
    tracing::info!(diagnostic_id = %told.diagnostic_id, code = %told.code, %error, "data engine: a write broke a rule of its table; refused");
    told
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

/// The answer to a write that broke a reference the explanation cannot
/// name (a reference of several columns).
fn broken_reference(table: &str) -> AppError {
    AppError::new(
        ErrorCode::Conflict,
        format!("the change to {table} would break a reference between rows"),
    )
    .with_details(json!({"table": table, "rule": "reference"}))
}

/// The owner field of `table` when the contract declares it `access: owner`.
fn owner_field<'c>(contract: &'c DataContract, table: &str) -> Option<&'c str> {
    let declaration = contract.tables.get(table)?;
    match declaration.access {
        Access::Owner => declaration.owner_field.as_deref(),
        Access::Shared => None,
    }
}

/// Which declared reference the write broke, asked of the rows themselves;
/// a row of an owner table that `actor` does not own counts as missing.
fn foreign_key(
    conn: &rusqlite::Connection,
    contract: &DataContract,
    table: &str,
    write: &Write<'_>,
    actor: &str,
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
                let owner = owner_field(contract, &key.parent_table).map(|field| (field, actor));
                if !exists(conn, &key.parent_table, &[(parent_column, value)], owner)? {
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
                            && exists(conn, child, &[(&key.columns[0], id)], None).unwrap_or(false)
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

/// After a write to `table` by `actor` succeeded (in its transaction): the
/// answer a reference to a missing row gets, when one of the references the
/// write set (a field of `values`; `row` is the row as written) points at a
/// row of an `access: owner` table that `actor` does not own. `None` when
/// every reference it set is to the writer's own rows or to a table without
/// owners. A reference that cannot be asked is refused.
pub(crate) fn unowned_reference(
    conn: &rusqlite::Connection,
    contract: &DataContract,
    table: &str,
    values: &Map<String, Value>,
    row: &Map<String, Value>,
    actor: &str,
) -> Option<AppError> {
    let keys = &contract.schema.tables.get(table)?.foreign_keys;
    let into_owner_tables = |key: &&ForeignKey| {
        owner_field(contract, &key.parent_table).is_some()
            && key.columns.iter().any(|column| values.contains_key(column))
    };
    if !keys.iter().any(|key| into_owner_tables(&key)) {
        return None;
    }
    // The same walk that explains a missing row, so the same reference is
    // named whether the row is missing or someone else's.
    if let Some(missing) = foreign_key(conn, contract, table, &Write::Values(values), actor) {
        return Some(missing);
    }
    for key in keys.iter().filter(into_owner_tables) {
        if let [column] = key.columns.as_slice() {
            // Asked above; one that could not be asked is refused the way
            // the explanation of a missing row answers then.
            let Some(value) = values.get(column).filter(|value| !value.is_null()) else {
                continue;
            };
            let parent_column = key.parent_columns.first().map_or(ID_COLUMN, String::as_str);
            let owner = owner_field(contract, &key.parent_table).map(|field| (field, actor));
            if exists(conn, &key.parent_table, &[(parent_column, value)], owner) != Some(true) {
                return Some(broken_reference(table));
            }
            continue;
        }
        let (Some(owner), true) = (
            owner_field(contract, &key.parent_table),
            key.parent_columns.len() == key.columns.len(),
        ) else {
            continue;
        };
        let mut pairs = Vec::with_capacity(key.columns.len());
        for (column, parent) in key.columns.iter().zip(&key.parent_columns) {
            match row.get(column) {
                Some(value) if !value.is_null() => pairs.push((parent.as_str(), value)),
                // A reference with a NULL part refers to nothing.
                _ => break,
            }
        }
        if pairs.len() == key.columns.len()
            && exists(conn, &key.parent_table, &pairs, Some((owner, actor))) != Some(true)
        {
            return Some(broken_reference(table));
        }
    }
    None
}

/// Whether a row of `table` holds each `(column, value)` of `columns` and,
/// with `owner`, names that user in that owner field; `None` when it cannot
/// be asked (the table is out of the governed reach).
fn exists(
    conn: &rusqlite::Connection,
    table: &str,
    columns: &[(&str, &Value)],
    owner: Option<(&str, &str)>,
) -> Option<bool> {
    if !is_identifier(table) || columns.iter().any(|(column, _)| !is_identifier(column)) {
        return None;
    }
    let mut terms = Vec::with_capacity(columns.len() + 1);
    let mut bound = Vec::with_capacity(columns.len() + 1);
    for (column, value) in columns {
        bound.push(match value {
            Value::Number(number) => number
                .as_i64()
                .map(rusqlite::types::Value::Integer)
                .or_else(|| number.as_f64().map(rusqlite::types::Value::Real))?,
            Value::String(text) => rusqlite::types::Value::Text(text.clone()),
            // Stored as the grammar binds them.
            Value::Bool(flag) => rusqlite::types::Value::Integer(i64::from(*flag)),
            _ => return None,
        });
        terms.push(format!("\"{column}\" = ?{}", bound.len()));
    }
    if let Some((field, user)) = owner {
        if !is_identifier(field) {
            return None;
        }
        bound.push(rusqlite::types::Value::Text(user.to_owned()));
        terms.push(format!("\"{field}\" = ?{}", bound.len()));
    }
    let sql = format!(
        "SELECT 1 FROM main.\"{table}\" WHERE {} LIMIT 1",
        terms.join(" AND ")
    );
    let mut statement = prepare_governed(conn, &sql).ok()?;
    statement
        .exists(rusqlite::params_from_iter(bound.iter()))
        .ok()
}
