//! `CoreService.History`: an app's revision history as the MCP tools
//! `listAppRevisions`, `readAppRevisionFile`, `diffAppRevisions` and
//! `revertApp` use it, answered from the revision ledger (`studio_store::ledger`).
//!
//! Who may: exactly the source tools' callers (`crate::access`): a
//! principal holding `apps:invoke` and `apps:write` (never an API key) whose
//! user, read again, is admin or staff, with `manage` on the app. Anyone
//! else, and an unknown app, is the same `APP_ACCESS_DENIED`. A revision the
//! app never had is the hidden `APP_NOT_FOUND`; one it had that retention
//! removed is `APP_REVISION_UNAVAILABLE` (told apart by the append-only
//! audit log, which names every revision ever registered).
//!
//! Revert makes the package's files equal an old revision's. Because a
//! revision is the hash of exact bytes, the result *is* that revision again:
//! the ledger already holds its row (with its first author), so the revert
//! itself is in the audit log (`app-source.reverted`, before and after
//! revisions) and the recording as the user's (`revertApp <revision>`) only
//! changes a row the catalogue's refresh wrote as found on disk. It is
//! refused when `expectedRevision` is not the registered current revision
//! (`APP_CONFLICT`, `details.reason = "stale-revision"`), when the old
//! revision's data contract would drop or change a migration the live
//! database has applied (data-worker's `MigrationDrift`, asked with the old
//! revision's contract; `APP_SCHEMA_INCOMPATIBLE` naming the migration), and
//! when it would widen who reads a table that holds rows (`crate::read_guard`). The new package is written and fsynced into a slot of
//! `<DOCS_ROOT>/.app-revert-staging/` and swapped with the live folder by
//! one `renameat2(RENAME_EXCHANGE)`, so a crash leaves the old package or
//! the new one, never half of either. Operational records (data, audit) are
//! never touched.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use sasha_package::source::PackageSource;
use sasha_package::validate::{Package, validate_source};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};
use sha2::Digest as _;
use studio_identity::actor::Actor;
use studio_store::blocking;
use studio_store::{RevisionFile, RevisionOrigin, RevisionSurface, StoreError};

use crate::diff::{Diff, diff_files};
use crate::package_dir::{SWAP_STAGING_DIR, swap_package};
use crate::state::Core;
use crate::status::PackageStatus;

fn invalid(message: impl Into<String>) -> AppError {
    AppError::new(ErrorCode::InputInvalid, message)
}

fn denied() -> AppError {
    AppError::new(
        ErrorCode::AccessDenied,
        "you do not manage this app (or it does not exist); ask an admin for manage access",
    )
}

fn internal<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> AppError {
    move |error| {
        let failure = AppError::from_code(ErrorCode::Internal);
        tracing::error!(diagnostic_id = %failure.diagnostic_id, %error, "{what}");
        failure
    }
}

/// A revision as the tools take it: 64 lowercase hex digits.
fn revision_argument(value: &str, name: &str) -> Result<String, AppError> {
    if sasha_contract::data::is_sha256_hex(value) {
        Ok(value.to_owned())
    } else {
        Err(invalid(format!(
            "{name} must be a revision: 64 lowercase hex digits, as listAppRevisions shows"
        )))
    }
}

/// What one history request asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Operation {
    /// `listAppRevisions`.
    List,
    /// `readAppRevisionFile`.
    Read { revision: String, path: String },
    /// `diffAppRevisions`.
    Diff { from: String, to: String },
    /// `revertApp`.
    Revert {
        revision: String,
        expected_revision: String,
    },
}

/// What one history request answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    Revisions(Vec<Revision>),
    File(RevisionFileContent),
    Diff(Diff),
    Reverted(Reverted),
}

/// One revision as the history lists it, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Revision {
    pub(crate) revision: String,
    pub(crate) uri: String,
    /// Unix seconds of its first recording.
    pub(crate) recorded_at: i64,
    pub(crate) user_id: Option<String>,
    pub(crate) username: Option<String>,
    /// `mcp`, `filesystem`, `seed` or `studio`.
    pub(crate) surface: String,
    pub(crate) summary: String,
    pub(crate) files: i64,
    pub(crate) bytes: i64,
    pub(crate) current: bool,
}

