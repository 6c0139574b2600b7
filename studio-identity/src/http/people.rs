//! People and personal tokens over HTTP: the Users page's list, invite
//! (optionally giving apps once accepted), role change, disable, enable,
//! remove and password reset link (`/api/users*`, admins; staff may list, to
//! give access by name); the two steps of an invitation or reset link
//! (`/api/invitation*`, anonymous); and each person's own tokens for MCP
//! clients without OAuth (`/api/tokens*`).
//!
//! Every change is a same-origin JSON request from a signed-in browser
//! session, never a bearer token: a model may hold a token, and neither
//! people nor new credentials are a model's to make.
//!
//! The caller's admin role is checked here for a quick answer and again by
//! the store inside the change's own transaction, which also refuses a
//! change that would leave no admin who can sign in (409, `field:
//! username`): two admins demoting each other at once leave one.
//!
//! A user name in a path is matched without regard to case, like sign-in,
//! so "Ada" is ada's own account here too.
//!
//! What it must never do: let anyone change their own role, status,
//! password or existence (another admin or the operator does), show or
//! choose anyone's password (a reset is a link only its person uses),
//! answer an invitation
//! secret or a token number of someone else with anything but the hidden
//! 404, put a secret in a URL path (access lines log paths), or show a
//! token's secret twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use sasha_proto::{AppError, ErrorCode};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::accounts::Accounts;
use crate::http::answers::{ErrorEnvelope, hidden_not_found, no_store, parse_body};
use crate::http::caller::{same_origin_json, session_user, session_write, user};
use crate::http::sign_in::signed_in;
use crate::sso::PasswordPolicy;
use studio_store::{
    ACCESS_TOKEN_DEFAULT_TTL_SECONDS, AppAccess, Invitation, LinkPurpose, Person, Principal,
    ScimDirectoryView, Scope, StoreError, TOKEN_MAX_TTL_SECONDS, UserRole,
};
use studio_store::{blocking, store_error};

const DAY_SECONDS: u64 = 24 * 60 * 60;

/// A person as the Users page shows them: `status` is `active`, `invited`
/// or `disabled`; `source` where they come from (`password`, `oidc`,
/// `scim`), and for a person the directory provisions, `directory`: its
/// word (`active`), an admin's hold here (`held`) and their groups.
fn person_json(person: &Person, directory: Option<&ScimDirectoryView>) -> Value {
    let status = if person.disabled {
        "disabled"
    } else if person.invited {
        "invited"
    } else {
        "active"
    };
    json!({
        "id": person.user.id,
        "username": person.user.username,
        "role": person.user.role,
        "createdAt": person.user.created_at,
        "lastSignInAt": person.last_sign_in_at,
        "status": status,
        "disabled": person.disabled,
        "invitationExpiresAt": person.invitation_expires_at,
        "resetExpiresAt": person.reset_expires_at,
        "invitationApps": person.invitation_apps.iter()
            .map(|(app_id, access)| json!({ "appId": app_id, "access": access.as_str() }))
            .collect::<Vec<_>>(),
        "source": person.user.source.as_str(),
        "directory": directory,
    })
}

/// Everyone with their directory records.
fn people_with_directory(
    store: &studio_store::Store,
) -> Result<Vec<(Person, Option<ScimDirectoryView>)>, StoreError> {
    let mut directory = store.scim_directory()?;
    Ok(store
        .people()?
        .into_iter()
        .map(|person| {
            let record = directory.remove(&person.user.id);
            (person, record)
        })
        .collect())
}

/// One person by name (any case), with their directory record.
fn person_named(
    store: &studio_store::Store,
    username: &str,
) -> Result<(Person, Option<ScimDirectoryView>), StoreError> {
    people_with_directory(store)?
        .into_iter()
        .find(|(person, _)| person.user.username.eq_ignore_ascii_case(username))
        .ok_or(StoreError::UnknownUser)
}

/// The link an invited person (or one resetting their password) opens: the
/// secret travels in the fragment, which browsers never send, so no server
/// or proxy logs it.
fn invitation_json(accounts: &Accounts, invitation: &Invitation) -> Value {
    let page = match invitation.purpose {
        LinkPurpose::Invitation => "invite",
        LinkPurpose::Reset => "reset",
    };
    json!({
        "url": format!("{}/#/{page}/{}", accounts.studio.as_str(), invitation.secret),
        "expiresAt": invitation.expires_at,
    })
}

