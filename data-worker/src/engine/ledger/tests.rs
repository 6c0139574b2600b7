//! The chain over real files: entries written through the engine verify,
//! one changed, removed or unhashed behind its back is named, an entry
//! without its hash is refused, an old ledger is chained once from a
//! recorded point, a ledger from before migrations were recorded is rebuilt
//! with its entries intact, a migration that reshapes a table holding rows
//! is an entry of the chain, and the canonical bytes are what docs/audit.md
//! says.

use rusqlite::Connection;

use super::*;
use crate::engine::tests::{APP, add_category, contract, raw, with_migration};
use crate::engine::{Approval, Engine};

fn verified(conn: &Connection) -> Verification {
    verify(conn, |_, _, _| Ok(())).unwrap()
}

/// An engine with three categories written through it, and the file's path.
fn three_entries() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    for (key, name) in [("k1", "travel"), ("k2", "meals"), ("k3", "office")] {
        add_category(&engine, &contract, "user-1", key, name);
    }
    (dir, engine)
}

/// Rewrites entry `id`'s `after_json` behind the engine's back, as a raw
/// sqlite3 client could (the trigger is a guard, not a lock).
fn tamper(conn: &Connection, id: i64, after: &str) {
    conn.execute_batch("DROP TRIGGER _sasha_audit_no_update")
        .unwrap();
    conn.execute(
        "UPDATE _sasha_audit SET after_json = ?1 WHERE id = ?2",
        (after, id),
    )
    .unwrap();
}

