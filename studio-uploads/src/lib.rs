//! Documents that apps hand to the assistant (`Sasha.files.upload` →
//! `sasha__files_upload` → `CoreService.Upload`): each file is converted to
//! Markdown and stored for its user in the core database (studio-store's
//! `uploads`), so every studio-core replica reads what any of them stored.
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
//!   trusted. See [`convert`] for each converter and its bounds; a stored
//!   document is at most [`MAX_MARKDOWN_BYTES`].
//! - **All or nothing.** Every file is converted before anything is written; if
//!   any is refused, nothing is stored and the answer is `APP_UPLOAD_FAILED`
//!   with `details.files = [{name, reason}]` (names bounded, reasons from a
//!   fixed vocabulary: no library error text, no file contents). The
//!   documents of one upload are stored in one transaction.
//! - **Safe, unique names.** A document is named `<safe-name>.md` (see
//!   [`names`]); never an overwrite: `brief.md`, then `brief-2.md`, …,
//!   decided by the table's primary key (user, name), so two concurrent
//!   uploads, on one replica or two, cannot take one name.
//! - **Only names leave.** [`Descriptor`] carries the original and the
//!   converted document name, nothing else of where it is kept.
//!
//! An upload folder of an earlier build (`UPLOADS_ROOT/<user-id>/<name>.md`)
//! is imported into the database by [`import`], read with `O_NOFOLLOW` and
//! never written. `UPLOADS_ROOT` is still never inside `DOCS_ROOT` (checked
//! at boot by `StoragePaths`), so such a document is never served.

pub mod convert;
pub mod docx;
pub mod import;
pub mod isolate;
mod limits;
pub mod markdown;
pub mod names;
pub mod pdf;
pub mod refusal;
mod upload;

pub use limits::{MAX_FILES, MAX_MARKDOWN_BYTES, MAX_TOTAL_BYTES};
pub use upload::{Descriptor, IncomingFile, UploadArea};
