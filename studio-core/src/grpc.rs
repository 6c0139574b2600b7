//! `CoreService`: what mcp-gateway asks studio-core, over mTLS gRPC, and
//! studio-core's wire: requests become domain calls and answers become
//! replies here, in [`convert`] and in [`placement`] (`PlacementService`),
//! the only files of the crate besides the data-worker client
//! (`crate::data_worker`) that name `pb::…`. [`router`] is the listener's
//! every service: `CoreService` answers mcp-gateway's certificate alone.
//!
//! Every answer is computed fresh from the store and the catalogue: a revoked
//! grant is gone on the very next call. The gateway passes back the principal
//! `Authenticate` gave it; access is still read here, never trusted from it.
//!
//! What it must never do: decide who may (the domain function behind each
//! RPC does, for the MCP tool and the Studio route alike), or be imported by
//! a domain module.

pub(crate) mod calls;
pub(crate) mod convert;
pub(crate) mod health;
pub(crate) mod placement;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use sasha_proto::convert::{FromWire, ToWire, resource_meta};
use sasha_proto::pb::core_service_server::{CoreService, CoreServiceServer};
use sasha_proto::pb::{self, HealthReply, HealthRequest};
use sasha_proto::{AppError, ErrorCode};
use studio_assistant::app_calls::{ChatCall, ChatEvent, UploadCall};
use studio_identity::actor::Actor;
use studio_uploads::IncomingFile;
use tokio_stream::{Stream, StreamExt as _};
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

use sasha_package::manifest::{Capabilities, DataCapability};
use sasha_package::validate::Package;
use studio_store::blocking;
use studio_store::{
    AppAccess, ConfirmationRefusal, ConfirmedCall, MAX_CONFIRMATION_TOOL_CHARS, Principal,
    PrincipalKind, Scope, SuggestionRefusal,
};

use crate::catalogue::{AppEntry, Snapshot};
use crate::state::Core;

/// The largest `CoreService` request: an upload's 25 MiB of documents and
/// their names.
const MAX_CORE_MESSAGE: usize = 26 * 1024 * 1024;

/// `CoreService` over `core`, as studio-core serves it.
pub(crate) fn service(core: Arc<Core>) -> CoreServiceServer<CoreGrpc> {
    // An upload carries up to 25 MiB of documents in one message.
    CoreServiceServer::new(CoreGrpc {
        core,
        entries: Arc::default(),
    })
    .max_decoding_message_size(MAX_CORE_MESSAGE)
}

/// Every service of studio-core's gRPC listener, as studio-core serves
/// them: `CoreService`, for mcp-gateway's certificate alone
/// ([`only_the_gateway`], refusing before the replication gate admits
/// anything), and `PlacementService`, each behind the replication gate.
pub(crate) fn router(core: Arc<Core>) -> tonic::transport::server::Router {
    let replication = core.replication.clone();
    sasha_service::grpc::server_builder()
        .add_service(InterceptedService::new(
            crate::replication::DurableCalls::new(service(core.clone()), replication.clone()),
            only_the_gateway,
        ))
        .add_service(crate::replication::DurableCalls::new(
            placement::service(core),
            replication,
        ))
}

/// Refuses a call unless the caller's certificate is `role`'s: the mTLS
/// handshake admitted every role that may call studio-core
/// (`Role::allowed_callers`), and each RPC answers one of them.
pub(crate) fn only_from<T>(
    request: &Request<T>,
    role: sasha_service::Role,
    refusal: &'static str,
) -> Result<(), Status> {
    if sasha_service::identity::peer_role(request) == Some(role) {
        return Ok(());
    }
    Err(AppError::new(ErrorCode::AccessDenied, refusal).to_status())
}

/// `CoreService` answers mcp-gateway alone: a data-worker, admitted by the
/// handshake to renew its lease, is refused every call before it runs.
fn only_the_gateway(request: Request<()>) -> Result<Request<()>, Status> {
    only_from(
        &request,
        sasha_service::Role::McpGateway,
        "only mcp-gateway calls CoreService",
    )?;
    Ok(request)
}

/// The `CoreService` implementation.
#[derive(Debug, Clone)]
pub(crate) struct CoreGrpc {
    pub(crate) core: Arc<Core>,
    pub(crate) entries: Arc<EntryCache>,
}

