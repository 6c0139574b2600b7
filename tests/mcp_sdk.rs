//! Conformance with the official MCP TypeScript SDK client: runs
//! `tests/mcp-client/conformance.mjs` (node, `@modelcontextprotocol/sdk` pinned
//! in `tests/mcp-client/package.json`) against the real mcp-gateway in front of
//! real studio-core and data-worker processes. `scripts/test.sh` installs the
//! SDK; without node or the SDK this test fails rather than skipping.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::mcp::{McpWorld, token};
use studio_core::store::{AppAccess, Scope, UserRole};
use tokio::process::Command;

/// How long the whole SDK scenario may take.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The node binary, or a failure saying how to get the test's prerequisites.
async fn node() -> String {
    let node = std::env::var("NODE").unwrap_or_else(|_| "node".to_owned());
    let version = Command::new(&node).arg("--version").output().await;
    let sdk = root().join("tests/mcp-client/node_modules/@modelcontextprotocol/sdk/package.json");
    match version {
        Ok(output) if output.status.success() && sdk.is_file() => node,
        Ok(output) if output.status.success() => panic!(
            "the MCP TypeScript SDK is not installed ({} is missing); run scripts/test.sh, \
             which runs `npm ci --prefix tests/mcp-client`",
            sdk.display()
        ),
        _ => panic!(
            "`{node} --version` failed: Node.js is needed for the MCP SDK conformance test; \
             run scripts/test.sh, which installs it (and the SDK) on a fresh machine"
        ),
    }
}

#[tokio::test]
async fn the_official_typescript_sdk_client_drives_the_gateway() {
    let node = node().await;
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

    let script = root().join("tests/mcp-client/conformance.mjs");
    let run = Command::new(&node)
        .arg(&script)
        .current_dir(root().join("tests/mcp-client"))
        .env("MCP_URL", &url)
        .env("STAFF_TOKEN", &world.staff_token)
        .env("STAFF_USER_ID", &staff.id)
        .env("MEMBER_TOKEN", token(store, member, &invoke))
        .env("USER_TOKEN", token(store, &user, &invoke))
        .env("NO_INVOKE_TOKEN", token(store, staff, &[Scope::ChatUse]))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(SCENARIO_TIMEOUT, run)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the SDK scenario did not finish in {SCENARIO_TIMEOUT:?}; gateway stderr:\n{}",
                world.backends.gateway.stderr()
            )
        })
        .expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the MCP SDK conformance scenario failed ({}).\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- gateway stderr\n{}",
        output.status,
        world.backends.gateway.stderr()
    );
    assert!(stdout.contains("checks passed"), "{stdout}");
    println!("{stdout}");
}
