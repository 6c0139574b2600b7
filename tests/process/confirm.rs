//! `CoreService.Confirm` as the gateway uses it, over mTLS: a token issued
//! through one connection is redeemed through another (as another gateway
//! replica would), answers the idempotency key fixed at issue every time, and
//! is refused with one and the same answer for any other call.

use crate::common;

use std::ops::Deref;

use common::core::CoreWorld;
use sasha_proto::pb::{self};
use sasha_proto::{AppError, ErrorCode};
use sasha_service::grpc;
use sha2::Digest as _;
use studio_store::{Scope, TokenKind, UserRole};

const TOOL: &str = "app__expense_log__expenses__create";
const ARGUMENTS: &str = r#"{"record":{"amount":12,"note":"lunch"}}"#;
const NOT_VALID: &str = "the confirmation token is not valid for this call; ask the person again";

type Core = grpc::CoreClient;

/// data-worker and studio-core with three users: a staff member and a member
/// with apps:invoke access tokens, the staff member's chat-only token and an
/// API key that carries apps:invoke.
struct World {
    core: CoreWorld,
    staff: pb::Principal,
    member: pb::Principal,
    chat_only: pb::Principal,
    api_key: pb::Principal,
}

impl World {
    async fn start() -> World {
        let core = CoreWorld::start().await;
        let sam = core.user("sam", UserRole::Staff);
        let mia = core.user("mia", UserRole::Member);
        let invoke = [Scope::ChatUse, Scope::AppsInvoke];
        World {
            staff: core.bearer(&sam, TokenKind::Access, &invoke).await,
            member: core.bearer(&mia, TokenKind::Access, &invoke).await,
            chat_only: core
                .bearer(&sam, TokenKind::Access, &[Scope::ChatUse])
                .await,
            api_key: core.bearer(&sam, TokenKind::ApiKey, &invoke).await,
            core,
        }
    }
}

impl Deref for World {
    type Target = CoreWorld;

    fn deref(&self) -> &CoreWorld {
        &self.core
    }
}

fn issue(principal: &pb::Principal, key: &str) -> pb::ConfirmRequest {
    pb::ConfirmRequest {
        principal: Some(principal.clone()),
        tool: TOOL.into(),
        arguments_json: ARGUMENTS.into(),
        token: String::new(),
        idempotency_key: key.into(),
        decline: false,
    }
}

fn redeem(principal: &pb::Principal, token: &str) -> pb::ConfirmRequest {
    pb::ConfirmRequest {
        principal: Some(principal.clone()),
        tool: TOOL.into(),
        arguments_json: ARGUMENTS.into(),
        token: token.into(),
        idempotency_key: String::new(),
        decline: false,
    }
}

async fn refused(client: &mut Core, request: pb::ConfirmRequest) -> AppError {
    let status = client
        .confirm(request)
        .await
        .expect_err("the confirmation should be refused");
    AppError::from_status(&status)
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .try_into()
        .unwrap()
}

