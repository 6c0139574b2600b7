//! The placement on a real core database, SQLite and PostgreSQL: leases timed
//! by the database, placing, failover only after a lapse and only of a
//! replicating owner, epochs rising by one with every owner, releases taken
//! only at the current epoch, drains one app at a time, racing renewals, the
//! operator's refusals, and the append-only events.
//!
//! A lapse is made by ending the lease in the table ([`expire`]); only the
//! test of the database's clock itself gives a lease [`SHORT`] and sleeps
//! past it ([`lapse`]). Every other lease is [`LONG`], so nothing depends on
//! how fast the test runs.

use std::collections::BTreeSet;

use super::*;
use crate::tests::{Fixture, chain, handles, on_both, race};

/// A lease no test outlives.
const LONG: Duration = Duration::from_secs(600);
/// A lease a test waits out with [`lapse`].
const SHORT: Duration = Duration::from_millis(200);

/// Waits until every lease granted [`SHORT`] before this call has lapsed by
/// the database's clock. A sleep, because a lease is timed by the
/// database's own clock, which a test cannot move.
fn lapse() {
    std::thread::sleep(SHORT * 2);
}

/// Ends `id`'s lease now in the table, as its last renewal running out
/// would. A renewal never shortens a granted lease, so a test that lapses a
/// worker it renewed with [`LONG`] ends the lease here rather than waiting.
fn expire(fixture: &Fixture, id: &str) {
    use crate::db::Sql as _;
    let raw = fixture.raw();
    let now = raw.now_ms().unwrap();
    raw.execute(
        "UPDATE data_workers SET lease_until_ms = ?1 WHERE worker_id = ?2",
        (now - 1, id),
    )
    .unwrap();
}

fn worker(id: &str) -> WorkerId {
    WorkerId::parse(id).unwrap()
}

fn app(id: &str) -> AppId {
    AppId::parse(id).unwrap()
}

/// Each worker's URL: a port of its own from its name.
fn url_of(id: &str) -> WorkerUrl {
    let port = 20_000 + id.bytes().map(u16::from).sum::<u16>();
    WorkerUrl::parse(&format!("https://127.0.0.1:{port}")).unwrap()
}

/// `id` renews with nothing to release.
fn renew(store: &Store, id: &str, replicated: bool, lease: Duration) -> LeaseGrant {
    store
        .renew(&worker(id), &url_of(id), replicated, &[], lease)
        .unwrap()
}

/// `id` renews, releasing `released` (app, epoch).
fn release(store: &Store, id: &str, released: &[(&str, u64)]) -> LeaseGrant {
    let released: Vec<Released> = released
        .iter()
        .map(|(app_id, epoch)| Released {
            app_id: (*app_id).to_owned(),
            epoch: *epoch,
        })
        .collect();
    store
        .renew(&worker(id), &url_of(id), true, &released, LONG)
        .unwrap()
}

/// A grant's apps as (app, epoch, hand over).
fn held(grant: &LeaseGrant) -> Vec<(String, u64, bool)> {
    grant
        .apps
        .iter()
        .map(|a| (a.app_id.clone(), a.epoch, a.hand_over))
        .collect()
}

/// Where `app_id` is: (worker, epoch).
fn owner(store: &Store, app_id: &str) -> (String, u64) {
    let placement = store
        .placements()
        .unwrap()
        .into_iter()
        .find(|p| p.app_id == app_id)
        .unwrap_or_else(|| panic!("{app_id} is placed"));
    (placement.worker_id, placement.epoch)
}

/// `app_id`'s events as (epoch, from, to, reason).
fn events(store: &Store, app_id: &str) -> Vec<(u64, Option<String>, String, PlacementReason)> {
    store
        .placement_events(&app(app_id))
        .unwrap()
        .into_iter()
        .map(|e| (e.epoch, e.from_worker, e.to_worker, e.reason))
        .collect()
}

