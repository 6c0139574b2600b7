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
use std::time::{Duration, Instant};

use common::browser::{self, BrowserScript};
use common::{Harness, browser_artifacts, root};
use sasha_proto::Role;
use tokio::net::{TcpListener, TcpStream};

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
    browser::require();
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

    let mut script = BrowserScript::start(
        "sandbox",
        &[
            ("SANDBOX_ORIGIN", &sandbox_origin),
            ("APP_HTML", &app_html),
            ("APP_CSP", &app_csp),
            ("ARTIFACTS", &browser_artifacts()),
        ],
    );

    // The script binds the test Studio and says where; then the edge starts with
    // that Studio origin.
    let info = script.handshake(Duration::from_secs(30), 0).await;
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
    script.answer(serde_json::json!({})).await;

    script
        .finish(SCENARIO_TIMEOUT, || {
            format!("--- edge-sandbox stderr\n{}", edge.stderr())
        })
        .await;
    println!("browser sandbox test took {:?}", started.elapsed());
}
