//! OAuth 2.1 for MCP clients through the real interfaces: `sasha up` (Studio
//! and `/mcp` on `http://localhost:<port>`), plain HTTP for discovery,
//! registration, the authorization endpoint, the consent API a signed-in
//! Studio page calls, the token and revocation endpoints, and MCP calls with
//! the tokens. The browser and the official SDK client drive the same flow in
//! `browser_oauth.rs`; this file holds every refusal.

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;

use base64::Engine as _;
use common::mcp::{Mcp, tool_names};
use common::stack::{MEMBER_PASSWORD, UpStack};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Digest as _;
use studio_core::store::{ClientAuthMethod, CodeExchange, Consent, Scope};

const MEMBER: &str = "mia";
const REDIRECT: &str = "http://127.0.0.1:4567/callback";
const VERIFIER: &str = "a-verifier-long-enough-to-satisfy-rfc-7636-rules-0123456789";

fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

/// The running system ([`UpStack`]) and an HTTP client that follows no
/// redirects.
struct World {
    stack: UpStack,
    http: reqwest::Client,
}

impl World {
    async fn start() -> World {
        let stack = UpStack::start(MEMBER).await;
        let http = World::client_from(&stack, [127, 0, 0, 1]);
        World { stack, http }
    }

    /// An HTTP client that follows no redirects and connects to the ingress
    /// from the loopback address `from`, which the ingress reports to
    /// studio-core as the client address (`X-Forwarded-For`).
    fn client_from(stack: &UpStack, from: [u8; 4]) -> reqwest::Client {
        let _ = common::http_client();
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .resolve("localhost", SocketAddr::from(([127, 0, 0, 1], stack.port)))
            .local_address(std::net::IpAddr::from(from))
            .build()
            .unwrap()
    }

