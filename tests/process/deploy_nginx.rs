//! The production reverse proxy for real: Debian's nginx on loopback, running
//! `deploy/nginx/sasha.conf.template` rendered the way the official image's
//! envsubst renders it, with TLS for two hostnames, in front of edge-sandbox,
//! studio-core, data-worker and **two** mcp-gateway replicas.
//!
//! Checked through nginx: routing by Host and path (including OAuth discovery:
//! the MCP resource's RFC 9728 metadata from a gateway replica, the
//! authorization server's RFC 8414 metadata from studio-core); the sandbox host's 404
//! surface (and Studio refusing sandbox paths); header handling (the roles log
//! the client and scheme nginx reports, never the client's spoofed
//! `X-Forwarded-*`/`Forwarded`); `/mcp` streaming unbuffered (a progress event
//! arrives before the provider has finished); and a load of governed writes
//! during which one gateway replica is SIGKILLed: every write lands exactly
//! once.
//!
//! `scripts/test.sh` installs nginx (`nginx-light`); without it this test fails
//! rather than skipping.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::fake_llm::{Behaviour, FakeLlm};
use common::{Harness, RoleProcess, copy_dir, free_port, nginx, root};
use sasha_service::Role;
use serde_json::{Value, json};
use studio_store::UserRole;

const STUDIO_HOST: &str = "studio.sasha.test";
const SANDBOX_HOST: &str = "views.sasha-sandbox.test";
const WRITERS: usize = 4;
const WRITES: usize = 100;

/// One MCP request of the Studio page through nginx; the JSON-RPC message,
/// or `Err` for a transport failure or a gateway error status.
async fn studio_call(
    http: &reqwest::Client,
    studio: &str,
    session: &str,
    name: &str,
    arguments: &Value,
) -> Result<Value, String> {
    match common::mcp::studio_call_through_proxy(
        http,
        studio,
        session,
        "expense-log",
        name,
        arguments,
    )
    .await?
    {
        (200, message) => Ok(message),
        (status, message) => Err(format!("status {status}: {message}")),
    }
}

