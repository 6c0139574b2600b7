//! The Studio page's session (its own UI, app-only tools, the cookie only
//! from the Studio origin), chat-session tokens (never handed a way to
//! confirm), and legacy session clients asked by `elicitation/create`.

use std::collections::BTreeSet;

use serde_json::json;
use studio_store::{Scope, TokenKind};

use crate::mcp::{LEGACY, Mcp, SESSIONLESS, structured, tool_error, tool_names};
use crate::world::{World, token};

#[tokio::test]
async fn studio_session_and_chat_session_paths() {
    let world = World::start().await;
    let session = world.store.create_session(&world.staff.id).unwrap();
    let studio = "http://localhost:3007";
    let browser = |app: Option<&str>, origin: &str| {
        let mut headers = vec![
            ("cookie".to_owned(), format!("sasha_session={session}")),
            ("origin".to_owned(), origin.to_owned()),
        ];
        if let Some(app) = app {
            headers.push(("sasha-app".to_owned(), app.to_owned()));
        }
        Mcp::new(world.router(), headers, SESSIONLESS)
    };
    // The Studio page with expense-log open is the app's own UI: app-only
    // tools exist, and writes need no confirmation (source ui).
    let mut ui = browser(Some("expense-log"), studio);
    let names = tool_names(&ui.request("tools/list", json!({})).await);
    assert!(names.contains(&"app__expense_log__add_expense".to_owned()));
    let category = ui
        .call(
            "app__expense_log__categories__create",
            json!({"values": {"name": "Travel"}}),
        )
        .await;
    let category = structured(&category)["id"].as_i64().unwrap();
    let added = ui
        .call(
            "app__expense_log__add_expense",
            json!({"spent_on": "2026-09-08", "amount": 4, "category_id": category}),
        )
        .await;
    assert_eq!(
        structured(&added)
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["id"],
        "the result is shaped to its resultSchema"
    );
    assert_eq!(
        world.audit_sources("expense-log"),
        [
            ("create".to_owned(), "ui".to_owned()),
            ("create".to_owned(), "ui".to_owned())
        ]
    );
    // Bound to another app, expense-log's app-only action does not exist.
    let mut other = browser(Some("hello"), studio);
    let refused = other
        .call(
            "app__expense_log__add_expense",
            json!({"spent_on": "2026-09-08", "amount": 4, "category_id": category}),
        )
        .await;
    assert_eq!(tool_error(&refused)["code"], "APP_ACTION_UNAVAILABLE");
    // The cookie from another origin is refused; a token cannot bind an app.
    let foreign = browser(Some("expense-log"), "https://evil.example")
        .request("tools/list", json!({}))
        .await;
    assert_eq!(foreign.status, 403);
    let mut token_bound = Mcp::new(
        world.router(),
        vec![
            (
                "authorization".into(),
                format!("Bearer {}", world.staff_token),
            ),
            ("sasha-app".into(), "expense-log".into()),
        ],
        SESSIONLESS,
    );
    assert_eq!(
        token_bound.request("tools/list", json!({})).await.status,
        400
    );

    // A chat-session token's client is driven by its model: a change it
    // asks for is refused, and it is handed nothing that could confirm one
    // (the Studio assistant confirms in its own page).
    let scopes: BTreeSet<Scope> = [Scope::ChatUse, Scope::AppsInvoke].into_iter().collect();
    let chat = world
        .store
        .mint_token(&world.staff.id, TokenKind::ChatSession, &scopes, None)
        .unwrap();
    let mut chat = world
        .client(&chat)
        .eliciting(|_| json!({"action": "accept", "content": {"confirm": true}}));
    let refused = chat
        .call(
            "app__expense_log__categories__create",
            json!({"values": {"name": "Meals"}}),
        )
        .await;
    let envelope = tool_error(&refused);
    assert_eq!(envelope["code"], "APP_CONFIRMATION_REQUIRED", "{envelope}");
    assert!(
        !refused.body.to_string().contains("confirmationToken"),
        "{:?}",
        refused.body
    );
    assert_ne!(refused.result()["resultType"], "input_required");
    let forged = chat
        .call(
            "app__expense_log__categories__create",
            json!({"values": {"name": "Meals"}, "confirmationToken": "x"}),
        )
        .await;
    assert_eq!(tool_error(&forged)["code"], "APP_INPUT_INVALID");
    let rows = chat
        .call("app__expense_log__categories__list", json!({}))
        .await;
    assert_eq!(structured(&rows)["rows"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn session_clients_are_asked_by_elicitation() {
    let world = World::start().await;
    let bearer = vec![(
        "authorization".to_owned(),
        format!("Bearer {}", world.staff_token),
    )];
    let mut accepting = Mcp::new(world.router(), bearer.clone(), LEGACY)
        .eliciting(|_| json!({"action": "accept", "content": {"confirm": true}}));
    let initialized = accepting.initialize().await;
    assert!(accepting.session.is_some(), "{:?}", initialized.body);
    let created = accepting
        .call(
            "app__expense_log__categories__create",
            json!({"values": {"name": "Travel"}, "idempotencyKey": "c-1"}),
        )
        .await;
    assert_eq!(structured(&created)["name"], "Travel");

    let mut declining = Mcp::new(world.router(), bearer.clone(), LEGACY)
        .eliciting(|_| json!({"action": "decline"}));
    declining.initialize().await;
    let declined = declining
        .call(
            "app__expense_log__categories__create",
            json!({"values": {"name": "Food"}}),
        )
        .await;
    assert_eq!(tool_error(&declined)["code"], "APP_CONFIRMATION_REQUIRED");

    let mut silent = Mcp::new(world.router(), bearer, LEGACY);
    silent.initialize().await;
    let refused = silent
        .call(
            "app__expense_log__categories__create",
            json!({"values": {"name": "Food"}}),
        )
        .await;
    assert_eq!(tool_error(&refused)["code"], "APP_CONFIRMATION_REQUIRED");

    // A session belongs to the user who opened it.
    let member_token = token(
        &world.store,
        &world.member,
        &[Scope::ChatUse, Scope::AppsInvoke],
    );
    let mut hijack = Mcp::new(
        world.router(),
        vec![("authorization".to_owned(), format!("Bearer {member_token}"))],
        LEGACY,
    );
    hijack.session = accepting.session.clone();
    assert_eq!(hijack.request("tools/list", json!({})).await.status, 404);

    let rows = accepting
        .call("app__expense_log__categories__list", json!({}))
        .await;
    assert_eq!(structured(&rows)["rows"].as_array().unwrap().len(), 1);
}

/// `Sasha-App` names an app by the one app id rule
/// (`sasha_contract::AppId`): anything else is refused before any tool is
/// listed, a digit first too, which no package's id can have.
#[tokio::test]
async fn the_studio_page_binds_only_an_app_id() {
    let world = World::start().await;
    let session = world.store.create_session(&world.staff.id).unwrap();
    let too_long = "a".repeat(61);
    for app in [
        "1app",
        "9",
        "a--b",
        "trailing-",
        "Expense-log",
        "a_b",
        &too_long,
    ] {
        let mut page = Mcp::new(
            world.router(),
            vec![
                ("cookie".to_owned(), format!("sasha_session={session}")),
                ("origin".to_owned(), "http://localhost:3007".to_owned()),
                ("sasha-app".to_owned(), app.to_owned()),
            ],
            SESSIONLESS,
        );
        let refused = page.request("tools/list", json!({})).await;
        assert_eq!(refused.status, 400, "{app}");
        assert_eq!(refused.body["code"], "APP_INPUT_INVALID", "{app}");
    }
}
