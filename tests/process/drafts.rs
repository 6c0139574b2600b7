//! Drafts, preview and publication across the real processes (issue 23's
//! acceptance): the official MCP TypeScript SDK client with an elicitation
//! handler (`tests/mcp-client/drafts.mjs`) creates an app, writes a draft
//! with a table migration and checks it; the Studio page's own session
//! (cookie, Studio origin, `Sasha-App` and `Sasha-Preview`) previews the
//! draft against scratch data, where a row it writes never reaches the live
//! file; the SDK client publishes (the person accepts), writes a row and
//! reverts; then every role is restarted and the first revision's resource
//! is read with its exact bytes. The Draft page itself is driven in
//! Chromium by `tests/chromium/drafts.rs`.

use crate::common;

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use common::mcp::{self, Mcp, McpWorld, structured, token};
use common::{Backends, node_program, root};
use serde_json::{Value, json};
use studio_store::Scope;
use tokio::process::Command;

const APP: &str = "field-log";
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs one phase of `drafts.mjs`; the `value NAME=...` lines it printed.
async fn phase(
    gateway_url: &str,
    writer: &str,
    name: &str,
    env: &[(&str, &str)],
    backends: &Backends,
) -> HashMap<String, String> {
    let node = node_program(
        "the drafts acceptance test",
        Some("tests/mcp-client/node_modules/@modelcontextprotocol/sdk"),
    );
    let mut command = Command::new(node);
    command
        .arg(root().join("tests/mcp-client/drafts.mjs"))
        .current_dir(root().join("tests/mcp-client"))
        .env("MCP_URL", gateway_url)
        .env("WRITER_TOKEN", writer)
        .env("PHASE", name)
        .env("APP", APP)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = tokio::time::timeout(SCENARIO_TIMEOUT, command.output())
        .await
        .unwrap_or_else(|_| panic!("phase {name} did not finish in {SCENARIO_TIMEOUT:?}"))
        .expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("checks passed"),
        "phase {name} failed ({}).\n--- stdout\n{stdout}\n--- stderr\n{}\n--- core stderr\n{}\n--- gateway stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        backends.core.stderr(),
        backends.gateway.stderr(),
    );
    println!("{stdout}");
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix("value "))
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect()
}

/// The titles of the live file's `items` rows, read from the file itself.
fn live_titles(state: &std::path::Path) -> Vec<String> {
    let path = state.join(format!("apps/{APP}.sqlite"));
    if !path.exists() {
        return Vec::new();
    }
    let connection = rusqlite::Connection::open(path).unwrap();
    let exists: bool = connection
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'items')",
            [],
            |row| row.get(0),
        )
        .unwrap();
    if !exists {
        return Vec::new();
    }
    let mut statement = connection
        .prepare("SELECT title FROM items ORDER BY id")
        .unwrap();
    statement
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The Studio page's MCP client for `APP`, previewing `preview` if given.
fn studio_page(url: &str, session: &str, preview: Option<&str>) -> Mcp {
    let page = Mcp::studio_page(url, session, APP);
    match preview {
        Some(preview) => page.with_header("sasha-preview", preview),
        None => page,
    }
}

