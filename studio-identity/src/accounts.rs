//! The accounts identity's routes serve from: the core database, the Studio
//! origin, the sign-in throttle and the authorization server's parked
//! requests. studio-core holds one and hands it to [`crate::http::routes`].
//!
//! What it must never do: hold an access decision (grants and scopes are
//! read fresh from the store on every request).

use std::sync::Arc;

use sasha_service::config::Origin;
use studio_store::Store;

use crate::authorization::OAuthState;
use crate::group_roles::GroupRoles;
use crate::sso::{SignIn, SignInConfig};
use crate::throttle::LoginThrottle;

/// What identity's routes serve from: the core database, the Studio origin,
/// the sign-in throttle and the authorization server's parked requests.
#[derive(Debug)]
pub struct Accounts {
    /// Users, sessions, tokens, people, OAuth clients and grants (`DB_PATH`).
    pub(crate) store: Store,
    /// The Studio origin: the only `Origin` a state change with the session
    /// cookie may come from; `https` makes session cookies `Secure` and
    /// `__Host-`.
    pub(crate) studio: Origin,
    /// Failed sign-ins per (user name, client address), to slow password
    /// guessing.
    pub(crate) login_throttle: LoginThrottle,
    /// The OAuth authorization server's parked requests and registration
    /// budgets.
    pub(crate) oauth: OAuthState,
    /// The identity provider, if any, and who may use a password.
    pub(crate) sign_in: SignIn,
    /// Which role the organisation's groups give (`SASHA_SSO_*_GROUPS`):
    /// SCIM memberships settle roles by it.
    pub(crate) group_roles: Arc<GroupRoles>,
}

impl Accounts {
    /// The accounts of `store`, served on `studio`; OAuth access tokens are
    /// issued for the resource `<mcp_origin>/mcp`.
    pub fn new(store: Store, studio: Origin, mcp_origin: &str) -> Accounts {
        Accounts {
            oauth: OAuthState::new(studio.as_str(), mcp_origin),
            store,
            studio,
            login_throttle: LoginThrottle,
            sign_in: SignIn::default(),
            group_roles: Arc::new(GroupRoles::default()),
        }
    }

    /// These accounts with the organisation's group mapping.
    pub fn with_group_roles(mut self, group_roles: GroupRoles) -> Accounts {
        self.group_roles = Arc::new(group_roles);
        self
    }

    /// The organisation's group mapping.
    pub fn group_roles(&self) -> &GroupRoles {
        &self.group_roles
    }

    /// These accounts signing people in as `config` says (an identity
    /// provider, passwords off, the group mapping SCIM reads too); ID tokens' expiry is checked against the
    /// store's clock.
    pub fn with_sign_in(mut self, config: SignInConfig) -> Result<Accounts, String> {
        let store = self.store.clone();
        self.group_roles = Arc::new(config.group_roles.clone());
        self.sign_in = SignIn::new(config, Arc::new(move || store.clock_seconds()))?;
        Ok(self)
    }

    /// Session cookies get `Secure` and the `__Host-` prefix when Studio is
    /// served over https.
    pub fn secure_cookies(&self) -> bool {
        self.studio.as_str().starts_with("https://")
    }

    /// The MCP endpoint OAuth access tokens are issued for
    /// (`<MCP_PUBLIC_ORIGIN>/mcp`), which clients connect to.
    pub fn mcp_resource(&self) -> &str {
        self.oauth.resource()
    }
}
