//! The OAuth 2.1 authorization server for MCP clients, on the Studio origin.
//!
//! - `GET /.well-known/oauth-authorization-server`: RFC 8414 metadata.
//! - `POST /oauth/register`: RFC 7591 dynamic registration, budgeted per
//!   client address ([`REGISTRATION_BUDGET`], [`crate::api::ClientAddress`])
//!   and bounded in number (see `store::oauth`), with the redirect URI rules
//!   below.
//! - `GET /oauth/authorize`: the authorization code flow with PKCE (S256
//!   only). A valid request is parked in memory for [`PENDING_TTL`] and the
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

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use sasha_proto::{AppError, ErrorCode};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::Core;
use crate::api::{
    ClientAddress, KeyedThrottle, blocking, hidden_not_found, no_store, parse_body,
    retry_after_seconds, same_origin_json, session_user, try_again_in,
};
use crate::store::{
    ClientAuthMethod, CodeExchange, Consent, IssuedTokens, OAuthRefusal, RegisteredClient, Scope,
    UserRole, valid_code_challenge,
};

/// A parked authorization request lasts this long.
pub(crate) const PENDING_TTL: Duration = Duration::from_secs(10 * 60);
/// At most this many authorization requests are parked at once.
pub(crate) const MAX_PENDING: usize = 10_000;
/// Registrations one client address may make: 20 at once, then one every
/// 3 s (20 a minute). The store's caps on clients stay global.
pub(crate) const REGISTRATION_BUDGET: (u32, Duration) = (20, Duration::from_secs(3));
/// The largest registration or token request body.
const MAX_FORM_BYTES: usize = 16 * 1024;
/// Registration limits.
const MAX_REDIRECT_URIS: usize = 10;
const MAX_REDIRECT_URI_CHARS: usize = 2_000;
const MAX_CLIENT_NAME_CHARS: usize = 100;
const MAX_STATE_CHARS: usize = 1_024;

/// The scopes an MCP client may be granted
/// (`sasha_contract::tools::MCP_CLIENT_SCOPES`, which the gateway's metadata
/// also lists). `chat:use` is the Studio's own and is never offered to an
/// OAuth client.
fn offered() -> impl Iterator<Item = Scope> {
    sasha_contract::tools::MCP_CLIENT_SCOPES
        .iter()
        .filter_map(|name| name.parse().ok())
}

fn scope_description(scope: Scope) -> &'static str {
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

/// The authorization server's process state: parked requests and the
/// registration budgets. One studio-core serves the Studio origin.
#[derive(Debug)]
pub(crate) struct OAuthState {
    /// The issuer: the Studio origin.
    issuer: String,
    /// The one resource tokens are issued for: `<MCP_PUBLIC_ORIGIN>/mcp`.
    resource: String,
    pending: Mutex<HashMap<String, Pending>>,
    /// Registrations per client address ([`REGISTRATION_BUDGET`]).
    registrations: KeyedThrottle<ClientAddress>,
}

/// A validated authorization request waiting for the person's decision.
#[derive(Debug, Clone)]
struct Pending {
    client_id: String,
    client_name: String,
    redirect_uri: String,
    state: Option<String>,
    code_challenge: String,
    requested: BTreeSet<Scope>,
    created: Instant,
    expires_at: i64,
}

impl OAuthState {
    pub(crate) fn new(studio_origin: &str, mcp_origin: &str) -> OAuthState {
        OAuthState {
            issuer: studio_origin.to_owned(),
            resource: format!("{mcp_origin}/mcp"),
            pending: Mutex::new(HashMap::new()),
            registrations: KeyedThrottle::new(
                REGISTRATION_BUDGET.0,
                REGISTRATION_BUDGET.1,
                governor::clock::DefaultClock::default(),
            ),
        }
    }

    /// The MCP endpoint clients connect to: the resource its tokens are for.
    pub(crate) fn resource(&self) -> &str {
        &self.resource
    }

    /// Counts one registration from `client`, or says how long it must wait.
    fn admit_registration(&self, client: ClientAddress) -> Result<(), Duration> {
        self.registrations.check(&client)
    }

    /// Parks a request; `None` when too many are parked.
    fn park(&self, pending: Pending) -> Option<String> {
        let mut parked = self.pending.lock().ok()?;
        if parked.len() >= MAX_PENDING {
            parked.retain(|_, p| p.created.elapsed() < PENDING_TTL);
        }
        if parked.len() >= MAX_PENDING {
            return None;
        }
        let id = random_id();
        parked.insert(id.clone(), pending);
        Some(id)
    }

    fn peek(&self, id: &str) -> Option<Pending> {
        let parked = self.pending.lock().ok()?;
        parked
            .get(id)
            .filter(|p| p.created.elapsed() < PENDING_TTL)
            .cloned()
    }

    fn take(&self, id: &str) -> Option<Pending> {
        let mut parked = self.pending.lock().ok()?;
        parked
            .remove(id)
            .filter(|p| p.created.elapsed() < PENDING_TTL)
    }
}

