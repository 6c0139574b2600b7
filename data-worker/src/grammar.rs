//! The governed data grammar: the one translation from a caller's JSON request
//! (`list`, `get`, `aggregate`, `create`, `update`, `delete`) into a typed request
//! and then into a parameterised SQLite statement for one declared table.
//!
//! This module is pure. It never opens a database, never runs a statement (except
//! against in-memory SQLite in its own tests) and never authorises anyone: the
//! caller has already decided that `actor` may use the table, and the engine runs
//! what is built here inside its own transaction.
//!
//! What it must never do:
//!
//! - put caller text into SQL. Every identifier is resolved byte-for-byte against
//!   the table's declared columns before any SQL exists, and only the server's own
//!   column name string is quoted into the statement; values are always bound
//!   parameters; metric aliases never reach SQL (results are read by position);
//! - let a caller see or touch another owner's rows. For `access: owner` every read,
//!   update and delete ANDs `"<ownerField>" = ?actor` outside the parenthesised user
//!   predicate, and create stamps the owner itself. The owner field may be selected
//!   and returned, but it is refused (`APP_INPUT_INVALID`, naming the field) in
//!   `where`, `orderBy`, `groupBy`, metrics, `values` and `changes`, so no grammar
//!   construct can even express a question about other owners;
//! - let `id` or `_sasha_version` be mass-assigned (a TEXT id is the one exception:
//!   create must receive it, because SQLite will not invent one);
//! - put SQL into an error message. Messages name the offending field or key, never
//!   a statement.
//!
//! Error codes: an unknown field is `APP_FIELD_UNDECLARED`; a list longer than its
//! bound (where, in, orderBy, select, groupBy, metrics, values/changes, pattern
//! length) is `APP_RESOURCE_LIMIT`; every other malformed request (unknown key or
//! operator, wrong value type, `limit` outside 1..=200, an empty list that needs an
//! entry, a tampered cursor) is `APP_INPUT_INVALID`.
//!
//! # NULL and type semantics
//!
//! - `eq null` is `IS NULL`, `neq null` is `IS NOT NULL`.
//! - `eq v` (v not null) matches rows whose value equals v; NULL rows never match.
//! - `neq v` (v not null) is the exact complement of `eq v`: it compiles to
//!   `IS NOT ?`, so rows holding NULL *are* returned by `neq 'x'`.
//! - `lt`/`lte`/`gt`/`gte` need a non-null value; NULL rows never match them.
//! - `in` needs 1–50 non-null scalars; NULL rows never match it (use `eq null`).
//! - `contains`/`starts-with` need a string; they use SQLite `LIKE … ESCAPE '\'`
//!   with `%`, `_` and `\` escaped, so the pattern is matched literally, but like
//!   all SQLite `LIKE` it ignores ASCII case; NULL rows never match.
//! - Comparisons follow SQLite column affinity: on an INTEGER/REAL/NUMERIC column
//!   the string `"10"` is compared as the number 10; on a TEXT column the number 10
//!   is compared as the text `'10'`. Booleans are stored and compared as 0/1.
//! - Ordering: NULL sorts first ascending and last descending (SQLite's rule); the
//!   keyset cursor follows the same rule so pages never skip or repeat NULL rows.

use std::collections::BTreeSet;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rusqlite::types::{Value as SqlValue, ValueRef};
use sasha_contract::data::{Access, Column, Table, TableDeclaration};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

pub use sasha_contract::data::{ID_COLUMN, VERSION_COLUMN};
pub use sasha_contract::grammar::{
    DEFAULT_LIMIT, MAX_ALIAS_CHARS, MAX_CURSOR_BYTES, MAX_GROUP_BY, MAX_GROUPS, MAX_HISTORY,
    MAX_IDEMPOTENCY_KEY_CHARS, MAX_IN, MAX_LIMIT, MAX_METRICS, MAX_ORDER_BY, MAX_PATTERN_CHARS,
    MAX_SELECT, MAX_TEXT_ID_CHARS, MAX_VALUES, MAX_WHERE, MetricFunction, Operator,
};
/// Fewest bytes of the cursor secret; a shorter key would make cursors forgeable.
pub const MIN_CURSOR_SECRET_BYTES: usize = 16;

/// A declared table as the grammar sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    pub name: String,
    /// The declared columns (without `_sasha_version`, which the engine adds).
    pub columns: Vec<Column>,
    /// `Some` for `access: owner`.
    pub owner_field: Option<String>,
    /// Kept next to `owner_field` so that an owner table whose owner field went
    /// missing fails closed instead of silently becoming a shared table.
    pub access: Access,
}

impl TableSpec {
    pub fn new(table: &Table, declaration: &TableDeclaration) -> TableSpec {
        TableSpec {
            name: table.name.clone(),
            columns: table.columns.clone(),
            owner_field: match declaration.access {
                Access::Owner => declaration.owner_field.clone(),
                Access::Shared => None,
            },
            access: declaration.access,
        }
    }

    /// The same table read without its owner scope: a manager's reads of a
    /// `managersReadAll` table. Never used to build a write.
    pub fn every_owner(&self) -> TableSpec {
        TableSpec {
            owner_field: None,
            access: Access::Shared,
            ..self.clone()
        }
    }

    fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|column| column.name == name)
    }

    /// Whether `name` has REAL affinity (`REAL`, `FLOAT`, `DOUBLE`): any finite
    /// number is a value of it, however large (the package's one affinity
    /// rule, `sasha_contract::data::value_kinds`).
    fn is_real(&self, name: &str) -> bool {
        self.column(name).is_some_and(|column| {
            sasha_contract::data::value_kinds(&column.declared_type) == ["number"]
        })
    }

    /// Whether the id is `INTEGER PRIMARY KEY` (assigned by SQLite) rather than a
    /// TEXT key the caller must supply.
    fn integer_id(&self) -> bool {
        self.column(ID_COLUMN)
            .is_some_and(|column| column.declared_type == "INTEGER")
    }

    /// The owner column to scope by, checked: an owner table must name a declared
    /// column, otherwise nothing is built at all.
    fn scope(&self) -> Result<Option<&str>, AppError> {
        match (self.access, &self.owner_field) {
            (Access::Shared, None) => Ok(None),
            (Access::Owner, Some(owner)) => match self.column(owner) {
                Some(column) => Ok(Some(column.name.as_str())),
                None => Err(internal("the owner field of this table is not declared")),
            },
            _ => Err(internal("this table's access policy is inconsistent")),
        }
    }

    /// Every column a result row carries: the declared ones, then the version.
    fn all_columns(&self) -> Vec<String> {
        let mut columns: Vec<String> = self.columns.iter().map(|c| c.name.clone()).collect();
        columns.push(VERSION_COLUMN.to_owned());
        columns
    }
}

// ---------------------------------------------------------------------------
// Typed requests
// ---------------------------------------------------------------------------

/// A bound value of the grammar.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
}

impl Scalar {
    fn to_sql(&self) -> SqlValue {
        match self {
            Scalar::Null => SqlValue::Null,
            Scalar::Integer(value) => SqlValue::Integer(*value),
            Scalar::Real(value) => SqlValue::Real(*value),
            Scalar::Text(value) => SqlValue::Text(value.clone()),
        }
    }

    /// A tagged JSON form that keeps `1` and `1.0` apart and keeps reals exact,
    /// used in cursors and in the canonical query the cursor is bound to.
    fn tagged(&self) -> Value {
        match self {
            Scalar::Null => Value::Array(vec!["n".into()]),
            Scalar::Integer(value) => Value::Array(vec!["i".into(), (*value).into()]),
            Scalar::Real(value) => {
                Value::Array(vec!["r".into(), format!("{:016x}", value.to_bits()).into()])
            }
            Scalar::Text(value) => Value::Array(vec!["t".into(), value.clone().into()]),
        }
    }

    fn from_tagged(value: &Value) -> Option<Scalar> {
        let items = value.as_array()?;
        match (items.first()?.as_str()?, items.get(1), items.len()) {
            ("n", None, 1) => Some(Scalar::Null),
            ("i", Some(v), 2) => v.as_i64().map(Scalar::Integer),
            ("r", Some(v), 2) => {
                let bits = u64::from_str_radix(v.as_str()?, 16).ok()?;
                let real = f64::from_bits(bits);
                real.is_finite().then_some(Scalar::Real(real))
            }
            ("t", Some(v), 2) => v.as_str().map(|s| Scalar::Text(s.to_owned())),
            _ => None,
        }
    }

    /// The scalar a result value (from [`row_to_json`]) stands for.
    fn from_result(value: &Value) -> Scalar {
        match value {
            Value::Null => Scalar::Null,
            Value::Bool(flag) => Scalar::Integer(i64::from(*flag)),
            Value::Number(number) => match number.as_i64() {
                Some(integer) => Scalar::Integer(integer),
                None => Scalar::Real(number.as_f64().unwrap_or(0.0)),
            },
            Value::String(text) => Scalar::Text(text.clone()),
            // Result rows never hold these; a stable stand-in keeps this total.
            other => Scalar::Text(other.to_string()),
        }
    }
}

/// A comparison operator of `where`.
/// The right-hand side of a condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    One(Scalar),
    /// Only for `in`.
    Many(Vec<Scalar>),
}

/// One `where` clause; clauses are ANDed.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// The server's own column name.
    pub field: String,
    pub operator: Operator,
    pub value: Operand,
}

/// One `orderBy` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ordering {
    pub field: String,
    pub descending: bool,
}

/// `list(table, query)`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListQuery {
    pub filters: Vec<Condition>,
    pub order_by: Vec<Ordering>,
    /// `None` returns every column.
    pub select: Option<Vec<String>>,
    pub limit: u32,
    pub cursor: Option<String>,
}

/// One metric: `{as, <op>: field}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metric {
    /// The output key.
    pub alias: String,
    pub op: MetricFunction,
    /// The server's own column name.
    pub field: String,
}

/// `aggregate(table, aggregation)`; the result rows are the groups.
#[derive(Debug, Clone, PartialEq)]
pub struct AggregateQuery {
    pub filters: Vec<Condition>,
    pub group_by: Vec<String>,
    pub metrics: Vec<Metric>,
}

