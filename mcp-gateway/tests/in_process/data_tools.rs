//! Governed data tools, actions and resources through the gateway: reads,
//! confirmed and versioned writes, actions (exposed and app-only), the
//! refusals of each, and the `ui://` and `sasha://` resources.

use serde_json::{Value, json};
use studio_store::Scope;

use crate::mcp::{Mcp, confirmed_create, structured, tool_error};
use crate::world::{World, token};

async fn add_category(client: &mut Mcp, name: &str) -> i64 {
    let created = confirmed_create(
        client,
        "app__expense_log__categories__create",
        json!({"values": {"name": name}}),
    )
    .await;
    created["id"].as_i64().unwrap()
}

#[tokio::test]
async fn data_tools_actions_and_refusals() {
    let world = World::start().await;
    let mut model = world.client(&world.staff_token).eliciting(|_| json!({}));
    let category = add_category(&mut model, "Travel").await;

    let created = confirmed_create(
        &mut model,
        "app__expense_log__expenses__create",
        json!({"values": {"spent_on": "2026-09-08", "amount": 12.5, "category_id": category}, "idempotencyKey": "expense-1"}),
    )
    .await;
    assert_eq!(
        created["created_by"],
        world.staff.id.as_str(),
        "the owner is stamped"
    );
    assert_eq!(created["_sasha_version"], 1);
    let id = created["id"].as_i64().unwrap();

    // Reads need no confirmation.
    let listed = model
        .call(
            "app__expense_log__expenses__list",
            json!({"where": [{"field": "spent_on", "operator": "gte", "value": "2026-09-01"}], "orderBy": [{"field": "spent_on", "direction": "desc"}], "limit": 10}),
        )
        .await;
    assert_eq!(structured(&listed)["rows"].as_array().unwrap().len(), 1);
    let got = model
        .call("app__expense_log__expenses__get", json!({"id": id}))
        .await;
    assert_eq!(structured(&got)["amount"], 12.5);
    let totals = model
        .call(
            "app__expense_log__expenses__aggregate",
            json!({"groupBy": ["category_id"], "metrics": [{"as": "total", "sum": "amount"}]}),
        )
        .await;
    assert_eq!(
        structured(&totals)["groups"],
        json!([{"category_id": category, "total": 12.5}])
    );

    // Update and delete are confirmed and versioned.
    let updated = confirmed_create(
        &mut model,
        "app__expense_log__expenses__update",
        json!({"id": id, "changes": {"amount": 20}, "expectedVersion": 1}),
    )
    .await;
    assert_eq!(updated["_sasha_version"], 2);
    let stale = model
        .request(
            "tools/call",
            json!({"name": "app__expense_log__expenses__update", "arguments": {"id": id, "changes": {"amount": 30}, "expectedVersion": 1}}),
        )
        .await;
    let state = stale.result()["requestState"].as_str().unwrap().to_owned();
    let conflict = model
        .request(
            "tools/call",
            json!({"name": "app__expense_log__expenses__update", "arguments": {"id": id, "changes": {"amount": 30}, "expectedVersion": 1}, "requestState": state, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}}),
        )
        .await;
    assert_eq!(tool_error(&conflict)["code"], "APP_CONFLICT");

    // Actions: exposed ones run; week-of covers exactly seven days.
    let week = model
        .call(
            "app__expense_log__week_totals",
            json!({"weekStart": "2026-09-02"}),
        )
        .await;
    assert_eq!(
        structured(&week)["groups"],
        json!([{"category_id": category, "total": 20.0}])
    );
    let week = model
        .call(
            "app__expense_log__week_totals",
            json!({"weekStart": "2026-09-09"}),
        )
        .await;
    assert_eq!(
        structured(&week)["groups"],
        json!([]),
        "2026-09-08 is outside [09-09, 09-16)"
    );
    let range = model
        .call(
            "app__expense_log__category_totals",
            json!({"from": "2026-09-01", "to": "2026-09-30"}),
        )
        .await;
    assert_eq!(structured(&range)["groups"][0]["entries"], 1);

    // Refusals.
    let app_only = model
        .call(
            "app__expense_log__add_expense",
            json!({"spent_on": "2026-09-08", "amount": 1, "category_id": category}),
        )
        .await;
    assert_eq!(tool_error(&app_only)["code"], "APP_ACTION_UNAVAILABLE");
    let unknown_action = model
        .call("app__expense_log__no_such_action", json!({}))
        .await;
    assert_eq!(
        tool_error(&unknown_action)["code"],
        "APP_ACTION_UNAVAILABLE"
    );
    // A person may read the message: it names no internal tool, the
    // details do.
    let refusal = tool_error(&unknown_action);
    assert!(
        !refusal["message"].as_str().unwrap().contains("app__"),
        "{refusal}"
    );
    assert_eq!(
        refusal["details"]["tool"],
        "app__expense_log__no_such_action"
    );
    let unknown = model.call("delete_everything", json!({})).await;
    assert_eq!(unknown.error()["code"], -32602);
    let extra = model
        .call(
            "app__expense_log__expenses__list",
            json!({"sql": "DROP TABLE expenses"}),
        )
        .await;
    assert_eq!(tool_error(&extra)["code"], "APP_INPUT_INVALID");
    let owner_filter = model
        .call(
            "app__expense_log__expenses__list",
            json!({"where": [{"field": "created_by", "operator": "eq", "value": "someone"}]}),
        )
        .await;
    assert_eq!(tool_error(&owner_filter)["code"], "APP_INPUT_INVALID");
    let bad_date = model
        .call(
            "app__expense_log__week_totals",
            json!({"weekStart": "2026-02-30"}),
        )
        .await;
    assert_eq!(tool_error(&bad_date)["code"], "APP_INPUT_INVALID");
    let missing = model
        .call("app__expense_log__expenses__get", json!({"id": 9999}))
        .await;
    assert_eq!(tool_error(&missing)["code"], "APP_RECORD_NOT_FOUND");

    // A client that cannot be asked gets APP_CONFIRMATION_REQUIRED, and
    // nothing is written.
    let mut blind = world.client(&world.staff_token);
    let refused = blind
        .call(
            "app__expense_log__categories__create",
            json!({"values": {"name": "Food"}}),
        )
        .await;
    assert_eq!(tool_error(&refused)["code"], "APP_CONFIRMATION_REQUIRED");
    // A decline writes nothing either.
    let asked = model
        .call(
            "app__expense_log__categories__create",
            json!({"values": {"name": "Food"}}),
        )
        .await;
    let state = asked.result()["requestState"].as_str().unwrap().to_owned();
    let declined = model
        .request(
            "tools/call",
            json!({"name": "app__expense_log__categories__create", "arguments": {"values": {"name": "Food"}}, "requestState": state, "inputResponses": {"confirm": {"action": "decline"}}}),
        )
        .await;
    assert_eq!(tool_error(&declined)["code"], "APP_CONFIRMATION_REQUIRED");
    // A decline is final: the same state accepted afterwards runs nothing.
    let after_decline = model
        .request(
            "tools/call",
            json!({"name": "app__expense_log__categories__create", "arguments": {"values": {"name": "Food"}}, "requestState": state, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}}),
        )
        .await;
    assert_eq!(
        tool_error(&after_decline)["code"],
        "APP_CONFIRMATION_REQUIRED",
        "an accept after the decline must not redeem the token"
    );
    // Consent is the explicit `confirm: true` the form asks for: an accept
    // without content, or with anything else, writes nothing.
    for content in [json!(null), json!({}), json!({"confirm": "yes"})] {
        let asked = model
            .call(
                "app__expense_log__categories__create",
                json!({"values": {"name": "Food"}}),
            )
            .await;
        let fresh = asked.result()["requestState"].as_str().unwrap().to_owned();
        let mut answer = json!({"action": "accept"});
        if !content.is_null() {
            answer["content"] = content.clone();
        }
        let unconfirmed = model
            .request(
                "tools/call",
                json!({"name": "app__expense_log__categories__create", "arguments": {"values": {"name": "Food"}}, "requestState": fresh, "inputResponses": {"confirm": answer}}),
            )
            .await;
        assert_eq!(
            tool_error(&unconfirmed)["code"],
            "APP_CONFIRMATION_REQUIRED",
            "accept with {content}"
        );
    }
    // A confirmation is bound to its arguments.
    let forged = model
        .request(
            "tools/call",
            json!({"name": "app__expense_log__categories__create", "arguments": {"values": {"name": "Other"}}, "requestState": state, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}}),
        )
        .await;
    assert_eq!(tool_error(&forged)["code"], "APP_CONFIRMATION_REQUIRED");
    let categories = model
        .call("app__expense_log__categories__list", json!({}))
        .await;
    assert_eq!(structured(&categories)["rows"].as_array().unwrap().len(), 1);

    // Replaying an accepted confirmation replays the write, never doubles it.
    let first = model
        .call(
            "app__expense_log__categories__create",
            json!({"values": {"name": "Books"}}),
        )
        .await;
    let state = first.result()["requestState"].as_str().unwrap().to_owned();
    let accept = json!({"name": "app__expense_log__categories__create", "arguments": {"values": {"name": "Books"}}, "requestState": state, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}});
    let once = model.request("tools/call", accept.clone()).await;
    let twice = model.request("tools/call", accept).await;
    assert_eq!(structured(&once)["id"], structured(&twice)["id"]);
    let categories = model
        .call("app__expense_log__categories__list", json!({}))
        .await;
    assert_eq!(structured(&categories)["rows"].as_array().unwrap().len(), 2);

    // Every model write was recorded as source mcp.
    assert!(
        world
            .audit_sources("expense-log")
            .iter()
            .all(|(_, source)| source == "mcp")
    );
}

