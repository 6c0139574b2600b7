//! The replica layout in object storage, and each database's generation.
//!
//! ```text
//! <prefix>/core/<generation>/…            the core database (DB_PATH)
//! <prefix>/apps/<app-id>/<generation>/…   one app database (APP_DATA_ROOT/<app-id>.sqlite)
//! ```
//!
//! Below a generation is Litestream's own layout (`ltx/<level>/…`). A
//! generation is one unbroken history of one database written by one owner:
//! `<unix milliseconds, 13 digits>-<8 hex digits>`, so names sort by the time
//! they began. A database starts a new generation whenever its local history
//! does not continue the one in object storage: it is new, it was restored
//! (`sasha restore`, or a role restoring a missing file at boot), or its
//! volume was lost. The generation a file belongs to is recorded beside it
//! (`<file>-generation`); a file without that record, or a record without
//! its file, starts a new one. Two writers' histories therefore never share
//! a generation, and a restore reads the newest generation that began before
//! the instant asked for. Issue 47 makes the owner's epoch (a fencing token
//! in the core database) part of the generation's name.
//!
//! What it must never do: reuse a generation for a file whose history it
//! cannot vouch for, or name a path outside the prefix.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Which database a replica holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Database {
    /// The core database (studio-core's `DB_PATH`).
    Core,
    /// One app's database, by app id.
    App(String),
}

/// The folder of every core generation.
pub const CORE_DIR: &str = "core/";
/// The folder of every app's generations.
pub const APPS_DIR: &str = "apps/";

impl Database {
    /// The database's folder below the prefix, ending in `/`.
    pub fn dir(&self) -> String {
        match self {
            Database::Core => CORE_DIR.to_owned(),
            Database::App(id) => format!("{APPS_DIR}{id}/"),
        }
    }

    /// One generation's path below the prefix (Litestream's replica path).
    pub fn generation_path(&self, generation: &Generation) -> String {
        format!("{}{}", self.dir(), generation.as_str())
    }

    /// How health reports and manifests name it: `core` or the app id.
    pub fn label(&self) -> &str {
        match self {
            Database::Core => "core",
            Database::App(id) => id,
        }
    }
}

/// One generation's name: `<13-digit unix milliseconds>-<8 hex digits>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Generation(String);

impl Generation {
    /// A new generation beginning now.
    pub fn begin() -> Generation {
        Generation::begin_at(time::OffsetDateTime::now_utc())
    }

    /// A new generation beginning at `instant`.
    fn begin_at(instant: time::OffsetDateTime) -> Generation {
        let millis = instant.unix_timestamp_nanos() / 1_000_000;
        Generation(format!("{millis:013}-{:08x}", rand::random::<u32>()))
    }

    /// A stored or listed name, if it has the generation shape.
    pub fn parse(text: &str) -> Option<Generation> {
        let (millis, random) = text.split_once('-')?;
        let shaped = millis.len() == 13
            && millis.bytes().all(|b| b.is_ascii_digit())
            && random.len() == 8
            && random
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        shaped.then(|| Generation(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// When the generation began, in unix milliseconds.
    pub fn began_millis(&self) -> i64 {
        self.0[..13].parse().unwrap_or(0)
    }
}

/// The file that records which generation a database file continues.
pub fn marker_path(database_file: &Path) -> PathBuf {
    let mut name = database_file.as_os_str().to_owned();
    name.push("-generation");
    PathBuf::from(name)
}

/// Litestream's local state of a database file (its LTX files and position):
/// `.<name>-litestream` beside it.
pub fn litestream_meta_path(database_file: &Path) -> PathBuf {
    let name = database_file
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    database_file.with_file_name(format!(".{name}-litestream"))
}

/// The generation `database_file` continues: its record, when both the file
/// and a well-formed record exist.
pub fn recorded_generation(database_file: &Path) -> Option<Generation> {
    if std::fs::symlink_metadata(database_file).is_err() {
        return None;
    }
    let text = std::fs::read_to_string(marker_path(database_file)).ok()?;
    Generation::parse(text.trim())
}

/// Records that `database_file` continues `generation` (mode 0600, synced
/// with its folder before Litestream is told, so a crash never leaves a file
/// that claims a generation it did not write).
pub fn record_generation(database_file: &Path, generation: &Generation) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let marker = marker_path(database_file);
    let staged = {
        let mut name = marker.as_os_str().to_owned();
        name.push(".tmp");
        PathBuf::from(name)
    };
    {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&staged)?;
        file.write_all(generation.as_str().as_bytes())?;
        file.sync_all()?;
    }
    std::fs::rename(&staged, &marker)?;
    if let Some(folder) = marker.parent() {
        std::fs::File::open(folder)?.sync_all()?;
    }
    Ok(())
}

/// Removes what replication keeps beside a database file (its generation
/// record and Litestream's local state): done before a new generation
/// begins and after the file is deleted.
pub fn remove_local_state(database_file: &Path) -> std::io::Result<()> {
    for removal in [
        std::fs::remove_file(marker_path(database_file)),
        std::fs::remove_dir_all(litestream_meta_path(database_file)),
    ] {
        match removal {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_sort_by_their_beginning() {
        let instant = time::OffsetDateTime::now_utc();
        let first = Generation::begin_at(instant);
        let second = Generation::begin_at(instant + time::Duration::milliseconds(1));
        assert!(first < second);
        assert_eq!(
            first.began_millis() as i128,
            instant.unix_timestamp_nanos() / 1_000_000
        );
        assert_eq!(Generation::parse(first.as_str()), Some(first.clone()));
        assert!(first.began_millis() > 1_700_000_000_000);
        for bad in [
            "",
            "123-abc",
            "12345678901234-0000000g",
            "../x",
            "1234567890123-ABCDEF01",
        ] {
            assert_eq!(Generation::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn paths_of_the_layout() {
        let generation = Generation::parse("1765000000000-0a1b2c3d").unwrap();
        assert_eq!(
            Database::App("time-sheet".into()).generation_path(&generation),
            "apps/time-sheet/1765000000000-0a1b2c3d"
        );
        assert_eq!(Database::Core.dir(), "core/");
        assert_eq!(
            litestream_meta_path(Path::new("/d/a.sqlite")),
            Path::new("/d/.a.sqlite-litestream")
        );
        assert_eq!(
            marker_path(Path::new("/d/a.sqlite")),
            Path::new("/d/a.sqlite-generation")
        );
    }

    #[test]
    fn a_record_counts_only_beside_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.sqlite");
        let generation = Generation::begin();
        record_generation(&file, &generation).unwrap();
        assert_eq!(recorded_generation(&file), None, "no file, no generation");
        std::fs::write(&file, b"").unwrap();
        assert_eq!(recorded_generation(&file), Some(generation));
        std::fs::create_dir(litestream_meta_path(&file)).unwrap();
        remove_local_state(&file).unwrap();
        assert_eq!(recorded_generation(&file), None);
        assert!(!litestream_meta_path(&file).exists());
        remove_local_state(&file).unwrap();
    }
}
