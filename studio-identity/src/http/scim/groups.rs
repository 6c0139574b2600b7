//! `/scim/v2/Groups`: the directory's groups and their members. Roles follow
//! membership: whenever a person joins or leaves a group (or a group is
//! renamed or removed), their role becomes the highest their groups map to
//! (`SASHA_SSO_*_GROUPS`, by group name, SCIM id or externalId), and a person
//! no group maps cannot sign in.
//!
//! What it must never do: make a member of anyone the directory did not
//! provision, or accept an attribute Sasha does not keep.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use scim_v2::filter::{AttrExp, CompValue, CompareOp, Filter, ValFilter};
use scim_v2::models::errors::ScimType;
use scim_v2::models::group::Group;
use scim_v2::models::others::{PatchOp, TolerantListQuery};
use scim_v2::schema_urns;
use serde_json::{Map, Value, json};
use studio_store::{ScimGroup, ScimGroupAttributes, ScimQuery};

use super::users::canonical;
use super::{
    ScimError, date_time, json_body, list_request, list_response, message, patch, require_schemas,
    run, run_scim, scim_actor, scim_json, version,
};
use crate::accounts::Accounts;

/// The Group attributes Sasha keeps; `id` and `meta` are read-only.
pub const GROUP_ATTRIBUTES: &[(&str, &[&str])] = &[
    ("schemas", &[]),
    ("id", &[]),
    (
        "meta",
        &[
            "resourceType",
            "created",
            "lastModified",
            "location",
            "version",
        ],
    ),
    ("externalId", &[]),
    ("displayName", &[]),
    ("members", &["value", "display", "$ref", "type"]),
];

/// What a Group body says, checked against what Sasha keeps.
fn attributes(body: Value) -> Result<ScimGroupAttributes, ScimError> {
    let Value::Object(object) = body else {
        return Err(ScimError::bad(
            ScimType::InvalidSyntax,
            "the body must be a SCIM Group object",
        ));
    };
    require_schemas(&object, schema_urns::GROUP)?;
    let object = canonical(
        object,
        GROUP_ATTRIBUTES,
        "displayName, members and externalId",
    )?;
    let group: Group = message(Value::Object(object))?;
    let mut members = BTreeSet::new();
    for member in group.members.into_option().unwrap_or_default() {
        let Some(value) = member.value else {
            return Err(ScimError::bad(
                ScimType::InvalidValue,
                "every member needs a value: the SCIM id of a person",
            ));
        };
        members.insert(value);
    }
    Ok(ScimGroupAttributes {
        display_name: group.display_name,
        external_id: group.external_id.into_option(),
        members,
    })
}

/// The writable attributes of `group`, as a PATCH starts from.
fn writable(group: &ScimGroup) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert("schemas".into(), json!([schema_urns::GROUP]));
    object.insert(
        "displayName".into(),
        Value::from(group.display_name.clone()),
    );
    if let Some(external_id) = &group.external_id {
        object.insert("externalId".into(), Value::from(external_id.clone()));
    }
    let members: Vec<Value> = group
        .members
        .iter()
        .map(|member| json!({ "value": member.user_id }))
        .collect();
    object.insert("members".into(), Value::Array(members));
    object
}

/// A group as SCIM shows it.
fn group_json(accounts: &Accounts, group: &ScimGroup, with_members: bool) -> Value {
    let studio = accounts.studio.as_str();
    let mut object = writable(group);
    object.insert("id".into(), Value::from(group.id.clone()));
    if with_members {
        let members: Vec<Value> = group
            .members
            .iter()
            .map(|member| {
                json!({
                    "value": member.user_id,
                    "display": member.username,
                    "$ref": format!("{studio}/scim/v2/Users/{}", member.user_id),
                    "type": "User",
                })
            })
            .collect();
        object.insert("members".into(), Value::Array(members));
    } else {
        object.remove("members");
    }
    object.insert(
        "meta".into(),
        json!({
            "resourceType": "Group",
            "created": date_time(group.created_at),
            "lastModified": date_time(group.updated_at),
            "location": format!("{studio}/scim/v2/Groups/{}", group.id),
            "version": version(group.updated_at),
        }),
    );
    Value::Object(object)
}

