//! Compiling one action descriptor: the four top-level keys, the operation
//! and its references to the manifest's tables, the data contract's columns
//! and the input schema's properties, every refusal a diagnostic with its line.
//!
//! This module must never execute anything or accept a value that does not
//! come from the caller's validated input; the schemas themselves are judged
//! by `schema`, and the YAML is only parsed by `yaml`.

use std::collections::BTreeMap;

use super::report::Report;
use super::schema::{InputProperty, SchemaChecker, check_property_name};
use super::yaml::{Node, Yaml, parse_yaml};
use super::{
    AggregateOperation, CompiledAction, CreateOperation, Direction, GetOperation, ListOperation,
    MAX_DESCRIPTION_CHARS, MAX_DESCRIPTOR_BYTES, MAX_GROUP_BY, MAX_IN, MAX_LIMIT, MAX_METRICS,
    MAX_ORDER_BY, MAX_SELECT, MAX_VALUES, MAX_WHERE, Metric, MetricFunction, Operation, Operator,
    OrderBy, WhereClause, WhereOperator, mcp_name,
};
use crate::manifest::{self, ActionDeclaration, Manifest};
use crate::sql::{self, DataContract, Table};

/// One descriptor's compilation: every refusal goes to its [`Report`], so
/// one pass reports every problem of the file.
pub(super) struct Compiler<'a> {
    pub(super) report: Report<'a>,
    pub(super) manifest: &'a Manifest,
    pub(super) data: Option<&'a DataContract>,
    /// The input schema is invalid, so input references cannot be judged.
    pub(super) inputs_unknown: bool,
}

impl<'a> Compiler<'a> {
    pub(super) fn push(&mut self, line: u32, code: &str, reason: impl Into<String>) {
        self.report.push(line, code, reason);
    }

