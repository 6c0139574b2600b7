//! The modes of what the engine keeps under `APP_DATA_ROOT`: every folder
//! 0700 and every SQLite file (live, a preview's scratch copy, a deleted
//! app's backup, and the `-wal`, `-shm` and `-journal` files beside each)
//! 0600, like the core database. App data is people's rows: no other
//! account on the machine reads it.
//!
//! The modes are set exactly, with `fchmod` after the create, so a
//! permissive umask cannot widen them and a file or folder an older version
//! left 0644/0755 is narrowed when it is next used. A database file is
//! created (empty, which SQLite reads as a new database) before SQLite
//! opens it, because SQLite makes a main file 0644 minus the umask; the
//! `-wal`, `-shm` and `-journal` files SQLite makes take the main file's
//! mode, and any already there are narrowed here.
//!
//! Nothing here follows a symbolic link: a link planted in place of a file
//! or folder is refused (`ELOOP`), never chmodded through.

use std::io;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

/// The mode of every folder under `APP_DATA_ROOT`.
pub const FOLDER_MODE: u32 = 0o700;
/// The mode of every SQLite file under `APP_DATA_ROOT`.
pub const FILE_MODE: u32 = 0o600;

/// The files SQLite keeps beside a database, by suffix.
const SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Creates the folder `dir` (its parent must exist) if it is missing, and
/// sets its mode to exactly [`FOLDER_MODE`].
pub fn private_folder(dir: &Path) -> io::Result<()> {
    match rustix::fs::mkdir(dir, Mode::from_raw_mode(FOLDER_MODE)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(error) => return Err(error.into()),
    }
    let folder = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::fs::fchmod(&folder, Mode::from_raw_mode(FOLDER_MODE))?;
    Ok(())
}

/// Creates the database file `path` (empty) if it is missing and sets it,
/// and each of its `-wal`, `-shm` and `-journal` files that exists, to
/// exactly [`FILE_MODE`].
pub fn private_database(path: &Path) -> io::Result<()> {
    let file = rustix::fs::open(
        path,
        OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(FILE_MODE),
    )?;
    rustix::fs::fchmod(&file, Mode::from_raw_mode(FILE_MODE))?;
    for suffix in SIDE_FILES {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        match rustix::fs::open(
            side.as_os_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(file) => rustix::fs::fchmod(&file, Mode::from_raw_mode(FILE_MODE))?,
            Err(rustix::io::Errno::NOENT) => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

/// `APP_DATA_ROOT` itself, which the operator may have made (a volume, a
/// link to one): created exactly [`FOLDER_MODE`] when missing (with any
/// missing parents); when it exists, other accounts' access is taken away
/// and the owner's and group's stay as the deployment set them (a
/// container volume's group). A root this process does not own keeps its
/// mode, which is logged: it cannot be changed from here.
pub fn private_root(root: &Path) -> io::Result<()> {
    if std::fs::symlink_metadata(root).is_err() {
        std::fs::create_dir_all(root)?;
        rustix::fs::chmod(root, Mode::from_raw_mode(FOLDER_MODE))?;
        return Ok(());
    }
    let mode = rustix::fs::stat(root)?.st_mode & 0o7777;
    if mode & 0o007 == 0 {
        return Ok(());
    }
    match rustix::fs::chmod(root, Mode::from_raw_mode(mode & !0o007)) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::PERM) => {
            tracing::warn!(
                root = %root.display(),
                mode = format!("{mode:o}"),
                "APP_DATA_ROOT is open to other accounts and this process cannot change that; app data files stay 0600"
            );
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::PathBuf;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn folders_and_databases_get_exact_modes_and_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("f");
        private_folder(&folder).unwrap();
        assert_eq!(mode(&folder), FOLDER_MODE);
        // An older, wider folder is narrowed; an existing one is no error.
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_folder(&folder).unwrap();
        assert_eq!(mode(&folder), FOLDER_MODE);

        let database = folder.join("a.sqlite");
        private_database(&database).unwrap();
        assert_eq!(mode(&database), FILE_MODE);
        assert_eq!(std::fs::metadata(&database).unwrap().len(), 0);
        // A wider file and its side files are narrowed, their bytes kept.
        std::fs::write(&database, b"kept").unwrap();
        for suffix in ["", "-wal", "-shm"] {
            let path = PathBuf::from(format!("{}{suffix}", database.display()));
            std::fs::write(&path, b"kept").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        private_database(&database).unwrap();
        for suffix in ["", "-wal", "-shm"] {
            let path = PathBuf::from(format!("{}{suffix}", database.display()));
            assert_eq!(mode(&path), FILE_MODE, "{}", path.display());
            assert_eq!(std::fs::read(&path).unwrap(), b"kept");
        }

        // A link in place of either is refused and its target left alone.
        let target = dir.path().join("target");
        std::fs::write(&target, b"x").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        let link = folder.join("b.sqlite");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(private_database(&link).is_err());
        let linked_folder = folder.join("g");
        std::os::unix::fs::symlink(dir.path(), &linked_folder).unwrap();
        assert!(private_folder(&linked_folder).is_err());
        assert_eq!(mode(&target), 0o644);
    }

    #[test]
    fn the_root_is_made_private_or_loses_only_other_accounts_access() {
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
        let dir = tempfile::tempdir().unwrap();
        let made = dir.path().join("state/apps");
        private_root(&made).unwrap();
        assert_eq!(mode(&made), FOLDER_MODE);
        // A deployment's group stays; other accounts lose their access.
        let wide = dir.path().join("wide");
        std::fs::create_dir(&wide).unwrap();
        std::fs::set_permissions(&wide, std::fs::Permissions::from_mode(0o2775)).unwrap();
        private_root(&wide).unwrap();
        assert_eq!(mode(&wide), 0o2770);
        private_root(&wide).unwrap();
        assert_eq!(mode(&wide), 0o2770);
        // Through a link, the folder it names.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&wide, &link).unwrap();
        std::fs::set_permissions(&wide, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_root(&link).unwrap();
        assert_eq!(mode(&wide), 0o750);
    }
}
