//! The MCP tools a caller sees, computed from studio-core's catalogue for that
//! caller (`CoreService.GetCatalogue`, which lists only apps the caller holds a
//! grant on).
//!
//! Per app: `open_app__<id>` (always model-visible, linked to the app's UI
//! resource); per declared table the six data tools
//! `app__<app>__<table>__list|get|aggregate|create|update|delete` with input
//! schemas generated from the declared columns by the data contract
//! ([`table_tool_input`], so the grammar's bounds are the ones data-worker
//! enforces) (model- and app-visible); every
//! `exposeToModel` action as `app__<app>__<action>`. App-only tools (the other
//! actions, `sasha__chat_execute`, `sasha__files_upload`) exist only for the
//! Studio browser session bound to that app. A caller without `apps:invoke` sees
//! no app tools at all. Ids map `-` to `_`.
//!
//! This module only describes tools; it never authorises or executes a call.

use sasha_contract::actions::CompiledAction;
use sasha_contract::grammar::OPERATIONS;
pub use sasha_contract::tools::tool_name;
use sasha_contract::tools::{CHAT_TOOL, UPLOAD_TOOL, table_tool_input};
use serde_json::{Value, json};

use crate::catalogue::{App, Catalogue, DataCapability, DeclaredTable};

/// Who is listing tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Holds `apps:invoke`; without it no app tool exists.
    pub invokes: bool,
    /// The app a Studio browser session is bound to (its open app), if any:
    /// only that app's app-only tools exist for this caller.
    pub bound_app: Option<String>,
}

/// What a tool name refers to inside one app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `open_app__<id>`.
    Open,
    /// `app__<app>__<table>__<operation>`.
    Table { table: String, operation: String },
    /// `app__<app>__<action>`; the catalogue entry of the action.
    Action { action: String },
    /// `sasha__chat_execute`.
    ChatExecute,
    /// `sasha__files_upload`.
    FilesUpload,
}

/// The app id a tool name belongs to (`-` restored from `_`), or `None` when the
/// name has no app part. App ids are kebab-case without underscores, so the
/// mapping is injective.
pub fn app_of(name: &str) -> Option<String> {
    let rest = name
        .strip_prefix("open_app__")
        .or_else(|| name.strip_prefix("app__"))?;
    let encoded = rest.split("__").next()?;
    if encoded.is_empty()
        || !encoded
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return None;
    }
    Some(encoded.replace('_', "-"))
}

/// Whether `name` has the shape of an action tool (`app__<app>__<action>`): an
/// unknown or unreachable one is answered `APP_ACTION_UNAVAILABLE`, not as an
/// unknown tool.
pub fn is_action_shaped(name: &str) -> bool {
    name.strip_prefix("app__")
        .map(|rest| rest.split("__").count() == 2 && app_of(name).is_some())
        .unwrap_or(false)
}

/// What `name` names in `app` (a catalogue entry), independent of who asks.
pub fn classify(app: &App, name: &str) -> Option<Target> {
    match name {
        CHAT_TOOL => return Some(Target::ChatExecute),
        UPLOAD_TOOL => return Some(Target::FilesUpload),
        _ => {}
    }
    if name == opener_name(&app.id) {
        return Some(Target::Open);
    }
    for table in app.tables.keys() {
        for operation in OPERATIONS {
            if name == tool_name(&[&app.id, table, operation]) {
                return Some(Target::Table {
                    table: table.clone(),
                    operation: operation.to_owned(),
                });
            }
        }
    }
    app.actions
        .iter()
        .find(|action| action.mcp_name == name)
        .map(|action| Target::Action {
            action: action.id.clone(),
        })
}

/// `open_app__<id>` with `-` → `_`.
fn opener_name(app_id: &str) -> String {
    format!("open_app__{}", app_id.replace('-', "_"))
}

pub use sasha_contract::grammar::is_mutating;

/// The tools `caller` may list, from the caller's catalogue.
pub fn tools_for(catalogue: &Catalogue, caller: &Caller) -> Vec<Value> {
    let mut tools = Vec::new();
    if !caller.invokes {
        return tools;
    }
    for app in catalogue.apps.values() {
        app_tools(app, caller, None, &mut tools);
    }
    tools
}

/// The one tool named `name` of `app` as [`tools_for`] would list it to
/// `caller`, or `None` when that caller would not see it. A call builds only
/// this definition, not the app's whole tool list.
pub fn tool_for(app: &App, caller: &Caller, name: &str) -> Option<Value> {
    if !caller.invokes {
        return None;
    }
    let mut tools = Vec::new();
    app_tools(app, caller, Some(name), &mut tools);
    tools.pop()
}