/// Refuses a link that sets a password for `username` where passwords are
/// off for them (`SASHA_SSO_ONLY`): accepting it would start a session that
/// never went through the provider. Nothing to check while passwords are on;
/// an unknown name is left to the store's own answer.
async fn password_link_allowed(accounts: &Accounts, username: &str) -> Result<(), Response> {
    if accounts.sign_in.passwords == PasswordPolicy::Everyone {
        return Ok(());
    }
    let (store, name) = (accounts.store.clone(), username.to_owned());
    match blocking(move || store.user_by_name(&name)).await {
        Ok(Some(user)) if !accounts.sign_in.password_admits(&user.username, user.role) => {
            Err(accounts.sign_in.passwords_off().into_response())
        }
        Ok(_) => Ok(()),
        Err(error) => Err(error.into_response()),
    }
}

/// A store refusal as the field it is about, for the page to show there.
fn refusal(error: StoreError) -> Response {
    let (code, field) = match &error {
        StoreError::UsernameTaken => (ErrorCode::Conflict, "username"),
        StoreError::InvalidUsername(_) => (ErrorCode::InputInvalid, "username"),
        StoreError::WeakPassword(_) => (ErrorCode::InputInvalid, "password"),
        StoreError::InvalidTokenLabel(_) => (ErrorCode::InputInvalid, "label"),
        StoreError::ScopeNotAllowed { .. } | StoreError::NoScopes => {
            (ErrorCode::InputInvalid, "scopes")
        }
        StoreError::InvalidTtl(_) => (ErrorCode::InputInvalid, "expiresInDays"),
        StoreError::NotInvited
        | StoreError::StillInvited
        | StoreError::SignsInElsewhere
        | StoreError::ManagedByDirectory
        | StoreError::UserDisabled
        | StoreError::LastAdmin => (ErrorCode::Conflict, "username"),
        StoreError::NotAdmin => {
            return AppError::new(ErrorCode::AccessDenied, error.to_string()).into_response();
        }
        StoreError::InvitationGrant { app_id, .. } => {
            return AppError::new(ErrorCode::AccessDenied, error.to_string())
                .with_details(json!({ "field": "apps", "appId": app_id }))
                .into_response();
        }
        StoreError::UnknownUser | StoreError::UnknownToken => {
            return hidden_not_found().into_response();
        }
        _ => return store_error(error).into_response(),
    };
    AppError::new(code, error.to_string())
        .with_details(json!({ "field": field }))
        .into_response()
}

/// The signed-in admin making a change to people (or to the directory's
/// SCIM tokens).
pub(crate) async fn admin(
    accounts: &Arc<Accounts>,
    method: &Method,
    headers: &HeaderMap,
    has_body: bool,
) -> Result<Principal, Response> {
    let principal = session_write(accounts, method, headers, has_body).await?;
    if principal.user.role != UserRole::Admin {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            "only an admin changes who has an account",
        )
        .into_response());
    }
    Ok(principal)
}

/// Nobody changes their own role, status, password or account here: with
/// this rule an instance always keeps the admin who is acting. Names match
/// whatever their case, as the store finds them.
fn not_yourself(actor: &Principal, username: &str) -> Result<(), Response> {
    if actor.user.username.eq_ignore_ascii_case(username) {
        return Err(AppError::new(
            ErrorCode::AccessDenied,
            "you cannot change your own account here; ask another admin",
        )
        .with_details(json!({ "field": "username" }))
        .into_response());
    }
    Ok(())
}

/// `GET /api/users`: every user with role, last sign-in and status, for the
/// people who give access (admin and staff): the access panel names people
/// by user name from this list.
#[utoipa::path(tag = "people", get, path = "/api/users", responses(
    (status = 200, description = "`{users: [{id, username, role, createdAt, lastSignInAt, status, disabled, invitationExpiresAt, source, directory}]}` by name; status is active, invited or disabled; source is password, oidc or scim; directory, for a person the directory provisions, is `{active, held, groups}`", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: not admin or staff, or a bad credential", body = ErrorEnvelope)))]
pub async fn list_users(State(accounts): State<Arc<Accounts>>, headers: HeaderMap) -> Response {
    let principal = match user(&accounts, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    if !principal.user.role.is_privileged() {
        return hidden_not_found().into_response();
    }
    let store = accounts.store.clone();
    match blocking(move || people_with_directory(&store)).await {
        Ok(people) => {
            let users: Vec<Value> = people
                .iter()
                .map(|(person, directory)| person_json(person, directory.as_ref()))
                .collect();
            no_store(Json(json!({ "users": users })))
        }
        Err(error) => error.into_response(),
    }
}

/// The body of an invitation.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InviteBody {
    username: String,
    /// `admin`, `staff` or `member`.
    #[schema(value_type = String)]
    role: UserRole,
    /// Apps the person gets once they accept, each at most once.
    #[serde(default)]
    apps: Vec<InviteApp>,
}

/// An app an invitation gives.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InviteApp {
    app_id: String,
    /// `use` or `manage`.
    access: String,
}

