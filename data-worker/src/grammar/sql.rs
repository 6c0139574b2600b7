//! Building SQL from the parsed, resolved requests of the data grammar: the
//! parameterised statements (the owner filter ANDed outside the caller's
//! predicate, literal LIKE matching) and the HMAC-bound keyset cursors. It
//! must never put a caller's text into SQL other than as a bound parameter or
//! a column name the grammar resolved against the declared table.

use hmac::{Hmac, KeyInit, Mac as _};

use super::*;
/// Escapes `%`, `_` and the escape character itself for `LIKE … ESCAPE '\'`.
pub(super) fn escape_like(text: &str) -> String {
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
pub(super) fn predicate(
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
pub(super) fn own<'t>(table: &'t TableSpec, name: &str) -> Result<&'t str, AppError> {
    resolve(table, name, Usage::Select)
}

/// `WHERE (<user predicate>) AND (<cursor>) AND "<owner>" = ?`: the owner term is
/// never inside a caller-shaped parenthesis, so no `OR` can escape it.
pub(super) fn where_clause(
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

pub(super) fn column_list(columns: &[String]) -> String {
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

pub(super) fn bad_cursor() -> AppError {
    invalid("the cursor is invalid or belongs to another query; start again without it")
}

/// The list query as the cursor is bound to: everything but the cursor itself and
/// the page size (a caller may change the page size between pages).
pub(super) fn canonical_list(query: &ListQuery) -> String {
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

/// HMAC-SHA256 (RFC 2104, the `hmac` crate over `sha2`) keyed with the
/// cursor secret.
fn cursor_mac(key: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length (a long one is hashed first), so
    // `new_from_slice` cannot fail.
    <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC accepts keys of any length")
}

/// The HMAC-SHA256 of `message` under `key`.
pub(super) fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac = cursor_mac(key);
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// The message a cursor's MAC covers; each part length-prefixed so that no two
/// different (actor, table, query, values) tuples share an encoding.
pub(super) fn cursor_message(plan: &CursorPlan, payload: &[u8]) -> Vec<u8> {
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
pub(super) fn open_cursor(
    plan: &CursorPlan,
    cursor: &str,
    secret: &[u8],
) -> Result<Vec<Scalar>, AppError> {
    if cursor.len() > MAX_CURSOR_BYTES {
        return Err(bad_cursor());
    }
    let (payload, mac) = cursor.split_once('.').ok_or_else(bad_cursor)?;
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| bad_cursor())?;
    let mac = URL_SAFE_NO_PAD.decode(mac).map_err(|_| bad_cursor())?;
    let mut expected = cursor_mac(secret);
    expected.update(&cursor_message(plan, &payload));
    // Constant time (`subtle` inside `hmac`): no early exit on the first
    // differing byte; a MAC of another length is refused.
    expected.verify_slice(&mac).map_err(|_| bad_cursor())?;
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
pub(super) fn after_cursor(
    keys: &[(String, bool)],
    values: &[Scalar],
    params: &mut Vec<SqlValue>,
) -> String {
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

/// Every row of `table` that `actor` may write (its own in an owner table),
/// by id, with those of the table's columns that `present` holds: the two
/// sides of a restore's comparison, the live file and a restored copy of
/// it (whose table may lack a column a later migration added; `None` for
/// the live file, which holds them all). Unbounded: the caller streams it
/// and stops at its own bound.
pub fn scan_statement(
    table: &TableSpec,
    actor: &str,
    present: Option<&[String]>,
) -> Result<Statement, AppError> {
    let owner = table.scope()?;
    let columns: Vec<String> = table
        .all_columns()
        .into_iter()
        .filter(|column| present.is_none_or(|present| present.contains(column)))
        .collect();
    let mut params = Vec::new();
    let owner_sql = scope_term(owner, actor, &mut params);
    Ok(Statement {
        sql: format!(
            "SELECT {} FROM {} WHERE 1{owner_sql} ORDER BY {}",
            column_list(&columns),
            quote(&table.name),
            quote(ID_COLUMN)
        ),
        params,
        columns,
    })
}

pub(super) fn scope_term(owner: Option<&str>, actor: &str, params: &mut Vec<SqlValue>) -> String {
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
            MetricFunction::Sum => format!("SUM({column})"),
            MetricFunction::Avg => format!("AVG({column})"),
            MetricFunction::Min => format!("MIN({column})"),
            MetricFunction::Max => format!("MAX({column})"),
            MetricFunction::Count => format!("COUNT({column})"),
            MetricFunction::CountDistinct => format!("COUNT(DISTINCT {column})"),
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
