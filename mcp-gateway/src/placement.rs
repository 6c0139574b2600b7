//! Where an app's data is served, as the gateway learns it with several
//! data-workers (`SASHA_DATA_PLACEMENT=leases`): `PlacementService.Locate`
//! on studio-core, over the same balanced channel as the gateway's other
//! calls to core. `sasha_service::data_plane` keeps the answers per app and
//! asks again when a worker refuses or is lost.
//!
//! What it must never do: decide where an app goes (studio-core does, in the
//! core database), or hand on a route the data plane could not use as is (a
//! worker's address that is not `https://`).

use sasha_proto::pb::LocateRequest;
use sasha_proto::{AppError, ErrorCode};
use sasha_service::Role;
use sasha_service::data_plane::{Locate, LocateFuture, Route};
use sasha_service::grpc::{self, PlacementClient};

/// What a caller is told after studio-core did not say in time where an
/// app is: nothing ran.
const TRY_AGAIN: &str = "try again";

/// [`Locate`] through studio-core's `PlacementService`.
#[derive(Debug, Clone)]
pub struct CorePlacement {
    client: PlacementClient,
    /// The gateway's call deadline: a Locate is part of the call a person
    /// waits on.
    deadline: std::time::Duration,
}

impl CorePlacement {
    pub fn new(client: PlacementClient, deadline: std::time::Duration) -> CorePlacement {
        CorePlacement { client, deadline }
    }

    async fn ask(&self, app_id: &str) -> Result<Route, AppError> {
        let request = LocateRequest {
            app_id: app_id.to_owned(),
        };
        // A read: one more try goes to a replica that answers.
        let route = grpc::within_read(Role::StudioCore, self.deadline, TRY_AGAIN, || {
            let (mut client, request) = (self.client.clone(), request.clone());
            async move { client.locate(request).await }
        })
        .await?;
        usable(app_id, route)
    }
}

impl Locate for CorePlacement {
    fn locate<'a>(&'a self, app_id: &'a str) -> LocateFuture<'a> {
        Box::pin(self.ask(app_id))
    }
}

/// `route` as the data plane keeps it, when it names a worker by an
/// `https://` address for this very app; anything else is studio-core's
/// fault, logged, and the caller's retryable `APP_NOT_READY`.
fn usable(app_id: &str, route: sasha_proto::pb::Route) -> Result<Route, AppError> {
    let fits = route.app_id == app_id
        && !route.worker_id.is_empty()
        && route.url.starts_with("https://")
        && route.epoch > 0;
    if !fits {
        let error = AppError::new(
            ErrorCode::NotReady,
            "the place of this app's data is not known yet; try again",
        );
        tracing::error!(
            diagnostic_id = %error.diagnostic_id,
            app_id,
            answered_for = %route.app_id,
            worker = %route.worker_id,
            url = %route.url,
            epoch = route.epoch,
            "studio-core answered a route the gateway cannot use"
        );
        return Err(error);
    }
    Ok(Route {
        worker_id: route.worker_id,
        url: route.url,
        epoch: route.epoch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(app_id: &str, worker_id: &str, url: &str, epoch: u64) -> sasha_proto::pb::Route {
        sasha_proto::pb::Route {
            app_id: app_id.to_owned(),
            worker_id: worker_id.to_owned(),
            url: url.to_owned(),
            epoch,
        }
    }

    #[test]
    fn a_route_is_used_only_when_it_names_a_worker_for_this_app() {
        let url = "https://data-worker-1.data-worker:3013";
        assert_eq!(
            usable("hello", wire("hello", "data-worker-1", url, 3)).unwrap(),
            Route {
                worker_id: "data-worker-1".to_owned(),
                url: url.to_owned(),
                epoch: 3,
            }
        );
        for refused in [
            wire("other", "data-worker-1", url, 3),
            wire("hello", "", url, 3),
            wire("hello", "data-worker-1", "http://data-worker-1:3013", 3),
            wire("hello", "data-worker-1", "", 3),
            // Epoch 0 is the single layout's, which a leased worker refuses.
            wire("hello", "data-worker-1", url, 0),
        ] {
            let error = usable("hello", refused.clone()).unwrap_err();
            assert_eq!(error.code, ErrorCode::NotReady, "{refused:?}");
            assert!(error.retryable);
        }
    }
}