/// One file of an old revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RevisionFileContent {
    pub(crate) revision: String,
    pub(crate) path: String,
    /// The text, or a binary asset's bytes in base64 (then `encoding`).
    pub(crate) content: String,
    pub(crate) bytes: u64,
    /// sha256 hex of the bytes.
    pub(crate) version: String,
    pub(crate) encoding: Option<String>,
}

/// A revert done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reverted {
    pub(crate) revision: String,
    pub(crate) previous_revision: String,
    pub(crate) status: PackageStatus,
}

/// One history request of `actor` about `app_id`, whichever surface asked
/// (`CoreService.History` for the MCP tools, `crate::http` for Studio):
/// `surface` is what a revert records. Who may is the source tools' rule;
/// `None` (no operation named) is refused after it.
pub(crate) async fn answer(
    core: &Arc<Core>,
    actor: &Actor,
    app_id: &str,
    operation: Option<Operation>,
    surface: RevisionSurface,
) -> Result<Answer, AppError> {
    if sasha_contract::AppId::parse(app_id).is_err() {
        return Err(invalid("app must be an app id in lowercase kebab-case"));
    }
    crate::access::authorize_manager(core, actor, app_id).await?;
    Ok(match operation {
        Some(Operation::List) => Answer::Revisions(list(core, app_id).await?),
        Some(Operation::Read { revision, path }) => {
            let revision = revision_argument(&revision, "revision")?;
            Answer::File(read_file(core, app_id, &revision, &path).await?)
        }
        Some(Operation::Diff { from, to }) => {
            let from = revision_argument(&from, "from")?;
            let to = revision_argument(&to, "to")?;
            Answer::Diff(diff_revisions(core, app_id, &from, &to).await?)
        }
        Some(Operation::Revert {
            revision,
            expected_revision,
        }) => {
            let revision = revision_argument(&revision, "revision")?;
            let expected = revision_argument(&expected_revision, "expectedRevision")?;
            Answer::Reverted(revert(core, actor, app_id, &revision, &expected, surface).await?)
        }
        None => return Err(invalid("no history operation was given")),
    })
}

/// The revisions of `app_id` the ledger keeps, newest first.
pub(crate) async fn list(core: &Arc<Core>, app_id: &str) -> Result<Vec<Revision>, AppError> {
    let (store, app) = (core.store.clone(), app_id.to_owned());
    let revisions = blocking(move || {
        let entries = match store.revisions(&app) {
            Ok(entries) => entries,
            Err(StoreError::UnknownApp) => return Ok(Err(denied())),
            Err(other) => return Err(other),
        };
        let mut names: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            let username = match &entry.user_id {
                Some(id) => match names.get(id) {
                    Some(name) => name.clone(),
                    None => {
                        let name = store.user(id)?.map(|user| user.username);
                        names.insert(id.clone(), name.clone());
                        name
                    }
                },
                None => None,
            };
            out.push(Revision {
                revision: entry.revision,
                uri: entry.uri,
                recorded_at: entry.recorded_at,
                user_id: entry.user_id,
                username,
                surface: entry.surface.to_string(),
                summary: entry.summary,
                files: entry.files,
                bytes: entry.bytes,
                current: entry.current,
            });
        }
        Ok(Ok(out))
    })
    .await??;
    Ok(revisions)
}

/// One revert of an app, for the History panel: when, by whom (their
/// user name while they exist), from which revision to which.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RevertRecord {
    pub(crate) at: i64,
    pub(crate) user: Option<String>,
    pub(crate) from: String,
    pub(crate) to: String,
}

