//! Who a preview is for, through the real `GetCatalogue` RPC on a real core
//! database: a draft's preview answer carries what the previewer reads of
//! the live app (`PreviewScope`), worked out from the live contract and
//! their live grant, never from the draft. data-worker keeps exactly those
//! rows in the previewer's scratch copy (`data-worker`'s preview tests);
//! the whole path runs in `tests/process/drafts.rs`.

use std::sync::Arc;

use sasha_proto::pb;
use sasha_proto::pb::core_service_server::CoreService;
use serde_json::json;
use tonic::Request;

use crate::grpc::{CoreGrpc, EntryCache};
use crate::test_world::{WRITER, World};
use studio_store::{PrincipalKind, User};

/// The Studio page's browser session of `user`, as the gateway passes it.
fn session(user: &User) -> pb::Principal {
    World::as_kind(World::principal(user, &WRITER), PrincipalKind::Session)
}

/// A member's Studio session, which may author member apps.
fn author_session(user: &User) -> pb::Principal {
    World::as_kind(
        World::principal(user, &["chat:use", "apps:invoke", "apps:author"]),
        PrincipalKind::Session,
    )
}

impl World {
    /// `app` as `GetCatalogue` answers `principal` previewing `preview`.
    async fn previewed(
        &self,
        principal: pb::Principal,
        app: &str,
        preview: &str,
    ) -> Option<pb::CatalogueApp> {
        let grpc = CoreGrpc {
            core: self.core.clone(),
            entries: Arc::new(EntryCache::default()),
        };
        let reply = grpc
            .get_catalogue(Request::new(pb::CatalogueRequest {
                principal: Some(principal),
                app_id: app.to_owned(),
                preview: preview.to_owned(),
                ..pb::CatalogueRequest::default()
            }))
            .await
            .unwrap()
            .into_inner();
        reply.apps.into_iter().next()
    }
}

/// Each live table's kept rows: the owner field they are kept by, or `*`
/// for every row.
fn kept(app: &pb::CatalogueApp) -> Vec<(String, String)> {
    let scope = app.preview_scope.as_ref().expect("a preview's scope");
    scope
        .tables
        .iter()
        .map(|(table, rows)| {
            let by = rows.owner_field.clone().unwrap_or_else(|| "*".to_owned());
            (table.clone(), by)
        })
        .collect()
}

#[tokio::test]
async fn a_staff_draft_that_shares_a_table_previews_only_the_previewers_rows() {
    let world = World::new();
    world.create_as_admin("notes", true).await;
    // The staff manager drafts `items` into a shared table: publishing it
    // needs an admin, and its preview must not show every user's rows.
    let manifest = world.core.source.read("notes", "APP.md").unwrap();
    let text = manifest.content;
    let shared = text.replace(
        "access: owner\n    ownerField: created_by\n",
        "access: shared\n",
    );
    assert_ne!(shared, text, "{text}");
    let written = crate::grpc::calls::source_files(
        &world.core,
        Some(&world.writer()),
        "writeAppFile",
        "notes",
        &json!({"app": "notes", "path": "APP.md", "content": shared, "draft": true, "expectedVersion": manifest.version})
            .to_string(),
    )
    .await
    .unwrap();
    assert!(written.status.as_ref().unwrap().ok, "{written:?}");
    let preview_id = written.draft.unwrap().preview_id;

    for user in [&world.staff, &world.admin] {
        let app = world
            .previewed(session(user), "notes", &preview_id)
            .await
            .unwrap_or_else(|| panic!("{} previews the draft", user.username));
        // The draft's tools and policy ...
        let items = app.tables["items"].declaration.as_ref().unwrap();
        assert_eq!(items.access, pb::Access::Shared as i32);
        // ... over the rows the previewer reads live: their own.
        assert_eq!(
            kept(&app),
            [("items".to_owned(), "created_by".to_owned())],
            "{}",
            user.username
        );
    }
    // Anyone else gets no preview at all.
    assert!(
        world
            .previewed(session(&world.member), "notes", &preview_id)
            .await
            .is_none()
    );
    // A live answer carries no scope.
    let live = world.previewed(session(&world.staff), "notes", "").await;
    assert!(live.is_some_and(|app| app.preview_scope.is_none()));
}

#[tokio::test]
async fn a_member_draft_previews_only_the_authors_rows_and_a_lost_grant_keeps_none() {
    let world = World::new();
    let schema = "CREATE TABLE habits (\n  id INTEGER PRIMARY KEY,\n  title TEXT NOT NULL,\n  created_by TEXT NOT NULL\n);\n";
    let mut files = json!({
        "APP.md": "---\nid: habits\nname: Habits\ndescription: Habits kept each day\nversion: 0.1.0\ntheme: none\ncapabilities:\n  data: read-write\ntables:\n  habits:\n    access: owner\n    ownerField: created_by\n---\n# Habits\n\nEach person's habits.\n",
        "index.html": "<!doctype html>\n<html lang=\"en\">\n<head>\n  <meta charset=\"utf-8\">\n  <title>Habits</title>\n  <link rel=\"stylesheet\" href=\"styles.css\">\n</head>\n<body>\n  <main><h1>Habits</h1></main>\n  <script src=\"app.js\"></script>\n</body>\n</html>\n",
        "styles.css": "main { padding: 1rem; }\n",
        "app.js": "document.querySelector('h1').textContent = 'Habits';\n",
        "schema.sql": schema,
        "migrations/001-initial.sql": schema,
    });
    let author = world.page(&world.member);
    let (status, created) = author
        .call(
            "POST",
            "/api/member-apps",
            json!({"name": "Habits", "files": files}),
        )
        .await;
    assert_eq!(status, http::StatusCode::CREATED, "{created}");
    let id = created["app"]["id"].as_str().unwrap().to_owned();
    // The author drafts a new script; the preview runs it on their rows only,
    // whatever it asks for (a colleague's shared use of the app included).
    files["app.js"] = json!("document.title = 'Drafted';\n");
    let (status, drafted) = author
        .call(
            "POST",
            &format!("/api/member-apps/{id}/draft"),
            json!({"files": files}),
        )
        .await;
    assert_eq!(status, http::StatusCode::OK, "{drafted}");
    assert_eq!(drafted["ok"], true, "{drafted}");
    let preview_id = drafted["previewId"].as_str().unwrap().to_owned();
    let app = world
        .previewed(author_session(&world.member), &id, &preview_id)
        .await
        .expect("the author previews the draft");
    assert_eq!(kept(&app), [("habits".to_owned(), "created_by".to_owned())]);

    // Without a live grant there is nothing to read live, so nothing is kept
    // (an admin without a grant on her app, say).
    assert!(
        !world
            .store()
            .access_by_app(&world.admin.id)
            .unwrap()
            .contains_key(&id)
    );
    let scope = crate::previews::preview_scope(
        &world.core,
        &world.core.catalogue.current(),
        &crate::test_world::actor_of(&session(&world.admin)),
        &id,
    )
    .await
    .unwrap();
    assert!(scope.tables.is_empty(), "{scope:?}");
}
