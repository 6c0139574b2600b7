//! The durability gate against real files, with a gate the test opens and
//! closes: an unconfirmed commit is never acknowledged and its retry replays
//! once confirmed, a refusal keeps its own error, an unadmitted write writes
//! nothing, an unconfirmed publication is not acknowledged, and a replica
//! that cannot be removed keeps the app's file.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use sasha_proto::{AppError, ErrorCode};
use serde_json::json;

use super::super::tests::{APP, contract, count, create_category, meta, raw, receipt};
use super::super::{Approval, Engine, STATEMENT_DEADLINE};
use super::{Admission, Durability};

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
        .apply_contract(APP, &contract(), false, Approval::None)
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::DatabaseUnavailable);
    gate.refuse_confirm.store(false, Ordering::SeqCst);
    // Applied locally already; the retry applies nothing and is confirmed.
    let retried = engine
        .apply_contract(APP, &contract(), false, Approval::None)
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
