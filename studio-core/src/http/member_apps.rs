//! App Studio over HTTP (`/api/member-apps*`, `/api/settings*`,
//! `/api/member-app-guide`): the member's own apps, their source, checks,
//! drafts for preview, deploys, history, reverts and shares, and the
//! moderators' list, disable, enable, delete and promote, with the admins'
//! switch. Every handler asks `crate::member_apps`, the functions behind
//! `CoreService.MemberApps`, so who may and every refusal are the member app
//! tools' own.
//!
//! A deploy, revert, share or delete here is approved by the person's
//! click: it is taken from a signed-in browser session on the Studio origin
//! only (same-origin JSON), never from a bearer token, which a model may
//! hold.
//!
//! What it must never do: accept a deploy without the session's same-origin
//! checks, or answer the authoring guide while member apps are off.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sasha_package::Diagnostic;
use sasha_proto::json_limits::MEMBER_APP_SOURCE;
use sasha_proto::{AppError, ErrorCode};
use serde::Deserialize;
use serde_json::{Value, json};
use studio_identity::actor::Actor;
use studio_identity::http::{no_store, parse_body_within};
use studio_store::blocking;
use studio_store::{MemberApp, Principal, RevisionSurface};
use utoipa::ToSchema;

use crate::grpc::convert::history_json;
use crate::member_apps::{self as member, Deploy};
use crate::state::Core;

/// The largest App Studio body: a 1 MiB package as JSON text, escaped.
pub(crate) const MAX_SOURCE_BODY: usize = 3 * 1024 * 1024;

fn app_json(app: &MemberApp, viewer: &str) -> Value {
    json!({
        "id": app.id,
        "name": app.name,
        "author": app.author_id.as_ref().map(|id| json!({"id": id, "username": app.author_name})),
        "revision": app.revision,
        "size": app.size,
        "createdAt": app.created_at,
        "updatedAt": app.updated_at,
        "status": if app.disabled { "disabled" } else { "active" },
        "shares": app.shares,
        "mine": app.author_id.as_deref() == Some(viewer),
        "resourceUri": sasha_package::assemble::resource_uri(&app.id, &app.revision),
    })
}

fn diagnostics_json(diagnostics: &[Diagnostic]) -> Vec<Value> {
    diagnostics
        .iter()
        .map(|d| json!({"file": d.file, "line": d.line, "code": d.code, "reason": d.reason}))
        .collect()
}

/// Files as App Studio sends them: `{path: text}`, or for a binary asset
/// `{path: {"base64": "..."}}`, decoded by the source tools' one rule (a
/// text file is never base64).
fn files_of(files: BTreeMap<String, Value>) -> Result<Vec<(String, Vec<u8>)>, AppError> {
    files
        .into_iter()
        .map(|(path, content)| match content {
            Value::String(text) => Ok((path, text.into_bytes())),
            Value::Object(object) => match object.get("base64").and_then(Value::as_str) {
                Some(text) => {
                    crate::source::content_bytes(&path, text, Some(crate::source::BASE64))
                        .map(|bytes| (path.clone(), bytes))
                }
                None => Err(AppError::new(
                    ErrorCode::InputInvalid,
                    format!(
                        "{path}: give the file's text, or {{\"base64\": ...}} for a binary asset"
                    ),
                )
                .with_details(json!({"field": "files", "path": path}))),
            },
            _ => Err(AppError::new(
                ErrorCode::InputInvalid,
                format!("{path}: a file's content must be its text"),
            )
            .with_details(json!({"field": "files", "path": path}))),
        })
        .collect()
}

/// A file as App Studio edits it: its text, or `{"base64": ...}` for a
/// binary asset.
fn studio_content(path: &str, bytes: &[u8]) -> Value {
    let entry = member::file_json(path, bytes);
    match entry.get("encoding") {
        Some(_) => json!({"base64": entry["content"]}),
        None => entry["content"].clone(),
    }
}

/// The signed-in session's user id, if it may author member apps.
async fn reader(core: &Arc<Core>, headers: &HeaderMap) -> Result<(Principal, String), Response> {
    let principal = studio_identity::http::caller::session_user(&core.accounts, headers).await?;
    let user = member::author(core, &Actor::from(&principal))
        .await
        .map_err(IntoResponse::into_response)?;
    Ok((principal, user))
}

