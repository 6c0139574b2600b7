//! The bounds of one upload and of one stored document, which the upload
//! area, the converters and the conversion child all apply.
//!
//! What it must never do: be raised without the gRPC message bound that
//! carries an upload (studio-core's `MAX_CORE_MESSAGE`) following it.

/// Most files in one upload.
pub const MAX_FILES: usize = 10;
/// Most bytes of all files of one upload together (25 MiB).
pub const MAX_TOTAL_BYTES: usize = 25 * 1024 * 1024;
/// Most bytes of one stored Markdown document; a longer conversion is cut at a
/// line boundary and ends with a note saying so (see [`crate::convert::truncate`]).
pub const MAX_MARKDOWN_BYTES: usize = 5 * 1024 * 1024;
