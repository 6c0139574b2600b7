//! The source files of app packages (`<DOCS_ROOT>/apps/<id>/`), as the six MCP
//! source tools see them: list, read, write, edit and delete, with versions
//! (sha256 of the exact bytes) for optimistic concurrency.
//!
//! Pure and blocking: no gRPC, no audit, no catalogue refresh (the caller does
//! those, on a blocking thread). Error messages name package-relative paths only.
//!
//! What it must never do (security catalogue, section (e)):
//!
//! - **Leave the package or follow a link.** Nothing is ever opened by a path
//!   with more than one component: the apps folder is opened, then the app
//!   folder, then each folder segment, then the file, every step relative to
//!   the folder before it with `O_NOFOLLOW` (and `openat2` with
//!   `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` when the
//!   kernel has it). A symlink anywhere in the way, swapped in at any moment, is
//!   refused rather than followed. The walk is one segment at a time even with
//!   `openat2` because a write needs every folder's descriptor anyway: to create
//!   missing folders with `mkdirat` and to look for colliding names.
//! - **Change a file in place.** A write goes to a fresh `.sasha-tmp-<random>`
//!   file created with `O_EXCL | O_NOFOLLOW` in the target's folder, is
//!   `fsync`ed and renamed over the target within that folder's descriptor, so a
//!   hard link or a symlink planted at the target is replaced, never written
//!   through. Hard-linked targets are refused outright all the same.
//! - **Accept a path a person or another OS could read differently.** See
//!   [`PathRule`]: traversal, absolute and drive paths, escapes, control and
//!   invisible characters, look-alike separators, Windows device names, non-NFC
//!   or compatibility characters, and names that only differ by case or
//!   normalisation from an existing entry.
//!
//! The limits are the package validator's, so a file the tools accept is one the
//! validator reads (whether it then *validates* is reported, never enforced).
//!
//! Text files are read and written as they are. Binary assets (the validator's
//! [`BINARY_EXTENSIONS`]: PNG, JPEG, WebP, GIF, WOFF2) are read as base64 with
//! `encoding: "base64"`, and a write of one must come base64-encoded and be a
//! valid asset of its extension ([`content_bytes`]); `editAppFile` is for text.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;
use sasha_proto::{AppError, ErrorCode};
use sasha_service::files::{CREATE_FLAGS, FOLDER_FLAGS, READ_FLAGS};
use serde::Serialize;
use sha2::{Digest as _, Sha256};
use unicode_normalization::UnicodeNormalization as _;

/// Most bytes one file may hold (the validator's limit).
pub const MAX_FILE_BYTES: u64 = sasha_package::source::MAX_FILE_BYTES;
/// Most bytes all listable files of a package may hold together.
pub const MAX_PACKAGE_BYTES: u64 = sasha_package::source::MAX_TOTAL_BYTES;
/// Most listable files a package may hold.
pub const MAX_FILES: usize = sasha_package::source::MAX_FILES;
/// Most segments of a file's path (`a/b/c/d.svg` has 4).
pub const MAX_DEPTH: usize = sasha_package::source::MAX_DEPTH;
/// The extensions (without the dot) of text source files.
pub const TEXT_EXTENSIONS: [&str; 10] = sasha_package::source::TEXT_EXTENSIONS;
/// The extensions (without the dot) of binary assets, read and written as
/// base64.
pub const BINARY_EXTENSIONS: [&str; 6] = sasha_package::source::BINARY_EXTENSIONS;
/// The one `encoding` the tools know: the content is the file's bytes in
/// standard base64.
pub const BASE64: &str = "base64";

/// Most bytes of a whole path.
const MAX_PATH_BYTES: usize = 1024;
/// Most bytes of one path segment (the common file-system name limit).
const MAX_SEGMENT_BYTES: usize = 255;
/// Most entries read from one folder; a bigger folder is not a package the
/// tools can have made, and answering for it would cost without bound.
const MAX_FOLDER_ENTRIES: usize = 1024;
/// Most entries visited by one walk of a whole package.
const MAX_SCANNED_ENTRIES: usize = 4096;
/// The manifest, which [`SourceTree::delete`] refuses to remove.
const MANIFEST: &str = "APP.md";
/// Prefix of the temporary file a write renames into place; hidden, so a
/// leftover one is never listed.
const TEMP_PREFIX: &str = ".sasha-tmp-";

/// A last check of a change, run under the app's lock just before it is
/// applied, with the package path and the file's new bytes (`None`: deleted;
/// text files' bytes are UTF-8). An error refuses the change and is its answer.
pub type Vet<'a> = &'a (dyn Fn(&str, Option<&[u8]>) -> Result<(), AppError> + Sync);

/// The source folders below `<DOCS_ROOT>/apps`.
#[derive(Debug)]
pub struct SourceTree {
    /// `<DOCS_ROOT>/apps`. Opened afresh by every call (the one open that follows
    /// links: the operator chose this path); everything below it is opened
    /// relative to it, one segment at a time.
    apps_dir: PathBuf,
    /// One lock per app id. A mutation holds its app's lock from reading the
    /// current version until the rename (or unlink) is done, so of two writers
    /// holding the same expectedVersion exactly one succeeds. Reads take no
    /// lock: a rename is atomic, so they see the old file or the new one.
    /// Entries no call holds are dropped whenever another app's lock is taken.
    locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    /// Whether to open with `openat2` (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`)
    /// before plain `openat` + `O_NOFOLLOW`. Cleared for good the first time the
    /// kernel (or a seccomp filter) answers `ENOSYS` or `EPERM`; both ways open
    /// one segment at a time, so both are safe.
    openat2: AtomicBool,
}

/// One file of [`SourceTree::list`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileEntry {
    /// Package-relative, `/`-separated.
    pub path: String,
    pub bytes: u64,
    /// sha256 hex of the exact bytes; `None` above [`MAX_FILE_BYTES`].
    pub version: Option<String>,
    /// Whether the write tools accept this file: a path the rules allow (a
    /// text or binary asset extension included), at most [`MAX_FILE_BYTES`],
    /// not hard-linked.
    pub editable: bool,
}

/// One file of [`SourceTree::read`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileContent {
    pub path: String,
    /// The text, or for a binary asset its bytes in base64.
    pub content: String,
    /// Size of the file itself (not of its base64).
    pub bytes: u64,
    /// sha256 hex of the exact bytes: the expectedVersion of the next change.
    pub version: String,
    /// [`BASE64`] for a binary asset; absent for text, so text reads are
    /// exactly what they always were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding: Option<&'static str>,
}

/// Whether the tools treat `path` as a binary asset (by its extension).
pub fn is_binary(path: &str) -> bool {
    sasha_package::source::is_binary_path(path)
}

