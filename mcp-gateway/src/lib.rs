//! mcp-gateway: the MCP endpoint `/mcp`.
//!
//! Every MCP client talks to this process: external agents, Claude Desktop and
//! the Studio page itself. It keeps no durable state: every request is
//! authenticated through studio-core, every list and call reads the caller's
//! grants fresh from studio-core, confirmation tokens live in studio-core and
//! idempotency receipts in data-worker. So any replica serves a sessionless
//! client (protocol 2026-07-28), and a client on an older protocol, whose
//! session (and elicitation) lives in one replica, loses only that session when
//! the replica dies: it initializes again elsewhere and retries with the same
//! idempotency key.
//!
//! Modules: [`auth`] (who is calling), [`server`] (the rmcp handler: tools,
//! resources, confirmation), [`calls`] (governed data calls and actions),
//! [`assist`] (the open app's chat and document upload), [`catalogue`] (the
//! caller's catalogue, read once into typed apps),
//! [`tools`] (the per-caller app tool list), [`platform`] (the source tools,
//! `getDocs`, `suggestImprovement`) and [`placement`] (where an app's data is
//! served when several data-workers share it).

pub mod assist;
pub mod auth;
pub mod calls;
pub mod catalogue;
pub mod member;
/// The model action arguments are checked against by the fuzz targets and a
/// property test; never in a service build.
#[cfg(any(test, feature = "oracle"))]
pub mod oracle;
pub mod placement;
pub mod platform;
pub mod schemas;
pub mod server;
pub mod speculate;
pub mod tools;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sasha_contract::tools::{AppOnlyTool, UPLOAD_TOOL};
use sasha_proto::json_limits::{self, JsonLimits};
use sasha_proto::pb::HealthRequest;
use sasha_proto::{AppError, ErrorCode};
use sasha_service::Role;
use sasha_service::config::{self, ConfigError, Env};
use sasha_service::data_plane::{DataPlane, Layout};
use sasha_service::grpc::{self, CoreClient};
use sasha_service::health;
use sasha_service::identity::Identity;
use sasha_service::process::{RoleError, announce_ready, bind};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// mcp-gateway's configuration, read once at boot.
#[derive(Debug, Clone)]
pub struct Config {
    /// `SASHA_GATEWAY_HTTP_ADDR`: the MCP HTTP listener (default `127.0.0.1:3014`).
    pub http_addr: SocketAddr,
    /// `SASHA_CORE_GRPC_URL`: studio-core's replicas (default
    /// `https://127.0.0.1:3012`).
    pub core_urls: Vec<String>,
    /// `SASHA_DATA_PLACEMENT`: one data-worker (`single`, the default) or
    /// several holding leases (`leases`).
    pub placement: Layout,
    /// `SASHA_DATA_GRPC_URL`: the one data-worker of the `single` layout
    /// (default `https://127.0.0.1:3013`); with leases each app's worker is
    /// asked of studio-core instead, and this is not read.
    pub data_url: String,
    /// `MCP_PUBLIC_ORIGIN`: the origin MCP clients use (default
    /// `SASHA_PUBLIC_ORIGIN`, itself defaulting to `http://localhost:3007`).
    pub mcp_origin: config::Origin,
    /// `SASHA_PUBLIC_ORIGIN`: the Studio origin, the only browser origin whose
    /// session cookie `/mcp` accepts.
    pub studio_origin: config::Origin,
    /// The mTLS identity (`SASHA_TLS_CA`, `SASHA_TLS_CERT`, `SASHA_TLS_KEY`).
    pub identity: Identity,
    /// `SASHA_HEALTH_ADDR`: the probe listener (`/livez`, `/readyz`); `None`
    /// when unset.
    pub health_addr: Option<SocketAddr>,
    /// `SASHA_GATEWAY_CALL_DEADLINE_SECS` (1 to 300, default 10).
    pub call_deadline: std::time::Duration,
    /// `SASHA_GATEWAY_EARLY_READS` (default on): whether a read may
    /// run beside its check ([`speculate`]).
    pub early_reads: bool,
}

