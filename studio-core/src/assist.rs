//! `CoreService.Chat` and `CoreService.Upload`: the open app's assistant
//! features, for the Studio page's own session only.
//!
//! Each call is checked here again, whatever the gateway decided: a browser
//! session holding `apps:invoke`, `use` on the app, the app valid at exactly
//! the revision the host has open, and the capability (`chat: true` or
//! `files: true`) declared in its manifest. A chat prompt's `@<name>.md`
//! references are resolved in the caller's own upload area before the turn.

use std::pin::Pin;
use std::sync::Arc;

use sasha_proto::pb;
use sasha_proto::{AppError, ErrorCode};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::Core;
use crate::catalogue::AppEntry;
use crate::chat::{ChatDocument, ChatTurn};
use studio_store::blocking;
use studio_store::{AppAccess, Scope};
use studio_uploads::IncomingFile;

/// The event stream of one chat turn.
pub(crate) type ChatStream = Pin<Box<dyn Stream<Item = Result<pb::ChatEvent, Status>> + Send>>;

/// Most documents one prompt may reference.
const MAX_REFERENCES: usize = 10;

#[derive(Debug, Clone, Copy)]
enum Capability {
    Chat,
    Files,
}

/// The caller's user id and the app's name, once every check passed.
async fn open_app(
    core: &Core,
    principal: Option<&pb::Principal>,
    app_id: &str,
    revision: &str,
    capability: Capability,
) -> Result<(String, String), AppError> {
    let principal = principal
        .filter(|principal| !principal.user_id.is_empty())
        .ok_or_else(|| AppError::new(ErrorCode::Unauthenticated, "no principal"))?;
    let what = match capability {
        Capability::Chat => "chat",
        Capability::Files => "document upload",
    };
    if principal.kind != "session"
        || !principal
            .scopes
            .iter()
            .any(|scope| scope == Scope::AppsInvoke.as_str())
    {
        return Err(AppError::new(
            ErrorCode::CapabilityDenied,
            format!("{what} is available only to an app open in Studio"),
        ));
    }
    let user_id = principal.user_id.clone();
    let (store, user, app) = (core.store.clone(), user_id.clone(), app_id.to_owned());
    let access = blocking(move || store.access(&app, &user)).await?;
    if !access.is_some_and(|access| access.allows(AppAccess::Use)) {
        return Err(AppError::from_code(ErrorCode::NotFound));
    }
    let snapshot = core.catalogue.current();
    let Some(AppEntry::Valid(package)) = snapshot.apps.get(app_id) else {
        return Err(AppError::from_code(ErrorCode::NotFound));
    };
    if package.resource.revision != revision {
        return Err(AppError::new(
            ErrorCode::RevisionUnavailable,
            "the app changed since it was opened; reopen it",
        ));
    }
    let declared = match capability {
        Capability::Chat => package.manifest.capabilities.chat,
        Capability::Files => package.manifest.capabilities.files,
    };
    if !declared {
        return Err(AppError::new(
            ErrorCode::CapabilityDenied,
            format!(
                "the app does not declare {}",
                match capability {
                    Capability::Chat => "chat: true",
                    Capability::Files => "files: true",
                }
            ),
        ));
    }
    Ok((user_id, package.manifest.name.clone()))
}

