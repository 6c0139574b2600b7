//! Group commit: concurrent mutations of one data file share one transaction
//! and one fsync.
//!
//! [`Engine::mutate`] queues its mutation on the file's slot and then takes
//! the slot's connection. Whoever holds the connection leads: it takes its
//! own mutation and every other one waiting with the same contract (up to
//! [`MAX_BATCH`]) out of the queue, runs them in one `BEGIN IMMEDIATE`
//! transaction, each inside a savepoint of its own, commits once and hands
//! every caller its own result. A caller whose mutation another leader ran
//! finds its result when it gets the connection (or before), and returns.
//!
//! Bounds. A batch is what queued while the previous commit was in flight:
//! no caller is ever made to wait for company. It holds at most
//! [`MAX_BATCH`] mutations and stops taking more once its work has run for
//! the engine's deadline; what is left waits for the next batch, which its
//! own callers lead. So a mutation waits for at most the batch in flight and
//! its own, each bounded by count and time.
//!
//! With replication on, the batch's commit is also confirmed in object
//! storage ([`super::durable`]) before any mutation of it is answered with
//! success, by one call for the whole batch; a receipt replayed from an
//! earlier, unconfirmed commit passes the same gate. With several
//! data-workers the same gate admits the batch only under the owner's live
//! lease and answers it only if the lease is still live at the epoch it was
//! admitted under.
//!
//! What it must never do: acknowledge a mutation before the commit that
//! holds it returned (with `synchronous = FULL`, after the WAL's fsync) and,
//! with replication on, before object storage confirmed it; let
//! one mutation's failure undo another's work (a refused or failed mutation
//! rolls back only its savepoint; if SQLite aborted the whole transaction —
//! an interrupt, a full disk — the failed mutation gets its error and the
//! others run again in a fresh transaction); or change what a mutation
//! writes: the receipt lookup, the caller's statements, the audit row and the
//! receipt are exactly those of a mutation run alone, in the same order, so
//! two mutations with one idempotency key in one batch still run once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, mpsc};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension as _, TransactionBehavior};
use sasha_contract::data::DataContract;
use sasha_proto::{AppError, ErrorCode};

use super::{
    AuditMeta, DeadlineScope, Engine, Guard, Handle, MutationOutcome, NOW_SQL, ReceiptKey, Target,
    TrustScope, forget_if_damaged, internal, ledger, ready, sql_error,
};

/// Most mutations one transaction commits. Large enough that 8 to 32
/// concurrent writers share a commit; small enough that one batch's work
/// stays far below the gateway's call timeout.
pub const MAX_BATCH: usize = 32;

/// What a mutation does with the caller's statements inside its savepoint;
/// see [`Engine::mutate`]. `Fn`, not `FnOnce`: when SQLite aborts a batch's
/// transaction the other mutations of the batch run again.
pub type Work = Box<dyn Fn(&Connection, &Trusted<'_>) -> Result<MutationOutcome, AppError> + Send>;

/// Lets a mutation's work read the platform's own tables (an undo reads the
/// ledger it reverts) with the engine's marked statements, while its own
/// statements stay governed.
pub struct Trusted<'a> {
    guard: &'a Guard,
}

