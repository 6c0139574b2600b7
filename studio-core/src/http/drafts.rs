//! Studio's Draft page over HTTP: `GET|POST|DELETE /api/apps/:appId/draft`,
//! `GET /api/apps/:appId/draft/resource` (the draft's assembled resource,
//! for its preview), `GET|PUT|DELETE /api/apps/:appId/draft/files` (the
//! page's editor: the draft's files, and one file written or deleted, by the
//! source tools' own rules with `draft: true`) and
//! `POST /api/apps/:appId/draft/publish`. Who may and
//! every refusal are `crate::drafts`' (the source tools' callers: admin or
//! staff with `manage`, a credential holding `apps:invoke` + `apps:write`);
//! the answers are the JSON of `sasha_proto::client_json::draft_reply`, the
//! same the MCP tools put in `structuredContent`.
//!
//! Publishing here is a person's approval, so it is taken only from a
//! signed-in browser session, same-origin (an access token, which a model
//! may hold, gets the hidden 404): that is what makes Studio's Publish
//! button an approval no model can give itself.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sasha_proto::{AppError, ErrorCode};
use serde::Deserialize;
use utoipa::ToSchema;

use super::apps::ResourceResponse;
use crate::drafts::{self, Answer, Approval, Operation, Reviewed};
use crate::grpc::convert::draft_json;
use crate::state::Core;
use studio_identity::actor::Actor;
use studio_identity::http::caller::same_origin_json;
use studio_identity::http::{no_store, parse_body};

/// The Draft page's routes.
pub(super) fn routes() -> axum::Router<Arc<Core>> {
    axum::Router::new()
        .route(
            "/api/apps/{app_id}/draft",
            get(review).post(start).delete(discard),
        )
        .route("/api/apps/{app_id}/draft/resource", get(resource))
        .route(
            "/api/apps/{app_id}/draft/files",
            get(files).put(write_file).delete(delete_file),
        )
        .route("/api/apps/{app_id}/draft/publish", post(publish))
}

/// The source tools' access rule for `app_id` (an id that is not one is the
/// hidden 404).
async fn manages(core: &Arc<Core>, actor: &Actor, app_id: &str) -> Result<(), Response> {
    if sasha_contract::AppId::parse(app_id).is_err() {
        return Err(studio_identity::http::hidden_not_found().into_response());
    }
    crate::access::authorize_manager(core, actor, app_id)
        .await
        .map_err(IntoResponse::into_response)
}

fn answer(app_id: &str, reply: Result<Answer, AppError>, status: StatusCode) -> Response {
    match reply {
        Ok(reply) => match draft_json(app_id, reply) {
            Some(value) => {
                let mut response = no_store(Json(value));
                *response.status_mut() = status;
                response
            }
            None => AppError::from_code(ErrorCode::Internal).into_response(),
        },
        Err(error) => error.into_response(),
    }
}

/// `GET /api/apps/:appId/draft`: the app's draft with its review.
#[utoipa::path(get, path = "/api/apps/{appId}/draft", params(("appId" = String, Path)), responses(
    (status = 200, description = "`{app, draft: {previewId, baseRevision, liveRevision, contentHash, stale, status, createdBy, createdAt, updatedAt, changes, review}}`, as checkApp with draft: true answers (contentHash names this exact state; publishing sends it back); Cache-Control: no-store", body = Object),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not admin or staff with manage on the app, no apps:write, or an unknown app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "no draft (APP_RECORD_NOT_FOUND, details.cause = DRAFT_NOT_FOUND), or a credential that does not resolve", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn review(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let actor = match super::caller::actor(&core, &headers).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    let reviewed = drafts::answer(&core, &actor, &app_id, Some(Operation::Review)).await;
    answer(&app_id, reviewed, StatusCode::OK)
}

