//! This replica's `DOCS_ROOT/apps` as a working copy of the package heads in
//! the core database (`studio_store::package_heads`), so studio-core replicas
//! share their packages without sharing a disk: a change made through one
//! (a source tool, a publication, a revert, a deletion, the seeder, a person
//! editing the folder) is advanced in the database and written into every
//! other replica's folder within [`crate::peers::FOLLOW_EVERY`].
//!
//! Each package is settled three ways, always under the source tools' lock
//! of that app (so no write of this replica interleaves): the *base* (the
//! head this replica last took or gave, kept in [`BASES_FILE`] so a restart
//! knows which side moved), the *head* in the database, and the folder.
//!
//! - Head still at the base, folder changed: the change is this replica's and
//!   is advanced from the base's generation (a removed folder: a tombstone).
//! - Head moved, folder still the base: another replica changed it; the head
//!   is swapped in whole (`package_dir::swap_package`) or the folder removed.
//! - Both moved (two replicas changed one package in the same moment, or a
//!   folder edited while its replica was stopped and changed meanwhile
//!   elsewhere): the head wins and the folder is moved, whole, to
//!   `DOCS_ROOT/.package-conflicts/` (never served), with a warning naming it.
//!   A source tool's change that loses this way is refused
//!   ([`Settled::Overtaken`]), so no answer claims a change the head lacks.
//! - No base and no head (an installation from before this, or a package
//!   new on this replica): the folder is advanced as generation 1.
//!
//! With one replica on SQLite the head only ever moves through this replica,
//! so every folder edit is taken as is: `DOCS_ROOT` stays the place authors
//! edit, while the server runs or while it is stopped.
//!
//! What it must never do: write a folder except whole (one swap), advance a
//! folder it could not read in full (the others keep the previous head; a
//! warning says why), or drop a folder it replaces without having given or
//! taken it (it is moved aside).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use sasha_package::Diagnostics;
use sasha_package::assemble::source_digest;
use sasha_package::source::read_package;
use serde::{Deserialize, Serialize};
use studio_store::{Advanced, Store, StoreError};

use crate::package_dir::{SWAP_STAGING_DIR, swap_package};

/// The bases, beside the apps folder: hidden from the catalogue.
pub(crate) const BASES_FILE: &str = ".package-heads.json";
/// Where a folder that lost to the head is kept.
pub(crate) const CONFLICTS_DIR: &str = ".package-conflicts";

/// What settling one package did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Folder, base and head agree.
    Unchanged,
    /// This replica's change is the head at this generation.
    Gave(i64),
    /// Another replica's head was written into the folder (or matched it).
    Took(i64),
    /// Both moved: the head was written in and the folder kept at this path.
    Overtaken(PathBuf),
    /// The folder could not be read in full; the head was left alone.
    Unreadable(String),
}

/// The head a replica last gave or took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Base {
    generation: i64,
    /// `source_digest` of the files; empty for a removed package.
    digest: String,
    /// The folder's fingerprint when the base was set (not persisted): an
    /// unchanged fingerprint spares reading the files again.
    #[serde(skip)]
    fingerprint: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Bases {
    apps: BTreeMap<String, Base>,
}

/// A package folder as found.
enum Folder {
    Absent,
    Files {
        digest: String,
        files: BTreeMap<String, Vec<u8>>,
    },
    Unreadable(String),
}

impl Folder {
    fn digest(&self) -> Option<&str> {
        match self {
            Folder::Absent => Some(""),
            Folder::Files { digest, .. } => Some(digest),
            Folder::Unreadable(_) => None,
        }
    }
}

/// The working copy of one docs tree.
#[derive(Debug)]
pub(crate) struct PackageSync {
    docs_root: PathBuf,
    apps_dir: PathBuf,
    bases: Mutex<Bases>,
    /// How often each package's folder lost to another replica's head
    /// ([`Settled::Overtaken`]) since this process started: a change made
    /// between two settles compares the counts to learn whether it was kept.
    overtaken: Mutex<BTreeMap<String, u64>>,
}