/// A state change: same-origin JSON from the signed-in session first.
async fn writer(
    core: &Arc<Core>,
    method: &Method,
    headers: &HeaderMap,
    has_body: bool,
) -> Result<(Principal, String), Response> {
    studio_identity::http::caller::same_origin_json(&core.accounts, method, headers, has_body)?;
    reader(core, headers).await
}

/// A state change with a JSON body: [`writer`], then the body within App
/// Studio's limits.
async fn written<T: serde::de::DeserializeOwned>(
    core: &Arc<Core>,
    method: &Method,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<(Principal, String, T), Response> {
    let (principal, user) = writer(core, method, headers, !body.is_empty()).await?;
    let body = parse_body_within(body, &MEMBER_APP_SOURCE)?;
    Ok((principal, user, body))
}

fn ok(value: Value) -> Response {
    no_store(Json(value))
}

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    #[serde(default)]
    all: bool,
}

/// `GET /api/member-apps[?all=true]`.
#[utoipa::path(get, path = "/api/member-apps", params(("all" = Option<bool>, Query, description = "every member app, for admin and staff")), responses(
    (status = 200, description = "`{enabled, canModerate, isAdmin, apps: [{id, name, author, revision, size, createdAt, updatedAt, status, shares, mine, resourceUri}]}`", body = Object),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "all=true from a member, or no apps:author (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn list(
    State(core): State<Arc<Core>>,
    Query(query): Query<ListQuery>,
    headers: HeaderMap,
) -> Response {
    let (principal, user) = match reader(&core, &headers).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let apps = if query.all {
        member::moderated(&core, &user).await
    } else {
        let (store, author) = (core.store.clone(), user.clone());
        blocking(move || store.member_apps(Some(&author))).await
    };
    let apps = match apps {
        Ok(apps) => apps,
        Err(error) => return error.into_response(),
    };
    let store = core.store.clone();
    let enabled = match blocking(move || store.member_apps_enabled()).await {
        Ok(enabled) => enabled,
        Err(error) => return error.into_response(),
    };
    ok(json!({
        "enabled": enabled,
        "canModerate": principal.user.role.is_privileged(),
        "isAdmin": principal.user.role == studio_store::UserRole::Admin,
        "apps": apps.iter().map(|app| app_json(app, &user)).collect::<Vec<_>>(),
    }))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SourceBody {
    /// On check, the id of the app the files are for (absent: a new app).
    /// A new app has none: the platform names it.
    #[serde(default)]
    id: Option<String>,
    /// The display name; on create and update.
    #[serde(default)]
    name: Option<String>,
    /// `{path: text}` (a binary asset as `{"base64": ...}`).
    #[schema(value_type = Object)]
    files: BTreeMap<String, Value>,
    /// The current revision the page read; on update.
    #[serde(default)]
    expected_revision: Option<String>,
}

/// `POST /api/member-apps/check`: validates without storing anything, as
/// the caller's app `id` or, without one, as a new app.
#[utoipa::path(post, path = "/api/member-apps/check", request_body = SourceBody, responses(
    (status = 200, description = "`{ok, revision?, diagnostics: [{file, line, code, reason}]}`", body = Object),
    (status = 400, description = "not a package body (APP_INPUT_INVALID)", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "id names no member app of yours (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 501, description = "member apps are turned off (APP_OPERATION_UNAVAILABLE)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn check(
    State(core): State<Arc<Core>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (_, user, body): (_, _, SourceBody) = match written(&core, &method, &headers, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let checked = async {
        let files = files_of(body.files)?;
        member::check(&core, &user, body.id.as_deref().unwrap_or_default(), files).await
    };
    match checked.await {
        Ok(status) => ok(json!({
            "ok": status.ok,
            "revision": status.revision,
            "diagnostics": diagnostics_json(&status.diagnostics),
        })),
        Err(error) => error.into_response(),
    }
}

/// An error as App Studio gets it; a throttled deploy says when to retry in
/// `Retry-After` too.
fn refusal(error: AppError) -> Response {
    let wait = error
        .details
        .as_ref()
        .and_then(|details| details["retryAfterSeconds"].as_u64());
    let mut response = error.into_response();
    if let Some(wait) = wait {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, axum::http::HeaderValue::from(wait));
    }
    response
}

async fn deploy_response(
    core: &Arc<Core>,
    user: &str,
    deploy: Deploy,
    status: StatusCode,
) -> Response {
    match member::deploy(core, user, deploy).await {
        Ok(app) => {
            let mut response = ok(json!({"app": app_json(&app, user)}));
            *response.status_mut() = status;
            response
        }
        Err(error) => refusal(error),
    }
}

/// `POST /api/member-apps`: deploys a new member app (the person's click is
/// the approval). The platform names it: the answer's `app.id`, also written
/// into `APP.md`'s `id:`.
#[utoipa::path(post, path = "/api/member-apps", request_body = SourceBody, responses(
    (status = 201, description = "`{app}`", body = Object),
    (status = 400, description = "the package does not validate (`details.diagnostics`), an `id` was given, or a bad field (APP_INPUT_INVALID)", body = studio_identity::http::ErrorEnvelope),
    (status = 413, description = "a cap is reached (APP_RESOURCE_LIMIT, `details.cap`: instance, per-author or author-bytes)", body = studio_identity::http::ErrorEnvelope),
    (status = 429, description = "too many deploys in a short while (APP_BUSY, `Retry-After`)", body = studio_identity::http::ErrorEnvelope),
    (status = 501, description = "member apps are turned off (APP_OPERATION_UNAVAILABLE)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn create(
    State(core): State<Arc<Core>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (_, user, body): (_, _, SourceBody) = match written(&core, &method, &headers, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    if body.id.is_some() || body.expected_revision.is_some() {
        return AppError::new(
            ErrorCode::InputInvalid,
            "a new member app gets its id from the platform: leave id out (APP.md's id: is set \
             to it); to change one of your apps, PUT /api/member-apps/{id}",
        )
        .with_details(json!({"field": "id"}))
        .into_response();
    }
    let files = match files_of(body.files) {
        Ok(files) => files,
        Err(error) => return error.into_response(),
    };
    let deploy = Deploy {
        update: None,
        name: body.name.unwrap_or_default(),
        files,
        approved: true,
        surface: RevisionSurface::Studio,
        summary: "App Studio: deployed",
    };
    deploy_response(&core, &user, deploy, StatusCode::CREATED).await
}

/// `GET /api/member-apps/:appId`: the author's app with its files.
#[utoipa::path(get, path = "/api/member-apps/{appId}", params(("appId" = String, Path)), responses(
    (status = 200, description = "`{app, files: {path: text | {base64}}}`", body = Object),
    (status = 403, description = "not your member app, or no such app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn read(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (_, user) = match reader(&core, &headers).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let app = match member::owned(&core, &user, &app_id).await {
        Ok(app) => app,
        Err(error) => return error.into_response(),
    };
    let files: serde_json::Map<String, Value> = member::current_files(&core, &app.id)
        .into_iter()
        .map(|(path, bytes)| {
            let content = studio_content(&path, &bytes);
            (path, content)
        })
        .collect();
    // A draft the assistant saved (or an earlier Preview) is offered to the
    // editor, so the person previews and deploys what was drafted.
    let (store, id) = (core.store.clone(), app.id.clone());
    let draft = match blocking(move || {
        Ok(match store.draft(&id)? {
            Some(draft) => Some((draft, store.draft_contents(&id)?)),
            None => None,
        })
    })
    .await
    {
        Ok(draft) => draft.map(|(draft, contents)| {
            let files: serde_json::Map<String, Value> = contents
                .into_iter()
                .map(|(file, bytes)| {
                    let content = studio_content(&file.path, &bytes);
                    (file.path, content)
                })
                .collect();
            json!({"previewId": draft.preview_id, "updatedAt": draft.updated_at, "files": files})
        }),
        Err(error) => return error.into_response(),
    };
    ok(json!({"app": app_json(&app, &user), "files": files, "draft": draft}))
}

/// `PUT /api/member-apps/:appId`: deploys a new version of the author's app.
#[utoipa::path(put, path = "/api/member-apps/{appId}", params(("appId" = String, Path)), request_body = SourceBody, responses(
    (status = 200, description = "`{app}`", body = Object),
    (status = 400, description = "the package does not validate (`details.diagnostics`) (APP_INPUT_INVALID)", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not your member app, or no such app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 409, description = "changed since read (APP_CONFLICT, `stale-revision`), or an applied migration dropped (APP_SCHEMA_INCOMPATIBLE)", body = studio_identity::http::ErrorEnvelope),
    (status = 413, description = "a cap is reached (APP_RESOURCE_LIMIT, `details.cap = author-bytes`)", body = studio_identity::http::ErrorEnvelope),
    (status = 429, description = "too many deploys in a short while (APP_BUSY, `Retry-After`)", body = studio_identity::http::ErrorEnvelope),
    (status = 501, description = "member apps are turned off, or the app is disabled (APP_OPERATION_UNAVAILABLE)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn update(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (_, user, body): (_, _, SourceBody) = match written(&core, &method, &headers, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let files = match files_of(body.files) {
        Ok(files) => files,
        Err(error) => return error.into_response(),
    };
    let Some(expected) = body.expected_revision.filter(|r| !r.is_empty()) else {
        return AppError::new(
            ErrorCode::InputInvalid,
            "expectedRevision is required: the revision you edited",
        )
        .with_details(json!({"field": "expectedRevision"}))
        .into_response();
    };
    let deploy = Deploy {
        update: Some(member::Update {
            app_id,
            expected_revision: expected,
        }),
        name: body.name.unwrap_or_default(),
        files,
        approved: true,
        surface: RevisionSurface::Studio,
        summary: "App Studio: deployed",
    };
    deploy_response(&core, &user, deploy, StatusCode::OK).await
}

/// `DELETE /api/member-apps/:appId`: the author, or a moderator.
#[utoipa::path(delete, path = "/api/member-apps/{appId}", params(("appId" = String, Path)), responses(
    (status = 200, description = "`{deleted: true, app}`", body = Object),
    (status = 403, description = "not your member app and not a moderator, or no such app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn delete(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let (_, user) = match writer(&core, &method, &headers, false).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    // The person's click in App Studio is the approval.
    match member::delete(&core, &user, &app_id, true).await {
        Ok(()) => ok(json!({"deleted": true, "app": app_id})),
        Err(error) => error.into_response(),
    }
}

/// The body of a revert.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct MemberRevertBody {
    revision: String,
    expected_revision: String,
}

