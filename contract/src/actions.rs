//! A compiled action: what an app's declared action runs, as the validator
//! compiled it from its descriptor. The gateway publishes it as a tool and
//! executes its one data operation; the validator is the only producer.
//!
//! This module must never compile or check a descriptor (that is
//! `sasha-package`'s): every value here is already valid.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::grammar::{MetricFunction, Operator};

/// One compiled action: what the registry publishes and the runtime executes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompiledAction {
    pub id: String,
    /// `["app"]`, or `["model", "app"]` with `exposeToModel: true`.
    pub visibility: Vec<String>,
    /// `app__<app id with - → _>__<action id with - → _>`.
    pub mcp_name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    pub result_schema: serde_json::Value,
    pub operation: Operation,
    /// Whether the operation writes (a create); a model-invoked mutating action
    /// needs host confirmation.
    pub mutating: bool,
}

impl CompiledAction {
    /// Whether the model may call it (published as an MCP tool).
    pub fn model_visible(&self) -> bool {
        self.visibility.iter().any(|who| who == "model")
    }
}

/// The one governed data-service call an action compiles to. Serialised
/// externally tagged, like the descriptor: `{"aggregate": {...}}`. Input
/// references hold the bare input property name (`weekStart`, not
/// `input.weekStart`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Operation {
    Aggregate(AggregateOperation),
    List(ListOperation),
    Get(GetOperation),
    Create(CreateOperation),
}

impl Operation {
    pub fn table(&self) -> &str {
        match self {
            Operation::Aggregate(operation) => &operation.table,
            Operation::List(operation) => &operation.table,
            Operation::Get(operation) => &operation.table,
            Operation::Create(operation) => &operation.table,
        }
    }

    /// `aggregate`, `list`, `get` or `create`.
    pub fn kind(&self) -> &'static str {
        match self {
            Operation::Aggregate(_) => "aggregate",
            Operation::List(_) => "list",
            Operation::Get(_) => "get",
            Operation::Create(_) => "create",
        }
    }

    pub fn is_mutating(&self) -> bool {
        matches!(self, Operation::Create(_))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AggregateOperation {
    pub table: String,
    #[serde(rename = "where", default)]
    pub filters: Vec<WhereClause>,
    #[serde(default)]
    pub group_by: Vec<String>,
    pub metrics: Vec<Metric>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListOperation {
    pub table: String,
    #[serde(rename = "where", default)]
    pub filters: Vec<WhereClause>,
    #[serde(default)]
    pub order_by: Vec<OrderBy>,
    /// Empty means every column.
    #[serde(default)]
    pub select: Vec<String>,
    /// `None` means the data grammar's default (50).
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetOperation {
    pub table: String,
    /// The (required) input property holding the row id.
    pub id_input: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateOperation {
    pub table: String,
    /// Column → the input property its value comes from. An optional property
    /// absent from a call leaves its column to the table's default.
    pub values: BTreeMap<String, String>,
}

/// `{field, operator, input}`: `field <operator> input[input]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WhereClause {
    pub field: String,
    pub operator: WhereOperator,
    /// The input property the value comes from.
    pub input: String,
}

/// The action-level operators. `week-of` exists only here: the runtime rewrites
/// it into `gte date` and `lt date + 7 days` before calling the data service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WhereOperator {
    Eq,
    Neq,
    Lt,
    Lte,
    Gt,
    Gte,
    In,
    WeekOf,
}

impl WhereOperator {
    /// Every action operator, in order.
    pub const ALL: [WhereOperator; 8] = [
        WhereOperator::Eq,
        WhereOperator::Neq,
        WhereOperator::Lt,
        WhereOperator::Lte,
        WhereOperator::Gt,
        WhereOperator::Gte,
        WhereOperator::In,
        WhereOperator::WeekOf,
    ];

    /// The data grammar's operator this one runs as; `None` for `week-of`,
    /// which the runtime rewrites into `gte` and `lt` before the call.
    pub fn data_operator(self) -> Option<Operator> {
        Some(match self {
            WhereOperator::Eq => Operator::Eq,
            WhereOperator::Neq => Operator::Neq,
            WhereOperator::Lt => Operator::Lt,
            WhereOperator::Lte => Operator::Lte,
            WhereOperator::Gt => Operator::Gt,
            WhereOperator::Gte => Operator::Gte,
            WhereOperator::In => Operator::In,
            WhereOperator::WeekOf => return None,
        })
    }

    /// An action names a data operator (except the pattern ones, which an
    /// action cannot bind to an input safely) or `week-of`.
    pub fn parse(text: &str) -> Option<WhereOperator> {
        if text == "week-of" {
            return Some(WhereOperator::WeekOf);
        }
        let operator = Operator::parse(text)?;
        WhereOperator::ALL
            .into_iter()
            .find(|candidate| candidate.data_operator() == Some(operator))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderBy {
    pub field: String,
    pub direction: Direction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Asc,
    Desc,
}

/// `{as, <function>: field}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metric {
    #[serde(rename = "as")]
    pub alias: String,
    pub function: MetricFunction,
    pub field: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_operators_are_the_data_operators_without_patterns_plus_week_of() {
        for operator in WhereOperator::ALL {
            match operator.data_operator() {
                Some(data) => assert_eq!(WhereOperator::parse(data.name()), Some(operator)),
                None => assert_eq!(WhereOperator::parse("week-of"), Some(operator)),
            }
        }
        assert_eq!(WhereOperator::parse("contains"), None);
        assert_eq!(WhereOperator::parse("starts-with"), None);
        assert_eq!(WhereOperator::parse("like"), None);
    }
}
