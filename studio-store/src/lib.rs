//! studio-store: the core database (`DB_PATH`): users, browser sessions,
//! tokens, people and invitations, OAuth clients and grants, the app
//! registry and grants, the append-only authorization audit log,
//! confirmation tokens for model-invoked writes (`confirmations`), the
//! revision ledger (`ledger`: every validated revision's files and resource,
//! content-addressed), drafts, member apps, the assistant's conversations,
//! the documents users upload (`uploads`), app chat's conversations
//! (`app_chat`), improvement suggestions, and where each app's data is
//! served when several data-workers share the data plane (`placement`).
//! This is the only code that opens `DB_PATH`; studio-core and the operator
//! CLI (`sasha admin`) both go through it, possibly at the same time, so
//! every write runs in a `BEGIN IMMEDIATE` transaction on a WAL database
//! with a 5 s busy timeout ([`BUSY_TIMEOUT`], also PostgreSQL's wait for the
//! writers' lock).
//!
//! The API is blocking (rusqlite); async callers run it through
//! [`blocking`], which also turns a [`StoreError`] into the envelope
//! ([`store_error`]). Domain types go in and out: no rusqlite type, no HTTP
//! and no wire message is part of it, so a second implementation of the
//! same calls (another database) can stand behind it.
//!
//! What it must not do: open an app's data file (that is data-worker's), cache
//! an access decision (every check reads the database, so a revocation applies
//! to the very next call), widen a token's scopes, decide who may ask (its
//! callers do), or log, return or store a secret. Sessions and tokens are
//! stored as sha256 of their secret, passwords as argon2id PHC strings; the
//! only place a secret appears is the return value of the call that minted it.
//!
//! Each table's calls live in a sibling module (`users`, `tokens`, `grants`,
//! `oauth`, `people`, …); this module keeps the shared types and helpers and
//! opening the database.

mod app_chat;
mod app_creation;
mod approvals;
mod assistant;
mod blocking;
mod confirmations;
mod copy;
mod db;
mod drafts;
mod grants;
mod history;
mod lifecycle;
mod member_apps;
mod oauth;
mod oauth_requests;
mod package_heads;
mod people;
mod schema;
mod schema_postgres;
mod scim;
mod secrets;
mod sso;
#[cfg(test)]
mod tests;
mod throttles;
mod tokens;
mod uploads;
mod users;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::Connection;

use crate::db::{Conn, DbError, OptionalExtension as _, Row, Sql, Tx};
use serde::{Deserialize, Serialize};

pub use sasha_contract::caller::{AppAccess, PrincipalKind, Role as UserRole, Scope, TokenOrigin};

