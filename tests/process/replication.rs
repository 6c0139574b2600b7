//! Replication to object storage against its real peers: SeaweedFS's S3
//! server (`weed mini`, loopback only) and Litestream run as each role's
//! sidecar (`sasha litestream`), with data-worker, studio-core and
//! mcp-gateway as real processes (`tests/common/replica.rs`).
//!
//! - Sync mode: eight keyed writers through MCP; data-worker and studio-core
//!   are SIGKILLed mid-stream and their volumes deleted; `sasha restore`
//!   rebuilds a fresh state folder, and every acknowledged write is there
//!   exactly once, every retry lands once, the audit holds one row per
//!   write, and an acknowledged grant, published revision and uploaded
//!   document survive.
//! - Async mode: the same kill, data-worker restoring its lost databases at
//!   boot; the acknowledged writes lost (the measured RPO) are reported.
//! - Object storage stopped in sync mode: writes are retryable refusals and
//!   none is acknowledged, reads go on, health says so and lag is logged;
//!   writes resume by themselves when it returns.
//! - A restore at an instant gives exactly the state before it, offline
//!   (`sasha restore --at`) and online (`previewAppUndo` and
//!   `undoAppChanges` with `from: "replica"`, putting back a row written
//!   behind the platform's back that the ledger never saw).
//! - Apps created, deployed (member apps) and deleted at runtime appear in
//!   and leave object storage.
//! - Bad settings and restore arguments: one line each, nothing changed; a
//!   replicator without credentials still serves its socket.
//! - `sasha up` replicating, its whole state folder lost, and back with
//!   `sasha restore` and the same `sasha up`.
//!
//! Each test starts its own server (nextest runs every test in its own
//! process); the bounds are small (2 s sync timeout in the outage test) so
//! the module stays within a minute or two of CI.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::expense_file::{assert_one_audit_row_and_receipt_per_row, categories};
use common::mcp::{self, Mcp};
use common::replica::{self, ObjectStorage, Sidecar};
use common::{
    Harness, RawResponse, RoleProcess, UpProcess, copy_dir, eventually, free_port, raw_http,
};
use nix::sys::signal::Signal;
use sasha_service::Role;
use serde_json::{Value, json};
use studio_store::{AppAccess, Store, UserRole};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const APP: &str = "expense-log";
const CREATE: &str = "app__expense_log__categories__create";
const LIST: &str = "app__expense_log__categories__list";
const WRITERS: usize = 8;
const PASSWORD: &str = "correct horse battery";
const STUDIO_HOST: &str = "localhost:3007";
/// The replica prefix every test writes under.
const PREFIX: &str = "prod";

/// The people of a prepared state folder, by their Studio sessions.
struct People {
    staff_id: String,
    staff_session: String,
    admin_session: String,
    member_session: String,
    member_id: String,
}

/// The example app whose page hands documents to the assistant (files).
const FILES_APP: &str = "document-summariser";

/// Puts expense-log and the document summariser in `state`'s docs and
/// creates a staff user (who manages both), an admin and a member, each
/// signed in.
fn prepare(state: &Path) -> People {
    copy_dir(&mcp::fixture(APP), &state.join("docs/apps").join(APP));
    copy_dir(
        &common::root().join("examples").join(FILES_APP),
        &state.join("docs/apps").join(FILES_APP),
    );
    let store = Store::open(&state.join("core.sqlite")).unwrap();
    let staff = store.create_user("sam", UserRole::Staff, PASSWORD).unwrap();
    let admin = store.create_user("ada", UserRole::Admin, PASSWORD).unwrap();
    let member = store
        .create_user("mia", UserRole::Member, PASSWORD)
        .unwrap();
    People {
        staff_id: staff.id.clone(),
        staff_session: store.create_session(&staff.id).unwrap(),
        admin_session: store.create_session(&admin.id).unwrap(),
        member_session: store.create_session(&member.id).unwrap(),
        member_id: member.id,
    }
}

/// The three roles over one state folder, data-worker and studio-core each
/// replicating through its own Litestream sidecar.
struct Stack {
    data: RoleProcess,
    core: RoleProcess,
    gateway: RoleProcess,
    data_sidecar: Sidecar,
    core_sidecar: Sidecar,
}

/// How a stack replicates.
struct Replicated<'a> {
    storage: &'a ObjectStorage,
    mode: &'a str,
    /// More variables for both roles (bounds).
    extra: &'a [(&'static str, String)],
    /// data-worker's fixed gRPC port, so it can come back where the others
    /// reach it.
    data_port: u16,
}

impl Replicated<'_> {
    /// The environment of `role` over `state` with its socket below
    /// `sockets`.
    fn env(&self, state: &Path, sockets: &Path, role: Role) -> Vec<(&'static str, String)> {
        let socket = sockets.join(format!("{role}.sock"));
        let mut env = replica::role_env(self.storage, PREFIX, &socket, self.mode);
        env.push(("SASHA_STATE_DIR", state.display().to_string()));
        env.push((
            "SASHA_DATA_GRPC_ADDR",
            format!("127.0.0.1:{}", self.data_port),
        ));
        env.push((
            "SASHA_DATA_GRPC_URL",
            format!("https://127.0.0.1:{}", self.data_port),
        ));
        env.extend(self.extra.iter().cloned());
        env
    }

    /// data-worker's sidecar and data-worker.
    async fn start_data(
        &self,
        harness: &Harness,
        state: &Path,
        sockets: &Path,
    ) -> (Sidecar, RoleProcess) {
        let sidecar = Sidecar::start(&sockets.join("data-worker.sock")).await;
        let data = harness
            .start(
                Role::DataWorker,
                &self.env(state, sockets, Role::DataWorker),
            )
            .await;
        (sidecar, data)
    }

    /// Every role, replicating.
    async fn start(&self, harness: &Harness, state: &Path) -> Stack {
        let sockets = harness.path().join("sockets");
        let (data_sidecar, data) = self.start_data(harness, state, &sockets).await;
        let core_sidecar = Sidecar::start(&sockets.join("studio-core.sock")).await;
        let core = harness
            .start(
                Role::StudioCore,
                &self.env(state, &sockets, Role::StudioCore),
            )
            .await;
        let gateway = harness
            .start(
                Role::McpGateway,
                &[
                    ("SASHA_STATE_DIR", state.display().to_string()),
                    (
                        "SASHA_DATA_GRPC_URL",
                        format!("https://127.0.0.1:{}", self.data_port),
                    ),
                    (
                        "SASHA_CORE_GRPC_URL",
                        format!("https://{}", core.listener("grpc")),
                    ),
                ],
            )
            .await;
        Stack {
            data,
            core,
            gateway,
            data_sidecar,
            core_sidecar,
        }
    }
}

