//! The consent card's API: `GET /api/oauth/requests/{id}` (what the card
//! shows) and `POST …/approve` and `…/deny` (the person's decision, which
//! sends the browser back to the client with a code or `access_denied`).
//!
//! It answers a signed-in browser session only, and same-origin JSON for a
//! decision. It must never grant a scope MCP clients are not offered or the
//! person's role may not hold, and a refused decision never consumes the
//! parked request.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use sasha_proto::{AppError, ErrorCode};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::params::{redirect_host, redirect_with, scope_text};
use super::{offered, scope_description, signed_in_change};
use crate::accounts::Accounts;
use crate::http::answers::{hidden_not_found, no_store, parse_body};
use crate::http::caller::session_user;
use studio_store::blocking;
use studio_store::{Consent, Scope, UserRole};

/// `GET /api/oauth/requests/{id}`: what the consent card shows.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsentRequest {
    request_id: String,
    client: ConsentClient,
    /// Where the person returns, exactly as the client sent it.
    redirect_uri: String,
    /// Its host and port, to show prominently.
    redirect_host: String,
    /// The MCP resource the tokens will be for.
    resource: String,
    requested_scopes: Vec<String>,
    /// The scopes the signed-in person's role may hold.
    offered_scopes: Vec<OfferedScope>,
    /// Requested scopes the role may not hold (shown, not offered).
    unavailable_scopes: Vec<String>,
    /// Unix seconds.
    expires_at: i64,
}

#[derive(Serialize, ToSchema)]
pub struct ConsentClient {
    id: String,
    /// The name the client registered (self-declared).
    name: String,
}

#[derive(Serialize, ToSchema)]
pub struct OfferedScope {
    scope: String,
    description: String,
    requested: bool,
}

/// The answer to approve or deny: where the browser goes next.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    redirect_to: String,
}

#[utoipa::path(tag = "oauth", get, path = "/api/oauth/requests/{requestId}", params(("requestId" = String, Path)), responses(
    (status = 200, description = "the parked authorization request, for a signed-in browser session; Cache-Control: no-store", body = ConsentRequest),
    (status = 401, description = "anonymous", body = crate::http::answers::ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session, or an unknown, used or expired request", body = crate::http::answers::ErrorEnvelope)))]
pub async fn request_details(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let principal = match session_user(&accounts, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let pending = match accounts.oauth.peek(&accounts.store, &id).await {
        Ok(Some(pending)) => pending,
        Ok(None) => return hidden_not_found().into_response(),
        Err(error) => return error.into_response(),
    };
    let role = principal.user.role;
    let names = |scopes: &mut dyn Iterator<Item = &Scope>| {
        scopes.map(|scope| scope.as_str().to_owned()).collect()
    };
    no_store(Json(ConsentRequest {
        request_id: id,
        redirect_host: redirect_host(&pending.redirect_uri),
        redirect_uri: pending.redirect_uri,
        resource: accounts.oauth.resource.clone(),
        requested_scopes: names(&mut pending.requested.iter()),
        offered_scopes: offered()
            .filter(|scope| role.allows(*scope))
            .map(|scope| OfferedScope {
                scope: scope.as_str().to_owned(),
                description: scope_description(scope).to_owned(),
                requested: pending.requested.contains(&scope),
            })
            .collect(),
        unavailable_scopes: names(&mut pending.requested.iter().filter(|s| !role.allows(**s))),
        expires_at: pending.expires_at,
        client: ConsentClient {
            id: pending.client_id,
            name: pending.client_name,
        },
    }))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveBody {
    /// The scopes the person chose: `apps:invoke`, `apps:write` (admin and
    /// staff only) and `apps:author`, the last two with `apps:invoke`.
    scopes: Vec<String>,
}

/// The scopes a person chose, checked against what MCP clients are offered
/// and the person's role.
pub(super) fn chosen_scopes(names: &[String], role: UserRole) -> Result<BTreeSet<Scope>, AppError> {
    let mut chosen = BTreeSet::new();
    for name in names {
        let scope: Scope = name
            .parse()
            .ok()
            .filter(|scope| offered().any(|offered| offered == *scope))
            .ok_or_else(|| {
                AppError::new(
                    ErrorCode::InputInvalid,
                    format!("{name:?} is not a scope MCP clients can be given; choose apps:invoke, apps:write or apps:author"),
                )
            })?;
        if !role.allows(scope) {
            return Err(AppError::new(
                ErrorCode::AccessDenied,
                format!("a {role} user cannot hold {scope}; only admin and staff can"),
            ));
        }
        chosen.insert(scope);
    }
    if chosen.is_empty() {
        return Err(AppError::new(
            ErrorCode::InputInvalid,
            "choose at least one scope to allow",
        ));
    }
    for needs_invoke in [Scope::AppsWrite, Scope::AppsAuthor] {
        if chosen.contains(&needs_invoke) && !chosen.contains(&Scope::AppsInvoke) {
            return Err(AppError::new(
                ErrorCode::InputInvalid,
                format!("{needs_invoke} works only together with apps:invoke"),
            ));
        }
    }
    Ok(chosen)
}

#[utoipa::path(tag = "oauth", post, path = "/api/oauth/requests/{requestId}/approve", params(("requestId" = String, Path)), request_body = ApproveBody, responses(
    (status = 200, description = "consent recorded; the browser goes to redirectTo, which carries the code, state and iss", body = Decision),
    (status = 400, description = "no scope, an unknown scope, or apps:write without apps:invoke; the request stays usable", body = crate::http::answers::ErrorEnvelope),
    (status = 401, description = "anonymous", body = crate::http::answers::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin, or a scope the role may not hold; the request stays usable", body = crate::http::answers::ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session, or an unknown, used or expired request", body = crate::http::answers::ErrorEnvelope)))]
