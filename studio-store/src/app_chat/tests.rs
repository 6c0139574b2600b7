//! App chat's conversations on both backends: the bounds (messages, bytes,
//! conversations in all, idle expiry) with the fixture's clock moved by hand,
//! replicas appending at once, and a conversation going with its user and
//! with its app's deletion.

use super::*;
use crate::tests::{Fixture, RACERS, handles, on_both, race};
use crate::{
    ACTOR_OPERATOR, MemberCaps, MemberDeploy, RevisionContent, RevisionOrigin, RevisionSurface,
    UserRole,
};

/// A fixture with the users `alice` and `bob` and the apps `apps`
/// registered; the users' ids.
fn world(fixture: &Fixture, apps: &[&str]) -> (String, String) {
    for app in apps {
        fixture
            .store
            .register_app(app, "rev-1", None, r#"{"actions":[]}"#, &Default::default())
            .unwrap();
    }
    (
        fixture.user("alice", UserRole::Member).id,
        fixture.user("bob", UserRole::Member).id,
    )
}

fn contents(messages: &[AppChatMessage]) -> Vec<&str> {
    messages
        .iter()
        .map(|message| message.content.as_str())
        .collect()
}

on_both! {
fn keeps_whole_exchanges_within_the_message_bound() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let (alice, bob) = world(&fixture, &["notes", "other"]);
    let limits = AppChatLimits {
        max_messages: 4,
        ..AppChatLimits::default()
    };
    for turn in 0..3 {
        store
            .record_app_chat(&alice, "notes", &format!("q{turn}"), &format!("a{turn}"), false, &limits)
            .unwrap();
    }
    let history = store.app_chat_history(&alice, "notes", &limits).unwrap();
    assert_eq!(contents(&history), ["q1", "a1", "q2", "a2"]);
    assert_eq!(history[0].role, AppChatRole::User);
    assert_eq!(history[1].role, AppChatRole::Assistant);
    // A fresh session starts over; other users and apps are separate.
    store
        .record_app_chat(&alice, "notes", "new", "start", true, &limits)
        .unwrap();
    assert_eq!(
        contents(&store.app_chat_history(&alice, "notes", &limits).unwrap()),
        ["new", "start"]
    );
    assert!(store.app_chat_history(&bob, "notes", &limits).unwrap().is_empty());
    assert!(store.app_chat_history(&alice, "other", &limits).unwrap().is_empty());
    // What is kept is the store's, not a copy of one handle's: another
    // replica's handle reads the same.
    let other = fixture.reopen();
    assert_eq!(
        contents(&other.app_chat_history(&alice, "notes", &limits).unwrap()),
        ["new", "start"]
    );
}
}

on_both! {
fn keeps_within_the_byte_bound() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let (alice, _) = world(&fixture, &["notes"]);
    let limits = AppChatLimits {
        max_bytes: 100,
        ..AppChatLimits::default()
    };
    let record = |prompt: String, answer: String| {
        store
            .record_app_chat(&alice, "notes", &prompt, &answer, false, &limits)
            .unwrap();
    };
    record("a".repeat(30), "b".repeat(30));
    record("c".repeat(21), "d".repeat(21));
    let history = store.app_chat_history(&alice, "notes", &limits).unwrap();
    assert_eq!(history.len(), 2);
    assert!(history[0].content.starts_with('c'));
    // One exchange over the bound alone is shortened, not dropped.
    record("e".repeat(80), "f".repeat(80));
    let history = store.app_chat_history(&alice, "notes", &limits).unwrap();
    assert_eq!(history.len(), 2);
    let total: usize = history.iter().map(|m| m.content.len()).sum();
    assert!(total <= 100, "{total}");
    assert!(history[1].content.ends_with(TRUNCATED_NOTE));
    assert!(history[1].content.starts_with('f'));
}
}

