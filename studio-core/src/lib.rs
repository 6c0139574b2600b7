//! studio-core: the app catalogue and its revision ledger, drafts and
//! publication, the app lifecycle, member apps, the source tools, the
//! bundled apps, the Studio web app and `CoreService`, the gRPC surface
//! mcp-gateway calls. Who is calling is studio-identity's, the core
//! database studio-store's, chat and the assistant studio-assistant's,
//! document conversion studio-uploads'; this crate wires them into one
//! process.
//!
//! It serves HTTP for browsers (behind the reverse proxy, Host = the Studio
//! origin) and mTLS gRPC (`CoreService`) for mcp-gateway, and calls
//! data-worker over mTLS gRPC. It never opens an app's data file.
//!
//! The layers, bottom up: the catalogue and the package files
//! ([`catalogue`], [`source`], `package_dir`), the shared state (`state`),
//! the ledger and registry (`ledger`, `registry`), the domain (`access`,
//! `status`, `history`, `drafts`, `previews`, `source_tools`, `create`,
//! `lifecycle`, `member_apps`, `recovery`, `read_guard`, `suggestions`,
//! [`seed`]), and two leaves that nothing imports: `grpc` (`CoreService`)
//! and `http` (the Studio router). This file only reads the configuration
//! and starts them.

mod access;
pub mod catalogue;
mod create;
mod data_worker;
mod diff;
mod drafts;
mod drift;
mod grpc;
mod history;
#[allow(
    clippy::result_large_err,
    reason = "guards return the finished refusal, as axum handlers do; boxing it buys nothing"
)]
mod http;
mod ledger;
mod lifecycle;
mod member_apps;
/// Models the fuzz targets and property tests check the OAuth, path, id and
/// upload-name rules against; never in a service build.
#[cfg(any(test, feature = "oracle"))]
pub mod oracle;
mod package_dir;
pub mod package_sync;
mod peers;
mod placement;
mod previews;
mod read_guard;
mod recovery;
mod registry;
mod replication;
pub mod seed;
pub mod source;
mod source_tools;
mod state;
mod status;
mod suggestions;
#[cfg(test)]
mod test_data_worker;
#[cfg(test)]
mod test_world;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use sasha_service::Role;
use sasha_service::config::{self, ConfigError, Env, Origins, StoragePaths};
use sasha_service::core_database::CoreDatabase;
use sasha_service::data_plane::DataPlane;
use sasha_service::grpc as service_grpc;
use sasha_service::health;
use sasha_service::identity::Identity;
use sasha_service::process::{RoleError, announce_ready_with, bind};
use studio_store::Store;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::catalogue::{Catalogue, Snapshot};
use crate::registry::register_apps;
use crate::state::Core;