/// A parsed request.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    List(ListQuery),
    Get {
        id: Value,
    },
    Aggregate(AggregateQuery),
    /// One row's audit entries, oldest first, after the entry `after` (a
    /// page's cursor).
    History {
        id: Value,
        limit: u32,
        after: Option<i64>,
    },
    Create {
        values: Map<String, Value>,
        idempotency_key: String,
    },
    Update {
        id: Value,
        changes: Map<String, Value>,
        expected_version: i64,
        idempotency_key: String,
    },
    Delete {
        id: Value,
        expected_version: i64,
        idempotency_key: String,
    },
    /// The rows a list with these filters and order reads, as CSV: pages of
    /// `query` (its limit is the page) until
    /// [`sasha_contract::grammar::MAX_CSV_ROWS`] rows.
    Export(ListQuery),
    /// One create per row of a CSV file, all or none.
    Import {
        file: csv::ImportFile,
        idempotency_key: String,
    },
}

/// A statement ready to run: SQL text built only from server strings, and its
/// bound parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    pub sql: String,
    pub params: Vec<SqlValue>,
    /// The output key of each result column, by position (empty when the
    /// statement returns no rows). Feed them to [`row_to_json`].
    pub columns: Vec<String>,
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

fn invalid(message: impl Into<String>) -> AppError {
    AppError::new(ErrorCode::InputInvalid, message)
}

fn too_many(message: impl Into<String>) -> AppError {
    AppError::new(ErrorCode::ResourceLimit, message)
}

fn internal(message: impl Into<String>) -> AppError {
    AppError::new(ErrorCode::Internal, message)
}

/// Caller text shown in a message: quoted with escapes (so a zero-width or
/// look-alike character is visible) and bounded.
fn shown(text: &str) -> String {
    let bounded: String = text.chars().take(64).collect();
    if bounded.len() < text.len() {
        format!("{bounded:?}…")
    } else {
        format!("{bounded:?}")
    }
}

// ---------------------------------------------------------------------------
// Identifier resolution
// ---------------------------------------------------------------------------

/// What a field is being used for; decides whether the owner field, the id and
/// the version are acceptable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Usage {
    Filter,
    Sort,
    Group,
    Metric,
    Select,
    Write,
}

impl Usage {
    fn describe(self) -> &'static str {
        match self {
            Usage::Filter => "filtered on",
            Usage::Sort => "sorted on",
            Usage::Group => "grouped on",
            Usage::Metric => "aggregated",
            Usage::Select => "selected",
            Usage::Write => "written",
        }
    }
}

/// Resolves `name` byte-for-byte against the declared columns (plus the version
/// column for reads) and returns the server's own string for it. There is no case
/// folding, trimming or normalisation: `TITLE`, `title ` and `ti\u{200b}tle` are
/// simply other names, which is what keeps look-alikes out.
fn resolve<'t>(table: &'t TableSpec, name: &str, usage: Usage) -> Result<&'t str, AppError> {
    let column: &'t str = if name == VERSION_COLUMN {
        VERSION_COLUMN
    } else {
        match table.column(name) {
            Some(column) => column.name.as_str(),
            None => {
                return Err(AppError::new(
                    ErrorCode::FieldUndeclared,
                    format!(
                        "field {} is not a declared column of table {}",
                        shown(name),
                        table.name
                    ),
                ));
            }
        }
    };
    if table.owner_field.as_deref() == Some(column) && usage != Usage::Select {
        return Err(invalid(format!(
            "field {column} is the owner field of table {}: the server sets it to the signed-in user, so it cannot be {}",
            table.name,
            usage.describe()
        )));
    }
    if column == VERSION_COLUMN && usage == Usage::Write {
        return Err(invalid(format!(
            "field {VERSION_COLUMN} is managed by the server and cannot be written; pass expectedVersion instead"
        )));
    }
    Ok(column)
}

/// Double-quotes one of the server's own column or table names. Declared names
/// are already plain identifiers; doubling `"` keeps this safe regardless.
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

/// An object being taken apart key by key; whatever is left at the end is an
/// unknown key and refused.
struct Fields {
    map: Map<String, Value>,
    context: &'static str,
}

impl Fields {
    fn new(value: Value, context: &'static str) -> Result<Fields, AppError> {
        match value {
            Value::Object(map) => Ok(Fields { map, context }),
            _ => Err(invalid(format!("{context} must be a JSON object"))),
        }
    }

    fn take(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key)
    }

    fn require(&mut self, key: &str) -> Result<Value, AppError> {
        self.take(key)
            .ok_or_else(|| invalid(format!("{} needs {key}", self.context)))
    }

    fn finish(self) -> Result<(), AppError> {
        match self.map.keys().next() {
            None => Ok(()),
            Some(key) => Err(invalid(format!(
                "unknown key {} in {}",
                shown(key),
                self.context
            ))),
        }
    }
}

fn array(value: Value, what: &str) -> Result<Vec<Value>, AppError> {
    match value {
        Value::Array(items) => Ok(items),
        _ => Err(invalid(format!("{what} must be an array"))),
    }
}

/// An array of at most `max` items; `unit` names them in the refusal
/// ("where has 21 clauses; at most 20 are allowed").
fn bounded_array(value: Value, what: &str, max: usize, unit: &str) -> Result<Vec<Value>, AppError> {
    let items = array(value, what)?;
    if items.len() > max {
        return Err(too_many(format!(
            "{what} has {} {unit}; at most {max} are allowed",
            items.len()
        )));
    }
    Ok(items)
}

fn string(value: Value, what: &str) -> Result<String, AppError> {
    match value {
        Value::String(text) => Ok(text),
        _ => Err(invalid(format!("{what} must be a string"))),
    }
}

