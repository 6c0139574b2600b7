//! Withdraw, restore and delete through the gateway in front of real
//! studio-core and data-worker: an
//! admin creates a data app and writes a row; withdrawn, the app is gone from
//! `tools/list` and `resources/list` (its manager's too) and staff cannot
//! touch its lifecycle; restored, the row is still there; withdrawn and
//! deleted with the data's second confirmation, its package and data file
//! are gone and the data's backup exists. A restart of every role while it
//! is withdrawn (every role stopped and served again from the same folder)
//! changes nothing. Every step is audited.

use serde_json::{Value, json};
use studio_store::Scope;

use crate::mcp::{confirmed_create, structured, tool_error, tool_names};
use crate::world::{World as McpWorld, token};

const WRITER: [Scope; 3] = [Scope::ChatUse, Scope::AppsInvoke, Scope::AppsWrite];
const APP: &str = "field-notes";

fn resource_uris(exchange: &crate::mcp::Exchange) -> Vec<String> {
    exchange.result()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|resource| resource["uri"].as_str().unwrap().to_owned())
        .collect()
}

fn mentions_app(names: &[String]) -> bool {
    names.iter().any(|name| name.contains("field_notes"))
}

#[tokio::test]
async fn an_admin_withdraws_restores_and_deletes_an_app() {
    let world = McpWorld::start().await;
    let admin_token = token(&world.store, &world.admin, &WRITER);
    let mut client = world.client(&admin_token).eliciting(|_| json!({}));
    let staff_writer = token(&world.store, &world.staff, &WRITER);
    let mut staff = world.client(&staff_writer);

    let created = client
        .call(
            "createApp",
            json!({"app": APP, "name": "Field notes", "description": "Notes from the field", "withTable": true}),
        )
        .await;
    assert_eq!(
        structured(&created)["status"]["ok"],
        true,
        "{}",
        created.body
    );
    let row = confirmed_create(
        &mut client,
        "app__field_notes__items__create",
        json!({"values": {"title": "Bridge inspected"}, "idempotencyKey": "note-1"}),
    )
    .await;
    assert_eq!(row["title"], "Bridge inspected", "{row}");
    let data_file = world.path().join(format!("apps/{APP}.sqlite"));
    assert!(data_file.exists());
    let package = world.path().join(format!("docs/apps/{APP}"));

    // Listed for the source tools' callers; staff are refused by core.
    let listed = tool_names(&client.request("tools/list", json!({})).await);
    for name in ["withdrawApp", "restoreApp", "deleteApp"] {
        assert!(listed.contains(&name.to_owned()), "{name}: {listed:?}");
    }
    let refused = staff.call("withdrawApp", json!({"app": APP})).await;
    assert_eq!(tool_error(&refused)["code"], "APP_ACCESS_DENIED");

    // Withdrawn: gone for the admin and for staff who manage it.
    let withdrawn = client.call("withdrawApp", json!({"app": APP})).await;
    assert_eq!(
        structured(&withdrawn)["withdrawn"],
        true,
        "{}",
        withdrawn.body
    );
    for who in [&mut client, &mut staff] {
        let tools = tool_names(&who.request("tools/list", json!({})).await);
        assert!(!mentions_app(&tools), "{tools:?}");
        let resources = resource_uris(&who.request("resources/list", json!({})).await);
        assert!(
            !resources.iter().any(|uri| uri.contains(APP)),
            "{resources:?}"
        );
    }
    let source = client.call("listAppFiles", json!({"app": APP})).await;
    let envelope = tool_error(&source);
    assert_eq!(envelope["code"], "APP_OPERATION_UNAVAILABLE", "{envelope}");
    assert_eq!(envelope["details"]["reason"], "withdrawn");
    assert!(package.join("APP.md").exists() && data_file.exists());

    // Still withdrawn after every role restarted: the flag is the core
    // database's, not any process's.
    let world = world.restart().await;
    let mut client = world.client(&admin_token).eliciting(|_| json!({}));
    let mut staff = world.client(&staff_writer);
    for who in [&mut client, &mut staff] {
        let tools = tool_names(&who.request("tools/list", json!({})).await);
        assert!(!mentions_app(&tools), "after a restart: {tools:?}");
    }

    // Deleting data needs the id repeated; a live app is never deleted.
    let unconfirmed = client
        .call(
            "deleteApp",
            json!({"app": APP, "deleteData": true, "confirmAppId": "field-note"}),
        )
        .await;
    assert_eq!(tool_error(&unconfirmed)["code"], "APP_INPUT_INVALID");
    assert!(package.exists());

    // Restored: back as it was, the row still there.
    let restored = client.call("restoreApp", json!({"app": APP})).await;
    assert_eq!(
        structured(&restored)["withdrawn"],
        false,
        "{}",
        restored.body
    );
    let tools = tool_names(&client.request("tools/list", json!({})).await);
    assert!(
        tools.contains(&"open_app__field_notes".to_owned()),
        "{tools:?}"
    );
    let resources = resource_uris(&client.request("resources/list", json!({})).await);
    assert!(
        resources.iter().any(|uri| uri.contains(APP)),
        "{resources:?}"
    );
    let rows = client
        .call("app__field_notes__items__list", json!({}))
        .await;
    let rows: Vec<Value> = structured(&rows)["rows"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["title"], "Bridge inspected");
    let live = client.call("deleteApp", json!({"app": APP})).await;
    assert_eq!(tool_error(&live)["code"], "APP_CONFLICT");

    // Withdrawn and deleted with its data: the backup first, then nothing.
    client.call("withdrawApp", json!({"app": APP})).await;
    let deleted = client
        .call(
            "deleteApp",
            json!({"app": APP, "deleteData": true, "confirmAppId": APP}),
        )
        .await;
    let result = structured(&deleted).clone();
    assert_eq!(result["packageDeleted"], true, "{result}");
    assert_eq!(result["dataDeleted"], true, "{result}");
    let backup = world
        .path()
        .join("apps")
        .join(result["dataBackup"].as_str().unwrap());
    assert!(backup.is_file(), "{}", backup.display());
    let copy = rusqlite::Connection::open(&backup).unwrap();
    let kept: i64 = copy
        .query_row("SELECT count(*) FROM items", [], |row| row.get(0))
        .unwrap();
    assert_eq!(kept, 1);
    assert!(!data_file.exists());
    assert!(!package.exists());
    let tools = tool_names(&client.request("tools/list", json!({})).await);
    assert!(!mentions_app(&tools), "{tools:?}");
    // The id stays taken.
    let again = client
        .call(
            "createApp",
            json!({"app": APP, "name": "Again", "description": "Again"}),
        )
        .await;
    assert_eq!(tool_error(&again)["code"], "APP_CONFLICT");

    let audit: Vec<(String, String)> = world
        .store
        .audit_entries(Some(APP))
        .unwrap()
        .into_iter()
        .filter(|entry| {
            matches!(
                entry.action.as_str(),
                "app.withdrawn" | "app.restored" | "app.deleted" | "app.data-deleted"
            )
        })
        .map(|entry| (entry.action, entry.actor))
        .collect();
    let by_admin = |action: &str| (action.to_owned(), world.admin.id.clone());
    assert_eq!(
        audit,
        [
            by_admin("app.withdrawn"),
            by_admin("app.restored"),
            by_admin("app.withdrawn"),
            by_admin("app.deleted"),
            by_admin("app.data-deleted"),
        ]
    );
}
