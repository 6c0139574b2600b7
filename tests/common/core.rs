//! data-worker and studio-core on their own, with the core database open in
//! the test and `CoreService` reached over mTLS as the gateway reaches it.

use std::collections::BTreeSet;

use sasha_proto::pb;
use sasha_service::identity::Identity;
use sasha_service::{Role, grpc};
use studio_store::{Scope, TokenKind, User, UserRole};

use super::core_database::{CoreSql, CoreStore};
use super::{Harness, RoleProcess};

pub struct CoreWorld {
    pub harness: Harness,
    pub data: RoleProcess,
    pub core: RoleProcess,
    /// The core database, opened (and migrated) before studio-core starts.
    pub store: CoreStore,
}

impl CoreWorld {
    pub async fn start() -> CoreWorld {
        let harness = Harness::new();
        let store = harness.store();
        let data = harness.start(Role::DataWorker, &[]).await;
        let data_url = format!("https://{}", data.listener("grpc"));
        let core = harness
            .start(Role::StudioCore, &[("SASHA_DATA_GRPC_URL", data_url)])
            .await;
        CoreWorld {
            harness,
            data,
            core,
            store,
        }
    }

    /// A new connection with the gateway's identity.
    pub fn client(&self) -> grpc::CoreClient {
        let identity = Identity::load(&self.harness.tls(Role::McpGateway)).unwrap();
        let url = format!("https://{}", self.core.listener("grpc"));
        grpc::core_client(&url, &identity).unwrap()
    }

    /// A new user with the password "correct horse battery".
    pub fn user(&self, username: &str, role: UserRole) -> User {
        self.store
            .create_user(username, role, "correct horse battery")
            .unwrap()
    }

    /// The principal of a new bearer token of `kind` with `scopes` for `user`.
    pub async fn bearer(&self, user: &User, kind: TokenKind, scopes: &[Scope]) -> pb::Principal {
        self.principal("bearer", mint(&self.store, &user.id, kind, scopes))
            .await
    }

    /// The principal `Authenticate` gives the gateway for a credential of
    /// `kind` (`bearer`, `session`).
    pub async fn principal(&self, kind: &str, credential: String) -> pb::Principal {
        self.client()
            .authenticate(pb::AuthenticateRequest {
                kind: kind.into(),
                credential,
                resource: String::new(),
            })
            .await
            .unwrap()
            .into_inner()
    }

    /// A direct SQL connection to the core database (on SQLite, waiting out
    /// core's writes).
    pub fn database(&self) -> CoreSql {
        self.harness.core_sql()
    }
}

/// A token of `kind` with `scopes` for the user `user_id`.
pub fn mint(store: &CoreStore, user_id: &str, kind: TokenKind, scopes: &[Scope]) -> String {
    let scopes: BTreeSet<Scope> = scopes.iter().copied().collect();
    store.mint_token(user_id, kind, &scopes, None).unwrap()
}
