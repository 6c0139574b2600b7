//! Which apps this data-worker owns, at which epoch, and until when: the
//! fence every data call and every acknowledged write passes (issue 47).
//!
//! With one data-worker (`SASHA_DATA_PLACEMENT=single`) every app is owned
//! at epoch 0 and nothing expires; a call naming another epoch is refused.
//! With leases, studio-core's placement grants this worker a lease and the
//! apps it owns, each at an epoch (a fencing token the core database raises
//! on every change of an app's owner). The lease counts from the instant
//! the worker noted *before* it asked (`sent_at`): the worker serves until
//! `sent_at + lease * 9/10`, so its deadline falls before the database's
//! expiry, after which another worker may take its apps over.
//!
//! An owned app is in one [`Phase`]: `Restoring` (just gained: its file is
//! brought up to the newest history before any call, by
//! [`crate::placement`]), `Serving`, `HandingOver` (an operator moves it:
//! new calls are refused, running ones finish, then the final sync) and
//! `Released` (handed over, listed in each renewal until the grant no
//! longer names it). An app the grant no longer names is dropped at once.
//!
//! Three checks, each given the instant it is made at (tests move time
//! without sleeping):
//!
//! - [`Ownership::begin_call`], before an app-scoped call runs: single, the
//!   epoch is 0; leases, the lease is live and the app is owned, at the
//!   call's epoch, and `Serving`. Otherwise [`AppError::not_owner`], before
//!   anything runs. The [`Call`] it gives counts as running until dropped,
//!   and [`Call::finish`] refuses a read's answer when the app stopped
//!   being owned meanwhile.
//! - [`Ownership::admit_write`], before a write batch runs: the lease is
//!   live and the app owned (`Serving`, or `HandingOver` for the calls that
//!   were running when the move began); the batch's [`Admission`] names
//!   the epoch.
//! - [`Ownership::confirm_write`], after the batch's commit (and sync): the
//!   lease is still live and the app owned at that same epoch. Otherwise
//!   the retryable `APP_DATABASE_UNAVAILABLE`: the write may have landed,
//!   so a retry must carry the same idempotency key, and it is never the
//!   not-owner refusal, which promises that nothing ran.
//!
//! What it must never do: let a call, or the answer of a write, through for
//! an app past the lease's deadline; serve one app at two epochs; answer a
//! write whose batch was admitted under an epoch the app no longer has, or
//! whose lease lapsed before its commit was confirmed; count a call finished
//! while its work still runs.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use sasha_proto::{AppError, ErrorCode};
use sasha_service::data_plane::Layout;

use crate::engine::durable::Admission;

/// Where an owned app stands (see the module header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Gained; its file is being brought up to the newest history.
    Restoring,
    Serving,
    /// Being moved: no new call; the running ones finish, then the final
    /// sync.
    HandingOver,
    /// Handed over: listed in every renewal until the grant drops it.
    Released,
}

/// One owned app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owned {
    pub(crate) epoch: u64,
    pub(crate) phase: Phase,
}

/// A renewal's answer in domain terms (converted from the wire, checked, in
/// [`crate::placement`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    /// The lease the database granted from its commit.
    pub(crate) lease: Duration,
    pub(crate) apps: Vec<Assignment>,
}

/// One app of a [`Grant`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assignment {
    pub(crate) app_id: String,
    /// At least 1: epoch 0 is the single layout's.
    pub(crate) epoch: u64,
    pub(crate) hand_over: bool,
}

/// This worker's apps, its lease and its running calls; shared by the
/// service, the durability gate and the lease loop.
#[derive(Debug)]
pub(crate) struct Ownership {
    layout: Layout,
    /// Whether this worker replicates to object storage: without it an
    /// app's data lives only here, so it is never handed over.
    replicated: bool,
    state: Mutex<State>,
    /// Woken whenever a call ends (a hand-over or a restore waits until no
    /// call of the app runs).
    call_ended: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Leases: the instant from which nothing is served; `None` before the
    /// first grant.
    deadline: Option<Instant>,
    apps: HashMap<String, Owned>,
    /// Calls running, per app (whatever the epoch they began under).
    running: HashMap<String, usize>,
    /// Hand-overs refused because this worker does not replicate, logged
    /// once per app and epoch.
    refused_hand_overs: HashSet<(String, u64)>,
}

impl Ownership {
    /// One data-worker: every app at epoch 0.
    pub(crate) fn single() -> Arc<Ownership> {
        Ownership::new(Layout::Single, false)
    }

    /// Leases: nothing owned until the first grant.
    pub(crate) fn leased(replicated: bool) -> Arc<Ownership> {
        Ownership::new(Layout::Leases, replicated)
    }

    fn new(layout: Layout, replicated: bool) -> Arc<Ownership> {
        Arc::new(Ownership {
            layout,
            replicated,
            state: Mutex::new(State::default()),
            call_ended: tokio::sync::Notify::new(),
        })
    }

