//! App creation in process: the generated packages against the validator,
//! the input rules, the atomic write, and the refusal matrix through the RPC
//! and `POST /api/apps`, on a real core database and docs tree in a temporary
//! folder. data-worker is absent (its client points at a closed port), which
//! only a data app's migration-drift check notices.

use std::path::Path;

use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use sasha_package::manifest::DataCapability;
use sasha_package::validate::validate_dir;
use sasha_proto::pb;
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use super::*;
use crate::catalogue::AppEntry;
use crate::test_world::{PASSWORD, STUDIO, WRITER, World};
use studio_store::{
    AppAccess, PrincipalKind, Scope, TokenKind, User, UserRole, action, creation_action,
};

impl World {
    fn staging(&self) -> std::path::PathBuf {
        self.dir.path().join("docs").join(STAGING_DIR)
    }

    async fn create(
        &self,
        principal: Option<pb::Principal>,
        app: &str,
        name: &str,
        description: &str,
        with_table: bool,
    ) -> Result<pb::CreateAppReply, AppError> {
        crate::grpc::calls::create(
            &self.core,
            pb::CreateAppRequest {
                principal,
                app_id: app.to_owned(),
                name: name.to_owned(),
                description: description.to_owned(),
                with_table,
            },
        )
        .await
    }

    fn created_entries(&self) -> Vec<studio_store::AuditEntry> {
        self.store()
            .audit_entries(None)
            .unwrap()
            .into_iter()
            .filter(|entry| entry.action == creation_action::APP_CREATED)
            .collect()
    }
}

fn new_app(id: &str, name: &str, description: &str, with_table: bool) -> NewApp {
    NewApp::parse(id, name, description, with_table).unwrap()
}

// --- the generated packages ------------------------------------------------

#[test]
fn both_packages_pass_the_validator_with_any_name() {
    let names = [
        ("Notes", "Short notes"),
        (
            "Quote \" back\\slash <script>alert(1)</script> & 'x'",
            "key: value # not a comment, {braces} [brackets] *star &anchor !tag %percent @at `tick`",
        ),
        ("- leading dash", "---"),
        ("Émilie’s 日本語 ✓", "yes"),
        ("null", "true"),
        (
            &"n".repeat(CREATE_APP_MAX_NAME_CHARS),
            &"é".repeat(CREATE_APP_MAX_DESCRIPTION_CHARS),
        ),
    ];
    for with_table in [false, true] {
        for (name, description) in names {
            let app = new_app("my-app-2", name, description, with_table);
            let package = app.validated().unwrap_or_else(|_| {
                let validation = validate_source(
                    "my-app-2",
                    PackageSource {
                        files: app.files(),
                        ..PackageSource::default()
                    },
                );
                panic!("{name:?} {with_table}: {:?}", validation.diagnostics)
            });
            assert_eq!(package.manifest.id, "my-app-2");
            assert_eq!(package.manifest.name, name);
            assert_eq!(package.manifest.description, description);
            let html = &app.files()["index.html"];
            assert!(!html.contains("<script>alert"), "{html}");
            let expected: Vec<&str> = if with_table {
                vec![
                    "APP.md",
                    "app.js",
                    "index.html",
                    "migrations/001-initial.sql",
                    "schema.sql",
                    "styles.css",
                ]
            } else {
                vec!["APP.md", "app.js", "index.html", "styles.css"]
            };
            assert_eq!(
                app.files().keys().map(String::as_str).collect::<Vec<_>>(),
                expected
            );
            if with_table {
                assert_eq!(
                    package.manifest.capabilities.data,
                    DataCapability::ReadWrite
                );
                let data = package.data.as_ref().expect("a data contract");
                let declaration = &data.tables[TABLE];
                assert_eq!(declaration.owner_field.as_deref(), Some("created_by"));
                assert!(
                    data.schema.tables[TABLE]
                        .columns
                        .iter()
                        .any(|column| column.name == "title")
                );
                let script = &app.files()["app.js"];
                assert!(script.contains("Sasha.data.list(\"items\""));
                assert!(script.contains("Sasha.data.create(\"items\""));
            } else {
                assert_eq!(package.manifest.capabilities.data, DataCapability::None);
                assert!(package.data.is_none());
            }
            // Nothing the caller typed reaches a script.
            assert!(!app.files()["app.js"].contains(name));
        }
    }
}

