//! The one place wire types and contract types meet: every message of
//! `contract.proto` to and from its `sasha-contract` type, and open-shaped JSON
//! to and from [`pb::JsonValue`].
//!
//! Conversions from the wire are fallible: an enum left unspecified or an
//! operation missing is a peer's bug, refused as `APP_INPUT_INVALID` naming
//! the message, never guessed.
//!
//! This module must never decide anything: it moves fields.

use std::collections::{BTreeMap, BTreeSet};

use sasha_contract::actions::{
    AggregateOperation, CompiledAction, CreateOperation, Direction, GetOperation, ListOperation,
    Metric, Operation, OrderBy, WhereClause, WhereOperator,
};
use sasha_contract::caller::{
    AppAccess, CallSource, Initiator, PrincipalKind, Role, Scope, TokenOrigin,
};
use sasha_contract::data::{
    Access, Check, Column, DataContract, ForeignKey, Index, Migration, PreviewScope, RowScope,
    Schema, Table, TableDeclaration, WritePolicy,
};
use sasha_contract::grammar::MetricFunction;
use serde_json::{Number, Value, json};

use crate::pb;
use crate::{AppError, ErrorCode};

fn invalid(what: &str) -> AppError {
    AppError::new(
        ErrorCode::InputInvalid,
        format!("the {what} sent between services is not valid"),
    )
}

// ---------------------------------------------------------------------------
// Open-shaped JSON. Hand-written because `google.protobuf.Struct` keeps only
// doubles: `3` would come back as `3.0` and integers past 2^53 would change.

impl From<&Value> for pb::JsonValue {
    fn from(value: &Value) -> pb::JsonValue {
        use pb::json_value::Kind;
        let kind = match value {
            Value::Null => Kind::Null(true),
            Value::Bool(flag) => Kind::Boolean(*flag),
            Value::Number(number) => match (number.as_i64(), number.as_u64()) {
                (Some(integer), _) => Kind::Integer(integer),
                (None, Some(unsigned)) => Kind::Unsigned(unsigned),
                _ => Kind::Float(number.as_f64().unwrap_or_default()),
            },
            Value::String(text) => Kind::Text(text.clone()),
            Value::Array(items) => Kind::Array(pb::JsonArray {
                items: items.iter().map(pb::JsonValue::from).collect(),
            }),
            Value::Object(map) => Kind::Object(json_object(map)),
        };
        pb::JsonValue { kind: Some(kind) }
    }
}

fn json_object(map: &serde_json::Map<String, Value>) -> pb::JsonObject {
    pb::JsonObject {
        fields: map
            .iter()
            .map(|(key, value)| (key.clone(), pb::JsonValue::from(value)))
            .collect(),
    }
}

/// A JSON object for the wire; anything but an object travels as an empty one
/// (every open-shaped field is an object by contract).
pub fn to_json_object(value: &Value) -> pb::JsonObject {
    match value {
        Value::Object(map) => json_object(map),
        _ => pb::JsonObject::default(),
    }
}

/// A JSON value from the wire. A float that is not finite (which JSON cannot
/// hold) reads as `null`.
pub fn json_value(value: &pb::JsonValue) -> Value {
    use pb::json_value::Kind;
    match &value.kind {
        None | Some(Kind::Null(_)) => Value::Null,
        Some(Kind::Boolean(flag)) => Value::Bool(*flag),
        Some(Kind::Integer(integer)) => Value::from(*integer),
        Some(Kind::Unsigned(unsigned)) => Value::from(*unsigned),
        Some(Kind::Float(float)) => Number::from_f64(*float).map_or(Value::Null, Value::Number),
        Some(Kind::Text(text)) => Value::String(text.clone()),
        Some(Kind::Array(array)) => Value::Array(array.items.iter().map(json_value).collect()),
        Some(Kind::Object(object)) => json_from_object(object),
    }
}

/// A JSON object from the wire.
pub fn json_from_object(object: &pb::JsonObject) -> Value {
    Value::Object(
        object
            .fields
            .iter()
            .map(|(key, value)| (key.clone(), json_value(value)))
            .collect(),
    )
}

// ---------------------------------------------------------------------------
// Who calls: the caller vocabulary's words, one wire enum each

