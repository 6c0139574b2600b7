//! Who may call which RPC of studio-core's gRPC listener, through the real
//! router ([`crate::grpc::router`]) over the real mTLS, with each role's
//! certificate from the world's development PKI: `CoreService` answers
//! mcp-gateway alone, `PlacementService.Renew` a data-worker alone,
//! `PlacementService.Locate` mcp-gateway alone; studio-core's and the
//! edge's certificates are refused in the handshake. With one data-worker
//! (`single`), the placement calls answer `FAILED_PRECONDITION`.

use std::time::Duration;

use sasha_proto::pb::placement_service_client::PlacementServiceClient;
use sasha_proto::pb::{self, HealthRequest};
use sasha_proto::{AppError, ErrorCode};
use sasha_service::Role;
use sasha_service::grpc::{TracedChannel, channel, core_client};

use crate::test_world::{Database, World, off_runtime};

const LEASE: Duration = Duration::from_secs(10);

fn placement_client(world: &World, url: &str, role: Role) -> PlacementServiceClient<TracedChannel> {
    PlacementServiceClient::new(channel(url, &world.identity(role), Role::StudioCore).unwrap())
}

fn renew_request(worker_id: &str, url: &str) -> pb::RenewRequest {
    pb::RenewRequest {
        worker_id: worker_id.to_owned(),
        url: url.to_owned(),
        replicated: true,
        released: Vec::new(),
    }
}

fn locate_request(app_id: &str) -> pb::LocateRequest {
    pb::LocateRequest {
        app_id: app_id.to_owned(),
    }
}

