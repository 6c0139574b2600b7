//! Table write policies and manager reads across the real processes (issue
//! 26): Time Sheet Entry's `projects` is written by the app's managers only
//! (`write: manage`) and its `entries` are read in full by managers
//! (`managersReadAll`). Members and the manager log hours through the MCP
//! tools; then the official MCP TypeScript SDK client
//! (`tests/mcp-client/policies.mjs`) checks, as a member and as the manager,
//! which tools each is listed, that a member's rename of a project is
//! refused, what each one's aggregate over `entries` adds up, and
//! the declared rules, refused in the caller's words through the same SDK
//! (a date that is no day, -5 hours, a duplicate name, a referenced
//! delete). Then a row's record history (`__history`): its owner reads a create, two updates
//! and a delete with before and after, another member cannot, the manager
//! can. The refusal matrices are in data-worker's and the gateway's unit
//! tests.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::mcp::{Mcp, confirmed_call, confirmed_create, structured, token, tool_error};
use common::{Harness, copy_dir, node_program, root};
use serde_json::json;
use studio_store::{AppAccess, Scope, UserRole};
use tokio::process::Command;

const APP: &str = "time-sheet-entry";
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test]
async fn members_cannot_write_projects_and_managers_read_every_members_hours() {
    let harness = Harness::new();
    copy_dir(
        &root().join("apps").join(APP),
        &harness.path().join("docs/apps").join(APP),
    );
    let store = harness.store();
    // Staff existing when the app is first discovered get `manage`.
    let manager = store
        .create_user("sam", UserRole::Staff, "correct horse battery")
        .unwrap();
    let mia = store
        .create_user("mia", UserRole::Member, "correct horse battery")
        .unwrap();
    let max = store
        .create_user("max", UserRole::Member, "correct horse battery")
        .unwrap();
    let backends = harness.start_backends().await;
    for member in [&mia, &max] {
        store
            .grant(APP, &member.id, AppAccess::Use, Some(&manager.id))
            .unwrap();
    }
    let url = format!("http://{}/mcp", backends.gateway.listener("http"));
    let scopes = [Scope::ChatUse, Scope::AppsInvoke];
    let manager_token = token(&store, &manager, &scopes);
    let mia_token = token(&store, &mia, &scopes);
    let max_token = token(&store, &max, &scopes);

    // Model writes are confirmed by the person: these clients accept.
    let client = |token: &str| {
        Mcp::sessionless(&url, token)
            .eliciting(|_| json!({"action": "accept", "content": {"confirm": true}}))
    };
    let mut as_manager = client(&manager_token);
    let project = confirmed_create(
        &mut as_manager,
        "app__time_sheet_entry__projects__create",
        json!({"values": {"name": "Ops"}, "idempotencyKey": "ops"}),
    )
    .await;
    // A member's create of a project is refused too (the tool is not theirs).
    let mut as_mia = client(&mia_token);
    let refused = as_mia
        .call(
            "app__time_sheet_entry__projects__create",
            json!({"values": {"name": "Mine"}, "idempotencyKey": "mine"}),
        )
        .await;
    assert!(
        refused.body.get("error").is_some() || refused.result()["isError"] == true,
        "{:?}",
        refused.body
    );
    let mut as_max = client(&max_token);
    for (client, hours) in [
        (&mut as_mia, 2.0),
        (&mut as_max, 3.5),
        (&mut as_manager, 1.0),
    ] {
        confirmed_create(
            client,
            "app__time_sheet_entry__entries__create",
            json!({"values": {"date": "2026-11-30", "project": project["id"], "hours": hours}, "idempotencyKey": format!("h{hours}")}),
        )
        .await;
    }
    // The manager's own writes stay their own: an update of a member's row
    // is not found for them.
    let mias_row = structured(
        &as_mia
            .call("app__time_sheet_entry__entries__list", json!({}))
            .await,
    )["rows"][0]
        .clone();
    let confirmed = confirmed_call(
        &mut as_manager,
        "app__time_sheet_entry__entries__update",
        json!({"id": mias_row["id"], "changes": {"hours": 9.0}, "expectedVersion": 1, "idempotencyKey": "steal"}),
    )
    .await;
    assert_eq!(tool_error(&confirmed)["code"], "APP_RECORD_NOT_FOUND");

    let node = node_program(
        "the table policies acceptance test",
        Some("tests/mcp-client/node_modules/@modelcontextprotocol/sdk"),
    );
    let output = tokio::time::timeout(
        SCENARIO_TIMEOUT,
        Command::new(node)
            .arg(root().join("tests/mcp-client/policies.mjs"))
            .current_dir(root().join("tests/mcp-client"))
            .env("MCP_URL", &url)
            .env("MEMBER_TOKEN", &mia_token)
            .env("MANAGER_TOKEN", &manager_token)
            .env("PROJECT_ID", project["id"].to_string())
            .env("PROJECT_NAME", "Ops")
            .env("MEMBER_HOURS", "2")
            .env("TEAM_HOURS", "6.5")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the SDK scenario finishes")
    .expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("checks passed"),
        "--- stdout\n{stdout}\n--- stderr\n{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // Record history: Mia edits her row twice and deletes it; she reads its
    // four entries with before and after, Max cannot read them at all, the
    // manager can.
    let row = |hours: f64, version: i64| json!({"id": mias_row["id"], "changes": {"hours": hours}, "expectedVersion": version, "idempotencyKey": format!("edit-{version}")});
    for (hours, version) in [(2.5, 1), (3.0, 2)] {
        confirmed_create(
            &mut as_mia,
            "app__time_sheet_entry__entries__update",
            row(hours, version),
        )
        .await;
    }
    confirmed_create(
        &mut as_mia,
        "app__time_sheet_entry__entries__delete",
        json!({"id": mias_row["id"], "expectedVersion": 3, "idempotencyKey": "gone"}),
    )
    .await;
    let history = |id: &serde_json::Value| json!({"id": id});
    let seen = structured(
        &as_mia
            .call(
                "app__time_sheet_entry__entries__history",
                history(&mias_row["id"]),
            )
            .await,
    )
    .clone();
    let entries = seen["entries"].as_array().unwrap();
    let operations: Vec<&str> = entries
        .iter()
        .map(|e| e["operation"].as_str().unwrap())
        .collect();
    assert_eq!(
        operations,
        ["create", "update", "update", "delete"],
        "{seen}"
    );
    assert_eq!(entries[1]["before"]["hours"], 2.0);
    assert_eq!(entries[1]["after"]["hours"], 2.5);
    assert_eq!(entries[3]["after"], serde_json::Value::Null);
    assert!(
        entries
            .iter()
            .all(|e| e["actor"] == mia.id.as_str() && e["source"] == "mcp")
    );
    // The same entries as a resource.
    let uri = format!(
        "sasha://apps/{APP}/tables/entries/rows/{}/history",
        mias_row["id"]
    );
    let read = as_mia.request("resources/read", json!({"uri": uri})).await;
    let text = read.result()["contents"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let resource: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(resource["entries"], seen["entries"]);
    let refused = as_max.request("resources/read", json!({"uri": uri})).await;
    assert!(refused.body.get("error").is_some(), "{:?}", refused.body);
    let refused = as_max
        .call(
            "app__time_sheet_entry__entries__history",
            history(&mias_row["id"]),
        )
        .await;
    assert_eq!(tool_error(&refused)["code"], "APP_RECORD_NOT_FOUND");
    let managed = structured(
        &as_manager
            .call(
                "app__time_sheet_entry__entries__history",
                history(&mias_row["id"]),
            )
            .await,
    )
    .clone();
    assert_eq!(managed["entries"].as_array().unwrap().len(), 4);

    // Nothing a member tried reached the file.
    let db =
        rusqlite::Connection::open(harness.path().join("apps/time-sheet-entry.sqlite")).unwrap();
    let names: Vec<String> = db
        .prepare("SELECT name FROM projects ORDER BY id")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(names, ["Ops"]);
    let left: i64 = db
        .query_row(
            "SELECT count(*) FROM entries WHERE id = ?1",
            [mias_row["id"].as_i64().unwrap()],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(left, 0, "Mia deleted her own row");
}
