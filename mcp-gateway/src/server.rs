//! The MCP server handler behind `/mcp` (rmcp's streamable HTTP transport).
//!
//! Nothing here is cached across requests: each `tools/list`, `tools/call`,
//! `resources/list` and `resources/read` asks studio-core for the caller's
//! catalogue, so a grant revoked a moment ago is already gone. The caller was
//! authenticated by [`crate::auth::authenticate`] for this very HTTP request.
//!
//! Failures of a tool are tool results (`isError: true`) whose
//! `structuredContent.error` is the spec's envelope; an unknown tool is JSON-RPC
//! `-32602`. An app-only or unreachable action is `APP_ACTION_UNAVAILABLE`.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitationAction, Implementation, InputRequiredResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceTemplate, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use sasha_contract::canonical::canonical_json;
use sasha_contract::data::ID_COLUMN;
use sasha_contract::tools::{CHAT_TOOL, UPLOAD_TOOL};
use sasha_proto::convert::ui_meta;
use sasha_proto::pb::{
    self, ConfirmRequest, CreateAppRequest, GetResourceRequest, SourceFilesRequest, SuggestRequest,
};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Map, Value, json};

use crate::Gateway;
use crate::auth::Caller;
use crate::calls::{self, DataCall};
use crate::catalogue::{self, App, Catalogue};
use crate::tools::{self, Target};
use crate::{member, platform};

/// The MIME type of an MCP Apps UI resource.
pub const UI_MIME_TYPE: &str = "text/html;profile=mcp-app";
/// How long a person has to answer a session elicitation.
const ELICITATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
/// The `_meta` key carrying an idempotency key for a call whose tool has no
/// `idempotencyKey` argument (actions).
const IDEMPOTENCY_META: &str = "sasha/idempotencyKey";

/// One rmcp service instance; cheap, created per session or stateless request.
#[derive(Debug, Clone)]
pub struct SashaMcp {
    gateway: Arc<Gateway>,
}

impl SashaMcp {
    pub fn new(gateway: Arc<Gateway>) -> SashaMcp {
        SashaMcp { gateway }
    }
}

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, McpError> {
    serde_json::from_value(value).map_err(|error| {
        tracing::error!(%error, "an MCP result did not match its schema");
        McpError::internal_error("an internal error occurred", None)
    })
}

fn caller_of(ctx: &RequestContext<RoleServer>) -> Result<Caller, McpError> {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| McpError::internal_error("the request was not authenticated", None))
}

/// A platform failure outside any tool (listing, reading): a JSON-RPC error
/// carrying the envelope.
fn protocol_error(error: &AppError) -> McpError {
    let data = Some(json!({"error": error.to_json()}));
    match error.code {
        ErrorCode::NotFound | ErrorCode::RevisionUnavailable | ErrorCode::RecordNotFound => {
            McpError::resource_not_found(
                error.to_json()["message"]
                    .as_str()
                    .unwrap_or("not found")
                    .to_owned(),
                data,
            )
        }
        ErrorCode::InputInvalid | ErrorCode::FieldUndeclared | ErrorCode::ResourceLimit => {
            McpError::invalid_params(error.message.clone(), data)
        }
        _ => McpError::internal_error(error.message.clone(), data),
    }
}

/// A tool's failure: an error result whose `structuredContent.error` is the
/// envelope.
fn tool_error(error: AppError) -> Result<CallToolResponse, McpError> {
    let envelope = error.to_json();
    let text = format!(
        "{}: {}",
        envelope["code"].as_str().unwrap_or(""),
        envelope["message"].as_str().unwrap_or("")
    );
    Ok(complete(text, json!({"error": envelope}), Some(true)))
}

fn tool_success(value: Value) -> Result<CallToolResponse, McpError> {
    Ok(complete(value.to_string(), value, None))
}

/// A complete result: `text` as its one text content and `value` as its
/// `structuredContent`. Built directly (a result can hold thousands of rows,
/// which a round trip through `serde_json::from_value` would copy).
fn complete(text: String, value: Value, is_error: Option<bool>) -> CallToolResponse {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result.is_error = is_error;
    // Absent on the wire, which every protocol version reads as complete.
    result.result_type = None;
    CallToolResponse::Complete(result)
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
fn accepted(answer: &Value) -> bool {
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
enum Gate {
    Run(String),
    Answer(Result<CallToolResponse, McpError>),
}

/// One resolved `tools/call`.
struct Call<'a> {
    caller: &'a Caller,
    app_id: &'a str,
    app: &'a App,
    name: &'a str,
    args: Map<String, Value>,
}

impl Call<'_> {
    /// The governed data call this tool call makes.
    fn data<'b>(
        &'b self,
        operation: &'b str,
        table: &'b str,
        request: Value,
        action_id: Option<&'b str>,
    ) -> DataCall<'b> {
        DataCall {
            caller: self.caller,
            app_id: self.app_id,
            app: self.app,
            operation,
            table,
            request,
            action_id,
        }
    }
}

