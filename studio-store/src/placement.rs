//! Placement of apps on data-workers (`data_workers`, `app_placements`,
//! `placement_events`, migration 23), for the data plane's `leases` layout:
//! which worker owns each app, at which epoch, and each worker's lease.
//!
//! A worker renews its lease through studio-core ([`Store::renew`]); the
//! lease ends `lease` after the database's own clock read in the renewing
//! transaction, so every studio-core replica and the operator CLI time
//! leases alike whatever their own clocks say. The epoch is the fencing
//! token every data call carries: it rises by one on every change of owner,
//! and a worker serves an app only at the epoch its last grant named.
//!
//! An owner changes only inside a write transaction that also appends the
//! change to `placement_events`:
//! - placed: [`Store::locate`] of an app with no placement, on a live worker
//!   that is not draining, at epoch 1;
//! - failover: any worker's renewal finds an owner whose lease lapsed and who
//!   replicates to object storage (only such a worker's data can be restored
//!   elsewhere), and hands its apps to live, replicating, non-draining
//!   workers;
//! - move and drain: the owner is asked to hand over (`move_to`), and lists
//!   the app as released at its epoch once no call runs and the final sync is
//!   done; its renewal then gives the app to `move_to`. A draining worker's
//!   apps move one at a time.
//!
//! Where an app goes is [`rendezvous`]: the candidate with the highest
//! sha256(app id, 0, worker id), so a worker joining or leaving moves only
//! the apps it wins or held.
//!
//! What it must never do: hand an app to a worker whose lease lapsed or that
//! is draining; give two workers one epoch, lower an epoch, or change an
//! owner without raising it (the schema's triggers and the events' unique
//! (app, epoch) refuse it too); move the app of a worker that does not
//! replicate; time a lease by any clock but the database's; or change a
//! placement outside the transaction that records its event.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use sasha_contract::AppId;
use sasha_contract::ids::{WorkerIdError, check_worker_id};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::db::{OptionalExtension as _, Row, Sql, Tx};

use super::{ParseEnumError, Store, StoreError};

/// A data-worker's id, checked ([`check_worker_id`]) when made: every
/// placement call takes one, so no call records a malformed name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkerId(String);

