//! Signing in through the organisation's OpenID provider:
//! `GET /auth/oidc/start` sends the browser to the provider,
//! `GET /auth/oidc/callback` takes it back and signs the person in, and
//! `GET /api/auth/providers` tells the sign-in page what to offer.
//!
//! A started sign-in is bound to its browser: the attempt cookie (random,
//! ten minutes, `HttpOnly`) is stored only as a hash beside the attempt's
//! state, and a callback whose cookie does not match is refused. The
//! attempt is used once, whichever replica takes the callback.
//!
//! What it must never do: redirect anywhere but a same-origin path after
//! signing in, set a session cookie on a refusal, make a person the
//! provider gives no mapped group, or bind a provider subject to a password
//! account.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use openidconnect::CsrfToken;
use sasha_proto::ErrorCode;
use sasha_service::web::cookie;
use serde::Serialize;
use studio_store::{SsoAttempt, SsoPerson, SsoSignIn, StoreError, TakenAttempt, blocking};
use utoipa::ToSchema;

use crate::accounts::Accounts;
use crate::http::answers::no_store;
use crate::http::oauth::params::parse_params;
use crate::http::sign_in::{session_cookie, studio_cookie};
use crate::sso::claims::vouched;
use crate::sso::page::Refusal;
use crate::sso::provider::{Failure, TokenProblem};

#[cfg(test)]
mod tests;

/// Where the sign-in page starts a sign-in through the provider.
pub const START_PATH: &str = "/auth/oidc/start";
/// The longest `return_to` kept with an attempt.
const MAX_RETURN_TO_CHARS: usize = 2048;

/// The attempt cookie's name (`__Host-` when Studio is served over https).
fn attempt_cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-sasha_sso"
    } else {
        "sasha_sso"
    }
}

fn attempt_cookie(accounts: &Accounts, value: &str, max_age: i64) -> Option<HeaderValue> {
    let name = attempt_cookie_name(accounts.secure_cookies());
    studio_cookie(accounts, name, value, Some(max_age))
}

/// The attempt cookie's removal.
fn clear_attempt(accounts: &Accounts) -> Option<HeaderValue> {
    attempt_cookie(accounts, "", 0)
}

