//! Group commit and the readers against real files: batches form from what
//! queued, each mutation gets its own answer, a failure or an aborted
//! transaction costs only its own mutation, the batch bound holds, and reads
//! do not wait for the writer.

use std::sync::atomic::AtomicUsize;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;

use super::super::tests::{
    APP, RUNAWAY_INSERT, add_category, contract, count, create_category, meta, raw, receipt,
};
use super::*;

type Call = Box<dyn FnOnce(&Engine) -> Result<serde_json::Value, AppError> + Send>;

/// Runs `calls` on threads of their own while the test holds the app's writer
/// connection, each queued before the next starts, lets go once all are, and
/// gives back their answers in order: the mutations meet the writer all at
/// once, as under load, in the calls' order.
fn queued_together(engine: &Engine, calls: Vec<Call>) -> Vec<Result<serde_json::Value, AppError>> {
    let slot = engine.slot(APP);
    std::thread::scope(|scope| {
        let held = slot.handle.lock().unwrap();
        let mut threads = Vec::new();
        for (index, call) in calls.into_iter().enumerate() {
            let engine = engine.clone();
            threads.push(scope.spawn(move || call(&engine)));
            // Polled: a thread queues on its own schedule, and the queue's
            // length is the only sign that it has.
            while slot.queue.lock().unwrap().jobs.len() <= index {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        drop(held);
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

fn create(name: &str, key: &str) -> Call {
    let (name, key) = (name.to_owned(), key.to_owned());
    Box::new(move |engine: &Engine| {
        let input = json!({"name": name});
        engine.mutate(
            APP,
            &super::super::tests::contract(),
            receipt("alice", &key, &input),
            meta(),
            create_category(&name),
        )
    })
}

fn commits(engine: &Engine) -> u64 {
    engine.slot(APP).commits.load(Ordering::Relaxed)
}

#[test]
fn queued_mutations_share_one_commit_and_each_gets_its_own_answer() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    add_category(&engine, &contract, "alice", "k0", "Travel");
    let before = commits(&engine);

    let failing: Call = Box::new(|engine: &Engine| {
        engine.mutate(
            APP,
            &super::super::tests::contract(),
            receipt("alice", "stale", &json!({"name": "Food"})),
            meta(),
            |tx| {
                create_category("Food")(tx)?;
                Err(AppError::new(ErrorCode::Conflict, "stale version"))
            },
        )
    });
    let answers = queued_together(
        &engine,
        vec![
            create("Books", "b1"),
            // A unique violation: SQLite ends the statement, not the transaction.
            create("Travel", "b2"),
            failing,
            // The same key and input as the first: replayed, not run again.
            create("Books", "b1"),
            // The same key, other input.
            create("Music", "b1"),
            create("C5", "c5"),
            create("C6", "c6"),
            create("C7", "c7"),
        ],
    );
    assert_eq!(
        commits(&engine) - before,
        1,
        "one transaction for the batch"
    );

    let books = answers[0].as_ref().unwrap();
    assert_eq!(books["name"], "Books");
    assert_eq!(answers[1].as_ref().unwrap_err().code, ErrorCode::Conflict);
    assert_eq!(answers[2].as_ref().unwrap_err().code, ErrorCode::Conflict);
    assert_eq!(answers[3].as_ref().unwrap(), books);
    assert_eq!(
        answers[4].as_ref().unwrap_err().code,
        ErrorCode::IdempotencyMismatch
    );
    for (answer, name) in answers[5..].iter().zip(["C5", "C6", "C7"]) {
        assert_eq!(answer.as_ref().unwrap()["name"], name);
    }

    let conn = raw(&dir);
    let names: Vec<String> = conn
        .prepare("SELECT name FROM categories ORDER BY id")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(names, ["Travel", "Books", "C5", "C6", "C7"]);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_audit"), 5);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_idempotency"), 5);
}

#[test]
fn an_aborted_transaction_fails_only_the_mutation_that_aborted_it() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::with_deadline(dir.path(), Duration::from_millis(200));
    engine.open(APP, &contract).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = {
        let runs = Arc::clone(&runs);
        Box::new(move |engine: &Engine| {
            engine.mutate(
                APP,
                &super::super::tests::contract(),
                receipt("alice", "a", &json!({"name": "A"})),
                meta(),
                move |tx| {
                    runs.fetch_add(1, Ordering::SeqCst);
                    create_category("A")(tx)
                },
            )
        }) as Call
    };
    let runaway: Call = Box::new(|engine: &Engine| {
        engine.mutate(
            APP,
            &super::super::tests::contract(),
            receipt("alice", "slow", &json!({})),
            meta(),
            |tx| {
                tx.execute(RUNAWAY_INSERT, []).map_err(sql_error)?;
                create_category("never")(tx)
            },
        )
    });
    let answers = queued_together(&engine, vec![counted, runaway, create("B", "b")]);
    assert_eq!(answers[0].as_ref().unwrap()["name"], "A");
    let error = answers[1].as_ref().unwrap_err();
    assert_eq!(error.code, ErrorCode::DatabaseUnavailable);
    assert!(error.retryable);
    assert_eq!(answers[2].as_ref().unwrap()["name"], "B");
    // The interrupt rolled the whole transaction back: the first mutation ran
    // again in the next one.
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    let conn = raw(&dir);
    assert_eq!(count(&conn, "SELECT count(*) FROM categories"), 2);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_audit"), 2);
    assert_eq!(count(&conn, "SELECT count(*) FROM _sasha_idempotency"), 2);
}

#[test]
fn a_batch_holds_at_most_max_batch_mutations() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    engine.open(APP, &contract).unwrap();
    let calls = (0..MAX_BATCH + 8)
        .map(|i| create(&format!("c{i}"), &format!("k{i}")))
        .collect();
    let answers = queued_together(&engine, calls);
    assert!(answers.iter().all(Result::is_ok));
    assert_eq!(commits(&engine), 2, "{} and then 8", MAX_BATCH);
    assert_eq!(
        count(&raw(&dir), "SELECT count(*) FROM categories"),
        i64::try_from(MAX_BATCH + 8).unwrap()
    );
}

