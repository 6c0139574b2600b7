//! The fence with instants the test chooses: no sleep, no clock read.
//! Each refusal is the one the module header promises (not-owner before
//! anything runs, `APP_DATABASE_UNAVAILABLE` for a write that may have
//! landed), and a hand-over waits for the calls that were running.

use std::time::{Duration, Instant};

use sasha_proto::ErrorCode;

use super::*;

const APP: &str = "notes";
const LEASE: Duration = Duration::from_millis(10_000);

fn grant(apps: &[(&str, u64, bool)]) -> Grant {
    Grant {
        lease: LEASE,
        apps: apps
            .iter()
            .map(|(app_id, epoch, hand_over)| Assignment {
                app_id: (*app_id).to_owned(),
                epoch: *epoch,
                hand_over: *hand_over,
            })
            .collect(),
    }
}

fn assert_not_owner(error: &AppError) {
    assert!(error.is_not_owner(), "{error:?}");
    assert!(error.retryable);
    assert_eq!(error.details.as_ref().unwrap()["appId"], APP);
}

fn assert_may_have_landed(error: &AppError) {
    assert_eq!(error.code, ErrorCode::DatabaseUnavailable, "{error:?}");
    assert!(error.retryable);
    assert!(!error.is_not_owner());
    assert!(
        error.message.contains("same idempotency key"),
        "{}",
        error.message
    );
}

/// A worker owning `APP` at `epoch`, serving, its lease asked for at `t0`.
fn serving(t0: Instant, epoch: u64) -> Arc<Ownership> {
    let ownership = Ownership::leased(true);
    assert_eq!(ownership.renewed(t0, &grant(&[(APP, epoch, false)])), [APP]);
    assert_eq!(ownership.owned(APP).unwrap().phase, Phase::Restoring);
    assert!(ownership.restored(APP, epoch));
    ownership
}

#[test]
fn one_worker_serves_epoch_zero_only_and_never_expires() {
    let ownership = Ownership::single();
    let now = Instant::now();
    let later = now + Duration::from_secs(86_400 * 365);
    let call = ownership.begin_call(APP, 0, later).unwrap();
    assert!(call.still_owned(later));
    assert_eq!(ownership.running(APP), 1);
    drop(call);
    assert_eq!(ownership.running(APP), 0);
    for epoch in [1, 2, u64::MAX] {
        assert_not_owner(&ownership.begin_call(APP, epoch, now).unwrap_err());
    }
    let admission = ownership.admit_write(APP, later).unwrap();
    assert_eq!(admission, Admission { epoch: 0 });
    ownership.confirm_write(APP, admission, later).unwrap();
    assert!(ownership.lease_live(later));
}

#[test]
fn with_leases_nothing_is_served_before_a_grant_nor_at_epoch_zero() {
    let ownership = Ownership::leased(true);
    let now = Instant::now();
    assert!(!ownership.lease_live(now));
    assert_not_owner(&ownership.begin_call(APP, 1, now).unwrap_err());
    assert_eq!(
        ownership.admit_write(APP, now).unwrap_err().code,
        ErrorCode::DatabaseUnavailable
    );

    let ownership = serving(now, 1);
    ownership.begin_call(APP, 1, now).unwrap();
    assert_not_owner(&ownership.begin_call(APP, 0, now).unwrap_err());
    assert!(
        ownership
            .begin_call("other-app", 1, now)
            .unwrap_err()
            .is_not_owner()
    );
}

#[test]
fn a_gained_app_is_refused_until_its_file_is_ready_and_then_only_at_its_epoch() {
    let t0 = Instant::now();
    let ownership = Ownership::leased(true);
    ownership.renewed(t0, &grant(&[(APP, 2, false)]));
    assert_not_owner(&ownership.begin_call(APP, 2, t0).unwrap_err());
    assert!(
        ownership.admit_write(APP, t0).is_err(),
        "no write while restoring"
    );
    assert!(!ownership.restored(APP, 1), "not at another epoch");
    assert!(ownership.restored(APP, 2));
    assert!(!ownership.restored(APP, 2), "once");
    ownership.begin_call(APP, 2, t0).unwrap();
    for epoch in [1, 3] {
        assert_not_owner(&ownership.begin_call(APP, epoch, t0).unwrap_err());
    }
    // The same grant again changes nothing.
    assert!(ownership.renewed(t0, &grant(&[(APP, 2, false)])).is_empty());
}

