//! Time Sheet Entry, the bundled app package (`apps/time-sheet-entry`), end to
//! end in real Chromium: starts `sasha up` over an empty state folder (the
//! package is seeded from the binary's bundle), runs
//! `tests/browser/timesheet.mjs` (the dev admin adds projects in the recovery
//! panel, then logs, edits, conflicts and deletes hours through the app's own
//! UI; a member sees nothing until granted `use`, then only their own
//! entries), then reads the same week's totals through the model-visible
//! `app__time_sheet_entry__weekly_project_totals` with the official MCP
//! TypeScript SDK client (`tests/mcp-client/timesheet-totals.mjs`) for the
//! admin and for the member, and compares them with the totals each UI showed.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::mcp::token;
use common::{UpProcess, browser_artifacts, free_port, node_program, root, run_node};
use studio_core::store::{Scope, Store, UserRole};

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(90);
const APP: &str = "time-sheet-entry";

#[tokio::test]
async fn time_sheet_entry_works_end_to_end_in_chromium() {
    browser::require();
    let started = Instant::now();

    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    // The default configuration: bundled apps are seeded.
    let up = UpProcess::start_with(state.path(), port, &[]).await;
    let admin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let seeded = state.path().join("docs/apps").join(APP);
    assert!(
        seeded.join("APP.md").is_file(),
        "sasha up seeds the bundled Time Sheet Entry into an empty docs root"
    );
    let store = Store::open(&state.path().join("core.sqlite")).unwrap();
    let member_password = "member correct horse battery";
    let member = store
        .create_user("mia", UserRole::Member, member_password)
        .unwrap();
    let booted = started.elapsed();

    let artifacts = browser_artifacts().join("timesheet");
    let output = BrowserScript::start(
        "timesheet",
        &[
            ("STUDIO_URL", &format!("http://localhost:{port}")),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("MEMBER_USER", &member.username),
            ("MEMBER_PASSWORD", &member_password),
            ("MEMBER_ID", &member.id),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;
    let printed = |prefix: &str| -> (String, BTreeMap<String, f64>) {
        let json: serde_json::Value = output
            .lines()
            .find_map(|line| line.strip_prefix(prefix))
            .map(|json| serde_json::from_str(json).unwrap())
            .unwrap_or_else(|| panic!("the script prints {prefix}"));
        (
            json["weekStart"].as_str().unwrap().to_owned(),
            serde_json::from_value(json["projects"].clone()).unwrap(),
        )
    };
    let (week_start, ui_totals) = printed("UI_TOTALS ");
    let (_, member_ui_totals) = printed("MEMBER_TOTALS ");

    // The model-visible aggregate, read as an assistant would: the official
    // MCP TypeScript SDK client, sessionless, a bearer token, no app binding.
    let admin_user = store
        .user_by_name(admin["username"].as_str().unwrap())
        .unwrap()
        .unwrap();
    for (who, user, expected) in [
        ("admin", &admin_user, &ui_totals),
        ("member", &member, &member_ui_totals),
    ] {
        let bearer = token(&store, user, &[Scope::AppsInvoke]);
        let model_totals = sdk_totals(port, &bearer, &week_start);
        assert_eq!(
            &model_totals, expected,
            "the {who}'s weekly-project-totals over MCP equal the {who}'s UI totals for {week_start}"
        );
        println!(
            "ok - the {who}'s weekly_project_totals via the TypeScript SDK equal the UI's: {model_totals:?}"
        );
    }

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
        rows,
        vec![
            (8.0, admin_user.id.clone()),
            (4.25, admin_user.id.clone()),
            (2.0, member.id.clone()),
            (5.0, admin_user.id.clone()),
        ],
        "the admin's three entries and the member's one, each owned by its author"
    );
    let created_by_action: i64 = data
        .query_row(
            "SELECT COUNT(*) FROM _sasha_audit WHERE table_name = 'entries'
             AND operation = 'create' AND action_id = 'log-hours' AND source = 'ui'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(created_by_action, 5);
    // The recovery panel's changes went through the same governed path:
    // versioned, audited as the Studio UI, each by the admin.
    let mut audited = data
        .prepare(
            "SELECT operation, COUNT(*) FROM _sasha_audit WHERE table_name = 'projects'
             AND source = 'ui' AND actor_id = ?1 GROUP BY operation ORDER BY operation",
        )
        .unwrap();
    let audited: Vec<(String, i64)> = audited
        .query_map([&admin_user.id], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        audited,
        vec![
            ("create".to_owned(), 3),
            ("delete".to_owned(), 1),
            ("update".to_owned(), 2)
        ]
    );

    println!(
        "browser time sheet test took {:?} (sasha up ready after {booted:?}); screenshots in {}",
        started.elapsed(),
        artifacts.display()
    );
}

/// Runs `tests/mcp-client/timesheet-totals.mjs` with `bearer` and answers the
/// week's totals as `{project id: hours}`.
fn sdk_totals(port: u16, bearer: &str, week_start: &str) -> BTreeMap<String, f64> {
    let node = node_program(
        "the Time Sheet SDK check",
        Some("tests/mcp-client/node_modules/@modelcontextprotocol/sdk"),
    );
    let mut command = std::process::Command::new(node);
    command
        .arg(root().join("tests/mcp-client/timesheet-totals.mjs"))
        .current_dir(root().join("tests/mcp-client"))
        .env("MCP_URL", format!("http://localhost:{port}/mcp"))
        .env("TOKEN", bearer)
        .env("WEEK_START", week_start);
    let stdout = run_node(command);
    let groups: Vec<serde_json::Value> = stdout
        .lines()
        .find_map(|line| line.strip_prefix("TOTALS "))
        .map(|json| serde_json::from_str(json).unwrap())
        .unwrap_or_else(|| panic!("timesheet-totals.mjs prints its totals:\n{stdout}"));
    groups
        .iter()
        .map(|group| {
            (
                group["project"].as_i64().unwrap().to_string(),
                group["hours"].as_f64().unwrap(),
            )
        })
        .collect()
}
