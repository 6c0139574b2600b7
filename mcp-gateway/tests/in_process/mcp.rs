//! A small MCP client of the gateway's HTTP service, driven in process with
//! `oneshot`: the sessionless 2026-07-28 protocol (every request carries its
//! own protocol `_meta` and the SEP-2243 `Mcp-Method`/`Mcp-Name` headers)
//! and the legacy session protocol (initialize, `Mcp-Session-Id`, a server
//! request such as `elicitation/create` answered while the call's event
//! stream is open), with the helpers the tests read results through.
//!
//! What it must never do: reach past the HTTP service (every exchange is one
//! `http::Request` the gateway answers as it would a socket's).

use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tower::ServiceExt as _;

pub const SESSIONLESS: &str = "2026-07-28";
pub const LEGACY: &str = "2025-11-25";

/// The Studio origin the roles run with by default (`SASHA_PUBLIC_ORIGIN`).
pub const STUDIO_ORIGIN: &str = "http://localhost:3007";

/// How a client answers an `elicitation/create` the server sends.
pub type Elicit = fn(&Value) -> Value;

pub struct Mcp {
    router: axum::Router,
    headers: Vec<(String, String)>,
    pub version: &'static str,
    pub capabilities: Value,
    pub session: Option<String>,
    next_id: u64,
    pub elicit: Option<Elicit>,
}

/// One HTTP exchange.
#[derive(Debug)]
pub struct Exchange {
    pub status: u16,
    pub headers: http::HeaderMap,
    /// The JSON-RPC response (or the error body for a non-2xx answer).
    pub body: Value,
}

impl Exchange {
    /// The JSON-RPC result; panics on a JSON-RPC error.
    pub fn result(&self) -> &Value {
        assert!(
            self.body.get("error").is_none() && self.status == 200,
            "expected a result, got {} {}",
            self.status,
            self.body
        );
        &self.body["result"]
    }

    pub fn error(&self) -> &Value {
        assert!(
            self.body.get("error").is_some(),
            "expected an error, got {}",
            self.body
        );
        &self.body["error"]
    }
}

impl Mcp {
    pub fn new(router: axum::Router, headers: Vec<(String, String)>, version: &'static str) -> Mcp {
        Mcp {
            router,
            headers,
            version,
            capabilities: json!({}),
            session: None,
            next_id: 1,
            elicit: None,
        }
    }

