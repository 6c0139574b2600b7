//! edge-sandbox: the sandbox origin.
//!
//! It serves exactly two things, only to requests addressed to the configured
//! sandbox origin: `GET /app-sandbox` (the proxy page) and the proxy script at its
//! one content-hashed path. Every other path, method or Host is 404. It holds no
//! credentials, never sets or reads a cookie, and never emits CORS headers.
//!
//! Paths are compared as raw bytes, before any decoding or normalisation, so
//! `/app-sandbox/`, `/app-sandbox;x`, `/%61pp-sandbox` and traversal variants
//! are simply other paths.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use http::{HeaderValue, Method, StatusCode, header};
use sasha_contract::html::escape_attribute;
use sasha_proto::{AppError, ErrorCode};
use sasha_service::Role;
use sasha_service::config::{self, ConfigError, Env, Origins};
use sasha_service::health;
use sasha_service::process::{RoleError, announce_ready, bind};
use sha2::Digest as _;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The proxy script, embedded in the binary.
const PROXY_SCRIPT: &str = include_str!("../assets/proxy.js");

/// The one page path the sandbox serves.
pub const PAGE_PATH: &str = "/app-sandbox";

/// edge-sandbox's configuration, read once at boot.
#[derive(Debug, Clone)]
pub struct Config {
    /// `SASHA_EDGE_ADDR`: where the HTTP server listens (default `127.0.0.1:3010`).
    pub addr: SocketAddr,
    /// `SASHA_PUBLIC_ORIGIN` (the only allowed framer) and
    /// `SASHA_APP_SANDBOX_ORIGIN` (the only Host served).
    pub origins: Origins,
    /// `SASHA_HEALTH_ADDR`: the probe listener (`/livez`, `/readyz`) on a port
    /// of its own, so the sandbox surface stays 404 for everything else;
    /// `None` when unset.
    pub health_addr: Option<SocketAddr>,
}

impl Config {
    pub fn from_env(env: &dyn Env) -> Result<Config, ConfigError> {
        Ok(Config {
            addr: config::socket_addr(env, "SASHA_EDGE_ADDR", "127.0.0.1:3010")?,
            origins: Origins::from_env(env)?,
            health_addr: health::health_addr(env)?,
        })
    }
}

/// The already-bound listener edge-sandbox serves on.
#[derive(Debug)]
pub struct Listeners {
    pub http: TcpListener,
    /// The probe listener, when `SASHA_HEALTH_ADDR` is set.
    pub health: Option<TcpListener>,
}

/// The proxy script's content address: its path and its CSP/SRI hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyScript {
    /// `/app-sandbox/proxy-<first 16 hex digits of sha256>.js`.
    pub path: String,
    /// `sha256-<base64>`, the page's `integrity` attribute (SRI).
    pub integrity: String,
}

impl ProxyScript {
    /// The address of the embedded script.
    pub fn embedded() -> ProxyScript {
        let digest = sha2::Sha256::digest(PROXY_SCRIPT.as_bytes());
        ProxyScript {
            path: format!("{PAGE_PATH}/proxy-{}.js", &hex::encode(digest)[..16]),
            integrity: format!(
                "sha256-{}",
                base64::engine::general_purpose::STANDARD.encode(digest)
            ),
        }
    }
}

/// Everything a response needs, computed once at start.
#[derive(Debug)]
struct Edge {
    origins: Origins,
    script: ProxyScript,
    page: String,
    csp: HeaderValue,
}

impl Edge {
    fn new(origins: Origins) -> Result<Edge, RoleError> {
        let script = ProxyScript::embedded();
        let page = proxy_page(&origins, &script);
        let csp = content_security_policy(&origins, &script);
        let csp = HeaderValue::from_str(&csp)
            .map_err(|_| RoleError::Startup("the sandbox CSP is not a valid header".into()))?;
        Ok(Edge {
            origins,
            script,
            page,
            csp,
        })
    }
}

