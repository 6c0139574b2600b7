//! A member app's life: the switch, moderation and promotion, a disabled app,
//! and what a delete reclaims.

use super::*;

#[tokio::test]
async fn the_switch_stops_building_but_not_running_or_deleting() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(false).await;
    let (status, guide) = world.send("GET", "/api/member-app-guide", &[], "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(guide.is_null(), "the guide is Markdown, not JSON");
    // Only an admin turns it off.
    for page in [&mia, &world.page(&world.staff)] {
        let (status, refused) = page
            .call(
                "PUT",
                "/api/settings/member-apps",
                json!({"enabled": false}),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    }
    let admin = world.page(&world.admin);
    let (status, off) = admin
        .call(
            "PUT",
            "/api/settings/member-apps",
            json!({"enabled": false}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{off}");
    assert_eq!(off["memberAppsEnabled"], false);

    let (status, refused) = mia.create(package(false, false)).await;
    assert_eq!(status, StatusCode::NOT_IMPLEMENTED, "{refused}");
    assert_eq!(refused["code"], "APP_OPERATION_UNAVAILABLE");
    assert_eq!(refused["details"]["reason"], "member-apps-off");
    let revision = world.revision(&id);
    let (status, edit) = mia.update(&id, package(false, false)).await;
    assert_eq!(status, StatusCode::NOT_IMPLEMENTED, "{edit}");
    let (status, check) = mia
        .call(
            "POST",
            "/api/member-apps/check",
            json!({"id": id, "files": package(false, false)}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_IMPLEMENTED, "{check}");
    let (status, _) = world.send("GET", "/api/member-app-guide", &[], "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, listed) = mia.get("/api/member-apps").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["enabled"], false);
    // The deployed app keeps running, and deleting stays open.
    assert_eq!(mia.app_ids().await, std::slice::from_ref(&id));
    let (status, _) = mia
        .get(&format!("/api/apps/{id}/resource?revision={revision}"))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, deleted) = mia
        .call("DELETE", &format!("/api/member-apps/{id}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert!(mia.app_ids().await.is_empty());
    // The audit names who switched it.
    let entries = world.store().audit_entries(None).unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e.action == "setting.changed" && e.actor == world.admin.id)
    );
}

#[tokio::test]
async fn moderators_disable_and_delete_and_an_admin_promotes() {
    let world = World::new();
    let mia = world.page(&world.member);
    let habits = mia.deploy(false).await;
    let journal = mia.deploy(false).await;
    let mut both = vec![habits.clone(), journal.clone()];
    both.sort();
    let (status, refused) = mia.get("/api/member-apps?all=true").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    let staff = world.page(&world.staff);
    let (status, all) = staff.get("/api/member-apps?all=true").await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(all["canModerate"], true);
    let listed = all["apps"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["author"]["username"], "mia");
    assert!(listed[0]["size"].as_i64().unwrap() > 0);

    // Disable: gone from the author's Apps at once; enable brings it back.
    let (status, disabled) = staff
        .call(
            "POST",
            &format!("/api/member-apps/{habits}/disable"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{disabled}");
    assert_eq!(disabled["app"]["status"], "disabled");
    assert_eq!(mia.app_ids().await, std::slice::from_ref(&journal));
    // Its author cannot deploy around the moderator.
    let (status, refused) = mia.update(&habits, package(false, false)).await;
    assert_eq!(status, StatusCode::NOT_IMPLEMENTED, "{refused}");
    assert_eq!(refused["details"]["reason"], "disabled");
    // A disabled member app is not a withdrawn catalogue app: the admins'
    // Withdrawn apps page and the lifecycle tools leave it to moderation.
    assert!(world.store().withdrawn_apps().unwrap().is_empty());
    let lifecycle = crate::grpc::calls::lifecycle(
        &world.core,
        pb::AppLifecycleRequest {
            principal: Some(World::principal(&world.admin, &crate::test_world::WRITER)),
            app_id: habits.clone(),
            operation: pb::AppLifecycleOperation::Delete as i32,
            delete_data: false,
            confirm_app_id: String::new(),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(lifecycle.code.as_str(), "APP_OPERATION_UNAVAILABLE");
    let (status, _) = mia
        .call(
            "POST",
            &format!("/api/member-apps/{habits}/enable"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = staff
        .call(
            "POST",
            &format!("/api/member-apps/{habits}/enable"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(mia.app_ids().await, both);

    // Staff delete one (moderation without reading it)…
    let (status, _) = staff.get(&format!("/api/member-apps/{journal}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = staff
        .call(
            "DELETE",
            &format!("/api/member-apps/{journal}"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(mia.app_ids().await, std::slice::from_ref(&habits));

    // …and only an admin promotes: the package lands under DOCS_ROOT/apps and
    // follows the catalogue's rules from then on.
    let (status, _) = staff
        .call(
            "POST",
            &format!("/api/member-apps/{habits}/promote"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let admin = world.page(&world.admin);
    let (status, promoted) = admin
        .call(
            "POST",
            &format!("/api/member-apps/{habits}/promote"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{promoted}");
    assert!(world.apps().join(&habits).join("APP.md").is_file());
    assert!(world.store().member_app(&habits).unwrap().is_none());
    assert_eq!(
        world.store().access(&habits, &world.admin.id).unwrap(),
        Some(AppAccess::Manage)
    );
    assert_eq!(admin.app_ids().await, std::slice::from_ref(&habits));
    assert_eq!(mia.app_ids().await, [habits]);
}

#[tokio::test]
async fn a_disabled_app_is_not_drafted_previewed_or_shared() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(false).await;
    let draft = |files: &Value| {
        pb::member_apps_request::Operation::Draft(pb::MemberDraftRequest {
            app_id: id.clone(),
            files: member_files(files),
        })
    };
    // Before: drafted and previewed.
    let drafted = world
        .rpc(
            &world.member,
            draft(&with_script("document.title = 'Draft';\n")),
        )
        .await
        .unwrap();
    let Some(pb::member_apps_reply::Result::Drafted(drafted)) = drafted.result else {
        panic!("{drafted:?}");
    };
    let (status, _) = mia.get(&format!("/api/apps/{id}/draft/resource")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, disabled) = world
        .page(&world.staff)
        .call(
            "POST",
            &format!("/api/member-apps/{id}/disable"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{disabled}");

    // After: every way of changing, previewing or sharing it says why.
    let refusals = [
        mia.call(
            "POST",
            &format!("/api/member-apps/{id}/draft"),
            json!({"files": with_script("document.title = 'Again';\n")}),
        )
        .await,
        mia.get(&format!("/api/apps/{id}/draft/resource")).await,
        mia.call(
            "POST",
            &format!("/api/member-apps/{id}/shares"),
            json!({"username": "sam"}),
        )
        .await,
        mia.update(&id, package(false, false)).await,
    ];
    for (status, refused) in &refusals {
        assert_eq!(*status, StatusCode::NOT_IMPLEMENTED, "{refused}");
        assert_eq!(refused["code"], "APP_OPERATION_UNAVAILABLE");
        assert_eq!(refused["details"]["reason"], "disabled");
        assert!(
            refused["message"]
                .as_str()
                .unwrap()
                .contains("a moderator disabled"),
            "{refused}"
        );
    }
    let refused = world
        .rpc(&world.member, draft(&package(false, false)))
        .await
        .unwrap_err();
    assert_eq!(refused.details.unwrap()["reason"], "disabled");
    let refused = world
        .rpc(
            &world.member,
            pb::member_apps_request::Operation::Share(pb::MemberShareRequest {
                app_id: id.clone(),
                username: "sam".into(),
                remove: false,
                approval: pb::DraftApproval::Unspecified as i32,
            }),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.details.unwrap()["reason"], "disabled");
    // The preview's catalogue and data route answer nothing.
    let author = World::principal(&world.member, &AUTHOR);
    assert!(
        crate::previews::preview_package(
            &world.core,
            &crate::test_world::actor_of(&author),
            &id,
            &drafted.preview_id
        )
        .await
        .is_none()
    );
    // Nothing changed, and nobody was given it; taking a share away stays open.
    assert_eq!(world.store().access(&id, &world.staff.id).unwrap(), None);
    assert_eq!(
        world.store().draft(&id).unwrap().unwrap().preview_id,
        drafted.preview_id
    );
    let (status, _) = mia
        .call(
            "DELETE",
            &format!("/api/member-apps/{id}/shares/sam"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
}

/// The bytes the core database's pages hold, free pages left out.
fn used_bytes(world: &World) -> i64 {
    let connection = rusqlite::Connection::open(world.dir.path().join("core.sqlite")).unwrap();
    let pages: i64 = connection
        .query_row("PRAGMA page_count", [], |row| row.get(0))
        .unwrap();
    let free: i64 = connection
        .query_row("PRAGMA freelist_count", [], |row| row.get(0))
        .unwrap();
    let size: i64 = connection
        .query_row("PRAGMA page_size", [], |row| row.get(0))
        .unwrap();
    (pages - free) * size
}

#[tokio::test]
async fn deploying_and_deleting_in_a_loop_leaves_the_core_database_as_it_was() {
    let world = World::new();
    let mia = world.page(&world.member);
    // Nearly a full package: a script of 900 KB.
    let heavy = with_script(&format!(
        "/* {} */\ndocument.title = 'Heavy';\n",
        "x".repeat(900 * 1024)
    ));
    let id = mia.deploy(false).await;
    let (status, deleted) = mia
        .call("DELETE", &format!("/api/member-apps/{id}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    let baseline = used_bytes(&world);
    let rows = [
        "app_revisions",
        "revision_blobs",
        "revision_resources",
        "app_drafts",
    ]
    .map(|table| world.rows(table));
    for round in 0..4 {
        let (status, created) = mia.create(heavy.clone()).await;
        assert_eq!(status, StatusCode::CREATED, "{round}: {created}");
        let id = created["app"]["id"].as_str().unwrap().to_owned();
        // A draft of it too, which goes with it.
        let (status, drafted) = mia
            .call(
                "POST",
                &format!("/api/member-apps/{id}/draft"),
                json!({"files": with_script(&format!("/* {round} {} */", "y".repeat(500 * 1024)))}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{drafted}");
        let (status, deleted) = mia
            .call("DELETE", &format!("/api/member-apps/{id}"), Value::Null)
            .await;
        assert_eq!(status, StatusCode::OK, "{deleted}");
        assert!(world.store().revisions(&id).unwrap().is_empty());
    }
    // Each round stored some 2.3 MB and took all of it back: what stays is
    // the rows that keep each id taken and the audit, a few KB a round.
    assert_eq!(
        [
            "app_revisions",
            "revision_blobs",
            "revision_resources",
            "app_drafts"
        ]
        .map(|table| world.rows(table)),
        rows
    );
    let grown = used_bytes(&world) - baseline;
    assert!(
        grown < 256 * 1024,
        "the core database grew by {grown} bytes"
    );
    assert_eq!(
        world.store().member_ledger_bytes(&world.member.id).unwrap(),
        0
    );
}
