//! The one-way road from an upload folder into the core database: builds
//! before uploads moved into the database kept each document as a file,
//! `<UPLOADS_ROOT>/<user-id>/<name>.md`. studio-core imports such a folder
//! at boot (an installation upgraded in place), and `sasha restore` the
//! documents a replica mirrored before the move; each document keeps its
//! name, a name the user has already is left as it is, and the folder is
//! only read, never changed, so importing again changes nothing.
//!
//! The folder is not trusted further than the files a build of ours wrote
//! there: the user folders and documents are opened relative to the
//! descriptor before them with `O_NOFOLLOW` (a planted link is skipped, never
//! followed), only regular files under a document name are read, at most
//! [`MAX_MARKDOWN_BYTES`] of UTF-8 each; anything else is skipped and
//! counted.
//!
//! What it must never do: write to the folder, replace a stored document,
//! or store a document for a user the database does not have.

use std::fs::File;
use std::io::Read as _;
use std::path::Path;

use rustix::fd::{AsFd as _, BorrowedFd, OwnedFd};
use rustix::fs::{Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use sasha_service::files::{FOLDER_FLAGS, READ_FLAGS};
use studio_store::{Imported, Store};

use crate::limits::MAX_MARKDOWN_BYTES;
use crate::names;
use crate::upload::{is_user_id, storable};

/// What an import found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Documents stored in the database by this import.
    pub imported: usize,
    /// Documents whose user already has one of that name (imported before).
    pub present: usize,
    /// Documents of users the database no longer has.
    pub orphaned: usize,
    /// Entries that are not documents a build of ours wrote (a link, a
    /// hidden or misnamed file, one too large or not UTF-8).
    pub skipped: usize,
}

/// Imports every document below `root` into `store`, user folder by user
/// folder; a missing `root` imports nothing. Blocking. An error (the folder
/// cannot be listed, the database refuses) names what failed; the documents
/// imported before it stay imported, and the next import goes on from there.
pub fn import_folder(store: &Store, root: &Path) -> Result<ImportReport, String> {
    let mut report = ImportReport::default();
    let root_fd = match rustix::fs::open(
        root,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(report),
        Err(error) => return Err(format!("cannot open {}: {error}", root.display())),
    };
    for user_id in entry_names(root_fd.as_fd())
        .map_err(|error| format!("cannot list {}: {error}", root.display()))?
    {
        if !is_user_id(&user_id) {
            report.skipped += 1;
            continue;
        }
        let folder = match rustix::fs::openat(
            root_fd.as_fd(),
            user_id.as_str(),
            FOLDER_FLAGS,
            Mode::empty(),
        ) {
            Ok(folder) => folder,
            Err(error) => {
                tracing::warn!(%user_id, %error, "upload import: not a folder (a link?); skipped");
                report.skipped += 1;
                continue;
            }
        };
        import_user(store, &user_id, folder, &mut report)
            .map_err(|error| format!("cannot import {}: {error}", root.join(&user_id).display()))?;
    }
    if report.imported + report.orphaned + report.skipped > 0 {
        tracing::info!(
            imported = report.imported,
            present = report.present,
            orphaned = report.orphaned,
            skipped = report.skipped,
            root = %root.display(),
            "upload import: documents of an upload folder were imported into the core database"
        );
    }
    Ok(report)
}

/// Imports the documents of one user's folder that the database lacks.
fn import_user(
    store: &Store,
    user_id: &str,
    folder: OwnedFd,
    report: &mut ImportReport,
) -> Result<(), String> {
    let stored: std::collections::HashSet<String> = store
        .upload_names(user_id)
        .map_err(|error| error.to_string())?
        .into_iter()
        .collect();
    let mut entries = entry_names(folder.as_fd()).map_err(|error| error.to_string())?;
    entries.sort();
    for name in entries {
        if !names::is_document_name(&name) {
            report.skipped += 1;
            continue;
        }
        if stored.contains(&name) {
            report.present += 1;
            continue;
        }
        let Some(markdown) = read_document(folder.as_fd(), &name) else {
            report.skipped += 1;
            continue;
        };
        match store
            .import_upload(user_id, &name, &markdown)
            .map_err(|error| error.to_string())?
        {
            Imported::Stored => report.imported += 1,
            Imported::NameTaken => report.present += 1,
            Imported::UnknownUser => {
                report.orphaned += 1;
            }
        }
    }
    Ok(())
}

