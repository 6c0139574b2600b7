//! `POST /oauth/register`: RFC 7591 dynamic client registration. It is
//! anonymous, as MCP clients need, budgeted per client address
//! ([`crate::authorization::REGISTRATION_BUDGET`]) and bounded in number by the store.
//!
//! It must never register a redirect URI that [`super::params`] refuses, a
//! grant or response type the server does not serve, or read a cookie.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::params::{content_type_is, redirect_uri_problem};
use super::{MAX_CLIENT_NAME_CHARS, MAX_FORM_BYTES, MAX_REDIRECT_URIS, OAuthError, cors};
use crate::accounts::Accounts;
use crate::http::answers::no_store;
use crate::throttle::{ClientAddress, try_again_in};
use studio_store::blocking;
use studio_store::{ClientAuthMethod, RegisteredClient};

#[derive(Deserialize)]
struct RegistrationRequest {
    redirect_uris: Option<Vec<String>>,
    client_name: Option<String>,
    token_endpoint_auth_method: Option<String>,
    grant_types: Option<Vec<String>>,
    response_types: Option<Vec<String>>,
}

fn metadata_error(description: impl Into<String>) -> OAuthError {
    OAuthError::new("invalid_client_metadata", description)
}

/// The client a registration request's JSON body asks for, by the rules
/// RFC 7591 leaves to the server: 1 to 10 redirect URIs [`redirect_uri_problem`]
/// accepts, a printable name of at most 100 characters, a supported
/// authentication method, grant and response types. Before any budget or
/// store, so it is a pure function of the bytes (the fuzz targets call it).
#[derive(Debug)]
pub struct Registration {
    pub name: String,
    pub redirect_uris: Vec<String>,
    pub method: ClientAuthMethod,
}

/// Reads a registration request (see [`Registration`]).
pub fn registration(body: &[u8]) -> Result<Registration, OAuthError> {
    sasha_proto::json_limits::check(body, &sasha_proto::json_limits::STUDIO_API)
        .map_err(|broken| metadata_error(broken.to_string()))?;
    let request: RegistrationRequest = serde_json::from_slice(body)
        .map_err(|error| metadata_error(format!("the registration request is invalid: {error}")))?;
    let uris = request.redirect_uris.unwrap_or_default();
    if uris.is_empty() || uris.len() > MAX_REDIRECT_URIS {
        return Err(OAuthError::new(
            "invalid_redirect_uri",
            "redirect_uris must list 1 to 10 redirect URIs",
        ));
    }
    if let Some(problem) = uris.iter().find_map(|uri| redirect_uri_problem(uri)) {
        return Err(OAuthError::new("invalid_redirect_uri", problem));
    }
    let name = request
        .client_name
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "Unnamed client".to_owned());
    if name.chars().count() > MAX_CLIENT_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(metadata_error(
            "client_name has at most 100 characters and no control characters",
        ));
    }
    // RFC 7591 §2: the default is client_secret_basic.
    let method_text = request
        .token_endpoint_auth_method
        .as_deref()
        .unwrap_or("client_secret_basic");
    let method = ClientAuthMethod::parse(method_text).ok_or_else(|| {
        metadata_error(format!(
            "token_endpoint_auth_method {method_text:?} is not supported; use none, client_secret_post or client_secret_basic"
        ))
    })?;
    for grant in request.grant_types.iter().flatten() {
        if grant != "authorization_code" && grant != "refresh_token" {
            return Err(metadata_error(format!(
                "grant type {grant:?} is not supported; use authorization_code and refresh_token"
            )));
        }
    }
    if request.response_types.iter().flatten().any(|r| r != "code") {
        return Err(metadata_error("only the response type code is supported"));
    }
    Ok(Registration {
        name,
        redirect_uris: uris,
        method,
    })
}

pub(crate) async fn register(
    State(accounts): State<Arc<Accounts>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match register_client(&accounts, &headers, &body).await {
        Ok(response) => cors(response),
        Err(error) => error.into_response(),
    }
}

async fn register_client(
    accounts: &Accounts,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, OAuthError> {
    if body.len() > MAX_FORM_BYTES {
        return Err(metadata_error(
            "the registration request is larger than 16 KiB",
        ));
    }
    if !content_type_is(headers, "application/json") {
        return Err(OAuthError::new(
            "invalid_request",
            "the registration request must be application/json",
        ));
    }
    let Registration {
        name,
        redirect_uris: uris,
        method,
    } = registration(body)?;
    if let Err(wait) = accounts
        .oauth
        .admit_registration(&accounts.store, ClientAddress::of(headers))
        .await
        .map_err(|error| OAuthError::from_store(&error))?
    {
        let mut error = OAuthError::new(
            "temporarily_unavailable",
            format!(
                "too many client registrations from your address; {}",
                try_again_in(wait)
            ),
        );
        error.retry_after = Some(wait);
        return Err(error);
    }
    let store = accounts.store.clone();
    let (stored_name, stored_uris) = (name.clone(), uris.clone());
    let registered =
        blocking(move || store.oauth_register_client(&stored_name, &stored_uris, method))
            .await
            .map_err(|error| OAuthError::from_store(&error))?
            .map_err(OAuthError::from_refusal)?;
    let RegisteredClient {
        client,
        client_secret,
    } = registered;
    let mut body = json!({
        "client_id": client.client_id,
        "client_id_issued_at": client.created_at,
        "client_name": client.client_name,
        "redirect_uris": client.redirect_uris,
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method.as_str(),
    });
    if let (Some(secret), Value::Object(map)) = (client_secret, &mut body) {
        map.insert("client_secret".into(), secret.into());
        map.insert("client_secret_expires_at".into(), 0.into());
    }
    Ok(no_store((StatusCode::CREATED, Json(body))))
}
