//! The MCP tools a caller sees, computed from studio-core's catalogue for that
//! caller (`CoreService.GetCatalogue`, which lists only apps the caller holds a
//! grant on).
//!
//! Per app: `open_app__<id>` (always model-visible, linked to the app's UI
//! resource); per declared table the six data tools
//! `app__<app>__<table>__list|get|aggregate|create|update|delete` with input
//! schemas generated from the declared columns (model- and app-visible); every
//! `exposeToModel` action as `app__<app>__<action>`. App-only tools (the other
//! actions, `sasha__chat_execute`, `sasha__files_upload`) exist only for the
//! Studio browser session bound to that app. A caller without `apps:invoke` sees
//! no app tools at all. Ids map `-` to `_`.
//!
//! This module only describes tools; it never authorises or executes a call.

use serde_json::{Map, Value, json};

/// Data operations published per declared table, in listing order.
pub const TABLE_OPERATIONS: [&str; 6] = ["list", "get", "aggregate", "create", "update", "delete"];

const WHERE_OPERATORS: [&str; 9] = [
    "eq",
    "neq",
    "lt",
    "lte",
    "gt",
    "gte",
    "in",
    "contains",
    "starts-with",
];
const METRIC_FUNCTIONS: [&str; 6] = ["sum", "avg", "min", "max", "count", "countDistinct"];