impl Stack {
    fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.gateway.listener("http"))
    }

    /// One Studio API request as the browser sends it.
    async fn studio(
        &self,
        method: &str,
        path: &str,
        session: &str,
        body: Option<Value>,
    ) -> RawResponse {
        let body = body.map(|body| body.to_string());
        let content = match &body {
            Some(body) => format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ),
            None => "Content-Length: 0\r\n".to_owned(),
        };
        raw_http(
            self.core.listener("http"),
            &format!(
                "{method} {path} HTTP/1.1\r\nHost: {STUDIO_HOST}\r\nCookie: sasha_session={session}\r\n\
                 Origin: {}\r\n{content}Connection: close\r\n\r\n{}",
                mcp::STUDIO_ORIGIN,
                body.unwrap_or_default()
            ),
        )
        .await
    }

    /// `/healthz` of studio-core: both roles' replication.
    async fn replication_health(&self) -> Value {
        let health = raw_http(
            self.core.listener("http"),
            &format!("GET /healthz HTTP/1.1\r\nHost: {STUDIO_HOST}\r\nConnection: close\r\n\r\n"),
        )
        .await;
        health.json()["replication"].clone()
    }
}

/// Grants the member `use` of expense-log as the admin, once the
/// catalogue has registered the app (until then the answer is 404).
async fn grant_once_registered(stack: &Stack, people: &People) {
    let path = format!("/api/apps/{APP}/access/{}", people.member_id);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let response = stack
            .studio(
                "PUT",
                &path,
                &people.admin_session,
                Some(json!({"access": "use"})),
            )
            .await;
        if response.status == 200 {
            return;
        }
        assert_eq!(response.status, 404, "{}", response.body);
        assert!(
            tokio::time::Instant::now() < deadline,
            "expense-log was never registered"
        );
        // The catalogue registers it in studio-core's process: look again.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What one create answered.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    /// Acknowledged: the row's id.
    Ack(i64),
    /// A tool error envelope.
    Refused { code: String, retryable: bool },
    /// No answer, or not an MCP one (a role gone).
    Failed(String),
}

/// Creates the category named `key` with idempotency key `key`.
async fn create_category(client: &mut Mcp, key: &str) -> Answer {
    let exchange = match client
        .try_request(
            "tools/call",
            json!({"name": CREATE, "arguments": {"values": {"name": key}, "idempotencyKey": key}}),
        )
        .await
    {
        Ok(exchange) => exchange,
        Err(error) => return Answer::Failed(error),
    };
    if exchange.status != 200 || exchange.body.get("error").is_some() {
        return Answer::Failed(format!("{} {}", exchange.status, exchange.body));
    }
    let result = &exchange.body["result"];
    if result["isError"] == true {
        let envelope = &result["structuredContent"]["error"];
        return Answer::Refused {
            code: envelope["code"].as_str().unwrap_or_default().to_owned(),
            retryable: envelope["retryable"] == true,
        };
    }
    match result["structuredContent"]["id"].as_i64() {
        Some(id) => Answer::Ack(id),
        None => Answer::Failed(format!("no id in {result}")),
    }
}

/// What the writers saw.
#[derive(Default)]
struct Writes {
    /// Key (also the category's name) to row id, for every acknowledged
    /// create.
    acknowledged: BTreeMap<String, i64>,
    /// Keys whose create was not acknowledged, with what came back.
    unacknowledged: BTreeMap<String, String>,
    /// Failures before anything was killed (there must be none).
    early: Vec<String>,
}

