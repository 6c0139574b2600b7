//! The assistant's MCP client of mcp-gateway (self-MCP): rmcp's client over
//! streamable HTTP, holding a short-lived access token minted for the
//! signed-in user with exactly their session's scopes, so the assistant
//! sees what an external client of the same user sees and is decided by
//! the gateway and studio-core like one.
//!
//! The gateway asks for a person's confirmation of every model-invoked
//! mutation (`elicitation/create`). This client answers yes only while the
//! call the person approved in Studio runs ([`SelfMcp::call_approved`]), and
//! no otherwise: the model never holds anything that could approve a call,
//! and a tool that elicits during a read is refused.
//!
//! What it must never do: keep its token past the turn, or answer an
//! elicitation yes outside an approved call.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{
    CallToolRequestParams, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, Tool,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData as McpError, ServiceExt as _};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};

/// The protocol version the client speaks: sessions, so the gateway's
/// confirmation arrives as `elicitation/create` within the call.
const PROTOCOL_VERSION: &str = "2025-11-25";

/// Answers the gateway's confirmations: yes only while `approved` is set.
#[derive(Clone)]
struct Confirmer {
    approved: Arc<AtomicBool>,
}

impl ClientHandler for Confirmer {
    fn get_info(&self) -> ClientConfig {
        serde_json::from_value(json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "sasha-studio-assistant", "version": sasha_service::VERSION},
        }))
        .unwrap_or_default()
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        if self.approved.load(Ordering::SeqCst) {
            Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"confirm": true})))
        } else {
            tracing::warn!("a confirmation was asked outside an approved call; declined");
            Ok(ElicitResult::new(ElicitationAction::Decline))
        }
    }
}

/// One turn's connection to the gateway.
pub(crate) struct SelfMcp {
    client: RunningService<RoleClient, Confirmer>,
    approved: Arc<AtomicBool>,
}

fn unreachable(error: impl std::fmt::Display) -> AppError {
    let failure = AppError::new(
        ErrorCode::NotReady,
        "the assistant cannot reach Sasha's tools right now; try again",
    );
    tracing::warn!(diagnostic_id = %failure.diagnostic_id, %error, "assistant: MCP client failed");
    failure
}

impl SelfMcp {
    /// Connects to `url` with `token`.
    pub(crate) async fn connect(url: &str, token: &str) -> Result<SelfMcp, AppError> {
        let approved = Arc::new(AtomicBool::new(false));
        // The chat client's TLS (rustls with ring and the webpki roots), no
        // proxy from the environment and no redirects: the gateway is one
        // known URL.
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(crate::provider::client::tls_config().map_err(unreachable)?)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(unreachable)?;
        let transport = StreamableHttpClientTransport::with_client(
            http,
            StreamableHttpClientTransportConfig::with_uri(url.to_owned())
                .auth_header(token.to_owned()),
        );
        let client = Confirmer {
            approved: approved.clone(),
        }
        .serve(transport)
        .await
        .map_err(unreachable)?;
        Ok(SelfMcp { client, approved })
    }

    /// Every tool the user's connection lists.
    pub(crate) async fn tools(&self) -> Result<Vec<Tool>, AppError> {
        self.client.list_all_tools().await.map_err(unreachable)
    }

    /// Runs a tool that needs no approval; a confirmation it asks for is
    /// declined.
    pub(crate) async fn call(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<Value, AppError> {
        self.approved.store(false, Ordering::SeqCst);
        self.run(name, arguments).await
    }

    /// Runs the tool the person approved; the gateway's confirmation of it
    /// is answered yes, and only for its duration.
    pub(crate) async fn call_approved(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<Value, AppError> {
        self.approved.store(true, Ordering::SeqCst);
        let result = self.run(name, arguments).await;
        self.approved.store(false, Ordering::SeqCst);
        result
    }

    /// The tool's result as JSON (`content`, `structuredContent`, `isError`).
    async fn run(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<Value, AppError> {
        let params: CallToolRequestParams = serde_json::from_value(
            json!({"name": name, "arguments": arguments}),
        )
        .map_err(|_| AppError::new(ErrorCode::InputInvalid, "the tool call is not valid"))?;
        match self.client.call_tool(params).await {
            Ok(result) => Ok(serde_json::to_value(result).unwrap_or(Value::Null)),
            // A JSON-RPC error (an unknown tool, arguments the schema
            // refuses) is the model's to read, not a failure of the turn.
            Err(rmcp::ServiceError::McpError(error)) => Ok(json!({
                "isError": true,
                "content": [{"type": "text", "text": error.message}],
            })),
            Err(error) => Err(unreachable(error)),
        }
    }

    pub(crate) async fn close(self) {
        let _ = self.client.cancel().await;
    }
}
