//! Documents that apps hand to the assistant (`Sasha.files.upload` →
//! `sasha__files_upload` → `CoreService.Upload`): each file is converted to
//! Markdown and stored in its user's upload area, `<UPLOADS_ROOT>/<user-id>/`.
//!
//! Blocking, with no gRPC and no audit (the caller does those, on a blocking
//! thread); each file is converted in a confined child process of its own
//! ([`isolate`]), never in studio-core. What it promises:
//!
//! - **Limits first.** At most [`MAX_FILES`] files and [`MAX_TOTAL_BYTES`]
//!   bytes per upload (`APP_RESOURCE_LIMIT`); none at all is `APP_INPUT_INVALID`.
//! - **Type from the extension, checked against the content.** `.txt`, `.md`
//!   (`.markdown`), `.csv`, `.html` (`.htm`), `.pdf` and `.docx` only; a PDF
//!   must start with `%PDF-`, a DOCX with `PK\x03\x04`, the text types must be
//!   UTF-8 without NUL bytes. The browser's MIME type is a hint and is not
//!   trusted. See [`convert`] for each converter and its bounds.
//! - **All or nothing.** Every file is converted before anything is written; if
//!   any is refused, nothing is stored and the answer is `APP_UPLOAD_FAILED`
//!   with `details.files = [{name, reason}]` (names bounded, reasons from a
//!   fixed vocabulary: no paths, no library error text, no file contents). A
//!   write failing half-way removes what the batch had already stored.
//! - **Safe, unique names.** The stored file is `<safe-name>.md` (see
//!   [`names`]); never an overwrite: `brief.md`, then `brief-2.md`, …, decided
//!   by an exclusive rename so two concurrent uploads cannot take one name.
//! - **Never a link.** The user's folder and every file in it are opened with
//!   `O_NOFOLLOW` relative to the root's descriptor; files are written to a
//!   hidden temporary file, `fsync`ed and renamed without replacing.
//! - **Only names leave.** [`Descriptor`] carries the original and the
//!   converted file name, never a path.
//!
//! Architecture invariant: `UPLOADS_ROOT` is never inside `DOCS_ROOT`
//! (checked at boot by `StoragePaths`), so an uploaded document is never served.

mod area;
pub mod convert;
pub mod docx;
pub mod isolate;
mod limits;
pub mod markdown;
pub mod names;
pub mod pdf;
pub mod refusal;
mod upload;

pub use limits::{MAX_FILES, MAX_MARKDOWN_BYTES, MAX_TOTAL_BYTES};
pub use upload::{Descriptor, IncomingFile, UploadArea};
