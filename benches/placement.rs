//! Several data-workers (issue 47), on the real processes on loopback:
//! studio-core (SQLite control plane, `leases` layout), N data-workers each
//! with its own disk and Litestream sidecar replicating in sync mode to a
//! real SeaweedFS S3 server, one mcp-gateway, twenty apps.
//!
//! 1. **Throughput over many apps with 1, 2 and 3 workers, in one run:**
//!    8 clients, each cycling over its share of the twenty apps, creating
//!    (from the Studio page, keyed) for the set time, then listing for the
//!    same time: ops/s, p50, p99.
//! 2. **Failover:** three workers under eight keyed writers retrying each
//!    key until it is acknowledged; the busiest worker and its sidecar are
//!    SIGKILLed (a lost node), the time until each of its apps acknowledges
//!    a write again is measured, and it comes back as a new node (an empty
//!    disk, a new sidecar); repeated. At the end every app's file on its
//!    owner holds exactly the acknowledged writes, each once.
//!
//!   cargo bench --bench placement                  # 20 s per phase, 20 kills
//!   cargo bench --bench placement -- --quick       # 5 s per phase, 5 kills
//!   cargo bench --bench placement -- --kills 10 --seconds 10
//!
//! Needs the replication peers `scripts/test.sh` installs (SASHA_LITESTREAM,
//! SASHA_WEED). Not part of the test command: nothing here is asserted but
//! the ledger check, which exits 1 when it fails. It prints a Markdown
//! report, also written to results.md under
//! `$CARGO_TARGET_DIR/bench-results/placement-<UTC time>/`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::fixture::{Staff, copy_tree, stop};
use common::mcp::Mcp;
use common::replica::{self, ObjectStorage, Sidecar};
use common::report::{ms, percentile, results_dir};
use common::start_role;
use sasha_service::Role;
use sasha_service::identity::DevPki;
use serde_json::{Value, json};

const APPS: usize = 20;
const CLIENTS: usize = 8;
const LEASE_SECS: u64 = 10;

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|arg| arg == name)
        .and_then(|at| args.get(at + 1).cloned())
}

fn app_ids() -> Vec<String> {
    (1..=APPS).map(|n| format!("books-{n:02}")).collect()
}

fn tool(app: &str, operation: &str) -> String {
    format!("app__{}__categories__{operation}", app.replace('-', "_"))
}

/// One data-worker and its sidecar.
struct Worker {
    child: Option<Child>,
    sidecar: Option<Sidecar>,
    data_root: PathBuf,
}

/// studio-core, the workers and a gateway over one state folder.
struct Cluster {
    state: tempfile::TempDir,
    pki: DevPki,
    core: Child,
    core_url: String,
    gateway: Child,
    workers: BTreeMap<String, Worker>,
    prefix: String,
    /// One page client per app.
    pages: BTreeMap<String, Mcp>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        stop(&mut self.gateway);
        for worker in self.workers.values_mut() {
            if let Some(child) = &mut worker.child {
                stop(child);
            }
        }
        stop(&mut self.core);
    }
}

