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
//!  e. "Make the heading say …": the model reads the live app.js (read-only),
//!     writes a broken one (a module `import`) into a draft with that
//!     version → Approve; `checkApp` with `draft: true` (read-only) shows
//!     the diagnostic; it reads the draft's app.js and writes the fixed one
//!     (the original plus a line setting the heading) → Approve; the second
//!     check validates. The page opens the Draft page from the card's link
//!     and previews the draft;
//!  f. "Looks good, publish it": `publishAppDraft` with the expectedRevision
//!     and contentHash the fixed write's answer named → a card listing the
//!     files changed with their diffs →
//!     Approve → published; the live app shows the new heading;
//!  d. "Log a coffee": the new app's table tool creates a row → a card with
//!     the row → Approve → the row exists (the model reads it back and
//!     quotes it).
//!
//! Then `tests/browser/assistant.mjs` reloads the page (the transcript is
//! kept) and opens the created app from the sidebar. This side checks what
//! the provider was sent (the user's own tools, and never a confirmation id
//! or anything that approves), that the live package is the fixed app.js,
//! that the current revision is the published one and that no draft is left.
//! Screenshots go to
//! `$CARGO_TARGET_DIR/browser-artifacts/assistant/`.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::fake_llm::{self, FakeLlm, Step};
use common::{browser_artifacts, free_port, http_client};
use serde_json::{Value, json};

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(300);
const APP: &str = "expense-log";
const CREATE_ROW: &str = "app__expense_log__items__create";
const LIST_ROWS: &str = "app__expense_log__items__list";
/// A draft app.js the validator refuses (a module `import`).
const BROKEN_SCRIPT: &str = "import x from \"y\";\nx();\n";
/// What the fixed app.js adds to the generated one: a visible heading.
const HEADING_LINE: &str =
    "document.querySelector(\"h1\").textContent = \"Expense log, revised\";\n";
const FIXED_ANSWER: &str =
    "The draft validates. Preview it on the Draft page, then tell me to publish.";
const PUBLISHED_ANSWER: &str = "Published: the heading is live.";

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

