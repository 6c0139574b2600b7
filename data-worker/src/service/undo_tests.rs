//! Undo and restore through `DataService.Execute` (`crate::undo`), on an
//! owner-scoped table two people write: the plan, its conflicts, owner
//! scoping, access, replay, the plan hash, bounds and a restore to an instant.

use std::collections::BTreeMap;

use sasha_contract::caller::{AppAccess, CallSource, Initiator};
use sasha_contract::data::{
    Access, Migration, TableDeclaration, contract_hash, read_schema, sha256_hex,
};
use sasha_proto::convert::{ToWire, provenance_to_wire};
use serde_json::json;

use super::*;

const APP: &str = "notes";
const SQL: &str =
    "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, owner TEXT NOT NULL);";

fn contract() -> DataContract {
    let replay = rusqlite::Connection::open_in_memory().unwrap();
    replay.execute_batch(SQL).unwrap();
    let migrations = vec![Migration {
        file: "migrations/001-notes.sql".into(),
        number: 1,
        checksum: sha256_hex(SQL.as_bytes()),
        sql: SQL.into(),
    }];
    let tables = BTreeMap::from([(
        "notes".to_owned(),
        TableDeclaration {
            access: Access::Owner,
            owner_field: Some("owner".into()),
            write: Default::default(),
            managers_read_all: false,
        },
    )]);
    DataContract {
        schema: read_schema(&replay).unwrap(),
        hash: contract_hash(&tables, &migrations),
        migrations,
        tables,
    }
}

/// Who writes: a user, their grant, and the initiator of their changes.
#[derive(Clone, Copy)]
struct As<'a> {
    user: &'a str,
    access: AppAccess,
    initiator: Initiator,
    id: Option<&'a str>,
}

const fn by(user: &str) -> As<'_> {
    As {
        user,
        access: AppAccess::Manage,
        initiator: Initiator::AppView,
        id: None,
    }
}

impl<'a> As<'a> {
    fn assistant(self, conversation: &'a str) -> As<'a> {
        As {
            initiator: Initiator::Assistant,
            id: Some(conversation),
            ..self
        }
    }

    fn using(self) -> As<'a> {
        As {
            access: AppAccess::Use,
            ..self
        }
    }
}

struct World {
    _dir: tempfile::TempDir,
    worker: Worker,
    contract: DataContract,
    keys: std::cell::Cell<u32>,
}

impl World {
    fn new() -> World {
        let _ = tracing_subscriber::fmt().with_test_writer().try_init();
        let dir = tempfile::tempdir().unwrap();
        let worker = Worker::new(dir.path(), None, crate::ownership::Ownership::single());
        World {
            _dir: dir,
            worker,
            contract: contract(),
            keys: std::cell::Cell::new(0),
        }
    }

    fn call(
        &self,
        who: As<'_>,
        operation: &str,
        table: &str,
        body: Value,
    ) -> Result<Value, AppError> {
        let request = ExecuteRequest {
            epoch: 0,
            app_id: APP.into(),
            contract_hash: self.contract.hash.clone(),
            actor: Some(pb::Actor {
                user_id: who.user.into(),
                access: who.access.to_wire(),
            }),
            operation: operation.into(),
            table: table.into(),
            request_json: body.to_string(),
            contract: Some(pb::DataContract::from(&self.contract)),
            source: CallSource::Mcp.to_wire(),
            provenance: Some(provenance_to_wire(who.initiator, who.id)),
            app_revision: "rev-1".into(),
            action_id: String::new(),
            preview: String::new(),
            preview_scope: None,
        };
        execute(&self.worker, request)
    }

    fn key(&self) -> String {
        self.keys.set(self.keys.get() + 1);
        format!("key-{}", self.keys.get())
    }

    fn create(&self, who: As<'_>, body: &str) -> Value {
        self.call(
            who,
            "create",
            "notes",
            json!({"values": {"body": body}, "idempotencyKey": self.key()}),
        )
        .unwrap()
    }

