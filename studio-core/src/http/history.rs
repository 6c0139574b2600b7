//! Studio's History panel over HTTP: `GET /api/apps/:appId/revisions`,
//! `GET /api/apps/:appId/revisions/:revision/diff?from=`,
//! `GET /api/apps/:appId/revisions/:revision/file?path=` and
//! `POST /api/apps/:appId/revert`. Each makes the caller's actor
//! from the session (or access token) and asks `crate::history::answer`,
//! the function behind `CoreService.History`, so who may and every refusal
//! are exactly the MCP history tools' (admin or staff with `manage` and a
//! session holding `apps:invoke` + `apps:write`). The answers are the JSON
//! the MCP tools put in `structuredContent` (mcp-gateway's
//! `platform::history_result`), field for field, and the list adds the app's
//! reverts (`reverts`, from the audit log), which the ledger's one row per
//! revision cannot show; a revert made here is recorded with the `studio`
//! surface.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sasha_proto::{AppError, ErrorCode};
use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;

use studio_identity::actor::Actor;
use studio_identity::http::caller::same_origin_json;
use studio_identity::http::{no_store, parse_body};
use studio_store::RevisionSurface;

use crate::grpc::convert::history_json;
use crate::history::Operation;
use crate::state::Core;

/// The History panel's routes.
pub(super) fn routes() -> axum::Router<Arc<Core>> {
    axum::Router::new()
        .route("/api/apps/{app_id}/revisions", get(list_revisions))
        .route(
            "/api/apps/{app_id}/revisions/{revision}/diff",
            get(diff_revisions),
        )
        .route(
            "/api/apps/{app_id}/revisions/{revision}/file",
            get(read_file),
        )
        .route("/api/apps/{app_id}/revert", post(revert))
}

/// Asks the history for `operation` on `app_id` as the caller of `headers`.
async fn ask(
    core: &Arc<Core>,
    headers: &HeaderMap,
    app_id: String,
    operation: Operation,
) -> Response {
    match super::caller::actor(core, headers).await {
        Ok(actor) => ask_as(core, &actor, app_id, operation).await,
        Err(response) => response,
    }
}

/// [`ask`] for a caller already authenticated.
async fn ask_as(core: &Arc<Core>, actor: &Actor, app_id: String, operation: Operation) -> Response {
    let answered = crate::history::answer(
        core,
        actor,
        &app_id,
        Some(operation),
        RevisionSurface::Studio,
    )
    .await;
    match answered {
        Ok(answer) => match history_json(&app_id, answer) {
            Some(value) => no_store(Json(value)),
            None => AppError::from_code(ErrorCode::Internal).into_response(),
        },
        Err(error) => error.into_response(),
    }
}

/// `GET /api/apps/:appId/revisions`: the app's revisions, newest first.
#[utoipa::path(get, path = "/api/apps/{appId}/revisions", params(("appId" = String, Path)), responses(
    (status = 200, description = "`{app, revisions: [{revision, uri, recordedAt, user, surface, summary, files, bytes, current}], reverts: [{at, user, from, to}]}`: the revisions newest first, as listAppRevisions answers, and the app's reverts newest first (a revert to a kept revision adds no revision); Cache-Control: no-store", body = Object),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not admin or staff with manage on the app, no apps:write, or an unknown app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "hidden: a credential that does not resolve", body = studio_identity::http::ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn list_revisions(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let actor = match super::caller::actor(&core, &headers).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    let answered = crate::history::answer(
        &core,
        &actor,
        &app_id,
        Some(Operation::List),
        RevisionSurface::Studio,
    )
    .await;
    let Some(mut listed) = (match answered {
        Ok(answer) => history_json(&app_id, answer),
        Err(error) => return error.into_response(),
    }) else {
        return AppError::from_code(ErrorCode::Internal).into_response();
    };
    // A revert to a revision the ledger holds adds no revision; the panel
    // lists the reverts themselves beside the revisions.
    match crate::history::reverts(&core, &app_id).await {
        Ok(reverts) => listed["reverts"] = json!(reverts),
        Err(error) => return error.into_response(),
    }
    no_store(Json(listed))
}

#[derive(Deserialize)]
pub(crate) struct DiffQuery {
    from: Option<String>,
}