impl PackageSync {
    /// The working copy of `docs_root`, with the bases it recorded (none
    /// when the file is missing; an unreadable file is logged and treated
    /// as none, so the heads win).
    pub(crate) fn open(docs_root: &Path) -> PackageSync {
        let bases = match std::fs::read(docs_root.join(BASES_FILE)) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|error| {
                tracing::warn!(%error, file = BASES_FILE, "the record of the package heads this replica holds is unreadable; the core database's heads win");
                Bases::default()
            }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Bases::default(),
            Err(error) => {
                tracing::warn!(%error, file = BASES_FILE, "the record of the package heads this replica holds cannot be read; the core database's heads win");
                Bases::default()
            }
        };
        PackageSync {
            docs_root: docs_root.to_owned(),
            apps_dir: docs_root.join("apps"),
            bases: Mutex::new(bases),
            overtaken: Mutex::new(BTreeMap::new()),
        }
    }

    /// How often the folder of `id` lost to another replica's head.
    pub(crate) fn overtaken(&self, id: &str) -> u64 {
        self.overtaken
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .copied()
            .unwrap_or(0)
    }

    /// The generation of every package this replica holds a base for.
    pub(crate) fn base_generations(&self) -> BTreeMap<String, i64> {
        self.bases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .apps
            .iter()
            .map(|(id, base)| (id.clone(), base.generation))
            .collect()
    }

    /// The packages worth settling: every folder, head and base.
    pub(crate) fn known_ids(&self, heads: &BTreeMap<String, i64>) -> BTreeSet<String> {
        let mut ids: BTreeSet<String> = crate::catalogue::discover(&self.apps_dir)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        ids.extend(heads.keys().cloned());
        ids.extend(self.base_generations().into_keys());
        ids.remove(crate::seed::SHARED);
        ids
    }

    /// Settles the package `id` against the head at `heads[id]` (blocking;
    /// the caller holds the source tools' lock of `id`).
    pub(crate) fn settle(
        &self,
        store: &Store,
        id: &str,
        heads: &BTreeMap<String, i64>,
    ) -> Result<Settled, StoreError> {
        let base = self
            .bases
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .apps
            .get(id)
            .cloned();
        let dir = self.apps_dir.join(id);
        let fingerprint = crate::catalogue::fingerprint(&dir);
        let folder = match &base {
            Some(base) if base.fingerprint.as_deref() == Some(fingerprint.as_str()) => None,
            _ => Some(read_folder(&dir)),
        };
        let changed = match (&base, &folder) {
            (_, None) => false,
            (Some(base), Some(folder)) => folder.digest() != Some(base.digest.as_str()),
            (None, Some(folder)) => !matches!(folder, Folder::Absent),
        };
        let base_generation = base.as_ref().map_or(0, |base| base.generation);
        // `heads` may predate a settle of this replica that ran since (the
        // caller read it before taking this app's lock): a head that seems
        // to have moved is read again before it is taken for another
        // replica's. One that seems not to have moved needs no read: the
        // advance below is checked against the database's generation.
        let mut head = heads.get(id).copied().unwrap_or(0);
        if head != base_generation {
            head = store.package_head_generation(id)?;
        }
        if head == base_generation {
            match &folder {
                _ if !changed => {
                    if let Some(folder) = &folder
                        && let Some(digest) = folder.digest()
                        && base.is_some()
                    {
                        self.set_base(id, base_generation, digest, Some(fingerprint))?;
                    }
                    return Ok(Settled::Unchanged);
                }
                Some(Folder::Unreadable(reason)) => {
                    tracing::warn!(app_id = %id, %reason, "the package folder cannot be read in full; the other replicas keep its previous files");
                    return Ok(Settled::Unreadable(reason.clone()));
                }
                Some(folder) => {
                    let (digest, files) = match folder {
                        Folder::Files { digest, files } => (digest.as_str(), Some(files)),
                        _ => ("", None),
                    };
                    match store.advance_package_head(id, base_generation, digest, files)? {
                        Advanced::To(generation) => {
                            self.set_base(id, generation, digest, Some(fingerprint))?;
                            return Ok(Settled::Gave(generation));
                        }
                        // Another replica got there first: settled below.
                        Advanced::Moved(_) => {}
                    }
                }
                None => unreachable!("an unread folder is unchanged"),
            }
        }
        // Another replica moved the head.
        let Some(taken) = store.package_head(id)? else {
            // The database lost the head this replica based its copy on
            // (a restored or replaced database): the folder is given again.
            self.forget_base(id)?;
            return self.settle(store, id, &BTreeMap::new());
        };
        let folder = folder.unwrap_or_else(|| read_folder(&dir));
        if folder.digest() == Some(taken.digest.as_str()) {
            self.set_base(id, taken.generation, &taken.digest, Some(fingerprint))?;
            return Ok(Settled::Took(taken.generation));
        }
        let kept = if changed && !matches!(folder, Folder::Absent) {
            Some(self.move_aside(id, taken.generation)?)
        } else {
            None
        };
        let staging = self.docs_root.join(SWAP_STAGING_DIR);
        match &taken.files {
            Some(files) => std::fs::create_dir_all(&self.apps_dir)
                .and_then(|()| swap_package(&self.apps_dir, &staging, id, files)),
            None => crate::package_dir::remove_package(&self.apps_dir, &staging, id),
        }
        .map_err(|error| {
            StoreError::Database(format!(
                "the package {id} could not be written from the core database: {error}"
            ))
        })?;
        let fingerprint = crate::catalogue::fingerprint(&dir);
        self.set_base(id, taken.generation, &taken.digest, Some(fingerprint))?;
        Ok(match kept {
            Some(path) => {
                *self
                    .overtaken
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(id.to_owned())
                    .or_default() += 1;
                tracing::warn!(app_id = %id, kept = %path.display(), generation = taken.generation, "the package changed here and on another replica at once; the other replica's change is kept, this folder was moved aside");
                Settled::Overtaken(path)
            }
            None => Settled::Took(taken.generation),
        })
    }

    fn move_aside(&self, id: &str, generation: i64) -> Result<PathBuf, StoreError> {
        let conflicts = self.docs_root.join(CONFLICTS_DIR);
        let kept = conflicts.join(format!(
            "{id}-before-{generation}-{:08x}",
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&conflicts)
            .and_then(|()| std::fs::rename(self.apps_dir.join(id), &kept))
            .map_err(|error| {
                StoreError::Database(format!(
                    "the package {id} could not be moved aside before the core database's copy replaced it: {error}"
                ))
            })?;
        Ok(kept)
    }

    fn set_base(
        &self,
        id: &str,
        generation: i64,
        digest: &str,
        fingerprint: Option<String>,
    ) -> Result<(), StoreError> {
        let mut bases = self.bases.lock().unwrap_or_else(PoisonError::into_inner);
        let base = Base {
            generation,
            digest: digest.to_owned(),
            fingerprint,
        };
        let persisted_change = bases
            .apps
            .get(id)
            .is_none_or(|old| old.generation != generation || old.digest != digest);
        bases.apps.insert(id.to_owned(), base);
        if persisted_change {
            self.save(&bases)?;
        }
        Ok(())
    }

    fn forget_base(&self, id: &str) -> Result<(), StoreError> {
        let mut bases = self.bases.lock().unwrap_or_else(PoisonError::into_inner);
        if bases.apps.remove(id).is_some() {
            self.save(&bases)?;
        }
        Ok(())
    }

    /// Writes the bases whole: a fresh file, fsynced, renamed over the old.
    fn save(&self, bases: &Bases) -> Result<(), StoreError> {
        let target = self.docs_root.join(BASES_FILE);
        let temporary = self
            .docs_root
            .join(format!("{BASES_FILE}.{:08x}", rand::random::<u32>()));
        let written = serde_json::to_vec(bases)
            .map_err(io::Error::other)
            .and_then(|bytes| {
                use std::io::Write as _;
                let mut file = std::fs::File::create_new(&temporary)?;
                file.write_all(&bytes)?;
                file.sync_all()
            })
            .and_then(|()| std::fs::rename(&temporary, &target))
            .and_then(|()| crate::package_dir::sync_dir(&self.docs_root));
        written.map_err(|error| {
            let _ = std::fs::remove_file(&temporary);
            StoreError::Database(format!(
                "the record of the package heads this replica holds ({}) could not be written: {error}",
                target.display()
            ))
        })
    }
}