/// The bytes a write's `content` stands for at `path`, with the call's
/// `encoding`: text paths take text as it is (no encoding); binary asset
/// paths take base64 (`encoding: "base64"`; ASCII whitespace between the
/// characters is ignored, padding optional) whose bytes must be a valid asset
/// of the extension, checked by the package validator's own asset rules.
/// Every refusal is APP_INPUT_INVALID with `details.cause`: `ENCODING_UNKNOWN`,
/// `ENCODING_REQUIRED`, `ENCODING_NOT_FOR_TEXT`, `BASE64_INVALID`, or the
/// asset diagnostic (`ASSET_IMAGE_INVALID`, `ASSET_IMAGE_TOO_LARGE`,
/// `ASSET_FONT_INVALID`, `ASSET_FONT_TOO_LARGE`, also in `details.diagnostics`).
pub fn content_bytes(
    path: &str,
    content: &str,
    encoding: Option<&str>,
) -> Result<Vec<u8>, AppError> {
    let refuse = |cause: &str, message: String| {
        invalid(message).with_details(serde_json::json!({"cause": cause}))
    };
    if let Some(other) = encoding.filter(|encoding| *encoding != BASE64) {
        return Err(refuse(
            "ENCODING_UNKNOWN",
            format!(
                "encoding {:?} is not known; the only encoding is \"base64\", for binary assets",
                other.chars().take(40).collect::<String>()
            ),
        ));
    }
    match (is_binary(path), encoding.is_some()) {
        (false, false) => Ok(content.as_bytes().to_vec()),
        (false, true) => Err(refuse(
            "ENCODING_NOT_FOR_TEXT",
            format!(
                "{path} is a text file; send its text as it is, without encoding (base64 is only for {})",
                binary_extensions()
            ),
        )),
        (true, false) => Err(refuse(
            "ENCODING_REQUIRED",
            format!(
                "{path} is a binary asset; send its bytes base64-encoded with encoding: \"base64\""
            ),
        )),
        (true, true) => {
            // At most what a file may hold, before decoding anything.
            let encoded: String = content
                .chars()
                .filter(|c| !c.is_ascii_whitespace())
                .collect();
            if encoded.len() as u64 > MAX_FILE_BYTES.div_ceil(3) * 4 {
                return Err(AppError::new(
                    ErrorCode::ResourceLimit,
                    format!(
                        "a file may hold at most {MAX_FILE_BYTES} bytes; this base64 holds more"
                    ),
                ));
            }
            let bytes = sasha_package::source::base64_bytes(&encoded).ok_or_else(|| {
                refuse(
                    "BASE64_INVALID",
                    format!(
                        "content is not valid base64 (standard alphabet A-Z a-z 0-9 + /, = padding); encode the bytes of {path} again"
                    ),
                )
            })?;
            if let Err(refused) = sasha_package::asset::judge(path, &bytes) {
                return Err(invalid(format!("{path}: {}", refused.reason)).with_details(
                    serde_json::json!({
                        "cause": refused.code,
                        "diagnostics": [{"file": path, "code": refused.code, "reason": refused.reason}],
                    }),
                ));
            }
            Ok(bytes)
        }
    }
}

