//! Throttles attackers cannot turn against users: sign-in attempts slowed
//! per (user name, client address) with growing delays and per address
//! ([`LoginThrottle`]), and the keyed limiter ([`KeyedThrottle`]) that OAuth
//! registrations and member app deploys use too, keyed on the one trusted
//! proxy hop's client address ([`ClientAddress`]). Their cells live in the
//! core database (`Store::take_throttle_slots`, a GCRA per key), so every
//! studio-core replica spends one budget per key.
//!
//! What it must never do: key a throttle on the user name alone (failures
//! from one address never slow that name from another), or take a cell from
//! a refused attempt (an attempt's cells are taken all or none).

use std::time::Duration;

use http::HeaderMap;
use sasha_proto::AppError;
use studio_store::{Store, Tier, blocking};

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

impl ClientAddress {
    /// The address as a throttle key's part.
    pub fn key(self) -> String {
        self.0.iter().map(|byte| format!("{byte:02x}")).collect()
    }
}

/// One keyed limiter: `burst` checks at once, then one more per `period`,
/// per key, counted in the core database under `scope`.
#[derive(Debug, Clone, Copy)]
pub struct KeyedThrottle {
    scope: &'static str,
    tier: Tier,
}

impl KeyedThrottle {
    pub const fn new(scope: &'static str, burst: u32, period: Duration) -> KeyedThrottle {
        KeyedThrottle {
            scope,
            tier: Tier { burst, period },
        }
    }

    /// Takes one cell for `key`: `Ok` when it conforms, else how long until
    /// one would (nothing is taken then).
    pub async fn check(&self, store: &Store, key: &str) -> Result<Result<(), Duration>, AppError> {
        let (store, key, tier) = (store.clone(), format!("{}:{key}", self.scope), self.tier);
        blocking(move || store.take_throttle_slots(&[(key.as_str(), tier)])).await
    }
}

/// Sign-in attempts: each takes a cell from its client address's budget
/// ([`SIGN_IN_ADDRESS_TIER`]) and from each tier of its (user name, client
/// address) pair ([`SIGN_IN_PAIR_TIERS`]), all or none; a tier without a
/// cell refuses the attempt with how long to wait. User names count
/// lowercased whether or not they exist, so throttling reveals nothing;
/// failures from one address never slow the same name from another.
#[derive(Debug, Default)]
pub struct LoginThrottle;

impl LoginThrottle {
    /// Admits one sign-in attempt for `username` from `client`, or says how
    /// long that pair (or that address) must wait.
    pub async fn admit(
        &self,
        store: &Store,
        username: &str,
        client: ClientAddress,
    ) -> Result<Result<(), Duration>, AppError> {
        let address = client.key();
        let name = username.to_lowercase();
        let (burst, period) = SIGN_IN_ADDRESS_TIER;
        let mut cells = vec![(format!("sign-in-address:{address}"), Tier { burst, period })];
        for (tier, (burst, period)) in SIGN_IN_PAIR_TIERS.into_iter().enumerate() {
            cells.push((
                format!("sign-in-pair:{tier}:{address}:{name}"),
                Tier { burst, period },
            ));
        }
        let store = store.clone();
        blocking(move || {
            let cells: Vec<(&str, Tier)> = cells
                .iter()
                .map(|(key, tier)| (key.as_str(), *tier))
                .collect();
            store.take_throttle_slots(&cells)
        })
        .await
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
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI64, Ordering};

    use http::HeaderValue;

    use super::*;

    fn address(text: &str) -> ClientAddress {
        ClientAddress::from_ip(Some(text.parse::<IpAddr>().unwrap()))
    }

    /// A core database with a clock the test moves.
    fn store() -> (tempfile::TempDir, Arc<AtomicI64>, Store) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(AtomicI64::new(1_800_000_000));
        let store = open(dir.path(), &clock);
        (dir, clock, store)
    }

    /// Another handle on the database in `dir`, as another replica has.
    fn open(dir: &std::path::Path, clock: &Arc<AtomicI64>) -> Store {
        let reading = clock.clone();
        Store::open_with_clock(
            &dir.join("core.sqlite"),
            Arc::new(move || reading.load(Ordering::SeqCst)),
        )
        .unwrap()
    }

    /// Attempts in a row that are admitted for `name` from `client` now.
    async fn admitted(store: &Store, name: &str, client: ClientAddress) -> usize {
        let mut count = 0;
        while count < 100
            && LoginThrottle
                .admit(store, name, client)
                .await
                .unwrap()
                .is_ok()
        {
            count += 1;
        }
        count
    }

    #[tokio::test]
    async fn sign_in_delays_grow_per_pair_and_never_cross_addresses() {
        let (_dir, clock, store) = store();
        let (a, b) = (address("192.0.2.1"), address("198.51.100.7"));
        assert_eq!(admitted(&store, "ada", a).await, 5, "five at once");
        let wait = LoginThrottle
            .admit(&store, "ADA", a)
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(wait, Duration::from_secs(10), "the name counts lowercased");
        // Another address, and another name from the same address, are not slowed.
        assert!(LoginThrottle.admit(&store, "ada", b).await.unwrap().is_ok());
        assert!(LoginThrottle.admit(&store, "bea", a).await.unwrap().is_ok());
        // Then one every 10 s until ten, one a minute until twenty, then one
        // every 15 minutes: the wait after each refusal grows.
        let mut waits = Vec::new();
        for _ in 0..40 {
            if let Err(wait) = LoginThrottle.admit(&store, "ada", a).await.unwrap() {
                waits.push(wait);
                clock.fetch_add(i64::try_from(wait.as_secs()).unwrap(), Ordering::SeqCst);
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
        clock.fetch_add(20 * 15 * 60, Ordering::SeqCst);
        assert_eq!(admitted(&store, "ada", a).await, 5);
    }

    #[tokio::test]
    async fn one_address_cannot_spray_unlimited_names() {
        let (_dir, clock, store) = store();
        let a = address("192.0.2.1");
        for n in 0..SIGN_IN_ADDRESS_TIER.0 {
            assert!(
                LoginThrottle
                    .admit(&store, &format!("user{n}"), a)
                    .await
                    .unwrap()
                    .is_ok()
            );
        }
        assert_eq!(
            LoginThrottle.admit(&store, "another", a).await.unwrap(),
            Err(Duration::from_secs(1))
        );
        assert!(
            LoginThrottle
                .admit(&store, "another", address("192.0.2.2"))
                .await
                .unwrap()
                .is_ok()
        );
        clock.fetch_add(1, Ordering::SeqCst);
        assert!(
            LoginThrottle
                .admit(&store, "another", a)
                .await
                .unwrap()
                .is_ok()
        );
    }

    /// Two studio-core replicas on one core database spend one budget: the
    /// five attempts a pair has are five across both, not five each.
    #[tokio::test]
    async fn replicas_share_one_budget_per_key() {
        let (dir, clock, store) = store();
        let other = open(dir.path(), &clock);
        let a = address("192.0.2.1");
        assert_eq!(admitted(&store, "ada", a).await, 5);
        assert!(
            LoginThrottle
                .admit(&other, "ada", a)
                .await
                .unwrap()
                .is_err(),
            "the other replica sees the spent budget"
        );
        let registrations = KeyedThrottle::new("test", 2, Duration::from_secs(60));
        assert!(registrations.check(&store, "k").await.unwrap().is_ok());
        assert!(registrations.check(&other, "k").await.unwrap().is_ok());
        assert!(registrations.check(&store, "k").await.unwrap().is_err());
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
        assert_eq!(address("192.0.2.1").key().len(), 32);
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
