//! Drafts in process: the source tools with `draft: true`, review, publish
//! and discard through the real RPC functions on a real core database and
//! docs tree in a temporary folder, and every refusal. The apps here have no
//! data (data-worker is absent: its client points at a closed port), so the
//! data path (preview scratch data, migrations at publication) is proved end
//! to end in `tests/process/drafts.rs`.

use sasha_proto::pb::{self, draft_reply, draft_request};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};

use super::*;
use crate::previews::preview_package;
use crate::test_world::{WRITER, World, actor_of};
use sasha_contract::data::is_preview_id;
use studio_store::draft_action;

const APP: &str = "notes";

impl World {
    async fn source(
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

    /// writeAppFile on the draft as the staff user (replacing the file when
    /// there is one).
    async fn draft_write(&self, path: &str, content: &str) -> pb::SourceFilesReply {
        let mut arguments = json!({"app": APP, "path": path, "content": content, "draft": true});
        // Before the draft exists, its files are the live package's.
        let version = match self
            .source(
                &self.writer(),
                "readAppFile",
                json!({"app": APP, "path": path, "draft": true}),
            )
            .await
        {
            Ok(read) => read.version,
            Err(_) => self
                .core
                .source
                .read(APP, path)
                .ok()
                .map(|file| file.version),
        };
        if let Some(version) = version {
            arguments["expectedVersion"] = version.into();
        }
        self.source(&self.writer(), "writeAppFile", arguments)
            .await
            .unwrap()
    }

    async fn draft_rpc(
        &self,
        principal: &pb::Principal,
        operation: draft_request::Operation,
    ) -> Result<draft_reply::Result, AppError> {
        crate::grpc::calls::draft(
            &self.core,
            pb::DraftRequest {
                principal: Some(principal.clone()),
                app_id: APP.to_owned(),
                operation: Some(operation),
            },
        )
        .await
        .map(|reply| reply.result.unwrap())
    }

    /// Publishes the draft as it is now (its content hash as a review shows
    /// it; a made-up one when there is no draft).
    async fn publish_as(
        &self,
        principal: &pb::Principal,
        expected: &str,
        approval: pb::DraftApproval,
    ) -> Result<draft_reply::Result, AppError> {
        let reviewed = match self
            .draft_rpc(
                principal,
                draft_request::Operation::Review(pb::DraftReviewRequest {}),
            )
            .await
        {
            Ok(draft_reply::Result::Draft(info)) => info.content_hash,
            _ => "0".repeat(64),
        };
        self.publish_reviewed(principal, expected, &reviewed, approval)
            .await
    }

    /// Publishes the draft whose review showed `content_hash`.
    async fn publish_reviewed(
        &self,
        principal: &pb::Principal,
        expected: &str,
        content_hash: &str,
        approval: pb::DraftApproval,
    ) -> Result<draft_reply::Result, AppError> {
        self.draft_rpc(
            principal,
            draft_request::Operation::Publish(pb::DraftPublishRequest {
                expected_revision: expected.to_owned(),
                approval: approval as i32,
                content_hash: content_hash.to_owned(),
            }),
        )
        .await
    }

    fn live_file(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.apps().join(APP).join(path)).ok()
    }

    fn audited(&self, action: &str) -> usize {
        self.store()
            .audit_entries(Some(APP))
            .unwrap()
            .iter()
            .filter(|entry| entry.action == action)
            .count()
    }
}

fn index_html(text: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Notes</title>\
         <link rel=\"stylesheet\" href=\"styles.css\"></head><body><main><h1>{text}</h1></main>\
         <script src=\"app.js\"></script></body></html>\n"
    )
}

