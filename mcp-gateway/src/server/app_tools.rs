//! A call to one app's table or action tool: the idempotency key it runs
//! under (its argument, the request's `_meta`, or a new one), the person's
//! yes to a mutation through [`super::approval`], one governed
//! `DataService.Execute`, and an action's result shaped to and checked
//! against its `resultSchema`.
//!
//! What it must never do: run a mutation the gate did not let through, or
//! return an action result its `resultSchema` refuses.

use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};

use super::approval::Gate;
use super::{Call, SashaMcp, text_result, tool_error, tool_success};
use crate::calls;
use crate::tools;

/// The `_meta` key carrying an idempotency key for a call whose tool has no
/// `idempotencyKey` argument (actions).
const IDEMPOTENCY_META: &str = "sasha/idempotencyKey";

impl SashaMcp {
    pub(super) async fn run_table(
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

    pub(super) async fn run_action(
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

/// An idempotency key passed in the request's `_meta`.
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
