//! Identity's HTTP surface, and the conventions every Studio HTTP handler
//! follows: the crate's one route table ([`routes`]: sign-in, people and
//! tokens, the OAuth 2.1 authorization server), who is calling
//! ([`caller`]), and the answers the Studio API shares (`answers`,
//! re-exported here).
//!
//! What it must never do: tell an anonymous caller, a bad credential, a
//! denied app and an unknown one apart (the 401 and the hidden 404 are
//! identical whatever was asked), or parse a body before bounding what it
//! may expand into.

use std::sync::Arc;

use axum::routing::{delete, get, patch, post};

use crate::accounts::Accounts;

pub(crate) mod answers;
pub mod caller;
pub mod oauth;
pub mod people;
pub mod scim;
pub mod sign_in;
pub mod sso;

pub use answers::{
    ErrorEnvelope, hidden_not_found, no_store, parse_body, parse_body_within, unauthenticated,
};

/// Identity's routes, all on the Studio host: sign-in (`/api/auth/*`,
/// `/api/me`, and through the identity provider `/auth/oidc/*`), people, reset links and tokens (`/api/users*`, `/api/invitation*`,
/// `/api/tokens*`), and the OAuth 2.1 authorization server (RFC 8414
/// metadata, `/oauth/*`, and the consent and connections API under
/// `/api/oauth/*`), and SCIM provisioning (`/scim/v2/*`, `/api/scim/tokens`).
pub fn routes() -> axum::Router<Arc<Accounts>> {
    axum::Router::new()
        .route("/api/auth/login", post(sign_in::login))
        .route("/api/auth/logout", post(sign_in::logout))
        .route("/api/me", get(sign_in::me))
        .route("/api/auth/providers", get(sso::providers))
        .route(sso::START_PATH, get(sso::start))
        .route(crate::sso::config::CALLBACK_PATH, get(sso::callback))
        .route("/api/users", get(people::list_users).post(people::invite))
        .route(
            "/api/users/{username}",
            patch(people::change).delete(people::remove),
        )
        .route(
            "/api/users/{username}/invitation",
            post(people::renew_invitation),
        )
        .route(
            "/api/users/{username}/password-reset",
            post(people::password_reset),
        )
        .route("/api/invitation", post(people::invitation))
        .route("/api/invitation/accept", post(people::accept_invitation))
        .route(
            "/api/tokens",
            get(people::list_tokens).post(people::create_token),
        )
        .route("/api/tokens/{id}", delete(people::revoke_token))
        .route(
            "/.well-known/oauth-authorization-server",
            get(oauth::metadata::metadata).options(oauth::preflight),
        )
        .route(
            "/oauth/register",
            post(oauth::register::register).options(oauth::preflight),
        )
        .route("/oauth/authorize", get(oauth::authorize::authorize))
        .route(
            "/oauth/token",
            post(oauth::token::token).options(oauth::preflight),
        )
        .route(
            "/oauth/revoke",
            post(oauth::token::revoke).options(oauth::preflight),
        )
        .route(
            "/api/oauth/requests/{id}",
            get(oauth::consent::request_details),
        )
        .route(
            "/api/oauth/requests/{id}/approve",
            post(oauth::consent::approve),
        )
        .route("/api/oauth/requests/{id}/deny", post(oauth::consent::deny))
        .route(
            "/api/oauth/connections",
            get(oauth::connections::connections),
        )
        .route(
            "/api/oauth/connections/{id}",
            delete(oauth::connections::revoke_connection),
        )
        .merge(scim::routes())
}