#[test]
fn the_written_package_is_the_one_validated() {
    let dir = tempfile::tempdir().unwrap();
    let (apps, staging) = (dir.path().join("apps"), dir.path().join(STAGING_DIR));
    std::fs::create_dir(&apps).unwrap();
    for (id, with_table) in [("plain", false), ("with-rows", true)] {
        let app = new_app(id, "A name", "A description", with_table);
        let revision = app.validated().unwrap().resource.revision;
        write_package(&apps, &staging, id, &app.files()).unwrap();
        let validation = validate_dir(&apps.join(id));
        assert_eq!(
            validation.package.map(|package| package.resource.revision),
            Some(revision),
            "{:?}",
            validation.diagnostics
        );
    }
    // The staging folder keeps nothing.
    assert_eq!(std::fs::read_dir(&staging).unwrap().count(), 0);
}

// --- the input rules -------------------------------------------------------

#[test]
fn ids_names_and_descriptions_are_checked_with_their_rule() {
    let long_id = format!("a{}", "b".repeat(60));
    for id in [
        "",
        "Hello",
        "under_score",
        "-lead",
        "trail-",
        "dou--ble",
        "1st",
        "ünï",
        "a b",
        "a/b",
        "..",
        ".hidden",
        "_shared",
        &long_id,
    ] {
        let error = NewApp::parse(id, "Name", "Description", false).unwrap_err();
        assert_eq!(error.code, ErrorCode::InputInvalid, "{id:?}");
        assert!(
            error.message.contains("lowercase kebab-case"),
            "{id:?}: {}",
            error.message
        );
        assert_eq!(error.details, Some(json!({"field": "app"})));
    }
    let too_long_name = "n".repeat(CREATE_APP_MAX_NAME_CHARS + 1);
    let too_long_description = "d".repeat(CREATE_APP_MAX_DESCRIPTION_CHARS + 1);
    for (name, description, field) in [
        ("", "Description", "name"),
        ("   ", "Description", "name"),
        (too_long_name.as_str(), "Description", "name"),
        ("two\nlines", "Description", "name"),
        ("tab\there", "Description", "name"),
        ("zero\u{200B}width", "Description", "name"),
        ("line\u{2028}separator", "Description", "name"),
        ("Name", "", "description"),
        ("Name", too_long_description.as_str(), "description"),
        ("Name", "bell\u{7}", "description"),
        ("Name", "right-to-left \u{202E}override", "description"),
    ] {
        let error = NewApp::parse("fine", name, description, false).unwrap_err();
        assert_eq!(
            error.code,
            ErrorCode::InputInvalid,
            "{name:?} {description:?}"
        );
        assert_eq!(error.details, Some(json!({ "field": field })));
        assert!(error.message.starts_with(field), "{}", error.message);
    }
    let bounds = NewApp::parse(
        "a-1",
        &format!("  {}  ", "ñ".repeat(CREATE_APP_MAX_NAME_CHARS)),
        &"d".repeat(CREATE_APP_MAX_DESCRIPTION_CHARS),
        true,
    )
    .unwrap();
    assert_eq!(
        bounds.name.chars().count(),
        CREATE_APP_MAX_NAME_CHARS,
        "trimmed"
    );
    assert!(NewApp::parse(&"a".repeat(60), "N", "D", false).is_ok());
}

// --- the atomic write ------------------------------------------------------

#[test]
fn a_failed_write_leaves_no_package_and_no_slot() {
    let dir = tempfile::tempdir().unwrap();
    let (apps, staging) = (dir.path().join("apps"), dir.path().join(STAGING_DIR));
    std::fs::create_dir(&apps).unwrap();
    // `x` is a file, so `x/y` cannot be created: the write fails half way.
    let files = BTreeMap::from([
        ("APP.md".to_owned(), "---\n".to_owned()),
        ("x".to_owned(), "a file".to_owned()),
        ("x/y".to_owned(), "under a file".to_owned()),
    ]);
    let error = write_package(&apps, &staging, "half", &files).unwrap_err();
    assert_eq!(error.code, ErrorCode::Internal);
    assert!(!apps.join("half").exists());
    assert_eq!(std::fs::read_dir(&staging).unwrap().count(), 0);
    let traversal = BTreeMap::from([("../escape.md".to_owned(), "no".to_owned())]);
    assert!(write_package(&apps, &staging, "sneaky", &traversal).is_err());
    assert!(!dir.path().join("escape.md").exists());
    assert!(!apps.join("sneaky").exists());
}

