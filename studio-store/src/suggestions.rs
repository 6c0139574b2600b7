//! Improvement suggestions sent by models through the MCP tool
//! `suggestImprovement`, kept for admins (`sasha admin suggestions`).
//!
//! The store keeps what it is given and enforces only what needs the
//! database: the user must exist, and a user records at most
//! [`MAX_SUGGESTIONS_PER_DAY`] suggestions in any rolling
//! [`SUGGESTION_WINDOW_SECONDS`] (counted and inserted in one immediate
//! transaction, so racing calls cannot exceed the cap). Whether a suggestion's
//! text is acceptable (no credentials, paths, source code or records) is
//! decided before it gets here, by studio-core's `suggestions::parse`; every caller
//! that takes a suggestion from outside must go through it.
//!
//! What it must not do: log a suggestion's text, or change a stored one.

use std::fmt;
use std::str::FromStr;

use crate::db::{OptionalExtension as _, Sql};
use serde::{Deserialize, Serialize};

use super::{ParseEnumError, Store, StoreError};

/// A user records at most this many suggestions in any
/// [`SUGGESTION_WINDOW_SECONDS`].
pub const MAX_SUGGESTIONS_PER_DAY: i64 = 50;
/// The rolling window of the per-user cap: 24 hours.
pub const SUGGESTION_WINDOW_SECONDS: i64 = 24 * 60 * 60;

wire_enum! {
    /// What a suggestion is about.
    SuggestionKind, "suggestion kind", "bug, docs, feature or friction" {
        /// Something does not work as documented.
        Bug => "bug",
        /// The documentation is missing, wrong or unclear.
        Docs => "docs",
        /// Something cannot be done at all.
        Feature => "feature",
        /// Something can be done, but only awkwardly.
        Friction => "friction",
    }
}

wire_enum! {
    /// How much the problem hurts, in the suggester's judgement.
    SuggestionSeverity, "severity", "low, medium or high" {
        Low => "low",
        Medium => "medium",
        High => "high",
    }
}

/// Optional pointers that locate a suggestion without free text. Stored as
/// JSON; absent keys are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SuggestionMetadata {
    /// The app the suggestion is about (a kebab-case app id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_id: Option<String>,
    /// The MCP tool the suggestion is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// An `APP_*` error code the suggester met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// The diagnostic id of that error (a lowercase UUID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostic_id: Option<String>,
}

impl SuggestionMetadata {
    /// Whether no key is set (stored as SQL NULL then).
    pub fn is_empty(&self) -> bool {
        *self == SuggestionMetadata::default()
    }
}

/// A suggestion to record. Its text has already passed the shape checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suggestion {
    pub kind: SuggestionKind,
    pub severity: SuggestionSeverity,
    /// One line, 10–300 characters.
    pub summary: String,
    /// Optional longer text, at most 2048 bytes.
    pub detail: Option<String>,
    pub metadata: SuggestionMetadata,
}

/// A recorded suggestion, as admins read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredSuggestion {
    /// A UUID v7.
    pub id: String,
    /// Unix seconds.
    pub created_at: i64,
    pub user_id: String,
    pub username: String,
    pub kind: SuggestionKind,
    pub severity: SuggestionSeverity,
    pub summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(skip_serializing_if = "SuggestionMetadata::is_empty")]
    pub metadata: SuggestionMetadata,
}

/// Why a suggestion was not recorded. Messages are safe to show the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SuggestionRefusal {
    /// The user already recorded [`MAX_SUGGESTIONS_PER_DAY`] suggestions in
    /// the last [`SUGGESTION_WINDOW_SECONDS`].
    #[error("too many suggestions: at most {limit} per user in any {window_hours} hours")]
    TooMany { limit: i64, window_hours: i64 },
    /// The user no longer exists.
    #[error("no such user")]
    UnknownUser,
}

/// A refusal inside a successful store call; the outer error is a fault.
pub type SuggestionResult<T> = Result<Result<T, SuggestionRefusal>, StoreError>;

impl Store {
    /// Records `suggestion` from `user_id` and returns its id (a UUID v7),
    /// unless the user has recorded [`MAX_SUGGESTIONS_PER_DAY`] in the last
    /// [`SUGGESTION_WINDOW_SECONDS`].
    pub fn record_suggestion(
        &self,
        user_id: &str,
        suggestion: &Suggestion,
    ) -> SuggestionResult<String> {
        let metadata_json = if suggestion.metadata.is_empty() {
            None
        } else {
            Some(
                serde_json::to_string(&suggestion.metadata)
                    .map_err(|error| StoreError::Database(error.to_string()))?,
            )
        };
        let now = self.now();
        let id = uuid::Uuid::now_v7().to_string();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let user_known = transaction
            .query_row("SELECT 1 FROM users WHERE id = ?1", [user_id], |_| Ok(()))
            .optional()?
            .is_some();
        if !user_known {
            return Ok(Err(SuggestionRefusal::UnknownUser));
        }
        // A count of stored rows, not a throttle cell like the sign-in and
        // registration throttles (`throttles.rs`): this cap is a quota over
        // a rolling day of what is stored, decided in the transaction that
        // inserts, where a rate limiter would refill with time whatever was
        // kept.
        let recent: i64 = transaction.query_row(
            "SELECT count(*) FROM suggestions WHERE user_id = ?1 AND created_at > ?2",
            (user_id, now.saturating_sub(SUGGESTION_WINDOW_SECONDS)),
            |row| row.get(0),
        )?;
        if recent >= MAX_SUGGESTIONS_PER_DAY {
            return Ok(Err(SuggestionRefusal::TooMany {
                limit: MAX_SUGGESTIONS_PER_DAY,
                window_hours: SUGGESTION_WINDOW_SECONDS / 3600,
            }));
        }
        transaction.execute(
            "INSERT INTO suggestions
             (id, user_id, kind, severity, summary, detail, metadata_json, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            (
                &id,
                user_id,
                suggestion.kind,
                suggestion.severity,
                &suggestion.summary,
                &suggestion.detail,
                &metadata_json,
                now,
            ),
        )?;
        transaction.commit()?;
        Ok(Ok(id))
    }

    /// The newest `limit` suggestions, newest first (ties in the same second
    /// by id, which is time-ordered).
    pub fn suggestions(&self, limit: u32) -> Result<Vec<StoredSuggestion>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare(
            "SELECT s.id, s.created_at, s.user_id, u.username, s.kind, s.severity,
                    s.summary, s.detail, s.metadata_json
             FROM suggestions s JOIN users u ON u.id = s.user_id
             ORDER BY s.created_at DESC, s.id DESC
             LIMIT ?1",
        )?;
        let rows = statement
            .query_map([limit], |row| {
                Ok((
                    StoredSuggestion {
                        id: row.get(0)?,
                        created_at: row.get(1)?,
                        user_id: row.get(2)?,
                        username: row.get(3)?,
                        kind: row.get(4)?,
                        severity: row.get(5)?,
                        summary: row.get(6)?,
                        detail: row.get(7)?,
                        metadata: SuggestionMetadata::default(),
                    },
                    row.get::<_, Option<String>>(8)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(mut suggestion, metadata_json)| {
                if let Some(json) = metadata_json {
                    suggestion.metadata = serde_json::from_str(&json).map_err(|error| {
                        StoreError::Database(format!("stored suggestion metadata: {error}"))
                    })?;
                }
                Ok(suggestion)
            })
            .collect()
    }
}
