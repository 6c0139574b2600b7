//! People changes and the admins an instance keeps: the last admin who can
//! sign in is never demoted, disabled or removed, a user demoted a moment ago
//! changes nobody, two processes demoting each other at the same instant
//! (each with its own connection, so only the store's serialisation of
//! writers orders them) leave one admin, and a one-time link accepted by
//! several at once is accepted once.

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

on_both! {
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
}

on_both! {
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
}

on_both! {
/// Two handles on one file, as two studio-core processes have: each demotes
/// the other's admin at once, many times over. Every round leaves an admin.
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
}

on_both! {
/// A name signs in whatever its case, is stored as typed, and no second
/// account can hold it in another case, whichever way a person is made.
fn user_names_are_one_name_whatever_their_case() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let ada = fixture.user("Ada", UserRole::Admin);
    assert_eq!(ada.username, "Ada", "stored as typed");
    for typed in ["Ada", "ada", "ADA", "aDa"] {
        let signed_in = store.verify_login(typed, PASSWORD).unwrap();
        assert_eq!(
            signed_in.map(|user| user.id),
            Some(ada.id.clone()),
            "{typed}"
        );
        assert_eq!(store.user_by_name(typed).unwrap().unwrap().id, ada.id);
    }
    assert!(
        store
            .verify_login("ada", "not the password at all")
            .unwrap()
            .is_none()
    );
    for refused in [
        store
            .create_user("ada", UserRole::Member, PASSWORD)
            .map(|_| ()),
        store
            .create_user("ADA", UserRole::Member, PASSWORD)
            .map(|_| ()),
        store
            .invite_user("aDA", UserRole::Member, ACTOR_OPERATOR)
            .map(|_| ()),
    ] {
        assert!(
            matches!(refused, Err(StoreError::UsernameTaken)),
            "{refused:?}"
        );
    }
    assert_eq!(store.people().unwrap().len(), 1);
    // Changes by name find the person in any case too.
    fixture.user("mia", UserRole::Member);
    assert!(store.set_role("MIA", UserRole::Staff, &ada.id).unwrap());
    assert_eq!(
        store.user_by_name("mia").unwrap().unwrap().role,
        UserRole::Staff
    );
}
}

