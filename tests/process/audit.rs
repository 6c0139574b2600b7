//! Who started each data change, and the ledger that proves itself, across
//! the real processes: changes made through the app's own view, its recovery
//! view, a personal token and a Studio assistant conversation's token each
//! record their initiator (read back through a row's history); `sasha audit
//! verify` accepts the chained ledger and `sasha audit export` writes JSON
//! Lines that an independent script (Python, following docs/audit.md)
//! verifies; then an entry changed behind the platform's back with Python's
//! own sqlite3 makes `verify` fail naming it, and the export stop before it.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::mcp::{Mcp, McpWorld, confirmed_create, structured};
use serde_json::{Value, json};
use studio_store::{Scope, TokenOrigin};

const APP: &str = "expense-log";
const CREATE: &str = "app__expense_log__categories__create";
const HISTORY: &str = "app__expense_log__categories__history";

/// docs/audit.md's procedure, in Python's standard library only.
const VERIFY_EXPORT: &str = r#"
import hashlib, json, sys
prev = "0" * 64
count = 0
for number, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    entry = json.loads(line)
    claimed = entry.pop("hash")
    if entry["prev"] != prev:
        sys.exit(f"line {number}: prev is not the previous line's hash")
    canonical = json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if hashlib.sha256(canonical.encode("utf-8")).hexdigest() != claimed:
        sys.exit(f"line {number}: the hash does not match")
    prev = claimed
    count += 1
print("verified", count, prev)
"#;

async fn sasha(args: &[&str], state_dir: &Path) -> Output {
    tokio::process::Command::new(common::sasha_bin())
        .args(args)
        .arg("--state-dir")
        .arg(state_dir)
        .env_clear()
        .output()
        .await
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A row's history entries through the app's history tool.
async fn initiators(client: &mut Mcp, id: &Value) -> Vec<(String, Option<String>)> {
    let history = client.call(HISTORY, json!({"id": id})).await;
    structured(&history)["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("{history:?}"))
        .iter()
        .map(|entry| {
            (
                entry["initiator"].as_str().unwrap().to_owned(),
                entry["initiatorId"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_change_names_its_initiator_and_the_ledger_proves_itself() {
    let world = McpWorld::start().await;
    let state = world.harness.path().to_owned();
    let session = world.store.create_session(&world.staff.id).unwrap();
    let create = |name: &str, key: &str| json!({"values": {"name": name}, "idempotencyKey": key});

    let mut page = Mcp::studio_page(&world.url(), &session, APP);
    let travel = structured(&page.call(CREATE, create("Travel", "k1")).await)["id"].clone();
    let mut recovery =
        Mcp::studio_page(&world.url(), &session, APP).with_header("sasha-view", "recovery");
    let meals = structured(&recovery.call(CREATE, create("Meals", "k2")).await)["id"].clone();
    // The view header names a view; anything else is refused before the call.
    let mut odd = Mcp::studio_page(&world.url(), &session, APP).with_header("sasha-view", "admin");
    let refused = odd
        .try_request(
            "tools/call",
            json!({"name": CREATE, "arguments": create("X", "k9")}),
        )
        .await
        .unwrap();
    assert_eq!(refused.status, 400, "{refused:?}");
    assert_eq!(refused.body["code"], "APP_INPUT_INVALID", "{refused:?}");
    assert_eq!(
        refused.body["message"],
        "Sasha-View is `recovery`, sent with Sasha-App"
    );

    let mut personal = world.client(&world.staff_token).eliciting(|_| json!({}));
    let office =
        confirmed_create(&mut personal, CREATE, create("Office", "k3")).await["id"].clone();
    let Some(TokenOrigin::Token(number)) = world
        .store
        .token(&world.staff_token)
        .unwrap()
        .unwrap()
        .origin
    else {
        panic!("a personal token's origin is its number");
    };
    let scopes = [Scope::ChatUse, Scope::AppsInvoke].into_iter().collect();
    let conversation_token = world
        .store
        .mint_conversation_token(&world.staff.id, &scopes, 600, "conversation-7")
        .unwrap();
    let mut assistant = world.client(&conversation_token).eliciting(|_| json!({}));
    let books = confirmed_create(&mut assistant, CREATE, create("Books", "k4")).await["id"].clone();

    assert_eq!(
        initiators(&mut page, &travel).await,
        [("app-view".into(), None)]
    );
    assert_eq!(
        initiators(&mut page, &meals).await,
        [("recovery-view".into(), None)]
    );
    assert_eq!(
        initiators(&mut page, &office).await,
        [("mcp-client".into(), Some(format!("token:{number}")))]
    );
    assert_eq!(
        initiators(&mut page, &books).await,
        [("assistant".into(), Some("conversation-7".into()))]
    );

    // The chained ledger verifies, and its export verifies without Sasha.
    let verified = sasha(&["audit", "verify"], &state).await;
    let line = text(&verified.stdout);
    assert!(
        verified.status.success(),
        "{line}{}",
        text(&verified.stderr)
    );
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[..3], ["ok", APP, "4"], "{line}");
    let head = fields[3].to_owned();
    let export = state.join("ledger.jsonl");
    let exported = sasha(
        &[
            "audit",
            "export",
            "--app",
            APP,
            "--out",
            export.to_str().unwrap(),
        ],
        &state,
    )
    .await;
    assert!(exported.status.success(), "{}", text(&exported.stderr));
    let independent = std::process::Command::new("python3")
        .args(["-c", VERIFY_EXPORT])
        .arg(&export)
        .output()
        .expect("python3 runs the independent check");
    assert!(
        independent.status.success(),
        "{}",
        text(&independent.stderr)
    );
    assert_eq!(
        text(&independent.stdout).trim(),
        format!("verified 4 {head}")
    );
    let lines = std::fs::read_to_string(&export).unwrap();
    let third: Value = serde_json::from_str(lines.lines().nth(2).unwrap()).unwrap();
    assert_eq!(third["initiator"], "mcp-client");
    assert_eq!(third["source"], "mcp");

    // An entry rewritten with Python's sqlite3, behind the platform's back.
    let tampered = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys\n\
             db = sqlite3.connect(sys.argv[1])\n\
             db.execute('DROP TRIGGER _sasha_audit_no_update')\n\
             db.execute(\"UPDATE _sasha_audit SET actor_id = 'someone-else' WHERE id = 2\")\n\
             db.commit()",
        ])
        .arg(state.join("apps").join(format!("{APP}.sqlite")))
        .output()
        .unwrap();
    assert!(tampered.status.success(), "{}", text(&tampered.stderr));
    let failed = sasha(&["audit", "verify", "--app", APP], &state).await;
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed.stderr));
    assert_eq!(
        text(&failed.stdout).trim(),
        "failed expense-log: entry 2 does not match its hash: it, or the entry before it, was \
         changed after it was written"
    );
    let stopped = sasha(&["audit", "export", "--app", APP], &state).await;
    assert_eq!(stopped.status.code(), Some(1));
    assert_eq!(
        text(&stopped.stdout).lines().count(),
        1,
        "only the entry before it"
    );
    assert!(
        text(&stopped.stderr).contains("entry 2"),
        "{}",
        text(&stopped.stderr)
    );

    // An app with no data is a usage error, named.
    let unknown = sasha(&["audit", "verify", "--app", "no-such-app"], &state).await;
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("no data for app \"no-such-app\""));
}
