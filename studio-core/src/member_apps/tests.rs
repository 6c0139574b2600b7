//! Member apps through Studio's router and `CoreService.MemberApps`, in
//! process: deploys (the platform names every app), the refusal matrix
//! (non-author, unknown, stale, invalid, the package file rules, shared
//! tables, the caps, an author's bytes, the deploy throttle, the switch, a
//! disabled app), sharing by name (answered alike for every name), the grant
//! rule against admin and staff, moderation and promotion, what a delete
//! reclaims, and concurrent deploys that must not race past a cap.

use http::StatusCode;
use sasha_package::manifest::MEMBER_ID_PREFIX;
use sasha_proto::pb;
use serde_json::{Value, json};

use crate::test_world::{PASSWORD, Page, STUDIO, World};
use studio_store::{AppAccess, MemberCaps, User, UserRole};

/// The scopes of a member's browser session.
const AUTHOR: [&str; 3] = ["chat:use", "apps:invoke", "apps:author"];

/// A minimal valid member app; with `table`, one owner-scoped (or, with
/// `shared`, shared) table. Its `APP.md` says `id: habits`, which the
/// platform replaces with the app's own id.
pub(crate) fn package(table: bool, shared: bool) -> Value {
    let mut manifest = "---\nid: habits\nname: Habits\ndescription: Habits kept each day\nversion: 0.1.0\ntheme: none\n".to_owned();
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

/// [`package`] whose `app.js` is `script`.
fn with_script(script: &str) -> Value {
    let mut files = package(false, false);
    files["app.js"] = json!(script);
    files
}

/// `files` as `CoreService.MemberApps` takes them.
fn member_files(files: &Value) -> Vec<pb::MemberFile> {
    files
        .as_object()
        .unwrap()
        .iter()
        .map(|(path, content)| pb::MemberFile {
            path: path.clone(),
            content: content.as_str().unwrap().as_bytes().to_vec(),
            encoding: String::new(),
        })
        .collect()
}

impl World {
    fn user(&self, name: &str, role: UserRole) -> User {
        self.store().create_user(name, role, PASSWORD).unwrap()
    }

    /// The live member app `id`'s current revision.
    fn revision(&self, id: &str) -> String {
        self.store().member_app(id).unwrap().unwrap().revision
    }

    /// `CoreService.MemberApps` for `user` (a member app author's scopes).
    async fn rpc(
        &self,
        user: &User,
        operation: pb::member_apps_request::Operation,
    ) -> Result<pb::MemberAppsReply, sasha_proto::AppError> {
        crate::grpc::calls::member_apps(
            &self.core,
            pb::MemberAppsRequest {
                principal: Some(World::principal(user, &AUTHOR)),
                operation: Some(operation),
            },
        )
        .await
    }

    /// Rows of `table` in the core database.
    fn rows(&self, table: &str) -> i64 {
        let connection = rusqlite::Connection::open(self.dir.path().join("core.sqlite")).unwrap();
        connection
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
                row.get(0)
            })
            .unwrap()
    }
}

