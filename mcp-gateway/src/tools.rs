//! The MCP tools a caller sees of the apps in their catalogue
//! (`CoreService.GetCatalogue`, which lists only apps the caller holds a
//! grant on), as rmcp's own [`Tool`] values.
//!
//! Per app: `open_app__<id>` (always model-visible, linked to the app's UI
//! resource); per declared table the data tools
//! `app__<app>__<table>__<operation>` with input schemas generated from the
//! declared columns by the data contract ([`table_tool_input`], so the
//! grammar's bounds are the ones data-worker enforces) (model- and
//! app-visible); every `exposeToModel` action as `app__<app>__<action>`.
//! App-only tools (the other actions, `sasha__chat_execute`,
//! `sasha__files_upload`) exist only for the Studio browser session bound to
//! that app. A caller without `apps:invoke` sees no app tools at all. Names
//! are the contract's codec (`sasha_contract::tools::ToolTarget`).
//!
//! A listing and a call decide who sees a tool by one rule,
//! [`AppTool::visible`], which builds nothing; a call builds no definition,
//! only (once per app revision, in `crate::schemas`) its schema.
//!
//! This module only describes tools; it never authorises or executes a call.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{JsonObject, MetaObject, Tool, ToolAnnotations};
use sasha_contract::actions::CompiledAction;
use sasha_contract::grammar::TableOperation;
use sasha_contract::tools::{
    AppOnlyTool, MAX_UPLOAD_FILES, ToolTarget, opener_name, table_tool_input, table_tool_name,
};
use serde_json::{Value, json};

use crate::catalogue::{App, Catalogue, DataCapability, DeclaredTable};

/// Who is listing tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller<'a> {
    /// Holds `apps:invoke`; without it no app tool exists.
    pub invokes: bool,
    /// The app a Studio browser session is bound to (its open app), if any:
    /// only that app's app-only tools exist for this caller.
    pub bound_app: Option<&'a str>,
}

/// One tool of one app, resolved against the app's catalogue entry.
#[derive(Debug, Clone, Copy)]
pub enum AppTool<'a> {
    /// `open_app__<id>`.
    Opener,
    /// `app__<app>__<table>__<operation>` on a declared table.
    Table {
        table: &'a str,
        declared: &'a DeclaredTable,
        operation: TableOperation,
    },
    /// `app__<app>__<action>`: the app's compiled action.
    Action(&'a CompiledAction),
    /// `sasha__chat_execute` or `sasha__files_upload`.
    AppOnly(AppOnlyTool),
}

