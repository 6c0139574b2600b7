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
//! `crate::ledger`). File work itself is [`crate::source::SourceTree`]'s.

use std::sync::Arc;

use sasha_proto::{AppError, ErrorCode};
use serde::Deserialize;
use studio_identity::actor::Actor;
use studio_store::blocking;
use studio_store::{RevisionOrigin, RevisionSurface};

use crate::access::authorize_manager;
use crate::drafts::DraftInfo;
use crate::read_guard::ReadGuard;
use crate::source::FileEntry;
use crate::state::Core;
use crate::status::{PackageStatus, status};

mod draft;

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

/// What one source tool answers; with `draft`, the draft it read or changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SourceReply {
    /// `listAppFiles`.
    List {
        status: PackageStatus,
        files: Vec<FileEntry>,
        draft: Option<DraftInfo>,
    },
    /// `readAppFile`: the content (base64 for a binary asset, see
    /// `encoding`), the file's size and its version.
    Read {
        path: String,
        content: String,
        bytes: u64,
        version: String,
        encoding: Option<String>,
        draft: Option<DraftInfo>,
    },
    /// `checkApp`.
    Check {
        status: PackageStatus,
        draft: Option<DraftInfo>,
    },
    /// `writeAppFile`, `editAppFile`, `deleteAppFile`: the version after
    /// (absent when deleted) and before (absent when created).
    Change {
        status: PackageStatus,
        path: String,
        version: Option<String>,
        previous_version: Option<String>,
        draft: Option<DraftInfo>,
    },
}

/// Runs one source tool for `actor`; the answer is what the gateway turns
/// into the tool's `structuredContent`.
pub(crate) async fn run(
    core: &Arc<Core>,
    actor: &Actor,
    operation: &str,
    app_id: &str,
    arguments_json: &str,
) -> Result<SourceReply, AppError> {
    if arguments_json.len() > 2 * 1024 * 1024 {
        return Err(AppError::new(
            ErrorCode::ResourceLimit,
            "the arguments are too large",
        ));
    }
    let arguments: Arguments = serde_json::from_str(arguments_json)
        .map_err(|error| invalid(format!("the arguments are not valid: {error}")))?;
    if arguments.app != app_id || sasha_contract::AppId::parse(app_id).is_err() {
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
    authorize_manager(core, actor, app_id).await?;
    if arguments.draft == Some(true) {
        return draft::source_operation(core, actor, operation, app_id, &arguments).await;
    }
    let tree = core.source.clone();
    let app = app_id.to_owned();
    let guard = if matches!(operation, "writeAppFile" | "editAppFile" | "deleteAppFile") {
        ReadGuard::load(core, app_id).await?
    } else {
        ReadGuard::default()
    };
    // A change starts from the package's head (a change another replica
    // made is taken first) and is settled as the new head before its answer.
    let packages = core.packages.clone();
    let settle = {
        let (store, packages, tree, app) = (
            core.store.clone(),
            packages.clone(),
            tree.clone(),
            app.clone(),
        );
        move |before: u64| {
            tree.with_app_lock(&app, || {
                crate::registry::settle_change(&store, &packages, &app, before)
            })
        }
    };
    if matches!(operation, "listAppFiles" | "readAppFile" | "checkApp") {
        // What another replica changed a moment ago is read, not this
        // folder's older files (the follower would take it within a second).
        let (store, packages, tree, app) = (
            core.store.clone(),
            packages.clone(),
            tree.clone(),
            app.clone(),
        );
        let settled = tokio::task::spawn_blocking(move || {
            tree.with_app_lock(&app, || {
                crate::registry::settle_app(&store, &packages, &app)
            })
        })
        .await
        .map_err(|_| AppError::from_code(ErrorCode::Internal))??;
        if matches!(
            settled,
            crate::package_sync::Settled::Took(_) | crate::package_sync::Settled::Overtaken(_)
        ) {
            crate::registry::refresh_catalogue(core).await;
        }
    }
    let vet_tree = tree.clone();
    let vet_app = app.clone();
    let vet = move |path: &str, bytes: Option<&[u8]>| vet(&guard, &vet_tree, &vet_app, path, bytes);
    let change = match operation {
        "listAppFiles" => {
            let files = tokio::task::spawn_blocking(move || tree.list(&app))
                .await
                .map_err(|_| AppError::from_code(ErrorCode::Internal))??;
            let status = status(core, app_id).await;
            return Ok(SourceReply::List {
                status,
                files,
                draft: None,
            });
        }
        "readAppFile" => {
            let path = required(arguments.path, "path")?;
            let file = tokio::task::spawn_blocking(move || tree.read(&app, &path))
                .await
                .map_err(|_| AppError::from_code(ErrorCode::Internal))??;
            return Ok(SourceReply::Read {
                path: file.path,
                content: file.content,
                bytes: file.bytes,
                version: file.version,
                encoding: file.encoding.map(str::to_owned),
                draft: None,
            });
        }
        "checkApp" => {
            let status = status(core, app_id).await;
            return Ok(SourceReply::Check {
                status,
                draft: None,
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
                let before = packages.overtaken(&app);
                settle(before)?;
                let change = tree.write(&app, &path, &content, expected.as_deref(), &vet)?;
                settle(before).map(|()| change)
            })
            .await
        }
        "editAppFile" => {
            let path = required(arguments.path, "path")?;
            let old = required(arguments.old_string, "oldString")?;
            let new = required(arguments.new_string, "newString")?;
            let expected = required(arguments.expected_version, "expectedVersion")?;
            tokio::task::spawn_blocking(move || {
                let before = packages.overtaken(&app);
                settle(before)?;
                let change = tree.edit(&app, &path, &old, &new, &expected, &vet)?;
                settle(before).map(|()| change)
            })
            .await
        }
        "deleteAppFile" => {
            let path = required(arguments.path, "path")?;
            let expected = required(arguments.expected_version, "expectedVersion")?;
            tokio::task::spawn_blocking(move || {
                let before = packages.overtaken(&app);
                settle(before)?;
                let change = tree.delete(&app, &path, &expected, &vet)?;
                settle(before).map(|()| change)
            })
            .await
        }
        _ => return Err(invalid("unknown source operation")),
    }
    .map_err(|_| AppError::from_code(ErrorCode::Internal))??;
    let changed_at = core.store.timestamp();
    let (store, app, user, audited) = (
        core.store.clone(),
        app_id.to_owned(),
        actor.user_id.clone(),
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
    let origin =
        RevisionOrigin::authored(RevisionSurface::Mcp, &actor.user_id, summary, changed_at);
    crate::ledger::record_authored(core, app_id, origin).await;
    Ok(SourceReply::Change {
        status,
        path: change.path,
        version: change.after,
        previous_version: change.before,
        draft: None,
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
