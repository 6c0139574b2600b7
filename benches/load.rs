//! Load benchmark (issue 12, deliverable 1): a Time Sheet workload driven at 1
//! and 8 concurrent clients through MCP `tools/call` on the real roles
//! (data-worker, studio-core, mcp-gateway started from the release `sasha`
//! binary on loopback), against an in-process rusqlite floor doing the same
//! statements and transactions at 1 and 8 threads, and the create and list
//! workloads at 1 and 8 clients against two peers started in the same run
//! (PocketBase and an MCP server on the official TypeScript SDK; see
//! `common::peers`), driven by the same load generator.
//!
//! Run with `./bench/run.sh [--quick]` (or `cargo bench --bench load -- [--quick]`).
//! Prints the Markdown tables and writes them, with `ops.png`, to
//! `$CARGO_TARGET_DIR/bench-results/<UTC timestamp>/`.
//!
//! With `--replication` (issue 51, deliverable 4) it measures create and list
//! at 1 and 8 clients with replication on instead: ours with every database
//! replicating through its Litestream sidecar to a SeaweedFS S3 server on
//! loopback in `async` and then in `sync` mode, against PocketBase with a
//! Litestream beside it replicating its `data.db` to the same server, as
//! PocketBase's users run it (Litestream's own asynchronous, one-second
//! sync). Needs `SASHA_LITESTREAM` and `SASHA_WEED` (`bench/run.sh
//! --replication` installs them).

mod common;

use common::fixture::{Stack, copy_tree, date, day, mix};
use common::mcp::Mcp;
use common::peers::{self, Peer};
use common::report::{BarChart, BarGroup, BarLayout, bar_chart};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use plotters::style::RGBColor;
use rusqlite::OptionalExtension as _;
use serde_json::{Value, json};

const APP: &str = "time-sheet-entry";
const PROJECTS: usize = 5;
/// The first Monday of the seeded range; entries spread over `WEEKS` weeks.
const WEEKS: i64 = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    Create,
    List,
    Aggregate,
    Get,
    Update,
    Action,
}

const WORKLOADS: [Workload; 6] = [
    Workload::Create,
    Workload::List,
    Workload::Aggregate,
    Workload::Get,
    Workload::Update,
    Workload::Action,
];

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::List => "list",
            Self::Aggregate => "aggregate",
            Self::Get => "get",
            Self::Update => "update",
            Self::Action => "weekly-project-totals",
        }
    }
}

struct Limits {
    requests: usize,
    time: Duration,
    seed_entries: usize,
}

/// What a run measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum System {
    /// Ours: MCP `tools/call` through the roles.
    Mcp,
    /// The same statements in process.
    Floor,
    Peer(peers::Kind),
}

impl System {
    fn name(self) -> &'static str {
        match self {
            Self::Mcp => "MCP",
            Self::Floor => "floor",
            Self::Peer(kind) => kind.name(),
        }
    }
}

/// One measured run.
struct Run {
    workload: Workload,
    clients: usize,
    system: System,
    ops: usize,
    errors: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Run {
    fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    fn percentile(&self, p: usize) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        let index = (self.latencies.len() * p / 100).min(self.latencies.len() - 1);
        self.latencies[index].as_secs_f64() * 1000.0
    }
    fn max_ms(&self) -> f64 {
        self.latencies
            .last()
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
    }
}

/// Day 0 of the seeded range, a Monday.
const DAY_0: time::Date = date(2026, time::Month::September, 7);

/// Shared state of the workloads: the seeded ids and, per id, the version the
/// updating client last saw (each client updates only its own ids).
struct Fixture {
    ids: Vec<i64>,
    versions: Vec<AtomicI64>,
    next_key: AtomicUsize,
}

impl Fixture {
    fn new(ids: Vec<i64>) -> Self {
        let versions = ids.iter().map(|_| AtomicI64::new(1)).collect();
        Self {
            ids,
            versions,
            next_key: AtomicUsize::new(0),
        }
    }
}

/// The arguments of one request of `workload`, number `n`, from `client`.
fn week_of(n: u64) -> (String, String) {
    let week = (mix(n) % WEEKS as u64) as i64;
    (day(DAY_0, week * 7), day(DAY_0, week * 7 + 6))
}

/// The date of create number `n`.
fn create_date(n: u64) -> String {
    day(DAY_0, (mix(n) % (WEEKS as u64 * 7)) as i64)
}

/// The date range of list number `n`: from the start of one random week to
/// the end of another, in order.
fn list_range(n: u64) -> (String, String) {
    let (from, _) = week_of(n);
    let (_, to) = week_of(n + 1);
    if from <= to { (from, to) } else { (to, from) }
}

