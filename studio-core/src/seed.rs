//! Seeding the bundled app packages (and `_shared`) into `<DOCS_ROOT>/apps`.
//!
//! The bundle is the repository's `apps/` folder, embedded at build time
//! (`build.rs`). A run, under one of the two writer locks:
//!
//! - removes leftovers of an interrupted run from `<DOCS_ROOT>/.bundled-apps-staging/`;
//! - installs each bundled package whose folder is absent, after validating the
//!   staged copy with the one validator, by renaming it into place;
//! - leaves a folder whose tree hash equals the bundled one untouched (up to date);
//! - replaces a folder whose tree hash is a previously shipped release of that
//!   app (`scripts/bundled-app-shipped-hashes.json`) and not the current one;
//! - preserves everything else (edited, empty, holding a symlink or another
//!   non-regular file, unreadable) with a warning;
//! - installs `_shared` only when it is absent, never refreshes it;
//! - moves an untouched copy of a retired app (an id in the shipped-hashes file
//!   but not in the bundle) to `<DOCS_ROOT>/.retired-bundled-apps/apps/<id>`.
//!
//! Every new tree is written to a staging folder on the same file system, its
//! files and folders fsynced, then renamed into place without replacing
//! anything (`RENAME_NOREPLACE`), so the catalogue never sees half a package.
//! A replacement first renames the old tree into the staging folder, then
//! renames the new one into place: a crash in between leaves the destination
//! absent, which the next run treats as a fresh install, and the old tree is a
//! staging leftover that run removes.
//!
//! Locks. Container startup holds the knowledge flock (`.knowledge.lock`,
//! released by the kernel if the process dies); the standalone CLI creates
//! `.bundled-apps.lock` exclusively and removes it when done. The two lock
//! domains do not coordinate, and neither protects against unrelated writers.
//! A killed standalone seeder leaves its lock file behind and later standalone
//! runs fail closed until an operator removes it.
//!
//! What it must not do: follow a symlink on disk, replace or retire a tree it
//! cannot hash exactly, or write anywhere but `DOCS_ROOT`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::fs::{Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use sasha_contract::AppId;
use sasha_service::config::{ConfigError, Env};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

/// The folder bundled files shared by several packages live in; not a package.
pub const SHARED: &str = "_shared";
/// Below `DOCS_ROOT`: where new trees are written before they are renamed into place.
pub const STAGING_DIR: &str = ".bundled-apps-staging";
/// Below `DOCS_ROOT`: where untouched retired samples are moved (`<this>/apps/<id>`).
pub const RETIRED_DIR: &str = ".retired-bundled-apps";
/// Below `DOCS_ROOT`: the knowledge flock container startup seeds under.
pub const KNOWLEDGE_LOCK: &str = ".knowledge.lock";
/// Below `DOCS_ROOT`: the lock file of a standalone `sasha seed`.
pub const STANDALONE_LOCK: &str = ".bundled-apps.lock";

/// How long startup waits for the knowledge flock before giving up on seeding.
pub const KNOWLEDGE_LOCK_PATIENCE: Duration = Duration::from_secs(60);

/// An on-disk tree with more entries than this is not hashed (reported unreadable).
const MAX_TREE_ENTRIES: usize = 100_000;

/// The name, inside a run's staging slot, of the replaced tree; a dot
/// name, so it can never collide with an app id.
const PREVIOUS: &str = ".previous";

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/bundled_apps.rs"));

    pub(super) fn entries() -> &'static [(&'static str, &'static str, Option<&'static [u8]>)] {
        BUNDLED_ENTRIES
    }

    /// `scripts/bundled-app-shipped-hashes.json`.
    pub(super) const SHIPPED_HASHES: &str =
        include_str!("../../scripts/bundled-app-shipped-hashes.json");
}

/// `SASHA_BUNDLED_APPS`: whether studio-core seeds the bundled apps at startup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundledApps {
    /// Seed before the first catalogue refresh (the default).
    Seed,
    /// Leave `DOCS_ROOT` as it is.
    Off,
}

impl BundledApps {
    /// Reads `SASHA_BUNDLED_APPS` (`seed`, the default, or `off`).
    pub fn from_env(env: &dyn Env) -> Result<BundledApps, ConfigError> {
        match env.var("SASHA_BUNDLED_APPS").as_deref() {
            None | Some("seed") => Ok(BundledApps::Seed),
            Some("off") => Ok(BundledApps::Off),
            Some(other) => Err(ConfigError::new(
                "SASHA_BUNDLED_APPS",
                format!("{other:?} is neither seed nor off"),
            )),
        }
    }
}

