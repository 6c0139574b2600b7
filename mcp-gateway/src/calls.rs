//! Running one tool call or resource read as governed data-service calls.
//!
//! Every call becomes exactly one `DataService.Execute` with the caller's user
//! as actor: per-table tools pass their (validated) arguments as the data
//! grammar; an action builds its one operation from its compiled descriptor and
//! the caller's validated input, rewriting `week-of` into a `gte`/`lt` pair over
//! seven days. Results of actions are validated against their `resultSchema`.
//!
//! data-worker learns an app's data contract from its callers: the first call for
//! a contract hash carries the contract (from studio-core's catalogue), later
//! ones only the hash, and then studio-core leaves the contract out of the
//! per-call catalogue too. A worker that restarted answers `contractRequired` and
//! the call is repeated once with the contract.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sasha_proto::grpc::DataClient;
use sasha_proto::pb::{Actor, ExecuteRequest};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Map, Value, json};

use crate::auth::Caller;

/// Where a data call comes from, recorded in the audit ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The app's own view in Studio.
    Ui,
    /// An MCP client (a model).
    Mcp,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Source::Ui => "ui",
            Source::Mcp => "mcp",
        }
    }
}

/// One governed data call about to run.
#[derive(Debug, Clone)]
pub struct DataCall<'a> {
    /// Who asks: the actor, and whether this is the app's own UI.
    pub caller: &'a Caller,
    pub app_id: &'a str,
    /// The app's catalogue entry (with its `contract` unless this replica
    /// named the current hash as known).
    pub app: &'a Value,
    pub operation: &'a str,
    pub table: &'a str,
    pub request: Value,
    pub action_id: Option<&'a str>,
}

/// The contract hash this replica last handed to data-worker, per app.
#[derive(Debug, Default)]
pub struct KnownContracts(Mutex<HashMap<String, String>>);

impl KnownContracts {
    /// The hash to name in `CatalogueRequest.known_contract_hash` for `app_id`
    /// (empty when none): studio-core then leaves the contract out when it is
    /// still the current one.
    pub fn hint(&self, app_id: &str) -> String {
        self.0
            .lock()
            .ok()
            .and_then(|known| known.get(app_id).cloned())
            .unwrap_or_default()
    }

    fn knows(&self, app_id: &str, hash: &str) -> bool {
        self.0
            .lock()
            .is_ok_and(|known| known.get(app_id).is_some_and(|known| known == hash))
    }

    fn learn(&self, app_id: &str, hash: &str) {
        if let Ok(mut known) = self.0.lock() {
            if known.len() > 10_000 {
                known.clear();
            }
            known.insert(app_id.to_owned(), hash.to_owned());
        }
    }
}

/// Runs `call` through data-worker and returns its result, parsed and as the
/// JSON text data-worker sent (a tool result's text content). The catalogue entry
/// carries the contract unless this replica had already handed that hash to
/// data-worker; when the worker no longer has it (it restarted) and the entry
/// lacks it, `fetch_contract` asks studio-core for it (the caller's grant is
/// checked again) and the call is repeated once with it.
pub async fn execute(
    data: &DataClient,
    known: &KnownContracts,
    call: DataCall<'_>,
    fetch_contract: impl AsyncFnOnce() -> Result<String, AppError>,
) -> Result<(Value, String), AppError> {
    let hash = call.app["contractHash"]
        .as_str()
        .ok_or_else(|| AppError::new(ErrorCode::OperationUnavailable, "this app has no data"))?;
    let contract = match &call.app["contract"] {
        Value::Null => None,
        contract => Some(contract.to_string()),
    };
    let source = if call.caller.is_app_ui(call.app_id) {
        Source::Ui
    } else {
        Source::Mcp
    };
    let mut request = ExecuteRequest {
        app_id: call.app_id.to_owned(),
        contract_hash: hash.to_owned(),
        actor: Some(Actor {
            user_id: call.caller.principal.user_id.clone(),
            via: match source {
                Source::Ui => "ui".to_owned(),
                Source::Mcp => "model".to_owned(),
            },
        }),
        operation: call.operation.to_owned(),
        table: call.table.to_owned(),
        request_json: call.request.to_string(),
        contract_json: if known.knows(call.app_id, hash) {
            String::new()
        } else {
            contract.clone().unwrap_or_default()
        },
        source: source.as_str().to_owned(),
        app_revision: call.app["revision"].as_str().unwrap_or("").to_owned(),
        action_id: call.action_id.unwrap_or("").to_owned(),
    };
    let mut client = data.clone();
    let reply = match client.execute(request.clone()).await {
        Ok(reply) => reply,
        Err(status) => {
            let error = AppError::from_status(&status);
            let wants_contract = error.code == ErrorCode::NotReady
                && error
                    .details
                    .as_ref()
                    .is_some_and(|details| details["contractRequired"] == true);
            if !wants_contract || !request.contract_json.is_empty() {
                return Err(error);
            }
            request.contract_json = match contract {
                Some(contract) => contract,
                None => fetch_contract().await?,
            };
            client
                .execute(request)
                .await
                .map_err(|status| AppError::from_status(&status))?
        }
    };
    known.learn(call.app_id, hash);
    let text = reply.into_inner().result_json;
    let value =
        serde_json::from_str(&text).map_err(|_| AppError::from_code(ErrorCode::Internal))?;
    Ok((value, text))
}