/// The apps of an invitation by id, or the refusal at the `apps` field.
fn invitation_apps(apps: &[InviteApp]) -> Result<BTreeMap<String, AppAccess>, Response> {
    let refuse = |message: String| {
        Err(AppError::new(ErrorCode::InputInvalid, message)
            .with_details(json!({ "field": "apps" }))
            .into_response())
    };
    let mut chosen = BTreeMap::new();
    for app in apps {
        let Ok(access) = AppAccess::parse(&app.access) else {
            return refuse(format!(
                "the access to {} must be \"use\" or \"manage\"",
                app.app_id
            ));
        };
        if chosen.insert(app.app_id.clone(), access).is_some() {
            return refuse(format!("{} is named twice; give each app once", app.app_id));
        }
    }
    Ok(chosen)
}

/// `POST /api/users`: adds a person with a one-time invitation link, which
/// gives them `apps` once they accept.
#[utoipa::path(tag = "people", post, path = "/api/users", request_body = InviteBody, responses(
    (status = 201, description = "`{user, invitation: {url, expiresAt}}`: the link is shown once", body = Object),
    (status = 400, description = "a bad user name or app access (APP_INPUT_INVALID, details.field)", body = ErrorEnvelope),
    (status = 403, description = "not an admin, not from the Studio origin, or an app an admin cannot give (details.field = apps, details.appId)", body = ErrorEnvelope),
    (status = 409, description = "the name is taken (APP_CONFLICT, details.field = username)", body = ErrorEnvelope)))]
pub async fn invite(
    State(accounts): State<Arc<Accounts>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let actor = match admin(&accounts, &method, &headers, true).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    let body: InviteBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    if !accounts.sign_in.password_admits(&body.username, body.role) {
        return accounts.sign_in.passwords_off().into_response();
    }
    let apps = match invitation_apps(&body.apps) {
        Ok(apps) => apps,
        Err(response) => return response,
    };
    let store = accounts.store.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        let invitation =
            store.invite_user_with_apps(&body.username, body.role, &apps, &actor.user.id)?;
        let person = store
            .people()?
            .into_iter()
            .find(|person| person.user.id == invitation.user.id)
            .ok_or(StoreError::UnknownUser)?;
        Ok::<_, StoreError>((invitation, person))
    })
    .await;
    match outcome {
        Ok(Ok((invitation, person))) => {
            let answer = json!({
                "user": person_json(&person, None),
                "invitation": invitation_json(&accounts, &invitation),
            });
            (StatusCode::CREATED, no_store(Json(answer))).into_response()
        }
        Ok(Err(error)) => refusal(error),
        Err(_) => AppError::from_code(ErrorCode::Internal).into_response(),
    }
}

/// A change to a person: one of `role` or `status`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChangeBody {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    role: Option<UserRole>,
    /// `active` or `disabled`.
    #[serde(default)]
    status: Option<String>,
}

/// `PATCH /api/users/:username`: a new role, or disabled/active.
#[utoipa::path(tag = "people", patch, path = "/api/users/{username}", params(("username" = String, Path)), request_body = ChangeBody, responses(
    (status = 200, description = "`{user, changed}`", body = Object),
    (status = 400, description = "neither or both of role and status, or an unknown status", body = ErrorEnvelope),
    (status = 403, description = "not an admin (read again in the change's transaction), your own account, or not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "hidden: no such user", body = ErrorEnvelope),
    (status = 409, description = "it would leave no admin who can sign in, or the organisation's directory owns this person's role or enabling (APP_CONFLICT, details.field = username)", body = ErrorEnvelope)))]
