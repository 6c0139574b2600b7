//! The assistant's turns and confirmations in process: a confirmation is
//! held in the store, decided once, by its own user, for its own
//! conversation; one nobody decides lapses, one whose turn is cancelled
//! ends, and the database decides whether a click or the deadline came
//! first. Turns are one per conversation and bounded per user and in all.
//! The routes are tested through the Studio router (studio-core's
//! `http/tests/assistant.rs`).

use std::sync::Arc;
use std::time::Duration;

use sasha_proto::ErrorCode;
use serde_json::json;
use studio_store::{Approval, ApprovalOutcome, Store, UserRole};
use tokio_util::sync::CancellationToken;

use super::{Assistant, Waited};

/// A store with ada's conversations `one` and `two` (their ids), and bob.
fn world() -> (tempfile::TempDir, Store, String, String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("core.sqlite")).unwrap();
    let ada = store
        .create_user("ada", UserRole::Admin, "correct horse battery")
        .unwrap();
    let bob = store
        .create_user("bob", UserRole::Member, "correct horse battery")
        .unwrap();
    let one = store.create_conversation(&ada.id, "one").unwrap();
    let two = store.create_conversation(&ada.id, "two").unwrap();
    (dir, store, ada.id, bob.id, one.id, two.id)
}

fn approval(id: &str, user: &str, conversation: &str) -> Approval {
    Approval {
        id: id.to_owned(),
        user_id: user.to_owned(),
        conversation_id: conversation.to_owned(),
        call_id: "call-1".to_owned(),
        tool: "createApp".to_owned(),
        card: json!({"title": "Create the app notes", "sentence": "Creates a new app."}),
        created_at: 0,
        expires_at: 0,
    }
}

const ID: &str = "0123456789abcdef0123456789abcdef";

#[tokio::test]
async fn a_confirmation_is_decided_once_by_its_own_user_for_its_conversation() {
    let (_dir, store, ada, bob, one, two) = world();
    let assistant = Assistant::new("http://127.0.0.1:9/mcp".into());
    // Not held in another user's conversation.
    let refused = assistant
        .hold(&store, approval(ID, &bob, &one), Duration::from_secs(600))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::RecordNotFound);
    let (decision, expires_at) = assistant
        .hold(&store, approval(ID, &ada, &one), Duration::from_secs(600))
        .await
        .unwrap();
    let waiting = store.waiting_approvals(&ada).unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].expires_at, expires_at);

    let refusal = |result: Result<(), sasha_proto::AppError>| result.unwrap_err().code;
    assert_eq!(
        refusal(assistant.decide(&store, &bob, &one, ID, true).await),
        ErrorCode::RecordNotFound,
        "another user"
    );
    assert_eq!(
        refusal(assistant.decide(&store, &ada, &two, ID, true).await),
        ErrorCode::RecordNotFound,
        "another conversation"
    );
    assert_eq!(
        refusal(
            assistant
                .decide(&store, &ada, &one, "ffffffffffffffffffffffffffffffff", true)
                .await
        ),
        ErrorCode::RecordNotFound,
        "an unknown id"
    );
    assistant
        .decide(&store, &ada, &one, ID, false)
        .await
        .unwrap();
    assert_eq!(
        refusal(assistant.decide(&store, &ada, &one, ID, true).await),
        ErrorCode::RecordNotFound,
        "a replay"
    );
    assert!(!decision.await.unwrap(), "the turn is told: declined");
    assert!(store.waiting_approvals(&ada).unwrap().is_empty());
}

