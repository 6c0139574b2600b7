//! Applying a SCIM PATCH (RFC 7644 §3.5.2) to a resource's JSON, as Entra
//! ID and Okta send it: `add`, `replace` and `remove` with a plain path
//! (`active`, `name.givenName`, `members`), a value path (`emails[type eq
//! "work"].value`, `members[value eq "…"]`) or no path (an object of
//! attributes). The operations and paths are parsed by `scim_v2`; the patched
//! resource then goes through the same attribute rules as a PUT, so a PATCH
//! can set nothing a PUT could not.
//!
//! Two provider habits are accepted on purpose: Entra's `remove` of
//! `members` with a `value` list removes those members (not all of them),
//! and Entra's string booleans (`"False"`) are read by the attribute rules.
//!
//! What it must never do: touch a read-only attribute (`id`, `meta`,
//! `groups`), or apply part of a PATCH that fails (the patched copy is
//! thrown away on the first refusal).

use scim_v2::filter::{AttrExp, AttrPath, CompValue, CompareOp, PatchPath, ValFilter};
use scim_v2::models::errors::ScimType;
use scim_v2::models::others::{OperationTarget, PatchOp, PatchOperation};
use serde_json::{Map, Value};

use super::ScimError;

/// The most operations one PATCH may carry.
pub const MAX_PATCH_OPERATIONS: usize = 1_000;

/// Attributes no PATCH may write.
const READ_ONLY: [&str; 3] = ["id", "meta", "groups"];

/// Applies `patch` to `resource` (an object of the resource's attributes,
/// whose core schema is `urn`).
pub fn apply(
    resource: &mut Map<String, Value>,
    patch: PatchOp,
    urn: &str,
) -> Result<(), ScimError> {
    if !patch
        .schemas
        .iter()
        .any(|schema| schema.eq_ignore_ascii_case(scim_v2::schema_urns::PATCH_OP))
    {
        return Err(ScimError::bad(
            ScimType::InvalidSyntax,
            format!("schemas must name {}", scim_v2::schema_urns::PATCH_OP),
        ));
    }
    if patch.operations.is_empty() || patch.operations.len() > MAX_PATCH_OPERATIONS {
        return Err(ScimError::bad(
            ScimType::InvalidSyntax,
            format!("Operations must hold 1 to {MAX_PATCH_OPERATIONS} operations"),
        ));
    }
    for operation in patch.operations {
        match operation {
            PatchOperation::Add(OperationTarget::WithoutPath { value }) => {
                for (name, value) in value {
                    let path = plain_path(&name, urn)?;
                    set(resource, &path, value, true)?;
                }
            }
            PatchOperation::Replace(OperationTarget::WithoutPath { value }) => {
                for (name, value) in value {
                    let path = plain_path(&name, urn)?;
                    set(resource, &path, value, false)?;
                }
            }
            PatchOperation::Add(OperationTarget::WithPath { path, value }) => {
                let value = value.ok_or_else(|| {
                    ScimError::bad(ScimType::InvalidValue, "an add operation needs a value")
                })?;
                at_path(resource, &path, urn, Change::Set { value, add: true })?;
            }
            PatchOperation::Replace(OperationTarget::WithPath { path, value }) => {
                let value = value.ok_or_else(|| {
                    ScimError::bad(ScimType::InvalidValue, "a replace operation needs a value")
                })?;
                at_path(resource, &path, urn, Change::Set { value, add: false })?;
            }
            PatchOperation::Remove { path, value } => {
                at_path(resource, &path, urn, Change::Remove(value))?;
            }
        }
    }
    Ok(())
}

/// What an operation does at its path.
enum Change {
    Set { value: Value, add: bool },
    Remove(Option<Value>),
}

/// A plain attribute path (`name` or `name.sub`), parsed by the grammar.
fn plain_path(text: &str, urn: &str) -> Result<AttrPath, ScimError> {
    match text.parse::<PatchPath>() {
        Ok(PatchPath::Attr(path)) => checked(path, urn),
        _ => Err(ScimError::bad(
            ScimType::InvalidPath,
            format!("{text:?} is not an attribute name"),
        )),
    }
}

