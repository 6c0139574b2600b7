//! studio-identity: who is calling Studio, and the accounts behind them:
//! browser sessions and signing in, with its throttles ([`throttle`]);
//! people, invitations and personal tokens; the OAuth 2.1 authorization
//! server for MCP clients ([`authorization`] holds its process state); and
//! the caller checks every Studio HTTP route makes ([`http::caller`]).
//! The rows behind them (users, sessions, tokens, OAuth clients, grants)
//! are studio-store's; what a principal may do with an app (its scopes,
//! its grants) is read fresh from there on every request.
//!
//! [`Accounts`] is the state its routes ([`http::routes`]) serve from;
//! studio-core holds one and merges the routes into the Studio router.
//!
//! What it must never do: cache an access decision, let anyone raise their
//! own access or change their own account's role or existence, redirect to
//! an address nobody vouched for, or tell a bad credential from an unknown
//! one.

mod accounts;
pub mod actor;
pub mod authorization;
pub mod group_roles;
#[allow(
    clippy::result_large_err,
    reason = "guards return the finished refusal, as axum handlers do; boxing it buys nothing"
)]
pub mod http;
pub mod sso;
pub mod throttle;

pub use accounts::Accounts;

/// The OAuth endpoints' request rules, pure functions of a request's bytes
/// (form parameters, redirect URIs, a client registration), as the endpoints
/// apply them; public for the fuzz targets in `fuzz/` and their models.
pub mod oauth_rules {
    pub use crate::http::oauth::OAuthError;
    pub use crate::http::oauth::params::{parse_params, redirect_matches, redirect_uri_problem};
    pub use crate::http::oauth::register::{Registration, registration};
}
