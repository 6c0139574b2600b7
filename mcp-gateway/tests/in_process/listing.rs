//! What each caller lists: tools, resources and templates per credential
//! and grant, read fresh on every request, and the golden listings.

use std::path::Path;

use serde_json::{Value, json};
use studio_store::{AppAccess, Scope};

use crate::mcp::{self, Mcp, tool_names};
use crate::world::World;

#[tokio::test]
async fn tools_follow_the_caller_and_their_grants() {
    let world = World::start().await;
    let member_token = world.token(&world.member, &[Scope::ChatUse, Scope::AppsInvoke]);
    let no_invoke = world.token(&world.staff, &[Scope::ChatUse]);

    // Unauthenticated and bad credentials: 401 with a challenge.
    let mut anonymous = Mcp::new(world.router(), vec![], mcp::SESSIONLESS);
    let refused = anonymous.request("tools/list", json!({})).await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.body["code"], "APP_UNAUTHENTICATED");
    assert!(
        refused.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer")
    );
    let refused = world
        .client("sasha_at_forged")
        .request("tools/list", json!({}))
        .await;
    assert_eq!(refused.status, 401);
    assert!(
        refused.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );

    // A transport refusal (rmcp's check of a browser Origin) is the error
    // envelope too, never plain text (issue 21).
    let mut foreign = world
        .client(&world.staff_token)
        .with_header("origin", "http://evil.test");
    let refused = foreign.request("tools/list", json!({})).await;
    assert_eq!(refused.status, 403);
    assert_eq!(
        refused.body["code"], "APP_ACCESS_DENIED",
        "{:?}",
        refused.body
    );
    assert!(refused.body["diagnosticId"].is_string());

    let staff = tool_names(
        &world
            .client(&world.staff_token)
            .request("tools/list", json!({}))
            .await,
    );
    for name in [
        "open_app__hello",
        "open_app__expense_log",
        "app__expense_log__expenses__list",
        "app__expense_log__categories__delete",
        "app__expense_log__category_totals",
        "app__expense_log__week_totals",
    ] {
        assert!(
            staff.contains(&name.to_owned()),
            "{name} missing from {staff:?}"
        );
    }
    assert!(
        !staff.contains(&"app__expense_log__add_expense".to_owned()),
        "an app-only action is not a model tool"
    );
    // Openers, table tools (every operation of both tables), exposed
    // actions, getDocs, suggestImprovement and (a manager's) the three undo
    // tools.
    assert_eq!(
        staff.len(),
        2 + 2 * sasha_contract::grammar::OPERATIONS.len() + 2 + 2 + 3
    );

    // A member without a grant sees nothing; with `use` on one app, that app.
    let mut member = world.client(&member_token);
    assert_eq!(
        tool_names(&member.request("tools/list", json!({})).await),
        ["getDocs", "suggestImprovement"]
    );
    world
        .store
        .grant(
            "expense-log",
            &world.member.id,
            AppAccess::Use,
            Some(&world.staff.id),
        )
        .unwrap();
    let listed = tool_names(&member.request("tools/list", json!({})).await);
    assert!(listed.contains(&"open_app__expense_log".to_owned()));
    assert!(!listed.contains(&"open_app__hello".to_owned()));
    // Revoked: gone on the very next request.
    world
        .store
        .revoke("expense-log", &world.member.id, Some(&world.staff.id))
        .unwrap();
    assert_eq!(
        tool_names(&member.request("tools/list", json!({})).await),
        ["getDocs", "suggestImprovement"]
    );
    let called = member
        .call("app__expense_log__expenses__list", json!({}))
        .await;
    assert_eq!(called.error()["code"], -32602);

    // Without apps:invoke there are no app tools, resources or templates.
    let mut chat_only = world.client(&no_invoke);
    assert_eq!(
        tool_names(&chat_only.request("tools/list", json!({})).await),
        ["getDocs"]
    );
    assert_eq!(
        chat_only
            .request("resources/list", json!({}))
            .await
            .result()["resources"],
        json!([])
    );
    assert_eq!(
        chat_only
            .request("resources/templates/list", json!({}))
            .await
            .result()["resourceTemplates"],
        json!([])
    );

    // Golden files pin the whole listing for the fixture catalogue.
    let mut staff = world.client(&world.staff_token);
    let tools = staff.request("tools/list", json!({})).await.result()["tools"].clone();
    let resources = staff.request("resources/list", json!({})).await.result()["resources"].clone();
    let templates = staff
        .request("resources/templates/list", json!({}))
        .await
        .result()["resourceTemplates"]
        .clone();
    let revisions: Vec<(String, String)> = resources
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|resource| {
            let uri = resource["uri"].as_str()?;
            let (app, revision) = uri
                .strip_prefix("ui://sasha/apps/")?
                .split_once("/revisions/")?;
            Some((revision.to_owned(), format!("<{app}-revision>")))
        })
        .collect();
    golden("mcp-tools.json", &tools, &revisions);
    golden(
        "mcp-resources.json",
        &json!({"resources": resources, "resourceTemplates": templates}),
        &revisions,
    );
}

/// Compares `value`, pretty-printed with `replacements`, to the golden file
/// `name` (`tests/packages/golden/`; `UPDATE_EXPECT=1` rewrites it).
fn golden(name: &str, value: &Value, replacements: &[(String, String)]) {
    let mut text = serde_json::to_string_pretty(value).unwrap();
    for (from, to) in replacements {
        text = text.replace(from, to);
    }
    text.push('\n');
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/packages/golden")
        .join(name);
    expect_test::expect_file![path].assert_eq(&text);
}
