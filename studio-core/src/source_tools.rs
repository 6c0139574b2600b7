//! `CoreService.SourceFiles`: the six app source tools (`listAppFiles`,
//! `readAppFile`, `writeAppFile`, `editAppFile`, `deleteAppFile`, `checkApp`) as
//! mcp-gateway calls them.
//!
//! Who may: a principal holding both `apps:invoke` and `apps:write` (never an API
//! key) whose user is admin or staff, with `manage` on the app, read fresh from
//! the store on every call. Anything else, and an unknown app, is the same
//! `APP_ACCESS_DENIED`. A package that never validated was never registered, so
//! nobody holds a grant on it.
//!
//! A write is never refused for breaking validation: after every change the
//! catalogue is refreshed (the change is live at once) and the answer carries the
//! package's `status {ok, revision, diagnostics}`, including migration drift
//! against the live database (data-worker's `MigrationDrift`). Every change is
//! audited as `app-source.changed` with content hashes only, and the valid
//! revision it makes enters the revision ledger as the user's (`mcp`, see
//! `crate::revisions`). File work itself is [`crate::source::SourceTree`]'s.

use std::sync::Arc;

use sasha_proto::pb::{self, MigrationDriftRequest};
use sasha_proto::{AppError, ErrorCode};
use serde::Deserialize;

use crate::Core;
use crate::catalogue::AppEntry;
use crate::read_guard::ReadGuard;
use studio_store::blocking;
use studio_store::{AppAccess, RevisionOrigin, RevisionSurface};

/// The arguments of the six tools; unknown keys are refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Arguments {
    app: String,
    #[serde(default)]
    pub(crate) path: Option<String>,
    #[serde(default)]
    pub(crate) content: Option<String>,
    #[serde(default)]
    pub(crate) old_string: Option<String>,
    #[serde(default)]
    pub(crate) new_string: Option<String>,
    #[serde(default)]
    pub(crate) expected_version: Option<String>,
    /// writeAppFile: `"base64"` for a binary asset's bytes (see
    /// [`crate::source::content_bytes`]); absent for text.
    #[serde(default)]
    pub(crate) encoding: Option<String>,
    /// `true`: work on the app's draft (`crate::drafts`) instead of the live
    /// package; a write starts the draft. Absent or `false`: the live
    /// package, exactly as without drafts.
    #[serde(default)]
    draft: Option<bool>,
}

fn invalid(message: impl Into<String>) -> AppError {
    AppError::new(ErrorCode::InputInvalid, message)
}

fn denied() -> AppError {
    AppError::new(
        ErrorCode::AccessDenied,
        "you do not manage this app (or it does not exist); ask an admin for manage access",
    )
}

fn required(value: Option<String>, name: &str) -> Result<String, AppError> {
    value.ok_or_else(|| invalid(format!("{name} is required")))
}

/// Refuses what `operation` does not take.
fn only(arguments: &Arguments, allowed: &[&str]) -> Result<(), AppError> {
    let given = [
        ("path", arguments.path.is_some()),
        ("content", arguments.content.is_some()),
        ("oldString", arguments.old_string.is_some()),
        ("newString", arguments.new_string.is_some()),
        ("expectedVersion", arguments.expected_version.is_some()),
        ("encoding", arguments.encoding.is_some()),
    ];
    match given
        .iter()
        .find(|(name, present)| *present && !allowed.contains(name))
    {
        Some((name, _)) => Err(invalid(format!("{name} is not an argument of this tool"))),
        None => Ok(()),
    }
}

