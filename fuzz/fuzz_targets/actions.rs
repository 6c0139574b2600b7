//! MCP tool arguments from arbitrary JSON through the gateway's own steps for
//! an action call, against the model in `mcp_gateway::oracle` (which a
//! property test in the test command also drives). The actions are the Time
//! Sheet app's (an aggregate with a week filter, a create).
//!
//! Must never reach a service: nothing here opens a connection.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_gateway::oracle::{check_action_arguments, time_sheet_actions};

fuzz_target!(|input: &[u8]| {
    if let Ok(arguments) = serde_json::from_slice(input) {
        check_action_arguments(time_sheet_actions(), &arguments);
    }
});
