//! The live app catalogue: every folder under `<DOCS_ROOT>/apps/` (except
//! `_shared` and dot-folders), validated by the one validator and assembled
//! into an immutable, content-addressed resource.
//!
//! A package is re-validated only when its fingerprint changes: a walk of the
//! folder's file names, sizes, inode numbers and change times (every write,
//! including an atomic rename into place, changes one of them). A refresh runs
//! on demand (so a write is visible to the very next listing) and on file-system
//! events. Unchanged packages keep their exact `Arc` identity.
//!
//! Every current revision stays readable. Superseded and removed revisions
//! move into a bounded history that keeps their exact bytes until evicted;
//! after that, or after a restart, this catalogue answers an old revision with
//! `APP_REVISION_UNAVAILABLE`, never the current source under an old identity
//! (`CoreService.GetResource` then asks the revision ledger in the core
//! database, see `studio_store::ledger`).
//!
//! Member apps (`crate::member_apps`) join the same snapshot from the core
//! database: their files are handed over with [`Catalogue::set_member`] and
//! validated by the same validator into the same kind of resource, keyed by
//! a digest of their bytes instead of a folder walk. A folder under
//! `DOCS_ROOT/apps` with a member app's id is never served in its place.
//!
//! A valid package's files are kept beside it in the snapshot
//! ([`Snapshot::source`]), exactly the bytes it was assembled from, so the
//! revision ledger records what was validated, not what is on disk a moment
//! later.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use sasha_package::assemble::{Resource, source_digest};
use sasha_package::source::{PackageSource, read_package};
use sasha_package::validate::{Package, Validation, validate_dir, validate_source};
use sasha_package::{Diagnostic, Diagnostics};
use sasha_proto::{AppError, ErrorCode};
use sha2::{Digest as _, Sha256};
use studio_assistant::apps::{AppCatalogue, CatalogueApp, ValidApp};

/// The default number of superseded revisions kept readable.
pub const DEFAULT_HISTORY: usize = 64;

/// One discovered package.
#[derive(Debug, Clone)]
pub enum AppEntry {
    /// Valid: offered to users, with its assembled resource.
    Valid(Arc<Package>),
    /// Invalid: not offered; its diagnostics explain why.
    Invalid(Arc<Vec<Diagnostic>>),
}

/// An immutable view of the catalogue at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub apps: BTreeMap<String, AppEntry>,
    /// Changes whenever any package's fingerprint changes.
    pub fingerprint: String,
    /// The files each valid package was assembled from, by id.
    sources: BTreeMap<String, Arc<PackageSource>>,
}

impl Snapshot {
    /// The valid packages, by id.
    pub fn valid(&self) -> impl Iterator<Item = (&String, &Arc<Package>)> {
        self.apps.iter().filter_map(|(id, entry)| match entry {
            AppEntry::Valid(package) => Some((id, package)),
            AppEntry::Invalid(_) => None,
        })
    }

    /// The files the valid package `id` was assembled from (their
    /// `sasha.sourceDigest` is its resource's); `None` for an invalid or
    /// unknown id, or when the files changed again before they could be read
    /// back (the next refresh sees the change).
    pub fn source(&self, id: &str) -> Option<&Arc<PackageSource>> {
        self.sources.get(id)
    }
}

/// What the catalogue remembers about one folder between refreshes.
#[derive(Debug, Clone)]
struct Known {
    fingerprint: String,
    entry: AppEntry,
    source: Option<Arc<PackageSource>>,
}

/// What one refresh validates under an id: a package folder, or a member
/// app's files (with their digest) from the core database.
enum Candidate {
    Folder(PathBuf),
    Member(String, Arc<PackageSource>),
}

/// A bounded, least-recently-inserted history of superseded resources.
#[derive(Debug)]
struct History {
    capacity: usize,
    order: VecDeque<(String, String)>,
    resources: HashMap<(String, String), Arc<Resource>>,
}

impl History {
    fn insert(&mut self, resource: Arc<Resource>) {
        if self.capacity == 0 {
            return;
        }
        let key = (resource.app_id.clone(), resource.revision.clone());
        if self.resources.contains_key(&key) {
            return;
        }
        while self.order.len() >= self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.resources.remove(&oldest);
            }
        }
        self.order.push_back(key.clone());
        self.resources.insert(key, resource);
    }
}