/// The default of `SASHA_GATEWAY_CALL_DEADLINE_SECS`: well past the slowest
/// answer a healthy data-worker gives (a statement's 2 s deadline after a
/// 2 s busy wait), well short of a person giving up.
const DEFAULT_CALL_DEADLINE_SECS: usize = 10;
const MAX_CALL_DEADLINE_SECS: usize = 300;

/// What a caller is told after a call that changes nothing timed out.
const TRY_AGAIN: &str = "try again";

impl Config {
    pub fn from_env(env: &dyn Env) -> Result<Config, ConfigError> {
        let studio = config::origin(env, "SASHA_PUBLIC_ORIGIN", config::DEFAULT_PUBLIC_ORIGIN)?;
        let placement = Layout::from_env(env)?;
        Ok(Config {
            http_addr: config::socket_addr(env, "SASHA_GATEWAY_HTTP_ADDR", "127.0.0.1:3014")?,
            core_urls: config::grpc_urls(env, "SASHA_CORE_GRPC_URL", "https://127.0.0.1:3012")?,
            placement,
            data_url: match placement {
                Layout::Single => {
                    config::grpc_url(env, "SASHA_DATA_GRPC_URL", "https://127.0.0.1:3013")?
                }
                Layout::Leases => String::new(),
            },
            mcp_origin: config::origin(env, "MCP_PUBLIC_ORIGIN", studio.as_str())?,
            studio_origin: studio,
            identity: config::identity(env, Role::McpGateway)?,
            health_addr: health::health_addr(env)?,
            call_deadline: call_deadline(env)?,
            early_reads: config::switch(env, "SASHA_GATEWAY_EARLY_READS", true)?,
        })
    }
}

fn call_deadline(env: &dyn Env) -> Result<std::time::Duration, ConfigError> {
    const VAR: &str = "SASHA_GATEWAY_CALL_DEADLINE_SECS";
    match config::count(env, VAR, DEFAULT_CALL_DEADLINE_SECS, MAX_CALL_DEADLINE_SECS)? {
        0 => Err(ConfigError::new(
            VAR,
            format!("0 is not a whole number from 1 to {MAX_CALL_DEADLINE_SECS}"),
        )),
        secs => Ok(std::time::Duration::from_secs(secs as u64)),
    }
}

/// The already-bound listener mcp-gateway serves on.
#[derive(Debug)]
pub struct Listeners {
    pub http: TcpListener,
    /// The probe listener, when `SASHA_HEALTH_ADDR` is set.
    pub health: Option<TcpListener>,
}

/// Loads the configuration, binds, announces readiness and serves until
/// `shutdown` is cancelled.
pub async fn serve_from_env(env: impl Env, shutdown: CancellationToken) -> Result<(), RoleError> {
    let config = Config::from_env(&env)?;
    let http = bind("SASHA_GATEWAY_HTTP_ADDR", config.http_addr).await?;
    let health = health::bind_health(config.health_addr).await?;
    run(config, Listeners { http, health }, shutdown).await
}

/// What every request handler shares: clients of the upstream processes (cheap
/// to clone per call) and this replica's non-durable bookkeeping.
#[derive(Debug)]
pub struct Gateway {
    core: CoreClient,
    /// Every `DataService` call goes through it, carrying the owner's epoch
    /// (0 with one data-worker).
    data: DataPlane,
    /// `SASHA_GATEWAY_CALL_DEADLINE_SECS`: how long a caller waits on
    /// studio-core or data-worker for authentication, the catalogue or a
    /// data operation (see [`grpc::within`]).
    call_deadline: std::time::Duration,
    studio_origin: config::Origin,
    cookie_name: &'static str,
    sessions: auth::SessionOwners,
    /// The contract hashes each app's current owner was handed.
    contracts: calls::KnownContracts,
    validators: schemas::Validators,
    /// Upload bodies being read or handled: [`UPLOADS_AT_ONCE`] permits, each
    /// held until its response is complete.
    uploads: Arc<tokio::sync::Semaphore>,
    /// Other bodies over [`LARGE_BODY`] being read or handled:
    /// [`LARGE_BODIES_AT_ONCE`] permits, held likewise; none free is
    /// `APP_BUSY`.
    large_bodies: Arc<tokio::sync::Semaphore>,
    /// What OAuth clients learn about this resource.
    oauth: ProtectedResource,
    /// Recent answers for early reads, and how they went.
    speculation: Arc<speculate::Speculation>,
    /// `SASHA_GATEWAY_EARLY_READS`.
    early_reads: bool,
}

