//! The one definition of what Sasha's processes and the validator agree on
//! about apps and their data, with no process, network or parser in it.
//!
//! - [`ids`]: the kebab id rule, [`ids::AppId`] and the data-worker id rule.
//! - [`caller`]: roles, scopes, principal kinds, app access and call sources.
//! - [`data`]: the data contract (declared tables, access, owner field,
//!   columns, migrations, reserved columns) and its hash.
//! - [`actions`]: compiled actions, the one data operation each runs.
//! - [`grammar`]: the data grammar's operations, operators, metrics and bounds.
//! - [`tools`]: MCP tool names and the table tools' JSON Schemas.
//! - [`error`]: the closed error registry.
//! - [`canonical`]: canonical JSON.
//! - [`browser`]: the constants above as the browser code states them.
//! - [`html`]: escaping text into HTML.
//!
//! This crate must never depend on another Sasha crate, and never on a
//! parser of package sources: the validator (`sasha-package`), data-worker
//! and mcp-gateway all depend on it, and the last two on nothing heavier.

pub mod actions;
pub mod browser;
pub mod caller;
pub mod canonical;
pub mod data;
pub mod error;
pub mod grammar;
pub mod html;
pub mod ids;
pub mod tools;

pub use error::ErrorCode;
pub use ids::AppId;
