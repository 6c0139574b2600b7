//! The closed error registry.
//!
//! Every failure that leaves a process outward (HTTP, MCP, the browser) is one of
//! these codes rendered as `{code, message, retryable, diagnosticId, details?}`.
//! The message is safe to show; raw SQL, file paths and internal errors never go
//! into it. The detail is logged once, where the error is handled, under the same
//! `diagnosticId` the user sees.
//!
//! Across a gRPC hop the envelope travels in the status details (a prost
//! [`crate::pb::ErrorEnvelope`]), so the caller gets back the same code,
//! retryability and diagnostic id the callee produced.

use std::fmt;

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use prost::Message;
use serde::Serialize;

use crate::pb::ErrorEnvelope;

/// One code of the closed registry. The spec's Milestone 1 and 2 codes, plus
/// `APP_UNAUTHENTICATED` and `APP_INTERNAL` (see ARCHITECTURE.md, "Errors").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum ErrorCode {
    #[serde(rename = "APP_NOT_READY")]
    NotReady,
    #[serde(rename = "APP_CAPABILITY_DENIED")]
    CapabilityDenied,
    #[serde(rename = "APP_OPERATION_UNAVAILABLE")]
    OperationUnavailable,
    #[serde(rename = "APP_INPUT_INVALID")]
    InputInvalid,
    #[serde(rename = "APP_RESOURCE_LIMIT")]
    ResourceLimit,
    #[serde(rename = "APP_BUSY")]
    Busy,
    #[serde(rename = "APP_CHAT_UNAVAILABLE")]
    ChatUnavailable,
    #[serde(rename = "APP_CHAT_FAILED")]
    ChatFailed,
    #[serde(rename = "APP_UPLOAD_FAILED")]
    UploadFailed,
    #[serde(rename = "APP_TIMEOUT")]
    Timeout,
    #[serde(rename = "APP_CANCELLED")]
    Cancelled,
    #[serde(rename = "APP_REVISION_UNAVAILABLE")]
    RevisionUnavailable,
    #[serde(rename = "APP_NOT_FOUND")]
    NotFound,
    #[serde(rename = "APP_PATH_INVALID")]
    PathInvalid,
    #[serde(rename = "APP_ACTION_UNAVAILABLE")]
    ActionUnavailable,
    #[serde(rename = "APP_ACTION_INVALID")]
    ActionInvalid,
    #[serde(rename = "APP_ACCESS_DENIED")]
    AccessDenied,
    #[serde(rename = "APP_RECORD_NOT_FOUND")]
    RecordNotFound,
    #[serde(rename = "APP_CONFLICT")]
    Conflict,
    #[serde(rename = "APP_IDEMPOTENCY_MISMATCH")]
    IdempotencyMismatch,
    #[serde(rename = "APP_FIELD_UNDECLARED")]
    FieldUndeclared,
    #[serde(rename = "APP_SCHEMA_INCOMPATIBLE")]
    SchemaIncompatible,
    #[serde(rename = "APP_MIGRATION_FAILED")]
    MigrationFailed,
    #[serde(rename = "APP_CONFIRMATION_REQUIRED")]
    ConfirmationRequired,
    #[serde(rename = "APP_DATABASE_UNAVAILABLE")]
    DatabaseUnavailable,
    #[serde(rename = "APP_UNAUTHENTICATED")]
    Unauthenticated,
    #[serde(rename = "APP_INTERNAL")]
    Internal,
}

/// How one code behaves: its wire name, HTTP status, gRPC code, retryability and
/// the safe default message.
struct Entry {
    name: &'static str,
    status: u16,
    grpc: tonic::Code,
    retryable: bool,
    message: &'static str,
}

impl ErrorCode {
    /// Every code, in registry order.
    pub const ALL: [ErrorCode; 27] = [
        ErrorCode::NotReady,
        ErrorCode::CapabilityDenied,
        ErrorCode::OperationUnavailable,
        ErrorCode::InputInvalid,
        ErrorCode::ResourceLimit,
        ErrorCode::Busy,
        ErrorCode::ChatUnavailable,
        ErrorCode::ChatFailed,
        ErrorCode::UploadFailed,
        ErrorCode::Timeout,
        ErrorCode::Cancelled,
        ErrorCode::RevisionUnavailable,
        ErrorCode::NotFound,
        ErrorCode::PathInvalid,
        ErrorCode::ActionUnavailable,
        ErrorCode::ActionInvalid,
        ErrorCode::AccessDenied,
        ErrorCode::RecordNotFound,
        ErrorCode::Conflict,
        ErrorCode::IdempotencyMismatch,
        ErrorCode::FieldUndeclared,
        ErrorCode::SchemaIncompatible,
        ErrorCode::MigrationFailed,
        ErrorCode::ConfirmationRequired,
        ErrorCode::DatabaseUnavailable,
        ErrorCode::Unauthenticated,
        ErrorCode::Internal,
    ];

