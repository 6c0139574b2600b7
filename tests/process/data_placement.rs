//! Two data-workers with leases (`SASHA_DATA_PLACEMENT=leases`), each a
//! real process replicating in sync mode through its own Litestream sidecar
//! to SeaweedFS (`tests/common/replica.rs`), renewing with a placement the
//! test serves in its own process as studio-core (studio-core's placement
//! is its own tests' business; this module is what the workers do with the
//! grants):
//!
//! - worker A serves the app at epoch 1; a planned move hands it over (the
//!   release arrives in a renewal after the final sync), and worker B, with
//!   no file of its own, restores A's replica and serves A's acknowledged
//!   rows at epoch 2, writing a generation of its own;
//! - B is lost with its node (SIGKILL, its sidecar too); A, granted the app
//!   at epoch 3, restores B's newer history in place of its own file (set
//!   aside) and serves every acknowledged row;
//! - at every step the old epoch is refused, by both workers, and object
//!   storage holds one generation per epoch;
//! - a list cursor A issued at epoch 1 is accepted by B at epoch 2 and by A
//!   again at epoch 3 (the key is the app's, in its data, not a worker's);
//! - the app's data removed by its owner at epoch 3 takes its replica up to
//!   that epoch only;
//! - split brain: a worker stalled (SIGSTOP) past its lease while the app
//!   moves is refused every read and write from the moment it resumes, and
//!   the new owner holds every acknowledged row.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Harness;
use common::replica::{self, ObjectStorage, Sidecar};
use sasha_contract::caller::{AppAccess, CallSource};
use sasha_package::sql::DataContract;
use sasha_proto::AppError;
use sasha_proto::convert::ToWire;
use sasha_proto::pb::placement_service_server::{PlacementService, PlacementServiceServer};
use sasha_proto::pb::{self, LeaseGrant, RenewRequest};
use sasha_service::identity::Identity;
use sasha_service::{Role, grpc};
use serde_json::{Value, json};
use tonic::{Request, Response, Status};

const APP: &str = "expense-log";
const PREFIX: &str = "placement";
/// The lease the placement grants: renewals every second.
const LEASE_MS: u64 = 10_000;
/// How long one awaited step (a renewal, a restore) may take.
const PATIENCE: Duration = Duration::from_secs(60);

/// The placement as the test decides it: each worker's grant, and every
/// renewal received.
struct Placement {
    lease_ms: u64,
    grants: Mutex<HashMap<String, Vec<pb::Assignment>>>,
    renewals: Mutex<Vec<RenewRequest>>,
}

impl Placement {
    fn new(lease_ms: u64) -> Arc<Placement> {
        Arc::new(Placement {
            lease_ms,
            grants: Mutex::new(HashMap::new()),
            renewals: Mutex::new(Vec::new()),
        })
    }

    fn grant(&self, worker: &str, apps: &[(u64, bool)]) {
        let apps = apps
            .iter()
            .map(|(epoch, hand_over)| pb::Assignment {
                app_id: APP.into(),
                epoch: *epoch,
                hand_over: *hand_over,
            })
            .collect();
        self.grants.lock().unwrap().insert(worker.to_owned(), apps);
    }

    fn released_by(&self, worker: &str) -> Vec<pb::Owned> {
        self.renewals
            .lock()
            .unwrap()
            .iter()
            .filter(|renewal| renewal.worker_id == worker)
            .flat_map(|renewal| renewal.released.clone())
            .collect()
    }
}

#[derive(Clone)]
struct Served(Arc<Placement>);

#[tonic::async_trait]
impl PlacementService for Served {
    async fn renew(&self, request: Request<RenewRequest>) -> Result<Response<LeaseGrant>, Status> {
        let request = request.into_inner();
        let apps = self
            .0
            .grants
            .lock()
            .unwrap()
            .get(&request.worker_id)
            .cloned()
            .unwrap_or_default();
        self.0.renewals.lock().unwrap().push(request);
        Ok(Response::new(LeaseGrant {
            lease_ms: self.0.lease_ms,
            apps,
        }))
    }

    async fn locate(&self, _: Request<pb::LocateRequest>) -> Result<Response<pb::Route>, Status> {
        Err(Status::unimplemented("data-workers never locate"))
    }
}

