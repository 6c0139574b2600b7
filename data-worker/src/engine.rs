//! The storage engine: one hardened SQLite file per app, its migrations, the
//! platform's own tables (`_sasha_migrations`, `_sasha_idempotency`, `_sasha_audit`,
//! `_sasha_read_policy` ([`guard`]), `_sasha_cursor_key` ([`cursor_key`]))
//! and the two ways governed statements reach it: [`Engine::query`] for reads and
//! [`Engine::mutate`] for one write with its receipt and audit row in one
//! transaction. The audit ledger is hash-chained ([`ledger`]).
//!
//! The engine takes statements already built by the grammar (SQL text with bound
//! parameters); it never builds SQL from caller input itself and it never decides
//! who may do what. What it guarantees regardless of the statement it is handed:
//! an authorizer lets a governed statement read and write only the contract's
//! declared tables (no `ATTACH`, no `PRAGMA`, no DDL, no `sqlite_*` or `_sasha_*`
//! table), a progress handler stops a statement that runs past its deadline, and
//! SQLite's limits follow sqlite.org's high-security table.
//!
//! Every operation names a [`Target`]: the app's live file, or one
//! previewer's scratch copy of it for a draft preview ([`preview`]: a `VACUUM
//! INTO` snapshot of live under `.previews/` keeping only the rows the
//! previewer may read live, migrated for the draft's contract, kept in its
//! own slot; the live file is never opened for writing on a preview's behalf).
//! [`Engine::apply_contract`] publishes a contract: its pending migrations go
//! into the live file in the same one-transaction setup every open runs,
//! unless an applied migration drifted (then nothing is applied), or with a dry
//! run are only reported from a read-only connection. One copy helper
//! (`VACUUM INTO`, then `integrity_check`) makes both preview copies and the
//! backup [`Engine::back_up_and_remove`] takes, which also removes the app's
//! previews.
//!
//! It must never put SQL text, SQLite's own messages or file paths into an
//! [`AppError`] message: those go to the log next to the error's diagnostic id.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use sasha_contract::AppId;
use sasha_contract::caller::{CallSource, Initiator};
use sasha_contract::data::{
    DataContract, Migration, Schema, VERSION_COLUMN, is_platform_name, is_sqlite_internal,
    read_schema,
};
use sasha_proto::{AppError, ErrorCode};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

pub use cursor_key::CursorKey;
pub use guard::Approval;
pub use ledger::Publisher;

/// How long one governed statement (or one whole mutation) may run before the
/// progress handler interrupts it. The caller sees `APP_DATABASE_UNAVAILABLE`,
/// retryable: a retry may well succeed on a less loaded worker, and the caller
/// cannot tell a slow disk from a slow query anyway.
pub const STATEMENT_DEADLINE: Duration = Duration::from_secs(2);
/// How long SQLite waits for a lock another connection holds before giving up
/// with `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Prepared statements kept per app connection (rusqlite's LRU cache, keyed by
/// SQL text). SQLite runs the authorizer when it prepares (and re-prepares after
/// a schema change), so a cached statement keeps the decision made for its text
/// under the trust level and contract it was first prepared with. That is
/// sound because the two kinds of text never meet: the engine's own statements
/// start with `/* engine */`, which [`prepare_governed`] refuses, and a new
/// contract flushes the cache.
const STATEMENT_CACHE: usize = 64;

/// Marks the engine's own (trusted) statement texts; see [`STATEMENT_CACHE`].
const ENGINE_MARK: &str = "/* engine */";

/// Prepares a governed statement through the cache, refusing a text that
/// carries the engine's mark so it can never be served a statement prepared
/// as trusted.
pub(crate) fn prepare_governed<'c>(
    conn: &'c Connection,
    sql: &str,
) -> Result<rusqlite::CachedStatement<'c>, AppError> {
    if sql.contains(ENGINE_MARK) {
        return Err(internal("a governed statement carries the engine's mark"));
    }
    conn.prepare_cached(sql).map_err(sql_error)
}
/// The progress handler runs every this many virtual-machine instructions: often
/// enough to stop within milliseconds of the deadline, rarely enough to cost
/// nothing measurable.
const PROGRESS_OPS: i32 = 1000;
/// Most bytes of text one `query` may return, so a `limit` over huge rows cannot
/// build an unbounded response.
pub const MAX_RESULT_BYTES: usize = 8 * 1024 * 1024;

/// sqlite.org's "defense against dark arts" limits for untrusted input.
const LIMITS: [(Limit, i32); 11] = [
    (Limit::SQLITE_LIMIT_LENGTH, 1_000_000),
    (Limit::SQLITE_LIMIT_SQL_LENGTH, 100_000),
    (Limit::SQLITE_LIMIT_COLUMN, 100),
    (Limit::SQLITE_LIMIT_EXPR_DEPTH, 50),
    (Limit::SQLITE_LIMIT_COMPOUND_SELECT, 3),
    (Limit::SQLITE_LIMIT_VDBE_OP, 25_000),
    (Limit::SQLITE_LIMIT_FUNCTION_ARG, 8),
    (Limit::SQLITE_LIMIT_ATTACHED, 0),
    // The grammar allows patterns of 1,000 characters, escaped (up to 2 bytes a
    // character) in UTF-8 (up to 4 bytes): the bound must hold 8,002 bytes.
    (Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 8_192),
    // A list binds at most about 1,020 parameters (20 clauses of 50 `in` values,
    // cursor keys, owner, limit).
    (Limit::SQLITE_LIMIT_VARIABLE_NUMBER, 1_100),
    (Limit::SQLITE_LIMIT_TRIGGER_DEPTH, 10),
];

/// The platform's tables (the audit ledger's are [`ledger::TABLE_SQL`]).
/// Every statement is idempotent so it can run on every open.
const PLATFORM_SQL: &str = r#"
CREATE TABLE IF NOT EXISTS _sasha_migrations (
    number INTEGER PRIMARY KEY,
    file TEXT NOT NULL,
    checksum TEXT NOT NULL,
    applied_at TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS _sasha_idempotency (
    actor TEXT NOT NULL,
    operation TEXT NOT NULL,
    key TEXT NOT NULL,
    input_hash TEXT NOT NULL,
    result_json TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (actor, operation, key)
) STRICT;
"#;

/// UTC time with milliseconds, as every platform table records it.
const NOW_SQL: &str = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

/// The folder below `APP_DATA_ROOT` that keeps the backup of every data file
/// an admin deleted (`sasha backup` copies only top-level `<id>.sqlite`).
pub const BACKUP_DIR: &str = ".deleted-app-backups";

/// A removed data file's backup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedData {
    /// The backup's path relative to `APP_DATA_ROOT`.
    pub backup: String,
    pub bytes: u64,
    /// sha256 hex of the backup file.
    pub sha256: String,
}

/// Which data an operation runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// The app's live file, `APP_DATA_ROOT/<app_id>.sqlite`.
    Live(&'a str),
    /// One previewer's scratch copy for one draft preview (see [`preview`]).
    Preview {
        app_id: &'a str,
        preview: preview::Preview<'a>,
    },
}

impl<'a> From<&'a str> for Target<'a> {
    fn from(app_id: &'a str) -> Target<'a> {
        Target::Live(app_id)
    }
}