/// What `GetCatalogue` says about one package, converted once per validated
/// package (a package is immutable; a changed folder is validated into a new
/// one). Only the caller's access (and, for one app asked for by id, the data
/// contract) is added per call, read fresh.
#[derive(Debug)]
struct Entry {
    /// The package this entry was made from.
    package: Arc<Package>,
    /// The app's catalogue entry with `access` and `contract` left empty.
    app: pb::CatalogueApp,
    /// The data contract, for a data app.
    contract: Option<pb::DataContract>,
}

/// More app ids than a catalogue holds in practice; past it the cache starts
/// again (ids of removed apps would otherwise stay for the process's life).
const ENTRY_CACHE_LIMIT: usize = 16_384;

/// [`Entry`] per app id.
#[derive(Debug, Default)]
pub(crate) struct EntryCache(Mutex<HashMap<String, Arc<Entry>>>);

impl EntryCache {
    fn get(&self, id: &str, package: &Arc<Package>) -> Arc<Entry> {
        let mut cache = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = cache.get(id)
            && Arc::ptr_eq(&entry.package, package)
        {
            return Arc::clone(entry);
        }
        let entry = Arc::new(Entry::of(id, package));
        if cache.len() >= ENTRY_CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(id.to_owned(), Arc::clone(&entry));
        entry
    }
}

