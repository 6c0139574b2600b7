//! What every Sasha role's process shares, and no domain logic.
//!
//! - [`config`]: reading the environment and the boot guards the spec requires.
//! - [`files`]: the open flags of files below a folder the role does not trust.
//! - [`identity`]: the roles, their mTLS certificates and who may call whom.
//! - [`grpc`]: serving and calling gRPC over mTLS with trace context attached.
//! - [`telemetry`]: `tracing` setup, OTLP export and W3C trace context propagation.
//! - [`process`]: the shared `main` of a role (runtime, signals and the drain,
//!   readiness line).
//! - [`health`]: the optional probe listener (`/livez`, `/readyz`).
//! - [`web`]: the HTTP server and the response headers every HTTP surface sends.
//!
//! This crate must never decide anything about apps, users or data: it runs
//! processes; the process that owns a rule keeps it.

pub mod config;
pub mod core_database;
pub mod data_plane;
pub mod files;
pub mod grpc;
pub mod health;
pub mod identity;
pub mod process;
pub mod telemetry;
pub mod web;

pub use identity::Role;

/// The version every binary reports in health answers.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
