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
use sasha_package::manifest::{Access, TableDeclaration};
use sasha_package::sql::{Column, Table};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

/// The optimistic-concurrency column the engine adds to every data table
/// (`INTEGER NOT NULL`); readable in results and filters, never writable.
pub const VERSION_COLUMN: &str = "_sasha_version";
/// The column every declared table addresses its rows by.
pub const ID_COLUMN: &str = "id";

/// Most `where` clauses.
pub const MAX_WHERE: usize = 20;
/// Most values of one `in`.
pub const MAX_IN: usize = 50;
/// Most `orderBy` entries.
pub const MAX_ORDER_BY: usize = 3;
/// Most `select` entries.
pub const MAX_SELECT: usize = 50;
/// Largest page.
pub const MAX_LIMIT: u32 = 200;
/// The page size when `limit` is absent.
pub const DEFAULT_LIMIT: u32 = 50;
/// Most `groupBy` fields.
pub const MAX_GROUP_BY: usize = 3;
/// Most metrics of one aggregate.
pub const MAX_METRICS: usize = 10;
/// Most properties of `values`/`changes`.
pub const MAX_PROPERTIES: usize = 50;
/// Most characters of a `contains`/`starts-with` pattern (before escaping).
/// Escaped and wrapped in `%`, a pattern is at most 4002 bytes, so the engine's
/// `SQLITE_LIMIT_LIKE_PATTERN_LENGTH` must allow that much; likewise a list
/// statement binds at most about 1,020 parameters (20 clauses of 50 `in` values,
/// the cursor keys, the owner and the limit) for `SQLITE_LIMIT_VARIABLE_NUMBER`.
pub const MAX_PATTERN_CHARS: usize = 1000;
/// Most groups an aggregate may return; the statement fetches one more so the
/// engine can tell "exactly at the bound" from "over it" (see [`check_group_count`]).
pub const MAX_GROUPS: usize = 1000;
/// Most characters of an idempotency key.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 200;
/// Most characters of a TEXT id.
pub const MAX_TEXT_ID_CHARS: usize = 1000;
/// Most characters of a metric alias.
pub const MAX_ALIAS_CHARS: usize = 64;
/// Most bytes of a cursor string; a longer one cannot be ours.
pub const MAX_CURSOR_BYTES: usize = 16 * 1024;
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

    fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|column| column.name == name)
    }

    /// Whether `name` has REAL affinity (`REAL`, `FLOAT`, `DOUBLE`): any finite
    /// number is a value of it, however large (the package's one affinity
    /// rule, `sasha_package::sql::value_kinds`).
    fn is_real(&self, name: &str) -> bool {
        self.column(name).is_some_and(|column| {
            sasha_package::sql::value_kinds(&column.declared_type) == ["number"]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Eq,
    Neq,
    Lt,
    Lte,
    Gt,
    Gte,
    In,
    Contains,
    StartsWith,
}

impl Operator {
    fn parse(name: &str) -> Option<Operator> {
        Some(match name {
            "eq" => Operator::Eq,
            "neq" => Operator::Neq,
            "lt" => Operator::Lt,
            "lte" => Operator::Lte,
            "gt" => Operator::Gt,
            "gte" => Operator::Gte,
            "in" => Operator::In,
            "contains" => Operator::Contains,
            "starts-with" => Operator::StartsWith,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Operator::Eq => "eq",
            Operator::Neq => "neq",
            Operator::Lt => "lt",
            Operator::Lte => "lte",
            Operator::Gt => "gt",
            Operator::Gte => "gte",
            Operator::In => "in",
            Operator::Contains => "contains",
            Operator::StartsWith => "starts-with",
        }
    }
}

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

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricOp {
    Sum,
    Avg,
    Min,
    Max,
    Count,
    CountDistinct,
}

impl MetricOp {
    const ALL: [(&'static str, MetricOp); 6] = [
        ("sum", MetricOp::Sum),
        ("avg", MetricOp::Avg),
        ("min", MetricOp::Min),
        ("max", MetricOp::Max),
        ("count", MetricOp::Count),
        ("countDistinct", MetricOp::CountDistinct),
    ];
}

/// One metric: `{as, <op>: field}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metric {
    /// The output key.
    pub alias: String,
    pub op: MetricOp,
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
    let value: Value = serde_json::from_str(request_json).map_err(|error| {
        // serde's message names a line and column, and a number out of range
        // (`1e309`) lands here too.
        invalid(format!("the request is not valid JSON: {error}"))
    })?;
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
        _ => Err(invalid(format!(
            "unknown operation {}; use list, get, aggregate, create, update or delete",
            shown(operation)
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
            for (name, op) in MetricOp::ALL {
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
        if matches!(metric.op, MetricOp::Sum | MetricOp::Avg) {
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
    if map.len() > MAX_PROPERTIES {
        return Err(too_many(format!(
            "{what} has {} properties; at most {MAX_PROPERTIES} are allowed",
            map.len()
        )));
    }
    Ok(())
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
        let scalar = scalar(
            value,
            &format!("the value of {column}"),
            table.is_real(column),
        )?;
        assignments.push((column, scalar.to_sql()));
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
            Ok((
                column,
                scalar(
                    value,
                    &format!("the value of {column}"),
                    table.is_real(column),
                )?
                .to_sql(),
            ))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// SQL building
// ---------------------------------------------------------------------------

/// Escapes `%`, `_` and the escape character itself for `LIKE … ESCAPE '\'`.
fn escape_like(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len() + 2);
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Appends the user predicate (clauses ANDed) and returns its SQL, or `None`
/// when there are no clauses.
fn predicate(
    table: &TableSpec,
    filters: &[Condition],
    params: &mut Vec<SqlValue>,
) -> Result<Option<String>, AppError> {
    if filters.is_empty() {
        return Ok(None);
    }
    let mut clauses = Vec::with_capacity(filters.len());
    for condition in filters {
        let column = quote(own(table, &condition.field)?);
        let clause = match (&condition.operator, &condition.value) {
            (Operator::Eq, Operand::One(Scalar::Null)) => format!("{column} IS NULL"),
            (Operator::Neq, Operand::One(Scalar::Null)) => format!("{column} IS NOT NULL"),
            (Operator::In, Operand::Many(values)) => {
                params.extend(values.iter().map(Scalar::to_sql));
                let marks = vec!["?"; values.len()].join(", ");
                format!("{column} IN ({marks})")
            }
            (Operator::Contains, Operand::One(Scalar::Text(text))) => {
                params.push(SqlValue::Text(format!("%{}%", escape_like(text))));
                format!("{column} LIKE ? ESCAPE '\\'")
            }
            (Operator::StartsWith, Operand::One(Scalar::Text(text))) => {
                params.push(SqlValue::Text(format!("{}%", escape_like(text))));
                format!("{column} LIKE ? ESCAPE '\\'")
            }
            (operator, Operand::One(value)) => {
                params.push(value.to_sql());
                let sql_operator = match operator {
                    Operator::Eq => "=",
                    // The complement of `eq`: NULL rows are "not equal to 'x'".
                    Operator::Neq => "IS NOT",
                    Operator::Lt => "<",
                    Operator::Lte => "<=",
                    Operator::Gt => ">",
                    _ => ">=",
                };
                format!("{column} {sql_operator} ?")
            }
            // Shapes are checked before building; this keeps the match total
            // and fails closed.
            _ => "0".to_owned(),
        };
        clauses.push(clause);
    }
    Ok(Some(clauses.join(" AND ")))
}

/// The server's own string for a field that has already passed the checks: SQL is
/// only ever built from the declared column list, never from a caller's string,
/// even one that is byte-equal to it.
fn own<'t>(table: &'t TableSpec, name: &str) -> Result<&'t str, AppError> {
    resolve(table, name, Usage::Select)
}

/// `WHERE (<user predicate>) AND (<cursor>) AND "<owner>" = ?`: the owner term is
/// never inside a caller-shaped parenthesis, so no `OR` can escape it.
fn where_clause(
    parts: Vec<String>,
    owner: Option<&str>,
    actor: &str,
    params: &mut Vec<SqlValue>,
) -> String {
    let mut terms: Vec<String> = parts.into_iter().map(|part| format!("({part})")).collect();
    if let Some(owner) = owner {
        terms.push(format!("{} = ?", quote(owner)));
        params.push(SqlValue::Text(actor.to_owned()));
    }
    if terms.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", terms.join(" AND "))
    }
}

fn column_list(columns: &[String]) -> String {
    columns
        .iter()
        .map(|c| quote(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the engine needs to finish a list page: which result columns the caller
/// sees, and how to make the next cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorPlan {
    actor: String,
    table: String,
    canonical_query: String,
    /// The sort keys in order, `id` last: (column, descending).
    keys: Vec<(String, bool)>,
    limit: usize,
    /// Result columns the caller asked for; the statement may carry more (sort
    /// keys it needs for the cursor).
    visible: Vec<String>,
}

impl CursorPlan {
    /// The page size; the statement fetches one row more to know whether
    /// another page exists.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Turns the rows of a list statement (from [`row_to_json`]) into the page:
    /// at most `limit` rows with only the visible keys, and the next cursor when
    /// more rows exist.
    pub fn finish_page(
        &self,
        mut rows: Vec<Map<String, Value>>,
        cursor_secret: &[u8],
    ) -> (Vec<Map<String, Value>>, Option<String>) {
        let next = if rows.len() > self.limit {
            rows.truncate(self.limit);
            rows.last().map(|row| next_cursor(self, row, cursor_secret))
        } else {
            None
        };
        for row in &mut rows {
            row.retain(|key, _| self.visible.iter().any(|v| v == key));
        }
        (rows, next)
    }
}

fn bad_cursor() -> AppError {
    invalid("the cursor is invalid or belongs to another query; start again without it")
}

/// The list query as the cursor is bound to: everything but the cursor itself and
/// the page size (a caller may change the page size between pages).
fn canonical_list(query: &ListQuery) -> String {
    let filters: Vec<Value> = query
        .filters
        .iter()
        .map(|c| {
            let value = match &c.value {
                Operand::One(v) => v.tagged(),
                Operand::Many(vs) => Value::Array(vs.iter().map(Scalar::tagged).collect()),
            };
            Value::Array(vec![
                c.field.clone().into(),
                c.operator.name().into(),
                value,
            ])
        })
        .collect();
    let order: Vec<Value> = query
        .order_by
        .iter()
        .map(|o| Value::Array(vec![o.field.clone().into(), o.descending.into()]))
        .collect();
    let select = query
        .select
        .as_ref()
        .map(|s| Value::Array(s.iter().map(|f| f.clone().into()).collect()))
        .unwrap_or(Value::Null);
    canonical_json(&Value::Array(vec![
        Value::Array(filters),
        Value::Array(order),
        select,
    ]))
}

/// HMAC-SHA256 (RFC 2104) built on `sha2`: H((K ^ opad) || H((K ^ ipad) || m)).
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(message);
    let inner_hash = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner_hash);
    let mut mac = [0u8; 32];
    mac.copy_from_slice(&outer.finalize());
    mac
}

/// The message a cursor's MAC covers; each part length-prefixed so that no two
/// different (actor, table, query, values) tuples share an encoding.
fn cursor_message(plan: &CursorPlan, payload: &[u8]) -> Vec<u8> {
    let mut message = b"sasha-cursor-v1".to_vec();
    for part in [
        plan.actor.as_bytes(),
        plan.table.as_bytes(),
        plan.canonical_query.as_bytes(),
        payload,
    ] {
        message.extend_from_slice(&(part.len() as u64).to_be_bytes());
        message.extend_from_slice(part);
    }
    message
}

/// The cursor after `last_row` (a row of a list page, still carrying its sort
/// keys): base64url(payload) "." base64url(HMAC).
pub fn next_cursor(
    plan: &CursorPlan,
    last_row: &Map<String, Value>,
    cursor_secret: &[u8],
) -> String {
    let values: Vec<Value> = plan
        .keys
        .iter()
        .map(|(key, _)| Scalar::from_result(last_row.get(key).unwrap_or(&Value::Null)).tagged())
        .collect();
    let payload = canonical_json(&Value::Array(values)).into_bytes();
    let mac = hmac_sha256(cursor_secret, &cursor_message(plan, &payload));
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(&payload),
        URL_SAFE_NO_PAD.encode(mac)
    )
}

/// The sort values a cursor carries, once its MAC has been checked.
fn open_cursor(plan: &CursorPlan, cursor: &str, secret: &[u8]) -> Result<Vec<Scalar>, AppError> {
    if cursor.len() > MAX_CURSOR_BYTES {
        return Err(bad_cursor());
    }
    let (payload, mac) = cursor.split_once('.').ok_or_else(bad_cursor)?;
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| bad_cursor())?;
    let mac = URL_SAFE_NO_PAD.decode(mac).map_err(|_| bad_cursor())?;
    let expected = hmac_sha256(secret, &cursor_message(plan, &payload));
    // Constant time: no early exit on the first differing byte.
    if mac.len() != expected.len()
        || mac
            .iter()
            .zip(expected.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            != 0
    {
        return Err(bad_cursor());
    }
    let values: Value = serde_json::from_slice(&payload).map_err(|_| bad_cursor())?;
    let values: Vec<Scalar> = values
        .as_array()
        .ok_or_else(bad_cursor)?
        .iter()
        .map(|v| Scalar::from_tagged(v).ok_or_else(bad_cursor))
        .collect::<Result<_, _>>()?;
    if values.len() != plan.keys.len() {
        return Err(bad_cursor());
    }
    Ok(values)
}

/// The keyset predicate "the row sorts after the cursor", NULL-aware: SQLite sorts
/// NULL first ascending and last descending.
fn after_cursor(keys: &[(String, bool)], values: &[Scalar], params: &mut Vec<SqlValue>) -> String {
    let mut disjuncts = Vec::new();
    for (index, ((key, descending), value)) in keys.iter().zip(values).enumerate() {
        let column = quote(key);
        let after = match (descending, value) {
            (false, Scalar::Null) => Some((format!("{column} IS NOT NULL"), None)),
            (false, v) => Some((format!("{column} > ?"), Some(v.to_sql()))),
            // Nothing sorts after NULL when descending.
            (true, Scalar::Null) => None,
            (true, v) => Some((
                format!("({column} < ? OR {column} IS NULL)"),
                Some(v.to_sql()),
            )),
        };
        let Some((after, after_param)) = after else {
            continue;
        };
        let mut terms = Vec::new();
        for ((prior, _), prior_value) in keys[..index].iter().zip(values) {
            match prior_value {
                Scalar::Null => terms.push(format!("{} IS NULL", quote(prior))),
                v => {
                    terms.push(format!("{} = ?", quote(prior)));
                    params.push(v.to_sql());
                }
            }
        }
        terms.push(after);
        params.extend(after_param);
        disjuncts.push(format!("({})", terms.join(" AND ")));
    }
    if disjuncts.is_empty() {
        "0".to_owned()
    } else {
        disjuncts.join(" OR ")
    }
}

/// `list`: the page's rows (one more than `limit`, see [`CursorPlan::finish_page`]),
/// ordered by the requested keys then `id`, scoped to `actor` on owner tables.
pub fn list_statement(
    table: &TableSpec,
    query: &ListQuery,
    actor: &str,
    cursor_secret: &[u8],
) -> Result<(Statement, CursorPlan), AppError> {
    let owner = table.scope()?;
    check_list(table, query)?;
    if cursor_secret.len() < MIN_CURSOR_SECRET_BYTES {
        return Err(internal("the cursor secret is too short"));
    }
    let mut visible: Vec<String> = match &query.select {
        None => table.all_columns(),
        Some(select) => {
            let mut visible = vec![ID_COLUMN.to_owned()];
            for field in select {
                let field = own(table, field)?;
                if !visible.iter().any(|v| v == field) && field != VERSION_COLUMN {
                    visible.push(field.to_owned());
                }
            }
            visible.push(VERSION_COLUMN.to_owned());
            visible
        }
    };
    visible.retain(|c| c == VERSION_COLUMN || table.column(c).is_some());
    let mut keys: Vec<(String, bool)> = query
        .order_by
        .iter()
        .map(|o| Ok((own(table, &o.field)?.to_owned(), o.descending)))
        .collect::<Result<_, AppError>>()?;
    if !keys.iter().any(|(k, _)| k == ID_COLUMN) {
        keys.push((ID_COLUMN.to_owned(), false));
    }
    let mut columns = visible.clone();
    for (key, _) in &keys {
        if !columns.contains(key) {
            columns.push(key.clone());
        }
    }
    let plan = CursorPlan {
        actor: actor.to_owned(),
        table: table.name.clone(),
        canonical_query: canonical_list(query),
        keys,
        limit: query.limit as usize,
        visible,
    };
    let mut params = Vec::new();
    let mut parts = Vec::new();
    if let Some(user) = predicate(table, &query.filters, &mut params)? {
        parts.push(user);
    }
    if let Some(cursor) = &query.cursor {
        let values = open_cursor(&plan, cursor, cursor_secret)?;
        parts.push(after_cursor(&plan.keys, &values, &mut params));
    }
    let where_sql = where_clause(parts, owner, actor, &mut params);
    let order = plan
        .keys
        .iter()
        .map(|(k, d)| format!("{} {}", quote(k), if *d { "DESC" } else { "ASC" }))
        .collect::<Vec<_>>()
        .join(", ");
    params.push(SqlValue::Integer(query.limit as i64 + 1));
    let sql = format!(
        "SELECT {} FROM {}{where_sql} ORDER BY {order} LIMIT ?",
        column_list(&columns),
        quote(&table.name)
    );
    Ok((
        Statement {
            sql,
            params,
            columns,
        },
        plan,
    ))
}

/// `get`: the row with `id`, every column; on owner tables another owner's row is
/// simply not found.
pub fn get_statement(table: &TableSpec, id: &Value, actor: &str) -> Result<Statement, AppError> {
    let owner = table.scope()?;
    let columns = table.all_columns();
    let mut params = vec![check_id(id)?];
    let owner_sql = scope_term(owner, actor, &mut params);
    Ok(Statement {
        sql: format!(
            "SELECT {} FROM {} WHERE {} = ?{owner_sql}",
            column_list(&columns),
            quote(&table.name),
            quote(ID_COLUMN)
        ),
        params,
        columns,
    })
}

fn scope_term(owner: Option<&str>, actor: &str, params: &mut Vec<SqlValue>) -> String {
    match owner {
        Some(owner) => {
            params.push(SqlValue::Text(actor.to_owned()));
            format!(" AND {} = ?", quote(owner))
        }
        None => String::new(),
    }
}

/// Whether an aggregate's row count is within [`MAX_GROUPS`]; the statement
/// fetches one more row so the engine can tell.
pub fn check_group_count(rows: usize) -> Result<(), AppError> {
    if rows > MAX_GROUPS {
        return Err(too_many(format!(
            "the aggregate has more than {MAX_GROUPS} groups; filter or group more coarsely"
        )));
    }
    Ok(())
}

/// `aggregate`: one row per group (ordered by the group columns), or one row when
/// ungrouped; the output keys are the group columns then the metric aliases.
pub fn aggregate_statement(
    table: &TableSpec,
    query: &AggregateQuery,
    actor: &str,
) -> Result<Statement, AppError> {
    let owner = table.scope()?;
    check_aggregate(table, query)?;
    let groups: Vec<String> = query
        .group_by
        .iter()
        .map(|g| Ok(own(table, g)?.to_owned()))
        .collect::<Result<_, AppError>>()?;
    let mut select: Vec<String> = groups.iter().map(|g| quote(g)).collect();
    for metric in &query.metrics {
        let column = quote(own(table, &metric.field)?);
        select.push(match metric.op {
            MetricOp::Sum => format!("SUM({column})"),
            MetricOp::Avg => format!("AVG({column})"),
            MetricOp::Min => format!("MIN({column})"),
            MetricOp::Max => format!("MAX({column})"),
            MetricOp::Count => format!("COUNT({column})"),
            MetricOp::CountDistinct => format!("COUNT(DISTINCT {column})"),
        });
    }
    let mut params = Vec::new();
    let parts: Vec<String> = predicate(table, &query.filters, &mut params)?
        .into_iter()
        .collect();
    let where_sql = where_clause(parts, owner, actor, &mut params);
    let mut sql = format!(
        "SELECT {} FROM {}{where_sql}",
        select.join(", "),
        quote(&table.name)
    );
    if !groups.is_empty() {
        let groups = column_list(&groups);
        sql.push_str(&format!(" GROUP BY {groups} ORDER BY {groups} LIMIT ?"));
        params.push(SqlValue::Integer(MAX_GROUPS as i64 + 1));
    }
    // Aliases are the output keys but never part of the SQL.
    let columns = groups
        .into_iter()
        .chain(query.metrics.iter().map(|m| m.alias.clone()))
        .collect();
    Ok(Statement {
        sql,
        params,
        columns,
    })
}

/// `create`: inserts `values`, stamps the owner with `actor` and the version with
/// 1, and returns the new row.
pub fn create_statement(
    table: &TableSpec,
    values: &Map<String, Value>,
    actor: &str,
) -> Result<Statement, AppError> {
    let owner = table.scope()?;
    let assignments = create_assignments(table, values)?;
    let mut names: Vec<String> = assignments.iter().map(|(c, _)| quote(c)).collect();
    let mut marks: Vec<&str> = vec!["?"; assignments.len()];
    let mut params: Vec<SqlValue> = assignments.into_iter().map(|(_, v)| v).collect();
    if let Some(owner) = owner {
        names.push(quote(owner));
        marks.push("?");
        params.push(SqlValue::Text(actor.to_owned()));
    }
    names.push(quote(VERSION_COLUMN));
    marks.push("1");
    let columns = table.all_columns();
    Ok(Statement {
        sql: format!(
            "INSERT INTO {} ({}) VALUES ({}) RETURNING {}",
            quote(&table.name),
            names.join(", "),
            marks.join(", "),
            column_list(&columns)
        ),
        params,
        columns,
    })
}

/// `update`: sets `changes` and bumps the version, only where id, version and
/// owner all match; returns the updated row, or no row (then the engine tells
/// not-found from conflict with [`get_statement`]).
pub fn update_statement(
    table: &TableSpec,
    id: &Value,
    changes: &Map<String, Value>,
    expected_version: i64,
    actor: &str,
) -> Result<Statement, AppError> {
    let owner = table.scope()?;
    let assignments = update_assignments(table, changes)?;
    if expected_version < 1 {
        return Err(invalid("expectedVersion must be an integer of at least 1"));
    }
    let id = check_id(id)?;
    let mut sets: Vec<String> = assignments
        .iter()
        .map(|(c, _)| format!("{} = ?", quote(c)))
        .collect();
    let version = quote(VERSION_COLUMN);
    sets.push(format!("{version} = {version} + 1"));
    let mut params: Vec<SqlValue> = assignments.into_iter().map(|(_, v)| v).collect();
    params.push(id);
    params.push(SqlValue::Integer(expected_version));
    let owner_sql = scope_term(owner, actor, &mut params);
    let columns = table.all_columns();
    Ok(Statement {
        sql: format!(
            "UPDATE {} SET {} WHERE {} = ? AND {version} = ?{owner_sql} RETURNING {}",
            quote(&table.name),
            sets.join(", "),
            quote(ID_COLUMN),
            column_list(&columns)
        ),
        params,
        columns,
    })
}

/// `delete`: removes the row only where id, version and owner all match; returns
/// the deleted row (the audit's "before"), or no row.
pub fn delete_statement(
    table: &TableSpec,
    id: &Value,
    expected_version: i64,
    actor: &str,
) -> Result<Statement, AppError> {
    let owner = table.scope()?;
    if expected_version < 1 {
        return Err(invalid("expectedVersion must be an integer of at least 1"));
    }
    let mut params = vec![check_id(id)?, SqlValue::Integer(expected_version)];
    let owner_sql = scope_term(owner, actor, &mut params);
    let columns = table.all_columns();
    Ok(Statement {
        sql: format!(
            "DELETE FROM {} WHERE {} = ? AND {} = ?{owner_sql} RETURNING {}",
            quote(&table.name),
            quote(ID_COLUMN),
            quote(VERSION_COLUMN),
            column_list(&columns)
        ),
        params,
        columns,
    })
}

/// One result row of a statement built here as a JSON object keyed by
/// `columns` (the statement's [`Statement::columns`]). BLOBs (only a migration can
/// write one) become standard base64 strings.
pub fn row_to_json(
    columns: &[String],
    row: &rusqlite::Row<'_>,
) -> rusqlite::Result<Map<String, Value>> {
    let mut object = Map::new();
    for (index, name) in columns.iter().enumerate() {
        let value = match row.get_ref(index)? {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(integer) => Value::from(integer),
            ValueRef::Real(real) => Number::from_f64(real).map_or(Value::Null, Value::Number),
            ValueRef::Text(text) => Value::String(String::from_utf8_lossy(text).into_owned()),
            ValueRef::Blob(blob) => Value::String(STANDARD.encode(blob)),
        };
        object.insert(name.clone(), value);
    }
    Ok(object)
}

// ---------------------------------------------------------------------------
// Canonical form and request hash
// ---------------------------------------------------------------------------

/// JSON with object keys sorted (by bytes) at every depth and no whitespace,
/// independent of how `serde_json::Map` happens to order keys.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rusqlite::Connection;
    use serde_json::json;

    const SECRET: &[u8] = b"0123456789abcdef-test-secret";

    fn column(name: &str, declared_type: &str, not_null: bool) -> Column {
        Column {
            name: name.to_owned(),
            declared_type: declared_type.to_owned(),
            not_null,
            default_value: None,
            primary_key: name == ID_COLUMN,
            generated: false,
        }
    }

    /// `items`: owner table scoped by `created_by`.
    fn items() -> TableSpec {
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

    /// `wide`: a shared table with a TEXT id and 50 more columns.
    fn wide() -> TableSpec {
        let mut columns = vec![column("id", "TEXT", false)];
        columns.extend((0..50).map(|i| column(&format!("c{i}"), "INTEGER", false)));
        TableSpec {
            name: "wide".to_owned(),
            columns,
            owner_field: None,
            access: Access::Shared,
        }
    }

    fn database(tables: &[&TableSpec]) -> Connection {
        let connection = Connection::open_in_memory().unwrap();
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
                .unwrap();
        }
        connection
    }

    fn run(connection: &Connection, statement: &Statement) -> Vec<Map<String, Value>> {
        let mut prepared = connection.prepare(&statement.sql).unwrap();
        let rows = prepared
            .query_map(rusqlite::params_from_iter(&statement.params), |row| {
                row_to_json(&statement.columns, row)
            })
            .unwrap();
        rows.map(Result::unwrap).collect()
    }

    fn insert(
        connection: &Connection,
        table: &TableSpec,
        actor: &str,
        values: Value,
    ) -> Map<String, Value> {
        let Value::Object(values) = values else {
            panic!("values must be an object")
        };
        let statement = create_statement(table, &values, actor).unwrap();
        run(connection, &statement).remove(0)
    }

    fn code(result: Result<impl std::fmt::Debug, AppError>) -> ErrorCode {
        let error = result.expect_err("expected a refusal");
        // No SQL ever reaches a message.
        for word in [
            "SELECT",
            "WHERE",
            "INSERT",
            "UPDATE ",
            "DELETE FROM",
            "LIKE ?",
        ] {
            assert!(!error.message.contains(word), "{}", error.message);
        }
        assert!(!error.message.ends_with('.'), "{}", error.message);
        error.code
    }

    fn list(table: &TableSpec, query: Value) -> Result<ListQuery, AppError> {
        match parse("list", table, &query.to_string())? {
            Request::List(query) => Ok(query),
            other => panic!("{other:?}"),
        }
    }

    fn aggregate(table: &TableSpec, query: Value) -> Result<AggregateQuery, AppError> {
        match parse("aggregate", table, &query.to_string())? {
            Request::Aggregate(query) => Ok(query),
            other => panic!("{other:?}"),
        }
    }

    fn list_rows(
        connection: &Connection,
        table: &TableSpec,
        query: Value,
        actor: &str,
    ) -> (Vec<Map<String, Value>>, Option<String>) {
        let query = list(table, query).unwrap();
        let (statement, plan) = list_statement(table, &query, actor, SECRET).unwrap();
        plan.finish_page(run(connection, &statement), SECRET)
    }

    fn clause(field: &str, operator: &str, value: Value) -> Value {
        json!({"field": field, "operator": operator, "value": value})
    }

    /// Rows used by several tests: three of alice's and one of bob's.
    fn seeded() -> (TableSpec, Connection) {
        let table = items();
        let connection = database(&[&table]);
        insert(
            &connection,
            &table,
            "alice",
            json!({"title": "apple", "hours": 1.5, "count": 10, "note": null}),
        );
        insert(
            &connection,
            &table,
            "alice",
            json!({"title": "banana", "hours": 2.0, "count": 20, "note": "x"}),
        );
        insert(
            &connection,
            &table,
            "alice",
            json!({"title": "cherry", "count": null, "note": "y"}),
        );
        insert(
            &connection,
            &table,
            "bob",
            json!({"title": "apple", "hours": 9.0, "count": 10, "note": null}),
        );
        (table, connection)
    }

    fn titles(rows: &[Map<String, Value>]) -> Vec<String> {
        rows.iter()
            .map(|r| r["title"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn every_operator_runs_and_is_owner_scoped() {
        let (table, connection) = seeded();
        let cases = [
            (clause("title", "eq", json!("apple")), vec!["apple"]),
            (
                clause("title", "neq", json!("apple")),
                vec!["banana", "cherry"],
            ),
            (clause("count", "lt", json!(20)), vec!["apple"]),
            (clause("count", "lte", json!(20)), vec!["apple", "banana"]),
            (clause("count", "gt", json!(10)), vec!["banana"]),
            (clause("count", "gte", json!(10)), vec!["apple", "banana"]),
            (
                clause("title", "in", json!(["apple", "cherry", "zzz"])),
                vec!["apple", "cherry"],
            ),
            (clause("title", "contains", json!("an")), vec!["banana"]),
            (clause("title", "starts-with", json!("ch")), vec!["cherry"]),
            (clause("note", "eq", json!(null)), vec!["apple"]),
            (clause("note", "neq", json!(null)), vec!["banana", "cherry"]),
            (
                clause(VERSION_COLUMN, "eq", json!(1)),
                vec!["apple", "banana", "cherry"],
            ),
        ];
        for (condition, expected) in cases {
            let (rows, _) = list_rows(
                &connection,
                &table,
                json!({"where": [condition], "orderBy": [{"field": "title"}]}),
                "alice",
            );
            assert_eq!(titles(&rows), expected, "{condition}");
            assert!(rows.iter().all(|r| r["created_by"] == "alice"));
        }
    }

    #[test]
    fn rows_carry_id_and_version_and_select_narrows() {
        let (table, connection) = seeded();
        let (rows, _) = list_rows(
            &connection,
            &table,
            json!({"select": ["title"], "orderBy": [{"field": "count", "direction": "desc"}]}),
            "alice",
        );
        assert_eq!(rows.len(), 3);
        for row in &rows {
            let keys: Vec<&str> = row.keys().map(String::as_str).collect();
            assert_eq!(keys.len(), 3, "{row:?}");
            assert!(
                row.contains_key("id")
                    && row.contains_key("title")
                    && row.contains_key(VERSION_COLUMN)
            );
        }
        // The owner field may be selected and returned.
        let (rows, _) = list_rows(
            &connection,
            &table,
            json!({"select": ["created_by"]}),
            "alice",
        );
        assert!(rows.iter().all(|r| r["created_by"] == "alice"));
    }

    #[test]
    fn bounds_at_the_limit_pass_and_over_it_are_refused() {
        let table = items();
        let wide_table = wide();
        let connection = database(&[&table, &wide_table]);
        let clauses =
            |n: usize| Value::Array((0..n).map(|_| clause("count", "gte", json!(0))).collect());
        assert!(list(&table, json!({"where": clauses(20)})).is_ok());
        assert_eq!(
            code(list(&table, json!({"where": clauses(21)}))),
            ErrorCode::ResourceLimit
        );

        let values = |n: usize| Value::Array((0..n as i64).map(Value::from).collect());
        let query = list(
            &table,
            json!({"where": [clause("count", "in", values(50))]}),
        )
        .unwrap();
        run(
            &connection,
            &list_statement(&table, &query, "a", SECRET).unwrap().0,
        );
        assert_eq!(
            code(list(
                &table,
                json!({"where": [clause("count", "in", values(51))]})
            )),
            ErrorCode::ResourceLimit
        );
        assert_eq!(
            code(list(
                &table,
                json!({"where": [clause("count", "in", values(0))]})
            )),
            ErrorCode::InputInvalid
        );

        let order = json!([{"field": "title"}, {"field": "hours"}, {"field": "count"}]);
        assert!(list(&table, json!({"orderBy": order})).is_ok());
        let order =
            json!([{"field": "title"}, {"field": "hours"}, {"field": "count"}, {"field": "note"}]);
        assert_eq!(
            code(list(&table, json!({"orderBy": order}))),
            ErrorCode::ResourceLimit
        );

        let select =
            |n: usize| Value::Array((0..n).map(|i| json!(format!("c{}", i % 50))).collect());
        let query = list(&wide_table, json!({"select": select(50)})).unwrap();
        run(
            &connection,
            &list_statement(&wide_table, &query, "a", SECRET).unwrap().0,
        );
        assert_eq!(
            code(list(&wide_table, json!({"select": select(51)}))),
            ErrorCode::ResourceLimit
        );

        assert_eq!(list(&table, json!({})).unwrap().limit, DEFAULT_LIMIT);
        assert_eq!(list(&table, json!({"limit": 200})).unwrap().limit, 200);
        assert_eq!(list(&table, json!({"limit": 1})).unwrap().limit, 1);
        for limit in [
            json!(201),
            json!(0),
            json!(-1),
            json!(1e9),
            json!(1.5),
            json!("10"),
            json!(null),
        ] {
            assert_eq!(
                code(list(&table, json!({"limit": limit}))),
                ErrorCode::InputInvalid,
                "{limit}"
            );
        }

        let groups = json!(["title", "hours", "count"]);
        let metric = json!([{"as": "n", "count": "id"}]);
        let query = aggregate(&table, json!({"groupBy": groups, "metrics": metric})).unwrap();
        run(
            &connection,
            &aggregate_statement(&table, &query, "a").unwrap(),
        );
        let groups = json!(["title", "hours", "count", "note"]);
        assert_eq!(
            code(aggregate(
                &table,
                json!({"groupBy": groups, "metrics": metric})
            )),
            ErrorCode::ResourceLimit
        );

        let metrics = |n: usize| {
            Value::Array(
                (0..n)
                    .map(|i| json!({"as": format!("m{i}"), "max": "count"}))
                    .collect(),
            )
        };
        let query = aggregate(&table, json!({"metrics": metrics(10)})).unwrap();
        assert_eq!(
            run(
                &connection,
                &aggregate_statement(&table, &query, "a").unwrap()
            )
            .len(),
            1
        );
        assert_eq!(
            code(aggregate(&table, json!({"metrics": metrics(11)}))),
            ErrorCode::ResourceLimit
        );
        assert_eq!(
            code(aggregate(&table, json!({"metrics": metrics(0)}))),
            ErrorCode::InputInvalid
        );
        assert_eq!(code(aggregate(&table, json!({}))), ErrorCode::InputInvalid);

        let mut values: Map<String, Value> = (0..49).map(|i| (format!("c{i}"), json!(i))).collect();
        values.insert("id".to_owned(), json!("row-1"));
        let row = insert(&connection, &wide_table, "a", Value::Object(values.clone()));
        assert_eq!(row[VERSION_COLUMN], 1);
        values.insert("c49".to_owned(), json!(49));
        assert_eq!(
            code(create_statement(&wide_table, &values, "a")),
            ErrorCode::ResourceLimit
        );
        assert_eq!(
            code(create_statement(&wide_table, &Map::new(), "a")),
            ErrorCode::InputInvalid
        );
        let changes: Map<String, Value> = (0..50).map(|i| (format!("c{i}"), json!(i))).collect();
        let statement = update_statement(&wide_table, &json!("row-1"), &changes, 1, "a").unwrap();
        assert_eq!(run(&connection, &statement)[0]["c49"], 49);
        let mut changes = changes;
        changes.insert("c0x".to_owned(), json!(0));
        assert_eq!(
            code(update_statement(
                &wide_table,
                &json!("row-1"),
                &changes,
                2,
                "a"
            )),
            ErrorCode::ResourceLimit
        );

        let pattern = "p".repeat(MAX_PATTERN_CHARS);
        assert!(
            list(
                &table,
                json!({"where": [clause("title", "contains", json!(pattern))]})
            )
            .is_ok()
        );
        let pattern = "p".repeat(MAX_PATTERN_CHARS + 1);
        assert_eq!(
            code(list(
                &table,
                json!({"where": [clause("title", "starts-with", json!(pattern))]})
            )),
            ErrorCode::ResourceLimit
        );
    }

    #[test]
    fn d1_d2_d3_only_exact_declared_names_resolve() {
        let table = items();
        let names = [
            "title\" OR 1=1--",
            "title)--",
            "[title]",
            "`title`",
            "rowid",
            "oid",
            "_rowid_",
            "main.items",
            "items.title",
            "temp.t",
            "sqlite_schema",
            "sqlite_master",
            "pragma_table_info",
            "TITLE",
            "title ",
            " title",
            "ti\u{200b}tle",
            "ｔｉｔｌｅ",
            "tıtle",
            "",
            "*",
            "_sasha_version ",
            "_SASHA_VERSION",
        ];
        for name in names {
            let cases = [
                list(&table, json!({"where": [clause(name, "eq", json!(1))]})).map(drop),
                list(&table, json!({"orderBy": [{"field": name}]})).map(drop),
                list(&table, json!({"select": [name]})).map(drop),
                aggregate(&table, json!({"groupBy": [name], "metrics": [{"as": "n", "count": "id"}]})).map(drop),
                aggregate(&table, json!({"metrics": [{"as": "n", "count": name}]})).map(drop),
                parse("create", &table, &json!({"values": {name: 1}, "idempotencyKey": "k"}).to_string()).map(drop),
                parse("update", &table, &json!({"id": 1, "changes": {name: 1}, "expectedVersion": 1, "idempotencyKey": "k"}).to_string()).map(drop),
            ];
            for result in cases {
                let error = result.expect_err(name);
                assert_eq!(error.code, ErrorCode::FieldUndeclared, "{name:?}");
                assert!(
                    error.message.contains("is not a declared column"),
                    "{}",
                    error.message
                );
            }
        }
        // A look-alike is shown escaped, so the reader sees what was sent.
        let error = list(&table, json!({"select": ["ti\u{200b}tle"]})).unwrap_err();
        assert!(error.message.contains("\\u{200b}"), "{}", error.message);
    }

    #[test]
    fn d4_operator_and_value_injection_is_refused() {
        let table = items();
        for operator in [
            "= 1 OR 1=1",
            "glob",
            "regexp",
            "match",
            "like",
            "EQ",
            "is",
            "",
        ] {
            let query = json!({"where": [clause("title", operator, json!("x"))]});
            assert_eq!(
                code(list(&table, query)),
                ErrorCode::InputInvalid,
                "{operator}"
            );
        }
        for value in [json!({"$ne": null}), json!([1]), json!([])] {
            for operator in ["eq", "neq", "lt", "contains"] {
                let query = json!({"where": [clause("title", operator, value.clone())]});
                assert_eq!(
                    code(list(&table, query)),
                    ErrorCode::InputInvalid,
                    "{operator} {value}"
                );
            }
        }
        for raw in [
            "NaN",
            "Infinity",
            "1e309",
            "9223372036854775808",
            "-9223372036854775809",
        ] {
            let request =
                format!(r#"{{"where": [{{"field": "count", "operator": "eq", "value": {raw}}}]}}"#);
            assert_eq!(
                code(parse("list", &table, &request)),
                ErrorCode::InputInvalid,
                "{raw}"
            );
        }
        assert!(
            list(
                &table,
                json!({"where": [clause("count", "eq", json!(i64::MAX))]})
            )
            .is_ok()
        );
        // A REAL column takes any finite number; only a column that is not
        // REAL refuses one beyond the integer range, and says so.
        assert!(
            list(
                &table,
                json!({"where": [clause("hours", "lt", json!(1e308))]})
            )
            .is_ok()
        );
        let create = |values: Value| {
            parse(
                "create",
                &table,
                &json!({"values": values, "idempotencyKey": "k-1"}).to_string(),
            )
        };
        assert!(create(json!({"title": "big", "hours": 1e308})).is_ok());
        let refused = create(json!({"title": "big", "count": 1e308})).unwrap_err();
        assert_eq!(refused.code, ErrorCode::InputInvalid);
        assert!(
            refused.message.contains("the column is not REAL"),
            "{}",
            refused.message
        );
        assert_eq!(
            code(list(
                &table,
                json!({"where": [clause("count", "lt", json!(null))]})
            )),
            ErrorCode::InputInvalid
        );
        assert_eq!(
            code(list(
                &table,
                json!({"where": [clause("count", "in", json!([1, null]))]})
            )),
            ErrorCode::InputInvalid
        );
        assert_eq!(
            code(list(
                &table,
                json!({"where": [clause("count", "in", json!([[1]]))]})
            )),
            ErrorCode::InputInvalid
        );
        assert_eq!(
            code(list(
                &table,
                json!({"where": [clause("title", "contains", json!(5))]})
            )),
            ErrorCode::InputInvalid
        );
        assert_eq!(
            code(list(
                &table,
                json!({"where": [{"field": "title", "operator": "eq"}]})
            )),
            ErrorCode::InputInvalid
        );

        // The classic payload is stored and matched as plain text.
        let connection = database(&[&table]);
        let payload = "');DROP TABLE items;--";
        insert(&connection, &table, "alice", json!({"title": payload}));
        for (operator, value) in [
            ("eq", payload),
            ("contains", "DROP TABLE"),
            ("starts-with", "');"),
        ] {
            let (rows, _) = list_rows(
                &connection,
                &table,
                json!({"where": [clause("title", operator, json!(value))]}),
                "alice",
            );
            assert_eq!(titles(&rows), vec![payload]);
        }
    }

    #[test]
    fn d5_like_patterns_match_literally() {
        let table = items();
        let connection = database(&[&table]);
        for title in ["a%b", "a_b", "axb", "a\\b", "%x", "_x"] {
            insert(&connection, &table, "alice", json!({"title": title}));
        }
        let cases = [
            ("contains", "%", vec!["%x", "a%b"]),
            ("contains", "_", vec!["_x", "a_b"]),
            ("contains", "\\", vec!["a\\b"]),
            ("contains", "a%b", vec!["a%b"]),
            ("contains", "a_b", vec!["a_b"]),
            ("contains", "x", vec!["%x", "_x", "axb"]),
            ("starts-with", "_", vec!["_x"]),
            ("starts-with", "%", vec!["%x"]),
            ("starts-with", "a\\", vec!["a\\b"]),
            ("starts-with", "a_", vec!["a_b"]),
            (
                "contains",
                "",
                vec!["%x", "_x", "a%b", "a\\b", "a_b", "axb"],
            ),
        ];
        for (operator, pattern, expected) in cases {
            let (rows, _) = list_rows(
                &connection,
                &table,
                json!({"where": [clause("title", operator, json!(pattern))], "orderBy": [{"field": "title"}]}),
                "alice",
            );
            assert_eq!(titles(&rows), expected, "{operator} {pattern:?}");
        }
    }

    #[test]
    fn d7_owner_field_cannot_be_filtered_sorted_grouped_or_aggregated() {
        let table = items();
        let refused = [
            list(
                &table,
                json!({"where": [clause("created_by", "neq", json!("alice"))]}),
            )
            .map(drop),
            list(
                &table,
                json!({"where": [clause("created_by", "eq", json!(null))]}),
            )
            .map(drop),
            list(&table, json!({"orderBy": [{"field": "created_by"}]})).map(drop),
            aggregate(
                &table,
                json!({"groupBy": ["created_by"], "metrics": [{"as": "n", "count": "id"}]}),
            )
            .map(drop),
            aggregate(
                &table,
                json!({"metrics": [{"as": "n", "countDistinct": "created_by"}]}),
            )
            .map(drop),
        ];
        for result in refused {
            let error = result.unwrap_err();
            assert_eq!(error.code, ErrorCode::InputInvalid);
            assert!(
                error.message.contains("created_by is the owner field"),
                "{}",
                error.message
            );
        }
        // And the counts a caller can ask for are only its own.
        let (table, connection) = seeded();
        let query = aggregate(&table, json!({"groupBy": ["title"], "metrics": [{"as": "n", "count": "id"}, {"as": "total", "sum": "hours"}]})).unwrap();
        let statement = aggregate_statement(&table, &query, "alice").unwrap();
        assert_eq!(
            statement.sql,
            "SELECT \"title\", COUNT(\"id\"), SUM(\"hours\") FROM \"items\" WHERE \"created_by\" = ? GROUP BY \"title\" ORDER BY \"title\" LIMIT ?"
        );
        let groups = run(&connection, &statement);
        assert_eq!(
            groups[0],
            json!({"title": "apple", "n": 1, "total": 1.5})
                .as_object()
                .unwrap()
                .clone()
        );
        assert_eq!(groups.len(), 3);
    }

    #[test]
    fn d8_another_owners_row_is_indistinguishable_from_a_missing_one() {
        let (table, connection) = seeded();
        let bob_row = 4;
        for id in [
            json!(bob_row),
            json!(999),
            json!(-1),
            json!("1 OR 1=1"),
            json!("4"),
        ] {
            assert!(
                run(&connection, &get_statement(&table, &id, "alice").unwrap()).is_empty(),
                "{id}"
            );
            let changes = json!({"title": "stolen"}).as_object().unwrap().clone();
            assert!(
                run(
                    &connection,
                    &update_statement(&table, &id, &changes, 1, "alice").unwrap()
                )
                .is_empty()
            );
            assert!(
                run(
                    &connection,
                    &delete_statement(&table, &id, 1, "alice").unwrap()
                )
                .is_empty()
            );
        }
        let row = run(
            &connection,
            &get_statement(&table, &json!(bob_row), "bob").unwrap(),
        );
        assert_eq!(row[0]["title"], "apple");
        assert_eq!(row[0][VERSION_COLUMN], 1);
        // A string id on an INTEGER key follows affinity: "1" is row 1.
        assert_eq!(
            run(
                &connection,
                &get_statement(&table, &json!("1"), "alice").unwrap()
            )
            .len(),
            1
        );
        for id in [
            json!(null),
            json!(true),
            json!(1.5),
            json!([1]),
            json!({"$gt": 0}),
        ] {
            assert_eq!(
                code(get_statement(&table, &id, "alice")),
                ErrorCode::InputInvalid,
                "{id}"
            );
        }
    }

    #[test]
    fn d9_mass_assignment_is_refused() {
        let table = items();
        for (field, expected) in [
            ("created_by", ErrorCode::InputInvalid),
            ("id", ErrorCode::InputInvalid),
            (VERSION_COLUMN, ErrorCode::InputInvalid),
            ("version", ErrorCode::FieldUndeclared),
            ("created_at", ErrorCode::FieldUndeclared),
        ] {
            let values = json!({"title": "t", field: "x"})
                .as_object()
                .unwrap()
                .clone();
            assert_eq!(
                code(create_statement(&table, &values, "alice")),
                expected,
                "{field}"
            );
            assert_eq!(
                code(update_statement(&table, &json!(1), &values, 1, "alice")),
                expected,
                "{field}"
            );
        }
        // A TEXT id must be given on create, and can never be changed.
        let wide_table = wide();
        let values = json!({"c0": 1}).as_object().unwrap().clone();
        assert_eq!(
            code(create_statement(&wide_table, &values, "a")),
            ErrorCode::InputInvalid
        );
        let values = json!({"id": 7, "c0": 1}).as_object().unwrap().clone();
        assert_eq!(
            code(create_statement(&wide_table, &values, "a")),
            ErrorCode::InputInvalid
        );
        let values = json!({"id": "k", "c0": 1}).as_object().unwrap().clone();
        assert!(create_statement(&wide_table, &values, "a").is_ok());
        assert_eq!(
            code(update_statement(&wide_table, &json!("k"), &values, 1, "a")),
            ErrorCode::InputInvalid
        );
        // A required column must be given.
        let values = json!({"note": "n"}).as_object().unwrap().clone();
        assert_eq!(
            code(create_statement(&table, &values, "alice")),
            ErrorCode::InputInvalid
        );
        // Create stamps the owner and version 1, whatever the caller hoped.
        let connection = database(&[&table]);
        let row = insert(&connection, &table, "alice", json!({"title": "t"}));
        assert_eq!(row["created_by"], "alice");
        assert_eq!(row[VERSION_COLUMN], 1);
    }

    #[test]
    fn versions_gate_update_and_delete() {
        let (table, connection) = seeded();
        let changes = json!({"title": "apricot", "hours": null, "count": true})
            .as_object()
            .unwrap()
            .clone();
        assert!(
            run(
                &connection,
                &update_statement(&table, &json!(1), &changes, 2, "alice").unwrap()
            )
            .is_empty()
        );
        let row = run(
            &connection,
            &update_statement(&table, &json!(1), &changes, 1, "alice").unwrap(),
        );
        assert_eq!(row[0]["title"], "apricot");
        assert_eq!(row[0]["count"], 1);
        assert_eq!(row[0]["hours"], Value::Null);
        assert_eq!(row[0][VERSION_COLUMN], 2);
        assert!(
            run(
                &connection,
                &delete_statement(&table, &json!(1), 1, "alice").unwrap()
            )
            .is_empty()
        );
        let deleted = run(
            &connection,
            &delete_statement(&table, &json!(1), 2, "alice").unwrap(),
        );
        assert_eq!(deleted[0]["title"], "apricot");
        assert!(
            run(
                &connection,
                &get_statement(&table, &json!(1), "alice").unwrap()
            )
            .is_empty()
        );
        for version in [0, -1] {
            assert_eq!(
                code(delete_statement(&table, &json!(1), version, "alice")),
                ErrorCode::InputInvalid
            );
            assert_eq!(
                code(update_statement(
                    &table,
                    &json!(1),
                    &changes,
                    version,
                    "alice"
                )),
                ErrorCode::InputInvalid
            );
        }
        let missing =
            json!({"id": 1, "changes": {"title": "x"}, "idempotencyKey": "k"}).to_string();
        assert_eq!(
            code(parse("update", &table, &missing)),
            ErrorCode::InputInvalid
        );
        let missing = json!({"id": 1, "idempotencyKey": "k"}).to_string();
        assert_eq!(
            code(parse("delete", &table, &missing)),
            ErrorCode::InputInvalid
        );
        let stale = json!({"id": 1, "expectedVersion": 1.5, "idempotencyKey": "k"}).to_string();
        assert_eq!(
            code(parse("delete", &table, &stale)),
            ErrorCode::InputInvalid
        );
    }

    #[test]
    fn requests_parse_and_unknown_keys_are_refused_anywhere() {
        let table = items();
        let request = json!({"id": 3, "changes": {"title": "x"}, "expectedVersion": 2, "idempotencyKey": "key-1"});
        assert_eq!(
            parse("update", &table, &request.to_string()).unwrap(),
            Request::Update {
                id: json!(3),
                changes: json!({"title": "x"}).as_object().unwrap().clone(),
                expected_version: 2,
                idempotency_key: "key-1".to_owned(),
            }
        );
        assert!(matches!(
            parse("get", &table, r#"{"id": 3}"#).unwrap(),
            Request::Get { .. }
        ));
        assert!(matches!(
            parse(
                "create",
                &table,
                r#"{"values": {"title": "t"}, "idempotencyKey": "k"}"#
            )
            .unwrap(),
            Request::Create { .. }
        ));
        assert!(matches!(
            parse(
                "delete",
                &table,
                r#"{"id": 3, "expectedVersion": 1, "idempotencyKey": "k"}"#
            )
            .unwrap(),
            Request::Delete { .. }
        ));
        let refused = [
            ("list", json!({"offset": -5})),
            (
                "list",
                json!({"where": [{"field": "title", "operator": "eq", "value": 1, "or": true}]}),
            ),
            (
                "list",
                json!({"orderBy": [{"field": "title", "nulls": "first"}]}),
            ),
            (
                "list",
                json!({"orderBy": [{"field": "title", "direction": "up"}]}),
            ),
            ("get", json!({"id": 1, "table": "other"})),
            (
                "aggregate",
                json!({"metrics": [{"as": "n", "count": "id", "filter": 1}]}),
            ),
            (
                "aggregate",
                json!({"metrics": [{"as": "n", "count": "id"}], "having": 1}),
            ),
            (
                "create",
                json!({"values": {"title": "t"}, "idempotencyKey": "k", "upsert": true}),
            ),
            ("create", json!({"values": {"title": "t"}})),
            (
                "create",
                json!({"values": {"title": "t"}, "idempotencyKey": ""}),
            ),
            ("create", json!({"values": [], "idempotencyKey": "k"})),
            (
                "delete",
                json!({"id": 1, "expectedVersion": 1, "idempotencyKey": "k", "cascade": true}),
            ),
            ("drop", json!({})),
            ("list", json!([])),
        ];
        for (operation, request) in refused {
            assert_eq!(
                code(parse(operation, &table, &request.to_string())),
                ErrorCode::InputInvalid,
                "{operation} {request}"
            );
        }
        assert_eq!(code(parse("list", &table, "{")), ErrorCode::InputInvalid);
    }

    #[test]
    fn d10_cursors_page_through_everything_and_are_bound_to_actor_and_query() {
        let table = items();
        let connection = database(&[&table]);
        // Ties and NULLs in the sort keys, for both directions.
        for i in 0..23 {
            let count = if i % 4 == 0 {
                Value::Null
            } else {
                json!(i % 3)
            };
            let note = if i % 5 == 0 {
                Value::Null
            } else {
                json!(format!("n{}", i % 2))
            };
            insert(
                &connection,
                &table,
                "alice",
                json!({"title": format!("t{i}"), "count": count, "note": note}),
            );
            insert(&connection, &table, "bob", json!({"title": "b"}));
        }
        for order in [
            json!([]),
            json!([{"field": "count"}]),
            json!([{"field": "count", "direction": "desc"}]),
            json!([{"field": "note", "direction": "desc"}, {"field": "count"}]),
            json!([{"field": "note"}, {"field": "count", "direction": "desc"}, {"field": "id", "direction": "desc"}]),
        ] {
            let (all, next) = list_rows(
                &connection,
                &table,
                json!({"orderBy": order, "limit": 200}),
                "alice",
            );
            assert!(next.is_none());
            assert_eq!(all.len(), 23);
            let mut paged = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let mut query = json!({"orderBy": order, "limit": 4, "select": ["title"]});
                if let Some(cursor) = &cursor {
                    query["cursor"] = json!(cursor);
                }
                let (rows, next) = list_rows(&connection, &table, query, "alice");
                assert!(rows.len() <= 4);
                paged.extend(rows.into_iter().map(|r| r["id"].clone()));
                match next {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            let expected: Vec<Value> = all.iter().map(|r| r["id"].clone()).collect();
            assert_eq!(paged, expected, "{order}");
        }

        let query = json!({"orderBy": [{"field": "title"}], "limit": 2});
        let (_, cursor) = list_rows(&connection, &table, query.clone(), "alice");
        let cursor = cursor.unwrap();
        let with = |query: &Value, cursor: &str| {
            let mut query = list(&table, query.clone()).unwrap();
            query.cursor = Some(cursor.to_owned());
            query
        };
        // The same query with another page size is still the same query.
        let mut resized = query.clone();
        resized["limit"] = json!(7);
        assert!(list_statement(&table, &with(&resized, &cursor), "alice", SECRET).is_ok());
        // Another actor, query, table or secret: refused.
        assert_eq!(
            code(list_statement(
                &table,
                &with(&query, &cursor),
                "bob",
                SECRET
            )),
            ErrorCode::InputInvalid
        );
        let other = json!({"orderBy": [{"field": "title", "direction": "desc"}], "limit": 2});
        assert_eq!(
            code(list_statement(
                &table,
                &with(&other, &cursor),
                "alice",
                SECRET
            )),
            ErrorCode::InputInvalid
        );
        let other =
            json!({"orderBy": [{"field": "title"}], "where": [clause("count", "gt", json!(0))]});
        assert_eq!(
            code(list_statement(
                &table,
                &with(&other, &cursor),
                "alice",
                SECRET
            )),
            ErrorCode::InputInvalid
        );
        assert_eq!(
            code(list_statement(
                &table,
                &with(&query, &cursor),
                "alice",
                b"another-secret-of-16+"
            )),
            ErrorCode::InputInvalid
        );
        let mut renamed = table.clone();
        renamed.name = "other".to_owned();
        assert_eq!(
            code(list_statement(
                &renamed,
                &with(&query, &cursor),
                "alice",
                SECRET
            )),
            ErrorCode::InputInvalid
        );
        // Tampering with either half, or garbage.
        let (payload, mac) = cursor.split_once('.').unwrap();
        let forged_payload = URL_SAFE_NO_PAD.encode(r#"[["t",""],["i",0]]"#);
        let mut flipped = URL_SAFE_NO_PAD.decode(mac).unwrap();
        flipped[0] ^= 1;
        for bad in [
            format!("{forged_payload}.{mac}"),
            format!("{payload}.{}", URL_SAFE_NO_PAD.encode(flipped)),
            format!("{payload}."),
            payload.to_owned(),
            "not a cursor".to_owned(),
            String::new(),
            "x".repeat(MAX_CURSOR_BYTES + 1),
        ] {
            assert_eq!(
                code(list_statement(&table, &with(&query, &bad), "alice", SECRET)),
                ErrorCode::InputInvalid,
                "{bad}"
            );
        }
        assert_eq!(
            code(list_statement(
                &table,
                &list(&table, json!({})).unwrap(),
                "alice",
                b"short"
            )),
            ErrorCode::Internal
        );
    }

    #[test]
    fn d15_aggregate_injection_is_refused() {
        let table = items();
        let cases = [
            json!({"metrics": [{"as": "n", "count(*)),(select": "id"}]}),
            json!({"metrics": [{"as": "n", "COUNT": "id"}]}),
            json!({"metrics": [{"as": "n", "count": "id", "sum": "hours"}]}),
            json!({"metrics": [{"as": "n"}]}),
            json!({"metrics": [{"count": "id"}]}),
            json!({"metrics": [{"as": "n", "sum": "title"}]}),
            json!({"metrics": [{"as": "n", "avg": "note"}]}),
            json!({"metrics": [{"as": "n", "count": {"expr": "1"}}]}),
            json!({"groupBy": [{"expr": "title || 1"}], "metrics": [{"as": "n", "count": "id"}]}),
            json!({"groupBy": "title", "metrics": [{"as": "n", "count": "id"}]}),
            json!({"groupBy": ["title"], "metrics": [{"as": "title", "count": "id"}]}),
            json!({"groupBy": ["title", "title"], "metrics": [{"as": "n", "count": "id"}]}),
            json!({"metrics": [{"as": "n", "count": "id"}, {"as": "n", "max": "count"}]}),
            json!({"metrics": [{"as": "n) FROM x; --", "count": "id"}]}),
            json!({"metrics": [{"as": "1n", "count": "id"}]}),
            json!({"metrics": [{"as": "", "count": "id"}]}),
        ];
        for query in cases {
            assert_eq!(
                code(aggregate(&table, query.clone())),
                ErrorCode::InputInvalid,
                "{query}"
            );
        }
        // Every operation on its permitted columns, ungrouped: one row.
        let (table, connection) = seeded();
        let query = aggregate(&table, json!({"where": [clause("count", "gte", json!(10))], "metrics": [
            {"as": "total", "sum": "count"}, {"as": "mean", "avg": "hours"}, {"as": "low", "min": "title"},
            {"as": "high", "max": "title"}, {"as": "n", "count": "hours"}, {"as": "kinds", "countDistinct": "count"},
            {"as": "v", "sum": VERSION_COLUMN},
        ]})).unwrap();
        let rows = run(
            &connection,
            &aggregate_statement(&table, &query, "alice").unwrap(),
        );
        assert_eq!(
            Value::Object(rows[0].clone()),
            json!({"total": 30, "mean": 1.75, "low": "apple", "high": "banana", "n": 2, "kinds": 2, "v": 2})
        );
        let query = aggregate(&table, json!({"where": [clause("title", "eq", json!("none"))], "metrics": [{"as": "n", "count": "id"}]})).unwrap();
        assert_eq!(
            run(
                &connection,
                &aggregate_statement(&table, &query, "alice").unwrap()
            )[0]["n"],
            0
        );
        assert!(check_group_count(MAX_GROUPS).is_ok());
        assert_eq!(
            code(check_group_count(MAX_GROUPS + 1)),
            ErrorCode::ResourceLimit
        );
    }

    #[test]
    fn d16_null_and_type_semantics_are_fixed() {
        let (table, connection) = seeded();
        let rows = |condition: Value| {
            let (rows, _) = list_rows(
                &connection,
                &table,
                json!({"where": [condition], "orderBy": [{"field": "title"}]}),
                "alice",
            );
            titles(&rows)
        };
        assert_eq!(rows(clause("note", "eq", json!(null))), vec!["apple"]);
        // neq is the complement of eq: the NULL row is "not x".
        assert_eq!(
            rows(clause("note", "neq", json!("x"))),
            vec!["apple", "cherry"]
        );
        assert_eq!(rows(clause("note", "eq", json!("x"))), vec!["banana"]);
        // Ordering comparisons and in never match NULL.
        assert_eq!(
            rows(clause("count", "lt", json!(100))),
            vec!["apple", "banana"]
        );
        assert_eq!(
            rows(clause("count", "in", json!([10, 20]))),
            vec!["apple", "banana"]
        );
        assert!(rows(clause("note", "contains", json!(""))).len() == 2);
        // Affinity: the string "10" on an INTEGER column is the number 10.
        assert_eq!(rows(clause("count", "eq", json!("10"))), vec!["apple"]);
        assert_eq!(rows(clause("count", "gt", json!("10"))), vec!["banana"]);
        assert_eq!(
            rows(clause("count", "neq", json!("10"))),
            vec!["banana", "cherry"]
        );
        // LIKE reads a number as its text.
        assert_eq!(
            rows(clause("count", "contains", json!("0"))),
            vec!["apple", "banana"]
        );
        // Booleans are 0/1; LIKE ignores ASCII case.
        assert!(rows(clause("count", "eq", json!(true))).is_empty());
        assert_eq!(
            rows(clause("title", "starts-with", json!("APP"))),
            vec!["apple"]
        );
        // NULL sorts first ascending.
        let (sorted, _) = list_rows(
            &connection,
            &table,
            json!({"orderBy": [{"field": "count"}]}),
            "alice",
        );
        assert_eq!(titles(&sorted), vec!["cherry", "apple", "banana"]);
    }

    #[test]
    fn owner_term_sits_outside_the_user_predicate() {
        let table = items();
        let query = list(&table, json!({"where": [clause("title", "eq", json!("a")), clause("count", "in", json!([1, 2]))]})).unwrap();
        let (statement, _) = list_statement(&table, &query, "alice", SECRET).unwrap();
        assert_eq!(
            statement.sql,
            "SELECT \"id\", \"title\", \"hours\", \"count\", \"note\", \"created_by\", \"_sasha_version\" FROM \"items\" WHERE (\"title\" = ? AND \"count\" IN (?, ?)) AND \"created_by\" = ? ORDER BY \"id\" ASC LIMIT ?"
        );
        assert_eq!(statement.params.last(), Some(&SqlValue::Integer(51)));
        assert_eq!(statement.params[3], SqlValue::Text("alice".to_owned()));
        let statement = update_statement(
            &table,
            &json!(1),
            json!({"title": "t"}).as_object().unwrap(),
            3,
            "alice",
        )
        .unwrap();
        assert_eq!(
            statement.sql,
            "UPDATE \"items\" SET \"title\" = ?, \"_sasha_version\" = \"_sasha_version\" + 1 WHERE \"id\" = ? AND \"_sasha_version\" = ? AND \"created_by\" = ? RETURNING \"id\", \"title\", \"hours\", \"count\", \"note\", \"created_by\", \"_sasha_version\""
        );
        // An owner table that lost its owner field builds nothing.
        let mut broken = table.clone();
        broken.owner_field = None;
        assert_eq!(
            code(get_statement(&broken, &json!(1), "alice")),
            ErrorCode::Internal
        );
        broken.owner_field = Some("nobody".to_owned());
        assert_eq!(
            code(get_statement(&broken, &json!(1), "alice")),
            ErrorCode::Internal
        );
    }

    #[test]
    fn platform_column_names_agree_with_the_package() {
        assert_eq!(VERSION_COLUMN, sasha_package::sql::VERSION_COLUMN);
        assert_eq!(ID_COLUMN, sasha_package::sql::ID_COLUMN);
    }

    #[test]
    fn table_spec_follows_the_declaration() {
        let table = Table {
            name: "entries".to_owned(),
            columns: items().columns,
            unique: Vec::new(),
            foreign_keys: Vec::new(),
            strict: false,
            without_rowid: false,
        };
        let owner = TableDeclaration {
            access: Access::Owner,
            owner_field: Some("created_by".to_owned()),
        };
        let spec = TableSpec::new(&table, &owner);
        assert_eq!(spec.owner_field.as_deref(), Some("created_by"));
        assert_eq!(spec.name, "entries");
        let shared = TableDeclaration {
            access: Access::Shared,
            owner_field: None,
        };
        assert_eq!(TableSpec::new(&table, &shared).owner_field, None);
    }

    #[test]
    fn hmac_matches_rfc_4231_and_request_hash_is_canonical() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let long_key = [0xaa_u8; 131];
        let mac = hmac_sha256(
            &long_key,
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        assert_eq!(
            hex::encode(mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": "é"}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a": {"x": "é", "y": [1, 2]}, "b": 1}"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"a":{"x":"é","y":[1,2]},"b":1}"#);
        assert_eq!(
            request_hash("create", "items", &a),
            request_hash("create", "items", &b)
        );
        assert_ne!(
            request_hash("create", "items", &a),
            request_hash("update", "items", &a)
        );
        assert_ne!(
            request_hash("create", "items", &a),
            request_hash("create", "other", &a)
        );
        assert_eq!(request_hash("create", "items", &a).len(), 64);
    }

    // -- owner-scope fuzzing (catalogue D6) ---------------------------------

    fn value_strategy() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            Just(json!("")),
            Just(json!("alice")),
            Just(json!("bob")),
            Just(json!("%")),
            Just(json!("_")),
            Just(json!("' OR 1=1 --")),
            "[a-c%_]{0,3}".prop_map(Value::from),
            (-3i64..30).prop_map(Value::from),
            (-3.0f64..30.0).prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
        ]
    }

    const FIELDS: [&str; 6] = ["id", "title", "hours", "count", "note", VERSION_COLUMN];
    const OPERATORS: [&str; 9] = [
        "eq",
        "neq",
        "lt",
        "lte",
        "gt",
        "gte",
        "in",
        "contains",
        "starts-with",
    ];

    fn condition_strategy() -> impl Strategy<Value = Value> {
        (
            0..FIELDS.len(),
            0..OPERATORS.len(),
            value_strategy(),
            proptest::collection::vec(value_strategy(), 0..4),
        )
            .prop_map(|(field, operator, value, values)| {
                let value = if OPERATORS[operator] == "in" {
                    Value::Array(values)
                } else {
                    value
                };
                clause(FIELDS[field], OPERATORS[operator], value)
            })
    }

    fn order_strategy() -> impl Strategy<Value = Value> {
        proptest::collection::vec((0..FIELDS.len(), any::<bool>()), 0..4).prop_map(|keys| {
            Value::Array(
                keys.into_iter()
                    .map(|(f, d)| json!({"field": FIELDS[f], "direction": if d { "desc" } else { "asc" }}))
                    .collect(),
            )
        })
    }

    fn fuzz_rows(
        connection: &Connection,
        table: &TableSpec,
        seed: &[(String, Value, Value, Value)],
    ) {
        for (actor, title, count, note) in seed {
            insert(
                connection,
                table,
                actor,
                json!({"title": title, "count": count, "note": note, "hours": count}),
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn requests_as_alice_never_see_bobs_rows(
            seed in proptest::collection::vec(
                (prop_oneof![Just("alice".to_owned()), Just("bob".to_owned())],
                 "[a-c%_]{0,3}".prop_map(Value::from),
                 prop_oneof![Just(Value::Null), (-3i64..30).prop_map(Value::from)],
                 prop_oneof![Just(Value::Null), Just(json!("")), "[a-c%_]{0,3}".prop_map(Value::from)]),
                1..16),
            conditions in proptest::collection::vec(condition_strategy(), 0..4),
            order in order_strategy(),
            limit in 1u32..6,
            group in proptest::collection::vec(0..FIELDS.len(), 0..3),
            probe_id in 0i64..20,
        ) {
            let table = items();
            // The same statements over A+B and over A alone must agree, and no
            // row of B may ever come back.
            let both = database(&[&table]);
            fuzz_rows(&both, &table, &seed);
            let alone = database(&[&table]);
            // Same ids: insert B's rows too, then remove them.
            fuzz_rows(&alone, &table, &seed);
            alone.execute("DELETE FROM items WHERE created_by = 'bob'", []).unwrap();

            let query = json!({"where": conditions, "orderBy": order, "limit": limit, "select": ["title", "created_by"]});
            if let Ok(query) = list(&table, query.clone()) {
                let mut cursor_query = query.clone();
                // Walk every page on both databases.
                for _ in 0..40 {
                    let (statement, plan) = list_statement(&table, &cursor_query, "alice", SECRET).unwrap();
                    // The owner term is top level: every other part is parenthesised.
                    prop_assert!(statement.sql.contains(" \"created_by\" = ? ORDER BY "));
                    let (page_both, next_both) = plan.finish_page(run(&both, &statement), SECRET);
                    let (page_alone, next_alone) = plan.finish_page(run(&alone, &statement), SECRET);
                    prop_assert!(page_both.iter().all(|r| r["created_by"] == "alice"));
                    prop_assert_eq!(&page_both, &page_alone);
                    prop_assert_eq!(&next_both, &next_alone);
                    match next_both {
                        Some(next) => cursor_query.cursor = Some(next),
                        None => break,
                    }
                }
            }

            let mut groups: Vec<&str> = group.iter().map(|g| FIELDS[*g]).collect();
            groups.dedup();
            let metrics = json!([{"as": "n", "count": "id"}, {"as": "total", "sum": "count"}, {"as": "top", "max": "title"}]);
            if let Ok(query) = aggregate(&table, json!({"where": conditions_of(&query), "groupBy": groups, "metrics": metrics})) {
                let statement = aggregate_statement(&table, &query, "alice").unwrap();
                prop_assert!(statement.sql.contains(" \"created_by\" = ?"));
                prop_assert!(!statement.sql.contains("\"created_by\" = ?)"));
                prop_assert_eq!(run(&both, &statement), run(&alone, &statement));
            }

            let get = get_statement(&table, &json!(probe_id), "alice").unwrap();
            let got = run(&both, &get);
            prop_assert!(got.iter().all(|r| r["created_by"] == "alice"));
            prop_assert_eq!(got, run(&alone, &get));
        }
    }

    fn conditions_of(query: &Value) -> Value {
        query["where"].clone()
    }
}