#[tokio::test]
async fn a_draft_write_starts_a_draft_and_leaves_the_live_app_alone() {
    let world = World::new();
    let first = world.create_as_admin(APP, false).await;
    let live_before = world.live_file("index.html").unwrap();

    let reply = world
        .draft_write("index.html", &index_html("Draft notes"))
        .await;
    let draft = reply.draft.expect("a draft reply names its draft");
    assert_eq!(draft.base_revision, first);
    assert_eq!(draft.live_revision, first);
    assert!(is_preview_id(&draft.preview_id));
    let status = reply.status.unwrap();
    assert!(status.ok, "{status:?}");
    assert_ne!(status.revision.as_deref(), Some(first.as_str()));
    assert_eq!(draft.changes.len(), 1);
    assert_eq!(draft.changes[0].path, "index.html");
    assert_eq!(draft.changes[0].change, "changed");

    // The live package, its catalogue entry and its revision are unchanged.
    assert_eq!(world.live_file("index.html").unwrap(), live_before);
    let live = world
        .source(&world.writer(), "checkApp", json!({"app": APP}))
        .await
        .unwrap();
    assert_eq!(
        live.status.unwrap().revision.as_deref(),
        Some(first.as_str())
    );
    assert!(live.draft.is_none());

    // The draft reads back what was written; list shows every file.
    let read = world
        .source(
            &world.writer(),
            "readAppFile",
            json!({"app": APP, "path": "index.html", "draft": true}),
        )
        .await
        .unwrap();
    assert!(read.content.unwrap().contains("Draft notes"));
    let listed = world
        .source(
            &world.writer(),
            "listAppFiles",
            json!({"app": APP, "draft": true}),
        )
        .await
        .unwrap();
    assert!(listed.files.iter().any(|file| file.path == "APP.md"));
    assert!(listed.files.iter().all(|file| file.editable));
    assert_eq!(world.audited(draft_action::DRAFT_STARTED), 1);
    assert_eq!(world.audited(draft_action::DRAFT_CHANGED), 1);

    // A second write goes to the same draft.
    let again = world.draft_write("notes.md", "# Notes\n").await;
    let again = again.draft.unwrap();
    assert_eq!(again.preview_id, draft.preview_id);
    assert_eq!(again.changes.len(), 2);
    assert!(world.live_file("notes.md").is_none());
}

/// An edit or a delete with `draft: true` starts the draft from the live app
/// as a write does (the refusal a reader gets says so), and the live app
/// stays as it was.
#[tokio::test]
async fn an_edit_or_a_delete_starts_the_draft_too() {
    for operation in ["editAppFile", "deleteAppFile"] {
        let world = World::new();
        world.create_as_admin(APP, false).await;
        let live_before = world.live_file("app.js").unwrap();
        let version = world
            .source(
                &world.writer(),
                "readAppFile",
                json!({"app": APP, "path": "app.js"}),
            )
            .await
            .unwrap()
            .version
            .unwrap();
        let mut arguments =
            json!({"app": APP, "path": "app.js", "draft": true, "expectedVersion": version});
        if operation == "editAppFile" {
            arguments["oldString"] = live_before.lines().next().unwrap().into();
            arguments["newString"] = "// drafted".into();
        }
        let reply = world
            .source(&world.writer(), operation, arguments)
            .await
            .unwrap_or_else(|error| panic!("{operation}: {error:?}"));
        let draft = reply.draft.expect("the change names its draft");
        assert_eq!(draft.changes.len(), 1, "{operation}");
        assert_eq!(draft.changes[0].path, "app.js", "{operation}");
        assert_eq!(world.live_file("app.js").unwrap(), live_before);
        assert_eq!(world.audited(draft_action::DRAFT_STARTED), 1, "{operation}");
    }
}

