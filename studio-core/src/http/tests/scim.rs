//! SCIM provisioning through Studio's router, in process: the refusal matrix
//! (no, wrong or revoked token; malformed, unknown or oversized bodies; bad
//! filters; taken names; unknown ids), each a SCIM error in
//! `application/scim+json` with a diagnostic id; roles following group
//! membership; deactivation ending the person's session at once; the last
//! admin kept; and the Users page's answer saying where each person comes
//! from and refusing a role change the directory owns.

use http::StatusCode;
use serde_json::{Value, json};

use crate::test_world::{Database, GROUP_MEMBERS, STUDIO, World, off_runtime, on_both_databases};
use studio_store::{ACTOR_OPERATOR, UserRole};

const USER: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
const GROUP: &str = "urn:ietf:params:scim:schemas:core:2.0:Group";
const PATCH: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
const ERROR: &str = "urn:ietf:params:scim:api:messages:2.0:Error";

/// A world with a live SCIM token; the token.
fn world_with_token() -> (World, String) {
    world_on_with_token(Database::Sqlite)
}

/// [`world_with_token`] on `database`.
fn world_on_with_token(database: Database) -> (World, String) {
    let world = World::on(database);
    let (secret, _) = off_runtime(|| {
        world
            .store()
            .mint_scim_token("Entra ID", ACTOR_OPERATOR)
            .unwrap()
    });
    (world, secret)
}

/// One SCIM request with `token` (if any): status, headers, JSON body.
async fn scim(
    world: &World,
    token: Option<&str>,
    method: &str,
    uri: &str,
    body: &str,
) -> (StatusCode, http::HeaderMap, Value) {
    let bearer = token.map(|token| format!("Bearer {token}"));
    let mut headers = vec![("content-type", "application/scim+json")];
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer));
    }
    let reply = world.raw(method, uri, &headers, body).await;
    (reply.status, reply.headers.clone(), reply.json())
}

/// Asserts a SCIM error of `status` (and `scim_type`, when given).
fn assert_scim_error(
    outcome: &(StatusCode, http::HeaderMap, Value),
    status: StatusCode,
    scim_type: Option<&str>,
) {
    let (got, headers, body) = outcome;
    assert_eq!(*got, status, "{body}");
    assert_eq!(headers["content-type"], "application/scim+json", "{body}");
    assert_eq!(body["schemas"], json!([ERROR]), "{body}");
    assert_eq!(body["status"], status.as_u16().to_string(), "{body}");
    assert_eq!(body["scimType"].as_str(), scim_type, "{body}");
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
    assert!(
        body["diagnosticId"].as_str().is_some_and(|d| d.len() == 36),
        "{body}"
    );
}

fn new_user(name: &str) -> String {
    json!({
        "schemas": [USER],
        "userName": name,
        "externalId": format!("ext-{name}"),
        "name": {"givenName": "Ada", "familyName": "Lovelace"},
        "emails": [{"value": name, "type": "work", "primary": true}],
        "active": true,
    })
    .to_string()
}