    fn entry(self) -> Entry {
        use tonic::Code as G;
        let (name, status, grpc, retryable, message) = match self {
            ErrorCode::NotReady => (
                "APP_NOT_READY",
                503,
                G::Unavailable,
                true,
                "the service is not ready for this request yet",
            ),
            ErrorCode::CapabilityDenied => (
                "APP_CAPABILITY_DENIED",
                403,
                G::PermissionDenied,
                false,
                "this app did not declare the capability it tried to use",
            ),
            ErrorCode::OperationUnavailable => (
                "APP_OPERATION_UNAVAILABLE",
                501,
                G::Unimplemented,
                false,
                "this operation is not available",
            ),
            ErrorCode::InputInvalid => (
                "APP_INPUT_INVALID",
                400,
                G::InvalidArgument,
                false,
                "the input is invalid",
            ),
            ErrorCode::ResourceLimit => (
                "APP_RESOURCE_LIMIT",
                413,
                G::ResourceExhausted,
                false,
                "the request exceeds a resource limit",
            ),
            ErrorCode::Busy => (
                "APP_BUSY",
                429,
                G::ResourceExhausted,
                true,
                "too many requests are in progress; try again shortly",
            ),
            ErrorCode::ChatUnavailable => (
                "APP_CHAT_UNAVAILABLE",
                503,
                G::Unavailable,
                true,
                "chat is not available right now",
            ),
            ErrorCode::ChatFailed => (
                "APP_CHAT_FAILED",
                502,
                G::Unknown,
                true,
                "the chat request failed",
            ),
            ErrorCode::UploadFailed => (
                "APP_UPLOAD_FAILED",
                422,
                G::InvalidArgument,
                false,
                "the upload could not be processed",
            ),
            ErrorCode::Timeout => (
                "APP_TIMEOUT",
                504,
                G::DeadlineExceeded,
                true,
                "the operation timed out",
            ),
            ErrorCode::Cancelled => (
                "APP_CANCELLED",
                499,
                G::Cancelled,
                false,
                "the operation was cancelled",
            ),
            ErrorCode::RevisionUnavailable => (
                "APP_REVISION_UNAVAILABLE",
                410,
                G::FailedPrecondition,
                false,
                "this app revision is no longer available; reopen the app",
            ),
            ErrorCode::NotFound => ("APP_NOT_FOUND", 404, G::NotFound, false, "not found"),
            ErrorCode::PathInvalid => ("APP_PATH_INVALID", 404, G::NotFound, false, "not found"),
            ErrorCode::ActionUnavailable => (
                "APP_ACTION_UNAVAILABLE",
                404,
                G::NotFound,
                false,
                "this action is not available",
            ),
            ErrorCode::ActionInvalid => (
                "APP_ACTION_INVALID",
                400,
                G::InvalidArgument,
                false,
                "the action declaration is invalid",
            ),
            ErrorCode::AccessDenied => (
                "APP_ACCESS_DENIED",
                403,
                G::PermissionDenied,
                false,
                "access denied",
            ),
            ErrorCode::RecordNotFound => (
                "APP_RECORD_NOT_FOUND",
                404,
                G::NotFound,
                false,
                "record not found",
            ),
            ErrorCode::Conflict => (
                "APP_CONFLICT",
                409,
                G::Aborted,
                false,
                "the record changed since it was read",
            ),
            ErrorCode::IdempotencyMismatch => (
                "APP_IDEMPOTENCY_MISMATCH",
                409,
                G::AlreadyExists,
                false,
                "this idempotency key was already used for a different request",
            ),
            ErrorCode::FieldUndeclared => (
                "APP_FIELD_UNDECLARED",
                400,
                G::InvalidArgument,
                false,
                "the request names a field the app did not declare",
            ),
            ErrorCode::SchemaIncompatible => (
                "APP_SCHEMA_INCOMPATIBLE",
                503,
                G::FailedPrecondition,
                false,
                "the app's data does not match its declared schema",
            ),
            ErrorCode::MigrationFailed => (
                "APP_MIGRATION_FAILED",
                503,
                G::FailedPrecondition,
                false,
                "the app's data migration failed",
            ),
            ErrorCode::ConfirmationRequired => (
                "APP_CONFIRMATION_REQUIRED",
                403,
                G::PermissionDenied,
                false,
                "this change must be confirmed by the user before it runs",
            ),
            ErrorCode::DatabaseUnavailable => (
                "APP_DATABASE_UNAVAILABLE",
                503,
                G::Unavailable,
                true,
                "the app's data is temporarily unavailable; try again",
            ),
            ErrorCode::Unauthenticated => (
                "APP_UNAUTHENTICATED",
                401,
                G::Unauthenticated,
                false,
                "authentication required",
            ),
            ErrorCode::Internal => (
                "APP_INTERNAL",
                500,
                G::Internal,
                false,
                "an internal error occurred",
            ),
        };
        Entry {
            name,
            status,
            grpc,
            retryable,
            message,
        }
    }

