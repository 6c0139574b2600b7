//! One upload, all or nothing: the limits first, then every file converted
//! to Markdown in a confined child of its own ([`crate::isolate`]), then all
//! of them stored in the core database in one transaction, or none.
//!
//! What it must never do: store part of an upload, trust the browser's MIME
//! type, or let a converter's own error text reach the answer.

use sasha_contract::tools::{too_many_upload_bytes, too_many_upload_files};
use sasha_proto::{AppError, ErrorCode};
use serde::Serialize;
use studio_store::{NewUpload, Store, UploadOutcome, store_error};

use crate::isolate::Converter;
use crate::limits::{MAX_FILES, MAX_TOTAL_BYTES};
use crate::names;
use crate::refusal::Refusal;

/// Most names tried for one document before giving up: `brief.md` …
/// `brief-10000.md`.
const MAX_NAME_ATTEMPTS: usize = 10_000;

/// One file converted and ready to store.
#[derive(Debug)]
struct Converted {
    /// [`names::display_name`] of the uploaded name.
    original: String,
    /// [`names::safe_stem`] of the original's stem: the first name tried.
    stem: String,
    markdown: String,
}

/// One uploaded file as it arrives.
#[derive(Debug, Clone)]
pub struct IncomingFile {
    /// The name the browser gave; only its last path segment is used.
    pub name: String,
    /// The browser's MIME type: a hint, never trusted (logged only).
    pub content_type: String,
    pub data: Vec<u8>,
}

/// What one stored document is called.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Descriptor {
    /// The uploaded file's name (last path segment, bounded, control
    /// characters removed).
    pub original: String,
    /// The stored Markdown document's name among the user's, e.g. `brief.md`.
    pub converted: String,
}

/// Each user's uploaded documents, in the core database.
#[derive(Debug)]
pub struct UploadArea {
    store: Store,
    converter: Converter,
}

impl UploadArea {
    /// The documents kept in `store`, converting with `converter`.
    pub fn new(store: Store, converter: Converter) -> UploadArea {
        UploadArea { store, converter }
    }

    /// Converts every file to Markdown and stores them all for `user_id`,
    /// or stores nothing. Blocking: call it on a blocking thread.
    #[tracing::instrument(skip_all, fields(user_id, files = files.len()))]
    pub fn store(
        &self,
        user_id: &str,
        files: Vec<IncomingFile>,
    ) -> Result<Vec<Descriptor>, AppError> {
        check_user_id(user_id)?;
        check_limits(&files)?;
        let converted = convert_all(&self.converter, files)?;
        let documents = converted
            .iter()
            .map(|document| NewUpload {
                names: (1..=MAX_NAME_ATTEMPTS)
                    .map(|attempt| names::candidate(&document.stem, attempt)),
                markdown: &document.markdown,
            })
            .collect();
        let stored = match self
            .store
            .store_uploads(user_id, documents)
            .map_err(store_error)?
        {
            UploadOutcome::Stored(stored) => stored,
            UploadOutcome::NoFreeName(index) => {
                let stem = converted
                    .get(index)
                    .map_or("", |document| document.stem.as_str());
                return Err(AppError::new(
                    ErrorCode::ResourceLimit,
                    format!("too many uploaded documents share the name {stem}; rename the file"),
                ));
            }
        };
        Ok(converted
            .into_iter()
            .zip(stored)
            .map(|(document, converted)| Descriptor {
                original: document.original,
                converted,
            })
            .collect())
    }

    /// The Markdown document `converted` (e.g. `brief.md`) of `user_id`, or
    /// `None` when there is none. A name the safe-name rule would not produce
    /// (`../x`, `.hidden.md`, `a/b.md`) is `APP_INPUT_INVALID`.
    pub fn read(&self, user_id: &str, converted: &str) -> Result<Option<String>, AppError> {
        check_user_id(user_id)?;
        if !names::is_document_name(converted) {
            return Err(AppError::new(
                ErrorCode::InputInvalid,
                "this is not the name of an uploaded document",
            ));
        }
        self.store.upload(user_id, converted).map_err(store_error)
    }

    /// The names of `user_id`'s stored documents, sorted; empty when the user
    /// has uploaded nothing.
    pub fn list(&self, user_id: &str) -> Result<Vec<String>, AppError> {
        check_user_id(user_id)?;
        self.store.upload_names(user_id).map_err(store_error)
    }
}

