//! `/scim/v2/Users`: the people the directory provisions. A person's SCIM id
//! is their Sasha user id; `active` is the directory's word (a person may
//! still be unable to sign in because no group of theirs maps to a role, or
//! a Studio admin holds them disabled).
//!
//! What it must never do: accept an attribute Sasha does not keep (it would
//! be dropped silently and the directory would think it set), or show or
//! change a person who signs in with a password here.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use scim_v2::filter::{AttrExp, CompValue, CompareOp, Filter};
use scim_v2::models::errors::ScimType;
use scim_v2::models::others::{PatchOp, TolerantListQuery};
use scim_v2::models::user::User;
use scim_v2::schema_urns;
use serde_json::{Map, Value, json};
use studio_store::{ScimAttributes, ScimPerson, ScimQuery};

use super::{
    ScimError, date_time, json_body, list_request, list_response, message, patch, require_schemas,
    run, run_scim, scim_actor, scim_json, version,
};
use crate::accounts::Accounts;

/// The User attributes Sasha keeps, as the directory may send them, each
/// with the sub-attributes it keeps. `id`, `meta` and `groups` are read-only:
/// accepted in a body and ignored (RFC 7643 §7).
pub const USER_ATTRIBUTES: &[(&str, &[&str])] = &[
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
    ("groups", &["value", "display", "$ref", "type"]),
    ("externalId", &[]),
    ("userName", &[]),
    ("name", &["givenName", "familyName", "formatted"]),
    ("displayName", &[]),
    ("emails", &["value", "type", "primary", "display"]),
    ("active", &[]),
];

