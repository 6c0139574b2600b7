//! Governed data operations through data-worker's gRPC interface, against an
//! in-process rusqlite floor running the equivalent statements on the same
//! schema. Run with `cargo bench --bench data`; prints per-operation medians and
//! the ratio to the floor.

use std::collections::HashMap;
use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sasha_proto::identity::{DevPki, Identity};
use sasha_proto::pb::{Actor, ExecuteRequest};
use sasha_proto::{Role, grpc};
use serde_json::json;

const CREATES: usize = 400;
const READS: usize = 200;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn start_worker(state: &Path, pki: &DevPki) -> (std::process::Child, String) {
    let files = pki.files(Role::DataWorker);
    let mut child = Command::new(env!("CARGO_BIN_EXE_sasha"))
        .args(["serve", "data-worker"])
        .env("SASHA_STATE_DIR", state)
        .env("SASHA_TLS_CA", &files.ca)
        .env("SASHA_TLS_CERT", &files.cert)
        .env("SASHA_TLS_KEY", &files.key)
        .env("SASHA_DATA_GRPC_ADDR", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start data-worker");
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout).lines();
    let ready: serde_json::Value = loop {
        let line = lines.next().expect("readiness line").unwrap();
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(&line)
            && value["event"] == "ready"
        {
            break value;
        }
    };
    (
        child,
        format!("https://{}", ready["listeners"]["grpc"].as_str().unwrap()),
    )
}

fn main() {
    let temp = tempfile::tempdir().unwrap();
    let (pki, _) = DevPki::ensure(&temp.path().join("certs")).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packages/valid/expense-log");
    let contract = sasha_package::validate::validate_dir(&fixture)
        .package
        .unwrap()
        .data
        .unwrap();
    let contract_json = serde_json::to_string(&contract).unwrap();
    let (mut child, url) = start_worker(temp.path(), &pki);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    let identity = Identity::load(&pki.files(Role::McpGateway)).unwrap();
    let governed: HashMap<&str, Duration> = runtime.block_on(async {
        let client = grpc::data_client(&url, &identity).unwrap();
        let call = |operation: &'static str, table: &'static str, body: serde_json::Value| {
            let request = ExecuteRequest {
                app_id: "expense-log".into(),
                contract_hash: contract.hash.clone(),
                actor: Some(Actor { user_id: "bench".into(), via: "ui".into() }),
                operation: operation.into(),
                table: table.into(),
                request_json: body.to_string(),
                contract_json: contract_json.clone(),
                source: "ui".into(),
                app_revision: "bench".into(),
                action_id: String::new(),
            };
            let mut client = client.clone();
            async move { client.execute(request).await.expect("governed call").into_inner() }
        };
        call("create", "categories", json!({"values": {"name": "Bench"}, "idempotencyKey": "cat"})).await;
        let mut creates = Vec::new();
        for i in 0..CREATES {
            let start = Instant::now();
            call("create", "expenses", json!({"values": {"spent_on": "2026-11-01", "amount": i as f64, "category_id": 1, "note": "x"}, "idempotencyKey": format!("k{i}")})).await;
            creates.push(start.elapsed());
        }
        let mut lists = Vec::new();
        let mut aggregates = Vec::new();
        for _ in 0..READS {
            let start = Instant::now();
            call("list", "expenses", json!({"limit": 50, "orderBy": [{"field": "amount", "direction": "desc"}]})).await;
            lists.push(start.elapsed());
            let start = Instant::now();
            call("aggregate", "expenses", json!({"groupBy": ["category_id"], "metrics": [{"as": "total", "sum": "amount"}]})).await;
            aggregates.push(start.elapsed());
        }
        HashMap::from([("create", median(creates)), ("list", median(lists)), ("aggregate", median(aggregates))])
    });
    let _ = child.kill();
    let _ = child.wait();

    // The floor: the same schema and equivalent statements, in process.
    let floor_dir = tempfile::tempdir().unwrap();
    let mut db = rusqlite::Connection::open(floor_dir.path().join("floor.sqlite")).unwrap();
    db.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;")
        .unwrap();
    for migration in &contract.migrations {
        db.execute_batch(&migration.sql).unwrap();
    }
    db.execute_batch("ALTER TABLE expenses ADD COLUMN _sasha_version INTEGER NOT NULL DEFAULT 1;")
        .unwrap();
    db.execute("INSERT INTO categories (name) VALUES ('Bench')", [])
        .unwrap();
    let mut creates = Vec::new();
    for i in 0..CREATES {
        let start = Instant::now();
        let transaction = db.transaction().unwrap();
        transaction
            .execute(
                "INSERT INTO expenses (spent_on, amount, category_id, note, created_by) VALUES (?, ?, ?, ?, ?)",
                rusqlite::params!["2026-11-01", i as f64, 1, "x", "bench"],
            )
            .unwrap();
        transaction.commit().unwrap();
        creates.push(start.elapsed());
    }
    let mut lists = Vec::new();
    let mut aggregates = Vec::new();
    for _ in 0..READS {
        let start = Instant::now();
        let mut statement = db
            .prepare_cached(
                "SELECT * FROM expenses WHERE created_by = ? ORDER BY amount DESC, id LIMIT 51",
            )
            .unwrap();
        let rows: Vec<i64> = statement
            .query_map(["bench"], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(!rows.is_empty());
        lists.push(start.elapsed());
        let start = Instant::now();
        let mut statement = db
            .prepare_cached("SELECT category_id, SUM(amount) FROM expenses WHERE created_by = ? GROUP BY category_id ORDER BY category_id LIMIT 1001")
            .unwrap();
        let groups: Vec<i64> = statement
            .query_map(["bench"], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(groups.len(), 1);
        aggregates.push(start.elapsed());
    }
    let floor = HashMap::from([
        ("create", median(creates)),
        ("list", median(lists)),
        ("aggregate", median(aggregates)),
    ]);

    println!("operation   governed (gRPC, median)   floor (in-process rusqlite)   ratio");
    for operation in ["create", "list", "aggregate"] {
        let (g, f) = (governed[operation], floor[operation]);
        println!(
            "{operation:<11} {:>12.3} ms              {:>10.3} ms                {:>6.1}x",
            g.as_secs_f64() * 1000.0,
            f.as_secs_f64() * 1000.0,
            g.as_secs_f64() / f.as_secs_f64()
        );
    }
}
