//! The Studio HTTP API, `/api/*`.
//!
//! Callers are browser sessions (the session cookie) or, for scripts, access
//! tokens (`Authorization: Bearer`). API keys and chat-session tokens are system
//! credentials: they are refused here. Every answer is JSON; every failure is the
//! closed envelope.
//!
//! Oracles are closed on purpose: an anonymous request gets the same 401 whatever
//! it asked for; a bad credential, a denied app, an unknown app and an
//! unknown or stale revision all get the same hidden 404, byte for byte (its
//! diagnostic id is the nil UUID, since nothing about it needs diagnosing).
//! State-changing routes accept only same-origin JSON requests.
//!
//! Sign-in is slowed per (user name, client address) with growing delays
//! ([`LoginThrottle`], keyed GCRA limiters with bounded tables); a throttle
//! never keys on the user name alone, so failures from one address never slow
//! that name from another.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use governor::clock::{Clock, DefaultClock};
use sasha_proto::{AppError, ErrorCode};
use sasha_service::web::{bearer, cookie, session_cookie_name};
use serde::{Deserialize, Serialize};
use utoipa::{OpenApi, ToSchema};

use crate::Core;
use crate::catalogue::AppEntry;
use studio_store::{AppAccess, Principal, PrincipalKind, Scope, UserRole, blocking};

/// Sign-in attempts one (user name, client address) pair may make, as
/// `(burst, then one more per period)` tiers; an attempt must fit every tier.
/// So the delays grow: five at once, then one every 10 s, after ten one a
/// minute, after twenty one every 15 minutes (four an hour).
pub(crate) const SIGN_IN_PAIR_TIERS: [(u32, Duration); 3] = [
    (5, Duration::from_secs(10)),
    (10, Duration::from_secs(60)),
    (20, Duration::from_secs(15 * 60)),
];
/// Sign-in attempts one client address may make, whatever the user names
/// (password spraying): 300 at once, then one a second.
pub(crate) const SIGN_IN_ADDRESS_TIER: (u32, Duration) = (300, Duration::from_secs(1));
/// The most keys one throttle table holds (see [`KeyedThrottle`]).
pub(crate) const MAX_THROTTLE_KEYS: usize = 100_000;
/// Stale keys are dropped every this many checks.
const THROTTLE_HOUSEKEEPING_EVERY: u64 = 4_096;

/// Where a request comes from, as a throttle key: the address the one trusted
/// proxy hop (nginx, Caddy, ingress-nginx or `sasha up`'s ingress) writes into
/// `X-Forwarded-For`, replacing whatever the client sent there
/// ([`sasha_service::telemetry::forwarded_client`], the `client=` of the access
/// log). studio-core's listener must be reachable only through that hop
/// (`docs/operating.md`, "the one trusted hop"); a request without the header (a listener
/// reached directly, as in tests) counts as the one address `-`. An IPv6
/// address counts by its /64 network, which one host usually owns whole; an
/// IPv4-mapped IPv6 address counts as the IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ClientAddress([u8; 16]);

impl ClientAddress {
    /// The client address of a request with these headers.
    pub(crate) fn of(headers: &HeaderMap) -> ClientAddress {
        let (client, _) = sasha_service::telemetry::forwarded_client(headers);
        ClientAddress::from_ip(client.parse().ok())
    }

    /// `None` is the no-proxy address `-` (the unspecified address `::`,
    /// which is never a client's).
    pub(crate) fn from_ip(ip: Option<std::net::IpAddr>) -> ClientAddress {
        match ip {
            None => ClientAddress([0; 16]),
            Some(std::net::IpAddr::V4(ip)) => ClientAddress(ip.to_ipv6_mapped().octets()),
            Some(std::net::IpAddr::V6(ip)) => match ip.to_ipv4_mapped() {
                Some(ip) => ClientAddress(ip.to_ipv6_mapped().octets()),
                None => {
                    let mut octets = ip.octets();
                    octets[8..].fill(0);
                    ClientAddress(octets)
                }
            },
        }
    }
}

type GcraLimiter<K, C> = governor::RateLimiter<
    K,
    governor::state::keyed::DefaultKeyedStateStore<K>,
    C,
    governor::middleware::NoOpMiddleware<<C as Clock>::Instant>,
>;

/// One keyed GCRA rate limiter (`governor`) whose table of keys is bounded.
///
/// governor forgets nothing by itself: every [`THROTTLE_HOUSEKEEPING_EVERY`]
/// checks, and whenever the table reaches [`MAX_THROTTLE_KEYS`], keys whose
/// state equals a fresh one (their burst fully refilled) are dropped. If that
/// frees less than a quarter of the table, every key is recent and the table
/// starts afresh: a flood that fills it forgets its own keys too, and filling
/// it takes that many distinct keys within the quota's refill time, each
/// passing the tiers in front (an address's budget, an argon2 verification).
/// Refusing new keys instead would let such a flood lock everyone out.
pub(crate) struct KeyedThrottle<K, C: Clock = DefaultClock>
where
    K: std::hash::Hash + Eq + Clone,
{
    quota: governor::Quota,
    clock: C,
    /// The limiter; replaced whole (under the write lock) when the table is
    /// full of recent keys, read-locked for every check.
    limiter: std::sync::RwLock<GcraLimiter<K, C>>,
    /// Checks made, for housekeeping.
    checks: std::sync::atomic::AtomicU64,
}

