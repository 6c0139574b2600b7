//! The Studio page and its modules as a running studio-core serves them: the
//! configured sandbox origin is the only frame source in the page's policy,
//! assets have their content types and cache rules, and none of it is served
//! for any Host but Studio's.

use crate::common;

use common::{Harness, get, raw_http};
use sasha_service::Role;

const STUDIO: &str = "studio.example.com";
const SANDBOX: &str = "views.example.com";

#[tokio::test]
async fn the_studio_page_and_its_modules() {
    let harness = Harness::new();
    let data = harness.start(Role::DataWorker, &[]).await;
    let core = harness
        .start(
            Role::StudioCore,
            &[
                (
                    "SASHA_DATA_GRPC_URL",
                    format!("https://{}", data.listener("grpc")),
                ),
                ("SASHA_PUBLIC_ORIGIN", format!("https://{STUDIO}")),
                ("SASHA_APP_SANDBOX_ORIGIN", format!("https://{SANDBOX}")),
            ],
        )
        .await;
    let addr = core.listener("http");
    let csp = format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; frame-src https://{SANDBOX}; base-uri 'none'; \
         form-action 'self'; frame-ancestors 'none'"
    );

    let page = get(addr, STUDIO, "/", "").await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(page.header("cache-control"), Some("no-store"));
    assert_eq!(page.header("content-security-policy"), Some(csp.as_str()));
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
    assert!(page.header("set-cookie").is_none());
    assert!(page.body.contains("<title>Sasha</title>"));

    for (file, content_type) in [
        ("app.js", "text/javascript; charset=utf-8"),
        ("host.js", "text/javascript; charset=utf-8"),
        ("studio.css", "text/css; charset=utf-8"),
    ] {
        let asset = get(addr, STUDIO, &format!("/studio/{file}"), "").await;
        assert_eq!(asset.status, 200, "{file}");
        assert_eq!(asset.header("content-type"), Some(content_type), "{file}");
        assert_eq!(asset.header("cache-control"), Some("no-cache"), "{file}");
        assert_eq!(
            asset.header("content-security-policy"),
            Some(csp.as_str()),
            "{file}"
        );
        let etag = asset.header("etag").expect("an ETag").to_owned();
        let again = get(
            addr,
            STUDIO,
            &format!("/studio/{file}"),
            &format!("If-None-Match: {etag}\r\n"),
        )
        .await;
        assert_eq!(again.status, 304, "{file}");
    }
    let head = raw_http(
        addr,
        &format!("HEAD /studio/app.js HTTP/1.1\r\nHost: {STUDIO}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());

    // Unknown assets are the closed 404.
    for path in [
        "/studio/nope.js",
        "/studio/",
        "/studio/../api/me",
        "/index.html",
    ] {
        let missing = get(addr, STUDIO, path, "").await;
        assert_eq!(missing.status, 404, "{path}");
        assert_eq!(missing.json()["code"], "APP_NOT_FOUND", "{path}");
    }
    // Neither the page nor its modules exist for the sandbox or any other Host.
    for host in [SANDBOX, "evil.test", "studio.example.com:8443"] {
        for path in ["/", "/studio/app.js", "/studio/host.js"] {
            let refused = get(addr, host, path, "").await;
            assert_eq!(refused.status, 404, "{host}{path}");
            assert!(!refused.body.contains("Sasha Studio"), "{host}{path}");
        }
    }
}
