//! Several data-workers sharing the data plane, as real processes on
//! loopback: studio-core on a real PostgreSQL control plane, data-workers
//! in the `leases` layout each with its own disk and its own Litestream
//! sidecar replicating in sync mode to a real S3 server (SeaweedFS), and
//! mcp-gateways routing by placement.
//!
//! - A worker SIGKILLed with its sidecar (a lost node) under eight keyed
//!   writers over twenty apps: its apps take writes again on the others,
//!   no acknowledged write is lost, none is written twice, one audit row
//!   and one receipt per row. The time each app took to come back is
//!   printed (the benchmark measures its distribution).
//! - Split brain: a worker SIGSTOPped past its lease, its apps moved, then
//!   SIGCONTed: every call it is sent for them is refused, the owner's
//!   forged and old epochs too, and no acknowledged write of either owner
//!   is lost.
//! - A drain under load: the worker's apps move one at a time, clients see
//!   only retryable answers, and a second gateway still holding the old
//!   routes answers its next call to each moved app without an error.
//!
//! Each test starts its own S3 server; PostgreSQL is the test run's one
//! server with a fresh database per test.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::expense_file::{assert_one_audit_row_and_receipt_per_row, categories};
use common::mcp::{self, Mcp};
use common::replica::{self, ObjectStorage, Sidecar};
use common::{Harness, RoleProcess, copy_dir, eventually};
use nix::sys::signal::Signal;
use sasha_contract::data::DataContract;
use sasha_proto::AppError;
use sasha_proto::convert::ToWire;
use sasha_proto::pb::{self, ExecuteRequest};
use sasha_service::identity::Identity;
use sasha_service::{Role, grpc};
use serde_json::{Value, json};
use studio_store::{Store, UserRole};

const PASSWORD: &str = "correct horse battery";
const PREFIX: &str = "placed";
const WRITERS: usize = 8;

/// The app ids: twenty copies of the expense-log fixture.
fn app_ids(count: usize) -> Vec<String> {
    (1..=count).map(|n| format!("books-{n:02}")).collect()
}

fn create_tool(app: &str) -> String {
    format!("app__{}__categories__create", app.replace('-', "_"))
}

fn list_tool(app: &str) -> String {
    format!("app__{}__categories__list", app.replace('-', "_"))
}

/// Runs blocking store work (PostgreSQL's client blocks) off the test's
/// async runtime.
fn off_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| scope.spawn(work).join().unwrap())
}

/// Rows of one query on the control plane, every column as text.
fn query(url: &str, sql: &str) -> Vec<Vec<String>> {
    let url = url.to_owned();
    let sql = sql.to_owned();
    off_runtime(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .query(&sql, &[])
            .unwrap()
            .iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| row.get::<_, Option<String>>(i).unwrap_or_default())
                    .collect()
            })
            .collect()
    })
}

/// One data-worker and its sidecar.
struct Worker {
    process: Option<RoleProcess>,
    sidecar: Option<Sidecar>,
    data_root: PathBuf,
}

/// The whole stack over one PostgreSQL database and one S3 server.
struct World {
    harness: Harness,
    url: String,
    /// The S3 server, stopped when the world is dropped.
    _storage: ObjectStorage,
    core: RoleProcess,
    gateway: RoleProcess,
    workers: BTreeMap<String, Worker>,
    apps: Vec<String>,
    session: String,
}

