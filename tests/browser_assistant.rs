//! Studio's assistant pane in real Chromium: `sasha up` with a scripted
//! OpenAI-compatible provider on loopback (`tests/common/fake_llm.rs`), the
//! dev admin signed in through the page, and a model that builds an app and
//! uses it, every change approved or denied by a click in the pane:
//!
//!  a. "Build me an expense log": the model calls `createApp` → a
//!     confirmation card → Approve → the call succeeds;
//!  b. it lists the new app's files (read-only: no card) and says so;
//!  c. "Add a note field": `writeAppFile` into the draft → a card with the
//!     file's diff → Deny → the call is declined and no draft exists;
//!  d. "Log a coffee": the new app's table tool creates a row → a card with
//!     the row → Approve → the row exists (the model reads it back).
//!
//! Then `tests/browser/assistant.mjs` reloads the page (the transcript is
//! kept) and opens the created app from the sidebar. This side checks what
//! the provider was sent: the user's own tools, and never a confirmation id
//! or anything that approves. Screenshots go to
//! `$CARGO_TARGET_DIR/browser-artifacts/assistant/`.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::fake_llm::{self, FakeLlm, Step};
use common::{UpProcess, browser_artifacts, free_port, http_client};
use serde_json::{Value, json};

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(180);
const APP: &str = "expense-log";
const CREATE_ROW: &str = "app__expense_log__items__create";
const LIST_ROWS: &str = "app__expense_log__items__list";

fn calls(calls: Vec<(&str, Value)>) -> Step {
    Step::Calls(
        calls
            .into_iter()
            .map(|(name, arguments)| (name.to_owned(), arguments))
            .collect(),
    )
}

/// The function names offered in one provider request.
fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_assistant_builds_an_app_and_uses_it_with_every_change_approved() {
    browser::require();
    let script = vec![
        // a. The app, after the person approves.
        calls(vec![(
            "createApp",
            json!({"app": APP, "name": "Expense log", "description": "What we spent", "withTable": true}),
        )]),
        // b. A read-only look: no card.
        calls(vec![("listAppFiles", json!({"app": APP, "draft": false}))]),
        Step::Text("I created Expense log. Open it from the sidebar.".to_owned()),
        // c. A draft file, which the person denies.
        calls(vec![(
            "writeAppFile",
            json!({"app": APP, "path": "notes.md", "content": "# Notes\n", "draft": true}),
        )]),
        Step::Text("Understood, I left it.".to_owned()),
        // d. A row through the new app's own table tool, then read back.
        calls(vec![(CREATE_ROW, json!({"values": {"title": "Coffee"}}))]),
        calls(vec![(LIST_ROWS, json!({}))]),
        Step::Made(Arc::new(|request: &Value| {
            let rows = fake_llm::last_tool_result(request);
            Step::Text(if rows.contains("Coffee") {
                "Logged.".to_owned()
            } else {
                format!("The row is missing: {rows}")
            })
        })),
    ];
    let fake = FakeLlm::start(fake_llm::script(script)).await;
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = UpProcess::start_with(
        state.path(),
        port,
        &[
            ("SASHA_BUNDLED_APPS", "off"),
            ("SASHA_CHAT_BASE_URL", fake.base_url.as_str()),
            ("SASHA_CHAT_MODEL", "fake"),
        ],
    )
    .await;
    let admin: Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let studio = format!("http://localhost:{port}");

    let artifacts = browser_artifacts().join("assistant");
    let output = BrowserScript::start(
        "assistant",
        &[
            ("STUDIO_URL", &studio),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;
    let screenshots: Vec<&str> = output
        .lines()
        .filter_map(|line| line.strip_prefix("screenshot "))
        .collect();
    assert!(screenshots.len() >= 8, "{output}");
    for file in &screenshots {
        assert!(std::path::Path::new(file).is_file(), "{file}");
    }
    let confirmations: Vec<&str> = output
        .lines()
        .filter_map(|line| line.strip_prefix("confirmation "))
        .collect();
    assert_eq!(confirmations.len(), 3, "{output}");

    // What the provider was sent: the user's tools, and nothing that approves.
    let requests = fake.requests();
    assert_eq!(requests.len(), 8, "{requests:#?}");
    let first = offered(&requests[0]);
    assert!(first.contains(&"createApp".to_owned()), "{first:?}");
    assert!(first.contains(&"listAppFiles".to_owned()), "{first:?}");
    let third_turn = offered(&requests[5]);
    assert!(
        third_turn.contains(&CREATE_ROW.to_owned()),
        "{third_turn:?}"
    );
    for (index, request) in requests.iter().enumerate() {
        assert!(
            !offered(request).is_empty(),
            "request {index} offered no tools"
        );
        let body = request.to_string();
        assert!(
            !body.contains("confirmationToken"),
            "request {index} mentions a confirmation token: {body}"
        );
        for id in &confirmations {
            assert!(
                !body.contains(id),
                "request {index} carries confirmation id {id}"
            );
        }
    }
    assert!(
        fake_llm::last_tool_result(&requests[4]).contains("declined"),
        "the model is told the person declined: {}",
        requests[4]
    );

    // c. Declined: the draft was never made.
    let http = http_client();
    let login = http
        .post(format!("{studio}/api/auth/login"))
        .json(&json!({"username": admin["username"], "password": admin["password"]}))
        .send()
        .await
        .unwrap();
    assert!(login.status().is_success(), "{}", login.status());
    let cookie = login
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|value| {
            value
                .to_str()
                .unwrap()
                .split(';')
                .next()
                .unwrap()
                .to_owned()
        })
        .find(|pair| pair.starts_with("sasha_session"))
        .expect("the sign-in sets the session cookie");
    let draft = http
        .get(format!("{studio}/api/apps/{APP}/draft"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(draft.status(), 404, "the declined write made no draft");
    let draft: Value = draft.json().await.unwrap();
    assert_eq!(draft["details"]["cause"], "DRAFT_NOT_FOUND", "{draft}");
    assert!(
        !state
            .path()
            .join("docs/apps")
            .join(APP)
            .join("notes.md")
            .exists()
    );

    // d. Approved: the row is in the app's data.
    let data = rusqlite::Connection::open_with_flags(
        state.path().join(format!("apps/{APP}.sqlite")),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let coffee: i64 = data
        .query_row(
            "SELECT count(*) FROM items WHERE title = 'Coffee'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(coffee, 1, "the approved row exists once");
}
