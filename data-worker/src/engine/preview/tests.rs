//! Previews against real files in temporary folders: each previewer's
//! scratch copy holds only the live rows they may read, the live file never
//! sees the copy, and the draft's migrations are applied to the copy only.

use std::sync::LazyLock;

use serde_json::json;

use super::super::tests::{
    APP, add_category, contract, count, create_category, meta, raw, receipt, rehash, table_names,
    with_migration,
};
use super::*;
use crate::engine::{AuditOperation, AuditRecord, MutationOutcome, Target};

const P1: &str = "0123456789abcdef0123456789abcdef";
const P2: &str = "fedcba9876543210fedcba9876543210";

/// What a user (no `manage`) reads of the expense-log app live: every
/// category, their own expenses.
static USER_SCOPE: LazyLock<PreviewScope> =
    LazyLock::new(|| PreviewScope::of_live(Some(&contract().tables), Some(false)));

/// Alice's preview `id`, as a user of the live app.
fn preview(id: &str) -> Target<'_> {
    as_previewer(id, "alice", &USER_SCOPE)
}

fn as_previewer<'a>(id: &'a str, previewer: &'a str, scope: &'a PreviewScope) -> Target<'a> {
    Target::Preview {
        app_id: APP,
        preview: Preview {
            id,
            previewer,
            scope,
        },
    }
}

/// Alice's scratch file of preview `id` for `contract`.
fn scratch(dir: &tempfile::TempDir, id: &str, contract: &DataContract) -> PathBuf {
    let preview = Preview {
        id,
        previewer: "alice",
        scope: &USER_SCOPE,
    };
    dir.path()
        .join(PREVIEW_DIR)
        .join(APP)
        .join(scratch_name(&preview, &contract.hash))
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

/// Scratch copies are this worker's own and never replicated: the worker
/// an app moves to holds its live file (handed over or restored from
/// object storage) and no scratch copy, so a preview there starts again
/// from live, its own earlier rows gone, and keeps live's cursor key.
#[test]
fn a_preview_on_the_worker_an_app_moved_to_starts_again_from_live() {
    let old = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(old.path());
    add_category(&engine, &contract, "alice", "k1", "Travel");
    add_in_preview(&engine, P1, &contract, "k2", "Food");
    add_category(&engine, &contract, "alice", "k3", "Books");
    assert_eq!(names(&engine, preview(P1), &contract), ["Food", "Travel"]);
    let key = engine.cursor_key(APP, &contract).unwrap();
    assert_eq!(engine.cursor_key(preview(P1), &contract).unwrap(), key);

    let new = tempfile::tempdir().unwrap();
    let live = new.path().join(format!("{APP}.sqlite"));
    raw(&old)
        .execute("VACUUM INTO ?1", [live.to_str().unwrap()])
        .unwrap();
    let engine = Engine::new(new.path());
    assert_eq!(names(&engine, preview(P1), &contract), ["Books", "Travel"]);
    assert!(scratch(&new, P1, &contract).exists());
    assert_eq!(engine.cursor_key(preview(P1), &contract).unwrap(), key);
    // Live is only the copy's source.
    assert_eq!(names(&engine, APP.into(), &contract), ["Books", "Travel"]);
    assert_eq!(count(&raw(&new), "SELECT count(*) FROM _sasha_audit"), 2);
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
                preview: Preview {
                    id: P1,
                    previewer: "alice",
                    scope: &USER_SCOPE,
                },
            },
            &contract,
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotFound);
    // A preview is always someone's.
    let error = engine
        .open(as_previewer(P1, "", &USER_SCOPE), &contract)
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InputInvalid);
    assert!(files_in(dir.path()).is_empty());
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
fn scratch_names_are_file_name_safe_and_one_per_previewer_contract_and_scope() {
    // Every expense, as a manager of a managersReadAll table keeps.
    let manager = PreviewScope {
        tables: USER_SCOPE
            .tables
            .keys()
            .map(|name| (name.clone(), sasha_contract::data::RowScope::Every))
            .collect(),
    };
    let of = |previewer: &str, scope: &PreviewScope, hash: &str| {
        scratch_name(
            &Preview {
                id: P1,
                previewer,
                scope,
            },
            hash,
        )
    };
    let hash = "ab".repeat(32);
    let names = [
        of("alice", &USER_SCOPE, &hash),
        of("bob", &USER_SCOPE, &hash),
        of("alice", &manager, &hash),
        of("alice", &USER_SCOPE, &"cd".repeat(32)),
        of("../../x", &USER_SCOPE, "../../../x"),
    ];
    for (at, name) in names.iter().enumerate() {
        let (stem, suffix) = name.split_at(name.len() - ".sqlite".len());
        assert_eq!(suffix, ".sqlite");
        let parts: Vec<&str> = stem.split('-').collect();
        assert_eq!(parts.len(), 3, "{name}");
        assert_eq!(parts[0], P1);
        for part in &parts[1..] {
            assert_eq!(part.len(), 16, "{name}");
            assert!(
                part.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            );
        }
        assert!(!names[..at].contains(name), "{name} twice");
    }
    let key = slot_key("a", P1, "alice");
    assert_ne!(key, slot_key("a", P1, "bob"));
    assert!(key.starts_with(&preview_key_prefix("a", P1)));
    assert!(key.starts_with(&preview_key_prefix("a", "")));
    assert!(!valid_app_id(&key));
}