impl World {
    /// Core, `workers` data-workers (`worker-1`…), a gateway, and `apps`
    /// apps, every app answering a list through the gateway.
    async fn start(workers: usize, apps: usize, lease_secs: u64) -> World {
        let storage = ObjectStorage::start().await;
        let mut harness = Harness::new();
        let url = off_runtime(sasha_testkit::postgres_database);
        for (key, value) in [
            ("DATABASE_URL", url.clone()),
            ("SASHA_DATA_PLACEMENT", "leases".to_owned()),
            ("SASHA_DATA_LEASE_SECS", lease_secs.to_string()),
        ] {
            harness.env.insert(key.into(), value);
        }
        let apps = app_ids(apps);
        let manifest = std::fs::read_to_string(mcp::fixture("expense-log").join("APP.md")).unwrap();
        for app in &apps {
            let folder = harness.path().join("docs/apps").join(app);
            copy_dir(&mcp::fixture("expense-log"), &folder);
            std::fs::write(
                folder.join("APP.md"),
                manifest.replacen("id: expense-log", &format!("id: {app}"), 1),
            )
            .unwrap();
        }
        // Staff existing when an app is first registered manage it.
        let session = {
            let url = url.clone();
            off_runtime(move || {
                let store =
                    Store::connect(&url, 1, None, Arc::new(studio_store::system_clock)).unwrap();
                let staff = store.create_user("sam", UserRole::Staff, PASSWORD).unwrap();
                store.create_session(&staff.id).unwrap()
            })
        };
        let core = harness.start(Role::StudioCore, &[]).await;
        let core_url = format!("https://{}", core.listener("grpc"));
        let mut started = BTreeMap::new();
        for n in 1..=workers {
            let id = format!("worker-{n}");
            let worker = start_worker(&harness, &storage, &core_url, &id).await;
            started.insert(id, worker);
        }
        let gateway = harness
            .start(Role::McpGateway, &[("SASHA_CORE_GRPC_URL", core_url)])
            .await;
        let world = World {
            harness,
            url,
            _storage: storage,
            core,
            gateway,
            workers: started,
            apps,
            session,
        };
        for app in &world.apps {
            let mut client = world.page(&world.gateway, app);
            let deadline = Instant::now() + Duration::from_secs(60);
            while let Err(error) = list(&mut client, app).await {
                assert!(Instant::now() < deadline, "{app} never answered: {error}");
                // Placement and the first lease happen in other processes.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        world
    }

    fn mcp_url(gateway: &RoleProcess) -> String {
        format!("http://{}/mcp", gateway.listener("http"))
    }

    /// The staff member's Studio page with `app` open, through `gateway`.
    fn page(&self, gateway: &RoleProcess, app: &str) -> Mcp {
        Mcp::studio_page(&World::mcp_url(gateway), &self.session, app)
    }

    /// Each app's owner and epoch, from the control plane.
    fn placements(&self) -> BTreeMap<String, (String, u64)> {
        query(
            &self.url,
            "SELECT app_id, worker_id, epoch::text FROM app_placements",
        )
        .into_iter()
        .map(|row| (row[0].clone(), (row[1].clone(), row[2].parse().unwrap())))
        .collect()
    }

    /// The apps `worker` owns now.
    fn apps_of(&self, worker: &str) -> BTreeSet<String> {
        self.placements()
            .into_iter()
            .filter(|(_, (owner, _))| owner == worker)
            .map(|(app, _)| app)
            .collect()
    }

    /// A worker with at least one app.
    fn busiest_worker(&self) -> String {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for (owner, _) in self.placements().into_values() {
            *counts.entry(owner).or_default() += 1;
        }
        counts
            .into_iter()
            .max_by_key(|(_, count)| *count)
            .map(|(worker, _)| worker)
            .expect("apps are placed")
    }

    /// The live file of `app` on its current owner's disk.
    fn owner_file(&self, app: &str) -> PathBuf {
        let (owner, _) = self.placements()[app].clone();
        self.workers[&owner].data_root.join(format!("{app}.sqlite"))
    }

    /// A DataService client as a gateway, straight to `worker`.
    fn data_client(&self, worker: &str) -> grpc::DataClient {
        let identity = Identity::load(&self.harness.tls(Role::McpGateway)).unwrap();
        let url = query(
            &self.url,
            &format!("SELECT url FROM data_workers WHERE worker_id = '{worker}'"),
        )[0][0]
            .clone();
        grpc::data_client(&url, &identity).unwrap()
    }
}

async fn start_worker(
    harness: &Harness,
    storage: &ObjectStorage,
    core_url: &str,
    id: &str,
) -> Worker {
    let sockets = harness.path().join("sockets");
    let socket = sockets.join(format!("{id}.sock"));
    let sidecar = Sidecar::start(&socket).await;
    let data_root = harness.path().join("workers").join(id);
    std::fs::create_dir_all(&data_root).unwrap();
    let mut env = replica::role_env(storage, PREFIX, &socket, "sync");
    env.extend([
        ("APP_DATA_ROOT", data_root.display().to_string()),
        ("SASHA_DATA_WORKER_ID", id.to_owned()),
        ("SASHA_CORE_GRPC_URL", core_url.to_owned()),
    ]);
    let process = harness.start(Role::DataWorker, &env).await;
    Worker {
        process: Some(process),
        sidecar: Some(sidecar),
        data_root,
    }
}

/// One list of `app`'s categories: its error envelope on failure.
async fn list(client: &mut Mcp, app: &str) -> Result<Value, String> {
    let exchange = client
        .try_request(
            "tools/call",
            json!({"name": list_tool(app), "arguments": {}}),
        )
        .await?;
    let result = &exchange.body["result"];
    if exchange.status != 200 || result.is_null() || result["isError"] == true {
        return Err(format!("{} {}", exchange.status, exchange.body));
    }
    Ok(result["structuredContent"].clone())
}

/// What one create answered.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Ack(i64),
    /// A retryable refusal, or no MCP answer at all (a process gone).
    Retry(String),
    /// A refusal a retry cannot change: never expected here.
    Final(String),
}

async fn create(client: &mut Mcp, app: &str, key: &str) -> Answer {
    let exchange = match client
        .try_request(
            "tools/call",
            json!({"name": create_tool(app), "arguments": {"values": {"name": key}, "idempotencyKey": key}}),
        )
        .await
    {
        Ok(exchange) => exchange,
        Err(error) => return Answer::Retry(error),
    };
    let result = &exchange.body["result"];
    if exchange.status != 200 || result.is_null() {
        return Answer::Retry(format!("{} {}", exchange.status, exchange.body));
    }
    if result["isError"] == true {
        let envelope = &result["structuredContent"]["error"];
        let text = format!("{envelope}");
        return if envelope["retryable"] == true {
            Answer::Retry(text)
        } else {
            Answer::Final(text)
        };
    }
    match result["structuredContent"]["id"].as_i64() {
        Some(id) => Answer::Ack(id),
        None => Answer::Final(format!("no id in {result}")),
    }
}

/// What the writers saw.
#[derive(Default)]
struct Writes {
    /// Key to (app, id) of every acknowledged create.
    acknowledged: BTreeMap<String, (String, i64)>,
    /// Each app's acknowledgements, in time.
    acked_at: BTreeMap<String, Vec<Instant>>,
    /// Retryable answers seen (retried with the same key).
    retried: usize,
    /// Answers no retry could change: there must be none.
    final_refusals: Vec<String>,
}

/// [`WRITERS`] writers, each cycling over its share of the apps and
/// retrying a key until it is acknowledged.
struct Writers {
    stop: Arc<AtomicBool>,
    writes: Arc<Mutex<Writes>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Writers {
    fn spawn(world: &World, gateway: &RoleProcess) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let writes: Arc<Mutex<Writes>> = Arc::default();
        // Never more writers than apps: each writer has at least one.
        let tasks = (0..WRITERS.min(world.apps.len()))
            .map(|writer| {
                let mut mine: Vec<(String, Mcp)> = world
                    .apps
                    .iter()
                    .enumerate()
                    .filter(|(n, _)| n % WRITERS.min(world.apps.len()) == writer)
                    .map(|(_, app)| (app.clone(), world.page(gateway, app)))
                    .collect();
                let (stop, writes) = (stop.clone(), writes.clone());
                tokio::spawn(async move {
                    for n in 0.. {
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let slot = n % mine.len();
                        let (app, client) = &mut mine[slot];
                        let key = format!("w{writer}-{n}");
                        loop {
                            let answer = create(client, app, &key).await;
                            let done = {
                                let mut writes = writes.lock().unwrap();
                                match answer {
                                    Answer::Ack(id) => {
                                        writes.acknowledged.insert(key.clone(), (app.clone(), id));
                                        writes
                                            .acked_at
                                            .entry(app.clone())
                                            .or_default()
                                            .push(Instant::now());
                                        Some(true)
                                    }
                                    Answer::Retry(_) => {
                                        writes.retried += 1;
                                        None
                                    }
                                    Answer::Final(text) => {
                                        writes.final_refusals.push(format!("{key}: {text}"));
                                        Some(false)
                                    }
                                }
                            };
                            match done {
                                Some(true) => break,
                                Some(false) => return,
                                // The app is between owners: a client backs
                                // off before trying the same key again.
                                None => tokio::time::sleep(Duration::from_millis(50)).await,
                            }
                        }
                    }
                })
            })
            .collect();
        Writers {
            stop,
            writes,
            tasks,
        }
    }