/// A closed word of `sasha_contract::caller` read from its wire enum's
/// number: an unspecified or unknown number is refused.
pub trait FromWire: Sized {
    fn from_wire(number: i32) -> Result<Self, AppError>;
}

/// A closed word of `sasha_contract::caller` as its wire enum's number.
pub trait ToWire {
    fn to_wire(self) -> i32;
}

/// Each word and its wire enum, value for value.
macro_rules! wire_words {
    ($($word:ident <=> pb::$wire:ident, $what:literal { $($value:ident),+ $(,)? })+) => {$(
        impl ToWire for $word {
            fn to_wire(self) -> i32 {
                match self {
                    $($word::$value => pb::$wire::$value as i32,)+
                }
            }
        }

        impl FromWire for $word {
            fn from_wire(number: i32) -> Result<$word, AppError> {
                match pb::$wire::try_from(number) {
                    $(Ok(pb::$wire::$value) => Ok($word::$value),)+
                    Ok(pb::$wire::Unspecified) | Err(_) => Err(invalid($what)),
                }
            }
        }
    )+};
}

wire_words! {
    Role <=> pb::Role, "role" { Admin, Staff, Member }
    Scope <=> pb::Scope, "scope" { ChatUse, AppsInvoke, AppsWrite, AppsAuthor }
    PrincipalKind <=> pb::PrincipalKind, "principal kind" { Session, Access, ApiKey, ChatSession }
    AppAccess <=> pb::AppAccess, "app access" { Use, Manage }
    CallSource <=> pb::CallSource, "call source" { Ui, Mcp, Import, Skill, Automation }
    Initiator <=> pb::Initiator, "initiator" { AppView, RecoveryView, Assistant, McpClient, Automation, Import, Undo, Migration }
}

/// A data change's provenance for the wire: its initiator and, for the
/// kinds that carry one, the initiator's id.
pub fn provenance_to_wire(initiator: Initiator, id: Option<&str>) -> pb::Provenance {
    pb::Provenance {
        initiator: initiator.to_wire(),
        id: id.unwrap_or_default().to_owned(),
    }
}

/// A token's origin for the wire.
pub fn origin_to_wire(origin: &TokenOrigin) -> pb::TokenOrigin {
    use pb::token_origin::Origin;
    pb::TokenOrigin {
        origin: Some(match origin {
            TokenOrigin::Conversation(id) => Origin::Conversation(id.clone()),
            TokenOrigin::OAuthClient(client) => Origin::OauthClient(client.clone()),
            TokenOrigin::Token(number) => Origin::Token(*number),
        }),
    }
}

/// A token's origin from the wire; `None` when none is set (a session).
pub fn origin_from_wire(wire: Option<&pb::TokenOrigin>) -> Option<TokenOrigin> {
    use pb::token_origin::Origin;
    Some(match wire?.origin.as_ref()? {
        Origin::Conversation(id) => TokenOrigin::Conversation(id.clone()),
        Origin::OauthClient(client) => TokenOrigin::OAuthClient(client.clone()),
        Origin::Token(number) => TokenOrigin::Token(*number),
    })
}

/// Scopes from the wire, every one of them a scope.
pub fn scopes_from_wire(numbers: &[i32]) -> Result<BTreeSet<Scope>, AppError> {
    numbers
        .iter()
        .map(|number| Scope::from_wire(*number))
        .collect()
}

/// Scopes for the wire, in order.
pub fn scopes_to_wire<'a>(scopes: impl IntoIterator<Item = &'a Scope>) -> Vec<i32> {
    scopes.into_iter().map(|scope| scope.to_wire()).collect()
}

// ---------------------------------------------------------------------------
// The data contract

impl From<&TableDeclaration> for pb::TableDeclaration {
    fn from(declaration: &TableDeclaration) -> pb::TableDeclaration {
        pb::TableDeclaration {
            access: match declaration.access {
                Access::Owner => pb::Access::Owner,
                Access::Shared => pb::Access::Shared,
            } as i32,
            owner_field: declaration.owner_field.clone(),
            write: match declaration.write {
                WritePolicy::Use => pb::WritePolicy::Use,
                WritePolicy::Manage => pb::WritePolicy::Manage,
            } as i32,
            managers_read_all: declaration.managers_read_all,
        }
    }
}

