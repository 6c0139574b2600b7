//! A package's status as the tools answer it after every change: whether
//! the live catalogue holds it valid, its revision, and its diagnostics,
//! with migration drift against the live database for a data app
//! (data-worker's `MigrationDrift`, and its read guard's refusals naming
//! each table).
//!
//! What it must never do: answer from a catalogue older than the change
//! (it refreshes first), or report a data app as fine when its drift could
//! not be checked (that failure is a diagnostic too).

use std::sync::Arc;

use sasha_proto::AppError;
use sasha_proto::pb::{self, MigrationDriftRequest};

use crate::catalogue::AppEntry;
use crate::registry::refresh_catalogue;
use crate::state::Core;

/// One problem as the wire carries it.
fn diagnostic(file: &str, code: &str, reason: &str) -> pb::Diagnostic {
    pb::Diagnostic {
        file: file.to_owned(),
        line: None,
        code: code.to_owned(),
        reason: reason.to_owned(),
    }
}

/// What an applied migration that no longer matches the contract means for
/// the package's author.
fn drift_reason(drift: &pb::Drift) -> &'static str {
    if drift.kind == pb::DriftKind::NotInContract as i32 {
        "an applied migration is no longer in the package; restore it"
    } else {
        "an applied migration was edited; restore its applied content and add a new migration instead"
    }
}

/// The package's status as the live catalogue sees it now, with migration drift
/// against the live database for a data app that validates.
pub(crate) async fn status(core: &Arc<Core>, app_id: &str) -> pb::PackageStatus {
    // Refreshed (and newly valid packages registered) now, so a change is live
    // before its answer is sent.
    let snapshot = refresh_catalogue(core).await;
    let package = match snapshot.apps.get(app_id) {
        Some(AppEntry::Valid(package)) => package.clone(),
        Some(AppEntry::Invalid(diagnostics)) => {
            return pb::PackageStatus {
                ok: false,
                revision: None,
                diagnostics: diagnostics
                    .iter()
                    .map(|problem| pb::Diagnostic {
                        file: problem.file.clone(),
                        line: problem.line,
                        code: problem.code.clone(),
                        reason: problem.reason.clone(),
                    })
                    .collect(),
            };
        }
        None => {
            return pb::PackageStatus {
                ok: false,
                revision: None,
                diagnostics: vec![diagnostic(
                    "APP.md",
                    "APP_NOT_FOUND",
                    "the package folder is missing",
                )],
            };
        }
    };
    let mut diagnostics = Vec::new();
    if let Some(data) = &package.data {
        let mut client = core.data.clone();
        let answer = client
            .migration_drift(MigrationDriftRequest {
                app_id: app_id.to_owned(),
                contract_hash: data.hash.clone(),
                contract: Some(pb::DataContract::from(data)),
            })
            .await;
        match answer {
            Ok(reply) => {
                for drift in &reply.get_ref().drift {
                    diagnostics.push(diagnostic(
                        &drift.file,
                        "APP_MIGRATION_DRIFT",
                        drift_reason(drift),
                    ));
                }
            }
            Err(status) => {
                let error = AppError::from_status(&status);
                // data-worker's read guard names each table it refused
                // (`DATA_READ_WIDENED`, `DATA_OWNER_CHANGED`) and its file.
                let named: Vec<pb::Diagnostic> = error
                    .details
                    .as_ref()
                    .and_then(|details| details["diagnostics"].as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|found| {
                        Some(diagnostic(
                            found["file"].as_str()?,
                            found["code"].as_str()?,
                            found["reason"].as_str()?,
                        ))
                    })
                    .collect();
                if named.is_empty() {
                    diagnostics.push(diagnostic(
                        "migrations",
                        error.code.as_str(),
                        &error.message,
                    ));
                } else {
                    diagnostics.extend(named);
                }
            }
        }
    }
    pb::PackageStatus {
        ok: diagnostics.is_empty(),
        revision: Some(package.resource.revision.clone()),
        diagnostics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_keeps_its_diagnostic_text() {
        let drift = |kind: pb::DriftKind| pb::Drift {
            number: 1,
            file: "migrations/001-init.sql".into(),
            kind: kind as i32,
            applied_checksum: "a".repeat(64),
            contract_checksum: None,
        };
        assert_eq!(
            drift_reason(&drift(pb::DriftKind::NotInContract)),
            "an applied migration is no longer in the package; restore it"
        );
        assert_eq!(
            drift_reason(&drift(pb::DriftKind::ChecksumChanged)),
            "an applied migration was edited; restore its applied content and add a new migration instead"
        );
    }
}
