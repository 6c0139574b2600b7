//! `sasha restore`: a state folder rebuilt from object storage, for the
//! operator who lost a disk.
//!
//! From the replica layout (`sasha_replica::layout`) it restores the core
//! database and every app database (or, with `--app`, one app database)
//! from each database's newest generation that began at or before `--at`
//! (latest without it), with `litestream restore`; checks every file with
//! `PRAGMA integrity_check`; rebuilds `DOCS_ROOT` from the restored core
//! database (each package's head, else its app's current revision in the
//! revision ledger, file by file, as its bytes' sha256 vouches); imports into it the uploaded
//! documents a build before uploads moved into the core database mirrored
//! to object storage (`sasha_replica::files`, those stored by `--at`, kept
//! in `UPLOADS_ROOT` as they came); and writes `restore-manifest.json`
//! saying what came from where.
//!
//! Everything is written into a staging folder beside the target and moved
//! into place last, so the state folder appears whole or not at all; a
//! non-empty state folder (or, with `--app`, an existing app file) is refused
//! before anything is read. Each refusal is one line on stderr: exit 2 for
//! what the operator must change (an argument, a variable, the folder, an
//! instant before the first generation), 1 for a failure on the way.
//!
//! What it must never do: overwrite or remove a file it did not create, or
//! write a package file outside its app's folder.

use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use sasha_replica::config::{
    ACCESS_KEY_ID, Credentials, LITESTREAM, SECRET_ACCESS_KEY, SESSION_TOKEN,
};
use sasha_replica::layout::{self, Database};
use sasha_replica::replicator::{generations, restore_newest};
use sasha_replica::s3::{ObjectStore, StorageError};
use sasha_replica::url::ReplicaUrl;
use sasha_service::config::{Env, ProcessEnv, StoragePaths};
use serde_json::json;
use sha2::{Digest as _, Sha256};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The manifest's file name in the restored state folder.
pub(crate) const MANIFEST: &str = "restore-manifest.json";

/// What was asked on the command line.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) from: String,
    pub(crate) state_dir: PathBuf,
    pub(crate) at: Option<String>,
    pub(crate) app: Option<String>,
}

/// A refusal or failure: one line, and whether the operator must change
/// something (exit 2) or it failed on the way (exit 1).
struct Stop {
    line: String,
    usage: bool,
}

fn usage(line: impl Into<String>) -> Stop {
    Stop {
        line: line.into(),
        usage: true,
    }
}

fn failed(line: impl Into<String>) -> Stop {
    Stop {
        line: line.into(),
        usage: false,
    }
}

pub(crate) fn main(request: Request) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("sasha restore: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(restore(request, &ProcessEnv)) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(stop) => {
            eprintln!("sasha restore: {}", stop.line);
            ExitCode::from(if stop.usage { 2 } else { 1 })
        }
    }
}

/// The files a restore writes, below a state folder (its default layout).
struct Layout {
    db_path: PathBuf,
    app_data_root: PathBuf,
    docs_root: PathBuf,
    uploads_root: PathBuf,
}

fn layout_of(state_dir: &Path) -> Result<Layout, Stop> {
    let mut env = std::collections::HashMap::new();
    env.insert(
        "SASHA_STATE_DIR".to_owned(),
        state_dir.display().to_string(),
    );
    let paths = StoragePaths::from_env(&env).map_err(|error| usage(error.to_string()))?;
    Ok(Layout {
        db_path: paths.db_path,
        app_data_root: paths.app_data_root,
        docs_root: paths.docs_root,
        uploads_root: paths.uploads_root,
    })
}

