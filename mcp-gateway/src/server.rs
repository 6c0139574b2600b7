//! The MCP server handler behind `/mcp` (rmcp's streamable HTTP transport).
//!
//! Nothing here is cached across requests: each `tools/list`, `tools/call`,
//! `resources/list` and `resources/read` asks studio-core for the caller's
//! catalogue, so a grant revoked a moment ago is already gone. The caller was
//! authenticated by [`crate::auth::authenticate`] for this very HTTP request.
//!
//! A call is one pipeline: its tool's name decoded once into what it names
//! (`ToolTarget`, the contract's codec; the header `Mcp-Name` already decoded
//! it when it names the same tool), resolved against the caller's catalogue
//! and checked visible by the listing's own rule, its arguments checked by
//! the validator compiled once per app revision and tool, then run.
//!
//! Failures of a tool are tool results (`isError: true`) whose
//! `structuredContent.error` is the spec's envelope; an unknown tool is JSON-RPC
//! `-32602`. An app-only or unreachable action is `APP_ACTION_UNAVAILABLE`.
//!
//! This module is the router: the handler's methods, the catalogue it asks
//! for and the result helpers. A table or action call is in `app_tools`, a
//! platform or member app call in `platform_tools`, the person's yes to a
//! change in `approval`, and resources in `resources`.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, Resource, ResourceTemplate,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use sasha_contract::AppId;
use sasha_contract::tools::{AppOnlyTool, ToolTarget};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};

use self::resources::templates;
use crate::Gateway;
use crate::auth::Caller;
use crate::calls::{self, DataCall};
use crate::catalogue::{self, App, Catalogue};
use crate::schemas::{Part, SchemaKey};
use crate::tools::{self, AppTool};
use crate::{member, platform};

mod app_tools;
mod approval;
mod platform_tools;
mod resources;
mod undo_tools;

/// The MIME type of an MCP Apps UI resource.
pub const UI_MIME_TYPE: &str = "text/html;profile=mcp-app";

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

