//! The undo scenario the issue names, shared by the process test (approvals
//! over Studio's API, the undo through an official MCP SDK client) and the
//! Chromium one (approvals and the undo in the page): a member's 15
//! expense-log expenses, then an assistant conversation that creates 30,
//! updates 10 of hers and deletes 5.

use serde_json::{Value, json};

use super::mcp::{Mcp, structured};

/// The expense-log table tool `table_operation` (`expenses__create`, …).
pub fn tool(table_operation: &str) -> String {
    format!("app__expense_log__{table_operation}")
}

/// The conversation's 45 calls, in order: 30 creates, 10 updates of the
/// member's rows 1 to 10, 5 deletes of her rows 11 to 15.
pub fn conversation_calls() -> Vec<(String, Value)> {
    let mut calls = Vec::new();
    for n in 0..30 {
        calls.push((
            tool("expenses__create"),
            json!({"values": {"spent_on": "2026-12-02", "amount": 100 + n, "category_id": 1}}),
        ));
    }
    for id in 1..=10 {
        calls.push((
            tool("expenses__update"),
            json!({"id": id, "changes": {"amount": 999}, "expectedVersion": 1}),
        ));
    }
    for id in 11..=15 {
        calls.push((
            tool("expenses__delete"),
            json!({"id": id, "expectedVersion": 1}),
        ));
    }
    calls
}

/// The member's own rows before the conversation, written from her Studio
/// page: a category, then expenses 1 to 15.
pub async fn seed(page: &mut Mcp) {
    structured(
        &page
            .call(
                &tool("categories__create"),
                json!({"values": {"name": "Travel"}}),
            )
            .await,
    );
    for n in 0..15 {
        let row = page
            .call(
                &tool("expenses__create"),
                json!({"values": {"spent_on": "2026-12-01", "amount": n, "category_id": 1}}),
            )
            .await;
        assert_eq!(structured(&row)["id"], n + 1);
    }
}

/// The expenses `page` lists, as `[id, amount, note]` by id.
pub async fn expenses(page: &mut Mcp) -> Value {
    let listed = page
        .call(
            &tool("expenses__list"),
            json!({"limit": 200, "orderBy": [{"field": "id"}]}),
        )
        .await;
    structured(&listed)["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| json!([row["id"], row["amount"], row["note"]]))
        .collect()
}

/// The member edits row 1 (which the conversation rewrote) by hand, from
/// her page; gives back the row as `expenses` lists it.
pub async fn edit_by_hand(page: &mut Mcp) -> Value {
    let edited = page
        .call(
            &tool("expenses__update"),
            json!({"id": 1, "changes": {"note": "checked by hand"}, "expectedVersion": 2}),
        )
        .await;
    let edited = structured(&edited);
    json!([1, edited["amount"], "checked by hand"])
}
