//! The state studio-core's HTTP and gRPC surfaces share, and every domain
//! function reads: the store, the live catalogue, the accounts, the
//! assistance, the data plane, and what this process keeps in
//! memory ([`draft_cache`], [`deploy_throttle`]).
//!
//! What it must never do: hold a decision (an access, a grant, a
//! validation) that the store or the catalogue should be asked for again;
//! import a module that takes `Core` (it sits below all of them).

use std::collections::BTreeMap;
use std::sync::Arc;

use sasha_proto::AppError;
use sasha_service::config::Origins;
use sasha_service::data_plane::DataPlane;
use sasha_service::grpc::DataClient;
use studio_store::{AppAccess, Store};

use crate::catalogue::Catalogue;
use crate::source::SourceTree;

pub(crate) mod deploy_throttle;
pub(crate) mod draft_cache;

use deploy_throttle::DeployThrottle;
use draft_cache::DraftCache;

/// State shared by the HTTP and gRPC surfaces.
#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) origins: Origins,
    /// Where each app's data is served: every call to a data-worker goes
    /// through it (`crate::data_worker`), with the epoch it routes by.
    pub(crate) data: DataPlane,
    /// How the data plane is laid out (`SASHA_DATA_PLACEMENT`).
    pub(crate) data_layout: DataLayout,
    /// The live app catalogue.
    pub(crate) catalogue: Arc<Catalogue>,
    /// Revisions kept per app in the revision ledger (`SASHA_REVISION_RETENTION`).
    pub(crate) revision_retention: usize,
    /// Users, sessions, tokens, the registry and grants (`DB_PATH`).
    pub(crate) store: Store,
    /// Who is calling: sessions, sign-in, people, tokens and the OAuth
    /// authorization server (studio-identity), over the same store.
    pub(crate) accounts: Arc<studio_identity::Accounts>,
    /// The member tier's caps (`member_apps::MEMBER_CAPS`).
    pub(crate) member_caps: studio_store::MemberCaps,
    /// Each author's member app deploys.
    pub(crate) member_deploys: DeployThrottle,
    /// The package folders, for the source tools.
    pub(crate) source: Arc<SourceTree>,
    /// The package folders as a working copy of the heads in the core
    /// database (`crate::package_sync`).
    pub(crate) packages: Arc<crate::package_sync::PackageSync>,
    /// The chat provider, app chat and uploads (`CoreService.Chat`,
    /// `CoreService.Upload`) and the Studio assistant (studio-assistant).
    pub(crate) assistance: Arc<studio_assistant::Assistance>,
    /// Each draft's validation, by its files' content addresses.
    pub(crate) drafts: DraftCache,
    /// The core database's replication, when on: the write gate.
    pub(crate) replication: Option<crate::replication::CoreReplication>,
}

/// The data plane's layout as studio-core serves it.
#[derive(Debug, Clone)]
pub(crate) enum DataLayout {
    /// One data-worker holds every app; its client answers health.
    Single(DataClient),
    /// Data-workers renew leases here (`PlacementService`), each granted
    /// `lease` (`SASHA_DATA_LEASE_SECS`).
    Leases { lease: std::time::Duration },
}

impl Core {
    /// Every app `user_id` holds access on, read fresh from the store (one
    /// query), for the API and CoreService alike.
    pub(crate) async fn granted_apps(
        &self,
        user_id: &str,
    ) -> Result<BTreeMap<String, AppAccess>, AppError> {
        let (store, user_id) = (self.store.clone(), user_id.to_owned());
        studio_store::blocking(move || store.access_by_app(&user_id)).await
    }
}