/// The catalogue of one docs tree.
#[derive(Debug)]
pub struct Catalogue {
    apps_dir: PathBuf,
    known: Mutex<BTreeMap<String, Known>>,
    /// The member apps' current files with their digests, by id.
    members: Mutex<BTreeMap<String, (String, Arc<PackageSource>)>>,
    snapshot: RwLock<Arc<Snapshot>>,
    history: Mutex<History>,
}

impl Catalogue {
    /// A catalogue of `<docs_root>/apps`, keeping `history` superseded revisions.
    pub fn new(docs_root: &Path, history: usize) -> Catalogue {
        Catalogue {
            apps_dir: docs_root.join("apps"),
            known: Mutex::new(BTreeMap::new()),
            members: Mutex::new(BTreeMap::new()),
            snapshot: RwLock::new(Arc::new(Snapshot::default())),
            history: Mutex::new(History {
                capacity: history,
                order: VecDeque::new(),
                resources: HashMap::new(),
            }),
        }
    }

    /// The folder the catalogue discovers packages in.
    pub fn apps_dir(&self) -> &Path {
        &self.apps_dir
    }

    /// Sets (or with `None` removes) the member app `id`'s current files;
    /// the next [`Catalogue::refresh`] validates and serves them.
    pub fn set_member(&self, id: &str, source: Option<PackageSource>) {
        let mut members = self.members.lock().unwrap_or_else(PoisonError::into_inner);
        match source {
            Some(source) => {
                let digest = source_digest(&source);
                members.insert(id.to_owned(), (digest, Arc::new(source)));
            }
            None => {
                members.remove(id);
            }
        }
    }

    /// Whether `id` is a member app's.
    pub fn is_member(&self, id: &str) -> bool {
        self.members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(id)
    }

    /// The last snapshot, without touching the file system.
    pub fn current(&self) -> Arc<Snapshot> {
        self.snapshot.read().map(|s| s.clone()).unwrap_or_default()
    }

    /// Rescans the docs tree, re-validating only packages whose fingerprint
    /// changed, and returns the new snapshot. Blocking: run it off the async
    /// threads.
    pub fn refresh(&self) -> Arc<Snapshot> {
        let mut known = match self.known.lock() {
            Ok(known) => known,
            Err(poisoned) => poisoned.into_inner(),
        };
        let members = self
            .members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let folders = discover(&self.apps_dir);
        let mut next: BTreeMap<String, Known> = BTreeMap::new();
        let mut superseded = Vec::new();
        let folders: Vec<(String, PathBuf)> = folders
            .into_iter()
            .filter(|(id, _)| {
                let shadowed = members.contains_key(id);
                if shadowed {
                    tracing::warn!(app_id = %id, "a folder under DOCS_ROOT/apps has a member app's id and is not served");
                }
                !shadowed
            })
            .collect();
        let candidates = folders
            .into_iter()
            .map(|(id, dir)| (id, Candidate::Folder(dir)))
            .chain(
                members
                    .into_iter()
                    .map(|(id, (digest, source))| (id, Candidate::Member(digest, source))),
            );
        for (id, candidate) in candidates {
            let fingerprint = match &candidate {
                Candidate::Folder(dir) => fingerprint(dir),
                Candidate::Member(digest, _) => format!("member:{digest}"),
            };
            match known.remove(&id) {
                Some(previous) if previous.fingerprint == fingerprint => {
                    next.insert(id, previous);
                }
                previous => {
                    if let Some(Known {
                        entry: AppEntry::Valid(package),
                        ..
                    }) = previous
                    {
                        superseded.push(Arc::new(package.resource.clone()));
                    }
                    let (validation, source) = match candidate {
                        Candidate::Folder(dir) => validate_with_source(&dir),
                        Candidate::Member(_, source) => {
                            let validation = validate_source(&id, (*source).clone());
                            let kept = validation.package.is_some().then(|| (*source).clone());
                            (validation, kept)
                        }
                    };
                    let entry = match validation.package {
                        Some(package) => AppEntry::Valid(Arc::new(package)),
                        None => {
                            tracing::info!(app_id = %id, problems = validation.diagnostics.len(), "package is invalid and not offered");
                            AppEntry::Invalid(Arc::new(validation.diagnostics))
                        }
                    };
                    next.insert(
                        id,
                        Known {
                            fingerprint,
                            entry,
                            source: source.map(Arc::new),
                        },
                    );
                }
            }
        }
        // Folders that disappeared release their pins; their last revision stays
        // in the bounded history like any superseded one.
        for (_, removed) in std::mem::take(&mut *known) {
            if let AppEntry::Valid(package) = removed.entry {
                superseded.push(Arc::new(package.resource.clone()));
            }
        }
        if let Ok(mut history) = self.history.lock() {
            for resource in superseded {
                let still_current = next.get(&resource.app_id).is_some_and(|known| {
                    matches!(&known.entry, AppEntry::Valid(p) if p.resource.revision == resource.revision)
                });
                if !still_current {
                    history.insert(resource);
                }
            }
        }
        let mut hasher = Sha256::new();
        for (id, entry) in &next {
            hasher.update(id.as_bytes());
            hasher.update([0]);
            hasher.update(entry.fingerprint.as_bytes());
            hasher.update([0]);
        }
        let snapshot = Arc::new(Snapshot {
            apps: next
                .iter()
                .map(|(id, known)| (id.clone(), known.entry.clone()))
                .collect(),
            fingerprint: hex::encode(hasher.finalize()),
            sources: next
                .iter()
                .filter_map(|(id, known)| Some((id.clone(), known.source.clone()?)))
                .collect(),
        });
        *known = next;
        if let Ok(mut current) = self.snapshot.write() {
            *current = snapshot.clone();
        }
        snapshot
    }