async fn restore(request: Request, env: &dyn Env) -> Result<String, Stop> {
    let url =
        ReplicaUrl::parse(&request.from).map_err(|reason| usage(format!("--from: {reason}")))?;
    let at = request
        .at
        .as_deref()
        .map(|text| {
            OffsetDateTime::parse(text, &Rfc3339).map_err(|_| {
                usage(format!(
                    "--at: {text:?} is not an RFC 3339 time such as 2026-12-06T03:00:00Z"
                ))
            })
        })
        .transpose()?;
    if let Some(app) = &request.app
        && sasha_contract::ids::AppId::parse(app).is_err()
    {
        return Err(usage(format!("--app: {app:?} is not an app id")));
    }
    let credentials = Credentials {
        access_key_id: env.var(ACCESS_KEY_ID).ok_or_else(|| {
            usage(format!(
                "{ACCESS_KEY_ID}: must be set (the object storage credentials)"
            ))
        })?,
        secret_access_key: env.var(SECRET_ACCESS_KEY).ok_or_else(|| {
            usage(format!(
                "{SECRET_ACCESS_KEY}: must be set (the object storage credentials)"
            ))
        })?,
        session_token: env.var(SESSION_TOKEN),
    };
    let litestream = env
        .var(LITESTREAM)
        .map_or_else(|| PathBuf::from("litestream"), PathBuf::from);
    let state_dir = sasha_service::config::absolute_lexical(&request.state_dir);
    let target = layout_of(&state_dir)?;

    // Nothing is read from object storage before the folder is known free.
    match &request.app {
        None => {
            if folder_has_entries(&state_dir)? {
                return Err(usage(format!(
                    "{} is not empty: restore into a new or empty folder (nothing was changed)",
                    state_dir.display()
                )));
            }
        }
        Some(app) => {
            let file = target.app_data_root.join(format!("{app}.sqlite"));
            if std::fs::symlink_metadata(&file).is_ok() {
                return Err(usage(format!(
                    "{} already exists: move it away first (nothing was changed)",
                    file.display()
                )));
            }
        }
    }

    let store = ObjectStore::new(&url, &credentials)
        .map_err(|reason| usage(format!("--from: {reason}")))?;
    store.check().await.map_err(|error| match error {
        StorageError::Credentials { .. } => usage(format!("{ACCESS_KEY_ID}: {error}")),
        StorageError::NoBucket { .. } => usage(format!("--from: {error}")),
        other => failed(format!("--from: {other}")),
    })?;

    let first: Database = match &request.app {
        None => Database::Core,
        Some(app) => Database::App(app.clone()),
    };
    let first_generations = generations(&store, &first)
        .await
        .map_err(|error| failed(format!("--from: {error}")))?;
    // The one that began first: generations order by epoch before time.
    let Some(earliest) = first_generations
        .iter()
        .min_by_key(|generation| generation.began_millis())
    else {
        return Err(usage(format!(
            "--from: {} holds no {} database",
            url.describe(),
            describe(&first)
        )));
    };
    if let Some(at) = at {
        let began = OffsetDateTime::from_unix_timestamp_nanos(
            i128::from(earliest.began_millis()) * 1_000_000,
        )
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        if at < began {
            return Err(usage(format!(
                "--at {} is before the first generation of the {} database, which began {} (nothing was restored)",
                request.at.as_deref().unwrap_or_default(),
                describe(&first),
                began.format(&Rfc3339).unwrap_or_default()
            )));
        }
    }

    match &request.app {
        None => {
            restore_all(
                &store,
                &litestream,
                &credentials,
                &state_dir,
                &target,
                at,
                &url,
            )
            .await
        }
        Some(app) => restore_one(&store, &litestream, &credentials, &target, app, at, &url).await,
    }
}

fn describe(database: &Database) -> String {
    match database {
        Database::Core => "core".to_owned(),
        Database::App(id) => format!("app {id}'s"),
    }
}

