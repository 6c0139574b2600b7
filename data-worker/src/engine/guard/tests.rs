//! The read guard through the engine's real entry points on files (the lazy
//! open a data call makes, a preview, `ApplyContract` with and without an
//! admin's approval, `DataService` over the wire types), and the property
//! test that drives the model of `oracle` with generated changes.

use proptest::prelude::*;
use rusqlite::Connection;
use sasha_contract::data::{DATA_OWNER_CHANGED, DATA_READ_WIDENED, DataContract};
use sasha_proto::ErrorCode;

use super::oracle::{self, Change, Declared};
use crate::engine::tests::{APP, raw};
use crate::engine::{Approval, Engine, Publisher, Target};

/// The attack pass's migration: someone's id in a new column, renamed onto
/// the owner column.
const GRAB: &str = "ALTER TABLE notes ADD COLUMN grab TEXT DEFAULT 'mallory';\n\
                    ALTER TABLE notes RENAME COLUMN owner TO orig;\n\
                    ALTER TABLE notes RENAME COLUMN grab TO owner;\n";

fn owned(field: usize, managers_read_all: bool) -> Declared {
    Declared::Owner {
        field,
        managers_read_all,
    }
}

fn contract(migrations: &[&str], notes: Declared) -> DataContract {
    let mut all = vec![oracle::INITIAL];
    all.extend_from_slice(migrations);
    oracle::contract(&all, &notes, &Declared::Shared).unwrap()
}

/// A live file of `APP` set up for the first contract, with alice's and
/// bob's notes.
fn populated(dir: &tempfile::TempDir) -> Engine {
    let engine = Engine::new(dir.path());
    engine.open(APP, &contract(&[], owned(0, false))).unwrap();
    raw(dir)
        .execute_batch(
            "INSERT INTO notes (owner, body, _sasha_version) VALUES \
             ('alice', 'a', 1), ('bob', 'b', 1), ('alice', 'c', 1);",
        )
        .unwrap();
    engine
}

fn owners(conn: &Connection) -> Vec<(i64, String)> {
    let mut statement = conn
        .prepare("SELECT id, owner FROM notes ORDER BY id")
        .unwrap();
    statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn applied(conn: &Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM _sasha_migrations", [], |row| {
        row.get(0)
    })
    .unwrap()
}