impl<K, C> std::fmt::Debug for KeyedThrottle<K, C>
where
    K: std::hash::Hash + Eq + Clone,
    C: Clock,
{
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("KeyedThrottle")
            .field("quota", &self.quota)
            .finish_non_exhaustive()
    }
}

impl<K, C> KeyedThrottle<K, C>
where
    K: std::hash::Hash + Eq + Clone,
    C: Clock + Clone,
{
    /// `burst` checks at once, then one more per `period`, per key.
    pub(crate) fn new(burst: u32, period: Duration, clock: C) -> KeyedThrottle<K, C> {
        let burst = std::num::NonZeroU32::new(burst).unwrap_or(std::num::NonZeroU32::MIN);
        let quota = governor::Quota::with_period(period)
            .unwrap_or_else(|| governor::Quota::per_second(std::num::NonZeroU32::MIN))
            .allow_burst(burst);
        KeyedThrottle {
            quota,
            limiter: std::sync::RwLock::new(governor::RateLimiter::hashmap_with_clock(
                quota,
                clock.clone(),
            )),
            clock,
            checks: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Takes one cell for `key`: `Ok` when it conforms, else how long until
    /// one would (nothing is taken then).
    pub(crate) fn check(&self, key: &K) -> Result<(), Duration> {
        self.housekeep();
        let limiter = self
            .limiter
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        limiter
            .check_key(key)
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// The number of keys held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.limiter
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    fn housekeep(&self) {
        let checks = self
            .checks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let full = {
            let limiter = self
                .limiter
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let full = limiter.len() >= MAX_THROTTLE_KEYS;
            if full || checks.is_multiple_of(THROTTLE_HOUSEKEEPING_EVERY) {
                limiter.retain_recent();
                limiter.shrink_to_fit();
            }
            full && limiter.len() > MAX_THROTTLE_KEYS / 4 * 3
        };
        if full {
            tracing::warn!(
                keys = MAX_THROTTLE_KEYS,
                "a throttle table is full of recent keys; it starts afresh"
            );
            *self
                .limiter
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) =
                governor::RateLimiter::hashmap_with_clock(self.quota, self.clock.clone());
        }
    }
}

/// The key of one (user name, client address) pair: 16 bytes of the sha256
/// of the lowercased name and the address, so a long name costs no memory.
type SignInPair = [u8; 16];

fn sign_in_pair(username: &str, client: ClientAddress) -> SignInPair {
    use sha2::Digest as _;
    let mut hash = sha2::Sha256::new();
    hash.update(client.0);
    hash.update(username.to_lowercase().as_bytes());
    let digest = hash.finalize();
    let mut key = [0; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

/// Slows password guessing without letting anyone lock a user out. Every
/// sign-in attempt (whatever its outcome, before the password is checked)
/// takes a cell from its client address's budget ([`SIGN_IN_ADDRESS_TIER`])
/// and from each tier of its (user name, client address) pair
/// ([`SIGN_IN_PAIR_TIERS`]), shortest first; a tier without a cell refuses
/// the attempt with how long to wait. User names count lowercased whether or
/// not they exist, so throttling reveals nothing; failures from one address
/// never slow the same name from another. Process memory: one studio-core
/// serves the API.
#[derive(Debug)]
pub(crate) struct LoginThrottle<C: Clock = DefaultClock> {
    /// Attempts per client address, any user name.
    addresses: KeyedThrottle<ClientAddress, C>,
    /// Attempts per (user name, client address), one limiter per tier.
    pairs: [KeyedThrottle<SignInPair, C>; 3],
}

impl Default for LoginThrottle {
    fn default() -> LoginThrottle {
        LoginThrottle::with_clock(DefaultClock::default())
    }
}

impl<C: Clock + Clone> LoginThrottle<C> {
    pub(crate) fn with_clock(clock: C) -> LoginThrottle<C> {
        let (burst, period) = SIGN_IN_ADDRESS_TIER;
        LoginThrottle {
            addresses: KeyedThrottle::new(burst, period, clock.clone()),
            pairs: SIGN_IN_PAIR_TIERS
                .map(|(burst, period)| KeyedThrottle::new(burst, period, clock.clone())),
        }
    }

    /// Admits one sign-in attempt for `username` from `client`, or says how
    /// long that pair (or that address) must wait.
    pub(crate) fn admit(&self, username: &str, client: ClientAddress) -> Result<(), Duration> {
        self.addresses.check(&client)?;
        let pair = sign_in_pair(username, client);
        for tier in &self.pairs {
            tier.check(&pair)?;
        }
        Ok(())
    }
}

/// Whole seconds to wait, at least one, as `Retry-After` takes them.
pub(crate) fn retry_after_seconds(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

/// "try again in …" for a wait.
pub(crate) fn try_again_in(wait: Duration) -> String {
    match retry_after_seconds(wait) {
        1 => "try again in a second".to_owned(),
        seconds @ ..=119 => format!("try again in {seconds} seconds"),
        seconds => format!("try again in {} minutes", seconds.div_ceil(60)),
    }
}

/// The retryable 429 `APP_BUSY` of a throttle, with `Retry-After`.
fn throttled(wait: Duration, what: &str) -> Response {
    let mut response =
        AppError::new(ErrorCode::Busy, format!("{what}; {}", try_again_in(wait))).into_response();
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(retry_after_seconds(wait)),
    );
    response
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod throttle_tests {
    use std::net::IpAddr;

    use governor::clock::FakeRelativeClock;

    use super::*;

    fn address(text: &str) -> ClientAddress {
        ClientAddress::from_ip(Some(text.parse::<IpAddr>().unwrap()))
    }

    /// Attempts in a row that `throttle` admits for `name` from `client` now.
    fn admitted(
        throttle: &LoginThrottle<FakeRelativeClock>,
        name: &str,
        client: ClientAddress,
    ) -> usize {
        (0..100)
            .take_while(|_| throttle.admit(name, client).is_ok())
            .count()
    }

    #[test]
    fn sign_in_delays_grow_per_pair_and_never_cross_addresses() {
        let clock = FakeRelativeClock::default();
        let throttle = LoginThrottle::with_clock(clock.clone());
        let (a, b) = (address("192.0.2.1"), address("198.51.100.7"));
        assert_eq!(admitted(&throttle, "ada", a), 5, "five at once");
        let wait = throttle.admit("ADA", a).unwrap_err();
        assert_eq!(wait, Duration::from_secs(10), "the name counts lowercased");
        // Another address, and another name from the same address, are not slowed.
        assert!(throttle.admit("ada", b).is_ok());
        assert!(throttle.admit("bea", a).is_ok());
        // Then one every 10 s until ten, one a minute until twenty, then one
        // every 15 minutes: the wait after each refusal grows.
        let mut waits = Vec::new();
        for _ in 0..40 {
            match throttle.admit("ada", a) {
                Ok(()) => {}
                Err(wait) => {
                    waits.push(wait);
                    clock.advance(wait);
                }
            }
        }
        assert!(waits.windows(2).all(|pair| pair[0] <= pair[1]), "{waits:?}");
        assert!(waits.contains(&Duration::from_secs(10)), "{waits:?}");
        assert!(
            waits.iter().any(|wait| *wait > Duration::from_secs(30)),
            "{waits:?}"
        );
        assert!(
            waits
                .iter()
                .any(|wait| *wait > Duration::from_secs(10 * 60)),
            "{waits:?}"
        );
        assert!(
            waits
                .iter()
                .all(|wait| *wait <= Duration::from_secs(15 * 60)),
            "{waits:?}"
        );
        // The pair recovers in time; b's attempts never depended on a's.
        clock.advance(Duration::from_secs(20 * 15 * 60));
        assert_eq!(admitted(&throttle, "ada", a), 5);
    }

    #[test]
    fn one_address_cannot_spray_unlimited_names() {
        let clock = FakeRelativeClock::default();
        let throttle = LoginThrottle::with_clock(clock.clone());
        let a = address("192.0.2.1");
        for n in 0..SIGN_IN_ADDRESS_TIER.0 {
            assert!(throttle.admit(&format!("user{n}"), a).is_ok());
        }
        assert_eq!(throttle.admit("another", a), Err(Duration::from_secs(1)));
        assert!(throttle.admit("another", address("192.0.2.2")).is_ok());
        clock.advance(Duration::from_secs(1));
        assert!(throttle.admit("another", a).is_ok());
    }

    #[test]
    fn client_addresses_are_keyed_by_host_or_ipv6_network() {
        assert_eq!(address("192.0.2.1"), address("::ffff:192.0.2.1"));
        assert_ne!(address("192.0.2.1"), address("192.0.2.2"));
        assert_eq!(address("2001:db8:1:2::1"), address("2001:db8:1:2:ffff::9"));
        assert_ne!(address("2001:db8:1:2::1"), address("2001:db8:1:3::1"));
        assert_ne!(ClientAddress::from_ip(None), address("0.0.0.0"));
        let mut headers = HeaderMap::new();
        assert_eq!(ClientAddress::of(&headers), ClientAddress::from_ip(None));
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("6.6.6.6, 192.0.2.1"),
        );
        assert_eq!(ClientAddress::of(&headers), address("192.0.2.1"));
    }

    #[test]
    fn throttle_tables_stay_bounded() {
        let clock = FakeRelativeClock::default();
        let throttle: KeyedThrottle<u64, _> =
            KeyedThrottle::new(2, Duration::from_secs(60), clock.clone());
        // Keys whose burst has refilled are dropped.
        for key in 0..1_000 {
            assert!(throttle.check(&key).is_ok());
        }
        clock.advance(Duration::from_secs(120));
        for key in 1_000..(1_000 + THROTTLE_HOUSEKEEPING_EVERY) {
            assert!(throttle.check(&key).is_ok());
        }
        assert!(
            throttle.len() <= THROTTLE_HOUSEKEEPING_EVERY as usize,
            "{}",
            throttle.len()
        );
        // A table full of recent keys starts afresh instead of growing.
        let started = std::time::Instant::now();
        for key in 0..(MAX_THROTTLE_KEYS as u64 * 2) {
            let _ = throttle.check(&(key + 1_000_000));
            assert!(throttle.len() <= MAX_THROTTLE_KEYS + 1);
        }
        println!(
            "{} checks over a full table took {:?}",
            MAX_THROTTLE_KEYS * 2,
            started.elapsed()
        );
    }

    #[test]
    fn waits_round_up_to_whole_seconds() {
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(10_001)), 11);
        assert_eq!(
            try_again_in(Duration::from_secs(10)),
            "try again in 10 seconds"
        );
        assert_eq!(
            try_again_in(Duration::from_secs(14 * 60 + 1)),
            "try again in 15 minutes"
        );
    }
}

/// The `/api` routes.
pub(crate) fn routes() -> axum::Router<Arc<Core>> {
    axum::Router::new()
        .route("/api/openapi.json", get(openapi))
        .route("/api/auth/login", post(login))
        .route("/api/auth/logout", post(logout))
        .route("/api/me", get(me))
        .route(
            "/api/apps",
            get(list_apps).post(crate::create::create_app_http),
        )
        .route("/api/apps/{app_id}/resource", get(resource))
        .route("/api/apps/{app_id}/access", get(list_access))
        .route("/api/apps/{app_id}/recovery", get(recovery))
        .route(
            "/api/apps/{app_id}/revisions",
            get(crate::history_http::list_revisions),
        )
        .route(
            "/api/apps/{app_id}/revisions/{revision}/diff",
            get(crate::history_http::diff_revisions),
        )
        .route(
            "/api/apps/{app_id}/revisions/{revision}/file",
            get(crate::history_http::read_file),
        )
        .route(
            "/api/apps/{app_id}/revert",
            post(crate::history_http::revert),
        )
        .route(
            "/api/apps/{app_id}/draft",
            get(crate::drafts_http::review)
                .post(crate::drafts_http::start)
                .delete(crate::drafts_http::discard),
        )
        .route(
            "/api/apps/{app_id}/draft/resource",
            get(crate::drafts_http::resource),
        )
        .route(
            "/api/apps/{app_id}/draft/publish",
            post(crate::drafts_http::publish),
        )
        .route(
            "/api/apps/{app_id}/withdraw",
            post(crate::lifecycle_http::withdraw),
        )
        .route(
            "/api/apps/{app_id}/restore",
            post(crate::lifecycle_http::restore),
        )
        .route(
            "/api/apps/{app_id}/delete",
            post(crate::lifecycle_http::delete),
        )
        .route(
            "/api/withdrawn-apps",
            get(crate::lifecycle_http::withdrawn_apps),
        )
        .route(
            "/api/apps/{app_id}/access/{user_id}",
            put(grant_access).delete(revoke_access),
        )
}

/// `response` with `Cache-Control: no-store`: answers that depend on who asks.
pub(crate) fn no_store(response: impl IntoResponse) -> Response {
    let mut response = response.into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The hidden 404: identical for every case it covers.
pub(crate) fn hidden_not_found() -> AppError {
    let mut error = AppError::from_code(ErrorCode::NotFound);
    error.diagnostic_id = uuid_nil();
    error
}

/// The 401 of an anonymous request, with its `WWW-Authenticate` challenge.
fn unauthenticated() -> Response {
    let mut error = AppError::new(ErrorCode::Unauthenticated, "sign in to continue");
    error.diagnostic_id = uuid_nil();
    let mut response = error.into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"sasha\""),
    );
    response
}

fn uuid_nil() -> String {
    "00000000-0000-0000-0000-000000000000".to_owned()
}

/// Who is calling.
enum Caller {
    Anonymous,
    Principal(Principal),
}

/// Identifies the caller. A presented credential that does not resolve is the
/// hidden 404, never a hint that it was wrong.
async fn caller(core: &Core, headers: &HeaderMap) -> Result<Caller, Response> {
    let name = session_cookie_name(core.secure_cookies());
    if let Some(secret) = cookie(headers, name) {
        let (store, secret) = (core.store.clone(), secret.to_owned());
        return match blocking(move || store.session(&secret)).await {
            Ok(Some(principal)) => Ok(Caller::Principal(principal)),
            Ok(None) => Err(hidden_not_found().into_response()),
            Err(error) => Err(error.into_response()),
        };
    }
    if let Some(secret) = bearer(headers) {
        let (store, secret) = (core.store.clone(), secret.to_owned());
        return match blocking(move || store.token(&secret)).await {
            // OAuth access tokens are bound to the MCP resource, not this API.
            Ok(Some(principal)) if principal.audience.is_none() => Ok(Caller::Principal(principal)),
            Ok(_) => Err(hidden_not_found().into_response()),
            Err(error) => Err(error.into_response()),
        };
    }
    Ok(Caller::Anonymous)
}

/// A user principal allowed on the app routes: a browser session or an access
/// token holding `chat:use`. Anonymous is 401; anything else the hidden 404.
pub(crate) async fn user(core: &Core, headers: &HeaderMap) -> Result<Principal, Response> {
    match caller(core, headers).await? {
        Caller::Anonymous => Err(unauthenticated()),
        Caller::Principal(principal)
            if matches!(
                principal.kind,
                PrincipalKind::Session | PrincipalKind::Access
            ) && principal.scopes.contains(&Scope::ChatUse) =>
        {
            Ok(principal)
        }
        Caller::Principal(_) => Err(hidden_not_found().into_response()),
    }
}

/// [`user`] as the gateway would pass it over gRPC, for the `/api` routes
/// that answer through a `CoreService` function (history, drafts,
/// lifecycle), so who may is that function's rule alone.
pub(crate) async fn wire_user(
    core: &Core,
    headers: &HeaderMap,
) -> Result<sasha_proto::pb::Principal, Response> {
    user(core, headers)
        .await
        .map(|principal| crate::core_grpc::to_wire(&principal))
}

/// A signed-in browser session: the only caller who may give or withdraw
/// OAuth consent. Anonymous is 401; any other credential the hidden 404.
pub(crate) async fn session_user(core: &Core, headers: &HeaderMap) -> Result<Principal, Response> {
    match caller(core, headers).await? {
        Caller::Anonymous => Err(unauthenticated()),
        Caller::Principal(principal) if principal.kind == PrincipalKind::Session => Ok(principal),
        Caller::Principal(_) => Err(hidden_not_found().into_response()),
    }
}

/// A state-changing `/api` request from a signed-in Studio page: the
/// same-origin JSON checks ([`same_origin_json`]), then the browser session
/// ([`session_user`]), in that order.
pub(crate) async fn session_write(
    core: &Core,
    method: &Method,
    headers: &HeaderMap,
    has_body: bool,
) -> Result<Principal, Response> {
    same_origin_json(core, method, headers, has_body)?;
    session_user(core, headers).await
}

/// Refuses a state-changing request that is not a same-origin JSON request
/// (security catalogue F5): the `Origin` must be the Studio origin, or, without
/// an `Origin`, `Sec-Fetch-Site` must say `same-origin`; the body must be JSON.
/// Only a request without the session cookie (a script with a bearer token,
/// or a sign-in) may carry neither header: the cookie is ambient authority,
/// so a request that relies on it must show where it came from.
pub(crate) fn same_origin_json(
    core: &Core,
    method: &Method,
    headers: &HeaderMap,
    has_body: bool,
) -> Result<(), Response> {
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|value| value.to_str().ok());
    let fetch_site = headers
        .get("sec-fetch-site")
        .and_then(|value| value.to_str().ok());
    let with_cookie = cookie(headers, session_cookie_name(core.secure_cookies())).is_some();
    let same_origin = match (origin, fetch_site) {
        (Some(origin), _) => origin == core.origins.studio.as_str(),
        (None, Some(site)) => site == "same-origin",
        (None, None) => !with_cookie,
    };
    if !same_origin || fetch_site.is_some_and(|site| site != "same-origin" && site != "none") {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            format!("{method} requests are accepted only from the Studio origin"),
        )
        .into_response());
    }
    if has_body {
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .is_some_and(|value| value.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            let mut response = AppError::new(
                ErrorCode::InputInvalid,
                "the request body must be application/json",
            )
            .into_response();
            *response.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
            return Err(response);
        }
    }
    Ok(())
}

