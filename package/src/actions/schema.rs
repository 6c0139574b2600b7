//! The closed JSON Schema subset of `inputSchema` and `resultSchema`: types,
//! keywords per type, bounds, enums, property names (reserved identity,
//! prototype and code names in any spelling; no lookalikes) and the limits on
//! properties and nesting.
//!
//! This module must never widen the subset: an unknown keyword, a keyword for
//! another type or a malformed value is refused, never ignored or normalised.

use std::collections::{BTreeMap, BTreeSet};

use super::report::Report;
use super::yaml::{Node, Yaml};
use super::{
    DATE_LENGTH, MAX_ARRAY_ITEMS, MAX_DESCRIPTION_CHARS, MAX_ENUM_VALUES, MAX_PROPERTY_NAME_CHARS,
    MAX_SAFE_INTEGER, MAX_SCHEMA_DEPTH, MAX_SCHEMA_PROPERTIES, MAX_STRING_LENGTH,
};

/// A top-level input property an operation may reference.
#[derive(Debug, Clone)]
pub(super) struct InputProperty {
    pub(super) schema_type: String,
    pub(super) required: bool,
    pub(super) date: bool,
    /// For arrays: whether the items are scalars, and `maxItems`.
    pub(super) scalar_items: bool,
    pub(super) max_items: Option<u64>,
}

impl InputProperty {
    pub(super) fn is_scalar(&self) -> bool {
        matches!(
            self.schema_type.as_str(),
            "string" | "number" | "integer" | "boolean"
        )
    }
}

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

/// Why a schema property name is refused: `(code, reason)`.
pub(super) fn check_property_name(name: &str) -> Result<(), (&'static str, String)> {
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

/// One schema's check, reporting through the descriptor's [`Report`].
pub(super) struct SchemaChecker<'c, 'a> {
    pub(super) report: &'c mut Report<'a>,
    pub(super) which: &'static str,
    pub(super) properties: usize,
    pub(super) over_limit: bool,
}

impl SchemaChecker<'_, '_> {
    fn push(&mut self, line: u32, code: &str, reason: String) {
        self.report.push(line, code, reason);
    }

    /// Checks a whole schema; returns it as JSON with its top-level properties.
    pub(super) fn root(
        &mut self,
        node: &Node,
    ) -> Option<(serde_json::Value, BTreeMap<String, InputProperty>)> {
        let before = self.report.failed;
        self.report.failed = false;
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
        let ok = !self.report.failed;
        self.report.failed |= before;
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
