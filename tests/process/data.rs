//! data-worker through its gRPC interface: the governed grammar on the
//! expense-log package's tables, owner scoping between two actors, versions,
//! idempotent retries that survive a restart, 50 racing updates of which
//! exactly one wins, 8 writers' keyed creates through SIGKILLs landing in
//! the middle of group commits, and APP_DATA_ROOT full or read-only on a
//! tmpfs the test mounts, and an app file damaged under the running worker
//! and restored from its backup.

use crate::common;

use std::path::Path;

use common::Harness;
use sasha_contract::caller::{AppAccess, CallSource};
use sasha_package::sql::DataContract;
use sasha_proto::convert::ToWire;
use sasha_proto::pb::{self, Actor, ExecuteRequest};
use sasha_proto::{AppError, ErrorCode};
use sasha_service::identity::Identity;
use sasha_service::{Role, grpc};
use serde_json::{Value, json};

fn contract() -> DataContract {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packages/valid/expense-log");
    sasha_package::validate::validate_dir(&dir)
        .package
        .unwrap()
        .data
        .unwrap()
}

struct Client {
    data: grpc::DataClient,
    /// The app id the calls name (each app has its own file).
    app: &'static str,
    contract: DataContract,
    /// The contract as it travels with each request.
    wire: pb::DataContract,
}

impl Client {
    fn new(harness: &Harness, addr: std::net::SocketAddr) -> Client {
        Client::for_app(harness, addr, "expense-log")
    }

    /// A client whose calls name `app` (with the expense-log contract).
    fn for_app(harness: &Harness, addr: std::net::SocketAddr, app: &'static str) -> Client {
        let identity = Identity::load(&harness.tls(Role::McpGateway)).unwrap();
        let contract = contract();
        Client {
            data: grpc::data_client(&format!("https://{addr}"), &identity).unwrap(),
            app,
            wire: pb::DataContract::from(&contract),
            contract,
        }
    }

    async fn call(
        &self,
        actor: &str,
        operation: &str,
        table: &str,
        request: Value,
    ) -> Result<Value, AppError> {
        let mut data = self.data.clone();
        let reply = data
            .execute(ExecuteRequest {
                epoch: 0,
                app_id: self.app.into(),
                contract_hash: self.contract.hash.clone(),
                actor: Some(Actor {
                    user_id: actor.into(),
                    access: AppAccess::Use.to_wire(),
                }),
                operation: operation.into(),
                table: table.into(),
                request_json: request.to_string(),
                contract: Some(self.wire.clone()),
                source: CallSource::Ui.to_wire(),
                provenance: Some(sasha_proto::convert::provenance_to_wire(
                    sasha_contract::caller::Initiator::AppView,
                    None,
                )),
                app_revision: "r1".into(),
                action_id: String::new(),
                preview: String::new(),
                preview_scope: None,
            })
            .await
            .map_err(|status| AppError::from_status(&status))?;
        Ok(serde_json::from_str(&reply.into_inner().result_json).unwrap())
    }
}

fn code(result: Result<Value, AppError>) -> ErrorCode {
    result.expect_err("must be refused").code
}

