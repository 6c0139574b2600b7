//! The studio-core every in-process test of the app lifecycle builds: a
//! docs tree, a core database with an admin, a staff user and a member, and
//! a data-worker client that reaches nothing (its port is closed) or the
//! stand-in of `crate::test_data_worker`, or data-workers leasing from
//! it ([`World::with_leases`]), all in a temporary folder; its gRPC
//! listener can be served ([`World::serve_grpc`]). The
//! core database is `core.sqlite` in that folder, or, for a world built
//! [`World::on`] [`Database::Postgres`], a fresh database on the shared test
//! PostgreSQL (`sasha_testkit`); [`on_both_databases!`] runs one test on
//! each. Test modules add the helpers they need in their own `impl World`
//! blocks.

use std::sync::Arc;

use sasha_proto::convert::ToWire;
use sasha_proto::pb;
use sasha_service::Role;
use sasha_service::config::{Origin, Origins};
use sasha_service::identity::{DevPki, Identity};

use crate::catalogue::Catalogue;
use crate::state::Core;
use studio_store::{PrincipalKind, Scope, Store, User, UserRole};

pub(crate) const PASSWORD: &str = "correct horse battery";
pub(crate) const STUDIO: &str = "http://localhost:3007";
/// The organisation's groups a world maps to admin, staff and member
/// (`SASHA_SSO_*_GROUPS`).
pub(crate) const GROUP_ADMINS: &str = "Sasha Admins";
pub(crate) const GROUP_STAFF: &str = "Sasha Staff";
pub(crate) const GROUP_MEMBERS: &str = "Sasha Users";
/// The scopes of a connection that may change apps.
pub(crate) const WRITER: [&str; 3] = ["chat:use", "apps:invoke", "apps:write"];

/// Which core database a [`World`]'s studio-core opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Database {
    /// `core.sqlite` in the world's folder.
    Sqlite,
    /// A fresh database on the shared test PostgreSQL, every replica of the
    /// world connected to it as studio-core replicas are (`DATABASE_URL`).
    Postgres,
}

/// A router-tier test run on each core database: `name::sqlite` and
/// `name::postgres`, the same body with `$database` naming its [`Database`]
/// (build worlds with [`World::on`]). The attributes, `#[tokio::test]` with
/// its runtime among them, go on both.
macro_rules! on_both_databases {
    ($(#[$attribute:meta])* async fn $name:ident($database:ident) $body:block) => {
        mod $name {
            #[allow(unused_imports, reason = "each body uses its own part of the parent's names")]
            use super::*;

            async fn body($database: $crate::test_world::Database) $body

            $(#[$attribute])*
            async fn sqlite() {
                body($crate::test_world::Database::Sqlite).await;
            }

            $(#[$attribute])*
            async fn postgres() {
                body($crate::test_world::Database::Postgres).await;
            }
        }
    };
}
pub(crate) use on_both_databases;

/// The folders of one studio-core of a world: its state (`pki`, `uploads`
/// and, on SQLite, `core.sqlite`) and its `DOCS_ROOT`.
struct Folders<'a> {
    state: &'a std::path::Path,
    docs: &'a std::path::Path,
}

/// Where a world's core database is: the SQLite file's folder is the
/// world's own; a PostgreSQL database is named by its URL.
#[derive(Debug, Clone)]
enum CoreDatabase {
    Sqlite,
    Postgres(String),
}

pub(crate) struct World {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) core: Arc<Core>,
    /// The store's clock (unix seconds): it starts at the real time and moves
    /// only by [`World::advance`], so expiry is tested without waiting.
    pub(crate) clock: Arc<std::sync::atomic::AtomicI64>,
    pub(crate) admin: User,
    pub(crate) staff: User,
    pub(crate) member: User,
    /// This world's data plane (a replica uses it too).
    data: WorldData,
    /// The core database every replica of this world opens.
    database: CoreDatabase,
    /// Last, so dropped after the world's cores: every store it opened.
    stores: Stores,
}

/// A world's data plane: one data-worker at a URL (its port closed, or the
/// stand-in of `crate::test_data_worker`), or data-workers leasing from
/// studio-core, each lease lasting `lease`.
#[derive(Debug, Clone)]
pub(crate) enum WorldData {
    Single(String),
    Leases(std::time::Duration),
}

/// The stores a [`World`] opened, dropped after the rest of it and off the
/// runtime: the last handle on a PostgreSQL store closes its connections by
/// blocking on the client's own runtime, which tokio refuses inside another
/// (a test's body runs inside one).
#[derive(Default)]
struct Stores(std::sync::Mutex<Vec<Store>>);

impl Stores {
    fn keep(&self, store: &Store) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(store.clone());
    }
}

