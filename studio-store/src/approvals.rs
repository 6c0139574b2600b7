//! The Studio assistant's approvals (migration 16): each change a turn asks
//! its person to approve, held in the core database so a reloaded page, a
//! second tab or another device shows the same card until it is approved,
//! declined, lapses, is cancelled, or expires because Studio restarted.
//! studio-assistant runs the turns and keeps the one that waits; this module
//! records the card and who decided what first.
//!
//! An approval is decided once: its `outcome` goes from NULL to one value in
//! one `UPDATE … WHERE outcome IS NULL`, so a person's click, the turn's
//! timeout and a cancel race in the database and exactly one wins. Only its
//! own user may decide it, and only for its own conversation.
//!
//! Bounded: a user has at most one waiting approval per running turn (the
//! assistant bounds turns per user), and decided rows are removed
//! [`KEEP_DECIDED_SECONDS`] after their decision, at the next hold.
//!
//! What it must never do: list or decide one user's approval for another, or
//! let a decided approval be decided again.

use crate::db::{DbError, OptionalExtension as _, Row, Sql};
use serde_json::Value;

use super::{Store, StoreError};

/// How long a decided approval is kept, so a late click is told what became
/// of it ("already approved", "expired") instead of "no such approval".
pub const KEEP_DECIDED_SECONDS: i64 = 24 * 60 * 60;

/// How an approval ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// The person approved it; the call ran.
    Approved,
    /// The person declined it; nothing ran.
    Declined,
    /// Nobody decided before it timed out; nothing ran.
    Lapsed,
    /// Its turn was cancelled; nothing ran.
    Cancelled,
    /// Studio restarted while it waited (the turn that waited is gone);
    /// nothing ran.
    Expired,
}

impl ApprovalOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalOutcome::Approved => "approved",
            ApprovalOutcome::Declined => "declined",
            ApprovalOutcome::Lapsed => "lapsed",
            ApprovalOutcome::Cancelled => "cancelled",
            ApprovalOutcome::Expired => "expired",
        }
    }

    fn parse(text: &str) -> Option<ApprovalOutcome> {
        [
            ApprovalOutcome::Approved,
            ApprovalOutcome::Declined,
            ApprovalOutcome::Lapsed,
            ApprovalOutcome::Cancelled,
            ApprovalOutcome::Expired,
        ]
        .into_iter()
        .find(|outcome| outcome.as_str() == text)
    }
}

/// An approval as it is held and listed.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    /// Random, 32 hex digits: the page's handle on it.
    pub id: String,
    pub user_id: String,
    pub conversation_id: String,
    /// The model's tool call it stands for.
    pub call_id: String,
    pub tool: String,
    /// What the page shows (title, sentence, app, summary).
    pub card: Value,
    pub created_at: i64,
    pub expires_at: i64,
}

/// What became of a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalDecision {
    /// Recorded: this decision is the approval's outcome.
    Decided,
    /// No approval of this user's with this id in this conversation.
    NotWaiting,
    /// It had already ended this way.
    AlreadyEnded(ApprovalOutcome),
}

fn approval_of(row: &Row<'_>) -> Result<(Approval, String), DbError> {
    Ok((
        Approval {
            id: row.get(0)?,
            user_id: row.get(1)?,
            conversation_id: row.get(2)?,
            call_id: row.get(3)?,
            tool: row.get(4)?,
            card: Value::Null,
            created_at: row.get(6)?,
            expires_at: row.get(7)?,
        },
        row.get(5)?,
    ))
}

fn with_card((mut approval, card): (Approval, String)) -> Result<Approval, StoreError> {
    approval.card = serde_json::from_str(&card)
        .map_err(|error| StoreError::Database(format!("a stored approval is not JSON: {error}")))?;
    Ok(approval)
}

/// How often a running studio-core says it is alive (`note_replica`).
pub const REPLICA_HEARTBEAT_SECONDS: u64 = 5;
/// A replica silent this long is gone: its waiting approvals end.
pub const REPLICA_LIVE_SECONDS: i64 = 30;
/// A replica silent this long is forgotten.
const FORGET_REPLICA_SECONDS: i64 = 24 * 60 * 60;

const COLUMNS: &str =
    "id, user_id, conversation_id, call_id, tool, card_json, created_at, expires_at";

