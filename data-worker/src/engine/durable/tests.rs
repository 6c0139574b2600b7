//! The durability gate against real files, with a gate the test opens and
//! closes: an unconfirmed commit is never acknowledged and its retry replays
//! once confirmed, a refusal keeps its own error, an unadmitted write writes
//! nothing, an unconfirmed publication is not acknowledged, and a replica
//! that cannot be removed keeps the app's file.
//!
//! Then the owner's fence with leases, without replication
//! ([`crate::replication::Fenced`] over a real [`Ownership`]): no write
//! without a live lease; a write whose lease lapses, or whose app changes
//! epoch, while its batch runs is committed but not acknowledged, and its
//! retry replays once the lease is live again; a publication and a removal
//! need the lease too.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sasha_proto::{AppError, ErrorCode};
use serde_json::json;

use super::super::tests::{APP, contract, count, create_category, meta, raw, receipt};
use super::super::{Approval, Engine, Publisher, STATEMENT_DEADLINE};
use super::{Admission, Durability};
use crate::ownership::{Assignment, Grant, Ownership};
use crate::replication::Fenced;

/// A gate whose three answers the test sets, counting confirmations.
#[derive(Default)]
struct Gate {
    refuse_admit: AtomicBool,
    refuse_confirm: AtomicBool,
    refuse_removal: AtomicBool,
    confirmations: AtomicUsize,
}

fn unavailable() -> AppError {
    AppError::new(
        ErrorCode::DatabaseUnavailable,
        "object storage did not confirm",
    )
}

impl Durability for Gate {
    fn admit(&self, app_id: &str, _: &Path) -> Result<Admission, AppError> {
        assert_eq!(app_id, APP);
        if self.refuse_admit.load(Ordering::SeqCst) {
            return Err(unavailable());
        }
        Ok(Admission { epoch: 0 })
    }

    fn committed(&self, app_id: &str, path: &Path, admission: Admission) -> Result<(), AppError> {
        assert_eq!(app_id, APP);
        assert_eq!(admission, Admission { epoch: 0 });
        assert!(path.ends_with(format!("{APP}.sqlite")));
        self.confirmations.fetch_add(1, Ordering::SeqCst);
        if self.refuse_confirm.load(Ordering::SeqCst) {
            return Err(unavailable());
        }
        Ok(())
    }

    fn removing(&self, _: &str, _: &Path) -> Result<(), AppError> {
        if self.refuse_removal.load(Ordering::SeqCst) {
            return Err(unavailable());
        }
        Ok(())
    }
}

fn gated(dir: &tempfile::TempDir) -> (Engine, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    let engine = Engine::durable(dir.path(), STATEMENT_DEADLINE, Some(gate.clone()));
    (engine, gate)
}

fn create(engine: &Engine, key: &str, name: &str) -> Result<serde_json::Value, AppError> {
    let input = json!({"name": name});
    engine.mutate(
        APP,
        &contract(),
        receipt("alice", key, &input),
        meta(),
        create_category(name),
    )
}

#[test]
fn an_unconfirmed_commit_is_not_acknowledged_and_its_retry_replays_once_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, gate) = gated(&dir);
    gate.refuse_confirm.store(true, Ordering::SeqCst);
    let refused = create(&engine, "k1", "Travel").unwrap_err();
    assert_eq!(refused.code, ErrorCode::DatabaseUnavailable);
    assert!(refused.retryable);
    // Committed locally, never acknowledged.
    let conn = raw(&dir);
    assert_eq!(count(&conn, "SELECT count(*) FROM categories"), 1);

    // Still refused while storage is away: the replay is gated too.
    assert_eq!(
        create(&engine, "k1", "Travel").unwrap_err().code,
        ErrorCode::DatabaseUnavailable
    );

    gate.refuse_confirm.store(false, Ordering::SeqCst);
    let confirmations = gate.confirmations.load(Ordering::SeqCst);
    let replayed = create(&engine, "k1", "Travel").unwrap();
    assert_eq!(replayed["name"], "Travel");
    assert_eq!(gate.confirmations.load(Ordering::SeqCst), confirmations + 1);
    assert_eq!(count(&conn, "SELECT count(*) FROM categories"), 1, "once");
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_audit"), 1);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_idempotency"), 1);
}

