//! `sasha backup --out DIR [--state-dir DIR]`: a consistent copy of the core
//! database (`DB_PATH`) and of every app database in `APP_DATA_ROOT`
//! (`<id>.sqlite`), taken while the stack runs and writes continue.
//!
//! Each database is copied with SQLite's online backup API in one step, that
//! is inside one read transaction of the source: the copy is the database as
//! of one committed transaction (WAL readers never block the writers, so the
//! services do not wait). It is not a file copy, which could catch a
//! half-written page or miss what still sits in the `-wal` file. Each copy
//! is switched out of WAL (one self-contained file), passes `PRAGMA
//! integrity_check`, and is recorded with its size and sha256 in
//! `manifest.json`. The databases are copied one after another, so each is
//! consistent in itself, not with the others.
//!
//! The backups data-worker took of deleted apps' data files
//! (`APP_DATA_ROOT/.deleted-app-backups/*.sqlite`, written before a
//! `deleteApp` with `deleteData` removes a file) are copied the same way into
//! `deleted-apps/`, so losing the data volume does not lose them either.
//!
//! Everything is written into a hidden staging folder in DIR and renamed to
//! `DIR/<timestamp>/` at the end, so a backup folder is complete or absent.
//! The documents users upload are rows of the core database, so they are in
//! its copy. The docs tree (`DOCS_ROOT`, the app packages) is plain files and
//! is not copied here (nor is `UPLOADS_ROOT`, which holds at most what an
//! earlier build wrote there, imported into the core database at
//! studio-core's boot), nor is a PostgreSQL core database
//! (`DATABASE_URL`): that is backed up with PostgreSQL's own tools, and the
//! manifest says so.

use std::io::Read as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};
use sasha_service::config::ProcessEnv;
use sasha_service::core_database::CoreDatabase;
use serde::Serialize;
use sha2::{Digest as _, Sha256};

/// How long one database may stay busy (a WAL recovery, an exclusive lock)
/// before the backup gives up.
const BUSY_LIMIT: Duration = Duration::from_secs(30);

/// The core database's file name inside a backup folder.
pub(crate) const CORE_FILE: &str = "core.sqlite";
/// The folder of the app databases inside a backup folder.
pub(crate) const APPS_DIR: &str = "apps";
/// The folder of deleted apps' data backups inside a backup folder.
pub(crate) const DELETED_DIR: &str = "deleted-apps";

/// `manifest.json`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    /// When the backup started, RFC 3339 UTC.
    created_at: String,
    /// The SQLite core database; absent when the core database is
    /// PostgreSQL's ([`Manifest::core_database`] says where).
    #[serde(skip_serializing_if = "Option::is_none")]
    core: Option<Copied>,
    /// Where a PostgreSQL core database is (no credentials), not copied.
    #[serde(skip_serializing_if = "Option::is_none")]
    core_database: Option<String>,
    apps: Vec<AppCopy>,
    /// Left out when there are none, so such a manifest reads as before.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    deleted_apps: Vec<Copied>,
    sasha_version: &'static str,
}

/// One copied database file, relative to the backup folder.
#[derive(Debug, Serialize)]
struct Copied {
    file: String,
    sha256: String,
    bytes: u64,
}

#[derive(Debug, Serialize)]
struct AppCopy {
    id: String,
    #[serde(flatten)]
    copy: Copied,
}

