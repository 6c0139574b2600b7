//! The lease loop of a data-worker with leases (`SASHA_DATA_PLACEMENT=leases`,
//! issue 47): renewing with studio-core's `PlacementService`, and bringing
//! each app's local file in line with what the grant says.
//!
//! - **Renewal.** The instant is noted before each `Renew` is sent (the
//!   lease counts from it, [`crate::ownership`]); renewals run every
//!   `max(lease / 10, 200 ms)`, and at once after a hand-over ends so the app
//!   moves without waiting. A failed renewal is logged once per episode; the
//!   lease then lapses by itself at its deadline, and every call and write is
//!   refused from that instant.
//! - **Each app** has a task of its own, started on its first change, that
//!   compares what [`Ownership`] says with what it last did to the file, and
//!   acts, one step at a time, reading the state afresh after each:
//!   - gained at epoch E (`Restoring`): it waits until no call of an earlier
//!     epoch runs, closes the engine's connections to the file and, when
//!     replicating, restores the newest history from object storage in
//!     place of the local file unless the file continues it
//!     ([`sasha_replica::Replicator::restore_in_place`]), then tracks the
//!     file under a generation of epoch E; only then is the app served;
//!   - lost (the grant no longer names it): serving stopped at once (in
//!     [`Ownership::renewed`]); the task waits for the calls still running,
//!     closes the file's connections and stops replicating it, leaving
//!     object storage to the next owner;
//!   - handed over: once no call runs, the final sync, then `Released`,
//!     listed in the next renewal.
//!
//!   A step that fails (object storage away) is tried again every second,
//!   the app refused meanwhile. At most [`CONCURRENT_TAKE_OVERS`] gained
//!   apps are restored at once.
//!
//! What it must never do: serve an app before its file continues the newest
//! history in object storage (when replicating); release an app while a
//! call of it runs or before its final sync is confirmed; delete anything in
//! object storage; or hold the renewals up behind an app's restore.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sasha_contract::AppId;
use sasha_proto::pb;
use sasha_replica::layout::MAX_EPOCH;
use sasha_replica::{Database, InPlace, Replicator};
use sasha_service::Role;
use sasha_service::grpc::{self, PlacementClient};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::engine::{self, Engine};
use crate::ownership::{Assignment, Grant, Ownership, Phase};

/// The shortest interval between two renewals.
pub const MIN_RENEW_EVERY: Duration = Duration::from_millis(200);

/// How long a renewal may take before the first grant says how long the
/// lease is.
const FIRST_RENEW_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a failed step of an app's task waits before it is tried again:
/// the failure is object storage or Litestream being away, which sends no
/// event when it returns, so the task looks again on a timer (a change of
/// the app's state wakes it sooner).
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// How many gained apps are brought up to date at once: each restore is a
/// `litestream restore` process and a download, and a worker taking over a
/// lost worker's apps gains them all in one renewal. Measured on 2 cores
/// (`benches/placement.rs`, 20 losses of a worker of 10 to 15 apps): with 4
/// the slowest app of a loss was back in 21.2 s at p90, with 8 in 18.0 s;
/// the restores wait on object storage more than on the CPU.
pub const CONCURRENT_TAKE_OVERS: usize = 8;

/// Where a file a restore superseded is set aside, below `APP_DATA_ROOT`:
/// one copy per app, the latest (an operator's evidence of what a stale
/// owner held; never served).
pub const SUPERSEDED_DIR: &str = ".superseded-app-files";

/// The interval between renewals of a lease of `lease` (the default before
/// the first grant).
pub fn renew_every(lease: Option<Duration>) -> Duration {
    lease.map_or(MIN_RENEW_EVERY, |lease| (lease / 10).max(MIN_RENEW_EVERY))
}

/// Who this worker is, as each renewal says.
#[derive(Debug, Clone)]
pub(crate) struct Renewer {
    pub(crate) worker_id: String,
    /// Where callers reach it (`https://…`).
    pub(crate) url: String,
    /// Whether it replicates to object storage (only such a worker's apps
    /// are moved when it is lost, and only such a worker takes apps over).
    pub(crate) replicated: bool,
    pub(crate) client: PlacementClient,
}

