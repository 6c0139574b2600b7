//! Who is calling `/mcp`: every HTTP request is authenticated afresh through
//! `CoreService.Authenticate` before rmcp sees it.
//!
//! A caller presents either a bearer token (`Authorization: Bearer …`: access
//! tokens, API keys, Studio chat-session tokens) or, for the Studio page's own
//! MCP client, the Studio session cookie. A cookie is accepted only from the
//! Studio origin (the `Origin` header, or `Sec-Fetch-Site: same-origin`), so a
//! page on another site cannot ride a signed-in user's cookie. The Studio page
//! names the app it has open in `Sasha-App`; only a browser session may bind an
//! app, and only the bound app's app-only tools exist for it.
//!
//! An OAuth access token is accepted only if it was issued for this gateway's
//! resource, `<MCP_PUBLIC_ORIGIN>/mcp` (studio-core compares the audience; a
//! token for another resource is refused, never passed on). An
//! unauthenticated request is told where the protected resource metadata is.
//!
//! A legacy MCP session (`Mcp-Session-Id`) belongs to the user who opened it: a
//! request with another user's session id is answered as if the session did not
//! exist. The table is per replica, like the sessions themselves; the reverse
//! proxy keeps a session on one replica by hashing the header.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sasha_contract::AppId;
use sasha_contract::caller::{
    CallSource, Initiator, PrincipalKind, Role as UserRole, Scope, TokenOrigin,
};
use sasha_contract::tools::ToolTarget;
use sasha_proto::convert::{self, FromWire};
use sasha_proto::pb::{self, AuthenticateRequest};
use sasha_proto::{AppError, ErrorCode};
use sasha_service::web::{bearer, cookie};
use sasha_service::{Role, grpc};

use crate::{Gateway, TRY_AGAIN};

/// The header naming the app a Studio browser session has open.
pub const BOUND_APP_HEADER: &str = "sasha-app";
/// The header naming the draft preview a Studio browser session shows (with
/// `Sasha-App`): its catalogue is that app's draft, its data calls reach the
/// preview's scratch data.
pub const PREVIEW_HEADER: &str = "sasha-preview";
/// The header Studio's recovery view sends with `Sasha-App` (`recovery`): its
/// changes are recorded as the recovery view's, not the app's own view's.
/// It names the view only; it decides nothing.
pub const VIEW_HEADER: &str = "sasha-view";
const SESSION_HEADER: &str = "mcp-session-id";
/// A session entry unused this long is forgotten (rmcp closes idle sessions
/// after five minutes, so a forgotten session is already gone).
const SESSION_IDLE: Duration = Duration::from_secs(15 * 60);
/// Most remembered sessions per replica.
const MAX_SESSIONS: usize = 50_000;

/// The authenticated caller of one HTTP request, for the MCP handler.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Who core says is calling, as it is sent back to core with each
    /// request.
    pub principal: pb::Principal,
    /// How the principal authenticated, read once from `principal`.
    pub kind: PrincipalKind,
    /// The user's role, read once from `principal`.
    pub role: UserRole,
    /// The credential's scopes, read once from `principal`.
    pub scopes: BTreeSet<Scope>,
    /// The app the Studio page has open (browser sessions only).
    pub bound_app: Option<AppId>,
    /// The draft preview id the Studio page shows for `bound_app` (browser
    /// sessions only, always with `bound_app`).
    pub preview: Option<String>,
    /// Whether the Studio page is the app's recovery view (`Sasha-View`).
    pub recovery_view: bool,
    /// Where the credential came from (a token's origin), read once from
    /// `principal`; `None` for a session.
    pub origin: Option<TokenOrigin>,
    /// The catalogue of the one app a tool call named in its headers, read
    /// with the credential in the same round trip to core.
    pub prefetched: Option<Arc<Prefetched>>,
    /// The tool a `tools/call` names in its `Mcp-Name` header, decoded once
    /// here; the call reuses it when its body names the same tool.
    pub named: Option<Arc<NamedTool>>,
    /// The credential as it was sent, for a call that names its app only in
    /// its body ([`authorize_call`]); `None` for callers made in tests.
    pub credential: Option<AuthenticateRequest>,
    /// A read sent beside this request's check ([`crate::speculate`]),
    /// taken only by a call about to send exactly the same request.
    pub early: Option<Arc<crate::speculate::Early>>,
}

