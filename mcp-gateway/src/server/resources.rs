//! `resources/read` and the resource templates: an app revision's MCP Apps
//! UI resource (`ui://sasha/apps/<app>/revisions/<sha256>`, from
//! studio-core) and the `sasha://` data resources (tables, actions, rows,
//! one row, its history, aggregates), each read through the caller's
//! catalogue and one governed `DataService.Execute`.
//!
//! What it must never do: answer a URI that normalises to another one, or
//! read an app or table the caller's catalogue does not hold; both are the
//! protocol's not found.

use rmcp::ErrorData as McpError;
use rmcp::model::{ReadResourceResponse, ReadResourceResult};
use sasha_contract::data::ID_COLUMN;
use sasha_contract::ids::is_kebab_id;
use sasha_proto::convert::ui_meta;
use sasha_proto::pb::GetResourceRequest;
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};

use super::{SashaMcp, from_json, protocol_error};
use crate::auth::Caller;
use crate::calls::DataCall;
use crate::catalogue::App;

/// The resource templates of the `sasha://` data resources.
pub(super) fn templates() -> Vec<Value> {
    [
        ("sasha://apps/{appId}/tables", "tables", "The declared tables of an app, with their columns and access"),
        ("sasha://apps/{appId}/tables/{table}/rows{?q}", "rows", "Rows of a table; q is a list query in the data grammar, as JSON"),
        ("sasha://apps/{appId}/tables/{table}/rows/{id}", "row", "One row of a table by id"),
        ("sasha://apps/{appId}/tables/{table}/rows/{id}/history", "history", "One row's change history (who, when, through which surface, before and after; the first 50 entries, oldest first)"),
        ("sasha://apps/{appId}/tables/{table}/aggregate{?q}", "aggregate", "An aggregate of a table; q is the aggregation in the data grammar, as JSON"),
        ("sasha://apps/{appId}/actions", "actions", "The declared actions of an app"),
    ]
    .into_iter()
    .map(|(uri, name, description)| {
        json!({"uriTemplate": uri, "name": name, "description": description, "mimeType": "application/json"})
    })
    .collect()
}

/// A `sasha://` data resource.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum DataResource {
    Tables,
    Actions,
    Rows {
        table: String,
        query: Option<String>,
    },
    Row {
        table: String,
        id: String,
    },
    /// The row's audit entries (`history`, its first page).
    History {
        table: String,
        id: String,
    },
    Aggregate {
        table: String,
        query: Option<String>,
    },
}

/// Parses `sasha://apps/<app>/…` into the app id and what is asked for.
pub(super) fn parse_data_uri(uri: &str) -> Option<(String, DataResource)> {
    let url = url::Url::parse(uri).ok()?;
    // A URI that normalises to something else (dot segments, case) names a
    // different resource than it says: refused.
    if url.as_str() != uri
        || url.scheme() != "sasha"
        || url.host_str() != Some("apps")
        || url.fragment().is_some()
    {
        return None;
    }
    let query = url
        .query_pairs()
        .find(|(key, _)| key == "q")
        .map(|(_, value)| value.into_owned());
    if url.query_pairs().any(|(key, _)| key != "q") {
        return None;
    }
    let segments: Vec<String> = url
        .path_segments()?
        .map(percent_decode)
        .collect::<Option<Vec<_>>>()?;
    let parts: Vec<&str> = segments.iter().map(String::as_str).collect();
    let (app, resource) = match parts.as_slice() {
        [app, "tables"] if query.is_none() => (app, DataResource::Tables),
        [app, "actions"] if query.is_none() => (app, DataResource::Actions),
        [app, "tables", table, "rows"] => (
            app,
            DataResource::Rows {
                table: (*table).to_owned(),
                query,
            },
        ),
        [app, "tables", table, "rows", id] if query.is_none() => (
            app,
            DataResource::Row {
                table: (*table).to_owned(),
                id: (*id).to_owned(),
            },
        ),
        [app, "tables", table, "rows", id, "history"] if query.is_none() => (
            app,
            DataResource::History {
                table: (*table).to_owned(),
                id: (*id).to_owned(),
            },
        ),
        [app, "tables", table, "aggregate"] => (
            app,
            DataResource::Aggregate {
                table: (*table).to_owned(),
                query,
            },
        ),
        _ => return None,
    };
    is_kebab_id(app).then(|| ((*app).to_owned(), resource))
}

/// A row id from a URI segment: an integer for a table whose id is one.
fn id_argument(app: &App, table: &str, id: &str) -> Value {
    let integer_id = app
        .tables
        .get(table)
        .and_then(|declared| declared.table.column(ID_COLUMN))
        .is_some_and(|column| column.declared_type.to_ascii_uppercase().contains("INT"));
    match id.parse::<i64>() {
        Ok(number) if integer_id => json!(number),
        _ => json!(id),
    }
}

