//! The caller of a Studio route as the domain functions take it: the
//! signed-in user (studio-identity's caller checks) as an [`Actor`], the
//! same a `CoreService` request's principal becomes, so a route and the MCP
//! tool of the same function meet one access rule.
//!
//! What it must never do: widen what the credential carries (its role,
//! kind and scopes are passed on exactly), or answer for an anonymous
//! caller otherwise than identity's refusal.

use axum::http::HeaderMap;
use axum::response::Response;
use studio_identity::actor::Actor;
use studio_identity::http::caller::user;

use crate::state::Core;

/// [`user`] as the actor of the function behind the `/api` route (history,
/// drafts, lifecycle), so who may is that function's rule alone.
pub(super) async fn actor(core: &Core, headers: &HeaderMap) -> Result<Actor, Response> {
    user(&core.accounts, headers)
        .await
        .map(|principal| Actor::from(&principal))
}
