//! The documents users uploaded for the assistant, as builds before they
//! moved into the core database kept them: plain files
//! (`UPLOADS_ROOT/<user-id>/<name>`), each mirrored to object storage as
//! one object when it was stored, at
//!
//! ```text
//! <prefix>/uploads/<user-id>/<name>      one uploaded document (Markdown)
//! ```
//!
//! Nothing is mirrored here any more (a document is a row of the core
//! database, replicated with it); the objects such a build left are brought
//! back by [`download_missing`], at studio-core's boot for what its volume
//! lacks and by `sasha restore` (as of an instant, by each object's
//! stored-at metadata), into an upload folder that studio-core imports.
//! `DOCS_ROOT` is not here: catalogue packages are rebuilt from the revision
//! ledger in the core database.
//!
//! What it must never do: write outside the folder it is given (every name
//! is one checked path segment), replace a file that exists, or follow a
//! link.

use std::io::Write as _;
use std::path::Path;

use time::OffsetDateTime;

use crate::s3::{ObjectStore, StorageError};

/// The folder of the uploaded documents below the prefix.
pub const UPLOADS_DIR: &str = "uploads/";

/// Whether `segment` may name a user folder or a document: 1 to 255 bytes
/// of letters, digits, `.`, `_` and `-`, not starting with `.`.
pub fn is_plain_segment(segment: &str) -> bool {
    !segment.is_empty()
        && segment.len() <= 255
        && !segment.starts_with('.')
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The path below the prefix of `user_id`'s document `name`, when both are
/// plain segments.
pub fn upload_path(user_id: &str, name: &str) -> Option<String> {
    (is_plain_segment(user_id) && is_plain_segment(name))
        .then(|| format!("{UPLOADS_DIR}{user_id}/{name}"))
}

/// Writes every uploaded document object storage holds (stored at or before
/// `at`, when given) that `root` lacks into `root/<user-id>/<name>` (folders
/// 0700, files 0600, never replacing one). Says how many it wrote.
pub async fn download_missing(
    store: &ObjectStore,
    root: &Path,
    at: Option<OffsetDateTime>,
) -> Result<usize, String> {
    let prefix = store.url().key(UPLOADS_DIR);
    let objects = store
        .list_keys(UPLOADS_DIR)
        .await
        .map_err(|error| error.to_string())?;
    let mut written = 0;
    for object in objects {
        let Some((user_id, name)) = object
            .key
            .strip_prefix(&prefix)
            .and_then(|rest| rest.split_once('/'))
        else {
            continue;
        };
        if upload_path(user_id, name).is_none() {
            tracing::warn!(key = %object.key, "replication: an uploaded document's name is not plain; skipped");
            continue;
        }
        let target = root.join(user_id).join(name);
        if std::fs::symlink_metadata(&target).is_ok() {
            continue;
        }
        if let Some(at) = at
            && !stored_by(store, &object, at)
                .await
                .map_err(|error| error.to_string())?
        {
            continue;
        }
        let bytes = store
            .get_file(&object.key)
            .await
            .map_err(|error| error.to_string())?;
        write_new(&root.join(user_id), name, &bytes)
            .map_err(|error| format!("cannot write {}: {error}", target.display()))?;
        written += 1;
    }
    Ok(written)
}

/// Whether `object` was stored at or before `at`: a listing's time is the
/// whole second it was stored in, so only an object of `at`'s own second
/// needs its exact time.
async fn stored_by(
    store: &ObjectStore,
    object: &crate::s3::Object,
    at: OffsetDateTime,
) -> Result<bool, StorageError> {
    let Some(listed) = object.last_modified else {
        return Ok(false);
    };
    if listed + time::Duration::seconds(1) <= at {
        return Ok(true);
    }
    if listed > at {
        return Ok(false);
    }
    Ok(store
        .stored_at(&object.key)
        .await?
        .is_some_and(|stored| stored <= at))
}

/// Writes `bytes` to `folder/name`, creating the folder (0700) and the file
/// (0600, exclusively: an existing file or link is an error).
fn write_new(folder: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(folder)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(folder.join(name))?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_segments_name_a_document() {
        assert_eq!(
            upload_path("0f9c2d6e-1b2a-4c3d-9e8f-0a1b2c3d4e5f", "brief-2.md").as_deref(),
            Some("uploads/0f9c2d6e-1b2a-4c3d-9e8f-0a1b2c3d4e5f/brief-2.md")
        );
        for (user, name) in [
            ("..", "a.md"),
            ("u", "../a.md"),
            ("u", ".hidden.md"),
            ("u/v", "a.md"),
            ("u", "a b.md"),
            ("", "a.md"),
            ("u", ""),
        ] {
            assert_eq!(upload_path(user, name), None, "{user:?} {name:?}");
        }
        assert!(!is_plain_segment(&"a".repeat(256)));
    }

    #[test]
    fn a_document_is_written_once_and_never_over_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("user");
        write_new(&folder, "a.md", b"first").unwrap();
        assert!(write_new(&folder, "a.md", b"second").is_err());
        assert_eq!(std::fs::read(folder.join("a.md")).unwrap(), b"first");
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(folder.join("a.md"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::os::unix::fs::symlink("/etc/passwd", folder.join("b.md")).unwrap();
        assert!(
            write_new(&folder, "b.md", b"x").is_err(),
            "never through a link"
        );
    }
}