impl TryFrom<&pb::TableDeclaration> for TableDeclaration {
    type Error = AppError;
    fn try_from(declaration: &pb::TableDeclaration) -> Result<TableDeclaration, AppError> {
        let access = match pb::Access::try_from(declaration.access) {
            Ok(pb::Access::Owner) => Access::Owner,
            Ok(pb::Access::Shared) => Access::Shared,
            _ => return Err(invalid("table declaration")),
        };
        let write = match pb::WritePolicy::try_from(declaration.write) {
            Ok(pb::WritePolicy::Use) => WritePolicy::Use,
            Ok(pb::WritePolicy::Manage) => WritePolicy::Manage,
            Err(_) => return Err(invalid("table declaration")),
        };
        Ok(TableDeclaration {
            access,
            owner_field: declaration.owner_field.clone(),
            write,
            managers_read_all: declaration.managers_read_all,
        })
    }
}

impl From<&Column> for pb::Column {
    fn from(column: &Column) -> pb::Column {
        pb::Column {
            name: column.name.clone(),
            declared_type: column.declared_type.clone(),
            not_null: column.not_null,
            default_value: column.default_value.clone(),
            primary_key: column.primary_key,
            generated: column.generated,
        }
    }
}

impl From<&pb::Column> for Column {
    fn from(column: &pb::Column) -> Column {
        Column {
            name: column.name.clone(),
            declared_type: column.declared_type.clone(),
            not_null: column.not_null,
            default_value: column.default_value.clone(),
            primary_key: column.primary_key,
            generated: column.generated,
        }
    }
}

impl From<&Table> for pb::TableStructure {
    fn from(table: &Table) -> pb::TableStructure {
        pb::TableStructure {
            name: table.name.clone(),
            columns: table.columns.iter().map(pb::Column::from).collect(),
            unique: table
                .unique
                .iter()
                .map(|columns| pb::ColumnList {
                    columns: columns.clone(),
                })
                .collect(),
            foreign_keys: table
                .foreign_keys
                .iter()
                .map(|key| pb::ForeignKey {
                    columns: key.columns.clone(),
                    parent_table: key.parent_table.clone(),
                    parent_columns: key.parent_columns.clone(),
                    on_update: key.on_update.clone(),
                    on_delete: key.on_delete.clone(),
                })
                .collect(),
            checks: table.checks.iter().map(pb::Check::from).collect(),
            checks_unreadable: table.checks_unreadable,
            strict: table.strict,
            without_rowid: table.without_rowid,
        }
    }
}

impl From<&Check> for pb::Check {
    fn from(check: &Check) -> pb::Check {
        pb::Check {
            name: check.name.clone(),
            columns: check.columns.clone(),
            expression: check.expression.clone(),
        }
    }
}

impl From<&pb::Check> for Check {
    fn from(check: &pb::Check) -> Check {
        Check {
            name: check.name.clone(),
            columns: check.columns.clone(),
            expression: check.expression.clone(),
        }
    }
}

impl From<&pb::TableStructure> for Table {
    fn from(table: &pb::TableStructure) -> Table {
        Table {
            name: table.name.clone(),
            columns: table.columns.iter().map(Column::from).collect(),
            unique: table
                .unique
                .iter()
                .map(|list| list.columns.clone())
                .collect(),
            foreign_keys: table
                .foreign_keys
                .iter()
                .map(|key| ForeignKey {
                    columns: key.columns.clone(),
                    parent_table: key.parent_table.clone(),
                    parent_columns: key.parent_columns.clone(),
                    on_update: key.on_update.clone(),
                    on_delete: key.on_delete.clone(),
                })
                .collect(),
            checks: table.checks.iter().map(Check::from).collect(),
            checks_unreadable: table.checks_unreadable,
            strict: table.strict,
            without_rowid: table.without_rowid,
        }
    }
}