/// Converted text as the database keeps it: PostgreSQL's text holds no NUL
/// character, so none is stored on either backend (a PDF's text layer may
/// carry one; it never shows).
pub(crate) fn storable(markdown: String) -> String {
    if markdown.contains('\0') {
        markdown.replace('\0', "")
    } else {
        markdown
    }
}

/// Whether `user_id` looks like a user id of the core store (uuid-like):
/// 1 to 64 of `[A-Za-z0-9_-]`.
pub(crate) fn is_user_id(user_id: &str) -> bool {
    (1..=64).contains(&user_id.len())
        && user_id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
}

/// User ids come from the core store (uuid-like); anything else reaching here
/// is a bug in the caller, not the user's doing.
fn check_user_id(user_id: &str) -> Result<(), AppError> {
    if is_user_id(user_id) {
        return Ok(());
    }
    let refused = AppError::from_code(ErrorCode::Internal);
    tracing::error!(
        diagnostic_id = %refused.diagnostic_id,
        user_id_bytes = user_id.len(),
        "uploads asked for a user id outside [A-Za-z0-9_-]{{1,64}}"
    );
    Err(refused)
}

fn check_limits(files: &[IncomingFile]) -> Result<(), AppError> {
    if files.is_empty() {
        return Err(AppError::new(
            ErrorCode::InputInvalid,
            "upload at least one file",
        ));
    }
    if files.len() > MAX_FILES {
        return Err(
            AppError::new(ErrorCode::ResourceLimit, too_many_upload_files())
                .with_details(serde_json::json!({ "files": files.len(), "limit": MAX_FILES })),
        );
    }
    let total = files
        .iter()
        .fold(0usize, |sum, file| sum.saturating_add(file.data.len()));
    if total > MAX_TOTAL_BYTES {
        return Err(
            AppError::new(ErrorCode::ResourceLimit, too_many_upload_bytes())
                .with_details(serde_json::json!({ "bytes": total, "limit": MAX_TOTAL_BYTES })),
        );
    }
    Ok(())
}

/// Converts every file, each in a conversion child of its own (see
/// [`crate::isolate`]); any refusal makes the whole upload fail.
fn convert_all(
    converter: &Converter,
    files: Vec<IncomingFile>,
) -> Result<Vec<Converted>, AppError> {
    let total = files.len();
    let results = files.into_iter().map(|file| convert_one(converter, file));
    let mut converted = Vec::with_capacity(total);
    let mut refused = Vec::new();
    for result in results {
        match result {
            Ok(document) => converted.push(document),
            Err((name, refusal)) => refused.push(serde_json::json!({
                "name": name,
                "reason": refusal.reason(),
            })),
        }
    }
    if refused.is_empty() {
        return Ok(converted);
    }
    let noun = if total == 1 { "file" } else { "files" };
    let error = AppError::new(
        ErrorCode::UploadFailed,
        format!("{} of {total} {noun} could not be converted", refused.len()),
    )
    .with_details(serde_json::json!({ "files": refused }));
    tracing::info!(
        diagnostic_id = %error.diagnostic_id,
        refused = refused.len(),
        total,
        "upload refused"
    );
    Err(error)
}

fn convert_one(converter: &Converter, file: IncomingFile) -> Result<Converted, (String, Refusal)> {
    let original = names::display_name(&file.name);
    let (stem, extension) = names::split_extension(&original);
    tracing::debug!(
        extension = extension.unwrap_or(""),
        content_type = %file.content_type.chars().take(100).collect::<String>(),
        bytes = file.data.len(),
        "converting an uploaded file"
    );
    match converter.convert(extension, &file.data) {
        Ok(markdown) => Ok(Converted {
            stem: names::safe_stem(stem),
            original,
            markdown: storable(markdown),
        }),
        Err(refusal) => Err((original, refusal)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_are_checked() {
        for ok in ["0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "admin", "a_b-C9"] {
            assert!(check_user_id(ok).is_ok(), "{ok}");
        }
        let long = "a".repeat(65);
        for bad in ["", "../x", "a/b", "a b", ".", "..", long.as_str(), "é"] {
            let error = check_user_id(bad).unwrap_err();
            assert_eq!(error.code, ErrorCode::Internal, "{bad}");
        }
    }

    #[test]
    fn stored_text_holds_no_nul() {
        assert_eq!(storable("a\0b\0".to_owned()), "ab");
        assert_eq!(storable("é 日本".to_owned()), "é 日本");
    }
}