/// A JSON value as a bound scalar: strings, finite numbers (integers within the
/// signed 64-bit range), booleans as 0/1, and null. Objects and arrays are refused,
/// which is what stops `{"$ne": null}`-style operator smuggling. `real` says the
/// value is for a REAL column, where every finite number is a value.
fn scalar(value: &Value, what: &str, real: bool) -> Result<Scalar, AppError> {
    match value {
        Value::Null => Ok(Scalar::Null),
        Value::Bool(flag) => Ok(Scalar::Integer(i64::from(*flag))),
        Value::String(text) => Ok(Scalar::Text(text.clone())),
        Value::Number(number) => {
            if let Some(integer) = number.as_i64() {
                Ok(Scalar::Integer(integer))
            } else if number.is_u64() {
                Err(invalid(format!(
                    "{what} is an integer outside the 64-bit signed range"
                )))
            } else {
                // Without arbitrary precision, `-9223372036854775809` arrives as a
                // float; refusing every magnitude of 2^63 or more catches it.
                // A REAL column takes any finite number as it is.
                match number.as_f64() {
                    Some(number)
                        if number.is_finite()
                            && (real || number.abs() < 9.223_372_036_854_776e18) =>
                    {
                        Ok(Scalar::Real(number))
                    }
                    Some(number) if number.is_finite() => Err(invalid(format!(
                        "{what} is too large: beyond the 64-bit signed integer range, and the column is not REAL"
                    ))),
                    _ => Err(invalid(format!("{what} must be a finite number"))),
                }
            }
        }
        Value::Array(_) | Value::Object(_) => Err(invalid(format!(
            "{what} must be a string, number, boolean or null"
        ))),
    }
}

/// Parses the argument object of `operation` (`list`, `get`, `aggregate`,
/// `create`, `update` or `delete`) for `table`, in the wire grammar. Unknown keys
/// anywhere are refused, and every field is resolved here already, so a request
/// that parses names only declared columns (the builders check again, since the
/// typed requests are public).
pub fn parse(operation: &str, table: &TableSpec, request_json: &str) -> Result<Request, AppError> {
    parse_value(operation, table, read_request(request_json)?)
}

/// A request's JSON text read within the data request's bounds (checked in
/// one pass before any parse): the one parse of `request_json` a call makes.
pub fn read_request(request_json: &str) -> Result<Value, AppError> {
    sasha_proto::json_limits::check(
        request_json.as_bytes(),
        &sasha_proto::json_limits::DATA_REQUEST,
    )
    .map_err(sasha_proto::json_limits::JsonLimitError::to_app_error)?;
    serde_json::from_str(request_json).map_err(|error| {
        // serde's message names a line and column, and a number out of range
        // (`1e309`) lands here too.
        invalid(format!("the request is not valid JSON: {error}"))
    })
}

/// [`parse`] of a request already read by [`read_request`].
pub fn parse_value(operation: &str, table: &TableSpec, value: Value) -> Result<Request, AppError> {
    match operation {
        "list" => parse_list(table, value).map(Request::List),
        "get" => {
            let mut fields = Fields::new(value, "a get request")?;
            let id = fields.require("id")?;
            fields.finish()?;
            check_id(&id)?;
            Ok(Request::Get { id })
        }
        "aggregate" => parse_aggregate(table, value).map(Request::Aggregate),
        "history" => {
            let mut fields = Fields::new(value, "a history request")?;
            let id = fields.require("id")?;
            let limit = match fields.take("limit") {
                None => MAX_HISTORY,
                Some(value) => match value.as_u64() {
                    Some(limit) if (1..=u64::from(MAX_HISTORY)).contains(&limit) => limit as u32,
                    _ => {
                        return Err(invalid(format!(
                            "limit must be an integer from 1 to {MAX_HISTORY}"
                        )));
                    }
                },
            };
            // The cursor is the last entry's number: entries are filtered by
            // table and row first, so another number reaches nothing else.
            let after = match fields.take("cursor") {
                None => None,
                Some(value) => Some(
                    string(value, "cursor")?
                        .parse::<i64>()
                        .ok()
                        .filter(|after| *after >= 0)
                        .ok_or_else(|| invalid("cursor is not one this table's history gave"))?,
                ),
            };
            fields.finish()?;
            check_id(&id)?;
            Ok(Request::History { id, limit, after })
        }
        "create" => {
            let mut fields = Fields::new(value, "a create request")?;
            let values = object(fields.require("values")?, "values")?;
            let idempotency_key = idempotency_key(fields.require("idempotencyKey")?)?;
            fields.finish()?;
            create_assignments(table, &values)?;
            Ok(Request::Create {
                values,
                idempotency_key,
            })
        }
        "update" => {
            let mut fields = Fields::new(value, "an update request")?;
            let id = fields.require("id")?;
            let changes = object(fields.require("changes")?, "changes")?;
            let expected_version = expected_version(fields.take("expectedVersion"))?;
            let idempotency_key = idempotency_key(fields.require("idempotencyKey")?)?;
            fields.finish()?;
            check_id(&id)?;
            update_assignments(table, &changes)?;
            Ok(Request::Update {
                id,
                changes,
                expected_version,
                idempotency_key,
            })
        }
        "delete" => {
            let mut fields = Fields::new(value, "a delete request")?;
            let id = fields.require("id")?;
            let expected_version = expected_version(fields.take("expectedVersion"))?;
            let idempotency_key = idempotency_key(fields.require("idempotencyKey")?)?;
            fields.finish()?;
            check_id(&id)?;
            Ok(Request::Delete {
                id,
                expected_version,
                idempotency_key,
            })
        }
        "export" => {
            let mut fields = Fields::new(value, "an export request")?;
            let mut list = Map::new();
            for key in ["where", "orderBy", "cursor"] {
                if let Some(value) = fields.take(key) {
                    list.insert(key.to_owned(), value);
                }
            }
            fields.finish()?;
            list.insert("limit".to_owned(), Value::from(MAX_LIMIT));
            parse_list(table, Value::Object(list)).map(Request::Export)
        }
        "import" => {
            let mut fields = Fields::new(value, "an import request")?;
            let text = string(fields.require("csv")?, "csv")?;
            let idempotency_key = idempotency_key(fields.require("idempotencyKey")?)?;
            fields.finish()?;
            Ok(Request::Import {
                file: csv::read_import(table, &text)?,
                idempotency_key,
            })
        }
        _ => Err(invalid(format!(
            "unknown operation {}; use {}",
            shown(operation),
            sasha_contract::grammar::OPERATIONS.join(", ")
        ))),
    }
}

