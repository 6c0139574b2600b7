//! The wire every Sasha process agrees on, and nothing else.
//!
//! - [`pb`]: the gRPC services and messages generated from `proto/sasha/v1/*.proto`.
//! - [`error`]: the closed `APP_*` error registry, its HTTP status and `tonic::Code`
//!   per code, and its carriage across a gRPC hop.
//! - [`client_json`]: the JSON clients see of replies two surfaces serve.
//! - [`convert`]: wire messages to and from `sasha-contract`'s types.
//! - [`json_limits`]: the bounds on what one JSON request body may expand
//!   into, and their one streaming check.
//!
//! Domain logic never lives here, and neither does running a process (that is
//! `sasha-service`): each service converts wire types to its own in one place.

pub mod client_json;
pub mod convert;
pub mod error;
pub mod json_limits;

/// Generated gRPC types. Wire types stay at the wire: each service converts them
/// to its own domain types in one place.
#[allow(unreachable_pub, clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("sasha.v1");
}

pub use error::{AppError, ErrorCode};
