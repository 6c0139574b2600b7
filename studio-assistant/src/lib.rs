//! studio-assistant: Studio's model-backed help, against one
//! OpenAI-compatible chat provider (`SASHA_CHAT_*`):
//!
//! - [`provider`]: the provider client (streaming completions, tool calls,
//!   turn limits) and app chat's turns, whose conversations the core
//!   database keeps;
//! - [`app_calls`]: `CoreService.Chat` and `CoreService.Upload`, an open
//!   app's chat turn and document upload, each checked again here;
//! - [`assistant`]: the Studio assistant, whose tools are the person's own
//!   MCP tools through the gateway and whose every change waits for the
//!   person's click;
//! - [`http`]: the assistant's routes; [`apps`]: the view of the catalogue
//!   it reads.
//!
//! [`Assistance`] is the state all of them serve from; studio-core holds
//! one, answers [`apps::AppCatalogue`] from its catalogue and merges the
//! routes into the Studio router.
//!
//! What it must never do: let a model approve its own change, run a turn
//! for anyone but a signed-in person, read another user's documents or
//! conversations, or let the provider's words about itself reach an app.

pub mod app_calls;
pub mod apps;
pub mod assistant;
pub mod http;
pub mod provider;

use std::collections::BTreeMap;
use std::sync::Arc;

use sasha_proto::AppError;
use studio_identity::Accounts;
use studio_store::{AppAccess, Store, blocking};
use studio_uploads::UploadArea;

use crate::apps::AppCatalogue;
use crate::assistant::Assistant;
use crate::provider::ChatService;

/// What the assistant's routes and app calls serve from.
#[derive(Debug)]
pub struct Assistance {
    /// Who is calling the routes.
    accounts: Arc<Accounts>,
    /// Conversations, tokens, grants and member apps (`DB_PATH`).
    store: Store,
    /// The provider: app chat turns and the assistant's completions.
    chat: ChatService,
    /// The users' converted documents, in the core database.
    uploads: Arc<UploadArea>,
    /// studio-core's catalogue, as the assistant reads it.
    apps: Arc<dyn AppCatalogue>,
    /// The Studio assistant's running turns and waiting confirmations.
    assistant: Arc<Assistant>,
}

impl Assistance {
    /// The assistant over `store`, answering through `chat`, storing
    /// documents in `uploads`, reading apps from `apps`; the assistant's MCP
    /// client reaches the gateway at `mcp_url` (`SASHA_ASSISTANT_MCP_URL`).
    pub fn new(
        accounts: Arc<Accounts>,
        store: Store,
        chat: ChatService,
        uploads: Arc<UploadArea>,
        apps: Arc<dyn AppCatalogue>,
        mcp_url: String,
    ) -> Assistance {
        Assistance {
            accounts,
            store,
            chat,
            uploads,
            apps,
            assistant: Arc::new(Assistant::new(mcp_url)),
        }
    }

    /// Ends every confirmation still waiting in the store as expired (at
    /// start-up: no turn of this process waits for one) and stores each of
    /// their conversations' unanswered calls as cancelled, so no transcript
    /// shows a call running that never will. Answers how many expired.
    pub async fn expire_abandoned(&self) -> Result<usize, AppError> {
        let store = self.store.clone();
        blocking(move || {
            let expired = store.expire_waiting_approvals()?;
            let reason = assistant::unrun_reason(studio_store::ApprovalOutcome::Expired);
            for approval in &expired {
                let history =
                    store.conversation_messages(&approval.user_id, &approval.conversation_id)?;
                let notes: Vec<serde_json::Value> = assistant::turn::unanswered(&history)
                    .into_iter()
                    .map(|(call, tool)| assistant::turn::not_run(&call, &tool, reason))
                    .collect();
                if !notes.is_empty() {
                    store.append_messages(&approval.user_id, &approval.conversation_id, &notes)?;
                }
            }
            Ok(expired.len())
        })
        .await
    }

    /// The Studio assistant's turns and waiting confirmations.
    pub fn assistant(&self) -> &Arc<Assistant> {
        &self.assistant
    }

    /// The core database this serves from.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Every app `user_id` holds access on, read fresh from the store.
    async fn granted_apps(&self, user_id: &str) -> Result<BTreeMap<String, AppAccess>, AppError> {
        let (store, user_id) = (self.store.clone(), user_id.to_owned());
        blocking(move || store.access_by_app(&user_id)).await
    }
}