/// Parses a JSON body into `T`, refusing unknown fields with a clear message.
/// What the body may expand into is bounded first
/// ([`sasha_proto::json_limits::STUDIO_API`]; `APP_RESOURCE_LIMIT`, 413).
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Response> {
    parse_body_within(body, &sasha_proto::json_limits::STUDIO_API)
}

/// [`parse_body`] within other `limits` (App Studio's package bodies).
pub(crate) fn parse_body_within<T: serde::de::DeserializeOwned>(
    body: &[u8],
    limits: &sasha_proto::json_limits::JsonLimits,
) -> Result<T, Response> {
    sasha_proto::json_limits::check(body, limits)
        .map_err(|broken| broken.to_app_error().into_response())?;
    serde_json::from_slice(body).map_err(|error| {
        AppError::new(
            ErrorCode::InputInvalid,
            format!(
                "the request body is invalid: {}",
                error.to_string().to_lowercase()
            ),
        )
        .into_response()
    })
}

fn me_json(principal: &Principal) -> MeResponse {
    MeResponse {
        id: principal.user.id.clone(),
        username: principal.user.username.clone(),
        role: principal.user.role.as_str().to_owned(),
        scopes: principal
            .scopes
            .iter()
            .map(|scope| scope.as_str().to_owned())
            .collect(),
    }
}