    /// Waits until `count` more writes are acknowledged.
    async fn progress(&self, count: usize) {
        let start = self.writes.lock().unwrap().acknowledged.len();
        eventually(Duration::from_secs(120), "the writers' progress", || {
            let writes = self.writes.clone();
            async move {
                let writes = writes.lock().unwrap();
                assert!(
                    writes.final_refusals.is_empty(),
                    "{:?}",
                    writes.final_refusals
                );
                writes.acknowledged.len() >= start + count
            }
        })
        .await;
    }

    /// Waits until every app in `apps` has acknowledged a write after
    /// `since`; gives each app's time from `since` to that write.
    async fn each_acknowledged_after(
        &self,
        apps: &BTreeSet<String>,
        since: Instant,
    ) -> BTreeMap<String, Duration> {
        let mut back = BTreeMap::new();
        eventually(
            Duration::from_secs(120),
            "every app taking writes again",
            || {
                let writes = self.writes.lock().unwrap();
                for app in apps {
                    if let Some(at) = writes
                        .acked_at
                        .get(app)
                        .and_then(|times| times.iter().find(|at| **at > since))
                    {
                        back.insert(app.clone(), *at - since);
                    }
                }
                let done = back.len() == apps.len();
                async move { done }
            },
        )
        .await;
        back
    }