fn percent_decode(segment: &str) -> Option<String> {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .ok()
        .map(|text| text.into_owned())
        .filter(|text| !text.is_empty() && !text.contains('/'))
}

fn json_contents(uri: &str, value: &Value) -> Result<ReadResourceResponse, McpError> {
    let result: ReadResourceResult = from_json(json!({
        "contents": [{"uri": uri, "mimeType": "application/json", "text": value.to_string()}],
    }))?;
    Ok(ReadResourceResponse::Complete(result))
}

impl SashaMcp {
    pub(super) async fn read_ui_resource(
        &self,
        caller: &Caller,
        uri: &str,
    ) -> Result<ReadResourceResponse, McpError> {
        let not_found = || protocol_error(&AppError::from_code(ErrorCode::NotFound));
        let rest = uri.strip_prefix("ui://sasha/apps/").ok_or_else(not_found)?;
        let (app_id, revision) = rest.split_once("/revisions/").ok_or_else(not_found)?;
        if !is_kebab_id(app_id)
            || revision.len() != 64
            || !revision
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return Err(not_found());
        }
        let mut core = self.gateway.core.clone();
        let resource = core
            .get_resource(GetResourceRequest {
                principal: Some(caller.principal.clone()),
                app_id: app_id.to_owned(),
                revision: revision.to_owned(),
            })
            .await
            .map_err(|status| protocol_error(&AppError::from_status(&status)))?
            .into_inner();
        let meta = resource.meta.as_ref().map_or(Value::Null, ui_meta);
        let result: ReadResourceResult = from_json(json!({
            "contents": [{
                "uri": resource.uri,
                "mimeType": resource.mime_type,
                "text": resource.html,
                "_meta": {"ui": meta},
            }],
        }))?;
        Ok(ReadResourceResponse::Complete(result))
    }

    pub(super) async fn read_data_resource(
        &self,
        caller: &Caller,
        uri: &str,
    ) -> Result<ReadResourceResponse, McpError> {
        let not_found = || protocol_error(&AppError::from_code(ErrorCode::NotFound));
        let (app_id, resource) = parse_data_uri(uri).ok_or_else(not_found)?;
        if !caller.invokes() {
            return Err(not_found());
        }
        let catalogue = self
            .catalogue(caller, Some(&app_id))
            .await
            .map_err(|error| protocol_error(&error))?;
        let app = catalogue.apps.get(&app_id).ok_or_else(not_found)?;
        let query = |text: Option<String>, required: bool| -> Result<Value, McpError> {
            match text {
                None if required => Err(protocol_error(&AppError::new(
                    ErrorCode::InputInvalid,
                    "q (the aggregation as JSON) is required",
                ))),
                None => Ok(json!({})),
                Some(text) => serde_json::from_str::<Value>(&text)
                    .ok()
                    .filter(Value::is_object)
                    .ok_or_else(|| {
                        protocol_error(&AppError::new(
                            ErrorCode::InputInvalid,
                            "q must be a JSON object in the data grammar",
                        ))
                    }),
            }
        };
        let (operation, table, request) = match resource {
            DataResource::Tables => {
                return json_contents(uri, &json!({"tables": app.tables_json()}));
            }
            DataResource::Actions => {
                let actions: Vec<Value> = app
                    .actions
                    .iter()
                    .map(|action| {
                        json!({
                            "id": action.id,
                            "tool": action.mcp_name,
                            "description": action.description,
                            "visibility": action.visibility,
                            "mutating": action.mutating,
                            "inputSchema": action.input_schema,
                            "resultSchema": action.result_schema,
                        })
                    })
                    .collect();
                return json_contents(uri, &json!({"actions": actions}));
            }
            DataResource::Rows { table, query: q } => ("list", table, query(q, false)?),
            DataResource::Aggregate { table, query: q } => ("aggregate", table, query(q, true)?),
            DataResource::Row { table, id } => {
                let id = id_argument(app, &table, &id);
                ("get", table, json!({"id": id}))
            }
            DataResource::History { table, id } => {
                let id = id_argument(app, &table, &id);
                ("history", table, json!({"id": id}))
            }
        };
        if !app.tables.contains_key(&table) {
            return Err(not_found());
        }
        let value = self
            .execute(DataCall {
                caller,
                app,
                operation,
                table: &table,
                request,
                action_id: None,
            })
            .await
            .map_err(|error| protocol_error(&error))?;
        json_contents(uri, &value)
    }
}