#[tokio::test]
async fn governed_operations_owner_scoping_versions_and_idempotency() {
    let harness = Harness::new();
    let worker = harness.start(Role::DataWorker, &[]).await;
    let client = Client::new(&harness, worker.listener("grpc"));

    // A worker that has never seen the contract asks for it.
    let mut bare = client.data.clone();
    let status = bare
        .execute(ExecuteRequest {
            app_id: "expense-log".into(),
            contract_hash: client.contract.hash.clone(),
            actor: Some(Actor {
                user_id: "alice".into(),
                access: AppAccess::Use.to_wire(),
            }),
            operation: "list".into(),
            table: "expenses".into(),
            request_json: "{}".into(),
            ..ExecuteRequest::default()
        })
        .await
        .unwrap_err();
    let error = AppError::from_status(&status);
    assert_eq!(error.code, ErrorCode::NotReady);
    assert_eq!(error.details.unwrap()["contractRequired"], true);

    let category = client
        .call(
            "alice",
            "create",
            "categories",
            json!({"values": {"name": "Travel"}, "idempotencyKey": "c1"}),
        )
        .await
        .unwrap();
    assert_eq!(category["_sasha_version"], 1);
    let category_id = category["id"].clone();
    let expense = client
        .call("alice", "create", "expenses", json!({"values": {"spent_on": "2026-11-02", "amount": 12.5, "category_id": category_id}, "idempotencyKey": "e1"}))
        .await
        .unwrap();
    assert_eq!(
        expense["created_by"], "alice",
        "the owner is stamped by the platform"
    );
    let id = expense["id"].clone();

    // Bob sees shared categories but none of Alice's expenses.
    let bob_categories = client
        .call("bob", "list", "categories", json!({}))
        .await
        .unwrap();
    assert_eq!(bob_categories["rows"].as_array().unwrap().len(), 1);
    let bob_expenses = client
        .call("bob", "list", "expenses", json!({}))
        .await
        .unwrap();
    assert_eq!(bob_expenses["rows"], json!([]));
    assert_eq!(
        code(
            client
                .call("bob", "get", "expenses", json!({"id": id}))
                .await
        ),
        ErrorCode::RecordNotFound
    );
    assert_eq!(
        code(client.call("bob", "update", "expenses", json!({"id": id, "changes": {"amount": 1}, "expectedVersion": 1, "idempotencyKey": "b1"})).await),
        ErrorCode::RecordNotFound
    );
    assert_eq!(
        code(
            client
                .call("bob", "get", "expenses", json!({"id": 999}))
                .await
        ),
        ErrorCode::RecordNotFound
    );

    // The owner field cannot be set or used to filter.
    assert!(client
        .call("bob", "create", "expenses", json!({"values": {"spent_on": "2026-11-02", "amount": 1, "category_id": category_id, "created_by": "alice"}, "idempotencyKey": "b2"}))
        .await
        .is_err());
    assert!(
        client
            .call(
                "bob",
                "list",
                "expenses",
                json!({"where": [{"field": "created_by", "operator": "eq", "value": "alice"}]})
            )
            .await
            .is_err()
    );
    assert_eq!(
        code(
            client
                .call(
                    "alice",
                    "list",
                    "expenses",
                    json!({"where": [{"field": "rowid", "operator": "eq", "value": 1}]})
                )
                .await
        ),
        ErrorCode::FieldUndeclared
    );
    assert_eq!(
        code(
            client
                .call("alice", "list", "sqlite_master", json!({}))
                .await
        ),
        ErrorCode::NotFound
    );

    // Versions: the first update wins, a stale one conflicts.
    let updated = client
        .call("alice", "update", "expenses", json!({"id": id, "changes": {"amount": 20}, "expectedVersion": 1, "idempotencyKey": "u1"}))
        .await
        .unwrap();
    assert_eq!(updated["_sasha_version"], 2);
    let stale = client
        .call("alice", "update", "expenses", json!({"id": id, "changes": {"amount": 30}, "expectedVersion": 1, "idempotencyKey": "u2"}))
        .await
        .unwrap_err();
    assert_eq!(stale.code, ErrorCode::Conflict);
    assert_eq!(stale.details.unwrap()["currentVersion"], 2);

    // Idempotency: a retry replays, a reused key with other input is refused.
    let replay = client
        .call("alice", "update", "expenses", json!({"id": id, "changes": {"amount": 20}, "expectedVersion": 1, "idempotencyKey": "u1"}))
        .await
        .unwrap();
    assert_eq!(replay, updated);
    assert_eq!(
        code(client.call("alice", "update", "expenses", json!({"id": id, "changes": {"amount": 21}, "expectedVersion": 2, "idempotencyKey": "u1"})).await),
        ErrorCode::IdempotencyMismatch
    );

    // Aggregates are owner-scoped too.
    let totals = client
        .call("alice", "aggregate", "expenses", json!({"groupBy": ["category_id"], "metrics": [{"as": "total", "sum": "amount"}, {"as": "n", "count": "id"}]}))
        .await
        .unwrap();
    assert_eq!(
        totals["groups"],
        json!([{"category_id": category_id, "total": 20.0, "n": 1}])
    );
    let bob_totals = client
        .call(
            "bob",
            "aggregate",
            "expenses",
            json!({"metrics": [{"as": "n", "count": "id"}]}),
        )
        .await
        .unwrap();
    assert_eq!(bob_totals["groups"], json!([{"n": 0}]));

    // A restart keeps every receipt: the retry still replays the original.
    worker.stop().await;
    let worker = harness.start(Role::DataWorker, &[]).await;
    let client = Client::new(&harness, worker.listener("grpc"));
    let after_restart = client
        .call("alice", "update", "expenses", json!({"id": id, "changes": {"amount": 20}, "expectedVersion": 1, "idempotencyKey": "u1"}))
        .await
        .unwrap();
    assert_eq!(after_restart, updated);

    // Delete needs the current version; a stale one conflicts.
    assert_eq!(
        code(
            client
                .call(
                    "alice",
                    "delete",
                    "expenses",
                    json!({"id": id, "expectedVersion": 1, "idempotencyKey": "d0"})
                )
                .await
        ),
        ErrorCode::Conflict
    );
    client
        .call(
            "alice",
            "delete",
            "expenses",
            json!({"id": id, "expectedVersion": 2, "idempotencyKey": "d1"}),
        )
        .await
        .unwrap();
    assert_eq!(
        code(
            client
                .call("alice", "get", "expenses", json!({"id": id}))
                .await
        ),
        ErrorCode::RecordNotFound
    );

    // The live schema and migration drift, over the same interface.
    let mut data = client.data.clone();
    let schema = data
        .describe_schema(sasha_proto::pb::DescribeSchemaRequest {
            epoch: 0,
            app_id: "expense-log".into(),
            contract_hash: client.contract.hash.clone(),
            contract: Some(client.wire.clone()),
        })
        .await
        .unwrap()
        .into_inner();
    let schema = schema.schema.expect("the live schema");
    let columns: Vec<&str> = schema.tables["expenses"]
        .columns
        .iter()
        .map(|column| column.name.as_str())
        .collect();
    // The declared structure; the platform's own columns are not described.
    assert_eq!(
        columns,
        [
            "id",
            "spent_on",
            "amount",
            "category_id",
            "created_by",
            "note"
        ]
    );
    let drift = data
        .migration_drift(sasha_proto::pb::MigrationDriftRequest {
            epoch: 0,
            app_id: "expense-log".into(),
            contract_hash: client.contract.hash.clone(),
            contract: Some(client.wire.clone()),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(drift.drift, Vec::<pb::Drift>::new());

    // A write must say where it came from, for the audit ledger.
    let mut unsourced = client.data.clone();
    let status = unsourced
        .execute(ExecuteRequest {
            app_id: "expense-log".into(),
            contract_hash: client.contract.hash.clone(),
            actor: Some(Actor {
                user_id: "alice".into(),
                access: AppAccess::Use.to_wire(),
            }),
            operation: "create".into(),
            table: "categories".into(),
            request_json: json!({"values": {"name": "Other"}, "idempotencyKey": "s1"}).to_string(),
            // No source at all (CALL_SOURCE_UNSPECIFIED).
            ..ExecuteRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(AppError::from_status(&status).code, ErrorCode::InputInvalid);

    // Tampered contracts are refused.
    let mut forged = client.contract.clone();
    forged.hash = "0".repeat(64);
    let forged_client = Client {
        data: client.data.clone(),
        app: client.app,
        wire: pb::DataContract::from(&forged),
        contract: forged,
    };
    let refused = forged_client
        .call("alice", "list", "expenses", json!({}))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InputInvalid);
    assert_eq!(refused.message, "the data contract does not match its hash");

    // So is one that does not decode (here: no schema).
    let mut undecodable = pb::DataContract::from(&client.contract);
    undecodable.schema = None;
    undecodable.hash = "1".repeat(64);
    let mut contract = client.contract.clone();
    contract.hash = undecodable.hash.clone();
    let undecodable_client = Client {
        data: client.data.clone(),
        app: client.app,
        wire: undecodable,
        contract,
    };
    let refused = undecodable_client
        .call("alice", "list", "expenses", json!({}))
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InputInvalid);
    assert_eq!(refused.message, "the data contract is not valid");
}

/// Security catalogue D11: 50 parallel updates with one expected version.
#[tokio::test]
async fn exactly_one_of_fifty_racing_updates_wins() {
    let harness = Harness::new();
    let worker = harness.start(Role::DataWorker, &[]).await;
    let client = std::sync::Arc::new(Client::new(&harness, worker.listener("grpc")));
    let category = client
        .call(
            "alice",
            "create",
            "categories",
            json!({"values": {"name": "Food"}, "idempotencyKey": "c"}),
        )
        .await
        .unwrap();
    let id = category["id"].clone();
    let mut tasks = Vec::new();
    for i in 0..50 {
        let client = client.clone();
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            client
                .call("alice", "update", "categories", json!({"id": id, "changes": {"name": format!("Food {i}")}, "expectedVersion": 1, "idempotencyKey": format!("race-{i}")}))
                .await
        }));
    }
    let mut wins = 0;
    let mut conflicts = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(row) => {
                assert_eq!(row["_sasha_version"], 2);
                wins += 1;
            }
            Err(error) if error.code == ErrorCode::Conflict => conflicts += 1,
            Err(error) => panic!("unexpected {error:?}"),
        }
    }
    assert_eq!((wins, conflicts), (1, 49));
}