impl Cluster {
    fn start(
        runtime: &tokio::runtime::Runtime,
        storage: &ObjectStorage,
        workers: usize,
        prefix: &str,
    ) -> Cluster {
        let state = tempfile::tempdir().unwrap();
        let (pki, _) = DevPki::ensure(&state.path().join("certs")).unwrap();
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packages/valid/expense-log");
        let manifest = std::fs::read_to_string(fixture.join("APP.md")).unwrap();
        for app in app_ids() {
            let folder = state.path().join("docs/apps").join(&app);
            copy_tree(&fixture, &folder);
            std::fs::write(
                folder.join("APP.md"),
                manifest.replacen("id: expense-log", &format!("id: {app}"), 1),
            )
            .unwrap();
        }
        let staff = Staff::create(state.path());
        let placed = [
            ("SASHA_DATA_PLACEMENT", "leases".to_owned()),
            ("SASHA_DATA_LEASE_SECS", LEASE_SECS.to_string()),
        ];
        let (core, listeners) = start_role(Role::StudioCore, state.path(), &pki, &placed);
        let core_url = format!("https://{}", listeners["grpc"].as_str().unwrap());
        let mut cluster_workers = BTreeMap::new();
        for n in 1..=workers {
            let id = format!("worker-{n}");
            let worker = start_worker(runtime, storage, state.path(), &pki, &core_url, prefix, &id);
            cluster_workers.insert(id, worker);
        }
        let (gateway, listeners) = start_role(
            Role::McpGateway,
            state.path(),
            &pki,
            &[placed[0].clone(), ("SASHA_CORE_GRPC_URL", core_url.clone())],
        );
        let url = format!("http://{}/mcp", listeners["http"].as_str().unwrap());
        let (session, token) = (staff.session(), staff.token());
        let http = common::fixture::http_client();
        let pages = app_ids()
            .into_iter()
            .map(|app| {
                let mcp = Mcp {
                    http: http.clone(),
                    url: url.clone(),
                    session: session.clone(),
                    token: token.clone(),
                    app: app.clone(),
                    origin: common::mcp::DEFAULT_ORIGIN.to_owned(),
                    client: "bench-placement",
                };
                (app, mcp)
            })
            .collect::<BTreeMap<_, _>>();
        runtime.block_on(async {
            for (app, page) in &pages {
                page.timed_call(&tool(app, "list"), json!({})).await;
            }
        });
        Cluster {
            state,
            pki,
            core,
            core_url,
            gateway,
            workers: cluster_workers,
            prefix: prefix.to_owned(),
            pages,
        }
    }

    /// The apps client number `client` of [`CLIENTS`] cycles over, with
    /// their page clients.
    fn share_of(&self, client: usize) -> Vec<(String, Mcp)> {
        self.pages
            .iter()
            .enumerate()
            .filter(|(n, _)| n % CLIENTS == client)
            .map(|(_, (app, page))| (app.clone(), page.clone()))
            .collect()
    }