impl From<&Schema> for pb::Schema {
    fn from(schema: &Schema) -> pb::Schema {
        pb::Schema {
            tables: schema
                .tables
                .iter()
                .map(|(name, table)| (name.clone(), pb::TableStructure::from(table)))
                .collect(),
            indexes: schema
                .indexes
                .iter()
                .map(|(name, index)| {
                    (
                        name.clone(),
                        pb::Index {
                            name: index.name.clone(),
                            table: index.table.clone(),
                            columns: index.columns.clone(),
                            unique: index.unique,
                            partial: index.partial,
                        },
                    )
                })
                .collect(),
        }
    }
}

impl From<&pb::Schema> for Schema {
    fn from(schema: &pb::Schema) -> Schema {
        Schema {
            tables: schema
                .tables
                .iter()
                .map(|(name, table)| (name.clone(), Table::from(table)))
                .collect(),
            indexes: schema
                .indexes
                .iter()
                .map(|(name, index)| {
                    (
                        name.clone(),
                        Index {
                            name: index.name.clone(),
                            table: index.table.clone(),
                            columns: index.columns.clone(),
                            unique: index.unique,
                            partial: index.partial,
                        },
                    )
                })
                .collect(),
        }
    }
}

impl From<&DataContract> for pb::DataContract {
    fn from(contract: &DataContract) -> pb::DataContract {
        pb::DataContract {
            schema: Some(pb::Schema::from(&contract.schema)),
            migrations: contract
                .migrations
                .iter()
                .map(|migration| pb::Migration {
                    file: migration.file.clone(),
                    number: migration.number,
                    sql: migration.sql.clone(),
                    checksum: migration.checksum.clone(),
                })
                .collect(),
            tables: contract
                .tables
                .iter()
                .map(|(name, declaration)| (name.clone(), declaration.into()))
                .collect(),
            hash: contract.hash.clone(),
        }
    }
}

impl TryFrom<&pb::DataContract> for DataContract {
    type Error = AppError;
    fn try_from(contract: &pb::DataContract) -> Result<DataContract, AppError> {
        let tables: BTreeMap<String, TableDeclaration> = contract
            .tables
            .iter()
            .map(|(name, declaration)| Ok((name.clone(), declaration.try_into()?)))
            .collect::<Result<_, AppError>>()?;
        Ok(DataContract {
            schema: contract
                .schema
                .as_ref()
                .map(Schema::from)
                .ok_or_else(|| invalid("data contract"))?,
            migrations: contract
                .migrations
                .iter()
                .map(|migration| Migration {
                    file: migration.file.clone(),
                    number: migration.number,
                    sql: migration.sql.clone(),
                    checksum: migration.checksum.clone(),
                })
                .collect(),
            tables,
            hash: contract.hash.clone(),
        })
    }
}

impl From<&PreviewScope> for pb::PreviewScope {
    fn from(scope: &PreviewScope) -> pb::PreviewScope {
        pb::PreviewScope {
            tables: scope
                .tables
                .iter()
                .map(|(name, rows)| {
                    let owner_field = match rows {
                        RowScope::Every => None,
                        RowScope::OwnedBy(field) => Some(field.clone()),
                    };
                    (name.clone(), pb::PreviewTableScope { owner_field })
                })
                .collect(),
        }
    }
}

impl From<&pb::PreviewScope> for PreviewScope {
    fn from(scope: &pb::PreviewScope) -> PreviewScope {
        PreviewScope {
            tables: scope
                .tables
                .iter()
                .map(|(name, rows)| {
                    let rows = match &rows.owner_field {
                        None => RowScope::Every,
                        Some(field) => RowScope::OwnedBy(field.clone()),
                    };
                    (name.clone(), rows)
                })
                .collect(),
        }
    }
}

// ---------------------------------------------------------------------------
// A resource's `_meta.ui`

