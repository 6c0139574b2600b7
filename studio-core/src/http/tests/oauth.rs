//! OAuth 2.1 for MCP clients through Studio's router and core's gRPC service,
//! in process: every refusal of the authorization, consent, token,
//! revocation and registration endpoints, and which tokens the gateway's
//! `Authenticate` call still accepts. What needs the running system (the
//! discovery chain from the gateway's 401, tools by scope, the ingress's
//! client address) stays in `tests/process/oauth.rs`.

use std::collections::BTreeSet;

use base64::Engine as _;
use http::StatusCode;
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::test_world::{PASSWORD, Reply, STUDIO, World};
use studio_store::{ClientAuthMethod, CodeExchange, Consent, Scope};

const MEMBER: &str = "mia";
const REDIRECT: &str = "http://127.0.0.1:4567/callback";
const VERIFIER: &str = "a-verifier-long-enough-to-satisfy-rfc-7636-rules-0123456789";

fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

/// A [`World`] seen as an OAuth client and a signed-in browser see Studio.
struct OAuth {
    world: World,
}

impl OAuth {
    fn start() -> OAuth {
        OAuth {
            world: World::new(),
        }
    }

    fn store(&self) -> &studio_store::Store {
        self.world.store()
    }

    fn origin(&self) -> String {
        STUDIO.to_owned()
    }

    fn resource(&self) -> String {
        self.world.core.accounts.mcp_resource().to_owned()
    }

    async fn send(&self, method: &str, uri: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        self.world.raw(method, uri, headers, body).await
    }

    /// Signs in through the Studio API; returns the `Cookie` header value.
    async fn sign_in(&self, username: &str, password: &str) -> String {
        let body = json!({"username": username, "password": password}).to_string();
        let response = self
            .send(
                "POST",
                "/api/auth/login",
                &[("origin", STUDIO), ("content-type", "application/json")],
                &body,
            )
            .await;
        assert_eq!(response.status, StatusCode::OK, "sign-in of {username}");
        let cookie = response.headers["set-cookie"].to_str().unwrap();
        cookie.split(';').next().unwrap().to_owned()
    }

    async fn admin_cookie(&self) -> String {
        self.sign_in("ada", PASSWORD).await
    }

    async fn register(&self, body: Value) -> Reply {
        self.send(
            "POST",
            "/oauth/register",
            &[("content-type", "application/json")],
            &body.to_string(),
        )
        .await
    }

    /// Registers a public client with [`REDIRECT`]; returns its id.
    async fn client(&self, name: &str) -> String {
        let response = self
            .register(json!({
                "client_name": name,
                "redirect_uris": [REDIRECT],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
            }))
            .await;
        assert_eq!(response.status, StatusCode::CREATED);
        let body = response.json();
        assert!(body.get("client_secret").is_none());
        body["client_id"].as_str().unwrap().to_owned()
    }

    /// `GET /oauth/authorize` with the given parameters.
    async fn authorize(&self, params: &[(&str, &str)]) -> Reply {
        self.authorize_with(None, params).await
    }

