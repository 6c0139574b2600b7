//! The Studio HTTP API through Studio's router, in process: every route
//! against every kind of caller with the oracle-free 401/404 answers, the
//! recovery descriptor's refusals, sessions with their CSRF and Origin
//! refusals, sign-in throttles, body bounds and the OpenAPI document. What
//! needs processes (a restart, https, the file watcher) stays in
//! `tests/process/api.rs`.

use std::collections::BTreeSet;

use http::StatusCode;

use crate::test_world::{PASSWORD, Reply, STUDIO, World};
use studio_store::{AppAccess, Scope, TokenKind, UserRole};

/// One request with an optional bearer token, extra headers and JSON body.
async fn call(
    world: &World,
    method: &str,
    path: &str,
    token: Option<&str>,
    extra: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let auth = token.map(|token| format!("Bearer {token}"));
    let mut headers: Vec<(&str, &str)> = extra.to_vec();
    if let Some(auth) = &auth {
        headers.push(("authorization", auth));
    }
    if body.is_some() {
        headers.push(("content-type", "application/json"));
    }
    world.raw(method, path, &headers, body.unwrap_or("")).await
}

fn scopes(names: &[Scope]) -> BTreeSet<Scope> {
    names.iter().copied().collect()
}

fn login_body(username: &str, password: &str) -> String {
    serde_json::json!({"username": username, "password": password}).to_string()
}

