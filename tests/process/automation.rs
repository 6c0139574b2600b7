//! A script's token (issue 26): an operator consents, at mint time, to a
//! token writing one app without a model confirmation. Through the real
//! gateway its create runs at once and is audited as `automation`, whether
//! the call names its tool in headers or, from an older client, only in its
//! body; the same user's token without consent still needs the person's
//! confirmation; a revoked token is refused outright. The consent rules themselves are the
//! store's unit tests; the CLI flag is `tests/process/admin.rs`'s.

use crate::common;

use common::mcp::{McpWorld, structured, token};
use serde_json::json;
use studio_store::Scope;

#[tokio::test]
async fn a_consented_script_token_writes_without_confirmation_as_automation() {
    let world = McpWorld::start().await;
    let script = token(&world.store, &world.staff, &[Scope::AppsInvoke]);
    world
        .store
        .consent_writes(&script, "expense-log", "operator")
        .unwrap();
    let create =
        |name: &str| json!({"values": {"name": name}, "idempotencyKey": format!("script-{name}")});

    let mut as_script = world.client(&script);
    let made = as_script
        .call("app__expense_log__categories__create", create("Automated"))
        .await;
    assert_eq!(structured(&made)["name"], "Automated");
    assert!(
        world
            .audit_sources()
            .contains(&("create".to_owned(), "automation".to_owned())),
        "{:?}",
        world.audit_sources()
    );

    // An older client names the tool only in the body (no Mcp-Name header):
    // the consent holds the same.
    let mut older = common::mcp::Mcp::new(
        &world.url(),
        vec![("authorization".to_owned(), format!("Bearer {script}"))],
        common::mcp::LEGACY,
    );
    older.initialize().await;
    let made = older
        .call("app__expense_log__categories__create", create("Older"))
        .await;
    assert_eq!(structured(&made)["name"], "Older", "{:?}", made.body);

    // The same user's token without consent is a model's: it needs the person.
    let mut as_model = world.client(&world.staff_token);
    let asked = as_model
        .call("app__expense_log__categories__create", create("Modelled"))
        .await;
    let result = asked.result();
    assert!(
        result["resultType"] == "input_required" || result["isError"] == true,
        "{result}"
    );
    assert_ne!(result["structuredContent"]["name"], "Modelled");

    // Revoked: refused before anything runs.
    world.store.revoke_token(&script).unwrap();
    let refused = as_script
        .call("app__expense_log__categories__create", create("Late"))
        .await;
    assert_eq!(refused.status, 401, "{:?}", refused.body);
    let sources = world.audit_sources();
    assert_eq!(
        sources
            .iter()
            .filter(|(_, source)| source == "automation")
            .count(),
        2,
        "{sources:?}"
    );
}