impl Gateway {
    /// How this replica's early reads went ([`speculate`]).
    pub fn speculation(&self) -> &speculate::Speculation {
        &self.speculation
    }
}

/// This gateway as an OAuth protected resource (RFC 9728).
#[derive(Debug)]
struct ProtectedResource {
    /// `<MCP_PUBLIC_ORIGIN>/mcp`: the audience access tokens must be bound to.
    resource: String,
    /// Where the metadata is served.
    metadata_url: String,
    /// The metadata document.
    metadata: serde_json::Value,
}

impl ProtectedResource {
    fn new(mcp_origin: &config::Origin, studio_origin: &config::Origin) -> ProtectedResource {
        let resource = format!("{}/mcp", mcp_origin.as_str());
        ProtectedResource {
            metadata_url: format!(
                "{}/.well-known/oauth-protected-resource/mcp",
                mcp_origin.as_str()
            ),
            metadata: serde_json::json!({
                "resource": resource,
                "authorization_servers": [studio_origin.as_str()],
                "scopes_supported": sasha_contract::caller::Scope::MCP_CLIENT,
                "bearer_methods_supported": ["header"],
                "resource_name": "Sasha Apps",
                "resource_documentation": format!("{}/", studio_origin.as_str()),
            }),
            resource,
        }
    }
}

/// `GET /.well-known/oauth-protected-resource[/mcp]`: readable by any origin
/// (browser-based MCP clients discover it too); it holds nothing secret.
async fn protected_resource_metadata(State(gateway): State<Arc<Gateway>>) -> Response {
    let mut response = axum::Json(gateway.oauth.metadata.clone()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
        http::HeaderValue::from_static("*"),
    );
    headers.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("public, max-age=300"),
    );
    response
}

// What one `/mcp` body may cost. The JSON bounds (bytes, values, depth) are
// `sasha_proto::json_limits::{MCP_REQUEST, MCP_UPLOAD}`, with their reasons;
// how many large bodies one replica holds at once is decided here.

/// The largest `/mcp` request body, except a document upload.
const MAX_MCP_BODY: usize = json_limits::MCP_REQUEST.max_bytes;
/// The largest body of a `sasha__files_upload` call by a caller who may
/// upload.
const MAX_UPLOAD_BODY: usize = json_limits::MCP_UPLOAD.max_bytes;
/// Upload bodies one replica holds at once; more wait their turn. Each costs
/// its bytes several times over while it is parsed, decoded and sent to
/// studio-core, and only the Studio page of a user who may upload makes one.
const UPLOADS_AT_ONCE: usize = 4;
/// A body above this is large: reading on takes a permit. An ordinary MCP
/// call is a few KiB; 256 KiB admits a generous one without a permit, and is
/// read and checked inline in about a quarter of a millisecond.
const LARGE_BODY: usize = 256 * 1024;
/// How long a request body may take to arrive: a 36 MiB upload at 10 Mbit/s
/// takes about 30 s, so this leaves room for slow links while bounding how
/// long a slow sender holds one of the few large-body permits.
const BODY_READ_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);
/// Large non-upload bodies (up to 4 MiB: a source tool's file write) one
/// replica holds at once; one more is answered `APP_BUSY`. A 4 MiB body that
/// passes the JSON bounds costs about five times its size while rmcp copies
/// and parses it, so however many callers try, these cost at most about
/// 40 MiB together.
const LARGE_BODIES_AT_ONCE: usize = 2;