/// What the apps' tasks act on.
#[derive(Clone)]
pub(crate) struct Files {
    pub(crate) engine: Engine,
    pub(crate) replicator: Option<Replicator>,
    pub(crate) root: PathBuf,
}

/// The lease loop and the apps' tasks.
struct Placement {
    ownership: Arc<Ownership>,
    files: Files,
    /// Woken when a hand-over ends, for an immediate renewal.
    renew_now: Notify,
    /// Each app's task, by app id, woken when its state changed.
    tasks: Mutex<HashMap<String, Arc<Notify>>>,
    /// Bounds the take-overs running at once ([`CONCURRENT_TAKE_OVERS`]).
    take_overs: tokio::sync::Semaphore,
    shutdown: CancellationToken,
}

/// Starts renewing and acting on grants until `shutdown`.
pub(crate) fn start(
    ownership: Arc<Ownership>,
    renewer: Renewer,
    files: Files,
    shutdown: CancellationToken,
) {
    let placement = Arc::new(Placement {
        ownership,
        files,
        renew_now: Notify::new(),
        tasks: Mutex::new(HashMap::new()),
        take_overs: tokio::sync::Semaphore::new(CONCURRENT_TAKE_OVERS),
        shutdown,
    });
    tokio::spawn(renew_forever(placement, renewer));
}

async fn renew_forever(placement: Arc<Placement>, renewer: Renewer) {
    let mut lease: Option<Duration> = None;
    let mut failing = false;
    loop {
        let released = placement.ownership.releases();
        let request = pb::RenewRequest {
            worker_id: renewer.worker_id.clone(),
            url: renewer.url.clone(),
            replicated: renewer.replicated,
            released: released
                .iter()
                .map(|(app_id, epoch)| pb::Owned {
                    app_id: app_id.clone(),
                    epoch: *epoch,
                })
                .collect(),
        };
        // A grant answered after the deadline it would set is no use.
        let timeout = lease.map_or(FIRST_RENEW_TIMEOUT, |lease| {
            (lease * 9 / 10).max(MIN_RENEW_EVERY)
        });
        let mut client = renewer.client.clone();
        // Noted before the request leaves: the lease counts from here.
        let sent_at = Instant::now();
        let answer = grpc::within(
            Role::StudioCore,
            timeout,
            "the lease may have been renewed",
            client.renew(request),
        )
        .await;
        match answer {
            Ok(grant) => {
                let grant = grant_from_wire(grant);
                lease = Some(grant.lease);
                if failing {
                    tracing::info!("placement: the lease is renewed again");
                    failing = false;
                }
                for app_id in placement.ownership.renewed(sent_at, &grant) {
                    placement.wake(&app_id);
                }
            }
            Err(error) => {
                if !failing {
                    tracing::warn!(
                        diagnostic_id = %error.diagnostic_id,
                        code = ?error.code,
                        "placement: the lease could not be renewed; apps stop being served when it lapses"
                    );
                    failing = true;
                }
            }
        }
        // The lease is timed by the core database's clock, which the worker
        // can only learn by asking: it renews on a timer, ten times a lease,
        // or at once after a release.
        tokio::select! {
            () = tokio::time::sleep(renew_every(lease)) => {}
            () = placement.renew_now.notified() => {}
            () = placement.shutdown.cancelled() => return,
        }
    }
}

/// The grant in domain terms. An assignment that cannot be right (an id no
/// app can have, epoch 0 or past what a generation's name holds, an app
/// named twice) is dropped with an error logged: the app is then not owned,
/// which is the safe side.
fn grant_from_wire(grant: pb::LeaseGrant) -> Grant {
    let mut seen = HashSet::new();
    let mut apps = Vec::with_capacity(grant.apps.len());
    for assignment in grant.apps {
        let usable = AppId::parse(&assignment.app_id).is_ok()
            && (1..=MAX_EPOCH).contains(&assignment.epoch)
            && seen.insert(assignment.app_id.clone());
        if !usable {
            tracing::error!(
                app_id = %assignment.app_id.escape_debug(),
                epoch = assignment.epoch,
                "placement: a grant names an app this worker cannot own; ignored"
            );
            continue;
        }
        apps.push(Assignment {
            app_id: assignment.app_id,
            epoch: assignment.epoch,
            hand_over: assignment.hand_over,
        });
    }
    Grant {
        lease: Duration::from_millis(grant.lease_ms),
        apps,
    }
}

