//! MCP tool arguments from arbitrary JSON through the gateway's own steps for
//! an action call, against the model in `mcp_gateway::oracle` (which a
//! property test in the test command also drives). The actions are the Time
//! Sheet app's (an aggregate with a week filter, a create).
//!
//! Must never reach a service: nothing here opens a connection.

#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sasha_contract::actions::CompiledAction;

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

fuzz_target!(|input: &[u8]| {
    if let Ok(arguments) = serde_json::from_slice(input) {
        mcp_gateway::oracle::check_action_arguments(actions(), &arguments);
    }
});