/// Runs one source tool for `principal`; the answer is what the gateway turns
/// into the tool's `structuredContent`.
pub(crate) async fn run(
    core: &Arc<Core>,
    principal: Option<&pb::Principal>,
    operation: &str,
    app_id: &str,
    arguments_json: &str,
) -> Result<pb::SourceFilesReply, AppError> {
    let principal = principal
        .filter(|principal| !principal.user_id.is_empty())
        .ok_or_else(|| AppError::new(ErrorCode::Unauthenticated, "no principal"))?;
    if arguments_json.len() > 2 * 1024 * 1024 {
        return Err(AppError::new(
            ErrorCode::ResourceLimit,
            "the arguments are too large",
        ));
    }
    let arguments: Arguments = serde_json::from_str(arguments_json)
        .map_err(|error| invalid(format!("the arguments are not valid: {error}")))?;
    if arguments.app != app_id || !sasha_package::manifest::is_kebab_id(app_id) {
        return Err(invalid("app must be an app id in lowercase kebab-case"));
    }
    let allowed: &[&str] = match operation {
        "listAppFiles" | "checkApp" => &[],
        "readAppFile" => &["path"],
        "writeAppFile" => &["path", "content", "expectedVersion", "encoding"],
        "editAppFile" => &["path", "oldString", "newString", "expectedVersion"],
        "deleteAppFile" => &["path", "expectedVersion"],
        _ => return Err(invalid("unknown source operation")),
    };
    only(&arguments, allowed)?;
    authorize_manager(core, principal, app_id).await?;
    if arguments.draft == Some(true) {
        return crate::drafts::source_operation(core, principal, operation, app_id, &arguments)
            .await;
    }
    let tree = core.source.clone();
    let app = app_id.to_owned();
    let guard = if matches!(operation, "writeAppFile" | "editAppFile" | "deleteAppFile") {
        ReadGuard::load(core, app_id).await?
    } else {
        ReadGuard::default()
    };
    let vet_tree = tree.clone();
    let vet_app = app.clone();
    let vet = move |path: &str, bytes: Option<&[u8]>| vet(&guard, &vet_tree, &vet_app, path, bytes);
    let change = match operation {
        "listAppFiles" => {
            let files = tokio::task::spawn_blocking(move || tree.list(&app))
                .await
                .map_err(|_| AppError::from_code(ErrorCode::Internal))??;
            let status = status(core, app_id).await;
            return Ok(pb::SourceFilesReply {
                app: app_id.to_owned(),
                status: Some(status),
                files: files
                    .into_iter()
                    .map(|file| pb::SourceFileEntry {
                        path: file.path,
                        bytes: file.bytes,
                        version: file.version,
                        editable: file.editable,
                    })
                    .collect(),
                kind: pb::SourceReplyKind::List as i32,
                ..pb::SourceFilesReply::default()
            });
        }
        "readAppFile" => {
            let path = required(arguments.path, "path")?;
            let file = tokio::task::spawn_blocking(move || tree.read(&app, &path))
                .await
                .map_err(|_| AppError::from_code(ErrorCode::Internal))??;
            return Ok(pb::SourceFilesReply {
                app: app_id.to_owned(),
                path: file.path,
                content: Some(file.content),
                bytes: file.bytes,
                version: Some(file.version),
                encoding: file.encoding.map(str::to_owned),
                kind: pb::SourceReplyKind::Read as i32,
                ..pb::SourceFilesReply::default()
            });
        }
        "checkApp" => {
            let status = status(core, app_id).await;
            return Ok(pb::SourceFilesReply {
                app: app_id.to_owned(),
                status: Some(status),
                kind: pb::SourceReplyKind::Check as i32,
                ..pb::SourceFilesReply::default()
            });
        }
        "writeAppFile" => {
            let path = required(arguments.path, "path")?;
            let content = required(arguments.content, "content")?;
            // Decoded and, for a binary asset, checked as one before anything
            // is opened: invalid base64 or bytes that are no asset of the
            // extension are refused, never written.
            let content =
                crate::source::content_bytes(&path, &content, arguments.encoding.as_deref())?;
            let expected = arguments.expected_version;
            tokio::task::spawn_blocking(move || {
                tree.write(&app, &path, &content, expected.as_deref(), &vet)
            })
            .await
        }
        "editAppFile" => {
            let path = required(arguments.path, "path")?;
            let old = required(arguments.old_string, "oldString")?;
            let new = required(arguments.new_string, "newString")?;
            let expected = required(arguments.expected_version, "expectedVersion")?;
            tokio::task::spawn_blocking(move || tree.edit(&app, &path, &old, &new, &expected, &vet))
                .await
        }
        "deleteAppFile" => {
            let path = required(arguments.path, "path")?;
            let expected = required(arguments.expected_version, "expectedVersion")?;
            tokio::task::spawn_blocking(move || tree.delete(&app, &path, &expected, &vet)).await
        }
        _ => return Err(invalid("unknown source operation")),
    }
    .map_err(|_| AppError::from_code(ErrorCode::Internal))??;
    let changed_at = core.store.timestamp();
    let (store, app, user, audited) = (
        core.store.clone(),
        app_id.to_owned(),
        principal.user_id.clone(),
        change.clone(),
    );
    blocking(move || {
        store.record_source_change(
            &app,
            &audited.path,
            &user,
            audited.before.as_deref(),
            audited.after.as_deref(),
        )
    })
    .await?;
    let status = status(core, app_id).await;
    // The revision this change made, if valid, enters the ledger as the user's.
    let summary = format!("{operation} {}", change.path);
    let origin = RevisionOrigin::authored(
        RevisionSurface::Mcp,
        &principal.user_id,
        summary,
        changed_at,
    );
    crate::revisions::record_authored(core, app_id, origin).await;
    Ok(pb::SourceFilesReply {
        app: app_id.to_owned(),
        status: Some(status),
        path: change.path,
        version: change.after,
        previous_version: change.before,
        kind: pb::SourceReplyKind::Change as i32,
        ..pb::SourceFilesReply::default()
    })
}

