//! App Actions: each `actions/<id>.action.yaml` descriptor declared in the
//! manifest is compiled, against the manifest and the app's [`DataContract`], into
//! a [`CompiledAction`]: a closed input schema, exactly one governed data-service
//! operation on one of the app's own declared tables, and a closed result schema.
//!
//! This module only validates and compiles. It must not execute anything, and
//! it must not let a descriptor reach past the grammar below: there is no SQL, no
//! literal filter values (every value comes from the caller's validated input),
//! no table outside the manifest's `tables`, no caller identity, no code and no
//! action-to-action call. Unknown keys are refused everywhere, so a descriptor
//! cannot carry anything this module has not judged.
//!
//! # Descriptor format
//!
//! An action is declared in `APP.md` (`actions: [{id, file, exposeToModel?}]`); its
//! `file` must be exactly `actions/<id>.action.yaml`. Ids are lowercase kebab-case,
//! at most 60 characters, without underscores (so `submit-week` maps injectively
//! to the MCP name `app__<app>__submit_week`); at most 20 actions per app.
//!
//! ```yaml
//! description: Total hours per project for one week   # 1–300 characters of plain text
//! inputSchema:                                        # what the caller passes
//!   type: object
//!   properties:
//!     weekStart: {type: string, format: date, description: Monday of the week}
//!   required: [weekStart]
//!   additionalProperties: false
//! operation:                                          # exactly one of the four kinds
//!   aggregate:
//!     table: entries
//!     where: [{field: date, operator: week-of, valueFrom: input.weekStart}]
//!     groupBy: [project]
//!     metrics: [{as: hours, sum: hours}]
//! resultSchema:                                       # what the action returns
//!   type: object
//!   properties:
//!     groups:
//!       type: array
//!       maxItems: 1000
//!       items:
//!         type: object
//!         properties: {project: {type: integer}, hours: {type: number}}
//!         additionalProperties: false
//!   required: [groups]
//!   additionalProperties: false
//! ```
//!
//! The four top-level keys are required and no other key is allowed. A
//! descriptor is at most 64 KiB of YAML: one document, without anchors, aliases,
//! merge keys (`<<`) or tags; duplicate keys are refused, and only `true`/`false`
//! are booleans (`yes`, `no`, `on` and `off` stay strings).
//!
//! ## Operations
//!
//! Every `table` must be declared under `tables` in `APP.md`, and every `field`,
//! `groupBy`, `select`, `orderBy` and `values` entry must be a column of that
//! table. Values never appear literally: `valueFrom: input.<name>` names a
//! top-level property of `inputSchema`.
//!
//! - `aggregate: {table, where?, groupBy?, metrics}`: `groupBy` up to 3 columns;
//!   `metrics` 1–10 entries `{as: <name>, <function>: <column>}` with exactly one
//!   function of `sum`, `avg`, `min`, `max`, `count`, `countDistinct`; `as` follows
//!   the identifier grammar, is not a reserved property name (below) and differs
//!   from the other metrics and the `groupBy` columns. Returns `{groups: [...]}`.
//! - `list: {table, where?, orderBy?, select?, limit?}`: `orderBy` up to 3
//!   `{field, direction?: asc|desc}` (default `asc`); `select` up to 50 columns;
//!   `limit` 1–200 (default 50).
//! - `get: {table, idFrom: input.<name>}`: the property must be required and a
//!   string or integer.
//! - `create: {table, values: {<column>: {valueFrom: input.<name>}}}`: 1–50 columns;
//!   needs `capabilities.data: read-write`. The owner column of an `access: owner`
//!   table is stamped by the platform and an `INTEGER` id is assigned by the
//!   database, so neither may be set; every `NOT NULL` column without a default
//!   must be set from a required input property.
//! - `update` and `delete` are refused (`APP_ACTION_INVALID`): the runtime cannot
//!   supply the caller's `expectedVersion` for an action-bound mutation, so it would
//!   race the row's optimistic-concurrency check blind. Use
//!   `Sasha.data.update`/`Sasha.data.delete` from the app's view, or the per-table
//!   tools `app__<app>__<table>__update|delete`.
//!
//! `where` is a list of up to 20 clauses `{field, operator, valueFrom}`, combined
//! with AND. Operators: `eq`, `neq`, `lt`, `lte`, `gt`, `gte` (a scalar input
//! property), `in` (an array property of scalars with `maxItems` at most 50) and
//! `week-of` (a `format: date` string property; it matches the seven days from that
//! date). `contains` and `starts-with` exist only in the data grammar, not in
//! actions. A clause whose input property is optional and absent from a call is
//! left out of that call.
//!
//! ## Schemas
//!
//! `inputSchema` and `resultSchema` use a closed JSON Schema subset:
//!
//! - every schema has `type`: `object`, `string`, `number`, `integer`, `boolean` or
//!   `array` (one type, no `null`); `description` and `title` (text up to 300
//!   characters) are allowed everywhere;
//! - the root is an `object`; every object sets `additionalProperties: false` and may
//!   have `properties` and `required` (declared names, no duplicates); at most 50
//!   properties in total per schema and at most 6 levels of nesting;
//! - `string`: `maxLength` (at most 65,536), `minLength`, `enum`, `format: date`
//!   (exactly 10 characters, `YYYY-MM-DD`; no other format). A string needs
//!   `maxLength`, an `enum` or `format: date`;
//! - `number`/`integer`: `minimum`, `maximum`, `exclusiveMinimum`,
//!   `exclusiveMaximum`, `enum`; bounds are finite, integer bounds and values are
//!   safe integers (|n| ≤ 2^53−1), lower bounds do not exceed upper bounds;
//! - `boolean`: `enum`;
//! - `array`: `items` (one schema) and `maxItems` (at most 1,000) are required;
//!   `minItems` and `uniqueItems` are optional;
//! - `enum` holds 1–50 unique values of the schema's type;
//! - keywords for another type, unknown keywords and malformed values are refused.
//!
//! Property names use ASCII letters, digits, `-` and `_` (at most 64 characters).
//! Identity, prototype and executable names are reserved, compared after folding
//! case and removing `-` and `_`: `userId`, `USER_ID` and `user-id` are all refused
//! (as are `ownerId`, `createdBy`, `__proto__`, `constructor`, `eval`,
//! `_sasha_version` and the like), while `projectCode`, `factor` and
//! `transactionCount` are fine. Names keep their spelling, so `projectCode` and
//! `project_code` are distinct. Unicode lookalikes and invisible characters are
//! refused, never normalised.
//!
//! Visibility is `["app"]` (only the app's own UI, through `Sasha.actions.call`)
//! unless the declaration sets `exposeToModel: true`, which compiles to
//! `["model", "app"]` and publishes the MCP tool `app__<app>__<action>`.

