//! Each author's member app deploys, throttled: a burst, then one per
//! period, in the sign-in throttles' keyed limiter, whose cells are in the
//! core database (every replica spends one budget). Part of studio-core's
//! shared state.
//!
//! What it must never do: let one author spend another's budget (the key
//! is the author's own user id), or bound anything durable (the caps and
//! the byte budget in the store do that).

use std::time::Duration;

use sasha_proto::{AppError, ErrorCode};
use serde_json::json;
use studio_identity::throttle::{KeyedThrottle, retry_after_seconds, try_again_in};
use studio_store::Store;

/// Deploys (and reverts) one author may make at once: enough to fill their
/// cap of apps in one go and change a few.
pub(crate) const MEMBER_DEPLOY_BURST: u32 = 50;
/// After the burst, one more deploy per this period.
pub(crate) const MEMBER_DEPLOY_PERIOD: Duration = Duration::from_secs(60);
/// Each author's deploys: [`MEMBER_DEPLOY_BURST`] at once, then one per
/// [`MEMBER_DEPLOY_PERIOD`], in the sign-in throttles' keyed GCRA limiter.
/// Only the author can spend their own budget, so it cannot be turned
/// against anyone else. What bounds the core database is the byte budget
/// and the caps in the store; this bounds how fast anyone churns it.
#[derive(Debug)]
pub(crate) struct DeployThrottle {
    store: Store,
    throttle: KeyedThrottle,
}

impl DeployThrottle {
    pub(crate) fn new(store: &Store) -> DeployThrottle {
        DeployThrottle {
            store: store.clone(),
            throttle: KeyedThrottle::new(
                "member-deploy",
                MEMBER_DEPLOY_BURST,
                MEMBER_DEPLOY_PERIOD,
            ),
        }
    }

    /// Takes one of `author`'s deploys, or refuses with how long to wait
    /// (`APP_BUSY`, retryable, `details.retryAfterSeconds`).
    pub(crate) async fn admit(&self, author: &str) -> Result<(), AppError> {
        self.throttle.check(&self.store, author).await?.map_err(|wait| {
            AppError::new(
                ErrorCode::Busy,
                format!(
                    "you deployed {MEMBER_DEPLOY_BURST} times in a short while, the most one person \
                     may: nothing was deployed; {}",
                    try_again_in(wait)
                ),
            )
            .with_details(json!({
                "reason": "deploy-rate",
                "retryAfterSeconds": retry_after_seconds(wait),
            }))
        })
    }
}
