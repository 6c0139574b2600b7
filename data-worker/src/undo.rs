//! Undo and point-in-time restore of an app's rows, computed from its audit
//! ledger: `activity` lists the changes (newest first, paged),
//! `undo-preview` says what undoing a selection of them would do, and `undo`
//! does it as one mutation. A restore "as they were at T" is the undo of
//! every change since T.
//!
//! A selection is the ledger entries of a time range (`since`, `until`),
//! optionally of one table, one initiator (and its id: a conversation, a
//! client, an undo), one actor, or listed by number. For each row they
//! touched the target is the row before the first selected change: a
//! created row is removed, an updated one put back, a deleted one recreated
//! with its id. A row changed since by anything not selected, or whose
//! stored state is not what its last ledger entry says (written behind the
//! platform's back), is a conflict: listed, and left alone unless the
//! person names it in `overwrite`.
//!
//! Applying re-computes the plan inside the write transaction and refuses
//! unless it hashes to the `planHash` the person saw; its changes are
//! written with the grammar's own statements (so the authorizer, the owner
//! filter and the version checks hold) and recorded in the ledger as the
//! undo's (initiator `undo`), so an undo is itself undone the same way. The
//! idempotency receipt makes a replay answer without applying twice.
//!
//! What it must never do: select, show or write a row of an owner-scoped
//! table that the actor does not own (the ledger query keeps only entries
//! whose images are all theirs, and every write carries the owner filter);
//! write anything when the selection is over its bounds; overwrite a
//! conflict the person did not name; or run for a caller without `manage`.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::Connection;
use rusqlite::types::Value as SqlValue;
use sasha_contract::caller::{AppAccess, Initiator};
use sasha_contract::data::{Access, DataContract, VERSION_COLUMN};
use sasha_contract::grammar::{
    DEFAULT_LIMIT, MAX_ACTIVITY, MAX_IDEMPOTENCY_KEY_CHARS, MAX_UNDO_ENTRIES, MAX_UNDO_ROWS,
};
use sasha_proto::{AppError, ErrorCode};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::engine::commit::Trusted;
use crate::engine::history::{HistoryEntry, images_owned_by, owner_path};
use crate::engine::ledger::{ENTRY_COLUMNS, Entry, MIGRATE, entry_from_row};
use crate::engine::snapshot::Snapshot;
use crate::engine::{
    AuditMeta, AuditOperation, AuditRecord, Engine, MutationOutcome, ReceiptKey, sql_error,
};
use crate::grammar::{self, TableSpec};
use crate::service::returning;

/// The app-level operations of `DataService.Execute` (no table is named;
/// `table` in the request narrows them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerOperation {
    Activity,
    UndoPreview,
    Undo,
}

impl LedgerOperation {
    pub fn parse(name: &str) -> Option<LedgerOperation> {
        match name {
            "activity" => Some(LedgerOperation::Activity),
            "undo-preview" => Some(LedgerOperation::UndoPreview),
            "undo" => Some(LedgerOperation::Undo),
            _ => None,
        }
    }
}

/// A request of the three operations; each refuses the fields it does not
/// take.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Request {
    table: Option<String>,
    /// A restore: every change after this instant (exclusive), by anyone.
    as_of: Option<String>,
    since: Option<String>,
    until: Option<String>,
    initiator: Option<Initiator>,
    initiator_id: Option<String>,
    actor: Option<String>,
    entries: Option<Vec<i64>>,
    limit: Option<u32>,
    cursor: Option<String>,
    overwrite: Option<Vec<RowRef>>,
    plan_hash: Option<String>,
    idempotency_key: Option<String>,
    /// Where a restore reads the rows as they were (with `asOf`).
    from: Option<RestoreFrom>,
}

/// Where a restore (`asOf`) reads the rows as they were: the ledger (every
/// change after the instant, undone), or a copy of the app's file restored
/// from object storage as it was then, compared row by row with the live
/// one: it also holds what the ledger never saw (rows written behind the
/// platform's back, rows older than the ledger).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestoreFrom {
    Ledger,
    Replica,
}

/// A row named by its table and id.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RowRef {
    table: String,
    id: Value,
}

fn invalid(message: impl Into<String>) -> AppError {
    AppError::new(ErrorCode::InputInvalid, message)
}

/// Who asks, and which rows of which tables they may see and write.
struct Caller<'a> {
    actor: &'a str,
    manages: bool,
    contract: &'a DataContract,
}

