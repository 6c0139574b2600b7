//! The Studio page's MCP Apps bridge in real Chromium against the real stack:
//! runs `tests/browser/bridge.mjs` (playwright-core driving Debian's
//! `chromium`) against `sasha up`, whose docs tree holds the fixture app
//! `tests/browser/apps/bridge-probe/` (and `hello`, as "another app"). The
//! script signs in as the dev admin through the Studio form, opens the probe
//! from the sidebar and proves the security catalogue's bridge cases (C1, C2,
//! C4, C7, C8, C9, C11, C12, B13 adapted to one open app) from inside the
//! app's sandboxed frame. `scripts/test.sh` installs Chromium and the npm
//! packages; without them this test fails rather than skipping.

use crate::common;

use std::time::{Duration, Instant};

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::{UpProcess, browser_artifacts, copy_dir, free_port, root};

/// How long the whole browser scenario may take.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test]
async fn the_studio_bridge_ignores_spoofed_messages_in_chromium() {
    browser::require();
    let started = Instant::now();

    let probe = root().join("tests/browser/apps/bridge-probe");
    let validation = sasha_package::validate::validate_dir(&probe);
    assert!(
        validation.package.is_some(),
        "the bridge-probe fixture app must validate: {:?}",
        validation.diagnostics
    );

    let state = tempfile::tempdir().unwrap();
    let apps = state.path().join("docs/apps");
    copy_dir(&probe, &apps.join("bridge-probe"));
    copy_dir(
        &root().join("tests/packages/valid/hello"),
        &apps.join("hello"),
    );
    let port = free_port();
    let up = UpProcess::start(state.path(), port).await;
    let admin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let booted = started.elapsed();

    BrowserScript::start(
        "bridge",
        &[
            ("STUDIO_URL", &format!("http://localhost:{port}")),
            ("SANDBOX_ORIGIN", &format!("http://127.0.0.1:{port}")),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("ARTIFACTS", &browser_artifacts()),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;
    println!(
        "browser bridge test took {:?} (sasha up ready after {booted:?})",
        started.elapsed()
    );
}
