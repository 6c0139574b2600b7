//! The replica layout in object storage, and each database's generation.
//!
//! ```text
//! <prefix>/core/<generation>/…            the core database (DB_PATH)
//! <prefix>/apps/<app-id>/<generation>/…   one app database (APP_DATA_ROOT/<app-id>.sqlite)
//! ```
//!
//! Below a generation is Litestream's own layout (`ltx/<level>/…`). A
//! generation is one unbroken history of one database written by one owner.
//! Its name carries the owner's epoch (the fencing token the core database
//! raises on every change of an app's owner, issue 47), when it began, and a
//! random tail:
//!
//! ```text
//! <13-digit unix ms>-<8 hex>                  epoch 0: one data-worker, the core database
//! e<12-digit epoch>-<13-digit unix ms>-<8 hex>  epoch > 0: an owner under a lease
//! ```
//!
//! Generations order by (epoch, began, random): the newest is the one of the
//! highest epoch, and only among equal epochs the one that began last. So a
//! stale owner's late uploads to its old generation (it was fenced, but its
//! Litestream may still upload what it committed) never sort above the new
//! owner's history, whatever the clocks say.
//!
//! A database starts a new generation whenever its local history does not
//! continue the one in object storage: it is new, it was restored (`sasha
//! restore`, a role restoring a missing file at boot, a worker taking an app
//! over), its volume was lost, or it is owned under another epoch. The
//! generation a file belongs to is recorded beside it (`<file>-generation`);
//! a file without that record, or a record without its file, starts a new
//! one. Two writers' histories therefore never share a generation.
//!
//! What it must never do: reuse a generation for a file whose history it
//! cannot vouch for, give two names to one position in the order, or name a
//! path outside the prefix.

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

/// The highest epoch a generation's name holds (12 digits). The core
/// database raises an app's epoch by one per change of owner, so this is
/// never reached; an owner told a higher one refuses to begin a generation.
pub const MAX_EPOCH: u64 = 999_999_999_999;

/// One generation's name (see the module header), with the parts it orders
/// by. Fields are compared in declaration order: epoch, then when it began,
/// then the random tail; the name follows from those three.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Generation {
    epoch: u64,
    began_millis: i64,
    random: u32,
    name: String,
}

/// An epoch too large for a generation's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("epoch {0} is larger than a generation's name holds ({MAX_EPOCH})")]
pub struct EpochTooLarge(pub u64);

impl Generation {
    /// A new generation of epoch 0 beginning now: the core database, and
    /// an app database with one data-worker.
    pub fn begin() -> Generation {
        Generation::begin_at(0, time::OffsetDateTime::now_utc())
    }

    /// A new generation of an owner at `epoch` beginning now.
    pub fn begin_in(epoch: u64) -> Result<Generation, EpochTooLarge> {
        if epoch > MAX_EPOCH {
            return Err(EpochTooLarge(epoch));
        }
        Ok(Generation::begin_at(epoch, time::OffsetDateTime::now_utc()))
    }