/// Who the caller is.
#[derive(Serialize, ToSchema)]
struct MeResponse {
    id: String,
    username: String,
    /// `admin`, `staff` or `member`.
    role: String,
    /// Held scopes: `chat:use`, `apps:invoke`, `apps:write`.
    scopes: Vec<String>,
}

/// One app the caller may use.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct AppDescriptor {
    id: String,
    name: String,
    description: String,
    version: String,
    /// sha256 of the current resource.
    revision: String,
    /// `ui://sasha/apps/<id>/revisions/<revision>`.
    resource_uri: String,
    /// `{chat, files, data}` as declared in the manifest.
    #[schema(value_type = Object)]
    capabilities: serde_json::Value,
    /// `use` or `manage`.
    access: String,
}

/// `GET /api/apps`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct AppsResponse {
    apps: Vec<AppDescriptor>,
    /// The origin the app sandbox is served from.
    sandbox_origin: String,
}

/// One immutable app resource, as MCP `resources/read` returns it.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResourceResponse {
    pub(crate) uri: String,
    /// `text/html;profile=mcp-app`.
    pub(crate) mime_type: String,
    /// The assembled HTML document.
    pub(crate) text: String,
    /// `{ui: {csp, permissions, prefersBorder, sasha}}`.
    #[serde(rename = "_meta")]
    #[schema(value_type = Object)]
    pub(crate) meta: serde_json::Value,
}

