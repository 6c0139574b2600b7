//! mTLS between processes: data-worker accepts only studio-core and mcp-gateway,
//! studio-core accepts only mcp-gateway. A plaintext client, a client whose
//! certificate comes from another CA, and a client of the wrong role are refused
//! during the handshake; a client that expects one role but reaches another
//! refuses the server. The calls that are studio-core's alone (a draft's
//! migrations, previews, deleting data) read the caller's role from its
//! certificate and refuse the gateway.

use crate::common;

use std::time::Duration;

use common::Harness;
use sasha_proto::pb::HealthRequest;
use sasha_proto::pb::core_service_client::CoreServiceClient;
use sasha_proto::pb::data_service_client::DataServiceClient;
use sasha_proto::{AppError, ErrorCode};
use sasha_service::identity::{self, Identity, TlsFiles};
use sasha_service::{Role, grpc};
use tonic::transport::Endpoint;

fn identity_of(harness: &Harness, role: Role) -> Identity {
    Identity::load(&harness.tls(role)).expect("identity")
}

/// A complete identity for `role` signed by a CA nobody trusts, which itself
/// trusts the harness CA (so only the server side can refuse it).
fn foreign_identity(harness: &Harness, role: Role) -> Identity {
    let dir = harness.path().join(format!("foreign-{role}"));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = identity::mint_ca("Some other CA").unwrap();
    let leaf = ca.mint_leaf(role).unwrap();
    std::fs::write(dir.join("cert.pem"), leaf.cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), leaf.key_pem).unwrap();
    Identity::load(&TlsFiles {
        ca: harness.tls(role).ca,
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    })
    .unwrap()
}

async fn data_health(url: &str, identity: &Identity) -> Result<bool, AppError> {
    let mut client = grpc::data_client(url, identity).unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        client.health(HealthRequest { deep: false }),
    )
    .await
    .expect("answer in time")
    .map(|reply| reply.into_inner().ok)
    .map_err(AppError::from)
}

async fn core_health(url: &str, identity: &Identity) -> Result<bool, AppError> {
    let mut client = grpc::core_client(url, identity).unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        client.health(HealthRequest { deep: true }),
    )
    .await
    .expect("answer in time")
    .map(|reply| reply.into_inner().ok)
    .map_err(AppError::from)
}

#[tokio::test]
async fn allowed_roles_are_served() {
    let harness = Harness::new();
    let backends = harness.start_backends().await;
    let data_url = format!("https://{}", backends.data.listener("grpc"));
    let core_url = format!("https://{}", backends.core.listener("grpc"));
    assert!(
        data_health(&data_url, &identity_of(&harness, Role::StudioCore))
            .await
            .unwrap()
    );
    assert!(
        data_health(&data_url, &identity_of(&harness, Role::McpGateway))
            .await
            .unwrap()
    );
    // Deep health: core reaches data-worker with its own certificate.
    assert!(
        core_health(&core_url, &identity_of(&harness, Role::McpGateway))
            .await
            .unwrap()
    );
}

/// The peer's role is read from its certificate per call: the gateway may
/// reach data-worker, but not the calls that are studio-core's alone.
#[tokio::test]
async fn the_data_lifecycle_answers_studio_core_only() {
    let harness = Harness::new();
    let backends = harness.start_backends().await;
    let data_url = format!("https://{}", backends.data.listener("grpc"));
    let remove = |role: Role| {
        let mut client = grpc::data_client(&data_url, &identity_of(&harness, role)).unwrap();
        async move {
            client
                .remove_preview(sasha_proto::pb::RemovePreviewRequest {
                    epoch: 0,
                    app_id: "hello".into(),
                    preview: String::new(),
                })
                .await
                .map(|reply| reply.into_inner().removed_files)
                .map_err(AppError::from)
        }
    };
    let refused = remove(Role::McpGateway).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::AccessDenied, "{refused:?}");
    assert_eq!(remove(Role::StudioCore).await.unwrap(), 0);
}