pub async fn approve(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let principal = match signed_in_change(&accounts, &method, &headers, true).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let body: ApproveBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let scopes = match chosen_scopes(&body.scopes, principal.user.role) {
        Ok(scopes) => scopes,
        Err(error) => return error.into_response(),
    };
    // Only a valid decision consumes the request, so a refused one loses nothing.
    let pending = match accounts.oauth.take(&accounts.store, &id).await {
        Ok(Some(pending)) => pending,
        Ok(None) => return hidden_not_found().into_response(),
        Err(error) => return error.into_response(),
    };
    let store = accounts.store.clone();
    let (user_id, resource) = (principal.user.id.clone(), accounts.oauth.resource.clone());
    let (client_id, redirect_uri, challenge) = (
        pending.client_id.clone(),
        pending.redirect_uri.clone(),
        pending.code_challenge.clone(),
    );
    let granted = scopes.clone();
    let code = match blocking(move || {
        store.oauth_consent(&Consent {
            client_id: &client_id,
            user_id: &user_id,
            scopes: &granted,
            resource: &resource,
            redirect_uri: &redirect_uri,
            code_challenge: &challenge,
        })
    })
    .await
    {
        Ok(code) => code,
        Err(error) => return error.into_response(),
    };
    let mut pairs = vec![("code", code.as_str())];
    if let Some(state) = &pending.state {
        pairs.push(("state", state));
    }
    pairs.push(("iss", &accounts.oauth.issuer));
    tracing::info!(user = %principal.user.id, client = %pending.client_id, scopes = %scope_text(&scopes), "oauth consent given");
    decision(&redirect_with(&pending.redirect_uri, &pairs))
}

#[utoipa::path(tag = "oauth", post, path = "/api/oauth/requests/{requestId}/deny", params(("requestId" = String, Path)), responses(
    (status = 200, description = "declined; the browser goes to redirectTo, which carries error=access_denied, state and iss", body = Decision),
    (status = 401, description = "anonymous", body = crate::http::answers::ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = crate::http::answers::ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session, or an unknown, used or expired request", body = crate::http::answers::ErrorEnvelope)))]
pub async fn deny(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = signed_in_change(&accounts, &method, &headers, false).await {
        return response;
    }
    let pending = match accounts.oauth.take(&accounts.store, &id).await {
        Ok(Some(pending)) => pending,
        Ok(None) => return hidden_not_found().into_response(),
        Err(error) => return error.into_response(),
    };
    let mut pairs = vec![
        ("error", "access_denied"),
        ("error_description", "the user declined the connection"),
    ];
    if let Some(state) = &pending.state {
        pairs.push(("state", state));
    }
    pairs.push(("iss", &accounts.oauth.issuer));
    decision(&redirect_with(&pending.redirect_uri, &pairs))
}

fn decision(redirect_to: &str) -> Response {
    no_store(Json(Decision {
        redirect_to: redirect_to.to_owned(),
    }))
}