impl Drop for Stores {
    fn drop(&mut self) {
        let stores = std::mem::take(
            self.0
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        off_runtime(move || drop(stores));
    }
}

/// Runs `work`, which calls the store itself, on a thread of its own,
/// outside the test's runtime: the PostgreSQL client blocks on a runtime of
/// its own, which tokio refuses inside another (studio-core calls the store
/// through `studio_store::blocking`). A panic in `work` is the caller's.
pub(crate) fn off_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(work)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// The actor a `CoreService` request with `principal` acts for, as the
/// gRPC layer converts it.
pub(crate) fn actor_of(principal: &pb::Principal) -> studio_identity::actor::Actor {
    crate::grpc::convert::actor(Some(principal)).expect("a principal with a user")
}

impl World {
    pub(crate) fn new() -> World {
        World::on(Database::Sqlite)
    }

    /// A world whose core database is `database`.
    pub(crate) fn on(database: Database) -> World {
        World::build(
            studio_assistant::provider::ChatService::new(None),
            crate::member_apps::MEMBER_CAPS,
            &WorldData::Single("https://127.0.0.1:9".to_owned()),
            database,
        )
    }

    /// A world whose chat (and assistant) provider is `chat`.
    pub(crate) fn with_chat(chat: studio_assistant::provider::ChatService) -> World {
        World::with_chat_on(Database::Sqlite, chat)
    }

    /// [`World::with_chat`] on the core database `database`.
    pub(crate) fn with_chat_on(
        database: Database,
        chat: studio_assistant::provider::ChatService,
    ) -> World {
        World::build(
            chat,
            crate::member_apps::MEMBER_CAPS,
            &WorldData::Single("https://127.0.0.1:9".to_owned()),
            database,
        )
    }

    /// A world whose member tier has the caps `caps` (a test of a bound too
    /// large to reach in process).
    pub(crate) fn with_member_caps(caps: studio_store::MemberCaps) -> World {
        World::build(
            studio_assistant::provider::ChatService::new(None),
            caps,
            &WorldData::Single("https://127.0.0.1:9".to_owned()),
            Database::Sqlite,
        )
    }

    /// A world whose data-worker is the stand-in `fake`
    /// ([`crate::test_data_worker`]), served over mTLS on a port of its own.
    pub(crate) async fn with_data(fake: Arc<crate::test_data_worker::FakeData>) -> World {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let world = World::build(
            studio_assistant::provider::ChatService::new(None),
            crate::member_apps::MEMBER_CAPS,
            &WorldData::Single(url),
            Database::Sqlite,
        );
        crate::test_data_worker::serve(fake, listener, &world.dir.path().join("pki"));
        world
    }

    /// A world on `database` whose data-workers lease from studio-core,
    /// each lease lasting `lease` (`SASHA_DATA_PLACEMENT=leases`).
    pub(crate) fn with_leases(database: Database, lease: std::time::Duration) -> World {
        World::build(
            studio_assistant::provider::ChatService::new(None),
            crate::member_apps::MEMBER_CAPS,
            &WorldData::Leases(lease),
            database,
        )
    }

    fn build(
        chat: studio_assistant::provider::ChatService,
        member_caps: studio_store::MemberCaps,
        data: &WorldData,
        database: Database,
    ) -> World {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("docs/apps")).unwrap();
        DevPki::ensure(&dir.path().join("pki")).unwrap();
        let clock = Arc::new(std::sync::atomic::AtomicI64::new(
            studio_store::system_clock(),
        ));
        let database = match database {
            Database::Sqlite => CoreDatabase::Sqlite,
            Database::Postgres => {
                CoreDatabase::Postgres(off_runtime(sasha_testkit::postgres_database))
            }
        };
        let stores = Stores::default();
        let core = World::core_over(
            Folders {
                state: dir.path(),
                docs: &dir.path().join("docs"),
            },
            &database,
            &stores,
            &clock,
            chat,
            member_caps,
            data,
        );
        let store = &core.store;
        let (admin, staff, member) = off_runtime(|| {
            (
                store.create_user("ada", UserRole::Admin, PASSWORD).unwrap(),
                store.create_user("sam", UserRole::Staff, PASSWORD).unwrap(),
                store
                    .create_user("mia", UserRole::Member, PASSWORD)
                    .unwrap(),
            )
        });
        World {
            dir,
            core,
            clock,
            admin,
            staff,
            member,
            data: data.clone(),
            database,
            stores,
        }
    }

