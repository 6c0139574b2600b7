//! MCP tool names and the table tools' input schemas: what a client sees of an
//! app's declared tables, built from the data contract and the grammar's
//! bounds, so a bound changed in [`crate::grammar`] changes the schema too.
//! The codec that writes and reads every tool name is [`names`].
//!
//! This module must never decide who sees a tool: the gateway filters by
//! caller, capability and visibility, then names and describes tools from here.

mod names;

use serde_json::{Map, Value, json};

use crate::data::{ID_COLUMN, Table, TableDeclaration, value_format, value_kinds};
use crate::grammar::{
    MAX_CSV_BYTES, MAX_GROUP_BY, MAX_HISTORY, MAX_IDEMPOTENCY_KEY_CHARS, MAX_LIMIT, MAX_METRICS,
    MAX_ORDER_BY, MAX_SELECT, MAX_WHERE, MetricFunction, Operator, TableOperation,
};
use crate::ids::{KEBAB_ID_PATTERN, MAX_ID_CHARS};

pub use names::{
    APP_TOOL_PREFIX, AppOnlyTool, MemberTool, OPENER_PREFIX, PlatformFamily, PlatformTool,
    ToolTarget, action_tool_name, app_of_tool, opener_name, table_tool_name,
};

/// The member app tools (any role with `apps:author`; studio-core's
/// `CoreService.MemberApps` decides every call), in [`MemberTool`]'s order;
/// those that build an app ([`MemberTool::builds`]) are not listed while an
/// admin has turned member apps off.
pub const CHECK_MY_APP: &str = "checkMyApp";
pub const DEPLOY_MY_APP: &str = "deployMyApp";
pub const REVERT_MY_APP: &str = "revertMyApp";
pub const LIST_MY_APPS: &str = "listMyApps";
pub const READ_MY_APP: &str = "readMyApp";
pub const DRAFT_MY_APP: &str = "draftMyApp";
pub const LIST_MY_APP_REVISIONS: &str = "listMyAppRevisions";
pub const SHARE_MY_APP: &str = "shareMyApp";
pub const DELETE_MY_APP: &str = "deleteMyApp";
/// The member app authoring guide: `getDocs` section `member-apps` and
/// Studio's `GET /api/member-app-guide`, one text for both.
pub const MEMBER_APPS_GUIDE: &str = include_str!("../docs/member-apps.md");

/// The six source tools (admin and staff, `apps:write`, `manage` on the
/// app; `CoreService.SourceFiles`, whose `operation` is the tool's name):
/// every file of an app's package with its version.
pub const LIST_APP_FILES: &str = "listAppFiles";
/// One file of an app's package.
pub const READ_APP_FILE: &str = "readAppFile";
/// Creates or replaces one file.
pub const WRITE_APP_FILE: &str = "writeAppFile";
/// Replaces one exact piece of text in one file.
pub const EDIT_APP_FILE: &str = "editAppFile";
/// Deletes one file.
pub const DELETE_APP_FILE: &str = "deleteAppFile";
/// Validates the package again.
pub const CHECK_APP: &str = "checkApp";

/// The open app's chat tool.
pub const CHAT_TOOL: &str = "sasha__chat_execute";
/// The open app's upload tool.
pub const UPLOAD_TOOL: &str = "sasha__files_upload";
/// Most documents one upload carries: the app runtime, the gateway and
/// studio-core's upload area all refuse more.
pub const MAX_UPLOAD_FILES: usize = 10;
/// Most bytes of documents one upload carries, decoded (same readers).
pub const MAX_UPLOAD_BYTES: usize = 25 * 1024 * 1024;

/// The refusal of an upload of more than [`MAX_UPLOAD_FILES`] documents.
pub fn too_many_upload_files() -> String {
    format!("upload at most {MAX_UPLOAD_FILES} files at a time")
}

/// The refusal of an upload of more than [`MAX_UPLOAD_BYTES`].
pub fn too_many_upload_bytes() -> String {
    format!(
        "upload at most {} MiB in total",
        MAX_UPLOAD_BYTES / (1024 * 1024)
    )
}