pub use self::app_chat::{AppChatLimits, AppChatMessage, AppChatRole, TRUNCATED_NOTE};
pub use self::app_creation::creation_action;
pub use self::approvals::{
    Approval, ApprovalDecision, ApprovalOutcome, KEEP_DECIDED_SECONDS, REPLICA_HEARTBEAT_SECONDS,
    REPLICA_LIVE_SECONDS,
};
pub use self::assistant::{Conversation, MAX_CONVERSATIONS, MAX_MESSAGES};
pub use self::blocking::{blocking, store_error};
pub use self::confirmations::{
    CONFIRMATION_TOKEN_PREFIX, CONFIRMATION_TTL_SECONDS, ConfirmationRefusal, ConfirmationResult,
    ConfirmedCall, IssuedConfirmation, MAX_CONFIRMATION_ARGUMENTS_BYTES,
    MAX_CONFIRMATION_TOOL_CHARS, MAX_IDEMPOTENCY_KEY_CHARS, MAX_LIVE_CONFIRMATIONS_PER_USER,
    RedeemedConfirmation,
};
pub use self::copy::{CopyError, CopyReport, TableCopy, copy_to_postgres};
pub use self::drafts::{
    Current, Decision, Draft, DraftFile, DraftShape, Ending, Versions, draft_action,
};
pub use self::history::{RevertEntry, history_action};
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
pub use self::oauth_requests::ParkedRequest;
pub use self::package_heads::{Advanced, PackageHead};
pub use self::people::{
    INVITATION_TTL_SECONDS, Invitation, InvitationView, LinkPurpose, MAX_TOKEN_LABEL_CHARS, Person,
    RESET_TTL_SECONDS, Removed, TOKEN_USE_PRECISION_SECONDS, TokenEntry, people_action,
};
pub use self::scim::{
    MAX_LIVE_SCIM_TOKENS, MAX_SCIM_TOKEN_LABEL_CHARS, MAX_SCIM_VALUE_CHARS, RoleFor,
    SCIM_ACTOR_PREFIX, ScimAttributes, ScimDirectoryView, ScimGroup, ScimGroupAttributes,
    ScimGroupRef, ScimMember, ScimPage, ScimPerson, ScimQuery, ScimToken, scim_action,
};
pub use self::sso::{
    ACTOR_IDENTITY_PROVIDER, MAX_SSO_ATTEMPTS, SSO_ATTEMPT_TTL_SECONDS, SsoAttempt, SsoPerson,
    SsoSignIn, TakenAttempt,
};
pub use self::suggestions::{
    MAX_SUGGESTIONS_PER_DAY, SUGGESTION_WINDOW_SECONDS, StoredSuggestion, Suggestion,
    SuggestionKind, SuggestionMetadata, SuggestionRefusal, SuggestionResult, SuggestionSeverity,
};
pub use self::throttles::Tier;
pub use self::uploads::{Imported, NewUpload, UploadOutcome};

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
/// How long a call waits for another writer before it fails as
/// [`StoreError::Busy`]: SQLite's busy timeout, and on PostgreSQL the
/// `lock_timeout` of every pooled connection (the writers' lock included).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Longer presented credentials are refused without a lookup.
const MAX_SECRET_LEN: usize = 256;

/// A string does not name a value of one of the store's own closed enums
/// below (the caller vocabulary's words are `sasha_contract::caller`'s).
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

        $crate::db::bind_word!($name);
    };
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

// Declared after `wire_enum!`, which they use.
mod ledger;
mod placement;
mod suggestions;

pub use self::ledger::{
    DEFAULT_REVISION_RETENTION, MAX_REVISION_SUMMARY_CHARS, Recorded, RevisionContent,
    RevisionEntry, RevisionFile, RevisionOrigin, RevisionSurface, SUMMARY_FOUND_ON_DISK,
    SUMMARY_SEEDED,
};
pub use self::placement::{
    Assignment, DataWorker, InvalidWorkerUrl, LeaseGrant, MAX_WORKER_URL_CHARS, Moved, Placement,
    PlacementEvent, PlacementReason, PlacementRefusal, Released, Route, WorkerId, WorkerUrl,
};

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
    /// Where the account comes from, so who may change it (`users.source`,
    /// migration 24).
    pub source: UserSource,
}

/// Where an account comes from (`users.source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UserSource {
    /// Made here (an invitation, `sasha admin user add`): signs in with a
    /// password set here.
    Password,
    /// Made at its first sign-in through the organisation's OpenID provider;
    /// has no password.
    Oidc,
    /// Provisioned by the organisation's directory over SCIM; has no password.
    Scim,
}

