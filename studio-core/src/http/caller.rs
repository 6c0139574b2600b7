//! The caller of a Studio route as the domain functions take it: the
//! signed-in user (studio-identity's caller checks) in the shape a
//! `CoreService` request names its principal, so a route and the MCP tool
//! of the same function meet one access rule.
//!
//! What it must never do: widen what the credential carries (its role,
//! kind and scopes are passed on exactly), or answer for an anonymous
//! caller otherwise than identity's refusal.

use axum::http::HeaderMap;
use axum::response::Response;
use sasha_proto::pb;
use studio_identity::http::caller::user;

use crate::state::Core;

/// [`user`] as the gateway would pass it over gRPC, for the `/api` routes
/// that answer through a `CoreService` function (history, drafts,
/// lifecycle), so who may is that function's rule alone.
pub(super) async fn wire_user(core: &Core, headers: &HeaderMap) -> Result<pb::Principal, Response> {
    user(&core.accounts, headers)
        .await
        .map(|principal| crate::grpc::to_wire(&principal))
}
