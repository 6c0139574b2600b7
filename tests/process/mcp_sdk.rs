//! Conformance with the official MCP TypeScript SDK client: runs the scenario
//! scripts in `tests/mcp-client/` (`conformance.mjs`: tools, data, actions,
//! elicitation, resources; `repair.mjs`: the app source tools) with node and
//! `@modelcontextprotocol/sdk` (pinned in `tests/mcp-client/package.json`)
//! against the real mcp-gateway in front of real studio-core and data-worker
//! processes. `scripts/test.sh` installs the
//! SDK; without node or the SDK this test fails rather than skipping.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::mcp::{McpWorld, token};
use common::{node_program, root};
use studio_store::{AppAccess, Scope, UserRole};
use tokio::process::Command;

/// Node.js with the MCP TypeScript SDK installed.
fn node() -> String {
    node_program(
        "the MCP SDK conformance test",
        Some("tests/mcp-client/node_modules/@modelcontextprotocol/sdk"),
    )
}

/// How long the whole SDK scenario may take.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test]
async fn the_official_typescript_sdk_client_drives_the_gateway() {
    let node = node();
    let world = McpWorld::start().await;
    let (store, staff, member) = (&world.store, &world.staff, &world.member);
    let user = store
        .create_user("uma", UserRole::Member, "correct horse battery")
        .unwrap();
    store
        .grant("expense-log", &user.id, AppAccess::Use, Some(&staff.id))
        .unwrap();
    let invoke = [Scope::ChatUse, Scope::AppsInvoke];
    let url = world.url();

    run_script(
        &node,
        &world,
        "conformance.mjs",
        &[
            ("MCP_URL", url),
            ("STAFF_TOKEN", world.staff_token.clone()),
            ("STAFF_USER_ID", staff.id.clone()),
            ("MEMBER_TOKEN", token(store, member, &invoke)),
            ("USER_TOKEN", token(store, &user, &invoke)),
            ("NO_INVOKE_TOKEN", token(store, staff, &[Scope::ChatUse])),
        ],
    )
    .await;
}

/// The acceptance scenario of the source tools: an app that validated and then
/// broke is repaired by an SDK client session (list → read → edit → check) and
/// its opener comes back.
#[tokio::test]
async fn the_typescript_sdk_client_repairs_a_broken_app() {
    let node = node();
    let world = McpWorld::start().await;
    let app_js = world.harness.path().join("docs/apps/hello/app.js");
    let original = std::fs::read_to_string(&app_js).unwrap();
    let repaired = "let count = 0;";
    let broken = "let count = = 0;";
    assert!(original.contains(repaired));
    std::fs::write(&app_js, original.replace(repaired, broken)).unwrap();
    let scopes = [Scope::ChatUse, Scope::AppsInvoke, Scope::AppsWrite];
    run_script(
        &node,
        &world,
        "repair.mjs",
        &[
            ("MCP_URL", world.url()),
            ("WRITER_TOKEN", token(&world.store, &world.staff, &scopes)),
            ("APP", "hello".to_owned()),
            ("BROKEN", broken.to_owned()),
            ("REPAIRED", repaired.to_owned()),
        ],
    )
    .await;
    assert_eq!(std::fs::read_to_string(&app_js).unwrap(), original);
}

/// Runs one SDK scenario script and fails with its output unless it passed.
async fn run_script(node: &str, world: &McpWorld, script: &str, env: &[(&str, String)]) {
    let mut command = Command::new(node);
    command
        .arg(root().join("tests/mcp-client").join(script))
        .current_dir(root().join("tests/mcp-client"))
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = tokio::time::timeout(SCENARIO_TIMEOUT, command.output())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{script} did not finish in {SCENARIO_TIMEOUT:?}; gateway stderr:\n{}",
                world.backends.gateway.stderr()
            )
        })
        .expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{script} failed ({}).\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- gateway stderr\n{}",
        output.status,
        world.backends.gateway.stderr()
    );
    assert!(stdout.contains("checks passed"), "{stdout}");
    println!("{stdout}");
}