#[test]
fn every_entry_commits_to_the_one_before_it() {
    let (dir, _engine) = three_entries();
    let conn = raw(&dir);
    let mut seen = Vec::new();
    let found = verify(&conn, |entry, prev, hash| {
        assert_eq!(entry.hash(prev), hash);
        seen.push((entry.id, prev.to_owned(), hash.to_owned()));
        Ok(())
    })
    .unwrap();
    assert_eq!(found.entries, 3);
    assert_eq!(found.first_break, None);
    assert_eq!(
        found.chained_from, None,
        "a new ledger is chained from its first entry"
    );
    assert_eq!(seen[0].1, GENESIS);
    assert_eq!(seen[1].1, seen[0].2);
    assert_eq!(seen[2].1, seen[1].2);
    assert_eq!(found.head.as_deref(), Some(seen[2].2.as_str()));
    let initiator: String = conn
        .query_row(
            "SELECT initiator FROM _sasha_audit WHERE id = 2",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(initiator, "app-view");
}

#[test]
fn an_entry_changed_behind_the_engines_back_is_named() {
    let (dir, _engine) = three_entries();
    let conn = raw(&dir);
    tamper(&conn, 2, r#"{"id":2,"name":"bribes","_sasha_version":1}"#);
    let found = verified(&conn);
    assert_eq!(found.first_break, Some((2, Break::Altered)));
    assert_eq!(
        found.entries, 2,
        "it stops at the first entry that does not verify"
    );
}

#[test]
fn a_removed_or_unhashed_entry_is_named() {
    let (dir, _engine) = three_entries();
    let conn = raw(&dir);
    conn.execute_batch(
        "DROP TRIGGER _sasha_audit_no_delete; DELETE FROM _sasha_audit WHERE id = 2;",
    )
    .unwrap();
    assert_eq!(verified(&conn).first_break, Some((2, Break::Missing)));

    let (dir, _engine) = three_entries();
    let conn = raw(&dir);
    conn.execute_batch(
        "DROP TRIGGER _sasha_audit_no_delete; DELETE FROM _sasha_audit WHERE id = 1;",
    )
    .unwrap();
    assert_eq!(verified(&conn).first_break, Some((1, Break::Missing)));

    let (dir, _engine) = three_entries();
    let conn = raw(&dir);
    conn.execute_batch(
        "DROP TRIGGER _sasha_audit_no_update; UPDATE _sasha_audit SET hash = NULL WHERE id = 3;",
    )
    .unwrap();
    assert_eq!(verified(&conn).first_break, Some((3, Break::Unchained)));
}

#[test]
fn an_entry_without_its_hash_is_refused() {
    let (dir, _engine) = three_entries();
    let conn = raw(&dir);
    let refused = conn
        .execute(
            "INSERT INTO _sasha_audit (table_name, record_id, operation, actor_id, source, \
             app_revision, created_at) VALUES ('categories', '9', 'create', 'u', 'ui', 'r', 'now')",
            [],
        )
        .unwrap_err();
    assert!(refused.to_string().contains("chained"), "{refused}");
}

#[test]
fn a_ledger_from_before_the_chain_is_chained_once_from_a_recorded_point() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    {
        let engine = Engine::new(dir.path());
        add_category(&engine, &contract, "user-1", "k1", "travel");
        add_category(&engine, &contract, "user-1", "k2", "meals");
    }
    // Back to the shape of a file written before provenance and the chain.
    {
        let conn = raw(&dir);
        conn.execute_batch(
            "DROP TRIGGER _sasha_audit_chained; DROP TABLE _sasha_audit_chain;
             DROP TRIGGER _sasha_audit_no_update;
             ALTER TABLE _sasha_audit DROP COLUMN hash;
             ALTER TABLE _sasha_audit DROP COLUMN initiator;
             ALTER TABLE _sasha_audit DROP COLUMN initiator_id;",
        )
        .unwrap();
        let before = verified(&conn);
        assert_eq!(before.first_break, Some((1, Break::Unchained)));
    }
    let engine = Engine::new(dir.path());
    add_category(&engine, &contract, "user-1", "k3", "office");
    let conn = raw(&dir);
    let found = verified(&conn);
    assert_eq!(found.first_break, None);
    assert_eq!(found.entries, 3);
    let start = found.chained_from.expect("the pass is recorded");
    assert_eq!(start.through, 2);
    let (initiator, updated): (Option<String>, i64) = conn
        .query_row(
            "SELECT initiator, (SELECT COUNT(*) FROM _sasha_audit_chain) FROM _sasha_audit WHERE id = 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        initiator, None,
        "an old entry's unknown initiator stays unknown"
    );
    assert_eq!(updated, 1);
    // Still append-only after the pass.
    let refused = conn
        .execute("UPDATE _sasha_audit SET actor_id = 'x' WHERE id = 1", [])
        .unwrap_err();
    assert!(refused.to_string().contains("append-only"), "{refused}");
    // Opening again chains nothing more.
    drop(engine);
    let engine = Engine::new(dir.path());
    engine.open(APP, &contract).unwrap();
    assert_eq!(verified(&raw(&dir)).chained_from, Some(start));
}

#[test]
fn a_migration_reshaping_a_table_with_rows_is_an_entry_of_the_chain() {
    let (dir, engine) = three_entries();
    let draft = with_migration(
        &contract(),
        "colour",
        "ALTER TABLE categories ADD COLUMN colour TEXT;",
    );
    let publisher = Publisher {
        by: "ada",
        revision: "rev-2",
    };
    engine
        .apply_contract(APP, &draft, false, Approval::None, publisher)
        .unwrap();
    let conn = raw(&dir);
    let found = verified(&conn);
    assert_eq!(found.first_break, None);
    // One entry: `expenses` holds no rows, so its shape changed no data.
    assert_eq!(found.entries, 4);
    let entry: (String, String, String, String, String, String, String) = conn
        .query_row(
            "SELECT table_name || '/' || record_id, operation, actor_id, source, initiator, \
             initiator_id, app_revision FROM _sasha_audit WHERE id = 4",
            [],
            |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                    row.get(6)?,
                ))
            },
        )
        .unwrap();
    assert_eq!(
        entry,
        (
            "categories/".into(),
            "migrate".into(),
            "ada".into(),
            "publish".into(),
            "migration".into(),
            "migrations/003-colour.sql".into(),
            "rev-2".into()
        )
    );
    let images: (String, String) = conn
        .query_row(
            "SELECT before_json, after_json FROM _sasha_audit WHERE id = 4",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    let (before, after): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&images.0).unwrap(),
        serde_json::from_str(&images.1).unwrap(),
    );
    assert_eq!(before["rows"], 3);
    assert_eq!(after["rows"], 3);
    let columns = |image: &serde_json::Value| image["columns"].as_array().unwrap().clone();
    assert_eq!(columns(&after)[..columns(&before).len()], columns(&before));
    assert_eq!(columns(&after).last().unwrap(), "colour TEXT");
    // A row's history shows the migration after the row's own entries.
    let history = engine
        .history(APP, &draft, "categories", "1", None, None, 10)
        .unwrap();
    let operations: Vec<&str> = history
        .entries
        .iter()
        .map(|entry| entry.operation.as_str())
        .collect();
    assert_eq!(operations, ["create", "migrate"]);
    // Opening the file again under the same contract records nothing more.
    drop(engine);
    Engine::new(dir.path()).open(APP, &draft).unwrap();
    assert_eq!(verified(&raw(&dir)).entries, 4);
}