pub(crate) fn main(out: &Path, state_dir: Option<&Path>) -> ExitCode {
    match run(out, state_dir) {
        Ok(folder) => {
            println!("{}", folder.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            let message = format!("{error:#}").replace(['\n', '\r'], " ");
            eprintln!("sasha backup: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Takes the backup and returns its folder.
fn run(out: &Path, state_dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let storage = crate::admin::storage_paths(state_dir)?;
    let postgres = match CoreDatabase::from_env(&ProcessEnv, &storage)
        .map_err(|error| anyhow!("invalid configuration: {error}"))?
    {
        CoreDatabase::Postgres(postgres) => Some(postgres.place()),
        CoreDatabase::Sqlite(_) => None,
    };
    if let Some(place) = &postgres {
        eprintln!(
            "sasha backup: the core database is PostgreSQL ({place}): not copied here; back it up with pg_dump or your database service's backups"
        );
    } else if !storage.db_path.is_file() {
        bail!(
            "no core database at {}: check --state-dir (or DB_PATH)",
            storage.db_path.display()
        );
    }
    let apps = app_databases(&storage.app_data_root)?;
    let deleted = deleted_backups(&storage.app_data_root)?;
    let started = time::OffsetDateTime::now_utc();
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let name = folder_name(started);
    let staging = out.join(format!(".partial-{name}-{}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&staging)
        .with_context(|| format!("cannot create {}", staging.display()))?;
    let outcome = (|| {
        let core = match &postgres {
            None => Some(copy_database(&storage.db_path, &staging, CORE_FILE)?),
            Some(_) => None,
        };
        let mut copies = Vec::new();
        if !apps.is_empty() {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(staging.join(APPS_DIR))
                .context("cannot create the apps folder")?;
        }
        for (id, path) in &apps {
            let copy = copy_database(path, &staging, &format!("{APPS_DIR}/{id}.sqlite"))?;
            copies.push(AppCopy {
                id: id.clone(),
                copy,
            });
        }
        let mut deleted_copies = Vec::new();
        if !deleted.is_empty() {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(staging.join(DELETED_DIR))
                .context("cannot create the deleted-apps folder")?;
            for (name, path) in &deleted {
                deleted_copies.push(copy_database(
                    path,
                    &staging,
                    &format!("{DELETED_DIR}/{name}"),
                )?);
            }
            sync_dir(&staging.join(DELETED_DIR))?;
        }
        let manifest = Manifest {
            created_at: rfc3339(started),
            core,
            core_database: postgres.clone(),
            apps: copies,
            deleted_apps: deleted_copies,
            sasha_version: sasha_service::VERSION,
        };
        write_new(
            &staging.join("manifest.json"),
            format!("{}\n", serde_json::to_string_pretty(&manifest)?).as_bytes(),
        )?;
        if !apps.is_empty() {
            sync_dir(&staging.join(APPS_DIR))?;
        }
        sync_dir(&staging)?;
        let folder = publish(&staging, out, &name)?;
        sync_dir(out)?;
        Ok(folder)
    })();
    if outcome.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    outcome
}

/// Every `<id>.sqlite` regular file in `root` whose stem is an app id,
/// sorted by id. Anything else there (`-wal`/`-shm` files, stray copies) is
/// skipped. A missing folder is an error, not an empty backup: data-worker
/// creates it when it starts, so its absence means the app data volume is not
/// mounted where this command runs.
pub(crate) fn app_databases(root: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(anyhow!(
                "APP_DATA_ROOT {} does not exist: mount the app data volume where sasha backup runs \
                 (data-worker creates the folder when it starts)",
                root.display()
            ));
        }
        Err(error) => {
            return Err(anyhow!(error).context(format!("cannot read {}", root.display())));
        }
    };
    let mut apps = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", root.display()))?;
        let name = entry.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|name| name.strip_suffix(".sqlite"))
            .filter(|id| sasha_contract::AppId::parse(id).is_ok())
        else {
            continue;
        };
        if entry.file_type().is_ok_and(|kind| kind.is_file()) {
            apps.push((id.to_owned(), entry.path()));
        }
    }
    apps.sort();
    Ok(apps)
}

/// Every `*.sqlite` regular file data-worker left in
/// `root/.deleted-app-backups/` (named `<id>-<secs>-<random>.sqlite`), sorted
/// by name; none when the folder does not exist (no app was deleted with its
/// data). Names outside `[a-z0-9-]` are skipped: data-worker never writes them.
fn deleted_backups(root: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let folder = root.join(data_worker::engine::BACKUP_DIR);
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => {
            return Err(anyhow!(error).context(format!("cannot read {}", folder.display())));
        }
    };
    let mut backups = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", folder.display()))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let safe = name.strip_suffix(".sqlite").is_some_and(|stem| {
            !stem.is_empty()
                && stem
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        });
        if safe && entry.file_type().is_ok_and(|kind| kind.is_file()) {
            backups.push((name, entry.path()));
        }
    }
    backups.sort();
    Ok(backups)
}

