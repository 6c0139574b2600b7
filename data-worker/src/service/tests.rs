//! `DataService`'s preview and publication paths through the worker (the
//! engine's own tests cover the files in depth).

use sasha_contract::data::{
    Access, Migration, TableDeclaration, contract_hash, read_schema, sha256_hex,
};

use super::*;
use sasha_service::Role;

const APP: &str = "notes";

fn contract_with(migrations: &[&str]) -> DataContract {
    let replay = rusqlite::Connection::open_in_memory().unwrap();
    let migrations: Vec<Migration> = migrations
        .iter()
        .enumerate()
        .map(|(index, sql)| {
            replay.execute_batch(sql).unwrap();
            let number = u32::try_from(index + 1).unwrap();
            Migration {
                file: format!("migrations/{number:03}-step.sql"),
                number,
                checksum: sha256_hex(sql.as_bytes()),
                sql: (*sql).to_owned(),
            }
        })
        .collect();
    let tables = std::collections::BTreeMap::from([(
        "notes".to_owned(),
        TableDeclaration {
            access: Access::Shared,
            owner_field: None,
        },
    )]);
    DataContract {
        schema: read_schema(&replay).unwrap(),
        hash: contract_hash(&tables, &migrations),
        migrations,
        tables,
    }
}

const FIRST: &str = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);";
const SECOND: &str = "ALTER TABLE notes ADD COLUMN pinned INTEGER;";

fn request(contract: &DataContract, operation: &str, json: Value, preview: &str) -> ExecuteRequest {
    ExecuteRequest {
        app_id: APP.into(),
        contract_hash: contract.hash.clone(),
        actor: Some(pb::Actor {
            user_id: "alice".into(),
            via: "ui".into(),
        }),
        operation: operation.into(),
        table: "notes".into(),
        request_json: json.to_string(),
        contract: Some(pb::DataContract::from(contract)),
        source: "ui".into(),
        app_revision: "rev-1".into(),
        action_id: String::new(),
        preview: preview.into(),
    }
}

fn bodies(worker: &Worker, contract: &DataContract, preview: &str) -> Vec<Value> {
    let listed = execute(
        worker,
        request(contract, "list", serde_json::json!({}), preview),
    )
    .unwrap();
    listed["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["body"].clone())
        .collect()
}

#[test]
fn execute_runs_a_preview_on_its_scratch_copy_only() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::new(dir.path()).unwrap();
    let live = contract_with(&[FIRST]);
    let create = |contract: &DataContract, body: &str, preview: &str| {
        execute(
            &worker,
            request(
                contract,
                "create",
                serde_json::json!({"values": {"body": body}, "idempotencyKey": body}),
                preview,
            ),
        )
    };
    create(&live, "live", "").unwrap();
    let id = "0123456789abcdef0123456789abcdef";
    let draft = contract_with(&[FIRST, SECOND]);
    create(&draft, "draft", id).unwrap();
    assert_eq!(bodies(&worker, &draft, id), ["live", "draft"]);
    assert_eq!(bodies(&worker, &live, ""), ["live"]);

    for bad in ["ABC", "0123456789ABCDEF0123456789ABCDEF", "../x"] {
        let error = create(&draft, "nope", bad).unwrap_err();
        assert_eq!(error.code, ErrorCode::InputInvalid, "{bad}");
    }
    // The draft's column is described in the preview only.
    let described = worker.engine.describe(Target::of(APP, id), &draft).unwrap();
    assert!(described.tables["notes"].column("pinned").is_some());
    let described = worker.engine.describe(Target::of(APP, ""), &live).unwrap();
    assert!(described.tables["notes"].column("pinned").is_none());
}

/// A request as studio-core's certificate makes it.
fn from_core<T>(message: T) -> Request<T> {
    let mut request = Request::new(message);
    request.extensions_mut().insert(Role::StudioCore);
    request
}

#[tokio::test]
async fn the_data_lifecycle_is_studio_cores_alone() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::new(dir.path()).unwrap();
    let live = contract_with(&[FIRST]);
    worker.engine.open(APP, &live).unwrap();
    for caller in [None, Some(Role::McpGateway)] {
        let by = |mut request: Request<()>| {
            if let Some(role) = caller {
                request.extensions_mut().insert(role);
            }
            request
        };
        let apply = by(Request::new(())).map(|()| pb::ApplyContractRequest {
            app_id: APP.into(),
            contract: Some(pb::DataContract::from(&live)),
            dry_run: true,
        });
        let status = worker.apply_contract(apply).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{caller:?}");
        let remove = by(Request::new(())).map(|()| pb::RemovePreviewRequest {
            app_id: APP.into(),
            preview: String::new(),
        });
        let status = worker.remove_preview(remove).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{caller:?}");
        let delete = by(Request::new(())).map(|()| pb::RemoveAppDataRequest { app_id: APP.into() });
        let status = worker.remove_app_data(delete).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{caller:?}");
    }
    // The live file is still there.
    assert!(dir.path().join(format!("{APP}.sqlite")).exists());
}

#[tokio::test]
async fn apply_contract_verifies_and_publishes_a_draft() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::new(dir.path()).unwrap();
    let live = contract_with(&[FIRST]);
    worker.engine.open(APP, &live).unwrap();
    let draft = contract_with(&[FIRST, SECOND]);
    let ask = |contract: pb::DataContract, dry_run: bool| {
        worker.apply_contract(from_core(pb::ApplyContractRequest {
            app_id: APP.into(),
            contract: Some(contract),
            dry_run,
        }))
    };

    // A contract that does not match its hash, or none, is refused.
    let mut forged = pb::DataContract::from(&draft);
    forged.hash = "0".repeat(64);
    let status = ask(forged, false).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    let status = worker
        .apply_contract(from_core(pb::ApplyContractRequest {
            app_id: APP.into(),
            contract: None,
            dry_run: true,
        }))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);

    let dry = ask(pb::DataContract::from(&draft), true)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(dry.applied, ["migrations/002-step.sql"]);
    assert!(dry.drift.is_empty());
    let done = ask(pb::DataContract::from(&draft), false)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.applied, ["migrations/002-step.sql"]);
    let again = ask(pb::DataContract::from(&draft), false)
        .await
        .unwrap()
        .into_inner();
    assert!(again.applied.is_empty());

    // RemovePreview answers with the count of files removed.
    let id = "0123456789abcdef0123456789abcdef";
    worker.engine.open(Target::of(APP, id), &draft).unwrap();
    let removed = worker
        .remove_preview(from_core(pb::RemovePreviewRequest {
            app_id: APP.into(),
            preview: String::new(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(removed.removed_files >= 1);
}
