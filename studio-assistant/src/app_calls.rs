//! `CoreService.Chat` and `CoreService.Upload`: the open app's assistant
//! features, for the Studio page's own session only.
//!
//! Each call is checked here again, whatever the gateway decided: a browser
//! session holding `apps:invoke`, `use` on the app, the app valid at exactly
//! the revision the host has open, and the capability (`chat: true` or
//! `files: true`) declared in its manifest. A chat prompt's `@<name>.md`
//! references are resolved among the caller's own uploaded documents before
//! the turn.
//!
//! What it must never do: run a turn or store a document for anyone but a
//! browser session with `use` on the app at the revision it has open, or
//! read another user's uploaded documents.

use std::pin::Pin;
use std::sync::Arc;

use sasha_proto::{AppError, ErrorCode};
use studio_identity::actor::Actor;
use studio_store::{AppAccess, PrincipalKind, Scope, blocking};
use studio_uploads::{Descriptor, IncomingFile};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;

use crate::Assistance;
use crate::apps::CatalogueApp;
use crate::provider::{ChatDocument, ChatTurn};

/// One chat turn an open app asks for (`Sasha.chat.execute`).
#[derive(Debug, Clone)]
pub struct ChatCall {
    pub actor: Actor,
    pub app_id: String,
    /// The revision the Studio page has open.
    pub revision: String,
    pub prompt: String,
    /// Start a fresh conversation instead of continuing the app's last one.
    pub new_session: bool,
}

/// What a chat turn streams: the growing text, then the whole answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatEvent {
    /// The answer so far.
    Text(String),
    /// The whole answer; the last event of a turn that succeeded.
    FinalText(String),
}

/// The event stream of one chat turn; a failed turn ends with its error.
pub type ChatEvents = Pin<Box<dyn Stream<Item = Result<ChatEvent, AppError>> + Send>>;

/// Documents an open app uploads (`Sasha.files.upload`).
#[derive(Debug, Clone)]
pub struct UploadCall {
    pub actor: Actor,
    pub app_id: String,
    /// The revision the Studio page has open.
    pub revision: String,
    pub files: Vec<IncomingFile>,
}

/// Most documents one prompt may reference.
const MAX_REFERENCES: usize = 10;

#[derive(Debug, Clone, Copy)]
enum Capability {
    Chat,
    Files,
}

/// The caller's user id and the app's name, once every check passed.
async fn open_app(
    assistance: &Assistance,
    actor: &Actor,
    app_id: &str,
    revision: &str,
    capability: Capability,
) -> Result<(String, String), AppError> {
    let what = match capability {
        Capability::Chat => "chat",
        Capability::Files => "document upload",
    };
    if !actor.is(PrincipalKind::Session) || !actor.has(Scope::AppsInvoke) {
        return Err(AppError::new(
            ErrorCode::CapabilityDenied,
            format!("{what} is available only to an app open in Studio"),
        ));
    }
    let user_id = actor.user_id.clone();
    let (store, user, app) = (assistance.store.clone(), user_id.clone(), app_id.to_owned());
    let access = blocking(move || store.access(&app, &user)).await?;
    if !access.is_some_and(|access| access.allows(AppAccess::Use)) {
        return Err(AppError::from_code(ErrorCode::NotFound));
    }
    let Some(CatalogueApp::Valid(app)) = assistance.apps.app(app_id) else {
        return Err(AppError::from_code(ErrorCode::NotFound));
    };
    if app.revision != revision {
        return Err(AppError::new(
            ErrorCode::RevisionUnavailable,
            "the app changed since it was opened; reopen it",
        ));
    }
    let declared = match capability {
        Capability::Chat => app.chat,
        Capability::Files => app.files,
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
    Ok((user_id, app.name))
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
pub async fn chat(assistance: Arc<Assistance>, call: ChatCall) -> Result<ChatEvents, AppError> {
    let (user_id, app_name) = open_app(
        &assistance,
        &call.actor,
        &call.app_id,
        &call.revision,
        Capability::Chat,
    )
    .await?;
    let names = references(&call.prompt);
    if names.len() > MAX_REFERENCES {
        return Err(AppError::new(
            ErrorCode::ResourceLimit,
            format!("a prompt may reference at most {MAX_REFERENCES} documents"),
        ));
    }
    let documents = {
        let (uploads, user) = (assistance.uploads.clone(), user_id.clone());
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
        app_id: call.app_id,
        app_name,
        prompt: call.prompt,
        new_session: call.new_session,
        documents,
    };
    let (events, receiver) = mpsc::channel::<Result<ChatEvent, AppError>>(8);
    let (updates, mut texts) = mpsc::channel::<String>(8);
    let cancel = CancellationToken::new();
    let (service, store) = (assistance.chat.clone(), assistance.store.clone());
    tokio::spawn(async move {
        let run = service.execute(&store, turn, updates, cancel.clone());
        tokio::pin!(run);
        let mut listening = true;
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => break outcome,
                Some(text) = texts.recv(), if listening => {
                    if events.send(Ok(ChatEvent::Text(text))).await.is_err() {
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
        let _ = events.send(outcome.map(ChatEvent::FinalText)).await;
    });
    Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(
        receiver,
    )))
}

/// Converts and stores one upload among the caller's documents.
pub async fn upload(
    assistance: &Assistance,
    call: UploadCall,
) -> Result<Vec<Descriptor>, AppError> {
    let (user_id, _) = open_app(
        assistance,
        &call.actor,
        &call.app_id,
        &call.revision,
        Capability::Files,
    )
    .await?;
    let uploads = assistance.uploads.clone();
    let files = call.files;
    tokio::task::spawn_blocking(move || uploads.store(&user_id, files))
        .await
        .map_err(|_| AppError::from_code(ErrorCode::Internal))?
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
