//! `sasha up`: the whole system on one machine.
//!
//! The supervisor mints (or reuses) the development PKI and the dev admin's
//! credentials in the state folder, starts the four roles as child processes of
//! this same binary in dependency order (each on a free loopback port, announced
//! on its readiness line), then serves the development ingress. It never restarts
//! a child: if one exits, it names it, stops the rest and exits non-zero.
//!
//! `--workers N` (N > 1) runs N data-workers holding leases from studio-core
//! (`SASHA_DATA_PLACEMENT=leases`): studio-core starts first, then the
//! workers, each with its own name, data folder and replicator, then the
//! gateway. A worker taking over a lost one's apps restores them from object
//! storage, so this needs `SASHA_REPLICA_URL`.
//!
//! Children get a pipe as stdin and `SASHA_EXIT_ON_STDIN_EOF=1`, so they stop
//! even when the supervisor is killed outright and cannot signal them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use rand::Rng as _;
use sasha_service::Role;
use sasha_service::config::{Env, Origins, ProcessEnv};
use sasha_service::core_database::CoreDatabase;
use sasha_service::data_plane::{self, Layout};
use sasha_service::identity::DevPki;
use sasha_service::process::EXIT_ON_STDIN_EOF;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::ingress::{self, Backends};

/// How long a role may take to announce readiness.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a role may take to stop after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The most studio-core replicas `sasha up` starts.
pub(crate) const MAX_CORE_REPLICAS: u8 = 8;
/// The most data-workers `sasha up` starts.
pub(crate) const MAX_DATA_WORKERS: u8 = 8;

/// How many of each role `sasha up` runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Copies {
    /// `--core-replicas`.
    pub(crate) core_replicas: u8,
    /// `--workers`: data-workers.
    pub(crate) workers: u8,
}

pub(crate) fn main(state_dir: Option<PathBuf>, port: u16, copies: Copies) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("sasha up: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    match runtime.block_on(supervise(state_dir, port, copies)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("sasha up: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// A started child (a role, or a role's replicator): its pid and the pipe
/// that keeps it alive.
struct Running {
    pid: u32,
    _stdin: ChildStdin,
}

/// What the watcher of one child reports; an exit names the child (a role,
/// or a role's replicator).
enum ChildEvent {
    Ready(Role, HashMap<String, SocketAddr>),
    Exited(String, u32, std::io::Result<ExitStatus>),
}

/// One child role to start: its role and which copy of it (from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Start {
    role: Role,
    copy: u8,
}

impl Start {
    /// The data-worker's name in the placement (`SASHA_DATA_WORKER_ID`).
    fn worker_id(self) -> String {
        format!("worker-{}", self.copy)
    }

    /// How the supervisor names the child in its lines: the role, and a
    /// leased worker's name.
    fn label(self, layout: Layout) -> String {
        match (self.role, layout) {
            (Role::DataWorker, Layout::Leases) => format!("{} {}", self.role, self.worker_id()),
            _ => self.role.to_string(),
        }
    }
}

/// The roles in the order they start, each after what it calls is ready:
/// with one data-worker it comes first (studio-core calls it); with leases
/// studio-core does (workers renew their leases with it), then the workers,
/// then the gateway.
fn start_order(layout: Layout, copies: Copies) -> Vec<Start> {
    let order = match layout {
        Layout::Single => Role::ALL,
        Layout::Leases => [
            Role::StudioCore,
            Role::DataWorker,
            Role::McpGateway,
            Role::EdgeSandbox,
        ],
    };
    order
        .into_iter()
        .flat_map(|role| {
            let count = match role {
                Role::StudioCore => copies.core_replicas,
                Role::DataWorker => copies.workers,
                _ => 1,
            };
            (1..=count).map(move |copy| Start { role, copy })
        })
        .collect()
}

