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

use sasha_contract::ids::{MAX_ID_CHARS, is_kebab_id};

use crate::diagnostics::Diagnostics;
use crate::manifest::Manifest;
use crate::sql::DataContract;

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

pub use sasha_contract::actions::{
    AggregateOperation, CompiledAction, CreateOperation, Direction, GetOperation, ListOperation,
    Metric, Operation, OrderBy, WhereClause, WhereOperator,
};

/// The path every action descriptor must have.
pub fn descriptor_path(action_id: &str) -> String {
    format!("actions/{action_id}.action.yaml")
}

/// The MCP tool name of an action (`app__<app>__<action>`, the contract's
/// codec).
pub fn mcp_name(app_id: &str, action_id: &str) -> String {
    sasha_contract::tools::action_tool_name(app_id, action_id)
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
        if !is_kebab_id(id) {
            diagnostics.push(MANIFEST_FILE, None, "ACTION_ID", format!("action id {id:?} must be lowercase kebab-case (a-z, 0-9 and single hyphens, starting with a letter, no underscores), at most {MAX_ID_CHARS} characters"));
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
            report: Report {
                file: &expected,
                diagnostics,
                failed: false,
            },
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

mod compile;
mod report;
mod schema;
mod yaml;

use compile::Compiler;
use report::Report;

#[cfg(test)]
mod tests;
