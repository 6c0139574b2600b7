//! The read guard where no name can fool it, across the real processes: a
//! catalogue package changed on disk behind the source tools (as an
//! operator's copy or a deploy would) so that `expenses` is scoped by a
//! column that names nobody's rows. studio-core registers the valid package
//! as it finds it; data-worker, setting the new contract up inside its own
//! transaction, compares the rows' owners and refuses: `checkApp` reports
//! it, the app's data calls answer `APP_ACCESS_DENIED` with the table and
//! `DATA_OWNER_CHANGED`, and the file keeps every owner and its recorded
//! policy. Putting the package back serves the rows again. The refusal
//! matrices are in data-worker's `engine::guard` tests and studio-core's
//! `read_guard` tests.

use crate::common;

use std::collections::BTreeSet;

use common::mcp::{McpWorld, confirmed_create, structured, tool_error};
use serde_json::json;
use studio_store::{Scope, TokenKind};

const APP: &str = "expense-log";
const OWNER: &str = "  expenses:\n    access: owner\n    ownerField: created_by\n";

fn owners(world: &McpWorld) -> Vec<(i64, String)> {
    let connection =
        rusqlite::Connection::open(world.harness.path().join(format!("apps/{APP}.sqlite")))
            .unwrap();
    let mut statement = connection
        .prepare("SELECT id, created_by FROM expenses ORDER BY id")
        .unwrap();
    statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn recorded_readers(world: &McpWorld) -> String {
    let connection =
        rusqlite::Connection::open(world.harness.path().join(format!("apps/{APP}.sqlite")))
            .unwrap();
    connection
        .query_row(
            "SELECT readers FROM _sasha_read_policy WHERE table_name = 'expenses'",
            [],
            |row| row.get(0),
        )
        .unwrap()
}

#[tokio::test]
async fn a_package_changed_behind_the_tools_cannot_hand_rows_to_other_owners() {
    let world = McpWorld::start().await;
    let scopes: BTreeSet<Scope> = [Scope::ChatUse, Scope::AppsInvoke, Scope::AppsWrite]
        .into_iter()
        .collect();
    let writer = world
        .store
        .mint_token(&world.staff.id, TokenKind::Access, &scopes, None)
        .unwrap();
    let mut client = world.client(&writer).eliciting(|_| json!({}));
    let category = confirmed_create(
        &mut client,
        "app__expense_log__categories__create",
        json!({"values": {"name": "Travel"}}),
    )
    .await;
    confirmed_create(
        &mut client,
        "app__expense_log__expenses__create",
        json!({"values": {"spent_on": "2026-12-01", "amount": 9.5, "category_id": category["id"], "note": "mallory"}}),
    )
    .await;
    let before = owners(&world);
    assert_eq!(before.len(), 1);
    assert_eq!(recorded_readers(&world), "\"created_by\"");

    // Scoped by `note` instead, written straight into DOCS_ROOT (without
    // the app-only create action, which stamps created_by).
    let manifest_path = world.harness.path().join(format!("docs/apps/{APP}/APP.md"));
    let manifest = std::fs::read_to_string(&manifest_path).unwrap();
    assert!(manifest.contains(OWNER), "{manifest}");
    let rescoped = manifest
        .replace(
            OWNER,
            "  expenses:\n    access: owner\n    ownerField: note\n",
        )
        .replace(
            "  - id: add-expense\n    file: actions/add-expense.action.yaml\n",
            "",
        );
    std::fs::write(&manifest_path, &rescoped).unwrap();

    // checkApp finds the package valid and data-worker's refusal in it.
    let checked = client.call("checkApp", json!({"app": APP})).await;
    let status = &structured(&checked)["status"];
    assert_eq!(status["ok"], false, "{status}");
    let diagnostics = status["diagnostics"].as_array().unwrap();
    assert!(
        diagnostics
            .iter()
            .any(|d| d["code"] == "DATA_OWNER_CHANGED" && d["file"] == "APP.md"),
        "{status}"
    );

    // The app's data calls are refused, saying which table and why.
    let listed = client
        .call("app__expense_log__expenses__list", json!({}))
        .await;
    let error = tool_error(&listed);
    assert_eq!(error["code"], "APP_ACCESS_DENIED", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("table expenses") && message.contains("other owners"),
        "{message}"
    );
    assert_eq!(error["details"]["table"], "expenses", "{error}");
    assert_eq!(owners(&world), before);
    assert_eq!(recorded_readers(&world), "\"created_by\"");

    // The package as it was: its rows are served again.
    std::fs::write(&manifest_path, &manifest).unwrap();
    let checked = client.call("checkApp", json!({"app": APP})).await;
    assert_eq!(structured(&checked)["status"]["ok"], true, "{checked:?}");
    let listed = client
        .call("app__expense_log__expenses__list", json!({}))
        .await;
    let rows = &structured(&listed)["rows"];
    assert_eq!(rows.as_array().map(Vec::len), Some(1), "{rows}");
}
