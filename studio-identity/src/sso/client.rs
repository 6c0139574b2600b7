//! The HTTP client the relying party reaches the provider with: the
//! workspace's reqwest, handed to `openidconnect` through its async client
//! hook ([`AsyncHttpClient`]), so the crate brings no HTTP stack of its own.
//! https through rustls with the ring provider and the webpki roots.
//!
//! What it must never do: follow a redirect (a discovery document or token
//! endpoint that redirects could send a request anywhere), take a proxy from
//! the environment, wait without bound, or read an unbounded body.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use openidconnect::{AsyncHttpClient, HttpRequest, HttpResponse};

/// How long connecting to the provider may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one whole request to the provider may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest response read from the provider (discovery, keys, tokens).
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Why the provider could not be asked: it is down, slow or answered
/// something too large. Always retryable from the person's side.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ProviderUnreachable(pub String);

/// A reqwest client as `openidconnect`'s HTTP client.
#[derive(Debug, Clone)]
pub struct ProviderClient {
    http: reqwest::Client,
}

impl ProviderClient {
    /// A client that follows no redirect and uses no proxy.
    pub fn new() -> Result<ProviderClient, String> {
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config()?)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("sasha-apps/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| error.to_string())?;
        Ok(ProviderClient { http })
    }

    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, ProviderUnreachable> {
        let (parts, body) = request.into_parts();
        let unreachable = |error: reqwest::Error| ProviderUnreachable(error_chain(&error));
        let mut response = self
            .http
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body)
            .send()
            .await
            .map_err(unreachable)?;
        let mut answer = http::Response::builder().status(response.status());
        if let Some(headers) = answer.headers_mut() {
            *headers = std::mem::take(response.headers_mut());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(ProviderUnreachable(format!(
                    "the provider's answer is larger than {MAX_RESPONSE_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        answer
            .body(body)
            .map_err(|error| ProviderUnreachable(error.to_string()))
    }
}

impl<'c> AsyncHttpClient<'c> for ProviderClient {
    type Error = ProviderUnreachable;
    type Future =
        Pin<Box<dyn Future<Output = Result<HttpResponse, ProviderUnreachable>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(self.send(request))
    }
}

fn tls_config() -> Result<rustls::ClientConfig, String> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|error| error.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tls)
}

/// An error and its causes on one line (reqwest's own message hides why).
pub(super) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
