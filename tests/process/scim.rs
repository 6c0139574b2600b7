//! SCIM provisioning through plain HTTP as the organisation's directory
//! calls it: `sasha up` started with a group mapping (`SASHA_SSO_*_GROUPS`),
//! a SCIM token an admin mints through the Studio API, then create, filter,
//! group membership → role, deactivation (Entra's `"False"`), and delete.
//! What only the running system shows: that the deactivated person's open
//! Studio session, their personal MCP token and their OAuth connection are
//! refused on their very next request, through the real ingress and
//! mcp-gateway. The refusal matrix is a router test
//! (`studio-core/src/http/tests/scim.rs`).

use crate::common;

use std::net::SocketAddr;

use base64::Engine as _;
use common::core_database::{CoreStore, core_store};
use common::mcp::Mcp;
use common::{UpProcess, free_port};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Digest as _;
use studio_store::{Scope, TokenKind, UserRole};

const USER: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
const GROUP: &str = "urn:ietf:params:scim:schemas:core:2.0:Group";
const PATCH: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
const REDIRECT: &str = "http://127.0.0.1:4567/callback";
const VERIFIER: &str = "a-verifier-long-enough-to-satisfy-rfc-7636-rules-0123456789";

struct World {
    _state: tempfile::TempDir,
    _up: UpProcess,
    port: u16,
    store: CoreStore,
    http: reqwest::Client,
    admin_cookie: String,
}