impl<'a> Trusted<'a> {
    pub(super) fn new(guard: &'a Guard) -> Trusted<'a> {
        Trusted { guard }
    }

    /// Runs `read` trusted; `read` must prepare only statements that carry
    /// the engine's mark.
    pub fn read<R>(&self, read: impl FnOnce() -> R) -> R {
        let _trusted = TrustScope::new(self.guard, true);
        read()
    }
}

/// The time a mutation of many rows may take per row, where that is longer
/// than the engine's deadline. Measured: an import of 10,000 rows (the file
/// cap) took 1.1 s through MCP on this 2-core machine with another test run
/// beside it, and ran past the 2 s deadline while the whole suite ran; half
/// a millisecond a row gives it 5 s. A one-row mutation keeps the deadline,
/// so a runaway statement is still stopped there.
pub const ROW_BUDGET: Duration = Duration::from_micros(500);

/// The time a mutation of `rows` rows may run: `deadline`, or [`ROW_BUDGET`]
/// per row when that is longer.
fn row_budget(deadline: Duration, rows: usize) -> Duration {
    deadline.max(ROW_BUDGET.saturating_mul(u32::try_from(rows).unwrap_or(u32::MAX)))
}

/// The mutations waiting for one slot's connection.
#[derive(Default)]
pub(super) struct Queue {
    jobs: VecDeque<Job>,
}

struct Job {
    id: u64,
    contract_hash: String,
    receipt: ReceiptKey,
    meta: AuditMeta,
    /// How long its work may run: the engine's deadline, longer for a
    /// mutation of many rows ([`row_budget`]).
    budget: Duration,
    work: Work,
    reply: mpsc::SyncSender<Result<serde_json::Value, AppError>>,
}

impl Job {
    fn answer(&self, result: Result<serde_json::Value, AppError>) {
        // The caller waits on the other end until it has its answer; a closed
        // end means its thread is gone, and the answer with it.
        let _ = self.reply.try_send(result);
    }
}

static NEXT_JOB: AtomicU64 = AtomicU64::new(1);

impl Engine {
    /// Runs one mutation with its idempotency receipt and audit row in the
    /// transaction of its batch (see the module header), inside a savepoint
    /// of its own:
    ///
    /// 1. the receipt `(actor, operation, key)` is looked up: with the same input
    ///    hash its stored result is returned and nothing is written; with another
    ///    hash the call is `APP_IDEMPOTENCY_MISMATCH`;
    /// 2. `work` performs the write with the caller's statements (governed: only
    ///    declared tables) and returns the result and its audit record; an error
    ///    rolls its savepoint back and records no receipt;
    /// 3. the audit row and the receipt are inserted and the savepoint released.
    ///
    /// The result is returned after the batch committed. Concurrent duplicates
    /// run once: mutations of one file run one after another, so the second
    /// sees the first's receipt, in the same batch or a committed one.
    pub fn mutate<'t, F>(
        &self,
        target: impl Into<Target<'t>>,
        contract: &DataContract,
        receipt: ReceiptKey,
        meta: AuditMeta,
        work: F,
    ) -> Result<serde_json::Value, AppError>
    where
        F: Fn(&Connection) -> Result<MutationOutcome, AppError> + Send + 'static,
    {
        self.mutate_rows(target, contract, receipt, meta, 1, work)
    }