fn located(store: &Store, app_id: &str) -> Route {
    store.locate(&app(app_id)).unwrap().expect("a live worker")
}

// --- names and the hash -----------------------------------------------------

#[test]
fn worker_urls_are_https_host_and_port_only() {
    for ok in [
        "https://127.0.0.1:3013",
        "https://data-worker-0.data-worker:3013",
        "https://[::1]:3013",
        "https://worker.example",
        "https://worker.example/",
    ] {
        assert_eq!(WorkerUrl::parse(ok).unwrap().as_str(), ok);
    }
    for (bad, why) in [
        ("http://127.0.0.1:3013", "https"),
        ("127.0.0.1:3013", "absolute URL"),
        ("not a url", "absolute URL"),
        ("https://user:pw@worker:3013", "credentials"),
        ("https://worker:3013/path", "only a host and port"),
        ("https://worker:3013?x=1", "only a host and port"),
        ("https://worker:3013#f", "only a host and port"),
        (" https://worker:3013", "spaces"),
        ("https://worker:3013\n", "spaces"),
        (&format!("https://{}.example", "a".repeat(2048)), "2048"),
    ] {
        let error = WorkerUrl::parse(bad).unwrap_err().to_string();
        assert!(error.contains(why), "{bad}: {error}");
        assert!(error.starts_with("a data-worker's URL "), "{error}");
    }
    assert!(WorkerId::parse("data-worker-0").is_ok());
    assert!(WorkerId::parse("a b").is_err());
}

#[test]
fn rendezvous_is_stable_and_moves_only_what_a_new_worker_wins() {
    let apps: Vec<String> = (0..300).map(|n| format!("app-{n}")).collect();
    let two = ["w1", "w2"];
    let three = ["w1", "w2", "w3"];
    let mut counts = BTreeMap::new();
    for app_id in &apps {
        let before = rendezvous(app_id, two).unwrap();
        // The order candidates come in does not matter.
        assert_eq!(rendezvous(app_id, ["w2", "w1"]), Some(before));
        let after = rendezvous(app_id, three).unwrap();
        assert!(
            after == before || after == "w3",
            "{app_id}: {before} → {after}"
        );
        *counts.entry(after).or_insert(0) += 1;
    }
    // Each of three workers wins some of 300 apps (a third each, give or take).
    for worker in three {
        assert!(counts[worker] > 50, "{counts:?}");
    }
    assert_eq!(rendezvous("app-1", std::iter::empty()), None);
}

// --- leases -----------------------------------------------------------------

on_both! {
    /// A renewal sets the lease from the database's clock; a lease that
    /// lapses reads as lapsed, and the next renewal makes it live again.
    fn a_lease_runs_from_the_database_clock_until_it_lapses() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        assert!(store.workers().unwrap().is_empty());
        let grant = renew(store, "w1", true, LONG);
        assert_eq!(grant.lease, LONG);
        assert!(grant.apps.is_empty());
        let [listed] = &store.workers().unwrap()[..] else { panic!("one worker") };
        assert_eq!(listed.worker_id, "w1");
        assert_eq!(listed.url, url_of("w1").as_str());
        assert!(listed.replicated && !listed.draining);
        assert_eq!(listed.apps, 0);
        let left = listed.lease_left.expect("live");
        assert!(left <= LONG && left > LONG - Duration::from_secs(60), "{left:?}");
        assert!(listed.renewed_ago < Duration::from_secs(60), "{listed:?}");

        // The database's clock is in milliseconds of the unix epoch.
        let system_ms = i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap();
        let database_ms = {
            use crate::db::Sql as _;
            fixture.raw().now_ms().unwrap()
        };
        assert!((database_ms - system_ms).abs() < 60_000, "{database_ms} vs {system_ms}");

        // A renewal records what the worker says now, and never shortens
        // the lease an earlier answer granted: the worker may count on it.
        let moved = WorkerUrl::parse("https://10.0.0.7:3013").unwrap();
        store.renew(&worker("w1"), &moved, false, &[], SHORT).unwrap();
        let [listed] = &store.workers().unwrap()[..] else { panic!("one worker") };
        assert!(listed.lease_left.is_some_and(|left| left > SHORT), "{listed:?}");
        assert_eq!(listed.url, moved.as_str());
        assert!(!listed.replicated);

        // A short lease lapses, and the next renewal makes it live again.
        renew(store, "w2", true, SHORT);
        lapse();
        let of_w2 = |store: &Store| {
            store.workers().unwrap().into_iter().find(|w| w.worker_id == "w2").unwrap()
        };
        assert_eq!(of_w2(store).lease_left, None, "lapsed");
        renew(store, "w2", true, LONG);
        assert!(of_w2(store).lease_left.is_some(), "live again");
    }
}

