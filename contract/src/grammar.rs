//! The data grammar's vocabulary and every bound on it: the operations, the
//! `where` operators, the aggregate functions and the limits a request may
//! reach. The validator checks action descriptors against these, data-worker
//! refuses requests by them and the gateway's table tools publish them in
//! their JSON Schemas, so a bound changed here changes all three.
//!
//! This module must never parse a request: each side parses with its own
//! error reporting and reads the words and numbers from here.

use serde::{Deserialize, Serialize};

/// A data operation every declared table offers. `history` reads one row's
/// entries in the audit ledger; `export` writes the rows a list would read as
/// CSV, `import` creates one row per CSV record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TableOperation {
    List,
    Get,
    Aggregate,
    History,
    Export,
    Create,
    Update,
    Delete,
    Import,
}

impl TableOperation {
    /// Every operation, in listing order.
    pub const ALL: [TableOperation; 9] = [
        TableOperation::List,
        TableOperation::Get,
        TableOperation::Aggregate,
        TableOperation::History,
        TableOperation::Export,
        TableOperation::Create,
        TableOperation::Update,
        TableOperation::Delete,
        TableOperation::Import,
    ];

    /// The operation's wire name (the last part of its tool's name).
    pub const fn name(self) -> &'static str {
        match self {
            TableOperation::List => "list",
            TableOperation::Get => "get",
            TableOperation::Aggregate => "aggregate",
            TableOperation::History => "history",
            TableOperation::Export => "export",
            TableOperation::Create => "create",
            TableOperation::Update => "update",
            TableOperation::Delete => "delete",
            TableOperation::Import => "import",
        }
    }

    /// The operation named `name`, or `None` for a word the grammar lacks.
    pub fn parse(name: &str) -> Option<TableOperation> {
        TableOperation::ALL
            .into_iter()
            .find(|operation| operation.name() == name)
    }

    /// Whether the operation changes rows: a table's write policy governs
    /// it and, model-invoked, it needs the person's confirmation.
    pub const fn is_mutating(self) -> bool {
        matches!(
            self,
            TableOperation::Create
                | TableOperation::Update
                | TableOperation::Delete
                | TableOperation::Import
        )
    }
}

/// The data operations' wire names, in listing order ([`TableOperation::ALL`]).
pub const OPERATIONS: [&str; 9] = [
    TableOperation::List.name(),
    TableOperation::Get.name(),
    TableOperation::Aggregate.name(),
    TableOperation::History.name(),
    TableOperation::Export.name(),
    TableOperation::Create.name(),
    TableOperation::Update.name(),
    TableOperation::Delete.name(),
    TableOperation::Import.name(),
];

/// The wire names of the operations that change rows
/// ([`TableOperation::is_mutating`]).
pub const MUTATING_OPERATIONS: [&str; 4] = [
    TableOperation::Create.name(),
    TableOperation::Update.name(),
    TableOperation::Delete.name(),
    TableOperation::Import.name(),
];

/// Whether the operation named `operation` changes rows.
pub fn is_mutating(operation: &str) -> bool {
    TableOperation::parse(operation).is_some_and(TableOperation::is_mutating)
}

/// Most rows one CSV import creates and one export page holds: an import
/// is one all-or-nothing transaction, so its size is bounded here.
pub const MAX_CSV_ROWS: usize = 10_000;
/// Most bytes of one import file (well inside the gateway's and the data
/// service's message sizes).
pub const MAX_CSV_BYTES: usize = 2 * 1024 * 1024;

/// Most audit entries one `history` page returns (and its default).
pub const MAX_HISTORY: u32 = 50;

/// Most ledger entries one undo or restore may revert: more is refused
/// before anything is written, naming how to narrow it.
pub const MAX_UNDO_ENTRIES: usize = 5_000;
/// Most rows one undo or restore may change (or report as conflicts).
pub const MAX_UNDO_ROWS: usize = 1_000;
/// Most ledger entries an `activity` page (and an undo preview page) holds.
pub const MAX_ACTIVITY: u32 = 200;

