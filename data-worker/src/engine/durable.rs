//! What a live file's writes must pass beyond SQLite's own commit before
//! they are acknowledged: replication to object storage, when it is on, and
//! with several data-workers the fence of the app's owner (its lease and
//! epoch, [`crate::ownership`]).
//!
//! The engine calls a [`Durability`] at three points: before a batch of
//! mutations runs ([`Durability::admit`]: async replication refuses while it
//! is further behind than its bound; an owner refuses unless its lease is
//! live), after the batch's commit and before any answer
//! ([`Durability::committed`], given back the batch's [`Admission`]: sync
//! replication waits for object storage; an owner answers only if its
//! lease is still live at the epoch the batch was admitted under), and
//! before an app's live file is removed ([`Durability::removing`]). A
//! publication's migrations are confirmed like a write. Previews' scratch
//! copies never pass through it.
//!
//! What it must never do: be asked while a caller could already have its
//! answer, or turn a mutation's own refusal into a durability error.

use std::path::Path;

use sasha_proto::AppError;

/// What a batch was admitted under, given back when its commit is
/// confirmed: the app owner's epoch (0 with one data-worker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    pub epoch: u64,
}

/// The durability gate of live files (see the module header). Every error
/// is what the caller is answered: retryable `APP_DATABASE_UNAVAILABLE`.
pub trait Durability: Send + Sync {
    /// Whether a write to the app's live file may begin now, and under what.
    fn admit(&self, app_id: &str, path: &Path) -> Result<Admission, AppError>;
    /// Everything committed to the file so far, under `admission`, may be
    /// acknowledged once this is `Ok`.
    fn committed(&self, app_id: &str, path: &Path, admission: Admission) -> Result<(), AppError>;
    /// The file is about to be removed (its backup is taken): stop
    /// replicating it and remove its replica.
    fn removing(&self, app_id: &str, path: &Path) -> Result<(), AppError>;
}

#[cfg(test)]
mod tests;