impl UserSource {
    pub fn as_str(self) -> &'static str {
        match self {
            UserSource::Password => "password",
            UserSource::Oidc => "oidc",
            UserSource::Scim => "scim",
        }
    }

    pub fn parse(text: &str) -> Option<UserSource> {
        [UserSource::Password, UserSource::Oidc, UserSource::Scim]
            .into_iter()
            .find(|source| source.as_str() == text)
    }
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
    /// Where a token came from; `None` for a session.
    pub origin: Option<TokenOrigin>,
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
    /// A password reset link for someone who never set a password.
    #[error(
        "that user has not accepted their invitation yet; make them a new invitation link instead"
    )]
    StillInvited,
    /// A password, or a link to set one, for a person who signs in through
    /// the organisation's provider.
    #[error(
        "that user signs in through the organisation's identity provider and has no password here"
    )]
    SignsInElsewhere,
    /// A change Studio cannot make to a person the organisation's directory
    /// provisions (SCIM): their role follows the directory's groups.
    #[error(
        "that person's role comes from the organisation's directory (SCIM): change their groups there"
    )]
    ManagedByDirectory,
    /// A SCIM attribute another resource already holds (`externalId`, a
    /// group's `displayName`).
    #[error("{0} is already taken")]
    ScimTaken(&'static str),
    /// A SCIM attribute value Sasha does not accept.
    #[error("{0}")]
    InvalidScimValue(String),
    /// No SCIM group has that id.
    #[error("no such group")]
    UnknownScimGroup,
    /// An app an invitation would grant that the inviting admin cannot give.
    #[error("you cannot give access to {app_id} with an invitation: {reason}")]
    InvitationGrant {
        app_id: String,
        reason: &'static str,
    },
    /// A renewed invitation for a disabled person.
    #[error("that user is disabled; enable them first")]
    UserDisabled,
    /// A change of people by a user who, read in the change's own
    /// transaction, is no longer an enabled admin.
    #[error("only an admin changes who has an account, and you are no longer one")]
    NotAdmin,
    /// A role change, disabling or removal that would leave no enabled,
    /// signed-up admin.
    #[error("that would leave no admin who can sign in; make another person an admin first")]
    LastAdmin,
    #[error("invalid token name: {0}")]
    InvalidTokenLabel(String),
    #[error("a token needs at least one scope")]
    NoScopes,
    #[error("invalid token lifetime: {0}")]
    InvalidTtl(String),
    /// SQLITE_BUSY or SQLITE_LOCKED after the busy timeout: retryable.
    #[error("the core database is busy; try again")]
    Busy,
    /// SQLite cannot read the file (damaged pages, not a database, an I/O
    /// failure): retryable, since an administrator renaming a backup into
    /// place clears it without a restart ([`Store::connection`] reopens a
    /// replaced file).
    #[error("the core database cannot be read: {0}")]
    Unreadable(String),
    /// PostgreSQL cannot be reached (down, restarting, refusing the
    /// credentials, or every pooled connection busy): retryable, since the
    /// database coming back clears it.
    #[error("the core database cannot be reached: {0}")]
    Unavailable(String),
    /// Anything else from SQLite or the file system. Never shown to users.
    #[error("core database error: {0}")]
    Database(String),
}

impl StoreError {
    /// Whether the same call may succeed if simply retried.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StoreError::Busy | StoreError::Unreadable(_) | StoreError::Unavailable(_)
        )
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
                | StoreError::InvalidScimValue(_)
        )
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> StoreError {
        match error.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                StoreError::Busy
            }
            Some(
                rusqlite::ErrorCode::DatabaseCorrupt
                | rusqlite::ErrorCode::NotADatabase
                | rusqlite::ErrorCode::SystemIoFailure,
            ) => StoreError::Unreadable(error.to_string()),
            _ => StoreError::Database(error.to_string()),
        }
    }
}