/// A hand-built create of one expense of `owner`, as the grammar would run
/// it (the live category 1 must exist).
fn create_expense(
    owner: &str,
    note: &str,
) -> impl Fn(&rusqlite::Connection) -> Result<MutationOutcome, AppError> + Send + use<> {
    let (owner, note) = (owner.to_owned(), note.to_owned());
    move |tx| {
        tx.execute(
            "INSERT INTO expenses (spent_on, amount, category_id, created_by, note) \
             VALUES ('2026-01-05', 1.5, 1, ?1, ?2)",
            [&owner, &note],
        )
        .map_err(sql_error)?;
        let id = tx.last_insert_rowid();
        let row = json!({"id": id, "spent_on": "2026-01-05", "amount": 1.5, "category_id": 1,
            "created_by": owner, "note": note, "_sasha_version": 1});
        Ok(MutationOutcome {
            result: row.clone(),
            audit: vec![AuditRecord {
                table: "expenses".into(),
                record_id: id.to_string(),
                operation: AuditOperation::Create,
                before: None,
                after: Some(row),
            }],
        })
    }
}

fn add_expense(engine: &Engine, contract: &DataContract, owner: &str, note: &str) {
    engine
        .mutate(
            APP,
            contract,
            receipt(owner, note, &json!({ "note": note })),
            meta(),
            create_expense(owner, note),
        )
        .unwrap();
}

/// The expense notes `target` holds, read without an owner term.
fn notes(engine: &Engine, target: Target<'_>, contract: &DataContract) -> Vec<String> {
    engine
        .query(
            target,
            contract,
            "SELECT note FROM expenses ORDER BY id",
            &[],
        )
        .unwrap()
        .into_iter()
        .map(|row| row["note"].as_str().unwrap().to_owned())
        .collect()
}

/// The expense-log contract with `expenses` made shared: a draft that would
/// show every owner's rows.
fn widening_draft() -> DataContract {
    let mut draft = contract();
    let expenses = draft.tables.get_mut("expenses").unwrap();
    expenses.access = sasha_contract::data::Access::Shared;
    expenses.owner_field = None;
    rehash(&mut draft);
    draft
}

