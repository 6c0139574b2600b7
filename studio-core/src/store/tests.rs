//! The store against real database files in temporary folders, with a clock
//! the tests move by hand.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use super::*;

const PASSWORD: &str = "correct horse battery";
const START: i64 = 1_800_000_000;

/// A temporary database with a manual clock.
struct Fixture {
    dir: tempfile::TempDir,
    clock: Arc<AtomicI64>,
    store: Store,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(AtomicI64::new(START));
        let store = open_at(&dir.path().join("state/core.sqlite"), &clock);
        Fixture { dir, clock, store }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("state/core.sqlite")
    }

    /// Another handle on the same file, as a second process would have.
    fn reopen(&self) -> Store {
        open_at(&self.path(), &self.clock)
    }

    fn advance(&self, seconds: i64) {
        self.clock.fetch_add(seconds, Ordering::SeqCst);
    }

    fn user(&self, username: &str, role: UserRole) -> User {
        self.store.create_user(username, role, PASSWORD).unwrap()
    }

    /// A raw connection, for reading what is really stored and for trying
    /// what the API does not offer.
    fn raw(&self) -> rusqlite::Connection {
        let connection = rusqlite::Connection::open(self.path()).unwrap();
        connection.busy_timeout(Duration::from_secs(5)).unwrap();
        connection
    }
}

fn open_at(path: &Path, clock: &Arc<AtomicI64>) -> Store {
    let clock = clock.clone();
    Store::open_with_clock(path, Arc::new(move || clock.load(Ordering::SeqCst))).unwrap()
}

fn scopes(list: &[Scope]) -> BTreeSet<Scope> {
    list.iter().copied().collect()
}

fn register(store: &Store, app_id: &str, revision: &str) -> bool {
    store
        .register_app(
            app_id,
            revision,
            Some("schema-hash"),
            r#"{"actions":[]}"#,
            &Default::default(),
        )
        .unwrap()
}

// --- enums -------------------------------------------------------------------

#[test]
fn wire_spellings_round_trip() {
    for role in UserRole::ALL {
        assert_eq!(role.as_str().parse::<UserRole>().unwrap(), *role);
    }
    for scope in Scope::ALL {
        assert_eq!(scope.to_string().parse::<Scope>().unwrap(), *scope);
    }
    assert_eq!("chat:use".parse::<Scope>().unwrap(), Scope::ChatUse);
    assert_eq!("apps:invoke".parse::<Scope>().unwrap(), Scope::AppsInvoke);
    assert_eq!("apps:write".parse::<Scope>().unwrap(), Scope::AppsWrite);
    let error = "apps:admin".parse::<Scope>().unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"unknown scope "apps:admin"; expected chat:use, apps:invoke or apps:write"#
    );
    assert!("Admin".parse::<UserRole>().is_err());
    assert_eq!("manage".parse::<AppAccess>().unwrap(), AppAccess::Manage);
    assert!(AppAccess::Manage.allows(AppAccess::Use));
    assert!(AppAccess::Manage.allows(AppAccess::Manage));
    assert!(AppAccess::Use.allows(AppAccess::Use));
    assert!(!AppAccess::Use.allows(AppAccess::Manage));
    assert_eq!(
        serde_json::to_string(&scopes(&[Scope::AppsWrite, Scope::ChatUse])).unwrap(),
        r#"["chat:use","apps:write"]"#
    );
    assert_eq!(
        serde_json::to_string(&TokenKind::ChatSession).unwrap(),
        r#""chat-session""#
    );
}

#[test]
fn session_scopes_follow_the_role() {
    let all = scopes(&[Scope::ChatUse, Scope::AppsInvoke, Scope::AppsWrite]);
    assert_eq!(UserRole::Admin.session_scopes(), all);
    assert_eq!(UserRole::Staff.session_scopes(), all);
    assert_eq!(
        UserRole::Member.session_scopes(),
        scopes(&[Scope::ChatUse, Scope::AppsInvoke])
    );
}

// --- opening -------------------------------------------------------------------

#[test]
fn open_creates_the_file_privately_and_migrates_once() {
    let fixture = Fixture::new();
    let path = fixture.path();
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let _again = fixture.reopen();
    let _and_again = fixture.reopen();
    let raw = fixture.raw();
    let versions: Vec<i64> = raw
        .prepare("SELECT version FROM schema_migrations ORDER BY version")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, (1..=schema::latest_version()).collect::<Vec<_>>());
    let mode: String = raw
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn a_database_from_a_newer_build_is_refused() {
    let fixture = Fixture::new();
    fixture
        .raw()
        .execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)",
            [],
        )
        .unwrap();
    let error = Store::open(&fixture.path()).unwrap_err();
    assert!(
        error.to_string().contains("newer than this build"),
        "{error}"
    );
}

#[test]
fn concurrent_first_opens_of_one_file_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh/core.sqlite");
    let threads: Vec<_> = (0..4)
        .map(|n| {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = Store::open(&path).unwrap();
                store
                    .create_user(&format!("user{n}"), UserRole::Member, PASSWORD)
                    .unwrap();
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(Store::open(&path).unwrap().users().unwrap().len(), 4);
}

#[test]
fn two_handles_on_one_file_see_each_others_writes() {
    let fixture = Fixture::new();
    let other = fixture.reopen();
    let alice = fixture.user("alice", UserRole::Staff);
    assert_eq!(other.user_by_name("alice").unwrap(), Some(alice.clone()));
    let bob = other
        .create_user("bob", UserRole::Member, PASSWORD)
        .unwrap();
    assert_eq!(fixture.store.user(&bob.id).unwrap(), Some(bob));
}

// --- users and passwords ---------------------------------------------------

#[test]
fn users_sign_in_with_their_password_only() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Admin);
    assert_eq!(alice.username, "alice");
    assert_eq!(alice.role, UserRole::Admin);
    assert_eq!(alice.created_at, START);
    let id = uuid::Uuid::parse_str(&alice.id).unwrap();
    assert_eq!(id.get_version_num(), 7);

    let store = &fixture.store;
    assert_eq!(
        store.verify_login("alice", PASSWORD).unwrap(),
        Some(alice.clone())
    );
    assert_eq!(
        store
            .verify_login("alice", "correct horse batterY")
            .unwrap(),
        None
    );
    assert_eq!(store.verify_login("alice", "").unwrap(), None);
    assert_eq!(store.verify_login("nobody", PASSWORD).unwrap(), None);
    assert_eq!(store.verify_login("NOT VALID", PASSWORD).unwrap(), None);
    assert_eq!(store.user_by_name("alice").unwrap(), Some(alice.clone()));
    assert_eq!(store.user(&alice.id).unwrap(), Some(alice));
    assert_eq!(store.user_by_name("nobody").unwrap(), None);
    assert_eq!(store.user("nobody").unwrap(), None);
}

#[test]
fn passwords_are_stored_as_argon2id_only() {
    let fixture = Fixture::new();
    fixture.user("alice", UserRole::Member);
    let stored: String = fixture
        .raw()
        .query_row(
            "SELECT password_hash FROM users WHERE username = 'alice'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert!(stored.starts_with("$argon2id$v=19$"), "{stored}");
    assert!(!stored.contains(PASSWORD));
}

#[test]
fn usernames_and_passwords_are_checked() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    for bad in [
        "ab",
        "1abc",
        "Alice",
        "al ice",
        "alice@example",
        "ålice",
        "-alice",
        &"a".repeat(65),
    ] {
        let error = store
            .create_user(bad, UserRole::Member, PASSWORD)
            .unwrap_err();
        assert!(
            matches!(error, StoreError::InvalidUsername(_)),
            "{bad}: {error}"
        );
        assert!(error.is_invalid_input());
    }
    for good in ["abc", "a.b_c-9", &"a".repeat(64)] {
        store.create_user(good, UserRole::Member, PASSWORD).unwrap();
    }
    let error = store
        .create_user("shorty", UserRole::Member, "elevenchars")
        .unwrap_err();
    assert!(matches!(error, StoreError::WeakPassword(_)), "{error}");
    assert_eq!(
        error.to_string(),
        "password too weak: it must have at least 12 characters"
    );
    let error = store
        .create_user("longy", UserRole::Member, &"x".repeat(1025))
        .unwrap_err();
    assert!(matches!(error, StoreError::WeakPassword(_)), "{error}");
    // Twelve characters, not twelve bytes.
    store
        .create_user("unicode", UserRole::Member, "ééééééééééé")
        .unwrap_err();
    store
        .create_user("unicode", UserRole::Member, "éééééééééééé")
        .unwrap();

    store
        .create_user("taken", UserRole::Member, PASSWORD)
        .unwrap();
    let error = store
        .create_user("taken", UserRole::Admin, PASSWORD)
        .unwrap_err();
    assert!(matches!(error, StoreError::UsernameTaken), "{error}");
    assert_eq!(
        store.user_by_name("taken").unwrap().unwrap().role,
        UserRole::Member
    );
}

