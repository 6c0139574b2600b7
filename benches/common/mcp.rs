//! The benchmarks' MCP client: sessionless `tools/call` (protocol
//! 2026-07-28) to mcp-gateway over loopback HTTP.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

/// The Studio origin the roles run with by default; writes from "the page"
/// carry it.
pub(crate) const DEFAULT_ORIGIN: &str = "http://localhost:3007";

/// The MCP client: writes come from the Studio page with the app open
/// (session cookie, `Sasha-App`, `Origin`; source `ui`, no confirmation), reads
/// from a staff user's bearer token, both sessionless (protocol 2026-07-28).
#[derive(Clone)]
pub(crate) struct Mcp {
    pub(crate) http: reqwest::Client,
    pub(crate) url: String,
    pub(crate) session: String,
    pub(crate) token: String,
    /// The app the page has open (`Sasha-App` of `ui` calls).
    pub(crate) app: String,
    /// The Studio origin `ui` calls come from ([`DEFAULT_ORIGIN`] unless the
    /// roles run with another `SASHA_PUBLIC_ORIGIN`); an `https` origin's
    /// session cookie is `__Host-sasha_session`.
    pub(crate) origin: String,
    /// The `clientInfo` name the calls carry.
    pub(crate) client: &'static str,
}

impl Mcp {
    /// The `tools/call` request of tool `name`: from the Studio page when `ui`
    /// (session cookie, `Origin`, `Sasha-App`), else with the bearer token.
    pub(crate) fn request(
        &self,
        ui: bool,
        name: &str,
        arguments: Value,
    ) -> reqwest::RequestBuilder {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": name, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": self.client, "version": "1"},
            },
        }});
        let request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", name)
            .body(body.to_string());
        if ui {
            let cookie = if self.origin.starts_with("https://") {
                "__Host-sasha_session"
            } else {
                "sasha_session"
            };
            request
                .header("cookie", format!("{cookie}={}", self.session))
                .header("origin", &self.origin)
                .header("sasha-app", &self.app)
        } else {
            request.header("authorization", format!("Bearer {}", self.token))
        }
    }

    /// Calls `name` from the page until it is answered (the catalogue knows
    /// the app only a moment after the roles say they are ready); the time
    /// of the answered call.
    pub(crate) async fn timed_call(&self, name: &str, arguments: Value) -> std::time::Duration {
        for _ in 0..200 {
            let started = std::time::Instant::now();
            if self.call(true, name, arguments.clone()).await.is_some() {
                return started.elapsed();
            }
            // Another process comes ready in its own time, which the bench
            // cannot pause or be told of: look again shortly.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("{name} was never answered");
    }

    /// Returns the tool's structured result, or `None` on any failure (the
    /// first three failures of the process are printed).
    pub(crate) async fn call(&self, ui: bool, name: &str, arguments: Value) -> Option<Value> {
        let request = self.request(ui, name, arguments);
        let reply: Value = request.send().await.ok()?.json().await.ok()?;
        if reply.get("error").is_some() || reply["result"]["isError"] == true {
            static SHOWN: AtomicUsize = AtomicUsize::new(0);
            if SHOWN.fetch_add(1, Ordering::Relaxed) < 3 {
                eprintln!("bench: {name} failed: {reply}");
            }
            return None;
        }
        Some(reply["result"]["structuredContent"].clone())
    }
}
