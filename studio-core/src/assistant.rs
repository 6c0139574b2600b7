//! The Studio assistant: a conversation per user with the configured
//! OpenAI-compatible provider (`SASHA_CHAT_*`), whose tools are Sasha's own
//! MCP tools as the signed-in user's connection lists them (`mcp.rs`), and
//! whose mutations run only when the person presses Approve in Studio.
//!
//! A turn (`POST /api/assistant/conversations/:id/turn`) streams
//! server-sent events to the Studio page: the growing text, each tool call
//! and its outcome, and a confirmation for every tool the gateway does not
//! mark read-only (table and action mutations, source writes, drafts,
//! publication, lifecycle). The turn then waits for the person's decision
//! (`POST /api/assistant/confirmations/:id`, the same signed-in session,
//! same-origin; the id is random, single-use and bound to the user, the
//! conversation and the call) and only then calls the tool, or tells the
//! model the person declined. The model receives no token, state or id it
//! could use to approve anything; a call its tool results talk it into is
//! one more call that needs approval.
//!
//! What it must never do: run a mutation without the person's click, let
//! one user's turn, confirmation or conversation be seen or decided by
//! another, or reach a tool the user's own connection does not list.

mod mcp;
mod summary;
mod turn;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sasha_proto::{AppError, ErrorCode};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use crate::Core;
use studio_identity::http::caller::{session_user, session_write};
use studio_identity::http::{ErrorEnvelope, no_store, parse_body};
use studio_store::blocking;

/// How long a confirmation waits for the person before it counts as
/// declined.
pub(crate) const CONFIRMATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Turns one user may have running at once (each may wait for a decision).
pub(crate) const MAX_TURNS_PER_USER: usize = 4;
/// Turns running at once on this server.
pub(crate) const MAX_TURNS: usize = 64;

/// What the page is told when no provider is configured.
const HOW_TO_CONFIGURE: &str = "The assistant needs a model: an administrator sets SASHA_CHAT_BASE_URL (an OpenAI-compatible API such as https://api.openai.com/v1 or a local Ollama at http://127.0.0.1:11434/v1) and SASHA_CHAT_MODEL, and SASHA_CHAT_API_KEY when the provider needs one; see docs/assistant.md.";

/// The turns running and the confirmations waiting, in this process.
#[derive(Debug)]
pub(crate) struct Assistant {
    /// Where the assistant's MCP client connects (`SASHA_ASSISTANT_MCP_URL`).
    pub(crate) mcp_url: String,
    /// Conversations with a turn running (one at a time each), with their
    /// users.
    running: Mutex<HashMap<String, String>>,
    /// Confirmations waiting for a person, by id.
    pending: Mutex<HashMap<String, Pending>>,
}

#[derive(Debug)]
struct Pending {
    user_id: String,
    decide: oneshot::Sender<bool>,
}

impl Assistant {
    pub(crate) fn new(mcp_url: String) -> Assistant {
        Assistant {
            mcp_url,
            running: Mutex::default(),
            pending: Mutex::default(),
        }
    }

    /// Claims `conversation` of `user_id` for one turn, or `APP_BUSY` (a turn
    /// of it runs, or too many of the user's or the server's do).
    fn claim(self: &Arc<Self>, user_id: &str, conversation: &str) -> Result<Running, AppError> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if running.contains_key(conversation) {
            return Err(AppError::new(
                ErrorCode::Busy,
                "this conversation already has a turn running; wait for it or cancel it",
            ));
        }
        if running.values().filter(|user| *user == user_id).count() >= MAX_TURNS_PER_USER
            || running.len() >= MAX_TURNS
        {
            return Err(AppError::new(
                ErrorCode::Busy,
                "too many assistant turns are running; finish or cancel one first",
            ));
        }
        running.insert(conversation.to_owned(), user_id.to_owned());
        Ok(Running {
            assistant: self.clone(),
            conversation: conversation.to_owned(),
        })
    }

    /// Registers a confirmation for `user_id`; its random id and the
    /// receiver of the decision.
    fn expect(&self, user_id: &str) -> (String, oneshot::Receiver<bool>) {
        let id = hex::encode(rand::random::<[u8; 16]>());
        let (decide, decision) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id.clone(),
                Pending {
                    user_id: user_id.to_owned(),
                    decide,
                },
            );
        (id, decision)
    }

    /// Forgets a confirmation that was decided, timed out or abandoned.
    fn forget(&self, id: &str) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// The person's decision on confirmation `id`; false when it is not
    /// theirs, already decided or gone.
    fn decide(&self, user_id: &str, id: &str, approve: bool) -> bool {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        match pending.get(id) {
            Some(waiting) if waiting.user_id == user_id => {}
            _ => return false,
        }
        pending
            .remove(id)
            .is_some_and(|waiting| waiting.decide.send(approve).is_ok())
    }
}

