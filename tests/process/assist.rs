//! The open app's chat and document upload through the real processes:
//! mcp-gateway's `sasha__chat_execute` and `sasha__files_upload` in front of
//! studio-core (`CoreService.Chat` / `Upload`) talking to a local fake
//! OpenAI-compatible provider (`common::fake_llm`) that streams, stalls, fails
//! and cuts off on demand.
//!
//! The calls come as the Studio page makes them: the session cookie from the
//! Studio origin, `Sasha-App` naming the open app, sessionless MCP.

use crate::common;

use std::time::Duration;

use base64::Engine as _;
use common::Harness;
use common::core_database::CoreStore;
use common::documents;
use common::fake_llm::{Behaviour, FakeLlm};
use common::mcp::{self, Exchange, Mcp, structured, tool_error, tool_names};
use serde_json::{Value, json};
use studio_store::{Scope, UserRole};

const APP: &str = "document-summariser";
const STUDIO: &str = mcp::STUDIO_ORIGIN;

struct World {
    harness: Harness,
    backends: common::Backends,
    store: CoreStore,
    session: String,
    fake: Option<FakeLlm>,
}

impl World {
    /// The summariser example and the `hello` fixture (no chat, no files),
    /// with chat pointing at `fake` (or unconfigured).
    async fn start(fake: Option<FakeLlm>, core_env: &[(&str, String)]) -> World {
        World::start_after(fake, core_env, |_, _| ()).await
    }

    /// [`World::start`], calling `before` with the state folder and the
    /// user's id before studio-core starts.
    async fn start_after(
        fake: Option<FakeLlm>,
        core_env: &[(&str, String)],
        before: impl FnOnce(&std::path::Path, &str),
    ) -> World {
        let harness = Harness::new();
        let apps = harness.path().join("docs/apps");
        common::copy_dir(&common::root().join("examples").join(APP), &apps.join(APP));
        common::copy_dir(&mcp::fixture("hello"), &apps.join("hello"));
        let store = harness.store();
        let staff = store
            .create_user("sam", UserRole::Staff, "correct horse battery")
            .unwrap();
        before(harness.path(), &staff.id);
        let mut env: Vec<(&str, String)> = core_env.to_vec();
        if let Some(fake) = &fake {
            env.push(("SASHA_CHAT_BASE_URL", fake.base_url.clone()));
            env.push(("SASHA_CHAT_MODEL", "fake-model".to_owned()));
        }
        let backends = harness.start_backends_with(&env).await;
        let session = store.create_session(&staff.id).unwrap();
        World {
            harness,
            backends,
            store,
            session,
            fake,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.backends.gateway.listener("http"))
    }

    /// The Studio page with `app` open.
    fn studio(&self, app: &str) -> Mcp {
        Mcp::studio_page(&self.url(), &self.session, app)
    }

    fn fake(&self) -> &FakeLlm {
        self.fake.as_ref().expect("this world has a fake provider")
    }
}

/// One chat turn with a progress token.
async fn chat(client: &mut Mcp, prompt: &str, new_session: bool) -> Exchange {
    client
        .request(
            "tools/call",
            json!({
                "name": "sasha__chat_execute",
                "arguments": {"prompt": prompt, "newSession": new_session},
                "_meta": {"progressToken": "turn"},
            }),
        )
        .await
}

/// The `message` of every progress notification, in order.
fn progress(exchange: &Exchange) -> Vec<String> {
    exchange
        .notifications
        .iter()
        .filter(|note| note["method"] == "notifications/progress")
        .map(|note| {
            assert_eq!(note["params"]["progressToken"], "turn");
            note["params"]["message"].as_str().unwrap().to_owned()
        })
        .collect()
}

fn file(name: &str, data: &[u8]) -> Value {
    json!({
        "name": name,
        "type": "",
        "size": data.len(),
        "dataBase64": base64::engine::general_purpose::STANDARD.encode(data),
    })
}

async fn upload(client: &mut Mcp, files: Vec<Value>) -> Exchange {
    client
        .call("sasha__files_upload", json!({ "files": files }))
        .await
}

/// The stored Markdown documents of the world's only user, as the core
/// database holds them.
fn stored(world: &World) -> Vec<String> {
    let mut names: Vec<String> = world
        .store
        .users()
        .unwrap()
        .iter()
        .flat_map(|user| world.store.upload_names(&user.id).unwrap())
        .collect();
    names.sort();
    names
}

