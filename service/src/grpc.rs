//! Serving and calling gRPC between Sasha processes: always mTLS, always with
//! trace context, always with the closed error envelope.

use std::future::Future;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use crate::Role;
use crate::identity::{Identity, IdentityError};

/// How long a peer may take to finish the TLS handshake before it is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client waits to establish a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Upper bound of one internal call; callers may set a shorter deadline.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a gRPC server stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error("gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// A tonic server builder whose every request runs in a span that continues the
/// caller's trace.
pub fn server_builder() -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .trace_fn(|request| crate::telemetry::span_for_request("gRPC", request))
}

/// Serves `router` on `listener` over mTLS as `role` until `shutdown` is
/// cancelled, then drains. Each accepted TCP connection completes its TLS
/// handshake in its own task; a peer refused by [`Identity::server_config`] is
/// dropped and logged.
///
/// On `shutdown` the listener is closed at once (a new connection is refused,
/// so a client's next call goes to another replica), every open connection is
/// told to stop (HTTP/2 `GOAWAY`), and this returns once the calls already
/// running, server streams included, have finished. Bounding that wait is the
/// process's job (`SASHA_SHUTDOWN_GRACE_SECS`, see [`crate::process`]).
pub async fn serve_mtls(
    router: tonic::transport::server::Router,
    listener: TcpListener,
    identity: &Identity,
    role: Role,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let acceptor = TlsAcceptor::from(identity.server_config(role)?);
    let (sender, receiver) = tokio::sync::mpsc::channel(64);
    let stop_accepting = shutdown.clone();
    let accept_loop = tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                // Dropping the listener here refuses new connections while
                // the server drains the open ones.
                () = stop_accepting.cancelled() => break,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // Replies span several segments; without this, Nagle's algorithm
            // and the peer's delayed ACK hold each multi-segment reply ~40 ms.
            let _ = stream.set_nodelay(true);
            let acceptor = acceptor.clone();
            let sender = sender.clone();
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => {
                        let _ = sender.send(Ok::<_, std::io::Error>(tls)).await;
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(%peer, %error, "refused a gRPC connection during the TLS handshake");
                    }
                    Err(_) => tracing::warn!(%peer, "TLS handshake timed out"),
                }
            });
        }
    });
    let incoming = tokio_stream::wrappers::ReceiverStream::new(receiver);
    let result = router
        .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
        .await;
    accept_loop.abort();
    result.map_err(ServeError::from)
}

/// Adds the caller's trace context to every outgoing call.
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceContextInterceptor;

impl tonic::service::Interceptor for TraceContextInterceptor {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        crate::telemetry::inject_current_context(request.metadata_mut());
        Ok(request)
    }
}

/// A channel to another process with trace propagation attached.
pub type TracedChannel = InterceptedService<Channel, TraceContextInterceptor>;

/// Why a client could not be set up (a configuration problem, caught at boot).
#[derive(Debug, thiserror::Error)]
#[error("invalid gRPC address {url:?}: {reason}")]
pub struct ConnectError {
    url: String,
    reason: String,
}

/// A lazily connecting mTLS channel to `server` at `url` (`https://host:port`).
/// Connection failures surface per call as `APP_NOT_READY` via
/// [`sasha_proto::AppError::from_status`].
pub fn channel(
    url: &str,
    identity: &Identity,
    server: Role,
) -> Result<TracedChannel, ConnectError> {
    let error = |reason: String| ConnectError {
        url: url.to_owned(),
        reason,
    };
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| error(e.to_string()))?
        .tls_config(identity.client_tls(server))
        .map_err(|e| error(e.to_string()))?
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(CALL_TIMEOUT)
        .tcp_nodelay(true);
    Ok(InterceptedService::new(
        endpoint.connect_lazy(),
        TraceContextInterceptor,
    ))
}

/// A channel to the replicas of `server` at `urls`: one URL is
/// [`channel`]; several are balanced (tonic's power-of-two-choices over
/// the endpoints that are connected), so a call goes to a replica that
/// answers while another is down or restarting.
pub fn balanced_channel(
    urls: &[String],
    identity: &Identity,
    server: Role,
) -> Result<TracedChannel, ConnectError> {
    if let [url] = urls {
        return channel(url, identity, server);
    }
    let endpoints = urls
        .iter()
        .map(|url| {
            let error = |reason: String| ConnectError {
                url: url.clone(),
                reason,
            };
            Ok(Endpoint::from_shared(url.clone())
                .map_err(|e| error(e.to_string()))?
                .tls_config(identity.client_tls(server))
                .map_err(|e| error(e.to_string()))?
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(CALL_TIMEOUT)
                .tcp_nodelay(true))
        })
        .collect::<Result<Vec<_>, ConnectError>>()?;
    Ok(InterceptedService::new(
        Channel::balance_list(endpoints.into_iter()),
        TraceContextInterceptor,
    ))
}

