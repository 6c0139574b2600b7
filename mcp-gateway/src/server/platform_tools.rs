//! Calls to the platform tools (`getDocs`, `suggestImprovement`, the source
//! tools, `createApp`, the history, draft and lifecycle tools) and the
//! member app tools: the tool must be one this caller is offered (the
//! listing's own rule), its arguments are checked against its schema
//! (compiled once per process), then it is sent as one `CoreService` call.
//!
//! What it must never do: decide access itself (studio-core decides again on
//! every call), or send a publication, deploy or revert as approved without
//! the person's yes ([`SashaMcp::approved`]).

use rmcp::model::{CallToolRequestParams, CallToolResponse, Tool};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use sasha_contract::tools::{MemberTool, PlatformFamily, PlatformTool};
use sasha_proto::pb::{self, CreateAppRequest, SourceFilesRequest, SuggestRequest};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};

use super::approval::Change;
use super::{SashaMcp, answered, text_result, tool_error, unknown_tool};
use crate::auth::Caller;
use crate::schemas::SchemaKey;
use crate::{member, platform};

impl SashaMcp {
    /// Checks `args` against the input schema of `definition`, the tool
    /// named `name` (the same for every caller, so compiled once).
    fn checked(&self, name: &'static str, definition: &Tool, args: &Value) -> Result<(), AppError> {
        self.gateway.validators.validate(
            SchemaKey::Platform(name),
            || Value::Object((*definition.input_schema).clone()),
            args,
        )
    }

    /// `getDocs`, `suggestImprovement`, the six source tools, `createApp`,
    /// the four history tools, the two draft tools and the three lifecycle
    /// tools. A tool not listed for this caller is the protocol's "not
    /// found"; arguments its schema refuses are the tool's
    /// `APP_INPUT_INVALID`.
    pub(super) async fn call_platform(
        &self,
        caller: &Caller,
        tool: PlatformTool,
        args: Value,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if !platform::visible(caller, tool) {
            return unknown_tool(tool.name());
        }
        if let Err(error) = self.checked(tool.name(), platform::definition(tool), &args) {
            return tool_error(error);
        }
        let mut core = self.gateway.core.clone();
        match tool.family() {
            PlatformFamily::Docs => {
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
            PlatformFamily::Suggest => {
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
            PlatformFamily::Create => {
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
            PlatformFamily::History => {
                let Some(request) = platform::history_request(tool, &caller.principal, &args)
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
            PlatformFamily::Draft => self.call_draft(caller, tool, &args, request, ctx).await,
            PlatformFamily::Undo => self.call_undo(caller, tool, args, request, ctx).await,
            PlatformFamily::Lifecycle => {
                let Some(request) = platform::lifecycle_request(tool, &caller.principal, &args)
                else {
                    return tool_error(AppError::from_code(ErrorCode::InputInvalid));
                };
                match core.app_lifecycle(request).await {
                    Ok(reply) => {
                        let (text, result) = platform::lifecycle_result(tool, &reply.into_inner());
                        text_result(text, result)
                    }
                    Err(status) => tool_error(AppError::from_status(&status)),
                }
            }
            PlatformFamily::Source => {
                let operation = tool.name();
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

    /// `publishAppDraft` and `discardAppDraft`. A publication goes through
    /// [`SashaMcp::approved`]; a discard is sent as it is.
    async fn call_draft(
        &self,
        caller: &Caller,
        tool: PlatformTool,
        args: &Value,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let draft = |approval| platform::draft_request(tool, &caller.principal, args, approval);
        let (Some(unapproved), Some(approved)) = (
            draft(pb::DraftApproval::Unspecified),
            draft(pb::DraftApproval::Elicitation),
        ) else {
            return tool_error(AppError::from_code(ErrorCode::InputInvalid));
        };
        if tool != PlatformTool::PublishAppDraft {
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
        let change = Change {
            caller,
            tool: tool.name(),
            arguments: args,
            place: Some("Studio's Draft page"),
        };
        self.approved(&change, request, ctx, send).await
    }

    /// The member app tools; a deploy, revert, share or delete goes through
    /// [`SashaMcp::approved`].
    pub(super) async fn call_member(
        &self,
        caller: &Caller,
        tool: MemberTool,
        args: Value,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if !member::visible(caller, tool) {
            return unknown_tool(tool.name());
        }
        if let Err(error) = self.checked(tool.name(), member::definition(tool), &args) {
            return tool_error(error);
        }
        let (Some(unapproved), Some(approved)) = (
            member::request(tool, &caller.principal, &args, false),
            member::request(tool, &caller.principal, &args, true),
        ) else {
            return tool_error(AppError::new(
                ErrorCode::InputInvalid,
                "every file needs its path and content",
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
                member::result(tool, &reply.into_inner()).ok_or_else(|| {
                    tracing::error!("studio-core sent a member apps reply without a result");
                    AppError::from_code(ErrorCode::Internal)
                })
            }
        };
        if !tool.needs_approval() {
            return answered(send(false).await);
        }
        let change = Change {
            caller,
            tool: tool.name(),
            arguments: &args,
            place: Some("App Studio"),
        };
        self.approved(&change, request, ctx, send).await
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
