//! Response headers every Sasha HTTP surface sends, whatever it serves.

use http::{HeaderMap, HeaderValue, header};

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