#[tokio::test]
async fn resources_ui_and_data() {
    let world = World::start().await;
    let mut model = world.client(&world.staff_token).eliciting(|_| json!({}));
    let category = add_category(&mut model, "Travel").await;
    let listed = model.request("resources/list", json!({})).await;
    let ui = listed.result()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|resource| resource["name"] == "expense-log")
        .unwrap()
        .clone();
    let uri = ui["uri"].as_str().unwrap();
    let read = model.request("resources/read", json!({"uri": uri})).await;
    let content = &read.result()["contents"][0];
    assert_eq!(content["mimeType"], "text/html;profile=mcp-app");
    assert!(
        content["text"]
            .as_str()
            .unwrap()
            .to_ascii_lowercase()
            .starts_with("<!doctype html>")
    );
    assert!(content["_meta"]["ui"]["csp"].is_object(), "{content}");
    // The opener names the same resource.
    let opened = model.call("open_app__expense_log", json!({})).await;
    assert_eq!(structured(&opened)["resourceUri"], uri);

    // An unknown revision is APP_REVISION_UNAVAILABLE; another app is hidden.
    let stale = format!("ui://sasha/apps/expense-log/revisions/{}", "0".repeat(64));
    let unavailable = model.request("resources/read", json!({"uri": stale})).await;
    assert_eq!(
        unavailable.error()["data"]["error"]["code"],
        "APP_REVISION_UNAVAILABLE"
    );
    let member_token = token(
        &world.store,
        &world.member,
        &[Scope::ChatUse, Scope::AppsInvoke],
    );
    let hidden = world
        .client(&member_token)
        .request("resources/read", json!({"uri": uri}))
        .await;
    assert_eq!(hidden.error()["data"]["error"]["code"], "APP_NOT_FOUND");

    let read_json = |exchange: &crate::mcp::Exchange| -> Value {
        serde_json::from_str(exchange.result()["contents"][0]["text"].as_str().unwrap()).unwrap()
    };
    let tables = model
        .request(
            "resources/read",
            json!({"uri": "sasha://apps/expense-log/tables"}),
        )
        .await;
    assert!(read_json(&tables)["tables"]["expenses"]["columns"].is_array());
    let actions = model
        .request(
            "resources/read",
            json!({"uri": "sasha://apps/expense-log/actions"}),
        )
        .await;
    assert_eq!(read_json(&actions)["actions"].as_array().unwrap().len(), 3);
    let q = "%7B%22limit%22%3A5%7D";
    let rows = model
        .request(
            "resources/read",
            json!({"uri": format!("sasha://apps/expense-log/tables/categories/rows?q={q}")}),
        )
        .await;
    assert_eq!(read_json(&rows)["rows"][0]["name"], "Travel");
    let row = model
        .request(
            "resources/read",
            json!({"uri": format!("sasha://apps/expense-log/tables/categories/rows/{category}")}),
        )
        .await;
    assert_eq!(read_json(&row)["name"], "Travel");
    let aggregate = model
        .request(
            "resources/read",
            json!({"uri": "sasha://apps/expense-log/tables/categories/aggregate?q=%7B%22metrics%22%3A%5B%7B%22as%22%3A%22n%22%2C%22count%22%3A%22id%22%7D%5D%7D"}),
        )
        .await;
    assert_eq!(read_json(&aggregate)["groups"], json!([{"n": 1}]));
    for bad in [
        "sasha://apps/expense-log/tables/secrets/rows",
        "sasha://apps/expense-log/tables/categories/aggregate",
        "sasha://apps/hello/../expense-log/tables",
        "file:///etc/passwd",
    ] {
        let refused = model.request("resources/read", json!({"uri": bad})).await;
        assert!(
            refused.body.get("error").is_some(),
            "{bad}: {}",
            refused.body
        );
    }
    let bad_query = model
        .request(
            "resources/read",
            json!({"uri": "sasha://apps/expense-log/tables/categories/rows?q=not-json"}),
        )
        .await;
    assert_eq!(
        bad_query.error()["data"]["error"]["code"],
        "APP_INPUT_INVALID"
    );
}
