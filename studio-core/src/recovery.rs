//! The recovery view's descriptor: what Studio's generic grid needs to list,
//! create, edit and delete an app's rows when the app's own UI is broken.
//!
//! Derived only from the declared tables policy and the validated schema's
//! column record: `required` from NOT NULL without a default, `readOnly` from
//! the primary key and the declared owner field. No SQL text and no new column
//! shape leave here, and the grid reaches the rows through the same governed
//! data tools every other caller uses.

use sasha_contract::grammar::TableOperation;
use sasha_contract::tools::table_tool_name;
use sasha_package::manifest::Access;
use sasha_package::sql::{DataContract, VERSION_COLUMN, value_format, value_kinds};
use serde::Serialize;
use utoipa::ToSchema;

/// Most tables one descriptor lists; a package declares far fewer.
pub(crate) const MAX_TABLES: usize = 64;
/// Most fields one table lists.
pub(crate) const MAX_FIELDS: usize = 128;

/// `GET /api/apps/:appId/recovery`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RecoveryDescriptor {
    pub app_id: String,
    /// The app's name from its manifest.
    pub name: String,
    /// The revision the descriptor was derived from.
    pub revision: String,
    /// The column every row carries its version in, for `expectedVersion`.
    pub version_field: &'static str,
    /// The declared tables, by name.
    pub tables: Vec<RecoveryTable>,
    /// Whether tables or fields were left out to keep the descriptor bounded.
    pub truncated: bool,
}

/// One declared table.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RecoveryTable {
    pub name: String,
    /// `owner` (each user sees their own rows) or `shared`.
    pub access: &'static str,
    /// The column holding the owner's user id, for `owner` tables.
    pub owner_field: Option<String>,
    /// Whether the app may change rows (`capabilities.data: read-write`).
    pub writable: bool,
    /// Who may change rows: `use` (every grant holder) or `manage` (the
    /// app's managers only).
    pub write: &'static str,
    /// For `owner` tables: whether managers read every owner's rows.
    pub managers_read_all: bool,
    /// The MCP tools that reach this table: `list`, `get`, `create`, `update`,
    /// `delete` (the last three only when writable).
    pub tools: RecoveryTools,
    pub fields: Vec<RecoveryField>,
}

/// The tool names of one table.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RecoveryTools {
    pub list: String,
    pub get: String,
    /// One row's audit entries.
    pub history: String,
    /// The rows as CSV, read like `list`.
    pub export: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub create: Option<String>,
    /// A CSV file's rows created all or none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub import: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete: Option<String>,
}

/// One column.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RecoveryField {
    pub name: String,
    /// The JSON kinds its values take: `integer`, `number`, `string`.
    pub kinds: Vec<&'static str>,
    /// A typed kind's format (`date`), checked again by the data service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<&'static str>,
    /// Whether null is allowed.
    pub nullable: bool,
    /// NOT NULL without a default: a create must give it.
    pub required: bool,
    /// The primary key or the owner field: shown, never edited.
    pub read_only: bool,
    /// The declared table whose row this column names by its primary key (a
    /// one-column reference), so the grid can show that row's name beside
    /// the bare id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refers_to: Option<String>,
}