/// Refuses an attribute (or sub-attribute) not in `allowed`, and renames
/// each to its canonical spelling (SCIM names are case-insensitive).
pub fn canonical(
    object: Map<String, Value>,
    allowed: &[(&str, &[&str])],
    keeps: &str,
) -> Result<Map<String, Value>, ScimError> {
    let mut out = Map::new();
    for (key, value) in object {
        let Some((name, subs)) = allowed
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(&key))
        else {
            return Err(ScimError::bad(
                ScimType::InvalidSyntax,
                format!("unknown attribute {key:?}: this service provider keeps {keeps} only"),
            ));
        };
        let value = match value {
            Value::Object(inner) if !subs.is_empty() => {
                Value::Object(canonical_subs(name, inner, subs)?)
            }
            Value::Array(items) if !subs.is_empty() => Value::Array(
                items
                    .into_iter()
                    .map(|item| match item {
                        Value::Object(inner) => {
                            canonical_subs(name, inner, subs).map(Value::Object)
                        }
                        other => Ok(other),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            other => other,
        };
        if out.insert((*name).to_owned(), value).is_some() {
            return Err(ScimError::bad(
                ScimType::InvalidSyntax,
                format!("{name} is given twice"),
            ));
        }
    }
    Ok(out)
}

fn canonical_subs(
    parent: &str,
    object: Map<String, Value>,
    subs: &[&str],
) -> Result<Map<String, Value>, ScimError> {
    let mut out = Map::new();
    for (key, value) in object {
        let Some(sub) = subs.iter().find(|sub| sub.eq_ignore_ascii_case(&key)) else {
            return Err(ScimError::bad(
                ScimType::InvalidSyntax,
                format!(
                    "unknown attribute {parent}.{key}: this service provider keeps {parent}.{} only",
                    subs.join(", ")
                ),
            ));
        };
        out.insert((*sub).to_owned(), value);
    }
    Ok(out)
}

/// What a User body (a POST, a PUT, or a patched person) says, checked
/// against what Sasha keeps.
fn attributes(body: Value) -> Result<ScimAttributes, ScimError> {
    let Value::Object(object) = body else {
        return Err(ScimError::bad(
            ScimType::InvalidSyntax,
            "the body must be a SCIM User object",
        ));
    };
    require_schemas(&object, schema_urns::USER)?;
    let object = canonical(
        object,
        USER_ATTRIBUTES,
        "userName, name, displayName, emails, active and externalId",
    )?;
    let user: User = message(Value::Object(object))?;
    let name = user.name.into_option().unwrap_or_default();
    let emails = user.emails.into_option().unwrap_or_default();
    let email = emails
        .iter()
        .find(|email| email.primary == Some(true))
        .or_else(|| emails.first())
        .and_then(|email| email.value.clone());
    Ok(ScimAttributes {
        user_name: user.user_name,
        external_id: user.external_id.into_option(),
        display_name: user.display_name.into_option(),
        given_name: name.given_name.into_option(),
        family_name: name.family_name.into_option(),
        email,
        // A directory that says nothing of `active` means an active person.
        active: user.active.into_option().unwrap_or(true),
    })
}

/// The writable attributes of `person`, as a PATCH starts from.
fn writable(person: &ScimPerson) -> Map<String, Value> {
    let attributes = &person.attributes;
    let mut object = Map::new();
    object.insert("schemas".into(), json!([schema_urns::USER]));
    object.insert("userName".into(), Value::from(attributes.user_name.clone()));
    object.insert("active".into(), Value::Bool(attributes.active));
    let mut put = |key: &str, value: &Option<String>| {
        if let Some(value) = value {
            object.insert(key.into(), Value::from(value.clone()));
        }
    };
    put("externalId", &attributes.external_id);
    put("displayName", &attributes.display_name);
    let mut name = Map::new();
    if let Some(given) = &attributes.given_name {
        name.insert("givenName".into(), Value::from(given.clone()));
    }
    if let Some(family) = &attributes.family_name {
        name.insert("familyName".into(), Value::from(family.clone()));
    }
    if !name.is_empty() {
        object.insert("name".into(), Value::Object(name));
    }
    if let Some(email) = &attributes.email {
        object.insert(
            "emails".into(),
            json!([{ "value": email, "type": "work", "primary": true }]),
        );
    }
    object
}

/// A person as SCIM shows them.
pub fn person_json(accounts: &Accounts, person: &ScimPerson, with_groups: bool) -> Value {
    let location = format!(
        "{}/scim/v2/Users/{}",
        accounts.studio.as_str(),
        person.user.id
    );
    let mut object = writable(person);
    if let Some(Value::Object(name)) = object.get_mut("name") {
        let formatted: Vec<&str> = [
            &person.attributes.given_name,
            &person.attributes.family_name,
        ]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
        name.insert("formatted".into(), Value::from(formatted.join(" ")));
    }
    object.insert("id".into(), Value::from(person.user.id.clone()));
    if with_groups {
        let groups: Vec<Value> = person
            .groups
            .iter()
            .map(|group| {
                json!({
                    "value": group.id,
                    "display": group.display_name,
                    "$ref": format!("{}/scim/v2/Groups/{}", accounts.studio.as_str(), group.id),
                    "type": "direct",
                })
            })
            .collect();
        object.insert("groups".into(), Value::Array(groups));
    }
    object.insert(
        "meta".into(),
        json!({
            "resourceType": "User",
            "created": date_time(person.user.created_at),
            "lastModified": date_time(person.updated_at),
            "location": location,
            "version": version(person.updated_at),
        }),
    );
    Value::Object(object)
}

/// One person's answer, with its `Location` and `ETag`.
fn answer(accounts: &Accounts, status: StatusCode, person: &ScimPerson) -> Response {
    let body = person_json(accounts, person, true);
    let mut response = scim_json(status, &body);
    if let Some(location) = body["meta"]["location"].as_str()
        && let Ok(value) = location.parse()
    {
        response.headers_mut().insert(header::LOCATION, value);
    }
    if let Ok(value) = version(person.updated_at).parse() {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

/// The one attribute comparison a people list answers.
fn user_query(filter: Option<&Filter>) -> Result<ScimQuery, ScimError> {
    let Some(filter) = filter else {
        return Ok(ScimQuery::All);
    };
    if let Filter::Attr(AttrExp::Comparison(path, CompareOp::Eq, CompValue::Str(value))) = filter
        && path.sub_attr.is_none()
        && path
            .uri
            .as_deref()
            .is_none_or(|uri| uri.eq_ignore_ascii_case(schema_urns::USER))
    {
        let name = path.name.to_ascii_lowercase();
        match name.as_str() {
            "username" => return Ok(ScimQuery::Name(value.clone())),
            "externalid" => return Ok(ScimQuery::ExternalId(value.clone())),
            "id" => return Ok(ScimQuery::Id(value.clone())),
            _ => {}
        }
    }
    Err(ScimError::bad(
        ScimType::InvalidFilter,
        format!(
            "this service provider filters people by one of userName, externalId or id with eq; \
             {filter} is not one it answers"
        ),
    ))
}

/// `GET /scim/v2/Users`.
pub async fn list(
    State(accounts): State<Arc<Accounts>>,
    headers: HeaderMap,
    query: Result<Query<TolerantListQuery>, QueryRejection>,
) -> Response {
    let outcome = async {
        scim_actor(&accounts, &headers).await?;
        let request = list_request(query)?;
        let store_query = user_query(request.filter.as_ref())?;
        let store = accounts.store.clone();
        let (start, count) = (request.start, request.count);
        let page = run(move || store.scim_users(&store_query, start, count)).await?;
        let resources = page
            .items
            .iter()
            .map(|person| person_json(&accounts, person, !request.exclude_members))
            .collect();
        Ok::<_, ScimError>(list_response(page.total, request.start, resources))
    };
    outcome.await.unwrap_or_else(IntoResponse::into_response)
}

/// `POST /scim/v2/Users`: provisions a person.
pub async fn create(
    State(accounts): State<Arc<Accounts>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let outcome = async {
        let actor = scim_actor(&accounts, &headers).await?;
        let attributes = attributes(json_body(body)?)?;
        let (store, roles) = (accounts.store.clone(), accounts.group_roles.clone());
        let person = run(move || {
            store.scim_create_user(&attributes, &actor, &|groups| {
                roles.role_for(groups.iter().copied())
            })
        })
        .await?;
        Ok::<_, ScimError>(answer(&accounts, StatusCode::CREATED, &person))
    };
    outcome.await.unwrap_or_else(IntoResponse::into_response)
}

/// `GET /scim/v2/Users/{id}`.
pub async fn read(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let outcome = async {
        scim_actor(&accounts, &headers).await?;
        let person = found(&accounts, &id).await?;
        Ok::<_, ScimError>(answer(&accounts, StatusCode::OK, &person))
    };
    outcome.await.unwrap_or_else(IntoResponse::into_response)
}

async fn found(accounts: &Accounts, id: &str) -> Result<ScimPerson, ScimError> {
    let (store, key) = (accounts.store.clone(), id.to_owned());
    run(move || store.scim_user(&key))
        .await?
        .ok_or_else(|| ScimError::not_found("person", id))
}

/// Stores what `change` makes of person `id`'s attributes (inside the
/// store's transaction), then answers them.
async fn store_person(
    accounts: &Arc<Accounts>,
    id: String,
    actor: String,
    change: impl FnOnce(&ScimPerson) -> Result<ScimAttributes, ScimError> + Send + 'static,
) -> Result<Response, ScimError> {
    let (store, roles) = (accounts.store.clone(), accounts.group_roles.clone());
    let person = run_scim(move || {
        store.scim_update_user(
            &id,
            &actor,
            &|groups| roles.role_for(groups.iter().copied()),
            change,
        )
    })
    .await?;
    Ok(answer(accounts, StatusCode::OK, &person))
}

/// `PUT /scim/v2/Users/{id}`: replaces what the directory says of a person.
pub async fn replace(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let outcome = async {
        let actor = scim_actor(&accounts, &headers).await?;
        let attributes = attributes(json_body(body)?)?;
        store_person(&accounts, id, actor, move |_| Ok(attributes)).await
    };
    outcome.await.unwrap_or_else(IntoResponse::into_response)
}

/// `PATCH /scim/v2/Users/{id}`: Entra's and Okta's changes, deactivation
/// (`active: false`, or Entra's `"False"`) among them, applied to what the
/// directory said last.
pub async fn patch(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let outcome = async {
        let actor = scim_actor(&accounts, &headers).await?;
        let operations: PatchOp = message(json_body(body)?)?;
        store_person(&accounts, id, actor, move |person| {
            let mut resource = writable(person);
            patch::apply(&mut resource, operations, schema_urns::USER)?;
            attributes(Value::Object(resource))
        })
        .await
    };
    outcome.await.unwrap_or_else(IntoResponse::into_response)
}

/// `DELETE /scim/v2/Users/{id}`: removes the person, as an admin's removal
/// does.
pub async fn delete(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let outcome = async {
        let actor = scim_actor(&accounts, &headers).await?;
        found(&accounts, &id).await?;
        let store = accounts.store.clone();
        run(move || store.scim_delete_user(&id, &actor)).await?;
        Ok::<_, ScimError>(StatusCode::NO_CONTENT.into_response())
    };
    outcome.await.unwrap_or_else(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_body_keeps_what_sasha_keeps_and_refuses_the_rest() {
        let kept = attributes(json!({
            "schemas": [schema_urns::USER],
            "UserName": "ada@example.org",
            "externalId": "e-1",
            "name": {"givenName": "Ada", "familyName": "Lovelace"},
            "emails": [{"value": "home@x.org"}, {"value": "ada@example.org", "primary": true, "type": "work"}],
            "active": "False",
            "id": "ignored",
        }))
        .unwrap();
        assert_eq!(kept.user_name, "ada@example.org");
        assert_eq!(kept.email.as_deref(), Some("ada@example.org"));
        assert_eq!(kept.given_name.as_deref(), Some("Ada"));
        assert!(!kept.active);
        for (body, scim_type) in [
            (
                json!({"schemas": [schema_urns::USER], "userName": "ada", "title": "x"}),
                "invalidSyntax",
            ),
            (
                json!({"schemas": [schema_urns::USER], "userName": "ada", "name": {"middleName": "x"}}),
                "invalidSyntax",
            ),
            (
                json!({"schemas": [schema_urns::USER, schema_urns::ENTERPRISE_USER], "userName": "ada"}),
                "invalidValue",
            ),
            (json!({"userName": "ada"}), "invalidSyntax"),
            (json!({"schemas": [schema_urns::USER]}), "invalidSyntax"),
            (
                json!({"schemas": [schema_urns::USER], "userName": 7}),
                "invalidSyntax",
            ),
            (json!([1]), "invalidSyntax"),
        ] {
            let error = attributes(body.clone()).unwrap_err();
            assert_eq!(
                error.scim_type.as_ref().map(ScimType::as_str),
                Some(scim_type),
                "{body}"
            );
        }
    }

    #[test]
    fn a_people_list_answers_equality_on_its_keys_only() {
        let query = |text: &str| user_query(Some(&text.parse::<Filter>().unwrap()));
        assert_eq!(
            query("userName eq \"Ada\"").unwrap(),
            ScimQuery::Name("Ada".into())
        );
        assert_eq!(
            query("externalId eq \"e\"").unwrap(),
            ScimQuery::ExternalId("e".into())
        );
        for refused in [
            "userName co \"a\"",
            "title eq \"x\"",
            "userName eq \"a\" or userName eq \"b\"",
        ] {
            let error = query(refused).unwrap_err();
            assert_eq!(
                error.scim_type.as_ref().map(ScimType::as_str),
                Some("invalidFilter"),
                "{refused}"
            );
        }
    }
}