impl<'a> AppTool<'a> {
    /// The tool `target` names in `app`, when the app has one by that name
    /// (whoever asks: [`AppTool::visible`] says who sees it). An app-only
    /// tool names no app: it is the tool of whichever app it is asked of.
    pub fn resolve(app: &'a App, target: &ToolTarget) -> Option<AppTool<'a>> {
        match target {
            ToolTarget::OpenApp { app: id } => (id.as_str() == app.id).then_some(AppTool::Opener),
            ToolTarget::Table {
                app: id,
                table,
                operation,
            } => {
                let (table, declared) = app
                    .tables
                    .get_key_value(table.as_str())
                    .filter(|_| id.as_str() == app.id)?;
                Some(AppTool::Table {
                    table,
                    declared,
                    operation: *operation,
                })
            }
            ToolTarget::Action { app: id, action } => app
                .action(action)
                .filter(|_| id.as_str() == app.id)
                .map(AppTool::Action),
            ToolTarget::AppOnly(tool) => Some(AppTool::AppOnly(*tool)),
            ToolTarget::Platform(_) | ToolTarget::Member(_) => None,
        }
    }

    /// Every tool `app` has, in listing order, whoever asks.
    fn every(app: &'a App) -> impl Iterator<Item = AppTool<'a>> {
        let tables = app.tables.iter().flat_map(|(table, declared)| {
            TableOperation::ALL
                .into_iter()
                .map(move |operation| AppTool::Table {
                    table,
                    declared,
                    operation,
                })
        });
        std::iter::once(AppTool::Opener)
            .chain(tables)
            .chain(app.actions.iter().map(AppTool::Action))
            .chain(AppOnlyTool::ALL.iter().map(|tool| AppTool::AppOnly(*tool)))
    }

    /// Whether `caller` sees this tool of `app`: the one rule a listing and a
    /// call share. Builds nothing.
    pub fn visible(&self, app: &App, caller: &Caller<'_>) -> bool {
        if !caller.invokes {
            return false;
        }
        let bound = caller.bound_app == Some(app.id.as_str());
        let manages = app.manages();
        match self {
            AppTool::Opener => true,
            // An app that declared `data: read` gets no mutating table
            // tools, and a caller without `manage` none for a table only
            // managers write.
            AppTool::Table {
                declared,
                operation,
                ..
            } => {
                !operation.is_mutating()
                    || app.data == DataCapability::ReadWrite
                        && declared.declaration.may_write(manages)
            }
            AppTool::Action(action) => {
                let permitted = !action.operation.is_mutating()
                    || app
                        .tables
                        .get(action.operation.table())
                        .is_some_and(|declared| declared.declaration.may_write(manages));
                (action.model_visible() || bound) && permitted
            }
            AppTool::AppOnly(AppOnlyTool::Chat) => bound && app.chat,
            AppTool::AppOnly(AppOnlyTool::Upload) => bound && app.files,
        }
    }

    /// The tool's MCP name.
    pub fn name(&self, app: &App) -> Cow<'static, str> {
        match self {
            AppTool::Opener => Cow::Owned(opener_name(&app.id)),
            AppTool::Table {
                table, operation, ..
            } => Cow::Owned(table_tool_name(&app.id, table, *operation)),
            AppTool::Action(action) => Cow::Owned(action.mcp_name.clone()),
            AppTool::AppOnly(tool) => Cow::Borrowed(tool.name()),
        }
    }

    /// What the tool takes: the schema a call's arguments are checked
    /// against, as listed.
    pub fn input_schema(&self) -> Value {
        match self {
            AppTool::Opener => {
                json!({"type": "object", "properties": {}, "additionalProperties": false})
            }
            AppTool::Table {
                declared,
                operation,
                ..
            } => table_tool_input(&declared.table, &declared.declaration, *operation).schema,
            AppTool::Action(action) => action.input_schema.clone(),
            AppTool::AppOnly(AppOnlyTool::Chat) => {
                json!({"type": "object", "properties": {"prompt": {"type": "string", "maxLength": 65536}, "newSession": {"type": "boolean"}}, "required": ["prompt"], "additionalProperties": false})
            }
            AppTool::AppOnly(AppOnlyTool::Upload) => {
                json!({"type": "object", "properties": {"files": {"type": "array", "minItems": 1, "maxItems": MAX_UPLOAD_FILES, "items": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 255}, "type": {"type": "string", "maxLength": 255}, "size": {"type": "integer", "minimum": 0}, "dataBase64": {"type": "string"}}, "required": ["name", "dataBase64"], "additionalProperties": false}}}, "required": ["files"], "additionalProperties": false})
            }
        }
    }

    /// The tool as a listing shows it.
    pub fn definition(&self, app: &App) -> Tool {
        let name = self.name(app);
        match self {
            AppTool::Opener => {
                let uri = &app.resource_uri;
                Tool::new(
                    name,
                    format!("Open {}: {}", app.name, app.description),
                    json_object(self.input_schema()),
                )
                .with_title(app.name.clone())
                .with_annotations(ToolAnnotations::new().read_only(true))
                .with_meta(meta(json!({
                    "ui": {"resourceUri": uri, "visibility": visibility(true)},
                    "ui/resourceUri": uri,
                })))
            }
            AppTool::Table {
                table,
                declared,
                operation,
            } => {
                let input = table_tool_input(&declared.table, &declared.declaration, *operation);
                let mut annotations = ToolAnnotations::new().read_only(!operation.is_mutating());
                if *operation == TableOperation::Delete {
                    annotations = annotations.destructive(true);
                }
                Tool::new(
                    name,
                    format!("{} of the {table} table of {}", input.summary, app.name),
                    json_object(input.schema),
                )
                .with_annotations(annotations)
                .with_meta(ui_visibility(true))
            }
            AppTool::Action(action) => {
                let model_visible = action.model_visible();
                Tool::new(
                    name,
                    action.description.clone(),
                    json_object(action.input_schema.clone()),
                )
                .with_raw_output_schema(json_object(output_schema(&action.result_schema)))
                .with_annotations(ToolAnnotations::new().read_only(!action.mutating))
                .with_meta(ui_visibility(model_visible))
            }
            AppTool::AppOnly(tool) => Tool::new(
                name,
                match tool {
                    AppOnlyTool::Chat => "Run a chat turn for the open app",
                    AppOnlyTool::Upload => "Upload documents for the open app",
                },
                json_object(self.input_schema()),
            )
            .with_meta(ui_visibility(false)),
        }
    }
}