/// `POST /api/member-apps/:appId/revert`: deploys an earlier revision's files.
#[utoipa::path(post, path = "/api/member-apps/{appId}/revert", params(("appId" = String, Path)), request_body = MemberRevertBody, responses(
    (status = 200, description = "`{app}`", body = Object),
    (status = 403, description = "not your member app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 409, description = "changed since read (APP_CONFLICT) or an applied migration dropped (APP_SCHEMA_INCOMPATIBLE)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn revert(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (_, user, body): (_, _, MemberRevertBody) =
        match written(&core, &method, &headers, &body).await {
            Ok(found) => found,
            Err(response) => return response,
        };
    let files = match member::revision_files(&core, &user, &app_id, &body.revision).await {
        Ok(files) => files,
        Err(error) => return error.into_response(),
    };
    let deploy = Deploy {
        update: Some(member::Update {
            app_id,
            expected_revision: body.expected_revision,
        }),
        name: String::new(),
        files,
        approved: true,
        surface: RevisionSurface::Studio,
        summary: "App Studio: reverted",
    };
    deploy_response(&core, &user, deploy, StatusCode::OK).await
}

/// `GET /api/member-apps/:appId/revisions`: the author's app's history.
#[utoipa::path(get, path = "/api/member-apps/{appId}/revisions", params(("appId" = String, Path)), responses(
    (status = 200, description = "`{app, revisions: [...]}`, newest first, as listAppRevisions answers", body = Object),
    (status = 403, description = "not your member app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn revisions(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (_, user) = match reader(&core, &headers).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let listed = async {
        let app = member::owned(&core, &user, &app_id).await?;
        crate::history::list(&core, &app.id).await
    };
    match listed.await {
        Ok(revisions) => {
            match history_json(&app_id, crate::history::Answer::Revisions(revisions)) {
                Some(value) => ok(value),
                None => AppError::from_code(ErrorCode::Internal).into_response(),
            }
        }
        Err(error) => error.into_response(),
    }
}