#[tokio::test]
async fn every_route_against_every_caller() {
    let world = World::new();
    // Admin and staff exist before the first discovery: they get manage.
    world.install(&["hello", "expense-log"]).await;
    let store = world.store();
    let (admin, staff, member) = (&world.admin, &world.staff, &world.member);
    let user = store
        .create_user("uma", UserRole::Member, PASSWORD)
        .unwrap();
    let user_scopes = scopes(&[Scope::ChatUse, Scope::AppsInvoke]);
    let token = |id: &str| {
        store
            .mint_token(id, TokenKind::Access, &user_scopes, None)
            .unwrap()
    };
    let (admin_token, staff_token, member_token, user_token) = (
        token(&admin.id),
        token(&staff.id),
        token(&member.id),
        token(&user.id),
    );
    let api_key = store
        .mint_token(&admin.id, TokenKind::ApiKey, &user_scopes, None)
        .unwrap();
    let expired = store
        .mint_token(&member.id, TokenKind::Access, &user_scopes, Some(1))
        .unwrap();
    world.advance(60);

    // The admin grants `use` on hello to uma through the API.
    let granted = call(
        &world,
        "PUT",
        &format!("/api/apps/hello/access/{}", user.id),
        Some(&admin_token),
        &[],
        Some(r#"{"access":"use"}"#),
    )
    .await;
    assert_eq!(granted.status, 200, "{granted:?}");

    let listing = call(&world, "GET", "/api/apps", Some(&admin_token), &[], None)
        .await
        .json();
    let revision = listing["apps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "hello")
        .unwrap()["revision"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(listing["sandboxOrigin"], "http://127.0.0.1:3007");

    let resource_path = format!("/api/apps/hello/resource?revision={revision}");
    let grant_path = format!("/api/apps/hello/access/{}", member.id);
    let routes: Vec<(&str, &str, Option<&str>)> = vec![
        ("GET", "/api/me", None),
        ("GET", "/api/apps", None),
        ("GET", &resource_path, None),
        ("GET", "/api/apps/hello/access", None),
        ("PUT", &grant_path, Some(r#"{"access":"use"}"#)),
        ("DELETE", &grant_path, None),
        ("GET", "/api/apps/hello/recovery", None),
    ];
    let callers: Vec<(&str, Option<&str>, [u16; 7])> = vec![
        ("anonymous", None, [401; 7]),
        ("garbage token", Some("sasha_at_garbage"), [404; 7]),
        ("expired token", Some(&expired), [404; 7]),
        ("api key", Some(&api_key), [404; 7]),
        (
            "member without grant",
            Some(&member_token),
            [200, 200, 404, 404, 404, 404, 404],
        ),
        (
            "member with use",
            Some(&user_token),
            [200, 200, 200, 404, 404, 404, 404],
        ),
        (
            "staff with manage",
            Some(&staff_token),
            [200, 200, 200, 200, 200, 204, 200],
        ),
        (
            "admin",
            Some(&admin_token),
            [200, 200, 200, 200, 200, 204, 200],
        ),
    ];
    let mut bodies_401 = BTreeSet::new();
    let mut bodies_404 = BTreeSet::new();
    for (name, token, expected) in &callers {
        for ((method, path, body), status) in routes.iter().zip(expected) {
            let response = call(&world, method, path, *token, &[], *body).await;
            assert_eq!(
                response.status, *status,
                "{name}: {method} {path}: {response:?}"
            );
            if *status == 200 {
                assert_eq!(
                    response.header("cache-control"),
                    Some("no-store"),
                    "{name}: {method} {path}"
                );
            } else if *status >= 400 {
                let envelope = response.json();
                for field in ["code", "message", "retryable", "diagnosticId"] {
                    assert!(
                        envelope.get(field).is_some(),
                        "{name}: {method} {path}: no {field}"
                    );
                }
            }
            match status {
                401 => {
                    assert!(response.header("www-authenticate").is_some());
                    bodies_401.insert(response.body.clone());
                }
                404 => {
                    bodies_404.insert(response.body.clone());
                }
                _ => {}
            }
        }
    }
    // Unknown apps and stale revisions answer exactly like denied ones.
    for path in [
        "/api/apps/nope/resource?revision=x".to_owned(),
        format!("/api/apps/hello/resource?revision={}", "0".repeat(64)),
        "/api/apps/hello/resource".to_owned(),
    ] {
        let response = call(&world, "GET", &path, Some(&user_token), &[], None).await;
        assert_eq!(response.status, 404, "{path}");
        bodies_404.insert(response.body);
    }
    assert_eq!(bodies_401.len(), 1, "401 answers differ: {bodies_401:?}");
    assert_eq!(bodies_404.len(), 1, "404 answers differ: {bodies_404:?}");

    // What each caller sees in the listing.
    let ids = |token: &str| {
        let token = token.to_owned();
        let world = &world;
        async move {
            let listing = call(world, "GET", "/api/apps", Some(&token), &[], None)
                .await
                .json();
            listing["apps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|app| {
                    format!(
                        "{}:{}",
                        app["id"].as_str().unwrap(),
                        app["access"].as_str().unwrap()
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    assert!(ids(&member_token).await.is_empty());
    assert_eq!(ids(&user_token).await, ["hello:use"]);
    assert_eq!(
        ids(&staff_token).await,
        ["expense-log:manage", "hello:manage"]
    );

    // The resource is the exact document, never cached.
    let resource = call(&world, "GET", &resource_path, Some(&user_token), &[], None).await;
    assert_eq!(resource.header("cache-control"), Some("no-store"));
    let resource = resource.json();
    assert_eq!(resource["mimeType"], "text/html;profile=mcp-app");
    assert_eq!(
        resource["uri"],
        format!("ui://sasha/apps/hello/revisions/{revision}")
    );
    assert!(
        resource["text"]
            .as_str()
            .unwrap()
            .starts_with("<!doctype html>")
    );

    // Revoke, and the very next request is denied.
    let revoked = call(
        &world,
        "DELETE",
        &format!("/api/apps/hello/access/{}", user.id),
        Some(&admin_token),
        &[],
        None,
    )
    .await;
    assert_eq!(revoked.status, 204);
    let denied = call(&world, "GET", &resource_path, Some(&user_token), &[], None).await;
    assert_eq!(denied.status, 404);
    assert!(ids(&user_token).await.is_empty());

    // Bad grant bodies are specific errors.
    let user_grant = format!("/api/apps/hello/access/{}", user.id);
    for (path, body, status) in [
        (user_grant.as_str(), r#"{"access":"own"}"#, 400),
        (
            user_grant.as_str(),
            r#"{"access":"use","role":"admin"}"#,
            400,
        ),
        (
            "/api/apps/hello/access/no-such-user",
            r#"{"access":"use"}"#,
            404,
        ),
    ] {
        let bad = call(&world, "PUT", path, Some(&admin_token), &[], Some(body)).await;
        assert_eq!(bad.status, status, "{body}: {bad:?}");
        if status == 400 {
            assert_eq!(bad.json()["code"], "APP_INPUT_INVALID", "{body}");
        }
    }
}

/// The recovery descriptor: `apps:invoke` plus `manage` on the app (an
/// app-level grant, whatever the platform role), derived from the declared
/// tables and columns with no SQL text; everything else is the hidden 404.
#[tokio::test]
async fn the_recovery_descriptor_needs_apps_invoke_and_manage() {
    let world = World::new();
    world.install(&["expense-log", "hello"]).await;
    let store = world.store();
    let (staff, member) = (&world.staff, &world.member);
    let mint = |id: &str, held: &[Scope]| {
        store
            .mint_token(id, TokenKind::Access, &scopes(held), None)
            .unwrap()
    };
    let invoke = [Scope::ChatUse, Scope::AppsInvoke];
    let staff_token = mint(&staff.id, &invoke);
    let staff_without_invoke = mint(&staff.id, &[Scope::ChatUse]);
    let member_token = mint(&member.id, &invoke);
    let path = "/api/apps/expense-log/recovery";

    let descriptor = call(&world, "GET", path, Some(&staff_token), &[], None).await;
    assert_eq!(descriptor.status, 200, "{descriptor:?}");
    assert_eq!(descriptor.header("cache-control"), Some("no-store"));
    let body = String::from_utf8(descriptor.body.clone()).unwrap();
    let descriptor = descriptor.json();
    assert_eq!(descriptor["appId"], "expense-log");
    assert_eq!(descriptor["name"], "Expense Log");
    assert_eq!(descriptor["versionField"], "_sasha_version");
    assert_eq!(descriptor["truncated"], false);
    let tables = descriptor["tables"].as_array().unwrap();
    let names: Vec<&str> = tables.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["categories", "expenses"]);
    let expenses = &tables[1];
    assert_eq!(expenses["access"], "owner");
    assert_eq!(expenses["ownerField"], "created_by");
    assert_eq!(expenses["writable"], true);
    assert_eq!(expenses["write"], "use");
    assert_eq!(expenses["managersReadAll"], false);
    assert_eq!(
        expenses["tools"],
        serde_json::json!({
            "list": "app__expense_log__expenses__list",
            "get": "app__expense_log__expenses__get",
            "history": "app__expense_log__expenses__history",
            "export": "app__expense_log__expenses__export",
            "create": "app__expense_log__expenses__create",
            "update": "app__expense_log__expenses__update",
            "delete": "app__expense_log__expenses__delete",
            "import": "app__expense_log__expenses__import",
        })
    );
    let fields: Vec<(String, bool, bool)> = expenses["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_owned(),
                f["required"].as_bool().unwrap(),
                f["readOnly"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            ("id", false, true),
            ("spent_on", true, false),
            ("amount", true, false),
            ("category_id", true, false),
            ("created_by", false, true),
            ("note", false, false),
        ]
        .map(|(name, required, read_only)| (name.to_owned(), required, read_only))
    );
    let upper = body.to_uppercase();
    for sql in ["CREATE TABLE", "REFERENCES", "PRIMARY KEY", "INDEX"] {
        assert!(
            !upper.contains(sql),
            "the descriptor carries no SQL text ({sql})"
        );
    }

    // An app without data has no tables.
    let hello = call(
        &world,
        "GET",
        "/api/apps/hello/recovery",
        Some(&staff_token),
        &[],
        None,
    )
    .await;
    assert_eq!(hello.status, 200);
    assert_eq!(hello.json()["tables"], serde_json::json!([]));

    // Refusals, all the same hidden 404.
    let mut refusals = BTreeSet::new();
    for (what, token, path) in [
        ("no apps:invoke", &staff_without_invoke, path),
        ("no grant", &member_token, path),
        ("unknown app", &staff_token, "/api/apps/nope/recovery"),
        ("bad app id", &staff_token, "/api/apps/..%2Fetc/recovery"),
    ] {
        let response = call(&world, "GET", path, Some(token), &[], None).await;
        assert_eq!(response.status, 404, "{what}: {response:?}");
        refusals.insert(response.body);
    }
    store
        .grant("expense-log", &member.id, AppAccess::Use, Some(&staff.id))
        .unwrap();
    let use_only = call(&world, "GET", path, Some(&member_token), &[], None).await;
    assert_eq!(use_only.status, 404, "use is not enough");
    refusals.insert(use_only.body);
    assert_eq!(
        refusals.len(),
        1,
        "every refusal is byte-identical: {refusals:?}"
    );

    // Manage is an app-level authority: a member holding it may recover.
    store
        .grant(
            "expense-log",
            &member.id,
            AppAccess::Manage,
            Some(&staff.id),
        )
        .unwrap();
    let managed = call(&world, "GET", path, Some(&member_token), &[], None).await;
    assert_eq!(managed.status, 200, "{managed:?}");

    // An app whose package stops validating has no descriptor (its data tools
    // are gone too); fixing it brings the descriptor back. The refresh stands
    // in for the file watcher, which `tests/process/catalogue.rs` runs.
    let manifest = world.apps().join("expense-log/APP.md");
    let original = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, original.replace("version: 1.2.0", "version: [")).unwrap();
    crate::registry::refresh_catalogue(&world.core).await;
    let broken = call(&world, "GET", path, Some(&staff_token), &[], None).await;
    assert_eq!(
        broken.status, 404,
        "an invalid package has no recovery descriptor"
    );
    std::fs::write(&manifest, original).unwrap();
    crate::registry::refresh_catalogue(&world.core).await;
    let repaired = call(&world, "GET", path, Some(&staff_token), &[], None).await;
    assert_eq!(
        repaired.status, 200,
        "the repaired package has its descriptor again"
    );
}

#[tokio::test]
async fn browser_sessions_and_csrf() {
    let world = World::new();
    world.install(&["hello"]).await;
    let login_body = login_body("ada", PASSWORD);

    // Wrong password and unknown user answer alike.
    let wrong = call(
        &world,
        "POST",
        "/api/auth/login",
        None,
        &[],
        Some(&self::login_body("ada", "nope nope nope")),
    )
    .await;
    let unknown = call(
        &world,
        "POST",
        "/api/auth/login",
        None,
        &[],
        Some(&self::login_body("zed", "nope nope nope")),
    )
    .await;
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.body, unknown.body);
    assert!(wrong.header("set-cookie").is_none());

    // Cross-origin and same-site requests are refused before anything else.
    for origin in ["http://127.0.0.1:3007", "http://evil.test", "null"] {
        let refused = call(
            &world,
            "POST",
            "/api/auth/login",
            None,
            &[("origin", origin)],
            Some(&login_body),
        )
        .await;
        assert_eq!(refused.status, 403, "{origin}");
        assert_eq!(refused.json()["code"], "APP_ACCESS_DENIED");
    }
    let refused = call(
        &world,
        "POST",
        "/api/auth/login",
        None,
        &[("sec-fetch-site", "same-site")],
        Some(&login_body),
    )
    .await;
    assert_eq!(refused.status, 403);
    let text_plain = world
        .raw(
            "POST",
            "/api/auth/login",
            &[("content-type", "text/plain")],
            &login_body,
        )
        .await;
    assert_eq!(text_plain.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    // A body over the route's limit is the envelope, not the framework's text.
    let huge = self::login_body("ada", &"x".repeat(3 * 1024 * 1024));
    let too_large = call(
        &world,
        "POST",
        "/api/auth/login",
        None,
        &[("origin", STUDIO)],
        Some(&huge),
    )
    .await;
    assert_eq!(too_large.status, 413, "{too_large:?}");
    assert_eq!(too_large.json()["code"], "APP_RESOURCE_LIMIT");

    // No CORS is ever granted, whatever the Origin (security catalogue F6).
    for origin in [
        "http://127.0.0.1:3007",
        "null",
        "http://localhost:3007.attacker.test",
    ] {
        let response = call(
            &world,
            "GET",
            "/api/apps",
            None,
            &[("origin", origin)],
            None,
        )
        .await;
        assert!(
            response.header("access-control-allow-origin").is_none(),
            "{origin}"
        );
        assert!(
            response
                .header("access-control-allow-credentials")
                .is_none(),
            "{origin}"
        );
    }

    // A same-origin login sets a host-only, HttpOnly cookie.
    let login = call(
        &world,
        "POST",
        "/api/auth/login",
        None,
        &[("origin", STUDIO), ("sec-fetch-site", "same-origin")],
        Some(&login_body),
    )
    .await;
    assert_eq!(login.status, 200, "{login:?}");
    let cookie = login.header("set-cookie").unwrap().to_owned();
    assert!(cookie.starts_with("sasha_session="), "{cookie}");
    assert!(
        cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Lax")
            && !cookie.contains("Domain"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_owned();
    let me = call(
        &world,
        "GET",
        "/api/me",
        None,
        &[("cookie", &session)],
        None,
    )
    .await;
    assert_eq!(me.status, 200);
    let me = me.json();
    assert_eq!(me["username"], "ada");
    assert_eq!(me["role"], "admin");
    assert_eq!(
        me["scopes"],
        serde_json::json!(["chat:use", "apps:invoke", "apps:write", "apps:author"])
    );

    // A state change from the sandbox origin with the session cookie is refused.
    let csrf = call(
        &world,
        "DELETE",
        "/api/apps/hello/access/x",
        None,
        &[("cookie", &session), ("origin", "http://127.0.0.1:3007")],
        None,
    )
    .await;
    assert_eq!(csrf.status, 403);
    // With the cookie and neither Origin nor Sec-Fetch-Site, a state change is
    // refused too: only a cookie-less (bearer) caller may omit both.
    for (method, path, body) in [
        ("DELETE", "/api/apps/hello/access/x", None),
        (
            "PUT",
            "/api/apps/hello/access/x",
            Some(r#"{"access":"use"}"#),
        ),
        ("POST", "/api/auth/logout", None),
    ] {
        let bare = call(&world, method, path, None, &[("cookie", &session)], body).await;
        assert_eq!(bare.status, 403, "{method} {path}: {bare:?}");
        assert_eq!(bare.json()["code"], "APP_ACCESS_DENIED");
    }

    // Logout ends the session.
    let logout = call(
        &world,
        "POST",
        "/api/auth/logout",
        None,
        &[("cookie", &session), ("origin", STUDIO)],
        None,
    )
    .await;
    assert_eq!(logout.status, 204);
    let after = call(
        &world,
        "GET",
        "/api/me",
        None,
        &[("cookie", &session)],
        None,
    )
    .await;
    assert_eq!(after.status, 404);
}

#[tokio::test]
async fn the_openapi_document_describes_every_route() {
    let world = World::new();
    let response = call(&world, "GET", "/api/openapi.json", None, &[], None).await;
    assert_eq!(response.status, 200);
    let document = response.json();
    assert!(document["openapi"].as_str().unwrap().starts_with("3."));
    let mut operations = BTreeSet::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            operations.insert(format!("{} {path}", method.to_uppercase()));
        }
    }
    let expected: BTreeSet<String> = [
        "POST /api/auth/login",
        "POST /api/auth/logout",
        "GET /api/auth/providers",
        "GET /api/me",
        "GET /api/session",
        "GET /api/users",
        "POST /api/users",
        "PATCH /api/users/{username}",
        "DELETE /api/users/{username}",
        "POST /api/users/{username}/invitation",
        "POST /api/users/{username}/password-reset",
        "POST /api/invitation",
        "POST /api/invitation/accept",
        "GET /api/tokens",
        "POST /api/tokens",
        "DELETE /api/tokens/{id}",
        "GET /api/scim/tokens",
        "POST /api/scim/tokens",
        "DELETE /api/scim/tokens/{id}",
        "GET /api/apps",
        "POST /api/apps",
        "GET /api/apps/{appId}/resource",
        "GET /api/apps/{appId}/access",
        "PUT /api/apps/{appId}/access/{userId}",
        "DELETE /api/apps/{appId}/access/{userId}",
        "GET /api/apps/{appId}/recovery",
        "GET /api/apps/{appId}/revisions",
        "GET /api/apps/{appId}/revisions/{revision}/diff",
        "GET /api/apps/{appId}/revisions/{revision}/file",
        "POST /api/apps/{appId}/revert",
        "GET /api/apps/{appId}/draft",
        "POST /api/apps/{appId}/draft",
        "DELETE /api/apps/{appId}/draft",
        "GET /api/apps/{appId}/draft/resource",
        "GET /api/apps/{appId}/draft/files",
        "PUT /api/apps/{appId}/draft/files",
        "DELETE /api/apps/{appId}/draft/files",
        "POST /api/apps/{appId}/draft/publish",
        "POST /api/apps/{appId}/withdraw",
        "POST /api/apps/{appId}/restore",
        "POST /api/apps/{appId}/delete",
        "GET /api/withdrawn-apps",
        "GET /api/member-apps",
        "POST /api/member-apps",
        "POST /api/member-apps/check",
        "GET /api/member-apps/{appId}",
        "PUT /api/member-apps/{appId}",
        "DELETE /api/member-apps/{appId}",
        "POST /api/member-apps/{appId}/revert",
        "GET /api/member-apps/{appId}/revisions",
        "POST /api/member-apps/{appId}/draft",
        "POST /api/member-apps/{appId}/shares",
        "DELETE /api/member-apps/{appId}/shares/{username}",
        "POST /api/member-apps/{appId}/disable",
        "POST /api/member-apps/{appId}/enable",
        "POST /api/member-apps/{appId}/promote",
        "GET /api/settings",
        "PUT /api/settings/member-apps",
        "GET /api/admin/replication",
        "GET /api/member-app-guide",
        "GET /api/oauth/requests/{requestId}",
        "POST /api/oauth/requests/{requestId}/approve",
        "POST /api/oauth/requests/{requestId}/deny",
        "GET /api/oauth/connections",
        "DELETE /api/oauth/connections/{connectionId}",
        "GET /api/assistant",
        "GET /api/assistant/conversations",
        "POST /api/assistant/conversations",
        "GET /api/assistant/conversations/{id}",
        "DELETE /api/assistant/conversations/{id}",
        "POST /api/assistant/conversations/{id}/turn",
        "POST /api/assistant/conversations/{id}/cancel",
        "GET /api/assistant/confirmations",
        "POST /api/assistant/confirmations/{id}",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(operations, expected);
    let schemas = document["components"]["schemas"].as_object().unwrap();
    for name in [
        "ErrorEnvelope",
        "AppsResponse",
        "ResourceResponse",
        "LoginRequest",
        "GrantRequest",
        "CreateAppBody",
        "CreatedApp",
        "RecoveryDescriptor",
        "ConsentRequest",
        "ConnectionsResponse",
    ] {
        assert!(schemas.contains_key(name), "{name} missing");
    }
    let envelope = &schemas["ErrorEnvelope"]["properties"];
    for field in ["code", "message", "retryable", "diagnosticId"] {
        assert!(envelope.get(field).is_some(), "ErrorEnvelope lacks {field}");
    }
}

/// A session store that stays locked past the store's busy timeout answers a
/// retryable 503 (here: another writer holds the core database while a login
/// needs to record its session), and the next attempt after the lock is
/// released succeeds.
#[tokio::test]
async fn a_locked_session_store_is_a_retryable_503() {
    let world = World::new();
    let login_body = login_body("ada", PASSWORD);
    let lock = rusqlite::Connection::open(world.dir.path().join("core.sqlite")).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE;").unwrap();
    let busy = call(
        &world,
        "POST",
        "/api/auth/login",
        None,
        &[],
        Some(&login_body),
    )
    .await;
    assert_eq!(busy.status, 503, "{busy:?}");
    let envelope = busy.json();
    assert_eq!(envelope["code"], "APP_NOT_READY");
    assert_eq!(envelope["retryable"], true);
    assert!(busy.header("set-cookie").is_none());
    lock.execute_batch("ROLLBACK;").unwrap();
    drop(lock);
    let retried = call(
        &world,
        "POST",
        "/api/auth/login",
        None,
        &[],
        Some(&login_body),
    )
    .await;
    assert_eq!(retried.status, 200);
}

/// Issue 21, "throttles that attackers cannot turn against users": sign-in
/// attempts count per (user name, client address) with growing delays. Ten
/// bad passwords from one address leave that pair waiting, even with the
/// right password (a retryable 429 `APP_BUSY` with `Retry-After`), while the
/// right password from another address signs in at once and other names from
/// the first address are unaffected. The client address is the last
/// `X-Forwarded-For` entry, which the one trusted proxy hop writes; these
/// requests stand in for that hop.
#[tokio::test]
async fn failed_sign_ins_slow_one_address_and_never_lock_the_user_out() {
    const A: &str = "192.0.2.10";
    const B: &str = "198.51.100.20";
    let world = World::new();
    world
        .store()
        .create_user("bea", UserRole::Member, PASSWORD)
        .unwrap();
    let login = |username: &str, password: &str, forwarded_for: &str| {
        let body = login_body(username, password);
        let forwarded_for = forwarded_for.to_owned();
        let world = &world;
        async move {
            call(
                world,
                "POST",
                "/api/auth/login",
                None,
                &[("x-forwarded-for", &forwarded_for)],
                Some(&body),
            )
            .await
        }
    };
    let mut statuses = Vec::new();
    for _ in 0..10 {
        statuses.push(login("ada", "wrong wrong wrong", A).await.status);
    }
    // Five at once, then one every 10 s: the rest are refused unchecked.
    assert_eq!(statuses, [401, 401, 401, 401, 401, 429, 429, 429, 429, 429]);
    // The pair waits, whatever the case of the name or the password, and
    // whatever a client wrote to the left of the proxy's entry.
    for (username, forwarded_for) in [("ada", A), ("ADA", A), ("ada", "203.0.113.9, 192.0.2.10")] {
        let throttled = login(username, PASSWORD, forwarded_for).await;
        assert_eq!(throttled.status, 429, "{username} from {forwarded_for}");
        let seconds: u64 = throttled.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=10).contains(&seconds), "{seconds}");
        let envelope = throttled.json();
        assert_eq!(envelope["code"], "APP_BUSY");
        assert_eq!(envelope["retryable"], true);
        assert!(
            envelope["message"]
                .as_str()
                .unwrap()
                .contains("from your address; try again in"),
            "{envelope}"
        );
        assert!(envelope["diagnosticId"].is_string(), "{envelope}");
    }
    // The right password from another address signs in at once …
    let elsewhere = login("ada", PASSWORD, B).await;
    assert_eq!(elsewhere.status, 200, "{elsewhere:?}");
    assert!(elsewhere.header("set-cookie").is_some());
    // … and the first address's other names are not slowed.
    assert_eq!(login("bea", PASSWORD, A).await.status, 200);
    assert_eq!(login("nobody", "wrong wrong wrong", A).await.status, 401);
    // Without a proxy hop every caller is the one address `-`, still apart
    // from A's pair.
    let direct = call(
        &world,
        "POST",
        "/api/auth/login",
        None,
        &[],
        Some(&login_body("ada", PASSWORD)),
    )
    .await;
    assert_eq!(direct.status, 200, "{direct:?}");
}

/// studio-core's JSON bodies are bounded in values and nesting before they
/// are parsed (`sasha_proto::json_limits::STUDIO_API`): a sign-in padded with
/// twenty thousand numbers, or nested 20 deep, is `APP_RESOURCE_LIMIT` (413)
/// before any credential is looked at, and a client registration nested too
/// deep is refused in OAuth's own error shape.
#[tokio::test]
async fn json_bodies_are_bounded_before_they_are_parsed() {
    let world = World::new();
    let padded = format!(
        r#"{{"username":"ada","password":"{PASSWORD}","pad":[{}0]}}"#,
        "0,".repeat(20_000)
    );
    let deep = format!(
        r#"{{"username":{}"ada"{},"password":"{PASSWORD}"}}"#,
        "[".repeat(20),
        "]".repeat(20)
    );
    for (body, words) in [
        (&padded, "more than 1000 JSON values"),
        (&deep, "nests deeper than 8"),
    ] {
        let refused = call(&world, "POST", "/api/auth/login", None, &[], Some(body)).await;
        assert_eq!(refused.status, 413, "{refused:?}");
        let envelope = refused.json();
        assert_eq!(envelope["code"], "APP_RESOURCE_LIMIT");
        assert!(
            envelope["message"].as_str().unwrap().contains(words),
            "{envelope}"
        );
        assert!(refused.header("set-cookie").is_none());
    }
    // The same credentials in an ordinary body still sign in.
    let signed_in = call(
        &world,
        "POST",
        "/api/auth/login",
        None,
        &[],
        Some(&login_body("ada", PASSWORD)),
    )
    .await;
    assert_eq!(signed_in.status, 200, "{signed_in:?}");

    let registration = format!(
        r#"{{"redirect_uris":["http://127.0.0.1:9/cb"],"client_name":{}"x"{}}}"#,
        "[".repeat(20),
        "]".repeat(20)
    );
    let refused = call(
        &world,
        "POST",
        "/oauth/register",
        None,
        &[],
        Some(&registration),
    )
    .await;
    assert_eq!(refused.status, 400, "{refused:?}");
    let error = refused.json();
    assert_eq!(error["error"], "invalid_client_metadata");
    assert!(
        error["error_description"]
            .as_str()
            .unwrap()
            .contains("nests deeper than 8"),
        "{error}"
    );
}

/// The sandbox hostname is not served by Studio at all, and neither is any
/// other Host.
#[tokio::test]
async fn studio_answers_only_its_own_host() {
    let world = World::new();
    let session = world.session(&world.admin);
    for host in [
        "127.0.0.1:3007",
        "evil.test",
        "localhost:3007.attacker.test",
    ] {
        let other = world
            .raw(
                "GET",
                "/api/me",
                &[("host", host), ("cookie", &session)],
                "",
            )
            .await;
        assert_eq!(other.status, StatusCode::NOT_FOUND, "{host}");
    }
    let own = world
        .raw("GET", "/api/me", &[("cookie", &session)], "")
        .await;
    assert_eq!(own.status, StatusCode::OK);
}

/// Every operation the OpenAPI document lists, against each kind of caller
/// that must be refused: an anonymous caller is 401 with `WWW-Authenticate`,
/// a bearer token that names nobody and a session that ended are the one
/// hidden 404, and a state change carrying the session cookie from the
/// sandbox origin, from another site or with neither `Origin` nor
/// `Sec-Fetch-Site` is 403. Every refusal is the envelope, and no refused
/// request changes anything. The document is the route list, so a new route
/// is in this matrix the moment it is documented (and
/// `the_openapi_document_describes_every_route` fails until it is).
/// The replication page is the admins': anyone else gets the hidden 404;
/// with replication off it says so.
#[tokio::test]
async fn replication_state_is_shown_to_admins_only() {
    let world = World::new();
    for user in [&world.member, &world.staff] {
        let session = world.session(user);
        let reply = call(
            &world,
            "GET",
            "/api/admin/replication",
            None,
            &[("cookie", &session)],
            None,
        )
        .await;
        assert_eq!(reply.status, 404, "{reply:?}");
    }
    let session = world.session(&world.admin);
    let reply = call(
        &world,
        "GET",
        "/api/admin/replication",
        None,
        &[("cookie", &session)],
        None,
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.json(), serde_json::json!({"enabled": false}));
}

#[tokio::test]
async fn every_documented_route_refuses_every_caller_without_a_right() {
    let world = World::new();
    world.install(&["hello", "expense-log"]).await;
    let document = call(&world, "GET", "/api/openapi.json", None, &[], None)
        .await
        .json();
    let member_id = world.member.id.clone();
    let fill = |path: &str| {
        path.replace("{appId}", "hello")
            .replace("{userId}", &member_id)
            .replace("{username}", "mia")
            .replace("{revision}", &"0".repeat(64))
            .replace("{requestId}", "x")
            .replace("{connectionId}", "x")
            .replace("{id}", "x")
    };
    // Open to anyone by design: signing in and out and how one signs in
    // here, asking whether the page is signed in (`http::session`'s own test
    // has its refusals), an
    // invitation link (its 256-bit secret is the credential), and the member
    // app authoring guide (public in the spec: builders fetch it as it is).
    let public = [
        "POST /api/auth/login",
        "POST /api/auth/logout",
        "GET /api/auth/providers",
        "GET /api/session",
        "POST /api/invitation",
        "POST /api/invitation/accept",
        "GET /api/member-app-guide",
    ];
    let ended = world.session(&world.admin);
    world
        .store()
        .delete_session(ended.strip_prefix("sasha_session=").unwrap())
        .unwrap();
    let before = world.store().audit_entries(None).unwrap().len();
    let mut operations = 0;
    let mut hidden = BTreeSet::new();
    // Every answer that is not the expected refusal, to show them all at once.
    let mut wrong = Vec::new();
    for (template, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let method = method.to_uppercase();
            let operation = format!("{method} {template}");
            operations += 1;
            let path = fill(template);
            let changes = method != "GET";
            let body = changes.then_some("{}");
            let refused = |reply: &Reply, status: u16, code: Option<&str>, who: &str| {
                let envelope = reply.json();
                let whole = ["code", "message", "retryable", "diagnosticId"]
                    .iter()
                    .all(|field| envelope.get(field).is_some());
                (reply.status != status
                    || !whole
                    || code.is_some_and(|code| envelope["code"] != code))
                .then(|| format!("{who}: {operation}: {reply:?}"))
            };
            let same_origin: &[(&str, &str)] = &[("origin", STUDIO)];
            // A public route has only the CSRF refusals below.
            if !public.contains(&operation.as_str()) {
                let anonymous = call(&world, &method, &path, None, same_origin, body).await;
                wrong.extend(refused(&anonymous, 401, None, "anonymous"));
                if anonymous.status == 401 && anonymous.header("www-authenticate").is_none() {
                    wrong.push(format!("anonymous: {operation}: no WWW-Authenticate"));
                }
                let garbage = call(
                    &world,
                    &method,
                    &path,
                    Some("sasha_at_garbage"),
                    same_origin,
                    body,
                )
                .await;
                wrong.extend(refused(&garbage, 404, None, "a token that names nobody"));
                hidden.insert(garbage.body);
                let gone = call(
                    &world,
                    &method,
                    &path,
                    None,
                    &[("origin", STUDIO), ("cookie", &ended)],
                    body,
                )
                .await;
                wrong.extend(refused(&gone, 404, None, "an ended session"));
                hidden.insert(gone.body);
            }
            if changes {
                let session = world.session(&world.admin);
                for (who, headers) in [
                    (
                        "the sandbox origin",
                        vec![
                            ("cookie", session.as_str()),
                            ("origin", "http://127.0.0.1:3007"),
                        ],
                    ),
                    (
                        "another site",
                        vec![
                            ("cookie", session.as_str()),
                            ("sec-fetch-site", "cross-site"),
                        ],
                    ),
                    (
                        "no Origin nor Sec-Fetch-Site",
                        vec![("cookie", session.as_str())],
                    ),
                ] {
                    let csrf = call(&world, &method, &path, None, &headers, body).await;
                    wrong.extend(refused(&csrf, 403, Some("APP_ACCESS_DENIED"), who));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(operations > 50, "only {operations} operations were tried");
    assert_eq!(hidden.len(), 1, "hidden answers differ: {hidden:?}");
    assert_eq!(
        world.store().audit_entries(None).unwrap().len(),
        before,
        "a refused request changed something"
    );
}