/// The descriptor of an app's declared tables, in name order.
pub(crate) fn descriptor(
    app_id: &str,
    name: &str,
    revision: &str,
    data: Option<&DataContract>,
    writable: bool,
) -> RecoveryDescriptor {
    let mut truncated = false;
    let mut tables = Vec::new();
    for (table_name, declaration) in data.map(|data| &data.tables).into_iter().flatten() {
        let Some(table) = data.and_then(|data| data.schema.tables.get(table_name)) else {
            continue;
        };
        if tables.len() == MAX_TABLES {
            truncated = true;
            break;
        }
        let owner_field = declaration.owner_field.clone();
        let mut fields = Vec::new();
        for column in &table.columns {
            if fields.len() == MAX_FIELDS {
                truncated = true;
                break;
            }
            let read_only = column.primary_key || owner_field.as_deref() == Some(&column.name);
            let refers_to = table
                .foreign_keys
                .iter()
                .find(|key| {
                    key.columns.len() == 1
                        && key.columns[0] == column.name
                        && key.parent_columns.len() <= 1
                        && data.is_some_and(|data| data.tables.contains_key(&key.parent_table))
                })
                .map(|key| key.parent_table.clone());
            fields.push(RecoveryField {
                name: column.name.clone(),
                kinds: value_kinds(&column.declared_type).to_vec(),
                format: value_format(&column.declared_type),
                nullable: !column.not_null && !column.primary_key,
                required: column.not_null && column.default_value.is_none() && !read_only,
                read_only,
                refers_to,
            });
        }
        let tool = |operation| table_tool_name(app_id, table_name, operation);
        let write_tool = |operation| writable.then(|| tool(operation));
        tables.push(RecoveryTable {
            name: table_name.clone(),
            access: match declaration.access {
                Access::Owner => "owner",
                Access::Shared => "shared",
            },
            owner_field,
            writable,
            write: declaration.write.as_str(),
            managers_read_all: declaration.managers_read_all,
            tools: RecoveryTools {
                list: tool(TableOperation::List),
                get: tool(TableOperation::Get),
                history: tool(TableOperation::History),
                export: tool(TableOperation::Export),
                create: write_tool(TableOperation::Create),
                import: write_tool(TableOperation::Import),
                update: write_tool(TableOperation::Update),
                delete: write_tool(TableOperation::Delete),
            },
            fields,
        });
    }
    RecoveryDescriptor {
        app_id: app_id.to_owned(),
        name: name.to_owned(),
        revision: revision.to_owned(),
        version_field: VERSION_COLUMN,
        tables,
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sasha_package::validate::validate_dir;

    fn time_sheet() -> DataContract {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../apps/time-sheet-entry");
        let validation = validate_dir(&dir);
        let status = validation.status();
        assert!(status.ok, "{:?}", status.diagnostics);
        validation
            .package
            .and_then(|package| package.data)
            .expect("time sheet declares data")
    }

    #[test]
    fn fields_follow_not_null_defaults_keys_and_owner() {
        let data = time_sheet();
        let descriptor = descriptor(
            "time-sheet-entry",
            "Time Sheet Entry",
            "r1",
            Some(&data),
            true,
        );
        let json = serde_json::to_value(&descriptor).unwrap();
        assert_eq!(json["versionField"], "_sasha_version");
        let tables = json["tables"].as_array().unwrap();
        assert_eq!(
            tables
                .iter()
                .map(|t| t["name"].as_str().unwrap())
                .collect::<Vec<_>>(),
            ["entries", "projects"]
        );
        let entries = &tables[0];
        assert_eq!(entries["access"], "owner");
        assert_eq!(entries["ownerField"], "created_by");
        assert_eq!(
            entries["tools"]["create"],
            "app__time_sheet_entry__entries__create"
        );
        let field = |name: &str| {
            entries["fields"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["name"] == name)
                .unwrap()
                .clone()
        };
        assert_eq!(field("id")["readOnly"], true);
        assert_eq!(field("id")["required"], false);
        assert_eq!(field("created_by")["readOnly"], true);
        assert_eq!(field("created_by")["required"], false);
        assert_eq!(field("hours")["required"], true);
        assert_eq!(field("hours")["kinds"], serde_json::json!(["number"]));
        assert_eq!(field("note")["required"], false);
        assert_eq!(field("note")["nullable"], true);
        assert_eq!(field("project")["kinds"], serde_json::json!(["integer"]));
        // A reference names its table, so the grid can show the project's name.
        assert_eq!(field("project")["refersTo"], "projects");
        assert!(field("hours").get("refersTo").is_none());
        assert_eq!(tables[1]["access"], "shared");
        assert!(tables[1]["ownerField"].is_null());
        // No SQL text anywhere.
        let text = json.to_string().to_uppercase();
        for sql in ["CREATE TABLE", "SELECT ", "REFERENCES", "NOT NULL"] {
            assert!(!text.contains(sql), "{sql} in {text}");
        }
    }

    #[test]
    fn read_only_apps_get_no_write_tools_and_apps_without_data_no_tables() {
        let data = time_sheet();
        let json =
            serde_json::to_value(descriptor("time-sheet-entry", "T", "r", Some(&data), false))
                .unwrap();
        let tools = &json["tables"][0]["tools"];
        assert!(tools.get("create").is_none() && tools.get("delete").is_none());
        assert_eq!(tools["list"], "app__time_sheet_entry__entries__list");
        let none = descriptor("notes", "Notes", "r", None, false);
        assert!(none.tables.is_empty() && !none.truncated);
    }
}
