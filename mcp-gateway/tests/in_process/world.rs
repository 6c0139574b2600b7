//! The world every in-process test of the gateway runs in: real studio-core
//! and data-worker, each served in this process over mutual TLS on a
//! loopback port (their own `run` functions, the development PKI), a
//! temporary state folder holding the `hello` and `expense-log` fixtures,
//! and the gateway's own HTTP service (`mcp_gateway::service`) driven with
//! `tower::ServiceExt::oneshot`, never over a socket.
//!
//! Time is injected: studio-core runs over the store this world opened with
//! a clock it moves ([`World::advance`]), so token and confirmation expiry
//! are tested without waiting.
//!
//! What it must never do: reach a role by anything but its public interface
//! (the gateway's HTTP service, the store a test shares with studio-core as
//! its operator would, and a data file read for what the audit ledger
//! says), or outlive its test (dropping it stops every role).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use http_body_util::BodyExt as _;
use sasha_service::identity::DevPki;
use serde_json::Value;
use studio_store::{Scope, Store, TokenKind, User, UserRole};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use crate::mcp::{Mcp, SESSIONLESS, STUDIO_ORIGIN};

pub const PASSWORD: &str = "correct horse battery";

/// The fixture packages every world installs.
const APPS: [&str; 2] = ["hello", "expense-log"];

/// studio-core, data-worker and the gateway serving the `hello` and
/// `expense-log` fixtures, with an admin and a staff user (who manage both,
/// granted on the apps' first discovery) and a member (who holds no grant).
pub struct World {
    pub dir: tempfile::TempDir,
    /// The core database as studio-core itself holds it.
    pub store: Store,
    /// studio-core's clock (unix seconds): the real time at the start,
    /// moved only by [`World::advance`].
    clock: Arc<AtomicI64>,
    pub admin: User,
    pub staff: User,
    pub member: User,
    /// The staff user's `chat:use apps:invoke` token.
    pub staff_token: String,
    gateway: mcp_gateway::Service,
    /// The gateway's configuration, for another gateway over the same roles
    /// ([`World::gateway_over`]).
    gateway_config: mcp_gateway::Config,
    /// Stops studio-core and data-worker when the world is dropped.
    stop: tokio_util::sync::DropGuard,
    /// studio-core's and data-worker's `run`.
    roles: Vec<tokio::task::JoinHandle<Result<(), sasha_service::process::RoleError>>>,
}

/// Serves data-worker and studio-core (over `store`) from the state folder
/// `dir`, each on its own loopback port with mutual TLS, and builds the
/// gateway's service in front of them.
async fn serve(
    dir: &Path,
    store: &Store,
) -> (
    mcp_gateway::Service,
    mcp_gateway::Config,
    CancellationToken,
    Vec<tokio::task::JoinHandle<Result<(), sasha_service::process::RoleError>>>,
) {
    let stop = CancellationToken::new();
    let data_listener = loopback().await;
    let data_url = format!("https://{}", data_listener.local_addr().unwrap());
    let data_config = data_worker::Config::from_env(&role_env(dir, &[])).unwrap();
    let data = tokio::spawn(data_worker::run(
        data_config,
        data_worker::Listeners {
            grpc: data_listener,
            health: None,
        },
        stop.clone(),
    ));
    let core_grpc = loopback().await;
    let core_url = format!("https://{}", core_grpc.local_addr().unwrap());
    let core_config =
        studio_core::Config::from_env(&role_env(dir, &[("SASHA_DATA_GRPC_URL", data_url.clone())]))
            .unwrap();
    let core = tokio::spawn(studio_core::run_with_store(
        core_config,
        studio_core::Listeners {
            http: loopback().await,
            grpc: core_grpc,
            health: None,
        },
        Some(store.clone()),
        stop.clone(),
    ));
    let gateway_config = mcp_gateway::Config::from_env(&role_env(
        dir,
        &[
            ("SASHA_CORE_GRPC_URL", core_url),
            ("SASHA_DATA_GRPC_URL", data_url),
        ],
    ))
    .unwrap();
    let gateway = mcp_gateway::service(&gateway_config, stop.clone()).unwrap();
    (gateway, gateway_config, stop, vec![data, core])
}

