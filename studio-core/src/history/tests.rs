//! The history tools in process: listing, reading, diffing and reverting
//! through the RPC on a real core database and docs tree in a temporary
//! folder, the refusal matrix, the atomic swap and the diff's bound.
//! data-worker is absent (its client points at a closed port): a data app's
//! revert then fails closed; the migration refusal itself is tested end to
//! end in `tests/process/mcp_history.rs`.

use sasha_proto::pb::{self, history_reply, history_request};
use sasha_proto::{AppError, ErrorCode};

use super::*;
use crate::test_world::{WRITER, World};
use studio_store::{PrincipalKind, RevisionSurface, UserRole, history_action};

impl World {
    /// writeAppFile as the staff user; the new revision.
    async fn write(&self, id: &str, path: &str, content: &str) -> String {
        let tree = self.core.source.clone();
        let expected = tree.read(id, path).ok().map(|file| file.version);
        let mut arguments = serde_json::json!({"app": id, "path": path, "content": content});
        if let Some(expected) = expected {
            arguments["expectedVersion"] = expected.into();
        }
        let reply = crate::grpc::calls::source_files(
            &self.core,
            Some(&self.writer()),
            "writeAppFile",
            id,
            &arguments.to_string(),
        )
        .await
        .unwrap();
        let status = reply.status.unwrap();
        assert!(status.ok, "{status:?}");
        status.revision.unwrap()
    }

    async fn call(
        &self,
        principal: Option<pb::Principal>,
        app: &str,
        operation: history_request::Operation,
    ) -> Result<history_reply::Result, AppError> {
        crate::grpc::calls::history(
            &self.core,
            pb::HistoryRequest {
                principal,
                app_id: app.to_owned(),
                operation: Some(operation),
            },
        )
        .await
        .map(|reply| {
            assert_eq!(reply.app, app);
            reply.result.unwrap()
        })
    }

    async fn list(&self, app: &str) -> Vec<pb::HistoryRevision> {
        match self
            .call(
                Some(self.writer()),
                app,
                history_request::Operation::List(pb::HistoryListRequest {}),
            )
            .await
            .unwrap()
        {
            history_reply::Result::Revisions(list) => list.revisions,
            other => panic!("{other:?}"),
        }
    }

    async fn read(
        &self,
        app: &str,
        revision: &str,
        path: &str,
    ) -> Result<pb::HistoryFile, AppError> {
        self.call(
            Some(self.writer()),
            app,
            history_request::Operation::Read(pb::HistoryReadRequest {
                revision: revision.to_owned(),
                path: path.to_owned(),
            }),
        )
        .await
        .map(|result| match result {
            history_reply::Result::File(file) => file,
            other => panic!("{other:?}"),
        })
    }

    async fn diff(&self, app: &str, from: &str, to: &str) -> Result<pb::HistoryDiff, AppError> {
        self.call(
            Some(self.writer()),
            app,
            history_request::Operation::Diff(pb::HistoryDiffRequest {
                from: from.to_owned(),
                to: to.to_owned(),
            }),
        )
        .await
        .map(|result| match result {
            history_reply::Result::Diff(diff) => diff,
            other => panic!("{other:?}"),
        })
    }

    async fn revert(
        &self,
        app: &str,
        revision: &str,
        expected: &str,
    ) -> Result<pb::HistoryReverted, AppError> {
        self.call(
            Some(self.writer()),
            app,
            history_request::Operation::Revert(pb::HistoryRevertRequest {
                revision: revision.to_owned(),
                expected_revision: expected.to_owned(),
            }),
        )
        .await
        .map(|result| match result {
            history_reply::Result::Reverted(reverted) => reverted,
            other => panic!("{other:?}"),
        })
    }
}

