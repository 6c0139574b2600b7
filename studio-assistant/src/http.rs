//! The Studio assistant's HTTP routes (`/api/assistant*`): whether it can
//! answer, the person's conversations, a turn streamed as server-sent
//! events and its cancellation, the person's waiting confirmations and
//! their decision on one. The crate's one route table is [`routes`].
//!
//! The assistant is the signed-in person's, in their browser: every route asks
//! for the browser session (`session_user`, `session_write`), so a bearer
//! token (which a model may hold) gets the hidden 404.
//!
//! What it must never do: answer a conversation or decide a confirmation for
//! anyone but its own user, or start a turn without a configured provider.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sasha_proto::{AppError, ErrorCode};
use serde::Deserialize;
use serde_json::{Value, json};
use studio_identity::http::caller::{session_user, session_write};
use studio_identity::http::{ErrorEnvelope, no_store, parse_body};
use studio_store::blocking;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use crate::Assistance;
use crate::assistant::HOW_TO_CONFIGURE;
use crate::assistant::turn;

/// The `/api/assistant` routes.
pub fn routes() -> axum::Router<Arc<Assistance>> {
    axum::Router::new()
        .route("/api/assistant", get(status))
        .route("/api/assistant/conversations", get(list).post(create))
        .route(
            "/api/assistant/conversations/{id}",
            get(read).delete(remove),
        )
        .route("/api/assistant/conversations/{id}/turn", post(turn))
        .route("/api/assistant/conversations/{id}/cancel", post(cancel))
        .route("/api/assistant/confirmations", get(confirmations))
        .route("/api/assistant/confirmations/{id}", post(confirm))
}

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
#[utoipa::path(tag = "assistant", get, path = "/api/assistant", responses(
    (status = 200, description = "`{available, model, configure}`", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session", body = ErrorEnvelope)))]
pub async fn status(State(assistance): State<Arc<Assistance>>, headers: HeaderMap) -> Response {
    if let Err(response) = session_user(&assistance.accounts, &headers).await {
        return response;
    }
    let model = assistance.chat.model();
    no_store(Json(json!({
        "available": model.is_some(),
        "model": model,
        "configure": model.is_none().then_some(HOW_TO_CONFIGURE),
    })))
}

/// `GET /api/assistant/conversations`: the caller's conversations.
#[utoipa::path(tag = "assistant", get, path = "/api/assistant/conversations", responses(
    (status = 200, description = "`{conversations: [{id, title, createdAt, updatedAt}]}`", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session", body = ErrorEnvelope)))]
pub async fn list(State(assistance): State<Arc<Assistance>>, headers: HeaderMap) -> Response {
    let principal = match session_user(&assistance.accounts, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let (store, user) = (assistance.store.clone(), principal.user.id.clone());
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
pub struct CreateBody {
    #[serde(default)]
    title: Option<String>,
}

/// `POST /api/assistant/conversations`: starts a conversation.
#[utoipa::path(tag = "assistant", post, path = "/api/assistant/conversations", request_body = CreateBody, responses(
    (status = 201, description = "`{id, title, createdAt, updatedAt}`", body = Object),
    (status = 400, description = "the body is invalid", body = ErrorEnvelope),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session", body = ErrorEnvelope)))]
pub async fn create(
    State(assistance): State<Arc<Assistance>>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let principal =
        match session_write(&assistance.accounts, &method, &headers, !body.is_empty()).await {
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
    let (store, user) = (assistance.store.clone(), principal.user.id.clone());
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

/// `GET /api/assistant/conversations/:id`: its transcript, and whether a
/// turn of it is running (a page that did not start it shows its calls as
/// running, a page after a restart as cancelled).
#[utoipa::path(tag = "assistant", get, path = "/api/assistant/conversations/{id}", params(("id" = String, Path)), responses(
    (status = 200, description = "`{id, title, createdAt, updatedAt, running, messages}`", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "no such conversation of the caller's, or not a browser session", body = ErrorEnvelope)))]
pub async fn read(
    State(assistance): State<Arc<Assistance>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let principal = match session_user(&assistance.accounts, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let (store, user) = (assistance.store.clone(), principal.user.id.clone());
    let running = assistance.assistant.is_running(&principal.user.id, &id);
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
            answer["running"] = Value::Bool(running);
            answer["messages"] = Value::Array(messages);
            no_store(Json(answer))
        }
        Ok(None) => not_found(),
        Err(error) => error.into_response(),
    }
}

/// `DELETE /api/assistant/conversations/:id`: deletes it with its transcript
/// and its cards, and cancels its running turn.
#[utoipa::path(tag = "assistant", delete, path = "/api/assistant/conversations/{id}", params(("id" = String, Path)), responses(
    (status = 200, description = "`{deleted: true}`", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "no such conversation of the caller's, or not a browser session", body = ErrorEnvelope)))]