fn recorded(conn: &Connection, table: &str) -> (String, Option<String>) {
    conn.query_row(
        "SELECT readers, approved_by FROM _sasha_read_policy WHERE table_name = ?1",
        [table],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .unwrap()
}

fn diagnostic_codes(error: &sasha_proto::AppError) -> Vec<String> {
    error.details.as_ref().unwrap()["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_migration_handing_rows_to_someone_else_is_refused_and_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let engine = populated(&dir);
    let before = owners(&raw(&dir));
    let grab = contract(&[GRAB], owned(0, false));

    // The lazy open a data call makes, and a publication nobody approved.
    for refused in [
        engine.open(APP, &grab).unwrap_err(),
        engine
            .apply_contract(APP, &grab, false, Approval::None, Publisher::default())
            .unwrap_err(),
    ] {
        assert_eq!(refused.code, ErrorCode::AccessDenied, "{}", refused.message);
        assert!(
            refused.message.contains("table notes") && refused.message.contains("other owners"),
            "{}",
            refused.message
        );
        assert_eq!(diagnostic_codes(&refused), [DATA_OWNER_CHANGED]);
        let details = refused.details.unwrap();
        assert_eq!(details["diagnostics"][0]["file"], "migrations/002-step.sql");
        assert_eq!(details["table"], "notes");
        // Nothing of the migration stayed.
        let conn = raw(&dir);
        assert_eq!(owners(&conn), before);
        assert_eq!(applied(&conn), 1);
        assert!(conn.prepare("SELECT orig FROM notes").is_err());
    }
    // A preview's copy holds only what its previewer reads live (here
    // someone who reads every row): the draft runs there, and live keeps its
    // owners.
    let scope = sasha_contract::data::PreviewScope {
        tables: [("notes".to_owned(), sasha_contract::data::RowScope::Every)].into(),
    };
    let preview_id = "a".repeat(32);
    let preview = Target::Preview {
        app_id: APP,
        preview: crate::engine::preview::Preview {
            id: &preview_id,
            previewer: "alice",
            scope: &scope,
        },
    };
    engine.open(preview, &grab).unwrap();
    assert_eq!(owners(&raw(&dir)), before);

    // An admin's approval of this publication lets it through, recorded.
    let published = engine
        .apply_contract(
            APP,
            &grab,
            false,
            Approval::Admin("ada"),
            Publisher::default(),
        )
        .unwrap();
    assert_eq!(published.applied, ["migrations/002-step.sql"]);
    let conn = raw(&dir);
    assert!(owners(&conn).iter().all(|(_, owner)| owner == "mallory"));
    // The policy is unchanged, so its entry still names nobody.
    assert_eq!(recorded(&conn, "notes"), ("\"owner\"".to_owned(), None));
}

#[test]
fn managers_reading_every_row_is_a_widening_once_rows_exist() {
    let dir = tempfile::tempdir().unwrap();
    let engine = populated(&dir);
    let managers = contract(&[], owned(0, true));
    let refused = engine.open(APP, &managers).unwrap_err();
    assert_eq!(refused.code, ErrorCode::AccessDenied);
    assert!(
        refused.message.contains("managersReadAll"),
        "{}",
        refused.message
    );
    assert_eq!(diagnostic_codes(&refused), [DATA_READ_WIDENED]);
    // So is making the table shared.
    let shared = contract(&[], Declared::Shared);
    let refused = engine.open(APP, &shared).unwrap_err();
    assert!(
        refused.message.contains("access: shared"),
        "{}",
        refused.message
    );
    // Still served under the policy its rows were written under.
    engine.open(APP, &contract(&[], owned(0, false))).unwrap();
    assert_eq!(recorded(&raw(&dir), "notes").0, "\"owner\"");

    // With an admin's approval it is recorded as theirs.
    engine
        .apply_contract(
            APP,
            &managers,
            false,
            Approval::Admin("ada"),
            Publisher::default(),
        )
        .unwrap();
    assert_eq!(
        recorded(&raw(&dir), "notes"),
        (
            r#"{"ownerField":"owner","managersReadAll":true}"#.to_owned(),
            Some("ada".to_owned())
        )
    );
    // Turning it off again narrows, and needs nobody.
    engine.open(APP, &contract(&[], owned(0, false))).unwrap();

    // Without rows there is nothing to expose.
    let empty = tempfile::tempdir().unwrap();
    let engine = Engine::new(empty.path());
    engine.open(APP, &contract(&[], owned(0, false))).unwrap();
    engine.open(APP, &managers).unwrap();
}

#[test]
fn the_owner_column_is_judged_by_its_values_not_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let engine = populated(&dir);
    // A rename that keeps every value: nobody's rows change hands.
    let renamed = contract(
        &["ALTER TABLE notes RENAME COLUMN owner TO orig;\n"],
        owned(3, false),
    );
    engine.open(APP, &renamed).unwrap();
    assert_eq!(recorded(&raw(&dir), "notes").0, "\"orig\"");
    // Another column as the owner field, without any migration: its values
    // are not the owners.
    let other = contract(
        &["ALTER TABLE notes RENAME COLUMN owner TO orig;\n"],
        owned(1, false),
    );
    let refused = engine.open(APP, &other).unwrap_err();
    assert_eq!(diagnostic_codes(&refused), [DATA_OWNER_CHANGED]);
    assert_eq!(refused.details.unwrap()["diagnostics"][0]["file"], "APP.md");
}

#[test]
fn the_record_is_read_before_the_migrations_and_rewritten_after_them() {
    let dir = tempfile::tempdir().unwrap();
    let engine = populated(&dir);
    // A migration that drops the record (the validator refuses the name;
    // the guard does not rely on it) cannot make a widening look new.
    let dropped = contract(
        &["DROP TABLE IF EXISTS _sasha_read_policy;\n"],
        Declared::Shared,
    );
    let refused = engine.open(APP, &dropped).unwrap_err();
    assert_eq!(refused.code, ErrorCode::AccessDenied);
    let kept = contract(
        &["DROP TABLE IF EXISTS _sasha_read_policy;\n"],
        owned(0, false),
    );
    engine.open(APP, &kept).unwrap();
    assert_eq!(recorded(&raw(&dir), "notes").0, "\"owner\"");
}

#[test]
fn a_file_without_a_record_still_keeps_its_owners() {
    let dir = tempfile::tempdir().unwrap();
    populated(&dir);
    // As a file written before the guard: no record.
    raw(&dir)
        .execute_batch("DROP TABLE _sasha_read_policy;")
        .unwrap();
    let engine = Engine::new(dir.path());
    let refused = engine
        .open(APP, &contract(&[GRAB], owned(0, false)))
        .unwrap_err();
    assert_eq!(diagnostic_codes(&refused), [DATA_OWNER_CHANGED]);
    // Its first contract is recorded as the policy the rows have.
    engine.open(APP, &contract(&[], owned(0, false))).unwrap();
    assert_eq!(recorded(&raw(&dir), "notes").0, "\"owner\"");
    let refused = engine
        .open(APP, &contract(&[], Declared::Shared))
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::AccessDenied);
}

