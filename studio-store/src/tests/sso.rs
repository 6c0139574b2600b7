//! Sign-in through the identity provider as the core database keeps it: an
//! attempt is taken once, by its own browser, within ten minutes, and only
//! hashes of its state and browser secret are stored; the number waiting is
//! bounded; a subject is bound to one person, never to a password account;
//! a first sign-in with no mapped group makes nobody.

use super::*;

fn attempt(return_to: &str) -> SsoAttempt {
    SsoAttempt {
        nonce: "the nonce".into(),
        pkce_verifier: "the verifier".into(),
        return_to: return_to.into(),
    }
}

fn person<'a>(subject: &'a str, username: &'a str, role: Option<UserRole>) -> SsoPerson<'a> {
    SsoPerson {
        issuer: "https://idp.example",
        subject,
        username,
        role,
    }
}

on_both! {
    /// Taken once, by the browser that started it; another browser leaves
    /// it waiting; a replay is told apart from a made-up state.
    fn an_attempt_is_taken_once_by_its_own_browser() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        assert!(store.begin_sso_attempt("state-1", "browser-1", &attempt("/#/apps")).unwrap());
        assert_eq!(store.take_sso_attempt("state-1", None).unwrap(), TakenAttempt::OtherBrowser);
        assert_eq!(
            store.take_sso_attempt("state-1", Some("browser-2")).unwrap(),
            TakenAttempt::OtherBrowser
        );
        assert_eq!(
            store.take_sso_attempt("state-1", Some("browser-1")).unwrap(),
            TakenAttempt::Taken(attempt("/#/apps"))
        );
        assert_eq!(
            store.take_sso_attempt("state-1", Some("browser-1")).unwrap(),
            TakenAttempt::Used
        );
        assert_eq!(
            store.take_sso_attempt("made-up", Some("browser-1")).unwrap(),
            TakenAttempt::Unknown
        );
        let stored: Vec<(String, String)> = fixture
            .raw()
            .query_map("SELECT state_sha256, browser_sha256 FROM sso_attempts", (), |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(stored.iter().all(|(s, b)| s.len() == 64 && b.len() == 64), "{stored:?}");
    }
}

on_both! {
    /// Ten minutes, then expired; an hour later it is gone.
    fn an_attempt_expires() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        store.begin_sso_attempt("state-1", "browser-1", &attempt("/")).unwrap();
        fixture.advance(SSO_ATTEMPT_TTL_SECONDS);
        assert_eq!(
            store.take_sso_attempt("state-1", Some("browser-1")).unwrap(),
            TakenAttempt::Expired
        );
        fixture.advance(3600);
        store.begin_sso_attempt("state-2", "browser-1", &attempt("/")).unwrap();
        assert_eq!(
            store.take_sso_attempt("state-1", Some("browser-1")).unwrap(),
            TakenAttempt::Unknown
        );
    }
}

on_both! {
    /// A first sign-in with a mapped role makes an `oidc` person; the next
    /// finds them by subject and follows the role; no mapped group on a
    /// first sign-in makes nobody.
    fn a_subject_is_one_person_whose_role_follows() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        assert_eq!(
            store.sso_sign_in(&person("s1", "carol@example.com", None)).unwrap(),
            SsoSignIn::NoRole { existing: false }
        );
        assert!(store.user_by_name("carol@example.com").unwrap().is_none());
        let SsoSignIn::SignedIn { user, created: true, changed_from: None } =
            store.sso_sign_in(&person("s1", "carol@example.com", Some(UserRole::Member))).unwrap()
        else {
            panic!("a first sign-in makes the person");
        };
        assert_eq!((user.source, user.role), (UserSource::Oidc, UserRole::Member));
        fixture.user("root", UserRole::Admin);
        let SsoSignIn::SignedIn { user: again, created: false, changed_from } =
            store.sso_sign_in(&person("s1", "renamed", Some(UserRole::Staff))).unwrap()
        else {
            panic!("the same subject signs in again");
        };
        assert_eq!((again.id, again.role, changed_from), (user.id, UserRole::Staff, Some(UserRole::Member)));
    }
}

on_both! {
    /// A password account's name is never bound; a SCIM person's is, once.
    fn only_provider_people_are_bound_by_name() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        fixture.user("dave", UserRole::Member);
        assert_eq!(
            store.sso_sign_in(&person("s2", "DAVE", Some(UserRole::Member))).unwrap(),
            SsoSignIn::PasswordAccount
        );
        store
            .create_user_from(UserSource::Scim, "erin", UserRole::Member, ACTOR_OPERATOR)
            .unwrap();
        assert!(matches!(
            store.sso_sign_in(&person("s3", "erin", Some(UserRole::Member))).unwrap(),
            SsoSignIn::SignedIn { created: false, .. }
        ));
        assert_eq!(
            store.sso_sign_in(&person("s4", "erin", Some(UserRole::Member))).unwrap(),
            SsoSignIn::NameBound
        );
        let bound: Vec<_> = store
            .audit_entries(None)
            .unwrap()
            .into_iter()
            .filter(|entry| entry.action == "user.sso-bound")
            .map(|entry| (entry.actor, entry.after))
            .collect();
        assert_eq!(
            bound,
            [(ACTOR_IDENTITY_PROVIDER.to_owned(), Some("https://idp.example".to_owned()))]
        );
    }
}

on_both! {
    /// The directory owns a provisioned person's role and status: the ID
    /// token's groups, missing or different, neither refuse nor change them
    /// (Google sends no groups claim; SCIM does the mapping).
    fn a_provisioned_persons_role_stays_the_directorys() {
        let fixture = Fixture::new();
        let store = &fixture.store;
        fixture.user("root", UserRole::Admin);
        let fay = store
            .create_user_from(UserSource::Scim, "fay@example.com", UserRole::Staff, ACTOR_OPERATOR)
            .unwrap();
        for groups in [None, Some(UserRole::Admin), Some(UserRole::Member), None] {
            let SsoSignIn::SignedIn { user, created: false, changed_from: None } =
                store.sso_sign_in(&person("s5", "fay@example.com", groups)).unwrap()
            else {
                panic!("the provisioned person signs in whatever the token's groups ({groups:?})");
            };
            assert_eq!((&user.id, user.role), (&fay.id, UserRole::Staff));
        }
        let changes = store
            .audit_entries(None)
            .unwrap()
            .into_iter()
            .filter(|entry| {
                entry.subject.as_deref() == Some(&fay.id)
                    && ["user.role-changed", "user.sso-no-role"].contains(&entry.action.as_str())
            })
            .count();
        assert_eq!(changes, 0);
        // A disabled one is refused, bound or not.
        store.set_disabled("fay@example.com", true, ACTOR_OPERATOR).unwrap();
        assert_eq!(
            store.sso_sign_in(&person("s5", "fay@example.com", Some(UserRole::Staff))).unwrap(),
            SsoSignIn::Disabled
        );
    }
}