    fn update(&self, who: As<'_>, row: &Value, body: &str) -> Value {
        self.call(
            who,
            "update",
            "notes",
            json!({"id": row["id"], "changes": {"body": body}, "expectedVersion": row["_sasha_version"], "idempotencyKey": self.key()}),
        )
        .unwrap()
    }

    fn delete(&self, who: As<'_>, row: &Value) {
        self.call(
            who,
            "delete",
            "notes",
            json!({"id": row["id"], "expectedVersion": row["_sasha_version"], "idempotencyKey": self.key()}),
        )
        .unwrap();
    }

    /// `who`'s rows as (id, body), by id.
    fn rows(&self, who: As<'_>) -> Vec<(i64, String)> {
        let listed = self
            .call(
                who,
                "list",
                "notes",
                json!({"limit": 200, "orderBy": [{"field": "id"}]}),
            )
            .unwrap();
        listed["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                (
                    row["id"].as_i64().unwrap(),
                    row["body"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    fn preview(&self, who: As<'_>, selection: Value) -> Result<Value, AppError> {
        self.call(who, "undo-preview", "", selection)
    }

    /// Previews `selection` and applies it with `key`, naming `overwrite`.
    fn undo(
        &self,
        who: As<'_>,
        selection: Value,
        key: &str,
        overwrite: Value,
    ) -> Result<Value, AppError> {
        let apply = self.approved(who, selection, key, overwrite)?;
        self.call(who, "undo", "", apply)
    }

    /// The undo request a person approves after previewing `selection`.
    fn approved(
        &self,
        who: As<'_>,
        selection: Value,
        key: &str,
        overwrite: Value,
    ) -> Result<Value, AppError> {
        let preview = self.preview(who, selection.clone())?;
        let mut apply = selection;
        apply["planHash"] = preview["planHash"].clone();
        apply["idempotencyKey"] = json!(key);
        if !overwrite.is_null() {
            apply["overwrite"] = overwrite;
        }
        Ok(apply)
    }
}

const ALICE: As<'static> = by("alice");
const BOB: As<'static> = by("bob");

#[test]
fn undoing_a_conversation_restores_the_earlier_rows_and_leaves_a_hand_edit_alone() {
    let world = World::new();
    let kept: Vec<Value> = (0..6)
        .map(|n| world.create(ALICE, &format!("mine {n}")))
        .collect();
    let bobs = world.create(BOB, "bob's");
    let before = world.rows(ALICE);

    let assistant = ALICE.assistant("conversation-1");
    for n in 0..4 {
        world.create(assistant, &format!("by the assistant {n}"));
    }
    let updated: Vec<Value> = kept[..3]
        .iter()
        .map(|row| world.update(assistant, row, "rewritten"))
        .collect();
    world.delete(assistant, &kept[3]);
    world.delete(assistant, &kept[4]);
    // The same conversation id on Bob's own row is Bob's business.
    world.update(BOB.assistant("conversation-1"), &bobs, "bob rewrote");
    // Alice then edits one of the rewritten rows by hand.
    let hand = world.update(ALICE, &updated[0], "fixed by hand");

    let selection = json!({"initiator": "assistant", "initiatorId": "conversation-1", "since": "2000-01-01T00:00:00Z"});
    let preview = world.preview(ALICE, selection.clone()).unwrap();
    assert_eq!(preview["entries"], 9, "{preview}");
    assert_eq!(preview["rows"], 9);
    assert_eq!(preview["conflicts"], 1);
    let conflict = preview["page"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| !row["conflict"].is_null())
        .unwrap();
    assert_eq!(conflict["id"], hand["id"]);
    assert_eq!(conflict["conflict"]["reason"], "changed-since");
    assert_eq!(conflict["conflict"]["changes"][0]["initiator"], "app-view");
    assert!(
        preview["page"]
            .as_array()
            .unwrap()
            .iter()
            .all(|row| row["current"]["owner"] != "bob" && row["target"]["owner"] != "bob")
    );

    let approved = world
        .approved(ALICE, selection.clone(), "undo-1", Value::Null)
        .unwrap();
    let undone = world.call(ALICE, "undo", "", approved.clone()).unwrap();
    assert_eq!(
        (&undone["recreated"], &undone["updated"], &undone["deleted"]),
        (&json!(2), &json!(2), &json!(4)),
        "{undone}"
    );
    assert_eq!(undone["leftAlone"][0]["reason"], "changed-since");
    let mut expected = before.clone();
    let edited = hand["id"].as_i64().unwrap();
    for row in &mut expected {
        if row.0 == edited {
            row.1 = "fixed by hand".into();
        }
    }
    assert_eq!(
        world.rows(ALICE),
        expected,
        "exactly the earlier rows, the hand edit kept"
    );
    assert_eq!(
        world.rows(BOB),
        [(bobs["id"].as_i64().unwrap(), "bob rewrote".to_owned())]
    );

    // Replaying the approved undo applies nothing more.
    let again = world.call(ALICE, "undo", "", approved).unwrap();
    assert_eq!(again, undone, "the receipt's answer");
    assert_eq!(world.rows(ALICE), expected);

    // Undoing the undo brings the conversation's writes back.
    let undo_of_undo = json!({"initiator": "undo", "initiatorId": undone["undoId"], "since": "2000-01-01T00:00:00Z"});
    let redone = world
        .undo(ALICE, undo_of_undo, "undo-2", Value::Null)
        .unwrap();
    assert_eq!(
        (&redone["recreated"], &redone["updated"], &redone["deleted"]),
        (&json!(4), &json!(2), &json!(2)),
        "{redone}"
    );
    let bodies: Vec<String> = world
        .rows(ALICE)
        .into_iter()
        .map(|(_, body)| body)
        .collect();
    assert_eq!(
        bodies
            .iter()
            .filter(|body| body.starts_with("by the assistant"))
            .count(),
        4
    );
    assert_eq!(bodies.iter().filter(|body| *body == "rewritten").count(), 2);
    assert!(!bodies.contains(&"mine 3".to_owned()) && !bodies.contains(&"mine 4".to_owned()));
    assert!(bodies.contains(&"fixed by hand".to_owned()));
}

#[test]
fn a_named_conflict_is_overwritten_and_only_then() {
    let world = World::new();
    let row = world.create(ALICE, "first");
    let assistant = ALICE.assistant("c-2");
    let changed = world.update(assistant, &row, "assistant");
    world.update(ALICE, &changed, "by hand");
    let selection =
        json!({"initiator": "assistant", "initiatorId": "c-2", "since": "2000-01-01T00:00:00Z"});
    let undone = world
        .undo(
            ALICE,
            selection,
            "k",
            json!([{"table": "notes", "id": row["id"]}]),
        )
        .unwrap();
    assert_eq!(undone["updated"], 1, "{undone}");
    assert_eq!(
        world.rows(ALICE),
        [(row["id"].as_i64().unwrap(), "first".to_owned())]
    );
}

#[test]
fn refusals_name_the_problem_and_write_nothing() {
    let world = World::new();
    let row = world.create(ALICE.assistant("c-3"), "assistant wrote");
    let selection =
        json!({"initiator": "assistant", "initiatorId": "c-3", "since": "2000-01-01T00:00:00Z"});
    let code = |result: Result<Value, AppError>| result.unwrap_err().code;

    // A `use` holder sees no activity and undoes nothing.
    assert_eq!(
        code(world.preview(ALICE.using(), selection.clone())),
        ErrorCode::AccessDenied
    );
    assert_eq!(
        code(world.call(ALICE.using(), "activity", "", json!({}))),
        ErrorCode::AccessDenied
    );
    // Another manager finds nothing of Alice's owner-scoped rows.
    let bobs_view = world.preview(BOB, selection.clone()).unwrap();
    assert_eq!(
        (bobs_view["entries"].as_u64(), bobs_view["rows"].as_u64()),
        (Some(0), Some(0))
    );
    let bobs_activity = world.call(BOB, "activity", "", json!({})).unwrap();
    assert_eq!(bobs_activity["entries"], json!([]));
    // A forged conversation id finds nothing.
    let forged =
        json!({"initiator": "assistant", "initiatorId": "c-999", "since": "2000-01-01T00:00:00Z"});
    assert_eq!(world.preview(ALICE, forged).unwrap()["entries"], 0);
    // A stale plan hash is refused, naming the fresh one.
    let mut stale = selection.clone();
    stale["planHash"] = json!("0".repeat(64));
    stale["idempotencyKey"] = json!("stale");
    let refused = world.call(ALICE, "undo", "", stale).unwrap_err();
    assert_eq!(refused.code, ErrorCode::Conflict);
    assert!(
        refused
            .details
            .as_ref()
            .is_some_and(|details| details["planHash"].is_string())
    );
    // Malformed selections.
    for (bad, message) in [
        (json!({}), "say which changes to undo"),
        (json!({"since": "yesterday"}), "since is not a time"),
        (
            json!({"initiatorId": "c-3", "since": "2000-01-01T00:00:00Z"}),
            "initiatorId needs the initiator",
        ),
        (
            json!({"since": "2001-01-01T00:00:00Z", "until": "2000-01-01T00:00:00Z"}),
            "since is after until",
        ),
        (
            json!({"since": "2000-01-01T00:00:00Z", "table": "nope"}),
            "no such table",
        ),
        (
            json!({"asOf": "2000-01-01T00:00:00Z", "initiator": "assistant"}),
            "asOf restores every row",
        ),
        (
            json!({"since": "2000-01-01T00:00:00Z", "colour": "red"}),
            "unknown field `colour`",
        ),
        (
            json!({"since": "2000-01-01T00:00:00Z", "initiator": "model"}),
            "unknown variant `model`",
        ),
        (
            json!({"since": "2000-01-01T00:00:00Z", "planHash": "x"}),
            "planHash is not taken",
        ),
        (
            json!({"since": "2000-01-01T00:00:00Z", "limit": 0}),
            "limit is 1 to 200",
        ),
        (
            json!({"since": "2000-01-01T00:00:00Z", "cursor": "next"}),
            "cursor is not one",
        ),
    ] {
        let error = world.preview(ALICE, bad.clone()).unwrap_err();
        assert!(error.message.contains(message), "{bad}: {}", error.message);
    }
    let no_hash = world.call(
        ALICE,
        "undo",
        "",
        json!({"since": "2000-01-01T00:00:00Z", "idempotencyKey": "k"}),
    );
    assert!(
        no_hash
            .unwrap_err()
            .message
            .contains("preview the undo first")
    );
    assert_eq!(
        world.rows(ALICE),
        [(row["id"].as_i64().unwrap(), "assistant wrote".to_owned())]
    );
}

#[test]
fn an_undo_over_its_bounds_is_refused_before_anything_is_written() {
    let world = World::new();
    let rows = sasha_contract::grammar::MAX_UNDO_ROWS + 1;
    let csv: String = std::iter::once("body".to_owned())
        .chain((0..rows).map(|n| format!("row {n}")))
        .collect::<Vec<_>>()
        .join("\n");
    world
        .call(
            ALICE,
            "import",
            "notes",
            json!({"csv": csv, "idempotencyKey": "import"}),
        )
        .unwrap();
    let selection =
        json!({"initiator": "import", "initiatorId": "import", "since": "2000-01-01T00:00:00Z"});
    let refused = world.preview(ALICE, selection.clone()).unwrap_err();
    assert_eq!(refused.code, ErrorCode::ResourceLimit);
    assert!(
        refused.message.contains("more than 1000 rows"),
        "{}",
        refused.message
    );
    let mut apply = selection;
    apply["planHash"] = json!("0".repeat(64));
    apply["idempotencyKey"] = json!("k");
    assert_eq!(
        world.call(ALICE, "undo", "", apply).unwrap_err().code,
        ErrorCode::ResourceLimit
    );
    assert_eq!(
        world.rows(ALICE).len(),
        200,
        "a full page: nothing was removed"
    );
    // Activity pages through them, newest first.
    let first = world
        .call(ALICE, "activity", "", json!({"limit": 200}))
        .unwrap();
    assert_eq!(first["entries"].as_array().unwrap().len(), 200);
    let next = world
        .call(
            ALICE,
            "activity",
            "",
            json!({"limit": 200, "cursor": first["nextCursor"]}),
        )
        .unwrap();
    assert!(next["entries"][0]["entry"].as_i64() < first["entries"][199]["entry"].as_i64());
}

#[test]
fn a_restore_gives_exactly_the_rows_at_an_instant() {
    let world = World::new();
    let a = world.create(ALICE, "a");
    let b = world.create(ALICE, "b");
    let activity = world.call(ALICE, "activity", "", json!({})).unwrap();
    let instant = activity["entries"][0]["at"].as_str().unwrap().to_owned();
    let at_instant = world.rows(ALICE);
    // Every later write a second after the instant, without waiting for one.
    world.worker.engine.advance_ledger_clock(1_000);
    world.update(BOB, &world.create(BOB, "bob"), "bob again");
    world.create(ALICE, "c");
    world.update(ALICE, &a, "a changed");
    world.delete(ALICE, &b);
    let restored = world
        .undo(ALICE, json!({"asOf": instant}), "restore", Value::Null)
        .unwrap();
    assert_eq!(restored["leftAlone"], json!([]), "{restored}");
    assert_eq!(world.rows(ALICE), at_instant);
    assert_eq!(
        world.rows(BOB).len(),
        1,
        "another owner's rows are not the restorer's"
    );
}

#[test]
fn another_owners_row_under_a_reused_id_is_a_conflict_that_names_nobody() {
    let world = World::new();
    world.create(ALICE, "first");
    let last = world.create(ALICE, "last");
    world.delete(ALICE.assistant("c-4"), &last);
    // SQLite gives the deleted highest id to the next row: Bob's.
    let bobs = world.create(BOB, "bob's");
    assert_eq!(bobs["id"], last["id"]);
    let selection =
        json!({"initiator": "assistant", "initiatorId": "c-4", "since": "2000-01-01T00:00:00Z"});
    let preview = world.preview(ALICE, selection.clone()).unwrap();
    assert_eq!(preview["conflicts"], 1, "{preview}");
    let change = &preview["page"][0]["conflict"]["changes"][0];
    assert_eq!(change["operation"], "another owner's row");
    assert!(!preview.to_string().contains("bob"), "{preview}");
    let undone = world.undo(ALICE, selection, "k", Value::Null).unwrap();
    assert_eq!(undone["recreated"], 0);
    assert_eq!(
        world.rows(BOB),
        [(bobs["id"].as_i64().unwrap(), "bob's".to_owned())]
    );
}

#[test]
fn a_change_names_a_well_formed_initiator_and_undo_works_on_live_data_only() {
    let world = World::new();
    let create = |who: As<'_>, key: &str| {
        world.call(
            who,
            "create",
            "notes",
            json!({"values": {"body": "x"}, "idempotencyKey": key}),
        )
    };
    for (n, (who, message)) in [
        (
            ALICE.assistant(""),
            "the initiator assistant has a malformed or missing id",
        ),
        (
            As {
                id: Some("c-1"),
                ..ALICE
            },
            "the initiator app-view has a malformed or missing id",
        ),
        (
            ALICE.assistant("two words"),
            "the initiator assistant has a malformed or missing id",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let refused = create(who, &format!("k-{n}")).unwrap_err();
        assert_eq!(refused.code, ErrorCode::InputInvalid);
        assert_eq!(refused.message, message);
    }
    let mut unnamed = ExecuteRequest {
        epoch: 0,
        app_id: APP.into(),
        contract_hash: world.contract.hash.clone(),
        actor: Some(pb::Actor {
            user_id: "alice".into(),
            access: AppAccess::Manage.to_wire(),
        }),
        operation: "create".into(),
        table: "notes".into(),
        request_json: json!({"values": {"body": "x"}, "idempotencyKey": "k"}).to_string(),
        contract: Some(pb::DataContract::from(&world.contract)),
        source: CallSource::Mcp.to_wire(),
        provenance: None,
        app_revision: "rev-1".into(),
        action_id: String::new(),
        preview: String::new(),
        preview_scope: None,
    };
    let refused = execute(&world.worker, unnamed.clone()).unwrap_err();
    assert_eq!(refused.message, "the request names no initiator");
    assert_eq!(world.rows(ALICE), []);

    unnamed.operation = "undo-preview".into();
    unnamed.table = String::new();
    unnamed.request_json = json!({"since": "2000-01-01T00:00:00Z"}).to_string();
    unnamed.preview = "0123456789abcdef0123456789abcdef".into();
    let refused = execute(&world.worker, unnamed).unwrap_err();
    assert_eq!(refused.code, ErrorCode::InputInvalid);
    assert_eq!(
        refused.message,
        "activity and undo work on the app's live data, not on a preview"
    );
}

#[test]
fn a_migration_is_listed_as_its_publishers_and_never_undone() {
    let mut world = World::new();
    let first = world.create(ALICE, "first");
    world.create(BOB, "bob's");
    // A publication adds a column to the table while it holds rows.
    let sql = "ALTER TABLE notes ADD COLUMN tag TEXT;";
    let mut next = world.contract.clone();
    next.migrations.push(Migration {
        file: "migrations/002-tag.sql".into(),
        number: 2,
        checksum: sha256_hex(sql.as_bytes()),
        sql: sql.into(),
    });
    let replay = rusqlite::Connection::open_in_memory().unwrap();
    replay.execute_batch(SQL).unwrap();
    replay.execute_batch(sql).unwrap();
    next.schema = read_schema(&replay).unwrap();
    next.hash = contract_hash(&next.tables, &next.migrations);
    let publisher = crate::engine::Publisher {
        by: "ada",
        revision: "rev-2",
    };
    world
        .worker
        .engine
        .apply_contract(APP, &next, false, crate::engine::Approval::None, publisher)
        .unwrap();
    world.contract = next;
    world.update(ALICE, &first, "after the migration");

    // Listed to a manager of the owner-scoped table, by its initiator too.
    let listed = world
        .call(ALICE, "activity", "", json!({"initiator": "migration"}))
        .unwrap();
    let entries = listed["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{listed}");
    let migration = &entries[0];
    for (field, value) in [
        ("operation", "migrate"),
        ("initiator", "migration"),
        ("initiatorId", "migrations/002-tag.sql"),
        ("actor", "ada"),
        ("source", "publish"),
        ("revision", "rev-2"),
        ("table", "notes"),
        ("record", ""),
    ] {
        assert_eq!(migration[field], value, "{field} in {migration}");
    }
    assert_eq!(migration["after"]["rows"], 2);
    assert_eq!(
        migration["after"]["columns"],
        json!(["id INTEGER", "body TEXT", "owner TEXT", "tag TEXT"])
    );

    // An undo takes no migration back: named, it is refused; selected with
    // rows, it is left out of the plan.
    let refused = world
        .preview(
            ALICE,
            json!({"initiator": "migration", "since": "2000-01-01T00:00:00Z"}),
        )
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InputInvalid);
    assert!(refused.message.contains("revert"), "{}", refused.message);
    let by_number = world
        .preview(ALICE, json!({"entries": [migration["entry"]]}))
        .unwrap();
    assert_eq!(
        (&by_number["entries"], &by_number["rows"]),
        (&json!(0), &json!(0))
    );
    let everything = world
        .preview(ALICE, json!({"since": "2000-01-01T00:00:00Z"}))
        .unwrap();
    assert_eq!(
        everything["entries"], 2,
        "Alice's create and update: {everything}"
    );

    // Nobody's data call may claim to be a migration.
    let claimed = world
        .call(
            As {
                initiator: Initiator::Migration,
                id: Some("migrations/009-x.sql"),
                ..ALICE
            },
            "create",
            "notes",
            json!({"values": {"body": "x"}, "idempotencyKey": world.key()}),
        )
        .unwrap_err();
    assert_eq!(claimed.code, ErrorCode::InputInvalid);
    assert!(claimed.message.contains("migration"), "{}", claimed.message);
}

/// A restore `from: "replica"` of `body` by `who`, reading a fresh copy of
/// `saved` as the file restored from object storage (the process tier runs
/// the real one, `tests/process/replication.rs`).
fn from_copy(
    world: &World,
    who: As<'_>,
    operation: crate::undo::LedgerOperation,
    body: Value,
    saved: &std::path::Path,
) -> Result<Value, AppError> {
    let contract = world
        .worker
        .contract(
            &world.contract.hash,
            Some(&pb::DataContract::from(&world.contract)),
        )
        .unwrap();
    let restore_copy = |_: &str| {
        let (_, copy) = world.worker.engine.snapshot_paths(APP)?;
        std::fs::copy(saved, &copy).unwrap();
        crate::engine::snapshot::Snapshot::open(copy)
    };
    crate::undo::execute(
        operation,
        crate::undo::Call {
            engine: &world.worker.engine,
            app_id: APP,
            contract: &contract,
            actor: who.user,
            access: who.access,
            meta: Some(AuditMeta {
                source: CallSource::Ui,
                initiator: Initiator::AppView,
                initiator_id: None,
                app_revision: "rev-1".into(),
                action_id: None,
            }),
            request_json: &body.to_string(),
            restore_copy: &restore_copy,
        },
    )
}

#[test]
fn a_restore_from_the_replica_puts_back_what_the_ledger_never_saw() {
    use crate::undo::LedgerOperation::{Undo, UndoPreview};
    let world = World::new();
    let a = world.create(ALICE, "a");
    let b = world.create(ALICE, "b");
    let at_instant = world.rows(ALICE);
    // The file as object storage holds it at the instant.
    let saved = world._dir.path().join("saved.sqlite");
    let live = world._dir.path().join(format!("{APP}.sqlite"));
    rusqlite::Connection::open(&live)
        .unwrap()
        .execute("VACUUM INTO ?1", [saved.to_str().unwrap()])
        .unwrap();
    let a = world.update(ALICE, &a, "a changed");
    let c = world.create(ALICE, "c");
    world.delete(ALICE, &b);
    world.create(BOB, "bob's");
    // Then a's row is rewritten behind the platform's back.
    rusqlite::Connection::open(&live)
        .unwrap()
        .execute(
            "UPDATE notes SET body = 'tampered' WHERE id = ?1",
            [a["id"].as_i64()],
        )
        .unwrap();
    let restore = json!({"asOf": "2026-01-01T00:00:00Z", "from": "replica"});

    let preview = from_copy(&world, ALICE, UndoPreview, restore.clone(), &saved).unwrap();
    assert_eq!(preview["from"], "replica", "{preview}");
    assert_eq!(
        (&preview["rows"], &preview["conflicts"]),
        (&json!(3), &json!(1)),
        "{preview}"
    );
    let plan: Vec<(Value, Value, bool)> = preview["page"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["id"].clone(),
                row["action"].clone(),
                row["conflict"].is_object(),
            )
        })
        .collect();
    assert_eq!(
        plan,
        [
            (a["id"].clone(), json!("update"), true),
            (b["id"].clone(), json!("recreate"), false),
            (c["id"].clone(), json!("delete"), false),
        ],
        "Bob's row is not Alice's to restore; the tampered row is a conflict: {preview}"
    );
    assert_eq!(
        preview["page"][0]["conflict"]["reason"], "changed-outside",
        "{preview}"
    );
    // The ledger alone cannot see the tampered row as changed since then.
    let ledger = world
        .preview(ALICE, json!({"asOf": "2026-01-01T00:00:00Z"}))
        .unwrap();
    assert_eq!(ledger["from"], "ledger");
    assert!(ledger["ledgerStarts"].is_string(), "{ledger}");

