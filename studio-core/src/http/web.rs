//! The Studio web app: `GET /` (the page) and `GET /studio/<file>` (its
//! build-free ES modules and stylesheet), embedded in the binary.
//!
//! The page is the MCP Apps host for one open app (`web/host.js`); it frames
//! the sandbox origin and nothing else. Every answer here carries the page's
//! own strict CSP: scripts, styles and connections only from the Studio origin
//! itself, frames only from `SASHA_APP_SANDBOX_ORIGIN`, no inline code, no
//! framing of Studio. The page is `no-store`; assets are `no-cache` with an
//! `ETag` (their URLs carry no content hash, so a browser must revalidate).
//! Nothing here reads a cookie or calls another process: the page talks to
//! `/api` and `/mcp` from the browser.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use sasha_proto::{AppError, ErrorCode};
use sasha_service::config::Origin;
use sha2::{Digest, Sha256};

/// One embedded file of the web app.
struct Asset {
    /// The name under `/studio/`.
    name: &'static str,
    content_type: &'static str,
    bytes: &'static str,
}

const JAVASCRIPT: &str = "text/javascript; charset=utf-8";

/// Every asset `/studio/<name>` serves; any other name is the 404.
const ASSETS: &[Asset] = &[
    Asset {
        name: "studio.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_str!("../../web/studio.css"),
    },
    Asset {
        name: "app.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/app.js"),
    },
    Asset {
        name: "api.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/api.js"),
    },
    Asset {
        name: "host.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/host.js"),
    },
    Asset {
        name: "access.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/access.js"),
    },
    Asset {
        name: "recovery.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/recovery.js"),
    },
    Asset {
        name: "activity.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/activity.js"),
    },
    Asset {
        name: "connect.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/connect.js"),
    },
    Asset {
        name: "dom.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/dom.js"),
    },
    Asset {
        name: "newapp.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/newapp.js"),
    },
    Asset {
        name: "history.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/history.js"),
    },
    Asset {
        name: "drafts.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/drafts.js"),
    },
    Asset {
        name: "withdrawn.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/withdrawn.js"),
    },
    Asset {
        name: "appstudio.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/appstudio.js"),
    },
    Asset {
        name: "assistant.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/assistant.js"),
    },
    Asset {
        name: "users.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/users.js"),
    },
    Asset {
        name: "tokens.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/tokens.js"),
    },
    Asset {
        name: "orientation.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/orientation.js"),
    },
    Asset {
        name: "replication.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/replication.js"),
    },
    // Generated from Rust (sasha_contract::browser), checked by
    // contract/tests/browser_constants.rs.
    Asset {
        name: "vocabulary.js",
        content_type: JAVASCRIPT,
        bytes: include_str!("../../web/vocabulary.js"),
    },
];

/// The page, with this build's version filled in (`hostInfo.version`) and
/// the New app form's bounds (the contract's, which studio-core enforces).
static INDEX_HTML: LazyLock<String> = LazyLock::new(|| {
    include_str!("../../web/index.html")
        .replace("__SASHA_VERSION__", sasha_service::VERSION)
        .replace(
            "__SASHA_APP_NAME_MAX__",
            &sasha_contract::tools::CREATE_APP_MAX_NAME_CHARS.to_string(),
        )
        .replace(
            "__SASHA_APP_DESCRIPTION_MAX__",
            &sasha_contract::tools::CREATE_APP_MAX_DESCRIPTION_CHARS.to_string(),
        )
});

/// Each asset's strong `ETag`: the first 16 bytes of its sha256, quoted.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|asset| {
            let digest = Sha256::digest(asset.bytes.as_bytes());
            HeaderValue::from_str(&format!("\"{}\"", hex::encode(&digest[..16])))
                .expect("a hex ETag is a valid header value")
        })
        .collect()
});

/// The page's Content-Security-Policy: nothing inline, nothing from another
/// origin but frames of the sandbox origin.
pub(super) fn content_security_policy(sandbox: &Origin) -> String {
    format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; frame-src {sandbox}; base-uri 'none'; form-action 'self'; \
         frame-ancestors 'none'",
        sandbox = sandbox.as_str()
    )
}

/// `GET /` and `GET /studio/{file}`. The caller restricts these to the Studio
/// Host like every other Studio route.
pub(super) fn routes<S: Clone + Send + Sync + 'static>(sandbox: &Origin) -> axum::Router<S> {
    let csp = HeaderValue::from_str(&content_security_policy(sandbox))
        .expect("an origin is a valid header value");
    let page_csp = csp.clone();
    axum::Router::new()
        .route("/", get(move || page(page_csp.clone())))
        .route(
            "/studio/{file}",
            get(move |Path(file): Path<String>, headers: HeaderMap| {
                asset(file, headers, csp.clone())
            }),
        )
}

/// The answer to anything Studio does not serve: the envelope's 404.
pub(super) async fn not_found() -> Response {
    AppError::from_code(ErrorCode::NotFound).into_response()
}

async fn page(csp: HeaderValue) -> Response {
    let mut response = (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        INDEX_HTML.as_str(),
    )
        .into_response();
    finish(response.headers_mut(), csp, "no-store");
    response
}

async fn asset(file: String, headers: HeaderMap, csp: HeaderValue) -> Response {
    let Some(index) = ASSETS.iter().position(|asset| asset.name == file) else {
        return not_found().await;
    };
    let asset = &ASSETS[index];
    let etag = ETAGS[index].clone();
    let unchanged = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|tags| {
            tags.split(',')
                .any(|tag| tag.trim() == "*" || tag.trim() == etag.to_str().unwrap_or_default())
        });
    let mut response = if unchanged {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )],
            asset.bytes,
        )
            .into_response()
    };
    response.headers_mut().insert(header::ETAG, etag);
    finish(response.headers_mut(), csp, "no-cache");
    response
}

