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

use axum::response::{IntoResponse, Response};
use prost::Message;
use serde::Serialize;

use crate::pb::ErrorEnvelope;

pub use sasha_contract::error::ErrorCode;

/// The gRPC status code each registry code travels with between processes.
fn grpc_code(code: ErrorCode) -> tonic::Code {
    use tonic::Code as G;
    match code {
        ErrorCode::NotReady => G::Unavailable,
        ErrorCode::CapabilityDenied => G::PermissionDenied,
        ErrorCode::OperationUnavailable => G::Unimplemented,
        ErrorCode::InputInvalid => G::InvalidArgument,
        ErrorCode::ResourceLimit => G::ResourceExhausted,
        ErrorCode::Busy => G::ResourceExhausted,
        ErrorCode::ChatUnavailable => G::Unavailable,
        ErrorCode::ChatFailed => G::Unknown,
        ErrorCode::UploadFailed => G::InvalidArgument,
        ErrorCode::Timeout => G::DeadlineExceeded,
        ErrorCode::Cancelled => G::Cancelled,
        ErrorCode::RevisionUnavailable => G::FailedPrecondition,
        ErrorCode::NotFound => G::NotFound,
        ErrorCode::PathInvalid => G::NotFound,
        ErrorCode::ActionUnavailable => G::NotFound,
        ErrorCode::ActionInvalid => G::InvalidArgument,
        ErrorCode::AccessDenied => G::PermissionDenied,
        ErrorCode::RecordNotFound => G::NotFound,
        ErrorCode::Conflict => G::Aborted,
        ErrorCode::IdempotencyMismatch => G::AlreadyExists,
        ErrorCode::FieldUndeclared => G::InvalidArgument,
        ErrorCode::SchemaIncompatible => G::FailedPrecondition,
        ErrorCode::MigrationFailed => G::FailedPrecondition,
        ErrorCode::ConfirmationRequired => G::PermissionDenied,
        ErrorCode::DatabaseUnavailable => G::Unavailable,
        ErrorCode::Unauthenticated => G::Unauthenticated,
        ErrorCode::Internal => G::Internal,
    }
}

/// `details.reason` of [`AppError::not_owner`].
const NOT_OWNER: &str = "not-owner";

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

    /// A data-worker's refusal of a call for an app it does not own at the
    /// epoch the call names (the app moved, or its lease lapsed): retryable,
    /// naming the app. A caller that sees it asks where the app is now and
    /// tries once more ([`AppError::is_not_owner`]).
    pub fn not_owner(app_id: &str) -> AppError {
        AppError::new(
            ErrorCode::NotReady,
            format!("the data of app {app_id} is moving between workers; try again"),
        )
        .with_details(serde_json::json!({"reason": NOT_OWNER, "appId": app_id}))
    }

    /// Whether this is [`AppError::not_owner`]'s refusal.
    pub fn is_not_owner(&self) -> bool {
        self.code == ErrorCode::NotReady
            && self
                .details
                .as_ref()
                .and_then(|details| details.get("reason"))
                .and_then(serde_json::Value::as_str)
                == Some(NOT_OWNER)
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
            details: self.details.as_ref().map(crate::convert::to_json_object),
        };
        tonic::Status::with_details(
            grpc_code(self.code),
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
            let details = envelope
                .details
                .as_ref()
                .map(crate::convert::json_from_object);
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
        // Every Sasha handler answers with an envelope, so a status without
        // one was made by tonic, hyper or h2 because the call did not
        // complete: a refused or dropped connection (Unavailable,
        // Cancelled), a stream cut off before its trailers (Unknown, with or
        // without the transport error as its source), or an h2 or body error
        // on a connection whose peer was killed mid-answer (Internal, worded
        // by tonic as below, its source dropped). All of them mean the other
        // process could not answer, and the caller may retry; each form was
        // seen in tests/process/core_replicas.rs read as internal before.
        // A status tonic makes for a message it cannot decode or encode stays
        // internal: retrying a bug does not help.
        let from_transport =
            std::iter::successors(std::error::Error::source(status), |error| error.source())
                .any(|error| error.is::<tonic::transport::Error>() || error.is::<std::io::Error>())
                || (status.code() == tonic::Code::Internal
                    && TRANSPORT_INTERNAL_WORDS
                        .iter()
                        .any(|words| status.message().starts_with(words)));
        let code = match status.code() {
            _ if from_transport => ErrorCode::NotReady,
            tonic::Code::Unavailable | tonic::Code::Cancelled | tonic::Code::Unknown => {
                ErrorCode::NotReady
            }
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

/// How tonic begins an `Internal` status it makes when a connection or a
/// response body breaks off (tonic 0.14 `status.rs`, `codec/decode.rs`,
/// `client/grpc.rs`), as opposed to one it makes for a message it cannot
/// decode.
const TRANSPORT_INTERNAL_WORDS: [&str; 3] = [
    "h2 protocol error",
    "Unexpected EOF decoding stream",
    "Missing response message",
];

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
        // A call in flight when its peer was killed (a balanced channel).
        let cut = AppError::from_status(&tonic::Status::unknown("transport error"));
        assert_eq!(cut.code, ErrorCode::NotReady);
        assert!(cut.retryable);
        // A stream ended without its trailers, and an h2 error or a body cut
        // off on a connection whose peer died: each is retryable.
        for status in [
            tonic::Status::unknown("protocol error: missing grpc-status trailer"),
            tonic::Status::internal("h2 protocol error: connection reset"),
            tonic::Status::internal("Unexpected EOF decoding stream."),
            tonic::Status::internal("Missing response message."),
            tonic::Status::from_error(Box::new(std::io::Error::from(
                std::io::ErrorKind::BrokenPipe,
            ))),
        ] {
            let error = AppError::from_status(&status);
            assert_eq!(error.code, ErrorCode::NotReady, "{status:?}");
            assert!(error.retryable);
        }
        // What tonic makes for a message it cannot decode is a bug: internal.
        let bug = tonic::Status::internal("failed to decode Protobuf message: invalid wire type");
        assert_eq!(AppError::from_status(&bug).code, ErrorCode::Internal);
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
