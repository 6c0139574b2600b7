//! Member apps through Studio's router and `CoreService.MemberApps`, in
//! process: deploys, the refusal matrix (non-author, unknown, stale, invalid,
//! shared tables, caps, the switch), sharing by name, moderation and
//! promotion, and concurrent deploys that must not race past a cap.

use http::StatusCode;
use sasha_proto::pb;
use serde_json::{Value, json};

use crate::store::{AppAccess, User, UserRole};
use crate::test_world::{PASSWORD, Page, World};

/// The scopes of a member's browser session.
const AUTHOR: [&str; 3] = ["chat:use", "apps:invoke", "apps:author"];

/// A minimal valid member app; with `table`, one owner-scoped (or, with
/// `shared`, shared) table.
pub(crate) fn package(id: &str, table: bool, shared: bool) -> Value {
    let mut manifest = format!(
        "---\nid: {id}\nname: Habits\ndescription: Habits kept each day\nversion: 0.1.0\ntheme: none\n"
    );
    if table {
        manifest.push_str("capabilities:\n  data: read-write\ntables:\n  habits:\n");
        manifest.push_str(if shared {
            "    access: shared\n"
        } else {
            "    access: owner\n    ownerField: created_by\n"
        });
    }
    manifest.push_str("---\n# Habits\n\nEach person's habits.\n");
    let mut files = json!({
        "APP.md": manifest,
        "index.html": "<!doctype html>\n<html lang=\"en\">\n<head>\n  <meta charset=\"utf-8\">\n  <title>Habits</title>\n  <link rel=\"stylesheet\" href=\"styles.css\">\n</head>\n<body>\n  <main><h1>Habits</h1></main>\n  <script src=\"app.js\"></script>\n</body>\n</html>\n",
        "styles.css": "main { padding: 1rem; }\n",
        "app.js": "document.querySelector('h1').textContent = 'Habits';\n",
    });
    if table {
        let schema = "CREATE TABLE habits (\n  id INTEGER PRIMARY KEY,\n  title TEXT NOT NULL,\n  created_by TEXT NOT NULL\n);\n";
        files["schema.sql"] = json!(schema);
        files["migrations/001-initial.sql"] = json!(schema);
    }
    files
}

impl World {
    fn user(&self, name: &str, role: UserRole) -> User {
        self.store().create_user(name, role, PASSWORD).unwrap()
    }
}

impl Page<'_> {
    async fn deploy(&self, id: &str, table: bool) -> (StatusCode, Value) {
        self.call(
            "POST",
            "/api/member-apps",
            json!({"id": id, "name": "Habits", "files": package(id, table, false)}),
        )
        .await
    }

    async fn app_ids(&self) -> Vec<String> {
        let (status, apps) = self.get("/api/apps").await;
        assert_eq!(status, StatusCode::OK, "{apps}");
        apps["apps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|app| app["id"].as_str().unwrap().to_owned())
            .collect()
    }
}

#[tokio::test]
async fn a_member_deploys_an_app_only_they_manage() {
    let world = World::new();
    let mia = world.page(&world.member);
    let (status, created) = mia.deploy("habits", true).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["app"]["id"], "habits");
    assert_eq!(created["app"]["mine"], true);
    assert_eq!(created["app"]["author"]["username"], "mia");
    let revision = created["app"]["revision"].as_str().unwrap().to_owned();

    // It is in her Apps list at once, from the same catalogue as any app,
    // and not on disk.
    assert_eq!(mia.app_ids().await, ["habits"]);
    assert!(!world.apps().join("habits").exists());
    // The author alone manages it: no first-discovery grant to admin or staff.
    let grants = world.store().grants("habits").unwrap();
    assert_eq!(grants.len(), 1, "{grants:?}");
    assert_eq!(
        (grants[0].user_id.as_str(), grants[0].access),
        (world.member.id.as_str(), AppAccess::Manage)
    );
    assert!(world.page(&world.admin).app_ids().await.is_empty());
    // Its revision is in the ledger as hers, and the catalogue's source tools
    // stay closed to the admin, who holds no `manage` on it.
    let revisions = world.store().revisions("habits").unwrap();
    assert_eq!(revisions[0].revision, revision);
    assert_eq!(
        revisions[0].user_id.as_deref(),
        Some(world.member.id.as_str())
    );
    let admin = World::principal(&world.admin, &crate::test_world::WRITER);
    let refused = crate::source_tools::authorize_manager(&world.core, &admin, "habits")
        .await
        .unwrap_err();
    assert_eq!(refused.code.as_str(), "APP_ACCESS_DENIED");
    // Its resource is served like any app's.
    let (status, resource) = mia
        .get(&format!("/api/apps/habits/resource?revision={revision}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{resource}");
    assert!(resource["uri"].as_str().unwrap().ends_with(&revision));

    // After a restart the app is loaded back from the core database.
    let catalogue = crate::catalogue::Catalogue::new(&world.dir.path().join("docs"), 4);
    super::load_into_catalogue(world.store(), &catalogue);
    let snapshot = catalogue.refresh();
    assert!(
        snapshot
            .valid()
            .any(|(id, package)| id == "habits" && package.resource.revision == revision)
    );
}