/// Serves mcp-gateway on `listeners` until `shutdown` is cancelled.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: CancellationToken,
) -> Result<(), RoleError> {
    let probes = health::Probes::start(listeners.health, Role::McpGateway, shutdown.clone());
    let Service {
        router,
        gateway,
        mcp_stop: _mcp_stop,
    } = service(&config, shutdown.clone())?;
    let addr = listeners
        .http
        .local_addr()
        .map_err(|e| RoleError::Startup(e.to_string()))?;
    probes.ready_when(move || {
        let gateway = gateway.clone();
        async move { health(&gateway).await }
    });
    announce_ready(Role::McpGateway, &probes.with_listener(&[("http", addr)]));
    sasha_service::web::serve_http(listeners.http, router, shutdown)
        .await
        .map_err(|error| RoleError::Runtime(error.to_string()))
}

/// The gateway's HTTP service, ready to serve: what [`run`] serves on its
/// listener, and what in-process tests drive with `tower::ServiceExt::oneshot`.
pub struct Service {
    /// `/mcp`, `/healthz` and the protected resource metadata.
    pub router: axum::Router,
    /// What every handler shares (the probes read it).
    pub gateway: Arc<Gateway>,
    /// Ends every open MCP response when dropped: rmcp's own token, which
    /// fires only when the service goes away (the shutdown token drains
    /// instead, letting calls in flight finish).
    pub mcp_stop: tokio_util::sync::DropGuard,
}

/// Builds the service over lazily connecting clients of `config`'s
/// upstreams; `shutdown` ends `GET /mcp` listening streams. With one
/// data-worker its calls go to `SASHA_DATA_GRPC_URL`; with leases, to each
/// app's owner as studio-core's `PlacementService` names it.
pub fn service(config: &Config, shutdown: CancellationToken) -> Result<Service, RoleError> {
    // One balanced channel to core's replicas: a Locate goes to a replica
    // that answers, like the gateway's other calls to core.
    let core_channel =
        grpc::balanced_channel(&config.core_urls, &config.identity, Role::StudioCore)
            .map_err(core_url_error)?;
    let core = CoreClient::new(core_channel.clone());
    let placement = grpc::PlacementClient::new(core_channel);
    let data = match config.placement {
        Layout::Single => DataPlane::single(
            grpc::data_client(&config.data_url, &config.identity).map_err(|error| {
                RoleError::Config(ConfigError::new("SASHA_DATA_GRPC_URL", error.to_string()))
            })?,
        ),
        Layout::Leases => DataPlane::leased(
            Arc::new(placement::CorePlacement::new(
                placement,
                config.call_deadline,
            )),
            config.identity.clone(),
        ),
    };
    build(config, core, data, shutdown)
}

fn core_url_error(error: grpc::ConnectError) -> RoleError {
    RoleError::Config(ConfigError::new("SASHA_CORE_GRPC_URL", error.to_string()))
}

/// [`service`] over `data` instead of the data plane `config` describes:
/// for tests that stand in for studio-core's placement.
pub fn service_with_data_plane(
    config: &Config,
    data: DataPlane,
    shutdown: CancellationToken,
) -> Result<Service, RoleError> {
    let core =
        grpc::core_replicas_client(&config.core_urls, &config.identity).map_err(core_url_error)?;
    build(config, core, data, shutdown)
}

