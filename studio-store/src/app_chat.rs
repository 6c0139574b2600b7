//! App chat's conversations (migration 21): per user and app, the previous
//! user and assistant messages of that app's chat, so a turn continues the
//! last one on whichever studio-core replica it lands. studio-assistant runs
//! the turns; this module keeps the conversations and their bounds.
//!
//! Bounded by [`AppChatLimits`], enforced here in the write transaction that
//! changes a conversation, so replicas appending at once cannot together go
//! past a bound: a conversation keeps at most `max_messages` messages and
//! `max_bytes` of text (the oldest exchanges go first; an exchange over the
//! byte bound alone is shortened), at most `max_conversations` are kept in
//! all (the expired ones go first, then the least recently used), and one
//! unused for `idle_expiry` is forgotten. A conversation goes with its user
//! (a foreign key) and with its app's deletion ([`forget_app`]).
//!
//! What it must never do: answer one user's or app's conversation to another,
//! keep an exchange outside the transaction that applies the bounds, or keep
//! an expired conversation's words in an answer.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::db::{OptionalExtension as _, Sql, Tx};

use super::{Store, StoreError};

/// The bounds of app chat's conversations; the defaults are the documented
/// limits. Tests shrink them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppChatLimits {
    /// Messages kept per conversation (user and assistant together).
    pub max_messages: usize,
    /// Bytes of message text kept per conversation.
    pub max_bytes: usize,
    /// Conversations kept in all, every user and app together.
    pub max_conversations: usize,
    /// A conversation unused this long is forgotten.
    pub idle_expiry: Duration,
}

impl Default for AppChatLimits {
    fn default() -> AppChatLimits {
        AppChatLimits {
            max_messages: 20,
            max_bytes: 64 * 1024,
            max_conversations: 1_000,
            idle_expiry: Duration::from_secs(60 * 60),
        }
    }
}

impl AppChatLimits {
    fn idle_seconds(&self) -> i64 {
        i64::try_from(self.idle_expiry.as_secs()).unwrap_or(i64::MAX)
    }
}

/// Who a message is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AppChatRole {
    User,
    Assistant,
}

impl AppChatRole {
    /// The OpenAI `role` value.
    pub fn as_str(self) -> &'static str {
        match self {
            AppChatRole::User => "user",
            AppChatRole::Assistant => "assistant",
        }
    }
}

/// One remembered message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppChatMessage {
    pub role: AppChatRole,
    pub content: String,
}

/// The note that ends a shortened text.
pub const TRUNCATED_NOTE: &str = "\n[… truncated]";