use std::collections::{BTreeMap, BTreeSet};

use crate::diagnostics::Diagnostics;
use crate::manifest::{self, ActionDeclaration, Manifest};
use crate::sql::{self, DataContract, Table};

/// Most actions an app may declare.
pub const MAX_ACTIONS: usize = 20;
/// Most bytes of one descriptor file.
pub const MAX_DESCRIPTOR_BYTES: usize = 64 * 1024;
/// Most characters of a description (the action's and a schema's).
pub const MAX_DESCRIPTION_CHARS: usize = 300;
/// Most properties in one schema, counted across every nested object.
pub const MAX_SCHEMA_PROPERTIES: usize = 50;
/// Most levels of schemas, the root being level 1.
pub const MAX_SCHEMA_DEPTH: usize = 6;
/// Most values of an `enum`.
pub const MAX_ENUM_VALUES: usize = 50;
/// Most characters a string schema may allow.
pub const MAX_STRING_LENGTH: u64 = 65_536;
/// The length of a `format: date` string, `YYYY-MM-DD`.
pub const DATE_LENGTH: u64 = 10;
/// Most items an array schema may allow.
pub const MAX_ARRAY_ITEMS: u64 = 1000;
/// Most characters of a schema property name.
pub const MAX_PROPERTY_NAME_CHARS: usize = 64;
// The data grammar's bounds are the grammar's own (`Sasha.data.*` shares them).
pub use sasha_contract::grammar::{
    MAX_GROUP_BY, MAX_IN, MAX_LIMIT, MAX_METRICS, MAX_ORDER_BY, MAX_SAFE_INTEGER, MAX_SELECT,
    MAX_VALUES, MAX_WHERE, MetricFunction, Operator,
};