/// [`WRITERS`] writers, each creating `w<n>-<i>` until its first failure
/// (or [`Writers::finish`]); a failure before [`Writers::killing`] is
/// recorded as early.
struct Writers {
    killed: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    writes: Arc<Mutex<Writes>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Writers {
    fn spawn(url: &str, session: &str) -> Writers {
        let killed = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let writes: Arc<Mutex<Writes>> = Arc::default();
        let tasks = (0..WRITERS)
            .map(|writer| {
                let mut client = Mcp::studio_page(url, session, APP);
                let (killed, stop, writes) = (killed.clone(), stop.clone(), writes.clone());
                tokio::spawn(async move {
                    for n in 0.. {
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let key = format!("w{writer}-{n}");
                        let answer = create_category(&mut client, &key).await;
                        let mut writes = writes.lock().unwrap();
                        match answer {
                            Answer::Ack(id) => {
                                writes.acknowledged.insert(key, id);
                            }
                            other => {
                                if !killed.load(Ordering::SeqCst) {
                                    writes.early.push(format!("{key}: {other:?}"));
                                }
                                writes.unacknowledged.insert(key, format!("{other:?}"));
                                return;
                            }
                        }
                    }
                })
            })
            .collect();
        Writers {
            killed,
            stop,
            writes,
            tasks,
        }
    }

    /// Waits until `count` writes are acknowledged, none failing early.
    async fn acknowledged_at_least(&self, count: usize) {
        eventually(Duration::from_secs(90), "the writers' progress", || {
            let writes = self.writes.clone();
            async move {
                let writes = writes.lock().unwrap();
                assert!(writes.early.is_empty(), "{:?}", writes.early);
                writes.acknowledged.len() >= count
            }
        })
        .await;
    }

    /// From now on a failure is expected (a role is about to be killed).
    fn killing(&self) {
        self.killed.store(true, Ordering::SeqCst);
    }

    /// Stops every writer and answers what they saw; none failed early.
    async fn finish(self) -> Writes {
        self.stop.store(true, Ordering::SeqCst);
        for task in self.tasks {
            tokio::time::timeout(Duration::from_secs(60), task)
                .await
                .expect("every writer stops")
                .unwrap();
        }
        let writes = Arc::try_unwrap(self.writes)
            .ok()
            .unwrap()
            .into_inner()
            .unwrap();
        assert!(writes.early.is_empty(), "{:?}", writes.early);
        writes
    }
}

/// Retries every key the writers sent through `stack` and checks the app
/// file afterwards: each key exactly once, the acknowledged ones with their
/// original ids, one audit row and receipt per row.
async fn retry_every_key_and_check(stack: &Stack, session: &str, writes: &Writes, file: &Path) {
    let mut client = Mcp::studio_page(&stack.mcp_url(), session, APP);
    let mut landed = BTreeMap::new();
    for key in writes
        .acknowledged
        .keys()
        .chain(writes.unacknowledged.keys())
    {
        match create_category(&mut client, key).await {
            Answer::Ack(id) => {
                landed.insert(key.clone(), id);
            }
            other => panic!("the retry of {key} was not acknowledged: {other:?}"),
        }
    }
    for (key, id) in &writes.acknowledged {
        assert_eq!(landed[key], *id, "{key}'s retry replays its receipt");
    }
    let rows = categories(file);
    assert_eq!(rows, landed, "every key exactly once, nothing else");
    assert_one_audit_row_and_receipt_per_row(file);
}

/// Removes a database file as a lost volume would take it: the file, its
/// WAL and shared memory, its generation record and Litestream's state.
fn lose_database(file: &Path) {
    for path in [
        file.to_path_buf(),
        Path::new(&format!("{}-wal", file.display())).to_path_buf(),
        Path::new(&format!("{}-shm", file.display())).to_path_buf(),
        sasha_replica::layout::marker_path(file),
    ] {
        let _ = std::fs::remove_file(path);
    }
    let _ = std::fs::remove_dir_all(sasha_replica::layout::litestream_meta_path(file));
}

#[tokio::test]
async fn sync_replication_loses_no_acknowledged_write_with_the_volumes() {
    let storage = ObjectStorage::start().await;
    let harness = Harness::new();
    let state = harness.path().to_path_buf();
    let people = prepare(&state);
    let replicated = Replicated {
        storage: &storage,
        mode: "sync",
        extra: &[],
        data_port: free_port(),
    };
    let stack = replicated.start(&harness, &state).await;

    let writers = Writers::spawn(&stack.mcp_url(), &people.staff_session);

    // Meanwhile an admin grants the member expense-log and creates an app
    // (its first revision is published in the ledger): both acknowledged.
    grant_once_registered(&stack, &people).await;
    let created = stack
        .studio(
            "POST",
            "/api/apps",
            &people.admin_session,
            Some(json!({"app": "field-notes", "name": "Field notes", "description": "Notes from the field", "withTable": true})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let revision = created.json()["status"]["revision"]
        .as_str()
        .unwrap()
        .to_owned();

    // A document handed to the assistant: a row of the core database,
    // acknowledged once replicated with it.
    let mut summariser = Mcp::studio_page(&stack.mcp_url(), &people.staff_session, FILES_APP);
    let uploaded = summariser
        .call(
            "sasha__files_upload",
            json!({"files": [{"name": "brief.txt", "type": "text/plain", "size": 21, "dataBase64": "VGhlIGJyaWVmLCBiYWNrZWQgdXAu"}]}),
        )
        .await;
    assert_eq!(
        mcp::structured(&uploaded)["files"][0]["converted"],
        "brief.md",
        "{}",
        uploaded.body
    );

    // Health shows both roles replicating, in sync mode.
    let health = stack.replication_health().await;
    for role in ["studio-core", "data-worker"] {
        assert_eq!(health[role]["mode"], "sync", "{health}");
        assert_eq!(health[role]["ok"], true, "{health}");
    }
    assert_eq!(
        health["studio-core"]["databases"][0]["database"], "core",
        "{health}"
    );

    writers.acknowledged_at_least(60).await;

    // Both roles' nodes are lost mid-stream, with their volumes.
    writers.killing();
    stack.data.signal(Signal::SIGKILL);
    stack.core.signal(Signal::SIGKILL);
    let Stack {
        data,
        core,
        gateway,
        data_sidecar,
        core_sidecar,
    } = stack;
    data_sidecar.kill();
    core_sidecar.kill();
    std::fs::remove_dir_all(state.join("apps")).unwrap();
    lose_database(&state.join("core.sqlite"));
    let writes = writers.finish().await;
    drop((data, core, gateway));

    // A document a build before uploads moved into the core database
    // mirrored as an object of its own.
    storage
        .store(PREFIX)
        .put_file(
            &sasha_replica::files::upload_path(&people.staff_id, "older.md").unwrap(),
            b"Mirrored by an earlier build.\n".to_vec(),
        )
        .await
        .unwrap();

    // `sasha restore` into a fresh state folder.
    let fresh = Harness::new();
    let restored_state = fresh.path().join("state");
    let (code, stdout, stderr) = replica::restore(&[
        "--from",
        &storage.url(PREFIX),
        "--state-dir",
        &restored_state.display().to_string(),
    ])
    .await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(restored_state.join("restore-manifest.json")).unwrap(),
    )
    .unwrap();
    let databases: BTreeSet<&str> = manifest["databases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            assert_eq!(entry["integrityCheck"], "ok", "{entry}");
            entry["database"].as_str().unwrap()
        })
        .collect();
    assert!(
        databases.contains("core") && databases.contains(APP),
        "{manifest}"
    );

    // Every acknowledged write is there exactly once, before any retry.
    let app_file = restored_state.join(format!("apps/{APP}.sqlite"));
    let restored = categories(&app_file);
    for (key, id) in &writes.acknowledged {
        assert_eq!(
            restored.get(key),
            Some(id),
            "acknowledged write {key} survived"
        );
    }
    for key in restored.keys() {
        assert!(
            writes.acknowledged.contains_key(key) || writes.unacknowledged.contains_key(key),
            "{key} was written by a writer"
        );
    }
    assert_one_audit_row_and_receipt_per_row(&app_file);

    // The acknowledged grant and published revision survived the core
    // database's volume; the app's package is back from the ledger.
    // The uploaded document is in the restored core database, and the one
    // an earlier build mirrored was imported into it, under its name.
    {
        let core = Store::open(&restored_state.join("core.sqlite")).unwrap();
        assert_eq!(
            core.access(APP, &people.member_id).unwrap(),
            Some(AppAccess::Use)
        );
        let app = core.registered_app("field-notes").unwrap().unwrap();
        assert_eq!(app.current_revision, revision);
        let document = core.upload(&people.staff_id, "brief.md").unwrap().unwrap();
        assert!(document.contains("The brief, backed up."), "{document}");
        assert_eq!(
            core.upload(&people.staff_id, "older.md")
                .unwrap()
                .as_deref(),
            Some("Mirrored by an earlier build.\n")
        );
    }
    assert_eq!(manifest["uploads"]["imported"], 1, "{manifest}");
    assert!(
        restored_state
            .join("docs/apps/field-notes/APP.md")
            .is_file()
    );
    assert!(restored_state.join("docs/apps").join(APP).is_dir());
    eprintln!(
        "sync: {} acknowledged, {} unacknowledged at the kill, 0 acknowledged lost",
        writes.acknowledged.len(),
        writes.unacknowledged.len()
    );

    // The restored folder serves, replicating again; every retry lands once.
    let again = Replicated {
        storage: &storage,
        mode: "sync",
        extra: &[],
        data_port: free_port(),
    };
    let stack = again.start(&fresh, &restored_state).await;
    retry_every_key_and_check(&stack, &people.staff_session, &writes, &app_file).await;
    // The member's restored grant works through the restored stack.
    let mut member = Mcp::studio_page(&stack.mcp_url(), &people.member_session, APP);
    let listed = member.call(LIST, json!({"limit": 1})).await;
    assert_eq!(
        mcp::structured(&listed)["rows"].as_array().unwrap().len(),
        1
    );
    // The restored databases began new generations beside the old ones,
    // confirmed in object storage before the roles served.
    for database in ["core/", &format!("apps/{APP}/")] {
        let generations = storage.children(PREFIX, database).await;
        assert_eq!(generations.len(), 2, "{database}: {generations:?}");
        for generation in generations {
            let objects = storage
                .object_count(PREFIX, &format!("{database}{generation}/"))
                .await;
            assert!(objects > 0, "{database}{generation} holds data");
        }
    }
}

#[tokio::test]
async fn async_replication_reports_the_acknowledged_writes_a_lost_volume_takes() {
    let storage = ObjectStorage::start().await;
    let harness = Harness::new();
    let state = harness.path().to_path_buf();
    let people = prepare(&state);
    let replicated = Replicated {
        storage: &storage,
        mode: "async",
        extra: &[],
        data_port: free_port(),
    };
    let stack = replicated.start(&harness, &state).await;
    let writers = Writers::spawn(&stack.mcp_url(), &people.staff_session);
    writers.acknowledged_at_least(150).await;

    writers.killing();
    stack.data.signal(Signal::SIGKILL);
    let Stack {
        data,
        core,
        gateway,
        data_sidecar,
        core_sidecar,
    } = stack;
    data_sidecar.kill();
    drop(data);
    std::fs::remove_dir_all(state.join("apps")).unwrap();
    let writes = writers.finish().await;

    // data-worker comes back where the others reach it and restores its
    // lost databases from object storage before it serves.
    let sockets = harness.path().join("sockets");
    let (data_sidecar, data) = replicated.start_data(&harness, &state, &sockets).await;
    let app_file = state.join(format!("apps/{APP}.sqlite"));
    assert!(app_file.is_file(), "restored at boot");
    let restored = categories(&app_file);
    let lost: Vec<&String> = writes
        .acknowledged
        .iter()
        .filter(|(key, id)| restored.get(*key) != Some(id))
        .map(|(key, _)| key)
        .collect();
    for key in restored.keys() {
        assert!(
            writes.acknowledged.contains_key(key) || writes.unacknowledged.contains_key(key),
            "{key} was written by a writer"
        );
    }
    assert!(
        lost.len() < writes.acknowledged.len(),
        "some writes survived"
    );
    eprintln!(
        "async RPO: {} of {} acknowledged writes lost with the volume ({} unacknowledged at the kill)",
        lost.len(),
        writes.acknowledged.len(),
        writes.unacknowledged.len()
    );
    assert_one_audit_row_and_receipt_per_row(&app_file);

    // Retries land exactly once, the lost ones included.
    let stack = Stack {
        data,
        core,
        gateway,
        data_sidecar,
        core_sidecar,
    };
    let mut client = Mcp::studio_page(&stack.mcp_url(), &people.staff_session, APP);
    let mut landed = BTreeMap::new();
    for key in writes
        .acknowledged
        .keys()
        .chain(writes.unacknowledged.keys())
    {
        match create_category(&mut client, key).await {
            Answer::Ack(id) => {
                landed.insert(key.clone(), id);
            }
            other => panic!("the retry of {key} was not acknowledged: {other:?}"),
        }
    }
    for (key, id) in &writes.acknowledged {
        if !lost.contains(&key) {
            assert_eq!(landed[key], *id, "{key}'s retry replays its receipt");
        }
    }
    assert_eq!(categories(&app_file), landed);
    assert_one_audit_row_and_receipt_per_row(&app_file);
}

#[tokio::test]
async fn sync_writes_are_refused_while_object_storage_is_stopped_and_resume_after() {
    let storage = ObjectStorage::start().await;
    let harness = Harness::new();
    let state = harness.path().to_path_buf();
    let people = prepare(&state);
    let bounds = [
        ("SASHA_REPLICA_SYNC_TIMEOUT_SECS", "2".to_owned()),
        ("SASHA_REPLICA_MAX_LAG_SECS", "2".to_owned()),
    ];
    let replicated = Replicated {
        storage: &storage,
        mode: "sync",
        extra: &bounds,
        data_port: free_port(),
    };
    let stack = replicated.start(&harness, &state).await;
    let mut client = Mcp::studio_page(&stack.mcp_url(), &people.staff_session, APP);
    assert!(matches!(
        create_category(&mut client, "before").await,
        Answer::Ack(_)
    ));
    let grant_path = format!("/api/apps/{APP}/access/{}", people.member_id);

    // Stopped for at least 10 s. Frozen (SIGSTOP) rather than killed: a new
    // `weed mini` cannot bind the same ports while their old connections
    // linger in TIME_WAIT, and a frozen server is the harder case (requests
    // hang until the timeout instead of failing at once).
    storage.pause();
    let stopped = tokio::time::Instant::now();
    let mut refused = Vec::new();
    let mut lag_logged = false;
    let mut core_refused = false;
    while stopped.elapsed() < Duration::from_secs(10) || !lag_logged || !core_refused {
        assert!(
            stopped.elapsed() < Duration::from_secs(60),
            "lag logged: {lag_logged}, core refused: {core_refused}"
        );
        let key = format!("during-{}", refused.len());
        let answer = create_category(&mut client, &key).await;
        assert_eq!(
            answer,
            Answer::Refused {
                code: "APP_DATABASE_UNAVAILABLE".to_owned(),
                retryable: true
            },
            "{key} while object storage is stopped"
        );
        refused.push(key);
        // Reads go on.
        let listed = client.call(LIST, json!({"limit": 5})).await;
        assert!(
            !mcp::structured(&listed)["rows"]
                .as_array()
                .unwrap()
                .is_empty()
        );
        if !core_refused {
            // A core write is refused the same way, after it committed.
            let response = stack
                .studio(
                    "PUT",
                    &grant_path,
                    &people.admin_session,
                    Some(json!({"access": "use"})),
                )
                .await;
            if response.status == 503 {
                let envelope = response.json();
                assert_eq!(envelope["code"], "APP_DATABASE_UNAVAILABLE", "{envelope}");
                assert_eq!(envelope["retryable"], true, "{envelope}");
                core_refused = true;
            } else {
                // The catalogue has not registered the app yet.
                assert_eq!(response.status, 404, "{}", response.body);
            }
        }
        lag_logged = stack.data.stderr().contains("replication: lag is growing");
    }
    let health = stack.replication_health().await;
    assert_eq!(health["data-worker"]["ok"], false, "{health}");
    assert!(
        health["data-worker"]["databases"][0]["error"].is_string(),
        "{health}"
    );
    let page = stack
        .studio("GET", "/api/admin/replication", &people.admin_session, None)
        .await;
    assert_eq!(
        page.json()["roles"]["data-worker"]["ok"],
        false,
        "{}",
        page.body
    );

    // Storage returns; the same process acknowledges writes again.
    storage.resume();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match create_category(&mut client, &refused[0]).await {
            Answer::Ack(_) => break,
            Answer::Refused {
                code,
                retryable: true,
            } if code == "APP_DATABASE_UNAVAILABLE" => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "writes were not acknowledged again"
                );
                // Storage's return is seen by the role's replicator, in
                // another process: look again shortly.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("{other:?}"),
        }
    }
    let mut landed = BTreeMap::new();
    for key in std::iter::once(&"before".to_owned()).chain(refused.iter()) {
        match create_category(&mut client, key).await {
            Answer::Ack(id) => {
                landed.insert(key.clone(), id);
            }
            other => panic!("{key}: {other:?}"),
        }
    }
    let app_file = state.join(format!("apps/{APP}.sqlite"));
    assert_eq!(categories(&app_file), landed, "each refused write once");
    assert_one_audit_row_and_receipt_per_row(&app_file);
    let granted = stack
        .studio(
            "PUT",
            &grant_path,
            &people.admin_session,
            Some(json!({"access": "use"})),
        )
        .await;
    assert_eq!(granted.status, 200, "{}", granted.body);
    eventually(Duration::from_secs(30), "health ok again", || async {
        stack.replication_health().await["data-worker"]["ok"] == true
    })
    .await;
    assert!(
        stack
            .data
            .stderr()
            .contains("replication: object storage confirms writes again"),
        "{}",
        stack.data.stderr()
    );
}

