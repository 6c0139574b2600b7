//! The person's yes to a change a model asks for: the gate in front of a
//! table or action mutation ([`SashaMcp::gate`]) and the one approval path
//! of the platform and member app changes studio-core holds until the person
//! approves them ([`SashaMcp::approved`]). A session client is asked with
//! `elicitation/create`; a sessionless (2026-07-28) client gets an
//! `input_required` result whose `requestState` is a core confirmation token.
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

use super::{Call, SashaMcp, answered, from_json, tool_error};
use crate::auth::Caller;

/// How long a person has to answer a session elicitation.
const ELICITATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

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

/// Asks the person behind a session client through `elicitation/create`;
/// `Ok` only for an explicit yes ([`accepted`]). A client without the
/// capability, a decline and a failure to ask are each
/// `APP_CONFIRMATION_REQUIRED`.
async fn ask_person(ctx: &RequestContext<RoleServer>, question: &str) -> Result<(), AppError> {
    let elicits = ctx
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.elicitation.is_some());
    if !elicits {
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

/// A mutation about to run: confirmed (with the idempotency key it runs under)
/// or answered without running.
pub(super) enum Gate {
    Run(String),
    Answer(Result<CallToolResponse, McpError>),
}

impl SashaMcp {
    async fn confirm(
        &self,
        caller: &Caller,
        tool: &str,
        arguments: &Value,
        token: &str,
        idempotency_key: &str,
    ) -> Result<pb::ConfirmReply, AppError> {
        let mut core = self.gateway.core.clone();
        core.confirm(ConfirmRequest {
            principal: Some(caller.principal.clone()),
            tool: tool.to_owned(),
            arguments_json: canonical_json(arguments),
            token: token.to_owned(),
            idempotency_key: idempotency_key.to_owned(),
            decline: false,
        })
        .await
        .map(|reply| reply.into_inner())
        .map_err(|status| AppError::from_status(&status))
    }

    /// Voids a confirmation the person declined, so no later answer can
    /// redeem it. A token that is unknown or already void changes nothing.
    async fn decline(&self, caller: &Caller, tool: &str, arguments: &Value, token: &str) {
        let mut core = self.gateway.core.clone();
        let voided = core
            .confirm(ConfirmRequest {
                principal: Some(caller.principal.clone()),
                tool: tool.to_owned(),
                arguments_json: canonical_json(arguments),
                token: token.to_owned(),
                idempotency_key: String::new(),
                decline: true,
            })
            .await;
        if let Err(status) = voided {
            tracing::info!(code = ?status.code(), "a declined confirmation was not live");
        }
    }

    /// Decides whether a model-invoked mutation may run now, asking the person
    /// the way the client supports (see the crate docs). `key` is the
    /// idempotency key the call would use; a confirmed call may run under the
    /// key fixed when its confirmation was issued.
    pub(super) async fn gate(
        &self,
        call: &Call<'_>,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
        key: String,
        summary: &str,
    ) -> Gate {
        if call.caller.is_app_ui(call.app_id) {
            return Gate::Run(key);
        }
        let arguments = Value::Object(call.args.clone());
        // The model drives a chat session's client: it is never handed a
        // way to confirm its own change.
        if call.caller.is_chat_session() {
            return Gate::Answer(tool_error(AppError::new(
                ErrorCode::ConfirmationRequired,
                "a change a chat model asks for is confirmed by the person in Studio's assistant; nothing was written",
            )));
        }
        // A script's token: an operator consented at mint time to its writes
        // to this app (read fresh by AuthorizeCall); they are audited as
        // automation.
        if call.app.automation {
            return Gate::Run(key);
        }
        let question = format!("{summary}\n\n{}", shorten(canonical_json(&arguments), 1000));
        let elicits = ctx
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some());
        let sessionless = ctx
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        if sessionless {
            if let Some(state) = &request.request_state {
                let answer = request
                    .input_responses
                    .as_ref()
                    .and_then(|responses| responses.get("confirm"))
                    .cloned()
                    .unwrap_or(Value::Null);
                // A decline is final: its token is voided before answering,
                // so an accept sent later with the same state runs nothing.
                if !accepted(&answer) {
                    self.decline(call.caller, call.name, &arguments, state)
                        .await;
                    return Gate::Answer(tool_error(declined()));
                }
                return match self
                    .confirm(call.caller, call.name, &arguments, state, "")
                    .await
                {
                    Ok(reply) => Gate::Run(reply.idempotency_key),
                    Err(error) => Gate::Answer(tool_error(error)),
                };
            }
            if !elicits {
                return Gate::Answer(tool_error(AppError::from_code(
                    ErrorCode::ConfirmationRequired,
                )));
            }
            return Gate::Answer(match self.confirm(call.caller, call.name, &arguments, "", &key).await {
                Ok(reply) => from_json::<InputRequiredResult>(json!({
                    "resultType": "input_required",
                    "inputRequests": {"confirm": {"method": "elicitation/create", "params": {"mode": "form", "message": question, "requestedSchema": confirmation_schema()}}},
                    "requestState": reply.token,
                }))
                .map(CallToolResponse::InputRequired),
                Err(error) => tool_error(error),
            });
        }
        match ask_person(ctx, &question).await {
            Ok(()) => Gate::Run(key),
            Err(error) => Gate::Answer(tool_error(error)),
        }
    }

    /// A change that needs the person's yes. It is first sent without
    /// approval: studio-core checks everything else and, when only the
    /// approval is missing, answers `APP_CONFIRMATION_REQUIRED` with the
    /// summary the person is then asked about; only their explicit yes sends
    /// it again as approved. A session client is asked by
    /// `elicitation/create`; a sessionless (2026-07-28) client gets the
    /// question as an `input_required` result whose `requestState` is a
    /// confirmation token bound to the call, redeemed once when it answers
    /// yes. A chat session's model cannot approve its own change, so it is
    /// refused there and sent to `place` in Studio.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn approved<F, Fut>(
        &self,
        caller: &Caller,
        name: &str,
        args: &Value,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
        place: &str,
        send: F,
    ) -> Result<CallToolResponse, McpError>
    where
        F: Fn(bool) -> Fut,
        Fut: std::future::Future<Output = Result<(String, Value), AppError>>,
    {
        let sessionless = ctx
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        // The answer to a question asked earlier in this call's exchange.
        if sessionless && let Some(state) = &request.request_state {
            let answer = request
                .input_responses
                .as_ref()
                .and_then(|responses| responses.get("confirm"))
                .cloned()
                .unwrap_or(Value::Null);
            if !accepted(&answer) {
                self.decline(caller, name, args, state).await;
                return tool_error(declined());
            }
            if let Err(error) = self.confirm(caller, name, args, state, "").await {
                return tool_error(error);
            }
            return answered(send(true).await);
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
        let elsewhere = |error: AppError| {
            AppError::new(
                ErrorCode::ConfirmationRequired,
                format!(
                    "{} Nothing was changed; the person can do it from {place}.",
                    error.message
                ),
            )
        };
        if caller.is_chat_session() {
            return tool_error(AppError::new(
                ErrorCode::ConfirmationRequired,
                format!("this needs the person's own approval: ask them to do it from {place}"),
            ));
        }
        if sessionless {
            let elicits = ctx
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.elicitation.is_some());
            if !elicits {
                return tool_error(elsewhere(AppError::from_code(
                    ErrorCode::ConfirmationRequired,
                )));
            }
            let key = uuid::Uuid::new_v4().to_string();
            return match self.confirm(caller, name, args, "", &key).await {
                Ok(issued) => from_json::<InputRequiredResult>(json!({
                    "resultType": "input_required",
                    "inputRequests": {"confirm": {"method": "elicitation/create", "params": {"mode": "form", "message": summary, "requestedSchema": confirmation_schema()}}},
                    "requestState": issued.token,
                }))
                .map(CallToolResponse::InputRequired),
                Err(error) => tool_error(error),
            };
        }
        if let Err(error) = ask_person(ctx, &summary).await {
            return tool_error(if error.code == ErrorCode::ConfirmationRequired {
                elsewhere(error)
            } else {
                error
            });
        }
        answered(send(true).await)
    }
}
