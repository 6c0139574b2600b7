//! One row's entries in the audit ledger, for the `history` operation: the
//! engine reads `_sasha_audit` itself, with its own (trusted) statements,
//! since a governed statement never reaches a `_sasha_*` table. Entries are
//! found by table and row first (`_sasha_audit_by_record`), then paged by
//! entry number.
//!
//! In an owner-scoped table a row id can name rows of different owners over
//! time (SQLite gives a deleted highest id to the next row), so an owner's
//! history holds only the entries whose row images (before and after) are
//! of rows they own ([`images_owned_by`]); it never shows one owner another's
//! row under the same id.
//!
//! It must never decide who may read a row's history (the service says whose
//! entries to read) and never return more entries than asked for.

use sasha_contract::data::DataContract;
use sasha_proto::AppError;
use serde::Serialize;

use super::ledger::{ENTRY_COLUMNS, Entry, MIGRATE, entry_from_row};
use super::{DeadlineScope, Engine, Target, TrustScope, sql_error};

/// One audit entry of a row, as `history` and `activity` answer it (the
/// ledger's [`Entry`] with its images parsed).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// The ledger's entry number, increasing.
    pub entry: i64,
    /// `create`, `update` or `delete`, or `migrate` for a migration's change
    /// of the table's shape (its images are the table's columns and rows).
    pub operation: String,
    /// The user id the change was made as.
    pub actor: String,
    /// `ui`, `mcp`, `import`, `skill` or `automation`; `publish` for a
    /// migration.
    pub source: String,
    /// Who started the change and through what (`Initiator`), and the
    /// initiator's id; `None` for entries written before provenance.
    pub initiator: Option<String>,
    pub initiator_id: Option<String>,
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

impl From<Entry> for HistoryEntry {
    fn from(entry: Entry) -> HistoryEntry {
        let image = |text: Option<String>| text.and_then(|text| serde_json::from_str(&text).ok());
        HistoryEntry {
            entry: entry.id,
            operation: entry.operation,
            actor: entry.actor,
            source: entry.source,
            initiator: entry.initiator,
            initiator_id: entry.initiator_id,
            revision: entry.revision,
            action_id: entry.action,
            at: entry.at,
            before: image(entry.before),
            after: image(entry.after),
        }
    }
}

/// A page of a row's history.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    pub entries: Vec<HistoryEntry>,
}

/// The SQL condition that an audit entry's row images (`before_json`,
/// `after_json`; at least one) all hold the text bound to `user` in the JSON
/// path bound to `path` (the owner field, as `$."field"`): the entry is of a
/// row that user owns. A malformed image is never parsed (`json_valid`
/// first), and counts as someone else's.
pub(crate) fn images_owned_by(path: &str, user: &str) -> String {
    format!(
        "((before_json IS NOT NULL OR after_json IS NOT NULL) \
         AND (before_json IS NULL OR CASE WHEN json_valid(before_json) \
              THEN json_extract(before_json, {path}) END IS {user}) \
         AND (after_json IS NULL OR CASE WHEN json_valid(after_json) \
              THEN json_extract(after_json, {path}) END IS {user}))"
    )
}

/// The JSON path of owner field `field` (an identifier) in a row image.
pub(crate) fn owner_path(field: &str) -> String {
    format!("$.\"{field}\"")
}

impl Engine {
    /// The entries of row `record_id` of `table` after entry `after`, oldest
    /// first, at most `limit`, with the migrations that changed the table's
    /// shape since the row's first entry; with `owned_by` (an owner field and
    /// a user id), only the entries of rows that user owns (see
    /// [`images_owned_by`]) and no migration (whose row counts are the whole
    /// table's).
    #[allow(clippy::too_many_arguments)]
    pub fn history<'t>(
        &self,
        target: impl Into<Target<'t>>,
        contract: &DataContract,
        table: &str,
        record_id: &str,
        owned_by: Option<(&str, &str)>,
        after: Option<i64>,
        limit: u32,
    ) -> Result<History, AppError> {
        self.with_handle(target, contract, |handle| {
            let _deadline = DeadlineScope::new(&handle.guard, self.inner.deadline);
            let _trusted = TrustScope::new(&handle.guard, true);
            let conn = &handle.conn;
            let (path, user) = match owned_by {
                Some((field, user)) => (Some(owner_path(field)), Some(user)),
                None => (None, None),
            };
            let mut statement = conn
                .prepare_cached(&format!(
                    "/* engine */ SELECT {ENTRY_COLUMNS} FROM _sasha_audit \
                     WHERE table_name = ?1 AND record_id = ?2 AND id > ?3 \
                     AND (?5 IS NULL OR {}) \
                     UNION ALL SELECT {ENTRY_COLUMNS} FROM _sasha_audit \
                     WHERE table_name = ?1 AND record_id = '' AND id > ?3 \
                     AND operation = '{MIGRATE}' AND ?5 IS NULL \
                     AND id > (SELECT MIN(id) FROM _sasha_audit \
                               WHERE table_name = ?1 AND record_id = ?2) \
                     ORDER BY id LIMIT ?4",
                    images_owned_by("?5", "?6")
                ))
                .map_err(sql_error)?;
            let entries = statement
                .query_map(
                    rusqlite::params![table, record_id, after.unwrap_or(0), limit, path, user],
                    |row| entry_from_row(row).map(|(entry, _)| HistoryEntry::from(entry)),
                )
                .and_then(Iterator::collect)
                .map_err(sql_error)?;
            Ok(History { entries })
        })
    }
}