/// A tool name as a request's header carries it, and what it names.
#[derive(Debug)]
pub struct NamedTool {
    pub name: String,
    pub target: ToolTarget,
}

/// One app's catalogue as `AuthorizeCall` answered it for this request.
#[derive(Debug)]
pub struct Prefetched {
    pub app_id: String,
    /// The contract hash named as known when it was asked.
    pub known_contract_hash: String,
    pub catalogue: crate::catalogue::Catalogue,
}

impl Caller {
    /// The caller core answered for, with nothing bound or named yet: its
    /// kind, role and scopes read here, once.
    pub fn new(principal: pb::Principal) -> Result<Caller, AppError> {
        Ok(Caller {
            kind: PrincipalKind::from_wire(principal.kind)?,
            role: UserRole::from_wire(principal.role)?,
            scopes: convert::scopes_from_wire(&principal.scopes)?,
            origin: convert::origin_from_wire(principal.origin.as_ref()),
            principal,
            bound_app: None,
            preview: None,
            recovery_view: false,
            prefetched: None,
            named: None,
            credential: None,
            early: None,
        })
    }

    /// This caller as the Studio page's headers place it: the app it has
    /// open and whether that is its recovery view.
    fn viewing(mut self, bound_app: Option<AppId>, recovery_view: bool) -> Caller {
        self.bound_app = bound_app;
        self.recovery_view = recovery_view;
        self
    }

    /// Whether the credential holds `scope`.
    pub fn holds(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    /// Holds `apps:invoke` (API keys never invoke apps).
    pub fn invokes(&self) -> bool {
        self.kind != PrincipalKind::ApiKey && self.holds(Scope::AppsInvoke)
    }

    /// The Studio browser session with `app_id` open: its calls are the app's
    /// own UI (`source: ui`) and need no confirmation.
    pub fn is_app_ui(&self, app_id: &str) -> bool {
        self.kind == PrincipalKind::Session
            && self.bound_app.as_ref().is_some_and(|bound| bound == app_id)
    }

    /// Where a data call on `app_id` comes from and who started it, for the
    /// app's audit ledger: the app's own view (or its recovery view) in
    /// Studio, a script consented to write the app (`automation`), or a
    /// client: the Studio assistant's conversation, an OAuth client or a
    /// personal token.
    pub fn provenance(
        &self,
        app_id: &str,
        automation: bool,
    ) -> (CallSource, Initiator, Option<String>) {
        if self.is_app_ui(app_id) {
            let view = if self.recovery_view {
                Initiator::RecoveryView
            } else {
                Initiator::AppView
            };
            return (CallSource::Ui, view, None);
        }
        // A session reaching data outside the app's own page has no token;
        // it is recorded as a client named by its kind.
        let (initiator, id) = self.origin.as_ref().map_or_else(
            || (Initiator::McpClient, self.kind.as_str().to_owned()),
            TokenOrigin::initiator,
        );
        if automation {
            (CallSource::Automation, Initiator::Automation, Some(id))
        } else {
            (CallSource::Mcp, initiator, Some(id))
        }
    }

    /// A chat-session token: the model of a chat drives the client, so no
    /// change it asks for is confirmed through it (the Studio assistant
    /// confirms in its own page).
    pub fn is_chat_session(&self) -> bool {
        self.kind == PrincipalKind::ChatSession
    }

    /// The tool-listing view of this caller.
    pub fn tools_caller(&self) -> crate::tools::Caller<'_> {
        crate::tools::Caller {
            invokes: self.invokes(),
            bound_app: self
                .bound_app
                .as_ref()
                .map(AppId::as_str)
                .filter(|_| self.kind == PrincipalKind::Session),
        }
    }

    /// What `name` names, when this request's headers named the same tool
    /// (decoded once, by [`authenticate`]).
    pub fn named_tool(&self, name: &str) -> Option<&ToolTarget> {
        self.named
            .as_deref()
            .filter(|named| named.name == name)
            .map(|named| &named.target)
    }
}

