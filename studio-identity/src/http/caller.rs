//! Who is calling a Studio HTTP route: the session cookie or a bearer token
//! resolved to a principal, and the checks every route of the Studio API
//! makes of it: [`user`] (a browser session or an access token holding
//! `chat:use`), [`session_user`] (a signed-in browser session only), and
//! [`same_origin_json`] for every state change that may carry the cookie.
//!
//! API keys and chat-session tokens are system credentials: they are refused
//! here. OAuth access tokens are bound to the MCP resource and refused too.
//!
//! What it must never do: tell why a credential did not resolve (it is the
//! hidden 404, byte for byte), or accept a state change that relies on the
//! ambient cookie without showing where it came from (security catalogue F5).

use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sasha_proto::{AppError, ErrorCode};
use sasha_service::web::{bearer, cookie, session_cookie_name};
use studio_store::{Principal, PrincipalKind, Scope, blocking};

use crate::accounts::Accounts;
use crate::http::answers::{hidden_not_found, unauthenticated};

/// Who is calling.
pub enum Caller {
    Anonymous,
    Principal(Principal),
}

/// Identifies the caller. A presented credential that does not resolve is the
/// hidden 404, never a hint that it was wrong.
pub async fn caller(accounts: &Accounts, headers: &HeaderMap) -> Result<Caller, Response> {
    let name = session_cookie_name(accounts.secure_cookies());
    if let Some(secret) = cookie(headers, name) {
        let (store, secret) = (accounts.store.clone(), secret.to_owned());
        return match blocking(move || store.session(&secret)).await {
            Ok(Some(principal)) => Ok(Caller::Principal(principal)),
            Ok(None) => Err(hidden_not_found().into_response()),
            Err(error) => Err(error.into_response()),
        };
    }
    if let Some(secret) = bearer(headers) {
        let (store, secret) = (accounts.store.clone(), secret.to_owned());
        return match blocking(move || store.token(&secret)).await {
            // OAuth access tokens are bound to the MCP resource, not this API.
            Ok(Some(principal)) if principal.audience.is_none() => Ok(Caller::Principal(principal)),
            Ok(_) => Err(hidden_not_found().into_response()),
            Err(error) => Err(error.into_response()),
        };
    }
    Ok(Caller::Anonymous)
}

/// A user principal allowed on the app routes: a browser session or an access
/// token holding `chat:use`. Anonymous is 401; anything else the hidden 404.
pub async fn user(accounts: &Accounts, headers: &HeaderMap) -> Result<Principal, Response> {
    match caller(accounts, headers).await? {
        Caller::Anonymous => Err(unauthenticated()),
        Caller::Principal(principal)
            if matches!(
                principal.kind,
                PrincipalKind::Session | PrincipalKind::Access
            ) && principal.scopes.contains(&Scope::ChatUse) =>
        {
            Ok(principal)
        }
        Caller::Principal(_) => Err(hidden_not_found().into_response()),
    }
}

/// A signed-in browser session: the only caller who may give or withdraw
/// OAuth consent. Anonymous is 401; any other credential the hidden 404.
pub async fn session_user(accounts: &Accounts, headers: &HeaderMap) -> Result<Principal, Response> {
    match caller(accounts, headers).await? {
        Caller::Anonymous => Err(unauthenticated()),
        Caller::Principal(principal) if principal.kind == PrincipalKind::Session => Ok(principal),
        Caller::Principal(_) => Err(hidden_not_found().into_response()),
    }
}

/// A state-changing `/api` request from a signed-in Studio page: the
/// same-origin JSON checks ([`same_origin_json`]), then the browser session
/// ([`session_user`]), in that order.
pub async fn session_write(
    accounts: &Accounts,
    method: &Method,
    headers: &HeaderMap,
    has_body: bool,
) -> Result<Principal, Response> {
    same_origin_json(accounts, method, headers, has_body)?;
    session_user(accounts, headers).await
}

/// Refuses a state-changing request that is not a same-origin JSON request
/// (security catalogue F5): the `Origin` must be the Studio origin, or, without
/// an `Origin`, `Sec-Fetch-Site` must say `same-origin`; the body must be JSON.
/// Only a request without the session cookie (a script with a bearer token,
/// or a sign-in) may carry neither header: the cookie is ambient authority,
/// so a request that relies on it must show where it came from.
pub fn same_origin_json(
    accounts: &Accounts,
    method: &Method,
    headers: &HeaderMap,
    has_body: bool,
) -> Result<(), Response> {
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|value| value.to_str().ok());
    let fetch_site = headers
        .get("sec-fetch-site")
        .and_then(|value| value.to_str().ok());
    let with_cookie = cookie(headers, session_cookie_name(accounts.secure_cookies())).is_some();
    let same_origin = match (origin, fetch_site) {
        (Some(origin), _) => origin == accounts.studio.as_str(),
        (None, Some(site)) => site == "same-origin",
        (None, None) => !with_cookie,
    };
    if !same_origin || fetch_site.is_some_and(|site| site != "same-origin" && site != "none") {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            format!("{method} requests are accepted only from the Studio origin"),
        )
        .into_response());
    }
    if has_body {
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .is_some_and(|value| value.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            let mut response = AppError::new(
                ErrorCode::InputInvalid,
                "the request body must be application/json",
            )
            .into_response();
            *response.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
            return Err(response);
        }
    }
    Ok(())
}
