//! The probe listener every role may open for container orchestrators and load
//! balancers (`SASHA_HEALTH_ADDR`): `GET /livez` and `GET /readyz` on a port
//! of their own, so no public surface changes shape (edge-sandbox's stays 404
//! for everything but the sandbox page and its script).
//!
//! - `/livez` is 200 `{"ok":true,"role":…,"version":…}` for as long as the
//!   process runs, draining included: a probe that fails it gets the process
//!   restarted, and a draining process must be left to finish.
//! - `/readyz` is 200 when the role can serve (the check the role hands to
//!   [`Probes::ready_when`]), and 503 with the same JSON shape while it starts,
//!   when a check fails, and from the moment shutdown begins, so a load
//!   balancer stops sending traffic to a process that is draining.
//!
//! Everything else on the listener, any other method included, is the hidden
//! 404. The listener stays open until the role's `run` returns, so probes see
//! the drain rather than a refused connection.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use axum::extract::{Request, State};
use axum::response::{IntoResponse as _, Response};
use http::{HeaderValue, Method, header};
use tokio::net::TcpListener;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::Role;
use crate::config::{self, ConfigError, Env};
use crate::process::{RoleError, bind};
use sasha_proto::pb::{DependencyHealth, HealthReply};

/// The variable naming the probe listener's address; unset means no listener.
pub const HEALTH_ADDR: &str = "SASHA_HEALTH_ADDR";

/// `SASHA_HEALTH_ADDR`, e.g. `0.0.0.0:9090`; `None` when unset (as under
/// `sasha up`).
pub fn health_addr(env: &dyn Env) -> Result<Option<SocketAddr>, ConfigError> {
    config::optional_socket_addr(env, HEALTH_ADDR)
}

/// Binds the probe listener when an address is configured.
pub async fn bind_health(addr: Option<SocketAddr>) -> Result<Option<TcpListener>, RoleError> {
    match addr {
        Some(addr) => Ok(Some(bind(HEALTH_ADDR, addr).await?)),
        None => Ok(None),
    }
}

/// The answer of one readiness check.
pub type ReadinessFuture = Pin<Box<dyn Future<Output = HealthReply> + Send>>;

/// How a role decides whether it can serve now: its own `health(deep)` logic,
/// returning a [`HealthReply`] whose `ok` is the verdict.
type ReadinessCheck = Arc<dyn Fn() -> ReadinessFuture + Send + Sync>;

struct ProbeState {
    role: Role,
    /// The process's shutdown token: once cancelled the role is draining and
    /// `/readyz` answers 503 without asking the check.
    draining: CancellationToken,
    /// Set once the role has everything it needs to answer requests; until
    /// then `/readyz` says "starting".
    check: OnceLock<ReadinessCheck>,
}

/// A role's probe endpoints. Serving stops when this is dropped (at the end of
/// the role's `run`, after the drain).
pub struct Probes {
    state: Arc<ProbeState>,
    addr: Option<SocketAddr>,
    /// Cancels the listener's task when the role's `run` returns.
    _stop: DropGuard,
}

impl std::fmt::Debug for Probes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probes")
            .field("role", &self.state.role)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Probes {
    /// Starts answering probes on `listener` (nothing when `None`) for `role`.
    /// `draining` is the role's shutdown token. Must be called inside a Tokio
    /// runtime.
    pub fn start(listener: Option<TcpListener>, role: Role, draining: CancellationToken) -> Probes {
        let state = Arc::new(ProbeState {
            role,
            draining,
            check: OnceLock::new(),
        });
        let stop = CancellationToken::new();
        let addr = listener
            .as_ref()
            .and_then(|listener| listener.local_addr().ok());
        if let Some(listener) = listener {
            let app = axum::Router::new()
                .fallback(probe)
                .with_state(state.clone());
            let stopped = stop.clone();
            tokio::spawn(async move {
                if let Err(error) = crate::web::serve_http(listener, app, stopped).await {
                    tracing::error!(%error, "the probe listener failed");
                }
            });
        }
        Probes {
            state,
            addr,
            _stop: stop.drop_guard(),
        }
    }

    /// From now on `/readyz` asks `check` (unless the role is draining).
    /// Later calls are ignored.
    pub fn ready_when<F, Fut>(&self, check: F)
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HealthReply> + Send + 'static,
    {
        let check: ReadinessCheck = Arc::new(move || Box::pin(check()));
        let _ = self.state.check.set(check);
    }

    /// The probe listener's address, for the readiness line.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// The readiness line's listeners with the probe listener added as
    /// `health` when there is one.
    pub fn with_listener<'a>(
        &self,
        listeners: &[(&'a str, SocketAddr)],
    ) -> Vec<(&'a str, SocketAddr)> {
        let mut all = listeners.to_vec();
        if let Some(addr) = self.addr {
            all.push(("health", addr));
        }
        all
    }
}

/// The whole probe surface as one handler, like edge-sandbox's: no router, no
/// 405s.
async fn probe(State(state): State<Arc<ProbeState>>, request: Request) -> Response {
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        return not_found();
    }
    let mut response = match request.uri().path() {
        "/livez" => axum::Json(serde_json::json!({
            "ok": true,
            "role": state.role.as_str(),
            "version": crate::VERSION,
        }))
        .into_response(),
        "/readyz" => readiness(&state).await,
        _ => return not_found(),
    };
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    crate::web::insert_baseline_headers(response.headers_mut());
    response
}

