//! SCIM 2.0 provisioning over HTTP (RFC 7643, RFC 7644): `/scim/v2/Users`
//! and `/scim/v2/Groups` (list with `filter`, `startIndex` and `count`;
//! create; read, replace, PATCH and delete by id) and the discovery
//! documents (`/ServiceProviderConfig`, `/ResourceTypes`, `/Schemas`), for
//! the organisation's directory (Entra ID, Okta, Google, Keycloak) with a
//! bearer token an admin minted (`/api/scim/tokens`, `sasha admin scim
//! token`).
//!
//! The SCIM messages (User, Group, PatchOp, the list query) and the filter
//! and PATCH-path grammar are the `scim_v2` crate's; what this module keeps
//! by hand is which of those attributes Sasha stores (the core User's
//! userName, name, displayName, emails, active and externalId; the Group's
//! displayName, members and externalId: [`users::USER_ATTRIBUTES`],
//! [`groups::GROUP_ATTRIBUTES`]), applying a PATCH to them, and the answers'
//! JSON, which carries only those.
//!
//! Every refusal is a SCIM error (RFC 7644 §3.12: `schemas`, `status`,
//! `scimType`, `detail`) with the `diagnosticId` the log line names, in
//! `application/scim+json`: a wrong, missing or revoked token is 401, a
//! malformed body, an unknown attribute or a filter Sasha does not answer
//! 400, a taken name or externalId 409, an unknown id 404, a body over
//! [`sasha_proto::json_limits::SCIM_REQUEST`] 413.
//!
//! What it must never do: answer anything but the discovery documents
//! without a live SCIM token, accept a token anywhere else (a SCIM token is
//! not a Studio credential, and a Studio credential is not one here), parse
//! a body before bounding it, accept an attribute it would silently drop, or
//! touch a person the directory did not provision.

pub mod discovery;
pub mod groups;
pub mod patch;
pub mod tokens;
pub mod users;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sasha_proto::AppError;
use sasha_proto::json_limits::SCIM_REQUEST;
use scim_v2::filter::{Filter, MaybeFilter};
use scim_v2::models::errors::ScimType;
use scim_v2::models::others::TolerantListQuery;
use scim_v2::schema_urns;
use serde_json::{Value, json};
use studio_store::{StoreError, blocking};

use crate::accounts::Accounts;

/// The media type of every SCIM answer (RFC 7644 §3.1).
pub const SCIM_MEDIA_TYPE: &str = "application/scim+json";
/// Where SCIM is served, under the Studio origin.
pub const SCIM_BASE: &str = "/scim/v2";
/// The most resources one list answer holds (`filter.maxResults` of the
/// ServiceProviderConfig), and its page when the directory asks for none.
pub const MAX_SCIM_PAGE: i64 = 100;

/// SCIM's routes.
pub fn routes() -> Router<Arc<Accounts>> {
    Router::new()
        .route(
            "/scim/v2/ServiceProviderConfig",
            get(discovery::service_provider_config).fallback(method_not_allowed),
        )
        .route(
            "/scim/v2/ResourceTypes",
            get(discovery::resource_types).fallback(method_not_allowed),
        )
        .route(
            "/scim/v2/ResourceTypes/{id}",
            get(discovery::resource_type).fallback(method_not_allowed),
        )
        .route(
            "/scim/v2/Schemas",
            get(discovery::schemas).fallback(method_not_allowed),
        )
        .route(
            "/scim/v2/Schemas/{id}",
            get(discovery::schema).fallback(method_not_allowed),
        )
        .route(
            "/scim/v2/Users",
            get(users::list)
                .post(users::create)
                .fallback(method_not_allowed),
        )
        .route(
            "/scim/v2/Users/{id}",
            get(users::read)
                .put(users::replace)
                .patch(users::patch)
                .delete(users::delete)
                .fallback(method_not_allowed),
        )
        .route(
            "/scim/v2/Groups",
            get(groups::list)
                .post(groups::create)
                .fallback(method_not_allowed),
        )
        .route(
            "/scim/v2/Groups/{id}",
            get(groups::read)
                .put(groups::replace)
                .patch(groups::patch)
                .delete(groups::delete)
                .fallback(method_not_allowed),
        )
        .route("/scim/v2", get(unknown_endpoint).fallback(unknown_endpoint))
        .route(
            "/scim/v2/{*rest}",
            get(unknown_endpoint).fallback(unknown_endpoint),
        )
        // The bound is checked again, with the value and depth limits, before
        // parsing; this one keeps axum from buffering more than it.
        .layer(DefaultBodyLimit::max(SCIM_REQUEST.max_bytes))
        .merge(tokens::routes())
}