    /// Each app's owner, read from the control plane.
    fn owners(&self) -> BTreeMap<String, String> {
        let connection = rusqlite::Connection::open(self.state.path().join("core.sqlite")).unwrap();
        connection.busy_timeout(Duration::from_secs(5)).unwrap();
        connection
            .prepare("SELECT app_id, worker_id FROM app_placements")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// Whether `worker` holds a live lease by the database's clock.
    fn leased(&self, worker: &str) -> bool {
        let connection = rusqlite::Connection::open(self.state.path().join("core.sqlite")).unwrap();
        connection.busy_timeout(Duration::from_secs(5)).unwrap();
        connection
            .query_row(
                "SELECT lease_until_ms > CAST(unixepoch('subsec') * 1000 AS INTEGER) \
                 FROM data_workers WHERE worker_id = ?1",
                [worker],
                |row| row.get::<_, bool>(0),
            )
            .unwrap_or(false)
    }
}

fn start_worker(
    runtime: &tokio::runtime::Runtime,
    storage: &ObjectStorage,
    state: &Path,
    pki: &DevPki,
    core_url: &str,
    prefix: &str,
    id: &str,
) -> Worker {
    let socket = state.join("sockets").join(format!("{id}.sock"));
    let sidecar = runtime.block_on(Sidecar::start(&socket));
    let data_root = state.join("workers").join(id);
    std::fs::create_dir_all(&data_root).unwrap();
    let mut env = replica::role_env(storage, prefix, &socket, "sync");
    env.extend([
        ("SASHA_DATA_PLACEMENT", "leases".to_owned()),
        ("APP_DATA_ROOT", data_root.display().to_string()),
        ("SASHA_DATA_WORKER_ID", id.to_owned()),
        ("SASHA_CORE_GRPC_URL", core_url.to_owned()),
    ]);
    let (child, _) = start_role(Role::DataWorker, state, pki, &env);
    Worker {
        child: Some(child),
        sidecar: Some(sidecar),
        data_root,
    }
}

/// One call's outcome: answered (with its structured result), worth
/// retrying, or refused for good.
enum Outcome {
    Done(Value),
    Retry,
    Refused(String),
}

async fn attempt(page: &Mcp, ui: bool, name: &str, arguments: Value) -> Outcome {
    let Ok(response) = page.request(ui, name, arguments).send().await else {
        return Outcome::Retry;
    };
    let Ok(reply) = response.json::<Value>().await else {
        return Outcome::Retry;
    };
    if reply["result"]["isError"] == true {
        let envelope = &reply["result"]["structuredContent"]["error"];
        return if envelope["retryable"] == true {
            Outcome::Retry
        } else {
            Outcome::Refused(envelope.to_string())
        };
    }
    if reply.get("error").is_some() || reply["result"].is_null() {
        return Outcome::Retry;
    }
    Outcome::Done(reply["result"]["structuredContent"].clone())
}

/// One phase's latencies and wall time.
struct Phase {
    latencies: Vec<Duration>,
    wall: Duration,
}

impl Phase {
    fn row(mut self, label: &str) -> String {
        self.latencies.sort();
        format!(
            "{label} {:.0} ops/s | {:.2} ms | {:.2} ms",
            self.latencies.len() as f64 / self.wall.as_secs_f64(),
            ms(percentile(&self.latencies, 0.5)),
            ms(percentile(&self.latencies, 0.99)),
        )
    }
}

/// [`CLIENTS`] clients, each over its share of the apps, creating (or
/// listing) for `seconds`.
fn load(runtime: &tokio::runtime::Runtime, cluster: &Cluster, create: bool, seconds: u64) -> Phase {
    runtime.block_on(async {
        let until = Instant::now() + Duration::from_secs(seconds);
        let started = Instant::now();
        let tasks: Vec<_> = (0..CLIENTS)
            .map(|client| {
                let mine = cluster.share_of(client);
                tokio::spawn(async move {
                    let mut latencies = Vec::new();
                    let mut n = 0;
                    while Instant::now() < until {
                        let (app, page) = &mine[n % mine.len()];
                        n += 1;
                        let sent = Instant::now();
                        let outcome = if create {
                            let key = format!("load-{client}-{n}-{}", rand_suffix());
                            attempt(
                                page,
                                true,
                                &tool(app, "create"),
                                json!({"values": {"name": key}, "idempotencyKey": key}),
                            )
                            .await
                        } else {
                            attempt(page, false, &tool(app, "list"), json!({"limit": 20})).await
                        };
                        if let Outcome::Done(_) = outcome {
                            latencies.push(sent.elapsed());
                        }
                    }
                    latencies
                })
            })
            .collect();
        let mut latencies = Vec::new();
        for task in tasks {
            latencies.extend(task.await.unwrap());
        }
        Phase {
            latencies,
            wall: started.elapsed(),
        }
    })
}

/// A suffix that keeps keys apart between phases of one run.
fn rand_suffix() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// What the failover writers saw.
#[derive(Default)]
struct Writes {
    /// Key to (app, id).
    acknowledged: BTreeMap<String, (String, i64)>,
    acked_at: BTreeMap<String, Vec<Instant>>,
    refused: Vec<String>,
}

fn failover(
    runtime: &tokio::runtime::Runtime,
    storage: &ObjectStorage,
    cluster: &mut Cluster,
    kills: usize,
) -> (Vec<Duration>, Vec<Duration>, usize, Vec<String>) {
    let stop_flag = Arc::new(AtomicBool::new(false));
    let writes: Arc<Mutex<Writes>> = Arc::default();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let mine = cluster.share_of(client);
            let (stop_flag, writes) = (stop_flag.clone(), writes.clone());
            runtime.spawn(async move {
                for n in 0.. {
                    if stop_flag.load(Ordering::SeqCst) {
                        return;
                    }
                    let (app, page) = &mine[n % mine.len()];
                    let key = format!("kill-{client}-{n}");
                    loop {
                        let arguments = json!({"values": {"name": key}, "idempotencyKey": key});
                        match attempt(page, true, &tool(app, "create"), arguments).await {
                            Outcome::Done(row) => {
                                let mut writes = writes.lock().unwrap();
                                let id = row["id"].as_i64().unwrap_or(-1);
                                writes.acknowledged.insert(key.clone(), (app.clone(), id));
                                writes
                                    .acked_at
                                    .entry(app.clone())
                                    .or_default()
                                    .push(Instant::now());
                                break;
                            }
                            Outcome::Refused(what) => {
                                writes
                                    .lock()
                                    .unwrap()
                                    .refused
                                    .push(format!("{key}: {what}"));
                                break;
                            }
                            // Between owners: back off, then the same key.
                            Outcome::Retry => tokio::time::sleep(Duration::from_millis(50)).await,
                        }
                    }
                }
            })
        })
        .collect();
    let mut slowest = Vec::new();
    let mut every = Vec::new();
    for kill in 0..kills {
        // Let the load settle between two losses.
        std::thread::sleep(Duration::from_secs(2));
        let owners = cluster.owners();
        let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
        for owner in owners.values() {
            *counts.entry(owner).or_default() += 1;
        }
        let victim = counts
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .unwrap()
            .0
            .clone();
        let moved: BTreeSet<String> = owners
            .iter()
            .filter(|(_, owner)| **owner == victim)
            .map(|(app, _)| app.clone())
            .collect();
        let worker = cluster.workers.get_mut(&victim).unwrap();
        let lost_at = Instant::now();
        if let Some(mut child) = worker.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(sidecar) = worker.sidecar.take() {
            sidecar.kill();
        }
        let mut back: BTreeMap<String, Duration> = BTreeMap::new();
        while back.len() < moved.len() {
            // The writers record each acknowledgement as it comes; look at
            // their record often enough to time a take-over to 20 ms.
            std::thread::sleep(Duration::from_millis(20));
            let writes = writes.lock().unwrap();
            for app in &moved {
                if let Some(at) = writes
                    .acked_at
                    .get(app)
                    .and_then(|t| t.iter().find(|at| **at > lost_at))
                {
                    back.entry(app.clone()).or_insert(*at - lost_at);
                }
            }
            assert!(
                lost_at.elapsed() < Duration::from_secs(300),
                "apps never came back"
            );
        }
        let worst = *back.values().max().unwrap();
        eprintln!(
            "kill {}/{kills}: {victim} with {} apps, all back in {:.1} s",
            kill + 1,
            moved.len(),
            worst.as_secs_f64()
        );
        slowest.push(worst);
        every.extend(back.into_values());
        // The node comes back empty, as a new machine would.
        let data_root = cluster.workers[&victim].data_root.clone();
        let _ = std::fs::remove_dir_all(&data_root);
        let worker = start_worker(
            runtime,
            storage,
            cluster.state.path(),
            &cluster.pki,
            &cluster.core_url,
            &cluster.prefix,
            &victim,
        );
        cluster.workers.insert(victim.clone(), worker);
        while !cluster.leased(&victim) {
            // The lease is granted in other processes and only shows in
            // the core database: look again shortly.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    stop_flag.store(true, Ordering::SeqCst);
    runtime.block_on(async {
        for task in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(120), task).await;
        }
    });
    let writes = Arc::try_unwrap(writes).ok().unwrap().into_inner().unwrap();
    let mut findings = writes.refused.clone();
    findings.extend(ledger_check(cluster, &writes));
    (slowest, every, writes.acknowledged.len(), findings)
}