#[tokio::test]
async fn an_interrupted_creation_is_never_seen_and_is_cleaned_up() {
    let world = World::new();
    // What a crash between two file writes leaves: half a package in a slot.
    let leftover = world.staging().join("crashed-00000000000000aa/crashed");
    std::fs::create_dir_all(&leftover).unwrap();
    std::fs::write(leftover.join("APP.md"), "---\nid: crashed\n").unwrap();
    let snapshot = world.core.catalogue.refresh();
    assert!(snapshot.apps.is_empty(), "a slot is not in the apps folder");
    let files = new_app("next", "Next", "The next one", false).files();
    write_package(&world.apps(), &world.staging(), "next", &files).unwrap();
    assert_eq!(std::fs::read_dir(world.staging()).unwrap().count(), 0);
    let snapshot = world.core.catalogue.refresh();
    assert_eq!(snapshot.apps.keys().collect::<Vec<_>>(), ["next"]);
}

#[test]
fn an_existing_folder_or_symlink_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (apps, staging) = (dir.path().join("apps"), dir.path().join(STAGING_DIR));
    std::fs::create_dir_all(apps.join("taken")).unwrap();
    std::fs::write(apps.join("taken/notes.txt"), "mine").unwrap();
    std::os::unix::fs::symlink(dir.path(), apps.join("linked")).unwrap();
    let files = new_app("taken", "Taken", "Taken", false).files();
    for id in ["taken", "linked"] {
        let error = write_package(&apps, &staging, id, &files).unwrap_err();
        assert_eq!(error.code, ErrorCode::Conflict, "{id}");
        assert_eq!(error.details.as_ref().unwrap()["reason"], "exists");
    }
    assert_eq!(
        std::fs::read_to_string(apps.join("taken/notes.txt")).unwrap(),
        "mine"
    );
    assert!(!apps.join("taken/APP.md").exists());
}

// --- the RPC ---------------------------------------------------------------

#[tokio::test]
async fn an_admin_creates_an_app_that_follows_first_discovery() {
    let world = World::new();
    let reply = world
        .create(
            Some(World::principal(&world.admin, &WRITER)),
            "team-notes",
            "  Team notes  ",
            "Notes the team shares",
            false,
        )
        .await
        .unwrap();
    assert_eq!(reply.app, "team-notes");
    let status = reply.status.unwrap();
    assert!(status.ok, "{status:?}");
    assert!(status.diagnostics.is_empty());
    let revision = status.revision.unwrap();
    // On disk, valid, the revision answered; live in the catalogue.
    let validation = validate_dir(&world.apps().join("team-notes"));
    let package = validation.package.expect("the written package validates");
    assert_eq!(package.resource.revision, revision);
    assert_eq!(package.manifest.name, "Team notes");
    assert!(matches!(
        world.core.catalogue.current().apps.get("team-notes"),
        Some(AppEntry::Valid(live)) if live.resource.revision == revision
    ));
    // Registered: the admin and staff users existing now manage it; the
    // member gets nothing, and neither does a staff user created later.
    let registered = world.store().registered_app("team-notes").unwrap().unwrap();
    assert_eq!(registered.current_revision, revision);
    let store = world.store();
    assert_eq!(
        store.access("team-notes", &world.admin.id).unwrap(),
        Some(AppAccess::Manage)
    );
    assert_eq!(
        store.access("team-notes", &world.staff.id).unwrap(),
        Some(AppAccess::Manage)
    );
    assert_eq!(store.access("team-notes", &world.member.id).unwrap(), None);
    let late = store.create_user("lee", UserRole::Staff, PASSWORD).unwrap();
    crate::registry::refresh_catalogue(&world.core).await;
    assert_eq!(store.access("team-notes", &late.id).unwrap(), None);
    // Audited: who created it, then the registration and its grants.
    let audit = store.audit_entries(Some("team-notes")).unwrap();
    let actions: Vec<&str> = audit.iter().map(|entry| entry.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            creation_action::APP_CREATED,
            action::APP_REGISTERED,
            action::GRANT_CHANGED,
            action::GRANT_CHANGED
        ]
    );
    assert_eq!(audit[0].actor, world.admin.id);
    assert_eq!(audit[0].after.as_deref(), Some(revision.as_str()));
    assert_eq!(audit[1].actor, studio_store::ACTOR_SYSTEM);
    // The ledger's first revision is the creator's, through MCP.
    let revisions = store.revisions("team-notes").unwrap();
    assert_eq!(revisions.len(), 1, "{revisions:?}");
    assert_eq!(revisions[0].revision, revision);
    assert_eq!(
        revisions[0].user_id.as_deref(),
        Some(world.admin.id.as_str())
    );
    assert_eq!(revisions[0].surface, studio_store::RevisionSurface::Mcp);
    assert_eq!(revisions[0].summary, "createApp team-notes");

    // The same id again: refused, nothing changes.
    let again = world
        .create(
            Some(World::principal(&world.staff, &WRITER)),
            "team-notes",
            "Other",
            "Other",
            true,
        )
        .await
        .unwrap_err();
    assert_eq!(again.code, ErrorCode::Conflict);
    assert_eq!(again.details.unwrap()["reason"], "registered");
    assert!(!world.apps().join("team-notes/schema.sql").exists());
    assert_eq!(world.created_entries().len(), 1);
}