#[test]
fn a_refusal_keeps_its_own_error_when_confirmation_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, gate) = gated(&dir);
    create(&engine, "k1", "Travel").unwrap();
    gate.refuse_confirm.store(true, Ordering::SeqCst);
    // A unique violation is a conflict whatever object storage says.
    assert_eq!(
        create(&engine, "k2", "Travel").unwrap_err().code,
        ErrorCode::Conflict
    );
}

#[test]
fn a_write_that_is_not_admitted_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, gate) = gated(&dir);
    engine.open(APP, &contract()).unwrap();
    gate.refuse_admit.store(true, Ordering::SeqCst);
    assert_eq!(
        create(&engine, "k1", "Travel").unwrap_err().code,
        ErrorCode::DatabaseUnavailable
    );
    assert_eq!(count(&raw(&dir), "SELECT count(*) FROM categories"), 0);
    assert_eq!(gate.confirmations.load(Ordering::SeqCst), 0);
    gate.refuse_admit.store(false, Ordering::SeqCst);
    create(&engine, "k1", "Travel").unwrap();
}

#[test]
fn a_publication_is_acknowledged_only_once_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, gate) = gated(&dir);
    gate.refuse_confirm.store(true, Ordering::SeqCst);
    let refused = engine
        .apply_contract(
            APP,
            &contract(),
            false,
            Approval::None,
            Publisher::default(),
        )
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::DatabaseUnavailable);
    gate.refuse_confirm.store(false, Ordering::SeqCst);
    // Applied locally already; the retry applies nothing and is confirmed.
    let retried = engine
        .apply_contract(
            APP,
            &contract(),
            false,
            Approval::None,
            Publisher::default(),
        )
        .unwrap();
    assert!(retried.applied.is_empty());
}

#[test]
fn a_replica_that_cannot_be_removed_keeps_the_app_file() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, gate) = gated(&dir);
    create(&engine, "k1", "Travel").unwrap();
    gate.refuse_removal.store(true, Ordering::SeqCst);
    assert_eq!(
        engine.back_up_and_remove(APP).unwrap_err().code,
        ErrorCode::DatabaseUnavailable
    );
    assert_eq!(count(&raw(&dir), "SELECT count(*) FROM categories"), 1);
    let backups = dir.path().join(super::super::BACKUP_DIR);
    assert_eq!(
        std::fs::read_dir(&backups).unwrap().count(),
        0,
        "no stray backup"
    );
    gate.refuse_removal.store(false, Ordering::SeqCst);
    assert!(engine.back_up_and_remove(APP).unwrap().is_some());
    assert!(!dir.path().join(format!("{APP}.sqlite")).exists());
}

const LEASE: Duration = Duration::from_secs(60);

fn grant_at(epoch: u64) -> Grant {
    Grant {
        lease: LEASE,
        apps: vec![Assignment {
            app_id: APP.to_owned(),
            epoch,
            hand_over: false,
        }],
    }
}

/// An engine fenced by a leased ownership (no replication), serving `APP`
/// at epoch 1 under a live lease.
fn fenced(dir: &tempfile::TempDir) -> (Engine, Arc<Ownership>) {
    let ownership = Ownership::leased(false);
    ownership.renewed(Instant::now(), &grant_at(1));
    assert!(ownership.restored(APP, 1));
    let gate = Arc::new(Fenced {
        ownership: Arc::clone(&ownership),
        replicator: None,
    });
    (
        Engine::durable(dir.path(), STATEMENT_DEADLINE, Some(gate)),
        ownership,
    )
}

/// The same grant, asked for long enough ago that its lease has lapsed.
fn lapse(ownership: &Ownership, epoch: u64) {
    ownership.renewed(Instant::now() - LEASE, &grant_at(epoch));
}

