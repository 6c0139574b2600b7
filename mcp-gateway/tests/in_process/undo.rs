//! The undo tools through the gateway's router, in front of real in-process
//! studio-core and data-worker: who sees them, who may call them (a `use`
//! holder, a user with no grant, an API key), that applying needs the
//! person's yes (a client that cannot be asked is refused, a chat session
//! is never asked, a declined question writes nothing) and that a
//! confirmed undo runs once under its key.

use serde_json::{Value, json};
use studio_store::{AppAccess, Scope, TokenKind};

use crate::mcp::{Mcp, confirmed_call, question_state, structured, tool_error, tool_names};
use crate::world::World;

const APP: &str = "expense-log";
const CREATE: &str = "app__expense_log__categories__create";

fn since() -> Value {
    json!({"app": APP, "since": "2000-01-01T00:00:00Z"})
}

async fn categories(client: &mut Mcp) -> usize {
    let listed = client
        .call("app__expense_log__categories__list", json!({}))
        .await;
    structured(&listed)["rows"].as_array().unwrap().len()
}

#[tokio::test]
async fn undo_tools_refuse_every_caller_but_a_confirming_manager() {
    let world = World::start().await;
    let session = world.session(&world.staff);
    let mut page = world.studio_page(&session, APP);
    for name in ["Travel", "Meals"] {
        structured(&page.call(CREATE, json!({"values": {"name": name}})).await);
    }

    // Listed for a caller who invokes apps, not for one who does not.
    let mut staff = world.client(&world.staff_token).eliciting(|_| json!({}));
    let listed = tool_names(&staff.request("tools/list", json!({})).await);
    for name in ["listAppActivity", "previewAppUndo", "undoAppChanges"] {
        assert!(listed.contains(&name.to_owned()), "{name} missing");
    }
    let chat_only = world.token(&world.staff, &[Scope::ChatUse]);
    let listed = tool_names(
        &world
            .client(&chat_only)
            .request("tools/list", json!({}))
            .await,
    );
    assert!(!listed.contains(&"listAppActivity".to_owned()));

    // A member with no grant, then with `use`: refused, naming why.
    let member_token = world.token(&world.member, &[Scope::ChatUse, Scope::AppsInvoke]);
    let mut member = world.client(&member_token);
    let refused = member.call("previewAppUndo", since()).await;
    assert_eq!(tool_error(&refused)["code"], "APP_NOT_FOUND");
    world
        .store
        .grant(APP, &world.member.id, AppAccess::Use, Some(&world.staff.id))
        .unwrap();
    for tool in ["listAppActivity", "previewAppUndo"] {
        let refused = member.call(tool, since()).await;
        assert_eq!(tool_error(&refused)["code"], "APP_ACCESS_DENIED", "{tool}");
    }
    // Arguments are checked by the tool's schema first.
    let bad = staff
        .call("previewAppUndo", json!({"app": APP, "initiator": "model"}))
        .await;
    assert_eq!(tool_error(&bad)["code"], "APP_INPUT_INVALID");

    // The staff user (who manages the app) previews the undo of both rows.
    let preview = staff.call("previewAppUndo", since()).await;
    let plan = structured(&preview).clone();
    assert_eq!(
        (plan["entries"].as_u64(), plan["rows"].as_u64()),
        (Some(2), Some(2))
    );
    let mut apply = since();
    apply["planHash"] = plan["planHash"].clone();
    apply["idempotencyKey"] = json!("undo-both");

    // A chat session is never asked, and so never confirms.
    let chat = world.token_of(
        &world.staff,
        TokenKind::ChatSession,
        &[Scope::ChatUse, Scope::AppsInvoke],
    );
    let refused = world
        .client(&chat)
        .call("undoAppChanges", apply.clone())
        .await;
    assert_eq!(tool_error(&refused)["code"], "APP_CONFIRMATION_REQUIRED");
    // A sessionless client is asked; declining writes nothing.
    let asked = staff.call("undoAppChanges", apply.clone()).await;
    let state = question_state(&asked);
    let declined = staff
        .answer(
            "undoAppChanges",
            apply.clone(),
            &state,
            json!({"action": "decline"}),
        )
        .await;
    assert!(declined.result()["isError"] == true || structured(&declined)["undoId"].is_null());
    assert_eq!(categories(&mut staff).await, 2);

    // Confirmed, it runs; a replay of the same key answers the same, once.
    let done = confirmed_call(&mut staff, "undoAppChanges", apply.clone()).await;
    let done = structured(&done).clone();
    assert_eq!(done["deleted"], 2, "{done}");
    assert_eq!(categories(&mut staff).await, 0);
    let again = confirmed_call(&mut staff, "undoAppChanges", apply).await;
    assert_eq!(structured(&again), &done);
    // The activity shows the undo as the staff user's, initiator undo.
    let activity = staff
        .call("listAppActivity", json!({"app": APP, "initiator": "undo"}))
        .await;
    let entries = structured(&activity)["entries"].as_array().unwrap().clone();
    assert_eq!(entries.len(), 2);
    assert!(
        entries
            .iter()
            .all(|entry| entry["actor"] == json!(world.staff.id)
                && entry["initiatorId"] == done["undoId"])
    );
}