/// The current time, RFC 3339 with nanoseconds.
fn now_text() -> String {
    OffsetDateTime::now_utc().format(&Rfc3339).unwrap()
}

#[tokio::test]
async fn a_restore_at_an_instant_gives_exactly_the_state_before_it() {
    let storage = ObjectStorage::start().await;
    let harness = Harness::new();
    let state = harness.path().to_path_buf();
    let people = prepare(&state);
    let replicated = Replicated {
        storage: &storage,
        mode: "sync",
        extra: &[],
        data_port: free_port(),
    };
    let stack = replicated.start(&harness, &state).await;
    let mut client = Mcp::studio_page(&stack.mcp_url(), &people.staff_session, APP);
    assert!(matches!(
        create_category(&mut client, "earlier").await,
        Answer::Ack(_)
    ));
    // An instant strictly between the two acknowledged writes. Litestream
    // stamps its LTX files with the wall clock and `--at` is read against
    // it, so the gap must be real time, not an injected clock; 300 ms each
    // side is well above its millisecond resolution and clock jitter.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let between = now_text();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(matches!(
        create_category(&mut client, "later").await,
        Answer::Ack(_)
    ));

    let out = tempfile::tempdir().unwrap();
    let restore_into = |name: &str, extra: &[&str]| {
        let state = out.path().join(name);
        let mut args = vec![
            "--from".to_owned(),
            storage.url(PREFIX),
            "--state-dir".to_owned(),
            state.display().to_string(),
        ];
        args.extend(extra.iter().map(|arg| (*arg).to_owned()));
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, stdout, stderr) = replica::restore(&args).await;
            assert_eq!(code, Some(0), "{stdout}{stderr}");
            state
        }
    };
    let names = |state: &Path| -> Vec<String> {
        categories(&state.join(format!("apps/{APP}.sqlite")))
            .into_keys()
            .collect()
    };
    let at = restore_into("at", &["--at", &between]).await;
    assert_eq!(names(&at), ["earlier"]);
    let one = restore_into("one", &["--at", &between, "--app", APP]).await;
    assert_eq!(names(&one), ["earlier"]);
    assert!(!one.join("core.sqlite").exists(), "only the app");
    let latest = restore_into("latest", &[]).await;
    assert_eq!(names(&latest), ["earlier", "later"]);

    // Before the first generation: one line, nothing created.
    let early = out.path().join("too-early");
    let (code, stdout, stderr) = replica::restore(&[
        "--from",
        &storage.url(PREFIX),
        "--state-dir",
        &early.display().to_string(),
        "--at",
        "2001-01-01T00:00:00Z",
    ])
    .await;
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("before the first generation of the core database"),
        "{stderr}"
    );
    assert!(!early.exists());

    // Online, the app staying live: a row rewritten behind the platform's
    // back is one the ledger never saw change. A restore from the replica
    // compares the rows with object storage's copy at the instant: it
    // shows that row as a conflict (changed outside) and, named, puts it
    // back, with the later row removed.
    let live = state.join(format!("apps/{APP}.sqlite"));
    let tampered = rusqlite::Connection::open(&live).unwrap();
    tampered.busy_timeout(Duration::from_secs(5)).unwrap();
    tampered
        .execute(
            "UPDATE categories SET name = 'tampered' WHERE name = 'earlier'",
            [],
        )
        .unwrap();
    drop(tampered);
    let restore = json!({"app": APP, "asOf": between, "from": "replica"});
    let preview = mcp::structured(&client.call("previewAppUndo", restore.clone()).await).clone();
    assert_eq!(
        (&preview["from"], &preview["rows"], &preview["conflicts"]),
        (&json!("replica"), &json!(2), &json!(1)),
        "{preview}"
    );
    let plan: Vec<(Value, Value)> = preview["page"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| (row["action"].clone(), row["conflict"]["reason"].clone()))
        .collect();
    assert_eq!(
        plan,
        [
            (json!("update"), json!("changed-outside")),
            (json!("delete"), Value::Null)
        ],
        "{preview}"
    );
    assert_eq!(preview["page"][0]["target"]["name"], "earlier", "{preview}");
    // The ledger alone restores the later row only.
    let ledger = mcp::structured(
        &client
            .call("previewAppUndo", json!({"app": APP, "asOf": between}))
            .await,
    )
    .clone();
    assert_eq!(
        (&ledger["from"], &ledger["rows"]),
        (&json!("ledger"), &json!(1)),
        "{ledger}"
    );
    let mut apply = restore.clone();
    apply["planHash"] = preview["planHash"].clone();
    apply["overwrite"] = json!([{"table": "categories", "id": preview["page"][0]["id"]}]);
    let done = mcp::structured(&client.call("undoAppChanges", apply).await).clone();
    assert_eq!(
        (&done["updated"], &done["deleted"], &done["leftAlone"]),
        (&json!(1), &json!(1), &json!([])),
        "{done}"
    );
    assert_eq!(
        categories(&live).into_keys().collect::<Vec<_>>(),
        ["earlier"]
    );
    // An instant before the app's first copy, and one that is not a time:
    // each said, nothing changed.
    for (as_of, says) in [
        ("2001-01-01T00:00:00Z", "holds no copy of this app's data"),
        ("yesterday", "not an RFC 3339 time"),
    ] {
        let refused = client
            .call(
                "previewAppUndo",
                json!({"app": APP, "asOf": as_of, "from": "replica"}),
            )
            .await;
        let envelope = mcp::tool_error(&refused);
        assert_eq!(envelope["code"], "APP_INPUT_INVALID", "{envelope}");
        assert!(
            envelope["message"].as_str().unwrap().contains(says),
            "{envelope}"
        );
    }
    assert_eq!(
        categories(&live).into_keys().collect::<Vec<_>>(),
        ["earlier"]
    );
    assert_eq!(
        std::fs::read_dir(state.join("apps/.restores"))
            .unwrap()
            .count(),
        0,
        "the copy read from object storage is gone"
    );
    drop(stack);
}

