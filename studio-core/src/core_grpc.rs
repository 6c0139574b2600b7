//! `CoreService`: what mcp-gateway asks studio-core, over mTLS gRPC.
//!
//! Every answer is computed fresh from the store and the catalogue: a revoked
//! grant is gone on the very next call. The gateway passes back the principal
//! `Authenticate` gave it; access is still read here, never trusted from it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use sasha_proto::pb::core_service_server::CoreService;
use sasha_proto::pb::{self, HealthReply, HealthRequest};
use sasha_proto::{AppError, ErrorCode};
use tonic::{Request, Response, Status};

use crate::Core;
use crate::api::blocking;
use crate::catalogue::AppEntry;
use crate::store::{
    AppAccess, ConfirmationRefusal, ConfirmedCall, MAX_CONFIRMATION_TOOL_CHARS, Principal,
    PrincipalKind, Scope, SuggestionRefusal,
};
use sasha_package::validate::Package;

/// The `CoreService` implementation.
#[derive(Debug, Clone)]
pub(crate) struct CoreGrpc {
    pub(crate) core: Arc<Core>,
    pub(crate) entries: Arc<EntryCache>,
}

/// What `GetCatalogue` says about one package, as JSON text, computed once per
/// validated package (a package is immutable; a changed folder is validated
/// into a new one). Only the caller's access is added per call, read fresh.
#[derive(Debug)]
struct Entry {
    /// The package these texts were made from.
    package: Arc<Package>,
    /// The entry's members after `access`, without the braces.
    fields: String,
    /// The data contract's hash and JSON text, for a data app.
    contract: Option<(String, String)>,
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
        let entry = Arc::new(Entry::of(package));
        if cache.len() >= ENTRY_CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(id.to_owned(), Arc::clone(&entry));
        entry
    }
}

impl Entry {
    fn of(package: &Arc<Package>) -> Entry {
        let tables: serde_json::Value = package
            .data
            .as_ref()
            .map(|data| {
                data.tables
                    .iter()
                    .filter_map(|(name, declaration)| {
                        let table = data.schema.tables.get(name)?;
                        Some((
                            name.clone(),
                            serde_json::json!({"declaration": declaration, "columns": table.columns}),
                        ))
                    })
                    .collect::<serde_json::Map<_, _>>()
                    .into()
            })
            .unwrap_or_else(|| serde_json::json!({}));
        let fields = serde_json::json!({
            "name": package.manifest.name,
            "description": package.manifest.description,
            "revision": package.resource.revision,
            "resourceUri": package.resource.uri,
            "capabilities": package.manifest.capabilities,
            "contractHash": package.data.as_ref().map(|data| data.hash.clone()),
            "tables": tables,
            "actions": package.actions,
        })
        .to_string();
        Entry {
            package: Arc::clone(package),
            fields: fields[1..fields.len() - 1].to_owned(),
            contract: package.data.as_ref().map(|data| {
                (
                    data.hash.clone(),
                    serde_json::to_string(data).unwrap_or_default(),
                )
            }),
        }
    }
}

type GrpcResult<T> = Result<Response<T>, Status>;

fn kind_name(kind: PrincipalKind) -> &'static str {
    match kind {
        PrincipalKind::Session => "session",
        PrincipalKind::Access => "access",
        PrincipalKind::ApiKey => "api-key",
        PrincipalKind::ChatSession => "chat-session",
    }
}

fn to_wire(principal: &Principal) -> pb::Principal {
    pb::Principal {
        user_id: principal.user.id.clone(),
        role: principal.user.role.as_str().to_owned(),
        scopes: principal
            .scopes
            .iter()
            .map(|scope| scope.as_str().to_owned())
            .collect(),
        kind: kind_name(principal.kind).to_owned(),
        username: principal.user.username.clone(),
    }
}

/// The user id of a principal the gateway passed back, and whether it may
/// invoke apps at all.
fn caller(principal: Option<&pb::Principal>) -> Result<(String, bool), Status> {
    let principal = principal
        .filter(|principal| !principal.user_id.is_empty())
        .ok_or_else(|| AppError::new(ErrorCode::Unauthenticated, "no principal").to_status())?;
    let invokes = principal.kind != "api-key"
        && principal
            .scopes
            .iter()
            .any(|scope| scope == Scope::AppsInvoke.as_str());
    Ok((principal.user_id.clone(), invokes))
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
}

