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

use sasha_package::Diagnostic;

use crate::catalogue::AppEntry;
use crate::data_worker::{self, Drift, DriftKind};
use crate::registry::refresh_catalogue;
use crate::state::Core;

/// Whether a package validates and is live: its revision, and every problem
/// with its file (and line, when it has one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PackageStatus {
    pub(crate) ok: bool,
    /// The live revision; `None` when the package does not validate.
    pub(crate) revision: Option<String>,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

/// One problem without a line.
pub(crate) fn diagnostic(file: &str, code: &str, reason: &str) -> Diagnostic {
    Diagnostic {
        file: file.to_owned(),
        line: None,
        code: code.to_owned(),
        reason: reason.to_owned(),
    }
}

/// What an applied migration that no longer matches the contract means for
/// the package's author.
fn drift_reason(drift: &Drift) -> &'static str {
    match drift.kind {
        DriftKind::NotInContract => "an applied migration is no longer in the package; restore it",
        DriftKind::ChecksumChanged => {
            "an applied migration was edited; restore its applied content and add a new migration instead"
        }
    }
}

/// The package's status as the live catalogue sees it now, with migration drift
/// against the live database for a data app that validates.
pub(crate) async fn status(core: &Arc<Core>, app_id: &str) -> PackageStatus {
    // Refreshed (and newly valid packages registered) now, so a change is live
    // before its answer is sent.
    let snapshot = refresh_catalogue(core).await;
    let package = match snapshot.apps.get(app_id) {
        Some(AppEntry::Valid(package)) => package.clone(),
        Some(AppEntry::Invalid(diagnostics)) => {
            return PackageStatus {
                ok: false,
                revision: None,
                diagnostics: diagnostics.to_vec(),
            };
        }
        None => {
            return PackageStatus {
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
        match data_worker::migration_drift(&core.data, app_id, data).await {
            Ok(drifted) => {
                for drift in &drifted {
                    diagnostics.push(diagnostic(
                        &drift.file,
                        "APP_MIGRATION_DRIFT",
                        drift_reason(drift),
                    ));
                }
            }
            Err(error) => {
                // data-worker's read guard names each table it refused
                // (`DATA_READ_WIDENED`, `DATA_OWNER_CHANGED`) and its file.
                let named: Vec<Diagnostic> = error
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
    PackageStatus {
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
        let drift = |kind| Drift {
            file: "migrations/001-init.sql".into(),
            kind,
        };
        assert_eq!(
            drift_reason(&drift(DriftKind::NotInContract)),
            "an applied migration is no longer in the package; restore it"
        );
        assert_eq!(
            drift_reason(&drift(DriftKind::ChecksumChanged)),
            "an applied migration was edited; restore its applied content and add a new migration instead"
        );
    }
}