impl From<DbError> for StoreError {
    fn from(error: DbError) -> StoreError {
        use postgres::error::SqlState;
        match error {
            DbError::Sqlite(error) => error.into(),
            DbError::Postgres(error) => match error.code() {
                // Waited out the lock timeout, or lost a race PostgreSQL
                // detected: the same call succeeds when retried.
                Some(
                    &SqlState::LOCK_NOT_AVAILABLE
                    | &SqlState::T_R_SERIALIZATION_FAILURE
                    | &SqlState::T_R_DEADLOCK_DETECTED
                    | &SqlState::QUERY_CANCELED,
                ) => StoreError::Busy,
                // Shutting down, restarting, out of connections.
                Some(
                    &SqlState::ADMIN_SHUTDOWN
                    | &SqlState::CRASH_SHUTDOWN
                    | &SqlState::CANNOT_CONNECT_NOW
                    | &SqlState::TOO_MANY_CONNECTIONS,
                ) => StoreError::Unavailable(db::describe_postgres(&error)),
                Some(_) => StoreError::Database(db::describe_postgres(&error)),
                // No SQL state: the connection itself failed.
                None => StoreError::Unavailable(db::describe_postgres(&error)),
            },
            DbError::Unreachable(detail) => StoreError::Unavailable(detail),
            other => StoreError::Database(other.to_string()),
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

/// A handle on the core database. Cheap to clone. On SQLite every clone
/// shares one connection behind a mutex (calls are short, and argon2 work
/// runs outside the lock); on PostgreSQL every clone shares one pool.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    /// Transactions committed through this handle's connections: counted by
    /// SQLite's commit hook, where studio-core confirms a request's writes in
    /// object storage when the count moved while it ran (replication).
    commits: Arc<std::sync::atomic::AtomicU64>,
    clock: Clock,
}

enum Backend {
    Sqlite {
        connection: Mutex<Connection>,
        /// The device and inode `connection` has open: another file renamed
        /// to `path` (a restored backup) is noticed and opened.
        file: Mutex<Option<(u64, u64)>>,
        path: PathBuf,
    },
    Postgres {
        /// Always `Some` until the handle's last clone drops it (`Drop`).
        pool: Option<db::PgPool>,
        /// Where, for messages: host, port and database, no credentials.
        place: String,
    },
}

impl Drop for Inner {
    /// PostgreSQL's blocking client closes its connections by blocking on a
    /// runtime of its own, which tokio forbids on an async thread: the last
    /// handle dropped there (studio-core's shutdown, a test) hands the pool
    /// to a plain thread to close.
    fn drop(&mut self) {
        if let Backend::Postgres { pool, .. } = &mut self.backend
            && let Some(pool) = pool.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            let _ = std::thread::Builder::new()
                .name("core-store-close".into())
                .spawn(move || drop(pool));
        }
    }
}

/// The device and inode at `path`, if there is a file.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path)
        .ok()
        .map(|metadata| (metadata.dev(), metadata.ino()))
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("at", &self.place())
            .finish_non_exhaustive()
    }
}

/// The longest user name: room for an e-mail address.
pub const MAX_USERNAME_CHARS: usize = 128;

/// Checks a username: 3–128 characters of `[A-Za-z0-9._@+-]`, starting with
/// a letter (an organisation's provider names people by e-mail address). A name is stored as typed and compared without regard to case
/// (ASCII, so SQLite's `NOCASE` folds it exactly): "Mia" signs in as "mia",
/// and two names differing only by case cannot both exist
/// ([`USERNAME_MATCHES`], the unique index of migration 15).
pub fn validate_username(username: &str) -> Result<(), StoreError> {
    let invalid = |reason: &str| Err(StoreError::InvalidUsername(reason.to_owned()));
    if !(3..=MAX_USERNAME_CHARS).contains(&username.len()) {
        return invalid(&format!(
            "it must have 3 to {MAX_USERNAME_CHARS} characters"
        ));
    }
    if !username.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return invalid("it must start with a letter");
    }
    if !username
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@' | '+'))
    {
        return invalid("it may contain only letters, digits, '.', '_', '-', '@' and '+'");
    }
    Ok(())
}

/// The one comparison of a user name, for `WHERE u.username` clauses: case
/// folded, so every lookup by name agrees with the unique index that keeps
/// names differing only by case apart (migration 15).
const USERNAME_MATCHES: &str = "COLLATE NOCASE";

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
const USER_COLUMNS: &str = "u.id, u.username, u.role, u.created_at, u.source";
/// The index of the first column a query selects after [`USER_COLUMNS`].
const AFTER_USER: usize = 5;

/// Whether `users u` can sign in at all: an account made here needs its
/// password (an invited person has '' until they accept); one from the
/// organisation's provider signs in there. The one rule of "signed up".
const SIGNED_UP: &str = "(u.password_hash <> '' OR u.source <> 'password')";