/// Why a seeding run could not start or went wrong as a whole. Problems with
/// one app are entries of the [`SeedReport`] instead.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    #[error(
        "cannot write {}: {source}; DOCS_ROOT is read-only (checkout and image snapshots are) or not writable by this user, so the bundled apps cannot be seeded there",
        .path.display()
    )]
    ReadOnly { path: PathBuf, source: io::Error },
    #[error(
        "{} exists: another standalone seeder is running, or one was killed and left it behind; make sure no `sasha seed` runs against this docs root, then remove {} and try again",
        .path.display(),
        .path.display()
    )]
    AbandonedLock { path: PathBuf },
    #[error("{} is held by another process; gave up after {} s", .path.display(), .waited.as_secs())]
    LockBusy { path: PathBuf, waited: Duration },
    #[error("{} is not a real folder", .path.display())]
    NotAFolder { path: PathBuf },
    #[error("cannot {action} {}: {source}", .path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("scripts/bundled-app-shipped-hashes.json: {0}")]
    ShippedHashes(String),
}

impl SeedError {
    /// An I/O failure while writing `path`: a read-only or permission failure
    /// says so plainly.
    fn writing(action: &'static str, path: &Path, source: io::Error) -> SeedError {
        if is_read_only(&source) {
            SeedError::ReadOnly {
                path: path.to_owned(),
                source,
            }
        } else {
            SeedError::Io {
                action,
                path: path.to_owned(),
                source,
            }
        }
    }
}

fn is_read_only(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ReadOnlyFilesystem | io::ErrorKind::PermissionDenied
    )
}

/// What happened to one bundled (or retired) app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// It was absent and is now installed.
    Installed,
    /// It already matched the bundled content; not touched.
    UpToDate,
    /// It was an untouched older release and now holds the bundled content.
    Replaced,
    /// It was left as it is (see the warning).
    Preserved,
    /// An untouched retired sample, moved to `.retired-bundled-apps/apps/`.
    Retired,
    /// The seeder could not do its part (see the warning); nothing was replaced.
    Error,
}

impl Outcome {
    /// The name the report uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Installed => "installed",
            Outcome::UpToDate => "upToDate",
            Outcome::Replaced => "replaced",
            Outcome::Preserved => "preserved",
            Outcome::Retired => "retired",
            Outcome::Error => "error",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppReport {
    /// The app id, or `_shared`.
    pub id: String,
    pub outcome: Outcome,
    /// The tree hash of what is now at `apps/<id>` (or, when retired, of what
    /// was moved); `None` when it could not be hashed or nothing is there.
    pub tree_hash: Option<String>,
    /// Why it was preserved, or what went wrong.
    pub warning: Option<String>,
    /// Where a retired sample was moved, relative to `DOCS_ROOT`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_to: Option<String>,
}

/// The result of one seeding run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeedReport {
    /// One entry per bundled folder (`_shared` included) and per retired app
    /// found on disk.
    pub apps: Vec<AppReport>,
    /// Leftovers of an interrupted run that were removed, relative to `DOCS_ROOT`.
    pub healed: Vec<String>,
}

impl SeedReport {
    /// Whether any app ended in [`Outcome::Error`].
    pub fn failed(&self) -> bool {
        self.apps.iter().any(|app| app.outcome == Outcome::Error)
    }

    /// The entry of `id`.
    pub fn app(&self, id: &str) -> Option<&AppReport> {
        self.apps.iter().find(|app| app.id == id)
    }
}

/// One bundled folder's content: relative `/`-separated paths of folders
/// (`None`) and files (`Some(bytes)`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    entries: BTreeMap<String, Option<Cow<'static, [u8]>>>,
}

impl Tree {
    pub fn new() -> Tree {
        Tree::default()
    }

    /// Adds a folder (and its parents).
    pub fn with_dir(mut self, path: &str) -> Tree {
        self.add_parents(path);
        self.entries.insert(path.to_owned(), None);
        self
    }

    /// Adds a file (and its parent folders).
    pub fn with_file(mut self, path: &str, bytes: impl Into<Cow<'static, [u8]>>) -> Tree {
        self.add_parents(path);
        self.entries.insert(path.to_owned(), Some(bytes.into()));
        self
    }

    fn add_parents(&mut self, path: &str) {
        let mut end = 0;
        while let Some(slash) = path[end..].find('/') {
            end += slash;
            self.entries.insert(path[..end].to_owned(), None);
            end += 1;
        }
    }

