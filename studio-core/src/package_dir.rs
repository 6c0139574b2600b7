//! Writing whole package folders safely, for creating, reverting,
//! publishing and deleting apps: a staging folder beside `apps/` emptied of leftovers, a
//! tree written with every file and folder fsynced, and renames that never
//! replace (or atomically exchange) what is there.
//!
//! This module must never decide what a package holds: callers validate first.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// The folder below `DOCS_ROOT` where a package replacing a live one (a
/// revert, a draft's publication) is assembled before the swap (a sibling
/// of the apps folder, never listed).
pub(crate) const SWAP_STAGING_DIR: &str = ".app-revert-staging";

/// Serialises swaps in this process (one staging folder).
static SWAP_STAGING: Mutex<()> = Mutex::new(());

/// Creates the staging folder or empties it of the leftovers of an
/// interrupted `what` (the caller serialises its staging); a symlink there
/// is refused.
pub(crate) fn prepare_staging(staging: &Path, what: &str) -> io::Result<()> {
    match std::fs::symlink_metadata(staging) {
        Ok(metadata) if metadata.is_dir() => {
            for entry in std::fs::read_dir(staging)? {
                let path = entry?.path();
                tracing::info!(leftover = %path.display(), "removing the leftover of an interrupted {what}");
                std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path))?;
            }
            Ok(())
        }
        Ok(_) => Err(io::Error::other(format!(
            "{} is not a folder",
            staging.display()
        ))),
        Err(error) if error.kind() == io::ErrorKind::NotFound => std::fs::create_dir(staging),
        Err(error) => Err(error),
    }
}

/// Writes `files` as the new folder `root`, each file created exclusively
/// and fsynced, then every folder fsynced, deepest first.
pub(crate) fn write_tree(root: &Path, files: &BTreeMap<String, Vec<u8>>) -> io::Result<()> {
    std::fs::create_dir(root)?;
    let mut dirs: BTreeSet<PathBuf> = BTreeSet::from([root.to_owned()]);
    for (path, bytes) in files {
        if crate::source::check_path(path).is_err()
            || path
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..")
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{path:?} is not a plain relative path"),
            ));
        }
        let full = root.join(path);
        if let Some(parent) = full.parent()
            && !dirs.contains(parent)
        {
            std::fs::create_dir_all(parent)?;
            let mut folder = parent.to_owned();
            while folder != root && dirs.insert(folder.clone()) {
                match folder.parent() {
                    Some(up) => folder = up.to_owned(),
                    None => break,
                }
            }
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&full)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    let mut dirs: Vec<PathBuf> = dirs.into_iter().collect();
    dirs.sort_by_key(|dir| std::cmp::Reverse(dir.components().count()));
    for dir in &dirs {
        sync_dir(dir)?;
    }
    Ok(())
}

pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// `rename(2)` that never replaces what is at `to` (`RENAME_NOREPLACE`); on a
/// file system without it, a checked plain rename.
pub(crate) fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    use rustix::io::Errno;
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::INVAL | Errno::NOSYS) => match std::fs::symlink_metadata(to) {
            Ok(_) => Err(io::Error::from(io::ErrorKind::AlreadyExists)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => std::fs::rename(from, to),
            Err(error) => Err(error),
        },
        Err(errno) => Err(io::Error::from(errno)),
    }
}

/// Replaces the package folder `apps_dir/<id>` by one holding exactly
/// `files`: written and fsynced into a fresh slot of `staging`, then swapped
/// in with one `RENAME_EXCHANGE` (a folder that is gone is renamed into
/// place without replacing anything); the old folder, now in the slot, is
/// removed. Leftover slots of an interrupted revert are removed first.
pub(crate) fn swap_package(
    apps_dir: &Path,
    staging: &Path,
    id: &str,
    files: &BTreeMap<String, Vec<u8>>,
) -> io::Result<()> {
    let _serial = SWAP_STAGING.lock().unwrap_or_else(PoisonError::into_inner);
    prepare_staging(staging, "revert")?;
    let slot = staging.join(format!("{id}-{:016x}", rand::random::<u64>()));
    std::fs::create_dir(&slot)?;
    let staged = slot.join(id);
    let dest = apps_dir.join(id);
    let outcome = write_tree(&staged, files).and_then(|()| exchange(&staged, &dest));
    if outcome.is_ok() {
        let _ = sync_dir(apps_dir);
    }
    let _ = std::fs::remove_dir_all(&slot);
    outcome
}

/// Removes the package folder `apps_dir/<id>` whole: renamed into a fresh
/// slot of `staging` (so the catalogue never sees half a package), then
/// removed. A folder that is already gone is no error.
pub(crate) fn remove_package(apps_dir: &Path, staging: &Path, id: &str) -> io::Result<()> {
    let _serial = SWAP_STAGING.lock().unwrap_or_else(PoisonError::into_inner);
    prepare_staging(staging, "revert")?;
    let slot = staging.join(format!("{id}-{:016x}", rand::random::<u64>()));
    std::fs::create_dir(&slot)?;
    let outcome = match std::fs::rename(apps_dir.join(id), slot.join(id)) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other.and_then(|()| sync_dir(apps_dir)),
    };
    let _ = std::fs::remove_dir_all(&slot);
    outcome
}

/// Swaps `staged` and `dest` atomically (`RENAME_EXCHANGE`); when `dest` is
/// gone, renames `staged` there without replacing anything. A file system
/// without the exchange gets two renames (the package is briefly absent,
/// never half written).
fn exchange(staged: &Path, dest: &Path) -> io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    use rustix::io::Errno;
    match renameat_with(CWD, staged, CWD, dest, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(()),
        Err(Errno::NOENT) if std::fs::symlink_metadata(dest).is_err() => {
            match renameat_with(CWD, staged, CWD, dest, RenameFlags::NOREPLACE) {
                Ok(()) => Ok(()),
                Err(errno) => Err(io::Error::from(errno)),
            }
        }
        Err(Errno::INVAL | Errno::NOSYS) => {
            let aside = staged.with_extension("old");
            std::fs::rename(dest, &aside)?;
            std::fs::rename(staged, dest).inspect_err(|_| {
                let _ = std::fs::rename(&aside, dest);
            })?;
            // The old folder leaves with the slot.
            std::fs::rename(&aside, staged)
        }
        Err(errno) => Err(io::Error::from(errno)),
    }
}