async fn create_user(world: &World, token: &str, name: &str) -> String {
    let (status, _, body) = scim(
        world,
        Some(token),
        "POST",
        "/scim/v2/Users",
        &new_user(name),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

async fn create_group(world: &World, token: &str, name: &str, members: &[&str]) -> String {
    let members: Vec<Value> = members.iter().map(|id| json!({"value": id})).collect();
    let body = json!({"schemas": [GROUP], "displayName": name, "members": members}).to_string();
    let (status, _, answer) = scim(world, Some(token), "POST", "/scim/v2/Groups", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    answer["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_missing_wrong_or_revoked_token_is_refused_everywhere() {
    let (world, token) = world_with_token();
    let session = world.session(&world.admin);
    let paths = [
        ("GET", "/scim/v2/Users"),
        ("POST", "/scim/v2/Users"),
        ("GET", "/scim/v2/Users/x"),
        ("PATCH", "/scim/v2/Users/x"),
        ("DELETE", "/scim/v2/Users/x"),
        ("GET", "/scim/v2/Groups"),
        ("PUT", "/scim/v2/Groups/x"),
        ("GET", "/scim/v2/ServiceProviderConfig"),
        ("GET", "/scim/v2/Schemas"),
        ("GET", "/scim/v2/ResourceTypes"),
        ("GET", "/scim/v2/Elsewhere"),
    ];
    for (method, path) in paths {
        let missing = scim(&world, None, method, path, "{}").await;
        assert_scim_error(&missing, StatusCode::UNAUTHORIZED, None);
        assert!(
            missing.1.contains_key("www-authenticate"),
            "{method} {path}"
        );
        let wrong = scim(&world, Some("sasha_scim_not-a-token"), method, path, "{}").await;
        assert_scim_error(&wrong, StatusCode::UNAUTHORIZED, None);
        // A Studio session is not a SCIM credential.
        let reply = world
            .raw(
                method,
                path,
                &[("cookie", &session), ("origin", STUDIO)],
                "{}",
            )
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{method} {path}");
    }
    let (status, _, _) = scim(&world, Some(&token), "GET", "/scim/v2/Users", "").await;
    assert_eq!(status, StatusCode::OK);
    off_runtime(|| {
        let id = world.store().scim_tokens().unwrap()[0].id;
        assert!(world.store().revoke_scim_token(id, ACTOR_OPERATOR).unwrap());
    });
    let revoked = scim(&world, Some(&token), "GET", "/scim/v2/Users", "").await;
    assert_scim_error(&revoked, StatusCode::UNAUTHORIZED, None);
    // Nor is a SCIM token a Studio credential.
    let (status, _) = world
        .send(
            "GET",
            "/api/users",
            &[("authorization", &format!("Bearer {token}"))],
            "",
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn bad_bodies_filters_and_ids_get_scim_errors() {
    let (world, token) = world_with_token();
    let id = create_user(&world, &token, "ada.l@example.org").await;
    let again = new_user("ada.l@example.org");
    let cases: Vec<(&str, String, &str, StatusCode, Option<&str>)> = vec![
        (
            "POST",
            "/scim/v2/Users".into(),
            "{not json",
            StatusCode::BAD_REQUEST,
            Some("invalidSyntax"),
        ),
        (
            "POST",
            "/scim/v2/Users".into(),
            "[]",
            StatusCode::BAD_REQUEST,
            Some("invalidSyntax"),
        ),
        (
            "POST",
            "/scim/v2/Users".into(),
            r#"{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"bob@example.org","title":"CEO"}"#,
            StatusCode::BAD_REQUEST,
            Some("invalidSyntax"),
        ),
        (
            "POST",
            "/scim/v2/Users".into(),
            r#"{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"1-not-a-name"}"#,
            StatusCode::BAD_REQUEST,
            Some("invalidValue"),
        ),
        (
            "POST",
            "/scim/v2/Users".into(),
            r#"{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"bob@example.org","active":"maybe"}"#,
            StatusCode::BAD_REQUEST,
            Some("invalidSyntax"),
        ),
        (
            "GET",
            "/scim/v2/Users?filter=userName%20eq".into(),
            "",
            StatusCode::BAD_REQUEST,
            Some("invalidFilter"),
        ),
        (
            "GET",
            "/scim/v2/Users?filter=title%20eq%20%22x%22".into(),
            "",
            StatusCode::BAD_REQUEST,
            Some("invalidFilter"),
        ),
        (
            "GET",
            "/scim/v2/Groups?filter=displayName%20co%20%22x%22".into(),
            "",
            StatusCode::BAD_REQUEST,
            Some("invalidFilter"),
        ),
        (
            "GET",
            "/scim/v2/Users?count=many".into(),
            "",
            StatusCode::BAD_REQUEST,
            Some("invalidValue"),
        ),
        (
            "POST",
            "/scim/v2/Users".into(),
            &again,
            StatusCode::CONFLICT,
            Some("uniqueness"),
        ),
        (
            "GET",
            "/scim/v2/Users/no-such-id".into(),
            "",
            StatusCode::NOT_FOUND,
            None,
        ),
        (
            "DELETE",
            "/scim/v2/Groups/no-such-id".into(),
            "",
            StatusCode::NOT_FOUND,
            None,
        ),
        (
            "PATCH",
            format!("/scim/v2/Users/{id}"),
            r#"{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[{"op":"replace","path":"nickName","value":"x"}]}"#,
            StatusCode::BAD_REQUEST,
            Some("invalidSyntax"),
        ),
        (
            "PATCH",
            format!("/scim/v2/Users/{id}"),
            r#"{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[{"op":"jump","path":"active"}]}"#,
            StatusCode::BAD_REQUEST,
            Some("invalidSyntax"),
        ),
        (
            "PATCH",
            format!("/scim/v2/Users/{id}"),
            r#"{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[{"op":"replace","path":"id","value":"mine"}]}"#,
            StatusCode::BAD_REQUEST,
            Some("mutability"),
        ),
        (
            "POST",
            "/scim/v2/Groups".into(),
            r#"{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group"],"displayName":"g","members":[{"value":"not-provisioned"}]}"#,
            StatusCode::BAD_REQUEST,
            Some("invalidValue"),
        ),
        (
            "PUT",
            "/scim/v2/Users".into(),
            "{}",
            StatusCode::METHOD_NOT_ALLOWED,
            None,
        ),
    ];
    for (method, uri, body, status, scim_type) in cases {
        let outcome = scim(&world, Some(&token), method, &uri, body).await;
        assert_scim_error(&outcome, status, scim_type);
    }
    // A person who signs in with a password here is not the directory's: the
    // name is taken, and SCIM neither lists nor changes them.
    let taken = scim(
        &world,
        Some(&token),
        "POST",
        "/scim/v2/Users",
        &new_user("mia"),
    )
    .await;
    assert_scim_error(&taken, StatusCode::CONFLICT, Some("uniqueness"));
    let (_, _, listed) = scim(
        &world,
        Some(&token),
        "GET",
        "/scim/v2/Users?filter=userName%20eq%20%22mia%22",
        "",
    )
    .await;
    assert_eq!(listed["totalResults"], 0, "{listed}");
    let mia = scim(
        &world,
        Some(&token),
        "DELETE",
        &format!("/scim/v2/Users/{}", world.member.id),
        "",
    )
    .await;
    assert_scim_error(&mia, StatusCode::NOT_FOUND, None);
}

#[tokio::test]
async fn an_oversized_body_is_refused_before_it_is_parsed() {
    let (world, token) = world_with_token();
    let long = "x".repeat(sasha_proto::json_limits::SCIM_REQUEST.max_bytes);
    let body = format!(r#"{{"schemas":["{USER}"],"userName":"ada","displayName":"{long}"}}"#);
    let outcome = scim(&world, Some(&token), "POST", "/scim/v2/Users", &body).await;
    assert_scim_error(&outcome, StatusCode::PAYLOAD_TOO_LARGE, None);
    let many: Vec<Value> = (0..sasha_proto::json_limits::SCIM_REQUEST.max_values)
        .map(|_| json!({}))
        .collect();
    let body = json!({"schemas": [GROUP], "displayName": "g", "members": many}).to_string();
    let outcome = scim(&world, Some(&token), "POST", "/scim/v2/Groups", &body).await;
    assert_scim_error(&outcome, StatusCode::PAYLOAD_TOO_LARGE, None);
}

on_both_databases! {
/// On each core database.
#[tokio::test]
async fn a_person_is_provisioned_found_and_their_role_follows_their_groups(database) {
    let (world, token) = world_on_with_token(database);
    let id = create_user(&world, &token, "Grace@example.org").await;
    let person = off_runtime(|| world.store().user(&id).unwrap().unwrap());
    assert_eq!(person.source, studio_store::UserSource::Scim);
    // No mapped group yet: no access.
    let disabled = |world: &World| {
        off_runtime(|| {
            world
                .store()
                .people()
                .unwrap()
                .into_iter()
                .find(|p| p.user.id == id)
                .unwrap()
        })
    };
    assert!(disabled(&world).disabled, "no mapped group, no access");
    let (status, _, found) = scim(
        &world,
        Some(&token),
        "GET",
        "/scim/v2/Users?filter=userName%20eq%20%22grace%40example.org%22",
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(found["totalResults"], 1, "{found}");
    assert_eq!(found["Resources"][0]["id"], id.as_str());
    assert_eq!(found["Resources"][0]["active"], true);
    let (_, _, by_external) = scim(
        &world,
        Some(&token),
        "GET",
        "/scim/v2/Users?filter=externalId%20eq%20%22ext-Grace%40example.org%22",
        "",
    )
    .await;
    assert_eq!(by_external["totalResults"], 1, "{by_external}");

    let users = create_group(&world, &token, "Sasha Users", &[&id]).await;
    let person = disabled(&world);
    assert!(!person.disabled);
    assert_eq!(person.user.role, UserRole::Member);
    let admins = create_group(&world, &token, "Sasha Admins", &[]).await;
    let add = json!({"schemas": [PATCH], "Operations": [
        {"op": "Add", "path": "members", "value": [{"value": id}]}
    ]})
    .to_string();
    let (status, _, _) = scim(
        &world,
        Some(&token),
        "PATCH",
        &format!("/scim/v2/Groups/{admins}"),
        &add,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(disabled(&world).user.role, UserRole::Admin);
    let remove = json!({"schemas": [PATCH], "Operations": [
        {"op": "remove", "path": format!("members[value eq \"{id}\"]")}
    ]})
    .to_string();
    let (status, _, _) = scim(
        &world,
        Some(&token),
        "PATCH",
        &format!("/scim/v2/Groups/{admins}"),
        &remove,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(disabled(&world).user.role, UserRole::Member);
    let (status, _, _) = scim(
        &world,
        Some(&token),
        "DELETE",
        &format!("/scim/v2/Groups/{users}"),
        "",
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(disabled(&world).disabled, "out of every mapped group");
    let token_id = off_runtime(|| world.store().scim_tokens().unwrap()[0].id);
    let audit = off_runtime(|| world.store().audit_entries(None).unwrap());
    let actor = format!("scim-token:{token_id}");
    for action in [
        "user.provisioned",
        "user.role-changed",
        "user.status-changed",
        "scim.member-added",
        "scim.group-removed",
    ] {
        assert!(
            audit
                .iter()
                .any(|entry| entry.action == action && entry.actor == actor),
            "{action} audited as the token"
        );
    }
}
}

on_both_databases! {
/// On each core database.
#[tokio::test]
async fn deactivation_ends_the_session_at_once_and_delete_removes(database) {
    let (world, token) = world_on_with_token(database);
    let id = create_user(&world, &token, "lin@example.org").await;
    create_group(&world, &token, "Sasha Staff", &[&id]).await;
    let lin = off_runtime(|| world.store().user(&id).unwrap().unwrap());
    assert_eq!(lin.role, UserRole::Staff);
    let cookie = world.session(&lin);
    let bearer = world.bearer(&lin, &[studio_store::Scope::ChatUse]);
    let (status, _) = world
        .send("GET", "/api/me", &[("cookie", &cookie)], "")
        .await;
    assert_eq!(status, StatusCode::OK);
    // Entra's deactivation: the string "False".
    let deactivate = json!({"schemas": [PATCH], "Operations": [
        {"op": "Replace", "path": "active", "value": "False"}
    ]})
    .to_string();
    let (status, _, body) = scim(
        &world,
        Some(&token),
        "PATCH",
        &format!("/scim/v2/Users/{id}"),
        &deactivate,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["active"], false);
    let (status, _) = world
        .send("GET", "/api/me", &[("cookie", &cookie)], "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the session ended");
    let (status, _) = world
        .send("GET", "/api/me", &[("authorization", &bearer)], "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the token was revoked");
    // Okta's reactivation comes back, but a new session is needed.
    let activate = json!({"schemas": [PATCH], "Operations": [
        {"op": "replace", "value": {"active": true}}
    ]})
    .to_string();
    let (status, _, body) = scim(
        &world,
        Some(&token),
        "PATCH",
        &format!("/scim/v2/Users/{id}"),
        &activate,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = world
        .send("GET", "/api/me", &[("cookie", &cookie)], "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = scim(
        &world,
        Some(&token),
        "DELETE",
        &format!("/scim/v2/Users/{id}"),
        "",
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(off_runtime(|| world.store().user(&id).unwrap()).is_none());
    let gone = scim(
        &world,
        Some(&token),
        "GET",
        &format!("/scim/v2/Users/{id}"),
        "",
    )
    .await;
    assert_scim_error(&gone, StatusCode::NOT_FOUND, None);
}
}

#[tokio::test]
async fn the_directory_cannot_take_away_the_last_admin() {
    let (world, token) = world_with_token();
    let id = create_user(&world, &token, "root@example.org").await;
    create_group(&world, &token, "Sasha Admins", &[&id]).await;
    // The only other admin goes: the directory's admin is the last one.
    off_runtime(|| {
        world
            .store()
            .set_disabled("ada", true, ACTOR_OPERATOR)
            .unwrap()
    });
    let deactivate = json!({"schemas": [PATCH], "Operations": [
        {"op": "replace", "path": "active", "value": false}
    ]})
    .to_string();
    let refused = scim(
        &world,
        Some(&token),
        "PATCH",
        &format!("/scim/v2/Users/{id}"),
        &deactivate,
    )
    .await;
    assert_scim_error(&refused, StatusCode::BAD_REQUEST, Some("mutability"));
    let deleted = scim(
        &world,
        Some(&token),
        "DELETE",
        &format!("/scim/v2/Users/{id}"),
        "",
    )
    .await;
    assert_scim_error(&deleted, StatusCode::BAD_REQUEST, Some("mutability"));
    let user = off_runtime(|| world.store().user(&id).unwrap().unwrap());
    assert_eq!(user.role, UserRole::Admin, "nothing changed");
}

#[tokio::test]
async fn the_users_page_shows_the_source_and_the_directory_owns_the_role() {
    let (world, token) = world_with_token();
    let id = create_user(&world, &token, "kim@example.org").await;
    create_group(&world, &token, "Sasha Users", &[&id]).await;
    let ada = world.session(&world.admin);
    let (status, listed) = world
        .send("GET", "/api/users", &[("cookie", &ada)], "")
        .await;
    assert_eq!(status, StatusCode::OK);
    let source = |name: &str| {
        listed["users"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["username"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(source("mia")["source"], "password");
    let kim = source("kim@example.org");
    assert_eq!(kim["source"], "scim", "{kim}");
    assert_eq!(kim["directory"]["groups"], json!(["Sasha Users"]), "{kim}");
    let page = world.page(&world.admin);
    let (status, refused) = page
        .call(
            "PATCH",
            "/api/users/kim@example.org",
            json!({"role": "admin"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("directory"),
        "{refused}"
    );
    // An admin may still hold them disabled; the directory does not undo it.
    let (status, held) = page
        .call(
            "PATCH",
            "/api/users/kim@example.org",
            json!({"status": "disabled"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{held}");
    assert_eq!(held["user"]["status"], "disabled");
    let activate = json!({"schemas": [PATCH], "Operations": [
        {"op": "replace", "path": "active", "value": true}
    ]})
    .to_string();
    scim(
        &world,
        Some(&token),
        "PATCH",
        &format!("/scim/v2/Users/{id}"),
        &activate,
    )
    .await;
    let (_, listed) = world
        .send("GET", "/api/users", &[("cookie", &ada)], "")
        .await;
    let kim = listed["users"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["username"] == "kim@example.org")
        .unwrap()
        .clone();
    assert_eq!(kim["status"], "disabled", "{kim}");
    let (status, _) = page
        .call(
            "PATCH",
            "/api/users/kim@example.org",
            json!({"status": "active"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let user = off_runtime(|| world.store().people().unwrap());
    assert!(!user.iter().find(|p| p.user.id == id).unwrap().disabled);
}

#[tokio::test]
async fn an_admin_mints_lists_and_revokes_scim_tokens_shown_once() {
    let world = World::new();
    let page = world.page(&world.admin);
    let (status, minted) = page
        .call("POST", "/api/scim/tokens", json!({"label": "Okta"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{minted}");
    let secret = minted["secret"].as_str().unwrap().to_owned();
    assert_eq!(minted["base"], format!("{STUDIO}/scim/v2"));
    let (status, _, _) = scim(&world, Some(&secret), "GET", "/scim/v2/Users", "").await;
    assert_eq!(status, StatusCode::OK);
    let ada = world.session(&world.admin);
    let (_, listed) = world
        .send("GET", "/api/scim/tokens", &[("cookie", &ada)], "")
        .await;
    assert_eq!(listed["tokens"][0]["label"], "Okta");
    assert!(!listed.to_string().contains(&secret), "never shown again");
    let id = listed["tokens"][0]["id"].as_i64().unwrap();
    let staff = world.page(&world.staff);
    let (status, _) = staff
        .call("POST", "/api/scim/tokens", json!({"label": "x"}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "only an admin mints one");
    let (status, _) = page
        .call("DELETE", &format!("/api/scim/tokens/{id}"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK);
    let revoked = scim(&world, Some(&secret), "GET", "/scim/v2/Users", "").await;
    assert_scim_error(&revoked, StatusCode::UNAUTHORIZED, None);
    let audit = off_runtime(|| world.store().audit_entries(None).unwrap());
    assert!(
        audit
            .iter()
            .any(|e| e.action == "scim.token-minted" && e.actor == world.admin.id)
    );
    assert!(audit.iter().any(|e| e.action == "scim.token-revoked"));
}

on_both_databases! {
/// Okta pushes group memberships in parallel: member PATCHes to one group at
/// the same instant each apply to the members the group has when their
/// transaction runs, so none is lost. On each core database.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn member_patches_at_once_all_land(database) {
    const PEOPLE: usize = 8;
    let (world, token) = world_on_with_token(database);
    let mut ids = Vec::new();
    for n in 0..PEOPLE {
        ids.push(create_user(&world, &token, &format!("p{n}@example.org")).await);
    }
    let group = create_group(&world, &token, GROUP_MEMBERS, &[]).await;
    let patches = ids.iter().map(|id| {
        let body = json!({"schemas": [PATCH], "Operations": [
            {"op": "add", "path": "members", "value": [{"value": id}]}
        ]})
        .to_string();
        let (world, token, group) = (&world, &token, &group);
        async move {
            scim(world, Some(token), "PATCH", &format!("/scim/v2/Groups/{group}"), &body).await
        }
    });
    for (status, _, body) in futures::future::join_all(patches).await {
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    }
    let (_, _, listed) = scim(&world, Some(&token), "GET", &format!("/scim/v2/Groups/{group}"), "").await;
    assert_eq!(listed["members"].as_array().unwrap().len(), PEOPLE, "{listed}");
    let people = off_runtime(|| world.store().people().unwrap());
    for id in &ids {
        let person = people.iter().find(|p| &p.user.id == id).unwrap();
        assert!(!person.disabled, "every member may sign in");
    }
}
}
