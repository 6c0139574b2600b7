//! Suggestions: recording, listing, the daily cap under races, and who they belong to.

use super::*;

fn suggestion(summary: &str) -> Suggestion {
    Suggestion {
        kind: SuggestionKind::Friction,
        severity: SuggestionSeverity::Medium,
        summary: summary.to_owned(),
        detail: None,
        metadata: SuggestionMetadata::default(),
    }
}

fn record(store: &Store, user_id: &str, summary: &str) -> String {
    store
        .record_suggestion(user_id, &suggestion(summary))
        .unwrap()
        .unwrap()
}

fn summaries(store: &Store, limit: u32) -> Vec<String> {
    store
        .suggestions(limit)
        .unwrap()
        .into_iter()
        .map(|suggestion| suggestion.summary)
        .collect()
}

on_both! {
fn a_suggestion_is_recorded_and_read_back_whole() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let full = Suggestion {
        kind: SuggestionKind::Bug,
        severity: SuggestionSeverity::High,
        summary: "Creating an expense answered a conflict without naming the field.".into(),
        detail: Some("First line.\n\tSecond line.".into()),
        metadata: SuggestionMetadata {
            app_id: Some("expense-log".into()),
            tool: Some("app__expense_log__expenses__create".into()),
            error_code: Some("APP_CONFLICT".into()),
            diagnostic_id: Some("0193c5e2-7a4b-7c3d-9e8f-1a2b3c4d5e6f".into()),
        },
    };
    let id = fixture
        .store
        .record_suggestion(&alice.id, &full)
        .unwrap()
        .unwrap();
    let parsed = uuid::Uuid::parse_str(&id).unwrap();
    assert_eq!(parsed.get_version_num(), 7, "{id}");
    assert_eq!(id, parsed.hyphenated().to_string());
    let bare = record(
        &fixture.store,
        &alice.id,
        "A bare suggestion, nothing else.",
    );

    // Another process (the admin CLI) reads what core recorded.
    let stored = fixture.reopen().suggestions(10).unwrap();
    assert_eq!(
        stored,
        [
            StoredSuggestion {
                id: bare,
                created_at: START,
                user_id: alice.id.clone(),
                username: "alice".into(),
                kind: SuggestionKind::Friction,
                severity: SuggestionSeverity::Medium,
                summary: "A bare suggestion, nothing else.".into(),
                detail: None,
                metadata: SuggestionMetadata::default(),
            },
            StoredSuggestion {
                id: id.clone(),
                created_at: START,
                user_id: alice.id.clone(),
                username: "alice".into(),
                kind: full.kind,
                severity: full.severity,
                summary: full.summary.clone(),
                detail: full.detail.clone(),
                metadata: full.metadata.clone(),
            },
        ]
    );

    // Stored as the table says: wire spellings, metadata as camelCase JSON,
    // and SQL NULL for what was not given.
    let raw = fixture.raw();
    let row: (String, String, String, Option<String>) = raw
        .query_row(
            "SELECT user_id, kind, severity, metadata_json FROM suggestions WHERE id = ?1",
            [&id],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .unwrap();
    assert_eq!(row.0, alice.id);
    assert_eq!((row.1.as_str(), row.2.as_str()), ("bug", "high"));
    let metadata: serde_json::Value = serde_json::from_str(&row.3.unwrap()).unwrap();
    assert_eq!(
        metadata,
        serde_json::json!({
            "appId": "expense-log",
            "tool": "app__expense_log__expenses__create",
            "errorCode": "APP_CONFLICT",
            "diagnosticId": "0193c5e2-7a4b-7c3d-9e8f-1a2b3c4d5e6f"
        })
    );
    let nulls: (Option<String>, Option<String>) = raw
        .query_row(
            "SELECT detail, metadata_json FROM suggestions WHERE summary LIKE 'A bare%'", (),
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(nulls, (None, None));

    // As admins read it: camelCase, absent detail and metadata left out.
    let lines: Vec<serde_json::Value> = stored
        .iter()
        .map(|suggestion| serde_json::to_value(suggestion).unwrap())
        .collect();
    assert_eq!(
        lines[0],
        serde_json::json!({
            "id": stored[0].id,
            "createdAt": START,
            "userId": alice.id,
            "username": "alice",
            "kind": "friction",
            "severity": "medium",
            "summary": "A bare suggestion, nothing else."
        })
    );
    assert_eq!(lines[1]["metadata"], metadata);
    assert_eq!(lines[1]["detail"], "First line.\n\tSecond line.");
}
}

on_both! {
fn suggestions_are_listed_newest_first_up_to_the_limit() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let bob = fixture.user("bob", UserRole::Staff);
    record(&fixture.store, &alice.id, "first, from alice");
    fixture.advance(10);
    record(&fixture.store, &bob.id, "second, from bob");
    // Two in the same second keep their order (ids are time-ordered).
    record(&fixture.store, &alice.id, "third, same second");
    fixture.advance(1);
    record(&fixture.store, &bob.id, "fourth, from bob");
    assert_eq!(
        summaries(&fixture.store, 100),
        [
            "fourth, from bob",
            "third, same second",
            "second, from bob",
            "first, from alice"
        ]
    );
    assert_eq!(
        summaries(&fixture.store, 2),
        ["fourth, from bob", "third, same second"]
    );
    assert!(summaries(&fixture.store, 0).is_empty());
    let usernames: Vec<String> = fixture
        .store
        .suggestions(10)
        .unwrap()
        .into_iter()
        .map(|suggestion| suggestion.username)
        .collect();
    assert_eq!(usernames, ["bob", "alice", "bob", "alice"]);
}
}

