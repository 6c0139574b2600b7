//! The store seen from async code: [`blocking`] runs a store call on the
//! blocking pool, and [`store_error`] turns a failure into the envelope a
//! caller may see (`APP_NOT_READY` when retrying helps, the member app grant
//! rule as `APP_ACCESS_DENIED`, an unreachable PostgreSQL as `APP_NOT_READY`, anything else `APP_INTERNAL` with the detail
//! logged under the same diagnostic id).
//!
//! What it must never do: show a database detail to a caller, or run store
//! work on an async thread.

use sasha_proto::{AppError, ErrorCode};

use crate::StoreError;

/// A store failure as the user sees it: busy or unreadable is retryable
/// (`APP_NOT_READY`), a grant change a member app's grant rule refuses is
/// `APP_ACCESS_DENIED` with that rule, the rest internal.
pub fn store_error(error: StoreError) -> AppError {
    match error {
        StoreError::MemberAppGrant(rule) => AppError::new(ErrorCode::AccessDenied, rule),
        StoreError::Busy => {
            AppError::new(ErrorCode::NotReady, "the account store is busy; try again")
        }
        StoreError::Unreadable(detail) => {
            let app_error = AppError::new(
                ErrorCode::NotReady,
                "the core database cannot be read (damaged?); an administrator must restore it from a backup",
            );
            tracing::error!(diagnostic_id = %app_error.diagnostic_id, %detail, "core store: the database cannot be read");
            app_error
        }
        StoreError::Unavailable(detail) => {
            let app_error = AppError::new(
                ErrorCode::NotReady,
                "the core database cannot be reached just now; try again shortly",
            );
            tracing::error!(diagnostic_id = %app_error.diagnostic_id, %detail, "core store: the database cannot be reached");
            app_error
        }
        other => {
            let app_error = AppError::from_code(ErrorCode::Internal);
            tracing::error!(diagnostic_id = %app_error.diagnostic_id, error = %other, "core store failed");
            app_error
        }
    }
}

/// Runs blocking store work off the async threads.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, AppError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(store_error),
        Err(_) => Err(AppError::from_code(ErrorCode::Internal)),
    }
}