    fn origin(&self) -> String {
        self.stack.origin()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin())
    }

    fn resource(&self) -> String {
        self.url("/mcp")
    }

    /// Signs in through the Studio API; returns the `Cookie` header value.
    async fn sign_in(&self, username: &str, password: &str) -> String {
        let response = self
            .http
            .post(self.url("/api/auth/login"))
            .header("origin", self.origin())
            .json(&json!({"username": username, "password": password}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "sign-in of {username}");
        let cookie = response.headers()["set-cookie"].to_str().unwrap();
        cookie.split(';').next().unwrap().to_owned()
    }

    async fn admin_cookie(&self) -> String {
        self.sign_in(&self.stack.admin_name, &self.stack.admin_password)
            .await
    }

    async fn register(&self, body: Value) -> reqwest::Response {
        self.http
            .post(self.url("/oauth/register"))
            .json(&body)
            .send()
            .await
            .unwrap()
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
        assert_eq!(response.status(), StatusCode::CREATED);
        let body: Value = response.json().await.unwrap();
        assert!(body.get("client_secret").is_none());
        body["client_id"].as_str().unwrap().to_owned()
    }

    /// `GET /oauth/authorize` with the given parameters (no redirect followed).
    async fn authorize(&self, params: &[(&str, &str)]) -> reqwest::Response {
        self.authorize_with(None, params).await
    }

    /// `GET /oauth/authorize` as a browser with the session `cookie` (if any)
    /// would send it on a top-level navigation.
    async fn authorize_with(
        &self,
        cookie: Option<&str>,
        params: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut url = url::Url::parse(&self.url("/oauth/authorize")).unwrap();
        url.query_pairs_mut().extend_pairs(params);
        let mut request = self.http.get(url);
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        request.send().await.unwrap()
    }

    /// A valid authorization request for `client` asking for `scope`; returns
    /// the parked request id from the redirect to the Studio page.
    async fn request_id(&self, client: &str, scope: &str) -> String {
        self.request_id_for(client, scope, REDIRECT).await
    }

    /// [`World::request_id`] with the redirect URI `redirect`.
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
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        let location = response.headers()["location"].to_str().unwrap();
        location
            .strip_prefix("/#/connect/")
            .unwrap_or_else(|| panic!("redirect to the consent page, got {location}"))
            .to_owned()
    }

    async fn consent_call(
        &self,
        cookie: &str,
        id: &str,
        action: &str,
        body: Value,
    ) -> reqwest::Response {
        self.http
            .post(self.url(&format!("/api/oauth/requests/{id}/{action}")))
            .header("origin", self.origin())
            .header("cookie", cookie)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// Approves `id` with `scopes`; returns the code from the redirect.
    async fn approve(&self, cookie: &str, id: &str, scopes: &[&str]) -> String {
        self.approve_for(cookie, id, scopes, REDIRECT).await
    }

    /// [`World::approve`] of a request for the redirect URI `expected`.
    async fn approve_for(&self, cookie: &str, id: &str, scopes: &[&str], expected: &str) -> String {
        let response = self
            .consent_call(cookie, id, "approve", json!({"scopes": scopes}))
            .await;
        assert_eq!(response.status(), StatusCode::OK);
        let body: Value = response.json().await.unwrap();
        let redirect = url::Url::parse(body["redirectTo"].as_str().unwrap()).unwrap();
        assert!(redirect.as_str().starts_with(expected));
        let params: std::collections::HashMap<_, _> = redirect.query_pairs().into_owned().collect();
        assert_eq!(params["state"], "st-123");
        assert_eq!(params["iss"], self.origin());
        params["code"].clone()
    }

    /// `GET path` with `headers`; the JSON body.
    async fn get_json(&self, path: &str, headers: &[(&str, &str)]) -> Value {
        let mut request = self.http.get(self.url(path));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.unwrap().json().await.unwrap()
    }

    /// `DELETE /api/oauth/connections/{id}` from `origin` with `cookie`.
    async fn delete_connection(&self, id: &str, origin: &str, cookie: &str) -> StatusCode {
        self.http
            .delete(self.url(&format!("/api/oauth/connections/{id}")))
            .header("origin", origin)
            .header("cookie", cookie)
            .send()
            .await
            .unwrap()
            .status()
    }

    /// A POST to `path` with `headers` and a form body.
    async fn post_form_with(
        &self,
        path: &str,
        form: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> reqwest::Response {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let mut request = self.http.post(self.url(path));
        if !headers.iter().any(|(name, _)| *name == "content-type") {
            request = request.header("content-type", "application/x-www-form-urlencoded");
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(body).send().await.unwrap()
    }

    /// A form POST to `path`.
    async fn post_form(&self, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
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
        assert_eq!(response.headers()["cache-control"], "no-store");
        let status = response.status();
        (status, response.json().await.unwrap())
    }

    async fn token(&self, form: &[(&str, &str)]) -> (StatusCode, Value) {
        self.token_with(form, &[]).await
    }

    async fn exchange(&self, client: &str, code: &str, verifier: &str) -> (StatusCode, Value) {
        self.exchange_for(client, code, verifier, REDIRECT).await
    }

    /// [`World::exchange`] of a code issued for the redirect URI `redirect`.
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

    /// The HTTP status of `tools/list` with the access token of `tokens`.
    async fn status(&self, tokens: &Value) -> u16 {
        self.tools(tokens["access_token"].as_str().unwrap()).await.0
    }

    /// `tools/list` with `token`: the HTTP status and the tool names.
    async fn tools(&self, token: &str) -> (u16, Vec<String>) {
        let mut mcp = Mcp::sessionless(&self.resource(), token);
        let exchange = mcp.request("tools/list", json!({})).await;
        if exchange.status == 200 {
            (200, tool_names(&exchange))
        } else {
            (exchange.status, Vec::new())
        }
    }
}

/// Form parameters or headers, as owned values.
type Pairs = Vec<(&'static str, String)>;
/// Query parameters of an authorization request.
type Query<'a> = Vec<(&'a str, &'a str)>;

/// An authorization error shown on the Studio page and redirected nowhere:
/// 400, no `Location`, never cached, the page saying `says`.
async fn assert_shown_not_redirected(response: reqwest::Response, says: &str) -> String {
    assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{says}");
    assert!(
        response.headers().get("location").is_none(),
        "{says}: redirected to {:?}",
        response.headers().get("location")
    );
    assert_eq!(response.headers()["cache-control"], "no-store");
    let page = response.text().await.unwrap();
    assert!(page.contains(says), "{says}: {page}");
    page
}

/// An authorization error sent back to `redirect`: 303 to it with `error`,
/// `state` and `iss`.
fn assert_redirected_back(
    response: &reqwest::Response,
    redirect: &str,
    error: &str,
    state: &str,
    issuer: &str,
) {
    assert_eq!(response.status(), StatusCode::SEE_OTHER, "{error}");
    let location = url::Url::parse(response.headers()["location"].to_str().unwrap()).unwrap();
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
async fn discovery_leads_from_the_401_to_the_authorization_server() {
    let world = World::start().await;
    let mut mcp = Mcp::sessionless(&world.resource(), "");
    let exchange = mcp.request("tools/list", json!({})).await;
    // An empty bearer is no credential at all.
    assert_eq!(exchange.status, 401);
    let challenge = exchange.headers["www-authenticate"].to_str().unwrap();
    let metadata_url = world.url("/.well-known/oauth-protected-resource/mcp");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
        "{challenge}"
    );
    // Clients ask for what using apps needs; more is chosen on the consent page.
    assert!(challenge.contains("scope=\"apps:invoke\""), "{challenge}");

    let metadata = world
        .get_json("/.well-known/oauth-protected-resource/mcp", &[])
        .await;
    assert_eq!(metadata["resource"], world.resource());
    assert_eq!(metadata["authorization_servers"], json!([world.origin()]));
    assert_eq!(
        metadata["scopes_supported"],
        json!(["apps:invoke", "apps:write", "apps:author"])
    );
    let root_form: Value = world
        .get_json("/.well-known/oauth-protected-resource", &[])
        .await;
    assert_eq!(root_form, metadata);

    let server: Value = world
        .get_json("/.well-known/oauth-authorization-server", &[])
        .await;
    assert_eq!(server["issuer"], world.origin());
    // Absolute URLs come from configuration, never from forwarded headers.
    let spoofed: Value = world
        .get_json(
            "/.well-known/oauth-authorization-server",
            &[
                ("x-forwarded-host", "evil.example"),
                ("forwarded", "host=evil.example;proto=https"),
            ],
        )
        .await;
    assert_eq!(spoofed, server);
    for (field, path) in [
        ("authorization_endpoint", "/oauth/authorize"),
        ("token_endpoint", "/oauth/token"),
        ("registration_endpoint", "/oauth/register"),
        ("revocation_endpoint", "/oauth/revoke"),
    ] {
        assert_eq!(server[field], world.url(path), "{field}");
    }
    assert_eq!(server["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(
        server["grant_types_supported"],
        json!(["authorization_code", "refresh_token"])
    );

    // Browser-based clients may read the metadata and call the token
    // endpoint from any origin (no credentials are involved) …
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
    ] {
        let response = world
            .http
            .get(world.url(path))
            .header("origin", "https://inspector.example")
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.headers()["access-control-allow-origin"],
            "*",
            "{path}"
        );
    }
    let preflight = world
        .http
        .request(reqwest::Method::OPTIONS, world.url("/oauth/token"))
        .header("origin", "https://inspector.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), StatusCode::NO_CONTENT);
    assert_eq!(preflight.headers()["access-control-allow-origin"], "*");
    assert!(
        preflight.headers()["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    // … but the consent and connections API, which reads the session
    // cookie, answers no other origin.
    let cookie = world.admin_cookie().await;
    let listed = world
        .http
        .get(world.url("/api/oauth/connections"))
        .header("origin", "https://inspector.example")
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert!(
        listed
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );

    // A bad token gets the same pointer and says the token is invalid.
    let mut mcp = Mcp::sessionless(&world.resource(), "sasha_at_not-a-token");
    let exchange = mcp.request("tools/list", json!({})).await;
    assert_eq!(exchange.status, 401);
    let challenge = exchange.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains("error=\"invalid_token\"") && challenge.contains("resource_metadata=")
    );
}

#[tokio::test]
async fn a_consented_connection_lists_tools_by_scope_refreshes_and_is_revoked() {
    let world = World::start().await;
    let cookie = world.admin_cookie().await;
    let client = world.client("Desk Client").await;

    // The consent card's data: the client, where it returns, the scopes.
    let id = world.request_id(&client, "apps:invoke apps:write").await;
    let details: Value = world
        .get_json(&format!("/api/oauth/requests/{id}"), &[("cookie", &cookie)])
        .await;
    assert_eq!(details["client"]["name"], "Desk Client");
    assert_eq!(details["redirectHost"], "127.0.0.1:4567");
    assert_eq!(details["resource"], world.resource());
    assert_eq!(details["unavailableScopes"], json!([]));
    let offered: Vec<&str> = details["offeredScopes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["scope"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["apps:invoke", "apps:write", "apps:author"]);
    // Anonymous is 401; a bearer token cannot consent.
    let anonymous = world
        .http
        .get(world.url(&format!("/api/oauth/requests/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);

    let code = world
        .approve(&cookie, &id, &["apps:invoke", "apps:write"])
        .await;
    // The request was single-use.
    let again = world
        .consent_call(&cookie, &id, "approve", json!({"scopes": ["apps:invoke"]}))
        .await;
    assert_eq!(again.status(), StatusCode::NOT_FOUND);
    let (status, tokens) = world.exchange(&client, &code, VERIFIER).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["expires_in"], 3600);
    assert_eq!(tokens["scope"], "apps:invoke apps:write");
    let access = tokens["access_token"].as_str().unwrap();
    let (status, names) = world.tools(access).await;
    assert_eq!(status, 200);
    assert!(names.contains(&"open_app__hello".to_owned()), "{names:?}");
    assert!(names.contains(&"listAppFiles".to_owned()), "{names:?}");

    // Bound to /mcp: the Studio API does not take it.
    let api = world
        .http
        .get(world.url("/api/me"))
        .bearer_auth(access)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::NOT_FOUND);

    // A connection with apps:invoke only has no source tools.
    let narrow = world.connect(&cookie, &client, &["apps:invoke"]).await;
    let (_, names) = world.tools(narrow["access_token"].as_str().unwrap()).await;
    assert!(names.contains(&"open_app__hello".to_owned()));
    assert!(
        !names.iter().any(|name| name == "listAppFiles"),
        "{names:?}"
    );

    // Refresh rotates and keeps working.
    let (status, renewed) = world
        .refresh(&client, tokens["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    assert_ne!(renewed["refresh_token"], tokens["refresh_token"]);
    let renewed_access = renewed["access_token"].as_str().unwrap();
    assert_eq!(world.tools(renewed_access).await.0, 200);
    // Asking for more than was consented is refused: that needs a new consent.
    let (status, body) = world
        .token(&[
            ("grant_type", "refresh_token"),
            ("client_id", &client),
            ("refresh_token", narrow["refresh_token"].as_str().unwrap()),
            ("scope", "apps:invoke apps:write"),
        ])
        .await;
    assert_oauth_error(&(status, body), StatusCode::BAD_REQUEST, "invalid_scope");

    // The Studio page lists both connections; revoking one ends its tokens
    // on the very next call and leaves the other alone.
    let listed: Value = world
        .get_json("/api/oauth/connections", &[("cookie", &cookie)])
        .await;
    let connections = listed["connections"].as_array().unwrap();
    assert_eq!(connections.len(), 2);
    let wide = connections
        .iter()
        .find(|c| c["scopes"] == json!(["apps:invoke", "apps:write"]))
        .unwrap();
    assert_eq!(wide["clientName"], "Desk Client");
    assert_eq!(wide["redirectHost"], "127.0.0.1:4567");
    let wide_id = wide["id"].as_str().unwrap();
    // Not from another site, and not by another user.
    let cross_site = world
        .delete_connection(wide_id, "https://evil.example", &cookie)
        .await;
    assert_eq!(cross_site, StatusCode::FORBIDDEN);
    let member_cookie = world.sign_in(MEMBER, MEMBER_PASSWORD).await;
    let stranger = world
        .delete_connection(wide_id, &world.origin(), &member_cookie)
        .await;
    assert_eq!(stranger, StatusCode::NOT_FOUND);
    assert_eq!(world.tools(renewed_access).await.0, 200);
    let revoked = world
        .delete_connection(wide_id, &world.origin(), &cookie)
        .await;
    assert_eq!(revoked, StatusCode::NO_CONTENT);
    assert_eq!(world.tools(renewed_access).await.0, 401);
    assert_oauth_error(
        &world
            .refresh(&client, renewed["refresh_token"].as_str().unwrap())
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
    );
    assert_eq!(world.status(&narrow).await, 200);

    // RFC 7009: the client revokes its refresh token, ending the connection.
    let response = world
        .post_form(
            "/oauth/revoke",
            &[
                ("client_id", client.as_str()),
                ("token", narrow["refresh_token"].as_str().unwrap()),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(world.status(&narrow).await, 401);

    // An operator-minted token still works beside all this.
    let admin = world
        .stack
        .store
        .user_by_name(&world.stack.admin_name)
        .unwrap()
        .unwrap();
    let minted = common::mcp::token(
        &world.stack.store,
        &admin,
        &[Scope::ChatUse, Scope::AppsInvoke],
    );
    assert_eq!(world.tools(&minted).await.0, 200);
    drop(world);
}

#[tokio::test]
async fn codes_verifiers_redirects_and_resources_are_checked() {
    let world = World::start().await;
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
    assert_eq!(world.tools(first_access).await.0, 200);
    assert_oauth_error(
        &world.exchange(&client, &code, VERIFIER).await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
    );
    assert_eq!(world.tools(first_access).await.0, 401);

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
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{bad}");
        assert!(response.headers().get("location").is_none());
        let page = response.text().await.unwrap();
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
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let id = response.headers()["location"].to_str().unwrap()["/#/connect/".len()..].to_owned();
    let response = world
        .consent_call(&cookie, &id, "approve", json!({"scopes": ["apps:invoke"]}))
        .await;
    let body: Value = response.json().await.unwrap();
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
            let page = assert_shown_not_redirected(response, says).await;
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
    let member_cookie = world.sign_in(MEMBER, MEMBER_PASSWORD).await;
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
                assert_shown_not_redirected(response, says).await;
            }
        }
    }

    // Requests that cannot be trusted to redirect get a page, never a
    // redirect: an unknown or missing client, or a parameter given twice.
    let mut repeated = url::Url::parse(&world.url("/oauth/authorize")).unwrap();
    repeated.query_pairs_mut().extend_pairs([
        ("client_id", client.as_str()),
        ("redirect_uri", REDIRECT),
        ("redirect_uri", "http://evil.example/cb"),
    ]);
    let repeated = world.http.get(repeated).send().await.unwrap();
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
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{case}");
        assert!(response.headers().get("location").is_none(), "{case}");
        assert_eq!(response.headers()["cache-control"], "no-store", "{case}");
        let page = response.text().await.unwrap();
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
    let admin = world
        .stack
        .store
        .user_by_name(&world.stack.admin_name)
        .unwrap()
        .unwrap();
    let foreign_client = world
        .stack
        .store
        .oauth_register_client("Foreign", &[REDIRECT.to_owned()], ClientAuthMethod::None)
        .unwrap()
        .unwrap();
    let invoke: BTreeSet<Scope> = [Scope::AppsInvoke].into();
    let foreign_code = world
        .stack
        .store
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
        .stack
        .store
        .oauth_exchange_code(&CodeExchange {
            client_id: &foreign_client.client.client_id,
            code: &foreign_code,
            redirect_uri: REDIRECT,
            code_verifier: VERIFIER,
            resource: None,
        })
        .unwrap()
        .unwrap();
    assert_eq!(world.tools(&foreign.access_token).await.0, 401);
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
    let world = World::start().await;
    let cookie = world.admin_cookie().await;
    let member_cookie = world.sign_in(MEMBER, MEMBER_PASSWORD).await;
    let response = world
        .register(json!({
            "client_name": "Totally Legit Client",
            "redirect_uris": [ATTACKER],
            "token_endpoint_auth_method": "none",
        }))
        .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let registered: Value = response.json().await.unwrap();
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
            let page = assert_shown_not_redirected(response, "response_type must be code").await;
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
            assert_shown_not_redirected(response, "response_type must be code").await;
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
    assert_shown_not_redirected(response, "response_type must be code").await;
}

#[tokio::test]
async fn a_reused_refresh_token_revokes_the_family() {
    let world = World::start().await;
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
    assert_eq!(world.status(&third).await, 200);
    // The first refresh token comes back: everything in the family dies.
    assert_oauth_error(
        &world
            .refresh(&client, first["refresh_token"].as_str().unwrap())
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
    );
    for tokens in [&first, &second, &third] {
        assert_eq!(world.status(tokens).await, 401);
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
async fn a_member_cannot_consent_to_apps_write() {
    let world = World::start().await;
    let cookie = world.sign_in(MEMBER, MEMBER_PASSWORD).await;
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
    let approve_url = world.url(&format!("/api/oauth/requests/{id}/approve"));
    let body = json!({"scopes": ["apps:invoke"]}).to_string();
    let member_token = common::mcp::token(
        &world.stack.store,
        &world
            .stack
            .store
            .user(&world.stack.member_id)
            .unwrap()
            .unwrap(),
        &[Scope::ChatUse, Scope::AppsInvoke],
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
        let mut request = world.http.post(&approve_url).body(body.clone());
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), status, "{case}");
    }
    let bearer = world
        .http
        .post(&approve_url)
        .header("origin", world.origin())
        .header("content-type", "application/json")
        .bearer_auth(&member_token)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(
        bearer.status(),
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
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let envelope: Value = refused.json().await.unwrap();
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
        assert_eq!(response.status(), status, "{scopes}");
        let envelope: Value = response.json().await.unwrap();
        assert_eq!(envelope["code"], "APP_INPUT_INVALID");
    }
    let code = world.approve(&cookie, &id, &["apps:invoke"]).await;
    let (status, tokens) = world.exchange(&client, &code, VERIFIER).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(tokens["scope"], "apps:invoke");
    let (status, names) = world.tools(tokens["access_token"].as_str().unwrap()).await;
    assert_eq!(status, 200);
    assert!(
        names.contains(&"open_app__expense_log".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"app__expense_log__categories__list".to_owned()),
        "{names:?}"
    );
    assert!(!names.contains(&"open_app__hello".to_owned()), "{names:?}");
    assert!(!names.iter().any(|name| name == "listAppFiles"));

    // Denying sends the person back with access_denied and the state.
    let id = world.request_id(&client, "apps:invoke").await;
    let response = world.consent_call(&cookie, &id, "deny", json!({})).await;
    let body: Value = response.json().await.unwrap();
    let redirect = url::Url::parse(body["redirectTo"].as_str().unwrap()).unwrap();
    let params: std::collections::HashMap<_, _> = redirect.query_pairs().into_owned().collect();
    assert_eq!(params["error"], "access_denied");
    assert_eq!(params["state"], "st-123");
}

#[tokio::test]
async fn registration_is_checked_and_budgeted_per_address() {
    let world = World::start().await;
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
        let status = response.status();
        let body_text: Value = response.json().await.unwrap();
        assert_oauth_error(&(status, body_text), StatusCode::BAD_REQUEST, error);
        let _ = body;
    }
    let oversized = world
        .http
        .post(world.url("/oauth/register"))
        .header("content-type", "application/json")
        .body(format!(
            "{{\"redirect_uris\":[\"{REDIRECT}\"],\"x\":\"{}\"}}",
            "y".repeat(20_000)
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(oversized.status(), StatusCode::BAD_REQUEST);
    let form_body = world
        .post_form("/oauth/register", &[("redirect_uris", REDIRECT)])
        .await;
    let status = form_body.status();
    assert_oauth_error(
        &(status, form_body.json().await.unwrap()),
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );

    // A confidential client gets a secret and must present it.
    let response = world
        .register(json!({"client_name": "Server", "redirect_uris": [REDIRECT]}))
        .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let registered: Value = response.json().await.unwrap();
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
        refused.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic")
    );
    // Revocation authenticates the client the same way and needs the token.
    let revoke = world
        .post_form_with("/oauth/revoke", &[], &[("authorization", &right)])
        .await;
    assert_eq!(revoke.status(), StatusCode::BAD_REQUEST);
    let revoke = world
        .post_form_with(
            "/oauth/revoke",
            &[("token", "sasha_rt_x")],
            &[("authorization", &wrong)],
        )
        .await;
    assert_eq!(revoke.status(), StatusCode::UNAUTHORIZED);
    let revoke = world
        .post_form_with(
            "/oauth/revoke",
            &[("token", "sasha_rt_unknown")],
            &[("authorization", &right)],
        )
        .await;
    assert_eq!(revoke.status(), StatusCode::OK);

    // Registrations are budgeted per client address: 20 at once, then one
    // every 3 s. One succeeded above; this address soon runs out (a slow run
    // may see a refill or two) ...
    let public = json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"});
    let mut accepted = 1;
    let refused = loop {
        let response = world.register(public.clone()).await;
        if response.status() != StatusCode::CREATED {
            break response;
        }
        accepted += 1;
        assert!(accepted <= 30, "the budget never ran out");
    };
    assert!(
        accepted >= 20,
        "only {accepted} registrations were accepted"
    );
    assert!(
        refused.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .is_ok_and(|seconds| (1..=3).contains(&seconds)),
        "{:?}",
        refused.headers()
    );
    let status = refused.status();
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["retryable"], true, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("from your address"),
        "{body}"
    );
    assert_oauth_error(
        &(status, body),
        StatusCode::TOO_MANY_REQUESTS,
        "temporarily_unavailable",
    );
    // ... a forwarding header it writes itself does not move it (the ingress
    // replaces it with the connection's address) ...
    let forged = world
        .http
        .post(world.url("/oauth/register"))
        .header("x-forwarded-for", "192.0.2.99")
        .header("forwarded", "for=192.0.2.99")
        .json(&public)
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::TOO_MANY_REQUESTS);
    // ... and another address registers at once: one client cannot block
    // everyone's registrations.
    let elsewhere = World::client_from(&world.stack, [127, 0, 0, 2]);
    for _ in 0..3 {
        let response = elsewhere
            .post(world.url("/oauth/register"))
            .json(&public)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
}