/// The text of `folder/name` when it is a regular file of at most
/// [`MAX_MARKDOWN_BYTES`] of UTF-8; `None` (logged) otherwise.
fn read_document(folder: BorrowedFd<'_>, name: &str) -> Option<String> {
    let skip = |why: &str| {
        tracing::warn!(name, why, "upload import: a file was skipped");
        None
    };
    let fd = match rustix::fs::openat(folder, name, READ_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::LOOP) => return skip("a symbolic link"),
        Err(_) => return skip("cannot be opened"),
    };
    match rustix::fs::fstat(&fd) {
        Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile => {}
        _ => return skip("not a regular file"),
    }
    // Documents were written at most MAX_MARKDOWN_BYTES; one byte more
    // notices a file someone else put there.
    let limit = MAX_MARKDOWN_BYTES as u64 + 1;
    let mut bytes = Vec::new();
    if File::from(fd).take(limit).read_to_end(&mut bytes).is_err() {
        return skip("cannot be read");
    }
    if bytes.len() as u64 >= limit {
        return skip("larger than any stored document");
    }
    match String::from_utf8(bytes) {
        Ok(text) => Some(storable(text)),
        Err(_) => skip("not UTF-8"),
    }
}

/// Every entry name of `folder` that is UTF-8 (others cannot be a user id
/// or a document name), without `.` and `..`.
fn entry_names(folder: BorrowedFd<'_>) -> Result<Vec<String>, Errno> {
    let mut found = Vec::new();
    for entry in Dir::read_from(folder)? {
        let entry = entry?;
        if let Ok(name) = entry.file_name().to_str()
            && name != "."
            && name != ".."
        {
            found.push(name.to_owned());
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use studio_store::UserRole;

    use super::*;

    /// A SQLite core store in a temporary folder, with one user.
    fn store_with_user(dir: &Path) -> (Store, String) {
        let store = Store::open(&dir.join("core.sqlite")).unwrap();
        let user = store
            .create_user("ada", UserRole::Member, "correct horse battery")
            .unwrap();
        (store, user.id)
    }

    fn write(path: &Path, bytes: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn documents_are_imported_under_their_names_once_and_the_folder_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (store, ada) = store_with_user(dir.path());
        let root = dir.path().join("uploads");
        let mine = root.join(&ada);
        write(&mine.join("brief.md"), b"# Brief\n");
        write(&mine.join("brief-7.md"), "é 日本\n".as_bytes());
        write(&mine.join("with-nul.md"), b"a\0b");
        // What a build of ours never stored as a document.
        write(&mine.join(".sasha-tmp-0123"), b"half-written");
        write(&mine.join("notes.txt"), b"not a document name");
        write(&mine.join("latin1.md"), b"caf\xe9");
        write(
            &mine.join("huge.md"),
            &vec![b'x'; crate::MAX_MARKDOWN_BYTES + 1],
        );
        write(&dir.path().join("secret.md"), b"outside the folder");
        symlink(dir.path().join("secret.md"), mine.join("link.md")).unwrap();
        // A user who is gone, and a user folder that is a link.
        write(
            &root.join("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/gone.md"),
            b"x",
        );
        symlink(&mine, root.join("linked-user")).unwrap();
        let listing = |path: &Path| {
            let mut names: Vec<_> = std::fs::read_dir(path)
                .unwrap()
                .map(|entry| entry.unwrap().file_name())
                .collect();
            names.sort();
            names
        };
        let before = listing(&mine);

        let first = import_folder(&store, &root).unwrap();
        assert_eq!(
            first,
            ImportReport {
                imported: 3,
                present: 0,
                orphaned: 1,
                skipped: 6,
            }
        );
        assert_eq!(
            store.upload_names(&ada).unwrap(),
            ["brief-7.md", "brief.md", "with-nul.md"]
        );
        assert_eq!(
            store.upload(&ada, "brief-7.md").unwrap().as_deref(),
            Some("é 日本\n")
        );
        assert_eq!(
            store.upload(&ada, "with-nul.md").unwrap().as_deref(),
            Some("ab")
        );
        assert_eq!(store.upload(&ada, "link.md").unwrap(), None);

        let again = import_folder(&store, &root).unwrap();
        assert_eq!((again.imported, again.present), (0, 3));
        assert_eq!(listing(&mine), before, "the folder is only read");
        assert_eq!(std::fs::read(mine.join("brief.md")).unwrap(), b"# Brief\n");
    }

    #[test]
    fn a_document_the_user_already_has_is_kept_and_a_missing_folder_imports_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (store, ada) = store_with_user(dir.path());
        assert_eq!(
            store.import_upload(&ada, "brief.md", "newer").unwrap(),
            Imported::Stored
        );
        let root = dir.path().join("uploads");
        write(&root.join(&ada).join("brief.md"), b"older");
        let report = import_folder(&store, &root).unwrap();
        assert_eq!((report.imported, report.present), (0, 1));
        assert_eq!(
            store.upload(&ada, "brief.md").unwrap().as_deref(),
            Some("newer")
        );
        assert_eq!(
            import_folder(&store, &dir.path().join("absent")).unwrap(),
            ImportReport::default()
        );
    }
}
