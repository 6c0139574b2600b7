//! The store against real database files in temporary folders, with a clock
//! the tests move by hand.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Barrier};

use super::*;

const PASSWORD: &str = "correct horse battery";
pub(crate) const START: i64 = 1_800_000_000;

/// Which backend the fixtures of the running test open: the conformance
/// suite runs each test once per backend ([`on_both!`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

thread_local! {
    static BACKEND: std::cell::Cell<Backend> = const { std::cell::Cell::new(Backend::Sqlite) };
}

/// Runs `body` with fixtures on `backend`.
pub(crate) fn with_backend(backend: Backend, body: fn()) {
    BACKEND.with(|cell| cell.set(backend));
    body();
}

/// One store test run on SQLite and on PostgreSQL: `name::sqlite` and
/// `name::postgres`, the same body. Any test module of the crate uses it
/// (`use crate::tests::on_both;`) with [`Fixture`].
macro_rules! on_both {
    ($(#[$meta:meta])* fn $name:ident() $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports, reason = "each body uses its own part of the parent's names")]
            use super::*;

            fn body() $body

            #[test]
            fn sqlite() {
                $crate::tests::with_backend($crate::tests::Backend::Sqlite, body);
            }

            #[test]
            fn postgres() {
                $crate::tests::with_backend($crate::tests::Backend::Postgres, body);
            }
        }
    };
}
pub(crate) use on_both;

/// Where a fixture's database is.
enum Place {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

/// A temporary database (a file in a temporary folder, or a fresh database
/// on the shared test PostgreSQL) with a manual clock.
pub(crate) struct Fixture {
    place: Place,
    clock: Arc<AtomicI64>,
    pub(crate) store: Store,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let clock = Arc::new(AtomicI64::new(START));
        let place = match BACKEND.with(std::cell::Cell::get) {
            Backend::Sqlite => Place::Sqlite(tempfile::tempdir().unwrap()),
            Backend::Postgres => Place::Postgres(sasha_testkit::postgres_database()),
        };
        let store = open_place(&place, &clock).unwrap();
        Fixture {
            place,
            clock,
            store,
        }
    }

    /// The database file (tests of SQLite's own behaviour).
    fn path(&self) -> PathBuf {
        match &self.place {
            Place::Sqlite(dir) => dir.path().join("state/core.sqlite"),
            Place::Postgres(_) => panic!("a SQLite-only test ran on PostgreSQL"),
        }
    }

    /// Another handle on the same database, as a second process would have.
    pub(crate) fn reopen(&self) -> Store {
        self.try_reopen().unwrap()
    }

    /// [`Fixture::reopen`], which may fail.
    fn try_reopen(&self) -> Result<Store, StoreError> {
        open_place(&self.place, &self.clock)
    }

    pub(crate) fn advance(&self, seconds: i64) {
        self.clock.fetch_add(seconds, Ordering::SeqCst);
    }

    pub(crate) fn user(&self, username: &str, role: UserRole) -> User {
        self.store.create_user(username, role, PASSWORD).unwrap()
    }

    /// A connection of the test's own, for reading what is really stored and
    /// for trying what the API does not offer.
    pub(crate) fn raw(&self) -> crate::db::Conn<'static> {
        match &self.place {
            Place::Sqlite(_) => crate::db::Conn::sqlite_owned(self.raw_sqlite()),
            Place::Postgres(url) => {
                let (pool, _) =
                    crate::db::connect_postgres(url, 1, None, crate::BUSY_TIMEOUT).unwrap();
                crate::db::Conn::postgres(&pool).unwrap()
            }
        }
    }

    /// The SQLite file's own connection (tests of SQLite's locking).
    fn raw_sqlite(&self) -> rusqlite::Connection {
        let connection = rusqlite::Connection::open(self.path()).unwrap();
        connection.busy_timeout(Duration::from_secs(5)).unwrap();
        connection
            .pragma_update(None, "foreign_keys", "ON")
            .unwrap();
        connection
    }
}

