//! Withdraw, restore and delete in process: the refusal matrix, the
//! catalogue every caller gets while an app is withdrawn, restoring with its
//! grants, deleting the package (not the data) and the audit entries, on a
//! real core database and docs tree in a temporary folder. data-worker is
//! absent (its client points at a closed port); deleting data with the
//! second confirmation is tested end to end in `tests/process/mcp_lifecycle.rs`.

use std::sync::Arc;

use sasha_proto::convert::FromWire;
use sasha_proto::pb::core_service_server::CoreService;
use sasha_proto::pb::{self, AppLifecycleOperation as Op};
use sasha_proto::{AppError, ErrorCode};
use tonic::Request;

use super::*;
use crate::grpc::{CoreGrpc, EntryCache};
use crate::test_world::{WRITER, World};
use studio_store::{AppAccess, PrincipalKind, User, UserRole, lifecycle_action};

impl World {
    /// The `CoreService` over this world's core.
    fn grpc(&self) -> CoreGrpc {
        CoreGrpc {
            core: self.core.clone(),
            entries: Arc::new(EntryCache::default()),
        }
    }

    fn admin(&self) -> pb::Principal {
        World::principal(&self.admin, &WRITER)
    }

    async fn step(
        &self,
        principal: pb::Principal,
        app: &str,
        operation: Op,
    ) -> Result<pb::AppLifecycleReply, AppError> {
        crate::grpc::calls::lifecycle(
            &self.core,
            pb::AppLifecycleRequest {
                principal: Some(principal),
                app_id: app.to_owned(),
                operation: operation as i32,
                ..pb::AppLifecycleRequest::default()
            },
        )
        .await
    }

    async fn delete(
        &self,
        app: &str,
        delete_data: bool,
        confirm: &str,
    ) -> Result<pb::AppLifecycleReply, AppError> {
        crate::grpc::calls::lifecycle(
            &self.core,
            pb::AppLifecycleRequest {
                principal: Some(self.admin()),
                app_id: app.to_owned(),
                operation: Op::Delete as i32,
                delete_data,
                confirm_app_id: confirm.to_owned(),
            },
        )
        .await
    }

    /// The app ids in `user`'s `GetCatalogue`, with their access.
    async fn catalogue(&self, user: &User) -> Vec<(String, String)> {
        let reply = self
            .grpc()
            .get_catalogue(Request::new(pb::CatalogueRequest {
                principal: Some(World::principal(user, &WRITER)),
                ..pb::CatalogueRequest::default()
            }))
            .await
            .unwrap()
            .into_inner();
        reply
            .apps
            .into_iter()
            .map(|app| {
                let access = AppAccess::from_wire(app.access).unwrap();
                (app.id, access.as_str().to_owned())
            })
            .collect()
    }

    async fn list_apps(&self, user: &User) -> Vec<String> {
        let reply = self
            .grpc()
            .list_apps(Request::new(pb::ListAppsRequest {
                principal: Some(World::principal(user, &WRITER)),
            }))
            .await
            .unwrap()
            .into_inner();
        reply.apps.into_iter().map(|app| app.id).collect()
    }

    async fn resource(&self, user: &User, app: &str, revision: &str) -> Result<String, AppError> {
        self.grpc()
            .get_resource(Request::new(pb::GetResourceRequest {
                principal: Some(World::principal(user, &WRITER)),
                app_id: app.to_owned(),
                revision: revision.to_owned(),
            }))
            .await
            .map(|reply| reply.into_inner().uri)
            .map_err(|status| AppError::from_status(&status))
    }

    fn actions(&self, app: &str) -> Vec<(String, String)> {
        self.core
            .store
            .audit_entries(Some(app))
            .unwrap()
            .into_iter()
            .filter(|entry| entry.action.starts_with("app.") && entry.action != "app.registered")
            .map(|entry| (entry.action, entry.actor))
            .collect()
    }
}

fn assert_code(result: Result<pb::AppLifecycleReply, AppError>, code: ErrorCode, text: &str) {
    let error = result.expect_err("refused");
    assert_eq!(error.code, code, "{error:?}");
    assert!(error.message.contains(text), "{text:?} not in {error:?}");
}