on_both! {
fn idle_conversations_expire() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let (alice, _) = world(&fixture, &["notes"]);
    let limits = AppChatLimits::default();
    store
        .record_app_chat(&alice, "notes", "q", "a", false, &limits)
        .unwrap();
    fixture.advance(59 * 60);
    assert_eq!(
        store.app_chat_history(&alice, "notes", &limits).unwrap().len(),
        2,
        "still fresh"
    );
    // Reading it counted as use, so the hour runs from then.
    fixture.advance(59 * 60);
    assert_eq!(
        store.app_chat_history(&alice, "notes", &limits).unwrap().len(),
        2
    );
    fixture.advance(60 * 60);
    assert!(store.app_chat_history(&alice, "notes", &limits).unwrap().is_empty());
    assert_eq!(
        store.app_chat_conversation_count().unwrap(),
        0,
        "an expired conversation is forgotten"
    );
    // Recording into an expired conversation starts a new one.
    store
        .record_app_chat(&alice, "notes", "q1", "a1", false, &limits)
        .unwrap();
    fixture.advance(2 * 60 * 60);
    store
        .record_app_chat(&alice, "notes", "q2", "a2", false, &limits)
        .unwrap();
    assert_eq!(
        contents(&store.app_chat_history(&alice, "notes", &limits).unwrap()),
        ["q2", "a2"]
    );
}
}

on_both! {
fn the_least_recently_used_conversation_is_evicted() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let (user, _) = world(&fixture, &["a", "b", "c", "d"]);
    let limits = AppChatLimits {
        max_conversations: 3,
        ..AppChatLimits::default()
    };
    // All within one second: the order of use, not the clock, decides.
    for app in ["a", "b", "c"] {
        store.record_app_chat(&user, app, "q", "r", false, &limits).unwrap();
    }
    // "a" is used again, so "b" is now the least recently used.
    assert_eq!(store.app_chat_history(&user, "a", &limits).unwrap().len(), 2);
    store.record_app_chat(&user, "d", "q", "r", false, &limits).unwrap();
    assert_eq!(store.app_chat_conversation_count().unwrap(), 3);
    assert!(store.app_chat_history(&user, "b", &limits).unwrap().is_empty());
    for app in ["a", "c", "d"] {
        assert_eq!(store.app_chat_history(&user, app, &limits).unwrap().len(), 2, "{app}");
    }
}
}

on_both! {
/// Eight replicas finish a turn of one conversation at the same instant:
/// none is lost while the bound has room, and the bounds hold when it has
/// none, whole exchanges only.
fn racing_appends_to_one_conversation_keep_every_bound() {
    let fixture = Fixture::new();
    let (alice, _) = world(&fixture, &["notes", "todo", "tasks"]);
    let replicas = handles(&fixture, RACERS);
    let roomy = AppChatLimits::default();
    race(&replicas, |n, store| {
        store
            .record_app_chat(&alice, "notes", &format!("q{n}"), &format!("a{n}"), false, &roomy)
            .unwrap();
    });
    let kept = fixture.store.app_chat_history(&alice, "notes", &roomy).unwrap();
    assert_eq!(kept.len(), 2 * RACERS, "no exchange was lost: {kept:?}");
    // Then once with only the message bound binding, once with only the
    // byte bound ("qN" and "answer N" weigh 10 bytes an exchange).
    let message_bound = AppChatLimits {
        max_messages: 6,
        ..AppChatLimits::default()
    };
    let byte_bound = AppChatLimits {
        max_bytes: 25,
        ..AppChatLimits::default()
    };
    for (app, limits, kept_messages) in [("todo", message_bound, 6), ("tasks", byte_bound, 4)] {
        race(&replicas, |n, store| {
            store
                .record_app_chat(&alice, app, &format!("q{n}"), &format!("answer {n}"), false, &limits)
                .unwrap();
        });
        let kept = fixture.store.app_chat_history(&alice, app, &limits).unwrap();
        assert_eq!(kept.len(), kept_messages, "{app}: {kept:?}");
        let bytes: usize = kept.iter().map(|m| m.content.len()).sum();
        assert!(bytes <= limits.max_bytes, "{app}: {bytes}");
        for exchange in kept.chunks(2) {
            assert_eq!(exchange[0].role, AppChatRole::User);
            assert_eq!(exchange[1].role, AppChatRole::Assistant);
            let n = exchange[0].content.strip_prefix('q').unwrap();
            assert_eq!(exchange[1].content, format!("answer {n}"), "{kept:?}");
        }
    }
}
}