fn binary_extensions() -> String {
    BINARY_EXTENSIONS
        .iter()
        .map(|extension| format!(".{extension}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What one mutation did: package-relative path and sha256 hex of the bytes
/// before and after (None = absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl SourceTree {
    pub fn new(apps_dir: &Path) -> SourceTree {
        SourceTree {
            apps_dir: apps_dir.to_owned(),
            locks: Mutex::default(),
            openat2: AtomicBool::new(true),
        }
    }

    /// Every file of the package (text and binary assets) as the validator
    /// reads a folder (its rules, its limits), for checking what a change would
    /// make of it.
    pub fn package_source(&self, app_id: &str) -> sasha_package::source::PackageSource {
        let mut diagnostics = sasha_package::Diagnostics::new();
        sasha_package::source::read_package(&self.apps_dir.join(app_id), &mut diagnostics)
    }

    /// Every listable file of the package, sorted by path: regular files only,
    /// at most [`MAX_DEPTH`] segments deep; names starting with `.`, symlinks and
    /// names that are not UTF-8 are left out (links are never followed).
    pub fn list(&self, app_id: &str) -> Result<Vec<FileEntry>, AppError> {
        let app = self.open_app(app_id)?;
        let files = self.scan(app, true)?;
        Ok(files
            .into_iter()
            .map(|file| {
                let editable =
                    file.version.is_some() && !file.hard_linked && check_path(&file.path).is_ok();
                FileEntry {
                    path: file.path,
                    bytes: file.bytes,
                    version: file.version,
                    editable,
                }
            })
            .collect())
    }

    /// One file: a path the rules allow, at most [`MAX_FILE_BYTES`]; a text
    /// file must be UTF-8, a binary asset comes back as base64 (whatever its
    /// bytes are, so a broken asset can be inspected and replaced).
    pub fn read(&self, app_id: &str, path: &str) -> Result<FileContent, AppError> {
        use base64::Engine as _;
        let path = SourcePath::parse(path)?;
        let app = self.open_app(app_id)?;
        let located = self.locate(app, &path)?;
        let bytes = match located.file {
            Some(file) => file.contents(path.text)?.to_vec(),
            None => return Err(not_found(path.text)),
        };
        let version = version_of(&bytes);
        let size = bytes.len() as u64;
        let (content, encoding) = if is_binary(path.text) {
            (
                base64::engine::general_purpose::STANDARD.encode(&bytes),
                Some(BASE64),
            )
        } else {
            let text = String::from_utf8(bytes)
                .map_err(|_| invalid(format!("{} is not UTF-8 text", path.text)))?;
            (text, None)
        };
        Ok(FileContent {
            path: path.text.to_owned(),
            content,
            bytes: size,
            version,
            encoding,
        })
    }

    /// Creates or replaces with `content`, the file's exact bytes (see
    /// [`content_bytes`]; a text path's must be UTF-8). `expected_version` is
    /// required when the file exists (APP_CONFLICT if missing or different);
    /// when given for a file that does not exist → APP_CONFLICT too.
    pub fn write(
        &self,
        app_id: &str,
        path: &str,
        content: impl AsRef<[u8]>,
        expected_version: Option<&str>,
        vet: Vet<'_>,
    ) -> Result<Change, AppError> {
        let content = content.as_ref();
        let path = SourcePath::parse(path)?;
        check_content(&path, content)?;
        let app = self.open_app(app_id)?;
        let lock = self.app_lock(app_id);
        let _held = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut located = self.locate(app, &path)?;
        let current = match &located.file {
            Some(file) => Some(file.mutable_version(path.text)?),
            None => None,
        };
        let before = write_expectation(path.text, current, expected_version)?;
        if before.is_none() {
            self.check_collision(&located, &path)?;
        }
        let old_bytes = located.file.as_ref().map(|file| file.bytes);
        self.check_package_limits(&located.folders[0], old_bytes, content.len() as u64)?;
        vet(path.text, Some(content))?;
        self.create_missing_folders(&mut located, &path)?;
        self.replace(located.parent(), &path, content)?;
        Ok(Change {
            path: path.text.to_owned(),
            before,
            after: Some(version_of(content)),
        })
    }

    /// Exact `old` → `new` replacement that must match exactly once (0 or >1
    /// matches → APP_INPUT_INVALID saying how many matched); `old` non-empty.
    /// Overlapping occurrences count as separate matches.
    pub fn edit(
        &self,
        app_id: &str,
        path: &str,
        old: &str,
        new: &str,
        expected_version: &str,
        vet: Vet<'_>,
    ) -> Result<Change, AppError> {
        let path = SourcePath::parse(path)?;
        check_editable(&path, old)?;
        let app = self.open_app(app_id)?;
        let lock = self.app_lock(app_id);
        let _held = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let located = self.locate(app, &path)?;
        let Some(file) = &located.file else {
            return Err(not_found(path.text));
        };
        let before = file.mutable_version(path.text)?;
        check_expected(path.text, &before, expected_version)?;
        let edited = edited_text(path.text, file.contents(path.text)?, old, new)?;
        self.check_package_limits(&located.folders[0], Some(file.bytes), edited.len() as u64)?;
        vet(path.text, Some(edited.as_bytes()))?;
        self.replace(located.parent(), &path, edited.as_bytes())?;
        Ok(Change {
            path: path.text.to_owned(),
            before: Some(before),
            after: Some(version_of(edited.as_bytes())),
        })
    }

    /// `APP.md` cannot be deleted (APP_INPUT_INVALID). Removes now-empty parent
    /// folders inside the package.
    pub fn delete(
        &self,
        app_id: &str,
        path: &str,
        expected_version: &str,
        vet: Vet<'_>,
    ) -> Result<Change, AppError> {
        let path = SourcePath::parse(path)?;
        check_deletable(&path)?;
        let app = self.open_app(app_id)?;
        let lock = self.app_lock(app_id);
        let _held = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let located = self.locate(app, &path)?;
        let Some(file) = &located.file else {
            return Err(not_found(path.text));
        };
        let before = file.mutable_version(path.text)?;
        check_expected(path.text, &before, expected_version)?;
        vet(path.text, None)?;
        let parent = located.parent();
        // unlinkat never follows a link: whatever the name holds now goes.
        rustix::fs::unlinkat(parent, path.file_name(), AtFlags::empty())
            .map_err(|error| internal("delete", path.text, error))?;
        sync_folder(parent, path.text);
        // Remove the folders this left empty, deepest first; stop at the first
        // that still holds anything (ENOTEMPTY), never the package itself.
        let folders = path.folders();
        for depth in (1..located.folders.len()).rev() {
            let removed = rustix::fs::unlinkat(
                &located.folders[depth - 1],
                folders[depth - 1],
                AtFlags::REMOVEDIR,
            );
            if removed.is_err() {
                break;
            }
        }
        Ok(Change {
            path: path.text.to_owned(),
            before: Some(before),
            after: None,
        })
    }

    /// Runs `change` holding `app_id`'s mutation lock, so a change made
    /// outside the tree (a revert's swap of the whole package) never
    /// interleaves with a write, edit or delete of the same app.
    pub fn with_app_lock<T>(&self, app_id: &str, change: impl FnOnce() -> T) -> T {
        let lock = self.app_lock(app_id);
        let _held = lock.lock().unwrap_or_else(PoisonError::into_inner);
        change()
    }

    /// The lock of one app's mutations.
    fn app_lock(&self, app_id: &str) -> Arc<Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        locks.retain(|id, lock| id == app_id || Arc::strong_count(lock) > 1);
        locks.entry(app_id.to_owned()).or_default().clone()
    }

    /// Opens `name` (one segment, no `/`) in `dir`, never following a link.
    ///
    /// The walk is rustix's `openat`/`openat2`, not `cap-std` (4.0.3, checked
    /// on a scratch tree): its `Dir` is a sandbox that keeps a path beneath
    /// the folder but follows symlinks inside it (`Dir::open("link/sub/f")`
    /// with `link` a symlink to a sibling folder opens the file), and its
    /// no-follow opens (`cap-fs-ext`'s `open_dir_nofollow`, `FollowSymlinks::No`)
    /// cover only the last segment (`open_dir_nofollow("link/sub")` succeeds).
    /// Refusing every link would still take this segment-by-segment walk,
    /// only through another layer; and the renames beside it (`package_dir`,
    /// `history`, `seed`) need `renameat2` with
    /// `RENAME_NOREPLACE` or `RENAME_EXCHANGE`, which cap-std does not offer.
    fn open_in(
        &self,
        dir: BorrowedFd<'_>,
        name: &str,
        flags: OFlags,
        mode: Mode,
    ) -> rustix::io::Result<OwnedFd> {
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let mut attempts = 0;
        while self.openat2.load(Ordering::Relaxed) {
            match rustix::fs::openat2(dir, name, flags | OFlags::NOFOLLOW, mode, resolve) {
                Err(Errno::NOSYS | Errno::PERM) => self.openat2.store(false, Ordering::Relaxed),
                // The entry was moved out of `dir` while it was being opened
                // (the kernel's final "still beneath?" check): try again a
                // few times, then the caller refuses (see [`moved`]).
                Err(Errno::XDEV | Errno::AGAIN) if attempts < 3 => attempts += 1,
                Err(Errno::AGAIN) => return Err(Errno::XDEV),
                opened => return opened,
            }
        }
        rustix::fs::openat(dir, name, flags | OFlags::NOFOLLOW, mode)
    }

    /// The package folder of `app_id`, which must be a real folder.
    fn open_app(&self, app_id: &str) -> Result<OwnedFd, AppError> {
        if sasha_contract::AppId::parse(app_id).is_err() {
            return Err(invalid(
                "app must be an app id in lowercase kebab-case, at most 60 characters",
            ));
        }
        let apps = match rustix::fs::open(
            &self.apps_dir,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(apps) => apps,
            Err(Errno::NOENT) => return Err(not_managed()),
            Err(error) => return Err(internal("open the apps folder", ".", error)),
        };
        match self.open_in(apps.as_fd(), app_id, FOLDER_FLAGS, Mode::empty()) {
            Ok(app) => Ok(app),
            Err(Errno::NOENT) => Err(not_managed()),
            Err(Errno::LOOP | Errno::NOTDIR) if is_symlink(apps.as_fd(), app_id) => Err(invalid(
                "the app folder is a symbolic link; the source tools work only on a real folder",
            )),
            Err(Errno::LOOP | Errno::NOTDIR) => Err(not_managed()),
            Err(Errno::XDEV) => Err(moved("the app folder")),
            Err(error) => Err(internal("open the app folder", ".", error)),
        }
    }

    /// Opens the folders of `path` below `app` and, when they all exist, the file.
    fn locate(&self, app: OwnedFd, path: &SourcePath<'_>) -> Result<Located, AppError> {
        let mut folders = vec![app];
        for (depth, segment) in path.folders().iter().enumerate() {
            let dir = folders[depth].as_fd();
            match self.open_in(dir, segment, FOLDER_FLAGS, Mode::empty()) {
                Ok(folder) => folders.push(folder),
                Err(Errno::NOENT) => {
                    return Ok(Located {
                        folders,
                        file: None,
                    });
                }
                Err(Errno::LOOP | Errno::NOTDIR) => {
                    return Err(not_a_folder(dir, segment, &path.prefix(depth + 1)));
                }
                Err(Errno::XDEV) => return Err(moved(&path.prefix(depth + 1))),
                Err(error) => return Err(internal("open a folder", path.text, error)),
            }
        }
        let parent = folders[folders.len() - 1].as_fd();
        let file = match self.open_regular(parent, path.file_name()) {
            Ok(Opened::File(file, stat)) => Some(ExistingFile::read(file, &stat, path.text)?),
            Ok(Opened::Missing) => None,
            Ok(Opened::Symlink) => {
                return Err(invalid(format!(
                    "{} is a symbolic link; the source tools never follow links",
                    path.text
                )));
            }
            Ok(Opened::Other) => {
                return Err(invalid(format!("{} is not a regular file", path.text)));
            }
            Ok(Opened::Moved) => return Err(moved(path.text)),
            Err(error) => return Err(internal("open a file", path.text, error)),
        };
        Ok(Located { folders, file })
    }

    /// Opens `name` in `dir` for reading if it is a regular file. The `statat`
    /// first keeps a device or FIFO from ever being opened; the `fstat` after
    /// checks what was actually opened.
    fn open_regular(&self, dir: BorrowedFd<'_>, name: &str) -> rustix::io::Result<Opened> {
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
                FileType::RegularFile => {}
                FileType::Symlink => return Ok(Opened::Symlink),
                _ => return Ok(Opened::Other),
            },
            Err(Errno::NOENT) => return Ok(Opened::Missing),
            Err(error) => return Err(error),
        }
        let fd = match self.open_in(dir, name, READ_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(Opened::Missing),
            Err(Errno::LOOP) => return Ok(Opened::Symlink),
            Err(Errno::XDEV) => return Ok(Opened::Moved),
            Err(error) => return Err(error),
        };
        let stat = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Ok(Opened::Other);
        }
        Ok(Opened::File(File::from(fd), stat))
    }

    /// Refuses a new name that differs from an existing entry of the same
    /// folder only by case or Unicode normalisation (see [`collision_key`]).
    /// Only names this write would create are checked: the file, or the first
    /// missing folder (the folders below it are new and empty).
    fn check_collision(&self, located: &Located, path: &SourcePath<'_>) -> Result<(), AppError> {
        let depth = located.folders.len() - 1;
        let name = path.segments[depth];
        let key = collision_key(name);
        let folder = located.folders[depth].as_fd();
        for existing in folder_names(folder, &path.prefix(depth))? {
            if existing.as_slice() == name.as_bytes() {
                continue;
            }
            let existing = String::from_utf8_lossy(&existing);
            if collision_key(&existing) == key {
                let prefix = path.prefix(depth);
                let shown = if prefix.is_empty() {
                    existing.escape_debug().to_string()
                } else {
                    format!("{prefix}/{}", existing.escape_debug())
                };
                return Err(conflict(format!(
                    "{} collides with existing {shown} (names may not differ only by case or Unicode form)",
                    path.prefix(depth + 1)
                )));
            }
        }
        Ok(())
    }

    /// Refuses a change that would take the package past [`MAX_FILES`] or
    /// [`MAX_PACKAGE_BYTES`] (counting listable files). A change that grows
    /// neither count is allowed even in a package already over a limit, so a
    /// package made too big on disk can still be repaired.
    fn check_package_limits(
        &self,
        app: &OwnedFd,
        old_bytes: Option<u64>,
        new_bytes: u64,
    ) -> Result<(), AppError> {
        let app = app
            .try_clone()
            .map_err(|error| internal("duplicate a folder descriptor", ".", error))?;
        let files = self.scan(app, false)?;
        let total: u64 = files.iter().map(|file| file.bytes).sum();
        check_limits(files.len(), total, old_bytes, new_bytes)
    }

    /// Creates the folders of `path` that [`SourceTree::locate`] found missing,
    /// and opens each the same way (never following a link planted meanwhile).
    fn create_missing_folders(
        &self,
        located: &mut Located,
        path: &SourcePath<'_>,
    ) -> Result<(), AppError> {
        let folders = path.folders();
        while located.folders.len() <= folders.len() {
            let depth = located.folders.len() - 1;
            let segment = folders[depth];
            let dir = located.folders[depth].as_fd();
            match rustix::fs::mkdirat(dir, segment, Mode::from_bits_truncate(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(error) => return Err(internal("create a folder", path.text, error)),
            }
            match self.open_in(dir, segment, FOLDER_FLAGS, Mode::empty()) {
                Ok(folder) => located.folders.push(folder),
                Err(Errno::LOOP | Errno::NOTDIR) => {
                    return Err(not_a_folder(dir, segment, &path.prefix(depth + 1)));
                }
                Err(Errno::XDEV) => return Err(moved(&path.prefix(depth + 1))),
                Err(error) => return Err(internal("open a new folder", path.text, error)),
            }
        }
        Ok(())
    }

    /// Writes `bytes` to a new temporary file in `dir`, syncs it and renames it
    /// over the file name of `path`; the temporary file is removed on failure.
    fn replace(
        &self,
        dir: BorrowedFd<'_>,
        path: &SourcePath<'_>,
        bytes: &[u8],
    ) -> Result<(), AppError> {
        let temp = format!("{TEMP_PREFIX}{:016x}", rand::random::<u64>());
        let fd = match self.open_in(dir, &temp, CREATE_FLAGS, Mode::from_bits_truncate(0o644)) {
            Ok(fd) => fd,
            Err(Errno::XDEV) => return Err(moved(path.text)),
            Err(error) => return Err(internal("create a temporary file", path.text, error)),
        };
        let written = (|| -> std::io::Result<()> {
            let mut file = File::from(fd);
            file.write_all(bytes)?;
            file.sync_all()?;
            drop(file);
            rustix::fs::renameat(dir, temp.as_str(), dir, path.file_name())?;
            Ok(())
        })();
        if let Err(error) = written {
            let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
            return Err(internal("write a file", path.text, error));
        }
        sync_folder(dir, path.text);
        Ok(())
    }

    /// Walks the package under the listing rules; with `hash`, reads and hashes
    /// every file of at most [`MAX_FILE_BYTES`]. Sorted by path.
    fn scan(&self, app: OwnedFd, hash: bool) -> Result<Vec<ScannedFile>, AppError> {
        let mut files = Vec::new();
        let mut visited = 0usize;
        // (folder, its package-relative path, its number of segments)
        let mut pending = vec![(app, String::new(), 0usize)];
        while let Some((folder, prefix, depth)) = pending.pop() {
            let names = folder_names(folder.as_fd(), &prefix)?;
            visited += names.len();
            if visited > MAX_SCANNED_ENTRIES {
                return Err(AppError::new(
                    ErrorCode::ResourceLimit,
                    format!(
                        "the package folder holds more than {MAX_SCANNED_ENTRIES} entries; remove what is not part of the app"
                    ),
                ));
            }
            for name in names {
                // A name that is not UTF-8 cannot be named by any tool call.
                let Ok(name) = String::from_utf8(name) else {
                    continue;
                };
                if name.starts_with('.') {
                    continue;
                }
                let path = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}/{name}")
                };
                let stat =
                    match rustix::fs::statat(&folder, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(stat) => stat,
                        Err(Errno::NOENT) => continue,
                        Err(error) => return Err(internal("inspect a file", &path, error)),
                    };
                match FileType::from_raw_mode(stat.st_mode) {
                    FileType::Directory if depth + 1 < MAX_DEPTH => {
                        match self.open_in(folder.as_fd(), &name, FOLDER_FLAGS, Mode::empty()) {
                            Ok(child) => pending.push((child, path, depth + 1)),
                            // Gone or swapped for a link since the stat: skip.
                            Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR | Errno::XDEV) => {}
                            Err(error) => return Err(internal("open a folder", &path, error)),
                        }
                    }
                    FileType::RegularFile if !hash => files.push(ScannedFile {
                        path,
                        bytes: file_size(&stat),
                        version: None,
                        hard_linked: stat.st_nlink > 1,
                    }),
                    FileType::RegularFile => {
                        let existing = match self.open_regular(folder.as_fd(), &name) {
                            Ok(Opened::File(file, stat)) => ExistingFile::read(file, &stat, &path)?,
                            Ok(_) => continue,
                            Err(error) => return Err(internal("open a file", &path, error)),
                        };
                        files.push(ScannedFile {
                            version: existing.content.as_deref().map(version_of),
                            bytes: existing.bytes,
                            hard_linked: existing.hard_linked,
                            path,
                        });
                    }
                    _ => {}
                }
            }
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(files)
    }
}

