//! The core database: users, browser sessions, tokens, the app registry,
//! grants, the append-only authorization audit log and confirmation tokens
//! for model-invoked writes (`confirmations`), and the revision ledger
//! (`ledger`: every validated revision's files and resource, content-addressed).
//! This is the only code
//! that opens `DB_PATH`; studio-core and the operator CLI (`sasha admin`) both
//! go through it, possibly at the same time, so every write runs in a
//! `BEGIN IMMEDIATE` transaction on a WAL database with a 5 s busy timeout.
//!
//! The API is blocking (rusqlite); async callers run it on a blocking thread.
//!
//! What it must not do: open an app's data file (that is data-worker's), cache
//! an access decision (every check reads the database, so a revocation applies
//! to the very next call), widen a token's scopes, or log, return or store a
//! secret. Sessions and tokens are stored as sha256 of their secret, passwords
//! as argon2id PHC strings; the only place a secret appears is the return value
//! of the call that minted it.

mod app_creation;
mod assistant;
mod confirmations;
mod drafts;
mod history;
mod lifecycle;
mod member_apps;
mod oauth;
mod people;
mod schema;
mod secrets;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension as _, ToSql, Transaction, TransactionBehavior};
use sasha_package::sql::ReadPolicy;
use serde::{Deserialize, Serialize};

pub use self::app_creation::creation_action;
pub use self::assistant::{Conversation, MAX_CONVERSATIONS, MAX_MESSAGES};
pub use self::confirmations::{
    CONFIRMATION_TOKEN_PREFIX, CONFIRMATION_TTL_SECONDS, ConfirmationRefusal, ConfirmationResult,
    ConfirmedCall, IssuedConfirmation, MAX_CONFIRMATION_ARGUMENTS_BYTES,
    MAX_CONFIRMATION_TOOL_CHARS, MAX_IDEMPOTENCY_KEY_CHARS, MAX_LIVE_CONFIRMATIONS_PER_USER,
    RedeemedConfirmation,
};
pub use self::drafts::{
    Current, Decision, Draft, DraftFile, DraftShape, Ending, Versions, draft_action,
};
pub use self::history::history_action;
pub use self::lifecycle::{Lifecycle, LifecycleRefusal, LifecycleResult, lifecycle_action};
pub use self::member_apps::{
    Files, MEMBER_APPS_ENABLED, MemberApp, MemberCaps, MemberDeploy, MemberRefusal, member_action,
};
pub use self::oauth::{
    CLIENT_SECRET_PREFIX, ClientAuthMethod, CodeExchange, Connection as OAuthConnection, Consent,
    IssuedTokens, MAX_CLIENTS, MAX_UNCONSENTED_CLIENTS, OAUTH_ACCESS_TTL_SECONDS,
    OAUTH_CODE_TTL_SECONDS, OAUTH_REFRESH_TTL_SECONDS, OAuthClient, OAuthRefusal,
    REFRESH_TOKEN_PREFIX, RegisteredClient, UNCONSENTED_CLIENT_TTL_SECONDS, oauth_action,
    pkce_matches, valid_code_challenge,
};
pub use self::people::{
    INVITATION_TTL_SECONDS, Invitation, InvitationView, MAX_TOKEN_LABEL_CHARS, Person, Removed,
    TOKEN_USE_PRECISION_SECONDS, TokenEntry, people_action,
};
pub use self::suggestions::{
    MAX_SUGGESTIONS_PER_DAY, SUGGESTION_WINDOW_SECONDS, StoredSuggestion, Suggestion,
    SuggestionKind, SuggestionMetadata, SuggestionRefusal, SuggestionResult, SuggestionSeverity,
};

/// A browser session lasts this long from sign-in (no sliding renewal).
pub const SESSION_TTL_SECONDS: i64 = 12 * 60 * 60;
/// A chat-session token always lasts this long.
pub const CHAT_SESSION_TTL_SECONDS: u64 = 2 * 60 * 60;
/// An access token's lifetime when none is asked for.
pub const ACCESS_TOKEN_DEFAULT_TTL_SECONDS: u64 = 30 * 24 * 60 * 60;
/// The longest lifetime an access token or an expiring API key may have.
pub const TOKEN_MAX_TTL_SECONDS: u64 = 365 * 24 * 60 * 60;
/// Passwords have at least this many characters.
pub const MIN_PASSWORD_CHARS: usize = 12;
/// Passwords have at most this many bytes (bounds the hashing input).
pub const MAX_PASSWORD_BYTES: usize = 1024;
/// The audit actor of changes nobody asked for (first-discovery grants).
pub const ACTOR_SYSTEM: &str = "system";
/// The audit actor of changes made with the operator CLI.
pub const ACTOR_OPERATOR: &str = "operator";
/// Longer presented credentials are refused without a lookup.
const MAX_SECRET_LEN: usize = 256;

/// A string does not name a value of one of the closed enums below.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?}; expected {expected}")]
pub struct ParseEnumError {
    /// What was being parsed, e.g. "scope".
    pub what: &'static str,
    /// The refused text.
    pub value: String,
    /// The accepted spellings, for the message.
    pub expected: &'static str,
}

