//! `POST /api/apps`: Studio's New app dialog creates an app through the
//! function behind `CoreService.CreateApp` (`crate::create`), as the
//! creator's session or access token, recorded with the `studio` surface.
//!
//! What it must never do: read the body before the caller is known to be
//! allowed to create (a member learns nothing from a body), or accept a
//! state change without the same-origin JSON checks.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::{Deserialize, Serialize};
use studio_identity::http::caller::same_origin_json;
use studio_identity::http::parse_body;
use studio_store::{Principal, PrincipalKind, RevisionSurface, Scope};
use utoipa::ToSchema;

use crate::create::{Created, Creator};
use crate::state::Core;

/// `POST /api/apps` (the list of apps, `GET`, is `super::apps`').
pub(super) fn routes() -> axum::Router<Arc<Core>> {
    axum::Router::new().route("/api/apps", post(create_app))
}

/// A new app.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CreateAppBody {
    /// The app id: lowercase kebab-case, at most 60 characters.
    app: String,
    /// 1 to 80 characters.
    name: String,
    /// 1 to 300 characters.
    description: String,
    /// With one owner-scoped table `items` (default `false`).
    #[serde(default)]
    with_table: bool,
}

/// One problem found in a package.
#[derive(Serialize, ToSchema)]
pub(crate) struct DiagnosticEntry {
    file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
    code: String,
    reason: String,
}

/// Whether the package validates.
#[derive(Serialize, ToSchema)]
pub(crate) struct PackageStatusEntry {
    ok: bool,
    /// The live revision; `null` when the package does not validate.
    revision: Option<String>,
    diagnostics: Vec<DiagnosticEntry>,
}

/// The created app.
#[derive(Serialize, ToSchema)]
pub(crate) struct CreatedApp {
    /// The new app's id.
    app: String,
    status: PackageStatusEntry,
}

impl From<Created> for CreatedApp {
    fn from(created: Created) -> CreatedApp {
        CreatedApp {
            app: created.app,
            status: PackageStatusEntry {
                ok: created.status.ok,
                revision: created.status.revision,
                diagnostics: created
                    .status
                    .diagnostics
                    .into_iter()
                    .map(|diagnostic| DiagnosticEntry {
                        file: diagnostic.file,
                        line: diagnostic.line,
                        code: diagnostic.code,
                        reason: diagnostic.reason,
                    })
                    .collect(),
            },
        }
    }
}

/// Whether a Studio API principal may write app source: a browser session
/// or access token holding `apps:invoke` and `apps:write`.
fn writes(principal: &Principal) -> bool {
    matches!(
        principal.kind,
        PrincipalKind::Session | PrincipalKind::Access
    ) && principal.has(Scope::AppsInvoke)
        && principal.has(Scope::AppsWrite)
}

/// `POST /api/apps` with `{app, name, description, withTable?}`: creates the
/// app (admin and staff) and answers `{app, status}`.
#[utoipa::path(post, path = "/api/apps", request_body = CreateAppBody, responses(
    (status = 201, description = "created, registered, and managed by every admin and staff user existing now", body = CreatedApp),
    (status = 400, description = "an invalid id, name or description, or an unknown field; details.field names it", body = studio_identity::http::ErrorEnvelope),
    (status = 401, description = "anonymous", body = studio_identity::http::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, not admin or staff, or no apps:write", body = studio_identity::http::ErrorEnvelope),
    (status = 404, description = "hidden: a credential that does not resolve", body = studio_identity::http::ErrorEnvelope),
    (status = 409, description = "the id exists on disk or was ever registered (APP_CONFLICT)", body = studio_identity::http::ErrorEnvelope),
    (status = 415, description = "body is not application/json", body = studio_identity::http::ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = studio_identity::http::ErrorEnvelope)))]
pub(super) async fn create_app(
    State(core): State<Arc<Core>>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(response) = same_origin_json(&core.accounts, &method, &headers, true) {
        return response;
    }
    let principal = match studio_identity::http::caller::user(&core.accounts, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let creator = Creator {
        user_id: principal.user.id.clone(),
        writes: writes(&principal),
        surface: RevisionSurface::Studio,
    };
    // Who may comes before what is asked: a member learns nothing from a body.
    if let Err(error) = crate::create::authorize(&core, &creator).await {
        return error.into_response();
    }
    let request: CreateAppBody = match parse_body(&body) {
        Ok(request) => request,
        Err(response) => return response,
    };
    let created = crate::create::create(
        &core,
        creator,
        (
            &request.app,
            &request.name,
            &request.description,
            request.with_table,
        ),
    )
    .await;
    match created {
        Ok(reply) => {
            studio_identity::http::no_store((StatusCode::CREATED, Json(CreatedApp::from(reply))))
        }
        Err(error) => error.into_response(),
    }
}