/// studio-core's configuration, read once at boot.
#[derive(Debug, Clone)]
pub struct Config {
    /// `SASHA_CORE_HTTP_ADDR`: the Studio HTTP listener (default `127.0.0.1:3011`).
    pub http_addr: SocketAddr,
    /// `SASHA_CORE_GRPC_ADDR`: the `CoreService` listener (default `127.0.0.1:3012`).
    pub grpc_addr: SocketAddr,
    /// `SASHA_DATA_PLACEMENT` and what its layout reads: data-worker's URL
    /// (`single`), or the lease granted to data-workers (`leases`).
    pub data_plane: DataPlaneConfig,
    /// `SASHA_PUBLIC_ORIGIN` and `SASHA_APP_SANDBOX_ORIGIN`.
    pub origins: Origins,
    /// `MCP_PUBLIC_ORIGIN` (default `SASHA_PUBLIC_ORIGIN`): OAuth access
    /// tokens are issued for the resource `<MCP_PUBLIC_ORIGIN>/mcp`.
    pub mcp_origin: config::Origin,
    /// `DOCS_ROOT`, `DB_PATH`, `APP_DATA_ROOT`.
    pub storage: StoragePaths,
    /// The mTLS identity (`SASHA_TLS_CA`, `SASHA_TLS_CERT`, `SASHA_TLS_KEY`).
    pub identity: Identity,
    /// `SASHA_REVISION_HISTORY`: superseded revisions kept in process memory
    /// (default 64).
    pub revision_history: usize,
    /// `SASHA_REVISION_RETENTION`: how many of each app's newest revisions
    /// the revision ledger keeps; the current one is never pruned (default 50).
    pub revision_retention: usize,
    /// `SASHA_BUNDLED_APPS`: seed the bundled apps into `DOCS_ROOT` before the
    /// first catalogue refresh (`seed`, the default) or not (`off`).
    pub bundled_apps: seed::BundledApps,
    /// `SASHA_CHAT_*`: the OpenAI-compatible chat provider for apps; `None`
    /// when `SASHA_CHAT_BASE_URL` is unset (chat answers `APP_CHAT_UNAVAILABLE`).
    pub chat: Option<studio_assistant::provider::ChatConfig>,
    /// `SASHA_HEALTH_ADDR`: the probe listener (`/livez`, `/readyz`); `None`
    /// when unset.
    pub health_addr: Option<SocketAddr>,
    /// `SASHA_ASSISTANT_MCP_URL`: where the Studio assistant's MCP client
    /// reaches mcp-gateway (default `<MCP_PUBLIC_ORIGIN>/mcp`).
    pub assistant_mcp_url: String,
    /// `SASHA_REPLICA_*`: replication of the core database to object
    /// storage; `None` when `SASHA_REPLICA_URL` is unset.
    pub replica: Option<sasha_replica::ReplicaConfig>,
    /// `DATABASE_URL` (PostgreSQL, shared by every replica), else the SQLite
    /// file at `DB_PATH`.
    pub database: CoreDatabase,
    /// `SASHA_OIDC_*` and `SASHA_SSO_*`: the identity provider people sign
    /// in through, if any, whether passwords still work, and the role the
    /// organisation's groups give (SCIM memberships settle roles by it).
    pub sign_in: studio_identity::sso::SignInConfig,
}

impl Config {
    pub fn from_env(env: &dyn Env) -> Result<Config, ConfigError> {
        let origins = Origins::from_env(env)?;
        let mcp_origin = config::origin(env, "MCP_PUBLIC_ORIGIN", origins.studio.as_str())?;
        let storage = StoragePaths::from_env(env)?;
        let database_folder = storage
            .db_path
            .parent()
            .map(ToOwned::to_owned)
            .unwrap_or_default();
        let database = CoreDatabase::from_env(env, &storage)?;
        let replica = sasha_replica::ReplicaConfig::from_env(env, &database_folder)?;
        if replica.is_some() && matches!(database, CoreDatabase::Postgres(_)) {
            // Litestream replicates SQLite files; a PostgreSQL core database
            // is replicated by PostgreSQL (its standby or managed service).
            return Err(ConfigError::new(
                sasha_replica::config::REPLICA_URL,
                "studio-core's core database is PostgreSQL (DATABASE_URL), which replicates itself: unset SASHA_REPLICA_URL for studio-core (data-worker keeps it)",
            ));
        }
        Ok(Config {
            sign_in: studio_identity::sso::SignInConfig::from_env(env, &origins.studio)?,
            database,
            replica,
            assistant_mcp_url: assistant_mcp_url(env, &mcp_origin)?,
            mcp_origin,
            http_addr: config::socket_addr(env, "SASHA_CORE_HTTP_ADDR", "127.0.0.1:3011")?,
            grpc_addr: config::socket_addr(env, "SASHA_CORE_GRPC_ADDR", "127.0.0.1:3012")?,
            data_plane: DataPlaneConfig::from_env(env)?,
            origins,
            storage,
            identity: config::identity(env, Role::StudioCore)?,
            revision_history: config::count(
                env,
                "SASHA_REVISION_HISTORY",
                catalogue::DEFAULT_HISTORY,
                100_000,
            )?,
            revision_retention: config::count(
                env,
                "SASHA_REVISION_RETENTION",
                studio_store::DEFAULT_REVISION_RETENTION,
                100_000,
            )?,
            bundled_apps: seed::BundledApps::from_env(env)?,
            chat: studio_assistant::provider::ChatConfig::from_env(env)?,
            health_addr: health::health_addr(env)?,
        })
    }
}