impl<'a> Target<'a> {
    /// The app id (checked) and, for a preview, the preview (checked where
    /// it is used); an id no app can have is `APP_NOT_FOUND`.
    fn split(self) -> Result<(&'a str, Option<preview::Preview<'a>>), AppError> {
        let (app_id, preview) = match self {
            Target::Live(app_id) => (app_id, None),
            Target::Preview { app_id, preview } => (app_id, Some(preview)),
        };
        if !valid_app_id(app_id) {
            return Err(AppError::from_code(ErrorCode::NotFound));
        }
        Ok((app_id, preview))
    }
}

/// What [`Engine::apply_contract`] applied (or, dry, would apply).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContractApplication {
    /// Migration files, in number order.
    pub applied: Vec<String>,
    /// Applied migrations the contract edits or no longer lists; when not
    /// empty nothing was applied.
    pub drift: Vec<Drift>,
}

/// Owns `APP_DATA_ROOT` and one connection per app, opened on first use.
/// Cloning is cheap and shares the connections.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("root", &self.inner.root)
            .finish_non_exhaustive()
    }
}

struct Inner {
    root: PathBuf,
    deadline: Duration,
    /// What a live file's commits must pass before they are acknowledged
    /// (replication to object storage); `None` when replication is off.
    durability: Option<Arc<dyn durable::Durability>>,
    /// One slot per app id, and one per open preview under
    /// `preview:<app>:<preview>:<previewer>` (a key no app id can spell). The map's lock is held only to find or create a slot,
    /// so opening (and migrating) one app never stalls the others; the slot's own
    /// lock serialises everything done with that app's connection.
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    /// Milliseconds added to SQLite's clock for the ledger's timestamps:
    /// always 0 but in tests, which move time instead of sleeping
    /// ([`Engine::advance_ledger_clock`]).
    ledger_offset_ms: AtomicI64,
}

/// One file's state: its writer connection (opened on first use), the
/// mutations waiting for it ([`commit`]) and, for a live file, its read-only
/// connections ([`readers`]).
#[derive(Default)]
struct Slot {
    handle: Mutex<Option<Handle>>,
    queue: Mutex<commit::Queue>,
    /// Transactions the writer committed for queued mutations (tests read it
    /// to see batches form).
    commits: AtomicU64,
    readers: readers::Pool,
}

/// One app's open connection.
struct Handle {
    conn: Connection,
    guard: Arc<Guard>,
    /// The contract this connection was last set up for; another hash (a new
    /// revision) runs setup again.
    contract_hash: String,
    /// A preview's connection: the name of the scratch file it has open,
    /// which says whose copy it is and for which contract and scope.
    scratch: Option<String>,
    /// The key of the file's list cursors, read once setup made sure of it.
    cursor_key: CursorKey,
}

/// What the authorizer and the progress handler consult; shared with the
/// closures SQLite calls.
struct Guard {
    /// Set only around the engine's own statements (setup, receipts, audit,
    /// describe). Everything else is a governed statement.
    trusted: AtomicBool,
    epoch: Instant,
    /// Nanoseconds since `epoch` after which the running statement is
    /// interrupted; 0 means no deadline.
    deadline_nanos: AtomicU64,
    /// Which tables a governed statement may reach.
    reach: Mutex<Reach>,
}

/// The tables a governed statement may reach, names lowercased.
#[derive(Default)]
struct Reach {
    /// The contract's declared tables: read and written.
    declared: BTreeSet<String>,
    /// Undeclared app tables linked to a declared one by a foreign key: read only,
    /// because SQLite authorizes the reads its foreign-key checks make (the parent
    /// key of a row written to a declared child, the children of a deleted parent)
    /// like any other read.
    linked: BTreeSet<String>,
}

impl Guard {
    fn now_nanos(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn expired(&self) -> bool {
        let deadline = self.deadline_nanos.load(Ordering::Relaxed);
        deadline != 0 && self.now_nanos() > deadline
    }

    /// Whether a governed statement may write `table` (or, with `read_only`, read it).
    fn may_touch(&self, table: &str, read_only: bool) -> bool {
        if is_sqlite_internal(table) || is_platform_name(table) {
            return false;
        }
        let table = table.to_ascii_lowercase();
        let reach = self.reach.lock().unwrap_or_else(PoisonError::into_inner);
        reach.declared.contains(&table) || (read_only && reach.linked.contains(&table))
    }

    fn authorize(&self, context: &AuthContext<'_>) -> Authorization {
        // The engine itself never attaches either; ATTACH is refused for everyone.
        if matches!(
            context.action,
            AuthAction::Attach { .. } | AuthAction::Detach { .. }
        ) {
            return Authorization::Deny;
        }
        if self.trusted.load(Ordering::SeqCst) {
            return Authorization::Allow;
        }
        // Only the main database holds app tables; `temp` is not for governed use.
        if context.database_name.is_some_and(|name| name != "main") {
            return Authorization::Deny;
        }
        let allowed = match context.action {
            AuthAction::Select | AuthAction::Recursive => true,
            AuthAction::Function { function_name } => {
                let name = function_name.to_ascii_lowercase();
                !(name.starts_with("sqlite_") || name == "load_extension")
            }
            // A read naming no database is of a common table expression (a
            // recursive CTE referring to itself), never of a stored table: SQLite
            // names the database of every real table it reads.
            AuthAction::Read { .. } if context.database_name.is_none() => true,
            AuthAction::Read { table_name, .. } => self.may_touch(table_name, true),
            AuthAction::Insert { table_name }
            | AuthAction::Delete { table_name }
            | AuthAction::Update { table_name, .. } => self.may_touch(table_name, false),
            // PRAGMA, every DDL, transactions and savepoints (the engine owns the
            // transaction), ANALYZE, REINDEX, virtual tables.
            _ => false,
        };
        if allowed {
            Authorization::Allow
        } else {
            Authorization::Deny
        }
    }
}

/// Sets the trusted flag for a scope and restores the previous value on drop,
/// also while unwinding, so a panic in governed code cannot leave it set.
struct TrustScope<'a> {
    guard: &'a Guard,
    previous: bool,
}

impl<'a> TrustScope<'a> {
    fn new(guard: &'a Guard, trusted: bool) -> TrustScope<'a> {
        let previous = guard.trusted.swap(trusted, Ordering::SeqCst);
        TrustScope { guard, previous }
    }
}

impl Drop for TrustScope<'_> {
    fn drop(&mut self) {
        self.guard.trusted.store(self.previous, Ordering::SeqCst);
    }
}

/// Arms the progress handler's deadline for a scope.
struct DeadlineScope<'a> {
    guard: &'a Guard,
}

impl<'a> DeadlineScope<'a> {
    fn new(guard: &'a Guard, limit: Duration) -> DeadlineScope<'a> {
        let limit = u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX);
        let deadline = guard.now_nanos().saturating_add(limit).max(1);
        guard.deadline_nanos.store(deadline, Ordering::Relaxed);
        DeadlineScope { guard }
    }
}

impl Drop for DeadlineScope<'_> {
    fn drop(&mut self) {
        self.guard.deadline_nanos.store(0, Ordering::Relaxed);
    }
}

/// An applied migration that no longer matches the contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Drift {
    pub number: u32,
    /// The file name recorded when it was applied.
    pub file: String,
    pub kind: DriftKind,
    /// The checksum recorded when it was applied.
    pub applied_checksum: String,
    /// The contract's checksum for that number, `None` when the contract no
    /// longer has it.
    pub contract_checksum: Option<String>,
}

