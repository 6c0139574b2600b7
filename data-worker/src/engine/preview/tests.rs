//! Previews against real files in temporary folders: scratch copies that the
//! live file never sees, with the draft's migrations applied to them only.

use serde_json::json;

use super::super::tests::{
    APP, add_category, contract, count, create_category, meta, raw, receipt, table_names,
    with_migration,
};
use super::*;
use crate::engine::Target;

const P1: &str = "0123456789abcdef0123456789abcdef";
const P2: &str = "fedcba9876543210fedcba9876543210";

fn preview(id: &str) -> Target<'_> {
    Target::Preview {
        app_id: APP,
        preview: id,
    }
}

fn scratch(dir: &tempfile::TempDir, id: &str, contract: &DataContract) -> PathBuf {
    dir.path()
        .join(PREVIEW_DIR)
        .join(APP)
        .join(format!("{id}-{}.sqlite", &contract.hash[..16]))
}

fn names(engine: &Engine, target: Target<'_>, contract: &DataContract) -> Vec<String> {
    engine
        .query(
            target,
            contract,
            "SELECT name FROM categories ORDER BY name",
            &[],
        )
        .unwrap()
        .into_iter()
        .map(|row| row["name"].as_str().unwrap().to_owned())
        .collect()
}

fn add_in_preview(engine: &Engine, id: &str, contract: &DataContract, key: &str, name: &str) {
    engine
        .mutate(
            preview(id),
            contract,
            receipt("alice", key, &json!({ "name": name })),
            meta(),
            create_category(name),
        )
        .unwrap();
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|entry| entry.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_preview_is_a_snapshot_of_live_that_live_never_sees() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    add_category(&engine, &contract, "alice", "k1", "Travel");

    // Live rows from before the preview began are there ...
    assert_eq!(names(&engine, preview(P1), &contract), ["Travel"]);
    let path = scratch(&dir, P1, &contract);
    assert!(path.exists(), "{}", path.display());
    use std::os::unix::fs::PermissionsExt as _;
    for folder in [
        dir.path().join(PREVIEW_DIR),
        dir.path().join(PREVIEW_DIR).join(APP),
    ] {
        let mode = std::fs::metadata(&folder).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", folder.display());
    }

    // ... a preview write stays in the preview ...
    add_in_preview(&engine, P1, &contract, "k2", "Food");
    assert_eq!(names(&engine, preview(P1), &contract), ["Food", "Travel"]);
    assert_eq!(names(&engine, APP.into(), &contract), ["Travel"]);
    let live = raw(&dir);
    assert_eq!(count(&live, "SELECT count(*) FROM categories"), 1);
    assert_eq!(count(&live, "SELECT count(*) FROM _sasha_audit"), 1);
    assert_eq!(count(&live, "SELECT count(*) FROM _sasha_idempotency"), 1);

    // ... and a live write after the copy is not in it.
    add_category(&engine, &contract, "alice", "k3", "Books");
    assert_eq!(names(&engine, APP.into(), &contract), ["Books", "Travel"]);
    assert_eq!(names(&engine, preview(P1), &contract), ["Food", "Travel"]);

    // Another preview is another copy; the schema is described from it.
    assert_eq!(names(&engine, preview(P2), &contract), ["Books", "Travel"]);
    assert_eq!(
        engine.describe(preview(P2), &contract).unwrap(),
        contract.schema
    );
    // A restart opens the same scratch file as it was left, and copies a
    // live file no connection holds open for a new preview.
    drop(engine);
    let engine = Engine::new(dir.path());
    assert_eq!(names(&engine, preview(P1), &contract), ["Food", "Travel"]);
    let p3 = "00000000000000000000000000000003";
    assert_eq!(names(&engine, preview(p3), &contract), ["Books", "Travel"]);
}

#[test]
fn a_preview_of_an_app_without_data_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    add_in_preview(&engine, P1, &contract, "k1", "Food");
    assert_eq!(names(&engine, preview(P1), &contract), ["Food"]);
    assert!(!dir.path().join(format!("{APP}.sqlite")).exists());
    assert_eq!(files_in(dir.path()), [PREVIEW_DIR]);
}

#[test]
fn a_changed_draft_gets_a_fresh_copy_with_its_migration() {
    let dir = tempfile::tempdir().unwrap();
    let live_contract = contract();
    let engine = Engine::new(dir.path());
    add_category(&engine, &live_contract, "alice", "k1", "Travel");
    add_in_preview(&engine, P1, &live_contract, "k2", "Food");
    let old = scratch(&dir, P1, &live_contract);
    assert!(old.exists());

    let draft = with_migration(
        &live_contract,
        "colour",
        "ALTER TABLE categories ADD COLUMN colour TEXT; CREATE TABLE tags (id INTEGER PRIMARY KEY);",
    );
    // Fresh from live: the old preview's write is gone with its file.
    assert_eq!(names(&engine, preview(P1), &draft), ["Travel"]);
    let new = scratch(&dir, P1, &draft);
    assert!(new.exists());
    assert_eq!(
        files_in(&dir.path().join(PREVIEW_DIR).join(APP))
            .iter()
            .filter(|name| name.ends_with(".sqlite"))
            .count(),
        1
    );
    for suffix in ["", "-wal", "-shm"] {
        assert!(!PathBuf::from(format!("{}{suffix}", old.display())).exists());
    }

    // The draft's migration is in the preview, not in live.
    let rows = engine
        .query(
            preview(P1),
            &draft,
            "SELECT name, colour FROM categories",
            &[],
        )
        .unwrap();
    assert_eq!(rows.len(), 1);
    let copy = rusqlite::Connection::open(&new).unwrap();
    assert_eq!(count(&copy, "SELECT count(*) FROM _sasha_migrations"), 3);
    assert!(table_names(&copy).contains(&"tags".to_owned()));
    let live = raw(&dir);
    assert_eq!(count(&live, "SELECT count(*) FROM _sasha_migrations"), 2);
    assert!(!table_names(&live).contains(&"tags".to_owned()));
    assert_eq!(
        count(
            &live,
            "SELECT count(*) FROM pragma_table_info('categories') WHERE name = 'colour'"
        ),
        0
    );
    assert!(
        engine
            .query(APP, &live_contract, "SELECT name FROM categories", &[])
            .is_ok()
    );
}

