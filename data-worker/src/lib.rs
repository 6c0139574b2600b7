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

use std::net::SocketAddr;

use sasha_proto::pb::data_service_server::DataServiceServer;
use sasha_service::config::{self, ConfigError, Env, StoragePaths};
use sasha_service::health;
use sasha_service::identity::Identity;
use sasha_service::process::{RoleError, announce_ready, bind};
use sasha_service::{Role, grpc};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub mod engine;
pub mod grammar;
mod replication;
mod service;

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
    let replicator = match config.replica.clone() {
        Some(replica) => {
            let replicator = sasha_replica::Replicator::connect(replica)
                .await
                .map_err(RoleError::Config)?;
            replication::prepare(&replicator, &config.storage.app_data_root)
                .await
                .map_err(|error| RoleError::Startup(format!("SASHA_REPLICA_URL: {error}")))?;
            Some(replicator)
        }
        None => None,
    };
    let worker =
        service::Worker::new(&config.storage.app_data_root, replicator).map_err(|error| {
            RoleError::Startup(format!(
                "APP_DATA_ROOT: cannot prepare {}: {error}",
                config.storage.app_data_root.display()
            ))
        })?;
    let router = grpc::server_builder().add_service(DataServiceServer::new(worker));
    let root = config.storage.app_data_root.clone();
    probes.ready_when(move || {
        let root = root.clone();
        async move {
            let usable = tokio::task::spawn_blocking(move || storage_usable(&root))
                .await
                .unwrap_or(false);
            grpc::health_reply(
                Role::DataWorker,
                vec![sasha_proto::pb::DependencyHealth {
                    role: "app-data-root".to_owned(),
                    ok: usable,
                    detail: if usable {
                        String::new()
                    } else {
                        "APP_DATA_ROOT is not a readable and writable folder".to_owned()
                    },
                }],
            )
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
