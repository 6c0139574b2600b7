//! The Studio HTTP API, `/api/*`.
//!
//! Callers are browser sessions (the session cookie) or, for scripts, access
//! tokens (`Authorization: Bearer`). API keys and chat-session tokens are system
//! credentials: they are refused here. Every answer is JSON; every failure is the
//! closed envelope.
//!
//! Oracles are closed on purpose: an anonymous request gets the same 401 whatever
//! it asked for; a bad credential, a denied app, an unknown app and an
//! unknown or stale revision all get the same hidden 404, byte for byte (its
//! diagnostic id is the nil UUID, since nothing about it needs diagnosing).
//! State-changing routes accept only same-origin JSON requests.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use sasha_proto::web::{bearer, cookie, session_cookie_name};
use sasha_proto::{AppError, ErrorCode};
use serde::{Deserialize, Serialize};
use utoipa::{OpenApi, ToSchema};

use crate::Core;
use crate::catalogue::AppEntry;
use crate::store::{AppAccess, Principal, PrincipalKind, Scope, StoreError, UserRole};

/// Failed sign-ins allowed per user name within [`LOGIN_WINDOW`].
pub(crate) const MAX_LOGIN_FAILURES: usize = 10;
/// The window failed sign-ins are counted in.
pub(crate) const LOGIN_WINDOW: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Failed sign-ins per lowercased user name, oldest first.
type FailureLog = std::collections::HashMap<String, std::collections::VecDeque<std::time::Instant>>;

/// Counts failed sign-ins per user name (lowercased), whether or not the user
/// exists, so throttling reveals nothing; a success clears the count. Process
/// memory: one studio-core serves the API.
#[derive(Debug, Default)]
pub(crate) struct LoginThrottle {
    failures: std::sync::Mutex<FailureLog>,
}

impl LoginThrottle {
    /// Seconds until `username` may try again, or `None` when it may now.
    fn blocked_for(&self, username: &str) -> Option<u64> {
        let now = std::time::Instant::now();
        let mut failures = self.failures.lock().ok()?;
        let recent = failures.get_mut(&username.to_lowercase())?;
        while recent
            .front()
            .is_some_and(|at| now.duration_since(*at) > LOGIN_WINDOW)
        {
            recent.pop_front();
        }
        (recent.len() >= MAX_LOGIN_FAILURES).then(|| {
            let oldest = recent.front().copied().unwrap_or(now);
            LOGIN_WINDOW
                .saturating_sub(now.duration_since(oldest))
                .as_secs()
                .max(1)
        })
    }

    fn record_failure(&self, username: &str) {
        if let Ok(mut failures) = self.failures.lock() {
            // Bound the map: a flood of random names cannot grow it forever.
            if failures.len() > 100_000 {
                failures.clear();
            }
            let recent = failures.entry(username.to_lowercase()).or_default();
            recent.push_back(std::time::Instant::now());
            while recent.len() > MAX_LOGIN_FAILURES {
                recent.pop_front();
            }
        }
    }

    fn clear(&self, username: &str) {
        if let Ok(mut failures) = self.failures.lock() {
            failures.remove(&username.to_lowercase());
        }
    }
}

/// The `/api` routes.
pub(crate) fn routes() -> axum::Router<Arc<Core>> {
    axum::Router::new()
        .route("/api/openapi.json", get(openapi))
        .route("/api/auth/login", post(login))
        .route("/api/auth/logout", post(logout))
        .route("/api/me", get(me))
        .route("/api/apps", get(list_apps))
        .route("/api/apps/{app_id}/resource", get(resource))
        .route("/api/apps/{app_id}/access", get(list_access))
        .route("/api/apps/{app_id}/recovery", get(recovery))
        .route(
            "/api/apps/{app_id}/access/{user_id}",
            put(grant_access).delete(revoke_access),
        )
}

/// `response` with `Cache-Control: no-store`: answers that depend on who asks.
pub(crate) fn no_store(response: impl IntoResponse) -> Response {
    let mut response = response.into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The hidden 404: identical for every case it covers.
pub(crate) fn hidden_not_found() -> AppError {
    let mut error = AppError::from_code(ErrorCode::NotFound);
    error.diagnostic_id = uuid_nil();
    error
}

/// The 401 of an anonymous request, with its `WWW-Authenticate` challenge.
fn unauthenticated() -> Response {
    let mut error = AppError::new(ErrorCode::Unauthenticated, "sign in to continue");
    error.diagnostic_id = uuid_nil();
    let mut response = error.into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"sasha\""),
    );
    response
}

