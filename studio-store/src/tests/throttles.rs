//! The throttles' cells: a key's burst, then one slot per period; a call
//! takes a slot of each of its cells or of none; racing replicas never spend
//! a slot twice; cells that are full again are forgotten.

use super::*;

const PAIR: Tier = Tier {
    burst: 5,
    period: Duration::from_secs(10),
};
const ADDRESS: Tier = Tier {
    burst: 300,
    period: Duration::from_secs(1),
};

on_both! {
    /// Five at once, then one every ten seconds: the wait says how long.
    fn a_key_has_its_burst_then_one_slot_per_period() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        for _ in 0..5 {
            assert_eq!(store.take_throttle_slots(&[("ada", PAIR)]).unwrap(), Ok(()));
        }
        assert_eq!(
            store.take_throttle_slots(&[("ada", PAIR)]).unwrap(),
            Err(Duration::from_secs(10))
        );
        assert_eq!(store.take_throttle_slots(&[("bea", PAIR)]).unwrap(), Ok(()), "another key");
        fixture.advance(10);
        assert_eq!(store.take_throttle_slots(&[("ada", PAIR)]).unwrap(), Ok(()));
        assert!(store.take_throttle_slots(&[("ada", PAIR)]).unwrap().is_err());
        // Keys are kept only as their sha256.
        let stored: Vec<String> = fixture
            .raw()
            .query_map("SELECT key_sha256 FROM throttle_cells", (), |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(stored.iter().all(|key| key.len() == 64 && key != "ada"), "{stored:?}");
    }
}

on_both! {
    /// A refused call takes nothing from its other cells: the address's
    /// budget is not spent on attempts a pair's tier refused.
    fn a_refused_call_takes_no_slot_from_any_cell() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        for _ in 0..5 {
            store
                .take_throttle_slots(&[("address", ADDRESS), ("pair", PAIR)])
                .unwrap()
                .unwrap();
        }
        for _ in 0..50 {
            assert!(
                store
                    .take_throttle_slots(&[("address", ADDRESS), ("pair", PAIR)])
                    .unwrap()
                    .is_err()
            );
        }
        // 295 of the address's 300 are left, not 245.
        let left = (0..300)
            .take_while(|_| store.take_throttle_slots(&[("address", ADDRESS)]).unwrap().is_ok())
            .count();
        assert_eq!(left, 295);
    }
}

on_both! {
    /// Eight replicas racing for one key's three slots get exactly three.
    fn racing_replicas_never_spend_a_slot_twice() {
        let fixture = Fixture::new();
        let tier = Tier {
            burst: 3,
            period: Duration::from_secs(60),
        };
        let handles: Vec<Store> = (0..8).map(|_| fixture.reopen()).collect();
        for round in 0..3 {
            let key = format!("key-{round}");
            let taken = race(&handles, |_, store| {
                store.take_throttle_slots(&[(key.as_str(), tier)]).unwrap().is_ok()
            });
            assert_eq!(taken.iter().filter(|ok| **ok).count(), 3, "round {round}");
        }
    }
}

on_both! {
    /// A cell whose every slot is back is forgotten; a spent one is kept.
    fn cells_that_are_full_again_are_forgotten() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        store.take_throttle_slots(&[("ada", PAIR)]).unwrap().unwrap();
        assert_eq!(store.forget_full_throttle_cells().unwrap(), 0);
        fixture.advance(10);
        assert_eq!(store.forget_full_throttle_cells().unwrap(), 1);
        for _ in 0..5 {
            assert_eq!(store.take_throttle_slots(&[("ada", PAIR)]).unwrap(), Ok(()));
        }
    }
}