/// Legacy MCP sessions of this replica and the user each belongs to.
#[derive(Debug, Default)]
pub struct SessionOwners {
    owners: Mutex<HashMap<String, (String, Instant)>>,
}

impl SessionOwners {
    fn remember(&self, session: &str, user_id: &str) {
        let Ok(mut owners) = self.owners.lock() else {
            return;
        };
        let now = Instant::now();
        if owners.len() >= MAX_SESSIONS {
            owners.retain(|_, (_, seen)| now.duration_since(*seen) < SESSION_IDLE);
        }
        if owners.len() < MAX_SESSIONS {
            owners.insert(session.to_owned(), (user_id.to_owned(), now));
        }
    }

    /// Whether `user_id` owns `session` (and marks it used).
    fn owned_by(&self, session: &str, user_id: &str) -> bool {
        let Ok(mut owners) = self.owners.lock() else {
            return false;
        };
        let now = Instant::now();
        match owners.get_mut(session) {
            Some((owner, seen)) if owner == user_id && now.duration_since(*seen) < SESSION_IDLE => {
                *seen = now;
                true
            }
            _ => false,
        }
    }

    fn forget(&self, session: &str) {
        if let Ok(mut owners) = self.owners.lock() {
            owners.remove(session);
        }
    }
}

/// `401` with the envelope and a `WWW-Authenticate` challenge naming the
/// protected resource metadata (RFC 9728 §5.1), where an MCP client learns
/// which authorization server to send its user to, and the scope to ask for.
fn unauthenticated(gateway: &Gateway, message: &str, invalid_token: bool) -> Response {
    let mut response = AppError::new(ErrorCode::Unauthenticated, message).into_response();
    let error = if invalid_token {
        ", error=\"invalid_token\""
    } else {
        ""
    };
    // `scope` names what using apps needs (MCP clients ask for it by
    // default); the consent page offers admin and staff `apps:write` too.
    let challenge = format!(
        "Bearer realm=\"sasha-mcp\", resource_metadata=\"{}\", scope=\"apps:invoke\"{error}",
        gateway.oauth.metadata_url
    );
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// Whether a cookie-carrying request comes from the Studio page itself.
fn from_studio(gateway: &Gateway, headers: &HeaderMap) -> bool {
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|value| value.to_str().ok());
    let fetch_site = headers
        .get("sec-fetch-site")
        .and_then(|value| value.to_str().ok());
    match origin {
        Some(origin) => origin == gateway.studio_origin.as_str(),
        None => fetch_site == Some("same-origin"),
    }
}

