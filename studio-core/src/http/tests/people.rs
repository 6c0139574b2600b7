//! People and personal tokens through Studio's router, in process: who may
//! list, invite, change and remove people (every kind of caller), the
//! invitation link from first look to a signed-in session, what removing a
//! person takes with them, and a person's own tokens from creation to
//! revocation with their last use.

use http::StatusCode;
use serde_json::{Value, json};

use crate::test_world::{PASSWORD, STUDIO, World, off_runtime, on_both_databases};
use studio_store::{AppAccess, Scope, people_action};

const STRONG: &str = "a long enough password";

fn secret_of(invitation: &Value) -> String {
    let url = invitation["url"].as_str().unwrap();
    let (origin, secret) = url.split_once("/#/invite/").expect("a Studio link");
    assert_eq!(origin, STUDIO, "the link opens Studio");
    secret.to_owned()
}

/// An anonymous same-origin JSON request, as the invitation page sends.
async fn anonymous(world: &World, uri: &str, body: Value) -> (StatusCode, http::HeaderMap, Value) {
    world
        .exchange(
            "POST",
            uri,
            &[("origin", STUDIO), ("content-type", "application/json")],
            &body.to_string(),
        )
        .await
}

fn audited(world: &World, action: &str) -> usize {
    world
        .store()
        .audit_entries(None)
        .unwrap()
        .iter()
        .filter(|entry| entry.action == action)
        .count()
}

