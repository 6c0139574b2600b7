//! `sasha backup` against a running stack that keeps writing, and the
//! documented restore: copy a backup's files into a new state folder's
//! `DB_PATH` and `APP_DATA_ROOT`, start a fresh stack on it, and use it.
//!
//! Writers create `expense-log` categories through mcp-gateway as the Studio
//! page does (the Studio session, `Sasha-App`, idempotency keys) while the
//! backup runs several times. Each copy must be one committed state: every row
//! with its audit row and its idempotency receipt, no more, no less.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::mcp::{self, Mcp, structured};
use common::{Harness, copy_dir};
use serde_json::{Value, json};
use sha2::Digest as _;
use studio_store::UserRole;

const APP: &str = "expense-log";
const STUDIO: &str = "http://localhost:3007";
const CREATE: &str = "app__expense_log__categories__create";
const WRITERS: usize = 4;
const BACKUPS: usize = 3;

/// The Studio page with expense-log open: writes are `source: ui`, no
/// confirmation.
fn studio(url: &str, session: &str) -> Mcp {
    Mcp::new(
        url,
        vec![
            ("cookie".to_owned(), format!("sasha_session={session}")),
            ("origin".to_owned(), STUDIO.to_owned()),
            ("sasha-app".to_owned(), APP.to_owned()),
        ],
        mcp::SESSIONLESS,
    )
}

/// One write a writer made: its key, the name it created and the row id.
#[derive(Debug, Clone)]
struct Write {
    key: String,
    name: String,
    id: i64,
}

/// Runs `sasha backup` and returns the folder it printed.
async fn backup(out: &Path, state_dir: &Path) -> PathBuf {
    let output = tokio::process::Command::new(common::sasha_bin())
        .args(["backup", "--out"])
        .arg(out)
        .arg("--state-dir")
        .arg(state_dir)
        .env_clear()
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "sasha backup failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let folder = PathBuf::from(stdout.trim());
    assert_eq!(folder.parent(), Some(out), "{stdout}");
    folder
}

fn count(connection: &rusqlite::Connection, sql: &str) -> i64 {
    connection.query_row(sql, [], |row| row.get(0)).unwrap()
}

/// Checks one backup folder: the manifest describes its files, every copy
/// passes the integrity check, and the app copy is one committed state.
/// Returns the number of categories in it.
fn check_backup(folder: &Path) -> i64 {
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["sashaVersion"], env!("CARGO_PKG_VERSION"));
    assert!(manifest["createdAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(manifest["core"]["file"], "core.sqlite");
    let apps = manifest["apps"].as_array().unwrap();
    assert_eq!(apps.len(), 1, "{manifest}");
    assert_eq!(apps[0]["id"], APP);
    assert_eq!(apps[0]["file"], format!("apps/{APP}.sqlite"));
    for entry in [&manifest["core"], &apps[0]] {
        let bytes = std::fs::read(folder.join(entry["file"].as_str().unwrap())).unwrap();
        assert_eq!(entry["bytes"], bytes.len() as u64);
        assert_eq!(entry["sha256"], hex::encode(sha2::Sha256::digest(&bytes)));
    }
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["apps", "core.sqlite", "manifest.json"],
        "no -wal files"
    );

    let core = rusqlite::Connection::open(folder.join("core.sqlite")).unwrap();
    let integrity: String = core
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    assert_eq!(
        count(&core, "SELECT count(*) FROM users WHERE username = 'sam'"),
        1
    );

    let data = rusqlite::Connection::open(folder.join(format!("apps/{APP}.sqlite"))).unwrap();
    let integrity: String = data
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let rows = count(&data, "SELECT count(*) FROM categories");
    let audited = count(
        &data,
        "SELECT count(*) FROM _sasha_audit WHERE table_name = 'categories' AND operation = 'create'",
    );
    let receipts = count(
        &data,
        "SELECT count(*) FROM _sasha_idempotency WHERE operation = 'categories.create'",
    );
    assert_eq!(
        (rows, audited, receipts),
        (rows, rows, rows),
        "rows, audit rows and receipts of one committed state"
    );
    let unaudited = count(
        &data,
        "SELECT count(*) FROM categories c WHERE NOT EXISTS (SELECT 1 FROM _sasha_audit a \
         WHERE a.table_name = 'categories' AND a.operation = 'create' AND a.record_id = CAST(c.id AS TEXT))",
    );
    let unreceipted = count(
        &data,
        "SELECT count(*) FROM categories c WHERE NOT EXISTS (SELECT 1 FROM _sasha_idempotency i \
         WHERE i.operation = 'categories.create' AND json_extract(i.result_json, '$.id') = c.id)",
    );
    assert_eq!((unaudited, unreceipted), (0, 0));
    rows
}