    pub(crate) fn layout(&self) -> Layout {
        self.layout
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the lease is live at `now` (single: always).
    pub(crate) fn lease_live(&self, now: Instant) -> bool {
        match self.layout {
            Layout::Single => true,
            Layout::Leases => self.lock().lease_live(now),
        }
    }

    /// May a call of `app_id` naming `epoch` run now? The call counts as
    /// running until the [`Call`] is dropped.
    pub(crate) fn begin_call(
        self: &Arc<Self>,
        app_id: &str,
        epoch: u64,
        now: Instant,
    ) -> Result<Call, AppError> {
        let mut state = self.lock();
        let serves = match self.layout {
            Layout::Single => epoch == 0,
            Layout::Leases => {
                epoch != 0
                    && state.lease_live(now)
                    && state.apps.get(app_id)
                        == Some(&Owned {
                            epoch,
                            phase: Phase::Serving,
                        })
            }
        };
        if !serves {
            return Err(AppError::not_owner(app_id));
        }
        *state.running.entry(app_id.to_owned()).or_default() += 1;
        Ok(Call {
            ownership: Arc::clone(self),
            app_id: app_id.to_owned(),
            epoch,
        })
    }

    /// May a write batch to `app_id` run now, and under which epoch?
    pub(crate) fn admit_write(&self, app_id: &str, now: Instant) -> Result<Admission, AppError> {
        match self.layout {
            Layout::Single => Ok(Admission { epoch: 0 }),
            Layout::Leases => {
                let state = self.lock();
                match state.writable(app_id, now) {
                    Some(epoch) => Ok(Admission { epoch }),
                    None => Err(AppError::new(
                        ErrorCode::DatabaseUnavailable,
                        "the app's data is moving between workers; nothing was written; try again",
                    )),
                }
            }
        }
    }

    /// May a write batch admitted under `admission`, committed (and synced)
    /// by now, be answered?
    pub(crate) fn confirm_write(
        &self,
        app_id: &str,
        admission: Admission,
        now: Instant,
    ) -> Result<(), AppError> {
        match self.layout {
            Layout::Single => Ok(()),
            Layout::Leases => {
                if self.lock().writable(app_id, now) == Some(admission.epoch) {
                    return Ok(());
                }
                Err(may_have_landed(app_id, admission.epoch))
            }
        }
    }

    /// Takes a renewal's `grant`, asked for at `sent_at`: the new deadline,
    /// apps gained (`Restoring`), moved away (dropped) or to hand over. Gives
    /// the apps whose state changed, for [`crate::placement`] to act on.
    pub(crate) fn renewed(&self, sent_at: Instant, grant: &Grant) -> Vec<String> {
        let mut state = self.lock();
        state.deadline = Some(sent_at + grant.lease * 9 / 10);
        let mut changed = Vec::new();
        let granted: HashSet<&str> = grant.apps.iter().map(|a| a.app_id.as_str()).collect();
        let lost: Vec<String> = state
            .apps
            .keys()
            .filter(|app_id| !granted.contains(app_id.as_str()))
            .cloned()
            .collect();
        for app_id in lost {
            state.apps.remove(&app_id);
            tracing::info!(%app_id, "ownership: the app moved away");
            changed.push(app_id);
        }
        for assignment in &grant.apps {
            let app_id = &assignment.app_id;
            let next = match state.apps.get(app_id).copied() {
                Some(owned) if owned.epoch == assignment.epoch => {
                    match (owned.phase, assignment.hand_over) {
                        (Phase::Serving, true) if self.replicated => Phase::HandingOver,
                        (Phase::Serving, true) => {
                            if state
                                .refused_hand_overs
                                .insert((app_id.clone(), owned.epoch))
                            {
                                tracing::error!(
                                    %app_id,
                                    epoch = owned.epoch,
                                    "ownership: asked to hand the app over, but this worker does \
                                     not replicate to object storage and its data exists only \
                                     here; it keeps serving it"
                                );
                            }
                            Phase::Serving
                        }
                        // The move was called off before core took the release.
                        (Phase::HandingOver | Phase::Released, false) => Phase::Serving,
                        (phase, _) => phase,
                    }
                }
                _ => Phase::Restoring,
            };
            let owned = Owned {
                epoch: assignment.epoch,
                phase: next,
            };
            if state.apps.insert(app_id.clone(), owned) != Some(owned) {
                tracing::info!(%app_id, epoch = owned.epoch, phase = ?owned.phase, "ownership: the app's state changed");
                changed.push(app_id.clone());
            }
        }
        changed
    }

    /// The app as it stands now.
    pub(crate) fn owned(&self, app_id: &str) -> Option<Owned> {
        self.lock().apps.get(app_id).copied()
    }

    /// A gained app's file is ready at `epoch`: it is served, if it is still
    /// owned at that epoch and was restoring. Says whether it is.
    pub(crate) fn restored(&self, app_id: &str, epoch: u64) -> bool {
        self.advance(app_id, epoch, Phase::Restoring, Phase::Serving)
    }

    /// An app's hand-over at `epoch` is done (no call runs, the final sync
    /// is made): it is released, if it was still being handed over at that
    /// epoch. Says whether it is.
    pub(crate) fn handed_over(&self, app_id: &str, epoch: u64) -> bool {
        self.advance(app_id, epoch, Phase::HandingOver, Phase::Released)
    }

    fn advance(&self, app_id: &str, epoch: u64, from: Phase, to: Phase) -> bool {
        let mut state = self.lock();
        match state.apps.get_mut(app_id) {
            Some(owned) if owned.epoch == epoch && owned.phase == from => {
                owned.phase = to;
                true
            }
            _ => false,
        }
    }

    /// The apps handed over, for the next renewal's `released`.
    pub(crate) fn releases(&self) -> Vec<(String, u64)> {
        let mut released: Vec<(String, u64)> = self
            .lock()
            .apps
            .iter()
            .filter(|(_, owned)| owned.phase == Phase::Released)
            .map(|(app_id, owned)| (app_id.clone(), owned.epoch))
            .collect();
        released.sort();
        released
    }

    /// How many calls of `app_id` run now.
    pub(crate) fn running(&self, app_id: &str) -> usize {
        self.lock().running.get(app_id).copied().unwrap_or(0)
    }

    /// Returns once no call of `app_id` runs. New calls are refused by then
    /// (the app is restoring, handing over or gone), so this only waits for
    /// the calls that began before: each is bounded by its statements'
    /// deadlines and the sync timeout.
    pub(crate) async fn until_idle(&self, app_id: &str) {
        loop {
            let ended = self.call_ended.notified();
            tokio::pin!(ended);
            // Registered before the count is read, so an end in between is
            // not missed.
            ended.as_mut().enable();
            if self.running(app_id) == 0 {
                return;
            }
            ended.await;
        }
    }
}

impl State {
    fn lease_live(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|deadline| now < deadline)
    }

