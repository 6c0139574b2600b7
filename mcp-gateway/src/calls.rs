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
//!
//! Each call goes to the app's owner through the data plane, with the owner's
//! epoch. What a worker was handed is remembered with that epoch: a new owner
//! (a higher epoch) has been handed nothing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use sasha_contract::actions::{CompiledAction, Direction, Operation, WhereClause};

use sasha_contract::grammar::Operator;
use sasha_proto::convert::{self, ToWire};
use sasha_proto::pb::{self, Actor, ExecuteRequest};
use sasha_proto::{AppError, ErrorCode};
use sasha_service::Role;
use sasha_service::data_plane::DataPlane;
use sasha_service::grpc;
use serde_json::{Map, Value, json};

use crate::auth::Caller;
use crate::catalogue::App;

/// One governed data call about to run.
#[derive(Debug, Clone)]
pub struct DataCall<'a> {
    /// Who asks: the actor, and whether this is the app's own UI.
    pub caller: &'a Caller,
    /// The app's catalogue entry (with its `contract` unless this replica
    /// named the current hash as known).
    pub app: &'a App,
    pub operation: &'a str,
    pub table: &'a str,
    pub request: Value,
    pub action_id: Option<&'a str>,
}

/// The contract hash this replica last handed to each app's owner, and that
/// owner's epoch (0 with one data-worker). The epoch rises with every change
/// of owner, so a hash handed at another epoch was handed to another worker:
/// the entry is dropped, and the new owner gets the contract.
#[derive(Debug, Default)]
pub struct KnownContracts(Mutex<HashMap<String, Handed>>);

/// What one app's owner was handed.
#[derive(Debug)]
struct Handed {
    epoch: u64,
    hash: String,
}

impl KnownContracts {
    /// The hash to name in `CatalogueRequest.known_contract_hash` for `app_id`
    /// (empty when none): studio-core then leaves the contract out when it is
    /// still the current one.
    pub fn hint(&self, app_id: &str) -> String {
        self.0
            .lock()
            .ok()
            .and_then(|known| known.get(app_id).map(|handed| handed.hash.clone()))
            .unwrap_or_default()
    }

    /// Whether the owner at `epoch` was handed `hash`. An entry of another
    /// epoch is dropped: the app changed owner since, so the next
    /// catalogue read carries the contract again.
    fn knows(&self, app_id: &str, hash: &str, epoch: u64) -> bool {
        let Ok(mut known) = self.0.lock() else {
            return false;
        };
        match known.get(app_id) {
            Some(handed) if handed.epoch == epoch => handed.hash == hash,
            Some(_) => {
                known.remove(app_id);
                false
            }
            None => false,
        }
    }

    fn learn(&self, app_id: &str, hash: &str, epoch: u64) {
        if let Ok(mut known) = self.0.lock() {
            if known.len() > 10_000 {
                known.clear();
            }
            known.insert(
                app_id.to_owned(),
                Handed {
                    epoch,
                    hash: hash.to_owned(),
                },
            );
        }
    }
}

/// What a caller is told when data-worker did not answer in time: the
/// operation may still be applied, and a retry with the same idempotency key
/// is what makes that safe.
const WRITE_MAY_LAND: &str =
    "a change may still be applied: retry it with the same idempotency key";

/// Runs `call` through the app's data-worker and returns its result, parsed
/// and as the JSON text data-worker sent (a tool result's text content). The
/// catalogue entry carries the contract unless this replica had already
/// handed that hash to the app's owner; when the worker does not have it (it
/// restarted, or it is a new owner) and the entry lacks it, `fetch_contract`
/// asks studio-core for it (the caller's grant is checked again) and the call
/// is repeated once with it. A worker that does not own the app at the epoch
/// sent is asked again after a fresh route ([`DataPlane::call`]).
pub async fn execute(
    data: &DataPlane,
    deadline: std::time::Duration,
    known: &KnownContracts,
    call: DataCall<'_>,
    fetch_contract: impl AsyncFnOnce() -> Result<pb::DataContract, AppError>,
) -> Result<(Value, String), AppError> {
    let request = request_of(&call)?;
    // Sent already, beside the caller's check, exactly as this call would
    // send it (`speculate`): its answer is this call's.
    if let Some(answer) = call
        .caller
        .early
        .as_ref()
        .and_then(|early| early.take(&request))
    {
        return Ok(answer);
    }
    let (app_id, hash) = (call.app.id.as_str(), request.contract_hash.as_str());
    let contract = call.app.contract.clone();
    // Whether the last attempt carried the contract: a worker asking for
    // one it was just sent is not asked again.
    let carried = AtomicBool::new(false);
    let attempt = |client, epoch, contract: Option<pb::DataContract>| {
        let mut request = request.clone();
        request.epoch = epoch;
        carried.store(contract.is_some(), Ordering::SeqCst);
        request.contract = contract;
        execute_once(client, deadline, request)
    };
    let first = data
        .call(app_id, |client, epoch| {
            let handed = known.knows(app_id, hash, epoch);
            attempt(client, epoch, if handed { None } else { contract.clone() })
        })
        .await;
    let (reply, epoch) = match first {
        Err(error) if wants_contract(&error) && !carried.load(Ordering::SeqCst) => {
            let contract = match contract {
                Some(contract) => contract,
                None => fetch_contract().await?,
            };
            data.call(app_id, |client, epoch| {
                attempt(client, epoch, Some(contract.clone()))
            })
            .await?
        }
        answer => answer?,
    };
    known.learn(app_id, hash, epoch);
    let text = reply.result_json;
    let value =
        serde_json::from_str(&text).map_err(|_| AppError::from_code(ErrorCode::Internal))?;
    Ok((value, text))
}

