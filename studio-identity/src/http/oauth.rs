//! The OAuth 2.1 authorization server for MCP clients, on the Studio origin.
//!
//! - `GET /.well-known/oauth-authorization-server`: RFC 8414 metadata.
//! - `POST /oauth/register`: RFC 7591 dynamic registration, budgeted per
//!   client address ([`crate::authorization::REGISTRATION_BUDGET`],
//!   [`crate::throttle::ClientAddress`])
//!   and bounded in number (see `store::oauth`), with the redirect URI rules
//!   below.
//! - `GET /oauth/authorize`: the authorization code flow with PKCE (S256
//!   only). A valid request is parked in the core database for
//!   [`crate::authorization::PENDING_TTL`] and the
//!   browser is sent to the Studio page (`/#/connect/<id>`), where the person
//!   signs in and chooses scopes; the page then calls the consent API below.
//! - `POST /oauth/token`: `authorization_code` and `refresh_token` grants.
//!   Access tokens are bound to the MCP resource (RFC 8707), refresh tokens
//!   rotate, and reuse revokes the connection.
//! - `POST /oauth/revoke`: RFC 7009.
//! - `/api/oauth/requests/{id}` (+ `/approve`, `/deny`) and
//!   `/api/oauth/connections[/{id}]`: the consent card and the connected
//!   clients page, for a signed-in browser session only.
//!
//! Redirect URIs (RFC 8252 and OAuth 2.1 §8.4): `https` anywhere; `http` only
//! to a loopback host; a private-use scheme only in reverse-domain form
//! (`com.example.app:/cb`); never a fragment or user info. They are matched
//! exactly, except that a loopback IP literal (`127.0.0.1`, `[::1]`) may come
//! with any port, because native apps bind an ephemeral one. `localhost` is
//! matched exactly (RFC 8252 §8.3 advises against it, and its port is not
//! waived).
//!
//! Errors carry OAuth's `error`/`error_description` for clients and the
//! platform envelope (`code`, `message`, `retryable`, `diagnosticId`) beside
//! them. The authorization endpoint never redirects on its own authority to
//! an address anyone can register (RFC 9700 §4.11.2): a problem with the
//! client or its redirect URI is shown in the browser (RFC 6749 §4.1.2.1);
//! any other authorization error goes back to the redirect URI, with `state`
//! and `iss`, only when that URI is trusted: the request carries the browser
//! session of a person who has a live connection (consented, code exchanged,
//! not revoked) to this client for this redirect URI, matched as registered
//! URIs are. Otherwise (anonymous, another person, a revoked or never used
//! connection, a store failure) the error is shown on a Studio page and
//! nothing is redirected. A redirect after the person consents or declines on
//! the consent card needs no such trust: the person chose it.
//!
//! Each endpoint has its own module (`metadata`, `register`, `authorize`,
//! `consent`, `connections`, `token`); `params` holds the parameter and
//! redirect URI rules they share. This module keeps the error responses; the
//! process state is `crate::authorization`, the routes are in `crate::http`.

use std::time::Duration;

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sasha_proto::{AppError, ErrorCode};
use serde_json::Value;
use studio_store::{OAuthRefusal, Scope};

use crate::accounts::Accounts;
use crate::http::answers::no_store;
use crate::http::caller::{same_origin_json, session_user};
use crate::throttle::retry_after_seconds;

pub(crate) mod authorize;
pub mod connections;
pub mod consent;
pub(crate) mod metadata;
pub mod params;
pub mod register;
pub(crate) mod token;

/// The largest registration or token request body.
pub(crate) const MAX_FORM_BYTES: usize = 16 * 1024;
/// Registration limits.
pub(crate) const MAX_REDIRECT_URIS: usize = 10;
pub(crate) const MAX_REDIRECT_URI_CHARS: usize = 2_000;
pub(crate) const MAX_CLIENT_NAME_CHARS: usize = 100;
pub(crate) const MAX_STATE_CHARS: usize = 1_024;

/// The scopes an MCP client may be granted ([`Scope::MCP_CLIENT`], which
/// the gateway's metadata also lists). `chat:use` is the Studio's own and is
/// never offered to an OAuth client.
pub(crate) fn offered() -> impl Iterator<Item = Scope> {
    Scope::MCP_CLIENT.into_iter()
}

