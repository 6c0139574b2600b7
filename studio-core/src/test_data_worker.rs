//! A stand-in data-worker for studio-core's in-process tests: the real
//! `DataService` over the real mTLS (the test world's development PKI, the
//! data-worker role), answering from what the test set instead of from app
//! files. It says which tables hold rows (`TablesWithRows`, recording the
//! epoch each names, and refusing any but the one it is told it owns, as a
//! worker in the `leases` layout does), reports no migration drift, and
//! records every `ApplyContract` it is asked, approval included, so a router
//! test can see what studio-core asked of data-worker.
//! The engine's own behaviour is data-worker's tests' business.
//!
//! Every other call is `unimplemented`: a test that reaches one learns it at
//! once instead of reading an invented answer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use sasha_proto::pb::data_service_server::{DataService, DataServiceServer};
use sasha_proto::pb::{self, HealthReply, HealthRequest};
use sasha_service::identity::{DevPki, Identity};
use sasha_service::{Role, grpc};
use tonic::{Request, Response, Status};

/// What the stand-in answers and what it was asked; shared with the test.
#[derive(Debug, Default)]
pub(crate) struct FakeData {
    /// Per app id, the tables that hold rows.
    with_rows: Mutex<BTreeMap<String, BTreeSet<String>>>,
    /// Every `ApplyContract` request, in order.
    applied: Mutex<Vec<pb::ApplyContractRequest>>,
    /// The epoch of every `TablesWithRows` it was asked, in order.
    epochs: Mutex<Vec<u64>>,
    /// When set, the one epoch it serves: a `TablesWithRows` naming another
    /// is refused as a worker that does not own the app refuses it.
    owned_epoch: Mutex<Option<u64>>,
}

impl FakeData {
    /// From now on it serves `TablesWithRows` at `epoch` only.
    pub(crate) fn own_at(&self, epoch: u64) {
        *self
            .owned_epoch
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(epoch);
    }

    /// The epochs the `TablesWithRows` calls so far named, refused ones too.
    pub(crate) fn epochs(&self) -> Vec<u64> {
        self.epochs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// From now on `table` of `app_id` holds rows.
    pub(crate) fn put_rows(&self, app_id: &str, table: &str) {
        self.with_rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(app_id.to_owned())
            .or_default()
            .insert(table.to_owned());
    }

    /// The `ApplyContract` requests so far that were not dry runs.
    pub(crate) fn publications(&self) -> Vec<pb::ApplyContractRequest> {
        self.applied
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|request| !request.dry_run)
            .cloned()
            .collect()
    }
}

#[derive(Clone)]
struct Service(Arc<FakeData>);

/// Serves `fake` as data-worker on `listener`, with the data-worker identity
/// of the development PKI in `pki_dir` (the one studio-core's client trusts).
pub(crate) fn serve(
    fake: Arc<FakeData>,
    listener: tokio::net::TcpListener,
    pki_dir: &std::path::Path,
) {
    let (pki, _) = DevPki::ensure(pki_dir).unwrap();
    let identity = Identity::load(&pki.files(Role::DataWorker)).unwrap();
    let router = grpc::server_builder().add_service(DataServiceServer::new(Service(fake)));
    tokio::spawn(async move {
        let _ = grpc::serve_mtls(
            router,
            listener,
            &identity,
            Role::DataWorker,
            tokio_util::sync::CancellationToken::new(),
        )
        .await;
    });
}

#[tonic::async_trait]
impl DataService for Service {
    async fn health(&self, _: Request<HealthRequest>) -> Result<Response<HealthReply>, Status> {
        Ok(Response::new(grpc::health_reply(
            Role::DataWorker,
            Vec::new(),
        )))
    }

    async fn execute(
        &self,
        _: Request<pb::ExecuteRequest>,
    ) -> Result<Response<pb::ExecuteReply>, Status> {
        Err(Status::unimplemented(
            "the test data-worker runs no data call",
        ))
    }

    async fn describe_schema(
        &self,
        _: Request<pb::DescribeSchemaRequest>,
    ) -> Result<Response<pb::SchemaDescription>, Status> {
        Err(Status::unimplemented(
            "the test data-worker describes nothing",
        ))
    }

    async fn migration_drift(
        &self,
        _: Request<pb::MigrationDriftRequest>,
    ) -> Result<Response<pb::MigrationDriftReply>, Status> {
        Ok(Response::new(pb::MigrationDriftReply::default()))
    }

    async fn tables_with_rows(
        &self,
        request: Request<pb::TablesWithRowsRequest>,
    ) -> Result<Response<pb::TablesWithRowsReply>, Status> {
        let request = request.into_inner();
        self.0
            .epochs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request.epoch);
        let owned = *self
            .0
            .owned_epoch
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if owned.is_some_and(|epoch| epoch != request.epoch) {
            return Err(sasha_proto::AppError::not_owner(&request.app_id).to_status());
        }
        let held = self
            .0
            .with_rows
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let tables = request
            .tables
            .into_iter()
            .filter(|table| {
                held.get(&request.app_id)
                    .is_some_and(|held| held.contains(table))
            })
            .collect();
        Ok(Response::new(pb::TablesWithRowsReply { tables }))
    }

    async fn remove_app_data(
        &self,
        _: Request<pb::RemoveAppDataRequest>,
    ) -> Result<Response<pb::RemoveAppDataReply>, Status> {
        Ok(Response::new(pb::RemoveAppDataReply::default()))
    }

    async fn apply_contract(
        &self,
        request: Request<pb::ApplyContractRequest>,
    ) -> Result<Response<pb::ApplyContractReply>, Status> {
        self.0
            .applied
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request.into_inner());
        Ok(Response::new(pb::ApplyContractReply::default()))
    }

    async fn remove_preview(
        &self,
        _: Request<pb::RemovePreviewRequest>,
    ) -> Result<Response<pb::RemovePreviewReply>, Status> {
        Ok(Response::new(pb::RemovePreviewReply::default()))
    }
}