/// Client for studio-core's `CoreService`.
pub type CoreClient = sasha_proto::pb::core_service_client::CoreServiceClient<TracedChannel>;
/// Client for data-worker's `DataService`.
pub type DataClient = sasha_proto::pb::data_service_client::DataServiceClient<TracedChannel>;

/// Connects a `CoreService` client.
pub fn core_client(url: &str, identity: &Identity) -> Result<CoreClient, ConnectError> {
    Ok(CoreClient::new(channel(url, identity, Role::StudioCore)?))
}

/// Connects a `CoreService` client to one or more studio-core replicas.
pub fn core_replicas_client(
    urls: &[String],
    identity: &Identity,
) -> Result<CoreClient, ConnectError> {
    Ok(CoreClient::new(balanced_channel(
        urls,
        identity,
        Role::StudioCore,
    )?))
}

/// Client for studio-core's `PlacementService` (a data-worker renewing its
/// lease).
pub type PlacementClient =
    sasha_proto::pb::placement_service_client::PlacementServiceClient<TracedChannel>;

/// Connects a `PlacementService` client to one or more studio-core replicas.
pub fn placement_client(
    urls: &[String],
    identity: &Identity,
) -> Result<PlacementClient, ConnectError> {
    Ok(PlacementClient::new(balanced_channel(
        urls,
        identity,
        Role::StudioCore,
    )?))
}

/// Connects a `DataService` client.
pub fn data_client(url: &str, identity: &Identity) -> Result<DataClient, ConnectError> {
    Ok(DataClient::new(channel(url, identity, Role::DataWorker)?))
}

/// [`within`] for a read a replica of `role` answers as well as another:
/// a call that failed because its replica could not be reached (one killed
/// mid-call answers `APP_NOT_READY`) is made once more within what is left
/// of `deadline`, which a balanced channel sends to a replica that answers.
/// Only for calls that change nothing.
pub async fn within_read<T, Fut>(
    role: Role,
    deadline: Duration,
    after: &str,
    mut call: impl FnMut() -> Fut,
) -> Result<T, sasha_proto::AppError>
where
    Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let started = std::time::Instant::now();
    match within(role, deadline, after, call()).await {
        Err(error) if error.code == sasha_proto::ErrorCode::NotReady => {
            let left = deadline.saturating_sub(started.elapsed());
            within(role, left, after, call()).await
        }
        answer => answer,
    }
}

