//! Time Sheet Entry, the bundled app package (`apps/time-sheet-entry`), end to
//! end in real Chromium: starts `sasha up` over an empty state folder (the
//! package is seeded from the binary's bundle), runs
//! `tests/browser/timesheet.mjs` (the dev admin adds, renames and retires
//! projects inside the app's own view, from its first run on, and exercises
//! the recovery panel on the same rows; then logs, edits in place (date,
//! project, hours, note), conflicts and deletes hours through the app's own
//! UI, with field errors next to their fields; a member sees nothing until
//! granted `use`, then no project controls and only their own entries), then
//! reads the same week's totals through the model-visible
//! `app__time_sheet_entry__weekly_project_totals` with the official MCP
//! TypeScript SDK client (`tests/mcp-client/timesheet-totals.mjs`) for the
//! admin and for the member, and compares them with the totals each UI showed.
//!
//! A second scenario is a new organisation's first day with no CLI and no
//! UUID (`tests/browser/people.mjs`): the dev admin invites a member from
//! the Users page, the member signs in through the one-time link, the admin
//! grants `use` by typing the name and adds a project inside the app, and the
//! member logs hours on it, then makes a personal access token on Connected
//! clients; the setup the page shows is then used as pasted, with the SDK.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::mcp::token;
use common::{UpProcess, browser_artifacts, free_port, node_program, root, run_node};
use studio_store::{Scope, UserRole};

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);
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
    let store = common::core_database::core_store(state.path());
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
        let model_totals = sdk_totals(
            &format!("http://localhost:{port}/mcp"),
            &bearer,
            &week_start,
        );
        assert_eq!(
            &model_totals, expected,
            "the {who}'s weekly-project-totals over MCP equal the {who}'s UI totals for {week_start}"
        );
        println!(
            "ok - the {who}'s weekly_project_totals via the TypeScript SDK equal the UI's: {model_totals:?}"
        );
    }

    // The rows are in the app's own database: the deleted one is gone, the
    // conflicting save did not overwrite, the one edited in place has its new
    // hours, each row is its author's.
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
            (4.5, admin_user.id.clone()),
            (2.0, member.id.clone()),
            (5.0, admin_user.id.clone()),
        ],
        "the admin's three entries and the member's one, each owned by its author"
    );
    // The retired project is still there, with the day it was retired, and
    // the entry moved onto it in place (to Wednesday, with its new hours and
    // note) still refers to it: retiring deletes no history.
    let retired: serde_json::Value = output
        .lines()
        .find_map(|line| line.strip_prefix("RETIRED_PROJECT "))
        .map(|json| serde_json::from_str(json).unwrap())
        .expect("the script prints RETIRED_PROJECT");
    let retired_id = retired["id"].as_i64().unwrap();
    let (name, retired_at, is_day): (String, Option<String>, bool) = data
        .query_row(
            "SELECT name, retired_at, retired_at IS date(retired_at) FROM projects WHERE id = ?1",
            [retired_id],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap();
    assert_eq!(name, "Cygnus I");
    assert!(
        retired_at.is_some() && is_day,
        "retired_at holds the day it was retired, written YYYY-MM-DD: {retired_at:?}"
    );
    let open_projects: Vec<String> = data
        .prepare("SELECT name FROM projects WHERE retired_at IS NULL ORDER BY name")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        open_projects,
        ["Apollo", "Borealis", "Draco", "Orion", "Vega"],
        "the other projects stay open; the one deleted in the recovery panel is gone"
    );
    let moved: Vec<(String, f64, Option<String>, bool)> = data
        .prepare(
            "SELECT date, hours, note, date = date(?2, '+2 days') FROM entries WHERE project = ?1",
        )
        .unwrap()
        .query_map(rusqlite::params![retired_id, &week_start], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(
        (moved[0].1, moved[0].2.as_deref(), moved[0].3),
        (4.5, Some("design review"), true),
        "the entry edited in place is stored with its new ISO date (the week's Wednesday), hours and note: {moved:?}"
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
    // The app's project changes (three adds, a rename, a retire), the
    // recovery panel's (an add, two edits of which one was another caller's,
    // a delete) and the project added elsewhere first went through the same
    // governed path: versioned, audited as the Studio UI, each by the admin.
    // The refused ones (duplicates, the stale save) wrote nothing.
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
            ("create".to_owned(), 5),
            ("delete".to_owned(), 1),
            ("update".to_owned(), 4)
        ]
    );

    println!(
        "browser time sheet test took {:?} (sasha up ready after {booted:?}); screenshots in {}",
        started.elapsed(),
        artifacts.display()
    );
}