impl Caller<'_> {
    /// Each declared table the selection covers, with the owner field whose
    /// value must be the actor's on every image (`None`: every row). Reads
    /// (`activity`) follow the table's read rule; an undo only ever covers
    /// rows the actor may write.
    fn tables(
        &self,
        only: Option<&str>,
        writing: bool,
    ) -> Result<Vec<(String, Option<String>)>, AppError> {
        if let Some(table) = only
            && self.contract.declared_table(table).is_none()
        {
            return Err(AppError::new(ErrorCode::NotFound, "no such table"));
        }
        let mut tables = Vec::new();
        for (name, declaration) in &self.contract.tables {
            if only.is_some_and(|only| only != name) {
                continue;
            }
            if writing && !declaration.may_write(self.manages) {
                continue;
            }
            let every = !writing && declaration.reads_every_owner(self.manages);
            let owner = match declaration.access {
                Access::Owner if !every => Some(
                    declaration
                        .owner_field
                        .clone()
                        .ok_or_else(|| AppError::from_code(ErrorCode::Internal))?,
                ),
                _ => None,
            };
            tables.push((name.clone(), owner));
        }
        Ok(tables)
    }

    fn spec(&self, table: &str) -> Result<TableSpec, AppError> {
        let (declaration, live) = self
            .contract
            .declared_table(table)
            .ok_or_else(|| AppError::new(ErrorCode::NotFound, "no such table"))?;
        Ok(TableSpec::new(live, declaration))
    }
}

/// A selection with its times in the ledger's form.
struct Selection {
    table: Option<String>,
    /// Changes strictly after this instant (a restore).
    after: Option<String>,
    since: Option<String>,
    until: Option<String>,
    initiator: Option<Initiator>,
    initiator_id: Option<String>,
    actor: Option<String>,
    entries: Option<Vec<i64>>,
}

/// A time as the ledger writes it (UTC, milliseconds), or a refusal naming
/// the field.
fn ledger_time(
    conn: &Connection,
    trusted: &Trusted<'_>,
    field: &str,
    text: &str,
) -> Result<String, AppError> {
    let normal: Option<String> = if text.len() > 64 {
        None
    } else {
        trusted.read(|| {
            conn.prepare_cached("/* engine */ SELECT strftime('%Y-%m-%dT%H:%M:%fZ', ?1)")
                .and_then(|mut statement| statement.query_row([text], |row| row.get(0)))
                .map_err(sql_error)
        })?
    };
    normal.ok_or_else(|| {
        invalid(format!(
            "{field} is not a time; write it like 2026-12-07T09:30:00Z"
        ))
    })
}

fn selection(
    conn: &Connection,
    trusted: &Trusted<'_>,
    request: &Request,
) -> Result<Selection, AppError> {
    let time = |field: &str, text: &Option<String>| {
        text.as_deref()
            .map(|text| ledger_time(conn, trusted, field, text))
            .transpose()
    };
    if request.initiator_id.is_some() && request.initiator.is_none() {
        return Err(invalid("initiatorId needs the initiator it belongs to"));
    }
    if let Some(id) = &request.initiator_id
        && id.len() > sasha_contract::caller::MAX_INITIATOR_ID
    {
        return Err(invalid("initiatorId is longer than any initiator's id"));
    }
    if let Some(entries) = &request.entries
        && (entries.is_empty() || entries.len() > MAX_UNDO_ENTRIES)
    {
        return Err(invalid(format!(
            "entries lists 1 to {MAX_UNDO_ENTRIES} entry numbers"
        )));
    }
    if request.as_of.is_some()
        && (request.since.is_some()
            || request.until.is_some()
            || request.initiator.is_some()
            || request.actor.is_some()
            || request.entries.is_some())
    {
        return Err(invalid(
            "asOf restores every row (of one table, with table) as it was then: it takes no \
             since, until, initiator, actor or entries",
        ));
    }
    let selection = Selection {
        table: request.table.clone(),
        after: time("asOf", &request.as_of)?,
        since: time("since", &request.since)?,
        until: time("until", &request.until)?,
        initiator: request.initiator,
        initiator_id: request.initiator_id.clone(),
        actor: request.actor.clone(),
        entries: request.entries.clone(),
    };
    if let (Some(since), Some(until)) = (&selection.since, &selection.until)
        && since > until
    {
        return Err(invalid("since is after until"));
    }
    Ok(selection)
}

/// How [`select`] reads: oldest first, or newest first before an entry; at
/// most `limit` entries; with `rows_only`, without a migration's entries
/// (they change a table's shape, which an undo does not put back).
#[derive(Clone, Copy)]
struct Reading {
    before: Option<i64>,
    newest_first: bool,
    limit: usize,
    rows_only: bool,
}