fn build(
    config: &Config,
    core: CoreClient,
    data: DataPlane,
    shutdown: CancellationToken,
) -> Result<Service, RoleError> {
    let gateway = Arc::new(Gateway {
        core,
        data,
        call_deadline: config.call_deadline,
        cookie_name: sasha_service::web::session_cookie_name(
            config.studio_origin.as_str().starts_with("https://"),
        ),
        studio_origin: config.studio_origin.clone(),
        sessions: auth::SessionOwners::default(),
        contracts: calls::KnownContracts::default(),
        validators: schemas::Validators::default(),
        uploads: Arc::new(tokio::sync::Semaphore::new(UPLOADS_AT_ONCE)),
        large_bodies: Arc::new(tokio::sync::Semaphore::new(LARGE_BODIES_AT_ONCE)),
        oauth: ProtectedResource::new(&config.mcp_origin, &config.studio_origin),
        speculation: Arc::default(),
        early_reads: config.early_reads,
    });
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    for origin in [&config.mcp_origin, &config.studio_origin] {
        hosts.push(origin.host().trim_matches(['[', ']']).to_owned());
    }
    let mcp_stop = CancellationToken::new();
    let mcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins([config.studio_origin.as_str().to_owned()])
        .enforce_origin_validation()
        // `limit_body` enforces the real limits first.
        .with_max_request_body_bytes(MAX_UPLOAD_BODY)
        // A sessionless call that emits nothing before its result is answered
        // as plain JSON; one that does (progress) still streams.
        .with_json_response(true)
        // Not the shutdown token: rmcp ends every open response when its
        // token fires, and a drain lets calls in flight finish. This one
        // fires only when the service is dropped (the process is about to
        // exit).
        .with_cancellation_token(mcp_stop.clone());
    let handler_gateway = gateway.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(server::SashaMcp::new(handler_gateway.clone())),
        Arc::new(LocalSessionManager::default()),
        mcp_config,
    );
    // Authentication first (headers only): `limit_body` reads no byte of a
    // body before it knows the caller, and what that caller may send.
    let mcp = tower::ServiceBuilder::new()
        .layer(axum::middleware::from_fn_with_state(
            gateway.clone(),
            auth::authenticate,
        ))
        .layer(axum::middleware::from_fn_with_state(
            gateway.clone(),
            limit_body,
        ))
        .layer(axum::middleware::from_fn_with_state(
            shutdown,
            end_listen_streams_on_shutdown,
        ))
        .service(mcp);
    let router = axum::Router::new()
        .route("/healthz", get(healthz))
        .route(
            "/.well-known/oauth-protected-resource",
            get(protected_resource_metadata),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(protected_resource_metadata),
        )
        .route_service("/mcp", mcp)
        .fallback(|| async { AppError::from_code(ErrorCode::NotFound).into_response() })
        .layer(axum::middleware::from_fn(
            sasha_service::web::envelope_plain_errors,
        ))
        .layer(axum::middleware::from_fn(
            sasha_service::telemetry::http_trace_layer,
        ))
        .with_state(gateway.clone());
    Ok(Service {
        router,
        gateway,
        mcp_stop: mcp_stop.drop_guard(),
    })
}

