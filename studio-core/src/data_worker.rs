//! The calls studio-core makes to data-worker (`DataService`), in the
//! domain's own types: an app's migration drift against a contract, a
//! contract applied (or tried), which owner-scoped tables hold rows, and a
//! preview's or a deleted app's data removed. The wire messages stay here.
//!
//! Every call goes through the data plane ([`DataPlane::call`]): to the one
//! data-worker with epoch 0, or to the app's owner with the epoch its
//! placement names (asking again once when the owner says the app moved).
//!
//! What it must never do: read or write an app's data itself (only
//! data-worker opens an app's file), call a data-worker but through the
//! data plane, or turn a failed call into an answer (every failure is the
//! caller's `AppError`, or logged where nothing waits for it).

use std::collections::BTreeSet;

use sasha_contract::data::DataContract;
use sasha_proto::AppError;
use sasha_proto::pb;
use sasha_service::data_plane::DataPlane;

/// How an applied migration differs from a contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DriftKind {
    /// The contract no longer has the migration.
    NotInContract,
    /// The contract has it with other content.
    ChecksumChanged,
}

/// One applied migration that a contract does not keep as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Drift {
    /// The migration file, e.g. `migrations/001-init.sql`.
    pub(crate) file: String,
    pub(crate) kind: DriftKind,
}

impl From<&pb::Drift> for Drift {
    fn from(drift: &pb::Drift) -> Drift {
        Drift {
            file: drift.file.clone(),
            // Anything but "no longer in the contract" is an edited one.
            kind: if drift.kind == pb::DriftKind::NotInContract as i32 {
                DriftKind::NotInContract
            } else {
                DriftKind::ChecksumChanged
            },
        }
    }
}

/// What applying a contract did (or, dry, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    /// The migration files applied, in order.
    pub(crate) applied: Vec<String>,
    /// Applied migrations the contract drops or edits: nothing is applied.
    pub(crate) drift: Vec<Drift>,
}

/// What removing an app's data did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemovedData {
    /// The backup of the removed file, relative to `APP_DATA_ROOT`; `None`
    /// when the app had no data file.
    pub(crate) backup: Option<String>,
    /// The removed file's size.
    pub(crate) bytes: u64,
}

/// A `DataService` failure as the caller's error.
fn failed(status: tonic::Status) -> AppError {
    AppError::from_status(&status)
}

/// The applied migrations of `app_id`'s live database that `contract` does
/// not keep as they were.
pub(crate) async fn migration_drift(
    data: &DataPlane,
    app_id: &str,
    contract: &DataContract,
) -> Result<Vec<Drift>, AppError> {
    let request = pb::MigrationDriftRequest {
        app_id: app_id.to_owned(),
        epoch: 0,
        contract_hash: contract.hash.clone(),
        contract: Some(pb::DataContract::from(contract)),
    };
    let reply = data
        .call(app_id, |mut client, epoch| {
            let request = pb::MigrationDriftRequest {
                epoch,
                ..request.clone()
            };
            async move { client.migration_drift(request).await.map_err(failed) }
        })
        .await?;
    Ok(reply.get_ref().drift.iter().map(Drift::from).collect())
}

/// Applies `contract`'s pending migrations to `app_id`'s live data in one
/// transaction (`dry_run`: only says what it would apply). A widening of who
/// reads rows passes only with `approved_by_admin` naming the admin.
pub(crate) async fn apply_contract(
    data: &DataPlane,
    app_id: &str,
    contract: &DataContract,
    application: Application<'_>,
) -> Result<Applied, AppError> {
    let (dry_run, publication) = match application {
        Application::DryRun => (true, Publication::default()),
        Application::Publish(publication) => (false, publication),
    };
    let request = pb::ApplyContractRequest {
        app_id: app_id.to_owned(),
        epoch: 0,
        contract: Some(pb::DataContract::from(contract)),
        dry_run,
        approved_by_admin: publication.approved_by_admin.to_owned(),
        published_by: publication.by.to_owned(),
        revision: publication.revision.to_owned(),
    };
    let reply = data
        .call(app_id, |mut client, epoch| {
            let request = pb::ApplyContractRequest {
                epoch,
                ..request.clone()
            };
            async move { client.apply_contract(request).await.map_err(failed) }
        })
        .await?
        .into_inner();
    Ok(Applied {
        applied: reply.applied,
        drift: reply.drift.iter().map(Drift::from).collect(),
    })
}