#[tokio::test]
async fn list_read_diff_and_revert_a_package() {
    let world = World::new();
    let first = world.create_as_admin("notes", false).await;
    let first_styles = std::fs::read_to_string(world.apps().join("notes/styles.css")).unwrap();
    let second = world
        .write(
            "notes",
            "styles.css",
            &format!("{first_styles}\n/* two */\n"),
        )
        .await;
    let third = world.write("notes", "extra.md", "# Extra\n").await;
    assert_ne!(first, second);

    // Newest first, the current marked, authors named.
    let revisions = world.list("notes").await;
    let listed: Vec<&str> = revisions.iter().map(|r| r.revision.as_str()).collect();
    assert_eq!(listed, [third.as_str(), second.as_str(), first.as_str()]);
    assert!(revisions[0].current && !revisions[1].current && !revisions[2].current);
    assert_eq!(revisions[0].summary, "writeAppFile extra.md");
    assert_eq!(revisions[0].username.as_deref(), Some("sam"));
    assert_eq!(revisions[0].surface, "mcp");
    assert_eq!(revisions[2].summary, "createApp notes");
    assert_eq!(revisions[2].username.as_deref(), Some("ada"));
    assert_eq!(
        revisions[2].uri,
        format!("ui://sasha/apps/notes/revisions/{first}")
    );
    assert!(revisions[2].files >= 4 && revisions[2].bytes > 0);

    // A file at the first revision.
    let file = world.read("notes", &first, "styles.css").await.unwrap();
    assert_eq!(file.content, first_styles);
    assert_eq!(file.bytes, first_styles.len() as u64);
    assert_eq!(file.encoding, None);
    let missing = world.read("notes", &first, "extra.md").await.unwrap_err();
    assert_eq!(missing.code, ErrorCode::RecordNotFound);
    let bad = world
        .read("notes", &first, "../etc/passwd")
        .await
        .unwrap_err();
    assert_eq!(bad.code, ErrorCode::InputInvalid);
    let hidden = world.read("notes", &first, ".secret.md").await.unwrap_err();
    assert_eq!(hidden.code, ErrorCode::InputInvalid, "{hidden:?}");

    // first → third: one changed text file with its diff, one added.
    let diff = world.diff("notes", &first, &third).await.unwrap();
    assert!(!diff.truncated);
    let changes: Vec<(&str, &str)> = diff
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.change.as_str()))
        .collect();
    assert_eq!(changes, [("extra.md", "added"), ("styles.css", "changed")]);
    let unified = diff.files[1].unified.as_deref().unwrap();
    assert!(unified.contains("+/* two */"), "{unified}");
    assert!(unified.starts_with(&format!("--- {first}/styles.css\n+++ {third}/styles.css\n")));
    let back = world.diff("notes", &third, &first).await.unwrap();
    assert_eq!(back.files[0].change, "removed");

    // Revert to the first with the current revision expected.
    let reverted = world.revert("notes", &first, &third).await.unwrap();
    assert_eq!(reverted.revision, first);
    assert_eq!(reverted.previous_revision, third);
    let status = reverted.status.unwrap();
    assert!(status.ok, "{status:?}");
    assert_eq!(status.revision.as_deref(), Some(first.as_str()));
    assert_eq!(
        std::fs::read_to_string(world.apps().join("notes/styles.css")).unwrap(),
        first_styles
    );
    assert!(!world.apps().join("notes/extra.md").exists());
    // Nothing is left in the staging folder.
    let staging = world.dir.path().join("docs").join(SWAP_STAGING_DIR);
    assert_eq!(std::fs::read_dir(&staging).unwrap().count(), 0);
    // The live resource is the first revision's, byte for byte.
    let live = crate::ledger::resource(&world.core, "notes", &first)
        .await
        .unwrap();
    let recorded = world
        .core
        .store
        .revision_resource("notes", &first)
        .unwrap()
        .unwrap();
    assert_eq!(live.html, recorded.html);
    assert_eq!(
        world
            .core
            .store
            .registered_app("notes")
            .unwrap()
            .unwrap()
            .current_revision,
        first
    );
    // Listed as current again, its first author kept.
    let revisions = world.list("notes").await;
    let now: Vec<&pb::HistoryRevision> = revisions.iter().filter(|r| r.current).collect();
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].revision, first);
    assert_eq!(now[0].username.as_deref(), Some("ada"));
    // Audited as the user's revert.
    let audit = world.core.store.audit_entries(Some("notes")).unwrap();
    let entry = audit
        .iter()
        .find(|entry| entry.action == history_action::APP_REVERTED)
        .unwrap();
    assert_eq!(entry.actor, world.staff.id);
    assert_eq!(entry.before.as_deref(), Some(third.as_str()));
    assert_eq!(entry.after.as_deref(), Some(first.as_str()));

    // The old third revision is still there to go forward to again.
    let forward = world.revert("notes", &third, &first).await.unwrap();
    assert_eq!(
        forward.status.unwrap().revision.as_deref(),
        Some(third.as_str())
    );
    assert!(world.apps().join("notes/extra.md").exists());
}