/// Property names reserved after folding case and removing `-` and `_`:
/// identity (a caller must never choose whose data an action touches), the
/// platform's row version, and names that reach into JavaScript prototypes or
/// code when an input object is handled in the browser or the host.
const RESERVED_PROPERTY_NAMES: &[&str] = &[
    // identity
    "userid",
    "ownerid",
    "actorid",
    "callerid",
    "principalid",
    "createdby",
    "updatedby",
    "modifiedby",
    "deletedby",
    // the platform's row version
    "sashaversion",
    // prototype and executable escapes
    "proto",
    "constructor",
    "prototype",
    "eval",
    "function",
    "script",
    "javascript",
    "tostring",
    "valueof",
    "hasownproperty",
    "isprototypeof",
    "propertyisenumerable",
    "tolocalestring",
    "definegetter",
    "definesetter",
    "lookupgetter",
    "lookupsetter",
];

pub use sasha_contract::actions::{
    AggregateOperation, CompiledAction, CreateOperation, Direction, GetOperation, ListOperation,
    Metric, Operation, OrderBy, WhereClause, WhereOperator,
};

/// The path every action descriptor must have.
pub fn descriptor_path(action_id: &str) -> String {
    format!("actions/{action_id}.action.yaml")
}

/// The MCP tool name of an action: `-` becomes `_`, which is injective because
/// ids are kebab-case without underscores.
pub fn mcp_name(app_id: &str, action_id: &str) -> String {
    sasha_contract::tools::tool_name(&[app_id, action_id])
}

/// Validates every declared action's descriptor against the manifest and the
/// data contract, recording every problem, and returns the actions that
/// compiled. `data` is `None` when the app has no valid data contract; then
/// every action (each one names a table) is refused.
pub fn compile_actions(
    manifest: &Manifest,
    files: &BTreeMap<String, String>,
    data: Option<&DataContract>,
    diagnostics: &mut Diagnostics,
) -> Vec<CompiledAction> {
    const MANIFEST_FILE: &str = "APP.md";
    if manifest.actions.len() > MAX_ACTIONS {
        diagnostics.push(
            MANIFEST_FILE,
            None,
            "ACTION_TOO_MANY",
            format!(
                "an app may declare at most {MAX_ACTIONS} actions; it declares {}",
                manifest.actions.len()
            ),
        );
    }
    let mut seen = BTreeSet::new();
    let mut compiled = Vec::new();
    for declaration in &manifest.actions {
        let id = &declaration.id;
        if !manifest::is_kebab_id(id) {
            diagnostics.push(MANIFEST_FILE, None, "ACTION_ID", format!("action id {id:?} must be lowercase kebab-case (a-z, 0-9 and single hyphens, starting with a letter, no underscores), at most {} characters", manifest::MAX_ID_CHARS));
            continue;
        }
        if !seen.insert(id.as_str()) {
            diagnostics.push(
                MANIFEST_FILE,
                None,
                "ACTION_DUPLICATE_ID",
                format!("action id {id} is declared more than once; give each action its own id"),
            );
            continue;
        }
        let expected = descriptor_path(id);
        if declaration.file != expected {
            diagnostics.push(
                MANIFEST_FILE,
                None,
                "ACTION_FILE_PATH",
                format!(
                    "action {id} must be described in {expected}, not {:?}",
                    declaration.file
                ),
            );
            continue;
        }
        let Some(text) = files.get(&expected) else {
            diagnostics.push(&expected, None, "ACTION_FILE_MISSING", format!("action {id} is declared in APP.md but {expected} does not exist; create it or remove the declaration"));
            continue;
        };
        let mut compiler = Compiler {
            file: &expected,
            diagnostics,
            failed: false,
            manifest,
            data,
            inputs_unknown: false,
        };
        if let Some(action) = compiler.descriptor(declaration, text) {
            compiled.push(action);
        }
    }
    compiled
}

mod yaml;
use yaml::{Node, Yaml, parse_yaml};

// ---------------------------------------------------------------------------
// Compiling one descriptor