/// Most `where` clauses.
pub const MAX_WHERE: usize = 20;
/// Most values of one `in`.
pub const MAX_IN: usize = 50;
/// Most `orderBy` entries.
pub const MAX_ORDER_BY: usize = 3;
/// Most `select` entries.
pub const MAX_SELECT: usize = 50;
/// Largest page.
pub const MAX_LIMIT: u32 = 200;
/// The page size when `limit` is absent.
pub const DEFAULT_LIMIT: u32 = 50;
/// Most `groupBy` fields.
pub const MAX_GROUP_BY: usize = 3;
/// Most metrics of one aggregate.
pub const MAX_METRICS: usize = 10;
/// Most properties of `values`/`changes`.
pub const MAX_VALUES: usize = 50;
/// Most characters of a `contains`/`starts-with` pattern (before escaping).
/// Escaped and wrapped in `%`, a pattern is at most 4002 bytes, so the engine's
/// `SQLITE_LIMIT_LIKE_PATTERN_LENGTH` must allow that much; likewise a list
/// statement binds at most about 1,020 parameters (20 clauses of 50 `in` values,
/// the cursor keys, the owner and the limit) for `SQLITE_LIMIT_VARIABLE_NUMBER`.
pub const MAX_PATTERN_CHARS: usize = 1000;
/// Most groups an aggregate may return.
pub const MAX_GROUPS: usize = 1000;
/// Most characters of an idempotency key.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 200;
/// Most characters of a TEXT id.
pub const MAX_TEXT_ID_CHARS: usize = 1000;
/// Most characters of a metric alias.
pub const MAX_ALIAS_CHARS: usize = 64;
/// Most bytes of a cursor string; a longer one cannot be ours.
pub const MAX_CURSOR_BYTES: usize = 16 * 1024;
/// 2^53 − 1: the largest integer every JSON peer represents exactly.
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// A `where` operator of the data grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Eq,
    Neq,
    Lt,
    Lte,
    Gt,
    Gte,
    In,
    Contains,
    StartsWith,
}

impl Operator {
    /// Every operator with its wire name, in the order tools list them.
    pub const ALL: [(&'static str, Operator); 9] = [
        ("eq", Operator::Eq),
        ("neq", Operator::Neq),
        ("lt", Operator::Lt),
        ("lte", Operator::Lte),
        ("gt", Operator::Gt),
        ("gte", Operator::Gte),
        ("in", Operator::In),
        ("contains", Operator::Contains),
        ("starts-with", Operator::StartsWith),
    ];

    pub fn parse(name: &str) -> Option<Operator> {
        Operator::ALL
            .iter()
            .find(|(text, _)| *text == name)
            .map(|(_, operator)| *operator)
    }

    pub fn name(self) -> &'static str {
        Operator::ALL
            .iter()
            .find(|(_, operator)| *operator == self)
            .map_or("", |(text, _)| text)
    }

    /// Every wire name, in order.
    pub fn names() -> impl Iterator<Item = &'static str> {
        Operator::ALL.iter().map(|(name, _)| *name)
    }
}

/// An aggregate function: `{as, <function>: field}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MetricFunction {
    Sum,
    Avg,
    Min,
    Max,
    Count,
    CountDistinct,
}

impl MetricFunction {
    /// Every function with its wire name, in order.
    pub const ALL: [(&'static str, MetricFunction); 6] = [
        ("sum", MetricFunction::Sum),
        ("avg", MetricFunction::Avg),
        ("min", MetricFunction::Min),
        ("max", MetricFunction::Max),
        ("count", MetricFunction::Count),
        ("countDistinct", MetricFunction::CountDistinct),
    ];

    pub fn parse(name: &str) -> Option<MetricFunction> {
        MetricFunction::ALL
            .iter()
            .find(|(text, _)| *text == name)
            .map(|(_, function)| *function)
    }

    pub fn name(self) -> &'static str {
        MetricFunction::ALL
            .iter()
            .find(|(_, function)| *function == self)
            .map_or("", |(text, _)| text)
    }

    /// Every wire name, in order.
    pub fn names() -> impl Iterator<Item = &'static str> {
        MetricFunction::ALL.iter().map(|(name, _)| *name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (name, operator) in Operator::ALL {
            assert_eq!(Operator::parse(name), Some(operator));
            assert_eq!(operator.name(), name);
        }
        for (name, function) in MetricFunction::ALL {
            assert_eq!(MetricFunction::parse(name), Some(function));
            assert_eq!(function.name(), name);
            assert_eq!(serde_json::to_value(function).unwrap(), name);
        }
        assert_eq!(Operator::parse("week-of"), None);
        assert_eq!(MetricFunction::parse("median"), None);
        for operation in TableOperation::ALL {
            assert_eq!(TableOperation::parse(operation.name()), Some(operation));
            assert_eq!(
                is_mutating(operation.name()),
                MUTATING_OPERATIONS.contains(&operation.name())
            );
        }
        assert_eq!(
            OPERATIONS.to_vec(),
            TableOperation::ALL.map(TableOperation::name).to_vec()
        );
        assert_eq!(TableOperation::parse("drop"), None);
        assert!(!is_mutating("drop"));
    }
}