impl WorkerId {
    /// `text` as a worker id, or why it is not one.
    pub fn parse(text: &str) -> Result<WorkerId, WorkerIdError> {
        check_worker_id(text)?;
        Ok(WorkerId(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for WorkerId {
    type Err = WorkerIdError;

    fn from_str(text: &str) -> Result<WorkerId, WorkerIdError> {
        WorkerId::parse(text)
    }
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The longest worker URL recorded.
pub const MAX_WORKER_URL_CHARS: usize = 2048;

/// Why a text is not a data-worker's URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a data-worker's URL {reason}")]
pub struct InvalidWorkerUrl {
    reason: &'static str,
}

/// Where callers reach a data-worker (`SASHA_DATA_ADVERTISE_URL`), checked
/// when made: `https://host:port` (internal gRPC is always mutual TLS),
/// without credentials, path, query or fragment, as every caller dials it
/// and `sasha admin workers` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerUrl(String);

impl WorkerUrl {
    /// `text` as a worker URL, or why it is not one.
    pub fn parse(text: &str) -> Result<WorkerUrl, InvalidWorkerUrl> {
        let refuse = |reason| Err(InvalidWorkerUrl { reason });
        if text.len() > MAX_WORKER_URL_CHARS {
            return refuse("has more than 2048 characters");
        }
        if text.trim() != text || text.chars().any(char::is_control) {
            return refuse("holds spaces or control characters");
        }
        let Ok(url) = url::Url::parse(text) else {
            return refuse("is not an absolute URL");
        };
        if url.scheme() != "https" {
            return refuse("must use https: internal gRPC is always mutual TLS");
        }
        if url.host_str().is_none_or(str::is_empty) || url.port_or_known_default().is_none() {
            return refuse("has no host and port");
        }
        if !url.username().is_empty() || url.password().is_some() {
            return refuse("must not carry credentials");
        }
        if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
            return refuse("names only a host and port (no path, query or fragment)");
        }
        Ok(WorkerUrl(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

wire_enum! {
    /// Why an app changed owner (`placement_events.reason`).
    PlacementReason, "placement reason", "placed, failover, move or drain" {
        /// First placed, at epoch 1.
        Placed => "placed",
        /// Its owner's lease lapsed.
        Failover => "failover",
        /// An operator moved it (`sasha admin apps move`).
        Move => "move",
        /// Its owner was draining.
        Drain => "drain",
    }
}

/// An app a worker reports it has finished handing over, at the epoch it
/// held it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    pub app_id: String,
    pub epoch: u64,
}

/// One app a worker owns, as its grant says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub app_id: String,
    pub epoch: u64,
    /// The app is being moved: finish the running calls, refuse new ones,
    /// make the final sync, then list it as released.
    pub hand_over: bool,
}

/// What a renewal answers the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseGrant {
    /// The lease granted from the moment the transaction read the
    /// database's clock (the worker counts it from before it asked).
    pub lease: Duration,
    /// Every app the worker owns now, by app id.
    pub apps: Vec<Assignment>,
}

/// Where one app's data is served now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub app_id: String,
    pub worker_id: String,
    pub url: String,
    pub epoch: u64,
}

/// One data-worker as the operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataWorker {
    pub worker_id: String,
    pub url: String,
    pub replicated: bool,
    pub draining: bool,
    /// What is left of its lease by the database's clock; `None` once lapsed.
    pub lease_left: Option<Duration>,
    /// How long ago it last renewed, by the database's clock.
    pub renewed_ago: Duration,
    /// How many apps it owns.
    pub apps: u64,
}

/// One app's placement as the operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub app_id: String,
    pub worker_id: String,
    pub epoch: u64,
    /// Where it is being moved, and why (a move or a drain).
    pub moving: Option<(String, PlacementReason)>,
    /// Unix milliseconds (the database's clock) of the last change of owner.
    pub changed_at_ms: i64,
}

/// One row of `placement_events`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementEvent {
    pub id: i64,
    pub app_id: String,
    pub epoch: u64,
    /// `None` when first placed.
    pub from_worker: Option<String>,
    pub to_worker: String,
    pub reason: PlacementReason,
    /// Unix milliseconds, the database's clock.
    pub at_ms: i64,
}

/// Why an operator's placement change was refused; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementRefusal {
    #[error(
        "app {app_id} has no placement yet: it is placed on a data-worker when its data is first used"
    )]
    UnknownApp { app_id: String },
    #[error("no data-worker {worker_id} has ever renewed a lease")]
    UnknownWorker { worker_id: String },
    #[error(
        "data-worker {worker_id}'s lease has lapsed: it is not running or cannot reach studio-core"
    )]
    Lapsed { worker_id: String },
    #[error("data-worker {worker_id} is draining: it takes no app")]
    Draining { worker_id: String },
    #[error(
        "data-worker {worker_id} does not replicate to object storage, so an app's data cannot move to or from it"
    )]
    NotReplicated { worker_id: String },
    #[error("app {app_id} is already on data-worker {worker_id}")]
    AlreadyThere { app_id: String, worker_id: String },
}

/// What [`Store::request_move`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// The owner's lease had lapsed: the app is the target's now, at this
    /// epoch.
    Now { epoch: u64 },
    /// The owner hands it over on its next renewal; the app moves once it
    /// has finished.
    HandingOver,
}

/// The worker `app_id` goes to among `candidates`: the one with the highest
/// sha256(app id, a zero byte, worker id), the worker id breaking a tie.
/// Written once: placing, failing over and draining all choose with it.
pub(crate) fn rendezvous<'a>(
    app_id: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|worker| {
            let mut hash = Sha256::new();
            hash.update(app_id.as_bytes());
            hash.update([0]);
            hash.update(worker.as_bytes());
            (<[u8; 32]>::from(hash.finalize()), worker)
        })
        .max()
        .map(|(_, worker)| worker)
}

/// A `data_workers` row, read inside a transaction.
#[derive(Debug, Clone)]
struct WorkerRow {
    url: String,
    replicated: bool,
    draining: bool,
    lease_until_ms: i64,
    renewed_at_ms: i64,
}