#[tokio::test]
async fn wrong_role_is_refused() {
    let harness = Harness::new();
    let backends = harness.start_backends().await;
    let data_url = format!("https://{}", backends.data.listener("grpc"));
    let core_url = format!("https://{}", backends.core.listener("grpc"));
    for role in [Role::EdgeSandbox, Role::DataWorker] {
        let error = data_health(&data_url, &identity_of(&harness, role))
            .await
            .unwrap_err();
        assert_eq!(
            error.code,
            ErrorCode::NotReady,
            "{role} → data-worker: {error:?}"
        );
    }
    // A data-worker's certificate passes studio-core's handshake: it renews
    // its lease there (`PlacementService.Renew`); which calls it may make is
    // studio-core's check, past the handshake.
    for role in [Role::EdgeSandbox, Role::StudioCore] {
        let error = core_health(&core_url, &identity_of(&harness, role))
            .await
            .unwrap_err();
        assert_eq!(
            error.code,
            ErrorCode::NotReady,
            "{role} → studio-core: {error:?}"
        );
    }
    common::eventually(
        Duration::from_secs(5),
        "data-worker logging the refusal",
        || async {
            backends
                .data
                .stderr()
                .contains("refused a client certificate of a role")
        },
    )
    .await;
}

#[tokio::test]
async fn certificate_from_another_ca_is_refused() {
    let harness = Harness::new();
    let backends = harness.start_backends().await;
    let data_url = format!("https://{}", backends.data.listener("grpc"));
    let core_url = format!("https://{}", backends.core.listener("grpc"));
    let error = data_health(&data_url, &foreign_identity(&harness, Role::McpGateway))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotReady, "{error:?}");
    let error = core_health(&core_url, &foreign_identity(&harness, Role::McpGateway))
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotReady, "{error:?}");
    for process in [&backends.data, &backends.core] {
        common::eventually(
            Duration::from_secs(5),
            &format!("{} logging why it refused", process.role),
            || async {
                let log = process.stderr();
                log.contains("refused a gRPC connection during the TLS handshake")
                    && log.contains("UnknownIssuer")
            },
        )
        .await;
    }
}

#[tokio::test]
async fn plaintext_client_is_refused() {
    let harness = Harness::new();
    let backends = harness.start_backends().await;
    for addr in [
        backends.data.listener("grpc"),
        backends.core.listener("grpc"),
    ] {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(5))
            .connect_lazy();
        let data = DataServiceClient::new(channel.clone())
            .health(HealthRequest { deep: false })
            .await;
        assert!(data.is_err(), "plaintext call to {addr} must fail");
        let core = CoreServiceClient::new(channel)
            .health(HealthRequest { deep: false })
            .await;
        assert!(core.is_err(), "plaintext call to {addr} must fail");
    }
}

#[tokio::test]
async fn client_refuses_a_server_of_another_role() {
    let harness = Harness::new();
    let backends = harness.start_backends().await;
    // The gateway thinks it is calling data-worker, but the address is core's.
    let core_addr = backends.core.listener("grpc");
    let error = data_health(
        &format!("https://{core_addr}"),
        &identity_of(&harness, Role::McpGateway),
    )
    .await
    .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotReady, "{error:?}");
}

#[tokio::test]
async fn closed_errors_cross_the_hop_intact() {
    let harness = Harness::new();
    let backends = harness.start_backends().await;
    let identity = identity_of(&harness, Role::McpGateway);
    let mut data = grpc::data_client(
        &format!("https://{}", backends.data.listener("grpc")),
        &identity,
    )
    .unwrap();
    let status = data
        .execute(sasha_proto::pb::ExecuteRequest::default())
        .await
        .unwrap_err();
    let error = AppError::from_status(&status);
    assert_eq!(error.code, ErrorCode::InputInvalid);
    assert!(!error.retryable);
    assert!(!error.diagnostic_id.is_empty());
    assert_eq!(error.message, "the request names no actor", "{error:?}");

    let mut core = grpc::core_client(
        &format!("https://{}", backends.core.listener("grpc")),
        &identity,
    )
    .unwrap();
    // A chat turn for anything but a Studio session: refused with its own
    // code and message, and the stream never starts.
    let status = core
        .chat(sasha_proto::pb::ChatRequest {
            principal: Some(sasha_proto::pb::Principal {
                user_id: "u1".into(),
                kind: sasha_proto::convert::ToWire::to_wire(
                    sasha_contract::caller::PrincipalKind::Access,
                ),
                scopes: sasha_proto::convert::scopes_to_wire(&[
                    sasha_contract::caller::Scope::AppsInvoke,
                ]),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    let error = AppError::from_status(&status);
    assert_eq!(error.code, ErrorCode::CapabilityDenied);
    assert_eq!(
        error.message,
        "chat is available only to an app open in Studio"
    );
    // A call without a principal is refused with its own code, not a transport error.
    let status = core
        .list_apps(sasha_proto::pb::ListAppsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(
        AppError::from_status(&status).code,
        ErrorCode::Unauthenticated
    );
}