/// The tools `caller` may list, from the caller's catalogue.
pub fn tools_for(catalogue: &Catalogue, caller: &Caller<'_>) -> Vec<Tool> {
    if !caller.invokes {
        return Vec::new();
    }
    catalogue
        .apps
        .values()
        .flat_map(|app| {
            AppTool::every(app)
                .filter(|tool| tool.visible(app, caller))
                .map(|tool| tool.definition(app))
        })
        .collect()
}

/// A JSON Schema (or `_meta`) object as rmcp holds it. Every schema here is
/// an object by construction (the contract's, or a compiled action's, which
/// the wire conversion keeps an object); anything else would be a peer's bug,
/// logged and published as the empty schema.
pub(crate) fn json_object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        other => {
            tracing::error!(%other, "a tool schema is not a JSON object");
            Arc::new(JsonObject::new())
        }
    }
}

/// A tool's `_meta`.
pub(crate) fn meta(value: Value) -> MetaObject {
    match value {
        Value::Object(map) => MetaObject(map),
        _ => MetaObject::new(),
    }
}

fn visibility(model: bool) -> Value {
    if model {
        json!(["model", "app"])
    } else {
        json!(["app"])
    }
}

/// `_meta: {ui: {visibility}}`.
fn ui_visibility(model: bool) -> MetaObject {
    meta(json!({"ui": {"visibility": visibility(model)}}))
}

/// The `structuredContent` of a failed call: `{error: envelope}`.
fn error_result_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"error": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "retryable": {"type": "boolean"},
                "diagnosticId": {"type": "string"},
                "details": {"type": "object"},
            },
            "required": ["code", "message", "retryable", "diagnosticId"],
        }},
        "required": ["error"],
        "additionalProperties": false,
    })
}

/// An action's published `outputSchema`: its declared `resultSchema`, or the
/// error envelope. Every result a client receives, success or failure, conforms,
/// so a client that checks `structuredContent` against the schema (as the
/// TypeScript SDK does even for `isError` results) reads failures too.
fn output_schema(result_schema: &Value) -> Value {
    json!({"type": "object", "anyOf": [result_schema, error_result_schema()]})
}

#[cfg(test)]
mod tests {
    use super::*;
    use sasha_contract::caller::AppAccess;
    use sasha_contract::tools::{CHAT_TOOL, UPLOAD_TOOL};
    use sasha_proto::convert::ToWire;
    use sasha_proto::pb;

    /// The listing as a client reads it.
    fn tools_for(catalogue: &Catalogue, caller: &Caller<'_>) -> Vec<Value> {
        super::tools_for(catalogue, caller)
            .iter()
            .map(|tool| serde_json::to_value(tool).unwrap())
            .collect()
    }

    /// The one tool a call named `name` finds for `caller`, as listed.
    fn tool_for(app: &App, caller: &Caller<'_>, name: &str) -> Option<Value> {
        let target = ToolTarget::decode(name)?;
        let tool = AppTool::resolve(app, &target)?;
        tool.visible(app, caller)
            .then(|| serde_json::to_value(tool.definition(app)).unwrap())
    }

    fn column(
        name: &str,
        declared_type: &str,
        not_null: bool,
        default: Option<&str>,
        primary_key: bool,
    ) -> pb::Column {
        pb::Column {
            name: name.into(),
            declared_type: declared_type.into(),
            not_null,
            default_value: default.map(str::to_owned),
            primary_key,
            generated: false,
        }
    }

    fn action(
        id: &str,
        mcp_name: &str,
        visibility: &[&str],
        description: &str,
        mutating: bool,
    ) -> pb::CompiledAction {
        use pb::compiled_action::Operation as Wire;
        let object = pb::JsonObject {
            fields: [("type".to_owned(), pb::JsonValue::from(&json!("object")))].into(),
        };
        pb::CompiledAction {
            id: id.into(),
            visibility: visibility.iter().map(|v| (*v).to_owned()).collect(),
            mcp_name: mcp_name.into(),
            description: description.into(),
            input_schema: Some(object.clone()),
            result_schema: Some(object),
            mutating,
            operation: Some(if mutating {
                Wire::Create(pb::CreateOperation {
                    table: "note_items".into(),
                    values: [("title".to_owned(), "title".to_owned())].into(),
                })
            } else {
                Wire::Aggregate(pb::AggregateOperation {
                    table: "note_items".into(),
                    filters: Vec::new(),
                    group_by: Vec::new(),
                    metrics: vec![pb::Metric {
                        alias: "notes".into(),
                        function: pb::MetricFunction::Count as i32,
                        field: "id".into(),
                    }],
                })
            }),
        }
    }