/// The stored document `name` of the world's only user.
fn document(world: &World, name: &str) -> String {
    let user = &world.store.users().unwrap()[0];
    world.store.upload(&user.id, name).unwrap().unwrap()
}

#[tokio::test]
async fn chat_streams_the_growing_text_and_keeps_the_conversation() {
    let fake = FakeLlm::start(Behaviour::Echo).await;
    let world = World::start(Some(fake), &[]).await;
    let mut ui = world.studio(APP);
    let names = tool_names(&ui.request("tools/list", json!({})).await);
    assert!(
        names.contains(&"sasha__chat_execute".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"sasha__files_upload".to_owned()),
        "{names:?}"
    );

    let first = chat(&mut ui, "Summarise the plan", true).await;
    let text = structured(&first)["text"].as_str().unwrap().to_owned();
    assert_eq!(text, "Turn 1: Summarise the plan [documents: none]");
    assert_eq!(first.result()["content"][0]["text"], text.as_str());
    let updates = progress(&first);
    assert!(updates.len() >= 2, "the text streams: {updates:?}");
    for pair in updates.windows(2) {
        assert!(
            pair[1].starts_with(&pair[0]) && pair[1].len() > pair[0].len(),
            "each update is the full, longer text: {updates:?}"
        );
    }
    assert!(text.starts_with(updates.last().unwrap().as_str()));

    // The conversation continues until a new session is asked for.
    let second = chat(&mut ui, "And the risks?", false).await;
    assert_eq!(
        structured(&second)["text"],
        "Turn 2: And the risks? [documents: none]"
    );
    let last = world.fake().requests().last().unwrap().clone();
    let contents: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(contents.contains(&"Summarise the plan"), "{contents:?}");
    assert_eq!(last["model"], "fake-model");
    assert_eq!(last["stream"], true);
    let fresh = chat(&mut ui, "Start over", true).await;
    assert_eq!(
        structured(&fresh)["text"],
        "Turn 1: Start over [documents: none]"
    );

    // A bearer token (a model client) and an app without `chat: true` see
    // neither tool and cannot call them.
    let staff = world.store.user_by_name("sam").unwrap().unwrap();
    let token = mcp::token(&world.store, &staff, &[Scope::ChatUse, Scope::AppsInvoke]);
    let mut model = Mcp::sessionless(&world.url(), &token);
    assert!(
        !tool_names(&model.request("tools/list", json!({})).await)
            .iter()
            .any(|name| name.starts_with("sasha__"))
    );
    let refused = model
        .call("sasha__chat_execute", json!({"prompt": "hi"}))
        .await;
    assert_eq!(refused.error()["code"], -32602);
    let mut hello = world.studio("hello");
    assert!(
        !tool_names(&hello.request("tools/list", json!({})).await)
            .contains(&"sasha__chat_execute".to_owned())
    );
    let refused = hello
        .call("sasha__chat_execute", json!({"prompt": "hi"}))
        .await;
    assert_eq!(refused.error()["code"], -32602);
    // An empty prompt is refused before any request goes out.
    let before = world.fake().requests().len();
    let empty = chat(&mut ui, "   ", false).await;
    assert_eq!(tool_error(&empty)["code"], "APP_INPUT_INVALID");
    assert_eq!(world.fake().requests().len(), before);
}

