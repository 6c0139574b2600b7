//! The apps a Studio caller may use, over HTTP: `GET /api/apps`, an app's
//! resource, its recovery descriptor, and the access panel's grants
//! (`/api/apps/:appId/access`).
//!
//! Callers are browser sessions (the session cookie) or, for scripts, access
//! tokens (`Authorization: Bearer`), resolved by studio-identity's caller
//! checks. Every answer is JSON; every failure is the closed envelope.
//!
//! Oracles are closed on purpose: an anonymous request gets the same 401 whatever
//! it asked for; a bad credential, a denied app, an unknown app and an
//! unknown or stale revision all get the same hidden 404, byte for byte (its
//! diagnostic id is the nil UUID, since nothing about it needs diagnosing).
//! State-changing routes accept only same-origin JSON requests.
//!
//! What it must never do: let anyone change their own access, or tell a
//! denied app from an unknown one.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use sasha_proto::{AppError, ErrorCode};
use serde::{Deserialize, Serialize};
use studio_identity::http::caller::{Caller, caller, same_origin_json, user};
use studio_identity::http::{
    ErrorEnvelope, hidden_not_found, no_store, parse_body, unauthenticated,
};
use studio_store::{AppAccess, Principal, PrincipalKind, Scope, UserRole, blocking};
use utoipa::ToSchema;

use crate::catalogue::AppEntry;
use crate::state::Core;

/// The routes of the apps a caller may use: the list, a resource, the
/// recovery descriptor and the access panel's grants.
pub(super) fn routes() -> axum::Router<Arc<Core>> {
    axum::Router::new()
        .route("/api/apps", get(list_apps))
        .route("/api/apps/{app_id}/resource", get(resource))
        .route("/api/apps/{app_id}/access", get(list_access))
        .route("/api/apps/{app_id}/recovery", get(recovery))
        .route(
            "/api/apps/{app_id}/access/{user_id}",
            put(grant_access).delete(revoke_access),
        )
}

/// One app the caller may use.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct AppDescriptor {
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
pub(super) struct AppsResponse {
    apps: Vec<AppDescriptor>,
    /// The origin the app sandbox is served from.
    sandbox_origin: String,
}

/// One immutable app resource, as MCP `resources/read` returns it.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResourceResponse {
    pub(crate) uri: String,
    /// `text/html;profile=mcp-app`.
    pub(crate) mime_type: String,
    /// The assembled HTML document.
    pub(crate) text: String,
    /// `{ui: {csp, permissions, prefersBorder, sasha}}`.
    #[serde(rename = "_meta")]
    #[schema(value_type = Object)]
    pub(crate) meta: serde_json::Value,
}

/// One grant on an app.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct GrantEntry {
    user_id: String,
    username: String,
    /// `use` or `manage`.
    access: String,
    /// Unix seconds.
    granted_at: i64,
}

/// `GET /api/apps/:appId/access`.
#[derive(Serialize, ToSchema)]
pub(super) struct GrantsResponse {
    grants: Vec<GrantEntry>,
}

/// The access now held.
#[derive(Serialize, ToSchema)]
pub(super) struct GrantResponse {
    /// `use` or `manage`.
    access: String,
}

/// `GET /api/apps`: the apps the caller may use, with their access and the
/// sandbox origin.
#[utoipa::path(get, path = "/api/apps", responses(
    (status = 200, description = "apps the caller may use", body = AppsResponse),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
