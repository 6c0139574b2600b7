//! The development ingress of `sasha up`: one port that routes exactly like the
//! production reverse proxy.
//!
//! - Host = the sandbox origin → edge-sandbox (every path; the edge decides).
//! - Host = the Studio origin: `/healthz` → the ingress's own report of every
//!   role; `/mcp` and below, and the MCP resource's OAuth metadata
//!   (`/.well-known/oauth-protected-resource` and below, RFC 9728) →
//!   mcp-gateway; everything else → studio-core (including the authorization
//!   server's `/.well-known/oauth-authorization-server`).
//! - Any other Host → 421 Misdirected Request.
//!
//! Like the production proxy it preserves Host, and replaces the forwarding
//! headers a client may have sent with its own.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, Uri, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use sasha_proto::{AppError, ErrorCode};
use sasha_service::config::Origins;
use tokio::net::TcpListener;

type Body = BoxBody<Bytes, hyper::Error>;

/// Where each routed role listens.
#[derive(Debug)]
pub(crate) struct Backends {
    pub(crate) edge: SocketAddr,
    pub(crate) core: Replicas,
    pub(crate) gateway: SocketAddr,
}

/// A role's replicas (`sasha up --core-replicas`): requests go round-robin,
/// skipping for a moment one that refused a connection, as the production
/// proxy's upstream does with `max_fails`.
#[derive(Debug)]
pub(crate) struct Replicas {
    addresses: Vec<SocketAddr>,
    next: std::sync::atomic::AtomicUsize,
    down_until: std::sync::Mutex<Vec<Option<std::time::Instant>>>,
}

/// How long a replica that refused a connection is skipped.
const REPLICA_DOWN_FOR: Duration = Duration::from_secs(2);

impl Replicas {
    pub(crate) fn new(addresses: Vec<SocketAddr>) -> Replicas {
        let down_until = std::sync::Mutex::new(vec![None; addresses.len()]);
        Replicas {
            addresses,
            next: std::sync::atomic::AtomicUsize::new(0),
            down_until,
        }
    }

    /// The next replica not known to be down (any one when all are).
    fn pick(&self) -> SocketAddr {
        let start = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = std::time::Instant::now();
        let down = self
            .down_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (0..self.addresses.len())
            .map(|offset| (start + offset) % self.addresses.len())
            .find(|index| down[*index].is_none_or(|until| until <= now))
            .map_or(self.addresses[start % self.addresses.len()], |index| {
                self.addresses[index]
            })
    }

    fn refused(&self, address: SocketAddr) {
        if let Some(index) = self.addresses.iter().position(|a| *a == address) {
            self.down_until
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)[index] =
                Some(std::time::Instant::now() + REPLICA_DOWN_FOR);
        }
    }
}

/// Binds the ingress on 127.0.0.1 and, when the machine has IPv6 loopback, on
/// [::1] too (browsers may resolve `localhost` to either).
pub(crate) async fn bind(port: u16) -> anyhow::Result<Vec<TcpListener>> {
    let v4 = TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| {
            format!("cannot listen on 127.0.0.1:{port} (use --port to pick another)")
        })?;
    let mut listeners = vec![v4];
    if let Ok(v6) = TcpListener::bind(("::1", port)).await {
        listeners.push(v6);
    }
    Ok(listeners)
}

struct Ingress {
    origins: Origins,
    backends: Backends,
    client: Client<HttpConnector, Incoming>,
    probe: Client<HttpConnector, Full<Bytes>>,
}

/// Serves the ingress on every listener until the task is dropped.
pub(crate) async fn serve(
    listeners: Vec<TcpListener>,
    origins: Origins,
    backends: Backends,
) -> anyhow::Result<()> {
    let ingress = Arc::new(Ingress {
        origins,
        backends,
        client: Client::builder(TokioExecutor::new()).build_http(),
        probe: Client::builder(TokioExecutor::new()).build_http(),
    });
    let mut tasks = tokio::task::JoinSet::new();
    for listener in listeners {
        tasks.spawn(accept_loop(listener, ingress.clone()));
    }
    match tasks.join_next().await {
        Some(Ok(result)) => result,
        Some(Err(error)) => Err(error.into()),
        None => Ok(()),
    }
}