impl Store {
    /// Holds `approval` from now for `ttl_seconds` (its `created_at` and
    /// `expires_at` are set here) until it is decided or ends; answers its
    /// `expires_at`, or `None` when its conversation is not its user's.
    /// Removes approvals decided more than [`KEEP_DECIDED_SECONDS`] ago.
    pub fn hold_approval(
        &self,
        approval: &Approval,
        ttl_seconds: i64,
        holder: &str,
    ) -> Result<Option<i64>, StoreError> {
        let now = self.now();
        let expires_at = now.saturating_add(ttl_seconds);
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        transaction.execute(
            "DELETE FROM assistant_approvals WHERE decided_at IS NOT NULL AND decided_at < ?1",
            [now - KEEP_DECIDED_SECONDS],
        )?;
        let held = transaction.execute(
            "INSERT INTO assistant_approvals
             (id, user_id, conversation_id, call_id, tool, card_json, created_at, expires_at, holder)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9
             WHERE EXISTS (SELECT 1 FROM assistant_conversations WHERE id = ?3 AND user_id = ?2)",
            (
                &approval.id,
                &approval.user_id,
                &approval.conversation_id,
                &approval.call_id,
                &approval.tool,
                approval.card.to_string(),
                now,
                expires_at,
                holder,
            ),
        )? == 1;
        transaction.commit()?;
        Ok(held.then_some(expires_at))
    }

