//! The Studio assistant's conversations (migration 9): per user, each a list
//! of messages kept as the provider takes them (`role`, `content`,
//! `tool_calls`, `tool_call_id`) plus what Studio shows of a tool call's
//! outcome. studio-assistant runs the turns; this module only stores.
//!
//! Bounded: a user keeps at most [`MAX_CONVERSATIONS`] (starting another
//! removes the least recently used), a conversation at most
//! [`MAX_MESSAGES`] (the oldest go first). A message's JSON is the user's own
//! data and never leaves their conversation.
//!
//! What it must never do: answer one user's conversation to another.

use crate::db::{OptionalExtension as _, Sql};
use serde_json::Value;

use super::{Store, StoreError};

/// Conversations kept per user.
pub const MAX_CONVERSATIONS: usize = 50;
/// Messages kept per conversation.
pub const MAX_MESSAGES: usize = 400;
/// A title is cut to this many characters.
pub(super) const MAX_TITLE_CHARS: usize = 80;

/// One conversation in a user's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    pub id: String,
    pub title: String,
    pub created_at: i64,
    pub updated_at: i64,
}

fn title_of(text: &str) -> String {
    let line: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    let mut title: String = line.chars().take(MAX_TITLE_CHARS).collect();
    if line.chars().count() > MAX_TITLE_CHARS {
        title.push('…');
    }
    if title.is_empty() {
        "New conversation".to_owned()
    } else {
        title
    }
}

impl Store {
    /// Starts a conversation for `user_id` titled after `first_prompt`.
    pub fn create_conversation(
        &self,
        user_id: &str,
        first_prompt: &str,
    ) -> Result<Conversation, StoreError> {
        let now = self.now();
        let id = uuid::Uuid::new_v4().to_string();
        let title = title_of(first_prompt);
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        transaction.execute(
            "INSERT INTO assistant_conversations (id, user_id, title, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?4)",
            (&id, user_id, &title, now),
        )?;
        transaction.execute(
            "DELETE FROM assistant_conversations WHERE user_id = ?1 AND id NOT IN
             (SELECT id FROM assistant_conversations WHERE user_id = ?1
              ORDER BY updated_at DESC, rowid DESC LIMIT ?2)",
            (
                user_id,
                i64::try_from(MAX_CONVERSATIONS).unwrap_or(i64::MAX),
            ),
        )?;
        transaction.commit()?;
        Ok(Conversation {
            id,
            title,
            created_at: now,
            updated_at: now,
        })
    }