/// Every tool result in `request`'s messages, oldest first.
fn tool_results(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter(|m| m["role"] == "tool")
                .filter_map(|m| m["content"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The 64 hex digits after the first `marker` in `text`, if any.
fn hex_after(text: &str, marker: &str) -> Option<String> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let hex: String = rest.chars().take(64).collect();
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}

/// A `readAppFile` answer's version (`app.js (<n> bytes, version <hex>)`).
fn read_version(text: &str) -> Option<String> {
    hex_after(text.lines().next()?, "version ")
}

/// The text of an error the scripted model reports instead of going on.
fn confused(what: &str, seen: &str) -> Step {
    Step::Text(format!("I could not {what}: {seen}"))
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
        // e. A new heading, in a draft: first a broken app.js (approved),
        // which checkApp refuses, then the fix (approved), which validates.
        calls(vec![("readAppFile", json!({"app": APP, "path": "app.js"}))]),
        Step::Made(Arc::new(|request: &Value| {
            let read = fake_llm::last_tool_result(request);
            match read_version(&read) {
                Some(version) => calls(vec![(
                    "writeAppFile",
                    json!({"app": APP, "path": "app.js", "content": BROKEN_SCRIPT, "draft": true, "expectedVersion": version}),
                )]),
                None => confused("read app.js", &read),
            }
        })),
        calls(vec![("checkApp", json!({"app": APP, "draft": true}))]),
        calls(vec![(
            "readAppFile",
            json!({"app": APP, "path": "app.js", "draft": true}),
        )]),
        Step::Made(Arc::new(|request: &Value| {
            let results = tool_results(request);
            let live = results
                .iter()
                .find(|text| text.starts_with("app.js (") && text.contains("\n\n"));
            let draft = fake_llm::last_tool_result(request);
            let original = live
                .and_then(|text| text.split_once("\n\n"))
                .map(|(_, content)| content);
            match (original, read_version(&draft)) {
                (Some(original), Some(version)) => calls(vec![(
                    "writeAppFile",
                    json!({"app": APP, "path": "app.js", "content": format!("{original}{HEADING_LINE}"), "draft": true, "expectedVersion": version}),
                )]),
                _ => confused("read the draft's app.js", &draft),
            }
        })),
        calls(vec![("checkApp", json!({"app": APP, "draft": true}))]),
        Step::Made(Arc::new(|request: &Value| {
            let check = fake_llm::last_tool_result(request);
            if check.contains("The draft validates") {
                Step::Text(FIXED_ANSWER.to_owned())
            } else {
                confused("fix the draft", &check)
            }
        })),
        // f. Publication, after the person previewed the draft and approves.
        Step::Made(Arc::new(|request: &Value| {
            let results = tool_results(request);
            match results.iter().rev().find_map(|text| {
                Some((
                    hex_after(text, "publishAppDraft with expectedRevision \"")?,
                    hex_after(text, "and contentHash \"")?,
                ))
            }) {
                Some((revision, content_hash)) => calls(vec![(
                    "publishAppDraft",
                    json!({"app": APP, "expectedRevision": revision, "contentHash": content_hash}),
                )]),
                None => confused("find the draft's revision", &results.join("\n")),
            }
        })),
        Step::Made(Arc::new(|request: &Value| {
            let published = fake_llm::last_tool_result(request);
            if published.starts_with("Published the draft of") {
                Step::Text(PUBLISHED_ANSWER.to_owned())
            } else {
                confused("publish", &published)
            }
        })),
        // d. A row through the new app's own table tool, then read back.
        calls(vec![(CREATE_ROW, json!({"values": {"title": "Coffee"}}))]),
        calls(vec![(LIST_ROWS, json!({}))]),
        Step::Made(Arc::new(|request: &Value| {
            let rows = fake_llm::last_tool_result(request);
            Step::Text(if rows.contains("Coffee") {
                "Logged. Your expenses now read: Coffee.".to_owned()
            } else {
                format!("The row is missing: {rows}")
            })
        })),
    ];
    let fake = FakeLlm::start(fake_llm::script(script)).await;
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = fake.up(state.path(), port, &[]).await;
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
    common::browser::screenshots(&output, 24);
    let confirmations: Vec<&str> = output
        .lines()
        .filter_map(|line| line.strip_prefix("confirmation "))
        .collect();
    assert_eq!(confirmations.len(), 6, "{output}");

    // What the provider was sent: the user's tools, and nothing that approves.
    let requests = fake.requests();
    assert_eq!(requests.len(), 17, "{requests:#?}");
    let first = offered(&requests[0]);
    assert!(first.contains(&"createApp".to_owned()), "{first:?}");
    assert!(first.contains(&"listAppFiles".to_owned()), "{first:?}");
    assert!(first.contains(&"publishAppDraft".to_owned()), "{first:?}");
    let third_turn = offered(&requests[14]);
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

    // e. The broken draft's check named the problem; the fix validated.
    let broken = fake_llm::last_tool_result(&requests[7]);
    assert!(
        broken.contains("Draft changed app.js.") && broken.contains("does not validate"),
        "the broken write's answer says the draft does not validate: {broken}"
    );
    let check = fake_llm::last_tool_result(&requests[8]);
    assert!(
        check.contains("app.js") && check.contains("JS_MODULE_SYNTAX"),
        "checkApp shows the diagnostic: {check}"
    );
    let fixed = fake_llm::last_tool_result(&requests[10]);
    assert!(
        fixed.contains("publishAppDraft with expectedRevision"),
        "the fixed write's answer says how to publish: {fixed}"
    );
    assert!(
        fake_llm::last_tool_result(&requests[11]).contains("The draft validates"),
        "{}",
        requests[11]
    );

    // f. Published: the live package is the fixed draft, the revision moved.
    let published = fake_llm::last_tool_result(&requests[13]);
    let now = hex_after(&published, "its live revision is now ")
        .unwrap_or_else(|| panic!("the publication names the revision: {published}"));
    let was =
        hex_after(&published, "(was ").unwrap_or_else(|| panic!("and the one before: {published}"));
    assert_ne!(now, was, "{published}");
    let package = state.path().join("docs/apps").join(APP);
    let script = std::fs::read_to_string(package.join("app.js")).unwrap();
    assert!(script.starts_with("\"use strict\";"), "{script}");
    assert!(script.ends_with(HEADING_LINE), "{script}");
    assert!(!script.contains("import x"), "{script}");
    let store = common::core_database::core_store(state.path());
    let registered = store.registered_app(APP).unwrap().unwrap();
    assert_eq!(
        registered.current_revision, now,
        "the current revision is the published one"
    );

    // c and f. No draft remains: the declined one was never made, the
    // published one is gone.
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
    assert_eq!(draft.status(), 404, "no draft remains after publishing");
    let draft: Value = draft.json().await.unwrap();
    assert_eq!(draft["details"]["cause"], "DRAFT_NOT_FOUND", "{draft}");
    assert!(!package.join("notes.md").exists(), "the declined file");

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

/// Approvals held by the server (`tests/browser/assistant-approvals.mjs`):
/// a pending card survives a reload and shows in a second tab; approved
/// after the reload, the call runs once; declined from the second tab, the
/// first tab's card says so; a turn abandoned by a closed tab and cancelled
/// from the other reads "Cancelled", never "Running…".
#[tokio::test]
async fn approvals_survive_a_reload_and_show_in_every_tab() {
    browser::require();
    let script = vec![
        // 1. Approved in a reloaded tab.
        calls(vec![(
            "createApp",
            json!({"app": "notes", "name": "Notes", "description": "Team notes", "withTable": true}),
        )]),
        Step::Text("I created Notes.".to_owned()),
        // 2. Declined in the second tab.
        calls(vec![(
            "writeAppFile",
            json!({"app": "notes", "path": "notes.md", "content": "# Notes\n", "draft": true}),
        )]),
        Step::Text("Understood, I left it.".to_owned()),
        // 3. Abandoned, then cancelled: the model is not asked again.
        calls(vec![(
            "writeAppFile",
            json!({"app": "notes", "path": "more.md", "content": "# More\n", "draft": true}),
        )]),
    ];
    let fake = FakeLlm::start(fake_llm::script(script)).await;
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = fake.up(state.path(), port, &[]).await;
    let admin: Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let studio = format!("http://localhost:{port}");
    let artifacts = browser_artifacts().join("assistant-approvals");
    let output = BrowserScript::start(
        "assistant-approvals",
        &[
            ("STUDIO_URL", &studio),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;
    common::browser::screenshots(&output, 10);
    let confirmations: Vec<&str> = output
        .lines()
        .filter_map(|line| line.strip_prefix("confirmation "))
        .collect();
    // Approve, its replay, Deny (the cancel decides nothing).
    assert_eq!(confirmations.len(), 3, "{output}");

    // The model was asked five times: the cancelled turn went no further.
    let requests = fake.requests();
    assert_eq!(requests.len(), 5, "{requests:#?}");
    let created = fake_llm::last_tool_result(&requests[1]);
    assert!(created.contains("notes"), "createApp ran: {created}");
    assert!(
        fake_llm::last_tool_result(&requests[3]).contains("declined"),
        "the model is told the person declined: {}",
        requests[3]
    );
    for (index, request) in requests.iter().enumerate() {
        let body = request.to_string();
        for id in &confirmations {
            assert!(
                !body.contains(id),
                "request {index} carries confirmation id {id}"
            );
        }
    }

    // The approved app exists once; neither the declined nor the cancelled
    // file was written (no draft was ever made).
    let store = common::core_database::core_store(state.path());
    assert!(store.registered_app("notes").unwrap().is_some());
    let package = state.path().join("docs/apps/notes");
    assert!(package.join("APP.md").exists());
    assert!(!package.join("notes.md").exists());
    assert!(!package.join("more.md").exists());
    let approvals: Vec<(String, String)> = rusqlite::Connection::open_with_flags(
        state.path().join("core.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap()
    .prepare("SELECT tool, outcome FROM assistant_approvals ORDER BY rowid")
    .unwrap()
    .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap();
    assert_eq!(
        approvals,
        [
            ("createApp".to_owned(), "approved".to_owned()),
            ("writeAppFile".to_owned(), "declined".to_owned()),
            ("writeAppFile".to_owned(), "cancelled".to_owned()),
        ],
        "each approval was decided once"
    );
}