fn user_from_row(row: &Row<'_>) -> Result<User, DbError> {
    let source: String = row.get(4)?;
    Ok(User {
        id: row.get(0)?,
        username: row.get(1)?,
        role: row.get(2)?,
        created_at: row.get(3)?,
        source: UserSource::parse(&source).ok_or_else(|| DbError::Conversion {
            index: 4,
            detail: format!("unknown user source {source:?}"),
        })?,
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
            Scope::parse(scope).map_err(|error| StoreError::Database(format!("stored {error}")))
        })
        .collect()
}

/// Appends one audit entry inside the caller's transaction.
#[allow(clippy::too_many_arguments, reason = "one argument per audit column")]
fn audit(
    transaction: &Tx<'_>,
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
    transaction: &Tx<'_>,
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
fn insert_user(transaction: &Tx<'_>, user: &User, hash: &str) -> Result<(), StoreError> {
    let taken = transaction
        .query_row(
            &format!("SELECT 1 FROM users WHERE username = ?1 {USERNAME_MATCHES}"),
            [&user.username],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if taken {
        return Err(StoreError::UsernameTaken);
    }
    transaction.execute(
        "INSERT INTO users (id, username, role, password_hash, created_at, source)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        (
            &user.id,
            &user.username,
            user.role,
            hash,
            user.created_at,
            user.source.as_str(),
        ),
    )?;
    Ok(())
}

/// Counts every commit of `connection` in `commits`.
fn count_commits(
    connection: &mut Connection,
    commits: &Arc<std::sync::atomic::AtomicU64>,
) -> Result<(), StoreError> {
    let commits = Arc::clone(commits);
    connection.commit_hook(Some(move || {
        commits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // false: let the commit go ahead.
        false
    }))?;
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
        connection.busy_timeout(BUSY_TIMEOUT)?;
        // Several processes may open a fresh file at once (studio-core and the
        // operator CLI). Switching the journal to WAL can answer busy without
        // waiting on SQLite's busy handler, so the switch and the migration
        // are retried for as long as the busy timeout.
        let started = std::time::Instant::now();
        loop {
            match Store::prepare(&mut connection, db_path, clock()) {
                Err(StoreError::Busy) if started.elapsed() < BUSY_TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                outcome => break outcome?,
            }
        }
        let commits = Arc::new(std::sync::atomic::AtomicU64::new(0));
        count_commits(&mut connection, &commits)?;
        Ok(Store {
            inner: Arc::new(Inner {
                commits,
                backend: Backend::Sqlite {
                    connection: Mutex::new(connection),
                    file: Mutex::new(file_id(db_path)),
                    path: db_path.to_path_buf(),
                },
                clock,
            }),
        })
    }

    /// Connects to the PostgreSQL database at `url` (`postgres://…`) with a
    /// pool of `pool_size` connections, and applies every pending migration
    /// (several replicas starting at once take turns). `ca_file` verifies the
    /// server when the URL says `sslmode=require`. A write waits
    /// [`BUSY_TIMEOUT`] for the writers' lock.
    pub fn connect(
        url: &str,
        pool_size: u32,
        ca_file: Option<&Path>,
        clock: Clock,
    ) -> Result<Store, StoreError> {
        Store::connect_waiting(url, pool_size, ca_file, BUSY_TIMEOUT, clock)
    }

    /// [`Store::connect`], a write waiting `lock_timeout` for the writers'
    /// lock (tests of a held lock wait milliseconds, not seconds).
    pub(crate) fn connect_waiting(
        url: &str,
        pool_size: u32,
        ca_file: Option<&Path>,
        lock_timeout: Duration,
        clock: Clock,
    ) -> Result<Store, StoreError> {
        let (pool, place) = db::connect_postgres(url, pool_size, ca_file, lock_timeout)?;
        let mut connection = Conn::postgres(&pool)?;
        schema_postgres::migrate(&mut connection, clock())?;
        drop(connection);
        Ok(Store {
            inner: Arc::new(Inner {
                commits: Arc::new(std::sync::atomic::AtomicU64::new(0)),
                backend: Backend::Postgres {
                    pool: Some(pool),
                    place,
                },
                clock,
            }),
        })
    }

    /// A new connection on `db_path`, set up as [`Store::open`] sets one up.
    fn reopen(db_path: &Path, now: i64) -> Result<Connection, StoreError> {
        let mut connection = Connection::open(db_path)?;
        connection.busy_timeout(BUSY_TIMEOUT)?;
        Store::prepare(&mut connection, db_path, now)?;
        Ok(connection)
    }

    /// WAL, the connection's pragmas, and every pending migration.
    fn prepare(connection: &mut Connection, db_path: &Path, now: i64) -> Result<(), StoreError> {
        let mode: String =
            connection.query_row("PRAGMA journal_mode = WAL", (), |row| row.get(0))?;
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

    /// The database file, on SQLite.
    pub fn path(&self) -> Option<&Path> {
        match &self.inner.backend {
            Backend::Sqlite { path, .. } => Some(path),
            Backend::Postgres { .. } => None,
        }
    }

    /// Where the database is, for messages: the file, or PostgreSQL's host,
    /// port and database (never its credentials).
    pub fn place(&self) -> String {
        match &self.inner.backend {
            Backend::Sqlite { path, .. } => path.display().to_string(),
            Backend::Postgres { place, .. } => place.clone(),
        }
    }

    /// How many transactions this handle has committed (any clone; SQLite
    /// only, where the count drives confirming replication).
    pub fn commits(&self) -> u64 {
        self.inner.commits.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn now(&self) -> i64 {
        (self.inner.clock)()
    }

    /// The store's clock in unix seconds (a test's injected one), for checks
    /// made outside the database that must agree with it, such as an ID
    /// token's expiry.
    pub fn clock_seconds(&self) -> i64 {
        self.now()
    }

    /// Reads the schema, proving the database answers (for readiness).
    /// Waits behind a running write like any other call.
    pub fn check(&self) -> Result<(), StoreError> {
        let connection = self.connection()?;
        let sql = match connection.dialect() {
            db::Dialect::Sqlite => "SELECT count(*) FROM sqlite_schema",
            db::Dialect::Postgres => "SELECT count(*) FROM information_schema.tables",
        };
        connection.query_row(sql, (), |row| row.get::<_, i64>(0))?;
        Ok(())
    }

    /// A connection for one call. On SQLite, the one connection, reopened
    /// first when another file now sits at the database's path (an
    /// administrator renamed a restored backup into place after this one was
    /// found damaged): one `stat` per call, so recovering needs no restart; a
    /// file that cannot be set up is tried again on the next call. On
    /// PostgreSQL, one from the pool.
    fn connection(&self) -> Result<Conn<'_>, StoreError> {
        let (connection, file, path) = match &self.inner.backend {
            Backend::Postgres { pool, .. } => {
                let pool = pool
                    .as_ref()
                    .ok_or_else(|| StoreError::Unavailable("the store is being closed".into()))?;
                return Ok(Conn::postgres(pool)?);
            }
            Backend::Sqlite {
                connection,
                file,
                path,
            } => (connection, file, path),
        };
        // A panic while holding the lock rolls back any open transaction when
        // it unwinds, so the connection is still usable.
        let mut connection = connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut file = file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now_at_path = file_id(path);
        if now_at_path.is_some() && now_at_path != *file {
            // The old connection is closed first: closing the last connection
            // of a WAL database deletes `<path>-wal` by name, which must not
            // be the new file's.
            if let Ok(placeholder) = Connection::open_in_memory() {
                drop(std::mem::replace(&mut *connection, placeholder));
            }
            match Store::reopen(path, self.now()).and_then(|mut fresh| {
                count_commits(&mut fresh, &self.inner.commits)?;
                Ok(fresh)
            }) {
                Ok(fresh) => {
                    tracing::warn!(path = %path.display(), "core store: the database file was replaced; reopened it");
                    *connection = fresh;
                    *file = now_at_path;
                }
                Err(error) => {
                    // Tried again on the next call.
                    *file = None;
                    tracing::error!(path = %path.display(), %error, "core store: the replaced database file cannot be opened");
                }
            }
        }
        drop(file);
        Ok(Conn::sqlite(connection))
    }
}
