//! The Studio assistant: a conversation per user with the configured
//! OpenAI-compatible provider (`SASHA_CHAT_*`), whose tools are Sasha's own
//! MCP tools as the signed-in user's connection lists them (`mcp_client.rs`), and
//! whose mutations run only when the person presses Approve in Studio.
//!
//! A turn (`POST /api/assistant/conversations/:id/turn`) streams
//! server-sent events to the Studio page: the growing text, each tool call
//! and its outcome, and a confirmation for every tool the gateway does not
//! mark read-only (table and action mutations, source writes, drafts,
//! publication, lifecycle). The turn then waits for the person's decision
//! (`POST /api/assistant/confirmations/:id`, the same signed-in session,
//! same-origin; the id is random, single-use and bound to the user, the
//! conversation and the call) and only then calls the tool, or tells the
//! model the person declined. The model receives no token, state or id it
//! could use to approve anything; a call its tool results talk it into is
//! one more call that needs approval.
//!
//! A confirmation is held in the core database (studio-store's
//! `approvals`) with the card the page shows, so a reloaded page, a second
//! tab or another device lists it (`GET /api/assistant/confirmations`) and
//! can decide it, through any studio-core replica; the turn that waits for
//! it lives in one replica (the approval's `holder`), which takes a click
//! recorded by another from the database within [`DECISION_POLL`], and a
//! page going away does not end it (only Cancel, the timeout, or the turn's
//! end does). The database decides which came first (a click, the timeout,
//! a cancel); the loser changes nothing. A turn whose confirmation lapses
//! or is cancelled ends, and its unanswered calls are stored as cancelled,
//! never left running. When the replica holding a confirmation stops (it no
//! longer says it is alive), the confirmation expires
//! ([`crate::Assistance::expire_abandoned`], at every replica's start and
//! heartbeat): its turn is gone, so nothing of it runs.
//!
//! This module keeps the turns running and the confirmations waiting; the
//! routes are `crate::http`'s.
//!
//! What it must never do: run a mutation without the person's click, let
//! one user's turn, confirmation or conversation be seen or decided by
//! another, or reach a tool the user's own connection does not list.

mod mcp_client;
mod sentence;
mod summary;
pub mod turn;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sasha_proto::{AppError, ErrorCode};
use studio_store::{ApprovalDecision, ApprovalOutcome, Store, blocking};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// How long a confirmation waits for the person before it lapses (nothing
/// runs and the turn ends as cancelled).
pub const CONFIRMATION_TIMEOUT: Duration = Duration::from_secs(600);

/// Turns one user may have running at once (each may wait for a decision).
pub const MAX_TURNS_PER_USER: usize = 4;
/// Turns running at once on this server.
pub const MAX_TURNS: usize = 64;

/// What the page is told when no provider is configured.
pub(crate) const HOW_TO_CONFIGURE: &str = "The assistant needs a model: an administrator sets SASHA_CHAT_BASE_URL (an OpenAI-compatible API such as https://api.openai.com/v1 or a local Ollama at http://127.0.0.1:11434/v1) and SASHA_CHAT_MODEL, and SASHA_CHAT_API_KEY when the provider needs one; see docs/assistant.md.";

/// Why a confirmation ended without a decision, in the person's words: the
/// stored call's result, the turn's error and the refusal of a late click.
pub(crate) fn unrun_reason(outcome: ApprovalOutcome) -> &'static str {
    match outcome {
        ApprovalOutcome::Lapsed => {
            "Cancelled: nobody approved or declined this change within 10 minutes, so nothing was run. Ask again when you are ready."
        }
        ApprovalOutcome::Expired => {
            "Cancelled: Studio restarted before this change was approved, so nothing was run. Ask the assistant again."
        }
        ApprovalOutcome::Cancelled => "Cancelled: the turn was cancelled, so nothing was run.",
        ApprovalOutcome::Approved => "This change was already approved.",
        ApprovalOutcome::Declined => "This change was already declined; nothing was run.",
    }
}

/// How often a waiting turn reads whether its confirmation was decided on
/// another replica: a click there reaches it within this.
pub const DECISION_POLL: Duration = Duration::from_millis(250);

/// The turns running and the confirmations waiting, in this process.
#[derive(Debug)]
pub struct Assistant {
    /// Where the assistant's MCP client connects (`SASHA_ASSISTANT_MCP_URL`).
    pub(crate) mcp_url: String,
    /// Conversations with a turn running (one at a time each), with their
    /// users and how to cancel them.
    running: Mutex<HashMap<String, RunningTurn>>,
    /// Confirmations waiting for a person, by id, with the turn's end of the
    /// decision.
    pending: Mutex<HashMap<String, Pending>>,
    /// This process among studio-core's replicas: the holder its waiting
    /// approvals name, so a click on another replica reaches their turns.
    replica: String,
}