/// A turn's claim on its conversation; dropping it frees it.
#[derive(Debug)]
struct Running {
    assistant: Arc<Assistant>,
    conversation: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.assistant
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.conversation);
    }
}

/// The `/api/assistant` routes.
pub(crate) fn routes() -> axum::Router<Arc<Core>> {
    axum::Router::new()
        .route("/api/assistant", get(status))
        .route("/api/assistant/conversations", get(list).post(create))
        .route(
            "/api/assistant/conversations/{id}",
            get(read).delete(remove),
        )
        .route("/api/assistant/conversations/{id}/turn", post(turn))
        .route("/api/assistant/confirmations/{id}", post(confirm))
}

// The assistant is the signed-in person's, in their browser: every route asks
// for the browser session (`session_user`, `session_write`), so a bearer
// token (which a model may hold) gets the hidden 404.

fn conversation_json(conversation: &studio_store::Conversation) -> Value {
    json!({
        "id": conversation.id,
        "title": conversation.title,
        "createdAt": conversation.created_at,
        "updatedAt": conversation.updated_at,
    })
}

fn not_found() -> Response {
    AppError::new(ErrorCode::RecordNotFound, "no such conversation").into_response()
}

/// `GET /api/assistant`: whether the assistant can answer, and if not how
/// to configure it.
#[utoipa::path(get, path = "/api/assistant", responses(
    (status = 200, description = "`{available, model, configure}`", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session", body = ErrorEnvelope)))]
pub(crate) async fn status(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    if let Err(response) = session_user(&core.accounts, &headers).await {
        return response;
    }
    let model = core.chat.model();
    no_store(Json(json!({
        "available": model.is_some(),
        "model": model,
        "configure": model.is_none().then_some(HOW_TO_CONFIGURE),
    })))
}

/// `GET /api/assistant/conversations`: the caller's conversations.
#[utoipa::path(get, path = "/api/assistant/conversations", responses(
    (status = 200, description = "`{conversations: [{id, title, createdAt, updatedAt}]}`", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session", body = ErrorEnvelope)))]
pub(crate) async fn list(State(core): State<Arc<Core>>, headers: HeaderMap) -> Response {
    let principal = match session_user(&core.accounts, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let (store, user) = (core.store.clone(), principal.user.id.clone());
    match blocking(move || store.conversations(&user)).await {
        Ok(list) => no_store(Json(json!({
            "conversations": list.iter().map(conversation_json).collect::<Vec<_>>(),
        }))),
        Err(error) => error.into_response(),
    }
}

/// A new conversation; the body may be empty.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateBody {
    #[serde(default)]
    title: Option<String>,
}

/// `POST /api/assistant/conversations`: starts a conversation.
#[utoipa::path(post, path = "/api/assistant/conversations", request_body = CreateBody, responses(
    (status = 201, description = "`{id, title, createdAt, updatedAt}`", body = Object),
    (status = 400, description = "the body is invalid", body = ErrorEnvelope),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session", body = ErrorEnvelope)))]
pub(crate) async fn create(
    State(core): State<Arc<Core>>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let principal = match session_write(&core.accounts, &method, &headers, !body.is_empty()).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let body: CreateBody = if body.is_empty() {
        CreateBody::default()
    } else {
        match parse_body(&body) {
            Ok(body) => body,
            Err(response) => return response,
        }
    };
    let (store, user) = (core.store.clone(), principal.user.id.clone());
    let title = body.title.unwrap_or_default();
    match blocking(move || store.create_conversation(&user, &title)).await {
        Ok(conversation) => {
            let mut response = no_store(Json(conversation_json(&conversation)));
            *response.status_mut() = StatusCode::CREATED;
            response
        }
        Err(error) => error.into_response(),
    }
}

/// `GET /api/assistant/conversations/:id`: its transcript.
#[utoipa::path(get, path = "/api/assistant/conversations/{id}", params(("id" = String, Path)), responses(
    (status = 200, description = "`{id, title, createdAt, updatedAt, messages}`", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "no such conversation of the caller's, or not a browser session", body = ErrorEnvelope)))]
pub(crate) async fn read(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let principal = match session_user(&core.accounts, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let (store, user) = (core.store.clone(), principal.user.id.clone());
    let found = blocking(move || {
        let Some(conversation) = store.conversation(&user, &id)? else {
            return Ok(None);
        };
        let messages = store.conversation_messages(&user, &id)?;
        Ok(Some((conversation, messages)))
    })
    .await;
    match found {
        Ok(Some((conversation, messages))) => {
            let mut answer = conversation_json(&conversation);
            answer["messages"] = Value::Array(messages);
            no_store(Json(answer))
        }
        Ok(None) => not_found(),
        Err(error) => error.into_response(),
    }
}

/// `DELETE /api/assistant/conversations/:id`: deletes it with its transcript.
#[utoipa::path(delete, path = "/api/assistant/conversations/{id}", params(("id" = String, Path)), responses(
    (status = 200, description = "`{deleted: true}`", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "no such conversation of the caller's, or not a browser session", body = ErrorEnvelope)))]
