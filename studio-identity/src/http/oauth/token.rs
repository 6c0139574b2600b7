//! `POST /oauth/token` (the `authorization_code` and `refresh_token`
//! grants) and `POST /oauth/revoke` (RFC 7009), with the client
//! authentication they share: HTTP Basic, or `client_id` (+ `client_secret`)
//! in the form.
//!
//! These endpoints must never issue a token for a resource other than the
//! MCP endpoint, nor to a confidential client without its secret; a refresh
//! narrows scopes, never widens them (the store decides). They read no
//! cookie.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::json;

use super::params::{content_type_is, parse_params, scope_text};
use super::{MAX_FORM_BYTES, OAuthError, cors};
use crate::accounts::Accounts;
use crate::http::answers::no_store;
use studio_store::blocking;
use studio_store::{ClientAuthMethod, CodeExchange, IssuedTokens, Scope};

/// Reads a form body and authenticates the client: HTTP Basic, or
/// `client_id` (+ `client_secret`) in the body. A confidential client must
/// present its secret; a public client is identified by its id alone.
async fn client_form(
    accounts: &Accounts,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(String, HashMap<String, String>), OAuthError> {
    if body.len() > MAX_FORM_BYTES {
        return Err(OAuthError::new(
            "invalid_request",
            "the request is larger than 16 KiB",
        ));
    }
    if !content_type_is(headers, "application/x-www-form-urlencoded") {
        return Err(OAuthError::new(
            "invalid_request",
            "the request must be application/x-www-form-urlencoded",
        ));
    }
    let mut params = parse_params(body)?;
    let basic = basic_credentials(headers)?;
    let (client_id, secret) = match basic {
        Some((id, secret)) => {
            if params.get("client_id").is_some_and(|sent| *sent != id) {
                return Err(OAuthError::new(
                    "invalid_request",
                    "client_id differs from the Authorization header",
                ));
            }
            (id, Some(secret))
        }
        None => (
            params.get("client_id").cloned().ok_or_else(|| {
                OAuthError::new("invalid_client", "the client is not identified (client_id)")
            })?,
            params.remove("client_secret"),
        ),
    };
    let store = accounts.store.clone();
    let lookup = client_id.clone();
    let client = blocking(move || store.oauth_client(&lookup))
        .await
        .map_err(|error| OAuthError::from_store(&error))?
        .ok_or_else(|| OAuthError::new("invalid_client", "the client is not registered"))?;
    if client.auth_method != ClientAuthMethod::None {
        let Some(secret) = secret else {
            return Err(OAuthError::new(
                "invalid_client",
                "this client authenticates with its client secret",
            ));
        };
        let store = accounts.store.clone();
        let id = client_id.clone();
        let matches = blocking(move || store.oauth_client_secret_matches(&id, &secret))
            .await
            .map_err(|error| OAuthError::from_store(&error))?;
        if !matches {
            return Err(OAuthError::new(
                "invalid_client",
                "the client secret is not valid",
            ));
        }
    }
    Ok((client_id, params))
}

pub(super) fn basic_credentials(
    headers: &HeaderMap,
) -> Result<Option<(String, String)>, OAuthError> {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
    else {
        return Ok(None);
    };
    let Some(encoded) = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))
    else {
        return Ok(None);
    };
    let invalid = || OAuthError::new("invalid_client", "the Basic credentials are malformed");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| invalid())?;
    let text = String::from_utf8(decoded).map_err(|_| invalid())?;
    let (id, secret) = text.split_once(':').ok_or_else(invalid)?;
    // RFC 6749 §2.3.1: both parts are form-urlencoded.
    let decode = |part: &str| {
        url::form_urlencoded::parse(format!("v={part}").as_bytes())
            .next()
            .map(|(_, value)| value.into_owned())
            .unwrap_or_default()
    };
    Ok(Some((decode(id), decode(secret))))
}

pub(crate) async fn token(
    State(accounts): State<Arc<Accounts>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match issue(&accounts, &headers, &body).await {
        Ok(tokens) => {
            let response = Json(json!({
                "access_token": tokens.access_token,
                "token_type": "Bearer",
                "expires_in": tokens.expires_in,
                "refresh_token": tokens.refresh_token,
                "scope": scope_text(&tokens.scopes),
            }));
            cors(no_store((
                [(header::PRAGMA, HeaderValue::from_static("no-cache"))],
                response,
            )))
        }
        Err(error) => error.into_response(),
    }
}

async fn issue(
    accounts: &Accounts,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<IssuedTokens, OAuthError> {
    let (client_id, params) = client_form(accounts, headers, body).await?;
    let required = |name: &str| {
        params.get(name).cloned().ok_or_else(|| {
            OAuthError::new(
                "invalid_request",
                format!("the parameter {name} is required"),
            )
        })
    };
    let resource = params
        .get("resource")
        .map(|resource| resource.trim_end_matches('/').to_owned());
    if resource
        .as_deref()
        .is_some_and(|resource| resource != accounts.oauth.resource)
    {
        return Err(OAuthError::new(
            "invalid_target",
            "tokens are issued only for this server's MCP resource",
        ));
    }
    let store = accounts.store.clone();
    let outcome = match params.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let (code, redirect_uri, verifier) = (
                required("code")?,
                required("redirect_uri")?,
                required("code_verifier")?,
            );
            blocking(move || {
                store.oauth_exchange_code(&CodeExchange {
                    client_id: &client_id,
                    code: &code,
                    redirect_uri: &redirect_uri,
                    code_verifier: &verifier,
                    resource: resource.as_deref(),
                })
            })
            .await
        }
        Some("refresh_token") => {
            let refresh = required("refresh_token")?;
            let scope = match params.get("scope") {
                None => None,
                Some(text) => Some(parse_exact_scopes(text)?),
            };
            blocking(move || {
                store.oauth_refresh(&client_id, &refresh, scope.as_ref(), resource.as_deref())
            })
            .await
        }
        Some(other) => {
            return Err(OAuthError::new(
                "unsupported_grant_type",
                format!(
                    "grant_type {other:?} is not supported; use authorization_code or refresh_token"
                ),
            ));
        }
        None => return Err(OAuthError::new("invalid_request", "grant_type is required")),
    };
    outcome
        .map_err(|error| OAuthError::from_store(&error))?
        .map_err(OAuthError::from_refusal)
}

/// A refresh request's `scope`: every name must be a known scope.
fn parse_exact_scopes(text: &str) -> Result<BTreeSet<Scope>, OAuthError> {
    let scopes = text
        .split_ascii_whitespace()
        .map(|name| {
            name.parse::<Scope>()
                .map_err(|_| OAuthError::new("invalid_scope", format!("unknown scope {name:?}")))
        })
        .collect::<Result<BTreeSet<_>, _>>()?;
    if scopes.is_empty() {
        return Err(OAuthError::new("invalid_scope", "scope is empty"));
    }
    Ok(scopes)
}

pub(crate) async fn revoke(
    State(accounts): State<Arc<Accounts>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (client_id, params) = match client_form(&accounts, &headers, &body).await {
        Ok(found) => found,
        Err(error) => return error.into_response(),
    };
    let Some(token) = params.get("token").cloned() else {
        return OAuthError::new("invalid_request", "the parameter token is required")
            .into_response();
    };
    let store = accounts.store.clone();
    match blocking(move || store.oauth_revoke_token(&client_id, &token)).await {
        Ok(()) => cors(StatusCode::OK.into_response()),
        Err(error) => OAuthError::from_store(&error).into_response(),
    }
}
