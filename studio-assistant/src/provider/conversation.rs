//! App chat's conversations as a turn reads and extends them: per (user, app),
//! the previous user and assistant messages of that app's chat, so a turn can
//! continue the last one.
//!
//! They live in the core database (`studio_store`'s `app_chat`), not in this
//! process: a chat's next turn continues it on whichever studio-core replica
//! it lands, and a restart forgets nothing but what expired. The store keeps
//! every bound of [`AppChatLimits`] in the transaction that extends a
//! conversation (messages and bytes per conversation, conversations in all
//! with the least recently used going first, idle expiry), so replicas
//! finishing turns at once cannot together pass one.
//!
//! What it must never do: call the store on an async thread (the PostgreSQL
//! client blocks; every call goes through [`blocking`]), keep a copy of a
//! conversation in memory between turns (another replica may have extended
//! it), or record a failed or cancelled turn.

use sasha_proto::AppError;
use studio_store::{AppChatLimits, AppChatMessage, Store, blocking};

/// Whose conversation: the user and the app.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ConversationKey {
    pub(crate) user_id: String,
    pub(crate) app_id: String,
}

/// The messages of `key`'s conversation, oldest first; empty when there is
/// none or it expired.
pub(crate) async fn history(
    store: &Store,
    key: &ConversationKey,
    limits: AppChatLimits,
) -> Result<Vec<AppChatMessage>, AppError> {
    let (store, key) = (store.clone(), key.clone());
    blocking(move || store.app_chat_history(&key.user_id, &key.app_id, &limits)).await
}

/// Appends one finished exchange to `key`'s conversation, or starts a new
/// one with it when `fresh` (a `new_session` turn).
pub(crate) async fn record(
    store: &Store,
    key: &ConversationKey,
    prompt: &str,
    answer: &str,
    fresh: bool,
    limits: AppChatLimits,
) -> Result<(), AppError> {
    let (store, key) = (store.clone(), key.clone());
    let (prompt, answer) = (prompt.to_owned(), answer.to_owned());
    blocking(move || {
        store.record_app_chat(&key.user_id, &key.app_id, &prompt, &answer, fresh, &limits)
    })
    .await
}
