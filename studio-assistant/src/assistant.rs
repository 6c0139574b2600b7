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
//! This module keeps the turns running and the confirmations waiting; the
//! routes are `crate::http`'s.
//!
//! What it must never do: run a mutation without the person's click, let
//! one user's turn, confirmation or conversation be seen or decided by
//! another, or reach a tool the user's own connection does not list.

mod mcp_client;
mod summary;
pub mod turn;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use sasha_proto::{AppError, ErrorCode};
use tokio::sync::oneshot;

/// How long a confirmation waits for the person before it counts as
/// declined.
pub const CONFIRMATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Turns one user may have running at once (each may wait for a decision).
pub const MAX_TURNS_PER_USER: usize = 4;
/// Turns running at once on this server.
pub const MAX_TURNS: usize = 64;

/// What the page is told when no provider is configured.
pub(crate) const HOW_TO_CONFIGURE: &str = "The assistant needs a model: an administrator sets SASHA_CHAT_BASE_URL (an OpenAI-compatible API such as https://api.openai.com/v1 or a local Ollama at http://127.0.0.1:11434/v1) and SASHA_CHAT_MODEL, and SASHA_CHAT_API_KEY when the provider needs one; see docs/assistant.md.";

/// The turns running and the confirmations waiting, in this process.
#[derive(Debug)]
pub struct Assistant {
    /// Where the assistant's MCP client connects (`SASHA_ASSISTANT_MCP_URL`).
    pub(crate) mcp_url: String,
    /// Conversations with a turn running (one at a time each), with their
    /// users.
    running: Mutex<HashMap<String, String>>,
    /// Confirmations waiting for a person, by id.
    pending: Mutex<HashMap<String, Pending>>,
}

#[derive(Debug)]
struct Pending {
    user_id: String,
    decide: oneshot::Sender<bool>,
}

impl Assistant {
    pub fn new(mcp_url: String) -> Assistant {
        Assistant {
            mcp_url,
            running: Mutex::default(),
            pending: Mutex::default(),
        }
    }

    /// Claims `conversation` of `user_id` for one turn, or `APP_BUSY` (a turn
    /// of it runs, or too many of the user's or the server's do).
    pub(crate) fn claim(
        self: &Arc<Self>,
        user_id: &str,
        conversation: &str,
    ) -> Result<Running, AppError> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if running.contains_key(conversation) {
            return Err(AppError::new(
                ErrorCode::Busy,
                "this conversation already has a turn running; wait for it or cancel it",
            ));
        }
        if running.values().filter(|user| *user == user_id).count() >= MAX_TURNS_PER_USER
            || running.len() >= MAX_TURNS
        {
            return Err(AppError::new(
                ErrorCode::Busy,
                "too many assistant turns are running; finish or cancel one first",
            ));
        }
        running.insert(conversation.to_owned(), user_id.to_owned());
        Ok(Running {
            assistant: self.clone(),
            conversation: conversation.to_owned(),
        })
    }

    /// Registers a confirmation for `user_id`; its random id and the
    /// receiver of the decision.
    pub(crate) fn expect(&self, user_id: &str) -> (String, oneshot::Receiver<bool>) {
        let id = hex::encode(rand::random::<[u8; 16]>());
        let (decide, decision) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id.clone(),
                Pending {
                    user_id: user_id.to_owned(),
                    decide,
                },
            );
        (id, decision)
    }

    /// Forgets a confirmation that was decided, timed out or abandoned.
    pub(crate) fn forget(&self, id: &str) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// The person's decision on confirmation `id`; false when it is not
    /// theirs, already decided or gone.
    pub(crate) fn decide(&self, user_id: &str, id: &str, approve: bool) -> bool {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        match pending.get(id) {
            Some(waiting) if waiting.user_id == user_id => {}
            _ => return false,
        }
        pending
            .remove(id)
            .is_some_and(|waiting| waiting.decide.send(approve).is_ok())
    }
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
