//! Contracts every Sasha process must agree on, and nothing else.
//!
//! - [`pb`]: the gRPC services and messages generated from `proto/sasha/v1/*.proto`.
//! - [`error`]: the closed `APP_*` error registry, its HTTP status and `tonic::Code`
//!   per code, and its carriage across a gRPC hop.
//! - [`identity`]: the roles, their mTLS certificates and who may call whom.
//! - [`grpc`]: serving and calling gRPC over mTLS with trace context attached.
//! - [`telemetry`]: `tracing` setup, OTLP export and W3C trace context propagation.
//! - [`config`]: reading the environment and the boot guards the spec requires.
//! - [`process`]: the shared `main` of a role (runtime, signals and the drain,
//!   readiness line).
//! - [`health`]: the optional probe listener (`/livez`, `/readyz`).
//! - [`web`]: the response headers every HTTP surface sends.
//! - [`json_limits`]: the bounds on what one JSON request body may expand
//!   into, and their one streaming check.
//!
//! Domain logic never lives here: it stays in the process that owns it.

pub mod config;
pub mod error;
pub mod grpc;
pub mod health;
pub mod identity;
pub mod json_limits;
pub mod process;
pub mod telemetry;
pub mod web;

/// Generated gRPC types. Wire types stay at the wire: each service converts them
/// to its own domain types in one place.
#[allow(unreachable_pub, clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("sasha.v1");
}

pub use error::{AppError, ErrorCode};
pub use identity::Role;

/// The version every binary reports in health answers.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