#[test]
fn a_lapsed_lease_refuses_reads_and_writes_until_renewed() {
    let t0 = Instant::now();
    let ownership = serving(t0, 1);
    let deadline = t0 + LEASE * 9 / 10;
    let before = deadline - Duration::from_millis(1);
    ownership.begin_call(APP, 1, before).unwrap();
    ownership.admit_write(APP, before).unwrap();
    assert!(ownership.lease_live(before));

    assert!(
        !ownership.lease_live(deadline),
        "the deadline itself is past"
    );
    assert_not_owner(&ownership.begin_call(APP, 1, deadline).unwrap_err());
    let refused = ownership.admit_write(APP, deadline).unwrap_err();
    assert_eq!(refused.code, ErrorCode::DatabaseUnavailable);
    assert!(refused.retryable);

    // Renewed at the same epoch (nobody took it over): served again, and
    // the deadline counts from when the renewal was asked for.
    let t1 = deadline + Duration::from_secs(1);
    assert!(ownership.renewed(t1, &grant(&[(APP, 1, false)])).is_empty());
    ownership.begin_call(APP, 1, t1).unwrap();
    assert_not_owner(
        &ownership
            .begin_call(APP, 1, t1 + LEASE * 9 / 10)
            .unwrap_err(),
    );
}

#[test]
fn a_write_committed_after_the_lease_lapsed_is_not_acknowledged() {
    let t0 = Instant::now();
    let ownership = serving(t0, 1);
    let deadline = t0 + LEASE * 9 / 10;
    let admitted_at = deadline - Duration::from_millis(5);
    let admission = ownership.admit_write(APP, admitted_at).unwrap();
    assert_eq!(admission, Admission { epoch: 1 });
    // Confirmed in time: answered.
    ownership
        .confirm_write(APP, admission, deadline - Duration::from_millis(1))
        .unwrap();
    // Its commit (and sync) finished after the deadline: not answered.
    assert_may_have_landed(
        &ownership
            .confirm_write(APP, admission, deadline)
            .unwrap_err(),
    );

    // The same through a call: a read's answer is refused as not-owner, a
    // write's success as may-have-landed, a write's own refusal kept.
    let read = ownership.begin_call(APP, 1, admitted_at).unwrap();
    assert_not_owner(&read.finish(Ok(()), Effect::Reads, deadline).unwrap_err());
    let write = ownership.begin_call(APP, 1, admitted_at).unwrap();
    assert_may_have_landed(&write.finish(Ok(()), Effect::Writes, deadline).unwrap_err());
    let write = ownership.begin_call(APP, 1, admitted_at).unwrap();
    let conflict = AppError::from_code(ErrorCode::Conflict);
    assert_eq!(
        write
            .finish::<()>(Err(conflict), Effect::Writes, deadline)
            .unwrap_err()
            .code,
        ErrorCode::Conflict
    );
    let local = ownership.begin_call(APP, 1, admitted_at).unwrap();
    local.finish(Ok(()), Effect::Local, deadline).unwrap();
    let in_time = ownership.begin_call(APP, 1, admitted_at).unwrap();
    in_time.finish(Ok(()), Effect::Reads, admitted_at).unwrap();
    assert_eq!(ownership.running(APP), 0, "every finished call is done");
}

#[test]
fn a_write_admitted_under_an_epoch_the_app_no_longer_has_is_not_acknowledged() {
    let t0 = Instant::now();
    let ownership = serving(t0, 1);
    let admission = ownership.admit_write(APP, t0).unwrap();
    let call = ownership.begin_call(APP, 1, t0).unwrap();
    // Moved away and back (epoch 3) within the lease: live, but not the
    // epoch the batch was admitted under.
    let t1 = t0 + Duration::from_millis(100);
    assert_eq!(ownership.renewed(t1, &grant(&[])), [APP]);
    assert_not_owner(&ownership.begin_call(APP, 1, t1).unwrap_err());
    assert!(
        ownership.admit_write(APP, t1).is_err(),
        "a lost app admits nothing"
    );
    assert_eq!(ownership.renewed(t1, &grant(&[(APP, 3, false)])), [APP]);
    assert!(ownership.restored(APP, 3));
    assert!(ownership.lease_live(t1));
    assert_may_have_landed(&ownership.confirm_write(APP, admission, t1).unwrap_err());
    assert_may_have_landed(&call.finish(Ok(()), Effect::Writes, t1).unwrap_err());
    assert_not_owner(&ownership.begin_call(APP, 1, t1).unwrap_err());
    ownership.begin_call(APP, 3, t1).unwrap();
}