fn random_id() -> String {
    use rand::RngCore as _;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The OAuth routes (all on the Studio host).
pub(crate) fn routes() -> axum::Router<Arc<Core>> {
    axum::Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(metadata).options(preflight),
        )
        .route("/oauth/register", post(register).options(preflight))
        .route("/oauth/authorize", get(authorize))
        .route("/oauth/token", post(token).options(preflight))
        .route("/oauth/revoke", post(revoke).options(preflight))
        .route("/api/oauth/requests/{id}", get(request_details))
        .route("/api/oauth/requests/{id}/approve", post(approve))
        .route("/api/oauth/requests/{id}/deny", post(deny))
        .route("/api/oauth/connections", get(connections))
        .route(
            "/api/oauth/connections/{id}",
            axum::routing::delete(revoke_connection),
        )
}

// ---------------------------------------------------------------------------
// Responses

/// Any origin may call the metadata, registration, token and revocation
/// endpoints (browser-based MCP clients do); none of them reads a cookie.
fn cors(mut response: Response) -> Response {
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

async fn preflight() -> Response {
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
struct OAuthError {
    error: &'static str,
    description: String,
    status: StatusCode,
    code: ErrorCode,
    /// Sent as `Retry-After` (a throttled request).
    retry_after: Option<Duration>,
}

impl OAuthError {
    fn new(error: &'static str, description: impl Into<String>) -> OAuthError {
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

    fn from_store(error: &AppError) -> OAuthError {
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

    fn from_refusal(refusal: OAuthRefusal) -> OAuthError {
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

// ---------------------------------------------------------------------------
// Parameters and redirect URIs

/// Parses `application/x-www-form-urlencoded` text; a repeated parameter is
/// refused (RFC 6749 §3.1) and empty values count as absent.
fn parse_params(raw: &[u8]) -> Result<HashMap<String, String>, OAuthError> {
    let mut params = HashMap::new();
    for (name, value) in url::form_urlencoded::parse(raw) {
        if value.is_empty() {
            continue;
        }
        if params
            .insert(name.clone().into_owned(), value.into_owned())
            .is_some()
        {
            return Err(OAuthError::new(
                "invalid_request",
                format!("the parameter {name} is repeated"),
            ));
        }
    }
    Ok(params)
}

/// Why a redirect URI cannot be registered, or `None` when it can.
pub(crate) fn redirect_uri_problem(text: &str) -> Option<&'static str> {
    if text.len() > MAX_REDIRECT_URI_CHARS {
        return Some("a redirect URI has at most 2000 characters");
    }
    let Ok(url) = url::Url::parse(text) else {
        return Some("a redirect URI must be an absolute URI");
    };
    if url.fragment().is_some() {
        return Some("a redirect URI must not have a fragment");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Some("a redirect URI must not carry user information");
    }
    match url.scheme() {
        "https" => url
            .host()
            .is_none()
            .then_some("an https redirect URI needs a host"),
        "http" => (!is_loopback(&url))
            .then_some("an http redirect URI must point at a loopback host (127.0.0.1, [::1] or localhost); use https otherwise"),
        "javascript" | "data" | "file" | "vbscript" | "about" | "blob" | "ftp" | "ws" | "wss"
        | "filesystem" => Some("that redirect URI scheme is not allowed"),
        scheme if scheme.contains('.') => None,
        _ => Some(
            "a private-use redirect URI scheme must be a reverse domain name, such as com.example.app",
        ),
    }
}

fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// Whether the requested redirect URI is one of the registered ones: exactly,
/// or, for an `http` loopback IP literal, exactly but for the port.
pub(crate) fn redirect_matches(registered: &[String], requested: &str) -> bool {
    if registered.iter().any(|uri| uri == requested) {
        return true;
    }
    let Ok(mut asked) = url::Url::parse(requested) else {
        return false;
    };
    let loopback_ip = |url: &url::Url| {
        let ip_literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            _ => false,
        };
        url.scheme() == "http" && ip_literal
    };
    if !loopback_ip(&asked) || asked.set_port(None).is_err() {
        return false;
    }
    registered.iter().any(|uri| {
        url::Url::parse(uri).is_ok_and(|mut known| {
            loopback_ip(&known) && known.set_port(None).is_ok() && known == asked
        })
    })
}

/// Parses a space-separated scope list; names Sasha does not offer to MCP
/// clients are ignored (the token response says what was granted).
fn requested_scopes(text: Option<&str>) -> BTreeSet<Scope> {
    let mut scopes: BTreeSet<Scope> = text
        .unwrap_or_default()
        .split_ascii_whitespace()
        .filter_map(|name| name.parse().ok())
        .filter(|scope| offered().any(|offered| offered == *scope))
        .collect();
    if scopes.is_empty() {
        scopes.insert(Scope::AppsInvoke);
    }
    scopes
}

fn scope_text(scopes: &BTreeSet<Scope>) -> String {
    scopes
        .iter()
        .map(|scope| scope.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `redirect_uri` with OAuth response parameters added to its query.
fn redirect_with(redirect_uri: &str, params: &[(&str, &str)]) -> String {
    match url::Url::parse(redirect_uri) {
        Ok(mut url) => {
            {
                let mut query = url.query_pairs_mut();
                for (name, value) in params {
                    query.append_pair(name, value);
                }
            }
            url.into()
        }
        Err(_) => redirect_uri.to_owned(),
    }
}

// ---------------------------------------------------------------------------
// Metadata and registration

async fn metadata(State(core): State<Arc<Core>>) -> Response {
    let issuer = &core.oauth.issuer;
    let mut response = Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/oauth/authorize"),
        "token_endpoint": format!("{issuer}/oauth/token"),
        "registration_endpoint": format!("{issuer}/oauth/register"),
        "revocation_endpoint": format!("{issuer}/oauth/revoke"),
        "scopes_supported": sasha_contract::tools::MCP_CLIENT_SCOPES,
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

#[derive(Deserialize)]
struct RegistrationRequest {
    redirect_uris: Option<Vec<String>>,
    client_name: Option<String>,
    token_endpoint_auth_method: Option<String>,
    grant_types: Option<Vec<String>>,
    response_types: Option<Vec<String>>,
}

fn metadata_error(description: impl Into<String>) -> OAuthError {
    OAuthError::new("invalid_client_metadata", description)
}

async fn register(State(core): State<Arc<Core>>, headers: HeaderMap, body: Bytes) -> Response {
    match register_client(&core, &headers, &body).await {
        Ok(response) => cors(response),
        Err(error) => error.into_response(),
    }
}

async fn register_client(
    core: &Core,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, OAuthError> {
    if body.len() > MAX_FORM_BYTES {
        return Err(metadata_error(
            "the registration request is larger than 16 KiB",
        ));
    }
    if !content_type_is(headers, "application/json") {
        return Err(OAuthError::new(
            "invalid_request",
            "the registration request must be application/json",
        ));
    }
    sasha_proto::json_limits::check(body, &sasha_proto::json_limits::STUDIO_API)
        .map_err(|broken| metadata_error(broken.to_string()))?;
    let request: RegistrationRequest = serde_json::from_slice(body)
        .map_err(|error| metadata_error(format!("the registration request is invalid: {error}")))?;
    let uris = request.redirect_uris.unwrap_or_default();
    if uris.is_empty() || uris.len() > MAX_REDIRECT_URIS {
        return Err(OAuthError::new(
            "invalid_redirect_uri",
            "redirect_uris must list 1 to 10 redirect URIs",
        ));
    }
    if let Some(problem) = uris.iter().find_map(|uri| redirect_uri_problem(uri)) {
        return Err(OAuthError::new("invalid_redirect_uri", problem));
    }
    let name = request
        .client_name
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "Unnamed client".to_owned());
    if name.chars().count() > MAX_CLIENT_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(metadata_error(
            "client_name has at most 100 characters and no control characters",
        ));
    }
    // RFC 7591 §2: the default is client_secret_basic.
    let method_text = request
        .token_endpoint_auth_method
        .as_deref()
        .unwrap_or("client_secret_basic");
    let method = ClientAuthMethod::parse(method_text).ok_or_else(|| {
        metadata_error(format!(
            "token_endpoint_auth_method {method_text:?} is not supported; use none, client_secret_post or client_secret_basic"
        ))
    })?;
    for grant in request.grant_types.iter().flatten() {
        if grant != "authorization_code" && grant != "refresh_token" {
            return Err(metadata_error(format!(
                "grant type {grant:?} is not supported; use authorization_code and refresh_token"
            )));
        }
    }
    if request.response_types.iter().flatten().any(|r| r != "code") {
        return Err(metadata_error("only the response type code is supported"));
    }
    if let Err(wait) = core.oauth.admit_registration(ClientAddress::of(headers)) {
        let mut error = OAuthError::new(
            "temporarily_unavailable",
            format!(
                "too many client registrations from your address; {}",
                try_again_in(wait)
            ),
        );
        error.retry_after = Some(wait);
        return Err(error);
    }
    let store = core.store.clone();
    let (stored_name, stored_uris) = (name.clone(), uris.clone());
    let registered =
        blocking(move || store.oauth_register_client(&stored_name, &stored_uris, method))
            .await
            .map_err(|error| OAuthError::from_store(&error))?
            .map_err(OAuthError::from_refusal)?;
    let RegisteredClient {
        client,
        client_secret,
    } = registered;
    let mut body = json!({
        "client_id": client.client_id,
        "client_id_issued_at": client.created_at,
        "client_name": client.client_name,
        "redirect_uris": client.redirect_uris,
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method.as_str(),
    });
    if let (Some(secret), Value::Object(map)) = (client_secret, &mut body) {
        map.insert("client_secret".into(), secret.into());
        map.insert("client_secret_expires_at".into(), 0.into());
    }
    Ok(no_store((StatusCode::CREATED, Json(body))))
}

fn content_type_is(headers: &HeaderMap, expected: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|value| value.trim().eq_ignore_ascii_case(expected))
}

// ---------------------------------------------------------------------------
// The authorization endpoint

async fn authorize(
    State(core): State<Arc<Core>>,
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
    let store = core.store.clone();
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
    let challenge = match authorization_problem(&core.oauth, &params) {
        Ok(challenge) => challenge,
        Err((error, description)) => {
            return refuse_authorization(&core, &headers, &refused, error, description).await;
        }
    };
    let now = crate::store::system_clock();
    let pending = Pending {
        client_id: client.client_id.clone(),
        client_name: client.client_name.clone(),
        redirect_uri: redirect_uri.clone(),
        state: state.clone(),
        code_challenge: challenge,
        requested: requested_scopes(params.get("scope").map(String::as_str)),
        created: Instant::now(),
        expires_at: now.saturating_add(i64::try_from(PENDING_TTL.as_secs()).unwrap_or(600)),
    };
    match core.oauth.park(pending) {
        Some(id) => see_other(&format!("/#/connect/{id}")),
        None => {
            refuse_authorization(
                &core,
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
    core: &Core,
    headers: &HeaderMap,
    refused: &Refused<'_>,
    error: &'static str,
    description: &str,
) -> Response {
    if redirect_trusted(core, headers, refused.client_id, refused.redirect_uri).await {
        let mut pairs = vec![("error", error), ("error_description", description)];
        if let Some(state) = refused.state {
            pairs.push(("state", state));
        }
        pairs.push(("iss", &core.oauth.issuer));
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
    core: &Core,
    headers: &HeaderMap,
    client_id: &str,
    redirect_uri: &str,
) -> bool {
    let Ok(principal) = session_user(core, headers).await else {
        return false;
    };
    let store = core.store.clone();
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

// ---------------------------------------------------------------------------
// Consent (the Studio page, signed-in browser sessions only)

/// The caller of a consent or connection change: a same-origin JSON request
/// (403 otherwise) from a signed-in browser session (401 when anonymous, the
/// hidden 404 for any other credential).
async fn signed_in_change(
    core: &Core,
    method: &Method,
    headers: &HeaderMap,
    has_body: bool,
) -> Result<crate::store::Principal, Response> {
    same_origin_json(core, method, headers, has_body)?;
    session_user(core, headers).await
}

fn redirect_host(redirect_uri: &str) -> String {
    url::Url::parse(redirect_uri)
        .ok()
        .map(|url| match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => format!("{}:", url.scheme()),
        })
        .unwrap_or_default()
}

/// `GET /api/oauth/requests/{id}`: what the consent card shows.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConsentRequest {
    request_id: String,
    client: ConsentClient,
    /// Where the person returns, exactly as the client sent it.
    redirect_uri: String,
    /// Its host and port, to show prominently.
    redirect_host: String,
    /// The MCP resource the tokens will be for.
    resource: String,
    requested_scopes: Vec<String>,
    /// The scopes the signed-in person's role may hold.
    offered_scopes: Vec<OfferedScope>,
    /// Requested scopes the role may not hold (shown, not offered).
    unavailable_scopes: Vec<String>,
    /// Unix seconds.
    expires_at: i64,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct ConsentClient {
    id: String,
    /// The name the client registered (self-declared).
    name: String,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct OfferedScope {
    scope: String,
    description: String,
    requested: bool,
}

/// The answer to approve or deny: where the browser goes next.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Decision {
    redirect_to: String,
}

/// One of the caller's connected clients.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConnectionEntry {
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
pub(crate) struct ConnectionsResponse {
    connections: Vec<ConnectionEntry>,
}

#[utoipa::path(get, path = "/api/oauth/requests/{requestId}", params(("requestId" = String, Path)), responses(
    (status = 200, description = "the parked authorization request, for a signed-in browser session; Cache-Control: no-store", body = ConsentRequest),
    (status = 401, description = "anonymous", body = crate::api::ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session, or an unknown, used or expired request", body = crate::api::ErrorEnvelope)))]
pub(crate) async fn request_details(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let principal = match session_user(&core, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let Some(pending) = core.oauth.peek(&id) else {
        return hidden_not_found().into_response();
    };
    let role = principal.user.role;
    let names = |scopes: &mut dyn Iterator<Item = &Scope>| {
        scopes.map(|scope| scope.as_str().to_owned()).collect()
    };
    no_store(Json(ConsentRequest {
        request_id: id,
        redirect_host: redirect_host(&pending.redirect_uri),
        redirect_uri: pending.redirect_uri,
        resource: core.oauth.resource.clone(),
        requested_scopes: names(&mut pending.requested.iter()),
        offered_scopes: offered()
            .filter(|scope| role.allows(*scope))
            .map(|scope| OfferedScope {
                scope: scope.as_str().to_owned(),
                description: scope_description(scope).to_owned(),
                requested: pending.requested.contains(&scope),
            })
            .collect(),
        unavailable_scopes: names(&mut pending.requested.iter().filter(|s| !role.allows(**s))),
        expires_at: pending.expires_at,
        client: ConsentClient {
            id: pending.client_id,
            name: pending.client_name,
        },
    }))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApproveBody {
    /// The scopes the person chose: `apps:invoke`, `apps:write` (admin and
    /// staff only) and `apps:author`, the last two with `apps:invoke`.
    scopes: Vec<String>,
}

/// The scopes a person chose, checked against what MCP clients are offered
/// and the person's role.
fn chosen_scopes(names: &[String], role: UserRole) -> Result<BTreeSet<Scope>, AppError> {
    let mut chosen = BTreeSet::new();
    for name in names {
        let scope: Scope = name
            .parse()
            .ok()
            .filter(|scope| offered().any(|offered| offered == *scope))
            .ok_or_else(|| {
                AppError::new(
                    ErrorCode::InputInvalid,
                    format!("{name:?} is not a scope MCP clients can be given; choose apps:invoke, apps:write or apps:author"),
                )
            })?;
        if !role.allows(scope) {
            return Err(AppError::new(
                ErrorCode::AccessDenied,
                format!("a {role} user cannot hold {scope}; only admin and staff can"),
            ));
        }
        chosen.insert(scope);
    }
    if chosen.is_empty() {
        return Err(AppError::new(
            ErrorCode::InputInvalid,
            "choose at least one scope to allow",
        ));
    }
    for needs_invoke in [Scope::AppsWrite, Scope::AppsAuthor] {
        if chosen.contains(&needs_invoke) && !chosen.contains(&Scope::AppsInvoke) {
            return Err(AppError::new(
                ErrorCode::InputInvalid,
                format!("{needs_invoke} works only together with apps:invoke"),
            ));
        }
    }
    Ok(chosen)
}

#[utoipa::path(post, path = "/api/oauth/requests/{requestId}/approve", params(("requestId" = String, Path)), request_body = ApproveBody, responses(
    (status = 200, description = "consent recorded; the browser goes to redirectTo, which carries the code, state and iss", body = Decision),
    (status = 400, description = "no scope, an unknown scope, or apps:write without apps:invoke; the request stays usable", body = crate::api::ErrorEnvelope),
    (status = 401, description = "anonymous", body = crate::api::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, or a scope the role may not hold; the request stays usable", body = crate::api::ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session, or an unknown, used or expired request", body = crate::api::ErrorEnvelope)))]
pub(crate) async fn approve(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let principal = match signed_in_change(&core, &method, &headers, true).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let body: ApproveBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let scopes = match chosen_scopes(&body.scopes, principal.user.role) {
        Ok(scopes) => scopes,
        Err(error) => return error.into_response(),
    };
    // Only a valid decision consumes the request, so a refused one loses nothing.
    let Some(pending) = core.oauth.take(&id) else {
        return hidden_not_found().into_response();
    };
    let store = core.store.clone();
    let (user_id, resource) = (principal.user.id.clone(), core.oauth.resource.clone());
    let (client_id, redirect_uri, challenge) = (
        pending.client_id.clone(),
        pending.redirect_uri.clone(),
        pending.code_challenge.clone(),
    );
    let granted = scopes.clone();
    let code = match blocking(move || {
        store.oauth_consent(&Consent {
            client_id: &client_id,
            user_id: &user_id,
            scopes: &granted,
            resource: &resource,
            redirect_uri: &redirect_uri,
            code_challenge: &challenge,
        })
    })
    .await
    {
        Ok(code) => code,
        Err(error) => return error.into_response(),
    };
    let mut pairs = vec![("code", code.as_str())];
    if let Some(state) = &pending.state {
        pairs.push(("state", state));
    }
    pairs.push(("iss", &core.oauth.issuer));
    tracing::info!(user = %principal.user.id, client = %pending.client_id, scopes = %scope_text(&scopes), "oauth consent given");
    decision(&redirect_with(&pending.redirect_uri, &pairs))
}

#[utoipa::path(post, path = "/api/oauth/requests/{requestId}/deny", params(("requestId" = String, Path)), responses(
    (status = 200, description = "declined; the browser goes to redirectTo, which carries error=access_denied, state and iss", body = Decision),
    (status = 401, description = "anonymous", body = crate::api::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = crate::api::ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session, or an unknown, used or expired request", body = crate::api::ErrorEnvelope)))]
pub(crate) async fn deny(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = signed_in_change(&core, &method, &headers, false).await {
        return response;
    }
    let Some(pending) = core.oauth.take(&id) else {
        return hidden_not_found().into_response();
    };
    let mut pairs = vec![
        ("error", "access_denied"),
        ("error_description", "the user declined the connection"),
    ];
    if let Some(state) = &pending.state {
        pairs.push(("state", state));
    }
    pairs.push(("iss", &core.oauth.issuer));
    decision(&redirect_with(&pending.redirect_uri, &pairs))
}

fn decision(redirect_to: &str) -> Response {
    no_store(Json(Decision {
        redirect_to: redirect_to.to_owned(),
    }))
}

#[utoipa::path(get, path = "/api/oauth/connections", responses(
    (status = 200, description = "the caller's live OAuth connections, newest first; Cache-Control: no-store", body = ConnectionsResponse),
    (status = 401, description = "anonymous", body = crate::api::ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session", body = crate::api::ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = crate::api::ErrorEnvelope)))]
pub(crate) async fn connections(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    let principal = match session_user(&core, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let store = core.store.clone();
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

#[utoipa::path(delete, path = "/api/oauth/connections/{connectionId}", params(("connectionId" = String, Path)), responses(
    (status = 204, description = "revoked: every token of the connection stops working"),
    (status = 401, description = "anonymous", body = crate::api::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = crate::api::ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session, or not the caller's live connection", body = crate::api::ErrorEnvelope)))]
pub(crate) async fn revoke_connection(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let principal = match signed_in_change(&core, &method, &headers, false).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let store = core.store.clone();
    let user_id = principal.user.id;
    match blocking(move || store.oauth_revoke_connection(&user_id, &id, &user_id)).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => hidden_not_found().into_response(),
        Err(error) => error.into_response(),
    }
}

// ---------------------------------------------------------------------------
// The token and revocation endpoints

/// Reads a form body and authenticates the client: HTTP Basic, or
/// `client_id` (+ `client_secret`) in the body. A confidential client must
/// present its secret; a public client is identified by its id alone.
async fn client_form(
    core: &Core,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(String, HashMap<String, String>), OAuthError> {
    if body.len() > MAX_FORM_BYTES {
        return Err(OAuthError::new(
            "invalid_request",
            "the request is larger than 16 KiB",
        ));
    }
    if !content_type_is(headers, "application/x-www-form-urlencoded") {
        return Err(OAuthError::new(
            "invalid_request",
            "the request must be application/x-www-form-urlencoded",
        ));
    }
    let mut params = parse_params(body)?;
    let basic = basic_credentials(headers)?;
    let (client_id, secret) = match basic {
        Some((id, secret)) => {
            if params.get("client_id").is_some_and(|sent| *sent != id) {
                return Err(OAuthError::new(
                    "invalid_request",
                    "client_id differs from the Authorization header",
                ));
            }
            (id, Some(secret))
        }
        None => (
            params.get("client_id").cloned().ok_or_else(|| {
                OAuthError::new("invalid_client", "the client is not identified (client_id)")
            })?,
            params.remove("client_secret"),
        ),
    };
    let store = core.store.clone();
    let lookup = client_id.clone();
    let client = blocking(move || store.oauth_client(&lookup))
        .await
        .map_err(|error| OAuthError::from_store(&error))?
        .ok_or_else(|| OAuthError::new("invalid_client", "the client is not registered"))?;
    if client.auth_method != ClientAuthMethod::None {
        let Some(secret) = secret else {
            return Err(OAuthError::new(
                "invalid_client",
                "this client authenticates with its client secret",
            ));
        };
        let store = core.store.clone();
        let id = client_id.clone();
        let matches = blocking(move || store.oauth_client_secret_matches(&id, &secret))
            .await
            .map_err(|error| OAuthError::from_store(&error))?;
        if !matches {
            return Err(OAuthError::new(
                "invalid_client",
                "the client secret is not valid",
            ));
        }
    }
    Ok((client_id, params))
}

fn basic_credentials(headers: &HeaderMap) -> Result<Option<(String, String)>, OAuthError> {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
    else {
        return Ok(None);
    };
    let Some(encoded) = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))
    else {
        return Ok(None);
    };
    let invalid = || OAuthError::new("invalid_client", "the Basic credentials are malformed");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| invalid())?;
    let text = String::from_utf8(decoded).map_err(|_| invalid())?;
    let (id, secret) = text.split_once(':').ok_or_else(invalid)?;
    // RFC 6749 §2.3.1: both parts are form-urlencoded.
    let decode = |part: &str| {
        url::form_urlencoded::parse(format!("v={part}").as_bytes())
            .next()
            .map(|(_, value)| value.into_owned())
            .unwrap_or_default()
    };
    Ok(Some((decode(id), decode(secret))))
}

async fn token(State(core): State<Arc<Core>>, headers: HeaderMap, body: Bytes) -> Response {
    match issue(&core, &headers, &body).await {
        Ok(tokens) => {
            let response = Json(json!({
                "access_token": tokens.access_token,
                "token_type": "Bearer",
                "expires_in": tokens.expires_in,
                "refresh_token": tokens.refresh_token,
                "scope": scope_text(&tokens.scopes),
            }));
            cors(no_store((
                [(header::PRAGMA, HeaderValue::from_static("no-cache"))],
                response,
            )))
        }
        Err(error) => error.into_response(),
    }
}

async fn issue(core: &Core, headers: &HeaderMap, body: &[u8]) -> Result<IssuedTokens, OAuthError> {
    let (client_id, params) = client_form(core, headers, body).await?;
    let required = |name: &str| {
        params.get(name).cloned().ok_or_else(|| {
            OAuthError::new(
                "invalid_request",
                format!("the parameter {name} is required"),
            )
        })
    };
    let resource = params
        .get("resource")
        .map(|resource| resource.trim_end_matches('/').to_owned());
    if resource
        .as_deref()
        .is_some_and(|resource| resource != core.oauth.resource)
    {
        return Err(OAuthError::new(
            "invalid_target",
            "tokens are issued only for this server's MCP resource",
        ));
    }
    let store = core.store.clone();
    let outcome = match params.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let (code, redirect_uri, verifier) = (
                required("code")?,
                required("redirect_uri")?,
                required("code_verifier")?,
            );
            blocking(move || {
                store.oauth_exchange_code(&CodeExchange {
                    client_id: &client_id,
                    code: &code,
                    redirect_uri: &redirect_uri,
                    code_verifier: &verifier,
                    resource: resource.as_deref(),
                })
            })
            .await
        }
        Some("refresh_token") => {
            let refresh = required("refresh_token")?;
            let scope = match params.get("scope") {
                None => None,
                Some(text) => Some(parse_exact_scopes(text)?),
            };
            blocking(move || {
                store.oauth_refresh(&client_id, &refresh, scope.as_ref(), resource.as_deref())
            })
            .await
        }
        Some(other) => {
            return Err(OAuthError::new(
                "unsupported_grant_type",
                format!(
                    "grant_type {other:?} is not supported; use authorization_code or refresh_token"
                ),
            ));
        }
        None => return Err(OAuthError::new("invalid_request", "grant_type is required")),
    };
    outcome
        .map_err(|error| OAuthError::from_store(&error))?
        .map_err(OAuthError::from_refusal)
}

/// A refresh request's `scope`: every name must be a known scope.
fn parse_exact_scopes(text: &str) -> Result<BTreeSet<Scope>, OAuthError> {
    let scopes = text
        .split_ascii_whitespace()
        .map(|name| {
            name.parse::<Scope>()
                .map_err(|_| OAuthError::new("invalid_scope", format!("unknown scope {name:?}")))
        })
        .collect::<Result<BTreeSet<_>, _>>()?;
    if scopes.is_empty() {
        return Err(OAuthError::new("invalid_scope", "scope is empty"));
    }
    Ok(scopes)
}

async fn revoke(State(core): State<Arc<Core>>, headers: HeaderMap, body: Bytes) -> Response {
    let (client_id, params) = match client_form(&core, &headers, &body).await {
        Ok(found) => found,
        Err(error) => return error.into_response(),
    };
    let Some(token) = params.get("token").cloned() else {
        return OAuthError::new("invalid_request", "the parameter token is required")
            .into_response();
    };
    let store = core.store.clone();
    match blocking(move || store.oauth_revoke_token(&client_id, &token)).await {
        Ok(()) => cors(StatusCode::OK.into_response()),
        Err(error) => OAuthError::from_store(&error).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_follow_the_native_app_rules() {
        for ok in [
            "https://client.example.com/callback",
            "http://127.0.0.1:33418/callback",
            "http://[::1]/cb",
            "http://localhost:8080/oauth/callback",
            "com.example.app:/oauth2redirect",
            "https://claude.ai/api/mcp/auth_callback?x=1",
        ] {
            assert_eq!(redirect_uri_problem(ok), None, "{ok}");
        }
        for bad in [
            "http://client.example.com/callback",
            "https://client.example.com/cb#frag",
            "https://user:pw@client.example.com/cb",
            "javascript:alert(1)",
            "data:text/html,hi",
            "file:///etc/passwd",
            "myapp:/cb",
            "/relative/callback",
            "http://127.0.0.2.example.com/cb",
        ] {
            assert!(redirect_uri_problem(bad).is_some(), "{bad}");
        }
        assert!(redirect_uri_problem(&format!("https://a.example/{}", "x".repeat(2000))).is_some());
    }

    #[test]
    fn redirects_match_exactly_except_a_loopback_ip_port() {
        let registered = vec![
            "http://127.0.0.1/callback".to_owned(),
            "http://localhost:4000/cb".to_owned(),
            "https://app.example.com/cb".to_owned(),
            "http://[::1]:1/v6".to_owned(),
        ];
        assert!(redirect_matches(
            &registered,
            "http://127.0.0.1:51234/callback"
        ));
        assert!(redirect_matches(&registered, "http://127.0.0.1/callback"));
        assert!(redirect_matches(&registered, "http://[::1]:9999/v6"));
        assert!(redirect_matches(&registered, "https://app.example.com/cb"));
        assert!(redirect_matches(&registered, "http://localhost:4000/cb"));
        for refused in [
            "http://127.0.0.1:51234/callback/",
            "http://127.0.0.1:51234/other",
            "http://127.0.0.1:51234/callback?x=1",
            "http://localhost:4001/cb",
            "https://app.example.com/cb/",
            "https://app.example.com:8443/cb",
            "https://app.example.com/cb?extra=1",
            "https://127.0.0.1/callback",
            "http://evil.example/callback",
        ] {
            assert!(!redirect_matches(&registered, refused), "{refused}");
        }
    }

    #[test]
    fn repeated_parameters_are_refused() {
        assert!(parse_params(b"a=1&b=2").is_ok());
        let error = parse_params(b"code=1&code=2").unwrap_err();
        assert_eq!(error.error, "invalid_request");
        assert!(error.description.contains("code"));
        // Empty values are absent.
        assert!(!parse_params(b"scope=").unwrap().contains_key("scope"));
    }

    #[test]
    fn consent_scopes_follow_the_role() {
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            chosen_scopes(&names(&["apps:invoke", "apps:write"]), UserRole::Staff).unwrap(),
            BTreeSet::from([Scope::AppsInvoke, Scope::AppsWrite])
        );
        let member =
            chosen_scopes(&names(&["apps:invoke", "apps:write"]), UserRole::Member).unwrap_err();
        assert_eq!(member.code, ErrorCode::AccessDenied);
        // Every offered name is a scope, and a member may author apps.
        assert_eq!(
            offered().count(),
            sasha_contract::tools::MCP_CLIENT_SCOPES.len()
        );
        assert_eq!(
            chosen_scopes(&names(&["apps:invoke", "apps:author"]), UserRole::Member).unwrap(),
            BTreeSet::from([Scope::AppsInvoke, Scope::AppsAuthor])
        );
        let alone = chosen_scopes(&names(&["apps:author"]), UserRole::Member).unwrap_err();
        assert_eq!(alone.code, ErrorCode::InputInvalid);
        assert_eq!(
            chosen_scopes(&names(&[]), UserRole::Admin)
                .unwrap_err()
                .code,
            ErrorCode::InputInvalid
        );
        assert_eq!(
            chosen_scopes(&names(&["chat:use"]), UserRole::Admin)
                .unwrap_err()
                .code,
            ErrorCode::InputInvalid
        );
        assert_eq!(
            chosen_scopes(&names(&["apps:write"]), UserRole::Admin)
                .unwrap_err()
                .code,
            ErrorCode::InputInvalid
        );
    }

    #[test]
    fn requested_scopes_keep_only_what_mcp_clients_are_offered() {
        assert_eq!(
            requested_scopes(Some("openid apps:write chat:use apps:invoke")),
            BTreeSet::from([Scope::AppsInvoke, Scope::AppsWrite])
        );
        assert_eq!(requested_scopes(None), BTreeSet::from([Scope::AppsInvoke]));
    }

    #[test]
    fn parked_requests_are_bounded_and_single_use() {
        let state = OAuthState::new("http://localhost:3007", "http://localhost:3007");
        let pending = Pending {
            client_id: "c".into(),
            client_name: "n".into(),
            redirect_uri: "http://127.0.0.1/cb".into(),
            state: None,
            code_challenge: "x".repeat(43),
            requested: BTreeSet::from([Scope::AppsInvoke]),
            created: Instant::now(),
            expires_at: 0,
        };
        let first = state.park(pending.clone()).unwrap();
        for _ in 1..MAX_PENDING {
            assert!(state.park(pending.clone()).is_some());
        }
        assert!(state.park(pending.clone()).is_none(), "the bound holds");
        assert!(state.peek(&first).is_some());
        assert!(state.take(&first).is_some());
        assert!(state.take(&first).is_none(), "taken once");
        assert!(state.park(pending).is_some(), "taking one makes room");
    }

    #[test]
    fn registrations_are_budgeted_per_client_address() {
        let state = OAuthState::new("http://localhost:3007", "http://localhost:3007");
        let address = |text: &str| ClientAddress::from_ip(Some(text.parse().unwrap()));
        for _ in 0..REGISTRATION_BUDGET.0 {
            assert!(state.admit_registration(address("192.0.2.1")).is_ok());
        }
        let wait = state.admit_registration(address("192.0.2.1")).unwrap_err();
        assert!(wait <= REGISTRATION_BUDGET.1, "{wait:?}");
        // Another address, and the no-proxy address, have their own budgets.
        assert!(state.admit_registration(address("192.0.2.2")).is_ok());
        assert!(
            state
                .admit_registration(ClientAddress::from_ip(None))
                .is_ok()
        );
    }

    #[test]
    fn basic_credentials_are_form_decoded() {
        let mut headers = HeaderMap::new();
        let encoded = base64::engine::general_purpose::STANDARD.encode("my%20client:s%3Acret");
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {encoded}")).unwrap(),
        );
        assert_eq!(
            basic_credentials(&headers).unwrap(),
            Some(("my client".to_owned(), "s:cret".to_owned()))
        );
    }
}
