//! The OAuth 2.1 authorization server's state: authorization requests
//! parked while the person decides (at most [`MAX_PENDING`], each for
//! [`PENDING_TTL`]), kept in the core database (`studio_store`'s
//! `oauth_requests`) so any studio-core replica serves the consent page and
//! the decision; and the registration budget per client address
//! ([`REGISTRATION_BUDGET`]), kept in this process. The endpoints are
//! `crate::http::oauth`.
//!
//! What it must never do: hand out a parked request past its lifetime or
//! twice, or park without bound.

use std::time::Duration;

use sasha_proto::AppError;
use studio_store::{ParkedRequest, Store, blocking};

use crate::throttle::{ClientAddress, KeyedThrottle};

/// A parked authorization request lasts this long.
pub const PENDING_TTL: Duration = Duration::from_secs(10 * 60);
/// At most this many authorization requests are parked at once.
pub const MAX_PENDING: usize = 10_000;
/// Registrations one client address may make: 20 at once, then one every
/// 3 s (20 a minute). The store's caps on clients stay global.
pub const REGISTRATION_BUDGET: (u32, Duration) = (20, Duration::from_secs(3));
/// The authorization server's issuer, resource and registration budgets;
/// its parked requests are the core database's.
#[derive(Debug)]
pub struct OAuthState {
    /// The issuer: the Studio origin.
    pub(crate) issuer: String,
    /// The one resource tokens are issued for: `<MCP_PUBLIC_ORIGIN>/mcp`.
    pub(crate) resource: String,
    /// Registrations per client address ([`REGISTRATION_BUDGET`]).
    registrations: KeyedThrottle,
}

/// A validated authorization request waiting for the person's decision.
pub(crate) type Pending = ParkedRequest;

impl OAuthState {
    pub fn new(studio_origin: &str, mcp_origin: &str) -> OAuthState {
        OAuthState {
            issuer: studio_origin.to_owned(),
            resource: format!("{mcp_origin}/mcp"),
            registrations: KeyedThrottle::new(
                "oauth-registration",
                REGISTRATION_BUDGET.0,
                REGISTRATION_BUDGET.1,
            ),
        }
    }

    /// The MCP endpoint clients connect to: the resource its tokens are for.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Counts one registration from `client`, or says how long it must wait.
    pub(crate) async fn admit_registration(
        &self,
        store: &Store,
        client: ClientAddress,
    ) -> Result<Result<(), Duration>, AppError> {
        self.registrations.check(store, &client.key()).await
    }

    /// Parks a request and answers its id; `None` when too many are parked.
    pub(crate) async fn park(
        &self,
        store: &Store,
        pending: Pending,
    ) -> Result<Option<String>, AppError> {
        let store = store.clone();
        let ttl = i64::try_from(PENDING_TTL.as_secs()).unwrap_or(i64::MAX);
        blocking(move || store.park_oauth_request(&pending, ttl, MAX_PENDING)).await
    }

    /// The parked request `id`, still waiting.
    pub(crate) async fn peek(&self, store: &Store, id: &str) -> Result<Option<Pending>, AppError> {
        let (store, id) = (store.clone(), id.to_owned());
        blocking(move || store.peek_oauth_request(&id)).await
    }

    /// Takes the parked request `id` for a decision, once.
    pub(crate) async fn take(&self, store: &Store, id: &str) -> Result<Option<Pending>, AppError> {
        let (store, id) = (store.clone(), id.to_owned());
        blocking(move || store.take_oauth_request(&id)).await
    }
}