/// `GET /api/apps/:appId/revisions/:revision/diff?from=`: the files that
/// differ from `from` to `revision`, with unified diffs.
#[utoipa::path(get, path = "/api/apps/{appId}/revisions/{revision}/diff", params(
    ("appId" = String, Path),
    ("revision" = String, Path, description = "the revision diffed to"),
    ("from" = String, Query, description = "the revision diffed from")), responses(
    (status = 200, description = "`{app, from, to, files: [{path, change, fromVersion, toVersion, diff?, binary?, truncated?}], truncated}`, as diffAppRevisions answers; Cache-Control: no-store", body = Object),
    (status = 400, description = "a revision that is not 64 lowercase hex digits, or no from", body = studio_identity::http::ErrorEnvelope),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not admin or staff with manage on the app, no apps:write, or an unknown app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "the app never had that revision, or a credential that does not resolve", body = studio_identity::http::ErrorEnvelope),
    (status = 410, description = "the retention policy removed that revision (APP_REVISION_UNAVAILABLE)", body = studio_identity::http::ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn diff_revisions(
    State(core): State<Arc<Core>>,
    Path((app_id, revision)): Path<(String, String)>,
    Query(query): Query<DiffQuery>,
    headers: HeaderMap,
) -> Response {
    let operation = Operation::Diff {
        // A missing `from` is refused by the history's own argument check.
        from: query.from.unwrap_or_default(),
        to: revision,
    };
    ask(&core, &headers, app_id, operation).await
}

#[derive(Deserialize)]
pub(crate) struct FileQuery {
    path: Option<String>,
}

/// `GET /api/apps/:appId/revisions/:revision/file?path=`: one file of the
/// app as it was at `revision`.
#[utoipa::path(get, path = "/api/apps/{appId}/revisions/{revision}/file", params(
    ("appId" = String, Path),
    ("revision" = String, Path),
    ("path" = String, Query, description = "the package-relative path")), responses(
    (status = 200, description = "`{app, revision, path, content, bytes, version, encoding?}`, as readAppRevisionFile answers (a binary asset in base64 with encoding); Cache-Control: no-store", body = Object),
    (status = 400, description = "a revision that is not 64 lowercase hex digits, or no path", body = studio_identity::http::ErrorEnvelope),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not admin or staff with manage on the app (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "the app never had that revision, or the revision has no such file", body = studio_identity::http::ErrorEnvelope),
    (status = 410, description = "the retention policy removed that revision (APP_REVISION_UNAVAILABLE)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn read_file(
    State(core): State<Arc<Core>>,
    Path((app_id, revision)): Path<(String, String)>,
    Query(query): Query<FileQuery>,
    headers: HeaderMap,
) -> Response {
    let operation = Operation::Read {
        revision,
        // A missing path is refused by the history's own argument check.
        path: query.path.unwrap_or_default(),
    };
    ask(&core, &headers, app_id, operation).await
}

/// The body of `POST /api/apps/:appId/revert`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RevertBody {
    /// The revision whose files the package gets back.
    revision: String,
    /// The app's current revision as the caller last saw it.
    expected_revision: String,
}

/// `POST /api/apps/:appId/revert` with `{revision, expectedRevision}`:
/// makes the package's files equal `revision`'s (a same-origin JSON request).
#[utoipa::path(post, path = "/api/apps/{appId}/revert", params(("appId" = String, Path)), request_body = RevertBody, responses(
    (status = 200, description = "`{app, revision, previousRevision, status: {ok, revision, diagnostics}}`, as revertApp answers", body = Object),
    (status = 400, description = "a revision that is not 64 lowercase hex digits, or an unknown field", body = studio_identity::http::ErrorEnvelope),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, not admin or staff with manage on the app, no apps:write, or the old revision would widen who reads a table that holds rows (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "the app never had that revision, or a credential that does not resolve", body = studio_identity::http::ErrorEnvelope),
    (status = 409, description = "expectedRevision is not the current revision (APP_CONFLICT, details.reason = stale-revision, details.currentRevision))", body = studio_identity::http::ErrorEnvelope),
    (status = 415, description = "body is not application/json", body = studio_identity::http::ErrorEnvelope),
    (status = 410, description = "the retention policy removed that revision (APP_REVISION_UNAVAILABLE)", body = studio_identity::http::ErrorEnvelope),
    (status = 503, description = "the old revision would drop or change an applied migration (APP_SCHEMA_INCOMPATIBLE, naming it), data-worker unreachable for a data app, or the account store busy", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn revert(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(response) = same_origin_json(&core.accounts, &method, &headers, true) {
        return response;
    }
    // Who asks comes before what they ask: an anonymous caller learns
    // nothing about the body.
    let actor = match super::caller::actor(&core, &headers).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    let body: RevertBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let operation = Operation::Revert {
        revision: body.revision,
        expected_revision: body.expected_revision,
    };
    ask_as(&core, &actor, app_id, operation).await
}