    /// The same client sending one more header on every request.
    pub fn with_header(mut self, name: &str, value: &str) -> Mcp {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Declares the elicitation capability (and answers with `elicit`).
    pub fn eliciting(mut self, elicit: Elicit) -> Mcp {
        self.capabilities = json!({"elicitation": {"form": {}}});
        self.elicit = Some(elicit);
        self
    }

    fn post(&self, body: &Value) -> http::Request<axum::body::Body> {
        let mut request = http::Request::post("/mcp")
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", self.version);
        for (key, value) in &self.headers {
            request = request.header(key.as_str(), value.as_str());
        }
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session.as_str());
        }
        // The sessionless protocol repeats the method and its target in
        // headers (SEP-2243) so intermediaries can route without the body.
        if self.version == SESSIONLESS
            && let Some(method) = body["method"].as_str()
        {
            request = request.header("mcp-method", method);
            let name = match method {
                "tools/call" => body["params"]["name"].as_str(),
                "resources/read" => body["params"]["uri"].as_str(),
                _ => None,
            };
            if let Some(name) = name {
                request = request.header("mcp-name", name);
            }
        }
        // As every HTTP client sends a body it holds whole.
        let body = body.to_string();
        request
            .header("content-length", body.len())
            .body(axum::body::Body::from(body))
            .unwrap()
    }

    /// Legacy protocol: `initialize` then `notifications/initialized`.
    pub async fn initialize(&mut self) -> Exchange {
        self.session = None;
        let exchange = self
            .send(json!({
                "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": self.version, "capabilities": self.capabilities, "clientInfo": {"name": "sasha-tests", "version": "1"}},
            }))
            .await;
        if exchange.status == 200 {
            self.session = exchange
                .headers
                .get("mcp-session-id")
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let notified = self
                .router
                .clone()
                .oneshot(
                    self.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
                )
                .await
                .unwrap();
            assert_eq!(notified.status().as_u16(), 202);
        }
        exchange
    }

    /// Sends one request; answers server requests (elicitation) on the way.
    pub async fn request(&mut self, method: &str, params: Value) -> Exchange {
        let id = self.next_id;
        self.next_id += 1;
        let mut params = params;
        if self.version == SESSIONLESS {
            params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(SESSIONLESS);
            params["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
                self.capabilities.clone();
            params["_meta"]["io.modelcontextprotocol/clientInfo"] =
                json!({"name": "sasha-tests", "version": "1"});
        }
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
    }

    pub async fn call(&mut self, name: &str, arguments: Value) -> Exchange {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// The sessionless answer to an `input_required` question: the call
    /// again, with `state` and the person's `answer`.
    pub async fn answer(
        &mut self,
        name: &str,
        arguments: Value,
        state: &str,
        answer: Value,
    ) -> Exchange {
        self.request(
            "tools/call",
            json!({"name": name, "arguments": arguments, "requestState": state, "inputResponses": {"confirm": answer}}),
        )
        .await
    }

    async fn send(&self, body: Value) -> Exchange {
        let response = self.router.clone().oneshot(self.post(&body)).await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let event_stream = headers
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        let mut stream = response.into_body();
        if !event_stream {
            let bytes = stream.collect().await.unwrap().to_bytes();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let body = serde_json::from_str(&text).unwrap_or(json!({"text": text}));
            return Exchange {
                status,
                headers,
                body,
            };
        }
        let mut buffer = String::new();
        while let Some(frame) = stream.frame().await {
            let Ok(data) = frame.unwrap().into_data() else {
                continue;
            };
            buffer.push_str(&String::from_utf8_lossy(&data));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect::<Vec<_>>()
                    .join("\n");
                let Ok(message) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                if message.get("method").is_some() && message.get("id").is_some() {
                    let answer = match (message["method"].as_str(), self.elicit) {
                        (Some("elicitation/create"), Some(elicit)) => {
                            json!({"jsonrpc": "2.0", "id": message["id"], "result": elicit(&message["params"])})
                        }
                        _ => {
                            json!({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "not supported"}})
                        }
                    };
                    let posted = self
                        .router
                        .clone()
                        .oneshot(self.post(&answer))
                        .await
                        .unwrap();
                    assert!(
                        posted.status().is_success(),
                        "answer refused: {}",
                        posted.status()
                    );
                    continue;
                }
                // A notification (progress) before the response.
                if message.get("method").is_some() {
                    continue;
                }
                if message["id"] == body["id"] {
                    return Exchange {
                        status,
                        headers,
                        body: message,
                    };
                }
            }
        }
        panic!("the event stream ended without a response to {body}");
    }
}

/// The `structuredContent` of a successful tool result.
pub fn structured(exchange: &Exchange) -> &Value {
    let result = exchange.result();
    assert_ne!(result["isError"], true, "tool failed: {result}");
    &result["structuredContent"]
}

/// The error envelope of a failed tool result.
pub fn tool_error(exchange: &Exchange) -> &Value {
    let result = exchange.result();
    assert_eq!(result["isError"], true, "expected a tool error: {result}");
    let envelope = &result["structuredContent"]["error"];
    for key in ["code", "message", "retryable", "diagnosticId"] {
        assert!(
            envelope.get(key).is_some(),
            "envelope without {key}: {envelope}"
        );
    }
    envelope
}

/// The names in a `tools/list` result.
pub fn tool_names(exchange: &Exchange) -> Vec<String> {
    exchange.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The `requestState` of an `input_required` result.
pub fn question_state(exchange: &Exchange) -> String {
    let result = exchange.result();
    assert_eq!(result["resultType"], "input_required", "{result}");
    result["requestState"].as_str().unwrap().to_owned()
}

/// Calls a writing tool through the sessionless input-request round trip,
/// accepting; the second exchange, whatever its outcome.
pub async fn confirmed_call(client: &mut Mcp, tool: &str, arguments: Value) -> Exchange {
    let first = client.call(tool, arguments.clone()).await;
    let state = question_state(&first);
    client.answer(tool, arguments, &state, yes()).await
}

/// Creates through the sessionless input-request round trip, accepting.
pub async fn confirmed_create(client: &mut Mcp, tool: &str, arguments: Value) -> Value {
    structured(&confirmed_call(client, tool, arguments).await).clone()
}

/// The person's explicit yes.
pub fn yes() -> Value {
    json!({"action": "accept", "content": {"confirm": true}})
}
