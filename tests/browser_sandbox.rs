//! The sandbox proxy in real Chromium: runs `tests/browser/sandbox.mjs`
//! (playwright-core, pinned in `tests/browser/package.json`, driving Debian's
//! `chromium`) against the real edge-sandbox. The app it loads is the hostile
//! harness package `tests/browser/apps/hostile/`, assembled here by the real
//! validator, so its CSP carries the exact hashes the catalogue serves.
//!
//! The Studio is a static test page on `http://localhost:<port>` served by the
//! script; the sandbox is `http://127.0.0.1:<port>`: two hostnames, as the
//! origin rules demand. `scripts/test.sh` installs Chromium and the npm
//! packages; without them this test fails rather than skipping.

mod common;

use std::net::SocketAddr;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Harness, browser_artifacts, chromium, node_program, root};
use sasha_proto::Role;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::Command;

/// Node.js with playwright-core installed.
fn node() -> String {
    node_program(
        "the browser tests",
        Some("tests/browser/node_modules/playwright-core"),
    )
}

/// How long the whole browser scenario may take.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

/// Forwards every connection on `listener` to `target`, as the ingress does in
/// front of edge-sandbox: the sandbox origin must name its port before
/// edge-sandbox (on an ephemeral port) is started.
fn forward(listener: TcpListener, target: SocketAddr) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    })
}

#[tokio::test]
async fn the_proxy_isolates_a_hostile_app_in_chromium() {
    let chromium = chromium();
    let node = node();
    let started = Instant::now();

    let validation =
        sasha_package::validate::validate_dir(&root().join("tests/browser/apps/hostile"));
    let resource = match validation.package {
        Some(package) => package.resource,
        None => panic!(
            "the hostile harness app must validate: {:?}",
            validation.diagnostics
        ),
    };
    let harness = Harness::new();
    let app_html = harness.path().join("hostile.html");
    let app_csp = harness.path().join("hostile.csp");
    std::fs::write(&app_html, &resource.html).unwrap();
    std::fs::write(&app_csp, &resource.csp).unwrap();

    let sandbox_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sandbox_origin = format!(
        "http://127.0.0.1:{}",
        sandbox_listener.local_addr().unwrap().port()
    );

    let browser = root().join("tests/browser");
    let mut script = Command::new(&node)
        .arg(browser.join("sandbox.mjs"))
        .current_dir(&browser)
        .env("CHROMIUM", &chromium)
        .env("SANDBOX_ORIGIN", &sandbox_origin)
        .env("APP_HTML", &app_html)
        .env("APP_CSP", &app_csp)
        .env("ARTIFACTS", browser_artifacts())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start node");
    let mut stdout = BufReader::new(script.stdout.take().unwrap());
    let mut stderr = script.stderr.take().unwrap();

    // The script binds the test Studio and says where; then the edge starts with
    // that Studio origin.
    let mut line = String::new();
    let read = tokio::time::timeout(Duration::from_secs(30), stdout.read_line(&mut line)).await;
    let Some(info) = line.strip_prefix("HARNESS ") else {
        let mut errors = String::new();
        let _ = stderr.read_to_string(&mut errors).await;
        panic!("sandbox.mjs did not start ({read:?}): {line}\n{errors}");
    };
    let info: serde_json::Value = serde_json::from_str(info).expect("handshake JSON");
    let studio_origin = format!("http://localhost:{}", info["studioPort"]);
    let edge = harness
        .start(
            Role::EdgeSandbox,
            &[
                ("SASHA_PUBLIC_ORIGIN", studio_origin),
                ("SASHA_APP_SANDBOX_ORIGIN", sandbox_origin),
            ],
        )
        .await;
    let _forwarder = forward(sandbox_listener, edge.listener("http"));
    // A script that already died shows why in its output below.
    let mut stdin = script.stdin.take().unwrap();
    let _ = stdin.write_all(b"{}\n").await;
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
            "sandbox.mjs did not finish in {SCENARIO_TIMEOUT:?}; edge-sandbox stderr:\n{}",
            edge.stderr()
        );
    };
    assert!(
        status.success(),
        "sandbox.mjs failed ({status}).\n--- stdout\n{output}\n--- stderr\n{errors}\n--- edge-sandbox stderr\n{}",
        edge.stderr()
    );
    assert!(output.contains("checks passed"), "{output}");
    println!("{output}");
    println!("browser sandbox test took {:?}", started.elapsed());
}