// --- placing ----------------------------------------------------------------

on_both! {
    /// With no live worker an app is not placed; then it goes to a live
    /// worker that is not draining, at epoch 1, once, and by the hash.
    fn a_new_app_is_placed_on_a_live_worker_that_is_not_draining() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        assert_eq!(store.locate(&app("notes")).unwrap(), None, "no worker at all");
        renew(store, "lapsed", true, LONG);
        expire(&fixture, "lapsed");
        assert_eq!(store.locate(&app("notes")).unwrap(), None, "no live worker");
        assert!(store.placements().unwrap().is_empty());

        renew(store, "w1", true, LONG);
        renew(store, "w2", false, LONG);
        store.set_draining(&worker("w2"), true).unwrap().unwrap();
        for n in 0..20 {
            let app_id = format!("app-{n}");
            let route = located(store, &app_id);
            assert_eq!((route.worker_id.as_str(), route.epoch), ("w1", 1), "{app_id}");
            assert_eq!(route.url, url_of("w1").as_str());
            assert_eq!(route.app_id, app_id);
        }
        // Asking again changes nothing.
        assert_eq!(located(store, "app-0").worker_id, "w1");
        assert_eq!(
            events(store, "app-0"),
            [(1, None, "w1".to_owned(), PlacementReason::Placed)]
        );

        // A worker that does not replicate takes new apps (their data starts
        // on its disk); the hash decides between the two.
        store.set_draining(&worker("w2"), false).unwrap().unwrap();
        for n in 20..60 {
            let app_id = format!("app-{n}");
            let expected = rendezvous(&app_id, ["w1", "w2"]).unwrap();
            assert_eq!(located(store, &app_id).worker_id, expected, "{app_id}");
        }
        let apps: Vec<(String, u64)> =
            store.workers().unwrap().into_iter().map(|w| (w.worker_id, w.apps)).collect();
        assert_eq!(apps.iter().map(|(_, n)| n).sum::<u64>(), 60, "{apps:?}");
        assert_eq!(apps[0], ("lapsed".to_owned(), 0));
        // w1's first 20, and some of the next 40 each.
        assert!(apps[1].1 > 20 && apps[2].1 > 0, "both take some: {apps:?}");
    }
}

// --- failover ---------------------------------------------------------------

on_both! {
    /// A replicating owner's apps stay while its lease is live, and move to
    /// a live worker at epoch + 1 by the next renewal after it lapsed.
    fn failover_happens_only_after_the_lease_lapses() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        renew(store, "w1", true, LONG);
        located(store, "notes");
        assert_eq!(held(&renew(store, "w2", true, LONG)), []);
        assert_eq!(owner(store, "notes"), ("w1".to_owned(), 1), "w1 is live");
        assert_eq!(
            held(&renew(store, "w1", true, LONG)),
            [("notes".to_owned(), 1, false)]
        );
        expire(&fixture, "w1");
        assert_eq!(
            held(&renew(store, "w2", true, LONG)),
            [("notes".to_owned(), 2, false)]
        );
        assert_eq!(owner(store, "notes"), ("w2".to_owned(), 2));
        assert_eq!(located(store, "notes").epoch, 2);
        assert_eq!(
            events(store, "notes"),
            [
                (1, None, "w1".to_owned(), PlacementReason::Placed),
                (2, Some("w1".to_owned()), "w2".to_owned(), PlacementReason::Failover),
            ]
        );
        // The old owner comes back to nothing.
        assert_eq!(held(&renew(store, "w1", true, LONG)), []);
    }
}

