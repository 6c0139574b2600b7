//! The sandbox origin's whole surface, attacked through raw HTTP (security
//! catalogue F1, F3, F6): only `GET /app-sandbox` and the hashed proxy script are
//! served, only to the sandbox Host, with strict headers and never a cookie.

use crate::common;

use common::{Harness, RawResponse, get, raw_http};
use sasha_service::Role;

const SANDBOX: &str = "127.0.0.1:3007";
const STUDIO: &str = "localhost:3007";

fn assert_hardened(response: &RawResponse, what: &str) {
    assert_eq!(
        response.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
    assert_eq!(
        response.header("referrer-policy"),
        Some("no-referrer"),
        "{what}"
    );
    assert!(
        response.header("set-cookie").is_none(),
        "{what}: set-cookie"
    );
    assert!(
        response.header("access-control-allow-origin").is_none(),
        "{what}: CORS"
    );
    assert!(
        response
            .header("access-control-allow-credentials")
            .is_none(),
        "{what}: CORS"
    );
    let csp = response
        .header("content-security-policy")
        .unwrap_or_default();
    for directive in [
        "default-src 'none'",
        "frame-ancestors http://localhost:3007",
        "base-uri 'none'",
        "form-action 'none'",
    ] {
        assert!(
            csp.contains(directive),
            "{what}: {directive} missing in {csp:?}"
        );
    }
}

fn script_path(page: &str) -> String {
    let start = page.find("src=\"").expect("script tag") + 5;
    let end = page[start..].find('"').unwrap() + start;
    page[start..end].to_owned()
}

#[tokio::test]
async fn serves_the_page_and_its_hashed_script_only() {
    let harness = Harness::new();
    let edge = harness.start(Role::EdgeSandbox, &[]).await;
    let addr = edge.listener("http");

    let page = get(
        addr,
        SANDBOX,
        "/app-sandbox",
        "Origin: http://localhost:3007\r\n",
    )
    .await;
    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_hardened(&page, "page");
    let path = script_path(&page.body);
    assert!(
        path.starts_with("/app-sandbox/proxy-") && path.ends_with(".js"),
        "{path}"
    );
    let csp = page.header("content-security-policy").unwrap();
    // The script by exact URL plus the inline ceiling the app's data: document
    // inherits; the page's tag carries the SRI hash (see ARCHITECTURE.md).
    assert!(
        csp.contains(&format!(
            "script-src http://127.0.0.1:3007{path} 'unsafe-inline';"
        )),
        "{csp}"
    );
    assert!(csp.contains("connect-src 'none'"), "{csp}");
    assert!(!csp.contains("unsafe-eval"));
    assert!(
        page.body
            .contains("<meta name=\"sasha-studio-origin\" content=\"http://localhost:3007\">"),
        "{}",
        page.body
    );

    let script = get(addr, SANDBOX, &path, "").await;
    assert_eq!(script.status, 200);
    assert_eq!(
        script.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert!(
        script
            .header("cache-control")
            .unwrap()
            .contains("immutable")
    );
    assert_hardened(&script, "script");
    // The path is content-addressed: the digest of what is served.
    let digest = {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(script.body.as_bytes()))
    };
    assert_eq!(
        &path["/app-sandbox/proxy-".len()..path.len() - 3],
        &digest[..16]
    );
    // The tag's SRI hash is the served script's (the same digest as the path).
    let embedded = edge_sandbox::ProxyScript::embedded();
    assert_eq!(embedded.path, path);
    assert!(
        page.body
            .contains(&format!("integrity=\"{}\"", embedded.integrity)),
        "{}",
        page.body
    );

    let head = raw_http(
        addr,
        "HEAD /app-sandbox HTTP/1.1\r\nHost: 127.0.0.1:3007\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());

    // A query is accepted but never reflected.
    let query = get(addr, SANDBOX, "/app-sandbox?x=%3Cscript%3Eevil", "").await;
    assert_eq!(query.status, 200);
    assert!(!query.body.contains("evil"));
}

#[tokio::test]
async fn every_other_path_is_404() {
    let harness = Harness::new();
    let edge = harness.start(Role::EdgeSandbox, &[]).await;
    let addr = edge.listener("http");
    for path in [
        "/",
        "/api",
        "/api/apps",
        "/mcp",
        "/healthz",
        "/index.html",
        "/app-sandbox/",
        "/app-sandbox;x",
        "/app-sandbox/../x",
        "/app-sandbox/..%2fx",
        "/app-sandbox%2f..%2fapi",
        "/%61pp-sandbox",
        "/APP-SANDBOX",
        "//app-sandbox",
        "/app-sandbox/proxy-0000000000000000.js",
        "/app-sandbox/proxy.js",
        "/./app-sandbox",
        "/x/../app-sandbox",
        "/app-sandbox%00",
    ] {
        let response = get(addr, SANDBOX, path, "").await;
        assert_eq!(response.status, 404, "{path}: {response:?}");
        assert_hardened(&response, path);
        assert!(!response.body.contains("app-sandbox"), "{path}: reflected");
    }
}

#[tokio::test]
async fn other_methods_and_hosts_are_404() {
    let harness = Harness::new();
    let edge = harness.start(Role::EdgeSandbox, &[]).await;
    let addr = edge.listener("http");
    for method in [
        "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT",
    ] {
        let target = if method == "CONNECT" {
            "127.0.0.1:3007"
        } else {
            "/app-sandbox"
        };
        let response = raw_http(
            addr,
            &format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:3007\r\nOrigin: http://localhost:3007\r\nAccess-Control-Request-Method: GET\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(
            response.status == 404 || response.status == 400,
            "{method}: {response:?}"
        );
        assert!(
            response.header("access-control-allow-origin").is_none(),
            "{method}"
        );
        assert!(response.header("set-cookie").is_none(), "{method}");
    }
    for host in [
        STUDIO,
        "evil.test",
        "127.0.0.1:3008",
        "127.0.0.1",
        "127.0.0.1:3007.evil.test",
    ] {
        let response = get(addr, host, "/app-sandbox", "").await;
        assert_eq!(response.status, 404, "Host {host}: {response:?}");
    }
    // Two Host headers, the first one right.
    let response = raw_http(
        addr,
        "GET /app-sandbox HTTP/1.1\r\nHost: 127.0.0.1:3007\r\nHost: evil.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(
        response.status == 404 || response.status == 400,
        "{response:?}"
    );
    // Absolute-form request line naming another authority.
    let response = raw_http(
        addr,
        "GET http://evil.test/app-sandbox HTTP/1.1\r\nHost: 127.0.0.1:3007\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(response.status, 404, "{response:?}");
    // Absolute-form naming the sandbox itself is the same request as origin-form.
    let response = raw_http(
        addr,
        "GET http://127.0.0.1:3007/app-sandbox HTTP/1.1\r\nHost: 127.0.0.1:3007\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(response.status, 200, "{response:?}");
}

#[tokio::test]
async fn frame_ancestors_follow_the_configured_studio_origin() {
    let harness = Harness::new();
    let edge = harness
        .start(
            Role::EdgeSandbox,
            &[
                ("SASHA_PUBLIC_ORIGIN", "https://studio.example.com".into()),
                (
                    "SASHA_APP_SANDBOX_ORIGIN",
                    "https://views.example.net".into(),
                ),
            ],
        )
        .await;
    let addr = edge.listener("http");
    let page = get(addr, "views.example.net", "/app-sandbox", "").await;
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("frame-ancestors https://studio.example.com"),
        "{csp}"
    );
    assert!(
        csp.contains("script-src https://views.example.net/app-sandbox/proxy-"),
        "{csp}"
    );
    assert!(
        page.body
            .contains("<meta name=\"sasha-studio-origin\" content=\"https://studio.example.com\">"),
        "{}",
        page.body
    );
    let studio_host = get(addr, "studio.example.com", "/app-sandbox", "").await;
    assert_eq!(studio_host.status, 404);
}