#[tokio::test]
async fn only_an_admin_may_and_every_refusal_says_why() {
    let world = World::new();
    world.create_as_admin("notes", false).await;
    for (who, principal) in [
        ("staff", World::principal(&world.staff, &WRITER)),
        ("member", World::principal(&world.member, &WRITER)),
        (
            "admin without apps:write",
            World::principal(&world.admin, &["apps:invoke"]),
        ),
        (
            "admin's API key",
            World::as_kind(world.admin(), PrincipalKind::ApiKey),
        ),
    ] {
        for operation in [Op::Withdraw, Op::Restore, Op::Delete] {
            let refused = world.step(principal.clone(), "notes", operation).await;
            let error = refused.expect_err(who);
            assert_eq!(error.code, ErrorCode::AccessDenied, "{who}: {error:?}");
        }
    }
    // A staff principal claiming to be admin is read again from the store.
    let claimed = World::claiming(World::principal(&world.staff, &WRITER), UserRole::Admin);
    assert_code(
        world.step(claimed, "notes", Op::Withdraw).await,
        ErrorCode::AccessDenied,
        "only an admin",
    );
    assert_code(
        world.step(world.admin(), "nowhere", Op::Withdraw).await,
        ErrorCode::NotFound,
        "no registered app nowhere",
    );
    assert_code(
        world.step(world.admin(), "Not An Id", Op::Withdraw).await,
        ErrorCode::InputInvalid,
        "kebab-case",
    );
    assert_code(
        world.step(world.admin(), "notes", Op::Unspecified).await,
        ErrorCode::InputInvalid,
        "operation",
    );
    // Deleting a live app is refused: withdraw it first.
    let live = world.delete("notes", false, "").await;
    let error = live.expect_err("a live app is not deleted");
    assert_eq!(error.code, ErrorCode::Conflict);
    assert_eq!(error.details.as_ref().unwrap()["reason"], "not-withdrawn");
    assert!(world.dir.path().join("docs/apps/notes/APP.md").exists());
    // Restoring a live app changes nothing and audits nothing.
    let restored = world
        .step(world.admin(), "notes", Op::Restore)
        .await
        .unwrap();
    assert!(!restored.changed && !restored.withdrawn);
    assert!(
        world
            .actions("notes")
            .iter()
            .all(|(action, _)| action == "app.created")
    );
}

#[tokio::test]
async fn a_withdrawn_app_is_gone_for_everyone_and_comes_back_with_its_grants() {
    let world = World::new();
    let revision = world.create_as_admin("notes", false).await;
    world
        .core
        .store
        .grant(
            "notes",
            &world.member.id,
            AppAccess::Use,
            Some(&world.admin.id),
        )
        .unwrap();
    let grants = world.core.store.grants("notes").unwrap();
    assert_eq!(grants.len(), 3, "{grants:?}");
    assert_eq!(
        world.catalogue(&world.admin).await,
        [("notes".to_owned(), "manage".to_owned())]
    );

    let withdrawn = world
        .step(world.admin(), "notes", Op::Withdraw)
        .await
        .unwrap();
    assert!(withdrawn.changed && withdrawn.withdrawn && !withdrawn.package_deleted);
    // Gone for every caller, the admin holding manage included.
    for user in [&world.admin, &world.staff, &world.member] {
        assert_eq!(world.catalogue(user).await, [], "{}", user.username);
        assert!(world.list_apps(user).await.is_empty());
        let hidden = world.resource(user, "notes", &revision).await.unwrap_err();
        assert_eq!(hidden.code, ErrorCode::NotFound);
    }
    // The source and history tools say so.
    let source = crate::grpc::calls::source_files(
        &world.core,
        Some(&world.admin()),
        "listAppFiles",
        "notes",
        r#"{"app":"notes"}"#,
    )
    .await
    .unwrap_err();
    assert_eq!(source.code, ErrorCode::OperationUnavailable, "{source:?}");
    assert_eq!(source.details.as_ref().unwrap()["reason"], "withdrawn");
    assert!(source.message.contains("restoreApp"), "{source:?}");
    let history = crate::grpc::calls::history(
        &world.core,
        pb::HistoryRequest {
            principal: Some(world.admin()),
            app_id: "notes".to_owned(),
            operation: Some(pb::history_request::Operation::List(
                pb::HistoryListRequest {},
            )),
        },
    )
    .await
    .unwrap_err();
    assert_eq!(history.code, ErrorCode::OperationUnavailable, "{history:?}");
    // Data, package, grants and ledger stay; withdrawing again is a no-op.
    assert!(world.dir.path().join("docs/apps/notes/APP.md").exists());
    assert_eq!(world.core.store.grants("notes").unwrap(), grants);
    assert!(!world.core.store.revisions("notes").unwrap().is_empty());
    let again = world
        .step(world.admin(), "notes", Op::Withdraw)
        .await
        .unwrap();
    assert!(!again.changed && again.withdrawn);
    // A catalogue refresh (as the file watcher makes) keeps it withdrawn.
    crate::registry::refresh_catalogue(&world.core).await;
    assert_eq!(world.catalogue(&world.admin).await, []);

    let restored = world
        .step(world.admin(), "notes", Op::Restore)
        .await
        .unwrap();
    assert!(restored.changed && !restored.withdrawn);
    assert_eq!(
        world.catalogue(&world.admin).await,
        [("notes".to_owned(), "manage".to_owned())]
    );
    assert_eq!(
        world.catalogue(&world.member).await,
        [("notes".to_owned(), "use".to_owned())]
    );
    assert_eq!(world.list_apps(&world.staff).await, ["notes"]);
    assert!(
        world
            .resource(&world.member, "notes", &revision)
            .await
            .unwrap()
            .ends_with(&revision)
    );
    assert_eq!(world.core.store.grants("notes").unwrap(), grants);

    let audit = world.core.store.audit_entries(Some("notes")).unwrap();
    let withdrawal = audit
        .iter()
        .find(|entry| entry.action == lifecycle_action::APP_WITHDRAWN)
        .unwrap();
    assert_eq!(withdrawal.actor, world.admin.id);
    assert_eq!(withdrawal.before.as_deref(), Some(revision.as_str()));
    assert_eq!(
        world.actions("notes"),
        [
            ("app.created".to_owned(), world.admin.id.clone()),
            ("app.withdrawn".to_owned(), world.admin.id.clone()),
            ("app.restored".to_owned(), world.admin.id.clone()),
        ]
    );
}