on_both! {
/// A reset link sets a new password once, within its day, and ends every
/// session, token and MCP connection the person had; until it is used
/// nothing changes. It is only for an active person.
fn a_password_reset_link_works_once_and_ends_the_old_credentials() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let ada = fixture.user("ada", UserRole::Admin);
    let mia = fixture.user("mia", UserRole::Member);
    let session = store.create_session(&mia.id).unwrap();
    let (token, _) = store
        .create_personal_token(&mia.id, "laptop", &scopes(&[Scope::AppsInvoke]), None)
        .unwrap();

    let link = store.password_reset_link("Mia", &ada.id).unwrap();
    assert_eq!(link.purpose, LinkPurpose::Reset);
    assert_eq!(link.expires_at, START + RESET_TTL_SECONDS);
    let view = store.invitation(&link.secret).unwrap().unwrap();
    assert_eq!(
        (view.username.as_str(), view.purpose),
        ("mia", LinkPurpose::Reset)
    );
    let listed = store.people().unwrap();
    let listed_mia = listed.iter().find(|p| p.user.id == mia.id).unwrap();
    assert_eq!(listed_mia.reset_expires_at, Some(link.expires_at));
    assert_eq!(listed_mia.invitation_expires_at, None);
    assert!(!listed_mia.invited, "still active");
    // Until it is used, the old password, session and token still work.
    assert!(store.verify_login("mia", PASSWORD).unwrap().is_some());
    assert!(store.session(&session).unwrap().is_some());
    assert!(store.token(&token).unwrap().is_some());

    let used = store
        .accept_invitation(&link.secret, "a brand new long password")
        .unwrap();
    assert_eq!(used.map(|user| user.id), Some(mia.id.clone()));
    assert!(
        store.session(&session).unwrap().is_none(),
        "the old session ended"
    );
    assert!(
        store.token(&token).unwrap().is_none(),
        "the old token ended"
    );
    assert!(store.verify_login("mia", PASSWORD).unwrap().is_none());
    assert!(
        store
            .verify_login("mia", "a brand new long password")
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .accept_invitation(&link.secret, "yet another long password")
            .unwrap()
            .is_none(),
        "used once"
    );
    let actions: Vec<String> = store
        .audit_entries(None)
        .unwrap()
        .into_iter()
        .filter(|entry| entry.subject.as_deref() == Some(mia.id.as_str()))
        .map(|entry| entry.action)
        .collect();
    assert!(actions.contains(&people_action::PASSWORD_RESET_LINK.to_owned()));
    assert!(actions.contains(&people_action::PASSWORD_RESET.to_owned()));

    // A link lasts a day.
    let late = store.password_reset_link("mia", &ada.id).unwrap();
    fixture.advance(RESET_TTL_SECONDS);
    assert!(store.invitation(&late.secret).unwrap().is_none());
    assert!(
        store
            .accept_invitation(&late.secret, "a password too late to count")
            .unwrap()
            .is_none()
    );

    // Only for active people, and only by an admin.
    store
        .invite_user("nora", UserRole::Member, &ada.id)
        .unwrap();
    assert!(matches!(
        store.password_reset_link("nora", &ada.id),
        Err(StoreError::StillInvited)
    ));
    store.set_disabled("mia", true, &ada.id).unwrap();
    assert!(matches!(
        store.password_reset_link("mia", &ada.id),
        Err(StoreError::UserDisabled)
    ));
    let sam = fixture.user("sam", UserRole::Staff);
    assert!(matches!(
        store.password_reset_link("ada", &sam.id),
        Err(StoreError::NotAdmin)
    ));
    assert!(matches!(
        store.password_reset_link("nobody", &ada.id),
        Err(StoreError::UnknownUser)
    ));
}
}

on_both! {
/// An invitation gives its apps when it is accepted, granted by the
/// inviting admin and audited; only apps that admin may grant, and nothing
/// when they are no longer an admin by then.
fn an_invitation_gives_its_apps_once_accepted() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let ada = fixture.user("ada", UserRole::Admin);
    let bob = fixture.user("bob", UserRole::Admin);
    register(store, "time-sheet", "r1");
    register(store, "expenses", "r2");
    register(store, "old", "r3");
    store.withdraw_app("old", &ada.id).unwrap().unwrap();
    let apps = |list: &[(&str, AppAccess)]| -> BTreeMap<String, AppAccess> {
        list.iter()
            .map(|(id, access)| ((*id).to_owned(), *access))
            .collect()
    };

    for (app, refused) in [("nope", "no such app"), ("old", "withdrawn")] {
        let answer = store.invite_user_with_apps(
            "nora",
            UserRole::Member,
            &apps(&[("time-sheet", AppAccess::Use), (app, AppAccess::Use)]),
            &ada.id,
        );
        match answer {
            Err(StoreError::InvitationGrant { app_id, reason }) => {
                assert_eq!(app_id, app);
                assert!(reason.contains(refused), "{reason}");
            }
            other => panic!("{app}: {other:?}"),
        }
    }
    assert!(
        store.user_by_name("nora").unwrap().is_none(),
        "nothing was made"
    );

    let invited = store
        .invite_user_with_apps(
            "nora",
            UserRole::Member,
            &apps(&[
                ("time-sheet", AppAccess::Use),
                ("expenses", AppAccess::Manage),
            ]),
            &ada.id,
        )
        .unwrap();
    let nora = invited.user.id.clone();
    assert_eq!(store.invitation_apps("NORA").unwrap().len(), 2);
    assert_eq!(
        store.access("time-sheet", &nora).unwrap(),
        None,
        "not before accepting"
    );
    store
        .accept_invitation(&invited.secret, "a long enough password")
        .unwrap()
        .unwrap();
    assert_eq!(
        store.access("time-sheet", &nora).unwrap(),
        Some(AppAccess::Use)
    );
    assert_eq!(
        store.access("expenses", &nora).unwrap(),
        Some(AppAccess::Manage)
    );
    let granted: Vec<(String, String)> = store
        .audit_entries(None)
        .unwrap()
        .into_iter()
        .filter(|entry| {
            entry.action == action::GRANT_CHANGED && entry.subject.as_deref() == Some(nora.as_str())
        })
        .map(|entry| (entry.actor, entry.app_id.unwrap()))
        .collect();
    assert_eq!(
        granted,
        [
            (ada.id.clone(), "expenses".to_owned()),
            (ada.id.clone(), "time-sheet".to_owned())
        ]
    );
    assert!(store.invitation_apps("nora").unwrap().is_empty());

    // An inviter demoted before the invitation is accepted gives nothing:
    // their link is dead, and the link another admin makes instead does not
    // give the apps the demoted one chose.
    let later = store
        .invite_user_with_apps(
            "omar",
            UserRole::Member,
            &apps(&[("time-sheet", AppAccess::Use)]),
            &bob.id,
        )
        .unwrap();
    store.set_role("bob", UserRole::Staff, &ada.id).unwrap();
    let dead = store
        .accept_invitation(&later.secret, "a long enough password")
        .unwrap();
    assert!(dead.is_none(), "a demoted admin's link is dead");
    let renewed = store.renew_invitation("omar", &ada.id).unwrap();
    store
        .accept_invitation(&renewed.secret, "a long enough password")
        .unwrap()
        .unwrap();
    assert_eq!(store.access("time-sheet", &later.user.id).unwrap(), None);
}
}