/// The minimal member app App Studio deploys, with one owner-scoped table
/// `habits`.
fn member_package() -> Value {
    let schema = "CREATE TABLE habits (\n  id INTEGER PRIMARY KEY,\n  title TEXT NOT NULL,\n  created_by TEXT NOT NULL\n);\n";
    json!({
        "APP.md": "---\nid: habits\nname: Habits\ndescription: Habits kept each day\nversion: 0.1.0\ntheme: none\ncapabilities:\n  data: read-write\ntables:\n  habits:\n    access: owner\n    ownerField: created_by\n---\n# Habits\n\nEach person's habits.\n",
        "index.html": "<!doctype html>\n<html lang=\"en\">\n<head>\n  <meta charset=\"utf-8\">\n  <title>Habits</title>\n  <link rel=\"stylesheet\" href=\"styles.css\">\n</head>\n<body>\n  <main><h1>Habits</h1></main>\n  <script src=\"app.js\"></script>\n</body>\n</html>\n",
        "styles.css": "main { padding: 1rem; }\n",
        "app.js": "document.querySelector('h1').textContent = 'Habits';\n",
        "schema.sql": schema,
        "migrations/001-initial.sql": schema,
    })
}

/// The app ids object storage holds a replica of.
async fn replicated_apps(storage: &ObjectStorage) -> BTreeSet<String> {
    storage
        .children(PREFIX, "apps/")
        .await
        .into_iter()
        .collect()
}