#[tokio::test]
async fn draft_changes_follow_the_source_tools_rules() {
    let world = World::new();
    world.create_as_admin(APP, false).await;
    let writer = world.writer();
    world.draft_write("notes.md", "one\n").await;
    let read = world
        .source(
            &writer,
            "readAppFile",
            json!({"app": APP, "path": "notes.md", "draft": true}),
        )
        .await
        .unwrap();
    let version = read.version.unwrap();

    // A write over an existing file without its version, or with a stale one.
    let refused = world
        .source(
            &writer,
            "writeAppFile",
            json!({"app": APP, "path": "notes.md", "content": "x", "draft": true}),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Conflict, "{refused:?}");
    let stale = world
        .source(&writer, "writeAppFile", json!({"app": APP, "path": "notes.md", "content": "x", "draft": true, "expectedVersion": "0".repeat(64)}))
        .await
        .unwrap_err();
    assert_eq!(stale.code, ErrorCode::Conflict);
    // A name that differs only by case from one of the draft's.
    let collision = world
        .source(
            &writer,
            "writeAppFile",
            json!({"app": APP, "path": "NOTES.md", "content": "x", "draft": true}),
        )
        .await
        .unwrap_err();
    assert_eq!(collision.code, ErrorCode::Conflict);
    assert!(
        collision.message.contains("collides"),
        "{}",
        collision.message
    );
    // A path the rules refuse.
    let traversal = world
        .source(
            &writer,
            "writeAppFile",
            json!({"app": APP, "path": "../x.md", "content": "x", "draft": true}),
        )
        .await
        .unwrap_err();
    assert_eq!(traversal.code, ErrorCode::InputInvalid);

    // editAppFile needs exactly one match, then changes only the draft.
    let none = world
        .source(&writer, "editAppFile", json!({"app": APP, "path": "notes.md", "oldString": "two", "newString": "2", "expectedVersion": version, "draft": true}))
        .await
        .unwrap_err();
    assert!(none.message.contains("matched 0 times"), "{}", none.message);
    let edited = world
        .source(&writer, "editAppFile", json!({"app": APP, "path": "notes.md", "oldString": "one", "newString": "uno", "expectedVersion": version, "draft": true}))
        .await
        .unwrap();
    assert_eq!(edited.previous_version.as_deref(), Some(version.as_str()));

    // APP.md cannot be deleted; another file can, with its version.
    let manifest = world
        .source(
            &writer,
            "readAppFile",
            json!({"app": APP, "path": "APP.md", "draft": true}),
        )
        .await
        .unwrap();
    let refused = world
        .source(&writer, "deleteAppFile", json!({"app": APP, "path": "APP.md", "expectedVersion": manifest.version.unwrap(), "draft": true}))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InputInvalid);
    let deleted = world
        .source(&writer, "deleteAppFile", json!({"app": APP, "path": "notes.md", "expectedVersion": edited.version.unwrap(), "draft": true}))
        .await
        .unwrap();
    assert!(deleted.version.is_none());
    let gone = world
        .source(
            &writer,
            "readAppFile",
            json!({"app": APP, "path": "notes.md", "draft": true}),
        )
        .await
        .unwrap_err();
    assert_eq!(gone.code, ErrorCode::RecordNotFound);
    // `draft` is not a string.
    let typed = world
        .source(&writer, "checkApp", json!({"app": APP, "draft": "yes"}))
        .await
        .unwrap_err();
    assert_eq!(typed.code, ErrorCode::InputInvalid);
}

#[tokio::test]
async fn who_may_work_on_drafts() {
    let world = World::new();
    world.create_as_admin(APP, false).await;
    let member = World::principal(&world.member, &WRITER);
    let no_write = World::principal(&world.staff, &["chat:use", "apps:invoke"]);
    for principal in [&member, &no_write] {
        let refused = world
            .source(
                principal,
                "writeAppFile",
                json!({"app": APP, "path": "x.md", "content": "x", "draft": true}),
            )
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::AccessDenied);
        let refused = world
            .draft_rpc(
                principal,
                draft_request::Operation::Review(pb::DraftReviewRequest {}),
            )
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::AccessDenied);
    }
    // A draft of an app that does not exist is the same refusal.
    let unknown = world
        .source(
            &world.writer(),
            "writeAppFile",
            json!({"app": "nope", "path": "x.md", "content": "x", "draft": true}),
        )
        .await
        .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::AccessDenied);
    // Reading, checking, publishing or discarding a draft never started.
    for operation in ["readAppFile", "listAppFiles", "checkApp"] {
        let mut arguments = json!({"app": APP, "draft": true});
        if operation == "readAppFile" {
            arguments["path"] = "APP.md".into();
        }
        let none = world
            .source(&world.writer(), operation, arguments)
            .await
            .unwrap_err();
        assert_eq!(none.code, ErrorCode::RecordNotFound, "{operation}");
        assert_eq!(
            none.details.unwrap()["cause"],
            "DRAFT_NOT_FOUND",
            "{operation}"
        );
    }
    let discard = world
        .draft_rpc(
            &world.writer(),
            draft_request::Operation::Discard(pb::DraftDiscardRequest {}),
        )
        .await
        .unwrap_err();
    assert_eq!(discard.details.unwrap()["cause"], "DRAFT_NOT_FOUND");
    let publish = world
        .publish_as(&world.writer(), "", pb::DraftApproval::Elicitation)
        .await
        .unwrap_err();
    assert_eq!(publish.details.unwrap()["cause"], "DRAFT_NOT_FOUND");
}

