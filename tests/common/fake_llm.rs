//! A fake OpenAI-compatible chat provider for tests: `POST /v1/chat/completions`
//! on a free loopback port, answering with a scripted server-sent event stream.
//!
//! It records every request body and `Authorization` header, and counts the
//! requests whose client went away before the answer was complete, so a test
//! can assert that an upstream request was cancelled.
//!
//! Used by the process tests (`tests/common`) and, through a `#[path]` module,
//! by studio-assistant's provider tests and studio-core's assistant router
//! tests; it depends only on axum, tokio and serde_json, which all have.
#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// What the fake answers.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// A role chunk, these content deltas with `delay` before each, a
    /// `finish_reason` chunk and `data: [DONE]`.
    Stream(Vec<String>, Duration),
    /// Nothing at all (not even headers) for this long, then a short answer.
    Slow(Duration),
    /// This status with an OpenAI-style error body that mentions
    /// [`FakeLlm::SECRET`], which must never reach an app.
    Fail(u16),
    /// These deltas, then the connection is cut without `[DONE]`.
    CutMidStream(Vec<String>),
    /// Streams back, word by word with a short delay, a deterministic summary:
    /// `Turn <n>: <the last user message> [documents: <names>]`, where `n`
    /// counts the user messages and the names are those of the
    /// `<document name="…">` blocks in the system message (`none` if none).
    Echo,
    /// This exact body as `text/event-stream`, for parser tests.
    Raw(String),
    /// Answers each request with the next step of a script (the Studio
    /// assistant's rounds); once the script is used up, a short text.
    Script(Arc<Mutex<std::collections::VecDeque<Step>>>),
}

/// One scripted answer.
#[derive(Clone)]
pub enum Step {
    /// Streamed text.
    Text(String),
    /// Tool calls `(name, arguments)`, each call's JSON arguments streamed in
    /// two pieces.
    Calls(Vec<(String, Value)>),
    /// A tool call whose arguments are this raw text (not JSON).
    RawCall(String, String),
    /// The step is made from the request (the conversation so far).
    Made(Arc<dyn Fn(&Value) -> Step + Send + Sync>),
    /// This status with an error body.
    Fail(u16),
    /// Nothing at all for this long.
    Slow(Duration),
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Text(text) => write!(f, "Text({text:?})"),
            Step::Calls(calls) => write!(f, "Calls({calls:?})"),
            Step::RawCall(name, raw) => write!(f, "RawCall({name}, {raw:?})"),
            Step::Made(_) => f.write_str("Made(..)"),
            Step::Fail(status) => write!(f, "Fail({status})"),
            Step::Slow(delay) => write!(f, "Slow({delay:?})"),
        }
    }
}

/// A script of steps, for [`Behaviour::Script`].
pub fn script(steps: Vec<Step>) -> Behaviour {
    Behaviour::Script(Arc::new(Mutex::new(steps.into())))
}

/// The text of the last tool result in `request`'s messages.
pub fn last_tool_result(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "tool"))
        .and_then(|message| message["content"].as_str())
        .unwrap_or("")
        .to_owned()
}

/// A running fake. Dropping it stops the listener.
pub struct FakeLlm {
    /// `http://127.0.0.1:<port>/v1`, for `SASHA_CHAT_BASE_URL`.
    pub base_url: String,
    /// Every request body, in arrival order (`null` if it was not JSON).
    pub requests: Arc<Mutex<Vec<Value>>>,
    /// Every request's `Authorization` header, in arrival order.
    pub authorizations: Arc<Mutex<Vec<Option<String>>>>,
    /// Requests whose client disconnected before the answer was complete.
    pub disconnects: Arc<AtomicUsize>,
    /// Requests answered to the end.
    pub completed: Arc<AtomicUsize>,
    behaviour: Arc<Mutex<Behaviour>>,
    server: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct Shared {
    requests: Arc<Mutex<Vec<Value>>>,
    authorizations: Arc<Mutex<Vec<Option<String>>>>,
    disconnects: Arc<AtomicUsize>,
    completed: Arc<AtomicUsize>,
    behaviour: Arc<Mutex<Behaviour>>,
}

impl FakeLlm {
    /// Text in every [`Behaviour::Fail`] body; an app must never see it.
    pub const SECRET: &'static str = "provider-secret-detail-sk-fake";

