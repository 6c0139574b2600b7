//! Studio's Draft page in real Chromium (drafts with a safe preview and
//! publication): starts `sasha up` over an empty apps folder, creates an app
//! with a table as the dev admin through `POST /api/apps`, starts its draft
//! through `POST /api/apps/:id/draft`, and fills the draft through the MCP
//! source tools with `draft: true` (as an assistant would): a new migration
//! adding a column, the declared schema to match, and an app.js that shows
//! "Now with notes" and stores a note with each item. Then runs
//! `tests/browser/drafts.mjs` (the admin opens Draft, reviews the changes and
//! the schema review, previews the draft and adds a row there, closes the
//! preview, and is asked to publish; then this test, another session, adds a
//! line to the draft's app.js, the admin's Publish is refused as "the draft
//! changed since you reviewed it" and this test checks nothing went live;
//! the admin publishes the draft as drawn again, and opens the live app).
//! Then checks that the package on disk is the draft's (the migration and the
//! late line included), the live data has the new column but not the row
//! made in the preview, and the app's current revision moved.
//! Screenshots go to `$CARGO_TARGET_DIR/browser-artifacts/drafts/`.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::time::Duration;

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::mcp::{Mcp, SESSIONLESS, structured};
use common::{UpProcess, browser_artifacts, free_port, http_client};
use serde_json::{Value, json};

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);
const APP: &str = "field-notes";
/// The title of the row the browser adds in the preview (never live).
const PREVIEW_ROW: &str = "Preview-only fence post";

const MIGRATION: &str = "ALTER TABLE items ADD COLUMN note TEXT;\n";
/// The line another session adds to the draft's app.js after the person
/// reviewed it.
const LATE_LINE: &str = "// changed after the review";
/// Lines the script may print (screenshots) before each handshake.
const HANDSHAKE_PREAMBLE: usize = 200;

/// The draft's version of a file (`readAppFile` with `draft: true`): its
/// content and version, or `None` when the draft has no such file.
async fn read_draft(client: &mut Mcp, path: &str) -> Option<(String, Value)> {
    let read = client
        .call(
            "readAppFile",
            json!({"app": APP, "path": path, "draft": true}),
        )
        .await;
    if read.result()["isError"] == true {
        return None;
    }
    let file = structured(&read);
    Some((
        file["content"].as_str().unwrap().to_owned(),
        file["version"].clone(),
    ))
}

/// `writeAppFile` into the draft (with the draft's version of an existing file).
async fn write_draft(client: &mut Mcp, path: &str, content: &str) -> Value {
    let mut arguments = json!({"app": APP, "path": path, "content": content, "draft": true});
    if let Some((_, version)) = read_draft(client, path).await {
        arguments["expectedVersion"] = version;
    }
    let written = client.call("writeAppFile", arguments).await;
    structured(&written).clone()
}

/// The template's app.js, changed so the preview shows the draft: a visible
/// "Now with notes" line, and a note stored and shown with every item.
fn edited_script(original: &str) -> String {
    let shown = "item.textContent = row.title;";
    let created = "await Sasha.data.create(\"items\", { title });";
    assert!(original.contains(shown), "{original}");
    assert!(original.contains(created), "{original}");
    original
        .replacen(
            "\"use strict\";\n",
            "\"use strict\";\nconst edition = document.createElement(\"p\");\nedition.id = \"edition\";\nedition.textContent = \"Now with notes\";\ndocument.querySelector(\"main\").prepend(edition);\n",
            1,
        )
        .replacen(
            shown,
            "item.textContent = row.note ? `${row.title} — ${row.note}` : row.title;",
            1,
        )
        .replacen(
            created,
            "await Sasha.data.create(\"items\", { title, note: \"noted in the draft\" });",
            1,
        )
}