on_both! {
    /// The apps of an owner that does not replicate wait for it (their data
    /// is only on its disk), and only a replicating worker takes over a
    /// lapsed one's apps.
    fn only_a_replicating_owner_is_failed_over_and_only_to_a_replicating_worker() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        renew(store, "a", true, LONG);
        located(store, "moved");
        renew(store, "local", false, LONG);
        store.set_draining(&worker("a"), true).unwrap().unwrap();
        located(store, "kept");
        store.set_draining(&worker("a"), false).unwrap().unwrap();
        assert_eq!(owner(store, "moved").0, "a");
        assert_eq!(owner(store, "kept").0, "local");
        expire(&fixture, "a");
        expire(&fixture, "local");
        renew(store, "plain", false, LONG);

        // Only a worker that does not replicate is live: nothing moves.
        assert_eq!(held(&renew(store, "plain", false, LONG)), []);
        assert_eq!(owner(store, "moved"), ("a".to_owned(), 1));
        assert_eq!(owner(store, "kept"), ("local".to_owned(), 1));
        // A replicating worker takes the replicating owner's app only.
        assert_eq!(
            held(&renew(store, "r", true, LONG)),
            [("moved".to_owned(), 2, false)]
        );
        assert_eq!(owner(store, "kept"), ("local".to_owned(), 1));
        // Its owner comes back to its app, at the epoch it had.
        assert_eq!(
            held(&renew(store, "local", false, LONG)),
            [("kept".to_owned(), 1, false)]
        );
    }
}

on_both! {
    /// Two workers renewing at once after an owner lapsed: every app ends
    /// with one owner at epoch 2, named in exactly one of the two grants,
    /// with one failover event.
    fn racing_renewals_after_a_lapse_give_each_app_one_owner() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        renew(store, "lost", true, LONG);
        let apps: Vec<String> = (0..8).map(|n| format!("app-{n}")).collect();
        for app_id in &apps {
            located(store, app_id);
        }
        renew(store, "b", true, LONG);
        renew(store, "c", true, LONG);
        expire(&fixture, "lost");
        let racers = handles(&fixture, 2);
        let grants = race(&racers, |n, store| renew(store, ["b", "c"][n], true, LONG));
        for app_id in &apps {
            let holders: Vec<&str> = grants
                .iter()
                .zip(["b", "c"])
                .filter(|(grant, _)| grant.apps.iter().any(|a| &a.app_id == app_id))
                .map(|(_, id)| id)
                .collect();
            let (worker_id, epoch) = owner(store, app_id);
            assert_eq!(holders, [worker_id.as_str()], "{app_id}");
            assert_eq!(epoch, 2, "{app_id}");
            let reasons: Vec<_> = events(store, app_id).into_iter().map(|e| (e.0, e.3)).collect();
            assert_eq!(
                reasons,
                [(1, PlacementReason::Placed), (2, PlacementReason::Failover)],
                "{app_id}"
            );
        }
    }
}

// --- moves, releases and drains ---------------------------------------------