/// Runs `tests/mcp-client/timesheet-totals.mjs` against `mcp_url` with
/// `bearer` and answers the week's totals as `{project id: hours}`.
fn sdk_totals(mcp_url: &str, bearer: &str, week_start: &str) -> BTreeMap<String, f64> {
    let node = node_program(
        "the Time Sheet SDK check",
        Some("tests/mcp-client/node_modules/@modelcontextprotocol/sdk"),
    );
    let mut command = std::process::Command::new(node);
    command
        .arg(root().join("tests/mcp-client/timesheet-totals.mjs"))
        .current_dir(root().join("tests/mcp-client"))
        .env("MCP_URL", mcp_url)
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

#[tokio::test]
async fn a_new_organisation_invites_grants_and_logs_hours_without_cli_or_uuid() {
    browser::require();
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = UpProcess::start_with(state.path(), port, &[]).await;
    let admin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let artifacts = browser_artifacts().join("people");
    let output = BrowserScript::start(
        "people",
        &[
            ("STUDIO_URL", &format!("http://localhost:{port}")),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;
    let printed = |prefix: &str| -> String {
        output
            .lines()
            .find_map(|line| line.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("people.mjs prints {prefix}"))
            .to_owned()
    };
    let setup: serde_json::Value = serde_json::from_str(&printed("SETUP ")).unwrap();
    let week_start = printed("WEEK_START ");
    let revoked = printed("REVOKED ");

    // The setup as the page showed it, pasted into an MCP client: maria's
    // two hours on the project the admin made inside the app.
    let server = &setup["mcpServers"]["sasha"];
    let mcp_url = server["url"].as_str().unwrap();
    let bearer = server["headers"]["Authorization"]
        .as_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap();
    let totals = sdk_totals(mcp_url, bearer, &week_start);
    let data = rusqlite::Connection::open_with_flags(
        state.path().join("apps").join(format!("{APP}.sqlite")),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let apollo: i64 = data
        .query_row("SELECT id FROM projects WHERE name = 'Apollo'", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(
        totals,
        BTreeMap::from([(apollo.to_string(), 2.0)]),
        "maria's week over MCP with the pasted setup: her two hours on Apollo"
    );

    // The revoked token is refused at the gateway.
    let refused = common::http_client()
        .post(mcp_url)
        .bearer_auth(&revoked)
        .header("accept", "application/json, text/event-stream")
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::UNAUTHORIZED);

    // Who did what is in the audit, by the people who did it.
    let store = common::core_database::core_store(state.path());
    let maria = store.user_by_name("maria").unwrap().unwrap();
    assert_eq!(maria.role, UserRole::Member);
    assert!(
        store.user_by_name("temp").unwrap().is_none(),
        "temp was removed"
    );
    let admin_user = store
        .user_by_name(admin["username"].as_str().unwrap())
        .unwrap()
        .unwrap();
    let entries = store.audit_entries(None).unwrap();
    let by = |action: &str| -> Vec<&str> {
        entries
            .iter()
            .filter(|entry| entry.action == action)
            .map(|entry| entry.actor.as_str())
            .collect()
    };
    let (admin_id, maria_id) = (admin_user.id.as_str(), maria.id.as_str());
    assert_eq!(by("user.invited"), [admin_id, admin_id]);
    assert_eq!(by("user.invitation-accepted"), [maria_id]);
    assert_eq!(by("user.removed"), [admin_id]);
    assert_eq!(by("token.created"), [maria_id, maria_id]);
    assert_eq!(by("token.revoked"), [maria_id]);
    assert!(
        entries.iter().any(|entry| entry.action == "grant.changed"
            && entry.app_id.as_deref() == Some(APP)
            && entry.subject.as_deref() == Some(maria.id.as_str())
            && entry.after.as_deref() == Some("use")
            && entry.actor == admin_user.id),
        "the admin granted maria use"
    );
    let owner: String = data
        .query_row("SELECT created_by FROM entries", [], |row| row.get(0))
        .unwrap();
    assert_eq!(owner, maria.id, "the one entry is maria's own");
}
