//! Every conversion round-trips, and the wire refuses what it cannot mean.

use serde_json::json;

use super::*;

#[test]
fn json_round_trips_losslessly() {
    let value = json!({
        "a": [1, -2, 18446744073709551615u64, 1.5, 24.0, null, true, "x"],
        "b": {"nested": {}},
    });
    let wire = to_json_object(&value);
    let back = json_from_object(&wire);
    assert_eq!(back, value);
    // Integers stay integers and floats stay floats, byte for byte.
    assert_eq!(back.to_string(), value.to_string());
}

fn contract() -> DataContract {
    let mut tables = BTreeMap::new();
    tables.insert(
        "entries".to_owned(),
        TableDeclaration {
            access: Access::Owner,
            owner_field: Some("created_by".to_owned()),
            write: Default::default(),
            managers_read_all: false,
        },
    );
    tables.insert(
        "projects".to_owned(),
        TableDeclaration {
            access: Access::Shared,
            owner_field: None,
            write: Default::default(),
            managers_read_all: false,
        },
    );
    let table = Table {
        name: "entries".to_owned(),
        columns: vec![Column {
            name: "id".to_owned(),
            declared_type: "TEXT".to_owned(),
            not_null: true,
            default_value: Some("'x'".to_owned()),
            primary_key: true,
            generated: false,
        }],
        unique: vec![vec!["a".to_owned(), "b".to_owned()]],
        foreign_keys: vec![ForeignKey {
            columns: vec!["project".to_owned()],
            parent_table: "projects".to_owned(),
            parent_columns: vec![],
            on_update: "NO ACTION".to_owned(),
            on_delete: "RESTRICT".to_owned(),
        }],
        checks: vec![Check {
            name: Some("hours must be between 0 and 24".to_owned()),
            columns: vec!["hours".to_owned()],
            expression: "hours >= 0 AND hours <= 24".to_owned(),
        }],
        checks_unreadable: false,
        strict: true,
        without_rowid: false,
    };
    let mut schema = Schema::default();
    schema.tables.insert("entries".to_owned(), table);
    schema.indexes.insert(
        "entries_by_date".to_owned(),
        Index {
            name: "entries_by_date".to_owned(),
            table: "entries".to_owned(),
            columns: vec!["date".to_owned()],
            unique: false,
            partial: false,
        },
    );
    DataContract {
        schema,
        migrations: vec![Migration {
            file: "migrations/001-initial.sql".to_owned(),
            number: 1,
            sql: "CREATE TABLE entries (id TEXT PRIMARY KEY);".to_owned(),
            checksum: "ab".repeat(32),
        }],
        tables,
        hash: "cd".repeat(32),
    }
}

#[test]
fn the_data_contract_round_trips() {
    let contract = contract();
    let wire = pb::DataContract::from(&contract);
    assert_eq!(DataContract::try_from(&wire).unwrap(), contract);
}

#[test]
fn a_preview_scope_round_trips() {
    let scope = PreviewScope {
        tables: std::collections::BTreeMap::from([
            (
                "entries".to_owned(),
                RowScope::OwnedBy("created_by".to_owned()),
            ),
            ("projects".to_owned(), RowScope::Every),
        ]),
    };
    let wire = pb::PreviewScope::from(&scope);
    assert_eq!(
        wire.tables["entries"].owner_field.as_deref(),
        Some("created_by")
    );
    assert_eq!(wire.tables["projects"].owner_field, None);
    assert_eq!(PreviewScope::from(&wire), scope);
}

#[test]
fn an_unspecified_access_or_a_missing_schema_is_refused() {
    let mut wire = pb::DataContract::from(&contract());
    wire.tables.get_mut("projects").unwrap().access = pb::Access::Unspecified as i32;
    assert_eq!(
        DataContract::try_from(&wire).unwrap_err().code,
        ErrorCode::InputInvalid
    );
    let mut wire = pb::DataContract::from(&contract());
    wire.schema = None;
    assert_eq!(
        DataContract::try_from(&wire).unwrap_err().code,
        ErrorCode::InputInvalid
    );
}