/// `path` if it is in the resource's own schema and writable.
fn checked(path: AttrPath, urn: &str) -> Result<AttrPath, ScimError> {
    if let Some(uri) = &path.uri
        && !uri.eq_ignore_ascii_case(urn)
    {
        return Err(ScimError::bad(
            ScimType::InvalidPath,
            format!("{uri:?} is not a schema this service provider keeps; it keeps {urn}"),
        ));
    }
    if READ_ONLY
        .iter()
        .any(|name| name.eq_ignore_ascii_case(&path.name))
    {
        return Err(ScimError::bad(
            ScimType::Mutability,
            format!("{} is read-only", path.name),
        ));
    }
    Ok(path)
}

/// The key of `object` that is `name` whatever its case (SCIM names are
/// case-insensitive), or `name` itself.
fn key_of(object: &Map<String, Value>, name: &str) -> String {
    object
        .keys()
        .find(|key| key.eq_ignore_ascii_case(name))
        .cloned()
        .unwrap_or_else(|| name.to_owned())
}

/// Sets (or, for `add` to a multi-valued attribute, extends) the attribute
/// at `path`; a `null` value clears it (RFC 7644 §3.5.2.3).
fn set(
    resource: &mut Map<String, Value>,
    path: &AttrPath,
    value: Value,
    add: bool,
) -> Result<(), ScimError> {
    let key = key_of(resource, &path.name);
    match &path.sub_attr {
        None => {
            if value.is_null() {
                resource.remove(&key);
                return Ok(());
            }
            match (resource.get_mut(&key), value, add) {
                (Some(Value::Array(existing)), Value::Array(more), true) => {
                    for item in more {
                        if !existing.contains(&item) {
                            existing.push(item);
                        }
                    }
                }
                (Some(Value::Object(existing)), Value::Object(more), _) => {
                    for (sub, value) in more {
                        let sub_key = key_of(existing, &sub);
                        existing.insert(sub_key, value);
                    }
                }
                (_, value, _) => {
                    resource.insert(key, value);
                }
            }
        }
        Some(sub) => {
            let target = resource
                .entry(key)
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(target) = target else {
                return Err(ScimError::bad(
                    ScimType::NoTarget,
                    format!("{} has no sub-attributes", path.name),
                ));
            };
            let sub_key = key_of(target, sub);
            if value.is_null() {
                target.remove(&sub_key);
            } else {
                target.insert(sub_key, value);
            }
        }
    }
    Ok(())
}

fn at_path(
    resource: &mut Map<String, Value>,
    path: &PatchPath,
    urn: &str,
    change: Change,
) -> Result<(), ScimError> {
    match path {
        PatchPath::Attr(path) => {
            let path = checked(path.clone(), urn)?;
            match change {
                Change::Set { value, add } => set(resource, &path, value, add),
                Change::Remove(value) => remove(resource, &path, value),
            }
        }
        PatchPath::Value(value_path) => {
            let attr = checked(value_path.attr.clone(), urn)?;
            let key = key_of(resource, &attr.name);
            let items = resource
                .entry(key)
                .or_insert_with(|| Value::Array(Vec::new()));
            let Value::Array(items) = items else {
                return Err(ScimError::bad(
                    ScimType::InvalidPath,
                    format!("{} is not multi-valued", attr.name),
                ));
            };
            let mut matched = 0;
            let mut keep = Vec::with_capacity(items.len());
            for item in std::mem::take(items) {
                if !matches(&item, &value_path.filter)? {
                    keep.push(item);
                    continue;
                }
                matched += 1;
                match (&change, &value_path.sub_attr, item) {
                    (Change::Remove(_), None, _) => {}
                    (Change::Remove(_), Some(sub), Value::Object(mut object)) => {
                        let sub_key = key_of(&object, sub);
                        object.remove(&sub_key);
                        keep.push(Value::Object(object));
                    }
                    (Change::Set { value, .. }, Some(sub), Value::Object(mut object)) => {
                        let sub_key = key_of(&object, sub);
                        object.insert(sub_key, value.clone());
                        keep.push(Value::Object(object));
                    }
                    (Change::Set { value, .. }, None, _) => keep.push(value.clone()),
                    (_, Some(sub), _) => {
                        return Err(ScimError::bad(
                            ScimType::NoTarget,
                            format!("the values of {} have no {sub}", attr.name),
                        ));
                    }
                }
            }
            if matched == 0 {
                match change {
                    // RFC 7644 §3.5.2.2: a remove that selects nothing is noTarget.
                    Change::Remove(_) => {
                        return Err(ScimError::bad(
                            ScimType::NoTarget,
                            format!("no value of {} matches the path's filter", attr.name),
                        ));
                    }
                    // Entra's `emails[type eq "work"].value` on a person with no
                    // work address adds one: the filter's equalities and the value.
                    Change::Set { value, .. } => {
                        let mut item = equalities(&value_path.filter);
                        match &value_path.sub_attr {
                            Some(sub) => {
                                item.insert(sub.clone(), value);
                                keep.push(Value::Object(item));
                            }
                            None => keep.push(value),
                        }
                    }
                }
            }
            *items = keep;
            Ok(())
        }
    }
}

