//! Who a call acts for once the caller is known: the user, their role, how
//! they authenticated and their scopes. A `CoreService` request names its
//! actor (the principal the gateway had from `Authenticate`, converted at
//! the gRPC edge); a Studio route gets it from the signed-in caller
//! ([`Actor::from`] a [`Principal`]), so both surfaces reach one rule.
//!
//! What it must never do: widen what the caller named. A role or a kind the
//! platform does not know is `None` and a scope it does not know is left
//! out, so neither ever satisfies a check.

use std::collections::BTreeSet;

use studio_store::{Principal, PrincipalKind, Scope, UserRole};

/// Who a call acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub user_id: String,
    pub username: String,
    /// `None` for a role the platform does not know.
    pub role: Option<UserRole>,
    /// How they authenticated; `None` for a kind the platform does not know.
    pub kind: Option<PrincipalKind>,
    pub scopes: BTreeSet<Scope>,
}

impl Actor {
    /// Whether the actor holds `scope`.
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    /// Whether the actor authenticated as `kind`.
    pub fn is(&self, kind: PrincipalKind) -> bool {
        self.kind == Some(kind)
    }

    /// Whether the actor's role is `role`.
    pub fn has_role(&self, role: UserRole) -> bool {
        self.role == Some(role)
    }
}

impl From<&Principal> for Actor {
    fn from(principal: &Principal) -> Actor {
        Actor {
            user_id: principal.user.id.clone(),
            username: principal.user.username.clone(),
            role: Some(principal.user.role),
            kind: Some(principal.kind),
            scopes: principal.scopes.clone(),
        }
    }
}