/// The axum middleware in front of rmcp on `/mcp`. It reads headers only and
/// runs before `limit_body` (`lib.rs`), so no byte of a body is read before
/// the caller is known, and only for this caller's allowance.
pub async fn authenticate(
    State(gateway): State<Arc<Gateway>>,
    mut request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let (kind, credential) = if let Some(token) = bearer(headers) {
        ("bearer", token.to_owned())
    } else if let Some(secret) = cookie(headers, gateway.cookie_name) {
        if !from_studio(&gateway, headers) {
            return AppError::new(
                ErrorCode::AccessDenied,
                "the Studio session is accepted only from the Studio origin",
            )
            .into_response();
        }
        ("session", secret.to_owned())
    } else {
        return unauthenticated(&gateway, "a bearer token is required", false);
    };
    let bound_app = match headers.get(BOUND_APP_HEADER) {
        None => None,
        Some(value) => match value.to_str().ok().and_then(|id| AppId::parse(id).ok()) {
            Some(id) => Some(id),
            None => {
                return AppError::new(ErrorCode::InputInvalid, "Sasha-App is not an app id")
                    .into_response();
            }
        },
    };
    let recovery_view = match headers.get(VIEW_HEADER) {
        None => false,
        Some(value) if value.as_bytes() == b"recovery" && bound_app.is_some() => true,
        Some(_) => {
            return AppError::new(
                ErrorCode::InputInvalid,
                "Sasha-View is `recovery`, sent with Sasha-App",
            )
            .into_response();
        }
    };
    let preview_asked = headers.contains_key(PREVIEW_HEADER);
    // A tool call that names its tool in the request's headers (SEP-2243)
    // asks core once: who the caller is, and that tool's app as they may use
    // it now, both read fresh. Anything else authenticates alone.
    let named = headers
        .get("mcp-method")
        .is_some_and(|method| method.as_bytes() == b"tools/call")
        .then(|| headers.get("mcp-name")?.to_str().ok())
        .flatten()
        .and_then(|name| {
            Some(Arc::new(NamedTool {
                name: name.to_owned(),
                target: ToolTarget::decode(name)?,
            }))
        });
    let call_app = named
        .as_ref()
        .filter(|_| !preview_asked)
        .and_then(|named| named.target.app())
        .map(|app| app.as_str().to_owned());
    let authenticate = AuthenticateRequest {
        kind: kind.to_owned(),
        credential,
        resource: gateway.oauth.resource.clone(),
    };
    let mut early = None;
    let answer = match &call_app {
        Some(app) => {
            let known = gateway.contracts.hint(app);
            let check = authorize_call(&gateway, authenticate.clone(), app, known);
            let view = (bound_app.clone(), recovery_view);
            match early_read(
                &gateway,
                &authenticate,
                app,
                named.as_deref(),
                view,
                &mut request,
            )
            .await
            {
                Err(refused) => return refused.into_response(),
                Ok(None) => check.await,
                Ok(Some(read)) => {
                    let (answer, read) = tokio::join!(check, read);
                    early = read.map(Arc::new);
                    answer
                }
            }
        }
        None => grpc::within_read(Role::StudioCore, gateway.call_deadline, TRY_AGAIN, || {
            let (mut core, request) = (gateway.core.clone(), authenticate.clone());
            async move { core.authenticate(request).await }
        })
        .await
        .map(|principal| (principal, None)),
    };
    let headers = request.headers();
    let (principal, prefetched) = match answer {
        Ok(answer) => answer,
        Err(error) => {
            return if error.code == ErrorCode::Unauthenticated {
                unauthenticated(&gateway, "the credential is not valid", true)
            } else {
                error.into_response()
            };
        }
    };
    let preview = match headers.get(PREVIEW_HEADER) {
        None => None,
        Some(value) => match value
            .to_str()
            .ok()
            .filter(|id| sasha_contract::data::is_preview_id(id))
        {
            Some(id) if bound_app.is_some() => Some(id.to_owned()),
            _ => {
                return AppError::new(
                    ErrorCode::InputInvalid,
                    "Sasha-Preview is a draft's preview id (32 lowercase hex digits), sent with Sasha-App",
                )
                .into_response();
            }
        },
    };
    if let (Some(prefetched), Some(app), true) = (&prefetched, &call_app, gateway.early_reads)
        && let Some(entry) = prefetched.catalogue.apps.get(app)
    {
        gateway
            .speculation
            .remember(&authenticate, &principal, entry);
    }
    let mut caller = match Caller::new(principal) {
        Ok(caller) => caller.viewing(bound_app.clone(), recovery_view),
        Err(error) => return error.into_response(),
    };
    if bound_app.is_some() && caller.kind != PrincipalKind::Session {
        return AppError::new(
            ErrorCode::InputInvalid,
            "Sasha-App is accepted only from the Studio browser session",
        )
        .into_response();
    }
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    if let Some(session) = &session
        && !gateway
            .sessions
            .owned_by(session, &caller.principal.user_id)
    {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({
                "jsonrpc": "2.0",
                "id": null,
                "error": {"code": -32001, "message": "Session not found; initialize again"},
            })),
        )
            .into_response();
    }
    let user_id = caller.principal.user_id.clone();
    let deleting = request.method() == axum::http::Method::DELETE;
    caller.preview = preview;
    caller.prefetched = prefetched;
    caller.early = early;
    caller.named = named;
    caller.credential = Some(authenticate);
    request.extensions_mut().insert(caller);
    let response = next.run(request).await;
    match &session {
        Some(session) if deleting && response.status().is_success() => {
            gateway.sessions.forget(session);
        }
        Some(_) => {}
        None => {
            if let Some(created) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|value| value.to_str().ok())
            {
                gateway.sessions.remember(created, &user_id);
            }
        }
    }
    response
}