on_both! {
/// Using a link is anonymous and not throttled, so a made-up, spent or
/// expired link is answered before any password is hashed: nobody spends
/// the server's argon2 work with links they do not hold. A live link still
/// sets the password.
fn a_dead_link_costs_no_password_hashing() {
    use std::sync::atomic::Ordering;
    let fixture = Fixture::new();
    let store = &fixture.store;
    fixture.user("ada", UserRole::Admin);
    let invited = store
        .invite_user("ivy", UserRole::Member, ACTOR_OPERATOR)
        .unwrap();
    let hashed = || secrets::PASSWORDS_HASHED.load(Ordering::SeqCst);
    let before = hashed();
    for secret in ["made-up", "", &"x".repeat(10_000)] {
        let used = store
            .accept_invitation(secret, "a long enough password")
            .unwrap();
        assert!(used.is_none());
    }
    assert_eq!(hashed(), before, "no argon2 work for a dead link");
    let user = store
        .accept_invitation(&invited.secret, "a long enough password")
        .unwrap();
    assert_eq!(user.map(|user| user.username).as_deref(), Some("ivy"));
    assert_eq!(hashed(), before + 1);
    let again = store
        .accept_invitation(&invited.secret, "another long password")
        .unwrap();
    assert!(again.is_none(), "spent");
    assert_eq!(hashed(), before + 1, "a spent link is dead too");
}
}