/// The largest MCP message: a `/mcp` request body (the gateway, before it
/// parses one) and a JSON-RPC message the Studio page and the sandbox proxy
/// relay. The largest real one is a source tool writing a 1 MiB text file as
/// one JSON string, which escaping can double, plus room.
pub const MAX_MCP_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// The largest MCP message that calls [`UPLOAD_TOOL`] (same readers):
/// [`MAX_UPLOAD_BYTES`] of documents as base64 (about 33.4 MiB) and the JSON
/// around them.
pub const MAX_MCP_UPLOAD_MESSAGE_BYTES: usize = 36 * 1024 * 1024;
/// The documentation tool.
pub const GET_DOCS: &str = "getDocs";
/// The improvement-suggestion tool.
pub const SUGGEST: &str = "suggestImprovement";
/// The tool that creates a new app (admin and staff, `apps:write`).
pub const CREATE_APP: &str = "createApp";
/// Most characters of a new app's name: the gateway's `createApp` schema,
/// studio-core's check and the Studio form all read this bound.
pub const CREATE_APP_MAX_NAME_CHARS: usize = 80;
/// Most characters of a new app's description (same readers).
pub const CREATE_APP_MAX_DESCRIPTION_CHARS: usize = 300;
/// The history tools (admin and staff, `apps:write`, `manage` on the app):
/// an app's revisions newest first.
pub const LIST_APP_REVISIONS: &str = "listAppRevisions";
/// One file of an app at a revision.
pub const READ_APP_REVISION_FILE: &str = "readAppRevisionFile";
/// Which files two revisions of an app differ in, with unified diffs.
pub const DIFF_APP_REVISIONS: &str = "diffAppRevisions";
/// Makes an app's files equal an old revision's.
pub const REVERT_APP: &str = "revertApp";

/// The data undo tools (any caller who invokes apps; `manage` on the app,
/// decided again by data-worker): an app's changes, newest first, by
/// initiator, actor, table and time.
pub const LIST_APP_ACTIVITY: &str = "listAppActivity";
/// What undoing a selection of an app's changes (or restoring it as of an
/// instant) would do, row by row, with its conflicts.
pub const PREVIEW_APP_UNDO: &str = "previewAppUndo";
/// Applies a previewed undo or restore, after the person's yes.
pub const UNDO_APP_CHANGES: &str = "undoAppChanges";

/// The lifecycle tools (admin only, decided by studio-core; listed for the
/// callers who see the source tools): withdraw an app for everyone.
pub const WITHDRAW_APP: &str = "withdrawApp";
/// Brings a withdrawn app back as it was.
pub const RESTORE_APP: &str = "restoreApp";
/// Deletes a withdrawn app's package and, confirmed twice, its data.
pub const DELETE_APP: &str = "deleteApp";

/// The draft tools (the source tools' callers; decided by studio-core):
/// makes an app's draft its live revision, after a person approved.
pub const PUBLISH_APP_DRAFT: &str = "publishAppDraft";
/// Throws an app's draft away.
pub const DISCARD_APP_DRAFT: &str = "discardAppDraft";

/// The JSON Schema of an `app` argument: an app id ([`crate::ids`]), with
/// `description` saying which apps the tool takes.
pub fn app_id_property(description: &str) -> Value {
    json!({"type": "string", "pattern": KEBAB_ID_PATTERN, "maxLength": MAX_ID_CHARS, "description": description})
}

/// The JSON Schema of one column's values, from its declared type's affinity
/// ([`value_kinds`]), nullable unless NOT NULL or the key.
fn column_schema(column: &crate::data::Column) -> Value {
    let mut kinds: Vec<&str> = value_kinds(&column.declared_type).to_vec();
    if !column.not_null && !column.primary_key {
        kinds.push("null");
    }
    match kinds.as_slice() {
        [one] => json!({"type": one}),
        many => json!({"type": many}),
    }
}

/// A writable column's schema with the table's declared rules on it: a
/// typed kind's `format`, and a description naming UNIQUE, the table a
/// reference points into and every CHECK rule's wording that reads it, so a
/// model writes a valid row the first time. NOT NULL is `required`.
fn field_schema(table: &Table, column: &crate::data::Column) -> Value {
    let mut schema = column_schema(column);
    if let Some(format) = value_format(&column.declared_type) {
        schema["format"] = json!(format);
    }
    let name = &column.name;
    let mut rules = Vec::new();
    if table
        .unique
        .iter()
        .any(|key| key.as_slice() == [name.clone()])
    {
        rules.push("must be unique".to_owned());
    }
    for key in &table.foreign_keys {
        if key.columns.as_slice() == [name.clone()] {
            let parent = key.parent_columns.first().map_or(ID_COLUMN, String::as_str);
            rules.push(format!(
                "the {parent} of an existing {} row",
                key.parent_table
            ));
        }
    }
    for check in &table.checks {
        if let Some(rule) = &check.name
            && check.columns.contains(name)
        {
            rules.push(rule.clone());
        }
    }
    if !rules.is_empty() {
        schema["description"] = json!(rules.join("; "));
    }
    schema
}