/// A top-level input property an operation may reference.
#[derive(Debug, Clone)]
struct InputProperty {
    schema_type: String,
    required: bool,
    date: bool,
    /// For arrays: whether the items are scalars, and `maxItems`.
    scalar_items: bool,
    max_items: Option<u64>,
}

impl InputProperty {
    fn is_scalar(&self) -> bool {
        matches!(
            self.schema_type.as_str(),
            "string" | "number" | "integer" | "boolean"
        )
    }
}

struct Compiler<'a> {
    file: &'a str,
    diagnostics: &'a mut Diagnostics,
    failed: bool,
    manifest: &'a Manifest,
    data: Option<&'a DataContract>,
    /// The input schema is invalid, so input references cannot be judged.
    inputs_unknown: bool,
}

impl<'a> Compiler<'a> {
    fn push(&mut self, line: u32, code: &str, reason: impl Into<String>) {
        self.diagnostics
            .push(self.file, (line > 0).then_some(line), code, reason);
        self.failed = true;
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

    fn descriptor(
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
                    compiler: self,
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
                    compiler: self,
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
        if self.failed {
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

// ---------------------------------------------------------------------------
// The schema subset

/// Why a schema property name is refused: `(code, reason)`.
fn check_property_name(name: &str) -> Result<(), (&'static str, String)> {
    if let Some(c) = name
        .chars()
        .find(|c| c.is_control() || crate::source::is_invisible(*c))
    {
        return Err((
            "ACTION_PROPERTY_INVISIBLE",
            format!(
                "the name {:?} contains the invisible or control character U+{:04X}; type the name with ASCII letters, digits, - and _ only",
                name,
                u32::from(c)
            ),
        ));
    }
    if let Some(c) = name.chars().find(|c| !c.is_ascii()) {
        return Err((
            "ACTION_PROPERTY_LOOKALIKE",
            format!(
                "the name {name:?} contains the non-ASCII character {c:?} (U+{:04X}); names use ASCII letters, digits, - and _ only, and lookalikes are never normalised",
                u32::from(c)
            ),
        ));
    }
    if name.is_empty()
        || name.len() > MAX_PROPERTY_NAME_CHARS
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err((
            "ACTION_PROPERTY_NAME",
            format!(
                "the name {name:?} must be 1 to {MAX_PROPERTY_NAME_CHARS} ASCII letters, digits, - or _"
            ),
        ));
    }
    let folded: String = name
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if RESERVED_PROPERTY_NAMES.contains(&folded.as_str()) {
        return Err((
            "ACTION_PROPERTY_RESERVED",
            format!(
                "the name {name:?} is reserved (identity, prototype and code names such as userId, __proto__ or eval are refused in any spelling); choose a business name"
            ),
        ));
    }
    Ok(())
}

const SCHEMA_TYPES: [&str; 6] = ["object", "string", "number", "integer", "boolean", "array"];
const ANNOTATIONS: [&str; 3] = ["type", "description", "title"];

/// The keywords each type allows besides [`ANNOTATIONS`].
fn keywords_for(schema_type: &str) -> &'static [&'static str] {
    match schema_type {
        "object" => &["properties", "required", "additionalProperties"],
        "string" => &["minLength", "maxLength", "format", "enum"],
        "number" | "integer" => &[
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "enum",
        ],
        "boolean" => &["enum"],
        "array" => &["items", "minItems", "maxItems", "uniqueItems"],
        _ => &[],
    }
}

struct SchemaChecker<'c, 'a> {
    compiler: &'c mut Compiler<'a>,
    which: &'static str,
    properties: usize,
    over_limit: bool,
}

impl SchemaChecker<'_, '_> {
    fn push(&mut self, line: u32, code: &str, reason: String) {
        self.compiler.push(line, code, reason);
    }

    /// Checks a whole schema; returns it as JSON with its top-level properties.
    fn root(
        &mut self,
        node: &Node,
    ) -> Option<(serde_json::Value, BTreeMap<String, InputProperty>)> {
        let before = self.compiler.failed;
        self.compiler.failed = false;
        let is_object = match &node.value {
            Yaml::Mapping(entries) => entries
                .iter()
                .any(|(key, value)| key == "type" && value.as_str() == Some("object")),
            _ => false,
        };
        if !is_object {
            self.push(
                node.line,
                "ACTION_SCHEMA_ROOT",
                format!(
                    "{} must be a schema with type: object (and additionalProperties: false)",
                    self.which
                ),
            );
        } else {
            self.schema(node, self.which, 1);
        }
        let ok = !self.compiler.failed;
        self.compiler.failed |= before;
        ok.then(|| (node.to_json(), top_level_properties(node)))
    }

    fn schema(&mut self, node: &Node, path: &str, depth: usize) {
        let Yaml::Mapping(entries) = &node.value else {
            self.push(
                node.line,
                "ACTION_SCHEMA_SHAPE",
                format!("{path} must be a schema (a mapping with type)"),
            );
            return;
        };
        if depth > MAX_SCHEMA_DEPTH {
            self.push(
                node.line,
                "ACTION_SCHEMA_LIMIT",
                format!("{path} nests deeper than {MAX_SCHEMA_DEPTH} levels; flatten the schema"),
            );
            return;
        }
        let get = |key: &str| {
            entries
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, value)| value)
        };
        let schema_type = match get("type").map(|value| (value.as_str(), value.line)) {
            Some((Some(text), _)) if SCHEMA_TYPES.contains(&text) => text,
            Some((_, line)) => {
                self.push(
                    line,
                    "ACTION_SCHEMA_TYPE",
                    format!(
                        "{path}.type must be one of {} (a single type; null is not supported)",
                        SCHEMA_TYPES.join(", ")
                    ),
                );
                return;
            }
            None => {
                self.push(
                    node.line,
                    "ACTION_SCHEMA_TYPE",
                    format!("{path} needs type: one of {}", SCHEMA_TYPES.join(", ")),
                );
                return;
            }
        };
        let allowed = keywords_for(schema_type);
        for (key, value) in entries {
            if ANNOTATIONS.contains(&key.as_str()) || allowed.contains(&key.as_str()) {
                continue;
            }
            let owner = SCHEMA_TYPES
                .iter()
                .find(|other| keywords_for(other).contains(&key.as_str()));
            let reason = match owner {
                Some(owner) => format!(
                    "{path}: {key} applies to {owner} schemas, not {schema_type}; remove it"
                ),
                None => format!(
                    "{path}: the keyword {key:?} is not supported; {schema_type} schemas allow {}",
                    ANNOTATIONS
                        .iter()
                        .chain(allowed)
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            self.push(value.line, "ACTION_SCHEMA_KEYWORD", reason);
        }
        for annotation in ["description", "title"] {
            if let Some(value) = get(annotation) {
                let fine = value.as_str().is_some_and(|text| {
                    text.chars().count() <= MAX_DESCRIPTION_CHARS
                        && !text.chars().any(|c| {
                            (c.is_control() && c != '\n') || crate::source::is_invisible(c)
                        })
                });
                if !fine {
                    self.push(value.line, "ACTION_SCHEMA_VALUE", format!("{path}.{annotation} must be plain text of at most {MAX_DESCRIPTION_CHARS} characters"));
                }
            }
        }
        match schema_type {
            "object" => self.object(node, path, depth, &get),
            "string" => self.string(node, path, &get),
            "number" | "integer" => self.number(path, schema_type == "integer", &get),
            "boolean" => {
                if let Some(values) = get("enum") {
                    self.enumeration(values, path, "boolean", |value| {
                        matches!(value.value, Yaml::Bool(_))
                    });
                }
            }
            _ => self.array(node, path, depth, &get),
        }
    }

    fn object<'n>(
        &mut self,
        node: &Node,
        path: &str,
        depth: usize,
        get: &dyn Fn(&str) -> Option<&'n Node>,
    ) {
        match get("additionalProperties") {
            Some(value) if value.value == Yaml::Bool(false) => {}
            Some(value) => self.push(
                value.line,
                "ACTION_SCHEMA_OPEN",
                format!("{path}.additionalProperties must be false: schemas are closed"),
            ),
            None => self.push(
                node.line,
                "ACTION_SCHEMA_OPEN",
                format!("{path} needs additionalProperties: false (schemas are closed)"),
            ),
        }
        let mut declared = BTreeSet::new();
        if let Some(properties) = get("properties") {
            let Yaml::Mapping(entries) = &properties.value else {
                self.push(
                    properties.line,
                    "ACTION_SCHEMA_VALUE",
                    format!("{path}.properties must map property names to schemas"),
                );
                return;
            };
            for (name, schema) in entries {
                declared.insert(name.as_str());
                self.properties += 1;
                if self.properties > MAX_SCHEMA_PROPERTIES && !self.over_limit {
                    self.over_limit = true;
                    self.push(
                        schema.line,
                        "ACTION_SCHEMA_LIMIT",
                        format!(
                            "{} declares more than {MAX_SCHEMA_PROPERTIES} properties in total",
                            self.which
                        ),
                    );
                }
                let child = format!("{path}.properties.{name}");
                if let Err((code, reason)) = check_property_name(name) {
                    self.push(schema.line, code, format!("{path}.properties: {reason}"));
                    continue;
                }
                self.schema(schema, &child, depth + 1);
            }
        }
        if let Some(required) = get("required") {
            let Some(items) = required.as_sequence() else {
                self.push(
                    required.line,
                    "ACTION_SCHEMA_REQUIRED",
                    format!("{path}.required must be a list of property names"),
                );
                return;
            };
            let mut seen = BTreeSet::new();
            for item in items {
                match item.as_str() {
                    Some(name) if !declared.contains(name) => self.push(
                        item.line,
                        "ACTION_SCHEMA_REQUIRED",
                        format!("{path}.required lists {name:?}, which is not under properties"),
                    ),
                    Some(name) if !seen.insert(name) => self.push(
                        item.line,
                        "ACTION_SCHEMA_REQUIRED",
                        format!("{path}.required lists {name:?} twice"),
                    ),
                    Some(_) => {}
                    None => self.push(
                        item.line,
                        "ACTION_SCHEMA_REQUIRED",
                        format!("{path}.required must hold property names only"),
                    ),
                }
            }
        }
    }

    /// The whole number under `keyword` (`minLength`, `maxItems`, ...), reporting
    /// a value that is not one.
    fn schema_count<'n>(
        &mut self,
        get: &dyn Fn(&str) -> Option<&'n Node>,
        path: &str,
        keyword: &str,
    ) -> Option<u64> {
        let value = get(keyword)?;
        let count = value.as_count();
        if count.is_none() {
            self.push(
                value.line,
                "ACTION_SCHEMA_VALUE",
                format!("{path}.{keyword} must be a whole number, 0 or more"),
            );
        }
        count
    }