#[test]
fn set_password_replaces_it_and_ends_sessions() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let alice = fixture.user("alice", UserRole::Member);
    let bob = fixture.user("bob", UserRole::Member);
    let alice_session = store.create_session(&alice.id).unwrap();
    let bob_session = store.create_session(&bob.id).unwrap();
    let token = store
        .mint_token(
            &alice.id,
            TokenKind::Access,
            &scopes(&[Scope::ChatUse]),
            None,
        )
        .unwrap();

    store.set_password("alice", "a brand new password").unwrap();
    assert_eq!(store.verify_login("alice", PASSWORD).unwrap(), None);
    assert!(
        store
            .verify_login("alice", "a brand new password")
            .unwrap()
            .is_some()
    );
    assert_eq!(store.session(&alice_session).unwrap(), None);
    assert!(store.session(&bob_session).unwrap().is_some());
    assert!(store.token(&token).unwrap().is_some());

    assert!(matches!(
        store.set_password("nobody", "a brand new password"),
        Err(StoreError::UnknownUser)
    ));
    assert!(matches!(
        store.set_password("alice", "short"),
        Err(StoreError::WeakPassword(_))
    ));
}

// --- sessions ----------------------------------------------------------------

#[test]
fn sessions_carry_role_scopes_and_expire_after_twelve_hours() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let member = fixture.user("mia", UserRole::Member);
    let staff = fixture.user("sam", UserRole::Staff);

    let secret = store.create_session(&member.id).unwrap();
    assert_eq!(secret.len(), 43);
    let principal = store.session(&secret).unwrap().unwrap();
    assert_eq!(principal.user, member);
    assert_eq!(principal.kind, PrincipalKind::Session);
    assert_eq!(
        principal.scopes,
        scopes(&[Scope::ChatUse, Scope::AppsInvoke])
    );
    assert_eq!(principal.expires_at, START + SESSION_TTL_SECONDS);
    assert!(!principal.has(Scope::AppsWrite));

    let staff_secret = store.create_session(&staff.id).unwrap();
    assert!(
        store
            .session(&staff_secret)
            .unwrap()
            .unwrap()
            .has(Scope::AppsWrite)
    );

    fixture.advance(SESSION_TTL_SECONDS - 1);
    assert!(store.session(&secret).unwrap().is_some());
    fixture.advance(1);
    assert_eq!(store.session(&secret).unwrap(), None);

    // A new sign-in sweeps the expired rows away.
    store.create_session(&member.id).unwrap();
    let rows: i64 = fixture
        .raw()
        .query_row("SELECT count(*) FROM sessions", [], |row| row.get(0))
        .unwrap();
    assert_eq!(rows, 1);
}

#[test]
fn sessions_are_stored_hashed_and_end_on_sign_out() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let alice = fixture.user("alice", UserRole::Member);
    let secret = store.create_session(&alice.id).unwrap();
    let stored: Vec<String> = fixture
        .raw()
        .prepare("SELECT secret_sha256 FROM sessions")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(stored, vec![secrets::secret_sha256(&secret)]);
    assert!(!stored[0].contains(&secret));

    assert_eq!(store.session("").unwrap(), None);
    assert_eq!(store.session("garbage").unwrap(), None);
    assert_eq!(store.session(&"x".repeat(10_000)).unwrap(), None);
    // A session secret is not a token, and a token is not a session.
    assert_eq!(store.token(&secret).unwrap(), None);

    store.delete_session(&secret).unwrap();
    assert_eq!(store.session(&secret).unwrap(), None);
    store.delete_session(&secret).unwrap();
    assert!(matches!(
        store.create_session("nobody"),
        Err(StoreError::UnknownUser)
    ));
}

// --- tokens ------------------------------------------------------------------

#[test]
fn tokens_carry_exactly_the_minted_scopes() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let admin = fixture.user("ada", UserRole::Admin);
    let member = fixture.user("mia", UserRole::Member);

    // An admin may hold apps:write, but a token without it never gains it.
    let narrow = store
        .mint_token(
            &admin.id,
            TokenKind::Access,
            &scopes(&[Scope::ChatUse]),
            None,
        )
        .unwrap();
    let principal = store.token(&narrow).unwrap().unwrap();
    assert_eq!(principal.scopes, scopes(&[Scope::ChatUse]));
    assert_eq!(principal.kind, PrincipalKind::Access);
    assert_eq!(principal.user, admin);

    let wide = scopes(&[Scope::AppsInvoke, Scope::AppsWrite]);
    let token = store
        .mint_token(&admin.id, TokenKind::Access, &wide, None)
        .unwrap();
    assert_eq!(store.token(&token).unwrap().unwrap().scopes, wide);

    let token = store
        .mint_token(
            &member.id,
            TokenKind::Access,
            &scopes(&[Scope::ChatUse, Scope::AppsInvoke]),
            None,
        )
        .unwrap();
    assert_eq!(
        store.token(&token).unwrap().unwrap().scopes,
        scopes(&[Scope::ChatUse, Scope::AppsInvoke])
    );
}

#[test]
fn a_member_cannot_mint_apps_write_and_empty_scopes_are_refused() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let member = fixture.user("mia", UserRole::Member);
    let error = store
        .mint_token(
            &member.id,
            TokenKind::Access,
            &scopes(&[Scope::AppsInvoke, Scope::AppsWrite]),
            None,
        )
        .unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::ScopeNotAllowed {
                scope: Scope::AppsWrite,
                role: UserRole::Member
            }
        ),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "a member user cannot hold the apps:write scope"
    );
    let error = store
        .mint_token(&member.id, TokenKind::ApiKey, &BTreeSet::new(), None)
        .unwrap_err();
    assert!(matches!(error, StoreError::NoScopes), "{error}");
    let error = store
        .mint_token(
            "nobody",
            TokenKind::Access,
            &scopes(&[Scope::ChatUse]),
            None,
        )
        .unwrap_err();
    assert!(matches!(error, StoreError::UnknownUser), "{error}");
    let rows: i64 = fixture
        .raw()
        .query_row("SELECT count(*) FROM tokens", [], |row| row.get(0))
        .unwrap();
    assert_eq!(rows, 0);
}

#[test]
fn a_token_is_never_stored_as_itself() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let staff = fixture.user("sam", UserRole::Staff);
    let token = store
        .mint_token(
            &staff.id,
            TokenKind::Access,
            &scopes(&[Scope::AppsInvoke, Scope::AppsWrite]),
            None,
        )
        .unwrap();
    assert!(token.starts_with("sasha_at_"), "{token}");
    assert_eq!(token.len(), "sasha_at_".len() + 43);
    let (kind, scope_text, hash): (String, String, String) = fixture
        .raw()
        .query_row(
            "SELECT kind, scopes, secret_sha256 FROM tokens",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap();
    assert_eq!(kind, "access");
    assert_eq!(scope_text, "apps:invoke apps:write");
    assert_eq!(hash, secrets::secret_sha256(&token));
    assert_ne!(hash, token);
    let random_part = &token["sasha_at_".len()..];
    assert!(!hash.contains(random_part));
    // Nothing in the database file holds the token's text.
    drop(fixture.raw());
    let mut bytes = std::fs::read(fixture.path()).unwrap();
    if let Ok(wal) = std::fs::read(fixture.path().with_extension("sqlite-wal")) {
        bytes.extend(wal);
    }
    assert!(
        !bytes
            .windows(random_part.len())
            .any(|window| window == random_part.as_bytes())
    );
}

#[test]
fn token_kinds_have_their_prefixes_and_lifetimes() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let staff = fixture.user("sam", UserRole::Staff);
    let chat = scopes(&[Scope::ChatUse]);

    let access = store
        .mint_token(&staff.id, TokenKind::Access, &chat, None)
        .unwrap();
    let access_short = store
        .mint_token(&staff.id, TokenKind::Access, &chat, Some(90 * 60))
        .unwrap();
    let chat_token = store
        .mint_token(&staff.id, TokenKind::ChatSession, &chat, None)
        .unwrap();
    let key = store
        .mint_token(&staff.id, TokenKind::ApiKey, &chat, None)
        .unwrap();
    assert!(chat_token.starts_with("sasha_ct_"));
    assert!(key.starts_with("sasha_ak_"));

    let principal = store.token(&access).unwrap().unwrap();
    assert_eq!(
        principal.expires_at,
        START + ACCESS_TOKEN_DEFAULT_TTL_SECONDS as i64
    );
    assert_eq!(
        store.token(&chat_token).unwrap().unwrap().kind,
        PrincipalKind::ChatSession
    );
    let key_principal = store.token(&key).unwrap().unwrap();
    assert_eq!(key_principal.kind, PrincipalKind::ApiKey);
    assert_eq!(key_principal.expires_at, i64::MAX);

    fixture.advance(90 * 60);
    assert_eq!(store.token(&access_short).unwrap(), None);
    assert!(store.token(&chat_token).unwrap().is_some());
    fixture.advance(30 * 60);
    assert_eq!(store.token(&chat_token).unwrap(), None);
    fixture.advance(ACCESS_TOKEN_DEFAULT_TTL_SECONDS as i64);
    assert_eq!(store.token(&access).unwrap(), None);
    assert!(store.token(&key).unwrap().is_some());

    for (kind, ttl) in [
        (TokenKind::Access, Some(0)),
        (TokenKind::Access, Some(TOKEN_MAX_TTL_SECONDS + 1)),
        (TokenKind::ApiKey, Some(TOKEN_MAX_TTL_SECONDS + 1)),
        (TokenKind::ChatSession, Some(60)),
    ] {
        let error = store.mint_token(&staff.id, kind, &chat, ttl).unwrap_err();
        assert!(
            matches!(error, StoreError::InvalidTtl(_)),
            "{kind} {ttl:?}: {error}"
        );
    }
    store
        .mint_token(
            &staff.id,
            TokenKind::Access,
            &chat,
            Some(TOKEN_MAX_TTL_SECONDS),
        )
        .unwrap();
}