async fn mcp_op(mcp: &Mcp, fixture: &Fixture, workload: Workload, client: usize, n: u64) -> bool {
    let tool = |suffix: &str| format!("app__time_sheet_entry__{suffix}");
    match workload {
        Workload::Create => {
            let key = fixture.next_key.fetch_add(1, Ordering::Relaxed);
            let values = json!({"date": create_date(n), "project": (n % PROJECTS as u64) + 1, "hours": 1.5, "note": "load"});
            mcp.call(
                true,
                &tool("entries__create"),
                json!({"values": values, "idempotencyKey": format!("load-create-{key}")}),
            )
            .await
            .is_some()
        }
        Workload::List => {
            let (from, to) = list_range(n);
            mcp.call(
                false,
                &tool("entries__list"),
                json!({"where": [{"field": "date", "operator": "gte", "value": from}, {"field": "date", "operator": "lte", "value": to}],
                       "orderBy": [{"field": "date", "direction": "asc"}], "limit": 50}),
            )
            .await
            .is_some()
        }
        Workload::Aggregate => {
            let (from, to) = week_of(n);
            mcp.call(
                false,
                &tool("entries__aggregate"),
                json!({"where": [{"field": "date", "operator": "gte", "value": from}, {"field": "date", "operator": "lte", "value": to}],
                       "groupBy": ["project"], "metrics": [{"as": "hours", "sum": "hours"}]}),
            )
            .await
            .is_some()
        }
        Workload::Get => {
            let id = fixture.ids[(mix(n) % fixture.ids.len() as u64) as usize];
            mcp.call(false, &tool("entries__get"), json!({"id": id}))
                .await
                .is_some()
        }
        Workload::Update => {
            let index = update_index(fixture, client, n);
            let id = fixture.ids[index];
            let version = fixture.versions[index].load(Ordering::Relaxed);
            let key = fixture.next_key.fetch_add(1, Ordering::Relaxed);
            let updated = mcp
                .call(
                    true,
                    &tool("entries__update"),
                    json!({"id": id, "changes": {"hours": (n % 8 + 1) as f64}, "expectedVersion": version, "idempotencyKey": format!("load-update-{key}")}),
                )
                .await;
            match updated.and_then(|row| row["_sasha_version"].as_i64()) {
                Some(next) => {
                    fixture.versions[index].store(next, Ordering::Relaxed);
                    true
                }
                None => false,
            }
        }
        Workload::Action => {
            let (monday, _) = week_of(n);
            mcp.call(
                false,
                &tool("weekly_project_totals"),
                json!({"weekStart": monday}),
            )
            .await
            .is_some()
        }
    }
}

/// The id slot client `client` of `clients` updates on its `n`th request: the
/// seeded ids are striped over 8 clients, so no two clients share a row.
fn update_index(fixture: &Fixture, client: usize, n: u64) -> usize {
    let stripe = fixture.ids.len() / 8;
    client * stripe + (n as usize / 8) % stripe.max(1)
}

/// The request budget all clients of one run draw from: a request count and a
/// deadline, whichever comes first.
#[derive(Clone)]
struct Budget {
    issued: Arc<AtomicUsize>,
    max: usize,
    start: Instant,
    time: Duration,
}

impl Budget {
    fn new(limits: &Limits) -> Budget {
        Budget {
            issued: Arc::new(AtomicUsize::new(0)),
            max: limits.requests,
            start: Instant::now(),
            time: limits.time,
        }
    }

    /// Takes one request from the budget; `false` when it is spent.
    fn take(&self) -> bool {
        self.issued.fetch_add(1, Ordering::Relaxed) < self.max && self.start.elapsed() < self.time
    }
}

/// What one client saw: latencies of successful requests and the failures.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    errors: usize,
}

impl Tally {
    fn record(&mut self, ok: bool, begun: Instant) {
        if ok {
            self.latencies.push(begun.elapsed());
        } else {
            self.errors += 1;
        }
    }

    /// The run made of every client's tally.
    fn run(
        tallies: Vec<Tally>,
        workload: Workload,
        clients: usize,
        system: System,
        budget: &Budget,
    ) -> Run {
        let elapsed = budget.start.elapsed();
        let errors = tallies.iter().map(|tally| tally.errors).sum();
        let mut latencies: Vec<Duration> = tallies
            .into_iter()
            .flat_map(|tally| tally.latencies)
            .collect();
        latencies.sort();
        Run {
            workload,
            clients,
            system,
            ops: latencies.len(),
            errors,
            elapsed,
            latencies,
        }
    }
}

/// Drives `op(client, n)` with `clients` tokio tasks until `limits.requests`
/// requests were issued or `limits.time` passed; every system on the network
/// (ours and the peers) is measured by this one loop.
async fn drive<F, Fut>(
    workload: Workload,
    system: System,
    clients: usize,
    limits: &Limits,
    op: F,
) -> Run
where
    F: Fn(usize, u64) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = bool> + Send,
{
    let budget = Budget::new(limits);
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (op, budget) = (op.clone(), budget.clone());
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut own = 0u64;
            while budget.take() {
                let begun = Instant::now();
                let ok = op(client, own * 8 + client as u64).await;
                own += 1;
                tally.record(ok, begun);
            }
            tally
        }));
    }
    let mut tallies = Vec::new();
    for task in tasks {
        tallies.push(task.await.unwrap());
    }
    Tally::run(tallies, workload, clients, system, &budget)
}

async fn drive_mcp(
    mcp: &Arc<Mcp>,
    fixture: &Arc<Fixture>,
    workload: Workload,
    clients: usize,
    limits: &Limits,
) -> Run {
    let (mcp, fixture) = (Arc::clone(mcp), Arc::clone(fixture));
    drive(workload, System::Mcp, clients, limits, move |client, n| {
        let (mcp, fixture) = (Arc::clone(&mcp), Arc::clone(&fixture));
        async move { mcp_op(&mcp, &fixture, workload, client, n).await }
    })
    .await
}

/// The create or list workload against a peer, with the arguments our MCP
/// path gets for the same `n`.
async fn drive_peer(
    peer: &Arc<Peer>,
    next_key: &Arc<AtomicUsize>,
    workload: Workload,
    clients: usize,
    limits: &Limits,
) -> Run {
    let (peer, next_key) = (Arc::clone(peer), Arc::clone(next_key));
    let system = System::Peer(peer.kind);
    drive(workload, system, clients, limits, move |_, n| {
        let (peer, next_key) = (Arc::clone(&peer), Arc::clone(&next_key));
        async move {
            match workload {
                Workload::Create => {
                    let key = format!("load-create-{}", next_key.fetch_add(1, Ordering::Relaxed));
                    peer.create(
                        &create_date(n),
                        (n % PROJECTS as u64) as usize,
                        1.5,
                        "load",
                        &key,
                    )
                    .await
                }
                Workload::List => {
                    let (from, to) = list_range(n);
                    peer.list(&from, &to).await.is_some()
                }
                other => unreachable!("the peers serve create and list, not {}", other.name()),
            }
        }
    })
    .await
}

