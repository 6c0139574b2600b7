//! The file-system side of the upload areas: `<root>/<user-id>/<name>.md`.
//!
//! The root is opened by path (the operator chose it; it may be a link); the
//! user's folder and every file are opened relative to the descriptor before
//! them with `O_NOFOLLOW`, so a symlink planted in an area is never followed.
//! New documents are written to `.sasha-tmp-<random>` (created `O_EXCL`,
//! mode 0600), `fsync`ed and renamed with `RENAME_NOREPLACE` (or `linkat`
//! where the file system lacks it), so an existing document is never replaced
//! and two concurrent uploads never take the same name.

use std::collections::HashSet;
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::PathBuf;

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use sasha_proto::{AppError, ErrorCode};
use sasha_service::files::{CREATE_FLAGS, FOLDER_FLAGS, READ_FLAGS};

use crate::limits::MAX_MARKDOWN_BYTES;
use crate::names::{self, candidate};

/// One file converted and ready to store.
#[derive(Debug)]
pub(crate) struct Converted {
    /// [`names::display_name`] of the uploaded name.
    pub(crate) original: String,
    /// [`names::safe_stem`] of the original's stem: the first name tried.
    pub(crate) stem: String,
    pub(crate) markdown: String,
}

/// Prefix of a temporary file; hidden, so never a document name.
const TEMP_PREFIX: &str = ".sasha-tmp-";
/// Mode of the root and of every user folder.
const FOLDER_MODE: u32 = 0o700;
/// Mode of every stored document.
const FILE_MODE: u32 = 0o600;
/// Most names tried for one document before giving up.
const MAX_ATTEMPTS: usize = 10_000;

#[derive(Debug)]
pub(super) struct Area {
    /// `UPLOADS_ROOT`.
    root: PathBuf,
}

impl Area {
    pub(super) fn new(root: PathBuf) -> Area {
        Area { root }
    }

    /// Stores every document under a free name, in order; on any failure the
    /// documents this call stored are removed again. Returns the names.
    pub(super) fn store(
        &self,
        user_id: &str,
        documents: &[Converted],
    ) -> Result<Vec<String>, AppError> {
        let root = self
            .open_root(true)?
            .ok_or_else(|| internal("open the uploads root", "missing after creation"))?;
        let folder = open_user(root.as_fd(), user_id, true)?
            .ok_or_else(|| internal("open a user's upload folder", "missing after creation"))?;
        let mut taken: HashSet<String> = folder_names(folder.as_fd())?.into_iter().collect();
        let mut stored = Vec::with_capacity(documents.len());
        for document in documents {
            match write_new(
                folder.as_fd(),
                &document.stem,
                &document.markdown,
                &mut taken,
            ) {
                Ok(name) => stored.push(name),
                Err(error) => {
                    for name in &stored {
                        let _ =
                            rustix::fs::unlinkat(folder.as_fd(), name.as_str(), AtFlags::empty());
                    }
                    sync_folder(folder.as_fd());
                    return Err(error);
                }
            }
        }
        sync_folder(folder.as_fd());
        Ok(stored)
    }

    /// The document `name` (already checked by [`names::is_document_name`]).
    pub(super) fn read(&self, user_id: &str, name: &str) -> Result<Option<String>, AppError> {
        let Some(root) = self.open_root(false)? else {
            return Ok(None);
        };
        let Some(folder) = open_user(root.as_fd(), user_id, false)? else {
            return Ok(None);
        };
        let fd = match rustix::fs::openat(folder.as_fd(), name, READ_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP) => {
                tracing::warn!(name, "a symbolic link in an upload area was not followed");
                return Ok(None);
            }
            Err(error) => return Err(internal("open an uploaded document", error)),
        };
        let stat =
            rustix::fs::fstat(&fd).map_err(|error| internal("stat an uploaded document", error))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Ok(None);
        }
        // Documents are written at most MAX_MARKDOWN_BYTES; read one byte more
        // to notice a file someone else put there.
        let limit = MAX_MARKDOWN_BYTES as u64 + 1;
        let mut bytes = Vec::new();
        File::from(fd)
            .take(limit)
            .read_to_end(&mut bytes)
            .map_err(|error| internal("read an uploaded document", error))?;
        if bytes.len() as u64 >= limit {
            return Err(internal(
                "read an uploaded document",
                "larger than any stored document",
            ));
        }
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| internal("read an uploaded document", "not UTF-8"))
    }

    /// The document names of `user_id`, sorted.
    pub(super) fn list(&self, user_id: &str) -> Result<Vec<String>, AppError> {
        let Some(root) = self.open_root(false)? else {
            return Ok(Vec::new());
        };
        let Some(folder) = open_user(root.as_fd(), user_id, false)? else {
            return Ok(Vec::new());
        };
        let mut documents: Vec<String> = folder_names(folder.as_fd())?
            .into_iter()
            .filter(|name| names::is_document_name(name))
            .filter(|name| {
                rustix::fs::statat(folder.as_fd(), name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|stat| {
                        FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile
                    })
            })
            .collect();
        documents.sort();
        Ok(documents)
    }

    /// The root folder, created (0700) when `create`; `None` when it does not
    /// exist and was not to be created.
    fn open_root(&self, create: bool) -> Result<Option<OwnedFd>, AppError> {
        if create {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(FOLDER_MODE)
                .create(&self.root)
                .map_err(|error| internal("create the uploads root", error))?;
        }
        match rustix::fs::open(
            &self.root,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(root) => Ok(Some(root)),
            Err(Errno::NOENT) => Ok(None),
            Err(error) => Err(internal("open the uploads root", error)),
        }
    }
}