    fn string<'n>(&mut self, node: &Node, path: &str, get: &dyn Fn(&str) -> Option<&'n Node>) {
        if let Some(format) = get("format") {
            if format.as_str() == Some("date") {
                for keyword in ["minLength", "maxLength"] {
                    if let Some(value) = get(keyword) {
                        self.push(value.line, "ACTION_SCHEMA_KEYWORD", format!("{path}: format: date already fixes the length at {DATE_LENGTH} characters; remove {keyword}"));
                    }
                }
            } else {
                self.push(
                    format.line,
                    "ACTION_SCHEMA_FORMAT",
                    format!(
                        "{path}.format must be date (YYYY-MM-DD); no other format is supported"
                    ),
                );
            }
        }
        let min = self.schema_count(get, path, "minLength");
        let max = self.schema_count(get, path, "maxLength");
        if let Some(max) = max.filter(|max| *max > MAX_STRING_LENGTH) {
            let line = get("maxLength").map_or(node.line, |value| value.line);
            self.push(
                line,
                "ACTION_SCHEMA_LIMIT",
                format!(
                    "{path}.maxLength is {max}; at most {MAX_STRING_LENGTH} characters are allowed"
                ),
            );
        }
        if let (Some(min), Some(max)) = (min, max)
            && min > max
        {
            let line = get("minLength").map_or(node.line, |value| value.line);
            self.push(
                line,
                "ACTION_SCHEMA_BOUNDS",
                format!("{path}.minLength ({min}) must not exceed maxLength ({max})"),
            );
        }
        let enumeration = get("enum");
        if let Some(values) = enumeration {
            let (low, high) = (min.unwrap_or(0), max.unwrap_or(MAX_STRING_LENGTH));
            self.enumeration(values, path, "string", |value| {
                value.as_str().is_some_and(|text| {
                    let length = text.chars().count() as u64;
                    (low..=high).contains(&length)
                })
            });
        }
        // An unsupported format was reported already; it showed the intent to bound.
        if max.is_none()
            && enumeration.is_none()
            && get("format").is_none()
            && get("maxLength").is_none()
        {
            self.push(node.line, "ACTION_SCHEMA_UNBOUNDED", format!("{path} is an unbounded string: give it maxLength (at most {MAX_STRING_LENGTH}), an enum, or format: date"));
        }
    }

    fn number<'n>(&mut self, path: &str, integer: bool, get: &dyn Fn(&str) -> Option<&'n Node>) {
        let kind = if integer { "integer" } else { "number" };
        let mut bounds: BTreeMap<&str, (f64, u32)> = BTreeMap::new();
        for keyword in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
            let Some(value) = get(keyword) else { continue };
            match numeric(value, integer) {
                Some(bound) => {
                    bounds.insert(keyword, (bound, value.line));
                }
                None => self.push(
                    value.line,
                    "ACTION_SCHEMA_VALUE",
                    format!(
                        "{path}.{keyword} must be a finite {}",
                        if integer {
                            "safe integer (|n| ≤ 2^53−1)"
                        } else {
                            "number"
                        }
                    ),
                ),
            }
        }
        for (low, high, strict) in [
            ("minimum", "maximum", false),
            ("exclusiveMinimum", "maximum", true),
            ("minimum", "exclusiveMaximum", true),
            ("exclusiveMinimum", "exclusiveMaximum", true),
        ] {
            if let (Some((a, line)), Some((b, _))) = (bounds.get(low), bounds.get(high))
                && (a > b || (strict && a >= b))
            {
                self.push(
                    *line,
                    "ACTION_SCHEMA_BOUNDS",
                    format!("{path}.{low} must be below {high}"),
                );
            }
        }
        if let Some(values) = get("enum") {
            let within = |n: f64| {
                bounds.get("minimum").is_none_or(|(b, _)| n >= *b)
                    && bounds.get("maximum").is_none_or(|(b, _)| n <= *b)
                    && bounds.get("exclusiveMinimum").is_none_or(|(b, _)| n > *b)
                    && bounds.get("exclusiveMaximum").is_none_or(|(b, _)| n < *b)
            };
            self.enumeration(values, path, kind, |value| {
                numeric(value, integer).is_some_and(within)
            });
        }
    }

    fn array<'n>(
        &mut self,
        node: &Node,
        path: &str,
        depth: usize,
        get: &dyn Fn(&str) -> Option<&'n Node>,
    ) {
        match get("items") {
            Some(items) => self.schema(items, &format!("{path}.items"), depth + 1),
            None => self.push(
                node.line,
                "ACTION_SCHEMA_UNBOUNDED",
                format!("{path} needs items: one schema for every element"),
            ),
        }
        let min = self.schema_count(get, path, "minItems");
        let max = self.schema_count(get, path, "maxItems");
        match (get("maxItems"), max) {
            (None, _) => self.push(
                node.line,
                "ACTION_SCHEMA_UNBOUNDED",
                format!("{path} needs maxItems (at most {MAX_ARRAY_ITEMS})"),
            ),
            (Some(value), Some(max)) if max > MAX_ARRAY_ITEMS => self.push(
                value.line,
                "ACTION_SCHEMA_LIMIT",
                format!("{path}.maxItems is {max}; at most {MAX_ARRAY_ITEMS} items are allowed"),
            ),
            _ => {}
        }
        if let (Some(min), Some(max)) = (min, max)
            && min > max
        {
            let line = get("minItems").map_or(node.line, |value| value.line);
            self.push(
                line,
                "ACTION_SCHEMA_BOUNDS",
                format!("{path}.minItems ({min}) must not exceed maxItems ({max})"),
            );
        }
        if let Some(unique) = get("uniqueItems")
            && !matches!(unique.value, Yaml::Bool(_))
        {
            self.push(
                unique.line,
                "ACTION_SCHEMA_VALUE",
                format!("{path}.uniqueItems must be true or false"),
            );
        }
    }

    /// `enum`: 1–50 unique values, each accepted by `fits`.
    fn enumeration(&mut self, node: &Node, path: &str, kind: &str, fits: impl Fn(&Node) -> bool) {
        let Some(values) = node.as_sequence() else {
            self.push(
                node.line,
                "ACTION_SCHEMA_ENUM",
                format!("{path}.enum must be a list of 1 to {MAX_ENUM_VALUES} values"),
            );
            return;
        };
        if values.is_empty() || values.len() > MAX_ENUM_VALUES {
            self.push(
                node.line,
                "ACTION_SCHEMA_ENUM",
                format!(
                    "{path}.enum must hold 1 to {MAX_ENUM_VALUES} values; it has {}",
                    values.len()
                ),
            );
            return;
        }
        let mut seen: Vec<&Node> = Vec::new();
        for value in values {
            if !fits(value) {
                self.push(
                    value.line,
                    "ACTION_SCHEMA_ENUM",
                    format!("{path}.enum values must be {kind} values within the schema's bounds"),
                );
                return;
            }
            let duplicate = seen.iter().any(|other| same_value(other, value));
            if duplicate {
                self.push(
                    value.line,
                    "ACTION_SCHEMA_ENUM",
                    format!("{path}.enum lists a value twice"),
                );
                return;
            }
            seen.push(value);
        }
    }
}

