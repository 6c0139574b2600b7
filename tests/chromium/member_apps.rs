//! App Studio and member apps in real Chromium: starts `sasha up` over an
//! empty apps folder (no seeding) with a scripted OpenAI-compatible provider
//! (`tests/common/fake_llm.rs`), adds three members (alice, bob, carol) and
//! an admin (ada), and runs `tests/browser/member-apps.mjs` (the admin makes
//! sure members may make apps; bob asks the assistant for a habit log, which
//! lists his apps, checks the package `tests/browser/apps/habit-log/` and
//! deploys it once he approves the card, shares it with alice once he
//! approves again, then reads the source, drafts a new heading that bob
//! previews in App Studio, and deploys it on his third yes; alice pastes a Habit Tracker data app in App
//! Studio, checks it, sees a broken file's diagnostic with its file and line,
//! fixes it, deploys it, previews it, opens it from her sidebar and adds a row;
//! she shares it with bob, who sees none of her rows and adds his own; carol
//! has no such app; the admin turns member apps off, and alice's App Studio
//! hides the editor and says why while her app still runs and she deletes it).
//! Then checks what the browser did outside it: a member app is never written
//! under the docs root, and nothing was created there.
//! Screenshots go to `$CARGO_TARGET_DIR/browser-artifacts/member-apps/`.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::time::Duration;

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::fake_llm::{self, FakeLlm, Step};
use common::{browser_artifacts, free_port, root};
use serde_json::{Value, json};
use studio_store::UserRole;

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(180);
const PASSWORD: &str = "member correct horse battery";
const ADMIN_PASSWORD: &str = "admin correct horse battery";

/// The habit log package as `deployMyApp` takes it: every file, by path.
fn habit_log() -> Value {
    let dir = root().join("tests/browser/apps/habit-log");
    let mut files = Vec::new();
    for path in [
        "APP.md",
        "index.html",
        "styles.css",
        "app.js",
        "schema.sql",
        "migrations/001-initial.sql",
    ] {
        let content = std::fs::read_to_string(dir.join(path)).unwrap();
        files.push(json!({"path": path, "content": content}));
    }
    Value::Array(files)
}

/// The function names offered in one provider request.
fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// The habit log with bob's own heading: the change the assistant drafts.
fn with_heading(files: &Value) -> Value {
    let mut files = files.clone();
    for file in files.as_array_mut().unwrap() {
        if file["path"] == "index.html" {
            let html = file["content"]
                .as_str()
                .unwrap()
                .replace("<h1>Habit Log</h1>", "<h1>Bob's habits</h1>");
            file["content"] = json!(html);
        }
    }
    files
}

