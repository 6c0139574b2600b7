//! data-worker: the governed per-app SQLite data service.
//!
//! It owns `APP_DATA_ROOT` (one SQLite file per app) and is the only process that
//! opens an app's data file. It is called over mTLS gRPC by studio-core and
//! mcp-gateway, which pass an already-authorised actor; it accepts JSON grammar,
//! never SQL text, and never authorises users itself.
//!
//! [`engine`] owns the hardened per-app SQLite files (migrations, the
//! `_sasha_*` tables, idempotent audited mutations) and [`grammar`] turns the JSON
//! grammar into owner-scoped, parameterised statements. Both are tested on their
//! own and served through `DataService` ([`service`]).
//!
//! A draft is previewed against each previewer's own scratch copy of the
//! app's data (`APP_DATA_ROOT/.previews/<app>/`, [`engine::preview`]), which
//! keeps only the live rows they may read under the live policy, with the
//! draft's migrations applied there only, so a preview never touches a live
//! record nor shows anyone a row they cannot read live;
//! publishing the draft (`ApplyContract`) applies its pending migrations to the
//! live file in one transaction, refusing when an applied migration drifted.
//!
//! With one data-worker (`SASHA_DATA_PLACEMENT=single`, the default) it
//! serves every app at epoch 0. With several (`leases`) it renews a lease
//! with studio-core's placement and serves only the apps granted to it, at
//! their epochs ([`ownership`], [`placement`]); with replication it brings a
//! gained app's file up to the newest history in object storage before
//! serving it, and never restores every app at boot.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use sasha_proto::pb::data_service_server::DataServiceServer;
use sasha_service::config::{self, ConfigError, Env, StoragePaths};
use sasha_service::data_plane::{self, Layout};
use sasha_service::health;
use sasha_service::identity::Identity;
use sasha_service::process::{RoleError, announce_ready, bind};
use sasha_service::{Role, grpc};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::ownership::Ownership;

pub mod engine;
pub mod grammar;
mod ownership;
pub mod placement;
mod replication;
mod service;
pub mod undo;

/// `SASHA_DATA_ADVERTISE_URL`: where callers reach this worker.
pub const ADVERTISE_URL: &str = "SASHA_DATA_ADVERTISE_URL";
/// `SASHA_CORE_GRPC_URL`: studio-core's replicas, whose placement grants
/// the leases.
pub const CORE_GRPC_URL: &str = "SASHA_CORE_GRPC_URL";

/// With `SASHA_DATA_PLACEMENT=leases`: who this worker is and where it
/// renews its lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSettings {
    /// `SASHA_DATA_WORKER_ID` (required): its stable name in the placement.
    pub worker_id: String,
    /// `SASHA_DATA_ADVERTISE_URL`: where callers reach it; `None` for
    /// `https://` and the address the gRPC listener is bound to.
    pub advertise_url: Option<String>,
    /// `SASHA_CORE_GRPC_URL`: studio-core's replicas (default
    /// `https://127.0.0.1:3012`).
    pub core_urls: Vec<String>,
}

impl LeaseSettings {
    fn from_env(env: &dyn Env) -> Result<LeaseSettings, ConfigError> {
        let worker_id = env.var(data_plane::WORKER_ID).ok_or_else(|| {
            ConfigError::new(
                data_plane::WORKER_ID,
                "required with SASHA_DATA_PLACEMENT=leases: this worker's stable name in the placement",
            )
        })?;
        if let Err(why) = sasha_contract::ids::check_worker_id(&worker_id) {
            return Err(ConfigError::new(
                data_plane::WORKER_ID,
                format!("{worker_id:?}: {why}"),
            ));
        }
        let advertise_url = match env.var(ADVERTISE_URL) {
            Some(_) => Some(config::grpc_url(env, ADVERTISE_URL, "")?),
            None => None,
        };
        Ok(LeaseSettings {
            worker_id,
            advertise_url,
            core_urls: config::grpc_urls(env, CORE_GRPC_URL, "https://127.0.0.1:3012")?,
        })
    }