/// Why an applied migration is drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriftKind {
    /// The migration's file changed after it was applied.
    ChecksumChanged,
    /// The database applied a migration the contract does not list.
    NotInContract,
}

/// The idempotency receipt's key: `(actor, operation, key)` with the hash of the
/// input it was first used with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptKey {
    pub actor: String,
    /// `create`, `update`, `delete` (or an action's operation name).
    pub operation: String,
    pub key: String,
    /// The request's hash ([`crate::grammar::request_hash`]): a key used
    /// again with another input is refused.
    pub input_hash: String,
}

/// Where a mutation came from, for the audit ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditMeta {
    pub source: CallSource,
    /// Who started it and through what.
    pub initiator: Initiator,
    /// The initiator's id, for the kinds that carry one
    /// ([`Initiator::takes_id`]).
    pub initiator_id: Option<String>,
    pub app_revision: String,
    /// The declared action that ran the mutation, if any.
    pub action_id: Option<String>,
}

/// The audit ledger's `operation` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AuditOperation {
    Create,
    Update,
    Delete,
}

impl AuditOperation {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditOperation::Create => "create",
            AuditOperation::Update => "update",
            AuditOperation::Delete => "delete",
        }
    }
}

/// What one write did, for the ledger.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    /// A declared table of the contract.
    pub table: String,
    pub record_id: String,
    pub operation: AuditOperation,
    /// The row before the write (`None` for a create).
    pub before: Option<serde_json::Value>,
    /// The row after the write (`None` for a delete).
    pub after: Option<serde_json::Value>,
}

/// What a mutation's work returns: the published result (stored in the receipt
/// and replayed verbatim) and an audit record per row it changed (one, or an
/// import's every row).
#[derive(Debug, Clone, PartialEq)]
pub struct MutationOutcome {
    pub result: serde_json::Value,
    pub audit: Vec<AuditRecord>,
}

/// Maps a SQLite failure to the closed envelope and logs the internals (SQLite's
/// message may quote SQL) under the error's diagnostic id. The grammar's work
/// inside [`Engine::mutate`] should map its statement errors with this too.
/// A constraint violation a caller caused is explained and logged by
/// `service::constraints::explain` instead, with the code the caller is told.
pub fn sql_error(error: rusqlite::Error) -> AppError {
    let app = sql_error_of(&error);
    tracing::warn!(diagnostic_id = %app.diagnostic_id, code = %app.code, %error, "data engine: sqlite failure");
    app
}

/// [`sql_error`]'s mapping, without the log line.
pub(crate) fn sql_error_of(error: &rusqlite::Error) -> AppError {
    use rusqlite::ErrorCode as E;
    let (failure, message) = match error {
        rusqlite::Error::SqliteFailure(failure, message) => (Some(failure), message.as_deref()),
        // Statement errors that point into the SQL text (a limit crossed while
        // preparing, say); the text itself goes only to the log.
        rusqlite::Error::SqlInputError { error, msg, .. } => (Some(error), Some(msg.as_str())),
        _ => (None, None),
    };
    match failure {
        Some(failure) => match failure.code {
            E::DatabaseBusy | E::DatabaseLocked => AppError::new(
                ErrorCode::DatabaseUnavailable,
                "the app's database is busy, try again",
            ),
            E::OperationInterrupted => AppError::new(
                ErrorCode::DatabaseUnavailable,
                "the operation ran past its time limit and was stopped, try again or ask for less",
            ),
            E::TooBig => AppError::new(
                ErrorCode::ResourceLimit,
                "a value is larger than the platform allows",
            ),
            E::DiskFull => AppError::new(
                ErrorCode::DatabaseUnavailable,
                "the app's database has no space left",
            ),
            E::DatabaseCorrupt | E::NotADatabase => {
                AppError::new(ErrorCode::DatabaseUnavailable, DAMAGED)
            }
            E::SystemIoFailure | E::CannotOpen | E::ReadOnly | E::FileLockingProtocolFailed => {
                AppError::new(
                    ErrorCode::DatabaseUnavailable,
                    "the app's database is unavailable",
                )
            }
            E::ConstraintViolation => AppError::new(
                ErrorCode::Conflict,
                "the change conflicts with the stored records",
            ),
            E::Unknown if message.is_some_and(is_limit_message) => AppError::new(
                ErrorCode::ResourceLimit,
                "the request is larger or deeper than the platform allows",
            ),
            _ => AppError::from_code(ErrorCode::Internal),
        },
        None => AppError::from_code(ErrorCode::Internal),
    }
}

/// What a call on a damaged file (SQLite found a page or header it cannot
/// read) is told. The code is the retryable `APP_DATABASE_UNAVAILABLE`: a
/// retry succeeds once an administrator has put a backup in the file's place,
/// with no restart, because [`forget_if_damaged`] closed the file's
/// connections.
const DAMAGED: &str =
    "the app's database file is damaged; an administrator must restore it from a backup";

/// Closes every connection of `slot` when `result` says its file is damaged,
/// so the next call opens the file afresh: a restored file (copied or renamed
/// into place) is then read, not the damaged pages or inode the old
/// connections still hold. Must be called without the slot's handle lock.
fn forget_if_damaged<R>(slot: &Slot, result: Result<R, AppError>) -> Result<R, AppError> {
    if let Err(error) = &result
        && error.code == ErrorCode::DatabaseUnavailable
        && error.message == DAMAGED
    {
        let mut handle = slot.handle.lock().unwrap_or_else(PoisonError::into_inner);
        slot.readers.reset("");
        if handle.take().is_some() {
            tracing::error!(diagnostic_id = %error.diagnostic_id, "data engine: a damaged database file; its connections are closed");
        }
    }
    result
}

/// SQLite reports most `sqlite3_limit` refusals as plain `SQLITE_ERROR`; only
/// the wording tells them apart.
fn is_limit_message(message: &str) -> bool {
    const MARKERS: [&str; 6] = [
        "too many",
        "too large",
        "too big",
        "too long",
        "too complex",
        "too deep",
    ];
    let message = message.to_ascii_lowercase();
    MARKERS.iter().any(|marker| message.contains(marker))
}

fn internal(what: &str) -> AppError {
    let error = AppError::from_code(ErrorCode::Internal);
    tracing::error!(diagnostic_id = %error.diagnostic_id, "data engine: {what}");
    error
}

/// App ids become file names, so only an [`AppId`] is accepted (no
/// separators, no dots, nothing a path could be built from); any other text
/// names no app, `APP_NOT_FOUND`.
fn valid_app_id(app_id: &str) -> bool {
    AppId::parse(app_id).is_ok()
}

/// The live file of app `app_id` below `app_data_root`; `None` for an id no
/// app can have.
pub fn live_file_of(app_data_root: &Path, app_id: &str) -> Option<PathBuf> {
    valid_app_id(app_id).then(|| live_file(app_data_root, app_id))
}

fn live_file(app_data_root: &Path, app_id: &str) -> PathBuf {
    app_data_root.join(format!("{app_id}.sqlite"))
}

