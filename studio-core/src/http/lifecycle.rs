//! Studio's lifecycle controls over HTTP: `POST /api/apps/:appId/withdraw`,
//! `…/restore` and `…/delete` (with `{deleteData, confirmAppId}`), and
//! `GET /api/withdrawn-apps`, the admins' list of withdrawn apps (which no
//! other list shows, since a withdrawn app is gone from every catalogue).
//! Who may and every refusal are `crate::lifecycle`'s, the function behind
//! `CoreService.AppLifecycle` (admins only, a credential holding
//! `apps:invoke` + `apps:write`); the answers are the JSON the MCP tools
//! put in `structuredContent` (`sasha_proto::client_json::lifecycle`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sasha_proto::{AppError, ErrorCode};
use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;

use crate::catalogue::AppEntry;
use crate::state::Core;
use studio_identity::http::caller::same_origin_json;
use studio_identity::http::{no_store, parse_body};
use studio_store::UserRole;
use studio_store::blocking;

use crate::grpc::convert::lifecycle_json;
use crate::lifecycle::Operation;

/// The lifecycle controls' routes.
pub(super) fn routes() -> axum::Router<Arc<Core>> {
    axum::Router::new()
        .route("/api/apps/{app_id}/withdraw", post(withdraw))
        .route("/api/apps/{app_id}/restore", post(restore))
        .route("/api/apps/{app_id}/delete", post(delete))
        .route("/api/withdrawn-apps", get(withdrawn_apps))
}

async fn run(
    core: &Arc<Core>,
    headers: &HeaderMap,
    app_id: String,
    operation: Operation,
) -> Response {
    let actor = match super::caller::actor(core, headers).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    match crate::lifecycle::change(core, &actor, &app_id, Some(operation)).await {
        Ok(outcome) => no_store(Json(lifecycle_json(outcome))),
        Err(error) => error.into_response(),
    }
}

/// `POST /api/apps/:appId/withdraw`: the app disappears for everyone (its
/// data, history and grants kept).
#[utoipa::path(post, path = "/api/apps/{appId}/withdraw", params(("appId" = String, Path)), responses(
    (status = 200, description = "`{app, changed, withdrawn, packageDeleted, dataDeleted}`, as withdrawApp answers", body = Object),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, or not an admin (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "no such app", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn withdraw(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = same_origin_json(&core.accounts, &method, &headers, false) {
        return response;
    }
    run(&core, &headers, app_id, Operation::Withdraw).await
}

/// `POST /api/apps/:appId/restore`: a withdrawn app comes back as it was.
#[utoipa::path(post, path = "/api/apps/{appId}/restore", params(("appId" = String, Path)), responses(
    (status = 200, description = "as restoreApp answers", body = Object),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, or not an admin", body = studio_identity::http::ErrorEnvelope),
    (status = 409, description = "the package was deleted (APP_CONFLICT)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn restore(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = same_origin_json(&core.accounts, &method, &headers, false) {
        return response;
    }
    run(&core, &headers, app_id, Operation::Restore).await
}

/// The body of `POST /api/apps/:appId/delete`.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct DeleteBody {
    /// Also delete the data file (backed up first).
    #[serde(default)]
    delete_data: bool,
    /// The app id typed again: the second confirmation `deleteData` needs.
    #[serde(default)]
    confirm_app_id: Option<String>,
}

/// `POST /api/apps/:appId/delete` with `{deleteData, confirmAppId}`: deletes
/// a withdrawn app's package and, confirmed twice, its data file.
#[utoipa::path(post, path = "/api/apps/{appId}/delete", params(("appId" = String, Path)), request_body = DeleteBody, responses(
    (status = 200, description = "as deleteApp answers, with `dataBackup` when the data file was backed up and deleted", body = Object),
    (status = 400, description = "deleteData without confirmAppId equal to the id (APP_INPUT_INVALID)", body = studio_identity::http::ErrorEnvelope),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, or not an admin", body = studio_identity::http::ErrorEnvelope),
    (status = 409, description = "the app is not withdrawn (APP_CONFLICT)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn delete(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(response) = same_origin_json(&core.accounts, &method, &headers, true) {
        return response;
    }
    let body: DeleteBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let operation = Operation::Delete {
        delete_data: body.delete_data,
        confirm_app_id: body.confirm_app_id.unwrap_or_default(),
    };
    run(&core, &headers, app_id, operation).await
}

/// `GET /api/withdrawn-apps`: every withdrawn app, for admins.
#[utoipa::path(get, path = "/api/withdrawn-apps", responses(
    (status = 200, description = "`{apps: [{app, name, revision, withdrawnAt, withdrawnBy, packageDeleted, dataDeleted}]}` by id; Cache-Control: no-store", body = Object),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not an admin (APP_ACCESS_DENIED)", body = studio_identity::http::ErrorEnvelope)))]
pub(crate) async fn withdrawn_apps(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    let principal = match studio_identity::http::caller::user(&core.accounts, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    if principal.user.role != UserRole::Admin {
        return AppError::new(
            ErrorCode::AccessDenied,
            "only an admin sees the withdrawn apps",
        )
        .into_response();
    }
    let store = core.store.clone();
    let listed = blocking(move || {
        let apps = store.withdrawn_apps()?;
        let mut named = Vec::with_capacity(apps.len());
        for (id, state) in apps {
            let by = match &state.withdrawn_by {
                Some(user) => store.user(user)?.map(|user| user.username),
                None => None,
            };
            named.push((id, state, by));
        }
        Ok(named)
    })
    .await;
    let listed = match listed {
        Ok(listed) => listed,
        Err(error) => return error.into_response(),
    };
    let snapshot = core.catalogue.current();
    let apps: Vec<serde_json::Value> = listed
        .into_iter()
        .map(|(id, state, by)| {
            let name = match snapshot.apps.get(&id) {
                Some(AppEntry::Valid(package)) => package.manifest.name.clone(),
                _ => id.clone(),
            };
            json!({
                "app": id,
                "name": name,
                "revision": state.revision,
                "withdrawnAt": state.withdrawn_at,
                "withdrawnBy": by,
                "packageDeleted": state.package_deleted_at.is_some(),
                "dataDeleted": state.data_deleted_at.is_some(),
            })
        })
        .collect();
    no_store(Json(json!({"apps": apps})))
}
