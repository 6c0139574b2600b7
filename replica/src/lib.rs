//! sasha-replica: continuous replication of every SQLite database the
//! platform keeps (the core database, every app database) to S3-compatible
//! object storage through Litestream, the maintained SQLite replicator.
//!
//! Litestream runs beside the role that owns the databases (a child of
//! `sasha up`, a sidecar in Compose and Kubernetes) with nothing but a
//! control socket configured; the role registers each database at runtime
//! ([`replicator`]), gates every acknowledgement on it ([`config::Mode`]),
//! and restores what is missing. The layout in object storage, with one
//! generation per unbroken history, is [`layout`]; `sasha restore` builds a
//! state folder from it with the same functions.
//!
//! Modules: [`url`] (`SASHA_REPLICA_URL`), [`config`] (every replication
//! variable), [`control`] (the control socket's HTTP API), [`s3`] (listing,
//! reading, writing and deleting in the bucket), [`layout`] (keys and
//! generations), [`files`] (uploaded documents an earlier build mirrored file by file),
//! [`litestream`] (the executable: the daemon's config, restore) and
//! [`replicator`] (the gate).
//!
//! What it must never do: decide anything about apps, users or access; let
//! a credential reach a log line, an error or a command line.

pub mod config;
pub mod control;
pub mod files;
pub mod layout;
pub mod litestream;
pub mod replicator;
pub mod s3;
pub mod url;

pub use config::{Mode, ReplicaConfig};
pub use layout::{Database, Generation};
pub use replicator::{DatabaseState, InPlace, ReplicaError, Replicator};
