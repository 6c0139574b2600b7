//! The SQLite side of the SQL surface: values to and from rusqlite's.
//!
//! What it must never do: open a database (the store does, with its pragmas
//! and migrations) or hold a statement beyond one call.

use rusqlite::types::{ToSqlOutput, ValueRef};

use super::{DbError, Value};

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            Value::Null => ValueRef::Null,
            Value::Integer(value) => ValueRef::Integer(value),
            Value::Real(value) => ValueRef::Real(value),
            Value::Text(text) => ValueRef::Text(text.as_bytes()),
            Value::Blob(bytes) => ValueRef::Blob(bytes),
        }))
    }
}

/// A column as the store's value kinds. SQLite's text is UTF-8 as written
/// by the store; anything else reads as bytes and fails a text conversion.
pub(super) fn value_of(value: ValueRef<'_>) -> Value<'_> {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(value) => Value::Integer(value),
        ValueRef::Real(value) => Value::Real(value),
        ValueRef::Text(bytes) => std::str::from_utf8(bytes).map_or(Value::Blob(bytes), Value::Text),
        ValueRef::Blob(bytes) => Value::Blob(bytes),
    }
}

pub(super) fn execute(
    connection: &rusqlite::Connection,
    sql: &str,
    values: &[Value<'_>],
) -> Result<usize, DbError> {
    let mut statement = connection.prepare_cached(sql)?;
    Ok(statement.execute(rusqlite::params_from_iter(values.iter()))?)
}
