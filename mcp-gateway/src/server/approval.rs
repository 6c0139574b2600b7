//! The person's yes to a change a model asks for: one state machine for
//! table and action mutations ([`SashaMcp::gate`]) and for the platform and
//! member app changes studio-core holds until the person approves them
//! ([`SashaMcp::approved`]).
//!
//! A change moves through these steps, each written once here:
//!
//! 1. A chat session is refused: its client is driven by the model, which
//!    never confirms its own change ([`refuse_chat`]).
//! 2. A sessionless (2026-07-28) client's answer to the question asked
//!    earlier in this call's exchange (`requestState`, a core confirmation
//!    token, with `inputResponses.confirm`) is redeemed when it is an
//!    explicit yes, and otherwise voids the token ([`SashaMcp::answer`]).
//! 3. Otherwise the person is asked ([`SashaMcp::ask`]): a sessionless
//!    client gets an `input_required` result whose `requestState` is a token
//!    bound to the user, the tool, the canonical arguments and the
//!    idempotency key; a session client is asked with `elicitation/create`;
//!    a client that cannot be asked is refused `APP_CONFIRMATION_REQUIRED`.
//!
//! A data change knows it needs a yes before it runs (unless it is the app's
//! own UI or a consented script); a platform or member change learns it by
//! being sent unapproved first, which studio-core answers
//! `APP_CONFIRMATION_REQUIRED` with the question.
//!
//! What it must never do: let a change run without an explicit `accept` with
//! `confirm: true`, hand a chat session's model a way to confirm its own
//! change, or leave a declined confirmation redeemable (it is voided before
//! the answer).

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequestParams, ElicitationAction,
    InputRequiredResult, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use sasha_contract::canonical::canonical_json;
use sasha_proto::pb::{self, ConfirmRequest};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};

use super::{SashaMcp, answered, from_json, tool_error};
use crate::auth::Caller;

/// How long a person has to answer a session elicitation.
const ELICITATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// A change a model asks for: what the person is asked about and what a
/// confirmation binds.
pub(super) struct Change<'a> {
    pub(super) caller: &'a Caller,
    /// The tool's name.
    pub(super) tool: &'a str,
    /// The arguments as the caller sent them (bound as canonical JSON).
    pub(super) arguments: &'a Value,
    /// Where the person can make a platform or member change themselves,
    /// which its refusals name; `None` for a data change.
    pub(super) place: Option<&'static str>,
}

/// Where a change's confirmation stands after one step.
pub(super) enum Consent {
    /// The person said yes: run the change under this idempotency key.
    Given(String),
    /// The call is answered without running the change: the question, or a
    /// refusal.
    Answered(Result<CallToolResponse, McpError>),
}

fn shorten(text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

/// What the person is asked to allow.
fn confirmation_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"confirm": {"type": "boolean", "title": "Allow this change", "default": true}},
        "required": ["confirm"],
    })
}

/// Whether an elicitation answer allows the change: only `accept` with the
/// explicit `confirm: true` the form asks for. An accept with no content (a
/// client that skipped the form) is no consent.
pub(super) fn accepted(answer: &Value) -> bool {
    answer["action"] == "accept" && answer["content"]["confirm"] == true
}

fn declined() -> AppError {
    AppError::new(
        ErrorCode::ConfirmationRequired,
        "the person did not allow this change; nothing was written",
    )
}