    fn catalogue() -> Catalogue {
        let notes = pb::CatalogueApp {
            id: "notes".into(),
            access: AppAccess::Use.to_wire(),
            name: "Notes".into(),
            description: "Keep notes".into(),
            revision: "abc".into(),
            resource_uri: "ui://sasha/apps/notes/revisions/abc".into(),
            capabilities: Some(pb::Capabilities {
                chat: true,
                files: false,
                data: pb::DataCapability::ReadWrite as i32,
            }),
            contract_hash: "h".into(),
            tables: [(
                "note_items".to_owned(),
                pb::CatalogueTable {
                    declaration: Some(pb::TableDeclaration {
                        access: pb::Access::Owner as i32,
                        owner_field: Some("created_by".into()),
                        ..Default::default()
                    }),
                    columns: vec![
                        column("id", "INTEGER", false, None, true),
                        column("title", "TEXT", true, None, false),
                        column("stars", "INTEGER", false, Some("0"), false),
                        column("created_by", "TEXT", true, None, false),
                    ],
                    ..Default::default()
                },
            )]
            .into(),
            actions: vec![
                action(
                    "count-notes",
                    "app__notes__count_notes",
                    &["model", "app"],
                    "Count",
                    false,
                ),
                action("add-note", "app__notes__add_note", &["app"], "Add", true),
            ],
            contract: None,
            automation: false,
            preview_scope: None,
        };
        Catalogue::try_from(&pb::Catalogue {
            fingerprint: "f".into(),
            apps: vec![notes],
        })
        .unwrap()
    }

    fn notes(catalogue: &mut Catalogue) -> &mut App {
        catalogue.apps.get_mut("notes").unwrap()
    }

