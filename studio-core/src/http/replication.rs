//! `GET /api/admin/replication`: each role's replication to object storage,
//! for the admins' Users page. Never writes, never shows it to anyone but an
//! admin (others get the hidden 404).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use studio_identity::http::caller::session_user;
use studio_identity::http::{ErrorEnvelope, hidden_not_found};
use studio_store::UserRole;

use crate::state::Core;

/// `GET /api/admin/replication`: every role's replication, for admins (the
/// Users page shows it); `{"enabled": false}` when replication is off.
#[utoipa::path(get, path = "/api/admin/replication", responses(
    (status = 200, description = "`{enabled, roles: {<role>: {mode, ok, databasesTotal, databases: [{database, generation, txid, replicatedTxid, lastReplicatedAt, lagSeconds, error}]}}}`", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "not an admin (the hidden answer)", body = ErrorEnvelope)))]
pub(crate) async fn replication_page(
    State(core): State<Arc<Core>>,
    headers: http::HeaderMap,
) -> Response {
    let principal = match session_user(&core.accounts, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    if principal.user.role != UserRole::Admin {
        return hidden_not_found().into_response();
    }
    let body = match crate::grpc::health::replication_json(&core).await {
        Some(roles) => serde_json::json!({"enabled": true, "roles": roles}),
        None => serde_json::json!({"enabled": false}),
    };
    let mut response = axum::Json(body).into_response();
    response.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    response
}

/// The replication routes.
pub(crate) fn routes() -> axum::Router<Arc<Core>> {
    axum::Router::new().route(
        "/api/admin/replication",
        axum::routing::get(replication_page),
    )
}

/// The replication gate over every Studio request (`replication::CoreReplication::gate`);
/// a pass-through when replication is off.
pub(crate) async fn durable_writes(
    State(core): State<Arc<Core>>,
    request: Request,
    next: Next,
) -> Response {
    match &core.replication {
        Some(replication) => replication.gate(request, next).await,
        None => next.run(request).await,
    }
}