/// How studio-core reaches app data (`SASHA_DATA_PLACEMENT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataPlaneConfig {
    /// `single`: one data-worker at `SASHA_DATA_GRPC_URL` (default
    /// `https://127.0.0.1:3013`) holds every app.
    Single { url: String },
    /// `leases`: data-workers renew leases here (`PlacementService`) and
    /// each app has one owner; `SASHA_DATA_GRPC_URL` is not read. `lease`
    /// is `SASHA_DATA_LEASE_SECS`.
    Leases { lease: std::time::Duration },
}

/// `SASHA_DATA_LEASE_SECS`: what a lease lasts from its renewal. At least
/// 2 s, so a worker renewing every tenth of it (no more often than every
/// 200 ms) has several tries before it lapses; at most 300 s, the longest a
/// lost worker's apps should wait.
const DATA_LEASE_SECS: &str = "SASHA_DATA_LEASE_SECS";
const DEFAULT_DATA_LEASE_SECS: u64 = 10;
const MIN_DATA_LEASE_SECS: u64 = 2;
const MAX_DATA_LEASE_SECS: u64 = 300;

impl DataPlaneConfig {
    fn from_env(env: &dyn Env) -> Result<DataPlaneConfig, ConfigError> {
        Ok(match sasha_service::data_plane::Layout::from_env(env)? {
            sasha_service::data_plane::Layout::Single => DataPlaneConfig::Single {
                url: config::grpc_url(env, "SASHA_DATA_GRPC_URL", "https://127.0.0.1:3013")?,
            },
            sasha_service::data_plane::Layout::Leases => DataPlaneConfig::Leases {
                lease: data_lease(env)?,
            },
        })
    }
}

fn data_lease(env: &dyn Env) -> Result<std::time::Duration, ConfigError> {
    let Some(text) = env.var(DATA_LEASE_SECS) else {
        return Ok(std::time::Duration::from_secs(DEFAULT_DATA_LEASE_SECS));
    };
    match text.parse::<u64>() {
        Ok(secs) if (MIN_DATA_LEASE_SECS..=MAX_DATA_LEASE_SECS).contains(&secs) => {
            Ok(std::time::Duration::from_secs(secs))
        }
        _ => Err(ConfigError::new(
            DATA_LEASE_SECS,
            format!(
                "{text:?} is not a whole number of seconds from {MIN_DATA_LEASE_SECS} to {MAX_DATA_LEASE_SECS}"
            ),
        )),
    }
}

/// `SASHA_ASSISTANT_MCP_URL`, an absolute http(s) URL without credentials,
/// query or fragment; `<MCP_PUBLIC_ORIGIN>/mcp` when unset.
fn assistant_mcp_url(env: &dyn Env, mcp_origin: &config::Origin) -> Result<String, ConfigError> {
    const NAME: &str = "SASHA_ASSISTANT_MCP_URL";
    let Some(value) = env.var(NAME) else {
        return Ok(format!("{}/mcp", mcp_origin.as_str()));
    };
    let invalid = |reason: &str| ConfigError::new(NAME, reason);
    let url = url::Url::parse(&value).map_err(|error| invalid(&error.to_string()))?;
    if !matches!(url.scheme(), "http" | "https")
        || !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(invalid(
            "an absolute http or https URL without credentials, query or fragment",
        ));
    }
    Ok(value)
}