#[tokio::test]
async fn the_refusal_matrix() {
    let world = World::new();
    let first = world.create_as_admin("notes", false).await;
    let styles = std::fs::read_to_string(world.apps().join("notes/styles.css")).unwrap();
    let second = world
        .write("notes", "styles.css", &format!("{styles}\n/* two */\n"))
        .await;
    let list = || history_request::Operation::List(pb::HistoryListRequest {});

    // Who: no principal, a member, missing scopes, an API key, an unknown app.
    let error = world.call(None, "notes", list()).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::Unauthenticated);
    for principal in [
        World::principal(&world.member, &WRITER),
        World::principal(&world.staff, &["apps:invoke"]),
        World::principal(&world.staff, &["apps:write"]),
        World::as_kind(world.writer(), PrincipalKind::ApiKey),
        // A role the principal claims but the store no longer holds.
        World::claiming(World::principal(&world.member, &WRITER), UserRole::Admin),
    ] {
        let error = world
            .call(Some(principal.clone()), "notes", list())
            .await
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::AccessDenied, "{principal:?}");
    }
    let unknown = world
        .call(Some(world.writer()), "nothing-here", list())
        .await
        .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::AccessDenied);
    let bad_id = world
        .call(Some(world.writer()), "Bad_Id", list())
        .await
        .unwrap_err();
    assert_eq!(bad_id.code, ErrorCode::InputInvalid);
    let none = crate::grpc::calls::history(
        &world.core,
        pb::HistoryRequest {
            principal: Some(world.writer()),
            app_id: "notes".to_owned(),
            operation: None,
        },
    )
    .await
    .unwrap_err();
    assert_eq!(none.code, ErrorCode::InputInvalid);

    // Revisions: malformed, unknown (hidden), and pruned (unavailable).
    let malformed = world.read("notes", "abc", "styles.css").await.unwrap_err();
    assert_eq!(malformed.code, ErrorCode::InputInvalid);
    let unknown = "0".repeat(64);
    for error in [
        world
            .read("notes", &unknown, "styles.css")
            .await
            .unwrap_err(),
        world.diff("notes", &first, &unknown).await.unwrap_err(),
        world.revert("notes", &unknown, &second).await.unwrap_err(),
    ] {
        assert_eq!(error.code, ErrorCode::NotFound, "{error:?}");
    }
    let upper = world
        .diff("notes", &first.to_uppercase(), &second)
        .await
        .unwrap_err();
    assert_eq!(upper.code, ErrorCode::InputInvalid);
    let third = world.write("notes", "extra.md", "# Extra\n").await;
    assert_eq!(world.core.store.prune_revisions(1).unwrap(), 2);
    for error in [
        world.read("notes", &first, "styles.css").await.unwrap_err(),
        world.diff("notes", &first, &third).await.unwrap_err(),
        world.revert("notes", &first, &third).await.unwrap_err(),
    ] {
        assert_eq!(error.code, ErrorCode::RevisionUnavailable, "{error:?}");
    }

    // A stale expectedRevision: refused, nothing changes.
    let fourth = world.write("notes", "extra.md", "# Extra 2\n").await;
    let stale = world.revert("notes", &third, &third).await.unwrap_err();
    assert_eq!(stale.code, ErrorCode::Conflict);
    let details = stale.details.unwrap();
    assert_eq!(details["reason"], "stale-revision");
    assert_eq!(details["currentRevision"], fourth.as_str());
    assert_eq!(
        std::fs::read_to_string(world.apps().join("notes/extra.md")).unwrap(),
        "# Extra 2\n"
    );
    assert!(
        !world
            .core
            .store
            .audit_entries(Some("notes"))
            .unwrap()
            .iter()
            .any(|entry| entry.action == history_action::APP_REVERTED)
    );
    // A member's revert is refused before anything is looked at.
    let member = world
        .call(
            Some(World::principal(&world.member, &WRITER)),
            "notes",
            history_request::Operation::Revert(pb::HistoryRevertRequest {
                revision: third.clone(),
                expected_revision: fourth.clone(),
            }),
        )
        .await
        .unwrap_err();
    assert_eq!(member.code, ErrorCode::AccessDenied);
}

