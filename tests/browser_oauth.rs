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

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::{UpProcess, browser_artifacts, copy_dir, free_port, node_program, root};
use studio_core::store::{AppAccess, Store, UserRole};

/// How long the whole browser scenario may take (it needs about 10 s).
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

/// The apps the scenario expects in the apps folder.
const APPS: [&str; 2] = ["hello", "expense-log"];

const MEMBER: &str = "olga";
const MEMBER_PASSWORD: &str = "correct horse battery";

fn install_apps(state: &Path) {
    let apps = state.join("docs/apps");
    for app in APPS {
        copy_dir(
            &root().join("tests/packages/valid").join(app),
            &apps.join(app),
        );
    }
}

/// Waits until studio-core has registered `app_id` (its first catalogue
/// refresh), so it can be granted.
async fn wait_registered(store: &Store, app_id: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.registered_app(app_id).unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "studio-core did not register {app_id}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn mcp_clients_connect_through_the_consent_card() {
    browser::require();
    // The SDK client the scenario drives, installed by `npm ci` with playwright-core.
    node_program(
        "the OAuth browser test",
        Some("tests/browser/node_modules/@modelcontextprotocol/sdk"),
    );
    let started = Instant::now();

    let state = tempfile::tempdir().unwrap();
    install_apps(state.path());
    let port = free_port();
    let up = UpProcess::start(state.path(), port).await;
    let admin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let admin_name = admin["username"].as_str().unwrap();
    let store = Store::open(&state.path().join("core.sqlite")).unwrap();
    let admin_user = store.user_by_name(admin_name).unwrap().unwrap();
    let member = store
        .create_user(MEMBER, UserRole::Member, MEMBER_PASSWORD)
        .unwrap();
    wait_registered(&store, "expense-log").await;
    store
        .grant(
            "expense-log",
            &member.id,
            AppAccess::Use,
            Some(&admin_user.id),
        )
        .unwrap();
    let booted = started.elapsed();

    let artifacts = browser_artifacts().join("oauth");
    BrowserScript::start(
        "oauth",
        &[
            ("STUDIO_URL", &format!("http://localhost:{port}")),
            ("ADMIN_USER", &admin_name),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("MEMBER_USER", &MEMBER),
            ("MEMBER_PASSWORD", &MEMBER_PASSWORD),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;

    println!(
        "browser oauth test took {:?} (sasha up ready after {booted:?}); screenshots in {}",
        started.elapsed(),
        artifacts.display()
    );
}