/// Opens (and migrates) the core database `database` names, with the message
/// an operator needs when it cannot: the variable, where, and why, never a
/// password. Every process that opens the core database comes through here.
pub fn open_store(database: &CoreDatabase) -> Result<Store, String> {
    match database {
        CoreDatabase::Sqlite(path) => Store::open(path)
            .map_err(|error| format!("DB_PATH: cannot open the core database: {error}")),
        CoreDatabase::Postgres(postgres) => Store::connect(
            &postgres.url,
            postgres.pool_size,
            postgres.ca_file.as_deref(),
            std::sync::Arc::new(studio_store::system_clock),
        )
        .map_err(|error| {
            format!(
                "DATABASE_URL: cannot open the core database at {}: {error}",
                postgres.place()
            )
        }),
    }
}

/// Says this replica is alive, then ends the confirmations of replicas that
/// are not (their turns are gone, so nothing of them runs).
async fn heartbeat(assistance: &studio_assistant::Assistance) {
    let (store, replica) = (
        assistance.store().clone(),
        assistance.assistant().replica().to_owned(),
    );
    if let Err(error) = studio_store::blocking(move || store.note_replica(&replica)).await {
        tracing::warn!(diagnostic_id = %error.diagnostic_id, "studio-core could not record that it is alive");
        return;
    }
    // Throttle cells whose every slot is back hold nothing worth keeping.
    let store = assistance.store().clone();
    if let Err(error) = studio_store::blocking(move || store.forget_full_throttle_cells()).await {
        tracing::warn!(diagnostic_id = %error.diagnostic_id, "studio-core could not forget full throttle cells; the next heartbeat does");
    }
    match assistance.expire_abandoned().await {
        Ok(0) => {}
        Ok(expired) => tracing::info!(
            expired,
            "assistant: confirmations whose studio-core stopped expired; nothing of them ran"
        ),
        // They cannot run either way (no turn waits for them); the next
        // heartbeat tries again.
        Err(error) => tracing::warn!(
            diagnostic_id = %error.diagnostic_id,
            "assistant: confirmations whose studio-core stopped could not be expired"
        ),
    }
}

/// The already-bound listeners studio-core serves on.
#[derive(Debug)]
pub struct Listeners {
    pub http: TcpListener,
    pub grpc: TcpListener,
    /// The probe listener, when `SASHA_HEALTH_ADDR` is set.
    pub health: Option<TcpListener>,
}

/// Loads the configuration, binds, announces readiness and serves until
/// `shutdown` is cancelled.
pub async fn serve_from_env(env: impl Env, shutdown: CancellationToken) -> Result<(), RoleError> {
    let config = Config::from_env(&env)?;
    let http = bind("SASHA_CORE_HTTP_ADDR", config.http_addr).await?;
    let grpc = bind("SASHA_CORE_GRPC_ADDR", config.grpc_addr).await?;
    let health = health::bind_health(config.health_addr).await?;
    run(config, Listeners { http, grpc, health }, shutdown).await
}

/// Imports the documents of an upload folder an earlier build wrote
/// (`UPLOADS_ROOT`, an installation upgraded in place, or documents just
/// brought back from object storage) into the core database, keeping each
/// name; the folder is left as it is, and importing again changes nothing.
async fn import_uploads(store: &Store, uploads_root: &std::path::Path) -> Result<(), RoleError> {
    let (store, root) = (store.clone(), uploads_root.to_path_buf());
    tokio::task::spawn_blocking(move || studio_uploads::import::import_folder(&store, &root))
        .await
        .map_err(|error| RoleError::Startup(format!("UPLOADS_ROOT: the import failed: {error}")))?
        .map(|_| ())
        .map_err(|error| {
            RoleError::Startup(format!(
                "UPLOADS_ROOT: cannot import the uploaded documents into the core database: {error}"
            ))
        })
}

/// Serves studio-core on `listeners` until `shutdown` is cancelled.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: CancellationToken,
) -> Result<(), RoleError> {
    run_with_store(config, listeners, None, shutdown).await
}

