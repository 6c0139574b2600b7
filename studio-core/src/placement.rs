//! The data plane's placement as studio-core serves it, in the `leases`
//! layout: a data-worker's lease renewal ([`renew`]), where an app's data is
//! served ([`locate`], for the gateway's `PlacementService.Locate` and, as
//! [`StoreLocate`], for studio-core's own data calls), each answered from
//! the core database (`studio_store::placement`), whose transactions decide.
//!
//! Store calls run on the blocking pool: PostgreSQL's blocking client
//! panics on an async thread.
//!
//! What it must never do: answer a renewal or a route from anything but the
//! store (no cache: a route another replica changed must be read again), or
//! decide who may ask (the gRPC layer checks the caller's certificate).

use std::sync::Arc;
use std::time::Duration;

use sasha_contract::AppId;
use sasha_proto::{AppError, ErrorCode};
use sasha_service::data_plane::{self, Locate, LocateFuture};
use studio_store::{LeaseGrant, Released, Route, Store, WorkerId, WorkerUrl};

use crate::state::{Core, DataLayout};

/// What a worker asks for when it renews, checked.
#[derive(Debug, Clone)]
pub(crate) struct Renewal {
    pub(crate) worker_id: WorkerId,
    pub(crate) url: WorkerUrl,
    pub(crate) replicated: bool,
    pub(crate) released: Vec<Released>,
}

/// The answer for a data call when no data-worker holds a lease: retryable,
/// since a worker starting or coming back clears it.
pub(crate) fn no_live_worker() -> AppError {
    AppError::new(ErrorCode::NotReady, "no data-worker holds a lease")
}

/// The refusal of every placement call while the data plane has one worker
/// (`SASHA_DATA_PLACEMENT=single`): a worker or gateway configured for
/// leases is talking to a studio-core that is not.
pub(crate) fn not_leased() -> AppError {
    AppError::new(
        ErrorCode::OperationUnavailable,
        "studio-core runs one data-worker (SASHA_DATA_PLACEMENT=single): it grants no leases and places no apps; set SASHA_DATA_PLACEMENT=leases on studio-core too",
    )
}

/// The lease this studio-core grants, or the refusal when it grants none.
fn lease(core: &Core) -> Result<Duration, AppError> {
    match core.data_layout {
        DataLayout::Leases { lease } => Ok(lease),
        DataLayout::Single(_) => Err(not_leased()),
    }
}

/// Renews `renewal.worker_id`'s lease (`studio_store::Store::renew`).
pub(crate) async fn renew(core: &Core, renewal: Renewal) -> Result<LeaseGrant, AppError> {
    let lease = lease(core)?;
    let store = core.store.clone();
    studio_store::blocking(move || {
        store.renew(
            &renewal.worker_id,
            &renewal.url,
            renewal.replicated,
            &renewal.released,
            lease,
        )
    })
    .await
}

/// Where `app_id`'s data is served, placing it if it has no placement yet.
pub(crate) async fn locate(core: &Core, app_id: AppId) -> Result<Route, AppError> {
    lease(core)?;
    locate_in(&core.store, app_id).await
}

async fn locate_in(store: &Store, app_id: AppId) -> Result<Route, AppError> {
    let store = store.clone();
    studio_store::blocking(move || store.locate(&app_id))
        .await?
        .ok_or_else(no_live_worker)
}

/// studio-core's own data calls find their worker in the core database,
/// as `PlacementService.Locate` answers the gateway.
#[derive(Debug, Clone)]
pub(crate) struct StoreLocate(pub(crate) Store);

impl Locate for StoreLocate {
    fn locate<'a>(&'a self, app_id: &'a str) -> LocateFuture<'a> {
        Box::pin(async move {
            let app_id = AppId::parse(app_id)
                .map_err(|error| AppError::new(ErrorCode::InputInvalid, error.to_string()))?;
            let route = locate_in(&self.0, app_id).await?;
            Ok(data_plane::Route {
                worker_id: route.worker_id,
                url: route.url,
                epoch: route.epoch,
            })
        })
    }
}

/// The data plane studio-core calls through in the `leases` layout.
pub(crate) fn leased_data_plane(
    store: &Store,
    identity: sasha_service::identity::Identity,
) -> data_plane::DataPlane {
    data_plane::DataPlane::leased(Arc::new(StoreLocate(store.clone())), identity)
}

#[cfg(test)]
mod tests;