#[tokio::test]
async fn invalid_packages_and_shared_tables_are_refused_with_file_and_line() {
    let world = World::new();
    let mia = world.page(&world.member);
    let mut files = package("habits", false, false);
    files["APP.md"] = json!("---\nid: habits\nname: Habits\n---\n");
    let (status, checked) = mia
        .call(
            "POST",
            "/api/member-apps/check",
            json!({"id": "habits", "files": files}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{checked}");
    assert_eq!(checked["ok"], false);
    let first = &checked["diagnostics"][0];
    assert_eq!(first["file"], "APP.md", "{checked}");
    assert!(first["line"].is_u64(), "{checked}");
    let (status, refused) = mia
        .call(
            "POST",
            "/api/member-apps",
            json!({"id": "habits", "name": "Habits", "files": files}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["code"], "APP_INPUT_INVALID");
    assert!(
        refused["message"].as_str().unwrap().contains("APP.md:"),
        "{refused}"
    );
    assert_eq!(refused["details"]["diagnostics"][0]["file"], "APP.md");

    let shared = package("habits", true, true);
    let (status, refused) = mia
        .call(
            "POST",
            "/api/member-apps",
            json!({"id": "habits", "name": "Habits", "files": shared}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(
        refused["details"]["diagnostics"][0]["code"],
        super::MEMBER_TABLE_SHARED
    );
    // Nothing was stored by either refusal, and the id is still free.
    assert!(world.store().member_apps(None).unwrap().is_empty());
    assert!(world.store().registered_app("habits").unwrap().is_none());
    let (status, created) = mia.deploy("habits", false).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
}

#[tokio::test]
async fn only_the_author_changes_an_app_and_nobody_learns_whether_one_exists() {
    let world = World::new();
    let mia = world.page(&world.member);
    let (_, created) = mia.deploy("habits", false).await;
    let revision = created["app"]["revision"].as_str().unwrap().to_owned();
    let ola = world.user("ola", UserRole::Member);
    let ola_page = world.page(&ola);
    let staff = world.page(&world.staff);
    let admin = world.page(&world.admin);

    let update = |id: &str| json!({"files": package(id, false, false), "expectedRevision": revision, "name": "Mine now"});
    let mut answers = Vec::new();
    for (page, id) in [
        (&ola_page, "habits"),
        (&staff, "habits"),
        (&admin, "habits"),
        (&ola_page, "no-such-app"),
    ] {
        let (status, refused) = page
            .call("PUT", &format!("/api/member-apps/{id}"), update(id))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
        assert_eq!(refused["code"], "APP_ACCESS_DENIED");
        answers.push(refused["message"].clone());
        let (status, read) = page.get(&format!("/api/member-apps/{id}")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{read}");
        assert_eq!(read["message"], refused["message"]);
    }
    // Every refusal reads the same, existing app or not.
    assert!(
        answers.windows(2).all(|pair| pair[0] == pair[1]),
        "{answers:?}"
    );
    // Ownership never moved: the name and the author are as deployed.
    let app = world.store().member_app("habits").unwrap().unwrap();
    assert_eq!(app.author_id.as_deref(), Some(world.member.id.as_str()));
    assert_eq!(app.name, "Habits");

    // The author updates; a stale expectedRevision is a conflict.
    let mut files = package("habits", false, false);
    files["app.js"] = json!("document.title = 'Habits 2';\n");
    let (status, updated) = mia
        .call(
            "PUT",
            "/api/member-apps/habits",
            json!({"files": files, "expectedRevision": revision}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_ne!(updated["app"]["revision"], revision.as_str());
    let (status, stale) = mia
        .call(
            "PUT",
            "/api/member-apps/habits",
            json!({"files": package("habits", false, false), "expectedRevision": revision}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{stale}");
    assert_eq!(stale["details"]["reason"], "stale-revision");

    // A new deploy may not take an existing id, any tier's.
    let (status, taken) = ola_page.deploy("habits", false).await;
    assert_eq!(status, StatusCode::CONFLICT, "{taken}");
    assert_eq!(taken["details"]["reason"], "id-taken");

    // History and revert to the first revision.
    let (status, history) = mia.get("/api/member-apps/habits/revisions").await;
    assert_eq!(status, StatusCode::OK, "{history}");
    assert_eq!(history["revisions"].as_array().unwrap().len(), 2);
    let current = updated["app"]["revision"].as_str().unwrap();
    let (status, reverted) = mia
        .call(
            "POST",
            "/api/member-apps/habits/revert",
            json!({"revision": revision, "expectedRevision": current}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reverted}");
    assert_eq!(reverted["app"]["revision"], revision.as_str());
    let (status, _) = ola_page
        .call(
            "POST",
            "/api/member-apps/habits/revert",
            json!({"revision": current, "expectedRevision": revision}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn sharing_is_by_user_name_and_gives_use_never_manage() {
    let world = World::new();
    let mia = world.page(&world.member);
    mia.deploy("habits", true).await;
    let ola = world.user("ola", UserRole::Member);
    let (status, shared) = mia
        .call(
            "POST",
            "/api/member-apps/habits/shares",
            json!({"username": "ola"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{shared}");
    assert_eq!(shared["app"]["shares"], json!(["ola"]));
    assert_eq!(world.page(&ola).app_ids().await, ["habits"]);
    assert_eq!(
        world.store().access("habits", &ola.id).unwrap(),
        Some(AppAccess::Use)
    );
    let (status, unknown) = mia
        .call(
            "POST",
            "/api/member-apps/habits/shares",
            json!({"username": "nobody"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{unknown}");
    assert_eq!(unknown["details"]["field"], "username");
    // Only the author shares.
    let (status, _) = world
        .page(&ola)
        .call(
            "POST",
            "/api/member-apps/habits/shares",
            json!({"username": "sam"}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Nobody else gains manage, by any path (the access panel's grant
    // included), and the author's own grant cannot change.
    for (user, access) in [
        (&ola.id, Some(AppAccess::Manage)),
        (&world.admin.id, Some(AppAccess::Manage)),
        (&world.member.id, Some(AppAccess::Use)),
        (&world.member.id, None),
    ] {
        let outcome = match access {
            Some(access) => world
                .store()
                .grant("habits", user, access, Some(&world.admin.id)),
            None => world
                .store()
                .revoke("habits", user, Some(&world.admin.id))
                .map(|_| ()),
        };
        assert!(
            matches!(outcome, Err(crate::store::StoreError::MemberAppGrant(_))),
            "{user} {access:?}: {outcome:?}"
        );
    }
    let (status, unshared) = mia
        .call("DELETE", "/api/member-apps/habits/shares/ola", Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{unshared}");
    assert!(world.page(&ola).app_ids().await.is_empty());
}

#[tokio::test]
async fn concurrent_deploys_never_pass_the_per_author_cap() {
    let world = World::new();
    let mia = world.page(&world.member);
    let attempts = super::MAX_MEMBER_APPS_PER_AUTHOR + 5;
    let deploys = (0..attempts).map(|n| {
        let id = format!("habits-{n}");
        let mia = &mia;
        async move { mia.deploy(&id, false).await }
    });
    let answers = futures::future::join_all(deploys).await;
    let created = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::CREATED)
        .count();
    assert_eq!(created, super::MAX_MEMBER_APPS_PER_AUTHOR);
    for (status, refused) in answers
        .iter()
        .filter(|(status, _)| *status != StatusCode::CREATED)
    {
        assert_eq!(*status, StatusCode::PAYLOAD_TOO_LARGE, "{refused}");
        assert_eq!(refused["code"], "APP_RESOURCE_LIMIT");
        assert_eq!(refused["details"]["cap"], "per-author");
        assert!(
            refused["message"].as_str().unwrap().contains("40"),
            "{refused}"
        );
    }
    assert_eq!(
        world
            .store()
            .member_apps(Some(&world.member.id))
            .unwrap()
            .len(),
        super::MAX_MEMBER_APPS_PER_AUTHOR
    );
    // Deleting one frees a place.
    let first = answers
        .iter()
        .find(|(status, _)| *status == StatusCode::CREATED)
        .map(|(_, created)| created["app"]["id"].as_str().unwrap().to_owned())
        .unwrap();
    let (status, _) = mia
        .call("DELETE", &format!("/api/member-apps/{first}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, again) = mia.deploy("habits-again", false).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
}

#[tokio::test]
async fn the_instance_cap_holds_across_concurrent_authors() {
    // The store's one transaction, raced by threads: several authors deploy
    // at once against small caps.
    let world = World::new();
    let store = world.store().clone();
    let authors: Vec<User> = (0..4)
        .map(|n| world.user(&format!("author{n}"), UserRole::Member))
        .collect();
    let caps = crate::store::MemberCaps {
        instance: 5,
        per_author: 3,
    };
    let threads: Vec<_> = authors
        .iter()
        .flat_map(|author| (0..3).map(move |n| (author.id.clone(), n)))
        .map(|(author, n)| {
            let store = store.clone();
            std::thread::spawn(move || {
                let id = format!("app-{}-{n}", &author[author.len() - 6..]);
                let resource = crate::store::test_resource(&id, "<p>hi</p>");
                let deploy = crate::store::MemberDeploy {
                    name: "App",
                    author_id: &author,
                    expected_revision: None,
                    content: crate::store::RevisionContent {
                        resource: &resource,
                        files: vec![("APP.md", b"---\n".as_slice())],
                    },
                    origin: crate::store::RevisionOrigin::authored(
                        crate::store::RevisionSurface::Studio,
                        &author,
                        "deploy",
                        0,
                    ),
                    schema_hash: None,
                    actions_json: "[]",
                    read_policy_json: "{}",
                    caps,
                    retention: 8,
                };
                store.deploy_member_app(&id, &deploy).unwrap()
            })
        })
        .collect();
    let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 5);
    for refusal in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert!(
            matches!(
                refusal,
                crate::store::MemberRefusal::InstanceCap(5)
                    | crate::store::MemberRefusal::AuthorCap(3)
            ),
            "{refusal:?}"
        );
    }
    let apps = store.member_apps(None).unwrap();
    assert_eq!(apps.len(), 5);
    for author in &authors {
        assert!(
            apps.iter()
                .filter(|a| a.author_id.as_deref() == Some(author.id.as_str()))
                .count()
                <= 3
        );
    }
}

#[tokio::test]
async fn the_switch_stops_building_but_not_running_or_deleting() {
    let world = World::new();
    let mia = world.page(&world.member);
    mia.deploy("habits", false).await;
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

    let (status, refused) = mia.deploy("habits-two", false).await;
    assert_eq!(status, StatusCode::NOT_IMPLEMENTED, "{refused}");
    assert_eq!(refused["code"], "APP_OPERATION_UNAVAILABLE");
    assert_eq!(refused["details"]["reason"], "member-apps-off");
    let revision = world
        .store()
        .member_app("habits")
        .unwrap()
        .unwrap()
        .revision;
    let (status, edit) = mia
        .call(
            "PUT",
            "/api/member-apps/habits",
            json!({"files": package("habits", false, false), "expectedRevision": revision}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_IMPLEMENTED, "{edit}");
    let (status, check) = mia
        .call(
            "POST",
            "/api/member-apps/check",
            json!({"id": "habits", "files": package("habits", false, false)}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_IMPLEMENTED, "{check}");
    let (status, _) = world.send("GET", "/api/member-app-guide", &[], "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, listed) = mia.get("/api/member-apps").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["enabled"], false);
    // The deployed app keeps running, and deleting stays open.
    assert_eq!(mia.app_ids().await, ["habits"]);
    let (status, _) = mia
        .get(&format!("/api/apps/habits/resource?revision={revision}"))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, deleted) = mia
        .call("DELETE", "/api/member-apps/habits", Value::Null)
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
    mia.deploy("habits", false).await;
    mia.deploy("journal", false).await;
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
        .call("POST", "/api/member-apps/habits/disable", Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{disabled}");
    assert_eq!(disabled["app"]["status"], "disabled");
    assert_eq!(mia.app_ids().await, ["journal"]);
    // Its author cannot deploy around the moderator.
    let revision = world
        .store()
        .member_app("habits")
        .unwrap()
        .unwrap()
        .revision;
    let (status, refused) = mia
        .call(
            "PUT",
            "/api/member-apps/habits",
            json!({"files": package("habits", false, false), "expectedRevision": revision}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_IMPLEMENTED, "{refused}");
    assert_eq!(refused["details"]["reason"], "disabled");
    // A disabled member app is not a withdrawn catalogue app: the admins'
    // Withdrawn apps page and the lifecycle tools leave it to moderation.
    assert!(world.store().withdrawn_apps().unwrap().is_empty());
    let lifecycle = crate::lifecycle::rpc(
        &world.core,
        pb::AppLifecycleRequest {
            principal: Some(World::principal(&world.admin, &crate::test_world::WRITER)),
            app_id: "habits".into(),
            operation: pb::AppLifecycleOperation::Delete as i32,
            delete_data: false,
            confirm_app_id: String::new(),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(lifecycle.code.as_str(), "APP_OPERATION_UNAVAILABLE");
    let (status, _) = mia
        .call("POST", "/api/member-apps/habits/enable", Value::Null)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = staff
        .call("POST", "/api/member-apps/habits/enable", Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(mia.app_ids().await, ["habits", "journal"]);

    // Staff delete one (moderation without reading it)…
    let (status, _) = staff.get("/api/member-apps/journal").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = staff
        .call("DELETE", "/api/member-apps/journal", Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(mia.app_ids().await, ["habits"]);

    // …and only an admin promotes: the package lands under DOCS_ROOT/apps and
    // follows the catalogue's rules from then on.
    let (status, _) = staff
        .call("POST", "/api/member-apps/habits/promote", Value::Null)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let admin = world.page(&world.admin);
    let (status, promoted) = admin
        .call("POST", "/api/member-apps/habits/promote", Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{promoted}");
    assert!(world.apps().join("habits/APP.md").is_file());
    assert!(world.store().member_app("habits").unwrap().is_none());
    assert_eq!(
        world.store().access("habits", &world.admin.id).unwrap(),
        Some(AppAccess::Manage)
    );
    assert_eq!(admin.app_ids().await, ["habits"]);
    assert_eq!(mia.app_ids().await, ["habits"]);
}

#[tokio::test]
async fn the_rpc_needs_apps_author_and_a_persons_approval_to_deploy() {
    let world = World::new();
    let rpc = |principal: pb::Principal, operation| {
        let core = world.core.clone();
        async move {
            super::rpc(
                &core,
                pb::MemberAppsRequest {
                    principal: Some(principal),
                    operation: Some(operation),
                },
            )
            .await
        }
    };
    let files: Vec<pb::MemberFile> = package("habits", false, false)
        .as_object()
        .unwrap()
        .iter()
        .map(|(path, content)| pb::MemberFile {
            path: path.clone(),
            content: content.as_str().unwrap().as_bytes().to_vec(),
            encoding: String::new(),
        })
        .collect();
    let deploy = |approval: pb::DraftApproval| {
        pb::member_apps_request::Operation::Deploy(pb::MemberDeployRequest {
            app_id: "habits".into(),
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
    assert!(
        summary.contains("Habits") && summary.contains("habits"),
        "{summary}"
    );
    assert!(world.store().member_app("habits").unwrap().is_none());
    let reply = rpc(author.clone(), deploy(pb::DraftApproval::Elicitation))
        .await
        .unwrap();
    let Some(pb::member_apps_reply::Result::App(app)) = reply.result else {
        panic!("{reply:?}");
    };
    assert_eq!(app.author_name.as_deref(), Some("mia"));
    let listed = rpc(
        author,
        pb::member_apps_request::Operation::List(pb::MemberListRequest {}),
    )
    .await
    .unwrap();
    assert!(
        matches!(listed.result, Some(pb::member_apps_reply::Result::Apps(list)) if list.apps.len() == 1)
    );
}

#[tokio::test]
async fn a_draft_is_offered_to_the_editor_and_ends_with_the_next_deploy() {
    let world = World::new();
    let mia = world.page(&world.member);
    let (_, created) = mia.deploy("habits", false).await;
    let revision = created["app"]["revision"].as_str().unwrap().to_owned();
    let author = World::principal(&world.member, &AUTHOR);
    let mut files = package("habits", false, false);
    files["app.js"] = json!("document.title = 'Drafted';\n");
    let draft = |files: &Value| {
        pb::member_apps_request::Operation::Draft(pb::MemberDraftRequest {
            app_id: "habits".into(),
            files: files
                .as_object()
                .unwrap()
                .iter()
                .map(|(path, content)| pb::MemberFile {
                    path: path.clone(),
                    content: content.as_str().unwrap().as_bytes().to_vec(),
                    encoding: String::new(),
                })
                .collect(),
        })
    };
    // Only the author drafts.
    let other = world.user("ola", UserRole::Member);
    let refused = super::rpc(
        &world.core,
        pb::MemberAppsRequest {
            principal: Some(World::principal(&other, &AUTHOR)),
            operation: Some(draft(&files)),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code.as_str(), "APP_ACCESS_DENIED");
    let reply = super::rpc(
        &world.core,
        pb::MemberAppsRequest {
            principal: Some(author.clone()),
            operation: Some(draft(&files)),
        },
    )
    .await
    .unwrap();
    let Some(pb::member_apps_reply::Result::Drafted(drafted)) = reply.result else {
        panic!("{reply:?}");
    };
    assert!(drafted.status.unwrap().ok);
    // The live app is unchanged; the editor is offered the draft, which the
    // author (a member, not a catalogue manager) may preview.
    assert_eq!(
        world
            .store()
            .member_app("habits")
            .unwrap()
            .unwrap()
            .revision,
        revision
    );
    let (status, read) = mia.get("/api/member-apps/habits").await;
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
    let (status, resource) = mia.get("/api/apps/habits/draft/resource").await;
    assert_eq!(status, StatusCode::OK, "{resource}");
    assert!(
        crate::drafts::preview_package(&world.core, &author, "habits", &drafted.preview_id)
            .await
            .is_some()
    );
    let stranger = World::principal(&other, &AUTHOR);
    assert!(
        crate::drafts::preview_package(&world.core, &stranger, "habits", &drafted.preview_id)
            .await
            .is_none()
    );
    // Deploying ends the draft.
    let (status, _) = mia
        .call(
            "PUT",
            "/api/member-apps/habits",
            json!({"files": files, "expectedRevision": revision}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, read) = mia.get("/api/member-apps/habits").await;
    assert!(read["draft"].is_null(), "{read}");
}

/// `CoreService.MemberApps` as the gateway calls it for a model-driven
/// client.
async fn member_rpc(
    world: &World,
    user: &User,
    operation: pb::member_apps_request::Operation,
) -> Result<pb::MemberAppsReply, sasha_proto::AppError> {
    super::rpc(
        &world.core,
        pb::MemberAppsRequest {
            principal: Some(World::principal(user, &AUTHOR)),
            operation: Some(operation),
        },
    )
    .await
}

/// Sharing and deleting take someone else's data or reach: from a
/// model-driven client (the member app tools through the gateway) each needs
/// the person's yes, like a deploy. Unapproved, nothing changes and the
/// question comes back (naming the sharees whose rows a delete takes, and
/// saying nothing of whether a user name exists); App Studio's click is the
/// approval.
#[tokio::test]
async fn sharing_and_deleting_from_a_model_need_the_persons_yes() {
    use pb::member_apps_request::Operation;
    let world = World::new();
    let mia = world.page(&world.member);
    let (status, _) = mia.deploy("habits", false).await;
    assert_eq!(status, StatusCode::CREATED);
    world.user("ola", UserRole::Member);
    let share = |username: &str, approval: pb::DraftApproval| {
        Operation::Share(pb::MemberShareRequest {
            app_id: "habits".into(),
            username: username.into(),
            remove: false,
            approval: approval as i32,
        })
    };
    let delete = |approval: pb::DraftApproval| {
        Operation::Delete(pb::MemberDeleteRequest {
            app_id: "habits".into(),
            approval: approval as i32,
        })
    };

    let asked = member_rpc(
        &world,
        &world.member,
        share("ola", pb::DraftApproval::Unspecified),
    )
    .await
    .unwrap_err();
    assert_eq!(asked.code.as_str(), "APP_CONFIRMATION_REQUIRED");
    let question = asked.details.unwrap()["summary"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        question.contains("Habits") && question.contains("\"ola\""),
        "{question}"
    );
    assert!(
        world
            .store()
            .member_app("habits")
            .unwrap()
            .unwrap()
            .shares
            .is_empty()
    );
    // A name nobody has is asked about the same way: the question is no
    // oracle of who exists.
    let unknown = member_rpc(
        &world,
        &world.member,
        share("nobody", pb::DraftApproval::Unspecified),
    )
    .await
    .unwrap_err();
    assert_eq!(unknown.code.as_str(), "APP_CONFIRMATION_REQUIRED");
    // Someone else's app is the one refusal, approved or not.
    for approval in [
        pb::DraftApproval::Unspecified,
        pb::DraftApproval::Elicitation,
    ] {
        let refused = member_rpc(&world, &world.staff, share("ola", approval))
            .await
            .unwrap_err();
        assert_eq!(refused.code.as_str(), "APP_ACCESS_DENIED");
    }
    member_rpc(
        &world,
        &world.member,
        share("ola", pb::DraftApproval::Elicitation),
    )
    .await
    .unwrap();
    assert_eq!(
        world.store().member_app("habits").unwrap().unwrap().shares,
        ["ola"]
    );

    let asked = member_rpc(
        &world,
        &world.member,
        delete(pb::DraftApproval::Unspecified),
    )
    .await
    .unwrap_err();
    assert_eq!(asked.code.as_str(), "APP_CONFIRMATION_REQUIRED");
    let question = asked.details.unwrap()["summary"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        question.contains("Delete") && question.contains("ola"),
        "{question}"
    );
    assert!(
        world.store().member_app("habits").unwrap().is_some(),
        "nothing was deleted"
    );
    member_rpc(
        &world,
        &world.member,
        delete(pb::DraftApproval::Elicitation),
    )
    .await
    .unwrap();
    assert!(world.store().member_app("habits").unwrap().is_none());

    // App Studio's buttons are the person's own click.
    let (status, _) = mia.deploy("journal", false).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, shared) = mia
        .call(
            "POST",
            "/api/member-apps/journal/shares",
            json!({"username": "ola"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{shared}");
    let (status, deleted) = mia
        .call("DELETE", "/api/member-apps/journal", Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
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
        let mut files: Vec<pb::MemberFile> = package("habits", false, false)
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
            app_id: "habits".into(),
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
        let refused = member_rpc(
            &world,
            &world.member,
            deploy(approval, files(hidden.clone())),
        )
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
    let checked = member_rpc(
        &world,
        &world.member,
        Operation::Check(pb::MemberCheckRequest {
            app_id: "habits".into(),
            files: files(hidden.clone()),
        }),
    )
    .await
    .unwrap_err();
    assert_eq!(checked.details.unwrap()["cause"], "ENCODING_NOT_FOR_TEXT");
    assert!(
        world.store().member_app("habits").unwrap().is_none(),
        "nothing was stored"
    );
    let (status, refused) = world
        .page(&world.member)
        .call(
            "POST",
            "/api/member-apps",
            json!({"id": "habits", "name": "Habits", "files": {
                "APP.md": package("habits", false, false)["APP.md"],
                "index.html": package("habits", false, false)["index.html"],
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
    member_rpc(
        &world,
        &world.member,
        deploy(pb::DraftApproval::Elicitation, with_logo),
    )
    .await
    .unwrap();
    assert_eq!(
        super::current_files(&world.core, "habits").get("logo.png"),
        Some(&logo)
    );
}
