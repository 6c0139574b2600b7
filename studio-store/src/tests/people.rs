//! People changes and the admins an instance keeps: the last admin who can
//! sign in is never demoted, disabled or removed, a user demoted a moment ago
//! changes nobody, and two processes demoting each other at the same instant
//! (each with its own connection, so only SQLite's IMMEDIATE lock orders
//! them) leave one admin.

use std::sync::Barrier;

use super::*;

/// The admins who can sign in: enabled and signed up.
fn admins(store: &Store) -> Vec<String> {
    store
        .people()
        .unwrap()
        .into_iter()
        .filter(|person| person.user.role == UserRole::Admin && !person.disabled && !person.invited)
        .map(|person| person.user.username)
        .collect()
}

#[test]
fn the_last_admin_who_can_sign_in_is_never_taken_away() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    fixture.user("ada", UserRole::Admin);
    // An invited admin cannot sign in yet: ada is still the last one.
    store
        .invite_user("ivy", UserRole::Admin, ACTOR_OPERATOR)
        .unwrap();
    for (what, refused) in [
        (
            "demoting",
            store
                .set_role("ada", UserRole::Staff, ACTOR_OPERATOR)
                .map(|_| ()),
        ),
        (
            "disabling",
            store.set_disabled("ada", true, ACTOR_OPERATOR).map(|_| ()),
        ),
        (
            "removing",
            store.remove_user("ada", ACTOR_OPERATOR).map(|_| ()),
        ),
    ] {
        assert!(
            matches!(refused, Err(StoreError::LastAdmin)),
            "{what}: {refused:?}"
        );
    }
    assert_eq!(admins(store), ["ada"]);
    let people = store.people().unwrap();
    let ada = people
        .iter()
        .find(|person| person.user.username == "ada")
        .unwrap();
    assert_eq!(
        ada.user.role,
        UserRole::Admin,
        "nothing of the refused changes stayed"
    );
    assert!(!ada.disabled);
    // With a second admin, any one of them may go.
    fixture.user("bob", UserRole::Admin);
    assert!(
        store
            .set_role("ada", UserRole::Staff, ACTOR_OPERATOR)
            .unwrap()
    );
    assert!(matches!(
        store.set_disabled("bob", true, ACTOR_OPERATOR),
        Err(StoreError::LastAdmin)
    ));
    // Changes that take no admin away are not held back.
    assert!(
        store
            .set_role("ada", UserRole::Member, ACTOR_OPERATOR)
            .unwrap()
    );
    assert!(
        store
            .set_role("ivy", UserRole::Staff, ACTOR_OPERATOR)
            .unwrap()
    );
    assert_eq!(admins(store), ["bob"]);
}

#[test]
fn a_demoted_admin_changes_nobody() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let ada = fixture.user("ada", UserRole::Admin);
    let bob = fixture.user("bob", UserRole::Admin);
    fixture.user("mia", UserRole::Member);
    assert!(store.set_role("bob", UserRole::Staff, &ada.id).unwrap());
    // Bob's request was authorised before his demotion; the store reads his
    // role again in its own transaction.
    for (what, refused) in [
        (
            "role",
            store.set_role("ada", UserRole::Staff, &bob.id).map(|_| ()),
        ),
        (
            "disable",
            store.set_disabled("mia", true, &bob.id).map(|_| ()),
        ),
        ("remove", store.remove_user("mia", &bob.id).map(|_| ())),
        (
            "invite",
            store
                .invite_user("eve", UserRole::Admin, &bob.id)
                .map(|_| ()),
        ),
    ] {
        assert!(
            matches!(refused, Err(StoreError::NotAdmin)),
            "{what}: {refused:?}"
        );
    }
    assert_eq!(admins(store), ["ada"]);
    assert!(store.user_by_name("eve").unwrap().is_none());
    // A disabled admin acts no more either.
    let cy = fixture.user("cyd", UserRole::Admin);
    store.set_disabled("cyd", true, &ada.id).unwrap();
    assert!(matches!(
        store.set_role("mia", UserRole::Staff, &cy.id),
        Err(StoreError::NotAdmin)
    ));
}

/// Two handles on one file, as two studio-core processes have: each demotes
/// the other's admin at once, many times over. Every round leaves an admin.
#[test]
fn two_processes_demoting_each_other_at_once_leave_an_admin() {
    let fixture = Fixture::new();
    let other = fixture.reopen();
    for round in 0..20 {
        let a = fixture.user(&format!("ann{round}"), UserRole::Admin);
        let b = fixture.user(&format!("ben{round}"), UserRole::Admin);
        // Only these two are admins this round.
        for earlier in admins(&fixture.store) {
            if earlier != a.username && earlier != b.username {
                fixture
                    .store
                    .set_role(&earlier, UserRole::Member, ACTOR_OPERATOR)
                    .unwrap();
            }
        }
        let barrier = Barrier::new(2);
        let (first, second) = std::thread::scope(|scope| {
            let first = scope.spawn(|| {
                barrier.wait();
                fixture.store.set_role(&b.username, UserRole::Staff, &a.id)
            });
            let second = scope.spawn(|| {
                barrier.wait();
                other.set_role(&a.username, UserRole::Staff, &b.id)
            });
            (first.join().unwrap(), second.join().unwrap())
        });
        let left = admins(&fixture.store);
        assert_eq!(
            left.len(),
            1,
            "round {round}: {left:?} ({first:?}, {second:?})"
        );
        // Exactly one demotion ran; the other was refused, never a fault.
        let refusals = [&first, &second]
            .into_iter()
            .filter(|outcome| matches!(outcome, Err(StoreError::NotAdmin | StoreError::LastAdmin)))
            .count();
        assert_eq!(refusals, 1, "round {round}: {first:?}, {second:?}");
    }
}