#[tokio::test]
async fn a_data_app_is_created_with_its_owner_table() {
    let world = World::new();
    let reply = world
        .create(
            Some(World::principal(&world.staff, &WRITER)),
            "reading-list",
            "Reading list",
            "Books to read",
            true,
        )
        .await
        .unwrap();
    let status = reply.status.unwrap();
    // The package validates; only the drift check against the (absent)
    // data-worker has something to say.
    assert!(status.revision.is_some(), "{status:?}");
    assert!(
        status
            .diagnostics
            .iter()
            .all(|diagnostic| diagnostic.file == "migrations" && diagnostic.code == "APP_NOT_READY"),
        "{status:?}"
    );
    let Some(AppEntry::Valid(package)) = world
        .core
        .catalogue
        .current()
        .apps
        .get("reading-list")
        .cloned()
    else {
        panic!("the data app is live");
    };
    let registered = world
        .store()
        .registered_app("reading-list")
        .unwrap()
        .unwrap();
    assert_eq!(
        registered.schema_hash.as_deref(),
        Some(package.data.as_ref().unwrap().hash.as_str())
    );
    let policy = world.store().read_policy("reading-list").unwrap().unwrap();
    assert_eq!(
        policy.get(TABLE).and_then(|readers| readers.owner_field()),
        Some("created_by")
    );
    assert_eq!(
        world
            .store()
            .access("reading-list", &world.staff.id)
            .unwrap(),
        Some(AppAccess::Manage)
    );
}

