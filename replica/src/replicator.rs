//! The durability gate a role runs its databases through: which databases it
//! replicates and in which generation, whether a write may be acknowledged,
//! and what `/healthz` reports.
//!
//! - **Tracking.** [`Replicator::track`] registers a database file with the
//!   role's Litestream (through its control socket) under the generation
//!   recorded beside it, or under a new one (see [`crate::layout`]).
//!   [`Replicator::restore_missing`] brings a database whose file is gone
//!   back from its newest generation before anything opens it.
//! - **Owners under a lease** (data-workers with `SASHA_DATA_PLACEMENT=leases`,
//!   issue 47). An app database is tracked under its owner's epoch
//!   ([`Replicator::track_at_epoch`]: a recorded generation of another epoch
//!   is never continued). A worker that gains an app first brings its file
//!   up to the newest history in object storage
//!   ([`Replicator::restore_in_place`]: kept when it continues that history,
//!   otherwise replaced, staged and renamed, by a restore of it), and one
//!   that loses an app stops replicating it ([`Replicator::stop_tracking`])
//!   and leaves object storage alone: the history is the next owner's to
//!   continue. A hand-over ends with [`Replicator::flush`].
//! - **Sync mode.** [`Replicator::committed`] is called after a commit and
//!   before its answer: one sync-and-wait control call (Litestream copies
//!   the WAL's committed frames into a local LTX file and uploads every
//!   pending one) covers everything committed so far, so a group commit's
//!   batch shares one upload. Any failure or timeout is
//!   [`ReplicaError`], which the role answers as the retryable
//!   `APP_DATABASE_UNAVAILABLE`: the write stays committed locally but is not
//!   acknowledged, and a retry with the same idempotency key replays its
//!   receipt through the same gate. The next successful call clears the
//!   state; nothing needs a restart.
//! - **Async mode.** [`Replicator::committed`] only counts the commit; a
//!   background flusher makes the same sync-and-wait call at most every
//!   [`FLUSH_EVERY`]. The age of the oldest commit not yet confirmed is the
//!   lag; while it exceeds `SASHA_REPLICA_MAX_LAG_SECS`,
//!   [`Replicator::admit`] refuses new writes (retryable), which bounds what
//!   a lost disk can take.
//! - **Watching.** Every [`WATCH_EVERY`] the role checks that Litestream
//!   still replicates each database (a restarted sidecar forgets runtime
//!   registrations) and registers it again, and logs lag growing past half
//!   its bound, once per episode.
//!
//! What it must never do: let [`Replicator::committed`] succeed for a
//! commit object storage has not confirmed (in sync mode), continue a
//! generation for a file whose history it cannot vouch for, or put
//! Litestream's or the storage's own error text in an answer to a caller.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sasha_proto::{AppError, ErrorCode};
use sasha_service::config::ConfigError;
use time::OffsetDateTime;

use crate::config::{ACCESS_KEY_ID, Mode, REPLICA_SOCKET, REPLICA_URL, ReplicaConfig};
use crate::control::{Control, ControlError, Synced};
use crate::layout::{self, Database, Generation};
use crate::litestream::{self, RestoreFailure, Restored, Target};
use crate::s3::{ObjectStore, StorageError};

/// The async flusher's shortest interval between two sync-and-wait rounds.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// How often registrations are checked and lag is looked at.
pub const WATCH_EVERY: Duration = Duration::from_secs(5);

/// Why a write could not be acknowledged, or a database not replicated.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReplicaError {
    #[error("Litestream: {0}")]
    Control(#[from] ControlError),
    #[error("object storage: {0}")]
    Storage(#[from] StorageError),
    #[error("replication is {0:?} behind, past its bound")]
    Behind(Duration),
    #[error("{0}")]
    Local(String),
}

impl ReplicaError {
    /// The answer a caller gets: retryable `APP_DATABASE_UNAVAILABLE`; the
    /// detail is logged under the same diagnostic id.
    pub fn to_app_error(&self) -> AppError {
        let message = match self {
            ReplicaError::Behind(_) => {
                "writes are paused until object storage catches up; try again shortly"
            }
            _ => {
                "the write could not be confirmed in object storage and was not acknowledged; try again"
            }
        };
        let error = AppError::new(ErrorCode::DatabaseUnavailable, message);
        tracing::warn!(diagnostic_id = %error.diagnostic_id, detail = %self, "replication: write not acknowledged");
        error
    }

    /// The answer to a copy that could not be read back from object storage
    /// ([`Replicator::restore_copy_at`]): retryable
    /// `APP_DATABASE_UNAVAILABLE`, nothing written; the detail is logged
    /// under the same diagnostic id.
    pub fn to_restore_error(&self) -> AppError {
        let error = AppError::new(
            ErrorCode::DatabaseUnavailable,
            "the app's copy in object storage could not be read; nothing was changed, try again",
        );
        tracing::warn!(diagnostic_id = %error.diagnostic_id, detail = %self, "replication: a copy was not restored");
        error
    }
}

/// One database's replication, as health reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct DatabaseState {
    pub database: Database,
    pub generation: Generation,
    /// Litestream's newest local transaction id, and the newest in object
    /// storage, as of the last sync call.
    pub txid: u64,
    pub replicated_txid: u64,
    /// When object storage last confirmed everything committed before it.
    pub last_replicated_at: Option<OffsetDateTime>,
    /// Age of the oldest commit object storage has not confirmed.
    pub lag: Duration,
    /// Why the last attempt failed (short, safe), while it is failing.
    pub error: Option<String>,
}

