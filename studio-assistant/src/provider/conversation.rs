//! The in-memory conversations: per (user, app), the previous user and
//! assistant messages of that app's chat, so a turn can continue the last one.
//!
//! Deliberately in-process and bounded: a restart forgets every conversation,
//! and nothing here is written to disk. Each conversation keeps at most
//! [`Limits::max_messages`] messages and [`Limits::max_bytes`] of text (the
//! oldest exchanges go first), at most [`Limits::max_conversations`] are kept
//! (the least recently used goes first), and one unused for
//! [`Limits::idle_expiry`] is forgotten.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Who a message is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    User,
    Assistant,
}

impl Role {
    /// The OpenAI `role` value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One remembered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Message {
    pub(crate) role: Role,
    pub(crate) content: String,
}

/// Whose conversation: the user and the app.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ConversationKey {
    pub(crate) user_id: String,
    pub(crate) app_id: String,
}

/// The bounds of the store.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Messages kept per conversation (user and assistant together).
    pub(crate) max_messages: usize,
    /// Bytes of message text kept per conversation.
    pub(crate) max_bytes: usize,
    /// Conversations kept in all.
    pub(crate) max_conversations: usize,
    /// A conversation unused this long is forgotten.
    pub(crate) idle_expiry: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_messages: 20,
            max_bytes: 64 * 1024,
            max_conversations: 1_000,
            idle_expiry: Duration::from_secs(60 * 60),
        }
    }
}

#[derive(Debug)]
struct Conversation {
    /// Oldest first; always whole user/assistant exchanges.
    messages: VecDeque<Message>,
    /// When a turn last read or extended it, for expiry and eviction.
    last_used: Instant,
}

/// Every conversation. Not synchronised itself: the service keeps it behind a
/// mutex and holds that only for these short, non-blocking calls.
#[derive(Debug)]
pub(crate) struct Conversations {
    limits: Limits,
    map: HashMap<ConversationKey, Conversation>,
}

impl Conversations {
    pub(crate) fn new(limits: Limits) -> Conversations {
        Conversations {
            limits,
            map: HashMap::new(),
        }
    }

    /// The messages of `key`'s conversation, oldest first; empty when there is
    /// none or it expired (then it is forgotten).
    pub(crate) fn history(&mut self, key: &ConversationKey, now: Instant) -> Vec<Message> {
        let expiry = self.limits.idle_expiry;
        let Some(conversation) = self.map.get_mut(key) else {
            return Vec::new();
        };
        if now.saturating_duration_since(conversation.last_used) >= expiry {
            self.map.remove(key);
            return Vec::new();
        }
        conversation.last_used = now;
        conversation.messages.iter().cloned().collect()
    }

    /// Appends one finished exchange to `key`'s conversation, or starts a new
    /// conversation with it when `fresh` (a `new_session` turn), then applies
    /// the bounds.
    pub(crate) fn record(
        &mut self,
        key: &ConversationKey,
        prompt: &str,
        answer: &str,
        fresh: bool,
        now: Instant,
    ) {
        if fresh
            || self
                .map
                .get(key)
                .is_some_and(|conversation| self.expired(conversation, now))
        {
            self.map.remove(key);
        }
        if !self.map.contains_key(key) {
            self.make_room(now);
        }
        let limits = self.limits;
        let conversation = self.map.entry(key.clone()).or_insert_with(|| Conversation {
            messages: VecDeque::new(),
            last_used: now,
        });
        conversation.last_used = now;
        conversation.messages.push_back(Message {
            role: Role::User,
            content: prompt.to_owned(),
        });
        conversation.messages.push_back(Message {
            role: Role::Assistant,
            content: answer.to_owned(),
        });
        trim(&mut conversation.messages, limits);
    }

    /// How many conversations are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    fn expired(&self, conversation: &Conversation, now: Instant) -> bool {
        now.saturating_duration_since(conversation.last_used) >= self.limits.idle_expiry
    }

    /// Before adding a conversation: forgets the expired ones, then the least
    /// recently used until there is room. A linear scan, bounded by the cap.
    fn make_room(&mut self, now: Instant) {
        if self.map.len() < self.limits.max_conversations {
            return;
        }
        let expiry = self.limits.idle_expiry;
        self.map.retain(|_, conversation| {
            now.saturating_duration_since(conversation.last_used) < expiry
        });
        while self.map.len() >= self.limits.max_conversations.max(1) {
            let Some(oldest) = self
                .map
                .iter()
                .min_by_key(|(_, conversation)| conversation.last_used)
                .map(|(key, _)| key.clone())
            else {
                break;
            };
            self.map.remove(&oldest);
        }
    }
}

/// Drops the oldest exchanges until the conversation is within the bounds.
/// If the newest exchange alone is over the byte bound, its two messages are
/// shortened to half of it each, so a long answer still leaves context.
fn trim(messages: &mut VecDeque<Message>, limits: Limits) {
    let bytes = |messages: &VecDeque<Message>| -> usize {
        messages.iter().map(|message| message.content.len()).sum()
    };
    while messages.len() > 2
        && (messages.len() > limits.max_messages || bytes(messages) > limits.max_bytes)
    {
        messages.pop_front();
        messages.pop_front();
    }
    if bytes(messages) > limits.max_bytes {
        let half = limits.max_bytes / 2;
        for message in messages.iter_mut() {
            truncate_with_note(&mut message.content, half);
        }
    }
}