/// The ids of the apps with a live file directly in `app_data_root`, sorted.
pub fn live_app_ids(app_data_root: &Path) -> std::io::Result<Vec<String>> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(app_data_root)? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        let name = entry.file_name();
        if let Some(id) = name.to_str().and_then(|name| name.strip_suffix(".sqlite"))
            && valid_app_id(id)
        {
            ids.push(id.to_owned());
        }
    }
    ids.sort();
    Ok(ids)
}

fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Engine {
    /// An engine over `app_data_root` with the default [`STATEMENT_DEADLINE`].
    /// Nothing is opened until an app is first used.
    pub fn new(app_data_root: &Path) -> Engine {
        Engine::with_deadline(app_data_root, STATEMENT_DEADLINE)
    }

    /// An engine whose governed statements (and whole mutations) are stopped
    /// after `deadline`.
    pub fn with_deadline(app_data_root: &Path, deadline: Duration) -> Engine {
        Engine::durable(app_data_root, deadline, None)
    }

    /// An engine whose live commits are acknowledged only once `durability`
    /// confirms them (see [`durable`]).
    pub fn durable(
        app_data_root: &Path,
        deadline: Duration,
        durability: Option<Arc<dyn durable::Durability>>,
    ) -> Engine {
        Engine {
            inner: Arc::new(Inner {
                root: app_data_root.to_path_buf(),
                deadline,
                durability,
                slots: Mutex::new(HashMap::new()),
                ledger_offset_ms: AtomicI64::new(0),
            }),
        }
    }

    /// Moves the ledger's clock `ms` milliseconds on (tests only: an undo to
    /// an instant needs writes on both sides of it without sleeping).
    #[cfg(test)]
    pub(crate) fn advance_ledger_clock(&self, ms: i64) {
        self.inner.ledger_offset_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Everything committed to `app_id`'s live file so far, by a write
    /// admitted under `admission`, may be acknowledged once this is `Ok`
    /// (always, without durability).
    fn confirm_durable(&self, app_id: &str, admission: durable::Admission) -> Result<(), AppError> {
        match &self.inner.durability {
            Some(durability) => durability.committed(app_id, &self.live_path(app_id), admission),
            None => Ok(()),
        }
    }

    /// Whether a write to `app_id`'s live file may begin now, and under
    /// what.
    fn admit_write(&self, app_id: &str) -> Result<durable::Admission, AppError> {
        match &self.inner.durability {
            Some(durability) => durability.admit(app_id, &self.live_path(app_id)),
            None => Ok(durable::Admission { epoch: 0 }),
        }
    }

    /// Closes the app's live connections, its writer and its readers, so
    /// that the next call opens the file afresh: the app moved to another
    /// worker, or its file is about to be replaced by a restore. A batch
    /// running on the writer finishes first; a reader that is out finishes
    /// on the old file and is closed when it comes back.
    pub fn close(&self, app_id: &str) {
        let slot = self.slot(app_id);
        let mut handle = slot.handle.lock().unwrap_or_else(PoisonError::into_inner);
        slot.readers.reset("");
        drop(handle.take());
    }

    /// The slot kept under `key` (an app id, or a preview's [`preview::slot_key`]),
    /// created empty when new. The map's lock is released before the caller
    /// locks the slot.
    fn slot(&self, key: &str) -> Arc<Slot> {
        let mut slots = self
            .inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Arc::clone(slots.entry(key.to_owned()).or_default())
    }

    /// The live file of a (valid) app id.
    fn live_path(&self, app_id: &str) -> PathBuf {
        live_file(&self.inner.root, app_id)
    }

    /// Runs `f` on the connection of `target` (the app's live file, or one
    /// preview's scratch copy), opening and setting it up for `contract` first
    /// when needed.
    fn with_handle<'t, R>(
        &self,
        target: impl Into<Target<'t>>,
        contract: &DataContract,
        f: impl FnOnce(&mut Handle) -> Result<R, AppError>,
    ) -> Result<R, AppError> {
        let (app_id, preview) = target.into().split()?;
        if let Some(preview) = preview {
            return self.with_preview_handle(app_id, preview, contract, f);
        }
        let slot = self.slot(app_id);
        let result = {
            let mut handle = slot.handle.lock().unwrap_or_else(PoisonError::into_inner);
            ready(
                &mut handle,
                &self.live_path(app_id),
                &self.inner.root,
                contract,
                Approval::None,
                Publisher::default(),
            )
            .and_then(|(handle, _)| f(handle))
        };
        forget_if_damaged(&slot, result)
    }

    /// Runs `read` in one read transaction of `target`'s file: its own
    /// statements governed, the platform's tables reachable through
    /// [`commit::Trusted`] (an undo's preview reads the ledger and the rows
    /// it would change as of one instant). Nothing it does is committed.
    pub fn read_with_ledger<'t, R>(
        &self,
        target: impl Into<Target<'t>>,
        contract: &DataContract,
        read: impl FnOnce(&Connection, &commit::Trusted<'_>) -> Result<R, AppError>,
    ) -> Result<R, AppError> {
        self.with_handle(target, contract, |handle| {
            let guard = Arc::clone(&handle.guard);
            let _deadline = DeadlineScope::new(&guard, self.inner.deadline);
            // BEGIN and ROLLBACK are the engine's own; only `read` is governed.
            let _trusted = TrustScope::new(&guard, true);
            let tx = handle.conn.transaction().map_err(sql_error)?;
            let result = {
                let _untrusted = TrustScope::new(&guard, false);
                read(&tx, &commit::Trusted::new(&guard))
            };
            tx.rollback().map_err(sql_error)?;
            result
        })
    }

    /// Opens the database of `target` for `contract` now (it is otherwise
    /// opened on first use), applying pending migrations.
    pub fn open<'t>(
        &self,
        target: impl Into<Target<'t>>,
        contract: &DataContract,
    ) -> Result<(), AppError> {
        self.with_handle(target, contract, |_| Ok(()))
    }

    /// The key of `target`'s list cursors ([`cursor_key`]): the app's own,
    /// kept in its database (a preview's copy holds live's), read once per
    /// connection. Opens the file for `contract` first when needed, like a
    /// read.
    pub fn cursor_key<'t>(
        &self,
        target: impl Into<Target<'t>>,
        contract: &DataContract,
    ) -> Result<CursorKey, AppError> {
        let target = target.into();
        if let (app_id, None) = target.split()? {
            return self.live_cursor_key(app_id, contract);
        }
        self.with_handle(target, contract, |handle| Ok(handle.cursor_key))
    }

    /// Applies `contract`'s pending migrations to the app's live file (a
    /// draft's publication), or with `dry_run` only says which are pending.
    ///
    /// A dry run opens the live file read-only (like [`Engine::tables_with_rows`])
    /// and writes nothing; no file means every migration is pending. Otherwise
    /// the app's slot is held throughout: drift is read first and, when there
    /// is any, nothing is applied; else the normal setup runs for `contract`
    /// (one IMMEDIATE transaction: pending migrations, `_sasha_version`, the
    /// compatibility check) and the files it applied are reported.
    pub fn apply_contract(
        &self,
        app_id: &str,
        contract: &DataContract,
        dry_run: bool,
        approval: Approval<'_>,
        publisher: Publisher<'_>,
    ) -> Result<ContractApplication, AppError> {
        if !valid_app_id(app_id) {
            return Err(AppError::from_code(ErrorCode::NotFound));
        }
        let path = self.live_path(app_id);
        let pending_and_drift = |applied: &[Applied]| {
            let mut pending: Vec<&sasha_contract::data::Migration> = contract
                .migrations
                .iter()
                .filter(|m| !applied.iter().any(|(number, ..)| *number == m.number))
                .collect();
            pending.sort_by_key(|m| m.number);
            ContractApplication {
                applied: pending.into_iter().map(|m| m.file.clone()).collect(),
                drift: drift(applied, contract),
            }
        };
        if dry_run {
            let applied = read_applied_read_only(&path)?;
            return Ok(pending_and_drift(&applied));
        }
        let slot = self.slot(app_id);
        let mut slot = slot.handle.lock().unwrap_or_else(PoisonError::into_inner);
        let applied = match slot.as_ref() {
            Some(handle) => {
                let _trusted = TrustScope::new(&handle.guard, true);
                applied_migrations(&handle.conn).map_err(sql_error)?
            }
            None => read_applied_read_only(&path)?,
        };
        let found = drift(&applied, contract);
        if !found.is_empty() {
            return Ok(ContractApplication {
                applied: Vec::new(),
                drift: found,
            });
        }
        let admission = self.admit_write(app_id)?;
        let (_, applied) = ready(
            &mut slot,
            &path,
            &self.inner.root,
            contract,
            approval,
            publisher,
        )?;
        drop(slot);
        // A publication is acknowledged like a write: once its migrations
        // are in object storage (and, with several workers, while this one
        // still owns the app at the epoch it was admitted under).
        self.confirm_durable(app_id, admission)?;
        tracing::info!(
            app_id,
            applied = applied.len(),
            "data engine: contract applied"
        );
        Ok(ContractApplication {
            applied,
            drift: Vec::new(),
        })
    }

    /// Applied migrations whose checksum differs from the contract's, and applied
    /// migrations the contract no longer lists. Pending migrations are not drift:
    /// opening applies them.
    pub fn migration_drift(
        &self,
        app_id: &str,
        contract: &DataContract,
    ) -> Result<Vec<Drift>, AppError> {
        self.with_handle(app_id, contract, |handle| {
            let _trusted = TrustScope::new(&handle.guard, true);
            let applied = applied_migrations(&handle.conn).map_err(sql_error)?;
            Ok(drift(&applied, contract))
        })
    }

    /// Which of `tables` hold at least one row in the app's file. A read-only
    /// connection of its own, hardened like every other, that applies no
    /// migration and installs no contract: the caller asks this about a
    /// package that is not live yet (studio-core's source tools, before a
    /// change that would widen who can read a table). No file, or a table the
    /// file does not have, means no rows.
    pub fn tables_with_rows(
        &self,
        app_id: &str,
        tables: &[String],
    ) -> Result<Vec<String>, AppError> {
        if !valid_app_id(app_id) {
            return Err(AppError::from_code(ErrorCode::NotFound));
        }
        let path = self.inner.root.join(format!("{app_id}.sqlite"));
        if !path.exists() {
            return Ok(Vec::new());
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = open_file(&path, flags)?;
        harden(&mut conn, &trusted_guard()).map_err(sql_error)?;
        let mut held = Vec::new();
        for table in tables {
            let exists: bool = conn
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1)",
                    [table],
                    |row| row.get(0),
                )
                .map_err(sql_error)?;
            if !exists {
                continue;
            }
            let rows: bool = conn
                .query_row(
                    &format!(
                        "SELECT EXISTS (SELECT 1 FROM main.{})",
                        quote_identifier(table)
                    ),
                    [],
                    |row| row.get(0),
                )
                .map_err(sql_error)?;
            if rows {
                held.push(table.clone());
            }
        }
        Ok(held)
    }

    /// Backs up the app's data file, then removes it (an admin deleted the
    /// app's data; studio-core decided, data-worker only does it). The app's
    /// connection is closed first and its slot stays locked throughout, so
    /// no call of this worker writes meanwhile. The copy is `VACUUM INTO` a
    /// new file in `APP_DATA_ROOT/<BACKUP_DIR>/` (one committed state,
    /// self-contained), passes `integrity_check` and is fsynced with its
    /// folder before `<id>.sqlite` and its `-wal`/`-shm` are removed. `None`
    /// when the app has no data file.
    ///
    /// The app's previews (scratch copies, see [`preview`]) are removed too,
    /// after the live file (its slot released first, so the lock order stays
    /// preview before live), also when there was no live file.
    pub fn back_up_and_remove(&self, app_id: &str) -> Result<Option<RemovedData>, AppError> {
        if !valid_app_id(app_id) {
            return Err(AppError::from_code(ErrorCode::NotFound));
        }
        let removed = self.back_up_and_remove_live(app_id)?;
        self.remove_previews(app_id, "")?;
        Ok(removed)
    }

    fn back_up_and_remove_live(&self, app_id: &str) -> Result<Option<RemovedData>, AppError> {
        let slot = self.slot(app_id);
        let mut handle = slot.handle.lock().unwrap_or_else(PoisonError::into_inner);
        // Readers out finish on the old file and are closed when they come
        // back; the writer's close, the last, checkpoints the WAL into it.
        slot.readers.reset("");
        drop(handle.take());
        let path = self.inner.root.join(format!("{app_id}.sqlite"));
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(None);
        }
        let io = |what: &str, error: std::io::Error| {
            let failure = AppError::new(
                ErrorCode::DatabaseUnavailable,
                "the app's data could not be backed up; nothing was removed",
            );
            tracing::error!(diagnostic_id = %failure.diagnostic_id, app_id, %error, "data engine: {what}");
            failure
        };
        let dir = self.inner.root.join(BACKUP_DIR);
        files::private_folder(&dir)
            .map_err(|error| io("cannot create the backup folder", error))?;
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        let name = format!("{app_id}-{seconds}-{:08x}.sqlite", rand::random::<u32>());
        let target = dir.join(&name);
        // Read-write, as before the copy helper existed: the slot is closed,
        // so this is the file's only connection and may recover a stale WAL.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        copy_committed_state(&path, flags, &target).map_err(|error| {
            tracing::error!(app_id, %error, "data engine: the backup copy failed");
            match error {
                CopyError::Sqlite(error) => sql_error(error),
                CopyError::NotIntact(_) | CopyError::Path | CopyError::File(_) => AppError::new(
                    ErrorCode::DatabaseUnavailable,
                    "the app's data could not be backed up; nothing was removed",
                ),
            }
        })?;
        let (bytes, sha256) = {
            use std::io::Read as _;
            let mut file =
                std::fs::File::open(&target).map_err(|e| io("cannot read the backup", e))?;
            file.sync_all()
                .map_err(|e| io("cannot sync the backup", e))?;
            let mut hasher = Sha256::new();
            let mut buffer = vec![0u8; 64 * 1024];
            let mut bytes = 0u64;
            loop {
                let read = file
                    .read(&mut buffer)
                    .map_err(|e| io("cannot read the backup", e))?;
                if read == 0 {
                    break;
                }
                bytes += read as u64;
                hasher.update(&buffer[..read]);
            }
            (bytes, hex::encode(hasher.finalize()))
        };
        std::fs::File::open(&dir)
            .and_then(|folder| folder.sync_all())
            .map_err(|e| io("cannot sync the backup folder", e))?;
        if let Some(durability) = &self.inner.durability {
            // Replication stops and the replica goes before the file: when
            // object storage cannot be reached, nothing is removed.
            if let Err(error) = durability.removing(app_id, &path) {
                let _ = std::fs::remove_file(&target);
                return Err(error);
            }
        }
        for suffix in ["", "-wal", "-shm"] {
            let file = self.inner.root.join(format!("{app_id}.sqlite{suffix}"));
            match std::fs::remove_file(&file) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => {
                    let failure = AppError::from_code(ErrorCode::Internal);
                    tracing::error!(diagnostic_id = %failure.diagnostic_id, app_id, %error, "data engine: cannot remove the data file after its backup");
                    return Err(failure);
                }
            }
        }
        let _ = std::fs::File::open(&self.inner.root).and_then(|root| root.sync_all());
        tracing::info!(app_id, backup = %name, bytes, "app data file backed up and removed");
        Ok(Some(RemovedData {
            backup: format!("{BACKUP_DIR}/{name}"),
            bytes,
            sha256,
        }))
    }

    /// The live structure of the app's database as [`read_schema`] reports it,
    /// without the platform's own tables and columns.
    pub fn describe<'t>(
        &self,
        target: impl Into<Target<'t>>,
        contract: &DataContract,
    ) -> Result<Schema, AppError> {
        self.with_handle(target, contract, |handle| {
            let _trusted = TrustScope::new(&handle.guard, true);
            let mut schema = read_schema(&handle.conn).map_err(sql_error)?;
            schema.tables.retain(|name, _| !is_platform_name(name));
            for table in schema.tables.values_mut() {
                table
                    .columns
                    .retain(|column| !column.name.eq_ignore_ascii_case(VERSION_COLUMN));
            }
            schema
                .indexes
                .retain(|_, index| !is_platform_name(&index.table));
            Ok(schema)
        })
    }

    /// Runs a read (a statement SQLite reports as read-only) and returns its rows
    /// as JSON objects, column name to value: INTEGER and REAL are numbers, TEXT a
    /// string, NULL null. A BLOB, or a REAL JSON cannot hold (an infinity), is
    /// refused as `APP_INTERNAL`: governed writes bind only JSON values, so either
    /// means the data did not come through the grammar. Results larger than
    /// [`MAX_RESULT_BYTES`] are `APP_RESOURCE_LIMIT`.
    pub fn query<'t>(
        &self,
        target: impl Into<Target<'t>>,
        contract: &DataContract,
        sql: &str,
        params: &[Value],
    ) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, AppError> {
        self.query_named(target, contract, sql, params, None)
    }

    /// [`Engine::query`] with the output key of each result column given by
    /// position (`columns`), for statements whose SQL column names are
    /// expressions (aggregates).
    pub fn query_named<'t>(
        &self,
        target: impl Into<Target<'t>>,
        contract: &DataContract,
        sql: &str,
        params: &[Value],
        columns: Option<&[String]>,
    ) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, AppError> {
        let target = target.into();
        if let (app_id, None) = target.split()? {
            return self.read_live(app_id, contract, sql, params, columns);
        }
        // A preview is one person's scratch copy: its writer connection reads too.
        self.with_handle(target, contract, |handle| {
            let guard = Arc::clone(&handle.guard);
            let _deadline = DeadlineScope::new(&guard, self.inner.deadline);
            let _untrusted = TrustScope::new(&guard, false);
            read_rows(&handle.conn, sql, params, columns)
        })
    }
}