#[test]
fn forged_revoked_and_relabelled_tokens_are_refused() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let alice = fixture.user("alice", UserRole::Admin);
    let token = store
        .mint_token(
            &alice.id,
            TokenKind::ApiKey,
            &scopes(&[Scope::ChatUse]),
            None,
        )
        .unwrap();
    // The same random part under another kind's prefix is another token.
    let relabelled = token.replacen("sasha_ak_", "sasha_at_", 1);
    assert_eq!(store.token(&relabelled).unwrap(), None);
    assert_eq!(store.token("sasha_at_garbage").unwrap(), None);
    assert_eq!(store.token("").unwrap(), None);
    assert_eq!(store.token(&format!("{token}x")).unwrap(), None);

    assert!(store.revoke_token(&token).unwrap());
    assert_eq!(store.token(&token).unwrap(), None);
    assert!(!store.revoke_token(&token).unwrap());
    assert!(!store.revoke_token("sasha_at_unknown").unwrap());
}

#[test]
fn a_token_loses_a_scope_its_users_role_no_longer_allows() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let sam = fixture.user("sam", UserRole::Staff);
    let token = store
        .mint_token(
            &sam.id,
            TokenKind::Access,
            &scopes(&[Scope::AppsInvoke, Scope::AppsWrite]),
            None,
        )
        .unwrap();
    fixture
        .raw()
        .execute("UPDATE users SET role = 'member' WHERE id = ?1", [&sam.id])
        .unwrap();
    assert_eq!(
        store.token(&token).unwrap().unwrap().scopes,
        scopes(&[Scope::AppsInvoke])
    );
}

// --- registry and grants ---------------------------------------------------

#[test]
fn first_discovery_grants_manage_to_admin_and_staff_existing_then() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let ada = fixture.user("ada", UserRole::Admin);
    let sam = fixture.user("sam", UserRole::Staff);
    let mia = fixture.user("mia", UserRole::Member);

    assert!(register(store, "time-sheet", "rev-1"));
    assert_eq!(
        store.access("time-sheet", &ada.id).unwrap(),
        Some(AppAccess::Manage)
    );
    assert_eq!(
        store.access("time-sheet", &sam.id).unwrap(),
        Some(AppAccess::Manage)
    );
    assert_eq!(store.access("time-sheet", &mia.id).unwrap(), None);

    // Users created after the first discovery get nothing, even privileged ones,
    // and a later discovery does not seed them either.
    let late_admin = fixture.user("late-admin", UserRole::Admin);
    let late_member = fixture.user("late-member", UserRole::Member);
    assert!(!register(store, "time-sheet", "rev-1"));
    assert!(!register(store, "time-sheet", "rev-2"));
    assert_eq!(store.access("time-sheet", &late_admin.id).unwrap(), None);
    assert_eq!(store.access("time-sheet", &late_member.id).unwrap(), None);

    // Another app's first discovery sees the users existing now.
    assert!(register(store, "expenses", "rev-1"));
    assert_eq!(
        store.access("expenses", &late_admin.id).unwrap(),
        Some(AppAccess::Manage)
    );
    assert_eq!(store.access("expenses", &late_member.id).unwrap(), None);

    let grants = store.grants("time-sheet").unwrap();
    let names: Vec<_> = grants.iter().map(|g| g.username.as_str()).collect();
    assert_eq!(names, ["ada", "sam"]);
    assert!(
        grants
            .iter()
            .all(|g| g.access == AppAccess::Manage && g.granted_by == ACTOR_SYSTEM)
    );

    let app = store.registered_app("time-sheet").unwrap().unwrap();
    assert_eq!(app.current_revision, "rev-2");
    assert_eq!(app.schema_hash.as_deref(), Some("schema-hash"));
    assert_eq!(app.first_discovered_at, START);
    assert_eq!(
        store
            .registered_apps()
            .unwrap()
            .iter()
            .map(|app| app.app_id.as_str())
            .collect::<Vec<_>>(),
        ["expenses", "time-sheet"]
    );

    let log = store.audit_entries(Some("time-sheet")).unwrap();
    let summary: Vec<_> = log
        .iter()
        .map(|e| {
            (
                e.actor.as_str(),
                e.action.as_str(),
                e.subject.as_deref(),
                e.before.as_deref(),
                e.after.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("system", "app.registered", None, None, Some("rev-1")),
            (
                "system",
                "grant.changed",
                Some(ada.id.as_str()),
                None,
                Some("manage")
            ),
            (
                "system",
                "grant.changed",
                Some(sam.id.as_str()),
                None,
                Some("manage")
            ),
            (
                "system",
                "app.revision-changed",
                None,
                Some("rev-1"),
                Some("rev-2")
            ),
        ]
    );
}

#[test]
fn a_revoked_or_narrowed_grant_is_never_restored_by_rediscovery_or_restart() {
    let fixture = Fixture::new();
    let ada = fixture.user("ada", UserRole::Admin);
    let sam = fixture.user("sam", UserRole::Staff);
    let store = &fixture.store;
    assert!(register(store, "time-sheet", "rev-1"));

    assert!(store.revoke("time-sheet", &sam.id, Some(&ada.id)).unwrap());
    store
        .grant("time-sheet", &ada.id, AppAccess::Use, Some(&ada.id))
        .unwrap();
    assert_eq!(store.access("time-sheet", &sam.id).unwrap(), None);

    // Rediscovery in the same process.
    assert!(!register(store, "time-sheet", "rev-1"));
    assert_eq!(store.access("time-sheet", &sam.id).unwrap(), None);

    // A restart: a fresh handle on the file, the app seen again.
    let restarted = fixture.reopen();
    assert!(!register(&restarted, "time-sheet", "rev-2"));
    assert_eq!(restarted.access("time-sheet", &sam.id).unwrap(), None);
    assert_eq!(
        restarted.access("time-sheet", &ada.id).unwrap(),
        Some(AppAccess::Use)
    );
}

#[test]
fn revocation_applies_to_the_very_next_check() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let ada = fixture.user("ada", UserRole::Admin);
    let mia = fixture.user("mia", UserRole::Member);
    register(store, "time-sheet", "rev-1");
    store
        .grant("time-sheet", &mia.id, AppAccess::Use, Some(&ada.id))
        .unwrap();
    assert_eq!(
        store.access("time-sheet", &mia.id).unwrap(),
        Some(AppAccess::Use)
    );
    // Revoked through another handle (the operator CLI in another process).
    let operator = fixture.reopen();
    assert!(
        operator
            .revoke("time-sheet", &mia.id, Some(ACTOR_OPERATOR))
            .unwrap()
    );
    assert_eq!(store.access("time-sheet", &mia.id).unwrap(), None);
    assert!(store.access_by_app(&mia.id).unwrap().is_empty());
    assert!(!store.revoke("time-sheet", &mia.id, None).unwrap());
}

