//! Withdrawing, restoring and deleting an app: `CoreService.AppLifecycle`,
//! the gateway's `withdrawApp`, `restoreApp` and `deleteApp`.
//!
//! Who may: a user credential (never an API key) holding both `apps:invoke`
//! and `apps:write` whose user, read again from the store, is an admin.
//! Staff and members are `APP_ACCESS_DENIED`; an id never registered is
//! `APP_NOT_FOUND` (only an admin gets that far).
//!
//! - **Withdraw** sets `app_registry.withdrawn_at` (`app.withdrawn`). From
//!   the next call on, [`studio_store::Store::access`] answers nothing for
//!   the app, so its opener, tools and resources are gone from every
//!   caller's `GetCatalogue`, `ListApps`, `GetResource` and `/api/apps`, and
//!   the source and history tools refuse it with `APP_OPERATION_UNAVAILABLE`
//!   (`details.reason = "withdrawn"`). Its package, data, ledger and grants
//!   stay. The flag is in the core database, so it holds on every replica
//!   and after a restart.
//! - **Restore** clears the flag (`app.restored`): everything comes back as
//!   it was, grants included. A deleted app cannot be restored.
//! - **Delete** needs a withdrawn app (else `APP_CONFLICT`,
//!   `details.reason = "not-withdrawn"`). Its package folder is renamed into
//!   a slot of `DOCS_ROOT/.app-delete-staging/` (outside the apps folder, so
//!   the catalogue never sees half a package), the deletion is audited
//!   (`app.deleted`; an audit failure renames it back), then the slot is
//!   removed. With `deleteData` and `confirmAppId` equal to the id (anything
//!   else is `APP_INPUT_INVALID`, `details.field = "confirmAppId"`), the data
//!   file goes too: data-worker, the only process that opens app data,
//!   backs it up into `APP_DATA_ROOT/.deleted-app-backups/` and removes it
//!   (`DataService.RemoveAppData`), then `app.data-deleted` records the
//!   backup's name. The registry row, ledger and audit stay, and the id stays
//!   taken (`create.rs` refuses a registered id).

use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use sasha_proto::{AppError, ErrorCode};
use serde_json::json;
use studio_identity::actor::Actor;

use crate::state::Core;
use studio_store::blocking;
use studio_store::{LifecycleRefusal, PrincipalKind, Scope, UserRole};

/// The folder below `DOCS_ROOT` a deleted package is renamed into before it
/// is removed (a sibling of the apps folder).
pub(crate) const DELETE_STAGING_DIR: &str = ".app-delete-staging";

/// Serialises deletions in this process: the staging folder is cleaned of
/// leftovers under it.
static STAGING: Mutex<()> = Mutex::new(());

/// The clear refusal of the source and history tools for a withdrawn app.
pub(crate) fn withdrawn(app_id: &str) -> AppError {
    AppError::new(
        ErrorCode::OperationUnavailable,
        format!(
            "the app {app_id} is withdrawn: its tools, resources and source are unavailable until an admin restores it with restoreApp"
        ),
    )
    .with_details(json!({ "app": app_id, "reason": "withdrawn" }))
}

/// `Err(withdrawn)` when `app_id` is withdrawn.
pub(crate) async fn refuse_if_withdrawn(core: &Arc<Core>, app_id: &str) -> Result<(), AppError> {
    let (store, app) = (core.store.clone(), app_id.to_owned());
    let state = blocking(move || store.lifecycle(&app)).await?;
    if state.is_some_and(|state| state.is_withdrawn()) {
        return Err(withdrawn(app_id));
    }
    Ok(())
}

fn denied(message: &str) -> AppError {
    AppError::new(ErrorCode::AccessDenied, message.to_owned())
}

fn refused(app_id: &str, refusal: LifecycleRefusal) -> AppError {
    match refusal {
        LifecycleRefusal::UnknownApp => unknown(app_id),
        LifecycleRefusal::NotWithdrawn => AppError::new(
            ErrorCode::Conflict,
            format!(
                "the app {app_id} is not withdrawn: withdraw it with withdrawApp before deleting it"
            ),
        )
        .with_details(json!({ "app": app_id, "reason": "not-withdrawn" })),
        LifecycleRefusal::PackageDeleted => AppError::new(
            ErrorCode::Conflict,
            format!("the app {app_id} was deleted; a deleted app cannot be restored"),
        )
        .with_details(json!({ "app": app_id, "reason": "deleted" })),
    }
}

fn unknown(app_id: &str) -> AppError {
    AppError::new(
        ErrorCode::NotFound,
        format!("there is no registered app {app_id}"),
    )
    .with_details(json!({ "app": app_id }))
}