/// Opens and hardens the file, sets it up for `contract` under the read
/// guard's `approval` (a key for its cursors seeded from `app_data_root`'s
/// old one when it needs one, see [`cursor_key`]), reads its cursor key,
/// then installs the authorizer (last, so setup's own PRAGMAs and DDL are
/// not refused); gives back the migration files setup applied.
fn open_applying(
    path: &Path,
    app_data_root: &Path,
    contract: &DataContract,
    approval: Approval<'_>,
    publisher: Publisher<'_>,
) -> Result<(Handle, Vec<String>), AppError> {
    let guard = trusted_guard();
    // Made (or narrowed) 0600 before SQLite opens it: SQLite would create
    // it 0644, and its -wal and -shm take its mode.
    files::private_database(path).map_err(|error| {
        let app = AppError::new(
            ErrorCode::DatabaseUnavailable,
            "the app's database is unavailable",
        );
        tracing::warn!(diagnostic_id = %app.diagnostic_id, path = %path.display(), %error, "data engine: cannot make the file private");
        app
    })?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = open_file(path, flags)?;
    harden(&mut conn, &guard).map_err(sql_error)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    let applied = setup(
        &mut conn,
        Some(app_data_root),
        contract,
        approval,
        publisher,
    )?;
    let cursor_key = cursor_key::read(&conn)?;
    govern(&mut conn, &guard, contract)?;
    let handle = Handle {
        conn,
        guard,
        contract_hash: contract.hash.clone(),
        scratch: None,
        cursor_key,
    };
    Ok((handle, applied))
}