    /// The tree hash (see [`TreeHasher`]).
    pub fn hash(&self) -> String {
        let mut hasher = TreeHasher::default();
        for (path, entry) in &self.entries {
            match entry {
                None => hasher.dir(path.as_bytes()),
                Some(bytes) => {
                    hasher.file_header(path.as_bytes(), bytes.len() as u64);
                    hasher.bytes(bytes);
                }
            }
        }
        hasher.finish()
    }

    /// The content of the file at `path`.
    pub fn file(&self, path: &str) -> Option<&[u8]> {
        self.entries.get(path)?.as_deref()
    }
}

/// The tree hash: sha256 over the entries sorted by relative path, each folder
/// contributing `dir <path>\0` and each regular file
/// `file <path>\0<decimal length>\0<bytes>`. The folder itself is not an entry.
#[derive(Default)]
struct TreeHasher(Sha256);

impl TreeHasher {
    fn dir(&mut self, path: &[u8]) {
        self.0.update(b"dir ");
        self.0.update(path);
        self.0.update([0]);
    }

    fn file_header(&mut self, path: &[u8], len: u64) {
        self.0.update(b"file ");
        self.0.update(path);
        self.0.update([0]);
        self.0.update(len.to_string().as_bytes());
        self.0.update([0]);
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(self) -> String {
        hex::encode(self.0.finalize())
    }
}

/// The bundled folders: app packages by id, and `_shared`.
#[derive(Debug, Clone, Default)]
pub struct Bundle {
    trees: BTreeMap<String, Tree>,
}

impl Bundle {
    pub fn new() -> Bundle {
        Bundle::default()
    }

    /// The repository's `apps/`, as embedded at build time.
    pub fn embedded() -> Bundle {
        let mut bundle = Bundle::new();
        for (top, path, bytes) in embedded::entries() {
            let tree = bundle.trees.entry((*top).to_owned()).or_default();
            if path.is_empty() {
                continue;
            }
            tree.entries
                .insert((*path).to_owned(), bytes.map(Cow::Borrowed));
        }
        bundle
    }

    /// Adds (or replaces) the folder `id`.
    pub fn with_tree(mut self, id: &str, tree: Tree) -> Bundle {
        self.trees.insert(id.to_owned(), tree);
        self
    }

    /// The folder `id` (`_shared` included).
    pub fn tree(&self, id: &str) -> Option<&Tree> {
        self.trees.get(id)
    }

    /// The bundled app ids (not `_shared`).
    pub fn app_ids(&self) -> impl Iterator<Item = &str> {
        self.trees
            .keys()
            .map(String::as_str)
            .filter(|id| *id != SHARED)
    }
}

/// Every release ever shipped, per app id: `{"<app-id>": ["<tree hash>", …]}`.
/// Ids here but not in the bundle are retired.
#[derive(Debug, Clone, Default)]
pub struct ShippedHashes {
    by_app: BTreeMap<String, Vec<String>>,
}

impl ShippedHashes {
    /// `scripts/bundled-app-shipped-hashes.json`, as embedded at build time.
    pub fn embedded() -> Result<ShippedHashes, SeedError> {
        ShippedHashes::from_json(embedded::SHIPPED_HASHES)
    }

    /// Parses the file's JSON; ids must be package ids and hashes 64 lowercase
    /// hex digits.
    pub fn from_json(text: &str) -> Result<ShippedHashes, SeedError> {
        let by_app: BTreeMap<String, Vec<String>> = serde_json::from_str(text)
            .map_err(|error| SeedError::ShippedHashes(error.to_string()))?;
        for (id, hashes) in &by_app {
            if AppId::parse(id).is_err() {
                return Err(SeedError::ShippedHashes(format!("{id:?} is not an app id")));
            }
            if let Some(hash) = hashes.iter().find(|hash| !is_tree_hash(hash)) {
                return Err(SeedError::ShippedHashes(format!(
                    "{id}: {hash:?} is not a tree hash (64 lowercase hex digits)"
                )));
            }
        }
        Ok(ShippedHashes { by_app })
    }

    /// From a map, for tests and tools.
    pub fn new(by_app: BTreeMap<String, Vec<String>>) -> ShippedHashes {
        ShippedHashes { by_app }
    }

    /// Whether `hash` is a shipped release of `id`.
    pub fn contains(&self, id: &str, hash: &str) -> bool {
        self.by_app
            .get(id)
            .is_some_and(|hashes| hashes.iter().any(|known| known == hash))
    }