pub(crate) async fn remove(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let principal = match session_write(&core.accounts, &method, &headers, false).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let (store, user) = (core.store.clone(), principal.user.id.clone());
    match blocking(move || store.delete_conversation(&user, &id)).await {
        Ok(true) => no_store(Json(json!({"deleted": true}))),
        Ok(false) => not_found(),
        Err(error) => error.into_response(),
    }
}

/// One turn: what the person asks.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TurnBody {
    prompt: String,
}

/// `POST /api/assistant/conversations/:id/turn` with `{prompt}`: the turn's
/// events as `text/event-stream`, each `data:` one JSON object with a
/// `type` (see `turn::Event`). Closing the stream cancels the turn.
#[utoipa::path(post, path = "/api/assistant/conversations/{id}/turn", params(("id" = String, Path)), request_body = TurnBody, responses(
    (status = 200, description = "the turn's events (`text/event-stream`)"),
    (status = 400, description = "the prompt is empty or too long", body = ErrorEnvelope),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "no such conversation of the caller's, or not a browser session", body = ErrorEnvelope),
    (status = 429, description = "a turn of this conversation is already running (APP_BUSY)", body = ErrorEnvelope),
    (status = 503, description = "no chat provider is configured", body = ErrorEnvelope)))]
pub(crate) async fn turn(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let principal = match session_write(&core.accounts, &method, &headers, true).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let body: TurnBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    if let Err(error) = crate::chat::check_prompt(&body.prompt) {
        return error.into_response();
    }
    if !core.chat.available() {
        return AppError::new(ErrorCode::ChatUnavailable, HOW_TO_CONFIGURE).into_response();
    }
    let (store, user, conversation) = (core.store.clone(), principal.user.id.clone(), id.clone());
    match blocking(move || store.conversation(&user, &conversation)).await {
        Ok(Some(_)) => {}
        Ok(None) => return not_found(),
        Err(error) => return error.into_response(),
    }
    let running = match core.assistant.clone().claim(&principal.user.id, &id) {
        Ok(running) => running,
        Err(error) => return error.into_response(),
    };
    let (events, stream) = mpsc::channel::<turn::Event>(64);
    let cancel = CancellationToken::new();
    let guard = cancel.clone().drop_guard();
    let task_core = core.clone();
    let reporter = events.clone();
    let task = tokio::spawn(async move {
        let _running = running;
        turn::run(&task_core, &principal, &id, body.prompt, &events, &cancel).await;
    });
    // A turn that failed unexpectedly still ends its stream with an error.
    tokio::spawn(async move {
        if let Err(error) = task.await
            && error.is_panic()
        {
            let failure = AppError::from_code(ErrorCode::Internal);
            tracing::error!(diagnostic_id = %failure.diagnostic_id, "assistant: a turn failed unexpectedly");
            let _ = reporter
                .send(turn::Event::Error {
                    error: failure.to_json(),
                })
                .await;
        }
    });
    // The stream owns the drop guard: a page that goes away cancels the turn.
    let stream = futures::stream::unfold((stream, guard), |(mut stream, guard)| async move {
        let event = stream.recv().await?;
        let data = serde_json::to_string(&event).unwrap_or_else(|_| "{}".to_owned());
        Some((
            Ok::<_, Infallible>(SseEvent::default().data(data)),
            (stream, guard),
        ))
    });
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    response
}

/// The person's decision on a confirmation.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfirmBody {
    approve: bool,
}

/// `POST /api/assistant/confirmations/:id` with `{approve}`: the person's
/// decision on one waiting confirmation of their own turn.
#[utoipa::path(post, path = "/api/assistant/confirmations/{id}", params(("id" = String, Path)), request_body = ConfirmBody, responses(
    (status = 200, description = "`{decided: true, approved}`", body = Object),
    (status = 400, description = "the body is invalid", body = ErrorEnvelope),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "no such confirmation waiting for the caller", body = ErrorEnvelope)))]
pub(crate) async fn confirm(
    State(core): State<Arc<Core>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let principal = match session_write(&core.accounts, &method, &headers, true).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let body: ConfirmBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    if core.assistant.decide(&principal.user.id, &id, body.approve) {
        no_store(Json(json!({"decided": true, "approved": body.approve})))
    } else {
        AppError::new(
            ErrorCode::RecordNotFound,
            "no such confirmation is waiting for you (it was decided, timed out, or is not yours)",
        )
        .into_response()
    }
}

#[cfg(test)]
mod tests;
