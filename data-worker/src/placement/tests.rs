//! A real data-worker with leases, served in the test's process over the
//! development PKI on loopback, renewing with a small `PlacementService`
//! the test controls (studio-core's own is studio-core's tests' business):
//!
//! - before any lease the worker is not ready and refuses every call; a
//!   granted app is served at its epoch only; an app the grant no longer
//!   names (another worker owns it at a higher epoch) is refused at every
//!   epoch; regained at a later epoch it is served again;
//! - a worker that does not replicate keeps serving an app it is asked to
//!   hand over, and never lists it as released;
//! - a hand-over refuses new calls at once and is listed in the renewal
//!   after the running call ends, not before;
//! - a release core answers by calling the move off (the target can no
//!   longer take the app: the app comes back at the same epoch, no longer
//!   to hand over) is served again, reads and writes, and not released
//!   again;
//! - the configuration of the leases layout: each bad value one line
//!   naming its variable.
//!
//! Waits are for events (the fake's renewals, the worker's answers), each
//! bounded so a broken worker fails the test instead of hanging it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sasha_contract::caller::{AppAccess, CallSource};
use sasha_contract::data::DataContract;
use sasha_proto::AppError;
use sasha_proto::convert::ToWire;
use sasha_proto::pb::placement_service_server::{PlacementService, PlacementServiceServer};
use sasha_proto::pb::{self, LeaseGrant, RenewRequest};
use sasha_service::Role;
use sasha_service::grpc::{self, DataClient};
use sasha_service::identity::{DevPki, Identity};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use super::*;
use crate::ownership::Ownership;
use crate::service::Worker;

const APP: &str = "notes";
const LEASE_MS: u64 = 10_000;
/// How long any one awaited event may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// What the test's placement answers, and every renewal it was sent.
struct Fake {
    grant: Mutex<LeaseGrant>,
    /// The grant that answers the first renewal releasing something, and
    /// every one after (core applies a release in the renewal carrying it).
    on_release: Mutex<Option<LeaseGrant>>,
    /// Answer `UNAVAILABLE` instead (studio-core not answering).
    refuse: std::sync::atomic::AtomicBool,
    renewals: Mutex<Vec<RenewRequest>>,
    /// How many renewals were answered.
    answered: watch::Sender<usize>,
}

impl Fake {
    fn new(apps: &[(&str, u64, bool)]) -> Arc<Fake> {
        Arc::new(Fake {
            grant: Mutex::new(grant(apps)),
            on_release: Mutex::new(None),
            refuse: std::sync::atomic::AtomicBool::new(false),
            renewals: Mutex::new(Vec::new()),
            answered: watch::Sender::new(0),
        })
    }

    fn set(&self, apps: &[(&str, u64, bool)]) {
        *self.grant.lock().unwrap() = grant(apps);
    }

    /// Answers the first renewal that releases something with `apps`.
    fn on_release(&self, apps: &[(&str, u64, bool)]) {
        *self.on_release.lock().unwrap() = Some(grant(apps));
    }

    fn count(&self) -> usize {
        *self.answered.borrow()
    }

    fn renewals(&self) -> Vec<RenewRequest> {
        self.renewals.lock().unwrap().clone()
    }

    /// Waits until `more` renewals beyond those answered now were answered;
    /// the worker applied all but the last of them by then (it sends the
    /// next only after applying the previous).
    async fn after(&self, more: usize) {
        let target = self.count() + more;
        let mut answered = self.answered.subscribe();
        tokio::time::timeout(PATIENCE, answered.wait_for(|count| *count >= target))
            .await
            .expect("the worker keeps renewing")
            .unwrap();
    }

    /// Waits for the first renewal that releases something; gives it.
    async fn first_release(&self) -> RenewRequest {
        let mut answered = self.answered.subscribe();
        tokio::time::timeout(
            PATIENCE,
            answered.wait_for(|_| self.renewals().iter().any(|r| !r.released.is_empty())),
        )
        .await
        .expect("a renewal releases the app")
        .unwrap();
        self.renewals()
            .into_iter()
            .find(|renewal| !renewal.released.is_empty())
            .unwrap()
    }
}

fn grant(apps: &[(&str, u64, bool)]) -> LeaseGrant {
    LeaseGrant {
        lease_ms: LEASE_MS,
        apps: apps
            .iter()
            .map(|(app_id, epoch, hand_over)| pb::Assignment {
                app_id: (*app_id).to_owned(),
                epoch: *epoch,
                hand_over: *hand_over,
            })
            .collect(),
    }
}

