//! The process-test harness: starts the real `sasha` binary's roles on free
//! loopback ports with a temporary state folder, and talks to them only through
//! their public interfaces.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sasha_service::Role;
use sasha_service::identity::{DevPki, TlsFiles};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

pub mod browser;
pub mod core;
pub mod core_database;
pub mod documents;
pub mod expense_file;
pub mod fake_llm;
pub mod lockdown;
pub mod mcp;
pub mod nginx;
pub mod replica;
pub mod stack;
pub mod tree_identity;
pub mod undo_scenario;

/// The binary under test.
pub fn sasha_bin() -> &'static str {
    env!("CARGO_BIN_EXE_sasha")
}

/// How long a role may take to print its readiness line.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A temporary state folder with a development PKI, from which roles are started.
pub struct Harness {
    pub dir: tempfile::TempDir,
    pub pki: DevPki,
    /// Extra environment given to every role (e.g. OTLP settings).
    pub env: HashMap<String, String>,
}

impl Harness {
    /// A fresh state folder; its roles use the core database
    /// [`core_database`] chooses for the run.
    pub fn new() -> Harness {
        let dir = tempfile::tempdir().expect("temp dir");
        let (pki, _) = DevPki::ensure(&dir.path().join("certs")).expect("dev pki");
        let env = core_database::core_env(dir.path())
            .into_iter()
            .map(|(key, value)| (key.to_owned(), value))
            .collect();
        Harness { dir, pki, env }
    }

    /// The core database of this state folder, opened beside its roles.
    pub fn store(&self) -> core_database::CoreStore {
        core_database::core_store(self.path())
    }