    /// `user_id`'s approvals still waiting for a decision, oldest first.
    pub fn waiting_approvals(&self, user_id: &str) -> Result<Vec<Approval>, StoreError> {
        let now = self.now();
        let connection = self.connection()?;
        let mut statement = connection.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM assistant_approvals
             WHERE user_id = ?1 AND outcome IS NULL AND expires_at > ?2
             ORDER BY created_at, rowid"
        ))?;
        let rows: Vec<(Approval, String)> = statement
            .query_map((user_id, now), approval_of)?
            .collect::<Result<_, _>>()?;
        rows.into_iter().map(with_card).collect()
    }

    /// The person's decision (`Approved` or `Declined`) on `user_id`'s
    /// approval `id` in `conversation_id`, recorded only if it still waits
    /// and has not timed out.
    pub fn decide_approval(
        &self,
        user_id: &str,
        conversation_id: &str,
        id: &str,
        outcome: ApprovalOutcome,
    ) -> Result<ApprovalDecision, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let found: Option<(Option<String>, i64)> = transaction
            .query_row(
                "SELECT outcome, expires_at FROM assistant_approvals
                 WHERE id = ?1 AND user_id = ?2 AND conversation_id = ?3",
                (id, user_id, conversation_id),
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let decision = match found {
            None => ApprovalDecision::NotWaiting,
            Some((Some(ended), _)) => {
                ApprovalDecision::AlreadyEnded(ApprovalOutcome::parse(&ended).ok_or_else(|| {
                    StoreError::Database(format!("an approval ended as {ended:?}"))
                })?)
            }
            // Its turn closes it as lapsed; a click after the deadline is
            // too late whether or not that has happened yet.
            Some((None, expires_at)) if expires_at <= now => {
                ApprovalDecision::AlreadyEnded(ApprovalOutcome::Lapsed)
            }
            Some((None, _)) => {
                transaction.execute(
                    "UPDATE assistant_approvals SET outcome = ?2, decided_at = ?3
                     WHERE id = ?1 AND outcome IS NULL",
                    (id, outcome.as_str(), now),
                )?;
                ApprovalDecision::Decided
            }
        };
        transaction.commit()?;
        Ok(decision)
    }

    /// Ends approval `id` as `outcome` (lapsed, cancelled) unless the person
    /// decided it first; false only then (the decision is on its way to the
    /// turn). An approval that is gone (its conversation was deleted) or
    /// already ended without a decision is ended: nothing of it runs.
    pub fn end_approval(&self, id: &str, outcome: ApprovalOutcome) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let ended = transaction.execute(
            "UPDATE assistant_approvals SET outcome = ?2, decided_at = ?3
             WHERE id = ?1 AND outcome IS NULL",
            (id, outcome.as_str(), now),
        )? == 1;
        let decided = !ended
            && transaction
                .query_row(
                    "SELECT outcome FROM assistant_approvals WHERE id = ?1",
                    [id],
                    |row| row.get::<_, Option<String>>(0),
                )
                .optional()?
                .flatten()
                .is_some_and(|outcome| {
                    outcome == ApprovalOutcome::Approved.as_str()
                        || outcome == ApprovalOutcome::Declined.as_str()
                });
        transaction.commit()?;
        Ok(!decided)
    }

    /// The person's decision on approval `id`, once recorded: how a turn
    /// waiting on one replica learns of a click another replica took.
    pub fn approval_decision(&self, id: &str) -> Result<Option<ApprovalOutcome>, StoreError> {
        let outcome: Option<Option<String>> = self
            .connection()?
            .query_row(
                "SELECT outcome FROM assistant_approvals WHERE id = ?1",
                [id],
                |row| row.get(0),
            )
            .optional()?;
        Ok(outcome
            .flatten()
            .and_then(|outcome| ApprovalOutcome::parse(&outcome))
            .filter(|outcome| {
                matches!(
                    outcome,
                    ApprovalOutcome::Approved | ApprovalOutcome::Declined
                )
            }))
    }

    /// Records that studio-core replica `id` is alive now (first call: that
    /// it started), and forgets replicas not seen for a day.
    pub fn note_replica(&self, id: &str) -> Result<(), StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        transaction.execute(
            "INSERT INTO core_replicas (id, started_at, seen_at) VALUES (?1, ?2, ?2)
             ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at",
            (id, now),
        )?;
        transaction.execute(
            "DELETE FROM core_replicas WHERE seen_at < ?1",
            [now - FORGET_REPLICA_SECONDS],
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// Forgets studio-core replica `id` as it stops: its waiting approvals
    /// are then ended by the next expiry (its own, or any replica's).
    pub fn forget_replica(&self, id: &str) -> Result<(), StoreError> {
        self.connection()?
            .execute("DELETE FROM core_replicas WHERE id = ?1", [id])?;
        Ok(())
    }

    /// Whether the replica whose turn waits for `user_id`'s approval `id` in
    /// `conversation_id` is alive (said so within
    /// [`REPLICA_LIVE_SECONDS`]); `None` when no such approval waits.
    pub fn approval_holder_live(
        &self,
        user_id: &str,
        conversation_id: &str,
        id: &str,
    ) -> Result<Option<bool>, StoreError> {
        let now = self.now();
        Ok(self
            .connection()?
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM core_replicas r
                                WHERE r.id = a.holder AND r.seen_at > ?4)
                 FROM assistant_approvals a
                 WHERE a.id = ?1 AND a.user_id = ?2 AND a.conversation_id = ?3
                   AND a.outcome IS NULL",
                (id, user_id, conversation_id, now - REPLICA_LIVE_SECONDS),
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Ends as expired every approval still waiting whose turn is gone (its
    /// replica stopped saying it is alive, or it names none), and answers
    /// them: at start-up and every heartbeat, so a card of a replica that
    /// died ends within [`REPLICA_LIVE_SECONDS`] while the cards of live
    /// replicas keep waiting.
    pub fn expire_waiting_approvals(&self) -> Result<Vec<Approval>, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        const ABANDONED: &str = "outcome IS NULL AND (holder IS NULL OR holder NOT IN
             (SELECT id FROM core_replicas WHERE seen_at > ?1))";
        let rows: Vec<(Approval, String)> = {
            let mut statement = transaction.prepare(&format!(
                "SELECT {COLUMNS} FROM assistant_approvals WHERE {ABANDONED} ORDER BY rowid"
            ))?;
            statement
                .query_map([now - REPLICA_LIVE_SECONDS], approval_of)?
                .collect::<Result<_, _>>()?
        };
        transaction.execute(
            &format!(
                "UPDATE assistant_approvals SET outcome = 'expired', decided_at = ?2
                 WHERE {ABANDONED}"
            ),
            (now - REPLICA_LIVE_SECONDS, now),
        )?;
        transaction.commit()?;
        rows.into_iter().map(with_card).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UserRole;
    use crate::tests::{Fixture, on_both};
    use serde_json::json;

    fn approval(id: &str, user: &str, conversation: &str) -> Approval {
        Approval {
            id: id.to_owned(),
            user_id: user.to_owned(),
            conversation_id: conversation.to_owned(),
            call_id: "call-1".to_owned(),
            tool: "createApp".to_owned(),
            card: json!({"sentence": "Creates an app."}),
            created_at: 0,
            expires_at: 0,
        }
    }

    on_both! {
    fn an_approval_is_decided_once_by_its_user_for_its_conversation() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        let ada = fixture.user("ada", UserRole::Admin);
        let bob = fixture.user("bob", UserRole::Member);
        let first = store.create_conversation(&ada.id, "one").unwrap();
        let second = store.create_conversation(&ada.id, "two").unwrap();
        let far = 600;
        // Not into another user's conversation.
        assert_eq!(
            store
                .hold_approval(&approval("a1", &bob.id, &first.id), far, "replica-1")
                .unwrap(),
            None
        );
        let expires_at = store
            .hold_approval(&approval("a1", &ada.id, &first.id), far, "replica-1")
            .unwrap()
            .unwrap();
        let waiting = store.waiting_approvals(&ada.id).unwrap();
        assert_eq!(waiting.len(), 1);
        assert_eq!(waiting[0].card["sentence"], "Creates an app.");
        assert_eq!(waiting[0].conversation_id, first.id);
        assert_eq!(waiting[0].expires_at, expires_at);
        assert_eq!(expires_at - waiting[0].created_at, far);
        assert!(store.waiting_approvals(&bob.id).unwrap().is_empty());

        let decide = |user: &str, conversation: &str, outcome| {
            store
                .decide_approval(user, conversation, "a1", outcome)
                .unwrap()
        };
        assert_eq!(
            decide(&bob.id, &first.id, ApprovalOutcome::Approved),
            ApprovalDecision::NotWaiting,
            "another user"
        );
        assert_eq!(
            decide(&ada.id, &second.id, ApprovalOutcome::Approved),
            ApprovalDecision::NotWaiting,
            "another conversation"
        );
        assert_eq!(
            decide(&ada.id, &first.id, ApprovalOutcome::Declined),
            ApprovalDecision::Decided
        );
        assert_eq!(
            decide(&ada.id, &first.id, ApprovalOutcome::Approved),
            ApprovalDecision::AlreadyEnded(ApprovalOutcome::Declined),
            "a replay"
        );
        assert!(!store.end_approval("a1", ApprovalOutcome::Lapsed).unwrap());
        assert!(store.waiting_approvals(&ada.id).unwrap().is_empty());

        // The turn's end wins when it comes first.
        store
            .hold_approval(&approval("a2", &ada.id, &first.id), far, "replica-1")
            .unwrap();
        assert!(store.end_approval("a2", ApprovalOutcome::Lapsed).unwrap());
        assert_eq!(
            store
                .decide_approval(&ada.id, &first.id, "a2", ApprovalOutcome::Approved)
                .unwrap(),
            ApprovalDecision::AlreadyEnded(ApprovalOutcome::Lapsed)
        );
        // Past its deadline it is neither listed nor decided.
        store
            .hold_approval(&approval("a3", &ada.id, &first.id), 0, "replica-1")
            .unwrap();
        assert!(store.waiting_approvals(&ada.id).unwrap().is_empty());
        assert_eq!(
            store
                .decide_approval(&ada.id, &first.id, "a3", ApprovalOutcome::Approved)
                .unwrap(),
            ApprovalDecision::AlreadyEnded(ApprovalOutcome::Lapsed)
        );

        // At start-up every waiting one expires, and is answered once.
        store
            .hold_approval(&approval("a4", &ada.id, &second.id), far, "replica-1")
            .unwrap();
        let expired = store.expire_waiting_approvals().unwrap();
        assert_eq!(
            expired.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
            ["a3", "a4"]
        );
        assert!(store.expire_waiting_approvals().unwrap().is_empty());
        assert_eq!(
            store
                .decide_approval(&ada.id, &second.id, "a4", ApprovalOutcome::Approved)
                .unwrap(),
            ApprovalDecision::AlreadyEnded(ApprovalOutcome::Expired)
        );
        // Deleting the conversation deletes its approvals; a turn still
        // waiting for one ends it (nothing runs) instead of waiting on.
        store
            .hold_approval(&approval("a5", &ada.id, &second.id), far, "replica-1")
            .unwrap();
        assert!(store.delete_conversation(&ada.id, &second.id).unwrap());
        assert!(store.end_approval("a5", ApprovalOutcome::Lapsed).unwrap());
        assert_eq!(
            store
                .decide_approval(&ada.id, &second.id, "a4", ApprovalOutcome::Approved)
                .unwrap(),
            ApprovalDecision::NotWaiting
        );
    }
    }
}