#[tokio::test]
async fn only_admin_and_staff_list_people_by_name() {
    let world = World::new();
    let (status, _) = world.send("GET", "/api/users", &[], "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let member = world.session(&world.member);
    let (status, _) = world
        .send("GET", "/api/users", &[("cookie", &member)], "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "hidden from members");
    for user in [&world.admin, &world.staff] {
        let cookie = world.session(user);
        let (status, listed) = world
            .send("GET", "/api/users", &[("cookie", &cookie)], "")
            .await;
        assert_eq!(status, StatusCode::OK, "{listed}");
        let names: Vec<&str> = listed["users"]
            .as_array()
            .unwrap()
            .iter()
            .map(|person| person["username"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ada", "mia", "sam"]);
        let mia = &listed["users"][1];
        assert_eq!(mia["role"], "member");
        assert_eq!(mia["status"], "active");
        assert!(
            mia["lastSignInAt"].is_i64(),
            "a session is a sign-in: {mia}"
        );
        assert!(mia.get("passwordHash").is_none());
    }
}

#[tokio::test]
async fn a_disabled_person_is_refused_at_sign_in_and_loses_their_session() {
    let world = World::new();
    let cookie = world.session(&world.member);
    world
        .store()
        .set_disabled("mia", true, &world.admin.id)
        .unwrap();
    let (status, _) = world
        .send("GET", "/api/me", &[("cookie", &cookie)], "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the session ended");
    let body = json!({"username": "mia", "password": PASSWORD}).to_string();
    let (status, refused) = world
        .send(
            "POST",
            "/api/auth/login",
            &[("origin", STUDIO), ("content-type", "application/json")],
            &body,
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refused}");
    let wrong = json!({"username": "mia", "password": "not the password at all"}).to_string();
    let (_, wrong_answer) = world
        .send(
            "POST",
            "/api/auth/login",
            &[("origin", STUDIO), ("content-type", "application/json")],
            &wrong,
        )
        .await;
    assert_eq!(
        refused["code"], wrong_answer["code"],
        "the same answer as a wrong password"
    );
    assert_eq!(refused["message"], wrong_answer["message"]);
}

#[tokio::test]
async fn an_invited_person_signs_in_through_their_link_once() {
    let world = World::new();
    let ada = world.page(&world.admin);
    let (status, invited) = ada
        .call(
            "POST",
            "/api/users",
            json!({"username": "nora", "role": "member"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{invited}");
    assert_eq!(invited["user"]["status"], "invited");
    assert!(invited["invitation"]["expiresAt"].is_i64());
    let secret = secret_of(&invited["invitation"]);
    assert_eq!(audited(&world, people_action::USER_INVITED), 1);

    // Before accepting, no password signs nora in.
    let (status, _, _) = anonymous(
        &world,
        "/api/auth/login",
        json!({"username": "nora", "password": ""}),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, _, view) = anonymous(&world, "/api/invitation", json!({"token": secret})).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["username"], "nora");
    assert_eq!(view["role"], "member");

    // A weak password is refused at its field, and the link still works.
    let (status, _, weak) = anonymous(
        &world,
        "/api/invitation/accept",
        json!({"token": secret, "password": "short"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{weak}");
    assert_eq!(weak["code"], "APP_INPUT_INVALID");
    assert_eq!(weak["details"]["field"], "password");

    let (status, headers, me) = anonymous(
        &world,
        "/api/invitation/accept",
        json!({"token": secret, "password": STRONG}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["username"], "nora");
    let cookie = headers
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let (status, me) = world
        .send("GET", "/api/me", &[("cookie", &cookie)], "")
        .await;
    assert_eq!(status, StatusCode::OK, "the answer signed nora in: {me}");
    assert_eq!(audited(&world, people_action::INVITATION_ACCEPTED), 1);

    // The link is spent: looking it up or accepting again is the hidden 404.
    for (uri, body) in [
        ("/api/invitation", json!({"token": secret})),
        (
            "/api/invitation/accept",
            json!({"token": secret, "password": "another long password"}),
        ),
    ] {
        let (status, _, gone) = anonymous(&world, uri, body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}: {gone}");
    }
    let (status, _, _) = anonymous(
        &world,
        "/api/auth/login",
        json!({"username": "nora", "password": STRONG}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "the chosen password signs in");
    let (_, listed) = ada.get("/api/users").await;
    let nora = listed["users"]
        .as_array()
        .unwrap()
        .iter()
        .find(|person| person["username"] == "nora")
        .unwrap();
    assert_eq!(nora["status"], "active");
    assert!(nora["invitationExpiresAt"].is_null());

    // A new link is only for someone who has not accepted yet.
    let (status, renewed) = ada
        .call("POST", "/api/users/nora/invitation", Value::Null)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{renewed}");
}

#[tokio::test]
async fn a_new_link_replaces_the_old_and_links_expire_or_die_with_a_disabled_person() {
    let world = World::new();
    let ada = world.page(&world.admin);
    let (_, invited) = ada
        .call(
            "POST",
            "/api/users",
            json!({"username": "omar", "role": "staff"}),
        )
        .await;
    let old = secret_of(&invited["invitation"]);
    let (status, renewed) = ada
        .call("POST", "/api/users/omar/invitation", Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    let new = secret_of(&renewed["invitation"]);
    assert_ne!(old, new);
    let (status, _, _) = anonymous(&world, "/api/invitation", json!({"token": old})).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "the old link stopped working"
    );
    let (status, _, _) = anonymous(&world, "/api/invitation", json!({"token": new})).await;
    assert_eq!(status, StatusCode::OK);

    // Disabling an invited person ends their link.
    let (status, _) = ada
        .call("PATCH", "/api/users/omar", json!({"status": "disabled"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = anonymous(
        &world,
        "/api/invitation/accept",
        json!({"token": new, "password": STRONG}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, refused) = ada
        .call("POST", "/api/users/omar/invitation", Value::Null)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("disabled"));

    // Unknown and oversized secrets are the same hidden 404.
    for token in ["nope".to_owned(), "x".repeat(300), String::new()] {
        let (status, _, _) = anonymous(&world, "/api/invitation", json!({"token": token})).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}

#[tokio::test]
async fn people_changes_are_for_admins_on_the_studio_origin_and_never_themselves() {
    let world = World::new();
    let changes: [(&str, &str, Value); 4] = [
        (
            "POST",
            "/api/users",
            json!({"username": "pia", "role": "member"}),
        ),
        ("PATCH", "/api/users/mia", json!({"role": "staff"})),
        ("DELETE", "/api/users/mia", Value::Null),
        ("POST", "/api/users/mia/invitation", Value::Null),
    ];
    let admin_cookie = world.session(&world.admin);
    let admin_bearer = world.bearer(&world.admin, &[Scope::ChatUse, Scope::AppsInvoke]);
    for (method, uri, body) in &changes {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let json_headers = [("origin", STUDIO), ("content-type", "application/json")];
        let (status, _) = world.send(method, uri, &json_headers, &body).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "anonymous {method} {uri}");
        for user in [&world.member, &world.staff] {
            let page = world.page(user);
            let (status, refused) = page
                .call(
                    method,
                    uri,
                    serde_json::from_str(&body).unwrap_or(Value::Null),
                )
                .await;
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{} {method} {uri}",
                user.username
            );
            assert_eq!(refused["code"], "APP_ACCESS_DENIED");
        }
        let (status, _) = world
            .send(
                method,
                uri,
                &[
                    ("authorization", &admin_bearer),
                    ("content-type", "application/json"),
                ],
                &body,
            )
            .await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "a token is not a session: {method} {uri}"
        );
        let (status, _) = world
            .send(
                method,
                uri,
                &[
                    ("cookie", &admin_cookie),
                    ("origin", "https://evil.example"),
                    ("content-type", "application/json"),
                ],
                &body,
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "cross-origin {method} {uri}");
    }
    let ada = world.page(&world.admin);
    for (method, uri, body) in [
        ("PATCH", "/api/users/ada", json!({"role": "member"})),
        ("PATCH", "/api/users/ada", json!({"status": "disabled"})),
        ("DELETE", "/api/users/ada", Value::Null),
    ] {
        let (status, refused) = ada.call(method, uri, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {uri}: {refused}");
        assert!(refused["message"].as_str().unwrap().contains("your own"));
    }
    // Nothing above changed anyone.
    let people = world.store().people().unwrap();
    assert_eq!(people.len(), 3);
    assert!(people.iter().all(|person| !person.disabled));
    assert_eq!(audited(&world, people_action::USER_ROLE_CHANGED), 0);
}

#[tokio::test]
async fn bad_changes_are_refused_at_their_field_and_change_nothing() {
    let world = World::new();
    let ada = world.page(&world.admin);
    for (body, status, code, field) in [
        (
            json!({"username": "mia", "role": "member"}),
            StatusCode::CONFLICT,
            "APP_CONFLICT",
            Some("username"),
        ),
        (
            json!({"username": "No Spaces", "role": "member"}),
            StatusCode::BAD_REQUEST,
            "APP_INPUT_INVALID",
            Some("username"),
        ),
        (
            json!({"username": "pia", "role": "boss"}),
            StatusCode::BAD_REQUEST,
            "APP_INPUT_INVALID",
            None,
        ),
        (
            json!({"username": "pia"}),
            StatusCode::BAD_REQUEST,
            "APP_INPUT_INVALID",
            None,
        ),
    ] {
        let (got, refused) = ada.call("POST", "/api/users", body.clone()).await;
        assert_eq!(got, status, "{body}: {refused}");
        assert_eq!(refused["code"], code);
        if let Some(field) = field {
            assert_eq!(refused["details"]["field"], field, "{refused}");
        }
    }
    for (body, field) in [
        (json!({}), None),
        (json!({"role": "staff", "status": "disabled"}), None),
        (json!({"status": "asleep"}), Some("status")),
        (json!({"role": "owner"}), None),
    ] {
        let (status, refused) = ada.call("PATCH", "/api/users/mia", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {refused}");
        if let Some(field) = field {
            assert_eq!(refused["details"]["field"], field);
        }
    }
    for (method, uri) in [
        ("PATCH", "/api/users/nobody"),
        ("DELETE", "/api/users/nobody"),
        ("POST", "/api/users/nobody/invitation"),
    ] {
        let body = if method == "PATCH" {
            json!({"role": "staff"})
        } else {
            Value::Null
        };
        let (status, _) = ada.call(method, uri, body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {uri}");
    }
    assert_eq!(world.store().people().unwrap().len(), 3);
}

#[tokio::test]
async fn an_admin_changes_a_role_and_disables_and_enables_a_person() {
    let world = World::new();
    let ada = world.page(&world.admin);
    let mia_cookie = world.session(&world.member);
    let (status, changed) = ada
        .call("PATCH", "/api/users/mia", json!({"role": "staff"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["user"]["role"], "staff");
    assert_eq!(changed["changed"], true);
    let (_, again) = ada
        .call("PATCH", "/api/users/mia", json!({"role": "staff"}))
        .await;
    assert_eq!(again["changed"], false, "an unchanged role is said so");
    assert_eq!(audited(&world, people_action::USER_ROLE_CHANGED), 1);

    let (status, disabled) = ada
        .call("PATCH", "/api/users/mia", json!({"status": "disabled"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(disabled["user"]["status"], "disabled");
    let (status, _) = world
        .send("GET", "/api/me", &[("cookie", &mia_cookie)], "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "disabling ended her session");
    let (_, enabled) = ada
        .call("PATCH", "/api/users/mia", json!({"status": "active"}))
        .await;
    assert_eq!(enabled["user"]["status"], "active");
    assert_eq!(audited(&world, people_action::USER_STATUS_CHANGED), 2);
}

#[tokio::test]
async fn removing_a_person_ends_their_grants_and_leaves_their_apps_authorless() {
    let world = World::new();
    world.create_as_admin("notes", true).await;
    world
        .store()
        .grant(
            "notes",
            &world.member.id,
            AppAccess::Use,
            Some(&world.admin.id),
        )
        .unwrap();
    let mia = world.page(&world.member);
    let (status, deployed) = mia
        .call(
            "POST",
            "/api/member-apps",
            json!({"name": "Habits", "files": crate::member_apps::tests::package(true, false)}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{deployed}");
    let token = world.bearer(&world.member, &[Scope::ChatUse, Scope::AppsInvoke]);
    let grants_before = audited(&world, studio_store::action::GRANT_CHANGED);

    let ada = world.page(&world.admin);
    let (status, removed) = ada.call("DELETE", "/api/users/mia", Value::Null).await;
    assert_eq!(status, StatusCode::OK, "{removed}");
    assert_eq!(
        removed["removed"]["grantsRevoked"], 2,
        "notes and her own habits"
    );
    assert_eq!(removed["removed"]["memberAppsOrphaned"], 1);
    assert_eq!(
        audited(&world, studio_store::action::GRANT_CHANGED),
        grants_before + 2,
        "each ended grant is audited"
    );
    assert_eq!(audited(&world, people_action::USER_REMOVED), 1);

    assert!(world.store().user(&world.member.id).unwrap().is_none());
    assert!(
        world
            .store()
            .access("notes", &world.member.id)
            .unwrap()
            .is_none()
    );
    let (status, _) = mia.get("/api/me").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "her session is gone");
    let (status, _) = world
        .send("GET", "/api/me", &[("authorization", &token)], "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "her token is gone");
    let (_, apps) = ada.get("/api/member-apps?all=true").await;
    let habits = &apps["apps"][0];
    assert_eq!(habits["id"], deployed["app"]["id"], "{apps}");
    assert!(
        habits["author"].is_null(),
        "nobody can change it now: {habits}"
    );
    let (status, _) = ada.call("DELETE", "/api/users/mia", Value::Null).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "already removed");
}

#[tokio::test]
async fn a_person_makes_lists_and_revokes_their_own_tokens() {
    let world = World::new();
    let mia = world.page(&world.member);
    let (status, listed) = mia.get("/api/tokens").await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["mcpUrl"], format!("{STUDIO}/mcp"));
    assert_eq!(
        listed["scopes"],
        json!(["apps:invoke", "apps:author"]),
        "what a member's role allows"
    );
    assert_eq!(listed["tokens"], json!([]));

    let (status, made) = mia
        .call(
            "POST",
            "/api/tokens",
            json!({"label": "Claude Desktop", "scopes": ["apps:invoke"], "expiresInDays": 7}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let secret = made["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("sasha_at_"));
    assert_eq!(made["token"]["label"], "Claude Desktop");
    assert!(made["token"]["lastUsedAt"].is_null());
    let id = made["token"]["id"].as_i64().unwrap();
    assert_eq!(audited(&world, people_action::TOKEN_CREATED), 1);

    let used = world.store().token(&secret).unwrap().unwrap();
    assert_eq!(used.user.username, "mia");
    assert_eq!(used.scopes, [Scope::AppsInvoke].into_iter().collect());
    let (_, listed) = mia.get("/api/tokens").await;
    assert_eq!(listed["tokens"].as_array().unwrap().len(), 1);
    assert!(
        listed["tokens"][0]["lastUsedAt"].is_i64(),
        "its use is recorded: {listed}"
    );
    assert!(
        listed["tokens"].to_string().find(&secret).is_none(),
        "never the secret again"
    );

    // Someone else's token number is the hidden 404, and stays working; so
    // is a number no token has and text that is no number, answered alike.
    let sam = world.page(&world.staff);
    let (status, hidden) = sam
        .call("DELETE", &format!("/api/tokens/{id}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(world.store().token(&secret).unwrap().is_some());
    for other in ["999999", "abc", "1e3", "-1"] {
        let (status, refused) = mia
            .call("DELETE", &format!("/api/tokens/{other}"), Value::Null)
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{other}");
        assert_eq!(refused["code"], hidden["code"], "{other}");
        assert_eq!(refused["message"], hidden["message"], "{other}");
    }
    assert!(world.store().token(&secret).unwrap().is_some());

    let (status, _) = mia
        .call("DELETE", &format!("/api/tokens/{id}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(
        world.store().token(&secret).unwrap().is_none(),
        "revoked at once"
    );
    let (_, listed) = mia.get("/api/tokens").await;
    assert_eq!(listed["tokens"], json!([]));
    let (status, _) = mia
        .call("DELETE", &format!("/api/tokens/{id}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "already revoked");
}

#[tokio::test]
async fn tokens_are_made_only_from_a_session_with_what_the_role_allows() {
    let world = World::new();
    let mia = world.page(&world.member);
    for (body, field) in [
        (json!({"label": "x", "scopes": ["apps:write"]}), "scopes"),
        (json!({"label": "x", "scopes": ["chat:use"]}), "scopes"),
        (json!({"label": "x", "scopes": ["everything"]}), "scopes"),
        (json!({"label": "x", "scopes": []}), "scopes"),
        (json!({"label": "  ", "scopes": ["apps:invoke"]}), "label"),
        (json!({"label": "a\nb", "scopes": ["apps:invoke"]}), "label"),
        (
            json!({"label": "x".repeat(81), "scopes": ["apps:invoke"]}),
            "label",
        ),
        (
            json!({"label": "x", "scopes": ["apps:invoke"], "expiresInDays": 0}),
            "expiresInDays",
        ),
        (
            json!({"label": "x", "scopes": ["apps:invoke"], "expiresInDays": 366}),
            "expiresInDays",
        ),
    ] {
        let (status, refused) = mia.call("POST", "/api/tokens", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {refused}");
        assert_eq!(refused["code"], "APP_INPUT_INVALID");
        assert_eq!(refused["details"]["field"], field, "{body}: {refused}");
    }
    // Staff may give a token apps:write.
    let sam = world.page(&world.staff);
    let (status, made) = sam
        .call(
            "POST",
            "/api/tokens",
            json!({"label": "CI", "scopes": ["apps:invoke", "apps:write"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");

    // A token cannot make or list tokens: a model may hold one.
    let bearer = world.bearer(&world.member, &[Scope::ChatUse, Scope::AppsInvoke]);
    let (status, _) = world
        .send("GET", "/api/tokens", &[("authorization", &bearer)], "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = world
        .send(
            "POST",
            "/api/tokens",
            &[
                ("authorization", &bearer),
                ("content-type", "application/json"),
            ],
            &json!({"label": "more", "scopes": ["apps:invoke"]}).to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = world
        .send(
            "POST",
            "/api/tokens",
            &[
                ("cookie", &mia.cookie),
                ("origin", "https://evil.example"),
                ("content-type", "application/json"),
            ],
            &json!({"label": "more", "scopes": ["apps:invoke"]}).to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let labels: Vec<Option<String>> = world
        .store()
        .personal_tokens(&world.member.id)
        .unwrap()
        .into_iter()
        .map(|token| token.label)
        .collect();
    assert_eq!(labels, [None], "only the operator's token in this test");
}

#[tokio::test]
async fn links_sessions_and_tokens_end_when_their_time_is_up() {
    use studio_store::{INVITATION_TTL_SECONDS, SESSION_TTL_SECONDS, TOKEN_USE_PRECISION_SECONDS};
    let world = World::new();
    let ada = world.page(&world.admin);
    let (_, invited) = ada
        .call(
            "POST",
            "/api/users",
            json!({"username": "nora", "role": "member"}),
        )
        .await;
    let secret = secret_of(&invited["invitation"]);
    let mia = world.page(&world.member);
    let (_, made) = mia
        .call(
            "POST",
            "/api/tokens",
            json!({"label": "laptop", "scopes": ["apps:invoke"], "expiresInDays": 8}),
        )
        .await;
    let token = made["secret"].as_str().unwrap().to_owned();
    let last_use =
        |world: &World| world.store().personal_tokens(&world.member.id).unwrap()[0].last_used_at;
    world.store().token(&token).unwrap().unwrap();
    let first_use = last_use(&world);
    assert!(first_use.is_some());

    // A moment before each end, everything still works.
    world.advance(TOKEN_USE_PRECISION_SECONDS - 1);
    world.store().token(&token).unwrap().unwrap();
    assert_eq!(
        last_use(&world),
        first_use,
        "uses within the minute write nothing"
    );
    world.advance(SESSION_TTL_SECONDS - TOKEN_USE_PRECISION_SECONDS);
    let (status, _) = mia.get("/api/me").await;
    assert_eq!(status, StatusCode::OK, "a session lasts its 12 hours");
    world.store().token(&token).unwrap().unwrap();
    assert!(last_use(&world) > first_use, "a later use is recorded");

    // The session ends after 12 hours; the link after 7 days; the token after 8.
    world.advance(1);
    let (status, _) = mia.get("/api/me").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the session has ended");
    world.advance(INVITATION_TTL_SECONDS - SESSION_TTL_SECONDS - 1);
    let (status, _, _) = anonymous(&world, "/api/invitation", json!({"token": secret})).await;
    assert_eq!(status, StatusCode::OK, "the link works to its last second");
    world.advance(1);
    for (uri, body) in [
        ("/api/invitation", json!({"token": secret})),
        (
            "/api/invitation/accept",
            json!({"token": secret, "password": STRONG}),
        ),
    ] {
        let (status, _, _) = anonymous(&world, uri, body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "an expired link: {uri}");
    }
    // ada's own session ended with the 12 hours too: she signs in again.
    let ada = world.page(&world.admin);
    let (_, listed) = ada.get("/api/users").await;
    let nora = listed["users"]
        .as_array()
        .unwrap()
        .iter()
        .find(|person| person["username"] == "nora")
        .unwrap()
        .clone();
    assert_eq!(
        nora["status"], "invited",
        "still invited: an admin can make a new link"
    );
    let (status, _) = ada
        .call("POST", "/api/users/nora/invitation", Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(world.store().token(&token).unwrap().is_some());
    world.advance(24 * 60 * 60);
    assert!(
        world.store().token(&token).unwrap().is_none(),
        "the token lasted its 8 days"
    );
}

on_both_databases! {
/// Many admins change each other at the same instant, each the next in a
/// ring: demoting, disabling or removing. Each change is authorised by its
/// request and decided again in its own transaction, so however they
/// interleave at least one admin who can sign in remains, and every refused
/// change is a refusal (403 no longer an admin, 409 the last admin, or the
/// hidden 404 of a session that a disabling or removal just ended), never a
/// fault. On each core database.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admins_changing_each_other_at_once_always_leave_an_admin(database) {
    const ADMINS: usize = 12;
    let changes: [(&str, Value); 3] = [
        ("PATCH", json!({"role": "member"})),
        ("PATCH", json!({"status": "disabled"})),
        ("DELETE", Value::Null),
    ];
    for (method, body) in changes {
        for round in 0..3 {
            let world = World::on(database);
            let mut admins = vec![world.admin.clone()];
            off_runtime(|| {
                for n in 1..ADMINS {
                    admins.push(
                        world
                            .store()
                            .create_user(
                                &format!("admin{n}"),
                                studio_store::UserRole::Admin,
                                PASSWORD,
                            )
                            .unwrap(),
                    );
                }
            });
            let pages: Vec<_> = admins.iter().map(|admin| world.page(admin)).collect();
            let requests = pages.iter().enumerate().map(|(n, page)| {
                let target = &admins[(n + 1) % ADMINS].username;
                let body = body.clone();
                async move {
                    page.call(method, &format!("/api/users/{target}"), body)
                        .await
                }
            });
            let answers = futures::future::join_all(requests).await;
            let what = format!("{method} {body} round {round}");
            for (status, answer) in &answers {
                assert!(
                    [
                        StatusCode::OK,
                        StatusCode::FORBIDDEN,
                        StatusCode::CONFLICT,
                        StatusCode::NOT_FOUND
                    ]
                    .contains(status),
                    "{what}: {status} {answer}"
                );
                if *status == StatusCode::NOT_FOUND {
                    assert_ne!(
                        body,
                        json!({"role": "member"}),
                        "{what}: a demotion ends no session"
                    );
                }
            }
            let left: Vec<String> = off_runtime(|| world.store().people().unwrap())
                .into_iter()
                .filter(|person| {
                    person.user.role == studio_store::UserRole::Admin
                        && !person.disabled
                        && !person.invited
                })
                .map(|person| person.user.username)
                .collect();
            assert!(!left.is_empty(), "{what}: no admin is left; {answers:?}");
            assert!(
                answers.iter().any(|(status, _)| *status == StatusCode::OK),
                "{what}: something was changed"
            );
        }
    }
}
}

/// The cookie a sign-in answer sets, as a `Cookie` header value.
fn cookie_of(headers: &http::HeaderMap) -> String {
    headers
        .get("set-cookie")
        .expect("a session cookie")
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

/// "ADA" signs in as ada; a name differing from a taken one only by case is
/// refused at its field; and a name in a path is the same person whatever
/// its case, so an admin's own account stays out of their reach.
#[tokio::test]
async fn user_names_are_the_same_whatever_their_case() {
    let world = World::new();
    for typed in ["Ada", "ADA"] {
        let (status, _, me) = anonymous(
            &world,
            "/api/auth/login",
            json!({"username": typed, "password": PASSWORD}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{typed}: {me}");
        assert_eq!(me["username"], "ada", "the name as it was made");
    }
    let ada = world.page(&world.admin);
    let (status, refused) = ada
        .call(
            "POST",
            "/api/users",
            json!({"username": "MIA", "role": "member"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["details"]["field"], "username");
    let (status, invited) = ada
        .call(
            "POST",
            "/api/users",
            json!({"username": "Nora", "role": "member"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{invited}");
    assert_eq!(invited["user"]["username"], "Nora", "stored as typed");
    for (method, uri, body) in [
        ("PATCH", "/api/users/ADA", json!({"role": "member"})),
        ("PATCH", "/api/users/Ada", json!({"status": "disabled"})),
        ("DELETE", "/api/users/aDa", Value::Null),
        ("POST", "/api/users/ADA/password-reset", Value::Null),
    ] {
        let (status, refused) = ada.call(method, uri, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {uri}: {refused}");
        assert!(refused["message"].as_str().unwrap().contains("your own"));
    }
    // Another person's name in another case is theirs.
    let (status, changed) = ada
        .call("PATCH", "/api/users/MIA", json!({"role": "staff"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["user"]["username"], "mia");
    assert_eq!(changed["user"]["role"], "staff");
}

/// An invitation can give apps: the invited person has them the moment they
/// accept, each grant audited as the inviting admin's. Only an admin
/// invites, and only with apps an admin can give; a refused invitation
/// makes nobody.
#[tokio::test]
async fn an_invitation_gives_apps_the_admin_can_give_once_accepted() {
    let world = World::new();
    world.install(&["hello", "expense-log"]).await;
    world
        .store()
        .withdraw_app("expense-log", &world.admin.id)
        .unwrap()
        .unwrap();
    let ada = world.page(&world.admin);
    for (apps, status, field) in [
        (
            json!([{"appId": "nope", "access": "use"}]),
            StatusCode::FORBIDDEN,
            "apps",
        ),
        (
            json!([{"appId": "expense-log", "access": "use"}]),
            StatusCode::FORBIDDEN,
            "apps",
        ),
        (
            json!([{"appId": "hello", "access": "own"}]),
            StatusCode::BAD_REQUEST,
            "apps",
        ),
        (
            json!([{"appId": "hello", "access": "use"}, {"appId": "hello", "access": "manage"}]),
            StatusCode::BAD_REQUEST,
            "apps",
        ),
    ] {
        let (answer, refused) = ada
            .call(
                "POST",
                "/api/users",
                json!({"username": "nora", "role": "member", "apps": apps}),
            )
            .await;
        assert_eq!(answer, status, "{apps}: {refused}");
        assert_eq!(refused["details"]["field"], field, "{refused}");
    }
    for user in [&world.staff, &world.member] {
        let (status, refused) = world
            .page(user)
            .call(
                "POST",
                "/api/users",
                json!({"username": "nora", "role": "member",
                       "apps": [{"appId": "hello", "access": "use"}]}),
            )
            .await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{}: {refused}",
            user.username
        );
    }
    assert!(world.store().user_by_name("nora").unwrap().is_none());

    let (status, invited) = ada
        .call(
            "POST",
            "/api/users",
            json!({"username": "nora", "role": "member",
                   "apps": [{"appId": "hello", "access": "use"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{invited}");
    let secret = secret_of(&invited["invitation"]);
    let (status, headers, _) = anonymous(
        &world,
        "/api/invitation/accept",
        json!({"token": secret, "password": STRONG}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let cookie = cookie_of(&headers);
    let (status, apps) = world
        .send("GET", "/api/apps", &[("cookie", &cookie)], "")
        .await;
    assert_eq!(status, StatusCode::OK, "{apps}");
    let ids: Vec<&str> = apps["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|app| app["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["hello"], "nora opens hello at once");
    let nora = world.store().user_by_name("nora").unwrap().unwrap();
    let grants: Vec<(String, Option<String>)> = world
        .store()
        .audit_entries(None)
        .unwrap()
        .into_iter()
        .filter(|entry| {
            entry.action == studio_store::action::GRANT_CHANGED
                && entry.subject.as_deref() == Some(nora.id.as_str())
        })
        .map(|entry| (entry.actor, entry.after))
        .collect();
    assert_eq!(grants, [(world.admin.id.clone(), Some("use".to_owned()))]);
}

/// An admin makes an active person a reset link: nothing changes until that
/// person uses it, once and within its day, and then every old session and
/// token of theirs has ended. Nobody else makes one, for themselves either,
/// and an invited person gets a new invitation instead.
#[tokio::test]
async fn an_admin_resets_a_password_with_a_link_only_its_person_uses() {
    use studio_store::RESET_TTL_SECONDS;
    let world = World::new();
    let uri = "/api/users/mia/password-reset";
    // Who may not: anonymous, members and staff, a token, another origin,
    // yourself, someone unknown.
    let (status, _) = world.send("POST", uri, &[("origin", STUDIO)], "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    for user in [&world.member, &world.staff] {
        let (status, refused) = world.page(user).call("POST", uri, Value::Null).await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{}: {refused}",
            user.username
        );
        assert_eq!(refused["code"], "APP_ACCESS_DENIED");
    }
    let bearer = world.bearer(&world.admin, &[Scope::ChatUse, Scope::AppsInvoke]);
    let (status, _) = world
        .send("POST", uri, &[("authorization", &bearer)], "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a token is not a session");
    let admin_cookie = world.session(&world.admin);
    let (status, _) = world
        .send(
            "POST",
            uri,
            &[
                ("cookie", &admin_cookie),
                ("origin", "https://evil.example"),
            ],
            "",
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "cross-origin");
    let ada = world.page(&world.admin);
    let (status, _) = ada
        .call("POST", "/api/users/nobody/password-reset", Value::Null)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    ada.call(
        "POST",
        "/api/users",
        json!({"username": "nora", "role": "member"}),
    )
    .await;
    let (status, refused) = ada
        .call("POST", "/api/users/nora/password-reset", Value::Null)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("invitation"));
    assert_eq!(audited(&world, people_action::PASSWORD_RESET_LINK), 0);

    // mia is signed in, with a token.
    let mia_cookie = world.session(&world.member);
    let mia_token = world.bearer(&world.member, &[Scope::AppsInvoke]);
    let sam_cookie = world.session(&world.staff);
    let (status, made) = ada.call("POST", uri, Value::Null).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let url = made["reset"]["url"].as_str().unwrap();
    let (origin, secret) = url.split_once("/#/reset/").expect("a reset link");
    assert_eq!(origin, STUDIO);
    assert!(!made.to_string().contains(PASSWORD));
    assert_eq!(audited(&world, people_action::PASSWORD_RESET_LINK), 1);
    let (status, _) = world
        .send("GET", "/api/me", &[("cookie", &mia_cookie)], "")
        .await;
    assert_eq!(status, StatusCode::OK, "nothing changes before it is used");
    let token_works = |world: &World| {
        let secret = mia_token.strip_prefix("Bearer ").unwrap();
        world.store().token(secret).unwrap().is_some()
    };
    assert!(token_works(&world), "the token works before");

    let (status, _, view) = anonymous(&world, "/api/invitation", json!({"token": secret})).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["username"], "mia");
    assert_eq!(view["purpose"], "reset");
    let (status, headers, me) = anonymous(
        &world,
        "/api/invitation/accept",
        json!({"token": secret, "password": STRONG}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["username"], "mia", "the link acts for its own person");
    let fresh = cookie_of(&headers);
    let (status, _) = world
        .send("GET", "/api/me", &[("cookie", &fresh)], "")
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = world
        .send("GET", "/api/me", &[("cookie", &mia_cookie)], "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the old session ended");
    assert!(!token_works(&world), "the old token ended");
    let (status, _) = world
        .send("GET", "/api/me", &[("cookie", &sam_cookie)], "")
        .await;
    assert_eq!(status, StatusCode::OK, "nobody else's session ends");
    assert_eq!(audited(&world, people_action::PASSWORD_RESET), 1);

    // Used once: looking it up or using it again is the hidden 404.
    for (uri, body) in [
        ("/api/invitation", json!({"token": secret})),
        (
            "/api/invitation/accept",
            json!({"token": secret, "password": "another long password"}),
        ),
    ] {
        let (status, _, _) = anonymous(&world, uri, body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "a used link: {uri}");
    }
    let (status, _, _) = anonymous(
        &world,
        "/api/auth/login",
        json!({"username": "mia", "password": STRONG}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "the new password signs in");

    // A link lasts a day.
    let ada = world.page(&world.admin);
    let (_, made) = ada.call("POST", uri, Value::Null).await;
    let url = made["reset"]["url"].as_str().unwrap().to_owned();
    let secret = url.split_once("/#/reset/").unwrap().1;
    world.advance(RESET_TTL_SECONDS);
    let (status, _, _) = anonymous(
        &world,
        "/api/invitation/accept",
        json!({"token": secret, "password": "a password too late to count"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "an expired link");
    let (status, _, _) = anonymous(
        &world,
        "/api/auth/login",
        json!({"username": "mia", "password": STRONG}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "the expired link changed nothing");
}

/// A one-time link is the power of the admin who made it and ends with it:
/// an admin who made a reset link for another person and an invitation for
/// a new admin, then lost their role, cannot use either later to take an
/// account or come back as an admin. Another admin's new link works.
#[tokio::test]
async fn a_link_dies_when_its_admin_is_no_longer_one() {
    let world = World::new();
    let bea = world
        .store()
        .create_user("bea", studio_store::UserRole::Admin, PASSWORD)
        .unwrap();
    let bea_page = world.page(&bea);
    let (status, reset) = bea_page
        .call("POST", "/api/users/mia/password-reset", Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{reset}");
    let reset = reset["reset"]["url"].as_str().unwrap();
    let reset = reset.split_once("/#/reset/").unwrap().1.to_owned();
    let (status, invited) = bea_page
        .call(
            "POST",
            "/api/users",
            json!({"username": "eve", "role": "admin"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{invited}");
    let invitation = secret_of(&invited["invitation"]);

    for (how, uri, body) in [
        ("demoted", "/api/users/bea", json!({"role": "member"})),
        ("disabled", "/api/users/bea", json!({"status": "disabled"})),
    ] {
        if how == "disabled" {
            // Back to admin first: only the loss of power under test counts.
            world
                .store()
                .set_role("bea", studio_store::UserRole::Admin, &world.admin.id)
                .unwrap();
        }
        let (status, changed) = world.page(&world.admin).call("PATCH", uri, body).await;
        assert_eq!(status, StatusCode::OK, "{how}: {changed}");
        for secret in [&reset, &invitation] {
            let (status, _, view) =
                anonymous(&world, "/api/invitation", json!({"token": secret})).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{how}: {view}");
            let (status, _, used) = anonymous(
                &world,
                "/api/invitation/accept",
                json!({"token": secret, "password": STRONG}),
            )
            .await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{how}: {used}");
        }
    }
    let (status, _, _) = anonymous(
        &world,
        "/api/auth/login",
        json!({"username": "mia", "password": PASSWORD}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "mia's password is unchanged");
    assert_eq!(audited(&world, people_action::PASSWORD_RESET), 0);
    // The Users page shows neither link as working any more.
    let (_, listed) = world.page(&world.admin).get("/api/users").await;
    for person in listed["users"].as_array().unwrap() {
        assert!(person["resetExpiresAt"].is_null(), "{person}");
        assert!(person["invitationExpiresAt"].is_null(), "{person}");
    }

    let (status, renewed) = world
        .page(&world.admin)
        .call("POST", "/api/users/eve/invitation", Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    let (status, _, _) = anonymous(
        &world,
        "/api/invitation/accept",
        json!({"token": secret_of(&renewed["invitation"]), "password": STRONG}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "a live admin's new link works");
}

/// What an invitation gives is on the Users list for every admin, and
/// disabling the invited person withdraws it with the invitation: enabled
/// again and sent a new link, they get no app the withdrawn one chose.
#[tokio::test]
async fn a_withdrawn_invitation_gives_no_apps_after_a_new_link() {
    let world = World::new();
    world.install(&["hello"]).await;
    let ada = world.page(&world.admin);
    let (status, invited) = ada
        .call(
            "POST",
            "/api/users",
            json!({"username": "nora", "role": "member",
                   "apps": [{"appId": "hello", "access": "manage"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{invited}");
    // Every admin sees what the invitation gives.
    let gives = |listed: &Value| {
        listed["users"]
            .as_array()
            .unwrap()
            .iter()
            .find(|person| person["username"] == "nora")
            .unwrap()["invitationApps"]
            .clone()
    };
    let bea = world
        .store()
        .create_user("bea", studio_store::UserRole::Admin, PASSWORD)
        .unwrap();
    let (_, listed) = world.page(&bea).get("/api/users").await;
    assert_eq!(
        gives(&listed),
        json!([{"appId": "hello", "access": "manage"}])
    );
    for status in ["disabled", "active"] {
        let (answer, changed) = ada
            .call("PATCH", "/api/users/nora", json!({"status": status}))
            .await;
        assert_eq!(answer, StatusCode::OK, "{status}: {changed}");
    }
    let (status, renewed) = ada
        .call("POST", "/api/users/nora/invitation", Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{renewed}");
    let (_, listed) = ada.get("/api/users").await;
    assert_eq!(gives(&listed), json!([]), "the new link gives nothing");
    let (status, _, _) = anonymous(
        &world,
        "/api/invitation/accept",
        json!({"token": secret_of(&renewed["invitation"]), "password": STRONG}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let nora = world.store().user_by_name("nora").unwrap().unwrap();
    assert_eq!(world.store().access("hello", &nora.id).unwrap(), None);
}
