//! HTTP helpers every Sasha HTTP surface shares: baseline response headers, the
//! server loop, and reading credentials (session cookie, bearer token).

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