/// Compiled JSON Schema validators, keyed by the schema's JSON text, so a tool's
/// input schema is compiled once per replica rather than on every call. The
/// key is the whole schema, so a changed schema is a new entry; the map is
/// emptied when it reaches [`Validators::CAPACITY`].
#[derive(Default)]
pub struct Validators(Mutex<HashMap<String, Arc<jsonschema::Validator>>>);

impl std::fmt::Debug for Validators {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let size = self.0.lock().map_or(0, |cache| cache.len());
        f.debug_struct("Validators").field("cached", &size).finish()
    }
}

impl Validators {
    pub const CAPACITY: usize = 4096;

    /// Validates `instance` against `schema` (compiled once, then taken from
    /// the cache); the first few failures become one `APP_INPUT_INVALID`
    /// message naming where they are.
    pub fn validate(&self, schema: &Value, instance: &Value, what: &str) -> Result<(), AppError> {
        let key = schema.to_string();
        let cached = self
            .0
            .lock()
            .ok()
            .and_then(|cache| cache.get(&key).cloned());
        let validator = match cached {
            Some(validator) => validator,
            None => {
                let validator = Arc::new(compile(schema, what)?);
                if let Ok(mut cache) = self.0.lock() {
                    if cache.len() >= Self::CAPACITY {
                        cache.clear();
                    }
                    cache.insert(key, Arc::clone(&validator));
                }
                validator
            }
        };
        check(&validator, instance, what)
    }
}

fn compile(schema: &Value, what: &str) -> Result<jsonschema::Validator, AppError> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|_| {
            AppError::new(
                ErrorCode::ActionInvalid,
                format!("the {what} schema cannot be used"),
            )
        })
}

fn check(validator: &jsonschema::Validator, instance: &Value, what: &str) -> Result<(), AppError> {
    let problems: Vec<String> = validator
        .iter_errors(instance)
        .take(3)
        .map(|error| {
            let at = error.instance_path().to_string();
            let mut text = error.to_string();
            if text.len() > 200 {
                let mut cut = 200;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push('…');
            }
            if at.is_empty() {
                text
            } else {
                format!("{at}: {text}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(AppError::new(
            ErrorCode::InputInvalid,
            format!("the {what} is not valid: {}", problems.join("; ")),
        ))
    }
}

/// Shapes an action's result to its declared `resultSchema`: an object whose
/// schema closes it (`additionalProperties: false`) keeps only the declared
/// properties, at every level, so an action returns what its author declared
/// (a create returns the whole new row; `{id}` may be all it publishes) and
/// never a column the author left out.
pub fn project(schema: &Value, value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let properties = schema["properties"].as_object();
            let closed = schema["additionalProperties"] == false;
            Value::Object(
                map.into_iter()
                    .filter(|(key, _)| !closed || properties.is_some_and(|p| p.contains_key(key)))
                    .map(|(key, item)| {
                        let item = match properties.and_then(|p| p.get(&key)) {
                            Some(inner) => project(inner, item),
                            None => item,
                        };
                        (key, item)
                    })
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|item| project(&schema["items"], item))
                .collect(),
        ),
        other => other,
    }
}