#[derive(Clone)]
struct Placement(Arc<Fake>);

#[tonic::async_trait]
impl PlacementService for Placement {
    async fn renew(&self, request: Request<RenewRequest>) -> Result<Response<LeaseGrant>, Status> {
        if self.0.refuse.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Status::unavailable("studio-core is away"));
        }
        let request = request.into_inner();
        if !request.released.is_empty()
            && let Some(answer) = self.0.on_release.lock().unwrap().take()
        {
            *self.0.grant.lock().unwrap() = answer;
        }
        self.0.renewals.lock().unwrap().push(request);
        let grant = self.0.grant.lock().unwrap().clone();
        self.0.answered.send_modify(|count| *count += 1);
        Ok(Response::new(grant))
    }

    async fn locate(&self, _: Request<pb::LocateRequest>) -> Result<Response<pb::Route>, Status> {
        Err(Status::unimplemented("data-workers never locate"))
    }
}

/// The placement served as studio-core (its certificate) on loopback.
async fn serve_placement(fake: Arc<Fake>, pki: &DevPki, shutdown: &CancellationToken) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let identity = Identity::load(&pki.files(Role::StudioCore)).unwrap();
    let router = grpc::server_builder().add_service(PlacementServiceServer::new(Placement(fake)));
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        let _ = grpc::serve_mtls(router, listener, &identity, Role::StudioCore, shutdown).await;
    });
    url
}

/// The one-table contract the worker's service tests use.
fn contract() -> DataContract {
    crate::service::tests::contract_with(&[crate::service::tests::FIRST])
}

/// A caller of the worker, as the gateway calls it.
struct Caller {
    client: DataClient,
    contract: DataContract,
}

impl Caller {
    fn new(addr: SocketAddr, pki: &DevPki) -> Caller {
        let identity = Identity::load(&pki.files(Role::McpGateway)).unwrap();
        Caller {
            client: grpc::data_client(&format!("https://{addr}"), &identity).unwrap(),
            contract: contract(),
        }
    }

    async fn execute(&self, epoch: u64, operation: &str, json: Value) -> Result<Value, AppError> {
        let request = pb::ExecuteRequest {
            epoch,
            app_id: APP.into(),
            contract_hash: self.contract.hash.clone(),
            actor: Some(pb::Actor {
                user_id: "alice".into(),
                access: AppAccess::Use.to_wire(),
            }),
            operation: operation.into(),
            table: "notes".into(),
            request_json: json.to_string(),
            contract: Some(pb::DataContract::from(&self.contract)),
            source: CallSource::Ui.to_wire(),
            provenance: Some(sasha_proto::convert::provenance_to_wire(
                sasha_contract::caller::Initiator::AppView,
                None,
            )),
            app_revision: "rev-1".into(),
            action_id: String::new(),
            preview: String::new(),
            preview_scope: None,
        };
        self.client
            .clone()
            .execute(request)
            .await
            .map(|reply| serde_json::from_str(&reply.into_inner().result_json).unwrap())
            .map_err(|status| AppError::from_status(&status))
    }

