//! Whether a package may replace the live one without rewinding its data:
//! every migration the live database applied must be kept as it was
//! (data-worker's `MigrationDrift`, asked with the package's contract). A
//! revert and a member app's redeploy are refused when it is not.
//!
//! What it must never do: let a package through when the drift could not
//! be checked (data-worker unreachable is `APP_NOT_READY`).

use std::sync::Arc;

use sasha_package::validate::Package;
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};

use crate::catalogue::AppEntry;
use crate::data_worker::{self, DriftKind};
use crate::state::Core;

/// The migration files of the live package (the catalogue's valid one).
fn live_migrations(core: &Core, app_id: &str) -> Vec<String> {
    match core.catalogue.current().apps.get(app_id) {
        Some(AppEntry::Valid(package)) => package
            .data
            .as_ref()
            .map(|data| {
                data.migrations
                    .iter()
                    .map(|migration| migration.file.clone())
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Refuses a revert whose package would drop (or change) a migration the
/// live database applied: data-worker's drift against the old revision's
/// contract. An old revision without data keeps no migration at all, so it
/// is refused while the live package has any.
pub(crate) async fn check_migrations(
    core: &Arc<Core>,
    app_id: &str,
    old: &Package,
    doing: &str,
) -> Result<(), AppError> {
    let drifted: Vec<(String, &'static str)> = match &old.data {
        Some(data) => data_worker::migration_drift(&core.data, app_id, data)
            .await
            .map_err(|error| {
                AppError::new(
                    ErrorCode::NotReady,
                    "cannot check the app's applied migrations right now; try again",
                )
                .with_details(json!({"cause": error.code.as_str()}))
            })?
            .into_iter()
            .map(|drift| {
                let reason = match drift.kind {
                    DriftKind::NotInContract => {
                        "applied to the live database, and the revision does not have it"
                    }
                    DriftKind::ChecksumChanged => {
                        "applied to the live database with other content than the revision's"
                    }
                };
                (drift.file, reason)
            })
            .collect(),
        None => live_migrations(core, app_id)
            .into_iter()
            .map(|file| {
                (
                    file,
                    "in the live package, and the revision has no data at all",
                )
            })
            .collect(),
    };
    let Some((first, _)) = drifted.first() else {
        return Ok(());
    };
    let diagnostics: Vec<Value> = drifted
        .iter()
        .map(
            |(file, reason)| json!({"file": file, "code": "APP_MIGRATION_DRIFT", "reason": reason}),
        )
        .collect();
    let migrations: Vec<&str> = drifted.iter().map(|(file, _)| file.as_str()).collect();
    Err(AppError::new(
        ErrorCode::SchemaIncompatible,
        format!(
            "{doing} would drop the applied migration {first}; data is never rewound, so keep every \
             applied migration as it is (add a new migration for a change)"
        ),
    )
    .with_details(json!({"migrations": migrations, "diagnostics": diagnostics})))
}
