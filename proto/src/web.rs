//! Response headers every Sasha HTTP surface sends, whatever it serves.

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
