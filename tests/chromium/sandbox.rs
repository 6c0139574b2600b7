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
//!
//! The same suite also runs against the hostile package deployed as a member
//! app, as App Studio posts pasted files: the resource a member's app is
//! served as is the catalogue's assembly byte for byte, and every attack fails
//! the same way.
//!
//! The second scenario (`tests/browser/realms.mjs`) runs the `realms` fixture
//! app's routes to a peer connection or a speculative connection against a
//! TCP and UDP sink, once as assembled and once with the realm lockdown cut
//! out, to show the sink hears the routes when nothing stops them.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::browser::{self, BrowserScript};
use common::{Harness, UpProcess, browser_artifacts, free_port, http_client, root};
use sasha_service::Role;
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

/// The assembled resource of a fixture app in `tests/browser/apps/`.
fn assembled(id: &str) -> sasha_package::assemble::Resource {
    let validation =
        sasha_package::validate::validate_dir(&root().join("tests/browser/apps").join(id));
    match validation.package {
        Some(package) => package.resource,
        None => panic!(
            "the fixture app {id} must validate: {:?}",
            validation.diagnostics
        ),
    }
}

/// The fixture app `fixture` assembled by the catalogue as the app `id`
/// (its `APP.md` naming `id`, as the platform names a member app).
fn assembled_as(fixture: &str, id: &str) -> sasha_package::assemble::Resource {
    let folder = tempfile::tempdir().unwrap();
    let package = folder.path().join(id);
    std::fs::create_dir(&package).unwrap();
    for entry in std::fs::read_dir(root().join("tests/browser/apps").join(fixture)).unwrap() {
        let entry = entry.unwrap();
        let mut text = std::fs::read_to_string(entry.path()).unwrap();
        if entry.file_name() == "APP.md" {
            text = sasha_package::manifest::with_manifest_id(&text, id).unwrap();
        }
        std::fs::write(package.join(entry.file_name()), text).unwrap();
    }
    let validation = sasha_package::validate::validate_dir(&package);
    match validation.package {
        Some(package) => package.resource,
        None => panic!(
            "the fixture app {fixture} must validate as {id}: {:?}",
            validation.diagnostics
        ),
    }
}

/// Runs one browser script against a real edge-sandbox framed by the script's
/// test Studio: the script binds the Studio and says where, then the edge
/// starts with that Studio origin. `files` are written to the harness folder
/// and passed by path.
async fn run_against_the_edge(name: &str, files: &[(&str, &str)], timeout: Duration) {
    browser::require();
    let started = Instant::now();
    let harness = Harness::new();
    let mut env: Vec<(String, std::path::PathBuf)> = Vec::new();
    for (variable, contents) in files {
        let path = harness.path().join(variable.to_lowercase());
        std::fs::write(&path, contents).unwrap();
        env.push(((*variable).to_owned(), path));
    }

    let sandbox_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sandbox_origin = format!(
        "http://127.0.0.1:{}",
        sandbox_listener.local_addr().unwrap().port()
    );
    let artifacts = browser_artifacts();
    let mut vars: Vec<(&str, &dyn AsRef<std::ffi::OsStr>)> = vec![
        ("SANDBOX_ORIGIN", &sandbox_origin),
        ("ARTIFACTS", &artifacts),
    ];
    for (variable, path) in &env {
        vars.push((variable.as_str(), path));
    }
    let mut script = BrowserScript::start(name, &vars);

    let info = script.handshake(Duration::from_secs(30), 0).await;
    let studio_origin = format!("http://localhost:{}", info["studioPort"]);
    let edge = harness
        .start(
            Role::EdgeSandbox,
            &[
                ("SASHA_PUBLIC_ORIGIN", studio_origin),
                ("SASHA_APP_SANDBOX_ORIGIN", sandbox_origin.clone()),
            ],
        )
        .await;
    let _forwarder = forward(sandbox_listener, edge.listener("http"));
    script.answer(serde_json::json!({})).await;

    script
        .finish(timeout, || {
            format!("--- edge-sandbox stderr\n{}", edge.stderr())
        })
        .await;
    println!("browser test {name}.mjs took {:?}", started.elapsed());
}

#[tokio::test]
async fn the_proxy_isolates_a_hostile_app_in_chromium() {
    let resource = assembled("hostile");
    run_against_the_edge(
        "sandbox",
        &[("APP_HTML", &resource.html), ("APP_CSP", &resource.csp)],
        SCENARIO_TIMEOUT,
    )
    .await;
}

#[tokio::test]
async fn no_route_reaches_a_peer_or_speculative_connection_in_chromium() {
    let resource = assembled("realms");
    let unlocked = common::lockdown::without_lockdown(&resource);
    run_against_the_edge(
        "realms",
        &[
            ("APP_HTML", &resource.html),
            ("APP_HTML_UNLOCKED", &unlocked),
        ],
        SCENARIO_TIMEOUT,
    )
    .await;
}

#[tokio::test]
async fn a_hostile_app_pasted_into_app_studio_is_caged_the_same_in_chromium() {
    browser::require();
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let _up = UpProcess::start(state.path(), port).await;
    let studio = format!("http://localhost:{port}");
    let store = common::core_database::core_store(state.path());
    let password = "member correct horse battery";
    store
        .create_user("mallory", studio_store::UserRole::Member, password)
        .unwrap();
    let client = http_client();
    let login = client
        .post(format!("{studio}/api/auth/login"))
        .json(&serde_json::json!({"username": "mallory", "password": password}))
        .send()
        .await
        .unwrap();
    assert!(login.status().is_success(), "{}", login.status());
    let cookie = login
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok()?.split(';').next().map(str::to_owned))
        .find(|pair| pair.starts_with("sasha_session"))
        .expect("the sign-in sets the session cookie");
    // The package's files as App Studio posts what a member pasted.
    let mut files = serde_json::Map::new();
    for entry in std::fs::read_dir(root().join("tests/browser/apps/hostile")).unwrap() {
        let entry = entry.unwrap();
        files.insert(
            entry.file_name().to_string_lossy().into_owned(),
            std::fs::read_to_string(entry.path()).unwrap().into(),
        );
    }
    let deployed = client
        .post(format!("{studio}/api/member-apps"))
        .header("cookie", &cookie)
        .header("origin", &studio)
        .json(&serde_json::json!({"name": "Hostile", "files": files}))
        .send()
        .await
        .unwrap();
    assert_eq!(deployed.status(), 201);
    let deployed: serde_json::Value = deployed.json().await.unwrap();
    let id = deployed["app"]["id"].as_str().unwrap().to_owned();
    let revision = deployed["app"]["revision"].as_str().unwrap().to_owned();
    let served: serde_json::Value = client
        .get(format!(
            "{studio}/api/apps/{id}/resource?revision={revision}"
        ))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // The revision hashes the MIME type, CSP, `_meta.ui` and HTML: equal
    // revisions are the same resource, CSP included.
    let catalogue = assembled_as("hostile", &id);
    assert_eq!(revision, catalogue.revision);
    let html = served["text"].as_str().unwrap();
    assert_eq!(html, catalogue.html);
    run_against_the_edge(
        "sandbox",
        &[("APP_HTML", html), ("APP_CSP", &catalogue.csp)],
        SCENARIO_TIMEOUT,
    )
    .await;
}