/// Crash safety under group commit: 8 writers send keyed creates to one app
/// as fast as they are answered, so its writer always has a batch committing
/// and more queued, and data-worker is SIGKILLed at a varying moment of each
/// round. After each kill, before any retry: every acknowledged write exists
/// exactly once as acknowledged, and the write each writer had in flight
/// exists once or not at all. Its retry with the same key then replays (when
/// it had committed) or writes it once. At the end the audit has one row per
/// write and its triggers still refuse tampering.
#[tokio::test]
async fn writes_survive_sigkill_mid_batch_exactly_once() {
    const WRITERS: usize = 8;
    const ROUNDS: usize = 6;
    let harness = Harness::new();
    let mut worker = harness.start(Role::DataWorker, &[]).await;
    let mut client = std::sync::Arc::new(Client::new(&harness, worker.listener("grpc")));
    let category = client
        .call(
            "alice",
            "create",
            "categories",
            json!({"values": {"name": "Ops"}, "idempotencyKey": "cat"}),
        )
        .await
        .unwrap();
    let category_id = category["id"].clone();
    let request = move |key: &str| {
        json!({
            "values": {"spent_on": "2026-11-03", "amount": 1.5, "category_id": category_id, "note": key},
            "idempotencyKey": key,
        })
    };
    let file = harness.path().join("apps/expense-log.sqlite");
    let mut seed: u64 = 0x5eed;
    let (mut acknowledged, mut in_flight_committed, mut in_flight_retried) = (0, 0, 0);
    let mut writers_acknowledged_in_a_round = 0;
    for round in 0..ROUNDS {
        let mut writers = Vec::new();
        for writer in 0..WRITERS {
            let (client, request) = (client.clone(), request.clone());
            writers.push(tokio::spawn(async move {
                let mut acked = Vec::new();
                // Bounded so a kill that never lands cannot hang the test.
                for n in 0..100_000 {
                    let key = format!("w{round}-{writer}-{n}");
                    match client
                        .call("alice", "create", "expenses", request(&key))
                        .await
                    {
                        Ok(row) => acked.push((key, row)),
                        Err(_) => return (acked, Some(key)),
                    }
                }
                (acked, None)
            }));
        }
        // A real wait: the kill has to land while the worker is committing,
        // at a different moment of its batches each round.
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        tokio::time::sleep(std::time::Duration::from_millis(40 + (seed >> 57))).await;
        worker.child.start_kill().unwrap();
        worker.child.wait().await.unwrap();
        let mut answered = Vec::new();
        for writer in writers {
            answered.push(writer.await.unwrap());
        }
        writers_acknowledged_in_a_round = writers_acknowledged_in_a_round.max(
            answered
                .iter()
                .filter(|(acked, _)| !acked.is_empty())
                .count(),
        );

        // What the file holds after the kill, read before any retry.
        let db = rusqlite::Connection::open(&file).unwrap();
        let rows_of = |key: &str| -> Vec<i64> {
            db.prepare("SELECT id FROM expenses WHERE note = ?1")
                .unwrap()
                .query_map([key], |row| row.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let mut retries = Vec::new();
        for (acked, in_flight) in &answered {
            for (key, row) in acked {
                assert_eq!(
                    rows_of(key),
                    [row["id"].as_i64().unwrap()],
                    "acknowledged {key}"
                );
                acknowledged += 1;
            }
            let Some(key) = in_flight else {
                panic!("a writer was never cut off by the kill");
            };
            let found = rows_of(key);
            assert!(found.len() <= 1, "unacknowledged {key} exists at most once");
            retries.push((key.clone(), found.first().copied()));
        }
        drop(db);

        worker = harness.start(Role::DataWorker, &[]).await;
        client = std::sync::Arc::new(Client::new(&harness, worker.listener("grpc")));
        for (key, committed) in retries {
            let row = client
                .call("alice", "create", "expenses", request(&key))
                .await
                .unwrap();
            match committed {
                Some(id) => {
                    assert_eq!(row["id"].as_i64(), Some(id), "{key} replays");
                    in_flight_committed += 1;
                }
                None => in_flight_retried += 1,
            }
        }
        for (acked, _) in &answered {
            for (key, row) in acked {
                let replayed = client
                    .call("alice", "create", "expenses", request(key))
                    .await
                    .unwrap();
                assert_eq!(&replayed, row, "{key} replays its original result");
            }
        }
    }
    eprintln!(
        "{acknowledged} acknowledged writes; of the writes cut off by a kill, \
         {in_flight_committed} had committed and replayed, {in_flight_retried} were written by their retry"
    );
    assert!(
        writers_acknowledged_in_a_round > 1,
        "writers ran concurrently between kills"
    );
    let total = acknowledged + in_flight_committed + in_flight_retried;

    worker.stop().await;
    let db = rusqlite::Connection::open(&file).unwrap();
    let (rows, distinct): (i64, i64) = db
        .query_row(
            "SELECT count(*), count(DISTINCT note) FROM expenses",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (rows, distinct),
        (total as i64, total as i64),
        "every write exists exactly once"
    );
    let audited: i64 = db
        .query_row("SELECT count(*) FROM _sasha_audit WHERE table_name = 'expenses' AND operation = 'create'", [], |row| row.get(0))
        .unwrap();
    assert_eq!(audited, total as i64, "one audit row per write");
    assert!(
        db.execute("UPDATE _sasha_audit SET actor_id = 'mallory'", [])
            .is_err()
    );
    assert!(db.execute("DELETE FROM _sasha_audit", []).is_err());
    assert!(db
        .execute(
            "INSERT OR REPLACE INTO _sasha_audit (id, table_name, record_id, operation, actor_id, source, app_revision, created_at) \
             SELECT id, table_name, record_id, operation, 'mallory', source, app_revision, created_at FROM _sasha_audit LIMIT 1",
            [],
        )
        .is_err());
}

/// A small file system for APP_DATA_ROOT (a tmpfs this test mounts), unmounted
/// when dropped.
struct SmallDisk {
    path: std::path::PathBuf,
}

impl SmallDisk {
    /// Mounts a `size` tmpfs at `path`, or says why it cannot.
    fn mount(path: &Path, size: &str) -> Result<SmallDisk, String> {
        std::fs::create_dir_all(path).map_err(|error| error.to_string())?;
        let disk = SmallDisk {
            path: path.to_owned(),
        };
        disk.mount_with(&format!("size={size}"), false)?;
        Ok(disk)
    }

    fn mount_with(&self, options: &str, remount: bool) -> Result<(), String> {
        let options = if remount {
            format!("remount,{options}")
        } else {
            options.to_owned()
        };
        let output = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
            .arg(&self.path)
            .output()
            .map_err(|error| format!("mount: {error}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
        }
    }

    fn remount(&self, options: &str) {
        self.mount_with(options, true)
            .unwrap_or_else(|error| panic!("remount {options}: {error}"));
    }
}

/// data-worker with APP_DATA_ROOT on a `size` tmpfs, and a client; `None`,
/// saying why, where this machine cannot mount one.
async fn on_small_disk(
    harness: &Harness,
    size: &str,
) -> Option<(SmallDisk, common::RoleProcess, Client)> {
    let root = harness.path().join("small-disk");
    let disk = match SmallDisk::mount(&root, size) {
        Ok(disk) => disk,
        Err(reason) => {
            println!("skipped: cannot mount a tmpfs for APP_DATA_ROOT here: {reason}");
            return None;
        }
    };
    let worker = harness
        .start(
            Role::DataWorker,
            &[("APP_DATA_ROOT", root.display().to_string())],
        )
        .await;
    let client = Client::new(harness, worker.listener("grpc"));
    Some((disk, worker, client))
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.path)
            .status();
    }
}

/// Fault injection on APP_DATA_ROOT: a full file system. Each refused write
/// is the retryable `APP_DATABASE_UNAVAILABLE`, no acknowledged write is lost
/// or doubled, and once there is room the very next write succeeds, with no
/// restart. Where this machine cannot mount a file system the test says so
/// and checks nothing.
#[tokio::test]
async fn a_full_data_root_refuses_writes_and_recovers_without_a_restart() {
    let harness = Harness::new();
    let Some((disk, worker, client)) = on_small_disk(&harness, "1m").await else {
        return;
    };
    let category = client
        .call(
            "alice",
            "create",
            "categories",
            json!({"values": {"name": "Travel"}, "idempotencyKey": "c1"}),
        )
        .await
        .unwrap()["id"]
        .clone();
    let note = "n".repeat(1000);
    let create = |key: String| {
        let (client, note, category) = (&client, note.clone(), category.clone());
        async move {
            client
                .call(
                    "alice",
                    "create",
                    "expenses",
                    json!({"values": {"spent_on": "2026-11-02", "amount": 1, "category_id": category, "note": note}, "idempotencyKey": key}),
                )
                .await
        }
    };
    // Fill the disk: every acknowledged write is kept.
    let mut acknowledged = Vec::new();
    let refused = loop {
        let key = format!("full-{}", acknowledged.len());
        match create(key).await {
            Ok(row) => acknowledged.push(row["id"].clone()),
            Err(error) => break error,
        }
        assert!(acknowledged.len() < 5_000, "a 1 MiB disk never filled");
    };
    assert!(!acknowledged.is_empty());
    assert_eq!(refused.code, ErrorCode::DatabaseUnavailable, "{refused:?}");
    assert!(refused.retryable, "{refused:?}");
    assert!(refused.message.contains("no space left"), "{refused:?}");
    client
        .call("alice", "list", "expenses", json!({"limit": 1}))
        .await
        .expect("reads answer while the disk is full");
    // Still full: the same write is refused the same way.
    let failed_key = format!("full-{}", acknowledged.len());
    assert_eq!(
        create(failed_key.clone()).await.unwrap_err().code,
        ErrorCode::DatabaseUnavailable
    );

    // Room again: the retried write lands once, with no restart.
    disk.remount("size=64m");
    let retried = create(failed_key.clone())
        .await
        .expect("the retry succeeds");
    let again = create(failed_key).await.expect("an idempotent replay");
    assert_eq!(retried["id"], again["id"], "the retry is not doubled");
    acknowledged.push(retried["id"].clone());

    // Every acknowledged write is there exactly once, and nothing else.
    let mut stored = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let mut request = json!({"limit": 200, "select": ["id"]});
        if !cursor.is_null() {
            request["cursor"] = cursor.clone();
        }
        let page = client
            .call("alice", "list", "expenses", request)
            .await
            .unwrap();
        stored.extend(
            page["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|row| row["id"].clone()),
        );
        cursor = page["nextCursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    let key = |ids: &[Value]| {
        let mut ids: Vec<i64> = ids.iter().map(|id| id.as_i64().unwrap()).collect();
        ids.sort_unstable();
        ids
    };
    assert_eq!(key(&stored), key(&acknowledged));
    drop(worker);
}

/// Fault injection on APP_DATA_ROOT: a file system made read-only while
/// data-worker runs (before it opens the app's database: one with files open
/// for writing cannot be made read-only). A write is the retryable
/// `APP_DATABASE_UNAVAILABLE`; made writable, the next write succeeds with no
/// restart, and only it is stored. (Read-only at boot stops data-worker with
/// a line naming APP_DATA_ROOT.)
#[tokio::test]
async fn a_read_only_data_root_refuses_writes_and_recovers_without_a_restart() {
    let harness = Harness::new();
    let Some((disk, worker, client)) = on_small_disk(&harness, "16m").await else {
        return;
    };
    disk.remount("ro");
    let create = || {
        client.call(
            "alice",
            "create",
            "categories",
            json!({"values": {"name": "Travel"}, "idempotencyKey": "c1"}),
        )
    };
    let refused = create().await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::DatabaseUnavailable, "{refused:?}");
    assert!(refused.retryable, "{refused:?}");
    disk.remount("rw");
    let created = create().await.expect("writable again, no restart");
    let replayed = create().await.expect("an idempotent replay");
    assert_eq!(created["id"], replayed["id"]);
    let listed = client
        .call("alice", "list", "categories", json!({}))
        .await
        .unwrap();
    assert_eq!(listed["rows"].as_array().unwrap().len(), 1, "{listed}");
    drop(worker);
}

/// Fault injection on APP_DATA_ROOT: an app's database file damaged under a
/// running data-worker (its pages past the header overwritten on disk, as a
/// bad disk or a stray write would, while the worker holds it open). Reads
/// and writes of that app are the retryable `APP_DATABASE_UNAVAILABLE` saying
/// the file is damaged, never a raw SQLite error; another app's file goes on
/// serving; and once an administrator renames the backup into place, the
/// very next call reads it (every write the backup holds, exactly once) and
/// writes go on, with no restart of data-worker.
#[tokio::test]
async fn a_damaged_app_database_is_refused_and_a_restored_backup_serves_without_a_restart() {
    let harness = Harness::new();
    let worker = harness.start(Role::DataWorker, &[]).await;
    let damaged = Client::new(&harness, worker.listener("grpc"));
    let other = Client::for_app(&harness, worker.listener("grpc"), "other-log");
    let category = |client: &'static str, key: &str| json!({"values": {"name": format!("{client} {key}")}, "idempotencyKey": key});
    let mut stored = Vec::new();
    for key in ["c1", "c2", "c3"] {
        let row = damaged
            .call("alice", "create", "categories", category("damaged", key))
            .await
            .unwrap();
        stored.push(row["id"].clone());
    }
    other
        .call("alice", "create", "categories", category("other", "o1"))
        .await
        .unwrap();

    // The administrator's backup (one consistent copy, as `sasha backup`
    // takes), then a write the backup does not hold, then the damage.
    let file = harness.path().join("apps/expense-log.sqlite");
    let backup = harness.path().join("expense-log.backup.sqlite");
    common::back_up_sqlite_file(&file, &backup);
    damaged
        .call("alice", "create", "categories", category("damaged", "c4"))
        .await
        .unwrap();
    common::damage_sqlite_file(&file);
    let read = damaged
        .call("alice", "list", "categories", json!({}))
        .await
        .unwrap_err();
    assert_eq!(read.code, ErrorCode::DatabaseUnavailable, "{read:?}");
    assert!(read.retryable, "{read:?}");
    assert!(read.message.contains("damaged"), "{read:?}");
    assert!(
        read.message.contains("restore it from a backup"),
        "{read:?}"
    );
    let write = damaged
        .call("alice", "create", "categories", category("damaged", "c5"))
        .await
        .unwrap_err();
    assert_eq!(write.code, ErrorCode::DatabaseUnavailable, "{write:?}");
    assert!(write.message.contains("damaged"), "{write:?}");
    let others = other
        .call("alice", "list", "categories", json!({}))
        .await
        .expect("another app's file is unaffected");
    assert_eq!(others["rows"].as_array().unwrap().len(), 1);

    // The administrator renames the backup into place (a new inode: a
    // connection still open on the damaged file would never see it).
    common::restore_sqlite_file(&backup, &file);
    let listed = damaged
        .call("alice", "list", "categories", json!({}))
        .await
        .expect("the restored file is served without a restart");
    let ids: Vec<Value> = listed["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["id"].clone())
        .collect();
    assert_eq!(ids, stored, "exactly the backup's rows");
    // A key the backup holds replays its receipt; one it does not writes.
    let replayed = damaged
        .call("alice", "create", "categories", category("damaged", "c1"))
        .await
        .unwrap();
    assert_eq!(replayed["id"], stored[0]);
    damaged
        .call("alice", "create", "categories", category("damaged", "c5"))
        .await
        .expect("writes go on");
    drop(worker);
}
