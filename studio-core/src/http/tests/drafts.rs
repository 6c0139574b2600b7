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

/// The Draft page's editor: the draft's files read back with their versions,
/// one file written or deleted by the source tools' own rules, the draft's
/// status (with each diagnostic's file and line) after every change; a
/// member, an anonymous caller and another origin are refused, as is a path
/// or a deletion the rules refuse and a write over a file without its
/// version.
#[tokio::test]
async fn the_draft_editor_reads_and_writes_files_by_the_source_rules() {
    const FILES: &str = "/api/apps/notes/draft/files";
    let world = World::new();
    world.create_as_admin("notes", false).await;
    let admin = world.session(&world.admin);
    let member = world.session(&world.member);
    let cookie = ("cookie", admin.as_str());
    let origin = ("origin", STUDIO);
    let json_type = ("content-type", "application/json");
    let write = |path: &str, content: &str| json!({"path": path, "content": content}).to_string();

    for (method, body) in [
        ("GET", String::new()),
        ("PUT", write("notes.md", "# Notes\n")),
        ("DELETE", json!({"path": "styles.css"}).to_string()),
    ] {
        let (status, answer) = world
            .send(
                method,
                FILES,
                &[("cookie", &member), origin, json_type],
                &body,
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method}: {answer}");
        assert_eq!(answer["code"], "APP_ACCESS_DENIED", "{method}");
        let (status, _) = world.send(method, FILES, &[origin, json_type], &body).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} anonymous");
    }
    let (status, none) = world.send("GET", FILES, &[cookie], "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "no draft yet: {none}");
    let (status, _) = world
        .send("PUT", FILES, &[cookie, json_type], &write("notes.md", "x"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "not from the Studio origin");

    let (status, _) = world.send("POST", DRAFT, &[cookie, origin], "").await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, listed) = world.send("GET", FILES, &[cookie], "").await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let files = listed["files"].as_array().unwrap();
    let script = files
        .iter()
        .find(|file| file["path"] == "app.js")
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(script["content"].as_str().unwrap().contains("Sasha"));
    assert_eq!(script["version"].as_str().unwrap().len(), 64);

    // A new file, then a broken app.js: the status names the file and line.
    let (status, added) = world
        .send(
            "PUT",
            FILES,
            &[cookie, origin, json_type],
            &write("notes.md", "# Notes\n"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{added}");
    assert_eq!(added["status"]["ok"], true, "{added}");
    let (status, refused) = world
        .send(
            "PUT",
            FILES,
            &[cookie, origin, json_type],
            &write("app.js", "x = 1;\n"),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "an existing file needs its version: {refused}"
    );
    let broken = json!({
        "path": "app.js",
        "content": "\"use strict\";\nimport x from \"y\";\n",
        "expectedVersion": script["version"],
    });
    let (status, written) = world
        .send(
            "PUT",
            FILES,
            &[cookie, origin, json_type],
            &broken.to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{written}");
    assert_eq!(written["status"]["ok"], false, "{written}");
    let diagnostic = &written["status"]["diagnostics"][0];
    assert_eq!(diagnostic["file"], "app.js", "{written}");
    assert_eq!(diagnostic["line"], 2, "{written}");
    let (_, listed) = world.send("GET", FILES, &[cookie], "").await;
    assert!(
        listed["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|file| file["path"] == "notes.md" && file["content"] == "# Notes\n"),
        "{listed}"
    );

    // What the rules refuse, the editor's routes refuse too.
    for (method, body) in [
        ("PUT", write("../escape.js", "x")),
        ("DELETE", json!({"path": "APP.md"}).to_string()),
        (
            "PUT",
            json!({"path": "a.js", "content": "x", "draft": false}).to_string(),
        ),
    ] {
        let (status, answer) = world
            .send(method, FILES, &[cookie, origin, json_type], &body)
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {body}: {answer}");
    }
    let (status, deleted) = world
        .send(
            "DELETE",
            FILES,
            &[cookie, origin, json_type],
            &json!({"path": "notes.md", "expectedVersion": added["version"]}).to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    // Live is untouched: the live app never had notes.md or the import.
    assert!(!world.dir.path().join("docs/apps/notes/notes.md").exists());
}