/// Runs `call` to `role` and gives its answer, or `APP_TIMEOUT` (retryable)
/// naming `role` once `deadline` has passed: for calls a person is waiting
/// on (authentication, the catalogue, a data operation), where the channel's
/// own bound ([`CALL_TIMEOUT`], for every call) is far too long. A role that
/// is stopped or stalled then costs the caller `deadline`, not half a minute.
/// `after` is what the caller should know about the call it gave up on (a
/// write may still be applied).
pub async fn within<T>(
    role: Role,
    deadline: Duration,
    after: &str,
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, sasha_proto::AppError> {
    match tokio::time::timeout(deadline, call).await {
        Ok(Ok(reply)) => Ok(reply.into_inner()),
        Ok(Err(status)) => Err(sasha_proto::AppError::from_status(&status)),
        Err(_) => Err(sasha_proto::AppError::new(
            sasha_proto::ErrorCode::Timeout,
            format!(
                "{} did not answer within {} s; {after}",
                role.as_str(),
                deadline.as_secs()
            ),
        )),
    }
}

/// Asks `role`'s health through `call`, turning any failure into a dependency
/// entry with a safe detail.
pub async fn dependency_health<F>(role: Role, call: F) -> sasha_proto::pb::DependencyHealth
where
    F: Future<Output = Result<tonic::Response<sasha_proto::pb::HealthReply>, tonic::Status>>,
{
    match tokio::time::timeout(Duration::from_secs(5), call).await {
        Ok(Ok(reply)) => sasha_proto::pb::DependencyHealth {
            role: role.as_str().to_owned(),
            ok: reply.get_ref().ok,
            detail: String::new(),
        },
        Ok(Err(status)) => {
            let error = sasha_proto::AppError::from_status(&status);
            sasha_proto::pb::DependencyHealth {
                role: role.as_str().to_owned(),
                ok: false,
                detail: format!("{} ({})", error.message, error.code),
            }
        }
        Err(_) => sasha_proto::pb::DependencyHealth {
            role: role.as_str().to_owned(),
            ok: false,
            detail: "health check timed out".to_owned(),
        },
    }
}

/// Shared so every server's health answer has one shape.
pub fn health_reply(
    role: Role,
    dependencies: Vec<sasha_proto::pb::DependencyHealth>,
) -> sasha_proto::pb::HealthReply {
    sasha_proto::pb::HealthReply {
        role: role.as_str().to_owned(),
        version: crate::VERSION.to_owned(),
        ok: dependencies.iter().all(|dependency| dependency.ok),
        dependencies,
        replication: None,
    }
}

/// A role's replication state as `/healthz` shows it.
pub fn replication_json(replication: &sasha_proto::pb::ReplicationHealth) -> serde_json::Value {
    let databases: Vec<_> = replication
        .databases
        .iter()
        .map(|database| {
            serde_json::json!({
                "database": database.database,
                "generation": database.generation,
                "txid": database.txid,
                "replicatedTxid": database.replicated_txid,
                "lastReplicatedAt": (!database.last_replicated_at.is_empty())
                    .then_some(&database.last_replicated_at),
                "lagSeconds": database.lag_seconds,
                "error": (!database.error.is_empty()).then_some(&database.error),
            })
        })
        .collect();
    serde_json::json!({
        "mode": replication.mode,
        "ok": replication.ok,
        "databasesTotal": replication.databases_total,
        "databases": databases,
    })
}

/// Renders a health reply as JSON: 200 when everything is up, 503 otherwise.
pub fn health_http_response(reply: &sasha_proto::pb::HealthReply) -> axum::response::Response {
    health_http_response_with(reply, serde_json::Map::new())
}

/// [`health_http_response`] with extra top-level fields a role reports about
/// itself.
pub fn health_http_response_with(
    reply: &sasha_proto::pb::HealthReply,
    extra: serde_json::Map<String, serde_json::Value>,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let status = if reply.ok {
        http::StatusCode::OK
    } else {
        http::StatusCode::SERVICE_UNAVAILABLE
    };
    let dependencies: Vec<_> = reply
        .dependencies
        .iter()
        .map(|dependency| {
            serde_json::json!({"role": dependency.role, "ok": dependency.ok, "detail": dependency.detail})
        })
        .collect();
    let mut body = serde_json::json!({
        "role": reply.role,
        "version": reply.version,
        "ok": reply.ok,
        "dependencies": dependencies,
    });
    if let Some(object) = body.as_object_mut() {
        object.extend(extra);
    }
    (status, axum::Json(body)).into_response()
}

/// The status every not-yet-implemented RPC answers with.
pub fn not_ready(rpc: &str) -> tonic::Status {
    sasha_proto::AppError::new(
        sasha_proto::ErrorCode::NotReady,
        format!("{rpc} is not available in this build yet"),
    )
    .to_status()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A read whose replica could not be reached is made once more (and
    /// only once); any other answer is the caller's at once.
    #[tokio::test]
    async fn a_read_is_made_once_more_only_when_its_replica_was_unreachable() {
        let calls = AtomicUsize::new(0);
        let answered = within_read(Role::StudioCore, Duration::from_secs(5), "", || {
            let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                if first {
                    Err(tonic::Status::unavailable("connection refused"))
                } else {
                    Ok(tonic::Response::new(7_u8))
                }
            }
        })
        .await;
        assert_eq!(answered.unwrap(), 7);
        assert_eq!(calls.load(Ordering::SeqCst), 2);

        let calls = AtomicUsize::new(0);
        let unreachable = within_read(Role::StudioCore, Duration::from_secs(5), "", || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err::<tonic::Response<u8>, _>(tonic::Status::unavailable("down")) }
        })
        .await
        .unwrap_err();
        assert_eq!(unreachable.code, sasha_proto::ErrorCode::NotReady);
        assert_eq!(calls.load(Ordering::SeqCst), 2, "once more, not again");

        let calls = AtomicUsize::new(0);
        let refused = within_read(Role::StudioCore, Duration::from_secs(5), "", || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err::<tonic::Response<u8>, _>(tonic::Status::permission_denied("no")) }
        })
        .await
        .unwrap_err();
        assert_ne!(refused.code, sasha_proto::ErrorCode::NotReady);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "a refusal is not repeated");
    }
}