on_both! {
/// Eight replicas accept one invitation link, then one reset link, at the
/// same instant, each with its own password: exactly one acceptance each
/// (the others find the link spent), audited once; the invitation's app is
/// granted once; the password that holds is the one acceptance's.
fn racing_acceptances_of_one_link_accept_it_once() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let ada = fixture.user("ada", UserRole::Admin);
    register(store, "time-sheet", "rev-1");
    let apps = BTreeMap::from([("time-sheet".to_owned(), AppAccess::Use)]);
    let invitation = store
        .invite_user_with_apps("ivy", UserRole::Member, &apps, &ada.id)
        .unwrap();
    let ivy = invitation.user.clone();
    let handles = handles(&fixture, RACERS);
    let password = |n: usize| format!("racer {n}'s long new password");
    let mut invitation = Some(invitation);
    for purpose in [
        people_action::INVITATION_ACCEPTED,
        people_action::PASSWORD_RESET,
    ] {
        // The reset link once the invitation is accepted.
        let link = match invitation.take() {
            Some(invitation) => invitation,
            None => store.password_reset_link("ivy", &ada.id).unwrap(),
        };
        let answers = race(&handles, |n, store| {
            store
                .accept_invitation(&link.secret, &password(n))
                .map_err(|error| error.to_string())
        });
        let accepted: Vec<usize> = answers
            .iter()
            .enumerate()
            .filter_map(|(n, answer)| match answer {
                Ok(Some(user)) => {
                    assert_eq!(user.id, ivy.id);
                    Some(n)
                }
                Ok(None) => None,
                Err(error) => panic!("{purpose}: racer {n}: {error}"),
            })
            .collect();
        assert_eq!(accepted.len(), 1, "{purpose}: {answers:?}");
        let audited = store
            .audit_entries(None)
            .unwrap()
            .into_iter()
            .filter(|entry| entry.action == purpose && entry.subject.as_deref() == Some(&ivy.id))
            .count();
        assert_eq!(audited, 1, "{purpose}");
        for n in 0..RACERS {
            assert_eq!(
                store.verify_login("ivy", &password(n)).unwrap().is_some(),
                n == accepted[0],
                "{purpose}: racer {n}'s password"
            );
        }
    }
    // The invitation's app was granted once.
    assert_eq!(
        store.access("time-sheet", &ivy.id).unwrap(),
        Some(AppAccess::Use)
    );
    let grants = store
        .audit_entries(Some("time-sheet"))
        .unwrap()
        .into_iter()
        .filter(|entry| {
            entry.action == action::GRANT_CHANGED && entry.subject.as_deref() == Some(&ivy.id)
        })
        .count();
    assert_eq!(grants, 1);
}
}

on_both! {
fn people_from_the_provider_sign_up_without_a_password_and_never_get_one() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let ada = fixture.user("ada", UserRole::Admin);
    assert_eq!(ada.source, UserSource::Password);
    let oidc = store
        .create_user_from(UserSource::Oidc, "olu@example.com", UserRole::Admin, "oidc:test")
        .unwrap();
    assert_eq!(oidc.source, UserSource::Oidc);
    assert_eq!(store.user(&oidc.id).unwrap().unwrap(), oidc);
    // Not "invited" though their password is empty: they sign in at the
    // provider, so they count among the admins who can act.
    assert_eq!(admins(store), ["ada", "olu@example.com"]);
    store.set_role("ada", UserRole::Member, &oidc.id).unwrap();
    assert!(matches!(
        store.set_role("olu@example.com", UserRole::Member, ACTOR_OPERATOR),
        Err(StoreError::LastAdmin)
    ));
    // No password sign-in, no password and no link to set one.
    assert_eq!(store.verify_login("olu@example.com", "").unwrap(), None);
    assert!(matches!(
        store.set_password("olu@example.com", "a long enough password"),
        Err(StoreError::SignsInElsewhere)
    ));
    assert!(matches!(
        store.password_reset_link("olu@example.com", &oidc.id),
        Err(StoreError::SignsInElsewhere)
    ));
    assert!(matches!(
        store.renew_invitation("olu@example.com", &oidc.id),
        Err(StoreError::NotInvited)
    ));
    assert!(matches!(
        store.create_user_from(UserSource::Password, "pat", UserRole::Member, "x"),
        Err(StoreError::SignsInElsewhere)
    ));
    let scim = store
        .create_user_from(UserSource::Scim, "sam+ops@example.com", UserRole::Member, "scim:1")
        .unwrap();
    assert_eq!(scim.source, UserSource::Scim);
    let audited: Vec<(String, String, Option<String>, Option<String>)> = store
        .audit_entries(None)
        .unwrap()
        .into_iter()
        .filter(|entry| entry.action == people_action::USER_PROVISIONED)
        .map(|entry| (entry.actor, entry.subject.unwrap_or_default(), entry.before, entry.after))
        .collect();
    assert_eq!(
        audited,
        [
            ("oidc:test".to_owned(), oidc.id.clone(), Some("oidc".to_owned()), Some("admin".to_owned())),
            ("scim:1".to_owned(), scim.id.clone(), Some("scim".to_owned()), Some("member".to_owned())),
        ]
    );
}
}
