//! The read guard through the paths an app's own author uses, in process,
//! against the stand-in data-worker (`crate::test_data_worker`) that says
//! which tables hold rows and records what publication asked of it: a staff
//! manager's live `writeAppFile`, a catalogue draft's review and
//! publication, and a member app's deploy and redeploy. What data-worker
//! itself refuses on the data is proved in its own tests.

use std::sync::Arc;

use http::StatusCode;
use sasha_contract::data::{DATA_READ_WIDENED, Readers};
use sasha_proto::pb::{self, draft_reply, draft_request};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};

use crate::test_data_worker::FakeData;
use crate::test_world::{WRITER, World};

/// The owner table `crate::create` gives a new app.
const TABLE: &str = crate::create::TABLE;
const OWNED: &str = "    access: owner\n    ownerField: created_by\n";
const MANAGERS_READ_ALL: &str =
    "    access: owner\n    ownerField: created_by\n    managersReadAll: true\n";

/// The migration of the attack pass: another person's id in a new column,
/// which two renames make the owner column.
const GRAB: &str = "ALTER TABLE items ADD COLUMN grab TEXT NOT NULL DEFAULT 'mallory';\n\
                    ALTER TABLE items RENAME COLUMN created_by TO orig_owner;\n\
                    ALTER TABLE items RENAME COLUMN grab TO created_by;\n";

impl World {
    async fn tool(
        &self,
        principal: &pb::Principal,
        operation: &str,
        arguments: Value,
    ) -> Result<pb::SourceFilesReply, AppError> {
        crate::grpc::calls::source_files(
            &self.core,
            Some(principal),
            operation,
            arguments["app"].as_str().unwrap(),
            &arguments.to_string(),
        )
        .await
    }

    /// writeAppFile as the staff manager, live or (with `draft`) on the
    /// app's draft, over the file's current version.
    async fn write_as_staff(
        &self,
        app: &str,
        path: &str,
        content: &str,
        draft: bool,
    ) -> Result<pb::SourceFilesReply, AppError> {
        let mut arguments = json!({"app": app, "path": path, "content": content});
        if draft {
            arguments["draft"] = true.into();
        }
        let read = self
            .tool(
                &self.writer(),
                "readAppFile",
                json!({"app": app, "path": path, "draft": draft}),
            )
            .await;
        // Before a draft exists, its files are the live package's.
        let version = match read {
            Ok(read) => read.version,
            Err(_) => self
                .core
                .source
                .read(app, path)
                .ok()
                .map(|file| file.version),
        };
        if let Some(version) = version {
            arguments["expectedVersion"] = version.into();
        }
        self.tool(&self.writer(), "writeAppFile", arguments).await
    }

    fn manifest(&self, app: &str) -> String {
        std::fs::read_to_string(self.apps().join(app).join("APP.md")).unwrap()
    }

    async fn draft(
        &self,
        principal: &pb::Principal,
        app: &str,
        operation: draft_request::Operation,
    ) -> Result<draft_reply::Result, AppError> {
        crate::grpc::calls::draft(
            &self.core,
            pb::DraftRequest {
                principal: Some(principal.clone()),
                app_id: app.to_owned(),
                operation: Some(operation),
            },
        )
        .await
        .map(|reply| reply.result.unwrap())
    }

    async fn review(&self, app: &str) -> pb::DraftInfo {
        match self
            .draft(
                &self.writer(),
                app,
                draft_request::Operation::Review(pb::DraftReviewRequest {}),
            )
            .await
            .unwrap()
        {
            draft_reply::Result::Draft(info) => info,
            other => panic!("{other:?}"),
        }
    }

    async fn publish(
        &self,
        principal: &pb::Principal,
        app: &str,
        base: &str,
    ) -> Result<draft_reply::Result, AppError> {
        // What is published is what the review just showed.
        let content_hash = self.review(app).await.content_hash;
        self.draft(
            principal,
            app,
            draft_request::Operation::Publish(pb::DraftPublishRequest {
                expected_revision: base.to_owned(),
                approval: pb::DraftApproval::Elicitation as i32,
                content_hash,
            }),
        )
        .await
    }
}