/// The proxy page. The Studio origin rides in a `<meta>` so the static,
/// content-hashed script needs no configuration of its own; the script comes
/// last in the body, so the page is parsed when it runs.
fn proxy_page(origins: &Origins, script: &ProxyScript) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"sasha-studio-origin\" content=\"{studio}\"><title>Sasha app sandbox</title>\
         <style>html,body{{margin:0;height:100%;overflow:hidden}}\
         iframe{{display:block;border:0;width:100%;height:100%}}</style></head>\
         <body><script src=\"{path}\" integrity=\"{integrity}\"></script></body></html>\n",
        studio = escape_attribute(&origins.studio.to_string()),
        path = script.path,
        integrity = script.integrity,
    )
}

/// The policy of every sandbox response. It starts at `default-src 'none'`,
/// allows the one proxy script by exact URL (the page's `<script>` also carries
/// its SRI hash), lets the proxy create only `data:` frames, forbids network,
/// forms, `<base>` and plugins, and lets only the Studio origin frame the page.
///
/// Chromium copies this policy into the app's `data:` document, where the
/// resource's own `<meta>` policy of exact script and style hashes also applies;
/// both must allow a script for it to run. So this outer policy is the ceiling a
/// data document needs: `'unsafe-inline'` for scripts and styles (a hash source
/// here would make browsers ignore `'unsafe-inline'` and block the app's hashed
/// scripts) and `data:` images, fonts and media; it never has `'unsafe-eval'`,
/// a network source or a host besides the proxy script's URL.
///
/// It has no `webrtc 'block'`: Blink does not know the directive and logs an
/// error for every policy that has it (this one, and each copy in the app's
/// document); the app's own policy carries it for the browsers that may
/// enforce it, and the proxy leaves it out of what such a Blink parses.
pub fn content_security_policy(origins: &Origins, script: &ProxyScript) -> String {
    format!(
        "default-src 'none'; script-src {sandbox}{path} 'unsafe-inline'; \
         style-src 'unsafe-inline'; img-src data:; font-src data:; media-src data:; \
         connect-src 'none'; frame-src data:; base-uri 'none'; form-action 'none'; \
         object-src 'none'; frame-ancestors {studio}",
        sandbox = origins.sandbox,
        path = script.path,
        studio = origins.studio,
    )
}

/// Loads the configuration, binds, announces readiness and serves until
/// `shutdown` is cancelled.
pub async fn serve_from_env(env: impl Env, shutdown: CancellationToken) -> Result<(), RoleError> {
    let config = Config::from_env(&env)?;
    let http = bind("SASHA_EDGE_ADDR", config.addr).await?;
    let health = health::bind_health(config.health_addr).await?;
    run(config, Listeners { http, health }, shutdown).await
}

/// Serves the sandbox origin on `listeners` until `shutdown` is cancelled.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: CancellationToken,
) -> Result<(), RoleError> {
    let addr = listeners
        .http
        .local_addr()
        .map_err(|e| RoleError::Startup(e.to_string()))?;
    let probes = health::Probes::start(listeners.health, Role::EdgeSandbox, shutdown.clone());
    let app = router(config.origins)?;
    // The sandbox has nothing to wait for: once it listens, it can serve.
    probes
        .ready_when(|| async { sasha_service::grpc::health_reply(Role::EdgeSandbox, Vec::new()) });
    announce_ready(Role::EdgeSandbox, &probes.with_listener(&[("http", addr)]));
    sasha_service::web::serve_http(listeners.http, app, shutdown)
        .await
        .map_err(|error| RoleError::Runtime(error.to_string()))
}

/// The whole sandbox surface as one handler: no router, so no path
/// normalisation, no method fallbacks and no 405s that would reveal a route.
pub fn router(origins: Origins) -> Result<axum::Router, RoleError> {
    let edge = Arc::new(Edge::new(origins)?);
    Ok(axum::Router::new().fallback(handle).with_state(edge))
}

