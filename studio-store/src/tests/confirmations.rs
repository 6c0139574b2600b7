//! Confirmations: issue, redeem (once, however many redeem it at once),
//! decline, bounds, expiry and the per-user cap.

use super::*;

const TOOL: &str = "app__expense_log__expenses__create";
const ARGUMENTS: &str = r#"{"record":{"amount":12,"note":"lunch"}}"#;

fn call<'a>(user_id: &'a str, tool: &'a str, arguments_json: &'a str) -> ConfirmedCall<'a> {
    ConfirmedCall {
        user_id,
        tool,
        arguments_json,
    }
}

fn issue(store: &Store, user_id: &str, key: &str) -> IssuedConfirmation {
    store
        .issue_confirmation(&call(user_id, TOOL, ARGUMENTS), key)
        .unwrap()
        .unwrap()
}

fn confirmation_rows(fixture: &Fixture) -> i64 {
    fixture
        .raw()
        .query_row("SELECT count(*) FROM confirmations", (), |row| row.get(0))
        .unwrap()
}

on_both! {
fn a_confirmation_is_issued_then_redeemed_for_its_key() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let issued = issue(&fixture.store, &alice.id, "key-1");
    assert!(issued.token.starts_with("sasha_cf_"), "{issued:?}");
    assert_eq!(issued.token.len(), "sasha_cf_".len() + 43);
    assert_eq!(TokenKind::of_secret(&issued.token), None);
    assert_eq!(issued.idempotency_key, "key-1");
    assert_eq!(issued.expires_at, START + CONFIRMATION_TTL_SECONDS);
    assert!(!format!("{issued:?}").contains(&issued.token));

    // Another handle stands in for another process; redemption is by the
    // database, not by memory.
    fixture.advance(CONFIRMATION_TTL_SECONDS - 1);
    let redeemed = fixture
        .reopen()
        .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &issued.token)
        .unwrap()
        .unwrap();
    assert_eq!(
        redeemed,
        RedeemedConfirmation {
            idempotency_key: "key-1".into(),
            expires_at: START + CONFIRMATION_TTL_SECONDS,
            first_redemption: true,
        }
    );
    let redeemed_at: Option<i64> = fixture
        .raw()
        .query_row("SELECT redeemed_at FROM confirmations", (), |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(redeemed_at, Some(START + CONFIRMATION_TTL_SECONDS - 1));
}
}

on_both! {
fn a_second_redemption_answers_the_same_key() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let issued = issue(&fixture.store, &alice.id, "key-1");
    let redeem = || {
        fixture
            .store
            .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &issued.token)
            .unwrap()
            .unwrap()
    };
    let first = redeem();
    fixture.advance(60);
    let second = redeem();
    assert!(first.first_redemption);
    assert!(!second.first_redemption);
    assert_eq!(second.idempotency_key, "key-1");
    assert_eq!(second.expires_at, first.expires_at);
    // The first redemption's time is kept.
    let redeemed_at: Option<i64> = fixture
        .raw()
        .query_row("SELECT redeemed_at FROM confirmations", (), |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(redeemed_at, Some(START));
}
}

on_both! {
fn a_confirmation_is_refused_for_any_other_call_and_once_expired() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let bob = fixture.user("bob", UserRole::Member);
    let issued = issue(&fixture.store, &alice.id, "key-1");
    let other_tool = "app__expense_log__expenses__delete";
    let other_arguments = r#"{"record":{"amount":13,"note":"lunch"}}"#;
    // Same value, other spelling: the binding is byte for byte.
    let respelled = r#"{"record": {"amount": 12, "note": "lunch"}}"#;
    let forged = format!("sasha_cf_{}", "A".repeat(43));
    let check = |user_id: &str, tool: &str, arguments: &str, token: &str| {
        let refusal = fixture
            .store
            .redeem_confirmation(&call(user_id, tool, arguments), token)
            .unwrap()
            .unwrap_err();
        assert_eq!(
            refusal,
            ConfirmationRefusal::NotValid,
            "{user_id} {tool} {arguments} {token}"
        );
        assert_eq!(
            refusal.to_string(),
            "the confirmation token is not valid for this call; ask the person again"
        );
    };
    check(&bob.id, TOOL, ARGUMENTS, &issued.token);
    check(&alice.id, other_tool, ARGUMENTS, &issued.token);
    check(&alice.id, TOOL, other_arguments, &issued.token);
    check(&alice.id, TOOL, respelled, &issued.token);
    check(&alice.id, TOOL, ARGUMENTS, &forged);
    check(&alice.id, TOOL, ARGUMENTS, "");
    check(&alice.id, TOOL, ARGUMENTS, &issued.token[1..]);
    check(&alice.id, TOOL, ARGUMENTS, &format!("{}x", issued.token));
    check(&alice.id, TOOL, ARGUMENTS, &"sasha_cf_x".repeat(100));
    // The refusals did not consume it.
    assert!(
        fixture
            .store
            .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &issued.token)
            .unwrap()
            .is_ok()
    );
    // Valid until the last second before expires_at, refused from then on,
    // redeemed or not.
    let unredeemed = issue(&fixture.store, &alice.id, "key-2");
    fixture.advance(CONFIRMATION_TTL_SECONDS);
    check(&alice.id, TOOL, ARGUMENTS, &issued.token);
    check(&alice.id, TOOL, ARGUMENTS, &unredeemed.token);
}
}

