//! mcp-gateway: the MCP endpoint `/mcp`.
//!
//! Every MCP client talks to this process. It keeps no durable state, so any
//! replica can serve a sessionless client; it reaches studio-core (identity,
//! catalogue, grants) and data-worker (governed data) over mTLS gRPC on every
//! request.
//!
//! This build serves `/healthz`, which checks both upstreams (core also checks
//! data-worker, so one probe fans out across all three processes), and answers
//! `/mcp` with `APP_NOT_READY` until the MCP surface lands.

pub mod tools;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sasha_proto::config::{self, ConfigError, Env};
use sasha_proto::grpc::{self, CoreClient, DataClient};
use sasha_proto::identity::Identity;
use sasha_proto::pb::HealthRequest;
use sasha_proto::process::{RoleError, announce_ready, bind};
use sasha_proto::{AppError, ErrorCode, Role};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// mcp-gateway's configuration, read once at boot.
#[derive(Debug, Clone)]
pub struct Config {
    /// `SASHA_GATEWAY_HTTP_ADDR`: the MCP HTTP listener (default `127.0.0.1:3014`).
    pub http_addr: SocketAddr,
    /// `SASHA_CORE_GRPC_URL`: studio-core (default `https://127.0.0.1:3012`).
    pub core_url: String,
    /// `SASHA_DATA_GRPC_URL`: data-worker (default `https://127.0.0.1:3013`).
    pub data_url: String,
    /// `MCP_PUBLIC_ORIGIN`: the origin MCP clients use (default
    /// `SASHA_PUBLIC_ORIGIN`, itself defaulting to `http://localhost:3007`).
    pub mcp_origin: config::Origin,
    /// The mTLS identity (`SASHA_TLS_CA`, `SASHA_TLS_CERT`, `SASHA_TLS_KEY`).
    pub identity: Identity,
}

impl Config {
    pub fn from_env(env: &dyn Env) -> Result<Config, ConfigError> {
        let studio = config::origin(env, "SASHA_PUBLIC_ORIGIN", config::DEFAULT_PUBLIC_ORIGIN)?;
        Ok(Config {
            http_addr: config::socket_addr(env, "SASHA_GATEWAY_HTTP_ADDR", "127.0.0.1:3014")?,
            core_url: config::grpc_url(env, "SASHA_CORE_GRPC_URL", "https://127.0.0.1:3012")?,
            data_url: config::grpc_url(env, "SASHA_DATA_GRPC_URL", "https://127.0.0.1:3013")?,
            mcp_origin: config::origin(env, "MCP_PUBLIC_ORIGIN", studio.as_str())?,
            identity: config::identity(env, Role::McpGateway)?,
        })
    }
}

/// The already-bound listener mcp-gateway serves on.
#[derive(Debug)]
pub struct Listeners {
    pub http: TcpListener,
}

/// Loads the configuration, binds, announces readiness and serves until
/// `shutdown` is cancelled.
pub async fn serve_from_env(env: impl Env, shutdown: CancellationToken) -> Result<(), RoleError> {
    let config = Config::from_env(&env)?;
    let http = bind("SASHA_GATEWAY_HTTP_ADDR", config.http_addr).await?;
    run(config, Listeners { http }, shutdown).await
}

/// Clients of the upstream processes; cheap to clone per request.
#[derive(Debug)]
struct Gateway {
    core: CoreClient,
    data: DataClient,
}

/// Serves mcp-gateway on `listeners` until `shutdown` is cancelled.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: CancellationToken,
) -> Result<(), RoleError> {
    let core = grpc::core_client(&config.core_url, &config.identity).map_err(|error| {
        RoleError::Config(ConfigError::new("SASHA_CORE_GRPC_URL", error.to_string()))
    })?;
    let data = grpc::data_client(&config.data_url, &config.identity).map_err(|error| {
        RoleError::Config(ConfigError::new("SASHA_DATA_GRPC_URL", error.to_string()))
    })?;
    let gateway = Arc::new(Gateway { core, data });
    let addr = listeners
        .http
        .local_addr()
        .map_err(|e| RoleError::Startup(e.to_string()))?;
    let app = axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/mcp", axum::routing::any(mcp_not_ready))
        .fallback(|| async { AppError::from_code(ErrorCode::NotFound).into_response() })
        .layer(axum::middleware::from_fn(
            sasha_proto::telemetry::http_trace_layer,
        ))
        .with_state(gateway);
    announce_ready(Role::McpGateway, &[("http", addr)]);
    sasha_proto::web::serve_http(listeners.http, app, shutdown)
        .await
        .map_err(|error| RoleError::Runtime(error.to_string()))
}

/// `GET /healthz`: the gateway, studio-core (which checks data-worker in turn)
/// and data-worker, asked concurrently.
#[tracing::instrument(skip_all, name = "gateway.healthz")]
async fn healthz(State(gateway): State<Arc<Gateway>>) -> Response {
    let mut core = gateway.core.clone();
    let mut data = gateway.data.clone();
    let (core_health, data_health) = tokio::join!(
        grpc::dependency_health(Role::StudioCore, core.health(HealthRequest { deep: true })),
        grpc::dependency_health(Role::DataWorker, data.health(HealthRequest { deep: false })),
    );
    let reply = grpc::health_reply(Role::McpGateway, vec![core_health, data_health]);
    grpc::health_http_response(&reply)
}

async fn mcp_not_ready() -> Response {
    AppError::new(
        ErrorCode::NotReady,
        "the MCP endpoint is not available in this build yet",
    )
    .into_response()
}
