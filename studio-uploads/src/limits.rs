//! The bounds of one upload and of one stored document, which the upload
//! area, the converters and the conversion child all apply.
//!
//! What it must never do: be raised without the gRPC message bound that
//! carries an upload (studio-core's `MAX_CORE_MESSAGE`) following it.

/// Most files in one upload, and most bytes of all files of one upload
/// together (25 MiB): the bounds the app runtime and the gateway apply too.
pub use sasha_contract::tools::{
    MAX_UPLOAD_BYTES as MAX_TOTAL_BYTES, MAX_UPLOAD_FILES as MAX_FILES,
};
/// Most bytes of one stored Markdown document; a longer conversion is cut at a
/// line boundary and ends with a note saying so (see [`crate::convert::truncate`]).
pub const MAX_MARKDOWN_BYTES: usize = 5 * 1024 * 1024;