    /// `GET /oauth/authorize` as a browser with the session `cookie` (if any)
    /// would send it on a top-level navigation.
    async fn authorize_with(&self, cookie: Option<&str>, params: &[(&str, &str)]) -> Reply {
        let query = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params)
            .finish();
        let headers: Vec<(&str, &str)> = cookie
            .map(|cookie| ("cookie", cookie))
            .into_iter()
            .collect();
        self.send("GET", &format!("/oauth/authorize?{query}"), &headers, "")
            .await
    }

    /// A valid authorization request for `client` asking for `scope`; returns
    /// the parked request id from the redirect to the Studio page.
    async fn request_id(&self, client: &str, scope: &str) -> String {
        self.request_id_for(client, scope, REDIRECT).await
    }

    /// [`OAuth::request_id`] with the redirect URI `redirect`.
    async fn request_id_for(&self, client: &str, scope: &str, redirect: &str) -> String {
        let challenge = challenge(VERIFIER);
        let resource = self.resource();
        let response = self
            .authorize(&[
                ("response_type", "code"),
                ("client_id", client),
                ("redirect_uri", redirect),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
                ("state", "st-123"),
                ("scope", scope),
                ("resource", &resource),
            ])
            .await;
        assert_eq!(response.status, StatusCode::SEE_OTHER);
        let location = response.headers["location"].to_str().unwrap();
        location
            .strip_prefix("/#/connect/")
            .unwrap_or_else(|| panic!("redirect to the consent page, got {location}"))
            .to_owned()
    }

    async fn consent_call(&self, cookie: &str, id: &str, action: &str, body: Value) -> Reply {
        self.send(
            "POST",
            &format!("/api/oauth/requests/{id}/{action}"),
            &[
                ("origin", STUDIO),
                ("cookie", cookie),
                ("content-type", "application/json"),
            ],
            &body.to_string(),
        )
        .await
    }

    /// Approves `id` with `scopes`; returns the code from the redirect.
    async fn approve(&self, cookie: &str, id: &str, scopes: &[&str]) -> String {
        self.approve_for(cookie, id, scopes, REDIRECT).await
    }

    /// [`OAuth::approve`] of a request for the redirect URI `expected`.
    async fn approve_for(&self, cookie: &str, id: &str, scopes: &[&str], expected: &str) -> String {
        let response = self
            .consent_call(cookie, id, "approve", json!({"scopes": scopes}))
            .await;
        assert_eq!(response.status, StatusCode::OK);
        let body = response.json();
        let redirect = url::Url::parse(body["redirectTo"].as_str().unwrap()).unwrap();
        assert!(redirect.as_str().starts_with(expected));
        let params: std::collections::HashMap<_, _> = redirect.query_pairs().into_owned().collect();
        assert_eq!(params["state"], "st-123");
        assert_eq!(params["iss"], self.origin());
        params["code"].clone()
    }

    /// `GET path` with `headers`; the JSON body.
    async fn get_json(&self, path: &str, headers: &[(&str, &str)]) -> Value {
        self.send("GET", path, headers, "").await.json()
    }

    /// `DELETE /api/oauth/connections/{id}` from `origin` with `cookie`.
    async fn delete_connection(&self, id: &str, origin: &str, cookie: &str) -> StatusCode {
        self.send(
            "DELETE",
            &format!("/api/oauth/connections/{id}"),
            &[("origin", origin), ("cookie", cookie)],
            "",
        )
        .await
        .status
    }

    /// A POST to `path` with `headers` and a form body.
    async fn post_form_with(
        &self,
        path: &str,
        form: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> Reply {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let mut all: Vec<(&str, &str)> = headers.to_vec();
        if !headers.iter().any(|(name, _)| *name == "content-type") {
            all.push(("content-type", "application/x-www-form-urlencoded"));
        }
        self.send("POST", path, &all, &body).await
    }

    /// A form POST to `path`.
    async fn post_form(&self, path: &str, form: &[(&str, &str)]) -> Reply {
        self.post_form_with(path, form, &[]).await
    }

    /// A token request with `headers`: the status and the JSON body.
    async fn token_with(
        &self,
        form: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        let response = self.post_form_with("/oauth/token", form, headers).await;
        // RFC 6749 §5.1: token responses, and refusals, are never cached.
        assert_eq!(response.headers["cache-control"], "no-store");
        (response.status, response.json())
    }

    async fn token(&self, form: &[(&str, &str)]) -> (StatusCode, Value) {
        self.token_with(form, &[]).await
    }

    async fn exchange(&self, client: &str, code: &str, verifier: &str) -> (StatusCode, Value) {
        self.exchange_for(client, code, verifier, REDIRECT).await
    }

    /// [`OAuth::exchange`] of a code issued for the redirect URI `redirect`.
    async fn exchange_for(
        &self,
        client: &str,
        code: &str,
        verifier: &str,
        redirect: &str,
    ) -> (StatusCode, Value) {
        let resource = self.resource();
        self.token(&[
            ("grant_type", "authorization_code"),
            ("client_id", client),
            ("code", code),
            ("redirect_uri", redirect),
            ("code_verifier", verifier),
            ("resource", &resource),
        ])
        .await
    }

    async fn refresh(&self, client: &str, refresh_token: &str) -> (StatusCode, Value) {
        self.token(&[
            ("grant_type", "refresh_token"),
            ("client_id", client),
            ("refresh_token", refresh_token),
        ])
        .await
    }

    /// A whole consented connection: tokens for `scopes`.
    async fn connect(&self, cookie: &str, client: &str, scopes: &[&str]) -> Value {
        let id = self.request_id(client, &scopes.join(" ")).await;
        let code = self.approve(cookie, &id, scopes).await;
        let (status, tokens) = self.exchange(client, &code, VERIFIER).await;
        assert_eq!(status, StatusCode::OK, "{tokens}");
        tokens
    }

    /// Whether the gateway may use the access token `token` at this server's
    /// MCP resource: core's `Authenticate`, the call the gateway makes for
    /// every request, through the tonic service.
    async fn accepted(&self, token: &str) -> bool {
        use sasha_proto::pb::core_service_server::CoreService as _;
        let grpc = crate::grpc::CoreGrpc {
            core: self.world.core.clone(),
            entries: std::sync::Arc::default(),
        };
        let outcome = grpc
            .authenticate(tonic::Request::new(sasha_proto::pb::AuthenticateRequest {
                kind: "bearer".to_owned(),
                credential: token.to_owned(),
                resource: self.resource(),
            }))
            .await;
        match outcome {
            Ok(_) => true,
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
                false
            }
        }
    }

    /// [`OAuth::accepted`] for the access token of `tokens`.
    async fn accepts(&self, tokens: &Value) -> bool {
        self.accepted(tokens["access_token"].as_str().unwrap())
            .await
    }
}