/// Reads the request body under what its caller is entitled to, before rmcp
/// sees it (and after [`auth::authenticate`] has established the caller):
///
/// - The upload allowance ([`json_limits::MCP_UPLOAD`], 36 MiB) goes only to
///   a `tools/call` of [`UPLOAD_TOOL`] (named in `Mcp-Method` and
///   `Mcp-Name`) by a caller for whom that tool exists ([`may_upload`],
///   asked of studio-core before any byte of the body is read); every other
///   request is held to [`json_limits::MCP_REQUEST`] (4 MiB).
/// - A declared length over the limit is refused unread. A body over
///   [`LARGE_BODY`] needs a permit before it is read on: an upload waits for
///   one of [`UPLOADS_AT_ONCE`], anything else takes one of
///   [`LARGE_BODIES_AT_ONCE`] or is answered `APP_BUSY` (429). The permit is
///   held until the response is complete.
/// - The body read is checked in one pass for its values and nesting
///   ([`json_limits::check`]), and one over 4 MiB must be the upload call
///   itself.
///
/// Every refusal is the envelope; a bound broken is `APP_RESOURCE_LIMIT`
/// (413).
async fn limit_body(
    State(gateway): State<Arc<Gateway>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let headers = request.headers();
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let names_upload =
        header("mcp-method") == Some("tools/call") && header("mcp-name") == Some(UPLOAD_TOOL);
    let declared = header("content-length").and_then(|length| length.parse::<usize>().ok());
    let caller = request.extensions().get::<auth::Caller>().cloned();
    let upload = match caller {
        Some(caller) if names_upload => match may_upload(&gateway, &caller).await {
            Ok(upload) => upload,
            Err(error) => return error.into_response(),
        },
        _ => false,
    };
    let limits = if upload {
        json_limits::MCP_UPLOAD
    } else {
        json_limits::MCP_REQUEST
    };
    if declared.is_some_and(|length| length > limits.max_bytes) {
        return too_large(upload).into_response();
    }
    let mut permit = None;
    if upload {
        match gateway.uploads.clone().acquire_owned().await {
            Ok(held) => permit = Some(held),
            Err(_) => return AppError::from_code(ErrorCode::NotReady).into_response(),
        }
    } else if declared.is_some_and(|length| length > LARGE_BODY) {
        match large_body_permit(&gateway) {
            Ok(held) => permit = Some(held),
            Err(busy) => return busy.into_response(),
        }
    }
    let (parts, body) = request.into_parts();
    // Only a body already admitted as large is given its declared capacity.
    let capacity = declared.unwrap_or(0).min(if permit.is_some() {
        limits.max_bytes
    } else {
        LARGE_BODY
    });
    let read = read_body(body, capacity, |length| {
        if length > limits.max_bytes {
            return Err(too_large(upload));
        }
        if length > LARGE_BODY && permit.is_none() {
            permit = Some(large_body_permit(&gateway)?);
        }
        Ok(())
    })
    .await;
    let bytes = match read {
        Ok(bytes) => bytes,
        Err(refused) => return refused.into_response(),
    };
    let checked = if bytes.len() > LARGE_BODY {
        // A pass over megabytes takes milliseconds: off the async threads.
        let body = bytes.clone();
        tokio::task::spawn_blocking(move || check_body(&body, &limits, upload))
            .await
            .unwrap_or_else(|_| Err(AppError::from_code(ErrorCode::Internal)))
    } else {
        check_body(&bytes, &limits, upload)
    };
    if let Err(refused) = checked {
        return refused.into_response();
    }
    let response = next
        .run(axum::extract::Request::from_parts(
            parts,
            axum::body::Body::from(bytes),
        ))
        .await;
    match permit {
        Some(permit) => hold_until_sent(response, permit),
        None => response,
    }
}

/// A request body, chunk by chunk, within [`BODY_READ_DEADLINE`] (so a slow
/// sender cannot hold a large-body permit for long): `admit` is asked with
/// the length the next chunk brings the body to, before it is kept, and its
/// refusal ends the read.
pub(crate) async fn read_body(
    body: axum::body::Body,
    capacity: usize,
    mut admit: impl FnMut(usize) -> Result<(), AppError>,
) -> Result<axum::body::Bytes, AppError> {
    let deadline = tokio::time::Instant::now() + BODY_READ_DEADLINE;
    let mut chunks = body.into_data_stream();
    let mut bytes = Vec::with_capacity(capacity);
    while let Some(chunk) = next_chunk(&mut chunks, deadline).await? {
        let chunk = chunk.map_err(|_| unreadable())?;
        admit(bytes.len() + chunk.len())?;
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes.into())
}

/// A body the connection failed to deliver.
fn unreadable() -> AppError {
    AppError::new(
        ErrorCode::InputInvalid,
        "the request body could not be read",
    )
}

/// The body's next chunk, or `APP_TIMEOUT` once `deadline` has passed.
async fn next_chunk<S>(
    chunks: &mut S,
    deadline: tokio::time::Instant,
) -> Result<Option<S::Item>, AppError>
where
    S: futures::Stream + Unpin,
{
    tokio::time::timeout_at(deadline, futures::StreamExt::next(chunks))
        .await
        .map_err(|_| {
            AppError::new(
                ErrorCode::Timeout,
                format!(
                    "the request body did not arrive within {} seconds",
                    BODY_READ_DEADLINE.as_secs()
                ),
            )
        })
}