fn open_place(place: &Place, clock: &Arc<AtomicI64>) -> Result<Store, StoreError> {
    let clock = clock.clone();
    let clock: Clock = Arc::new(move || clock.load(Ordering::SeqCst));
    match place {
        Place::Sqlite(dir) => Store::open_with_clock(&dir.path().join("state/core.sqlite"), clock),
        Place::Postgres(url) => Store::connect(url, 4, None, clock),
    }
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

/// How many handles race for one thing in the race tests.
pub(crate) const RACERS: usize = 8;

/// `count` handles on the fixture's database, as that many studio-core
/// processes or replicas hold: on SQLite each its own connection to the
/// file, on PostgreSQL each its own pool.
pub(crate) fn handles(fixture: &Fixture, count: usize) -> Vec<Store> {
    (0..count).map(|_| fixture.reopen()).collect()
}

/// Runs `step` on every handle at once, each on its own thread, released
/// together by a barrier so their transactions overlap; the answers in the
/// handles' order. Only the store's own serialisation of writers (SQLite's
/// IMMEDIATE lock, PostgreSQL's writers' lock) orders them.
pub(crate) fn race<T: Send>(handles: &[Store], step: impl Fn(usize, &Store) -> T + Sync) -> Vec<T> {
    let barrier = Barrier::new(handles.len());
    std::thread::scope(|scope| {
        let threads: Vec<_> = handles
            .iter()
            .enumerate()
            .map(|(n, store)| {
                let (barrier, step) = (&barrier, &step);
                scope.spawn(move || {
                    barrier.wait();
                    step(n, store)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|thread| thread.join().unwrap())
            .collect()
    })
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
    assert_eq!("apps:author".parse::<Scope>().unwrap(), Scope::AppsAuthor);
    let error = "apps:admin".parse::<Scope>().unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"unknown scope "apps:admin"; expected chat:use, apps:invoke, apps:write or apps:author"#
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
    let all = scopes(&[
        Scope::ChatUse,
        Scope::AppsInvoke,
        Scope::AppsWrite,
        Scope::AppsAuthor,
    ]);
    assert_eq!(UserRole::Admin.session_scopes(), all);
    assert_eq!(UserRole::Staff.session_scopes(), all);
    // Every role authors member apps; only admin and staff write the catalogue.
    assert_eq!(
        UserRole::Member.session_scopes(),
        scopes(&[Scope::ChatUse, Scope::AppsInvoke, Scope::AppsAuthor])
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
        .query_map((), |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, (1..=schema::latest_version()).collect::<Vec<_>>());
    let mode: String = raw
        .query_row("PRAGMA journal_mode", (), |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

on_both! {
fn a_database_from_a_newer_build_is_refused() {
    let fixture = Fixture::new();
    fixture
        .raw()
        .execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)",
            (),
        )
        .unwrap();
    let error = fixture.try_reopen().err().unwrap();
    assert!(
        error.to_string().contains("newer than this build"),
        "{error}"
    );
}
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

on_both! {
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
}

#[test]
fn commits_are_counted_for_writes_and_not_for_reads() {
    let fixture = Fixture::new();
    let before = fixture.store.commits();
    fixture.store.users().unwrap();
    fixture.store.check().unwrap();
    assert_eq!(fixture.store.commits(), before, "reads commit nothing");
    fixture.user("alice", UserRole::Staff);
    assert!(fixture.store.commits() > before);
    // A handle reopened on a replaced file keeps counting.
    let copy = fixture.path().with_file_name("copy.sqlite");
    std::fs::copy(fixture.path(), &copy).unwrap();
    std::fs::rename(&copy, fixture.path()).unwrap();
    let counted = fixture.store.commits();
    fixture.user("bob", UserRole::Member);
    assert!(fixture.store.commits() > counted);
}

// --- users and passwords ---------------------------------------------------

on_both! {
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
}

on_both! {
fn passwords_are_stored_as_argon2id_only() {
    let fixture = Fixture::new();
    fixture.user("alice", UserRole::Member);
    let stored: String = fixture
        .raw()
        .query_row(
            "SELECT password_hash FROM users WHERE username = 'alice'", (),
            |row| row.get(0),
        )
        .unwrap();
    assert!(stored.starts_with("$argon2id$v=19$"), "{stored}");
    assert!(!stored.contains(PASSWORD));
}
}

on_both! {
fn usernames_and_passwords_are_checked() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    for bad in [
        "ab",
        "1abc",
        "al ice",
        "alice#example",
        "alice/ops",
        "ålice",
        "-alice",
        "@alice.example",
        &"a".repeat(MAX_USERNAME_CHARS + 1),
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
    for good in [
        "abc",
        "a.b_c-9",
        "Alice",
        "ada.l@example.com",
        "sam+ops@example.org",
        &"a".repeat(MAX_USERNAME_CHARS),
    ] {
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
}

on_both! {
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
}

// --- sessions ----------------------------------------------------------------

on_both! {
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
        scopes(&[Scope::ChatUse, Scope::AppsInvoke, Scope::AppsAuthor])
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
        .query_row("SELECT count(*) FROM sessions", (), |row| row.get(0))
        .unwrap();
    assert_eq!(rows, 1);
}
}

on_both! {
fn sessions_are_stored_hashed_and_end_on_sign_out() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let alice = fixture.user("alice", UserRole::Member);
    let secret = store.create_session(&alice.id).unwrap();
    let stored: Vec<String> = fixture
        .raw()
        .prepare("SELECT secret_sha256 FROM sessions")
        .unwrap()
        .query_map((), |row| row.get(0))
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
}

// --- tokens ------------------------------------------------------------------

on_both! {
fn write_consent_goes_to_live_access_tokens_for_known_apps_only() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    let sam = fixture.user("sam", UserRole::Staff);
    register(store, "expense-log", "r1");
    register(store, "hello", "r1");
    let invoke = scopes(&[Scope::AppsInvoke]);
    let script = store
        .mint_token(&sam.id, TokenKind::Access, &invoke, None)
        .unwrap();
    assert!(!store.write_consent(&script, "expense-log").unwrap());
    store
        .consent_writes(&script, "expense-log", "operator")
        .unwrap();
    // Twice is once.
    store
        .consent_writes(&script, "expense-log", "operator")
        .unwrap();
    assert!(store.write_consent(&script, "expense-log").unwrap());
    assert!(!store.write_consent(&script, "hello").unwrap(), "per app");
    let other = store
        .mint_token(&sam.id, TokenKind::Access, &invoke, None)
        .unwrap();
    assert!(
        !store.write_consent(&other, "expense-log").unwrap(),
        "per token"
    );

    assert!(matches!(
        store.consent_writes(&script, "never-seen", "operator"),
        Err(StoreError::UnknownApp)
    ));
    let chat = store
        .mint_token(
            &sam.id,
            TokenKind::ChatSession,
            &scopes(&[Scope::ChatUse, Scope::AppsInvoke]),
            None,
        )
        .unwrap();
    assert!(matches!(
        store.consent_writes(&chat, "expense-log", "operator"),
        Err(StoreError::UnknownToken)
    ));
    assert!(matches!(
        store.consent_writes("sasha_at_forged", "expense-log", "operator"),
        Err(StoreError::UnknownToken)
    ));
    let audited: i64 = fixture
        .raw()
        .query_row(
            "SELECT count(*) FROM authorization_audit_log WHERE action = 'token.write-consent'", (),
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(audited, 2, "each consent is audited");
    // A revoked token's consent ends with it.
    assert!(store.revoke_token(&script).unwrap());
    assert!(!store.write_consent(&script, "expense-log").unwrap());
}
}

on_both! {
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
}

on_both! {
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
        .query_row("SELECT count(*) FROM tokens", (), |row| row.get(0))
        .unwrap();
    assert_eq!(rows, 0);
}
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
            (),
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

on_both! {
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
}

on_both! {
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
}

on_both! {
/// A token's last use is recorded to the minute: the first use writes it,
/// uses within [`TOKEN_USE_PRECISION_SECONDS`] do not, the next one does.
fn a_tokens_last_use_is_recorded_to_the_minute() {
    let fixture = Fixture::new();
    let alice = fixture.user("alice", UserRole::Member);
    let scopes = scopes(&[Scope::AppsInvoke]);
    let (secret, made) = fixture
        .store
        .create_personal_token(&alice.id, "laptop", &scopes, None)
        .unwrap();
    assert_eq!(made.last_used_at, None);
    let last_use = || fixture.store.personal_tokens(&alice.id).unwrap()[0].last_used_at;
    fixture.store.token(&secret).unwrap().unwrap();
    assert_eq!(last_use(), Some(START));
    fixture.advance(TOKEN_USE_PRECISION_SECONDS - 1);
    fixture.store.token(&secret).unwrap().unwrap();
    assert_eq!(last_use(), Some(START), "not a write per request");
    fixture.advance(1);
    fixture.store.token(&secret).unwrap().unwrap();
    assert_eq!(last_use(), Some(START + TOKEN_USE_PRECISION_SECONDS));
}
}

on_both! {
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
}

// --- registry and grants ---------------------------------------------------

on_both! {
fn the_first_admin_or_staff_made_after_discovery_manages_the_apps_no_one_manages() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    // Discovered before anyone could manage them (no users yet).
    assert!(register(store, "time-sheet", "rev-1"));
    assert!(register(store, "expenses", "rev-1"));
    let mia = fixture.user("mia", UserRole::Member);
    assert_eq!(store.access("time-sheet", &mia.id).unwrap(), None, "members get nothing");

    let ada = fixture.user("ada", UserRole::Admin);
    for app in ["expenses", "time-sheet"] {
        assert_eq!(store.access(app, &ada.id).unwrap(), Some(AppAccess::Manage), "{app}");
    }
    let grants = store.grants("time-sheet").unwrap();
    assert!(grants.iter().all(|g| g.granted_by == ACTOR_SYSTEM), "{grants:?}");

    // Managed now: a later admin or staff gets nothing, as before.
    let sam = fixture.user("sam", UserRole::Staff);
    assert_eq!(store.access("time-sheet", &sam.id).unwrap(), None);
    // An app whose only manager was moved down to use is unmanaged again.
    store.grant("expenses", &ada.id, AppAccess::Use, None).unwrap();
    let tom = fixture.user("tom", UserRole::Staff);
    assert_eq!(store.access("expenses", &tom.id).unwrap(), Some(AppAccess::Manage));
    assert_eq!(store.access("time-sheet", &tom.id).unwrap(), None);
}
}

on_both! {
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
}

on_both! {
/// Eight processes discover one new app at the same instant: exactly one
/// discovery is its first, and its grants and their audit rows exist once.
fn racing_first_discoveries_grant_and_audit_once() {
    let fixture = Fixture::new();
    let ada = fixture.user("ada", UserRole::Admin);
    let sam = fixture.user("sam", UserRole::Staff);
    fixture.user("mia", UserRole::Member);
    let handles = handles(&fixture, RACERS);
    for round in 0..3 {
        let app_id = format!("time-sheet-{round}");
        let answers = race(&handles, |_, store| {
            store
                .register_app(&app_id, "rev-1", None, "[]", &Default::default())
                .map_err(|error| error.to_string())
        });
        let firsts = answers
            .iter()
            .filter(|answer| *answer.as_ref().unwrap())
            .count();
        assert_eq!(firsts, 1, "round {round}: {answers:?}");
        let grants: Vec<_> = fixture
            .store
            .grants(&app_id)
            .unwrap()
            .into_iter()
            .map(|grant| (grant.username, grant.access))
            .collect();
        assert_eq!(
            grants,
            [
                ("ada".to_owned(), AppAccess::Manage),
                ("sam".to_owned(), AppAccess::Manage)
            ]
        );
        let log: Vec<_> = fixture
            .store
            .audit_entries(Some(&app_id))
            .unwrap()
            .into_iter()
            .map(|entry| (entry.action, entry.subject))
            .collect();
        assert_eq!(
            log,
            [
                (action::APP_REGISTERED.to_owned(), None),
                (action::GRANT_CHANGED.to_owned(), Some(ada.id.clone())),
                (action::GRANT_CHANGED.to_owned(), Some(sam.id.clone())),
            ],
            "round {round}"
        );
    }
}
}

on_both! {
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
}

on_both! {
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
}

on_both! {
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
}

on_both! {
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
    raw.execute("DELETE FROM users WHERE id = ?1", [&sam.id])
        .unwrap();
    assert!(store.grants("time-sheet").unwrap().is_empty());
    assert_eq!(store.session(&session).unwrap(), None);
    assert_eq!(store.token(&token).unwrap(), None);
}
}

// --- the audit log -----------------------------------------------------------

on_both! {
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
}

/// An error with every error beneath it: the PostgreSQL client's own
/// message is only "db error", the server's words are its source.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

on_both! {
/// No statement changes or removes an audit row, whatever way it is put:
/// each is refused as append-only and every row stays as it was. SQLite's
/// REPLACE and PostgreSQL's TRUNCATE are each engine's own spellings.
fn the_audit_log_cannot_be_changed_or_deleted() {
    let fixture = Fixture::new();
    let store = &fixture.store;
    fixture.user("ada", UserRole::Admin);
    register(store, "time-sheet", "rev-1");
    let before = store.audit_entries(None).unwrap();
    assert_eq!(before.len(), 2);
    let first_id = before[0].id;

    let mut raw = fixture.raw();
    let mut refused = vec![
        "UPDATE authorization_audit_log SET actor = 'mallory'".to_owned(),
        format!("UPDATE authorization_audit_log SET actor = 'mallory' WHERE id = {first_id}"),
        "DELETE FROM authorization_audit_log".to_owned(),
        format!("DELETE FROM authorization_audit_log WHERE id = {first_id}"),
        format!(
            "INSERT INTO authorization_audit_log (id, at, actor, action)
             VALUES ({first_id}, 0, 'mallory', 'grant.changed')"
        ),
        format!(
            "INSERT INTO authorization_audit_log (id, at, actor, action)
             VALUES ({first_id}, 0, 'mallory', 'grant.changed')
             ON CONFLICT (id) DO UPDATE SET actor = 'mallory'"
        ),
    ];
    match raw.dialect() {
        crate::db::Dialect::Sqlite => refused.extend([
            format!(
                "INSERT OR REPLACE INTO authorization_audit_log (id, at, actor, action)
                 VALUES ({first_id}, 0, 'mallory', 'grant.changed')"
            ),
            format!(
                "REPLACE INTO authorization_audit_log (id, at, actor, action)
                 VALUES ({first_id}, 0, 'mallory', 'grant.changed')"
            ),
        ]),
        crate::db::Dialect::Postgres => refused.extend([
            "TRUNCATE authorization_audit_log".to_owned(),
            "TRUNCATE authorization_audit_log RESTART IDENTITY CASCADE".to_owned(),
        ]),
    }
    for sql in &refused {
        let error = chain(&raw.execute(sql, ()).unwrap_err());
        assert!(error.contains("append-only"), "{sql}: {error}");
    }
    // With recursive triggers on, SQLite's REPLACE deletes the row it
    // replaces through the delete trigger: refused too.
    if let Some(sqlite) = raw.as_sqlite() {
        sqlite.pragma_update(None, "recursive_triggers", "ON").unwrap();
        sqlite
            .execute(
                &format!(
                    "INSERT OR REPLACE INTO authorization_audit_log (id, at, actor, action)
                     VALUES ({first_id}, 0, 'mallory', 'grant.changed')"
                ),
                (),
            )
            .unwrap_err();
    }
    assert_eq!(store.audit_entries(None).unwrap(), before);

    // Appending still works, with ids never reused.
    store
        .record_source_change("time-sheet", "app.js", "ada", None, Some("x"))
        .unwrap();
    let after = store.audit_entries(None).unwrap();
    assert_eq!(after.len(), 3);
    assert_eq!(after[..2], before[..]);
    assert!(after[2].id > after[1].id);
}
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
    let raw = fixture.raw_sqlite();
    raw.busy_timeout(Duration::from_millis(0)).unwrap();
    raw.execute_batch("BEGIN IMMEDIATE").unwrap();
    // The store waits its 5 s busy timeout, then reports Busy. Keep this
    // short by shrinking the store's timeout through its own connection.
    fixture
        .store
        .connection()
        .unwrap()
        .as_sqlite()
        .unwrap()
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

mod confirmations;
mod member_apps;
mod oauth;
mod people;
mod postgres;
mod sso;
mod suggestions;
mod throttles;
mod uploads;