on_both! {
fn a_user_records_at_most_fifty_suggestions_in_any_24_hours() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let bob = fixture.user("bob", UserRole::Member);
    // 20 now, 30 an hour later: the cap is reached.
    for n in 0..20 {
        record(&fixture.store, &alice.id, &format!("early suggestion {n}"));
    }
    fixture.advance(3600);
    for n in 0..30 {
        record(&fixture.store, &alice.id, &format!("later suggestion {n}"));
    }
    let too_many = SuggestionRefusal::TooMany {
        limit: MAX_SUGGESTIONS_PER_DAY,
        window_hours: 24,
    };
    assert_eq!(
        fixture
            .store
            .record_suggestion(&alice.id, &suggestion("one too many"))
            .unwrap(),
        Err(too_many.clone())
    );
    assert_eq!(
        too_many.to_string(),
        "too many suggestions: at most 50 per user in any 24 hours"
    );
    // Another handle on the file (another process) counts the same rows.
    assert_eq!(
        fixture
            .reopen()
            .record_suggestion(&alice.id, &suggestion("one too many"))
            .unwrap(),
        Err(too_many.clone())
    );
    // Another user is not affected.
    record(&fixture.store, &bob.id, "bob is not limited by alice");

    // The window rolls: one second before the first 20 are 24 hours old,
    // still refused; at exactly 24 hours they no longer count, so 20 more fit.
    fixture.advance(SUGGESTION_WINDOW_SECONDS - 3600 - 1);
    assert_eq!(
        fixture
            .store
            .record_suggestion(&alice.id, &suggestion("still too many"))
            .unwrap(),
        Err(too_many.clone())
    );
    fixture.advance(1);
    for n in 0..20 {
        record(&fixture.store, &alice.id, &format!("next day {n}"));
    }
    assert_eq!(
        fixture
            .store
            .record_suggestion(&alice.id, &suggestion("again too many"))
            .unwrap(),
        Err(too_many)
    );
    let alice_rows: i64 = fixture
        .raw()
        .query_row(
            "SELECT count(*) FROM suggestions WHERE user_id = ?1",
            [&alice.id],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(alice_rows, 70, "refused suggestions are not stored");
}
}

on_both! {
fn racing_suggestions_never_exceed_the_cap() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    for n in 0..40 {
        record(&fixture.store, &alice.id, &format!("suggestion {n}"));
    }
    // Four processes' handles race for the last ten places.
    let handles: Vec<Store> = (0..4).map(|_| fixture.reopen()).collect();
    let recorded: usize = std::thread::scope(|scope| {
        let threads: Vec<_> = handles
            .iter()
            .map(|store| {
                let user_id = alice.id.as_str();
                scope.spawn(move || {
                    (0..10)
                        .filter(|n| {
                            store
                                .record_suggestion(user_id, &suggestion(&format!("race {n}")))
                                .unwrap()
                                .is_ok()
                        })
                        .count()
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|thread| thread.join().unwrap())
            .sum()
    });
    assert_eq!(recorded, 10);
    assert_eq!(fixture.store.suggestions(100).unwrap().len(), 50);
}
}

on_both! {
fn suggestions_need_an_existing_user_and_go_with_it() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    assert_eq!(
        fixture
            .store
            .record_suggestion("no-such-user", &suggestion("from nobody at all"))
            .unwrap(),
        Err(SuggestionRefusal::UnknownUser)
    );
    record(&fixture.store, &alice.id, "from alice, who then leaves");
    let raw = fixture.raw();
    raw.execute("DELETE FROM users WHERE id = ?1", [&alice.id])
        .unwrap();
    assert!(fixture.store.suggestions(10).unwrap().is_empty());
}
}