/// What one table operation's tool takes: its input schema and a one-line
/// summary (whether it only reads is [`TableOperation::is_mutating`]).
pub struct TableToolInput {
    pub schema: Value,
    pub summary: &'static str,
}

/// The input of `operation` on a declared table. The owner field is readable
/// but never filterable, sortable, groupable or writable; an INTEGER id is the
/// platform's to assign.
pub fn table_tool_input(
    table: &Table,
    declaration: &TableDeclaration,
    operation: TableOperation,
) -> TableToolInput {
    let owner = declaration.owner_field.as_deref();
    let names: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
    let selectable: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| Some(*n) != owner)
        .collect();
    let id_column = table.column(ID_COLUMN);
    let id_schema = id_column
        .map(column_schema)
        .unwrap_or_else(|| json!({"type": ["string", "integer"]}));
    let integer_id = id_column.is_some_and(|c| c.declared_type.contains("INT"));
    let writable: Map<String, Value> = table
        .columns
        .iter()
        .filter(|c| Some(c.name.as_str()) != owner)
        .filter(|c| !(c.name == ID_COLUMN && integer_id))
        .map(|c| (c.name.clone(), field_schema(table, c)))
        .collect();
    let required: Vec<&str> = table
        .columns
        .iter()
        .filter(|c| c.not_null && c.default_value.is_none())
        .map(|c| c.name.as_str())
        .filter(|name| writable.contains_key(*name))
        .collect();
    let operators: Vec<&str> = Operator::names().collect();
    let conditions = json!({
        "type": "array",
        "maxItems": MAX_WHERE,
        "items": {
            "type": "object",
            "properties": {
                "field": {"type": "string", "enum": selectable},
                "operator": {"type": "string", "enum": operators},
                "value": {},
            },
            "required": ["field", "operator", "value"],
            "additionalProperties": false,
        },
    });
    let key = json!({"type": "string", "maxLength": MAX_IDEMPOTENCY_KEY_CHARS, "description": "makes a retry safe: the same key and input return the original result"});
    let version = json!({"type": "integer", "minimum": 1});
    let (schema, summary) = match operation {
        TableOperation::List => (
            json!({
                "type": "object",
                "properties": {
                    "where": conditions,
                    "orderBy": {"type": "array", "maxItems": MAX_ORDER_BY, "items": {"type": "object", "properties": {"field": {"type": "string", "enum": selectable}, "direction": {"type": "string", "enum": ["asc", "desc"]}}, "required": ["field"], "additionalProperties": false}},
                    "select": {"type": "array", "maxItems": MAX_SELECT, "items": {"type": "string", "enum": names}},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                    "cursor": {"type": "string"},
                },
                "additionalProperties": false,
            }),
            "List rows",
        ),
        TableOperation::Get => (
            json!({"type": "object", "properties": {"id": id_schema}, "required": ["id"], "additionalProperties": false}),
            "Get one row by id",
        ),
        TableOperation::History => (
            json!({"type": "object", "properties": {"id": id_schema, "limit": {"type": "integer", "minimum": 1, "maximum": MAX_HISTORY}, "cursor": {"type": "string"}}, "required": ["id"], "additionalProperties": false}),
            "The change history of one row (who, when, through which surface, the row before and after; oldest first)",
        ),
        TableOperation::Aggregate => {
            let metric_properties: Map<String, Value> =
                std::iter::once(("as".to_owned(), json!({"type": "string"})))
                    .chain(
                        MetricFunction::names()
                            .map(|f| (f.to_owned(), json!({"type": "string", "enum": selectable}))),
                    )
                    .collect();
            (
                json!({
                    "type": "object",
                    "properties": {
                        "where": conditions,
                        "groupBy": {"type": "array", "maxItems": MAX_GROUP_BY, "items": {"type": "string", "enum": selectable}},
                        "metrics": {"type": "array", "minItems": 1, "maxItems": MAX_METRICS, "items": {"type": "object", "properties": metric_properties, "required": ["as"], "additionalProperties": false}},
                    },
                    "required": ["metrics"],
                    "additionalProperties": false,
                }),
                "Aggregate rows into groups",
            )
        }
        TableOperation::Create => (
            json!({
                "type": "object",
                "properties": {
                    "values": {"type": "object", "properties": writable, "required": required, "additionalProperties": false},
                    "idempotencyKey": key,
                },
                "required": ["values"],
                "additionalProperties": false,
            }),
            "Create a row",
        ),
        TableOperation::Update => {
            let changes: Map<String, Value> = writable
                .iter()
                .filter(|(name, _)| name.as_str() != ID_COLUMN)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (
                json!({
                    "type": "object",
                    "properties": {
                        "id": id_schema,
                        "changes": {"type": "object", "properties": changes, "minProperties": 1, "additionalProperties": false},
                        "expectedVersion": version,
                        "idempotencyKey": key,
                    },
                    "required": ["id", "changes", "expectedVersion"],
                    "additionalProperties": false,
                }),
                "Change a row at the version you read",
            )
        }
        TableOperation::Export => (
            json!({
                "type": "object",
                "properties": {
                    "where": conditions,
                    "orderBy": {"type": "array", "maxItems": MAX_ORDER_BY, "items": {"type": "object", "properties": {"field": {"type": "string", "enum": selectable}, "direction": {"type": "string", "enum": ["asc", "desc"]}}, "required": ["field"], "additionalProperties": false}},
                    "cursor": {"type": "string", "description": "the nextCursor of the previous export, to read on"},
                },
                "additionalProperties": false,
            }),
            "Export rows as CSV (the rows a list reads, a header naming the fields; a long table goes on with nextCursor)",
        ),
        TableOperation::Import => {
            let fields: Vec<&str> = writable.keys().map(String::as_str).collect();
            (
                json!({
                    "type": "object",
                    "properties": {
                        "csv": {"type": "string", "maxLength": MAX_CSV_BYTES, "description": format!("CSV text: a header naming fields ({}), then one row per record; an empty cell is no value. All rows are created or none.", fields.join(", "))},
                        "idempotencyKey": key,
                    },
                    "required": ["csv"],
                    "additionalProperties": false,
                }),
                "Import rows from CSV (every row checked; all are created or none)",
            )
        }
        TableOperation::Delete => (
            json!({
                "type": "object",
                "properties": {"id": id_schema, "expectedVersion": version, "idempotencyKey": key},
                "required": ["id", "expectedVersion"],
                "additionalProperties": false,
            }),
            "Delete a row at the version you read",
        ),
    };
    TableToolInput { schema, summary }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_schemas_carry_the_declared_rules() {
        use crate::data::{Check, Column, ForeignKey};
        let column = |name: &str, declared_type: &str| Column {
            name: name.to_owned(),
            declared_type: declared_type.to_owned(),
            not_null: true,
            default_value: None,
            primary_key: name == ID_COLUMN,
            generated: false,
        };
        let table = Table {
            name: "entries".to_owned(),
            columns: vec![
                column("id", "INTEGER"),
                column("date", "DATE"),
                column("project", "INTEGER"),
                column("hours", "REAL"),
                column("code", "TEXT"),
            ],
            unique: vec![vec!["code".to_owned()]],
            foreign_keys: vec![ForeignKey {
                columns: vec!["project".to_owned()],
                parent_table: "projects".to_owned(),
                parent_columns: Vec::new(),
                on_update: "NO ACTION".to_owned(),
                on_delete: "NO ACTION".to_owned(),
            }],
            checks: vec![Check {
                name: Some("hours must be between 0 and 24".to_owned()),
                columns: vec!["hours".to_owned()],
                expression: "hours >= 0 AND hours <= 24".to_owned(),
            }],
            ..Table::default()
        };
        let declaration = TableDeclaration {
            access: crate::data::Access::Shared,
            owner_field: None,
            write: Default::default(),
            managers_read_all: false,
        };
        let create = table_tool_input(&table, &declaration, TableOperation::Create).schema;
        let values = &create["properties"]["values"]["properties"];
        assert_eq!(values["date"], json!({"type": "string", "format": "date"}));
        assert_eq!(
            values["hours"]["description"],
            "hours must be between 0 and 24"
        );
        assert_eq!(
            values["project"]["description"],
            "the id of an existing projects row"
        );
        assert_eq!(values["code"]["description"], "must be unique");
        assert_eq!(
            create["properties"]["values"]["required"],
            json!(["date", "project", "hours", "code"])
        );
    }
}