/// A SCIM error response (RFC 7644 §3.12), with the diagnostic id its log
/// line names.
#[derive(Debug)]
pub struct ScimError {
    status: StatusCode,
    scim_type: Option<ScimType>,
    detail: String,
    diagnostic_id: String,
}

impl ScimError {
    pub fn new(status: StatusCode, scim_type: Option<ScimType>, detail: impl Into<String>) -> Self {
        ScimError {
            status,
            scim_type,
            detail: detail.into(),
            diagnostic_id: uuid::Uuid::new_v4().to_string(),
        }
    }

    /// 400 with `scimType`.
    pub fn bad(scim_type: ScimType, detail: impl Into<String>) -> Self {
        ScimError::new(StatusCode::BAD_REQUEST, Some(scim_type), detail)
    }

    /// 404 for an id nobody has.
    pub fn not_found(what: &str, id: &str) -> Self {
        ScimError::new(
            StatusCode::NOT_FOUND,
            None,
            format!("no {what} has the id {id:?}"),
        )
    }

    /// The 401 of a missing, wrong or revoked token: the same whatever it was.
    pub fn unauthenticated() -> Self {
        ScimError::new(
            StatusCode::UNAUTHORIZED,
            None,
            "a live SCIM token is required: Authorization: Bearer <token an admin minted>",
        )
    }

    /// The envelope's error as SCIM's (a store or internal failure), keeping
    /// its status, message and diagnostic id.
    fn from_app(error: AppError) -> Self {
        ScimError {
            status: error.code.http_status(),
            scim_type: None,
            detail: error.message.clone(),
            diagnostic_id: error.diagnostic_id.clone(),
        }
    }
}

impl IntoResponse for ScimError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(diagnostic_id = %self.diagnostic_id, status = %self.status, detail = %self.detail, "scim request failed");
        } else {
            tracing::info!(diagnostic_id = %self.diagnostic_id, status = %self.status, detail = %self.detail, "scim request refused");
        }
        let mut body = json!({
            "schemas": [schema_urns::ERROR],
            "status": self.status.as_u16().to_string(),
            "detail": self.detail,
            "diagnosticId": self.diagnostic_id,
        });
        if let Some(scim_type) = &self.scim_type {
            body["scimType"] = Value::from(scim_type.as_str());
        }
        let mut response = scim_json(self.status, &body);
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"sasha-scim\""),
            );
        }
        response
    }
}