impl SashaMcp {
    /// The caller's catalogue: every app they may use, or one app with its
    /// data contract.
    async fn catalogue(
        &self,
        caller: &Caller,
        app_id: Option<&str>,
    ) -> Result<Catalogue, AppError> {
        let hint = app_id.map(|id| self.gateway.contracts.hint(id));
        self.fetch_catalogue(caller, app_id, hint.unwrap_or_default())
            .await
    }

    /// `GetCatalogue`; `known_contract_hash` as in the request's docs.
    async fn fetch_catalogue(
        &self,
        caller: &Caller,
        app_id: Option<&str>,
        known_contract_hash: String,
    ) -> Result<Catalogue, AppError> {
        // Asked already, with the credential, for this very request.
        if let Some(prefetched) = &caller.prefetched
            && app_id == Some(prefetched.app_id.as_str())
            && known_contract_hash == prefetched.known_contract_hash
        {
            return Ok(prefetched.catalogue.clone());
        }
        // A draft preview sees its one app, as the draft, and nothing else.
        let app_id = match &caller.preview {
            Some(_) => caller.bound_app.as_deref(),
            None => app_id,
        };
        catalogue::fetch(
            &self.gateway.core,
            &caller.principal,
            app_id,
            known_contract_hash,
            caller.preview.as_deref(),
        )
        .await
    }

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
    async fn gate(
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

    async fn execute(&self, call: DataCall<'_>) -> Result<Value, AppError> {
        self.execute_text(call).await.map(|(value, _)| value)
    }

    /// [`SashaMcp::execute`], also giving data-worker's JSON text of the result.
    async fn execute_text(&self, call: DataCall<'_>) -> Result<(Value, String), AppError> {
        let (caller, app_id) = (call.caller, call.app_id);
        let fetch_contract = async || {
            let catalogue = self
                .fetch_catalogue(caller, Some(app_id), String::new())
                .await?;
            catalogue
                .apps
                .get(app_id)
                .and_then(|app| app.contract.clone())
                .ok_or_else(|| AppError::from_code(ErrorCode::NotFound))
        };
        calls::execute(
            &self.gateway.data,
            &self.gateway.contracts,
            call,
            fetch_contract,
        )
        .await
    }

    /// The caller and their catalogue for a listing, or `None` for a caller
    /// without `apps:invoke` (who lists nothing).
    async fn listing(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Option<(Caller, Catalogue)>, McpError> {
        let caller = caller_of(ctx)?;
        if !caller.invokes() {
            return Ok(None);
        }
        let catalogue = self
            .catalogue(&caller, None)
            .await
            .map_err(|error| protocol_error(&error))?;
        Ok(Some((caller, catalogue)))
    }

    async fn run_table(
        &self,
        call: Call<'_>,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
        table: &str,
        operation: &str,
    ) -> Result<CallToolResponse, McpError> {
        let mut data_request = Value::Object(call.args.clone());
        if tools::is_mutating(operation) {
            let key = call
                .args
                .get("idempotencyKey")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| meta_key(request, ctx))
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            let summary = format!(
                "Allow this {operation} in the {table} table of {}?",
                call.app.name
            );
            // The confirmation binds the arguments as the caller sent them.
            let key = match self.gate(&call, request, ctx, key, &summary).await {
                Gate::Run(key) => key,
                Gate::Answer(answer) => return answer,
            };
            data_request["idempotencyKey"] = json!(key);
        }
        let result = self
            .execute_text(call.data(operation, table, data_request, None))
            .await;
        match result {
            // data-worker's text is the result's JSON: no second serialisation.
            Ok((value, text)) => text_result(text, value),
            Err(error) => tool_error(error),
        }
    }

    async fn run_action(
        &self,
        call: Call<'_>,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
        action_id: &str,
    ) -> Result<CallToolResponse, McpError> {
        let Some(action) = call.app.action(action_id) else {
            return tool_error(AppError::from_code(ErrorCode::ActionUnavailable));
        };
        let mut key = meta_key(request, ctx).unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        if action.mutating {
            let summary = format!("Allow {} to run “{}”?", call.app.name, action.description);
            key = match self.gate(&call, request, ctx, key, &summary).await {
                Gate::Run(key) => key,
                Gate::Answer(answer) => return answer,
            };
        }
        let (operation, table, data_request) = match calls::action_request(action, &call.args, &key)
        {
            Ok(parts) => parts,
            Err(error) => return tool_error(error),
        };
        let result = self
            .execute(call.data(operation, &table, data_request, Some(action_id)))
            .await;
        let value = match result {
            Ok(value) => calls::project(&action.result_schema, value),
            Err(error) => return tool_error(error),
        };
        if let Err(error) =
            self.gateway
                .validators
                .validate(&action.result_schema, &value, "result")
        {
            tracing::error!(app = call.app_id, action = action_id, reason = %error.message, "an action result does not match its resultSchema");
            return tool_error(AppError::new(
                ErrorCode::ActionInvalid,
                "the action's result does not match its declared resultSchema",
            ));
        }
        tool_success(value)
    }
}

impl SashaMcp {
    /// The arguments of a call to `name`, checked against the input schema
    /// of that tool in `listed` (what this caller is offered). A tool not
    /// listed is the protocol's "not found"; arguments the schema refuses
    /// are the tool's `APP_INPUT_INVALID`.
    fn listed_arguments(
        &self,
        listed: &[Value],
        name: &str,
        args: Map<String, Value>,
    ) -> Result<Result<Value, AppError>, McpError> {
        let Some(tool) = listed.iter().find(|tool| tool["name"] == name) else {
            return Err(McpError::invalid_params(
                format!("Tool {name} not found"),
                None,
            ));
        };
        let args = Value::Object(args);
        Ok(self
            .gateway
            .validators
            .validate(&tool["inputSchema"], &args, "input")
            .map(|()| args))
    }

