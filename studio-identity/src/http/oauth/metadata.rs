//! `GET /.well-known/oauth-authorization-server`: the RFC 8414 metadata of
//! the authorization server, built from the issuer (the Studio origin).
//!
//! This document must never advertise what the endpoints do not do (another
//! grant type, response type, client authentication or challenge method);
//! like every endpoint a client calls cross-origin, it reads no cookie.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::cors;
use crate::accounts::Accounts;
use studio_store::ClientAuthMethod;

pub(crate) async fn metadata(State(accounts): State<Arc<Accounts>>) -> Response {
    let issuer = &accounts.oauth.issuer;
    let mut response = Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/oauth/authorize"),
        "token_endpoint": format!("{issuer}/oauth/token"),
        "registration_endpoint": format!("{issuer}/oauth/register"),
        "revocation_endpoint": format!("{issuer}/oauth/revoke"),
        "scopes_supported": sasha_contract::caller::Scope::MCP_CLIENT,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ClientAuthMethod::ALL.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
        "revocation_endpoint_auth_methods_supported": ClientAuthMethod::ALL.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
        "authorization_response_iss_parameter_supported": true,
        "service_documentation": format!("{issuer}/"),
    }))
    .into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    cors(response)
}