/// A read of `app_id` (a table's, or an action's that only reads) by a
/// credential core answered for that app within
/// [`crate::speculate::WINDOW`], ready to run beside its check: its
/// body (at most [`crate::speculate::MAX_BODY`], declared) is read here and
/// put back for rmcp. `Ok(None)` leaves the request untouched: anything else
/// waits for its check as before.
async fn early_read<'a>(
    gateway: &'a Gateway,
    credential: &AuthenticateRequest,
    app_id: &str,
    named: Option<&'a NamedTool>,
    view: (Option<AppId>, bool),
    request: &mut Request,
) -> Result<Option<impl Future<Output = Option<crate::speculate::Early>> + 'a>, AppError> {
    use crate::speculate;
    let Some(NamedTool { name, target }) = named.filter(|_| gateway.early_reads) else {
        return Ok(None);
    };
    let Some((principal, app)) = gateway.speculation.recall(credential, app_id) else {
        return Ok(None);
    };
    // A change never has its body read early: the app is remembered with
    // its read-only actions only.
    let reads = match target {
        ToolTarget::Table { operation, .. } => !operation.is_mutating(),
        ToolTarget::Action { action, .. } => app.action(action).is_some(),
        _ => false,
    };
    let Some(declared) = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<usize>().ok())
        .filter(|length| reads && *length <= speculate::MAX_BODY)
    else {
        return Ok(None);
    };
    let Ok(caller) = Caller::new(principal) else {
        return Ok(None);
    };
    let caller = caller.viewing(view.0, view.1);
    let body = std::mem::take(request.body_mut());
    let bytes = crate::read_body(body, declared, |length| {
        if length > declared {
            return Err(AppError::new(
                ErrorCode::InputInvalid,
                "the request body is longer than its Content-Length",
            ));
        }
        Ok(())
    })
    .await?;
    *request.body_mut() = axum::body::Body::from(bytes.clone());
    let Some(read) = speculate::arguments(&bytes, name)
        .and_then(|args| speculate::Read::of(gateway, &app, name, target, args))
    else {
        return Ok(None);
    };
    Ok(Some(speculate::read(gateway, caller, app, read)))
}

/// `AuthorizeCall`: who `credential` is, and `app_id` as they may use it
/// now (with what only the credential carries, a script's write consent),
/// both read fresh in one round trip to core.
pub async fn authorize_call(
    gateway: &Gateway,
    credential: AuthenticateRequest,
    app_id: &str,
    known_contract_hash: String,
) -> Result<(pb::Principal, Option<Arc<Prefetched>>), AppError> {
    let request = pb::AuthorizeCallRequest {
        credential: Some(credential),
        app_id: app_id.to_owned(),
        known_contract_hash: known_contract_hash.clone(),
    };
    let reply = grpc::within_read(Role::StudioCore, gateway.call_deadline, TRY_AGAIN, || {
        let (mut core, request) = (gateway.core.clone(), request.clone());
        async move { core.authorize_call(request).await }
    })
    .await?;
    let prefetched = reply.catalogue.as_ref().and_then(|catalogue| {
        crate::catalogue::Catalogue::try_from(catalogue)
            .ok()
            .map(|catalogue| {
                Arc::new(Prefetched {
                    app_id: app_id.to_owned(),
                    known_contract_hash,
                    catalogue,
                })
            })
    });
    Ok((reply.principal.unwrap_or_default(), prefetched))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_belong_to_the_user_who_opened_them() {
        let owners = SessionOwners::default();
        owners.remember("s1", "alice");
        assert!(owners.owned_by("s1", "alice"));
        assert!(!owners.owned_by("s1", "bob"));
        assert!(!owners.owned_by("unknown", "alice"));
        owners.forget("s1");
        assert!(!owners.owned_by("s1", "alice"));
    }

    #[test]
    fn a_preview_is_named_by_hex_only() {
        use sasha_contract::data::is_preview_id;
        assert!(is_preview_id(&"0a".repeat(16)));
        for bad in [
            "",
            "0A".repeat(16).as_str(),
            &"0".repeat(31),
            &"0".repeat(33),
            "../../../../../../../../etc/x",
        ] {
            assert!(!is_preview_id(bad), "{bad}");
        }
    }
}