/// Seeds `count` entries into a peer (8 concurrent creates, the same rows
/// `seed_mcp` writes); returns how many failed.
async fn seed_peer(peer: &Arc<Peer>, count: usize) -> usize {
    let mut tasks = Vec::new();
    for client in 0..8 {
        let peer = Arc::clone(peer);
        tasks.push(tokio::spawn(async move {
            let mut failed = 0;
            for i in (client..count).step_by(8) {
                let date = day(DAY_0, i as i64 % (WEEKS * 7));
                if !peer
                    .create(&date, i % PROJECTS, 2.0, "seed", &format!("seed-{i}"))
                    .await
                {
                    failed += 1;
                }
            }
            failed
        }));
    }
    let mut failed = 0;
    for task in tasks {
        failed += task.await.unwrap();
    }
    failed
}

// ---------------------------------------------------------------------------
// The floor: the same schema, statements and transactions, in process.

const FLOOR_PLATFORM_SQL: &str = r#"
CREATE TABLE IF NOT EXISTS _sasha_idempotency (
    actor TEXT NOT NULL, operation TEXT NOT NULL, key TEXT NOT NULL,
    input_hash TEXT NOT NULL, result_json TEXT NOT NULL, created_at TEXT NOT NULL,
    PRIMARY KEY (actor, operation, key)
) STRICT;
CREATE TABLE IF NOT EXISTS _sasha_audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, table_name TEXT NOT NULL, record_id TEXT NOT NULL,
    operation TEXT NOT NULL, actor_id TEXT NOT NULL, source TEXT NOT NULL,
    app_revision TEXT NOT NULL, action_id TEXT, before_json TEXT, after_json TEXT,
    created_at TEXT NOT NULL
) STRICT;
"#;
const COLUMNS: &str =
    "\"id\", \"date\", \"project\", \"hours\", \"note\", \"created_by\", \"_sasha_version\"";
const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";
const ACTOR: &str = "bench-user";

fn floor_open(path: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    // data-worker/src/engine.rs: WAL, synchronous FULL, foreign keys on.
    conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        .unwrap();
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
        .unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn
}

fn row_json(row: &rusqlite::Row<'_>) -> rusqlite::Result<Value> {
    Ok(json!({
        "id": row.get::<_, i64>(0)?, "date": row.get::<_, String>(1)?, "project": row.get::<_, i64>(2)?,
        "hours": row.get::<_, f64>(3)?, "note": row.get::<_, Option<String>>(4)?,
        "created_by": row.get::<_, String>(5)?, "_sasha_version": row.get::<_, i64>(6)?,
    }))
}

/// One write with its receipt lookup, audit row and receipt in one
/// `BEGIN IMMEDIATE` transaction, as `Engine::mutate` does.
fn floor_mutate(
    conn: &mut rusqlite::Connection,
    operation: &str,
    key: &str,
    work: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<(Option<Value>, Value)>,
) -> rusqlite::Result<Value> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let stored: Option<String> = tx
        .query_row(
            "SELECT result_json FROM _sasha_idempotency WHERE actor = ?1 AND operation = ?2 AND key = ?3",
            (ACTOR, operation, key),
            |row| row.get(0),
        )
        .optional()?;
    if let Some(stored) = stored {
        return Ok(serde_json::from_str(&stored).unwrap());
    }
    let (before, after) = work(&tx)?;
    tx.prepare_cached(&format!(
        "INSERT INTO _sasha_audit (table_name, record_id, operation, actor_id, source, \
         app_revision, action_id, before_json, after_json, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, {NOW})"
    ))?
    .execute(rusqlite::params![
        "entries",
        after["id"].to_string(),
        operation,
        ACTOR,
        "ui",
        "bench",
        Option::<String>::None,
        before.map(|b| b.to_string()),
        after.to_string(),
    ])?;
    tx.prepare_cached(&format!(
        "INSERT INTO _sasha_idempotency (actor, operation, key, input_hash, result_json, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, {NOW})"
    ))?
    .execute((ACTOR, operation, key, "hash", after.to_string()))?;
    tx.commit()?;
    Ok(after)
}