    // Applied with the conflict named: exactly the rows at the instant.
    let mut apply = restore.clone();
    apply["planHash"] = preview["planHash"].clone();
    apply["idempotencyKey"] = json!("from-the-replica");
    apply["overwrite"] = json!([{"table": "notes", "id": a["id"]}]);
    let done = from_copy(&world, ALICE, Undo, apply, &saved).unwrap();
    assert_eq!(
        (
            &done["recreated"],
            &done["updated"],
            &done["deleted"],
            &done["leftAlone"]
        ),
        (&json!(1), &json!(1), &json!(1), &json!([])),
        "{done}"
    );
    assert_eq!(world.rows(ALICE), at_instant);
    assert_eq!(world.rows(BOB).len(), 1);
    // Every copy was removed after its use.
    let restores = world._dir.path().join(crate::engine::snapshot::RESTORE_DIR);
    assert_eq!(std::fs::read_dir(restores).unwrap().count(), 0);
    // The restore is an undo like any other: recorded, and undone by its id.
    let undone = world
        .call(
            ALICE,
            "activity",
            "",
            json!({"initiator": "undo", "initiatorId": done["undoId"]}),
        )
        .unwrap();
    assert_eq!(undone["entries"].as_array().unwrap().len(), 3, "{undone}");
}

