//! The undo tools (`listAppActivity`, `previewAppUndo`, `undoAppChanges`):
//! the app named in the arguments is read from the caller's catalogue with
//! their grant fresh, like a table tool's, and the call goes to the app's
//! data-worker (`activity`, `undo-preview`, `undo`), which computes
//! everything from the app's ledger and decides again; applying an undo
//! needs the person's yes through [`super::approval`], as a table change
//! does.
//!
//! What it must never do: send an undo the gate did not let through, or
//! reach the data of an app the caller does not manage.

use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use sasha_contract::caller::AppAccess;
use sasha_contract::tools::PlatformTool;
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};

use super::approval::{Change, Consent};
use super::{SashaMcp, text_result, tool_error};
use crate::auth::Caller;
use crate::calls::DataCall;

impl SashaMcp {
    pub(super) async fn call_undo(
        &self,
        caller: &Caller,
        tool: PlatformTool,
        mut args: Value,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let app_id = args["app"].as_str().unwrap_or_default().to_owned();
        let catalogue = match self.catalogue(caller, Some(&app_id)).await {
            Ok(catalogue) => catalogue,
            Err(error) => return tool_error(error),
        };
        let Some(app) = catalogue.apps.get(&app_id) else {
            return tool_error(AppError::new(
                ErrorCode::NotFound,
                "no such app, or you have no access to it",
            ));
        };
        if app.access != AppAccess::Manage {
            return tool_error(AppError::new(
                ErrorCode::AccessDenied,
                "only the app's managers may see its activity and undo its changes",
            ));
        }
        let operation = match tool {
            PlatformTool::ListAppActivity => "activity",
            PlatformTool::PreviewAppUndo => "undo-preview",
            PlatformTool::UndoAppChanges => "undo",
            _ => return tool_error(AppError::from_code(ErrorCode::Internal)),
        };
        if tool == PlatformTool::UndoAppChanges {
            let key = args["idempotencyKey"]
                .as_str()
                .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
            let summary = format!("Allow undoing these changes to {}'s data?", app.name);
            let change = Change {
                caller,
                tool: tool.name(),
                arguments: &args,
                place: None,
            };
            let key = match self.gate(&change, app, request, ctx, key, &summary).await {
                Consent::Given(key) => key,
                Consent::Answered(answer) => return answer,
            };
            args["idempotencyKey"] = json!(key);
        }
        if let Some(object) = args.as_object_mut() {
            object.remove("app");
        }
        let result = self
            .execute_text(DataCall {
                caller,
                app,
                operation,
                table: "",
                request: args,
                action_id: None,
            })
            .await;
        match result {
            Ok((value, text)) => text_result(text, value),
            Err(error) => tool_error(error),
        }
    }
}