fn codes(details: Option<&Value>) -> Vec<String> {
    details
        .and_then(|details| details["diagnostics"].as_array())
        .map(|diagnostics| {
            diagnostics
                .iter()
                .map(|d| d["code"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_live_write_that_lets_managers_read_every_row_is_refused_once_rows_exist() {
    let fake = Arc::new(FakeData::default());
    let world = World::with_data(fake.clone()).await;
    world.create_as_admin("notes", true).await;
    world.create_as_admin("memos", true).await;
    fake.put_rows("notes", TABLE);

    // notes holds rows: the staff manager's one live write is refused,
    // saying which table and what it would expose, and changes nothing.
    let before = world.manifest("notes");
    let widened = before.replace(OWNED, MANAGERS_READ_ALL);
    assert_ne!(widened, before);
    let refused = world
        .write_as_staff("notes", "APP.md", &widened, false)
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::AccessDenied, "{}", refused.message);
    assert!(
        refused.message.contains("table items")
            && refused.message.contains("managersReadAll")
            && refused.message.contains("approved by an admin"),
        "{}",
        refused.message
    );
    assert_eq!(codes(refused.details.as_ref()), [DATA_READ_WIDENED]);
    assert_eq!(world.manifest("notes"), before);
    // The policy the rows were written under is still the registered one.
    let policy = world.store().read_policy("notes").unwrap().unwrap();
    assert_eq!(
        policy[TABLE],
        Readers::Owner {
            field: "created_by".to_owned(),
            managers_read_all: false
        }
    );

    // memos holds none: nothing to expose, so the same change is fine.
    let memos = world.manifest("memos").replace(OWNED, MANAGERS_READ_ALL);
    let written = world
        .write_as_staff("memos", "APP.md", &memos, false)
        .await
        .unwrap();
    assert!(written.status.unwrap().revision.is_some());
    assert_eq!(world.manifest("memos"), memos);
}

#[tokio::test]
async fn a_draft_letting_managers_read_every_row_needs_an_admin_and_carries_the_approval() {
    let fake = Arc::new(FakeData::default());
    let world = World::with_data(fake.clone()).await;
    let base = world.create_as_admin("notes", true).await;
    fake.put_rows("notes", TABLE);
    let widened = world.manifest("notes").replace(OWNED, MANAGERS_READ_ALL);
    world
        .write_as_staff("notes", "APP.md", &widened, true)
        .await
        .unwrap();

    let info = world.review("notes").await;
    let review = info.review.unwrap();
    assert!(review.needs_admin, "{review:?}");
    assert!(
        review.read_widened[0].contains("managersReadAll"),
        "{review:?}"
    );

    // The staff member may not publish it, and data-worker is never asked.
    let refused = world
        .publish(&world.writer(), "notes", &base)
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::AccessDenied, "{}", refused.message);
    assert!(refused.message.contains("only be published by an admin"));
    assert!(fake.publications().is_empty());

    // An admin may, and data-worker is told who approved it.
    let admin = World::principal(&world.admin, &WRITER);
    let published = world.publish(&admin, "notes", &base).await.unwrap();
    assert!(
        matches!(published, draft_reply::Result::Published(_)),
        "{published:?}"
    );
    let publications = fake.publications();
    assert_eq!(publications.len(), 1);
    assert_eq!(publications[0].approved_by_admin, world.admin.id);

    // A draft that widens nothing carries no approval, even from an admin.
    let current = world
        .store()
        .registered_app("notes")
        .unwrap()
        .unwrap()
        .current_revision;
    world
        .write_as_staff("notes", "styles.css", "main { margin: 0; }\n", true)
        .await
        .unwrap();
    assert!(!world.review("notes").await.review.unwrap().needs_admin);
    world.publish(&admin, "notes", &current).await.unwrap();
    let publications = fake.publications();
    assert_eq!(publications.len(), 2);
    assert_eq!(publications[1].approved_by_admin, "");
}

#[tokio::test]
async fn a_migration_handing_rows_to_someone_else_is_reported_and_never_live() {
    let fake = Arc::new(FakeData::default());
    let world = World::with_data(fake.clone()).await;
    let base = world.create_as_admin("notes", true).await;
    fake.put_rows("notes", TABLE);

    // A draft: its review shows why it does not validate, and it is not
    // published, not even by an admin.
    let reply = world
        .write_as_staff("notes", "migrations/002-grab.sql", GRAB, true)
        .await
        .unwrap();
    let status = reply.status.unwrap();
    assert!(!status.ok);
    let owner_column: Vec<&pb::Diagnostic> = status
        .diagnostics
        .iter()
        .filter(|d| d.code == "SQL_OWNER_COLUMN")
        .collect();
    assert_eq!(owner_column.len(), 2, "{status:?}");
    assert_eq!(owner_column[0].file, "migrations/002-grab.sql");
    assert_eq!(owner_column[0].line, Some(2));
    let checked = world.review("notes").await;
    assert!(
        checked
            .status
            .unwrap()
            .diagnostics
            .iter()
            .any(|d| d.code == "SQL_OWNER_COLUMN")
    );
    let admin = World::principal(&world.admin, &WRITER);
    let refused = world.publish(&admin, "notes", &base).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::InputInvalid, "{}", refused.message);
    assert!(fake.publications().is_empty());

    // Live: the package no longer validates, so it activates nothing, and
    // checkApp says why.
    world
        .write_as_staff("notes", "migrations/002-grab.sql", GRAB, false)
        .await
        .unwrap();
    let checked = world
        .tool(&world.writer(), "checkApp", json!({"app": "notes"}))
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(!checked.ok);
    assert!(
        checked
            .diagnostics
            .iter()
            .any(|d| d.code == "SQL_OWNER_COLUMN" && d.file == "migrations/002-grab.sql"),
        "{checked:?}"
    );
}

/// A member app with one owner table and, for a redeploy, its files with
/// `manifest_table` as the table's declaration and `extra` files.
fn member_files(manifest_table: &str, extra: &[(&str, &str)]) -> Value {
    let schema = "CREATE TABLE habits (\n  id INTEGER PRIMARY KEY,\n  title TEXT NOT NULL,\n  created_by TEXT NOT NULL\n);\n";
    let mut files = json!({
        "APP.md": format!(
            "---\nid: habits\nname: Habits\ndescription: Habits kept each day\nversion: 0.1.0\ntheme: none\n\
             capabilities:\n  data: read-write\ntables:\n  habits:\n{manifest_table}---\n# Habits\n\nEach person's habits.\n"
        ),
        "index.html": "<!doctype html>\n<html lang=\"en\">\n<head>\n  <meta charset=\"utf-8\">\n  <title>Habits</title>\n  <link rel=\"stylesheet\" href=\"styles.css\">\n</head>\n<body>\n  <main><h1>Habits</h1></main>\n  <script src=\"app.js\"></script>\n</body>\n</html>\n",
        "styles.css": "main { padding: 1rem; }\n",
        "app.js": "document.querySelector('h1').textContent = 'Habits';\n",
        "schema.sql": schema,
        "migrations/001-initial.sql": schema,
    });
    for (path, content) in extra {
        files[*path] = json!(content);
    }
    files
}

#[tokio::test]
async fn a_member_app_never_lets_its_author_read_other_peoples_rows() {
    let fake = Arc::new(FakeData::default());
    let world = World::with_data(fake.clone()).await;
    let mia = world.page(&world.member);
    let deploy = |files: Value| {
        mia.call(
            "POST",
            "/api/member-apps",
            json!({"name": "Habits", "files": files}),
        )
    };

    // Declared from the start: refused, nothing stored.
    let (status, refused) = deploy(member_files(MANAGERS_READ_ALL, &[])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(
        refused["details"]["diagnostics"][0]["code"],
        crate::member_apps::MEMBER_TABLE_MANAGERS_READ_ALL
    );
    assert!(world.store().member_apps(None).unwrap().is_empty());

    let (status, created) = deploy(member_files(OWNED, &[])).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let revision = created["app"]["revision"].as_str().unwrap().to_owned();
    let id = created["app"]["id"].as_str().unwrap().to_owned();
    fake.put_rows(&id, "habits");
    let path = format!("/api/member-apps/{id}");
    let redeploy = |files: Value| {
        mia.call(
            "PUT",
            &path,
            json!({"files": files, "expectedRevision": revision, "name": "Habits"}),
        )
    };

    // Added on a redeploy over colleagues' rows: refused.
    let (status, refused) = redeploy(member_files(MANAGERS_READ_ALL, &[])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(
        refused["details"]["diagnostics"][0]["code"],
        crate::member_apps::MEMBER_TABLE_MANAGERS_READ_ALL
    );
    // A migration handing every row to someone: refused by the validator.
    let (status, refused) = redeploy(member_files(
        OWNED,
        &[("migrations/002-grab.sql", &GRAB.replace("items", "habits"))],
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(
        refused["details"]["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["code"] == "SQL_OWNER_COLUMN"),
        "{refused}"
    );
    // Scoped by another column: refused as never allowed in a member app.
    let other_owner = "CREATE TABLE habits (\n  id INTEGER PRIMARY KEY,\n  title TEXT NOT NULL,\n  created_by TEXT NOT NULL,\n  grab TEXT\n);\n";
    let (status, refused) = redeploy(member_files(
        "    access: owner\n    ownerField: grab\n",
        &[
            ("schema.sql", other_owner),
            (
                "migrations/002-grab.sql",
                "ALTER TABLE habits ADD COLUMN grab TEXT;\n",
            ),
        ],
    ))
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["code"], "APP_ACCESS_DENIED");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("never allowed in a member app"),
        "{refused}"
    );
    assert_eq!(codes(refused.get("details")), [DATA_READ_WIDENED]);
    // None of it reached the app.
    assert_eq!(
        world.store().member_app(&id).unwrap().unwrap().revision,
        revision
    );
}