impl Page<'_> {
    /// Deploys a new app of `files` (named "Habits").
    async fn create(&self, files: Value) -> (StatusCode, Value) {
        self.call(
            "POST",
            "/api/member-apps",
            json!({"name": "Habits", "files": files}),
        )
        .await
    }

    /// Deploys the minimal app (with a table when `table`): its id.
    async fn deploy(&self, table: bool) -> String {
        let (status, created) = self.create(package(table, false)).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        created["app"]["id"].as_str().unwrap().to_owned()
    }

    /// Deploys `files` over the app `id` at its current revision.
    async fn update(&self, id: &str, files: Value) -> (StatusCode, Value) {
        let revision = self.world.revision(id);
        self.call(
            "PUT",
            &format!("/api/member-apps/{id}"),
            json!({"files": files, "expectedRevision": revision}),
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

/// The messages of `answers`, which must all be the same.
fn alike(answers: &[Value]) {
    assert!(
        answers.windows(2).all(|pair| pair[0] == pair[1]),
        "{answers:#?}"
    );
}

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
    let app_md = super::current_files(&world.core, &id)
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
    super::load_into_catalogue(world.store(), &catalogue);
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
        super::MEMBER_TABLE_SHARED
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

/// User names ignore case, so a share does too, without telling which
/// names exist: "OLA" (an account's name in another case) and "NOBODY" (no
/// account) are each kept and listed once, folded alike, so the list never
/// shows an account's own spelling beside the typed one; sharing "ola" after
/// "OLA" adds no second entry, and stopping "Ola" ends the one share and its
/// grant.
#[tokio::test]
async fn a_share_in_another_case_is_one_share_and_shows_no_account() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(true).await;
    let ola = world.user("ola", UserRole::Member);
    let shares = |typed: &'static str, remove: bool| {
        let (mia, id) = (&mia, id.clone());
        async move {
            let (status, answer) = if remove {
                let uri = format!("/api/member-apps/{id}/shares/{typed}");
                mia.call("DELETE", &uri, Value::Null).await
            } else {
                let uri = format!("/api/member-apps/{id}/shares");
                mia.call("POST", &uri, json!({"username": typed})).await
            };
            assert_eq!(status, StatusCode::OK, "{typed}: {answer}");
            answer["app"]["shares"].clone()
        }
    };
    assert_eq!(shares("OLA", false).await, json!(["ola"]));
    assert_eq!(shares("NOBODY", false).await, json!(["nobody", "ola"]));
    assert_eq!(world.page(&ola).app_ids().await, std::slice::from_ref(&id));
    assert_eq!(
        shares("ola", false).await,
        json!(["nobody", "ola"]),
        "one share per name"
    );
    let (_, listed) = mia.get("/api/member-apps").await;
    assert_eq!(listed["apps"][0]["shares"], json!(["nobody", "ola"]));
    assert_eq!(shares("Ola", true).await, json!(["nobody"]));
    assert!(world.page(&ola).app_ids().await.is_empty());
}

