//! The Connected clients API: `GET /api/oauth/connections` (the caller's live
//! connections) and `DELETE /api/oauth/connections/{id}` (revoking one, which
//! stops every token of that connection).
//!
//! It answers a signed-in browser session only, and same-origin JSON for a
//! revocation. It must never show or revoke another person's connection,
//! and it shows no secret.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::params::redirect_host;
use super::signed_in_change;
use crate::accounts::Accounts;
use crate::http::answers::{hidden_not_found, no_store};
use crate::http::caller::session_user;
use studio_store::blocking;

/// One of the caller's connected clients.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionEntry {
    id: String,
    client_id: String,
    client_name: String,
    redirect_host: String,
    scopes: Vec<String>,
    resource: String,
    /// Unix seconds.
    connected_at: i64,
    /// Unix seconds of the latest token issue.
    last_used_at: i64,
}

/// `GET /api/oauth/connections`.
#[derive(Serialize, ToSchema)]
pub struct ConnectionsResponse {
    connections: Vec<ConnectionEntry>,
}

#[utoipa::path(tag = "oauth", get, path = "/api/oauth/connections", responses(
    (status = 200, description = "the caller's live OAuth connections, newest first; Cache-Control: no-store", body = ConnectionsResponse),
    (status = 401, description = "anonymous", body = crate::http::answers::ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session", body = crate::http::answers::ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = crate::http::answers::ErrorEnvelope)))]
pub async fn connections(State(accounts): State<Arc<Accounts>>, headers: HeaderMap) -> Response {
    let principal = match session_user(&accounts, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let store = accounts.store.clone();
    match blocking(move || store.oauth_connections(&principal.user.id)).await {
        Ok(list) => no_store(Json(ConnectionsResponse {
            connections: list
                .into_iter()
                .map(|connection| ConnectionEntry {
                    redirect_host: redirect_host(&connection.redirect_uri),
                    id: connection.id,
                    client_id: connection.client_id,
                    client_name: connection.client_name,
                    scopes: connection.scopes,
                    resource: connection.resource,
                    connected_at: connection.connected_at,
                    last_used_at: connection.last_used_at,
                })
                .collect(),
        })),
        Err(error) => error.into_response(),
    }
}

#[utoipa::path(tag = "oauth", delete, path = "/api/oauth/connections/{connectionId}", params(("connectionId" = String, Path)), responses(
    (status = 204, description = "revoked: every token of the connection stops working"),
    (status = 401, description = "anonymous", body = crate::http::answers::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = crate::http::answers::ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session, or not the caller's live connection", body = crate::http::answers::ErrorEnvelope)))]
pub async fn revoke_connection(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let principal = match signed_in_change(&accounts, &method, &headers, false).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let store = accounts.store.clone();
    let user_id = principal.user.id;
    match blocking(move || store.oauth_revoke_connection(&user_id, &id, &user_id)).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => hidden_not_found().into_response(),
        Err(error) => error.into_response(),
    }
}