/// Who is listing tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Holds `apps:invoke`; without it no app tool exists.
    pub invokes: bool,
    /// The app a Studio browser session is bound to (its open app), if any:
    /// only that app's app-only tools exist for this caller.
    pub bound_app: Option<String>,
    /// A Studio chat session, confirmed by the spec's challenge: its mutating
    /// tools take an optional `confirmationToken`.
    pub challenge: bool,
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
pub fn classify(app_id: &str, app: &Value, name: &str) -> Option<Target> {
    match name {
        "sasha__chat_execute" => return Some(Target::ChatExecute),
        "sasha__files_upload" => return Some(Target::FilesUpload),
        _ => {}
    }
    if name == format!("open_app__{}", app_id.replace('-', "_")) {
        return Some(Target::Open);
    }
    for table in app["tables"].as_object().into_iter().flat_map(|t| t.keys()) {
        for operation in TABLE_OPERATIONS {
            if name == tool_name(&[app_id, table, operation]) {
                return Some(Target::Table {
                    table: table.clone(),
                    operation: operation.to_owned(),
                });
            }
        }
    }
    app["actions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|action| action["mcpName"] == name)
        .and_then(|action| action["id"].as_str())
        .map(|id| Target::Action {
            action: id.to_owned(),
        })
}

/// The mutating per-table operations: model-invoked, they need confirmation.
pub fn is_mutating(operation: &str) -> bool {
    matches!(operation, "create" | "update" | "delete")
}

pub use sasha_package::manifest::tool_name;

/// The tools `caller` may list, from the catalogue JSON of `GetCatalogue`.
pub fn tools_for(catalogue: &Value, caller: &Caller) -> Vec<Value> {
    let mut tools = Vec::new();
    if !caller.invokes {
        return tools;
    }
    let Some(apps) = catalogue.as_object() else {
        return tools;
    };
    for (app_id, app) in apps {
        app_tools(app_id, app, caller, None, &mut tools);
    }
    tools
}

/// The one tool named `name` of `app` as [`tools_for`] would list it to
/// `caller`, or `None` when that caller would not see it. A call builds only
/// this definition, not the app's whole tool list.
pub fn tool_for(app_id: &str, app: &Value, caller: &Caller, name: &str) -> Option<Value> {
    if !caller.invokes {
        return None;
    }
    let mut tools = Vec::new();
    app_tools(app_id, app, caller, Some(name), &mut tools);
    tools.pop()
}

/// Appends the tools of one app that `caller` may see, in listing order; with
/// `only`, just the tool of that name (each name is checked before its
/// definition is built).
fn app_tools(
    app_id: &str,
    app: &Value,
    caller: &Caller,
    only: Option<&str>,
    tools: &mut Vec<Value>,
) {
    let wanted = |name: &str| only.is_none_or(|only| only == name);
    let bound = caller.bound_app.as_deref() == Some(app_id);
    if wanted(&format!("open_app__{}", app_id.replace('-', "_"))) {
        tools.push(open_app_tool(app_id, app));
    }
    // An app that declared `data: read` gets no mutating table tools.
    let writes = app["capabilities"]["data"] == "read-write";
    if let Some(tables) = app["tables"].as_object() {
        for (table, description) in tables {
            for operation in TABLE_OPERATIONS {
                if is_mutating(operation) && !writes
                    || !wanted(&tool_name(&[app_id, table, operation]))
                {
                    continue;
                }
                if let Some(tool) =
                    table_tool(app_id, app, table, description, operation, caller.challenge)
                {
                    tools.push(tool);
                }
            }
        }
    }
    for action in app["actions"].as_array().into_iter().flatten() {
        let model_visible = action["visibility"]
            .as_array()
            .is_some_and(|visibility| visibility.iter().any(|v| v == "model"));
        if (model_visible || bound) && wanted(action["mcpName"].as_str().unwrap_or_default()) {
            tools.push(action_tool(action, model_visible, caller.challenge));
        }
    }
    if bound {
        if app["capabilities"]["chat"] == true && wanted("sasha__chat_execute") {
            tools.push(app_only_tool(
                "sasha__chat_execute",
                "Run a chat turn for the open app",
                json!({"type": "object", "properties": {"prompt": {"type": "string", "maxLength": 65536}, "newSession": {"type": "boolean"}}, "required": ["prompt"], "additionalProperties": false}),
            ));
        }
        if app["capabilities"]["files"] == true && wanted("sasha__files_upload") {
            tools.push(app_only_tool(
                "sasha__files_upload",
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

fn open_app_tool(app_id: &str, app: &Value) -> Value {
    let uri = app["resourceUri"].clone();
    json!({
        "name": format!("open_app__{}", app_id.replace('-', "_")),
        "title": app["name"],
        "description": format!("Open {}: {}", app["name"].as_str().unwrap_or(app_id), app["description"].as_str().unwrap_or("")),
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

/// The optional `confirmationToken` of a Studio chat session's mutating tools.
fn confirmation_token_schema() -> Value {
    json!({"type": "string", "maxLength": 200, "description": "the token of a confirmation challenge the person approved; retry the same call with it"})
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

fn action_tool(action: &Value, model_visible: bool, challenge: bool) -> Value {
    let mut input = action["inputSchema"].clone();
    if challenge && action["mutating"] == true && input["properties"].is_object() {
        input["properties"]["confirmationToken"] = confirmation_token_schema();
    }
    json!({
        "name": action["mcpName"],
        "description": action["description"],
        "inputSchema": input,
        "outputSchema": output_schema(&action["resultSchema"]),
        "annotations": {"readOnlyHint": action["mutating"] != true},
        "_meta": {"ui": {"visibility": visibility(model_visible)}},
    })
}

/// The JSON Schema of one column's values, from its declared type's affinity
/// ([`sasha_package::sql::value_kinds`]), nullable unless NOT NULL or the key.
fn column_schema(column: &Value) -> Value {
    let mut kinds: Vec<&str> =
        sasha_package::sql::value_kinds(column["declaredType"].as_str().unwrap_or("")).to_vec();
    if column["notNull"] != true && column["primaryKey"] != true {
        kinds.push("null");
    }
    match kinds.as_slice() {
        [one] => json!({"type": one}),
        many => json!({"type": many}),
    }
}

fn table_tool(
    app_id: &str,
    app: &Value,
    table: &str,
    description: &Value,
    operation: &str,
    challenge: bool,
) -> Option<Value> {
    let columns = description["columns"].as_array()?;
    let owner = description["declaration"]["ownerField"].as_str();
    let names: Vec<&str> = columns.iter().filter_map(|c| c["name"].as_str()).collect();
    // The owner field is readable but never filterable, sortable or groupable.
    let selectable: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| Some(*n) != owner)
        .collect();
    let id_column = columns.iter().find(|c| c["name"] == "id");
    let id_schema = id_column
        .map(column_schema)
        .unwrap_or_else(|| json!({"type": ["string", "integer"]}));
    let integer_id = id_column.is_some_and(|c| {
        c["declaredType"]
            .as_str()
            .unwrap_or("")
            .to_ascii_uppercase()
            .contains("INT")
    });
    let writable: Map<String, Value> = columns
        .iter()
        .filter(|c| Some(c["name"].as_str().unwrap_or("")) != owner)
        .filter(|c| !(c["name"] == "id" && integer_id))
        .filter_map(|c| Some((c["name"].as_str()?.to_owned(), column_schema(c))))
        .collect();
    let required: Vec<&str> = columns
        .iter()
        .filter(|c| c["notNull"] == true && c["defaultValue"].is_null())
        .filter_map(|c| c["name"].as_str())
        .filter(|name| writable.contains_key(*name))
        .collect();
    let conditions = json!({
        "type": "array",
        "maxItems": 20,
        "items": {
            "type": "object",
            "properties": {
                "field": {"type": "string", "enum": selectable},
                "operator": {"type": "string", "enum": WHERE_OPERATORS},
                "value": {},
            },
            "required": ["field", "operator", "value"],
            "additionalProperties": false,
        },
    });
    let key = json!({"type": "string", "maxLength": 200, "description": "makes a retry safe: the same key and input return the original result"});
    let (input, read_only, summary) = match operation {
        "list" => (
            json!({
                "type": "object",
                "properties": {
                    "where": conditions,
                    "orderBy": {"type": "array", "maxItems": 3, "items": {"type": "object", "properties": {"field": {"type": "string", "enum": selectable}, "direction": {"type": "string", "enum": ["asc", "desc"]}}, "required": ["field"], "additionalProperties": false}},
                    "select": {"type": "array", "maxItems": 50, "items": {"type": "string", "enum": names}},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 200},
                    "cursor": {"type": "string"},
                },
                "additionalProperties": false,
            }),
            true,
            "List rows",
        ),
        "get" => (
            json!({"type": "object", "properties": {"id": id_schema}, "required": ["id"], "additionalProperties": false}),
            true,
            "Get one row by id",
        ),
        "aggregate" => {
            let metric_properties: Map<String, Value> =
                std::iter::once(("as".to_owned(), json!({"type": "string"})))
                    .chain(METRIC_FUNCTIONS.iter().map(|f| {
                        (
                            (*f).to_owned(),
                            json!({"type": "string", "enum": selectable}),
                        )
                    }))
                    .collect();
            (
                json!({
                    "type": "object",
                    "properties": {
                        "where": conditions,
                        "groupBy": {"type": "array", "maxItems": 3, "items": {"type": "string", "enum": selectable}},
                        "metrics": {"type": "array", "minItems": 1, "maxItems": 10, "items": {"type": "object", "properties": metric_properties, "required": ["as"], "additionalProperties": false}},
                    },
                    "required": ["metrics"],
                    "additionalProperties": false,
                }),
                true,
                "Aggregate rows into groups",
            )
        }
        "create" => (
            json!({
                "type": "object",
                "properties": {
                    "values": {"type": "object", "properties": writable, "required": required, "additionalProperties": false},
                    "idempotencyKey": key,
                },
                "required": ["values"],
                "additionalProperties": false,
            }),
            false,
            "Create a row",
        ),
        "update" => (
            json!({
                "type": "object",
                "properties": {
                    "id": id_schema,
                    "changes": {"type": "object", "properties": writable.iter().filter(|(name, _)| name.as_str() != "id").map(|(k, v)| (k.clone(), v.clone())).collect::<Map<_, _>>(), "minProperties": 1, "additionalProperties": false},
                    "expectedVersion": {"type": "integer", "minimum": 1},
                    "idempotencyKey": key,
                },
                "required": ["id", "changes", "expectedVersion"],
                "additionalProperties": false,
            }),
            false,
            "Change a row at the version you read",
        ),
        "delete" => (
            json!({
                "type": "object",
                "properties": {"id": id_schema, "expectedVersion": {"type": "integer", "minimum": 1}, "idempotencyKey": key},
                "required": ["id", "expectedVersion"],
                "additionalProperties": false,
            }),
            false,
            "Delete a row at the version you read",
        ),
        _ => return None,
    };
    let mut input = input;
    if challenge && !read_only {
        input["properties"]["confirmationToken"] = confirmation_token_schema();
    }
    let app_name = app["name"].as_str().unwrap_or(app_id);
    let mut annotations = json!({"readOnlyHint": read_only});
    if operation == "delete" {
        annotations["destructiveHint"] = json!(true);
    }
    Some(json!({
        "name": tool_name(&[app_id, table, operation]),
        "description": format!("{summary} of the {table} table of {app_name}"),
        "inputSchema": input,
        "annotations": annotations,
        "_meta": {"ui": {"visibility": visibility(true)}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalogue() -> Value {
        json!({
            "notes": {
                "name": "Notes",
                "description": "Keep notes",
                "resourceUri": "ui://sasha/apps/notes/revisions/abc",
                "capabilities": {"chat": true, "files": false, "data": "read-write"},
                "tables": {
                    "note_items": {
                        "declaration": {"access": "owner", "ownerField": "created_by"},
                        "columns": [
                            {"name": "id", "declaredType": "INTEGER", "notNull": false, "defaultValue": null, "primaryKey": true},
                            {"name": "title", "declaredType": "TEXT", "notNull": true, "defaultValue": null, "primaryKey": false},
                            {"name": "stars", "declaredType": "INTEGER", "notNull": false, "defaultValue": "0", "primaryKey": false},
                            {"name": "created_by", "declaredType": "TEXT", "notNull": true, "defaultValue": null, "primaryKey": false}
                        ]
                    }
                },
                "actions": [
                    {"id": "count-notes", "mcpName": "app__notes__count_notes", "visibility": ["model", "app"], "description": "Count", "inputSchema": {"type": "object"}, "resultSchema": {"type": "object"}, "mutating": false},
                    {"id": "add-note", "mcpName": "app__notes__add_note", "visibility": ["app"], "description": "Add", "inputSchema": {"type": "object"}, "resultSchema": {"type": "object"}, "mutating": true}
                ]
            }
        })
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
                challenge: false,
            },
        );
        assert_eq!(
            names(&tools),
            [
                "open_app__notes",
                "app__notes__note_items__list",
                "app__notes__note_items__get",
                "app__notes__note_items__aggregate",
                "app__notes__note_items__create",
                "app__notes__note_items__update",
                "app__notes__note_items__delete",
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
    fn a_single_tool_is_exactly_the_one_listed_and_only_when_listed() {
        let mut catalogue = catalogue();
        catalogue["notes"]["capabilities"]["files"] = json!(true);
        let app = &catalogue["notes"];
        let unknown = [
            "open_app__other",
            "app__notes__note_items__drop",
            "app__notes__missing",
            "app__notes__note_items",
            "sasha__files_upload_x",
        ];
        for bound_app in [None, Some("notes".to_owned()), Some("other".to_owned())] {
            for challenge in [false, true] {
                let caller = Caller {
                    invokes: true,
                    bound_app: bound_app.clone(),
                    challenge,
                };
                let listed = tools_for(&catalogue, &caller);
                for tool in &listed {
                    let name = tool["name"].as_str().unwrap();
                    assert_eq!(
                        tool_for("notes", app, &caller, name).as_ref(),
                        Some(tool),
                        "{name}"
                    );
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
                        tool_for("notes", app, &caller, name).is_some(),
                        listed_here,
                        "{name} for {bound_app:?}"
                    );
                }
                let without = Caller {
                    invokes: false,
                    ..caller
                };
                assert_eq!(tool_for("notes", app, &without, "open_app__notes"), None);
            }
        }
        // A read-only app has no mutating table tool, listed or called.
        let mut read_only = catalogue.clone();
        read_only["notes"]["capabilities"]["data"] = json!("read");
        let caller = Caller {
            invokes: true,
            bound_app: None,
            challenge: false,
        };
        assert_eq!(
            tool_for(
                "notes",
                &read_only["notes"],
                &caller,
                "app__notes__note_items__create"
            ),
            None
        );
        assert!(
            tool_for(
                "notes",
                &read_only["notes"],
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
            challenge: false,
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
                challenge: false,
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
                    challenge: false,
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
                challenge: false,
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
        catalogue["notes"]["capabilities"]["data"] = json!("read");
        let tools = tools_for(
            &catalogue,
            &Caller {
                invokes: true,
                bound_app: None,
                challenge: false,
            },
        );
        let names = names(&tools);
        assert!(names.contains(&"app__notes__note_items__list"));
        for operation in ["create", "update", "delete"] {
            assert!(!names.contains(&format!("app__notes__note_items__{operation}").as_str()));
        }
    }

    #[test]
    fn names_map_hyphens_to_underscores() {
        assert_eq!(
            tool_name(&["time-sheet", "entries", "list"]),
            "app__time_sheet__entries__list"
        );
    }
}
