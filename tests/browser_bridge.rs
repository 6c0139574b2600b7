//! The Studio page's MCP Apps bridge in real Chromium against the real stack:
//! runs `tests/browser/bridge.mjs` (playwright-core driving Debian's
//! `chromium`) against `sasha up`, whose docs tree holds the fixture app
//! `tests/browser/apps/bridge-probe/` (and `hello`, as "another app"). The
//! script signs in as the dev admin through the Studio form, opens the probe
//! from the sidebar and proves the security catalogue's bridge cases (C1, C2,
//! C4, C7, C8, C9, C11, C12, B13 adapted to one open app) from inside the
//! app's sandboxed frame. `scripts/test.sh` installs Chromium and the npm
//! packages; without them this test fails rather than skipping.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{UpProcess, browser_artifacts, chromium, copy_dir, free_port, node_program, root};
use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// How long the whole browser scenario may take.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test]
async fn the_studio_bridge_ignores_spoofed_messages_in_chromium() {
    let chromium = chromium();
    let node = node_program(
        "the browser tests",
        Some("tests/browser/node_modules/playwright-core"),
    );
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

    let browser = root().join("tests/browser");
    let mut script = Command::new(&node)
        .arg(browser.join("bridge.mjs"))
        .current_dir(&browser)
        .env("CHROMIUM", &chromium)
        .env("STUDIO_URL", format!("http://localhost:{port}"))
        .env("SANDBOX_ORIGIN", format!("http://127.0.0.1:{port}"))
        .env("ADMIN_USER", admin["username"].as_str().unwrap())
        .env("ADMIN_PASSWORD", admin["password"].as_str().unwrap())
        .env("ARTIFACTS", browser_artifacts())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start node");
    let mut stdout = script.stdout.take().unwrap();
    let mut stderr = script.stderr.take().unwrap();

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
            "bridge.mjs did not finish in {SCENARIO_TIMEOUT:?}; sasha up stderr:\n{}",
            up.stderr_text()
        );
    };
    assert!(
        status.success(),
        "bridge.mjs failed ({status}).\n--- stdout\n{output}\n--- stderr\n{errors}\n--- sasha up stderr (tail)\n{}",
        tail(&up.stderr_text(), 60)
    );
    assert!(output.contains("checks passed"), "{output}");
    println!("{output}");
    println!(
        "browser bridge test took {:?} (sasha up ready after {booted:?})",
        started.elapsed()
    );
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
