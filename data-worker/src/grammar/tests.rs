//! The data grammar's unit tests: parsing, planning, the SQL each plan
//! compiles to, cursors and their MAC, and every refusal with its message.

use super::*;
use proptest::prelude::*;
use rusqlite::Connection;
use serde_json::json;

use super::oracle::{FIELDS, Model, SECRET, column, database, insert, items, run};

/// `wide`: a shared table with a TEXT id and 50 more columns.
fn wide() -> TableSpec {
    let mut columns = vec![column("id", "TEXT", false)];
    columns.extend((0..50).map(|i| column(&format!("c{i}"), "INTEGER", false)));
    TableSpec {
        name: "wide".to_owned(),
        columns,
        owner_field: None,
        access: Access::Shared,
    }
}

fn code(result: Result<impl std::fmt::Debug, AppError>) -> ErrorCode {
    let error = result.expect_err("expected a refusal");
    // No SQL ever reaches a message.
    for word in [
        "SELECT",
        "WHERE",
        "INSERT",
        "UPDATE ",
        "DELETE FROM",
        "LIKE ?",
    ] {
        assert!(!error.message.contains(word), "{}", error.message);
    }
    assert!(!error.message.ends_with('.'), "{}", error.message);
    error.code
}

fn list(table: &TableSpec, query: Value) -> Result<ListQuery, AppError> {
    match parse("list", table, &query.to_string())? {
        Request::List(query) => Ok(query),
        other => panic!("{other:?}"),
    }
}

fn aggregate(table: &TableSpec, query: Value) -> Result<AggregateQuery, AppError> {
    match parse("aggregate", table, &query.to_string())? {
        Request::Aggregate(query) => Ok(query),
        other => panic!("{other:?}"),
    }
}

fn list_rows(
    connection: &Connection,
    table: &TableSpec,
    query: Value,
    actor: &str,
) -> (Vec<Map<String, Value>>, Option<String>) {
    let query = list(table, query).unwrap();
    let (statement, plan) = list_statement(table, &query, actor, SECRET).unwrap();
    plan.finish_page(run(connection, &statement), SECRET)
}

fn clause(field: &str, operator: &str, value: Value) -> Value {
    json!({"field": field, "operator": operator, "value": value})
}

/// Rows used by several tests: three of alice's and one of bob's.
fn seeded() -> (TableSpec, Connection) {
    let table = items();
    let connection = database(&[&table]);
    insert(
        &connection,
        &table,
        "alice",
        json!({"title": "apple", "hours": 1.5, "count": 10, "note": null}),
    );
    insert(
        &connection,
        &table,
        "alice",
        json!({"title": "banana", "hours": 2.0, "count": 20, "note": "x"}),
    );
    insert(
        &connection,
        &table,
        "alice",
        json!({"title": "cherry", "count": null, "note": "y"}),
    );
    insert(
        &connection,
        &table,
        "bob",
        json!({"title": "apple", "hours": 9.0, "count": 10, "note": null}),
    );
    (table, connection)
}

