//! Which data-worker a call for an app goes to, for the roles that call
//! data-workers (studio-core and mcp-gateway).
//!
//! With one data-worker (`SASHA_DATA_PLACEMENT=single`, the default) every
//! call goes to `SASHA_DATA_GRPC_URL` with epoch 0. With several
//! (`leases`), each app has one owning worker and an epoch, decided by
//! studio-core in the core database; a caller keeps the route it last
//! learned per app, sends the epoch with the call, and when the worker
//! answers [`AppError::is_not_owner`] asks again ([`Locate`]) and tries
//! again at once. A worker learns of an app placed on it only at its next
//! renewal (a tenth of a lease), so the first calls to a newly placed or
//! moved app may meet an owner that has not taken it up yet: those are asked
//! again after growing pauses, for at most [`NOT_OWNER_WAIT`]. A call that
//! could not reach its worker forgets the route, so the next call asks where
//! the app is now.
//!
//! What it must never do: decide where an app goes, retry a call that may
//! have run (only the not-owner refusal, which a worker gives before
//! anything runs, is retried), or keep retrying past [`NOT_OWNER_WAIT`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sasha_proto::{AppError, ErrorCode};

use crate::grpc::{self, DataClient};
use crate::identity::Identity;

/// How long a call keeps asking for an app's owner while each owner it is
/// sent to answers not-owner: long enough for a worker's next renewal (a
/// tenth of the default 10 s lease) and its taking up of a new app, short
/// enough that a caller hears of a longer move as a retryable error.
pub const NOT_OWNER_WAIT: Duration = Duration::from_secs(3);

/// `SASHA_DATA_PLACEMENT`: how the data plane is laid out.
pub const DATA_PLACEMENT: &str = "SASHA_DATA_PLACEMENT";

/// How the data plane is laid out (`SASHA_DATA_PLACEMENT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `single`: one data-worker at `SASHA_DATA_GRPC_URL` holds every app.
    Single,
    /// `leases`: data-workers hold leases and own apps by placement.
    Leases,
}

impl Layout {
    /// Reads `SASHA_DATA_PLACEMENT` (`single` when unset).
    pub fn from_env(env: &dyn crate::config::Env) -> Result<Layout, crate::config::ConfigError> {
        match env.var(DATA_PLACEMENT).as_deref().map(str::trim) {
            None | Some("") | Some("single") => Ok(Layout::Single),
            Some("leases") => Ok(Layout::Leases),
            Some(other) => Err(crate::config::ConfigError::new(
                DATA_PLACEMENT,
                format!("{other:?} is neither \"single\" nor \"leases\""),
            )),
        }
    }
}

/// `SASHA_DATA_WORKER_ID`: a data-worker's stable name in the placement.
pub const WORKER_ID: &str = "SASHA_DATA_WORKER_ID";

/// Where one app's data is served now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub worker_id: String,
    /// The worker's `https://` URL.
    pub url: String,
    /// The owner's epoch: every call carries it.
    pub epoch: u64,
}

/// A future the [`Locate`] trait returns.
pub type LocateFuture<'a> = Pin<Box<dyn Future<Output = Result<Route, AppError>> + Send + 'a>>;

/// Asks where an app's data is served: studio-core reads the core database,
/// mcp-gateway asks studio-core (`PlacementService.Locate`).
pub trait Locate: Send + Sync + 'static {
    fn locate<'a>(&'a self, app_id: &'a str) -> LocateFuture<'a>;
}

enum Inner {
    Single(DataClient),
    Leases {
        locate: Arc<dyn Locate>,
        identity: Identity,
        routes: Mutex<HashMap<String, Route>>,
        clients: Mutex<HashMap<String, DataClient>>,
    },
}

/// The data plane as a caller sees it: cheap to clone.
#[derive(Clone)]
pub struct DataPlane(Arc<Inner>);

impl std::fmt::Debug for DataPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &*self.0 {
            Inner::Single(_) => f.write_str("DataPlane::Single"),
            Inner::Leases { .. } => f.write_str("DataPlane::Leases"),
        }
    }
}

impl DataPlane {
    /// One data-worker holds every app; calls carry epoch 0.
    pub fn single(client: DataClient) -> DataPlane {
        DataPlane(Arc::new(Inner::Single(client)))
    }

    /// Apps are placed on leased workers; `locate` says where.
    pub fn leased(locate: Arc<dyn Locate>, identity: Identity) -> DataPlane {
        DataPlane(Arc::new(Inner::Leases {
            locate,
            identity,
            routes: Mutex::new(HashMap::new()),
            clients: Mutex::new(HashMap::new()),
        }))
    }