/// Replication of one role's databases, cheap to clone.
#[derive(Clone)]
pub struct Replicator {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Replicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replicator")
            .field("mode", &self.inner.config.mode)
            .field("socket", &self.inner.control.socket())
            .finish_non_exhaustive()
    }
}

struct Inner {
    config: ReplicaConfig,
    control: Control,
    store: ObjectStore,
    /// The runtime the blocking entry points run their calls on.
    runtime: tokio::runtime::Handle,
    databases: Mutex<HashMap<PathBuf, Tracked>>,
    /// Held while a database's registration with Litestream changes
    /// (register, unregister, restore in place), so that re-registering a
    /// database Litestream forgot never races a worker letting it go.
    registrations: tokio::sync::Mutex<()>,
    /// Wakes the async flusher after a commit.
    flush: tokio::sync::Notify,
}

/// A tracked database. `committed` and `confirmed` count commits (async
/// mode): everything up to `confirmed` is known to be in object storage.
struct Tracked {
    database: Database,
    generation: Generation,
    committed: u64,
    confirmed: u64,
    /// When the oldest commit after `confirmed` may have happened.
    behind_since: Option<Instant>,
    txid: u64,
    replicated_txid: u64,
    last_replicated_at: Option<OffsetDateTime>,
    error: Option<String>,
    /// Lag was logged as growing in this episode.
    lag_reported: bool,
}

