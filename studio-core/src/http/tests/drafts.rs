//! The Draft page's routes in process, through the router, on a real core
//! database and docs tree in a temporary folder: who may, the Origin/JSON
//! rules of every change, that only a browser session's Publish is an
//! approval (an access token, which a model may hold, gets the hidden 404),
//! and the whole start → review → resource → publish walk.

use http::StatusCode;
use serde_json::json;

use crate::test_world::{STUDIO, World};
use studio_store::Scope;

const DRAFT: &str = "/api/apps/notes/draft";
const PUBLISH: &str = "/api/apps/notes/draft/publish";
const RESOURCE: &str = "/api/apps/notes/draft/resource";

#[tokio::test]
async fn the_draft_routes_start_review_preview_and_publish() {
    let world = World::new();
    let first = world.create_as_admin("notes", false).await;
    let admin = world.session(&world.admin);
    let cookie = ("cookie", admin.as_str());
    let origin = ("origin", STUDIO);
    let json_type = ("content-type", "application/json");

    let (status, none) = world.send("GET", DRAFT, &[cookie], "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(none["details"]["cause"], "DRAFT_NOT_FOUND");

    // A change without the Studio origin is refused before anything runs.
    let (status, _) = world.send("POST", DRAFT, &[cookie], "").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, started) = world.send("POST", DRAFT, &[cookie, origin], "").await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    assert_eq!(started["draft"]["baseRevision"], first.as_str());
    assert_eq!(started["draft"]["stale"], false);
    assert_eq!(started["draft"]["status"]["ok"], true);
    assert_eq!(started["draft"]["changes"], json!([]));
    let (status, again) = world.send("POST", DRAFT, &[cookie, origin], "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again["draft"]["previewId"], started["draft"]["previewId"]);

    // A change through the source tools shows in the review with its diff.
    let read = crate::grpc::calls::source_files(
        &world.core,
        Some(&World::principal(&world.admin, &crate::test_world::WRITER)),
        "readAppFile",
        "notes",
        &json!({"app": "notes", "path": "styles.css", "draft": true}).to_string(),
    )
    .await
    .unwrap();
    crate::grpc::calls::source_files(
        &world.core,
        Some(&World::principal(&world.admin, &crate::test_world::WRITER)),
        "writeAppFile",
        "notes",
        &json!({"app": "notes", "path": "styles.css", "content": "h1 { color: teal; }\n", "expectedVersion": read.version, "draft": true}).to_string(),
    )
    .await
    .unwrap();
    let (status, review) = world.send("GET", DRAFT, &[cookie], "").await;
    assert_eq!(status, StatusCode::OK);
    let change = &review["draft"]["changes"][0];
    assert_eq!(change["path"], "styles.css");
    assert!(
        change["unified"]
            .as_str()
            .unwrap()
            .contains("+h1 { color: teal; }"),
        "{change}"
    );
    assert_eq!(review["draft"]["review"]["migrations"], json!([]));
    assert_eq!(review["draft"]["review"]["needsAdmin"], false);

    let (status, resource) = world.send("GET", RESOURCE, &[cookie], "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(resource["text"].as_str().unwrap().contains("color: teal"));
    assert_eq!(resource["mimeType"], "text/html;profile=mcp-app");
    let draft_revision = review["draft"]["status"]["revision"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(resource["uri"].as_str().unwrap().ends_with(&draft_revision));

    // Publish: an access token of the same admin is no approval.
    let token = world.bearer(
        &world.admin,
        &[Scope::ChatUse, Scope::AppsInvoke, Scope::AppsWrite],
    );
    let reviewed = review["draft"]["contentHash"].as_str().unwrap().to_owned();
    let body = json!({"expectedRevision": first, "contentHash": reviewed}).to_string();
    let (status, _) = world
        .send(
            "POST",
            PUBLISH,
            &[("authorization", &token), origin, json_type],
            &body,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = world
        .send("POST", PUBLISH, &[cookie, json_type], &body)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, stale) = world
        .send(
            "POST",
            PUBLISH,
            &[cookie, origin, json_type],
            &json!({"expectedRevision": "0".repeat(64), "contentHash": reviewed}).to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        stale["details"]["diagnostics"][0]["code"],
        "DRAFT_BASE_MOVED"
    );
    let (status, unknown) = world
        .send(
            "POST",
            PUBLISH,
            &[cookie, origin, json_type],
            r#"{"expectedRevision":"","approve":true}"#,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{unknown}");
    let (status, published) = world
        .send("POST", PUBLISH, &[cookie, origin, json_type], &body)
        .await;
    assert_eq!(status, StatusCode::OK, "{published}");
    assert_eq!(published["published"]["revision"], draft_revision.as_str());
    assert_eq!(published["published"]["previousRevision"], first.as_str());
    assert_eq!(
        std::fs::read_to_string(world.apps().join("notes/styles.css")).unwrap(),
        "h1 { color: teal; }\n"
    );
    let revisions = world.store().revisions("notes").unwrap();
    assert_eq!(revisions[0].surface, studio_store::RevisionSurface::Studio);

    // The draft is gone.
    let (status, _) = world.send("DELETE", DRAFT, &[cookie, origin], "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = world.send("GET", RESOURCE, &[cookie], "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_draft_routes_refuse_who_does_not_manage_the_app() {
    let world = World::new();
    world.create_as_admin("notes", false).await;
    let member = world.session(&world.member);
    let admin = world.session(&world.admin);
    let origin = ("origin", STUDIO);
    let json_type = ("content-type", "application/json");
    let body = json!({"expectedRevision": "", "contentHash": "0".repeat(64)}).to_string();
    for (method, uri, body) in [
        ("GET", DRAFT, ""),
        ("POST", DRAFT, ""),
        ("DELETE", DRAFT, ""),
        ("GET", RESOURCE, ""),
        ("POST", PUBLISH, body.as_str()),
    ] {
        let (status, answer) = world
            .send(method, uri, &[("cookie", &member), origin, json_type], body)
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {uri}: {answer}");
        assert_eq!(answer["code"], "APP_ACCESS_DENIED", "{method} {uri}");
        let (status, _) = world.send(method, uri, &[origin, json_type], body).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {uri} anonymous");
    }
    // An unknown app is the same refusal as one not managed.
    let (status, _) = world
        .send(
            "POST",
            "/api/apps/nope/draft",
            &[("cookie", &admin), origin],
            "",
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Discarding works for a manager, once.
    let (status, _) = world
        .send("POST", DRAFT, &[("cookie", &admin), origin], "")
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, discarded) = world
        .send("DELETE", DRAFT, &[("cookie", &admin), origin], "")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(discarded["discarded"], true);
}

/// The Draft page's Publish carries the content hash of the draft it showed:
/// a change another session makes to the draft after that review is refused
/// (409, `DRAFT_CHANGED`), nothing is published, and the draft as it is now
/// is what the page reviews and publishes next.
#[tokio::test]
async fn publish_refuses_a_draft_changed_since_the_page_reviewed_it() {
    let world = World::new();
    let first = world.create_as_admin("notes", false).await;
    let page = world.page(&world.admin);
    let (status, _) = page.call("POST", DRAFT, serde_json::Value::Null).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, review) = page.get(DRAFT).await;
    assert_eq!(status, StatusCode::OK);
    let reviewed = review["draft"]["contentHash"].as_str().unwrap().to_owned();
    assert!(sasha_contract::data::is_sha256_hex(&reviewed), "{review}");

    // Another session (the staff member's assistant) edits the draft.
    let writer = World::principal(&world.staff, &crate::test_world::WRITER);
    let script = crate::grpc::calls::source_files(
        &world.core,
        Some(&writer),
        "readAppFile",
        "notes",
        &json!({"app": "notes", "path": "app.js", "draft": true}).to_string(),
    )
    .await
    .unwrap();
    crate::grpc::calls::source_files(
        &world.core,
        Some(&writer),
        "writeAppFile",
        "notes",
        &json!({"app": "notes", "path": "app.js", "content": "fetch(\"/everyone\");\n", "expectedVersion": script.version, "draft": true}).to_string(),
    )
    .await
    .unwrap();

    let (status, refused) = page
        .call(
            "POST",
            PUBLISH,
            json!({"expectedRevision": first, "contentHash": reviewed}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["code"], "APP_CONFLICT");
    assert_eq!(refused["details"]["cause"], "DRAFT_CHANGED");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("the draft changed since you reviewed it"),
        "{refused}"
    );
    assert!(
        !std::fs::read_to_string(world.apps().join("notes/app.js"))
            .unwrap()
            .contains("/everyone"),
        "nothing unreviewed went live"
    );
    assert_eq!(
        world
            .store()
            .registered_app("notes")
            .unwrap()
            .unwrap()
            .current_revision,
        first
    );

    // Without the hash there is nothing to publish against.
    let (status, missing) = page
        .call("POST", PUBLISH, json!({"expectedRevision": first}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{missing}");

    // The page reviews again and publishes what it now shows.
    let (_, again) = page.get(DRAFT).await;
    let now = again["draft"]["contentHash"].as_str().unwrap();
    assert_ne!(now, reviewed);
    assert_eq!(refused["details"]["contentHash"], now);
    let (status, published) = page
        .call(
            "POST",
            PUBLISH,
            json!({"expectedRevision": first, "contentHash": now}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{published}");
    assert!(
        std::fs::read_to_string(world.apps().join("notes/app.js"))
            .unwrap()
            .contains("/everyone")
    );
}
