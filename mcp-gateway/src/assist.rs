//! The open app's assistant tools, app-only and bound to the Studio session's
//! app: `sasha__chat_execute` (one chat turn, its growing text sent as MCP
//! progress) and `sasha__files_upload` (documents converted to Markdown in the
//! user's upload area). studio-core does the work and decides access again;
//! this module carries the call across and back.

use base64::Engine as _;
use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use sasha_contract::tools::{MAX_UPLOAD_BYTES, too_many_upload_bytes};
use sasha_proto::pb::{ChatRequest, UploadFile, UploadRequest, chat_event};
use sasha_proto::{AppError, ErrorCode};
use serde_json::{Value, json};

use crate::Gateway;
use crate::auth::Caller;
use crate::catalogue::App;

/// One chat turn for `app`. Each text event becomes a
/// `notifications/progress` carrying the full text so far (when the caller
/// sent a progress token); the answer is `{text}`. The turn stops, and
/// studio-core stops its upstream request, when the client goes away.
pub async fn chat(
    gateway: &Gateway,
    caller: &Caller,
    app: &App,
    args: &Value,
    progress: Option<ProgressToken>,
    ctx: &RequestContext<RoleServer>,
) -> Result<Value, AppError> {
    let request = ChatRequest {
        principal: Some(caller.principal.clone()),
        app_id: app.id.clone(),
        revision: app.revision.clone(),
        prompt: args["prompt"].as_str().unwrap_or_default().to_owned(),
        new_session: args["newSession"] == true,
    };
    let mut core = gateway.core.clone();
    let turn = async {
        let mut stream = core
            .chat(request)
            .await
            .map_err(|status| AppError::from_status(&status))?
            .into_inner();
        let mut updates = 0u32;
        loop {
            let event = stream
                .message()
                .await
                .map_err(|status| AppError::from_status(&status))?;
            match event.and_then(|event| event.event) {
                Some(chat_event::Event::Text(text)) => {
                    updates += 1;
                    if let Some(token) = &progress {
                        let note =
                            ProgressNotificationParam::new(token.clone(), f64::from(updates))
                                .with_message(text);
                        if ctx.peer.notify_progress(note).await.is_err() {
                            return Err(AppError::new(
                                ErrorCode::Cancelled,
                                "the chat turn was cancelled",
                            ));
                        }
                    }
                }
                Some(chat_event::Event::FinalText(text)) => return Ok(json!({ "text": text })),
                None => {
                    return Err(AppError::new(
                        ErrorCode::ChatFailed,
                        "the chat ended without an answer",
                    ));
                }
            }
        }
    };
    tokio::select! {
        result = turn => result,
        // Dropping the stream cancels the gRPC call, and studio-core the
        // upstream request.
        () = ctx.ct.cancelled() => Err(AppError::new(ErrorCode::Cancelled, "the chat turn was cancelled")),
    }
}

/// Converts and stores the call's documents for `app`; the answer is
/// `{files: [{original, converted}]}`.
pub async fn upload(
    gateway: &Gateway,
    caller: &Caller,
    app: &App,
    args: &Value,
    progress: Option<ProgressToken>,
    ctx: &RequestContext<RoleServer>,
) -> Result<Value, AppError> {
    let given = args["files"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut files = Vec::with_capacity(given.len());
    let mut total = 0usize;
    for file in given {
        let name = file["name"].as_str().unwrap_or_default();
        let encoded = file["dataBase64"].as_str().unwrap_or_default();
        // Refuse before decoding what cannot fit.
        if total + encoded.len() / 4 * 3 > MAX_UPLOAD_BYTES + 2 {
            return Err(AppError::new(
                ErrorCode::ResourceLimit,
                too_many_upload_bytes(),
            ));
        }
        let data = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| {
                AppError::new(
                    ErrorCode::InputInvalid,
                    format!("{} is not valid base64 data", shown(name)),
                )
            })?;
        total += data.len();
        if total > MAX_UPLOAD_BYTES {
            return Err(AppError::new(
                ErrorCode::ResourceLimit,
                too_many_upload_bytes(),
            ));
        }
        files.push(UploadFile {
            name: name.to_owned(),
            content_type: file["type"].as_str().unwrap_or_default().to_owned(),
            data,
        });
    }
    if let Some(token) = progress {
        // Received and decoded: the conversion starts now.
        let count = files.len();
        let note = ProgressNotificationParam::new(token, 1.0)
            .with_total(2.0)
            .with_message(format!(
                "converting {count} document{}",
                if count == 1 { "" } else { "s" }
            ));
        let _ = ctx.peer.notify_progress(note).await;
    }
    let request = UploadRequest {
        principal: Some(caller.principal.clone()),
        app_id: app.id.clone(),
        revision: app.revision.clone(),
        files,
    };
    let mut core = gateway.core.clone();
    let reply = core
        .upload(request)
        .await
        .map_err(|status| AppError::from_status(&status))?
        .into_inner();
    let files: Vec<Value> = reply
        .files
        .into_iter()
        .map(|file| json!({"original": file.original, "converted": file.converted}))
        .collect();
    Ok(json!({ "files": files }))
}

/// A file name as a message may show it: its last segment, bounded.
fn shown(name: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let mut shown: String = last.chars().filter(|c| !c.is_control()).take(80).collect();
    if shown.is_empty() {
        shown = "a file".to_owned();
    }
    shown
}