/// Copies the database at `source` to `folder/file` with the online backup
/// API, checks the copy and describes it.
fn copy_database(source: &Path, folder: &Path, file: &str) -> anyhow::Result<Copied> {
    let target = folder.join(file);
    let copy = || -> anyhow::Result<Copied> {
        let from = Connection::open_with_flags(
            source,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        from.busy_timeout(Duration::from_secs(5))?;
        // The copy holds password and token hashes, or an app's rows: the
        // file is created for its owner only before SQLite opens it.
        write_new(&target, b"")?;
        let mut to = Connection::open(&target)?;
        {
            let backup = Backup::new(&from, &mut to)?;
            let started = Instant::now();
            // All pages in one step: one read transaction of the source, so
            // writes committed meanwhile can neither restart nor tear it.
            loop {
                match backup.step(-1)? {
                    StepResult::Done => break,
                    StepResult::More => {}
                    _ if started.elapsed() > BUSY_LIMIT => {
                        bail!("the database stayed locked for {} s", BUSY_LIMIT.as_secs())
                    }
                    _ => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }
        drop(from);
        // One self-contained file: no -wal to carry along on a restore.
        let mode: String = to.query_row("PRAGMA journal_mode = DELETE", [], |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("delete") {
            bail!("the copy stayed in journal mode {mode}");
        }
        let problems: Vec<String> = to
            .prepare("PRAGMA integrity_check")?
            .query_map([], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        if problems != ["ok"] {
            bail!(
                "the copy fails PRAGMA integrity_check: {}",
                problems
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        to.close().map_err(|(_, error)| error)?;
        let (sha256, bytes) = digest(&target)?;
        Ok(Copied {
            file: file.to_owned(),
            sha256,
            bytes,
        })
    };
    copy().with_context(|| format!("cannot back up {}", source.display()))
}

/// Creates `path` (it must not exist) readable only by its owner, writes
/// `contents` and syncs it.
fn write_new(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(contents)?;
    file.sync_all()?;
    Ok(())
}

/// The file's sha256 (hex) and size, after syncing it to disk.
fn digest(path: &Path) -> anyhow::Result<(String, u64)> {
    let mut file = std::fs::File::open(path)?;
    file.sync_all()?;
    let mut hasher = Sha256::new();
    let mut bytes = 0u64;
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        bytes += read as u64;
    }
    Ok((hex::encode(hasher.finalize()), bytes))
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::File::open(dir)
        .and_then(|dir| dir.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))
}

/// Renames the staging folder to `out/<name>` without ever replacing an
/// existing folder (two backups in the same millisecond get `-2`, `-3`, …).
fn publish(staging: &Path, out: &Path, name: &str) -> anyhow::Result<PathBuf> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    for attempt in 1..100 {
        let folder = if attempt == 1 {
            out.join(name)
        } else {
            out.join(format!("{name}-{attempt}"))
        };
        match renameat_with(CWD, staging, CWD, &folder, RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(folder),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(error) => {
                return Err(anyhow!(std::io::Error::from(error))
                    .context(format!("cannot rename the backup to {}", folder.display())));
            }
        }
    }
    bail!("too many backups named {name} in {}", out.display())
}

/// `20260510T120000.123Z`: sorts by time, safe in every file system.
fn folder_name(at: time::OffsetDateTime) -> String {
    rfc3339(at).replace(['-', ':'], "")
}

/// `2026-05-10T12:00:00.123Z`.
fn rfc3339(at: time::OffsetDateTime) -> String {
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.millisecond()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_sort_and_name_the_same_instant() {
        let at =
            time::OffsetDateTime::from_unix_timestamp_nanos(1_778_414_400_123_000_000).unwrap();
        assert_eq!(folder_name(at), "20260510T120000.123Z");
        assert_eq!(rfc3339(at), "2026-05-10T12:00:00.123Z");
    }

    #[test]
    fn only_app_databases_are_copied() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "expense-log.sqlite",
            "expense-log.sqlite-wal",
            "expense-log.sqlite-shm",
            "hello.sqlite",
            "Notes.sqlite",
            ".hidden.sqlite",
            "readme.txt",
        ] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        std::fs::create_dir(dir.path().join("folder.sqlite")).unwrap();
        let ids: Vec<String> = app_databases(dir.path())
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(ids, ["expense-log", "hello"]);
        let missing = app_databases(&dir.path().join("missing")).unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("does not exist: mount the app data volume"),
            "{missing}"
        );
    }

    #[test]
    fn deleted_apps_backups_are_listed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            deleted_backups(dir.path()).unwrap().is_empty(),
            "no folder, none"
        );
        let folder = dir.path().join(data_worker::engine::BACKUP_DIR);
        std::fs::create_dir(&folder).unwrap();
        for name in [
            "notes-1764633600-9f2c.sqlite",
            "expense-log-1764633601-aa01.sqlite",
            "notes-1764633600-9f2c.sqlite-wal",
            "Notes-1.sqlite",
            "notes.txt",
        ] {
            std::fs::write(folder.join(name), b"x").unwrap();
        }
        std::fs::create_dir(folder.join("dir.sqlite")).unwrap();
        let names: Vec<String> = deleted_backups(dir.path())
            .unwrap()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(
            names,
            [
                "expense-log-1764633601-aa01.sqlite",
                "notes-1764633600-9f2c.sqlite"
            ]
        );
    }

    /// A state folder with a core database, one app database and one deleted
    /// app's backup: the backup set holds all three, checked and listed.
    #[test]
    fn a_backup_set_keeps_the_deleted_apps_backups() {
        let state = tempfile::tempdir().unwrap();
        let sqlite = |path: &Path| {
            let connection = Connection::open(path).unwrap();
            connection
                .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
                .unwrap();
        };
        sqlite(&state.path().join("core.sqlite"));
        let apps = state.path().join("apps");
        std::fs::create_dir(&apps).unwrap();
        sqlite(&apps.join("notes.sqlite"));
        let deleted = apps.join(data_worker::engine::BACKUP_DIR);
        std::fs::create_dir(&deleted).unwrap();
        sqlite(&deleted.join("old-app-1764633600-9f2c.sqlite"));
        let out = tempfile::tempdir().unwrap();
        let folder = run(out.path(), Some(state.path())).unwrap();
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(folder.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(manifest["apps"][0]["id"], "notes");
        let file = format!("{DELETED_DIR}/old-app-1764633600-9f2c.sqlite");
        assert_eq!(manifest["deletedApps"][0]["file"], file.as_str());
        let copy = Connection::open(folder.join(&file)).unwrap();
        let kept: i64 = copy
            .query_row("SELECT x FROM t", [], |row| row.get(0))
            .unwrap();
        assert_eq!(kept, 1);
    }

    #[test]
    fn a_copy_is_one_checked_file_and_publishing_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("source.sqlite");
        let connection = Connection::open(&source).unwrap();
        let mode: String = connection
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        connection
            .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1), (2);")
            .unwrap();
        // The rows are still in the -wal file; the copy must have them.
        let staging = dir.path().join("staging");
        std::fs::create_dir(&staging).unwrap();
        let copied = copy_database(&source, &staging, "copy.sqlite").unwrap();
        assert!(!staging.join("copy.sqlite-wal").exists());
        let copy = Connection::open(staging.join("copy.sqlite")).unwrap();
        let rows: i64 = copy
            .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 2);
        assert_eq!(
            copied.bytes,
            std::fs::metadata(staging.join("copy.sqlite"))
                .unwrap()
                .len()
        );
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(staging.join("copy.sqlite"))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);

        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("20260510T120000.123Z")).unwrap();
        let published = publish(&staging, &out, "20260510T120000.123Z").unwrap();
        assert_eq!(published, out.join("20260510T120000.123Z-2"));
        assert!(published.join("copy.sqlite").is_file());
    }
}