/// Form parameters or headers, as owned values.
type Pairs = Vec<(&'static str, String)>;
/// Query parameters of an authorization request.
type Query<'a> = Vec<(&'a str, &'a str)>;

/// An authorization error shown on the Studio page and redirected nowhere:
/// 400, no `Location`, never cached, the page saying `says`.
fn assert_shown_not_redirected(response: Reply, says: &str) -> String {
    assert_eq!(response.status, StatusCode::BAD_REQUEST, "{says}");
    assert!(
        response.headers.get("location").is_none(),
        "{says}: redirected to {:?}",
        response.headers.get("location")
    );
    assert_eq!(response.headers["cache-control"], "no-store");
    let page = response.text();
    assert!(page.contains(says), "{says}: {page}");
    page
}

/// An authorization error sent back to `redirect`: 303 to it with `error`,
/// `state` and `iss`.
fn assert_redirected_back(
    response: &Reply,
    redirect: &str,
    error: &str,
    state: &str,
    issuer: &str,
) {
    assert_eq!(response.status, StatusCode::SEE_OTHER, "{error}");
    let location = url::Url::parse(response.headers["location"].to_str().unwrap()).unwrap();
    assert!(
        location.as_str().starts_with(redirect),
        "{error}: {location}"
    );
    let params: std::collections::HashMap<_, _> = location.query_pairs().into_owned().collect();
    assert_eq!(params["error"], error);
    assert_eq!(params["state"], state);
    assert_eq!(params["iss"], issuer);
}

/// The refusal of a token request: status, OAuth error, and the envelope.
fn assert_oauth_error(outcome: &(StatusCode, Value), status: StatusCode, error: &str) {
    let (got, body) = outcome;
    assert_eq!(*got, status, "{body}");
    assert_eq!(body["error"], error, "{body}");
    assert!(
        body["error_description"]
            .as_str()
            .is_some_and(|d| !d.is_empty()),
        "{body}"
    );
    assert!(
        body["code"].as_str().is_some_and(|c| c.starts_with("APP_")),
        "{body}"
    );
    assert!(body["diagnosticId"].as_str().is_some(), "{body}");
    assert!(body["retryable"].is_boolean(), "{body}");
}

#[tokio::test]
async fn codes_verifiers_redirects_and_resources_are_checked() {
    let world = OAuth::start();
    let cookie = world.admin_cookie().await;
    let client = world.client("Checked Client").await;
    let other_client = world.client("Other Client").await;
    let resource = world.resource();
    let challenge = challenge(VERIFIER);

    // Wrong PKCE verifier: refused, and the code is spent.
    let id = world.request_id(&client, "apps:invoke").await;
    let code = world.approve(&cookie, &id, &["apps:invoke"]).await;
    let wrong = "w".repeat(50);
    assert_oauth_error(
        &world.exchange(&client, &code, &wrong).await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
    );
    assert_oauth_error(
        &world.exchange(&client, &code, VERIFIER).await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
    );

    // A reused code: refused, and the tokens of its first use are revoked.
    let id = world.request_id(&client, "apps:invoke").await;
    let code = world.approve(&cookie, &id, &["apps:invoke"]).await;
    let (status, first) = world.exchange(&client, &code, VERIFIER).await;
    assert_eq!(status, StatusCode::OK);
    let first_access = first["access_token"].as_str().unwrap();
    assert!(world.accepted(first_access).await);
    assert_oauth_error(
        &world.exchange(&client, &code, VERIFIER).await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
    );
    assert!(!world.accepted(first_access).await);

    // A code presented by another client.
    let id = world.request_id(&client, "apps:invoke").await;
    let code = world.approve(&cookie, &id, &["apps:invoke"]).await;
    assert_oauth_error(
        &world.exchange(&other_client, &code, VERIFIER).await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
    );

    // Redirect mismatch at the authorization endpoint: an error page, never a
    // redirect to the unregistered address.
    for bad in [
        "http://127.0.0.1:4567/callback/extra",
        "http://evil.example/callback",
        "https://127.0.0.1:4567/callback",
    ] {
        let response = world
            .authorize(&[
                ("response_type", "code"),
                ("client_id", &client),
                ("redirect_uri", bad),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
            ])
            .await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(response.headers.get("location").is_none());
        let page = response.text();
        assert!(
            page.contains("redirect URI is not one the client registered"),
            "{page}"
        );
    }
    // A loopback IP literal may change its port (RFC 8252 §7.3), and the code
    // is then bound to that exact URI.
    let moved = "http://127.0.0.1:9999/callback";
    let response = world
        .authorize(&[
            ("response_type", "code"),
            ("client_id", &client),
            ("redirect_uri", moved),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
            ("state", "st-123"),
        ])
        .await;
    assert_eq!(response.status, StatusCode::SEE_OTHER);
    let id = response.headers["location"].to_str().unwrap()["/#/connect/".len()..].to_owned();
    let response = world
        .consent_call(&cookie, &id, "approve", json!({"scopes": ["apps:invoke"]}))
        .await;
    let body: Value = response.json();
    let redirect_to = url::Url::parse(body["redirectTo"].as_str().unwrap()).unwrap();
    assert_eq!(redirect_to.port(), Some(9999));
    let code = redirect_to
        .query_pairs()
        .find(|(k, _)| k == "code")
        .unwrap()
        .1
        .into_owned();
    // Redirect mismatch at the token endpoint.
    assert_oauth_error(
        &world.exchange(&client, &code, VERIFIER).await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
    );

    // Every other error goes back to the client only when its redirect URI
    // is trusted: the signed-in person has a live connection to this client
    // for it (RFC 9700 §4.11.2). Until then it is shown on the page. Every
    // connection of the admin to `client` above was revoked, so even the
    // admin's session earns no redirect yet.
    let long_state = "s".repeat(1025);
    // (parameters, the OAuth error, what the page says)
    let cases: Vec<(Query<'_>, &str, &str)> = vec![
        (
            vec![("response_type", "token"), ("state", "st-9")],
            "unsupported_response_type",
            "response_type must be code",
        ),
        (
            vec![
                ("response_type", "code"),
                ("code_challenge_method", "S256"),
                ("state", "st-9"),
            ],
            "invalid_request",
            "a PKCE code_challenge",
        ),
        (
            vec![
                ("response_type", "code"),
                ("code_challenge", challenge.as_str()),
                ("code_challenge_method", "plain"),
                ("state", "st-9"),
            ],
            "invalid_request",
            "must be S256",
        ),
        (
            vec![
                ("response_type", "code"),
                ("code_challenge", challenge.as_str()),
                ("code_challenge_method", "S256"),
                ("resource", "https://other.example/mcp"),
                ("state", "st-9"),
            ],
            "invalid_target",
            "only for this server's MCP resource",
        ),
        // A state longer than 1024 characters.
        (
            vec![
                ("response_type", "code"),
                ("code_challenge", challenge.as_str()),
                ("code_challenge_method", "S256"),
                ("state", long_state.as_str()),
            ],
            "invalid_request",
            "state has at most 1024 characters",
        ),
    ];
    // The whole request: the client, `redirect` and `params`.
    let request = |redirect: &str, params: &[(&str, &str)]| -> Vec<(String, String)> {
        [("client_id", client.as_str()), ("redirect_uri", redirect)]
            .iter()
            .chain(params)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    for (params, error, says) in &cases {
        let all = request(REDIRECT, params);
        let all: Vec<(&str, &str)> = all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        for cookie in [None, Some(cookie.as_str())] {
            let response = world.authorize_with(cookie, &all).await;
            let page = assert_shown_not_redirected(response, says);
            assert!(page.contains(error), "{page}");
            assert!(
                page.contains("did not send you to 127.0.0.1:4567"),
                "{page}"
            );
        }
    }
    // Once the admin has a live connection to the client for this redirect
    // URI, the same errors go back to it with state and iss (a loopback IP
    // literal's port may differ, as in registration) — for the admin only.
    world.connect(&cookie, &client, &["apps:invoke"]).await;
    let member_cookie = world.sign_in(MEMBER, PASSWORD).await;
    for (params, error, says) in &cases {
        let state = params
            .iter()
            .find(|(name, _)| *name == "state")
            .map(|(_, value)| *value)
            .unwrap();
        for redirect in [REDIRECT, "http://127.0.0.1:9999/callback"] {
            let all = request(redirect, params);
            let all: Vec<(&str, &str)> =
                all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let response = world.authorize_with(Some(&cookie), &all).await;
            assert_redirected_back(&response, redirect, error, state, &world.origin());
            for other in [None, Some(member_cookie.as_str())] {
                let response = world.authorize_with(other, &all).await;
                assert_shown_not_redirected(response, says);
            }
        }
    }

    // Requests that cannot be trusted to redirect get a page, never a
    // redirect: an unknown or missing client, or a parameter given twice.
    let repeated = world
        .authorize(&[
            ("client_id", client.as_str()),
            ("redirect_uri", REDIRECT),
            ("redirect_uri", "http://evil.example/cb"),
        ])
        .await;
    let unknown = world
        .authorize(&[
            ("response_type", "code"),
            ("client_id", "sasha_client_nope"),
            ("redirect_uri", REDIRECT),
        ])
        .await;
    let missing = world
        .authorize(&[("response_type", "code"), ("redirect_uri", REDIRECT)])
        .await;
    for (case, response, says) in [
        ("a repeated parameter", repeated, "repeated"),
        ("an unknown client", unknown, "not registered"),
        ("no client", missing, "client_id is missing"),
    ] {
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{case}");
        assert!(response.headers.get("location").is_none(), "{case}");
        assert_eq!(response.headers["cache-control"], "no-store", "{case}");
        let page = response.text();
        assert!(page.contains(says), "{case}: {page}");
        assert!(!page.contains("evil.example"), "{case}");
    }

    // A token for another resource is refused at the token endpoint …
    let id = world.request_id(&client, "apps:invoke").await;
    let code = world.approve(&cookie, &id, &["apps:invoke"]).await;
    assert_oauth_error(
        &world
            .token(&[
                ("grant_type", "authorization_code"),
                ("client_id", &client),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("code_verifier", VERIFIER),
                ("resource", "https://other.example/mcp"),
            ])
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_target",
    );
    // … and a token issued for another resource is refused by the gateway,
    // never passed through.
    let admin = world.store().user_by_name("ada").unwrap().unwrap();
    let foreign_client = world
        .store()
        .oauth_register_client("Foreign", &[REDIRECT.to_owned()], ClientAuthMethod::None)
        .unwrap()
        .unwrap();
    let invoke: BTreeSet<Scope> = [Scope::AppsInvoke].into();
    let foreign_code = world
        .store()
        .oauth_consent(&Consent {
            client_id: &foreign_client.client.client_id,
            user_id: &admin.id,
            scopes: &invoke,
            resource: "https://other.example/mcp",
            redirect_uri: REDIRECT,
            code_challenge: &challenge,
        })
        .unwrap();
    let foreign = world
        .store()
        .oauth_exchange_code(&CodeExchange {
            client_id: &foreign_client.client.client_id,
            code: &foreign_code,
            redirect_uri: REDIRECT,
            code_verifier: VERIFIER,
            resource: None,
        })
        .unwrap()
        .unwrap();
    assert!(!world.accepted(&foreign.access_token).await);
    let _ = resource;
}

/// Issue 21, "no open redirect": anyone may register any https redirect URI,
/// so an erroneous authorization request for a freshly registered client is
/// shown on the Studio page with no `Location`, signed in or not; the same
/// error goes back to the client (with `state` and `iss`) only once the
/// signed-in person has a live connection to it for that URI, and no longer
/// once they revoke it.
#[tokio::test]
async fn errors_redirect_only_to_a_redirect_uri_the_person_connected() {
    const ATTACKER: &str = "https://attacker.example/steal";
    let world = OAuth::start();
    let cookie = world.admin_cookie().await;
    let member_cookie = world.sign_in(MEMBER, PASSWORD).await;
    let response = world
        .register(json!({
            "client_name": "Totally Legit Client",
            "redirect_uris": [ATTACKER],
            "token_endpoint_auth_method": "none",
        }))
        .await;
    assert_eq!(response.status, StatusCode::CREATED);
    let registered: Value = response.json();
    let client = registered["client_id"].as_str().unwrap().to_owned();
    let erroneous = [
        ("client_id", client.as_str()),
        ("redirect_uri", ATTACKER),
        ("response_type", "x"),
        ("state", "st-7"),
    ];
    // The single registered URI is used when the request names none.
    let unnamed = [
        ("client_id", client.as_str()),
        ("response_type", "x"),
        ("state", "st-7"),
    ];
    for params in [&erroneous[..], &unnamed[..]] {
        for who in [None, Some(cookie.as_str()), Some(member_cookie.as_str())] {
            let response = world.authorize_with(who, params).await;
            let page = assert_shown_not_redirected(response, "response_type must be code");
            assert!(page.contains("unsupported_response_type"), "{page}");
            assert!(
                page.contains("did not send you to attacker.example"),
                "{page}"
            );
        }
    }
    // The admin connects it: after the consent card, the redirect is the
    // person's own choice.
    let id = world.request_id_for(&client, "apps:invoke", ATTACKER).await;
    let code = world
        .approve_for(&cookie, &id, &["apps:invoke"], ATTACKER)
        .await;
    let (status, tokens) = world.exchange_for(&client, &code, VERIFIER, ATTACKER).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    for params in [&erroneous[..], &unnamed[..]] {
        let response = world.authorize_with(Some(&cookie), params).await;
        assert_redirected_back(
            &response,
            ATTACKER,
            "unsupported_response_type",
            "st-7",
            &world.origin(),
        );
        for other in [None, Some(member_cookie.as_str())] {
            let response = world.authorize_with(other, params).await;
            assert_shown_not_redirected(response, "response_type must be code");
        }
    }
    // Revoking the connection withdraws the trust.
    let connections = world
        .get_json("/api/oauth/connections", &[("cookie", &cookie)])
        .await;
    let connection = connections["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|connection| connection["clientId"] == client.as_str())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        world
            .delete_connection(&connection, &world.origin(), &cookie)
            .await,
        StatusCode::NO_CONTENT
    );
    let response = world.authorize_with(Some(&cookie), &erroneous).await;
    assert_shown_not_redirected(response, "response_type must be code");
}

#[tokio::test]
async fn a_reused_refresh_token_revokes_the_family() {
    let world = OAuth::start();
    let cookie = world.admin_cookie().await;
    let client = world.client("Refreshing Client").await;
    let first = world.connect(&cookie, &client, &["apps:invoke"]).await;
    let (status, second) = world
        .refresh(&client, first["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, third) = world
        .refresh(&client, second["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(world.accepts(&third).await);
    // The first refresh token comes back: everything in the family dies.
    assert_oauth_error(
        &world
            .refresh(&client, first["refresh_token"].as_str().unwrap())
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
    );
    for tokens in [&first, &second, &third] {
        assert!(!world.accepts(tokens).await);
    }
    assert_oauth_error(
        &world
            .refresh(&client, third["refresh_token"].as_str().unwrap())
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
    );
    let listed: Value = world
        .get_json("/api/oauth/connections", &[("cookie", &cookie)])
        .await;
    assert_eq!(listed["connections"], json!([]));
}

#[tokio::test]
async fn registration_and_client_authentication_are_checked() {
    let world = OAuth::start();
    for (body, error) in [
        (
            json!({"redirect_uris": ["http://client.example.com/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["https://client.example.com/cb#x"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["javascript:alert(1)"]}),
            "invalid_redirect_uri",
        ),
        (json!({"redirect_uris": []}), "invalid_redirect_uri"),
        (json!({}), "invalid_redirect_uri"),
        (
            json!({"redirect_uris": vec![REDIRECT; 11]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": [REDIRECT], "client_name": "x".repeat(101)}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": [REDIRECT], "grant_types": ["client_credentials"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": [REDIRECT], "response_types": ["token"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt"}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": "not a list"}),
            "invalid_client_metadata",
        ),
    ] {
        let response = world.register(body.clone()).await;
        let status = response.status;
        let body_text: Value = response.json();
        assert_oauth_error(&(status, body_text), StatusCode::BAD_REQUEST, error);
        let _ = body;
    }
    let oversized = world
        .send(
            "POST",
            "/oauth/register",
            &[("content-type", "application/json")],
            &format!(
                "{{\"redirect_uris\":[\"{REDIRECT}\"],\"x\":\"{}\"}}",
                "y".repeat(20_000)
            ),
        )
        .await;
    assert_eq!(oversized.status, StatusCode::BAD_REQUEST);
    let form_body = world
        .post_form("/oauth/register", &[("redirect_uris", REDIRECT)])
        .await;
    let status = form_body.status;
    assert_oauth_error(
        &(status, form_body.json()),
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );

    // A confidential client gets a secret and must present it.
    let response = world
        .register(json!({"client_name": "Server", "redirect_uris": [REDIRECT]}))
        .await;
    assert_eq!(response.status, StatusCode::CREATED);
    let registered: Value = response.json();
    assert_eq!(
        registered["token_endpoint_auth_method"],
        "client_secret_basic"
    );
    let secret = registered["client_secret"].as_str().unwrap();
    let id = registered["client_id"].as_str().unwrap();
    let basic = |user: &str, password: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )
    };
    let (right, wrong) = (basic(id, secret), basic(id, "sasha_cs_wrong"));
    let refresh = [
        ("grant_type", "refresh_token"),
        ("refresh_token", "sasha_rt_x"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, String)> {
        refresh
            .iter()
            .chain(extra)
            .map(|(name, value)| (*name, (*value).to_owned()))
            .collect()
    };
    // Client authentication first: a refresh token that does not exist is
    // `invalid_grant` only for a client that authenticated.
    // (case, form, headers, status, OAuth error)
    let cases: Vec<(&str, Pairs, Pairs, StatusCode, &str)> = vec![
        (
            "no secret",
            with(&[])
                .into_iter()
                .chain([("client_id", id.to_owned())])
                .collect(),
            vec![],
            StatusCode::UNAUTHORIZED,
            "invalid_client",
        ),
        (
            "wrong secret in the body",
            with(&[("client_secret", "sasha_cs_wrong")])
                .into_iter()
                .chain([("client_id", id.to_owned())])
                .collect(),
            vec![],
            StatusCode::UNAUTHORIZED,
            "invalid_client",
        ),
        (
            "secret in the body",
            with(&[])
                .into_iter()
                .chain([
                    ("client_id", id.to_owned()),
                    ("client_secret", secret.to_owned()),
                ])
                .collect(),
            vec![],
            StatusCode::BAD_REQUEST,
            "invalid_grant",
        ),
        (
            "HTTP Basic",
            with(&[]),
            vec![("authorization", right.clone())],
            StatusCode::BAD_REQUEST,
            "invalid_grant",
        ),
        (
            "wrong HTTP Basic",
            with(&[]),
            vec![("authorization", wrong.clone())],
            StatusCode::UNAUTHORIZED,
            "invalid_client",
        ),
        (
            "malformed HTTP Basic",
            with(&[]),
            vec![("authorization", "Basic %%%".to_owned())],
            StatusCode::UNAUTHORIZED,
            "invalid_client",
        ),
        (
            "Basic and another client_id",
            with(&[("client_id", "sasha_client_other")]),
            vec![("authorization", right.clone())],
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "an unknown client",
            with(&[("client_id", "sasha_client_nope")]),
            vec![],
            StatusCode::UNAUTHORIZED,
            "invalid_client",
        ),
        (
            "no client at all",
            with(&[]),
            vec![],
            StatusCode::UNAUTHORIZED,
            "invalid_client",
        ),
        (
            "a repeated parameter",
            with(&[("grant_type", "authorization_code")]),
            vec![("authorization", right.clone())],
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "an unknown scope on refresh",
            with(&[("scope", "apps:everything")]),
            vec![("authorization", right.clone())],
            StatusCode::BAD_REQUEST,
            "invalid_scope",
        ),
        (
            "another resource",
            with(&[("resource", "https://other.example/mcp")]),
            vec![("authorization", right.clone())],
            StatusCode::BAD_REQUEST,
            "invalid_target",
        ),
        (
            "the password grant",
            vec![("grant_type", "password".to_owned())],
            vec![("authorization", right.clone())],
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
        ),
        (
            "no grant type",
            vec![],
            vec![("authorization", right.clone())],
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "a code without its verifier",
            vec![
                ("grant_type", "authorization_code".to_owned()),
                ("code", "c".to_owned()),
                ("redirect_uri", REDIRECT.to_owned()),
            ],
            vec![("authorization", right.clone())],
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "a body that is not a form",
            with(&[]),
            vec![
                ("authorization", right.clone()),
                ("content-type", "application/json".to_owned()),
            ],
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
    ];
    for (case, form, headers, status, error) in cases {
        let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let outcome = world.token_with(&form, &headers).await;
        assert_eq!(outcome.0, status, "{case}: {}", outcome.1);
        assert_oauth_error(&outcome, status, error);
    }
    // A client that failed to authenticate is told how (RFC 6749 §5.2).
    let refused = world
        .post_form_with(
            "/oauth/token",
            &[("grant_type", "refresh_token")],
            &[("authorization", &wrong)],
        )
        .await;
    assert!(
        refused.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic")
    );
    // Revocation authenticates the client the same way and needs the token.
    let revoke = world
        .post_form_with("/oauth/revoke", &[], &[("authorization", &right)])
        .await;
    assert_eq!(revoke.status, StatusCode::BAD_REQUEST);
    let revoke = world
        .post_form_with(
            "/oauth/revoke",
            &[("token", "sasha_rt_x")],
            &[("authorization", &wrong)],
        )
        .await;
    assert_eq!(revoke.status, StatusCode::UNAUTHORIZED);
    let revoke = world
        .post_form_with(
            "/oauth/revoke",
            &[("token", "sasha_rt_unknown")],
            &[("authorization", &right)],
        )
        .await;
    assert_eq!(revoke.status, StatusCode::OK);
}

#[tokio::test]
async fn a_member_cannot_consent_to_apps_write() {
    let world = OAuth::start();
    let cookie = world.sign_in(MEMBER, PASSWORD).await;
    let client = world.client("Member Client").await;
    let id = world.request_id(&client, "apps:invoke apps:write").await;
    let details: Value = world
        .get_json(&format!("/api/oauth/requests/{id}"), &[("cookie", &cookie)])
        .await;
    assert_eq!(details["unavailableScopes"], json!(["apps:write"]));
    // A member may give a client apps:invoke and apps:author, never apps:write.
    assert_eq!(details["offeredScopes"].as_array().unwrap().len(), 2);
    assert_eq!(details["offeredScopes"][0]["scope"], "apps:invoke");
    assert_eq!(details["offeredScopes"][1]["scope"], "apps:author");
    // Consent is a same-origin JSON request from a signed-in browser session.
    let approve_url = format!("/api/oauth/requests/{id}/approve");
    let body = json!({"scopes": ["apps:invoke"]}).to_string();
    let member_token = format!(
        "Bearer {}",
        world
            .store()
            .mint_token(
                &world.world.member.id,
                studio_store::TokenKind::Access,
                &[Scope::ChatUse, Scope::AppsInvoke].into(),
                None,
            )
            .unwrap()
    );
    for (case, headers, status) in [
        (
            "another origin",
            vec![
                ("origin", "https://evil.example"),
                ("cookie", cookie.as_str()),
                ("content-type", "application/json"),
            ],
            StatusCode::FORBIDDEN,
        ),
        (
            "a text/plain body",
            vec![
                ("origin", &world.origin()[..]),
                ("cookie", cookie.as_str()),
                ("content-type", "text/plain"),
            ],
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "anonymous",
            vec![
                ("origin", &world.origin()[..]),
                ("content-type", "application/json"),
            ],
            StatusCode::UNAUTHORIZED,
        ),
    ] {
        let response = world.send("POST", &approve_url, &headers, &body).await;
        assert_eq!(response.status, status, "{case}");
    }
    let bearer = world
        .send(
            "POST",
            &approve_url,
            &[
                ("origin", STUDIO),
                ("content-type", "application/json"),
                ("authorization", &member_token),
            ],
            &body,
        )
        .await;
    assert_eq!(
        bearer.status,
        StatusCode::NOT_FOUND,
        "a bearer token cannot consent"
    );
    // Asking anyway is refused, and the request survives the refusal.
    let refused = world
        .consent_call(
            &cookie,
            &id,
            "approve",
            json!({"scopes": ["apps:invoke", "apps:write"]}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let envelope: Value = refused.json();
    assert_eq!(envelope["code"], "APP_ACCESS_DENIED");
    assert!(envelope["message"].as_str().unwrap().contains("apps:write"));
    for (scopes, status) in [
        (json!([]), StatusCode::BAD_REQUEST),
        (json!(["chat:use"]), StatusCode::BAD_REQUEST),
        (json!(["apps:everything"]), StatusCode::BAD_REQUEST),
    ] {
        let response = world
            .consent_call(&cookie, &id, "approve", json!({ "scopes": scopes }))
            .await;
        assert_eq!(response.status, status, "{scopes}");
        let envelope: Value = response.json();
        assert_eq!(envelope["code"], "APP_INPUT_INVALID");
    }
    let code = world.approve(&cookie, &id, &["apps:invoke"]).await;
    let (status, tokens) = world.exchange(&client, &code, VERIFIER).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(tokens["scope"], "apps:invoke");
    // Which tools it lists is the gateway's (`tests/process/oauth.rs`).
    assert!(world.accepts(&tokens).await);

    // Denying sends the person back with access_denied and the state.
    let id = world.request_id(&client, "apps:invoke").await;
    let response = world.consent_call(&cookie, &id, "deny", json!({})).await;
    let body: Value = response.json();
    let redirect = url::Url::parse(body["redirectTo"].as_str().unwrap()).unwrap();
    let params: std::collections::HashMap<_, _> = redirect.query_pairs().into_owned().collect();
    assert_eq!(params["error"], "access_denied");
    assert_eq!(params["state"], "st-123");
}

/// A password reset ends every way in the person had, as the gateway and
/// the API see them on their next request: the connected client's access
/// token and refresh token, a personal API key, and the browser session;
/// another person's connection lives on.
#[tokio::test]
async fn a_password_reset_ends_the_persons_connections_and_keys_at_their_next_request() {
    let world = OAuth::start();
    let admin = world.admin_cookie().await;
    let client = world.client("Reset Client").await;
    let mia_cookie = world.sign_in(MEMBER, PASSWORD).await;
    let mia_tokens = world.connect(&mia_cookie, &client, &["apps:invoke"]).await;
    let ada_tokens = world.connect(&admin, &client, &["apps:invoke"]).await;
    let mia = world.store().user_by_name(MEMBER).unwrap().unwrap();
    let key = world.world.bearer(&mia, &[Scope::AppsInvoke]);
    // A key and a connected client are the gateway's, which asks
    // `Authenticate` on every request ([`OAuth::accepted`]); a session is
    // Studio's.
    let me = |headers: Vec<(&'static str, String)>| {
        let world = &world;
        async move {
            let headers: Vec<(&str, &str)> = headers
                .iter()
                .map(|(name, value)| (*name, value.as_str()))
                .collect();
            world.send("GET", "/api/apps", &headers, "").await.status
        }
    };
    assert!(world.accepts(&mia_tokens).await);
    let secret = key.strip_prefix("Bearer ").unwrap().to_owned();
    assert!(world.accepted(&secret).await, "the API key works before");
    assert_eq!(
        me(vec![("cookie", mia_cookie.clone())]).await,
        StatusCode::OK
    );

    let made = world
        .send(
            "POST",
            "/api/users/mia/password-reset",
            &[("cookie", &admin), ("origin", STUDIO)],
            "",
        )
        .await;
    assert_eq!(made.status, StatusCode::OK);
    let url = made.json()["reset"]["url"].as_str().unwrap().to_owned();
    let token = url.split_once("/#/reset/").unwrap().1;
    let used = world
        .send(
            "POST",
            "/api/invitation/accept",
            &[("origin", STUDIO), ("content-type", "application/json")],
            &json!({"token": token, "password": "a brand new password"}).to_string(),
        )
        .await;
    assert_eq!(used.status, StatusCode::OK);

    assert!(!world.accepts(&mia_tokens).await, "the access token ended");
    assert_oauth_error(
        &world
            .refresh(&client, mia_tokens["refresh_token"].as_str().unwrap())
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
    );
    assert!(!world.accepted(&secret).await, "the API key ended");
    assert_ne!(
        me(vec![("cookie", mia_cookie.clone())]).await,
        StatusCode::OK,
        "the browser session ended"
    );
    assert!(world.accepts(&ada_tokens).await, "ada's connection lives");
}

/// Two studio-core replicas over one core database: an authorization parked
/// by one is shown and decided by the other, its code is exchanged through
/// the first, and the request is gone for both.
#[tokio::test]
async fn an_authorization_started_on_one_replica_is_decided_on_another() {
    let oauth = OAuth::start();
    let client = oauth.client("Two replicas").await;
    let cookie = oauth.admin_cookie().await;
    let id = oauth.request_id(&client, "apps:invoke").await;
    let replica = oauth.world.replica();
    let shown = World::raw_on(
        &replica,
        "GET",
        &format!("/api/oauth/requests/{id}"),
        &[("cookie", &cookie)],
        "",
    )
    .await;
    assert_eq!(shown.status, StatusCode::OK);
    assert_eq!(
        shown.json()["client"]["name"],
        "Two replicas",
        "{}",
        shown.json()
    );
    let decided = World::raw_on(
        &replica,
        "POST",
        &format!("/api/oauth/requests/{id}/approve"),
        &[
            ("origin", STUDIO),
            ("cookie", &cookie),
            ("content-type", "application/json"),
        ],
        &json!({"scopes": ["apps:invoke"]}).to_string(),
    )
    .await;
    assert_eq!(decided.status, StatusCode::OK);
    let redirect = url::Url::parse(decided.json()["redirectTo"].as_str().unwrap()).unwrap();
    let code = redirect
        .query_pairs()
        .find(|(name, _)| name == "code")
        .unwrap()
        .1
        .into_owned();
    let (status, tokens) = oauth.exchange(&client, &code, VERIFIER).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    assert!(tokens["access_token"].is_string());
    let again = oauth
        .consent_call(&cookie, &id, "approve", json!({"scopes": ["apps:invoke"]}))
        .await;
    assert_eq!(
        again.status,
        StatusCode::NOT_FOUND,
        "decided once, on any replica"
    );
}