/// The selected entries of the covered tables, as `reading` says, each of
/// rows `user` may see in an owner-scoped table.
fn select(
    conn: &Connection,
    trusted: &Trusted<'_>,
    selection: &Selection,
    tables: &[(String, Option<String>)],
    user: &str,
    reading: Reading,
) -> Result<Vec<Entry>, AppError> {
    let Reading {
        before,
        newest_first,
        limit,
        rows_only,
    } = reading;
    if tables.is_empty() {
        return Ok(Vec::new());
    }
    let mut params: Vec<SqlValue> = vec![
        selection.since.clone().into(),
        selection.until.clone().into(),
        selection.initiator.map(|i| i.as_str().to_owned()).into(),
        selection.initiator_id.clone().into(),
        selection.actor.clone().into(),
        selection
            .entries
            .as_ref()
            .map(|entries| Value::from(entries.clone()).to_string())
            .into(),
        before.into(),
        i64::try_from(limit).unwrap_or(i64::MAX).into(),
        selection.after.clone().into(),
        rows_only.into(),
    ];
    let mut terms = Vec::new();
    for (table, owner) in tables {
        params.push(table.clone().into());
        let table_mark = params.len();
        match owner {
            Some(field) => {
                params.push(owner_path(field).into());
                params.push(user.to_owned().into());
                let (path_mark, user_mark) = (params.len() - 1, params.len());
                // A migration's entry is the table's, not a row's: every
                // manager sees it (its row counts are the whole table's).
                terms.push(format!(
                    "(table_name = ?{table_mark} AND ({} OR operation = '{MIGRATE}'))",
                    images_owned_by(&format!("?{path_mark}"), &format!("?{user_mark}"))
                ));
            }
            None => terms.push(format!("table_name = ?{table_mark}")),
        }
    }
    let order = if newest_first { "DESC" } else { "ASC" };
    let sql = format!(
        "/* engine */ SELECT {ENTRY_COLUMNS} FROM _sasha_audit \
         WHERE (?1 IS NULL OR created_at >= ?1) AND (?2 IS NULL OR created_at <= ?2) \
         AND (?3 IS NULL OR initiator = ?3) AND (?4 IS NULL OR initiator_id = ?4) \
         AND (?5 IS NULL OR actor_id = ?5) \
         AND (?6 IS NULL OR id IN (SELECT value FROM json_each(?6))) \
         AND (?7 IS NULL OR id < ?7) AND (?9 IS NULL OR created_at > ?9) \
         AND (NOT ?10 OR operation <> '{MIGRATE}') \
         AND ({}) ORDER BY id {order} LIMIT ?8",
        terms.join(" OR ")
    );
    trusted.read(|| {
        let mut statement = conn.prepare_cached(&sql).map_err(sql_error)?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(params.iter()), entry_from_row)
            .map_err(sql_error)?;
        rows.map(|row| row.map(|(entry, _)| entry).map_err(sql_error))
            .collect()
    })
}

/// One ledger entry as `activity` lists it: a row's history entry with its
/// table and row.
#[derive(Debug, Serialize)]
struct ActivityEntry {
    table: String,
    record: String,
    #[serde(flatten)]
    entry: HistoryEntry,
}

fn image(text: Option<&str>) -> Option<Value> {
    text.and_then(|text| serde_json::from_str(text).ok())
}

impl From<Entry> for ActivityEntry {
    fn from(mut entry: Entry) -> ActivityEntry {
        ActivityEntry {
            table: std::mem::take(&mut entry.table),
            record: std::mem::take(&mut entry.record),
            entry: entry.into(),
        }
    }
}

fn page_limit(limit: Option<u32>) -> Result<usize, AppError> {
    match limit.unwrap_or(DEFAULT_LIMIT) {
        limit @ 1..=MAX_ACTIVITY => Ok(limit as usize),
        _ => Err(invalid(format!("limit is 1 to {MAX_ACTIVITY}"))),
    }
}

fn cursor_number(cursor: Option<&str>) -> Result<Option<i64>, AppError> {
    cursor
        .map(|text| {
            text.parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| invalid("cursor is not one this operation returned"))
        })
        .transpose()
}

/// What undoing puts in a row's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Action {
    /// A deleted row comes back with its id.
    Recreate,
    /// A changed row gets its earlier values back.
    Update,
    /// A created row goes.
    Delete,
}

/// Why a row is left alone unless the person names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Reason {
    /// Changed since by a change the selection does not hold.
    ChangedSince,
    /// Its stored state is not what the ledger last recorded: written
    /// behind the platform's back.
    ChangedOutside,
}

/// A change of someone else's that makes a row a conflict.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Since {
    entry: i64,
    operation: String,
    actor: String,
    initiator: Option<String>,
    initiator_id: Option<String>,
    at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Conflict {
    reason: Reason,
    /// For `changed-since`: the changes after the selection's, oldest first.
    changes: Vec<Since>,
}

/// One row of a plan: what it is now, what undoing makes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct RowPlan {
    table: String,
    id: Value,
    action: Action,
    current: Option<Value>,
    target: Option<Value>,
    conflict: Option<Conflict>,
    /// The version a recreated row gets: above every version the row had.
    #[serde(skip)]
    next_version: i64,
}

struct Plan {
    /// Entries selected.
    entries: usize,
    rows: Vec<RowPlan>,
    hash: String,
}