fn object(value: Value, what: &str) -> Result<Map<String, Value>, AppError> {
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(invalid(format!("{what} must be a JSON object"))),
    }
}

fn idempotency_key(value: Value) -> Result<String, AppError> {
    let key = string(value, "idempotencyKey")?;
    let chars = key.chars().count();
    if chars == 0 || chars > MAX_IDEMPOTENCY_KEY_CHARS || key.chars().any(char::is_control) {
        return Err(invalid(format!(
            "idempotencyKey must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters without control characters"
        )));
    }
    Ok(key)
}

fn expected_version(value: Option<Value>) -> Result<i64, AppError> {
    // Without it an update would silently overwrite a concurrent edit.
    let value = value.ok_or_else(|| {
        invalid("expectedVersion is required: reload the record and pass its _sasha_version")
    })?;
    match value.as_i64() {
        Some(version) if version >= 1 => Ok(version),
        _ => Err(invalid("expectedVersion must be an integer of at least 1")),
    }
}

/// An id is a string or an integer. It is always bound, so `"1 OR 1=1"` simply
/// matches no row and is indistinguishable from any other missing id.
fn check_id(id: &Value) -> Result<SqlValue, AppError> {
    match id {
        Value::String(text) if text.chars().count() <= MAX_TEXT_ID_CHARS => {
            Ok(SqlValue::Text(text.clone()))
        }
        Value::String(_) => Err(invalid(format!(
            "id must be at most {MAX_TEXT_ID_CHARS} characters"
        ))),
        Value::Number(number) => number
            .as_i64()
            .map(SqlValue::Integer)
            .ok_or_else(|| invalid("id must be a string or an integer")),
        _ => Err(invalid("id must be a string or an integer")),
    }
}

fn parse_where(table: &TableSpec, value: Option<Value>) -> Result<Vec<Condition>, AppError> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let items = bounded_array(value, "where", MAX_WHERE, "clauses")?;
    items
        .into_iter()
        .map(|item| {
            let mut fields = Fields::new(item, "a where clause")?;
            let field = string(fields.require("field")?, "field")?;
            let operator_name = string(fields.require("operator")?, "operator")?;
            let value = fields.require("value")?;
            fields.finish()?;
            let field = resolve(table, &field, Usage::Filter)?.to_owned();
            let operator = Operator::parse(&operator_name).ok_or_else(|| {
                invalid(format!(
                    "unknown operator {}; use eq, neq, lt, lte, gt, gte, in, contains or starts-with",
                    shown(&operator_name)
                ))
            })?;
            let condition = Condition {
                value: operand(&field, operator, &value, table.is_real(&field))?,
                field,
                operator,
            };
            Ok(condition)
        })
        .collect()
}