fn caller_of(ctx: &RequestContext<RoleServer>) -> Result<&Caller, McpError> {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
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

/// The protocol's answer to a tool that does not exist for this caller.
fn unknown_tool(name: &str) -> Result<CallToolResponse, McpError> {
    Err(McpError::invalid_params(
        format!("Tool {name} not found"),
        None,
    ))
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

/// One resolved call of an app's tool.
struct Call<'a> {
    caller: &'a Caller,
    /// The app's catalogue entry, as studio-core answered it for this call.
    app: &'a App,
    /// The tool's name, as the caller sent it.
    name: &'a str,
    /// The arguments, already checked against the tool's input schema.
    args: Value,
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
        // One app for a bearer access token whose call named its tool only in
        // the body (an older client sends no Mcp-Name): as `AuthorizeCall`
        // reads it with the credential, like a call that named it, so a
        // script's write consent holds whichever way the tool was named.
        if let (Some(app), None, Some(credential)) = (app_id, &caller.preview, &caller.credential)
            && caller.kind == sasha_contract::caller::PrincipalKind::Access
        {
            let (_, prefetched) = crate::auth::authorize_call(
                &self.gateway,
                credential.clone(),
                app,
                known_contract_hash.clone(),
            )
            .await?;
            if let Some(prefetched) = prefetched {
                return Ok(prefetched.catalogue.clone());
            }
        }
        // A draft preview sees its one app, as the draft, and nothing else.
        let app_id = match &caller.preview {
            Some(_) => caller.bound_app.as_ref().map(AppId::as_str),
            None => app_id,
        };
        catalogue::fetch(
            &self.gateway.core,
            self.gateway.call_deadline,
            &caller.principal,
            app_id,
            known_contract_hash,
            caller.preview.as_deref(),
        )
        .await
    }

    async fn execute(&self, call: DataCall<'_>) -> Result<Value, AppError> {
        self.execute_text(call).await.map(|(value, _)| value)
    }

    /// [`SashaMcp::execute`], also giving data-worker's JSON text of the result.
    async fn execute_text(&self, call: DataCall<'_>) -> Result<(Value, String), AppError> {
        let (caller, app_id) = (call.caller, call.app.id.as_str());
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
            self.gateway.call_deadline,
            &self.gateway.contracts,
            call,
            fetch_contract,
        )
        .await
    }

    /// The caller's catalogue for a listing, or `None` for a caller without
    /// `apps:invoke` (who lists nothing).
    async fn listing(&self, caller: &Caller) -> Result<Option<Catalogue>, McpError> {
        if !caller.invokes() {
            return Ok(None);
        }
        let catalogue = self
            .catalogue(caller, None)
            .await
            .map_err(|error| protocol_error(&error))?;
        Ok(Some(catalogue))
    }

    /// A call of one app's tool (`target` names an app, or is app-only):
    /// the app's catalogue entry, the tool as this caller would list it, its
    /// arguments checked, then run.
    async fn call_app_tool(
        &self,
        caller: &Caller,
        target: &ToolTarget,
        name: &str,
        args: Value,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let absent = || -> Result<CallToolResponse, McpError> {
            if matches!(target, ToolTarget::Action { .. }) {
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
                unknown_tool(name)
            }
        };
        let tools_caller = caller.tools_caller();
        let app_id = match target {
            ToolTarget::AppOnly(_) => tools_caller.bound_app,
            named => named.app().map(AppId::as_str),
        };
        let Some(app_id) = app_id.filter(|_| caller.invokes()) else {
            return absent();
        };
        let catalogue = match self.catalogue(caller, Some(app_id)).await {
            Ok(catalogue) => catalogue,
            Err(error) => return tool_error(error),
        };
        let Some(app) = catalogue.apps.get(app_id) else {
            return absent();
        };
        let Some(tool) =
            AppTool::resolve(app, target).filter(|tool| tool.visible(app, &tools_caller))
        else {
            return absent();
        };
        let key = SchemaKey::App {
            app: &app.id,
            revision: &app.revision,
            tool: name,
            part: Part::Input,
        };
        if let Err(error) = self
            .gateway
            .validators
            .validate(key, || tool.input_schema(), &args)
        {
            return tool_error(error);
        }
        let call = Call {
            caller,
            app,
            name,
            args,
        };
        match tool {
            AppTool::Opener => tool_success(json!({
                "appId": app.id,
                "name": app.name,
                "revision": app.revision,
                "resourceUri": app.resource_uri,
            })),
            AppTool::AppOnly(AppOnlyTool::Chat) => {
                let progress = progress_token(request, ctx);
                match crate::assist::chat(&self.gateway, caller, app, &call.args, progress, ctx)
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
            AppTool::AppOnly(AppOnlyTool::Upload) => {
                let progress = progress_token(request, ctx);
                match crate::assist::upload(&self.gateway, caller, app, &call.args, progress, ctx)
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
            AppTool::Table {
                table, operation, ..
            } => self.run_table(call, request, ctx, table, operation).await,
            AppTool::Action(action) => self.run_action(call, request, ctx, action).await,
        }
    }
}

/// A tool's result, or its refusal.
fn answered(outcome: Result<(String, Value), AppError>) -> Result<CallToolResponse, McpError> {
    match outcome {
        Ok((text, value)) => text_result(text, value),
        Err(error) => tool_error(error),
    }
}

/// A successful result with its own text part.
fn text_result(text: String, value: Value) -> Result<CallToolResponse, McpError> {
    Ok(complete(text, value, None))
}

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
        let catalogue = self.listing(caller).await?;
        let manages_an_app = catalogue.as_ref().is_some_and(|catalogue| {
            catalogue
                .apps
                .values()
                .any(|app| app.access == sasha_contract::caller::AppAccess::Manage)
        });
        let mut listed = platform::listed_for(caller, manages_an_app);
        listed.extend(member::tools_for(caller));
        if let Some(catalogue) = catalogue {
            listed.extend(tools::tools_for(&catalogue, &caller.tools_caller()));
        }
        Ok(ListToolsResult::with_all_items(listed))
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = caller_of(&ctx)?;
        let args = Value::Object(request.arguments.take().unwrap_or_default());
        let name = request.name.as_ref();
        // Decoded once: by the authentication step when the request's
        // headers name this very tool, else here.
        let decoded;
        let target = match caller.named_tool(name) {
            Some(target) => target,
            None => match ToolTarget::decode(name) {
                Some(target) => {
                    decoded = target;
                    &decoded
                }
                None => return unknown_tool(name),
            },
        };
        match target {
            ToolTarget::Platform(tool) => {
                self.call_platform(caller, *tool, args, &request, &ctx)
                    .await
            }
            ToolTarget::Member(tool) => self.call_member(caller, *tool, args, &request, &ctx).await,
            ToolTarget::OpenApp { .. }
            | ToolTarget::Table { .. }
            | ToolTarget::Action { .. }
            | ToolTarget::AppOnly(_) => {
                self.call_app_tool(caller, target, name, args, &request, &ctx)
                    .await
            }
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let caller = caller_of(&ctx)?;
        let Some(catalogue) = self.listing(caller).await? else {
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
            self.read_ui_resource(caller, &request.uri).await
        } else {
            self.read_data_resource(caller, &request.uri).await
        }
    }
}

#[cfg(test)]
mod tests {
    use sasha_contract::canonical::canonical_json;
    use sasha_proto::convert::ui_meta;
    use sasha_proto::pb;

    use super::approval::accepted;
    use super::resources::{DataResource, parse_data_uri};
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