#[tokio::test]
async fn sharing_is_by_user_name_and_gives_use_never_manage() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(true).await;
    let ola = world.user("ola", UserRole::Member);
    let (status, shared) = mia
        .call(
            "POST",
            &format!("/api/member-apps/{id}/shares"),
            json!({"username": "ola"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{shared}");
    assert_eq!(shared["app"]["shares"], json!(["ola"]));
    assert_eq!(world.page(&ola).app_ids().await, std::slice::from_ref(&id));
    assert_eq!(
        world.store().access(&id, &ola.id).unwrap(),
        Some(AppAccess::Use)
    );
    // Only the author shares.
    let (status, _) = world
        .page(&ola)
        .call(
            "POST",
            &format!("/api/member-apps/{id}/shares"),
            json!({"username": "sam"}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Nobody else gains manage, by any path, and the author's own grant
    // cannot change.
    for (user, access) in [
        (&ola.id, Some(AppAccess::Manage)),
        (&world.admin.id, Some(AppAccess::Manage)),
        (&world.member.id, Some(AppAccess::Use)),
        (&world.member.id, None),
    ] {
        let outcome = match access {
            Some(access) => world
                .store()
                .grant(&id, user, access, Some(&world.admin.id)),
            None => world
                .store()
                .revoke(&id, user, Some(&world.admin.id))
                .map(|_| ()),
        };
        assert!(
            matches!(outcome, Err(studio_store::StoreError::MemberAppGrant(_))),
            "{user} {access:?}: {outcome:?}"
        );
    }
    let (status, unshared) = mia
        .call(
            "DELETE",
            &format!("/api/member-apps/{id}/shares/ola"),
            Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{unshared}");
    assert!(world.page(&ola).app_ids().await.is_empty());
}

#[tokio::test]
async fn a_share_answers_alike_whether_or_not_an_account_holds_the_name() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(true).await;
    let ola = world.user("ola", UserRole::Member);
    let dan = world.user("dan", UserRole::Member);
    world
        .store()
        .set_disabled("dan", true, &world.admin.id)
        .unwrap();
    let share = |name: &'static str, remove: bool| {
        let (mia, id) = (&mia, id.clone());
        async move {
            let (status, answer) = if remove {
                mia.call(
                    "DELETE",
                    &format!("/api/member-apps/{id}/shares/{name}"),
                    Value::Null,
                )
                .await
            } else {
                mia.call(
                    "POST",
                    &format!("/api/member-apps/{id}/shares"),
                    json!({"username": name}),
                )
                .await
            };
            assert_eq!(status, StatusCode::OK, "{name}: {answer}");
            let said = answer["shared"].as_str().unwrap().replace(name, "NAME");
            (said, answer["app"]["shares"].clone())
        }
    };
    // An account, no account, a disabled account: the same answer, and the
    // name among the shares each time.
    let mut said = Vec::new();
    for name in ["ola", "nobody", "dan"] {
        let (text, shares) = share(name, false).await;
        assert!(
            shares.as_array().unwrap().contains(&json!(name)),
            "{shares}"
        );
        said.push(json!(text));
    }
    alike(&said);
    let (_, listed) = mia.get("/api/member-apps").await;
    assert_eq!(listed["apps"][0]["shares"], json!(["dan", "nobody", "ola"]));
    let listed = world
        .rpc(
            &world.member,
            pb::member_apps_request::Operation::List(pb::MemberListRequest {}),
        )
        .await
        .unwrap();
    let Some(pb::member_apps_reply::Result::Apps(list)) = listed.result else {
        panic!("{listed:?}");
    };
    assert_eq!(list.apps[0].shares, ["dan", "nobody", "ola"]);
    // Only a name with an account became a grant.
    assert_eq!(world.page(&ola).app_ids().await, std::slice::from_ref(&id));
    let mut granted: Vec<String> = world
        .store()
        .grants(&id)
        .unwrap()
        .into_iter()
        .map(|grant| grant.user_id)
        .collect();
    granted.sort();
    let mut expected = vec![world.member.id.clone(), ola.id.clone(), dan.id.clone()];
    expected.sort();
    assert_eq!(granted, expected);

    // Stopping answers alike too, for a name shared or never shared.
    let mut said = Vec::new();
    for name in ["ola", "nobody", "zed"] {
        said.push(json!(share(name, true).await.0));
    }
    alike(&said);
    assert!(world.page(&ola).app_ids().await.is_empty());
    let (_, listed) = mia.get("/api/member-apps").await;
    assert_eq!(listed["apps"][0]["shares"], json!(["dan"]));

    // Only the spelling is judged, and one's own name.
    for (name, field) in [("Not a name!", "username"), ("mia", "username")] {
        let (status, refused) = mia
            .call(
                "POST",
                &format!("/api/member-apps/{id}/shares"),
                json!({"username": name}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
        assert_eq!(refused["details"]["field"], field);
    }
    // An app is shared with at most MAX_MEMBER_APP_SHARES names.
    for n in 1..super::MAX_MEMBER_APP_SHARES {
        world
            .store()
            .share_member_app(
                &id,
                &world.member.id,
                &format!("name{n}"),
                false,
                super::MAX_MEMBER_APP_SHARES,
            )
            .unwrap()
            .unwrap();
    }
    let (status, refused) = mia
        .call(
            "POST",
            &format!("/api/member-apps/{id}/shares"),
            json!({"username": "one-too-many"}),
        )
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{refused}");
    assert_eq!(refused["details"]["cap"], "shares");
}

#[tokio::test]
async fn admins_and_staff_never_change_who_uses_a_member_app() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(true).await;
    let ola = world.user("ola", UserRole::Member);
    let eve = world.user("eve", UserRole::Member);
    mia.call(
        "POST",
        &format!("/api/member-apps/{id}/shares"),
        json!({"username": "ola"}),
    )
    .await;
    let audit = world.store().audit_entries(None).unwrap().len();
    // The access panel's grant and revoke: every change is a refusal saying
    // why, never an internal error, and nothing changes.
    for (page, method, user, body) in [
        (
            world.page(&world.staff),
            "PUT",
            &eve.id,
            json!({"access": "use"}),
        ),
        (
            world.page(&world.admin),
            "PUT",
            &eve.id,
            json!({"access": "use"}),
        ),
        (
            world.page(&world.admin),
            "PUT",
            &ola.id,
            json!({"access": "manage"}),
        ),
        (
            world.page(&world.staff),
            "PUT",
            &world.member.id,
            json!({"access": "use"}),
        ),
        (
            world.page(&world.admin),
            "DELETE",
            &world.member.id,
            Value::Null,
        ),
        (world.page(&world.staff), "DELETE", &ola.id, Value::Null),
    ] {
        let (status, refused) = page
            .call(
                method,
                &format!("/api/apps/{id}/access/{user}"),
                body.clone(),
            )
            .await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{method} {user} {body}: {refused}"
        );
        assert_eq!(refused["code"], "APP_ACCESS_DENIED");
    }
    assert_eq!(world.store().access(&id, &eve.id).unwrap(), None);
    assert_eq!(world.page(&eve).app_ids().await, Vec::<String>::new());
    let (status, _) = world
        .page(&eve)
        .get(&format!(
            "/api/apps/{id}/resource?revision={}",
            world.revision(&id)
        ))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "eve cannot read its source");
    assert_eq!(
        world.store().access(&id, &ola.id).unwrap(),
        Some(AppAccess::Use)
    );
    assert_eq!(
        world.store().access(&id, &world.member.id).unwrap(),
        Some(AppAccess::Manage)
    );
    assert_eq!(world.store().audit_entries(None).unwrap().len(), audit);
    // The operator's CLI still may.
    world
        .store()
        .grant(
            &id,
            &eve.id,
            AppAccess::Use,
            Some(studio_store::ACTOR_OPERATOR),
        )
        .unwrap();
    assert_eq!(
        world.store().access(&id, &eve.id).unwrap(),
        Some(AppAccess::Use)
    );
}

#[tokio::test]
async fn concurrent_deploys_never_pass_the_per_author_cap() {
    let world = World::new();
    let mia = world.page(&world.member);
    let attempts = super::MAX_MEMBER_APPS_PER_AUTHOR + 5;
    let deploys = (0..attempts).map(|_| {
        let mia = &mia;
        async move { mia.create(package(false, false)).await }
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
    mia.deploy(false).await;
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
    let caps = studio_store::MemberCaps {
        instance: 5,
        per_author: 3,
        author_bytes: u64::MAX,
    };
    let threads: Vec<_> = authors
        .iter()
        .flat_map(|author| (0..3).map(move |n| (author.id.clone(), n)))
        .map(|(author, n)| {
            let store = store.clone();
            std::thread::spawn(move || {
                let id = format!("app-{}-{n}", &author[author.len() - 6..]);
                let resource = ledger_resource(&id, "<p>hi</p>");
                let deploy = studio_store::MemberDeploy {
                    name: "App",
                    author_id: &author,
                    expected_revision: None,
                    content: studio_store::RevisionContent {
                        resource: &resource,
                        files: vec![("APP.md", b"---\n".as_slice())],
                    },
                    origin: studio_store::RevisionOrigin::authored(
                        studio_store::RevisionSurface::Studio,
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
                studio_store::MemberRefusal::InstanceCap(5)
                    | studio_store::MemberRefusal::AuthorCap(3)
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
    let id = mia.deploy(false).await;
    world.user("ola", UserRole::Member);
    let share = |username: &str, approval: pb::DraftApproval| {
        Operation::Share(pb::MemberShareRequest {
            app_id: id.clone(),
            username: username.into(),
            remove: false,
            approval: approval as i32,
        })
    };
    let delete = |approval: pb::DraftApproval| {
        Operation::Delete(pb::MemberDeleteRequest {
            app_id: id.clone(),
            approval: approval as i32,
        })
    };

    let asked = world
        .rpc(&world.member, share("ola", pb::DraftApproval::Unspecified))
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
            .member_app(&id)
            .unwrap()
            .unwrap()
            .shares
            .is_empty()
    );
    // A name nobody has is asked about the same way: the question is no
    // oracle of who exists.
    let unknown = world
        .rpc(
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
        let refused = world
            .rpc(&world.staff, share("ola", approval))
            .await
            .unwrap_err();
        assert_eq!(refused.code.as_str(), "APP_ACCESS_DENIED");
    }
    world
        .rpc(&world.member, share("ola", pb::DraftApproval::Elicitation))
        .await
        .unwrap();
    assert_eq!(
        world.store().member_app(&id).unwrap().unwrap().shares,
        ["ola"]
    );

    let asked = world
        .rpc(&world.member, delete(pb::DraftApproval::Unspecified))
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
        world.store().member_app(&id).unwrap().is_some(),
        "nothing was deleted"
    );
    world
        .rpc(&world.member, delete(pb::DraftApproval::Elicitation))
        .await
        .unwrap();
    assert!(world.store().member_app(&id).unwrap().is_none());

    // App Studio's buttons are the person's own click.
    let journal = mia.deploy(false).await;
    let (status, shared) = mia
        .call(
            "POST",
            &format!("/api/member-apps/{journal}/shares"),
            json!({"username": "ola"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{shared}");
    let (status, deleted) = mia
        .call(
            "DELETE",
            &format!("/api/member-apps/{journal}"),
            Value::Null,
        )
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
        super::current_files(&world.core, &app.id).get("logo.png"),
        Some(&logo)
    );
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

#[tokio::test]
async fn an_authors_apps_keep_at_most_their_bytes_in_the_ledger() {
    let limit = 1024 * 1024;
    let world = World::with_member_caps(MemberCaps {
        author_bytes: limit,
        ..super::MEMBER_CAPS
    });
    let mia = world.page(&world.member);
    let script = |n: usize| with_script(&format!("/* {n} {} */\n", "z".repeat(150 * 1024)));
    let (status, created) = mia.create(script(0)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["app"]["id"].as_str().unwrap().to_owned();
    // Revisions until the bytes her apps keep would pass the limit.
    let mut refused = None;
    for n in 1..20 {
        let revision = world.revision(&id);
        let kept = world.store().member_ledger_bytes(&world.member.id).unwrap();
        let (status, answer) = mia.update(&id, script(n)).await;
        if status == StatusCode::OK {
            continue;
        }
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
        // Refused, nothing was kept of it.
        assert_eq!(world.revision(&id), revision);
        assert_eq!(
            world.store().member_ledger_bytes(&world.member.id).unwrap(),
            kept
        );
        refused = Some(answer);
        break;
    }
    let refused = refused.expect("the bytes were never refused");
    assert_eq!(refused["code"], "APP_RESOURCE_LIMIT");
    assert_eq!(refused["details"]["cap"], "author-bytes");
    assert_eq!(refused["details"]["limit"], limit);
    assert!(refused["details"]["used"].as_u64().unwrap() > limit);
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("delete an app"),
        "{refused}"
    );
    assert!(world.store().member_ledger_bytes(&world.member.id).unwrap() <= limit);
    let (status, _) = mia.create(script(99)).await;
    assert_eq!(
        status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "a new app counts too"
    );
    // It is one person's budget: another author deploys.
    let ola = world.user("ola", UserRole::Member);
    world.page(&ola).deploy(false).await;
    // Deleting an app gives its bytes back.
    let (status, _) = mia
        .call("DELETE", &format!("/api/member-apps/{id}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, again) = mia.create(script(100)).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
}

#[tokio::test]
async fn each_authors_deploys_are_throttled() {
    let world = World::new();
    let mia = world.page(&world.member);
    let id = mia.deploy(false).await;
    for n in 1..crate::state::deploy_throttle::MEMBER_DEPLOY_BURST {
        let (status, answer) = mia
            .update(&id, with_script(&format!("document.title = '{n}';\n")))
            .await;
        assert_eq!(status, StatusCode::OK, "{n}: {answer}");
    }
    let revision = world.revision(&id);
    let body = json!({"files": with_script("document.title = 'one more';\n"), "expectedRevision": revision}).to_string();
    let cookie = world.session(&world.member);
    let (status, headers, refused) = world
        .exchange(
            "PUT",
            &format!("/api/member-apps/{id}"),
            &[
                ("cookie", &cookie),
                ("origin", STUDIO),
                ("content-type", "application/json"),
            ],
            &body,
        )
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{refused}");
    assert_eq!(refused["code"], "APP_BUSY");
    assert_eq!(refused["retryable"], true);
    assert_eq!(refused["details"]["reason"], "deploy-rate");
    assert_eq!(refused["details"]["retryAfterSeconds"], 60);
    assert_eq!(headers.get("retry-after").unwrap(), "60");
    assert_eq!(world.revision(&id), revision, "nothing was deployed");
    let (status, _) = mia.create(package(false, false)).await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "a new app counts too"
    );
    // Another author is not slowed, and a minute later she deploys again.
    let ola = world.user("ola", UserRole::Member);
    world.page(&ola).deploy(false).await;
    world.advance(60);
    let (status, answer) = mia
        .update(&id, with_script("document.title = 'a minute on';\n"))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

/// A resource the revision ledger accepts (its revision is its bytes'), as
/// the catalogue would assemble one for `html`.
fn ledger_resource(app_id: &str, html: &str) -> sasha_package::assemble::Resource {
    use sasha_package::assemble::{Resource, resource_uri, revision_of};
    const MIME: &str = "text/html;profile=mcp-app";
    let meta = serde_json::json!({
        "csp": {"connectDomains": []},
        "prefersBorder": false,
        "sasha": {"sourceDigest": sasha_contract::data::sha256_hex(html.as_bytes())},
    });
    let csp = "default-src 'none'".to_owned();
    let revision = revision_of(MIME, &csp, &meta, html);
    Resource {
        app_id: app_id.to_owned(),
        uri: resource_uri(app_id, &revision),
        revision,
        mime_type: MIME.to_owned(),
        html: html.to_owned(),
        csp,
        meta,
    }
}