#[test]
fn a_restore_from_the_replica_is_refused_where_it_cannot_be_read() {
    let world = World::new();
    world.create(ALICE, "a");
    // `from` belongs to a restore.
    let refused = world
        .preview(
            ALICE,
            json!({"since": "2000-01-01T00:00:00Z", "from": "replica"}),
        )
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InputInvalid);
    assert!(refused.message.contains("asOf"), "{}", refused.message);
    let refused = world
        .preview(
            ALICE,
            json!({"asOf": "2026-01-01T00:00:00Z", "from": "tape"}),
        )
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InputInvalid);
    // Without replication there is no copy to read: said, nothing written.
    let refused = world
        .preview(
            ALICE,
            json!({"asOf": "2026-01-01T00:00:00Z", "from": "replica"}),
        )
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::OperationUnavailable);
    assert!(
        refused.message.contains("SASHA_REPLICA_URL"),
        "{}",
        refused.message
    );
    // The activity lists changes; it restores nothing.
    let refused = world
        .call(ALICE, "activity", "", json!({"from": "replica"}))
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InputInvalid);
    assert!(refused.message.contains("from"), "{}", refused.message);
    // A copy whose table lost its owner column cannot be compared: said
    // without SQL or the copy's path.
    let odd = world._dir.path().join("odd.sqlite");
    rusqlite::Connection::open(&odd)
        .unwrap()
        .execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);")
        .unwrap();
    let refused = from_copy(
        &world,
        ALICE,
        crate::undo::LedgerOperation::UndoPreview,
        json!({"asOf": "2026-01-01T00:00:00Z", "from": "replica"}),
        &odd,
    )
    .unwrap_err();
    assert_eq!(refused.code, ErrorCode::SchemaIncompatible);
    for leak in ["SELECT", "owner", "odd.sqlite", ".restores"] {
        assert!(!refused.message.contains(leak), "{}", refused.message);
    }
    // A use holder cannot restore from anywhere.
    let refused = world
        .preview(
            ALICE.using(),
            json!({"asOf": "2026-01-01T00:00:00Z", "from": "replica"}),
        )
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::AccessDenied);
    assert_eq!(world.rows(ALICE).len(), 1);
}
