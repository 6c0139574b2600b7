//! A read run beside its caller's fresh check.
//!
//! A read tool call (a table's `list`, `get` or `aggregate`, or an action
//! that only reads) named in its headers (`Mcp-Name`) by a credential this
//! replica saw answered for the same app within [`WINDOW`] does not wait for
//! `AuthorizeCall` before it reads: the gateway reads the (small) body, builds
//! the `DataService.Execute` the call would send if nothing had changed since
//! (the principal and the app's catalogue entry as core last answered them),
//! and sends it while core checks the credential and the grant afresh. The
//! call then runs as ever on the fresh answer; when it comes to send its
//! request and that request is exactly the one already sent (the same actor,
//! access, revision, contract, provenance, table, operation and arguments),
//! it takes the answer instead of asking again. Anything that changed (a grant
//! revoked or lowered, a new revision, a refused credential) makes the request
//! differ or the call stop before it, and the early answer is dropped unread.
//! At one client this takes `AuthorizeCall`'s round trip off a read's path
//! (`bench/README.md`, issue 51).
//!
//! What it must never do: release an early answer to a call whose fresh
//! request differs from the one that produced it; read early for a change
//! (a mutation waits for its check, then for its confirmation); read a body
//! early for a credential this replica has not seen answered within
//! [`WINDOW`], or a body over [`MAX_BODY`]; keep a credential in memory (it is
//! remembered by its SHA-256).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sasha_contract::tools::ToolTarget;
use sasha_proto::pb::{self, AuthenticateRequest, ExecuteRequest};
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::auth::Caller;
use crate::calls::{self, DataCall};
use crate::catalogue::App;
use crate::schemas::{Part, SchemaKey};
use crate::tools::AppTool;

/// How long after core answered for a credential and an app its next read of
/// that app may run beside the check: the body of a credential revoked within
/// this window may be read (its answer is never released).
pub const WINDOW: Duration = Duration::from_secs(30);
/// The largest body read before its check: a read's arguments are a
/// few hundred bytes; anything larger waits for the check as before.
pub const MAX_BODY: usize = 16 * 1024;
/// Most remembered (credential, app) pairs per replica; past it the memory
/// starts again (every entry is at most [`WINDOW`] useful anyway).
const MAX_SEEN: usize = 10_000;

/// What this replica remembers of recent answers, and how its early reads
/// went.
#[derive(Debug, Default)]
pub struct Speculation {
    memory: Mutex<Memory>,
    /// Early answers a call took.
    pub used: AtomicU64,
    /// Early answers dropped: the fresh request differed, or the call
    /// stopped before sending one.
    pub discarded: AtomicU64,
}

/// The answers remembered.
#[derive(Debug, Default)]
struct Memory {
    /// By credential and app.
    seen: HashMap<[u8; 32], Seen>,
    /// The apps those answers name, one copy per app, revision and grant
    /// however many credentials use it (its read-only actions may be a few
    /// KiB).
    apps: HashMap<String, Arc<App>>,
}

/// Core's last answer for one credential and app.
#[derive(Debug)]
struct Seen {
    principal: pb::Principal,
    app: Arc<App>,
    at: Instant,
}

impl Speculation {
    /// Records core's fresh answer for `credential` and `app`: of the app,
    /// only what a data request carries and the actions that only read (no
    /// contract: an early read goes only to a worker that has it; no
    /// tables or texts), shared by every credential that answer holds for.
    pub fn remember(&self, credential: &AuthenticateRequest, principal: &pb::Principal, app: &App) {
        let Ok(mut memory) = self.memory.lock() else {
            return;
        };
        if memory.seen.len() >= MAX_SEEN {
            // Only answers of the last WINDOW are any use.
            memory.seen.retain(|_, seen| seen.at.elapsed() <= WINDOW);
            memory.apps.clear();
            if memory.seen.len() >= MAX_SEEN {
                memory.seen.clear();
            }
        }
        // Everything the copy below keeps of the app, but its actions,
        // which its revision decides.
        let shape = format!(
            "{}\0{}\0{:?}\0{:?}\0{}\0{}\0{}\0{:?}",
            app.id,
            app.revision,
            app.contract_hash,
            app.access,
            app.automation,
            app.chat,
            app.files,
            app.data
        );
        let kept = memory
            .apps
            .entry(shape)
            .or_insert_with(|| {
                Arc::new(App {
                    id: app.id.clone(),
                    access: app.access,
                    name: String::new(),
                    description: String::new(),
                    revision: app.revision.clone(),
                    resource_uri: String::new(),
                    chat: app.chat,
                    files: app.files,
                    data: app.data,
                    contract_hash: app.contract_hash.clone(),
                    tables: Default::default(),
                    // The actions that only read: their request is built
                    // here from the compiled operation.
                    actions: app
                        .actions
                        .iter()
                        .filter(|action| !action.mutating)
                        .cloned()
                        .collect(),
                    contract: None,
                    automation: app.automation,
                    preview_scope: None,
                })
            })
            .clone();
        memory.seen.insert(
            key(credential, &app.id),
            Seen {
                principal: principal.clone(),
                app: kept,
                at: Instant::now(),
            },
        );
    }