on_both! {
fn confirmation_inputs_are_bounded() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let store = &fixture.store;
    let long_tool = "t".repeat(MAX_CONFIRMATION_TOOL_CHARS + 1);
    let padded = format!(
        r#"{{"x":"{}"}}"#,
        "a".repeat(MAX_CONFIRMATION_ARGUMENTS_BYTES - 7)
    );
    assert_eq!(padded.len(), MAX_CONFIRMATION_ARGUMENTS_BYTES + 1);
    let long_key = "k".repeat(MAX_IDEMPOTENCY_KEY_CHARS + 1);
    let check = |tool: &str, arguments: &str, key: &str, field: &str| {
        let refusal = store
            .issue_confirmation(&call(&alice.id, tool, arguments), key)
            .unwrap()
            .unwrap_err();
        let ConfirmationRefusal::InvalidInput { field: refused, .. } = &refusal else {
            panic!("{refusal:?}");
        };
        assert_eq!(*refused, field, "{refusal}");
        assert!(refusal.to_string().starts_with(field), "{refusal}");
    };
    check("", ARGUMENTS, "key", "tool");
    check(&long_tool, ARGUMENTS, "key", "tool");
    check(TOOL, &padded, "key", "arguments_json");
    check(TOOL, "[1, 2]", "key", "arguments_json");
    check(TOOL, "\"text\"", "key", "arguments_json");
    check(TOOL, "{\"a\": 1", "key", "arguments_json");
    check(TOOL, "{} {}", "key", "arguments_json");
    check(TOOL, "", "key", "arguments_json");
    check(TOOL, ARGUMENTS, "", "idempotency_key");
    check(TOOL, ARGUMENTS, &long_key, "idempotency_key");
    // The bounds are inclusive and count characters, not bytes.
    let widest_tool = "é".repeat(MAX_CONFIRMATION_TOOL_CHARS);
    let widest_key = "ü".repeat(MAX_IDEMPOTENCY_KEY_CHARS);
    let largest = format!(
        r#"{{"x":"{}"}}"#,
        "a".repeat(MAX_CONFIRMATION_ARGUMENTS_BYTES - 8)
    );
    assert_eq!(largest.len(), MAX_CONFIRMATION_ARGUMENTS_BYTES);
    let issued = store
        .issue_confirmation(&call(&alice.id, &widest_tool, &largest), &widest_key)
        .unwrap()
        .unwrap();
    assert_eq!(issued.idempotency_key, widest_key);
    // Redemption checks the call the same way.
    let refusal = store
        .redeem_confirmation(&call(&alice.id, TOOL, "[]"), &issued.token)
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(
            refusal,
            ConfirmationRefusal::InvalidInput {
                field: "arguments_json",
                ..
            }
        ),
        "{refusal:?}"
    );
    assert_eq!(confirmation_rows(&fixture), 1);
}
}

#[test]
fn only_the_sha256_of_a_confirmation_token_is_stored() {
    use sha2::Digest as _;

    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let issued = issue(&fixture.store, &alice.id, "key-1");
    type Row = (
        String,
        String,
        String,
        String,
        String,
        i64,
        i64,
        Option<i64>,
    );
    let row: Row = fixture
        .raw()
        .query_row(
            "SELECT token_sha256, user_id, tool, arguments_sha256, idempotency_key,
                    created_at, expires_at, redeemed_at
             FROM confirmations",
            (),
            |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                    row.get(6)?,
                    row.get(7)?,
                ))
            },
        )
        .unwrap();
    assert_eq!(
        row,
        (
            hex::encode(sha2::Sha256::digest(issued.token.as_bytes())),
            alice.id.clone(),
            TOOL.to_owned(),
            hex::encode(sha2::Sha256::digest(ARGUMENTS.as_bytes())),
            "key-1".to_owned(),
            START,
            START + CONFIRMATION_TTL_SECONDS,
            None,
        )
    );
    let random_part = &issued.token["sasha_cf_".len()..];
    drop(fixture.raw());
    let mut bytes = std::fs::read(fixture.path()).unwrap();
    if let Ok(wal) = std::fs::read(fixture.path().with_extension("sqlite-wal")) {
        bytes.extend(wal);
    }
    assert!(
        !bytes
            .windows(random_part.len())
            .any(|window| window == random_part.as_bytes()),
        "the token's text is in the database file"
    );
}

