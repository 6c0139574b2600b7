//! The tool RPCs of `CoreService` as in-process functions: each converts
//! its request ([`super::convert`]), calls the domain function behind the
//! MCP tool (the one a Studio route calls too) and converts the answer. The
//! service's handlers are these, and the domain's tests call them to drive
//! a tool exactly as the gateway does.
//!
//! What it must never do: check anything the domain function does not (a
//! refusal belongs to the function, so both surfaces give it).

use std::sync::Arc;

use sasha_proto::AppError;
use sasha_proto::pb;
use studio_store::{PrincipalKind, RevisionSurface, Scope};

use super::convert;
use crate::create::Creator;
use crate::state::Core;

/// `CoreService.SourceFiles`: one source tool for the request's principal.
pub(crate) async fn source_files(
    core: &Arc<Core>,
    principal: Option<&pb::Principal>,
    operation: &str,
    app_id: &str,
    arguments_json: &str,
) -> Result<pb::SourceFilesReply, AppError> {
    let actor = convert::actor(principal)?;
    let reply = crate::source_tools::run(core, &actor, operation, app_id, arguments_json).await?;
    Ok(convert::source_reply(app_id, reply))
}

/// `CoreService.History`.
pub(crate) async fn history(
    core: &Arc<Core>,
    request: pb::HistoryRequest,
) -> Result<pb::HistoryReply, AppError> {
    let actor = convert::actor(request.principal.as_ref())?;
    let operation = convert::history_operation(request.operation);
    let answer = crate::history::answer(
        core,
        &actor,
        &request.app_id,
        operation,
        RevisionSurface::Mcp,
    )
    .await?;
    Ok(convert::history_reply(&request.app_id, answer))
}

/// `CoreService.Draft`.
pub(crate) async fn draft(
    core: &Arc<Core>,
    request: pb::DraftRequest,
) -> Result<pb::DraftReply, AppError> {
    let actor = convert::actor(request.principal.as_ref())?;
    let operation = convert::draft_operation(request.operation);
    let answer = crate::drafts::answer(core, &actor, &request.app_id, operation).await?;
    Ok(convert::draft_reply(&request.app_id, answer))
}

/// `CoreService.AppLifecycle`.
pub(crate) async fn lifecycle(
    core: &Arc<Core>,
    request: pb::AppLifecycleRequest,
) -> Result<pb::AppLifecycleReply, AppError> {
    let actor = convert::actor(request.principal.as_ref())?;
    let operation = convert::lifecycle_operation(&request);
    let outcome = crate::lifecycle::change(core, &actor, &request.app_id, operation).await?;
    Ok(convert::lifecycle_reply(outcome))
}

/// `CoreService.CreateApp`: the gateway's `createApp` for its principal.
pub(crate) async fn create(
    core: &Arc<Core>,
    request: pb::CreateAppRequest,
) -> Result<pb::CreateAppReply, AppError> {
    let actor = convert::actor(request.principal.as_ref())?;
    // Whether the credential may write app source at all (both scopes, not
    // an API key); the role is read again from the store.
    let writes = !actor.is(PrincipalKind::ApiKey)
        && actor.has(Scope::AppsInvoke)
        && actor.has(Scope::AppsWrite);
    let creator = Creator {
        user_id: actor.user_id,
        writes,
        surface: RevisionSurface::Mcp,
    };
    let asked = (
        request.app_id.as_str(),
        request.name.as_str(),
        request.description.as_str(),
        request.with_table,
    );
    let created = crate::create::create(core, creator, asked).await?;
    Ok(convert::created(created))
}

/// `CoreService.MemberApps`.
pub(crate) async fn member_apps(
    core: &Arc<Core>,
    request: pb::MemberAppsRequest,
) -> Result<pb::MemberAppsReply, AppError> {
    let actor = convert::actor(request.principal.as_ref())?;
    let operation = convert::member_operation(request.operation);
    let reply = crate::member_apps::answer(core, &actor, operation).await?;
    Ok(convert::member_reply(reply))
}
