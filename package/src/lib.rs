//! App packages: the one validator every entry point uses (discovery, `sasha app
//! check`, the source tools), the data and action contracts it derives, and the
//! assembly of a package into one immutable, content-addressed MCP Apps resource.
//!
//! Pure library: it reads a package folder into memory ([`source`]) and never
//! writes, opens a network connection or executes app code. Every refusal is a
//! [`Diagnostic`] `{file, line?, code, reason}` with a package-relative path, and
//! one pass reports every independent problem.

pub mod actions;
pub mod assemble;
pub mod asset;
pub mod css;
pub mod diagnostics;
pub mod html;
pub mod js;
pub mod manifest;
pub mod source;
pub mod sql;
pub mod svg;
mod urls;
pub mod validate;
mod yaml;

pub use diagnostics::{Diagnostic, Diagnostics};
