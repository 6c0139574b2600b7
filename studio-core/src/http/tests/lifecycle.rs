//! The lifecycle routes in process, through the router: only admins, only
//! same-origin, withdraw → the app is gone from every Studio answer
//! (the list, the resource, the access panel: the hidden 404) and listed
//! among the withdrawn apps → restore → back as it was; delete only a
//! withdrawn app, its data only with the id typed again.

use http::StatusCode;
use serde_json::json;

use crate::test_world::{STUDIO, World};

#[tokio::test]
async fn admins_withdraw_restore_and_delete_through_studio() {
    let world = World::new();
    let revision = world.create_as_admin("notes", false).await;
    let admin = world.session(&world.admin);
    let staff = world.session(&world.staff);
    let cookie = ("cookie", admin.as_str());
    let origin = ("origin", STUDIO);
    let json_type = ("content-type", "application/json");

    // Staff manage the app but may not withdraw it; nobody without the origin.
    let (status, refused) = world
        .send(
            "POST",
            "/api/apps/notes/withdraw",
            &[("cookie", &staff), origin],
            "",
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(refused["code"], "APP_ACCESS_DENIED");
    let (status, _) = world
        .send("POST", "/api/apps/notes/withdraw", &[cookie], "")
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = world
        .send("GET", "/api/withdrawn-apps", &[("cookie", &staff)], "")
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let (status, withdrawn) = world
        .send("POST", "/api/apps/notes/withdraw", &[cookie, origin], "")
        .await;
    assert_eq!(status, StatusCode::OK, "{withdrawn}");
    assert_eq!(
        withdrawn,
        json!({"app": "notes", "changed": true, "withdrawn": true, "packageDeleted": false, "dataDeleted": false})
    );
    // Gone from every Studio answer, the admin's own included.
    let (_, listed) = world.send("GET", "/api/apps", &[cookie], "").await;
    assert!(
        !listed["apps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|app| app["id"] == "notes"),
        "{listed}"
    );
    for uri in [
        format!("/api/apps/notes/resource?revision={revision}"),
        "/api/apps/notes/access".to_owned(),
        "/api/apps/notes/recovery".to_owned(),
    ] {
        let (status, answer) = world.send("GET", &uri, &[cookie], "").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}: {answer}");
        assert_eq!(answer["message"], "not found", "{uri}");
    }
    let (status, list) = world
        .send("GET", "/api/withdrawn-apps", &[cookie], "")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["apps"][0]["app"], "notes");
    assert_eq!(list["apps"][0]["name"], "Notes");
    assert_eq!(list["apps"][0]["withdrawnBy"], "ada");
    assert_eq!(list["apps"][0]["packageDeleted"], false);

    let (status, restored) = world
        .send("POST", "/api/apps/notes/restore", &[cookie, origin], "")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(restored["withdrawn"], false);
    let (_, listed) = world.send("GET", "/api/apps", &[cookie], "").await;
    assert!(
        listed["apps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|app| app["id"] == "notes")
    );
    let (_, list) = world
        .send("GET", "/api/withdrawn-apps", &[cookie], "")
        .await;
    assert_eq!(list["apps"], json!([]));

    // Delete: only a withdrawn app; its data only with the id typed again.
    let body = json!({}).to_string();
    let (status, live) = world
        .send(
            "POST",
            "/api/apps/notes/delete",
            &[cookie, origin, json_type],
            &body,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{live}");
    world
        .send("POST", "/api/apps/notes/withdraw", &[cookie, origin], "")
        .await;
    let (status, unconfirmed) = world
        .send(
            "POST",
            "/api/apps/notes/delete",
            &[cookie, origin, json_type],
            &json!({"deleteData": true, "confirmAppId": "note"}).to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{unconfirmed}");
    let (status, _) = world
        .send(
            "POST",
            "/api/apps/notes/delete",
            &[cookie, origin, json_type],
            r#"{"purge":true}"#,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, deleted) = world
        .send(
            "POST",
            "/api/apps/notes/delete",
            &[cookie, origin, json_type],
            &body,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["packageDeleted"], true);
    assert_eq!(deleted["dataDeleted"], false);
    assert!(!world.apps().join("notes").exists());
    let (_, list) = world
        .send("GET", "/api/withdrawn-apps", &[cookie], "")
        .await;
    assert_eq!(list["apps"][0]["packageDeleted"], true);
    // A deleted app's name falls back to its id.
    assert_eq!(list["apps"][0]["name"], "notes");
    let (status, _) = world
        .send("POST", "/api/apps/notes/restore", &[cookie, origin], "")
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
}