/// The environment a role reads, as the process harness gives it: the state
/// folder (with its development certificates under `certs/`), no seeding.
fn role_env(dir: &Path, extra: &[(&str, String)]) -> HashMap<String, String> {
    let mut env: HashMap<String, String> = [
        ("SASHA_STATE_DIR", dir.display().to_string()),
        ("SASHA_BUNDLED_APPS", "off".to_owned()),
        ("SASHA_CORE_HTTP_ADDR", "127.0.0.1:0".to_owned()),
        ("SASHA_CORE_GRPC_ADDR", "127.0.0.1:0".to_owned()),
        ("SASHA_DATA_GRPC_ADDR", "127.0.0.1:0".to_owned()),
        ("SASHA_GATEWAY_HTTP_ADDR", "127.0.0.1:0".to_owned()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect();
    for (name, value) in extra {
        env.insert((*name).to_owned(), value.clone());
    }
    env
}

async fn loopback() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.unwrap()
}

/// Copies the fixture package `id` (`tests/packages/valid/<id>`) to `to`.
pub fn copy_fixture(id: &str, to: &Path) {
    copy_dir(&fixtures().join(id), to);
}

/// The valid fixture packages.
pub fn fixtures() -> std::path::PathBuf {
    root().join("tests/packages/valid")
}

/// The repository root.
pub fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The example app that declares `chat: true` and `files: true`.
pub fn summariser() -> std::path::PathBuf {
    root().join("examples/document-summariser")
}

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

impl World {
    pub async fn start() -> World {
        World::with_packages(&[]).await
    }

    /// A world that also serves the packages in `extra` (each under its
    /// folder's name), installed before the first discovery.
    pub async fn with_packages(extra: &[&Path]) -> World {
        let dir = tempfile::tempdir().unwrap();
        for id in APPS {
            copy_fixture(id, &dir.path().join("docs/apps").join(id));
        }
        for package in extra {
            copy_dir(
                package,
                &dir.path()
                    .join("docs/apps")
                    .join(package.file_name().unwrap()),
            );
        }
        DevPki::ensure(&dir.path().join("certs")).unwrap();
        let clock = Arc::new(AtomicI64::new(studio_store::system_clock()));
        let reading = clock.clone();
        let store = Store::open_with_clock(
            &dir.path().join("core.sqlite"),
            Arc::new(move || reading.load(Ordering::SeqCst)),
        )
        .unwrap();
        // Before the first discovery, which grants admin and staff `manage`.
        let admin = store.create_user("ada", UserRole::Admin, PASSWORD).unwrap();
        let staff = store.create_user("sam", UserRole::Staff, PASSWORD).unwrap();
        let member = store
            .create_user("mia", UserRole::Member, PASSWORD)
            .unwrap();
        let (gateway, gateway_config, stop, roles) = serve(dir.path(), &store).await;
        let staff_token = token(&store, &staff, &[Scope::ChatUse, Scope::AppsInvoke]);
        let world = World {
            dir,
            store,
            clock,
            admin,
            staff,
            member,
            staff_token,
            gateway,
            gateway_config,
            stop: stop.drop_guard(),
            roles,
        };
        world.ready().await;
        world
    }

    /// Both roles answer (studio-core asks data-worker in turn) once they
    /// serve: a request before then waits in the listener's backlog.
    async fn ready(&self) {
        let (status, body) = self.get("/healthz").await;
        assert_eq!(status, 200, "{body}");
    }

    /// The same world after every role stopped and started again over the
    /// same folder, as after a restart: only what the files hold remains
    /// (studio-core opens the core database anew; its clock is this
    /// world's still).
    pub async fn restart(self) -> World {
        let World {
            dir,
            store,
            clock,
            admin,
            staff,
            member,
            staff_token,
            gateway,
            gateway_config: _,
            stop,
            roles,
        } = self;
        stop.disarm().cancel();
        drop(gateway);
        for role in roles {
            role.await.unwrap().unwrap();
        }
        drop(store);
        let reading = clock.clone();
        let store = Store::open_with_clock(
            &dir.path().join("core.sqlite"),
            Arc::new(move || reading.load(Ordering::SeqCst)),
        )
        .unwrap();
        let (gateway, gateway_config, stop, roles) = serve(dir.path(), &store).await;
        let world = World {
            dir,
            store,
            clock,
            admin,
            staff,
            member,
            staff_token,
            gateway,
            gateway_config,
            stop: stop.drop_guard(),
            roles,
        };
        world.ready().await;
        world
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// What the gateway's handlers share.
    pub fn gateway(&self) -> &mcp_gateway::Gateway {
        &self.gateway.gateway
    }

    /// The gateway's HTTP service, for one request.
    pub fn router(&self) -> axum::Router {
        self.gateway.router.clone()
    }

    /// Another gateway in front of this world's studio-core, whose data
    /// calls go through `data` (a data plane the test routes).
    pub fn gateway_over(&self, data: sasha_service::data_plane::DataPlane) -> mcp_gateway::Service {
        mcp_gateway::service_with_data_plane(&self.gateway_config, data, CancellationToken::new())
            .unwrap()
    }

    /// Another gateway over this world's roles, with
    /// `SASHA_GATEWAY_EARLY_READS=0`.
    pub fn gateway_without_early_reads(&self) -> mcp_gateway::Service {
        let config = mcp_gateway::Config {
            early_reads: false,
            ..self.gateway_config.clone()
        };
        mcp_gateway::service(&config, CancellationToken::new()).unwrap()
    }

    /// The one data-worker's URL (`https://127.0.0.1:<port>`).
    pub fn data_url(&self) -> &str {
        &self.gateway_config.data_url
    }

    /// `role`'s development identity, as the roles of this world load it.
    pub fn identity(&self, role: sasha_service::Role) -> sasha_service::identity::Identity {
        let (pki, _) = DevPki::ensure(&self.path().join("certs")).unwrap();
        sasha_service::identity::Identity::load(&pki.files(role)).unwrap()
    }

    /// Moves studio-core's clock `seconds` ahead.
    pub fn advance(&self, seconds: i64) {
        self.clock.fetch_add(seconds, Ordering::SeqCst);
    }

    /// An access token of `user` holding `scopes`.
    pub fn token(&self, user: &User, scopes: &[Scope]) -> String {
        token(&self.store, user, scopes)
    }

    /// A token of `kind` of `user` holding `scopes`.
    pub fn token_of(&self, user: &User, kind: TokenKind, scopes: &[Scope]) -> String {
        let scopes: BTreeSet<Scope> = scopes.iter().copied().collect();
        self.store
            .mint_token(&user.id, kind, &scopes, None)
            .unwrap()
    }

    /// A signed-in browser session of `user` (the cookie's secret).
    pub fn session(&self, user: &User) -> String {
        self.store.create_session(&user.id).unwrap()
    }

    /// A sessionless client presenting `token`.
    pub fn client(&self, token: &str) -> Mcp {
        Mcp::new(
            self.router(),
            vec![("authorization".into(), format!("Bearer {token}"))],
            SESSIONLESS,
        )
    }

    /// The Studio page with `app` open, signed in as `session`: its writes
    /// are the person's own (source `ui`, no confirmation).
    pub fn studio_page(&self, session: &str, app: &str) -> Mcp {
        Mcp::new(
            self.router(),
            vec![
                ("cookie".to_owned(), format!("sasha_session={session}")),
                ("origin".to_owned(), STUDIO_ORIGIN.to_owned()),
                ("sasha-app".to_owned(), app.to_owned()),
            ],
            SESSIONLESS,
        )
    }

    /// `GET path` through the gateway: the status and the JSON body.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let request = http::Request::get(path)
            .header("host", "127.0.0.1")
            .body(axum::body::Body::empty())
            .unwrap();
        let (status, _, body) = self.send(request).await;
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    /// One request through the gateway, answered byte for byte.
    pub async fn send(
        &self,
        request: http::Request<axum::body::Body>,
    ) -> (u16, http::HeaderMap, Vec<u8>) {
        let response = self.router().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, headers, body.to_vec())
    }

    /// `(operation, source)` of every audit row of `app`'s database, read
    /// from its file.
    pub fn audit_sources(&self, app: &str) -> Vec<(String, String)> {
        let path = self.path().join(format!("apps/{app}.sqlite"));
        let connection = rusqlite::Connection::open(path).unwrap();
        let mut statement = connection
            .prepare("SELECT operation, source FROM _sasha_audit ORDER BY rowid")
            .unwrap();
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}

pub fn token(store: &Store, user: &User, scopes: &[Scope]) -> String {
    let scopes: BTreeSet<Scope> = scopes.iter().copied().collect();
    store
        .mint_token(&user.id, TokenKind::Access, &scopes, None)
        .unwrap()
}