fn uuid_nil() -> String {
    "00000000-0000-0000-0000-000000000000".to_owned()
}

/// A store failure as the user sees it: busy is retryable, the rest internal.
pub(crate) fn store_error(error: StoreError) -> AppError {
    match error {
        StoreError::Busy => {
            AppError::new(ErrorCode::NotReady, "the account store is busy; try again")
        }
        other => {
            let app_error = AppError::from_code(ErrorCode::Internal);
            tracing::error!(diagnostic_id = %app_error.diagnostic_id, error = %other, "core store failed");
            app_error
        }
    }
}

/// Runs blocking store work off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, AppError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(store_error),
        Err(_) => Err(AppError::from_code(ErrorCode::Internal)),
    }
}

/// Who is calling.
enum Caller {
    Anonymous,
    Principal(Principal),
}

/// Identifies the caller. A presented credential that does not resolve is the
/// hidden 404, never a hint that it was wrong.
async fn caller(core: &Core, headers: &HeaderMap) -> Result<Caller, Response> {
    let name = session_cookie_name(core.secure_cookies());
    if let Some(secret) = cookie(headers, name) {
        let (store, secret) = (core.store.clone(), secret.to_owned());
        return match blocking(move || store.session(&secret)).await {
            Ok(Some(principal)) => Ok(Caller::Principal(principal)),
            Ok(None) => Err(hidden_not_found().into_response()),
            Err(error) => Err(error.into_response()),
        };
    }
    if let Some(secret) = bearer(headers) {
        let (store, secret) = (core.store.clone(), secret.to_owned());
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
async fn user(core: &Core, headers: &HeaderMap) -> Result<Principal, Response> {
    match caller(core, headers).await? {
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
pub(crate) async fn session_user(core: &Core, headers: &HeaderMap) -> Result<Principal, Response> {
    match caller(core, headers).await? {
        Caller::Anonymous => Err(unauthenticated()),
        Caller::Principal(principal) if principal.kind == PrincipalKind::Session => Ok(principal),
        Caller::Principal(_) => Err(hidden_not_found().into_response()),
    }
}

/// Refuses a state-changing request that is not a same-origin JSON request
/// (security catalogue F5): the `Origin` must be the Studio origin, or, without
/// an `Origin`, `Sec-Fetch-Site` must say `same-origin`; the body must be JSON.
pub(crate) fn same_origin_json(
    core: &Core,
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
    let same_origin = match origin {
        Some(origin) => origin == core.origins.studio.as_str(),
        None => fetch_site.is_none_or(|site| site == "same-origin"),
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

/// Parses a JSON body into `T`, refusing unknown fields with a clear message.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Response> {
    serde_json::from_slice(body).map_err(|error| {
        AppError::new(
            ErrorCode::InputInvalid,
            format!(
                "the request body is invalid: {}",
                error.to_string().to_lowercase()
            ),
        )
        .into_response()
    })
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
struct MeResponse {
    id: String,
    username: String,
    /// `admin`, `staff` or `member`.
    role: String,
    /// Held scopes: `chat:use`, `apps:invoke`, `apps:write`.
    scopes: Vec<String>,
}

/// One app the caller may use.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct AppDescriptor {
    id: String,
    name: String,
    description: String,
    version: String,
    /// sha256 of the current resource.
    revision: String,
    /// `ui://sasha/apps/<id>/revisions/<revision>`.
    resource_uri: String,
    /// `{chat, files, data}` as declared in the manifest.
    #[schema(value_type = Object)]
    capabilities: serde_json::Value,
    /// `use` or `manage`.
    access: String,
}

/// `GET /api/apps`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct AppsResponse {
    apps: Vec<AppDescriptor>,
    /// The origin the app sandbox is served from.
    sandbox_origin: String,
}

/// One immutable app resource, as MCP `resources/read` returns it.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ResourceResponse {
    uri: String,
    /// `text/html;profile=mcp-app`.
    mime_type: String,
    /// The assembled HTML document.
    text: String,
    /// `{ui: {csp, permissions, prefersBorder, sasha}}`.
    #[serde(rename = "_meta")]
    #[schema(value_type = Object)]
    meta: serde_json::Value,
}

/// One grant on an app.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct GrantEntry {
    user_id: String,
    username: String,
    /// `use` or `manage`.
    access: String,
    /// Unix seconds.
    granted_at: i64,
}

/// `GET /api/apps/:appId/access`.
#[derive(Serialize, ToSchema)]
struct GrantsResponse {
    grants: Vec<GrantEntry>,
}

/// The access now held.
#[derive(Serialize, ToSchema)]
struct GrantResponse {
    /// `use` or `manage`.
    access: String,
}

/// The closed error envelope every failure uses.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ErrorEnvelope {
    /// One `APP_*` code of the closed registry.
    code: String,
    message: String,
    retryable: bool,
    diagnostic_id: String,
    #[schema(value_type = Option<Object>)]
    details: Option<serde_json::Value>,
}

/// The OpenAPI document of `/api`, generated from the handlers below.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Sasha Studio API",
        description = "The Studio HTTP API: sessions, apps, resources, grants, and OAuth consent and connections"
    ),
    paths(
        login,
        logout,
        me,
        list_apps,
        resource,
        recovery,
        list_access,
        grant_access,
        revoke_access,
        crate::oauth::request_details,
        crate::oauth::approve,
        crate::oauth::deny,
        crate::oauth::connections,
        crate::oauth::revoke_connection
    ),
    components(schemas(
        LoginRequest,
        GrantRequest,
        MeResponse,
        AppDescriptor,
        AppsResponse,
        ResourceResponse,
        crate::recovery::RecoveryDescriptor,
        crate::recovery::RecoveryTable,
        crate::recovery::RecoveryTools,
        crate::recovery::RecoveryField,
        GrantEntry,
        GrantsResponse,
        GrantResponse,
        ErrorEnvelope,
        crate::oauth::ConsentRequest,
        crate::oauth::ConsentClient,
        crate::oauth::OfferedScope,
        crate::oauth::ApproveBody,
        crate::oauth::Decision,
        crate::oauth::ConnectionEntry,
        crate::oauth::ConnectionsResponse
    ))
)]
pub(crate) struct ApiDoc;

