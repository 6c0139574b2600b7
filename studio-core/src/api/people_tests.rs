//! `GET /api/users` through Studio's router: who may list people, what a
//! listing says, and that a disabled person cannot sign in or use a session.

use http::StatusCode;
use serde_json::json;

use crate::test_world::{PASSWORD, STUDIO, World};

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
        assert_eq!(mia["disabled"], false);
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
