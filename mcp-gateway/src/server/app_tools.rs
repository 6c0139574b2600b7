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
use sasha_contract::actions::CompiledAction;
use sasha_contract::grammar::TableOperation;
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};

use super::approval::{Change, Consent};
use super::{Call, SashaMcp, text_result, tool_error, tool_success};
use crate::calls::{self, DataCall};
use crate::schemas::{Part, SchemaKey};

/// The `_meta` key carrying an idempotency key for a call whose tool has no
/// `idempotencyKey` argument (actions).
const IDEMPOTENCY_META: &str = "sasha/idempotencyKey";

impl SashaMcp {
    pub(super) async fn run_table(
        &self,
        mut call: Call<'_>,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
        table: &str,
        operation: TableOperation,
    ) -> Result<CallToolResponse, McpError> {
        if operation.is_mutating() {
            let key = call
                .args
                .get("idempotencyKey")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| meta_key(request, ctx))
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            let summary = format!(
                "Allow this {} in the {table} table of {}?",
                operation.name(),
                call.app.name
            );
            // The confirmation binds the arguments as the caller sent them;
            // the data request is those arguments with the key it runs under.
            let change = call.change();
            let key = match self
                .gate(&change, call.app, request, ctx, key, &summary)
                .await
            {
                Consent::Given(key) => key,
                Consent::Answered(answer) => return answer,
            };
            call.args["idempotencyKey"] = json!(key);
        }
        let Call {
            caller, app, args, ..
        } = call;
        let result = self
            .execute_text(DataCall {
                caller,
                app,
                operation: operation.name(),
                table,
                request: args,
                action_id: None,
            })
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
        action: &CompiledAction,
    ) -> Result<CallToolResponse, McpError> {
        let mut key = meta_key(request, ctx).unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        if action.mutating {
            let summary = format!("Allow {} to run “{}”?", call.app.name, action.description);
            key = match self
                .gate(&call.change(), call.app, request, ctx, key, &summary)
                .await
            {
                Consent::Given(key) => key,
                Consent::Answered(answer) => return answer,
            };
        }
        let (operation, table, data_request) = match calls::action_request(action, &call.args, &key)
        {
            Ok(parts) => parts,
            Err(error) => return tool_error(error),
        };
        let result = self
            .execute(DataCall {
                caller: call.caller,
                app: call.app,
                operation,
                table: &table,
                request: data_request,
                action_id: Some(&action.id),
            })
            .await;
        let value = match result {
            Ok(value) => calls::project(&action.result_schema, value),
            Err(error) => return tool_error(error),
        };
        let key = SchemaKey::App {
            app: &call.app.id,
            revision: &call.app.revision,
            tool: call.name,
            part: Part::Result,
        };
        if let Err(error) =
            self.gateway
                .validators
                .validate(key, || action.result_schema.clone(), &value)
        {
            tracing::error!(app = %call.app.id, action = %action.id, reason = %error.message, "an action result does not match its resultSchema");
            return tool_error(AppError::new(
                ErrorCode::ActionInvalid,
                "the action's result does not match its declared resultSchema",
            ));
        }
        tool_success(value)
    }
}

impl Call<'_> {
    /// The change this call asks for, as its confirmation binds it.
    fn change(&self) -> Change<'_> {
        Change {
            caller: self.caller,
            tool: self.name,
            arguments: &self.args,
            place: None,
        }
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