/// The attempt cookie of this request, when it is one we could have set.
fn browser_secret<'a>(accounts: &Accounts, headers: &'a HeaderMap) -> Option<&'a str> {
    cookie(headers, attempt_cookie_name(accounts.secure_cookies())).filter(|value| {
        (20..=128).contains(&value.len())
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// A `return_to` that is a path on this origin: starts with one `/`, not
/// `//` or `/\` (another host to a browser), no control characters.
pub fn same_origin_path(text: &str) -> bool {
    text.starts_with('/')
        && !text.starts_with("//")
        && !text.starts_with("/\\")
        && text.chars().count() <= MAX_RETURN_TO_CHARS
        && !text.chars().any(|c| c.is_control() || c == '\\')
}

fn not_configured() -> Response {
    Refusal::new(
        StatusCode::NOT_FOUND,
        ErrorCode::NotFound,
        "Signing in through an identity provider is not set up on this Studio. Sign in with your user name and password.",
        "SASHA_OIDC_ISSUER is not set",
    )
    .page(None)
}

/// `GET /auth/oidc/start?return_to=/#/…`: sends the browser to the provider.
pub async fn start(
    State(accounts): State<Arc<Accounts>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let Some(provider) = &accounts.sign_in.provider else {
        return not_configured();
    };
    let params: HashMap<String, String> = match parse_params(query.unwrap_or_default().as_bytes()) {
        Ok(params) => params,
        Err(error) => {
            return Refusal::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::InputInvalid,
                "This sign-in link is malformed. Go back to Sasha Studio and start again.",
                error.description().to_owned(),
            )
            .page(None);
        }
    };
    let return_to = params.get("return_to").map_or("/", String::as_str);
    if !same_origin_path(return_to) {
        return Refusal::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InputInvalid,
            "This sign-in link would send you somewhere other than Sasha Studio afterwards, so it is not used.",
            format!("return_to {return_to:?} is not a path on this origin"),
        )
        .page(None);
    }
    let started = match provider.start().await {
        Ok(started) => started,
        Err(failure) => return refusal_of(&failure).page(None),
    };
    // A second tab's sign-in shares the browser's cookie, so both finish.
    let browser = browser_secret(&accounts, &headers)
        .map_or_else(|| CsrfToken::new_random().secret().clone(), str::to_owned);
    let attempt = SsoAttempt {
        nonce: started.nonce,
        pkce_verifier: started.pkce_verifier,
        return_to: return_to.to_owned(),
    };
    let (store, state, secret) = (
        accounts.store.clone(),
        started.state.clone(),
        browser.clone(),
    );
    match blocking(move || store.begin_sso_attempt(&state, &secret, &attempt)).await {
        Ok(true) => {}
        Ok(false) => {
            return Refusal::provider_down(
                "too many sign-ins are under way at once (MAX_SSO_ATTEMPTS)",
            )
            .page(None);
        }
        // A page, like every answer of a navigation here, never an envelope.
        Err(error) => return store_refusal(&error).page(None),
    }
    let Ok(location) = HeaderValue::from_str(&started.url) else {
        return Refusal::provider_down("the provider's authorization URL is not a header value")
            .page(None);
    };
    let mut response = no_store((StatusCode::SEE_OTHER, [(header::LOCATION, location)]));
    if let Some(cookie) = attempt_cookie(&accounts, &browser, studio_store::SSO_ATTEMPT_TTL_SECONDS)
    {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

/// `GET /auth/oidc/callback?code=…&state=…`: finishes a sign-in and sends
/// the browser to where it started, signed in; or shows why not.
pub async fn callback(
    State(accounts): State<Arc<Accounts>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    match finish(&accounts, &headers, query.as_deref().unwrap_or_default()).await {
        Ok(response) => response,
        Err((refusal, clear)) => refusal.page(clear.then(|| clear_attempt(&accounts)).flatten()),
    }
}

/// A refusal, and whether the attempt cookie goes with it.
type Refused = (Refusal, bool);

async fn finish(
    accounts: &Accounts,
    headers: &HeaderMap,
    query: &str,
) -> Result<Response, Refused> {
    let Some(provider) = &accounts.sign_in.provider else {
        return Ok(not_configured());
    };
    let bad = |message: &str, detail: String| {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InputInvalid,
            message,
            detail,
        )
    };
    let params = parse_params(query.as_bytes()).map_err(|error| {
        (
            bad(
                "The answer from your organisation's sign-in service is malformed. Start again.",
                error.description().to_owned(),
            ),
            false,
        )
    })?;
    if let Some(error) = params.get("error") {
        let description = params.get("error_description").map_or("", String::as_str);
        return Err((
            Refusal::new(
                StatusCode::FORBIDDEN,
                ErrorCode::AccessDenied,
                "Your organisation's sign-in service did not sign you in. If you think you should have access, ask your administrator.",
                format!("the provider answered {error}: {description}"),
            ),
            true,
        ));
    }
    // RFC 9207: a provider that names itself must be ours (a mix-up of
    // providers would otherwise hand us another's code).
    if let Some(iss) = params.get("iss")
        && iss.trim_end_matches('/') != provider.config().issuer.trim_end_matches('/')
    {
        return Err((
            bad(
                "The answer came from a sign-in service this Studio does not use. Start again from Sasha Studio.",
                format!("the callback's iss {iss:?} is not SASHA_OIDC_ISSUER"),
            ),
            true,
        ));
    }
    let (Some(state), Some(code)) = (params.get("state"), params.get("code")) else {
        return Err((
            bad(
                "The answer from your organisation's sign-in service is incomplete. Start again.",
                "the callback has no state or no code".to_owned(),
            ),
            false,
        ));
    };
    let browser = browser_secret(accounts, headers).map(str::to_owned);
    let (store, state) = (accounts.store.clone(), state.clone());
    let taken = blocking(move || store.take_sso_attempt(&state, browser.as_deref()))
        .await
        .map_err(|error| (store_refusal(&error), false))?;
    let attempt = match taken {
        TakenAttempt::Taken(attempt) => attempt,
        TakenAttempt::Used => {
            return Err((
                bad(
                    "This sign-in has already been used. Start again from Sasha Studio.",
                    "the state was used before: a replayed callback".to_owned(),
                ),
                true,
            ));
        }
        TakenAttempt::Expired => {
            return Err((
                bad(
                    "This sign-in took more than ten minutes and has expired. Start again from Sasha Studio.",
                    "the attempt expired".to_owned(),
                ),
                true,
            ));
        }
        TakenAttempt::Unknown => {
            return Err((
                bad(
                    "This sign-in was not started here. Start again from Sasha Studio.",
                    "no attempt has this state".to_owned(),
                ),
                true,
            ));
        }
        TakenAttempt::OtherBrowser => {
            return Err((
                bad(
                    "This sign-in was started in another browser, or your browser did not keep Sasha's sign-in cookie. Start again from Sasha Studio in this browser.",
                    "the attempt cookie is missing or belongs to another attempt".to_owned(),
                ),
                false,
            ));
        }
    };
    let claims = provider
        .finish(code, &attempt.pkce_verifier, &attempt.nonce)
        .await
        .map_err(|failure| (refusal_of(&failure), true))?;
    let config = provider.config();
    let person = vouched(config, &claims).map_err(|detail| {
        (
            Refusal::new(
                StatusCode::FORBIDDEN,
                ErrorCode::AccessDenied,
                "Your organisation's sign-in service did not say who you are in a way Sasha can use. Tell your administrator.",
                detail,
            ),
            true,
        )
    })?;
    if let Err(error) = studio_store::validate_username(&person.username) {
        return Err((
            Refusal::new(
                StatusCode::FORBIDDEN,
                ErrorCode::AccessDenied,
                format!(
                    "Your name at your organisation's sign-in service ({}) cannot be a Sasha user name. Tell your administrator.",
                    person.username
                ),
                error.to_string(),
            ),
            true,
        ));
    }
    let role = accounts
        .group_roles
        .role_for(person.groups.iter().map(String::as_str));
    let store = accounts.store.clone();
    let issuer = config.issuer.clone();
    let decided = {
        let person = person.clone();
        blocking(move || {
            let outcome = store.sso_sign_in(&SsoPerson {
                issuer: &issuer,
                subject: &person.subject,
                username: &person.username,
                role,
            })?;
            let SsoSignIn::SignedIn { user, .. } = &outcome else {
                return Ok(Err(outcome));
            };
            match store.create_session(&user.id) {
                Ok(secret) => Ok(Ok(secret)),
                Err(StoreError::UnknownUser) => Ok(Err(SsoSignIn::Disabled)),
                Err(error) => Err(error),
            }
        })
        .await
        .map_err(|error| (store_refusal(&error), true))?
    };
    let secret = decided.map_err(|outcome| (sign_in_refusal(&outcome, &person.username), true))?;
    let Ok(location) = HeaderValue::from_str(&attempt.return_to) else {
        return Err((
            bad(
                "Sasha cannot send you back to where you started.",
                "return_to is not a header value".to_owned(),
            ),
            true,
        ));
    };
    let mut response = no_store((StatusCode::SEE_OTHER, [(header::LOCATION, location)]));
    if let Some(cookie) = session_cookie(accounts, &secret) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    if let Some(clear) = clear_attempt(accounts) {
        response.headers_mut().append(header::SET_COOKIE, clear);
    }
    Ok(response)
}

/// The page of a refused decision.
fn sign_in_refusal(outcome: &SsoSignIn, username: &str) -> Refusal {
    let denied = |message: String, detail: &str| {
        Refusal::new(
            StatusCode::FORBIDDEN,
            ErrorCode::AccessDenied,
            message,
            detail,
        )
    };
    match outcome {
        SsoSignIn::NoRole { existing: false } => denied(
            "Your organisation's sign-in service vouched for you, but none of your groups gives access to Sasha Studio, so no account was made. Ask your administrator to add you to a group that does.".to_owned(),
            "no group of the person maps to a role (SASHA_SSO_*_GROUPS)",
        ),
        SsoSignIn::NoRole { existing: true } => denied(
            "None of your groups at your organisation's sign-in service gives access to Sasha Studio any more, so you are signed out everywhere (your sessions, tokens and MCP connections ended). Ask your administrator if this is a mistake.".to_owned(),
            "no group of the person maps to a role any more; their credentials were ended",
        ),
        SsoSignIn::Disabled => denied(
            "Your Sasha Studio account is disabled. Ask your administrator to enable it.".to_owned(),
            "the person is disabled",
        ),
        SsoSignIn::PasswordAccount => denied(
            format!(
                "A Sasha account named {username} already exists and signs in with a password, so Sasha will not hand it to a sign-in through your organisation. Ask your administrator to remove or rename that account, or sign in with its password."
            ),
            "the user name belongs to a password account; it is never bound to a provider subject",
        ),
        SsoSignIn::NameBound => denied(
            format!(
                "The Sasha account named {username} belongs to another person at your organisation's sign-in service. Ask your administrator."
            ),
            "the user name is bound to another provider subject",
        ),
        SsoSignIn::LastAdmin => denied(
            "Your groups at your organisation's sign-in service no longer make you an administrator, but you are the last administrator of this Studio, so nothing was changed and you are not signed in. Make another person an administrator first.".to_owned(),
            "the role change would leave no admin who can act",
        ),
        SsoSignIn::SignedIn { .. } => denied(String::new(), "signed in"),
    }
}

/// The page of a failure with the provider.
fn refusal_of(failure: &Failure) -> Refusal {
    let token = |message: &str, detail: &str| {
        Refusal::new(
            StatusCode::FORBIDDEN,
            ErrorCode::AccessDenied,
            message,
            detail,
        )
    };
    match failure {
        Failure::Unreachable(detail) => Refusal::provider_down(detail.clone()),
        Failure::CodeRefused(detail) => Refusal::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InputInvalid,
            "Your organisation's sign-in service would not complete this sign-in: its code was already used or has expired. Start again from Sasha Studio.",
            format!("the token endpoint refused the code: {detail}"),
        ),
        Failure::NoIdToken => token(
            "Your organisation's sign-in service did not say who you are. Tell your administrator.",
            "the token response has no ID token (is the openid scope granted?)",
        ),
        Failure::Token(problem, detail) => token(
            match problem {
                TokenProblem::Expired => {
                    "The proof of sign-in from your organisation's sign-in service had expired. Start again; if it keeps happening, the clocks may disagree: tell your administrator."
                }
                TokenProblem::Nonce => {
                    "The proof of sign-in does not belong to this sign-in (it may have been replayed). Start again from Sasha Studio."
                }
                _ => {
                    "The proof of sign-in from your organisation's sign-in service could not be trusted, so you are not signed in. Tell your administrator."
                }
            },
            &format!(
                "the ID token failed its {} check: {detail}",
                match problem {
                    TokenProblem::Issuer => "issuer",
                    TokenProblem::Audience => "audience",
                    TokenProblem::Expired => "expiry",
                    TokenProblem::Nonce => "nonce",
                    TokenProblem::Signature => "signature",
                    TokenProblem::Other => "format",
                }
            ),
        ),
    }
}