/// `{"role", "version", "ok", "dependencies": [{role, ok, detail}], "draining"}`:
/// 200 when `ok`, 503 otherwise.
async fn readiness(state: &ProbeState) -> Response {
    let reply = if state.draining.is_cancelled() {
        None
    } else {
        match state.check.get() {
            Some(check) => Some(check().await),
            None => Some(crate::grpc::health_reply(
                state.role,
                vec![DependencyHealth {
                    role: state.role.as_str().to_owned(),
                    ok: false,
                    detail: "starting".to_owned(),
                }],
            )),
        }
    };
    // Shutdown may have begun while the check ran.
    let draining = state.draining.is_cancelled();
    let reply = match reply {
        Some(reply) if !draining => reply,
        _ => HealthReply {
            role: state.role.as_str().to_owned(),
            version: crate::VERSION.to_owned(),
            ok: false,
            dependencies: Vec::new(),
            replication: None,
        },
    };
    let mut extra = serde_json::Map::new();
    extra.insert("draining".to_owned(), draining.into());
    crate::grpc::health_http_response_with(&reply, extra)
}

fn not_found() -> Response {
    sasha_proto::AppError::from_code(sasha_proto::ErrorCode::NotFound).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: SocketAddr, method: &str, path: &str) -> (u16, serde_json::Value) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(
                format!("{method} {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).await.unwrap();
        let status = text.split(' ').nth(1).unwrap().parse().unwrap();
        let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        (status, serde_json::from_str(body).unwrap_or_default())
    }

    #[tokio::test]
    async fn probes_follow_the_role_from_start_to_drain() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let shutdown = CancellationToken::new();
        let probes = Probes::start(Some(listener), Role::DataWorker, shutdown.clone());
        let addr = probes.addr().unwrap();

        let (status, body) = get(addr, "GET", "/livez").await;
        assert_eq!((status, &body["role"]), (200, &"data-worker".into()));
        assert_eq!(body["ok"], true);
        let (status, body) = get(addr, "GET", "/readyz").await;
        assert_eq!(status, 503, "not ready before the check is set: {body}");
        assert_eq!(body["dependencies"][0]["detail"], "starting");

        let healthy = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let flag = healthy.clone();
        probes.ready_when(move || {
            let ok = flag.load(std::sync::atomic::Ordering::SeqCst);
            async move {
                crate::grpc::health_reply(
                    Role::DataWorker,
                    vec![DependencyHealth {
                        role: "app-data-root".into(),
                        ok,
                        detail: String::new(),
                    }],
                )
            }
        });
        let (status, body) = get(addr, "GET", "/readyz").await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            (body["ok"].clone(), body["draining"].clone()),
            (true.into(), false.into())
        );
        assert_eq!(get(addr, "HEAD", "/readyz").await.0, 200);
        healthy.store(false, std::sync::atomic::Ordering::SeqCst);
        let (status, body) = get(addr, "GET", "/readyz").await;
        assert_eq!((status, body["ok"].clone()), (503, false.into()));

        for (method, path) in [
            ("GET", "/"),
            ("GET", "/healthz"),
            ("GET", "/livez/"),
            ("POST", "/readyz"),
            ("DELETE", "/livez"),
            ("GET", "/readyz/../livez"),
        ] {
            assert_eq!(get(addr, method, path).await.0, 404, "{method} {path}");
        }

        healthy.store(true, std::sync::atomic::Ordering::SeqCst);
        shutdown.cancel();
        let (status, body) = get(addr, "GET", "/readyz").await;
        assert_eq!(status, 503, "draining: {body}");
        assert_eq!(body["draining"], true);
        assert_eq!(body["role"], "data-worker");
        assert_eq!(
            get(addr, "GET", "/livez").await.0,
            200,
            "alive while draining"
        );

        drop(probes);
        let mut refused = false;
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(addr).await.is_err() {
                refused = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(refused, "the listener closes with the role");
    }

    #[test]
    fn the_address_is_optional_and_checked() {
        let env = |value: &str| {
            std::collections::HashMap::from([(HEALTH_ADDR.to_owned(), value.to_owned())])
        };
        assert_eq!(health_addr(&env("")).unwrap(), None);
        assert_eq!(
            health_addr(&env("0.0.0.0:9090")).unwrap(),
            Some("0.0.0.0:9090".parse().unwrap())
        );
        let error = health_addr(&env("9090")).unwrap_err();
        assert_eq!(error.var, HEALTH_ADDR);
    }
}