#[tokio::test]
async fn publishing_needs_approval_then_makes_the_draft_live() {
    let world = World::new();
    let first = world.create_as_admin(APP, false).await;
    let reply = world
        .draft_write("index.html", &index_html("Published notes"))
        .await;
    let draft_revision = reply.status.unwrap().revision.unwrap();
    let writer = world.writer();

    // Without a person's approval: refused, with what they would be asked.
    let refused = world
        .publish_as(&writer, &first, pb::DraftApproval::Unspecified)
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::ConfirmationRequired);
    let summary = refused.details.unwrap()["summary"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(summary.contains("changed index.html"), "{summary}");
    assert!(summary.contains("every user"), "{summary}");
    assert!(
        !world
            .live_file("index.html")
            .unwrap()
            .contains("Published notes")
    );

    // A wrong expectedRevision is a conflict naming the draft's base.
    let wrong = world
        .publish_as(&writer, &"0".repeat(64), pb::DraftApproval::Elicitation)
        .await
        .unwrap_err();
    assert_eq!(wrong.code, ErrorCode::Conflict);
    assert_eq!(
        wrong.details.unwrap()["diagnostics"][0]["code"],
        "DRAFT_BASE_MOVED"
    );

    let published = match world
        .publish_as(&writer, &first, pb::DraftApproval::Elicitation)
        .await
        .unwrap()
    {
        draft_reply::Result::Published(published) => published,
        other => panic!("{other:?}"),
    };
    assert_eq!(published.revision, draft_revision);
    assert_eq!(published.previous_revision, first);
    assert!(published.migrations_applied.is_empty());
    assert_eq!(
        published.status.unwrap().revision.as_deref(),
        Some(draft_revision.as_str())
    );
    assert!(
        world
            .live_file("index.html")
            .unwrap()
            .contains("Published notes")
    );
    // The draft is gone, the publication audited and in the ledger.
    assert!(world.store().draft(APP).unwrap().is_none());
    assert_eq!(world.audited(draft_action::DRAFT_PUBLISHED), 1);
    let revisions = world.store().revisions(APP).unwrap();
    let newest = revisions.first().unwrap();
    assert_eq!(newest.revision, draft_revision);
    assert_eq!(newest.user_id.as_deref(), Some(world.staff.id.as_str()));
    assert!(
        newest.summary.starts_with("publishAppDraft"),
        "{}",
        newest.summary
    );
    // Publishing again: there is no draft any more.
    let again = world
        .publish_as(&writer, &first, pb::DraftApproval::Elicitation)
        .await
        .unwrap_err();
    assert_eq!(again.code, ErrorCode::RecordNotFound);
}