#[test]
fn grants_are_upserted_checked_and_audited() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let ada = fixture.user("ada", UserRole::Admin);
    let mia = fixture.user("mia", UserRole::Member);
    register(store, "time-sheet", "rev-1");
    fixture.advance(10);

    store
        .grant("time-sheet", &mia.id, AppAccess::Use, Some(&ada.id))
        .unwrap();
    // The same grant again is no change and no audit entry.
    store
        .grant("time-sheet", &mia.id, AppAccess::Use, Some(&ada.id))
        .unwrap();
    store
        .grant("time-sheet", &mia.id, AppAccess::Manage, None)
        .unwrap();
    assert_eq!(
        store.access("time-sheet", &mia.id).unwrap(),
        Some(AppAccess::Manage)
    );
    let grant = store
        .grants("time-sheet")
        .unwrap()
        .into_iter()
        .find(|g| g.user_id == mia.id)
        .unwrap();
    assert_eq!(grant.username, "mia");
    assert_eq!(grant.granted_at, START + 10);
    assert_eq!(grant.granted_by, ACTOR_SYSTEM);
    assert_eq!(
        store.access_by_app(&mia.id).unwrap(),
        BTreeMap::from([("time-sheet".to_owned(), AppAccess::Manage)])
    );

    assert!(matches!(
        store.grant("never-seen", &mia.id, AppAccess::Use, None),
        Err(StoreError::UnknownApp)
    ));
    assert!(matches!(
        store.grant("time-sheet", "nobody", AppAccess::Use, None),
        Err(StoreError::UnknownUser)
    ));

    let changes: Vec<_> = store
        .audit_entries(Some("time-sheet"))
        .unwrap()
        .into_iter()
        .filter(|e| e.action == action::GRANT_CHANGED && e.subject.as_deref() == Some(&mia.id))
        .map(|e| (e.actor, e.before, e.after, e.at))
        .collect();
    assert_eq!(
        changes,
        [
            (ada.id.clone(), None, Some("use".to_owned()), START + 10),
            (
                "system".to_owned(),
                Some("use".to_owned()),
                Some("manage".to_owned()),
                START + 10
            ),
        ]
    );
    assert!(store.revoke("time-sheet", &mia.id, Some(&ada.id)).unwrap());
    let last = store.audit_entries(None).unwrap().pop().unwrap();
    assert_eq!(
        (last.before.as_deref(), last.after.as_deref()),
        (Some("manage"), None)
    );
}

#[test]
fn deleting_a_user_removes_their_grants_sessions_and_tokens() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let sam = fixture.user("sam", UserRole::Staff);
    register(store, "time-sheet", "rev-1");
    let session = store.create_session(&sam.id).unwrap();
    let token = store
        .mint_token(&sam.id, TokenKind::Access, &scopes(&[Scope::ChatUse]), None)
        .unwrap();
    let raw = fixture.raw();
    raw.pragma_update(None, "foreign_keys", "ON").unwrap();
    raw.execute("DELETE FROM users WHERE id = ?1", [&sam.id])
        .unwrap();
    assert!(store.grants("time-sheet").unwrap().is_empty());
    assert_eq!(store.session(&session).unwrap(), None);
    assert_eq!(store.token(&token).unwrap(), None);
}

// --- the audit log -----------------------------------------------------------

#[test]
fn source_changes_are_audited() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    store
        .record_source_change("time-sheet", "app.js", "user-1", Some("aaa"), Some("bbb"))
        .unwrap();
    store
        .record_source_change("time-sheet", "old.js", "user-1", Some("ccc"), None)
        .unwrap();
    let entries = store.audit_entries(Some("time-sheet")).unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].action, "app-source.changed");
    assert_eq!(entries[0].subject.as_deref(), Some("app.js"));
    assert_eq!(entries[0].before.as_deref(), Some("aaa"));
    assert_eq!(entries[0].after.as_deref(), Some("bbb"));
    assert_eq!(entries[1].after, None);
    assert!(store.audit_entries(Some("other")).unwrap().is_empty());
}

#[test]
fn the_audit_log_cannot_be_changed_or_deleted() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    fixture.user("ada", UserRole::Admin);
    register(store, "time-sheet", "rev-1");
    let before = store.audit_entries(None).unwrap();
    assert_eq!(before.len(), 2);
    let first_id = before[0].id;

    let raw = fixture.raw();
    for sql in [
        "UPDATE authorization_audit_log SET actor = 'mallory'".to_owned(),
        "DELETE FROM authorization_audit_log".to_owned(),
        format!("DELETE FROM authorization_audit_log WHERE id = {first_id}"),
        format!(
            "INSERT OR REPLACE INTO authorization_audit_log (id, at, actor, action)
             VALUES ({first_id}, 0, 'mallory', 'grant.changed')"
        ),
        format!(
            "REPLACE INTO authorization_audit_log (id, at, actor, action)
             VALUES ({first_id}, 0, 'mallory', 'grant.changed')"
        ),
        format!(
            "INSERT INTO authorization_audit_log (id, at, actor, action)
             VALUES ({first_id}, 0, 'mallory', 'grant.changed')
             ON CONFLICT (id) DO UPDATE SET actor = 'mallory'"
        ),
    ] {
        let error = raw.execute(&sql, []).unwrap_err();
        assert!(error.to_string().contains("append-only"), "{sql}: {error}");
    }
    // With recursive triggers on, REPLACE's implicit delete is refused too.
    raw.pragma_update(None, "recursive_triggers", "ON").unwrap();
    raw.execute(
        &format!(
            "INSERT OR REPLACE INTO authorization_audit_log (id, at, actor, action)
             VALUES ({first_id}, 0, 'mallory', 'grant.changed')"
        ),
        [],
    )
    .unwrap_err();
    assert_eq!(store.audit_entries(None).unwrap(), before);

    // Appending still works, with ids never reused.
    store
        .record_source_change("time-sheet", "app.js", "ada", None, Some("x"))
        .unwrap();
    let after = store.audit_entries(None).unwrap();
    assert_eq!(after.len(), 3);
    assert!(after[2].id > after[1].id);
}

#[test]
fn errors_say_whether_to_retry() {
    assert!(StoreError::Busy.is_retryable());
    assert!(!StoreError::UnknownUser.is_retryable());
    assert!(!StoreError::Database("x".into()).is_retryable());
    assert!(!StoreError::UnknownApp.is_invalid_input());
    assert!(StoreError::NoScopes.is_invalid_input());
}

#[test]
fn a_held_write_lock_is_reported_as_busy_not_as_a_fault() {
    let fixture = Fixture::new();
    let raw = fixture.raw();
    raw.busy_timeout(Duration::from_millis(0)).unwrap();
    raw.execute_batch("BEGIN IMMEDIATE").unwrap();
    // The store waits its 5 s busy timeout, then reports Busy. Keep this
    // short by shrinking the store's timeout through its own connection.
    fixture
        .store
        .connection()
        .busy_timeout(Duration::from_millis(50))
        .unwrap();
    let error = fixture
        .store
        .create_user("alice", UserRole::Member, PASSWORD)
        .unwrap_err();
    assert!(matches!(error, StoreError::Busy), "{error}");
    raw.execute_batch("ROLLBACK").unwrap();
    fixture.user("alice", UserRole::Member);
}

// --- confirmations -------------------------------------------------------------

const TOOL: &str = "app__expense_log__expenses__create";
const ARGUMENTS: &str = r#"{"record":{"amount":12,"note":"lunch"}}"#;

fn call<'a>(user_id: &'a str, tool: &'a str, arguments_json: &'a str) -> ConfirmedCall<'a> {
    ConfirmedCall {
        user_id,
        tool,
        arguments_json,
    }
}

fn issue(store: &Store, user_id: &str, key: &str) -> IssuedConfirmation {
    store
        .issue_confirmation(&call(user_id, TOOL, ARGUMENTS), key)
        .unwrap()
        .unwrap()
}

fn confirmation_rows(fixture: &Fixture) -> i64 {
    fixture
        .raw()
        .query_row("SELECT count(*) FROM confirmations", [], |row| row.get(0))
        .unwrap()
}

#[test]
fn a_confirmation_is_issued_then_redeemed_for_its_key() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let issued = issue(&fixture.store, &alice.id, "key-1");
    assert!(issued.token.starts_with("sasha_cf_"), "{issued:?}");
    assert_eq!(issued.token.len(), "sasha_cf_".len() + 43);
    assert_eq!(TokenKind::of_secret(&issued.token), None);
    assert_eq!(issued.idempotency_key, "key-1");
    assert_eq!(issued.expires_at, START + CONFIRMATION_TTL_SECONDS);
    assert!(!format!("{issued:?}").contains(&issued.token));

    // Another handle stands in for another process; redemption is by the
    // database, not by memory.
    fixture.advance(CONFIRMATION_TTL_SECONDS - 1);
    let redeemed = fixture
        .reopen()
        .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &issued.token)
        .unwrap()
        .unwrap();
    assert_eq!(
        redeemed,
        RedeemedConfirmation {
            idempotency_key: "key-1".into(),
            expires_at: START + CONFIRMATION_TTL_SECONDS,
            first_redemption: true,
        }
    );
    let redeemed_at: Option<i64> = fixture
        .raw()
        .query_row("SELECT redeemed_at FROM confirmations", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(redeemed_at, Some(START + CONFIRMATION_TTL_SECONDS - 1));
}

#[test]
fn a_second_redemption_answers_the_same_key() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let issued = issue(&fixture.store, &alice.id, "key-1");
    let redeem = || {
        fixture
            .store
            .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &issued.token)
            .unwrap()
            .unwrap()
    };
    let first = redeem();
    fixture.advance(60);
    let second = redeem();
    assert!(first.first_redemption);
    assert!(!second.first_redemption);
    assert_eq!(second.idempotency_key, "key-1");
    assert_eq!(second.expires_at, first.expires_at);
    // The first redemption's time is kept.
    let redeemed_at: Option<i64> = fixture
        .raw()
        .query_row("SELECT redeemed_at FROM confirmations", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(redeemed_at, Some(START));
}