#[tokio::test]
async fn apps_created_deployed_and_deleted_at_runtime_come_and_go_in_object_storage() {
    let storage = ObjectStorage::start().await;
    let harness = Harness::new();
    let state = harness.path().to_path_buf();
    let people = prepare(&state);
    let replicated = Replicated {
        storage: &storage,
        mode: "sync",
        extra: &[],
        data_port: free_port(),
    };
    let stack = replicated.start(&harness, &state).await;

    // A catalogue app created at runtime, with a row.
    let created = stack
        .studio(
            "POST",
            "/api/apps",
            &people.admin_session,
            Some(json!({"app": "field-notes", "name": "Field notes", "description": "Notes from the field", "withTable": true})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let mut admin = Mcp::studio_page(&stack.mcp_url(), &people.admin_session, "field-notes");
    let row = admin
        .call(
            "app__field_notes__items__create",
            json!({"values": {"title": "Bridge inspected"}, "idempotencyKey": "n1"}),
        )
        .await;
    mcp::structured(&row);
    // A member app deployed at runtime, with a row.
    let deployed = stack
        .studio(
            "POST",
            "/api/member-apps",
            &people.member_session,
            Some(json!({"name": "Habits", "files": member_package()})),
        )
        .await;
    assert_eq!(deployed.status, 201, "{}", deployed.body);
    let member_app = deployed.json()["app"]["id"].as_str().unwrap().to_owned();
    let mut member = Mcp::studio_page(&stack.mcp_url(), &people.member_session, &member_app);
    let row = member
        .call(
            &format!("app__{}__habits__create", member_app.replace('-', "_")),
            json!({"values": {"title": "Walk"}, "idempotencyKey": "h1"}),
        )
        .await;
    mcp::structured(&row);
    // Both are in object storage: each row was acknowledged only once there.
    let apps = replicated_apps(&storage).await;
    assert!(
        apps.contains("field-notes") && apps.contains(&member_app),
        "{apps:?}"
    );
    assert!(
        storage
            .object_count(PREFIX, &format!("apps/{member_app}/"))
            .await
            > 0
    );

    // Deleted at runtime: their replicas go with their files.
    let deleted = stack
        .studio(
            "DELETE",
            &format!("/api/member-apps/{member_app}"),
            &people.member_session,
            None,
        )
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    eventually(
        Duration::from_secs(30),
        "the member app's replica deleted",
        || {
            let (storage, member_app) = (&storage, &member_app);
            async move { !replicated_apps(storage).await.contains(member_app) }
        },
    )
    .await;
    assert!(!state.join(format!("apps/{member_app}.sqlite")).exists());
    let withdrawn = stack
        .studio(
            "POST",
            "/api/apps/field-notes/withdraw",
            &people.admin_session,
            None,
        )
        .await;
    assert_eq!(withdrawn.status, 200, "{}", withdrawn.body);
    let deleted = stack
        .studio(
            "POST",
            "/api/apps/field-notes/delete",
            &people.admin_session,
            Some(json!({"deleteData": true, "confirmAppId": "field-notes"})),
        )
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    assert!(!replicated_apps(&storage).await.contains("field-notes"));
    assert_eq!(
        storage.object_count(PREFIX, "apps/field-notes/").await,
        0,
        "nothing of it is left"
    );
    drop(stack);
}

/// A refused `sasha restore`: its arguments, extra environment, exit code
/// and what its one line says.
type RestoreRefusal<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], i32, &'a str);

#[tokio::test]
async fn bad_replica_settings_and_restore_arguments_are_one_line_each_and_change_nothing() {
    let storage = ObjectStorage::start().await;
    let harness = Harness::new();
    let socket = harness.path().join("sockets/data-worker.sock");
    let good = replica::role_env(&storage, PREFIX, &socket, "sync");
    let env = |changes: &[(&'static str, String)]| -> Vec<(&'static str, String)> {
        let mut env = good.clone();
        for (name, value) in changes {
            env.retain(|(existing, _)| existing != name);
            env.push((name, value.clone()));
        }
        env
    };
    // A role stops at boot with one line naming the variable to fix.
    for (changes, names) in [
        (
            vec![("SASHA_REPLICA_URL", "s3://x/prod".to_owned())],
            "SASHA_REPLICA_URL",
        ),
        (
            vec![("AWS_SECRET_ACCESS_KEY", "not-the-secret".to_owned())],
            "AWS_ACCESS_KEY_ID",
        ),
        (
            vec![(
                "SASHA_REPLICA_URL",
                storage.url_in("no-such-bucket", PREFIX),
            )],
            "SASHA_REPLICA_URL",
        ),
        // Nothing listens where storage should be: the role waits its boot
        // wait (two seconds here) for a server starting beside it, then stops.
        (
            vec![
                (
                    "SASHA_REPLICA_URL",
                    format!(
                        "s3://sasha/{PREFIX}?endpoint=http://127.0.0.1:{}&region=us-east-1",
                        free_port()
                    ),
                ),
                ("SASHA_REPLICA_BOOT_WAIT_SECS", "2".to_owned()),
            ],
            "SASHA_REPLICA_URL",
        ),
    ] {
        let env = env(&changes);
        let env: Vec<(&str, &str)> = env
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .collect();
        let (status, stderr) = harness.boot_failure(Role::DataWorker, &env).await;
        assert!(!status.success(), "{changes:?}");
        let last = stderr.lines().last().unwrap_or_default();
        assert!(last.contains(names), "{changes:?}: {stderr}");
        assert!(!stderr.contains("not-the-secret"), "{stderr}");
    }
    assert!(
        !harness.path().join("apps").exists() || {
            std::fs::read_dir(harness.path().join("apps"))
                .unwrap()
                .flatten()
                .all(|entry| !entry.file_name().to_string_lossy().ends_with(".sqlite"))
        },
        "no database was created"
    );

    // A replicator deployed while replication is off has no credentials and
    // still serves its socket: a sidecar must not keep its pod from starting.
    let idle_socket = harness.path().join("sockets/idle.sock");
    let mut idle = tokio::process::Command::new(common::sasha_bin())
        .arg("litestream")
        .arg("--socket")
        .arg(&idle_socket)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("SASHA_LITESTREAM", replica::litestream())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let control = sasha_replica::control::Control::new(&idle_socket);
    eventually(
        Duration::from_secs(30),
        "the idle replicator's socket",
        || {
            let control = control.clone();
            async move { control.ping().await.is_ok() }
        },
    )
    .await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(idle.id().unwrap() as i32),
        Signal::SIGTERM,
    )
    .unwrap();
    let stopped = tokio::time::timeout(Duration::from_secs(20), idle.wait())
        .await
        .expect("it stops on SIGTERM")
        .unwrap();
    assert!(stopped.success(), "{stopped}");

    // `sasha restore`: one line each, exit 2 for what the operator must
    // change, and nothing created or changed.
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("state");
    let target_text = target.display().to_string();
    let good_url = storage.url(PREFIX);
    let closed = format!(
        "s3://{}/{PREFIX}?endpoint=http://127.0.0.1:{}&region=us-east-1",
        replica::BUCKET,
        free_port()
    );
    let no_bucket = storage.url_in("no-such-bucket", PREFIX);
    let cases: [RestoreRefusal<'_>; 6] = [
        (
            &["--from", "https://bucket/prefix"],
            &[],
            2,
            "--from: the scheme is \"https\"",
        ),
        (
            &["--from", &good_url],
            &[("AWS_SECRET_ACCESS_KEY", "not-the-secret")],
            2,
            "AWS_ACCESS_KEY_ID: object storage refused the credentials",
        ),
        (&["--from", &no_bucket], &[], 2, "does not exist"),
        (&["--from", &closed], &[], 1, "does not answer"),
        (&["--from", &good_url], &[], 2, "holds no core database"),
        (
            &["--from", &good_url, "--at", "yesterday"],
            &[],
            2,
            "--at: \"yesterday\" is not an RFC 3339 time",
        ),
    ];
    for (args, env, code, says) in cases {
        let mut args = args.to_vec();
        args.extend(["--state-dir", &target_text]);
        let (exit, stdout, stderr) = replica::restore_with(&args, env).await;
        assert_eq!(exit, Some(code), "{args:?}: {stdout}{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("sasha restore: "), "{stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("not-the-secret"), "{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        assert!(!target.exists(), "{args:?}: nothing is created");
    }
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "no staging folder is left behind"
    );

    // A non-empty state folder is refused before anything is read.
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("core.sqlite"), b"the operator's file").unwrap();
    let (exit, _, stderr) =
        replica::restore(&["--from", &good_url, "--state-dir", &target_text]).await;
    assert_eq!(exit, Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("is not empty"), "{stderr}");
    assert_eq!(
        std::fs::read(target.join("core.sqlite")).unwrap(),
        b"the operator's file"
    );
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 1);
    // With --app, an existing app file is refused the same way.
    std::fs::create_dir_all(target.join("apps")).unwrap();
    std::fs::write(target.join(format!("apps/{APP}.sqlite")), b"kept").unwrap();
    let (exit, _, stderr) = replica::restore(&[
        "--from",
        &good_url,
        "--state-dir",
        &target_text,
        "--app",
        APP,
    ])
    .await;
    assert_eq!(exit, Some(2), "{stderr}");
    assert!(stderr.contains("already exists"), "{stderr}");
    assert_eq!(
        std::fs::read(target.join(format!("apps/{APP}.sqlite"))).unwrap(),
        b"kept"
    );
}