/// One grant on an app.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct GrantEntry {
    user_id: String,
    username: String,
    /// `use` or `manage`.
    access: String,
    /// Unix seconds.
    granted_at: i64,
}

/// `GET /api/apps/:appId/access`.
#[derive(Serialize, ToSchema)]
struct GrantsResponse {
    grants: Vec<GrantEntry>,
}

/// The access now held.
#[derive(Serialize, ToSchema)]
struct GrantResponse {
    /// `use` or `manage`.
    access: String,
}

/// The closed error envelope every failure uses.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ErrorEnvelope {
    /// One `APP_*` code of the closed registry.
    code: String,
    message: String,
    retryable: bool,
    diagnostic_id: String,
    #[schema(value_type = Option<Object>)]
    details: Option<serde_json::Value>,
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
        crate::people_http::list_users,
        crate::people_http::invite,
        crate::people_http::change,
        crate::people_http::remove,
        crate::people_http::renew_invitation,
        crate::people_http::invitation,
        crate::people_http::accept_invitation,
        crate::people_http::list_tokens,
        crate::people_http::create_token,
        crate::people_http::revoke_token,
        list_apps,
        crate::create::create_app_http,
        resource,
        recovery,
        crate::history_http::list_revisions,
        crate::history_http::diff_revisions,
        crate::history_http::read_file,
        crate::history_http::revert,
        crate::drafts_http::review,
        crate::drafts_http::start,
        crate::drafts_http::discard,
        crate::drafts_http::resource,
        crate::drafts_http::publish,
        crate::lifecycle_http::withdraw,
        crate::lifecycle_http::restore,
        crate::lifecycle_http::delete,
        crate::lifecycle_http::withdrawn_apps,
        crate::member_apps_http::list,
        crate::member_apps_http::check,
        crate::member_apps_http::create,
        crate::member_apps_http::read,
        crate::member_apps_http::update,
        crate::member_apps_http::delete,
        crate::member_apps_http::revert,
        crate::member_apps_http::revisions,
        crate::member_apps_http::draft,
        crate::member_apps_http::share,
        crate::member_apps_http::unshare,
        crate::member_apps_http::disable,
        crate::member_apps_http::enable,
        crate::member_apps_http::promote,
        crate::member_apps_http::settings,
        crate::member_apps_http::set_switch,
        crate::member_apps_http::guide,
        list_access,
        grant_access,
        revoke_access,
        crate::oauth::request_details,
        crate::oauth::approve,
        crate::oauth::deny,
        crate::oauth::connections,
        crate::oauth::revoke_connection,
        crate::assistant::status,
        crate::assistant::list,
        crate::assistant::create,
        crate::assistant::read,
        crate::assistant::remove,
        crate::assistant::turn,
        crate::assistant::confirm
    ),
    components(schemas(
        LoginRequest,
        GrantRequest,
        MeResponse,
        AppDescriptor,
        AppsResponse,
        crate::create::CreateAppBody,
        crate::create::CreatedApp,
        crate::create::PackageStatusEntry,
        crate::create::DiagnosticEntry,
        ResourceResponse,
        crate::recovery::RecoveryDescriptor,
        crate::recovery::RecoveryTable,
        crate::recovery::RecoveryTools,
        crate::recovery::RecoveryField,
        crate::history_http::RevertBody,
        crate::drafts_http::PublishBody,
        crate::lifecycle_http::DeleteBody,
        crate::member_apps_http::SourceBody,
        crate::member_apps_http::MemberRevertBody,
        crate::member_apps_http::ShareBody,
        crate::member_apps_http::SwitchBody,
        GrantEntry,
        GrantsResponse,
        GrantResponse,
        ErrorEnvelope,
        crate::oauth::ConsentRequest,
        crate::oauth::ConsentClient,
        crate::oauth::OfferedScope,
        crate::oauth::ApproveBody,
        crate::oauth::Decision,
        crate::oauth::ConnectionEntry,
        crate::oauth::ConnectionsResponse,
        crate::assistant::CreateBody,
        crate::assistant::TurnBody,
        crate::assistant::ConfirmBody
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

/// Sign-in credentials.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct LoginRequest {
    username: String,
    password: String,
}

/// `POST /api/auth/login`: `{username, password}` → the session cookie.
#[utoipa::path(post, path = "/api/auth/login", request_body = LoginRequest, responses(
    (status = 200, description = "signed in; sets the session cookie", body = MeResponse),
    (status = 400, description = "malformed body", body = ErrorEnvelope),
    (status = 401, description = "wrong user name or password", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 415, description = "body is not application/json", body = ErrorEnvelope),
    (status = 429, description = "too many sign-in attempts for this user name from this client address, or from this address; retryable, see Retry-After", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn login(
    State(core): State<Arc<Core>>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(response) = same_origin_json(&core, &method, &headers, true) {
        return response;
    }
    let request: LoginRequest = match parse_body(&body) {
        Ok(request) => request,
        Err(response) => return response,
    };
    // Before the password is checked, so a slowed pair learns nothing and
    // costs no argon2 work.
    let client = ClientAddress::of(&headers);
    if let Err(wait) = core.login_throttle.admit(&request.username, client) {
        return throttled(
            wait,
            "too many sign-in attempts for this user name from your address",
        );
    }
    let store = core.store.clone();
    let outcome = blocking(move || {
        let Some(user) = store.verify_login(&request.username, &request.password)? else {
            return Ok(None);
        };
        let secret = store.create_session(&user.id)?;
        let principal = store.session(&secret)?;
        Ok(principal.map(|principal| (secret, principal)))
    })
    .await;
    match outcome {
        Ok(Some((secret, principal))) => signed_in(&core, &secret, &principal),
        Ok(None) => {
            let mut error = AppError::new(
                ErrorCode::Unauthenticated,
                "the user name or password is wrong",
            );
            error.diagnostic_id = uuid_nil();
            error.into_response()
        }
        Err(error) => error.into_response(),
    }
}

/// The answer that starts a browser session: the caller, with the session
/// cookie for `secret`.
pub(crate) fn signed_in(core: &Core, secret: &str, principal: &Principal) -> Response {
    let cookie = format!(
        "{}={secret}; Path=/; HttpOnly; SameSite=Lax{}",
        session_cookie_name(core.secure_cookies()),
        if core.secure_cookies() {
            "; Secure"
        } else {
            ""
        }
    );
    let mut response = no_store(Json(me_json(principal)));
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `POST /api/auth/logout`: ends the browser session.
#[utoipa::path(post, path = "/api/auth/logout", responses(
    (status = 204, description = "signed out; clears the session cookie"),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope)))]
