//! Throttles attackers cannot turn against users: sign-in attempts slowed
//! per (user name, client address) with growing delays and per address
//! ([`LoginThrottle`]), and the keyed GCRA limiter with a bounded table
//! ([`KeyedThrottle`]) that OAuth registrations and member app deploys use
//! too, keyed on the one trusted proxy hop's client address
//! ([`ClientAddress`]).
//!
//! What it must never do: key a throttle on the user name alone (failures
//! from one address never slow that name from another), grow a table without
//! bound, or take a cell from a refused attempt.

use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use http::HeaderMap;

/// Sign-in attempts one (user name, client address) pair may make, as
/// `(burst, then one more per period)` tiers; an attempt must fit every tier.
/// So the delays grow: five at once, then one every 10 s, after ten one a
/// minute, after twenty one every 15 minutes (four an hour).
pub const SIGN_IN_PAIR_TIERS: [(u32, Duration); 3] = [
    (5, Duration::from_secs(10)),
    (10, Duration::from_secs(60)),
    (20, Duration::from_secs(15 * 60)),
];
/// Sign-in attempts one client address may make, whatever the user names
/// (password spraying): 300 at once, then one a second.
pub const SIGN_IN_ADDRESS_TIER: (u32, Duration) = (300, Duration::from_secs(1));
/// The most keys one throttle table holds (see [`KeyedThrottle`]).
pub const MAX_THROTTLE_KEYS: usize = 100_000;
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
pub struct ClientAddress([u8; 16]);

impl ClientAddress {
    /// The client address of a request with these headers.
    pub fn of(headers: &HeaderMap) -> ClientAddress {
        let (client, _) = sasha_service::telemetry::forwarded_client(headers);
        ClientAddress::from_ip(client.parse().ok())
    }

    /// `None` is the no-proxy address `-` (the unspecified address `::`,
    /// which is never a client's).
    pub fn from_ip(ip: Option<std::net::IpAddr>) -> ClientAddress {
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
pub struct KeyedThrottle<K, C: Clock = DefaultClock>
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
    pub fn new(burst: u32, period: Duration, clock: C) -> KeyedThrottle<K, C> {
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
    pub fn check(&self, key: &K) -> Result<(), Duration> {
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
pub struct LoginThrottle<C: Clock = DefaultClock> {
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
    pub fn with_clock(clock: C) -> LoginThrottle<C> {
        let (burst, period) = SIGN_IN_ADDRESS_TIER;
        LoginThrottle {
            addresses: KeyedThrottle::new(burst, period, clock.clone()),
            pairs: SIGN_IN_PAIR_TIERS
                .map(|(burst, period)| KeyedThrottle::new(burst, period, clock.clone())),
        }
    }

    /// Admits one sign-in attempt for `username` from `client`, or says how
    /// long that pair (or that address) must wait.
    pub fn admit(&self, username: &str, client: ClientAddress) -> Result<(), Duration> {
        self.addresses.check(&client)?;
        let pair = sign_in_pair(username, client);
        for tier in &self.pairs {
            tier.check(&pair)?;
        }
        Ok(())
    }
}

/// Whole seconds to wait, at least one, as `Retry-After` takes them.
pub fn retry_after_seconds(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

/// "try again in …" for a wait.
pub fn try_again_in(wait: Duration) -> String {
    match retry_after_seconds(wait) {
        1 => "try again in a second".to_owned(),
        seconds @ ..=119 => format!("try again in {seconds} seconds"),
        seconds => format!("try again in {} minutes", seconds.div_ceil(60)),
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use governor::clock::FakeRelativeClock;
    use http::HeaderValue;

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