/// A store refusal as SCIM's error.
impl From<StoreError> for ScimError {
    fn from(error: StoreError) -> Self {
        match &error {
            StoreError::UsernameTaken => ScimError::new(
                StatusCode::CONFLICT,
                Some(ScimType::Uniqueness),
                "userName is already taken (by a person the directory provisioned, or one who signs in with a password here)",
            ),
            StoreError::ScimTaken(attribute) => ScimError::new(
                StatusCode::CONFLICT,
                Some(ScimType::Uniqueness),
                format!("{attribute} is already taken"),
            ),
            StoreError::InvalidUsername(reason) => ScimError::bad(
                ScimType::InvalidValue,
                format!("userName is not a Sasha user name: {reason}"),
            ),
            StoreError::InvalidScimValue(reason) => {
                ScimError::bad(ScimType::InvalidValue, reason.clone())
            }
            StoreError::LastAdmin => ScimError::bad(
                ScimType::Mutability,
                "this would leave no admin who can sign in; make another admin first (in the directory's admin group, or in Studio)",
            ),
            StoreError::NotAdmin => ScimError::unauthenticated(),
            StoreError::UnknownUser => ScimError::new(
                StatusCode::NOT_FOUND,
                None,
                "no person the directory provisioned has that id",
            ),
            StoreError::UnknownScimGroup => {
                ScimError::new(StatusCode::NOT_FOUND, None, "no group has that id")
            }
            _ => ScimError::from_app(studio_store::store_error(error)),
        }
    }
}

/// `body` as SCIM JSON with `status`.
pub fn scim_json(status: StatusCode, body: &Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(SCIM_MEDIA_TYPE),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The audit actor of the request's live SCIM token, or the 401.
pub async fn scim_actor(accounts: &Accounts, headers: &HeaderMap) -> Result<String, ScimError> {
    let secret = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .filter(|token| !token.is_empty())
        .ok_or_else(ScimError::unauthenticated)?
        .to_owned();
    let store = accounts.store.clone();
    match blocking(move || store.scim_token_actor(&secret)).await {
        Ok(Some(actor)) => Ok(actor),
        Ok(None) => Err(ScimError::unauthenticated()),
        Err(error) => Err(ScimError::from_app(error)),
    }
}

/// Runs a store call on the blocking pool, its refusal as SCIM's.
pub async fn run<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, ScimError> {
    run_scim(move || call().map_err(ScimError::from)).await
}

/// Runs a store call whose own step may refuse as SCIM does (a PATCH
/// applied inside the store's transaction) on the blocking pool.
pub async fn run_scim<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, ScimError> + Send + 'static,
) -> Result<T, ScimError> {
    match tokio::task::spawn_blocking(call).await {
        Ok(result) => result,
        Err(_) => Err(ScimError::from_app(AppError::from_code(
            sasha_proto::ErrorCode::Internal,
        ))),
    }
}

/// A request body as JSON: bounded first, then parsed; a body axum refused
/// to buffer (too large) is SCIM's 413 too.
pub fn json_body(body: Result<Bytes, BytesRejection>) -> Result<Value, ScimError> {
    let too_large = || {
        ScimError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            None,
            format!(
                "the request body is larger than SCIM accepts ({} bytes, {} values, depth {})",
                SCIM_REQUEST.max_bytes, SCIM_REQUEST.max_values, SCIM_REQUEST.max_depth
            ),
        )
    };
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ScimError::bad(ScimType::InvalidSyntax, rejection.body_text())
        }
    })?;
    sasha_proto::json_limits::check(&body, &SCIM_REQUEST).map_err(|_| too_large())?;
    serde_json::from_slice(&body).map_err(|error| {
        ScimError::bad(
            ScimType::InvalidSyntax,
            format!("the body is not JSON: {error}"),
        )
    })
}

/// Parses `value` as the `scim_v2` message `T`, its refusal as
/// `invalidSyntax` (a missing or mistyped member).
pub fn message<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ScimError> {
    serde_json::from_value(value).map_err(|error| {
        ScimError::bad(
            ScimType::InvalidSyntax,
            format!("the body is not a valid SCIM message: {error}"),
        )
    })
}