async fn logout(State(core): State<Arc<Core>>, method: Method, headers: HeaderMap) -> Response {
    if let Err(response) = same_origin_json(&core, &method, &headers, false) {
        return response;
    }
    let name = session_cookie_name(core.secure_cookies());
    if let Some(secret) = cookie(&headers, name) {
        let (store, secret) = (core.store.clone(), secret.to_owned());
        if let Err(error) = blocking(move || store.delete_session(&secret)).await {
            return error.into_response();
        }
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    let clear = format!(
        "{name}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{}",
        if core.secure_cookies() {
            "; Secure"
        } else {
            ""
        }
    );
    if let Ok(value) = HeaderValue::from_str(&clear) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `GET /api/me`.
#[utoipa::path(get, path = "/api/me", responses(
    (status = 200, description = "the caller", body = MeResponse),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn me(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    match user(&core, &headers).await {
        Ok(principal) => no_store(Json(me_json(&principal))),
        Err(response) => response,
    }
}

/// `GET /api/apps`: the apps the caller may use, with their access and the
/// sandbox origin.
#[utoipa::path(get, path = "/api/apps", responses(
    (status = 200, description = "apps the caller may use", body = AppsResponse),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn list_apps(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    let principal = match user(&core, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let snapshot = core.catalogue.current();
    let granted = match core.granted_apps(&principal.user.id).await {
        Ok(granted) => granted,
        Err(error) => return error.into_response(),
    };
    let apps: Vec<AppDescriptor> = granted
        .iter()
        .filter_map(|(id, access)| match snapshot.apps.get(id) {
            Some(AppEntry::Valid(package)) => Some(AppDescriptor {
                id: id.clone(),
                name: package.manifest.name.clone(),
                description: package.manifest.description.clone(),
                version: package.manifest.version.clone(),
                revision: package.resource.revision.clone(),
                resource_uri: package.resource.uri.clone(),
                capabilities: serde_json::to_value(package.manifest.capabilities)
                    .unwrap_or_default(),
                access: access.as_str().to_owned(),
            }),
            _ => None,
        })
        .collect();
    no_store(Json(AppsResponse {
        apps,
        sandbox_origin: core.origins.sandbox.as_str().to_owned(),
    }))
}

#[derive(Deserialize)]
struct RevisionQuery {
    revision: Option<String>,
}

/// `GET /api/apps/:appId/resource?revision=`: the exact resource, to the
/// trusted Studio host, for a caller with `use`.
#[utoipa::path(get, path = "/api/apps/{appId}/resource", params(("appId" = String, Path), ("revision" = String, Query, description = "the sha256 revision")), responses(
    (status = 200, description = "the exact resource; Cache-Control: no-store", body = ResourceResponse),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn resource(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    Query(query): Query<RevisionQuery>,
    headers: HeaderMap,
) -> Response {
    let principal = match user(&core, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let granted = match core.granted_apps(&principal.user.id).await {
        Ok(granted) => granted,
        Err(error) => return error.into_response(),
    };
    let Some(revision) = query.revision.filter(|_| granted.contains_key(&app_id)) else {
        return hidden_not_found().into_response();
    };
    // The ledger serves a revision the catalogue no longer holds.
    let Ok(resource) = crate::revisions::resource(&core, &app_id, &revision).await else {
        return hidden_not_found().into_response();
    };
    no_store(Json(ResourceResponse {
        uri: resource.uri.clone(),
        mime_type: resource.mime_type.clone(),
        text: resource.html.clone(),
        meta: serde_json::json!({"ui": resource.meta}),
    }))
}

/// `GET /api/apps/:appId/recovery`: the schema-derived table and field
/// descriptor of Studio's recovery grid. Needs `apps:invoke` and `manage` on
/// the app (an app-level authority; the platform role does not matter).
#[utoipa::path(get, path = "/api/apps/{appId}/recovery", params(("appId" = String, Path)), responses(
    (status = 200, description = "the app's declared tables and fields; Cache-Control: no-store", body = crate::recovery::RecoveryDescriptor),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, no apps:invoke, no manage, unknown or invalid app", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn recovery(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let principal = match caller(&core, &headers).await {
        Ok(Caller::Anonymous) => return unauthenticated(),
        Ok(Caller::Principal(principal))
            if matches!(
                principal.kind,
                PrincipalKind::Session | PrincipalKind::Access
            ) && principal.scopes.contains(&Scope::AppsInvoke) =>
        {
            principal
        }
        Ok(Caller::Principal(_)) => return hidden_not_found().into_response(),
        Err(response) => return response,
    };
    let granted = match core.granted_apps(&principal.user.id).await {
        Ok(granted) => granted,
        Err(error) => return error.into_response(),
    };
    if !granted
        .get(&app_id)
        .is_some_and(|access| access.allows(AppAccess::Manage))
    {
        return hidden_not_found().into_response();
    }
    let snapshot = core.catalogue.current();
    let Some(AppEntry::Valid(package)) = snapshot.apps.get(&app_id) else {
        return hidden_not_found().into_response();
    };
    let descriptor = crate::recovery::descriptor(
        &app_id,
        &package.manifest.name,
        &package.resource.revision,
        package.data.as_ref(),
        package.manifest.capabilities.data == sasha_package::manifest::DataCapability::ReadWrite,
    );
    no_store(Json(descriptor))
}

/// The caller of a grant route: an admin or staff user principal.
async fn grant_manager(
    core: &Core,
    headers: &HeaderMap,
    app_id: &str,
) -> Result<Principal, Response> {
    let principal = user(core, headers).await?;
    if !matches!(principal.user.role, UserRole::Admin | UserRole::Staff) {
        return Err(hidden_not_found().into_response());
    }
    let registered = core.catalogue.current().apps.contains_key(app_id);
    if !registered {
        return Err(hidden_not_found().into_response());
    }
    // A withdrawn app is gone from the access panel too, until restored.
    let (store, app) = (core.store.clone(), app_id.to_owned());
    match blocking(move || store.lifecycle(&app)).await {
        Ok(Some(state)) if state.is_withdrawn() => return Err(hidden_not_found().into_response()),
        Ok(_) => {}
        Err(error) => return Err(error.into_response()),
    }
    Ok(principal)
}

/// Nobody changes their own access: a grant or revoke whose target is the
/// caller is refused, so staff cannot give themselves `manage` and an admin
/// whose `manage` was revoked cannot restore it. Another admin or staff
/// member (or the operator's `sasha admin grant`) makes that change.
fn not_yourself(actor: &Principal, target: &str) -> Result<(), Response> {
    if actor.user.id == target {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            "you cannot change your own access; ask another admin or staff member",
        )
        .into_response());
    }
    Ok(())
}