/// A closed enum with one wire spelling per variant, used in the database, on
/// the command line and in JSON.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal, $expected:literal {
            $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every value, in order.
            pub const ALL: &[$name] = &[$($name::$variant),+];

            /// The wire spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl FromStr for $name {
            type Err = ParseEnumError;

            fn from_str(text: &str) -> Result<$name, ParseEnumError> {
                match text {
                    $($text => Ok($name::$variant),)+
                    _ => Err(ParseEnumError {
                        what: $what,
                        value: text.to_owned(),
                        expected: $expected,
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }

        impl FromSql for $name {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<$name> {
                value
                    .as_str()?
                    .parse()
                    .map_err(|error| FromSqlError::Other(Box::new(error)))
            }
        }
    };
}

wire_enum! {
    /// A user's role. Admin and staff may hold `apps:write` and are granted
    /// `manage` on an app's first discovery; members get nothing automatically.
    UserRole, "role", "admin, staff or member" {
        Admin => "admin",
        Staff => "staff",
        Member => "member",
    }
}

wire_enum! {
    /// What a credential may be used for.
    Scope, "scope", "chat:use, apps:invoke, apps:write or apps:author" {
        /// The Studio chat and the app list.
        ChatUse => "chat:use",
        /// App data and action tools (MCP) and opening apps.
        AppsInvoke => "apps:invoke",
        /// App source tools; admin and staff only, and useless without `apps:invoke`.
        AppsWrite => "apps:write",
        /// Member app authoring (App Studio, the member app tools): any
        /// role; never the catalogue's source tools.
        AppsAuthor => "apps:author",
    }
}

wire_enum! {
    /// A user's access to one app. `Manage` implies `Use`.
    AppAccess, "access", "use or manage" {
        Use => "use",
        Manage => "manage",
    }
}

wire_enum! {
    /// The kinds of bearer token.
    TokenKind, "token kind", "access, api-key or chat-session" {
        /// An MCP client's token, with an explicit scope set and an expiry.
        Access => "access",
        /// A system principal's key; refused by the app routes; may not expire.
        ApiKey => "api-key",
        /// The Studio chat path's short-lived token (2 h).
        ChatSession => "chat-session",
    }
}

wire_enum! {
    /// How a principal authenticated.
    PrincipalKind, "principal kind", "session, access, api-key or chat-session" {
        /// A browser session cookie.
        Session => "session",
        /// An access token.
        Access => "access",
        /// An API key (a system principal).
        ApiKey => "api-key",
        /// A chat-session token.
        ChatSession => "chat-session",
    }
}

// Declared after `wire_enum!`, which they use.
mod ledger;
mod suggestions;

#[cfg(test)]
pub(crate) use self::ledger::test_resource;
pub use self::ledger::{
    DEFAULT_REVISION_RETENTION, MAX_REVISION_SUMMARY_CHARS, Recorded, RevisionContent,
    RevisionEntry, RevisionFile, RevisionOrigin, RevisionSurface, SUMMARY_FOUND_ON_DISK,
    SUMMARY_SEEDED,
};

impl UserRole {
    /// Whether a user with this role may hold `scope` at all.
    pub fn allows(self, scope: Scope) -> bool {
        match scope {
            Scope::ChatUse | Scope::AppsInvoke | Scope::AppsAuthor => true,
            Scope::AppsWrite => matches!(self, UserRole::Admin | UserRole::Staff),
        }
    }

    /// The scopes a browser session of this role carries: `chat:use`,
    /// `apps:invoke` and `apps:author`, plus `apps:write` for admin and staff.
    pub fn session_scopes(self) -> BTreeSet<Scope> {
        Scope::ALL
            .iter()
            .copied()
            .filter(|scope| self.allows(*scope))
            .collect()
    }

    /// Admin and staff: seeded with `manage` at first discovery and allowed to
    /// administer grants.
    pub fn is_privileged(self) -> bool {
        matches!(self, UserRole::Admin | UserRole::Staff)
    }
}

impl AppAccess {
    /// Whether this access level covers `needed` (`manage` covers `use`).
    pub fn allows(self, needed: AppAccess) -> bool {
        self >= needed
    }
}

impl TokenKind {
    /// The secret's prefix, which names the kind so a leaked token is
    /// recognisable (and scannable) on sight.
    pub fn prefix(self) -> &'static str {
        match self {
            TokenKind::Access => "sasha_at_",
            TokenKind::ApiKey => "sasha_ak_",
            TokenKind::ChatSession => "sasha_ct_",
        }
    }

    /// The kind a presented secret claims by its prefix.
    pub fn of_secret(secret: &str) -> Option<TokenKind> {
        TokenKind::ALL
            .iter()
            .copied()
            .find(|kind| secret.starts_with(kind.prefix()))
    }
}

impl From<TokenKind> for PrincipalKind {
    fn from(kind: TokenKind) -> PrincipalKind {
        match kind {
            TokenKind::Access => PrincipalKind::Access,
            TokenKind::ApiKey => PrincipalKind::ApiKey,
            TokenKind::ChatSession => PrincipalKind::ChatSession,
        }
    }
}

/// A user account. Never carries the password hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    /// A UUID v7.
    pub id: String,
    pub username: String,
    pub role: UserRole,
    /// Unix seconds.
    pub created_at: i64,
}

/// An authenticated caller: who, how, and with which scopes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user: User,
    pub kind: PrincipalKind,
    /// For a session, derived from the role; for a token, exactly as minted
    /// (narrowed, never widened, if the role no longer allows one).
    pub scopes: BTreeSet<Scope>,
    /// Unix seconds; `i64::MAX` for an API key minted without expiry.
    pub expires_at: i64,
    /// The resource (RFC 8707 audience) an OAuth access token is bound to;
    /// `None` for sessions and operator-minted tokens, which have none.
    pub audience: Option<String>,
}

impl Principal {
    /// Whether the principal holds `scope`.
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }
}

/// One user's access to one app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    pub app_id: String,
    pub user_id: String,
    pub username: String,
    pub access: AppAccess,
    /// Unix seconds of the last change.
    pub granted_at: i64,
    /// The audit actor of the last change: a user id, `system` or `operator`.
    pub granted_by: String,
}

/// An app id's registry row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredApp {
    pub app_id: String,
    pub current_revision: String,
    pub schema_hash: Option<String>,
    /// The public action catalogue as JSON, as the catalogue registered it.
    pub actions_json: String,
    pub first_discovered_at: i64,
    pub last_seen_at: i64,
}

