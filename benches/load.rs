//! Load benchmark (issue 12, deliverable 1): a Time Sheet workload driven at 1
//! and 8 concurrent clients through MCP `tools/call` on the real roles
//! (data-worker, studio-core, mcp-gateway started from the release `sasha`
//! binary on loopback), against an in-process rusqlite floor doing the same
//! statements and transactions at 1 and 8 threads.
//!
//! Run with `./bench/run.sh [--quick]` (or `cargo bench --bench load -- [--quick]`).
//! Prints a Markdown table and writes it, with `ops.png`, to
//! `$CARGO_TARGET_DIR/bench-results/<UTC timestamp>/`.

mod common;

use common::fixture::{Stack, copy_tree, date, day, mix};
use common::mcp::Mcp;
use common::report::{BarChart, BarGroup, BarLayout, bar_chart};
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

/// One measured run.
struct Run {
    workload: Workload,
    clients: usize,
    floor: bool,
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

async fn mcp_op(mcp: &Mcp, fixture: &Fixture, workload: Workload, client: usize, n: u64) -> bool {
    let tool = |suffix: &str| format!("app__time_sheet_entry__{suffix}");
    match workload {
        Workload::Create => {
            let key = fixture.next_key.fetch_add(1, Ordering::Relaxed);
            let values = json!({"date": day(DAY_0, (mix(n) % (WEEKS as u64 * 7)) as i64), "project": (n % PROJECTS as u64) + 1, "hours": 1.5, "note": "load"});
            mcp.call(
                true,
                &tool("entries__create"),
                json!({"values": values, "idempotencyKey": format!("load-create-{key}")}),
            )
            .await
            .is_some()
        }
        Workload::List => {
            let (from, _) = week_of(n);
            let (_, to) = week_of(n + 1);
            let (from, to) = if from <= to { (from, to) } else { (to, from) };
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
        floor: bool,
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
            floor,
            ops: latencies.len(),
            errors,
            elapsed,
            latencies,
        }
    }
}

/// Drives one workload with `clients` tokio tasks until `limits.requests`
/// requests were issued or `limits.time` passed.
async fn drive_mcp(
    mcp: &Arc<Mcp>,
    fixture: &Arc<Fixture>,
    workload: Workload,
    clients: usize,
    limits: &Limits,
) -> Run {
    let budget = Budget::new(limits);
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (mcp, fixture, budget) = (Arc::clone(mcp), Arc::clone(fixture), budget.clone());
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut own = 0u64;
            while budget.take() {
                let begun = Instant::now();
                let ok = mcp_op(&mcp, &fixture, workload, client, own * 8 + client as u64).await;
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
    Tally::run(tallies, workload, clients, false, &budget)
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
            let date = day(DAY_0, (mix(n) % (WEEKS as u64 * 7)) as i64);
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
            let (from, _) = week_of(n);
            let (_, to) = week_of(n + 1);
            let (from, to) = if from <= to { (from, to) } else { (to, from) };
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
    // SQLite has one writer per file. Writers queue on an in-process lock (as
    // data-worker's one connection per app does) rather than on SQLite's busy
    // handler, whose sleeps would make the floor slower than it need be.
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
    Tally::run(tallies, workload, clients, true, &budget)
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
    for run in runs {
        let ratio = if run.floor {
            String::from("")
        } else {
            runs.iter()
                .find(|f| f.floor && f.workload == run.workload && f.clients == run.clients)
                .map_or(String::new(), |f| {
                    format!("{:.1} %", 100.0 * run.ops_per_sec() / f.ops_per_sec())
                })
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {:.3} | {:.3} | {:.3} | {} | {} |\n",
            run.workload.name(),
            run.clients,
            if run.floor { "floor" } else { "MCP" },
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

/// The orientation targets of issue 12, judged on the measured numbers.
fn targets(runs: &[Run]) -> String {
    let find = |workload: Workload, floor: bool| {
        runs.iter()
            .find(|r| r.workload == workload && r.clients == 8 && r.floor == floor)
    };
    let mut out = String::from("\nTargets (MCP, 8 clients):\n\n");
    for (workload, pocketbase, ts_sdk) in [
        (Workload::Create, 2400.0, 1900.0),
        (Workload::List, 1500.0, 1300.0),
    ] {
        let (Some(mcp), Some(floor)) = (find(workload, false), find(workload, true)) else {
            continue;
        };
        let ops = mcp.ops_per_sec();
        let yes = |ok: bool| if ok { "met" } else { "NOT met" };
        out.push_str(&format!(
            "- {}: {:.0} ops/s; ≥ 2× PocketBase ({:.0}): {}; ≥ 2× TypeScript-SDK MCP server ({:.0}): {}; ≥ 25 % of floor ({:.0}): {} ({:.1} %); p99 {:.2} ms < 20 ms: {}\n",
            workload.name(),
            ops,
            2.0 * pocketbase,
            yes(ops >= 2.0 * pocketbase),
            2.0 * ts_sdk,
            yes(ops >= 2.0 * ts_sdk),
            0.25 * floor.ops_per_sec(),
            yes(ops >= 0.25 * floor.ops_per_sec()),
            100.0 * ops / floor.ops_per_sec(),
            mcp.percentile(99),
            yes(mcp.percentile(99) < 20.0),
        ));
    }
    let slow: Vec<_> = runs
        .iter()
        .filter(|r| !r.floor && r.clients == 8 && r.percentile(99) >= 20.0)
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
            bars: [false, true]
                .into_iter()
                .map(|floor| {
                    runs.iter()
                        .find(|r| r.workload == *workload && r.clients == 8 && r.floor == floor)
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
    let stack = Stack::start(false, |apps| copy_tree(&source, &apps.join(APP)));
    let mcp = Arc::new(stack.mcp(APP));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    let mut runs = Vec::new();
    // MCP: seed (unmeasured), then every workload at 1 and 8 clients.
    let mcp_fixture = runtime.block_on(async {
        for p in 0..PROJECTS {
            mcp.call(
                true,
                "app__time_sheet_entry__projects__create",
                json!({"values": {"name": format!("Project {p}")}, "idempotencyKey": format!("project-{p}")}),
            )
            .await
            .expect("seed a project");
        }
        let ids = seed_mcp(&mcp, limits.seed_entries).await;
        Arc::new(Fixture::new(ids))
    });
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

    // Order: per workload, per clients, MCP then floor.
    let mut ordered = Vec::new();
    for workload in WORKLOADS {
        for clients in [1, 8] {
            for floor in [false, true] {
                if let Some(i) = runs.iter().position(|r| {
                    r.workload == workload && r.clients == clients && r.floor == floor
                }) {
                    ordered.push(runs.swap_remove(i));
                }
            }
        }
    }
    let report = format!(
        "{}{}",
        table(&ordered, mode, limits.seed_entries),
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