/// The `@name` references of `prompt`: each a converted document name
/// (`brief.md`), in order of first appearance, without repeats.
fn references(prompt: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for (at, _) in prompt.match_indices('@') {
        let preceded = prompt[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if preceded {
            continue; // an e-mail address, not a reference
        }
        let name: String = prompt[at + 1..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .collect();
        let name = name.trim_end_matches('.');
        if name.len() > 3
            && name.to_ascii_lowercase().ends_with(".md")
            && !found.iter().any(|seen| seen == name)
        {
            found.push(name.to_owned());
        }
    }
    found
}

/// Starts one chat turn: checks, resolves the prompt's document references,
/// and streams the growing text. Dropping the stream (the gateway's client
/// went away) cancels the turn and its upstream request.
pub(crate) async fn chat(
    core: Arc<Core>,
    request: pb::ChatRequest,
) -> Result<ChatStream, AppError> {
    let (user_id, app_name) = open_app(
        &core,
        request.principal.as_ref(),
        &request.app_id,
        &request.revision,
        Capability::Chat,
    )
    .await?;
    let names = references(&request.prompt);
    if names.len() > MAX_REFERENCES {
        return Err(AppError::new(
            ErrorCode::ResourceLimit,
            format!("a prompt may reference at most {MAX_REFERENCES} documents"),
        ));
    }
    let documents = {
        let (uploads, user) = (core.uploads.clone(), user_id.clone());
        tokio::task::spawn_blocking(move || -> Result<Vec<ChatDocument>, AppError> {
            names
                .into_iter()
                .map(|name| match uploads.read(&user, &name)? {
                    Some(markdown) => Ok(ChatDocument { name, markdown }),
                    None => Err(AppError::new(
                        ErrorCode::InputInvalid,
                        format!("there is no uploaded document named {name}; upload it first"),
                    )),
                })
                .collect()
        })
        .await
        .map_err(|_| AppError::from_code(ErrorCode::Internal))??
    };
    let turn = ChatTurn {
        user_id,
        app_id: request.app_id,
        app_name,
        prompt: request.prompt,
        new_session: request.new_session,
        documents,
    };
    let (events, receiver) = mpsc::channel::<Result<pb::ChatEvent, Status>>(8);
    let (updates, mut texts) = mpsc::channel::<String>(8);
    let cancel = CancellationToken::new();
    let service = core.chat.clone();
    tokio::spawn(async move {
        let run = service.execute(turn, updates, cancel.clone());
        tokio::pin!(run);
        let mut listening = true;
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => break outcome,
                Some(text) = texts.recv(), if listening => {
                    let event = pb::ChatEvent { event: Some(pb::chat_event::Event::Text(text)) };
                    if events.send(Ok(event)).await.is_err() {
                        listening = false;
                        cancel.cancel();
                    }
                }
                () = events.closed(), if listening => {
                    listening = false;
                    cancel.cancel();
                }
            }
        };
        let last = match outcome {
            Ok(text) => Ok(pb::ChatEvent {
                event: Some(pb::chat_event::Event::FinalText(text)),
            }),
            Err(error) => Err(error.to_status()),
        };
        let _ = events.send(last).await;
    });
    Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(
        receiver,
    )))
}

/// Converts and stores one upload in the caller's area.
pub(crate) async fn upload(
    core: &Core,
    request: pb::UploadRequest,
) -> Result<pb::UploadReply, AppError> {
    let (user_id, _) = open_app(
        core,
        request.principal.as_ref(),
        &request.app_id,
        &request.revision,
        Capability::Files,
    )
    .await?;
    let files: Vec<IncomingFile> = request
        .files
        .into_iter()
        .map(|file| IncomingFile {
            name: file.name,
            content_type: file.content_type,
            data: file.data,
        })
        .collect();
    let uploads = core.uploads.clone();
    let descriptors = tokio::task::spawn_blocking(move || uploads.store(&user_id, files))
        .await
        .map_err(|_| AppError::from_code(ErrorCode::Internal))??;
    Ok(pb::UploadReply {
        files: descriptors
            .into_iter()
            .map(|descriptor| pb::UploadDescriptor {
                original: descriptor.original,
                converted: descriptor.converted,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::references;

    #[test]
    fn references_are_converted_names_after_an_at_sign() {
        assert_eq!(
            references("Summarise @brief.md and @notes-2.md, then @brief.md again."),
            ["brief.md", "notes-2.md"]
        );
        assert!(references("mail me at ada@example.md or @.md or @x").is_empty());
        assert_eq!(references("(@Q3 report.md)"), Vec::<String>::new());
        assert_eq!(references("@Q3-report.md"), ["Q3-report.md"]);
    }
}