#[test]
fn a_move_to_another_epoch_restores_again_before_serving() {
    let t0 = Instant::now();
    let ownership = serving(t0, 1);
    // The grant names a later epoch for this worker at once (it lost and
    // regained the app between two renewals).
    assert_eq!(ownership.renewed(t0, &grant(&[(APP, 4, false)])), [APP]);
    assert_eq!(
        ownership.owned(APP),
        Some(Owned {
            epoch: 4,
            phase: Phase::Restoring
        })
    );
    assert_not_owner(&ownership.begin_call(APP, 1, t0).unwrap_err());
    assert_not_owner(&ownership.begin_call(APP, 4, t0).unwrap_err());
}

#[tokio::test]
async fn a_hand_over_refuses_new_calls_and_waits_for_the_running_ones() {
    let t0 = Instant::now();
    let ownership = serving(t0, 1);
    let running = ownership.begin_call(APP, 1, t0).unwrap();
    assert_eq!(ownership.renewed(t0, &grant(&[(APP, 1, true)])), [APP]);
    assert_eq!(ownership.owned(APP).unwrap().phase, Phase::HandingOver);
    assert_not_owner(&ownership.begin_call(APP, 1, t0).unwrap_err());
    // The running call may still write and be answered.
    let admission = ownership.admit_write(APP, t0).unwrap();
    ownership.confirm_write(APP, admission, t0).unwrap();
    assert!(running.still_owned(t0));

    let idle = ownership.until_idle(APP);
    tokio::pin!(idle);
    tokio::select! {
        biased;
        () = &mut idle => panic!("idle while a call runs"),
        () = std::future::ready(()) => {}
    }
    drop(running);
    idle.await;
    assert_eq!(ownership.running(APP), 0);

    assert!(ownership.handed_over(APP, 1));
    assert_eq!(ownership.releases(), [(APP.to_owned(), 1)]);
    assert!(
        ownership.admit_write(APP, t0).is_err(),
        "nothing after the final sync"
    );
    // Listed until the grant no longer names it.
    assert!(ownership.renewed(t0, &grant(&[(APP, 1, true)])).is_empty());
    assert_eq!(ownership.releases(), [(APP.to_owned(), 1)]);
    assert_eq!(ownership.renewed(t0, &grant(&[])), [APP]);
    assert!(ownership.releases().is_empty());
    assert_eq!(ownership.owned(APP), None);
}

#[test]
fn a_called_off_move_serves_again() {
    let t0 = Instant::now();
    let ownership = serving(t0, 1);
    ownership.renewed(t0, &grant(&[(APP, 1, true)]));
    assert!(ownership.handed_over(APP, 1));
    assert_eq!(ownership.renewed(t0, &grant(&[(APP, 1, false)])), [APP]);
    ownership.begin_call(APP, 1, t0).unwrap();
    assert!(ownership.releases().is_empty());
}

#[test]
fn a_worker_that_does_not_replicate_never_hands_an_app_over() {
    let t0 = Instant::now();
    let ownership = Ownership::leased(false);
    ownership.renewed(t0, &grant(&[(APP, 1, false)]));
    assert!(ownership.restored(APP, 1));
    assert!(ownership.renewed(t0, &grant(&[(APP, 1, true)])).is_empty());
    assert_eq!(ownership.owned(APP).unwrap().phase, Phase::Serving);
    ownership.begin_call(APP, 1, t0).unwrap();
}

#[tokio::test]
async fn idle_is_at_once_without_calls() {
    let ownership = Ownership::leased(true);
    ownership.until_idle(APP).await;
}