/// The folder of `user_id` (a checked id: one safe segment), created (0700)
/// when `create`.
fn open_user(
    root: BorrowedFd<'_>,
    user_id: &str,
    create: bool,
) -> Result<Option<OwnedFd>, AppError> {
    if create {
        match rustix::fs::mkdirat(root, user_id, Mode::from_raw_mode(FOLDER_MODE)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(error) => return Err(internal("create a user's upload folder", error)),
        }
    }
    match rustix::fs::openat(root, user_id, FOLDER_FLAGS, Mode::empty()) {
        Ok(folder) => Ok(Some(folder)),
        Err(Errno::NOENT) => Ok(None),
        Err(error @ (Errno::LOOP | Errno::NOTDIR)) => Err(internal(
            "open a user's upload folder (a link or not a folder)",
            error,
        )),
        Err(error) => Err(internal("open a user's upload folder", error)),
    }
}

/// Writes `markdown` under the first free name for `stem` and returns it.
fn write_new(
    folder: BorrowedFd<'_>,
    stem: &str,
    markdown: &str,
    taken: &mut HashSet<String>,
) -> Result<String, AppError> {
    let temp = format!("{TEMP_PREFIX}{:016x}", rand::random::<u64>());
    let fd = rustix::fs::openat(
        folder,
        temp.as_str(),
        CREATE_FLAGS,
        Mode::from_raw_mode(FILE_MODE),
    )
    .map_err(|error| internal("create a temporary upload file", error))?;
    let written = (|| -> std::io::Result<()> {
        let mut file = File::from(fd);
        file.write_all(markdown.as_bytes())?;
        file.sync_all()
    })();
    if let Err(error) = written {
        let _ = rustix::fs::unlinkat(folder, temp.as_str(), AtFlags::empty());
        return Err(internal("write a temporary upload file", error));
    }
    for attempt in 1..=MAX_ATTEMPTS {
        let name = candidate(stem, attempt);
        if taken.contains(&name) {
            continue;
        }
        match rename_no_replace(folder, &temp, &name) {
            Ok(()) => {
                taken.insert(name.clone());
                return Ok(name);
            }
            // Taken since the folder was listed (another upload): next name.
            Err(Errno::EXIST) => {
                taken.insert(name);
            }
            Err(error) => {
                let _ = rustix::fs::unlinkat(folder, temp.as_str(), AtFlags::empty());
                return Err(internal("name an uploaded document", error));
            }
        }
    }
    let _ = rustix::fs::unlinkat(folder, temp.as_str(), AtFlags::empty());
    Err(AppError::new(
        ErrorCode::ResourceLimit,
        format!("too many uploaded documents share the name {stem}; rename the file"),
    ))
}

/// Renames `from` to `to` in `folder` unless `to` exists (`EEXIST` then).
fn rename_no_replace(folder: BorrowedFd<'_>, from: &str, to: &str) -> rustix::io::Result<()> {
    match rustix::fs::renameat_with(folder, from, folder, to, RenameFlags::NOREPLACE) {
        Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
            // No RENAME_NOREPLACE here: a hard link fails the same way on an
            // existing name; then the temporary name goes.
            rustix::fs::linkat(folder, from, folder, to, AtFlags::empty())?;
            let _ = rustix::fs::unlinkat(folder, from, AtFlags::empty());
            Ok(())
        }
        other => other,
    }
}

/// Every entry name of `folder` that is UTF-8 (others cannot be documents).
fn folder_names(folder: BorrowedFd<'_>) -> Result<Vec<String>, AppError> {
    let dir = Dir::read_from(folder).map_err(|error| internal("list an upload folder", error))?;
    let mut found = Vec::new();
    for entry in dir {
        let entry = entry.map_err(|error| internal("list an upload folder", error))?;
        if let Ok(name) = entry.file_name().to_str()
            && name != "."
            && name != ".."
        {
            found.push(name.to_owned());
        }
    }
    Ok(found)
}

/// Makes renames and unlinks in `folder` durable; they already happened, so a
/// failure is logged, not reported.
fn sync_folder(folder: BorrowedFd<'_>) {
    if let Err(error) = rustix::fs::fsync(folder) {
        tracing::warn!(%error, "cannot sync an upload folder");
    }
}

fn internal(operation: &'static str, error: impl std::fmt::Display) -> AppError {
    let refused = AppError::from_code(ErrorCode::Internal);
    tracing::error!(
        diagnostic_id = %refused.diagnostic_id,
        operation,
        %error,
        "upload area operation failed"
    );
    refused
}