    /// A new generation of `epoch` (at most [`MAX_EPOCH`]) beginning at
    /// `instant`.
    fn begin_at(epoch: u64, instant: time::OffsetDateTime) -> Generation {
        let millis = i64::try_from(instant.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
        Generation::from_parts(epoch, millis, rand::random::<u32>())
    }

    fn from_parts(epoch: u64, began_millis: i64, random: u32) -> Generation {
        let name = if epoch == 0 {
            format!("{began_millis:013}-{random:08x}")
        } else {
            format!("e{epoch:012}-{began_millis:013}-{random:08x}")
        };
        Generation {
            epoch,
            began_millis,
            random,
            name,
        }
    }

    /// A stored or listed name, if it has one of the generation shapes. An
    /// `e` name of epoch 0 is refused: epoch 0 has the shorter name only,
    /// so no two names share a place in the order.
    pub fn parse(text: &str) -> Option<Generation> {
        let digits = |part: &str, width: usize| {
            (part.len() == width && part.bytes().all(|b| b.is_ascii_digit()))
                .then(|| part.parse::<u64>().ok())
                .flatten()
        };
        let hex = |part: &str| {
            (part.len() == 8
                && part
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            .then(|| u32::from_str_radix(part, 16).ok())
            .flatten()
        };
        let (epoch, rest) = match text.strip_prefix('e') {
            Some(rest) => {
                let (epoch, rest) = rest.split_once('-')?;
                let epoch = digits(epoch, 12).filter(|epoch| *epoch > 0)?;
                (epoch, rest)
            }
            None => (0, text),
        };
        let (millis, random) = rest.split_once('-')?;
        let began_millis = i64::try_from(digits(millis, 13)?).ok()?;
        let random = hex(random)?;
        let generation = Generation::from_parts(epoch, began_millis, random);
        (generation.name == text).then_some(generation)
    }

    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// The owner's epoch it was written under (0 for a name without one).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// When the generation began, in unix milliseconds.
    pub fn began_millis(&self) -> i64 {
        self.began_millis
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

/// The files SQLite keeps for one database: itself, its WAL and the WAL's
/// index. They move together or not at all: a WAL beside another database
/// than its own would be read into it.
const SQLITE_FILES: [&str; 3] = ["", "-wal", "-shm"];

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Where a restore that is to replace `database_file` is written first:
/// `.<name>-restoring` beside it, so that putting it in place is one rename
/// in one folder.
pub fn staged_restore_path(database_file: &Path) -> PathBuf {
    let name = database_file
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    database_file.with_file_name(format!(".{name}-restoring"))
}

/// Removes a staged restore and its WAL files, if any (one left by a crash).
pub fn remove_staged(staged: &Path) -> std::io::Result<()> {
    for suffix in SQLITE_FILES {
        remove_if_present(&with_suffix(staged, suffix))?;
    }
    Ok(())
}

fn remove_if_present(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

/// Puts the restored file `staged` in place of `database_file`, whose
/// history is superseded: its generation record and Litestream's local
/// state are removed first (from then on the file vouches for no
/// generation, so a crash midway never continues one), then the file with
/// its WAL files is moved into the folder `aside` (replacing what an
/// earlier replacement put there: one superseded copy per database), then
/// `staged` is renamed into place and the folder synced. Without a file in
/// place, stray WAL files are removed instead. Gives the superseded copy's
/// path, if there was a file.
///
/// The caller has closed every connection to the file and stopped its
/// replication. At no moment is a partly written file at `database_file`.
pub fn replace_with_restored(
    database_file: &Path,
    staged: &Path,
    aside: &Path,
) -> std::io::Result<Option<PathBuf>> {
    use std::os::unix::fs::DirBuilderExt as _;
    remove_local_state(database_file)?;
    let folder = database_file.parent().unwrap_or(Path::new("."));
    let set_aside = if std::fs::symlink_metadata(database_file).is_ok() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(aside)?;
        let name = database_file
            .file_name()
            .ok_or_else(|| std::io::Error::other("a database file has a name"))?;
        let copy = aside.join(name);
        for suffix in SQLITE_FILES {
            remove_if_present(&with_suffix(&copy, suffix))?;
        }
        for suffix in SQLITE_FILES {
            match std::fs::rename(
                with_suffix(database_file, suffix),
                with_suffix(&copy, suffix),
            ) {
                Ok(()) => {}
                Err(error)
                    if error.kind() == std::io::ErrorKind::NotFound && !suffix.is_empty() => {}
                Err(error) => return Err(error),
            }
        }
        std::fs::File::open(aside)?.sync_all()?;
        Some(copy)
    } else {
        for suffix in ["-wal", "-shm"] {
            remove_if_present(&with_suffix(database_file, suffix))?;
        }
        None
    };
    std::fs::rename(staged, database_file)?;
    std::fs::File::open(folder)?.sync_all()?;
    Ok(set_aside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_sort_by_their_beginning() {
        let instant = time::OffsetDateTime::now_utc();
        let first = Generation::begin_at(0, instant);
        let second = Generation::begin_at(0, instant + time::Duration::milliseconds(1));
        assert!(first < second);
        assert_eq!(
            first.began_millis() as i128,
            instant.unix_timestamp_nanos() / 1_000_000
        );
        assert_eq!(Generation::parse(first.as_str()), Some(first.clone()));
        assert_eq!(first.epoch(), 0);
        assert!(first.began_millis() > 1_700_000_000_000);
        assert_eq!(Generation::begin().epoch(), 0);
    }

    #[test]
    fn an_epoch_is_named_and_parsed_back() {
        let generation = Generation::from_parts(2, 1_765_000_000_000, 0x0a1b_2c3d);
        assert_eq!(generation.as_str(), "e000000000002-1765000000000-0a1b2c3d");
        assert_eq!(
            Generation::parse(generation.as_str()),
            Some(generation.clone())
        );
        assert_eq!(generation.epoch(), 2);
        assert_eq!(generation.began_millis(), 1_765_000_000_000);
        let old = Generation::parse("1765000000000-0a1b2c3d").unwrap();
        assert_eq!(old.epoch(), 0, "a name without an epoch is epoch 0");
        assert_eq!(old.began_millis(), 1_765_000_000_000);
        let largest = Generation::begin_in(MAX_EPOCH).unwrap();
        assert!(largest.as_str().starts_with("e999999999999-"));
        assert_eq!(Generation::parse(largest.as_str()), Some(largest));
        assert_eq!(
            Generation::begin_in(MAX_EPOCH + 1),
            Err(EpochTooLarge(MAX_EPOCH + 1))
        );
        assert_eq!(Generation::begin_in(7).unwrap().epoch(), 7);
    }

    #[test]
    fn names_of_no_generation_are_refused() {
        for bad in [
            "",
            "123-abc",
            "12345678901234-0000000g",
            "../x",
            "1234567890123-ABCDEF01",
            "1234567890123-0a1b2c3d-",
            "1234567890123-0a1b2c3d9",
            // Epoch 0 has only the short name.
            "e000000000000-1765000000000-0a1b2c3d",
            "e00000000002-1765000000000-0a1b2c3d",
            "e0000000000002-1765000000000-0a1b2c3d",
            "E000000000002-1765000000000-0a1b2c3d",
            "e000000000002-176500000000-0a1b2c3d",
            "e000000000002-1765000000000-0A1B2C3D",
            "e000000000002-1765000000000",
            "e+00000000002-1765000000000-0a1b2c3d",
            "e000000000002-+765000000000-0a1b2c3d",
            "e000000000002-1765000000000-0a1b2c3d/ltx",
        ] {
            assert_eq!(Generation::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_highest_epoch_is_newest_whenever_it_began() {
        // A stale owner (epoch 1) began a generation after the new owner's
        // (epoch 2) by its own clock; an older build's name is epoch 0.
        let names = [
            "e000000000001-1765000009000-00000001",
            "1765000099000-ffffffff",
            "e000000000002-1765000001000-00000002",
            "e000000000002-1765000001000-00000001",
            "e000000000010-1765000000000-00000000",
            "e000000000001-1765000000000-00000009",
        ];
        let mut generations: Vec<Generation> = names
            .iter()
            .map(|name| Generation::parse(name).unwrap())
            .collect();
        generations.sort();
        let sorted: Vec<&str> = generations.iter().map(Generation::as_str).collect();
        assert_eq!(
            sorted,
            [
                "1765000099000-ffffffff",
                "e000000000001-1765000000000-00000009",
                "e000000000001-1765000009000-00000001",
                "e000000000002-1765000001000-00000001",
                "e000000000002-1765000001000-00000002",
                "e000000000010-1765000000000-00000000",
            ],
            "(epoch, began, random): the old name first, the stale owner's later beginning below the new owner's"
        );
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
    #[test]
    fn a_restored_file_replaces_the_superseded_one_with_its_wal() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.sqlite");
        let aside = dir.path().join(".superseded");
        std::fs::write(&file, b"old").unwrap();
        std::fs::write(with_suffix(&file, "-wal"), b"old wal").unwrap();
        std::fs::write(with_suffix(&file, "-shm"), b"old shm").unwrap();
        record_generation(&file, &Generation::begin_in(1).unwrap()).unwrap();
        std::fs::create_dir(litestream_meta_path(&file)).unwrap();
        // What an earlier replacement set aside, with a WAL of its own.
        std::fs::create_dir(&aside).unwrap();
        std::fs::write(aside.join("a.sqlite"), b"older").unwrap();
        std::fs::write(aside.join("a.sqlite-wal"), b"older wal").unwrap();
        let staged = staged_restore_path(&file);
        assert_eq!(staged, dir.path().join(".a.sqlite-restoring"));
        std::fs::write(&staged, b"restored").unwrap();

        let copy = replace_with_restored(&file, &staged, &aside).unwrap();
        assert_eq!(copy.as_deref(), Some(aside.join("a.sqlite").as_path()));
        assert_eq!(std::fs::read(&file).unwrap(), b"restored");
        assert!(!staged.exists());
        for suffix in ["-wal", "-shm"] {
            assert!(!with_suffix(&file, suffix).exists(), "{suffix}");
        }
        assert_eq!(recorded_generation(&file), None, "vouches for nothing");
        assert!(!marker_path(&file).exists());
        assert!(!litestream_meta_path(&file).exists());
        assert_eq!(std::fs::read(aside.join("a.sqlite")).unwrap(), b"old");
        assert_eq!(
            std::fs::read(aside.join("a.sqlite-wal")).unwrap(),
            b"old wal"
        );
        assert_eq!(
            std::fs::read(aside.join("a.sqlite-shm")).unwrap(),
            b"old shm"
        );
    }

    #[test]
    fn a_restored_file_takes_an_empty_place_without_stray_wal_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.sqlite");
        let aside = dir.path().join(".superseded");
        std::fs::write(with_suffix(&file, "-wal"), b"stray").unwrap();
        let staged = staged_restore_path(&file);
        std::fs::write(&staged, b"restored").unwrap();
        std::fs::write(with_suffix(&staged, "-wal"), b"crash").unwrap();
        assert_eq!(replace_with_restored(&file, &staged, &aside).unwrap(), None);
        assert_eq!(std::fs::read(&file).unwrap(), b"restored");
        assert!(!with_suffix(&file, "-wal").exists());
        assert!(!aside.exists(), "nothing to set aside");
        remove_staged(&staged).unwrap();
        assert!(!with_suffix(&staged, "-wal").exists());
    }
}
