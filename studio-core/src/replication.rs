//! studio-core's replication of the core database to object storage, when
//! `SASHA_REPLICA_URL` is set: the core database is restored from its
//! newest generation before the store opens it if the file is missing, then
//! tracked; and a write is acknowledged only as [`sasha_replica`]'s mode
//! allows.
//!
//! The gate sits where a write is acknowledged, not in each store call: a
//! state-changing request (an HTTP method other than GET, HEAD and OPTIONS;
//! a `CoreService` or `PlacementService` call other than the reads the
//! gateway makes on every request) is admitted first (async mode pauses
//! writes past the lag bound), and when the store committed anything while it ran
//! ([`studio_store::Store::commits`]), its successful answer waits for one
//! sync-and-wait; if object storage does not confirm, the caller gets the
//! retryable `APP_DATABASE_UNAVAILABLE` instead. Reads, and the bookkeeping
//! a read does (a token's last use), are never held back, so sign-ins of
//! existing sessions and every read go on while object storage is away.
//!
//! The documents users upload are rows of the core database, replicated
//! with it. Builds before that mirrored each as an object of its own
//! (`sasha_replica::files`); those a lost volume took are brought back into
//! `UPLOADS_ROOT` at boot ([`restore_missing_uploads`]), from where the boot
//! imports them into the database like any upload folder.
//!
//! What it must never do: turn a refusal into a replication error (only a
//! successful answer is replaced), or hold back a read.

use std::convert::Infallible;
use std::path::{Path, PathBuf};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use http::Method;
use sasha_proto::AppError;
use sasha_replica::{Database, Replicator};
use tonic::codegen::{BoxFuture, Context, Poll, Service};
use tonic::server::NamedService;

use studio_store::Store;

/// The core database's replication.
#[derive(Clone, Debug)]
pub(crate) struct CoreReplication {
    pub(crate) replicator: Replicator,
    store: Store,
    path: PathBuf,
}

impl CoreReplication {
    /// Tracks the core database (the store has it open) and returns the gate.
    pub(crate) async fn track(
        replicator: Replicator,
        store: Store,
        path: &Path,
    ) -> Result<CoreReplication, String> {
        replicator
            .track(&Database::Core, path)
            .await
            .map_err(|error| format!("cannot replicate the core database: {error}"))?;
        Ok(CoreReplication {
            replicator,
            store,
            path: path.to_path_buf(),
        })
    }

    /// Whether a write may begin now.
    fn admit(&self) -> Result<(), AppError> {
        self.replicator
            .admit(&self.path)
            .map_err(|error| error.to_app_error())
    }

    /// Waits until everything committed is confirmed, when anything was
    /// committed since the count was `before`.
    async fn confirm_since(&self, before: u64) -> Result<(), AppError> {
        if self.store.commits() == before {
            return Ok(());
        }
        self.replicator
            .committed(&Database::Core, &self.path)
            .await
            .map_err(|error| error.to_app_error())
    }
}

/// Brings back every uploaded document an earlier build mirrored to object
/// storage that `uploads_root` lacks (a lost or new volume); says how many.
/// Nothing is mirrored any more, so after the first boot there is nothing
/// to bring back.
pub(crate) async fn restore_missing_uploads(
    replicator: &Replicator,
    uploads_root: &Path,
) -> Result<usize, String> {
    let written =
        sasha_replica::files::download_missing(replicator.store(), uploads_root, None).await?;
    if written > 0 {
        tracing::warn!(
            documents = written,
            "replication: missing uploaded documents were restored from object storage"
        );
    }
    Ok(written)
}

/// Whether an HTTP request may change state.
fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The calls the gateway makes to read, on every request: `CoreService`'s,
/// and `PlacementService.Locate`.
const CORE_READS: [&str; 9] = [
    "Health",
    "Authenticate",
    "AuthorizeCall",
    "ListApps",
    "CheckAccess",
    "GetResource",
    "GetCatalogue",
    // A stream: its turns are conversations kept in memory.
    "Chat",
    // It places an app not placed yet; a worker serves that placement only
    // once a renewal grants it, and a renewal (a write) is answered only
    // when everything committed before it is confirmed.
    "Locate",
];

/// Whether a `CoreService` or `PlacementService` call (by its path
/// `/sasha.v1.<Service>/<Method>`) may change state.
fn call_changes_state(path: &str) -> bool {
    let method = path.rsplit('/').next().unwrap_or_default();
    !CORE_READS.contains(&method)
}

impl CoreReplication {
    /// The HTTP layer of the gate (see the module header): a request that
    /// may change state is admitted first, and its successful answer waits
    /// for what the store committed while it ran.
    pub(crate) async fn gate(&self, request: Request, next: Next) -> Response {
        if !changes_state(request.method()) {
            return next.run(request).await;
        }
        if let Err(error) = self.admit() {
            return error.into_response();
        }
        let before = self.store.commits();
        let response = next.run(request).await;
        if !response.status().is_success() {
            return response;
        }
        match self.confirm_since(before).await {
            Ok(()) => response,
            Err(error) => error.into_response(),
        }
    }
}

/// The gRPC layer of the gate around `CoreService` (see the module header).
#[derive(Clone, Debug)]
pub(crate) struct DurableCalls<S> {
    inner: S,
    replication: Option<CoreReplication>,
}

impl<S> DurableCalls<S> {
    pub(crate) fn new(inner: S, replication: Option<CoreReplication>) -> DurableCalls<S> {
        DurableCalls { inner, replication }
    }
}

impl<S: NamedService> NamedService for DurableCalls<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<tonic::body::Body>> for DurableCalls<S>
where
    S: Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        // The clone that was made ready serves this call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let replication = self
            .replication
            .clone()
            .filter(|_| call_changes_state(request.uri().path()));
        Box::pin(async move {
            let Some(replication) = replication else {
                return inner.call(request).await;
            };
            if let Err(error) = replication.admit() {
                return Ok(error.to_status().into_http());
            }
            let before = replication.store.commits();
            let response = inner.call(request).await?;
            // A refusal travels as a trailers-only answer: its status is
            // in the headers. Only a success is held back.
            let refused = response
                .headers()
                .get("grpc-status")
                .is_some_and(|status| status != "0");
            if refused {
                return Ok(response);
            }
            match replication.confirm_since(before).await {
                Ok(()) => Ok(response),
                Err(error) => Ok(error.to_status().into_http()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_never_gated() {
        assert!(!changes_state(&Method::GET));
        assert!(!changes_state(&Method::HEAD));
        assert!(changes_state(&Method::POST));
        assert!(changes_state(&Method::DELETE));
        assert!(!call_changes_state("/sasha.v1.CoreService/Authenticate"));
        assert!(!call_changes_state("/sasha.v1.CoreService/GetCatalogue"));
        assert!(call_changes_state("/sasha.v1.CoreService/Confirm"));
        assert!(call_changes_state("/sasha.v1.CoreService/MemberApps"));
        assert!(call_changes_state("/sasha.v1.PlacementService/Renew"));
        assert!(!call_changes_state("/sasha.v1.PlacementService/Locate"));
    }
}