fn version_of(image: Option<&Value>) -> i64 {
    image
        .and_then(|image| image.get(VERSION_COLUMN))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Whether `current` holds every value of `expected` (columns a later
/// migration added are not in old images).
fn holds(current: &Value, expected: &Value, skip_version: bool) -> bool {
    match (current.as_object(), expected.as_object()) {
        (Some(current), Some(expected)) => expected.iter().all(|(key, value)| {
            (skip_version && key == VERSION_COLUMN) || current.get(key) == Some(value)
        }),
        _ => false,
    }
}

fn too_many(what: &str, limit: usize) -> AppError {
    AppError::new(
        ErrorCode::ResourceLimit,
        format!(
            "this covers more than {limit} {what}; narrow it (a shorter time range, one table, \
             or one initiator) and preview again"
        ),
    )
    .with_details(json!({"limit": limit}))
}

/// The row of `table` with `id` as the caller may write it now.
fn current_row(
    conn: &Connection,
    spec: &TableSpec,
    id: &Value,
    actor: &str,
) -> Result<Option<Map<String, Value>>, AppError> {
    let statement = grammar::get_statement(spec, id, actor)?;
    returning(conn, &statement)
}

/// The plan of undoing `selection` for `caller`, as of the transaction
/// `conn` is in.
fn plan(
    conn: &Connection,
    trusted: &Trusted<'_>,
    caller: &Caller<'_>,
    selection: &Selection,
) -> Result<Plan, AppError> {
    if selection.initiator == Some(Initiator::Migration) {
        return Err(invalid(
            "a publication's migration changed the shape of tables, not their rows: an undo \
             does not take it back; revert the app to an earlier revision instead",
        ));
    }
    if selection.since.is_none() && selection.entries.is_none() && selection.after.is_none() {
        return Err(invalid(
            "say which changes to undo: since when (since), which entries, or asOf for a restore",
        ));
    }
    let tables = caller.tables(selection.table.as_deref(), true)?;
    let entries = select(
        conn,
        trusted,
        selection,
        &tables,
        caller.actor,
        Reading {
            before: None,
            newest_first: false,
            limit: MAX_UNDO_ENTRIES + 1,
            rows_only: true,
        },
    )?;
    if entries.len() > MAX_UNDO_ENTRIES {
        return Err(too_many("changes", MAX_UNDO_ENTRIES));
    }
    let selected: BTreeSet<i64> = entries.iter().map(|entry| entry.id).collect();
    // Each row's first selected change, by table, then row id as text.
    let mut first: BTreeMap<(String, String), &Entry> = BTreeMap::new();
    for entry in &entries {
        first
            .entry((entry.table.clone(), entry.record.clone()))
            .or_insert(entry);
    }
    if first.len() > MAX_UNDO_ROWS {
        return Err(too_many("rows", MAX_UNDO_ROWS));
    }
    let mut rows = Vec::new();
    for ((table, record), start) in &first {
        let spec = caller.spec(table)?;
        // Every entry of the row from its first selected one on.
        let since = row_entries(conn, trusted, table, record, start.id)?;
        let target = image(start.before.as_deref());
        let last = since.last().and_then(|entry| image(entry.after.as_deref()));
        let id = target
            .as_ref()
            .or(last.as_ref())
            .and_then(|image| image.get(grammar::ID_COLUMN).cloned())
            .or_else(|| {
                image(start.after.as_deref()).and_then(|i| i.get(grammar::ID_COLUMN).cloned())
            })
            .unwrap_or_else(|| Value::String(record.clone()));
        let current = current_row(conn, &spec, &id, caller.actor)?.map(Value::Object);
        let action = match (&current, &target) {
            (None, None) => continue,
            (Some(_), None) => Action::Delete,
            (None, Some(_)) => Action::Recreate,
            (Some(now), Some(then)) if holds(now, then, true) => continue,
            (Some(_), Some(_)) => Action::Update,
        };
        // A later change to another owner's row under the same id (SQLite
        // may give a deleted id to the next row) makes a conflict too, but
        // says nothing of who made it.
        let callers_own = |entry: &Entry| match spec.owner_field.as_deref() {
            None => true,
            Some(field) => [entry.before.as_deref(), entry.after.as_deref()]
                .into_iter()
                .flatten()
                .all(|text| image(Some(text)).is_some_and(|image| image[field] == caller.actor)),
        };
        let foreign: Vec<Since> = since
            .iter()
            .filter(|entry| !selected.contains(&entry.id))
            .map(|entry| {
                if callers_own(entry) {
                    Since {
                        entry: entry.id,
                        operation: entry.operation.clone(),
                        actor: entry.actor.clone(),
                        initiator: entry.initiator.clone(),
                        initiator_id: entry.initiator_id.clone(),
                        at: entry.at.clone(),
                    }
                } else {
                    Since {
                        entry: entry.id,
                        operation: "another owner's row".into(),
                        actor: String::new(),
                        initiator: None,
                        initiator_id: None,
                        at: entry.at.clone(),
                    }
                }
            })
            .collect();
        let outside = changed_outside(current.as_ref(), last.as_ref());
        let conflict = if !foreign.is_empty() {
            Some(Conflict {
                reason: Reason::ChangedSince,
                changes: foreign,
            })
        } else if outside {
            Some(Conflict {
                reason: Reason::ChangedOutside,
                changes: Vec::new(),
            })
        } else {
            None
        };
        let next_version = highest_version(&since, current.as_ref()) + 1;
        rows.push(RowPlan {
            table: table.clone(),
            id,
            action,
            current,
            target,
            conflict,
            next_version,
        });
    }
    Ok(Plan::of(entries.len(), rows))
}

impl Plan {
    fn of(entries: usize, rows: Vec<RowPlan>) -> Plan {
        let hash = hex::encode(Sha256::digest(
            grammar::canonical_json(&serde_json::to_value(&rows).unwrap_or_default()).as_bytes(),
        ));
        Plan {
            entries,
            rows,
            hash,
        }
    }
}

/// The entries of row `record` of `table` from entry `from` on, oldest first.
fn row_entries(
    conn: &Connection,
    trusted: &Trusted<'_>,
    table: &str,
    record: &str,
    from: i64,
) -> Result<Vec<Entry>, AppError> {
    trusted.read(|| {
        let mut statement = conn
            .prepare_cached(&format!(
                "/* engine */ SELECT {ENTRY_COLUMNS} FROM _sasha_audit \
                 WHERE table_name = ?1 AND record_id = ?2 AND id >= ?3 ORDER BY id"
            ))
            .map_err(sql_error)?;
        let rows = statement
            .query_map(rusqlite::params![table, record, from], entry_from_row)
            .map_err(sql_error)?;
        rows.map(|row| row.map(|(entry, _)| entry).map_err(sql_error))
            .collect()
    })
}

/// Whether a row's stored state is not what its last ledger entry recorded
/// (`last`: that entry's after image; `None` for a delete or no entry):
/// written behind the platform's back.
fn changed_outside(current: Option<&Value>, last: Option<&Value>) -> bool {
    match (current, last) {
        (None, None) => false,
        (Some(now), Some(recorded)) => !holds(now, recorded, false),
        _ => true,
    }
}

/// The highest version a row had in `entries` or has now.
fn highest_version(entries: &[Entry], current: Option<&Value>) -> i64 {
    entries
        .iter()
        .flat_map(|entry| {
            [
                image(entry.before.as_deref()),
                image(entry.after.as_deref()),
            ]
        })
        .map(|image| version_of(image.as_ref()))
        .chain([version_of(current)])
        .max()
        .unwrap_or(0)
}

/// The plan of `selection`: from `copy` for a restore `from: "replica"`,
/// else from the ledger.
fn plan_from(
    conn: &Connection,
    trusted: &Trusted<'_>,
    caller: &Caller<'_>,
    selection: &Selection,
    copy: Option<&Snapshot>,
) -> Result<Plan, AppError> {
    match copy {
        Some(copy) => replica_plan(
            conn,
            trusted,
            caller,
            selection.table.as_deref(),
            copy.conn(),
        ),
        None => plan(conn, trusted, caller, selection),
    }
}

/// The plan of a restore `from: "replica"`: every row `caller` may write in
/// the covered tables, compared between `copy` (the app's file as it was)
/// and the live file: a row only the copy holds is recreated, one only
/// the live file holds is deleted, one that differs is put back (the
/// version aside; a column the copy lacks keeps its value). A row whose
/// stored state is not what the ledger last recorded is a conflict
/// (`changed-outside`), as in a ledger restore.
fn replica_plan(
    conn: &Connection,
    trusted: &Trusted<'_>,
    caller: &Caller<'_>,
    table: Option<&str>,
    copy: &Connection,
) -> Result<Plan, AppError> {
    let mut rows = Vec::new();
    for (table, _) in caller.tables(table, true)? {
        let spec = caller.spec(&table)?;
        let mut then: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
        if let Some(present) = copy_columns(copy, &table)? {
            let statement = grammar::scan_statement(&spec, caller.actor, Some(&present))?;
            let mut prepared = copy.prepare(&statement.sql).map_err(copy_error)?;
            let mut found = prepared
                .query(rusqlite::params_from_iter(statement.params.iter()))
                .map_err(copy_error)?;
            while let Some(row) = found.next().map_err(copy_error)? {
                let row = grammar::row_to_json(&statement.columns, row).map_err(copy_error)?;
                let id = row.get(grammar::ID_COLUMN).map(id_text).unwrap_or_default();
                then.insert(id, row);
            }
        }
        let mut differ: Vec<(Value, Option<Value>, Option<Value>)> = Vec::new();
        let statement = grammar::scan_statement(&spec, caller.actor, None)?;
        let mut prepared = crate::engine::prepare_governed(conn, &statement.sql)?;
        let mut found = prepared
            .query(rusqlite::params_from_iter(statement.params.iter()))
            .map_err(sql_error)?;
        while let Some(row) = found.next().map_err(sql_error)? {
            let now =
                Value::Object(grammar::row_to_json(&statement.columns, row).map_err(sql_error)?);
            let id = now[grammar::ID_COLUMN].clone();
            match then.remove(&id_text(&id)).map(Value::Object) {
                Some(was) if holds(&now, &was, true) => {}
                was => differ.push((id, Some(now), was)),
            }
            if rows.len() + differ.len() > MAX_UNDO_ROWS {
                return Err(too_many("rows", MAX_UNDO_ROWS));
            }
        }
        differ.extend(then.into_values().map(|was| {
            (
                was[grammar::ID_COLUMN].clone(),
                None,
                Some(Value::Object(was)),
            )
        }));
        if rows.len() + differ.len() > MAX_UNDO_ROWS {
            return Err(too_many("rows", MAX_UNDO_ROWS));
        }
        for (id, current, target) in differ {
            let record = id_text(&id);
            let entries = row_entries(conn, trusted, &table, &record, 0)?;
            let last = entries
                .last()
                .and_then(|entry| image(entry.after.as_deref()));
            let action = match (&current, &target) {
                (Some(_), None) => Action::Delete,
                (None, _) => Action::Recreate,
                (Some(_), Some(_)) => Action::Update,
            };
            let conflict = changed_outside(current.as_ref(), last.as_ref()).then(|| Conflict {
                reason: Reason::ChangedOutside,
                changes: Vec::new(),
            });
            let next_version =
                highest_version(&entries, current.as_ref()).max(version_of(target.as_ref())) + 1;
            rows.push(RowPlan {
                table: table.clone(),
                id,
                action,
                current,
                target,
                conflict,
                next_version,
            });
        }
    }
    rows.sort_by(|a, b| (&a.table, id_text(&a.id)).cmp(&(&b.table, id_text(&b.id))));
    Ok(Plan::of(0, rows))
}

/// The columns `table` has in the restored copy, or `None` when the copy
/// has no such table (it was made after the instant: it held no rows then).
fn copy_columns(copy: &Connection, table: &str) -> Result<Option<Vec<String>>, AppError> {
    let columns: Vec<String> = copy
        .prepare("SELECT name FROM pragma_table_info(?1)")
        .and_then(|mut statement| {
            statement
                .query_map([table], |row| row.get(0))?
                .collect::<rusqlite::Result<_>>()
        })
        .map_err(copy_error)?;
    Ok((!columns.is_empty()).then_some(columns))
}

/// A failure reading the restored copy: it is not what this app's file
/// looks like (its owner column gone, a table changed past recognition).
fn copy_error(error: rusqlite::Error) -> AppError {
    let app = AppError::new(
        ErrorCode::SchemaIncompatible,
        "the copy restored from object storage cannot be compared with the app's rows as they \
         are now (a table's shape changed too much since); restore the app with `sasha restore` \
         instead",
    );
    tracing::warn!(diagnostic_id = %app.diagnostic_id, %error, "undo: cannot read the restored copy");
    app
}

/// The row id as text, for matching `overwrite` and sorting.
fn id_text(id: &Value) -> String {
    match id {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Writes `row`'s target with the grammar's statements; gives back its
/// audit record.
fn put_back(
    conn: &Connection,
    caller: &Caller<'_>,
    row: &RowPlan,
) -> Result<AuditRecord, AppError> {
    let spec = caller.spec(&row.table)?;
    let moved = || {
        AppError::new(
            ErrorCode::Conflict,
            "a row changed while the undo ran; preview again",
        )
    };
    let version = version_of(row.current.as_ref());
    let (operation, before, after) = match (row.action, &row.target) {
        (Action::Delete, _) => {
            let statement = grammar::delete_statement(&spec, &row.id, version, caller.actor)?;
            let gone = returning(conn, &statement)?.ok_or_else(moved)?;
            (AuditOperation::Delete, Some(Value::Object(gone)), None)
        }
        (Action::Recreate, Some(Value::Object(target))) => {
            let statement =
                grammar::restore_statement(&spec, target, row.next_version, caller.actor)?;
            let back = returning(conn, &statement)?.ok_or_else(moved)?;
            (AuditOperation::Create, None, Some(Value::Object(back)))
        }
        (Action::Update, Some(Value::Object(target))) => {
            let owner = spec.owner_field.as_deref();
            let changes: Map<String, Value> = target
                .iter()
                .filter(|(key, _)| {
                    key.as_str() != grammar::ID_COLUMN
                        && key.as_str() != VERSION_COLUMN
                        && Some(key.as_str()) != owner
                })
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            let statement =
                grammar::update_statement(&spec, &row.id, &changes, version, caller.actor)?;
            let back = returning(conn, &statement)?.ok_or_else(moved)?;
            (
                AuditOperation::Update,
                row.current.clone(),
                Some(Value::Object(back)),
            )
        }
        _ => return Err(AppError::from_code(ErrorCode::Internal)),
    };
    let image = after.as_ref().or(before.as_ref());
    let record_id = image
        .and_then(|image| image.get(grammar::ID_COLUMN))
        .map_or_else(|| id_text(&row.id), id_text);
    Ok(AuditRecord {
        table: row.table.clone(),
        record_id,
        operation,
        before,
        after,
    })
}

/// The undo's id, recorded as the initiator id of every change it makes:
/// the same for a replay of the same key by the same actor.
fn undo_id(actor: &str, key: &str) -> String {
    let digest = Sha256::digest(format!("{actor}\n{key}").as_bytes());
    format!("undo-{}", &hex::encode(digest)[..16])
}

/// What the three operations need of the call.
pub struct Call<'a> {
    pub engine: &'a Engine,
    pub app_id: &'a str,
    pub contract: &'a std::sync::Arc<DataContract>,
    pub actor: &'a str,
    pub access: AppAccess,
    /// Where the call came from and the revision, for an undo's entries.
    pub meta: Option<AuditMeta>,
    pub request_json: &'a str,
    /// Restores a copy of the app's file as it was at an instant (the
    /// request's `asOf`, as written) from object storage, for a restore
    /// `from: "replica"`.
    pub restore_copy: &'a dyn Fn(&str) -> Result<Snapshot, AppError>,
}

/// The copy a restore `from: "replica"` reads, restored before the engine
/// is entered (the app stays live while object storage is read); `None`
/// for anything the ledger answers.
fn copy_for(
    restore_copy: &dyn Fn(&str) -> Result<Snapshot, AppError>,
    request: &Request,
) -> Result<Option<Snapshot>, AppError> {
    match (&request.as_of, request.from) {
        (Some(as_of), Some(RestoreFrom::Replica)) => restore_copy(as_of).map(Some),
        (None, Some(_)) => Err(invalid(
            "from says where a restore reads the rows as they were: it needs asOf",
        )),
        _ => Ok(None),
    }
}

/// The time of the ledger's first entry, if it has one: a restore to an
/// instant before it reads the replica for rows older than the ledger.
fn ledger_starts(conn: &Connection, trusted: &Trusted<'_>) -> Result<Option<String>, AppError> {
    trusted.read(|| {
        conn.prepare_cached("/* engine */ SELECT MIN(created_at) FROM _sasha_audit")
            .and_then(|mut statement| statement.query_row([], |row| row.get(0)))
            .map_err(sql_error)
    })
}

/// Runs one of the ledger operations.
pub fn execute(operation: LedgerOperation, call: Call<'_>) -> Result<Value, AppError> {
    if call.access != AppAccess::Manage {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            "only the app's managers may see its activity and undo its changes",
        ));
    }
    let input = grammar::read_request(call.request_json)?;
    let request: Request = serde_json::from_value(input.clone())
        .map_err(|error| invalid(format!("the request is not valid: {error}")))?;
    let refuse = |present: bool, field: &str| {
        if present {
            Err(invalid(format!("{field} is not taken by this operation")))
        } else {
            Ok(())
        }
    };
    let caller = Caller {
        actor: call.actor,
        manages: true,
        contract: call.contract,
    };
    match operation {
        LedgerOperation::Activity => {
            refuse(request.from.is_some(), "from")?;
            refuse(request.overwrite.is_some(), "overwrite")?;
            refuse(request.plan_hash.is_some(), "planHash")?;
            refuse(request.idempotency_key.is_some(), "idempotencyKey")?;
            let limit = page_limit(request.limit)?;
            let before = cursor_number(request.cursor.as_deref())?;
            call.engine
                .read_with_ledger(call.app_id, call.contract, |conn, trusted| {
                    let selection = selection(conn, trusted, &request)?;
                    let tables = caller.tables(selection.table.as_deref(), false)?;
                    let mut entries = select(
                        conn,
                        trusted,
                        &selection,
                        &tables,
                        caller.actor,
                        Reading {
                            before,
                            newest_first: true,
                            limit: limit + 1,
                            rows_only: false,
                        },
                    )?;
                    let next = (entries.len() > limit).then(|| {
                        entries.truncate(limit);
                        entries.last().map(|entry| entry.id.to_string())
                    });
                    let entries: Vec<ActivityEntry> = entries.into_iter().map(Into::into).collect();
                    Ok(json!({"entries": entries, "nextCursor": next.flatten()}))
                })
        }
        LedgerOperation::UndoPreview => {
            refuse(request.overwrite.is_some(), "overwrite")?;
            refuse(request.plan_hash.is_some(), "planHash")?;
            refuse(request.idempotency_key.is_some(), "idempotencyKey")?;
            let limit = page_limit(request.limit)?;
            let start = cursor_number(request.cursor.as_deref())?.unwrap_or(0);
            let copy = copy_for(call.restore_copy, &request)?;
            call.engine
                .read_with_ledger(call.app_id, call.contract, |conn, trusted| {
                    let selection = selection(conn, trusted, &request)?;
                    let plan = plan_from(conn, trusted, &caller, &selection, copy.as_ref())?;
                    let from = request.as_of.as_ref().map(|_| {
                        if copy.is_some() {
                            RestoreFrom::Replica
                        } else {
                            RestoreFrom::Ledger
                        }
                    });
                    let starts = match from {
                        Some(RestoreFrom::Ledger) => ledger_starts(conn, trusted)?,
                        _ => None,
                    };
                    let start = usize::try_from(start).unwrap_or(usize::MAX);
                    let page: Vec<&RowPlan> = plan.rows.iter().skip(start).take(limit).collect();
                    let next = (start + page.len() < plan.rows.len())
                        .then(|| (start + page.len()).to_string());
                    Ok(json!({
                        "planHash": plan.hash,
                        "entries": plan.entries,
                        "rows": plan.rows.len(),
                        "conflicts": plan.rows.iter().filter(|row| row.conflict.is_some()).count(),
                        "page": page,
                        "nextCursor": next,
                        "from": from,
                        "ledgerStarts": starts,
                    }))
                })
        }
        LedgerOperation::Undo => {
            refuse(request.limit.is_some(), "limit")?;
            refuse(request.cursor.is_some(), "cursor")?;
            let plan_hash = request
                .plan_hash
                .clone()
                .ok_or_else(|| invalid("planHash is the preview's: preview the undo first"))?;
            let key = request
                .idempotency_key
                .clone()
                .filter(|key| !key.is_empty() && key.chars().count() <= MAX_IDEMPOTENCY_KEY_CHARS)
                .ok_or_else(|| {
                    invalid(format!(
                        "idempotencyKey is 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters"
                    ))
                })?;
            let meta = call
                .meta
                .ok_or_else(|| invalid("the request names no initiator"))?;
            let id = undo_id(call.actor, &key);
            let meta = AuditMeta {
                initiator: Initiator::Undo,
                initiator_id: Some(id.clone()),
                action_id: None,
                ..meta
            };
            let receipt = ReceiptKey {
                actor: call.actor.to_owned(),
                operation: "undo".into(),
                key,
                input_hash: grammar::request_hash("undo", "", &input),
            };
            let overwrite: BTreeSet<(String, String)> = request
                .overwrite
                .iter()
                .flatten()
                .map(|row| (row.table.clone(), id_text(&row.id)))
                .collect();
            let copy = copy_for(call.restore_copy, &request)?;
            let contract = std::sync::Arc::clone(call.contract);
            let actor = call.actor.to_owned();
            call.engine.mutate_reading_ledger(
                call.app_id,
                call.contract,
                receipt,
                meta,
                MAX_UNDO_ROWS,
                move |conn, trusted| {
                    let caller = Caller {
                        actor: &actor,
                        manages: true,
                        contract: &contract,
                    };
                    let selection = selection(conn, trusted, &request)?;
                    let plan = plan_from(conn, trusted, &caller, &selection, copy.as_ref())?;
                    if plan.hash != plan_hash {
                        return Err(AppError::new(
                            ErrorCode::Conflict,
                            "the changes to undo moved since the preview; preview again",
                        )
                        .with_details(json!({"planHash": plan.hash})));
                    }
                    let mut audit = Vec::new();
                    let mut left = Vec::new();
                    let mut counts = BTreeMap::<&str, usize>::new();
                    for row in &plan.rows {
                        let named = overwrite.contains(&(row.table.clone(), id_text(&row.id)));
                        if let Some(conflict) = &row.conflict
                            && !named
                        {
                            left.push(json!({"table": row.table, "id": row.id, "reason": conflict.reason}));
                            continue;
                        }
                        audit.push(put_back(conn, &caller, row)?);
                        let word = match row.action {
                            Action::Recreate => "recreated",
                            Action::Update => "updated",
                            Action::Delete => "deleted",
                        };
                        *counts.entry(word).or_default() += 1;
                    }
                    let count = |word: &str| counts.get(word).copied().unwrap_or(0);
                    Ok(MutationOutcome {
                        result: json!({
                            "undoId": id,
                            "entries": plan.entries,
                            "recreated": count("recreated"),
                            "updated": count("updated"),
                            "deleted": count("deleted"),
                            "leftAlone": left,
                        }),
                        audit,
                    })
                },
            )
        }
    }
}
