//! The chaos soak (issue 30): data-worker, studio-core and two mcp-gateway
//! replicas behind Debian's nginx running the deploy template, on loopback,
//! under a paced mixed load of creates and lists from several users for a
//! bounded time, while a schedule SIGKILLs a gateway replica, data-worker and
//! studio-core in turn and starts each again on its own port. Between two
//! kills a `sasha backup` is taken under the load. At the end:
//!
//! - the ledger check on the live app database: every acknowledged write
//!   exists exactly once, with the id it was acknowledged with and its writer
//!   as owner; no row that no client sent; exactly one audit row per row;
//! - no list ever returned another user's row (every list is checked);
//! - per restart, how long until the p99 of a one-second window of
//!   successful requests was back under 20 ms (target: within 10 s);
//! - the drill: the backup restored into a fresh state folder, the roles
//!   started on it, the same ledger check for every write acknowledged
//!   before the backup began, and each user's row count through MCP equal to
//!   the restored file's.
//!
//! With `--replication`, data-worker and studio-core replicate in sync mode
//! to a real SeaweedFS S3 server through their Litestream sidecars
//! (`tests/common/replica.rs`), and the first kill of each also takes its
//! node: its sidecar is killed and its volume wiped (APP_DATA_ROOT, the core
//! database), so the role comes back from object storage alone; the ledger
//! check then says whether an acknowledged write was lost or doubled.
//!
//!   cargo bench --bench soak                      # 10 minutes, 6 clients
//!   cargo bench --bench soak -- --minutes 2 --clients 4
//!   cargo bench --bench soak -- --replication     # sync replication, volumes wiped
//!   cargo bench --bench soak -- --workers 3       # three leased data-workers
//!
//! With `--workers N` (N > 1, implies `--replication`), N data-workers hold
//! leases from studio-core (`SASHA_DATA_PLACEMENT=leases`, a 5 s lease), each
//! with its own volume and sidecar, and the schedule kills each worker in
//! turn with its node, keeping it down past its lease: when it owned the
//! app, the app fails over to another worker, which restores it from object
//! storage; the live ledger check reads the app's file on its owner at the
//! end. The backup drill is left out: with several workers each volume is
//! backed up on its own (`deploy/compose.yaml`'s `backup-N`), which
//! `sasha backup --state-dir` does not do.
//!
//! Not part of the test command: nothing here is a test. It prints a
//! Markdown report (also written to results.md under
//! `$CARGO_TARGET_DIR/bench-results/soak-<UTC time>/`) and exits 1 when a
//! ledger or owner check fails. A failed create is retried with its
//! idempotency key for up to a minute, as a client of the spec would.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::fixture::{Staff, copy_tree, day, mix, start_core, start_gateway, start_worker, stop};
use common::mcp::Mcp;
use common::peers::free_port;
use common::replica::{ObjectStorage, Sidecar};
use common::report::{ms, percentile, results_dir};
use common::{nginx, replica, start_role};
use sasha_service::Role;
use sasha_service::identity::DevPki;
use serde_json::{Value, json};
use studio_store::{AppAccess, Store, UserRole};

const APP: &str = "time-sheet-entry";
const STUDIO_HOST: &str = "studio.sasha.test";
const SANDBOX_HOST: &str = "views.sasha-sandbox.test";
const USERS: usize = 4;
/// A client's pause between two requests, so the load is paced rather than
/// saturating two cores (where p99 would measure the queue, not recovery).
const PACE: Duration = Duration::from_millis(15);
/// How long a killed role stays down before it is started again.
const DOWNTIME: Duration = Duration::from_secs(1);
/// The data-workers' lease with `--workers`.
const LEASE: Duration = Duration::from_secs(5);
/// How long a client keeps retrying one create with its idempotency key.
const RETRY_FOR: Duration = Duration::from_secs(60);
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// The p99 each restart must return under, and within how long.
const P99_TARGET: Duration = Duration::from_millis(20);
const RECOVERY_TARGET: Duration = Duration::from_secs(10);
/// Fewer successful requests than this in a one-second window say nothing
/// about its p99.
const WINDOW_MIN_SAMPLES: usize = 20;
const DAY_0: time::Date = common::fixture::date(2026, time::Month::November, 2);

fn tool(suffix: &str) -> String {
    format!("app__time_sheet_entry__{suffix}")
}