/// `GET /api/apps/:appId/access`: current grants (admin/staff only).
#[utoipa::path(get, path = "/api/apps/{appId}/access", params(("appId" = String, Path)), responses(
    (status = 200, description = "current grants (admin and staff)", body = GrantsResponse),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn list_access(
    State(core): State<Arc<Core>>,
    Path(app_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = grant_manager(&core, &headers, &app_id).await {
        return response;
    }
    let store = core.store.clone();
    match blocking(move || store.grants(&app_id)).await {
        Ok(grants) => {
            let grants = grants
                .into_iter()
                .map(|grant| GrantEntry {
                    user_id: grant.user_id,
                    username: grant.username,
                    access: grant.access.as_str().to_owned(),
                    granted_at: grant.granted_at,
                })
                .collect();
            no_store(Json(GrantsResponse { grants }))
        }
        Err(error) => error.into_response(),
    }
}

/// The access to grant.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct GrantRequest {
    /// `use` or `manage`.
    access: String,
}

/// `PUT /api/apps/:appId/access/:userId` with `{"access":"use"|"manage"}`.
#[utoipa::path(put, path = "/api/apps/{appId}/access/{userId}", params(("appId" = String, Path), ("userId" = String, Path)), request_body = GrantRequest, responses(
    (status = 200, description = "granted (admin and staff)", body = GrantResponse),
    (status = 400, description = "access is not use or manage", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, or the caller's own access", body = ErrorEnvelope),
    (status = 415, description = "body is not application/json", body = ErrorEnvelope),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn grant_access(
    State(core): State<Arc<Core>>,
    Path((app_id, user_id)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(response) = same_origin_json(&core, &method, &headers, true) {
        return response;
    }
    let actor = match grant_manager(&core, &headers, &app_id).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    if let Err(response) = not_yourself(&actor, &user_id) {
        return response;
    }
    let request: GrantRequest = match parse_body(&body) {
        Ok(request) => request,
        Err(response) => return response,
    };
    let access = match request.access.as_str() {
        "use" => AppAccess::Use,
        "manage" => AppAccess::Manage,
        _ => {
            return AppError::new(
                ErrorCode::InputInvalid,
                "access must be \"use\" or \"manage\"",
            )
            .into_response();
        }
    };
    let store = core.store.clone();
    let outcome = blocking(move || {
        if store.user(&user_id)?.is_none() {
            return Ok(false);
        }
        store.grant(&app_id, &user_id, access, Some(&actor.user.id))?;
        Ok(true)
    })
    .await;
    match outcome {
        Ok(true) => no_store(Json(GrantResponse {
            access: access.as_str().to_owned(),
        })),
        Ok(false) => hidden_not_found().into_response(),
        Err(error) => error.into_response(),
    }
}

/// `DELETE /api/apps/:appId/access/:userId`: revokes every access.
#[utoipa::path(delete, path = "/api/apps/{appId}/access/{userId}", params(("appId" = String, Path), ("userId" = String, Path)), responses(
    (status = 204, description = "revoked (admin and staff)"),
    (status = 403, description = "not from the Studio origin, or the caller's own access", body = ErrorEnvelope),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: bad credential, denied or unknown", body = ErrorEnvelope),
    (status = 503, description = "account store busy; retry", body = ErrorEnvelope)))]
async fn revoke_access(
    State(core): State<Arc<Core>>,
    Path((app_id, user_id)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = same_origin_json(&core, &method, &headers, false) {
        return response;
    }
    let actor = match grant_manager(&core, &headers, &app_id).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    if let Err(response) = not_yourself(&actor, &user_id) {
        return response;
    }
    let store = core.store.clone();
    match blocking(move || store.revoke(&app_id, &user_id, Some(&actor.user.id))).await {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => error.into_response(),
    }
}