/// The revision a `readMyApp` answer named, from any tool result so far.
fn read_revision(request: &Value) -> Option<String> {
    let marker = "at revision ";
    request["messages"]
        .as_array()?
        .iter()
        .filter(|message| message["role"] == "tool")
        .filter_map(|message| message["content"].as_str())
        .find_map(|text| {
            let rest = &text[text.find(marker)? + marker.len()..];
            let hex: String = rest.chars().take(64).collect();
            (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
        })
}

fn call(name: &str, arguments: Value) -> Step {
    Step::Calls(vec![(name.to_owned(), arguments)])
}

/// The id the platform gave the habit log, from `deployMyApp`'s answer
/// ("Deployed <id> (…").
fn deployed_id(request: &Value) -> Option<String> {
    request["messages"]
        .as_array()?
        .iter()
        .filter(|message| message["role"] == "tool")
        .filter_map(|message| message["content"].as_str())
        .find_map(|text| {
            let id = text.strip_prefix("Deployed ")?.split(' ').next()?;
            id.starts_with("member-").then(|| id.to_owned())
        })
}

/// A call on the deployed habit log: `arguments` with its `app`.
fn on_log(name: &'static str, arguments: Value) -> Step {
    Step::Made(std::sync::Arc::new(
        move |request: &Value| match deployed_id(request) {
            Some(id) => {
                let mut arguments = arguments.clone();
                arguments["app"] = json!(id);
                call(name, arguments)
            }
            None => Step::Text("I could not find the app's id.".to_owned()),
        },
    ))
}

#[tokio::test]
async fn members_make_share_and_delete_their_own_apps_in_app_studio() {
    browser::require();
    let files = habit_log();
    let headed = with_heading(&files);
    let deploy_headed = headed.clone();
    let script = vec![
        // Bob: "Build me a habit log". Read-only looks first, then the deploy.
        call("listMyApps", json!({})),
        call("checkMyApp", json!({"files": files})),
        // A new app: the platform names it.
        call("deployMyApp", json!({"name": "Habit Log", "files": files})),
        Step::Made(std::sync::Arc::new(|request: &Value| {
            let deployed = fake_llm::last_tool_result(request);
            Step::Text(if deployed.starts_with("Deployed member-") {
                "Your Habit Log is in your Apps list.".to_owned()
            } else {
                format!("The deploy failed: {deployed}")
            })
        })),
        // "Share it with alice".
        on_log("shareMyApp", json!({"username": "alice"})),
        Step::Made(std::sync::Arc::new(|request: &Value| {
            let shared = fake_llm::last_tool_result(request);
            Step::Text(if shared.contains("shared with alice") {
                "Shared with alice.".to_owned()
            } else {
                format!("The share failed: {shared}")
            })
        })),
        // "Make the heading say Bob's habits": read it, draft the change.
        on_log("readMyApp", json!({})),
        on_log("draftMyApp", json!({"files": headed})),
        Step::Made(std::sync::Arc::new(|request: &Value| {
            let drafted = fake_llm::last_tool_result(request);
            Step::Text(if drafted.contains("it validates") {
                "The draft is saved: preview it in App Studio, then tell me to deploy it."
                    .to_owned()
            } else {
                format!("The draft failed: {drafted}")
            })
        })),
        // "Deploy it": the drafted files, at the revision read.
        Step::Made(std::sync::Arc::new(move |request: &Value| {
            match (deployed_id(request), read_revision(request)) {
                (Some(id), Some(revision)) => call(
                    "deployMyApp",
                    json!({"app": id, "name": "Habit Log", "files": deploy_headed, "expectedRevision": revision}),
                ),
                _ => Step::Text("I could not find the app or its revision.".to_owned()),
            }
        })),
        Step::Made(std::sync::Arc::new(|request: &Value| {
            let deployed = fake_llm::last_tool_result(request);
            Step::Text(if deployed.starts_with("Deployed member-") {
                "Deployed: the new heading is live.".to_owned()
            } else {
                format!("The deploy failed: {deployed}")
            })
        })),
    ];
    let fake = FakeLlm::start(fake_llm::script(script)).await;
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = fake.up(state.path(), port, &[]).await;
    let store = common::core_database::core_store(state.path());
    let alice = store
        .create_user("alice", UserRole::Member, PASSWORD)
        .unwrap();
    let bob = store
        .create_user("bob", UserRole::Member, PASSWORD)
        .unwrap();
    let carol = store
        .create_user("carol", UserRole::Member, PASSWORD)
        .unwrap();
    let admin = store
        .create_user("ada", UserRole::Admin, ADMIN_PASSWORD)
        .unwrap();

    let artifacts = browser_artifacts().join("member-apps");
    let output = BrowserScript::start(
        "member-apps",
        &[
            ("STUDIO_URL", &format!("http://localhost:{port}")),
            ("ADMIN_USER", &admin.username),
            ("ADMIN_PASSWORD", &ADMIN_PASSWORD),
            ("ALICE_USER", &alice.username),
            ("ALICE_PASSWORD", &PASSWORD),
            ("BOB_USER", &bob.username),
            ("BOB_PASSWORD", &PASSWORD),
            ("CAROL_USER", &carol.username),
            ("CAROL_PASSWORD", &PASSWORD),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;
    common::browser::screenshots(&output, 16);
    let id = output
        .lines()
        .find_map(|line| line.strip_prefix("member-app "))
        .expect("the script names the deployed member app")
        .to_owned();
    assert!(
        id.starts_with("member-"),
        "the platform names it, whatever APP.md said: {id}"
    );

    // A member app is user content in the core database: nothing of it is
    // ever written under the docs root's apps folder.
    let apps = state.path().join("docs/apps");
    assert!(
        !apps.join(&id).exists(),
        "a member app was written under DOCS_ROOT"
    );
    let folders: Vec<String> = std::fs::read_dir(&apps)
        .map(|entries| {
            entries
                .map(|entry| entry.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    assert!(folders.is_empty(), "{folders:?}");

    // What the provider was sent for a member: the member app tools, never
    // the catalogue's source tools, and nothing that approves.
    let requests = fake.requests();
    assert_eq!(requests.len(), 11, "{requests:#?}");
    // The model read the source itself: every file is in the text it got.
    let read = fake_llm::last_tool_result(&requests[7]);
    assert!(read.contains("=== app.js\n\"use strict\";"), "{read}");
    let tools = offered(&requests[0]);
    for tool in [
        "listMyApps",
        "readMyApp",
        "checkMyApp",
        "deployMyApp",
        "shareMyApp",
    ] {
        assert!(tools.iter().any(|t| t == tool), "{tool}: {tools:?}");
    }
    for tool in [
        "listAppFiles",
        "writeAppFile",
        "createApp",
        "publishAppDraft",
    ] {
        assert!(!tools.iter().any(|t| t == tool), "{tool}: {tools:?}");
    }
    let system = requests[0]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(system.contains("member apps"), "{system}");
    for request in &requests {
        assert!(!request.to_string().contains("confirmationToken"));
    }
    // The checked package validated before it was deployed.
    assert!(
        fake_llm::last_tool_result(&requests[2]).contains("validates as a member app"),
        "{}",
        requests[2]
    );
    let store = common::core_database::core_store(state.path());
    let log = store
        .member_apps(Some(&bob.id))
        .unwrap()
        .into_iter()
        .find(|app| app.name == "Habit Log")
        .unwrap();
    assert_eq!(log.author_name.as_deref(), Some("bob"));
    assert_eq!(log.shares, ["alice"]);
    // Two revisions, both bob's; the drafted one is live and no draft is left.
    let revisions = store.revisions(&log.id).unwrap();
    assert_eq!(revisions.len(), 2, "{revisions:?}");
    assert!(revisions.iter().all(|r| r.user_id == log.author_id));
    assert_eq!(
        log.revision,
        revisions.iter().find(|r| r.current).unwrap().revision
    );
    assert!(store.draft(&log.id).unwrap().is_none());
}
