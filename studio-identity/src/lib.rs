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

pub mod actor;
pub mod authorization;
#[allow(
    clippy::result_large_err,
    reason = "guards return the finished refusal, as axum handlers do; boxing it buys nothing"
)]
pub mod http;
pub mod throttle;

use sasha_service::config::Origin;
use studio_store::Store;

use crate::authorization::OAuthState;
use crate::throttle::LoginThrottle;

/// The OAuth endpoints' request rules, pure functions of a request's bytes
/// (form parameters, redirect URIs, a client registration), as the endpoints
/// apply them; public for the fuzz targets in `fuzz/` and their models.
pub mod oauth_rules {
    pub use crate::http::oauth::OAuthError;
    pub use crate::http::oauth::params::{parse_params, redirect_matches, redirect_uri_problem};
    pub use crate::http::oauth::register::{Registration, registration};
}

/// What identity's routes serve from: the core database, the Studio origin,
/// the sign-in throttle and the authorization server's parked requests.
#[derive(Debug)]
pub struct Accounts {
    /// Users, sessions, tokens, people, OAuth clients and grants (`DB_PATH`).
    store: Store,
    /// The Studio origin: the only `Origin` a state change with the session
    /// cookie may come from; `https` makes session cookies `Secure` and
    /// `__Host-`.
    studio: Origin,
    /// Failed sign-ins per (user name, client address), to slow password
    /// guessing.
    login_throttle: LoginThrottle,
    /// The OAuth authorization server's parked requests and registration
    /// budgets.
    oauth: OAuthState,
}

impl Accounts {
    /// The accounts of `store`, served on `studio`; OAuth access tokens are
    /// issued for the resource `<mcp_origin>/mcp`.
    pub fn new(store: Store, studio: Origin, mcp_origin: &str) -> Accounts {
        Accounts {
            oauth: OAuthState::new(studio.as_str(), mcp_origin),
            store,
            studio,
            login_throttle: LoginThrottle::default(),
        }
    }

    /// Session cookies get `Secure` and the `__Host-` prefix when Studio is
    /// served over https.
    pub fn secure_cookies(&self) -> bool {
        self.studio.as_str().starts_with("https://")
    }

    /// The MCP endpoint OAuth access tokens are issued for
    /// (`<MCP_PUBLIC_ORIGIN>/mcp`), which clients connect to.
    pub fn mcp_resource(&self) -> &str {
        self.oauth.resource()
    }
}