#[tokio::test]
async fn the_draft_page_reviews_previews_and_publishes() {
    browser::require();
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = UpProcess::start(state.path(), port).await;
    let studio = format!("http://localhost:{port}");
    let http = http_client();

    // Signed in as the dev admin, the app is created through the API.
    let (admin, cookie) = common::sign_in_dev_admin(state.path(), &studio).await;
    let created = http
        .post(format!("{studio}/api/apps"))
        .header("cookie", &cookie)
        .header("origin", &studio)
        .json(&json!({
            "app": APP,
            "name": "Field notes",
            "description": "What we saw on site",
            "withTable": true,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    let first = created["status"]["revision"].as_str().unwrap().to_owned();

    // The draft is started over HTTP, as the page's "Start a draft" does.
    let started = http
        .post(format!("{studio}/api/apps/{APP}/draft"))
        .header("cookie", &cookie)
        .header("origin", &studio)
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 201);
    let started: Value = started.json().await.unwrap();
    assert_eq!(
        started["draft"]["baseRevision"],
        first.as_str(),
        "{started}"
    );

    // The draft's changes, through the MCP source tools as the same session
    // (the cookie from the Studio origin, no app bound).
    let mut client = Mcp::new(
        &format!("{studio}/mcp"),
        vec![
            ("cookie".into(), cookie.clone()),
            ("origin".into(), studio.clone()),
        ],
        SESSIONLESS,
    );
    let (schema, _) = read_draft(&mut client, "schema.sql")
        .await
        .expect("the draft starts with the live schema.sql");
    let schema = schema.replacen(
        "  created_by TEXT NOT NULL\n",
        "  created_by TEXT NOT NULL,\n  note TEXT\n",
        1,
    );
    write_draft(&mut client, "migrations/002-add-note.sql", MIGRATION).await;
    write_draft(&mut client, "schema.sql", &schema).await;
    let (script, _) = read_draft(&mut client, "app.js")
        .await
        .expect("the draft starts with the live app.js");
    let written = write_draft(&mut client, "app.js", &edited_script(&script)).await;
    assert_eq!(written["status"]["ok"], true, "{written}");

    // Nothing live changed yet.
    let package = state.path().join("docs/apps").join(APP);
    assert!(!package.join("migrations/002-add-note.sql").exists());
    assert!(
        !std::fs::read_to_string(package.join("app.js"))
            .unwrap()
            .contains("Now with notes")
    );

    let artifacts = browser_artifacts().join("drafts");
    let mut script = BrowserScript::start(
        "drafts",
        &[
            ("STUDIO_URL", &studio),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("BASE", &first.as_str()),
            ("PREVIEW_ROW", &PREVIEW_ROW),
            ("ARTIFACTS", &artifacts),
        ],
    );
    // The person has reviewed the draft and is asked to publish it: another
    // session (this MCP client) changes the draft now.
    let reviewed = script.handshake(SCENARIO_TIMEOUT, HANDSHAKE_PREAMBLE).await;
    assert_eq!(reviewed["step"], "reviewed", "{reviewed}");
    let (script_now, _) = read_draft(&mut client, "app.js").await.unwrap();
    let late = write_draft(&mut client, "app.js", &format!("{script_now}{LATE_LINE}\n")).await;
    assert_eq!(late["status"]["ok"], true, "{late}");
    script.answer(json!({"lateLine": LATE_LINE})).await;
    // Publish was refused: nothing of the draft is live.
    let refused = script.handshake(SCENARIO_TIMEOUT, HANDSHAKE_PREAMBLE).await;
    assert_eq!(refused["step"], "refused", "{refused}");
    assert!(!package.join("migrations/002-add-note.sql").exists());
    assert!(
        !std::fs::read_to_string(package.join("app.js"))
            .unwrap()
            .contains("Now with notes"),
        "a draft changed after its review went live"
    );
    let store = common::core_database::core_store(state.path());
    assert_eq!(
        store.registered_app(APP).unwrap().unwrap().current_revision,
        first
    );
    script.answer(json!({})).await;
    let output = script.finish(SCENARIO_TIMEOUT, up_stderr_tail(&up)).await;
    common::browser::screenshots(&output, 10);
    let published = output
        .lines()
        .find_map(|line| line.strip_prefix("published "))
        .expect("the script names the published revision")
        .to_owned();

    // Published, the draft is gone: the 404 the page shows as "No draft".
    let none = http
        .get(format!("{studio}/api/apps/{APP}/draft"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(none.status(), 404);
    let none: Value = none.json().await.unwrap();
    assert_eq!(none["details"]["cause"], "DRAFT_NOT_FOUND", "{none}");

    // The package on disk is the draft's, the migration included.
    assert_eq!(
        std::fs::read_to_string(package.join("migrations/002-add-note.sql")).unwrap(),
        MIGRATION
    );
    let published_script = std::fs::read_to_string(package.join("app.js")).unwrap();
    assert!(published_script.contains("Now with notes"));
    assert!(
        published_script.contains(LATE_LINE),
        "what was published is the draft reviewed again, late change included"
    );
    let validation = sasha_package::validate::validate_dir(&package);
    assert!(validation.package.is_some(), "{:?}", validation.diagnostics);

    // The current revision moved to the published one.
    let registered = store.registered_app(APP).unwrap().unwrap();
    assert_ne!(registered.current_revision, first);
    assert!(
        registered.current_revision.starts_with(&published),
        "{} vs {published}",
        registered.current_revision
    );

    // The live data has the draft's column, but not the row made in the preview.
    let data = rusqlite::Connection::open_with_flags(
        state.path().join(format!("apps/{APP}.sqlite")),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let columns: Vec<String> = data
        .prepare("SELECT name FROM pragma_table_info('items')")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(columns.contains(&"note".to_owned()), "{columns:?}");
    let leaked: i64 = data
        .query_row(
            "SELECT count(*) FROM items WHERE title = ?1",
            [PREVIEW_ROW],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(leaked, 0, "the preview's row reached the live data");
}

/// A catalogue app edited on its Draft page with no assistant
/// (`tests/browser/draft-editor.mjs`): Start a draft opens the editor, Check
/// shows a diagnostic at its line, the fix validates, Preview shows it, and
/// Publish makes it live; the live package is the edited one.
#[tokio::test]
async fn a_catalogue_app_is_edited_on_its_draft_page() {
    const DIARY: &str = "site-diary";
    browser::require();
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = UpProcess::start(state.path(), port).await;
    let studio = format!("http://localhost:{port}");
    let (admin, cookie) = common::sign_in_dev_admin(state.path(), &studio).await;
    let created = http_client()
        .post(format!("{studio}/api/apps"))
        .header("cookie", &cookie)
        .header("origin", &studio)
        .json(&json!({
            "app": DIARY,
            "name": "Site diary",
            "description": "What happened on site",
            "withTable": false,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let first: Value = created.json().await.unwrap();
    let artifacts = browser_artifacts().join("draft-editor");
    let output = BrowserScript::start(
        "draft-editor",
        &[
            ("STUDIO_URL", &studio),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;
    common::browser::screenshots(&output, 8);
    let package = state.path().join("docs/apps").join(DIARY);
    let script = std::fs::read_to_string(package.join("app.js")).unwrap();
    assert!(script.contains("Edited on the Draft page"), "{script}");
    assert!(!script.contains("import x"), "{script}");
    let store = common::core_database::core_store(state.path());
    let registered = store.registered_app(DIARY).unwrap().unwrap();
    assert_ne!(
        registered.current_revision.as_str(),
        first["status"]["revision"].as_str().unwrap(),
        "the edit was published"
    );
}