    /// The resource of `app_id` at `revision`: the current one, or a superseded
    /// one still in the history. Never another revision's bytes.
    pub fn resource(&self, app_id: &str, revision: &str) -> Result<Arc<Resource>, AppError> {
        let snapshot = self.current();
        if let Some(AppEntry::Valid(package)) = snapshot.apps.get(app_id)
            && package.resource.revision == revision
        {
            return Ok(Arc::new(package.resource.clone()));
        }
        let history = self
            .history
            .lock()
            .map_err(|_| AppError::from_code(ErrorCode::Internal))?;
        if let Some(resource) = history
            .resources
            .get(&(app_id.to_owned(), revision.to_owned()))
        {
            return Ok(resource.clone());
        }
        if snapshot.apps.contains_key(app_id) || history.order.iter().any(|(app, _)| app == app_id)
        {
            Err(AppError::from_code(ErrorCode::RevisionUnavailable))
        } else {
            Err(AppError::from_code(ErrorCode::NotFound))
        }
    }
}

/// Validates the package in `dir` and, when it is valid, returns the exact
/// files it was assembled from: read back and compared with the resource's
/// `sasha.sourceDigest` (sha256 over every path and byte). When the files
/// changed in between, what was read is validated instead, so the package and
/// its files always agree. `None` when the read-back is refused by the
/// package rules (the folder changed again; the next refresh sees it).
fn validate_with_source(dir: &Path) -> (Validation, Option<PackageSource>) {
    let validation = validate_dir(dir);
    let Some(package) = &validation.package else {
        return (validation, None);
    };
    let mut problems = Diagnostics::new();
    let source = read_package(dir, &mut problems);
    if !problems.is_empty() {
        return (validation, None);
    }
    let validated = package.resource.meta["sasha"]["sourceDigest"].as_str();
    if validated == Some(source_digest(&source).as_str()) {
        return (validation, Some(source));
    }
    let folder = dir
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default();
    let again = validate_source(folder, source.clone());
    let kept = again.package.is_some().then_some(source);
    (again, kept)
}

/// The package folders in `apps_dir`: every real directory except `_shared`
/// and dot-folders. A symlinked folder is still listed: the validator refuses it.
pub(crate) fn discover(apps_dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(apps_dir) else {
        return Vec::new();
    };
    let mut folders: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_owned();
            if name.starts_with('.') || name == "_shared" {
                return None;
            }
            let kind = entry.file_type().ok()?;
            (kind.is_dir() || kind.is_symlink()).then(|| (name, entry.path()))
        })
        .collect();
    folders.sort();
    folders
}

