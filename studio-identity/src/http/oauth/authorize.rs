//! `GET /oauth/authorize`: the authorization code flow with PKCE (S256 only).
//! A valid request is parked in the core database for [`crate::authorization::PENDING_TTL`] and the
//! browser goes to the Studio page (`/#/connect/<id>`); a problem with the
//! client or its redirect URI is a page in the browser.
//!
//! This endpoint must never redirect on its own authority to an address
//! anyone can register (RFC 9700 §4.11.2): any other error goes back to the
//! redirect URI only when it is trusted ([`redirect_trusted`]), and is
//! otherwise shown on a Studio page.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sasha_proto::{AppError, ErrorCode};

use super::params::{
    parse_params, redirect_host, redirect_matches, redirect_with, requested_scopes,
};
use super::{MAX_STATE_CHARS, OAuthError};
use crate::accounts::Accounts;
use crate::authorization::{OAuthState, Pending};
use crate::http::answers::no_store;
use crate::http::caller::session_user;
use studio_store::blocking;
use studio_store::valid_code_challenge;

/// A page shown in the browser for an authorization request that cannot be
/// sent back to the client (unknown client, unregistered redirect URI).
fn error_page(message: &str) -> Response {
    refusal_page(StatusCode::BAD_REQUEST, ErrorCode::InputInvalid, message)
}

/// The Studio page of a refused authorization request: the message and a
/// diagnostic id, with the status and code of its OAuth error, never a
/// redirect.
fn refusal_page(status: StatusCode, code: ErrorCode, message: &str) -> Response {
    let error = AppError::new(code, message);
    tracing::info!(diagnostic_id = %error.diagnostic_id, reason = message, "authorization request refused");
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Connection refused — Sasha Studio</title></head><body>\
         <main style=\"font-family: system-ui, sans-serif; max-width: 36rem; margin: 4rem auto\">\
         <h1>This connection request cannot be used</h1><p>{}</p>\
         <p>Start the connection again from your MCP client. Diagnostic id: <code>{}</code></p>\
         </main></body></html>",
        sasha_contract::html::escape_text(message),
        error.diagnostic_id
    );
    no_store((status, axum::response::Html(html)))
}

pub(crate) async fn authorize(
    State(accounts): State<Arc<Accounts>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let params = match parse_params(query.unwrap_or_default().as_bytes()) {
        Ok(params) => params,
        Err(error) => return error_page(&error.description),
    };
    let Some(client_id) = params.get("client_id").cloned() else {
        return error_page("The request names no client (client_id is missing).");
    };
    let store = accounts.store.clone();
    let lookup = client_id.clone();
    let client = match blocking(move || store.oauth_client(&lookup)).await {
        Ok(Some(client)) => client,
        Ok(None) => {
            return error_page(
                "The client is not registered here (unknown client_id). It may have been removed because nobody connected it within a day.",
            );
        }
        Err(error) => return error.into_response(),
    };
    let redirect_uri = match params.get("redirect_uri") {
        Some(uri) if redirect_matches(&client.redirect_uris, uri) => uri.clone(),
        Some(_) => {
            return error_page(
                "The redirect URI is not one the client registered, so Sasha will not send you there.",
            );
        }
        None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
        None => {
            return error_page(
                "The request has no redirect_uri and the client registered several.",
            );
        }
    };
    let state = params.get("state").cloned();
    let refused = Refused {
        client_id: &client.client_id,
        redirect_uri: &redirect_uri,
        state: state.as_deref(),
    };
    let challenge = match authorization_problem(&accounts.oauth, &params) {
        Ok(challenge) => challenge,
        Err((error, description)) => {
            return refuse_authorization(&accounts, &headers, &refused, error, description).await;
        }
    };
    let pending = Pending {
        client_id: client.client_id.clone(),
        client_name: client.client_name.clone(),
        redirect_uri: redirect_uri.clone(),
        state: state.clone(),
        code_challenge: challenge,
        requested: requested_scopes(params.get("scope").map(String::as_str)),
        // Set by the store from its clock when parked.
        expires_at: 0,
    };
    match accounts.oauth.park(&accounts.store, pending).await {
        Ok(Some(id)) => see_other(&format!("/#/connect/{id}")),
        Err(error) => error.into_response(),
        Ok(None) => {
            refuse_authorization(
                &accounts,
                &headers,
                &refused,
                "temporarily_unavailable",
                "too many authorization requests are waiting; try again shortly",
            )
            .await
        }
    }
}

