//! OAuth 2.1 for MCP clients end to end: starts the real system with
//! `sasha up` (Studio and `/mcp` on `http://localhost:<port>`) over a state
//! folder holding the fixture apps `hello` and `expense-log`, adds a member
//! with `use` on expense-log, and runs `tests/browser/oauth.mjs`: the official
//! MCP TypeScript SDK client (`@modelcontextprotocol/sdk`, pinned in
//! `tests/browser/package.json`) authorizes through the Studio consent card in
//! Debian's Chromium (playwright-core), for the admin and the member, with
//! refresh, revocation on the Connected clients page, and Deny.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::time::{Duration, Instant};

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::stack::{MEMBER_PASSWORD, UpStack};
use common::{browser_artifacts, node_program};

/// How long the whole browser scenario may take (it needs about 10 s).
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

const MEMBER: &str = "olga";

#[tokio::test]
async fn mcp_clients_connect_through_the_consent_card() {
    browser::require();
    // The SDK client the scenario drives, installed by `npm ci` with playwright-core.
    node_program(
        "the OAuth browser test",
        Some("tests/browser/node_modules/@modelcontextprotocol/sdk"),
    );
    let started = Instant::now();
    let stack = UpStack::start(MEMBER).await;
    let booted = started.elapsed();

    let artifacts = browser_artifacts().join("oauth");
    BrowserScript::start(
        "oauth",
        &[
            ("STUDIO_URL", &stack.origin()),
            ("ADMIN_USER", &stack.admin_name),
            ("ADMIN_PASSWORD", &stack.admin_password),
            ("MEMBER_USER", &MEMBER),
            ("MEMBER_PASSWORD", &MEMBER_PASSWORD),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&stack.up))
    .await;

    println!(
        "browser oauth test took {:?} (sasha up ready after {booted:?}); screenshots in {}",
        started.elapsed(),
        artifacts.display()
    );
}