    /// `getDocs`, `suggestImprovement`, the six source tools, `createApp`,
    /// the four history tools and the three lifecycle tools.
    async fn call_platform(
        &self,
        caller: &Caller,
        name: &str,
        args: Map<String, Value>,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = match self.listed_arguments(&platform::tools_for(caller), name, args)? {
            Ok(args) => args,
            Err(error) => return tool_error(error),
        };
        let mut core = self.gateway.core.clone();
        match name {
            platform::GET_DOCS => {
                if caller.principal.member_apps_off && args["section"] == "member-apps" {
                    return tool_error(AppError::new(
                        ErrorCode::NotFound,
                        "member apps are turned off on this instance",
                    ));
                }
                let Some(answer) = platform::docs(args["section"].as_str()) else {
                    return tool_error(AppError::from_code(ErrorCode::InputInvalid));
                };
                text_result(
                    answer["markdown"].as_str().unwrap_or_default().to_owned(),
                    answer,
                )
            }
            platform::SUGGEST => {
                let reply = core
                    .suggest(SuggestRequest {
                        principal: Some(caller.principal.clone()),
                        suggestion_json: args.to_string(),
                    })
                    .await;
                match reply {
                    Ok(reply) => text_result(
                        "Thank you: the suggestion is recorded for the administrators. Carry on with the task.".to_owned(),
                        json!({"id": reply.into_inner().id, "recorded": true}),
                    ),
                    Err(status) => tool_error(AppError::from_status(&status)),
                }
            }
            platform::CREATE_APP => {
                let reply = core
                    .create_app(CreateAppRequest {
                        principal: Some(caller.principal.clone()),
                        app_id: args["app"].as_str().unwrap_or_default().to_owned(),
                        name: args["name"].as_str().unwrap_or_default().to_owned(),
                        description: args["description"].as_str().unwrap_or_default().to_owned(),
                        with_table: args["withTable"].as_bool().unwrap_or(false),
                    })
                    .await;
                match reply {
                    Ok(reply) => {
                        let reply = reply.into_inner();
                        text_result(platform::create_text(&reply), platform::create_json(&reply))
                    }
                    Err(status) => tool_error(AppError::from_status(&status)),
                }
            }
            history if platform::HISTORY_TOOLS.contains(&history) => {
                let Some(request) = platform::history_request(history, &caller.principal, &args)
                else {
                    return tool_error(AppError::from_code(ErrorCode::InputInvalid));
                };
                match core.history(request).await {
                    Ok(reply) => {
                        let (text, result) = platform::history_result(&reply.into_inner())
                            .ok_or_else(|| {
                                tracing::error!(
                                    "studio-core sent a history reply without a result"
                                );
                                McpError::internal_error("an internal error occurred", None)
                            })?;
                        text_result(text, result)
                    }
                    Err(status) => tool_error(AppError::from_status(&status)),
                }
            }
            draft if platform::DRAFT_TOOLS.contains(&draft) => {
                self.call_draft(caller, draft, &args, request, ctx).await
            }
            lifecycle if platform::LIFECYCLE_TOOLS.contains(&lifecycle) => {
                let Some(request) =
                    platform::lifecycle_request(lifecycle, &caller.principal, &args)
                else {
                    return tool_error(AppError::from_code(ErrorCode::InputInvalid));
                };
                match core.app_lifecycle(request).await {
                    Ok(reply) => {
                        let (text, result) =
                            platform::lifecycle_result(lifecycle, &reply.into_inner());
                        text_result(text, result)
                    }
                    Err(status) => tool_error(AppError::from_status(&status)),
                }
            }
            operation => {
                let reply = core
                    .source_files(SourceFilesRequest {
                        principal: Some(caller.principal.clone()),
                        operation: operation.to_owned(),
                        app_id: args["app"].as_str().unwrap_or_default().to_owned(),
                        arguments_json: args.to_string(),
                    })
                    .await;
                match reply {
                    Ok(reply) => {
                        let reply = reply.into_inner();
                        let result = platform::source_json(&reply).ok_or_else(|| {
                            tracing::error!("studio-core sent a source reply of no kind");
                            McpError::internal_error("an internal error occurred", None)
                        })?;
                        text_result(platform::source_text(operation, &reply), result)
                    }
                    Err(status) => tool_error(AppError::from_status(&status)),
                }
            }
        }
    }
}

impl SashaMcp {
    /// `publishAppDraft` and `discardAppDraft`. A publication goes through
    /// [`SashaMcp::approved`]; a discard is sent as it is.
    async fn call_draft(
        &self,
        caller: &Caller,
        name: &str,
        args: &Value,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let draft = |approval| platform::draft_request(name, &caller.principal, args, approval);
        let (Some(unapproved), Some(approved)) = (
            draft(pb::DraftApproval::Unspecified),
            draft(pb::DraftApproval::Elicitation),
        ) else {
            return tool_error(AppError::from_code(ErrorCode::InputInvalid));
        };
        if name != platform::PUBLISH_APP_DRAFT {
            return draft_answer(self.gateway.core.clone().draft(unapproved).await);
        }
        let send = |yes: bool| {
            let mut core = self.gateway.core.clone();
            let request = if yes {
                approved.clone()
            } else {
                unapproved.clone()
            };
            async move {
                let reply = core
                    .draft(request)
                    .await
                    .map_err(|status| AppError::from_status(&status))?;
                platform::draft_result(&reply.into_inner()).ok_or_else(|| {
                    tracing::error!("studio-core sent a draft reply without a result");
                    AppError::from_code(ErrorCode::Internal)
                })
            }
        };
        self.approved(
            caller,
            name,
            args,
            request,
            ctx,
            "Studio's Draft page",
            send,
        )
        .await
    }