on_both! {
    /// A move is handed over: the owner is told, and the app moves at
    /// epoch + 1 only when the owner releases it naming its current epoch.
    /// A release of another epoch, of an app not asked for, or by a worker
    /// that is not the owner changes nothing.
    fn a_released_app_moves_at_the_next_epoch_only_when_the_release_names_the_current_one() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        renew(store, "w1", true, LONG);
        located(store, "notes");
        located(store, "other");
        renew(store, "w2", true, LONG);
        assert_eq!(
            store.request_move(&app("notes"), &worker("w2")).unwrap(),
            Ok(Moved::HandingOver)
        );
        let [placement, _] = &store.placements().unwrap()[..] else { panic!("two apps") };
        assert_eq!(placement.moving, Some(("w2".to_owned(), PlacementReason::Move)));
        let asked = [("notes".to_owned(), 1, true), ("other".to_owned(), 1, false)];
        assert_eq!(held(&renew(store, "w1", true, LONG)), asked);

        assert_eq!(held(&release(store, "w1", &[("notes", 2), ("notes", 0)])), asked);
        assert_eq!(held(&release(store, "w2", &[("notes", 1)])), [], "not the owner");
        assert_eq!(held(&release(store, "w1", &[("other", 1)])), asked, "not asked for");
        assert_eq!(owner(store, "notes"), ("w1".to_owned(), 1));

        assert_eq!(
            held(&release(store, "w1", &[("notes", 1)])),
            [("other".to_owned(), 1, false)]
        );
        assert_eq!(held(&renew(store, "w2", true, LONG)), [("notes".to_owned(), 2, false)]);
        assert_eq!(
            events(store, "notes")[1],
            (2, Some("w1".to_owned()), "w2".to_owned(), PlacementReason::Move)
        );
        // A late release of the old epoch changes nothing.
        release(store, "w1", &[("notes", 1)]);
        assert_eq!(owner(store, "notes"), ("w2".to_owned(), 2));

        // A target that can no longer take it ends the move: the owner keeps
        // the app at its epoch.
        store.request_move(&app("notes"), &worker("w1")).unwrap().unwrap();
        store.set_draining(&worker("w1"), true).unwrap().unwrap();
        assert_eq!(
            held(&release(store, "w2", &[("notes", 2)])),
            [("notes".to_owned(), 2, false)]
        );
        assert_eq!(owner(store, "notes"), ("w2".to_owned(), 2));
        assert_eq!(store.placements().unwrap()[0].moving, None);
    }
}

on_both! {
    /// A draining worker gets no new app, and hands its apps over one at a
    /// time: the next move starts only once the previous one is done.
    fn a_draining_worker_moves_its_apps_one_at_a_time() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        renew(store, "d", true, LONG);
        for app_id in ["a1", "a2", "a3"] {
            located(store, app_id);
        }
        renew(store, "t", true, LONG);
        assert_eq!(store.set_draining(&worker("d"), true).unwrap(), Ok(true));
        assert_eq!(store.set_draining(&worker("d"), true).unwrap(), Ok(false), "already");
        assert_eq!(located(store, "fresh").worker_id, "t", "no new app on a draining worker");

        let handing = |grant: &LeaseGrant| -> Vec<String> {
            grant.apps.iter().filter(|a| a.hand_over).map(|a| a.app_id.clone()).collect()
        };
        assert_eq!(handing(&renew(store, "d", true, LONG)), ["a1"]);
        assert_eq!(handing(&renew(store, "d", true, LONG)), ["a1"], "one at a time");
        let moving: Vec<_> = store.placements().unwrap().into_iter().filter_map(|p| p.moving).collect();
        assert_eq!(moving, [("t".to_owned(), PlacementReason::Drain)]);

        assert_eq!(handing(&release(store, "d", &[("a1", 1)])), ["a2"]);
        assert_eq!(handing(&release(store, "d", &[("a2", 1)])), ["a3"]);
        assert_eq!(held(&release(store, "d", &[("a3", 1)])), []);
        for app_id in ["a1", "a2", "a3"] {
            assert_eq!(owner(store, app_id), ("t".to_owned(), 2), "{app_id}");
            assert_eq!(events(store, app_id)[1].3, PlacementReason::Drain, "{app_id}");
        }
        assert_eq!(store.workers().unwrap()[0].apps, 0);
        assert_eq!(store.set_draining(&worker("d"), false).unwrap(), Ok(true));
    }
}