/// A path that passed every [`PathRule`], split into its segments.
pub(crate) struct SourcePath<'a> {
    pub(crate) text: &'a str,
    segments: Vec<&'a str>,
}

impl<'a> SourcePath<'a> {
    pub(crate) fn parse(text: &'a str) -> Result<SourcePath<'a>, AppError> {
        let segments = check_path(text).map_err(|rule| invalid(rule.to_string()))?;
        Ok(SourcePath { text, segments })
    }

    /// The folder segments (all but the last).
    fn folders(&self) -> &[&'a str] {
        &self.segments[..self.segments.len() - 1]
    }

    fn file_name(&self) -> &'a str {
        self.segments[self.segments.len() - 1]
    }

    /// The first `count` segments joined again.
    fn prefix(&self, count: usize) -> String {
        self.segments[..count].join("/")
    }
}

/// The open folders of a path, and the file when it exists.
struct Located {
    /// The package folder first, then one per existing folder segment; shorter
    /// than `1 + folders` when a folder is missing (then `file` is `None`).
    folders: Vec<OwnedFd>,
    file: Option<ExistingFile>,
}

impl Located {
    /// The deepest open folder: the file's own once every folder exists.
    fn parent(&self) -> BorrowedFd<'_> {
        self.folders[self.folders.len() - 1].as_fd()
    }
}