#[test]
fn a_previewers_copy_holds_only_the_live_rows_they_may_read() {
    let dir = tempfile::tempdir().unwrap();
    let live = contract();
    let engine = Engine::new(dir.path());
    add_category(&engine, &live, "carol", "c1", "Travel");
    add_expense(&engine, &live, "alice", "alice-lunch");
    add_expense(&engine, &live, "bob", "bob-secret-taxi");
    add_expense(&engine, &live, "alice", "alice-train");

    // A draft that makes expenses shared, previewed by alice: her rows only.
    let draft = widening_draft();
    assert_eq!(
        notes(&engine, preview(P1), &draft),
        ["alice-lunch", "alice-train"]
    );
    // The shared categories are all there; live is untouched.
    assert_eq!(names(&engine, preview(P1), &draft), ["Travel"]);
    assert_eq!(count(&raw(&dir), "SELECT count(*) FROM expenses"), 3);

    // The platform's tables carry nothing of bob's: no receipt (its reply
    // holds his row), no audit entry (its row image is his row).
    let path = scratch(&dir, P1, &draft);
    let copy = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(
        count(
            &copy,
            "SELECT count(*) FROM _sasha_idempotency WHERE actor <> 'alice'"
        ),
        0
    );
    assert_eq!(count(&copy, "SELECT count(*) FROM _sasha_idempotency"), 2);
    assert_eq!(
        count(
            &copy,
            "SELECT count(*) FROM _sasha_audit WHERE after_json LIKE '%bob%'"
        ),
        0
    );
    // Alice's two entries and the category's (a shared table's) stay.
    assert_eq!(count(&copy, "SELECT count(*) FROM _sasha_audit"), 3);
    // The ledger is append-only again once the copy is open.
    assert_eq!(
        count(
            &copy,
            "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = '_sasha_audit'"
        ),
        4,
        "no update, no delete, no replace, no entry without its hash"
    );
    drop(copy);
    // Nor do the file's bytes: deleted content is overwritten.
    drop(engine);
    for suffix in ["", "-wal"] {
        let bytes = std::fs::read(format!("{}{suffix}", path.display())).unwrap_or_default();
        assert!(
            !bytes
                .windows(b"bob-secret".len())
                .any(|w| w == b"bob-secret"),
            "bob's row is still in the copy{suffix}'s bytes"
        );
    }
    let engine = Engine::new(dir.path());

    // Bob's preview of the same draft is his own copy, with his row.
    assert_eq!(
        notes(&engine, as_previewer(P1, "bob", &USER_SCOPE), &draft),
        ["bob-secret-taxi"]
    );
    assert_eq!(
        notes(&engine, preview(P1), &draft),
        ["alice-lunch", "alice-train"]
    );

    // A manager of a managersReadAll table reads every row live, so keeps
    // them; without a live grant, or for a table the live contract does not
    // declare, nothing is kept.
    let mut roll_up = live.clone();
    roll_up
        .tables
        .get_mut("expenses")
        .unwrap()
        .managers_read_all = true;
    let manager = PreviewScope::of_live(Some(&roll_up.tables), Some(true));
    assert_eq!(
        notes(&engine, as_previewer(P2, "boss", &manager), &draft),
        ["alice-lunch", "bob-secret-taxi", "alice-train"]
    );
    let nothing = PreviewScope::of_live(Some(&live.tables), None);
    assert!(notes(&engine, as_previewer(P2, "eve", &nothing), &draft).is_empty());
    assert!(names(&engine, as_previewer(P2, "eve", &nothing), &draft).is_empty());

    // Another scope for the same previewer is a fresh copy, and the old one goes.
    let only_expenses = PreviewScope::of_live(
        Some(&std::collections::BTreeMap::from([(
            "expenses".to_owned(),
            live.tables["expenses"].clone(),
        )])),
        Some(false),
    );
    assert!(names(&engine, as_previewer(P1, "alice", &only_expenses), &draft).is_empty());
    assert!(!path.exists());

    // Removing the preview closes and removes every previewer's copy.
    assert!(engine.remove_previews(APP, P1).unwrap() >= 2);
    let folder = dir.path().join(PREVIEW_DIR).join(APP);
    assert!(files_in(&folder).iter().all(|name| !name.starts_with(P1)));
    assert!(files_in(&folder).iter().any(|name| name.starts_with(P2)));
}