/// `POST /api/member-apps/:appId/draft`: the edited files as the app's
/// draft, for a preview in the sandbox.
#[utoipa::path(post, path = "/api/member-apps/{appId}/draft", params(("appId" = String, Path)), request_body = SourceBody, responses(
    (status = 200, description = "`{previewId, ok, diagnostics}`; preview with `GET /api/apps/{appId}/draft/resource` and `Sasha-Preview`", body = Object),
    (status = 400, description = "the files break the package file rules (APP_INPUT_INVALID, `details.diagnostics`): nothing is saved", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not your member app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 501, description = "member apps are turned off, or a moderator disabled the app (APP_OPERATION_UNAVAILABLE)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn draft(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (_, user, body): (_, _, SourceBody) = match written(&core, &method, &headers, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let drafted = async {
        let files = files_of(body.files)?;
        member::draft(&core, &user, &app_id, files).await
    };
    match drafted.await {
        Ok((preview_id, validated)) => ok(json!({
            "previewId": preview_id,
            "ok": validated.package.is_some(),
            "diagnostics": diagnostics_json(&validated.diagnostics),
        })),
        Err(error) => error.into_response(),
    }
}

/// The body of a share.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShareBody {
    username: String,
}

/// `POST /api/member-apps/:appId/shares`: shares `use` with a user by name.
/// The answer is the same whether or not an account holds the name
/// (`studio_store::member_apps`): `shared` says so in words.
#[utoipa::path(post, path = "/api/member-apps/{appId}/shares", params(("appId" = String, Path)), request_body = ShareBody, responses(
    (status = 200, description = "`{app, shared}`: the app with the name among its shares, and what that means", body = Object),
    (status = 400, description = "not a user name's spelling, or the author's own (APP_INPUT_INVALID)", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not your member app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 413, description = "shared with as many names as an app may be (APP_RESOURCE_LIMIT)", body = studio_identity::http::ErrorEnvelope),
    (status = 501, description = "a moderator disabled the app (APP_OPERATION_UNAVAILABLE)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn share(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (_, user, body): (_, _, ShareBody) = match written(&core, &method, &headers, &body).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    match member::share(&core, &user, &app_id, &body.username, false, true).await {
        Ok(app) => ok(json!({
            "app": app_json(&app, &user),
            "shared": member::share_outcome(&app, &body.username, false),
        })),
        Err(error) => error.into_response(),
    }
}