/// The `(operation, table, data request)` an action's compiled descriptor makes
/// of `input` (already validated against its `inputSchema`). `idempotency_key`
/// is used by a mutating operation.
pub fn action_request(
    action: &Value,
    input: &Map<String, Value>,
    idempotency_key: &str,
) -> Result<(String, String, Value), AppError> {
    let (kind, operation) = action["operation"]
        .as_object()
        .and_then(|operation| operation.iter().next())
        .ok_or_else(|| AppError::from_code(ErrorCode::ActionInvalid))?;
    let table = operation["table"]
        .as_str()
        .ok_or_else(|| AppError::from_code(ErrorCode::ActionInvalid))?
        .to_owned();
    let value_of = |name: &Value| -> Result<Option<Value>, AppError> {
        let name = name
            .as_str()
            .ok_or_else(|| AppError::from_code(ErrorCode::ActionInvalid))?;
        Ok(input.get(name).cloned())
    };
    let filters = || -> Result<Vec<Value>, AppError> {
        let mut clauses = Vec::new();
        for clause in operation["where"].as_array().into_iter().flatten() {
            // A clause whose (optional) input is absent is left out of the call.
            let Some(value) = value_of(&clause["input"])? else {
                continue;
            };
            let field = &clause["field"];
            if clause["operator"] == "week-of" {
                let (start, end) = week_of(&value)?;
                clauses.push(json!({"field": field, "operator": "gte", "value": start}));
                clauses.push(json!({"field": field, "operator": "lt", "value": end}));
            } else {
                clauses
                    .push(json!({"field": field, "operator": clause["operator"], "value": value}));
            }
        }
        Ok(clauses)
    };
    let request = match kind.as_str() {
        "aggregate" => {
            let metrics: Vec<Value> = operation["metrics"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|metric| {
                    let mut out = Map::new();
                    out.insert("as".into(), metric["as"].clone());
                    if let Some(function) = metric["function"].as_str() {
                        out.insert(function.to_owned(), metric["field"].clone());
                    }
                    Value::Object(out)
                })
                .collect();
            let mut request = json!({"where": filters()?, "metrics": metrics});
            if let Some(group_by) = operation["groupBy"].as_array().filter(|g| !g.is_empty()) {
                request["groupBy"] = Value::Array(group_by.clone());
            }
            request
        }
        "list" => {
            let mut request = json!({"where": filters()?});
            if let Some(order) = operation["orderBy"].as_array().filter(|o| !o.is_empty()) {
                request["orderBy"] = Value::Array(order.clone());
            }
            if let Some(select) = operation["select"].as_array().filter(|s| !s.is_empty()) {
                request["select"] = Value::Array(select.clone());
            }
            if let Some(limit) = operation["limit"].as_u64() {
                request["limit"] = json!(limit);
            }
            request
        }
        "get" => {
            let id = value_of(&operation["idInput"])?.ok_or_else(|| {
                AppError::new(ErrorCode::InputInvalid, "the row id input is missing")
            })?;
            json!({"id": id})
        }
        "create" => {
            let mut values = Map::new();
            for (column, from) in operation["values"].as_object().into_iter().flatten() {
                if let Some(value) = value_of(from)? {
                    values.insert(column.clone(), value);
                }
            }
            json!({"values": values, "idempotencyKey": idempotency_key})
        }
        _ => return Err(AppError::from_code(ErrorCode::ActionInvalid)),
    };
    Ok((kind.clone(), table, request))
}