pub(super) async fn list_apps(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    let principal = match user(&core.accounts, &headers).await {
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
pub(super) struct RevisionQuery {
    revision: Option<String>,
}

/// `GET /api/apps/:appId/resource?revision=`: the exact resource, to the
/// trusted Studio host, for a caller with `use`.
#[utoipa::path(get, path = "/api/apps/{appId}/resource", params(("appId" = String, Path), ("revision" = String, Query, description = "the sha256 revision")), responses(
    (status = 200, description = "the exact resource; Cache-Control: no-store", body = ResourceResponse),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
pub(super) async fn resource(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    Query(query): Query<RevisionQuery>,
    headers: HeaderMap,
) -> Response {
    let principal = match user(&core.accounts, &headers).await {
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
    // The ledger serves a revision the catalogue no longer holds.
    let Ok(resource) = crate::ledger::resource(&core, &app_id, &revision).await else {
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
pub(super) async fn recovery(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let principal = match caller(&core.accounts, &headers).await {
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
    let principal = user(&core.accounts, headers).await?;
    if !matches!(principal.user.role, UserRole::Admin | UserRole::Staff) {
        return Err(hidden_not_found().into_response());
    }
    let registered = core.catalogue.current().apps.contains_key(app_id);
    if !registered {
        return Err(hidden_not_found().into_response());
    }
    // A withdrawn app is gone from the access panel too, until restored.
    let (store, app) = (core.store.clone(), app_id.to_owned());
    match blocking(move || store.lifecycle(&app)).await {
        Ok(Some(state)) if state.is_withdrawn() => return Err(hidden_not_found().into_response()),
        Ok(_) => {}
        Err(error) => return Err(error.into_response()),
    }
    Ok(principal)
}

/// Nobody changes their own access: a grant or revoke whose target is the
/// caller is refused, so staff cannot give themselves `manage` and an admin
/// whose `manage` was revoked cannot restore it. Another admin or staff
/// member (or the operator's `sasha admin grant`) makes that change.
fn not_yourself(actor: &Principal, target: &str) -> Result<(), Response> {
    if actor.user.id == target {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            "you cannot change your own access; ask another admin or staff member",
        )
        .into_response());
    }
    Ok(())
}

/// `GET /api/apps/:appId/access`: current grants (admin/staff only).
#[utoipa::path(get, path = "/api/apps/{appId}/access", params(("appId" = String, Path)), responses(
    (status = 200, description = "current grants (admin and staff)", body = GrantsResponse),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
pub(super) async fn list_access(
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
            no_store(Json(GrantsResponse { grants }))
        }
        Err(error) => error.into_response(),
    }
}

/// The access to grant.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GrantRequest {
    /// `use` or `manage`.
    access: String,
}

/// `PUT /api/apps/:appId/access/:userId` with `{"access":"use"|"manage"}`.
#[utoipa::path(put, path = "/api/apps/{appId}/access/{userId}", params(("appId" = String, Path), ("userId" = String, Path)), request_body = GrantRequest, responses(
    (status = 200, description = "granted (admin and staff)", body = GrantResponse),
    (status = 400, description = "access is not use or manage", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, or the caller's own access", body = ErrorEnvelope),
    (status = 415, description = "body is not application/json", body = ErrorEnvelope),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
pub(super) async fn grant_access(
    State(core): State<Arc<Core>>,
    Path((app_id, user_id)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(response) = same_origin_json(&core.accounts, &method, &headers, true) {
        return response;
    }
    let actor = match grant_manager(&core, &headers, &app_id).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    if let Err(response) = not_yourself(&actor, &user_id) {
        return response;
    }
    let request: GrantRequest = match parse_body(&body) {
        Ok(request) => request,
        Err(response) => return response,
    };
    let Ok(access) = AppAccess::parse(&request.access) else {
        return AppError::new(
            ErrorCode::InputInvalid,
            "access must be \"use\" or \"manage\"",
        )
        .into_response();
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
        Ok(true) => no_store(Json(GrantResponse {
            access: access.as_str().to_owned(),
        })),
        Ok(false) => hidden_not_found().into_response(),
        Err(error) => error.into_response(),
    }
}

/// `DELETE /api/apps/:appId/access/:userId`: revokes every access.
#[utoipa::path(delete, path = "/api/apps/{appId}/access/{userId}", params(("appId" = String, Path), ("userId" = String, Path)), responses(
    (status = 204, description = "revoked (admin and staff)"),
    (status = 403, description = "not from the Studio origin, or the caller's own access", body = ErrorEnvelope),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
pub(super) async fn revoke_access(
    State(core): State<Arc<Core>>,
    Path((app_id, user_id)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = same_origin_json(&core.accounts, &method, &headers, false) {
        return response;
    }
    let actor = match grant_manager(&core, &headers, &app_id).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    if let Err(response) = not_yourself(&actor, &user_id) {
        return response;
    }
    let store = core.store.clone();
    match blocking(move || store.revoke(&app_id, &user_id, Some(&actor.user.id))).await {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => error.into_response(),
    }
}