/// Removes the attribute at `path`; with a `value` list on a multi-valued
/// attribute (Entra's member removal), only those values.
fn remove(
    resource: &mut Map<String, Value>,
    path: &AttrPath,
    value: Option<Value>,
) -> Result<(), ScimError> {
    let key = key_of(resource, &path.name);
    match (&path.sub_attr, resource.get_mut(&key), value) {
        (None, Some(Value::Array(items)), Some(Value::Array(gone))) => {
            let gone: Vec<&Value> = gone.iter().filter_map(|item| item.get("value")).collect();
            items.retain(|item| item.get("value").is_none_or(|value| !gone.contains(&value)));
        }
        (None, _, _) => {
            resource.remove(&key);
        }
        (Some(sub), Some(Value::Object(object)), _) => {
            let sub_key = key_of(object, sub);
            object.remove(&sub_key);
        }
        (Some(_), _, _) => {}
    }
    Ok(())
}

/// Whether one value of a multi-valued attribute matches `filter`: the
/// equality, presence and logical forms providers send in PATCH paths.
fn matches(item: &Value, filter: &ValFilter) -> Result<bool, ScimError> {
    Ok(match filter {
        ValFilter::Attr(AttrExp::Present(path)) => {
            sub_value(item, &path.name).is_some_and(|value| !value.is_null())
        }
        ValFilter::Attr(AttrExp::Comparison(path, CompareOp::Eq, expected)) => {
            let actual = sub_value(item, &path.name);
            match (actual, expected) {
                (Some(Value::String(actual)), CompValue::Str(expected)) => {
                    // A member's `value` is an id (case-exact); `type` and
                    // the like are not.
                    if path.name.eq_ignore_ascii_case("value") {
                        actual == expected
                    } else {
                        actual.eq_ignore_ascii_case(expected)
                    }
                }
                (Some(Value::Bool(actual)), CompValue::True) => *actual,
                (Some(Value::Bool(actual)), CompValue::False) => !*actual,
                (None | Some(Value::Null), CompValue::Null) => true,
                _ => false,
            }
        }
        ValFilter::Attr(AttrExp::Comparison(..)) => {
            return Err(ScimError::bad(
                ScimType::InvalidFilter,
                "a PATCH path's filter may compare with eq only",
            ));
        }
        ValFilter::Not(inner) => !matches(item, inner)?,
        ValFilter::And(items) => {
            let mut all = true;
            for inner in items.iter() {
                all &= matches(item, inner)?;
            }
            all
        }
        ValFilter::Or(items) => {
            let mut any = false;
            for inner in items.iter() {
                any |= matches(item, inner)?;
            }
            any
        }
    })
}

fn sub_value<'a>(item: &'a Value, name: &str) -> Option<&'a Value> {
    item.as_object()?
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value)
}