#[tokio::test]
async fn documents_are_converted_stored_and_referenced_by_chat() {
    let fake = FakeLlm::start(Behaviour::Echo).await;
    let world = World::start(Some(fake), &[]).await;
    let mut ui = world.studio(APP);

    let uploaded = upload(
        &mut ui,
        vec![
            file(
                "Brief.docx",
                &documents::docx(&["Project brief", "Ship the beta in March."]),
            ),
            file(
                "report.pdf",
                &documents::text_pdf(&["Quarterly report", "Revenue grew by 12 percent."]),
            ),
            file("notes.txt", b"plain notes\n"),
            file("costs.csv", b"item,cost\nrent,1200\n"),
            file(
                "../../etc/page.html",
                b"<h1>Title</h1><script>alert(1)</script><p>Body</p>",
            ),
        ],
    )
    .await;
    let files = structured(&uploaded)["files"].clone();
    assert_eq!(
        files,
        json!([
            {"original": "Brief.docx", "converted": "Brief.md"},
            {"original": "report.pdf", "converted": "report.md"},
            {"original": "notes.txt", "converted": "notes.md"},
            {"original": "costs.csv", "converted": "costs.md"},
            {"original": "page.html", "converted": "page.md"},
        ]),
        "descriptors only, with safe names and no paths"
    );
    assert!(
        !uploaded
            .body
            .to_string()
            .contains(&world.harness.path().display().to_string())
    );
    assert_eq!(
        stored(&world),
        ["Brief.md", "costs.md", "notes.md", "page.md", "report.md"]
    );
    // In the core database, not on studio-core's disk.
    assert!(!world.harness.path().join("uploads").exists());
    let page = document(&world, "page.md");
    assert!(
        page.contains("Title") && page.contains("Body") && !page.contains("alert"),
        "{page}"
    );
    let report = document(&world, "report.md");
    assert!(report.contains("Revenue grew by 12 percent"), "{report}");
    // The same name again is stored under a new, unique name.
    let again = ui
        .request(
            "tools/call",
            json!({
                "name": "sasha__files_upload",
                "arguments": {"files": [file("notes.txt", b"newer notes\n")]},
                "_meta": {"progressToken": "turn"},
            }),
        )
        .await;
    assert_eq!(progress(&again), ["converting 1 document"]);
    assert_eq!(
        structured(&again)["files"],
        json!([{"original": "notes.txt", "converted": "notes-2.md"}])
    );

    // A prompt's @references reach the provider with the documents' text.
    let answer = chat(&mut ui, "Compare @Brief.md with @report.md", true).await;
    assert_eq!(
        structured(&answer)["text"],
        "Turn 1: Compare @Brief.md with @report.md [documents: Brief.md, report.md]"
    );
    let sent = world.fake().requests().last().unwrap().to_string();
    assert!(
        sent.contains("Ship the beta in March.") && sent.contains("Revenue grew by 12 percent")
    );
    let missing = chat(&mut ui, "Summarise @nothing-here.md", true).await;
    let envelope = tool_error(&missing);
    assert_eq!(envelope["code"], "APP_INPUT_INVALID");
    assert!(
        envelope["message"]
            .as_str()
            .unwrap()
            .contains("nothing-here.md")
    );
}

/// An upload folder an earlier build left (`UPLOADS_ROOT/<user>/<name>.md`)
/// is imported at boot: its documents keep their names, chat reads them,
/// new uploads go around them, and the folder is left as it was.
#[tokio::test]
async fn an_earlier_builds_upload_folder_is_imported_at_boot() {
    let fake = FakeLlm::start(Behaviour::Echo).await;
    let world = World::start_after(Some(fake), &[], |state, user| {
        let folder = state.join("uploads").join(user);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("notes-3.md"), "Kept from the old build.\n").unwrap();
        std::fs::write(folder.join(".sasha-tmp-00ff"), "half written").unwrap();
    })
    .await;
    assert_eq!(stored(&world), ["notes-3.md"]);
    assert_eq!(document(&world, "notes-3.md"), "Kept from the old build.\n");
    let mut ui = world.studio(APP);
    let answer = chat(&mut ui, "Summarise @notes-3.md", true).await;
    assert_eq!(
        structured(&answer)["text"],
        "Turn 1: Summarise @notes-3.md [documents: notes-3.md]"
    );
    let sent = world.fake().requests().last().unwrap().to_string();
    assert!(sent.contains("Kept from the old build."), "{sent}");
    let uploaded = upload(&mut ui, vec![file("notes-3.txt", b"newer\n")]).await;
    assert_eq!(
        structured(&uploaded)["files"],
        json!([{"original": "notes-3.txt", "converted": "notes-3-2.md"}])
    );
    let folder = world.harness.path().join("uploads");
    let mut left: Vec<String> = std::fs::read_dir(
        folder.join(
            std::fs::read_dir(&folder)
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .file_name(),
        ),
    )
    .unwrap()
    .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
    .collect();
    left.sort();
    assert_eq!(
        left,
        [".sasha-tmp-00ff", "notes-3.md"],
        "the folder is only read"
    );
}