/// Whether `folder` exists with anything in it.
fn folder_has_entries(folder: &Path) -> Result<bool, Stop> {
    match std::fs::read_dir(folder) {
        Ok(mut entries) => Ok(entries.next().is_some()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(error) if error.kind() == std::io::ErrorKind::NotADirectory => Err(usage(format!(
            "{} is a file, not a folder (nothing was changed)",
            folder.display()
        ))),
        Err(error) => Err(failed(format!("cannot read {}: {error}", folder.display()))),
    }
}

/// A folder made for this restore (mode 0700) and removed unless kept.
struct Staging {
    path: PathBuf,
    keep: bool,
}

impl Staging {
    fn new(beside: &Path) -> Result<Staging, Stop> {
        use std::os::unix::fs::DirBuilderExt as _;
        let parent = beside.parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(parent)
            .map_err(|error| failed(format!("cannot create {}: {error}", parent.display())))?;
        let name = beside
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| "state".to_owned());
        let path = parent.join(format!(".{name}.restoring-{:08x}", rand::random::<u32>()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|error| failed(format!("cannot create {}: {error}", path.display())))?;
        Ok(Staging { path, keep: false })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// One restored database, for the manifest.
struct Restored {
    database: Database,
    generation: layout::Generation,
    file: PathBuf,
    bytes: u64,
    sha256: String,
}

async fn restore_database(
    store: &ObjectStore,
    litestream: &Path,
    credentials: &Credentials,
    database: &Database,
    output: &Path,
    at: Option<OffsetDateTime>,
) -> Result<Option<Restored>, Stop> {
    if let Some(folder) = output.parent() {
        private_folder(folder)?;
    }
    let generation = restore_newest(store, litestream, credentials, database, output, at)
        .await
        .map_err(|reason| {
            failed(format!(
                "cannot restore the {} database: {reason}",
                describe(database)
            ))
        })?;
    let Some(generation) = generation else {
        return Ok(None);
    };
    integrity_check(output).map_err(|reason| {
        failed(format!(
            "the restored {} database is damaged: {reason}",
            describe(database)
        ))
    })?;
    let (bytes, sha256) = digest(output)?;
    Ok(Some(Restored {
        database: database.clone(),
        generation,
        file: output.to_path_buf(),
        bytes,
        sha256,
    }))
}

async fn restore_all(
    store: &ObjectStore,
    litestream: &Path,
    credentials: &Credentials,
    state_dir: &Path,
    target: &Layout,
    at: Option<OffsetDateTime>,
    url: &ReplicaUrl,
) -> Result<String, Stop> {
    let mut staging = Staging::new(state_dir)?;
    // The staged layout mirrors the target's below the state folder.
    let staged = |path: &Path| -> PathBuf {
        staging
            .path
            .join(path.strip_prefix(state_dir).unwrap_or(path))
    };
    let mut core = restore_database(
        store,
        litestream,
        credentials,
        &Database::Core,
        &staged(&target.db_path),
        at,
    )
    .await?
    .ok_or_else(|| {
        usage("--at: the core database held nothing yet at that instant (nothing was restored)")
    })?;
    let app_ids = store
        .list_children(layout::APPS_DIR)
        .await
        .map_err(|error| failed(format!("--from: {error}")))?;
    let mut apps = Vec::new();
    let mut absent = Vec::new();
    for app_id in app_ids {
        if sasha_contract::ids::AppId::parse(&app_id).is_err() {
            continue;
        }
        let output = staged(&target.app_data_root).join(format!("{app_id}.sqlite"));
        match restore_database(
            store,
            litestream,
            credentials,
            &Database::App(app_id.clone()),
            &output,
            at,
        )
        .await?
        {
            Some(restored) => apps.push(restored),
            None => absent.push(app_id),
        }
    }
    private_folder(&staged(&target.app_data_root))?;
    let docs = rebuild_docs(&core.file, &staged(&target.docs_root))?;
    let uploads_folder = staged(&target.uploads_root);
    private_folder(&uploads_folder)?;
    sasha_replica::files::download_missing(store, &uploads_folder, at)
        .await
        .map_err(|reason| failed(format!("cannot restore the uploaded documents: {reason}")))?;
    let uploads = import_uploads(&core.file, &uploads_folder)?;
    // Opening the store may have brought the file up to this build's
    // schema, and the import wrote to it.
    (core.bytes, core.sha256) = digest(&core.file)?;

    let relative = |path: &Path| -> String {
        path.strip_prefix(&staging.path)
            .unwrap_or(path)
            .display()
            .to_string()
    };
    let entry = |restored: &Restored| {
        json!({
            "database": restored.database.label(),
            "generation": restored.generation.as_str(),
            "file": relative(&restored.file),
            "bytes": restored.bytes,
            "sha256": restored.sha256,
            "integrityCheck": "ok",
        })
    };
    let manifest = json!({
        "from": url.describe(),
        "at": at.and_then(|at| at.format(&Rfc3339).ok()),
        "restoredAt": OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default(),
        "databases": std::iter::once(&core).chain(apps.iter()).map(entry).collect::<Vec<_>>(),
        "appsWithoutStateAtThatInstant": absent,
        "docs": {
            "source": "the package heads in the restored core database (the revision ledger for an app without one)",
            "apps": docs,
        },
        "uploads": {
            "source": "rows of the restored core database; documents an earlier build mirrored to object storage are imported into it",
            "imported": uploads,
        },
    });
    write_manifest(&staging.path.join(MANIFEST), &manifest)?;

    // Into place: the (empty or missing) state folder becomes the staging one.
    match std::fs::remove_dir(state_dir) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(failed(format!(
                "{} could not be replaced ({error}); nothing was changed",
                state_dir.display()
            )));
        }
    }
    std::fs::rename(&staging.path, state_dir).map_err(|error| {
        failed(format!(
            "cannot move the restored state into {}: {error}",
            state_dir.display()
        ))
    })?;
    staging.keep = true;
    sync_folder(state_dir.parent().unwrap_or(Path::new("/")));
    Ok(format!(
        "Restored the core database and {} app databases ({} docs packages, {} uploaded documents of an earlier build imported) into {}; see {}",
        apps.len(),
        docs.len(),
        uploads,
        state_dir.display(),
        state_dir.join(MANIFEST).display()
    ))
}

async fn restore_one(
    store: &ObjectStore,
    litestream: &Path,
    credentials: &Credentials,
    target: &Layout,
    app: &str,
    at: Option<OffsetDateTime>,
    url: &ReplicaUrl,
) -> Result<String, Stop> {
    let final_file = target.app_data_root.join(format!("{app}.sqlite"));
    private_folder(&target.app_data_root)?;
    let staging = Staging::new(&final_file)?;
    let output = staging.path.join(format!("{app}.sqlite"));
    let restored = restore_database(
        store,
        litestream,
        credentials,
        &Database::App(app.to_owned()),
        &output,
        at,
    )
    .await?
    .ok_or_else(|| {
        usage(format!(
            "--at: app {app}'s database held nothing yet at that instant (nothing was restored)"
        ))
    })?;
    // A hard link fails if the file appeared meanwhile: nothing is overwritten.
    std::fs::hard_link(&output, &final_file).map_err(|error| {
        failed(format!(
            "cannot put the restored file at {} ({error}); nothing was overwritten",
            final_file.display()
        ))
    })?;
    sync_folder(&target.app_data_root);
    let manifest = json!({
        "from": url.describe(),
        "at": at.and_then(|at| at.format(&Rfc3339).ok()),
        "restoredAt": OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default(),
        "databases": [{
            "database": app,
            "generation": restored.generation.as_str(),
            "file": final_file.display().to_string(),
            "bytes": restored.bytes,
            "sha256": restored.sha256,
            "integrityCheck": "ok",
        }],
    });
    let manifest_path = target.app_data_root.join(format!(".{app}.{MANIFEST}"));
    let _ = std::fs::remove_file(&manifest_path);
    write_manifest(&manifest_path, &manifest)?;
    Ok(format!(
        "Restored app {app}'s database into {}; see {}",
        final_file.display(),
        manifest_path.display()
    ))
}

fn private_folder(folder: &Path) -> Result<(), Stop> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(folder)
        .map_err(|error| failed(format!("cannot create {}: {error}", folder.display())))
}