pub async fn remove(
    State(assistance): State<Arc<Assistance>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let principal = match session_write(&assistance.accounts, &method, &headers, false).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let (store, user, conversation) = (
        assistance.store.clone(),
        principal.user.id.clone(),
        id.clone(),
    );
    match blocking(move || store.delete_conversation(&user, &conversation)).await {
        Ok(true) => {
            // Its turn, if one runs, has nothing left to answer into.
            assistance.assistant.cancel(&principal.user.id, &id);
            no_store(Json(json!({"deleted": true})))
        }
        Ok(false) => not_found(),
        Err(error) => error.into_response(),
    }
}

/// One turn: what the person asks.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnBody {
    prompt: String,
}

/// `POST /api/assistant/conversations/:id/turn` with `{prompt}`: the turn's
/// events as `text/event-stream`, each `data:` one JSON object with a
/// `type` (see `turn::Event`). Closing the stream does not end the turn: a
/// confirmation it waits for is listed (`GET /api/assistant/confirmations`)
/// for a reloaded page to decide; `…/cancel` ends it.
#[utoipa::path(tag = "assistant", post, path = "/api/assistant/conversations/{id}/turn", params(("id" = String, Path)), request_body = TurnBody, responses(
    (status = 200, description = "the turn's events (`text/event-stream`)"),
    (status = 400, description = "the prompt is empty or too long", body = ErrorEnvelope),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "no such conversation of the caller's, or not a browser session", body = ErrorEnvelope),
    (status = 429, description = "a turn of this conversation is already running (APP_BUSY)", body = ErrorEnvelope),
    (status = 503, description = "no chat provider is configured", body = ErrorEnvelope)))]