fn titles(rows: &[Map<String, Value>]) -> Vec<String> {
    rows.iter()
        .map(|r| r["title"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_operator_runs_and_is_owner_scoped() {
    let (table, connection) = seeded();
    let cases = [
        (clause("title", "eq", json!("apple")), vec!["apple"]),
        (
            clause("title", "neq", json!("apple")),
            vec!["banana", "cherry"],
        ),
        (clause("count", "lt", json!(20)), vec!["apple"]),
        (clause("count", "lte", json!(20)), vec!["apple", "banana"]),
        (clause("count", "gt", json!(10)), vec!["banana"]),
        (clause("count", "gte", json!(10)), vec!["apple", "banana"]),
        (
            clause("title", "in", json!(["apple", "cherry", "zzz"])),
            vec!["apple", "cherry"],
        ),
        (clause("title", "contains", json!("an")), vec!["banana"]),
        (clause("title", "starts-with", json!("ch")), vec!["cherry"]),
        (clause("note", "eq", json!(null)), vec!["apple"]),
        (clause("note", "neq", json!(null)), vec!["banana", "cherry"]),
        (
            clause(VERSION_COLUMN, "eq", json!(1)),
            vec!["apple", "banana", "cherry"],
        ),
    ];
    for (condition, expected) in cases {
        let (rows, _) = list_rows(
            &connection,
            &table,
            json!({"where": [condition], "orderBy": [{"field": "title"}]}),
            "alice",
        );
        assert_eq!(titles(&rows), expected, "{condition}");
        assert!(rows.iter().all(|r| r["created_by"] == "alice"));
    }
}

#[test]
fn rows_carry_id_and_version_and_select_narrows() {
    let (table, connection) = seeded();
    let (rows, _) = list_rows(
        &connection,
        &table,
        json!({"select": ["title"], "orderBy": [{"field": "count", "direction": "desc"}]}),
        "alice",
    );
    assert_eq!(rows.len(), 3);
    for row in &rows {
        let keys: Vec<&str> = row.keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 3, "{row:?}");
        assert!(
            row.contains_key("id") && row.contains_key("title") && row.contains_key(VERSION_COLUMN)
        );
    }
    // The owner field may be selected and returned.
    let (rows, _) = list_rows(
        &connection,
        &table,
        json!({"select": ["created_by"]}),
        "alice",
    );
    assert!(rows.iter().all(|r| r["created_by"] == "alice"));
}

#[test]
fn bounds_at_the_limit_pass_and_over_it_are_refused() {
    let table = items();
    let wide_table = wide();
    let connection = database(&[&table, &wide_table]);
    let clauses =
        |n: usize| Value::Array((0..n).map(|_| clause("count", "gte", json!(0))).collect());
    assert!(list(&table, json!({"where": clauses(20)})).is_ok());
    assert_eq!(
        code(list(&table, json!({"where": clauses(21)}))),
        ErrorCode::ResourceLimit
    );

    let values = |n: usize| Value::Array((0..n as i64).map(Value::from).collect());
    let query = list(
        &table,
        json!({"where": [clause("count", "in", values(50))]}),
    )
    .unwrap();
    run(
        &connection,
        &list_statement(&table, &query, "a", SECRET).unwrap().0,
    );
    assert_eq!(
        code(list(
            &table,
            json!({"where": [clause("count", "in", values(51))]})
        )),
        ErrorCode::ResourceLimit
    );
    assert_eq!(
        code(list(
            &table,
            json!({"where": [clause("count", "in", values(0))]})
        )),
        ErrorCode::InputInvalid
    );

    let order = json!([{"field": "title"}, {"field": "hours"}, {"field": "count"}]);
    assert!(list(&table, json!({"orderBy": order})).is_ok());
    let order =
        json!([{"field": "title"}, {"field": "hours"}, {"field": "count"}, {"field": "note"}]);
    assert_eq!(
        code(list(&table, json!({"orderBy": order}))),
        ErrorCode::ResourceLimit
    );

    let select = |n: usize| Value::Array((0..n).map(|i| json!(format!("c{}", i % 50))).collect());
    let query = list(&wide_table, json!({"select": select(50)})).unwrap();
    run(
        &connection,
        &list_statement(&wide_table, &query, "a", SECRET).unwrap().0,
    );
    assert_eq!(
        code(list(&wide_table, json!({"select": select(51)}))),
        ErrorCode::ResourceLimit
    );

    assert_eq!(list(&table, json!({})).unwrap().limit, DEFAULT_LIMIT);
    assert_eq!(list(&table, json!({"limit": 200})).unwrap().limit, 200);
    assert_eq!(list(&table, json!({"limit": 1})).unwrap().limit, 1);
    for limit in [
        json!(201),
        json!(0),
        json!(-1),
        json!(1e9),
        json!(1.5),
        json!("10"),
        json!(null),
    ] {
        assert_eq!(
            code(list(&table, json!({"limit": limit}))),
            ErrorCode::InputInvalid,
            "{limit}"
        );
    }

    let groups = json!(["title", "hours", "count"]);
    let metric = json!([{"as": "n", "count": "id"}]);
    let query = aggregate(&table, json!({"groupBy": groups, "metrics": metric})).unwrap();
    run(
        &connection,
        &aggregate_statement(&table, &query, "a").unwrap(),
    );
    let groups = json!(["title", "hours", "count", "note"]);
    assert_eq!(
        code(aggregate(
            &table,
            json!({"groupBy": groups, "metrics": metric})
        )),
        ErrorCode::ResourceLimit
    );

    let metrics = |n: usize| {
        Value::Array(
            (0..n)
                .map(|i| json!({"as": format!("m{i}"), "max": "count"}))
                .collect(),
        )
    };
    let query = aggregate(&table, json!({"metrics": metrics(10)})).unwrap();
    assert_eq!(
        run(
            &connection,
            &aggregate_statement(&table, &query, "a").unwrap()
        )
        .len(),
        1
    );
    assert_eq!(
        code(aggregate(&table, json!({"metrics": metrics(11)}))),
        ErrorCode::ResourceLimit
    );
    assert_eq!(
        code(aggregate(&table, json!({"metrics": metrics(0)}))),
        ErrorCode::InputInvalid
    );
    assert_eq!(code(aggregate(&table, json!({}))), ErrorCode::InputInvalid);

    let mut values: Map<String, Value> = (0..49).map(|i| (format!("c{i}"), json!(i))).collect();
    values.insert("id".to_owned(), json!("row-1"));
    let row = insert(&connection, &wide_table, "a", Value::Object(values.clone()));
    assert_eq!(row[VERSION_COLUMN], 1);
    values.insert("c49".to_owned(), json!(49));
    assert_eq!(
        code(create_statement(&wide_table, &values, "a")),
        ErrorCode::ResourceLimit
    );
    assert_eq!(
        code(create_statement(&wide_table, &Map::new(), "a")),
        ErrorCode::InputInvalid
    );
    let changes: Map<String, Value> = (0..50).map(|i| (format!("c{i}"), json!(i))).collect();
    let statement = update_statement(&wide_table, &json!("row-1"), &changes, 1, "a").unwrap();
    assert_eq!(run(&connection, &statement)[0]["c49"], 49);
    let mut changes = changes;
    changes.insert("c0x".to_owned(), json!(0));
    assert_eq!(
        code(update_statement(
            &wide_table,
            &json!("row-1"),
            &changes,
            2,
            "a"
        )),
        ErrorCode::ResourceLimit
    );

    let pattern = "p".repeat(MAX_PATTERN_CHARS);
    assert!(
        list(
            &table,
            json!({"where": [clause("title", "contains", json!(pattern))]})
        )
        .is_ok()
    );
    let pattern = "p".repeat(MAX_PATTERN_CHARS + 1);
    assert_eq!(
        code(list(
            &table,
            json!({"where": [clause("title", "starts-with", json!(pattern))]})
        )),
        ErrorCode::ResourceLimit
    );
}

#[test]
fn d1_d2_d3_only_exact_declared_names_resolve() {
    let table = items();
    let names = [
        "title\" OR 1=1--",
        "title)--",
        "[title]",
        "`title`",
        "rowid",
        "oid",
        "_rowid_",
        "main.items",
        "items.title",
        "temp.t",
        "sqlite_schema",
        "sqlite_master",
        "pragma_table_info",
        "TITLE",
        "title ",
        " title",
        "ti\u{200b}tle",
        "ｔｉｔｌｅ",
        "tıtle",
        "",
        "*",
        "_sasha_version ",
        "_SASHA_VERSION",
    ];
    for name in names {
        let cases = [
                list(&table, json!({"where": [clause(name, "eq", json!(1))]})).map(drop),
                list(&table, json!({"orderBy": [{"field": name}]})).map(drop),
                list(&table, json!({"select": [name]})).map(drop),
                aggregate(&table, json!({"groupBy": [name], "metrics": [{"as": "n", "count": "id"}]})).map(drop),
                aggregate(&table, json!({"metrics": [{"as": "n", "count": name}]})).map(drop),
                parse("create", &table, &json!({"values": {name: 1}, "idempotencyKey": "k"}).to_string()).map(drop),
                parse("update", &table, &json!({"id": 1, "changes": {name: 1}, "expectedVersion": 1, "idempotencyKey": "k"}).to_string()).map(drop),
            ];
        for result in cases {
            let error = result.expect_err(name);
            assert_eq!(error.code, ErrorCode::FieldUndeclared, "{name:?}");
            assert!(
                error.message.contains("is not a declared column"),
                "{}",
                error.message
            );
        }
    }
    // A look-alike is shown escaped, so the reader sees what was sent.
    let error = list(&table, json!({"select": ["ti\u{200b}tle"]})).unwrap_err();
    assert!(error.message.contains("\\u{200b}"), "{}", error.message);
}

#[test]
fn d4_operator_and_value_injection_is_refused() {
    let table = items();
    for operator in [
        "= 1 OR 1=1",
        "glob",
        "regexp",
        "match",
        "like",
        "EQ",
        "is",
        "",
    ] {
        let query = json!({"where": [clause("title", operator, json!("x"))]});
        assert_eq!(
            code(list(&table, query)),
            ErrorCode::InputInvalid,
            "{operator}"
        );
    }
    for value in [json!({"$ne": null}), json!([1]), json!([])] {
        for operator in ["eq", "neq", "lt", "contains"] {
            let query = json!({"where": [clause("title", operator, value.clone())]});
            assert_eq!(
                code(list(&table, query)),
                ErrorCode::InputInvalid,
                "{operator} {value}"
            );
        }
    }
    for raw in [
        "NaN",
        "Infinity",
        "1e309",
        "9223372036854775808",
        "-9223372036854775809",
    ] {
        let request =
            format!(r#"{{"where": [{{"field": "count", "operator": "eq", "value": {raw}}}]}}"#);
        assert_eq!(
            code(parse("list", &table, &request)),
            ErrorCode::InputInvalid,
            "{raw}"
        );
    }
    assert!(
        list(
            &table,
            json!({"where": [clause("count", "eq", json!(i64::MAX))]})
        )
        .is_ok()
    );
    // A REAL column takes any finite number; only a column that is not
    // REAL refuses one beyond the integer range, and says so.
    assert!(
        list(
            &table,
            json!({"where": [clause("hours", "lt", json!(1e308))]})
        )
        .is_ok()
    );
    let create = |values: Value| {
        parse(
            "create",
            &table,
            &json!({"values": values, "idempotencyKey": "k-1"}).to_string(),
        )
    };
    assert!(create(json!({"title": "big", "hours": 1e308})).is_ok());
    let refused = create(json!({"title": "big", "count": 1e308})).unwrap_err();
    assert_eq!(refused.code, ErrorCode::InputInvalid);
    assert!(
        refused.message.contains("the column is not REAL"),
        "{}",
        refused.message
    );
    assert_eq!(
        code(list(
            &table,
            json!({"where": [clause("count", "lt", json!(null))]})
        )),
        ErrorCode::InputInvalid
    );
    assert_eq!(
        code(list(
            &table,
            json!({"where": [clause("count", "in", json!([1, null]))]})
        )),
        ErrorCode::InputInvalid
    );
    assert_eq!(
        code(list(
            &table,
            json!({"where": [clause("count", "in", json!([[1]]))]})
        )),
        ErrorCode::InputInvalid
    );
    assert_eq!(
        code(list(
            &table,
            json!({"where": [clause("title", "contains", json!(5))]})
        )),
        ErrorCode::InputInvalid
    );
    assert_eq!(
        code(list(
            &table,
            json!({"where": [{"field": "title", "operator": "eq"}]})
        )),
        ErrorCode::InputInvalid
    );

    // The classic payload is stored and matched as plain text.
    let connection = database(&[&table]);
    let payload = "');DROP TABLE items;--";
    insert(&connection, &table, "alice", json!({"title": payload}));
    for (operator, value) in [
        ("eq", payload),
        ("contains", "DROP TABLE"),
        ("starts-with", "');"),
    ] {
        let (rows, _) = list_rows(
            &connection,
            &table,
            json!({"where": [clause("title", operator, json!(value))]}),
            "alice",
        );
        assert_eq!(titles(&rows), vec![payload]);
    }
}

#[test]
fn d5_like_patterns_match_literally() {
    let table = items();
    let connection = database(&[&table]);
    for title in ["a%b", "a_b", "axb", "a\\b", "%x", "_x"] {
        insert(&connection, &table, "alice", json!({"title": title}));
    }
    let cases = [
        ("contains", "%", vec!["%x", "a%b"]),
        ("contains", "_", vec!["_x", "a_b"]),
        ("contains", "\\", vec!["a\\b"]),
        ("contains", "a%b", vec!["a%b"]),
        ("contains", "a_b", vec!["a_b"]),
        ("contains", "x", vec!["%x", "_x", "axb"]),
        ("starts-with", "_", vec!["_x"]),
        ("starts-with", "%", vec!["%x"]),
        ("starts-with", "a\\", vec!["a\\b"]),
        ("starts-with", "a_", vec!["a_b"]),
        (
            "contains",
            "",
            vec!["%x", "_x", "a%b", "a\\b", "a_b", "axb"],
        ),
    ];
    for (operator, pattern, expected) in cases {
        let (rows, _) = list_rows(
            &connection,
            &table,
            json!({"where": [clause("title", operator, json!(pattern))], "orderBy": [{"field": "title"}]}),
            "alice",
        );
        assert_eq!(titles(&rows), expected, "{operator} {pattern:?}");
    }
}

#[test]
fn d7_owner_field_cannot_be_filtered_sorted_grouped_or_aggregated() {
    let table = items();
    let refused = [
        list(
            &table,
            json!({"where": [clause("created_by", "neq", json!("alice"))]}),
        )
        .map(drop),
        list(
            &table,
            json!({"where": [clause("created_by", "eq", json!(null))]}),
        )
        .map(drop),
        list(&table, json!({"orderBy": [{"field": "created_by"}]})).map(drop),
        aggregate(
            &table,
            json!({"groupBy": ["created_by"], "metrics": [{"as": "n", "count": "id"}]}),
        )
        .map(drop),
        aggregate(
            &table,
            json!({"metrics": [{"as": "n", "countDistinct": "created_by"}]}),
        )
        .map(drop),
    ];
    for result in refused {
        let error = result.unwrap_err();
        assert_eq!(error.code, ErrorCode::InputInvalid);
        assert!(
            error.message.contains("created_by is the owner field"),
            "{}",
            error.message
        );
    }
    // And the counts a caller can ask for are only its own.
    let (table, connection) = seeded();
    let query = aggregate(&table, json!({"groupBy": ["title"], "metrics": [{"as": "n", "count": "id"}, {"as": "total", "sum": "hours"}]})).unwrap();
    let statement = aggregate_statement(&table, &query, "alice").unwrap();
    assert_eq!(
        statement.sql,
        "SELECT \"title\", COUNT(\"id\"), SUM(\"hours\") FROM \"items\" WHERE \"created_by\" = ? GROUP BY \"title\" ORDER BY \"title\" LIMIT ?"
    );
    let groups = run(&connection, &statement);
    assert_eq!(
        groups[0],
        json!({"title": "apple", "n": 1, "total": 1.5})
            .as_object()
            .unwrap()
            .clone()
    );
    assert_eq!(groups.len(), 3);
}

#[test]
fn d8_another_owners_row_is_indistinguishable_from_a_missing_one() {
    let (table, connection) = seeded();
    let bob_row = 4;
    for id in [
        json!(bob_row),
        json!(999),
        json!(-1),
        json!("1 OR 1=1"),
        json!("4"),
    ] {
        assert!(
            run(&connection, &get_statement(&table, &id, "alice").unwrap()).is_empty(),
            "{id}"
        );
        let changes = json!({"title": "stolen"}).as_object().unwrap().clone();
        assert!(
            run(
                &connection,
                &update_statement(&table, &id, &changes, 1, "alice").unwrap()
            )
            .is_empty()
        );
        assert!(
            run(
                &connection,
                &delete_statement(&table, &id, 1, "alice").unwrap()
            )
            .is_empty()
        );
    }
    let row = run(
        &connection,
        &get_statement(&table, &json!(bob_row), "bob").unwrap(),
    );
    assert_eq!(row[0]["title"], "apple");
    assert_eq!(row[0][VERSION_COLUMN], 1);
    // A string id on an INTEGER key follows affinity: "1" is row 1.
    assert_eq!(
        run(
            &connection,
            &get_statement(&table, &json!("1"), "alice").unwrap()
        )
        .len(),
        1
    );
    for id in [
        json!(null),
        json!(true),
        json!(1.5),
        json!([1]),
        json!({"$gt": 0}),
    ] {
        assert_eq!(
            code(get_statement(&table, &id, "alice")),
            ErrorCode::InputInvalid,
            "{id}"
        );
    }
}

#[test]
fn d9_mass_assignment_is_refused() {
    let table = items();
    for (field, expected) in [
        ("created_by", ErrorCode::InputInvalid),
        ("id", ErrorCode::InputInvalid),
        (VERSION_COLUMN, ErrorCode::InputInvalid),
        ("version", ErrorCode::FieldUndeclared),
        ("created_at", ErrorCode::FieldUndeclared),
    ] {
        let values = json!({"title": "t", field: "x"})
            .as_object()
            .unwrap()
            .clone();
        assert_eq!(
            code(create_statement(&table, &values, "alice")),
            expected,
            "{field}"
        );
        assert_eq!(
            code(update_statement(&table, &json!(1), &values, 1, "alice")),
            expected,
            "{field}"
        );
    }
    // A TEXT id must be given on create, and can never be changed.
    let wide_table = wide();
    let values = json!({"c0": 1}).as_object().unwrap().clone();
    assert_eq!(
        code(create_statement(&wide_table, &values, "a")),
        ErrorCode::InputInvalid
    );
    let values = json!({"id": 7, "c0": 1}).as_object().unwrap().clone();
    assert_eq!(
        code(create_statement(&wide_table, &values, "a")),
        ErrorCode::InputInvalid
    );
    let values = json!({"id": "k", "c0": 1}).as_object().unwrap().clone();
    assert!(create_statement(&wide_table, &values, "a").is_ok());
    assert_eq!(
        code(update_statement(&wide_table, &json!("k"), &values, 1, "a")),
        ErrorCode::InputInvalid
    );
    // A required column must be given.
    let values = json!({"note": "n"}).as_object().unwrap().clone();
    assert_eq!(
        code(create_statement(&table, &values, "alice")),
        ErrorCode::InputInvalid
    );
    // Create stamps the owner and version 1, whatever the caller hoped.
    let connection = database(&[&table]);
    let row = insert(&connection, &table, "alice", json!({"title": "t"}));
    assert_eq!(row["created_by"], "alice");
    assert_eq!(row[VERSION_COLUMN], 1);
}

#[test]
fn versions_gate_update_and_delete() {
    let (table, connection) = seeded();
    let changes = json!({"title": "apricot", "hours": null, "count": true})
        .as_object()
        .unwrap()
        .clone();
    assert!(
        run(
            &connection,
            &update_statement(&table, &json!(1), &changes, 2, "alice").unwrap()
        )
        .is_empty()
    );
    let row = run(
        &connection,
        &update_statement(&table, &json!(1), &changes, 1, "alice").unwrap(),
    );
    assert_eq!(row[0]["title"], "apricot");
    assert_eq!(row[0]["count"], 1);
    assert_eq!(row[0]["hours"], Value::Null);
    assert_eq!(row[0][VERSION_COLUMN], 2);
    assert!(
        run(
            &connection,
            &delete_statement(&table, &json!(1), 1, "alice").unwrap()
        )
        .is_empty()
    );
    let deleted = run(
        &connection,
        &delete_statement(&table, &json!(1), 2, "alice").unwrap(),
    );
    assert_eq!(deleted[0]["title"], "apricot");
    assert!(
        run(
            &connection,
            &get_statement(&table, &json!(1), "alice").unwrap()
        )
        .is_empty()
    );
    for version in [0, -1] {
        assert_eq!(
            code(delete_statement(&table, &json!(1), version, "alice")),
            ErrorCode::InputInvalid
        );
        assert_eq!(
            code(update_statement(
                &table,
                &json!(1),
                &changes,
                version,
                "alice"
            )),
            ErrorCode::InputInvalid
        );
    }
    let missing = json!({"id": 1, "changes": {"title": "x"}, "idempotencyKey": "k"}).to_string();
    assert_eq!(
        code(parse("update", &table, &missing)),
        ErrorCode::InputInvalid
    );
    let missing = json!({"id": 1, "idempotencyKey": "k"}).to_string();
    assert_eq!(
        code(parse("delete", &table, &missing)),
        ErrorCode::InputInvalid
    );
    let stale = json!({"id": 1, "expectedVersion": 1.5, "idempotencyKey": "k"}).to_string();
    assert_eq!(
        code(parse("delete", &table, &stale)),
        ErrorCode::InputInvalid
    );
}

#[test]
fn requests_parse_and_unknown_keys_are_refused_anywhere() {
    let table = items();
    let request = json!({"id": 3, "changes": {"title": "x"}, "expectedVersion": 2, "idempotencyKey": "key-1"});
    assert_eq!(
        parse("update", &table, &request.to_string()).unwrap(),
        Request::Update {
            id: json!(3),
            changes: json!({"title": "x"}).as_object().unwrap().clone(),
            expected_version: 2,
            idempotency_key: "key-1".to_owned(),
        }
    );
    assert!(matches!(
        parse("get", &table, r#"{"id": 3}"#).unwrap(),
        Request::Get { .. }
    ));
    assert!(matches!(
        parse(
            "create",
            &table,
            r#"{"values": {"title": "t"}, "idempotencyKey": "k"}"#
        )
        .unwrap(),
        Request::Create { .. }
    ));
    assert!(matches!(
        parse(
            "delete",
            &table,
            r#"{"id": 3, "expectedVersion": 1, "idempotencyKey": "k"}"#
        )
        .unwrap(),
        Request::Delete { .. }
    ));
    let refused = [
        ("list", json!({"offset": -5})),
        (
            "list",
            json!({"where": [{"field": "title", "operator": "eq", "value": 1, "or": true}]}),
        ),
        (
            "list",
            json!({"orderBy": [{"field": "title", "nulls": "first"}]}),
        ),
        (
            "list",
            json!({"orderBy": [{"field": "title", "direction": "up"}]}),
        ),
        ("get", json!({"id": 1, "table": "other"})),
        (
            "aggregate",
            json!({"metrics": [{"as": "n", "count": "id", "filter": 1}]}),
        ),
        (
            "aggregate",
            json!({"metrics": [{"as": "n", "count": "id"}], "having": 1}),
        ),
        (
            "create",
            json!({"values": {"title": "t"}, "idempotencyKey": "k", "upsert": true}),
        ),
        ("create", json!({"values": {"title": "t"}})),
        (
            "create",
            json!({"values": {"title": "t"}, "idempotencyKey": ""}),
        ),
        ("create", json!({"values": [], "idempotencyKey": "k"})),
        (
            "delete",
            json!({"id": 1, "expectedVersion": 1, "idempotencyKey": "k", "cascade": true}),
        ),
        ("drop", json!({})),
        ("list", json!([])),
    ];
    for (operation, request) in refused {
        assert_eq!(
            code(parse(operation, &table, &request.to_string())),
            ErrorCode::InputInvalid,
            "{operation} {request}"
        );
    }
    assert_eq!(code(parse("list", &table, "{")), ErrorCode::InputInvalid);
}

#[test]
fn d10_cursors_page_through_everything_and_are_bound_to_actor_and_query() {
    let table = items();
    let connection = database(&[&table]);
    // Ties and NULLs in the sort keys, for both directions.
    for i in 0..23 {
        let count = if i % 4 == 0 {
            Value::Null
        } else {
            json!(i % 3)
        };
        let note = if i % 5 == 0 {
            Value::Null
        } else {
            json!(format!("n{}", i % 2))
        };
        insert(
            &connection,
            &table,
            "alice",
            json!({"title": format!("t{i}"), "count": count, "note": note}),
        );
        insert(&connection, &table, "bob", json!({"title": "b"}));
    }
    for order in [
        json!([]),
        json!([{"field": "count"}]),
        json!([{"field": "count", "direction": "desc"}]),
        json!([{"field": "note", "direction": "desc"}, {"field": "count"}]),
        json!([{"field": "note"}, {"field": "count", "direction": "desc"}, {"field": "id", "direction": "desc"}]),
    ] {
        let (all, next) = list_rows(
            &connection,
            &table,
            json!({"orderBy": order, "limit": 200}),
            "alice",
        );
        assert!(next.is_none());
        assert_eq!(all.len(), 23);
        let mut paged = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut query = json!({"orderBy": order, "limit": 4, "select": ["title"]});
            if let Some(cursor) = &cursor {
                query["cursor"] = json!(cursor);
            }
            let (rows, next) = list_rows(&connection, &table, query, "alice");
            assert!(rows.len() <= 4);
            paged.extend(rows.into_iter().map(|r| r["id"].clone()));
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let expected: Vec<Value> = all.iter().map(|r| r["id"].clone()).collect();
        assert_eq!(paged, expected, "{order}");
    }

    let query = json!({"orderBy": [{"field": "title"}], "limit": 2});
    let (_, cursor) = list_rows(&connection, &table, query.clone(), "alice");
    let cursor = cursor.unwrap();
    let with = |query: &Value, cursor: &str| {
        let mut query = list(&table, query.clone()).unwrap();
        query.cursor = Some(cursor.to_owned());
        query
    };
    // The same query with another page size is still the same query.
    let mut resized = query.clone();
    resized["limit"] = json!(7);
    assert!(list_statement(&table, &with(&resized, &cursor), "alice", SECRET).is_ok());
    // Another actor, query, table or secret: refused.
    assert_eq!(
        code(list_statement(
            &table,
            &with(&query, &cursor),
            "bob",
            SECRET
        )),
        ErrorCode::InputInvalid
    );
    let other = json!({"orderBy": [{"field": "title", "direction": "desc"}], "limit": 2});
    assert_eq!(
        code(list_statement(
            &table,
            &with(&other, &cursor),
            "alice",
            SECRET
        )),
        ErrorCode::InputInvalid
    );
    let other =
        json!({"orderBy": [{"field": "title"}], "where": [clause("count", "gt", json!(0))]});
    assert_eq!(
        code(list_statement(
            &table,
            &with(&other, &cursor),
            "alice",
            SECRET
        )),
        ErrorCode::InputInvalid
    );
    assert_eq!(
        code(list_statement(
            &table,
            &with(&query, &cursor),
            "alice",
            b"another-secret-of-16+"
        )),
        ErrorCode::InputInvalid
    );
    let mut renamed = table.clone();
    renamed.name = "other".to_owned();
    assert_eq!(
        code(list_statement(
            &renamed,
            &with(&query, &cursor),
            "alice",
            SECRET
        )),
        ErrorCode::InputInvalid
    );
    // Tampering with either half, or garbage.
    let (payload, mac) = cursor.split_once('.').unwrap();
    let forged_payload = URL_SAFE_NO_PAD.encode(r#"[["t",""],["i",0]]"#);
    let mut flipped = URL_SAFE_NO_PAD.decode(mac).unwrap();
    flipped[0] ^= 1;
    for bad in [
        format!("{forged_payload}.{mac}"),
        format!("{payload}.{}", URL_SAFE_NO_PAD.encode(flipped)),
        format!("{payload}."),
        payload.to_owned(),
        "not a cursor".to_owned(),
        String::new(),
        "x".repeat(MAX_CURSOR_BYTES + 1),
    ] {
        assert_eq!(
            code(list_statement(&table, &with(&query, &bad), "alice", SECRET)),
            ErrorCode::InputInvalid,
            "{bad}"
        );
    }
    assert_eq!(
        code(list_statement(
            &table,
            &list(&table, json!({})).unwrap(),
            "alice",
            b"short"
        )),
        ErrorCode::Internal
    );
}

#[test]
fn d15_aggregate_injection_is_refused() {
    let table = items();
    let cases = [
        json!({"metrics": [{"as": "n", "count(*)),(select": "id"}]}),
        json!({"metrics": [{"as": "n", "COUNT": "id"}]}),
        json!({"metrics": [{"as": "n", "count": "id", "sum": "hours"}]}),
        json!({"metrics": [{"as": "n"}]}),
        json!({"metrics": [{"count": "id"}]}),
        json!({"metrics": [{"as": "n", "sum": "title"}]}),
        json!({"metrics": [{"as": "n", "avg": "note"}]}),
        json!({"metrics": [{"as": "n", "count": {"expr": "1"}}]}),
        json!({"groupBy": [{"expr": "title || 1"}], "metrics": [{"as": "n", "count": "id"}]}),
        json!({"groupBy": "title", "metrics": [{"as": "n", "count": "id"}]}),
        json!({"groupBy": ["title"], "metrics": [{"as": "title", "count": "id"}]}),
        json!({"groupBy": ["title", "title"], "metrics": [{"as": "n", "count": "id"}]}),
        json!({"metrics": [{"as": "n", "count": "id"}, {"as": "n", "max": "count"}]}),
        json!({"metrics": [{"as": "n) FROM x; --", "count": "id"}]}),
        json!({"metrics": [{"as": "1n", "count": "id"}]}),
        json!({"metrics": [{"as": "", "count": "id"}]}),
    ];
    for query in cases {
        assert_eq!(
            code(aggregate(&table, query.clone())),
            ErrorCode::InputInvalid,
            "{query}"
        );
    }
    // Every operation on its permitted columns, ungrouped: one row.
    let (table, connection) = seeded();
    let query = aggregate(&table, json!({"where": [clause("count", "gte", json!(10))], "metrics": [
            {"as": "total", "sum": "count"}, {"as": "mean", "avg": "hours"}, {"as": "low", "min": "title"},
            {"as": "high", "max": "title"}, {"as": "n", "count": "hours"}, {"as": "kinds", "countDistinct": "count"},
            {"as": "v", "sum": VERSION_COLUMN},
        ]})).unwrap();
    let rows = run(
        &connection,
        &aggregate_statement(&table, &query, "alice").unwrap(),
    );
    assert_eq!(
        Value::Object(rows[0].clone()),
        json!({"total": 30, "mean": 1.75, "low": "apple", "high": "banana", "n": 2, "kinds": 2, "v": 2})
    );
    let query = aggregate(&table, json!({"where": [clause("title", "eq", json!("none"))], "metrics": [{"as": "n", "count": "id"}]})).unwrap();
    assert_eq!(
        run(
            &connection,
            &aggregate_statement(&table, &query, "alice").unwrap()
        )[0]["n"],
        0
    );
    assert!(check_group_count(MAX_GROUPS).is_ok());
    assert_eq!(
        code(check_group_count(MAX_GROUPS + 1)),
        ErrorCode::ResourceLimit
    );
}

#[test]
fn d16_null_and_type_semantics_are_fixed() {
    let (table, connection) = seeded();
    let rows = |condition: Value| {
        let (rows, _) = list_rows(
            &connection,
            &table,
            json!({"where": [condition], "orderBy": [{"field": "title"}]}),
            "alice",
        );
        titles(&rows)
    };
    assert_eq!(rows(clause("note", "eq", json!(null))), vec!["apple"]);
    // neq is the complement of eq: the NULL row is "not x".
    assert_eq!(
        rows(clause("note", "neq", json!("x"))),
        vec!["apple", "cherry"]
    );
    assert_eq!(rows(clause("note", "eq", json!("x"))), vec!["banana"]);
    // Ordering comparisons and in never match NULL.
    assert_eq!(
        rows(clause("count", "lt", json!(100))),
        vec!["apple", "banana"]
    );
    assert_eq!(
        rows(clause("count", "in", json!([10, 20]))),
        vec!["apple", "banana"]
    );
    assert!(rows(clause("note", "contains", json!(""))).len() == 2);
    // Affinity: the string "10" on an INTEGER column is the number 10.
    assert_eq!(rows(clause("count", "eq", json!("10"))), vec!["apple"]);
    assert_eq!(rows(clause("count", "gt", json!("10"))), vec!["banana"]);
    assert_eq!(
        rows(clause("count", "neq", json!("10"))),
        vec!["banana", "cherry"]
    );
    // LIKE reads a number as its text.
    assert_eq!(
        rows(clause("count", "contains", json!("0"))),
        vec!["apple", "banana"]
    );
    // Booleans are 0/1; LIKE ignores ASCII case.
    assert!(rows(clause("count", "eq", json!(true))).is_empty());
    assert_eq!(
        rows(clause("title", "starts-with", json!("APP"))),
        vec!["apple"]
    );
    // NULL sorts first ascending.
    let (sorted, _) = list_rows(
        &connection,
        &table,
        json!({"orderBy": [{"field": "count"}]}),
        "alice",
    );
    assert_eq!(titles(&sorted), vec!["cherry", "apple", "banana"]);
}

#[test]
fn owner_term_sits_outside_the_user_predicate() {
    let table = items();
    let query = list(
        &table,
        json!({"where": [clause("title", "eq", json!("a")), clause("count", "in", json!([1, 2]))]}),
    )
    .unwrap();
    let (statement, _) = list_statement(&table, &query, "alice", SECRET).unwrap();
    assert_eq!(
        statement.sql,
        "SELECT \"id\", \"title\", \"hours\", \"count\", \"note\", \"created_by\", \"_sasha_version\" FROM \"items\" WHERE (\"title\" = ? AND \"count\" IN (?, ?)) AND \"created_by\" = ? ORDER BY \"id\" ASC LIMIT ?"
    );
    assert_eq!(statement.params.last(), Some(&SqlValue::Integer(51)));
    assert_eq!(statement.params[3], SqlValue::Text("alice".to_owned()));
    let statement = update_statement(
        &table,
        &json!(1),
        json!({"title": "t"}).as_object().unwrap(),
        3,
        "alice",
    )
    .unwrap();
    assert_eq!(
        statement.sql,
        "UPDATE \"items\" SET \"title\" = ?, \"_sasha_version\" = \"_sasha_version\" + 1 WHERE \"id\" = ? AND \"_sasha_version\" = ? AND \"created_by\" = ? RETURNING \"id\", \"title\", \"hours\", \"count\", \"note\", \"created_by\", \"_sasha_version\""
    );
    // An owner table that lost its owner field builds nothing.
    let mut broken = table.clone();
    broken.owner_field = None;
    assert_eq!(
        code(get_statement(&broken, &json!(1), "alice")),
        ErrorCode::Internal
    );
    broken.owner_field = Some("nobody".to_owned());
    assert_eq!(
        code(get_statement(&broken, &json!(1), "alice")),
        ErrorCode::Internal
    );
}

#[test]
fn table_spec_follows_the_declaration() {
    let table = Table {
        name: "entries".to_owned(),
        columns: items().columns,
        ..Default::default()
    };
    let owner = TableDeclaration {
        access: Access::Owner,
        owner_field: Some("created_by".to_owned()),
        write: Default::default(),
        managers_read_all: false,
    };
    let spec = TableSpec::new(&table, &owner);
    assert_eq!(spec.owner_field.as_deref(), Some("created_by"));
    assert_eq!(spec.name, "entries");
    let shared = TableDeclaration {
        access: Access::Shared,
        owner_field: None,
        write: Default::default(),
        managers_read_all: false,
    };
    assert_eq!(TableSpec::new(&table, &shared).owner_field, None);
}

#[test]
fn hmac_matches_rfc_4231_and_request_hash_is_canonical() {
    let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
    assert_eq!(
        hex::encode(mac),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    let long_key = [0xaa_u8; 131];
    let mac = hmac_sha256(
        &long_key,
        b"Test Using Larger Than Block-Size Key - Hash Key First",
    );
    assert_eq!(
        hex::encode(mac),
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    );
    let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": "é"}}"#).unwrap();
    let b: Value = serde_json::from_str(r#"{"a": {"x": "é", "y": [1, 2]}, "b": 1}"#).unwrap();
    assert_eq!(canonical_json(&a), r#"{"a":{"x":"é","y":[1,2]},"b":1}"#);
    assert_eq!(
        request_hash("create", "items", &a),
        request_hash("create", "items", &b)
    );
    assert_ne!(
        request_hash("create", "items", &a),
        request_hash("update", "items", &a)
    );
    assert_ne!(
        request_hash("create", "items", &a),
        request_hash("create", "other", &a)
    );
    assert_eq!(request_hash("create", "items", &a).len(), 64);
}

// -- owner-scope fuzzing (catalogue D6) ---------------------------------

fn value_strategy() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        Just(json!("")),
        Just(json!("alice")),
        Just(json!("bob")),
        Just(json!("%")),
        Just(json!("_")),
        Just(json!("' OR 1=1 --")),
        "[a-c%_]{0,3}".prop_map(Value::from),
        (-3i64..30).prop_map(Value::from),
        (-3.0f64..30.0).prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
    ]
}

const OPERATORS: [&str; 9] = [
    "eq",
    "neq",
    "lt",
    "lte",
    "gt",
    "gte",
    "in",
    "contains",
    "starts-with",
];

fn condition_strategy() -> impl Strategy<Value = Value> {
    (
        0..FIELDS.len(),
        0..OPERATORS.len(),
        value_strategy(),
        proptest::collection::vec(value_strategy(), 0..4),
    )
        .prop_map(|(field, operator, value, values)| {
            let value = if OPERATORS[operator] == "in" {
                Value::Array(values)
            } else {
                value
            };
            clause(FIELDS[field], OPERATORS[operator], value)
        })
}

fn order_strategy() -> impl Strategy<Value = Value> {
    proptest::collection::vec((0..FIELDS.len(), any::<bool>()), 0..4).prop_map(|keys| {
            Value::Array(
                keys.into_iter()
                    .map(|(f, d)| json!({"field": FIELDS[f], "direction": if d { "desc" } else { "asc" }}))
                    .collect(),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn requests_as_alice_never_see_bobs_rows(
        seed in proptest::collection::vec(
            (prop_oneof![Just("alice".to_owned()), Just("bob".to_owned())],
             "[a-c%_]{0,3}".prop_map(Value::from),
             prop_oneof![Just(Value::Null), (-3i64..30).prop_map(Value::from)],
             prop_oneof![Just(Value::Null), Just(json!("")), "[a-c%_]{0,3}".prop_map(Value::from)]),
            1..16),
        conditions in proptest::collection::vec(condition_strategy(), 0..4),
        order in order_strategy(),
        limit in 1u32..6,
        group in proptest::collection::vec(0..FIELDS.len(), 0..3),
        probe_id in 0i64..20,
    ) {
        let model = Model::seeded(&seed);
        let query = json!({"where": conditions, "orderBy": order, "limit": limit, "select": ["title", "created_by"]});
        prop_assert_eq!(model.check("list", &query.to_string()), Ok(()));
        let mut groups: Vec<&str> = group.iter().map(|g| FIELDS[*g]).collect();
        groups.dedup();
        let metrics = json!([{"as": "n", "count": "id"}, {"as": "total", "sum": "count"}, {"as": "top", "max": "title"}]);
        let totals = json!({"where": conditions_of(&query), "groupBy": groups, "metrics": metrics});
        prop_assert_eq!(model.check("aggregate", &totals.to_string()), Ok(()));
        prop_assert_eq!(model.check("get", &json!({"id": probe_id}).to_string()), Ok(()));
    }
}

fn conditions_of(query: &Value) -> Value {
    query["where"].clone()
}

#[test]
fn a_request_is_bounded_before_it_is_parsed() {
    let table = items();
    let values = vec![json!(1); 20_000];
    let request = json!({"where": [clause("count", "in", json!(values))]}).to_string();
    let refused = parse("list", &table, &request).unwrap_err();
    assert_eq!(refused.code, ErrorCode::ResourceLimit);
    assert!(
        refused.message.contains("JSON values"),
        "{}",
        refused.message
    );
    let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
    assert_eq!(
        parse("list", &table, &format!(r#"{{"where": {deep}}}"#))
            .unwrap_err()
            .code,
        ErrorCode::ResourceLimit
    );
}