    /// Another studio-core over this world's folder and core database, as a
    /// second replica behind the proxy would be (no chat provider).
    pub(crate) fn replica(&self) -> Arc<Core> {
        self.replica_with_chat(studio_assistant::provider::ChatService::new(None))
    }

    /// [`World::replica`] whose chat (and assistant) provider is `chat`.
    pub(crate) fn replica_with_chat(
        &self,
        chat: studio_assistant::provider::ChatService,
    ) -> Arc<Core> {
        World::core_over(
            Folders {
                state: self.dir.path(),
                docs: &self.dir.path().join("docs"),
            },
            &self.database,
            &self.stores,
            &self.clock,
            chat,
            self.core.member_caps,
            &self.data,
        )
    }

    /// Another studio-core on this world's core database with a `DOCS_ROOT`
    /// of its own (`docs`, kept by the caller), as a replica on another node
    /// would be.
    pub(crate) fn replica_with_docs(&self, docs: &std::path::Path) -> Arc<Core> {
        World::core_over(
            Folders {
                state: self.dir.path(),
                docs,
            },
            &self.database,
            &self.stores,
            &self.clock,
            studio_assistant::provider::ChatService::new(None),
            self.core.member_caps,
            &self.data,
        )
    }

    /// A studio-core over `dir` (its `pki`, `uploads` and, on
    /// SQLite, `core.sqlite`) and `database`, its store reading `clock` and
    /// kept in `stores`.
    fn core_over(
        folders: Folders<'_>,
        database: &CoreDatabase,
        stores: &Stores,
        clock: &Arc<std::sync::atomic::AtomicI64>,
        chat: studio_assistant::provider::ChatService,
        member_caps: studio_store::MemberCaps,
        data: &WorldData,
    ) -> Arc<Core> {
        let (dir, docs) = (folders.state, folders.docs.to_owned());
        let (pki, _) = DevPki::ensure(&dir.join("pki")).unwrap();
        let identity = Identity::load(&pki.files(Role::StudioCore)).unwrap();
        let reading = clock.clone();
        let clock: studio_store::Clock =
            Arc::new(move || reading.load(std::sync::atomic::Ordering::SeqCst));
        let store = off_runtime(|| match database {
            CoreDatabase::Sqlite => Store::open_with_clock(&dir.join("core.sqlite"), clock),
            CoreDatabase::Postgres(url) => Store::connect(
                url,
                sasha_service::core_database::DEFAULT_POOL_SIZE,
                None,
                clock,
            ),
        })
        .unwrap();
        stores.keep(&store);
        let (data, data_layout) = match data {
            WorldData::Single(url) => {
                let client = sasha_service::grpc::data_client(url, &identity).unwrap();
                (
                    sasha_service::data_plane::DataPlane::single(client.clone()),
                    crate::state::DataLayout::Single(client),
                )
            }
            WorldData::Leases(lease) => (
                crate::placement::leased_data_plane(&store, identity),
                crate::state::DataLayout::Leases { lease: *lease },
            ),
        };
        let catalogue = Arc::new(Catalogue::new(&docs, 8));
        catalogue.refresh();
        let member_deploys = crate::state::deploy_throttle::DeployThrottle::new(&store);
        let accounts = Arc::new(
            studio_identity::Accounts::new(store.clone(), Origin::parse(STUDIO).unwrap(), STUDIO)
                .with_group_roles(studio_identity::group_roles::GroupRoles::new(
                    &[GROUP_ADMINS],
                    &[GROUP_STAFF],
                    &[GROUP_MEMBERS],
                )),
        );
        // Router tests upload nothing: conversions are process tests
        // (`tests/process/assist.rs`), whose child is the real binary.
        let uploads = studio_uploads::UploadArea::new(
            store.clone(),
            studio_uploads::isolate::Converter::command(
                "/bin/false",
                std::iter::empty::<&str>(),
                studio_uploads::isolate::WALL_LIMIT,
            ),
        );
        let assistance = Arc::new(studio_assistant::Assistance::new(
            accounts.clone(),
            store.clone(),
            chat,
            Arc::new(uploads),
            catalogue.clone(),
            "http://127.0.0.1:9/mcp".to_owned(),
        ));
        Arc::new(Core {
            origins: Origins {
                studio: Origin::parse(STUDIO).unwrap(),
                sandbox: Origin::parse("http://127.0.0.1:3007").unwrap(),
            },
            data,
            data_layout,
            accounts,
            assistance,
            store,
            member_caps,
            member_deploys,
            source: Arc::new(crate::source::SourceTree::new(catalogue.apps_dir())),
            packages: Arc::new(crate::package_sync::PackageSync::open(&docs)),
            catalogue,
            revision_retention: 64,
            drafts: crate::state::draft_cache::DraftCache::default(),
            // Replication is process-tested (`tests/process/replication.rs`).
            replication: None,
        })
    }

