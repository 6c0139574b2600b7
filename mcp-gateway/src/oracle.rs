//! The model an action call's arguments are checked against, shared by the
//! `actions` fuzz target in `fuzz/` and the property test below: arguments
//! go through the gateway's own steps for an action call (the action's
//! `inputSchema`, then the data request its compiled operation makes of the
//! input, then the result shaped to its `resultSchema`). Every input must be
//! refused as `APP_INPUT_INVALID` or become a request on the action's own
//! table with the operation it declares, and a closed result schema keeps no
//! key it does not declare; anything else panics, naming the input.
//!
//! Must never be part of a service build (only tests and the fuzz crate,
//! through feature `oracle`, compile it) and never reach a service: nothing
//! here opens a connection.

use std::sync::OnceLock;

use sasha_contract::actions::CompiledAction;
use sasha_proto::ErrorCode;
use serde_json::Value;

use crate::calls::{action_request, project};
use crate::schemas::{Part, SchemaKey, Validators};

fn closed_keys_kept(schema: &Value, value: &Value) {
    let (Value::Object(map), Some(properties)) = (value, schema.get("properties")) else {
        return;
    };
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        for key in map.keys() {
            assert!(properties.get(key).is_some(), "kept undeclared {key:?}");
        }
    }
    for (key, item) in map {
        if let Some(inner) = properties.get(key) {
            closed_keys_kept(inner, item);
        }
    }
}

/// The Time Sheet app's compiled actions (a create and a week-of
/// aggregate), validated once: the actions both drivers use.
pub fn time_sheet_actions() -> &'static [CompiledAction] {
    static ACTIONS: OnceLock<Vec<CompiledAction>> = OnceLock::new();
    ACTIONS.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../apps/time-sheet-entry");
        let package = sasha_package::validate::validate_dir(&dir)
            .package
            .expect("the Time Sheet app is valid");
        assert_eq!(package.actions.len(), 2);
        package.actions
    })
}

/// Where a gateway finds an action's compiled input schema (the model's
/// actions are one revision of one app).
fn input_key(action: &CompiledAction) -> SchemaKey<'_> {
    SchemaKey::App {
        app: "time-sheet-entry",
        revision: "oracle",
        tool: &action.mcp_name,
        part: Part::Input,
    }
}

/// Runs `arguments` through every action of `actions` as an action call.
pub fn check_action_arguments(actions: &[CompiledAction], arguments: &Value) {
    // Compiled once per process, as a gateway replica caches them.
    static VALIDATORS: OnceLock<Validators> = OnceLock::new();
    let validators = VALIDATORS.get_or_init(Validators::default);
    for action in actions {
        if arguments.is_object()
            && validators
                .validate(input_key(action), || action.input_schema.clone(), arguments)
                .is_ok()
        {
            match action_request(action, arguments, "oracle-key") {
                Ok((kind, table, request)) => {
                    assert_eq!(kind, action.operation.kind(), "{arguments}");
                    assert_eq!(table, action.operation.table(), "{arguments}");
                    assert!(request.is_object(), "{arguments} made {request}");
                }
                Err(error) => assert_eq!(
                    error.code,
                    ErrorCode::InputInvalid,
                    "{arguments}: {error:?}"
                ),
            }
        }
        let shaped = project(&action.result_schema, arguments.clone());
        closed_keys_kept(&action.result_schema, &shaped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            prop::sample::select(vec![0i64, 1, -1, 24, 25, i64::MAX, i64::MIN])
                .prop_map(Value::from),
            prop::sample::select(vec![0.0f64, 0.5, 23.99, 24.0, 24.01, -1.5, 1e300])
                .prop_map(Value::from),
            prop::sample::select(vec![
                "2026-12-28",
                "2026-02-30",
                "2026-12-31",
                "0000-01-01",
                "9999-12-31",
                "next monday",
                "",
                "a",
                "2026-12-28T00:00:00Z",
            ])
            .prop_map(Value::from),
            "\\PC{0,210}".prop_map(Value::from),
        ]
    }

    fn arguments() -> impl Strategy<Value = Value> {
        let key = prop::sample::select(vec![
            "date",
            "project",
            "hours",
            "note",
            "weekStart",
            "groups",
            "id",
            "values",
            "x",
        ]);
        leaf().prop_recursive(3, 24, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(key.clone(), inner, 0..6).prop_map(
                    |map| Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                ),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn action_arguments_are_refused_or_become_the_declared_request(arguments in arguments()) {
            check_action_arguments(time_sheet_actions(), &arguments);
        }
    }

    /// The model is not vacuous: valid arguments reach both actions'
    /// requests, and a result with extra keys is cut to the declared ones.
    #[test]
    fn the_models_inputs_reach_both_actions() {
        let [log, totals] = time_sheet_actions() else {
            unreachable!()
        };
        let validators = Validators::default();
        let input = json!({"date": "2026-12-28", "project": 1, "hours": 2.5});
        validators
            .validate(input_key(log), || log.input_schema.clone(), &input)
            .unwrap();
        assert!(action_request(log, &input, "k").is_ok());
        let input = json!({"weekStart": "2026-12-28"});
        validators
            .validate(input_key(totals), || totals.input_schema.clone(), &input)
            .unwrap();
        assert!(action_request(totals, &input, "k").is_ok());
        let shaped = project(&totals.result_schema, json!({"groups": [], "extra": 1}));
        assert_eq!(shaped, json!({"groups": []}));
        check_action_arguments(time_sheet_actions(), &input);
    }
}