/// Every `CoreService` call a role makes here: `Health`, `Authenticate`
/// (with the admin's real session, which a data-worker must not be able
/// to check) and `GetCatalogue`; each answer's error code, `None` for a
/// success.
async fn core_calls(world: &World, url: &str, role: Role) -> Vec<Option<ErrorCode>> {
    let session = world.session(&world.admin);
    let secret = session.trim_start_matches("sasha_session=").to_owned();
    let mut client = core_client(url, &world.identity(role)).unwrap();
    let code =
        |result: Result<(), tonic::Status>| result.err().map(|s| AppError::from_status(&s).code);
    vec![
        code(client.health(HealthRequest { deep: false }).await.map(drop)),
        code(
            client
                .authenticate(pb::AuthenticateRequest {
                    kind: "session".into(),
                    credential: secret,
                    resource: String::new(),
                })
                .await
                .map(drop),
        ),
        code(
            client
                .get_catalogue(pb::CatalogueRequest {
                    principal: Some(World::principal(&world.admin, &crate::test_world::WRITER)),
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
    ]
}

/// The refusal matrix, in the `leases` layout.
#[tokio::test]
async fn each_rpc_answers_only_its_roles_certificate() {
    let world = World::with_leases(Database::Sqlite, LEASE);
    let url = world.serve_grpc().await;

    // CoreService: mcp-gateway is served; a data-worker is refused every
    // call before it runs; other roles never finish the handshake.
    assert_eq!(
        core_calls(&world, &url, Role::McpGateway).await,
        [None, None, None]
    );
    assert_eq!(
        core_calls(&world, &url, Role::DataWorker).await,
        [Some(ErrorCode::AccessDenied); 3]
    );
    for role in [Role::StudioCore, Role::EdgeSandbox] {
        assert_eq!(
            core_calls(&world, &url, role).await,
            [Some(ErrorCode::NotReady); 3],
            "{role}"
        );
    }

    // Renew: a data-worker only.
    let renewed = placement_client(&world, &url, Role::DataWorker)
        .renew(renew_request("w1", "https://127.0.0.1:4013"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(renewed.lease_ms, 10_000);
    assert!(renewed.apps.is_empty());
    let refused = placement_client(&world, &url, Role::McpGateway)
        .renew(renew_request("mallory", "https://127.0.0.1:4666"))
        .await
        .unwrap_err();
    let refused = AppError::from_status(&refused);
    assert_eq!(refused.code, ErrorCode::AccessDenied, "{refused:?}");
    assert_eq!(refused.message, "only a data-worker renews a lease");
    let workers = off_runtime(|| world.store().workers().unwrap());
    assert_eq!(
        workers.len(),
        1,
        "the refused renewal wrote nothing: {workers:?}"
    );

    // Locate: mcp-gateway only; it places the app on the worker.
    let route = placement_client(&world, &url, Role::McpGateway)
        .locate(locate_request("notes"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        route,
        pb::Route {
            app_id: "notes".into(),
            worker_id: "w1".into(),
            url: "https://127.0.0.1:4013".into(),
            epoch: 1,
        }
    );
    let refused = placement_client(&world, &url, Role::DataWorker)
        .locate(locate_request("notes"))
        .await
        .unwrap_err();
    assert_eq!(
        AppError::from_status(&refused).code,
        ErrorCode::AccessDenied
    );
    for role in [Role::StudioCore, Role::EdgeSandbox] {
        let mut client = placement_client(&world, &url, role);
        let renew = client
            .renew(renew_request("w9", "https://127.0.0.1:4019"))
            .await;
        let locate = client.locate(locate_request("notes")).await;
        for refused in [renew.unwrap_err(), locate.unwrap_err()] {
            assert_eq!(
                AppError::from_status(&refused).code,
                ErrorCode::NotReady,
                "{role}"
            );
        }
    }

    // The renewing worker now learns it owns the app.
    let renewed = placement_client(&world, &url, Role::DataWorker)
        .renew(renew_request("w1", "https://127.0.0.1:4013"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        renewed.apps,
        [pb::Assignment {
            app_id: "notes".into(),
            epoch: 1,
            hand_over: false,
        }]
    );
}

/// Bad input to the placement calls is refused naming the field; a Locate
/// with no live worker says no worker holds a lease.
#[tokio::test]
async fn placement_calls_refuse_bad_input_and_say_when_no_worker_holds_a_lease() {
    let world = World::with_leases(Database::Sqlite, LEASE);
    let url = world.serve_grpc().await;
    let located = placement_client(&world, &url, Role::McpGateway)
        .locate(locate_request("notes"))
        .await
        .unwrap_err();
    let located = AppError::from_status(&located);
    assert_eq!(located.code, ErrorCode::NotReady);
    assert!(located.retryable);
    assert_eq!(located.message, "no data-worker holds a lease");

    let mut worker = placement_client(&world, &url, Role::DataWorker);
    for (request, field, needle) in [
        (
            renew_request("a b", "https://127.0.0.1:4013"),
            "workerId",
            "letters, digits",
        ),
        (
            renew_request("", "https://127.0.0.1:4013"),
            "workerId",
            "1 to 63",
        ),
        (renew_request("w1", "http://127.0.0.1:4013"), "url", "https"),
        (
            renew_request("w1", "https://user:pw@127.0.0.1:4013"),
            "url",
            "credentials",
        ),
    ] {
        let refused = AppError::from_status(&worker.renew(request.clone()).await.unwrap_err());
        assert_eq!(refused.code, ErrorCode::InputInvalid, "{request:?}");
        assert!(refused.message.contains(needle), "{request:?}: {refused:?}");
        assert_eq!(
            refused.details,
            Some(serde_json::json!({ "field": field })),
            "{request:?}"
        );
    }
    let refused = placement_client(&world, &url, Role::McpGateway)
        .locate(locate_request("Not An Id"))
        .await
        .unwrap_err();
    let refused = AppError::from_status(&refused);
    assert_eq!(refused.code, ErrorCode::InputInvalid);
    assert_eq!(
        refused.details,
        Some(serde_json::json!({ "field": "appId" }))
    );
    assert!(off_runtime(|| world.store().workers().unwrap()).is_empty());
}

/// With one data-worker, the placement calls answer FAILED_PRECONDITION
/// saying how studio-core is configured, to their own roles; the roles'
/// refusals still come first.
#[tokio::test]
async fn placement_calls_answer_failed_precondition_with_one_data_worker() {
    let world = World::new();
    let url = world.serve_grpc().await;
    let renew = placement_client(&world, &url, Role::DataWorker)
        .renew(renew_request("w1", "https://127.0.0.1:4013"))
        .await
        .unwrap_err();
    let locate = placement_client(&world, &url, Role::McpGateway)
        .locate(locate_request("notes"))
        .await
        .unwrap_err();
    for status in [renew, locate] {
        assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
        assert!(
            status.message().contains("SASHA_DATA_PLACEMENT=single"),
            "{status:?}"
        );
        assert_eq!(
            AppError::from_status(&status).code,
            ErrorCode::OperationUnavailable
        );
    }
    let refused = placement_client(&world, &url, Role::McpGateway)
        .renew(renew_request("w1", "https://127.0.0.1:4013"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    // CoreService refuses a data-worker in either layout.
    assert_eq!(
        core_calls(&world, &url, Role::DataWorker).await,
        [Some(ErrorCode::AccessDenied); 3]
    );
    assert!(off_runtime(|| world.store().workers().unwrap()).is_empty());
}