#[tokio::test]
async fn upload_limits_and_refusals() {
    let world = World::start(None, &[]).await;
    let mut ui = world.studio(APP);

    // Eleven files.
    let eleven: Vec<Value> = (0..11).map(|i| file(&format!("n{i}.txt"), b"x")).collect();
    let refused = upload(&mut ui, eleven).await;
    let envelope = tool_error(&refused);
    assert_eq!(envelope["code"], "APP_INPUT_INVALID", "{envelope}");
    // 26 MiB in total (two files of 13 MiB).
    let half = vec![b'a'; 13 * 1024 * 1024];
    let refused = upload(&mut ui, vec![file("a.txt", &half), file("b.txt", &half)]).await;
    assert_eq!(tool_error(&refused)["code"], "APP_RESOURCE_LIMIT");
    // A renamed binary, an encrypted PDF and an unsupported type: per-file
    // reasons, and nothing stored, not even the good file beside them.
    let elf = [&b"\x7fELF\x02\x01\x01\0"[..], &[0u8; 64]].concat();
    let refused = upload(
        &mut ui,
        vec![
            file("fine.txt", b"fine"),
            file("notes.txt", &elf),
            file("secret.pdf", &documents::encrypted_pdf()),
            file("tool.exe", b"MZ"),
        ],
    )
    .await;
    let envelope = tool_error(&refused).clone();
    assert_eq!(envelope["code"], "APP_UPLOAD_FAILED", "{envelope}");
    let reasons: Vec<(String, String)> = envelope["details"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_owned(),
                f["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert_eq!(reasons[0].0, "notes.txt");
    assert_eq!(reasons[1].0, "secret.pdf");
    assert!(reasons[1].1.contains("encrypted"), "{reasons:?}");
    assert_eq!(reasons[2].0, "tool.exe");
    assert!(reasons[2].1.contains("not a supported"), "{reasons:?}");
    assert!(stored(&world).is_empty(), "all or nothing");
    // Not base64.
    let refused = ui
        .call(
            "sasha__files_upload",
            json!({"files": [{"name": "x.txt", "dataBase64": "***"}]}),
        )
        .await;
    assert_eq!(tool_error(&refused)["code"], "APP_INPUT_INVALID");

    // The body limits: an upload over 4 MiB is accepted, anything else over
    // 4 MiB is 413 even when its headers claim to be an upload, and nothing
    // is over 36 MiB.
    let big = vec![b'b'; 5 * 1024 * 1024];
    let accepted = upload(&mut ui, vec![file("big.txt", &big)]).await;
    assert_eq!(structured(&accepted)["files"][0]["converted"], "big.md");
    let http = common::http_client();
    let post = |body: String, name: &str| {
        http.post(world.url())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", mcp::SESSIONLESS)
            .header("mcp-method", "tools/call")
            .header("mcp-name", name)
            .header("cookie", format!("sasha_session={}", world.session))
            .header("origin", STUDIO)
            .header("sasha-app", APP)
            .body(body)
    };
    let padding = "a".repeat(5 * 1024 * 1024);
    let disguised = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"app__hello__x","arguments":{{"pad":"{padding}"}}}}}}"#
    );
    let response = post(disguised, "sasha__files_upload").send().await.unwrap();
    assert_eq!(response.status(), 413);
    let envelope: Value = response.json().await.unwrap();
    assert_eq!(envelope["code"], "APP_RESOURCE_LIMIT");
    // Over 36 MiB is refused from the declared length, before any body.
    let gateway = world.backends.gateway.listener("http");
    let declared = common::raw_http(
        gateway,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: localhost:3007\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {}\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: sasha__files_upload\r\n\
             Cookie: sasha_session={}\r\nOrigin: {STUDIO}\r\nSasha-App: {APP}\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            mcp::SESSIONLESS,
            world.session,
            37 * 1024 * 1024
        ),
    )
    .await;
    assert_eq!(declared.status, 413, "{declared:?}");
}