    /// Core's answer for `credential` and `app_id` if it is at most
    /// [`WINDOW`] old.
    pub fn recall(
        &self,
        credential: &AuthenticateRequest,
        app_id: &str,
    ) -> Option<(pb::Principal, Arc<App>)> {
        let memory = self.memory.lock().ok()?;
        let entry = memory.seen.get(&key(credential, app_id))?;
        (entry.at.elapsed() <= WINDOW).then(|| (entry.principal.clone(), entry.app.clone()))
    }
}

/// The key of a credential and an app: the credential itself is not kept.
fn key(credential: &AuthenticateRequest, app_id: &str) -> [u8; 32] {
    let mut digest = Sha256::new();
    for part in [
        &credential.kind,
        &credential.credential,
        &credential.resource,
        app_id,
    ] {
        digest.update(part.as_bytes());
        digest.update([0]);
    }
    digest.finalize().into()
}

/// An early read's answer, waiting for the call that may take it.
#[derive(Debug)]
pub struct Early {
    request: ExecuteRequest,
    answer: Mutex<Option<(Value, String)>>,
    counts: Arc<Speculation>,
}

impl Early {
    /// The answer, once, to a call about to send exactly `request`.
    pub fn take(&self, request: &ExecuteRequest) -> Option<(Value, String)> {
        if *request != self.request {
            return None;
        }
        let answer = self.answer.lock().ok()?.take()?;
        self.counts.used.fetch_add(1, Ordering::Relaxed);
        Some(answer)
    }
}

impl Drop for Early {
    fn drop(&mut self) {
        if self.answer.get_mut().is_ok_and(|answer| answer.is_some()) {
            self.counts.discarded.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A `tools/call` body, as far as an early read needs it.
#[derive(Deserialize)]
struct ToolCall {
    method: String,
    params: Params,
}

#[derive(Deserialize)]
struct Params {
    name: String,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
}

/// The arguments of `body` if it is a `tools/call` of `tool`, as the
/// handler will read them (`arguments`, or an empty object).
pub fn arguments(body: &[u8], tool: &str) -> Option<Value> {
    let call: ToolCall = serde_json::from_slice(body).ok()?;
    (call.method == "tools/call" && call.params.name == tool)
        .then(|| Value::Object(call.params.arguments.unwrap_or_default()))
}

/// The data request a read tool call makes of its arguments.
#[derive(Debug)]
pub struct Read {
    pub operation: &'static str,
    pub table: String,
    pub request: Value,
    /// The action's id, for an action's read.
    pub action_id: Option<String>,
}

impl Read {
    /// What `tool` (decoded from `name`) of `app` reads with `args`:
    /// `None` for a change, an unknown tool, or an action whose input its
    /// schema refuses (the call itself then answers as ever).
    pub fn of(
        gateway: &crate::Gateway,
        app: &App,
        name: &str,
        target: &ToolTarget,
        args: Value,
    ) -> Option<Read> {
        match (target, AppTool::resolve(app, target)) {
            (
                ToolTarget::Table {
                    table, operation, ..
                },
                _,
            ) => (!operation.is_mutating()).then(|| Read {
                operation: operation.name(),
                table: table.clone(),
                request: args,
                action_id: None,
            }),
            (_, Some(tool @ AppTool::Action(action))) if !action.mutating => {
                let key = SchemaKey::App {
                    app: &app.id,
                    revision: &app.revision,
                    tool: name,
                    part: Part::Input,
                };
                gateway
                    .validators
                    .validate(key, || tool.input_schema(), &args)
                    .ok()?;
                // A read's request carries no idempotency key.
                let (operation, table, request) = calls::action_request(action, &args, "").ok()?;
                Some(Read {
                    operation,
                    table,
                    request,
                    action_id: Some(action.id.clone()),
                })
            }
            _ => None,
        }
    }
}

/// Sends `read` as `caller` would, with `app` as core last answered it,
/// once, to the worker already known to own the app
/// ([`calls::execute_known`]). `None` when it was not sent or not answered:
/// the call then asks itself, after its check.
pub async fn read(
    gateway: &crate::Gateway,
    caller: Caller,
    app: Arc<App>,
    read: Read,
) -> Option<Early> {
    let call = DataCall {
        caller: &caller,
        app: &app,
        operation: read.operation,
        table: &read.table,
        request: read.request,
        action_id: read.action_id.as_deref(),
    };
    let request = calls::request_of(&call).ok()?;
    let answer = calls::execute_known(
        &gateway.data,
        gateway.call_deadline,
        &gateway.contracts,
        request.clone(),
    )
    .await?;
    Some(Early {
        request,
        answer: Mutex::new(Some(answer)),
        counts: gateway.speculation.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_tools_call_gives_arguments() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"app__a__t__list","arguments":{"limit":5}}}"#;
        assert_eq!(
            arguments(body, "app__a__t__list"),
            Some(serde_json::json!({"limit": 5}))
        );
        assert_eq!(arguments(body, "app__a__t__get"), None);
        let bare = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#;
        assert_eq!(arguments(bare, "x"), Some(serde_json::json!({})));
        let other = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"x"}}"#;
        assert_eq!(arguments(other, "x"), None);
        assert_eq!(arguments(b"not json", "x"), None);
    }