/// Why [`copy_committed_state`] failed.
#[derive(Debug, thiserror::Error)]
enum CopyError {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the copy is not intact: {0}")]
    NotIntact(String),
    #[error("the copy's path is not UTF-8")]
    Path,
    #[error("the copy's file: {0}")]
    File(#[from] std::io::Error),
}

/// Copies one committed state of the SQLite file at `source` (opened with
/// `flags`) into the new file `target` with `VACUUM INTO`, then checks the
/// copy with `integrity_check`; a failed copy is removed. The one copy both
/// an app data backup and a preview's scratch copy are made with. `target`
/// must not exist yet.
fn copy_committed_state(source: &Path, flags: OpenFlags, target: &Path) -> Result<(), CopyError> {
    let target_text = target.to_str().ok_or(CopyError::Path)?;
    let copied = (|| -> Result<(), CopyError> {
        // VACUUM INTO fills an empty file as it is; SQLite would make a new one 0644.
        files::private_database(target)?;
        let conn = Connection::open_with_flags(source, flags)?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.execute("VACUUM INTO ?1", [target_text])?;
        drop(conn);
        let copy = Connection::open_with_flags(
            target,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        let verdict: String = copy.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
        if verdict == "ok" {
            Ok(())
        } else {
            Err(CopyError::NotIntact(verdict))
        }
    })();
    if copied.is_err() {
        let _ = std::fs::remove_file(target);
    }
    copied
}

/// The live slot's handle, set up for `contract`: opened on first use, or set
/// up again when the slot was last set up for another contract. Gives back
/// the migration files setup applied. Only a publication names an
/// `approval` ([`Engine::apply_contract`]); every other caller passes
/// [`Approval::None`].
fn ready<'s>(
    slot: &'s mut Option<Handle>,
    path: &Path,
    app_data_root: &Path,
    contract: &DataContract,
    approval: Approval<'_>,
    publisher: Publisher<'_>,
) -> Result<(&'s mut Handle, Vec<String>), AppError> {
    let applied = match slot.as_mut() {
        Some(handle) if handle.contract_hash == contract.hash => Vec::new(),
        Some(handle) => {
            let guard = Arc::clone(&handle.guard);
            let _trusted = TrustScope::new(&guard, true);
            let applied = setup(
                &mut handle.conn,
                Some(app_data_root),
                contract,
                approval,
                publisher,
            )?;
            set_declared(&guard, contract);
            // Cached statements were authorized against the old contract's
            // reach; a new contract authorizes everything again.
            handle.conn.flush_prepared_statement_cache();
            handle.contract_hash.clone_from(&contract.hash);
            applied
        }
        None => {
            let (handle, applied) =
                open_applying(path, app_data_root, contract, approval, publisher)?;
            *slot = Some(handle);
            applied
        }
    };
    match slot.as_mut() {
        Some(handle) => Ok((handle, applied)),
        None => Err(internal("handle missing after open")),
    }
}

/// The rows of `_sasha_migrations` read over a read-only, hardened connection
/// of its own; no file (or no table yet) is no row.
fn read_applied_read_only(path: &Path) -> Result<Vec<Applied>, AppError> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(Vec::new());
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = open_file(path, flags)?;
    harden(&mut conn, &trusted_guard()).map_err(sql_error)?;
    let exists: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' \
             AND name = '_sasha_migrations')",
            [],
            |row| row.get(0),
        )
        .map_err(sql_error)?;
    if !exists {
        return Ok(Vec::new());
    }
    applied_migrations(&conn).map_err(sql_error)
}