    /// The epoch a write to `app_id` may run or be answered under now.
    fn writable(&self, app_id: &str, now: Instant) -> Option<u64> {
        if !self.lease_live(now) {
            return None;
        }
        self.apps
            .get(app_id)
            .filter(|owned| matches!(owned.phase, Phase::Serving | Phase::HandingOver))
            .map(|owned| owned.epoch)
    }
}

/// What an app-scoped call does, for the check at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// It reads the app's data (or its structure).
    Reads,
    /// It may write the live file: its success was fenced at the durability
    /// gate already and is checked once more.
    Writes,
    /// It touches only this worker's scratch files (a preview's removal).
    Local,
}

/// A running call of one app at one epoch (see [`Ownership::begin_call`]).
/// Move it into the work it guards: it counts as running until dropped.
#[derive(Debug)]
pub(crate) struct Call {
    ownership: Arc<Ownership>,
    app_id: String,
    epoch: u64,
}

impl Call {
    /// Whether the app is still owned at the call's epoch at `now` (a call
    /// that began before a hand-over may still finish).
    pub(crate) fn still_owned(&self, now: Instant) -> bool {
        match self.ownership.layout {
            Layout::Single => true,
            Layout::Leases => self.ownership.lock().writable(&self.app_id, now) == Some(self.epoch),
        }
    }

    /// The call's answer as it may leave at `now`: unchanged while the app
    /// is still owned at its epoch; otherwise a read's answer is the
    /// not-owner refusal (it may be stale, and nothing was written), and a
    /// write's success is `APP_DATABASE_UNAVAILABLE` (it may have landed).
    pub(crate) fn finish<T>(
        self,
        result: Result<T, AppError>,
        effect: Effect,
        now: Instant,
    ) -> Result<T, AppError> {
        if effect == Effect::Local || self.still_owned(now) {
            return result;
        }
        match (effect, result) {
            (Effect::Writes, Err(error)) => Err(error),
            (Effect::Writes, Ok(_)) => Err(may_have_landed(&self.app_id, self.epoch)),
            _ => Err(AppError::not_owner(&self.app_id)),
        }
    }
}

/// A committed write that is not answered because the app stopped being
/// owned at the epoch it was admitted under: retryable, and never the
/// not-owner refusal (which promises that nothing ran).
fn may_have_landed(app_id: &str, epoch: u64) -> AppError {
    let error = AppError::new(
        ErrorCode::DatabaseUnavailable,
        "the write may have landed but this worker stopped owning the app before it was \
         confirmed; retry with the same idempotency key",
    );
    tracing::warn!(
        diagnostic_id = %error.diagnostic_id,
        app_id,
        epoch,
        "ownership: a committed write is not answered: the lease lapsed or the app moved"
    );
    error
}

impl Drop for Call {
    fn drop(&mut self) {
        {
            let mut state = self.ownership.lock();
            if let Some(running) = state.running.get_mut(&self.app_id) {
                *running = running.saturating_sub(1);
                if *running == 0 {
                    state.running.remove(&self.app_id);
                }
            }
        }
        self.ownership.call_ended.notify_waiters();
    }
}

#[cfg(test)]
mod tests;