#[tokio::test]
async fn a_draft_changed_after_its_review_is_not_published() {
    let world = World::new();
    let first = world.create_as_admin(APP, false).await;
    world
        .draft_write("index.html", &index_html("Reviewed notes"))
        .await;
    let admin = World::principal(&world.admin, &WRITER);
    let review = |principal: pb::Principal| {
        let world = &world;
        async move {
            match world
                .draft_rpc(
                    &principal,
                    draft_request::Operation::Review(pb::DraftReviewRequest {}),
                )
                .await
                .unwrap()
            {
                draft_reply::Result::Draft(info) => info,
                other => panic!("{other:?}"),
            }
        }
    };
    let reviewed = review(admin.clone()).await;
    assert!(sasha_contract::data::is_sha256_hex(&reviewed.content_hash));
    // Every way of reading the draft names the same state.
    let checked = world
        .source(
            &world.writer(),
            "checkApp",
            json!({"app": APP, "draft": true}),
        )
        .await
        .unwrap();
    assert_eq!(checked.draft.unwrap().content_hash, reviewed.content_hash);

    // After the admin's review, the staff member changes the draft.
    world
        .draft_write("app.js", "document.title = \"after the review\";\n")
        .await;
    let changed = review(admin.clone()).await;
    assert_ne!(changed.content_hash, reviewed.content_hash);

    // Publishing what was reviewed is refused, before and after the
    // person's yes, and nothing goes live.
    for approval in [
        pb::DraftApproval::Unspecified,
        pb::DraftApproval::Elicitation,
    ] {
        let refused = world
            .publish_reviewed(&admin, &first, &reviewed.content_hash, approval)
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::Conflict, "{approval:?}");
        assert!(
            refused.message.contains("changed since you reviewed it"),
            "{}",
            refused.message
        );
        let details = refused.details.unwrap();
        assert_eq!(details["cause"], "DRAFT_CHANGED");
        assert_eq!(details["contentHash"], changed.content_hash.as_str());
        assert_eq!(
            details["reviewedContentHash"],
            reviewed.content_hash.as_str()
        );
    }
    assert!(
        !world
            .live_file("index.html")
            .unwrap()
            .contains("Reviewed notes")
    );
    assert!(
        !world
            .live_file("app.js")
            .unwrap()
            .contains("after the review")
    );
    assert_eq!(world.audited(draft_action::DRAFT_PUBLISHED), 0);
    assert!(
        world.store().draft(APP).unwrap().is_some(),
        "the draft stays"
    );

    // A publication that names no reviewed draft is refused as input.
    for missing in ["", "not a hash", &"A".repeat(64)] {
        let refused = world
            .publish_reviewed(&admin, &first, missing, pb::DraftApproval::Elicitation)
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::InputInvalid, "{missing:?}");
        assert_eq!(refused.details.unwrap()["field"], "contentHash");
    }

    // Reviewed again, the draft as it is now is published.
    world
        .publish_reviewed(
            &admin,
            &first,
            &changed.content_hash,
            pb::DraftApproval::Elicitation,
        )
        .await
        .unwrap();
    assert!(
        world
            .live_file("app.js")
            .unwrap()
            .contains("after the review")
    );
}

#[tokio::test]
async fn a_draft_is_stale_once_the_live_app_moves() {
    let world = World::new();
    let first = world.create_as_admin(APP, false).await;
    world.draft_write("index.html", &index_html("Draft")).await;
    // A live write (no draft) after the draft began.
    let live = world.core.source.read(APP, "styles.css").unwrap();
    world
        .source(&world.writer(), "writeAppFile", json!({"app": APP, "path": "styles.css", "content": "body { margin: 0; }\n", "expectedVersion": live.version}))
        .await
        .unwrap();
    let check = world
        .source(
            &world.writer(),
            "checkApp",
            json!({"app": APP, "draft": true}),
        )
        .await
        .unwrap();
    let draft = check.draft.unwrap();
    assert_ne!(draft.live_revision, draft.base_revision);
    let refused = world
        .publish_as(&world.writer(), &first, pb::DraftApproval::Elicitation)
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Conflict);
    let details = refused.details.unwrap();
    assert_eq!(details["reason"], "stale-revision");
    assert_eq!(details["baseRevision"], first.as_str());
    assert!(
        refused.message.contains("changed since the draft began"),
        "{}",
        refused.message
    );
    assert!(world.live_file("index.html").unwrap().contains("<h1>"));
    assert!(!world.live_file("index.html").unwrap().contains("Draft"));
}

#[tokio::test]
async fn an_invalid_draft_is_not_published_and_a_discarded_one_is_gone() {
    let world = World::new();
    let first = world.create_as_admin(APP, false).await;
    let broken = world.draft_write("app.js", "import x from \"y\";\n").await;
    let status = broken.status.unwrap();
    assert!(!status.ok);
    assert!(!status.diagnostics.is_empty());
    let refused = world
        .publish_as(&world.writer(), &first, pb::DraftApproval::Elicitation)
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InputInvalid);
    assert!(
        refused.details.unwrap()["diagnostics"]
            .as_array()
            .is_some_and(|d| !d.is_empty())
    );

    let discarded = world
        .draft_rpc(
            &world.writer(),
            draft_request::Operation::Discard(pb::DraftDiscardRequest {}),
        )
        .await
        .unwrap();
    assert!(matches!(
        discarded,
        draft_reply::Result::Discarded(pb::DraftDiscarded { discarded: true })
    ));
    assert!(world.store().draft(APP).unwrap().is_none());
    assert_eq!(world.audited(draft_action::DRAFT_DISCARDED), 1);
    // The live app never changed.
    let live = world
        .source(&world.writer(), "checkApp", json!({"app": APP}))
        .await
        .unwrap();
    assert_eq!(
        live.status.unwrap().revision.as_deref(),
        Some(first.as_str())
    );
    // A new draft gets a new preview id.
    let fresh = world.draft_write("notes.md", "x\n").await.draft.unwrap();
    assert!(is_preview_id(&fresh.preview_id));
}