/// A guard that trusts what runs until the caller installs the authorizer
/// and turns trust off (or never does, for the engine's own read-only checks).
fn trusted_guard() -> Arc<Guard> {
    Arc::new(Guard {
        trusted: AtomicBool::new(true),
        epoch: Instant::now(),
        deadline_nanos: AtomicU64::new(0),
        reach: Mutex::new(Reach::default()),
    })
}

/// Opens an app file. No URI filenames: the path is ours, never a caller's
/// query string.
fn open_file(path: &Path, flags: OpenFlags) -> Result<Connection, AppError> {
    Connection::open_with_flags(path, flags).map_err(|error| {
        let app = AppError::new(
            ErrorCode::DatabaseUnavailable,
            "the app's database is unavailable",
        );
        tracing::warn!(diagnostic_id = %app.diagnostic_id, path = %path.display(), %error, "data engine: cannot open");
        app
    })
}

fn harden(conn: &mut Connection, guard: &Arc<Guard>) -> rusqlite::Result<()> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_WRITABLE_SCHEMA, false)?;
    // A double-quoted name that matches no column is an error, never a string.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DQS_DML, false)?;
    // Extension loading stays off: rusqlite is built without `load_extension`, so
    // nothing ever enables it, and the authorizer refuses the SQL function too.
    for (limit, value) in LIMITS {
        conn.set_limit(limit, value)?;
    }
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Durability over speed: an acknowledged write (and its receipt) must survive
    // a power loss, not only a process kill.
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        // WAL cannot be entered (an in-memory or read-only file): not a file we serve.
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
            Some(format!("journal mode is {mode}")),
        ));
    }
    conn.execute_batch(
        "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA cell_size_check = ON; \
         PRAGMA mmap_size = 0; PRAGMA recursive_triggers = OFF;",
    )?;
    let progress_guard = Arc::clone(guard);
    conn.progress_handler(PROGRESS_OPS, Some(move || progress_guard.expired()))?;
    Ok(())
}

/// Confines what runs on `conn` from now on to `contract`'s reach: the
/// declared tables set, the authorizer installed, trust turned off. Last in
/// every open, so setup's own PRAGMAs and DDL are not refused.
fn govern(
    conn: &mut Connection,
    guard: &Arc<Guard>,
    contract: &DataContract,
) -> Result<(), AppError> {
    set_declared(guard, contract);
    let authorizer_guard = Arc::clone(guard);
    conn.authorizer(Some(move |context: AuthContext<'_>| {
        authorizer_guard.authorize(&context)
    }))
    .map_err(sql_error)?;
    guard.trusted.store(false, Ordering::SeqCst);
    Ok(())
}

/// Installs the engine's authorizer on `conn`, trust off, with `tables` as
/// the whole declared reach: the grammar's oracle runs every statement the
/// grammar accepts under exactly the refusals a live connection applies.
#[cfg(any(test, feature = "oracle"))]
pub fn govern_for_oracle(conn: &mut Connection, tables: &[&str]) {
    let guard = trusted_guard();
    *guard.reach.lock().unwrap_or_else(PoisonError::into_inner) = Reach {
        declared: tables
            .iter()
            .map(|name| name.to_ascii_lowercase())
            .collect(),
        linked: BTreeSet::new(),
    };
    let authorizer_guard = Arc::clone(&guard);
    conn.authorizer(Some(move |context: AuthContext<'_>| {
        authorizer_guard.authorize(&context)
    }))
    .expect("the oracle's authorizer");
    guard.trusted.store(false, Ordering::SeqCst);
}

fn set_declared(guard: &Guard, contract: &DataContract) {
    let declared: BTreeSet<String> = contract
        .tables
        .keys()
        .map(|name| name.to_ascii_lowercase())
        .collect();
    let mut linked = BTreeSet::new();
    for (name, table) in &contract.schema.tables {
        let name = name.to_ascii_lowercase();
        for key in &table.foreign_keys {
            let parent = key.parent_table.to_ascii_lowercase();
            if declared.contains(&name) {
                linked.insert(parent.clone());
            }
            if declared.contains(&parent) {
                linked.insert(name.clone());
            }
        }
    }
    linked.retain(|name| !declared.contains(name));
    *guard.reach.lock().unwrap_or_else(PoisonError::into_inner) = Reach { declared, linked };
}

/// One `(number, file, checksum)` row of `_sasha_migrations`.
type Applied = (u32, String, String);

fn applied_migrations(conn: &Connection) -> rusqlite::Result<Vec<Applied>> {
    let mut statement =
        conn.prepare("SELECT number, file, checksum FROM _sasha_migrations ORDER BY number")?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
    rows.collect()
}

fn drift(applied: &[Applied], contract: &DataContract) -> Vec<Drift> {
    applied
        .iter()
        .filter_map(|(number, file, checksum)| {
            let listed = contract.migrations.iter().find(|m| m.number == *number);
            let kind = match listed {
                None => DriftKind::NotInContract,
                Some(m) if m.checksum != *checksum => DriftKind::ChecksumChanged,
                Some(_) => return None,
            };
            Some(Drift {
                number: *number,
                file: file.clone(),
                kind,
                applied_checksum: checksum.clone(),
                contract_checksum: listed.map(|m| m.checksum.clone()),
            })
        })
        .collect()
}