/// The note that ends a shortened text.
pub(crate) const TRUNCATED_NOTE: &str = "\n[… truncated]";

/// Shortens `text` to at most `max` bytes (at a character boundary), ending it
/// with [`TRUNCATED_NOTE`]; leaves it alone when it fits.
pub(crate) fn truncate_with_note(text: &mut String, max: usize) {
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
mod tests {
    use super::*;

    fn key(user: &str, app: &str) -> ConversationKey {
        ConversationKey {
            user_id: user.to_owned(),
            app_id: app.to_owned(),
        }
    }

    fn contents(messages: &[Message]) -> Vec<&str> {
        messages
            .iter()
            .map(|message| message.content.as_str())
            .collect()
    }

    #[test]
    fn keeps_whole_exchanges_within_the_message_bound() {
        let limits = Limits {
            max_messages: 4,
            ..Limits::default()
        };
        let mut store = Conversations::new(limits);
        let now = Instant::now();
        let alice = key("alice", "notes");
        for turn in 0..3 {
            store.record(&alice, &format!("q{turn}"), &format!("a{turn}"), false, now);
        }
        let history = store.history(&alice, now);
        assert_eq!(contents(&history), ["q1", "a1", "q2", "a2"]);
        assert_eq!(history[0].role, Role::User);
        assert_eq!(history[1].role, Role::Assistant);
        // A fresh session starts over; other users and apps are separate.
        store.record(&alice, "new", "start", true, now);
        assert_eq!(contents(&store.history(&alice, now)), ["new", "start"]);
        assert!(store.history(&key("bob", "notes"), now).is_empty());
        assert!(store.history(&key("alice", "other"), now).is_empty());
    }

    #[test]
    fn keeps_within_the_byte_bound() {
        let limits = Limits {
            max_bytes: 100,
            ..Limits::default()
        };
        let mut store = Conversations::new(limits);
        let now = Instant::now();
        let alice = key("alice", "notes");
        store.record(&alice, &"a".repeat(30), &"b".repeat(30), false, now);
        store.record(&alice, &"c".repeat(21), &"d".repeat(21), false, now);
        let history = store.history(&alice, now);
        assert_eq!(history.len(), 2);
        assert!(history[0].content.starts_with('c'));
        // One exchange over the bound alone is shortened, not dropped.
        store.record(&alice, &"e".repeat(80), &"f".repeat(80), false, now);
        let history = store.history(&alice, now);
        assert_eq!(history.len(), 2);
        let total: usize = history.iter().map(|m| m.content.len()).sum();
        assert!(total <= 100, "{total}");
        assert!(history[1].content.ends_with(TRUNCATED_NOTE));
        assert!(history[1].content.starts_with('f'));
    }

    #[test]
    fn idle_conversations_expire() {
        let mut store = Conversations::new(Limits::default());
        let start = Instant::now();
        let alice = key("alice", "notes");
        store.record(&alice, "q", "a", false, start);
        let later = start + Duration::from_secs(59 * 60);
        assert_eq!(store.history(&alice, later).len(), 2, "still fresh");
        // Reading it counted as use, so the hour runs from `later`.
        assert_eq!(
            store
                .history(&alice, later + Duration::from_secs(59 * 60))
                .len(),
            2
        );
        assert!(
            store
                .history(&alice, later + Duration::from_secs(3 * 60 * 60))
                .is_empty()
        );
        assert_eq!(store.len(), 0, "an expired conversation is forgotten");
        // Recording into an expired conversation starts a new one.
        store.record(&alice, "q1", "a1", false, start);
        store.record(&alice, "q2", "a2", false, start + Duration::from_secs(7200));
        assert_eq!(
            contents(&store.history(&alice, start + Duration::from_secs(7200))),
            ["q2", "a2"]
        );
    }

    #[test]
    fn the_least_recently_used_conversation_is_evicted() {
        let limits = Limits {
            max_conversations: 3,
            ..Limits::default()
        };
        let mut store = Conversations::new(limits);
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        for (index, app) in ["a", "b", "c"].into_iter().enumerate() {
            store.record(&key("u", app), "q", "r", false, at(index as u64));
        }
        // "a" is used again, so "b" is now the least recently used.
        assert_eq!(store.history(&key("u", "a"), at(10)).len(), 2);
        store.record(&key("u", "d"), "q", "r", false, at(11));
        assert_eq!(store.len(), 3);
        assert!(store.history(&key("u", "b"), at(12)).is_empty());
        assert_eq!(store.history(&key("u", "a"), at(12)).len(), 2);
        assert_eq!(store.history(&key("u", "c"), at(12)).len(), 2);
        assert_eq!(store.history(&key("u", "d"), at(12)).len(), 2);
    }

    #[test]
    fn truncation_respects_characters() {
        let mut text = "é".repeat(100);
        truncate_with_note(&mut text, 50);
        assert!(text.len() <= 50);
        assert!(text.ends_with(TRUNCATED_NOTE));
        let mut short = "fits".to_owned();
        truncate_with_note(&mut short, 50);
        assert_eq!(short, "fits");
    }
}
