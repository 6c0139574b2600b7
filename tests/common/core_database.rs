//! Which core database the process tests run studio-core on, read in this one
//! place: the embedded SQLite file `<state>/core.sqlite` (the default), or,
//! with `SASHA_TEST_CORE_DATABASE=postgres`, a fresh PostgreSQL database per
//! state folder on the shared loopback test server (`sasha-testkit`), given to
//! every role, `sasha up` and `sasha admin` the tests start as `DATABASE_URL`.
//! `scripts/test.sh` runs the process suite once each way.
//!
//! The tests' own handle on that database is a [`CoreStore`]: it runs every
//! store call, and drops the store, on a thread of its own, because
//! PostgreSQL's blocking client panics when used or dropped on the async
//! runtime's threads (as studio-core runs its store work in `blocking`).
//!
//! What it must never do: let a test silently use another backend than the
//! switch says, or share a PostgreSQL database between state folders.

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use sasha_contract::data::ReadPolicy;
use studio_store::{
    AppAccess, AuditEntry, ClientAuthMethod, CodeExchange, Consent, Draft, DraftFile, Grant,
    Invitation, IssuedTokens, Lifecycle, MemberApp, OAuthRefusal, PackageHead, Principal,
    RegisteredApp, RegisteredClient, RevisionEntry, Scope, Store, StoreError, TokenKind, User,
    UserRole,
};

/// The switch: the environment variable, and its one non-default value.
const SWITCH: &str = "SASHA_TEST_CORE_DATABASE";

/// Whether this run's studio-cores use PostgreSQL (`SASHA_TEST_CORE_DATABASE`:
/// unset or `sqlite` for the SQLite file, `postgres`; anything else fails the
/// test rather than guessing).
pub fn on_postgres() -> bool {
    static CHOICE: OnceLock<bool> = OnceLock::new();
    *CHOICE.get_or_init(|| match std::env::var(SWITCH).as_deref() {
        Err(_) | Ok("") | Ok("sqlite") => false,
        Ok("postgres") => true,
        Ok(other) => panic!("{SWITCH}={other:?}: expected `sqlite` or `postgres`"),
    })
}

/// The PostgreSQL database of each state folder this test process made.
fn databases() -> &'static Mutex<HashMap<PathBuf, String>> {
    static DATABASES: OnceLock<Mutex<HashMap<PathBuf, String>>> = OnceLock::new();
    DATABASES.get_or_init(Default::default)
}

/// Runs blocking work (PostgreSQL's client) on a thread of its own, never on
/// the test's async runtime.
pub fn off_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| scope.spawn(work).join().unwrap())
}

/// The URL of `state`'s PostgreSQL core database, made on first use.
fn database_url(state: &Path) -> String {
    let mut databases = databases().lock().unwrap();
    databases
        .entry(state.to_path_buf())
        .or_insert_with(|| off_runtime(sasha_testkit::postgres_database))
        .clone()
}

/// The environment that points a role, `sasha up` or `sasha admin` working
/// on `state` at its core database: `DATABASE_URL` on PostgreSQL, nothing on
/// SQLite (the default `<state>/core.sqlite`).
pub fn core_env(state: &Path) -> Vec<(&'static str, String)> {
    if on_postgres() {
        vec![("DATABASE_URL", database_url(state))]
    } else {
        Vec::new()
    }
}

/// The core database of the state folder `state`, opened (and migrated) for
/// the test beside the processes that use it.
pub fn core_store(state: &Path) -> CoreStore {
    let store = if on_postgres() {
        let url = database_url(state);
        off_runtime(|| Store::connect(&url, 2, None, Arc::new(studio_store::system_clock)).unwrap())
    } else {
        Store::open(&state.join("core.sqlite")).unwrap()
    };
    CoreStore { store: Some(store) }
}

/// A direct SQL connection to `state`'s core database, for a test that reads
/// or changes rows no store method shows (`$1` parameters work on both).
pub fn core_sql(state: &Path) -> CoreSql {
    if on_postgres() {
        CoreSql::Postgres(database_url(state))
    } else {
        let connection = rusqlite::Connection::open(state.join("core.sqlite")).unwrap();
        connection
            .busy_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        CoreSql::Sqlite(connection)
    }
}

/// The test's handle on a core database: every call runs off the async
/// runtime (see the module header), so a test calls it anywhere.
pub struct CoreStore {
    /// Always `Some` until dropped.
    store: Option<Store>,
}

/// Store methods the tests use, each run through [`CoreStore::with`].
macro_rules! off_runtime_methods {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) -> $out:ty;)*) => {
        $(
            pub fn $name(&self, $($arg: $ty),*) -> Result<$out, StoreError> {
                self.with(|store| store.$name($($arg),*))
            }
        )*
    };
}

impl CoreStore {
    /// Runs `work` on the store off the async runtime.
    pub fn with<T: Send>(&self, work: impl FnOnce(&Store) -> T + Send) -> T {
        let store = self.store.as_ref().expect("open");
        off_runtime(|| work(store))
    }

    /// A handle for in-process code that runs its store work off the
    /// runtime itself (e.g. `UploadArea` in a plain `#[test]`).
    pub fn handle(&self) -> Store {
        self.store.clone().expect("open")
    }

    /// The SQLite file, for a test about the file itself (`scripts/test.sh`
    /// keeps such tests out of the PostgreSQL pass).
    pub fn sqlite_file(&self) -> &Path {
        self.store
            .as_ref()
            .and_then(Store::path)
            .expect("a test about the SQLite core file runs on SQLite only (scripts/test.sh)")
    }