    /// Starts the fake on `127.0.0.1:0`.
    pub async fn start(behaviour: Behaviour) -> FakeLlm {
        let shared = Shared {
            requests: Arc::default(),
            authorizations: Arc::default(),
            disconnects: Arc::default(),
            completed: Arc::default(),
            behaviour: Arc::new(Mutex::new(behaviour)),
        };
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(completions))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake chat provider");
        let addr = listener.local_addr().expect("local address");
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeLlm {
            base_url: format!("http://{addr}/v1"),
            requests: shared.requests,
            authorizations: shared.authorizations,
            disconnects: shared.disconnects,
            completed: shared.completed,
            behaviour: shared.behaviour,
            server,
        }
    }

    /// Changes what later requests get.
    pub fn set_behaviour(&self, behaviour: Behaviour) {
        *self.behaviour.lock().unwrap() = behaviour;
    }

    /// The recorded request bodies so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits until at least `count` clients disconnected early; false if that
    /// did not happen `within`.
    pub async fn wait_for_disconnects(&self, count: usize, within: Duration) -> bool {
        wait_until(&self.disconnects, count, within).await
    }

    /// Waits until at least `count` responses were written to the end; false
    /// if that did not happen `within`. The client may have read a whole
    /// stream before the writing task counts it.
    pub async fn wait_for_completed(&self, count: usize, within: Duration) -> bool {
        wait_until(&self.completed, count, within).await
    }
}

/// Polls `counter`: it is moved by the fake's connection tasks as real
/// sockets close, so real time must pass (paused time would stop the sockets'
/// deadlines, not the peer).
async fn wait_until(counter: &AtomicUsize, count: usize, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if counter.load(Ordering::SeqCst) >= count {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    counter.load(Ordering::SeqCst) >= count
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Counts a request as disconnected if dropped before [`Watch::complete`]:
/// held by the handler while it waits, then by the task writing the body.
struct Watch {
    shared: Shared,
    complete: bool,
}

impl Watch {
    fn complete(mut self) {
        self.complete = true;
        self.shared.completed.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if !self.complete {
            self.shared.disconnects.fetch_add(1, Ordering::SeqCst);
        }
    }
}

async fn completions(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.requests.lock().unwrap().push(request.clone());
    shared.authorizations.lock().unwrap().push(
        headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned),
    );
    let behaviour = shared.behaviour.lock().unwrap().clone();
    let watch = Watch {
        shared: shared.clone(),
        complete: false,
    };
    match behaviour {
        Behaviour::Fail(status) => {
            watch.complete();
            let body = json!({"error": {
                "message": format!("Incorrect API key provided: {}", FakeLlm::SECRET),
                "type": "invalid_request_error",
            }});
            Response::builder()
                .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body.to_string()))
                .unwrap()
        }
        Behaviour::Slow(delay) => {
            // The watch lives in this future: if the client gives up, axum
            // drops the future and the watch counts the disconnect.
            tokio::time::sleep(delay).await;
            stream(watch, frames(&["slow ", "answer"]), Duration::ZERO, false)
        }
        Behaviour::Stream(deltas, delay) => {
            let deltas: Vec<&str> = deltas.iter().map(String::as_str).collect();
            stream(watch, frames(&deltas), delay, false)
        }
        Behaviour::CutMidStream(deltas) => {
            let deltas: Vec<&str> = deltas.iter().map(String::as_str).collect();
            let mut frames = frames(&deltas);
            frames.truncate(frames.len() - 2); // no finish_reason, no [DONE]
            stream(watch, frames, Duration::ZERO, true)
        }
        Behaviour::Echo => {
            let text = echo(&request);
            let words: Vec<String> = text.split_inclusive(' ').map(str::to_owned).collect();
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            stream(watch, frames(&words), Duration::from_millis(15), false)
        }
        Behaviour::Raw(body) => stream(watch, vec![body], Duration::ZERO, false),
        Behaviour::Script(steps) => {
            let mut step = steps
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| Step::Text("That is all I was scripted to do.".to_owned()));
            while let Step::Made(make) = step {
                step = make(&request);
            }
            match step {
                Step::Text(text) => {
                    let words: Vec<String> = text.split_inclusive(' ').map(str::to_owned).collect();
                    let words: Vec<&str> = words.iter().map(String::as_str).collect();
                    stream(watch, frames(&words), Duration::from_millis(5), false)
                }
                Step::Calls(calls) => stream(watch, call_frames(&calls), Duration::ZERO, false),
                Step::RawCall(name, raw) => {
                    let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_raw", "type": "function", "function": {"name": name, "arguments": raw}}]}, "finish_reason": null}]});
                    let done = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
                    stream(
                        watch,
                        vec![
                            format!("data: {chunk}\n\n"),
                            format!("data: {done}\n\n"),
                            "data: [DONE]\n\n".to_owned(),
                        ],
                        Duration::ZERO,
                        false,
                    )
                }
                Step::Fail(status) => {
                    watch.complete();
                    Response::builder()
                        .status(
                            StatusCode::from_u16(status)
                                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                        )
                        .header(header::CONTENT_TYPE, "application/json")
                        .body(Body::from(
                            json!({"error": {"message": FakeLlm::SECRET}}).to_string(),
                        ))
                        .unwrap()
                }
                Step::Slow(delay) => {
                    // Real time: the client waiting on it is studio-core, in
                    // another process, whose idle limit is what is tested.
                    tokio::time::sleep(delay).await;
                    stream(watch, frames(&["slow"]), Duration::ZERO, false)
                }
                Step::Made(_) => unreachable!("made steps are resolved above"),
            }
        }
    }
}

