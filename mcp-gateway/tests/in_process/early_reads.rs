//! A read (a table's, or an action's that only reads) runs beside its
//! caller's fresh check (`speculate`), and its
//! early answer is released only to a call whose fresh request is exactly
//! the one sent: a grant changed, revoked, or a credential revoked a moment
//! ago refuse or change the very next read all the same, and a change never
//! runs early.

use std::sync::atomic::Ordering;

use serde_json::json;
use studio_store::{AppAccess, Scope};

use crate::mcp::{Exchange, Mcp, confirmed_create, structured};
use crate::world::World;

const LIST: &str = "app__expense_log__expenses__list";

/// (used, discarded) early answers so far.
fn counts(world: &World) -> (u64, u64) {
    let speculation = world.gateway().speculation();
    (
        speculation.used.load(Ordering::SeqCst),
        speculation.discarded.load(Ordering::SeqCst),
    )
}

fn amounts(listed: &Exchange) -> Vec<f64> {
    structured(listed)["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["amount"].as_f64().unwrap())
        .collect()
}

async fn list(client: &mut Mcp) -> Exchange {
    client
        .call(
            LIST,
            json!({"orderBy": [{"field": "amount", "direction": "asc"}]}),
        )
        .await
}

/// A sessionless `tools/call` of [`LIST`] by `token` sending `body` and
/// declaring `declared` bytes: the status and the JSON answer.
async fn raw_list(
    world: &World,
    token: &str,
    declared: usize,
    body: axum::body::Body,
) -> (u16, serde_json::Value) {
    use http_body_util::BodyExt as _;
    let request = http::Request::post("/mcp")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", crate::mcp::SESSIONLESS)
        .header("mcp-method", "tools/call")
        .header("mcp-name", LIST)
        .header("authorization", format!("Bearer {token}"))
        .header("content-length", declared)
        .body(body)
        .unwrap();
    let response = tower::ServiceExt::oneshot(world.router(), request)
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn an_early_read_is_released_only_to_the_same_fresh_request() {
    let world = World::start().await;
    let grant = |access| {
        world
            .store
            .grant(
                "expense-log",
                &world.member.id,
                access,
                Some(&world.staff.id),
            )
            .unwrap()
    };
    grant(AppAccess::Use);
    let member_token = world.token(&world.member, &[Scope::ChatUse, Scope::AppsInvoke]);
    let mut staff = world.client(&world.staff_token).eliciting(|_| json!({}));
    let mut member = world.client(&member_token).eliciting(|_| json!({}));
    let category = confirmed_create(
        &mut staff,
        "app__expense_log__categories__create",
        json!({"values": {"name": "Travel"}}),
    )
    .await["id"]
        .as_i64()
        .unwrap();
    for (staffs, amount) in [(true, 99.0), (false, 7.0), (false, 8.0)] {
        confirmed_create(
            if staffs { &mut staff } else { &mut member },
            "app__expense_log__expenses__create",
            json!({"values": {"spent_on": "2026-09-08", "amount": amount, "category_id": category}}),
        )
        .await;
    }
    // Changes never run early: the creates left nothing behind.
    assert_eq!(counts(&world), (0, 0));

    // Core answered for the member and expense-log a moment ago (the
    // creates), so each list runs beside its check and takes its answer:
    // the member's own rows only, as without it.
    assert_eq!(amounts(&list(&mut member).await), [7.0, 8.0]);
    assert_eq!(amounts(&list(&mut member).await), [7.0, 8.0]);
    assert_eq!(counts(&world), (2, 0));

    // An action that only reads runs early too, on input its schema
    // accepts; input it refuses is never sent early, and the call refuses
    // it as ever.
    let totals = "app__expense_log__category_totals";
    let range = json!({"from": "2026-09-01", "to": "2026-09-30"});
    for _ in 0..2 {
        let answered = member.call(totals, range.clone()).await;
        assert_eq!(
            structured(&answered)["groups"],
            json!([{"category_id": category, "total": 15.0, "entries": 2}])
        );
    }
    assert_eq!(counts(&world), (4, 0));
    let refused = member.call(totals, json!({"from": "September"})).await;
    assert_eq!(
        crate::mcp::tool_error(&refused)["code"],
        "APP_INPUT_INVALID"
    );
    assert_eq!(counts(&world), (4, 0));

    // A read data-worker refuses leaves no early answer: the call itself
    // answers the refusal.
    let refused = member
        .call(
            LIST,
            json!({"where": [{"field": "no_such_column", "operator": "eq", "value": 1}]}),
        )
        .await;
    assert_eq!(
        crate::mcp::tool_error(&refused)["code"],
        "APP_INPUT_INVALID",
        "{:?}",
        refused.body
    );
    assert_eq!(counts(&world), (4, 0));

    // The grant raised to manage: the early read went with `use`, the fresh
    // request carries `manage`, so the early answer is dropped and the call
    // asks again (and remembers the new answer for the next read).
    grant(AppAccess::Manage);
    assert_eq!(amounts(&list(&mut member).await), [7.0, 8.0]);
    assert_eq!(counts(&world), (4, 1));
    assert_eq!(amounts(&list(&mut member).await), [7.0, 8.0]);
    assert_eq!(counts(&world), (5, 1));

    // Revoked: the early read still runs on the answer remembered a moment
    // ago, and the very next call is refused all the same, with no row in
    // its answer.
    world
        .store
        .revoke("expense-log", &world.member.id, Some(&world.staff.id))
        .unwrap();
    let refused = list(&mut member).await;
    assert_eq!(refused.error()["code"], -32602, "{:?}", refused.body);
    assert!(!refused.body.to_string().contains("amount"));
    assert_eq!(counts(&world), (5, 2));

    // Granted `use` again: the early read went on the last answer
    // remembered (`manage`), so it is dropped once, and then taken again.
    grant(AppAccess::Use);
    assert_eq!(amounts(&list(&mut member).await), [7.0, 8.0]);
    assert_eq!(counts(&world), (5, 3));
    assert_eq!(amounts(&list(&mut member).await), [7.0, 8.0]);
    assert_eq!(counts(&world), (6, 3));

    // A body read before its check is held to what it declared, and one the
    // connection fails to deliver is refused as such: both before anything
    // is sent, said in the envelope.
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                      "params": {"name": LIST, "arguments": {}}})
    .to_string();
    let (status, refused) = raw_list(&world, &member_token, 10, call.clone().into()).await;
    assert_eq!(status, 400);
    assert_eq!(refused["code"], "APP_INPUT_INVALID");
    assert_eq!(
        refused["message"],
        "the request body is longer than its Content-Length"
    );
    let broken = futures::stream::iter([
        Ok(axum::body::Bytes::from(call[..20].to_owned())),
        Err(std::io::Error::other("connection reset")),
    ]);
    let (status, refused) = raw_list(
        &world,
        &member_token,
        call.len(),
        axum::body::Body::from_stream(broken),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(refused["code"], "APP_INPUT_INVALID");
    assert_eq!(refused["message"], "the request body could not be read");
    assert!(refused["diagnosticId"].is_string());
    assert_eq!(counts(&world), (6, 3));

    // A credential revoked a moment ago: 401 on the very next call, the
    // early answer dropped.
    let before = counts(&world);
    assert!(world.store.revoke_token(&member_token).unwrap());
    let refused = list(&mut member).await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.body["code"], "APP_UNAUTHENTICATED");
    assert_eq!(counts(&world), (before.0, before.1 + 1));

    // A credential core never answered for reads nothing early.
    let forged = world.client("sasha_at_forged").call(LIST, json!({})).await;
    assert_eq!(forged.status, 401);
    assert_eq!(counts(&world), (before.0, before.1 + 1));

    // With `SASHA_GATEWAY_EARLY_READS=0`, every read waits for its check.
    let off = world.gateway_without_early_reads();
    let mut staff = Mcp::new(
        off.router.clone(),
        vec![(
            "authorization".into(),
            format!("Bearer {}", world.staff_token),
        )],
        crate::mcp::SESSIONLESS,
    );
    for _ in 0..3 {
        assert_eq!(amounts(&list(&mut staff).await), [99.0]);
    }
    let speculation = off.gateway.speculation();
    assert_eq!(
        (
            speculation.used.load(Ordering::SeqCst),
            speculation.discarded.load(Ordering::SeqCst)
        ),
        (0, 0)
    );
}
