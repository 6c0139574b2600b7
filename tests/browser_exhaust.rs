//! Resource exhaustion and channels CSP does not govern, in real Chromium
//! against the real Studio under `sasha up` (catalogue items B14 and B9).
//!
//! `tests/browser/exhaust.mjs` binds a TCP and a UDP sink and says their ports;
//! this test writes them into the `channels` fixture's `app.js` (the app has no
//! other way to learn them), validates the fixtures, puts them in the state
//! folder's apps, starts `sasha up` and answers the script with the Studio's
//! addresses and the dev admin. The script then checks that a view spinning in
//! `for (;;) {}` does not stall the Studio page and that the host's watchdog
//! fails it visibly and removes its frame, and what `<link rel=preconnect>` and
//! a WebRTC STUN server deliver to the sinks.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{UpProcess, chromium, copy_dir, free_port, node_program, root};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

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
    let chromium = chromium();
    let node = node_program(
        "the browser tests",
        Some("tests/browser/node_modules/playwright-core"),
    );
    let started = Instant::now();

    let browser = root().join("tests/browser");
    let mut script = Command::new(&node)
        .arg(browser.join("exhaust.mjs"))
        .current_dir(&browser)
        .env("CHROMIUM", &chromium)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start node");
    let mut stdout = BufReader::new(script.stdout.take().unwrap());
    let mut stderr = script.stderr.take().unwrap();

    // The script binds the sinks and says where.
    let mut line = String::new();
    let read = tokio::time::timeout(Duration::from_secs(30), stdout.read_line(&mut line)).await;
    let Some(info) = line.strip_prefix("HARNESS ") else {
        let mut errors = String::new();
        let _ = stderr.read_to_string(&mut errors).await;
        panic!("exhaust.mjs did not start ({read:?}): {line}\n{errors}");
    };
    let info: serde_json::Value = serde_json::from_str(info).expect("handshake JSON");
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
    // A script that already died shows why in its output below.
    let mut stdin = script.stdin.take().unwrap();
    let _ = stdin.write_all(format!("{answer}\n").as_bytes()).await;
    let _ = stdin.flush().await;

    let outcome = tokio::time::timeout(SCENARIO_TIMEOUT, async {
        let mut output = String::new();
        let mut errors = String::new();
        let (out, err) = tokio::join!(
            stdout.read_to_string(&mut output),
            stderr.read_to_string(&mut errors)
        );
        out.and(err).expect("read the script's output");
        let status = script.wait().await.expect("wait for node");
        (status, output, errors)
    })
    .await;
    let Ok((status, output, errors)) = outcome else {
        panic!(
            "exhaust.mjs did not finish in {SCENARIO_TIMEOUT:?}; sasha up stderr:\n{}",
            tail(&up.stderr_text(), 60)
        );
    };
    assert!(
        status.success(),
        "exhaust.mjs failed ({status}).\n--- stdout\n{output}\n--- stderr\n{errors}\n--- sasha up stderr (last lines)\n{}",
        tail(&up.stderr_text(), 60)
    );
    assert!(output.contains("checks passed"), "{output}");
    println!("{output}");
    println!(
        "browser exhaust test took {:?} (sasha up ready after {booted:?})",
        started.elapsed()
    );
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
