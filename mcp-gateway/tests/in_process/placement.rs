//! The gateway's data calls with several data-workers
//! (`SASHA_DATA_PLACEMENT=leases`): each call goes to the app's owner with
//! its epoch; a refusal for a stale epoch is answered by asking where the app
//! is and trying again, at once and then after growing pauses while the
//! owner has not taken the app up, up to `NOT_OWNER_WAIT`; refusals past it
//! are the caller's, retryable; a worker that cannot be reached is forgotten.
//!
//! studio-core's placement is stood in for by a [`Locate`] the test sets,
//! and each worker by a DataService served on loopback with the data-worker
//! certificate that checks the epoch as a leased worker does (refusing with
//! `AppError::not_owner` before anything runs), knows only the contracts it
//! was handed, and passes what it serves to this world's real data-worker,
//! where the rows and the audit ledger are.
//!
//! What it must never do: let a stand-in worker serve a call at an epoch it
//! does not own.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sasha_proto::AppError;
use sasha_proto::pb::data_service_server::{DataService, DataServiceServer};
use sasha_proto::pb::{self};
use sasha_service::Role;
use sasha_service::data_plane::{DataPlane, Locate, LocateFuture, Route};
use sasha_service::grpc::{self, DataClient};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::mcp::{Mcp, SESSIONLESS, confirmed_create, structured, tool_error};
use crate::world::World;

const APP: &str = "expense-log";
const CREATE: &str = "app__expense_log__categories__create";
const LIST: &str = "app__expense_log__categories__list";

/// studio-core's placement as the test sets it: the route of each app, and
/// how often it was asked.
#[derive(Default)]
struct Placement {
    routes: Mutex<HashMap<String, Route>>,
    asked: AtomicUsize,
}

impl Placement {
    fn place(&self, app_id: &str, route: Route) {
        self.routes.lock().unwrap().insert(app_id.to_owned(), route);
    }

    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

impl Locate for Placement {
    fn locate<'a>(&'a self, app_id: &'a str) -> LocateFuture<'a> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let route = self.routes.lock().unwrap().get(app_id).cloned();
        Box::pin(async move {
            route.ok_or_else(|| AppError::from_code(sasha_proto::ErrorCode::NotReady))
        })
    }
}

/// What a stand-in worker did with one `Execute`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    epoch: u64,
    /// Whether the call carried the data contract.
    contract: bool,
    answer: Answer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// Refused: not the owner at that epoch.
    NotOwner,
    /// Refused: the contract was never handed to this worker.
    ContractRequired,
    /// Passed to the real data-worker.
    Served,
}

/// One stand-in data-worker.
struct Worker {
    id: &'static str,
    url: String,
    /// The real data-worker, called as mcp-gateway.
    upstream: DataClient,
    /// The apps it owns and at which epoch.
    owned: Mutex<HashMap<String, u64>>,
    /// The contract hashes it was handed: a new owner knows none.
    contracts: Mutex<HashSet<String>>,
    seen: Mutex<Vec<Seen>>,
    /// An app it takes up at an epoch once it has refused it this many more
    /// times: its next renewal, counted in calls instead of time.
    takes_up: Mutex<Option<(String, u64, usize)>>,
}

impl Worker {
    fn own(&self, app_id: &str, epoch: u64) {
        self.owned.lock().unwrap().insert(app_id.to_owned(), epoch);
    }

    fn take_up_after(&self, app_id: &str, epoch: u64, refusals: usize) {
        *self.takes_up.lock().unwrap() = Some((app_id.to_owned(), epoch, refusals));
    }

    fn lose(&self, app_id: &str) {
        self.owned.lock().unwrap().remove(app_id);
    }