fn actions() -> Vec<CompiledAction> {
    let clause = WhereClause {
        field: "date".to_owned(),
        operator: WhereOperator::WeekOf,
        input: "weekStart".to_owned(),
    };
    let action = |operation| CompiledAction {
        id: "week-totals".to_owned(),
        visibility: vec!["model".to_owned(), "app".to_owned()],
        mcp_name: "app__t__week_totals".to_owned(),
        description: "Totals".to_owned(),
        input_schema: json!({"type": "object", "properties": {"weekStart": {"type": "string", "maxLength": 10}}}),
        result_schema: json!({"type": "object"}),
        operation,
        mutating: false,
    };
    vec![
        action(Operation::Aggregate(AggregateOperation {
            table: "entries".to_owned(),
            filters: vec![clause.clone()],
            group_by: vec!["project".to_owned()],
            metrics: vec![Metric {
                alias: "hours".to_owned(),
                function: MetricFunction::CountDistinct,
                field: "hours".to_owned(),
            }],
        })),
        action(Operation::List(ListOperation {
            table: "entries".to_owned(),
            filters: vec![clause],
            order_by: vec![OrderBy {
                field: "date".to_owned(),
                direction: Direction::Desc,
            }],
            select: vec!["date".to_owned()],
            limit: Some(7),
        })),
        action(Operation::Get(GetOperation {
            table: "entries".to_owned(),
            id_input: "id".to_owned(),
        })),
        action(Operation::Create(CreateOperation {
            table: "entries".to_owned(),
            values: BTreeMap::from([("hours".to_owned(), "hours".to_owned())]),
        })),
    ]
}

#[test]
fn every_operation_of_a_compiled_action_round_trips() {
    for action in actions() {
        let wire = pb::CompiledAction::from(&action);
        assert_eq!(CompiledAction::try_from(&wire).unwrap(), action);
    }
}

#[test]
fn an_action_without_an_operation_or_with_an_unknown_operator_is_refused() {
    let mut wire = pb::CompiledAction::from(&actions()[0]);
    wire.operation = None;
    assert!(CompiledAction::try_from(&wire).is_err());
    let mut wire = pb::CompiledAction::from(&actions()[1]);
    if let Some(pb::compiled_action::Operation::List(list)) = &mut wire.operation {
        list.filters[0].operator = 99;
    }
    assert!(CompiledAction::try_from(&wire).is_err());
}

/// Every word goes to the wire and comes back as itself; an unspecified
/// or unknown number is refused.
fn words_round_trip<T>(all: &[T])
where
    T: Copy + PartialEq + std::fmt::Debug + FromWire + ToWire,
{
    for word in all {
        assert_ne!(word.to_wire(), 0, "{word:?}");
        assert_eq!(T::from_wire(word.to_wire()).unwrap(), *word);
    }
    for number in [0, -1, 99] {
        assert_eq!(
            T::from_wire(number).unwrap_err().code,
            ErrorCode::InputInvalid
        );
    }
}

#[test]
fn the_caller_vocabulary_round_trips_and_unspecified_is_refused() {
    words_round_trip(Role::ALL);
    words_round_trip(Scope::ALL);
    words_round_trip(PrincipalKind::ALL);
    words_round_trip(AppAccess::ALL);
    words_round_trip(CallSource::ALL);
    words_round_trip(Initiator::ALL);
    let scopes = BTreeSet::from([Scope::AppsInvoke, Scope::AppsWrite]);
    assert_eq!(scopes_from_wire(&scopes_to_wire(&scopes)).unwrap(), scopes);
    assert_eq!(
        scopes_from_wire(&[Scope::AppsInvoke.to_wire(), 0])
            .unwrap_err()
            .code,
        ErrorCode::InputInvalid
    );
}