#[tokio::test]
async fn a_draft_is_previewed_on_scratch_data_published_reverted_and_kept() {
    let world = McpWorld::start().await;
    let writer = token(
        &world.store,
        &world.staff,
        &[Scope::ChatUse, Scope::AppsInvoke, Scope::AppsWrite],
    );
    let url = world.url();

    let drafted = phase(&url, &writer, "draft", &[], &world.backends).await;
    let preview_id = drafted["PREVIEW"].clone();

    // The Studio page previews the draft: the draft's tools (with the new
    // column), and a row written there lands in scratch data only.
    let session = world.store.create_session(&world.staff.id).unwrap();
    let mut preview = studio_page(&url, &session, Some(&preview_id));
    let listed = preview.request("tools/list", json!({})).await;
    let create = listed.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "app__field_log__items__create")
        .unwrap_or_else(|| panic!("{}", listed.result()))
        .clone();
    assert!(
        create["inputSchema"]["properties"]["values"]["properties"]["note"].is_object(),
        "the preview's tools are the draft's: {create}"
    );
    let written = preview
        .call(
            "app__field_log__items__create",
            json!({"values": {"title": "preview row", "note": "scratch"}}),
        )
        .await;
    assert_eq!(
        structured(&written)["title"],
        "preview row",
        "{:?}",
        written
    );
    let rows = preview.call("app__field_log__items__list", json!({})).await;
    assert_eq!(structured(&rows)["rows"][0]["note"], "scratch");
    assert!(
        live_titles(world.harness.path()).is_empty(),
        "the preview reached live data"
    );
    // The same page without the preview sees the live app: no such column.
    let mut live = studio_page(&url, &session, None);
    let rows = live.call("app__field_log__items__list", json!({})).await;
    assert_eq!(structured(&rows)["rows"], json!([]));
    let refused = live
        .call(
            "app__field_log__items__create",
            json!({"values": {"title": "x", "note": "y"}}),
        )
        .await;
    assert!(refused.result()["isError"] == true, "{:?}", refused);
    // A forged or foreign preview id sees nothing of the app at all.
    let mut forged = studio_page(&url, &session, Some(&"0".repeat(32)));
    let tools = forged.request("tools/list", json!({})).await;
    assert!(
        !tools.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["name"].as_str().unwrap().starts_with("app__field_log")),
        "{}",
        tools.result()
    );
    // A bearer token (a model's) cannot preview: the header is refused.
    let mut bearer = Mcp::new(
        &url,
        vec![
            ("authorization".to_owned(), format!("Bearer {writer}")),
            ("sasha-app".to_owned(), APP.to_owned()),
            ("sasha-preview".to_owned(), preview_id.clone()),
        ],
        mcp::SESSIONLESS,
    );
    let answer = bearer.request("tools/list", json!({})).await;
    assert_eq!(answer.status, 400, "{:?}", answer.body);
    let scratch = world.harness.path().join(format!("apps/.previews/{APP}"));
    assert!(
        std::fs::read_dir(&scratch).unwrap().count() > 0,
        "the preview has scratch data"
    );

    // A live row, so the migration reshapes a table holding rows: it is
    // recorded as the publisher's (the publish phase reads the activity).
    let written = live
        .call(
            "app__field_log__items__create",
            json!({"values": {"title": "before the publication"}}),
        )
        .await;
    assert_eq!(structured(&written)["title"], "before the publication");
    let first = drafted["FIRST"].clone();
    phase(
        &url,
        &writer,
        "publish",
        &[
            ("FIRST", &first),
            ("BASE", &drafted["BASE"]),
            ("CONTENT_HASH", &drafted["CONTENT_HASH"]),
            ("PUBLISHER", &world.staff.id),
        ],
        &world.backends,
    )
    .await;
    assert_eq!(
        live_titles(world.harness.path()),
        ["before the publication", "live row"]
    );
    // Publishing removed the preview's scratch data.
    assert_eq!(
        std::fs::read_dir(&scratch).map_or(0, |entries| entries.count()),
        0
    );
    let revisions = world.store.revisions(APP).unwrap();
    assert!(
        revisions
            .iter()
            .any(|revision| revision.summary.starts_with("publishAppDraft")),
        "{revisions:?}"
    );

    // Every role restarts on the same state.
    let world = world.restart().await;
    phase(
        &world.url(),
        &writer,
        "restart",
        &[
            ("FIRST", &first),
            ("FIRST_SHA256", &drafted["FIRST_SHA256"]),
        ],
        &world.backends,
    )
    .await;
    assert_eq!(
        live_titles(world.harness.path()),
        ["before the publication", "live row"]
    );
}

