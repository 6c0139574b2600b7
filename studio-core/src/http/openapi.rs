//! The OpenAPI document of `/api`, generated from every Studio route's
//! handler (this crate's and studio-identity's and studio-assistant's), and
//! its route `GET /api/openapi.json`.
//!
//! Each path below names its handler by its module, which is the tag the
//! document gives it (`apps`, `history`, `people`, ...).
//!
//! What it must never do: describe a route the router does not serve (each
//! path below names the handler itself).

use std::sync::Arc;

use axum::Json;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use studio_identity::http::ErrorEnvelope;
use studio_identity::http::sign_in::{__path_login, __path_logout, __path_me};
use studio_identity::http::sso::__path_providers;
use utoipa::OpenApi;

use studio_assistant::http as assistant;
use studio_identity::http::oauth::{connections, consent};
use studio_identity::http::people;
use studio_identity::http::scim::tokens as scim_tokens;

use super::{apps, create, drafts, history, lifecycle, member_apps, replication, session};
use crate::state::Core;

/// `GET /api/openapi.json`.
pub(super) fn routes() -> axum::Router<Arc<Core>> {
    axum::Router::new().route("/api/openapi.json", get(openapi))
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
        providers,
        session::session,
        replication::replication_page,
        people::list_users,
        people::invite,
        people::change,
        people::remove,
        people::renew_invitation,
        people::password_reset,
        people::invitation,
        people::accept_invitation,
        people::list_tokens,
        people::create_token,
        people::revoke_token,
        scim_tokens::list,
        scim_tokens::mint,
        scim_tokens::revoke,
        apps::list_apps,
        create::create_app,
        apps::resource,
        apps::recovery,
        history::list_revisions,
        history::diff_revisions,
        history::read_file,
        history::revert,
        drafts::review,
        drafts::start,
        drafts::discard,
        drafts::resource,
        drafts::files,
        drafts::write_file,
        drafts::delete_file,
        drafts::publish,
        lifecycle::withdraw,
        lifecycle::restore,
        lifecycle::delete,
        lifecycle::withdrawn_apps,
        member_apps::list,
        member_apps::check,
        member_apps::create,
        member_apps::read,
        member_apps::update,
        member_apps::delete,
        member_apps::revert,
        member_apps::revisions,
        member_apps::draft,
        member_apps::share,
        member_apps::unshare,
        member_apps::disable,
        member_apps::enable,
        member_apps::promote,
        member_apps::settings,
        member_apps::set_switch,
        member_apps::guide,
        apps::list_access,
        apps::grant_access,
        apps::revoke_access,
        consent::request_details,
        consent::approve,
        consent::deny,
        connections::connections,
        connections::revoke_connection,
        assistant::status,
        assistant::list,
        assistant::create,
        assistant::read,
        assistant::remove,
        assistant::turn,
        assistant::cancel,
        assistant::confirmations,
        assistant::confirm
    ),
    components(schemas(
        studio_identity::http::sign_in::LoginRequest,
        apps::GrantRequest,
        studio_identity::http::sign_in::MeResponse,
        studio_identity::http::sso::ProvidersResponse,
        studio_identity::http::sso::SsoProvider,
        session::SessionResponse,
        apps::AppDescriptor,
        apps::AppsResponse,
        create::CreateAppBody,
        create::CreatedApp,
        create::PackageStatusEntry,
        create::DiagnosticEntry,
        apps::ResourceResponse,
        crate::recovery::RecoveryDescriptor,
        crate::recovery::RecoveryTable,
        crate::recovery::RecoveryTools,
        crate::recovery::RecoveryField,
        history::RevertBody,
        drafts::PublishBody,
        drafts::FileWrite,
        drafts::FileDelete,
        lifecycle::DeleteBody,
        member_apps::SourceBody,
        member_apps::MemberRevertBody,
        member_apps::ShareBody,
        member_apps::SwitchBody,
        apps::GrantEntry,
        apps::GrantsResponse,
        apps::GrantResponse,
        ErrorEnvelope,
        consent::ConsentRequest,
        consent::ConsentClient,
        consent::OfferedScope,
        consent::ApproveBody,
        consent::Decision,
        connections::ConnectionEntry,
        connections::ConnectionsResponse,
        scim_tokens::MintBody,
        assistant::CreateBody,
        assistant::TurnBody,
        assistant::ConfirmBody
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
