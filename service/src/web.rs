//! HTTP helpers every Sasha HTTP surface shares: baseline response headers, the
//! server loop, plain-text errors turned into the envelope, and reading
//! credentials (session cookie, bearer token).

use http::{HeaderMap, HeaderValue, header};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// No MIME sniffing, and no referrer leaves a Sasha page.
pub fn insert_baseline_headers(headers: &mut HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
}

/// Serves `app` on `listener` until `shutdown` is cancelled, with `TCP_NODELAY`
/// on every connection (a reply that spans segments would otherwise wait on the
/// peer's delayed ACK, about 40 ms).
///
/// On `shutdown` the listener is closed at once (new connections are refused),
/// idle keep-alive connections are closed, and this returns when the requests
/// in flight, streamed responses included, have completed. Bounding that wait
/// is the process's job (`SASHA_SHUTDOWN_GRACE_SECS`, see [`crate::process`]).
pub async fn serve_http(
    listener: TcpListener,
    app: axum::Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt as _;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

/// The Studio browser session cookie's name: `__Host-` prefixed when Studio is
/// served over https. studio-core sets it; mcp-gateway reads it on `/mcp` for the
/// Studio page's own MCP client.
pub fn session_cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-sasha_session"
    } else {
        "sasha_session"
    }
}

/// The value of cookie `name` in a request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Headers a refusal keeps when its body becomes the envelope.
const KEPT_ON_REFUSAL: [header::HeaderName; 3] =
    [header::ALLOW, header::RETRY_AFTER, header::WWW_AUTHENTICATE];

/// Middleware: a `text/plain` (or untyped) error answer — an axum extractor's
/// rejection such as the body limit's 413, or a library's transport refusal
/// such as rmcp's 403 for a foreign `Origin` — becomes the platform's error
/// envelope `{code, message, retryable, diagnosticId}` with the same status.
/// The library's one-line text, when short and printable, is the message.
/// JSON answers and HTML pages pass untouched.
pub async fn envelope_plain_errors(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;

    use sasha_proto::{AppError, ErrorCode};

    let response = next.run(request).await;
    let status = response.status();
    let plain = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_none_or(|value| {
            value
                .to_str()
                .is_ok_and(|value| value.starts_with("text/plain"))
        });
    if status.as_u16() < 400 || !plain {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 1024).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let text = text.trim();
    let code = match status.as_u16() {
        401 => ErrorCode::Unauthenticated,
        403 => ErrorCode::AccessDenied,
        404 => ErrorCode::NotFound,
        408 | 504 => ErrorCode::Timeout,
        413 => ErrorCode::ResourceLimit,
        429 => ErrorCode::Busy,
        503 => ErrorCode::NotReady,
        500.. => ErrorCode::Internal,
        _ => ErrorCode::InputInvalid,
    };
    let message = match code {
        ErrorCode::ResourceLimit => {
            "the request body is larger than this endpoint accepts".to_owned()
        }
        _ if status == http::StatusCode::METHOD_NOT_ALLOWED => {
            "this method is not allowed on this path".to_owned()
        }
        ErrorCode::Internal => code.default_message().to_owned(),
        _ if !text.is_empty() && text.len() <= 200 && !text.chars().any(char::is_control) => {
            text.to_owned()
        }
        _ => code.default_message().to_owned(),
    };
    let mut envelope = AppError::new(code, message).into_response();
    *envelope.status_mut() = status;
    for name in KEPT_ON_REFUSAL {
        if let Some(value) = parts.headers.get(&name) {
            envelope.headers_mut().insert(name, value.clone());
        }
    }
    envelope
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::{get, post};
    use http::{Request, StatusCode};
    use tower::ServiceExt as _;

    async fn answer(path: &str, method: &str) -> (StatusCode, http::HeaderMap, serde_json::Value) {
        let app = axum::Router::new()
            .route(
                "/limit",
                post(|_: axum::body::Bytes| async { "unreachable" }),
            )
            .route(
                "/origin",
                get(|| async {
                    (
                        StatusCode::FORBIDDEN,
                        "Forbidden: Origin header is not allowed",
                    )
                }),
            )
            .route(
                "/page",
                get(|| async { (StatusCode::BAD_REQUEST, axum::response::Html("<p>bad</p>")) }),
            )
            .route(
                "/json",
                get(|| async { sasha_proto::AppError::from_code(sasha_proto::ErrorCode::Busy) }),
            )
            .layer(axum::extract::DefaultBodyLimit::max(8))
            .layer(axum::middleware::from_fn(super::envelope_plain_errors));
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::from("0".repeat(64)))
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, 4096).await.unwrap();
        let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        (parts.status, parts.headers, json)
    }

    #[tokio::test]
    async fn plain_text_refusals_become_the_envelope() {
        let (status, _, body) = answer("/limit", "POST").await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(body["code"], "APP_RESOURCE_LIMIT", "{body}");
        assert_eq!(body["retryable"], false);
        assert!(body["diagnosticId"].is_string());
        let (status, _, body) = answer("/origin", "GET").await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(body["code"], "APP_ACCESS_DENIED");
        assert_eq!(body["message"], "Forbidden: Origin header is not allowed");
        let (status, headers, body) = answer("/origin", "DELETE").await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(body["code"], "APP_INPUT_INVALID");
        assert!(headers.contains_key(http::header::ALLOW), "{headers:?}");
    }

    #[tokio::test]
    async fn pages_and_envelopes_pass_untouched() {
        let (status, headers, body) = answer("/page", "GET").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.is_null(), "an HTML page stays HTML");
        assert!(
            headers[http::header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        let (status, _, body) = answer("/json", "GET").await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(body["code"], "APP_BUSY");
    }
}