fn store_refusal(error: &sasha_proto::AppError) -> Refusal {
    if error.retryable {
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::DatabaseUnavailable,
            "Sasha Studio is busy and could not finish your sign-in. Try again in a minute.",
            format!("the core database: {}", error.message),
        )
    } else {
        Refusal::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            "Sasha Studio could not finish your sign-in. Tell your administrator.",
            format!("the core database: {}", error.message),
        )
    }
}

/// What the sign-in page may offer.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProvidersResponse {
    /// The identity provider, when one is configured.
    sso: Option<SsoProvider>,
    /// Whether the user name and password form is offered to everyone
    /// (`false`: only the break-glass administrator may use it).
    passwords: bool,
}

/// The sign-in page's "Sign in with …" button.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SsoProvider {
    /// Shown as "Sign in with <name>".
    name: String,
    /// Where the button goes, with `?return_to=<same-origin path>`.
    start: String,
}

/// `GET /api/auth/providers`: how people sign in here.
#[utoipa::path(get, path = "/api/auth/providers", responses(
    (status = 200, description = "the identity provider, if any, and whether passwords are offered", body = ProvidersResponse)))]
pub async fn providers(State(accounts): State<Arc<Accounts>>) -> Response {
    no_store(Json(ProvidersResponse {
        sso: accounts
            .sign_in
            .provider
            .as_ref()
            .map(|provider| SsoProvider {
                name: provider.config().provider_name.clone(),
                start: START_PATH.to_owned(),
            }),
        passwords: accounts.sign_in.passwords == crate::sso::PasswordPolicy::Everyone,
    }))
}
