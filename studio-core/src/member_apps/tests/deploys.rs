//! Deploying a member app: who may, what a package may hold, how the platform
//! names it, and the person's approval an RPC deploy needs.

use super::*;

#[tokio::test]
async fn a_member_deploys_an_app_only_they_manage() {
    let world = World::new();
    let mia = world.page(&world.member);
    let (status, created) = mia.create(package(true, false)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["app"]["id"].as_str().unwrap().to_owned();
    assert!(
        id.starts_with(MEMBER_ID_PREFIX) && sasha_contract::AppId::parse(&id).is_ok(),
        "{id}"
    );
    assert_eq!(created["app"]["mine"], true);
    assert_eq!(created["app"]["author"]["username"], "mia");
    let revision = created["app"]["revision"].as_str().unwrap().to_owned();
    // The platform's name for it is the one in its APP.md.
    let app_md = crate::member_apps::current_files(&world.core, &id)
        .remove("APP.md")
        .unwrap();
    assert!(
        String::from_utf8(app_md)
            .unwrap()
            .starts_with(&format!("---\nid: {id}\nname: Habits\n")),
    );

    // It is in her Apps list at once, from the same catalogue as any app,
    // and not on disk.
    assert_eq!(mia.app_ids().await, std::slice::from_ref(&id));
    assert!(!world.apps().join(&id).exists());
    // The author alone manages it: no first-discovery grant to admin or staff.
    let grants = world.store().grants(&id).unwrap();
    assert_eq!(grants.len(), 1, "{grants:?}");
    assert_eq!(
        (grants[0].user_id.as_str(), grants[0].access),
        (world.member.id.as_str(), AppAccess::Manage)
    );
    assert!(world.page(&world.admin).app_ids().await.is_empty());
    // Its revision is in the ledger as hers, and the catalogue's source tools
    // stay closed to the admin, who holds no `manage` on it.
    let revisions = world.store().revisions(&id).unwrap();
    assert_eq!(revisions[0].revision, revision);
    assert_eq!(
        revisions[0].user_id.as_deref(),
        Some(world.member.id.as_str())
    );
    let admin = World::principal(&world.admin, &crate::test_world::WRITER);
    let refused =
        crate::access::authorize_manager(&world.core, &crate::test_world::actor_of(&admin), &id)
            .await
            .unwrap_err();
    assert_eq!(refused.code.as_str(), "APP_ACCESS_DENIED");
    // Its resource is served like any app's.
    let (status, resource) = mia
        .get(&format!("/api/apps/{id}/resource?revision={revision}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{resource}");
    assert!(resource["uri"].as_str().unwrap().ends_with(&revision));

    // After a restart the app is loaded back from the core database.
    let catalogue = crate::catalogue::Catalogue::new(&world.dir.path().join("docs"), 4);
    crate::member_apps::load_into_catalogue(world.store(), &catalogue).await;
    let snapshot = catalogue.refresh();
    assert!(
        snapshot
            .valid()
            .any(|(listed, package)| *listed == id && package.resource.revision == revision)
    );
}

#[tokio::test]
async fn invalid_packages_and_shared_tables_are_refused_with_file_and_line() {
    let world = World::new();
    let mia = world.page(&world.member);
    let mut files = package(false, false);
    files["APP.md"] = json!("---\nid: habits\nname: Habits\n---\n");
    let (status, checked) = mia
        .call("POST", "/api/member-apps/check", json!({"files": files}))
        .await;
    assert_eq!(status, StatusCode::OK, "{checked}");
    assert_eq!(checked["ok"], false);
    let first = &checked["diagnostics"][0];
    assert_eq!(first["file"], "APP.md", "{checked}");
    assert!(first["line"].is_u64(), "{checked}");
    let (status, refused) = mia.create(files).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["code"], "APP_INPUT_INVALID");
    assert!(
        refused["message"].as_str().unwrap().contains("APP.md:"),
        "{refused}"
    );
    assert_eq!(refused["details"]["diagnostics"][0]["file"], "APP.md");

    let (status, refused) = mia.create(package(true, true)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(
        refused["details"]["diagnostics"][0]["code"],
        crate::member_apps::MEMBER_TABLE_SHARED
    );
    // Nothing was stored by either refusal.
    assert!(world.store().member_apps(None).unwrap().is_empty());
    assert_eq!(world.rows("app_registry"), 0);
    mia.deploy(false).await;
}

#[tokio::test]
async fn member_packages_obey_the_package_file_rules() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(false).await;
    let revision = world.revision(&id);
    let blobs = world.rows("revision_blobs");
    let with = |path: &str, content: Value| {
        let mut files = package(false, false);
        files[path] = content;
        files
    };
    let mut many = package(false, false);
    for n in 0..61 {
        many[format!("notes/n{n}.txt")] = json!("x");
    }
    let mut heavy = package(false, false);
    for n in 0..4 {
        heavy[format!("part{n}.txt")] = json!("y".repeat(600 * 1024));
    }
    // (files, the refused file as the diagnostic names it, its code)
    let cases = [
        (
            with("../../../x.js", json!("1;")),
            "../../../x.js",
            "PATH_INVALID_NAME",
        ),
        (
            with("/etc/passwd.txt", json!("x")),
            "/etc/passwd.txt",
            "PATH_INVALID_NAME",
        ),
        (
            with("a\u{202E}txt.js", json!("x")),
            "a\\u{202e}txt.js",
            "PATH_INVALID_NAME",
        ),
        (with("tool.exe", json!("MZ")), "tool.exe", "PATH_EXTENSION"),
        (
            with("a/b/c/d/e.txt", json!("x")),
            "a/b/c/d/e.txt",
            "PATH_TOO_DEEP",
        ),
        (with("App.js", json!("x")), "app.js", "PATH_INVALID_NAME"),
        (many, ".", "PACKAGE_TOO_MANY_FILES"),
        (heavy, ".", "PACKAGE_TOO_LARGE"),
        (
            with("huge.txt", json!("z".repeat(1024 * 1024 + 1))),
            "huge.txt",
            "FILE_TOO_LARGE",
        ),
        (with("zero.txt", json!("a\u{0}b")), "zero.txt", "SOURCE_NUL"),
    ];
    let named = |answer: &Value, file: &str, code: &str| {
        answer["diagnostics"]
            .as_array()
            .or_else(|| answer["details"]["diagnostics"].as_array())
            .is_some_and(|found| found.iter().any(|d| d["file"] == file && d["code"] == code))
    };
    for (files, file, code) in cases {
        let (status, checked) = mia
            .call("POST", "/api/member-apps/check", json!({"files": files}))
            .await;
        assert_eq!(status, StatusCode::OK, "{checked}");
        assert!(
            checked["ok"] == false && named(&checked, file, code),
            "{code}: {checked}"
        );
        let (status, refused) = mia.create(files.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{code}: {refused}");
        assert!(named(&refused, file, code), "{code}: {refused}");
        let (status, refused) = mia.update(&id, files.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{code}: {refused}");
        assert!(named(&refused, file, code), "{code}: {refused}");
        let (status, refused) = mia
            .call(
                "POST",
                &format!("/api/member-apps/{id}/draft"),
                json!({"files": files}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{code}: {refused}");
        assert!(named(&refused, file, code), "{code}: {refused}");
    }
    // The gateway's deployMyApp is held to the same rules.
    let mut files = member_files(&package(false, false));
    files.push(pb::MemberFile {
        path: "../escape.js".into(),
        content: b"1;".to_vec(),
        encoding: String::new(),
    });
    let refused = world
        .rpc(
            &world.member,
            pb::member_apps_request::Operation::Deploy(pb::MemberDeployRequest {
                name: "Escape".into(),
                files,
                approval: pb::DraftApproval::Elicitation as i32,
                ..pb::MemberDeployRequest::default()
            }),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code.as_str(), "APP_INPUT_INVALID", "{refused:?}");
    // Bytes that are not UTF-8 in a text file: JSON cannot carry them (and
    // base64 is only for binary assets), the gateway's bytes can.
    let (status, refused) = mia
        .create(with("latin1.txt", json!({"base64": "Zuk="})))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["details"]["cause"], "ENCODING_NOT_FOR_TEXT");
    let mut files = member_files(&package(false, false));
    files.push(pb::MemberFile {
        path: "latin1.txt".into(),
        content: vec![0x66, 0xe9],
        encoding: String::new(),
    });
    let refused = world
        .rpc(
            &world.member,
            pb::member_apps_request::Operation::Deploy(pb::MemberDeployRequest {
                name: "Latin".into(),
                files,
                approval: pb::DraftApproval::Elicitation as i32,
                ..pb::MemberDeployRequest::default()
            }),
        )
        .await
        .unwrap_err();
    let refused = serde_json::to_value(&refused).unwrap();
    assert!(
        named(&refused, "latin1.txt", "SOURCE_NOT_UTF8"),
        "{refused}"
    );
    // Nothing of any of it was stored: one app, at its first revision, no
    // draft, no new blob.
    assert_eq!(world.store().member_apps(None).unwrap().len(), 1);
    assert_eq!(world.revision(&id), revision);
    assert!(world.store().draft(&id).unwrap().is_none());
    assert_eq!(world.rows("revision_blobs"), blobs);
    // And what was deployed can be promoted: its files are ones the catalogue
    // writes to disk.
    let (status, promoted) = world
        .page(&world.admin)
        .call(
            "POST",
            &format!("/api/member-apps/{id}/promote"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{promoted}");
}

#[tokio::test]
async fn new_member_apps_are_named_by_the_platform_and_tell_of_no_other_app() {
    let world = World::new();
    // A catalogue app the member cannot see, and another member's app.
    world.install(&["hello"]).await;
    let hello = world.store().registered_app("hello").unwrap().unwrap();
    let ola = world.user("ola", UserRole::Member);
    let olas = world.page(&ola).deploy(false).await;
    let mia = world.page(&world.member);
    assert!(mia.app_ids().await.is_empty());

    // Naming an id is refused the same way whoever holds it, or nobody.
    let (mut created, mut checked, mut deployed) = (Vec::new(), Vec::new(), Vec::new());
    for id in ["hello", olas.as_str(), "no-such-app"] {
        let (status, refused) = mia
            .call(
                "POST",
                "/api/member-apps",
                json!({"id": id, "name": "Mine", "files": package(false, false)}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{id}: {refused}");
        assert_eq!(refused["details"]["field"], "id");
        created.push(json!([
            status.as_u16(),
            refused["code"],
            refused["message"]
        ]));
        let (status, refused) = mia
            .call(
                "POST",
                "/api/member-apps/check",
                json!({"id": id, "files": package(false, false)}),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{id}: {refused}");
        checked.push(json!([
            status.as_u16(),
            refused["code"],
            refused["message"]
        ]));
        let refused = world
            .rpc(
                &world.member,
                pb::member_apps_request::Operation::Deploy(pb::MemberDeployRequest {
                    app_id: id.to_owned(),
                    name: "Mine".into(),
                    files: member_files(&package(false, false)),
                    approval: pb::DraftApproval::Elicitation as i32,
                    ..pb::MemberDeployRequest::default()
                }),
            )
            .await
            .unwrap_err();
        deployed.push(json!([refused.code.as_str(), refused.message]));
    }
    alike(&created);
    alike(&checked);
    alike(&deployed);

    // A package that calls itself hello gets a name of its own; hello is
    // untouched and still not hers.
    let mut files = package(false, false);
    files["APP.md"] = json!(
        package(false, false)["APP.md"]
            .as_str()
            .unwrap()
            .replace("id: habits", "id: hello")
    );
    let (status, made) = mia.create(files).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let id = made["app"]["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with(MEMBER_ID_PREFIX), "{id}");
    assert_eq!(
        world.store().registered_app("hello").unwrap().unwrap(),
        hello
    );
    assert!(world.store().member_app("hello").unwrap().is_none());
    assert_eq!(mia.app_ids().await, std::slice::from_ref(&id));
    // Every new app has a name of its own.
    let again = mia.deploy(false).await;
    assert_ne!(again, id);
    assert_ne!(again, olas);
}

#[tokio::test]
async fn only_the_author_changes_an_app_and_nobody_learns_whether_one_exists() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(false).await;
    let revision = world.revision(&id);
    let ola = world.user("ola", UserRole::Member);
    let ola_page = world.page(&ola);
    let staff = world.page(&world.staff);
    let admin = world.page(&world.admin);

    let update =
        json!({"files": package(false, false), "expectedRevision": revision, "name": "Mine now"});
    let mut answers = Vec::new();
    for (page, target) in [
        (&ola_page, id.as_str()),
        (&staff, id.as_str()),
        (&admin, id.as_str()),
        (&ola_page, "no-such-app"),
    ] {
        let (status, refused) = page
            .call("PUT", &format!("/api/member-apps/{target}"), update.clone())
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
        assert_eq!(refused["code"], "APP_ACCESS_DENIED");
        answers.push(refused["message"].clone());
        let (status, read) = page.get(&format!("/api/member-apps/{target}")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{read}");
        assert_eq!(read["message"], refused["message"]);
    }
    // Every refusal reads the same, existing app or not.
    alike(&answers);
    // Ownership never moved: the name and the author are as deployed.
    let app = world.store().member_app(&id).unwrap().unwrap();
    assert_eq!(app.author_id.as_deref(), Some(world.member.id.as_str()));
    assert_eq!(app.name, "Habits");

    // The author updates; a stale expectedRevision is a conflict.
    let (status, updated) = mia
        .update(&id, with_script("document.title = 'Habits 2';\n"))
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_ne!(updated["app"]["revision"], revision.as_str());
    let (status, stale) = mia
        .call(
            "PUT",
            &format!("/api/member-apps/{id}"),
            json!({"files": package(false, false), "expectedRevision": revision}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{stale}");
    assert_eq!(stale["details"]["reason"], "stale-revision");

    // History and revert to the first revision.
    let (status, history) = mia.get(&format!("/api/member-apps/{id}/revisions")).await;
    assert_eq!(status, StatusCode::OK, "{history}");
    assert_eq!(history["revisions"].as_array().unwrap().len(), 2);
    let current = updated["app"]["revision"].as_str().unwrap();
    let (status, reverted) = mia
        .call(
            "POST",
            &format!("/api/member-apps/{id}/revert"),
            json!({"revision": revision, "expectedRevision": current}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reverted}");
    assert_eq!(reverted["app"]["revision"], revision.as_str());
    let (status, _) = ola_page
        .call(
            "POST",
            &format!("/api/member-apps/{id}/revert"),
            json!({"revision": current, "expectedRevision": revision}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_rpc_needs_apps_author_and_a_persons_approval_to_deploy() {
    let world = World::new();
    let rpc = |principal: pb::Principal, operation| {
        let core = world.core.clone();
        async move {
            crate::grpc::calls::member_apps(
                &core,
                pb::MemberAppsRequest {
                    principal: Some(principal),
                    operation: Some(operation),
                },
            )
            .await
        }
    };
    let files = member_files(&package(false, false));
    let deploy = |approval: pb::DraftApproval| {
        pb::member_apps_request::Operation::Deploy(pb::MemberDeployRequest {
            app_id: String::new(),
            name: "Habits".into(),
            files: files.clone(),
            expected_revision: String::new(),
            approval: approval as i32,
            from_revision: String::new(),
        })
    };
    // Without apps:author (a catalogue writer's connection), nothing.
    let writer = World::principal(&world.member, &["apps:invoke", "apps:write"]);
    let refused = rpc(writer, deploy(pb::DraftApproval::Elicitation))
        .await
        .unwrap_err();
    assert_eq!(refused.code.as_str(), "APP_ACCESS_DENIED");
    let author = World::principal(&world.member, &AUTHOR);
    // Unapproved: everything is checked, the question comes back, nothing is stored.
    let asked = rpc(author.clone(), deploy(pb::DraftApproval::Unspecified))
        .await
        .unwrap_err();
    assert_eq!(asked.code.as_str(), "APP_CONFIRMATION_REQUIRED");
    let summary = asked.details.unwrap()["summary"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(summary.contains("new member app \"Habits\""), "{summary}");
    assert!(world.store().member_apps(None).unwrap().is_empty());
    let reply = rpc(author.clone(), deploy(pb::DraftApproval::Elicitation))
        .await
        .unwrap();
    let Some(pb::member_apps_reply::Result::App(app)) = reply.result else {
        panic!("{reply:?}");
    };
    assert_eq!(app.author_name.as_deref(), Some("mia"));
    assert!(app.id.starts_with(MEMBER_ID_PREFIX), "{}", app.id);
    let listed = rpc(
        author.clone(),
        pb::member_apps_request::Operation::List(pb::MemberListRequest {}),
    )
    .await
    .unwrap();
    assert!(
        matches!(listed.result, Some(pb::member_apps_reply::Result::Apps(list)) if list.apps.len() == 1)
    );
    // A change, then revertMyApp back to the first revision, keeping its name.
    let first = app.revision.clone();
    let changed = rpc(
        author.clone(),
        pb::member_apps_request::Operation::Deploy(pb::MemberDeployRequest {
            app_id: app.id.clone(),
            name: String::new(),
            files: member_files(&with_script("document.title = 'Two';\n")),
            expected_revision: first.clone(),
            approval: pb::DraftApproval::Elicitation as i32,
            from_revision: String::new(),
        }),
    )
    .await
    .unwrap();
    let Some(pb::member_apps_reply::Result::App(changed)) = changed.result else {
        panic!("{changed:?}");
    };
    let reverted = rpc(
        author,
        pb::member_apps_request::Operation::Deploy(pb::MemberDeployRequest {
            app_id: app.id.clone(),
            name: String::new(),
            files: Vec::new(),
            expected_revision: changed.revision.clone(),
            approval: pb::DraftApproval::Elicitation as i32,
            from_revision: first.clone(),
        }),
    )
    .await
    .unwrap();
    let Some(pb::member_apps_reply::Result::App(reverted)) = reverted.result else {
        panic!("{reverted:?}");
    };
    assert_eq!(
        (reverted.revision, reverted.name),
        (first, "Habits".to_owned())
    );
}

#[tokio::test]
async fn a_draft_is_offered_to_the_editor_and_ends_with_the_next_deploy() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(false).await;
    let revision = world.revision(&id);
    let author = World::principal(&world.member, &AUTHOR);
    let files = with_script("document.title = 'Drafted';\n");
    let draft = |files: &Value| {
        pb::member_apps_request::Operation::Draft(pb::MemberDraftRequest {
            app_id: id.clone(),
            files: member_files(files),
        })
    };
    // Only the author drafts.
    let other = world.user("ola", UserRole::Member);
    let refused = world.rpc(&other, draft(&files)).await.unwrap_err();
    assert_eq!(refused.code.as_str(), "APP_ACCESS_DENIED");
    let reply = world.rpc(&world.member, draft(&files)).await.unwrap();
    let Some(pb::member_apps_reply::Result::Drafted(drafted)) = reply.result else {
        panic!("{reply:?}");
    };
    assert!(drafted.status.unwrap().ok);
    // The live app is unchanged; the editor is offered the draft, which the
    // author (a member, not a catalogue manager) may preview.
    assert_eq!(world.revision(&id), revision);
    let (status, read) = mia.get(&format!("/api/member-apps/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["draft"]["previewId"], drafted.preview_id.as_str());
    assert_eq!(
        read["draft"]["files"]["app.js"],
        "document.title = 'Drafted';\n"
    );
    assert_eq!(
        read["files"]["app.js"],
        "document.querySelector('h1').textContent = 'Habits';\n"
    );
    let (status, resource) = mia.get(&format!("/api/apps/{id}/draft/resource")).await;
    assert_eq!(status, StatusCode::OK, "{resource}");
    assert!(
        crate::previews::preview_package(
            &world.core,
            &crate::test_world::actor_of(&author),
            &id,
            &drafted.preview_id
        )
        .await
        .is_some()
    );
    let stranger = World::principal(&other, &AUTHOR);
    assert!(
        crate::previews::preview_package(
            &world.core,
            &crate::test_world::actor_of(&stranger),
            &id,
            &drafted.preview_id
        )
        .await
        .is_none()
    );
    // Deploying ends the draft.
    let (status, _) = mia.update(&id, files).await;
    assert_eq!(status, StatusCode::OK);
    let (_, read) = mia.get(&format!("/api/member-apps/{id}")).await;
    assert!(read["draft"].is_null(), "{read}");
}

/// What the person approves is what deploys: a text file sent as base64
/// (script the approval card would show as an opaque blob) is refused by the
/// source tools' one rule, from the tools and from App Studio alike, and
/// nothing is stored; a binary asset still travels as base64.
#[tokio::test]
async fn a_text_file_hidden_in_base64_is_refused() {
    use base64::Engine as _;
    use pb::member_apps_request::Operation;
    let world = World::new();
    let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let files = |script: pb::MemberFile| -> Vec<pb::MemberFile> {
        let mut files: Vec<pb::MemberFile> = package(false, false)
            .as_object()
            .unwrap()
            .iter()
            .filter(|(path, _)| *path != "app.js")
            .map(|(path, content)| pb::MemberFile {
                path: path.clone(),
                content: content.as_str().unwrap().as_bytes().to_vec(),
                encoding: String::new(),
            })
            .collect();
        files.push(script);
        files
    };
    let hidden = pb::MemberFile {
        path: "app.js".into(),
        content: encode(b"fetch('/steal');\n").into_bytes(),
        encoding: "base64".into(),
    };
    let deploy = |approval: pb::DraftApproval, files: Vec<pb::MemberFile>| {
        Operation::Deploy(pb::MemberDeployRequest {
            app_id: String::new(),
            name: "Habits".into(),
            files,
            expected_revision: String::new(),
            approval: approval as i32,
            from_revision: String::new(),
        })
    };
    for approval in [
        pb::DraftApproval::Unspecified,
        pb::DraftApproval::Elicitation,
    ] {
        let refused = world
            .rpc(&world.member, deploy(approval, files(hidden.clone())))
            .await
            .unwrap_err();
        assert_eq!(refused.code.as_str(), "APP_INPUT_INVALID", "{approval:?}");
        assert_eq!(refused.details.unwrap()["cause"], "ENCODING_NOT_FOR_TEXT");
        assert!(
            refused.message.contains("app.js is a text file"),
            "{}",
            refused.message
        );
    }
    let checked = world
        .rpc(
            &world.member,
            Operation::Check(pb::MemberCheckRequest {
                app_id: String::new(),
                files: files(hidden.clone()),
            }),
        )
        .await
        .unwrap_err();
    assert_eq!(checked.details.unwrap()["cause"], "ENCODING_NOT_FOR_TEXT");
    assert!(
        world.store().member_apps(None).unwrap().is_empty(),
        "nothing was stored"
    );
    let (status, refused) = world
        .page(&world.member)
        .call(
            "POST",
            "/api/member-apps",
            json!({"name": "Habits", "files": {
                "APP.md": package(false, false)["APP.md"],
                "index.html": package(false, false)["index.html"],
                "styles.css": "main { padding: 1rem; }\n",
                "app.js": {"base64": encode(b"fetch('/steal');\n")},
            }}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["details"]["cause"], "ENCODING_NOT_FOR_TEXT");

    // A binary asset is base64 as ever, and arrives as its bytes.
    let logo = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/packages/valid/brand-card/assets/logo.png"),
    )
    .unwrap();
    let mut with_logo = files(pb::MemberFile {
        path: "app.js".into(),
        content: b"document.title = 'Habits';\n".to_vec(),
        encoding: String::new(),
    });
    with_logo.push(pb::MemberFile {
        path: "logo.png".into(),
        content: encode(&logo).into_bytes(),
        encoding: "base64".into(),
    });
    let reply = world
        .rpc(
            &world.member,
            deploy(pb::DraftApproval::Elicitation, with_logo),
        )
        .await
        .unwrap();
    let Some(pb::member_apps_reply::Result::App(app)) = reply.result else {
        panic!("{reply:?}");
    };
    assert_eq!(
        crate::member_apps::current_files(&world.core, &app.id).get("logo.png"),
        Some(&logo)
    );
}

/// Two replicas share the core database: a member app deployed through one
/// is served by the other once it has read the audit log (every second in a
/// running replica), and deleting it through the first removes it there.
#[tokio::test]
async fn a_member_app_deployed_through_one_replica_is_served_by_the_other() {
    let world = World::new();
    let replica = world.replica();
    let from = crate::peers::head(world.store()).await.unwrap();
    let mia = world.page(&world.member);
    let (status, created) = mia.create(package(true, false)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["app"]["id"].as_str().unwrap().to_owned();
    let revision = created["app"]["revision"].as_str().unwrap().to_owned();
    assert!(!replica.catalogue.is_member(&id), "not before it follows");

    let followed = crate::peers::catch_up(&replica, from).await.unwrap();
    assert!(followed > from);
    assert!(replica.catalogue.is_member(&id));
    assert!(
        replica
            .catalogue
            .current()
            .valid()
            .any(|(listed, package)| *listed == id && package.resource.revision == revision),
        "the other replica serves the same revision"
    );
    // Nothing new: nothing changes.
    assert_eq!(
        crate::peers::catch_up(&replica, followed).await.unwrap(),
        followed
    );

    let (status, deleted) = mia
        .call("DELETE", &format!("/api/member-apps/{id}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    crate::peers::catch_up(&replica, followed).await.unwrap();
    assert!(
        !replica.catalogue.is_member(&id),
        "gone on the other replica too"
    );
    assert!(
        !replica
            .catalogue
            .current()
            .valid()
            .any(|(listed, _)| *listed == id)
    );
}
