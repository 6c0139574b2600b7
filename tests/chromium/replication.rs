//! Replication on the Studio's Users page in real Chromium: `sasha up` with
//! `SASHA_REPLICA_URL` set, replicating to a real SeaweedFS S3 server through
//! its Litestream children (`tests/common/replica.rs`), and
//! `tests/browser/replication.mjs` driving the admin's page: each role's
//! databases with generation, position and lag; a failure shown while object
//! storage is stopped (this side stops it and makes a write that is refused);
//! all confirmed again once it is back (this side writes until one is
//! acknowledged). Screenshots go to
//! `$CARGO_TARGET_DIR/browser-artifacts/replication/`.
//!
//! `scripts/test.sh` installs Chromium, the npm packages, Litestream and
//! SeaweedFS; without them this test fails rather than skipping.

use crate::common;

use std::time::Duration;

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::mcp::{self, Mcp};
use common::replica::{self, ObjectStorage};
use common::{UpProcess, browser_artifacts, copy_dir, free_port, sign_in_dev_admin};
use serde_json::json;

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);
const APP: &str = "expense-log";

/// Creates the category `name` as the Studio page does; `Ok` with its id
/// once acknowledged, else the tool error's code (or what failed).
async fn create(page: &mut Mcp, name: &str) -> Result<i64, String> {
    let exchange = page
        .try_request(
            "tools/call",
            json!({"name": "app__expense_log__categories__create", "arguments": {"values": {"name": name}, "idempotencyKey": name}}),
        )
        .await?;
    let result = &exchange.body["result"];
    match result["structuredContent"]["id"].as_i64() {
        Some(id) if result["isError"] != true => Ok(id),
        _ => Err(result["structuredContent"]["error"]["code"]
            .as_str()
            .map_or_else(|| exchange.body.to_string(), str::to_owned)),
    }
}

/// Writes `name` until it is acknowledged (the catalogue registering the
/// app, or object storage coming back, may take a moment).
async fn create_until_acknowledged(page: &mut Mcp, name: &str) -> i64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match create(page, name).await {
            Ok(id) => return id,
            Err(error) => assert!(
                tokio::time::Instant::now() < deadline,
                "{name} never acknowledged: {error}"
            ),
        }
        // The roles decide this in other processes: look again shortly.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_users_page_shows_each_roles_replication() {
    browser::require();
    let storage = ObjectStorage::start().await;
    let state = tempfile::tempdir().unwrap();
    copy_dir(
        &mcp::fixture(APP),
        &state.path().join("docs/apps").join(APP),
    );
    let litestream = replica::litestream().display().to_string();
    let url = storage.url("studio");
    let env = [
        ("SASHA_BUNDLED_APPS", "off"),
        ("SASHA_REPLICA_URL", url.as_str()),
        ("SASHA_REPLICA_SYNC_TIMEOUT_SECS", "2"),
        ("SASHA_LITESTREAM", litestream.as_str()),
        ("AWS_ACCESS_KEY_ID", replica::ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", replica::SECRET_KEY),
    ];
    let port = free_port();
    let up = UpProcess::start_with(state.path(), port, &env).await;
    let studio = format!("http://localhost:{port}");
    let (admin, cookie) = sign_in_dev_admin(state.path(), &studio).await;
    let mut page = Mcp::new(
        &format!("{studio}/mcp"),
        vec![
            ("cookie".to_owned(), cookie),
            ("origin".to_owned(), studio.clone()),
            ("sasha-app".to_owned(), APP.to_owned()),
        ],
        mcp::SESSIONLESS,
    );
    // The data worker replicates expense-log from its first write on.
    create_until_acknowledged(&mut page, "first").await;

    let artifacts = browser_artifacts().join("replication");
    let mut script = BrowserScript::start(
        "replication",
        &[
            ("STUDIO_URL", &studio),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("ARTIFACTS", &artifacts),
        ],
    );
    let step = script.handshake(Duration::from_secs(60), 100).await;
    assert_eq!(step["step"], "stop object storage", "{step}");
    storage.pause();
    assert_eq!(
        create(&mut page, "while-stopped").await,
        Err("APP_DATABASE_UNAVAILABLE".to_owned())
    );
    script.answer(json!({})).await;
    let step = script.handshake(Duration::from_secs(60), 100).await;
    assert_eq!(step["step"], "start object storage", "{step}");
    storage.resume();
    create_until_acknowledged(&mut page, "while-stopped").await;
    script.answer(json!({})).await;
    let output = script.finish(SCENARIO_TIMEOUT, up_stderr_tail(&up)).await;
    browser::screenshots(&output, 4);
}