on_both! {
    /// An operator's move is refused, naming why and writing nothing, for an
    /// unplaced app, an unknown, lapsed, draining or non-replicating target,
    /// a non-replicating owner, or the owner itself; an app whose owner
    /// lapsed moves at once.
    fn an_operators_move_is_refused_with_its_reason_or_made_at_once_from_a_lapsed_owner() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        renew(store, "owner", true, LONG);
        located(store, "notes");
        renew(store, "local", false, LONG);
        store.set_draining(&worker("owner"), true).unwrap().unwrap();
        located(store, "kept");
        store.set_draining(&worker("owner"), false).unwrap().unwrap();
        renew(store, "drained", true, LONG);
        store.set_draining(&worker("drained"), true).unwrap().unwrap();
        renew(store, "plain", false, LONG);
        renew(store, "target", true, LONG);
        // `owner` and `gone` lapse, and no renewal comes after to fail
        // `notes` over.
        renew(store, "gone", true, LONG);
        expire(&fixture, "owner");
        expire(&fixture, "gone");
        let before = store.placements().unwrap();

        let refused = |app_id: &str, to: &str| {
            store.request_move(&app(app_id), &worker(to)).unwrap().unwrap_err().to_string()
        };
        for (app_id, to, expected) in [
            ("unplaced", "target", "app unplaced has no placement yet"),
            ("notes", "nobody", "no data-worker nobody has ever renewed a lease"),
            ("notes", "gone", "data-worker gone's lease has lapsed"),
            ("notes", "drained", "data-worker drained is draining"),
            ("notes", "plain", "data-worker plain does not replicate"),
            ("kept", "target", "data-worker local does not replicate"),
            ("notes", "owner", "app notes is already on data-worker owner"),
        ] {
            let refusal = refused(app_id, to);
            assert!(refusal.starts_with(expected), "{app_id} → {to}: {refusal}");
        }
        assert_eq!(store.placements().unwrap(), before, "nothing written");
        assert_eq!(
            store.set_draining(&worker("nobody"), true).unwrap(),
            Err(PlacementRefusal::UnknownWorker { worker_id: "nobody".into() })
        );

        assert_eq!(
            store.request_move(&app("notes"), &worker("target")).unwrap(),
            Ok(Moved::Now { epoch: 2 })
        );
        assert_eq!(owner(store, "notes"), ("target".to_owned(), 2));
        assert_eq!(
            events(store, "notes")[1],
            (2, Some("owner".to_owned()), "target".to_owned(), PlacementReason::Move)
        );
    }
}

// --- the record -------------------------------------------------------------