fn create_then(
    engine: &Engine,
    key: &str,
    name: &str,
    meanwhile: impl Fn() + Send + 'static,
) -> Result<serde_json::Value, AppError> {
    let input = json!({"name": name});
    let create = create_category(name);
    engine.mutate(
        APP,
        &contract(),
        receipt("alice", key, &input),
        meta(),
        move |tx| {
            let outcome = create(tx);
            meanwhile();
            outcome
        },
    )
}

fn assert_may_have_landed(error: &AppError) {
    assert_eq!(error.code, ErrorCode::DatabaseUnavailable, "{error:?}");
    assert!(error.retryable);
    assert!(!error.is_not_owner(), "never not-owner: it may have landed");
    assert!(
        error.message.contains("same idempotency key"),
        "{}",
        error.message
    );
}

#[test]
fn with_leases_no_write_runs_without_a_live_lease() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, ownership) = fenced(&dir);
    create(&engine, "k1", "Travel").unwrap();
    lapse(&ownership, 1);
    let refused = create(&engine, "k2", "Food").unwrap_err();
    assert_eq!(refused.code, ErrorCode::DatabaseUnavailable);
    assert!(refused.retryable);
    assert!(
        refused.message.contains("nothing was written"),
        "{}",
        refused.message
    );
    assert_eq!(count(&raw(&dir), "SELECT count(*) FROM categories"), 1);
    let refused = engine
        .apply_contract(
            APP,
            &contract(),
            false,
            Approval::None,
            Publisher::default(),
        )
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::DatabaseUnavailable);
    assert_eq!(
        engine.back_up_and_remove(APP).unwrap_err().code,
        ErrorCode::DatabaseUnavailable,
        "the replica's removal is a write"
    );
    assert_eq!(count(&raw(&dir), "SELECT count(*) FROM categories"), 1);
}

#[test]
fn with_leases_a_write_whose_lease_lapses_before_its_commit_is_confirmed_is_not_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, ownership) = fenced(&dir);
    let during = Arc::clone(&ownership);
    let refused = create_then(&engine, "k1", "Travel", move || lapse(&during, 1)).unwrap_err();
    assert_may_have_landed(&refused);
    // Committed locally, never acknowledged.
    assert_eq!(count(&raw(&dir), "SELECT count(*) FROM categories"), 1);

    // Renewed at the same epoch (nobody else owned it meanwhile): the retry
    // with the same key replays the receipt, once.
    ownership.renewed(Instant::now(), &grant_at(1));
    let replayed = create(&engine, "k1", "Travel").unwrap();
    assert_eq!(replayed["name"], "Travel");
    assert_eq!(count(&raw(&dir), "SELECT count(*) FROM categories"), 1);
    assert_eq!(count(&raw(&dir), "SELECT count(*) FROM _sasha_audit"), 1);
}

#[test]
fn with_leases_a_write_admitted_under_an_epoch_the_app_lost_is_not_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, ownership) = fenced(&dir);
    let during = Arc::clone(&ownership);
    // Moved away and back at epoch 2 while the batch ran: the lease is live,
    // the epoch is not the one it was admitted under.
    let refused = create_then(&engine, "k1", "Travel", move || {
        during.renewed(Instant::now(), &grant_at(2));
        assert!(during.restored(APP, 2));
    })
    .unwrap_err();
    assert_may_have_landed(&refused);
    assert!(ownership.lease_live(Instant::now()));
    create(&engine, "k2", "Food").unwrap();
}

#[test]
fn with_leases_a_refusal_keeps_its_own_error() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, ownership) = fenced(&dir);
    create(&engine, "k1", "Travel").unwrap();
    let during = Arc::clone(&ownership);
    // A unique violation rolled back: nothing landed, and it says so.
    assert_eq!(
        create_then(&engine, "k2", "Travel", move || lapse(&during, 1))
            .unwrap_err()
            .code,
        ErrorCode::Conflict
    );
}