#[test]
fn a_ledger_from_before_migrations_were_recorded_is_rebuilt_with_its_entries_intact() {
    let (dir, engine) = three_entries();
    drop(engine);
    let head = verified(&raw(&dir)).head;
    // Back to the checks a file set up before then had.
    {
        let conn = raw(&dir);
        let old: String = conn
            .query_row(
                "SELECT sql FROM sqlite_schema WHERE name = '_sasha_audit'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        let old = old
            .replace(", 'migrate'", "")
            .replace(", 'publish'", "")
            .replacen("_sasha_audit", "_sasha_audit_old", 1);
        conn.execute_batch(&format!(
            "{old};
             INSERT INTO _sasha_audit_old SELECT * FROM _sasha_audit;
             DROP TRIGGER _sasha_audit_no_update; DROP TRIGGER _sasha_audit_no_delete;
             DROP TRIGGER _sasha_audit_no_replace; DROP TRIGGER _sasha_audit_chained;
             DROP TABLE _sasha_audit;
             ALTER TABLE _sasha_audit_old RENAME TO _sasha_audit;"
        ))
        .unwrap();
        let refused = conn.execute(
            "INSERT INTO _sasha_audit (table_name, record_id, operation, actor_id, source, \
             app_revision, created_at, hash) VALUES ('t', '', 'migrate', '', 'publish', 'r', 'now', 'h')",
            [],
        );
        assert!(
            refused.is_err(),
            "the old checks refuse a migration's entry"
        );
    }
    let engine = Engine::new(dir.path());
    let draft = with_migration(
        &contract(),
        "colour",
        "ALTER TABLE categories ADD COLUMN colour TEXT;",
    );
    engine
        .apply_contract(APP, &draft, false, Approval::None, Publisher::default())
        .unwrap();
    let conn = raw(&dir);
    let found = verified(&conn);
    assert_eq!(found.first_break, None, "the copied entries still verify");
    assert_eq!(found.entries, 4);
    assert_eq!(found.chained_from, None);
    let head_then: String = conn
        .query_row("SELECT hash FROM _sasha_audit WHERE id = 3", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(Some(head_then), head);
    // Without a publisher the entry names nobody and the contract's hash.
    let (actor, revision): (String, String) = conn
        .query_row(
            "SELECT actor_id, app_revision FROM _sasha_audit WHERE id = 4",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (actor.as_str(), revision.as_str()),
        ("", draft.hash.as_str())
    );
    // Append-only again: the triggers came back with the table.
    for statement in [
        "UPDATE _sasha_audit SET actor_id = 'x' WHERE id = 1",
        "DELETE FROM _sasha_audit WHERE id = 1",
    ] {
        let refused = conn.execute(statement, []).unwrap_err();
        assert!(refused.to_string().contains("append-only"), "{refused}");
    }
}

#[test]
fn the_canonical_bytes_are_sorted_compact_json_with_prev() {
    let entry = Entry {
        id: 1,
        table: "t".into(),
        record: "1".into(),
        operation: "create".into(),
        actor: "u".into(),
        source: "mcp".into(),
        initiator: Some("assistant".into()),
        initiator_id: Some("c-1".into()),
        revision: "r".into(),
        action: None,
        before: None,
        after: Some(r#"{"a":"é\n"}"#.into()),
        at: "2026-12-07T00:00:00.000Z".into(),
    };
    let bytes = r#"{"action":null,"actor":"u","after":"{\"a\":\"é\\n\"}","at":"2026-12-07T00:00:00.000Z","before":null,"id":1,"initiator":"assistant","initiatorId":"c-1","operation":"create","prev":"0000000000000000000000000000000000000000000000000000000000000000","record":"1","revision":"r","source":"mcp","table":"t"}"#;
    assert_eq!(
        entry.hash(GENESIS),
        hex::encode(Sha256::digest(bytes.as_bytes()))
    );
}