fn floor_op(
    conn: &mut rusqlite::Connection,
    writes: &std::sync::Mutex<()>,
    fixture: &Fixture,
    workload: Workload,
    client: usize,
    n: u64,
) -> rusqlite::Result<()> {
    match workload {
        Workload::Create => {
            let key = format!(
                "floor-create-{}",
                fixture.next_key.fetch_add(1, Ordering::Relaxed)
            );
            let date = create_date(n);
            let project = (n % PROJECTS as u64) as i64 + 1;
            let _gate = writes.lock().unwrap();
            floor_mutate(conn, "create", &key, |tx| {
                let row = tx
                    .prepare_cached(&format!(
                        "INSERT INTO \"entries\" (\"date\", \"project\", \"hours\", \"note\", \"created_by\", \"_sasha_version\") \
                         VALUES (?, ?, ?, ?, ?, 1) RETURNING {COLUMNS}"
                    ))?
                    .query_row(rusqlite::params![date, project, 1.5, "load", ACTOR], row_json)?;
                Ok((None, row))
            })?;
        }
        Workload::List => {
            let (from, to) = list_range(n);
            let mut statement = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM \"entries\" WHERE (\"date\" >= ? AND \"date\" <= ?) AND \"created_by\" = ? \
                 ORDER BY \"date\" ASC, \"id\" ASC LIMIT ?"
            ))?;
            let rows: Vec<Value> = statement
                .query_map(rusqlite::params![from, to, ACTOR, 51], row_json)?
                .collect::<Result<_, _>>()?;
            std::hint::black_box(json!({"rows": rows}).to_string());
        }
        Workload::Aggregate | Workload::Action => {
            let (from, to) = week_of(n);
            let mut statement = conn.prepare_cached(
                "SELECT \"project\", SUM(\"hours\") FROM \"entries\" WHERE (\"date\" >= ? AND \"date\" <= ?) \
                 AND \"created_by\" = ? GROUP BY \"project\" ORDER BY \"project\" LIMIT ?",
            )?;
            let groups: Vec<Value> = statement
                .query_map(rusqlite::params![from, to, ACTOR, 1001], |row| {
                    Ok(json!({"project": row.get::<_, i64>(0)?, "hours": row.get::<_, f64>(1)?}))
                })?
                .collect::<Result<_, _>>()?;
            std::hint::black_box(json!({"groups": groups}).to_string());
        }
        Workload::Get => {
            let id = fixture.ids[(mix(n) % fixture.ids.len() as u64) as usize];
            let row = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM \"entries\" WHERE \"id\" = ? AND \"created_by\" = ?"
                ))?
                .query_row(rusqlite::params![id, ACTOR], row_json)?;
            std::hint::black_box(row.to_string());
        }
        Workload::Update => {
            let index = update_index(fixture, client, n);
            let id = fixture.ids[index];
            let version = fixture.versions[index].load(Ordering::Relaxed);
            let key = format!(
                "floor-update-{}",
                fixture.next_key.fetch_add(1, Ordering::Relaxed)
            );
            let hours = (n % 8 + 1) as f64;
            let _gate = writes.lock().unwrap();
            let after = floor_mutate(conn, "update", &key, |tx| {
                let before = tx
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM \"entries\" WHERE \"id\" = ? AND \"created_by\" = ?"
                    ))?
                    .query_row(rusqlite::params![id, ACTOR], row_json)?;
                let after = tx
                    .prepare_cached(&format!(
                        "UPDATE \"entries\" SET \"hours\" = ?, \"_sasha_version\" = \"_sasha_version\" + 1 \
                         WHERE \"id\" = ? AND \"_sasha_version\" = ? AND \"created_by\" = ? RETURNING {COLUMNS}"
                    ))?
                    .query_row(rusqlite::params![hours, id, version, ACTOR], row_json)?;
                Ok((Some(before), after))
            })?;
            fixture.versions[index]
                .store(after["_sasha_version"].as_i64().unwrap(), Ordering::Relaxed);
        }
    }
    Ok(())
}

fn drive_floor(
    path: &Path,
    fixture: &Arc<Fixture>,
    workload: Workload,
    clients: usize,
    limits: &Limits,
) -> Run {
    // SQLite has one writer per file. Writers queue on an in-process lock
    // rather than on SQLite's busy handler, whose sleeps would make the floor
    // slower than it need be; each write is its own transaction (the floor
    // does not group-commit, data-worker does).
    let writes = Arc::new(std::sync::Mutex::new(()));
    let connections: Vec<_> = (0..clients).map(|_| floor_open(path)).collect();
    let budget = Budget::new(limits);
    let threads: Vec<_> = connections
        .into_iter()
        .enumerate()
        .map(|(client, mut conn)| {
            let (fixture, budget, writes) =
                (Arc::clone(fixture), budget.clone(), Arc::clone(&writes));
            std::thread::spawn(move || {
                let mut tally = Tally::default();
                let mut own = 0u64;
                while budget.take() {
                    let begun = Instant::now();
                    let result = floor_op(
                        &mut conn,
                        &writes,
                        &fixture,
                        workload,
                        client,
                        own * 8 + client as u64,
                    );
                    own += 1;
                    if let Err(error) = &result
                        && tally.errors == 0
                    {
                        eprintln!("bench: floor {} failed: {error}", workload.name());
                    }
                    tally.record(result.is_ok(), begun);
                }
                tally
            })
        })
        .collect();
    let tallies = threads
        .into_iter()
        .map(|thread| thread.join().unwrap())
        .collect();
    Tally::run(tallies, workload, clients, System::Floor, &budget)
}

// ---------------------------------------------------------------------------
// Output.

fn table(runs: &[Run], mode: &str, seeded: usize) -> String {
    let mut out = format!(
        "Load benchmark ({mode}; {} cores; release build; {seeded} seeded entries, {PROJECTS} projects; latencies of successful requests)\n\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    out.push_str("| workload | clients | path | ops | ops/s | p50 ms | p99 ms | max ms | errors | MCP / floor (ops/s) |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    for run in runs
        .iter()
        .filter(|r| matches!(r.system, System::Mcp | System::Floor))
    {
        let ratio = if run.system == System::Mcp {
            find(runs, run.workload, run.clients, System::Floor).map_or(String::new(), |f| {
                format!("{:.1} %", 100.0 * run.ops_per_sec() / f.ops_per_sec())
            })
        } else {
            String::new()
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {:.3} | {:.3} | {:.3} | {} | {} |\n",
            run.workload.name(),
            run.clients,
            run.system.name(),
            run.ops,
            run.ops_per_sec(),
            run.percentile(50),
            run.percentile(99),
            run.max_ms(),
            run.errors,
            ratio
        ));
    }
    out
}