/// A data app's revert asks data-worker for drift first; without an answer
/// it is refused and the package is untouched.
#[tokio::test]
async fn a_data_app_revert_fails_closed_without_data_worker() {
    let world = World::new();
    let first = world.create_as_admin("tasks", true).await;
    let styles = std::fs::read_to_string(world.apps().join("tasks/styles.css")).unwrap();
    // Changed on disk (a data app's source write asks data-worker first).
    std::fs::write(
        world.apps().join("tasks/styles.css"),
        format!("{styles}\n/* 2 */\n"),
    )
    .unwrap();
    crate::registry::refresh_catalogue(&world.core).await;
    let current = world
        .core
        .store
        .registered_app("tasks")
        .unwrap()
        .unwrap()
        .current_revision;
    assert_ne!(current, first);
    let error = world.revert("tasks", &first, &current).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::NotReady, "{error:?}");
    assert!(
        std::fs::read_to_string(world.apps().join("tasks/styles.css"))
            .unwrap()
            .ends_with("/* 2 */\n")
    );
}

#[test]
fn the_swap_replaces_the_whole_folder_and_cleans_up_leftovers() {
    let dir = tempfile::tempdir().unwrap();
    let apps = dir.path().join("apps");
    let staging = dir.path().join(SWAP_STAGING_DIR);
    std::fs::create_dir_all(apps.join("notes/old")).unwrap();
    std::fs::write(apps.join("notes/old/gone.md"), "x").unwrap();
    std::fs::write(apps.join("notes/APP.md"), "old").unwrap();
    // An interrupted revert's leftover.
    std::fs::create_dir_all(staging.join("notes-0000/notes")).unwrap();
    let files: BTreeMap<String, Vec<u8>> = [
        ("APP.md".to_owned(), b"new".to_vec()),
        ("deep/er/file.md".to_owned(), b"deep".to_vec()),
    ]
    .into();
    swap_package(&apps, &staging, "notes", &files).unwrap();
    assert_eq!(std::fs::read(apps.join("notes/APP.md")).unwrap(), b"new");
    assert_eq!(
        std::fs::read(apps.join("notes/deep/er/file.md")).unwrap(),
        b"deep"
    );
    assert!(!apps.join("notes/old").exists());
    assert_eq!(std::fs::read_dir(&staging).unwrap().count(), 0);
    // A package folder that is gone is put back.
    std::fs::remove_dir_all(apps.join("notes")).unwrap();
    swap_package(&apps, &staging, "notes", &files).unwrap();
    assert_eq!(std::fs::read(apps.join("notes/APP.md")).unwrap(), b"new");
    // A path that is not plain is refused and the package stays.
    let bad: BTreeMap<String, Vec<u8>> = [("../escape.md".to_owned(), b"x".to_vec())].into();
    assert!(swap_package(&apps, &staging, "notes", &bad).is_err());
    assert_eq!(std::fs::read(apps.join("notes/APP.md")).unwrap(), b"new");
    assert!(!dir.path().join("escape.md").exists());
}

fn entry(path: &str, bytes: &[u8]) -> (RevisionFile, Vec<u8>) {
    (
        RevisionFile {
            path: path.to_owned(),
            sha256: hex::encode(sha2::Sha256::digest(bytes)),
            size: bytes.len() as i64,
        },
        bytes.to_vec(),
    )
}

#[test]
fn the_diff_is_bounded_and_says_when_it_was_cut() {
    let big_a: String = (0..3_000).map(|n| format!("{n:0>99}\n")).collect();
    let big_b: String = (0..3_000).map(|n| format!("{n:x>99}\n")).collect();
    let before = [
        entry("a.md", big_a.as_bytes()),
        entry("b.md", b"one\n"),
        entry("logo.png", b"\x89PNG1"),
        entry("same.md", b"same\n"),
    ];
    let after = [
        entry("a.md", big_b.as_bytes()),
        entry("b.md", b"two\n"),
        entry("logo.png", b"\x89PNG2"),
        entry("same.md", b"same\n"),
    ];
    let diff = diff_files("f", "t", &before, &after);
    assert!(diff.truncated);
    let by_path: BTreeMap<&str, &crate::diff::FileChange> =
        diff.files.iter().map(|f| (f.path.as_str(), f)).collect();
    assert!(!by_path.contains_key("same.md"));
    assert!(by_path["a.md"].truncated && by_path["a.md"].unified.is_none());
    assert!(
        by_path["b.md"]
            .unified
            .as_deref()
            .unwrap()
            .contains("-one\n+two\n")
    );
    assert!(by_path["logo.png"].binary && by_path["logo.png"].unified.is_none());
    assert!(!by_path["logo.png"].truncated);
    let total: usize = diff
        .files
        .iter()
        .filter_map(|f| f.unified.as_ref().map(String::len))
        .sum();
    assert!(total <= crate::diff::MAX_DIFF_BYTES);
    let _ = RevisionSurface::Mcp;
}