/// `POST /api/apps/:appId/draft`: starts the app's draft from the live app
/// (a same-origin JSON request without a body).
#[utoipa::path(post, path = "/api/apps/{appId}/draft", params(("appId" = String, Path)), responses(
    (status = 201, description = "the new draft, as GET answers", body = Object),
    (status = 200, description = "the draft that already existed", body = Object),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, or not admin or staff with manage on the app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn start(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = same_origin_json(&core.accounts, &method, &headers, false) {
        return response;
    }
    let actor = match super::caller::actor(&core, &headers).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    if let Err(response) = manages(&core, &actor, &app_id).await {
        return response;
    }
    let started = drafts::start_for(&core, &actor, &app_id).await;
    let status = match &started {
        Ok((_, true)) => StatusCode::CREATED,
        _ => StatusCode::OK,
    };
    answer(
        &app_id,
        started.map(|(info, _)| Answer::Draft(info)),
        status,
    )
}

/// `DELETE /api/apps/:appId/draft`: discards the draft.
#[utoipa::path(delete, path = "/api/apps/{appId}/draft", params(("appId" = String, Path)), responses(
    (status = 200, description = "`{app, discarded: true}`", body = Object),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, or not admin or staff with manage on the app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "no draft (details.cause = DRAFT_NOT_FOUND)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn discard(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = same_origin_json(&core.accounts, &method, &headers, false) {
        return response;
    }
    let actor = match super::caller::actor(&core, &headers).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    let discarded = drafts::answer(&core, &actor, &app_id, Some(Operation::Discard)).await;
    answer(&app_id, discarded, StatusCode::OK)
}

/// `GET /api/apps/:appId/draft/resource`: the draft's assembled resource,
/// which Studio's preview renders in the sandbox (its data calls carry the
/// draft's preview id and reach scratch data only).
#[utoipa::path(get, path = "/api/apps/{appId}/draft/resource", params(("appId" = String, Path)), responses(
    (status = 200, description = "the draft's resource, as GET /api/apps/{appId}/resource answers; Cache-Control: no-store", body = ResourceResponse),
    (status = 400, description = "the draft does not validate (APP_INPUT_INVALID with details.diagnostics)", body = studio_identity::http::ErrorEnvelope),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not admin or staff with manage on the app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "no draft (details.cause = DRAFT_NOT_FOUND)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn resource(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let actor = match super::caller::actor(&core, &headers).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    if sasha_contract::AppId::parse(&app_id).is_err() {
        return studio_identity::http::hidden_not_found().into_response();
    }
    if let Err(error) = crate::previews::authorize_previewer(&core, &actor, &app_id).await {
        return error.into_response();
    }
    let validated = match drafts::validated(&core, &app_id).await {
        Ok((files, _)) if files.is_empty() => {
            return drafts::no_draft(&app_id).into_response();
        }
        Ok((_, validated)) => validated,
        Err(error) => return error.into_response(),
    };
    let Some(package) = validated.package.as_ref() else {
        return AppError::new(
            ErrorCode::InputInvalid,
            "the draft does not validate, so it cannot be previewed; fix its diagnostics first",
        )
        .into_response();
    };
    let resource = &package.resource;
    no_store(Json(ResourceResponse {
        uri: resource.uri.clone(),
        mime_type: resource.mime_type.clone(),
        text: resource.html.clone(),
        meta: serde_json::json!({"ui": resource.meta}),
    }))
}

