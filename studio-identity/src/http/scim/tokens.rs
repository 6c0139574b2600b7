//! The SCIM tokens an admin mints for the organisation's directory
//! (`/api/scim/tokens`): list, mint (the secret shown once) and revoke, from
//! a signed-in admin's Studio page; `sasha admin scim token` does the same
//! as the operator.
//!
//! What it must never do: show a token's secret twice (only its hash is
//! stored), or let anyone but an admin mint one (a SCIM token creates and
//! removes people and, through groups, makes admins).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use sasha_proto::{AppError, ErrorCode};
use serde::Deserialize;
use serde_json::json;
use studio_store::{StoreError, blocking};
use utoipa::ToSchema;

use crate::accounts::Accounts;
use crate::http::answers::{ErrorEnvelope, hidden_not_found, no_store, parse_body};
use crate::http::caller::user;
use crate::http::people::admin;

pub(super) fn routes() -> axum::Router<Arc<Accounts>> {
    axum::Router::new()
        .route("/api/scim/tokens", get(list).post(mint))
        .route("/api/scim/tokens/{id}", delete(revoke))
}

/// The body of a mint.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MintBody {
    /// What the token is for ("Entra ID").
    label: String,
}

fn refusal(error: StoreError) -> Response {
    match error {
        StoreError::InvalidTokenLabel(message) => AppError::new(ErrorCode::InputInvalid, message)
            .with_details(json!({ "field": "label" }))
            .into_response(),
        StoreError::NotAdmin => {
            AppError::new(ErrorCode::AccessDenied, error.to_string()).into_response()
        }
        StoreError::UnknownToken => hidden_not_found().into_response(),
        other => studio_store::store_error(other).into_response(),
    }
}

/// `GET /api/scim/tokens`: every SCIM token, newest first, never a secret
/// (admins only).
#[utoipa::path(tag = "scim", get, path = "/api/scim/tokens", responses(
    (status = 200, description = "`{tokens: [{id, label, createdBy, createdAt, revokedAt, lastUsedAt}], base}`: base is the SCIM tenant URL", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: not an admin, or a bad credential", body = ErrorEnvelope)))]
pub async fn list(State(accounts): State<Arc<Accounts>>, headers: HeaderMap) -> Response {
    let principal = match user(&accounts, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    if principal.user.role != studio_store::UserRole::Admin {
        return hidden_not_found().into_response();
    }
    let store = accounts.store.clone();
    match blocking(move || store.scim_tokens()).await {
        Ok(tokens) => no_store(Json(
            json!({ "tokens": tokens, "base": format!("{}/scim/v2", accounts.studio.as_str()) }),
        )),
        Err(error) => error.into_response(),
    }
}

/// `POST /api/scim/tokens` `{label}`: a new token, its secret shown once.
#[utoipa::path(tag = "scim", post, path = "/api/scim/tokens", request_body = MintBody, responses(
    (status = 201, description = "`{secret, token, base}`: the secret is shown once", body = Object),
    (status = 400, description = "a bad name, or too many live tokens (APP_INPUT_INVALID, details.field = label)", body = ErrorEnvelope),
    (status = 403, description = "not an admin, or not from the Studio origin", body = ErrorEnvelope)))]
pub async fn mint(
    State(accounts): State<Arc<Accounts>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let actor = match admin(&accounts, &method, &headers, true).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    let body: MintBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let store = accounts.store.clone();
    match tokio::task::spawn_blocking(move || store.mint_scim_token(&body.label, &actor.user.id))
        .await
    {
        Ok(Ok((secret, token))) => (
            StatusCode::CREATED,
            no_store(Json(json!({
                "secret": secret,
                "token": token,
                "base": format!("{}/scim/v2", accounts.studio.as_str()),
            }))),
        )
            .into_response(),
        Ok(Err(error)) => refusal(error),
        Err(_) => AppError::from_code(ErrorCode::Internal).into_response(),
    }
}

/// `DELETE /api/scim/tokens/{id}`: the token stops working at once.
#[utoipa::path(tag = "scim", delete, path = "/api/scim/tokens/{id}", params(("id" = i64, Path)), responses(
    (status = 200, description = "`{revoked}`: false when it already was", body = Object),
    (status = 403, description = "not an admin, or not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "hidden: no such token", body = ErrorEnvelope)))]
pub async fn revoke(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let actor = match admin(&accounts, &method, &headers, false).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    let Ok(id) = id.parse::<i64>() else {
        return hidden_not_found().into_response();
    };
    let store = accounts.store.clone();
    match tokio::task::spawn_blocking(move || store.revoke_scim_token(id, &actor.user.id)).await {
        Ok(Ok(revoked)) => no_store(Json(json!({ "revoked": revoked }))),
        Ok(Err(error)) => refusal(error),
        Err(_) => AppError::from_code(ErrorCode::Internal).into_response(),
    }
}
