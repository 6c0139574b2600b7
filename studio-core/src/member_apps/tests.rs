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

use crate::test_world::{PASSWORD, Page, STUDIO, World, off_runtime};
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
        off_runtime(|| self.store().create_user(name, role, PASSWORD).unwrap())
    }

    /// The live member app `id`'s current revision.
    fn revision(&self, id: &str) -> String {
        off_runtime(|| self.store().member_app(id).unwrap().unwrap().revision)
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

mod caps;
mod deploys;
mod lifecycle;
mod shares;