/// Every app's file on its owner holds exactly the acknowledged creates,
/// with their ids, each once, with one audit row each.
fn ledger_check(cluster: &Cluster, writes: &Writes) -> Vec<String> {
    let mut findings = Vec::new();
    for (app, owner) in cluster.owners() {
        let file = cluster.workers[&owner]
            .data_root
            .join(format!("{app}.sqlite"));
        let connection = rusqlite::Connection::open(&file).unwrap();
        connection.busy_timeout(Duration::from_secs(5)).unwrap();
        let rows: Vec<(String, i64)> = connection
            .prepare("SELECT name, id FROM categories WHERE name LIKE 'kill-%'")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let found: BTreeMap<String, i64> = rows.iter().cloned().collect();
        if found.len() != rows.len() {
            findings.push(format!("{app}: a key written twice"));
        }
        let acknowledged: BTreeMap<String, i64> = writes
            .acknowledged
            .iter()
            .filter(|(_, (of, _))| *of == app)
            .map(|(key, (_, id))| (key.clone(), *id))
            .collect();
        for (key, id) in &acknowledged {
            match found.get(key) {
                Some(found_id) if found_id == id => {}
                Some(other) => findings.push(format!(
                    "{app}: {key} acknowledged as {id}, stored as {other}"
                )),
                None => findings.push(format!("{app}: acknowledged {key} lost")),
            }
        }
        let audited: i64 = connection
            .query_row(
                "SELECT count(*) FROM _sasha_audit WHERE table_name = 'categories' AND operation = 'create'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        let total: i64 = connection
            .query_row("SELECT count(*) FROM categories", [], |row| row.get(0))
            .unwrap();
        if audited != total {
            findings.push(format!("{app}: {total} rows, {audited} audit rows"));
        }
    }
    findings
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|arg| arg == "--quick");
    let seconds: u64 = flag(&args, "--seconds")
        .map(|s| s.parse().expect("--seconds N"))
        .unwrap_or(if quick { 5 } else { 20 });
    let kills: usize = flag(&args, "--kills")
        .map(|s| s.parse().expect("--kills N"))
        .unwrap_or(if quick { 5 } else { 20 });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let storage = runtime.block_on(ObjectStorage::start());

    let mut rows = Vec::new();
    for workers in 1..=3 {
        let cluster = Cluster::start(
            &runtime,
            &storage,
            workers,
            &format!("throughput-{workers}"),
        );
        let created = load(&runtime, &cluster, true, seconds);
        let listed = load(&runtime, &cluster, false, seconds);
        rows.push(format!(
            "| {workers} | {} | {} |",
            created.row("").trim_start(),
            listed.row("").trim_start()
        ));
        drop(cluster);
    }
    let mut cluster = Cluster::start(&runtime, &storage, 3, "failover");
    let (mut slowest, mut every, acknowledged, findings) =
        failover(&runtime, &storage, &mut cluster, kills);
    drop(cluster);
    slowest.sort();
    every.sort();

    let mut report = String::new();
    let mut line = |text: String| {
        println!("{text}");
        report.push_str(&text);
        report.push('\n');
    };
    line(format!(
        "## Placement: throughput over {APPS} apps, {CLIENTS} clients, sync replication ({seconds} s per phase)\n"
    ));
    line(
        "| workers | create ops/s | create p50 | create p99 | list ops/s | list p50 | list p99 |"
            .to_owned(),
    );
    line("|---|---|---|---|---|---|---|".to_owned());
    for row in rows {
        line(row);
    }
    line(String::new());
    line(format!(
        "## Placement: failover over {kills} kills of the busiest of 3 workers (lease {LEASE_SECS} s)\n"
    ));
    line("| measure | p50 | p90 | max |".to_owned());
    line("|---|---|---|---|".to_owned());
    let seconds_of = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    line(format!(
        "| slowest app back, per kill | {} | {} | {} |",
        seconds_of(percentile(&slowest, 0.5)),
        seconds_of(percentile(&slowest, 0.9)),
        seconds_of(*slowest.last().unwrap()),
    ));
    line(format!(
        "| each moved app back ({} apps) | {} | {} | {} |",
        every.len(),
        seconds_of(percentile(&every, 0.5)),
        seconds_of(percentile(&every, 0.9)),
        seconds_of(*every.last().unwrap()),
    ));
    line(String::new());
    line(format!(
        "Ledger check over {acknowledged} acknowledged writes: {}",
        if findings.is_empty() {
            "every write exactly once, with its id and one audit row".to_owned()
        } else {
            format!("{} findings: {:?}", findings.len(), findings)
        }
    ));
    let folder = results_dir("placement-");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("results.md"), &report).unwrap();
    eprintln!("placement bench: {}", folder.join("results.md").display());
    if !findings.is_empty() {
        std::process::exit(1);
    }
}