/// The strings of `value[key]`; none when it is not an array of strings.
fn strings(value: &serde_json::Value, key: &str) -> Vec<String> {
    value[key]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `_meta.ui` of an assembled resource (`sasha-package`'s assembler) as the
/// wire carries it.
pub fn resource_meta(meta: &serde_json::Value) -> pb::ResourceMeta {
    let csp = &meta["csp"];
    pb::ResourceMeta {
        connect_domains: strings(csp, "connectDomains"),
        resource_domains: strings(csp, "resourceDomains"),
        frame_domains: strings(csp, "frameDomains"),
        base_uri_domains: strings(csp, "baseUriDomains"),
        prefers_border: meta["prefersBorder"].as_bool().unwrap_or(false),
        source_digest: meta["sasha"]["sourceDigest"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// A UI resource's `_meta.ui`: its CSP domains, no permissions, its border
/// preference and the digest of the source it was assembled from.
pub fn ui_meta(meta: &pb::ResourceMeta) -> Value {
    json!({
        "csp": {
            "connectDomains": meta.connect_domains,
            "resourceDomains": meta.resource_domains,
            "frameDomains": meta.frame_domains,
            "baseUriDomains": meta.base_uri_domains,
        },
        "permissions": {},
        "prefersBorder": meta.prefers_border,
        "sasha": {"sourceDigest": meta.source_digest},
    })
}

// ---------------------------------------------------------------------------
// Compiled actions

fn where_operator(operator: WhereOperator) -> pb::WhereOperator {
    match operator {
        WhereOperator::Eq => pb::WhereOperator::Eq,
        WhereOperator::Neq => pb::WhereOperator::Neq,
        WhereOperator::Lt => pb::WhereOperator::Lt,
        WhereOperator::Lte => pb::WhereOperator::Lte,
        WhereOperator::Gt => pb::WhereOperator::Gt,
        WhereOperator::Gte => pb::WhereOperator::Gte,
        WhereOperator::In => pb::WhereOperator::In,
        WhereOperator::WeekOf => pb::WhereOperator::WeekOf,
    }
}

fn where_operator_from(operator: i32) -> Result<WhereOperator, AppError> {
    Ok(match pb::WhereOperator::try_from(operator) {
        Ok(pb::WhereOperator::Eq) => WhereOperator::Eq,
        Ok(pb::WhereOperator::Neq) => WhereOperator::Neq,
        Ok(pb::WhereOperator::Lt) => WhereOperator::Lt,
        Ok(pb::WhereOperator::Lte) => WhereOperator::Lte,
        Ok(pb::WhereOperator::Gt) => WhereOperator::Gt,
        Ok(pb::WhereOperator::Gte) => WhereOperator::Gte,
        Ok(pb::WhereOperator::In) => WhereOperator::In,
        Ok(pb::WhereOperator::WeekOf) => WhereOperator::WeekOf,
        _ => return Err(invalid("action")),
    })
}

fn metric_function(function: MetricFunction) -> pb::MetricFunction {
    match function {
        MetricFunction::Sum => pb::MetricFunction::Sum,
        MetricFunction::Avg => pb::MetricFunction::Avg,
        MetricFunction::Min => pb::MetricFunction::Min,
        MetricFunction::Max => pb::MetricFunction::Max,
        MetricFunction::Count => pb::MetricFunction::Count,
        MetricFunction::CountDistinct => pb::MetricFunction::CountDistinct,
    }
}

fn metric_function_from(function: i32) -> Result<MetricFunction, AppError> {
    Ok(match pb::MetricFunction::try_from(function) {
        Ok(pb::MetricFunction::Sum) => MetricFunction::Sum,
        Ok(pb::MetricFunction::Avg) => MetricFunction::Avg,
        Ok(pb::MetricFunction::Min) => MetricFunction::Min,
        Ok(pb::MetricFunction::Max) => MetricFunction::Max,
        Ok(pb::MetricFunction::Count) => MetricFunction::Count,
        Ok(pb::MetricFunction::CountDistinct) => MetricFunction::CountDistinct,
        _ => return Err(invalid("action")),
    })
}

fn clauses(filters: &[WhereClause]) -> Vec<pb::WhereClause> {
    filters
        .iter()
        .map(|clause| pb::WhereClause {
            field: clause.field.clone(),
            operator: where_operator(clause.operator) as i32,
            input: clause.input.clone(),
        })
        .collect()
}

fn clauses_from(filters: &[pb::WhereClause]) -> Result<Vec<WhereClause>, AppError> {
    filters
        .iter()
        .map(|clause| {
            Ok(WhereClause {
                field: clause.field.clone(),
                operator: where_operator_from(clause.operator)?,
                input: clause.input.clone(),
            })
        })
        .collect()
}

impl From<&CompiledAction> for pb::CompiledAction {
    fn from(action: &CompiledAction) -> pb::CompiledAction {
        use pb::compiled_action::Operation as Wire;
        let operation = match &action.operation {
            Operation::Aggregate(operation) => Wire::Aggregate(pb::AggregateOperation {
                table: operation.table.clone(),
                filters: clauses(&operation.filters),
                group_by: operation.group_by.clone(),
                metrics: operation
                    .metrics
                    .iter()
                    .map(|metric| pb::Metric {
                        alias: metric.alias.clone(),
                        function: metric_function(metric.function) as i32,
                        field: metric.field.clone(),
                    })
                    .collect(),
            }),
            Operation::List(operation) => Wire::List(pb::ListOperation {
                table: operation.table.clone(),
                filters: clauses(&operation.filters),
                order_by: operation
                    .order_by
                    .iter()
                    .map(|order| pb::OrderBy {
                        field: order.field.clone(),
                        descending: order.direction == Direction::Desc,
                    })
                    .collect(),
                select: operation.select.clone(),
                limit: operation.limit,
            }),
            Operation::Get(operation) => Wire::Get(pb::GetOperation {
                table: operation.table.clone(),
                id_input: operation.id_input.clone(),
            }),
            Operation::Create(operation) => Wire::Create(pb::CreateOperation {
                table: operation.table.clone(),
                values: operation.values.clone().into_iter().collect(),
            }),
        };
        pb::CompiledAction {
            id: action.id.clone(),
            visibility: action.visibility.clone(),
            mcp_name: action.mcp_name.clone(),
            description: action.description.clone(),
            input_schema: Some(to_json_object(&action.input_schema)),
            result_schema: Some(to_json_object(&action.result_schema)),
            mutating: action.mutating,
            operation: Some(operation),
        }
    }
}

impl TryFrom<&pb::CompiledAction> for CompiledAction {
    type Error = AppError;
    fn try_from(action: &pb::CompiledAction) -> Result<CompiledAction, AppError> {
        use pb::compiled_action::Operation as Wire;
        let operation = match action.operation.as_ref().ok_or_else(|| invalid("action"))? {
            Wire::Aggregate(operation) => Operation::Aggregate(AggregateOperation {
                table: operation.table.clone(),
                filters: clauses_from(&operation.filters)?,
                group_by: operation.group_by.clone(),
                metrics: operation
                    .metrics
                    .iter()
                    .map(|metric| {
                        Ok(Metric {
                            alias: metric.alias.clone(),
                            function: metric_function_from(metric.function)?,
                            field: metric.field.clone(),
                        })
                    })
                    .collect::<Result<_, AppError>>()?,
            }),
            Wire::List(operation) => Operation::List(ListOperation {
                table: operation.table.clone(),
                filters: clauses_from(&operation.filters)?,
                order_by: operation
                    .order_by
                    .iter()
                    .map(|order| OrderBy {
                        field: order.field.clone(),
                        direction: if order.descending {
                            Direction::Desc
                        } else {
                            Direction::Asc
                        },
                    })
                    .collect(),
                select: operation.select.clone(),
                limit: operation.limit,
            }),
            Wire::Get(operation) => Operation::Get(GetOperation {
                table: operation.table.clone(),
                id_input: operation.id_input.clone(),
            }),
            Wire::Create(operation) => Operation::Create(CreateOperation {
                table: operation.table.clone(),
                values: operation.values.clone().into_iter().collect(),
            }),
        };
        let schema = |object: &Option<pb::JsonObject>| {
            object
                .as_ref()
                .map(json_from_object)
                .ok_or_else(|| invalid("action"))
        };
        Ok(CompiledAction {
            id: action.id.clone(),
            visibility: action.visibility.clone(),
            mcp_name: action.mcp_name.clone(),
            description: action.description.clone(),
            input_schema: schema(&action.input_schema)?,
            result_schema: schema(&action.result_schema)?,
            operation,
            mutating: action.mutating,
        })
    }
}

#[cfg(test)]
mod tests;
