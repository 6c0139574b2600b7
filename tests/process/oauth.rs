//! OAuth 2.1 for MCP clients through the real interfaces: `sasha up` (Studio
//! and `/mcp` on `http://localhost:<port>`), plain HTTP for discovery,
//! registration, the authorization endpoint, the consent API a signed-in
//! Studio page calls, the token endpoint, and MCP calls with the tokens: what
//! only the running system shows (the discovery chain from the gateway's 401,
//! tools by scope, the ingress's client address). The browser and the
//! official SDK client drive the same flow in `tests/chromium/oauth.rs`; every
//! refusal of the endpoints is a router test
//! (`studio-core/src/oauth/router_tests.rs`).

use crate::common;

use std::net::SocketAddr;

use base64::Engine as _;
use common::mcp::{Mcp, tool_names};
use common::stack::{MEMBER_PASSWORD, UpStack};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Digest as _;
use studio_store::Scope;

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

/// A member's connection with `apps:invoke` lists the tools of the apps the
/// member may use and no source tools. The consent refusals (origins, body
/// types, bearer callers, `apps:write`) are router tests
/// (`studio-core/src/oauth/router_tests.rs`).
#[tokio::test]
async fn a_member_connection_lists_only_what_the_member_may_use() {
    let world = World::start().await;
    let cookie = world.sign_in(MEMBER, MEMBER_PASSWORD).await;
    let client = world.client("Member Client").await;
    let tokens = world.connect(&cookie, &client, &["apps:invoke"]).await;
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
}

/// Registrations are budgeted per client address as the ingress reports it:
/// a forwarding header the client writes itself does not move it. What a
/// registration must hold, and client authentication, are router tests
/// (`studio-core/src/oauth/router_tests.rs`).
#[tokio::test]
async fn registrations_are_budgeted_per_address_the_ingress_reports() {
    let world = World::start().await;
    // Registrations are budgeted per client address: 20 at once, then one
    // every 3 s. This address soon runs out (a slow run may see a refill or
    // two) ...
    let public = json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"});
    let mut accepted = 0;
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