    /// The member app tools; a deploy or revert goes through
    /// [`SashaMcp::approved`].
    async fn call_member(
        &self,
        caller: &Caller,
        name: &str,
        args: Map<String, Value>,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = match self.listed_arguments(&member::tools_for(caller), name, args)? {
            Ok(args) => args,
            Err(error) => return tool_error(error),
        };
        let (Some(unapproved), Some(approved)) = (
            member::request(name, &caller.principal, &args, false),
            member::request(name, &caller.principal, &args, true),
        ) else {
            return tool_error(AppError::new(
                ErrorCode::InputInvalid,
                "a file marked encoding: base64 is not valid base64",
            ));
        };
        let send = |yes: bool| {
            let mut core = self.gateway.core.clone();
            let request = if yes {
                approved.clone()
            } else {
                unapproved.clone()
            };
            async move {
                let reply = core
                    .member_apps(request)
                    .await
                    .map_err(|status| AppError::from_status(&status))?;
                member::result(name, &reply.into_inner()).ok_or_else(|| {
                    tracing::error!("studio-core sent a member apps reply without a result");
                    AppError::from_code(ErrorCode::Internal)
                })
            }
        };
        if !member::needs_approval(name) {
            return answered(send(false).await);
        }
        self.approved(caller, name, &args, request, ctx, "App Studio", send)
            .await
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
    async fn approved<F, Fut>(
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

/// A tool's result, or its refusal.
fn answered(outcome: Result<(String, Value), AppError>) -> Result<CallToolResponse, McpError> {
    match outcome {
        Ok((text, value)) => text_result(text, value),
        Err(error) => tool_error(error),
    }
}

/// A draft tool's result from studio-core's answer.
fn draft_answer(
    reply: Result<tonic::Response<pb::DraftReply>, tonic::Status>,
) -> Result<CallToolResponse, McpError> {
    match reply {
        Ok(reply) => match platform::draft_result(&reply.into_inner()) {
            Some((text, value)) => text_result(text, value),
            None => {
                tracing::error!("studio-core sent a draft reply without a result");
                Err(McpError::internal_error("an internal error occurred", None))
            }
        },
        Err(status) => tool_error(AppError::from_status(&status)),
    }
}

/// A successful result with its own text part.
fn text_result(text: String, value: Value) -> Result<CallToolResponse, McpError> {
    Ok(complete(text, value, None))
}

/// An idempotency key passed in the request's `_meta`.
/// The call's progress token, from its own `_meta` or the request's.
fn progress_token(
    request: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Option<rmcp::model::ProgressToken> {
    request
        .meta
        .as_ref()
        .and_then(|meta| meta.get_progress_token())
        .or_else(|| ctx.meta.get_progress_token())
}

fn meta_key(request: &CallToolRequestParams, ctx: &RequestContext<RoleServer>) -> Option<String> {
    let from_request = request
        .meta
        .as_ref()
        .and_then(|meta| meta.0.0.get(IDEMPOTENCY_META).cloned());
    from_request
        .or_else(|| ctx.meta.0.0.get(IDEMPOTENCY_META).cloned())
        .and_then(|value| value.as_str().map(str::to_owned))
        .filter(|key| !key.is_empty() && key.len() <= 200)
}

/// The resource templates of the `sasha://` data resources.
fn templates() -> Vec<Value> {
    [
        ("sasha://apps/{appId}/tables", "tables", "The declared tables of an app, with their columns and access"),
        ("sasha://apps/{appId}/tables/{table}/rows{?q}", "rows", "Rows of a table; q is a list query in the data grammar, as JSON"),
        ("sasha://apps/{appId}/tables/{table}/rows/{id}", "row", "One row of a table by id"),
        ("sasha://apps/{appId}/tables/{table}/rows/{id}/history", "history", "One row's change history (who, when, through which surface, before and after; the first 50 entries, oldest first)"),
        ("sasha://apps/{appId}/tables/{table}/aggregate{?q}", "aggregate", "An aggregate of a table; q is the aggregation in the data grammar, as JSON"),
        ("sasha://apps/{appId}/actions", "actions", "The declared actions of an app"),
    ]
    .into_iter()
    .map(|(uri, name, description)| {
        json!({"uriTemplate": uri, "name": name, "description": description, "mimeType": "application/json"})
    })
    .collect()
}

/// A `sasha://` data resource.
#[derive(Debug, PartialEq, Eq)]
enum DataResource {
    Tables,
    Actions,
    Rows {
        table: String,
        query: Option<String>,
    },
    Row {
        table: String,
        id: String,
    },
    /// The row's audit entries (`history`, its first page).
    History {
        table: String,
        id: String,
    },
    Aggregate {
        table: String,
        query: Option<String>,
    },
}

/// Parses `sasha://apps/<app>/…` into the app id and what is asked for.
fn parse_data_uri(uri: &str) -> Option<(String, DataResource)> {
    let url = url::Url::parse(uri).ok()?;
    // A URI that normalises to something else (dot segments, case) names a
    // different resource than it says: refused.
    if url.as_str() != uri
        || url.scheme() != "sasha"
        || url.host_str() != Some("apps")
        || url.fragment().is_some()
    {
        return None;
    }
    let query = url
        .query_pairs()
        .find(|(key, _)| key == "q")
        .map(|(_, value)| value.into_owned());
    if url.query_pairs().any(|(key, _)| key != "q") {
        return None;
    }
    let segments: Vec<String> = url
        .path_segments()?
        .map(percent_decode)
        .collect::<Option<Vec<_>>>()?;
    let parts: Vec<&str> = segments.iter().map(String::as_str).collect();
    let (app, resource) = match parts.as_slice() {
        [app, "tables"] if query.is_none() => (app, DataResource::Tables),
        [app, "actions"] if query.is_none() => (app, DataResource::Actions),
        [app, "tables", table, "rows"] => (
            app,
            DataResource::Rows {
                table: (*table).to_owned(),
                query,
            },
        ),
        [app, "tables", table, "rows", id] if query.is_none() => (
            app,
            DataResource::Row {
                table: (*table).to_owned(),
                id: (*id).to_owned(),
            },
        ),
        [app, "tables", table, "rows", id, "history"] if query.is_none() => (
            app,
            DataResource::History {
                table: (*table).to_owned(),
                id: (*id).to_owned(),
            },
        ),
        [app, "tables", table, "aggregate"] => (
            app,
            DataResource::Aggregate {
                table: (*table).to_owned(),
                query,
            },
        ),
        _ => return None,
    };
    crate::auth::valid_app_id(app).then(|| ((*app).to_owned(), resource))
}

/// A row id from a URI segment: an integer for a table whose id is one.
fn id_argument(app: &App, table: &str, id: &str) -> Value {
    let integer_id = app
        .tables
        .get(table)
        .and_then(|declared| declared.table.column(ID_COLUMN))
        .is_some_and(|column| column.declared_type.to_ascii_uppercase().contains("INT"));
    match id.parse::<i64>() {
        Ok(number) if integer_id => json!(number),
        _ => json!(id),
    }
}

fn percent_decode(segment: &str) -> Option<String> {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .ok()
        .map(|text| text.into_owned())
        .filter(|text| !text.is_empty() && !text.contains('/'))
}

fn json_contents(uri: &str, value: &Value) -> Result<ReadResourceResponse, McpError> {
    let result: ReadResourceResult = from_json(json!({
        "contents": [{"uri": uri, "mimeType": "application/json", "text": value.to_string()}],
    }))?;
    Ok(ReadResourceResponse::Complete(result))
}

impl SashaMcp {
    async fn read_ui_resource(
        &self,
        caller: &Caller,
        uri: &str,
    ) -> Result<ReadResourceResponse, McpError> {
        let not_found = || protocol_error(&AppError::from_code(ErrorCode::NotFound));
        let rest = uri.strip_prefix("ui://sasha/apps/").ok_or_else(not_found)?;
        let (app_id, revision) = rest.split_once("/revisions/").ok_or_else(not_found)?;
        if !crate::auth::valid_app_id(app_id)
            || revision.len() != 64
            || !revision
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return Err(not_found());
        }
        let mut core = self.gateway.core.clone();
        let resource = core
            .get_resource(GetResourceRequest {
                principal: Some(caller.principal.clone()),
                app_id: app_id.to_owned(),
                revision: revision.to_owned(),
            })
            .await
            .map_err(|status| protocol_error(&AppError::from_status(&status)))?
            .into_inner();
        let meta = resource.meta.as_ref().map_or(Value::Null, ui_meta);
        let result: ReadResourceResult = from_json(json!({
            "contents": [{
                "uri": resource.uri,
                "mimeType": resource.mime_type,
                "text": resource.html,
                "_meta": {"ui": meta},
            }],
        }))?;
        Ok(ReadResourceResponse::Complete(result))
    }

    async fn read_data_resource(
        &self,
        caller: &Caller,
        uri: &str,
    ) -> Result<ReadResourceResponse, McpError> {
        let not_found = || protocol_error(&AppError::from_code(ErrorCode::NotFound));
        let (app_id, resource) = parse_data_uri(uri).ok_or_else(not_found)?;
        if !caller.invokes() {
            return Err(not_found());
        }
        let catalogue = self
            .catalogue(caller, Some(&app_id))
            .await
            .map_err(|error| protocol_error(&error))?;
        let app = catalogue.apps.get(&app_id).ok_or_else(not_found)?;
        let query = |text: Option<String>, required: bool| -> Result<Value, McpError> {
            match text {
                None if required => Err(protocol_error(&AppError::new(
                    ErrorCode::InputInvalid,
                    "q (the aggregation as JSON) is required",
                ))),
                None => Ok(json!({})),
                Some(text) => serde_json::from_str::<Value>(&text)
                    .ok()
                    .filter(Value::is_object)
                    .ok_or_else(|| {
                        protocol_error(&AppError::new(
                            ErrorCode::InputInvalid,
                            "q must be a JSON object in the data grammar",
                        ))
                    }),
            }
        };
        let (operation, table, request) = match resource {
            DataResource::Tables => {
                return json_contents(uri, &json!({"tables": app.tables_json()}));
            }
            DataResource::Actions => {
                let actions: Vec<Value> = app
                    .actions
                    .iter()
                    .map(|action| {
                        json!({
                            "id": action.id,
                            "tool": action.mcp_name,
                            "description": action.description,
                            "visibility": action.visibility,
                            "mutating": action.mutating,
                            "inputSchema": action.input_schema,
                            "resultSchema": action.result_schema,
                        })
                    })
                    .collect();
                return json_contents(uri, &json!({"actions": actions}));
            }
            DataResource::Rows { table, query: q } => ("list", table, query(q, false)?),
            DataResource::Aggregate { table, query: q } => ("aggregate", table, query(q, true)?),
            DataResource::Row { table, id } => {
                let id = id_argument(app, &table, &id);
                ("get", table, json!({"id": id}))
            }
            DataResource::History { table, id } => {
                let id = id_argument(app, &table, &id);
                ("history", table, json!({"id": id}))
            }
        };
        if !app.tables.contains_key(&table) {
            return Err(not_found());
        }
        let value = self
            .execute(DataCall {
                caller,
                app_id: &app_id,
                app,
                operation,
                table: &table,
                request,
                action_id: None,
            })
            .await
            .map_err(|error| protocol_error(&error))?;
        json_contents(uri, &value)
    }
}

impl ServerHandler for SashaMcp {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        );
        info.server_info = Implementation::new("sasha-apps", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "Sasha Apps: small internal apps with their own governed tables. Open an app with open_app__<id>; read and change its tables with app__<app>__<table>__<operation>; changes need the person's confirmation."
                .to_owned(),
        );
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let caller = caller_of(&ctx)?;
        let mut listed = platform::tools_for(&caller);
        listed.extend(member::tools_for(&caller));
        if let Some((caller, catalogue)) = self.listing(&ctx).await? {
            listed.extend(tools::tools_for(&catalogue, &caller.tools_caller()));
        }
        let tools = listed
            .into_iter()
            .map(from_json::<Tool>)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = caller_of(&ctx)?;
        let name = request.name.to_string();
        if member::is_member_tool(&name) {
            return self
                .call_member(
                    &caller,
                    &name,
                    request.arguments.clone().unwrap_or_default(),
                    &request,
                    &ctx,
                )
                .await;
        }
        if platform::is_platform_tool(&name) {
            return self
                .call_platform(
                    &caller,
                    &name,
                    request.arguments.clone().unwrap_or_default(),
                    &request,
                    &ctx,
                )
                .await;
        }
        let action_shaped = tools::is_action_shaped(&name);
        let absent = |name: &str| -> Result<CallToolResponse, McpError> {
            if action_shaped {
                // The tool's name stays out of the message, which a person
                // may read; a client finds it in `details.tool`.
                tool_error(
                    AppError::new(
                        ErrorCode::ActionUnavailable,
                        "this action is not available to you: it may have been removed, or your access changed",
                    )
                    .with_details(json!({"tool": name})),
                )
            } else {
                Err(McpError::invalid_params(
                    format!("Tool {name} not found"),
                    None,
                ))
            }
        };
        let app_id = match name.as_str() {
            CHAT_TOOL | UPLOAD_TOOL => caller.tools_caller().bound_app,
            _ => tools::app_of(&name),
        };
        let Some(app_id) = app_id.filter(|_| caller.invokes()) else {
            return absent(&name);
        };
        let catalogue = match self.catalogue(&caller, Some(&app_id)).await {
            Ok(catalogue) => catalogue,
            Err(error) => return tool_error(error),
        };
        let Some(app) = catalogue.apps.get(&app_id) else {
            return absent(&name);
        };
        let Some(tool) = tools::tool_for(app, &caller.tools_caller(), &name) else {
            return absent(&name);
        };
        let Some(target) = tools::classify(app, &name) else {
            return absent(&name);
        };
        let args = request.arguments.clone().unwrap_or_default();
        if let Err(error) = self.gateway.validators.validate(
            &tool["inputSchema"],
            &Value::Object(args.clone()),
            "input",
        ) {
            return tool_error(error);
        }
        let call = Call {
            caller: &caller,
            app_id: &app_id,
            app,
            name: &name,
            args,
        };
        match target {
            Target::Open => tool_success(json!({
                "appId": app_id,
                "name": app.name,
                "revision": app.revision,
                "resourceUri": app.resource_uri,
            })),
            Target::ChatExecute => {
                let progress = progress_token(&request, &ctx);
                match crate::assist::chat(
                    &self.gateway,
                    call.caller,
                    call.app_id,
                    call.app,
                    &call.args,
                    progress,
                    &ctx,
                )
                .await
                {
                    // The content is the answer itself; structuredContent
                    // carries it for the app.
                    Ok(value) => {
                        text_result(value["text"].as_str().unwrap_or_default().to_owned(), value)
                    }
                    Err(error) => tool_error(error),
                }
            }
            Target::FilesUpload => {
                match crate::assist::upload(
                    &self.gateway,
                    call.caller,
                    call.app_id,
                    call.app,
                    &call.args,
                    progress_token(&request, &ctx),
                    &ctx,
                )
                .await
                {
                    Ok(value) => {
                        let count = value["files"].as_array().map_or(0, Vec::len);
                        text_result(
                            format!(
                                "{count} document{} converted to Markdown",
                                if count == 1 { "" } else { "s" }
                            ),
                            value,
                        )
                    }
                    Err(error) => tool_error(error),
                }
            }
            Target::Table { table, operation } => {
                self.run_table(call, &request, &ctx, &table, &operation)
                    .await
            }
            Target::Action { action } => self.run_action(call, &request, &ctx, &action).await,
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let Some((_, catalogue)) = self.listing(&ctx).await? else {
            return Ok(ListResourcesResult::with_all_items(Vec::new()));
        };
        let mut resources = Vec::new();
        for (app_id, app) in &catalogue.apps {
            resources.push(json!({
                "uri": app.resource_uri,
                "name": app_id,
                "title": app.name,
                "description": app.description,
                "mimeType": UI_MIME_TYPE,
            }));
            if !app.tables.is_empty() {
                resources.push(json!({
                    "uri": format!("sasha://apps/{app_id}/tables"),
                    "name": format!("{app_id} tables"),
                    "mimeType": "application/json",
                }));
            }
            resources.push(json!({
                "uri": format!("sasha://apps/{app_id}/actions"),
                "name": format!("{app_id} actions"),
                "mimeType": "application/json",
            }));
        }
        let resources = resources
            .into_iter()
            .map(from_json::<Resource>)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let caller = caller_of(&ctx)?;
        let templates = if caller.invokes() {
            templates()
                .into_iter()
                .map(from_json::<ResourceTemplate>)
                .collect::<Result<Vec<_>, _>>()?
        } else {
            Vec::new()
        };
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let caller = caller_of(&ctx)?;
        if request.uri.starts_with("ui://") {
            self.read_ui_resource(&caller, &request.uri).await
        } else {
            self.read_data_resource(&caller, &request.uri).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_uris_parse_into_what_they_ask_for() {
        assert_eq!(
            parse_data_uri("sasha://apps/time-sheet/tables"),
            Some(("time-sheet".into(), DataResource::Tables))
        );
        assert_eq!(
            parse_data_uri("sasha://apps/time-sheet/actions"),
            Some(("time-sheet".into(), DataResource::Actions))
        );
        assert_eq!(
            parse_data_uri("sasha://apps/t/tables/entries/rows?q=%7B%22limit%22%3A2%7D"),
            Some((
                "t".into(),
                DataResource::Rows {
                    table: "entries".into(),
                    query: Some("{\"limit\":2}".into())
                }
            ))
        );
        assert_eq!(
            parse_data_uri("sasha://apps/t/tables/entries/rows/42"),
            Some((
                "t".into(),
                DataResource::Row {
                    table: "entries".into(),
                    id: "42".into()
                }
            ))
        );
        assert!(matches!(
            parse_data_uri("sasha://apps/t/tables/entries/aggregate?q=%7B%7D"),
            Some((_, DataResource::Aggregate { .. }))
        ));
        for bad in [
            "sasha://apps/T/tables",
            "sasha://apps/t/tables?x=1",
            "sasha://apps/t/secrets",
            "sasha://other/t/tables",
            "http://apps/t/tables",
            "sasha://apps/t/tables/entries/rows/1/2",
            "sasha://apps/t/tables/entries/rows#x",
            "sasha://apps/x/../t/tables",
            "SASHA://apps/t/tables",
        ] {
            assert_eq!(parse_data_uri(bad), None, "{bad}");
        }
    }

    #[test]
    fn canonical_json_sorts_keys_everywhere() {
        let value = json!({"b": 1, "a": {"d": [ {"z": 1, "y": 2} ], "c": 3}});
        assert_eq!(
            canonical_json(&value),
            r#"{"a":{"c":3,"d":[{"y":2,"z":1}]},"b":1}"#
        );
        // The confirmation binds what the gateway always sent: serde_json's
        // own (sorted) text of the value.
        assert_eq!(canonical_json(&value), value.to_string());
    }

    #[test]
    fn the_ui_meta_is_rebuilt_from_its_typed_fields() {
        let meta = pb::ResourceMeta {
            connect_domains: Vec::new(),
            resource_domains: Vec::new(),
            frame_domains: Vec::new(),
            base_uri_domains: Vec::new(),
            prefers_border: false,
            source_digest: "d1".into(),
        };
        assert_eq!(
            ui_meta(&meta).to_string(),
            json!({
                "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []},
                "permissions": {},
                "prefersBorder": false,
                "sasha": {"sourceDigest": "d1"},
            })
            .to_string()
        );
        let declared = pb::ResourceMeta {
            connect_domains: vec!["https://a.example".into()],
            prefers_border: true,
            ..meta
        };
        let ui = ui_meta(&declared);
        assert_eq!(ui["csp"]["connectDomains"], json!(["https://a.example"]));
        assert_eq!(ui["prefersBorder"], true);
    }

    #[test]
    fn only_an_explicit_accept_allows_the_change() {
        assert!(accepted(
            &json!({"action": "accept", "content": {"confirm": true}})
        ));
        assert!(!accepted(&json!({"action": "accept", "content": {}})));
        assert!(!accepted(&json!({"action": "accept"})));
        assert!(!accepted(
            &json!({"action": "accept", "content": {"confirm": "true"}})
        ));
        assert!(!accepted(
            &json!({"action": "accept", "content": {"confirm": false}})
        ));
        assert!(!accepted(&json!({"action": "decline"})));
        assert!(!accepted(&json!({"action": "cancel"})));
        assert!(!accepted(&Value::Null));
    }
}
