//! studio-core: users, sessions, tokens, scopes, the app catalogue, grants, and
//! the Studio web UI and `/api/*`.
//!
//! It serves HTTP for browsers (behind the reverse proxy, Host = the Studio
//! origin) and mTLS gRPC (`CoreService`) for mcp-gateway, and calls data-worker
//! over mTLS gRPC. It never opens an app's data file.
//!
//! Modules: [`catalogue`] (discovery, validation, revisions), [`seed`] (the
//! bundled apps, installed into `DOCS_ROOT` at startup), [`store`] (the
//! core database: users, sessions, tokens, registry, grants, audit,
//! confirmations, suggestions, the revision ledger), `revisions` (recording
//! revisions in the ledger and serving old ones from it), [`source`] (package
//! files for the source tools), `api` (the `/api` routes), `core_grpc` (`CoreService`),
//! `source_tools` (`SourceFiles`), `suggestions` (the shape of a
//! suggestion), `web` (the Studio page and its modules, the MCP Apps host),
//! [`chat`] (chat turns for apps against an OpenAI-compatible provider),
//! (uploads: `studio_uploads`),
//! `assist` (`CoreService.Chat` and `Upload`: the checks and the streaming),
//! `recovery` (the recovery descriptor), `oauth` (the OAuth 2.1
//! authorization server for MCP clients), `people_http` (people, invitations
//! and personal tokens) and [`seed`] (the bundled apps).

#[allow(
    clippy::result_large_err,
    reason = "guards return the finished refusal, as axum handlers do; boxing it buys nothing"
)]
mod api;
pub mod catalogue;
mod core_grpc;
mod create;
mod drafts;
mod drafts_http;
mod history;
mod history_http;
mod http;
mod lifecycle;
mod lifecycle_http;
mod member_apps;
mod member_apps_http;
/// Models the fuzz targets and property tests check the OAuth, path, id and
/// upload-name rules against; never in a service build.
#[cfg(any(test, feature = "oracle"))]
pub mod oracle;
mod package_dir;
mod read_guard;
mod recovery;
mod revisions;
pub mod seed;
pub mod source;
mod source_tools;
mod suggestions;
#[cfg(test)]
mod test_data_worker;
#[cfg(test)]
mod test_world;
mod web;

use sasha_package::sql::ReadPolicy;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sasha_proto::pb::core_service_server::CoreServiceServer;
use sasha_proto::pb::{HealthReply, HealthRequest};
use sasha_proto::{AppError, ErrorCode};
use sasha_service::Role;
use sasha_service::config::{self, ConfigError, Env, Origins, StoragePaths};
use sasha_service::grpc::{self, DataClient};
use sasha_service::health;
use sasha_service::identity::Identity;
use sasha_service::process::{RoleError, announce_ready_with, bind};

use crate::catalogue::{Catalogue, Snapshot};
use crate::core_grpc::CoreGrpc;
use studio_store::Store;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// studio-core's configuration, read once at boot.
#[derive(Debug, Clone)]
pub struct Config {
    /// `SASHA_CORE_HTTP_ADDR`: the Studio HTTP listener (default `127.0.0.1:3011`).
    pub http_addr: SocketAddr,
    /// `SASHA_CORE_GRPC_ADDR`: the `CoreService` listener (default `127.0.0.1:3012`).
    pub grpc_addr: SocketAddr,
    /// `SASHA_DATA_GRPC_URL`: data-worker (default `https://127.0.0.1:3013`).
    pub data_url: String,
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
}