    /// A direct SQL connection to this state folder's core database.
    pub fn core_sql(&self) -> core_database::CoreSql {
        core_database::core_sql(self.path())
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The environment a role gets by default: the state folder, its TLS files,
    /// ephemeral ports, no seeding of the bundled apps.
    pub fn role_env(&self, role: Role) -> HashMap<String, String> {
        let files = self.pki.files(role);
        let mut env: HashMap<String, String> = [
            ("SASHA_STATE_DIR", self.path().display().to_string()),
            ("SASHA_TLS_CA", files.ca.display().to_string()),
            ("SASHA_TLS_CERT", files.cert.display().to_string()),
            ("SASHA_TLS_KEY", files.key.display().to_string()),
            ("SASHA_EDGE_ADDR", "127.0.0.1:0".into()),
            ("SASHA_CORE_HTTP_ADDR", "127.0.0.1:0".into()),
            ("SASHA_CORE_GRPC_ADDR", "127.0.0.1:0".into()),
            ("SASHA_DATA_GRPC_ADDR", "127.0.0.1:0".into()),
            ("SASHA_GATEWAY_HTTP_ADDR", "127.0.0.1:0".into()),
            ("SASHA_EXIT_ON_STDIN_EOF", "1".into()),
            ("RUST_LOG", "info".into()),
            // Tests start from an empty catalogue; tests/process/seed.rs turns seeding on.
            ("SASHA_BUNDLED_APPS", "off".into()),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect();
        env.extend(self.env.clone());
        env
    }

    /// Starts `role` with its default environment plus `extra`, and waits for
    /// its readiness line.
    pub async fn start(&self, role: Role, extra: &[(&str, String)]) -> RoleProcess {
        let mut env = self.role_env(role);
        for (key, value) in extra {
            env.insert((*key).to_owned(), value.clone());
        }
        RoleProcess::start(role, &env).await
    }

    /// Runs `role` expecting it to refuse to boot; returns its exit status and
    /// stderr.
    pub async fn boot_failure(&self, role: Role, extra: &[(&str, &str)]) -> (ExitStatus, String) {
        let mut env = self.role_env(role);
        env.remove("SASHA_EXIT_ON_STDIN_EOF");
        for (key, value) in extra {
            env.insert((*key).to_owned(), (*value).to_owned());
        }
        let output = tokio::time::timeout(
            Duration::from_secs(30),
            Command::new(sasha_bin())
                .args(["serve", role.as_str()])
                .env_clear()
                .envs(&env)
                .stdin(Stdio::null())
                .output(),
        )
        .await
        .expect("the role should refuse to boot quickly, not start serving")
        .expect("run sasha");
        (
            output.status,
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// Starts data-worker, studio-core and mcp-gateway wired to each other.
    pub async fn start_backends(&self) -> Backends {
        self.start_backends_with(&[]).await
    }

    /// [`Harness::start_backends`] with extra studio-core variables.
    pub async fn start_backends_with(&self, core_env: &[(&str, String)]) -> Backends {
        let data = self.start(Role::DataWorker, &[]).await;
        let data_url = format!("https://{}", data.listener("grpc"));
        let mut env = vec![("SASHA_DATA_GRPC_URL", data_url.clone())];
        env.extend(core_env.iter().cloned());
        let core = self.start(Role::StudioCore, &env).await;
        let core_url = format!("https://{}", core.listener("grpc"));
        let gateway = self
            .start(
                Role::McpGateway,
                &[
                    ("SASHA_DATA_GRPC_URL", data_url),
                    ("SASHA_CORE_GRPC_URL", core_url),
                ],
            )
            .await;
        Backends {
            data,
            core,
            gateway,
        }
    }

    /// Stops every role of `backends` (gateway, then core, then data-worker),
    /// then starts all three again on the same state: nothing of the old
    /// processes' memory is left.
    pub async fn restart_backends(&self, backends: Backends) -> Backends {
        for process in [backends.gateway, backends.core, backends.data] {
            process.stop().await;
        }
        self.start_backends().await
    }

    /// One more mcp-gateway replica, wired to `backends`' studio-core and
    /// data-worker.
    pub async fn start_gateway(&self, backends: &Backends) -> RoleProcess {
        self.start(
            Role::McpGateway,
            &[
                (
                    "SASHA_DATA_GRPC_URL",
                    format!("https://{}", backends.data.listener("grpc")),
                ),
                (
                    "SASHA_CORE_GRPC_URL",
                    format!("https://{}", backends.core.listener("grpc")),
                ),
            ],
        )
        .await
    }

    /// TLS files for a role.
    pub fn tls(&self, role: Role) -> TlsFiles {
        self.pki.files(role)
    }
}

/// The three gRPC-connected roles.
pub struct Backends {
    pub data: RoleProcess,
    pub core: RoleProcess,
    pub gateway: RoleProcess,
}

/// One running role. Killed when dropped.
pub struct RoleProcess {
    pub role: Role,
    pub child: Child,
    pub listeners: HashMap<String, SocketAddr>,
    pub stderr: Arc<Mutex<String>>,
}

impl RoleProcess {
    pub async fn start(role: Role, env: &HashMap<String, String>) -> RoleProcess {
        let mut child = Command::new(sasha_bin())
            .args(["serve", role.as_str()])
            .env_clear()
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn sasha serve");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut pipe = child.stderr.take().expect("stderr");
        tokio::spawn(async move {
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                buffer.extend_from_slice(&chunk[..n]);
                *sink.lock().unwrap() = String::from_utf8_lossy(&buffer).into_owned();
            }
        });
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(READY_TIMEOUT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(value) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                if value["event"] == "ready" {
                    return Some(value);
                }
            }
            None
        })
        .await;
        let value = match ready {
            Ok(Some(value)) => value,
            _ => panic!(
                "{role} did not become ready; stderr:\n{}",
                stderr.lock().unwrap()
            ),
        };
        assert_eq!(value["role"], role.as_str());
        let listeners = value["listeners"]
            .as_object()
            .expect("listeners")
            .iter()
            .map(|(name, addr)| (name.clone(), addr.as_str().unwrap().parse().unwrap()))
            .collect();
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        RoleProcess {
            role,
            child,
            listeners,
            stderr,
        }
    }

    /// Sends `signal` to the role (SIGSTOP and SIGCONT stall and resume it).
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = self.child.id().expect("running") as i32;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).expect("signal");
    }

    pub fn listener(&self, name: &str) -> SocketAddr {
        *self
            .listeners
            .get(name)
            .unwrap_or_else(|| panic!("{} has no {name} listener", self.role))
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// SIGSTOP, then waits until the kernel reports every thread stopped:
    /// `kill` returns before a thread running on another core has stopped,
    /// and a request sent in between could still be answered.
    pub async fn pause(&self) {
        self.signal(nix::sys::signal::Signal::SIGSTOP);
        let pid = self.child.id().expect("pid");
        let stopped = || {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .map(|tasks| {
                    tasks.flatten().all(|task| {
                        std::fs::read_to_string(task.path().join("stat"))
                            .ok()
                            .and_then(|stat| {
                                stat.rsplit_once(") ")
                                    .map(|(_, rest)| rest.starts_with('T'))
                            })
                            .unwrap_or(true)
                    })
                })
                .unwrap_or(true)
        };
        eventually(Duration::from_secs(1), "every thread stopping", || {
            let stopped = stopped();
            async move { stopped }
        })
        .await;
    }

    /// SIGTERM, then wait for a clean exit.
    pub async fn stop(mut self) -> ExitStatus {
        let pid = self.child.id().expect("pid") as i32;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("signal");
        tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("role stops after SIGTERM")
            .expect("wait")
    }
}

