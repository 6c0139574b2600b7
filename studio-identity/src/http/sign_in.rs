//! Signing in and out of Studio (`/api/auth/login`, `/api/auth/logout`)
//! and who the caller is (`/api/me`). A sign-in is a same-origin JSON
//! request, admitted by the [`crate::throttle::LoginThrottle`] before its
//! password is checked, and answered with the session cookie (`__Host-`
//! and `Secure` when Studio is served over https).
//!
//! What it must never do: say whether a user name exists (a wrong name and
//! a wrong password are the same 401), spend argon2 work on a throttled
//! attempt, or put the session secret anywhere but the cookie.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sasha_proto::{AppError, ErrorCode};
use sasha_service::web::{cookie, session_cookie_name};
use serde::{Deserialize, Serialize};
use studio_store::{Principal, blocking};
use utoipa::ToSchema;

use crate::accounts::Accounts;
use crate::http::answers::{ErrorEnvelope, no_store, parse_body, throttled, uuid_nil};
use crate::http::caller::{same_origin_json, user};
use crate::throttle::ClientAddress;

/// Sign-in credentials.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    username: String,
    password: String,
}

/// `POST /api/auth/login`: `{username, password}` → the session cookie.
#[utoipa::path(post, path = "/api/auth/login", request_body = LoginRequest, responses(
    (status = 200, description = "signed in; sets the session cookie", body = MeResponse),
    (status = 400, description = "malformed body", body = ErrorEnvelope),
    (status = 401, description = "wrong user name or password", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin; or password sign-in is turned off (SASHA_SSO_ONLY) and this is not the break-glass admin (APP_ACCESS_DENIED)", body = ErrorEnvelope),
    (status = 415, description = "body is not application/json", body = ErrorEnvelope),
    (status = 429, description = "too many sign-in attempts for this user name from this client address, or from this address; retryable, see Retry-After", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
pub async fn login(
    State(accounts): State<Arc<Accounts>>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(response) = same_origin_json(&accounts, &method, &headers, true) {
        return response;
    }
    let request: LoginRequest = match parse_body(&body) {
        Ok(request) => request,
        Err(response) => return response,
    };
    // Before the password is checked, so a slowed pair learns nothing and
    // costs no argon2 work.
    let client = ClientAddress::of(&headers);
    match accounts
        .login_throttle
        .admit(&accounts.store, &request.username, client)
        .await
    {
        Ok(Ok(())) => {}
        Ok(Err(wait)) => {
            return throttled(
                wait,
                "too many sign-in attempts for this user name from your address",
            );
        }
        Err(error) => return error.into_response(),
    }
    let store = accounts.store.clone();
    let policy = Arc::clone(&accounts);
    let outcome = blocking(move || {
        let Some(user) = store.verify_login(&request.username, &request.password)? else {
            return Ok(Login::Wrong);
        };
        // Checked after the password, so only someone who knows it learns
        // that passwords are off, and the break-glass admin's name is not
        // told apart from any other.
        if !policy.sign_in.password_admits(&user.username, user.role) {
            return Ok(Login::PasswordsOff);
        }
        let secret = store.create_session(&user.id)?;
        let principal = store.session(&secret)?;
        Ok(principal.map_or(Login::Wrong, |principal| Login::SignedIn(secret, principal)))
    })
    .await;
    match outcome {
        Ok(Login::SignedIn(secret, principal)) => signed_in(&accounts, &secret, &principal),
        Ok(Login::Wrong) => {
            let mut error = AppError::new(
                ErrorCode::Unauthenticated,
                "the user name or password is wrong",
            );
            error.diagnostic_id = uuid_nil();
            error.into_response()
        }
        Ok(Login::PasswordsOff) => accounts.sign_in.passwords_off().into_response(),
        Err(error) => error.into_response(),
    }
}

/// How a password sign-in was decided.
enum Login {
    SignedIn(String, Principal),
    Wrong,
    /// The password is right, but passwords are off for this person.
    PasswordsOff,
}

/// The answer that starts a browser session: the caller, with the session
/// cookie for `secret`.
pub(crate) fn signed_in(accounts: &Accounts, secret: &str, principal: &Principal) -> Response {
    let mut response = no_store(Json(me_json(principal)));
    if let Some(value) = session_cookie(accounts, secret) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Every cookie Studio sets: `HttpOnly`, `SameSite=Lax`, for the whole
/// origin, `Secure` when Studio is served over https (the caller's `name`
/// then carries `__Host-`); `max_age` `None` lasts the browser session, `0`
/// removes it.
pub(crate) fn studio_cookie(
    accounts: &Accounts,
    name: &str,
    value: &str,
    max_age: Option<i64>,
) -> Option<HeaderValue> {
    let max_age = max_age.map(|seconds| format!("; Max-Age={seconds}"));
    let secure = if accounts.secure_cookies() {
        "; Secure"
    } else {
        ""
    };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Lax{}{secure}",
        max_age.unwrap_or_default()
    ))
    .ok()
}

/// The session cookie for `secret`, however the person signed in.
pub(crate) fn session_cookie(accounts: &Accounts, secret: &str) -> Option<HeaderValue> {
    let name = session_cookie_name(accounts.secure_cookies());
    studio_cookie(accounts, name, secret, None)
}

/// `POST /api/auth/logout`: ends the browser session.
#[utoipa::path(post, path = "/api/auth/logout", responses(
    (status = 204, description = "signed out; clears the session cookie"),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope)))]
pub async fn logout(
    State(accounts): State<Arc<Accounts>>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = same_origin_json(&accounts, &method, &headers, false) {
        return response;
    }
    let name = session_cookie_name(accounts.secure_cookies());
    if let Some(secret) = cookie(&headers, name) {
        let (store, secret) = (accounts.store.clone(), secret.to_owned());
        if let Err(error) = blocking(move || store.delete_session(&secret)).await {
            return error.into_response();
        }
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Some(value) = studio_cookie(&accounts, name, "", Some(0)) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `GET /api/me`.
#[utoipa::path(get, path = "/api/me", responses(
    (status = 200, description = "the caller", body = MeResponse),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
pub async fn me(State(accounts): State<Arc<Accounts>>, headers: HeaderMap) -> Response {
    match user(&accounts, &headers).await {
        Ok(principal) => no_store(Json(me_json(&principal))),
        Err(response) => response,
    }
}

fn me_json(principal: &Principal) -> MeResponse {
    MeResponse {
        id: principal.user.id.clone(),
        username: principal.user.username.clone(),
        role: principal.user.role.as_str().to_owned(),
        scopes: principal
            .scopes
            .iter()
            .map(|scope| scope.as_str().to_owned())
            .collect(),
    }
}

/// Who the caller is.
#[derive(Serialize, ToSchema)]
pub struct MeResponse {
    id: String,
    username: String,
    /// `admin`, `staff` or `member`.
    role: String,
    /// Held scopes: `chat:use`, `apps:invoke`, `apps:write`.
    scopes: Vec<String>,
}
