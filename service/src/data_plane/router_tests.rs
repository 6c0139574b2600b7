//! The data plane's router: the single layout's epoch 0, kept and fresh
//! routes, the retries after a not-owner answer, and what a lost worker
//! or a refusal does to the route, against a placement the test sets.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::Role;
use crate::identity::DevPki;

/// A studio-core that answers the route it is set to, counting asks.
struct Placement {
    route: Mutex<Route>,
    asked: AtomicUsize,
}

impl Placement {
    fn new(route: Route) -> Arc<Placement> {
        Arc::new(Placement {
            route: Mutex::new(route),
            asked: AtomicUsize::new(0),
        })
    }

    fn set(&self, route: Route) {
        *lock(&self.route) = route;
    }

    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

impl Locate for Placement {
    fn locate<'a>(&'a self, _app_id: &'a str) -> LocateFuture<'a> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let route = lock(&self.route).clone();
        Box::pin(async move { Ok(route) })
    }
}

fn route(worker: &str, epoch: u64) -> Route {
    Route {
        worker_id: worker.to_owned(),
        url: format!("https://{worker}.sasha.internal:3013"),
        epoch,
    }
}

fn identity(dir: &std::path::Path) -> Identity {
    let (pki, _) = DevPki::ensure(dir).unwrap();
    Identity::load(&pki.files(Role::McpGateway)).unwrap()
}

/// A leased data plane over `placement`, and the folder of its
/// certificates (kept while the test runs).
fn leased(placement: &Arc<Placement>) -> (DataPlane, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let plane = DataPlane::leased(placement.clone(), identity(dir.path()));
    (plane, dir)
}

/// What a worker answers a call at `epoch` when it owns the app at
/// `owned`: the epoch, or the not-owner refusal.
fn worker(epoch: u64, owned: u64) -> Result<u64, AppError> {
    if epoch == owned {
        Ok(epoch)
    } else {
        Err(AppError::not_owner("hello"))
    }
}

#[test]
fn the_layout_is_single_unless_leases_is_named() {
    let env = |value: Option<&str>| -> HashMap<String, String> {
        value
            .map(|value| (DATA_PLACEMENT.to_owned(), value.to_owned()))
            .into_iter()
            .collect()
    };
    assert_eq!(Layout::from_env(&env(None)).unwrap(), Layout::Single);
    assert_eq!(Layout::from_env(&env(Some(""))).unwrap(), Layout::Single);
    assert_eq!(
        Layout::from_env(&env(Some("single"))).unwrap(),
        Layout::Single
    );
    assert_eq!(
        Layout::from_env(&env(Some(" leases "))).unwrap(),
        Layout::Leases
    );
    let refused = Layout::from_env(&env(Some("sharded"))).unwrap_err();
    assert!(refused.to_string().contains(DATA_PLACEMENT), "{refused}");
}

#[tokio::test]
async fn a_single_worker_gets_epoch_0_and_no_retry() {
    let dir = tempfile::tempdir().unwrap();
    let client = grpc::data_client("https://127.0.0.1:3013", &identity(dir.path())).unwrap();
    let plane = DataPlane::single(client);
    assert!(plane.single_client().is_some());
    let calls = AtomicUsize::new(0);
    let answer = plane
        .call("hello", |_, epoch| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { worker(epoch, 0) }
        })
        .await;
    assert_eq!(answer.unwrap(), 0);
    // Nobody else can own the app: a not-owner answer is not retried.
    let calls = AtomicUsize::new(0);
    let refused = plane
        .call("hello", |_, epoch| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { worker(epoch, 7) }
        })
        .await
        .unwrap_err();
    assert!(refused.is_not_owner());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(plane.locate("hello").await.unwrap(), None);
}

#[tokio::test]
async fn a_route_is_asked_once_and_kept() {
    let placement = Placement::new(route("worker-1", 3));
    let (plane, _dir) = leased(&placement);
    assert!(plane.single_client().is_none());
    for _ in 0..3 {
        let epoch = plane
            .call("hello", |_, epoch| async move { worker(epoch, 3) })
            .await
            .unwrap();
        assert_eq!(epoch, 3);
    }
    assert_eq!(placement.asked(), 1);
}

#[tokio::test]
async fn a_stale_route_is_asked_again_and_tried_once_more() {
    let placement = Placement::new(route("worker-1", 1));
    let (plane, _dir) = leased(&placement);
    plane
        .call("hello", |_, epoch| async move { worker(epoch, 1) })
        .await
        .unwrap();
    // The app moves: the old owner refuses epoch 1.
    placement.set(route("worker-2", 2));
    let calls = AtomicUsize::new(0);
    let epoch = plane
        .call("hello", |_, epoch| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { worker(epoch, 2) }
        })
        .await
        .unwrap();
    assert_eq!((epoch, calls.load(Ordering::SeqCst)), (2, 2));
    assert_eq!(placement.asked(), 2);
    // The fresh route is kept.
    plane
        .call("hello", |_, epoch| async move { worker(epoch, 2) })
        .await
        .unwrap();
    assert_eq!(placement.asked(), 2);
}

