//! The chain over real files: entries written through the engine verify,
//! one changed, removed or unhashed behind its back is named, an entry
//! without its hash is refused, an old ledger is chained once from a
//! recorded point, and the canonical bytes are what docs/audit.md says.

use rusqlite::Connection;

use super::*;
use crate::engine::Engine;
use crate::engine::tests::{APP, add_category, contract, raw};

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
