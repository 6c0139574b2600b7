//! `GET /api/session`: who the Studio page is signed in as, or that it is
//! not. The page asks it first on every load, so being signed out (no cookie,
//! or a session that ended) is an ordinary `200 {"user": null}` and not a red
//! 401 or 404 line in the browser's console; `/api/me` keeps its refusals for
//! the API's other callers. A bearer credential is answered exactly as
//! `/api/me` answers it (a token that does not resolve stays the hidden 404).
//!
//! It must never say why a session did not resolve (expired, revoked,
//! unknown): all of them are "not signed in".

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use serde::Serialize;
use studio_identity::http::caller::user;
use studio_identity::http::no_store;
use utoipa::ToSchema;

use crate::state::Core;

/// The route.
pub(super) fn routes() -> axum::Router<Arc<Core>> {
    axum::Router::new().route("/api/session", get(session))
}

/// `GET /api/session`.
#[derive(Serialize, ToSchema)]
pub(super) struct SessionResponse {
    /// `{id, username, role, scopes}` as `/api/me` answers, or `null` when
    /// the page is not signed in.
    #[schema(value_type = Option<Object>)]
    user: Option<serde_json::Value>,
}

/// `GET /api/session`.
#[utoipa::path(get, path = "/api/session", responses(
    (status = 200, description = "`{user}`: the caller as /api/me answers, or `{user: null}` without a session (none, or one that ended); Cache-Control: no-store", body = SessionResponse),
    (status = 404, description = "hidden: a bearer credential that does not resolve", body = studio_identity::http::ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = studio_identity::http::ErrorEnvelope)))]
pub(super) async fn session(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    let bearer = headers.contains_key(header::AUTHORIZATION);
    let user = match user(&core.accounts, &headers).await {
        Ok(principal) => Some(serde_json::json!({
            "id": principal.user.id,
            "username": principal.user.username,
            "role": principal.user.role.as_str(),
            "scopes": principal.scopes.iter().map(|scope| scope.as_str()).collect::<Vec<_>>(),
        })),
        // No session, or a cookie whose session ended: signed out.
        Err(refused)
            if !bearer
                && matches!(
                    refused.status(),
                    StatusCode::UNAUTHORIZED | StatusCode::NOT_FOUND
                ) =>
        {
            None
        }
        Err(refused) => return refused,
    };
    no_store(Json(SessionResponse { user }))
}

#[cfg(test)]
mod tests {
    use http::StatusCode;
    use serde_json::json;

    use crate::test_world::World;

    #[tokio::test]
    async fn signed_out_is_an_ordinary_answer_and_a_bad_token_stays_hidden() {
        let world = World::new();
        // No cookie, and a cookie whose session ended: signed out, 200, where
        // /api/me answers 401 and the hidden 404 (red lines in the console).
        let ended = world.session(&world.member);
        let secret = ended.trim_start_matches("sasha_session=").to_owned();
        world.store().delete_session(&secret).unwrap();
        for headers in [vec![], vec![("cookie", ended.as_str())]] {
            let (status, answer) = world.send("GET", "/api/session", &headers, "").await;
            assert_eq!(status, StatusCode::OK, "{headers:?}: {answer}");
            assert_eq!(answer, json!({"user": null}), "{headers:?}");
            let (status, _) = world.send("GET", "/api/me", &headers, "").await;
            assert_ne!(status, StatusCode::OK, "{headers:?}");
        }
        // Signed in: the user, as /api/me answers.
        let cookie = world.session(&world.admin);
        let (status, answer) = world
            .send("GET", "/api/session", &[("cookie", &cookie)], "")
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let (_, me) = world
            .send("GET", "/api/me", &[("cookie", &cookie)], "")
            .await;
        assert_eq!(answer["user"], me);
        assert_eq!(answer["user"]["username"], "ada");
        // A bearer credential that does not resolve is the hidden 404, as on /api/me.
        let (status, answer) = world
            .send(
                "GET",
                "/api/session",
                &[("authorization", "Bearer sasha_at_garbage")],
                "",
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    }
}