/// The checks of an authorization request whose client and redirect URI are
/// known: its code challenge, or the OAuth error and its description.
fn authorization_problem(
    oauth: &OAuthState,
    params: &HashMap<String, String>,
) -> Result<String, (&'static str, &'static str)> {
    if params
        .get("state")
        .is_some_and(|s| s.len() > MAX_STATE_CHARS)
    {
        return Err(("invalid_request", "state has at most 1024 characters"));
    }
    if params.get("response_type").map(String::as_str) != Some("code") {
        return Err(("unsupported_response_type", "response_type must be code"));
    }
    let Some(challenge) = params
        .get("code_challenge")
        .filter(|c| valid_code_challenge(c))
    else {
        return Err((
            "invalid_request",
            "a PKCE code_challenge (43 base64url characters) is required",
        ));
    };
    if params.get("code_challenge_method").map(String::as_str) != Some("S256") {
        return Err((
            "invalid_request",
            "code_challenge_method must be S256 (plain is not supported)",
        ));
    }
    if params
        .get("resource")
        .is_some_and(|resource| resource.trim_end_matches('/') != oauth.resource)
    {
        return Err((
            "invalid_target",
            "tokens are issued only for this server's MCP resource",
        ));
    }
    Ok(challenge.clone())
}

/// An authorization request refused after its client and redirect URI were
/// checked.
struct Refused<'a> {
    client_id: &'a str,
    redirect_uri: &'a str,
    state: Option<&'a str>,
}

/// Sends an authorization error back to the client (with `state` and `iss`)
/// when the redirect URI is trusted ([`redirect_trusted`]); otherwise shows
/// it on a page and redirects nowhere.
async fn refuse_authorization(
    accounts: &Accounts,
    headers: &HeaderMap,
    refused: &Refused<'_>,
    error: &'static str,
    description: &str,
) -> Response {
    if redirect_trusted(accounts, headers, refused.client_id, refused.redirect_uri).await {
        let mut pairs = vec![("error", error), ("error_description", description)];
        if let Some(state) = refused.state {
            pairs.push(("state", state));
        }
        pairs.push(("iss", &accounts.oauth.issuer));
        return see_other(&redirect_with(refused.redirect_uri, &pairs));
    }
    let mapped = OAuthError::new(error, description);
    refusal_page(
        mapped.status,
        mapped.code,
        &format!(
            "The client's request cannot be used: {description} (OAuth error {error}). \
             Sasha sends such an error back to a client only after you have connected that \
             client with this redirect address, so it did not send you to {}.",
            redirect_host(refused.redirect_uri)
        ),
    )
}

/// Whether an authorization error may go back to `redirect_uri` on its own
/// (RFC 9700 §4.11.2): only when the request carries a signed-in browser
/// session whose person has a live connection to `client_id` (consented,
/// code exchanged, not revoked) for a redirect URI that `redirect_uri`
/// matches by [`redirect_matches`]. Anyone can register any https URI, so
/// registration alone earns no trust; anonymous requests, other people's
/// sessions, other credentials and store failures are untrusted.
async fn redirect_trusted(
    accounts: &Accounts,
    headers: &HeaderMap,
    client_id: &str,
    redirect_uri: &str,
) -> bool {
    let Ok(principal) = session_user(accounts, headers).await else {
        return false;
    };
    let store = accounts.store.clone();
    let client_id = client_id.to_owned();
    let user_id = principal.user.id;
    match blocking(move || store.oauth_connected_redirect_uris(&user_id, &client_id)).await {
        Ok(connected) => redirect_matches(&connected, redirect_uri),
        Err(_) => false,
    }
}

fn see_other(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(value) => no_store((StatusCode::SEE_OTHER, [(header::LOCATION, value)])),
        Err(_) => error_page("The redirect URI cannot be used in a redirect."),
    }
}