/// `week-of`: the seven days from an ISO date, as `[date, date + 7 days)`.
fn week_of(value: &Value) -> Result<(String, String), AppError> {
    let invalid = || {
        AppError::new(
            ErrorCode::InputInvalid,
            "a week-of value must be an ISO date such as 2026-09-07",
        )
    };
    let text = value.as_str().ok_or_else(invalid)?;
    let bytes = text.as_bytes();
    let shaped = bytes.len() == 10
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| i == 4 || i == 7 || b.is_ascii_digit());
    if !shaped {
        return Err(invalid());
    }
    let number = |range: std::ops::Range<usize>| text[range].parse::<u16>().map_err(|_| invalid());
    let month = u8::try_from(number(5..7)?)
        .ok()
        .and_then(|m| time::Month::try_from(m).ok())
        .ok_or_else(invalid)?;
    let day = u8::try_from(number(8..10)?).map_err(|_| invalid())?;
    let start = time::Date::from_calendar_date(i32::from(number(0..4)?), month, day)
        .map_err(|_| invalid())?;
    let end = start
        .checked_add(time::Duration::days(7))
        .ok_or_else(invalid)?;
    Ok((
        text.to_owned(),
        format!(
            "{:04}-{:02}-{:02}",
            end.year(),
            u8::from(end.month()),
            end.day()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weekly_totals() -> Value {
        json!({
            "id": "weekly-project-totals",
            "operation": {"aggregate": {
                "table": "entries",
                "where": [{"field": "date", "operator": "week-of", "input": "weekStart"}],
                "groupBy": ["project"],
                "metrics": [{"as": "hours", "function": "sum", "field": "hours"}]
            }}
        })
    }

    #[test]
    fn week_of_becomes_a_seven_day_half_open_range() {
        let input = json!({"weekStart": "2026-12-28"});
        let (kind, table, request) =
            action_request(&weekly_totals(), input.as_object().unwrap(), "k").unwrap();
        assert_eq!((kind.as_str(), table.as_str()), ("aggregate", "entries"));
        assert_eq!(
            request,
            json!({
                "where": [
                    {"field": "date", "operator": "gte", "value": "2026-12-28"},
                    {"field": "date", "operator": "lt", "value": "2027-01-04"}
                ],
                "groupBy": ["project"],
                "metrics": [{"as": "hours", "sum": "hours"}]
            })
        );
    }

    #[test]
    fn week_of_refuses_what_is_not_a_date() {
        for bad in [json!("2026-02-30"), json!("next monday"), json!(20260907)] {
            let input = json!({ "weekStart": bad });
            let error =
                action_request(&weekly_totals(), input.as_object().unwrap(), "k").unwrap_err();
            assert_eq!(error.code, ErrorCode::InputInvalid, "{bad}");
        }
    }

    #[test]
    fn a_filter_whose_optional_input_is_absent_is_left_out() {
        let action = json!({"operation": {"list": {
            "table": "entries",
            "where": [
                {"field": "project", "operator": "eq", "input": "project"},
                {"field": "date", "operator": "gte", "input": "from"}
            ],
            "limit": 10
        }}});
        let input = json!({"from": "2026-09-01"});
        let (_, _, request) = action_request(&action, input.as_object().unwrap(), "k").unwrap();
        assert_eq!(
            request,
            json!({"where": [{"field": "date", "operator": "gte", "value": "2026-09-01"}], "limit": 10})
        );
    }

    #[test]
    fn create_actions_take_values_from_inputs_and_the_key() {
        let action = json!({"operation": {"create": {
            "table": "entries",
            "values": {"date": "date", "hours": "hours", "note": "note"}
        }}});
        let input = json!({"date": "2026-09-08", "hours": 2});
        let (kind, _, request) =
            action_request(&action, input.as_object().unwrap(), "key-1").unwrap();
        assert_eq!(kind, "create");
        assert_eq!(
            request,
            json!({"values": {"date": "2026-09-08", "hours": 2}, "idempotencyKey": "key-1"})
        );
    }

    #[test]
    fn results_keep_only_what_a_closed_schema_declares() {
        let schema = json!({"type": "object", "properties": {"id": {"type": "integer"}, "rows": {"type": "array", "items": {"type": "object", "properties": {"a": {}}, "additionalProperties": false}}}, "additionalProperties": false});
        let value = json!({"id": 1, "created_by": "u", "rows": [{"a": 1, "b": 2}]});
        assert_eq!(
            project(&schema, value),
            json!({"id": 1, "rows": [{"a": 1}]})
        );
        let open = json!({"type": "object", "properties": {"id": {}}});
        assert_eq!(
            project(&open, json!({"id": 1, "x": 2})),
            json!({"id": 1, "x": 2})
        );
    }

    #[test]
    fn schema_failures_name_the_place() {
        let validators = Validators::default();
        let validate =
            |schema: &Value, instance: &Value| validators.validate(schema, instance, "input");
        let schema = json!({"type": "object", "properties": {"weekStart": {"type": "string", "format": "date"}}, "required": ["weekStart"], "additionalProperties": false});
        assert!(validate(&schema, &json!({"weekStart": "2026-09-07"})).is_ok());
        let error = validate(&schema, &json!({"weekStart": "soon"})).unwrap_err();
        assert_eq!(error.code, ErrorCode::InputInvalid);
        assert!(error.message.contains("/weekStart"), "{}", error.message);
        let error = validate(&schema, &json!({"weekStart": "2026-09-07", "x": 1})).unwrap_err();
        assert!(error.message.contains('x'), "{}", error.message);
        // The cached validator is the schema's own: another schema is compiled
        // for itself, and the first still judges by its rules.
        let open = json!({"type": "object", "properties": {"weekStart": {"type": "string"}}});
        assert!(validate(&open, &json!({"weekStart": "soon", "x": 1})).is_ok());
        assert!(validate(&schema, &json!({"weekStart": "soon"})).is_err());
        assert_eq!(validators.0.lock().unwrap().len(), 2);
        let broken = json!({"type": "no-such-type"});
        assert_eq!(
            validators
                .validate(&broken, &json!({}), "result")
                .unwrap_err()
                .code,
            ErrorCode::ActionInvalid
        );
    }
}