impl Entry {
    fn of(id: &str, package: &Arc<Package>) -> Entry {
        let manifest = &package.manifest;
        let tables = package
            .data
            .as_ref()
            .map(|data| {
                data.tables
                    .iter()
                    .filter_map(|(name, declaration)| {
                        let table = pb::TableStructure::from(data.schema.tables.get(name)?);
                        Some((
                            name.clone(),
                            pb::CatalogueTable {
                                declaration: Some(pb::TableDeclaration::from(declaration)),
                                columns: table.columns,
                                unique: table.unique,
                                foreign_keys: table.foreign_keys,
                                checks: table.checks,
                            },
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let app = pb::CatalogueApp {
            id: id.to_owned(),
            // Each answer's own (`Entries::app`).
            access: pb::AppAccess::Unspecified.into(),
            name: manifest.name.clone(),
            description: manifest.description.clone(),
            revision: package.resource.revision.clone(),
            resource_uri: package.resource.uri.clone(),
            capabilities: Some(capabilities(&manifest.capabilities)),
            contract_hash: package
                .data
                .as_ref()
                .map(|data| data.hash.clone())
                .unwrap_or_default(),
            tables,
            actions: package
                .actions
                .iter()
                .map(pb::CompiledAction::from)
                .collect(),
            contract: None,
            automation: false,
            preview_scope: None,
        };
        Entry {
            package: Arc::clone(package),
            app,
            contract: package.data.as_ref().map(pb::DataContract::from),
        }
    }
}

fn capabilities(capabilities: &Capabilities) -> pb::Capabilities {
    pb::Capabilities {
        chat: capabilities.chat,
        files: capabilities.files,
        data: match capabilities.data {
            DataCapability::None => pb::DataCapability::None,
            DataCapability::Read => pb::DataCapability::Read,
            DataCapability::ReadWrite => pb::DataCapability::ReadWrite,
        } as i32,
    }
}

type GrpcResult<T> = Result<Response<T>, Status>;

/// The event stream of one chat turn, as the gateway reads it.
type ChatStream = Pin<Box<dyn Stream<Item = Result<pb::ChatEvent, Status>> + Send>>;

/// The actor a request names; see [`convert::actor`].
fn actor(principal: Option<&pb::Principal>) -> Result<Actor, Status> {
    convert::actor(principal).map_err(|error| error.to_status())
}

/// The user id of a principal the gateway passed back, and whether it may
/// invoke apps at all.
fn caller(principal: Option<&pb::Principal>) -> Result<(String, bool), Status> {
    let actor = actor(principal)?;
    let invokes = !actor.is(PrincipalKind::ApiKey) && actor.has(Scope::AppsInvoke);
    Ok((actor.user_id, invokes))
}

/// A refused confirmation as the gateway sees it. `NotValid` is one answer
/// for every failed binding, so it tells the caller nothing about which.
fn confirmation_refused(refusal: ConfirmationRefusal) -> Status {
    let message = refusal.to_string();
    match refusal {
        ConfirmationRefusal::InvalidInput { field, .. } => {
            AppError::new(ErrorCode::InputInvalid, message)
                .with_details(serde_json::json!({ "field": field }))
        }
        ConfirmationRefusal::NotValid => AppError::new(ErrorCode::ConfirmationRequired, message),
        ConfirmationRefusal::TooManyPending { .. } => {
            AppError::new(ErrorCode::ResourceLimit, message)
        }
        ConfirmationRefusal::UnknownUser => AppError::new(
            ErrorCode::Unauthenticated,
            "the principal's user no longer exists",
        ),
    }
    .to_status()
}

impl CoreGrpc {
    /// The access `user_id` holds on every valid app, read fresh.
    async fn granted(&self, user_id: String) -> Result<Vec<(String, AppAccess)>, Status> {
        let snapshot = self.core.catalogue.current();
        let granted = self
            .core
            .granted_apps(&user_id)
            .await
            .map_err(|error| error.to_status())?;
        Ok(granted
            .into_iter()
            .filter(|(id, _)| matches!(snapshot.apps.get(id), Some(AppEntry::Valid(_))))
            .collect())
    }

    /// The catalogue entry of app `id` as a caller with `access` sees it;
    /// `None` when the app is not valid in `snapshot`. With
    /// `Some(known_contract_hash)` (one app asked for by id: a call about to
    /// run) it also carries the data contract, which the caller hands to
    /// data-worker when the worker has not seen this hash yet, unless the
    /// caller says it already holds this hash.
    fn app_entry(
        &self,
        snapshot: &Snapshot,
        id: &str,
        access: AppAccess,
        known_contract_hash: Option<&str>,
    ) -> Option<pb::CatalogueApp> {
        let Some(AppEntry::Valid(package)) = snapshot.apps.get(id) else {
            return None;
        };
        let entry = self.entries.get(id, package);
        let mut app = entry.app.clone();
        app.access = access.to_wire();
        if let Some(known) = known_contract_hash
            && let Some(contract) = &entry.contract
            && contract.hash != known
        {
            app.contract = Some(contract.clone());
        }
        Some(app)
    }
}

/// The principal a credential names, read fresh: a bearer token or a
/// browser session, unexpired; an OAuth access token only at the resource
/// it was issued for (never passed through to, or accepted by, another
/// audience). `None` when the credential is not valid.
fn principal_of(
    store: &studio_store::Store,
    request: &pb::AuthenticateRequest,
) -> Result<Option<Principal>, studio_store::StoreError> {
    let principal = match request.kind.as_str() {
        "bearer" => store.token(&request.credential)?,
        "session" => store.session(&request.credential)?,
        // Refused before the hop by `check_kind`.
        _ => None,
    };
    Ok(principal.filter(|principal| {
        principal
            .audience
            .as_deref()
            .is_none_or(|audience| audience == request.resource)
    }))
}

fn check_kind(request: &pb::AuthenticateRequest) -> Result<(), Status> {
    match request.kind.as_str() {
        "bearer" | "session" => Ok(()),
        _ => Err(
            AppError::new(ErrorCode::InputInvalid, "kind must be bearer or session").to_status(),
        ),
    }
}

fn not_valid() -> Status {
    AppError::new(ErrorCode::Unauthenticated, "the credential is not valid").to_status()
}

#[tonic::async_trait]
impl CoreService for CoreGrpc {
    #[tracing::instrument(skip_all, name = "core.health")]
    async fn health(&self, request: Request<HealthRequest>) -> GrpcResult<HealthReply> {
        Ok(Response::new(
            health::health(&self.core, request.get_ref().deep).await,
        ))
    }

    #[tracing::instrument(skip_all, name = "core.authenticate")]
    async fn authenticate(
        &self,
        request: Request<pb::AuthenticateRequest>,
    ) -> GrpcResult<pb::Principal> {
        let request = request.into_inner();
        check_kind(&request)?;
        let store = self.core.store.clone();
        let principal = blocking(move || {
            let Some(principal) = principal_of(&store, &request)? else {
                return Ok(None);
            };
            let mut wire = convert::principal(&principal);
            wire.member_apps_off = !store.member_apps_enabled()?;
            Ok(Some(wire))
        })
        .await
        .map_err(|error| error.to_status())?;
        principal.map(Response::new).ok_or_else(not_valid)
    }

    /// `Authenticate` and the one app's `GetCatalogue` entry in one blocking
    /// hop on one lock of the core database: the credential, and the
    /// caller's grant on that app alone, both read fresh.
    #[tracing::instrument(skip_all, name = "core.authorize_call")]
    async fn authorize_call(
        &self,
        request: Request<pb::AuthorizeCallRequest>,
    ) -> GrpcResult<pb::AuthorizedCall> {
        let request = request.into_inner();
        let store = self.core.store.clone();
        let credential = request.credential.unwrap_or_default();
        check_kind(&credential)?;
        let app_id = request.app_id.clone();
        let (principal, access) = blocking(move || {
            let Some(principal) = principal_of(&store, &credential)? else {
                return Ok((None, None));
            };
            let wire = convert::principal(&principal);
            let invokes = caller(Some(&wire)).is_ok_and(|(_, invokes)| invokes);
            let access = if invokes {
                store.access(&app_id, &principal.user.id)?
            } else {
                None
            };
            // Only an operator-minted access token can hold write consent.
            let automation = access.is_some()
                && principal.kind == PrincipalKind::Access
                && principal.audience.is_none()
                && store.write_consent(&credential.credential, &app_id)?;
            Ok((Some(wire), access.map(|access| (access, automation))))
        })
        .await
        .map_err(|error| error.to_status())?;
        let principal = principal.ok_or_else(not_valid)?;
        let snapshot = self.core.catalogue.current();
        let apps = access
            .and_then(|(access, automation)| {
                let mut app = self.app_entry(
                    &snapshot,
                    &request.app_id,
                    access,
                    Some(&request.known_contract_hash),
                )?;
                app.automation = automation;
                Some(app)
            })
            .into_iter()
            .collect();
        Ok(Response::new(pb::AuthorizedCall {
            principal: Some(principal),
            catalogue: Some(pb::Catalogue {
                fingerprint: snapshot.fingerprint.clone(),
                apps,
            }),
        }))
    }

    #[tracing::instrument(skip_all, name = "core.list_apps")]
    async fn list_apps(&self, request: Request<pb::ListAppsRequest>) -> GrpcResult<pb::AppList> {
        let (user_id, invokes) = caller(request.get_ref().principal.as_ref())?;
        if !invokes {
            return Ok(Response::new(pb::AppList::default()));
        }
        let snapshot = self.core.catalogue.current();
        let apps = self
            .granted(user_id)
            .await?
            .into_iter()
            .filter_map(|(id, access)| match snapshot.apps.get(&id) {
                Some(AppEntry::Valid(package)) => Some(pb::AppSummary {
                    name: package.manifest.name.clone(),
                    description: package.manifest.description.clone(),
                    revision: package.resource.revision.clone(),
                    access: access.to_wire(),
                    resource_uri: package.resource.uri.clone(),
                    id,
                }),
                _ => None,
            })
            .collect();
        Ok(Response::new(pb::AppList { apps }))
    }

    #[tracing::instrument(skip_all, name = "core.check_access")]
    async fn check_access(
        &self,
        request: Request<pb::CheckAccessRequest>,
    ) -> GrpcResult<pb::AccessDecision> {
        let request = request.into_inner();
        let (user_id, invokes) = caller(request.principal.as_ref())?;
        let needed = AppAccess::from_wire(request.access).map_err(|_| {
            AppError::new(ErrorCode::InputInvalid, "access must be use or manage").to_status()
        })?;
        if !invokes {
            return Ok(Response::new(pb::AccessDecision { allowed: false }));
        }
        let store = self.core.store.clone();
        let app_id = request.app_id;
        let held = blocking(move || store.access(&app_id, &user_id))
            .await
            .map_err(|error| error.to_status())?;
        let allowed = matches!(
            (held, needed),
            (Some(AppAccess::Manage), _) | (Some(AppAccess::Use), AppAccess::Use)
        );
        Ok(Response::new(pb::AccessDecision { allowed }))
    }

    #[tracing::instrument(skip_all, name = "core.get_resource")]
    async fn get_resource(
        &self,
        request: Request<pb::GetResourceRequest>,
    ) -> GrpcResult<pb::AppResource> {
        let request = request.into_inner();
        let (user_id, invokes) = caller(request.principal.as_ref())?;
        let hidden = || AppError::from_code(ErrorCode::NotFound).to_status();
        if !invokes {
            return Err(hidden());
        }
        let store = self.core.store.clone();
        let app_id = request.app_id.clone();
        let held = blocking(move || store.access(&app_id, &user_id))
            .await
            .map_err(|error| error.to_status())?;
        if held.is_none() {
            return Err(hidden());
        }
        // The live catalogue, else the revision ledger: an old revision reads
        // the same on every replica and after a restart.
        let resource = crate::ledger::resource(&self.core, &request.app_id, &request.revision)
            .await
            .map_err(|error| error.to_status())?;
        Ok(Response::new(pb::AppResource {
            uri: resource.uri.clone(),
            mime_type: resource.mime_type.clone(),
            html: resource.html.clone(),
            meta: Some(resource_meta(&resource.meta)),
        }))
    }

    #[tracing::instrument(skip_all, name = "core.get_catalogue")]
    async fn get_catalogue(
        &self,
        request: Request<pb::CatalogueRequest>,
    ) -> GrpcResult<pb::Catalogue> {
        let request = request.into_inner();
        let (user_id, invokes) = caller(request.principal.as_ref())?;
        let snapshot = self.core.catalogue.current();
        let mut apps = Vec::new();
        if !request.preview.is_empty() {
            // A Studio session previewing a draft: that app only, as its
            // draft, for a principal who manages it; else nothing at all.
            if invokes
                && let Ok(previewer) = convert::actor(request.principal.as_ref())
                && previewer.is(PrincipalKind::Session)
                && let Some(package) = crate::previews::preview_package(
                    &self.core,
                    &previewer,
                    &request.app_id,
                    &request.preview,
                )
                .await
            {
                let entry = Entry::of(&request.app_id, &package);
                let mut app = entry.app.clone();
                app.access = AppAccess::Manage.to_wire();
                // The draft's code and policy run on a copy of the live data
                // holding only what the previewer reads of the live app.
                let scope = crate::previews::preview_scope(
                    &self.core,
                    &snapshot,
                    &previewer,
                    &request.app_id,
                )
                .await
                .map_err(|error| error.to_status())?;
                app.preview_scope = Some(pb::PreviewScope::from(&scope));
                if let Some(contract) = &entry.contract
                    && contract.hash != request.known_contract_hash
                {
                    app.contract = Some(contract.clone());
                }
                apps.push(app);
            }
            return Ok(Response::new(pb::Catalogue {
                fingerprint: snapshot.fingerprint.clone(),
                apps,
            }));
        }
        if invokes {
            for (id, access) in self.granted(user_id).await? {
                if request.app_id.is_empty() {
                    if let Some(app) = self.app_entry(&snapshot, &id, access, None) {
                        apps.push(app);
                    }
                } else if request.app_id == id {
                    apps.extend(self.app_entry(
                        &snapshot,
                        &id,
                        access,
                        Some(&request.known_contract_hash),
                    ));
                }
            }
        }
        Ok(Response::new(pb::Catalogue {
            fingerprint: snapshot.fingerprint.clone(),
            apps,
        }))
    }

    /// Issues (empty `token`) or redeems a confirmation token; see
    /// `studio_store::confirmations` for the semantics. On redeem `idempotency_key`
    /// must be empty: the key comes from the token, never from the caller.
    #[tracing::instrument(skip_all, name = "core.confirm", fields(tool, redeem))]
    async fn confirm(&self, request: Request<pb::ConfirmRequest>) -> GrpcResult<pb::ConfirmReply> {
        let request = request.into_inner();
        let (user_id, invokes) = caller(request.principal.as_ref())?;
        if !invokes {
            return Err(AppError::new(
                ErrorCode::AccessDenied,
                "confirming a write needs the apps:invoke scope",
            )
            .to_status());
        }
        let redeem = !request.token.is_empty();
        let span = tracing::Span::current();
        span.record("redeem", redeem);
        // Only a tool name within bounds goes into the trace.
        if request.tool.len() <= MAX_CONFIRMATION_TOOL_CHARS {
            span.record("tool", request.tool.as_str());
        }
        if redeem && !request.idempotency_key.is_empty() {
            return Err(confirmation_refused(ConfirmationRefusal::InvalidInput {
                field: "idempotency_key",
                reason: "must be empty when redeeming a token".into(),
            }));
        }
        let store = self.core.store.clone();
        if request.decline {
            if !redeem {
                return Err(confirmation_refused(ConfirmationRefusal::InvalidInput {
                    field: "token",
                    reason: "a decline names the token it declines".into(),
                }));
            }
            blocking(move || {
                let call = ConfirmedCall {
                    user_id: &user_id,
                    tool: &request.tool,
                    arguments_json: &request.arguments_json,
                };
                store.decline_confirmation(&call, &request.token)
            })
            .await
            .map_err(|error| error.to_status())?
            .map_err(confirmation_refused)?;
            tracing::info!("confirmation declined");
            return Ok(Response::new(pb::ConfirmReply::default()));
        }
        if redeem {
            let redeemed = blocking(move || {
                let call = ConfirmedCall {
                    user_id: &user_id,
                    tool: &request.tool,
                    arguments_json: &request.arguments_json,
                };
                store.redeem_confirmation(&call, &request.token)
            })
            .await
            .map_err(|error| error.to_status())?
            .map_err(confirmation_refused)?;
            tracing::info!(
                first_redemption = redeemed.first_redemption,
                "confirmation redeemed"
            );
            Ok(Response::new(pb::ConfirmReply {
                token: String::new(),
                idempotency_key: redeemed.idempotency_key,
                expires_at: redeemed.expires_at,
            }))
        } else {
            let issued = blocking(move || {
                let call = ConfirmedCall {
                    user_id: &user_id,
                    tool: &request.tool,
                    arguments_json: &request.arguments_json,
                };
                store.issue_confirmation(&call, &request.idempotency_key)
            })
            .await
            .map_err(|error| error.to_status())?
            .map_err(confirmation_refused)?;
            Ok(Response::new(pb::ConfirmReply {
                token: issued.token,
                idempotency_key: issued.idempotency_key,
                expires_at: issued.expires_at,
            }))
        }
    }

    #[tracing::instrument(skip_all, name = "core.source_files")]
    async fn source_files(
        &self,
        request: Request<pb::SourceFilesRequest>,
    ) -> GrpcResult<pb::SourceFilesReply> {
        let request = request.into_inner();
        calls::source_files(
            &self.core,
            request.principal.as_ref(),
            &request.operation,
            &request.app_id,
            &request.arguments_json,
        )
        .await
        .map(Response::new)
        .map_err(|error| error.to_status())
    }

    /// An app's revision history (the MCP tools `listAppRevisions`,
    /// `readAppRevisionFile`, `diffAppRevisions`, `revertApp`); see
    /// `crate::history`.
    #[tracing::instrument(skip_all, name = "core.history")]
    async fn history(&self, request: Request<pb::HistoryRequest>) -> GrpcResult<pb::HistoryReply> {
        calls::history(&self.core, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|error| error.to_status())
    }

    /// Reviews, publishes or discards an app's draft (the MCP tools
    /// `checkApp` with draft, `publishAppDraft`, `discardAppDraft`); see
    /// `crate::drafts`.
    #[tracing::instrument(skip_all, name = "core.draft")]
    async fn member_apps(
        &self,
        request: Request<pb::MemberAppsRequest>,
    ) -> GrpcResult<pb::MemberAppsReply> {
        calls::member_apps(&self.core, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|error| error.to_status())
    }

    async fn draft(&self, request: Request<pb::DraftRequest>) -> GrpcResult<pb::DraftReply> {
        calls::draft(&self.core, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|error| error.to_status())
    }

    /// Withdraws, restores or deletes an app (the MCP tools `withdrawApp`,
    /// `restoreApp`, `deleteApp`); see `crate::lifecycle`.
    #[tracing::instrument(skip_all, name = "core.app_lifecycle")]
    async fn app_lifecycle(
        &self,
        request: Request<pb::AppLifecycleRequest>,
    ) -> GrpcResult<pb::AppLifecycleReply> {
        calls::lifecycle(&self.core, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|error| error.to_status())
    }

    /// Creates an app (the MCP tool `createApp`); see `crate::create`.
    #[tracing::instrument(skip_all, name = "core.create_app")]
    async fn create_app(
        &self,
        request: Request<pb::CreateAppRequest>,
    ) -> GrpcResult<pb::CreateAppReply> {
        calls::create(&self.core, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|error| error.to_status())
    }

    /// Records an improvement suggestion (the MCP tool `suggestImprovement`)
    /// for the principal's user: only a user credential with `apps:invoke`,
    /// the shape checks of `crate::suggestions`, then the store's per-user
    /// cap. The suggestion's text is never logged.
    #[tracing::instrument(skip_all, name = "core.suggest", fields(kind, severity))]
    async fn suggest(&self, request: Request<pb::SuggestRequest>) -> GrpcResult<pb::SuggestReply> {
        let request = request.into_inner();
        let (user_id, invokes) = caller(request.principal.as_ref())?;
        if !invokes {
            return Err(AppError::new(
                ErrorCode::AccessDenied,
                "suggesting an improvement needs a user's credential with the apps:invoke scope",
            )
            .to_status());
        }
        let suggestion = crate::suggestions::parse(&request.suggestion_json).map_err(|error| {
            // The code and the kind of refused content, never the text.
            let refused = error
                .details
                .as_ref()
                .and_then(|details| details.get("refused"))
                .and_then(|refused| refused.as_str());
            tracing::info!(code = %error.code, refused, "suggestion refused");
            error.to_status()
        })?;
        let span = tracing::Span::current();
        span.record("kind", suggestion.kind.as_str());
        span.record("severity", suggestion.severity.as_str());
        let store = self.core.store.clone();
        let id = blocking(move || store.record_suggestion(&user_id, &suggestion))
            .await
            .map_err(|error| error.to_status())?
            .map_err(|refusal| {
                let message = refusal.to_string();
                match refusal {
                    SuggestionRefusal::TooMany { .. } => {
                        AppError::new(ErrorCode::ResourceLimit, message)
                    }
                    SuggestionRefusal::UnknownUser => AppError::new(
                        ErrorCode::Unauthenticated,
                        "the principal's user no longer exists",
                    ),
                }
                .to_status()
            })?;
        tracing::info!(%id, "suggestion recorded");
        Ok(Response::new(pb::SuggestReply { id }))
    }

    type ChatStream = ChatStream;

    #[tracing::instrument(skip_all, name = "core.chat")]
    async fn chat(&self, request: Request<pb::ChatRequest>) -> GrpcResult<Self::ChatStream> {
        let request = request.into_inner();
        let call = ChatCall {
            actor: actor(request.principal.as_ref())?,
            app_id: request.app_id,
            revision: request.revision,
            prompt: request.prompt,
            new_session: request.new_session,
        };
        let events = studio_assistant::app_calls::chat(self.core.assistance.clone(), call)
            .await
            .map_err(|error| error.to_status())?;
        Ok(Response::new(Box::pin(events.map(|event| {
            event
                .map(|event| pb::ChatEvent {
                    event: Some(match event {
                        ChatEvent::Text(text) => pb::chat_event::Event::Text(text),
                        ChatEvent::FinalText(text) => pb::chat_event::Event::FinalText(text),
                    }),
                })
                .map_err(|error| error.to_status())
        }))))
    }

    #[tracing::instrument(skip_all, name = "core.upload")]
    async fn upload(&self, request: Request<pb::UploadRequest>) -> GrpcResult<pb::UploadReply> {
        let request = request.into_inner();
        let call = UploadCall {
            actor: actor(request.principal.as_ref())?,
            app_id: request.app_id,
            revision: request.revision,
            files: request
                .files
                .into_iter()
                .map(|file| IncomingFile {
                    name: file.name,
                    content_type: file.content_type,
                    data: file.data,
                })
                .collect(),
        };
        let descriptors = studio_assistant::app_calls::upload(&self.core.assistance, call)
            .await
            .map_err(|error| error.to_status())?;
        Ok(Response::new(pb::UploadReply {
            files: descriptors
                .into_iter()
                .map(|descriptor| pb::UploadDescriptor {
                    original: descriptor.original,
                    converted: descriptor.converted,
                })
                .collect(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use sasha_package::actions::CompiledAction;
    use sasha_package::sql::DataContract;
    use sasha_package::validate::validate_dir;
    use sasha_proto::convert::ui_meta;
    use serde_json::json;

    use super::*;

    fn fixture(id: &str) -> Arc<Package> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/packages/valid")
            .join(id);
        let validation = validate_dir(&dir);
        Arc::new(
            validation
                .package
                .unwrap_or_else(|| panic!("{id}: {:?}", validation.diagnostics)),
        )
    }

    #[test]
    fn resource_meta_carries_all_of_the_assembled_meta() {
        let package = fixture("hello");
        let meta = resource_meta(&package.resource.meta);
        assert_eq!(meta.source_digest.len(), 64, "{meta:?}");
        assert_eq!(
            meta.source_digest,
            package.resource.meta["sasha"]["sourceDigest"]
        );
        // What the gateway rebuilds from the message is exactly the
        // resource's `_meta.ui`: nothing is lost on the way.
        assert_eq!(ui_meta(&meta), package.resource.meta);
    }

    #[test]
    fn resource_meta_keeps_declared_domains_and_the_border() {
        let meta = resource_meta(&json!({
            "csp": {
                "connectDomains": ["https://a.example"],
                "resourceDomains": ["https://b.example", "https://c.example"],
                "frameDomains": ["https://d.example"],
                "baseUriDomains": ["https://e.example"],
            },
            "permissions": {},
            "prefersBorder": true,
            "sasha": {"sourceDigest": "f".repeat(64)},
        }));
        assert_eq!(
            meta,
            pb::ResourceMeta {
                connect_domains: vec!["https://a.example".into()],
                resource_domains: vec!["https://b.example".into(), "https://c.example".into()],
                frame_domains: vec!["https://d.example".into()],
                base_uri_domains: vec!["https://e.example".into()],
                prefers_border: true,
                source_digest: "f".repeat(64),
            }
        );
    }

    #[test]
    fn a_data_app_entry_carries_its_tables_actions_and_contract() {
        let package = fixture("expense-log");
        let data = package.data.as_ref().unwrap();
        let entry = Entry::of("expense-log", &package);
        let app = &entry.app;
        assert_eq!(app.id, "expense-log");
        assert_eq!(
            app.access,
            i32::from(pb::AppAccess::Unspecified),
            "access is the caller's, added per call"
        );
        assert_eq!(app.name, package.manifest.name);
        assert_eq!(app.description, package.manifest.description);
        assert_eq!(app.revision, package.resource.revision);
        assert_eq!(app.resource_uri, package.resource.uri);
        assert_eq!(
            app.capabilities,
            Some(pb::Capabilities {
                chat: false,
                files: false,
                data: pb::DataCapability::ReadWrite as i32,
            })
        );
        assert_eq!(app.contract_hash, data.hash);
        assert!(app.contract.is_none(), "the contract is added per call");

        // Every declared table the schema has, with its declaration and columns.
        let names: std::collections::BTreeSet<&str> =
            app.tables.keys().map(String::as_str).collect();
        assert_eq!(names, ["categories", "expenses"].into());
        let expenses = &app.tables["expenses"];
        assert_eq!(
            expenses.declaration,
            Some(pb::TableDeclaration {
                access: pb::Access::Owner as i32,
                owner_field: Some("created_by".into()),
                ..Default::default()
            })
        );
        assert_eq!(
            app.tables["categories"].declaration,
            Some(pb::TableDeclaration {
                access: pb::Access::Shared as i32,
                owner_field: None,
                ..Default::default()
            })
        );
        let columns: Vec<_> = expenses
            .columns
            .iter()
            .map(sasha_package::sql::Column::from)
            .collect();
        assert_eq!(columns, data.schema.tables["expenses"].columns);
        assert!(columns.iter().any(|column| column.name == "amount"));

        // The compiled actions, in package order, each converting back unchanged.
        let actions: Vec<CompiledAction> = app
            .actions
            .iter()
            .map(|action| CompiledAction::try_from(action).unwrap())
            .collect();
        assert_eq!(actions, package.actions);
        assert!(
            app.actions
                .iter()
                .any(|action| action.mcp_name == "app__expense_log__category_totals"),
            "{:?}",
            app.actions
        );

        let contract = entry.contract.as_ref().unwrap();
        assert_eq!(contract.hash, data.hash);
        assert_eq!(DataContract::try_from(contract).unwrap(), *data);
    }

    #[test]
    fn an_app_without_data_has_no_contract_tables_or_hash() {
        let package = fixture("hello");
        let entry = Entry::of("hello", &package);
        assert_eq!(entry.app.contract_hash, "");
        assert!(entry.app.tables.is_empty());
        assert!(entry.contract.is_none());
        assert_eq!(
            entry.app.capabilities.unwrap().data,
            pb::DataCapability::None as i32
        );
        assert_eq!(entry.app.actions.len(), package.actions.len());
    }

    #[test]
    fn the_entry_cache_converts_a_package_once() {
        let cache = EntryCache::default();
        let package = fixture("hello");
        let first = cache.get("hello", &package);
        assert!(Arc::ptr_eq(&first, &cache.get("hello", &package)));
        // A package validated again is a new one: converted again.
        let revalidated = fixture("hello");
        let second = cache.get("hello", &revalidated);
        assert!(!Arc::ptr_eq(&first, &second));
        assert_eq!(first.app, second.app);
        assert!(Arc::ptr_eq(&second, &cache.get("hello", &revalidated)));
    }
}