async fn supervise(
    state_dir: Option<PathBuf>,
    port: u16,
    copies: Copies,
) -> anyhow::Result<ExitCode> {
    let Copies {
        core_replicas,
        workers,
    } = copies;
    let env = ProcessEnv;
    let state_dir = state_dir.unwrap_or_else(|| sasha_service::config::state_dir(&env));
    std::fs::create_dir_all(&state_dir)
        .with_context(|| format!("cannot create the state folder {}", state_dir.display()))?;
    let state_dir = state_dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", state_dir.display()))?;

    let mut overrides: HashMap<String, String> = HashMap::new();
    overrides.insert("SASHA_STATE_DIR".into(), state_dir.display().to_string());
    let studio = env
        .var("SASHA_PUBLIC_ORIGIN")
        .unwrap_or_else(|| format!("http://localhost:{port}"));
    let sandbox = env
        .var("SASHA_APP_SANDBOX_ORIGIN")
        .unwrap_or_else(|| format!("http://127.0.0.1:{port}"));
    overrides.insert("SASHA_PUBLIC_ORIGIN".into(), studio);
    overrides.insert("SASHA_APP_SANDBOX_ORIGIN".into(), sandbox);
    let origins =
        Origins::from_env(&overrides).map_err(|error| anyhow!("invalid configuration: {error}"))?;

    let listeners = ingress::bind(port).await?;

    let (pki, minted) = DevPki::ensure(&state_dir.join("certs"))
        .context("cannot prepare the development certificates")?;
    if minted {
        println!(
            "Minted development certificates in {}",
            state_dir.join("certs").display()
        );
    }
    let admin = dev_admin(&state_dir)?;
    let mut storage_env: HashMap<String, String> = std::env::vars().collect();
    storage_env.extend(overrides.clone());
    let storage = sasha_service::config::StoragePaths::from_env(&storage_env)
        .map_err(|error| anyhow!("invalid configuration: {error}"))?;
    let database = CoreDatabase::from_env(&storage_env, &storage)
        .map_err(|error| anyhow!("invalid configuration: {error}"))?;
    if core_replicas > 1 && matches!(database, CoreDatabase::Sqlite(_)) {
        bail!(
            "--core-replicas {core_replicas} needs a core database every replica shares: set DATABASE_URL to a PostgreSQL database (the SQLite file has one writer)"
        );
    }
    // With replication on, a lost core database comes back from object
    // storage before anything here creates a fresh one.
    let database_folder = storage
        .db_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let replica = sasha_replica::ReplicaConfig::from_env(&storage_env, &database_folder)
        .map_err(|error| anyhow!("invalid configuration: {error}"))?;
    // Several workers share the apps by leases; one keeps today's layout
    // unless the environment asks for leases.
    let layout = if workers > 1 {
        Layout::Leases
    } else {
        Layout::from_env(&storage_env).map_err(|error| anyhow!("invalid configuration: {error}"))?
    };
    if workers > 1 && replica.is_none() {
        bail!(
            "--workers {workers} needs object storage: set {} (a worker that takes over a lost worker's apps restores them from their replicas; without it they would wait for the lost worker)",
            sasha_replica::config::REPLICA_URL
        );
    }
    if layout == Layout::Leases {
        overrides.insert(data_plane::DATA_PLACEMENT.into(), "leases".into());
    }
    // Litestream replicates SQLite files: a PostgreSQL core database
    // replicates itself, and studio-core refuses SASHA_REPLICA_URL over it.
    let core_replicated = replica.is_some() && matches!(database, CoreDatabase::Sqlite(_));
    if let Some(replica) = replica.as_ref().filter(|_| core_replicated) {
        let store = sasha_replica::s3::ObjectStore::new(&replica.url, &replica.credentials)
            .map_err(|error| anyhow!("{}: {error}", sasha_replica::config::REPLICA_URL))?;
        if sasha_replica::replicator::restore_if_missing(
            &store,
            replica,
            &sasha_replica::Database::Core,
            &storage.db_path,
        )
        .await
        .map_err(|error| anyhow!("{}: {error}", sasha_replica::config::REPLICA_URL))?
        {
            println!("Restored the core database from object storage");
        }
    }
    {
        // Store work is blocking (PostgreSQL's client may not run on an
        // async thread).
        let (database, username, password) = (
            database.clone(),
            admin.username.clone(),
            admin.password.clone(),
        );
        tokio::task::spawn_blocking(move || {
            crate::admin::ensure_dev_admin(&database, &username, &password)
        })
        .await
        .context("the development administrator's set-up stopped")?
        .context("cannot create the development administrator")?;
    }

    let (events, mut event_receiver) = mpsc::channel(16);
    let mut running: Vec<Running> = Vec::new();
    // Every replica's listeners, per role, in start order.
    let mut addresses: HashMap<Role, Vec<HashMap<String, SocketAddr>>> = HashMap::new();
    for next in start_order(layout, copies) {
        let Start { role, copy } = next;
        let label = next.label(layout);
        let mut child_env = overrides.clone();
        // Replicas share the core database, never a disk: the first works
        // in DOCS_ROOT (where authors edit), each other one in a folder of
        // its own that it fills from the database.
        if role == Role::StudioCore && copy > 1 {
            let docs = state_dir
                .join("core-replicas")
                .join(copy.to_string())
                .join("docs");
            std::fs::create_dir_all(&docs)
                .with_context(|| format!("cannot create {}", docs.display()))?;
            child_env.insert("DOCS_ROOT".into(), docs.display().to_string());
        }
        // Leased workers share no disk either: each has its name and its
        // own data folder, and advertises the address it binds.
        if role == Role::DataWorker && layout == Layout::Leases {
            child_env.insert("SASHA_DATA_WORKER_ID".into(), next.worker_id());
            child_env.insert(
                "APP_DATA_ROOT".into(),
                state_dir
                    .join("workers")
                    .join(next.worker_id())
                    .join("apps")
                    .display()
                    .to_string(),
            );
        }
        let files = pki.files(role);
        child_env.insert("SASHA_TLS_CA".into(), files.ca.display().to_string());
        child_env.insert("SASHA_TLS_CERT".into(), files.cert.display().to_string());
        child_env.insert("SASHA_TLS_KEY".into(), files.key.display().to_string());
        child_env.insert(EXIT_ON_STDIN_EOF.into(), "1".into());
        for var in [
            "SASHA_EDGE_ADDR",
            "SASHA_CORE_HTTP_ADDR",
            "SASHA_CORE_GRPC_ADDR",
            "SASHA_DATA_GRPC_ADDR",
            "SASHA_GATEWAY_HTTP_ADDR",
        ] {
            child_env.insert(var.into(), "127.0.0.1:0".into());
        }
        let urls = |role: Role| -> Option<String> {
            let urls: Vec<String> = addresses
                .get(&role)?
                .iter()
                .filter_map(|listeners| Some(format!("https://{}", listeners.get("grpc")?)))
                .collect();
            (!urls.is_empty()).then(|| urls.join(","))
        };
        // With leases, where each app is served is asked of studio-core.
        if layout == Layout::Single
            && let Some(data) = urls(Role::DataWorker)
        {
            child_env.insert("SASHA_DATA_GRPC_URL".into(), data);
        }
        if let Some(core) = urls(Role::StudioCore) {
            child_env.insert("SASHA_CORE_GRPC_URL".into(), core);
        }
        if role == Role::StudioCore && replica.is_some() && !core_replicated {
            // Empty reads as unset: data-workers keep replicating.
            child_env.insert(sasha_replica::config::REPLICA_URL.into(), String::new());
        }
        let replicated = match role {
            Role::StudioCore => core_replicated,
            Role::DataWorker => replica.is_some(),
            _ => false,
        };
        if replicated {
            // One replicator per role that owns databases, as a sidecar is
            // in production; started first and stopped after its role.
            let socket = match (role, layout) {
                (Role::DataWorker, Layout::Leases) => format!("{role}-{copy}.sock"),
                _ => format!("{role}.sock"),
            };
            let socket = state_dir.join("replica").join(socket);
            let replicator =
                match start_replicator(&label, &socket, &child_env, events.clone()).await {
                    Ok(replicator) => replicator,
                    Err(error) => {
                        stop_all(&running).await;
                        return Err(error);
                    }
                };
            println!("Started the replicator of {label} (pid {})", replicator.pid);
            running.push(replicator);
            child_env.insert(
                sasha_replica::config::REPLICA_SOCKET.into(),
                socket.display().to_string(),
            );
        }
        let started = match start(role, &label, &child_env, events.clone()) {
            Ok(started) => started,
            Err(error) => {
                stop_all(&running).await;
                return Err(error);
            }
        };
        println!("Started {label} (pid {})", started.pid);
        let ready = tokio::time::timeout(READY_TIMEOUT, async {
            loop {
                match event_receiver.recv().await {
                    Some(ChildEvent::Ready(ready_role, listeners)) if ready_role == role => {
                        return Ok(listeners);
                    }
                    Some(ChildEvent::Ready(..)) => {}
                    Some(ChildEvent::Exited(exited, pid, status)) => {
                        return Err(anyhow!(
                            "{exited} (pid {pid}) exited during start-up: {}",
                            describe(&status)
                        ));
                    }
                    None => return Err(anyhow!("lost track of the child processes")),
                }
            }
        })
        .await;
        let listeners = match ready {
            Ok(Ok(listeners)) => listeners,
            Ok(Err(error)) => {
                stop_all(&running).await;
                terminate(started.pid).await;
                return Err(error);
            }
            Err(_) => {
                stop_all(&running).await;
                terminate(started.pid).await;
                bail!(
                    "{label} did not become ready within {}s",
                    READY_TIMEOUT.as_secs()
                );
            }
        };
        addresses.entry(role).or_default().push(listeners);
        running.push(started);
    }

    // By the role's own readiness line: a role's replicator is also
    // running under the role's name, with no listeners.
    let replicas = |role: Role, listener: &str| -> anyhow::Result<Vec<SocketAddr>> {
        addresses
            .get(&role)
            .into_iter()
            .flatten()
            .map(|listeners| {
                listeners
                    .get(listener)
                    .copied()
                    .ok_or_else(|| anyhow!("{role} announced no {listener} listener"))
            })
            .collect()
    };
    let backend = |role: Role, listener: &str| -> anyhow::Result<SocketAddr> {
        replicas(role, listener)?
            .first()
            .copied()
            .ok_or_else(|| anyhow!("{role} did not start"))
    };
    let backends = Backends {
        edge: backend(Role::EdgeSandbox, "http")?,
        core: ingress::Replicas::new(replicas(Role::StudioCore, "http")?),
        gateway: backend(Role::McpGateway, "http")?,
    };
    let ingress_task = tokio::spawn(ingress::serve(listeners, origins.clone(), backends));

    let studio = origins.studio.as_str();
    println!();
    println!("Sasha is running.");
    println!("  Studio     {studio}");
    println!("  Sandbox    {}/app-sandbox", origins.sandbox);
    println!("  MCP        {studio}/mcp");
    println!("  Health     {studio}/healthz");
    println!("  Core DB    {}", database.place());
    if core_replicas > 1 {
        println!("  Replicas   {core_replicas} of studio-core");
    }
    if layout == Layout::Leases {
        println!("  Workers    {workers} data-workers holding leases");
    }
    let (admin_line, password_line) = dev_admin_lines(
        &admin,
        &state_dir.join("dev-admin.json"),
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
    );
    println!("{admin_line}");
    println!("  State      {}", state_dir.display());
    println!("Press Ctrl-C to stop.");
    if let Some(line) = password_line {
        eprintln!("{line}");
    }

    let outcome = tokio::select! {
        _ = sasha_service::process::wait_for_signal() => {
            println!("Stopping…");
            Ok(ExitCode::SUCCESS)
        }
        event = next_exit(&mut event_receiver) => {
            let (role, pid, status) = event;
            eprintln!(
                "sasha up: {role} (pid {pid}) exited unexpectedly: {}; stopping the other roles",
                describe(&status)
            );
            Ok(ExitCode::FAILURE)
        }
        result = ingress_task => {
            match result {
                Ok(Err(error)) => eprintln!("sasha up: the ingress failed: {error:#}"),
                _ => eprintln!("sasha up: the ingress stopped"),
            }
            Ok(ExitCode::FAILURE)
        }
    };
    stop_all(&running).await;
    outcome
}