on_both! {
/// Eight replicas each start a conversation at the same instant with room
/// for three: exactly three are kept.
fn racing_new_conversations_never_pass_the_cap() {
    let fixture = Fixture::new();
    let apps: Vec<String> = (0..RACERS).map(|n| format!("app-{n}")).collect();
    let names: Vec<&str> = apps.iter().map(String::as_str).collect();
    let (alice, _) = world(&fixture, &names);
    let limits = AppChatLimits {
        max_conversations: 3,
        ..AppChatLimits::default()
    };
    let replicas = handles(&fixture, RACERS);
    race(&replicas, |n, store| {
        store
            .record_app_chat(&alice, &apps[n], "q", "a", false, &limits)
            .unwrap();
    });
    assert_eq!(fixture.store.app_chat_conversation_count().unwrap(), 3);
}
}

on_both! {
fn conversations_go_with_their_user_and_their_deleted_app() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let (alice, bob) = world(&fixture, &["notes", "tasks"]);
    let limits = AppChatLimits::default();
    for user in [&alice, &bob] {
        for app in ["notes", "tasks"] {
            store.record_app_chat(user, app, "q", "a", false, &limits).unwrap();
        }
    }
    // Withdrawing keeps them (restoring brings the app back as it was);
    // deleting the package removes the app's.
    store.withdraw_app("tasks", ACTOR_OPERATOR).unwrap().unwrap();
    assert_eq!(store.app_chat_conversation_count().unwrap(), 4);
    store.record_app_deleted("tasks", ACTOR_OPERATOR).unwrap().unwrap();
    assert_eq!(store.app_chat_conversation_count().unwrap(), 2);
    assert!(store.app_chat_history(&alice, "tasks", &limits).unwrap().is_empty());
    // Removing a user removes theirs.
    store.remove_user("bob", ACTOR_OPERATOR).unwrap();
    assert_eq!(store.app_chat_conversation_count().unwrap(), 1);
    assert_eq!(store.app_chat_history(&alice, "notes", &limits).unwrap().len(), 2);
    // A conversation needs a user and an app that exist.
    assert!(store.record_app_chat("nobody", "notes", "q", "a", false, &limits).is_err());
    assert!(store.record_app_chat(&alice, "never-seen", "q", "a", false, &limits).is_err());

    // Deleting a member app removes its conversations too.
    let resource = crate::ledger::test_resource("memo", "<p>memo</p>");
    store
        .deploy_member_app(
            "memo",
            &MemberDeploy {
                name: "Memo",
                author_id: &alice,
                expected_revision: None,
                content: RevisionContent {
                    resource: &resource,
                    files: vec![("APP.md", b"---\n".as_slice())],
                },
                origin: RevisionOrigin::authored(
                    RevisionSurface::Studio,
                    &alice,
                    "deploy",
                    crate::tests::START,
                ),
                schema_hash: None,
                actions_json: "[]",
                read_policy_json: "{}",
                caps: MemberCaps {
                    instance: 10,
                    per_author: 10,
                    author_bytes: 1 << 20,
                },
                retention: 8,
            },
        )
        .unwrap()
        .unwrap();
    store.record_app_chat(&alice, "memo", "q", "a", false, &limits).unwrap();
    assert_eq!(store.app_chat_conversation_count().unwrap(), 2);
    assert!(store.delete_member_app("memo", &alice).unwrap());
    assert_eq!(store.app_chat_conversation_count().unwrap(), 1);
}
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