#[tokio::test]
async fn chat_failures_map_to_the_registry_without_provider_details() {
    // Unconfigured first.
    let world = World::start(None, &[]).await;
    let mut ui = world.studio(APP);
    let unavailable = chat(&mut ui, "hello", true).await;
    let envelope = tool_error(&unavailable);
    assert_eq!(envelope["code"], "APP_CHAT_UNAVAILABLE");
    assert!(
        envelope["message"]
            .as_str()
            .unwrap()
            .contains("SASHA_CHAT_BASE_URL")
    );
    drop(ui);
    drop(world);

    let fake = FakeLlm::start(Behaviour::Fail(500)).await;
    let world = World::start(Some(fake), &[("SASHA_CHAT_IDLE_SECS", "1".to_owned())]).await;
    let mut ui = world.studio(APP);
    let failed = chat(&mut ui, "hello", true).await;
    let envelope = tool_error(&failed);
    assert_eq!(envelope["code"], "APP_CHAT_FAILED");
    assert_eq!(envelope["retryable"], true);
    assert!(!failed.body.to_string().contains(FakeLlm::SECRET));

    world.fake().set_behaviour(Behaviour::Fail(401));
    let failed = chat(&mut ui, "hello", true).await;
    assert_eq!(tool_error(&failed)["code"], "APP_CHAT_FAILED");
    assert_eq!(tool_error(&failed)["retryable"], false);
    assert!(!failed.body.to_string().contains(FakeLlm::SECRET));

    world.fake().set_behaviour(Behaviour::CutMidStream(vec![
        "Half ".into(),
        "an answer".into(),
    ]));
    let cut = chat(&mut ui, "hello", true).await;
    assert_eq!(tool_error(&cut)["code"], "APP_CHAT_FAILED");

    world
        .fake()
        .set_behaviour(Behaviour::Slow(Duration::from_secs(3)));
    let slow = chat(&mut ui, "hello", true).await;
    assert_eq!(tool_error(&slow)["code"], "APP_TIMEOUT");

    // A failed turn leaves the conversation as it was.
    world.fake().set_behaviour(Behaviour::Echo);
    let ok = chat(&mut ui, "finally", false).await;
    assert_eq!(structured(&ok)["text"], "Turn 1: finally [documents: none]");
}

#[tokio::test]
async fn one_turn_at_a_time_and_a_closed_view_cancels_the_provider_request() {
    let words: Vec<String> = (0..40).map(|i| format!("word{i} ")).collect();
    let fake = FakeLlm::start(Behaviour::Stream(words, Duration::from_millis(100))).await;
    let world = World::start(Some(fake), &[]).await;

    // A long turn runs; a second one for the same app is APP_BUSY while data
    // calls (here tools/list and a read of the other app) keep flowing.
    let mut first = world.studio(APP);
    let running = tokio::spawn(async move { chat(&mut first, "long answer", true).await });
    let provider = world.fake.as_ref().unwrap();
    common::eventually(
        Duration::from_secs(10),
        "the long turn reaching the provider",
        || async { !provider.requests().is_empty() },
    )
    .await;
    let mut second = world.studio(APP);
    let busy = chat(&mut second, "another", true).await;
    let envelope = tool_error(&busy);
    assert_eq!(envelope["code"], "APP_BUSY");
    assert_eq!(envelope["retryable"], true);
    assert_eq!(second.request("tools/list", json!({})).await.status, 200);
    let finished = running.await.unwrap();
    assert!(
        structured(&finished)["text"]
            .as_str()
            .unwrap()
            .starts_with("word0 word1")
    );

    // The view closes mid-turn: the HTTP request is dropped, and the
    // provider's request is cancelled too. The first turn's response is
    // counted once the fake has finished writing it, which may be after
    // studio-core read it to the end.
    assert!(
        world
            .fake()
            .wait_for_completed(1, Duration::from_secs(10))
            .await,
        "the first turn's provider response was written to the end"
    );
    let completed = world
        .fake()
        .completed
        .load(std::sync::atomic::Ordering::SeqCst);
    let body = mcp::chat_turn_body("to be cancelled");
    let mut response = common::http_client()
        .post(world.url())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", mcp::SESSIONLESS)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "sasha__chat_execute")
        .header("cookie", format!("sasha_session={}", world.session))
        .header("origin", STUDIO)
        .header("sasha-app", APP)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let first_chunk = response.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first_chunk).contains("notifications/progress"));
    drop(response);
    assert!(
        world
            .fake()
            .wait_for_disconnects(1, Duration::from_secs(10))
            .await,
        "the provider request is cancelled when the view goes away"
    );
    assert_eq!(
        world
            .fake()
            .completed
            .load(std::sync::atomic::Ordering::SeqCst),
        completed
    );
    // And the app is free again at once.
    world.fake().set_behaviour(Behaviour::Echo);
    let mut again = world.studio(APP);
    let mut ok = chat(&mut again, "next", true).await;
    for _ in 0..20 {
        // The cancelled turn may still be unwinding for a moment.
        if ok.result()["isError"] != true {
            break;
        }
        assert_eq!(tool_error(&ok)["code"], "APP_BUSY");
        tokio::time::sleep(Duration::from_millis(100)).await;
        ok = chat(&mut again, "next", true).await;
    }
    assert_eq!(structured(&ok)["text"], "Turn 1: next [documents: none]");
}