    #[test]
    fn a_credential_is_remembered_per_app_and_only_by_its_digest() {
        let credential = AuthenticateRequest {
            kind: "bearer".into(),
            credential: "sasha_at_secret".into(),
            resource: "http://127.0.0.1/mcp".into(),
        };
        assert_ne!(key(&credential, "a"), key(&credential, "b"));
        let other = AuthenticateRequest {
            credential: "sasha_at_other".into(),
            ..credential.clone()
        };
        assert_ne!(key(&credential, "a"), key(&other, "a"));
        // The parts are separated: moving a byte between them is another key.
        let moved = AuthenticateRequest {
            kind: "bearers".into(),
            credential: "asha_at_secret".into(),
            ..credential.clone()
        };
        assert_ne!(key(&credential, "a"), key(&moved, "a"));
        let speculation = Speculation::default();
        assert!(speculation.recall(&credential, "a").is_none());
    }

    fn app(access: sasha_contract::caller::AppAccess) -> App {
        App {
            id: "notes".into(),
            access,
            name: "Notes".into(),
            description: "Keep notes".into(),
            revision: "r1".into(),
            resource_uri: "ui://sasha/apps/notes/revisions/r1".into(),
            chat: false,
            files: false,
            data: crate::catalogue::DataCapability::ReadWrite,
            contract_hash: Some("h1".into()),
            tables: Default::default(),
            actions: Vec::new(),
            contract: None,
            automation: false,
            preview_scope: None,
        }
    }

    #[test]
    fn credentials_answered_for_the_same_app_share_one_copy_of_it() {
        use sasha_contract::caller::AppAccess;
        let credential = |secret: &str| AuthenticateRequest {
            kind: "bearer".into(),
            credential: secret.into(),
            resource: String::new(),
        };
        let principal = |user: &str| pb::Principal {
            user_id: user.into(),
            ..Default::default()
        };
        let speculation = Speculation::default();
        speculation.remember(&credential("a"), &principal("alice"), &app(AppAccess::Use));
        speculation.remember(&credential("b"), &principal("bob"), &app(AppAccess::Use));
        speculation.remember(
            &credential("c"),
            &principal("carol"),
            &app(AppAccess::Manage),
        );
        let (alice, first) = speculation.recall(&credential("a"), "notes").unwrap();
        let (bob, second) = speculation.recall(&credential("b"), "notes").unwrap();
        let (_, managing) = speculation.recall(&credential("c"), "notes").unwrap();
        assert_eq!(
            (alice.user_id.as_str(), bob.user_id.as_str()),
            ("alice", "bob")
        );
        assert!(Arc::ptr_eq(&first, &second), "one copy for one grant");
        assert!(
            !Arc::ptr_eq(&first, &managing),
            "another grant, another copy"
        );
        assert_eq!(managing.access, AppAccess::Manage);
        // Only what a data request carries is kept.
        assert_eq!((first.name.as_str(), first.resource_uri.as_str()), ("", ""));
        assert!(speculation.recall(&credential("a"), "other").is_none());
    }
}
