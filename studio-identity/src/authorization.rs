//! The OAuth 2.1 authorization server's process state: authorization
//! requests parked while the person decides (at most [`MAX_PENDING`], each
//! for [`PENDING_TTL`]) and the registration budget per client address
//! ([`REGISTRATION_BUDGET`]). The endpoints are `crate::http::oauth`.
//!
//! What it must never do: keep a parked request past its lifetime, park
//! without bound, or outlive the process (a restart forgets parked
//! requests; the person starts the connection again).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use studio_store::Scope;

use crate::throttle::{ClientAddress, KeyedThrottle};

/// A parked authorization request lasts this long.
pub const PENDING_TTL: Duration = Duration::from_secs(10 * 60);
/// At most this many authorization requests are parked at once.
pub const MAX_PENDING: usize = 10_000;
/// Registrations one client address may make: 20 at once, then one every
/// 3 s (20 a minute). The store's caps on clients stay global.
pub const REGISTRATION_BUDGET: (u32, Duration) = (20, Duration::from_secs(3));
/// The authorization server's process state: parked requests and the
/// registration budgets. One studio-core serves the Studio origin.
#[derive(Debug)]
pub struct OAuthState {
    /// The issuer: the Studio origin.
    pub(crate) issuer: String,
    /// The one resource tokens are issued for: `<MCP_PUBLIC_ORIGIN>/mcp`.
    pub(crate) resource: String,
    pending: Mutex<HashMap<String, Pending>>,
    /// Registrations per client address ([`REGISTRATION_BUDGET`]).
    registrations: KeyedThrottle<ClientAddress>,
}

/// A validated authorization request waiting for the person's decision.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub(crate) client_id: String,
    pub(crate) client_name: String,
    pub(crate) redirect_uri: String,
    pub(crate) state: Option<String>,
    pub(crate) code_challenge: String,
    pub(crate) requested: BTreeSet<Scope>,
    pub(crate) created: Instant,
    pub(crate) expires_at: i64,
}

impl OAuthState {
    pub fn new(studio_origin: &str, mcp_origin: &str) -> OAuthState {
        OAuthState {
            issuer: studio_origin.to_owned(),
            resource: format!("{mcp_origin}/mcp"),
            pending: Mutex::new(HashMap::new()),
            registrations: KeyedThrottle::new(
                REGISTRATION_BUDGET.0,
                REGISTRATION_BUDGET.1,
                governor::clock::DefaultClock::default(),
            ),
        }
    }

    /// The MCP endpoint clients connect to: the resource its tokens are for.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Counts one registration from `client`, or says how long it must wait.
    pub(crate) fn admit_registration(&self, client: ClientAddress) -> Result<(), Duration> {
        self.registrations.check(&client)
    }

    /// Parks a request; `None` when too many are parked.
    pub(crate) fn park(&self, pending: Pending) -> Option<String> {
        let mut parked = self.pending.lock().ok()?;
        if parked.len() >= MAX_PENDING {
            parked.retain(|_, p| p.created.elapsed() < PENDING_TTL);
        }
        if parked.len() >= MAX_PENDING {
            return None;
        }
        let id = random_id();
        parked.insert(id.clone(), pending);
        Some(id)
    }

    pub(crate) fn peek(&self, id: &str) -> Option<Pending> {
        let parked = self.pending.lock().ok()?;
        parked
            .get(id)
            .filter(|p| p.created.elapsed() < PENDING_TTL)
            .cloned()
    }

    pub(crate) fn take(&self, id: &str) -> Option<Pending> {
        let mut parked = self.pending.lock().ok()?;
        parked
            .remove(id)
            .filter(|p| p.created.elapsed() < PENDING_TTL)
    }
}

fn random_id() -> String {
    use rand::RngCore as _;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