    /// Runs `call` against the worker that owns `app_id`, with the epoch the
    /// call must carry; again, after asking again, while the worker answers
    /// that it does not own the app at that epoch (for at most
    /// [`NOT_OWNER_WAIT`]).
    pub async fn call<T, F, Fut>(&self, app_id: &str, mut call: F) -> Result<T, AppError>
    where
        F: FnMut(DataClient, u64) -> Fut,
        Fut: Future<Output = Result<T, AppError>>,
    {
        let (client, route) = match self.route(app_id, false).await? {
            Routed::Single(client) => return call(client, 0).await,
            Routed::Worker(client, route) => (client, route),
        };
        match call(client, route.epoch).await {
            Err(error) if error.is_not_owner() => {
                let deadline = tokio::time::Instant::now() + NOT_OWNER_WAIT;
                let mut pause = Duration::ZERO;
                let mut refusal = error;
                loop {
                    // Zero the first time; then the owner's renewal, a tenth
                    // of a lease, is what the pause waits for.
                    tokio::time::sleep(pause).await;
                    let Routed::Worker(client, route) = self.route(app_id, true).await? else {
                        return Err(refusal);
                    };
                    match call(client, route.epoch).await {
                        Err(error)
                            if error.is_not_owner()
                                && tokio::time::Instant::now() + pause < deadline =>
                        {
                            refusal = error;
                            pause = (pause * 2)
                                .clamp(Duration::from_millis(50), Duration::from_millis(500));
                        }
                        Err(error) => {
                            self.forget_if_unreachable(app_id, &route, &error);
                            return Err(error);
                        }
                        ok => return ok,
                    }
                }
            }
            Err(error) => {
                self.forget_if_unreachable(app_id, &route, &error);
                Err(error)
            }
            ok => ok,
        }
    }

    /// The worker a call for `app_id` would reach now without asking
    /// anyone, and the epoch it carries: the one worker, or the known
    /// route's worker when its client exists already.
    pub fn known(&self, app_id: &str) -> Option<(DataClient, u64)> {
        match &*self.0 {
            Inner::Single(client) => Some((client.clone(), 0)),
            Inner::Leases {
                routes, clients, ..
            } => {
                let route = lock(routes).get(app_id).cloned()?;
                let client = lock(clients).get(&route.url).cloned()?;
                Some((client, route.epoch))
            }
        }
    }

    /// The one data-worker's client in the `single` layout (what a role's
    /// health asks); `None` with leases, where no one worker speaks for the
    /// data plane.
    pub fn single_client(&self) -> Option<DataClient> {
        match &*self.0 {
            Inner::Single(client) => Some(client.clone()),
            Inner::Leases { .. } => None,
        }
    }

    /// The route `call` would take now (asking when none is known or
    /// `fresh`): for health reports and tests.
    pub async fn locate(&self, app_id: &str) -> Result<Option<Route>, AppError> {
        match &*self.0 {
            Inner::Single(_) => Ok(None),
            Inner::Leases { locate, routes, .. } => {
                let route = locate.locate(app_id).await?;
                lock(routes).insert(app_id.to_owned(), route.clone());
                Ok(Some(route))
            }
        }
    }

    async fn route(&self, app_id: &str, fresh: bool) -> Result<Routed, AppError> {
        let (locate, identity, routes, clients) = match &*self.0 {
            Inner::Single(client) => return Ok(Routed::Single(client.clone())),
            Inner::Leases {
                locate,
                identity,
                routes,
                clients,
            } => (locate, identity, routes, clients),
        };
        let known = if fresh {
            None
        } else {
            lock(routes).get(app_id).cloned()
        };
        let route = match known {
            Some(route) => route,
            None => {
                let route = locate.locate(app_id).await?;
                lock(routes).insert(app_id.to_owned(), route.clone());
                route
            }
        };
        let cached = lock(clients).get(&route.url).cloned();
        let client = match cached {
            Some(client) => client,
            None => match grpc::data_client(&route.url, identity) {
                Ok(client) => {
                    lock(clients).insert(route.url.clone(), client.clone());
                    client
                }
                Err(error) => {
                    tracing::error!(%error, worker = %route.worker_id, "a data-worker's URL is not usable");
                    // Not kept: the next call asks again rather than
                    // failing on this URL until the process restarts.
                    forget(routes, app_id, &route);
                    return Err(AppError::from_code(ErrorCode::NotReady));
                }
            },
        };
        Ok(Routed::Worker(client, route))
    }

    /// A worker that could not be reached may have been lost: the next call
    /// asks where the app is rather than trying it again. Only the route
    /// this call took is forgotten, not a newer one another call learned.
    fn forget_if_unreachable(&self, app_id: &str, route: &Route, error: &AppError) {
        if let Inner::Leases { routes, .. } = &*self.0
            && matches!(error.code, ErrorCode::NotReady | ErrorCode::Timeout)
        {
            forget(routes, app_id, route);
        }
    }
}

/// Removes `app_id`'s route when it is still `route`.
fn forget(routes: &Mutex<HashMap<String, Route>>, app_id: &str, route: &Route) {
    let mut routes = lock(routes);
    if routes.get(app_id) == Some(route) {
        routes.remove(app_id);
    }
}

enum Routed {
    Single(DataClient),
    Worker(DataClient, Route),
}

#[cfg(test)]
mod router_tests;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