    /// Copies the valid fixture packages `ids` (`tests/packages/valid`) into
    /// `DOCS_ROOT/apps` and registers them, as the file watcher would: their
    /// first discovery grants `manage` to the admin and staff users.
    pub(crate) async fn install(&self, ids: &[&str]) {
        for id in ids {
            copy_fixture(id, &self.apps().join(id));
        }
        crate::registry::refresh_catalogue(&self.core).await;
    }

    /// `DOCS_ROOT/apps`.
    pub(crate) fn apps(&self) -> std::path::PathBuf {
        self.dir.path().join("docs/apps")
    }

    pub(crate) fn store(&self) -> &Store {
        &self.core.store
    }

    /// A principal of `user` holding `scopes` through an access token, as
    /// the gateway passes it.
    pub(crate) fn principal(user: &User, scopes: &[&str]) -> pb::Principal {
        pb::Principal {
            member_apps_off: false,
            user_id: user.id.clone(),
            role: user.role.to_wire(),
            scopes: scopes
                .iter()
                .map(|scope| Scope::parse(scope).unwrap().to_wire())
                .collect(),
            kind: PrincipalKind::Access.to_wire(),
            username: user.username.clone(),
            origin: None,
        }
    }

    /// `principal` as if it had authenticated as `kind`.
    pub(crate) fn as_kind(principal: pb::Principal, kind: PrincipalKind) -> pb::Principal {
        pb::Principal {
            kind: kind.to_wire(),
            ..principal
        }
    }

    /// `principal` claiming `role`, whatever its user's is.
    pub(crate) fn claiming(principal: pb::Principal, role: UserRole) -> pb::Principal {
        pb::Principal {
            role: role.to_wire(),
            ..principal
        }
    }

    /// The staff user through a connection that may change apps.
    pub(crate) fn writer(&self) -> pb::Principal {
        World::principal(&self.staff, &WRITER)
    }

    /// Creates `id` as the admin through the RPC; its first revision.
    pub(crate) async fn create_as_admin(&self, id: &str, with_table: bool) -> String {
        let reply = crate::grpc::calls::create(
            &self.core,
            pb::CreateAppRequest {
                principal: Some(World::principal(&self.admin, &WRITER)),
                app_id: id.to_owned(),
                name: "Notes".to_owned(),
                description: "Team notes".to_owned(),
                with_table,
            },
        )
        .await
        .unwrap();
        reply.status.unwrap().revision.unwrap()
    }

    /// A signed-in browser session of `user`, as its `Cookie` header value.
    pub(crate) fn session(&self, user: &User) -> String {
        let secret = off_runtime(|| self.store().create_session(&user.id).unwrap());
        format!("sasha_session={secret}")
    }

    /// An access token of `user` holding `scopes`, as its `Authorization`
    /// header value.
    pub(crate) fn bearer(&self, user: &User, scopes: &[studio_store::Scope]) -> String {
        let scopes = scopes.iter().copied().collect();
        let token = off_runtime(|| {
            self.store()
                .mint_token(&user.id, studio_store::TokenKind::Access, &scopes, None)
                .unwrap()
        });
        format!("Bearer {token}")
    }