/// The `Execute` request `call` sends (before its epoch and contract, which
/// each attempt sets).
pub fn request_of(call: &DataCall<'_>) -> Result<ExecuteRequest, AppError> {
    let hash =
        call.app.contract_hash.as_deref().ok_or_else(|| {
            AppError::new(ErrorCode::OperationUnavailable, "this app has no data")
        })?;
    let app_id = call.app.id.as_str();
    let (source, initiator, initiator_id) = call.caller.provenance(app_id, call.app.automation);
    let request = ExecuteRequest {
        app_id: app_id.to_owned(),
        epoch: 0,
        contract_hash: hash.to_owned(),
        actor: Some(Actor {
            user_id: call.caller.principal.user_id.clone(),
            // As studio-core read it for this call; table policies follow it.
            access: call.app.access.to_wire(),
        }),
        operation: call.operation.to_owned(),
        table: call.table.to_owned(),
        request_json: call.request.to_string(),
        // Per attempt: whether its worker was handed it already.
        contract: None,
        source: source.to_wire(),
        provenance: Some(convert::provenance_to_wire(
            initiator,
            initiator_id.as_deref(),
        )),
        app_revision: call.app.revision.clone(),
        action_id: call.action_id.unwrap_or("").to_owned(),
        // A draft preview's calls reach the caller's own scratch copy, never
        // the live file, holding only the live rows they may read.
        preview: call.caller.preview.clone().unwrap_or_default(),
        preview_scope: call
            .caller
            .preview
            .as_ref()
            .and(call.app.preview_scope.clone()),
    };
    Ok(request)
}

/// `request` sent once, as it is, to the worker this replica knows owns
/// its app and was handed its contract: no locate, no retry, no contract.
/// `None` for anything else, and for any refusal: the call it was sent
/// for then asks itself.
pub async fn execute_known(
    data: &DataPlane,
    deadline: std::time::Duration,
    known: &KnownContracts,
    mut request: ExecuteRequest,
) -> Option<(Value, String)> {
    let (client, epoch) = data.known(&request.app_id)?;
    if !known.knows(&request.app_id, &request.contract_hash, epoch) {
        return None;
    }
    request.epoch = epoch;
    let (reply, _) = execute_once(client, deadline, request).await.ok()?;
    let value = serde_json::from_str(&reply.result_json).ok()?;
    Some((value, reply.result_json))
}

/// One `Execute` at the worker `client` reaches, with the epoch it answered
/// at.
async fn execute_once(
    mut client: grpc::DataClient,
    deadline: std::time::Duration,
    request: ExecuteRequest,
) -> Result<(pb::ExecuteReply, u64), AppError> {
    let epoch = request.epoch;
    grpc::within(
        Role::DataWorker,
        deadline,
        WRITE_MAY_LAND,
        client.execute(request),
    )
    .await
    .map(|reply| (reply, epoch))
}

/// Whether a worker asks for the contract it lacks (it restarted, or it
/// has just gained the app).
fn wants_contract(error: &AppError) -> bool {
    error.code == ErrorCode::NotReady
        && error
            .details
            .as_ref()
            .is_some_and(|details| details.get("contractRequired") == Some(&Value::Bool(true)))
}