/// In one IMMEDIATE transaction: the app's cursor key when it has none yet
/// ([`cursor_key::ensure`], seeded from `app_data_root`'s old key when the
/// file was set up before), the platform tables, every pending migration
/// (recorded with its checksum), `_sasha_version` on every declared table, the
/// compatibility check and the read guard ([`guard`]: no row read more widely
/// or owned by someone else without `approval`; the policy recorded). Anything
/// failing rolls all of it back. Gives back the files of the migrations it
/// applied, in order.
fn setup(
    conn: &mut Connection,
    app_data_root: Option<&Path>,
    contract: &DataContract,
    approval: Approval<'_>,
    publisher: Publisher<'_>,
) -> Result<Vec<String>, AppError> {
    let publisher = Publisher {
        revision: if publisher.revision.is_empty() {
            &contract.hash
        } else {
            publisher.revision
        },
        ..publisher
    };
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error)?;
    cursor_key::ensure(&tx, app_data_root)?;
    tx.execute_batch(PLATFORM_SQL).map_err(sql_error)?;
    ledger::upgrade(&tx, NOW_SQL).map_err(sql_error)?;
    let applied = applied_migrations(&tx).map_err(sql_error)?;
    let is_applied = |migration: &Migration| {
        applied
            .iter()
            .any(|(number, ..)| *number == migration.number)
    };
    let pending: Vec<&str> = contract
        .migrations
        .iter()
        .filter(|migration| !is_applied(migration))
        .map(|migration| migration.file.as_str())
        .collect();
    // What the rows were written under, before anything can change them.
    let before = guard::before(&tx, contract, !pending.is_empty())?;
    // Only a pending migration can rebuild a table (and cost this scan).
    let versions = if contract.migrations.iter().all(is_applied) {
        BTreeMap::new()
    } else {
        highest_versions(&tx, contract)?
    };
    let mut newly = Vec::new();
    for migration in &contract.migrations {
        if is_applied(migration) {
            continue;
        }
        let shapes = ledger::shapes(&tx)?;
        if let Err(error) = tx.execute_batch(&migration.sql) {
            let app = AppError::new(
                ErrorCode::MigrationFailed,
                "the app's data migration failed; its database was left unchanged",
            );
            tracing::error!(
                diagnostic_id = %app.diagnostic_id,
                file = %migration.file,
                %error,
                "data engine: migration failed"
            );
            return Err(app);
        }
        tx.execute(
            &format!(
                "INSERT INTO _sasha_migrations (number, file, checksum, applied_at) \
                 VALUES (?1, ?2, ?3, {NOW_SQL})"
            ),
            (migration.number, &migration.file, &migration.checksum),
        )
        .map_err(sql_error)?;
        ledger::record_migration(&tx, &migration.file, &shapes, publisher)?;
        newly.push(migration.file.clone());
    }

    let live = read_schema(&tx).map_err(sql_error)?;
    for name in contract.tables.keys() {
        let Some(table) = live.tables.get(name) else {
            continue; // reported by the compatibility check below
        };
        if table.column(VERSION_COLUMN).is_none() {
            // A table a migration rebuilt lost the column with its old copy:
            // its rows start above every version a caller may still hold, so
            // a stale expectedVersion stays stale.
            let start = versions.get(name).map_or(1, |highest| highest + 1);
            tx.execute_batch(&format!(
                "ALTER TABLE {} ADD COLUMN {VERSION_COLUMN} INTEGER NOT NULL DEFAULT {start}",
                quote_identifier(name)
            ))
            .map_err(sql_error)?;
        }
    }
    let live = read_schema(&tx).map_err(sql_error)?;
    check_compatible(&live, contract)?;
    let changed_by = match pending.as_slice() {
        [] => "APP.md",
        [file] => *file,
        _ => "migrations",
    };
    guard::after(&tx, contract, before, approval, changed_by)?;
    tx.commit().map_err(sql_error)?;
    Ok(newly)
}

/// The highest row version of each declared table that has rows and the
/// version column, before any pending migration runs.
fn highest_versions(
    tx: &rusqlite::Transaction<'_>,
    contract: &DataContract,
) -> Result<BTreeMap<String, i64>, AppError> {
    let live = read_schema(tx).map_err(sql_error)?;
    let mut highest = BTreeMap::new();
    for name in contract.tables.keys() {
        if live
            .tables
            .get(name)
            .is_some_and(|table| table.column(VERSION_COLUMN).is_some())
        {
            let version: Option<i64> = tx
                .query_row(
                    &format!(
                        "SELECT max({VERSION_COLUMN}) FROM {}",
                        quote_identifier(name)
                    ),
                    [],
                    |row| row.get(0),
                )
                .map_err(sql_error)?;
            if let Some(version) = version {
                highest.insert(name.clone(), version);
            }
        }
    }
    Ok(highest)
}

/// Every declared table exists with every declared column at its declared
/// type, plus `_sasha_version`. Extra live columns are tolerated (a newer
/// database serving an older revision may have them).
fn check_compatible(live: &Schema, contract: &DataContract) -> Result<(), AppError> {
    let incompatible = |table: &str, column: &str| {
        let app = AppError::new(
            ErrorCode::SchemaIncompatible,
            "the app's database does not match its declared data structure",
        );
        tracing::error!(diagnostic_id = %app.diagnostic_id, table, column, "data engine: schema incompatible");
        app
    };
    for name in contract.tables.keys() {
        let Some(declared) = contract.schema.tables.get(name) else {
            return Err(incompatible(name, ""));
        };
        let Some(table) = live.tables.get(name) else {
            return Err(incompatible(name, ""));
        };
        for column in &declared.columns {
            match table.column(&column.name) {
                Some(found)
                    if found
                        .declared_type
                        .eq_ignore_ascii_case(&column.declared_type) => {}
                _ => return Err(incompatible(name, &column.name)),
            }
        }
        if table.column(VERSION_COLUMN).is_none() {
            return Err(incompatible(name, VERSION_COLUMN));
        }
    }
    Ok(())
}

fn read_rows(
    conn: &Connection,
    sql: &str,
    params: &[Value],
    columns: Option<&[String]>,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, AppError> {
    let mut statement = prepare_governed(conn, sql)?;
    if !statement.readonly() {
        return Err(internal("query was handed a statement that writes"));
    }
    let names: Vec<String> = match columns {
        Some(columns) if columns.len() == statement.column_count() => columns.to_vec(),
        Some(_) => return Err(internal("result column names do not match the statement")),
        None => statement.column_names().map(str::to_owned).collect(),
    };
    let mut rows = statement
        .query(rusqlite::params_from_iter(params.iter()))
        .map_err(sql_error)?;
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while let Some(row) = rows.next().map_err(sql_error)? {
        let mut object = serde_json::Map::with_capacity(names.len());
        for (index, name) in names.iter().enumerate() {
            let value = match row.get_ref(index).map_err(sql_error)? {
                ValueRef::Null => serde_json::Value::Null,
                ValueRef::Integer(i) => serde_json::Value::from(i),
                ValueRef::Real(f) => serde_json::Number::from_f64(f)
                    .map(serde_json::Value::Number)
                    .ok_or_else(|| internal("stored real is not a json number"))?,
                ValueRef::Text(text) => {
                    bytes = bytes.saturating_add(text.len());
                    serde_json::Value::String(
                        std::str::from_utf8(text)
                            .map_err(|_| internal("stored text is not utf-8"))?
                            .to_owned(),
                    )
                }
                ValueRef::Blob(_) => return Err(internal("query returned a blob")),
            };
            bytes = bytes.saturating_add(name.len() + 8);
            object.insert(name.clone(), value);
        }
        if bytes > MAX_RESULT_BYTES {
            return Err(AppError::new(
                ErrorCode::ResourceLimit,
                "the result is larger than the platform returns at once, ask for fewer records or fields",
            ));
        }
        out.push(object);
    }
    Ok(out)
}

pub mod commit;
pub mod cursor_key;
pub mod durable;
pub mod files;
pub mod guard;
pub mod history;
pub mod ledger;
pub mod preview;
pub mod readers;
pub mod snapshot;

#[cfg(test)]
mod tests;