async fn next_exit(
    events: &mut mpsc::Receiver<ChildEvent>,
) -> (String, u32, std::io::Result<ExitStatus>) {
    loop {
        match events.recv().await {
            Some(ChildEvent::Exited(role, pid, status)) => return (role, pid, status),
            Some(ChildEvent::Ready(..)) => {}
            None => std::future::pending::<()>().await,
        }
    }
}

/// Spawns `sasha serve <role>` and the tasks that relay its output and watch
/// it; `label` names it in the lines it relays and in its exit.
fn start(
    role: Role,
    label: &str,
    env: &HashMap<String, String>,
    events: mpsc::Sender<ChildEvent>,
) -> anyhow::Result<Running> {
    let exe = std::env::current_exe().context("cannot find the sasha executable")?;
    let mut child: Child = Command::new(exe)
        .arg("serve")
        .arg(role.as_str())
        .envs(env)
        // Four roles cannot share one probe port; local runs need none.
        .env_remove(sasha_service::health::HEALTH_ADDR)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {label}"))?;
    let pid = child
        .id()
        .ok_or_else(|| anyhow!("{label} exited at once"))?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| anyhow!("no stdin pipe for {label}"))?;
    if let Some(stderr) = child.stderr.take() {
        let label = label.to_owned();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("[{label}] {line}");
            }
        });
    }
    let stdout = child.stdout.take();
    let ready_events = events.clone();
    let out_label = label.to_owned();
    tokio::spawn(async move {
        let Some(stdout) = stdout else { return };
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            match parse_ready(&line) {
                Some(listeners) => {
                    let _ = ready_events.send(ChildEvent::Ready(role, listeners)).await;
                }
                None => println!("[{out_label}] {line}"),
            }
        }
    });
    let label = label.to_owned();
    tokio::spawn(async move {
        let status = child.wait().await;
        let _ = events.send(ChildEvent::Exited(label, pid, status)).await;
    });
    Ok(Running { pid, _stdin: stdin })
}