on_both! {
    /// Through every kind of change an app's epoch rises by one per owner,
    /// one event each; and the schema itself refuses an epoch that falls, an
    /// owner changed without a new epoch, a placement removed or replaced,
    /// and an epoch given twice.
    fn epochs_rise_by_one_with_every_owner_and_the_schema_refuses_anything_else() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        renew(store, "w1", true, LONG);
        located(store, "notes");
        renew(store, "w2", true, LONG);
        store.request_move(&app("notes"), &worker("w2")).unwrap().unwrap();
        release(store, "w1", &[("notes", 1)]);
        expire(&fixture, "w2");
        assert_eq!(held(&renew(store, "w1", true, LONG)), [("notes".to_owned(), 3, false)]);
        renew(store, "w2", true, LONG);
        expire(&fixture, "w1");
        assert_eq!(
            store.request_move(&app("notes"), &worker("w2")).unwrap(),
            Ok(Moved::Now { epoch: 4 })
        );
        let changes: Vec<(u64, PlacementReason)> =
            events(store, "notes").into_iter().map(|e| (e.0, e.3)).collect();
        assert_eq!(
            changes,
            [
                (1, PlacementReason::Placed),
                (2, PlacementReason::Move),
                (3, PlacementReason::Failover),
                (4, PlacementReason::Move),
            ]
        );

        let mut raw = fixture.raw();
        let mut refused = vec![
            ("UPDATE app_placements SET epoch = 1 WHERE app_id = 'notes'", "epoch"),
            ("UPDATE app_placements SET worker_id = 'w1' WHERE app_id = 'notes'", "epoch"),
            ("UPDATE app_placements SET app_id = 'other' WHERE app_id = 'notes'", "epoch"),
            ("DELETE FROM app_placements", "never removed"),
            (
                "INSERT INTO placement_events (app_id, epoch, to_worker, reason, at_ms)
                 VALUES ('notes', 2, 'w2', 'move', 0)",
                "unique",
            ),
        ];
        match raw.dialect() {
            crate::db::Dialect::Sqlite => refused.push((
                "INSERT OR REPLACE INTO app_placements (app_id, worker_id, epoch, changed_at_ms)
                 VALUES ('notes', 'w2', 1, 0)",
                "never removed",
            )),
            crate::db::Dialect::Postgres => {
                refused.push(("TRUNCATE app_placements CASCADE", "never removed"));
            }
        }
        for (sql, needle) in refused {
            let error = chain(&raw.execute(sql, ()).unwrap_err());
            assert!(error.to_lowercase().contains(needle), "{sql}: {error}");
        }
        if let Some(sqlite) = raw.as_sqlite() {
            sqlite.pragma_update(None, "recursive_triggers", "ON").unwrap();
            sqlite
                .execute(
                    "REPLACE INTO app_placements (app_id, worker_id, epoch, changed_at_ms)
                     VALUES ('notes', 'w2', 1, 0)",
                    (),
                )
                .unwrap_err();
        }
        assert_eq!(owner(store, "notes"), ("w2".to_owned(), 4));
        // Raising the epoch with a change of owner is what the store does.
        raw.execute(
            "UPDATE app_placements SET worker_id = 'w1', epoch = 5 WHERE app_id = 'notes'",
            (),
        )
        .unwrap();
    }
}

on_both! {
    /// No statement changes or removes a placement event.
    fn placement_events_are_append_only() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        renew(store, "w1", true, LONG);
        located(store, "notes");
        let before = store.placement_events(&app("notes")).unwrap();
        let first = before[0].id;
        let mut raw = fixture.raw();
        let mut refused = vec![
            "UPDATE placement_events SET to_worker = 'mallory'".to_owned(),
            "DELETE FROM placement_events".to_owned(),
            format!(
                "INSERT INTO placement_events (id, app_id, epoch, to_worker, reason, at_ms)
                 VALUES ({first}, 'x', 1, 'mallory', 'placed', 0)"
            ),
        ];
        match raw.dialect() {
            crate::db::Dialect::Sqlite => refused.push(format!(
                "INSERT OR REPLACE INTO placement_events (id, app_id, epoch, to_worker, reason, at_ms)
                 VALUES ({first}, 'x', 1, 'mallory', 'placed', 0)"
            )),
            crate::db::Dialect::Postgres => {
                refused.push("TRUNCATE placement_events".to_owned());
            }
        }
        for sql in &refused {
            let error = chain(&raw.execute(sql, ()).unwrap_err());
            assert!(error.contains("append-only"), "{sql}: {error}");
        }
        if let Some(sqlite) = raw.as_sqlite() {
            sqlite.pragma_update(None, "recursive_triggers", "ON").unwrap();
            sqlite
                .execute(
                    &format!(
                        "REPLACE INTO placement_events (id, app_id, epoch, to_worker, reason, at_ms)
                         VALUES ({first}, 'x', 1, 'mallory', 'placed', 0)"
                    ),
                    (),
                )
                .unwrap_err();
        }
        assert_eq!(store.placement_events(&app("notes")).unwrap(), before);
        let names: BTreeSet<String> = before.iter().map(|e| e.to_worker.clone()).collect();
        assert_eq!(names, BTreeSet::from(["w1".to_owned()]));
    }
}
