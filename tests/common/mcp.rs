//! A small MCP client over streamable HTTP for process tests: the sessionless
//! 2026-07-28 protocol (every request carries its own protocol `_meta`) and the
//! legacy session protocol (initialize, `Mcp-Session-Id`, server requests such
//! as `elicitation/create` answered while the call's SSE stream is open).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};
use studio_store::{Scope, TokenKind, User, UserRole};

use super::core_database::CoreStore;
use super::{Backends, Harness, copy_dir};

pub const SESSIONLESS: &str = "2026-07-28";
pub const LEGACY: &str = "2025-11-25";

/// How a client answers an `elicitation/create` the server sends.
pub type Elicit = fn(&Value) -> Value;

/// The Studio origin the roles run with by default (`SASHA_PUBLIC_ORIGIN`).
pub const STUDIO_ORIGIN: &str = "http://localhost:3007";

pub struct Mcp {
    http: reqwest::Client,
    pub url: String,
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
    pub headers: reqwest::header::HeaderMap,
    /// The JSON-RPC response (or the error body for a non-2xx answer).
    pub body: Value,
    /// The notifications that came before the response on its event stream.
    pub notifications: Vec<Value>,
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
    /// A sessionless (2026-07-28) client with a bearer token.
    pub fn sessionless(url: &str, token: &str) -> Mcp {
        Mcp::new(
            url,
            vec![("authorization".into(), format!("Bearer {token}"))],
            SESSIONLESS,
        )
    }

    /// The Studio page (the harness's default origin) with `app` open: a
    /// sessionless client with the session cookie, `Origin` and `Sasha-App`,
    /// whose writes are the person's own (source `ui`, no confirmation).
    pub fn studio_page(url: &str, session: &str, app: &str) -> Mcp {
        Mcp::new(
            url,
            vec![
                ("cookie".to_owned(), format!("sasha_session={session}")),
                ("origin".to_owned(), STUDIO_ORIGIN.to_owned()),
                ("sasha-app".to_owned(), app.to_owned()),
            ],
            SESSIONLESS,
        )
    }

    /// The same client sending one more header on every request.
    pub fn with_header(mut self, name: &str, value: &str) -> Mcp {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn new(url: &str, headers: Vec<(String, String)>, version: &'static str) -> Mcp {
        Mcp {
            http: super::http_client(),
            url: url.to_owned(),
            headers,
            version,
            capabilities: json!({}),
            session: None,
            next_id: 1,
            elicit: None,
        }
    }

    /// Declares the elicitation capability (and answers with `elicit`).
    pub fn eliciting(mut self, elicit: Elicit) -> Mcp {
        self.capabilities = json!({"elicitation": {"form": {}}});
        self.elicit = Some(elicit);
        self
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", self.version)
            .body(body.to_string());
        for (key, value) in &self.headers {
            request = request.header(key, value);
        }
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
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
        request
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
                .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .send()
                .await
                .unwrap();
            assert_eq!(notified.status().as_u16(), 202);
        }
        exchange
    }

    /// Sends one request; answers server requests (elicitation) on the way.
    pub async fn request(&mut self, method: &str, params: Value) -> Exchange {
        self.try_request(method, params).await.expect("MCP request")
    }

    pub async fn call(&mut self, name: &str, arguments: Value) -> Exchange {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    async fn send(&self, body: Value) -> Exchange {
        self.try_send(body).await.expect("POST /mcp")
    }

    /// Like [`Mcp::request`], but a transport failure (a replica that died) is
    /// an `Err` instead of a panic.
    pub async fn try_request(&mut self, method: &str, params: Value) -> Result<Exchange, String> {
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
        self.try_send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
    }

    async fn try_send(&self, body: Value) -> Result<Exchange, String> {
        let response = self
            .post(&body)
            .send()
            .await
            .map_err(|error| format!("POST /mcp: {error}"))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let event_stream = headers
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if !event_stream {
            let text = response.text().await.unwrap_or_default();
            let body = serde_json::from_str(&text).unwrap_or(json!({"text": text}));
            return Ok(Exchange {
                status,
                headers,
                body,
                notifications: Vec::new(),
            });
        }
        let mut response = response;
        let mut buffer = String::new();
        let mut notifications = Vec::new();
        while let Some(chunk) = response.chunk().await.ok().flatten() {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
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
                        .post(&answer)
                        .send()
                        .await
                        .map_err(|error| format!("answering the server: {error}"))?;
                    assert!(
                        posted.status().is_success(),
                        "answer refused: {}",
                        posted.status()
                    );
                    continue;
                }
                if message.get("method").is_some() {
                    notifications.push(message);
                    continue;
                }
                if message["id"] == body["id"] {
                    return Ok(Exchange {
                        status,
                        headers,
                        body: message,
                        notifications,
                    });
                }
            }
        }
        Err(format!(
            "the event stream ended without a response to {body}"
        ))
    }
}