    /// The URL this worker advertises, its gRPC listener bound to `bound`.
    fn advertised(&self, bound: SocketAddr) -> Result<String, ConfigError> {
        match &self.advertise_url {
            Some(url) => Ok(url.clone()),
            None if bound.ip().is_unspecified() => Err(ConfigError::new(
                ADVERTISE_URL,
                format!(
                    "required when the gRPC listener is bound to {bound}: nobody can reach \
                     that address; set the https:// URL callers use"
                ),
            )),
            None => Ok(format!("https://{bound}")),
        }
    }
}

/// data-worker's configuration, read once at boot.
#[derive(Debug, Clone)]
pub struct Config {
    /// `SASHA_DATA_GRPC_ADDR`: where the gRPC server listens (default `127.0.0.1:3013`).
    pub grpc_addr: SocketAddr,
    /// `DOCS_ROOT`, `DB_PATH`, `APP_DATA_ROOT`, checked so that app data never
    /// lands inside the served docs tree.
    pub storage: StoragePaths,
    /// The mTLS identity (`SASHA_TLS_CA`, `SASHA_TLS_CERT`, `SASHA_TLS_KEY`).
    pub identity: Identity,
    /// `SASHA_HEALTH_ADDR`: the probe listener (`/livez`, `/readyz`); `None`
    /// when unset.
    pub health_addr: Option<SocketAddr>,
    /// `SASHA_REPLICA_*`: replication of every app database to object
    /// storage; `None` when `SASHA_REPLICA_URL` is unset.
    pub replica: Option<sasha_replica::ReplicaConfig>,
    /// `SASHA_DATA_PLACEMENT=leases` and its settings; `None` for `single`
    /// (one data-worker holds every app).
    pub leases: Option<LeaseSettings>,
}

impl Config {
    pub fn from_env(env: &dyn Env) -> Result<Config, ConfigError> {
        let storage = StoragePaths::from_env(env)?;
        Ok(Config {
            grpc_addr: config::socket_addr(env, "SASHA_DATA_GRPC_ADDR", "127.0.0.1:3013")?,
            replica: sasha_replica::ReplicaConfig::from_env(env, &storage.app_data_root)?,
            storage,
            identity: config::identity(env, Role::DataWorker)?,
            health_addr: health::health_addr(env)?,
            leases: match Layout::from_env(env)? {
                Layout::Single => None,
                Layout::Leases => Some(LeaseSettings::from_env(env)?),
            },
        })
    }
}

/// The already-bound listeners data-worker serves on.
#[derive(Debug)]
pub struct Listeners {
    pub grpc: TcpListener,
    /// The probe listener, when `SASHA_HEALTH_ADDR` is set.
    pub health: Option<TcpListener>,
}

/// Loads the configuration, binds, announces readiness and serves until
/// `shutdown` is cancelled.
pub async fn serve_from_env(env: impl Env, shutdown: CancellationToken) -> Result<(), RoleError> {
    let config = Config::from_env(&env)?;
    let grpc = bind("SASHA_DATA_GRPC_ADDR", config.grpc_addr).await?;
    let health = health::bind_health(config.health_addr).await?;
    let listeners = Listeners { grpc, health };
    run(config, listeners, shutdown).await
}