fn find(runs: &[Run], workload: Workload, clients: usize, system: System) -> Option<&Run> {
    runs.iter()
        .find(|r| r.workload == workload && r.clients == clients && r.system == system)
}

/// The peer runs of `workload` at `clients`: the one with the most ops/s and
/// the one with the lowest p50 (the "best peer" of each target).
fn best_peers(runs: &[Run], workload: Workload, clients: usize) -> (Option<&Run>, Option<&Run>) {
    let peer_runs = || {
        runs.iter().filter(move |r| {
            matches!(r.system, System::Peer(_)) && r.workload == workload && r.clients == clients
        })
    };
    (
        peer_runs().max_by(|a, b| a.ops_per_sec().total_cmp(&b.ops_per_sec())),
        peer_runs().min_by(|a, b| a.percentile(50).total_cmp(&b.percentile(50))),
    )
}

fn yes(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

/// What ran as each peer, or why it did not.
type PeerStatus = (peers::Kind, Result<String, String>);

/// Ours next to the peers on the workloads all three serve, from this run,
/// with issue 25's targets judged row by row.
fn side_by_side(runs: &[Run], status: &[PeerStatus]) -> String {
    let mut out = String::from(
        "\nSide by side (same load generator and run; latencies of successful requests; sasha = MCP `tools/call` through the roles, synchronous=FULL):\n\n",
    );
    for (kind, status) in status {
        match status {
            Ok(version) => out.push_str(&format!("- {}: {version}\n", kind.name())),
            Err(why) => out.push_str(&format!("- {}: NOT MEASURED: {why}\n", kind.name())),
        }
    }
    let systems: Vec<System> = std::iter::once(System::Mcp)
        .chain(peers::KINDS.into_iter().map(System::Peer))
        .collect();
    out.push('\n');
    out.push_str(&head(
        systems.iter().map(|system| match system {
            System::Mcp => "sasha MCP",
            other => other.name(),
        }),
        ["sasha / best peer (ops/s)", "target"],
    ));
    for workload in [Workload::Create, Workload::List] {
        for clients in [1, 8] {
            let Some(ours) = find(runs, workload, clients, System::Mcp) else {
                continue;
            };
            out.push_str(&format!("| {} | {clients} |", workload.name()));
            for system in &systems {
                out.push_str(&cells(find(runs, workload, clients, *system)));
            }
            let (fastest, quickest) = best_peers(runs, workload, clients);
            let ratio = fastest.map_or(String::from("–"), |best| {
                format!(
                    "{:.2}× ({})",
                    ours.ops_per_sec() / best.ops_per_sec(),
                    best.system.name()
                )
            });
            let target = if clients == 1 {
                quickest.map_or(String::from("no peer measured"), |best| {
                    format!(
                        "p50 ≤ best peer's ({:.2} ms): {}",
                        best.percentile(50),
                        yes(ours.percentile(50) <= best.percentile(50))
                    )
                })
            } else {
                let peer =
                    fastest.map_or(String::from("≥ 2× best peer: no peer measured"), |best| {
                        format!(
                            "≥ 2× best peer: {}",
                            yes(ours.ops_per_sec() >= 2.0 * best.ops_per_sec())
                        )
                    });
                format!("{peer}; p99 < 20 ms: {}", yes(ours.percentile(99) < 20.0))
            };
            out.push_str(&format!(" {ratio} | {target} |\n"));
        }
    }
    out
}

/// The head of a side-by-side table: workload and clients, ops/s, p50 and
/// p99 for each of `systems`, then the two `ratios` columns.
fn head<'a>(systems: impl Iterator<Item = &'a str>, ratios: [&str; 2]) -> String {
    let mut out = String::from("| workload | clients |");
    let mut count = 0;
    for name in systems {
        out.push_str(&format!(" {name} ops/s | p50 ms | p99 ms |"));
        count += 1;
    }
    out.push_str(&format!(" {} | {} |\n|---|---|", ratios[0], ratios[1]));
    out.push_str(&"---|---|---|".repeat(count));
    out.push_str("---|---|\n");
    out
}

/// A run's ops/s (with its errors, if any), p50 and p99 cells of a
/// side-by-side row; dashes for a run that did not happen.
fn cells(run: Option<&Run>) -> String {
    match run {
        Some(run) => format!(
            " {:.0}{} | {:.2} | {:.2} |",
            run.ops_per_sec(),
            if run.errors > 0 {
                format!(" ({} errors)", run.errors)
            } else {
                String::new()
            },
            run.percentile(50),
            run.percentile(99)
        ),
        None => String::from(" – | – | – |"),
    }
}