/// A finite number (a safe integer when `integer`).
fn numeric(node: &Node, integer: bool) -> Option<f64> {
    let number = node.as_number()?;
    if integer {
        let whole = match (number.as_i64(), number.as_f64()) {
            (Some(whole), _) => whole,
            (None, Some(float))
                if float.fract() == 0.0 && float.abs() <= MAX_SAFE_INTEGER as f64 =>
            {
                float as i64
            }
            _ => return None,
        };
        return (whole.abs() <= MAX_SAFE_INTEGER).then_some(whole as f64);
    }
    number.as_f64().filter(|float| float.is_finite())
}

fn same_value(a: &Node, b: &Node) -> bool {
    match (&a.value, &b.value) {
        (Yaml::Number(x), Yaml::Number(y)) => x.as_f64() == y.as_f64(),
        (x, y) => x == y,
    }
}

/// The top-level properties of an object schema (already validated).
fn top_level_properties(root: &Node) -> BTreeMap<String, InputProperty> {
    let mut found = BTreeMap::new();
    let Yaml::Mapping(entries) = &root.value else {
        return found;
    };
    let get = |entries: &[(String, Node)], key: &str| -> Option<Node> {
        entries
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.clone())
    };
    let required: BTreeSet<String> = get(entries, "required")
        .and_then(|node| {
            node.as_sequence().map(|items| {
                items
                    .iter()
                    .filter_map(|item| item.as_str().map(str::to_owned))
                    .collect()
            })
        })
        .unwrap_or_default();
    let Some(Node {
        value: Yaml::Mapping(properties),
        ..
    }) = get(entries, "properties")
    else {
        return found;
    };
    for (name, schema) in &properties {
        let Yaml::Mapping(fields) = &schema.value else {
            continue;
        };
        let text = |key: &str| get(fields, key).and_then(|node| node.as_str().map(str::to_owned));
        let schema_type = text("type").unwrap_or_default();
        let items = get(fields, "items");
        let items_type = items.as_ref().and_then(|items| match &items.value {
            Yaml::Mapping(item_fields) => {
                get(item_fields, "type").and_then(|node| node.as_str().map(str::to_owned))
            }
            _ => None,
        });
        found.insert(
            name.clone(),
            InputProperty {
                date: schema_type == "string" && text("format").as_deref() == Some("date"),
                required: required.contains(name),
                scalar_items: items_type.is_some_and(|kind| {
                    matches!(kind.as_str(), "string" | "number" | "integer" | "boolean")
                }),
                max_items: get(fields, "maxItems").and_then(|node| node.as_count()),
                schema_type,
            },
        );
    }
    found
}

#[cfg(test)]
mod tests;
