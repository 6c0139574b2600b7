//! Two replicas on one core database, each with a `DOCS_ROOT` of its own (as
//! on two nodes with no shared disk), on SQLite and on PostgreSQL: a source
//! tool's change, a revert and a new package made through one are served by
//! the other once it follows (every second in a running replica), and a
//! change that loses to another replica's is refused, never silently lost.

use std::sync::Arc;

use sasha_proto::pb::{self, history_reply, history_request};
use sasha_proto::{AppError, ErrorCode};

use crate::state::Core;
use crate::test_world::{World, on_both_databases};

/// writeAppFile through `core` as the world's staff writer, expecting the
/// version it reads there; the answer's revision.
async fn write(
    world: &World,
    core: &Arc<Core>,
    path: &str,
    content: &str,
) -> Result<String, AppError> {
    let expected = core
        .source
        .read("notes", path)
        .ok()
        .map(|file| file.version);
    let mut arguments = serde_json::json!({"app": "notes", "path": path, "content": content});
    if let Some(expected) = expected {
        arguments["expectedVersion"] = expected.into();
    }
    let reply = crate::grpc::calls::source_files(
        core,
        Some(&world.writer()),
        "writeAppFile",
        "notes",
        &arguments.to_string(),
    )
    .await?;
    let status = reply.status.unwrap();
    assert!(status.ok, "{status:?}");
    Ok(status.revision.unwrap())
}

/// readAppFile through `core` as the world's staff writer: the content, or
/// `None` when the file does not exist there.
async fn read_through_tools(world: &World, core: &Arc<Core>, path: &str) -> Option<String> {
    let arguments = serde_json::json!({"app": "notes", "path": path});
    match crate::grpc::calls::source_files(
        core,
        Some(&world.writer()),
        "readAppFile",
        "notes",
        &arguments.to_string(),
    )
    .await
    {
        Ok(reply) => Some(reply.content.unwrap_or_default()),
        Err(error) if error.code == ErrorCode::RecordNotFound => None,
        Err(error) => panic!("{error:?}"),
    }
}

fn read(core: &Core, path: &str) -> Option<String> {
    core.source
        .read("notes", path)
        .ok()
        .map(|file| file.content)
}

/// The revision `core`'s catalogue serves for `notes`.
fn served(core: &Core) -> Option<String> {
    core.catalogue
        .current()
        .valid()
        .find(|(id, _)| id.as_str() == "notes")
        .map(|(_, package)| package.resource.revision.clone())
}

/// A world with the app `notes` and a second replica on its core database
/// with a `DOCS_ROOT` of its own (kept by the caller), caught up: the world,
/// that folder, the replica and the audit row it follows from.
async fn two_replicas(
    database: crate::test_world::Database,
) -> (World, tempfile::TempDir, Arc<Core>, i64) {
    let world = World::on(database);
    world.create_as_admin("notes", false).await;
    let docs = tempfile::tempdir().unwrap();
    let other = world.replica_with_docs(docs.path());
    let from = crate::peers::head(world.store()).await.unwrap();
    crate::peers::catch_up(&other, from).await.unwrap();
    (world, docs, other, from)
}

on_both_databases! {
    #[tokio::test]
    async fn replicas_without_a_shared_disk_serve_each_others_package_changes(database) {
        let (world, _docs, other, from) = two_replicas(database).await;
        assert_eq!(served(&other), served(&world.core), "the installed package reached the other disk");

        // A source tool's change through the first is served by the second.
        let revision = write(&world, &world.core, "extra.md", "# From one\n").await.unwrap();
        assert_eq!(read(&other, "extra.md"), None, "not in its folder before it follows");
        // A source tool reading through the second reads it at once.
        assert_eq!(read_through_tools(&world, &other, "extra.md").await.as_deref(), Some("# From one\n"));
        crate::peers::catch_up(&other, from).await.unwrap();
        assert_eq!(read(&other, "extra.md").as_deref(), Some("# From one\n"));
        assert_eq!(served(&other).as_deref(), Some(revision.as_str()));

        // And the other way round, from the version the second now holds.
        let revision = write(&world, &other, "extra.md", "# From two\n").await.unwrap();
        crate::peers::catch_up(&world.core, from).await.unwrap();
        assert_eq!(read(&world.core, "extra.md").as_deref(), Some("# From two\n"));
        assert_eq!(served(&world.core).as_deref(), Some(revision.as_str()));

        // A revert through the first reaches the second whole.
        let first = crate::test_world::off_runtime(|| world.store().revisions("notes"))
            .unwrap()
            .last()
            .unwrap()
            .revision
            .clone();
        let reverted = crate::grpc::calls::history(
            &world.core,
            pb::HistoryRequest {
                principal: Some(world.writer()),
                app_id: "notes".to_owned(),
                operation: Some(history_request::Operation::Revert(pb::HistoryRevertRequest {
                    revision: first.clone(),
                    expected_revision: revision,
                })),
            },
        )
        .await
        .unwrap();
        assert!(matches!(reverted.result, Some(history_reply::Result::Reverted(_))));
        crate::peers::catch_up(&other, from).await.unwrap();
        assert_eq!(read(&other, "extra.md"), None);
        assert_eq!(served(&other).as_deref(), Some(first.as_str()));
    }
}

on_both_databases! {
    #[tokio::test]
    async fn a_change_that_loses_to_another_replicas_is_refused_and_kept_aside(database) {
        let (world, docs, other, from) = two_replicas(database).await;

        // Someone edits the second replica's folder, and before it settles,
        // a change to the same package lands through the first.
        std::fs::write(docs.path().join("apps/notes/local.md"), "# Edited on two\n").unwrap();
        write(&world, &world.core, "extra.md", "# From one\n").await.unwrap();

        // The next change through the second finds both moved: refused.
        let refused = write(&world, &other, "third.md", "# Three\n").await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::Conflict, "{refused:?}");
        assert_eq!(refused.details.as_ref().unwrap()["reason"], "changed-elsewhere");
        // The head won; the losing folder is kept whole, outside the apps.
        assert_eq!(read(&other, "extra.md").as_deref(), Some("# From one\n"));
        assert_eq!(read(&other, "third.md"), None);
        assert_eq!(read(&other, "local.md"), None);
        let kept: Vec<_> = std::fs::read_dir(docs.path().join(crate::package_sync::CONFLICTS_DIR))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        assert_eq!(kept.len(), 1);
        assert_eq!(
            std::fs::read_to_string(kept[0].join("local.md")).unwrap(),
            "# Edited on two\n"
        );
        // Repeated, the change is made on top of the head.
        write(&world, &other, "third.md", "# Three\n").await.unwrap();
        crate::peers::catch_up(&world.core, from).await.unwrap();
        assert_eq!(read(&world.core, "third.md").as_deref(), Some("# Three\n"));
        assert_eq!(read(&world.core, "extra.md").as_deref(), Some("# From one\n"));
    }
}

on_both_databases! {
    #[tokio::test]
    async fn a_replica_started_on_an_empty_disk_serves_every_package(database) {
        let world = World::on(database);
        world.create_as_admin("notes", false).await;
        write(&world, &world.core, "extra.md", "# Kept\n").await.unwrap();
        let docs = tempfile::tempdir().unwrap();
        let fresh = world.replica_with_docs(docs.path());
        // What `serve` does before anything else reads the folder.
        crate::registry::refresh_catalogue(&fresh).await;
        assert_eq!(read(&fresh, "extra.md").as_deref(), Some("# Kept\n"));
        assert_eq!(served(&fresh), served(&world.core));
        assert!(docs.path().join(crate::package_sync::BASES_FILE).exists());
    }
}