    /// The entries of a mapping, refusing any key outside `allowed`.
    fn mapping<'n>(
        &mut self,
        node: &'n Node,
        path: &str,
        allowed: &[&str],
    ) -> Option<BTreeMap<&'n str, &'n Node>> {
        let Yaml::Mapping(entries) = &node.value else {
            self.push(
                node.line,
                "ACTION_SHAPE",
                format!(
                    "{path} must be a mapping with the keys {}",
                    allowed.join(", ")
                ),
            );
            return None;
        };
        let mut found = BTreeMap::new();
        for (key, value) in entries {
            if allowed.contains(&key.as_str()) {
                found.insert(key.as_str(), value);
            } else {
                self.push(
                    value.line,
                    "ACTION_UNKNOWN_KEY",
                    format!(
                        "{path} has the unknown key {key:?}; allowed keys are {}",
                        allowed.join(", ")
                    ),
                );
            }
        }
        Some(found)
    }

    fn required<'n>(
        &mut self,
        entries: &BTreeMap<&str, &'n Node>,
        key: &str,
        path: &str,
        line: u32,
    ) -> Option<&'n Node> {
        let found = entries.get(key).copied();
        if found.is_none() {
            self.push(
                line,
                "ACTION_MISSING_KEY",
                format!("{path} needs the key {key}"),
            );
        }
        found
    }

    pub(super) fn descriptor(
        &mut self,
        declaration: &ActionDeclaration,
        text: &str,
    ) -> Option<CompiledAction> {
        if text.len() > MAX_DESCRIPTOR_BYTES {
            self.push(0, "ACTION_FILE_TOO_LARGE", format!("an action descriptor may hold at most {MAX_DESCRIPTOR_BYTES} bytes; this one has {}", text.len()));
            return None;
        }
        let root = match parse_yaml(text) {
            Ok(root) => root,
            Err((line, message)) => {
                self.push(
                    line.unwrap_or(0),
                    "ACTION_YAML",
                    format!("the descriptor is not valid YAML: {message}"),
                );
                return None;
            }
        };
        let root_line = root.line.max(1);
        let entries = self.mapping(
            &root,
            "the descriptor",
            &["description", "inputSchema", "operation", "resultSchema"],
        )?;
        let description = self
            .required(&entries, "description", "the descriptor", root_line)
            .and_then(|node| self.description(node, "description"));
        let input = self
            .required(&entries, "inputSchema", "the descriptor", root_line)
            .and_then(|node| {
                let mut checker = SchemaChecker {
                    report: &mut self.report,
                    which: "inputSchema",
                    properties: 0,
                    over_limit: false,
                };
                checker.root(node)
            });
        let result = self
            .required(&entries, "resultSchema", "the descriptor", root_line)
            .and_then(|node| {
                let mut checker = SchemaChecker {
                    report: &mut self.report,
                    which: "resultSchema",
                    properties: 0,
                    over_limit: false,
                };
                checker.root(node)
            });
        let inputs = input.as_ref().map(|(_, properties)| properties);
        let operation = self
            .required(&entries, "operation", "the descriptor", root_line)
            .and_then(|node| self.operation(node, inputs));
        if self.report.failed {
            return None;
        }
        let operation = operation?;
        let mutating = operation.is_mutating();
        let visibility = if declaration.expose_to_model {
            vec!["model", "app"]
        } else {
            vec!["app"]
        };
        Some(CompiledAction {
            id: declaration.id.clone(),
            visibility: visibility.into_iter().map(str::to_owned).collect(),
            mcp_name: mcp_name(&self.manifest.id, &declaration.id),
            description: description?,
            input_schema: input?.0,
            result_schema: result?.0,
            operation,
            mutating,
        })
    }

    fn description(&mut self, node: &Node, path: &str) -> Option<String> {
        let Some(text) = node.as_str() else {
            self.push(
                node.line,
                "ACTION_DESCRIPTION",
                format!("{path} must be text of 1 to {MAX_DESCRIPTION_CHARS} characters"),
            );
            return None;
        };
        let length = text.chars().count();
        if text.trim().is_empty() || length > MAX_DESCRIPTION_CHARS {
            self.push(
                node.line,
                "ACTION_DESCRIPTION",
                format!("{path} must be 1 to {MAX_DESCRIPTION_CHARS} characters; it has {length}"),
            );
            return None;
        }
        if text
            .chars()
            .any(|c| (c.is_control() && c != '\n') || crate::source::is_invisible(c))
        {
            self.push(
                node.line,
                "ACTION_DESCRIPTION",
                format!("{path} must be plain text without control or invisible characters"),
            );
            return None;
        }
        Some(text.trim_end().to_owned())
    }

    // -- operation ----------------------------------------------------------

    fn operation(
        &mut self,
        node: &Node,
        inputs: Option<&BTreeMap<String, InputProperty>>,
    ) -> Option<Operation> {
        const KINDS: [&str; 6] = ["aggregate", "list", "get", "create", "update", "delete"];
        let entries = self.mapping(node, "operation", &KINDS)?;
        let mut kinds = entries.iter();
        let (kind, body) = match (kinds.next(), kinds.next()) {
            (Some((kind, body)), None) => (*kind, *body),
            (None, _) => {
                // An unknown kind was already reported as such.
                if matches!(&node.value, Yaml::Mapping(all) if all.is_empty()) {
                    self.push(
                        node.line,
                        "ACTION_OPERATION",
                        "operation needs exactly one of aggregate, list, get or create",
                    );
                }
                return None;
            }
            (Some(_), Some(_)) => {
                self.push(node.line, "ACTION_OPERATION", format!("operation has {}; an action compiles to exactly one of aggregate, list, get or create", entries.keys().copied().collect::<Vec<_>>().join(" and ")));
                return None;
            }
        };
        if kind == "update" || kind == "delete" {
            self.push(body.line, "ACTION_MUTATION_UNSUPPORTED", format!("a {kind} action is refused (APP_ACTION_INVALID): the runtime cannot supply the caller's expectedVersion for an action-bound mutation, so it would race the row's optimistic-concurrency check blind; use Sasha.data.{kind} from the app's view or the app__<app>__<table>__{kind} tool"));
            return None;
        }
        // Without a valid input schema the references cannot be judged; the
        // schema's own diagnostics already say why, so stay quiet about them.
        let empty = BTreeMap::new();
        self.inputs_unknown = inputs.is_none();
        let inputs = inputs.unwrap_or(&empty);
        let path = format!("operation.{kind}");
        match kind {
            "aggregate" => self
                .aggregate(body, &path, inputs)
                .map(Operation::Aggregate),
            "list" => self.list(body, &path, inputs).map(Operation::List),
            "get" => self.get(body, &path, inputs).map(Operation::Get),
            _ => self.create(body, &path, inputs).map(Operation::Create),
        }
    }

    /// The table `node` names, with its structure when it is a declared table
    /// of a valid data contract. Without the structure the rest of the
    /// operation is still checked for what does not depend on it; the action
    /// fails either way.
    fn table(&mut self, node: &Node, path: &str) -> Option<(String, Option<&'a Table>)> {
        let Some(name) = node.as_str() else {
            self.push(
                node.line,
                "ACTION_SHAPE",
                format!("{path}.table must be the name of a declared table"),
            );
            return None;
        };
        let Some(data) = self.data else {
            self.push(node.line, "ACTION_NO_DATA", format!("this action uses table {name:?} but the app has no valid data contract: declare capabilities.data and the table in APP.md, and fix schema.sql and the migrations"));
            return Some((name.to_owned(), None));
        };
        match data.declared_table(name) {
            Some((_, table)) => Some((name.to_owned(), Some(table))),
            None => {
                self.push(node.line, "ACTION_TABLE_UNDECLARED", format!("table {name:?} is not declared under tables in APP.md; an action may use only the app's declared tables"));
                Some((name.to_owned(), None))
            }
        }
    }

    /// A column of `table` named by `node` (unjudged without the table).
    fn column(&mut self, node: &Node, table: Option<&Table>, path: &str) -> Option<String> {
        let Some(name) = node.as_str() else {
            self.push(
                node.line,
                "ACTION_SHAPE",
                format!("{path} must be a column name"),
            );
            return None;
        };
        let Some(table) = table else {
            return Some(name.to_owned());
        };
        if table.column(name).is_none() || !sql::is_identifier(name) {
            self.push(
                node.line,
                "ACTION_FIELD_UNDECLARED",
                format!(
                    "{path}: {name:?} is not a column of table {}; use one of {}",
                    table.name,
                    column_list(table)
                ),
            );
            return None;
        }
        Some(name.to_owned())
    }

    /// The input property `node` (`input.<name>`) names.
    fn input_reference<'i>(
        &mut self,
        node: &Node,
        path: &str,
        inputs: &'i BTreeMap<String, InputProperty>,
    ) -> Option<(String, &'i InputProperty)> {
        if self.inputs_unknown {
            return None;
        }
        let name = node.as_str().and_then(|text| text.strip_prefix("input."));
        let Some(name) = name.filter(|name| !name.is_empty() && !name.contains('.')) else {
            self.push(node.line, "ACTION_VALUE_FROM", format!("{path} must be input.<name>, naming one top-level property of inputSchema; values never appear literally"));
            return None;
        };
        match inputs.get(name) {
            Some(property) => Some((name.to_owned(), property)),
            None => {
                self.push(
                    node.line,
                    "ACTION_VALUE_FROM",
                    format!(
                        "{path}: input.{name} is not a property of inputSchema; declare it there"
                    ),
                );
                None
            }
        }
    }

    /// A list of distinct columns of `table` under `key` (`groupBy`, `select`),
    /// at most `max`; each unknown or repeated column is reported.
    fn distinct_columns(
        &mut self,
        node: Option<&Node>,
        path: &str,
        key: &str,
        max: usize,
        table: Option<&Table>,
    ) -> Vec<String> {
        let mut columns = Vec::new();
        let Some(node) = node else {
            return columns;
        };
        let list_path = format!("{path}.{key}");
        for (index, item) in self
            .sequence(node, &list_path, max, "columns")
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            if let Some(column) = self.column(item, table, &format!("{list_path}[{index}]")) {
                if columns.contains(&column) {
                    self.push(
                        item.line,
                        "ACTION_DUPLICATE",
                        format!("{list_path} lists {column} twice"),
                    );
                }
                columns.push(column);
            }
        }
        columns
    }

    fn sequence<'n>(
        &mut self,
        node: &'n Node,
        path: &str,
        max: usize,
        what: &str,
    ) -> Option<&'n [Node]> {
        let Some(items) = node.as_sequence() else {
            self.push(
                node.line,
                "ACTION_SHAPE",
                format!("{path} must be a list of {what}"),
            );
            return None;
        };
        if items.len() > max {
            self.push(
                node.line,
                "ACTION_LIMIT",
                format!(
                    "{path} may hold at most {max} {what}; it has {}",
                    items.len()
                ),
            );
            return None;
        }
        Some(items)
    }

    fn filters(
        &mut self,
        node: Option<&Node>,
        path: &str,
        table: Option<&Table>,
        inputs: &BTreeMap<String, InputProperty>,
    ) -> Vec<WhereClause> {
        let Some(node) = node else { return Vec::new() };
        let path = format!("{path}.where");
        let Some(items) = self.sequence(node, &path, MAX_WHERE, "clauses") else {
            return Vec::new();
        };
        let mut clauses = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let path = format!("{path}[{index}]");
            let Some(entries) = self.mapping(item, &path, &["field", "operator", "valueFrom"])
            else {
                continue;
            };
            let field = self
                .required(&entries, "field", &path, item.line)
                .and_then(|field| self.column(field, table, &format!("{path}.field")));
            let operator = self.required(&entries, "operator", &path, item.line).and_then(|node| {
                let text = node.as_str().unwrap_or_default();
                let parsed = WhereOperator::parse(text);
                if parsed.is_none() {
                    let reason = if matches!(
                        Operator::parse(text),
                        Some(Operator::Contains | Operator::StartsWith)
                    ) {
                        format!("{path}.operator {text} is not available in actions (they take no substring matches); use Sasha.data.list from the app's view instead")
                    } else {
                        format!("{path}.operator must be one of eq, neq, lt, lte, gt, gte, in, week-of")
                    };
                    self.push(node.line, "ACTION_OPERATOR", reason);
                }
                parsed
            });
            let input = self
                .required(&entries, "valueFrom", &path, item.line)
                .and_then(|node| {
                    let (name, property) =
                        self.input_reference(node, &format!("{path}.valueFrom"), inputs)?;
                    Some((name, property, node.line))
                });
            let (Some(field), Some(operator), Some((name, property, line))) =
                (field, operator, input)
            else {
                continue;
            };
            let fits = match operator {
                WhereOperator::In => {
                    property.schema_type == "array"
                        && property.scalar_items
                        && property.max_items.is_some_and(|max| max <= MAX_IN as u64)
                }
                WhereOperator::WeekOf => property.date,
                _ => property.is_scalar(),
            };
            if !fits {
                let needs = match operator {
                    WhereOperator::In => {
                        format!("an array of scalars with maxItems at most {MAX_IN}")
                    }
                    WhereOperator::WeekOf => "a string with format: date".to_owned(),
                    _ => "a string, number, integer or boolean".to_owned(),
                };
                self.push(
                    line,
                    "ACTION_INPUT_TYPE",
                    format!("{path}: input.{name} must be {needs} for this operator"),
                );
                continue;
            }
            clauses.push(WhereClause {
                field,
                operator,
                input: name,
            });
        }
        clauses
    }

    fn aggregate(
        &mut self,
        node: &Node,
        path: &str,
        inputs: &BTreeMap<String, InputProperty>,
    ) -> Option<AggregateOperation> {
        let entries = self.mapping(node, path, &["table", "where", "groupBy", "metrics"])?;
        let (table_name, table) = self
            .required(&entries, "table", path, node.line)
            .and_then(|t| self.table(t, path))?;
        let filters = self.filters(entries.get("where").copied(), path, table, inputs);
        let group_by = self.distinct_columns(
            entries.get("groupBy").copied(),
            path,
            "groupBy",
            MAX_GROUP_BY,
            table,
        );
        let mut metrics = Vec::new();
        if let Some(list) = self.required(&entries, "metrics", path, node.line) {
            let metrics_path = format!("{path}.metrics");
            let items = self
                .sequence(list, &metrics_path, MAX_METRICS, "metrics")
                .unwrap_or_default();
            if list.as_sequence().is_some_and(<[Node]>::is_empty) {
                self.push(
                    list.line,
                    "ACTION_LIMIT",
                    format!("{metrics_path} needs 1 to {MAX_METRICS} metrics"),
                );
            }
            for (index, item) in items.iter().enumerate() {
                let item_path = format!("{metrics_path}[{index}]");
                if let Some(metric) = self.metric(item, &item_path, table) {
                    if metrics.iter().any(|m: &Metric| m.alias == metric.alias)
                        || group_by.contains(&metric.alias)
                    {
                        self.push(item.line, "ACTION_DUPLICATE", format!("{item_path}: the name {} is already used by another metric or a groupBy column", metric.alias));
                    }
                    metrics.push(metric);
                }
            }
        }
        Some(AggregateOperation {
            table: table_name,
            filters,
            group_by,
            metrics,
        })
    }

    fn metric(&mut self, node: &Node, path: &str, table: Option<&Table>) -> Option<Metric> {
        let mut allowed = vec!["as"];
        allowed.extend(MetricFunction::names());
        let entries = self.mapping(node, path, &allowed)?;
        let alias = self
            .required(&entries, "as", path, node.line)
            .and_then(|alias| {
                let text = alias.as_str().unwrap_or_default();
                if !sql::is_identifier(text) {
                    self.push(
                        alias.line,
                        "ACTION_METRIC",
                        format!("{path}.as must match ^[A-Za-z_][A-Za-z0-9_]{{0,62}}$"),
                    );
                    return None;
                }
                if let Err((code, reason)) = check_property_name(text) {
                    self.push(alias.line, code, format!("{path}.as: {reason}"));
                    return None;
                }
                Some(text.to_owned())
            });
        let functions: Vec<(MetricFunction, &Node)> = MetricFunction::ALL
            .iter()
            .filter_map(|(name, function)| entries.get(name).map(|field| (*function, *field)))
            .collect();
        let [(function, field)] = functions.as_slice() else {
            // With no known function but an unknown key, that key was the
            // attempt and has been reported already.
            let unknown_key =
                matches!(&node.value, Yaml::Mapping(all) if all.len() > entries.len());
            if !(functions.is_empty() && unknown_key) {
                self.push(
                    node.line,
                    "ACTION_METRIC",
                    format!("{path} needs exactly one of sum, avg, min, max, count, countDistinct"),
                );
            }
            return None;
        };
        let field = self.column(field, table, &format!("{path}.{}", metric_name(*function)));
        Some(Metric {
            alias: alias?,
            function: *function,
            field: field?,
        })
    }

    fn list(
        &mut self,
        node: &Node,
        path: &str,
        inputs: &BTreeMap<String, InputProperty>,
    ) -> Option<ListOperation> {
        let entries = self.mapping(
            node,
            path,
            &["table", "where", "orderBy", "select", "limit"],
        )?;
        let (table_name, table) = self
            .required(&entries, "table", path, node.line)
            .and_then(|t| self.table(t, path))?;
        let filters = self.filters(entries.get("where").copied(), path, table, inputs);
        let mut order_by = Vec::new();
        if let Some(order) = entries.get("orderBy") {
            let order_path = format!("{path}.orderBy");
            for (index, item) in self
                .sequence(order, &order_path, MAX_ORDER_BY, "orderings")
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                let item_path = format!("{order_path}[{index}]");
                let Some(fields) = self.mapping(item, &item_path, &["field", "direction"]) else {
                    continue;
                };
                let field = self
                    .required(&fields, "field", &item_path, item.line)
                    .and_then(|field| self.column(field, table, &format!("{item_path}.field")));
                let direction = match fields
                    .get("direction")
                    .map(|node| (node.as_str(), node.line))
                {
                    None | Some((Some("asc"), _)) => Some(Direction::Asc),
                    Some((Some("desc"), _)) => Some(Direction::Desc),
                    Some((_, line)) => {
                        self.push(
                            line,
                            "ACTION_SHAPE",
                            format!("{item_path}.direction must be asc or desc"),
                        );
                        None
                    }
                };
                if let (Some(field), Some(direction)) = (field, direction) {
                    order_by.push(OrderBy { field, direction });
                }
            }
        }
        let select = self.distinct_columns(
            entries.get("select").copied(),
            path,
            "select",
            MAX_SELECT,
            table,
        );
        let limit = entries.get("limit").and_then(|node| {
            let limit = node
                .as_count()
                .filter(|limit| (1..=u64::from(MAX_LIMIT)).contains(limit));
            if limit.is_none() {
                self.push(
                    node.line,
                    "ACTION_LIMIT",
                    format!("{path}.limit must be a whole number from 1 to {MAX_LIMIT}"),
                );
            }
            limit.and_then(|limit| u32::try_from(limit).ok())
        });
        Some(ListOperation {
            table: table_name,
            filters,
            order_by,
            select,
            limit,
        })
    }

    fn get(
        &mut self,
        node: &Node,
        path: &str,
        inputs: &BTreeMap<String, InputProperty>,
    ) -> Option<GetOperation> {
        let entries = self.mapping(node, path, &["table", "idFrom"])?;
        let table = self
            .required(&entries, "table", path, node.line)
            .and_then(|t| self.table(t, path));
        let id_path = format!("{path}.idFrom");
        let id = self.required(&entries, "idFrom", path, node.line).and_then(|id| {
            let (name, property) = self.input_reference(id, &id_path, inputs)?;
            if !matches!(property.schema_type.as_str(), "string" | "integer") {
                self.push(id.line, "ACTION_INPUT_TYPE", format!("{id_path}: input.{name} must be a string or integer, like the row ids"));
                return None;
            }
            if !property.required {
                self.push(id.line, "ACTION_INPUT_TYPE", format!("{id_path}: a get needs the id on every call; list {name} under inputSchema.required"));
                return None;
            }
            Some(name)
        });
        let (table, _) = table?;
        Some(GetOperation {
            table,
            id_input: id?,
        })
    }

    fn create(
        &mut self,
        node: &Node,
        path: &str,
        inputs: &BTreeMap<String, InputProperty>,
    ) -> Option<CreateOperation> {
        let entries = self.mapping(node, path, &["table", "values"])?;
        if self.manifest.capabilities.data != manifest::DataCapability::ReadWrite {
            self.push(
                node.line,
                "ACTION_READ_ONLY",
                "a create action writes rows and needs capabilities.data: read-write in APP.md",
            );
        }
        let (table_name, table) = self
            .required(&entries, "table", path, node.line)
            .and_then(|t| self.table(t, path))?;
        let owner = self
            .data
            .and_then(|data| data.tables.get(&table_name))
            .and_then(|declaration| declaration.owner_field.clone());
        let values_node = self.required(&entries, "values", path, node.line)?;
        let values_path = format!("{path}.values");
        let Yaml::Mapping(pairs) = &values_node.value else {
            self.push(
                values_node.line,
                "ACTION_SHAPE",
                format!("{values_path} must map columns to {{valueFrom: input.<name>}}"),
            );
            return None;
        };
        if pairs.is_empty() || pairs.len() > MAX_VALUES {
            self.push(
                values_node.line,
                "ACTION_LIMIT",
                format!("{values_path} must set 1 to {MAX_VALUES} columns"),
            );
        }
        let mut values = BTreeMap::new();
        for (column, value) in pairs.iter().take(MAX_VALUES) {
            let column_path = format!("{values_path}.{column}");
            let definition = match table {
                None => None,
                Some(table) => {
                    let found = table.column(column).filter(|_| sql::is_identifier(column));
                    if found.is_none() {
                        self.push(value.line, "ACTION_FIELD_UNDECLARED", format!("{values_path}: {column:?} is not a column of table {table_name}; use one of {}", column_list(table)));
                        continue;
                    }
                    found
                }
            };
            if owner.as_deref() == Some(column.as_str()) {
                self.push(value.line, "ACTION_VALUE_RESERVED", format!("{values_path}: {column} is the owner column of {table_name}; the platform stamps it with the caller, so remove it"));
                continue;
            }
            if column == sql::ID_COLUMN
                && definition.is_some_and(|definition| definition.declared_type == "INTEGER")
            {
                self.push(
                    value.line,
                    "ACTION_VALUE_RESERVED",
                    format!(
                        "{values_path}: the database assigns {table_name}'s integer id; remove it"
                    ),
                );
                continue;
            }
            let Some(fields) = self.mapping(value, &column_path, &["valueFrom"]) else {
                continue;
            };
            let Some((name, property)) = self
                .required(&fields, "valueFrom", &column_path, value.line)
                .and_then(|from| {
                    self.input_reference(from, &format!("{column_path}.valueFrom"), inputs)
                })
            else {
                continue;
            };
            if !property.is_scalar() {
                self.push(value.line, "ACTION_INPUT_TYPE", format!("{column_path}: input.{name} must be a string, number, integer or boolean to fill a column"));
                continue;
            }
            let needed = definition.is_some_and(|definition| {
                definition.not_null && definition.default_value.is_none()
            });
            if needed && !property.required {
                self.push(value.line, "ACTION_CREATE_INCOMPLETE", format!("{column_path}: column {column} is NOT NULL without a default, so input.{name} must be listed under inputSchema.required"));
            }
            values.insert(column.clone(), name);
        }
        for column in table.iter().flat_map(|table| &table.columns) {
            let needed = column.not_null
                && column.default_value.is_none()
                && !column.primary_key
                && !column.generated
                && owner.as_deref() != Some(column.name.as_str());
            if needed && !pairs.iter().any(|(name, _)| *name == column.name) {
                self.push(values_node.line, "ACTION_CREATE_INCOMPLETE", format!("{values_path} must set column {} (NOT NULL without a default), or every create would fail", column.name));
            }
        }
        Some(CreateOperation {
            table: table_name,
            values,
        })
    }
}

fn metric_name(function: MetricFunction) -> &'static str {
    function.name()
}

fn column_list(table: &Table) -> String {
    table
        .columns
        .iter()
        .map(|column| column.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