    /// `user_id`'s conversations, most recently used first.
    pub fn conversations(&self, user_id: &str) -> Result<Vec<Conversation>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare_cached(
            "SELECT id, title, created_at, updated_at FROM assistant_conversations
             WHERE user_id = ?1 ORDER BY updated_at DESC, rowid DESC",
        )?;
        let rows = statement
            .query_map([user_id], |row| {
                Ok(Conversation {
                    id: row.get(0)?,
                    title: row.get(1)?,
                    created_at: row.get(2)?,
                    updated_at: row.get(3)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// The conversation `id` if it is `user_id`'s.
    pub fn conversation(
        &self,
        user_id: &str,
        id: &str,
    ) -> Result<Option<Conversation>, StoreError> {
        let connection = self.connection()?;
        Ok(connection
            .query_row(
                "SELECT id, title, created_at, updated_at FROM assistant_conversations
                 WHERE id = ?1 AND user_id = ?2",
                (id, user_id),
                |row| {
                    Ok(Conversation {
                        id: row.get(0)?,
                        title: row.get(1)?,
                        created_at: row.get(2)?,
                        updated_at: row.get(3)?,
                    })
                },
            )
            .optional()?)
    }

    /// The messages of `user_id`'s conversation `id`, in order (empty for a
    /// conversation that is not theirs).
    pub fn conversation_messages(&self, user_id: &str, id: &str) -> Result<Vec<Value>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare_cached(
            "SELECT m.message_json FROM assistant_messages m
             JOIN assistant_conversations c ON c.id = m.conversation_id
             WHERE m.conversation_id = ?1 AND c.user_id = ?2 ORDER BY m.seq",
        )?;
        let rows: Vec<String> = statement
            .query_map((id, user_id), |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        rows.iter()
            .map(|text| {
                serde_json::from_str(text).map_err(|error| {
                    StoreError::Database(format!("a stored message is not JSON: {error}"))
                })
            })
            .collect()
    }

    /// Appends `messages` to `user_id`'s conversation `id` (false when it is
    /// not theirs any more) and keeps the newest [`MAX_MESSAGES`].
    pub fn append_messages(
        &self,
        user_id: &str,
        id: &str,
        messages: &[Value],
    ) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let owned: bool = transaction.query_row(
            "SELECT EXISTS (SELECT 1 FROM assistant_conversations WHERE id = ?1 AND user_id = ?2)",
            (id, user_id),
            |row| row.get(0),
        )?;
        if !owned {
            return Ok(false);
        }
        let mut seq: i64 = transaction.query_row(
            "SELECT coalesce(max(seq), 0) FROM assistant_messages WHERE conversation_id = ?1",
            [id],
            |row| row.get(0),
        )?;
        for message in messages {
            seq += 1;
            transaction.execute(
                "INSERT INTO assistant_messages (conversation_id, seq, message_json, created_at)
                 VALUES (?1, ?2, ?3, ?4)",
                (id, seq, message.to_string(), now),
            )?;
        }
        transaction.execute(
            "DELETE FROM assistant_messages WHERE conversation_id = ?1 AND seq <= ?2",
            (id, seq - i64::try_from(MAX_MESSAGES).unwrap_or(i64::MAX)),
        )?;
        transaction.execute(
            "UPDATE assistant_conversations SET updated_at = ?2 WHERE id = ?1",
            (id, now),
        )?;
        transaction.commit()?;
        Ok(true)
    }

    /// Removes `user_id`'s conversation `id`; false when there was none.
    pub fn delete_conversation(&self, user_id: &str, id: &str) -> Result<bool, StoreError> {
        let connection = self.connection()?;
        Ok(connection.execute(
            "DELETE FROM assistant_conversations WHERE id = ?1 AND user_id = ?2",
            (id, user_id),
        )? > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UserRole;
    use crate::tests::{Fixture, on_both};
    use serde_json::json;

    on_both! {
    fn conversations_are_their_users_and_bounded() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        let ada = fixture.user("ada", UserRole::Admin);
        let bob = fixture.user("bob", UserRole::Member);
        let first = store
            .create_conversation(&ada.id, "  log 3 hours\non Apollo  ")
            .unwrap();
        assert_eq!(first.title, "log 3 hours on Apollo");
        assert!(
            store
                .append_messages(
                    &ada.id,
                    &first.id,
                    &[json!({"role": "user", "content": "hi"})]
                )
                .unwrap()
        );
        // Bob sees none of it, and cannot write to it.
        assert!(store.conversation(&bob.id, &first.id).unwrap().is_none());
        assert!(
            store
                .conversation_messages(&bob.id, &first.id)
                .unwrap()
                .is_empty()
        );
        assert!(
            !store
                .append_messages(&bob.id, &first.id, &[json!({})])
                .unwrap()
        );
        assert!(!store.delete_conversation(&bob.id, &first.id).unwrap());
        assert_eq!(
            store.conversation_messages(&ada.id, &first.id).unwrap(),
            [json!({"role": "user", "content": "hi"})]
        );
        for index in 0..MAX_CONVERSATIONS {
            store
                .create_conversation(&ada.id, &format!("c{index}"))
                .unwrap();
        }
        let listed = store.conversations(&ada.id).unwrap();
        assert_eq!(listed.len(), MAX_CONVERSATIONS);
        assert!(
            listed.iter().all(|c| c.id != first.id),
            "the least recently used went"
        );
        let long = store
            .create_conversation(&bob.id, &"x".repeat(200))
            .unwrap();
        assert_eq!(long.title.chars().count(), MAX_TITLE_CHARS + 1);
        let many: Vec<Value> = (0..MAX_MESSAGES + 5).map(|i| json!({"n": i})).collect();
        store.append_messages(&bob.id, &long.id, &many).unwrap();
        let kept = store.conversation_messages(&bob.id, &long.id).unwrap();
        assert_eq!(kept.len(), MAX_MESSAGES);
        assert_eq!(kept[0], json!({"n": 5}));
        assert!(store.delete_conversation(&bob.id, &long.id).unwrap());
        assert!(store.conversations(&bob.id).unwrap().is_empty());
    }
    }
}
