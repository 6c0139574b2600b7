//! `PlacementService` on studio-core's gRPC listener: a data-worker renews
//! its lease (`Renew`, a data-worker's certificate only), and mcp-gateway
//! asks where an app's data is served (`Locate`, mcp-gateway's certificate
//! only). Requests become [`crate::placement`] calls and answers become
//! replies here and nowhere else.
//!
//! What it must never do: answer a caller whose certificate is not the
//! RPC's one role, or answer while the data plane has one worker
//! (`SASHA_DATA_PLACEMENT=single`: `FAILED_PRECONDITION`, saying so).

use std::sync::Arc;

use sasha_contract::AppId;
use sasha_proto::pb::placement_service_server::{PlacementService, PlacementServiceServer};
use sasha_proto::pb::{self};
use sasha_proto::{AppError, ErrorCode};
use sasha_service::Role;
use studio_store::{LeaseGrant, Released, Route, WorkerId, WorkerUrl};
use tonic::{Request, Response, Status};

use super::only_from;
use crate::placement::{self, Renewal};
use crate::state::{Core, DataLayout};

/// `PlacementService` over `core`.
pub(crate) fn service(core: Arc<Core>) -> PlacementServiceServer<PlacementGrpc> {
    PlacementServiceServer::new(PlacementGrpc { core })
}

/// The `PlacementService` implementation.
#[derive(Debug, Clone)]
pub(crate) struct PlacementGrpc {
    core: Arc<Core>,
}

/// The single layout's refusal, as `FAILED_PRECONDITION` (the caller's
/// configuration, not its request, is at fault), still carrying the
/// envelope so a Sasha caller reads its message.
fn in_leases_only(core: &Core) -> Result<(), Status> {
    if let DataLayout::Leases { .. } = core.data_layout {
        return Ok(());
    }
    let status = placement::not_leased().to_status();
    Err(Status::with_details(
        tonic::Code::FailedPrecondition,
        status.message(),
        status.details().to_vec().into(),
    ))
}

/// An invalid field of a request, named.
fn invalid(field: &str, reason: impl std::fmt::Display) -> Status {
    AppError::new(ErrorCode::InputInvalid, reason.to_string())
        .with_details(serde_json::json!({ "field": field }))
        .to_status()
}

fn renewal(request: pb::RenewRequest) -> Result<Renewal, Status> {
    Ok(Renewal {
        worker_id: WorkerId::parse(&request.worker_id)
            .map_err(|error| invalid("workerId", error))?,
        url: WorkerUrl::parse(&request.url).map_err(|error| invalid("url", error))?,
        replicated: request.replicated,
        released: request
            .released
            .into_iter()
            .map(|owned| Released {
                app_id: owned.app_id,
                epoch: owned.epoch,
            })
            .collect(),
    })
}

fn lease_grant(grant: LeaseGrant) -> pb::LeaseGrant {
    pb::LeaseGrant {
        lease_ms: u64::try_from(grant.lease.as_millis()).unwrap_or(u64::MAX),
        apps: grant
            .apps
            .into_iter()
            .map(|app| pb::Assignment {
                app_id: app.app_id,
                epoch: app.epoch,
                hand_over: app.hand_over,
            })
            .collect(),
    }
}

fn route(route: Route) -> pb::Route {
    pb::Route {
        app_id: route.app_id,
        worker_id: route.worker_id,
        url: route.url,
        epoch: route.epoch,
    }
}

#[tonic::async_trait]
impl PlacementService for PlacementGrpc {
    #[tracing::instrument(skip_all, name = "placement.renew")]
    async fn renew(
        &self,
        request: Request<pb::RenewRequest>,
    ) -> Result<Response<pb::LeaseGrant>, Status> {
        only_from(
            &request,
            Role::DataWorker,
            "only a data-worker renews a lease",
        )?;
        in_leases_only(&self.core)?;
        let renewal = renewal(request.into_inner())?;
        let grant = placement::renew(&self.core, renewal)
            .await
            .map_err(|error| error.to_status())?;
        Ok(Response::new(lease_grant(grant)))
    }

    #[tracing::instrument(skip_all, name = "placement.locate", fields(app_id))]
    async fn locate(
        &self,
        request: Request<pb::LocateRequest>,
    ) -> Result<Response<pb::Route>, Status> {
        only_from(
            &request,
            Role::McpGateway,
            "only mcp-gateway asks where an app's data is served",
        )?;
        in_leases_only(&self.core)?;
        let app_id = request.into_inner().app_id;
        tracing::Span::current().record("app_id", app_id.as_str());
        let app_id = AppId::parse(&app_id).map_err(|error| invalid("appId", error))?;
        let found = placement::locate(&self.core, app_id)
            .await
            .map_err(|error| error.to_status())?;
        Ok(Response::new(route(found)))
    }
}

#[cfg(test)]
mod tests;