/// The targets of issues 12 and 25, judged on this run's numbers (the peers'
/// too: nothing here is a remembered measurement).
fn targets(runs: &[Run]) -> String {
    let mut out = String::from("\nTargets (MCP):\n\n");
    for workload in [Workload::Create, Workload::List] {
        let Some(mcp) = find(runs, workload, 8, System::Mcp) else {
            continue;
        };
        let ops = mcp.ops_per_sec();
        let peer = match best_peers(runs, workload, 8).0 {
            Some(best) => format!(
                "≥ 2× best peer ({} {:.0}/s → {:.0}/s): {} ({:.2}×)",
                best.system.name(),
                best.ops_per_sec(),
                2.0 * best.ops_per_sec(),
                yes(ops >= 2.0 * best.ops_per_sec()),
                ops / best.ops_per_sec()
            ),
            None => String::from("≥ 2× best peer: not judged, no peer measured"),
        };
        let floor = find(runs, workload, 8, System::Floor).map_or(String::new(), |floor| {
            format!(
                "; ≥ 25 % of floor ({:.0}): {} ({:.1} %)",
                0.25 * floor.ops_per_sec(),
                yes(ops >= 0.25 * floor.ops_per_sec()),
                100.0 * ops / floor.ops_per_sec()
            )
        });
        out.push_str(&format!(
            "- {} at 8 clients: {ops:.0} ops/s; {peer}{floor}; p99 {:.2} ms < 20 ms: {}\n",
            workload.name(),
            mcp.percentile(99),
            yes(mcp.percentile(99) < 20.0),
        ));
        if let Some(single) = find(runs, workload, 1, System::Mcp) {
            let p50 = single.percentile(50);
            out.push_str(&match best_peers(runs, workload, 1).1 {
                Some(best) => format!(
                    "- {} at 1 client: p50 {p50:.2} ms ≤ best peer's ({} {:.2} ms): {}\n",
                    workload.name(),
                    best.system.name(),
                    best.percentile(50),
                    yes(p50 <= best.percentile(50))
                ),
                None => format!(
                    "- {} at 1 client: p50 {p50:.2} ms; not judged, no peer measured\n",
                    workload.name()
                ),
            });
        }
    }
    let slow: Vec<_> = runs
        .iter()
        .filter(|r| r.system == System::Mcp && r.clients == 8 && r.percentile(99) >= 20.0)
        .map(|r| r.workload.name())
        .collect();
    out.push_str(&format!(
        "- p99 < 20 ms at 8 clients, every MCP workload: {}\n",
        if slow.is_empty() {
            String::from("met")
        } else {
            format!("NOT met ({})", slow.join(", "))
        }
    ));
    out
}

/// `ops.png`: grouped bars of ops/s per workload, MCP vs floor, 8 clients, on
/// a log scale (the two differ by an order of magnitude). Without a font the
/// chart is drawn without labels.
fn chart(runs: &[Run], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let max = runs
        .iter()
        .filter(|r| r.clients == 8)
        .map(Run::ops_per_sec)
        .fold(1.0f64, f64::max);
    let decades = max.log10().ceil().max(1.0);
    let groups = WORKLOADS
        .iter()
        .map(|workload| BarGroup {
            label: workload.name().to_owned(),
            bars: [System::Mcp, System::Floor]
                .into_iter()
                .map(|system| {
                    find(runs, *workload, 8, system)
                        .map(|run| (run.ops_per_sec(), format!("{:.0}", run.ops_per_sec())))
                })
                .collect(),
        })
        .collect();
    bar_chart(
        path,
        &BarChart {
            title: "ops/s at 8 clients (log scale): MCP tools/call (blue) vs in-process rusqlite floor (grey)",
            layout: BarLayout {
                margins: (80, 20, 50, 80),
                inset: 0.12,
                grid: RGBColor(220, 220, 220),
                value_label: ((0, -16), 12.0),
                group_label: (8, 13.0),
                title_at: (80, 16),
            },
            colours: &[RGBColor(46, 109, 180), RGBColor(160, 160, 160)],
            grid: (0..=decades as i32)
                .map(|decade| {
                    let value = 10f64.powi(decade);
                    (value, format!("{value:.0}"))
                })
                .collect(),
            fraction: &|ops: f64| (ops.max(1.0).log10() / decades).clamp(0.0, 1.0),
            groups,
        },
    )
}