fn answer(accounts: &Accounts, status: StatusCode, group: &ScimGroup) -> Response {
    let body = group_json(accounts, group, true);
    let mut response = scim_json(status, &body);
    if let Some(location) = body["meta"]["location"].as_str()
        && let Ok(value) = location.parse()
    {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// What a groups list answers: one equality on a key, optionally with
/// `members[value eq "…"]` (Entra asks whether a person is in a group so).
struct GroupQuery {
    query: ScimQuery,
    member: Option<String>,
}

fn key_equality(filter: &Filter) -> Option<ScimQuery> {
    let Filter::Attr(AttrExp::Comparison(path, CompareOp::Eq, CompValue::Str(value))) = filter
    else {
        return None;
    };
    if path.sub_attr.is_some()
        || path
            .uri
            .as_deref()
            .is_some_and(|uri| !uri.eq_ignore_ascii_case(schema_urns::GROUP))
    {
        return None;
    }
    match path.name.to_ascii_lowercase().as_str() {
        "displayname" => Some(ScimQuery::Name(value.clone())),
        "externalid" => Some(ScimQuery::ExternalId(value.clone())),
        "id" => Some(ScimQuery::Id(value.clone())),
        _ => None,
    }
}

fn member_equality(filter: &Filter) -> Option<String> {
    let Filter::ValuePath(path) = filter else {
        return None;
    };
    if !path.attr.name.eq_ignore_ascii_case("members") {
        return None;
    }
    match path.filter.as_ref() {
        ValFilter::Attr(AttrExp::Comparison(inner, CompareOp::Eq, CompValue::Str(value)))
            if inner.name.eq_ignore_ascii_case("value") =>
        {
            Some(value.clone())
        }
        _ => None,
    }
}

fn group_query(filter: Option<&Filter>) -> Result<GroupQuery, ScimError> {
    let Some(filter) = filter else {
        return Ok(GroupQuery {
            query: ScimQuery::All,
            member: None,
        });
    };
    if let Some(query) = key_equality(filter) {
        return Ok(GroupQuery {
            query,
            member: None,
        });
    }
    if let Filter::And(items) = filter
        && let [first, second] = items.as_slice()
    {
        for (key, member) in [(first, second), (second, first)] {
            if let (Some(query), Some(member)) = (key_equality(key), member_equality(member)) {
                return Ok(GroupQuery {
                    query,
                    member: Some(member),
                });
            }
        }
    }
    Err(ScimError::bad(
        ScimType::InvalidFilter,
        format!(
            "this service provider filters groups by one of displayName, externalId or id with eq \
             (optionally and members[value eq \"…\"]); {filter} is not one it answers"
        ),
    ))
}

/// `GET /scim/v2/Groups`.
pub async fn list(
    State(accounts): State<Arc<Accounts>>,
    headers: HeaderMap,
    query: Result<Query<TolerantListQuery>, QueryRejection>,
) -> Response {
    let outcome = async {
        scim_actor(&accounts, &headers).await?;
        let request = list_request(query)?;
        let GroupQuery { query, member } = group_query(request.filter.as_ref())?;
        let store = accounts.store.clone();
        let (start, count) = (request.start, request.count);
        let mut page = match &member {
            // A key equality finds at most one group: it is checked whole.
            Some(_) => run(move || store.scim_groups(&query, 0, 1)).await?,
            None => run(move || store.scim_groups(&query, start, count)).await?,
        };
        if let Some(member) = member {
            page.items
                .retain(|group| group.members.iter().any(|m| m.user_id == member));
            page.total = i64::try_from(page.items.len()).unwrap_or(i64::MAX);
            if start > 0 || count == 0 {
                page.items.clear();
            }
        }
        let resources = page
            .items
            .iter()
            .map(|group| group_json(&accounts, group, !request.exclude_members))
            .collect();
        Ok::<_, ScimError>(list_response(page.total, request.start, resources))
    };
    outcome.await.unwrap_or_else(IntoResponse::into_response)
}

/// `POST /scim/v2/Groups`.
pub async fn create(
    State(accounts): State<Arc<Accounts>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let outcome = async {
        let actor = scim_actor(&accounts, &headers).await?;
        let attributes = attributes(json_body(body)?)?;
        let (store, roles) = (accounts.store.clone(), accounts.group_roles.clone());
        let group = run(move || {
            store.scim_create_group(&attributes, &actor, &|groups| {
                roles.role_for(groups.iter().copied())
            })
        })
        .await?;
        Ok::<_, ScimError>(answer(&accounts, StatusCode::CREATED, &group))
    };
    outcome.await.unwrap_or_else(IntoResponse::into_response)
}

async fn found(accounts: &Accounts, id: &str) -> Result<ScimGroup, ScimError> {
    let (store, key) = (accounts.store.clone(), id.to_owned());
    run(move || store.scim_group(&key))
        .await?
        .ok_or_else(|| ScimError::not_found("group", id))
}

/// `GET /scim/v2/Groups/{id}`.
pub async fn read(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let outcome = async {
        scim_actor(&accounts, &headers).await?;
        let group = found(&accounts, &id).await?;
        Ok::<_, ScimError>(answer(&accounts, StatusCode::OK, &group))
    };
    outcome.await.unwrap_or_else(IntoResponse::into_response)
}

/// Stores what `change` makes of group `id` (inside the store's
/// transaction).
async fn store_group(
    accounts: &Arc<Accounts>,
    id: String,
    actor: String,
    change: impl FnOnce(&ScimGroup) -> Result<ScimGroupAttributes, ScimError> + Send + 'static,
) -> Result<ScimGroup, ScimError> {
    let (store, roles) = (accounts.store.clone(), accounts.group_roles.clone());
    run_scim(move || {
        store.scim_update_group(
            &id,
            &actor,
            &|groups| roles.role_for(groups.iter().copied()),
            change,
        )
    })
    .await
}

/// `PUT /scim/v2/Groups/{id}`.
pub async fn replace(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let outcome = async {
        let actor = scim_actor(&accounts, &headers).await?;
        let attributes = attributes(json_body(body)?)?;
        let group = store_group(&accounts, id, actor, move |_| Ok(attributes)).await?;
        Ok::<_, ScimError>(answer(&accounts, StatusCode::OK, &group))
    };
    outcome.await.unwrap_or_else(IntoResponse::into_response)
}

/// `PATCH /scim/v2/Groups/{id}`: a new name, or members added and removed
/// as Entra and Okta send them, applied to the members the group has at that
/// moment (two PATCHes at once both land). Answers 204, as Entra expects of a
/// group PATCH (the members list may be long).
pub async fn patch(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let outcome = async {
        let actor = scim_actor(&accounts, &headers).await?;
        let operations: PatchOp = message(json_body(body)?)?;
        store_group(&accounts, id, actor, move |group| {
            let mut resource = writable(group);
            patch::apply(&mut resource, operations, schema_urns::GROUP)?;
            attributes(Value::Object(resource))
        })
        .await?;
        Ok::<_, ScimError>(StatusCode::NO_CONTENT.into_response())
    };
    outcome.await.unwrap_or_else(IntoResponse::into_response)
}

/// `DELETE /scim/v2/Groups/{id}`.
pub async fn delete(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let outcome = async {
        let actor = scim_actor(&accounts, &headers).await?;
        found(&accounts, &id).await?;
        let (store, roles) = (accounts.store.clone(), accounts.group_roles.clone());
        run(move || {
            store.scim_delete_group(&id, &actor, &|groups| {
                roles.role_for(groups.iter().copied())
            })
        })
        .await?;
        Ok::<_, ScimError>(StatusCode::NO_CONTENT.into_response())
    };
    outcome.await.unwrap_or_else(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_groups_list_answers_a_key_and_entras_membership_question() {
        let query = |text: &str| group_query(Some(&text.parse::<Filter>().unwrap()));
        let found = query("displayName eq \"Sasha Admins\"").unwrap();
        assert_eq!(found.query, ScimQuery::Name("Sasha Admins".into()));
        let member = query("id eq \"g\" and members[value eq \"u\"]").unwrap();
        assert_eq!(member.query, ScimQuery::Id("g".into()));
        assert_eq!(member.member.as_deref(), Some("u"));
        let error = query("displayName sw \"S\"").err().unwrap();
        assert_eq!(
            error.scim_type.as_ref().map(ScimType::as_str),
            Some("invalidFilter")
        );
    }

    #[test]
    fn a_group_body_keeps_members_by_id_and_refuses_the_rest() {
        let group = attributes(json!({
            "schemas": [schema_urns::GROUP],
            "displayName": "Sasha Admins",
            "members": [{"value": "u1", "display": "ada"}],
        }))
        .unwrap();
        assert_eq!(group.members, BTreeSet::from(["u1".to_owned()]));
        let error = attributes(json!({
            "schemas": [schema_urns::GROUP], "displayName": "g", "owners": [],
        }))
        .unwrap_err();
        assert_eq!(
            error.scim_type.as_ref().map(ScimType::as_str),
            Some("invalidSyntax")
        );
    }
}
