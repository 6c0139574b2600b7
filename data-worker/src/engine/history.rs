//! One row's entries in the audit ledger, for the `history` operation: the
//! engine reads `_sasha_audit` itself, with its own (trusted) statements,
//! since a governed statement never reaches a `_sasha_*` table. Entries are
//! found by table and row first (`_sasha_audit_by_record`), then paged by
//! entry number.
//!
//! It must never decide who may read a row's history (the service does, from
//! the owner this reports) and never return more entries than asked for.

use rusqlite::OptionalExtension as _;
use sasha_contract::data::DataContract;
use sasha_proto::AppError;
use serde::Serialize;

use super::{DeadlineScope, Engine, Target, TrustScope, sql_error};

/// One audit entry of a row.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// The ledger's entry number, increasing.
    pub entry: i64,
    /// `create`, `update` or `delete`.
    pub operation: String,
    /// The user id the change was made as.
    pub actor: String,
    /// `ui`, `mcp`, `import`, `skill` or `automation`.
    pub source: String,
    /// The app revision that made it.
    pub revision: String,
    /// The declared action that made it, if any.
    pub action_id: Option<String>,
    /// When, as UTC ISO-8601 with milliseconds.
    pub at: String,
    /// The row before (`None` for a create) and after (`None` for a delete).
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
}

/// A page of a row's history and, for an owner-scoped table, the row's owner
/// as its first entry recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    pub owner: Option<String>,
    pub entries: Vec<HistoryEntry>,
}

impl Engine {
    /// The entries of row `record_id` of `table` after entry `after`, oldest
    /// first, at most `limit`; with `owner_field`, also the owner the row's
    /// first entry names (an owner field is never changed by an update).
    #[allow(clippy::too_many_arguments)]
    pub fn history<'t>(
        &self,
        target: impl Into<Target<'t>>,
        contract: &DataContract,
        table: &str,
        record_id: &str,
        owner_field: Option<&str>,
        after: Option<i64>,
        limit: u32,
    ) -> Result<History, AppError> {
        self.with_handle(target, contract, |handle| {
            let _deadline = DeadlineScope::new(&handle.guard, self.inner.deadline);
            let _trusted = TrustScope::new(&handle.guard, true);
            let conn = &handle.conn;
            let owner = match owner_field {
                None => None,
                Some(field) => conn
                    .prepare_cached(
                        "/* engine */ SELECT coalesce(after_json, before_json) FROM _sasha_audit \
                         WHERE table_name = ?1 AND record_id = ?2 ORDER BY id LIMIT 1",
                    )
                    .and_then(|mut statement| {
                        statement
                            .query_row((table, record_id), |row| row.get::<_, Option<String>>(0))
                            .optional()
                    })
                    .map_err(sql_error)?
                    .flatten()
                    .and_then(|json| serde_json::from_str::<serde_json::Value>(&json).ok())
                    .and_then(|row| row.get(field)?.as_str().map(str::to_owned)),
            };
            let parse =
                |json: Option<String>| json.and_then(|json| serde_json::from_str(&json).ok());
            let mut statement = conn
                .prepare_cached(
                    "/* engine */ SELECT id, operation, actor_id, source, app_revision, action_id, \
                     created_at, before_json, after_json FROM _sasha_audit \
                     WHERE table_name = ?1 AND record_id = ?2 AND id > ?3 ORDER BY id LIMIT ?4",
                )
                .map_err(sql_error)?;
            let entries = statement
                .query_map(
                    rusqlite::params![table, record_id, after.unwrap_or(0), limit],
                    |row| {
                        Ok(HistoryEntry {
                            entry: row.get(0)?,
                            operation: row.get(1)?,
                            actor: row.get(2)?,
                            source: row.get(3)?,
                            revision: row.get(4)?,
                            action_id: row.get(5)?,
                            at: row.get(6)?,
                            before: parse(row.get(7)?),
                            after: parse(row.get(8)?),
                        })
                    },
                )
                .and_then(Iterator::collect)
                .map_err(sql_error)?;
            Ok(History { owner, entries })
        })
    }
}
