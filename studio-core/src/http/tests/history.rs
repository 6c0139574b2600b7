//! The History panel's routes in process, through the router, on a real
//! core database and docs tree in a temporary folder: who may (the RPC's
//! answers), the Origin/JSON rules of the revert, and list, diff and revert
//! with a stale `expectedRevision` refused.

use http::StatusCode;
use serde_json::{Value, json};

use crate::test_world::{STUDIO, WRITER, World};

/// writeAppFile as the staff user through the source tools; the new revision.
async fn write(world: &World, id: &str, path: &str, content: &str) -> String {
    let expected = world
        .core
        .source
        .read(id, path)
        .ok()
        .map(|file| file.version);
    let mut arguments = json!({"app": id, "path": path, "content": content});
    if let Some(expected) = expected {
        arguments["expectedVersion"] = expected.into();
    }
    let reply = crate::grpc::calls::source_files(
        &world.core,
        Some(&World::principal(&world.staff, &WRITER)),
        "writeAppFile",
        id,
        &arguments.to_string(),
    )
    .await
    .unwrap();
    let status = reply.status.unwrap();
    assert!(status.ok, "{status:?}");
    status.revision.unwrap()
}

#[tokio::test]
async fn history_routes_list_diff_and_revert_for_managers_only() {
    let world = World::new();
    let first = world.create_as_admin("notes", false).await;
    let second = write(&world, "notes", "notes.txt", "one\ntwo\n").await;
    assert_ne!(first, second);
    let admin = world.session(&world.admin);
    let member = world.session(&world.member);
    let list = "/api/apps/notes/revisions";
    let diff = format!("/api/apps/notes/revisions/{first}/diff?from={second}");
    let file = format!("/api/apps/notes/revisions/{second}/file?path=notes.txt");
    let revert = "/api/apps/notes/revert";
    let json_type = ("content-type", "application/json");
    let origin = ("origin", STUDIO);
    let body = json!({"revision": first, "expectedRevision": second}).to_string();

    // Anonymous: 401 everywhere.
    for (method, uri) in [
        ("GET", list),
        ("GET", diff.as_str()),
        ("GET", file.as_str()),
        ("POST", revert),
    ] {
        let (status, answer) = world.send(method, uri, &[json_type, origin], &body).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {uri}");
        assert_eq!(answer["code"], "APP_UNAUTHENTICATED");
    }
    // A member: the RPC's APP_ACCESS_DENIED, on a real app and an unknown one alike.
    for (method, uri) in [
        ("GET", list),
        ("GET", diff.as_str()),
        ("GET", file.as_str()),
        ("POST", revert),
        ("GET", "/api/apps/nope/revisions"),
    ] {
        let (status, answer) = world
            .send(
                method,
                uri,
                &[json_type, origin, ("cookie", &member)],
                &body,
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {uri}");
        assert_eq!(answer["code"], "APP_ACCESS_DENIED", "{method} {uri}");
    }
    // A garbage session is the hidden 404.
    let (status, _) = world
        .send("GET", list, &[("cookie", "sasha_session=x")], "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The revert's same-origin JSON rules, before anything else.
    for (case, headers, expected) in [
        (
            "another origin",
            vec![
                json_type,
                ("origin", "http://evil.example"),
                ("cookie", &admin),
            ],
            StatusCode::FORBIDDEN,
        ),
        (
            "the cookie without Origin or Sec-Fetch-Site",
            vec![json_type, ("cookie", &admin)],
            StatusCode::FORBIDDEN,
        ),
        (
            "not JSON",
            vec![("content-type", "text/plain"), origin, ("cookie", &admin)],
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
    ] {
        let (status, _) = world.send("POST", revert, &headers, &body).await;
        assert_eq!(status, expected, "{case}");
    }
    let (status, answer) = world
        .send(
            "POST",
            revert,
            &[json_type, origin, ("cookie", &admin)],
            r#"{"revision":"x","expectedRevision":"y","extra":1}"#,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(answer["code"], "APP_INPUT_INVALID");
    // Nothing was reverted by any refusal.
    assert_eq!(
        world
            .store()
            .registered_app("notes")
            .unwrap()
            .unwrap()
            .current_revision,
        second
    );

    // The list: newest first, the current one marked, as listAppRevisions answers.
    let (status, listed) = world.send("GET", list, &[("cookie", &admin)], "").await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["app"], "notes");
    let revisions = listed["revisions"].as_array().unwrap();
    assert_eq!(revisions.len(), 2, "{listed}");
    assert_eq!(revisions[0]["revision"], second);
    assert_eq!(revisions[0]["current"], true);
    assert_eq!(revisions[0]["user"], "sam");
    assert_eq!(revisions[0]["surface"], "mcp");
    assert_eq!(revisions[1]["revision"], first);
    assert_eq!(revisions[1]["current"], false);
    assert_eq!(revisions[1]["user"], "ada");
    for field in ["uri", "recordedAt", "summary", "files", "bytes"] {
        assert!(!revisions[0][field].is_null(), "{field}: {listed}");
    }
    // No revert yet.
    assert_eq!(listed["reverts"], json!([]), "{listed}");

    // One file as it was at a revision; a file it did not have; no path.
    let (status, read) = world.send("GET", &file, &[("cookie", &admin)], "").await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["content"], "one\ntwo\n");
    assert_eq!(read["revision"], second);
    let (status, _) = world
        .send(
            "GET",
            &format!("/api/apps/notes/revisions/{first}/file?path=notes.txt"),
            &[("cookie", &admin)],
            "",
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = world
        .send(
            "GET",
            &format!("/api/apps/notes/revisions/{second}/file"),
            &[("cookie", &admin)],
            "",
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // The diff from the current revision to the first: the file is removed.
    let (status, diffed) = world.send("GET", &diff, &[("cookie", &admin)], "").await;
    assert_eq!(status, StatusCode::OK, "{diffed}");
    assert_eq!(diffed["from"], second);
    assert_eq!(diffed["to"], first);
    assert_eq!(diffed["truncated"], false);
    let files = diffed["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{diffed}");
    assert_eq!(files[0]["path"], "notes.txt");
    assert_eq!(files[0]["change"], "removed");
    assert!(files[0]["fromVersion"].is_string());
    assert!(files[0]["toVersion"].is_null());
    // And the other way, with the unified diff of a changed file.
    let third = write(&world, "notes", "notes.txt", "one\nthree\n").await;
    let (status, changed) = world
        .send(
            "GET",
            &format!("/api/apps/notes/revisions/{third}/diff?from={second}"),
            &[("cookie", &admin)],
            "",
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["files"][0]["change"], "changed");
    let unified = changed["files"][0]["diff"].as_str().unwrap();
    assert!(unified.contains("-two\n+three"), "{unified}");
    // A bad or missing `from` is the history's own refusal.
    for uri in [
        format!("/api/apps/notes/revisions/{third}/diff"),
        format!("/api/apps/notes/revisions/{third}/diff?from=HEAD"),
    ] {
        let (status, answer) = world.send("GET", &uri, &[("cookie", &admin)], "").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
        assert_eq!(answer["code"], "APP_INPUT_INVALID");
    }

    // A stale expectedRevision: 409, nothing changes.
    let (status, stale) = world
        .send(
            "POST",
            revert,
            &[json_type, origin, ("cookie", &admin)],
            &body,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{stale}");
    assert_eq!(stale["code"], "APP_CONFLICT");
    assert_eq!(stale["details"]["reason"], "stale-revision");
    assert_eq!(stale["details"]["currentRevision"], third);
    assert!(world.apps().join("notes/notes.txt").exists());

    // The revert: the first revision's files again (its ledger row keeps its
    // first author; the revert itself is in the audit log).
    let body = json!({"revision": first, "expectedRevision": third}).to_string();
    let (status, reverted) = world
        .send(
            "POST",
            revert,
            &[json_type, origin, ("cookie", &admin)],
            &body,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reverted}");
    assert_eq!(reverted["app"], "notes");
    assert_eq!(reverted["revision"], first);
    assert_eq!(reverted["previousRevision"], third);
    assert_eq!(reverted["status"]["ok"], true);
    assert_eq!(reverted["status"]["revision"], first);
    assert!(!world.apps().join("notes/notes.txt").exists());
    let (_, listed) = world.send("GET", list, &[("cookie", &admin)], "").await;
    let current: Vec<&Value> = listed["revisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|revision| revision["current"] == true)
        .collect();
    assert_eq!(current.len(), 1, "{listed}");
    assert_eq!(current[0]["revision"], first);
    assert_eq!(current[0]["user"], "ada");
    // The revert adds no revision (the first one is current again, its row
    // unchanged), so the list names the revert itself: who, from and to.
    assert_eq!(listed["revisions"].as_array().unwrap().len(), 3, "{listed}");
    let reverts = listed["reverts"].as_array().unwrap();
    assert_eq!(reverts.len(), 1, "{listed}");
    assert_eq!(reverts[0]["from"], third);
    assert_eq!(reverts[0]["to"], first);
    assert_eq!(reverts[0]["user"], "ada");
    assert!(reverts[0]["at"].as_i64().unwrap() > 0, "{listed}");
}