    /// Every app id with shipped releases.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.by_app.keys().map(String::as_str)
    }
}

fn is_tree_hash(hash: &str) -> bool {
    sasha_contract::data::is_sha256_hex(hash)
}

/// What is on disk at one place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskTree {
    /// Nothing (not even a dangling symlink).
    Absent,
    /// A real folder holding only folders and regular files.
    Hashed {
        hash: String,
        /// The folder holds nothing at all.
        empty: bool,
    },
    /// Is or holds a symlink, FIFO, socket or device: never replaced or retired.
    Suspicious(String),
    /// Could not be read completely.
    Unreadable(String),
}

/// The tree hash of the folder at `dir`, computed like [`Tree::hash`] without
/// following any symlink (entries are examined with `lstat`, files opened with
/// `O_NOFOLLOW` and checked to be regular files after opening).
pub fn disk_tree(dir: &Path) -> DiskTree {
    match std::fs::symlink_metadata(dir) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => return DiskTree::Absent,
        Err(error) => return DiskTree::Unreadable(format!("cannot examine it: {error}")),
        Ok(meta) if meta.file_type().is_symlink() => {
            return DiskTree::Suspicious("it is a symlink".into());
        }
        Ok(meta) if !meta.is_dir() => {
            return DiskTree::Suspicious("it is not a folder".into());
        }
        Ok(_) => {}
    }
    let mut nodes = Vec::new();
    if let Err(problem) = collect(dir, &[], &mut nodes) {
        return problem;
    }
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    let empty = nodes.is_empty();
    let mut hasher = TreeHasher::default();
    for (path, full) in nodes {
        match full {
            None => hasher.dir(&path),
            Some(full) => {
                if let Err(problem) = hash_file(&mut hasher, &path, &full) {
                    return problem;
                }
            }
        }
    }
    DiskTree::Hashed {
        hash: hasher.finish(),
        empty,
    }
}

/// Collects the folders (`None`) and regular files (`Some(full path)`) below
/// `dir`, by relative path bytes.
#[allow(
    clippy::type_complexity,
    reason = "a private accumulator; a named type would not say more"
)]
fn collect(
    dir: &Path,
    prefix: &[u8],
    nodes: &mut Vec<(Vec<u8>, Option<PathBuf>)>,
) -> Result<(), DiskTree> {
    let shown = |path: &[u8]| String::from_utf8_lossy(path).into_owned();
    let entries = std::fs::read_dir(dir).map_err(|error| {
        DiskTree::Unreadable(format!("cannot list {}: {error}", shown_or_root(prefix)))
    })?;
    for entry in entries {
        let entry = entry.map_err(|error| {
            DiskTree::Unreadable(format!("cannot list {}: {error}", shown_or_root(prefix)))
        })?;
        if nodes.len() >= MAX_TREE_ENTRIES {
            return Err(DiskTree::Unreadable(format!(
                "it holds more than {MAX_TREE_ENTRIES} entries"
            )));
        }
        let mut path = prefix.to_vec();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(entry.file_name().as_bytes());
        let full = entry.path();
        let kind = std::fs::symlink_metadata(&full)
            .map_err(|error| {
                DiskTree::Unreadable(format!("cannot examine {}: {error}", shown(&path)))
            })?
            .file_type();
        if kind.is_dir() {
            nodes.push((path.clone(), None));
            collect(&full, &path, nodes)?;
        } else if kind.is_file() {
            nodes.push((path, Some(full)));
        } else if kind.is_symlink() {
            return Err(DiskTree::Suspicious(format!(
                "{} is a symlink",
                shown(&path)
            )));
        } else {
            return Err(DiskTree::Suspicious(format!(
                "{} is not a regular file or folder",
                shown(&path)
            )));
        }
    }
    Ok(())
}

fn shown_or_root(prefix: &[u8]) -> String {
    if prefix.is_empty() {
        "the folder".into()
    } else {
        String::from_utf8_lossy(prefix).into_owned()
    }
}