/// Appends the tools of one app that `caller` may see, in listing order; with
/// `only`, just the tool of that name (each name is checked before its
/// definition is built).
fn app_tools(app: &App, caller: &Caller, only: Option<&str>, tools: &mut Vec<Value>) {
    let wanted = |name: &str| only.is_none_or(|only| only == name);
    let bound = caller.bound_app.as_deref() == Some(app.id.as_str());
    if wanted(&opener_name(&app.id)) {
        tools.push(open_app_tool(app));
    }
    // An app that declared `data: read` gets no mutating table tools, and a
    // caller without `manage` none for a table only managers write.
    let writes = app.data == DataCapability::ReadWrite;
    let manages = app.manages();
    for (table, declared) in &app.tables {
        let may_write = writes && declared.declaration.may_write(manages);
        for operation in OPERATIONS {
            if is_mutating(operation) && !may_write
                || !wanted(&tool_name(&[&app.id, table, operation]))
            {
                continue;
            }
            if let Some(tool) = table_tool(app, table, declared, operation) {
                tools.push(tool);
            }
        }
    }
    for action in &app.actions {
        let model_visible = action.model_visible();
        let permitted = !action.operation.is_mutating()
            || app
                .tables
                .get(action.operation.table())
                .is_some_and(|declared| declared.declaration.may_write(manages));
        if (model_visible || bound) && permitted && wanted(&action.mcp_name) {
            tools.push(action_tool(action, model_visible));
        }
    }
    if bound {
        if app.chat && wanted(CHAT_TOOL) {
            tools.push(app_only_tool(
                CHAT_TOOL,
                "Run a chat turn for the open app",
                json!({"type": "object", "properties": {"prompt": {"type": "string", "maxLength": 65536}, "newSession": {"type": "boolean"}}, "required": ["prompt"], "additionalProperties": false}),
            ));
        }
        if app.files && wanted(UPLOAD_TOOL) {
            tools.push(app_only_tool(
                UPLOAD_TOOL,
                "Upload documents for the open app",
                json!({"type": "object", "properties": {"files": {"type": "array", "minItems": 1, "maxItems": 10, "items": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 255}, "type": {"type": "string", "maxLength": 255}, "size": {"type": "integer", "minimum": 0}, "dataBase64": {"type": "string"}}, "required": ["name", "dataBase64"], "additionalProperties": false}}}, "required": ["files"], "additionalProperties": false}),
            ));
        }
    }
}

fn visibility(model: bool) -> Value {
    if model {
        json!(["model", "app"])
    } else {
        json!(["app"])
    }
}

fn open_app_tool(app: &App) -> Value {
    let uri = &app.resource_uri;
    json!({
        "name": opener_name(&app.id),
        "title": app.name,
        "description": format!("Open {}: {}", app.name, app.description),
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
        "annotations": {"readOnlyHint": true},
        "_meta": {"ui": {"resourceUri": uri, "visibility": visibility(true)}, "ui/resourceUri": uri},
    })
}

fn app_only_tool(name: &str, description: &str, input: Value) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": input,
        "_meta": {"ui": {"visibility": visibility(false)}},
    })
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

fn action_tool(action: &CompiledAction, model_visible: bool) -> Value {
    json!({
        "name": action.mcp_name,
        "description": action.description,
        "inputSchema": action.input_schema,
        "outputSchema": output_schema(&action.result_schema),
        "annotations": {"readOnlyHint": !action.mutating},
        "_meta": {"ui": {"visibility": visibility(model_visible)}},
    })
}

/// One per-table data tool; its input schema is the data contract's
/// ([`table_tool_input`]), so the grammar's bounds are published as they are
/// enforced.
fn table_tool(app: &App, table: &str, declared: &DeclaredTable, operation: &str) -> Option<Value> {
    let input = table_tool_input(&declared.table, &declared.declaration, operation)?;
    let schema = input.schema;
    let mut annotations = json!({"readOnlyHint": input.read_only});
    if operation == "delete"
        && let Some(annotations) = annotations.as_object_mut()
    {
        annotations.insert("destructiveHint".to_owned(), json!(true));
    }
    Some(json!({
        "name": tool_name(&[&app.id, table, operation]),
        "description": format!("{} of the {table} table of {}", input.summary, app.name),
        "inputSchema": schema,
        "annotations": annotations,
        "_meta": {"ui": {"visibility": visibility(true)}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sasha_proto::pb;

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
            access: "use".into(),
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
            bound_app: Some("notes".to_owned()),
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
        notes(&mut catalogue).access = "manage".into();
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
        for bound_app in [None, Some("notes".to_owned()), Some("other".to_owned())] {
            {
                let caller = Caller {
                    invokes: true,
                    bound_app: bound_app.clone(),
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
            bound_app: Some("notes".into()),
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
                bound_app: Some("other".into()),
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
                    bound_app: Some("notes".into()),
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
    fn names_are_classified_from_the_typed_app() {
        let catalogue = catalogue();
        let app = &catalogue.apps["notes"];
        assert_eq!(classify(app, "open_app__notes"), Some(Target::Open));
        assert_eq!(
            classify(app, "app__notes__note_items__update"),
            Some(Target::Table {
                table: "note_items".into(),
                operation: "update".into()
            })
        );
        assert_eq!(
            classify(app, "app__notes__add_note"),
            Some(Target::Action {
                action: "add-note".into()
            })
        );
        assert_eq!(classify(app, CHAT_TOOL), Some(Target::ChatExecute));
        assert_eq!(classify(app, UPLOAD_TOOL), Some(Target::FilesUpload));
        assert_eq!(classify(app, "app__notes__note_items__drop"), None);
    }

    #[test]
    fn names_map_hyphens_to_underscores() {
        assert_eq!(
            tool_name(&["time-sheet", "entries", "list"]),
            "app__time_sheet__entries__list"
        );
    }
}