/// The reverts of `app_id`, newest first. The caller has been authorized
/// for the app's history already (`answer`).
pub(crate) async fn reverts(core: &Arc<Core>, app_id: &str) -> Result<Vec<RevertRecord>, AppError> {
    let (store, app) = (core.store.clone(), app_id.to_owned());
    blocking(move || {
        let mut names: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut out = Vec::new();
        for entry in store.app_reverts(&app)? {
            let user = match names.get(&entry.user_id) {
                Some(name) => name.clone(),
                None => {
                    let name = store.user(&entry.user_id)?.map(|user| user.username);
                    names.insert(entry.user_id.clone(), name.clone());
                    name
                }
            };
            out.push(RevertRecord {
                at: entry.at,
                user,
                from: entry.from,
                to: entry.to,
            });
        }
        Ok(out)
    })
    .await
}

/// The refusal for a revision the ledger does not hold: pruned (it was once
/// the app's) or never the app's (hidden).
async fn missing_revision(core: &Arc<Core>, app_id: &str, revision: &str) -> AppError {
    let (store, app, wanted) = (core.store.clone(), app_id.to_owned(), revision.to_owned());
    match blocking(move || store.revision_was_registered(&app, &wanted)).await {
        Ok(true) => AppError::new(
            ErrorCode::RevisionUnavailable,
            format!(
                "revision {revision} is no longer kept (the retention policy removed it); choose one listAppRevisions shows"
            ),
        ),
        Ok(false) => AppError::new(
            ErrorCode::NotFound,
            format!("this app has no revision {revision}; listAppRevisions shows its revisions"),
        ),
        Err(error) => error,
    }
}

/// The files of `revision` with their bytes, by path.
pub(crate) async fn revision_contents(
    core: &Arc<Core>,
    app_id: &str,
    revision: &str,
) -> Result<Vec<(RevisionFile, Vec<u8>)>, AppError> {
    let (store, app, wanted) = (core.store.clone(), app_id.to_owned(), revision.to_owned());
    let found = blocking(move || {
        let files = match store.revision_files(&app, &wanted) {
            Ok(Some(files)) => files,
            Ok(None) => return Ok(None),
            Err(StoreError::UnknownApp) => return Ok(None),
            Err(other) => return Err(other),
        };
        let mut out = Vec::with_capacity(files.len());
        for file in files {
            // A revision pruned between the two reads is missing, like one
            // pruned before.
            let Some(bytes) = store.revision_file(&app, &wanted, &file.path)? else {
                return Ok(None);
            };
            out.push((file, bytes));
        }
        Ok(Some(out))
    })
    .await?;
    match found {
        Some(files) => Ok(files),
        None => Err(missing_revision(core, app_id, revision).await),
    }
}

async fn read_file(
    core: &Arc<Core>,
    app_id: &str,
    revision: &str,
    path: &str,
) -> Result<RevisionFileContent, AppError> {
    crate::source::check_path(path).map_err(|rule| invalid(rule.to_string()))?;
    let (store, app, wanted, file) = (
        core.store.clone(),
        app_id.to_owned(),
        revision.to_owned(),
        path.to_owned(),
    );
    let found = blocking(move || {
        let Some(files) = store
            .revision_files(&app, &wanted)
            .or_else(|error| match error {
                StoreError::UnknownApp => Ok(None),
                other => Err(other),
            })?
        else {
            return Ok(None);
        };
        if !files.iter().any(|listed| listed.path == file) {
            return Ok(Some(None));
        }
        Ok(Some(store.revision_file(&app, &wanted, &file)?))
    })
    .await?;
    let bytes = match found {
        None => return Err(missing_revision(core, app_id, revision).await),
        Some(None) => {
            return Err(AppError::new(
                ErrorCode::RecordNotFound,
                format!("{path} does not exist"),
            ));
        }
        Some(Some(bytes)) => bytes,
    };
    let version = hex::encode(sha2::Sha256::digest(&bytes));
    let size = bytes.len() as u64;
    let (content, encoding) = if crate::source::is_binary(path) {
        (
            base64::engine::general_purpose::STANDARD.encode(&bytes),
            Some(crate::source::BASE64.to_owned()),
        )
    } else {
        (
            String::from_utf8(bytes).map_err(|_| invalid(format!("{path} is not UTF-8 text")))?,
            None,
        )
    };
    Ok(RevisionFileContent {
        revision: revision.to_owned(),
        path: path.to_owned(),
        content,
        bytes: size,
        version,
        encoding,
    })
}

