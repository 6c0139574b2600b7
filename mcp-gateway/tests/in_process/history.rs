//! The history tools through MCP (issue 23, deliverable 4): two revisions
//! written with writeAppFile are listed, a file is read at the first, the two
//! are diffed, a stale expectedRevision is refused, and a revert to the first
//! makes the live UI resource the first revision's bytes again; a revert
//! that would drop a migration the live database applied is refused naming
//! it.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use studio_store::{Scope, TokenKind};

use crate::mcp::{Exchange, Mcp, structured, tool_error, tool_names};
use crate::world::World as McpWorld;

fn writer_token(world: &McpWorld) -> String {
    let scopes: BTreeSet<Scope> = [Scope::ChatUse, Scope::AppsInvoke, Scope::AppsWrite]
        .into_iter()
        .collect();
    world
        .store
        .mint_token(&world.staff.id, TokenKind::Access, &scopes, None)
        .unwrap()
}

fn ui_uri(app: &str, revision: &str) -> String {
    format!("ui://sasha/apps/{app}/revisions/{revision}")
}

fn text(exchange: &Exchange) -> String {
    exchange.result()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn read_resource(client: &mut Mcp, uri: &str) -> Value {
    let read = client.request("resources/read", json!({"uri": uri})).await;
    read.result()["contents"][0].clone()
}

/// writeAppFile of a whole file (its current version as expectedVersion when
/// it exists); the status of the answer.
async fn write(client: &mut Mcp, app: &str, path: &str, content: &str) -> Value {
    let read = client
        .call("readAppFile", json!({"app": app, "path": path}))
        .await;
    let mut arguments = json!({"app": app, "path": path, "content": content});
    if read.result()["isError"] != true {
        arguments["expectedVersion"] = structured(&read)["version"].clone();
    }
    let written = client.call("writeAppFile", arguments).await;
    structured(&written)["status"].clone()
}

async fn revisions(client: &mut Mcp, app: &str) -> Vec<Value> {
    let listed = client.call("listAppRevisions", json!({"app": app})).await;
    structured(&listed)["revisions"].as_array().unwrap().clone()
}

#[tokio::test]
async fn list_read_diff_and_revert_through_mcp() {
    let world = McpWorld::start().await;
    let mut client = world.client(&writer_token(&world));
    let listed = tool_names(&client.request("tools/list", json!({})).await);
    for name in [
        "listAppRevisions",
        "readAppRevisionFile",
        "diffAppRevisions",
        "revertApp",
    ] {
        assert!(listed.contains(&name.to_owned()), "{name} missing");
    }
    // Without apps:write they are absent.
    let invoker = tool_names(
        &world
            .client(&world.staff_token)
            .request("tools/list", json!({}))
            .await,
    );
    assert!(!invoker.contains(&"revertApp".to_owned()));

    let read = client
        .call("readAppFile", json!({"app": "hello", "path": "styles.css"}))
        .await;
    let original = structured(&read)["content"].as_str().unwrap().to_owned();
    let one_css = format!("{original}\n/* one */\n");
    let first = write(&mut client, "hello", "styles.css", &one_css).await;
    assert_eq!(first["ok"], true, "{first}");
    let first = first["revision"].as_str().unwrap().to_owned();
    let first_resource = read_resource(&mut client, &ui_uri("hello", &first)).await;
    assert!(first_resource["text"].is_string(), "{first_resource}");
    let second = write(
        &mut client,
        "hello",
        "styles.css",
        &format!("{one_css}/* two */\n"),
    )
    .await;
    let second = second["revision"].as_str().unwrap().to_owned();
    assert_ne!(first, second);

    // Listed newest first, the second current, both the writer's.
    let listed = revisions(&mut client, "hello").await;
    assert!(listed.len() >= 3, "{listed:?}");
    assert_eq!(listed[0]["revision"], second.as_str());
    assert_eq!(listed[0]["current"], true);
    assert_eq!(listed[1]["revision"], first.as_str());
    assert_eq!(listed[1]["current"], false);
    assert_eq!(listed[1]["summary"], "writeAppFile styles.css");
    assert_eq!(listed[1]["surface"], "mcp");
    assert_eq!(listed[1]["user"], world.staff.username.as_str());
    assert_eq!(listed[1]["uri"], ui_uri("hello", &first));

    // A file at the first revision.
    let at_first = client
        .call(
            "readAppRevisionFile",
            json!({"app": "hello", "revision": first, "path": "styles.css"}),
        )
        .await;
    assert_eq!(structured(&at_first)["content"], one_css.as_str());
    let missing = client
        .call(
            "readAppRevisionFile",
            json!({"app": "hello", "revision": first, "path": "nothing.md"}),
        )
        .await;
    assert_eq!(tool_error(&missing)["code"], "APP_RECORD_NOT_FOUND");
    let unknown = client
        .call(
            "readAppRevisionFile",
            json!({"app": "hello", "revision": "0".repeat(64), "path": "styles.css"}),
        )
        .await;
    assert_eq!(tool_error(&unknown)["code"], "APP_NOT_FOUND");

    // The diff.
    let diff = client
        .call(
            "diffAppRevisions",
            json!({"app": "hello", "from": first, "to": second}),
        )
        .await;
    let diffed = structured(&diff);
    assert_eq!(diffed["truncated"], false);
    let files = diffed["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(files[0]["path"], "styles.css");
    assert_eq!(files[0]["change"], "changed");
    assert!(
        files[0]["diff"].as_str().unwrap().contains("+/* two */"),
        "{}",
        files[0]
    );
    assert!(text(&diff).contains("changed styles.css"));

    // A stale expectedRevision is refused and changes nothing.
    let stale = client
        .call(
            "revertApp",
            json!({"app": "hello", "revision": first, "expectedRevision": first}),
        )
        .await;
    let error = tool_error(&stale);
    assert_eq!(error["code"], "APP_CONFLICT", "{error}");
    assert_eq!(error["details"]["reason"], "stale-revision");
    assert_eq!(revisions(&mut client, "hello").await[0]["current"], true);

    // The revert: the live resource is the first revision's bytes again.
    let reverted = client
        .call(
            "revertApp",
            json!({"app": "hello", "revision": first, "expectedRevision": second}),
        )
        .await;
    let answer = structured(&reverted);
    assert_eq!(answer["revision"], first.as_str());
    assert_eq!(answer["previousRevision"], second.as_str());
    assert_eq!(answer["status"]["ok"], true, "{answer}");
    assert_eq!(answer["status"]["revision"], first.as_str());
    let resources = client.request("resources/list", json!({})).await;
    assert!(
        resources.result()["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|resource| resource["uri"] == ui_uri("hello", &first)),
        "{}",
        resources.result()
    );
    let live = read_resource(&mut client, &ui_uri("hello", &first)).await;
    assert_eq!(live, first_resource);
    let file = client
        .call("readAppFile", json!({"app": "hello", "path": "styles.css"}))
        .await;
    assert_eq!(structured(&file)["content"], one_css.as_str());
    let listed = revisions(&mut client, "hello").await;
    let current: Vec<&Value> = listed.iter().filter(|r| r["current"] == true).collect();
    assert_eq!(current.len(), 1);
    assert_eq!(current[0]["revision"], first.as_str());
}

#[tokio::test]
async fn a_revert_that_would_drop_an_applied_migration_is_refused() {
    const APP: &str = "expense-log";
    const MIGRATION: &str = "migrations/003-expense-tags.sql";
    let world = McpWorld::start().await;
    let mut client = world.client(&writer_token(&world));
    // A first data call applies the package's migrations.
    let listed = client
        .call("app__expense_log__categories__list", json!({}))
        .await;
    structured(&listed);
    let before = revisions(&mut client, APP).await;
    let old = before[0]["revision"].as_str().unwrap().to_owned();

    // A new migration and the schema it makes: a new valid revision.
    write(
        &mut client,
        APP,
        MIGRATION,
        "ALTER TABLE expenses ADD COLUMN tag TEXT;\n",
    )
    .await;
    let read = client
        .call("readAppFile", json!({"app": APP, "path": "schema.sql"}))
        .await;
    let schema = structured(&read)["content"]
        .as_str()
        .unwrap()
        .replace("  note TEXT\n", "  note TEXT,\n  tag TEXT\n");
    let status = write(&mut client, APP, "schema.sql", &schema).await;
    assert_eq!(status["ok"], true, "{status}");
    let new = status["revision"].as_str().unwrap().to_owned();
    // The next data call applies it to the live database.
    let listed = client
        .call("app__expense_log__categories__list", json!({}))
        .await;
    structured(&listed);

    let refused = client
        .call(
            "revertApp",
            json!({"app": APP, "revision": old, "expectedRevision": new}),
        )
        .await;
    let error = tool_error(&refused);
    assert_eq!(error["code"], "APP_SCHEMA_INCOMPATIBLE", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains(MIGRATION),
        "{error}"
    );
    assert_eq!(error["details"]["migrations"], json!([MIGRATION]));
    // Nothing changed: the migration is still there, the revision current.
    let checked = client.call("checkApp", json!({"app": APP})).await;
    assert_eq!(structured(&checked)["status"]["revision"], new.as_str());
    assert!(
        world
            .path()
            .join("docs/apps")
            .join(APP)
            .join(MIGRATION)
            .exists()
    );
}