/// Whether the client speaks the sessionless protocol (2026-07-28 or later).
fn sessionless(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Whether the client declared it can be asked (`elicitation`).
fn elicits(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .is_some_and(|capabilities| capabilities.elicitation.is_some())
}

/// Step 1: a chat session's model drives its client, so it is never handed
/// a way to confirm its own change (the Studio assistant confirms in its own
/// page).
fn refuse_chat(change: &Change<'_>) -> Option<Consent> {
    if !change.caller.is_chat_session() {
        return None;
    }
    let message = match change.place {
        None => "a change a chat model asks for is confirmed by the person in Studio's assistant; nothing was written".to_owned(),
        Some(place) => {
            format!("this needs the person's own approval: ask them to do it from {place}")
        }
    };
    Some(Consent::Answered(tool_error(AppError::new(
        ErrorCode::ConfirmationRequired,
        message,
    ))))
}

/// A refusal to run `change` because the person did not say yes; a platform
/// or member change's names where the person can make it instead.
fn not_confirmed(change: &Change<'_>, error: AppError) -> Consent {
    let error = match change.place {
        Some(place) if error.code == ErrorCode::ConfirmationRequired => AppError::new(
            ErrorCode::ConfirmationRequired,
            format!(
                "{} Nothing was changed; the person can do it from {place}.",
                error.message
            ),
        ),
        _ => error,
    };
    Consent::Answered(tool_error(error))
}

/// The `input_required` result asking the person `question`, answered by
/// sending `token` back as `requestState`.
fn question(question: &str, token: String) -> Result<CallToolResponse, McpError> {
    from_json::<InputRequiredResult>(json!({
        "resultType": "input_required",
        "inputRequests": {"confirm": {"method": "elicitation/create", "params": {"mode": "form", "message": question, "requestedSchema": confirmation_schema()}}},
        "requestState": token,
    }))
    .map(CallToolResponse::InputRequired)
}

/// Asks the person behind a session client through `elicitation/create`;
/// `Ok` only for an explicit yes ([`accepted`]). A client without the
/// capability, a decline and a failure to ask are each
/// `APP_CONFIRMATION_REQUIRED`.
async fn ask_person(ctx: &RequestContext<RoleServer>, question: &str) -> Result<(), AppError> {
    if !elicits(ctx) {
        return Err(AppError::from_code(ErrorCode::ConfirmationRequired));
    }
    let params: ElicitRequestParams = from_json(json!({
        "mode": "form",
        "message": question,
        "requestedSchema": confirmation_schema(),
    }))
    .map_err(|_| AppError::from_code(ErrorCode::Internal))?;
    match ctx
        .peer
        .create_elicitation_with_timeout(params, Some(ELICITATION_TIMEOUT))
        .await
    {
        Ok(result) => {
            let answer = json!({
                "action": match result.action {
                    ElicitationAction::Accept => "accept",
                    ElicitationAction::Decline => "decline",
                    _ => "cancel",
                },
                "content": result.content,
            });
            if accepted(&answer) {
                Ok(())
            } else {
                Err(declined())
            }
        }
        Err(error) => {
            tracing::warn!(%error, "elicitation failed");
            Err(AppError::new(
                ErrorCode::ConfirmationRequired,
                "the person could not be asked to confirm this change; nothing was written",
            ))
        }
    }
}

impl SashaMcp {
    /// `CoreService.Confirm` for `change`: issues a token for
    /// `idempotency_key` (empty `token`), redeems `token` (empty key), or
    /// voids it (`decline`).
    async fn confirm(
        &self,
        change: &Change<'_>,
        token: &str,
        idempotency_key: &str,
        decline: bool,
    ) -> Result<pb::ConfirmReply, AppError> {
        let mut core = self.gateway.core.clone();
        core.confirm(ConfirmRequest {
            principal: Some(change.caller.principal.clone()),
            tool: change.tool.to_owned(),
            arguments_json: canonical_json(change.arguments),
            token: token.to_owned(),
            idempotency_key: idempotency_key.to_owned(),
            decline,
        })
        .await
        .map(|reply| reply.into_inner())
        .map_err(|status| AppError::from_status(&status))
    }

    /// Step 2: the person's answer this call carries, if any. A yes redeems
    /// the token (any replica, once or again: the same key); anything else
    /// voids it first, so an accept sent later with the same state runs
    /// nothing. A chat session redeems nothing. `None` when the call carries
    /// no answer.
    async fn answer(
        &self,
        change: &Change<'_>,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Option<Consent> {
        let state = request
            .request_state
            .as_ref()
            .filter(|_| sessionless(ctx))?;
        if let Some(refused) = refuse_chat(change) {
            return Some(refused);
        }
        let answer = request
            .input_responses
            .as_ref()
            .and_then(|responses| responses.get("confirm"))
            .unwrap_or(&Value::Null);
        if !accepted(answer) {
            if let Err(error) = self.confirm(change, state, "", true).await {
                tracing::info!(code = ?error.code, "a declined confirmation was not live");
            }
            return Some(Consent::Answered(tool_error(declined())));
        }
        Some(match self.confirm(change, state, "", false).await {
            Ok(reply) => Consent::Given(reply.idempotency_key),
            Err(error) => Consent::Answered(tool_error(error)),
        })
    }

    /// Step 3: asks the person `question` about `change`, which would run
    /// under `key`.
    async fn ask(
        &self,
        change: &Change<'_>,
        ctx: &RequestContext<RoleServer>,
        question_text: &str,
        key: String,
    ) -> Consent {
        if let Some(refused) = refuse_chat(change) {
            return refused;
        }
        if sessionless(ctx) {
            if !elicits(ctx) {
                return not_confirmed(change, AppError::from_code(ErrorCode::ConfirmationRequired));
            }
            return Consent::Answered(match self.confirm(change, "", &key, false).await {
                Ok(issued) => question(question_text, issued.token),
                Err(error) => tool_error(error),
            });
        }
        match ask_person(ctx, question_text).await {
            Ok(()) => Consent::Given(key),
            Err(error) => not_confirmed(change, error),
        }
    }

    /// Whether a table or action mutation may run now. The app's own UI
    /// (the Studio session bound to it) and a script whose token an operator
    /// consented to write this app (read fresh by `AuthorizeCall`, audited as
    /// automation) run without asking; anyone else needs the person's yes.
    /// `key` is the idempotency key the call would use; a confirmed call runs
    /// under the key fixed when its confirmation was issued.
    pub(super) async fn gate(
        &self,
        change: &Change<'_>,
        app: &crate::catalogue::App,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
        key: String,
        summary: &str,
    ) -> Consent {
        if change.caller.is_app_ui(&app.id) {
            return Consent::Given(key);
        }
        if let Some(refused) = refuse_chat(change) {
            return refused;
        }
        if app.automation {
            return Consent::Given(key);
        }
        if let Some(answered) = self.answer(change, request, ctx).await {
            return answered;
        }
        let question = format!(
            "{summary}\n\n{}",
            shorten(canonical_json(change.arguments), 1000)
        );
        self.ask(change, ctx, &question, key).await
    }

    /// A platform or member change that needs the person's yes. It is first
    /// sent without approval: studio-core checks everything else and, when
    /// only the approval is missing, answers `APP_CONFIRMATION_REQUIRED` with
    /// the summary the person is then asked about; only their explicit yes
    /// sends it again as approved. A refusal names `change.place`, where the
    /// person can make the change themselves.
    pub(super) async fn approved<F, Fut>(
        &self,
        change: &Change<'_>,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
        send: F,
    ) -> Result<CallToolResponse, McpError>
    where
        F: Fn(bool) -> Fut,
        Fut: std::future::Future<Output = Result<(String, Value), AppError>>,
    {
        match self.answer(change, request, ctx).await {
            Some(Consent::Given(_)) => return answered(send(true).await),
            Some(Consent::Answered(answer)) => return answer,
            None => {}
        }
        let refused = match send(false).await {
            Err(error) => error,
            done => return answered(done),
        };
        let summary = refused
            .details
            .as_ref()
            .and_then(|details| details["summary"].as_str())
            .map(str::to_owned);
        let (ErrorCode::ConfirmationRequired, Some(summary)) = (refused.code, summary) else {
            return tool_error(refused);
        };
        match self
            .ask(change, ctx, &summary, uuid::Uuid::new_v4().to_string())
            .await
        {
            Consent::Given(_) => answered(send(true).await),
            Consent::Answered(answer) => answer,
        }
    }
}
