//! The assistant's turns and confirmations in process: a confirmation is
//! decided once, by its own user, and turns are one per conversation and
//! bounded per user and in all. The routes are tested through the Studio
//! router (studio-core's `http/tests/assistant.rs`).

use super::Assistant;

#[tokio::test]
async fn a_confirmation_is_decided_once_by_its_own_user() {
    let assistant = Assistant::new("http://127.0.0.1:9/mcp".into());
    let (id, decision) = assistant.expect("ada");
    assert_eq!(id.len(), 32);
    assert!(!assistant.decide("bob", &id, true), "another user");
    assert!(!assistant.decide("ada", "0123456789abcdef0123456789abcdef", true));
    assert!(assistant.decide("ada", &id, false));
    assert!(!assistant.decide("ada", &id, true), "a replay");
    assert!(!decision.await.unwrap());
    // An abandoned one cannot be decided.
    let (id, decision) = assistant.expect("ada");
    drop(decision);
    assert!(!assistant.decide("ada", &id, true));
    let (id, _decision) = assistant.expect("ada");
    assistant.forget(&id);
    assert!(!assistant.decide("ada", &id, true));
}

#[tokio::test]
async fn turns_are_one_per_conversation_and_bounded_per_user() {
    let assistant = std::sync::Arc::new(Assistant::new("http://127.0.0.1:9/mcp".into()));
    let running = assistant.claim("ada", "c1").unwrap();
    assert_eq!(
        assistant.claim("ada", "c1").unwrap_err().code,
        sasha_proto::ErrorCode::Busy
    );
    let other = assistant.claim("ada", "c2").unwrap();
    drop(running);
    assistant.claim("ada", "c1").unwrap();
    drop(other);
    // A user's turns are bounded; another user's do not count against them.
    let held: Vec<_> = (0..super::MAX_TURNS_PER_USER)
        .map(|index| assistant.claim("bob", &format!("b{index}")).unwrap())
        .collect();
    assert_eq!(
        assistant.claim("bob", "one-more").unwrap_err().code,
        sasha_proto::ErrorCode::Busy
    );
    assistant.claim("cy", "c9").unwrap();
    drop(held);
    assistant.claim("bob", "one-more").unwrap();
}