impl Placement {
    /// Wakes `app_id`'s task, starting it on first use.
    fn wake(self: &Arc<Self>, app_id: &str) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        let notify = match tasks.get(app_id) {
            Some(notify) => Arc::clone(notify),
            None => {
                let notify = Arc::new(Notify::new());
                tasks.insert(app_id.to_owned(), Arc::clone(&notify));
                tokio::spawn(app_task(
                    Arc::clone(self),
                    app_id.to_owned(),
                    Arc::clone(&notify),
                ));
                notify
            }
        };
        // A permit is kept when the task is busy: it looks again afterwards.
        notify.notify_one();
    }
}

/// What an app's task last did to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prepared {
    /// Nothing since this process started, or let go of.
    Nothing,
    /// Brought up to date and (when replicating) tracked at this epoch.
    At(u64),
}

/// One app's task (see the module header): acts whenever woken, until the
/// state it finds needs nothing more.
async fn app_task(placement: Arc<Placement>, app_id: String, notify: Arc<Notify>) {
    let mut prepared = Prepared::Nothing;
    loop {
        tokio::select! {
            () = notify.notified() => {}
            () = placement.shutdown.cancelled() => return,
        }
        loop {
            let step = step(&placement, &app_id, &notify, &mut prepared).await;
            match step {
                Step::Settled => break,
                Step::Again => {}
                Step::Failed => {
                    tokio::select! {
                        () = tokio::time::sleep(RETRY_AFTER) => {}
                        () = notify.notified() => {}
                        () = placement.shutdown.cancelled() => return,
                    }
                }
            }
        }
    }
}

/// What one step of an app's task came to.
enum Step {
    /// Nothing more to do until the next change.
    Settled,
    /// Look at the state again at once.
    Again,
    /// A step failed; try again after [`RETRY_AFTER`].
    Failed,
}

async fn step(
    placement: &Arc<Placement>,
    app_id: &str,
    notify: &Notify,
    prepared: &mut Prepared,
) -> Step {
    let ownership = &placement.ownership;
    let Some(owned) = ownership.owned(app_id) else {
        if *prepared == Prepared::Nothing {
            return Step::Settled;
        }
        // Lost: serving stopped already; let go of the file once the calls
        // that were running are done.
        if !until_idle_or_changed(ownership, app_id, notify).await {
            return Step::Again;
        }
        return match let_go(&placement.files, app_id).await {
            Ok(()) => {
                *prepared = Prepared::Nothing;
                Step::Again
            }
            Err(error) => {
                tracing::error!(app_id, %error, "placement: cannot let go of a moved app's file");
                Step::Failed
            }
        };
    };
    match owned.phase {
        Phase::Serving | Phase::Released => Step::Settled,
        Phase::Restoring => {
            if !until_idle_or_changed(ownership, app_id, notify).await {
                return Step::Again;
            }
            if ownership.owned(app_id) != Some(owned) {
                return Step::Again;
            }
            if *prepared != Prepared::At(owned.epoch) {
                // The semaphore is never closed.
                let Ok(_permit) = placement.take_overs.acquire().await else {
                    return Step::Settled;
                };
                if ownership.owned(app_id) != Some(owned) {
                    return Step::Again;
                }
                match take_over(&placement.files, app_id, owned.epoch).await {
                    Ok(()) => *prepared = Prepared::At(owned.epoch),
                    Err(error) => {
                        tracing::error!(app_id, epoch = owned.epoch, %error, "placement: cannot prepare a gained app; it is refused until this succeeds");
                        return Step::Failed;
                    }
                }
            }
            if ownership.restored(app_id, owned.epoch) {
                tracing::info!(app_id, epoch = owned.epoch, "placement: serving the app");
            }
            Step::Again
        }
        Phase::HandingOver => {
            if !until_idle_or_changed(ownership, app_id, notify).await {
                return Step::Again;
            }
            if let Err(error) = final_sync(&placement.files, app_id).await {
                tracing::error!(app_id, %error, "placement: the final sync of a hand-over failed");
                return Step::Failed;
            }
            if ownership.handed_over(app_id, owned.epoch) {
                tracing::info!(app_id, epoch = owned.epoch, "placement: handed over");
                placement.renew_now.notify_one();
            }
            Step::Again
        }
    }
}

