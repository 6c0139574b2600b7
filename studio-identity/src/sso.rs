//! Signing in to Studio through the organisation's OpenID provider:
//! [`config`] (the `SASHA_OIDC_*` and `SASHA_SSO_*` variables), [`client`]
//! (the provider's HTTP client, our reqwest), [`provider`] (the relying
//! party: discovery, PKCE, ID-token checks), [`claims`] (the person a
//! verified token names) and [`page`] (the refusal page). The routes are
//! `http::sso`; the attempts and identities are studio-store's `sso`.
//!
//! What it must never do: sign anyone in on claims it did not verify, or
//! let a password sign in when the operator turned passwords off (except
//! the named break-glass admin).

use std::sync::Arc;

use sasha_proto::{AppError, ErrorCode};
use studio_store::UserRole;

pub mod claims;
pub mod client;
pub mod config;
#[cfg(test)]
pub(crate) mod fake_provider;
pub mod page;
pub mod provider;

pub use config::{PasswordPolicy, SignInConfig};

/// How this Studio signs people in, as its routes use it.
#[derive(Debug, Default)]
pub struct SignIn {
    /// Who may sign in with a password.
    pub(crate) passwords: PasswordPolicy,
    /// The OpenID provider, when configured.
    pub(crate) provider: Option<provider::RelyingParty>,
}

impl SignIn {
    /// Whether `username`, of `role`, may hold and use a password here:
    /// everyone, unless passwords are off (`SASHA_SSO_ONLY`); then only the
    /// break-glass admin, while they are an admin.
    pub(crate) fn password_admits(&self, username: &str, role: UserRole) -> bool {
        self.passwords == PasswordPolicy::Everyone
            || (self.passwords.admits(username) && role == UserRole::Admin)
    }

    /// The refusal of a password, or a link to set one, where passwords are
    /// off for the person.
    pub(crate) fn passwords_off(&self) -> AppError {
        AppError::new(
            ErrorCode::AccessDenied,
            match &self.provider {
                Some(provider) => format!(
                    "password sign-in is turned off on this Studio: use \"Sign in with {}\"",
                    provider.config().provider_name
                ),
                None => "password sign-in is turned off on this Studio".to_owned(),
            },
        )
    }

    /// Sign-in as `config` says, checking ID tokens' expiry against `clock`
    /// (unix seconds, the store's).
    pub fn new(
        config: SignInConfig,
        clock: Arc<dyn Fn() -> i64 + Send + Sync>,
    ) -> Result<SignIn, String> {
        let provider = match config.provider {
            Some(provider) => Some(provider::RelyingParty::new(provider, clock)?),
            None => None,
        };
        Ok(SignIn {
            passwords: config.passwords,
            provider,
        })
    }
}