fn contract() -> DataContract {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packages/valid/expense-log");
    sasha_package::validate::validate_dir(&dir)
        .package
        .unwrap()
        .data
        .unwrap()
}

/// The gateway's view of one worker.
struct Client {
    data: grpc::DataClient,
    contract: DataContract,
}

impl Client {
    fn new(harness: &Harness, addr: std::net::SocketAddr) -> Client {
        let identity = Identity::load(&harness.tls(Role::McpGateway)).unwrap();
        Client {
            data: grpc::data_client(&format!("https://{addr}"), &identity).unwrap(),
            contract: contract(),
        }
    }

    async fn call(&self, epoch: u64, operation: &str, request: Value) -> Result<Value, AppError> {
        let reply = self
            .data
            .clone()
            .execute(pb::ExecuteRequest {
                epoch,
                app_id: APP.into(),
                contract_hash: self.contract.hash.clone(),
                actor: Some(pb::Actor {
                    user_id: "alice".into(),
                    access: AppAccess::Use.to_wire(),
                }),
                operation: operation.into(),
                table: "categories".into(),
                request_json: request.to_string(),
                contract: Some(pb::DataContract::from(&self.contract)),
                source: CallSource::Ui.to_wire(),
                provenance: Some(sasha_proto::convert::provenance_to_wire(
                    sasha_contract::caller::Initiator::AppView,
                    None,
                )),
                app_revision: "r1".into(),
                action_id: String::new(),
                preview: String::new(),
                preview_scope: None,
            })
            .await
            .map_err(|status| AppError::from_status(&status))?;
        Ok(serde_json::from_str(&reply.into_inner().result_json).unwrap())
    }

