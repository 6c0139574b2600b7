//! What one `/mcp` body may cost, decided before rmcp reads it and only
//! once the caller is known: the 4 MiB bound (declared lengths refused
//! unread, chunked bodies cut as they arrive), the JSON bounds (values and
//! nesting), the 36 MiB allowance only for the upload call of a caller the
//! upload tool exists for, the few permits large bodies wait for, and hostile
//! requests (foreign origins, rebound hosts) refused cleanly.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::{Body, Bytes};
use serde_json::{Value, json};

use crate::mcp::{SESSIONLESS, STUDIO_ORIGIN, tool_error, tool_names};
use crate::world::{World, summariser};

const MIB: usize = 1024 * 1024;
const UPLOAD: &str = "sasha__files_upload";

/// `POST /mcp` with `headers` and `body`.
fn post(headers: &[(&str, String)], body: Body) -> http::Request<Body> {
    let mut request = http::Request::post("/mcp")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", SESSIONLESS);
    for (name, value) in headers {
        request = request.header(*name, value.as_str());
    }
    request.body(body).unwrap()
}

fn bearer(token: &str) -> Vec<(&'static str, String)> {
    vec![("authorization", format!("Bearer {token}"))]
}

/// The Studio page of `session` with `app` open.
fn page(session: &str, app: &str) -> Vec<(&'static str, String)> {
    vec![
        ("cookie", format!("sasha_session={session}")),
        ("origin", STUDIO_ORIGIN.to_owned()),
        ("sasha-app", app.to_owned()),
    ]
}

/// `headers` naming a `tools/call` of `tool` (SEP-2243).
fn naming(mut headers: Vec<(&'static str, String)>, tool: &str) -> Vec<(&'static str, String)> {
    headers.push(("mcp-method", "tools/call".to_owned()));
    headers.push(("mcp-name", tool.to_owned()));
    headers
}

/// One sessionless `tools/call` of `tool` with `arguments`, as text.
fn call_body(tool: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{SESSIONLESS}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"t","version":"1"}}}}}}}}"#
    )
}

/// A body that records whether anyone read it, and fails if so.
fn unread_body(read: Arc<AtomicBool>) -> Body {
    Body::from_stream(futures::stream::poll_fn(move |_| {
        read.store(true, Ordering::SeqCst);
        std::task::Poll::Ready(Some(Err::<Bytes, _>(std::io::Error::other(
            "this body must not be read",
        ))))
    }))
}