/// Waits until no call of `app_id` runs; gives `false` when the app's state
/// changed first (its task looks again).
async fn until_idle_or_changed(ownership: &Ownership, app_id: &str, notify: &Notify) -> bool {
    tokio::select! {
        () = ownership.until_idle(app_id) => true,
        () = notify.notified() => false,
    }
}

/// Why a step on an app's file failed (logged; callers are refused
/// meanwhile).
#[derive(Debug, thiserror::Error)]
enum FileError {
    #[error("replication: {0}")]
    Replica(#[from] sasha_replica::ReplicaError),
    #[error("{0}")]
    Local(String),
}

fn live_path(root: &Path, app_id: &str) -> Result<PathBuf, FileError> {
    engine::live_file_of(root, app_id).ok_or_else(|| FileError::Local("not an app id".to_owned()))
}

/// Closes the engine's connections to the app's file (on the blocking
/// pool: a running batch finishes first).
async fn close(engine: &Engine, app_id: &str) -> Result<(), FileError> {
    let engine = engine.clone();
    let app_id = app_id.to_owned();
    tokio::task::spawn_blocking(move || engine.close(&app_id))
        .await
        .map_err(|error| FileError::Local(format!("closing the file failed: {error}")))
}

/// A gained app at `epoch`: its file brought up to the newest history and
/// tracked under that epoch (when replicating).
async fn take_over(files: &Files, app_id: &str, epoch: u64) -> Result<(), FileError> {
    close(&files.engine, app_id).await?;
    let Some(replicator) = &files.replicator else {
        return Ok(());
    };
    let path = live_path(&files.root, app_id)?;
    let database = Database::App(app_id.to_owned());
    let aside = files.root.join(SUPERSEDED_DIR);
    match replicator
        .restore_in_place(&database, &path, &aside)
        .await?
    {
        InPlace::Restored { from, .. } => {
            tracing::info!(
                app_id,
                epoch,
                from = from.as_str(),
                "placement: restored the app from object storage"
            );
        }
        InPlace::Continues(generation) => {
            tracing::info!(
                app_id,
                epoch,
                continues = generation.as_str(),
                "placement: the local file continues the newest history"
            );
        }
        InPlace::Empty => {}
    }
    // A new app has no file yet: its first commit tracks it at its epoch
    // (the durability gate).
    if std::fs::symlink_metadata(&path).is_ok() {
        replicator.track_at_epoch(&database, &path, epoch).await?;
    }
    Ok(())
}

/// A moved app's file let go of: connections closed, replication stopped.
async fn let_go(files: &Files, app_id: &str) -> Result<(), FileError> {
    close(&files.engine, app_id).await?;
    if let Some(replicator) = &files.replicator {
        let path = live_path(&files.root, app_id)?;
        replicator
            .stop_tracking(&Database::App(app_id.to_owned()), &path)
            .await?;
    }
    Ok(())
}

/// A hand-over's final sync: everything committed is in object storage.
async fn final_sync(files: &Files, app_id: &str) -> Result<(), FileError> {
    let Some(replicator) = &files.replicator else {
        return Ok(());
    };
    let path = live_path(&files.root, app_id)?;
    replicator
        .flush(&Database::App(app_id.to_owned()), &path)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests;