/// A free loopback port (bound and released; fine for tests on one machine).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A raw HTTP/1.1 exchange, so tests can send request lines and headers that a
/// client library would normalise (dot segments, absolute-form, duplicate Host).
pub async fn raw_http(addr: SocketAddr, request: &str) -> RawResponse {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut bytes = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes))
        .await
        .expect("response in time")
        .expect("read");
    RawResponse::parse(&String::from_utf8_lossy(&bytes))
}

/// A GET with `Connection: close`, the given Host and extra header lines.
pub async fn get(addr: SocketAddr, host: &str, path: &str, extra_headers: &str) -> RawResponse {
    raw_http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra_headers}Connection: close\r\n\r\n"),
    )
    .await
}

#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RawResponse {
    fn parse(text: &str) -> RawResponse {
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("no status in {text:?}"));
        let headers = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
            .collect();
        RawResponse {
            status,
            headers,
            body: dechunk(body),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {:?}", self.body))
    }
}

/// Undoes chunked transfer encoding when present (best effort for tests).
fn dechunk(body: &str) -> String {
    let mut rest = body;
    let mut out = String::new();
    loop {
        let Some((size, after)) = rest.split_once("\r\n") else {
            return body.to_owned();
        };
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_owned();
        };
        if size == 0 {
            return out;
        }
        if after.len() < size {
            return body.to_owned();
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
}

/// Whether a process with this pid still exists.
pub fn process_alive(pid: u32) -> bool {
    let path = PathBuf::from(format!("/proc/{pid}/stat"));
    match std::fs::read_to_string(path) {
        // A zombie (state Z) has exited and only waits to be reaped.
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Signs the dev admin of a `sasha up` state folder in through the API: its
/// credentials (`dev-admin.json`) and the session cookie (`name=value`).
pub async fn sign_in_dev_admin(state: &Path, studio: &str) -> (serde_json::Value, String) {
    let admin: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state.join("dev-admin.json")).unwrap())
            .unwrap();
    let login = http_client()
        .post(format!("{studio}/api/auth/login"))
        .json(&serde_json::json!({"username": admin["username"], "password": admin["password"]}))
        .send()
        .await
        .unwrap();
    assert!(login.status().is_success(), "{}", login.status());
    let cookie = login
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok()?.split(';').next().map(str::to_owned))
        .find(|pair| pair.starts_with("sasha_session"))
        .expect("the sign-in sets the session cookie");
    (admin, cookie)
}