pub async fn change(
    State(accounts): State<Arc<Accounts>>,
    Path(username): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let actor = match admin(&accounts, &method, &headers, true).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    if let Err(response) = not_yourself(&actor, &username) {
        return response;
    }
    let body: ChangeBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let disabled = match body.status.as_deref() {
        None => None,
        Some("disabled") => Some(true),
        Some("active") => Some(false),
        Some(_) => {
            return AppError::new(
                ErrorCode::InputInvalid,
                "status must be \"active\" or \"disabled\"",
            )
            .with_details(json!({ "field": "status" }))
            .into_response();
        }
    };
    if body.role.is_some() == disabled.is_some() {
        return AppError::new(
            ErrorCode::InputInvalid,
            "give one change: either role or status",
        )
        .into_response();
    }
    let (store, roles) = (accounts.store.clone(), accounts.group_roles.clone());
    let outcome = tokio::task::spawn_blocking(move || {
        let (_, directory) = person_named(&store, &username)?;
        let changed = match (body.role, disabled) {
            (Some(role), _) => store.set_role(&username, role, &actor.user.id)?,
            // A person the directory provisions is held disabled here, or
            // given back to the directory's word (and their groups).
            (None, Some(disabled)) if directory.is_some() => {
                store.scim_hold(&username, disabled, &actor.user.id, &|groups| {
                    roles.role_for(groups.iter().copied())
                })?
            }
            (None, Some(disabled)) => store.set_disabled(&username, disabled, &actor.user.id)?,
            (None, None) => false,
        };
        let (person, directory) = person_named(&store, &username)?;
        Ok::<_, StoreError>((changed, person, directory))
    })
    .await;
    match outcome {
        Ok(Ok((changed, person, directory))) => no_store(Json(
            json!({ "user": person_json(&person, directory.as_ref()), "changed": changed }),
        )),
        Ok(Err(error)) => refusal(error),
        Err(_) => AppError::from_code(ErrorCode::Internal).into_response(),
    }
}

/// `DELETE /api/users/:username`: removes a person and ends their grants.
#[utoipa::path(tag = "people", delete, path = "/api/users/{username}", params(("username" = String, Path)), responses(
    (status = 200, description = "`{removed: {userId, grantsRevoked, memberAppsOrphaned}}`", body = Object),
    (status = 403, description = "not an admin (read again in the change's transaction), your own account, or not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "hidden: no such user", body = ErrorEnvelope),
    (status = 409, description = "it would leave no admin who can sign in (APP_CONFLICT, details.field = username)", body = ErrorEnvelope)))]
pub async fn remove(
    State(accounts): State<Arc<Accounts>>,
    Path(username): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let actor = match admin(&accounts, &method, &headers, false).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    if let Err(response) = not_yourself(&actor, &username) {
        return response;
    }
    let store = accounts.store.clone();
    match tokio::task::spawn_blocking(move || store.remove_user(&username, &actor.user.id)).await {
        Ok(Ok(removed)) => no_store(Json(json!({ "removed": removed }))),
        Ok(Err(error)) => refusal(error),
        Err(_) => AppError::from_code(ErrorCode::Internal).into_response(),
    }
}

/// `POST /api/users/:username/invitation`: a new link; the old one stops.
#[utoipa::path(tag = "people", post, path = "/api/users/{username}/invitation", params(("username" = String, Path)), responses(
    (status = 200, description = "`{invitation: {url, expiresAt}}`", body = Object),
    (status = 403, description = "not an admin, or not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "hidden: no such user", body = ErrorEnvelope),
    (status = 409, description = "they already accepted, or are disabled (APP_CONFLICT)", body = ErrorEnvelope)))]
pub async fn renew_invitation(
    State(accounts): State<Arc<Accounts>>,
    Path(username): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let actor = match admin(&accounts, &method, &headers, false).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    if let Err(response) = password_link_allowed(&accounts, &username).await {
        return response;
    }
    let store = accounts.store.clone();
    match tokio::task::spawn_blocking(move || store.renew_invitation(&username, &actor.user.id))
        .await
    {
        Ok(Ok(invitation)) => no_store(Json(
            json!({ "invitation": invitation_json(&accounts, &invitation) }),
        )),
        Ok(Err(error)) => refusal(error),
        Err(_) => AppError::from_code(ErrorCode::Internal).into_response(),
    }
}

/// `POST /api/users/:username/password-reset`: a one-time link with which an
/// active person chooses a new password; nothing changes until they use it,
/// and then their sessions, tokens and connected clients end.
///
/// Any admin may make one for any other person, another admin included: an
/// admin can already disable or demote them, and the operator is not always
/// at hand. Whoever holds the link can use it, the admin who made it too, so
/// what keeps this honest is that it is visible: the audit names the admin
/// who made the link, using it signs its person out everywhere (they notice
/// at once), and the link dies when its admin stops being one.
#[utoipa::path(tag = "people", post, path = "/api/users/{username}/password-reset", params(("username" = String, Path)), responses(
    (status = 200, description = "`{reset: {url, expiresAt}}`: the link is shown once", body = Object),
    (status = 403, description = "not an admin, your own account, or not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "hidden: no such user", body = ErrorEnvelope),
    (status = 409, description = "they have not accepted their invitation yet, or are disabled (APP_CONFLICT)", body = ErrorEnvelope)))]
