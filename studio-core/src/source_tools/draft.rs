//! The six source tools on an app's draft (`draft: true`): the same
//! arguments and the same file rules as on the live package
//! (`crate::source`), applied to the draft's rows in the store
//! (`crate::drafts`) instead of the package folder. A change starts the
//! draft from the live app; reading a draft that was never started is
//! `DRAFT_NOT_FOUND`.
//!
//! What it must never do: write the live package folder, or apply a rule
//! the live tools do not (a file the live tools refuse is refused here).

use std::sync::Arc;

use base64::Engine as _;
use sasha_proto::{AppError, ErrorCode};
use studio_identity::actor::Actor;
use studio_store::blocking;

use super::{Arguments, SourceReply};
use crate::drafts;
use crate::source::{self as rules, FileEntry, SourcePath};
use crate::state::Core;

fn invalid(message: impl Into<String>) -> AppError {
    AppError::new(ErrorCode::InputInvalid, message)
}

/// One source tool on the app's draft; `arguments` were checked by
/// [`super::run`] (shape, which keys the operation takes) and the
/// caller manages the app.
pub(super) async fn source_operation(
    core: &Arc<Core>,
    actor: &Actor,
    operation: &str,
    app_id: &str,
    arguments: &Arguments,
) -> Result<SourceReply, AppError> {
    let existing = drafts::draft_of(core, app_id).await?;
    // Any change starts the draft from the live app, as the refusal below
    // tells a caller who only reads.
    let writes = matches!(operation, "writeAppFile" | "editAppFile" | "deleteAppFile");
    let draft = match existing {
        Some(draft) => draft,
        None if writes => drafts::start(core, &actor.user_id, app_id).await?.0,
        None => return Err(drafts::no_draft(app_id)),
    };
    match operation {
        "listAppFiles" => {
            let (store, app) = (core.store.clone(), app_id.to_owned());
            let files = blocking(move || store.draft_files(&app)).await?;
            let info = drafts::info(core, &draft, false).await?;
            Ok(SourceReply::List {
                status: info.status.clone(),
                files: files
                    .into_iter()
                    .map(|file| FileEntry {
                        editable: rules::check_path(&file.path).is_ok()
                            && file.size <= rules::MAX_FILE_BYTES,
                        path: file.path,
                        bytes: file.size,
                        version: Some(file.sha256),
                    })
                    .collect(),
                draft: Some(info),
            })
        }
        "readAppFile" => {
            let path = arguments
                .path
                .clone()
                .ok_or_else(|| invalid("path is required"))?;
            let files = drafts::contents(core, app_id).await?;
            let Some((file, bytes)) = files.into_iter().find(|(file, _)| file.path == path) else {
                return Err(rules::not_found(&path));
            };
            let (content, encoding) = if rules::is_binary(&path) {
                (
                    base64::engine::general_purpose::STANDARD.encode(&bytes),
                    Some(rules::BASE64.to_owned()),
                )
            } else {
                (
                    String::from_utf8(bytes)
                        .map_err(|_| invalid(format!("{path} is not UTF-8 text")))?,
                    None,
                )
            };
            Ok(SourceReply::Read {
                path: file.path,
                content,
                bytes: file.size,
                version: file.sha256,
                encoding,
                draft: Some(drafts::info(core, &draft, false).await?),
            })
        }
        "checkApp" => {
            let info = drafts::info(core, &draft, true).await?;
            Ok(SourceReply::Check {
                status: info.status.clone(),
                draft: Some(info),
            })
        }
        "writeAppFile" | "editAppFile" | "deleteAppFile" => {
            let path_text = arguments
                .path
                .clone()
                .ok_or_else(|| invalid("path is required"))?;
            let (before, after) = change(core, actor, operation, app_id, arguments).await?;
            let info = drafts::info(core, &draft, false).await?;
            Ok(SourceReply::Change {
                status: info.status.clone(),
                path: path_text,
                version: after,
                previous_version: before,
                draft: Some(info),
            })
        }
        _ => Err(invalid("unknown source operation")),
    }
}