/// A running `sasha up`, with its output collected.
pub struct UpProcess {
    pub child: Child,
    pub port: u16,
    pub stdout: Arc<Mutex<Vec<String>>>,
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl UpProcess {
    /// Starts `sasha up` on `port` with `state_dir`, and waits for its banner.
    /// The bundled apps are not seeded, so the apps folder holds exactly what
    /// the test put there.
    pub async fn start(state_dir: &Path, port: u16) -> UpProcess {
        UpProcess::start_with(state_dir, port, &[("SASHA_BUNDLED_APPS", "off")]).await
    }

    /// [`UpProcess::start`] with `env` (which its children inherit) instead
    /// of turning seeding off.
    pub async fn start_with(state_dir: &Path, port: u16, env: &[(&str, &str)]) -> UpProcess {
        UpProcess::start_with_args(state_dir, port, &[], env).await
    }

    /// [`UpProcess::start_with`] with more command-line arguments.
    pub async fn start_with_args(
        state_dir: &Path,
        port: u16,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> UpProcess {
        let mut child = Command::new(sasha_bin())
            .args(["up", "--state-dir"])
            .arg(state_dir)
            .args(["--port", &port.to_string()])
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "info")
            .envs(core_database::core_env(state_dir))
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn sasha up");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let out_pipe = child.stdout.take().unwrap();
        let err_pipe = child.stderr.take().unwrap();
        let (out_sink, err_sink) = (stdout.clone(), stderr.clone());
        tokio::spawn(async move {
            let mut lines = BufReader::new(out_pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                out_sink.lock().unwrap().push(line);
            }
        });
        tokio::spawn(async move {
            let mut lines = BufReader::new(err_pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                err_sink.lock().unwrap().push(line);
            }
        });
        let up = UpProcess {
            child,
            port,
            stdout,
            stderr,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !up.stdout_text().contains("Press Ctrl-C to stop.") {
            assert!(
                tokio::time::Instant::now() < deadline,
                "sasha up did not start; stdout:\n{}\nstderr:\n{}",
                up.stdout_text(),
                up.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        up
    }

    pub fn stdout_text(&self) -> String {
        self.stdout.lock().unwrap().join("\n")
    }

    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// The pid `sasha up` reported for `role` ("Started <role> (pid N)").
    pub fn child_pid(&self, role: Role) -> u32 {
        let prefix = format!("Started {role} (pid ");
        self.stdout
            .lock()
            .unwrap()
            .iter()
            .find_map(|line| line.strip_prefix(&prefix)?.strip_suffix(')')?.parse().ok())
            .unwrap_or_else(|| panic!("no pid reported for {role}"))
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Waits for `sasha up` to exit on its own.
    pub async fn wait(&mut self, limit: Duration) -> ExitStatus {
        tokio::time::timeout(limit, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("sasha up did not exit; stderr:\n{}", self.stderr_text()))
            .expect("wait")
    }

    /// Sends a signal to `sasha up` itself.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = self.child.id().expect("running") as i32;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).expect("signal");
    }
}

/// Waits until none of `pids` is running any more.
pub async fn wait_gone(pids: &[u32], limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while pids.iter().any(|pid| process_alive(*pid)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "processes still running: {:?}",
            pids.iter()
                .filter(|pid| process_alive(**pid))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Copies a folder tree (fixtures into temporary folders).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// An HTTP client for tests. studio-core's chat client builds reqwest's
/// rustls backend without a default crypto provider (the workspace uses ring
/// everywhere), so the process-wide default is installed here first.
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// The Node.js binary (`SASHA_NODE`, else `node`) for a test that needs it, and
/// when `npm_package` is given (e.g. `tests/browser/node_modules/playwright-core`)
/// that the test command installed it. A missing prerequisite fails the test
/// with what to run; it never skips.
pub fn node_program(purpose: &str, npm_package: Option<&str>) -> String {
    let node = std::env::var("SASHA_NODE").unwrap_or_else(|_| "node".to_owned());
    let runs = std::process::Command::new(&node)
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    assert!(
        runs,
        "`{node} --version` failed: {purpose} needs Node.js 20 or newer; run scripts/test.sh, \
         which installs it on a fresh machine (or point SASHA_NODE at it)"
    );
    if let Some(package) = npm_package {
        let manifest = root().join(package).join("package.json");
        assert!(
            manifest.is_file(),
            "{purpose} needs {package}, which is not installed; run scripts/test.sh, which runs \
             `npm ci` for it"
        );
    }
    node
}

/// Runs a node command to success and returns its standard output; a failure
/// shows both streams.
pub fn run_node(mut command: std::process::Command) -> String {
    let output = command.output().expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "node failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Debian's Chromium (`$CHROMIUM`, else `chromium` on PATH), or a failure
/// saying how to install it.
pub fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "$CHROMIUM names {}, which is not a file",
            path.display()
        );
        return path;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "Chromium is needed for the browser tests and was not found on PATH (or in $CHROMIUM); \
         run scripts/test.sh, which installs it with `apt-get install -y chromium`"
    )
}

/// Where browser screenshots go: `$CARGO_TARGET_DIR/browser-artifacts/`, never
/// the repository.
pub fn browser_artifacts() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).join("browser-artifacts")
}

/// Compares `actual` with the golden file at `path` byte for byte, through
/// `expect-test`: `UPDATE_EXPECT=1` rewrites every golden file a run reaches
/// from the current output instead.
pub fn golden(path: &Path, actual: &str) {
    expect_test::expect_file![path].assert_eq(actual);
}

/// The next JSON event of a server-sent event stream: complete frames are
/// taken from `buffer`, more is read from `response` while none is there (an
/// event within 30 s, or the test fails); `None` when the stream ended.
pub async fn next_sse_event(
    response: &mut reqwest::Response,
    buffer: &mut String,
) -> Option<serde_json::Value> {
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            let data: String = frame
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            if !data.is_empty() {
                return Some(serde_json::from_str(&data).unwrap());
            }
        }
        let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk())
            .await
            .expect("an event within 30 s")
            .unwrap()?;
        buffer.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// Polls until `check` holds, failing after `limit` with `what`: a process
/// test waits for a condition, never for a fixed time.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen in time"
        );
        // What is awaited happens in another process, whose clock a test
        // cannot pause: look again shortly.
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A consistent copy of the SQLite database `file` at `backup` (`VACUUM
/// INTO`, one committed state), taken while its processes run.
pub fn back_up_sqlite_file(file: &Path, backup: &Path) {
    let conn = rusqlite::Connection::open(file).unwrap();
    conn.execute("VACUUM INTO ?1", [backup.display().to_string()])
        .unwrap();
}