/// What [`import_packages`] did with one folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Imported {
    /// Its files are now the head, at this generation.
    Head(i64),
    /// The head already held exactly these files.
    Unchanged,
    /// Not imported: the folder could not be read in full (why).
    Unreadable(String),
}

/// Makes every package folder under `apps_dir` its package's head: the
/// operator's import (`sasha admin import`), where the folder wins over
/// whatever the head holds. Running replicas take each within a second.
/// Blocking. A head another replica moves at the same moment is retried.
pub fn import_packages(
    store: &Store,
    apps_dir: &Path,
) -> Result<Vec<(String, Imported)>, StoreError> {
    let mut imported = Vec::new();
    for (id, dir) in crate::catalogue::discover(apps_dir) {
        if id == crate::seed::SHARED {
            continue;
        }
        let outcome = match read_folder(&dir) {
            Folder::Unreadable(reason) => Imported::Unreadable(reason),
            Folder::Absent => continue,
            Folder::Files { digest, files } => loop {
                let head = store.package_head(&id)?;
                let from = match &head {
                    Some(head) if head.digest == digest => break Imported::Unchanged,
                    Some(head) => head.generation,
                    None => 0,
                };
                if let Advanced::To(generation) =
                    store.advance_package_head(&id, from, &digest, Some(&files))?
                {
                    break Imported::Head(generation);
                }
            },
        };
        imported.push((id, outcome));
    }
    Ok(imported)
}

