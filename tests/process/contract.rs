//! One grammar bound, three consumers: the validator refuses an action over
//! it, data-worker refuses a request over it, and the table tools publish it.
//! Each side reads the number from `sasha-contract`, so this test states it
//! once (`MAX_WHERE`, `MAX_ORDER_BY`, `MAX_LIMIT`) and changing the constant
//! there moves all three with no other edit.

use crate::common;

use sasha_contract::grammar::{MAX_LIMIT, MAX_ORDER_BY, MAX_WHERE, TableOperation};
use sasha_contract::tools::table_tool_input;
use sasha_proto::ErrorCode;
use serde_json::json;

const APP: &str = "expense-log";

/// The expense-log package with its week-totals action given `clauses`
/// `where` clauses, validated.
fn validate_with_clauses(clauses: usize) -> sasha_package::validate::Validation {
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join(APP);
    common::copy_dir(&common::root().join("tests/packages/valid").join(APP), &app);
    let path = app.join("actions/week-totals.action.yaml");
    let source = std::fs::read_to_string(&path).unwrap();
    let one = "      - {field: spent_on, operator: week-of, valueFrom: input.weekStart}\n";
    let many =
        "      - {field: spent_on, operator: gte, valueFrom: input.weekStart}\n".repeat(clauses);
    assert!(source.contains(one));
    std::fs::write(&path, source.replace(one, &many)).unwrap();
    sasha_package::validate::validate_dir(&app)
}

#[test]
fn the_validator_refuses_an_action_past_the_where_bound() {
    let at = validate_with_clauses(MAX_WHERE);
    assert!(at.diagnostics.is_empty(), "{:?}", at.diagnostics);
    let over = validate_with_clauses(MAX_WHERE + 1);
    assert!(
        over.diagnostics
            .iter()
            .any(|d| d.file == "actions/week-totals.action.yaml"
                && d.reason.contains(&MAX_WHERE.to_string())),
        "{:?}",
        over.diagnostics
    );
}

fn expenses() -> (
    sasha_contract::data::Table,
    sasha_contract::data::TableDeclaration,
) {
    let validation = validate_with_clauses(1);
    let contract = validation.package.unwrap().data.unwrap();
    let (declaration, table) = contract.declared_table("expenses").unwrap();
    (table.clone(), declaration.clone())
}

#[test]
fn data_worker_refuses_a_request_past_each_bound() {
    let (table, declaration) = expenses();
    let spec = data_worker::grammar::TableSpec::new(&table, &declaration);
    let clause = json!({"field": "spent_on", "operator": "gte", "value": "2026-01-01"});
    // Distinct sortable columns: a column may be ordered by once.
    let sortable = ["spent_on", "amount", "category_id", "note", "id"];
    let list = |clauses: usize, orders: usize, limit: u32| {
        let request = json!({
            "where": vec![clause.clone(); clauses],
            "orderBy": sortable[..orders].iter().map(|field| json!({"field": field})).collect::<Vec<_>>(),
            "limit": limit,
        });
        data_worker::grammar::parse("list", &spec, &request.to_string())
    };
    assert!(list(MAX_WHERE, 1, MAX_LIMIT).is_ok());
    let refused = |result: Result<_, sasha_proto::AppError>| {
        let error = result.unwrap_err();
        assert!(
            matches!(
                error.code,
                ErrorCode::InputInvalid | ErrorCode::ResourceLimit
            ),
            "{error:?}"
        );
        error.message
    };
    assert!(refused(list(MAX_WHERE + 1, 1, MAX_LIMIT)).contains(&MAX_WHERE.to_string()));
    assert!(list(1, MAX_ORDER_BY, MAX_LIMIT).is_ok());
    assert!(refused(list(1, MAX_ORDER_BY + 1, MAX_LIMIT)).contains(&MAX_ORDER_BY.to_string()));
    assert!(refused(list(1, 1, MAX_LIMIT + 1)).contains(&MAX_LIMIT.to_string()));
}

#[test]
fn the_table_tools_publish_each_bound() {
    let (table, declaration) = expenses();
    let list = table_tool_input(&table, &declaration, TableOperation::List).schema;
    let properties = &list["properties"];
    assert_eq!(properties["where"]["maxItems"], json!(MAX_WHERE));
    assert_eq!(properties["orderBy"]["maxItems"], json!(MAX_ORDER_BY));
    assert_eq!(properties["limit"]["maximum"], json!(MAX_LIMIT));
}