#[test]
fn a_failing_migration_in_a_preview_leaves_live_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let live_contract = contract();
    let engine = Engine::new(dir.path());
    add_category(&engine, &live_contract, "alice", "k1", "Travel");
    let before: Vec<String> = table_names(&raw(&dir));

    let broken = with_migration(
        &live_contract,
        "broken",
        "CREATE TABLE extra (id INTEGER PRIMARY KEY); CREATE TABLE categories (id INTEGER);",
    );
    let error = engine
        .query(preview(P1), &broken, "SELECT name FROM categories", &[])
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::MigrationFailed);
    let live = raw(&dir);
    assert_eq!(table_names(&live), before);
    assert_eq!(count(&live, "SELECT count(*) FROM _sasha_migrations"), 2);
    assert_eq!(count(&live, "SELECT count(*) FROM categories"), 1);
    // The failed copy is gone; live is still served.
    assert!(!scratch(&dir, P1, &broken).exists());
    assert_eq!(names(&engine, APP.into(), &live_contract), ["Travel"]);
}

#[test]
fn an_invalid_preview_id_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    for id in [
        "0123456789ABCDEF0123456789ABCDEF",
        "0123456789abcdef0123456789abcde",
        "0123456789abcdef0123456789abcdef0",
        "0123456789abcdeg0123456789abcdef",
        "../../../../../../../../../../..",
        "0123456789abcdef/123456789abcdef",
    ] {
        let error = engine.open(preview(id), &contract).unwrap_err();
        assert_eq!(error.code, ErrorCode::InputInvalid, "{id}");
        assert!(error.message.contains("32 lowercase"), "{id}");
        assert_eq!(
            engine.remove_previews(APP, id).unwrap_err().code,
            ErrorCode::InputInvalid
        );
    }
    // An invalid app id stays a not-found, for previews too.
    let error = engine
        .open(
            Target::Preview {
                app_id: "../x",
                preview: P1,
            },
            &contract,
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotFound);
    assert!(files_in(dir.path()).is_empty());
    // An empty preview is the live data.
    assert_eq!(Target::of(APP, ""), Target::Live(APP));
}

#[test]
fn remove_previews_closes_and_removes_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    // No folder at all: nothing removed, no error.
    assert_eq!(engine.remove_previews(APP, "").unwrap(), 0);
    assert_eq!(engine.remove_previews(APP, P1).unwrap(), 0);
    assert_eq!(
        engine.remove_previews("../x", "").unwrap_err().code,
        ErrorCode::NotFound
    );

    add_category(&engine, &contract, "alice", "k1", "Travel");
    add_in_preview(&engine, P1, &contract, "k2", "Food");
    add_in_preview(&engine, P2, &contract, "k2", "Books");
    let folder = dir.path().join(PREVIEW_DIR).join(APP);

    // One preview: its open connection is closed and its files go.
    assert!(engine.remove_previews(APP, P1).unwrap() >= 1);
    assert!(!scratch(&dir, P1, &contract).exists());
    assert!(files_in(&folder).iter().all(|name| !name.starts_with(P1)));
    assert!(scratch(&dir, P2, &contract).exists());
    assert_eq!(engine.remove_previews(APP, P1).unwrap(), 0);
    // Used again, it is a fresh copy of live.
    assert_eq!(names(&engine, preview(P1), &contract), ["Travel"]);

    // Every preview of the app, with the folder.
    assert!(engine.remove_previews(APP, "").unwrap() >= 2);
    assert!(!folder.exists());
    assert_eq!(engine.remove_previews(APP, "").unwrap(), 0);
    assert_eq!(names(&engine, APP.into(), &contract), ["Travel"]);
}

#[test]
fn removing_app_data_removes_its_previews() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    add_category(&engine, &contract, "alice", "k1", "Travel");
    add_in_preview(&engine, P1, &contract, "k2", "Food");
    let removed = engine.back_up_and_remove(APP).unwrap();
    assert!(removed.is_some());
    assert!(!dir.path().join(PREVIEW_DIR).join(APP).exists());

    // With no live file left, a preview is still removed.
    add_in_preview(&engine, P2, &contract, "k3", "Books");
    assert!(scratch(&dir, P2, &contract).exists());
    assert!(engine.back_up_and_remove(APP).unwrap().is_none());
    assert!(!dir.path().join(PREVIEW_DIR).join(APP).exists());
}

#[test]
fn hash_tags_are_always_file_name_safe() {
    assert_eq!(hash_tag(&"ab".repeat(32)), "abababababababab");
    for odd in ["", "short", "../../../../../../x", "ABABABABABABABABAB"] {
        let tag = hash_tag(odd);
        assert_eq!(tag.len(), 16);
        assert!(
            tag.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }
    assert_ne!(slot_key("a", P1), "a");
    assert!(!valid_app_id(&slot_key("a", P1)));
}
