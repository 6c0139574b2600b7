//! Resource exhaustion and channels CSP does not govern, in real Chromium
//! against the real Studio under `sasha up` (catalogue items B14 and B9).
//!
//! `tests/browser/exhaust.mjs` binds a TCP and a UDP sink and says their ports;
//! this test writes them into the `channels` fixture's `app.js` (the app has no
//! other way to learn them), validates the fixtures, puts them in the state
//! folder's apps, starts `sasha up` and answers the script with the Studio's
//! addresses and the dev admin. The script then checks that a view spinning in
//! `for (;;) {}` does not stall the Studio page and that the host's watchdog
//! fails it visibly and removes its frame, and that neither `<link
//! rel=preconnect>` nor a WebRTC STUN server reaches its sink (the realm
//! lockdown refuses both).
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::{UpProcess, copy_dir, free_port, root};

/// How long the whole browser scenario may take (it needs about 15 s).
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(60);

/// The line of the committed `channels/app.js` that names the sink's ports.
const SINK_LINE: &str = "const SINK = { tcp: 0, udp: 0 };";

/// Copies a fixture app into the state folder's apps after validating it.
fn install(source: &Path, apps: &Path, id: &str) {
    let validation = sasha_package::validate::validate_dir(source);
    assert!(
        validation.package.is_some(),
        "the fixture app {id} must validate: {:?}",
        validation.diagnostics
    );
    copy_dir(source, &apps.join(id));
}

/// Installs `spin` as committed and `channels` with the sink's ports baked in.
fn install_apps(state: &Path, tcp_port: u64, udp_port: u64) {
    let apps = state.join("docs/apps");
    let fixtures = root().join("tests/browser/apps");
    install(&fixtures.join("spin"), &apps, "spin");

    // The validator wants the folder named after the app's id.
    let scratch = tempfile::tempdir().unwrap();
    let channels = scratch.path().join("channels");
    copy_dir(&fixtures.join("channels"), &channels);
    let script = channels.join("app.js");
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(
        text.contains(SINK_LINE),
        "channels/app.js names its sink on one line"
    );
    let baked = text.replace(
        SINK_LINE,
        &format!("const SINK = {{ tcp: {tcp_port}, udp: {udp_port} }};"),
    );
    std::fs::write(&script, baked).unwrap();
    install(&channels, &apps, "channels");
}

#[tokio::test]
async fn a_spinning_view_and_side_channels_in_the_studio() {
    browser::require();
    let started = Instant::now();

    let mut script = BrowserScript::start("exhaust", &[]);

    // The script binds the sinks and says where.
    let info = script.handshake(Duration::from_secs(30), 0).await;
    let tcp_port = info["tcpPort"].as_u64().expect("the TCP sink's port");
    let udp_port = info["udpPort"].as_u64().expect("the UDP sink's port");

    let state = tempfile::tempdir().unwrap();
    install_apps(state.path(), tcp_port, udp_port);
    let port = free_port();
    let up = UpProcess::start(state.path(), port).await;
    let admin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let booted = started.elapsed();

    let answer = serde_json::json!({
        "studio": format!("http://localhost:{port}"),
        "sandbox": format!("http://127.0.0.1:{port}"),
        "adminUser": admin["username"],
        "adminPassword": admin["password"],
    });
    script.answer(answer).await;

    script.finish(SCENARIO_TIMEOUT, up_stderr_tail(&up)).await;
    println!(
        "browser exhaust test took {:?} (sasha up ready after {booted:?})",
        started.elapsed()
    );
}
