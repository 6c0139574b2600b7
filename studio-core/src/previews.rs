//! Who may preview a draft and what a preview serves: the draft's
//! validated package under its preview id, and the scope of live rows its
//! scratch copy keeps (`sasha_contract::data::PreviewScope`). Above both
//! drafts and member apps, since a member app's author previews too.
//!
//! What it must never do: serve a preview to anyone the live app would not
//! let manage it (or its author), or keep rows in a preview's copy that the
//! previewer cannot read live.

use std::sync::Arc;

use sasha_contract::data::{PreviewScope, is_preview_id};
use sasha_package::validate::Package;
use sasha_proto::AppError;
use studio_identity::actor::Actor;
use studio_store::AppAccess;

use crate::catalogue::{AppEntry, Snapshot};
use crate::state::Core;

/// Who may preview a draft: the source tools' callers (admin or staff with
/// `manage`), and a member app's author (App Studio's Preview) unless a
/// moderator disabled the app, which is refused saying so.
pub(crate) async fn authorize_previewer(
    core: &Arc<Core>,
    actor: &Actor,
    app_id: &str,
) -> Result<(), AppError> {
    match crate::access::authorize_manager(core, actor, app_id).await {
        Ok(()) => Ok(()),
        Err(error) => match crate::member_apps::authored_by(core, actor, app_id).await? {
            true => Ok(()),
            false => Err(error),
        },
    }
}

/// The draft's validated package for a preview `preview_id` of `app_id`,
/// if the actor manages the app, the draft is that preview's and it
/// validates. Anything else is `None` (the caller answers as for an app it
/// cannot see).
pub(crate) async fn preview_package(
    core: &Arc<Core>,
    actor: &Actor,
    app_id: &str,
    preview_id: &str,
) -> Option<Arc<Package>> {
    if !is_preview_id(preview_id) || sasha_contract::AppId::parse(app_id).is_err() {
        return None;
    }
    authorize_previewer(core, actor, app_id).await.ok()?;
    let draft = crate::drafts::draft_of(core, app_id).await.ok()??;
    if draft.preview_id != preview_id {
        return None;
    }
    crate::drafts::validated(core, app_id)
        .await
        .ok()?
        .1
        .package
        .clone()
}

/// What `actor` may read of the live data of `app_id`, which their
/// preview's scratch copy keeps (`sasha_contract::data::PreviewScope`): the
/// live contract's read rule under their live grant. No live grant, no valid
/// live package or no data contract keeps nothing: a draft's author, its
/// reviewer or anyone else previewing sees through the draft only rows they
/// can already read.
pub(crate) async fn preview_scope(
    core: &Arc<Core>,
    snapshot: &Snapshot,
    actor: &Actor,
    app_id: &str,
) -> Result<PreviewScope, AppError> {
    let live = match snapshot.apps.get(app_id) {
        Some(AppEntry::Valid(package)) => package.data.as_ref().map(|contract| &contract.tables),
        _ => None,
    };
    let grant = core
        .granted_apps(&actor.user_id)
        .await?
        .get(app_id)
        .copied();
    Ok(PreviewScope::of_live(
        live,
        grant.map(|access| access == AppAccess::Manage),
    ))
}