/// Hashes one file opened without following a symlink, streaming its bytes; a
/// file that changes length while it is read is unreadable.
fn hash_file(hasher: &mut TreeHasher, path: &[u8], full: &Path) -> Result<(), DiskTree> {
    let shown = || String::from_utf8_lossy(path).into_owned();
    let fd = rustix::fs::open(
        full,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| match errno {
        Errno::LOOP => DiskTree::Suspicious(format!("{} is a symlink", shown())),
        errno => DiskTree::Unreadable(format!(
            "cannot open {}: {}",
            shown(),
            io::Error::from(errno)
        )),
    })?;
    let mut file = File::from(fd);
    let meta = file
        .metadata()
        .map_err(|error| DiskTree::Unreadable(format!("cannot examine {}: {error}", shown())))?;
    if !meta.is_file() {
        return Err(DiskTree::Suspicious(format!(
            "{} is not a regular file",
            shown()
        )));
    }
    hasher.file_header(path, meta.len());
    let mut buffer = vec![0u8; 64 * 1024];
    let mut read: u64 = 0;
    loop {
        let n = file
            .read(&mut buffer)
            .map_err(|error| DiskTree::Unreadable(format!("cannot read {}: {error}", shown())))?;
        if n == 0 {
            break;
        }
        read += n as u64;
        if read > meta.len() {
            break;
        }
        hasher.bytes(&buffer[..n]);
    }
    if read != meta.len() {
        return Err(DiskTree::Unreadable(format!(
            "{} changed while it was read",
            shown()
        )));
    }
    Ok(())
}

/// The knowledge flock on `<DOCS_ROOT>/.knowledge.lock`, held while it lives;
/// the kernel releases it if the process dies.
#[derive(Debug)]
pub struct KnowledgeLock {
    /// The open lock file; closing it releases the flock.
    _file: File,
}

impl KnowledgeLock {
    /// Takes the flock, waiting at most `patience` for another holder.
    pub fn acquire(docs_root: &Path, patience: Duration) -> Result<KnowledgeLock, SeedError> {
        std::fs::create_dir_all(docs_root)
            .map_err(|error| SeedError::writing("create", docs_root, error))?;
        let path = docs_root.join(KNOWLEDGE_LOCK);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags_nofollow()
            .open(&path)
            .map_err(|error| SeedError::writing("open", &path, error))?;
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(KnowledgeLock { _file: file }),
                Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < patience => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(SeedError::LockBusy {
                        path,
                        waited: started.elapsed(),
                    });
                }
                Err(std::fs::TryLockError::Error(error)) => {
                    return Err(SeedError::Io {
                        action: "lock",
                        path,
                        source: error,
                    });
                }
            }
        }
    }
}

/// `O_NOFOLLOW` for lock files: a planted symlink must not redirect the write.
trait NoFollow {
    fn custom_flags_nofollow(&mut self) -> &mut Self;
}

impl NoFollow for std::fs::OpenOptions {
    fn custom_flags_nofollow(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt as _;
        self.custom_flags(OFlags::NOFOLLOW.bits() as i32)
    }
}

/// The standalone seeder's lock: `<DOCS_ROOT>/.bundled-apps.lock`, created
/// exclusively and removed when dropped. One left behind by a killed seeder
/// makes later standalone runs fail closed.
#[derive(Debug)]
pub struct StandaloneLock {
    path: PathBuf,
}

impl StandaloneLock {
    /// Creates the lock file with this process's id and the time, or fails
    /// closed when it exists.
    pub fn acquire(docs_root: &Path) -> Result<StandaloneLock, SeedError> {
        let path = docs_root.join(STANDALONE_LOCK);
        // Checked before anything is created, so a run that fails closed
        // changes nothing.
        if std::fs::symlink_metadata(&path).is_ok() {
            return Err(SeedError::AbandonedLock { path });
        }
        std::fs::create_dir_all(docs_root)
            .map_err(|error| SeedError::writing("create", docs_root, error))?;
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags_nofollow()
            .open(&path)
        {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                return Err(SeedError::AbandonedLock { path });
            }
            Err(error) => return Err(SeedError::writing("create", &path, error)),
        };
        let lock = StandaloneLock { path };
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        writeln!(
            file,
            "pid {}\nstarted {since} (unix seconds)\nheld by `sasha seed`; remove only when no seeder runs",
            std::process::id()
        )
        .and_then(|()| file.sync_all())
        .map_err(|error| SeedError::writing("write", &lock.path, error))?;
        Ok(lock)
    }
}

impl Drop for StandaloneLock {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), %error, "cannot remove the standalone seeding lock");
        }
    }
}

/// Container startup: seeds the embedded bundle under the knowledge flock.
pub fn seed_at_startup(docs_root: &Path) -> Result<SeedReport, SeedError> {
    let shipped = ShippedHashes::embedded()?;
    let _lock = KnowledgeLock::acquire(docs_root, KNOWLEDGE_LOCK_PATIENCE)?;
    seed(docs_root, &Bundle::embedded(), &shipped)
}