pub(crate) fn scope_description(scope: Scope) -> &'static str {
    match scope {
        Scope::AppsInvoke => {
            "Use the apps you have access to: open them, read and change their records, run their actions."
        }
        Scope::AppsWrite => {
            "Create apps and change the source files of the apps you manage (admin and staff only). Needs the first scope."
        }
        Scope::AppsAuthor => {
            "Build, change and share your own member apps (App Studio's tools). Needs the first scope."
        }
        Scope::ChatUse => "Use Studio chat.",
    }
}

// ---------------------------------------------------------------------------
// Responses

/// Any origin may call the metadata, registration, token and revocation
/// endpoints (browser-based MCP clients do); none of them reads a cookie.
pub(crate) fn cors(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("www-authenticate"),
    );
    response
}

pub(crate) async fn preflight() -> Response {
    let mut response = cors(StatusCode::NO_CONTENT.into_response());
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("authorization, content-type, mcp-protocol-version"),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    response
}

/// An OAuth error: `error`/`error_description` with the platform envelope.
#[derive(Debug)]
pub struct OAuthError {
    error: &'static str,
    description: String,
    status: StatusCode,
    code: ErrorCode,
    /// Sent as `Retry-After` (a throttled request).
    retry_after: Option<Duration>,
}

impl OAuthError {
    /// The RFC 6749 `error` code.
    pub fn error(&self) -> &'static str {
        self.error
    }

    /// What is wrong, for a person.
    pub(crate) fn description(&self) -> &str {
        &self.description
    }

    pub(crate) fn new(error: &'static str, description: impl Into<String>) -> OAuthError {
        let (status, code) = match error {
            "invalid_client" => (StatusCode::UNAUTHORIZED, ErrorCode::Unauthenticated),
            "invalid_grant" => (StatusCode::BAD_REQUEST, ErrorCode::AccessDenied),
            "temporarily_unavailable" => (StatusCode::TOO_MANY_REQUESTS, ErrorCode::Busy),
            "server_error" => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal),
            _ => (StatusCode::BAD_REQUEST, ErrorCode::InputInvalid),
        };
        OAuthError {
            error,
            description: description.into(),
            status,
            code,
            retry_after: None,
        }
    }

    pub(crate) fn from_store(error: &AppError) -> OAuthError {
        let mut oauth = OAuthError::new(
            if error.retryable {
                "temporarily_unavailable"
            } else {
                "server_error"
            },
            error.message.clone(),
        );
        oauth.code = error.code;
        oauth.status = error.code.http_status();
        oauth
    }

    pub(crate) fn from_refusal(refusal: OAuthRefusal) -> OAuthError {
        match refusal {
            OAuthRefusal::InvalidGrant(reason) => OAuthError::new("invalid_grant", reason),
            OAuthRefusal::InvalidScope(reason) => OAuthError::new("invalid_scope", reason),
            OAuthRefusal::InvalidTarget => OAuthError::new(
                "invalid_target",
                "the resource is not the one this grant is bound to",
            ),
            OAuthRefusal::TooManyClients => OAuthError::new(
                "temporarily_unavailable",
                "too many clients are registered and unused; try again later",
            ),
        }
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let envelope = AppError::new(self.code, self.description.clone());
        tracing::info!(
            diagnostic_id = %envelope.diagnostic_id,
            error = self.error,
            reason = %self.description,
            "oauth request refused"
        );
        let mut body = envelope.to_json();
        if let Value::Object(map) = &mut body {
            map.insert("error".into(), self.error.into());
            map.insert("error_description".into(), self.description.into());
        }
        let mut response = no_store((self.status, Json(body)));
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"sasha-oauth\""),
            );
        }
        if let Some(wait) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, retry_after_seconds(wait).into());
        }
        cors(response)
    }
}

// ---------------------------------------------------------------------------
// Shared by the consent and connections APIs

/// The caller of a consent or connection change: a same-origin JSON request
/// (403 otherwise) from a signed-in browser session (401 when anonymous, the
/// hidden 404 for any other credential).
pub(crate) async fn signed_in_change(
    accounts: &Accounts,
    method: &Method,
    headers: &HeaderMap,
    has_body: bool,
) -> Result<studio_store::Principal, Response> {
    same_origin_json(accounts, method, headers, has_body)?;
    session_user(accounts, headers).await
}

#[cfg(test)]
mod tests;