#[test]
fn a_confirmation_is_refused_for_any_other_call_and_once_expired() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let bob = fixture.user("bob", UserRole::Member);
    let issued = issue(&fixture.store, &alice.id, "key-1");
    let other_tool = "app__expense_log__expenses__delete";
    let other_arguments = r#"{"record":{"amount":13,"note":"lunch"}}"#;
    // Same value, other spelling: the binding is byte for byte.
    let respelled = r#"{"record": {"amount": 12, "note": "lunch"}}"#;
    let forged = format!("sasha_cf_{}", "A".repeat(43));
    let check = |user_id: &str, tool: &str, arguments: &str, token: &str| {
        let refusal = fixture
            .store
            .redeem_confirmation(&call(user_id, tool, arguments), token)
            .unwrap()
            .unwrap_err();
        assert_eq!(
            refusal,
            ConfirmationRefusal::NotValid,
            "{user_id} {tool} {arguments} {token}"
        );
        assert_eq!(
            refusal.to_string(),
            "the confirmation token is not valid for this call; ask the person again"
        );
    };
    check(&bob.id, TOOL, ARGUMENTS, &issued.token);
    check(&alice.id, other_tool, ARGUMENTS, &issued.token);
    check(&alice.id, TOOL, other_arguments, &issued.token);
    check(&alice.id, TOOL, respelled, &issued.token);
    check(&alice.id, TOOL, ARGUMENTS, &forged);
    check(&alice.id, TOOL, ARGUMENTS, "");
    check(&alice.id, TOOL, ARGUMENTS, &issued.token[1..]);
    check(&alice.id, TOOL, ARGUMENTS, &format!("{}x", issued.token));
    check(&alice.id, TOOL, ARGUMENTS, &"sasha_cf_x".repeat(100));
    // The refusals did not consume it.
    assert!(
        fixture
            .store
            .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &issued.token)
            .unwrap()
            .is_ok()
    );
    // Valid until the last second before expires_at, refused from then on,
    // redeemed or not.
    let unredeemed = issue(&fixture.store, &alice.id, "key-2");
    fixture.advance(CONFIRMATION_TTL_SECONDS);
    check(&alice.id, TOOL, ARGUMENTS, &issued.token);
    check(&alice.id, TOOL, ARGUMENTS, &unredeemed.token);
}

#[test]
fn confirmation_inputs_are_bounded() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let store = &fixture.store;
    let long_tool = "t".repeat(MAX_CONFIRMATION_TOOL_CHARS + 1);
    let padded = format!(
        r#"{{"x":"{}"}}"#,
        "a".repeat(MAX_CONFIRMATION_ARGUMENTS_BYTES - 7)
    );
    assert_eq!(padded.len(), MAX_CONFIRMATION_ARGUMENTS_BYTES + 1);
    let long_key = "k".repeat(MAX_IDEMPOTENCY_KEY_CHARS + 1);
    let check = |tool: &str, arguments: &str, key: &str, field: &str| {
        let refusal = store
            .issue_confirmation(&call(&alice.id, tool, arguments), key)
            .unwrap()
            .unwrap_err();
        let ConfirmationRefusal::InvalidInput { field: refused, .. } = &refusal else {
            panic!("{refusal:?}");
        };
        assert_eq!(*refused, field, "{refusal}");
        assert!(refusal.to_string().starts_with(field), "{refusal}");
    };
    check("", ARGUMENTS, "key", "tool");
    check(&long_tool, ARGUMENTS, "key", "tool");
    check(TOOL, &padded, "key", "arguments_json");
    check(TOOL, "[1, 2]", "key", "arguments_json");
    check(TOOL, "\"text\"", "key", "arguments_json");
    check(TOOL, "{\"a\": 1", "key", "arguments_json");
    check(TOOL, "{} {}", "key", "arguments_json");
    check(TOOL, "", "key", "arguments_json");
    check(TOOL, ARGUMENTS, "", "idempotency_key");
    check(TOOL, ARGUMENTS, &long_key, "idempotency_key");
    // The bounds are inclusive and count characters, not bytes.
    let widest_tool = "é".repeat(MAX_CONFIRMATION_TOOL_CHARS);
    let widest_key = "ü".repeat(MAX_IDEMPOTENCY_KEY_CHARS);
    let largest = format!(
        r#"{{"x":"{}"}}"#,
        "a".repeat(MAX_CONFIRMATION_ARGUMENTS_BYTES - 8)
    );
    assert_eq!(largest.len(), MAX_CONFIRMATION_ARGUMENTS_BYTES);
    let issued = store
        .issue_confirmation(&call(&alice.id, &widest_tool, &largest), &widest_key)
        .unwrap()
        .unwrap();
    assert_eq!(issued.idempotency_key, widest_key);
    // Redemption checks the call the same way.
    let refusal = store
        .redeem_confirmation(&call(&alice.id, TOOL, "[]"), &issued.token)
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(
            refusal,
            ConfirmationRefusal::InvalidInput {
                field: "arguments_json",
                ..
            }
        ),
        "{refusal:?}"
    );
    assert_eq!(confirmation_rows(&fixture), 1);
}

#[test]
fn only_the_sha256_of_a_confirmation_token_is_stored() {
    use sha2::Digest as _;

    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let issued = issue(&fixture.store, &alice.id, "key-1");
    type Row = (
        String,
        String,
        String,
        String,
        String,
        i64,
        i64,
        Option<i64>,
    );
    let row: Row = fixture
        .raw()
        .query_row(
            "SELECT token_sha256, user_id, tool, arguments_sha256, idempotency_key,
                    created_at, expires_at, redeemed_at
             FROM confirmations",
            [],
            |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                    row.get(6)?,
                    row.get(7)?,
                ))
            },
        )
        .unwrap();
    assert_eq!(
        row,
        (
            hex::encode(sha2::Sha256::digest(issued.token.as_bytes())),
            alice.id.clone(),
            TOOL.to_owned(),
            hex::encode(sha2::Sha256::digest(ARGUMENTS.as_bytes())),
            "key-1".to_owned(),
            START,
            START + CONFIRMATION_TTL_SECONDS,
            None,
        )
    );
    let random_part = &issued.token["sasha_cf_".len()..];
    drop(fixture.raw());
    let mut bytes = std::fs::read(fixture.path()).unwrap();
    if let Ok(wal) = std::fs::read(fixture.path().with_extension("sqlite-wal")) {
        bytes.extend(wal);
    }
    assert!(
        !bytes
            .windows(random_part.len())
            .any(|window| window == random_part.as_bytes()),
        "the token's text is in the database file"
    );
}

#[test]
fn a_user_holds_at_most_a_hundred_live_confirmations() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let bob = fixture.user("bob", UserRole::Member);
    let first = issue(&fixture.store, &alice.id, "key-0");
    // Redeemed confirmations still count: they stay redeemable (for replay)
    // until they expire.
    fixture
        .store
        .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &first.token)
        .unwrap()
        .unwrap();
    fixture.advance(1);
    for n in 1..MAX_LIVE_CONFIRMATIONS_PER_USER {
        issue(&fixture.store, &alice.id, &format!("key-{n}"));
    }
    let refusal = fixture
        .store
        .issue_confirmation(&call(&alice.id, TOOL, ARGUMENTS), "key-100")
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(
            refusal,
            ConfirmationRefusal::TooManyPending { limit: 100, .. }
        ),
        "{refusal:?}"
    );
    assert!(
        refusal
            .to_string()
            .starts_with("too many pending confirmations"),
        "{refusal}"
    );
    assert_eq!(confirmation_rows(&fixture), MAX_LIVE_CONFIRMATIONS_PER_USER);
    // The cap is per user.
    issue(&fixture.store, &bob.id, "key-bob");
    // Once the oldest expires, there is room for exactly one more.
    fixture.advance(CONFIRMATION_TTL_SECONDS - 1);
    issue(&fixture.store, &alice.id, "key-100");
    assert!(
        fixture
            .store
            .issue_confirmation(&call(&alice.id, TOOL, ARGUMENTS), "key-101")
            .unwrap()
            .is_err()
    );
}

#[test]
fn issuing_deletes_expired_confirmations() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let bob = fixture.user("bob", UserRole::Member);
    let old_alice = issue(&fixture.store, &alice.id, "old-alice");
    issue(&fixture.store, &bob.id, "old-bob");
    fixture.advance(CONFIRMATION_TTL_SECONDS / 2);
    issue(&fixture.store, &bob.id, "newer-bob");
    assert_eq!(confirmation_rows(&fixture), 3);
    fixture.advance(CONFIRMATION_TTL_SECONDS / 2);
    // Alice's issue clears every user's expired rows, not only hers.
    let fresh = issue(&fixture.store, &alice.id, "fresh");
    let keys: Vec<String> = fixture
        .raw()
        .prepare("SELECT idempotency_key FROM confirmations ORDER BY created_at, idempotency_key")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(keys, ["newer-bob", "fresh"]);
    assert_eq!(
        fixture
            .store
            .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &old_alice.token)
            .unwrap(),
        Err(ConfirmationRefusal::NotValid)
    );
    assert!(
        fixture
            .store
            .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &fresh.token)
            .unwrap()
            .is_ok()
    );
}