#[tokio::test]
async fn a_token_issued_on_one_connection_redeems_on_another_for_the_same_key() {
    let world = World::start().await;
    let mut first = world.client();
    let mut second = world.client();

    let before = now();
    let issued = first
        .confirm(issue(&world.staff, "key-1"))
        .await
        .unwrap()
        .into_inner();
    assert!(issued.token.starts_with("sasha_cf_"), "{}", issued.token);
    assert_eq!(issued.token.len(), "sasha_cf_".len() + 43);
    assert_eq!(issued.idempotency_key, "key-1");
    assert!(
        (before + 600..=now() + 600).contains(&issued.expires_at),
        "{}",
        issued.expires_at
    );

    // Core stores the token's sha256 and the call it is bound to, never the token.
    let rows = world.database().texts(
        "SELECT token_sha256, user_id, tool, arguments_sha256, idempotency_key
         FROM confirmations",
    );
    let [row] = rows.as_slice() else {
        panic!("one confirmation row: {rows:?}");
    };
    let [token_sha256, user_id, tool, arguments_sha256, key] = row.as_slice() else {
        panic!("five columns: {row:?}");
    };
    assert_eq!(
        *token_sha256,
        hex::encode(sha2::Sha256::digest(issued.token.as_bytes()))
    );
    assert_eq!(*user_id, world.staff.user_id);
    assert_eq!(tool, TOOL);
    assert_eq!(
        *arguments_sha256,
        hex::encode(sha2::Sha256::digest(ARGUMENTS.as_bytes()))
    );
    assert_eq!(key, "key-1");

    // Another replica redeems it: the key fixed at issue, and no new token.
    let redeemed = second
        .confirm(redeem(&world.staff, &issued.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        redeemed,
        pb::ConfirmReply {
            token: String::new(),
            idempotency_key: "key-1".into(),
            expires_at: issued.expires_at,
        }
    );
    // A retried redemption (from either connection) answers the same key, so
    // the write it replays lands once.
    for client in [&mut first, &mut second] {
        let again = client
            .confirm(redeem(&world.staff, &issued.token))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(again, redeemed);
    }
    let redeemed_at = world
        .database()
        .integers("SELECT redeemed_at FROM confirmations");
    assert!(
        matches!(redeemed_at.as_slice(), [Some(at)] if *at >= before),
        "{redeemed_at:?}"
    );
}

#[tokio::test]
async fn a_token_is_refused_alike_for_any_other_call() {
    let world = World::start().await;
    let mut client = world.client();
    let issued = client
        .confirm(issue(&world.staff, "key-1"))
        .await
        .unwrap()
        .into_inner();
    let token = issued.token.as_str();

    let other_user = redeem(&world.member, token);
    let other_tool = pb::ConfirmRequest {
        tool: "app__expense_log__expenses__delete".into(),
        ..redeem(&world.staff, token)
    };
    let other_arguments = pb::ConfirmRequest {
        arguments_json: r#"{"record":{"amount":13,"note":"lunch"}}"#.into(),
        ..redeem(&world.staff, token)
    };
    let respelled_arguments = pb::ConfirmRequest {
        arguments_json: r#"{"record": {"amount": 12, "note": "lunch"}}"#.into(),
        ..redeem(&world.staff, token)
    };
    let unknown = redeem(&world.staff, &format!("sasha_cf_{}", "A".repeat(43)));
    let wrong_prefix = redeem(&world.staff, &token.replacen("sasha_cf_", "sasha_ct_", 1));
    for (case, request) in [
        ("other user", other_user),
        ("other tool", other_tool),
        ("other arguments", other_arguments),
        ("respelled arguments", respelled_arguments),
        ("unknown token", unknown),
        ("wrong prefix", wrong_prefix),
    ] {
        let error = refused(&mut client, request).await;
        assert_eq!(error.code, ErrorCode::ConfirmationRequired, "{case}");
        assert_eq!(error.message, NOT_VALID, "{case}");
        assert!(!error.retryable, "{case}");
        assert_eq!(error.details, None, "{case}");
    }

    // None of that used the token up.
    let redeemed = client
        .confirm(redeem(&world.staff, token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(redeemed.idempotency_key, "key-1");

    // Once expired, it is refused the same way. (Core's clock cannot be moved,
    // so the row's expiry is.)
    world
        .database()
        .execute("UPDATE confirmations SET expires_at = $1", now() - 1);
    let error = refused(&mut client, redeem(&world.staff, token)).await;
    assert_eq!(error.code, ErrorCode::ConfirmationRequired);
    assert_eq!(error.message, NOT_VALID);

    // Issuing deletes the expired row.
    client.confirm(issue(&world.staff, "key-2")).await.unwrap();
    let keys = world
        .database()
        .texts("SELECT idempotency_key FROM confirmations");
    assert_eq!(keys, [["key-2"]]);
}

#[tokio::test]
async fn only_a_principal_with_apps_invoke_may_confirm() {
    let world = World::start().await;
    let mut client = world.client();
    let token = client
        .confirm(issue(&world.staff, "key-1"))
        .await
        .unwrap()
        .into_inner()
        .token;

    // Without apps:invoke, and as an API key (a system principal) even with
    // it: refused to issue and to redeem.
    for (case, principal) in [("chat only", &world.chat_only), ("api key", &world.api_key)] {
        for request in [issue(principal, "key-2"), redeem(principal, &token)] {
            let error = refused(&mut client, request).await;
            assert_eq!(error.code, ErrorCode::AccessDenied, "{case}");
        }
    }
    // No principal, or one without a user.
    let anonymous = pb::ConfirmRequest {
        principal: None,
        ..issue(&world.staff, "key-2")
    };
    let nobody = pb::ConfirmRequest {
        principal: Some(pb::Principal {
            user_id: String::new(),
            ..world.staff.clone()
        }),
        ..issue(&world.staff, "key-2")
    };
    for request in [anonymous, nobody] {
        let error = refused(&mut client, request).await;
        assert_eq!(error.code, ErrorCode::Unauthenticated);
    }
    let rows = world.database().count("SELECT count(*) FROM confirmations");
    assert_eq!(rows, 1, "no refused call issued a token");
}

#[tokio::test]
async fn inputs_are_bounded_and_named() {
    let world = World::start().await;
    let mut client = world.client();
    let token = client
        .confirm(issue(&world.staff, "key-1"))
        .await
        .unwrap()
        .into_inner()
        .token;
    let base = issue(&world.staff, "key-2");
    let cases = [
        (
            "tool",
            pb::ConfirmRequest {
                tool: String::new(),
                ..base.clone()
            },
        ),
        (
            "tool",
            pb::ConfirmRequest {
                tool: "t".repeat(201),
                ..base.clone()
            },
        ),
        (
            "arguments_json",
            pb::ConfirmRequest {
                arguments_json: "[1]".into(),
                ..base.clone()
            },
        ),
        (
            "arguments_json",
            pb::ConfirmRequest {
                arguments_json: format!(r#"{{"x":"{}"}}"#, "a".repeat(1024 * 1024)),
                ..base.clone()
            },
        ),
        (
            "idempotency_key",
            pb::ConfirmRequest {
                idempotency_key: String::new(),
                ..base.clone()
            },
        ),
        (
            "idempotency_key",
            pb::ConfirmRequest {
                idempotency_key: "k".repeat(201),
                ..base.clone()
            },
        ),
        // On redeem the key comes from the token; naming one is refused.
        (
            "idempotency_key",
            pb::ConfirmRequest {
                idempotency_key: "key-1".into(),
                ..redeem(&world.staff, &token)
            },
        ),
    ];
    for (field, request) in cases {
        let error = refused(&mut client, request).await;
        assert_eq!(error.code, ErrorCode::InputInvalid, "{field}");
        assert!(error.message.starts_with(field), "{}", error.message);
        assert_eq!(
            error.details,
            Some(serde_json::json!({ "field": field })),
            "{field}"
        );
    }
}

#[tokio::test]
async fn a_user_holds_at_most_a_hundred_pending_confirmations() {
    let world = World::start().await;
    let mut client = world.client();
    for n in 0..100 {
        client
            .confirm(issue(&world.staff, &format!("key-{n}")))
            .await
            .unwrap();
    }
    let error = refused(&mut client, issue(&world.staff, "key-100")).await;
    assert_eq!(error.code, ErrorCode::ResourceLimit);
    assert!(!error.retryable);
    assert!(
        error.message.starts_with("too many pending confirmations"),
        "{}",
        error.message
    );
    // Another user is not affected.
    client
        .confirm(issue(&world.member, "key-member"))
        .await
        .unwrap();
}

/// A decline is final (issue 21): it voids the token for its exact call, so
/// the same token never redeems afterwards; a decline must name a token, and
/// one for another call changes nothing.
#[tokio::test]
async fn a_declined_token_never_redeems() {
    let world = World::start().await;
    let mut client = world.client();
    let issued = client
        .confirm(issue(&world.staff, "key-decline"))
        .await
        .unwrap()
        .into_inner();
    let decline = |request: pb::ConfirmRequest| pb::ConfirmRequest {
        decline: true,
        ..request
    };
    let nameless = refused(&mut client, decline(issue(&world.staff, ""))).await;
    assert_eq!(nameless.code, ErrorCode::InputInvalid, "{nameless:?}");
    let other_user = refused(&mut client, decline(redeem(&world.member, &issued.token))).await;
    assert_eq!(
        other_user.code,
        ErrorCode::ConfirmationRequired,
        "{other_user:?}"
    );
    client
        .confirm(decline(redeem(&world.staff, &issued.token)))
        .await
        .unwrap();
    let after = refused(&mut client, redeem(&world.staff, &issued.token)).await;
    assert_eq!(after.code, ErrorCode::ConfirmationRequired, "{after:?}");
    let again = refused(&mut client, decline(redeem(&world.staff, &issued.token))).await;
    assert_eq!(again.code, ErrorCode::ConfirmationRequired, "{again:?}");
}