/// [`run`] over `store` when given (a test's, opened on `DB_PATH` with a
/// clock it moves), else the core database opened from `DB_PATH`. For the
/// in-process tests of the roles that call studio-core (mcp-gateway's
/// `tests/`), which serve it over a temporary folder.
#[doc(hidden)]
pub async fn run_with_store(
    config: Config,
    listeners: Listeners,
    store: Option<Store>,
    shutdown: CancellationToken,
) -> Result<(), RoleError> {
    // Probes answer from the start: alive, and not ready until serving.
    let probes = health::Probes::start(listeners.health, Role::StudioCore, shutdown.clone());
    for dir in [
        config.storage.docs_root.join("apps"),
        config
            .storage
            .db_path
            .parent()
            .map(ToOwned::to_owned)
            .unwrap_or_default(),
    ] {
        if dir.as_os_str().is_empty() {
            continue;
        }
        std::fs::create_dir_all(&dir).map_err(|error| {
            RoleError::Startup(format!("cannot create {}: {error}", dir.display()))
        })?;
    }
    let data_layout = match &config.data_plane {
        DataPlaneConfig::Single { url } => state::DataLayout::Single(
            service_grpc::data_client(url, &config.identity).map_err(|error| {
                RoleError::Config(ConfigError::new("SASHA_DATA_GRPC_URL", error.to_string()))
            })?,
        ),
        DataPlaneConfig::Leases { lease } => state::DataLayout::Leases { lease: *lease },
    };
    let replicator = match config.replica.clone() {
        Some(replica) => {
            let replicator = sasha_replica::Replicator::connect(replica)
                .await
                .map_err(RoleError::Config)?;
            // Before the store opens (and would create) the file.
            replicator
                .restore_missing(&sasha_replica::Database::Core, &config.storage.db_path)
                .await
                .map_err(|error| {
                    RoleError::Startup(format!(
                        "SASHA_REPLICA_URL: cannot restore the core database: {error}"
                    ))
                })?;
            Some(replicator)
        }
        None => None,
    };
    let store = if let Some(store) = store {
        store
    } else {
        let database = config.database.clone();
        tokio::task::spawn_blocking(move || open_store(&database))
            .await
            .map_err(|error| RoleError::Startup(format!("cannot open the core database: {error}")))?
            .map_err(RoleError::Startup)?
    };
    let replication = match replicator {
        Some(replicator) => {
            replication::restore_missing_uploads(&replicator, &config.storage.uploads_root)
                .await
                .map_err(|error| {
                    RoleError::Startup(format!(
                        "SASHA_REPLICA_URL: cannot restore the uploaded documents: {error}"
                    ))
                })?;
            Some(
                replication::CoreReplication::track(
                    replicator,
                    store.clone(),
                    &config.storage.db_path,
                )
                .await
                .map_err(|error| RoleError::Startup(format!("SASHA_REPLICA_URL: {error}")))?,
            )
        }
        None => None,
    };
    import_uploads(&store, &config.storage.uploads_root).await?;
    let catalogue = Arc::new(Catalogue::new(
        &config.storage.docs_root,
        config.revision_history,
    ));
    let source = Arc::new(source::SourceTree::new(catalogue.apps_dir()));
    let packages = Arc::new(package_sync::PackageSync::open(&config.storage.docs_root));
    // The folders take what other replicas changed before the seeder looks
    // at them, and give what the seeder changed before the first listing.
    registry::settle_packages(&store, &packages, &source, registry::Scope::Every).await;
    let seeded = if config.bundled_apps == seed::BundledApps::Seed {
        seed_bundled_apps(config.storage.docs_root.clone()).await
    } else {
        BTreeSet::new()
    };
    registry::settle_packages(&store, &packages, &source, registry::Scope::Every).await;
    let followed_from = peers::head(&store).await.unwrap_or_else(|error| {
        tracing::warn!(diagnostic_id = %error.diagnostic_id, "studio-core could not read the audit log's end; it follows the other replicas from the start");
        0
    });
    member_apps::load_into_catalogue(&store, &catalogue).await;
    let discovered = {
        let catalogue = catalogue.clone();
        tokio::task::spawn_blocking(move || catalogue.refresh())
            .await
            .map_err(|error| RoleError::Startup(format!("app discovery failed: {error}")))?
    };
    let summary = format!(
        "{} apps valid, {} invalid ({} member apps); bundled apps installed or refreshed: {}",
        discovered.valid().count(),
        discovered.apps.len() - discovered.valid().count(),
        discovered
            .valid()
            .filter(|(id, _)| catalogue.is_member(id))
            .count(),
        if seeded.is_empty() {
            "none".to_owned()
        } else {
            seeded.iter().cloned().collect::<Vec<_>>().join(", ")
        }
    );
    let retention = config.revision_retention;
    register_apps(&store, &discovered, retention, &seeded).await;
    prune_revisions(&store, retention).await;
    let registrar = (
        store.clone(),
        packages.clone(),
        source.clone(),
        catalogue.clone(),
    );
    catalogue::watch(
        catalogue.clone(),
        shutdown.clone(),
        Arc::new(move |snapshot: Arc<Snapshot>| {
            let (store, packages, source, catalogue) = registrar.clone();
            tokio::spawn(async move {
                // A folder edited here becomes its head; a head taken in
                // means the catalogue reads again.
                let mut snapshot = snapshot;
                if registry::settle_packages(&store, &packages, &source, registry::Scope::Every)
                    .await
                    && let Ok(again) =
                        tokio::task::spawn_blocking(move || catalogue.refresh()).await
                {
                    snapshot = again;
                }
                register_apps(&store, &snapshot, retention, &BTreeSet::new()).await
            });
        }),
    )
    .map_err(|error| {
        RoleError::Startup(format!(
            "DOCS_ROOT: cannot watch {}: {error}",
            catalogue.apps_dir().display()
        ))
    })?;
    let member_deploys = state::deploy_throttle::DeployThrottle::new(&store);
    let accounts = Arc::new(
        studio_identity::Accounts::new(
            store.clone(),
            config.origins.studio.clone(),
            config.mcp_origin.as_str(),
        )
        .with_sign_in(config.sign_in.clone())
        .map_err(|error| {
            RoleError::Startup(format!(
                "cannot make the identity provider's client: {error}"
            ))
        })?,
    );
    // The group mapping may have changed since the last start: every person
    // the directory provisions gets the role and status it gives now.
    {
        let (store, roles) = (store.clone(), config.sign_in.group_roles.clone());
        studio_store::blocking(move || {
            store.scim_settle_everyone(&|groups| roles.role_for(groups.iter().copied()))
        })
        .await
        .map_err(|error| {
            RoleError::Startup(format!(
                "cannot settle the people the directory provisions: {}",
                error.message
            ))
        })?;
    }
    let uploads = studio_uploads::UploadArea::new(
        store.clone(),
        studio_uploads::isolate::Converter::this_executable().map_err(|error| {
            RoleError::Startup(format!(
                "cannot find this executable to convert documents with: {error}"
            ))
        })?,
    );
    let assistance = Arc::new(studio_assistant::Assistance::new(
        accounts.clone(),
        store.clone(),
        studio_assistant::provider::ChatService::new(config.chat.clone()),
        Arc::new(uploads),
        catalogue.clone(),
        config.assistant_mcp_url.clone(),
    ));
    // This replica says it is alive before it ends the confirmations of
    // replicas that stopped (a previous run of this one among them), and
    // keeps saying so: another replica's click then reaches its turns.
    heartbeat(&assistance).await;
    tokio::spawn({
        let assistance = assistance.clone();
        let shutdown = shutdown.clone();
        async move {
            let mut every = tokio::time::interval(std::time::Duration::from_secs(
                studio_store::REPLICA_HEARTBEAT_SECONDS,
            ));
            every.tick().await;
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    _ = every.tick() => heartbeat(&assistance).await,
                }
            }
        }
    });
    let data = match &data_layout {
        state::DataLayout::Single(client) => DataPlane::single(client.clone()),
        state::DataLayout::Leases { .. } => {
            placement::leased_data_plane(&store, config.identity.clone())
        }
    };
    let core = Arc::new(Core {
        origins: config.origins.clone(),
        data,
        data_layout,
        accounts,
        assistance,
        store,
        revision_retention: config.revision_retention,
        member_caps: member_apps::MEMBER_CAPS,
        member_deploys,
        source,
        packages,
        catalogue,
        drafts: state::draft_cache::DraftCache::default(),
        replication,
    });
    tokio::spawn(peers::follow(core.clone(), followed_from, shutdown.clone()));
    let http_addr = listeners
        .http
        .local_addr()
        .map_err(|e| RoleError::Startup(e.to_string()))?;
    let grpc_addr = listeners
        .grpc
        .local_addr()
        .map_err(|e| RoleError::Startup(e.to_string()))?;

    let grpc_router = grpc::router(core.clone());
    let grpc_server = service_grpc::serve_mtls(
        grpc_router,
        listeners.grpc,
        &config.identity,
        Role::StudioCore,
        shutdown.clone(),
    );
    let http_server = sasha_service::web::serve_http(
        listeners.http,
        http::router(core.clone()),
        shutdown.clone(),
    );

    let stopping = core.assistance.clone();
    probes.ready_when(move || {
        let core = core.clone();
        async move { grpc::health::readiness(&core).await }
    });
    announce_ready_with(
        Role::StudioCore,
        &probes.with_listener(&[("http", http_addr), ("grpc", grpc_addr)]),
        &summary,
    );
    let (grpc_result, http_result) = tokio::join!(
        async {
            let result = grpc_server.await;
            shutdown.cancel();
            result
        },
        async {
            let result = http_server.await;
            shutdown.cancel();
            result
        }
    );
    stopped(&stopping).await;
    grpc_result.map_err(|error| RoleError::Runtime(error.to_string()))?;
    http_result.map_err(|error| RoleError::Runtime(error.to_string()))
}