on_both! {
fn a_user_holds_at_most_a_hundred_live_confirmations() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let bob = fixture.user("bob", UserRole::Member);
    let first = issue(&fixture.store, &alice.id, "key-0");
    // Redeemed confirmations still count: they stay redeemable (for replay)
    // until they expire.
    fixture
        .store
        .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &first.token)
        .unwrap()
        .unwrap();
    fixture.advance(1);
    for n in 1..MAX_LIVE_CONFIRMATIONS_PER_USER {
        issue(&fixture.store, &alice.id, &format!("key-{n}"));
    }
    let refusal = fixture
        .store
        .issue_confirmation(&call(&alice.id, TOOL, ARGUMENTS), "key-100")
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(
            refusal,
            ConfirmationRefusal::TooManyPending { limit: 100, .. }
        ),
        "{refusal:?}"
    );
    assert!(
        refusal
            .to_string()
            .starts_with("too many pending confirmations"),
        "{refusal}"
    );
    assert_eq!(confirmation_rows(&fixture), MAX_LIVE_CONFIRMATIONS_PER_USER);
    // The cap is per user.
    issue(&fixture.store, &bob.id, "key-bob");
    // Once the oldest expires, there is room for exactly one more.
    fixture.advance(CONFIRMATION_TTL_SECONDS - 1);
    issue(&fixture.store, &alice.id, "key-100");
    assert!(
        fixture
            .store
            .issue_confirmation(&call(&alice.id, TOOL, ARGUMENTS), "key-101")
            .unwrap()
            .is_err()
    );
}
}

on_both! {
fn issuing_deletes_expired_confirmations() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let bob = fixture.user("bob", UserRole::Member);
    let old_alice = issue(&fixture.store, &alice.id, "old-alice");
    issue(&fixture.store, &bob.id, "old-bob");
    fixture.advance(CONFIRMATION_TTL_SECONDS / 2);
    issue(&fixture.store, &bob.id, "newer-bob");
    assert_eq!(confirmation_rows(&fixture), 3);
    fixture.advance(CONFIRMATION_TTL_SECONDS / 2);
    // Alice's issue clears every user's expired rows, not only hers.
    let fresh = issue(&fixture.store, &alice.id, "fresh");
    let keys: Vec<String> = fixture
        .raw()
        .prepare("SELECT idempotency_key FROM confirmations ORDER BY created_at, idempotency_key")
        .unwrap()
        .query_map((), |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(keys, ["newer-bob", "fresh"]);
    assert_eq!(
        fixture
            .store
            .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &old_alice.token)
            .unwrap(),
        Err(ConfirmationRefusal::NotValid)
    );
    assert!(
        fixture
            .store
            .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &fresh.token)
            .unwrap()
            .is_ok()
    );
}
}

on_both! {
fn confirmations_need_an_existing_user_and_go_with_it() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    assert_eq!(
        fixture
            .store
            .issue_confirmation(&call("no-such-user", TOOL, ARGUMENTS), "key")
            .unwrap(),
        Err(ConfirmationRefusal::UnknownUser)
    );
    let issued = issue(&fixture.store, &alice.id, "key");
    let raw = fixture.raw();
    raw.execute("DELETE FROM users WHERE id = ?1", [&alice.id])
        .unwrap();
    assert_eq!(confirmation_rows(&fixture), 0);
    assert_eq!(
        fixture
            .store
            .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &issued.token)
            .unwrap(),
        Err(ConfirmationRefusal::NotValid)
    );
}
}

on_both! {
/// Eight replicas redeem one confirmation at the same instant: every one
/// answers the key fixed at issue, and exactly one is its first redemption
/// (the one whose write runs; the others replay under the same key).
fn racing_redemptions_of_one_confirmation_redeem_it_once() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let handles = handles(&fixture, RACERS);
    for round in 0..3 {
        let key = format!("key-{round}");
        let issued = issue(&fixture.store, &alice.id, &key);
        let answers = race(&handles, |_, store| {
            store
                .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &issued.token)
                .map_err(|error| error.to_string())
        });
        let redeemed: Vec<RedeemedConfirmation> = answers
            .into_iter()
            .map(|answer| answer.unwrap().unwrap())
            .collect();
        assert!(
            redeemed.iter().all(|r| r.idempotency_key == key),
            "round {round}: {redeemed:?}"
        );
        assert_eq!(
            redeemed.iter().filter(|r| r.first_redemption).count(),
            1,
            "round {round}: {redeemed:?}"
        );
    }
}
}
