//! Router tests of signing in through the identity provider: the routes in
//! process over a SQLite core database with an injected clock, against the
//! fake provider on loopback. Each refusal is a page with no session cookie.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::response::Response;
use http_body_util::BodyExt as _;
use sasha_service::config::Origin;
use serde_json::{Value, json};
use studio_store::{ACTOR_OPERATOR, Store, UserRole, UserSource};
use tower::ServiceExt as _;

use crate::Accounts;
use crate::group_roles::GroupRoles;
use crate::sso::config::{PasswordPolicy, ProviderConfig, SignInConfig};
use crate::sso::fake_provider::{CLIENT_ID, CLIENT_SECRET, FakeProvider, Issue, Key};

const STUDIO: &str = "http://127.0.0.1:3007";
/// The injected clock's start, unix seconds.
const T0: i64 = 1_900_000_000;

struct World {
    router: axum::Router,
    store: Store,
    provider: FakeProvider,
    clock: Arc<AtomicI64>,
    _dir: tempfile::TempDir,
}

/// A started sign-in: what the browser was sent to the provider with.
struct Started {
    state: String,
    nonce: String,
    challenge: String,
    /// `sasha_sso=<value>`.
    cookie: String,
}

fn provider_config(issuer: &str) -> ProviderConfig {
    ProviderConfig {
        issuer: issuer.to_owned(),
        client_id: CLIENT_ID.to_owned(),
        client_secret: CLIENT_SECRET.to_owned(),
        redirect_uri: format!("{STUDIO}/auth/oidc/callback"),
        scopes: vec!["openid".into(), "profile".into(), "email".into()],
        groups_claim: "groups".to_owned(),
        username_claim: None,
        provider_name: "Example SSO".to_owned(),
        ca_certificates: Vec::new(),
    }
}

async fn world_with(passwords: PasswordPolicy, issuer: Option<&str>) -> World {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicI64::new(T0));
    let reading = clock.clone();
    let store = Store::open_with_clock(
        &dir.path().join("core.sqlite"),
        Arc::new(move || reading.load(Ordering::SeqCst)),
    )
    .unwrap();
    let provider = FakeProvider::start().await;
    let issuer = issuer.map_or_else(|| provider.issuer.clone(), str::to_owned);
    let accounts = Accounts::new(store.clone(), Origin::parse(STUDIO).unwrap(), STUDIO)
        .with_sign_in(SignInConfig {
            provider: Some(provider_config(&issuer)),
            passwords,
            group_roles: GroupRoles::new(&["sasha-admins"], &["sasha-staff"], &["sasha-members"]),
        })
        .unwrap();
    World {
        router: crate::http::routes().with_state(Arc::new(accounts)),
        store,
        provider,
        clock,
        _dir: dir,
    }
}

async fn world() -> World {
    world_with(PasswordPolicy::Everyone, None).await
}

async fn body_text(response: Response) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn set_cookies(response: &Response) -> Vec<String> {
    response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|value| value.to_str().unwrap().to_owned())
        .collect()
}

fn query_param(url: &str, name: &str) -> String {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
        .unwrap_or_else(|| panic!("{url} has no {name}"))
}