/// `GET /api/openapi.json`.
async fn openapi() -> Response {
    let mut response = Json(ApiDoc::openapi()).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Sign-in credentials.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct LoginRequest {
    username: String,
    password: String,
}

/// `POST /api/auth/login`: `{username, password}` → the session cookie.
#[utoipa::path(post, path = "/api/auth/login", request_body = LoginRequest, responses(
    (status = 200, description = "signed in; sets the session cookie", body = MeResponse),
    (status = 400, description = "malformed body", body = ErrorEnvelope),
    (status = 401, description = "wrong user name or password", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 415, description = "body is not application/json", body = ErrorEnvelope),
    (status = 429, description = "too many failed sign-ins for this user name; see Retry-After", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn login(
    State(core): State<Arc<Core>>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(response) = same_origin_json(&core, &method, &headers, true) {
        return response;
    }
    let request: LoginRequest = match parse_body(&body) {
        Ok(request) => request,
        Err(response) => return response,
    };
    if let Some(seconds) = core.login_throttle.blocked_for(&request.username) {
        let mut response = AppError::new(
            ErrorCode::Busy,
            format!(
                "too many failed sign-ins for this user name; try again in {} minutes",
                seconds.div_ceil(60)
            ),
        )
        .into_response();
        if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return response;
    }
    let username = request.username.clone();
    let store = core.store.clone();
    let outcome = blocking(move || {
        let Some(user) = store.verify_login(&request.username, &request.password)? else {
            return Ok(None);
        };
        let secret = store.create_session(&user.id)?;
        let principal = store.session(&secret)?;
        Ok(principal.map(|principal| (secret, principal)))
    })
    .await;
    match outcome {
        Ok(Some((secret, principal))) => {
            core.login_throttle.clear(&username);
            let cookie = format!(
                "{}={secret}; Path=/; HttpOnly; SameSite=Lax{}",
                session_cookie_name(core.secure_cookies()),
                if core.secure_cookies() {
                    "; Secure"
                } else {
                    ""
                }
            );
            let mut response = Json(me_json(&principal)).into_response();
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Ok(None) => {
            core.login_throttle.record_failure(&username);
            let mut error = AppError::new(
                ErrorCode::Unauthenticated,
                "the user name or password is wrong",
            );
            error.diagnostic_id = uuid_nil();
            error.into_response()
        }
        Err(error) => error.into_response(),
    }
}

/// `POST /api/auth/logout`: ends the browser session.
#[utoipa::path(post, path = "/api/auth/logout", responses(
    (status = 204, description = "signed out; clears the session cookie"),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope)))]
