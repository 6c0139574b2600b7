//! The page a browser sees when a sign-in through the provider is refused:
//! what happened in words a person can act on, what to do next, and a
//! diagnostic id an administrator finds in the log with the technical
//! detail.
//!
//! What it must never do: set a session cookie, redirect, or show anything
//! of the provider's answer but its error (never a token or a code).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use sasha_contract::html::escape_text;
use sasha_proto::{AppError, ErrorCode};

use crate::http::answers::no_store;

/// Why a sign-in was refused, as the page says it.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub status: StatusCode,
    pub code: ErrorCode,
    /// One or two sentences for the person.
    pub message: String,
    /// For the log and the administrator: the check that failed.
    pub detail: String,
}

impl Refusal {
    pub fn new(
        status: StatusCode,
        code: ErrorCode,
        message: impl Into<String>,
        detail: impl Into<String>,
    ) -> Refusal {
        Refusal {
            status,
            code,
            message: message.into(),
            detail: detail.into(),
        }
    }

    /// The provider could not be reached: try again shortly (503).
    pub fn provider_down(detail: impl Into<String>) -> Refusal {
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NotReady,
            "Your organisation's sign-in service could not be reached. This is usually brief: \
             try again in a minute. If it keeps happening, tell your administrator.",
            detail,
        )
    }

    /// The page, with `clear_cookie` (the attempt cookie's removal) when given.
    pub fn page(self, clear_cookie: Option<HeaderValue>) -> Response {
        let mut error = AppError::new(self.code, &self.message);
        error.retryable = self.status == StatusCode::SERVICE_UNAVAILABLE;
        tracing::info!(
            diagnostic_id = %error.diagnostic_id,
            status = self.status.as_u16(),
            reason = %self.detail,
            "sign-in through the identity provider refused"
        );
        let next = if error.retryable {
            "<p><a href=\"/\">Try again</a></p>"
        } else {
            "<p><a href=\"/\">Back to Sasha Studio</a></p>"
        };
        let html = format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>Sign-in refused — Sasha Studio</title></head><body>\
             <main style=\"font-family: system-ui, sans-serif; max-width: 36rem; margin: 4rem auto\">\
             <h1 id=\"sso-refused\">You are not signed in</h1><p id=\"sso-reason\">{}</p>\
             <p style=\"color: #555\">Details for your administrator: {}.<br>\
             Diagnostic id: <code>{}</code></p>{next}</main></body></html>",
            escape_text(&self.message),
            escape_text(&self.detail),
            error.diagnostic_id
        );
        let mut response = no_store((self.status, Html(html)));
        if let Some(clear) = clear_cookie {
            response.headers_mut().append(header::SET_COOKIE, clear);
        }
        if error.retryable {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("30"));
        }
        response.into_response()
    }
}