impl WorkerRow {
    /// Live until the database's clock passes its lease: one comparison for
    /// every decision here.
    fn live(&self, now_ms: i64) -> bool {
        now_ms <= self.lease_until_ms
    }

    /// Whether a new app may be placed on it.
    fn takes_new_apps(&self, now_ms: i64) -> bool {
        self.live(now_ms) && !self.draining
    }

    /// Whether another worker's app may be moved to it: it can restore the
    /// app's data from object storage.
    fn takes_moved_apps(&self, now_ms: i64) -> bool {
        self.takes_new_apps(now_ms) && self.replicated
    }
}

/// Every worker, by id.
fn workers_in(transaction: &Tx<'_>) -> Result<BTreeMap<String, WorkerRow>, StoreError> {
    Ok(transaction
        .query_map(
            "SELECT worker_id, url, replicated, draining, lease_until_ms, renewed_at_ms
             FROM data_workers",
            (),
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    WorkerRow {
                        url: row.get(1)?,
                        replicated: row.get(2)?,
                        draining: row.get(3)?,
                        lease_until_ms: row.get(4)?,
                        renewed_at_ms: row.get(5)?,
                    },
                ))
            },
        )?
        .collect::<Result<_, _>>()?)
}

/// An epoch as stored (BIGINT) as the wire carries it.
fn epoch_of(stored: i64) -> Result<u64, StoreError> {
    u64::try_from(stored)
        .map_err(|_| StoreError::Database(format!("a stored epoch {stored} is negative")))
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn duration_of(millis: i64) -> Duration {
    Duration::from_millis(u64::try_from(millis).unwrap_or(0))
}

/// One app's owner, epoch and planned move, inside a transaction.
struct PlacementRow {
    worker_id: String,
    epoch: i64,
    move_to: Option<String>,
    move_reason: Option<PlacementReason>,
}

fn placement_in(transaction: &Tx<'_>, app_id: &str) -> Result<Option<PlacementRow>, StoreError> {
    Ok(transaction
        .query_row(
            "SELECT worker_id, epoch, move_to, move_reason FROM app_placements WHERE app_id = ?1",
            [app_id],
            |row| {
                Ok(PlacementRow {
                    worker_id: row.get(0)?,
                    epoch: row.get(1)?,
                    move_to: row.get(2)?,
                    move_reason: row.get(3)?,
                })
            },
        )
        .optional()?)
}

/// Appends one change of owner to `placement_events`.
fn record(
    transaction: &Tx<'_>,
    now_ms: i64,
    app_id: &str,
    epoch: i64,
    from: Option<&str>,
    to: &str,
    reason: PlacementReason,
) -> Result<(), StoreError> {
    transaction.execute(
        "INSERT INTO placement_events (app_id, epoch, from_worker, to_worker, reason, at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        (app_id, epoch, from, to, reason, now_ms),
    )?;
    Ok(())
}

/// Gives `app_id`, held by `from` at `epoch`, to `to` at `epoch + 1`, ends
/// any planned move, and records why. Every change of owner of a placed app
/// goes through here; the update names the epoch it raises, so it changes
/// nothing unless the app is still where the caller read it.
fn change_owner(
    transaction: &Tx<'_>,
    now_ms: i64,
    app_id: &str,
    (from, epoch): (&str, i64),
    to: &str,
    reason: PlacementReason,
) -> Result<i64, StoreError> {
    let next = epoch
        .checked_add(1)
        .ok_or_else(|| StoreError::Database(format!("the epoch of {app_id} is exhausted")))?;
    let changed = transaction.execute(
        "UPDATE app_placements
         SET worker_id = ?2, epoch = ?3, move_to = NULL, move_reason = NULL, changed_at_ms = ?4
         WHERE app_id = ?1 AND worker_id = ?5 AND epoch = ?6",
        (app_id, to, next, now_ms, from, epoch),
    )?;
    if changed != 1 {
        return Err(StoreError::Database(format!(
            "the placement of {app_id} changed under its own write transaction"
        )));
    }
    record(transaction, now_ms, app_id, next, Some(from), to, reason)?;
    Ok(next)
}

/// Ends the planned move of `app_id`: it stays with its owner at its epoch.
fn cancel_move(transaction: &Tx<'_>, app_id: &str) -> Result<(), StoreError> {
    transaction.execute(
        "UPDATE app_placements SET move_to = NULL, move_reason = NULL WHERE app_id = ?1",
        [app_id],
    )?;
    Ok(())
}

/// Applies `worker`'s releases: an app it was asked to hand over and
/// released at its current epoch goes to `move_to` at epoch + 1. A release
/// naming another epoch, an app it does not own or one nobody asked it to
/// hand over changes nothing. When the target can no longer take it (its
/// lease lapsed, it drains, it stopped replicating), or the releasing
/// worker no longer replicates, the move ends and the app stays: its owner
/// serves it again at the same epoch, which nobody else ever held.
fn apply_releases(
    transaction: &Tx<'_>,
    now_ms: i64,
    worker_id: &str,
    released: &[Released],
    workers: &BTreeMap<String, WorkerRow>,
) -> Result<(), StoreError> {
    let owner_replicates = workers.get(worker_id).is_some_and(|row| row.replicated);
    for release in released {
        let Some(placement) = placement_in(transaction, &release.app_id)? else {
            continue;
        };
        let (Some(to), Some(reason)) = (&placement.move_to, placement.move_reason) else {
            continue;
        };
        if placement.worker_id != worker_id || u64::try_from(placement.epoch) != Ok(release.epoch) {
            continue;
        }
        let target_ready = workers
            .get(to)
            .is_some_and(|row| row.takes_moved_apps(now_ms));
        if target_ready && owner_replicates {
            change_owner(
                transaction,
                now_ms,
                &release.app_id,
                (worker_id, placement.epoch),
                to,
                reason,
            )?;
        } else {
            cancel_move(transaction, &release.app_id)?;
        }
    }
    Ok(())
}

/// Hands every app of a replicating worker whose lease lapsed to a live,
/// replicating, non-draining worker: the one it was being moved to when
/// that one can take it, else [`rendezvous`]'s. With no such worker the
/// apps wait. A lapsed worker that does not replicate keeps its apps: their
/// data is only on its disk.
fn fail_over(
    transaction: &Tx<'_>,
    now_ms: i64,
    workers: &BTreeMap<String, WorkerRow>,
) -> Result<(), StoreError> {
    let candidates: Vec<&str> = workers
        .iter()
        .filter(|(_, row)| row.takes_moved_apps(now_ms))
        .map(|(id, _)| id.as_str())
        .collect();
    for (lost, _) in workers
        .iter()
        .filter(|(_, row)| !row.live(now_ms) && row.replicated)
    {
        let apps: Vec<(String, i64, Option<String>)> = transaction
            .query_map(
                "SELECT app_id, epoch, move_to FROM app_placements WHERE worker_id = ?1
                 ORDER BY app_id",
                [lost],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )?
            .collect::<Result<_, _>>()?;
        for (app_id, epoch, move_to) in apps {
            let to = match move_to.filter(|to| candidates.contains(&to.as_str())) {
                Some(to) => to,
                None => match rendezvous(&app_id, candidates.iter().copied()) {
                    Some(to) => to.to_owned(),
                    None => break,
                },
            };
            change_owner(
                transaction,
                now_ms,
                &app_id,
                (lost, epoch),
                &to,
                PlacementReason::Failover,
            )?;
        }
    }
    Ok(())
}

/// For a draining, replicating `worker_id` with no move in flight, asks it
/// to hand over its next app (by id) to [`rendezvous`]'s choice among the
/// other workers that can take it: one move at a time, the next starting
/// once the previous is done.
fn next_drain_move(
    transaction: &Tx<'_>,
    now_ms: i64,
    worker_id: &str,
    workers: &BTreeMap<String, WorkerRow>,
) -> Result<(), StoreError> {
    if !workers
        .get(worker_id)
        .is_some_and(|row| row.draining && row.replicated)
    {
        return Ok(());
    }
    let in_flight = transaction
        .query_row(
            "SELECT 1 FROM app_placements WHERE worker_id = ?1 AND move_to IS NOT NULL",
            [worker_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if in_flight {
        return Ok(());
    }
    let next: Option<String> = transaction
        .query_row(
            "SELECT app_id FROM app_placements WHERE worker_id = ?1 ORDER BY app_id LIMIT 1",
            [worker_id],
            |row| row.get(0),
        )
        .optional()?;
    let Some(app_id) = next else {
        return Ok(());
    };
    let candidates = workers
        .iter()
        .filter(|(id, row)| id.as_str() != worker_id && row.takes_moved_apps(now_ms))
        .map(|(id, _)| id.as_str());
    if let Some(to) = rendezvous(&app_id, candidates) {
        transaction.execute(
            "UPDATE app_placements SET move_to = ?2, move_reason = ?3 WHERE app_id = ?1",
            (&app_id, to, PlacementReason::Drain),
        )?;
    }
    Ok(())
}

fn route_from_row(row: &Row<'_>) -> Result<(String, String, String, i64), crate::db::DbError> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
}

const ROUTE_SQL: &str = "SELECT p.app_id, p.worker_id, w.url, p.epoch
     FROM app_placements p JOIN data_workers w ON w.worker_id = p.worker_id
     WHERE p.app_id = ?1";

fn route(found: (String, String, String, i64)) -> Result<Route, StoreError> {
    let (app_id, worker_id, url, epoch) = found;
    Ok(Route {
        app_id,
        worker_id,
        url,
        epoch: epoch_of(epoch)?,
    })
}

impl Store {
    /// A data-worker renews its lease and learns what it owns, in one write
    /// transaction: its lease now ends `lease` after the database's clock;
    /// the apps it released (see [`apply_releases`]) go to their new owners;
    /// every app of a replicating worker whose lease lapsed is failed over;
    /// and, when it drains, the next of its apps is asked to move. The grant
    /// lists every app it owns afterwards.
    pub fn renew(
        &self,
        worker_id: &WorkerId,
        url: &WorkerUrl,
        replicated: bool,
        released: &[Released],
        lease: Duration,
    ) -> Result<LeaseGrant, StoreError> {
        let lease_ms = millis(lease);
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let now_ms = transaction.now_ms()?;
        // A granted lease never shortens (a lower SASHA_DATA_LEASE_SECS, or
        // a grant the worker never received): the worker may still count
        // on the deadline an earlier answer gave it.
        transaction.execute(
            "INSERT INTO data_workers
                 (worker_id, url, replicated, lease_until_ms, renewed_at_ms, draining)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (worker_id) DO UPDATE SET
                url = excluded.url,
                replicated = excluded.replicated,
                lease_until_ms = CASE
                    WHEN data_workers.lease_until_ms > excluded.lease_until_ms
                    THEN data_workers.lease_until_ms
                    ELSE excluded.lease_until_ms END,
                renewed_at_ms = excluded.renewed_at_ms",
            (
                worker_id.as_str(),
                url.as_str(),
                replicated,
                now_ms.saturating_add(lease_ms),
                now_ms,
                false,
            ),
        )?;
        let workers = workers_in(&transaction)?;
        apply_releases(&transaction, now_ms, worker_id.as_str(), released, &workers)?;
        fail_over(&transaction, now_ms, &workers)?;
        next_drain_move(&transaction, now_ms, worker_id.as_str(), &workers)?;
        let apps = transaction
            .query_map(
                "SELECT app_id, epoch, move_to FROM app_placements WHERE worker_id = ?1
                 ORDER BY app_id",
                [worker_id.as_str()],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, Option<String>>(2)?,
                    ))
                },
            )?
            .map(|row| {
                let (app_id, epoch, move_to) = row?;
                Ok(Assignment {
                    app_id,
                    epoch: epoch_of(epoch)?,
                    hand_over: move_to.is_some(),
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        transaction.commit()?;
        Ok(LeaseGrant {
            lease: duration_of(lease_ms),
            apps,
        })
    }

    /// Where `app_id`'s data is served. An app with no placement yet is
    /// placed ([`rendezvous`] over the live workers that are not draining,
    /// at epoch 1); `None` when no such worker holds a lease. A placed app's
    /// route is answered whether or not its owner's lease is live: the owner
    /// refuses what it may not serve, and only a renewal moves an app.
    pub fn locate(&self, app_id: &AppId) -> Result<Option<Route>, StoreError> {
        let app_id = app_id.as_str();
        let mut connection = self.connection()?;
        let placed = connection
            .query_row(ROUTE_SQL, [app_id], route_from_row)
            .optional()?;
        if let Some(found) = placed {
            return Ok(Some(route(found)?));
        }
        let transaction = connection.write_transaction()?;
        // Another caller may have placed it since the read above.
        if let Some(found) = transaction
            .query_row(ROUTE_SQL, [app_id], route_from_row)
            .optional()?
        {
            return Ok(Some(route(found)?));
        }
        let now_ms = transaction.now_ms()?;
        let workers = workers_in(&transaction)?;
        let candidates = workers
            .iter()
            .filter(|(_, row)| row.takes_new_apps(now_ms))
            .map(|(id, _)| id.as_str());
        let Some(worker_id) = rendezvous(app_id, candidates) else {
            return Ok(None);
        };
        transaction.execute(
            "INSERT INTO app_placements (app_id, worker_id, epoch, changed_at_ms)
             VALUES (?1, ?2, 1, ?3)",
            (app_id, worker_id, now_ms),
        )?;
        record(
            &transaction,
            now_ms,
            app_id,
            1,
            None,
            worker_id,
            PlacementReason::Placed,
        )?;
        let url = workers
            .get(worker_id)
            .map(|row| row.url.clone())
            .unwrap_or_default();
        let route = Route {
            app_id: app_id.to_owned(),
            worker_id: worker_id.to_owned(),
            url,
            epoch: 1,
        };
        transaction.commit()?;
        Ok(Some(route))
    }

    /// An operator moves `app_id` to `to`. Refused (nothing written) for an
    /// app not placed yet, a target that is unknown, lapsed, draining or
    /// does not replicate, an owner that does not replicate, or a target
    /// that already owns it. When the owner's lease already lapsed, the app
    /// moves at once (epoch + 1); otherwise the owner is asked to hand it
    /// over, replacing any move in flight.
    pub fn request_move(
        &self,
        app_id: &AppId,
        to: &WorkerId,
    ) -> Result<Result<Moved, PlacementRefusal>, StoreError> {
        let (app_id, to) = (app_id.as_str(), to.as_str());
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let now_ms = transaction.now_ms()?;
        let Some(placement) = placement_in(&transaction, app_id)? else {
            return Ok(Err(PlacementRefusal::UnknownApp {
                app_id: app_id.to_owned(),
            }));
        };
        let workers = workers_in(&transaction)?;
        let Some(target) = workers.get(to) else {
            return Ok(Err(PlacementRefusal::UnknownWorker {
                worker_id: to.to_owned(),
            }));
        };
        let owner = workers.get(&placement.worker_id);
        let refused = if placement.worker_id == to {
            Some(PlacementRefusal::AlreadyThere {
                app_id: app_id.to_owned(),
                worker_id: to.to_owned(),
            })
        } else if !target.live(now_ms) {
            Some(PlacementRefusal::Lapsed {
                worker_id: to.to_owned(),
            })
        } else if target.draining {
            Some(PlacementRefusal::Draining {
                worker_id: to.to_owned(),
            })
        } else if !target.replicated {
            Some(PlacementRefusal::NotReplicated {
                worker_id: to.to_owned(),
            })
        } else if !owner.is_some_and(|row| row.replicated) {
            Some(PlacementRefusal::NotReplicated {
                worker_id: placement.worker_id.clone(),
            })
        } else {
            None
        };
        if let Some(refusal) = refused {
            return Ok(Err(refusal));
        }
        let moved = if owner.is_some_and(|row| row.live(now_ms)) {
            transaction.execute(
                "UPDATE app_placements SET move_to = ?2, move_reason = ?3 WHERE app_id = ?1",
                (app_id, to, PlacementReason::Move),
            )?;
            Moved::HandingOver
        } else {
            // A lapsed owner serves nothing: nobody waits for its hand-over.
            let epoch = change_owner(
                &transaction,
                now_ms,
                app_id,
                (&placement.worker_id, placement.epoch),
                to,
                PlacementReason::Move,
            )?;
            Moved::Now {
                epoch: epoch_of(epoch)?,
            }
        };
        transaction.commit()?;
        Ok(Ok(moved))
    }

    /// Starts (`true`) or ends a worker's drain: a draining worker is given
    /// no new app, and its apps move one at a time while it renews. `false`
    /// (nothing written) when it already was so.
    pub fn set_draining(
        &self,
        worker_id: &WorkerId,
        draining: bool,
    ) -> Result<Result<bool, PlacementRefusal>, StoreError> {
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let current: Option<bool> = transaction
            .query_row(
                "SELECT draining FROM data_workers WHERE worker_id = ?1",
                [worker_id.as_str()],
                |row| row.get(0),
            )
            .optional()?;
        let Some(current) = current else {
            return Ok(Err(PlacementRefusal::UnknownWorker {
                worker_id: worker_id.to_string(),
            }));
        };
        if current == draining {
            return Ok(Ok(false));
        }
        transaction.execute(
            "UPDATE data_workers SET draining = ?2 WHERE worker_id = ?1",
            (worker_id.as_str(), draining),
        )?;
        transaction.commit()?;
        Ok(Ok(true))
    }

    /// Every worker that ever renewed, by id, with its lease read against
    /// the database's clock and the number of apps it owns.
    pub fn workers(&self) -> Result<Vec<DataWorker>, StoreError> {
        let mut connection = self.connection()?;
        let transaction = connection.read_transaction()?;
        let now_ms = transaction.now_ms()?;
        let owned: BTreeMap<String, i64> = transaction
            .query_map(
                "SELECT worker_id, count(*) FROM app_placements GROUP BY worker_id",
                (),
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?
            .collect::<Result<_, _>>()?;
        let workers = workers_in(&transaction)?
            .into_iter()
            .map(|(worker_id, row)| DataWorker {
                apps: owned
                    .get(&worker_id)
                    .map_or(0, |count| u64::try_from(*count).unwrap_or(0)),
                lease_left: row
                    .live(now_ms)
                    .then(|| duration_of(row.lease_until_ms - now_ms)),
                renewed_ago: duration_of(now_ms.saturating_sub(row.renewed_at_ms)),
                url: row.url,
                replicated: row.replicated,
                draining: row.draining,
                worker_id,
            })
            .collect();
        Ok(workers)
    }

    /// Every placed app, by id.
    pub fn placements(&self) -> Result<Vec<Placement>, StoreError> {
        let connection = self.connection()?;
        connection
            .query_map(
                "SELECT app_id, worker_id, epoch, move_to, move_reason, changed_at_ms
                 FROM app_placements ORDER BY app_id",
                (),
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                        row.get::<_, Option<String>>(3)?,
                        row.get::<_, Option<PlacementReason>>(4)?,
                        row.get::<_, i64>(5)?,
                    ))
                },
            )?
            .map(|row| {
                let (app_id, worker_id, epoch, move_to, move_reason, changed_at_ms) = row?;
                Ok(Placement {
                    app_id,
                    worker_id,
                    epoch: epoch_of(epoch)?,
                    moving: move_to.zip(move_reason),
                    changed_at_ms,
                })
            })
            .collect()
    }

    /// Every change of owner of `app_id`, oldest first.
    pub fn placement_events(&self, app_id: &AppId) -> Result<Vec<PlacementEvent>, StoreError> {
        let connection = self.connection()?;
        connection
            .query_map(
                "SELECT id, app_id, epoch, from_worker, to_worker, reason, at_ms
                 FROM placement_events WHERE app_id = ?1 ORDER BY id",
                [app_id.as_str()],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                        row.get::<_, Option<String>>(3)?,
                        row.get::<_, String>(4)?,
                        row.get::<_, PlacementReason>(5)?,
                        row.get::<_, i64>(6)?,
                    ))
                },
            )?
            .map(|row| {
                let (id, app_id, epoch, from_worker, to_worker, reason, at_ms) = row?;
                Ok(PlacementEvent {
                    id,
                    app_id,
                    epoch: epoch_of(epoch)?,
                    from_worker,
                    to_worker,
                    reason,
                    at_ms,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