pub async fn password_reset(
    State(accounts): State<Arc<Accounts>>,
    Path(username): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let actor = match admin(&accounts, &method, &headers, false).await {
        Ok(actor) => actor,
        Err(response) => return response,
    };
    if let Err(response) = not_yourself(&actor, &username) {
        return response;
    }
    if let Err(response) = password_link_allowed(&accounts, &username).await {
        return response;
    }
    let store = accounts.store.clone();
    match tokio::task::spawn_blocking(move || store.password_reset_link(&username, &actor.user.id))
        .await
    {
        Ok(Ok(link)) => no_store(Json(json!({ "reset": invitation_json(&accounts, &link) }))),
        Ok(Err(error)) => refusal(error),
        Err(_) => AppError::from_code(ErrorCode::Internal).into_response(),
    }
}

/// An invitation link's secret, in the body (never the path).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InvitationBody {
    token: String,
}

/// `POST /api/invitation`: who an invitation or reset link is for, before
/// they choose a password. Not throttled: the secret is 256 random bits, so
/// guessing is hopeless.
#[utoipa::path(tag = "people", post, path = "/api/invitation", request_body = InvitationBody, responses(
    (status = 200, description = "`{username, role, expiresAt, purpose}`; purpose is invitation or reset", body = Object),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "hidden: unknown, expired or used", body = ErrorEnvelope)))]
pub async fn invitation(
    State(accounts): State<Arc<Accounts>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(response) = same_origin_json(&accounts, &method, &headers, true) {
        return response;
    }
    let body: InvitationBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let store = accounts.store.clone();
    match blocking(move || store.invitation(&body.token)).await {
        Ok(Some(view)) => no_store(Json(view)),
        Ok(None) => hidden_not_found().into_response(),
        Err(error) => error.into_response(),
    }
}

/// Accepting an invitation: the link's secret and the chosen password.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AcceptBody {
    token: String,
    password: String,
}

/// `POST /api/invitation/accept`: sets the password, spends the link and
/// signs the person in; an invitation's apps are theirs from then, and a
/// reset link has ended every other session, token and connection.
#[utoipa::path(tag = "people", post, path = "/api/invitation/accept", request_body = AcceptBody, responses(
    (status = 200, description = "signed in; sets the session cookie", body = Object),
    (status = 400, description = "a weak password (APP_INPUT_INVALID, details.field = password)", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "hidden: unknown, expired or used", body = ErrorEnvelope)))]
pub async fn accept_invitation(
    State(accounts): State<Arc<Accounts>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(response) = same_origin_json(&accounts, &method, &headers, true) {
        return response;
    }
    let body: AcceptBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    if accounts.sign_in.passwords != PasswordPolicy::Everyone {
        let (store, token) = (accounts.store.clone(), body.token.clone());
        match blocking(move || store.invitation(&token)).await {
            Ok(Some(link)) if !accounts.sign_in.password_admits(&link.username, link.role) => {
                return accounts.sign_in.passwords_off().into_response();
            }
            Ok(_) => {}
            Err(error) => return error.into_response(),
        }
    }
    let store = accounts.store.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        let Some(user) = store.accept_invitation(&body.token, &body.password)? else {
            return Ok(None);
        };
        let secret = store.create_session(&user.id)?;
        Ok::<_, StoreError>(store.session(&secret)?.map(|principal| (secret, principal)))
    })
    .await;
    match outcome {
        Ok(Ok(Some((secret, principal)))) => signed_in(&accounts, &secret, &principal),
        Ok(Ok(None)) => hidden_not_found().into_response(),
        Ok(Err(error)) => refusal(error),
        Err(_) => AppError::from_code(ErrorCode::Internal).into_response(),
    }
}

/// The scopes a person may put on a token for an MCP client: what MCP
/// clients are offered, narrowed to the role.
fn token_scopes(role: UserRole) -> Vec<&'static str> {
    Scope::MCP_CLIENT
        .into_iter()
        .filter(|scope| role.allows(*scope))
        .map(Scope::as_str)
        .collect()
}