/// How long a replicator may take before its control socket answers.
const REPLICATOR_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts `sasha litestream --socket SOCKET` for the role `role` names and
/// waits until the socket answers.
async fn start_replicator(
    role: &str,
    socket: &Path,
    env: &HashMap<String, String>,
    events: mpsc::Sender<ChildEvent>,
) -> anyhow::Result<Running> {
    let exe = std::env::current_exe().context("cannot find the sasha executable")?;
    let label = format!("the replicator of {role}");
    let mut child: Child = Command::new(exe)
        .arg("litestream")
        .arg("--socket")
        .arg(socket)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {label}"))?;
    let pid = child
        .id()
        .ok_or_else(|| anyhow!("{label} exited at once"))?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| anyhow!("no stdin pipe for {label}"))?;
    if let Some(stderr) = child.stderr.take() {
        let role = role.to_owned();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("[litestream {role}] {line}");
            }
        });
    }
    let (exited_tx, mut exited_rx) = tokio::sync::oneshot::channel();
    let exited_label = label.clone();
    tokio::spawn(async move {
        let status = child.wait().await;
        let _ = exited_tx.send(describe(&status));
        let _ = events
            .send(ChildEvent::Exited(exited_label, pid, status))
            .await;
    });
    let control = sasha_replica::control::Control::new(socket);
    let deadline = tokio::time::Instant::now() + REPLICATOR_READY_TIMEOUT;
    loop {
        if control.ping().await.is_ok() {
            break;
        }
        if let Ok(status) = exited_rx.try_recv() {
            bail!("{label} exited during start-up: {status}");
        }
        if tokio::time::Instant::now() > deadline {
            terminate(pid).await;
            bail!(
                "{label} did not open {} within {}s",
                socket.display(),
                REPLICATOR_READY_TIMEOUT.as_secs()
            );
        }
        // The socket appears only once Litestream runs: nothing to wait on
        // but the file itself, and a start-up takes tens of milliseconds.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(Running { pid, _stdin: stdin })
}

