//! What a caller may not reach is answered as if it did not exist: an app's
//! tools and resources without a grant answer exactly like an app that is
//! not there, another user's legacy session like an unknown one, an
//! unknown path like any other, and an app-shaped action name the caller
//! cannot run is `APP_ACTION_UNAVAILABLE` whose message names nothing.

use serde_json::{Value, json};
use studio_store::Scope;

use crate::mcp::{LEGACY, Mcp, tool_error};
use crate::world::World;

/// A JSON-RPC error without what differs per answer (its diagnostic id).
fn stripped(mut error: Value) -> Value {
    if let Some(envelope) = error["data"]["error"].as_object_mut() {
        envelope.remove("diagnosticId");
    }
    error
}

#[tokio::test]
async fn what_a_caller_may_not_reach_is_answered_as_absent() {
    let world = World::start().await;
    // The member holds no grant: expense-log exists for others only.
    let member = world.token(&world.member, &[Scope::ChatUse, Scope::AppsInvoke]);
    let mut client = world.client(&member);

    // Tools: an app without a grant, and one that does not exist.
    for (theirs, nobodys) in [
        ("open_app__expense_log", "open_app__no_such_app"),
        (
            "app__expense_log__expenses__list",
            "app__no_such_app__expenses__list",
        ),
        (
            "app__expense_log__expenses__create",
            "app__no_such_app__expenses__create",
        ),
    ] {
        let theirs = client.call(theirs, json!({})).await;
        let nobodys = client.call(nobodys, json!({})).await;
        assert_eq!(theirs.error()["code"], -32602);
        assert_eq!(
            theirs.error()["message"]
                .as_str()
                .unwrap()
                .replace("expense_log", "X"),
            nobodys.error()["message"]
                .as_str()
                .unwrap()
                .replace("no_such_app", "X")
        );
    }
    // An action-shaped name: the same unavailability for an app without a
    // grant, a missing action and a missing app; the person reads no tool
    // name, the client finds it in the details.
    let mut refusals = Vec::new();
    for name in [
        "app__expense_log__week_totals",
        "app__expense_log__no_such_action",
        "app__no_such_app__week_totals",
    ] {
        let refused = client.call(name, json!({"weekStart": "2026-09-07"})).await;
        let envelope = tool_error(&refused).clone();
        assert_eq!(envelope["code"], "APP_ACTION_UNAVAILABLE");
        assert_eq!(envelope["details"]["tool"], name);
        assert!(!envelope["message"].as_str().unwrap().contains("app__"));
        refusals.push(envelope["message"].clone());
    }
    assert!(refusals.windows(2).all(|pair| pair[0] == pair[1]));

    // Resources: the UI of an app without a grant and of no app, and every
    // data resource of them, are the same not found.
    let staff = world
        .client(&world.staff_token)
        .request("resources/list", json!({}))
        .await;
    let uri = staff.result()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|resource| resource["name"] == "expense-log")
        .unwrap()["uri"]
        .as_str()
        .unwrap()
        .to_owned();
    let revision = uri.rsplit('/').next().unwrap().to_owned();
    let pairs = [
        (
            uri.clone(),
            format!("ui://sasha/apps/no-such-app/revisions/{revision}"),
        ),
        (
            "sasha://apps/expense-log/tables".to_owned(),
            "sasha://apps/no-such-app/tables".to_owned(),
        ),
        (
            "sasha://apps/expense-log/tables/categories/rows".to_owned(),
            "sasha://apps/no-such-app/tables/categories/rows".to_owned(),
        ),
        (
            "sasha://apps/expense-log/actions".to_owned(),
            "sasha://apps/no-such-app/actions".to_owned(),
        ),
    ];
    for (theirs, nobodys) in pairs {
        let theirs = client
            .request("resources/read", json!({"uri": theirs}))
            .await;
        let nobodys = client
            .request("resources/read", json!({"uri": nobodys}))
            .await;
        assert_eq!(theirs.error()["data"]["error"]["code"], "APP_NOT_FOUND");
        assert_eq!(
            stripped(theirs.error().clone()),
            stripped(nobodys.error().clone())
        );
    }
    // A table the app does not declare, for a caller who may read the app.
    let mut staff = world.client(&world.staff_token);
    let undeclared = staff
        .request(
            "resources/read",
            json!({"uri": "sasha://apps/expense-log/tables/secrets/rows"}),
        )
        .await;
    assert_eq!(undeclared.error()["data"]["error"]["code"], "APP_NOT_FOUND");

    // A legacy session belongs to the user who opened it: another user's
    // session id is answered like one that never existed.
    let mut owner = Mcp::new(
        world.router(),
        vec![(
            "authorization".to_owned(),
            format!("Bearer {}", world.staff_token),
        )],
        LEGACY,
    );
    owner.initialize().await;
    let mut intruder = Mcp::new(
        world.router(),
        vec![("authorization".to_owned(), format!("Bearer {member}"))],
        LEGACY,
    );
    intruder.session = owner.session.clone();
    let hijacked = intruder.request("tools/list", json!({})).await;
    intruder.session = Some("no-such-session".to_owned());
    let unknown = intruder.request("tools/list", json!({})).await;
    assert_eq!(hijacked.status, 404);
    assert_eq!(hijacked.body, unknown.body);
    assert_eq!(hijacked.status, unknown.status);
    // The owner's session goes on.
    assert_eq!(owner.request("tools/list", json!({})).await.status, 200);

    // Any other path is the envelope's not found.
    let (status, body) = world.get("/no-such-path").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("APP_NOT_FOUND"))
    );
}

/// A Studio page shows a draft's preview only with the app it belongs to,
/// named by 32 hex digits; a preview that is not the caller's shows nothing.
#[tokio::test]
async fn a_preview_is_named_with_its_app_and_shows_only_its_owners_draft() {
    let world = World::start().await;
    let session = world.session(&world.staff);
    let preview = "0a".repeat(16);
    for (headers, why) in [
        (
            vec![("sasha-preview", preview.clone())],
            "without Sasha-App",
        ),
        (
            vec![
                ("sasha-app", "expense-log".to_owned()),
                ("sasha-preview", "../../etc".to_owned()),
            ],
            "not hex",
        ),
    ] {
        let mut page = Mcp::new(world.router(), Vec::new(), crate::mcp::SESSIONLESS)
            .with_header("cookie", &format!("sasha_session={session}"))
            .with_header("origin", crate::mcp::STUDIO_ORIGIN);
        for (name, value) in &headers {
            page = page.with_header(name, value);
        }
        let refused = page.request("tools/list", json!({})).await;
        assert_eq!(refused.status, 400, "{why}");
        assert_eq!(refused.body["code"], "APP_INPUT_INVALID", "{why}");
    }
    // A well-formed preview id of no draft of this user: the app as its
    // draft does not exist, so neither do its tools.
    let mut page = world
        .studio_page(&session, "expense-log")
        .with_header("sasha-preview", &preview);
    let listed = crate::mcp::tool_names(&page.request("tools/list", json!({})).await);
    assert!(
        !listed.iter().any(|name| name.contains("expense_log")),
        "{listed:?}"
    );
    let called = page
        .call("app__expense_log__categories__list", json!({}))
        .await;
    assert_eq!(called.error()["code"], -32602);
}