/// Damages the SQLite database `file` under the processes that hold it open,
/// as a bad disk or a stray write would: everything is checkpointed into the
/// main file, every page after the first is overwritten on disk, and then
/// one header change is committed beside it, so the holders see the file
/// has changed and read its pages again instead of trusting their caches.
pub fn damage_sqlite_file(file: &Path) {
    use std::io::{Seek as _, SeekFrom, Write as _};
    let beside = rusqlite::Connection::open(file).unwrap();
    beside
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let page_size: i64 = beside
        .query_row("PRAGMA page_size", [], |row| row.get(0))
        .unwrap();
    let page_size = page_size as u64;
    let length = std::fs::metadata(file).unwrap().len();
    let mut raw = std::fs::OpenOptions::new().write(true).open(file).unwrap();
    raw.seek(SeekFrom::Start(page_size)).unwrap();
    raw.write_all(&vec![0xA5; (length - page_size) as usize])
        .unwrap();
    raw.sync_all().unwrap();
    drop(raw);
    let version: i64 = beside
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    beside
        .pragma_update(None, "user_version", version + 1)
        .unwrap();
    beside.close().unwrap();
}

/// Puts `backup` in `file`'s place as an administrator restoring it would:
/// the old file's `-wal` and `-shm` removed, the backup renamed over it (a
/// new inode).
pub fn restore_sqlite_file(backup: &Path, file: &Path) {
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
    std::fs::rename(backup, file).unwrap();
}

/// Here, not in `fake_llm.rs`: studio-core's own tests include that file,
/// and they have no `sasha up`.
impl fake_llm::FakeLlm {
    /// `sasha up` on `state` and `port` without the bundled apps, its
    /// assistant's model this scripted one, with `extra` variables.
    pub async fn up(&self, state: &Path, port: u16, extra: &[(&str, &str)]) -> UpProcess {
        let mut env = vec![
            ("SASHA_BUNDLED_APPS", "off"),
            ("SASHA_CHAT_BASE_URL", self.base_url.as_str()),
            ("SASHA_CHAT_MODEL", "fake"),
        ];
        env.extend_from_slice(extra);
        UpProcess::start_with(state, port, &env).await
    }
}