/// Serves data-worker on `listeners` until `shutdown` is cancelled.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: CancellationToken,
) -> Result<(), RoleError> {
    let probes = health::Probes::start(listeners.health, Role::DataWorker, shutdown.clone());
    engine::files::private_root(&config.storage.app_data_root).map_err(|error| {
        RoleError::Startup(format!(
            "APP_DATA_ROOT: cannot create {} or make it private: {error}",
            config.storage.app_data_root.display()
        ))
    })?;
    let grpc_addr = listeners
        .grpc
        .local_addr()
        .map_err(|e| RoleError::Startup(e.to_string()))?;
    let advertised = match &config.leases {
        Some(leases) => Some(leases.advertised(grpc_addr).map_err(RoleError::Config)?),
        None => None,
    };
    let replicator = match config.replica.clone() {
        Some(replica) => {
            let replicator = sasha_replica::Replicator::connect(replica)
                .await
                .map_err(RoleError::Config)?;
            // With leases an app's file is brought up to date when the app
            // is granted, never all at boot: most are another worker's.
            if config.leases.is_none() {
                replication::prepare(&replicator, &config.storage.app_data_root)
                    .await
                    .map_err(|error| RoleError::Startup(format!("SASHA_REPLICA_URL: {error}")))?;
            }
            Some(replicator)
        }
        None => None,
    };
    let ownership = match config.leases {
        Some(_) => Ownership::leased(replicator.is_some()),
        None => Ownership::single(),
    };
    let worker = service::Worker::new(
        &config.storage.app_data_root,
        replicator.clone(),
        Arc::clone(&ownership),
    );
    if let (Some(leases), Some(url)) = (&config.leases, advertised) {
        let client =
            grpc::placement_client(&leases.core_urls, &config.identity).map_err(|error| {
                RoleError::Config(ConfigError::new(CORE_GRPC_URL, error.to_string()))
            })?;
        tracing::info!(worker_id = %leases.worker_id, %url, replicated = replicator.is_some(), "placement: leases from studio-core");
        placement::start(
            Arc::clone(&ownership),
            placement::Renewer {
                worker_id: leases.worker_id.clone(),
                url,
                replicated: replicator.is_some(),
                client,
            },
            placement::Files {
                engine: worker.engine().clone(),
                replicator,
                root: config.storage.app_data_root.clone(),
            },
            shutdown.clone(),
        );
    }
    let router = grpc::server_builder().add_service(DataServiceServer::new(worker));
    let root = config.storage.app_data_root.clone();
    let lease = Arc::clone(&ownership);
    probes.ready_when(move || {
        let root = root.clone();
        let lease = Arc::clone(&lease);
        async move {
            let usable = tokio::task::spawn_blocking(move || storage_usable(&root))
                .await
                .unwrap_or(false);
            let mut dependencies = vec![sasha_proto::pb::DependencyHealth {
                role: "app-data-root".to_owned(),
                ok: usable,
                detail: if usable {
                    String::new()
                } else {
                    "APP_DATA_ROOT is not a readable and writable folder".to_owned()
                },
            }];
            if lease.layout() == Layout::Leases {
                // Ready once a lease is held: before it, every call is
                // refused.
                let live = lease.lease_live(Instant::now());
                dependencies.push(sasha_proto::pb::DependencyHealth {
                    role: "placement-lease".to_owned(),
                    ok: live,
                    detail: if live {
                        String::new()
                    } else {
                        "no live lease from studio-core's placement".to_owned()
                    },
                });
            }
            grpc::health_reply(Role::DataWorker, dependencies)
        }
    });
    announce_ready(
        Role::DataWorker,
        &probes.with_listener(&[("grpc", grpc_addr)]),
    );
    grpc::serve_mtls(
        router,
        listeners.grpc,
        &config.identity,
        Role::DataWorker,
        shutdown,
    )
    .await
    .map_err(|error| RoleError::Runtime(error.to_string()))
}

/// Whether `root` is a folder this process may list, enter and create files
/// in: what opening or creating an app's database needs. `access(2)` answers
/// without writing anything (a read-only mount fails it with `EROFS`).
fn storage_usable(root: &std::path::Path) -> bool {
    use rustix::fs::Access;
    root.is_dir()
        && rustix::fs::access(root, Access::READ_OK | Access::WRITE_OK | Access::EXEC_OK).is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn storage_is_usable_only_as_a_writable_folder() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        assert!(super::storage_usable(dir.path()));
        assert!(!super::storage_usable(&dir.path().join("missing")));
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(!super::storage_usable(&file));
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).unwrap();
        // root may write anywhere; the check then rightly says usable.
        let writable = std::fs::write(locked.join("probe"), "").is_ok();
        assert_eq!(super::storage_usable(&locked), writable);
    }
}