/// A cheap identity of a package folder's current state.
pub(crate) fn fingerprint(dir: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let mut hasher = Sha256::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    let mut seen = 0usize;
    while let Some((folder, prefix)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            hasher.update(b"unreadable\0");
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|entry| entry.file_name());
        for entry in entries {
            seen += 1;
            if seen > 4096 {
                hasher.update(b"truncated\0");
                return hex::encode(hasher.finalize());
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = format!("{prefix}/{name}");
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            hasher.update(path.as_bytes());
            for number in [
                meta.len(),
                meta.ino(),
                meta.ctime() as u64,
                meta.ctime_nsec() as u64,
                meta.mtime_nsec() as u64,
                u64::from(meta.mode()),
            ] {
                hasher.update(number.to_le_bytes());
            }
            if meta.is_dir() && prefix.matches('/').count() < 8 {
                stack.push((entry.path(), path));
            }
        }
    }
    hex::encode(hasher.finalize())
}

/// Called with every snapshot a watcher-driven refresh produces.
pub type OnRefresh = Arc<dyn Fn(Arc<Snapshot>) + Send + Sync>;

/// Refreshes `catalogue` whenever something changes below its apps folder,
/// until `shutdown`. Events are coalesced: one refresh runs at a time and
/// covers every event that arrived before it started.
pub fn watch(
    catalogue: Arc<Catalogue>,
    shutdown: tokio_util::sync::CancellationToken,
    on_refresh: OnRefresh,
) -> Result<(), notify::Error> {
    use notify::Watcher as _;
    let (events, mut receiver) = tokio::sync::mpsc::channel::<()>(1);
    let mut watcher = notify::recommended_watcher(move |_event: notify::Result<notify::Event>| {
        // A full channel already holds a pending refresh; that one will see this change.
        let _ = events.try_send(());
    })?;
    watcher.watch(catalogue.apps_dir(), notify::RecursiveMode::Recursive)?;
    tokio::spawn(async move {
        let _watcher = watcher;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                event = receiver.recv() => if event.is_none() { break },
            }
            // Let a burst of writes (an editor saving several files) settle.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            while receiver.try_recv().is_ok() {}
            let catalogue = catalogue.clone();
            match tokio::task::spawn_blocking(move || catalogue.refresh()).await {
                Ok(snapshot) => on_refresh(snapshot),
                Err(error) => tracing::error!(%error, "catalogue refresh failed"),
            }
        }
    });
    Ok(())
}

/// The catalogue as the Studio assistant and app chat read it: each app's
/// name, revision and declared capabilities, or how many problems it has.
impl AppCatalogue for Catalogue {
    fn app(&self, app_id: &str) -> Option<CatalogueApp> {
        self.current().apps.get(app_id).map(catalogue_app)
    }

    fn apps(&self, app_ids: &[&str]) -> Vec<Option<CatalogueApp>> {
        let snapshot = self.current();
        app_ids
            .iter()
            .map(|id| snapshot.apps.get(*id).map(catalogue_app))
            .collect()
    }

    fn is_member(&self, app_id: &str) -> bool {
        Catalogue::is_member(self, app_id)
    }
}

