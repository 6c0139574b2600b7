//! The closed error registry: every code a failure may leave a process with,
//! its HTTP status, whether a retry may succeed, and its safe default message.
//! The browser runtime's copy (`package/runtime/sasha-runtime.js`) is rendered
//! from this table by [`ErrorCode::js_registry`] and checked against it.
//!
//! This module must never carry an error across a hop or render an envelope:
//! that is `sasha-proto`'s `AppError`.

use std::fmt;

use http::StatusCode;
use serde::Serialize;

/// One code of the closed registry. The spec's Milestone 1 and 2 codes, plus
/// `APP_UNAUTHENTICATED` and `APP_INTERNAL` (see
/// `docs/decisions/0007-errors-beyond-the-spec.md`).
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

/// How one code behaves: its wire name, HTTP status, retryability and
/// the safe default message.
struct Entry {
    name: &'static str,
    status: u16,
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
        let (name, status, retryable, message) = match self {
            ErrorCode::NotReady => (
                "APP_NOT_READY",
                503,
                true,
                "the service is not ready for this request yet",
            ),
            ErrorCode::CapabilityDenied => (
                "APP_CAPABILITY_DENIED",
                403,
                false,
                "this app did not declare the capability it tried to use",
            ),
            ErrorCode::OperationUnavailable => (
                "APP_OPERATION_UNAVAILABLE",
                501,
                false,
                "this operation is not available",
            ),
            ErrorCode::InputInvalid => ("APP_INPUT_INVALID", 400, false, "the input is invalid"),
            ErrorCode::ResourceLimit => (
                "APP_RESOURCE_LIMIT",
                413,
                false,
                "the request exceeds a resource limit",
            ),
            ErrorCode::Busy => (
                "APP_BUSY",
                429,
                true,
                "too many requests are in progress; try again shortly",
            ),
            ErrorCode::ChatUnavailable => (
                "APP_CHAT_UNAVAILABLE",
                503,
                true,
                "chat is not available right now",
            ),
            ErrorCode::ChatFailed => ("APP_CHAT_FAILED", 502, true, "the chat request failed"),
            ErrorCode::UploadFailed => (
                "APP_UPLOAD_FAILED",
                422,
                false,
                "the upload could not be processed",
            ),
            ErrorCode::Timeout => ("APP_TIMEOUT", 504, true, "the operation timed out"),
            ErrorCode::Cancelled => ("APP_CANCELLED", 499, false, "the operation was cancelled"),
            ErrorCode::RevisionUnavailable => (
                "APP_REVISION_UNAVAILABLE",
                410,
                false,
                "this app revision is no longer available; reopen the app",
            ),
            ErrorCode::NotFound => ("APP_NOT_FOUND", 404, false, "not found"),
            ErrorCode::PathInvalid => ("APP_PATH_INVALID", 404, false, "not found"),
            ErrorCode::ActionUnavailable => (
                "APP_ACTION_UNAVAILABLE",
                404,
                false,
                "this action is not available",
            ),
            ErrorCode::ActionInvalid => (
                "APP_ACTION_INVALID",
                400,
                false,
                "the action declaration is invalid",
            ),
            ErrorCode::AccessDenied => ("APP_ACCESS_DENIED", 403, false, "access denied"),
            ErrorCode::RecordNotFound => ("APP_RECORD_NOT_FOUND", 404, false, "record not found"),
            ErrorCode::Conflict => (
                "APP_CONFLICT",
                409,
                false,
                "the record changed since it was read",
            ),
            ErrorCode::IdempotencyMismatch => (
                "APP_IDEMPOTENCY_MISMATCH",
                409,
                false,
                "this idempotency key was already used for a different request",
            ),
            ErrorCode::FieldUndeclared => (
                "APP_FIELD_UNDECLARED",
                400,
                false,
                "the request names a field the app did not declare",
            ),
            ErrorCode::SchemaIncompatible => (
                "APP_SCHEMA_INCOMPATIBLE",
                503,
                false,
                "the app's data does not match its declared schema",
            ),
            ErrorCode::MigrationFailed => (
                "APP_MIGRATION_FAILED",
                503,
                false,
                "the app's data migration failed",
            ),
            ErrorCode::ConfirmationRequired => (
                "APP_CONFIRMATION_REQUIRED",
                403,
                false,
                "this change must be confirmed by the user before it runs",
            ),
            ErrorCode::DatabaseUnavailable => (
                "APP_DATABASE_UNAVAILABLE",
                503,
                true,
                "the app's data is temporarily unavailable; try again",
            ),
            ErrorCode::Unauthenticated => {
                ("APP_UNAUTHENTICATED", 401, false, "authentication required")
            }
            ErrorCode::Internal => ("APP_INTERNAL", 500, false, "an internal error occurred"),
        };
        Entry {
            name,
            status,
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

    /// The registry as the browser runtime states it: one
    /// `    CODE: [retryable, "default message"],` line per code, in order.
    pub fn js_registry() -> String {
        ErrorCode::ALL
            .iter()
            .map(|code| {
                format!(
                    "    {}: [{}, {}],\n",
                    code.as_str(),
                    code.retryable(),
                    serde_json::Value::from(code.default_message())
                )
            })
            .collect()
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