/// `GET /api/apps/:appId/draft/files`: every file of the draft with its
/// content (a binary asset, or a file that is not UTF-8, as base64 with
/// `encoding`) and its version, for the Draft page's editor.
#[utoipa::path(get, path = "/api/apps/{appId}/draft/files", params(("appId" = String, Path)), responses(
    (status = 200, description = "`{app, files: [{path, content, encoding?, version}]}`; Cache-Control: no-store", body = Object),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not admin or staff with manage on the app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "no draft, or an id that is not an app id", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn files(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    use base64::Engine as _;
    let actor = match super::caller::actor(&core, &headers).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    if let Err(response) = manages(&core, &actor, &app_id).await {
        return response;
    }
    match drafts::draft_of(&core, &app_id).await {
        Ok(Some(_)) => {}
        Ok(None) => return drafts::no_draft(&app_id).into_response(),
        Err(error) => return error.into_response(),
    }
    let contents = match drafts::contents(&core, &app_id).await {
        Ok(contents) => contents,
        Err(error) => return error.into_response(),
    };
    let files: Vec<serde_json::Value> = contents
        .into_iter()
        .map(|(file, bytes)| {
            let text = (!crate::source::is_binary(&file.path))
                .then(|| String::from_utf8(bytes.clone()).ok())
                .flatten();
            match text {
                Some(text) => {
                    serde_json::json!({"path": file.path, "content": text, "version": file.sha256})
                }
                None => serde_json::json!({
                    "path": file.path,
                    "content": base64::engine::general_purpose::STANDARD.encode(&bytes),
                    "encoding": crate::source::BASE64,
                    "version": file.sha256,
                }),
            }
        })
        .collect();
    no_store(Json(serde_json::json!({"app": app_id, "files": files})))
}

/// One file the Draft page's editor writes into the draft.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct FileWrite {
    path: String,
    /// The whole text, or a binary asset's bytes in base64 with `encoding`.
    content: String,
    #[serde(default)]
    encoding: Option<String>,
    /// The version the editor read; required when the file exists.
    #[serde(default)]
    expected_version: Option<String>,
}

/// One file the Draft page's editor deletes from the draft.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct FileDelete {
    path: String,
    #[serde(default)]
    expected_version: Option<String>,
}

/// A source tool's change, as the editor reads it.
fn change_answer(
    app_id: &str,
    reply: Result<crate::source_tools::SourceReply, AppError>,
) -> Response {
    match reply {
        Ok(crate::source_tools::SourceReply::Change {
            status,
            path,
            version,
            previous_version,
            ..
        }) => no_store(Json(serde_json::json!({
            "app": app_id,
            "path": path,
            "version": version,
            "previousVersion": previous_version,
            "status": sasha_proto::client_json::status(&crate::grpc::convert::status(&status)),
        }))),
        Ok(_) => AppError::from_code(ErrorCode::Internal).into_response(),
        Err(error) => error.into_response(),
    }
}

/// `PUT /api/apps/:appId/draft/files` with `{path, content, encoding?,
/// expectedVersion?}`: writes one file into the draft (starting it from the
/// live app when there is none), exactly as `writeAppFile` with `draft: true`.
#[utoipa::path(put, path = "/api/apps/{appId}/draft/files", params(("appId" = String, Path)), request_body = FileWrite, responses(
    (status = 200, description = "`{app, path, version, previousVersion, status}`: the draft's status after the write", body = Object),
    (status = 400, description = "a path or content the source rules refuse, or an unknown field (APP_INPUT_INVALID / APP_PATH_INVALID)", body = studio_identity::http::ErrorEnvelope),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, or not admin or staff with manage on the app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 409, description = "the file changed since the editor read it (APP_CONFLICT)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn write_file(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (actor, body): (_, FileWrite) = match file_call(&core, &method, &headers, &body).await {
        Ok(call) => call,
        Err(response) => return response,
    };
    let mut arguments = serde_json::json!({
        "app": app_id, "path": body.path, "content": body.content, "draft": true,
    });
    if let Some(encoding) = body.encoding {
        arguments["encoding"] = serde_json::json!(encoding);
    }
    if let Some(version) = body.expected_version {
        arguments["expectedVersion"] = serde_json::json!(version);
    }
    let written = crate::source_tools::run(
        &core,
        &actor,
        "writeAppFile",
        &app_id,
        &arguments.to_string(),
    )
    .await;
    change_answer(&app_id, written)
}

