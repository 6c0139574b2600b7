//! MCP tool arguments from arbitrary JSON, through the gateway's own steps for
//! an action call (`mcp_gateway::calls`): the action's `inputSchema` check,
//! then the data request its compiled operation makes of the input, then the
//! result shaped to its `resultSchema`. The actions are the Time Sheet
//! app's (an aggregate with a week filter, a create). Every input must be
//! refused as `APP_INPUT_INVALID` or become a request on the action's own
//! table with the operation it declares, never a panic; a closed result
//! schema keeps no key it does not declare.
//!
//! Must never reach a service: nothing here opens a connection.

#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mcp_gateway::calls::{Validators, action_request, project};
use sasha_contract::actions::CompiledAction;
use sasha_proto::ErrorCode;
use serde_json::Value;

/// The Time Sheet app's compiled actions, validated once.
fn actions() -> &'static [CompiledAction] {
    static ACTIONS: OnceLock<Vec<CompiledAction>> = OnceLock::new();
    ACTIONS.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../apps/time-sheet-entry");
        let validation = sasha_package::validate::validate_dir(&dir);
        let package = validation.package.expect("the Time Sheet app is valid");
        assert!(!package.actions.is_empty());
        package.actions
    })
}

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

fuzz_target!(|input: &[u8]| {
    let Ok(arguments) = serde_json::from_slice::<Value>(input) else {
        return;
    };
    static VALIDATORS: OnceLock<Validators> = OnceLock::new();
    let validators = VALIDATORS.get_or_init(Validators::default);
    for action in actions() {
        if let Value::Object(map) = &arguments
            && validators
                .validate(&action.input_schema, &arguments, "arguments")
                .is_ok()
        {
            match action_request(action, map, "fuzz-key") {
                Ok((kind, table, request)) => {
                    assert_eq!(kind, action.operation.kind());
                    assert_eq!(table, action.operation.table());
                    assert!(request.is_object(), "{request}");
                }
                Err(error) => assert_eq!(error.code, ErrorCode::InputInvalid, "{error:?}"),
            }
        }
        let shaped = project(&action.result_schema, arguments.clone());
        closed_keys_kept(&action.result_schema, &shaped);
    }
});