    fn route(&self, epoch: u64) -> Route {
        Route {
            worker_id: self.id.to_owned(),
            url: self.url.clone(),
            epoch,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn note(&self, epoch: u64, contract: bool, answer: Answer) {
        self.seen.lock().unwrap().push(Seen {
            epoch,
            contract,
            answer,
        });
    }
}

/// Serves `worker` as a DataService.
struct Serve(Arc<Worker>);

#[tonic::async_trait]
impl DataService for Serve {
    async fn health(
        &self,
        _: Request<pb::HealthRequest>,
    ) -> Result<Response<pb::HealthReply>, Status> {
        Ok(Response::new(grpc::health_reply(
            Role::DataWorker,
            Vec::new(),
        )))
    }

    async fn execute(
        &self,
        request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<pb::ExecuteReply>, Status> {
        let worker = &self.0;
        let mut request = request.into_inner();
        let carried = request.contract.is_some();
        let owns = worker.owned.lock().unwrap().get(&request.app_id) == Some(&request.epoch);
        if !owns {
            worker.note(request.epoch, carried, Answer::NotOwner);
            let mut takes_up = worker.takes_up.lock().unwrap();
            if let Some((app_id, epoch, left)) = takes_up.as_mut()
                && *app_id == request.app_id
            {
                *left -= 1;
                if *left == 0 {
                    worker.own(app_id, *epoch);
                    *takes_up = None;
                }
            }
            return Err(AppError::not_owner(&request.app_id).to_status());
        }
        let knows = worker
            .contracts
            .lock()
            .unwrap()
            .contains(&request.contract_hash);
        if !knows && !carried {
            worker.note(request.epoch, carried, Answer::ContractRequired);
            return Err(AppError::new(
                sasha_proto::ErrorCode::NotReady,
                "the data service does not know this data contract yet",
            )
            .with_details(json!({"contractRequired": true}))
            .to_status());
        }
        worker
            .contracts
            .lock()
            .unwrap()
            .insert(request.contract_hash.clone());
        worker.note(request.epoch, carried, Answer::Served);
        // The real worker holds one copy of the data: the single layout.
        request.epoch = 0;
        worker.upstream.clone().execute(request).await
    }

    async fn describe_schema(
        &self,
        _: Request<pb::DescribeSchemaRequest>,
    ) -> Result<Response<pb::SchemaDescription>, Status> {
        Err(Status::unimplemented("not a gateway call"))
    }

    async fn migration_drift(
        &self,
        _: Request<pb::MigrationDriftRequest>,
    ) -> Result<Response<pb::MigrationDriftReply>, Status> {
        Err(Status::unimplemented("not a gateway call"))
    }

    async fn tables_with_rows(
        &self,
        _: Request<pb::TablesWithRowsRequest>,
    ) -> Result<Response<pb::TablesWithRowsReply>, Status> {
        Err(Status::unimplemented("not a gateway call"))
    }

    async fn remove_app_data(
        &self,
        _: Request<pb::RemoveAppDataRequest>,
    ) -> Result<Response<pb::RemoveAppDataReply>, Status> {
        Err(Status::unimplemented("not a gateway call"))
    }

    async fn apply_contract(
        &self,
        _: Request<pb::ApplyContractRequest>,
    ) -> Result<Response<pb::ApplyContractReply>, Status> {
        Err(Status::unimplemented("not a gateway call"))
    }

    async fn remove_preview(
        &self,
        _: Request<pb::RemovePreviewRequest>,
    ) -> Result<Response<pb::RemovePreviewReply>, Status> {
        Err(Status::unimplemented("not a gateway call"))
    }
}

/// Two stand-in workers, a placement, and a gateway routing by them.
struct Fleet {
    one: Arc<Worker>,
    two: Arc<Worker>,
    placement: Arc<Placement>,
    gateway: mcp_gateway::Service,
    _stop: tokio_util::sync::DropGuard,
}

impl Fleet {
    async fn serve(world: &World) -> Fleet {
        let stop = CancellationToken::new();
        let one = worker(world, "data-worker-1", &stop).await;
        let two = worker(world, "data-worker-2", &stop).await;
        let placement = Arc::new(Placement::default());
        let gateway = world.gateway_over(DataPlane::leased(
            placement.clone(),
            world.identity(Role::McpGateway),
        ));
        Fleet {
            one,
            two,
            placement,
            gateway,
            _stop: stop.drop_guard(),
        }
    }

    /// The staff user's MCP client of this gateway, accepting every
    /// confirmation.
    fn client(&self, world: &World) -> Mcp {
        Mcp::new(
            self.gateway.router.clone(),
            vec![(
                "authorization".to_owned(),
                format!("Bearer {}", world.staff_token),
            )],
            SESSIONLESS,
        )
        .eliciting(|_| json!({}))
    }
}

async fn worker(world: &World, id: &'static str, stop: &CancellationToken) -> Arc<Worker> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let worker = Arc::new(Worker {
        id,
        url,
        upstream: grpc::data_client(world.data_url(), &world.identity(Role::McpGateway)).unwrap(),
        owned: Mutex::default(),
        contracts: Mutex::default(),
        seen: Mutex::default(),
        takes_up: Mutex::default(),
    });
    let router = grpc::server_builder().add_service(DataServiceServer::new(Serve(worker.clone())));
    let identity = world.identity(Role::DataWorker);
    let stop = stop.clone();
    tokio::spawn(async move {
        grpc::serve_mtls(router, listener, &identity, Role::DataWorker, stop)
            .await
            .unwrap();
    });
    worker
}

fn seen(epoch: u64, contract: bool, answer: Answer) -> Seen {
    Seen {
        epoch,
        contract,
        answer,
    }
}

fn rows(listed: &crate::mcp::Exchange) -> Vec<Value> {
    structured(listed)["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["name"].clone())
        .collect()
}

#[tokio::test]
async fn a_call_on_a_stale_route_is_refused_then_sent_to_the_new_owner() {
    let world = World::start().await;
    let fleet = Fleet::serve(&world).await;
    let (one, two) = (&fleet.one, &fleet.two);
    one.own(APP, 1);
    fleet.placement.place(APP, one.route(1));
    let mut model = fleet.client(&world);

    let travel = confirmed_create(&mut model, CREATE, json!({"values": {"name": "Travel"}})).await;
    assert_eq!(travel["name"], "Travel");
    assert_eq!(one.seen(), [seen(1, true, Answer::Served)]);
    assert_eq!(fleet.placement.asked(), 1);

    // The app moves to worker 2 at epoch 2; the gateway still knows worker 1.
    one.lose(APP);
    two.own(APP, 2);
    fleet.placement.place(APP, two.route(2));
    let food = confirmed_create(&mut model, CREATE, json!({"values": {"name": "Food"}})).await;
    assert_eq!(food["name"], "Food");
    assert_eq!(
        one.seen()[1..],
        [seen(1, false, Answer::NotOwner)],
        "the stale epoch is refused before anything runs, once"
    );
    // The new owner was handed nothing yet: it asks for the contract, and
    // the call is repeated with it.
    assert_eq!(
        two.seen(),
        [
            seen(2, false, Answer::ContractRequired),
            seen(2, true, Answer::Served)
        ]
    );

    // The new route and what its owner was handed are kept.
    let asked = fleet.placement.asked();
    let listed = model.call(LIST, json!({})).await;
    assert_eq!(rows(&listed), [json!("Travel"), json!("Food")]);
    assert_eq!(two.seen().last(), Some(&seen(2, false, Answer::Served)));
    assert_eq!(fleet.placement.asked(), asked);
    assert_eq!(one.seen().len(), 2, "the old owner is not asked again");

    // Each write landed once.
    let creates = world
        .audit_sources(APP)
        .into_iter()
        .filter(|(operation, _)| operation == "create")
        .count();
    assert_eq!(creates, 2);
}

#[tokio::test]
async fn not_owner_answers_past_the_wait_are_the_callers_retryable_error() {
    let world = World::start().await;
    let fleet = Fleet::serve(&world).await;
    let one = &fleet.one;
    // Placed on worker 1, which never takes it up while the call waits.
    fleet.placement.place(APP, one.route(1));
    let mut model = fleet.client(&world);

    let refused = model.call(LIST, json!({})).await;
    let error = tool_error(&refused);
    assert_eq!(error["code"], "APP_NOT_READY");
    assert_eq!(error["retryable"], true);
    assert_eq!(error["details"]["reason"], "not-owner", "{error}");
    let seen_then = one.seen();
    assert!(
        seen_then.len() >= 3
            && seen_then
                .iter()
                .all(|call| *call == seen(1, true, Answer::NotOwner)),
        "asked again while the wait lasts, each time refused: {seen_then:?}"
    );
    assert_eq!(fleet.placement.asked(), seen_then.len());

    // Serving now: the client's retry asks where the app is, and succeeds.
    one.own(APP, 1);
    let listed = model.call(LIST, json!({})).await;
    assert_eq!(rows(&listed), Vec::<Value>::new());
    assert_eq!(fleet.placement.asked(), seen_then.len() + 1);
}

#[tokio::test]
async fn the_first_call_to_a_newly_placed_app_waits_for_its_owner_to_take_it_up() {
    let world = World::start().await;
    let fleet = Fleet::serve(&world).await;
    let one = &fleet.one;
    fleet.placement.place(APP, one.route(1));
    let mut model = fleet.client(&world);
    // The worker learns of the app at its next renewal: after refusing the
    // call and its immediate retry, as a renewal a moment later would.
    one.take_up_after(APP, 1, 2);
    let listed = model.call(LIST, json!({})).await;
    assert_eq!(rows(&listed), Vec::<Value>::new(), "{:?}", listed.body);
    let answers: Vec<Answer> = one.seen().iter().map(|call| call.answer).collect();
    assert_eq!(
        answers,
        [Answer::NotOwner, Answer::NotOwner, Answer::Served],
        "asked again after the pause, past the one immediate retry"
    );
}

#[tokio::test]
async fn an_unreachable_workers_route_is_forgotten() {
    let world = World::start().await;
    let fleet = Fleet::serve(&world).await;
    let two = &fleet.two;
    let gone = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("https://{}", listener.local_addr().unwrap())
    };
    fleet.placement.place(
        APP,
        Route {
            worker_id: "data-worker-3".to_owned(),
            url: gone,
            epoch: 4,
        },
    );
    let mut model = fleet.client(&world);

    let lost = model.call(LIST, json!({})).await;
    let error = tool_error(&lost);
    assert_eq!(error["code"], "APP_NOT_READY");
    assert_eq!(error["retryable"], true);
    assert_eq!(fleet.placement.asked(), 1);

    // Its apps were taken over: the next call asks again.
    two.own(APP, 5);
    fleet.placement.place(APP, two.route(5));
    let listed = model.call(LIST, json!({})).await;
    assert_eq!(rows(&listed), Vec::<Value>::new());
    assert_eq!(fleet.placement.asked(), 2);
    assert_eq!(two.seen(), [seen(5, true, Answer::Served)]);

    // With leases no one worker speaks for the data plane: the gateway's
    // health is studio-core's.
    let request = http::Request::get("/healthz")
        .header("host", "127.0.0.1")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = tower::ServiceExt::oneshot(fleet.gateway.router.clone(), request)
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    let health: Value = serde_json::from_slice(&body).unwrap();
    let roles: Vec<&Value> = health["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|dependency| &dependency["role"])
        .collect();
    assert_eq!(roles, [&json!("studio-core")], "{health}");
}