// ---------------------------------------------------------------------------

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let replication = std::env::args().any(|a| a == "--replication");
    let limits = if quick {
        Limits {
            requests: 150,
            time: Duration::from_secs(2),
            seed_entries: 400,
        }
    } else {
        Limits {
            requests: 4000,
            time: Duration::from_secs(8),
            seed_entries: 3000,
        }
    };
    let mode = if quick { "--quick" } else { "normal" };
    eprintln!(
        "bench: load ({mode}): ≤ {} requests and ≤ {:?} per workload run",
        limits.requests, limits.time
    );

    // The roles, on loopback, with the Time Sheet app in the docs root.
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps").join(APP);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if replication {
        let report = replicated(&runtime, &source, &limits);
        println!("{report}");
        let dir = common::report::results_dir("replicated-");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("results.md"), &report).unwrap();
        println!("results: {}", dir.display());
        return;
    }
    let stack = Stack::start(false, |apps| copy_tree(&source, &apps.join(APP)));
    let mcp = Arc::new(stack.mcp(APP));

    let mut runs = Vec::new();
    // MCP: seed (unmeasured), then every workload at 1 and 8 clients.
    let mcp_fixture = runtime.block_on(seed_projects_and_entries(&mcp, &limits));
    for workload in WORKLOADS {
        for clients in [1, 8] {
            let run = runtime.block_on(drive_mcp(&mcp, &mcp_fixture, workload, clients, &limits));
            eprintln!(
                "bench: MCP   {:<22} {clients} clients: {:>6.0} ops/s ({} errors)",
                workload.name(),
                run.ops_per_sec(),
                run.errors
            );
            runs.push(run);
        }
    }
    drop(stack);

    // The floor: the same schema (the app's migration, the version column and
    // the platform's receipt and audit tables), the same seed.
    let floor_dir = tempfile::tempdir().unwrap();
    let floor_path = floor_dir.path().join("floor.sqlite");
    let floor_fixture = {
        let mut conn = floor_open(&floor_path);
        conn.execute_batch(
            &std::fs::read_to_string(source.join("migrations/001-initial.sql")).unwrap(),
        )
        .unwrap();
        conn.execute_batch(
            "ALTER TABLE entries ADD COLUMN _sasha_version INTEGER NOT NULL DEFAULT 1;\
             ALTER TABLE projects ADD COLUMN _sasha_version INTEGER NOT NULL DEFAULT 1;",
        )
        .unwrap();
        conn.execute_batch(FLOOR_PLATFORM_SQL).unwrap();
        let tx = conn.transaction().unwrap();
        for p in 0..PROJECTS {
            tx.execute(
                "INSERT INTO projects (name) VALUES (?)",
                [format!("Project {p}")],
            )
            .unwrap();
        }
        let mut ids = Vec::new();
        for i in 0..limits.seed_entries {
            ids.push(
                tx.query_row(
                    "INSERT INTO entries (date, project, hours, note, created_by) VALUES (?, ?, ?, ?, ?) RETURNING id",
                    rusqlite::params![day(DAY_0, i as i64 % (WEEKS * 7)), (i % PROJECTS) as i64 + 1, 2.0, "seed", ACTOR],
                    |row| row.get(0),
                )
                .unwrap(),
            );
        }
        tx.commit().unwrap();
        Arc::new(Fixture::new(ids))
    };
    for workload in WORKLOADS {
        for clients in [1, 8] {
            let run = drive_floor(&floor_path, &floor_fixture, workload, clients, &limits);
            eprintln!(
                "bench: floor {:<22} {clients} clients: {:>6.0} ops/s ({} errors)",
                workload.name(),
                run.ops_per_sec(),
                run.errors
            );
            runs.push(run);
        }
    }

    // The peers, one at a time with nothing else running, as ours ran: the
    // same seed, then create and list at 1 and 8 clients.
    let mut status: Vec<PeerStatus> = Vec::new();
    for kind in peers::KINDS {
        let measured = runtime.block_on(measure_peer(kind, &limits, &mut runs, |_| None));
        if let Err(why) = &measured {
            eprintln!("bench: {} NOT MEASURED: {why}", kind.name());
        }
        status.push((kind, measured));
    }

    // Order: per workload, per clients, MCP, floor, then the peers.
    let systems: Vec<System> = [System::Mcp, System::Floor]
        .into_iter()
        .chain(peers::KINDS.into_iter().map(System::Peer))
        .collect();
    let mut ordered = Vec::new();
    for workload in WORKLOADS {
        for clients in [1, 8] {
            for system in &systems {
                if let Some(i) = runs.iter().position(|r| {
                    r.workload == workload && r.clients == clients && r.system == *system
                }) {
                    ordered.push(runs.swap_remove(i));
                }
            }
        }
    }
    let report = format!(
        "{}{}{}",
        table(&ordered, mode, limits.seed_entries),
        side_by_side(&ordered, &status),
        targets(&ordered)
    );
    println!("{report}");
    let dir = common::report::results_dir("");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("results.md"), &report).unwrap();
    if let Err(error) = chart(&ordered, &dir.join("ops.png")) {
        eprintln!("bench: could not draw ops.png: {error}");
    }
    println!("results: {}", dir.display());
}

/// The projects, then `limits.seed_entries` entries, through MCP
/// (unmeasured).
async fn seed_projects_and_entries(mcp: &Arc<Mcp>, limits: &Limits) -> Arc<Fixture> {
    for p in 0..PROJECTS {
        mcp.call(
            true,
            "app__time_sheet_entry__projects__create",
            json!({"values": {"name": format!("Project {p}")}, "idempotencyKey": format!("project-{p}")}),
        )
        .await
        .expect("seed a project");
    }
    let ids = seed_mcp(mcp, limits.seed_entries).await;
    Arc::new(Fixture::new(ids))
}

/// The `--replication` run: create and list at 1 and 8 clients, ours in
/// `async` and in `sync` mode and PocketBase with Litestream, each
/// replicating to one SeaweedFS S3 server; a Markdown report.
fn replicated(runtime: &tokio::runtime::Runtime, source: &Path, limits: &Limits) -> String {
    use common::replica::{self, ObjectStorage, Sidecar};
    let storage = runtime.block_on(ObjectStorage::start());
    let mut measured: Vec<(String, Vec<Run>)> = Vec::new();
    for mode in ["async", "sync"] {
        let mut sidecars = Vec::new();
        let mut stack = Stack::start_with(
            false,
            |apps| copy_tree(source, &apps.join(APP)),
            |role, state| {
                let socket = state.join("sockets").join(format!("{role}.sock"));
                sidecars.push(runtime.block_on(Sidecar::start(&socket)));
                replica::role_env(&storage, &format!("load-{mode}"), &socket, mode)
            },
        );
        stack.sidecars = sidecars;
        let mcp = Arc::new(stack.mcp(APP));
        let fixture = runtime.block_on(seed_projects_and_entries(&mcp, limits));
        let mut runs = Vec::new();
        for workload in [Workload::Create, Workload::List] {
            for clients in [1, 8] {
                let run = runtime.block_on(drive_mcp(&mcp, &fixture, workload, clients, limits));
                eprintln!(
                    "bench: MCP, {mode} replication, {:<6} {clients} clients: {:>6.0} ops/s ({} errors)",
                    workload.name(),
                    run.ops_per_sec(),
                    run.errors
                );
                runs.push(run);
            }
        }
        let objects = runtime.block_on(storage.object_count(&format!("load-{mode}"), ""));
        assert!(objects > 0, "nothing reached object storage in {mode} mode");
        drop(stack);
        measured.push((format!("sasha, {mode}"), runs));
    }
    let pocketbase = runtime.block_on(async {
        let mut runs = Vec::new();
        let version = measure_peer(peers::Kind::PocketBase, limits, &mut runs, |peer| {
            let database = peer.database().expect("PocketBase's data.db");
            Some(litestream_beside(&database, &storage.url("pocketbase")))
        })
        .await;
        let objects = storage.object_count("pocketbase", "").await;
        (version, runs, objects)
    });
    let mut out = format!(
        "## With replication on (create and list, {} seeded entries)\n\n\
         One SeaweedFS S3 server on loopback for all three; Litestream {} for both systems.\n\n",
        limits.seed_entries,
        litestream_version()
    );
    match &pocketbase {
        (Ok(version), _, objects) => out.push_str(&format!(
            "- PocketBase + Litestream: {version}; Litestream's default asynchronous replication (a sync every second); {objects} objects in its bucket afterwards\n"
        )),
        (Err(why), _, _) => out.push_str(&format!("- PocketBase + Litestream: NOT MEASURED: {why}\n")),
    }
    out.push_str("- sasha, async: a write is acknowledged at its local commit; Litestream uploads beside it\n");
    out.push_str("- sasha, sync: a write is acknowledged after a sync-and-wait covering it (group commit)\n\n");
    measured.push((String::from("PocketBase + Litestream"), pocketbase.1));
    out.push_str(&head(
        measured.iter().map(|(label, _)| label.as_str()),
        ["async / PocketBase", "sync / PocketBase"],
    ));
    for workload in [Workload::Create, Workload::List] {
        for clients in [1, 8] {
            out.push_str(&format!("| {} | {clients} |", workload.name()));
            let runs: Vec<Option<&Run>> = measured
                .iter()
                .map(|(_, runs)| {
                    runs.iter()
                        .find(|run| run.workload == workload && run.clients == clients)
                })
                .collect();
            for run in &runs {
                out.push_str(&cells(*run));
            }
            for ours in [runs[0], runs[1]] {
                match (ours, runs[2]) {
                    (Some(ours), Some(peer)) => out.push_str(&format!(
                        " {:.2}× |",
                        ours.ops_per_sec() / peer.ops_per_sec()
                    )),
                    _ => out.push_str(" – |"),
                }
            }
            out.push('\n');
        }
    }
    out
}