/// The SSE frames of an answer asking for `calls`: each call's id and name,
/// then its JSON arguments in two pieces (as providers stream them), then
/// `finish_reason: tool_calls` and `[DONE]`.
pub fn call_frames(calls: &[(String, Value)]) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        let chunk = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    };
    let mut frames = vec![chunk(
        json!({"role": "assistant", "content": null}),
        Value::Null,
    )];
    for (index, (name, arguments)) in calls.iter().enumerate() {
        let text = arguments.to_string();
        let mut middle = text.len() / 2;
        while !text.is_char_boundary(middle) {
            middle -= 1;
        }
        let (first, second) = text.split_at(middle);
        frames.push(chunk(
            json!({"tool_calls": [{"index": index, "id": format!("call_{index}_{name}"), "type": "function", "function": {"name": name, "arguments": first}}]}),
            Value::Null,
        ));
        frames.push(chunk(
            json!({"tool_calls": [{"index": index, "function": {"arguments": second}}]}),
            Value::Null,
        ));
    }
    frames.push(chunk(json!({}), json!("tool_calls")));
    frames.push("data: [DONE]\n\n".to_owned());
    frames
}

/// The SSE frames of an answer made of `deltas`: a role chunk, one chunk per
/// delta, a `finish_reason` chunk and `[DONE]`.
pub fn frames(deltas: &[&str]) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        let chunk = json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        format!("data: {chunk}\n\n")
    };
    let mut frames = vec![chunk(json!({"role": "assistant"}), Value::Null)];
    for delta in deltas {
        frames.push(chunk(json!({"content": delta}), Value::Null));
    }
    frames.push(chunk(json!({}), json!("stop")));
    frames.push("data: [DONE]\n\n".to_owned());
    frames
}

/// The [`Behaviour::Echo`] answer to `request`.
pub fn echo(request: &Value) -> String {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let users: Vec<&Value> = messages
        .iter()
        .filter(|message| message["role"] == "user")
        .collect();
    let last = users
        .last()
        .and_then(|message| message["content"].as_str())
        .unwrap_or("");
    let system = messages
        .iter()
        .find(|message| message["role"] == "system")
        .and_then(|message| message["content"].as_str())
        .unwrap_or("");
    let names = document_names(system);
    let names = if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    };
    format!(
        "Turn {}: {} [documents: {names}]",
        users.len(),
        last.split_whitespace().collect::<Vec<_>>().join(" ")
    )
}

/// The names of the `<document name="…">` blocks in `text`, in order.
pub fn document_names(text: &str) -> Vec<String> {
    const OPEN: &str = "<document name=\"";
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        rest = &rest[start + OPEN.len()..];
        let Some(end) = rest.find("\">") else { break };
        names.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    names
}

/// A streamed `text/event-stream` response writing `frames` with `delay`
/// before each (after the first), then ending cleanly, or with an error
/// (a cut connection) when `cut`.
fn stream(watch: Watch, frames: Vec<String>, delay: Duration, cut: bool) -> Response {
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    tokio::spawn(async move {
        for (index, frame) in frames.into_iter().enumerate() {
            if index > 0 && !delay.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    // The client went away: hyper dropped the body.
                    _ = sender.closed() => return,
                }
            }
            if sender.send(Ok(Bytes::from(frame))).await.is_err() {
                return;
            }
        }
        if cut {
            let _ = sender
                .send(Err(std::io::Error::other("cut mid-stream")))
                .await;
        }
        // Wait until hyper has taken the last frame, or the client left.
        tokio::select! {
            _ = sender.closed() => {}
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
        watch.complete();
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(receiver));
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
        .unwrap()
}