/// A change of an app's lifecycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Operation {
    Withdraw,
    Restore,
    /// Delete the package, and with `delete_data` its data too, which needs
    /// `confirm_app_id` to repeat the app's id.
    Delete {
        delete_data: bool,
        confirm_app_id: String,
    },
}

/// Where an app's lifecycle stands after a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) app: String,
    /// Whether this call changed anything (false: it already was so).
    pub(crate) changed: bool,
    pub(crate) withdrawn: bool,
    pub(crate) package_deleted: bool,
    pub(crate) data_deleted: bool,
    /// When this call deleted the data file: its backup, relative to
    /// `APP_DATA_ROOT` (absent when the app had no data file).
    pub(crate) data_backup: Option<String>,
}

/// Withdraws, restores or deletes `app_id` for `actor` (the MCP tools
/// `withdrawApp`, `restoreApp`, `deleteApp` and Studio's controls); `None`
/// (no operation named) is refused after every check of who may.
pub(crate) async fn change(
    core: &Arc<Core>,
    actor: &Actor,
    app_id: &str,
    operation: Option<Operation>,
) -> Result<Outcome, AppError> {
    let scoped = !actor.is(PrincipalKind::ApiKey)
        && actor.has(Scope::AppsInvoke)
        && actor.has(Scope::AppsWrite);
    if !scoped {
        return Err(denied(
            "withdrawing, restoring or deleting an app needs a user's credential with the apps:invoke and apps:write scopes",
        ));
    }
    let (store, user) = (core.store.clone(), actor.user_id.clone());
    let admin = blocking(move || {
        Ok(store
            .user(&user)?
            .is_some_and(|user| user.role == UserRole::Admin))
    })
    .await?;
    if !admin {
        return Err(denied(
            "only an admin may withdraw, restore or delete an app",
        ));
    }
    if sasha_contract::AppId::parse(app_id).is_err() {
        return Err(AppError::new(
            ErrorCode::InputInvalid,
            "app must be an app id in lowercase kebab-case",
        )
        .with_details(json!({ "field": "app" })));
    }
    // A member app is moderated in App Studio: its package is not a folder
    // this module could move, and its author must keep seeing it listed.
    let (store, app) = (core.store.clone(), app_id.to_owned());
    if blocking(move || store.member_app(&app)).await?.is_some() {
        return Err(AppError::new(
            ErrorCode::OperationUnavailable,
            format!(
                "{app_id} is a member app: disable or delete it under Member apps in App Studio"
            ),
        )
        .with_details(json!({"reason": "member-app"})));
    }
    let actor = actor.user_id.clone();
    match operation {
        Some(Operation::Withdraw) => {
            let (store, app, who) = (core.store.clone(), app_id.to_owned(), actor.clone());
            let changed = blocking(move || store.withdraw_app(&app, &who))
                .await?
                .map_err(|refusal| refused(app_id, refusal))?;
            tracing::info!(app_id, changed, "app withdrawn");
            reply(core, app_id, changed, None).await
        }
        Some(Operation::Restore) => {
            let (store, app, who) = (core.store.clone(), app_id.to_owned(), actor.clone());
            let changed = blocking(move || store.restore_app(&app, &who))
                .await?
                .map_err(|refusal| refused(app_id, refusal))?;
            tracing::info!(app_id, changed, "app restored");
            reply(core, app_id, changed, None).await
        }
        Some(Operation::Delete {
            delete_data,
            confirm_app_id,
        }) => delete(core, app_id, &actor, delete_data, &confirm_app_id).await,
        None => Err(AppError::new(
            ErrorCode::InputInvalid,
            "operation must be withdraw, restore or delete",
        )),
    }
}

async fn reply(
    core: &Arc<Core>,
    app_id: &str,
    changed: bool,
    data_backup: Option<String>,
) -> Result<Outcome, AppError> {
    let (store, app) = (core.store.clone(), app_id.to_owned());
    let state = blocking(move || store.lifecycle(&app))
        .await?
        .ok_or_else(|| unknown(app_id))?;
    Ok(Outcome {
        app: app_id.to_owned(),
        changed,
        withdrawn: state.is_withdrawn(),
        package_deleted: state.package_deleted_at.is_some(),
        data_deleted: state.data_deleted_at.is_some(),
        data_backup,
    })
}