/// What [`SourceTree::open_regular`] found.
enum Opened {
    File(File, Stat),
    Missing,
    Symlink,
    Other,
    /// Moved out of its folder while being opened (`openat2`'s `EXDEV`).
    Moved,
}

/// An existing regular file, read through its descriptor.
struct ExistingFile {
    /// The exact bytes; `None` when the file holds more than [`MAX_FILE_BYTES`].
    content: Option<Vec<u8>>,
    bytes: u64,
    hard_linked: bool,
}

impl ExistingFile {
    /// Reads at most one byte past the limit (a file may grow after `fstat`).
    fn read(file: File, stat: &Stat, path: &str) -> Result<ExistingFile, AppError> {
        let hard_linked = stat.st_nlink > 1;
        if file_size(stat) > MAX_FILE_BYTES {
            return Ok(ExistingFile {
                content: None,
                bytes: file_size(stat),
                hard_linked,
            });
        }
        let mut content = Vec::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut content)
            .map_err(|error| internal("read a file", path, error))?;
        let bytes = content.len() as u64;
        Ok(ExistingFile {
            content: (bytes <= MAX_FILE_BYTES).then_some(content),
            bytes,
            hard_linked,
        })
    }

    fn contents(&self, path: &str) -> Result<&[u8], AppError> {
        self.content.as_deref().ok_or_else(|| too_large(path))
    }

    /// The version a mutation checks; refuses what the tools may not change.
    fn mutable_version(&self, path: &str) -> Result<String, AppError> {
        if self.hard_linked {
            return Err(invalid(format!(
                "{path} is hard-linked to another file; the source tools do not change hard-linked files"
            )));
        }
        Ok(version_of(self.contents(path)?))
    }
}

/// One listable file found by [`SourceTree::scan`].
struct ScannedFile {
    path: String,
    bytes: u64,
    version: Option<String>,
    hard_linked: bool,
}

/// A rule a source path breaks (security catalogue E1–E5, E8, E9). The message
/// names the rule, never the path (which may hold anything).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathRule {
    Empty,
    TooLong,
    ControlOrInvisible,
    Backslash,
    Percent,
    Colon,
    LookalikeSeparator,
    WildcardOrQuote,
    Absolute,
    Tilde,
    TrailingSlash,
    EmptySegment,
    DotSegment,
    Hidden,
    SegmentTooLong,
    TrailingDotOrSpace,
    WindowsReserved,
    TooDeep,
    NotNfc,
    Compatibility,
    Extension,
}