impl World {
    async fn get(&self, uri: &str, cookie: Option<&str>) -> Response {
        let mut request = Request::get(uri);
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        self.router
            .clone()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    async fn start(&self, return_to: &str) -> Started {
        let uri = format!(
            "/auth/oidc/start?return_to={}",
            url::form_urlencoded::byte_serialize(return_to.as_bytes()).collect::<String>()
        );
        let response = self.get(&uri, None).await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        let location = response.headers()[header::LOCATION]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(location.starts_with(&format!("{}/authorize?", self.provider.issuer)));
        assert_eq!(query_param(&location, "code_challenge_method"), "S256");
        assert_eq!(query_param(&location, "client_id"), CLIENT_ID);
        assert_eq!(
            query_param(&location, "redirect_uri"),
            format!("{STUDIO}/auth/oidc/callback")
        );
        let cookie = set_cookies(&response)
            .into_iter()
            .find(|c| c.starts_with("sasha_sso="))
            .expect("the attempt cookie");
        assert!(cookie.contains("HttpOnly") && cookie.contains("Max-Age=600"));
        Started {
            state: query_param(&location, "state"),
            nonce: query_param(&location, "nonce"),
            challenge: query_param(&location, "code_challenge"),
            cookie: cookie.split(';').next().unwrap().to_owned(),
        }
    }

    /// An ID token's payload for `started`, as the provider would sign it.
    fn claims(&self, started: &Started, subject: &str, name: &str, groups: &[&str]) -> Value {
        let now = self.clock.load(Ordering::SeqCst);
        json!({
            "iss": self.provider.issuer,
            "aud": CLIENT_ID,
            "sub": subject,
            "iat": now,
            "exp": now + 300,
            "nonce": started.nonce,
            "preferred_username": name,
            "groups": groups,
        })
    }

    /// The provider sends the browser back with `code`, which it will
    /// redeem for `claims` signed by `key` under `kid`.
    async fn callback(
        &self,
        started: &Started,
        code: &str,
        claims: Value,
        key: Key,
        kid: &str,
    ) -> Response {
        self.provider.issue(
            code,
            Issue {
                claims,
                signed_by: key,
                kid: kid.to_owned(),
                challenge: started.challenge.clone(),
            },
        );
        self.get(
            &format!("/auth/oidc/callback?code={code}&state={}", started.state),
            Some(&started.cookie),
        )
        .await
    }

    /// A whole sign-in of `subject` named `name` in `groups`.
    async fn sign_in(&self, subject: &str, name: &str, groups: &[&str]) -> Response {
        let started = self.start("/#/apps").await;
        let claims = self.claims(&started, subject, name, groups);
        let code = format!("code-{}", &started.state[..8]);
        self.callback(&started, &code, claims, Key::A, "a").await
    }

    async fn me(&self, session: &str) -> StatusCode {
        self.get("/api/me", Some(session)).await.status()
    }

    async fn login(&self, username: &str, password: &str) -> Response {
        self.router
            .clone()
            .oneshot(
                Request::post("/api/auth/login")
                    .header(header::ORIGIN, STUDIO)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(
                        json!({ "username": username, "password": password }).to_string(),
                    ))
                    .unwrap(),
            )
            .await
            .unwrap()
    }
}

/// The session cookie of a signed-in answer (`sasha_session=…`).
fn session(response: &Response) -> String {
    set_cookies(response)
        .into_iter()
        .find(|c| c.starts_with("sasha_session=") && !c.starts_with("sasha_session=;"))
        .expect("a session cookie")
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

/// A refusal: the page, its status, and no session cookie.
async fn refused(response: Response, status: StatusCode, says: &str) {
    assert_eq!(response.status(), status);
    assert!(
        set_cookies(&response)
            .iter()
            .all(|c| !c.starts_with("sasha_session=")),
        "a refusal sets no session cookie"
    );
    assert!(
        response.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let page = body_text(response).await;
    assert!(page.contains("Diagnostic id"), "{page}");
    assert!(page.contains(says), "the page should say {says:?}: {page}");
}

#[tokio::test]
async fn a_first_sign_in_makes_the_person_with_the_role_their_groups_map_to() {
    let world = world().await;
    let response = world
        .sign_in("sub-ada", "ada@example.com", &["sasha-staff"])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()[header::LOCATION], "/#/apps");
    let cookies = set_cookies(&response);
    assert!(
        cookies.iter().any(|c| c.starts_with("sasha_sso=;")),
        "{cookies:?}"
    );
    let session = session(&response);
    assert_eq!(world.me(&session).await, StatusCode::OK);
    let ada = world
        .store
        .user_by_name("ada@example.com")
        .unwrap()
        .unwrap();
    assert_eq!(ada.role, UserRole::Staff);
    assert_eq!(ada.source, UserSource::Oidc);
}

#[tokio::test]
async fn a_returning_persons_role_follows_their_groups_audited() {
    let world = world().await;
    let first = world.sign_in("sub-bo", "bob", &["sasha-members"]).await;
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    let again = world
        .sign_in("sub-bo", "bob", &["sasha-admins", "other"])
        .await;
    assert_eq!(again.status(), StatusCode::SEE_OTHER);
    let bo = world.store.user_by_name("bob").unwrap().unwrap();
    assert_eq!(bo.role, UserRole::Admin);
    let changes: Vec<_> = world
        .store
        .audit_entries(None)
        .unwrap()
        .into_iter()
        .filter(|entry| entry.action == "user.role-changed")
        .collect();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].actor, "identity-provider");
    assert_eq!(changes[0].before.as_deref(), Some("member"));
    assert_eq!(changes[0].after.as_deref(), Some("admin"));
    // The last admin who can act is not demoted by their groups.
    let last = world.sign_in("sub-bo", "bob", &["sasha-staff"]).await;
    refused(
        last,
        StatusCode::FORBIDDEN,
        "you are the last administrator",
    )
    .await;
    assert_eq!(
        world.store.user_by_name("bob").unwrap().unwrap().role,
        UserRole::Admin
    );
    world
        .store
        .create_user("root", UserRole::Admin, "a long enough password")
        .unwrap();
    // The same subject under another name is still the same person.
    let renamed = world
        .sign_in("sub-bo", "bob.renamed", &["sasha-staff"])
        .await;
    assert_eq!(renamed.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        world.store.user_by_name("bob").unwrap().unwrap().role,
        UserRole::Staff
    );
    assert!(world.store.user_by_name("bob.renamed").unwrap().is_none());
}