#[test]
fn confirmations_need_an_existing_user_and_go_with_it() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    assert_eq!(
        fixture
            .store
            .issue_confirmation(&call("no-such-user", TOOL, ARGUMENTS), "key")
            .unwrap(),
        Err(ConfirmationRefusal::UnknownUser)
    );
    let issued = issue(&fixture.store, &alice.id, "key");
    let raw = fixture.raw();
    raw.pragma_update(None, "foreign_keys", "ON").unwrap();
    raw.execute("DELETE FROM users WHERE id = ?1", [&alice.id])
        .unwrap();
    assert_eq!(confirmation_rows(&fixture), 0);
    assert_eq!(
        fixture
            .store
            .redeem_confirmation(&call(&alice.id, TOOL, ARGUMENTS), &issued.token)
            .unwrap(),
        Err(ConfirmationRefusal::NotValid)
    );
}

// --- suggestions ---------------------------------------------------------------

fn suggestion(summary: &str) -> Suggestion {
    Suggestion {
        kind: SuggestionKind::Friction,
        severity: SuggestionSeverity::Medium,
        summary: summary.to_owned(),
        detail: None,
        metadata: SuggestionMetadata::default(),
    }
}

fn record(store: &Store, user_id: &str, summary: &str) -> String {
    store
        .record_suggestion(user_id, &suggestion(summary))
        .unwrap()
        .unwrap()
}

fn summaries(store: &Store, limit: u32) -> Vec<String> {
    store
        .suggestions(limit)
        .unwrap()
        .into_iter()
        .map(|suggestion| suggestion.summary)
        .collect()
}

#[test]
fn a_suggestion_is_recorded_and_read_back_whole() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let full = Suggestion {
        kind: SuggestionKind::Bug,
        severity: SuggestionSeverity::High,
        summary: "Creating an expense answered a conflict without naming the field.".into(),
        detail: Some("First line.\n\tSecond line.".into()),
        metadata: SuggestionMetadata {
            app_id: Some("expense-log".into()),
            tool: Some("app__expense_log__expenses__create".into()),
            error_code: Some("APP_CONFLICT".into()),
            diagnostic_id: Some("0193c5e2-7a4b-7c3d-9e8f-1a2b3c4d5e6f".into()),
        },
    };
    let id = fixture
        .store
        .record_suggestion(&alice.id, &full)
        .unwrap()
        .unwrap();
    let parsed = uuid::Uuid::parse_str(&id).unwrap();
    assert_eq!(parsed.get_version_num(), 7, "{id}");
    assert_eq!(id, parsed.hyphenated().to_string());
    let bare = record(
        &fixture.store,
        &alice.id,
        "A bare suggestion, nothing else.",
    );

    // Another process (the admin CLI) reads what core recorded.
    let stored = fixture.reopen().suggestions(10).unwrap();
    assert_eq!(
        stored,
        [
            StoredSuggestion {
                id: bare,
                created_at: START,
                user_id: alice.id.clone(),
                username: "alice".into(),
                kind: SuggestionKind::Friction,
                severity: SuggestionSeverity::Medium,
                summary: "A bare suggestion, nothing else.".into(),
                detail: None,
                metadata: SuggestionMetadata::default(),
            },
            StoredSuggestion {
                id: id.clone(),
                created_at: START,
                user_id: alice.id.clone(),
                username: "alice".into(),
                kind: full.kind,
                severity: full.severity,
                summary: full.summary.clone(),
                detail: full.detail.clone(),
                metadata: full.metadata.clone(),
            },
        ]
    );

    // Stored as the table says: wire spellings, metadata as camelCase JSON,
    // and SQL NULL for what was not given.
    let raw = fixture.raw();
    let row: (String, String, String, Option<String>) = raw
        .query_row(
            "SELECT user_id, kind, severity, metadata_json FROM suggestions WHERE id = ?1",
            [&id],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .unwrap();
    assert_eq!(row.0, alice.id);
    assert_eq!((row.1.as_str(), row.2.as_str()), ("bug", "high"));
    let metadata: serde_json::Value = serde_json::from_str(&row.3.unwrap()).unwrap();
    assert_eq!(
        metadata,
        serde_json::json!({
            "appId": "expense-log",
            "tool": "app__expense_log__expenses__create",
            "errorCode": "APP_CONFLICT",
            "diagnosticId": "0193c5e2-7a4b-7c3d-9e8f-1a2b3c4d5e6f"
        })
    );
    let nulls: (Option<String>, Option<String>) = raw
        .query_row(
            "SELECT detail, metadata_json FROM suggestions WHERE summary LIKE 'A bare%'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(nulls, (None, None));

    // As admins read it: camelCase, absent detail and metadata left out.
    let lines: Vec<serde_json::Value> = stored
        .iter()
        .map(|suggestion| serde_json::to_value(suggestion).unwrap())
        .collect();
    assert_eq!(
        lines[0],
        serde_json::json!({
            "id": stored[0].id,
            "createdAt": START,
            "userId": alice.id,
            "username": "alice",
            "kind": "friction",
            "severity": "medium",
            "summary": "A bare suggestion, nothing else."
        })
    );
    assert_eq!(lines[1]["metadata"], metadata);
    assert_eq!(lines[1]["detail"], "First line.\n\tSecond line.");
}

#[test]
fn suggestions_are_listed_newest_first_up_to_the_limit() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let bob = fixture.user("bob", UserRole::Staff);
    record(&fixture.store, &alice.id, "first, from alice");
    fixture.advance(10);
    record(&fixture.store, &bob.id, "second, from bob");
    // Two in the same second keep their order (ids are time-ordered).
    record(&fixture.store, &alice.id, "third, same second");
    fixture.advance(1);
    record(&fixture.store, &bob.id, "fourth, from bob");
    assert_eq!(
        summaries(&fixture.store, 100),
        [
            "fourth, from bob",
            "third, same second",
            "second, from bob",
            "first, from alice"
        ]
    );
    assert_eq!(
        summaries(&fixture.store, 2),
        ["fourth, from bob", "third, same second"]
    );
    assert!(summaries(&fixture.store, 0).is_empty());
    let usernames: Vec<String> = fixture
        .store
        .suggestions(10)
        .unwrap()
        .into_iter()
        .map(|suggestion| suggestion.username)
        .collect();
    assert_eq!(usernames, ["bob", "alice", "bob", "alice"]);
}

#[test]
fn a_user_records_at_most_fifty_suggestions_in_any_24_hours() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let bob = fixture.user("bob", UserRole::Member);
    // 20 now, 30 an hour later: the cap is reached.
    for n in 0..20 {
        record(&fixture.store, &alice.id, &format!("early suggestion {n}"));
    }
    fixture.advance(3600);
    for n in 0..30 {
        record(&fixture.store, &alice.id, &format!("later suggestion {n}"));
    }
    let too_many = SuggestionRefusal::TooMany {
        limit: MAX_SUGGESTIONS_PER_DAY,
        window_hours: 24,
    };
    assert_eq!(
        fixture
            .store
            .record_suggestion(&alice.id, &suggestion("one too many"))
            .unwrap(),
        Err(too_many.clone())
    );
    assert_eq!(
        too_many.to_string(),
        "too many suggestions: at most 50 per user in any 24 hours"
    );
    // Another handle on the file (another process) counts the same rows.
    assert_eq!(
        fixture
            .reopen()
            .record_suggestion(&alice.id, &suggestion("one too many"))
            .unwrap(),
        Err(too_many.clone())
    );
    // Another user is not affected.
    record(&fixture.store, &bob.id, "bob is not limited by alice");

    // The window rolls: one second before the first 20 are 24 hours old,
    // still refused; at exactly 24 hours they no longer count, so 20 more fit.
    fixture.advance(SUGGESTION_WINDOW_SECONDS - 3600 - 1);
    assert_eq!(
        fixture
            .store
            .record_suggestion(&alice.id, &suggestion("still too many"))
            .unwrap(),
        Err(too_many.clone())
    );
    fixture.advance(1);
    for n in 0..20 {
        record(&fixture.store, &alice.id, &format!("next day {n}"));
    }
    assert_eq!(
        fixture
            .store
            .record_suggestion(&alice.id, &suggestion("again too many"))
            .unwrap(),
        Err(too_many)
    );
    let alice_rows: i64 = fixture
        .raw()
        .query_row(
            "SELECT count(*) FROM suggestions WHERE user_id = ?1",
            [&alice.id],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(alice_rows, 70, "refused suggestions are not stored");
}