    async fn bodies(&self, epoch: u64) -> Result<Vec<Value>, AppError> {
        let listed = self.execute(epoch, "list", json!({})).await?;
        Ok(listed["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["body"].clone())
            .collect())
    }

    async fn create(&self, epoch: u64, key: &str, body: &str) -> Result<Value, AppError> {
        self.execute(
            epoch,
            "create",
            json!({"values": {"body": body}, "idempotencyKey": key}),
        )
        .await
    }

    /// Waits until the app is served at `epoch` (a list answers).
    async fn until_served(&self, epoch: u64) {
        let started = tokio::time::Instant::now();
        loop {
            match self.bodies(epoch).await {
                Ok(_) => return,
                Err(error) if error.is_not_owner() => {}
                Err(error) => panic!("not a refusal of a call too early: {error:?}"),
            }
            assert!(
                started.elapsed() < PATIENCE,
                "the app is never served at epoch {epoch}"
            );
            // The app's task restores on its own schedule; no event reaches
            // a remote caller but the answer itself.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the app is refused as not owned at `epoch`.
    async fn until_refused(&self, epoch: u64) {
        let started = tokio::time::Instant::now();
        loop {
            match self.bodies(epoch).await {
                Err(error) if error.is_not_owner() => return,
                Ok(_) => {}
                Err(error) => panic!("not the not-owner refusal: {error:?}"),
            }
            assert!(
                started.elapsed() < PATIENCE,
                "the app is still served at epoch {epoch}"
            );
            // As above: only the answer tells a remote caller.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn assert_not_owner(result: Result<impl std::fmt::Debug, AppError>) {
    let error = result.unwrap_err();
    assert!(error.is_not_owner(), "{error:?}");
    assert!(error.retryable);
    assert_eq!(error.details.as_ref().unwrap()["appId"], APP);
}

fn env(state: &std::path::Path, core_url: &str) -> HashMap<String, String> {
    HashMap::from([
        ("SASHA_STATE_DIR".to_owned(), state.display().to_string()),
        ("SASHA_DATA_PLACEMENT".to_owned(), "leases".to_owned()),
        ("SASHA_DATA_WORKER_ID".to_owned(), "worker-a".to_owned()),
        ("SASHA_CORE_GRPC_URL".to_owned(), core_url.to_owned()),
    ])
}

async fn ready(health: SocketAddr) -> (bool, Value) {
    let mut stream = tokio::net::TcpStream::connect(health).await.unwrap();
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    stream
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (
        head.starts_with("HTTP/1.1 200"),
        serde_json::from_str(body).unwrap(),
    )
}

#[tokio::test]
async fn a_leased_worker_serves_what_it_is_granted_at_its_epoch_only() {
    let state = tempfile::tempdir().unwrap();
    let (pki, _) = DevPki::ensure(&state.path().join("certs")).unwrap();
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let fake = Fake::new(&[]);
    fake.refuse.store(true, std::sync::atomic::Ordering::SeqCst);
    let core_url = serve_placement(fake.clone(), &pki, &shutdown).await;

    let config = crate::Config::from_env(&env(state.path(), &core_url)).unwrap();
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = grpc.local_addr().unwrap();
    let health = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let health_addr = health.local_addr().unwrap();
    tokio::spawn(crate::run(
        config,
        crate::Listeners {
            grpc,
            health: Some(health),
        },
        shutdown.clone(),
    ));
    let caller = Caller::new(addr, &pki);

    // studio-core does not answer: no lease, not ready, nothing served.
    let (is_ready, body) = ready(health_addr).await;
    assert!(!is_ready, "{body}");
    assert!(body.to_string().contains("no live lease"), "{body}");
    assert_not_owner(caller.bodies(1).await);
    assert_not_owner(caller.bodies(0).await);

    fake.refuse
        .store(false, std::sync::atomic::Ordering::SeqCst);
    fake.after(2).await;
    let first = &fake.renewals()[0];
    assert_eq!(first.worker_id, "worker-a");
    assert_eq!(first.url, format!("https://{addr}"), "the bound address");
    assert!(!first.replicated);
    assert!(first.released.is_empty());
    let (is_ready, body) = ready(health_addr).await;
    assert!(is_ready, "ready once a lease is held: {body}");
    assert_not_owner(caller.bodies(1).await);

    // Granted at epoch 1: served at epoch 1 only.
    fake.set(&[(APP, 1, false)]);
    caller.until_served(1).await;
    caller.create(1, "k1", "first").await.unwrap();
    assert_eq!(caller.bodies(1).await.unwrap(), [json!("first")]);
    for epoch in [0, 2] {
        assert_not_owner(caller.bodies(epoch).await);
        assert_not_owner(caller.create(epoch, "k2", "second").await);
    }

    // Another worker owns it now, at epoch 2: absent from this grant.
    fake.set(&[]);
    caller.until_refused(1).await;
    for epoch in [1, 2] {
        assert_not_owner(caller.bodies(epoch).await);
        assert_not_owner(caller.create(epoch, "k2", "second").await);
    }

    // Back at epoch 3 (no replication: the local file is the history).
    fake.set(&[(APP, 3, false)]);
    caller.until_served(3).await;
    assert_not_owner(caller.bodies(1).await);
    assert_eq!(caller.bodies(3).await.unwrap(), [json!("first")]);

    // Asked to hand it over without object storage to hand it over
    // through: it keeps serving and never releases it.
    fake.set(&[(APP, 3, true)]);
    fake.after(3).await;
    assert_eq!(caller.bodies(3).await.unwrap(), [json!("first")]);
    assert!(fake.renewals().iter().all(|r| r.released.is_empty()));
}

/// A leased worker renewing with `fake`, with the parts `boot` puts
/// together, but one that reports replicating (its final sync has nothing
/// to upload): a worker that does not replicate never hands over. Gives
/// its ownership and a caller, once `APP` is served at epoch 1.
async fn replicating_worker(
    state: &tempfile::TempDir,
    fake: &Arc<Fake>,
    shutdown: &CancellationToken,
) -> (Arc<Ownership>, Caller) {
    let (pki, _) = DevPki::ensure(&state.path().join("certs")).unwrap();
    let core_url = serve_placement(fake.clone(), &pki, shutdown).await;
    let root = state.path().join("apps");
    crate::engine::files::private_root(&root).unwrap();
    let ownership = Ownership::leased(true);
    let worker = Worker::new(&root, None, Arc::clone(&ownership));
    let identity = Identity::load(&pki.files(Role::DataWorker)).unwrap();
    let grpc_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = grpc_listener.local_addr().unwrap();
    start(
        Arc::clone(&ownership),
        Renewer {
            worker_id: "worker-a".to_owned(),
            url: format!("https://{addr}"),
            replicated: true,
            client: grpc::placement_client(&[core_url], &identity).unwrap(),
        },
        Files {
            engine: worker.engine().clone(),
            replicator: None,
            root: root.clone(),
        },
        shutdown.clone(),
    );
    let router =
        grpc::server_builder().add_service(pb::data_service_server::DataServiceServer::new(worker));
    let serving = shutdown.clone();
    tokio::spawn(async move {
        let _ = grpc::serve_mtls(router, grpc_listener, &identity, Role::DataWorker, serving).await;
    });
    let caller = Caller::new(addr, &pki);
    caller.until_served(1).await;
    (ownership, caller)
}

#[tokio::test]
async fn a_hand_over_is_released_in_the_renewal_after_the_running_call_ends() {
    let state = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let fake = Fake::new(&[(APP, 1, false)]);
    let (ownership, caller) = replicating_worker(&state, &fake, &shutdown).await;
    caller.create(1, "k1", "first").await.unwrap();

    // A call is running (its guard held) when the move begins.
    let running = ownership
        .begin_call(APP, 1, std::time::Instant::now())
        .unwrap();
    fake.set(&[(APP, 1, true)]);
    caller.until_refused(1).await;
    assert_not_owner(caller.create(1, "k2", "second").await);
    fake.after(3).await;
    assert!(
        fake.renewals().iter().all(|r| r.released.is_empty()),
        "not released while a call runs"
    );

    let before = fake.count();
    drop(running);
    let release = fake.first_release().await;
    assert_eq!(
        release.released,
        [pb::Owned {
            app_id: APP.into(),
            epoch: 1
        }]
    );
    let at = fake
        .renewals()
        .iter()
        .position(|r| !r.released.is_empty())
        .unwrap();
    assert!(at >= before, "only after the call ended");
    assert_not_owner(caller.bodies(1).await);

    // Core moved it: the grant no longer names it, and it is no longer
    // listed.
    fake.set(&[]);
    fake.after(2).await;
    let last = fake.renewals().pop().unwrap();
    assert!(last.released.is_empty(), "{last:?}");
    assert_not_owner(caller.bodies(1).await);
    assert_not_owner(caller.bodies(2).await);
    assert_eq!(ownership.owned(APP), None);
}

#[tokio::test]
async fn a_move_core_calls_off_after_the_release_is_served_again_at_the_same_epoch() {
    let state = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let fake = Fake::new(&[(APP, 1, false)]);
    let (ownership, caller) = replicating_worker(&state, &fake, &shutdown).await;
    caller.create(1, "k1", "first").await.unwrap();

    // Asked to hand the app over; by the time it is released the target
    // can no longer take it, so core answers that very renewal with the
    // app at the same epoch, no longer to hand over.
    fake.on_release(&[(APP, 1, false)]);
    fake.set(&[(APP, 1, true)]);
    let release = fake.first_release().await;
    assert_eq!(
        release.released,
        [pb::Owned {
            app_id: APP.into(),
            epoch: 1
        }]
    );

    // Served again, reads and writes, at epoch 1 only; never released again.
    caller.until_served(1).await;
    assert_eq!(
        ownership.owned(APP),
        Some(crate::ownership::Owned {
            epoch: 1,
            phase: Phase::Serving
        })
    );
    caller.create(1, "k2", "second").await.unwrap();
    assert_eq!(
        caller.bodies(1).await.unwrap(),
        [json!("first"), json!("second")]
    );
    assert_not_owner(caller.bodies(2).await);
    fake.after(2).await;
    let renewals = fake.renewals();
    let at = renewals
        .iter()
        .position(|renewal| !renewal.released.is_empty())
        .unwrap();
    assert!(
        renewals[at + 1..]
            .iter()
            .all(|renewal| renewal.released.is_empty()),
        "released again: {renewals:?}"
    );
}

#[test]
fn the_leases_layout_is_configured_in_one_line_per_mistake() {
    let state = tempfile::tempdir().unwrap();
    DevPki::ensure(&state.path().join("certs")).unwrap();
    let base = env(state.path(), "https://127.0.0.1:3012");
    let with = |changes: &[(&str, Option<&str>)]| {
        let mut env = base.clone();
        for (name, value) in changes {
            match value {
                Some(value) => env.insert((*name).to_owned(), (*value).to_owned()),
                None => env.remove(*name),
            };
        }
        crate::Config::from_env(&env)
    };
    let leases = with(&[]).unwrap().leases.unwrap();
    assert_eq!(leases.worker_id, "worker-a");
    assert_eq!(leases.advertise_url, None);
    assert_eq!(leases.core_urls, ["https://127.0.0.1:3012"]);
    assert_eq!(
        leases
            .advertised("127.0.0.1:4000".parse().unwrap())
            .unwrap(),
        "https://127.0.0.1:4000"
    );
    let unspecified = leases
        .advertised("0.0.0.0:4000".parse().unwrap())
        .unwrap_err();
    assert_eq!(unspecified.var, crate::ADVERTISE_URL);
    let advertised = with(&[(
        "SASHA_DATA_ADVERTISE_URL",
        Some("https://worker-a.internal:3013"),
    )])
    .unwrap()
    .leases
    .unwrap();
    assert_eq!(
        advertised
            .advertised("0.0.0.0:4000".parse().unwrap())
            .unwrap(),
        "https://worker-a.internal:3013"
    );
    assert_eq!(
        with(&[("SASHA_DATA_PLACEMENT", None)]).unwrap().leases,
        None,
        "single by default"
    );

    for (changes, var, says) in [
        (
            vec![("SASHA_DATA_WORKER_ID", None)],
            "SASHA_DATA_WORKER_ID",
            "required with SASHA_DATA_PLACEMENT=leases",
        ),
        (
            vec![("SASHA_DATA_WORKER_ID", Some("worker a"))],
            "SASHA_DATA_WORKER_ID",
            "holds only letters, digits",
        ),
        (
            vec![("SASHA_DATA_ADVERTISE_URL", Some("http://w:3013"))],
            "SASHA_DATA_ADVERTISE_URL",
            "must use https",
        ),
        (
            vec![("SASHA_CORE_GRPC_URL", Some("core:3012"))],
            "SASHA_CORE_GRPC_URL",
            "",
        ),
        (
            vec![("SASHA_DATA_PLACEMENT", Some("many"))],
            "SASHA_DATA_PLACEMENT",
            "neither",
        ),
    ] {
        let error = with(&changes).unwrap_err();
        assert_eq!(error.var, var, "{changes:?}: {error}");
        assert!(error.reason.contains(says), "{changes:?}: {error}");
        assert!(!error.to_string().contains('\n'), "one line: {error}");
    }
}

#[test]
fn renewals_are_a_tenth_of_the_lease_and_never_closer_than_200_ms() {
    assert_eq!(renew_every(None), MIN_RENEW_EVERY);
    assert_eq!(
        renew_every(Some(Duration::from_secs(10))),
        Duration::from_secs(1)
    );
    assert_eq!(
        renew_every(Some(Duration::from_secs(2))),
        Duration::from_millis(200)
    );
    assert_eq!(
        renew_every(Some(Duration::from_millis(500))),
        MIN_RENEW_EVERY
    );
}

#[test]
fn a_grant_keeps_only_assignments_this_worker_can_own() {
    let wire = LeaseGrant {
        lease_ms: 2_500,
        apps: vec![
            pb::Assignment {
                app_id: APP.into(),
                epoch: 3,
                hand_over: true,
            },
            pb::Assignment {
                app_id: "../etc".into(),
                epoch: 1,
                hand_over: false,
            },
            pb::Assignment {
                app_id: "zero".into(),
                epoch: 0,
                hand_over: false,
            },
            pb::Assignment {
                app_id: "huge".into(),
                epoch: MAX_EPOCH + 1,
                hand_over: false,
            },
            pb::Assignment {
                app_id: APP.into(),
                epoch: 4,
                hand_over: false,
            },
        ],
    };
    assert_eq!(
        grant_from_wire(wire),
        Grant {
            lease: Duration::from_millis(2_500),
            apps: vec![Assignment {
                app_id: APP.into(),
                epoch: 3,
                hand_over: true,
            }],
        }
    );
}