async fn delete(
    core: &Arc<Core>,
    app_id: &str,
    actor: &str,
    delete_data: bool,
    confirm_app_id: &str,
) -> Result<Outcome, AppError> {
    let (store, app) = (core.store.clone(), app_id.to_owned());
    let state = blocking(move || store.lifecycle(&app))
        .await?
        .ok_or_else(|| unknown(app_id))?;
    if !state.is_withdrawn() {
        return Err(refused(app_id, LifecycleRefusal::NotWithdrawn));
    }
    if delete_data && confirm_app_id != app_id {
        return Err(AppError::new(
            ErrorCode::InputInvalid,
            format!(
                "deleting the data of {app_id} needs confirmAppId equal to the app id ({app_id}) as the second confirmation; nothing was deleted"
            ),
        )
        .with_details(json!({ "field": "confirmAppId" })));
    }
    let mut changed = false;
    if state.package_deleted_at.is_none() {
        remove_package(core, app_id, actor).await?;
        changed = true;
    }
    let mut data_backup = None;
    if delete_data && state.data_deleted_at.is_none() {
        let removed = crate::data_worker::remove_app_data(&core.data, app_id).await?;
        let backup = removed.backup.clone();
        let (store, app, who, recorded) = (
            core.store.clone(),
            app_id.to_owned(),
            actor.to_owned(),
            backup.clone().unwrap_or_else(|| "none".to_owned()),
        );
        blocking(move || store.record_app_data_deleted(&app, &who, &recorded))
            .await?
            .map_err(|refusal| refused(app_id, refusal))?;
        tracing::info!(app_id, backup = ?backup, bytes = removed.bytes, "app data deleted");
        data_backup = backup;
        changed = true;
    }
    reply(core, app_id, changed, data_backup).await
}

/// Moves `apps/<id>` out of the apps folder, audits `app.deleted`, then
/// removes it; an audit failure puts the package back. A package already
/// gone from disk is recorded as deleted all the same.
async fn remove_package(core: &Arc<Core>, app_id: &str, actor: &str) -> Result<(), AppError> {
    let apps_dir = core.catalogue.apps_dir().to_owned();
    let staging = apps_dir
        .parent()
        .map(|docs| docs.join(DELETE_STAGING_DIR))
        .unwrap_or_else(|| apps_dir.join(DELETE_STAGING_DIR));
    let (tree, id, apps, slots) = (
        core.source.clone(),
        app_id.to_owned(),
        apps_dir.clone(),
        staging.clone(),
    );
    let moved = tokio::task::spawn_blocking(move || {
        tree.with_app_lock(&id, || move_out(&apps, &slots, &id))
    })
    .await
    .map_err(|_| AppError::from_code(ErrorCode::Internal))?
    .map_err(|error| {
        let failure = AppError::new(ErrorCode::Internal, "the app's package could not be removed");
        tracing::error!(diagnostic_id = %failure.diagnostic_id, app_id, %error, "app deletion failed");
        failure
    })?;
    let (store, app, who) = (core.store.clone(), app_id.to_owned(), actor.to_owned());
    let recorded = blocking(move || store.record_app_deleted(&app, &who)).await;
    let recorded = match recorded {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(refusal)) => Err(refused(app_id, refusal)),
        Err(error) => Err(error),
    };
    if let Err(error) = recorded {
        if let Some(slot) = &moved {
            let (slot, dest) = (slot.join(app_id), apps_dir.join(app_id));
            let undone = tokio::task::spawn_blocking(move || {
                crate::package_dir::rename_no_replace(&slot, &dest)
            })
            .await;
            if !matches!(undone, Ok(Ok(()))) {
                tracing::error!(
                    app_id,
                    "a deleted package whose audit failed could not be put back"
                );
            }
        }
        return Err(error);
    }
    if let Some(slot) = moved {
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(slot)).await;
    }
    crate::registry::refresh_catalogue(core).await;
    tracing::info!(app_id, "app package deleted");
    Ok(())
}

/// Renames `apps_dir/<id>` into a fresh slot of `staging` and answers the
/// slot; `None` when there is no such folder. Leftover slots of an
/// interrupted deletion are removed first.
fn move_out(apps_dir: &Path, staging: &Path, id: &str) -> io::Result<Option<std::path::PathBuf>> {
    let _serial = STAGING.lock().unwrap_or_else(PoisonError::into_inner);
    let package = apps_dir.join(id);
    match std::fs::symlink_metadata(&package) {
        Ok(_) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    }
    match std::fs::symlink_metadata(staging) {
        Ok(metadata) if metadata.is_dir() => {
            for entry in std::fs::read_dir(staging)? {
                let path = entry?.path();
                tracing::info!(leftover = %path.display(), "removing the leftover of an interrupted app deletion");
                std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path))?;
            }
        }
        Ok(_) => {
            return Err(io::Error::other(format!(
                "{} is not a folder",
                staging.display()
            )));
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => std::fs::create_dir(staging)?,
        Err(error) => return Err(error),
    }
    let slot = staging.join(format!("{id}-{:016x}", rand::random::<u64>()));
    std::fs::create_dir(&slot)?;
    crate::package_dir::rename_no_replace(&package, &slot.join(id))?;
    crate::package_dir::sync_dir(apps_dir)?;
    Ok(Some(slot))
}

#[cfg(test)]
mod tests;