#[derive(Debug)]
struct RunningTurn {
    user_id: String,
    cancel: CancellationToken,
}

#[derive(Debug)]
struct Pending {
    user_id: String,
    conversation: String,
    decide: oneshot::Sender<bool>,
}

/// How a wait for the person ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    Approved,
    Declined,
    /// Ended without a decision (lapsed or cancelled): nothing runs.
    Ended(ApprovalOutcome),
}

impl Assistant {
    pub fn new(mcp_url: String) -> Assistant {
        Assistant {
            mcp_url,
            running: Mutex::default(),
            pending: Mutex::default(),
            replica: uuid::Uuid::new_v4().to_string(),
        }
    }

    /// This process's name among studio-core's replicas.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Claims `conversation` of `user_id` for one turn, which `cancel`
    /// cancels, or `APP_BUSY` (a turn of it runs, or too many of the user's
    /// or the server's do).
    pub(crate) fn claim(
        self: &Arc<Self>,
        user_id: &str,
        conversation: &str,
        cancel: CancellationToken,
    ) -> Result<Running, AppError> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if running.contains_key(conversation) {
            return Err(AppError::new(
                ErrorCode::Busy,
                "this conversation already has a turn running; wait for it or cancel it",
            ));
        }
        if running
            .values()
            .filter(|turn| turn.user_id == user_id)
            .count()
            >= MAX_TURNS_PER_USER
            || running.len() >= MAX_TURNS
        {
            return Err(AppError::new(
                ErrorCode::Busy,
                "too many assistant turns are running; finish or cancel one first",
            ));
        }
        running.insert(
            conversation.to_owned(),
            RunningTurn {
                user_id: user_id.to_owned(),
                cancel,
            },
        );
        Ok(Running {
            assistant: self.clone(),
            conversation: conversation.to_owned(),
        })
    }

    /// Whether `user_id`'s `conversation` has a turn running.
    pub fn is_running(&self, user_id: &str, conversation: &str) -> bool {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(conversation)
            .is_some_and(|turn| turn.user_id == user_id)
    }

    /// Cancels the turn of `user_id`'s `conversation`; false when none runs.
    pub fn cancel(&self, user_id: &str, conversation: &str) -> bool {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        match running.get(conversation) {
            Some(turn) if turn.user_id == user_id => {
                turn.cancel.cancel();
                true
            }
            _ => false,
        }
    }

    /// Holds `approval` in `store` for `timeout` and registers its turn's
    /// wait: the receiver of the person's decision, and when it lapses (unix
    /// seconds). `APP_RECORD_NOT_FOUND` when its conversation is no longer
    /// its user's.
    pub async fn hold(
        &self,
        store: &Store,
        approval: studio_store::Approval,
        timeout: Duration,
    ) -> Result<(oneshot::Receiver<bool>, i64), AppError> {
        let (decide, decision) = oneshot::channel();
        // Registered before it is stored, so a click that reads it in the
        // database always finds the turn waiting.
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                approval.id.clone(),
                Pending {
                    user_id: approval.user_id.clone(),
                    conversation: approval.conversation_id.clone(),
                    decide,
                },
            );
        let (store, id, holder) = (store.clone(), approval.id.clone(), self.replica.clone());
        let seconds = i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX);
        let held = blocking(move || store.hold_approval(&approval, seconds, &holder)).await;
        match held {
            Ok(Some(expires_at)) => Ok((decision, expires_at)),
            Ok(None) => {
                self.forget(&id);
                Err(AppError::new(
                    ErrorCode::RecordNotFound,
                    "no such conversation",
                ))
            }
            Err(error) => {
                self.forget(&id);
                Err(error)
            }
        }
    }

    /// Waits for the person's decision on `id` (from [`Assistant::hold`]) at
    /// most `timeout`, or until `cancel`. The database decides whether the
    /// person or the deadline came first; an end without a decision is
    /// logged once, without the call's arguments.
    pub async fn wait(
        &self,
        store: &Store,
        id: &str,
        mut decision: oneshot::Receiver<bool>,
        cancel: &CancellationToken,
        timeout: Duration,
    ) -> Waited {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        // A click on another replica is recorded in the database only: read
        // it there every DECISION_POLL as well as waiting on this process's
        // own channel.
        let mut poll = tokio::time::interval(DECISION_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let ending = loop {
            tokio::select! {
                decided = &mut decision => return Self::decided(decided),
                () = &mut deadline => break ApprovalOutcome::Lapsed,
                () = cancel.cancelled() => break ApprovalOutcome::Cancelled,
                _ = poll.tick() => {
                    let (reader, key) = (store.clone(), id.to_owned());
                    if let Ok(Some(outcome)) = blocking(move || reader.approval_decision(&key)).await {
                        self.forget(id);
                        return if outcome == ApprovalOutcome::Approved {
                            Waited::Approved
                        } else {
                            Waited::Declined
                        };
                    }
                }
            }
        };
        let (writer, key) = (store.clone(), id.to_owned());
        // A store that cannot answer ends it here: nothing runs undecided.
        let ended = blocking(move || writer.end_approval(&key, ending))
            .await
            .unwrap_or(true);
        if !ended {
            // The person's decision was recorded first; it is on its way.
            return Self::decided(decision.await);
        }
        self.forget(id);
        if ending == ApprovalOutcome::Lapsed {
            tracing::info!(
                "assistant: a confirmation lapsed without a decision; nothing was run and the turn ends as cancelled"
            );
        }
        Waited::Ended(ending)
    }

    fn decided(decided: Result<bool, oneshot::error::RecvError>) -> Waited {
        match decided {
            Ok(true) => Waited::Approved,
            // A sender dropped without a decision is no approval.
            _ => Waited::Declined,
        }
    }

    /// Forgets a confirmation's wait (decided, ended or abandoned).
    pub(crate) fn forget(&self, id: &str) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// The person's decision on confirmation `id` of their `conversation`:
    /// recorded once in `store`, then handed to the turn that waits. Another
    /// user's id, another conversation's, an unknown one and a decided one
    /// are `APP_RECORD_NOT_FOUND`; one that lapsed, was cancelled or
    /// expired says so (`APP_CONFLICT`).
    pub async fn decide(
        &self,
        store: &Store,
        user_id: &str,
        conversation: &str,
        id: &str,
        approve: bool,
    ) -> Result<(), AppError> {
        let here = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(id);
        if !here {
            // Its turn waits on another replica, which reads the click from
            // the database, unless that replica stopped: then nothing would
            // run it, so it is refused as expired and not recorded (every
            // replica's heartbeat ends such a card).
            let (reader, user, conversation_id, key) = (
                store.clone(),
                user_id.to_owned(),
                conversation.to_owned(),
                id.to_owned(),
            );
            let live = blocking(move || reader.approval_holder_live(&user, &conversation_id, &key))
                .await?;
            if live == Some(false) {
                return Err(AppError::new(
                    ErrorCode::Conflict,
                    unrun_reason(ApprovalOutcome::Expired),
                )
                .with_details(serde_json::json!({"outcome": "expired"})));
            }
        }
        let outcome = if approve {
            ApprovalOutcome::Approved
        } else {
            ApprovalOutcome::Declined
        };
        let (reader, user, conversation_id, key) = (
            store.clone(),
            user_id.to_owned(),
            conversation.to_owned(),
            id.to_owned(),
        );
        let decision =
            blocking(move || reader.decide_approval(&user, &conversation_id, &key, outcome))
                .await?;
        match decision {
            ApprovalDecision::Decided => {}
            ApprovalDecision::NotWaiting
            | ApprovalDecision::AlreadyEnded(
                ApprovalOutcome::Approved | ApprovalOutcome::Declined,
            ) => {
                return Err(not_waiting());
            }
            ApprovalDecision::AlreadyEnded(ended) => {
                return Err(AppError::new(ErrorCode::Conflict, unrun_reason(ended))
                    .with_details(serde_json::json!({"outcome": ended.as_str()})));
            }
        }
        let waiting = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        let handed = waiting.is_some_and(|waiting| {
            waiting.user_id == user_id
                && waiting.conversation == conversation
                && waiting.decide.send(approve).is_ok()
        });
        if handed {
            return Ok(());
        }
        if !here {
            // Recorded; the turn of the live replica holding it reads it.
            return Ok(());
        }
        // Recorded, but this process's turn stopped waiting between the
        // check and the click (it failed unexpectedly): nothing runs.
        Err(
            AppError::new(ErrorCode::Conflict, unrun_reason(ApprovalOutcome::Expired))
                .with_details(serde_json::json!({"outcome": "expired"})),
        )
    }
}

/// The one refusal of a confirmation that is not the caller's to decide
/// (unknown, another user's, another conversation's, already decided), so
/// it tells nobody which binding failed.
pub(crate) fn not_waiting() -> AppError {
    AppError::new(
        ErrorCode::RecordNotFound,
        "no such confirmation is waiting for you (it was decided, timed out, or is not yours)",
    )
}

/// A turn's claim on its conversation; dropping it frees it.
#[derive(Debug)]
pub(crate) struct Running {
    assistant: Arc<Assistant>,
    conversation: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.assistant
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.conversation);
    }
}

#[cfg(test)]
mod tests;