    async fn finish(self) -> Writes {
        self.stop.store(true, Ordering::SeqCst);
        for task in self.tasks {
            tokio::time::timeout(Duration::from_secs(120), task)
                .await
                .expect("every writer's last key is acknowledged")
                .unwrap();
        }
        let writes = Arc::try_unwrap(self.writes)
            .ok()
            .unwrap()
            .into_inner()
            .unwrap();
        assert!(
            writes.final_refusals.is_empty(),
            "only retryable answers: {:?}",
            writes.final_refusals
        );
        writes
    }
}

/// Every app's file on its owner holds exactly the acknowledged creates
/// with their ids, each once, and one audit row and one receipt per row.
fn assert_exactly_the_acknowledged_writes(world: &World, writes: &Writes) {
    for app in &world.apps {
        let file = world.owner_file(app);
        let acknowledged: BTreeMap<String, i64> = writes
            .acknowledged
            .iter()
            .filter(|(_, (owner_app, _))| owner_app == app)
            .map(|(key, (_, id))| (key.clone(), *id))
            .collect();
        assert_eq!(
            categories(&file),
            acknowledged,
            "{app}: exactly the acknowledged writes, with their ids"
        );
        assert_one_audit_row_and_receipt_per_row(&file);
    }
}

#[tokio::test]
async fn a_lost_worker_s_apps_take_writes_again_on_the_others_and_lose_nothing() {
    let mut world = World::start(3, 20, 10).await;
    let writers = Writers::spawn(&world, &world.gateway);
    writers.progress(300).await;

    let victim = world.busiest_worker();
    let moved = world.apps_of(&victim);
    let before = world.placements();
    // A lost node: the worker and its sidecar, at once.
    let worker = world.workers.get_mut(&victim).unwrap();
    let lost_at = Instant::now();
    worker.process.take().unwrap().signal(Signal::SIGKILL);
    worker.sidecar.take().unwrap().kill();

    let back = writers.each_acknowledged_after(&moved, lost_at).await;
    writers.progress(200).await;
    let writes = writers.finish().await;

    let after = world.placements();
    for app in &moved {
        let (owner, epoch) = &after[app];
        assert_ne!(owner, &victim, "{app} moved off the lost worker");
        assert_eq!(*epoch, before[app].1 + 1, "{app}: one change of owner");
    }
    for app in world.apps.iter().filter(|app| !moved.contains(*app)) {
        assert_eq!(after[app], before[app], "{app} stayed where it was");
    }
    assert_exactly_the_acknowledged_writes(&world, &writes);
    let slowest = back.values().max().unwrap();
    println!(
        "takeover of {} apps after a lost worker (lease 10 s): slowest {:.1} s, each {:?}; \
         {} writes acknowledged, {} retryable answers retried",
        moved.len(),
        slowest.as_secs_f64(),
        back.values()
            .map(|d| format!("{:.1}", d.as_secs_f64()))
            .collect::<Vec<_>>(),
        writes.acknowledged.len(),
        writes.retried,
    );
    let failovers = query(
        &world.url,
        "SELECT count(*)::text FROM placement_events WHERE reason = 'failover'",
    );
    assert_eq!(failovers[0][0], moved.len().to_string());
}

/// One governed call straight to a worker, as a gateway would send it.
async fn direct_create(
    client: &grpc::DataClient,
    contract: &DataContract,
    app: &str,
    epoch: u64,
    key: &str,
) -> Result<Value, AppError> {
    let reply = client
        .clone()
        .execute(ExecuteRequest {
            epoch,
            app_id: app.to_owned(),
            contract_hash: contract.hash.clone(),
            actor: Some(pb::Actor {
                user_id: "forger".into(),
                access: sasha_contract::caller::AppAccess::Manage.to_wire(),
            }),
            operation: "create".into(),
            table: "categories".into(),
            request_json: json!({"values": {"name": key}, "idempotencyKey": key}).to_string(),
            contract: Some(pb::DataContract::from(contract)),
            source: sasha_contract::caller::CallSource::Mcp.to_wire(),
            provenance: Some(sasha_proto::convert::provenance_to_wire(
                sasha_contract::caller::Initiator::McpClient,
                Some("token:1"),
            )),
            ..Default::default()
        })
        .await
        .map_err(|status| AppError::from_status(&status))?;
    Ok(serde_json::from_str(&reply.into_inner().result_json).unwrap())
}

fn expense_contract() -> DataContract {
    sasha_package::validate::validate_dir(&mcp::fixture("expense-log"))
        .package
        .unwrap()
        .data
        .unwrap()
}

#[tokio::test]
async fn a_stalled_worker_past_its_lease_is_refused_everything_when_it_wakes() {
    let world = World::start(2, 6, 3).await;
    let contract = expense_contract();
    let writers = Writers::spawn(&world, &world.gateway);
    writers.progress(100).await;

    let stalled = world.busiest_worker();
    let other = world
        .workers
        .keys()
        .find(|id| **id != stalled)
        .unwrap()
        .clone();
    let taken = world.apps_of(&stalled);
    let before = world.placements();
    let stalled_client = world.data_client(&stalled);
    let process = world.workers[&stalled].process.as_ref().unwrap();
    process.pause().await;
    let paused_at = Instant::now();
    eventually(
        Duration::from_secs(60),
        "the stalled worker's apps moving",
        || {
            let moved = world.apps_of(&other).is_superset(&taken);
            async move { moved }
        },
    )
    .await;
    writers.each_acknowledged_after(&taken, paused_at).await;
    process.signal(Signal::SIGCONT);

    // Everything the woken worker is sent for the apps it lost is refused
    // before it runs: the old epoch, and the new one it never held.
    let after = world.placements();
    for app in &taken {
        for epoch in [before[app].1, after[app].1] {
            let refused = direct_create(&stalled_client, &contract, app, epoch, "stale")
                .await
                .unwrap_err();
            assert!(refused.is_not_owner(), "{app} at {epoch}: {refused:?}");
        }
    }
    // The owner refuses epochs it does not hold, forged ahead or old.
    let owner_client = world.data_client(&other);
    for app in &taken {
        let current = after[app].1;
        for epoch in [0, current - 1, current + 1, u64::MAX] {
            let refused = direct_create(&owner_client, &contract, app, epoch, "forged")
                .await
                .unwrap_err();
            assert!(refused.is_not_owner(), "{app} at {epoch}: {refused:?}");
            assert!(refused.retryable);
        }
    }
    writers.progress(50).await;
    let writes = writers.finish().await;
    assert_exactly_the_acknowledged_writes(&world, &writes);
    for app in &taken {
        assert_eq!(
            world.placements()[app].0,
            other,
            "{app} stays with its new owner"
        );
    }
}

#[tokio::test]
async fn a_drained_worker_hands_its_apps_over_one_at_a_time_under_load() {
    let world = World::start(3, 9, 4).await;
    let second = world
        .harness
        .start(
            Role::McpGateway,
            &[(
                "SASHA_CORE_GRPC_URL",
                format!("https://{}", world.core.listener("grpc")),
            )],
        )
        .await;
    // The second gateway learns every route before the drain.
    for app in &world.apps {
        list(&mut world.page(&second, app), app).await.unwrap();
    }
    let writers = Writers::spawn(&world, &world.gateway);
    writers.progress(100).await;

    let drained = world.busiest_worker();
    let leaving = world.apps_of(&drained);
    let before = world.placements();
    let output = std::process::Command::new(common::sasha_bin())
        .args(["admin", "workers", "drain", &drained])
        .env("DATABASE_URL", &world.url)
        .env("SASHA_STATE_DIR", world.harness.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    eventually(
        Duration::from_secs(90),
        "every app leaving the drained worker",
        || {
            let empty = world.apps_of(&drained).is_empty();
            async move { empty }
        },
    )
    .await;
    writers.progress(50).await;
    let writes = writers.finish().await;

    let after = world.placements();
    for app in &leaving {
        assert_eq!(
            after[app].1,
            before[app].1 + 1,
            "{app}: one change of owner"
        );
    }
    // Each app moved once, by the drain.
    let moves = query(
        &world.url,
        &format!(
            "SELECT app_id FROM placement_events WHERE reason = 'drain' AND from_worker = '{drained}' ORDER BY id"
        ),
    );
    assert_eq!(moves.len(), leaving.len());
    // The second gateway's routes are stale: its next call to each moved
    // app is refused by the old owner, retried once at the new, and
    // answered.
    for app in &leaving {
        list(&mut world.page(&second, app), app)
            .await
            .unwrap_or_else(|error| panic!("{app} through a gateway with the old route: {error}"));
    }
    assert_exactly_the_acknowledged_writes(&world, &writes);
    println!(
        "drain of {} apps under load: {} writes acknowledged, {} retryable answers retried",
        leaving.len(),
        writes.acknowledged.len(),
        writes.retried
    );
}