/// `sasha seed`: seeds the embedded bundle under the standalone lock.
pub fn seed_standalone(docs_root: &Path) -> Result<SeedReport, SeedError> {
    let shipped = ShippedHashes::embedded()?;
    let _lock = StandaloneLock::acquire(docs_root)?;
    seed(docs_root, &Bundle::embedded(), &shipped)
}

/// Seeds `bundle` into `<docs_root>/apps`. The caller holds one of the locks.
pub fn seed(
    docs_root: &Path,
    bundle: &Bundle,
    shipped: &ShippedHashes,
) -> Result<SeedReport, SeedError> {
    let apps_dir = docs_root.join("apps");
    std::fs::create_dir_all(&apps_dir)
        .map_err(|error| SeedError::writing("create", &apps_dir, error))?;
    let staging = docs_root.join(STAGING_DIR);
    let healed = clean_staging(&staging)?;
    let seeder = Seeder {
        docs_root,
        apps_dir: &apps_dir,
        staging: &staging,
    };
    let mut apps = Vec::new();
    for (id, tree) in &bundle.trees {
        apps.push(if id == SHARED {
            seeder.shared(tree)
        } else {
            seeder.package(id, tree, shipped)
        });
    }
    for id in shipped.ids() {
        if id != SHARED
            && !bundle.trees.contains_key(id)
            && let Some(report) = seeder.retire(id, shipped)
        {
            apps.push(report);
        }
    }
    // Empty after a clean run; left for the next run if not.
    let _ = std::fs::remove_dir(&staging);
    Ok(SeedReport { apps, healed })
}

/// Removes everything in the staging folder (creating it when absent) and
/// returns what was removed, relative to `DOCS_ROOT`.
fn clean_staging(staging: &Path) -> Result<Vec<String>, SeedError> {
    match std::fs::symlink_metadata(staging) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir(staging)
                .map_err(|error| SeedError::writing("create", staging, error))?;
            return Ok(Vec::new());
        }
        Err(error) => {
            return Err(SeedError::Io {
                action: "examine",
                path: staging.to_owned(),
                source: error,
            });
        }
        Ok(meta) if !meta.is_dir() => {
            return Err(SeedError::NotAFolder {
                path: staging.to_owned(),
            });
        }
        Ok(_) => {}
    }
    let entries = std::fs::read_dir(staging).map_err(|error| SeedError::Io {
        action: "list",
        path: staging.to_owned(),
        source: error,
    })?;
    let mut healed = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        // `remove_dir_all` never follows a symlink; a symlink entry is itself removed.
        let removed = match entry.file_type() {
            Ok(kind) if kind.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
        removed.map_err(|error| SeedError::writing("remove", &path, error))?;
        healed.push(format!(
            "{STAGING_DIR}/{}",
            entry.file_name().to_string_lossy()
        ));
    }
    healed.sort();
    Ok(healed)
}

/// One run's places.
struct Seeder<'a> {
    docs_root: &'a Path,
    apps_dir: &'a Path,
    staging: &'a Path,
}

/// A failed step of one app, as the report's warning.
struct Failed(String);

impl Failed {
    fn io(action: &str, path: &Path, error: io::Error) -> Failed {
        Failed(format!("cannot {action} {}: {error}", path.display()))
    }
}