/// `litestream replicate` of `database` to `url`, with its default
/// (asynchronous) settings, as a PocketBase user runs it; killed when
/// dropped.
fn litestream_beside(database: &Path, url: &str) -> std::process::Child {
    use common::replica::{ACCESS_KEY, SECRET_KEY, litestream};
    let config = database.with_file_name("litestream.yml");
    std::fs::write(
        &config,
        format!(
            "dbs:\n  - path: {}\n    replica:\n      url: \"{url}&force-path-style=true\"\n",
            database.display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(database.with_file_name("litestream.log")).unwrap();
    std::process::Command::new(litestream())
        .arg("replicate")
        .arg("-config")
        .arg(&config)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start litestream beside PocketBase")
}

/// "v0.5.17", as `litestream version` prints it.
fn litestream_version() -> String {
    std::process::Command::new(common::replica::litestream())
        .arg("version")
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|| String::from("?"))
}

/// Starts peer `kind`, seeds it as ours was seeded, checks that an owner's
/// list sees the seeded rows, starts what `beside` gives for it (a
/// replicator; stopped with the peer), and measures create and list at 1
/// and 8 clients into `runs`. Returns what ran, or why it could not.
async fn measure_peer(
    kind: peers::Kind,
    limits: &Limits,
    runs: &mut Vec<Run>,
    beside: impl FnOnce(&Peer) -> Option<std::process::Child>,
) -> Result<String, String> {
    let peer = Arc::new(Peer::start(kind).await?);
    let mut companion = Companion(beside(&peer));
    let failed = seed_peer(&peer, limits.seed_entries).await;
    if failed > 0 {
        return Err(format!(
            "{failed} of {} seed creates failed",
            limits.seed_entries
        ));
    }
    let (from, to) = (day(DAY_0, 0), day(DAY_0, WEEKS * 7 - 1));
    let seen = peer.list(&from, &to).await;
    if seen != Some(50.min(limits.seed_entries)) {
        return Err(format!(
            "a list of the whole seeded range returned {seen:?} rows, not 50"
        ));
    }
    let next_key = Arc::new(AtomicUsize::new(0));
    for workload in [Workload::Create, Workload::List] {
        for clients in [1, 8] {
            let run = drive_peer(&peer, &next_key, workload, clients, limits).await;
            eprintln!(
                "bench: {:<10} {:<11} {clients} clients: {:>6.0} ops/s ({} errors)",
                kind.name(),
                workload.name(),
                run.ops_per_sec(),
                run.errors
            );
            runs.push(run);
        }
    }
    if let Some(child) = &mut companion.0
        && let Ok(Some(status)) = child.try_wait()
    {
        return Err(format!("its replicator exited during the run: {status}"));
    }
    Ok(peer.version.clone())
}

/// A process run beside a peer, killed with it.
struct Companion(Option<std::process::Child>);

impl Drop for Companion {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Seeds `count` entries through MCP (8 concurrent creates) and returns their ids.
async fn seed_mcp(mcp: &Arc<Mcp>, count: usize) -> Vec<i64> {
    let mut tasks = Vec::new();
    for client in 0..8 {
        let mcp = Arc::clone(mcp);
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in (client..count).step_by(8) {
                let row = mcp
                    .call(
                        true,
                        "app__time_sheet_entry__entries__create",
                        json!({"values": {"date": day(DAY_0, i as i64 % (WEEKS * 7)), "project": (i % PROJECTS) + 1, "hours": 2.0, "note": "seed"},
                               "idempotencyKey": format!("seed-{i}")}),
                    )
                    .await
                    .expect("seed an entry");
                ids.push(row["id"].as_i64().unwrap());
            }
            ids
        }));
    }
    let mut ids = Vec::new();
    for task in tasks {
        ids.extend(task.await.unwrap());
    }
    ids.sort_unstable();
    ids
}