async fn handle(State(edge): State<Arc<Edge>>, request: Request) -> Response {
    let mut response = respond(&edge, &request);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, edge.csp.clone());
    sasha_service::web::insert_baseline_headers(headers);
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "permissions-policy",
        HeaderValue::from_static(
            "camera=(), microphone=(), geolocation=(), usb=(), serial=(), hid=(), \
             payment=(), display-capture=(), clipboard-read=(), clipboard-write=()",
        ),
    );
    response
}

fn respond(edge: &Edge, request: &Request) -> Response {
    if !addressed_to_sandbox(edge, request) {
        return not_found();
    }
    let head = request.method() == Method::HEAD;
    if request.method() != Method::GET && !head {
        return not_found();
    }
    let path = request.uri().path();
    let (body, content_type, cache) = if path == PAGE_PATH {
        (edge.page.clone(), "text/html; charset=utf-8", "no-store")
    } else if path == edge.script.path {
        (
            PROXY_SCRIPT.to_owned(),
            "text/javascript; charset=utf-8",
            "public, max-age=31536000, immutable",
        )
    } else {
        return not_found();
    };
    let body = if head {
        Body::empty()
    } else {
        Body::from(body)
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    response
}

/// The request's Host header and, for an absolute-form request line, its
/// authority must both name the sandbox origin.
fn addressed_to_sandbox(edge: &Edge, request: &Request) -> bool {
    let sandbox = &edge.origins.sandbox;
    if let Some(authority) = request.uri().authority()
        && !sandbox.matches_authority(authority.as_str())
    {
        return false;
    }
    let mut hosts = request.headers().get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(host), None) => host
            .to_str()
            .is_ok_and(|host| sandbox.matches_authority(host)),
        // HTTP/2 requests carry the authority in the URI instead of a Host header.
        (None, None) => request.uri().authority().is_some(),
        _ => false,
    }
}

fn not_found() -> Response {
    let mut response = AppError::from_code(ErrorCode::NotFound).into_response();
    response.headers_mut().remove(header::SET_COOKIE);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_path_and_integrity_follow_the_content() {
        let script = ProxyScript::embedded();
        assert!(script.path.starts_with("/app-sandbox/proxy-"));
        assert!(script.path.ends_with(".js"));
        assert_eq!(script.path.len(), "/app-sandbox/proxy-".len() + 16 + 3);
        assert!(script.integrity.starts_with("sha256-"));
    }

    #[test]
    fn policy_is_strict() {
        let origins = Origins::from_env(&std::collections::HashMap::new()).unwrap();
        let csp = content_security_policy(&origins, &ProxyScript::embedded());
        for directive in [
            "default-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
            "object-src 'none'",
            "connect-src 'none'",
            "frame-src data:",
            "frame-ancestors http://localhost:3007",
            "script-src http://127.0.0.1:3007/app-sandbox/proxy-",
        ] {
            assert!(csp.contains(directive), "{directive} missing from {csp}");
        }
        assert!(!csp.contains("unsafe-eval"));
        // Blink logs an unrecognized directive as a console error on every
        // launch; the app's own policy carries it (package::assemble).
        assert!(!csp.contains("webrtc"), "{csp}");
        assert!(!csp.contains('*'));
        // A hash source would make browsers ignore 'unsafe-inline', which the
        // app's data: document inherits as its ceiling.
        assert!(!csp.contains("sha256-"), "{csp}");
    }

    #[test]
    fn page_names_the_studio_origin_and_the_hashed_script() {
        let origins = Origins::from_env(&std::collections::HashMap::new()).unwrap();
        let script = ProxyScript::embedded();
        let page = proxy_page(&origins, &script);
        assert!(
            page.contains("<meta name=\"sasha-studio-origin\" content=\"http://localhost:3007\">")
        );
        assert!(page.contains(&format!(
            "<script src=\"{}\" integrity=\"{}\"></script>",
            script.path, script.integrity
        )));
        assert_eq!(
            escape_attribute("a\"b<c>&"),
            "a&quot;b&lt;c&gt;&amp;".to_owned()
        );
    }
}