#[tokio::test]
async fn backups_taken_under_writes_restore_into_a_working_stack() {
    let harness = Harness::new();
    let fixture = mcp::fixture(APP);
    copy_dir(&fixture, &harness.path().join("docs/apps").join(APP));
    let store = harness.store();
    let staff = store
        .create_user("sam", UserRole::Staff, "correct horse battery")
        .unwrap();
    let session = store.create_session(&staff.id).unwrap();
    drop(store);
    let backends = harness.start_backends().await;
    let url = format!("http://{}/mcp", backends.gateway.listener("http"));

    // Writers create categories until told to stop.
    let writes: Arc<Mutex<Vec<Write>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for worker in 0..WRITERS {
        let (url, session, writes, stop) =
            (url.clone(), session.clone(), writes.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut client = studio(&url, &session);
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let (key, name) = (format!("key-{worker}-{n}"), format!("w{worker}-{n}"));
                let created = client
                    .call(
                        CREATE,
                        json!({"values": {"name": name}, "idempotencyKey": key}),
                    )
                    .await;
                let id = structured(&created)["id"].as_i64().unwrap();
                writes.lock().unwrap().push(Write { key, name, id });
                n += 1;
            }
        }));
    }
    let written = || writes.lock().unwrap().len();
    let wait_for = |target: usize| {
        let writes = writes.clone();
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while writes.lock().unwrap().len() < target {
                assert!(tokio::time::Instant::now() < deadline, "writers stalled");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };

    // Several backups while the writers go on.
    let out = harness.path().join("backups");
    let mut folders = Vec::new();
    let mut during = 0;
    for round in 1..=BACKUPS {
        wait_for(round * 15).await;
        let before = written();
        folders.push(backup(&out, harness.path()).await);
        during += written() - before;
    }
    wait_for(written() + 5).await;
    stop.store(true, Ordering::SeqCst);
    for writer in writers {
        writer.await.unwrap();
    }
    let writes = writes.lock().unwrap().clone();
    assert!(during > 0, "writes landed while backups ran");

    let counts: Vec<i64> = folders.iter().map(|folder| check_backup(folder)).collect();
    for pair in counts.windows(2) {
        assert!(
            pair[0] < pair[1],
            "later backups hold more rows: {counts:?}"
        );
    }
    assert!(
        (*counts.last().unwrap() as usize) < writes.len(),
        "writes went on after the last backup: {counts:?} of {}",
        writes.len()
    );
    let mut sorted = folders.clone();
    sorted.sort();
    assert_eq!(sorted, folders, "folder names sort by time");
    drop(backends);

    // Restore the last backup as documented: a new state folder, the same
    // docs tree, the copies at DB_PATH and APP_DATA_ROOT/<id>.sqlite.
    let chosen = folders.last().unwrap();
    let restored = Harness::new();
    copy_dir(&harness.path().join("docs"), &restored.path().join("docs"));
    std::fs::copy(
        chosen.join("core.sqlite"),
        restored.path().join("core.sqlite"),
    )
    .unwrap();
    std::fs::create_dir_all(restored.path().join("apps")).unwrap();
    std::fs::copy(
        chosen.join(format!("apps/{APP}.sqlite")),
        restored.path().join(format!("apps/{APP}.sqlite")),
    )
    .unwrap();
    let backup_rows: BTreeMap<i64, String> = {
        let data = rusqlite::Connection::open(chosen.join(format!("apps/{APP}.sqlite"))).unwrap();
        data.prepare("SELECT id, name FROM categories")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let backed_up_keys: BTreeSet<String> = {
        let data = rusqlite::Connection::open(chosen.join(format!("apps/{APP}.sqlite"))).unwrap();
        data.prepare("SELECT key FROM _sasha_idempotency")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let backends = restored.start_backends().await;
    let url = format!("http://{}/mcp", backends.gateway.listener("http"));
    // The Studio session lives in the core database, so it came along.
    let mut client = studio(&url, &session);

    // Reads: exactly the backed-up rows, through MCP.
    let mut served = BTreeMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut arguments = json!({"limit": 200, "orderBy": [{"field": "id"}]});
        if let Some(cursor) = &cursor {
            arguments["cursor"] = json!(cursor);
        }
        let page = client
            .call("app__expense_log__categories__list", arguments)
            .await;
        let page = structured(&page).clone();
        for row in page["rows"].as_array().unwrap() {
            served.insert(
                row["id"].as_i64().unwrap(),
                row["name"].as_str().unwrap().to_owned(),
            );
        }
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(served, backup_rows);
    for write in &writes {
        let kept = backed_up_keys.contains(&write.key);
        assert_eq!(
            backup_rows.get(&write.id) == Some(&write.name),
            kept,
            "a row is in the backup exactly when its receipt is: {write:?}"
        );
    }

    // A key from before the backup replays the original row.
    let replayed_write = writes
        .iter()
        .find(|write| backed_up_keys.contains(&write.key))
        .expect("some write is in the backup");
    let replayed = client
        .call(
            CREATE,
            json!({"values": {"name": replayed_write.name}, "idempotencyKey": replayed_write.key}),
        )
        .await;
    assert_eq!(structured(&replayed)["id"], json!(replayed_write.id));
    let got = client
        .call(
            "app__expense_log__categories__get",
            json!({"id": replayed_write.id}),
        )
        .await;
    assert_eq!(structured(&got)["name"], replayed_write.name.as_str());

    // New writes land, after every restored row.
    let created = client
        .call(
            CREATE,
            json!({"values": {"name": "after-restore"}, "idempotencyKey": "after-restore"}),
        )
        .await;
    let new_id = structured(&created)["id"].as_i64().unwrap();
    assert!(new_id > *backup_rows.keys().last().unwrap());
    let data =
        rusqlite::Connection::open(restored.path().join(format!("apps/{APP}.sqlite"))).unwrap();
    data.busy_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(
        count(&data, "SELECT count(*) FROM categories"),
        backup_rows.len() as i64 + 1,
        "the replay wrote nothing"
    );
    assert_eq!(
        count(
            &data,
            "SELECT count(*) FROM _sasha_audit WHERE table_name = 'categories'"
        ),
        backup_rows.len() as i64 + 1
    );
}

#[tokio::test]
async fn backup_fails_with_one_line_without_a_core_database() {
    let dir = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(common::sasha_bin())
        .args(["backup", "--out"])
        .arg(dir.path().join("out"))
        .arg("--state-dir")
        .arg(dir.path().join("nothing-here"))
        .env_clear()
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("sasha backup: no core database at "),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
    assert!(!dir.path().join("out").exists(), "nothing is created");
}

/// With a PostgreSQL core database (`DATABASE_URL`), a backup copies the app
/// databases, says the core database is PostgreSQL's to back up, and records
/// where it is (no credentials) instead of a copy.
#[tokio::test]
async fn a_postgresql_core_database_is_named_not_copied() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(state.join("apps")).unwrap();
    let output = tokio::process::Command::new(common::sasha_bin())
        .args(["backup", "--out"])
        .arg(dir.path().join("out"))
        .arg("--state-dir")
        .arg(&state)
        .env_clear()
        .env(
            "DATABASE_URL",
            "postgres://sasha:s3cret@db.internal:5432/sasha",
        )
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("the core database is PostgreSQL"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr}");
    let folder = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("manifest.json")).unwrap())
            .unwrap();
    assert!(manifest.get("core").is_none(), "{manifest}");
    assert_eq!(
        manifest["coreDatabase"], "postgres://sasha:***@db.internal:5432/sasha",
        "{manifest}"
    );
    assert!(!folder.join("core.sqlite").exists());
}