pub async fn turn(
    State(assistance): State<Arc<Assistance>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let principal = match session_write(&assistance.accounts, &method, &headers, true).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let body: TurnBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    if let Err(error) = crate::provider::check_prompt(&body.prompt) {
        return error.into_response();
    }
    if !assistance.chat.available() {
        return AppError::new(ErrorCode::ChatUnavailable, HOW_TO_CONFIGURE).into_response();
    }
    let (store, user, conversation) = (
        assistance.store.clone(),
        principal.user.id.clone(),
        id.clone(),
    );
    match blocking(move || store.conversation(&user, &conversation)).await {
        Ok(Some(_)) => {}
        Ok(None) => return not_found(),
        Err(error) => return error.into_response(),
    }
    let cancel = CancellationToken::new();
    let running = match assistance
        .assistant
        .clone()
        .claim(&principal.user.id, &id, cancel.clone())
    {
        Ok(running) => running,
        Err(error) => return error.into_response(),
    };
    let (events, stream) = mpsc::channel::<turn::Event>(64);
    let task_assistance = assistance.clone();
    let reporter = events.clone();
    let task = tokio::spawn(async move {
        let _running = running;
        turn::run(
            &task_assistance,
            &principal,
            &id,
            body.prompt,
            &events,
            &cancel,
        )
        .await;
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
    // A page that goes away drops only the stream: the turn goes on (its
    // events are dropped), and its confirmations wait in the store.
    let stream = futures::stream::unfold(stream, |mut stream| async move {
        let event = stream.recv().await?;
        let data = serde_json::to_string(&event).unwrap_or_else(|_| "{}".to_owned());
        Some((Ok::<_, Infallible>(SseEvent::default().data(data)), stream))
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

/// `POST /api/assistant/conversations/:id/cancel`: ends the running turn of
/// the caller's conversation; a confirmation it waits for is cancelled and
/// nothing of it runs. `{cancelled: false}` when no turn runs.
#[utoipa::path(tag = "assistant", post, path = "/api/assistant/conversations/{id}/cancel", params(("id" = String, Path)), responses(
    (status = 200, description = "`{cancelled}`: whether a turn was running", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "no such conversation of the caller's, or not a browser session", body = ErrorEnvelope)))]
pub async fn cancel(
    State(assistance): State<Arc<Assistance>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let principal = match session_write(&assistance.accounts, &method, &headers, false).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let (store, user, conversation) = (
        assistance.store.clone(),
        principal.user.id.clone(),
        id.clone(),
    );
    match blocking(move || store.conversation(&user, &conversation)).await {
        Ok(Some(_)) => {}
        Ok(None) => return not_found(),
        Err(error) => return error.into_response(),
    }
    let cancelled = assistance.assistant.cancel(&principal.user.id, &id);
    no_store(Json(json!({"cancelled": cancelled})))
}

/// `GET /api/assistant/confirmations`: the caller's confirmations waiting
/// for a decision, each as the card its turn showed, oldest first.
#[utoipa::path(tag = "assistant", get, path = "/api/assistant/confirmations", responses(
    (status = 200, description = "`{confirmations: [{id, conversation, callId, tool, title, sentence, app, summary, expiresAt}]}`", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session", body = ErrorEnvelope)))]
pub async fn confirmations(
    State(assistance): State<Arc<Assistance>>,
    headers: HeaderMap,
) -> Response {
    let principal = match session_user(&assistance.accounts, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let (store, user) = (assistance.store.clone(), principal.user.id.clone());
    match blocking(move || store.waiting_approvals(&user)).await {
        Ok(waiting) => no_store(Json(json!({
            "confirmations": waiting.iter().map(turn::Card::of).collect::<Vec<_>>(),
        }))),
        Err(error) => error.into_response(),
    }
}

/// The person's decision on a confirmation of one of their conversations.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmBody {
    approve: bool,
    /// The conversation the card belongs to: a decision made from another
    /// conversation's page is refused.
    conversation: String,
}

/// `POST /api/assistant/confirmations/:id` with `{approve, conversation}`:
/// the person's decision on one waiting confirmation of their own turn,
/// from any of their pages (the one that started the turn, a reloaded one,
/// another tab or device).
#[utoipa::path(tag = "assistant", post, path = "/api/assistant/confirmations/{id}", params(("id" = String, Path)), request_body = ConfirmBody, responses(
    (status = 200, description = "`{decided: true, approved}`", body = Object),
    (status = 400, description = "the body is invalid", body = ErrorEnvelope),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "no such confirmation waiting for the caller in that conversation (unknown, another user's, another conversation's, or already decided)", body = ErrorEnvelope),
    (status = 409, description = "it lapsed, was cancelled, or expired when Studio restarted: nothing was run", body = ErrorEnvelope)))]
pub async fn confirm(
    State(assistance): State<Arc<Assistance>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let principal = match session_write(&assistance.accounts, &method, &headers, true).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let body: ConfirmBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    match assistance
        .assistant
        .decide(
            &assistance.store,
            &principal.user.id,
            &body.conversation,
            &id,
            body.approve,
        )
        .await
    {
        Ok(()) => no_store(Json(json!({"decided": true, "approved": body.approve}))),
        Err(error) => error.into_response(),
    }
}