#[test]
fn racing_suggestions_never_exceed_the_cap() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    for n in 0..40 {
        record(&fixture.store, &alice.id, &format!("suggestion {n}"));
    }
    // Four processes' handles race for the last ten places.
    let handles: Vec<Store> = (0..4).map(|_| fixture.reopen()).collect();
    let recorded: usize = std::thread::scope(|scope| {
        let threads: Vec<_> = handles
            .iter()
            .map(|store| {
                let user_id = alice.id.as_str();
                scope.spawn(move || {
                    (0..10)
                        .filter(|n| {
                            store
                                .record_suggestion(user_id, &suggestion(&format!("race {n}")))
                                .unwrap()
                                .is_ok()
                        })
                        .count()
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|thread| thread.join().unwrap())
            .sum()
    });
    assert_eq!(recorded, 10);
    assert_eq!(fixture.store.suggestions(100).unwrap().len(), 50);
}

#[test]
fn suggestions_need_an_existing_user_and_go_with_it() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    assert_eq!(
        fixture
            .store
            .record_suggestion("no-such-user", &suggestion("from nobody at all"))
            .unwrap(),
        Err(SuggestionRefusal::UnknownUser)
    );
    record(&fixture.store, &alice.id, "from alice, who then leaves");
    let raw = fixture.raw();
    raw.pragma_update(None, "foreign_keys", "ON").unwrap();
    raw.execute("DELETE FROM users WHERE id = ?1", [&alice.id])
        .unwrap();
    assert!(fixture.store.suggestions(10).unwrap().is_empty());
}

// --- OAuth -------------------------------------------------------------------

const RESOURCE: &str = "https://studio.example.com/mcp";
const REDIRECT: &str = "http://127.0.0.1:4567/callback";
/// RFC 7636 appendix B's verifier and its S256 challenge.
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

fn oauth_client(fixture: &Fixture) -> OAuthClient {
    fixture
        .store
        .oauth_register_client(
            "Test Client",
            &[REDIRECT.to_owned()],
            ClientAuthMethod::None,
        )
        .unwrap()
        .unwrap()
        .client
}

fn consent(fixture: &Fixture, client: &OAuthClient, user: &User, granted: &[Scope]) -> String {
    fixture
        .store
        .oauth_consent(&Consent {
            client_id: &client.client_id,
            user_id: &user.id,
            scopes: &scopes(granted),
            resource: RESOURCE,
            redirect_uri: REDIRECT,
            code_challenge: CHALLENGE,
        })
        .unwrap()
}

fn exchange(
    fixture: &Fixture,
    client: &OAuthClient,
    code: &str,
    verifier: &str,
) -> Result<IssuedTokens, OAuthRefusal> {
    fixture
        .store
        .oauth_exchange_code(&CodeExchange {
            client_id: &client.client_id,
            code,
            redirect_uri: REDIRECT,
            code_verifier: verifier,
            resource: Some(RESOURCE),
        })
        .unwrap()
}

fn refresh(
    fixture: &Fixture,
    client: &OAuthClient,
    token: &str,
    narrowed: Option<&[Scope]>,
) -> Result<IssuedTokens, OAuthRefusal> {
    let narrowed = narrowed.map(scopes);
    fixture
        .store
        .oauth_refresh(&client.client_id, token, narrowed.as_ref(), None)
        .unwrap()
}

fn no_connections(fixture: &Fixture, user: &User) -> bool {
    fixture
        .store
        .oauth_connections(&user.id)
        .unwrap()
        .is_empty()
}

fn live(fixture: &Fixture, access_token: &str) -> bool {
    fixture.store.token(access_token).unwrap().is_some()
}

#[test]
fn pkce_checks_the_rfc_7636_example() {
    assert!(pkce_matches(VERIFIER, CHALLENGE));
    assert!(!pkce_matches(&format!("{VERIFIER}x"), CHALLENGE));
    assert!(!pkce_matches("short", CHALLENGE));
    assert!(valid_code_challenge(CHALLENGE));
    assert!(!valid_code_challenge("plain-challenge"));
}

#[test]
fn a_code_becomes_audience_bound_tokens_that_rotate() {
    let fixture = Fixture::new();
    let admin = fixture.user("ada", UserRole::Admin);
    let client = oauth_client(&fixture);
    let code = consent(
        &fixture,
        &client,
        &admin,
        &[Scope::AppsInvoke, Scope::AppsWrite],
    );
    let first = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    assert_eq!(first.scopes, scopes(&[Scope::AppsInvoke, Scope::AppsWrite]));
    assert_eq!(first.expires_in, OAUTH_ACCESS_TTL_SECONDS);
    assert!(first.refresh_token.starts_with(REFRESH_TOKEN_PREFIX));
    let principal = fixture.store.token(&first.access_token).unwrap().unwrap();
    assert_eq!(principal.kind, PrincipalKind::Access);
    assert_eq!(principal.audience.as_deref(), Some(RESOURCE));
    assert_eq!(principal.expires_at, START + OAUTH_ACCESS_TTL_SECONDS);
    // Nothing is stored in the clear.
    let stored: i64 = fixture
        .raw()
        .query_row(
            "SELECT count(*) FROM oauth_refresh_tokens WHERE secret_sha256 = ?1",
            [&first.refresh_token],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(stored, 0);

    // A refresh may narrow, rotates the refresh token, and keeps the old
    // access token until it expires.
    let second = refresh(
        &fixture,
        &client,
        &first.refresh_token,
        Some(&[Scope::AppsInvoke]),
    )
    .unwrap();
    assert_eq!(second.scopes, scopes(&[Scope::AppsInvoke]));
    assert_ne!(second.refresh_token, first.refresh_token);
    assert_ne!(second.access_token, first.access_token);
    assert!(live(&fixture, &second.access_token));
    // It never widens, not even back to what the connection once had.
    assert!(matches!(
        refresh(
            &fixture,
            &client,
            &second.refresh_token,
            Some(&[Scope::AppsInvoke, Scope::AppsWrite])
        ),
        Err(OAuthRefusal::InvalidScope(_))
    ));
    // The access token expires on time.
    fixture.advance(OAUTH_ACCESS_TTL_SECONDS);
    assert!(!live(&fixture, &second.access_token));
    let third = refresh(&fixture, &client, &second.refresh_token, None).unwrap();
    assert_eq!(third.scopes, scopes(&[Scope::AppsInvoke]));
    assert!(live(&fixture, &third.access_token));
    // Another resource is refused without spending the token.
    assert_eq!(
        fixture
            .store
            .oauth_refresh(
                &client.client_id,
                &third.refresh_token,
                None,
                Some("https://other.example/mcp")
            )
            .unwrap()
            .unwrap_err(),
        OAuthRefusal::InvalidTarget
    );
    assert!(refresh(&fixture, &client, &third.refresh_token, None).is_ok());
}

#[test]
fn a_reused_refresh_token_revokes_the_whole_connection() {
    let fixture = Fixture::new();
    let staff = fixture.user("sam", UserRole::Staff);
    let client = oauth_client(&fixture);
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let first = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    let second = refresh(&fixture, &client, &first.refresh_token, None).unwrap();
    assert!(live(&fixture, &first.access_token) && live(&fixture, &second.access_token));
    // The spent token comes back (an attacker replaying a stolen copy, or the
    // legitimate client after the attacker used it first).
    assert!(matches!(
        refresh(&fixture, &client, &first.refresh_token, None),
        Err(OAuthRefusal::InvalidGrant(_))
    ));
    assert!(!live(&fixture, &first.access_token));
    assert!(!live(&fixture, &second.access_token));
    assert!(matches!(
        refresh(&fixture, &client, &second.refresh_token, None),
        Err(OAuthRefusal::InvalidGrant(_))
    ));
    assert!(no_connections(&fixture, &staff));
    let audit = fixture.store.audit_entries(None).unwrap();
    let revoked = audit
        .iter()
        .find(|entry| entry.action == oauth_action::REVOKED)
        .unwrap();
    assert_eq!(revoked.subject.as_deref(), Some(client.client_id.as_str()));
    assert_eq!(
        revoked.after.as_deref(),
        Some("a spent refresh token was presented again")
    );
}

#[test]
fn a_code_works_once_and_only_with_its_own_proof() {
    let fixture = Fixture::new();
    let staff = fixture.user("sam", UserRole::Staff);
    let client = oauth_client(&fixture);
    let other = oauth_client(&fixture);

    // Reuse: the tokens of the first exchange die too.
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let tokens = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    assert!(matches!(
        exchange(&fixture, &client, &code, VERIFIER),
        Err(OAuthRefusal::InvalidGrant(_))
    ));
    assert!(!live(&fixture, &tokens.access_token));
    assert!(refresh(&fixture, &client, &tokens.refresh_token, None).is_err());

    // A wrong verifier spends the code: the right one no longer helps.
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let wrong = "x".repeat(43);
    assert!(matches!(
        exchange(&fixture, &client, &code, &wrong),
        Err(OAuthRefusal::InvalidGrant(_))
    ));
    assert!(exchange(&fixture, &client, &code, VERIFIER).is_err());

    // Another client, another redirect, another resource, or too late.
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    assert!(exchange(&fixture, &other, &code, VERIFIER).is_err());
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let redirected = fixture
        .store
        .oauth_exchange_code(&CodeExchange {
            client_id: &client.client_id,
            code: &code,
            redirect_uri: "http://127.0.0.1:4568/callback",
            code_verifier: VERIFIER,
            resource: None,
        })
        .unwrap();
    assert!(matches!(redirected, Err(OAuthRefusal::InvalidGrant(_))));
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let targeted = fixture
        .store
        .oauth_exchange_code(&CodeExchange {
            client_id: &client.client_id,
            code: &code,
            redirect_uri: REDIRECT,
            code_verifier: VERIFIER,
            resource: Some("https://other.example/mcp"),
        })
        .unwrap();
    assert_eq!(targeted.unwrap_err(), OAuthRefusal::InvalidTarget);
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    fixture.advance(OAUTH_CODE_TTL_SECONDS);
    assert!(exchange(&fixture, &client, &code, VERIFIER).is_err());
    assert!(no_connections(&fixture, &staff));
}

#[test]
fn consent_follows_the_role_and_demotion_narrows_new_tokens() {
    let fixture = Fixture::new();
    let member = fixture.user("mia", UserRole::Member);
    let staff = fixture.user("sam", UserRole::Staff);
    let client = oauth_client(&fixture);
    let refused = fixture.store.oauth_consent(&Consent {
        client_id: &client.client_id,
        user_id: &member.id,
        scopes: &scopes(&[Scope::AppsInvoke, Scope::AppsWrite]),
        resource: RESOURCE,
        redirect_uri: REDIRECT,
        code_challenge: CHALLENGE,
    });
    assert!(matches!(
        refused,
        Err(StoreError::ScopeNotAllowed {
            scope: Scope::AppsWrite,
            ..
        })
    ));

    let code = consent(
        &fixture,
        &client,
        &staff,
        &[Scope::AppsInvoke, Scope::AppsWrite],
    );
    let tokens = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    fixture
        .raw()
        .execute(
            "UPDATE users SET role = 'member' WHERE id = ?1",
            [&staff.id],
        )
        .unwrap();
    let principal = fixture.store.token(&tokens.access_token).unwrap().unwrap();
    assert_eq!(principal.scopes, scopes(&[Scope::AppsInvoke]));
    let renewed = refresh(&fixture, &client, &tokens.refresh_token, None).unwrap();
    assert_eq!(renewed.scopes, scopes(&[Scope::AppsInvoke]));
}

#[test]
fn people_see_and_revoke_only_their_own_connections() {
    let fixture = Fixture::new();
    let staff = fixture.user("sam", UserRole::Staff);
    let member = fixture.user("mia", UserRole::Member);
    let client = oauth_client(&fixture);
    // A consent whose code was never exchanged is not a connection.
    consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    assert!(no_connections(&fixture, &staff));
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let tokens = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    let listed = fixture.store.oauth_connections(&staff.id).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].client_name, "Test Client");
    assert_eq!(listed[0].scopes, ["apps:invoke"]);
    assert_eq!(listed[0].redirect_uri, REDIRECT);
    assert!(
        !fixture
            .store
            .oauth_revoke_connection(&member.id, &listed[0].id, &member.id)
            .unwrap()
    );
    assert!(live(&fixture, &tokens.access_token));
    assert!(
        fixture
            .store
            .oauth_revoke_connection(&staff.id, &listed[0].id, &staff.id)
            .unwrap()
    );
    assert!(
        !fixture
            .store
            .oauth_revoke_connection(&staff.id, &listed[0].id, &staff.id)
            .unwrap()
    );
    assert!(!live(&fixture, &tokens.access_token));
    assert!(refresh(&fixture, &client, &tokens.refresh_token, None).is_err());
}