#[tokio::test(start_paused = true)]
async fn not_owner_answers_past_the_wait_are_the_callers_and_the_route_is_forgotten() {
    let placement = Placement::new(route("worker-1", 1));
    let (plane, _dir) = leased(&placement);
    let calls = AtomicUsize::new(0);
    let started = tokio::time::Instant::now();
    let refused = plane
        .call("hello", |_, epoch| {
            calls.fetch_add(1, Ordering::SeqCst);
            // The worker never takes up the app it was given.
            async move { worker(epoch, 0) }
        })
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert!(refused.is_not_owner() && refused.retryable, "{refused:?}");
    assert!(
        waited <= NOT_OWNER_WAIT && waited >= NOT_OWNER_WAIT - Duration::from_millis(500),
        "asked for {waited:?}"
    );
    let made = calls.load(Ordering::SeqCst);
    assert!(
        (3..=12).contains(&made),
        "{made} calls: again with growing pauses"
    );
    assert_eq!(placement.asked(), made);
    plane
        .call("hello", |_, epoch| async move { worker(epoch, 1) })
        .await
        .unwrap();
    assert_eq!(
        placement.asked(),
        made + 1,
        "the next call asks where the app is"
    );
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_takes_up_its_new_app_within_the_wait_serves_the_call() {
    let placement = Placement::new(route("worker-1", 1));
    let (plane, _dir) = leased(&placement);
    let started = tokio::time::Instant::now();
    // The worker learns of the app at its renewal, a second from now.
    let served = plane
        .call("hello", |_, epoch| async move {
            let owned = if started.elapsed() >= Duration::from_secs(1) {
                1
            } else {
                0
            };
            worker(epoch, owned)
        })
        .await
        .unwrap();
    assert_eq!(served, 1);
    assert!(
        started.elapsed() < Duration::from_millis(1_600),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_unreachable_worker_is_forgotten_and_a_refusal_is_not() {
    for lost in [
        AppError::new(ErrorCode::NotReady, "a platform service is not reachable"),
        AppError::from_code(ErrorCode::Timeout),
    ] {
        let placement = Placement::new(route("worker-1", 1));
        let (plane, _dir) = leased(&placement);
        let calls = AtomicUsize::new(0);
        let error = plane
            .call("hello", |_, _| {
                calls.fetch_add(1, Ordering::SeqCst);
                let lost = lost.clone();
                async move { Err::<u64, _>(lost) }
            })
            .await
            .unwrap_err();
        assert_eq!(error.code, lost.code);
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "a call that may have run is not retried"
        );
        placement.set(route("worker-2", 2));
        let epoch = plane
            .call("hello", |_, epoch| async move { worker(epoch, 2) })
            .await
            .unwrap();
        assert_eq!((epoch, placement.asked()), (2, 2), "{lost:?}");
    }
    let placement = Placement::new(route("worker-1", 1));
    let (plane, _dir) = leased(&placement);
    let refused = plane
        .call("hello", |_, _| async {
            Err::<u64, _>(AppError::from_code(ErrorCode::InputInvalid))
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InputInvalid);
    plane
        .call("hello", |_, epoch| async move { worker(epoch, 1) })
        .await
        .unwrap();
    assert_eq!(placement.asked(), 1, "the worker answered: its route holds");
}

/// A route whose URL makes no client is not kept: before, every later
/// call failed on it without asking again.
#[tokio::test]
async fn a_route_with_an_unusable_url_is_not_kept() {
    let placement = Placement::new(Route {
        worker_id: "worker-1".to_owned(),
        url: String::new(),
        epoch: 1,
    });
    let (plane, _dir) = leased(&placement);
    let error = plane
        .call("hello", |_, epoch| async move { worker(epoch, 1) })
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotReady);
    placement.set(route("worker-1", 1));
    plane
        .call("hello", |_, epoch| async move { worker(epoch, 1) })
        .await
        .unwrap();
    assert_eq!(placement.asked(), 2);
}

/// A call that lost its worker forgets the route it took, not one
/// learned meanwhile: before, it dropped the newer route too.
#[tokio::test]
async fn a_lost_call_forgets_only_its_own_route() {
    let placement = Placement::new(route("worker-1", 1));
    let (plane, _dir) = leased(&placement);
    let first = plane.clone();
    let moved = placement.clone();
    let error = plane
        .call("hello", move |_, _| {
            let (plane, placement) = (first.clone(), moved.clone());
            async move {
                // Another call learns the app's new place meanwhile.
                placement.set(route("worker-2", 2));
                plane.locate("hello").await?;
                Err::<u64, _>(AppError::from_code(ErrorCode::Timeout))
            }
        })
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Timeout);
    assert_eq!(placement.asked(), 2);
    let epoch = plane
        .call("hello", |_, epoch| async move { worker(epoch, 2) })
        .await
        .unwrap();
    assert_eq!((epoch, placement.asked()), (2, 2));
}