#[test]
fn reads_do_not_wait_for_the_writer_and_stay_governed() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::new(dir.path());
    add_category(&engine, &contract, "alice", "k1", "Travel");
    // The first read of a contract has the writer set the file up for it.
    engine
        .query(APP, &contract, "SELECT name FROM categories", &[])
        .unwrap();
    let slot = engine.slot(APP);
    // The test holds the writer, as a batch committing would.
    let held = slot.handle.lock().unwrap();
    let (sent, answer) = mpsc::channel();
    let reader = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            let contract = super::super::tests::contract();
            for _ in 0..super::super::readers::READERS * 2 {
                let rows = engine.query(APP, &contract, "SELECT name FROM categories", &[]);
                sent.send(rows).unwrap();
            }
            let refused = engine.query(APP, &contract, "SELECT * FROM _sasha_audit", &[]);
            sent.send(refused).unwrap();
        })
    };
    for _ in 0..super::super::readers::READERS * 2 {
        let rows = answer
            .recv_timeout(Duration::from_secs(30))
            .expect("a read waited for the writer")
            .unwrap();
        assert_eq!(rows[0]["name"], "Travel");
    }
    let refused = answer.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(refused.unwrap_err().code, ErrorCode::Internal);
    drop(held);
    reader.join().unwrap();
}

/// A mutation of many rows (an import) may run for its rows' budget past the
/// engine's deadline; the same work as a one-row mutation is stopped.
#[test]
fn a_mutation_of_many_rows_runs_for_its_rows_budget() {
    let dir = tempfile::tempdir().unwrap();
    let contract = contract();
    let engine = Engine::with_deadline(dir.path(), Duration::from_millis(20));
    engine.open(APP, &contract).unwrap();
    // About a tenth of a second of SQLite's own work: past 20 ms, far within
    // the 10 s that 20,000 rows are given.
    let slow = |name: &'static str| {
        move |tx: &Connection| {
            tx.query_row(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000) \
                 SELECT count(*) FROM c",
                [],
                |row| row.get::<_, i64>(0),
            )
            .map_err(sql_error)?;
            create_category(name)(tx)
        }
    };
    let stopped = engine
        .mutate(
            APP,
            &contract,
            receipt("alice", "one", &json!({})),
            meta(),
            slow("one"),
        )
        .unwrap_err();
    assert_eq!(stopped.code, ErrorCode::DatabaseUnavailable);
    assert!(stopped.message.contains("time limit"), "{stopped:?}");
    engine
        .mutate_rows(
            APP,
            &contract,
            receipt("alice", "many", &json!({})),
            meta(),
            20_000,
            slow("many"),
        )
        .unwrap();
    assert_eq!(
        count(
            &raw(&dir),
            "SELECT count(*) FROM categories WHERE name = 'many'"
        ),
        1
    );
    assert_eq!(
        row_budget(Duration::from_secs(2), 1),
        Duration::from_secs(2)
    );
    assert_eq!(
        row_budget(Duration::from_secs(2), 10_000),
        Duration::from_secs(5)
    );
}