/// Whether `caller` may send [`UPLOAD_TOOL`]'s large body: exactly when the
/// call would find that tool, as `server.rs` decides it. That is a Studio
/// browser session (`Sasha-App` bound) with `apps:invoke` whose bound app,
/// in its catalogue read fresh from studio-core (so with a grant, `use` or
/// more), declares `files: true`.
async fn may_upload(gateway: &Gateway, caller: &auth::Caller) -> Result<bool, AppError> {
    let tools_caller = caller.tools_caller();
    let Some(app_id) = tools_caller.bound_app else {
        return Ok(false);
    };
    if !caller.invokes() {
        return Ok(false);
    }
    let catalogue = catalogue::fetch(
        &gateway.core,
        gateway.call_deadline,
        &caller.principal,
        Some(app_id),
        gateway.contracts.hint(app_id),
        caller.preview.as_deref(),
    )
    .await?;
    Ok(catalogue.apps.get(app_id).is_some_and(|app| {
        tools::AppTool::AppOnly(AppOnlyTool::Upload).visible(app, &tools_caller)
    }))
}

/// One of the large-body permits, or the `APP_BUSY` answer when none is free.
fn large_body_permit(gateway: &Gateway) -> Result<tokio::sync::OwnedSemaphorePermit, AppError> {
    gateway
        .large_bodies
        .clone()
        .try_acquire_owned()
        .map_err(|_| {
            AppError::new(
                ErrorCode::Busy,
                "too many large requests are in progress; try again shortly",
            )
        })
}

/// `APP_RESOURCE_LIMIT` (413) for a body over its byte limit.
fn too_large(upload: bool) -> AppError {
    AppError::new(
        ErrorCode::ResourceLimit,
        if upload {
            "the upload is larger than 25 MiB of documents"
        } else {
            "the request body is larger than 4 MiB"
        },
    )
}

/// The JSON bounds of `limits`, and the rule that only the upload call
/// itself may be over 4 MiB.
fn check_body(body: &[u8], limits: &JsonLimits, upload: bool) -> Result<(), AppError> {
    json_limits::check(body, limits).map_err(json_limits::JsonLimitError::to_app_error)?;
    if body.len() > MAX_MCP_BODY && !is_upload_call(body) {
        return Err(too_large(upload));
    }
    Ok(())
}

/// Keeps `permit` until `response` has been sent. A JSON answer is complete
/// (the handler has finished); an event stream's handler runs on while it
/// streams, and with it the memory of the request, so the permit goes with
/// its body.
fn hold_until_sent(response: Response, permit: tokio::sync::OwnedSemaphorePermit) -> Response {
    let streaming = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    if !streaming {
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = futures::StreamExt::map(body.into_data_stream(), move |chunk| {
        let _held = &permit;
        chunk
    });
    Response::from_parts(parts, axum::body::Body::from_stream(body))
}

/// Whether `body` is one JSON-RPC `tools/call` of [`UPLOAD_TOOL`] (the files
/// themselves are skipped, not decoded).
fn is_upload_call(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Call<'a> {
        #[serde(borrow)]
        method: std::borrow::Cow<'a, str>,
        #[serde(borrow)]
        params: Params<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(borrow)]
        name: std::borrow::Cow<'a, str>,
    }
    serde_json::from_slice::<Call<'_>>(body)
        .is_ok_and(|call| call.method == "tools/call" && call.params.name == UPLOAD_TOOL)
}

/// `GET /healthz`: the gateway, studio-core (which checks data-worker in turn)
/// and, with one data-worker, data-worker, asked concurrently.
#[tracing::instrument(skip_all, name = "gateway.healthz")]
async fn healthz(State(gateway): State<Arc<Gateway>>) -> Response {
    grpc::health_http_response(&health(&gateway).await)
}

/// The gateway can serve when studio-core (which checks data-worker in turn)
/// and data-worker both answer: `/healthz` and readiness alike. With leases
/// no one worker speaks for the data plane (a lost one's apps move), so
/// studio-core's answer, which knows the workers' leases, is the one asked.
async fn health(gateway: &Gateway) -> sasha_proto::pb::HealthReply {
    let mut core = gateway.core.clone();
    let core_health =
        grpc::dependency_health(Role::StudioCore, core.health(HealthRequest { deep: true }));
    let Some(mut data) = gateway.data.single_client() else {
        return grpc::health_reply(Role::McpGateway, vec![core_health.await]);
    };
    let (core_health, data_health) = tokio::join!(
        core_health,
        grpc::dependency_health(Role::DataWorker, data.health(HealthRequest { deep: false })),
    );
    grpc::health_reply(Role::McpGateway, vec![core_health, data_health])
}