/// The whole sessionless JSON-RPC body of one `sasha__chat_execute` turn in a
/// new session, with progress token "turn": for tests that send it as raw
/// HTTP to watch the stream itself.
pub fn chat_turn_body(prompt: &str) -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "sasha__chat_execute",
            "arguments": {"prompt": prompt, "newSession": true},
            "_meta": {
                "progressToken": "turn",
                "io.modelcontextprotocol/protocolVersion": SESSIONLESS,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "sasha-tests", "version": "1"},
            },
        },
    })
}

/// The `structuredContent` of a successful tool result.
pub fn structured(exchange: &Exchange) -> &Value {
    let result = exchange.result();
    assert_ne!(result["isError"], true, "tool failed: {result}");
    &result["structuredContent"]
}

/// Creates through the sessionless input-request round trip, accepting.
pub async fn confirmed_create(client: &mut Mcp, tool: &str, arguments: Value) -> Value {
    structured(&confirmed_call(client, tool, arguments).await).clone()
}

/// Calls a writing tool through the sessionless input-request round trip,
/// accepting; the second exchange, whatever its outcome.
pub async fn confirmed_call(client: &mut Mcp, tool: &str, arguments: Value) -> Exchange {
    let first = client.call(tool, arguments.clone()).await;
    let result = first.result().clone();
    assert_eq!(result["resultType"], "input_required", "{result}");
    let state = result["requestState"].as_str().unwrap().to_owned();
    client
        .request(
            "tools/call",
            json!({"name": tool, "arguments": arguments, "requestState": state, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}}),
        )
        .await
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

pub fn fixture(id: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/packages/valid")
        .join(id)
}

/// studio-core, data-worker and mcp-gateway serving the `hello` and
/// `expense-log` fixtures, with a staff user (who manages both) and a member
/// (who holds no grant).
pub struct McpWorld {
    pub harness: Harness,
    pub backends: Backends,
    pub store: CoreStore,
    pub staff: User,
    pub member: User,
    pub staff_token: String,
}

impl McpWorld {
    pub async fn start() -> McpWorld {
        let harness = Harness::new();
        let apps = harness.path().join("docs/apps");
        copy_dir(&fixture("hello"), &apps.join("hello"));
        copy_dir(&fixture("expense-log"), &apps.join("expense-log"));
        let store = harness.store();
        let staff = store
            .create_user("sam", UserRole::Staff, "correct horse battery")
            .unwrap();
        let member = store
            .create_user("mia", UserRole::Member, "correct horse battery")
            .unwrap();
        let backends = harness.start_backends().await;
        let staff_token = token(&store, &staff, &[Scope::ChatUse, Scope::AppsInvoke]);
        McpWorld {
            harness,
            backends,
            store,
            staff,
            member,
            staff_token,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.backends.gateway.listener("http"))
    }

    /// The same world after every role restarted (see
    /// [`Harness::restart_backends`]); the gateway's URL changes.
    pub async fn restart(self) -> McpWorld {
        let McpWorld {
            harness,
            backends,
            store,
            staff,
            member,
            staff_token,
        } = self;
        let backends = harness.restart_backends(backends).await;
        McpWorld {
            harness,
            backends,
            store,
            staff,
            member,
            staff_token,
        }
    }

    pub fn client(&self, token: &str) -> Mcp {
        Mcp::sessionless(&self.url(), token)
    }

    /// `(operation, source)` of every audit row of the expense-log database, read
    /// directly from its file.
    pub fn audit_sources(&self) -> Vec<(String, String)> {
        let path = self.harness.path().join("apps/expense-log.sqlite");
        let connection = rusqlite::Connection::open(path).unwrap();
        let mut statement = connection
            .prepare("SELECT operation, source FROM _sasha_audit ORDER BY rowid")
            .unwrap();
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}

pub fn token(store: &CoreStore, user: &User, scopes: &[Scope]) -> String {
    let scopes: BTreeSet<Scope> = scopes.iter().copied().collect();
    store
        .mint_token(&user.id, TokenKind::Access, &scopes, None)
        .unwrap()
}

/// One MCP `tools/call` of the Studio page (its `__Host-` session cookie,
/// `Sasha-App`, its Origin) through the proxy at `studio` (https): the status and
/// the JSON-RPC message (the event stream's answer, or the body), or `Err`
/// for a transport failure or a body that is no JSON.
pub async fn studio_call_through_proxy(
    http: &reqwest::Client,
    studio: &str,
    session: &str,
    app: &str,
    name: &str,
    arguments: &serde_json::Value,
) -> Result<(u16, serde_json::Value), String> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": name, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": SESSIONLESS,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "nginx-test", "version": "1"},
            },
        },
    });
    let response = http
        .post(format!("{studio}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", SESSIONLESS)
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .header("cookie", format!("__Host-sasha_session={session}"))
        .header("origin", studio)
        .header("sasha-app", app)
        .body(body.to_string())
        .send()
        .await
        .map_err(|error| format!("transport: {error}"))?;
    let status = response.status().as_u16();
    let text = response
        .text()
        .await
        .map_err(|error| format!("body: {error}"))?;
    let json = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .find(|data| data.contains("\"result\"") || data.contains("\"error\""))
        .unwrap_or(&text)
        .to_owned();
    serde_json::from_str(&json)
        .map(|message| (status, message))
        .map_err(|error| format!("status {status}, json: {error}: {text}"))
}