    /// [`Engine::mutate`] of a mutation that writes `rows` rows (an import):
    /// its work may run for [`ROW_BUDGET`] per row where that is longer than
    /// the engine's deadline.
    pub fn mutate_rows<'t, F>(
        &self,
        target: impl Into<Target<'t>>,
        contract: &DataContract,
        receipt: ReceiptKey,
        meta: AuditMeta,
        rows: usize,
        work: F,
    ) -> Result<serde_json::Value, AppError>
    where
        F: Fn(&Connection) -> Result<MutationOutcome, AppError> + Send + 'static,
    {
        self.mutate_reading_ledger(target, contract, receipt, meta, rows, move |conn, _| {
            work(conn)
        })
    }

    /// [`Engine::mutate_rows`] whose work may also read the platform's own
    /// tables through [`Trusted`] (an undo reads the ledger it reverts, inside
    /// the transaction that writes).
    pub fn mutate_reading_ledger<'t, F>(
        &self,
        target: impl Into<Target<'t>>,
        contract: &DataContract,
        receipt: ReceiptKey,
        meta: AuditMeta,
        rows: usize,
        work: F,
    ) -> Result<serde_json::Value, AppError>
    where
        F: Fn(&Connection, &Trusted<'_>) -> Result<MutationOutcome, AppError> + Send + 'static,
    {
        let work: Work = Box::new(work);
        let budget = row_budget(self.inner.deadline, rows);
        let (app_id, preview) = target.into().split()?;
        if let Some(preview) = preview {
            // A preview is one person trying a draft: a batch of one.
            let (reply, answer) = mpsc::sync_channel(1);
            let job = Job {
                id: 0,
                contract_hash: contract.hash.clone(),
                receipt,
                meta,
                budget,
                work,
                reply,
            };
            self.with_preview_handle(app_id, preview, contract, |handle| {
                self.run_batch(handle, None, vec![job]);
                Ok(())
            })?;
            return answer
                .recv()
                .unwrap_or_else(|_| Err(internal("a preview mutation went unanswered")));
        }

        let slot = self.slot(app_id);
        let id = NEXT_JOB.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = mpsc::sync_channel(1);
        slot.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .jobs
            .push_back(Job {
                id,
                contract_hash: contract.hash.clone(),
                receipt,
                meta,
                budget,
                work,
                reply,
            });
        loop {
            let mut handle = slot.handle.lock().unwrap_or_else(PoisonError::into_inner);
            // A leader answers before it lets go of the connection, so with the
            // connection in hand either the answer is here or the job is queued.
            if let Ok(result) = answer.try_recv() {
                drop(handle);
                return forget_if_damaged(&slot, result);
            }
            let jobs = {
                let mut queue = slot.queue.lock().unwrap_or_else(PoisonError::into_inner);
                take_batch(&mut queue, id, &contract.hash)
            };
            if jobs.is_empty() {
                return Err(internal("a queued mutation is neither queued nor answered"));
            }
            match ready(
                &mut handle,
                &self.live_path(app_id),
                &self.inner.root,
                contract,
                super::Approval::None,
                super::Publisher::default(),
            ) {
                Ok((handle, _)) => {
                    let (committed, left) = self.run_batch(handle, Some(app_id), jobs);
                    if committed {
                        slot.commits.fetch_add(1, Ordering::Relaxed);
                    }
                    if !left.is_empty() {
                        let mut queue = slot.queue.lock().unwrap_or_else(PoisonError::into_inner);
                        for job in left.into_iter().rev() {
                            queue.jobs.push_front(job);
                        }
                    }
                }
                Err(error) => {
                    for job in &jobs {
                        job.answer(Err(error.clone()));
                    }
                }
            }
            drop(handle);
            if let Ok(result) = answer.try_recv() {
                return forget_if_damaged(&slot, result);
            }
        }
    }

    /// Runs `jobs` (one contract, the slot's connection set up for it) in one
    /// transaction and answers each. Says whether a transaction committed, and
    /// gives back the jobs left for the next batch because this one reached
    /// its time bound.
    ///
    /// `live` names the app whose live file this is (a preview's scratch copy
    /// has none): its batch must be admitted before it runs and its commit
    /// confirmed durable (replicated) before any mutation of it is answered
    /// with success; a mutation's own refusal keeps its own error.
    fn run_batch(
        &self,
        handle: &mut Handle,
        live: Option<&str>,
        mut jobs: Vec<Job>,
    ) -> (bool, Vec<Job>) {
        let admission = match live.map(|app_id| self.admit_write(app_id)) {
            None => None,
            Some(Ok(admission)) => Some(admission),
            Some(Err(error)) => {
                for job in &jobs {
                    job.answer(Err(error.clone()));
                }
                return (false, Vec::new());
            }
        };
        let guard = Arc::clone(&handle.guard);
        // Declared before the transaction so it is dropped after it: the
        // rollback on an early return runs as the engine's own statement.
        let _trusted = TrustScope::new(&guard, true);
        let started = Instant::now();
        loop {
            let mut tx = match handle
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
            {
                Ok(tx) => tx,
                Err(error) => {
                    let error = sql_error(error);
                    for job in &jobs {
                        job.answer(Err(error.clone()));
                    }
                    return (false, Vec::new());
                }
            };
            let mut results = Vec::with_capacity(jobs.len());
            let mut aborted = None;
            for (index, job) in jobs.iter().enumerate() {
                if index > 0 && started.elapsed() >= self.inner.deadline {
                    break;
                }
                let result = {
                    let _deadline = DeadlineScope::new(&guard, job.budget);
                    run_one(
                        &mut tx,
                        &guard,
                        job,
                        self.inner.ledger_offset_ms.load(Ordering::SeqCst),
                    )
                };
                if result.is_err() && tx.is_autocommit() {
                    // SQLite rolled the whole transaction back (an interrupt, a
                    // full disk): only this mutation failed.
                    aborted = Some((index, result));
                    break;
                }
                results.push(result);
            }
            if let Some((index, result)) = aborted {
                drop(tx);
                let failed = jobs.remove(index);
                failed.answer(result);
                if jobs.is_empty() {
                    return (false, Vec::new());
                }
                continue;
            }
            let left = jobs.split_off(results.len());
            let committed = tx.commit().map_err(sql_error);
            // One confirmation for the whole batch: everything committed so
            // far, replays of stored receipts included, is in object storage.
            let durable = match (&committed, live, admission) {
                (Ok(()), Some(app_id), Some(admission)) => self.confirm_durable(app_id, admission),
                _ => Ok(()),
            };
            for (job, result) in jobs.iter().zip(results) {
                job.answer(match (&committed, &durable) {
                    (Err(error), _) => Err(error.clone()),
                    (Ok(()), Err(error)) if result.is_ok() => Err(error.clone()),
                    (Ok(()), _) => result,
                });
            }
            if jobs.len() > 1 {
                tracing::trace!(mutations = jobs.len(), "data engine: group commit");
            }
            return (committed.is_ok(), left);
        }
    }
}