/// `GET /api/tokens`: the caller's own tokens, and what a client needs to
/// connect.
#[utoipa::path(tag = "people", get, path = "/api/tokens", responses(
    (status = 200, description = "`{mcpUrl, scopes, defaultDays, maxDays, tokens: [{id, label, scopes, createdAt, expiresAt, lastUsedAt}]}`", body = Object),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session", body = ErrorEnvelope)))]
pub async fn list_tokens(State(accounts): State<Arc<Accounts>>, headers: HeaderMap) -> Response {
    let principal = match session_user(&accounts, &headers).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let store = accounts.store.clone();
    let user_id = principal.user.id.clone();
    match blocking(move || store.personal_tokens(&user_id)).await {
        Ok(tokens) => no_store(Json(json!({
            "mcpUrl": accounts.oauth.resource(),
            "scopes": token_scopes(principal.user.role),
            "defaultDays": ACCESS_TOKEN_DEFAULT_TTL_SECONDS / DAY_SECONDS,
            "maxDays": TOKEN_MAX_TTL_SECONDS / DAY_SECONDS,
            "tokens": tokens,
        }))),
        Err(error) => error.into_response(),
    }
}

/// A new token: the person's name for it, its scopes and lifetime.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TokenBody {
    label: String,
    scopes: Vec<String>,
    #[serde(default)]
    expires_in_days: Option<u64>,
}

/// `POST /api/tokens`: makes a token; its secret is in this answer only.
#[utoipa::path(tag = "people", post, path = "/api/tokens", request_body = TokenBody, responses(
    (status = 201, description = "`{secret, token}`", body = Object),
    (status = 400, description = "a bad name, scope or lifetime (APP_INPUT_INVALID, details.field)", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "hidden: not a browser session", body = ErrorEnvelope)))]
pub async fn create_token(
    State(accounts): State<Arc<Accounts>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let principal = match session_write(&accounts, &method, &headers, true).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let body: TokenBody = match parse_body(&body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    let offered = token_scopes(principal.user.role);
    let mut scopes = BTreeSet::new();
    for scope in &body.scopes {
        match scope.parse::<Scope>() {
            Ok(parsed) if offered.contains(&scope.as_str()) => {
                scopes.insert(parsed);
            }
            _ => {
                return AppError::new(
                    ErrorCode::InputInvalid,
                    format!(
                        "{scope} is not a scope you can give a token; choose from {}",
                        offered.join(", ")
                    ),
                )
                .with_details(json!({ "field": "scopes" }))
                .into_response();
            }
        }
    }
    let ttl = body
        .expires_in_days
        .map(|days| days.saturating_mul(DAY_SECONDS));
    let store = accounts.store.clone();
    let user_id = principal.user.id.clone();
    match tokio::task::spawn_blocking(move || {
        store.create_personal_token(&user_id, &body.label, &scopes, ttl)
    })
    .await
    {
        Ok(Ok((secret, token))) => (
            StatusCode::CREATED,
            no_store(Json(json!({ "secret": secret, "token": token }))),
        )
            .into_response(),
        Ok(Err(error)) => refusal(error),
        Err(_) => AppError::from_code(ErrorCode::Internal).into_response(),
    }
}

/// `DELETE /api/tokens/:id`: revokes one of the caller's own tokens.
#[utoipa::path(tag = "people", delete, path = "/api/tokens/{id}", params(("id" = i64, Path)), responses(
    (status = 204, description = "revoked"),
    (status = 401, description = "anonymous", body = ErrorEnvelope),
    (status = 403, description = "not from the Studio origin", body = ErrorEnvelope),
    (status = 404, description = "hidden: not yours, unknown, not a token number or already revoked", body = ErrorEnvelope)))]
pub async fn revoke_token(
    State(accounts): State<Arc<Accounts>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let principal = match session_write(&accounts, &method, &headers, false).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    // Parsed after the caller is known: a number that names no token of
    // theirs and text that names none answer alike.
    let Ok(id) = id.parse::<i64>() else {
        return hidden_not_found().into_response();
    };
    let store = accounts.store.clone();
    match tokio::task::spawn_blocking(move || {
        store.revoke_token_of(&principal.user.username, id, &principal.user.id)
    })
    .await
    {
        Ok(Ok(true)) => no_store(StatusCode::NO_CONTENT),
        Ok(Ok(false)) => hidden_not_found().into_response(),
        Ok(Err(error)) => refusal(error),
        Err(_) => AppError::from_code(ErrorCode::Internal).into_response(),
    }
}