#[tokio::test]
async fn nginx_in_front_of_two_gateways_routes_protects_and_loses_no_write() {
    let nginx_port = free_port();
    let studio = format!("https://{STUDIO_HOST}:{nginx_port}");
    let sandbox = format!("https://{SANDBOX_HOST}:{nginx_port}");
    let fake = FakeLlm::start(Behaviour::Stream(
        (0..12).map(|i| format!("part{i} ")).collect(),
        Duration::from_millis(150),
    ))
    .await;

    let mut harness = Harness::new();
    harness
        .env
        .insert("SASHA_PUBLIC_ORIGIN".into(), studio.clone());
    harness
        .env
        .insert("SASHA_APP_SANDBOX_ORIGIN".into(), sandbox.clone());
    let apps = harness.path().join("docs/apps");
    copy_dir(
        &common::mcp::fixture("expense-log"),
        &apps.join("expense-log"),
    );
    copy_dir(
        &root().join("examples/document-summariser"),
        &apps.join("document-summariser"),
    );
    let store = harness.store();
    let staff = store
        .create_user("sam", UserRole::Staff, "correct horse battery")
        .unwrap();
    let backends = harness
        .start_backends_with(&[
            ("SASHA_CHAT_BASE_URL", fake.base_url.clone()),
            ("SASHA_CHAT_MODEL", "fake".to_owned()),
        ])
        .await;
    let second_gateway = harness.start_gateway(&backends).await;
    let edge = harness.start(Role::EdgeSandbox, &[]).await;

    // The public certificate for both hostnames.
    let tls = harness.path().join("public-tls");
    let cert_pem = nginx::public_tls(&tls, &[STUDIO_HOST, SANDBOX_HOST]);
    let gateway_line = |process: &RoleProcess| {
        format!(
            "server {} max_fails=1 fail_timeout=30s;",
            process.listener("http")
        )
    };
    let mut values = BTreeMap::from([
        ("SASHA_STUDIO_HOST", STUDIO_HOST.to_owned()),
        ("SASHA_SANDBOX_HOST", SANDBOX_HOST.to_owned()),
        ("SASHA_LISTEN", format!("127.0.0.1:{nginx_port} ssl")),
        (
            "STUDIO_CORE_SERVERS",
            format!("server {};", backends.core.listener("http")),
        ),
        ("EDGE_SANDBOX_HTTP", edge.listener("http").to_string()),
        (
            "MCP_GATEWAY_SERVERS",
            format!(
                "{}\n    {}",
                gateway_line(&backends.gateway),
                gateway_line(&second_gateway)
            ),
        ),
    ]);
    values.extend(nginx::tls_values(&tls));
    let proxy = nginx::start(
        &harness.path().join("nginx"),
        &root().join("deploy/nginx/sasha.conf.template"),
        values,
    );
    let http = nginx::client(
        nginx_port,
        &cert_pem,
        &[STUDIO_HOST, SANDBOX_HOST, "unknown.sasha.test"],
    );
    let mut up = false;
    for _ in 0..100 {
        if http.get(format!("{studio}/healthz")).send().await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "nginx did not come up:\n{}", proxy.error_log());

    // --- Routing ------------------------------------------------------------
    let health = http.get(format!("{studio}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    assert!(health.headers().contains_key("strict-transport-security"));
    let page = http.get(format!("{studio}/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(page.contains("/studio/app.js"), "the Studio page: {page}");
    let session = store.create_session(&staff.id).unwrap();
    let me = http
        .get(format!("{studio}/api/me"))
        .header("cookie", format!("__Host-sasha_session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200, "the https Studio uses the __Host- cookie");
    let listed = studio_call(
        &http,
        &studio,
        &session,
        "app__expense_log__categories__list",
        &json!({}),
    )
    .await
    .unwrap();
    assert_eq!(listed["result"]["structuredContent"]["rows"], json!([]));

    // OAuth discovery: the MCP resource's metadata (RFC 9728) comes from a
    // gateway replica, with nginx's headers like /mcp; the authorization
    // server's (RFC 8414) from studio-core.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let response = http.get(format!("{studio}{path}")).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert!(
            response.headers().contains_key("strict-transport-security"),
            "{path}: the Studio server's headers apply"
        );
        let metadata: Value = response.json().await.unwrap();
        assert_eq!(
            metadata["resource"],
            json!(format!("{studio}/mcp")),
            "{path}: {metadata}"
        );
        assert_eq!(
            metadata["authorization_servers"],
            json!([studio]),
            "{path}: {metadata}"
        );
        let line = access_line(&[&backends.gateway, &second_gateway], path)
            .await
            .unwrap_or_else(|| panic!("{path} reached no gateway replica"));
        assert!(
            line.contains("client=127.0.0.1") && line.contains("scheme=https"),
            "the gateway sees nginx's client and scheme: {line}"
        );
        assert!(
            !logged(&[&backends.core], path),
            "{path} reached studio-core"
        );
    }
    let issuer = http
        .get(format!("{studio}/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap();
    assert_eq!(issuer.status(), 200);
    let issuer: Value = issuer.json().await.unwrap();
    assert_eq!(issuer["issuer"], json!(studio), "{issuer}");
    assert!(
        access_line(&[&backends.core], "/.well-known/oauth-authorization-server")
            .await
            .is_some(),
        "the authorization server's metadata comes from studio-core"
    );
    // Whole path segments only: a longer name is studio-core's (its 404).
    let longer = "/.well-known/oauth-protected-resourcex";
    let response = http.get(format!("{studio}{longer}")).send().await.unwrap();
    assert_eq!(response.status(), 404, "{longer}");
    assert!(
        access_line(&[&backends.core], longer).await.is_some(),
        "{longer} reaches studio-core"
    );
    assert!(
        !logged(&[&backends.gateway, &second_gateway], longer),
        "{longer} reached a gateway"
    );

    let frame = http
        .get(format!("{sandbox}/app-sandbox"))
        .send()
        .await
        .unwrap();
    assert_eq!(frame.status(), 200);
    assert!(frame.headers().get("set-cookie").is_none());
    let csp = frame.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains(&format!("frame-ancestors {studio}")),
        "the proxy page may be framed by the Studio origin only: {csp}"
    );
    let frame = frame.text().await.unwrap();
    let script = frame
        .split('"')
        .find(|part| part.starts_with("/app-sandbox/proxy-"))
        .expect("the proxy script's hashed path");
    let script = http.get(format!("{sandbox}{script}")).send().await.unwrap();
    assert_eq!(script.status(), 200);

    // --- The 404 surfaces ---------------------------------------------------
    let mut hidden = BTreeSet::new();
    for path in [
        "/",
        "/api/me",
        "/healthz",
        "/studio/app.js",
        "/mcp",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/app-sandbox/../api/me",
    ] {
        let response = http
            .get(format!("{sandbox}{path}"))
            .header("cookie", format!("__Host-sasha_session={session}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "sandbox host {path}");
        assert!(response.headers().get("set-cookie").is_none());
        let mut envelope: Value = response.json().await.unwrap();
        assert!(envelope["diagnosticId"].is_string());
        envelope.as_object_mut().unwrap().remove("diagnosticId");
        hidden.insert(envelope.to_string());
    }
    assert_eq!(
        hidden,
        BTreeSet::from([
            json!({"code": "APP_NOT_FOUND", "message": "not found", "retryable": false})
                .to_string()
        ]),
        "one 404 for every path but the sandbox page"
    );
    let posted = http
        .post(format!("{sandbox}/mcp"))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 404, "no MCP on the sandbox host");
    let refused = http
        .get(format!("{studio}/app-sandbox"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 404, "Studio refuses sandbox paths");
    let unknown = http
        .get(format!("https://unknown.sasha.test:{nginx_port}/"))
        .send()
        .await;
    // The default server answers 404 (its certificate does not name the
    // host, so a verifying client may not even get that far).
    if let Ok(response) = unknown {
        assert_eq!(response.status(), 404);
    }

    // --- Header handling: one trusted hop -----------------------------------
    let probe = format!("/probe-{}", uuid_like());
    let spoofed = http
        .get(format!("{studio}{probe}"))
        .header("x-forwarded-for", "6.6.6.6")
        .header("x-forwarded-proto", "http")
        .header("forwarded", "for=6.6.6.6;proto=http")
        .send()
        .await
        .unwrap();
    assert_eq!(spoofed.status(), 404);
    let mut line = None;
    for _ in 0..50 {
        line = backends
            .core
            .stderr()
            .lines()
            .find(|line| line.contains(&format!("path={probe} ")))
            .map(str::to_owned);
        if line.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let line = line.unwrap_or_else(|| {
        panic!(
            "studio-core logs the request; its stderr ends:\n{}",
            backends
                .core
                .stderr()
                .lines()
                .rev()
                .take(8)
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    assert!(
        line.contains("client=127.0.0.1") && line.contains("scheme=https"),
        "studio-core sees nginx's client and scheme, not the spoofed ones: {line}"
    );
    assert!(!line.contains("6.6.6.6"), "{line}");

    // --- /mcp streams unbuffered -------------------------------------------
    let chat = common::mcp::chat_turn_body("stream through nginx");
    let mut streaming = http
        .post(format!("{studio}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", common::mcp::SESSIONLESS)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "sasha__chat_execute")
        .header("cookie", format!("__Host-sasha_session={session}"))
        .header("origin", &studio)
        .header("sasha-app", "document-summariser")
        .body(chat.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(streaming.status(), 200);
    let first = streaming.chunk().await.unwrap().unwrap();
    assert!(
        String::from_utf8_lossy(&first).contains("notifications/progress"),
        "the first bytes are a progress event"
    );
    assert_eq!(
        fake.completed.load(Ordering::SeqCst),
        0,
        "the progress event passed nginx while the provider was still streaming"
    );
    let mut rest = String::new();
    while let Some(chunk) = streaming.chunk().await.unwrap() {
        rest.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(rest.contains("part11"), "the final answer follows: {rest}");

    // --- Writes while a gateway replica dies --------------------------------
    let done = Arc::new(AtomicUsize::new(0));
    let retried = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let (http, studio, session, done, retried) = (
            http.clone(),
            studio.clone(),
            session.clone(),
            done.clone(),
            retried.clone(),
        );
        writers.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for n in (writer..WRITES).step_by(WRITERS) {
                let arguments =
                    json!({"values": {"name": format!("c{n}")}, "idempotencyKey": format!("w-{n}")});
                let mut attempts = 0;
                let row = loop {
                    attempts += 1;
                    match studio_call(
                        &http,
                        &studio,
                        &session,
                        "app__expense_log__categories__create",
                        &arguments,
                    )
                    .await
                    {
                        Ok(message) if message["result"]["isError"] != true => {
                            break message["result"]["structuredContent"].clone();
                        }
                        Ok(message) => panic!("write {n} refused: {message}"),
                        Err(error) => {
                            assert!(attempts < 20, "write {n} keeps failing: {error}");
                            retried.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                };
                assert_eq!(row["name"], format!("c{n}"));
                ids.push(row["id"].as_i64().unwrap());
                done.fetch_add(1, Ordering::SeqCst);
            }
            ids
        }));
    }
    while done.load(Ordering::SeqCst) < WRITES / 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let served = |process: &RoleProcess| {
        process
            .stderr()
            .lines()
            .filter(|line| line.contains("method=POST ") && line.contains(" path=/mcp "))
            .count()
    };
    assert!(
        served(&backends.gateway) > 0 && served(&second_gateway) > 0,
        "nginx spreads sessionless MCP requests over both replicas"
    );
    let mut backends = backends;
    backends.gateway.child.start_kill().unwrap();
    backends.gateway.child.wait().await.unwrap();
    let mut ids = BTreeSet::new();
    for writer in writers {
        for id in writer.await.unwrap() {
            assert!(ids.insert(id), "row {id} answered to two writes");
        }
    }
    assert_eq!(ids.len(), WRITES);
    let data = rusqlite::Connection::open_with_flags(
        harness.path().join("apps/expense-log.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let count = |sql: &str| -> i64 { data.query_row(sql, [], |row| row.get(0)).unwrap() };
    assert_eq!(
        count("SELECT COUNT(*) FROM categories"),
        WRITES as i64,
        "no write lost, none doubled"
    );
    assert_eq!(
        count(
            "SELECT COUNT(*) FROM _sasha_audit WHERE table_name = 'categories' AND operation = 'create'"
        ),
        WRITES as i64
    );
    println!(
        "{WRITES} writes through nginx, {} retried after the replica died; nginx error log:\n{}",
        retried.load(Ordering::SeqCst),
        proxy
            .error_log()
            .lines()
            .filter(|line| line.contains("[error]"))
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    );
    drop(second_gateway);
    drop(edge);
}

/// The access line one of `processes` logged for a request to `path`, waiting
/// up to 2.5 s for it (the line is written once the response is sent).
async fn access_line(processes: &[&RoleProcess], path: &str) -> Option<String> {
    let needle = format!(" path={path} ");
    for _ in 0..50 {
        for process in processes {
            if let Some(line) = process.stderr().lines().find(|line| line.contains(&needle)) {
                return Some(line.to_owned());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// Whether one of `processes` has already logged a request to `path`.
fn logged(processes: &[&RoleProcess], path: &str) -> bool {
    let needle = format!(" path={path} ");
    processes
        .iter()
        .any(|process| process.stderr().contains(&needle))
}

/// A unique enough path segment.
fn uuid_like() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}
