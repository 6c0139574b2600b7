//! Who manages an app: the access rule of the source tools, which the
//! history, draft and preview tools share. A user credential (never an API
//! key) holding `apps:invoke` + `apps:write`, whose user, read again from
//! the store, is admin or staff and holds `manage` on the app.
//!
//! What it must never do: trust the role or grant the caller presents
//! (both are read fresh), or tell an app that does not exist from one the
//! caller may not manage (the same `APP_ACCESS_DENIED`); a withdrawn app is
//! refused as withdrawn.

use std::sync::Arc;

use sasha_proto::{AppError, ErrorCode};
use studio_identity::actor::Actor;
use studio_store::{AppAccess, PrincipalKind, Scope, UserRole, blocking};

use crate::state::Core;

fn denied() -> AppError {
    AppError::new(
        ErrorCode::AccessDenied,
        "you do not manage this app (or it does not exist); ask an admin for manage access",
    )
}

/// The source tools' access rule, which the history tools share: a user
/// credential (not an API key) holding `apps:invoke` + `apps:write`, whose
/// user, read again, is admin or staff and manages the app. A withdrawn app
/// is refused as withdrawn rather than as "no access".
pub(crate) async fn authorize_manager(
    core: &Arc<Core>,
    actor: &Actor,
    app_id: &str,
) -> Result<(), AppError> {
    let scoped = !actor.is(PrincipalKind::ApiKey)
        && actor.has(Scope::AppsInvoke)
        && actor.has(Scope::AppsWrite)
        && matches!(actor.role, Some(UserRole::Admin | UserRole::Staff));
    if !scoped {
        return Err(denied());
    }
    let (store, app, user) = (core.store.clone(), app_id.to_owned(), actor.user_id.clone());
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