/// A body sent in 64 KiB chunks with no declared length.
fn chunked(text: String) -> Body {
    let chunks: Vec<Result<Bytes, std::io::Error>> = text
        .into_bytes()
        .chunks(64 * 1024)
        .map(|chunk| Ok(Bytes::copy_from_slice(chunk)))
        .collect();
    Body::from_stream(futures::stream::iter(chunks))
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

/// A refusal's status and envelope code.
fn refusal(status: u16, body: &[u8]) -> (u16, String) {
    let body = json_of(body);
    for key in ["code", "message", "retryable", "diagnosticId"] {
        assert!(
            body.get(key).is_some(),
            "{status}: no envelope {key}: {body}"
        );
    }
    (status, body["code"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn bodies_are_bounded_before_they_are_parsed() {
    let world = World::with_packages(&[&summariser()]).await;
    let staff = bearer(&world.staff_token);
    let session = world.session(&world.staff);
    let too_large = (413, "APP_RESOURCE_LIMIT".to_owned());

    // A declared length over 4 MiB is refused without reading a byte, for
    // every caller who may not upload, whatever the request names.
    for (who, headers) in [
        ("token", staff.clone()),
        ("token naming the upload", naming(staff.clone(), UPLOAD)),
        (
            "page without files",
            naming(page(&session, "expense-log"), UPLOAD),
        ),
        (
            "uploading page, another tool",
            page(&session, "document-summariser"),
        ),
    ] {
        let read = Arc::new(AtomicBool::new(false));
        let mut headers = headers;
        headers.push(("content-length", (4 * MIB + 1).to_string()));
        let (status, _, body) = world.send(post(&headers, unread_body(read.clone()))).await;
        assert_eq!(refusal(status, &body), too_large, "{who}");
        assert!(!read.load(Ordering::SeqCst), "{who}: the body was read");
    }

    // Undeclared, it is cut as it arrives; within 4 MiB, the JSON bounds
    // hold: 10,000 values, 32 levels.
    let padded = call_body(
        "app__expense_log__expenses__list",
        &format!(r#"{{"pad":"{}"}}"#, "a".repeat(4 * MIB)),
    );
    let values = call_body(
        "app__expense_log__expenses__list",
        &format!("{{\"pad\":[{}0]}}", "0,".repeat(10_000)),
    );
    let deep = call_body(
        "app__expense_log__expenses__list",
        &format!("{{\"pad\":{}1{}}}", "[".repeat(40), "]".repeat(40)),
    );
    for (what, text) in [("5 MiB", padded), ("values", values), ("depth", deep)] {
        let (status, _, body) = world.send(post(&staff, chunked(text))).await;
        let (status, code) = refusal(status, &body);
        assert_eq!(
            (status, code.as_str()),
            (413, "APP_RESOURCE_LIMIT"),
            "{what}"
        );
    }

    // The upload allowance: only the upload call itself, only from the
    // Studio page of an app declaring `files: true` (and only for callers
    // with a grant on it), and never past 36 MiB declared.
    let not_base64 = format!(
        r#"{{"files":[{{"name":"a.txt","dataBase64":"{}"}}]}}"#,
        "!".repeat(5 * MIB)
    );
    let upload = call_body(UPLOAD, &not_base64);
    let uploader = naming(page(&session, "document-summariser"), UPLOAD);
    let (status, _, body) = world
        .send(post(&uploader, Body::from(upload.clone())))
        .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let answer = json_of(&body);
    assert_eq!(
        answer["result"]["structuredContent"]["error"]["code"], "APP_INPUT_INVALID",
        "admitted, parsed and refused by the tool: {answer}"
    );
    for (who, headers) in [
        ("token", naming(staff.clone(), UPLOAD)),
        (
            "page without files",
            naming(page(&session, "expense-log"), UPLOAD),
        ),
        (
            "member without a grant",
            naming(
                page(&world.session(&world.member), "document-summariser"),
                UPLOAD,
            ),
        ),
    ] {
        let (status, _, body) = world.send(post(&headers, Body::from(upload.clone()))).await;
        assert_eq!(refusal(status, &body), too_large, "{who}");
    }
    let wrapped = call_body(
        "app__expense_log__expenses__list",
        &format!(r#"{{"pad":"{}"}}"#, "a".repeat(5 * MIB)),
    );
    let (status, _, body) = world.send(post(&uploader, Body::from(wrapped))).await;
    assert_eq!(
        refusal(status, &body),
        too_large,
        "over 4 MiB, a body must be the upload call it names"
    );
    let read = Arc::new(AtomicBool::new(false));
    let mut huge = uploader.clone();
    huge.push(("content-length", (36 * MIB + 1).to_string()));
    let (status, _, body) = world.send(post(&huge, unread_body(read.clone()))).await;
    assert_eq!(refusal(status, &body), too_large);
    assert!(
        json_of(&body)["message"]
            .as_str()
            .unwrap()
            .contains("25 MiB")
    );
    assert!(!read.load(Ordering::SeqCst));
}

/// Bodies over 256 KiB hold one of two permits from before they are read
/// until answered; a third is `APP_BUSY` (429, retryable) at once, unread.
#[tokio::test]
async fn large_bodies_wait_for_a_few_permits() {
    let world = World::start().await;
    let staff = naming(
        bearer(&world.staff_token),
        "app__expense_log__expenses__list",
    );
    let text = call_body(
        "app__expense_log__expenses__list",
        &format!(r#"{{"pad":"{}"}}"#, "a".repeat(300 * 1024)),
    );
    let mut held = Vec::new();
    let mut releases = Vec::new();
    for _ in 0..2 {
        let (reading, started) = tokio::sync::oneshot::channel::<()>();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let bytes = Bytes::from(text.clone());
        // Read only once its permit is held; sent once released.
        let body = futures::stream::once(async move {
            let _ = reading.send(());
            let _ = released.await;
            Ok::<_, std::io::Error>(bytes)
        });
        let mut headers = staff.clone();
        headers.push(("content-length", text.len().to_string()));
        let request = post(&headers, Body::from_stream(body));
        let router = world.router();
        held.push(tokio::spawn(async move {
            use http_body_util::BodyExt as _;
            use tower::ServiceExt as _;
            let response = router.oneshot(request).await.unwrap();
            let status = response.status().as_u16();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (status, json_of(&body))
        }));
        started.await.unwrap();
        releases.push(release);
    }
    let read = Arc::new(AtomicBool::new(false));
    let mut headers = staff.clone();
    headers.push(("content-length", text.len().to_string()));
    let (status, _, body) = world.send(post(&headers, unread_body(read.clone()))).await;
    assert_eq!(refusal(status, &body), (429, "APP_BUSY".to_owned()));
    assert_eq!(json_of(&body)["retryable"], true);
    assert!(!read.load(Ordering::SeqCst));
    for release in releases {
        release.send(()).unwrap();
    }
    for request in held {
        // Admitted and parsed: rmcp finds the arguments refused by the
        // tool's schema (`pad` is no list argument).
        let (status, body) = request.await.unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["result"]["structuredContent"]["error"]["code"],
            "APP_INPUT_INVALID"
        );
    }
    // The permits came back.
    let (status, _, body) = world.send(post(&staff, Body::from(text))).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
}

#[tokio::test]
async fn hostile_requests_are_refused_cleanly() {
    let world = World::start().await;
    let staff = bearer(&world.staff_token);
    // Nesting far beyond any parser's stack: a clean refusal, no crash.
    let deep = call_body(
        "app__expense_log__expenses__list",
        &format!(
            "{{\"where\":{}1{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        ),
    );
    let (status, _, body) = world.send(post(&staff, Body::from(deep))).await;
    assert_eq!(
        refusal(status, &body),
        (413, "APP_RESOURCE_LIMIT".to_owned())
    );
    // Browser requests from another origin and unknown hosts are refused even
    // with a valid token (DNS rebinding, cross-site requests).
    let mut foreign = staff.clone();
    foreign.push((
        "origin",
        "https://studio.example.com.attacker.test".to_owned(),
    ));
    let (status, _, body) = world.send(post(&foreign, Body::from("{}"))).await;
    assert_eq!(
        refusal(status, &body),
        (403, "APP_ACCESS_DENIED".to_owned())
    );
    let mut rebound = post(&staff, Body::from("{}"));
    rebound
        .headers_mut()
        .insert("host", http::HeaderValue::from_static("evil.test"));
    let (status, _, body) = world.send(rebound).await;
    assert!((400..500).contains(&status), "{status}");
    refusal(status, &body);
    // Still serving.
    let mut model = world.client(&world.staff_token);
    assert!(!tool_names(&model.request("tools/list", json!({})).await).is_empty());
    // A refusal that is a tool result carries the envelope too.
    let refused = model
        .call(
            "app__expense_log__expenses__list",
            json!({"sql": "DROP TABLE expenses"}),
        )
        .await;
    assert_eq!(tool_error(&refused)["code"], "APP_INPUT_INVALID");
}