/// A sessionless (2026-07-28) client is asked within the call: the first
/// `publishAppDraft` answers `input_required` with the question; a declined
/// answer voids it and publishes nothing, a replayed state is refused, a yes
/// to a draft someone changed after its review is refused (`DRAFT_CHANGED`),
/// an accepted one publishes. A client that cannot be asked is told to use
/// Studio.
#[tokio::test]
async fn a_sessionless_client_publishes_after_the_person_answers() {
    let world = McpWorld::start().await;
    let writer = token(
        &world.store,
        &world.staff,
        &[Scope::ChatUse, Scope::AppsInvoke, Scope::AppsWrite],
    );
    let mut client = world.client(&writer).eliciting(|_| json!({}));
    let check = client.call("checkApp", json!({"app": "hello"})).await;
    let live = structured(&check)["status"]["revision"].clone();
    let read = client
        .call(
            "readAppFile",
            json!({"app": "hello", "path": "styles.css", "draft": true}),
        )
        .await;
    assert_eq!(
        mcp::tool_error(&read)["details"]["cause"],
        "DRAFT_NOT_FOUND"
    );
    let styles = client
        .call("readAppFile", json!({"app": "hello", "path": "styles.css"}))
        .await;
    let written = client
        .call(
            "writeAppFile",
            json!({"app": "hello", "path": "styles.css", "draft": true,
                   "content": format!("{}\n/* drafted */\n", structured(&styles)["content"].as_str().unwrap()),
                   "expectedVersion": structured(&styles)["version"]}),
        )
        .await;
    let base = structured(&written)["draft"]["baseRevision"].clone();
    assert_eq!(base, live);
    let reviewed = structured(&written)["draft"]["contentHash"].clone();
    let arguments = json!({"app": "hello", "expectedRevision": base, "contentHash": reviewed});

    let question = client
        .call("publishAppDraft", arguments.clone())
        .await
        .result()
        .clone();
    assert_eq!(question["resultType"], "input_required", "{question}");
    let message = question["inputRequests"]["confirm"]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(message.contains("changed styles.css"), "{message}");
    let state = question["requestState"].as_str().unwrap().to_owned();
    let answer = |state: &str, action: Value| json!({"name": "publishAppDraft", "arguments": arguments, "requestState": state, "inputResponses": {"confirm": action}});
    let declined = client
        .request("tools/call", answer(&state, json!({"action": "decline"})))
        .await;
    assert_eq!(
        mcp::tool_error(&declined)["code"],
        "APP_CONFIRMATION_REQUIRED"
    );
    // The declined state is void: an accept sent with it publishes nothing.
    let replayed = client
        .request(
            "tools/call",
            answer(
                &state,
                json!({"action": "accept", "content": {"confirm": true}}),
            ),
        )
        .await;
    assert_eq!(
        mcp::tool_error(&replayed)["code"],
        "APP_CONFIRMATION_REQUIRED"
    );
    let check = client.call("checkApp", json!({"app": "hello"})).await;
    assert_eq!(structured(&check)["status"]["revision"], live);

    // Asked about the draft it reviewed, the person says yes after someone
    // else changed the draft: the publication carries the reviewed content
    // hash across the question, so it is refused and nothing goes live.
    let question = client
        .call("publishAppDraft", arguments.clone())
        .await
        .result()
        .clone();
    let state = question["requestState"].as_str().unwrap().to_owned();
    let mut other = world.client(&writer);
    let drafted = other
        .call(
            "readAppFile",
            json!({"app": "hello", "path": "styles.css", "draft": true}),
        )
        .await;
    other
        .call(
            "writeAppFile",
            json!({"app": "hello", "path": "styles.css", "draft": true,
                   "content": "main { color: teal; }\n",
                   "expectedVersion": structured(&drafted)["version"]}),
        )
        .await;
    let changed = client
        .request(
            "tools/call",
            answer(
                &state,
                json!({"action": "accept", "content": {"confirm": true}}),
            ),
        )
        .await;
    let envelope = mcp::tool_error(&changed);
    assert_eq!(envelope["code"], "APP_CONFLICT", "{envelope}");
    assert_eq!(envelope["details"]["cause"], "DRAFT_CHANGED");
    let check = client.call("checkApp", json!({"app": "hello"})).await;
    assert_eq!(structured(&check)["status"]["revision"], live);

    // Reviewed again, the draft as it is now is published.
    let review = client
        .call("checkApp", json!({"app": "hello", "draft": true}))
        .await;
    let arguments = json!({"app": "hello", "expectedRevision": base, "contentHash": structured(&review)["draft"]["contentHash"]});
    let answer = |state: &str, action: Value| json!({"name": "publishAppDraft", "arguments": arguments, "requestState": state, "inputResponses": {"confirm": action}});
    let question = client
        .call("publishAppDraft", arguments.clone())
        .await
        .result()
        .clone();
    let state = question["requestState"].as_str().unwrap().to_owned();
    let published = client
        .request(
            "tools/call",
            answer(
                &state,
                json!({"action": "accept", "content": {"confirm": true}}),
            ),
        )
        .await;
    let published = structured(&published)["published"].clone();
    assert_eq!(published["previousRevision"], live);
    let check = client.call("checkApp", json!({"app": "hello"})).await;
    assert_eq!(
        structured(&check)["status"]["revision"],
        published["revision"]
    );

    // Without the elicitation capability there is no one to ask.
    let mut blind = world.client(&writer);
    let styles = blind
        .call("readAppFile", json!({"app": "hello", "path": "styles.css"}))
        .await;
    let written = blind
        .call(
            "writeAppFile",
            json!({"app": "hello", "path": "styles.css", "draft": true, "content": "main {}\n",
                   "expectedVersion": structured(&styles)["version"]}),
        )
        .await;
    let base = structured(&written)["draft"]["baseRevision"].clone();
    let refused = blind
        .call(
            "publishAppDraft",
            json!({"app": "hello", "expectedRevision": base, "contentHash": structured(&written)["draft"]["contentHash"]}),
        )
        .await;
    let envelope = mcp::tool_error(&refused);
    assert_eq!(envelope["code"], "APP_CONFIRMATION_REQUIRED");
    assert!(
        envelope["message"].as_str().unwrap().contains("Draft page"),
        "{envelope}"
    );
}