fn catalogue_app(entry: &AppEntry) -> CatalogueApp {
    match entry {
        AppEntry::Valid(package) => CatalogueApp::Valid(ValidApp {
            name: package.manifest.name.clone(),
            revision: package.resource.revision.clone(),
            chat: package.manifest.capabilities.chat,
            files: package.manifest.capabilities.files,
        }),
        AppEntry::Invalid(diagnostics) => CatalogueApp::Invalid {
            problems: diagnostics.len(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs_with(ids: &[&str]) -> tempfile::TempDir {
        let docs = tempfile::tempdir().unwrap();
        for id in ids {
            crate::test_world::copy_fixture(id, &docs.path().join("apps").join(id));
        }
        docs
    }

    fn valid(snapshot: &Snapshot, id: &str) -> Arc<Package> {
        match snapshot.apps.get(id) {
            Some(AppEntry::Valid(package)) => package.clone(),
            other => panic!("{id} is not valid: {other:?}"),
        }
    }

    fn edit(docs: &Path, id: &str, file: &str, from: &str, to: &str) {
        let path = docs.join("apps").join(id).join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replacen(from, to, 1);
        // Atomic replace, like the source tools: a new inode every time.
        let temp = path.with_extension("tmp-write");
        std::fs::write(&temp, text).unwrap();
        std::fs::rename(&temp, &path).unwrap();
    }

    #[test]
    fn discovers_valid_and_invalid_packages_and_skips_shared() {
        let docs = docs_with(&["hello"]);
        std::fs::create_dir_all(docs.path().join("apps/_shared")).unwrap();
        std::fs::create_dir_all(docs.path().join("apps/.trash/x")).unwrap();
        std::fs::create_dir_all(docs.path().join("apps/broken")).unwrap();
        std::fs::write(docs.path().join("apps/broken/APP.md"), "no front matter").unwrap();
        let catalogue = Catalogue::new(docs.path(), 4);
        let snapshot = catalogue.refresh();
        assert_eq!(
            snapshot.apps.keys().collect::<Vec<_>>(),
            ["broken", "hello"]
        );
        let package = valid(&snapshot, "hello");
        assert_eq!(package.manifest.id, "hello");
        match &snapshot.apps["broken"] {
            AppEntry::Invalid(diagnostics) => {
                assert!(diagnostics.iter().any(|d| d.code == "PACKAGE_MISSING_FILE"))
            }
            AppEntry::Valid(_) => panic!("broken must be invalid"),
        }
        assert_eq!(snapshot.valid().count(), 1);
    }

    #[test]
    fn unchanged_packages_keep_identity_and_changes_are_seen_at_once() {
        let docs = docs_with(&["hello"]);
        let catalogue = Catalogue::new(docs.path(), 4);
        let first = catalogue.refresh();
        let again = catalogue.refresh();
        assert!(Arc::ptr_eq(
            &valid(&first, "hello"),
            &valid(&again, "hello")
        ));
        assert_eq!(first.fingerprint, again.fingerprint);

        let old = valid(&first, "hello").resource.clone();
        edit(docs.path(), "hello", "styles.css", "1.5rem", "1.6rem");
        let changed = catalogue.refresh();
        let new = valid(&changed, "hello").resource.clone();
        assert_ne!(new.revision, old.revision);
        assert_ne!(changed.fingerprint, first.fingerprint);
        // Both revisions are readable, each with its own exact bytes.
        assert_eq!(*catalogue.resource("hello", &old.revision).unwrap(), old);
        assert_eq!(*catalogue.resource("hello", &new.revision).unwrap(), new);
    }

    #[test]
    fn history_is_bounded_and_never_serves_current_source_under_an_old_identity() {
        let docs = docs_with(&["hello"]);
        let catalogue = Catalogue::new(docs.path(), 1);
        let r1 = valid(&catalogue.refresh(), "hello")
            .resource
            .revision
            .clone();
        edit(docs.path(), "hello", "styles.css", "1.5rem", "1.6rem");
        let r2 = valid(&catalogue.refresh(), "hello")
            .resource
            .revision
            .clone();
        edit(docs.path(), "hello", "styles.css", "1.6rem", "1.7rem");
        let r3 = valid(&catalogue.refresh(), "hello")
            .resource
            .revision
            .clone();
        // r1 was evicted by r2 (capacity 1); r2 is in history; r3 is current.
        let error = catalogue.resource("hello", &r1).unwrap_err();
        assert_eq!(error.code, ErrorCode::RevisionUnavailable);
        assert!(catalogue.resource("hello", &r2).is_ok());
        assert!(catalogue.resource("hello", &r3).is_ok());
        assert_eq!(
            catalogue.resource("nope", &r3).unwrap_err().code,
            ErrorCode::NotFound
        );

        // A restart keeps nothing but current source.
        let restarted = Catalogue::new(docs.path(), 1);
        assert_eq!(valid(&restarted.refresh(), "hello").resource.revision, r3);
        assert_eq!(
            restarted.resource("hello", &r2).unwrap_err().code,
            ErrorCode::RevisionUnavailable
        );
    }

    #[test]
    fn a_valid_package_keeps_the_exact_files_it_was_assembled_from() {
        let docs = docs_with(&["hello"]);
        std::fs::create_dir_all(docs.path().join("apps/broken")).unwrap();
        std::fs::write(docs.path().join("apps/broken/APP.md"), "no front matter").unwrap();
        let catalogue = Catalogue::new(docs.path(), 4);
        let snapshot = catalogue.refresh();
        let package = valid(&snapshot, "hello");
        let source = snapshot.source("hello").expect("the files are kept");
        assert_eq!(
            package.resource.meta["sasha"]["sourceDigest"],
            source_digest(source).as_str()
        );
        let on_disk = std::fs::read(docs.path().join("apps/hello/app.js")).unwrap();
        assert!(
            source
                .entries()
                .iter()
                .any(|(path, bytes)| *path == "app.js" && *bytes == on_disk.as_slice())
        );
        assert!(snapshot.source("broken").is_none());
        assert!(snapshot.source("nope").is_none());
        // An unchanged package keeps its files' identity; a change replaces them.
        let again = catalogue.refresh();
        assert!(Arc::ptr_eq(source, again.source("hello").unwrap()));
        edit(docs.path(), "hello", "styles.css", "1.5rem", "1.6rem");
        let changed = catalogue.refresh();
        let new = changed.source("hello").unwrap();
        assert_eq!(
            valid(&changed, "hello").resource.meta["sasha"]["sourceDigest"],
            source_digest(new).as_str()
        );
        assert_ne!(source_digest(new), source_digest(source));
    }

    #[test]
    fn removed_packages_release_their_pins() {
        let docs = docs_with(&["hello"]);
        let catalogue = Catalogue::new(docs.path(), 0);
        let revision = valid(&catalogue.refresh(), "hello")
            .resource
            .revision
            .clone();
        std::fs::remove_dir_all(docs.path().join("apps/hello")).unwrap();
        let snapshot = catalogue.refresh();
        assert!(snapshot.apps.is_empty());
        assert!(catalogue.resource("hello", &revision).is_err());
    }

    #[test]
    fn an_invalid_edit_withdraws_the_app_until_fixed() {
        let docs = docs_with(&["hello"]);
        let catalogue = Catalogue::new(docs.path(), 4);
        let good = valid(&catalogue.refresh(), "hello")
            .resource
            .revision
            .clone();
        edit(
            docs.path(),
            "hello",
            "app.js",
            "\"use strict\";",
            "import x from './x.js';",
        );
        let snapshot = catalogue.refresh();
        match &snapshot.apps["hello"] {
            AppEntry::Invalid(diagnostics) => assert!(
                diagnostics
                    .iter()
                    .any(|d| d.file == "app.js" && d.code == "JS_MODULE_SYNTAX"),
                "{diagnostics:?}"
            ),
            AppEntry::Valid(_) => panic!("must be invalid"),
        }
        // The last good revision stays readable from history.
        assert!(catalogue.resource("hello", &good).is_ok());
        edit(
            docs.path(),
            "hello",
            "app.js",
            "import x from './x.js';",
            "\"use strict\";",
        );
        assert_eq!(valid(&catalogue.refresh(), "hello").resource.revision, good);
    }

    #[tokio::test]
    async fn the_watcher_refreshes_on_file_changes() {
        let docs = docs_with(&["hello"]);
        let catalogue = Arc::new(Catalogue::new(docs.path(), 4));
        let before = valid(&catalogue.refresh(), "hello")
            .resource
            .revision
            .clone();
        let shutdown = tokio_util::sync::CancellationToken::new();
        watch(catalogue.clone(), shutdown.clone(), Arc::new(|_| {})).unwrap();
        edit(docs.path(), "hello", "styles.css", "1.5rem", "2rem");
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let current = catalogue.current();
            if let Some(AppEntry::Valid(package)) = current.apps.get("hello")
                && package.resource.revision != before
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the watcher never refreshed"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        shutdown.cancel();
    }
}