/// This replica's servers have stopped, and its turns with them: it stops
/// saying it is alive, and the cards its turns held expire now, not once
/// its silence is noticed.
async fn stopped(assistance: &studio_assistant::Assistance) {
    let (store, replica) = (
        assistance.store().clone(),
        assistance.assistant().replica().to_owned(),
    );
    if let Err(error) = studio_store::blocking(move || store.forget_replica(&replica)).await {
        tracing::warn!(diagnostic_id = %error.diagnostic_id, "studio-core could not record that it stopped; its cards expire once its silence is noticed");
        return;
    }
    match assistance.expire_abandoned().await {
        Ok(0) => {}
        Ok(expired) => tracing::info!(
            expired,
            "assistant: confirmations left waiting by this run expired as studio-core stopped; nothing of them ran"
        ),
        Err(error) => tracing::warn!(
            diagnostic_id = %error.diagnostic_id,
            "assistant: confirmations left waiting by this run could not be expired; any replica's next heartbeat does"
        ),
    }
}

/// Seeds the bundled apps under the knowledge flock and logs every outcome. A
/// failure is logged and startup goes on: the catalogue serves what exists.
/// Returns the ids the seeder installed or refreshed (the revision ledger
/// records their next revision as `seed`).
async fn seed_bundled_apps(docs_root: std::path::PathBuf) -> BTreeSet<String> {
    let seeded = tokio::task::spawn_blocking(move || seed::seed_at_startup(&docs_root)).await;
    let report = match seeded {
        Ok(Ok(report)) => report,
        Ok(Err(error)) => {
            tracing::error!(%error, "bundled apps not seeded; serving what DOCS_ROOT holds");
            return BTreeSet::new();
        }
        Err(error) => {
            tracing::error!(%error, "bundled app seeding failed; serving what DOCS_ROOT holds");
            return BTreeSet::new();
        }
    };
    for leftover in &report.healed {
        tracing::info!(%leftover, "removed the leftover of an interrupted seeding");
    }
    for app in &report.apps {
        let outcome = app.outcome.as_str();
        let tree_hash = app.tree_hash.as_deref().unwrap_or("-");
        match (&app.outcome, &app.warning) {
            (seed::Outcome::Error, warning) => tracing::error!(
                app_id = %app.id,
                outcome,
                warning = warning.as_deref().unwrap_or_default(),
                "bundled app not seeded"
            ),
            (_, Some(warning)) => {
                tracing::warn!(app_id = %app.id, outcome, tree_hash, %warning, "bundled app")
            }
            (_, None) => tracing::debug!(app_id = %app.id, outcome, tree_hash, "bundled app"),
        }
    }
    report
        .apps
        .iter()
        .filter(|app| {
            matches!(
                app.outcome,
                seed::Outcome::Installed | seed::Outcome::Replaced
            )
        })
        .map(|app| app.id.clone())
        .collect()
}