fn integrity_check(path: &Path) -> Result<(), String> {
    let connection = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|error| error.to_string())?;
    let verdict: String = connection
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .map_err(|error| error.to_string())?;
    if verdict == "ok" {
        Ok(())
    } else {
        Err(verdict)
    }
}

fn digest(path: &Path) -> Result<(u64, String), Stop> {
    let bytes = std::fs::read(path)
        .map_err(|error| failed(format!("cannot read {}: {error}", path.display())))?;
    Ok((bytes.len() as u64, hex::encode(Sha256::digest(&bytes))))
}

fn write_manifest(path: &Path, manifest: &serde_json::Value) -> Result<(), Stop> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let text = serde_json::to_string_pretty(manifest).unwrap_or_default();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|error| failed(format!("cannot write {}: {error}", path.display())))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|error| failed(format!("cannot write {}: {error}", path.display())))
}

fn sync_folder(folder: &Path) {
    let _ = std::fs::File::open(folder).and_then(|folder| folder.sync_all());
}

/// Imports the documents in `uploads_folder` (mirrored by a build before
/// uploads moved into the core database, just downloaded) into the restored
/// core database; says how many.
fn import_uploads(core: &Path, uploads_folder: &Path) -> Result<usize, Stop> {
    let store = studio_store::Store::open(core)
        .map_err(|error| failed(format!("cannot open the restored core database: {error}")))?;
    studio_uploads::import::import_folder(&store, uploads_folder)
        .map(|report| report.imported)
        .map_err(|error| failed(format!("cannot import the uploaded documents: {error}")))
}