#[tokio::test]
async fn data_service_refuses_on_a_data_call_and_applies_an_approved_publication() {
    use sasha_proto::pb;
    use sasha_proto::pb::data_service_server::DataService;
    use tonic::Request;

    let dir = tempfile::tempdir().unwrap();
    populated(&dir);
    let worker =
        crate::service::Worker::new(dir.path(), None, crate::ownership::Ownership::single());
    let grab = contract(&[GRAB], owned(0, false));
    // A data call bringing the new contract (as the gateway does).
    let status = worker
        .execute(Request::new(pb::ExecuteRequest {
            app_id: APP.into(),
            contract_hash: grab.hash.clone(),
            actor: Some(pb::Actor {
                user_id: "mallory".into(),
                access: sasha_proto::convert::ToWire::to_wire(
                    sasha_contract::caller::AppAccess::Use,
                ),
            }),
            operation: "list".into(),
            table: "notes".into(),
            request_json: "{}".into(),
            contract: Some(pb::DataContract::from(&grab)),
            ..pb::ExecuteRequest::default()
        }))
        .await
        .unwrap_err();
    let error = sasha_proto::AppError::from_status(&status);
    assert_eq!(error.code, ErrorCode::AccessDenied, "{}", error.message);
    assert_eq!(diagnostic_codes(&error), [DATA_OWNER_CHANGED]);
    assert!(
        owners(&raw(&dir))
            .iter()
            .all(|(_, owner)| owner != "mallory")
    );

    let publish = |approved_by_admin: &str| {
        let mut request = Request::new(pb::ApplyContractRequest {
            published_by: String::new(),
            revision: String::new(),
            epoch: 0,
            app_id: APP.into(),
            contract: Some(pb::DataContract::from(&grab)),
            dry_run: false,
            approved_by_admin: approved_by_admin.to_owned(),
        });
        request
            .extensions_mut()
            .insert(sasha_service::Role::StudioCore);
        worker.apply_contract(request)
    };
    let status = publish("").await.unwrap_err();
    assert_eq!(
        sasha_proto::AppError::from_status(&status).code,
        ErrorCode::AccessDenied
    );
    let reply = publish("ada").await.unwrap().into_inner();
    assert_eq!(reply.applied, ["migrations/002-step.sql"]);
}

#[test]
fn the_attack_pass_and_its_variants_break_no_rule_of_the_model() {
    let attack = Change {
        notes_before: owned(0, false),
        notes: owned(0, false),
        tags: Declared::Shared,
        owners: 0b0101_0101,
        steps: vec![
            oracle::Step::Add {
                column: 2,
                default: Some(2),
            },
            oracle::Step::Rename { from: 0, to: 3 },
            oracle::Step::Rename { from: 2, to: 0 },
        ],
        approved: false,
    };
    oracle::check(&attack).unwrap();
    oracle::check(&Change {
        approved: true,
        ..attack.clone()
    })
    .unwrap();
    for notes in [
        owned(0, true),
        Declared::Shared,
        owned(1, false),
        Declared::No,
    ] {
        oracle::check(&Change {
            notes,
            steps: Vec::new(),
            ..attack.clone()
        })
        .unwrap();
    }
}

#[test]
fn the_fuzz_targets_seeds_pass_the_model() {
    let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/read_guard");
    let mut checked = 0;
    for seed in std::fs::read_dir(seeds).unwrap() {
        let bytes = std::fs::read(seed.unwrap().path()).unwrap();
        let change = Change::from_bytes(&bytes);
        assert!(!change.steps.is_empty() || bytes.len() <= 4, "{bytes:?}");
        oracle::check(&change).unwrap_or_else(|broken| panic!("{change:?}: {broken}"));
        checked += 1;
    }
    assert!(checked >= 10, "{checked} seeds");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Generated migrations and declarations over a populated database:
    /// the guard never lets a row be read more widely or change owner
    /// without an admin's approval, accepts what changes nothing, and a
    /// refusal writes nothing.
    #[test]
    fn generated_changes_never_widen_reads_or_change_owners_unapproved(
        bytes in proptest::collection::vec(any::<u8>(), 0..(4 + 3 * oracle::MAX_STEPS))
    ) {
        let change = Change::from_bytes(&bytes);
        if let Err(broken) = oracle::check(&change) {
            prop_assert!(false, "{change:?}: {broken}");
        }
    }
}