/// A drain lets requests in flight finish, but a `GET /mcp` listening stream
/// (a legacy session's server-to-client channel) has no end of its own and
/// would hold the process for the whole grace period: its body ends when
/// shutdown begins, and the client reconnects to another replica. Responses
/// to `POST` (a call, its progress and its result) are left to complete.
async fn end_listen_streams_on_shutdown(
    State(shutdown): State<CancellationToken>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let get = request.method() == http::Method::GET;
    let response = next.run(request).await;
    let streaming = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    if !(get && streaming) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = futures::StreamExt::take_until(body.into_data_stream(), shutdown.cancelled_owned());
    Response::from_parts(parts, axum::body::Body::from_stream(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
        let (pki, _) =
            sasha_service::identity::DevPki::ensure(&CERTS.path().join("certs")).unwrap();
        let files = pki.files(Role::McpGateway);
        let mut env: std::collections::HashMap<String, String> = [
            ("SASHA_TLS_CA", files.ca.display().to_string()),
            ("SASHA_TLS_CERT", files.cert.display().to_string()),
            ("SASHA_TLS_KEY", files.key.display().to_string()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect();
        for (name, value) in pairs {
            env.insert((*name).to_owned(), (*value).to_owned());
        }
        env
    }

    static CERTS: std::sync::LazyLock<tempfile::TempDir> =
        std::sync::LazyLock::new(|| tempfile::tempdir().unwrap());

    #[test]
    fn the_data_plane_layout_decides_whether_the_one_workers_url_is_read() {
        let single = Config::from_env(&env(&[])).unwrap();
        assert_eq!(single.placement, Layout::Single);
        assert_eq!(single.data_url, "https://127.0.0.1:3013");
        let refused = Config::from_env(&env(&[("SASHA_DATA_GRPC_URL", "http://plain:1")]))
            .unwrap_err()
            .to_string();
        assert!(refused.contains("SASHA_DATA_GRPC_URL"), "{refused}");
        // With leases each app's worker is asked of studio-core; the one
        // worker's URL is not read.
        let leased = Config::from_env(&env(&[
            ("SASHA_DATA_PLACEMENT", "leases"),
            ("SASHA_DATA_GRPC_URL", "http://plain:1"),
        ]))
        .unwrap();
        assert_eq!(leased.placement, Layout::Leases);
        let refused = Config::from_env(&env(&[("SASHA_DATA_PLACEMENT", "several")]))
            .unwrap_err()
            .to_string();
        assert!(refused.contains("SASHA_DATA_PLACEMENT"), "{refused}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_arriving_is_cut_at_its_deadline() {
        let started = tokio::time::Instant::now();
        let deadline = started + BODY_READ_DEADLINE;
        let mut stalled = futures::stream::pending::<Result<axum::body::Bytes, std::io::Error>>();
        let late = next_chunk(&mut stalled, deadline).await.unwrap_err();
        assert_eq!(late.code, ErrorCode::Timeout);
        assert!(late.message.contains("60 seconds"), "{}", late.message);
        assert_eq!(started.elapsed(), BODY_READ_DEADLINE);
        // A body that keeps arriving is read as it comes.
        let mut arriving = futures::stream::iter([1, 2]);
        let deadline = tokio::time::Instant::now() + BODY_READ_DEADLINE;
        assert_eq!(next_chunk(&mut arriving, deadline).await.unwrap(), Some(1));
        assert_eq!(next_chunk(&mut arriving, deadline).await.unwrap(), Some(2));
        assert_eq!(next_chunk(&mut arriving, deadline).await.unwrap(), None);
    }
}