/// What [`apply_contract`] asks of data-worker.
pub(crate) enum Application<'a> {
    /// Only say which migrations are pending (a draft's review).
    DryRun,
    /// Apply them, for this publication.
    Publish(Publication<'a>),
}

/// A publication that applies a contract's migrations.
#[derive(Default)]
pub(crate) struct Publication<'a> {
    /// The person publishing, whom the app's audit ledger records the
    /// migrations as made by.
    pub by: &'a str,
    /// The revision published.
    pub revision: &'a str,
    /// The admin who approved a widening the review showed; empty if none.
    pub approved_by_admin: &'a str,
}

/// Which of `tables` of `app_id` hold rows now.
pub(crate) async fn tables_with_rows(
    data: &DataPlane,
    app_id: &str,
    tables: BTreeSet<String>,
) -> Result<BTreeSet<String>, AppError> {
    let tables: Vec<String> = tables.into_iter().collect();
    let reply = data
        .call(app_id, |mut client, epoch| {
            let request = pb::TablesWithRowsRequest {
                app_id: app_id.to_owned(),
                epoch,
                tables: tables.clone(),
            };
            async move { client.tables_with_rows(request).await.map_err(failed) }
        })
        .await?;
    Ok(reply.into_inner().tables.into_iter().collect())
}

/// Removes the scratch data of `app_id`'s preview `preview`. Scratch data
/// only: a failure is logged, and the next preview of this id never comes.
pub(crate) async fn remove_preview(data: &DataPlane, app_id: &str, preview: &str) {
    let removed = data
        .call(app_id, |mut client, epoch| {
            let request = pb::RemovePreviewRequest {
                app_id: app_id.to_owned(),
                epoch,
                preview: preview.to_owned(),
            };
            async move { client.remove_preview(request).await.map_err(failed) }
        })
        .await;
    if let Err(error) = removed {
        tracing::warn!(%app_id, code = ?error.code, diagnostic_id = %error.diagnostic_id, "a preview's scratch data was not removed");
    }
}

/// Removes `app_id`'s data file, backed up by data-worker first.
pub(crate) async fn remove_app_data(
    data: &DataPlane,
    app_id: &str,
) -> Result<RemovedData, AppError> {
    let removed = data
        .call(app_id, |mut client, epoch| {
            let request = pb::RemoveAppDataRequest {
                app_id: app_id.to_owned(),
                epoch,
            };
            async move { client.remove_app_data(request).await.map_err(failed) }
        })
        .await?
        .into_inner();
    Ok(RemovedData {
        backup: removed.removed.then(|| removed.backup_file.clone()),
        bytes: removed.bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drift_is_edited_unless_it_left_the_contract() {
        let drift = |kind: i32| {
            Drift::from(&pb::Drift {
                number: 1,
                file: "migrations/001-init.sql".into(),
                kind,
                applied_checksum: "a".repeat(64),
                contract_checksum: None,
            })
        };
        assert_eq!(
            drift(pb::DriftKind::NotInContract as i32).kind,
            DriftKind::NotInContract
        );
        assert_eq!(
            drift(pb::DriftKind::ChecksumChanged as i32).kind,
            DriftKind::ChecksumChanged
        );
        // A kind this build does not name is not "gone": it reads as edited,
        // as the diagnostics always have.
        assert_eq!(drift(0).kind, DriftKind::ChecksumChanged);
        assert_eq!(drift(0).file, "migrations/001-init.sql");
    }
}