impl Seeder<'_> {
    /// A bundled package.
    fn package(&self, id: &str, tree: &Tree, shipped: &ShippedHashes) -> AppReport {
        let current = tree.hash();
        let dest = self.apps_dir.join(id);
        match disk_tree(&dest) {
            DiskTree::Absent => match self.install(id, tree, true) {
                Ok(()) => report(id, Outcome::Installed, Some(current), None),
                Err(Failed(why)) => report(id, Outcome::Error, None, Some(why)),
            },
            DiskTree::Hashed { hash, .. } if hash == current => {
                report(id, Outcome::UpToDate, Some(hash), None)
            }
            DiskTree::Hashed { hash, .. } if shipped.contains(id, &hash) => {
                match self.replace(id, tree) {
                    Ok(()) => report(id, Outcome::Replaced, Some(current), None),
                    Err(Failed(why)) => report(
                        id,
                        Outcome::Error,
                        None,
                        Some(format!("the old release was not replaced: {why}")),
                    ),
                }
            }
            DiskTree::Hashed { hash, empty: true } => report(
                id,
                Outcome::Preserved,
                Some(hash),
                Some("an empty folder; the seeder installs only where the folder is absent".into()),
            ),
            DiskTree::Hashed { hash, empty: false } => report(
                id,
                Outcome::Preserved,
                Some(hash),
                Some("edited since release (its tree hash is no shipped release); the seeder no longer refreshes it".into()),
            ),
            DiskTree::Suspicious(why) => report(
                id,
                Outcome::Preserved,
                None,
                Some(format!("{why}; the seeder never replaces such a folder")),
            ),
            DiskTree::Unreadable(why) => report(
                id,
                Outcome::Preserved,
                None,
                Some(format!("{why}; the seeder never replaces a folder it cannot read")),
            ),
        }
    }

    /// `_shared`: installed when absent, never refreshed.
    fn shared(&self, tree: &Tree) -> AppReport {
        let current = tree.hash();
        match disk_tree(&self.apps_dir.join(SHARED)) {
            DiskTree::Absent => match self.install(SHARED, tree, false) {
                Ok(()) => report(SHARED, Outcome::Installed, Some(current), None),
                Err(Failed(why)) => report(SHARED, Outcome::Error, None, Some(why)),
            },
            DiskTree::Hashed { hash, .. } if hash == current => {
                report(SHARED, Outcome::UpToDate, Some(hash), None)
            }
            DiskTree::Hashed { hash, .. } => report(
                SHARED,
                Outcome::Preserved,
                Some(hash),
                Some("differs from the bundled _shared; _shared is installed only where absent and never refreshed".into()),
            ),
            DiskTree::Suspicious(why) | DiskTree::Unreadable(why) => report(
                SHARED,
                Outcome::Preserved,
                None,
                Some(format!("{why}; _shared is never refreshed")),
            ),
        }
    }

    /// A retired app: an untouched shipped release moves to the retired
    /// folder; anything else stays. `None` when nothing is there.
    fn retire(&self, id: &str, shipped: &ShippedHashes) -> Option<AppReport> {
        let dest = self.apps_dir.join(id);
        Some(match disk_tree(&dest) {
            DiskTree::Absent => return None,
            DiskTree::Hashed { hash, .. } if shipped.contains(id, &hash) => {
                match self.move_to_retired(id, &dest) {
                    Ok(moved_to) => AppReport {
                        moved_to: Some(moved_to),
                        ..report(id, Outcome::Retired, Some(hash), None)
                    },
                    Err(Failed(why)) => report(id, Outcome::Error, Some(hash), Some(why)),
                }
            }
            DiskTree::Hashed { hash, .. } => report(
                id,
                Outcome::Preserved,
                Some(hash),
                Some("a retired sample edited since release; preserved where it is".into()),
            ),
            DiskTree::Suspicious(why) | DiskTree::Unreadable(why) => report(
                id,
                Outcome::Preserved,
                None,
                Some(format!(
                    "a retired sample that cannot be verified: {why}; preserved where it is"
                )),
            ),
        })
    }

    /// Writes `tree` into a fresh slot of the staging folder, as
    /// `<slot>/<id>`, validated when it is a package. Returns the slot.
    fn stage(&self, id: &str, tree: &Tree, validate: bool) -> Result<PathBuf, Failed> {
        let slot = self
            .staging
            .join(format!("{id}-{:016x}", rand::random::<u64>()));
        std::fs::create_dir(&slot).map_err(|error| Failed::io("create", &slot, error))?;
        let staged = slot.join(id);
        let written = write_tree(&staged, tree).and_then(|()| {
            if !validate {
                return Ok(());
            }
            let validation = sasha_package::validate::validate_dir(&staged);
            if validation.package.is_some() {
                return Ok(());
            }
            let problems: Vec<String> = validation
                .diagnostics
                .iter()
                .take(3)
                .map(|d| format!("{}: {} {}", d.file, d.code, d.reason))
                .collect();
            Err(Failed(format!(
                "the bundled package is invalid and was not installed ({} problems: {})",
                validation.diagnostics.len(),
                problems.join("; ")
            )))
        });
        match written {
            Ok(()) => Ok(slot),
            Err(failed) => {
                let _ = std::fs::remove_dir_all(&slot);
                Err(failed)
            }
        }
    }

    /// Stages `tree` and renames it to `apps/<id>`, which must be absent.
    fn install(&self, id: &str, tree: &Tree, validate: bool) -> Result<(), Failed> {
        let slot = self.stage(id, tree, validate)?;
        let dest = self.apps_dir.join(id);
        let renamed = rename_no_replace(&slot.join(id), &dest)
            .map_err(|error| Failed::io("move the staged copy to", &dest, error));
        let _ = sync_dir(self.apps_dir);
        let _ = std::fs::remove_dir_all(&slot);
        renamed
    }

    /// Stages `tree`, moves the old `apps/<id>` into the slot, renames the new
    /// tree into place and removes the old one. A crash after the first rename
    /// leaves `apps/<id>` absent: the next run installs it and removes the slot.
    fn replace(&self, id: &str, tree: &Tree) -> Result<(), Failed> {
        let slot = self.stage(id, tree, true)?;
        let dest = self.apps_dir.join(id);
        let previous = slot.join(PREVIOUS);
        if let Err(error) = rename_no_replace(&dest, &previous) {
            let _ = std::fs::remove_dir_all(&slot);
            return Err(Failed::io("move aside", &dest, error));
        }
        let renamed = rename_no_replace(&slot.join(id), &dest)
            .map_err(|error| Failed::io("move the staged copy to", &dest, error));
        if renamed.is_err() {
            // Put the old release back rather than leave the app absent.
            let _ = rename_no_replace(&previous, &dest);
        }
        let _ = sync_dir(self.apps_dir);
        let _ = std::fs::remove_dir_all(&slot);
        renamed
    }

    /// Renames `apps/<id>` to `.retired-bundled-apps/apps/<id>`, or `<id>-2`,
    /// `<id>-3`, … when taken. Returns the new place relative to `DOCS_ROOT`.
    fn move_to_retired(&self, id: &str, dest: &Path) -> Result<String, Failed> {
        let retired = self.docs_root.join(RETIRED_DIR).join("apps");
        std::fs::create_dir_all(&retired).map_err(|error| Failed::io("create", &retired, error))?;
        for n in 1..=10_000u32 {
            let name = if n == 1 {
                id.to_owned()
            } else {
                format!("{id}-{n}")
            };
            let target = retired.join(&name);
            match rename_no_replace(dest, &target) {
                Ok(()) => {
                    let _ = sync_dir(self.apps_dir);
                    let _ = sync_dir(&retired);
                    return Ok(format!("{RETIRED_DIR}/apps/{name}"));
                }
                Err(error)
                    if error.kind() == io::ErrorKind::AlreadyExists
                        || error.kind() == io::ErrorKind::DirectoryNotEmpty => {}
                Err(error) => return Err(Failed::io("move to the retired folder", dest, error)),
            }
        }
        Err(Failed(format!(
            "{} holds too many retired copies of {id}",
            retired.display()
        )))
    }
}