impl Store {
    /// The messages of `user_id`'s conversation in `app_id`, oldest first;
    /// empty when there is none or it expired (then it is forgotten). Reading
    /// it counts as using it.
    pub fn app_chat_history(
        &self,
        user_id: &str,
        app_id: &str,
        limits: &AppChatLimits,
    ) -> Result<Vec<AppChatMessage>, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let Some(messages) = current(&transaction, user_id, app_id, now, limits)? else {
            transaction.commit()?;
            return Ok(Vec::new());
        };
        transaction.execute(
            "UPDATE app_chat_conversations SET last_used = ?3, used_seq = ?4
             WHERE user_id = ?1 AND app_id = ?2",
            (user_id, app_id, now, next_use(&transaction)?),
        )?;
        transaction.commit()?;
        Ok(messages)
    }

    /// Appends one finished exchange to `user_id`'s conversation in `app_id`,
    /// or starts a new one with it when `fresh` (a `new_session` turn) or the
    /// last one expired, then applies every bound of `limits`, all in one
    /// write transaction.
    pub fn record_app_chat(
        &self,
        user_id: &str,
        app_id: &str,
        prompt: &str,
        answer: &str,
        fresh: bool,
        limits: &AppChatLimits,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let kept = current(&transaction, user_id, app_id, now, limits)?;
        let mut messages = match kept {
            Some(messages) if !fresh => messages,
            _ => Vec::new(),
        };
        messages.push(AppChatMessage {
            role: AppChatRole::User,
            content: prompt.to_owned(),
        });
        messages.push(AppChatMessage {
            role: AppChatRole::Assistant,
            content: answer.to_owned(),
        });
        trim(&mut messages, limits);
        let json = serde_json::to_string(&messages)
            .map_err(|error| StoreError::Database(format!("a conversation as JSON: {error}")))?;
        let used_seq = next_use(&transaction)?;
        let exists: bool = transaction.query_row(
            "SELECT EXISTS (SELECT 1 FROM app_chat_conversations WHERE user_id = ?1 AND app_id = ?2)",
            (user_id, app_id),
            |row| row.get(0),
        )?;
        if !exists {
            make_room(&transaction, now, limits)?;
        }
        transaction.execute(
            "INSERT INTO app_chat_conversations
                (user_id, app_id, messages_json, last_used, used_seq)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (user_id, app_id) DO UPDATE SET
                messages_json = excluded.messages_json,
                last_used = excluded.last_used,
                used_seq = excluded.used_seq",
            (user_id, app_id, &json, now, used_seq),
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// How many app chat conversations are kept, every user and app
    /// together (expired ones not yet removed included).
    #[cfg(test)]
    pub(crate) fn app_chat_conversation_count(&self) -> Result<usize, StoreError> {
        let connection = self.connection()?;
        let count: i64 =
            connection.query_row("SELECT count(*) FROM app_chat_conversations", (), |row| {
                row.get(0)
            })?;
        Ok(usize::try_from(count).unwrap_or(usize::MAX))
    }
}

/// Removes every app chat conversation in `app_id`: its package is being
/// deleted (`record_app_deleted`, `delete_member_app`), and the app registry
/// row a foreign key could follow is kept for ever.
pub(crate) fn forget_app(transaction: &Tx<'_>, app_id: &str) -> Result<(), StoreError> {
    transaction.execute(
        "DELETE FROM app_chat_conversations WHERE app_id = ?1",
        [app_id],
    )?;
    Ok(())
}

/// The kept messages of (`user_id`, `app_id`), or `None` when there is no
/// conversation or it expired, in which case it is removed.
fn current(
    transaction: &Tx<'_>,
    user_id: &str,
    app_id: &str,
    now: i64,
    limits: &AppChatLimits,
) -> Result<Option<Vec<AppChatMessage>>, StoreError> {
    let row: Option<(String, i64)> = transaction
        .query_row(
            "SELECT messages_json, last_used FROM app_chat_conversations
             WHERE user_id = ?1 AND app_id = ?2",
            (user_id, app_id),
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?;
    let Some((json, last_used)) = row else {
        return Ok(None);
    };
    if expired(last_used, now, limits) {
        transaction.execute(
            "DELETE FROM app_chat_conversations WHERE user_id = ?1 AND app_id = ?2",
            (user_id, app_id),
        )?;
        return Ok(None);
    }
    let messages = serde_json::from_str(&json).map_err(|error| {
        StoreError::Database(format!(
            "a stored app chat conversation is not JSON: {error}"
        ))
    })?;
    Ok(Some(messages))
}

fn expired(last_used: i64, now: i64, limits: &AppChatLimits) -> bool {
    now.saturating_sub(last_used) >= limits.idle_seconds()
}

/// The next use's place in the order of uses, every replica's together: the
/// write transaction serialises writers, so each use gets its own.
fn next_use(transaction: &Tx<'_>) -> Result<i64, StoreError> {
    Ok(transaction.query_row(
        "SELECT coalesce(max(used_seq), 0) + 1 FROM app_chat_conversations",
        (),
        |row| row.get(0),
    )?)
}

/// Before adding a conversation: forgets the expired ones, then the least
/// recently used until there is room for one more.
fn make_room(transaction: &Tx<'_>, now: i64, limits: &AppChatLimits) -> Result<(), StoreError> {
    transaction.execute(
        "DELETE FROM app_chat_conversations WHERE last_used <= ?1",
        (now.saturating_sub(limits.idle_seconds()),),
    )?;
    let count: i64 =
        transaction.query_row("SELECT count(*) FROM app_chat_conversations", (), |row| {
            row.get(0)
        })?;
    let keep = i64::try_from(limits.max_conversations.max(1) - 1).unwrap_or(i64::MAX);
    let excess = count - keep;
    if excess > 0 {
        transaction.execute(
            "DELETE FROM app_chat_conversations WHERE used_seq IN
             (SELECT used_seq FROM app_chat_conversations ORDER BY used_seq LIMIT ?1)",
            (excess,),
        )?;
    }
    Ok(())
}

/// Drops the oldest exchanges until the conversation is within the bounds.
/// If the newest exchange alone is over the byte bound, its two messages are
/// shortened to half of it each, so a long answer still leaves context.
fn trim(messages: &mut Vec<AppChatMessage>, limits: &AppChatLimits) {
    let bytes = |messages: &[AppChatMessage]| -> usize {
        messages.iter().map(|message| message.content.len()).sum()
    };
    let mut first = 0;
    while messages.len() - first > 2
        && (messages.len() - first > limits.max_messages
            || bytes(&messages[first..]) > limits.max_bytes)
    {
        first += 2;
    }
    messages.drain(..first);
    if bytes(messages) > limits.max_bytes {
        let half = limits.max_bytes / 2;
        for message in messages.iter_mut() {
            truncate_with_note(&mut message.content, half);
        }
    }
}

/// Shortens `text` to at most `max` bytes (at a character boundary), ending it
/// with [`TRUNCATED_NOTE`]; leaves it alone when it fits.
fn truncate_with_note(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut end = max.saturating_sub(TRUNCATED_NOTE.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    if TRUNCATED_NOTE.len() <= max {
        text.push_str(TRUNCATED_NOTE);
    }
}

#[cfg(test)]
mod tests;