/// Writes every package of the core database at `core` into
/// `docs_root/apps/<id>/`: its head (the exact files it had, valid or not),
/// else, for a database from before package heads, its app's current
/// revision from the ledger; never member apps (the ledger alone holds
/// them) or deleted ones. Gives the app ids.
fn rebuild_docs(core: &Path, docs_root: &Path) -> Result<Vec<String>, Stop> {
    let store = studio_store::Store::open(core)
        .map_err(|error| failed(format!("cannot open the restored core database: {error}")))?;
    let apps_dir = docs_root.join("apps");
    private_folder(&apps_dir)?;
    let ledger = |error: studio_store::StoreError| {
        failed(format!("cannot read the revision ledger: {error}"))
    };
    let heads = store.package_head_generations().map_err(ledger)?;
    let mut written = Vec::new();
    for id in heads.keys() {
        if sasha_contract::ids::AppId::parse(id).is_err() {
            continue;
        }
        if let Some(files) = store
            .package_head(id)
            .map_err(ledger)?
            .and_then(|head| head.files)
        {
            write_package(
                &apps_dir.join(id),
                id,
                files
                    .iter()
                    .map(|(path, bytes)| (path.as_str(), bytes.clone())),
            )?;
            written.push(id.clone());
        }
    }
    for app in store.registered_apps().map_err(ledger)? {
        if heads.contains_key(&app.app_id)
            || sasha_contract::ids::AppId::parse(&app.app_id).is_err()
            || store.member_app(&app.app_id).map_err(ledger)?.is_some()
            || store
                .lifecycle(&app.app_id)
                .map_err(ledger)?
                .is_some_and(|lifecycle| lifecycle.package_deleted_at.is_some())
        {
            continue;
        }
        let Some(files) = store
            .revision_files(&app.app_id, &app.current_revision)
            .map_err(ledger)?
        else {
            // The current revision was pruned or never recorded: its
            // package cannot be rebuilt, and the manifest does not list it.
            continue;
        };
        let mut contents = Vec::with_capacity(files.len());
        for file in files {
            let bytes = store
                .revision_file(&app.app_id, &app.current_revision, &file.path)
                .map_err(ledger)?
                .ok_or_else(|| failed(format!("the ledger lacks a file of app {}", app.app_id)))?;
            contents.push((file.path, bytes));
        }
        write_package(
            &apps_dir.join(&app.app_id),
            &app.app_id,
            contents
                .iter()
                .map(|(path, bytes)| (path.as_str(), bytes.clone())),
        )?;
        written.push(app.app_id);
    }
    Ok(written)
}

/// Writes one package's files below `folder`, each a plain relative path.
fn write_package<'a>(
    folder: &Path,
    id: &str,
    files: impl Iterator<Item = (&'a str, Vec<u8>)>,
) -> Result<(), Stop> {
    for (path, bytes) in files {
        let relative = Path::new(path);
        let plain = relative
            .components()
            .all(|component| matches!(component, Component::Normal(_)));
        if !plain {
            return Err(failed(format!(
                "the core database names a file outside app {id}'s folder"
            )));
        }
        let path = folder.join(relative);
        if let Some(parent) = path.parent() {
            private_folder(parent)?;
        }
        std::fs::write(&path, bytes)
            .map_err(|error| failed(format!("cannot write {}: {error}", path.display())))?;
    }
    Ok(())
}