impl World {
    async fn start() -> World {
        let state = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(state.path().join("docs/apps")).unwrap();
        let port = free_port();
        let up = UpProcess::start_with(
            state.path(),
            port,
            &[
                ("SASHA_BUNDLED_APPS", "off"),
                ("SASHA_SSO_ADMIN_GROUPS", "Sasha Admins"),
                ("SASHA_SSO_STAFF_GROUPS", "Sasha Staff"),
                ("SASHA_SSO_MEMBER_GROUPS", "Sasha Users"),
            ],
        )
        .await;
        let admin: Value = serde_json::from_str(
            &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
        )
        .unwrap();
        let store = core_store(state.path());
        let _ = common::http_client();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .resolve("localhost", SocketAddr::from(([127, 0, 0, 1], port)))
            .build()
            .unwrap();
        let mut world = World {
            _state: state,
            _up: up,
            port,
            store,
            http,
            admin_cookie: String::new(),
        };
        let response = world
            .http
            .post(world.url("/api/auth/login"))
            .header("origin", world.origin())
            .json(&json!({"username": admin["username"], "password": admin["password"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let cookie = response.headers()["set-cookie"].to_str().unwrap();
        world.admin_cookie = cookie.split(';').next().unwrap().to_owned();
        world
    }

    fn origin(&self) -> String {
        format!("http://localhost:{}", self.port)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin())
    }

    /// A SCIM token minted as the directory's admin would: through Studio.
    async fn scim_token(&self) -> String {
        let response = self
            .http
            .post(self.url("/api/scim/tokens"))
            .header("origin", self.origin())
            .header("cookie", &self.admin_cookie)
            .json(&json!({"label": "Entra ID"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["base"], self.url("/scim/v2"));
        body["secret"].as_str().unwrap().to_owned()
    }

    /// One SCIM call as a directory makes it: status and JSON body.
    async fn scim(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .http
            .request(method, self.url(&format!("/scim/v2{path}")))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/scim+json")
                .body(body.to_string());
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        if status != StatusCode::NO_CONTENT {
            assert_eq!(
                response.headers()["content-type"],
                "application/scim+json",
                "{path}"
            );
        }
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// `tools/list` on `/mcp` with `token`: the HTTP status.
    async fn mcp_status(&self, token: &str) -> u16 {
        let mut mcp = Mcp::sessionless(&self.url("/mcp"), token);
        mcp.request("tools/list", json!({})).await.status
    }

    /// An OAuth connection of the person whose session is `cookie`: a public
    /// client registered, the authorization request, their consent on the
    /// Studio page, the code exchanged. The client's id and the token
    /// response.
    async fn oauth_connection(&self, cookie: &str) -> (String, Value) {
        let registered: Value = self
            .http
            .post(self.url("/oauth/register"))
            .json(&json!({
                "client_name": "Claude Desktop",
                "redirect_uris": [REDIRECT],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
            }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let client = registered["client_id"].as_str().unwrap().to_owned();
        let client = client.as_str();
        let challenge =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(VERIFIER));
        let resource = self.url("/mcp");
        let mut authorize = url::Url::parse(&self.url("/oauth/authorize")).unwrap();
        authorize.query_pairs_mut().extend_pairs([
            ("response_type", "code"),
            ("client_id", client),
            ("redirect_uri", REDIRECT),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
            ("state", "st-1"),
            ("scope", "apps:invoke"),
            ("resource", &resource),
        ]);
        let response = self.http.get(authorize).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        let location = response.headers()["location"].to_str().unwrap();
        let request = location.strip_prefix("/#/connect/").unwrap().to_owned();
        let approved: Value = self
            .http
            .post(self.url(&format!("/api/oauth/requests/{request}/approve")))
            .header("origin", self.origin())
            .header("cookie", cookie)
            .json(&json!({"scopes": ["apps:invoke"]}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let redirect = url::Url::parse(
            approved["redirectTo"]
                .as_str()
                .unwrap_or_else(|| panic!("approved: {approved}")),
        )
        .unwrap();
        let code = redirect
            .query_pairs()
            .find(|(name, _)| name == "code")
            .unwrap()
            .1
            .into_owned();
        let (status, tokens) = self
            .token(&[
                ("grant_type", "authorization_code"),
                ("client_id", client),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("code_verifier", VERIFIER),
                ("resource", &resource),
            ])
            .await;
        assert_eq!(status, StatusCode::OK, "{tokens}");
        (client.to_owned(), tokens)
    }

    async fn token(&self, form: &[(&str, &str)]) -> (StatusCode, Value) {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let response = self
            .http
            .post(self.url("/oauth/token"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap())
    }

    async fn me(&self, cookie: &str) -> StatusCode {
        self.http
            .get(self.url("/api/me"))
            .header("cookie", cookie)
            .send()
            .await
            .unwrap()
            .status()
    }

    fn role(&self, id: &str) -> UserRole {
        self.store
            .with(|store| store.user(id).unwrap().unwrap().role)
    }
}

#[tokio::test]
async fn a_directory_provisions_promotes_deactivates_and_removes_a_person() {
    let world = World::start().await;
    let token = world.scim_token().await;

    // A wrong token is refused with a SCIM 401.
    let (status, refused) = world.scim("sasha_scim_wrong", "GET", "/Users", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(refused["status"], "401");

    // Entra first looks the person up, then creates them.
    let (status, found) = world
        .scim(
            &token,
            "GET",
            "/Users?filter=userName%20eq%20%22lin%40example.org%22",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(found["totalResults"], 0);
    let (status, created) = world
        .scim(
            &token,
            "POST",
            "/Users",
            Some(json!({
                "schemas": [USER],
                "externalId": "0b8c5d2e-entra",
                "userName": "lin@example.org",
                "active": true,
                "displayName": "Lin Ito",
                "name": {"givenName": "Lin", "familyName": "Ito", "formatted": "Lin Ito"},
                "emails": [{"primary": true, "type": "work", "value": "lin@example.org"}],
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let (_, found) = world
        .scim(
            &token,
            "GET",
            "/Users?filter=userName%20eq%20%22LIN%40example.org%22",
            None,
        )
        .await;
    assert_eq!(found["totalResults"], 1, "{found}");
    assert_eq!(found["Resources"][0]["id"], id.as_str());

    // Groups: membership decides the role.
    let (status, staff) = world
        .scim(
            &token,
            "POST",
            "/Groups",
            Some(
                json!({"schemas": [GROUP], "displayName": "Sasha Staff", "externalId": "g-staff"}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{staff}");
    let staff_id = staff["id"].as_str().unwrap().to_owned();
    let (status, _) = world
        .scim(
            &token,
            "PATCH",
            &format!("/Groups/{staff_id}"),
            Some(json!({"schemas": [PATCH], "Operations": [
                {"op": "Add", "path": "members", "value": [{"value": id}]}
            ]})),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(world.role(&id), UserRole::Staff);
    let (_, users) = {
        let response = world
            .http
            .get(world.url("/api/users"))
            .header("cookie", &world.admin_cookie)
            .send()
            .await
            .unwrap();
        (response.status(), response.json::<Value>().await.unwrap())
    };
    let lin = users["users"]
        .as_array()
        .unwrap()
        .iter()
        .find(|person| person["username"] == "lin@example.org")
        .unwrap();
    assert_eq!(lin["source"], "scim", "{lin}");
    assert_eq!(lin["role"], "staff", "{lin}");

    // Lin is signed in to Studio, has a personal MCP token and an OAuth
    // connection; all three work.
    let cookie = format!("sasha_session={}", world.store.create_session(&id).unwrap());
    let personal = world
        .store
        .mint_token(&id, TokenKind::Access, &[Scope::AppsInvoke].into(), None)
        .unwrap();
    let (client, connection) = world.oauth_connection(&cookie).await;
    let access = connection["access_token"].as_str().unwrap().to_owned();
    let refresh = connection["refresh_token"].as_str().unwrap().to_owned();
    assert_eq!(world.me(&cookie).await, StatusCode::OK);
    assert_eq!(world.mcp_status(&personal).await, 200);
    assert_eq!(world.mcp_status(&access).await, 200);

    // Entra deactivates Lin.
    let (status, patched) = world
        .scim(
            &token,
            "PATCH",
            &format!("/Users/{id}"),
            Some(json!({"schemas": [PATCH], "Operations": [
                {"op": "Replace", "path": "active", "value": "False"}
            ]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["active"], false);

    // Every way in is refused on its very next request.
    assert_ne!(world.me(&cookie).await, StatusCode::OK, "the session ended");
    assert_eq!(world.mcp_status(&personal).await, 401, "the personal token");
    assert_eq!(world.mcp_status(&access).await, 401, "the OAuth connection");
    let (status, refused) = world
        .token(&[
            ("grant_type", "refresh_token"),
            ("client_id", &client),
            ("refresh_token", &refresh),
        ])
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "no refresh mints a new one"
    );
    assert_eq!(refused["error"], "invalid_grant", "{refused}");
    let audit = world.store.audit_entries(None).unwrap();
    assert!(
        audit
            .iter()
            .any(|entry| entry.action == "user.status-changed"
                && entry.subject.as_deref() == Some(id.as_str())
                && entry.actor.starts_with("scim-token:")),
        "the deactivation is audited as the token"
    );

    // Entra deletes Lin.
    let (status, _) = world
        .scim(&token, "DELETE", &format!("/Users/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(
        world
            .store
            .user_by_name("lin@example.org")
            .unwrap()
            .is_none()
    );
    let (status, gone) = world
        .scim(&token, "GET", &format!("/Users/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{gone}");
    let (_, group) = world
        .scim(&token, "GET", &format!("/Groups/{staff_id}"), None)
        .await;
    assert_eq!(group["members"], json!([]), "{group}");
}