/// Writes every package head (not the removed ones) into a new folder of
/// its own under `apps_dir`, which must not hold one of that name yet: the
/// operator's export (`sasha admin export-packages`). Answers the ids
/// written. Blocking.
pub fn export_packages(store: &Store, apps_dir: &Path) -> Result<Vec<String>, StoreError> {
    std::fs::create_dir_all(apps_dir).map_err(|error| {
        StoreError::Database(format!("cannot create {}: {error}", apps_dir.display()))
    })?;
    let mut written = Vec::new();
    for id in store.package_head_generations()?.into_keys() {
        let Some(files) = store.package_head(&id)?.and_then(|head| head.files) else {
            continue;
        };
        crate::package_dir::write_tree(&apps_dir.join(&id), &files).map_err(|error| {
            StoreError::Database(format!(
                "cannot write {}: {error}",
                apps_dir.join(&id).display()
            ))
        })?;
        written.push(id);
    }
    Ok(written)
}

/// Reads a package folder in full, with the validator's reading rules.
fn read_folder(dir: &Path) -> Folder {
    match std::fs::symlink_metadata(dir) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Folder::Absent,
        Err(error) => return Folder::Unreadable(error.to_string()),
        Ok(_) => {}
    }
    let mut problems = Diagnostics::new();
    let source = read_package(dir, &mut problems);
    if let Some(problem) = problems.iter().next() {
        return Folder::Unreadable(format!("{}: {}", problem.file, problem.reason));
    }
    let digest = source_digest(&source);
    let files = source
        .entries()
        .into_iter()
        .map(|(path, bytes)| (path.to_owned(), bytes.to_vec()))
        .collect();
    Folder::Files { digest, files }
}

#[cfg(test)]
mod tests;