fn finish(headers: &mut HeaderMap, csp: HeaderValue, cache: &'static str) {
    sasha_service::web::insert_baseline_headers(headers);
    headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use http::Request;
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    use super::*;

    fn router() -> axum::Router {
        routes(&Origin::parse("https://views.example.com").unwrap()).fallback(not_found)
    }

    async fn get(path: &str, extra: &[(&str, &str)]) -> (StatusCode, HeaderMap, String) {
        let mut request = Request::get(path);
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        let response = router()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        (
            parts.status,
            parts.headers,
            String::from_utf8(bytes.to_vec()).unwrap(),
        )
    }

    fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
        headers
            .get(name)
            .unwrap_or_else(|| panic!("no {name}"))
            .to_str()
            .unwrap()
    }

    const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
        img-src 'self' data:; connect-src 'self'; frame-src https://views.example.com; \
        base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

    #[tokio::test]
    async fn the_page_is_no_store_html_under_the_strict_policy() {
        let (status, headers, body) = get("/", &[]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(header(&headers, "content-type"), "text/html; charset=utf-8");
        assert_eq!(header(&headers, "cache-control"), "no-store");
        assert_eq!(header(&headers, "content-security-policy"), CSP);
        assert_eq!(header(&headers, "x-content-type-options"), "nosniff");
        assert_eq!(header(&headers, "referrer-policy"), "no-referrer");
        assert!(body.contains("<title>Sasha</title>"));
        assert!(body.contains(sasha_service::VERSION));
        assert!(!body.contains("__SASHA_VERSION__"));
        // Nothing inline: the policy would block it anyway.
        assert!(!body.contains("<style"));
        assert!(!body.contains(" style="));
        assert!(!body.contains("<script>"));
        assert!(body.contains(r#"<script type="module" src="/studio/app.js"></script>"#));
    }

    #[tokio::test]
    async fn every_asset_has_its_content_type_and_revalidates() {
        // Every page file is served, each with its kind's type.
        let served: Vec<&str> = ASSETS.iter().map(|asset| asset.name).collect();
        for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/web")).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".js") || name.ends_with(".css") {
                assert!(served.contains(&name.as_str()), "web/{name} is not served");
            }
        }
        for (name, content_type) in ASSETS.iter().map(|asset| (asset.name, asset.content_type)) {
            let expected = if name.ends_with(".js") {
                JAVASCRIPT
            } else {
                "text/css; charset=utf-8"
            };
            assert_eq!(content_type, expected, "{name}");
            let (status, headers, body) = get(&format!("/studio/{name}"), &[]).await;
            assert_eq!(status, StatusCode::OK, "{name}");
            assert_eq!(header(&headers, "content-type"), content_type, "{name}");
            assert_eq!(header(&headers, "cache-control"), "no-cache", "{name}");
            assert_eq!(header(&headers, "content-security-policy"), CSP, "{name}");
            assert_eq!(header(&headers, "x-content-type-options"), "nosniff");
            assert!(!body.is_empty());
            let etag = header(&headers, "etag").to_owned();
            let (status, headers, body) =
                get(&format!("/studio/{name}"), &[("if-none-match", &etag)]).await;
            assert_eq!(status, StatusCode::NOT_MODIFIED, "{name}");
            assert_eq!(header(&headers, "etag"), etag);
            assert!(body.is_empty());
            let (status, ..) = get(
                &format!("/studio/{name}"),
                &[("if-none-match", "\"other\"")],
            )
            .await;
            assert_eq!(status, StatusCode::OK);
        }
    }

    #[tokio::test]
    async fn every_module_the_page_imports_is_served() {
        // Each `from "./x.js"` in an embedded module names an embedded asset.
        for asset in ASSETS {
            for import in asset.bytes.split("from \"./").skip(1) {
                let name = import.split('"').next().unwrap();
                assert!(
                    ASSETS.iter().any(|other| other.name == name),
                    "{} imports {name}, which is not served",
                    asset.name
                );
            }
        }
    }

    #[tokio::test]
    async fn the_page_carries_the_new_app_bounds_of_the_contract() {
        let (_, _, body) = get("/", &[]).await;
        assert!(
            !body.contains("__SASHA_"),
            "every placeholder is filled: {body}"
        );
        for (name, bound) in [
            (
                "sasha-app-name-max",
                sasha_contract::tools::CREATE_APP_MAX_NAME_CHARS,
            ),
            (
                "sasha-app-description-max",
                sasha_contract::tools::CREATE_APP_MAX_DESCRIPTION_CHARS,
            ),
        ] {
            let meta = format!(r#"<meta name="{name}" content="{bound}">"#);
            assert!(body.contains(&meta), "{meta} in {body}");
        }
    }

    #[tokio::test]
    async fn unknown_assets_are_the_closed_404() {
        for path in [
            "/studio/",
            "/studio",
            "/studio/nope.js",
            "/studio/APP.JS",
            "/studio/app.js/x",
            "/studio/..%2findex.html",
            "/studio/%2e%2e",
            "/index.html",
            "/studio/index.html",
        ] {
            let (status, _, body) = get(path, &[]).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
            assert!(body.contains("APP_NOT_FOUND"), "{path}: {body}");
        }
    }
}