/// Applies the revision retention to every app once at boot, so a lowered
/// `SASHA_REVISION_RETENTION` takes effect before the next change, and
/// reclaims what the ledger still keeps of deleted member apps.
async fn prune_revisions(store: &Store, retention: usize) {
    let store = store.clone();
    let pruning = store.clone();
    match tokio::task::spawn_blocking(move || pruning.prune_revisions(retention)).await {
        Ok(Ok(0)) => {}
        Ok(Ok(pruned)) => tracing::info!(pruned, retention, "old revisions pruned from the ledger"),
        Ok(Err(error)) => tracing::error!(%error, "cannot prune the revision ledger"),
        Err(error) => tracing::error!(%error, "revision pruning failed"),
    }
    // Member apps deleted before deletion reclaimed their ledger.
    match tokio::task::spawn_blocking(move || store.reclaim_deleted_member_apps()).await {
        Ok(Ok(0)) => {}
        Ok(Ok(apps)) => tracing::info!(apps, "deleted member apps' revisions reclaimed"),
        Ok(Err(error)) => tracing::error!(%error, "cannot reclaim deleted member apps' revisions"),
        Err(error) => tracing::error!(%error, "reclaiming deleted member apps failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assistants_mcp_url_is_checked() {
        let origin = config::Origin::parse("https://studio.example").unwrap();
        let env = |value: Option<&str>| -> std::collections::HashMap<String, String> {
            value
                .map(|value| ("SASHA_ASSISTANT_MCP_URL".to_owned(), value.to_owned()))
                .into_iter()
                .collect()
        };
        assert_eq!(
            assistant_mcp_url(&env(None), &origin).unwrap(),
            "https://studio.example/mcp"
        );
        assert_eq!(
            assistant_mcp_url(&env(Some("http://mcp-gateway:3014/mcp")), &origin).unwrap(),
            "http://mcp-gateway:3014/mcp"
        );
        for bad in [
            "ftp://x/mcp",
            "http://user:pw@x/mcp",
            "http://x/mcp?a=1",
            "http://x/mcp#f",
            "not a url",
        ] {
            let error = assistant_mcp_url(&env(Some(bad)), &origin).unwrap_err();
            assert!(
                error.to_string().contains("SASHA_ASSISTANT_MCP_URL"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn health_reports_a_down_dependency_as_503() {
        let reply = service_grpc::health_reply(
            Role::StudioCore,
            vec![sasha_proto::pb::DependencyHealth {
                role: "data-worker".into(),
                ok: false,
                detail: "a platform service is not reachable (APP_NOT_READY)".into(),
            }],
        );
        assert!(!reply.ok);
        assert_eq!(
            service_grpc::health_http_response(&reply).status(),
            axum::http::StatusCode::SERVICE_UNAVAILABLE
        );
        let reply = service_grpc::health_reply(Role::StudioCore, Vec::new());
        assert_eq!(
            service_grpc::health_http_response(&reply).status(),
            axum::http::StatusCode::OK
        );
    }
}