/// The caller's own job first, then every other job of the same contract in
/// queue order, up to [`MAX_BATCH`]; the rest stay queued.
fn take_batch(queue: &mut Queue, own: u64, contract_hash: &str) -> Vec<Job> {
    let mut batch = Vec::new();
    let Some(position) = queue.jobs.iter().position(|job| job.id == own) else {
        return batch;
    };
    if let Some(job) = queue.jobs.remove(position) {
        batch.push(job);
    }
    let mut index = 0;
    while index < queue.jobs.len() && batch.len() < MAX_BATCH {
        if queue.jobs[index].contract_hash == contract_hash {
            if let Some(job) = queue.jobs.remove(index) {
                batch.push(job);
            }
        } else {
            index += 1;
        }
    }
    batch
}

/// One mutation inside its savepoint: receipt lookup, the caller's work, the
/// audit row and the receipt. An error rolls back the savepoint only.
fn run_one(
    tx: &mut rusqlite::Transaction<'_>,
    guard: &Guard,
    job: &Job,
    clock_offset_ms: i64,
) -> Result<serde_json::Value, AppError> {
    let savepoint = tx.savepoint().map_err(sql_error)?;
    let receipt = &job.receipt;
    let stored: Option<(String, String)> = savepoint
        .prepare_cached(
            "/* engine */ SELECT input_hash, result_json FROM _sasha_idempotency \
             WHERE actor = ?1 AND operation = ?2 AND key = ?3",
        )
        .and_then(|mut statement| {
            statement
                .query_row((&receipt.actor, &receipt.operation, &receipt.key), |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .optional()
        })
        .map_err(sql_error)?;
    if let Some((hash, result_json)) = stored {
        if hash != receipt.input_hash {
            return Err(AppError::new(
                ErrorCode::IdempotencyMismatch,
                "this idempotency key was already used with different input",
            ));
        }
        return serde_json::from_str(&result_json)
            .map_err(|_| internal("stored receipt is not valid json"));
    }

    let outcome = {
        let _untrusted = TrustScope::new(guard, false);
        (job.work)(&savepoint, &Trusted { guard })?
    };
    for audit in &outcome.audit {
        if !guard.may_touch(&audit.table, false) {
            return Err(internal("audit record names an undeclared table"));
        }
        let (id, prev, at) = ledger::next(&savepoint, clock_offset_ms).map_err(sql_error)?;
        let entry = ledger::Entry {
            id,
            table: audit.table.clone(),
            record: audit.record_id.clone(),
            operation: audit.operation.as_str().to_owned(),
            actor: receipt.actor.clone(),
            source: job.meta.source.as_str().to_owned(),
            initiator: Some(job.meta.initiator.as_str().to_owned()),
            initiator_id: job.meta.initiator_id.clone(),
            revision: job.meta.app_revision.clone(),
            action: job.meta.action_id.clone(),
            before: audit.before.as_ref().map(serde_json::Value::to_string),
            after: audit.after.as_ref().map(serde_json::Value::to_string),
            at,
        };
        ledger::append(&savepoint, &entry, &prev).map_err(sql_error)?;
    }
    savepoint
        .prepare_cached(&format!(
            "/* engine */ INSERT INTO _sasha_idempotency (actor, operation, key, input_hash, \
             result_json, created_at) VALUES (?1, ?2, ?3, ?4, ?5, {NOW_SQL})"
        ))
        .and_then(|mut statement| {
            statement.execute((
                &receipt.actor,
                &receipt.operation,
                &receipt.key,
                &receipt.input_hash,
                outcome.result.to_string(),
            ))
        })
        .map_err(sql_error)?;
    savepoint.commit().map_err(sql_error)?;
    Ok(outcome.result)
}

#[cfg(test)]
mod tests;