/// Refuses a body whose `schemas` does not name `urn` (RFC 7644 §3.3), or
/// names one Sasha does not keep.
pub fn require_schemas(
    object: &serde_json::Map<String, Value>,
    urn: &str,
) -> Result<(), ScimError> {
    let schemas = object.get("schemas").and_then(Value::as_array);
    let Some(schemas) = schemas else {
        return Err(ScimError::bad(
            ScimType::InvalidSyntax,
            format!("schemas must be an array naming {urn}"),
        ));
    };
    let mut named = false;
    for schema in schemas {
        match schema.as_str() {
            Some(schema) if schema.eq_ignore_ascii_case(urn) => named = true,
            Some(other) => {
                return Err(ScimError::bad(
                    ScimType::InvalidValue,
                    format!(
                        "schema {other:?} is not one this service provider keeps; it keeps {urn} only"
                    ),
                ));
            }
            None => {
                return Err(ScimError::bad(
                    ScimType::InvalidSyntax,
                    "schemas must be an array of strings",
                ));
            }
        }
    }
    if !named {
        return Err(ScimError::bad(
            ScimType::InvalidSyntax,
            format!("schemas must name {urn}"),
        ));
    }
    Ok(())
}

/// A list request's paging and filter.
pub struct ListRequest {
    pub filter: Option<Filter>,
    /// 0-based.
    pub start: i64,
    pub count: i64,
    /// `excludedAttributes` names the big multi-valued attribute
    /// (`members`, `groups`).
    pub exclude_members: bool,
}

/// The list query: paging as RFC 7644 §3.4.2.4 says (a `startIndex` below
/// 1 is 1, a negative `count` 0), at most [`MAX_SCIM_PAGE`] a page; a
/// filter the grammar refuses is `invalidFilter`.
pub fn list_request(
    query: Result<Query<TolerantListQuery>, QueryRejection>,
) -> Result<ListRequest, ScimError> {
    let Query(query) =
        query.map_err(|rejection| ScimError::bad(ScimType::InvalidValue, rejection.body_text()))?;
    let filter = match &query.filter {
        None => None,
        Some(MaybeFilter::Valid(filter)) => Some(filter.clone()),
        Some(MaybeFilter::Invalid(invalid)) => {
            return Err(ScimError::bad(
                ScimType::InvalidFilter,
                format!("the filter is not a SCIM filter: {invalid}"),
            ));
        }
    };
    let exclude_members = query.excluded_attributes.as_deref().is_some_and(|names| {
        names.split(',').any(|name| {
            matches!(
                name.trim().to_ascii_lowercase().as_str(),
                "members" | "groups"
            )
        })
    });
    Ok(ListRequest {
        filter,
        start: query.effective_start_index() - 1,
        count: query
            .effective_count()
            .unwrap_or(MAX_SCIM_PAGE)
            .clamp(0, MAX_SCIM_PAGE),
        exclude_members,
    })
}

/// A list answer (RFC 7644 §3.4.2).
pub fn list_response(total: i64, start: i64, resources: Vec<Value>) -> Response {
    scim_json(
        StatusCode::OK,
        &json!({
            "schemas": [schema_urns::LIST_RESPONSE],
            "totalResults": total,
            "startIndex": start + 1,
            "itemsPerPage": resources.len(),
            "Resources": resources,
        }),
    )
}

/// Unix seconds as SCIM's dateTime (RFC 3339, UTC).
pub fn date_time(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// A weak version of a resource from when it last changed (`meta.version`
/// and the ETag), so a directory can tell a changed resource.
pub fn version(updated_at: i64) -> String {
    format!("W/\"{updated_at}\"")
}

async fn method_not_allowed() -> Response {
    ScimError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        None,
        "this SCIM endpoint does not answer that method",
    )
    .into_response()
}

async fn unknown_endpoint(
    accounts: axum::extract::State<Arc<Accounts>>,
    headers: HeaderMap,
) -> Response {
    // Not even the shape of what exists is told without a token.
    if let Err(error) = scim_actor(&accounts, &headers).await {
        return error.into_response();
    }
    ScimError::new(
        StatusCode::NOT_FOUND,
        None,
        "no such SCIM endpoint; this service provider serves /Users, /Groups, /ServiceProviderConfig, /ResourceTypes and /Schemas",
    )
    .into_response()
}