/// `DELETE /api/member-apps/:appId/shares/:username`: stops sharing (also
/// while the app is disabled), answered alike for any name.
#[utoipa::path(delete, path = "/api/member-apps/{appId}/shares/{username}", params(("appId" = String, Path), ("username" = String, Path)), responses(
    (status = 200, description = "`{app, shared}`", body = Object),
    (status = 403, description = "not your member app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn unshare(
    State(core): State<Arc<Core>>,
    Path((app_id, username)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let (_, user) = match writer(&core, &method, &headers, false).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    match member::share(&core, &user, &app_id, &username, true, true).await {
        Ok(app) => ok(json!({
            "app": app_json(&app, &user),
            "shared": member::share_outcome(&app, &username, true),
        })),
        Err(error) => error.into_response(),
    }
}

async fn moderate(
    core: &Arc<Core>,
    method: &Method,
    headers: &HeaderMap,
    app_id: &str,
    disabled: bool,
) -> Response {
    let (_, user) = match writer(core, method, headers, false).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    match member::set_disabled(core, &user, app_id, disabled).await {
        Ok(app) => ok(json!({"app": app_json(&app, &user)})),
        Err(error) => error.into_response(),
    }
}

/// `POST /api/member-apps/:appId/disable`: a moderator disables an app.
#[utoipa::path(post, path = "/api/member-apps/{appId}/disable", params(("appId" = String, Path)), responses(
    (status = 200, description = "`{app}`", body = Object),
    (status = 403, description = "not admin or staff (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "no such member app", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn disable(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    moderate(&core, &method, &headers, &app_id, true).await
}

/// `POST /api/member-apps/:appId/enable`: a moderator enables it again.
#[utoipa::path(post, path = "/api/member-apps/{appId}/enable", params(("appId" = String, Path)), responses(
    (status = 200, description = "`{app}`", body = Object),
    (status = 403, description = "not admin or staff (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "no such member app", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn enable(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    moderate(&core, &method, &headers, &app_id, false).await
}

/// `POST /api/member-apps/:appId/promote`: an admin moves it into the catalogue.
#[utoipa::path(post, path = "/api/member-apps/{appId}/promote", params(("appId" = String, Path)), responses(
    (status = 200, description = "`{promoted}`", body = Object),
    (status = 403, description = "not an admin (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "no such member app", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn promote(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let (_, user) = match writer(&core, &method, &headers, false).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    match member::promote(&core, &user, &app_id).await {
        Ok(()) => ok(json!({"promoted": app_id})),
        Err(error) => error.into_response(),
    }
}