    off_runtime_methods! {
        fn access(app_id: &str, user_id: &str) -> Option<AppAccess>;
        fn audit_entries(app_id: Option<&str>) -> Vec<AuditEntry>;
        fn consent_writes(secret: &str, app_id: &str, actor: &str) -> ();
        fn create_session(user_id: &str) -> String;
        fn create_user(username: &str, role: UserRole, password: &str) -> User;
        fn draft(app_id: &str) -> Option<Draft>;
        fn draft_contents(app_id: &str) -> Vec<(DraftFile, Vec<u8>)>;
        fn grant(app_id: &str, user_id: &str, access: AppAccess, actor: Option<&str>) -> ();
        fn grants(app_id: &str) -> Vec<Grant>;
        fn invite_user(username: &str, role: UserRole, actor: &str) -> Invitation;
        fn lifecycle(app_id: &str) -> Option<Lifecycle>;
        fn member_apps(author_id: Option<&str>) -> Vec<MemberApp>;
        fn member_apps_enabled() -> bool;
        fn mint_token(
            user_id: &str,
            kind: TokenKind,
            scopes: &BTreeSet<Scope>,
            ttl_seconds: Option<u64>
        ) -> String;
        fn mint_conversation_token(
            user_id: &str,
            scopes: &BTreeSet<Scope>,
            ttl_seconds: u64,
            conversation: &str
        ) -> String;
        fn oauth_consent(consent: &Consent<'_>) -> String;
        fn oauth_exchange_code(
            exchange: &CodeExchange<'_>
        ) -> Result<IssuedTokens, OAuthRefusal>;
        fn oauth_register_client(
            client_name: &str,
            redirect_uris: &[String],
            auth_method: ClientAuthMethod
        ) -> Result<RegisteredClient, OAuthRefusal>;
        fn register_app(
            app_id: &str,
            revision: &str,
            schema_hash: Option<&str>,
            actions_json: &str,
            read_policy: &ReadPolicy
        ) -> bool;
        fn package_head(app_id: &str) -> Option<PackageHead>;
        fn registered_app(app_id: &str) -> Option<RegisteredApp>;
        fn registered_apps() -> Vec<RegisteredApp>;
        fn revision_file(app_id: &str, revision: &str, path: &str) -> Option<Vec<u8>>;
        fn revisions(app_id: &str) -> Vec<RevisionEntry>;
        fn revoke(app_id: &str, user_id: &str, actor: Option<&str>) -> bool;
        fn revoke_token(secret: &str) -> bool;
        fn session(secret: &str) -> Option<Principal>;
        fn token(secret: &str) -> Option<Principal>;
        fn upload(user_id: &str, name: &str) -> Option<String>;
        fn upload_names(user_id: &str) -> Vec<String>;
        fn user_by_name(username: &str) -> Option<User>;
        fn users() -> Vec<User>;
        fn verify_login(username: &str, password: &str) -> Option<User>;
        fn write_consent(secret: &str, app_id: &str) -> bool;
    }
}

impl Drop for CoreStore {
    fn drop(&mut self) {
        // PostgreSQL's pool closes its connections as it drops: off the runtime.
        let store = self.store.take();
        off_runtime(move || drop(store));
    }
}

/// A direct SQL connection to a core database (see [`core_sql`]).
pub enum CoreSql {
    Sqlite(rusqlite::Connection),
    /// The database's URL: each statement connects off the runtime.
    Postgres(String),
}

impl CoreSql {
    /// The first column of every row of `sql`, as integers (NULL is `None`).
    pub fn integers(&self, sql: &str) -> Vec<Option<i64>> {
        match self {
            CoreSql::Sqlite(connection) => connection
                .prepare(sql)
                .unwrap()
                .query_map([], |row| row.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap(),
            CoreSql::Postgres(url) => off_runtime(|| {
                postgres_client(url)
                    .query(sql, &[])
                    .unwrap()
                    .iter()
                    .map(|row| row.get(0))
                    .collect()
            }),
        }
    }

    /// The single integer `sql` answers (a count).
    pub fn count(&self, sql: &str) -> i64 {
        match self.integers(sql).as_slice() {
            [Some(count)] => *count,
            other => panic!("{sql}: expected one integer, got {other:?}"),
        }
    }

    /// Every row of `sql`, each column as text (text columns only).
    pub fn texts(&self, sql: &str) -> Vec<Vec<String>> {
        match self {
            CoreSql::Sqlite(connection) => {
                let mut statement = connection.prepare(sql).unwrap();
                let columns = statement.column_count();
                statement
                    .query_map([], |row| {
                        (0..columns).map(|column| row.get(column)).collect()
                    })
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap()
            }
            CoreSql::Postgres(url) => off_runtime(|| {
                postgres_client(url)
                    .query(sql, &[])
                    .unwrap()
                    .iter()
                    .map(|row| (0..row.len()).map(|column| row.get(column)).collect())
                    .collect()
            }),
        }
    }

    /// Runs the statement `sql` with the one integer parameter `$1`; the
    /// rows it changed.
    pub fn execute(&self, sql: &str, value: i64) -> u64 {
        match self {
            CoreSql::Sqlite(connection) => connection.execute(sql, [value]).unwrap() as u64,
            CoreSql::Postgres(url) => {
                off_runtime(|| postgres_client(url).execute(sql, &[&value]).unwrap())
            }
        }
    }
}

fn postgres_client(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}