#[tonic::async_trait]
impl CoreService for CoreGrpc {
    #[tracing::instrument(skip_all, name = "core.health")]
    async fn health(&self, request: Request<HealthRequest>) -> GrpcResult<HealthReply> {
        Ok(Response::new(
            self.core.health(request.get_ref().deep).await,
        ))
    }

    #[tracing::instrument(skip_all, name = "core.authenticate")]
    async fn authenticate(
        &self,
        request: Request<pb::AuthenticateRequest>,
    ) -> GrpcResult<pb::Principal> {
        let request = request.into_inner();
        let store = self.core.store.clone();
        let credential = request.credential;
        let principal = match request.kind.as_str() {
            "bearer" => blocking(move || store.token(&credential)).await,
            "session" => blocking(move || store.session(&credential)).await,
            _ => {
                return Err(AppError::new(
                    ErrorCode::InputInvalid,
                    "kind must be bearer or session",
                )
                .to_status());
            }
        }
        .map_err(|error| error.to_status())?;
        // An OAuth access token works only at the resource it was issued
        // for: never passed through to, or accepted by, another audience.
        let principal = principal.filter(|principal| {
            principal
                .audience
                .as_deref()
                .is_none_or(|audience| audience == request.resource)
        });
        match principal {
            Some(principal) => Ok(Response::new(to_wire(&principal))),
            None => Err(
                AppError::new(ErrorCode::Unauthenticated, "the credential is not valid")
                    .to_status(),
            ),
        }
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
                    access: access.as_str().to_owned(),
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
        let needed = match request.access.as_str() {
            "use" => AppAccess::Use,
            "manage" => AppAccess::Manage,
            _ => {
                return Err(
                    AppError::new(ErrorCode::InputInvalid, "access must be use or manage")
                        .to_status(),
                );
            }
        };
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
        let resource = self
            .core
            .catalogue
            .resource(&request.app_id, &request.revision)
            .map_err(|error| error.to_status())?;
        Ok(Response::new(pb::AppResource {
            uri: resource.uri.clone(),
            mime_type: resource.mime_type.clone(),
            html: resource.html.clone(),
            meta_json: resource.meta.to_string(),
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
        let mut json = String::from("{");
        if invokes {
            for (id, access) in self.granted(user_id).await? {
                if !request.app_id.is_empty() && request.app_id != id {
                    continue;
                }
                let Some(AppEntry::Valid(package)) = snapshot.apps.get(&id) else {
                    continue;
                };
                let entry = self.entries.get(&id, package);
                if json.len() > 1 {
                    json.push(',');
                }
                // `{"<id>":{"access":"use",<the package's fields>}`
                json.push_str(&serde_json::Value::from(id.as_str()).to_string());
                json.push_str(":{\"access\":\"");
                json.push_str(access.as_str());
                json.push_str("\",");
                json.push_str(&entry.fields);
                // One app asked for by id (a call about to run): also the data
                // contract, which the caller hands to data-worker when the worker
                // has not seen this contract hash yet; left out when the caller
                // says it already holds this hash.
                if !request.app_id.is_empty()
                    && let Some((hash, contract)) = &entry.contract
                    && *hash != request.known_contract_hash
                {
                    json.push_str(",\"contract\":");
                    json.push_str(contract);
                }
                json.push('}');
            }
        }
        json.push('}');
        Ok(Response::new(pb::Catalogue {
            json,
            fingerprint: snapshot.fingerprint.clone(),
        }))
    }

    /// Issues (empty `token`) or redeems a confirmation token; see
    /// `store::confirmations` for the semantics. On redeem `idempotency_key`
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
        let result = crate::source_tools::run(
            &self.core,
            request.principal.as_ref(),
            &request.operation,
            &request.app_id,
            &request.arguments_json,
        )
        .await
        .map_err(|error| error.to_status())?;
        Ok(Response::new(pb::SourceFilesReply {
            result_json: result.to_string(),
        }))
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

    type ChatStream = crate::assist::ChatStream;

    #[tracing::instrument(skip_all, name = "core.chat")]
    async fn chat(&self, request: Request<pb::ChatRequest>) -> GrpcResult<Self::ChatStream> {
        crate::assist::chat(self.core.clone(), request.into_inner())
            .await
            .map(Response::new)
            .map_err(|error| error.to_status())
    }

    #[tracing::instrument(skip_all, name = "core.upload")]
    async fn upload(&self, request: Request<pb::UploadRequest>) -> GrpcResult<pb::UploadReply> {
        crate::assist::upload(&self.core, request.into_inner())
            .await
            .map(Response::new)
            .map_err(|error| error.to_status())
    }
}