/// `DELETE /api/apps/:appId/draft/files` with `{path, expectedVersion?}`:
/// deletes one file from the draft, exactly as `deleteAppFile` with
/// `draft: true`.
#[utoipa::path(delete, path = "/api/apps/{appId}/draft/files", params(("appId" = String, Path)), request_body = FileDelete, responses(
    (status = 200, description = "`{app, path, previousVersion, status}`: the draft's status after the deletion", body = Object),
    (status = 400, description = "a path the source rules refuse (APP.md cannot be deleted), or an unknown field", body = studio_identity::http::ErrorEnvelope),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, or not admin or staff with manage on the app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "no such file in the draft", body = studio_identity::http::ErrorEnvelope),
    (status = 409, description = "the file changed since the editor read it (APP_CONFLICT)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn delete_file(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (actor, body): (_, FileDelete) = match file_call(&core, &method, &headers, &body).await {
        Ok(call) => call,
        Err(response) => return response,
    };
    let mut arguments = serde_json::json!({"app": app_id, "path": body.path, "draft": true});
    if let Some(version) = body.expected_version {
        arguments["expectedVersion"] = serde_json::json!(version);
    }
    let deleted = crate::source_tools::run(
        &core,
        &actor,
        "deleteAppFile",
        &app_id,
        &arguments.to_string(),
    )
    .await;
    change_answer(&app_id, deleted)
}

/// A draft-file call's caller and body: same-origin JSON from a signed-in
/// person (the source tools decide what they may do).
async fn file_call<T: serde::de::DeserializeOwned>(
    core: &Arc<Core>,
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Actor, T), Response> {
    same_origin_json(&core.accounts, method, headers, true)?;
    let actor = super::caller::actor(core, headers).await?;
    Ok((actor, parse_body(body)?))
}

/// The body of `POST /api/apps/:appId/draft/publish`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PublishBody {
    /// The live revision the draft began from (the draft's `baseRevision`).
    expected_revision: String,
    /// The `contentHash` of the draft as the person reviewed it: a draft
    /// changed since is refused (409, `details.cause = "DRAFT_CHANGED"`).
    content_hash: String,
}

/// `POST /api/apps/:appId/draft/publish` with `{expectedRevision,
/// contentHash}`: the signed-in person approves and publishes the draft they
/// reviewed.
#[utoipa::path(post, path = "/api/apps/{appId}/draft/publish", params(("appId" = String, Path)), request_body = PublishBody, responses(
    (status = 200, description = "`{app, published: {revision, previousRevision, migrationsApplied, status}}`", body = Object),
    (status = 400, description = "the draft does not validate (APP_INPUT_INVALID, details.diagnostics), a contentHash that is not a sha256, or an unknown or missing field", body = studio_identity::http::ErrorEnvelope),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, not admin or staff with manage, or a widening of reads that only an admin may publish (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "no draft, or a credential that is not a browser session", body = studio_identity::http::ErrorEnvelope),
    (status = 409, description = "the live app moved since the draft began (APP_CONFLICT, diagnostic DRAFT_BASE_MOVED), or the draft changed since it was reviewed (APP_CONFLICT, details.cause = DRAFT_CHANGED)", body = studio_identity::http::ErrorEnvelope),
    (status = 503, description = "the draft drops or edits an applied migration (APP_SCHEMA_INCOMPATIBLE), or data-worker is unreachable", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn publish(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let actor =
        match studio_identity::http::caller::session_write(&core.accounts, &method, &headers, true)
            .await
        {
            Ok(principal) => Actor::from(&principal),
            Err(response) => return response,
        };
    let body: PublishBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    if let Err(response) = manages(&core, &actor, &app_id).await {
        return response;
    }
    let published = drafts::publish(
        &core,
        &actor,
        &app_id,
        Reviewed {
            expected_revision: &body.expected_revision,
            content_hash: &body.content_hash,
        },
        Some(Approval::Studio),
    )
    .await;
    answer(&app_id, published.map(Answer::Published), StatusCode::OK)
}