    /// The identity of `role` in this world's development PKI.
    pub(crate) fn identity(&self, role: Role) -> Identity {
        let (pki, _) = DevPki::ensure(&self.dir.path().join("pki")).unwrap();
        Identity::load(&pki.files(role)).unwrap()
    }

    /// Serves this world's studio-core gRPC listener ([`crate::grpc::router`],
    /// every service as studio-core serves them) over the real mTLS on a
    /// port of its own, until the test ends; its URL.
    pub(crate) async fn serve_grpc(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let router = crate::grpc::router(self.core.clone());
        let identity = self.identity(Role::StudioCore);
        tokio::spawn(async move {
            let _ = sasha_service::grpc::serve_mtls(
                router,
                listener,
                &identity,
                Role::StudioCore,
                tokio_util::sync::CancellationToken::new(),
            )
            .await;
        });
        url
    }

    /// Moves the store's clock `seconds` ahead.
    pub(crate) fn advance(&self, seconds: i64) {
        self.clock
            .fetch_add(seconds, std::sync::atomic::Ordering::SeqCst);
    }

    /// A signed-in Studio page of `user`: its requests carry the session
    /// cookie, and its changes the Studio origin and a JSON body.
    pub(crate) fn page(&self, user: &User) -> Page<'_> {
        Page {
            world: self,
            cookie: self.session(user),
        }
    }

    /// One request through Studio's router; the status and the JSON body
    /// (`null` when there is none). A success must be `no-store`.
    pub(crate) async fn send(
        &self,
        method: &str,
        uri: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (http::StatusCode, serde_json::Value) {
        let (status, _, json) = self.exchange(method, uri, headers, body).await;
        (status, json)
    }

    /// [`World::send`], with the response's headers.
    pub(crate) async fn exchange(
        &self,
        method: &str,
        uri: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (http::StatusCode, http::HeaderMap, serde_json::Value) {
        let reply = self.raw(method, uri, headers, body).await;
        if reply.status.is_success() {
            assert_eq!(
                reply.header("cache-control"),
                Some("no-store"),
                "{method} {uri}"
            );
        }
        let json = reply.json();
        (reply.status, reply.headers, json)
    }

    /// One request through Studio's router as it arrives (Host: the Studio
    /// origin unless `headers` name another), answered byte for byte.
    pub(crate) async fn raw(
        &self,
        method: &str,
        uri: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Reply {
        World::raw_on(&self.core, method, uri, headers, body).await
    }

    /// [`World::raw`] through the router of `core` (a [`World::replica`]).
    pub(crate) async fn raw_on(
        core: &Arc<Core>,
        method: &str,
        uri: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Reply {
        use http_body_util::BodyExt as _;
        use tower::ServiceExt as _;
        let mut request = http::Request::builder().method(method).uri(uri);
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("host"))
        {
            request = request.header("host", "localhost:3007");
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = crate::http::router(core.clone())
            .oneshot(
                request
                    .body(axum::body::Body::from(body.to_owned()))
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            headers,
            body: bytes.to_vec(),
        }
    }
}

/// One answer of Studio's router, byte for byte (see [`World::raw`]).
pub(crate) struct Reply {
    pub(crate) status: http::StatusCode,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    /// The body as JSON, or `null` when it is not JSON.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status, self.text())
    }
}

/// A signed-in Studio page: see [`World::page`].
pub(crate) struct Page<'a> {
    pub(crate) world: &'a World,
    pub(crate) cookie: String,
}

impl Page<'_> {
    pub(crate) async fn get(&self, uri: &str) -> (http::StatusCode, serde_json::Value) {
        self.world
            .send("GET", uri, &[("cookie", &self.cookie)], "")
            .await
    }

    /// A change: `body` is sent as JSON unless it is `null`.
    pub(crate) async fn call(
        &self,
        method: &str,
        uri: &str,
        body: serde_json::Value,
    ) -> (http::StatusCode, serde_json::Value) {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        self.world
            .send(
                method,
                uri,
                &[
                    ("cookie", &self.cookie),
                    ("origin", STUDIO),
                    ("content-type", "application/json"),
                ],
                &body,
            )
            .await
    }
}

/// Copies the valid fixture package `id` (`tests/packages/valid/<id>`) to `to`.
pub(crate) fn copy_fixture(id: &str, to: &std::path::Path) {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/packages/valid");
    copy_dir(&fixtures.join(id), to);
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