fn report(
    id: &str,
    outcome: Outcome,
    tree_hash: Option<String>,
    warning: Option<String>,
) -> AppReport {
    AppReport {
        id: id.to_owned(),
        outcome,
        tree_hash,
        warning,
        moved_to: None,
    }
}

/// Writes `tree` as the new folder `root`: every file created exclusively and
/// fsynced, then every folder fsynced, deepest first.
fn write_tree(root: &Path, tree: &Tree) -> Result<(), Failed> {
    std::fs::create_dir(root).map_err(|error| Failed::io("create", root, error))?;
    let mut dirs = vec![root.to_path_buf()];
    for (path, entry) in &tree.entries {
        if path
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == ".." || part.contains('\0'))
        {
            return Err(Failed(format!(
                "the bundled path {path:?} is not a plain relative path"
            )));
        }
        let full = root.join(path);
        match entry {
            None => {
                std::fs::create_dir(&full).map_err(|error| Failed::io("create", &full, error))?;
                dirs.push(full);
            }
            Some(bytes) => {
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&full)
                    .map_err(|error| Failed::io("create", &full, error))?;
                file.write_all(bytes)
                    .and_then(|()| file.sync_all())
                    .map_err(|error| Failed::io("write", &full, error))?;
            }
        }
    }
    for dir in dirs.iter().rev() {
        sync_dir(dir).map_err(|error| Failed::io("sync", dir, error))?;
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// `rename(2)` that never replaces what is at `to` (`RENAME_NOREPLACE`); on a
/// file system without it, a checked plain rename.
fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    match rustix::fs::renameat_with(
        rustix::fs::CWD,
        from,
        rustix::fs::CWD,
        to,
        RenameFlags::NOREPLACE,
    ) {
        Ok(()) => Ok(()),
        Err(Errno::INVAL | Errno::NOSYS) => match std::fs::symlink_metadata(to) {
            Ok(_) => Err(io::Error::from(io::ErrorKind::AlreadyExists)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => std::fs::rename(from, to),
            Err(error) => Err(error),
        },
        Err(errno) => Err(io::Error::from(errno)),
    }
}

#[cfg(test)]
mod tests;
