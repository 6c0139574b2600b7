//! Interop with the real `@modelcontextprotocol/ext-apps` SDK in Chromium, for
//! 1.7.5 and the latest 2.x (npm aliases `ext-apps-1` and `ext-apps-2` in
//! `tests/browser/package.json`): runs `tests/browser/interop.mjs` once per
//! version. It frames our assembled `hello` and `expense-log` resources under
//! the SDK's `AppBridge`, and runs the SDK's `App` as the view of
//! `studio-core/web/host.js` through the real edge-sandbox proxy (the Studio
//! test page on `http://localhost:<port>`, the sandbox on
//! `http://127.0.0.1:<port>`). The pages are bundled with esbuild at test time
//! into a temporary folder.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::browser::BrowserScript;
use common::{Harness, chromium, node_program, root};
use sasha_service::Role;
use tokio::net::{TcpListener, TcpStream};

/// How long one SDK version's scenario may take.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

/// Forwards every connection on `listener` to `target`: the sandbox origin must
/// name its port before edge-sandbox (on an ephemeral port) is started.
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

/// The assembled resource HTML of a valid fixture package, written to `dir`.
fn assembled(dir: &std::path::Path, app: &str) -> std::path::PathBuf {
    let validation =
        sasha_package::validate::validate_dir(&root().join("tests/packages/valid").join(app));
    let Some(package) = validation.package else {
        panic!("{app} must validate: {:?}", validation.diagnostics);
    };
    let file = dir.join(format!("{app}.html"));
    std::fs::write(&file, &package.resource.html).unwrap();
    file
}

async fn interop(sdk: &str) {
    chromium();
    let browser = root().join("tests/browser");
    node_program(
        "the browser interop tests",
        Some("tests/browser/node_modules/playwright-core"),
    );
    for module in [sdk, "esbuild"] {
        assert!(
            browser.join("node_modules").join(module).is_dir(),
            "tests/browser/node_modules/{module} is missing: run `npm ci --prefix tests/browser`"
        );
    }
    let started = Instant::now();
    let harness = Harness::new();
    let hello = assembled(harness.path(), "hello");
    let expense = assembled(harness.path(), "expense-log");

    let sandbox_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sandbox_origin = format!(
        "http://127.0.0.1:{}",
        sandbox_listener.local_addr().unwrap().port()
    );
    let mut script = BrowserScript::start(
        "interop",
        &[
            ("SDK", &sdk),
            ("SANDBOX_ORIGIN", &sandbox_origin),
            ("HELLO_HTML", &hello),
            ("EXPENSE_HTML", &expense),
        ],
    );
    script.label = format!("interop.mjs ({sdk})");

    // The first line names the SDK version; the handshake follows.
    let info = script.handshake(Duration::from_secs(60), 1).await;
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
    println!("browser interop test ({sdk}) took {:?}", started.elapsed());
}

#[tokio::test]
async fn sdk_1_7_5_interoperates_with_our_facade_and_host() {
    interop("ext-apps-1").await;
}

#[tokio::test]
async fn sdk_2_interoperates_with_our_facade_and_host() {
    interop("ext-apps-2").await;
}