/// One row of `authorization_audit_log`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub id: i64,
    /// Unix seconds.
    pub at: i64,
    /// A user id, `system` or `operator`.
    pub actor: String,
    /// `app.registered`, `app.revision-changed`, `grant.changed`,
    /// `app-source.changed`, `oauth.connected`, `oauth.revoked`, or a
    /// lifecycle step (`app.created`, `app.withdrawn`, `app.restored`,
    /// `app.deleted`, `app.data-deleted`).
    pub action: String,
    pub app_id: Option<String>,
    /// The user id of a grant change, the file path of a source change, the
    /// client id of an OAuth connection.
    pub subject: Option<String>,
    /// The access, revision or file sha256 before the change.
    pub before: Option<String>,
    /// The access, revision or file sha256 after the change; the scopes of an
    /// OAuth connection, or why it was revoked.
    pub after: Option<String>,
}

/// Audit actions.
pub mod action {
    /// An app id was discovered for the first time.
    pub const APP_REGISTERED: &str = "app.registered";
    /// A registered app's current revision changed.
    pub const APP_REVISION_CHANGED: &str = "app.revision-changed";
    /// A grant was created, changed or removed.
    pub const GRANT_CHANGED: &str = "grant.changed";
    /// An app source file was written or deleted.
    pub const APP_SOURCE_CHANGED: &str = "app-source.changed";
}

/// Why a store call failed. Messages are safe to show an operator; a
/// [`StoreError::Database`] detail is for logs, never for an HTTP client.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("that username is already taken")]
    UsernameTaken,
    #[error("invalid username: {0}")]
    InvalidUsername(String),
    #[error("password too weak: {0}")]
    WeakPassword(String),
    #[error("no such user")]
    UnknownUser,
    /// Grants exist only for registered (once discovered and valid) apps.
    #[error("no such app: it has never been discovered as a valid package")]
    UnknownApp,
    /// Write consent goes only to a live access token.
    #[error("no such token, or not an access token (only those may write as a script)")]
    UnknownToken,
    /// A grant change a member app's one grant rule refuses.
    #[error("{0}")]
    MemberAppGrant(&'static str),
    #[error("a {role} user cannot hold the {scope} scope")]
    ScopeNotAllowed { scope: Scope, role: UserRole },
    /// A new invitation link for someone who already set their password.
    #[error("that user has already accepted their invitation")]
    NotInvited,
    /// A renewed invitation for a disabled person.
    #[error("that user is disabled; enable them first")]
    UserDisabled,
    #[error("invalid token name: {0}")]
    InvalidTokenLabel(String),
    #[error("a token needs at least one scope")]
    NoScopes,
    #[error("invalid token lifetime: {0}")]
    InvalidTtl(String),
    /// SQLITE_BUSY or SQLITE_LOCKED after the busy timeout: retryable.
    #[error("the core database is busy; try again")]
    Busy,
    /// Anything else from SQLite or the file system. Never shown to users.
    #[error("core database error: {0}")]
    Database(String),
}

impl StoreError {
    /// Whether the same call may succeed if simply retried.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Busy)
    }

    /// Whether the caller's input was refused (as opposed to a state conflict,
    /// a missing record or a fault).
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            StoreError::InvalidUsername(_)
                | StoreError::WeakPassword(_)
                | StoreError::ScopeNotAllowed { .. }
                | StoreError::NoScopes
                | StoreError::InvalidTtl(_)
                | StoreError::InvalidTokenLabel(_)
        )
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> StoreError {
        match error.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                StoreError::Busy
            }
            _ => StoreError::Database(error.to_string()),
        }
    }
}

/// The store's notion of now, in unix seconds; injectable for tests.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock in unix seconds.
pub fn system_clock() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}

/// A handle on the core database. Cheap to clone; every clone shares one
/// connection behind a mutex (calls are short, and argon2 work runs outside
/// the lock).
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    connection: Mutex<Connection>,
    clock: Clock,
    path: PathBuf,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

/// Checks a username: 3–64 characters of `[a-z0-9._-]`, starting with a letter.
pub fn validate_username(username: &str) -> Result<(), StoreError> {
    let invalid = |reason: &str| Err(StoreError::InvalidUsername(reason.to_owned()));
    if !(3..=64).contains(&username.len()) {
        return invalid("it must have 3 to 64 characters");
    }
    if !username.starts_with(|c: char| c.is_ascii_lowercase()) {
        return invalid("it must start with a letter a-z");
    }
    if !username
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
    {
        return invalid("it may contain only a-z, 0-9, '.', '_' and '-'");
    }
    Ok(())
}

/// Checks a new password: at least 12 characters, at most 1024 bytes.
pub fn validate_password(password: &str) -> Result<(), StoreError> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(StoreError::WeakPassword(format!(
            "it must have at least {MIN_PASSWORD_CHARS} characters"
        )));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(StoreError::WeakPassword(format!(
            "it must have at most {MAX_PASSWORD_BYTES} bytes"
        )));
    }
    Ok(())
}

/// The columns [`user_from_row`] reads, for `users u`.
const USER_COLUMNS: &str = "u.id, u.username, u.role, u.created_at";

fn user_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<User> {
    Ok(User {
        id: row.get(0)?,
        username: row.get(1)?,
        role: row.get(2)?,
        created_at: row.get(3)?,
    })
}