impl fmt::Display for PathRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let message = match self {
            PathRule::Empty => "path is empty",
            PathRule::TooLong => "path is longer than 1024 bytes",
            PathRule::ControlOrInvisible => {
                "path holds a control, invisible or direction-changing character"
            }
            PathRule::Backslash => "path holds a backslash; separate folders with /",
            PathRule::Percent => {
                "path holds a percent sign; escapes are not decoded, write the plain name"
            }
            PathRule::Colon => "path holds a colon (drive letters, URLs and streams are refused)",
            PathRule::LookalikeSeparator => {
                "path holds a character that looks like / or \\ (for example U+2215); use plain characters"
            }
            PathRule::WildcardOrQuote => {
                "path holds one of * ? < > | \" which are refused in names"
            }
            PathRule::Absolute => "path is absolute; give it relative to the package, e.g. app.js",
            PathRule::Tilde => "path must not start with ~",
            PathRule::TrailingSlash => "path must not end with /; name a file",
            PathRule::EmptySegment => "path has an empty segment (//)",
            PathRule::DotSegment => {
                "path has a . or .. segment; the source tools never leave the package"
            }
            PathRule::Hidden => {
                "path has a hidden name (starting with .), which the source tools refuse"
            }
            PathRule::SegmentTooLong => "path has a segment longer than 255 bytes",
            PathRule::TrailingDotOrSpace => "path has a segment that ends with a dot or a space",
            PathRule::WindowsReserved => {
                "path has a name reserved on Windows (CON, PRN, AUX, NUL, COM0-9, LPT0-9, CONIN$, CONOUT$)"
            }
            PathRule::TooDeep => "path has more than 4 segments",
            PathRule::NotNfc => "path is not in Unicode NFC form; send it NFC-normalised",
            PathRule::Compatibility => {
                "path holds compatibility characters (for example fullwidth letters, ligatures or superscripts); use plain characters"
            }
            PathRule::Extension => {
                "path must name a text file (.md .html .css .js .sql .yaml .yml .json .txt .svg) or an image or font asset (.png .jpg .jpeg .webp .gif .woff2)"
            }
        };
        f.write_str(message)
    }
}

impl PathRule {
    /// The package validator's diagnostic code for a path that breaks this
    /// rule, so a refusal here reads like one of a package folder's.
    pub fn code(self) -> &'static str {
        match self {
            PathRule::Extension => "PATH_EXTENSION",
            PathRule::TooDeep => "PATH_TOO_DEEP",
            _ => "PATH_INVALID_NAME",
        }
    }
}

/// Checks a package-relative source path against every rule and returns its
/// segments. Character rules come first, then the shape, then each segment,
/// then normalisation, then the extension; the first broken rule is reported.
pub fn check_path(path: &str) -> Result<Vec<&str>, PathRule> {
    if path.is_empty() {
        return Err(PathRule::Empty);
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(PathRule::TooLong);
    }
    for c in path.chars() {
        let rule = match c {
            '\\' => PathRule::Backslash,
            '%' => PathRule::Percent,
            ':' => PathRule::Colon,
            '*' | '?' | '<' | '>' | '|' | '"' => PathRule::WildcardOrQuote,
            c if is_control_or_invisible(c) => PathRule::ControlOrInvisible,
            c if is_lookalike_separator(c) => PathRule::LookalikeSeparator,
            _ => continue,
        };
        return Err(rule);
    }
    if path.starts_with('/') {
        return Err(PathRule::Absolute);
    }
    if path.starts_with('~') {
        return Err(PathRule::Tilde);
    }
    if path.ends_with('/') {
        return Err(PathRule::TrailingSlash);
    }
    let segments: Vec<&str> = path.split('/').collect();
    for segment in &segments {
        if segment.is_empty() {
            return Err(PathRule::EmptySegment);
        }
        if *segment == "." || *segment == ".." {
            return Err(PathRule::DotSegment);
        }
        if segment.starts_with('.') {
            return Err(PathRule::Hidden);
        }
        if segment.len() > MAX_SEGMENT_BYTES {
            return Err(PathRule::SegmentTooLong);
        }
        if segment.ends_with('.') || segment.ends_with(' ') {
            return Err(PathRule::TrailingDotOrSpace);
        }
        if is_windows_reserved(segment) {
            return Err(PathRule::WindowsReserved);
        }
    }
    if segments.len() > MAX_DEPTH {
        return Err(PathRule::TooDeep);
    }
    let nfc: String = path.nfc().collect();
    if nfc != path {
        return Err(PathRule::NotNfc);
    }
    // NFKC folds e.g. U+FF0E U+FF0E U+FF0F into `../`; a path that any later
    // NFKC step could change is refused, so none can turn into a traversal.
    if !path.nfkc().eq(path.chars()) {
        return Err(PathRule::Compatibility);
    }
    let file_name = segments[segments.len() - 1];
    let allowed = file_name.rsplit_once('.').is_some_and(|(stem, extension)| {
        !stem.is_empty()
            && (TEXT_EXTENSIONS.contains(&extension) || BINARY_EXTENSIONS.contains(&extension))
    });
    if !allowed {
        return Err(PathRule::Extension);
    }
    Ok(segments)
}

/// Unicode general categories Cc and Cf (Unicode 16), U+2028/U+2029, and the
/// characters the package validator treats as invisible (fillers, variation
/// selectors), so the tools never write a name the validator refuses.
fn is_control_or_invisible(c: char) -> bool {
    c.is_control()
        || sasha_package::source::is_invisible(c)
        || matches!(c,
            '\u{00AD}' | '\u{0600}'..='\u{0605}' | '\u{061C}' | '\u{06DD}' | '\u{070F}'
            | '\u{0890}'..='\u{0891}' | '\u{08E2}' | '\u{180E}' | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}' | '\u{110BD}' | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}' | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0001}' | '\u{E0020}'..='\u{E007F}')
}

/// Characters that render like `/` or `\` but have no compatibility
/// decomposition, so the NFKC rule alone would let them through (U+2215 is
/// the catalogue's example). Look-alikes that NFKC maps to `/`, `\` or `.`
/// (U+FF0F, U+FF3C, U+FE68, U+FF0E, U+2024) fail the NFKC rule.
fn is_lookalike_separator(c: char) -> bool {
    matches!(
        c,
        '\u{2044}' // FRACTION SLASH
            | '\u{2215}' // DIVISION SLASH
            | '\u{2216}' // SET MINUS
            | '\u{27CB}' // MATHEMATICAL RISING DIAGONAL
            | '\u{27CD}' // MATHEMATICAL FALLING DIAGONAL
            | '\u{29F5}' // REVERSE SOLIDUS OPERATOR
            | '\u{29F8}' // BIG SOLIDUS
            | '\u{29F9}' // BIG REVERSE SOLIDUS
            | '\u{FF0F}' // FULLWIDTH SOLIDUS (also fails NFKC)
            | '\u{FF3C}' // FULLWIDTH REVERSE SOLIDUS (also fails NFKC)
    )
}