#[tokio::test]
async fn deleting_needs_a_withdrawn_app_and_the_data_a_second_confirmation() {
    let world = World::new();
    let revision = world.create_as_admin("notes", false).await;
    world
        .step(world.admin(), "notes", Op::Withdraw)
        .await
        .unwrap();
    let package = world.dir.path().join("docs/apps/notes");

    // deleteData without the id repeated, or with another id: nothing goes.
    for confirm in ["", "other", "NOTES"] {
        let refused = world.delete("notes", true, confirm).await;
        let error = refused.expect_err(confirm);
        assert_eq!(error.code, ErrorCode::InputInvalid, "{confirm}: {error:?}");
        assert_eq!(error.details.as_ref().unwrap()["field"], "confirmAppId");
        assert!(package.join("APP.md").exists());
    }

    // The package alone: moved out of apps/, removed, audited; the data
    // file is not asked about.
    let deleted = world.delete("notes", false, "").await.unwrap();
    assert!(deleted.changed && deleted.package_deleted && !deleted.data_deleted);
    assert!(deleted.data_backup.is_none());
    assert!(!package.exists());
    let staging = world.dir.path().join("docs").join(DELETE_STAGING_DIR);
    assert_eq!(std::fs::read_dir(&staging).unwrap().count(), 0);
    assert!(!world.core.catalogue.current().apps.contains_key("notes"));
    // The id stays registered and taken; the ledger and audit stay.
    assert!(world.core.store.registered_app("notes").unwrap().is_some());
    assert!(!world.core.store.revisions("notes").unwrap().is_empty());
    let taken = crate::grpc::calls::create(
        &world.core,
        pb::CreateAppRequest {
            principal: Some(world.admin()),
            app_id: "notes".to_owned(),
            name: "Notes again".to_owned(),
            description: "Again".to_owned(),
            with_table: false,
        },
    )
    .await
    .unwrap_err();
    assert_eq!(taken.code, ErrorCode::Conflict);
    // A deleted app cannot be restored; deleting again changes nothing.
    let restore = world.step(world.admin(), "notes", Op::Restore).await;
    let error = restore.expect_err("deleted");
    assert_eq!(error.code, ErrorCode::Conflict);
    assert_eq!(error.details.as_ref().unwrap()["reason"], "deleted");
    let again = world.delete("notes", false, "").await.unwrap();
    assert!(!again.changed && again.package_deleted);

    let audit = world.core.store.audit_entries(Some("notes")).unwrap();
    let deletion = audit
        .iter()
        .find(|entry| entry.action == lifecycle_action::APP_DELETED)
        .unwrap();
    assert_eq!(deletion.actor, world.admin.id);
    assert_eq!(deletion.before.as_deref(), Some(revision.as_str()));
    assert_eq!(
        audit
            .iter()
            .filter(|entry| entry.action == lifecycle_action::APP_DELETED)
            .count(),
        1
    );
    assert!(
        !audit
            .iter()
            .any(|entry| entry.action == lifecycle_action::APP_DATA_DELETED)
    );
}