#[tokio::test]
async fn the_refusal_matrix() {
    let world = World::new();
    // An invalid folder nobody registered, and a registered id whose folder
    // is gone (withdrawn or removed).
    std::fs::create_dir_all(world.apps().join("on-disk")).unwrap();
    std::fs::write(world.apps().join("on-disk/APP.md"), "not a manifest").unwrap();
    world
        .store()
        .register_app("gone", &"0".repeat(64), None, "[]", &Default::default())
        .unwrap();
    let demoted = {
        let mut user = world.admin.clone();
        user.id = world.member.id.clone();
        user
    };
    let api_key = World::as_kind(
        World::principal(&world.admin, &WRITER),
        PrincipalKind::ApiKey,
    );
    let admin = || Some(World::principal(&world.admin, &WRITER));
    let long_name = "n".repeat(CREATE_APP_MAX_NAME_CHARS + 1);
    let long_description = "d".repeat(CREATE_APP_MAX_DESCRIPTION_CHARS + 1);
    type Case<'a> = (
        &'a str,
        Option<pb::Principal>,
        &'a str,
        &'a str,
        &'a str,
        ErrorCode,
        &'a str,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "no principal",
            None,
            "fresh",
            "N",
            "D",
            ErrorCode::Unauthenticated,
            "no principal",
        ),
        (
            "a member",
            Some(World::principal(&world.member, &WRITER)),
            "fresh",
            "N",
            "D",
            ErrorCode::AccessDenied,
            "only admin and staff",
        ),
        (
            "a member whose principal claims admin",
            Some(World::principal(&demoted, &WRITER)),
            "fresh",
            "N",
            "D",
            ErrorCode::AccessDenied,
            "only admin and staff",
        ),
        (
            "staff without apps:write",
            Some(World::principal(&world.staff, &["chat:use", "apps:invoke"])),
            "fresh",
            "N",
            "D",
            ErrorCode::AccessDenied,
            "apps:write",
        ),
        (
            "staff without apps:invoke",
            Some(World::principal(&world.staff, &["apps:write"])),
            "fresh",
            "N",
            "D",
            ErrorCode::AccessDenied,
            "apps:invoke",
        ),
        (
            "an API key",
            Some(api_key),
            "fresh",
            "N",
            "D",
            ErrorCode::AccessDenied,
            "apps:write",
        ),
        (
            "a member with an invalid id (access first)",
            Some(World::principal(&world.member, &WRITER)),
            "Not An Id",
            "",
            "",
            ErrorCode::AccessDenied,
            "only admin and staff",
        ),
        (
            "an invalid id",
            admin(),
            "Fresh_App",
            "N",
            "D",
            ErrorCode::InputInvalid,
            "lowercase kebab-case",
        ),
        (
            "an empty name",
            admin(),
            "fresh",
            " ",
            "D",
            ErrorCode::InputInvalid,
            "name must be 1 to 80",
        ),
        (
            "a long name",
            admin(),
            "fresh",
            &long_name,
            "D",
            ErrorCode::InputInvalid,
            "name must be 1 to 80",
        ),
        (
            "an empty description",
            admin(),
            "fresh",
            "N",
            "",
            ErrorCode::InputInvalid,
            "description must be 1 to 300",
        ),
        (
            "a long description",
            admin(),
            "fresh",
            "N",
            &long_description,
            ErrorCode::InputInvalid,
            "description must be 1 to 300",
        ),
        (
            "a folder on disk",
            admin(),
            "on-disk",
            "N",
            "D",
            ErrorCode::Conflict,
            "already exists",
        ),
        (
            "a registered id",
            admin(),
            "gone",
            "N",
            "D",
            ErrorCode::Conflict,
            "never reused",
        ),
    ];
    for (case, principal, app, name, description, code, message) in cases {
        for with_table in [false, true] {
            let error = world
                .create(principal.clone(), app, name, description, with_table)
                .await
                .unwrap_err();
            assert_eq!(error.code, code, "{case}: {}", error.message);
            assert!(error.message.contains(message), "{case}: {}", error.message);
        }
    }
    // Nothing was written, registered or audited; the invalid folder is as it was.
    assert!(!world.apps().join("fresh").exists());
    assert!(!world.apps().join("gone").exists());
    assert_eq!(
        std::fs::read_to_string(world.apps().join("on-disk/APP.md")).unwrap(),
        "not a manifest"
    );
    assert!(world.store().registered_app("fresh").unwrap().is_none());
    assert!(world.created_entries().is_empty());
}

// --- POST /api/apps --------------------------------------------------------

struct Answer {
    status: StatusCode,
    cache: Option<String>,
    body: Value,
}

