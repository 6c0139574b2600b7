//! A fake OpenID provider for the relying party's router tests, served on
//! loopback: discovery, keys and a token endpoint that checks the client's
//! credentials and the PKCE verifier, refuses a code used twice, and hands
//! out whatever ID token the test arranged for a code, signed with one of
//! two test RSA keys (`testdata/`) under whatever key id the test names.
//!
//! What it must never do: serve anything but loopback, or be built outside
//! tests.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use openidconnect::core::{CoreJwsSigningAlgorithm, CoreRsaPrivateSigningKey};
use openidconnect::{JsonWebKeyId, PrivateSigningKey};
use serde_json::{Value, json};
use sha2::Digest as _;

pub(crate) const CLIENT_ID: &str = "sasha-studio";
pub(crate) const CLIENT_SECRET: &str = "the client secret";

/// One of the two test keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    A,
    B,
}

fn private_key(key: Key, kid: &str) -> CoreRsaPrivateSigningKey {
    let pem = match key {
        Key::A => include_str!("testdata/test_key_a.pem"),
        Key::B => include_str!("testdata/test_key_b.pem"),
    };
    CoreRsaPrivateSigningKey::from_pem(pem, Some(JsonWebKeyId::new(kid.to_owned())))
        .expect("a test key")
}

/// What the token endpoint answers for one code.
#[derive(Debug, Clone)]
pub(crate) struct Issue {
    /// The ID token's payload.
    pub(crate) claims: Value,
    /// The key that signs it, and the key id its header names.
    pub(crate) signed_by: Key,
    pub(crate) kid: String,
    /// The PKCE challenge the code was issued for.
    pub(crate) challenge: String,
}

#[derive(Debug, Default)]
struct Books {
    /// The keys the JWKS publishes, under their ids.
    published: Vec<(Key, String)>,
    jwks_fetches: usize,
    codes: HashMap<String, Issue>,
    used: HashSet<String>,
}

/// A provider running on loopback until dropped.
pub(crate) struct FakeProvider {
    pub(crate) issuer: String,
    books: Arc<Mutex<Books>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Served {
    issuer: String,
    books: Arc<Mutex<Books>>,
}

impl FakeProvider {
    /// A provider publishing key A as "a".
    pub(crate) async fn start() -> FakeProvider {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let books = Arc::new(Mutex::new(Books {
            published: vec![(Key::A, "a".to_owned())],
            ..Books::default()
        }));
        let served = Served {
            issuer: issuer.clone(),
            books: books.clone(),
        };
        let router = axum::Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/token", post(token))
            .with_state(served);
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        FakeProvider {
            issuer,
            books,
            task,
        }
    }

    /// Publishes exactly `keys` from now on (a key rotation).
    pub(crate) fn publish(&self, keys: &[(Key, &str)]) {
        self.books.lock().unwrap().published = keys
            .iter()
            .map(|(key, kid)| (*key, (*kid).to_owned()))
            .collect();
    }

    /// How many times the keys were fetched.
    pub(crate) fn jwks_fetches(&self) -> usize {
        self.books.lock().unwrap().jwks_fetches
    }

    /// Makes `code` redeemable for `issue`.
    pub(crate) fn issue(&self, code: &str, issue: Issue) {
        self.books
            .lock()
            .unwrap()
            .codes
            .insert(code.to_owned(), issue);
    }
}

async fn discovery(State(served): State<Served>) -> Json<Value> {
    let issuer = &served.issuer;
    Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        "code_challenge_methods_supported": ["S256"],
    }))
}

async fn jwks(State(served): State<Served>) -> Json<Value> {
    let mut books = served.books.lock().unwrap();
    books.jwks_fetches += 1;
    let keys: Vec<Value> = books
        .published
        .iter()
        .map(|(key, kid)| {
            serde_json::to_value(private_key(*key, kid).as_verification_key()).unwrap()
        })
        .collect();
    Json(json!({ "keys": keys }))
}

fn refuse(error: &str, description: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({ "error": error, "error_description": description })),
    )
        .into_response()
}

async fn token(State(served): State<Served>, headers: HeaderMap, body: String) -> Response {
    let expected = format!(
        "Basic {}",
        STANDARD.encode(format!(
            "{}:{}",
            urlencode(CLIENT_ID),
            urlencode(CLIENT_SECRET)
        ))
    );
    if headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        != Some(&expected)
    {
        return refuse("invalid_client", "wrong client credentials");
    }
    let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    if form.get("grant_type").map(String::as_str) != Some("authorization_code") {
        return refuse("unsupported_grant_type", "authorization_code only");
    }
    let code = form.get("code").cloned().unwrap_or_default();
    let mut books = served.books.lock().unwrap();
    let Some(issue) = books.codes.get(&code).cloned() else {
        return refuse("invalid_grant", "unknown code");
    };
    if !books.used.insert(code) {
        return refuse("invalid_grant", "the code was already used");
    }
    let verifier = form.get("code_verifier").cloned().unwrap_or_default();
    if URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes())) != issue.challenge {
        return refuse("invalid_grant", "PKCE verification failed");
    }
    drop(books);
    let header = json!({ "alg": "RS256", "kid": issue.kid, "typ": "JWT" });
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(issue.claims.to_string())
    );
    let signature = private_key(issue.signed_by, &issue.kid)
        .sign(
            &CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
            input.as_bytes(),
        )
        .unwrap();
    let id_token = format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature));
    Json(json!({
        "access_token": "an access token",
        "token_type": "Bearer",
        "expires_in": 300,
        "id_token": id_token,
    }))
    .into_response()
}

/// RFC 6749 §2.3.1: the client id and secret are form-urlencoded inside
/// Basic credentials.
fn urlencode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