/// Refuses a live change that would widen who can read rows that exist
/// ([`ReadGuard`]); run by [`crate::source::SourceTree`] under the app's
/// lock, against the guard loaded before it. Such a change needs a
/// publication an admin approves, so the source tools never make it.
fn vet(
    guard: &ReadGuard,
    tree: &crate::source::SourceTree,
    app_id: &str,
    path: &str,
    bytes: Option<&[u8]>,
) -> Result<(), AppError> {
    if !guard.protects_rows() {
        return Ok(());
    }
    let mut source = tree.package_source(app_id);
    source.set(path, bytes);
    // An invalid package activates nothing: its data tools are gone until
    // a valid one, which is checked here in turn, replaces it.
    let Some(package) = sasha_package::validate::validate_source(app_id, source).package else {
        return Ok(());
    };
    guard.check(package.data.as_ref(), "this source change")
}

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
/// The source tools' access rule, which the history tools share: a user
/// credential (not an API key) holding `apps:invoke` + `apps:write`, whose
/// user, read again, is admin or staff and manages the app. A withdrawn app
/// is refused as withdrawn rather than as "no access".
pub(crate) async fn authorize_manager(
    core: &Arc<Core>,
    principal: &pb::Principal,
    app_id: &str,
) -> Result<(), AppError> {
    let scoped = principal.kind != "api-key"
        && ["apps:invoke", "apps:write"]
            .iter()
            .all(|needed| principal.scopes.iter().any(|scope| scope == needed))
        && matches!(principal.role.as_str(), "admin" | "staff");
    if !scoped {
        return Err(denied());
    }
    let (store, app, user) = (
        core.store.clone(),
        app_id.to_owned(),
        principal.user_id.clone(),
    );
    let held = blocking(move || {
        // The role is read again: a demoted user loses the tools at once.
        let privileged = store
            .user(&user)?
            .is_some_and(|user| user.role.is_privileged());
        Ok(privileged
            .then(|| store.access(&app, &user))
            .transpose()?
            .flatten())
    })
    .await?;
    if held != Some(AppAccess::Manage) {
        crate::lifecycle::refuse_if_withdrawn(core, app_id).await?;
        return Err(denied());
    }
    Ok(())
}

pub(crate) async fn status(core: &Arc<Core>, app_id: &str) -> pb::PackageStatus {
    // Refreshed (and newly valid packages registered) now, so a change is live
    // before its answer is sent.
    let snapshot = crate::refresh_catalogue(core).await;
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