    async fn names(&self, epoch: u64) -> Result<Vec<String>, AppError> {
        let listed = self.call(epoch, "list", json!({"limit": 100})).await?;
        let mut names: Vec<String> = listed["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// One page of one name (in id order) after `cursor`, and the next
    /// cursor.
    async fn page(
        &self,
        epoch: u64,
        cursor: Option<&str>,
    ) -> Result<(Vec<String>, Option<String>), AppError> {
        let mut request = json!({"limit": 1});
        if let Some(cursor) = cursor {
            request["cursor"] = cursor.into();
        }
        let listed = self.call(epoch, "list", request).await?;
        let names = listed["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["name"].as_str().unwrap().to_owned())
            .collect();
        Ok((names, listed["nextCursor"].as_str().map(str::to_owned)))
    }

    async fn create(&self, epoch: u64, name: &str) -> Result<Value, AppError> {
        self.call(
            epoch,
            "create",
            json!({"values": {"name": name}, "idempotencyKey": name}),
        )
        .await
    }

    /// Waits until the worker serves the app at `epoch`.
    async fn until_served(&self, epoch: u64) {
        common::eventually(
            PATIENCE,
            &format!("the app served at epoch {epoch}"),
            || async {
                match self.names(epoch).await {
                    Ok(_) => true,
                    Err(error) if error.is_not_owner() => false,
                    Err(error) => panic!("not a refusal of a call too early: {error:?}"),
                }
            },
        )
        .await;
    }

    async fn assert_refused(&self, epoch: u64) {
        let error = self.names(epoch).await.unwrap_err();
        assert!(error.is_not_owner(), "epoch {epoch}: {error:?}");
        let error = self.create(epoch, "refused").await.unwrap_err();
        assert!(error.is_not_owner(), "epoch {epoch}: {error:?}");
    }
}

/// The generations of the app in object storage, by epoch.
async fn epochs(storage: &ObjectStorage) -> Vec<u64> {
    let mut epochs: Vec<u64> = storage
        .children(PREFIX, &format!("apps/{APP}/"))
        .await
        .iter()
        .map(|name| {
            sasha_replica::Generation::parse(name)
                .unwrap_or_else(|| panic!("{name} is a generation"))
                .epoch()
        })
        .collect();
    epochs.sort();
    epochs
}

fn data_root(harness: &Harness, worker: &str) -> PathBuf {
    harness.path().join(worker).join("apps")
}

/// Object storage, the placement served as studio-core, and two leased
/// data-workers replicating in sync mode, each with its own Litestream
/// sidecar and data root.
struct World {
    storage: ObjectStorage,
    harness: Harness,
    placement: Arc<Placement>,
    worker_a: common::RoleProcess,
    worker_b: common::RoleProcess,
    sidecar_b: Sidecar,
    a: Client,
    b: Client,
    _sidecar_a: Sidecar,
    _stop: tokio_util::sync::DropGuard,
}

impl World {
    /// Everything started, worker A granted the app at epoch 1.
    async fn start(lease_ms: u64) -> World {
        let storage = ObjectStorage::start().await;
        let harness = Harness::new();
        let placement = Placement::new(lease_ms);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let core_url = format!("https://{}", listener.local_addr().unwrap());
        let core_identity = Identity::load(&harness.tls(Role::StudioCore)).unwrap();
        let router = grpc::server_builder()
            .add_service(PlacementServiceServer::new(Served(Arc::clone(&placement))));
        let stop = tokio_util::sync::CancellationToken::new();
        let serving = stop.clone();
        tokio::spawn(async move {
            let _ =
                grpc::serve_mtls(router, listener, &core_identity, Role::StudioCore, serving).await;
        });

        let sockets = harness.path().join("sockets");
        std::fs::create_dir_all(&sockets).unwrap();
        let worker_env = |worker: &str| {
            let mut env = replica::role_env(
                &storage,
                PREFIX,
                &sockets.join(format!("{worker}.sock")),
                "sync",
            );
            env.extend([
                ("SASHA_DATA_PLACEMENT", "leases".to_owned()),
                ("SASHA_DATA_WORKER_ID", worker.to_owned()),
                ("SASHA_CORE_GRPC_URL", core_url.clone()),
                (
                    "APP_DATA_ROOT",
                    data_root(&harness, worker).display().to_string(),
                ),
            ]);
            env
        };
        let sidecar_a = Sidecar::start(&sockets.join("worker-a.sock")).await;
        let sidecar_b = Sidecar::start(&sockets.join("worker-b.sock")).await;
        placement.grant("worker-a", &[(1, false)]);
        let worker_a = harness
            .start(Role::DataWorker, &worker_env("worker-a"))
            .await;
        let worker_b = harness
            .start(Role::DataWorker, &worker_env("worker-b"))
            .await;
        let a = Client::new(&harness, worker_a.listener("grpc"));
        let b = Client::new(&harness, worker_b.listener("grpc"));
        a.until_served(1).await;
        World {
            storage,
            harness,
            placement,
            worker_a,
            worker_b,
            sidecar_b,
            a,
            b,
            _sidecar_a: sidecar_a,
            _stop: stop.drop_guard(),
        }
    }
}

#[tokio::test]
async fn an_app_moves_between_leased_workers_through_its_replica_and_keeps_every_acknowledged_row()
{
    let World {
        storage,
        harness,
        placement,
        worker_a,
        worker_b,
        sidecar_b,
        a,
        b,
        _sidecar_a,
        _stop,
    } = World::start(LEASE_MS).await;
    let mut acknowledged = Vec::new();
    for name in ["Travel", "Food", "Rent"] {
        a.create(1, name).await.unwrap();
        acknowledged.push(name.to_owned());
    }
    b.assert_refused(1).await;
    assert_eq!(epochs(&storage).await, [1]);
    let (first, cursor) = a.page(1, None).await.unwrap();
    assert_eq!(first, ["Travel"]);
    let cursor = cursor.unwrap();

    // A planned move: A hands over (final sync), then B owns it at epoch 2.
    placement.grant("worker-a", &[(1, true)]);
    common::eventually(PATIENCE, "worker A releasing the app", || async {
        !placement.released_by("worker-a").is_empty()
    })
    .await;
    assert_eq!(
        placement.released_by("worker-a")[0],
        pb::Owned {
            app_id: APP.into(),
            epoch: 1
        }
    );
    a.assert_refused(1).await;
    placement.grant("worker-a", &[]);
    placement.grant("worker-b", &[(2, false)]);
    b.until_served(2).await;
    acknowledged.sort();
    assert_eq!(
        b.names(2).await.unwrap(),
        acknowledged,
        "A's rows, from A's replica"
    );
    let (second, next) = b.page(2, Some(&cursor)).await.unwrap();
    assert_eq!(second, ["Food"], "A's cursor, read by B");
    b.create(2, "Books").await.unwrap();
    acknowledged.push("Books".to_owned());
    acknowledged.sort();
    for epoch in [1, 3] {
        b.assert_refused(epoch).await;
    }
    a.assert_refused(2).await;
    assert_eq!(epochs(&storage).await, [1, 2], "one generation per owner");

    // B's node is lost; A is granted the app at epoch 3 and restores B's
    // newer history in place of its own file.
    worker_b.signal(nix::sys::signal::Signal::SIGKILL);
    sidecar_b.kill();
    placement.grant("worker-b", &[]);
    placement.grant("worker-a", &[(3, false)]);
    a.until_served(3).await;
    assert_eq!(
        a.names(3).await.unwrap(),
        acknowledged,
        "every acknowledged row"
    );
    let (third, _) = a.page(3, next.as_deref()).await.unwrap();
    assert_eq!(third, ["Rent"], "B's cursor, read by A");
    assert_eq!(a.page(3, Some(&cursor)).await.unwrap().0, ["Food"]);
    a.assert_refused(1).await;
    a.assert_refused(2).await;
    let superseded = data_root(&harness, "worker-a")
        .join(data_worker::placement::SUPERSEDED_DIR)
        .join(format!("{APP}.sqlite"));
    assert!(
        superseded.is_file(),
        "A's own file is set aside, not served"
    );
    a.create(3, "Tools").await.unwrap();
    assert_eq!(epochs(&storage).await, [1, 2, 3]);

    // The app's data is deleted by its owner at epoch 3: its replica goes up
    // to that epoch, never a later owner's (one is planted, as a stale
    // owner's removal would find it).
    let later = "e000000000004-1765000000000-00000000";
    storage
        .store(PREFIX)
        .put_file(&format!("apps/{APP}/{later}/ltx/0/planted"), b"x".to_vec())
        .await
        .unwrap();
    let core = Identity::load(&harness.tls(Role::StudioCore)).unwrap();
    let mut lifecycle =
        grpc::data_client(&format!("https://{}", worker_a.listener("grpc")), &core).unwrap();
    let refused = lifecycle
        .remove_app_data(pb::RemoveAppDataRequest {
            app_id: APP.into(),
            epoch: 2,
        })
        .await
        .unwrap_err();
    assert!(AppError::from_status(&refused).is_not_owner());
    let removed = lifecycle
        .remove_app_data(pb::RemoveAppDataRequest {
            app_id: APP.into(),
            epoch: 3,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(removed.removed);
    assert_eq!(epochs(&storage).await, [4]);
    assert!(
        !data_root(&harness, "worker-a")
            .join(format!("{APP}.sqlite"))
            .exists()
    );
}

/// Split brain: worker A stalls (SIGSTOP) past its lease while it owns the
/// app; the app moves to B, which serves A's acknowledged rows and takes
/// writes; A resumes and is refused every read and write at its old epoch,
/// from its first instant back (its lease lapsed while it was stopped), and
/// nothing it held is lost.
#[tokio::test]
async fn a_worker_stalled_past_its_lease_serves_nothing_when_it_resumes() {
    // A short lease (renewals every 400 ms), so the stall past it is short;
    // long enough that a loaded machine does not lapse it by accident.
    const SHORT_LEASE_MS: u64 = 4_000;
    let world = World::start(SHORT_LEASE_MS).await;
    let (a, b, placement) = (&world.a, &world.b, &world.placement);
    for name in ["Travel", "Food"] {
        a.create(1, name).await.unwrap();
    }
    world.worker_a.pause().await;
    // Its last renewal left before the stall; its deadline, 9/10 of the
    // lease after that, passes while it is stopped. A real wait: the lease
    // is counted by another process's monotonic clock, which no test moves.
    tokio::time::sleep(Duration::from_millis(SHORT_LEASE_MS)).await;
    placement.grant("worker-a", &[]);
    placement.grant("worker-b", &[(2, false)]);
    b.until_served(2).await;
    b.create(2, "Rent").await.unwrap();

    world.worker_a.signal(nix::sys::signal::Signal::SIGCONT);
    a.assert_refused(1).await;
    a.assert_refused(2).await;
    assert_eq!(
        b.names(2).await.unwrap(),
        ["Food", "Rent", "Travel"],
        "every acknowledged row, each once"
    );
    assert_eq!(epochs(&world.storage).await, [1, 2]);
}