/// writeAppFile, editAppFile or deleteAppFile on the draft, by the source
/// tools' own rules (`crate::source`), as one store transaction.
async fn change(
    core: &Arc<Core>,
    actor: &Actor,
    operation: &str,
    app_id: &str,
    arguments: &Arguments,
) -> Result<(Option<String>, Option<String>), AppError> {
    let required = |value: &Option<String>, name: &str| {
        value
            .clone()
            .ok_or_else(|| invalid(format!("{name} is required")))
    };
    let path = required(&arguments.path, "path")?;
    SourcePath::parse(&path)?;
    enum Change {
        Write(Vec<u8>, Option<String>),
        Edit(String, String, String),
        Delete(String),
    }
    let planned = match operation {
        "writeAppFile" => {
            let content = required(&arguments.content, "content")?;
            let bytes = rules::content_bytes(&path, &content, arguments.encoding.as_deref())?;
            rules::check_content(&SourcePath::parse(&path)?, &bytes)?;
            Change::Write(bytes, arguments.expected_version.clone())
        }
        "editAppFile" => {
            let old = required(&arguments.old_string, "oldString")?;
            rules::check_editable(&SourcePath::parse(&path)?, &old)?;
            Change::Edit(
                old,
                required(&arguments.new_string, "newString")?,
                required(&arguments.expected_version, "expectedVersion")?,
            )
        }
        _ => {
            rules::check_deletable(&SourcePath::parse(&path)?)?;
            Change::Delete(required(&arguments.expected_version, "expectedVersion")?)
        }
    };
    let (store, app, user, at) = (
        core.store.clone(),
        app_id.to_owned(),
        actor.user_id.clone(),
        path.clone(),
    );
    let outcome = blocking(move || {
        store.change_draft_file(&app, &at, &user, |current, shape| {
            let total: u64 = shape.files.iter().map(|(_, size)| size).sum();
            let old_size = current.map(|file| file.bytes.len() as u64);
            match planned {
                Change::Write(bytes, expected) => {
                    let before = rules::write_expectation(
                        &at,
                        current.map(|file| file.version.clone()),
                        expected.as_deref(),
                    )?;
                    if before.is_none() {
                        collides(&at, shape.files.iter().map(|(path, _)| path.as_str()))?;
                    }
                    rules::check_limits(shape.files.len(), total, old_size, bytes.len() as u64)?;
                    Ok(Some(bytes))
                }
                Change::Edit(old, new, expected) => {
                    let file = current.ok_or_else(|| rules::not_found(&at))?;
                    rules::check_expected(&at, &file.version, &expected)?;
                    let edited = rules::edited_text(&at, &file.bytes, &old, &new)?;
                    rules::check_limits(shape.files.len(), total, old_size, edited.len() as u64)?;
                    Ok(Some(edited.into_bytes()))
                }
                Change::Delete(expected) => {
                    let file = current.ok_or_else(|| rules::not_found(&at))?;
                    rules::check_expected(&at, &file.version, &expected)?;
                    Ok(None)
                }
            }
        })
    })
    .await?;
    match outcome {
        Some(result) => result,
        // Ended between the check and the change.
        None => Err(drafts::no_draft(app_id)),
    }
}

/// A new path must not differ from another of the draft only by case or
/// Unicode form in the first segment where they differ (the source tree's
/// collision rule: two names of one folder).
fn collides<'a>(path: &str, existing: impl Iterator<Item = &'a str>) -> Result<(), AppError> {
    let mine: Vec<&str> = path.split('/').collect();
    for other in existing {
        let theirs: Vec<&str> = other.split('/').collect();
        if let Some((a, b)) = mine.iter().zip(&theirs).find(|(a, b)| a != b)
            && rules::collision_key(a) == rules::collision_key(b)
        {
            return Err(rules::conflict(format!(
                "{path} collides with existing {other} (names may not differ only by case or Unicode form)"
            )));
        }
    }
    Ok(())
}