async fn accept_loop(listener: TcpListener, ingress: Arc<Ingress>) -> anyhow::Result<()> {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "ingress accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let ingress = ingress.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let ingress = ingress.clone();
                async move { Ok::<_, Infallible>(route(&ingress, peer, request).await) }
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Which backend a request goes to.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Edge,
    Core,
    Gateway,
    Health,
    Misdirected,
}

fn choose(origins: &Origins, host: Option<&str>, path: &str) -> Route {
    let Some(host) = host else {
        return Route::Misdirected;
    };
    if origins.sandbox.matches_authority(host) {
        Route::Edge
    } else if origins.studio.matches_authority(host) {
        if path == "/healthz" {
            Route::Health
        } else if is_gateway_path(path) {
            Route::Gateway
        } else {
            Route::Core
        }
    } else {
        Route::Misdirected
    }
}

/// The Studio host's paths that mcp-gateway serves: `/mcp` and the RFC 9728
/// protected resource metadata, each with everything below it (whole path
/// segments: `/mcpx` is not one of them).
const GATEWAY_PATHS: [&str; 2] = ["/mcp", "/.well-known/oauth-protected-resource"];

fn is_gateway_path(path: &str) -> bool {
    GATEWAY_PATHS.iter().any(|prefix| {
        path.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// The one Host of a request: its `Host` header, or the authority of an
/// HTTP/2 or absolute-form request. Two Host headers, or a header that
/// disagrees with the authority, name no host.
fn request_host(request: &Request<Incoming>) -> Option<String> {
    let mut headers = request.headers().get_all(header::HOST).iter();
    let header = match (headers.next(), headers.next()) {
        (Some(value), None) => Some(value.to_str().ok()?.to_owned()),
        (None, None) => None,
        _ => return None,
    };
    let authority = request.uri().authority().map(|a| a.as_str().to_owned());
    match (header, authority) {
        (Some(header), Some(authority)) if !header.eq_ignore_ascii_case(&authority) => None,
        (Some(header), _) => Some(header),
        (None, authority) => authority,
    }
}

async fn route(ingress: &Ingress, peer: SocketAddr, request: Request<Incoming>) -> Response<Body> {
    let host = request_host(&request);
    match choose(&ingress.origins, host.as_deref(), request.uri().path()) {
        Route::Edge => forward(ingress, ingress.backends.edge, peer, host, request).await,
        Route::Core => {
            let replica = ingress.backends.core.pick();
            let (response, refused) = forward_to(ingress, replica, peer, host, request).await;
            if refused {
                ingress.backends.core.refused(replica);
            }
            response
        }
        Route::Gateway => forward(ingress, ingress.backends.gateway, peer, host, request).await,
        Route::Health => health(ingress).await,
        Route::Misdirected => {
            let mut response = Response::new(full(
                "misdirected request: this ingress serves only the Studio and sandbox hosts\n",
            ));
            *response.status_mut() = StatusCode::MISDIRECTED_REQUEST;
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            response
        }
    }
}

/// Headers that describe one connection, not the request, and never pass a proxy.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Forwarding headers a client might forge; the ingress sets its own instead.
const UNTRUSTED_FORWARDING: [&str; 6] = [
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
    "x-original-url",
];

async fn forward(
    ingress: &Ingress,
    backend: SocketAddr,
    peer: SocketAddr,
    host: Option<String>,
    request: Request<Incoming>,
) -> Response<Body> {
    forward_to(ingress, backend, peer, host, request).await.0
}

/// [`forward`], also telling whether the backend refused the connection.
async fn forward_to(
    ingress: &Ingress,
    backend: SocketAddr,
    peer: SocketAddr,
    host: Option<String>,
    request: Request<Incoming>,
) -> (Response<Body>, bool) {
    let (mut parts, body) = request.into_parts();
    let path_and_query = parts
        .uri
        .path_and_query()
        .map(|pq| pq.as_str().to_owned())
        .unwrap_or_else(|| "/".to_owned());
    let Ok(uri) = format!("http://{backend}{path_and_query}").parse::<Uri>() else {
        let refused = AppError::new(ErrorCode::InputInvalid, "the request target is invalid");
        return (error_response(refused), false);
    };
    parts.uri = uri;
    parts.version = http::Version::HTTP_11;
    for name in HOP_BY_HOP.iter().chain(UNTRUSTED_FORWARDING.iter()) {
        parts.headers.remove(*name);
    }
    if let Some(host) = host.and_then(|host| HeaderValue::from_str(&host).ok()) {
        parts.headers.insert(header::HOST, host.clone());
        parts.headers.insert("x-forwarded-host", host);
    }
    if let Ok(value) = HeaderValue::from_str(&peer.ip().to_string()) {
        parts.headers.insert("x-forwarded-for", value);
    }
    parts
        .headers
        .insert("x-forwarded-proto", HeaderValue::from_static("http"));
    match ingress
        .client
        .request(Request::from_parts(parts, body))
        .await
    {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            for name in HOP_BY_HOP {
                parts.headers.remove(name);
            }
            (Response::from_parts(parts, body.boxed()), false)
        }
        Err(error) => {
            let app_error = AppError::new(
                ErrorCode::NotReady,
                "the service behind this route is not reachable",
            );
            tracing::warn!(%backend, %error, diagnostic_id = %app_error.diagnostic_id, "ingress could not reach a backend");
            (error_response(app_error), error.is_connect())
        }
    }
}

/// Whether the data plane serves, as studio-core's deep health (or else the
/// gateway's) reports it: with one data-worker, its `data-worker`
/// dependency; with several holding leases, its `data-workers` one (some
/// worker holds a live lease), since no one worker speaks for them.
fn data_plane_ok(core: Option<&serde_json::Value>, gateway: Option<&serde_json::Value>) -> bool {
    let dependency = |report: Option<&serde_json::Value>, role: &str| {
        report.and_then(|report| {
            report["dependencies"]
                .as_array()?
                .iter()
                .find(|d| d["role"] == role)
                .and_then(|d| d["ok"].as_bool())
        })
    };
    dependency(core, "data-worker")
        .or_else(|| dependency(core, "data-workers"))
        .or_else(|| dependency(gateway, "data-worker"))
        .unwrap_or(false)
}

/// `GET /healthz`: every role's state, probed through its own public surface.
async fn health(ingress: &Ingress) -> Response<Body> {
    let edge_host = ingress
        .origins
        .sandbox
        .as_str()
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .to_owned();
    let studio_host = ingress
        .origins
        .studio
        .as_str()
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .to_owned();
    let (edge, core, gateway) = tokio::join!(
        probe(ingress, ingress.backends.edge, &edge_host, "/app-sandbox"),
        probe(
            ingress,
            ingress.backends.core.pick(),
            &studio_host,
            "/healthz"
        ),
        probe(ingress, ingress.backends.gateway, &studio_host, "/healthz"),
    );
    let role_ok = |report: &Option<serde_json::Value>| {
        report
            .as_ref()
            .is_some_and(|report| report["role"].is_string())
    };
    let data_ok = data_plane_ok(core.1.as_ref(), gateway.1.as_ref());
    let roles = serde_json::json!({
        "edge-sandbox": {"ok": edge.0 == Some(StatusCode::OK)},
        "studio-core": {"ok": role_ok(&core.1)},
        "data-worker": {"ok": data_ok},
        "mcp-gateway": {"ok": gateway.0 == Some(StatusCode::OK)},
    });
    let all_ok = roles
        .as_object()
        .is_some_and(|roles| roles.values().all(|role| role["ok"] == true));
    let mut body =
        serde_json::json!({"ok": all_ok, "version": sasha_service::VERSION, "roles": roles});
    // Every role's replication as studio-core reports it, when on.
    if let Some(replication) = core
        .1
        .as_ref()
        .map(|report| &report["replication"])
        .filter(|replication| replication.is_object())
    {
        body["replication"] = replication.clone();
    }
    let mut response = Response::new(full(body.to_string()));
    *response.status_mut() = if all_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// One GET with a deadline: the status and, for a JSON answer, its body.
async fn probe(
    ingress: &Ingress,
    backend: SocketAddr,
    host: &str,
    path: &str,
) -> (Option<StatusCode>, Option<serde_json::Value>) {
    let Ok(request) = Request::get(format!("http://{backend}{path}"))
        .header(header::HOST, host)
        .body(Full::new(Bytes::new()))
    else {
        return (None, None);
    };
    let answer = tokio::time::timeout(Duration::from_secs(5), async {
        let response = ingress.probe.request(request).await.ok()?;
        let status = response.status();
        let body = response.into_body().collect().await.ok()?.to_bytes();
        Some((status, serde_json::from_slice(&body).ok()))
    })
    .await;
    match answer {
        Ok(Some((status, json))) => (Some(status), json),
        _ => (None, None),
    }
}

fn full(text: impl Into<Bytes>) -> Body {
    Full::new(text.into())
        .map_err(|never| match never {})
        .boxed()
}

fn error_response(error: AppError) -> Response<Body> {
    let mut response = Response::new(full(error.to_json().to_string()));
    *response.status_mut() = error.code.http_status();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_plane_is_read_from_core_with_one_worker_or_several() {
        use serde_json::json;
        let report = |role: &str, ok: bool| json!({"dependencies": [{"role": role, "ok": ok}]});
        let one = report("data-worker", true);
        assert!(data_plane_ok(Some(&one), None));
        assert!(!data_plane_ok(Some(&report("data-worker", false)), None));
        // With leases core reports whether any worker holds a lease, and
        // the gateway asks no worker.
        let leased = report("data-workers", true);
        let gateway = json!({"dependencies": [{"role": "studio-core", "ok": true}]});
        assert!(data_plane_ok(Some(&leased), Some(&gateway)));
        assert!(!data_plane_ok(
            Some(&report("data-workers", false)),
            Some(&gateway)
        ));
        // Core unreachable: the gateway's own probe of its one worker.
        assert!(data_plane_ok(None, Some(&report("data-worker", true))));
        assert!(!data_plane_ok(None, Some(&gateway)));
    }

    #[test]
    fn routes_like_the_production_proxy() {
        let origins = Origins::from_env(&std::collections::HashMap::new()).unwrap();
        let check = |host: Option<&str>, path: &str, expected: Route| {
            assert_eq!(choose(&origins, host, path), expected, "{host:?} {path}");
        };
        check(Some("127.0.0.1:3007"), "/app-sandbox", Route::Edge);
        check(Some("127.0.0.1:3007"), "/api/apps", Route::Edge);
        check(Some("127.0.0.1:3007"), "/mcp", Route::Edge);
        check(Some("127.0.0.1:3007"), "/healthz", Route::Edge);
        check(Some("localhost:3007"), "/mcp", Route::Gateway);
        check(Some("localhost:3007"), "/mcp/x", Route::Gateway);
        check(Some("localhost:3007"), "/mcpx", Route::Core);
        check(Some("localhost:3007"), "/healthz", Route::Health);
        // RFC 9728: the MCP resource's metadata comes from the gateway; the
        // authorization server's (RFC 8414) from studio-core.
        for path in [
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/",
            "/.well-known/oauth-protected-resource/mcp",
        ] {
            check(Some("localhost:3007"), path, Route::Gateway);
            check(Some("127.0.0.1:3007"), path, Route::Edge);
        }
        for path in [
            "/.well-known/oauth-protected-resourcex",
            "/.well-known/oauth-protected-resource.json",
            "/.well-known/oauth-protected",
            "/.well-known/oauth-authorization-server",
            "/.well-known/oauth-authorization-server/mcp",
            "/.well-known/openid-configuration",
            "/.well-known/",
            "/oauth/authorize",
            "/oauth/token",
            "/mcp-x",
            "/api/mcp",
        ] {
            check(Some("localhost:3007"), path, Route::Core);
        }
        check(
            Some("127.0.0.1:3007"),
            "/.well-known/oauth-authorization-server",
            Route::Edge,
        );
        check(Some("localhost:3007"), "/api/apps", Route::Core);
        check(Some("localhost:3007"), "/app-sandbox", Route::Core);
        check(Some("evil.test"), "/", Route::Misdirected);
        check(Some("localhost:3008"), "/", Route::Misdirected);
        check(None, "/", Route::Misdirected);
    }
}
