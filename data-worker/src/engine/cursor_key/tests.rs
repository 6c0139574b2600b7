//! Each app's cursor key in its own database: random per app, made once,
//! carried by a copy of the file (another worker's, a restore, a preview),
//! taken from an older worker's `.cursor-key` only by a file that worker
//! set up, and beyond every governed statement's reach (the authorizer's
//! matrix in `engine::tests`).

use std::path::Path;

use super::super::tests::{APP, add_category, contract, count, raw};
use super::*;
use crate::engine::Engine;
use crate::engine::Target;
use crate::engine::preview::Preview;

/// The key an older data-worker kept for every app of `APP_DATA_ROOT`.
const OLD_KEY: [u8; 32] = [7; 32];

fn key_of(engine: &Engine) -> CursorKey {
    engine.cursor_key(APP, &contract()).unwrap()
}

fn stored_in(conn: &Connection) -> Vec<u8> {
    conn.query_row("SELECT key FROM _sasha_cursor_key", [], |row| row.get(0))
        .unwrap()
}

fn old_worker_key_in(root: &Path, key: &[u8]) {
    std::fs::write(root.join(LEGACY_FILE), key).unwrap();
}

/// The app's committed state copied into `root`, as another worker holds
/// it after a move or a restore from object storage.
fn copy_into(from: &tempfile::TempDir, root: &Path) {
    let target = root.join(format!("{APP}.sqlite"));
    raw(from)
        .execute("VACUUM INTO ?1", [target.to_str().unwrap()])
        .unwrap();
}

/// A file as an older data-worker left it: set up, with data, and no key
/// of its own.
fn set_up_before_keys_were_per_app(dir: &tempfile::TempDir) {
    let engine = Engine::new(dir.path());
    add_category(&engine, &contract(), "alice", "k1", "Travel");
    drop(engine);
    raw(dir)
        .execute_batch("DROP TABLE _sasha_cursor_key")
        .unwrap();
}

#[test]
fn each_app_has_a_key_of_its_own_that_travels_with_its_data() {
    let a = tempfile::tempdir().unwrap();
    old_worker_key_in(a.path(), &OLD_KEY);
    let engine = Engine::new(a.path());
    add_category(&engine, &contract(), "alice", "k1", "Travel");
    let key = key_of(&engine);
    // A new app never takes the worker's old key: it is random, in its file.
    assert_ne!(key.as_bytes(), OLD_KEY);
    let conn = raw(&a);
    assert_eq!(stored_in(&conn), key.as_bytes());
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_cursor_key"), 1);
    assert_eq!(format!("{key:?}"), "CursorKey(..)");

    // Another app of the same worker has another key.
    let other = engine.cursor_key("other-app", &contract()).unwrap();
    assert_ne!(other, key);

    // A preview's scratch copy holds live's key.
    let scope = sasha_contract::data::PreviewScope::of_live(Some(&contract().tables), Some(false));
    let preview = Target::Preview {
        app_id: APP,
        preview: Preview {
            id: "0123456789abcdef0123456789abcdef",
            previewer: "alice",
            scope: &scope,
        },
    };
    assert_eq!(engine.cursor_key(preview, &contract()).unwrap(), key);

    // A restart reads the same key and writes no other.
    drop(engine);
    let engine = Engine::new(a.path());
    assert_eq!(key_of(&engine), key);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_cursor_key"), 1);

    // Another worker, with an old key of its own, over a copy of the file.
    let b = tempfile::tempdir().unwrap();
    old_worker_key_in(b.path(), &[9; 32]);
    copy_into(&a, b.path());
    assert_eq!(key_of(&Engine::new(b.path())), key);
}

#[test]
fn a_file_set_up_before_keys_were_per_app_keeps_the_old_workers_key() {
    // The worker kept its old key: the file takes it, once and for good.
    let dir = tempfile::tempdir().unwrap();
    set_up_before_keys_were_per_app(&dir);
    old_worker_key_in(dir.path(), &OLD_KEY);
    let engine = Engine::new(dir.path());
    assert_eq!(key_of(&engine).as_bytes(), OLD_KEY);
    assert_eq!(stored_in(&raw(&dir)), OLD_KEY);
    drop(engine);
    std::fs::remove_file(dir.path().join(LEGACY_FILE)).unwrap();
    assert_eq!(key_of(&Engine::new(dir.path())).as_bytes(), OLD_KEY);

    // No old key, or one that is not 32 bytes: a random key, and no
    // worker-wide key file is made.
    for old in [None, Some(&b"short"[..])] {
        let dir = tempfile::tempdir().unwrap();
        set_up_before_keys_were_per_app(&dir);
        if let Some(old) = old {
            old_worker_key_in(dir.path(), old);
        }
        let key = key_of(&Engine::new(dir.path()));
        assert_ne!(key.as_bytes(), OLD_KEY);
        assert_ne!(key.as_bytes(), [0; 32]);
        assert_eq!(stored_in(&raw(&dir)), key.as_bytes());
        assert_eq!(
            dir.path().join(LEGACY_FILE).exists(),
            old.is_some(),
            "{old:?}"
        );
    }
}