    fn names(tools: &[Value]) -> Vec<&str> {
        tools
            .iter()
            .map(|tool| tool["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn model_callers_see_openers_data_tools_and_exposed_actions() {
        let tools = tools_for(
            &catalogue(),
            &Caller {
                invokes: true,
                bound_app: None,
            },
        );
        assert_eq!(
            names(&tools),
            [
                "open_app__notes",
                "app__notes__note_items__list",
                "app__notes__note_items__get",
                "app__notes__note_items__aggregate",
                "app__notes__note_items__history",
                "app__notes__note_items__export",
                "app__notes__note_items__create",
                "app__notes__note_items__update",
                "app__notes__note_items__delete",
                "app__notes__note_items__import",
                "app__notes__count_notes",
            ]
        );
        let opener = &tools[0];
        assert_eq!(
            opener["_meta"]["ui"]["resourceUri"],
            "ui://sasha/apps/notes/revisions/abc"
        );
        assert_eq!(
            opener["_meta"]["ui/resourceUri"],
            "ui://sasha/apps/notes/revisions/abc"
        );
        for tool in &tools {
            assert_eq!(
                tool["_meta"]["ui"]["visibility"],
                json!(["model", "app"]),
                "{}",
                tool["name"]
            );
        }
    }

    #[test]
    fn a_table_only_managers_write_lists_its_writes_to_managers_only() {
        let mut catalogue = catalogue();
        notes(&mut catalogue)
            .tables
            .get_mut("note_items")
            .unwrap()
            .declaration
            .write = sasha_contract::data::WritePolicy::Manage;
        // Bound to the app, so the app-only mutating action would be listed too.
        let caller = Caller {
            invokes: true,
            bound_app: Some("notes"),
        };
        let writes = [
            "app__notes__note_items__create",
            "app__notes__note_items__update",
            "app__notes__note_items__delete",
            "app__notes__add_note",
        ];
        let listed = |catalogue: &Catalogue| -> Vec<String> {
            names(&tools_for(catalogue, &caller))
                .into_iter()
                .map(str::to_owned)
                .collect()
        };
        let use_holder = listed(&catalogue);
        for name in writes {
            assert!(
                !use_holder.iter().any(|listed| listed == name),
                "{name} listed to a use holder"
            );
            assert!(
                tool_for(&catalogue.apps["notes"], &caller, name).is_none(),
                "{name}"
            );
        }
        for name in ["app__notes__note_items__list", "app__notes__count_notes"] {
            assert!(
                use_holder.iter().any(|listed| listed == name),
                "{name} missing"
            );
        }
        notes(&mut catalogue).access = AppAccess::Manage;
        let manager = listed(&catalogue);
        for name in writes {
            assert!(
                manager.iter().any(|listed| listed == name),
                "{name} missing for a manager"
            );
            assert!(
                tool_for(&catalogue.apps["notes"], &caller, name).is_some(),
                "{name}"
            );
        }
    }

    #[test]
    fn a_single_tool_is_exactly_the_one_listed_and_only_when_listed() {
        let mut catalogue = catalogue();
        notes(&mut catalogue).files = true;
        let app = &catalogue.apps["notes"];
        let unknown = [
            "open_app__other",
            "app__notes__note_items__drop",
            "app__notes__missing",
            "app__notes__note_items",
            "sasha__files_upload_x",
        ];
        for bound_app in [None, Some("notes"), Some("other")] {
            {
                let caller = Caller {
                    invokes: true,
                    bound_app,
                };
                let listed = tools_for(&catalogue, &caller);
                for tool in &listed {
                    let name = tool["name"].as_str().unwrap();
                    assert_eq!(tool_for(app, &caller, name).as_ref(), Some(tool), "{name}");
                }
                // What the caller does not list does not exist for one call either.
                let app_only = [
                    "app__notes__add_note",
                    "sasha__chat_execute",
                    "sasha__files_upload",
                ];
                for name in unknown.iter().chain(&app_only) {
                    let listed_here = listed.iter().any(|tool| tool["name"] == *name);
                    assert_eq!(
                        tool_for(app, &caller, name).is_some(),
                        listed_here,
                        "{name} for {bound_app:?}"
                    );
                }
                let without = Caller {
                    invokes: false,
                    ..caller
                };
                assert_eq!(tool_for(app, &without, "open_app__notes"), None);
            }
        }
        // A read-only app has no mutating table tool, listed or called.
        let mut read_only = catalogue.clone();
        notes(&mut read_only).data = DataCapability::Read;
        let caller = Caller {
            invokes: true,
            bound_app: None,
        };
        assert_eq!(
            tool_for(
                &read_only.apps["notes"],
                &caller,
                "app__notes__note_items__create"
            ),
            None
        );
        assert!(
            tool_for(
                &read_only.apps["notes"],
                &caller,
                "app__notes__note_items__list"
            )
            .is_some()
        );
    }

    #[test]
    fn the_bound_studio_session_also_sees_app_only_tools() {
        let caller = Caller {
            invokes: true,
            bound_app: Some("notes"),
        };
        let tools = tools_for(&catalogue(), &caller);
        let names = names(&tools);
        assert!(names.contains(&"app__notes__add_note"));
        assert!(names.contains(&"sasha__chat_execute"));
        assert!(
            !names.contains(&"sasha__files_upload"),
            "files was not declared"
        );
        let app_only = tools
            .iter()
            .find(|t| t["name"] == "app__notes__add_note")
            .unwrap();
        assert_eq!(app_only["_meta"]["ui"]["visibility"], json!(["app"]));
        // Bound to another app: none of these.
        let other = tools_for(
            &catalogue(),
            &Caller {
                invokes: true,
                bound_app: Some("other"),
            },
        );
        assert!(!names_contains(&other, "app__notes__add_note"));
    }

    fn names_contains(tools: &[Value], name: &str) -> bool {
        tools.iter().any(|tool| tool["name"] == name)
    }

    #[test]
    fn without_apps_invoke_there_are_no_app_tools() {
        assert!(
            tools_for(
                &catalogue(),
                &Caller {
                    invokes: false,
                    bound_app: Some("notes"),
                }
            )
            .is_empty()
        );
    }

    #[test]
    fn data_tool_schemas_follow_the_declared_columns() {
        let tools = tools_for(
            &catalogue(),
            &Caller {
                invokes: true,
                bound_app: None,
            },
        );
        let tool = |name: &str| tools.iter().find(|t| t["name"] == name).unwrap().clone();
        let create = tool("app__notes__note_items__create");
        let values = &create["inputSchema"]["properties"]["values"];
        // The integer id and the owner field are the platform's to set.
        assert_eq!(
            values["properties"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["stars", "title"]
        );
        assert_eq!(values["required"], json!(["title"]));
        assert_eq!(
            values["properties"]["stars"]["type"],
            json!(["integer", "null"])
        );
        assert_eq!(values["additionalProperties"], false);
        let list = tool("app__notes__note_items__list");
        let fields =
            &list["inputSchema"]["properties"]["where"]["items"]["properties"]["field"]["enum"];
        assert_eq!(
            fields,
            &json!(["id", "title", "stars"]),
            "the owner field is not filterable"
        );
        assert_eq!(list["inputSchema"]["properties"]["limit"]["maximum"], 200);
        let select = &list["inputSchema"]["properties"]["select"]["items"]["enum"];
        assert!(
            select.as_array().unwrap().contains(&json!("created_by")),
            "but it is readable"
        );
        let delete = tool("app__notes__note_items__delete");
        assert_eq!(delete["annotations"]["destructiveHint"], true);
        assert_eq!(
            delete["inputSchema"]["required"],
            json!(["id", "expectedVersion"])
        );
        assert_eq!(
            tool("app__notes__note_items__get")["annotations"]["readOnlyHint"],
            true
        );
    }

    #[test]
    fn read_only_data_apps_have_no_mutating_table_tools() {
        let mut catalogue = catalogue();
        notes(&mut catalogue).data = DataCapability::Read;
        let tools = tools_for(
            &catalogue,
            &Caller {
                invokes: true,
                bound_app: None,
            },
        );
        let names = names(&tools);
        assert!(names.contains(&"app__notes__note_items__list"));
        for operation in ["create", "update", "delete"] {
            assert!(!names.contains(&format!("app__notes__note_items__{operation}").as_str()));
        }
    }

    #[test]
    fn table_tool_bounds_are_the_grammars() {
        use sasha_contract::grammar::{MAX_LIMIT, MAX_METRICS, MAX_ORDER_BY, MAX_WHERE};
        let tools = tools_for(
            &catalogue(),
            &Caller {
                invokes: true,
                bound_app: None,
            },
        );
        let input = |name: &str| {
            tools.iter().find(|t| t["name"] == name).unwrap()["inputSchema"]["properties"].clone()
        };
        let list = input("app__notes__note_items__list");
        assert_eq!(list["limit"]["maximum"], json!(MAX_LIMIT));
        assert_eq!(list["where"]["maxItems"], json!(MAX_WHERE));
        assert_eq!(list["orderBy"]["maxItems"], json!(MAX_ORDER_BY));
        let aggregate = input("app__notes__note_items__aggregate");
        assert_eq!(aggregate["metrics"]["maxItems"], json!(MAX_METRICS));
        assert_eq!(aggregate["where"]["maxItems"], json!(MAX_WHERE));
    }

    #[test]
    fn names_resolve_to_the_typed_app_tools() {
        let catalogue = catalogue();
        let app = &catalogue.apps["notes"];
        let resolve = |name: &str| AppTool::resolve(app, &ToolTarget::decode(name)?);
        assert!(matches!(resolve("open_app__notes"), Some(AppTool::Opener)));
        assert!(matches!(
            resolve("app__notes__note_items__update"),
            Some(AppTool::Table {
                table: "note_items",
                operation: TableOperation::Update,
                ..
            })
        ));
        assert!(matches!(
            resolve("app__notes__add_note"),
            Some(AppTool::Action(action)) if action.id == "add-note"
        ));
        assert!(matches!(
            resolve(CHAT_TOOL),
            Some(AppTool::AppOnly(AppOnlyTool::Chat))
        ));
        assert!(matches!(
            resolve(UPLOAD_TOOL),
            Some(AppTool::AppOnly(AppOnlyTool::Upload))
        ));
        for nothing in [
            "app__notes__note_items__drop",
            "app__notes__missing",
            "app__notes__other_table__list",
            "open_app__other",
            "app__other__note_items__list",
            "getDocs",
        ] {
            assert!(resolve(nothing).is_none(), "{nothing}");
        }
        // Every action's published name is the codec's, so it resolves.
        for action in &app.actions {
            assert!(
                matches!(resolve(&action.mcp_name), Some(AppTool::Action(found)) if found.id == action.id)
            );
        }
    }
}
