//! What the benchmarks set up the same way: seeded dates and a deterministic
//! generator, package trees copied into a docs root, the staff user and its
//! credentials, the roles on loopback ([`start_worker`], [`start_core`],
//! [`start_gateway`]) and the whole MCP stack ([`Stack`]).

use std::path::{Path, PathBuf};
use std::process::Child;

use sasha_service::Role;
use sasha_service::identity::DevPki;
use studio_store::{Scope, Store, TokenKind, UserRole};

use super::mcp::Mcp;
use super::start_role;

/// The date `year`-`month`-`day`, for constants; panics if there is none.
pub(crate) const fn date(year: i32, month: time::Month, day: u8) -> time::Date {
    match time::Date::from_calendar_date(year, month, day) {
        Ok(date) => date,
        Err(_) => panic!("not a date"),
    }
}

/// Day `n` counted from `start` as `YYYY-MM-DD`.
pub(crate) fn day(start: time::Date, n: i64) -> String {
    let date = start + time::Duration::days(n);
    format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

/// A small deterministic generator, so runs are comparable.
pub(crate) fn mix(seed: u64) -> u64 {
    let mut x = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Every file below `dir`.
pub(crate) fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Copies every file below `from` to the same place below `to`, unchanged.
pub(crate) fn copy_tree(from: &Path, to: &Path) {
    for entry in walk(from) {
        let target = to.join(entry.strip_prefix(from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&entry, target).unwrap();
    }
}

/// The staff user `bench` in studio-core's store of a state folder. Created
/// before studio-core's first discovery, it holds `manage` on every app found.
pub(crate) struct Staff {
    pub(crate) store: Store,
    pub(crate) id: String,
}

impl Staff {
    pub(crate) fn create(state: &Path) -> Staff {
        Staff::named(state, "bench")
    }

    /// The staff user `name`, created the same way.
    pub(crate) fn named(state: &Path, name: &str) -> Staff {
        Staff::with_role(state, name, UserRole::Staff)
    }

    /// The user `name` with `role` (a member holds no grant until given one).
    pub(crate) fn with_role(state: &Path, name: &str, role: UserRole) -> Staff {
        let store = Store::open(&state.join("core.sqlite")).unwrap();
        let user = store
            .create_user(name, role, "correct horse battery")
            .unwrap();
        Staff { store, id: user.id }
    }

    /// A Studio session (the `sasha_session` cookie).
    pub(crate) fn session(&self) -> String {
        self.store.create_session(&self.id).unwrap()
    }

    /// A bearer access token with `chat.use` and `apps.invoke`.
    pub(crate) fn token(&self) -> String {
        let scopes = [Scope::ChatUse, Scope::AppsInvoke].into_iter().collect();
        self.store
            .mint_token(&self.id, TokenKind::Access, &scopes, None)
            .unwrap()
    }
}

/// data-worker; returns it with its gRPC URL.
pub(crate) fn start_worker(state: &Path, pki: &DevPki) -> (Child, String) {
    let (child, listeners) = start_role(Role::DataWorker, state, pki, &[]);
    let url = format!("https://{}", listeners["grpc"].as_str().unwrap());
    (child, url)
}

/// studio-core against the data-worker at `data_url`, with `extra`
/// environment; returns it with its gRPC URL once it is ready.
pub(crate) fn start_core(
    state: &Path,
    pki: &DevPki,
    data_url: &str,
    extra: &[(&str, String)],
) -> (Child, String) {
    let mut environment = vec![("SASHA_DATA_GRPC_URL", data_url.to_owned())];
    environment.extend_from_slice(extra);
    let (child, listeners) = start_role(Role::StudioCore, state, pki, &environment);
    let url = format!("https://{}", listeners["grpc"].as_str().unwrap());
    (child, url)
}

/// mcp-gateway against data-worker and studio-core; returns it with its MCP
/// endpoint (`http://…/mcp`).
pub(crate) fn start_gateway(
    state: &Path,
    pki: &DevPki,
    data_url: &str,
    core_url: String,
) -> (Child, String) {
    let (child, listeners) = start_role(
        Role::McpGateway,
        state,
        pki,
        &[
            ("SASHA_DATA_GRPC_URL", data_url.to_owned()),
            ("SASHA_CORE_GRPC_URL", core_url),
        ],
    );
    let url = format!("http://{}/mcp", listeners["http"].as_str().unwrap());
    (child, url)
}

/// Stops a started role and waits for it.
pub(crate) fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Installs ring as rustls' process-wide provider (studio-core builds
/// reqwest's rustls backend without a default one; every process of the
/// workspace uses ring) and returns a fresh HTTP client.
pub(crate) fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// data-worker, studio-core and mcp-gateway (and, when asked, edge-sandbox)
/// on loopback with a fresh state folder, the packages `install` lays in its
/// docs root (`docs/apps`), and a staff user who exists before the first
/// discovery, with a Studio session and a bearer token. Dropping it stops the
/// roles.
pub(crate) struct Stack {
    pub(crate) state: tempfile::TempDir,
    pub(crate) roles: Vec<(&'static str, Child)>,
    pub(crate) url: String,
    pub(crate) session: String,
    pub(crate) token: String,
    pub(crate) http: reqwest::Client,
    /// Litestream sidecars of replicating roles, stopped after them.
    pub(crate) sidecars: Vec<super::replica::Sidecar>,
}

impl Stack {
    pub(crate) fn start(edge: bool, install: impl FnOnce(&Path)) -> Stack {
        Stack::start_with(edge, install, |_, _| Vec::new())
    }

    /// [`Stack::start`] with `role_env(role, state folder)` added to
    /// data-worker's and studio-core's environment (replication settings).
    pub(crate) fn start_with(
        edge: bool,
        install: impl FnOnce(&Path),
        mut role_env: impl FnMut(Role, &Path) -> Vec<(&'static str, String)>,
    ) -> Stack {
        let state = tempfile::tempdir().unwrap();
        let (pki, _) = DevPki::ensure(&state.path().join("certs")).unwrap();
        install(&state.path().join("docs/apps"));
        let staff = Staff::create(state.path());
        let data_env = role_env(Role::DataWorker, state.path());
        let (worker, listeners) = start_role(Role::DataWorker, state.path(), &pki, &data_env);
        let data_url = format!("https://{}", listeners["grpc"].as_str().unwrap());
        let core_env = role_env(Role::StudioCore, state.path());
        let (core, core_url) = start_core(state.path(), &pki, &data_url, &core_env);
        let (gateway, url) = start_gateway(state.path(), &pki, &data_url, core_url);
        let mut roles = vec![
            ("data-worker", worker),
            ("studio-core", core),
            ("mcp-gateway", gateway),
        ];
        if edge {
            let (sandbox, _) = start_role(
                Role::EdgeSandbox,
                state.path(),
                &pki,
                &[("SASHA_EDGE_ADDR", "127.0.0.1:0".to_owned())],
            );
            roles.push(("edge-sandbox", sandbox));
        }
        let session = staff.session();
        let token = staff.token();
        Stack {
            state,
            roles,
            url,
            session,
            token,
            http: http_client(),
            sidecars: Vec::new(),
        }
    }

    /// The MCP client, for `app` when it writes from the Studio page.
    pub(crate) fn mcp(&self, app: &str) -> Mcp {
        Mcp {
            http: self.http.clone(),
            url: self.url.clone(),
            session: self.session.clone(),
            token: self.token.clone(),
            app: app.to_owned(),
            origin: super::mcp::DEFAULT_ORIGIN.to_owned(),
            client: "bench-load",
        }
    }

    /// data-worker's SQLite file of `app` (`APP_DATA_ROOT/<appId>.sqlite`; the
    /// default `APP_DATA_ROOT` is `apps` beside the core database).
    pub(crate) fn app_database(&self, app: &str) -> PathBuf {
        self.state.path().join("apps").join(format!("{app}.sqlite"))
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        for (_, child) in &mut self.roles {
            stop(child);
        }
    }
}
