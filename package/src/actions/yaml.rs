//! Action descriptors as YAML with a line on every node, parsed with
//! serde-saphyr under limits for untrusted input (one document, no anchors
//! or aliases, bounded depth), so every diagnostic can name its line.
//!
//! This module must never judge a descriptor: it only parses.

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

use super::MAX_DESCRIPTOR_BYTES;
use crate::yaml::YamlText;

/// A YAML value with the 1-based line it starts on (0 when unknown).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Node {
    pub(super) line: u32,
    pub(super) value: Yaml,
    /// Where the parser saw it; `parse_yaml` turns this into `line`.
    at: serde_saphyr::Location,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Yaml {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Sequence(Vec<Node>),
    /// In document order; duplicate keys are refused by the parser.
    Mapping(Vec<(String, Node)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Node, D::Error> {
        let spanned = serde_saphyr::Spanned::<Yaml>::deserialize(deserializer)?;
        Ok(Node {
            line: 0,
            value: spanned.value,
            at: spanned.referenced,
        })
    }
}

impl<'de> Deserialize<'de> for Yaml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Yaml, D::Error> {
        deserializer.deserialize_any(YamlVisitor)
    }
}

struct YamlVisitor;

impl<'de> Visitor<'de> for YamlVisitor {
    type Value = Yaml;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a YAML value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Yaml, E> {
        Ok(Yaml::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Yaml, E> {
        Ok(Yaml::Number(value.into()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Yaml, E> {
        Ok(Yaml::Number(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Yaml, E> {
        serde_json::Number::from_f64(value)
            .map(Yaml::Number)
            .ok_or_else(|| E::custom("numbers must be finite"))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Yaml, E> {
        Ok(Yaml::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Yaml, E> {
        Ok(Yaml::String(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Yaml, E> {
        Ok(Yaml::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Yaml, E> {
        Ok(Yaml::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Yaml, D::Error> {
        Yaml::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Yaml, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Yaml::Sequence(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Yaml, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value::<Node>()?;
            entries.push((key, value));
        }
        Ok(Yaml::Mapping(entries))
    }
}

impl Node {
    pub(super) fn as_str(&self) -> Option<&str> {
        match &self.value {
            Yaml::String(text) => Some(text),
            _ => None,
        }
    }

    pub(super) fn as_sequence(&self) -> Option<&[Node]> {
        match &self.value {
            Yaml::Sequence(items) => Some(items),
            _ => None,
        }
    }

    pub(super) fn as_number(&self) -> Option<&serde_json::Number> {
        match &self.value {
            Yaml::Number(number) => Some(number),
            _ => None,
        }
    }

    /// A non-negative whole number written as an integer.
    pub(super) fn as_count(&self) -> Option<u64> {
        self.as_number().and_then(serde_json::Number::as_u64)
    }

    pub(super) fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.value {
            Yaml::Null => Value::Null,
            Yaml::Bool(value) => Value::Bool(*value),
            Yaml::Number(number) => Value::Number(number.clone()),
            Yaml::String(text) => Value::String(text.clone()),
            Yaml::Sequence(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            Yaml::Mapping(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(key, value)| (key.clone(), value.to_json()))
                    .collect(),
            ),
        }
    }
}

/// Parsing limits for untrusted descriptors: one document, no anchors or
/// aliases (no alias bombs), no merge keys, no custom tags, YAML 1.2 booleans
/// only (so `enum: [yes, no]` stays two strings), duplicate keys refused.
fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 1;
    budget.max_depth = 40;
    budget.max_nodes = 20_000;
    budget.max_events = 100_000;
    budget.max_anchors = 0;
    budget.max_aliases = 0;
    budget.max_total_scalar_bytes = MAX_DESCRIPTOR_BYTES;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::Error;
    options.merge_keys = serde_saphyr::MergeKeyPolicy::Error;
    options.strict_booleans = true;
    options.reject_unsupported_tags = true;
    options.with_snippet = false;
    options
}

pub(super) fn parse_yaml(text: &str) -> Result<Node, (Option<u32>, String)> {
    let lines = YamlText::new(text);
    match serde_saphyr::from_str_with_options::<Node>(text, yaml_options()) {
        Ok(mut root) => {
            root.number(&lines);
            Ok(root)
        }
        Err(error) => Err((lines.error_line(&error), crate::yaml::reason(&error))),
    }
}

impl Node {
    /// Gives every node the line a diagnostic names.
    fn number(&mut self, lines: &YamlText) {
        self.line = lines.line_at(self.at);
        match &mut self.value {
            Yaml::Sequence(items) => items.iter_mut().for_each(|item| item.number(lines)),
            Yaml::Mapping(entries) => entries
                .iter_mut()
                .for_each(|(_, value)| value.number(lines)),
            _ => {}
        }
    }
}
