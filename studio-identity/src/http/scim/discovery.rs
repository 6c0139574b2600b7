//! SCIM's discovery documents (RFC 7644 §4): what this service provider
//! supports (`/ServiceProviderConfig`), its two resource types
//! (`/ResourceTypes`) and the attributes it keeps of each (`/Schemas`: the
//! core User and Group schemas, cut to what Sasha stores).
//!
//! What it must never do: advertise an attribute or a feature the
//! endpoints refuse (the schemas list exactly [`super::users::USER_ATTRIBUTES`]
//! and [`super::groups::GROUP_ATTRIBUTES`]; a test holds them together).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use scim_v2::schema_urns;
use serde_json::{Value, json};

use super::{MAX_SCIM_PAGE, ScimError, list_response, scim_actor, scim_json};
use crate::accounts::Accounts;

fn service_provider_config_json() -> Value {
    json!({
        "schemas": [schema_urns::SERVICE_PROVIDER_CONFIG],
        "patch": { "supported": true },
        "bulk": { "supported": false, "maxOperations": 0, "maxPayloadSize": 0 },
        "filter": { "supported": true, "maxResults": MAX_SCIM_PAGE },
        "changePassword": { "supported": false },
        "sort": { "supported": false },
        "etag": { "supported": false },
        "authenticationSchemes": [{
            "type": "oauthbearertoken",
            "name": "Bearer token",
            "description": "a SCIM token an admin mints in Studio (Users, SCIM tokens) or with `sasha admin scim token mint`",
            "primary": true,
        }],
        "meta": { "resourceType": "ServiceProviderConfig", "location": "/scim/v2/ServiceProviderConfig" },
    })
}

fn resource_type_json(name: &str) -> Option<Value> {
    let (endpoint, schema, description) = match name {
        "User" => ("/Users", schema_urns::USER, "a person"),
        "Group" => (
            "/Groups",
            schema_urns::GROUP,
            "a group, whose members' roles follow it",
        ),
        _ => return None,
    };
    Some(json!({
        "schemas": [schema_urns::RESOURCE_TYPE],
        "id": name,
        "name": name,
        "endpoint": endpoint,
        "description": description,
        "schema": schema,
        "schemaExtensions": [],
        "meta": { "resourceType": "ResourceType", "location": format!("/scim/v2/ResourceTypes/{name}") },
    }))
}

/// One attribute of a schema document.
fn attribute(name: &str, kind: &str, multi: bool, required: bool, uniqueness: &str) -> Value {
    json!({
        "name": name,
        "type": kind,
        "multiValued": multi,
        "required": required,
        "caseExact": false,
        "mutability": "readWrite",
        "returned": "default",
        "uniqueness": uniqueness,
    })
}

fn sub_attributes(mut parent: Value, subs: Vec<Value>) -> Value {
    parent["subAttributes"] = Value::Array(subs);
    parent
}

fn schema_json(urn: &str) -> Option<Value> {
    let (name, attributes) = if urn.eq_ignore_ascii_case(schema_urns::USER) {
        (
            "User",
            vec![
                attribute("userName", "string", false, true, "server"),
                sub_attributes(
                    attribute("name", "complex", false, false, "none"),
                    vec![
                        attribute("givenName", "string", false, false, "none"),
                        attribute("familyName", "string", false, false, "none"),
                        attribute("formatted", "string", false, false, "none"),
                    ],
                ),
                attribute("displayName", "string", false, false, "none"),
                sub_attributes(
                    attribute("emails", "complex", true, false, "none"),
                    vec![
                        attribute("value", "string", false, false, "none"),
                        attribute("type", "string", false, false, "none"),
                        attribute("primary", "boolean", false, false, "none"),
                        attribute("display", "string", false, false, "none"),
                    ],
                ),
                attribute("active", "boolean", false, false, "none"),
                attribute("externalId", "string", false, false, "server"),
                {
                    let mut groups = sub_attributes(
                        attribute("groups", "complex", true, false, "none"),
                        vec![
                            attribute("value", "string", false, false, "none"),
                            attribute("display", "string", false, false, "none"),
                            attribute("$ref", "reference", false, false, "none"),
                            attribute("type", "string", false, false, "none"),
                        ],
                    );
                    groups["mutability"] = Value::from("readOnly");
                    groups
                },
            ],
        )
    } else if urn.eq_ignore_ascii_case(schema_urns::GROUP) {
        (
            "Group",
            vec![
                attribute("displayName", "string", false, true, "server"),
                attribute("externalId", "string", false, false, "server"),
                sub_attributes(
                    attribute("members", "complex", true, false, "none"),
                    vec![
                        attribute("value", "string", false, false, "none"),
                        attribute("display", "string", false, false, "none"),
                        attribute("$ref", "reference", false, false, "none"),
                        attribute("type", "string", false, false, "none"),
                    ],
                ),
            ],
        )
    } else {
        return None;
    };
    let urn = if name == "User" {
        schema_urns::USER
    } else {
        schema_urns::GROUP
    };
    Some(json!({
        "schemas": [schema_urns::SCHEMA],
        "id": urn,
        "name": name,
        "description": format!("the core {name} schema, as much of it as Sasha keeps"),
        "attributes": attributes,
        "meta": { "resourceType": "Schema", "location": format!("/scim/v2/Schemas/{urn}") },
    }))
}