    /// The wire name, e.g. `APP_NOT_READY`.
    pub fn as_str(self) -> &'static str {
        self.entry().name
    }

    /// Parses a wire name; `None` for anything outside the closed registry.
    pub fn parse(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL
            .into_iter()
            .find(|code| code.as_str() == name)
    }

    /// The HTTP status this code renders with.
    pub fn http_status(self) -> StatusCode {
        StatusCode::from_u16(self.entry().status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The gRPC status code this code travels with between processes.
    pub fn grpc_code(self) -> tonic::Code {
        self.entry().grpc
    }

    /// Whether a client may retry the same request unchanged.
    pub fn retryable(self) -> bool {
        self.entry().retryable
    }

    /// The safe message used when the caller has nothing more specific to say.
    pub fn default_message(self) -> &'static str {
        self.entry().message
    }

    /// `APP_NOT_FOUND` and `APP_PATH_INVALID` keep the hidden-404 treatment: the
    /// response never says whether the thing exists or why the path was refused.
    pub fn is_hidden_not_found(self) -> bool {
        matches!(self, ErrorCode::NotFound | ErrorCode::PathInvalid)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure in the closed envelope. `message` and `details` must be safe to show
/// to the end user; put internals in a log line with `diagnostic_id` instead.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
#[error("{code}: {message}")]
pub struct AppError {
    pub code: ErrorCode,
    pub message: String,
    pub retryable: bool,
    pub diagnostic_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

impl AppError {
    /// A new error with a fresh diagnostic id.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> AppError {
        AppError {
            code,
            message: message.into(),
            retryable: code.retryable(),
            diagnostic_id: uuid::Uuid::new_v4().to_string(),
            details: None,
        }
    }

    /// A new error carrying the code's default message.
    pub fn from_code(code: ErrorCode) -> AppError {
        AppError::new(code, code.default_message())
    }

    /// Attaches bounded, safe details (a JSON object).
    pub fn with_details(mut self, details: serde_json::Value) -> AppError {
        self.details = Some(details);
        self
    }

    /// The error as the JSON envelope the spec defines.
    pub fn to_json(&self) -> serde_json::Value {
        let mut body = serde_json::to_value(self).unwrap_or_default();
        if self.code.is_hidden_not_found() {
            // Hidden 404: the same body for "does not exist" and "refused path".
            body["message"] = serde_json::Value::from("not found");
            if let Some(map) = body.as_object_mut() {
                map.remove("details");
            }
        }
        body
    }

    /// The error as a gRPC status whose details carry the whole envelope.
    pub fn to_status(&self) -> tonic::Status {
        let envelope = ErrorEnvelope {
            code: self.code.as_str().to_owned(),
            message: self.message.clone(),
            retryable: self.retryable,
            diagnostic_id: self.diagnostic_id.clone(),
            details_json: self
                .details
                .as_ref()
                .map(|details| details.to_string())
                .unwrap_or_default(),
        };
        tonic::Status::with_details(
            self.code.grpc_code(),
            self.message.clone(),
            envelope.encode_to_vec().into(),
        )
    }

    /// Recovers the envelope a callee put into a status. A status without one (a
    /// transport failure, a peer that is not ours) becomes a sanitised registry
    /// error; the raw status is logged here, once, under the new diagnostic id.
    pub fn from_status(status: &tonic::Status) -> AppError {
        if let Ok(envelope) = ErrorEnvelope::decode(status.details())
            && let Some(code) = ErrorCode::parse(&envelope.code)
        {
            let details = serde_json::from_str(&envelope.details_json).ok();
            let diagnostic_id = if envelope.diagnostic_id.is_empty() {
                uuid::Uuid::new_v4().to_string()
            } else {
                envelope.diagnostic_id
            };
            return AppError {
                code,
                message: envelope.message,
                retryable: envelope.retryable,
                diagnostic_id,
                details,
            };
        }
        // Without an envelope the status came from the transport, not from a
        // Sasha handler: a refused or dropped connection reads as Unavailable or
        // Cancelled, and both mean the other process could not be reached.
        let from_transport = std::error::Error::source(status)
            .is_some_and(|source| source.downcast_ref::<tonic::transport::Error>().is_some());
        let code = match status.code() {
            _ if from_transport => ErrorCode::NotReady,
            tonic::Code::Unavailable | tonic::Code::Cancelled => ErrorCode::NotReady,
            tonic::Code::DeadlineExceeded => ErrorCode::Timeout,
            _ => ErrorCode::Internal,
        };
        let error = match code {
            ErrorCode::NotReady => AppError::new(code, "a platform service is not reachable"),
            _ => AppError::from_code(code),
        };
        tracing::warn!(
            diagnostic_id = %error.diagnostic_id,
            grpc_code = ?status.code(),
            grpc_message = status.message(),
            "call to another process failed without an error envelope"
        );
        error
    }
}

impl From<AppError> for tonic::Status {
    fn from(error: AppError) -> tonic::Status {
        error.to_status()
    }
}

impl From<tonic::Status> for AppError {
    fn from(status: tonic::Status) -> AppError {
        AppError::from_status(&status)
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.code.http_status();
        let mut response = (status, axum::Json(self.to_json())).into_response();
        response.headers_mut().insert(
            http::header::CACHE_CONTROL,
            http::HeaderValue::from_static("no-store"),
        );
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_by_name_and_has_a_status() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            assert!(code.as_str().starts_with("APP_"));
            assert!(code.http_status().as_u16() >= 400, "{code}");
            assert!(!code.default_message().is_empty());
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
        assert_eq!(ErrorCode::parse("APP_MADE_UP"), None);
    }

    #[test]
    fn spec_statuses_and_retryability() {
        let check = |code: ErrorCode, status: u16, retryable: bool| {
            assert_eq!(code.http_status().as_u16(), status, "{code}");
            assert_eq!(code.retryable(), retryable, "{code}");
        };
        check(ErrorCode::AccessDenied, 403, false);
        check(ErrorCode::RecordNotFound, 404, false);
        check(ErrorCode::Conflict, 409, false);
        check(ErrorCode::IdempotencyMismatch, 409, false);
        check(ErrorCode::FieldUndeclared, 400, false);
        check(ErrorCode::SchemaIncompatible, 503, false);
        check(ErrorCode::MigrationFailed, 503, false);
        check(ErrorCode::ConfirmationRequired, 403, false);
        check(ErrorCode::DatabaseUnavailable, 503, true);
        check(ErrorCode::NotFound, 404, false);
        check(ErrorCode::PathInvalid, 404, false);
    }

    #[test]
    fn envelope_survives_a_grpc_status() {
        let original = AppError::new(ErrorCode::Conflict, "row 7 changed")
            .with_details(serde_json::json!({"currentVersion": 3}));
        let status = original.to_status();
        assert_eq!(status.code(), tonic::Code::Aborted);
        let decoded = AppError::from_status(&status);
        assert_eq!(decoded, original);
    }

    #[test]
    fn a_foreign_status_is_sanitised() {
        let status = tonic::Status::internal("SELECT * FROM secret failed at /var/lib/x");
        let error = AppError::from_status(&status);
        assert_eq!(error.code, ErrorCode::Internal);
        assert!(!error.message.contains("SELECT"));
        assert!(!error.message.contains("/var"));
        let unreachable = AppError::from_status(&tonic::Status::unavailable("tcp connect error"));
        assert_eq!(unreachable.code, ErrorCode::NotReady);
        assert!(unreachable.retryable);
        let dropped = AppError::from_status(&tonic::Status::cancelled("connection closed"));
        assert_eq!(dropped.code, ErrorCode::NotReady);
        let late = AppError::from_status(&tonic::Status::deadline_exceeded("deadline"));
        assert_eq!(late.code, ErrorCode::Timeout);
    }

    #[test]
    fn json_envelope_shape_and_hidden_not_found() {
        let error = AppError::new(ErrorCode::InputInvalid, "limit must be at most 500");
        let json = error.to_json();
        assert_eq!(json["code"], "APP_INPUT_INVALID");
        assert_eq!(json["message"], "limit must be at most 500");
        assert_eq!(json["retryable"], false);
        assert_eq!(json["diagnosticId"], error.diagnostic_id.as_str());
        assert!(json.get("details").is_none());

        let hidden = AppError::new(ErrorCode::PathInvalid, "path escapes the package")
            .with_details(serde_json::json!({"path": "../x"}));
        let json = hidden.to_json();
        assert_eq!(json["message"], "not found");
        assert!(json.get("details").is_none());
    }
}
