//! Horizontal gateway replicas: two mcp-gateway processes in front of one
//! studio-core and one data-worker. A sessionless client spreads its requests
//! over both (a confirmation issued by one replica is redeemed by the other);
//! one replica is killed while writes are in flight and the clients retry on the
//! survivor with the same idempotency keys; a session-bound client initializes
//! again on the survivor. Every write lands exactly once.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::mcp::{LEGACY, Mcp, structured};
use common::{Harness, copy_dir};
use serde_json::{Value, json};
use studio_store::{Scope, TokenKind, UserRole};

const WRITES: usize = 80;
const WORKERS: usize = 4;

/// One confirmed create through the sessionless input-request round trip: the
/// question from `first`, the accepted answer to `second`. `Err` when a replica
/// could not be reached.
async fn confirmed_create(
    first: &mut Mcp,
    second: &mut Mcp,
    arguments: &Value,
) -> Result<Value, String> {
    let tool = "app__expense_log__expenses__create";
    let asked = first
        .try_request("tools/call", json!({"name": tool, "arguments": arguments}))
        .await?;
    if asked.status != 200 {
        return Err(format!("status {}", asked.status));
    }
    let state = asked.result()["requestState"]
        .as_str()
        .ok_or_else(|| format!("no input request: {}", asked.body))?
        .to_owned();
    let answered = second
        .try_request(
            "tools/call",
            json!({"name": tool, "arguments": arguments, "requestState": state, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}}),
        )
        .await?;
    if answered.status != 200 {
        return Err(format!("status {}", answered.status));
    }
    Ok(structured(&answered).clone())
}

#[tokio::test]
async fn a_replica_dies_and_every_write_lands_exactly_once() {
    let harness = Harness::new();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packages/valid/expense-log");
    copy_dir(&fixture, &harness.path().join("docs/apps/expense-log"));
    let store = harness.store();
    let staff = store
        .create_user("sam", UserRole::Staff, "correct horse battery")
        .unwrap();
    let backends = harness.start_backends().await;
    let second = harness.start_gateway(&backends).await;
    let scopes: BTreeSet<Scope> = [Scope::ChatUse, Scope::AppsInvoke].into_iter().collect();
    let token = store
        .mint_token(&staff.id, TokenKind::Access, &scopes, None)
        .unwrap();
    let urls = [
        format!("http://{}/mcp", backends.gateway.listener("http")),
        format!("http://{}/mcp", second.listener("http")),
    ];
    let client = |replica: usize| Mcp::sessionless(&urls[replica], &token).eliciting(|_| json!({}));

    let category = confirmed_create_category(&mut client(0), &mut client(1)).await;

    // A session-bound client opens its session on the replica that will die
    // and writes once.
    let bearer = vec![("authorization".to_owned(), format!("Bearer {token}"))];
    let mut session = Mcp::new(&urls[0], bearer.clone(), LEGACY)
        .eliciting(|_| json!({"action": "accept", "content": {"confirm": true}}));
    session.initialize().await;
    let session_write = json!({"values": {"spent_on": "2026-09-01", "amount": 1, "category_id": category}, "idempotencyKey": "session-write"});
    let first_try = session
        .call("app__expense_log__expenses__create", session_write.clone())
        .await;
    let session_row = structured(&first_try)["id"].clone();

    // Writers spread each write over both replicas until one dies; then they
    // retry on the survivor with the same idempotency key.
    let done = Arc::new(AtomicUsize::new(0));
    let retried = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for worker in 0..WORKERS {
        let (urls, token, done, retried) =
            (urls.clone(), token.clone(), done.clone(), retried.clone());
        writers.push(tokio::spawn(async move {
            let client =
                |replica: usize| Mcp::sessionless(&urls[replica], &token).eliciting(|_| json!({}));
            let mut dead = false;
            for n in (worker..WRITES).step_by(WORKERS) {
                let arguments = json!({"values": {"spent_on": "2026-09-02", "amount": n, "category_id": category}, "idempotencyKey": format!("write-{n}")});
                loop {
                    let (a, b) = if dead { (1, 1) } else { (n % 2, (n + 1) % 2) };
                    match confirmed_create(&mut client(a), &mut client(b), &arguments).await {
                        Ok(row) => {
                            assert_eq!(row["amount"], json!(n as f64));
                            break;
                        }
                        Err(_) => {
                            dead = true;
                            retried.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    // Kill the first replica while writes are in flight.
    while done.load(Ordering::SeqCst) < WRITES / 3 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let mut backends = backends;
    backends.gateway.child.start_kill().unwrap();
    backends.gateway.child.wait().await.unwrap();
    for writer in writers {
        writer.await.unwrap();
    }
    assert!(
        retried.load(Ordering::SeqCst) > 0,
        "some write must have met the dead replica"
    );

    // The session client loses only its session: the survivor does not know
    // it, so it initializes again and retries under the same key.
    session.url = urls[1].clone();
    let unknown = session.request("tools/list", json!({})).await;
    assert_eq!(unknown.status, 404);
    session.initialize().await;
    let retry = session
        .call("app__expense_log__expenses__create", session_write)
        .await;
    assert_eq!(
        structured(&retry)["id"],
        session_row,
        "replayed, not written again"
    );

    // Exactly once: WRITES + 1 rows, each amount once, and one audit row each.
    let connection =
        rusqlite::Connection::open(harness.path().join("apps/expense-log.sqlite")).unwrap();
    let amounts: Vec<f64> = connection
        .prepare("SELECT amount FROM expenses WHERE spent_on = '2026-09-02' ORDER BY amount")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let expected: Vec<f64> = (0..WRITES).map(|n| n as f64).collect();
    assert_eq!(amounts, expected);
    let audited: i64 = connection
        .query_row(
            "SELECT count(*) FROM _sasha_audit WHERE table_name = 'expenses' AND operation = 'create'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(audited, WRITES as i64 + 1);
}

async fn confirmed_create_category(first: &mut Mcp, second: &mut Mcp) -> i64 {
    let tool = "app__expense_log__categories__create";
    let arguments = json!({"values": {"name": "Travel"}});
    let asked = first.call(tool, arguments.clone()).await;
    let state = asked.result()["requestState"].as_str().unwrap().to_owned();
    let answered = second
        .request(
            "tools/call",
            json!({"name": tool, "arguments": arguments, "requestState": state, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}}),
        )
        .await;
    structured(&answered)["id"].as_i64().unwrap()
}
