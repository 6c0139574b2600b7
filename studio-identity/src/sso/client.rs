//! The HTTP client the relying party reaches the provider with: the
//! workspace's reqwest, handed to `openidconnect` through its async client
//! hook ([`AsyncHttpClient`]), so the crate brings no HTTP stack of its own.
//! https through rustls with the ring provider and the webpki roots, plus
//! the organisation's own certificate authority when `SASHA_OIDC_CA_FILE`
//! names one.
//!
//! What it must never do: follow a redirect (a discovery document or token
//! endpoint that redirects could send a request anywhere), take a proxy from
//! the environment, wait without bound, or read an unbounded body.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use openidconnect::{AsyncHttpClient, HttpRequest, HttpResponse};
use rustls::pki_types::CertificateDer;

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
    /// A client that follows no redirect and uses no proxy, trusting the
    /// public web's roots and `extra_roots`.
    pub fn new(extra_roots: &[CertificateDer<'static>]) -> Result<ProviderClient, String> {
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config(extra_roots)?)
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

fn tls_config(extra_roots: &[CertificateDer<'static>]) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let (_, unusable) = roots.add_parsable_certificates(extra_roots.iter().cloned());
    if unusable > 0 {
        return Err(format!(
            "{unusable} certificate(s) of SASHA_OIDC_CA_FILE cannot be a trust anchor"
        ));
    }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// An https server on loopback whose certificate for `localhost` is
    /// signed by a private CA: (its URL, the CA certificate).
    async fn private_provider() -> (String, CertificateDer<'static>) {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let leaf_params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
        let server = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::from_pem_slice(leaf_key.serialize_pem().as_bytes()).unwrap(),
        )
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(socket).await else {
                        return;
                    };
                    let mut request = [0u8; 4096];
                    let _ = tls.read(&mut request).await;
                    let _ = tls
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
                        )
                        .await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        (format!("https://localhost:{port}/"), ca_cert.der().clone())
    }

    fn get(url: &str) -> HttpRequest {
        http::Request::get(url).body(Vec::new()).unwrap()
    }

    /// A provider behind the organisation's own CA is reached only with that
    /// CA named (`SASHA_OIDC_CA_FILE`); without it the handshake fails, as
    /// the public roots do not vouch for it.
    #[tokio::test]
    async fn a_private_certificate_authority_is_trusted_only_when_named() {
        let (url, ca) = private_provider().await;
        let refused = ProviderClient::new(&[]).unwrap().send(get(&url)).await;
        let error = refused.expect_err("an unknown CA is refused").0;
        assert!(error.contains("certificate"), "{error}");
        let answer = ProviderClient::new(&[ca])
            .unwrap()
            .send(get(&url))
            .await
            .unwrap();
        assert_eq!(
            (answer.status().as_u16(), answer.body().as_slice()),
            (200, &b"{}"[..])
        );
    }
}