impl Config {
    pub fn from_env(env: &dyn Env) -> Result<Config, ConfigError> {
        let origins = Origins::from_env(env)?;
        let mcp_origin = config::origin(env, "MCP_PUBLIC_ORIGIN", origins.studio.as_str())?;
        Ok(Config {
            assistant_mcp_url: assistant_mcp_url(env, &mcp_origin)?,
            mcp_origin,
            http_addr: config::socket_addr(env, "SASHA_CORE_HTTP_ADDR", "127.0.0.1:3011")?,
            grpc_addr: config::socket_addr(env, "SASHA_CORE_GRPC_ADDR", "127.0.0.1:3012")?,
            data_url: config::grpc_url(env, "SASHA_DATA_GRPC_URL", "https://127.0.0.1:3013")?,
            origins,
            storage: StoragePaths::from_env(env)?,
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

/// State shared by the HTTP and gRPC surfaces.
#[derive(Debug)]
struct Core {
    origins: Origins,
    data: DataClient,
    /// The live app catalogue.
    catalogue: Arc<Catalogue>,
    /// Revisions kept per app in the revision ledger (`SASHA_REVISION_RETENTION`).
    revision_retention: usize,
    /// Users, sessions, tokens, the registry and grants (`DB_PATH`).
    store: Store,
    /// Who is calling: sessions, sign-in, people, tokens and the OAuth
    /// authorization server (studio-identity), over the same store.
    accounts: Arc<studio_identity::Accounts>,
    /// The member tier's caps (`member_apps::MEMBER_CAPS`).
    member_caps: studio_store::MemberCaps,
    /// Each author's member app deploys.
    member_deploys: member_apps::DeployThrottle,
    /// The package folders, for the source tools.
    source: Arc<source::SourceTree>,
    /// The chat provider, app chat and uploads (`CoreService.Chat`,
    /// `CoreService.Upload`) and the Studio assistant (studio-assistant).
    assistance: Arc<studio_assistant::Assistance>,
    /// Each draft's validation, by its files' content addresses.
    drafts: drafts::DraftCache,
}

impl Core {
    /// Every app `user_id` holds access on, read fresh from the store (one
    /// query), for the API and CoreService alike.
    async fn granted_apps(
        &self,
        user_id: &str,
    ) -> Result<std::collections::BTreeMap<String, studio_store::AppAccess>, AppError> {
        let (store, user_id) = (self.store.clone(), user_id.to_owned());
        studio_store::blocking(move || store.access_by_app(&user_id)).await
    }

    /// This process's health; with `deep`, data-worker's too.
    async fn health(&self, deep: bool) -> HealthReply {
        let mut dependencies = Vec::new();
        if deep {
            let mut data = self.data.clone();
            dependencies.push(
                grpc::dependency_health(
                    Role::DataWorker,
                    data.health(HealthRequest { deep: false }),
                )
                .await,
            );
        }
        grpc::health_reply(Role::StudioCore, dependencies)
    }

    /// Whether core can serve: its database answers a read and data-worker
    /// answers `Health`.
    async fn readiness(&self) -> HealthReply {
        let store = self.store.clone();
        let (database, mut reply) = tokio::join!(
            tokio::time::timeout(
                std::time::Duration::from_secs(5),
                tokio::task::spawn_blocking(move || store.check()),
            ),
            self.health(true),
        );
        let database_ok = matches!(database, Ok(Ok(Ok(()))));
        if let Ok(Ok(Err(error))) = &database {
            tracing::warn!(%error, "readiness: the core database does not answer");
        }
        reply.dependencies.insert(
            0,
            sasha_proto::pb::DependencyHealth {
                role: "core-database".to_owned(),
                ok: database_ok,
                detail: if database_ok {
                    String::new()
                } else {
                    "the core database does not answer".to_owned()
                },
            },
        );
        grpc::health_reply(Role::StudioCore, reply.dependencies)
    }
}

/// The largest `CoreService` request: an upload's 25 MiB of documents and
/// their names.
const MAX_CORE_MESSAGE: usize = 26 * 1024 * 1024;

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
    let data = grpc::data_client(&config.data_url, &config.identity).map_err(|error| {
        RoleError::Config(ConfigError::new("SASHA_DATA_GRPC_URL", error.to_string()))
    })?;
    let store = if let Some(store) = store {
        store
    } else {
        let db_path = config.storage.db_path.clone();
        tokio::task::spawn_blocking(move || Store::open(&db_path))
            .await
            .map_err(|error| RoleError::Startup(format!("cannot open the core database: {error}")))?
            .map_err(|error| {
                RoleError::Startup(format!("DB_PATH: cannot open the core database: {error}"))
            })?
    };
    let seeded = if config.bundled_apps == seed::BundledApps::Seed {
        seed_bundled_apps(config.storage.docs_root.clone()).await
    } else {
        BTreeSet::new()
    };
    let catalogue = Arc::new(Catalogue::new(
        &config.storage.docs_root,
        config.revision_history,
    ));
    member_apps::load_into_catalogue(&store, &catalogue);
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
    let registrar = store.clone();
    catalogue::watch(
        catalogue.clone(),
        shutdown.clone(),
        Arc::new(move |snapshot: Arc<Snapshot>| {
            let store = registrar.clone();
            tokio::spawn(async move {
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
    let member_deploys = member_apps::DeployThrottle::new(&store);
    let accounts = Arc::new(studio_identity::Accounts::new(
        store.clone(),
        config.origins.studio.clone(),
        config.mcp_origin.as_str(),
    ));
    let uploads = studio_uploads::UploadArea::new(
        config.storage.uploads_root.clone(),
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
    let core = Arc::new(Core {
        origins: config.origins.clone(),
        data,
        accounts,
        assistance,
        store,
        revision_retention: config.revision_retention,
        member_caps: member_apps::MEMBER_CAPS,
        member_deploys,
        source: Arc::new(source::SourceTree::new(catalogue.apps_dir())),
        catalogue,
        drafts: drafts::DraftCache::default(),
    });
    let http_addr = listeners
        .http
        .local_addr()
        .map_err(|e| RoleError::Startup(e.to_string()))?;
    let grpc_addr = listeners
        .grpc
        .local_addr()
        .map_err(|e| RoleError::Startup(e.to_string()))?;

    // An upload carries up to 25 MiB of documents in one message.
    let grpc_router = grpc::server_builder().add_service(
        CoreServiceServer::new(CoreGrpc {
            core: core.clone(),
            entries: Arc::default(),
        })
        .max_decoding_message_size(MAX_CORE_MESSAGE),
    );
    let grpc_server = grpc::serve_mtls(
        grpc_router,
        listeners.grpc,
        &config.identity,
        Role::StudioCore,
        shutdown.clone(),
    );
    let http_server =
        sasha_service::web::serve_http(listeners.http, router(core.clone()), shutdown.clone());

    probes.ready_when(move || {
        let core = core.clone();
        async move { core.readiness().await }
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
    grpc_result.map_err(|error| RoleError::Runtime(error.to_string()))?;
    http_result.map_err(|error| RoleError::Runtime(error.to_string()))
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

/// Re-reads the catalogue now (only changed packages are validated again) and
/// registers what became valid, as the file watcher would a moment later.
async fn refresh_catalogue(core: &Core) -> Arc<Snapshot> {
    let catalogue = core.catalogue.clone();
    let snapshot = match tokio::task::spawn_blocking(move || catalogue.refresh()).await {
        Ok(snapshot) => snapshot,
        Err(_) => return core.catalogue.current(),
    };
    register_apps(
        &core.store,
        &snapshot,
        core.revision_retention,
        &BTreeSet::new(),
    )
    .await;
    snapshot
}

/// Registers every valid package in the core database (its first discovery
/// grants `manage` to the admin and staff users existing then), then records
/// its revision in the revision ledger (`seed` for the ids in `seeded`, else
/// found on disk) and applies `retention`.
async fn register_apps(
    store: &Store,
    snapshot: &Arc<Snapshot>,
    retention: usize,
    seeded: &BTreeSet<String>,
) {
    let (store, snapshot, seeded) = (store.clone(), snapshot.clone(), seeded.clone());
    let outcome = tokio::task::spawn_blocking(move || {
        for (id, package) in snapshot.valid() {
            let read_policy: ReadPolicy = package
                .data
                .as_ref()
                .map(|data| data.read_policy())
                .unwrap_or_default();
            match store.register_app(
                id,
                &package.resource.revision,
                package.data.as_ref().map(|data| data.hash.as_str()),
                &serde_json::to_string(&package.actions).unwrap_or_else(|_| "[]".to_owned()),
                &read_policy,
            ) {
                Ok(true) => tracing::debug!(app_id = %id, "app registered for the first time"),
                Ok(false) => {}
                Err(error) => tracing::error!(app_id = %id, %error, "cannot register app"),
            }
        }
        // An app whose registration failed is refused by the ledger, which
        // holds only registered apps, and logged there.
        revisions::record_snapshot(&store, &snapshot, retention, &seeded);
    })
    .await;
    if let Err(error) = outcome {
        tracing::error!(%error, "app registration failed");
    }
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

/// The Studio HTTP surface.
fn router(core: Arc<Core>) -> axum::Router {
    let studio = axum::Router::new()
        .merge(web::routes(&core.origins.sandbox))
        .merge(api::routes())
        .merge(member_apps_http::routes())
        .merge(studio_identity::http::routes().with_state(core.accounts.clone()))
        .merge(studio_assistant::http::routes().with_state(core.assistance.clone()))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            core.clone(),
            studio_host_only,
        ));
    axum::Router::new()
        .route("/healthz", get(healthz))
        .merge(studio)
        .layer(axum::middleware::from_fn(
            sasha_service::web::envelope_plain_errors,
        ))
        .layer(axum::middleware::from_fn(security_headers))
        .layer(axum::middleware::from_fn(
            sasha_service::telemetry::http_trace_layer,
        ))
        .with_state(core)
}

/// `GET /healthz`: this process and data-worker, for probes and the dev ingress,
/// with the catalogue's counts of valid and invalid packages.
/// Exempt from the Host check so an orchestrator can probe the container port.
async fn healthz(State(core): State<Arc<Core>>) -> Response {
    let reply = core.health(true).await;
    let snapshot = core.catalogue.current();
    let valid = snapshot.valid().count();
    let mut extra = serde_json::Map::new();
    extra.insert(
        "apps".into(),
        serde_json::json!({"valid": valid, "invalid": snapshot.apps.len() - valid, "fingerprint": snapshot.fingerprint}),
    );
    grpc::health_http_response_with(&reply, extra)
}

/// Studio answers only requests addressed to the Studio origin; a request for
/// any other Host (the sandbox hostname included) gets the hidden 404.
async fn studio_host_only(State(core): State<Arc<Core>>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(|authority| authority.as_str())
        });
    match host {
        Some(host) if core.origins.studio.matches_authority(host) => next.run(request).await,
        _ => not_found().await,
    }
}

async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    sasha_service::web::insert_baseline_headers(headers);
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        ));
    response
}

async fn not_found() -> Response {
    AppError::from_code(ErrorCode::NotFound).into_response()
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
        let reply = grpc::health_reply(
            Role::StudioCore,
            vec![sasha_proto::pb::DependencyHealth {
                role: "data-worker".into(),
                ok: false,
                detail: "a platform service is not reachable (APP_NOT_READY)".into(),
            }],
        );
        assert!(!reply.ok);
        assert_eq!(
            grpc::health_http_response(&reply).status(),
            axum::http::StatusCode::SERVICE_UNAVAILABLE
        );
        let reply = grpc::health_reply(Role::StudioCore, Vec::new());
        assert_eq!(
            grpc::health_http_response(&reply).status(),
            axum::http::StatusCode::OK
        );
    }
}
