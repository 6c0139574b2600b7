//! Time Sheet Entry, the bundled app package (`apps/time-sheet-entry`), end to
//! end in real Chromium: starts `sasha up` over a state folder holding the
//! package, runs `tests/browser/timesheet.mjs` (the dev admin logs, edits,
//! conflicts and deletes hours through the app's own UI), then reads the same
//! week's totals through the model-visible
//! `app__time_sheet_entry__weekly_project_totals` over sessionless MCP with a
//! bearer token and compares them with the totals the UI computed.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::mcp::{Mcp, structured, token};
use common::{UpProcess, browser_artifacts, copy_dir, free_port, root};
use serde_json::json;
use studio_core::store::{Scope, Store};

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(90);
const APP: &str = "time-sheet-entry";

#[tokio::test]
async fn time_sheet_entry_works_end_to_end_in_chromium() {
    browser::require();
    let started = Instant::now();

    let source = root().join("apps").join(APP);
    let validation = sasha_package::validate::validate_dir(&source);
    assert!(
        validation.package.is_some(),
        "the bundled package must validate: {:?}",
        validation.diagnostics
    );
    let state = tempfile::tempdir().unwrap();
    copy_dir(&source, &state.path().join("docs/apps").join(APP));
    let port = free_port();
    let up = UpProcess::start(state.path(), port).await;
    let admin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let booted = started.elapsed();

    let artifacts = browser_artifacts().join("timesheet");
    let output = BrowserScript::start(
        "timesheet",
        &[
            ("STUDIO_URL", &format!("http://localhost:{port}")),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;
    let ui: serde_json::Value = output
        .lines()
        .find_map(|line| line.strip_prefix("UI_TOTALS "))
        .map(|json| serde_json::from_str(json).unwrap())
        .expect("the script prints the UI's totals");
    let week_start = ui["weekStart"].as_str().unwrap();
    let ui_totals: BTreeMap<String, f64> = serde_json::from_value(ui["projects"].clone()).unwrap();

    // The model-visible aggregate, called as a model client would: sessionless
    // MCP with the admin's bearer token, no app header.
    let store = Store::open(&state.path().join("core.sqlite")).unwrap();
    let admin_user = store
        .user_by_name(admin["username"].as_str().unwrap())
        .unwrap()
        .unwrap();
    let bearer = token(&store, &admin_user, &[Scope::AppsInvoke]);
    let mut mcp = Mcp::sessionless(&format!("http://localhost:{port}/mcp"), &bearer);
    let answer = mcp
        .call(
            "app__time_sheet_entry__weekly_project_totals",
            json!({"weekStart": week_start}),
        )
        .await;
    let groups = structured(&answer)["groups"].as_array().unwrap().clone();
    let model_totals: BTreeMap<String, f64> = groups
        .iter()
        .map(|group| {
            (
                group["project"].as_i64().unwrap().to_string(),
                group["hours"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        model_totals, ui_totals,
        "weekly-project-totals over MCP equals the UI's per-project totals for {week_start}"
    );
    println!("ok - weekly_project_totals over MCP equals the UI's totals: {model_totals:?}");

    // The app-only log-hours action is not offered to the model.
    let listed = mcp.request("tools/list", json!({})).await;
    let names = common::mcp::tool_names(&listed);
    assert!(
        names.contains(&"app__time_sheet_entry__weekly_project_totals".to_owned()),
        "{names:?}"
    );
    assert!(
        !names.contains(&"app__time_sheet_entry__log_hours".to_owned()),
        "{names:?}"
    );

    // The rows are in the app's own database: the deleted one is gone, the
    // conflicting save did not overwrite, every row is the admin's.
    let data = rusqlite::Connection::open_with_flags(
        state.path().join("apps").join(format!("{APP}.sqlite")),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut rows = data
        .prepare("SELECT hours, created_by FROM entries ORDER BY date, id")
        .unwrap();
    let rows: Vec<(f64, String)> = rows
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        rows.iter().map(|row| row.0).collect::<Vec<_>>(),
        vec![8.0, 4.25, 5.0]
    );
    assert!(rows.iter().all(|row| row.1 == admin_user.id), "{rows:?}");
    let created_by_action: i64 = data
        .query_row(
            "SELECT COUNT(*) FROM _sasha_audit WHERE table_name = 'entries'
             AND operation = 'create' AND action_id = 'log-hours' AND source = 'ui'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(created_by_action, 4);

    println!(
        "browser time sheet test took {:?} (sasha up ready after {booted:?}); screenshots in {}",
        started.elapsed(),
        artifacts.display()
    );
}
