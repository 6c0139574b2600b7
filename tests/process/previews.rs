//! A draft's preview shows its previewer only the live rows they may read,
//! across the real processes (issue 42): the Studio page's session previews
//! (`Sasha-App`, `Sasha-Preview`) through the gateway, studio-core says what
//! the previewer reads of the live app, and data-worker keeps only that in
//! their scratch copy. Two drafts that would show everyone's rows: a staff
//! manager's draft of a catalogue app making an owner table shared (which
//! the review itself says only an admin may publish), and a member's draft
//! of their own shared member app. The rules are proved in depth in the
//! tiers below (`sasha-contract`'s `PreviewScope`, studio-core's
//! `drafts::preview_tests`, data-worker's preview tests).

use crate::common;

use common::mcp::{Mcp, McpWorld, structured, token};
use serde_json::{Value, json};
use studio_store::{AppAccess, Scope};

/// `tool` with `arguments`; when the gateway asks the person first (a
/// sessionless input request), answered yes.
async fn accepted(client: &mut Mcp, tool: &str, arguments: Value) -> Value {
    let first = client.call(tool, arguments.clone()).await;
    if first.result()["resultType"] != "input_required" {
        return structured(&first).clone();
    }
    let state = first.result()["requestState"].clone();
    let answered = client
        .request(
            "tools/call",
            json!({"name": tool, "arguments": arguments, "requestState": state,
                   "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}}),
        )
        .await;
    structured(&answered).clone()
}

/// The `field` of every row `client` lists from `tool`.
async fn listed(client: &mut Mcp, tool: &str, field: &str) -> Vec<Value> {
    let rows = client.call(tool, json!({})).await;
    structured(&rows)["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("{:?}", rows.body))
        .iter()
        .map(|row| row[field].clone())
        .collect()
}

fn habit_log() -> Value {
    let dir = common::root().join("tests/browser/apps/habit-log");
    let files: Vec<Value> = [
        "APP.md",
        "index.html",
        "styles.css",
        "app.js",
        "schema.sql",
        "migrations/001-initial.sql",
    ]
    .iter()
    .map(|path| json!({"path": path, "content": std::fs::read_to_string(dir.join(path)).unwrap()}))
    .collect();
    Value::Array(files)
}

#[tokio::test]
async fn a_preview_shows_its_previewer_only_the_live_rows_they_may_read() {
    let world = McpWorld::start().await;
    let url = world.url();
    let page = |user: &studio_store::User, app: &str, preview: Option<&str>| {
        let session = world.store.create_session(&user.id).unwrap();
        let page = Mcp::studio_page(&url, &session, app);
        match preview {
            Some(preview) => page.with_header("sasha-preview", preview),
            None => page,
        }
    };

    // A catalogue app: the member (granted use) and the staff manager each
    // keep an expense, each seeing only their own.
    world
        .store
        .grant("expense-log", &world.member.id, AppAccess::Use, None)
        .unwrap();
    let mut staff_live = page(&world.staff, "expense-log", None);
    let category = staff_live
        .call(
            "app__expense_log__categories__create",
            json!({"values": {"name": "Travel"}}),
        )
        .await;
    let category = structured(&category)["id"].clone();
    for (user, note) in [(&world.member, "mia's taxi"), (&world.staff, "sam's train")] {
        let mut live = page(user, "expense-log", None);
        let created = live
            .call(
                "app__expense_log__expenses__create",
                json!({"values": {"spent_on": "2026-01-05", "amount": 12.5, "category_id": category, "note": note}}),
            )
            .await;
        assert_eq!(structured(&created)["note"], note);
    }

    // The staff manager drafts expenses into a shared table; the review
    // says only an admin may publish that ...
    let writer = token(
        &world.store,
        &world.staff,
        &[Scope::ChatUse, Scope::AppsInvoke, Scope::AppsWrite],
    );
    let mut tools = world.client(&writer).eliciting(|_| json!({}));
    let manifest = tools
        .call(
            "readAppFile",
            json!({"app": "expense-log", "path": "APP.md"}),
        )
        .await;
    let manifest = structured(&manifest).clone();
    // Shared rows have no owner for its add-expense action to stamp: the
    // draft drops that action too.
    let shared = manifest["content"]
        .as_str()
        .unwrap()
        .replace(
            "    access: owner\n    ownerField: created_by\n",
            "    access: shared\n",
        )
        .replace(
            "  - id: add-expense\n    file: actions/add-expense.action.yaml\n",
            "",
        );
    let drafted = tools
        .call(
            "writeAppFile",
            json!({"app": "expense-log", "path": "APP.md", "content": shared, "draft": true,
                   "expectedVersion": manifest["version"]}),
        )
        .await;
    let draft = structured(&drafted)["draft"].clone();
    let preview_id = draft["previewId"].as_str().unwrap().to_owned();
    let action = tools
        .call(
            "readAppFile",
            json!({"app": "expense-log", "path": "actions/add-expense.action.yaml"}),
        )
        .await;
    let action_version = structured(&action)["version"].clone();
    structured(
        &tools
            .call(
                "deleteAppFile",
                json!({"app": "expense-log", "path": "actions/add-expense.action.yaml",
                       "draft": true, "expectedVersion": action_version}),
            )
            .await,
    );
    let checked = tools
        .call("checkApp", json!({"app": "expense-log", "draft": true}))
        .await;
    let checked = structured(&checked)["draft"].clone();
    assert_eq!(checked["review"]["needsAdmin"], true, "{checked}");

    // ... and its preview shows the staff manager their own expense only.
    let mut preview = page(&world.staff, "expense-log", Some(&preview_id));
    assert_eq!(
        listed(&mut preview, "app__expense_log__expenses__list", "note").await,
        [json!("sam's train")]
    );
    // The shared categories are all there; live is as it was.
    assert_eq!(
        listed(&mut preview, "app__expense_log__categories__list", "name").await,
        [json!("Travel")]
    );
    assert_eq!(
        listed(&mut staff_live, "app__expense_log__expenses__list", "note").await,
        [json!("sam's train")]
    );

    // A member app its author shared: a colleague keeps a habit in it.
    let author = token(
        &world.store,
        &world.member,
        &[Scope::AppsInvoke, Scope::AppsAuthor],
    );
    let mut member_tools = world.client(&author).eliciting(|_| json!({}));
    let deployed = accepted(
        &mut member_tools,
        "deployMyApp",
        json!({"name": "Habit Log", "files": habit_log()}),
    )
    .await;
    let habit_log_id = deployed["app"]["id"].as_str().unwrap().to_owned();
    let tool_id = habit_log_id.replace('-', "_");
    let colleague = world
        .store
        .create_user(
            "ola",
            studio_store::UserRole::Member,
            "correct horse battery",
        )
        .unwrap();
    accepted(
        &mut member_tools,
        "shareMyApp",
        json!({"app": habit_log_id, "username": "ola"}),
    )
    .await;
    for (user, title) in [(&colleague, "ola's run"), (&world.member, "mia's reading")] {
        let mut live = page(user, &habit_log_id, None);
        let created = live
            .call(
                &format!("app__{tool_id}__habits__create"),
                json!({"values": {"title": title}}),
            )
            .await;
        assert_eq!(structured(&created)["title"], title);
    }
    // The author drafts the app and previews it: her own habit, not ola's.
    let mut files = habit_log();
    files[3]["content"] = json!("document.title = 'Drafted';\n");
    let drafted = member_tools
        .call("draftMyApp", json!({"app": habit_log_id, "files": files}))
        .await;
    let preview_id = structured(&drafted)["previewId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut preview = page(&world.member, &habit_log_id, Some(&preview_id));
    assert_eq!(
        listed(
            &mut preview,
            &format!("app__{tool_id}__habits__list"),
            "title"
        )
        .await,
        [json!("mia's reading")]
    );

    // Each previewer's copy is their own file, private to the worker.
    let scratch = world.harness.path().join("apps/.previews");
    for app in ["expense-log", habit_log_id.as_str()] {
        let folder = scratch.join(app);
        let files: Vec<_> = std::fs::read_dir(&folder)
            .unwrap_or_else(|error| panic!("{}: {error}", folder.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        assert!(!files.is_empty(), "{app}");
        for file in files {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", file.display());
        }
    }
}