async fn logout(State(core): State<Arc<Core>>, method: Method, headers: HeaderMap) -> Response {
    if let Err(response) = same_origin_json(&core, &method, &headers, false) {
        return response;
    }
    let name = session_cookie_name(core.secure_cookies());
    if let Some(secret) = cookie(&headers, name) {
        let (store, secret) = (core.store.clone(), secret.to_owned());
        if let Err(error) = blocking(move || store.delete_session(&secret)).await {
            return error.into_response();
        }
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    let clear = format!(
        "{name}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{}",
        if core.secure_cookies() {
            "; Secure"
        } else {
            ""
        }
    );
    if let Ok(value) = HeaderValue::from_str(&clear) {
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
async fn me(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    match user(&core, &headers).await {
        Ok(principal) => Json(me_json(&principal)).into_response(),
        Err(response) => response,
    }
}

/// `GET /api/apps`: the apps the caller may use, with their access and the
/// sandbox origin.
#[utoipa::path(get, path = "/api/apps", responses(
    (status = 200, description = "apps the caller may use", body = AppsResponse),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn list_apps(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    let principal = match user(&core, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let snapshot = core.catalogue.current();
    let granted = match core.granted_apps(&principal.user.id).await {
        Ok(granted) => granted,
        Err(error) => return error.into_response(),
    };
    let apps: Vec<AppDescriptor> = granted
        .iter()
        .filter_map(|(id, access)| match snapshot.apps.get(id) {
            Some(AppEntry::Valid(package)) => Some(AppDescriptor {
                id: id.clone(),
                name: package.manifest.name.clone(),
                description: package.manifest.description.clone(),
                version: package.manifest.version.clone(),
                revision: package.resource.revision.clone(),
                resource_uri: package.resource.uri.clone(),
                capabilities: serde_json::to_value(package.manifest.capabilities)
                    .unwrap_or_default(),
                access: access.as_str().to_owned(),
            }),
            _ => None,
        })
        .collect();
    no_store(Json(AppsResponse {
        apps,
        sandbox_origin: core.origins.sandbox.as_str().to_owned(),
    }))
}

#[derive(Deserialize)]
struct RevisionQuery {
    revision: Option<String>,
}

/// `GET /api/apps/:appId/resource?revision=`: the exact resource, to the
/// trusted Studio host, for a caller with `use`.
#[utoipa::path(get, path = "/api/apps/{appId}/resource", params(("appId" = String, Path), ("revision" = String, Query, description = "the sha256 revision")), responses(
    (status = 200, description = "the exact resource; Cache-Control: no-store", body = ResourceResponse),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn resource(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    Query(query): Query<RevisionQuery>,
    headers: HeaderMap,
) -> Response {
    let principal = match user(&core, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let granted = match core.granted_apps(&principal.user.id).await {
        Ok(granted) => granted,
        Err(error) => return error.into_response(),
    };
    let Some(revision) = query.revision.filter(|_| granted.contains_key(&app_id)) else {
        return hidden_not_found().into_response();
    };
    let Ok(resource) = core.catalogue.resource(&app_id, &revision) else {
        return hidden_not_found().into_response();
    };
    no_store(Json(ResourceResponse {
        uri: resource.uri.clone(),
        mime_type: resource.mime_type.clone(),
        text: resource.html.clone(),
        meta: serde_json::json!({"ui": resource.meta}),
    }))
}

/// `GET /api/apps/:appId/recovery`: the schema-derived table and field
/// descriptor of Studio's recovery grid. Needs `apps:invoke` and `manage` on
/// the app (an app-level authority; the platform role does not matter).
#[utoipa::path(get, path = "/api/apps/{appId}/recovery", params(("appId" = String, Path)), responses(
    (status = 200, description = "the app's declared tables and fields; Cache-Control: no-store", body = crate::recovery::RecoveryDescriptor),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, no apps:invoke, no manage, unknown or invalid app", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn recovery(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let principal = match caller(&core, &headers).await {
        Ok(Caller::Anonymous) => return unauthenticated(),
        Ok(Caller::Principal(principal))
            if matches!(
                principal.kind,
                PrincipalKind::Session | PrincipalKind::Access
            ) && principal.scopes.contains(&Scope::AppsInvoke) =>
        {
            principal
        }
        Ok(Caller::Principal(_)) => return hidden_not_found().into_response(),
        Err(response) => return response,
    };
    let granted = match core.granted_apps(&principal.user.id).await {
        Ok(granted) => granted,
        Err(error) => return error.into_response(),
    };
    if !granted
        .get(&app_id)
        .is_some_and(|access| access.allows(AppAccess::Manage))
    {
        return hidden_not_found().into_response();
    }
    let snapshot = core.catalogue.current();
    let Some(AppEntry::Valid(package)) = snapshot.apps.get(&app_id) else {
        return hidden_not_found().into_response();
    };
    let descriptor = crate::recovery::descriptor(
        &app_id,
        &package.manifest.name,
        &package.resource.revision,
        package.data.as_ref(),
        package.manifest.capabilities.data == sasha_package::manifest::DataCapability::ReadWrite,
    );
    no_store(Json(descriptor))
}

/// The caller of a grant route: an admin or staff user principal.
async fn grant_manager(
    core: &Core,
    headers: &HeaderMap,
    app_id: &str,
) -> Result<Principal, Response> {
    let principal = user(core, headers).await?;
    if !matches!(principal.user.role, UserRole::Admin | UserRole::Staff) {
        return Err(hidden_not_found().into_response());
    }
    let registered = core.catalogue.current().apps.contains_key(app_id);
    if !registered {
        return Err(hidden_not_found().into_response());
    }
    Ok(principal)
}

/// `GET /api/apps/:appId/access`: current grants (admin/staff only).
#[utoipa::path(get, path = "/api/apps/{appId}/access", params(("appId" = String, Path)), responses(
    (status = 200, description = "current grants (admin and staff)", body = GrantsResponse),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn list_access(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = grant_manager(&core, &headers, &app_id).await {
        return response;
    }
    let store = core.store.clone();
    match blocking(move || store.grants(&app_id)).await {
        Ok(grants) => {
            let grants = grants
                .into_iter()
                .map(|grant| GrantEntry {
                    user_id: grant.user_id,
                    username: grant.username,
                    access: grant.access.as_str().to_owned(),
                    granted_at: grant.granted_at,
                })
                .collect();
            Json(GrantsResponse { grants }).into_response()
        }
        Err(error) => error.into_response(),
    }
}

/// The access to grant.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct GrantRequest {
    /// `use` or `manage`.
    access: String,
}

/// `PUT /api/apps/:appId/access/:userId` with `{"access":"use"|"manage"}`.
#[utoipa::path(put, path = "/api/apps/{appId}/access/{userId}", params(("appId" = String, Path), ("userId" = String, Path)), request_body = GrantRequest, responses(
    (status = 200, description = "granted (admin and staff)", body = GrantResponse),
    (status = 400, description = "access is not use or manage", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 415, description = "body is not application/json", body = ErrorEnvelope),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn grant_access(
    State(core): State<Arc<Core>>,
    Path((app_id, user_id)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(response) = same_origin_json(&core, &method, &headers, true) {
        return response;
    }
    let actor = match grant_manager(&core, &headers, &app_id).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    let request: GrantRequest = match parse_body(&body) {
        Ok(request) => request,
        Err(response) => return response,
    };
    let access = match request.access.as_str() {
        "use" => AppAccess::Use,
        "manage" => AppAccess::Manage,
        _ => {
            return AppError::new(
                ErrorCode::InputInvalid,
                "access must be \"use\" or \"manage\"",
            )
            .into_response();
        }
    };
    let store = core.store.clone();
    let outcome = blocking(move || {
        if store.user(&user_id)?.is_none() {
            return Ok(false);
        }
        store.grant(&app_id, &user_id, access, Some(&actor.user.id))?;
        Ok(true)
    })
    .await;
    match outcome {
        Ok(true) => Json(GrantResponse {
            access: access.as_str().to_owned(),
        })
        .into_response(),
        Ok(false) => hidden_not_found().into_response(),
        Err(error) => error.into_response(),
    }
}

/// `DELETE /api/apps/:appId/access/:userId`: revokes every access.
#[utoipa::path(delete, path = "/api/apps/{appId}/access/{userId}", params(("appId" = String, Path), ("userId" = String, Path)), responses(
    (status = 204, description = "revoked (admin and staff)"),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn revoke_access(
    State(core): State<Arc<Core>>,
    Path((app_id, user_id)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = same_origin_json(&core, &method, &headers, false) {
        return response;
    }
    let actor = match grant_manager(&core, &headers, &app_id).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    let store = core.store.clone();
    match blocking(move || store.revoke(&app_id, &user_id, Some(&actor.user.id))).await {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => error.into_response(),
    }
}
