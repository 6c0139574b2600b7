//! Writing whole package folders safely, for creating, reverting and
//! deleting apps: a staging folder beside `apps/` emptied of leftovers, a
//! tree written with every file and folder fsynced, and renames that never
//! replace (or atomically exchange) what is there.
//!
//! This module must never decide what a package holds: callers validate first.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

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