/// `GET /api/settings`: the instance settings a signed-in user may read.
#[utoipa::path(get, path = "/api/settings", responses(
    (status = 200, description = "`{memberAppsEnabled}`", body = Object),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn settings(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    if let Err(response) =
        studio_identity::http::caller::session_user(&core.accounts, &headers).await
    {
        return response;
    }
    let store = core.store.clone();
    match blocking(move || store.member_apps_enabled()).await {
        Ok(enabled) => ok(json!({"memberAppsEnabled": enabled})),
        Err(error) => error.into_response(),
    }
}

/// The body of the member apps switch.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SwitchBody {
    enabled: bool,
}

/// `PUT /api/settings/member-apps`: "Let members make their own apps".
#[utoipa::path(put, path = "/api/settings/member-apps", request_body = SwitchBody, responses(
    (status = 200, description = "`{memberAppsEnabled}`", body = Object),
    (status = 403, description = "not an admin (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn set_switch(
    State(core): State<Arc<Core>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(response) = studio_identity::http::caller::same_origin_json(
        &core.accounts,
        &method,
        &headers,
        !body.is_empty(),
    ) {
        return response;
    }
    let principal =
        match studio_identity::http::caller::session_user(&core.accounts, &headers).await {
            Ok(principal) => principal,
            Err(response) => return response,
        };
    let body: SwitchBody = match studio_identity::http::parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    match member::set_enabled(&core, &principal.user.id, body.enabled).await {
        Ok(enabled) => ok(json!({"memberAppsEnabled": enabled})),
        Err(error) => error.into_response(),
    }
}

/// `GET /api/member-app-guide`: the authoring guide, the same text as
/// `getDocs`' member-apps section; 404 while member apps are off.
#[utoipa::path(get, path = "/api/member-app-guide", responses(
    (status = 200, description = "the guide, text/markdown", body = String),
    (status = 404, description = "member apps are turned off (APP_NOT_FOUND)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn guide(State(core): State<Arc<Core>>) -> Response {
    let store = core.store.clone();
    match blocking(move || store.member_apps_enabled()).await {
        // No caching: the answer follows the switch.
        Ok(true) => no_store((
            [(header::CONTENT_TYPE, "text/markdown; charset=utf-8")],
            sasha_contract::tools::MEMBER_APPS_GUIDE,
        )),
        Ok(false) => AppError::new(
            ErrorCode::NotFound,
            "member apps are turned off on this instance",
        )
        .into_response(),
        Err(error) => error.into_response(),
    }
}

/// The routes, with the body limit a package needs.
pub(super) fn routes() -> axum::Router<Arc<Core>> {
    use axum::routing::{get, post, put};
    axum::Router::new()
        .route("/api/member-apps", get(list).post(create))
        .route("/api/member-apps/check", post(check))
        .route(
            "/api/member-apps/{app_id}",
            get(read).put(update).delete(delete),
        )
        .route("/api/member-apps/{app_id}/revert", post(revert))
        .route("/api/member-apps/{app_id}/revisions", get(revisions))
        .route("/api/member-apps/{app_id}/draft", post(draft))
        .route("/api/member-apps/{app_id}/shares", post(share))
        .route(
            "/api/member-apps/{app_id}/shares/{username}",
            axum::routing::delete(unshare),
        )
        .route("/api/member-apps/{app_id}/disable", post(disable))
        .route("/api/member-apps/{app_id}/enable", post(enable))
        .route("/api/member-apps/{app_id}/promote", post(promote))
        .route("/api/settings", get(settings))
        .route("/api/settings/member-apps", put(set_switch))
        .route("/api/member-app-guide", get(guide))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_SOURCE_BODY))
}