async fn diff_revisions(
    core: &Arc<Core>,
    app_id: &str,
    from: &str,
    to: &str,
) -> Result<Diff, AppError> {
    let before = revision_contents(core, app_id, from).await?;
    let after = revision_contents(core, app_id, to).await?;
    Ok(diff_files(from, to, &before, &after))
}

/// The package the files of a revision make, validated now.
fn package_of(app_id: &str, files: &[(RevisionFile, Vec<u8>)]) -> Result<Package, AppError> {
    let mut source = PackageSource::default();
    for (file, bytes) in files {
        source.set(&file.path, Some(bytes));
    }
    let validation = validate_source(app_id, source);
    match validation.package {
        Some(package) => Ok(package),
        None => {
            let diagnostics: Vec<Value> = validation
                .diagnostics
                .iter()
                .map(|problem| {
                    json!({"file": problem.file, "line": problem.line, "code": problem.code, "reason": problem.reason})
                })
                .collect();
            Err(AppError::new(
                ErrorCode::InputInvalid,
                "that revision no longer validates with this platform, so it cannot be made live again",
            )
            .with_details(json!({"diagnostics": diagnostics})))
        }
    }
}

async fn revert(
    core: &Arc<Core>,
    actor: &Actor,
    app_id: &str,
    revision: &str,
    expected: &str,
    surface: RevisionSurface,
) -> Result<Reverted, AppError> {
    let (store, app) = (core.store.clone(), app_id.to_owned());
    let current = blocking(move || store.registered_app(&app))
        .await?
        .map(|registered| registered.current_revision)
        .ok_or_else(denied)?;
    if current != expected {
        return Err(AppError::new(
            ErrorCode::Conflict,
            format!(
                "expectedRevision is not the app's current revision (it is {current}); \
                 call listAppRevisions again and decide on the current state"
            ),
        )
        .with_details(json!({"reason": "stale-revision", "currentRevision": current})));
    }
    let files = revision_contents(core, app_id, revision).await?;
    let package = package_of(app_id, &files)?;
    crate::drift::check_migrations(core, app_id, &package, "reverting").await?;
    crate::read_guard::check_reads(core, app_id, &package, "reverting").await?;

    let changed_at = core.store.timestamp();
    let apps_dir = core.catalogue.apps_dir().to_owned();
    let staging = apps_dir
        .parent()
        .map(|docs| docs.join(SWAP_STAGING_DIR))
        .unwrap_or_else(|| apps_dir.join(SWAP_STAGING_DIR));
    let written: BTreeMap<String, Vec<u8>> = files
        .into_iter()
        .map(|(file, bytes)| (file.path, bytes))
        .collect();
    let (id, tree) = (app_id.to_owned(), core.source.clone());
    // Under the source tools' lock of this app: a write racing the revert
    // lands before the swap (and is replaced) or after it, never inside it.
    let (store, packages) = (core.store.clone(), core.packages.clone());
    tokio::task::spawn_blocking(move || {
        tree.with_app_lock(&id, || {
            let before = packages.overtaken(&id);
            swap_package(&apps_dir, &staging, &id, &written)
                .map(|()| crate::registry::settle_change(&store, &packages, &id, before))
        })
    })
    .await
    .map_err(|_| AppError::from_code(ErrorCode::Internal))?
    .map_err(internal("reverting the package's files failed"))??;

    let (store, app, user, before, after) = (
        core.store.clone(),
        app_id.to_owned(),
        actor.user_id.clone(),
        current.clone(),
        revision.to_owned(),
    );
    blocking(move || store.record_app_reverted(&app, &user, &before, &after)).await?;
    tracing::info!(app_id = %app_id, from = %current, to = %revision, "app reverted");
    let status = crate::status::status(core, app_id).await;
    let origin = RevisionOrigin::authored(
        surface,
        &actor.user_id,
        format!("revertApp {revision}"),
        changed_at,
    );
    crate::ledger::record_authored(core, app_id, origin).await;
    Ok(Reverted {
        revision: revision.to_owned(),
        previous_revision: current,
        status,
    })
}

#[cfg(test)]
mod tests;