#[test]
fn clients_revoke_their_own_tokens_only() {
    let fixture = Fixture::new();
    let staff = fixture.user("sam", UserRole::Staff);
    let client = oauth_client(&fixture);
    let stranger = oauth_client(&fixture);
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let tokens = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    let minted = fixture
        .store
        .mint_token(
            &staff.id,
            TokenKind::Access,
            &scopes(&[Scope::AppsInvoke]),
            None,
        )
        .unwrap();
    // Another client's revocation, and a token minted by the operator, are ignored.
    fixture
        .store
        .oauth_revoke_token(&stranger.client_id, &tokens.refresh_token)
        .unwrap();
    fixture
        .store
        .oauth_revoke_token(&client.client_id, &minted)
        .unwrap();
    assert!(live(&fixture, &tokens.access_token) && live(&fixture, &minted));
    // An access token alone.
    fixture
        .store
        .oauth_revoke_token(&client.client_id, &tokens.access_token)
        .unwrap();
    assert!(!live(&fixture, &tokens.access_token));
    let renewed = refresh(&fixture, &client, &tokens.refresh_token, None).unwrap();
    // A refresh token: the whole connection.
    fixture
        .store
        .oauth_revoke_token(&client.client_id, &renewed.refresh_token)
        .unwrap();
    assert!(!live(&fixture, &renewed.access_token));
    assert!(no_connections(&fixture, &staff));
}

#[test]
fn registration_cannot_fill_the_database() {
    let fixture = Fixture::new();
    let staff = fixture.user("sam", UserRole::Staff);
    let uris = [REDIRECT.to_owned()];
    let mut first = None;
    for _ in 0..MAX_UNCONSENTED_CLIENTS {
        let client = fixture
            .store
            .oauth_register_client("Flood", &uris, ClientAuthMethod::None)
            .unwrap()
            .unwrap();
        first.get_or_insert(client.client);
    }
    let refused = fixture
        .store
        .oauth_register_client("One more", &uris, ClientAuthMethod::None)
        .unwrap();
    assert_eq!(refused.unwrap_err(), OAuthRefusal::TooManyClients);
    // A consented client no longer counts against the limit and is kept.
    let kept = first.unwrap();
    consent(&fixture, &kept, &staff, &[Scope::AppsInvoke]);
    assert!(
        fixture
            .store
            .oauth_register_client("Now fits", &uris, ClientAuthMethod::None)
            .unwrap()
            .is_ok()
    );
    // A day later the unconsented ones are gone.
    fixture.advance(UNCONSENTED_CLIENT_TTL_SECONDS);
    assert!(
        fixture
            .store
            .oauth_register_client("Later", &uris, ClientAuthMethod::None)
            .unwrap()
            .is_ok()
    );
    let count: i64 = fixture
        .raw()
        .query_row("SELECT count(*) FROM oauth_clients", [], |row| row.get(0))
        .unwrap();
    assert_eq!(count, 2);
    assert!(
        fixture
            .store
            .oauth_client(&kept.client_id)
            .unwrap()
            .is_some()
    );
}

#[test]
fn confidential_clients_get_a_secret_stored_only_as_a_hash() {
    let fixture = Fixture::new();
    let registered = fixture
        .store
        .oauth_register_client(
            "Server",
            &["https://app.example.com/cb".to_owned()],
            ClientAuthMethod::SecretBasic,
        )
        .unwrap()
        .unwrap();
    let secret = registered.client_secret.unwrap();
    assert!(secret.starts_with(CLIENT_SECRET_PREFIX));
    let id = &registered.client.client_id;
    assert!(
        fixture
            .store
            .oauth_client_secret_matches(id, &secret)
            .unwrap()
    );
    assert!(
        !fixture
            .store
            .oauth_client_secret_matches(id, "sasha_cs_wrong")
            .unwrap()
    );
    let public = oauth_client(&fixture);
    assert!(
        !fixture
            .store
            .oauth_client_secret_matches(&public.client_id, "")
            .unwrap()
    );
    assert_eq!(
        fixture.store.oauth_client(id).unwrap().unwrap().auth_method,
        ClientAuthMethod::SecretBasic
    );
}

#[test]
fn a_refresh_token_expires_and_belongs_to_its_client() {
    let fixture = Fixture::new();
    let staff = fixture.user("sam", UserRole::Staff);
    let client = oauth_client(&fixture);
    let thief = oauth_client(&fixture);

    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let tokens = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    fixture.advance(OAUTH_REFRESH_TTL_SECONDS);
    assert!(matches!(
        refresh(&fixture, &client, &tokens.refresh_token, None),
        Err(OAuthRefusal::InvalidGrant(_))
    ));

    // Another client presenting it: a stolen token, so the connection ends.
    let code = consent(&fixture, &client, &staff, &[Scope::AppsInvoke]);
    let tokens = exchange(&fixture, &client, &code, VERIFIER).unwrap();
    assert!(matches!(
        refresh(&fixture, &thief, &tokens.refresh_token, None),
        Err(OAuthRefusal::InvalidGrant(_))
    ));
    assert!(!live(&fixture, &tokens.access_token));
    assert!(refresh(&fixture, &client, &tokens.refresh_token, None).is_err());
    // Not a refresh token at all.
    assert!(refresh(&fixture, &client, &tokens.access_token, None).is_err());
}