#[tokio::test]
async fn only_a_session_that_manages_the_app_previews_its_draft() {
    let world = World::new();
    world.create_as_admin(APP, false).await;
    let draft = world
        .draft_write("index.html", &index_html("Preview"))
        .await
        .draft
        .unwrap();
    let writer = world.writer();
    let package = preview_package(&world.core, &actor_of(&writer), APP, &draft.preview_id)
        .await
        .expect("the manager previews the draft");
    assert!(package.resource.html.contains("Preview"));
    let member = World::principal(&world.member, &WRITER);
    assert!(
        preview_package(&world.core, &actor_of(&member), APP, &draft.preview_id)
            .await
            .is_none()
    );
    assert!(
        preview_package(&world.core, &actor_of(&writer), APP, &"0".repeat(32))
            .await
            .is_none()
    );
    assert!(
        preview_package(&world.core, &actor_of(&writer), APP, "not-hex")
            .await
            .is_none()
    );
    assert!(
        preview_package(&world.core, &actor_of(&writer), "other", &draft.preview_id)
            .await
            .is_none()
    );
}

#[test]
fn table_changes_name_tables_and_columns() {
    use sasha_contract::data::{Access, Column, Schema, Table, TableDeclaration};
    let column = |name: &str, kind: &str| Column {
        name: name.into(),
        declared_type: kind.into(),
        not_null: false,
        default_value: None,
        primary_key: false,
        generated: false,
    };
    let table = |name: &str, columns: Vec<Column>| Table {
        name: name.into(),
        columns,
        ..Table::default()
    };
    let contract = |tables: Vec<Table>| DataContract {
        schema: Schema {
            tables: tables.iter().map(|t| (t.name.clone(), t.clone())).collect(),
            ..Schema::default()
        },
        migrations: Vec::new(),
        tables: tables
            .iter()
            .map(|t| {
                let shared = TableDeclaration {
                    access: Access::Shared,
                    owner_field: None,
                    write: Default::default(),
                    managers_read_all: false,
                };
                (t.name.clone(), shared)
            })
            .collect(),
        hash: String::new(),
    };
    let before = contract(vec![
        table(
            "items",
            vec![column("id", "INTEGER"), column("title", "TEXT")],
        ),
        table("old", vec![column("id", "INTEGER")]),
    ]);
    let after = contract(vec![
        table(
            "items",
            vec![
                column("id", "INTEGER"),
                column("title", "TEXT"),
                column("note", "TEXT"),
            ],
        ),
        table("fresh", vec![column("id", "INTEGER")]),
    ]);
    let changes = table_changes(Some(&before), Some(&after));
    let summary: Vec<(String, String, Vec<String>)> = changes
        .iter()
        .map(|c| {
            (
                c.table.clone(),
                c.change.clone(),
                c.columns
                    .iter()
                    .map(|col| format!("{} {}", col.change, col.column))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "fresh".to_owned(),
                "added".to_owned(),
                vec!["added id".to_owned()]
            ),
            (
                "items".to_owned(),
                "changed".to_owned(),
                vec!["added note".to_owned()]
            ),
            ("old".to_owned(), "removed".to_owned(), vec![]),
        ]
    );
    assert_eq!(changes[0].declaration.as_deref(), Some("declared"));
    assert_eq!(changes[2].declaration.as_deref(), Some("undeclared"));
    assert!(table_changes(Some(&before), Some(&before)).is_empty());
}
