//! The answers the Studio API shares: `no-store` for answers that depend on
//! who asks, the hidden 404, the 401 with its challenge, a throttle's 429,
//! bounded JSON bodies and the error envelope's schema.
//!
//! What it must never do: tell an anonymous caller, a bad credential, a
//! denied app and an unknown one apart (the 401 and the hidden 404 are
//! identical whatever was asked), or parse a body before bounding what it
//! may expand into.

use std::time::Duration;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use sasha_proto::{AppError, ErrorCode};
use serde::Serialize;
use utoipa::ToSchema;

use crate::throttle::{retry_after_seconds, try_again_in};

/// `response` with `Cache-Control: no-store`: answers that depend on who asks.
pub fn no_store(response: impl IntoResponse) -> Response {
    let mut response = response.into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The hidden 404: identical for every case it covers.
pub fn hidden_not_found() -> AppError {
    let mut error = AppError::from_code(ErrorCode::NotFound);
    error.diagnostic_id = uuid_nil();
    error
}

/// The 401 of an anonymous request, with its `WWW-Authenticate` challenge.
pub fn unauthenticated() -> Response {
    let mut error = AppError::new(ErrorCode::Unauthenticated, "sign in to continue");
    error.diagnostic_id = uuid_nil();
    let mut response = error.into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"sasha\""),
    );
    response
}

pub(crate) fn uuid_nil() -> String {
    "00000000-0000-0000-0000-000000000000".to_owned()
}

/// The retryable 429 `APP_BUSY` of a throttle, with `Retry-After`.
pub(crate) fn throttled(wait: Duration, what: &str) -> Response {
    let mut response =
        AppError::new(ErrorCode::Busy, format!("{what}; {}", try_again_in(wait))).into_response();
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(retry_after_seconds(wait)),
    );
    response
}

/// Parses a JSON body into `T`, refusing unknown fields with a clear message.
/// What the body may expand into is bounded first
/// ([`sasha_proto::json_limits::STUDIO_API`]; `APP_RESOURCE_LIMIT`, 413).
pub fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Response> {
    parse_body_within(body, &sasha_proto::json_limits::STUDIO_API)
}

/// [`parse_body`] within other `limits` (App Studio's package bodies).
pub fn parse_body_within<T: serde::de::DeserializeOwned>(
    body: &[u8],
    limits: &sasha_proto::json_limits::JsonLimits,
) -> Result<T, Response> {
    sasha_proto::json_limits::check(body, limits)
        .map_err(|broken| broken.to_app_error().into_response())?;
    serde_json::from_slice(body).map_err(|error| {
        AppError::new(
            ErrorCode::InputInvalid,
            format!(
                "the request body is invalid: {}",
                error.to_string().to_lowercase()
            ),
        )
        .into_response()
    })
}

/// The closed error envelope every failure uses.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorEnvelope {
    /// One `APP_*` code of the closed registry.
    code: String,
    message: String,
    retryable: bool,
    diagnostic_id: String,
    #[schema(value_type = Option<Object>)]
    details: Option<serde_json::Value>,
}