/// The `attr eq value` terms of a filter (its `and`s), as a new value.
fn equalities(filter: &ValFilter) -> Map<String, Value> {
    let mut item = Map::new();
    let mut add = |filter: &ValFilter| {
        if let ValFilter::Attr(AttrExp::Comparison(path, CompareOp::Eq, value)) = filter {
            let value = match value {
                CompValue::Str(text) => Value::from(text.clone()),
                CompValue::True => Value::Bool(true),
                CompValue::False => Value::Bool(false),
                _ => return,
            };
            item.insert(path.name.clone(), value);
        }
    };
    match filter {
        ValFilter::And(items) => items.iter().for_each(&mut add),
        other => add(other),
    }
    item
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn patched(resource: Value, patch: Value) -> Result<Value, ScimError> {
        let Value::Object(mut resource) = resource else {
            unreachable!()
        };
        let patch: PatchOp = serde_json::from_value(patch).unwrap();
        apply(&mut resource, patch, scim_v2::schema_urns::USER)?;
        Ok(Value::Object(resource))
    }

    fn op(operations: Value) -> Value {
        json!({"schemas": [scim_v2::schema_urns::PATCH_OP], "Operations": operations})
    }

    #[test]
    fn entra_and_okta_deactivations_set_active() {
        let entra = patched(
            json!({"userName": "ada", "active": true}),
            op(json!([{"op": "Replace", "path": "active", "value": "False"}])),
        )
        .unwrap();
        assert_eq!(entra["active"], "False");
        let okta = patched(
            json!({"userName": "ada", "active": true}),
            op(json!([{"op": "replace", "value": {"active": false}}])),
        )
        .unwrap();
        assert_eq!(okta["active"], false);
    }

    #[test]
    fn a_value_path_sets_or_adds_the_matching_value() {
        let changed = patched(
            json!({"userName": "ada", "emails": [{"type": "work", "value": "a@x.org"}]}),
            op(json!([{"op": "Replace", "path": "emails[type eq \"work\"].value", "value": "b@x.org"}])),
        )
        .unwrap();
        assert_eq!(
            changed["emails"],
            json!([{"type": "work", "value": "b@x.org"}])
        );
        let added = patched(
            json!({"userName": "ada"}),
            op(json!([{"op": "Add", "path": "emails[type eq \"work\"].value", "value": "c@x.org"}])),
        )
        .unwrap();
        assert_eq!(
            added["emails"],
            json!([{"type": "work", "value": "c@x.org"}])
        );
    }

    #[test]
    fn members_are_added_and_removed_as_both_providers_send_them() {
        let group = json!({"displayName": "g", "members": [{"value": "a"}, {"value": "b"}]});
        let entra = patched(
            group.clone(),
            op(json!([
                {"op": "Add", "path": "members", "value": [{"value": "c"}]},
                {"op": "Remove", "path": "members", "value": [{"value": "a"}]},
            ])),
        )
        .unwrap();
        assert_eq!(entra["members"], json!([{"value": "b"}, {"value": "c"}]));
        let okta = patched(
            group,
            op(json!([{"op": "remove", "path": "members[value eq \"b\"]"}])),
        )
        .unwrap();
        assert_eq!(okta["members"], json!([{"value": "a"}]));
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let resource = json!({"userName": "ada"});
        let cases = [
            (
                json!([{"op": "replace", "path": "id", "value": "x"}]),
                "mutability",
            ),
            (
                json!([{"op": "replace", "path": "meta.created", "value": "x"}]),
                "mutability",
            ),
            (
                json!([{"op": "replace", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department", "value": "x"}]),
                "invalidPath",
            ),
            (
                json!([{"op": "remove", "path": "emails[type eq \"home\"]"}]),
                "noTarget",
            ),
            (json!([]), "invalidSyntax"),
        ];
        for (operations, scim_type) in cases {
            let error = patched(resource.clone(), op(operations.clone())).unwrap_err();
            assert_eq!(
                error.scim_type.as_ref().map(ScimType::as_str),
                Some(scim_type),
                "{operations}"
            );
        }
    }
}