/// The stored text of a scope set: wire spellings, space-separated, in order.
fn scopes_to_text(scopes: &BTreeSet<Scope>) -> String {
    scopes
        .iter()
        .map(|scope| scope.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

fn scopes_from_text(text: &str) -> Result<BTreeSet<Scope>, StoreError> {
    text.split_ascii_whitespace()
        .map(|scope| {
            scope
                .parse()
                .map_err(|error: ParseEnumError| StoreError::Database(format!("stored {error}")))
        })
        .collect()
}

/// Appends one audit entry inside the caller's transaction.
#[allow(clippy::too_many_arguments, reason = "one argument per audit column")]
fn audit(
    transaction: &Transaction<'_>,
    at: i64,
    actor: &str,
    action: &str,
    app_id: Option<&str>,
    subject: Option<&str>,
    before: Option<&str>,
    after: Option<&str>,
) -> Result<(), StoreError> {
    transaction.execute(
        "INSERT INTO authorization_audit_log (at, actor, action, app_id, subject, before, after)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        (at, actor, action, app_id, subject, before, after),
    )?;
    Ok(())
}

/// Gives `user_id` exactly `access` on `app_id` inside `transaction`,
/// audited as a grant change from what they held; `false` (nothing written)
/// when they held it already. Every grant goes through here.
fn set_grant(
    transaction: &Transaction<'_>,
    now: i64,
    actor: &str,
    app_id: &str,
    user_id: &str,
    access: AppAccess,
) -> Result<bool, StoreError> {
    let before: Option<AppAccess> = transaction
        .query_row(
            "SELECT access FROM grants WHERE app_id = ?1 AND user_id = ?2",
            [app_id, user_id],
            |row| row.get(0),
        )
        .optional()?;
    if before == Some(access) {
        return Ok(false);
    }
    transaction.execute(
        "INSERT INTO grants (app_id, user_id, access, granted_at, granted_by)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (app_id, user_id) DO UPDATE SET
            access = excluded.access,
            granted_at = excluded.granted_at,
            granted_by = excluded.granted_by",
        (app_id, user_id, access, now, actor),
    )?;
    audit(
        transaction,
        now,
        actor,
        action::GRANT_CHANGED,
        Some(app_id),
        Some(user_id),
        before.map(AppAccess::as_str),
        Some(access.as_str()),
    )?;
    Ok(true)
}

/// Adds `user` with password hash `hash` inside `transaction`; a taken
/// name is `UsernameTaken`. Every new user goes through here.
fn insert_user(transaction: &Transaction<'_>, user: &User, hash: &str) -> Result<(), StoreError> {
    let taken = transaction
        .query_row(
            "SELECT 1 FROM users WHERE username = ?1",
            [&user.username],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if taken {
        return Err(StoreError::UsernameTaken);
    }
    transaction.execute(
        "INSERT INTO users (id, username, role, password_hash, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        (&user.id, &user.username, user.role, hash, user.created_at),
    )?;
    Ok(())
}

fn seconds_i64(ttl: u64) -> i64 {
    // Callers bound `ttl` by TOKEN_MAX_TTL_SECONDS first; saturate regardless.
    i64::try_from(ttl).unwrap_or(i64::MAX)
}

impl Store {
    /// Opens (creating the parent folder and the file, mode 0600, when
    /// missing) and migrates the core database. Safe while another process
    /// has it open.
    pub fn open(db_path: &Path) -> Result<Store, StoreError> {
        Store::open_with_clock(db_path, Arc::new(system_clock))
    }

    /// [`Store::open`] with an injected clock (tests move time forward).
    pub fn open_with_clock(db_path: &Path, clock: Clock) -> Result<Store, StoreError> {
        if let Some(parent) = db_path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|error| {
                StoreError::Database(format!("cannot create {}: {error}", parent.display()))
            })?;
        }
        // Create the file ourselves so it (and the -wal/-shm files SQLite
        // derives from it) is readable by the owner only: it holds password
        // hashes.
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(db_path)
                .map_err(|error| {
                    StoreError::Database(format!("cannot open {}: {error}", db_path.display()))
                })?;
        }
        let mut connection = Connection::open(db_path)?;
        connection.busy_timeout(Duration::from_secs(5))?;
        // Several processes may open a fresh file at once (studio-core and the
        // operator CLI). Switching the journal to WAL can answer busy without
        // waiting on SQLite's busy handler, so the switch and the migration
        // are retried for as long as the busy timeout.
        let started = std::time::Instant::now();
        loop {
            match Store::prepare(&mut connection, db_path, clock()) {
                Err(StoreError::Busy) if started.elapsed() < Duration::from_secs(5) => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                outcome => break outcome?,
            }
        }
        Ok(Store {
            inner: Arc::new(Inner {
                connection: Mutex::new(connection),
                clock,
                path: db_path.to_path_buf(),
            }),
        })
    }

    /// WAL, the connection's pragmas, and every pending migration.
    fn prepare(connection: &mut Connection, db_path: &Path, now: i64) -> Result<(), StoreError> {
        let mode: String =
            connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Database(format!(
                "cannot switch {} to WAL (journal mode is {mode})",
                db_path.display()
            )));
        }
        connection.pragma_update(None, "synchronous", "NORMAL")?;
        connection.pragma_update(None, "foreign_keys", "ON")?;
        schema::migrate(connection, now)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn now(&self) -> i64 {
        (self.inner.clock)()
    }

    /// Reads the schema's first page, proving the database answers (for
    /// readiness). Waits behind a running write like any other call.
    pub fn check(&self) -> Result<(), StoreError> {
        self.connection()
            .query_row("SELECT count(*) FROM sqlite_schema", [], |row| {
                row.get::<_, i64>(0)
            })?;
        Ok(())
    }

    fn connection(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock rolls back any open transaction when
        // it unwinds, so the connection is still usable.
        self.inner
            .connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    // --- users -----------------------------------------------------------

    /// Creates a user. The password is hashed before the database is locked.
    pub fn create_user(
        &self,
        username: &str,
        role: UserRole,
        password: &str,
    ) -> Result<User, StoreError> {
        validate_username(username)?;
        validate_password(password)?;
        let hash = secrets::hash_password(password).map_err(StoreError::Database)?;
        let user = User {
            id: uuid::Uuid::now_v7().to_string(),
            username: username.to_owned(),
            role,
            created_at: self.now(),
        };
        let mut connection = self.connection();
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        insert_user(&transaction, &user, &hash)?;
        transaction.commit()?;
        Ok(user)
    }

    /// Replaces a user's password and signs them out of every browser
    /// session. Tokens stay valid (they have their own expiry and revocation).
    pub fn set_password(&self, username: &str, password: &str) -> Result<(), StoreError> {
        validate_password(password)?;
        let hash = secrets::hash_password(password).map_err(StoreError::Database)?;
        let mut connection = self.connection();
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let user_id: Option<String> = transaction
            .query_row(
                "SELECT id FROM users WHERE username = ?1",
                [username],
                |row| row.get(0),
            )
            .optional()?;
        let user_id = user_id.ok_or(StoreError::UnknownUser)?;
        transaction.execute(
            "UPDATE users SET password_hash = ?1 WHERE id = ?2",
            (&hash, &user_id),
        )?;
        transaction.execute("DELETE FROM sessions WHERE user_id = ?1", [&user_id])?;
        // A password set by the operator answers an open invitation too.
        transaction.execute("DELETE FROM invitations WHERE user_id = ?1", [&user_id])?;
        transaction.commit()?;
        Ok(())
    }

    /// The user called `username`.
    pub fn user_by_name(&self, username: &str) -> Result<Option<User>, StoreError> {
        let connection = self.connection();
        let user = connection
            .query_row(
                &format!("SELECT {USER_COLUMNS} FROM users u WHERE u.username = ?1"),
                [username],
                user_from_row,
            )
            .optional()?;
        Ok(user)
    }

    /// The user with id `id`.
    pub fn user(&self, id: &str) -> Result<Option<User>, StoreError> {
        let connection = self.connection();
        let user = connection
            .query_row(
                &format!("SELECT {USER_COLUMNS} FROM users u WHERE u.id = ?1"),
                [id],
                user_from_row,
            )
            .optional()?;
        Ok(user)
    }

    /// Every user, by username.
    pub fn users(&self) -> Result<Vec<User>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(&format!(
            "SELECT {USER_COLUMNS} FROM users u ORDER BY u.username"
        ))?;
        let users = statement
            .query_map([], user_from_row)?
            .collect::<Result<_, _>>()?;
        Ok(users)
    }

    /// The user whose password this is, or `None`. An unknown username costs
    /// one argon2 verification like a wrong password does, so the answer's
    /// timing does not tell which usernames exist.
    pub fn verify_login(&self, username: &str, password: &str) -> Result<Option<User>, StoreError> {
        let found = {
            let connection = self.connection();
            connection
                .query_row(
                    &format!(
                        "SELECT {USER_COLUMNS}, u.password_hash, u.disabled_at IS NOT NULL
                         FROM users u WHERE u.username = ?1"
                    ),
                    [username],
                    |row| {
                        Ok((
                            user_from_row(row)?,
                            row.get::<_, String>(4)?,
                            row.get::<_, bool>(5)?,
                        ))
                    },
                )
                .optional()?
        };
        // A disabled user's right password is refused like a wrong one.
        Ok(match found {
            Some((user, hash, disabled))
                if !hash.is_empty() && secrets::verify_password(password, &hash) && !disabled =>
            {
                Some(user)
            }
            // An invited user has no password yet ('' verifies nothing):
            // the same work as a wrong one.
            Some((_, hash, _)) if hash.is_empty() => {
                secrets::verify_dummy(password);
                None
            }
            Some(_) => None,
            None => {
                secrets::verify_dummy(password);
                None
            }
        })
    }

    // --- browser sessions --------------------------------------------------

    /// Starts a browser session for `user_id`, valid for 12 hours. Returns the
    /// secret for the cookie; only its sha256 is stored.
    pub fn create_session(&self, user_id: &str) -> Result<String, StoreError> {
        let now = self.now();
        let secret = secrets::random_secret();
        let mut connection = self.connection();
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let exists = transaction
            .query_row(
                "SELECT 1 FROM users WHERE id = ?1 AND disabled_at IS NULL",
                [user_id],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if !exists {
            return Err(StoreError::UnknownUser);
        }
        // A session is a sign-in: the Users page shows the last one.
        transaction.execute(
            "UPDATE users SET last_sign_in_at = ?2 WHERE id = ?1",
            (user_id, now),
        )?;
        // Housekeeping: expired sessions can never be used again.
        transaction.execute("DELETE FROM sessions WHERE expires_at <= ?1", [now])?;
        transaction.execute(
            "INSERT INTO sessions (secret_sha256, user_id, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4)",
            (
                secrets::secret_sha256(&secret),
                user_id,
                now,
                now.saturating_add(SESSION_TTL_SECONDS),
            ),
        )?;
        transaction.commit()?;
        Ok(secret)
    }

    /// The principal of a browser session, or `None` when the secret is
    /// unknown or the session has expired. Scopes follow the user's role now.
    pub fn session(&self, secret: &str) -> Result<Option<Principal>, StoreError> {
        if secret.is_empty() || secret.len() > MAX_SECRET_LEN {
            return Ok(None);
        }
        let now = self.now();
        let connection = self.connection();
        // Asked on every authenticated request: prepared once per connection.
        let found = connection
            .prepare_cached(&format!(
                "SELECT {USER_COLUMNS}, s.expires_at FROM sessions s
                 JOIN users u ON u.id = s.user_id
                 WHERE s.secret_sha256 = ?1 AND s.expires_at > ?2"
            ))?
            .query_row((secrets::secret_sha256(secret), now), |row| {
                Ok((user_from_row(row)?, row.get::<_, i64>(4)?))
            })
            .optional()?;
        Ok(found.map(|(user, expires_at)| Principal {
            scopes: user.role.session_scopes(),
            user,
            kind: PrincipalKind::Session,
            expires_at,
            audience: None,
        }))
    }

    /// Ends a browser session (sign-out). Unknown secrets are ignored.
    pub fn delete_session(&self, secret: &str) -> Result<(), StoreError> {
        let connection = self.connection();
        connection.execute(
            "DELETE FROM sessions WHERE secret_sha256 = ?1",
            [secrets::secret_sha256(secret)],
        )?;
        Ok(())
    }

    // --- tokens ------------------------------------------------------------

    /// Mints a token for `user_id` with exactly `scopes`. Returns the secret
    /// (`sasha_at_…`, `sasha_ak_…` or `sasha_ct_…`); only its sha256 is stored.
    ///
    /// Lifetimes: an access token lasts `ttl_seconds` (default 30 days, at most
    /// 365); a chat-session token always lasts 2 hours (a `ttl_seconds` is
    /// refused); an API key never expires without a `ttl_seconds` (at most 365
    /// days with one). `apps:write` needs an admin or staff user.
    pub fn mint_token(
        &self,
        user_id: &str,
        kind: TokenKind,
        scopes: &BTreeSet<Scope>,
        ttl_seconds: Option<u64>,
    ) -> Result<String, StoreError> {
        self.mint_token_as(user_id, kind, scopes, ttl_seconds, None)
            .map(|(secret, _)| secret)
    }

    /// [`Store::mint_token`] with the person's own `label` for it; also
    /// returns the token's number.
    fn mint_token_as(
        &self,
        user_id: &str,
        kind: TokenKind,
        scopes: &BTreeSet<Scope>,
        ttl_seconds: Option<u64>,
        label: Option<&str>,
    ) -> Result<(String, i64), StoreError> {
        if scopes.is_empty() {
            return Err(StoreError::NoScopes);
        }
        let user = self.user(user_id)?.ok_or(StoreError::UnknownUser)?;
        if let Some(scope) = scopes.iter().find(|scope| !user.role.allows(**scope)) {
            return Err(StoreError::ScopeNotAllowed {
                scope: *scope,
                role: user.role,
            });
        }
        let ttl = match (kind, ttl_seconds) {
            (_, Some(0)) => return Err(StoreError::InvalidTtl("it must be positive".into())),
            (TokenKind::ChatSession, Some(_)) => {
                return Err(StoreError::InvalidTtl(
                    "a chat-session token always lasts 2 hours".into(),
                ));
            }
            (_, Some(ttl)) if ttl > TOKEN_MAX_TTL_SECONDS => {
                return Err(StoreError::InvalidTtl("it must be at most 365 days".into()));
            }
            (TokenKind::ChatSession, None) => Some(CHAT_SESSION_TTL_SECONDS),
            (TokenKind::Access, None) => Some(ACCESS_TOKEN_DEFAULT_TTL_SECONDS),
            (TokenKind::ApiKey, None) => None,
            (_, Some(ttl)) => Some(ttl),
        };
        let now = self.now();
        let expires_at = ttl.map(|ttl| now.saturating_add(seconds_i64(ttl)));
        let secret = format!("{}{}", kind.prefix(), secrets::random_secret());
        let connection = self.connection();
        connection.execute(
            "INSERT INTO tokens (kind, user_id, scopes, secret_sha256, created_at, expires_at, label)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            (
                kind,
                user_id,
                scopes_to_text(scopes),
                secrets::secret_sha256(&secret),
                now,
                expires_at,
                label,
            ),
        )?;
        Ok((secret, connection.last_insert_rowid()))
    }

    /// The principal of a bearer token, or `None` when it is unknown, expired
    /// or revoked, or is an OAuth token whose connection is revoked. Scopes
    /// are the minted ones; one the user's role no longer allows is dropped,
    /// and nothing is ever added. The audience check is the caller's: see
    /// [`Principal::audience`].
    pub fn token(&self, secret: &str) -> Result<Option<Principal>, StoreError> {
        if secret.len() > MAX_SECRET_LEN {
            return Ok(None);
        }
        let Some(claimed) = TokenKind::of_secret(secret) else {
            return Ok(None);
        };
        let now = self.now();
        let found = {
            let connection = self.connection();
            connection
                .prepare_cached(&format!(
                    "SELECT {USER_COLUMNS}, t.kind, t.scopes, t.expires_at, t.audience,
                            t.id, t.last_used_at, t.grant_id FROM tokens t
                     JOIN users u ON u.id = t.user_id
                     LEFT JOIN oauth_grants g ON g.id = t.grant_id
                     WHERE t.secret_sha256 = ?1 AND t.revoked_at IS NULL
                       AND (t.expires_at IS NULL OR t.expires_at > ?2)
                       AND (t.grant_id IS NULL OR g.revoked_at IS NULL)"
                ))?
                .query_row((secrets::secret_sha256(secret), now), |row| {
                    Ok((
                        user_from_row(row)?,
                        row.get::<_, TokenKind>(4)?,
                        row.get::<_, String>(5)?,
                        row.get::<_, Option<i64>>(6)?,
                        row.get::<_, Option<String>>(7)?,
                        row.get::<_, i64>(8)?,
                        row.get::<_, Option<i64>>(9)?,
                        row.get::<_, Option<String>>(10)?,
                    ))
                })
                .optional()?
        };
        let Some((user, kind, scopes, expires_at, audience, id, last_used_at, grant_id)) = found
        else {
            return Ok(None);
        };
        if kind != claimed {
            return Ok(None);
        }
        self.note_token_use(now, id, last_used_at, grant_id.as_deref());
        let mut scopes = scopes_from_text(&scopes)?;
        scopes.retain(|scope| user.role.allows(*scope));
        Ok(Some(Principal {
            user,
            kind: kind.into(),
            scopes,
            expires_at: expires_at.unwrap_or(i64::MAX),
            audience,
        }))
    }

    /// Revokes a token; `false` when it was unknown or already revoked.
    pub fn revoke_token(&self, secret: &str) -> Result<bool, StoreError> {
        let now = self.now();
        let connection = self.connection();
        let changed = connection.execute(
            "UPDATE tokens SET revoked_at = ?1 WHERE secret_sha256 = ?2 AND revoked_at IS NULL",
            (now, secrets::secret_sha256(secret)),
        )?;
        Ok(changed > 0)
    }

    // --- registry and grants -----------------------------------------------

    /// Records a valid app's current revision, schema hash and public action
    /// catalogue. Returns `true` on the app id's first discovery ever; only
    /// then is `manage` granted to every admin and staff user existing at
    /// this moment (audited as `system`). A returning id, including one that
    /// disappeared and came back or one seen again after a restart, keeps its
    /// grants exactly as they are.
    pub fn register_app(
        &self,
        app_id: &str,
        revision: &str,
        schema_hash: Option<&str>,
        actions_json: &str,
        read_policy: &ReadPolicy,
    ) -> Result<bool, StoreError> {
        let read_policy = serde_json::to_string(read_policy).unwrap_or_else(|_| "{}".to_owned());
        let now = self.now();
        let mut connection = self.connection();
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let previous: Option<String> = transaction
            .query_row(
                "SELECT current_revision FROM app_registry WHERE app_id = ?1",
                [app_id],
                |row| row.get(0),
            )
            .optional()?;
        let first = previous.is_none();
        match previous {
            Some(previous) => {
                transaction.execute(
                    "UPDATE app_registry
                     SET current_revision = ?2, schema_hash = ?3, actions_json = ?4, last_seen_at = ?5,
                         read_policy = ?6
                     WHERE app_id = ?1",
                    (app_id, revision, schema_hash, actions_json, now, &read_policy),
                )?;
                if previous != revision {
                    audit(
                        &transaction,
                        now,
                        ACTOR_SYSTEM,
                        action::APP_REVISION_CHANGED,
                        Some(app_id),
                        None,
                        Some(&previous),
                        Some(revision),
                    )?;
                }
            }
            None => {
                transaction.execute(
                    "INSERT INTO app_registry
                     (app_id, current_revision, schema_hash, actions_json, first_discovered_at, last_seen_at,
                      read_policy)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)",
                    (app_id, revision, schema_hash, actions_json, now, &read_policy),
                )?;
                audit(
                    &transaction,
                    now,
                    ACTOR_SYSTEM,
                    action::APP_REGISTERED,
                    Some(app_id),
                    None,
                    None,
                    Some(revision),
                )?;
                let privileged: Vec<String> = {
                    let mut statement = transaction.prepare(
                        "SELECT id FROM users WHERE role IN ('admin', 'staff') ORDER BY username",
                    )?;
                    statement
                        .query_map([], |row| row.get(0))?
                        .collect::<Result<_, _>>()?
                };
                for user_id in &privileged {
                    set_grant(
                        &transaction,
                        now,
                        ACTOR_SYSTEM,
                        app_id,
                        user_id,
                        AppAccess::Manage,
                    )?;
                }
            }
        }
        transaction.commit()?;
        Ok(first)
    }

    /// The read policy of `app_id`'s last registered (valid) revision; `None`
    /// for an app never registered, or registered before the policy was kept.
    pub fn read_policy(&self, app_id: &str) -> Result<Option<ReadPolicy>, StoreError> {
        let connection = self.connection();
        let text: Option<Option<String>> = connection
            .query_row(
                "SELECT read_policy FROM app_registry WHERE app_id = ?1",
                [app_id],
                |row| row.get(0),
            )
            .optional()?;
        Ok(text
            .flatten()
            .and_then(|text| serde_json::from_str(&text).ok()))
    }

    /// The registry row of `app_id`.
    pub fn registered_app(&self, app_id: &str) -> Result<Option<RegisteredApp>, StoreError> {
        let connection = self.connection();
        let app = connection
            .query_row(
                "SELECT app_id, current_revision, schema_hash, actions_json, first_discovered_at, last_seen_at
                 FROM app_registry WHERE app_id = ?1",
                [app_id],
                registered_app_from_row,
            )
            .optional()?;
        Ok(app)
    }

    /// Every registered app id's row, by id (including apps no longer on disk).
    pub fn registered_apps(&self) -> Result<Vec<RegisteredApp>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(
            "SELECT app_id, current_revision, schema_hash, actions_json, first_discovered_at, last_seen_at
             FROM app_registry ORDER BY app_id",
        )?;
        let apps = statement
            .query_map([], registered_app_from_row)?
            .collect::<Result<_, _>>()?;
        Ok(apps)
    }

    /// Sets `user_id`'s access to `app_id` (creating or changing the grant),
    /// audited with the access before and after. Granting what is already
    /// held changes nothing and writes no audit entry. `actor` is the acting
    /// user's id; `None` records `system`.
    pub fn grant(
        &self,
        app_id: &str,
        user_id: &str,
        access: AppAccess,
        actor: Option<&str>,
    ) -> Result<(), StoreError> {
        let actor = actor.unwrap_or(ACTOR_SYSTEM);
        let now = self.now();
        let mut connection = self.connection();
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let app_known = transaction
            .query_row(
                "SELECT 1 FROM app_registry WHERE app_id = ?1",
                [app_id],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if !app_known {
            return Err(StoreError::UnknownApp);
        }
        let user_known = transaction
            .query_row("SELECT 1 FROM users WHERE id = ?1", [user_id], |_| Ok(()))
            .optional()?
            .is_some();
        if !user_known {
            return Err(StoreError::UnknownUser);
        }
        member_apps::check_member_grant(&transaction, app_id, user_id, Some(access))??;
        set_grant(&transaction, now, actor, app_id, user_id, access)?;
        transaction.commit()?;
        Ok(())
    }

    /// Removes `user_id`'s grant on `app_id`, audited; `false` when there was
    /// none. Takes effect on the very next [`Store::access`].
    pub fn revoke(
        &self,
        app_id: &str,
        user_id: &str,
        actor: Option<&str>,
    ) -> Result<bool, StoreError> {
        let actor = actor.unwrap_or(ACTOR_SYSTEM);
        let now = self.now();
        let mut connection = self.connection();
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let before: Option<AppAccess> = transaction
            .query_row(
                "SELECT access FROM grants WHERE app_id = ?1 AND user_id = ?2",
                [app_id, user_id],
                |row| row.get(0),
            )
            .optional()?;
        let Some(before) = before else {
            return Ok(false);
        };
        member_apps::check_member_grant(&transaction, app_id, user_id, None)??;
        transaction.execute(
            "DELETE FROM grants WHERE app_id = ?1 AND user_id = ?2",
            [app_id, user_id],
        )?;
        audit(
            &transaction,
            now,
            actor,
            action::GRANT_CHANGED,
            Some(app_id),
            Some(user_id),
            Some(before.as_str()),
            None,
        )?;
        transaction.commit()?;
        Ok(true)
    }

    /// `user_id`'s access to `app_id`, read from the database on every call.
    /// A withdrawn app grants nobody anything until it is restored (its
    /// grants stay as they are; see [`Store::withdraw_app`]).
    pub fn access(&self, app_id: &str, user_id: &str) -> Result<Option<AppAccess>, StoreError> {
        let connection = self.connection();
        let access = connection
            .query_row(
                "SELECT g.access FROM grants g JOIN app_registry r ON r.app_id = g.app_id
                 WHERE g.app_id = ?1 AND g.user_id = ?2 AND r.withdrawn_at IS NULL",
                [app_id, user_id],
                |row| row.get(0),
            )
            .optional()?;
        Ok(access)
    }

    /// Records that the access token `secret` may write `app_id` as a script
    /// (an operator's explicit consent at mint time): its writes there need no
    /// model confirmation and are audited with source `automation`. The
    /// token's grants still decide what it may do. Audited as
    /// `token.write-consent`. An app never discovered is `UnknownApp`.
    pub fn consent_writes(
        &self,
        secret: &str,
        app_id: &str,
        actor: &str,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let mut connection = self.connection();
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let known: bool = transaction.query_row(
            "SELECT EXISTS (SELECT 1 FROM app_registry WHERE app_id = ?1)",
            [app_id],
            |row| row.get(0),
        )?;
        if !known {
            return Err(StoreError::UnknownApp);
        }
        let hash = secrets::secret_sha256(secret);
        let (token_id, kind): (i64, TokenKind) = transaction
            .query_row(
                "SELECT id, kind FROM tokens WHERE secret_sha256 = ?1 AND revoked_at IS NULL",
                [&hash],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?
            .ok_or(StoreError::UnknownToken)?;
        // Chat-session tokens and API keys are driven by models or read
        // only: neither may write unconfirmed.
        if kind != TokenKind::Access {
            return Err(StoreError::UnknownToken);
        }
        transaction.execute(
            "INSERT OR IGNORE INTO token_write_consents (token_sha256, app_id, granted_by, granted_at)
             VALUES (?1, ?2, ?3, ?4)",
            (&hash, app_id, actor, now),
        )?;
        audit(
            &transaction,
            now,
            actor,
            "token.write-consent",
            Some(app_id),
            Some(&token_id.to_string()),
            None,
            None,
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// Whether the token `secret` was consented to write `app_id` as a
    /// script; read on every call, so revoking the token ends it.
    pub fn write_consent(&self, secret: &str, app_id: &str) -> Result<bool, StoreError> {
        let connection = self.connection();
        let consented = connection
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM token_write_consents c JOIN tokens t
                   ON t.secret_sha256 = c.token_sha256
                 WHERE c.token_sha256 = ?1 AND c.app_id = ?2 AND t.revoked_at IS NULL)",
            )?
            .query_row((secrets::secret_sha256(secret), app_id), |row| row.get(0))?;
        Ok(consented)
    }

    /// Every app `user_id` has a grant on, with the access (one query, for
    /// listing apps); withdrawn apps are left out.
    pub fn access_by_app(&self, user_id: &str) -> Result<BTreeMap<String, AppAccess>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare_cached(
            "SELECT g.app_id, g.access FROM grants g JOIN app_registry r ON r.app_id = g.app_id
             WHERE g.user_id = ?1 AND r.withdrawn_at IS NULL",
        )?;
        let grants = statement
            .query_map([user_id], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        Ok(grants)
    }

    /// Every grant on `app_id`, by username.
    pub fn grants(&self, app_id: &str) -> Result<Vec<Grant>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(
            "SELECT g.app_id, g.user_id, u.username, g.access, g.granted_at, g.granted_by
             FROM grants g JOIN users u ON u.id = g.user_id
             WHERE g.app_id = ?1 ORDER BY u.username",
        )?;
        let grants = statement
            .query_map([app_id], |row| {
                Ok(Grant {
                    app_id: row.get(0)?,
                    user_id: row.get(1)?,
                    username: row.get(2)?,
                    access: row.get(3)?,
                    granted_at: row.get(4)?,
                    granted_by: row.get(5)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(grants)
    }

    // --- audit -------------------------------------------------------------

    /// Records that `actor` changed the app source file `path` (sha256 of the
    /// bytes before and after; `None` for absent).
    pub fn record_source_change(
        &self,
        app_id: &str,
        path: &str,
        actor: &str,
        before_sha256: Option<&str>,
        after_sha256: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let mut connection = self.connection();
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        audit(
            &transaction,
            now,
            actor,
            action::APP_SOURCE_CHANGED,
            Some(app_id),
            Some(path),
            before_sha256,
            after_sha256,
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// The audit log, oldest first; only `app_id`'s entries when given.
    pub fn audit_entries(&self, app_id: Option<&str>) -> Result<Vec<AuditEntry>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(
            "SELECT id, at, actor, action, app_id, subject, before, after
             FROM authorization_audit_log
             WHERE ?1 IS NULL OR app_id = ?1
             ORDER BY id",
        )?;
        let entries = statement
            .query_map([app_id], |row| {
                Ok(AuditEntry {
                    id: row.get(0)?,
                    at: row.get(1)?,
                    actor: row.get(2)?,
                    action: row.get(3)?,
                    app_id: row.get(4)?,
                    subject: row.get(5)?,
                    before: row.get(6)?,
                    after: row.get(7)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(entries)
    }
}

fn registered_app_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RegisteredApp> {
    Ok(RegisteredApp {
        app_id: row.get(0)?,
        current_revision: row.get(1)?,
        schema_hash: row.get(2)?,
        actions_json: row.get(3)?,
        first_discovered_at: row.get(4)?,
        last_seen_at: row.get(5)?,
    })
}