#[tokio::test]
async fn a_confirmation_nobody_decides_lapses_and_a_late_click_is_told_so() {
    let (_dir, store, ada, _bob, one, _two) = world();
    let assistant = Assistant::new("http://127.0.0.1:9/mcp".into());
    let (decision, _) = assistant
        .hold(&store, approval(ID, &ada, &one), Duration::from_secs(600))
        .await
        .unwrap();
    let waited = assistant
        .wait(
            &store,
            ID,
            decision,
            &CancellationToken::new(),
            Duration::from_millis(1),
        )
        .await;
    assert_eq!(waited, Waited::Ended(ApprovalOutcome::Lapsed));
    assert!(store.waiting_approvals(&ada).unwrap().is_empty());
    let late = assistant
        .decide(&store, &ada, &one, ID, true)
        .await
        .unwrap_err();
    assert_eq!(late.code, ErrorCode::Conflict);
    assert!(
        late.message.contains("within 10 minutes"),
        "{}",
        late.message
    );
}

/// What a test's subscriber wrote.
#[derive(Clone, Default)]
struct Written(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Written {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_lapse_is_logged_once_without_the_call() {
    let (_dir, store, ada, _bob, one, _two) = world();
    let assistant = Assistant::new("http://127.0.0.1:9/mcp".into());
    let mut secret = approval(ID, &ada, &one);
    secret.card =
        json!({"title": "t", "sentence": "s", "summary": {"arguments": {"password": "hunter2"}}});
    let (decision, _) = assistant
        .hold(&store, secret, Duration::from_secs(600))
        .await
        .unwrap();
    let written = Written::default();
    let sink = written.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .finish();
    // The test runtime is one thread: the wait logs on it.
    let _guard = tracing::subscriber::set_default(subscriber);
    let waited = assistant
        .wait(
            &store,
            ID,
            decision,
            &CancellationToken::new(),
            Duration::from_millis(1),
        )
        .await;
    assert_eq!(waited, Waited::Ended(ApprovalOutcome::Lapsed));
    let log = String::from_utf8(written.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains(" INFO "), "{log}");
    assert!(lines[0].contains("a confirmation lapsed"), "{log}");
    assert!(!log.contains("hunter2") && !log.contains(ID), "{log}");
}

#[tokio::test]
async fn a_cancelled_turn_ends_its_confirmation() {
    let (_dir, store, ada, _bob, one, _two) = world();
    let assistant = Assistant::new("http://127.0.0.1:9/mcp".into());
    let (decision, _) = assistant
        .hold(&store, approval(ID, &ada, &one), Duration::from_secs(600))
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let waited = assistant
        .wait(&store, ID, decision, &cancel, Duration::from_secs(600))
        .await;
    assert_eq!(waited, Waited::Ended(ApprovalOutcome::Cancelled));
    let late = assistant
        .decide(&store, &ada, &one, ID, true)
        .await
        .unwrap_err();
    assert_eq!(late.code, ErrorCode::Conflict);
    assert!(late.message.contains("cancelled"), "{}", late.message);
}

#[tokio::test]
async fn a_click_recorded_before_the_deadline_is_what_the_turn_does() {
    let (_dir, store, ada, _bob, one, _two) = world();
    let assistant = Assistant::new("http://127.0.0.1:9/mcp".into());
    let (decision, _) = assistant
        .hold(&store, approval(ID, &ada, &one), Duration::from_secs(600))
        .await
        .unwrap();
    assistant
        .decide(&store, &ada, &one, ID, true)
        .await
        .unwrap();
    // The deadline passes as the turn looks: the store already holds the
    // person's approval, so that is what the turn does.
    let waited = assistant
        .wait(
            &store,
            ID,
            decision,
            &CancellationToken::new(),
            Duration::ZERO,
        )
        .await;
    assert_eq!(waited, Waited::Approved);
}

#[tokio::test]
async fn turns_are_one_per_conversation_bounded_per_user_and_cancelled_by_their_user() {
    let assistant = Arc::new(Assistant::new("http://127.0.0.1:9/mcp".into()));
    let token = CancellationToken::new;
    let first = token();
    let running = assistant.claim("ada", "c1", first.clone()).unwrap();
    assert!(assistant.is_running("ada", "c1"));
    assert!(!assistant.is_running("bob", "c1"));
    assert_eq!(
        assistant.claim("ada", "c1", token()).unwrap_err().code,
        ErrorCode::Busy
    );
    assert!(!assistant.cancel("bob", "c1"), "another user's turn");
    assert!(!first.is_cancelled());
    assert!(assistant.cancel("ada", "c1"));
    assert!(first.is_cancelled());
    let other = assistant.claim("ada", "c2", token()).unwrap();
    drop(running);
    assert!(!assistant.is_running("ada", "c1"));
    assert!(!assistant.cancel("ada", "c1"), "none runs");
    assistant.claim("ada", "c1", token()).unwrap();
    drop(other);
    // A user's turns are bounded; another user's do not count against them.
    let held: Vec<_> = (0..super::MAX_TURNS_PER_USER)
        .map(|index| {
            assistant
                .claim("bob", &format!("b{index}"), token())
                .unwrap()
        })
        .collect();
    assert_eq!(
        assistant
            .claim("bob", "one-more", token())
            .unwrap_err()
            .code,
        ErrorCode::Busy
    );
    assistant.claim("cy", "c9", token()).unwrap();
    drop(held);
    assistant.claim("bob", "one-more", token()).unwrap();
}

/// Two studio-core replicas share the store: a click taken by the one
/// without the turn is recorded there and reaches the turn that waits on the
/// other, which runs it; the card is decided once.
#[tokio::test]
async fn a_click_on_another_replica_reaches_the_waiting_turn() {
    let (_dir, store, ada, _bob, one, _two) = world();
    let holding = Arc::new(Assistant::new("http://127.0.0.1:9/mcp".into()));
    let other = Assistant::new("http://127.0.0.1:9/mcp".into());
    assert_ne!(holding.replica(), other.replica());
    store.note_replica(holding.replica()).unwrap();
    let (decision, _) = holding
        .hold(&store, approval(ID, &ada, &one), Duration::from_secs(600))
        .await
        .unwrap();
    let waiting = tokio::spawn({
        let (holding, store) = (holding.clone(), store.clone());
        async move {
            holding
                .wait(
                    &store,
                    ID,
                    decision,
                    &CancellationToken::new(),
                    Duration::from_secs(600),
                )
                .await
        }
    });
    other.decide(&store, &ada, &one, ID, true).await.unwrap();
    assert_eq!(waiting.await.unwrap(), Waited::Approved);
    let replay = other
        .decide(&store, &ada, &one, ID, true)
        .await
        .unwrap_err();
    assert_eq!(replay.code, ErrorCode::RecordNotFound, "decided once");
}

/// A click for a card whose replica stopped (it no longer says it is alive)
/// is refused as expired, and every replica's heartbeat ends such cards:
/// nothing of them runs, while a live replica's cards keep waiting.
#[tokio::test]
async fn the_cards_of_a_stopped_replica_expire_and_a_live_ones_wait() {
    let (_dir, store, ada, _bob, one, two) = world();
    let stopped = Assistant::new("http://127.0.0.1:9/mcp".into());
    let live = Assistant::new("http://127.0.0.1:9/mcp".into());
    let other = Assistant::new("http://127.0.0.1:9/mcp".into());
    store.note_replica(live.replica()).unwrap();
    let _kept = stopped
        .hold(&store, approval(ID, &ada, &one), Duration::from_secs(600))
        .await
        .unwrap();
    let second = "fedcba9876543210fedcba9876543210";
    let _waits = live
        .hold(
            &store,
            approval(second, &ada, &two),
            Duration::from_secs(600),
        )
        .await
        .unwrap();
    let refused = other
        .decide(&store, &ada, &one, ID, true)
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Conflict, "{refused:?}");
    let expired: Vec<String> = store
        .expire_waiting_approvals()
        .unwrap()
        .into_iter()
        .map(|approval| approval.id)
        .collect();
    assert_eq!(expired, [ID.to_owned()], "the stopped replica's card ends");
    let waiting: Vec<String> = store
        .waiting_approvals(&ada)
        .unwrap()
        .into_iter()
        .map(|approval| approval.id)
        .collect();
    assert_eq!(
        waiting,
        [second.to_owned()],
        "the live replica's card waits"
    );
}