/// The environment `sasha up` gets to replicate (it runs the replicators
/// and tells each role its socket).
fn up_env(storage: &ObjectStorage) -> Vec<(&'static str, String)> {
    vec![
        ("SASHA_BUNDLED_APPS", "off".to_owned()),
        ("SASHA_REPLICA_URL", storage.url(PREFIX)),
        (
            "SASHA_LITESTREAM",
            replica::litestream().display().to_string(),
        ),
        ("AWS_ACCESS_KEY_ID", replica::ACCESS_KEY.to_owned()),
        ("AWS_SECRET_ACCESS_KEY", replica::SECRET_KEY.to_owned()),
    ]
}

/// `sasha up` on `state` and `port` with `args`, replicating to `storage`.
async fn start_up(storage: &ObjectStorage, state: &Path, port: u16, args: &[&str]) -> UpProcess {
    let env = up_env(storage);
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    UpProcess::start_with_args(state, port, args, &env).await
}

/// Creates the category `name` from `page` once `sasha up` serves the app
/// (its catalogue registered it and, with several workers, its owner
/// serves it); the row's id.
async fn create_once_served(page: &mut Mcp, name: &str) -> i64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match create_category(page, name).await {
            Answer::Ack(id) => return id,
            other => {
                assert!(tokio::time::Instant::now() < deadline, "{other:?}");
                // Both happen in other processes: look again.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// The pid `sasha up` printed for `role`'s replicator.
fn replicator_pid(up: &UpProcess, role: Role) -> u32 {
    let prefix = format!("Started the replicator of {role} (pid ");
    up.stdout_text()
        .lines()
        .find_map(|line| line.strip_prefix(&prefix)?.strip_suffix(')')?.parse().ok())
        .unwrap_or_else(|| panic!("no replicator of {role}: {}", up.stdout_text()))
}

/// The Studio page of `sasha up` on `port` with expense-log open, signed in
/// with `cookie` (`name=value`).
fn up_page(port: u16, cookie: &str) -> Mcp {
    let studio = format!("http://localhost:{port}");
    Mcp::new(
        &format!("{studio}/mcp"),
        vec![
            ("cookie".to_owned(), cookie.to_owned()),
            ("origin".to_owned(), studio),
            ("sasha-app".to_owned(), APP.to_owned()),
        ],
        mcp::SESSIONLESS,
    )
}

#[tokio::test]
async fn sasha_up_replicates_and_its_state_comes_back_after_the_disk_is_lost() {
    let storage = ObjectStorage::start().await;
    let folder = tempfile::tempdir().unwrap();
    let state = folder.path().join("state");
    copy_dir(&mcp::fixture(APP), &state.join("docs/apps").join(APP));
    let port = free_port();
    let mut up = start_up(&storage, &state, port, &[]).await;
    let replicators = [
        replicator_pid(&up, Role::StudioCore),
        replicator_pid(&up, Role::DataWorker),
    ];
    let studio = format!("http://localhost:{port}");
    let (admin, cookie) = common::sign_in_dev_admin(&state, &studio).await;
    let mut page = up_page(port, &cookie);
    let id = create_once_served(&mut page, "kept").await;
    // /healthz through the dev ingress shows both roles replicating.
    let health = common::http_client()
        .get(format!("{studio}/healthz"))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    for role in ["studio-core", "data-worker"] {
        assert_eq!(health["replication"][role]["ok"], true, "{health}");
    }

    // Stopped, then the whole disk is lost.
    up.signal(Signal::SIGTERM);
    assert!(up.wait(Duration::from_secs(30)).await.success());
    common::wait_gone(&replicators, Duration::from_secs(20)).await;
    std::fs::remove_dir_all(&state).unwrap();

    // The documented recovery: restore, then the same `sasha up`.
    let (code, stdout, stderr) = replica::restore(&[
        "--from",
        &storage.url(PREFIX),
        "--state-dir",
        &state.display().to_string(),
    ])
    .await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // The admin's password is the one it had (dev-admin.json is the
    // operator's note of it, not replicated).
    std::fs::write(state.join("dev-admin.json"), admin.to_string()).unwrap();
    let up = start_up(&storage, &state, port, &[]).await;
    let (_, cookie) = common::sign_in_dev_admin(&state, &studio).await;
    let mut page = up_page(port, &cookie);
    let listed = page.call(LIST, json!({})).await;
    let rows = mcp::structured(&listed)["rows"].clone();
    let kept: Vec<(i64, &str)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|row| (row["id"].as_i64().unwrap(), row["name"].as_str().unwrap()))
        .collect();
    assert_eq!(kept, [(id, "kept")], "{rows}");
    assert!(matches!(
        create_category(&mut page, "after").await,
        Answer::Ack(_)
    ));
    drop(up);
}

/// `sasha up --workers 2` runs two leased data-workers beside one
/// studio-core: both hold a lease, the app is placed on one of them, served
/// through the dev ingress, and `sasha admin` lists both workers.
#[tokio::test]
async fn sasha_up_with_two_workers_places_each_app_on_one_leased_worker() {
    let storage = ObjectStorage::start().await;
    let folder = tempfile::tempdir().unwrap();
    let state = folder.path().join("state");
    copy_dir(&mcp::fixture(APP), &state.join("docs/apps").join(APP));
    let port = free_port();
    let up = start_up(&storage, &state, port, &["--workers", "2"]).await;
    let studio = format!("http://localhost:{port}");
    let (_, cookie) = common::sign_in_dev_admin(&state, &studio).await;
    let mut page = up_page(port, &cookie);
    let id = create_once_served(&mut page, "placed").await;
    let listed = page.call(LIST, json!({})).await;
    assert_eq!(mcp::structured(&listed)["rows"][0]["id"], id);

    let admin = |args: &[&str]| {
        let output = std::process::Command::new(common::sasha_bin())
            .arg("admin")
            .args(args)
            .args(["--state-dir", &state.display().to_string()])
            .envs(common::core_database::core_env(&state))
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let workers = admin(&["workers"]);
    let lines: Vec<&str> = workers.lines().collect();
    assert_eq!(lines.len(), 2, "{workers}");
    for (line, id) in lines.iter().zip(["worker-1", "worker-2"]) {
        assert!(line.starts_with(&format!("{id}\t")), "{workers}");
        assert!(
            line.contains("\treplicated\t") && line.contains("s left"),
            "{workers}"
        );
    }
    let placement = admin(&["apps", "placement"]);
    let row: Vec<&str> = placement
        .lines()
        .find(|line| line.starts_with(&format!("{APP}\t")))
        .unwrap_or_else(|| panic!("{placement}"))
        .split('\t')
        .collect();
    assert!(["worker-1", "worker-2"].contains(&row[1]), "{placement}");
    // The owner's own folder holds the app's file; the other's does not.
    let owner_file = state
        .join("workers")
        .join(row[1])
        .join("apps")
        .join(format!("{APP}.sqlite"));
    assert!(owner_file.exists(), "{}", owner_file.display());
    drop(up);
}