/// `GET /scim/v2/ServiceProviderConfig`.
pub async fn service_provider_config(
    State(accounts): State<Arc<Accounts>>,
    headers: HeaderMap,
) -> Response {
    match scim_actor(&accounts, &headers).await {
        Ok(_) => scim_json(StatusCode::OK, &service_provider_config_json()),
        Err(error) => error.into_response(),
    }
}

/// `GET /scim/v2/ResourceTypes`.
pub async fn resource_types(State(accounts): State<Arc<Accounts>>, headers: HeaderMap) -> Response {
    if let Err(error) = scim_actor(&accounts, &headers).await {
        return error.into_response();
    }
    let types: Vec<Value> = ["User", "Group"]
        .into_iter()
        .filter_map(resource_type_json)
        .collect();
    list_response(2, 0, types)
}

/// `GET /scim/v2/ResourceTypes/{id}`.
pub async fn resource_type(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(error) = scim_actor(&accounts, &headers).await {
        return error.into_response();
    }
    match resource_type_json(&id) {
        Some(found) => scim_json(StatusCode::OK, &found),
        None => ScimError::not_found("resource type", &id).into_response(),
    }
}

/// `GET /scim/v2/Schemas`.
pub async fn schemas(State(accounts): State<Arc<Accounts>>, headers: HeaderMap) -> Response {
    if let Err(error) = scim_actor(&accounts, &headers).await {
        return error.into_response();
    }
    let schemas: Vec<Value> = [schema_urns::USER, schema_urns::GROUP]
        .into_iter()
        .filter_map(schema_json)
        .collect();
    list_response(2, 0, schemas)
}

/// `GET /scim/v2/Schemas/{id}`.
pub async fn schema(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(error) = scim_actor(&accounts, &headers).await {
        return error.into_response();
    }
    match schema_json(&id) {
        Some(found) => scim_json(StatusCode::OK, &found),
        None => ScimError::not_found("schema", &id).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::groups::GROUP_ATTRIBUTES;
    use super::super::users::USER_ATTRIBUTES;
    use super::*;

    /// The schemas advertise exactly what the endpoints accept (besides the
    /// message members every body carries).
    #[test]
    fn the_schemas_name_exactly_the_attributes_kept() {
        for (urn, kept) in [
            (schema_urns::USER, USER_ATTRIBUTES),
            (schema_urns::GROUP, GROUP_ATTRIBUTES),
        ] {
            let schema = schema_json(urn).unwrap();
            let advertised: Vec<(String, Vec<String>)> = schema["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|attribute| {
                    let subs = attribute["subAttributes"]
                        .as_array()
                        .map(|subs| {
                            subs.iter()
                                .map(|sub| sub["name"].as_str().unwrap().to_owned())
                                .collect()
                        })
                        .unwrap_or_default();
                    (attribute["name"].as_str().unwrap().to_owned(), subs)
                })
                .collect();
            let accepted: Vec<(String, Vec<String>)> = kept
                .iter()
                .filter(|(name, _)| !matches!(*name, "schemas" | "id" | "meta"))
                .map(|(name, subs)| {
                    (
                        (*name).to_owned(),
                        subs.iter().map(|sub| (*sub).to_owned()).collect(),
                    )
                })
                .collect();
            let sorted = |mut list: Vec<(String, Vec<String>)>| {
                list.sort();
                list
            };
            assert_eq!(sorted(advertised), sorted(accepted), "{urn}");
        }
    }
}