#[tokio::test]
async fn no_mapped_group_on_a_first_sign_in_makes_nobody() {
    let world = world().await;
    let response = world.sign_in("sub-cy", "cyd", &["marketing"]).await;
    refused(
        response,
        StatusCode::FORBIDDEN,
        "none of your groups gives access",
    )
    .await;
    assert!(world.store.user_by_name("cyd").unwrap().is_none());
}

#[tokio::test]
async fn losing_every_mapped_group_ends_the_persons_sessions() {
    let world = world().await;
    let first = world.sign_in("sub-di", "dia", &["sasha-members"]).await;
    let old_session = session(&first);
    assert_eq!(world.me(&old_session).await, StatusCode::OK);
    let response = world.sign_in("sub-di", "dia", &[]).await;
    refused(response, StatusCode::FORBIDDEN, "signed out everywhere").await;
    assert_ne!(world.me(&old_session).await, StatusCode::OK);
    // The account stays, and a mapped group lets them in again.
    assert!(world.store.user_by_name("dia").unwrap().is_some());
    let back = world.sign_in("sub-di", "dia", &["sasha-members"]).await;
    assert_eq!(back.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn a_disabled_person_is_refused() {
    let world = world().await;
    let first = world.sign_in("sub-ed", "eddy", &["sasha-members"]).await;
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    world
        .store
        .set_disabled("eddy", true, ACTOR_OPERATOR)
        .unwrap();
    let response = world.sign_in("sub-ed", "eddy", &["sasha-members"]).await;
    refused(response, StatusCode::FORBIDDEN, "account is disabled").await;
}

#[tokio::test]
async fn a_password_account_of_the_same_name_is_never_taken_over() {
    let world = world().await;
    world
        .store
        .create_user("fay", UserRole::Admin, "a long enough password")
        .unwrap();
    let response = world.sign_in("sub-fay", "fay", &["sasha-admins"]).await;
    refused(response, StatusCode::FORBIDDEN, "signs in with a password").await;
}

#[tokio::test]
async fn a_scim_person_not_yet_bound_is_bound_by_name() {
    let world = world().await;
    world
        .store
        .create_user_from(UserSource::Scim, "gus", UserRole::Member, ACTOR_OPERATOR)
        .unwrap();
    let response = world.sign_in("sub-gus", "gus", &["sasha-members"]).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    // Bound now: another subject with that name is refused.
    let other = world
        .sign_in("sub-impostor", "gus", &["sasha-members"])
        .await;
    refused(other, StatusCode::FORBIDDEN, "belongs to another person").await;
}

#[tokio::test]
async fn a_wrong_issuer_is_refused() {
    let world = world().await;
    let started = world.start("/").await;
    let mut claims = world.claims(&started, "sub-h", "hal", &["sasha-members"]);
    claims["iss"] = json!("https://evil.example");
    let response = world.callback(&started, "c1", claims, Key::A, "a").await;
    refused(response, StatusCode::FORBIDDEN, "issuer check").await;
    assert!(world.store.user_by_name("hal").unwrap().is_none());
}

#[tokio::test]
async fn a_wrong_audience_is_refused() {
    let world = world().await;
    let started = world.start("/").await;
    let mut claims = world.claims(&started, "sub-h", "hal", &["sasha-members"]);
    claims["aud"] = json!("another-client");
    let response = world.callback(&started, "c1", claims, Key::A, "a").await;
    refused(response, StatusCode::FORBIDDEN, "audience check").await;
}

#[tokio::test]
async fn an_expired_id_token_is_refused() {
    let world = world().await;
    let started = world.start("/").await;
    let claims = world.claims(&started, "sub-h", "hal", &["sasha-members"]);
    // Time passes between the provider signing and Studio reading it.
    world.clock.fetch_add(301, Ordering::SeqCst);
    let response = world.callback(&started, "c1", claims, Key::A, "a").await;
    refused(response, StatusCode::FORBIDDEN, "expiry check").await;
}

#[tokio::test]
async fn a_bad_signature_is_refused() {
    let world = world().await;
    let started = world.start("/").await;
    let claims = world.claims(&started, "sub-h", "hal", &["sasha-members"]);
    // Signed with key B but naming key A, which the provider publishes.
    let response = world.callback(&started, "c1", claims, Key::B, "a").await;
    refused(response, StatusCode::FORBIDDEN, "signature check").await;
    assert!(world.store.user_by_name("hal").unwrap().is_none());
}

#[tokio::test]
async fn an_unknown_key_id_fetches_the_keys_again_and_a_rotated_key_is_accepted() {
    let world = world().await;
    let first = world.sign_in("sub-i", "ivy", &["sasha-members"]).await;
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    assert_eq!(world.provider.jwks_fetches(), 1);
    world.provider.publish(&[(Key::A, "a"), (Key::B, "b")]);
    let started = world.start("/").await;
    let claims = world.claims(&started, "sub-i", "ivy", &["sasha-members"]);
    let response = world.callback(&started, "c2", claims, Key::B, "b").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(world.provider.jwks_fetches(), 2);
    // A key nobody publishes is fetched for once more, then refused.
    let started = world.start("/").await;
    let claims = world.claims(&started, "sub-i", "ivy", &["sasha-members"]);
    let response = world.callback(&started, "c3", claims, Key::B, "z").await;
    refused(response, StatusCode::FORBIDDEN, "signature check").await;
    assert_eq!(world.provider.jwks_fetches(), 3);
}

#[tokio::test]
async fn a_nonce_of_another_sign_in_is_refused() {
    let world = world().await;
    let earlier = world.start("/").await;
    let started = world.start("/").await;
    let claims = world.claims(&earlier, "sub-j", "joe", &["sasha-members"]);
    let response = world.callback(&started, "c1", claims, Key::A, "a").await;
    refused(response, StatusCode::FORBIDDEN, "nonce check").await;
}

#[tokio::test]
async fn a_replayed_callback_is_refused() {
    let world = world().await;
    let started = world.start("/").await;
    let claims = world.claims(&started, "sub-k", "kim", &["sasha-members"]);
    let response = world
        .callback(&started, "c1", claims.clone(), Key::A, "a")
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let replay = world.callback(&started, "c1", claims, Key::A, "a").await;
    refused(replay, StatusCode::BAD_REQUEST, "already been used").await;
}

#[tokio::test]
async fn a_code_used_twice_is_refused_by_the_provider() {
    let world = world().await;
    let first = world.start("/").await;
    let claims = world.claims(&first, "sub-l", "lux", &["sasha-members"]);
    let response = world.callback(&first, "c1", claims, Key::A, "a").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    // A second sign-in in this browser handed the first one's code.
    let second = world.start("/").await;
    let response = world
        .get(
            &format!("/auth/oidc/callback?code=c1&state={}", second.state),
            Some(&second.cookie),
        )
        .await;
    refused(
        response,
        StatusCode::BAD_REQUEST,
        "already used or has expired",
    )
    .await;
}

#[tokio::test]
async fn a_callback_without_the_attempt_cookie_is_refused_and_the_attempt_waits() {
    let world = world().await;
    let started = world.start("/").await;
    let claims = world.claims(&started, "sub-m", "moe", &["sasha-members"]);
    world.provider.issue(
        "c1",
        Issue {
            claims,
            signed_by: Key::A,
            kid: "a".into(),
            challenge: started.challenge.clone(),
        },
    );
    let uri = format!("/auth/oidc/callback?code=c1&state={}", started.state);
    let missing = world.get(&uri, None).await;
    refused(
        missing,
        StatusCode::BAD_REQUEST,
        "started in another browser",
    )
    .await;
    let other = world
        .get(
            &uri,
            Some("sasha_sso=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        )
        .await;
    refused(other, StatusCode::BAD_REQUEST, "started in another browser").await;
    // Its own browser still finishes it.
    let own = world.get(&uri, Some(&started.cookie)).await;
    assert_eq!(own.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn an_attempt_expires_after_ten_minutes() {
    let world = world().await;
    let started = world.start("/").await;
    world.clock.fetch_add(601, Ordering::SeqCst);
    let claims = world.claims(&started, "sub-n", "nia", &["sasha-members"]);
    let response = world.callback(&started, "c1", claims, Key::A, "a").await;
    refused(response, StatusCode::BAD_REQUEST, "has expired").await;
}

#[tokio::test]
async fn a_provider_that_is_down_is_a_retryable_page() {
    // Nothing listens on port 9 of loopback.
    let world = world_with(PasswordPolicy::Everyone, Some("http://127.0.0.1:9")).await;
    let response = world.get("/auth/oidc/start?return_to=/", None).await;
    assert_eq!(response.headers()[header::RETRY_AFTER], "30");
    refused(
        response,
        StatusCode::SERVICE_UNAVAILABLE,
        "try again in a minute",
    )
    .await;
}

#[tokio::test]
async fn return_to_is_only_a_path_on_this_origin() {
    let world = world().await;
    for bad in [
        "https://evil.example/",
        "//evil.example/x",
        "/\\evil.example",
        "javascript:alert(1)",
    ] {
        let uri = format!(
            "/auth/oidc/start?return_to={}",
            url::form_urlencoded::byte_serialize(bad.as_bytes()).collect::<String>()
        );
        let response = world.get(&uri, None).await;
        refused(
            response,
            StatusCode::BAD_REQUEST,
            "somewhere other than Sasha Studio",
        )
        .await;
    }
    let started = world.start("/#/connect/abc").await;
    let claims = world.claims(&started, "sub-o", "ozzy", &["sasha-members"]);
    let response = world.callback(&started, "c1", claims, Key::A, "a").await;
    assert_eq!(response.headers()[header::LOCATION], "/#/connect/abc");
}

#[tokio::test]
async fn sso_only_refuses_passwords_except_the_break_glass_admin() {
    let world = world_with(PasswordPolicy::BreakGlassOnly(Some("root".into())), None).await;
    world
        .store
        .create_user("root", UserRole::Admin, "the break glass password")
        .unwrap();
    world
        .store
        .create_user("pam", UserRole::Admin, "another long password")
        .unwrap();
    let admitted = world.login("Root", "the break glass password").await;
    assert_eq!(admitted.status(), StatusCode::OK);
    let refused = world.login("pam", "another long password").await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(set_cookies(&refused).is_empty());
    let envelope: Value = serde_json::from_str(&body_text(refused).await).unwrap();
    assert_eq!(envelope["code"], "APP_ACCESS_DENIED");
    assert!(
        envelope["message"]
            .as_str()
            .unwrap()
            .contains("Sign in with Example SSO"),
        "{envelope}"
    );
    // A wrong password says only that, whoever it names.
    let wrong = world.login("pam", "not the password at all").await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let providers: Value =
        serde_json::from_str(&body_text(world.get("/api/auth/providers", None).await).await)
            .unwrap();
    assert_eq!(
        providers,
        json!({ "sso": { "name": "Example SSO", "start": "/auth/oidc/start" }, "passwords": false })
    );
}

impl World {
    async fn post(&self, uri: &str, cookie: Option<&str>, body: Value) -> Response {
        let mut request = Request::post(uri)
            .header(header::ORIGIN, STUDIO)
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        self.router
            .clone()
            .oneshot(request.body(Body::from(body.to_string())).unwrap())
            .await
            .unwrap()
    }
}

/// An access refusal naming the provider, with no session cookie.
async fn passwords_are_off(response: Response) {
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(set_cookies(&response).is_empty());
    let envelope: Value = serde_json::from_str(&body_text(response).await).unwrap();
    assert_eq!(envelope["code"], "APP_ACCESS_DENIED");
    assert!(
        envelope["message"]
            .as_str()
            .unwrap()
            .contains("Sign in with Example SSO"),
        "{envelope}"
    );
}

/// With passwords off, no link sets a password for anyone but the
/// break-glass admin: an invitation made before is not accepted (it would
/// sign its person in past the provider), and none is made or renewed.
#[tokio::test]
async fn sso_only_makes_and_honours_no_password_link() {
    let world = world_with(PasswordPolicy::BreakGlassOnly(Some("root".into())), None).await;
    let root = world
        .store
        .create_user("root", UserRole::Admin, "the break glass password")
        .unwrap();
    world
        .store
        .create_user("pam", UserRole::Admin, "another long password")
        .unwrap();
    let earlier = world
        .store
        .invite_user("ivy", UserRole::Member, &root.id)
        .unwrap();
    let accept = json!({ "token": earlier.secret, "password": "ivy's own long password" });
    passwords_are_off(world.post("/api/invitation/accept", None, accept).await).await;
    assert_eq!(
        world
            .store
            .verify_login("ivy", "ivy's own long password")
            .unwrap(),
        None,
        "the refused link set no password"
    );
    let root_session = session(&world.login("root", "the break glass password").await);
    let invite = json!({ "username": "zed@example.com", "role": "member" });
    passwords_are_off(world.post("/api/users", Some(&root_session), invite).await).await;
    assert!(
        world
            .store
            .user_by_name("zed@example.com")
            .unwrap()
            .is_none()
    );
    for uri in ["/api/users/ivy/invitation", "/api/users/pam/password-reset"] {
        passwords_are_off(world.post(uri, Some(&root_session), json!({})).await).await;
    }
    // Passwords on: the same invitation is made as before.
    let open = world_with(PasswordPolicy::Everyone, None).await;
    let admin = open
        .store
        .create_user("root", UserRole::Admin, "the break glass password")
        .unwrap();
    let link = open
        .store
        .invite_user("ivy", UserRole::Member, &admin.id)
        .unwrap();
    let accepted = open
        .post(
            "/api/invitation/accept",
            None,
            json!({ "token": link.secret, "password": "ivy's own long password" }),
        )
        .await;
    assert_eq!(accepted.status(), StatusCode::OK);
}

#[tokio::test]
async fn passwords_work_alongside_the_provider_unless_turned_off() {
    let world = world().await;
    world
        .store
        .create_user("quinn", UserRole::Member, "a long enough password")
        .unwrap();
    assert_eq!(
        world
            .login("quinn", "a long enough password")
            .await
            .status(),
        StatusCode::OK
    );
    let providers: Value =
        serde_json::from_str(&body_text(world.get("/api/auth/providers", None).await).await)
            .unwrap();
    assert_eq!(providers["passwords"], true);
}

#[tokio::test]
async fn a_callback_naming_another_issuer_is_refused() {
    let world = world().await;
    let started = world.start("/").await;
    let claims = world.claims(&started, "sub-p", "pia", &["sasha-members"]);
    world.provider.issue(
        "c1",
        Issue {
            claims,
            signed_by: Key::A,
            kid: "a".into(),
            challenge: started.challenge.clone(),
        },
    );
    let response = world
        .get(
            &format!(
                "/auth/oidc/callback?code=c1&state={}&iss=https%3A%2F%2Fevil.example",
                started.state
            ),
            Some(&started.cookie),
        )
        .await;
    refused(response, StatusCode::BAD_REQUEST, "does not use").await;
    assert!(world.store.user_by_name("pia").unwrap().is_none());
}

/// The provider's own refusal (the person cancelled, or is not assigned to
/// the app there) is a page; the attempt cookie goes, and nobody is made.
#[tokio::test]
async fn a_provider_that_refuses_the_person_is_a_page() {
    let world = world().await;
    let started = world.start("/#/apps").await;
    let response = world
        .get(
            &format!(
                "/auth/oidc/callback?error=access_denied&error_description=not+assigned&state={}",
                started.state
            ),
            Some(&started.cookie),
        )
        .await;
    assert!(
        set_cookies(&response)
            .iter()
            .any(|c| c.starts_with("sasha_sso=;")),
        "the attempt cookie is removed"
    );
    refused(response, StatusCode::FORBIDDEN, "did not sign you in").await;
    assert_eq!(world.store.users().unwrap(), []);
}

/// A callback without its state or code, or with a parameter twice, is
/// refused before anything is asked of the provider or the store.
#[tokio::test]
async fn an_incomplete_or_malformed_callback_is_refused() {
    let world = world().await;
    let started = world.start("/#/apps").await;
    for (query, says) in [
        (format!("state={}", started.state), "is incomplete"),
        ("code=abc".to_owned(), "is incomplete"),
        (
            format!("code=a&code=b&state={}", started.state),
            "is malformed",
        ),
    ] {
        let response = world
            .get(
                &format!("/auth/oidc/callback?{query}"),
                Some(&started.cookie),
            )
            .await;
        refused(response, StatusCode::BAD_REQUEST, says).await;
    }
    // The attempt was not spent by any of them.
    let claims = world.claims(&started, "sub-ok", "okay", &["sasha-members"]);
    let signed_in = world
        .callback(&started, "code-ok", claims, Key::A, "a")
        .await;
    assert_eq!(signed_in.status(), StatusCode::SEE_OTHER);
}

/// A name at the provider that cannot be a Sasha user name makes nobody.
#[tokio::test]
async fn a_name_that_cannot_be_a_user_name_is_refused() {
    let world = world().await;
    let response = world
        .sign_in("sub-odd", "not a name!", &["sasha-members"])
        .await;
    refused(
        response,
        StatusCode::FORBIDDEN,
        "cannot be a Sasha user name",
    )
    .await;
    assert_eq!(world.store.users().unwrap(), []);
}

/// Without a provider the routes say so, and the sign-in page offers only
/// passwords.
#[tokio::test]
async fn without_a_provider_the_routes_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("core.sqlite")).unwrap();
    let accounts = Accounts::new(store, Origin::parse(STUDIO).unwrap(), STUDIO);
    let router = crate::http::routes().with_state(Arc::new(accounts));
    for uri in [
        "/auth/oidc/start?return_to=/",
        "/auth/oidc/callback?code=a&state=b",
    ] {
        let response = router
            .clone()
            .oneshot(Request::get(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        refused(response, StatusCode::NOT_FOUND, "not set up on this Studio").await;
    }
    let providers = router
        .oneshot(
            Request::get("/api/auth/providers")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let providers: Value = serde_json::from_str(&body_text(providers).await).unwrap();
    assert_eq!(providers, json!({ "sso": null, "passwords": true }));
}