/// Windows device names, with any extension (`con.html`), with superscript
/// digits (`COM¹`), case-insensitive. The stem is what comes before the first
/// dot, without trailing spaces (`CON .txt` is CON to Windows too).
fn is_windows_reserved(segment: &str) -> bool {
    let stem = segment
        .split('.')
        .next()
        .unwrap_or(segment)
        .trim_end_matches(' ');
    let stem = stem.to_uppercase();
    if matches!(
        stem.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) {
        return true;
    }
    let Some(number) = stem
        .strip_prefix("COM")
        .or_else(|| stem.strip_prefix("LPT"))
    else {
        return false;
    };
    let mut chars = number.chars();
    matches!(
        (chars.next(), chars.next()),
        (Some('0'..='9' | '¹' | '²' | '³'), None)
    )
}

/// The key two names collide on: NFKC, then `to_lowercase`, then NFKC again
/// (lowercasing may denormalise). Simpler than full Unicode case folding
/// (`ß` and `ss` do not collide) but it catches what the catalogue names:
/// `App.js`/`app.js`, NFC/NFD `é.js`, and the Kelvin sign `K` vs `k`.
pub(crate) fn collision_key(name: &str) -> String {
    name.nfkc()
        .collect::<String>()
        .to_lowercase()
        .nfkc()
        .collect()
}

/// How often `needle` occurs in `haystack`, counting overlapping occurrences
/// as 2 at least, and where the first one starts. Linear: one counting pass
/// and one extra search for an occurrence overlapping a single match.
fn match_count(haystack: &str, needle: &str) -> (usize, Option<usize>) {
    let first = haystack.find(needle);
    let count = haystack.matches(needle).count();
    if count == 1
        && let Some(at) = first
    {
        let next = at + haystack[at..].chars().next().map_or(1, char::len_utf8);
        if haystack[next..].contains(needle) {
            return (2, first);
        }
    }
    (count, first)
}

/// The raw names in a folder (without `.` and `..`), at most
/// [`MAX_FOLDER_ENTRIES`].
fn folder_names(folder: BorrowedFd<'_>, prefix: &str) -> Result<Vec<Vec<u8>>, AppError> {
    let shown = if prefix.is_empty() { "." } else { prefix };
    let dir = Dir::read_from(folder).map_err(|error| internal("list a folder", shown, error))?;
    let mut names = Vec::new();
    for entry in dir {
        let entry = entry.map_err(|error| internal("list a folder", shown, error))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if names.len() == MAX_FOLDER_ENTRIES {
            return Err(AppError::new(
                ErrorCode::ResourceLimit,
                format!(
                    "folder {shown} holds more than {MAX_FOLDER_ENTRIES} entries; remove what is not part of the app"
                ),
            ));
        }
        names.push(name.to_vec());
    }
    Ok(names)
}

/// Why `segment` of `dir` could not be opened as a folder.
fn not_a_folder(dir: BorrowedFd<'_>, segment: &str, shown: &str) -> AppError {
    if is_symlink(dir, segment) {
        invalid(format!(
            "{shown} is a symbolic link; the source tools never follow links"
        ))
    } else {
        invalid(format!("{shown} is not a folder"))
    }
}

fn is_symlink(dir: BorrowedFd<'_>, name: &str) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Symlink)
}

/// Makes a rename or unlink in `dir` durable. The change already happened, so
/// a failure is logged rather than reported as a failed change.
fn sync_folder(dir: BorrowedFd<'_>, path: &str) {
    if let Err(error) = rustix::fs::fsync(dir) {
        tracing::warn!(path, %error, "cannot sync an app source folder");
    }
}

fn file_size(stat: &Stat) -> u64 {
    u64::try_from(stat.st_size).unwrap_or(0)
}