impl Replicator {
    /// Checks that object storage answers with these credentials and that
    /// the control socket answers (each awaited up to the boot wait, for
    /// a server or sidecar starting beside the role), then starts the
    /// background tasks. The error is the one line the role stops with.
    pub async fn connect(config: ReplicaConfig) -> Result<Replicator, ConfigError> {
        let store = ObjectStore::new(&config.url, &config.credentials)
            .map_err(|reason| ConfigError::new(REPLICA_URL, reason))?;
        let started = Instant::now();
        loop {
            match store.check().await {
                Ok(()) => break,
                Err(error) if error.is_transient() && started.elapsed() < config.boot_wait => {
                    // A storage server starting beside the role has no event to
                    // wait on; a quarter second keeps the boot prompt without
                    // flooding its log.
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(error @ StorageError::Credentials { .. }) => {
                    return Err(ConfigError::new(ACCESS_KEY_ID, error.to_string()));
                }
                Err(error) => return Err(ConfigError::new(REPLICA_URL, error.to_string())),
            }
        }
        let control = Control::new(&config.socket);
        loop {
            match control.ping().await {
                Ok(()) => break,
                Err(_) if started.elapsed() < config.boot_wait => {
                    // Litestream creates its socket only once it runs; a unix
                    // socket gives nothing to watch before it exists.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => {
                    return Err(ConfigError::new(
                        REPLICA_SOCKET,
                        format!(
                            "{error}; start Litestream (`litestream replicate`) with its socket there"
                        ),
                    ));
                }
            }
        }
        let replicator = Replicator {
            inner: Arc::new(Inner {
                config,
                control,
                store,
                runtime: tokio::runtime::Handle::current(),
                databases: Mutex::new(HashMap::new()),
                registrations: tokio::sync::Mutex::new(()),
                flush: tokio::sync::Notify::new(),
            }),
        };
        let watcher = replicator.clone();
        tokio::spawn(async move { watcher.watch().await });
        if replicator.inner.config.mode == Mode::Async {
            let flusher = replicator.clone();
            tokio::spawn(async move { flusher.flush_forever().await });
        }
        tracing::info!(
            mode = replicator.inner.config.mode.as_str(),
            location = %replicator.inner.config.url.describe(),
            "replication on"
        );
        Ok(replicator)
    }

    pub fn mode(&self) -> Mode {
        self.inner.config.mode
    }

    pub fn config(&self) -> &ReplicaConfig {
        &self.inner.config
    }

    /// The object store replicas live in.
    pub fn store(&self) -> &ObjectStore {
        &self.inner.store
    }

    /// Brings `database` back from object storage into `path` when the file
    /// is missing and object storage holds a generation of it: the newest
    /// generation with data. Says whether it restored.
    pub async fn restore_missing(&self, database: &Database, path: &Path) -> Result<bool, String> {
        restore_if_missing(&self.inner.store, &self.inner.config, database, path).await
    }

    /// The databases object storage holds a generation of, among the apps.
    pub async fn replicated_apps(&self) -> Result<Vec<String>, StorageError> {
        self.inner.store.list_children(layout::APPS_DIR).await
    }

    /// Replicates `database` (the file at `path`, which exists) from now on,
    /// continuing its recorded generation or beginning a new one, and
    /// confirms what it already holds like a commit: in sync mode it is in
    /// object storage when this returns (a database that was never
    /// replicated, or restored into a new generation, is not protected until
    /// it is); in async mode the flusher takes it within the lag bound.
    pub async fn track(&self, database: &Database, path: &Path) -> Result<(), ReplicaError> {
        self.track_under(database, path, None).await
    }

    /// [`Replicator::track`] for the owner of `database` at `epoch`: the
    /// recorded generation is continued only when it has that epoch;
    /// otherwise a new generation of that epoch begins.
    pub async fn track_at_epoch(
        &self,
        database: &Database,
        path: &Path,
        epoch: u64,
    ) -> Result<(), ReplicaError> {
        self.track_under(database, path, Some(epoch)).await
    }

    async fn track_under(
        &self,
        database: &Database,
        path: &Path,
        epoch: Option<u64>,
    ) -> Result<(), ReplicaError> {
        self.register(database, path, epoch).await?;
        match self.inner.config.mode {
            Mode::Sync => self.sync_and_wait(database, path).await.map(|_| ()),
            Mode::Async => {
                self.count_commit(path);
                Ok(())
            }
        }
    }

    /// Registers `database` with Litestream under its recorded generation
    /// (when `epoch` is given, only one of that epoch), or a new one.
    async fn register(
        &self,
        database: &Database,
        path: &Path,
        epoch: Option<u64>,
    ) -> Result<(), ReplicaError> {
        let _registrations = self.inner.registrations.lock().await;
        let recorded = layout::recorded_generation(path)
            .filter(|recorded| epoch.is_none_or(|epoch| recorded.epoch() == epoch));
        let generation = match recorded {
            Some(generation) => generation,
            None => {
                // Litestream may still replicate an older file at this path
                // into an older generation (a sidecar outlives the role).
                self.inner
                    .control
                    .unregister(path, self.inner.config.sync_timeout)
                    .await?;
                layout::remove_local_state(path).map_err(|error| {
                    ReplicaError::Local(format!("cannot clear replication state: {error}"))
                })?;
                let generation = match epoch {
                    None => Generation::begin(),
                    Some(epoch) => Generation::begin_in(epoch)
                        .map_err(|error| ReplicaError::Local(error.to_string()))?,
                };
                layout::record_generation(path, &generation).map_err(|error| {
                    ReplicaError::Local(format!("cannot record the generation: {error}"))
                })?;
                tracing::info!(
                    database = database.label(),
                    generation = generation.as_str(),
                    "replication: a new generation begins"
                );
                generation
            }
        };
        let url = self
            .inner
            .config
            .url
            .litestream_url(&database.generation_path(&generation));
        self.inner.control.register(path, &url).await?;
        let mut databases = self.lock();
        let tracked = databases
            .entry(path.to_path_buf())
            .or_insert_with(|| Tracked {
                database: database.clone(),
                generation: generation.clone(),
                committed: 0,
                confirmed: 0,
                behind_since: None,
                txid: 0,
                replicated_txid: 0,
                last_replicated_at: None,
                error: None,
                lag_reported: false,
            });
        tracked.generation = generation;
        Ok(())
    }

    /// Registers `path` with Litestream again under the generation this
    /// process tracks it in (Litestream forgot it: its sidecar restarted).
    /// Says whether it did: a database no longer tracked is left alone.
    async fn register_again(&self, path: &Path) -> Result<bool, ReplicaError> {
        let _registrations = self.inner.registrations.lock().await;
        let tracked = self
            .lock()
            .get(path)
            .map(|tracked| (tracked.database.clone(), tracked.generation.clone()));
        let Some((database, generation)) = tracked else {
            return Ok(false);
        };
        let url = self
            .inner
            .config
            .url
            .litestream_url(&database.generation_path(&generation));
        self.inner.control.register(path, &url).await?;
        Ok(true)
    }

    /// Stops replicating `path` (Litestream's final sync included) and
    /// forgets it, leaving object storage and the generation record as they
    /// are: another owner continues the history from object storage, and
    /// the record tells a later [`Replicator::restore_in_place`] which
    /// history the local file holds.
    pub async fn stop_tracking(
        &self,
        database: &Database,
        path: &Path,
    ) -> Result<(), ReplicaError> {
        let _registrations = self.inner.registrations.lock().await;
        // Forgotten first: a failed unregister must not leave it to the
        // watcher to register again.
        let was_tracked = self.lock().remove(path).is_some();
        self.inner
            .control
            .unregister(path, self.inner.config.sync_timeout)
            .await?;
        if was_tracked {
            tracing::info!(
                database = database.label(),
                "replication: stopped; object storage keeps the history"
            );
        }
        Ok(())
    }

    /// Brings the file at `path` up to the newest history of `database` in
    /// object storage, before its new owner serves it: Litestream lets go
    /// of the file; then, newest generation first (see [`crate::layout`]
    /// for the order), the file is kept when its recorded generation is
    /// the newest one holding data ([`InPlace::Continues`]) or none holds
    /// any ([`InPlace::Empty`]); otherwise that generation's latest state
    /// is restored beside the file and replaces it
    /// ([`layout::replace_with_restored`], the old file set aside in
    /// `aside`). The caller has closed every connection to the file and
    /// tracks it afterwards ([`Replicator::track_at_epoch`]); until then it
    /// is not tracked.
    pub async fn restore_in_place(
        &self,
        database: &Database,
        path: &Path,
        aside: &Path,
    ) -> Result<InPlace, ReplicaError> {
        let _registrations = self.inner.registrations.lock().await;
        self.lock().remove(path);
        self.inner
            .control
            .unregister(path, self.inner.config.sync_timeout)
            .await?;
        let generations = generations(&self.inner.store, database).await?;
        let recorded = layout::recorded_generation(path);
        let staged = layout::staged_restore_path(path);
        let local = |what: &str, error: std::io::Error| {
            ReplicaError::Local(format!("cannot {what}: {error}"))
        };
        for generation in generations.iter().rev() {
            if recorded.as_ref() == Some(generation) {
                return Ok(InPlace::Continues(generation.clone()));
            }
            layout::remove_staged(&staged)
                .map_err(|error| local("clear an earlier staged restore", error))?;
            let url = self
                .inner
                .store
                .url()
                .litestream_url(&database.generation_path(generation));
            let restored = litestream::restore(
                &self.inner.config.litestream,
                &self.inner.config.credentials,
                &url,
                &staged,
                &Target::Latest,
            )
            .await;
            match restored {
                Ok(Restored::Written { .. }) => {
                    let set_aside = layout::replace_with_restored(path, &staged, aside)
                        .map_err(|error| local("put the restored database in place", error));
                    if set_aside.is_err() {
                        let _ = layout::remove_staged(&staged);
                    }
                    let set_aside = set_aside?;
                    tracing::warn!(
                        database = database.label(),
                        from = generation.as_str(),
                        superseded = ?set_aside,
                        "replication: the database was restored from object storage in place of its local file"
                    );
                    return Ok(InPlace::Restored {
                        from: generation.clone(),
                        set_aside,
                    });
                }
                Ok(Restored::Nothing) => continue,
                Err(failure) => {
                    let _ = layout::remove_staged(&staged);
                    return Err(ReplicaError::Local(match failure {
                        RestoreFailure::OutOfRange => {
                            "litestream restore refused the generation's range".to_owned()
                        }
                        RestoreFailure::Failed(reason) => reason,
                    }));
                }
            }
        }
        Ok(InPlace::Empty)
    }

    /// A copy of `database` (whose live file is `path`) as it was at `at`,
    /// written to `output` (which must not exist), for reading: object
    /// storage is first made to hold everything committed so far (when
    /// this process tracks the file), then the newest generation that held
    /// data at `at` is restored. `None` when object storage held nothing of
    /// it then. The live file is neither read nor touched.
    pub async fn restore_copy_at(
        &self,
        database: &Database,
        path: &Path,
        output: &Path,
        at: OffsetDateTime,
    ) -> Result<Option<Generation>, ReplicaError> {
        self.flush(database, path).await?;
        restore_newest(
            &self.inner.store,
            &self.inner.config.litestream,
            &self.inner.config.credentials,
            database,
            output,
            Some(at),
        )
        .await
        .map_err(ReplicaError::Local)
    }

    /// Makes object storage hold everything committed to `path` so far (one
    /// sync-and-wait, whatever the mode): the final sync of a hand-over. A
    /// database this process does not track has nothing of its own there.
    pub async fn flush(&self, database: &Database, path: &Path) -> Result<(), ReplicaError> {
        let Some(seen) = self.lock().get(path).map(|tracked| tracked.committed) else {
            return Ok(());
        };
        self.sync_and_wait(database, path).await?;
        let mut databases = self.lock();
        if let Some(tracked) = databases.get_mut(path) {
            tracked.confirmed = tracked.confirmed.max(seen);
            if tracked.committed <= tracked.confirmed {
                tracked.behind_since = None;
            }
        }
        Ok(())
    }

    /// [`Replicator::track`] from a blocking thread (never a runtime worker).
    pub fn track_blocking(&self, database: &Database, path: &Path) -> Result<(), ReplicaError> {
        self.inner.runtime.block_on(self.track(database, path))
    }

    /// Whether `path` is tracked by this process.
    pub fn is_tracked(&self, path: &Path) -> bool {
        self.lock().contains_key(path)
    }

    /// May a write to `path` begin? Async mode refuses while replication is
    /// further behind than its bound; sync mode always admits (its gate is
    /// after the commit).
    pub fn admit(&self, path: &Path) -> Result<(), ReplicaError> {
        if self.inner.config.mode == Mode::Sync {
            return Ok(());
        }
        let databases = self.lock();
        let lag = databases
            .get(path)
            .and_then(|tracked| tracked.behind_since)
            .map_or(Duration::ZERO, |since| since.elapsed());
        if lag > self.inner.config.max_lag {
            return Err(ReplicaError::Behind(lag));
        }
        Ok(())
    }

    /// Everything committed to `path` so far may be acknowledged once this
    /// returns `Ok` (see the module header for each mode).
    pub async fn committed(&self, database: &Database, path: &Path) -> Result<(), ReplicaError> {
        if !self.is_tracked(path) {
            // Tracking confirms everything the file holds, this commit too.
            return self.track(database, path).await;
        }
        match self.inner.config.mode {
            Mode::Sync => self.sync_and_wait(database, path).await.map(|_| ()),
            Mode::Async => {
                self.count_commit(path);
                Ok(())
            }
        }
    }

    /// [`Replicator::committed`] for the owner of `database` at `epoch`: a
    /// database not tracked yet (a new app's first commit) is tracked under
    /// that epoch.
    pub async fn committed_at_epoch(
        &self,
        database: &Database,
        path: &Path,
        epoch: u64,
    ) -> Result<(), ReplicaError> {
        if !self.is_tracked(path) {
            return self.track_at_epoch(database, path, epoch).await;
        }
        self.committed(database, path).await
    }

    /// [`Replicator::committed_at_epoch`] from a blocking thread.
    pub fn committed_at_epoch_blocking(
        &self,
        database: &Database,
        path: &Path,
        epoch: u64,
    ) -> Result<(), ReplicaError> {
        self.inner
            .runtime
            .block_on(self.committed_at_epoch(database, path, epoch))
    }

    /// Async mode: one more commit of `path` for the flusher to confirm.
    fn count_commit(&self, path: &Path) {
        let mut databases = self.lock();
        if let Some(tracked) = databases.get_mut(path) {
            tracked.committed += 1;
            tracked.behind_since.get_or_insert_with(Instant::now);
        }
        drop(databases);
        self.inner.flush.notify_one();
    }

    /// [`Replicator::committed`] from a blocking thread.
    pub fn committed_blocking(&self, database: &Database, path: &Path) -> Result<(), ReplicaError> {
        self.inner.runtime.block_on(self.committed(database, path))
    }

    /// Stops replicating `path` and deletes every generation of `database`
    /// from object storage (the database is being deleted), then the local
    /// replication state. Called before the file is removed: if object
    /// storage cannot be reached the deletion stops here, with nothing
    /// removed.
    pub async fn forget(&self, database: &Database, path: &Path) -> Result<(), ReplicaError> {
        let _registrations = self.inner.registrations.lock().await;
        self.inner
            .control
            .unregister(path, self.inner.config.sync_timeout)
            .await?;
        self.lock().remove(path);
        let deleted = self.inner.store.delete_below(&database.dir()).await?;
        layout::remove_local_state(path).map_err(|error| {
            ReplicaError::Local(format!("cannot clear replication state: {error}"))
        })?;
        tracing::info!(
            database = database.label(),
            objects = deleted,
            "replication: the database's replica was deleted"
        );
        Ok(())
    }

    /// [`Replicator::forget`] from a blocking thread.
    pub fn forget_blocking(&self, database: &Database, path: &Path) -> Result<(), ReplicaError> {
        self.inner.runtime.block_on(self.forget(database, path))
    }

    /// [`Replicator::forget`] for the owner of `database` at `epoch`: only
    /// the generations of epochs up to its own are deleted, each on its own,
    /// so a later owner's history (were this owner's lease to lapse while it
    /// deletes) is never touched; the database's folder goes last, once no
    /// generation is left in it.
    pub async fn forget_through_epoch(
        &self,
        database: &Database,
        path: &Path,
        epoch: u64,
    ) -> Result<(), ReplicaError> {
        let _registrations = self.inner.registrations.lock().await;
        self.inner
            .control
            .unregister(path, self.inner.config.sync_timeout)
            .await?;
        self.lock().remove(path);
        let mut deleted = 0;
        for generation in generations(&self.inner.store, database).await? {
            if generation.epoch() <= epoch {
                let below = format!("{}/", database.generation_path(&generation));
                deleted += self.inner.store.delete_below(&below).await?;
            }
        }
        if generations(&self.inner.store, database).await?.is_empty() {
            // The emptied folder itself (listed by stores with real folders).
            deleted += self.inner.store.delete_below(&database.dir()).await?;
        }
        layout::remove_local_state(path).map_err(|error| {
            ReplicaError::Local(format!("cannot clear replication state: {error}"))
        })?;
        tracing::info!(
            database = database.label(),
            objects = deleted,
            through_epoch = epoch,
            "replication: the database's replica was deleted"
        );
        Ok(())
    }

    /// [`Replicator::forget_through_epoch`] from a blocking thread.
    pub fn forget_through_epoch_blocking(
        &self,
        database: &Database,
        path: &Path,
        epoch: u64,
    ) -> Result<(), ReplicaError> {
        self.inner
            .runtime
            .block_on(self.forget_through_epoch(database, path, epoch))
    }

    /// Every tracked database's state, most behind first.
    pub fn states(&self) -> Vec<DatabaseState> {
        let databases = self.lock();
        let mut states: Vec<DatabaseState> = databases
            .values()
            .map(|tracked| DatabaseState {
                database: tracked.database.clone(),
                generation: tracked.generation.clone(),
                txid: tracked.txid,
                replicated_txid: tracked.replicated_txid,
                last_replicated_at: tracked.last_replicated_at,
                lag: tracked
                    .behind_since
                    .map_or(Duration::ZERO, |since| since.elapsed()),
                error: tracked.error.clone(),
            })
            .collect();
        states.sort_by(|a, b| b.lag.cmp(&a.lag).then(a.database.cmp(&b.database)));
        states
    }

    /// One sync-and-wait for `path`, registering again once if Litestream
    /// forgot it; records the outcome for health.
    async fn sync_and_wait(
        &self,
        database: &Database,
        path: &Path,
    ) -> Result<Synced, ReplicaError> {
        let started = Instant::now();
        let timeout = self.inner.config.sync_timeout;
        let mut result = self.inner.control.sync(path, true, timeout).await;
        if matches!(result, Err(ControlError::NotRegistered)) && self.register_again(path).await? {
            result = self.inner.control.sync(path, true, timeout).await;
        }
        let mut databases = self.lock();
        let Some(tracked) = databases.get_mut(path) else {
            return result.map_err(ReplicaError::from);
        };
        match &result {
            Ok(synced) => {
                tracked.txid = synced.txid;
                tracked.replicated_txid = synced.replicated_txid;
                tracked.last_replicated_at = Some(OffsetDateTime::now_utc());
                if let Some(error) = tracked.error.take() {
                    tracing::info!(database = database.label(), previous = %error, "replication: object storage confirms writes again");
                }
                tracked.lag_reported = false;
                if self.inner.config.mode == Mode::Sync {
                    tracked.behind_since = None;
                }
                let _ = started;
            }
            Err(error) => {
                if tracked.error.is_none() {
                    tracing::error!(database = database.label(), %error, "replication: object storage does not confirm writes");
                }
                tracked.error = Some(short_reason(error));
                if self.inner.config.mode == Mode::Sync {
                    tracked.behind_since.get_or_insert(started);
                }
            }
        }
        result.map_err(ReplicaError::from)
    }

    /// The async mode's flusher: after commits, one sync-and-wait per
    /// database at most every [`FLUSH_EVERY`].
    async fn flush_forever(self) {
        loop {
            tokio::select! {
                () = self.inner.flush.notified() => {}
                // A round that failed (storage down) left work behind with
                // no new commit to notify: retry it each second.
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            let pending: Vec<(PathBuf, Database, u64)> = self
                .lock()
                .iter()
                .filter(|(_, tracked)| tracked.committed > tracked.confirmed)
                .map(|(path, tracked)| (path.clone(), tracked.database.clone(), tracked.committed))
                .collect();
            for (path, database, seen) in pending {
                let round = Instant::now();
                if self.sync_and_wait(&database, &path).await.is_ok() {
                    let mut databases = self.lock();
                    if let Some(tracked) = databases.get_mut(&path) {
                        tracked.confirmed = tracked.confirmed.max(seen);
                        // Later commits happened after this round began.
                        tracked.behind_since =
                            (tracked.committed > tracked.confirmed).then_some(round);
                    }
                }
            }
            // At most one sync per database per FLUSH_EVERY: commits in
            // between ride on the next round (the async mode's bounded RPO).
            tokio::time::sleep(FLUSH_EVERY).await;
        }
    }

    /// Registers again what Litestream forgot, and logs growing lag.
    async fn watch(self) {
        loop {
            // Litestream forgetting a database (a restart of the sidecar)
            // raises no event here; polling its list is the only signal.
            tokio::time::sleep(WATCH_EVERY).await;
            if let Ok(listed) = self.inner.control.list().await {
                let missing: Vec<(PathBuf, Database)> = self
                    .lock()
                    .iter()
                    .filter(|(path, _)| {
                        !listed
                            .iter()
                            .any(|entry| Path::new(&entry.path) == path.as_path())
                    })
                    .map(|(path, tracked)| (path.clone(), tracked.database.clone()))
                    .collect();
                for (path, database) in missing {
                    match self.register_again(&path).await {
                        Ok(true) => tracing::warn!(
                            database = database.label(),
                            "replication: Litestream no longer replicated a database; registered it again"
                        ),
                        // Let go of meanwhile (an app that moved).
                        Ok(false) => {}
                        Err(error) => {
                            tracing::error!(database = database.label(), %error, "replication: cannot register again");
                        }
                    }
                }
            }
            let bound = self.inner.config.max_lag;
            let mut databases = self.lock();
            for tracked in databases.values_mut() {
                let lag = tracked
                    .behind_since
                    .map_or(Duration::ZERO, |since| since.elapsed());
                if lag > bound / 2 && !tracked.lag_reported {
                    tracked.lag_reported = true;
                    tracing::warn!(
                        database = tracked.database.label(),
                        lag_seconds = lag.as_secs_f64(),
                        bound_seconds = bound.as_secs(),
                        "replication: lag is growing"
                    );
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Tracked>> {
        self.inner
            .databases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// What [`Replicator::restore_in_place`] did with a database's local file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InPlace {
    /// The local file continues the newest generation holding data: kept.
    Continues(Generation),
    /// No generation in object storage holds data: the local file, if any,
    /// is kept.
    Empty,
    /// The newest generation holding data was restored in place of the
    /// local file; a file that was there is now at `set_aside`.
    Restored {
        from: Generation,
        set_aside: Option<PathBuf>,
    },
}

/// A failure's reason for health: which part failed, never its text.
fn short_reason(error: &ControlError) -> String {
    match error {
        ControlError::NoSocket(_) => "Litestream does not answer".to_owned(),
        ControlError::NotRegistered => "Litestream does not replicate it".to_owned(),
        ControlError::Timeout => "object storage did not confirm in time".to_owned(),
        ControlError::Refused { .. } => "object storage refused or failed the upload".to_owned(),
        ControlError::Garbled => "Litestream's answer could not be read".to_owned(),
    }
}

/// Brings `database` back from object storage into `path` when the file is
/// missing and object storage holds a generation of it (the newest with
/// data); says whether it restored. The restored file continues no
/// generation: a new one begins when it is tracked.
pub async fn restore_if_missing(
    store: &ObjectStore,
    config: &ReplicaConfig,
    database: &Database,
    path: &Path,
) -> Result<bool, String> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(false);
    }
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder).map_err(|error| error.to_string())?;
    }
    let restored = restore_newest(
        store,
        &config.litestream,
        &config.credentials,
        database,
        path,
        None,
    )
    .await?;
    if let Some(generation) = &restored {
        layout::remove_local_state(path).map_err(|error| error.to_string())?;
        tracing::warn!(
            database = database.label(),
            from = generation.as_str(),
            "replication: a missing database was restored from object storage"
        );
    }
    Ok(restored.is_some())
}

/// Every generation of `database` in object storage, in their order
/// (epoch, began, random: see [`crate::layout`]), so the newest is last.
pub async fn generations(
    store: &ObjectStore,
    database: &Database,
) -> Result<Vec<Generation>, StorageError> {
    let mut generations: Vec<Generation> = store
        .list_children(&database.dir())
        .await?
        .iter()
        .filter_map(|name| Generation::parse(name))
        .collect();
    generations.sort();
    Ok(generations)
}

/// Restores `database` into `output` from the newest generation that began
/// at or before `at` (latest when `None`) and holds data at that instant,
/// trying older generations when a newer one holds none yet. Newest is the
/// generations' order: the highest epoch first, so the history of the
/// latest owner is taken over a stale owner's generation that began later
/// by its clock. Says which generation it restored, or `None` when object
/// storage holds none.
pub async fn restore_newest(
    store: &ObjectStore,
    litestream_bin: &Path,
    credentials: &crate::config::Credentials,
    database: &Database,
    output: &Path,
    at: Option<OffsetDateTime>,
) -> Result<Option<Generation>, String> {
    let generations = generations(store, database)
        .await
        .map_err(|error| error.to_string())?;
    let at_millis = at.map(|at| (at.unix_timestamp_nanos() / 1_000_000) as i64);
    for generation in restore_order(&generations, at_millis) {
        let path = database.generation_path(generation);
        let url = store.url().litestream_url(&path);
        let restored = match at {
            None => {
                restore_or_fail(litestream_bin, credentials, &url, output, &Target::Latest).await?
            }
            Some(at) => {
                restore_at(store, litestream_bin, credentials, &path, &url, output, at).await?
            }
        };
        match restored {
            Restored::Written { .. } => return Ok(Some(generation.clone())),
            Restored::Nothing => continue,
        }
    }
    Ok(None)
}

/// The generations a restore at `at_millis` (latest when `None`) tries, in
/// the order it tries them: newest first among those that began at or
/// before it.
fn restore_order(generations: &[Generation], at_millis: Option<i64>) -> Vec<&Generation> {
    let mut order: Vec<&Generation> = generations
        .iter()
        .filter(|generation| at_millis.is_none_or(|at| generation.began_millis() <= at))
        .collect();
    order.sort_by(|a, b| b.cmp(a));
    order
}

async fn restore_or_fail(
    bin: &Path,
    credentials: &crate::config::Credentials,
    url: &str,
    output: &Path,
    target: &Target,
) -> Result<Restored, String> {
    litestream::restore(bin, credentials, url, output, target)
        .await
        .map_err(|failure| match failure {
            RestoreFailure::OutOfRange => "litestream restore refused the instant".to_owned(),
            RestoreFailure::Failed(reason) => reason,
        })
}

/// One generation as it was at `at`. Litestream plans the restore by each
/// file's exact time, but first checks the instant against the bounds a
/// listing gives (whole seconds) and refuses one after the last listed
/// second. Then: before the first file, the generation held nothing; after
/// it, the state is that before the first level-0 file whose exact time is
/// not before `at` (read from its metadata), restored by transaction id.
async fn restore_at(
    store: &ObjectStore,
    bin: &Path,
    credentials: &crate::config::Credentials,
    path: &str,
    url: &str,
    output: &Path,
    at: OffsetDateTime,
) -> Result<Restored, String> {
    let text = at
        .format(&time::format_description::well_known::Rfc3339)
        .map_err(|error| error.to_string())?;
    match litestream::restore(bin, credentials, url, output, &Target::At(text)).await {
        Ok(restored) => return Ok(restored),
        Err(RestoreFailure::Failed(reason)) => return Err(reason),
        Err(RestoreFailure::OutOfRange) => {}
    }
    let objects = store
        .list_keys(&format!("{path}/"))
        .await
        .map_err(|error| error.to_string())?;
    let first = objects
        .iter()
        .filter_map(|object| object.last_modified)
        .min();
    let Some(first) = first else {
        return Ok(Restored::Nothing);
    };
    if at < first {
        return Ok(Restored::Nothing);
    }
    let mut after: Option<u64> = None;
    let mut newest = 0;
    for object in &objects {
        let Some((level, min, max)) = litestream::ltx_range(&object.key) else {
            continue;
        };
        newest = newest.max(max);
        let recent = object
            .last_modified
            .is_none_or(|listed| listed + time::Duration::seconds(1) > at);
        if level != 0 || !recent {
            continue;
        }
        let exact = store
            .litestream_timestamp(&object.key)
            .await
            .map_err(|error| error.to_string())?;
        if exact.is_none_or(|exact| exact >= at) {
            after = Some(after.map_or(min, |known| known.min(min)));
        }
    }
    let txid = match after {
        Some(first_after) => first_after.saturating_sub(1),
        None => newest,
    };
    if txid == 0 {
        return Ok(Restored::Nothing);
    }
    restore_or_fail(bin, credentials, url, output, &Target::Txid(txid)).await
}

/// Most databases one health answer lists (the most behind first).
pub const HEALTH_LISTED: usize = 50;

impl Replicator {
    /// The replication state health answers carry.
    pub fn health(&self) -> sasha_proto::pb::ReplicationHealth {
        let states = self.states();
        let bound = self.inner.config.max_lag;
        let ok = states.iter().all(|state| {
            state.error.is_none() && (self.inner.config.mode == Mode::Sync || state.lag <= bound)
        });
        sasha_proto::pb::ReplicationHealth {
            mode: self.inner.config.mode.as_str().to_owned(),
            ok,
            databases_total: u32::try_from(states.len()).unwrap_or(u32::MAX),
            databases: states
                .into_iter()
                .take(HEALTH_LISTED)
                .map(|state| sasha_proto::pb::DatabaseReplication {
                    database: state.database.label().to_owned(),
                    generation: state.generation.as_str().to_owned(),
                    txid: state.txid,
                    replicated_txid: state.replicated_txid,
                    last_replicated_at: state
                        .last_replicated_at
                        .and_then(|at| {
                            at.format(&time::format_description::well_known::Rfc3339)
                                .ok()
                        })
                        .unwrap_or_default(),
                    lag_seconds: state.lag.as_secs_f64(),
                    error: state.error.unwrap_or_default(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_not_read_back_is_retryable_and_says_nothing_of_why() {
        let detail = ReplicaError::Local(
            "litestream restore: s3://sasha/apps/x?endpoint=http://10.0.0.9:9000 refused".into(),
        );
        let error = detail.to_restore_error();
        assert_eq!(error.code, ErrorCode::DatabaseUnavailable);
        assert!(error.retryable);
        assert!(
            error.message.contains("nothing was changed"),
            "{}",
            error.message
        );
        for leak in ["litestream", "s3://", "10.0.0.9", "refused"] {
            assert!(!error.message.contains(leak), "{}", error.message);
        }
        // Not the words of a write that was not acknowledged.
        assert_ne!(error.message, detail.to_app_error().message);
    }

    #[test]
    fn a_restore_tries_the_highest_epoch_first_among_those_begun_by_then() {
        let generation = |name: &str| Generation::parse(name).unwrap();
        // An older build's history, then owners at epochs 1 and 2; the stale
        // owner of epoch 1 began another generation after epoch 2's by its
        // clock (it was restored after losing its volume, say).
        let generations = vec![
            generation("1765000000000-00000000"),
            generation("e000000000001-1765000001000-00000000"),
            generation("e000000000002-1765000002000-00000000"),
            generation("e000000000001-1765000003000-00000000"),
        ];
        let names = |order: Vec<&Generation>| -> Vec<String> {
            order.iter().map(|g| g.as_str().to_owned()).collect()
        };
        assert_eq!(
            names(restore_order(&generations, None)),
            [
                "e000000000002-1765000002000-00000000",
                "e000000000001-1765000003000-00000000",
                "e000000000001-1765000001000-00000000",
                "1765000000000-00000000",
            ]
        );
        assert_eq!(
            names(restore_order(&generations, Some(1_765_000_002_500))),
            [
                "e000000000002-1765000002000-00000000",
                "e000000000001-1765000001000-00000000",
                "1765000000000-00000000",
            ],
            "began after the instant: never tried"
        );
        assert_eq!(
            names(restore_order(&generations, Some(1_765_000_001_999))),
            [
                "e000000000001-1765000001000-00000000",
                "1765000000000-00000000",
            ]
        );
        assert!(restore_order(&generations, Some(1_764_999_999_999)).is_empty());
    }
}