async fn post(world: &World, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut request = Request::builder()
        .method("POST")
        .uri("/api/apps")
        .header("host", "localhost:3007");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = crate::http::router(world.core.clone())
        .oneshot(request.body(Body::from(body.to_owned())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let cache = response
        .headers()
        .get("cache-control")
        .map(|value| value.to_str().unwrap().to_owned());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        cache,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

fn session(world: &World, user: &User) -> String {
    let secret = world.store().create_session(&user.id).unwrap();
    format!("sasha_session={secret}")
}

#[tokio::test]
async fn post_api_apps_creates_for_admin_and_staff_and_refuses_everyone_else() {
    let world = World::new();
    let admin = session(&world, &world.admin);
    let member = session(&world, &world.member);
    let invoker = {
        let scopes = [Scope::ChatUse, Scope::AppsInvoke].into_iter().collect();
        let token = world
            .store()
            .mint_token(&world.admin.id, TokenKind::Access, &scopes, None)
            .unwrap();
        format!("Bearer {token}")
    };
    let body =
        r#"{"app":"field-log","name":"Field log","description":"What we saw","withTable":true}"#;
    let json = ("content-type", "application/json");
    let origin = ("origin", STUDIO);
    /// `(case, headers, body, status, code)`.
    type Case<'a> = (
        &'a str,
        Vec<(&'a str, &'a str)>,
        &'a str,
        StatusCode,
        &'a str,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "anonymous",
            vec![json, origin],
            body,
            StatusCode::UNAUTHORIZED,
            "APP_UNAUTHENTICATED",
        ),
        (
            "another origin",
            vec![json, ("origin", "http://evil.example"), ("cookie", &admin)],
            body,
            StatusCode::FORBIDDEN,
            "APP_ACCESS_DENIED",
        ),
        (
            "the cookie without Origin or Sec-Fetch-Site",
            vec![json, ("cookie", &admin)],
            body,
            StatusCode::FORBIDDEN,
            "APP_ACCESS_DENIED",
        ),
        (
            "not JSON",
            vec![("content-type", "text/plain"), origin, ("cookie", &admin)],
            body,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "APP_INPUT_INVALID",
        ),
        (
            "a garbage session",
            vec![json, origin, ("cookie", "sasha_session=nope")],
            body,
            StatusCode::NOT_FOUND,
            "APP_NOT_FOUND",
        ),
        (
            "a member",
            vec![json, origin, ("cookie", &member)],
            body,
            StatusCode::FORBIDDEN,
            "APP_ACCESS_DENIED",
        ),
        (
            "a member's unknown field (access first)",
            vec![json, origin, ("cookie", &member)],
            r#"{"app":"x","extra":1}"#,
            StatusCode::FORBIDDEN,
            "APP_ACCESS_DENIED",
        ),
        (
            "an admin token without apps:write",
            vec![json, ("authorization", &invoker)],
            body,
            StatusCode::FORBIDDEN,
            "APP_ACCESS_DENIED",
        ),
        (
            "an unknown field",
            vec![json, origin, ("cookie", &admin)],
            r#"{"app":"field-log","name":"N","description":"D","owner":"me"}"#,
            StatusCode::BAD_REQUEST,
            "APP_INPUT_INVALID",
        ),
        (
            "a missing field",
            vec![json, origin, ("cookie", &admin)],
            r#"{"app":"field-log","name":"N"}"#,
            StatusCode::BAD_REQUEST,
            "APP_INPUT_INVALID",
        ),
        (
            "an invalid id",
            vec![json, origin, ("cookie", &admin)],
            r#"{"app":"Field Log","name":"N","description":"D"}"#,
            StatusCode::BAD_REQUEST,
            "APP_INPUT_INVALID",
        ),
    ];
    for (case, headers, request, status, code) in cases {
        let answer = post(&world, &headers, request).await;
        assert_eq!(answer.status, status, "{case}: {}", answer.body);
        assert_eq!(answer.body["code"], code, "{case}: {}", answer.body);
    }
    assert!(!world.apps().join("field-log").exists());

    let created = post(&world, &[json, origin, ("cookie", &admin)], body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.cache.as_deref(), Some("no-store"));
    assert_eq!(created.body["app"], "field-log");
    assert!(
        created.body["status"]["revision"].is_string(),
        "{}",
        created.body
    );
    assert!(
        validate_dir(&world.apps().join("field-log"))
            .package
            .is_some()
    );

    // The admin's app list has it, with manage.
    let listing = crate::http::router(world.core.clone())
        .oneshot(
            Request::builder()
                .uri("/api/apps")
                .header("host", "localhost:3007")
                .header("cookie", &admin)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let bytes = listing.into_body().collect().await.unwrap().to_bytes();
    let listing: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        listing["apps"],
        json!([{
            "id": "field-log",
            "name": "Field log",
            "description": "What we saw",
            "version": "0.1.0",
            "revision": created.body["status"]["revision"],
            "resourceUri": format!("ui://sasha/apps/field-log/revisions/{}", created.body["status"]["revision"].as_str().unwrap()),
            "capabilities": {"chat": false, "files": false, "data": "read-write"},
            "access": "manage",
        }])
    );

    // Again: the id is taken.
    let again = post(&world, &[json, origin, ("cookie", &admin)], body).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.body);
    assert_eq!(again.body["code"], "APP_CONFLICT");
    assert_eq!(again.body["details"]["reason"], "registered");
}

#[tokio::test]
async fn the_staging_folder_is_outside_the_apps_folder() {
    let world = World::new();
    assert_eq!(world.staging().parent(), world.apps().parent());
    assert!(Path::new(STAGING_DIR).to_str().unwrap().starts_with('.'));
}