/// Shapes an action's result to its declared `resultSchema`: an object whose
/// schema closes it (`additionalProperties: false`) keeps only the declared
/// properties, at every level, so an action returns what its author declared
/// (a create returns the whole new row; `{id}` may be all it publishes) and
/// never a column the author left out.
pub fn project(schema: &Value, value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
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
        Value::Array(items) => {
            let inner = schema.get("items").unwrap_or(&Value::Null);
            Value::Array(items.into_iter().map(|item| project(inner, item)).collect())
        }
        other => other,
    }
}

/// The `(operation, table, data request)` an action's compiled operation
/// makes of `input` (already validated against its `inputSchema`).
/// `idempotency_key` is used by a mutating operation.
pub fn action_request(
    action: &CompiledAction,
    input: &Value,
    idempotency_key: &str,
) -> Result<(&'static str, String, Value), AppError> {
    let operation = &action.operation;
    let request = match operation {
        Operation::Aggregate(aggregate) => {
            let metrics: Vec<Value> = aggregate
                .metrics
                .iter()
                .map(|metric| {
                    let mut out = Map::new();
                    out.insert("as".into(), json!(metric.alias));
                    out.insert(metric.function.name().to_owned(), json!(metric.field));
                    Value::Object(out)
                })
                .collect();
            let mut request = Map::new();
            request.insert("where".into(), filters(&aggregate.filters, input)?);
            request.insert("metrics".into(), Value::Array(metrics));
            if !aggregate.group_by.is_empty() {
                request.insert("groupBy".into(), json!(aggregate.group_by));
            }
            Value::Object(request)
        }
        Operation::List(list) => {
            let mut request = Map::new();
            request.insert("where".into(), filters(&list.filters, input)?);
            if !list.order_by.is_empty() {
                let order: Vec<Value> = list
                    .order_by
                    .iter()
                    .map(|order| {
                        json!({
                            "field": order.field,
                            "direction": match order.direction {
                                Direction::Asc => "asc",
                                Direction::Desc => "desc",
                            },
                        })
                    })
                    .collect();
                request.insert("orderBy".into(), Value::Array(order));
            }
            if !list.select.is_empty() {
                request.insert("select".into(), json!(list.select));
            }
            if let Some(limit) = list.limit {
                request.insert("limit".into(), json!(limit));
            }
            Value::Object(request)
        }
        Operation::Get(get) => {
            let id = input.get(&get.id_input).cloned().ok_or_else(|| {
                AppError::new(ErrorCode::InputInvalid, "the row id input is missing")
            })?;
            json!({"id": id})
        }
        Operation::Create(create) => {
            let values: Map<String, Value> = create
                .values
                .iter()
                .filter_map(|(column, from)| Some((column.clone(), input.get(from)?.clone())))
                .collect();
            json!({"values": values, "idempotencyKey": idempotency_key})
        }
    };
    Ok((operation.kind(), operation.table().to_owned(), request))
}