/// Reads a readiness line: `{"event":"ready","role":…,"listeners":{name: addr}}`.
fn parse_ready(line: &str) -> Option<HashMap<String, SocketAddr>> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    if value.get("event")?.as_str()? != "ready" {
        return None;
    }
    value
        .get("listeners")?
        .as_object()?
        .iter()
        .map(|(name, addr)| Some((name.clone(), addr.as_str()?.parse().ok()?)))
        .collect()
}

/// SIGTERM to every role (newest first), then SIGKILL to any still running.
async fn stop_all(running: &[Running]) {
    for child in running.iter().rev() {
        terminate(child.pid).await;
    }
}

async fn terminate(pid: u32) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let pid = Pid::from_raw(pid as i32);
    if kill(pid, Signal::SIGTERM).is_err() {
        return;
    }
    let deadline = tokio::time::Instant::now() + STOP_TIMEOUT;
    while tokio::time::Instant::now() < deadline {
        // Signal 0 probes whether the process still exists (a reaped child is gone).
        if kill(pid, None).is_err() {
            return;
        }
        // The `Child` belongs to the task that reports its exit, so there is
        // no handle here to wait on: probe the pid instead.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = kill(pid, Signal::SIGKILL);
}

fn describe(status: &std::io::Result<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(signal)) => {
                let name = nix::sys::signal::Signal::try_from(signal)
                    .map(|signal| signal.as_str().to_owned())
                    .unwrap_or_else(|_| "unknown".to_owned());
                format!("killed by signal {signal} ({name})")
            }
            (None, None) => "unknown exit".to_owned(),
        },
        Err(error) => format!("could not be waited for: {error}"),
    }
}

/// The generated development administrator.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct DevAdmin {
    username: String,
    password: String,
}