fn operand(
    field: &str,
    operator: Operator,
    value: &Value,
    real: bool,
) -> Result<Operand, AppError> {
    let what = format!("the value of {} on {field}", operator.name());
    match operator {
        Operator::In => {
            let Value::Array(items) = value else {
                return Err(invalid(format!("{what} must be an array")));
            };
            if items.is_empty() {
                return Err(invalid(format!("{what} needs at least one value")));
            }
            if items.len() > MAX_IN {
                return Err(too_many(format!(
                    "{what} has {} values; at most {MAX_IN} are allowed",
                    items.len()
                )));
            }
            let values = items
                .iter()
                .map(|item| match scalar(item, &what, real)? {
                    Scalar::Null => Err(invalid(format!(
                        "{what} cannot hold null; use eq null instead"
                    ))),
                    other => Ok(other),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Operand::Many(values))
        }
        Operator::Contains | Operator::StartsWith => match value {
            Value::String(text) => {
                if text.chars().count() > MAX_PATTERN_CHARS {
                    return Err(too_many(format!(
                        "{what} is longer than {MAX_PATTERN_CHARS} characters"
                    )));
                }
                Ok(Operand::One(Scalar::Text(text.clone())))
            }
            _ => Err(invalid(format!("{what} must be a string"))),
        },
        Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte => {
            match scalar(value, &what, real)? {
                Scalar::Null => Err(invalid(format!(
                    "{what} cannot be null: nothing is ordered against null"
                ))),
                other => Ok(Operand::One(other)),
            }
        }
        Operator::Eq | Operator::Neq => Ok(Operand::One(scalar(value, &what, real)?)),
    }
}

fn parse_list(table: &TableSpec, value: Value) -> Result<ListQuery, AppError> {
    let mut fields = Fields::new(value, "a list query")?;
    let filters = parse_where(table, fields.take("where"))?;
    let order_by = match fields.take("orderBy") {
        None => Vec::new(),
        Some(value) => {
            let items = bounded_array(value, "orderBy", MAX_ORDER_BY, "entries")?;
            items
                .into_iter()
                .map(|item| {
                    let mut fields = Fields::new(item, "an orderBy entry")?;
                    let field = string(fields.require("field")?, "field")?;
                    let descending = match fields.take("direction") {
                        None => false,
                        Some(Value::String(direction)) if direction == "asc" => false,
                        Some(Value::String(direction)) if direction == "desc" => true,
                        Some(_) => return Err(invalid("direction must be asc or desc")),
                    };
                    fields.finish()?;
                    Ok(Ordering {
                        field: resolve(table, &field, Usage::Sort)?.to_owned(),
                        descending,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?
        }
    };
    let select = match fields.take("select") {
        None => None,
        Some(value) => {
            let items = bounded_array(value, "select", MAX_SELECT, "fields")?;
            Some(
                items
                    .into_iter()
                    .map(|item| {
                        let field = string(item, "a select entry")?;
                        Ok(resolve(table, &field, Usage::Select)?.to_owned())
                    })
                    .collect::<Result<Vec<_>, AppError>>()?,
            )
        }
    };
    let limit = match fields.take("limit") {
        None => DEFAULT_LIMIT,
        Some(value) => match value.as_u64() {
            // Refused rather than clamped: `-1` means "unbounded" to SQLite.
            Some(limit) if (1..=u64::from(MAX_LIMIT)).contains(&limit) => limit as u32,
            _ => {
                return Err(invalid(format!(
                    "limit must be an integer from 1 to {MAX_LIMIT}"
                )));
            }
        },
    };
    let cursor = match fields.take("cursor") {
        None => None,
        Some(value) => Some(string(value, "cursor")?),
    };
    fields.finish()?;
    let query = ListQuery {
        filters,
        order_by,
        select,
        limit,
        cursor,
    };
    check_list(table, &query)?;
    Ok(query)
}

fn parse_aggregate(table: &TableSpec, value: Value) -> Result<AggregateQuery, AppError> {
    let mut fields = Fields::new(value, "an aggregate query")?;
    let filters = parse_where(table, fields.take("where"))?;
    let group_by = match fields.take("groupBy") {
        None => Vec::new(),
        Some(value) => {
            let items = bounded_array(value, "groupBy", MAX_GROUP_BY, "fields")?;
            items
                .into_iter()
                .map(|item| {
                    // A non-string (an expression object) is refused here.
                    let field = string(item, "a groupBy entry")?;
                    Ok(resolve(table, &field, Usage::Group)?.to_owned())
                })
                .collect::<Result<Vec<_>, AppError>>()?
        }
    };
    let items = bounded_array(
        fields.require("metrics")?,
        "metrics",
        MAX_METRICS,
        "entries",
    )?;
    fields.finish()?;
    if items.is_empty() {
        return Err(invalid("metrics needs at least one entry"));
    }
    let metrics = items
        .into_iter()
        .map(|item| {
            let mut fields = Fields::new(item, "a metric")?;
            let alias = string(fields.require("as")?, "as")?;
            let mut found = Vec::new();
            for (name, op) in MetricFunction::ALL {
                if let Some(field) = fields.take(name) {
                    found.push((op, field));
                }
            }
            // Checked before the leftovers so that `count(*)),(select` reads as an
            // unknown key, and two operations as exactly that.
            fields.finish()?;
            let (op, field) = match found.len() {
                1 => found.remove(0),
                0 => {
                    return Err(invalid(format!(
                        "metric {} needs one of sum, avg, min, max, count or countDistinct",
                        shown(&alias)
                    )));
                }
                _ => {
                    return Err(invalid(format!(
                        "metric {} has more than one operation; use exactly one",
                        shown(&alias)
                    )));
                }
            };
            let field = string(field, "a metric field")?;
            Ok(Metric {
                field: resolve(table, &field, Usage::Metric)?.to_owned(),
                alias,
                op,
            })
        })
        .collect::<Result<Vec<_>, AppError>>()?;
    let query = AggregateQuery {
        filters,
        group_by,
        metrics,
    };
    check_aggregate(table, &query)?;
    Ok(query)
}

// ---------------------------------------------------------------------------
// Checks shared by parse and the builders (the typed structs are public, so the
// builders never trust that a value came through `parse`)
// ---------------------------------------------------------------------------

fn check_conditions(table: &TableSpec, filters: &[Condition]) -> Result<(), AppError> {
    if filters.len() > MAX_WHERE {
        return Err(too_many(format!(
            "where has {} clauses; at most {MAX_WHERE} are allowed",
            filters.len()
        )));
    }
    for condition in filters {
        resolve(table, &condition.field, Usage::Filter)?;
        let ok = match (&condition.operator, &condition.value) {
            (Operator::In, Operand::Many(values)) => {
                if values.len() > MAX_IN {
                    return Err(too_many(format!(
                        "in has {} values; at most {MAX_IN} are allowed",
                        values.len()
                    )));
                }
                !values.is_empty() && values.iter().all(|v| *v != Scalar::Null)
            }
            (Operator::Contains | Operator::StartsWith, Operand::One(Scalar::Text(text))) => {
                if text.chars().count() > MAX_PATTERN_CHARS {
                    return Err(too_many(format!(
                        "a pattern is longer than {MAX_PATTERN_CHARS} characters"
                    )));
                }
                true
            }
            (Operator::Eq | Operator::Neq, Operand::One(_)) => true,
            (Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte, Operand::One(v)) => {
                *v != Scalar::Null
            }
            _ => false,
        };
        if !ok {
            return Err(invalid(format!(
                "the value of {} on {} has the wrong shape",
                condition.operator.name(),
                condition.field
            )));
        }
        if let Operand::One(Scalar::Real(real)) = &condition.value
            && !real.is_finite()
        {
            return Err(invalid("numbers must be finite"));
        }
    }
    Ok(())
}

fn check_list(table: &TableSpec, query: &ListQuery) -> Result<(), AppError> {
    check_conditions(table, &query.filters)?;
    if query.order_by.len() > MAX_ORDER_BY {
        return Err(too_many(format!(
            "orderBy has {} entries; at most {MAX_ORDER_BY} are allowed",
            query.order_by.len()
        )));
    }
    let mut seen = BTreeSet::new();
    for ordering in &query.order_by {
        resolve(table, &ordering.field, Usage::Sort)?;
        if !seen.insert(ordering.field.as_str()) {
            return Err(invalid(format!(
                "field {} appears twice in orderBy",
                ordering.field
            )));
        }
    }
    if let Some(select) = &query.select {
        if select.len() > MAX_SELECT {
            return Err(too_many(format!(
                "select has {} fields; at most {MAX_SELECT} are allowed",
                select.len()
            )));
        }
        for field in select {
            resolve(table, field, Usage::Select)?;
        }
    }
    if !(1..=MAX_LIMIT).contains(&query.limit) {
        return Err(invalid(format!(
            "limit must be an integer from 1 to {MAX_LIMIT}"
        )));
    }
    if query
        .cursor
        .as_ref()
        .is_some_and(|cursor| cursor.len() > MAX_CURSOR_BYTES)
    {
        return Err(bad_cursor());
    }
    Ok(())
}

/// SQLite's type affinity of a declared type (the rules of section 3.1 of
/// "Datatypes In SQLite").
fn numeric_affinity(declared_type: &str) -> bool {
    let upper = declared_type.to_ascii_uppercase();
    if upper.contains("INT") {
        return true;
    }
    if upper.contains("CHAR") || upper.contains("CLOB") || upper.contains("TEXT") {
        return false;
    }
    if upper.contains("BLOB") || upper.is_empty() {
        return false;
    }
    // REAL, FLOA, DOUB, and everything else (NUMERIC affinity).
    true
}

fn is_identifier(alias: &str) -> bool {
    let mut chars = alias.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && alias.len() <= MAX_ALIAS_CHARS
}

fn check_aggregate(table: &TableSpec, query: &AggregateQuery) -> Result<(), AppError> {
    check_conditions(table, &query.filters)?;
    if query.group_by.len() > MAX_GROUP_BY {
        return Err(too_many(format!(
            "groupBy has {} fields; at most {MAX_GROUP_BY} are allowed",
            query.group_by.len()
        )));
    }
    let mut keys = BTreeSet::new();
    for field in &query.group_by {
        resolve(table, field, Usage::Group)?;
        if !keys.insert(field.as_str()) {
            return Err(invalid(format!("field {field} appears twice in groupBy")));
        }
    }
    if query.metrics.is_empty() {
        return Err(invalid("metrics needs at least one entry"));
    }
    if query.metrics.len() > MAX_METRICS {
        return Err(too_many(format!(
            "metrics has {} entries; at most {MAX_METRICS} are allowed",
            query.metrics.len()
        )));
    }
    for metric in &query.metrics {
        if !is_identifier(&metric.alias) {
            return Err(invalid(format!(
                "metric alias {} must be an identifier: a letter or _ then letters, digits or _, at most {MAX_ALIAS_CHARS} characters",
                shown(&metric.alias)
            )));
        }
        if !keys.insert(metric.alias.as_str()) {
            return Err(invalid(format!(
                "metric alias {} repeats another alias or a groupBy field",
                metric.alias
            )));
        }
        let column = resolve(table, &metric.field, Usage::Metric)?;
        if matches!(metric.op, MetricFunction::Sum | MetricFunction::Avg) {
            let numeric = column == VERSION_COLUMN
                || table
                    .column(column)
                    .is_some_and(|c| numeric_affinity(&c.declared_type));
            if !numeric {
                return Err(invalid(format!(
                    "metric {} sums or averages {column}, which is not a numeric column",
                    metric.alias
                )));
            }
        }
    }
    Ok(())
}

/// Whether a column must be given on create: NOT NULL without a default.
fn required(column: &Column) -> bool {
    column.not_null && column.default_value.is_none()
}

fn check_property_count(map: &Map<String, Value>, what: &str) -> Result<(), AppError> {
    if map.is_empty() {
        return Err(invalid(format!("{what} needs at least one property")));
    }
    if map.len() > MAX_VALUES {
        return Err(too_many(format!(
            "{what} has {} properties; at most {MAX_VALUES} are allowed",
            map.len()
        )));
    }
    Ok(())
}

/// The value a create or update writes to `column`, checked against the
/// column's kind: its affinity, and for a typed column (`DATE`) its format.
fn write_value(table: &TableSpec, column: &str, value: &Value) -> Result<SqlValue, AppError> {
    let checked = scalar(
        value,
        &format!("the value of {column}"),
        table.is_real(column),
    )?;
    let format = table
        .column(column)
        .and_then(|c| sasha_contract::data::value_format(&c.declared_type));
    if let Some(format) = format {
        let refused = match value {
            Value::Null => None,
            Value::String(text) => sasha_contract::data::check_format(format, text)
                .err()
                .map(|rule| format!("{column} {rule}, not {}", shown(text))),
            _ => Some(format!(
                "{column} {}, as a string",
                sasha_contract::data::format_rule(format)
            )),
        };
        if let Some(message) = refused {
            return Err(invalid(message).with_details(serde_json::json!({
                "table": table.name,
                "field": column,
                "rule": format,
            })));
        }
    }
    Ok(checked.to_sql())
}

/// The (column, value) pairs a create writes, checked.
fn create_assignments<'t>(
    table: &'t TableSpec,
    values: &Map<String, Value>,
) -> Result<Vec<(&'t str, SqlValue)>, AppError> {
    check_property_count(values, "values")?;
    let integer_id = table.integer_id();
    let mut assignments = Vec::with_capacity(values.len());
    for (name, value) in values {
        let column = resolve(table, name, Usage::Write)?;
        if column == ID_COLUMN {
            if integer_id {
                return Err(invalid(format!(
                    "field {ID_COLUMN} of table {} is assigned by the server and cannot be written",
                    table.name
                )));
            }
            match value {
                Value::String(text) if !text.is_empty() => {}
                _ => return Err(invalid("id must be a non-empty string")),
            }
            check_id(value)?;
        }
        assignments.push((column, write_value(table, column, value)?));
    }
    for column in &table.columns {
        let stamped = table.owner_field.as_deref() == Some(column.name.as_str());
        let needed = if column.name == ID_COLUMN {
            !integer_id
        } else {
            required(column) && !stamped
        };
        if needed && !values.contains_key(&column.name) {
            return Err(invalid(format!(
                "values needs field {} of table {}",
                column.name, table.name
            )));
        }
    }
    Ok(assignments)
}

/// An undo's recreate of a deleted row: inserts the row as the ledger
/// recorded it (its id and declared columns), stamped with `actor` as owner
/// and with `version`, returning it. A field the table no longer declares is
/// refused; the owner field and the version in the image are not read.
pub fn restore_statement(
    table: &TableSpec,
    image: &Map<String, Value>,
    version: i64,
    actor: &str,
) -> Result<Statement, AppError> {
    let owner = table.scope()?;
    let mut names = Vec::new();
    let mut params = Vec::new();
    for (name, value) in image {
        if name == VERSION_COLUMN || owner == Some(name.as_str()) {
            continue;
        }
        let column = resolve(table, name, Usage::Write)?;
        names.push(quote(column));
        params.push(if column == ID_COLUMN {
            check_id(value)?
        } else {
            write_value(table, column, value)?
        });
    }
    if let Some(owner) = owner {
        names.push(quote(owner));
        params.push(SqlValue::Text(actor.to_owned()));
    }
    names.push(quote(VERSION_COLUMN));
    params.push(SqlValue::Integer(version));
    let columns = table.all_columns();
    Ok(Statement {
        sql: format!(
            "INSERT INTO {} ({}) VALUES ({}) RETURNING {}",
            quote(&table.name),
            names.join(", "),
            vec!["?"; names.len()].join(", "),
            sql::column_list(&columns)
        ),
        params,
        columns,
    })
}

/// The (column, value) pairs an update sets, checked.
fn update_assignments<'t>(
    table: &'t TableSpec,
    changes: &Map<String, Value>,
) -> Result<Vec<(&'t str, SqlValue)>, AppError> {
    check_property_count(changes, "changes")?;
    changes
        .iter()
        .map(|(name, value)| {
            let column = resolve(table, name, Usage::Write)?;
            if column == ID_COLUMN {
                return Err(invalid(format!(
                    "field {ID_COLUMN} identifies the record and cannot be changed"
                )));
            }
            Ok((column, write_value(table, column, value)?))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Canonical form and request hash
// ---------------------------------------------------------------------------

pub use sasha_contract::canonical::canonical_json;

/// The idempotency input hash: sha256 (hex) over the operation, the table and the
/// canonical form of the request, each length-prefixed.
pub fn request_hash(operation: &str, table: &str, request_json_canonical: &Value) -> String {
    let canonical = canonical_json(request_json_canonical);
    let mut hasher = Sha256::new();
    hasher.update(b"sasha-request-v1");
    for part in [operation.as_bytes(), table.as_bytes(), canonical.as_bytes()] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hex::encode(hasher.finalize())
}

pub mod csv;
mod sql;
pub use sql::*;

#[cfg(any(test, feature = "oracle"))]
pub mod oracle;
#[cfg(test)]
mod tests;