pub(crate) fn version_of(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

// --- the rules of a change, wherever the package's files live -------------
// The live folder (SourceTree) and a draft in the core database
// (crate::drafts) apply the same rules through these.

/// A new content for `path`: within [`MAX_FILE_BYTES`], and UTF-8 for a
/// text file.
pub(crate) fn check_content(path: &SourcePath<'_>, content: &[u8]) -> Result<(), AppError> {
    check_file_size(content.len())?;
    if !is_binary(path.text) && std::str::from_utf8(content).is_err() {
        return Err(invalid(format!("{} must be UTF-8 text", path.text)));
    }
    Ok(())
}

/// The version a write replaces, given the file's `current` version (None:
/// absent): `expected` is required when the file exists and must match it,
/// and is refused for a file that does not exist.
pub(crate) fn write_expectation(
    path: &str,
    current: Option<String>,
    expected: Option<&str>,
) -> Result<Option<String>, AppError> {
    match (current, expected) {
        (Some(current), Some(expected)) => {
            check_expected(path, &current, expected)?;
            Ok(Some(current))
        }
        (Some(_), None) => Err(conflict(format!(
            "{path} already exists; read it and pass its version as expectedVersion to replace it"
        ))),
        (None, Some(_)) => Err(conflict(format!(
            "{path} does not exist (any more); write it without expectedVersion to create it"
        ))),
        (None, None) => Ok(None),
    }
}

/// An edit changes text, replacing a non-empty `old`.
pub(crate) fn check_editable(path: &SourcePath<'_>, old: &str) -> Result<(), AppError> {
    if is_binary(path.text) {
        return Err(invalid(format!(
            "{} is a binary asset; editAppFile changes text: replace the whole file with writeAppFile and encoding \"base64\"",
            path.text
        ))
        .with_details(serde_json::json!({"cause": "BINARY_NOT_EDITABLE"})));
    }
    if old.is_empty() {
        return Err(invalid("oldString must not be empty"));
    }
    Ok(())
}

/// `bytes` with the one occurrence of `old` replaced by `new`; 0 or more than
/// one occurrence is refused, saying how many matched.
pub(crate) fn edited_text(
    path: &str,
    bytes: &[u8],
    old: &str,
    new: &str,
) -> Result<String, AppError> {
    let text =
        std::str::from_utf8(bytes).map_err(|_| invalid(format!("{path} is not UTF-8 text")))?;
    let at = match match_count(text, old) {
        (1, Some(at)) => at,
        (0, _) => {
            return Err(invalid(format!(
                "oldString matched 0 times in {path}; it must match exactly once (copy it exactly from a fresh read)"
            )));
        }
        (count, _) => {
            return Err(invalid(format!(
                "oldString matched {count} times in {path}; it must match exactly once (include more of the surrounding text)"
            )));
        }
    };
    let edited = [&text[..at], new, &text[at + old.len()..]].concat();
    check_file_size(edited.len())?;
    Ok(edited)
}

/// Every file but the manifest may be deleted.
pub(crate) fn check_deletable(path: &SourcePath<'_>) -> Result<(), AppError> {
    if path.text == MANIFEST {
        return Err(invalid(
            "APP.md cannot be deleted: it is the app's manifest; edit it instead",
        ));
    }
    Ok(())
}

/// Refuses a change that would take a package of `count` files and `total`
/// bytes past [`MAX_FILES`] or [`MAX_PACKAGE_BYTES`], replacing a file of
/// `old_bytes` (None: a new file) by `new_bytes`. A change that grows
/// neither count is allowed even in a package already over a limit, so a
/// package can always be brought back under.
pub(crate) fn check_limits(
    count: usize,
    total: u64,
    old_bytes: Option<u64>,
    new_bytes: u64,
) -> Result<(), AppError> {
    let count_after = if old_bytes.is_some() {
        count
    } else {
        count + 1
    };
    let total_after = total - old_bytes.unwrap_or(0).min(total) + new_bytes;
    if count_after > MAX_FILES && count_after > count {
        return Err(AppError::new(
            ErrorCode::ResourceLimit,
            format!("a package may hold at most {MAX_FILES} files; it has {count}"),
        ));
    }
    if total_after > MAX_PACKAGE_BYTES && total_after > total {
        return Err(AppError::new(
            ErrorCode::ResourceLimit,
            format!(
                "a package may hold at most {MAX_PACKAGE_BYTES} bytes in all; this change would make it {total_after}"
            ),
        ));
    }
    Ok(())
}

/// Checks a whole package given in memory (a member app's files, for a check,
/// a draft or a deploy) against the rules every file the source tools write
/// obeys, so such a package is one the validator reads whole and a promotion
/// can write under `DOCS_ROOT`: each path passes [`check_path`], no two paths
/// name one file on a disk that ignores case or normalisation
/// ([`collision_key`]), each file holds at most [`MAX_FILE_BYTES`], a text
/// file is UTF-8 without NUL (`sasha_package::source::text_of`), and the
/// package holds at most [`MAX_FILES`] files and [`MAX_PACKAGE_BYTES`] in all.
/// Every broken rule is one diagnostic with the package validator's code; a
/// path that breaks a path rule is shown escaped, since it may hold anything.
pub fn check_package_files(files: &[(String, Vec<u8>)]) -> Vec<sasha_package::Diagnostic> {
    let mut diagnostics = sasha_package::Diagnostics::new();
    let mut keys: HashMap<String, &str> = HashMap::new();
    let mut total: u64 = 0;
    for (path, bytes) in files {
        let size = bytes.len() as u64;
        total = total.saturating_add(size);
        if let Err(rule) = check_path(path) {
            let shown: String = path.escape_debug().take(200).collect();
            diagnostics.push(&shown, None, rule.code(), rule.to_string());
            continue;
        }
        if let Some(first) = keys.insert(collision_key(path), path) {
            diagnostics.push(
                path,
                None,
                "PATH_INVALID_NAME",
                format!(
                    "{path} and {first} would be one file on a disk that ignores case; rename one"
                ),
            );
        }
        if size > MAX_FILE_BYTES {
            diagnostics.push(
                path,
                None,
                "FILE_TOO_LARGE",
                format!("a file may hold at most {MAX_FILE_BYTES} bytes; this one has {size}"),
            );
        } else if !is_binary(path) {
            // Only whether it is text matters here; the validator reads it again.
            let _text = sasha_package::source::text_of(path, bytes, &mut diagnostics);
        }
    }
    if files.len() > MAX_FILES {
        diagnostics.push(
            ".",
            None,
            "PACKAGE_TOO_MANY_FILES",
            format!(
                "a package may hold at most {MAX_FILES} files; this one has {}",
                files.len()
            ),
        );
    }
    if total > MAX_PACKAGE_BYTES {
        diagnostics.push(
            ".",
            None,
            "PACKAGE_TOO_LARGE",
            format!("a package may hold at most {MAX_PACKAGE_BYTES} bytes in total; this one has {total}"),
        );
    }
    diagnostics.into_sorted()
}

fn check_file_size(bytes: usize) -> Result<(), AppError> {
    if bytes as u64 > MAX_FILE_BYTES {
        return Err(AppError::new(
            ErrorCode::ResourceLimit,
            format!("a file may hold at most {MAX_FILE_BYTES} bytes; this one would have {bytes}"),
        ));
    }
    Ok(())
}

pub(crate) fn check_expected(path: &str, current: &str, expected: &str) -> Result<(), AppError> {
    if current.eq_ignore_ascii_case(expected.trim()) {
        Ok(())
    } else {
        Err(conflict(format!(
            "{path} changed since you read it; read it again"
        )))
    }
}

fn invalid(message: impl Into<String>) -> AppError {
    AppError::new(ErrorCode::InputInvalid, message)
}

pub(crate) fn conflict(message: impl Into<String>) -> AppError {
    AppError::new(ErrorCode::Conflict, message)
}

pub(crate) fn not_found(path: &str) -> AppError {
    AppError::new(ErrorCode::RecordNotFound, format!("{path} does not exist"))
}

/// Something on the way was renamed while this call opened it: someone else
/// is changing the package on disk. Nothing was changed; the call may be
/// repeated.
fn moved(shown: &str) -> AppError {
    conflict(format!(
        "{shown} was moved while it was being opened; try again"
    ))
}

fn too_large(path: &str) -> AppError {
    AppError::new(
        ErrorCode::ResourceLimit,
        format!(
            "{path} is larger than {MAX_FILE_BYTES} bytes; it has no version and the source tools cannot read or change it"
        ),
    )
}

/// An unknown app is answered exactly like an app the caller does not manage.
fn not_managed() -> AppError {
    AppError::new(ErrorCode::AccessDenied, "you do not manage this app")
}

/// An unexpected file-system failure: logged once with the diagnostic id the
/// caller sees; the message says nothing about the file system.
fn internal(operation: &'static str, path: &str, error: impl fmt::Display) -> AppError {
    let refused = AppError::from_code(ErrorCode::Internal);
    tracing::error!(
        diagnostic_id = %refused.diagnostic_id,
        operation,
        path,
        %error,
        "app source file operation failed"
    );
    refused
}

#[cfg(test)]
mod tests;