/// The banner's dev-admin lines. The first, for stdout (which a log
/// collector keeps, like every child's log line), names the user and the file
/// that holds the password, never the password. The second, the password
/// itself, only when `terminal` (stderr is a terminal, so a person reads it):
/// printed once, after the banner, and never through `tracing`.
fn dev_admin_lines(admin: &DevAdmin, record: &Path, terminal: bool) -> (String, Option<String>) {
    let banner = format!(
        "  Dev admin  {}   (password kept in {})",
        admin.username,
        record.display()
    );
    let password = terminal.then(|| {
        format!(
            "Dev admin password (shown on this terminal only): {}",
            admin.password
        )
    });
    (banner, password)
}

/// Reads `<state>/dev-admin.json`, generating it (mode 0600) on first start.
fn dev_admin(state_dir: &Path) -> anyhow::Result<DevAdmin> {
    let path = state_dir.join("dev-admin.json");
    if let Ok(text) = std::fs::read_to_string(&path) {
        return serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is not a dev admin record; delete it to regenerate",
                path.display()
            )
        });
    }
    let password: String = rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(24)
        .map(char::from)
        .collect();
    let admin = DevAdmin {
        username: "admin".into(),
        password,
    };
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(serde_json::to_string_pretty(&admin)?.as_bytes())?;
    Ok(admin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(layout: Layout, core_replicas: u8, workers: u8) -> Vec<(Role, u8)> {
        let copies = Copies {
            core_replicas,
            workers,
        };
        start_order(layout, copies)
            .into_iter()
            .map(|start| (start.role, start.copy))
            .collect()
    }

    #[test]
    fn one_data_worker_starts_first_and_leased_workers_after_studio_core() {
        use Role::{DataWorker, EdgeSandbox, McpGateway, StudioCore};
        // `sasha up` as it always was.
        assert_eq!(
            order(Layout::Single, 1, 1),
            [
                (DataWorker, 1),
                (StudioCore, 1),
                (McpGateway, 1),
                (EdgeSandbox, 1)
            ]
        );
        assert_eq!(
            order(Layout::Single, 2, 1),
            [
                (DataWorker, 1),
                (StudioCore, 1),
                (StudioCore, 2),
                (McpGateway, 1),
                (EdgeSandbox, 1)
            ]
        );
        // Workers renew their leases with studio-core; the gateway asks it
        // where each app is.
        assert_eq!(
            order(Layout::Leases, 2, 3),
            [
                (StudioCore, 1),
                (StudioCore, 2),
                (DataWorker, 1),
                (DataWorker, 2),
                (DataWorker, 3),
                (McpGateway, 1),
                (EdgeSandbox, 1)
            ]
        );
        let worker = Start {
            role: DataWorker,
            copy: 2,
        };
        assert_eq!(worker.worker_id(), "worker-2");
        assert_eq!(worker.label(Layout::Leases), "data-worker worker-2");
        assert_eq!(worker.label(Layout::Single), "data-worker");
    }

    #[test]
    fn readiness_lines_parse() {
        let listeners = parse_ready(
            r#"{"event":"ready","role":"studio-core","listeners":{"http":"127.0.0.1:4000","grpc":"127.0.0.1:4001"}}"#,
        )
        .unwrap();
        assert_eq!(listeners["grpc"], "127.0.0.1:4001".parse().unwrap());
        assert!(parse_ready("hello").is_none());
        assert!(parse_ready(r#"{"event":"other"}"#).is_none());
        assert!(parse_ready(r#"{"event":"ready","listeners":{"http":"nope"}}"#).is_none());
    }

    #[test]
    fn the_dev_admin_password_is_shown_only_on_a_terminal() {
        let admin = DevAdmin {
            username: "admin".into(),
            password: "Zq3hV9secretXy7Pw2LmN0aB".into(),
        };
        let record = Path::new("/state/dev-admin.json");
        // Piped to a collector: the banner names the user and the file only.
        let (banner, password) = dev_admin_lines(&admin, record, false);
        assert!(!banner.contains(&admin.password), "{banner}");
        assert!(banner.contains("admin") && banner.contains("/state/dev-admin.json"));
        assert_eq!(password, None);
        // On a terminal: the banner is the same, and one line holds the password.
        let (tty_banner, password) = dev_admin_lines(&admin, record, true);
        assert_eq!(tty_banner, banner);
        let password = password.expect("a terminal is shown the password");
        assert!(password.ends_with(&admin.password), "{password}");
    }

    #[test]
    fn dev_admin_is_generated_once() {
        let dir = tempfile::tempdir().unwrap();
        let first = dev_admin(dir.path()).unwrap();
        let second = dev_admin(dir.path()).unwrap();
        assert_eq!(first.password, second.password);
        assert_eq!(first.password.len(), 24);
    }
}