/// The data grammar's `where` clauses for an action's: a clause whose
/// (optional) input is absent is left out of the call, and `week-of` becomes
/// a `gte`/`lt` pair.
fn filters(clauses: &[WhereClause], input: &Value) -> Result<Value, AppError> {
    let mut out = Vec::new();
    for clause in clauses {
        let Some(value) = input.get(&clause.input) else {
            continue;
        };
        let field = &clause.field;
        match clause.operator.data_operator() {
            Some(operator) => {
                out.push(json!({"field": field, "operator": operator.name(), "value": value}))
            }
            None => {
                let (start, end) = week_of(value)?;
                out.push(json!({"field": field, "operator": Operator::Gte.name(), "value": start}));
                out.push(json!({"field": field, "operator": Operator::Lt.name(), "value": end}));
            }
        }
    }
    Ok(Value::Array(out))
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

    use sasha_contract::actions::{
        AggregateOperation, CreateOperation, ListOperation, Metric, WhereClause, WhereOperator,
    };
    use sasha_contract::grammar::MetricFunction;

    fn action(operation: Operation) -> CompiledAction {
        CompiledAction {
            id: "weekly-project-totals".into(),
            visibility: vec!["app".into()],
            mcp_name: "app__t__weekly_project_totals".into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            result_schema: json!({"type": "object"}),
            mutating: operation.is_mutating(),
            operation,
        }
    }

    fn clause(field: &str, operator: WhereOperator, input: &str) -> WhereClause {
        WhereClause {
            field: field.into(),
            operator,
            input: input.into(),
        }
    }

    fn weekly_totals() -> CompiledAction {
        action(Operation::Aggregate(AggregateOperation {
            table: "entries".into(),
            filters: vec![clause("date", WhereOperator::WeekOf, "weekStart")],
            group_by: vec!["project".into()],
            metrics: vec![Metric {
                alias: "hours".into(),
                function: MetricFunction::Sum,
                field: "hours".into(),
            }],
        }))
    }

    #[test]
    fn a_contract_handed_to_one_owner_is_not_known_to_the_next() {
        let known = KnownContracts::default();
        assert_eq!(known.hint("hello"), "");
        known.learn("hello", "h1", 1);
        assert_eq!(known.hint("hello"), "h1");
        assert!(known.knows("hello", "h1", 1));
        assert!(!known.knows("hello", "h2", 1), "another hash");
        // The app changed owner (epoch 2): nothing was handed to it, and the
        // next catalogue read asks for the contract again.
        assert!(!known.knows("hello", "h1", 2));
        assert_eq!(known.hint("hello"), "");
        assert!(!known.knows("hello", "h1", 1));
        known.learn("hello", "h1", 2);
        assert!(known.knows("hello", "h1", 2));
        // One data-worker: epoch 0 throughout.
        known.learn("other", "h3", 0);
        assert!(known.knows("other", "h3", 0));
    }

    #[test]
    fn week_of_becomes_a_seven_day_half_open_range() {
        let input = json!({"weekStart": "2026-12-28"});
        let (kind, table, request) = action_request(&weekly_totals(), &input, "k").unwrap();
        assert_eq!((kind, table.as_str()), ("aggregate", "entries"));
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
            let error = action_request(&weekly_totals(), &input, "k").unwrap_err();
            assert_eq!(error.code, ErrorCode::InputInvalid, "{bad}");
        }
    }

    #[test]
    fn a_filter_whose_optional_input_is_absent_is_left_out() {
        let action = action(Operation::List(ListOperation {
            table: "entries".into(),
            filters: vec![
                clause("project", WhereOperator::Eq, "project"),
                clause("date", WhereOperator::Gte, "from"),
            ],
            order_by: Vec::new(),
            select: Vec::new(),
            limit: Some(10),
        }));
        let input = json!({"from": "2026-09-01"});
        let (_, _, request) = action_request(&action, &input, "k").unwrap();
        assert_eq!(
            request,
            json!({"where": [{"field": "date", "operator": "gte", "value": "2026-09-01"}], "limit": 10})
        );
    }

    #[test]
    fn create_actions_take_values_from_inputs_and_the_key() {
        let action = action(Operation::Create(CreateOperation {
            table: "entries".into(),
            values: [("date", "date"), ("hours", "hours"), ("note", "note")]
                .into_iter()
                .map(|(column, input)| (column.to_owned(), input.to_owned()))
                .collect(),
        }));
        let input = json!({"date": "2026-09-08", "hours": 2});
        let (kind, _, request) = action_request(&action, &input, "key-1").unwrap();
        assert_eq!(kind, "create");
        assert_eq!(
            request,
            json!({"values": {"date": "2026-09-08", "hours": 2}, "idempotencyKey": "key-1"})
        );
    }

    #[test]
    fn list_and_get_actions_carry_their_compiled_parts() {
        use sasha_contract::actions::{GetOperation, OrderBy};
        let list = action(Operation::List(ListOperation {
            table: "entries".into(),
            filters: vec![clause("project", WhereOperator::In, "projects")],
            order_by: vec![
                OrderBy {
                    field: "date".into(),
                    direction: Direction::Desc,
                },
                OrderBy {
                    field: "id".into(),
                    direction: Direction::Asc,
                },
            ],
            select: vec!["date".into(), "hours".into()],
            limit: None,
        }));
        let input = json!({"projects": ["a", "b"]});
        let (kind, table, request) = action_request(&list, &input, "k").unwrap();
        assert_eq!((kind, table.as_str()), ("list", "entries"));
        assert_eq!(
            request,
            json!({
                "where": [{"field": "project", "operator": "in", "value": ["a", "b"]}],
                "orderBy": [{"field": "date", "direction": "desc"}, {"field": "id", "direction": "asc"}],
                "select": ["date", "hours"]
            })
        );
        let get = action(Operation::Get(GetOperation {
            table: "entries".into(),
            id_input: "entry".into(),
        }));
        let input = json!({"entry": 7});
        let (kind, _, request) = action_request(&get, &input, "k").unwrap();
        assert_eq!((kind, request), ("get", json!({"id": 7})));
        let error = action_request(&get, &json!({}), "k").unwrap_err();
        assert_eq!(error.code, ErrorCode::InputInvalid);
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
}