/// One role the schedule can kill: how to start it again on the same ports.
struct Managed {
    name: &'static str,
    role: Role,
    env: Vec<(&'static str, String)>,
    child: Option<Child>,
    /// With `--replication`: its sidecar's socket, the sidecar, and the
    /// database files its node's volume holds (wiped on its first kill).
    replicated: Option<Replicated>,
    /// How long it stays down when killed.
    downtime: Duration,
}

struct Replicated {
    socket: PathBuf,
    sidecar: Option<Sidecar>,
    volume: Vec<PathBuf>,
    wiped: bool,
}

impl Managed {
    fn start(&mut self, state: &Path, pki: &DevPki, runtime: &tokio::runtime::Runtime) {
        if let Some(replicated) = &mut self.replicated {
            replicated.sidecar = Some(runtime.block_on(Sidecar::start(&replicated.socket)));
        }
        let (child, _) = start_role(self.role, state, pki, &self.env);
        self.child = Some(child);
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop(&mut child);
        }
    }

    /// Kills the role; on its first kill with replication on, its node is
    /// lost too: the sidecar killed and the volume wiped. Says whether it
    /// wiped.
    fn kill_node(&mut self) -> bool {
        self.kill();
        let Some(replicated) = &mut self.replicated else {
            return false;
        };
        if let Some(sidecar) = replicated.sidecar.take() {
            sidecar.kill();
        }
        if replicated.wiped {
            return false;
        }
        replicated.wiped = true;
        for path in &replicated.volume {
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(path)
            } else {
                std::fs::remove_file(path)
            };
        }
        true
    }
}

/// What one request came to.
enum Outcome {
    Done(Value),
    /// A transport failure, a 5xx, or an envelope with `retryable: true`.
    Retry(String),
    /// Anything else: a bug under this load.
    Refused(String),
}

async fn attempt(mcp: &Mcp, ui: bool, name: &str, arguments: Value) -> Outcome {
    let response = match mcp.request(ui, name, arguments).send().await {
        Ok(response) => response,
        Err(_) => return Outcome::Retry("transport".to_owned()),
    };
    let status = response.status();
    let Ok(text) = response.text().await else {
        return Outcome::Retry("body cut".to_owned());
    };
    let Ok(reply) = serde_json::from_str::<Value>(&text) else {
        return if status.is_server_error() {
            Outcome::Retry(format!("HTTP {}", status.as_u16()))
        } else {
            Outcome::Refused(format!(
                "HTTP {status}: {}",
                text.chars().take(200).collect::<String>()
            ))
        };
    };
    let envelope = if reply["result"]["isError"] == true {
        Some(&reply["result"]["structuredContent"]["error"])
    } else if let Some(error) = reply.get("error") {
        Some(&error["data"])
    } else if !status.is_success() {
        Some(&reply)
    } else {
        None
    };
    match envelope {
        None => Outcome::Done(reply["result"]["structuredContent"].clone()),
        Some(envelope) => {
            let code = envelope["code"].as_str().unwrap_or("no code").to_owned();
            if envelope["retryable"] == true
                || (status.is_server_error() && envelope.get("retryable").is_none())
            {
                Outcome::Retry(code)
            } else {
                Outcome::Refused(format!("HTTP {status}: {reply}"))
            }
        }
    }
}

/// Acknowledged creates by idempotency key: the id, and when (seconds since
/// the load began).
type Acked = HashMap<String, (i64, f64)>;

/// The backup taken under the load.
struct Backup {
    folder: PathBuf,
    /// The creates acknowledged before it began: each must be in it.
    before: Acked,
    began: f64,
    took: Duration,
}

/// What the clients saw, in time since the load began.
#[derive(Default)]
struct Observed {
    /// Start time (seconds) and latency of every successful request.
    samples: Vec<(f64, Duration)>,
    /// Retryable failures by kind.
    retried: BTreeMap<String, usize>,
    /// Non-retryable answers (each one a finding).
    refused: Vec<String>,
    /// Every create key sent, with its user.
    issued: HashMap<String, usize>,
    /// Every acknowledged create: key, id and when it was acknowledged.
    acked: Acked,
    /// Creates given up after [`RETRY_FOR`] of retryable failures.
    abandoned: usize,
    /// How long each acknowledged create took from its first attempt,
    /// retries included: what a person waited through a kill.
    acked_after: Vec<Duration>,
    lists: usize,
    /// Rows of another user returned by a list.
    cross_owner: Vec<String>,
}

struct Client {
    mcp: Mcp,
    user: usize,
    user_id: String,
}

async fn run_client(
    client: Client,
    index: usize,
    project: i64,
    started: Instant,
    stopping: Arc<AtomicBool>,
    observed: Arc<Mutex<Observed>>,
) {
    let since = |at: Instant| at.duration_since(started).as_secs_f64();
    let mut n = 0u64;
    while !stopping.load(Ordering::Relaxed) {
        n += 1;
        if mix(index as u64 * 1_000_003 + n) % 10 < 6 {
            let key = format!("soak-u{}-c{index}-{n}", client.user);
            observed
                .lock()
                .unwrap()
                .issued
                .insert(key.clone(), client.user);
            let arguments = json!({
                "values": {"date": day(DAY_0, (n % 28) as i64), "project": project, "hours": 1.5, "note": key},
                "idempotencyKey": key,
            });
            let first = Instant::now();
            loop {
                let sent = Instant::now();
                let outcome = attempt(
                    &client.mcp,
                    true,
                    &tool("entries__create"),
                    arguments.clone(),
                )
                .await;
                let settled = {
                    let mut seen = observed.lock().unwrap();
                    match outcome {
                        Outcome::Done(row) => {
                            seen.samples.push((since(sent), sent.elapsed()));
                            let id = row["id"].as_i64().unwrap_or(-1);
                            seen.acked.insert(key.clone(), (id, since(Instant::now())));
                            seen.acked_after.push(first.elapsed());
                            true
                        }
                        Outcome::Retry(kind) => {
                            *seen.retried.entry(kind).or_default() += 1;
                            let given_up = first.elapsed() > RETRY_FOR;
                            if given_up {
                                seen.abandoned += 1;
                            }
                            given_up
                        }
                        Outcome::Refused(what) => {
                            seen.refused.push(format!("create {key}: {what}"));
                            true
                        }
                    }
                };
                if settled {
                    break;
                }
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        } else {
            let sent = Instant::now();
            let outcome = attempt(
                &client.mcp,
                false,
                &tool("entries__list"),
                json!({"orderBy": [{"field": "date", "direction": "desc"}], "limit": 20}),
            )
            .await;
            let mut seen = observed.lock().unwrap();
            match outcome {
                Outcome::Done(result) => {
                    seen.samples.push((since(sent), sent.elapsed()));
                    seen.lists += 1;
                    let prefix = format!("soak-u{}-", client.user);
                    for row in result["rows"].as_array().into_iter().flatten() {
                        let note = row["note"].as_str().unwrap_or("");
                        if row["created_by"] != json!(client.user_id) || !note.starts_with(&prefix)
                        {
                            seen.cross_owner
                                .push(format!("user {} got {row}", client.user));
                        }
                    }
                }
                Outcome::Retry(kind) => *seen.retried.entry(kind).or_default() += 1,
                Outcome::Refused(what) => seen.refused.push(format!("list: {what}")),
            }
        }
        tokio::time::sleep(PACE).await;
    }
}

/// The ledger check of one app database against what the clients saw.
#[derive(Debug, Default)]
struct Ledger {
    rows: usize,
    checked: usize,
    missing: usize,
    duplicated: usize,
    wrong_id: usize,
    wrong_owner: usize,
    unknown: usize,
    audit_mismatch: usize,
}

impl Ledger {
    fn clean(&self) -> bool {
        self.missing
            + self.duplicated
            + self.wrong_id
            + self.wrong_owner
            + self.unknown
            + self.audit_mismatch
            == 0
    }

    /// Checks `database` for every acknowledged key in `acked` (each exactly
    /// once, with its id and owner), every row (sent by a client, at most
    /// once per key, with one create audit row by its owner).
    fn check(database: &Path, observed: &Observed, acked: &Acked, user_ids: &[String]) -> Ledger {
        let conn = rusqlite::Connection::open_with_flags(
            database,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let mut by_key: HashMap<String, Vec<(i64, String)>> = HashMap::new();
        let mut ledger = Ledger::default();
        let mut rows = conn
            .prepare("SELECT id, note, created_by FROM entries")
            .unwrap();
        let mut rows = rows.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            ledger.rows += 1;
            let note: String = row.get::<_, Option<String>>(1).unwrap().unwrap_or_default();
            by_key
                .entry(note)
                .or_default()
                .push((row.get(0).unwrap(), row.get(2).unwrap()));
        }
        let mut audits: HashMap<String, (usize, String)> = HashMap::new();
        let mut audit = conn
            .prepare("SELECT record_id, actor_id FROM _sasha_audit WHERE table_name = 'entries' AND operation = 'create'")
            .unwrap();
        let mut audit = audit.query([]).unwrap();
        while let Some(row) = audit.next().unwrap() {
            let entry = audits
                .entry(row.get(0).unwrap())
                .or_insert((0, row.get(1).unwrap()));
            entry.0 += 1;
        }
        for (key, found) in &by_key {
            let Some(&user) = observed.issued.get(key) else {
                ledger.unknown += found.len();
                continue;
            };
            if found.len() > 1 {
                ledger.duplicated += 1;
            }
            for (id, owner) in found {
                if *owner != user_ids[user] {
                    ledger.wrong_owner += 1;
                }
                match audits.get(&id.to_string()) {
                    Some((1, actor)) if actor == owner => {}
                    _ => ledger.audit_mismatch += 1,
                }
            }
        }
        for (key, (id, _)) in acked {
            ledger.checked += 1;
            match by_key.get(key).map(Vec::as_slice) {
                None | Some([]) => ledger.missing += 1,
                Some([(found, _)]) if found != id => ledger.wrong_id += 1,
                _ => {}
            }
        }
        ledger
    }

    fn line(&self, what: &str) -> String {
        format!(
            "| {what} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            self.rows,
            self.checked,
            self.missing,
            self.duplicated,
            self.wrong_id,
            self.wrong_owner,
            self.unknown,
            self.audit_mismatch,
            if self.clean() { "pass" } else { "FAIL" }
        )
    }
}

/// One kill of the schedule.
struct Kill {
    role: &'static str,
    killed_at: f64,
    ready_at: f64,
    /// Its node's volume went with it (`--replication`).
    wiped: bool,
}

/// Seconds after `ready_at` until a one-second window of successful
/// requests had p99 under the target, with that window's p99.
fn recovery(samples: &[(f64, Duration)], ready_at: f64) -> Option<(u64, Duration)> {
    for k in 0..60u64 {
        let from = ready_at + k as f64;
        let mut window: Vec<Duration> = samples
            .iter()
            .filter(|(at, _)| *at >= from && *at < from + 1.0)
            .map(|(_, latency)| *latency)
            .collect();
        if window.len() < WINDOW_MIN_SAMPLES {
            continue;
        }
        window.sort_unstable();
        let p99 = percentile(&window, 0.99);
        if p99 < P99_TARGET {
            return Some((k + 1, p99));
        }
    }
    None
}

/// The data-worker that owns the app, by the control plane.
fn owner_of_app(state: &Path) -> String {
    let core = rusqlite::Connection::open(state.join("core.sqlite")).unwrap();
    core.busy_timeout(Duration::from_secs(5)).unwrap();
    core.query_row(
        "SELECT worker_id FROM app_placements WHERE app_id = ?1",
        [APP],
        |row| row.get(0),
    )
    .unwrap()
}

fn flag(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|arg| arg == name)
        .and_then(|i| args.get(i + 1))
        .map(|value| {
            value
                .parse()
                .unwrap_or_else(|_| panic!("{name} takes a number"))
        })
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let minutes = flag(&args, "--minutes", 10);
    let clients = flag(&args, "--clients", 6) as usize;
    let workers = flag(&args, "--workers", 1) as usize;
    // Several workers fail over by restoring from object storage.
    let replication = args.iter().any(|arg| arg == "--replication") || workers > 1;
    let duration = Duration::from_secs(minutes * 60);
    eprintln!(
        "soak: {minutes} min, {clients} clients, {USERS} users, {workers} data-worker(s){}",
        if replication {
            ", sync replication with volume wipes"
        } else {
            ""
        }
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let storage = replication.then(|| runtime.block_on(ObjectStorage::start()));

    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path().to_owned();
    let (pki, _) = DevPki::ensure(&state.join("certs")).unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps").join(APP);
    copy_tree(&source, &state.join("docs/apps").join(APP));
    // The app's manager keeps the shared projects; the writers are members
    // with `use`, so owner scoping applies to every one of their reads.
    let admin = Staff::named(&state, "soak-admin");
    let staff: Vec<Staff> = (0..USERS)
        .map(|u| Staff::with_role(&state, &format!("soak-{u}"), UserRole::Member))
        .collect();
    let user_ids: Vec<String> = staff.iter().map(|s| s.id.clone()).collect();

    let port = || free_port().unwrap();
    let (data_port, core_grpc, core_http, gateway_a, gateway_b, proxy_port) =
        (port(), port(), port(), port(), port(), port());
    let studio = format!("https://{STUDIO_HOST}:{proxy_port}");
    let origins = [
        ("SASHA_PUBLIC_ORIGIN", studio.clone()),
        (
            "SASHA_APP_SANDBOX_ORIGIN",
            format!("https://{SANDBOX_HOST}:{proxy_port}"),
        ),
    ];
    let data_url = format!("https://127.0.0.1:{data_port}");
    let core_url = format!("https://127.0.0.1:{core_grpc}");
    let with_origins = |mut env: Vec<(&'static str, String)>| {
        env.extend(origins.iter().cloned());
        env
    };
    // A role's replication: its sidecar's socket and the files of its
    // node's volume (`None` without --replication).
    let replicated = |role: Role, volume: Vec<PathBuf>| {
        storage.as_ref().map(|_| Replicated {
            socket: state.join("sockets").join(format!("{role}.sock")),
            sidecar: None,
            volume,
            wiped: false,
        })
    };
    let replica_env = |socket: &Path| -> Vec<(&'static str, String)> {
        match &storage {
            Some(storage) => replica::role_env(storage, "soak", socket, "sync"),
            None => Vec::new(),
        }
    };
    let role_socket = |role: Role| state.join("sockets").join(format!("{role}.sock"));
    let core_db = state.join("core.sqlite");
    let core_volume = ["", "-wal", "-shm", "-generation"]
        .map(|suffix| PathBuf::from(format!("{}{suffix}", core_db.display())))
        .into_iter()
        .chain([state.join(".core.sqlite-litestream")])
        .collect();
    // With several workers every role routes by placement.
    let placed: Vec<(&'static str, String)> = if workers > 1 {
        vec![("SASHA_DATA_PLACEMENT", "leases".to_owned())]
    } else {
        Vec::new()
    };
    let gateway = |name: &'static str, port: u16| {
        let mut env = with_origins(vec![
            ("SASHA_GATEWAY_HTTP_ADDR", format!("127.0.0.1:{port}")),
            ("SASHA_CORE_GRPC_URL", core_url.clone()),
        ]);
        if workers > 1 {
            env.extend(placed.iter().cloned());
        } else {
            env.push(("SASHA_DATA_GRPC_URL", data_url.clone()));
        }
        Managed {
            name,
            role: Role::McpGateway,
            env,
            child: None,
            replicated: None,
            downtime: DOWNTIME,
        }
    };
    let mut core_env = with_origins(vec![
        ("SASHA_CORE_GRPC_ADDR", format!("127.0.0.1:{core_grpc}")),
        ("SASHA_CORE_HTTP_ADDR", format!("127.0.0.1:{core_http}")),
    ]);
    if workers > 1 {
        core_env.extend(placed.iter().cloned());
        core_env.push(("SASHA_DATA_LEASE_SECS", LEASE.as_secs().to_string()));
    } else {
        core_env.push(("SASHA_DATA_GRPC_URL", data_url.clone()));
    }
    core_env.extend(replica_env(&role_socket(Role::StudioCore)));
    let core = Managed {
        name: "studio-core",
        role: Role::StudioCore,
        env: core_env,
        child: None,
        replicated: replicated(Role::StudioCore, core_volume),
        downtime: DOWNTIME,
    };
    // The roles in the order they start; `order` is the kill schedule.
    let (mut roles, order): (Vec<Managed>, Vec<usize>) = if workers > 1 {
        let mut roles = vec![core];
        for n in 1..=workers {
            let name: &'static str = Box::leak(format!("worker-{n}").into_boxed_str());
            let socket = state.join("sockets").join(format!("{name}.sock"));
            let volume = state.join("workers").join(name);
            let mut env = with_origins(vec![
                ("SASHA_DATA_GRPC_ADDR", format!("127.0.0.1:{}", port())),
                ("SASHA_DATA_WORKER_ID", name.to_owned()),
                ("SASHA_CORE_GRPC_URL", core_url.clone()),
                ("APP_DATA_ROOT", volume.display().to_string()),
            ]);
            env.extend(placed.iter().cloned());
            env.extend(replica_env(&socket));
            roles.push(Managed {
                name,
                role: Role::DataWorker,
                env,
                child: None,
                replicated: storage.as_ref().map(|_| Replicated {
                    socket,
                    sidecar: None,
                    volume: vec![volume],
                    wiped: false,
                }),
                // Down past its lease: an app it owned fails over.
                downtime: LEASE + Duration::from_secs(3),
            });
        }
        roles.push(gateway("mcp-gateway A", gateway_a));
        roles.push(gateway("mcp-gateway B", gateway_b));
        // A gateway, each worker in turn, studio-core, the other gateway.
        let mut order = vec![workers + 1];
        order.extend(1..=workers);
        order.extend([0, workers + 2]);
        (roles, order)
    } else {
        let mut data_env = with_origins(vec![(
            "SASHA_DATA_GRPC_ADDR",
            format!("127.0.0.1:{data_port}"),
        )]);
        data_env.extend(replica_env(&role_socket(Role::DataWorker)));
        let roles = vec![
            Managed {
                name: "data-worker",
                role: Role::DataWorker,
                env: data_env,
                child: None,
                replicated: replicated(Role::DataWorker, vec![state.join("apps")]),
                downtime: DOWNTIME,
            },
            core,
            gateway("mcp-gateway A", gateway_a),
            gateway("mcp-gateway B", gateway_b),
        ];
        // Two rounds of (a gateway replica, data-worker, studio-core).
        (roles, vec![2, 0, 1, 3, 0, 1])
    };
    for role in &mut roles {
        role.start(&state, &pki, &runtime);
    }
    for member in &staff {
        admin
            .store
            .grant(APP, &member.id, AppAccess::Use, Some(&admin.id))
            .unwrap();
    }
    let tls = state.join("public-tls");
    let cert_pem = nginx::public_tls(&tls, &[STUDIO_HOST, SANDBOX_HOST]);
    let mut values = BTreeMap::from([
        ("SASHA_STUDIO_HOST", STUDIO_HOST.to_owned()),
        ("SASHA_SANDBOX_HOST", SANDBOX_HOST.to_owned()),
        ("SASHA_LISTEN", format!("127.0.0.1:{proxy_port} ssl")),
        (
            "STUDIO_CORE_SERVERS",
            format!("server 127.0.0.1:{core_http};"),
        ),
        // Not under load here; nginx needs an address for its upstream.
        ("EDGE_SANDBOX_HTTP", format!("127.0.0.1:{}", port())),
        (
            "MCP_GATEWAY_SERVERS",
            [gateway_a, gateway_b]
                .map(|port| format!("server 127.0.0.1:{port} max_fails=1 fail_timeout=2s;"))
                .join("\n    "),
        ),
    ]);
    values.extend(nginx::tls_values(&tls));
    let proxy = nginx::start(
        &state.join("nginx"),
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/nginx/sasha.conf.template"),
        values,
    );
    let http = nginx::client(proxy_port, &cert_pem, &[STUDIO_HOST]);
    let mcp_of = |staff: &Staff| Mcp {
        http: http.clone(),
        url: format!("{studio}/mcp"),
        session: staff.session(),
        token: staff.token(),
        app: APP.to_owned(),
        origin: studio.clone(),
        client: "soak",
    };

    let project = runtime.block_on(async {
        let mcp = mcp_of(&admin);
        for _ in 0..200 {
            let arguments = json!({"values": {"name": "Soak"}, "idempotencyKey": "soak-project"});
            match attempt(&mcp, true, &tool("projects__create"), arguments).await {
                Outcome::Done(row) => return row["id"].as_i64().expect("a project id"),
                Outcome::Retry(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                Outcome::Refused(what) => panic!("the project: {what}\n{}", proxy.error_log()),
            }
        }
        panic!(
            "nginx and the roles did not come up:\n{}",
            proxy.error_log()
        );
    });

    // The schedule, evenly spread, and (with one worker) the backup between
    // the fourth and fifth kill.
    let at = |i: usize| duration.mul_f64((i + 1) as f64 / (order.len() + 1) as f64);
    let backup_at = (at(3) + at(4)) / 2;
    let stopping = Arc::new(AtomicBool::new(false));
    let observed = Arc::new(Mutex::new(Observed::default()));
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|index| {
            let user = index % USERS;
            let client = Client {
                mcp: mcp_of(&staff[user]),
                user,
                user_id: user_ids[user].clone(),
            };
            runtime.spawn(run_client(
                client,
                index,
                project,
                started,
                Arc::clone(&stopping),
                Arc::clone(&observed),
            ))
        })
        .collect();

    let since = |at: Instant| at.duration_since(started).as_secs_f64();
    let backups = state.join("backups");
    let mut kills = Vec::new();
    let mut backup: Option<Backup> = None;
    let mut events: Vec<(Duration, Option<usize>)> =
        (0..order.len()).map(|i| (at(i), Some(order[i]))).collect();
    if workers == 1 {
        events.push((backup_at, None));
    }
    events.sort_by_key(|(when, _)| *when);
    for (when, what) in events {
        if let Some(wait) = when.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
        match what {
            Some(index) => {
                let role = &mut roles[index];
                let owned = (workers > 1 && role.role == Role::DataWorker)
                    .then(|| owner_of_app(&state) == role.name);
                let killed_at = since(Instant::now());
                let wiped = role.kill_node();
                // The outage itself: a worker stays down past its lease so
                // its app fails over, any other role for a moment.
                std::thread::sleep(role.downtime);
                role.start(&state, &pki, &runtime);
                let ready_at = since(Instant::now());
                eprintln!(
                    "soak: {} killed at {killed_at:.1} s{}{}, ready again at {ready_at:.1} s",
                    role.name,
                    if wiped { " with its volume" } else { "" },
                    if owned == Some(true) {
                        ", owning the app"
                    } else {
                        ""
                    },
                );
                kills.push(Kill {
                    role: if owned == Some(true) {
                        Box::leak(
                            format!("{} (owning the app: failed over)", role.name).into_boxed_str(),
                        )
                    } else {
                        role.name
                    },
                    killed_at,
                    ready_at,
                    wiped,
                });
            }
            None => {
                // Every write acknowledged before the backup begins must be in it.
                let before = observed.lock().unwrap().acked.clone();
                let began = Instant::now();
                let output = std::process::Command::new(env!("CARGO_BIN_EXE_sasha"))
                    .args(["backup", "--out"])
                    .arg(&backups)
                    .arg("--state-dir")
                    .arg(&state)
                    .output()
                    .unwrap();
                let took = began.elapsed();
                assert!(
                    output.status.success(),
                    "sasha backup: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
                let folder = PathBuf::from(String::from_utf8(output.stdout).unwrap().trim());
                eprintln!(
                    "soak: backup at {:.1} s in {took:?}: {}",
                    since(began),
                    folder.display()
                );
                backup = Some(Backup {
                    folder,
                    before,
                    began: since(began),
                    took,
                });
            }
        }
    }
    if let Some(wait) = duration.checked_sub(started.elapsed()) {
        std::thread::sleep(wait);
    }
    stopping.store(true, Ordering::Relaxed);
    runtime.block_on(async {
        for task in tasks {
            task.await.unwrap();
        }
    });
    let elapsed = started.elapsed();
    let observed = Arc::try_unwrap(observed)
        .ok()
        .unwrap()
        .into_inner()
        .unwrap();
    // The app's live file: on its owner's volume with several workers.
    let live_file = if workers > 1 {
        let core = rusqlite::Connection::open(state.join("core.sqlite")).unwrap();
        let owner: String = core
            .query_row(
                "SELECT worker_id FROM app_placements WHERE app_id = ?1",
                [APP],
                |row| row.get(0),
            )
            .unwrap();
        state
            .join("workers")
            .join(owner)
            .join(format!("{APP}.sqlite"))
    } else {
        state.join("apps").join(format!("{APP}.sqlite"))
    };
    let live = Ledger::check(&live_file, &observed, &observed.acked, &user_ids);

    // The drill: the backup restored into a fresh state folder, as the
    // restore steps of docs/operating.md say, and the roles started on it.
    let drill = backup.map(|backup| {
        let Backup {
            folder,
            before,
            began: backup_began,
            took: backup_took,
        } = backup;
        let restored_dir = tempfile::tempdir().unwrap();
        let restored = restored_dir.path();
        copy_tree(&state.join("docs"), &restored.join("docs"));
        std::fs::copy(folder.join("core.sqlite"), restored.join("core.sqlite")).unwrap();
        copy_tree(&folder.join("apps"), &restored.join("apps"));
        let restored_db = restored.join("apps").join(format!("{APP}.sqlite"));
        let drill = Ledger::check(&restored_db, &observed, &before, &user_ids);
        let (restored_pki, _) = DevPki::ensure(&restored.join("certs")).unwrap();
        let (mut worker, restored_data) = start_worker(restored, &restored_pki);
        let (mut core, restored_core) = start_core(restored, &restored_pki, &restored_data, &[]);
        let (mut gateway, restored_url) =
            start_gateway(restored, &restored_pki, &restored_data, restored_core);
        let counts: Vec<(i64, i64)> = runtime.block_on(async {
            let mut counts = Vec::new();
            let conn = rusqlite::Connection::open(&restored_db).unwrap();
            for (user, id) in user_ids.iter().enumerate() {
                // A token minted in the restored store: the soak's own were
                // minted after the backup, so the restored store never had them.
                let restored_staff = Staff {
                    store: Store::open(&restored.join("core.sqlite")).unwrap(),
                    id: id.clone(),
                };
                let mut mcp = mcp_of(&restored_staff);
                mcp.http = common::fixture::http_client();
                mcp.url.clone_from(&restored_url);
                let served = match attempt(
                    &mcp,
                    false,
                    &tool("entries__aggregate"),
                    json!({"metrics": [{"as": "n", "count": "id"}]}),
                )
                .await
                {
                    Outcome::Done(result) => result["groups"][0]["n"].as_i64().unwrap_or(-1),
                    Outcome::Retry(what) | Outcome::Refused(what) => {
                        panic!("restored aggregate: {what}")
                    }
                };
                let stored: i64 = conn
                    .query_row(
                        "SELECT COUNT(*) FROM entries WHERE created_by = ?1",
                        [&user_ids[user]],
                        |row| row.get(0),
                    )
                    .unwrap();
                counts.push((served, stored));
            }
            counts
        });
        for child in [&mut gateway, &mut core, &mut worker] {
            stop(child);
        }
        (drill, counts, backup_began, backup_took)
    });
    drop(proxy);
    for role in &mut roles {
        role.kill();
    }

    // The report.
    let mut samples = observed.samples.clone();
    samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut all: Vec<Duration> = samples.iter().map(|(_, latency)| *latency).collect();
    all.sort_unstable();
    let retried: usize = observed.retried.values().sum();
    let mut acked_after = observed.acked_after.clone();
    acked_after.sort_unstable();
    let mut report = String::new();
    let mut line = |text: String| {
        println!("{text}");
        report.push_str(&text);
        report.push('\n');
    };
    line(format!(
        "# Chaos soak{}\n\n{workers} data-worker(s); {:.0} s, {clients} clients of {USERS} users through nginx to two gateway replicas; \
         {} creates acknowledged, {} lists, {} successful requests (p50 {:.2} ms, p99 {:.2} ms, max {:.0} ms); \
         {retried} retryable failures retried ({}); a create acknowledged after at most {:.0} ms from its first attempt (p99 {:.2} ms); \
         {} creates abandoned after {RETRY_FOR:?}; {} non-retryable answers.\n",
        if replication {
            " with sync replication (SeaweedFS, Litestream sidecars), volumes wiped"
        } else {
            ""
        },
        elapsed.as_secs_f64(),
        observed.acked.len(),
        observed.lists,
        all.len(),
        ms(percentile(&all, 0.5)),
        ms(percentile(&all, 0.99)),
        ms(*all.last().unwrap_or(&Duration::ZERO)),
        observed
            .retried
            .iter()
            .map(|(kind, n)| format!("{kind}: {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        ms(*acked_after.last().unwrap_or(&Duration::ZERO)),
        ms(percentile(&acked_after, 0.99)),
        observed.abandoned,
        observed.refused.len(),
    ));
    for refused in observed.refused.iter().take(5) {
        line(format!("- refused: {refused}"));
    }
    line("| kill | volume wiped | killed at | ready at | p99 under 20 ms after | that window's p99 |".to_owned());
    line("|---|---|---|---|---|---|".to_owned());
    let mut recovered = true;
    for kill in &kills {
        let back = recovery(&samples, kill.ready_at);
        recovered &= back.is_some_and(|(after, _)| Duration::from_secs(after) <= RECOVERY_TARGET);
        line(format!(
            "| {} | {} | {:.1} s | {:.1} s | {} | {} |",
            kill.role,
            if kill.wiped {
                "yes: back from object storage"
            } else {
                "no"
            },
            kill.killed_at,
            kill.ready_at,
            back.map_or("never".to_owned(), |(after, _)| format!("{after} s")),
            back.map_or("–".to_owned(), |(_, p99)| format!("{:.2} ms", ms(p99))),
        ));
    }
    line(String::new());
    line("| ledger | rows | acknowledged checked | missing | duplicated | wrong id | wrong owner | unsent | audit ≠ 1 | result |".to_owned());
    line("|---|---|---|---|---|---|---|---|---|---|".to_owned());
    line(live.line("live, after the soak"));
    let mut counts_match = true;
    match &drill {
        Some((drill, counts, backup_began, backup_took)) => {
            line(drill.line(&format!(
                "restored backup (taken at {backup_began:.1} s in {backup_took:.2?})"
            )));
            counts_match = counts.iter().all(|(served, stored)| served == stored);
            line(format!(
                "\nCross-owner rows returned by {} lists: {}. Restored stack's per-user counts through MCP = the restored file's: {} ({:?}).",
                observed.lists,
                observed.cross_owner.len(),
                if counts_match { "yes" } else { "NO" },
                counts,
            ));
        }
        None => line(format!(
            "\nCross-owner rows returned by {} lists: {}. No backup drill with {workers} workers.",
            observed.lists,
            observed.cross_owner.len(),
        )),
    }
    for leak in observed.cross_owner.iter().take(5) {
        line(format!("- {leak}"));
    }
    line(format!(
        "Every restart back under {P99_TARGET:?} p99 within {RECOVERY_TARGET:?}: {}.",
        if recovered { "yes" } else { "no" }
    ));
    let dir = results_dir("soak-");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("results.md"), &report).unwrap();
    eprintln!("soak: wrote {}", dir.join("results.md").display());
    let passed = live.clean()
        && drill.as_ref().is_none_or(|(drill, ..)| drill.clean())
        && observed.cross_owner.is_empty()
        && counts_match
        && observed.refused.is_empty();
    if !passed {
        std::process::exit(1);
    }
}
