//! Cost curves: how the platform's costs grow with what it holds.
//!
//! 1. List and aggregate latency (MCP `tools/call`, one client) against the
//!    number of rows in the Time Sheet app's `entries` table (10k, 100k, 1M),
//!    with the declared `entries_by_owner_date` index and, in a copy of the
//!    package without it, without. The rows are written straight into
//!    data-worker's SQLite file, unmeasured, after one real MCP create has
//!    migrated it; the table grows 10k → 100k → 1M.
//! 2. Package validation and assembly time (`validate_dir`, `validate_source`)
//!    in process against package size, 5 to 64 files and 8 KiB to 960 KiB.
//! 3. Resident memory (VmRSS) of every role idle, at its peak under 8 mixed
//!    clients, and after the load.
//!
//! Run with `cargo bench --bench curves [-- --quick]` (`--quick`: 10k and 100k
//! rows only, fewer samples, 3 s of load). Prints Markdown tables and writes
//! them, with one PNG chart per curve, to
//! `$CARGO_TARGET_DIR/bench-results/curves-<UTC timestamp>/`.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::fixture::{Stack, date, day, mix, walk};
use common::mcp::Mcp;
use common::report::{
    Axis, BarChart, BarGroup, BarLayout, COLOURS, Series, bar_chart, line_chart, ms, percentile,
    short_bytes, short_number,
};
use plotters::style::RGBColor;
use serde_json::{Value, json};

/// The Time Sheet app as bundled, with its declared index.
const APP: &str = "time-sheet-entry";
/// The same package without `CREATE INDEX entries_by_owner_date`.
const NO_INDEX_APP: &str = "time-sheet-noindex";
const INDEX_STATEMENT: &str = "CREATE INDEX entries_by_owner_date ON entries (created_by, date);";
/// Seeded rows belong to this many owners; the measuring user is one of them.
const OWNERS: u64 = 20;
const PROJECTS: usize = 5;
/// Seeded dates cover this many weeks (two years) from day 0.
const WEEKS: u64 = 104;

/// Day 0 of the seeded range, a Monday.
const DAY_0: time::Date = date(2025, time::Month::January, 6);

/// Copies the package in `from` to `to`, passing each file's text (by
/// package-relative path) through `edit`.
fn copy_package(from: &Path, to: &Path, edit: &dyn Fn(&str, String) -> String) {
    for file in walk(from) {
        let relative = file.strip_prefix(from).unwrap();
        let target = to.join(relative);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(target, edit(relative.to_str().unwrap(), text)).unwrap();
    }
}

fn rss_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The machine's 1-minute load average, to judge whether something else ran.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| String::from("?"))
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

// ---------------------------------------------------------------------------
// The roles.

/// The stack with the Time Sheet app (and, when asked, its copy without the
/// index) in the docs root, and, when asked, edge-sandbox.
fn start_stack(without_index: bool, edge: bool) -> Stack {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps").join(APP);
    Stack::start(edge, |apps| {
        copy_package(&source, &apps.join(APP), &|_, text| text);
        if without_index {
            // The same package under another folder and id (they must be equal),
            // without the index in the migration and in schema.sql (which must
            // state what the migrations build).
            copy_package(&source, &apps.join(NO_INDEX_APP), &|path, text| {
                let edited = match path {
                    "APP.md" => text
                        .replacen(&format!("id: {APP}"), &format!("id: {NO_INDEX_APP}"), 1)
                        .replacen(
                            "name: Time Sheet Entry",
                            "name: Time Sheet Entry (no index)",
                            1,
                        ),
                    "schema.sql" | "migrations/001-initial.sql" => {
                        text.replace(&format!("{INDEX_STATEMENT}\n"), "")
                    }
                    _ => return text,
                };
                assert_ne!(edited, text, "{path} of {APP} no longer has what is edited");
                edited
            });
        }
    })
}

/// The MCP tool `app__<app>__<suffix>`.
fn tool(app: &str, suffix: &str) -> String {
    format!("app__{}__{suffix}", app.replace('-', "_"))
}

/// Creates the projects through MCP (from the Studio page).
async fn create_projects(mcp: &Mcp) {
    for p in 0..PROJECTS {
        mcp.call(
            true,
            &tool(&mcp.app, "projects__create"),
            json!({"values": {"name": format!("Project {p}")}, "idempotencyKey": format!("project-{p}")}),
        )
        .await
        .expect("create a project");
    }
}

// ---------------------------------------------------------------------------
// Curve 1: list and aggregate against table size, with and without the index.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Read {
    List,
    Aggregate,
}

impl Read {
    fn name(self) -> &'static str {
        match self {
            Read::List => "list",
            Read::Aggregate => "aggregate",
        }
    }
}

/// The arguments of read `n`: one week (Monday to Sunday, `gte`/`lte` on
/// `date`) of the seeded two years, as `benches/load.rs` reads.
fn read_arguments(read: Read, n: u64) -> Value {
    let week = (mix(n) % WEEKS) as i64;
    let range = json!([
        {"field": "date", "operator": "gte", "value": day(DAY_0, week * 7)},
        {"field": "date", "operator": "lte", "value": day(DAY_0, week * 7 + 6)},
    ]);
    match read {
        Read::List => {
            json!({"where": range, "orderBy": [{"field": "date", "direction": "asc"}], "limit": 50})
        }
        Read::Aggregate => {
            json!({"where": range, "groupBy": ["project"], "metrics": [{"as": "hours", "sum": "hours"}]})
        }
    }
}

/// How many rows (list) or groups (aggregate) a result holds.
fn result_size(result: &Value) -> usize {
    ["rows", "groups"]
        .iter()
        .find_map(|key| result[*key].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// One measured cell of curve 1.
struct ReadSample {
    rows: usize,
    read: Read,
    indexed: bool,
    latencies: Vec<Duration>,
    errors: usize,
    returned: f64,
}

/// What [`sample_reads`] measured for one app.
#[derive(Default)]
struct Measured {
    latencies: Vec<Duration>,
    errors: usize,
    returned: usize,
}

/// `warm` unmeasured then `calls` measured sequential calls of `read` on each
/// client, alternating between them call by call (and which goes first), so
/// both see the same machine; call `n` reads the same week on both.
async fn sample_reads(clients: &[Mcp], read: Read, warm: usize, calls: usize) -> Vec<Measured> {
    let names: Vec<String> = clients
        .iter()
        .map(|mcp| tool(&mcp.app, &format!("entries__{}", read.name())))
        .collect();
    for n in 0..warm {
        for (mcp, name) in clients.iter().zip(&names) {
            let _ = mcp
                .call(false, name, read_arguments(read, 1_000_000 + n as u64))
                .await;
        }
    }
    let mut measured: Vec<Measured> = clients.iter().map(|_| Measured::default()).collect();
    for n in 0..calls {
        for k in 0..clients.len() {
            let i = (k + n) % clients.len();
            let started = Instant::now();
            match clients[i]
                .call(false, &names[i], read_arguments(read, n as u64))
                .await
            {
                Some(result) => {
                    measured[i].latencies.push(started.elapsed());
                    measured[i].returned += result_size(&result);
                }
                None => measured[i].errors += 1,
            }
        }
    }
    for m in &mut measured {
        m.latencies.sort();
    }
    measured
}

/// Grows `entries` in `path` to `target` rows in one transaction, next to the
/// running data-worker (WAL), then checkpoints the WAL into the database.
/// Row `i` is the same in every database: owner, date, project and hours come
/// from `mix(i)`; owner 0 is the measuring user.
fn grow(path: &Path, user: &str, target: usize) -> (usize, Duration) {
    let started = Instant::now();
    let mut conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal", "data-worker keeps app databases in WAL mode");
    conn.execute_batch("PRAGMA foreign_keys = ON;").unwrap();
    let projects: Vec<i64> = conn
        .prepare("SELECT id FROM projects ORDER BY id")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(projects.len(), PROJECTS);
    let existing: usize = conn
        .query_row("SELECT COUNT(*) FROM entries", [], |row| {
            row.get::<_, i64>(0)
        })
        .unwrap() as usize;
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO entries (date, project, hours, note, created_by, _sasha_version) \
                 VALUES (?1, ?2, ?3, 'seed', ?4, 1)",
            )
            .unwrap();
        for i in existing..target {
            let r = mix(i as u64);
            let owner = r % OWNERS;
            let owner = if owner == 0 {
                user.to_owned()
            } else {
                format!("seed-owner-{owner:02}")
            };
            let date = day(DAY_0, ((r >> 8) % (WEEKS * 7)) as i64);
            let project = projects[((r >> 24) % PROJECTS as u64) as usize];
            let hours = 0.5 * (1 + (r >> 32) % 16) as f64;
            insert
                .execute(rusqlite::params![date, project, hours, owner])
                .unwrap();
        }
    }
    tx.commit().unwrap();
    let (busy, _, _): (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .unwrap();
    if busy != 0 {
        eprintln!(
            "bench: the WAL of {} could not be fully checkpointed",
            path.display()
        );
    }
    (target.saturating_sub(existing), started.elapsed())
}

fn curve_rows(quick: bool, runtime: &tokio::runtime::Runtime) -> (Vec<ReadSample>, String) {
    let sizes: &[usize] = if quick {
        &[10_000, 100_000]
    } else {
        &[10_000, 100_000, 1_000_000]
    };
    let (warm, calls) = if quick { (3, 20) } else { (5, 60) };
    let stack = start_stack(true, false);
    let apps = [(APP, true), (NO_INDEX_APP, false)];
    let clients: Vec<Mcp> = apps.iter().map(|(app, _)| stack.mcp(app)).collect();
    // One real create per app migrates its database (schema, `_sasha_version`,
    // the platform's tables) exactly as data-worker does; the same first row in
    // both.
    let user = runtime.block_on(async {
        let mut user = String::new();
        for mcp in &clients {
            create_projects(mcp).await;
            let row = mcp
                .call(
                    true,
                    &tool(&mcp.app, "entries__create"),
                    json!({"values": {"date": day(DAY_0, 0), "project": 1, "hours": 1.0, "note": "first"}, "idempotencyKey": "first"}),
                )
                .await
                .expect("create the first entry");
            user = row["created_by"].as_str().expect("created_by").to_owned();
        }
        user
    });
    let mut samples = Vec::new();
    let mut seeding = String::from(
        "| rows | database | rows added | seeding time | database file |\n|---|---|---|---|---|\n",
    );
    for &size in sizes {
        for (app, indexed) in apps {
            let path = stack.app_database(app);
            assert!(
                path.exists(),
                "data-worker keeps {app} in {}",
                path.display()
            );
            let (added, took) = grow(&path, &user, size);
            let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
            seeding.push_str(&format!(
                "| {size} | {} | {added} | {:.1} s | {:.1} MiB |\n",
                if indexed { "index" } else { "no index" },
                took.as_secs_f64(),
                bytes as f64 / (1024.0 * 1024.0)
            ));
            eprintln!(
                "bench: curves: {app} grown to {size} rows (+{added} in {:.1} s)",
                took.as_secs_f64()
            );
        }
        runtime.block_on(async {
            // Both databases hold the same rows, so both answer the same.
            for read in [Read::List, Read::Aggregate] {
                let name = |mcp: &Mcp| tool(&mcp.app, &format!("entries__{}", read.name()));
                let with = clients[0]
                    .call(false, &name(&clients[0]), read_arguments(read, 7))
                    .await;
                let without = clients[1]
                    .call(false, &name(&clients[1]), read_arguments(read, 7))
                    .await;
                assert!(with.is_some(), "{} with the index failed", read.name());
                assert_eq!(with, without, "{} differs without the index", read.name());
            }
            for read in [Read::List, Read::Aggregate] {
                let measured = sample_reads(&clients, read, warm, calls).await;
                for (m, (_, indexed)) in measured.into_iter().zip(apps) {
                    eprintln!(
                        "bench: curves: {size} rows, {} {}: p50 {:.2} ms ({} errors)",
                        read.name(),
                        if indexed { "index" } else { "no index" },
                        m.latencies
                            .first()
                            .map_or(f64::NAN, |_| ms(percentile(&m.latencies, 0.5))),
                        m.errors,
                    );
                    samples.push(ReadSample {
                        rows: size,
                        read,
                        indexed,
                        returned: m.returned as f64 / m.latencies.len().max(1) as f64,
                        latencies: m.latencies,
                        errors: m.errors,
                    });
                }
            }
        });
    }
    drop(stack);
    (samples, seeding)
}

fn rows_table(samples: &[ReadSample], calls: usize) -> String {
    let mut out = format!(
        "MCP `tools/call`, one client, {calls} calls per cell after warm-up, alternating call by call between the app with and without the index; each reads one week of one owner's rows (1 of {OWNERS} owners, {WEEKS} weeks)\n\n\
         | rows | operation | index | p50 ms | p99 ms | max ms | errors | rows / groups returned | p50 no index / index |\n\
         |---|---|---|---|---|---|---|---|---|\n"
    );
    for sample in samples {
        let ratio = if sample.indexed {
            String::new()
        } else {
            samples
                .iter()
                .find(|s| s.indexed && s.rows == sample.rows && s.read == sample.read)
                .map_or(String::new(), |with| {
                    format!(
                        "{:.1}×",
                        ms(percentile(&sample.latencies, 0.5))
                            / ms(percentile(&with.latencies, 0.5))
                    )
                })
        };
        let cell = |p: f64| {
            if sample.latencies.is_empty() {
                String::from("–")
            } else {
                format!("{:.2}", ms(percentile(&sample.latencies, p)))
            }
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} | {ratio} |\n",
            sample.rows,
            sample.read.name(),
            if sample.indexed { "yes" } else { "no" },
            cell(0.5),
            cell(0.99),
            cell(1.0),
            sample.errors,
            sample.returned,
        ));
    }
    out
}

fn rows_chart(samples: &[ReadSample], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut series = Vec::new();
    for (read, colour) in [(Read::List, COLOURS[0]), (Read::Aggregate, COLOURS[1])] {
        for indexed in [true, false] {
            series.push(Series {
                label: format!(
                    "{} {}",
                    read.name(),
                    if indexed {
                        "with index"
                    } else {
                        "without index"
                    }
                ),
                colour,
                dashed: !indexed,
                points: samples
                    .iter()
                    .filter(|s| s.read == read && s.indexed == indexed && !s.latencies.is_empty())
                    .map(|s| (s.rows as f64, ms(percentile(&s.latencies, 0.5))))
                    .collect(),
            });
        }
    }
    line_chart(
        path,
        "entries list / aggregate p50 through MCP against table size",
        &Axis {
            label: "rows in entries (log scale)",
            log: true,
            format: short_number,
            ticks: &[],
        },
        &Axis {
            label: "p50 ms (log scale)",
            log: true,
            format: short_number,
            ticks: &[],
        },
        &series,
    )
}

// ---------------------------------------------------------------------------
// Curve 2: package validation and assembly against package size.

/// A valid package of `files` files and about `bytes` bytes in `dir` (whose
/// name is its id): the `hello` fixture (5 files) with scripts, stylesheets
/// and SVG icons added, every one referenced from `index.html`, and sections
/// of text in the page.
fn build_package(dir: &Path, files: usize, bytes: usize) {
    let id = dir.file_name().unwrap().to_str().unwrap().to_owned();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packages/valid/hello");
    copy_package(&fixture, dir, &|path, text| {
        if path == "APP.md" {
            text.replacen("id: hello", &format!("id: {id}"), 1)
        } else {
            text
        }
    });
    let base: usize = walk(dir)
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len() as usize)
        .sum();
    let extra = files.saturating_sub(5);
    // SVG icons stay small: assets are inlined as base64, and the assembled
    // document (with the runtime) must stay under 1 MiB.
    let svgs = (extra / 3).min(20);
    let stylesheets = (extra - svgs) / 2;
    let scripts = extra - svgs - stylesheets;
    let svg_bytes = 1500;
    let budget = bytes.saturating_sub(base + svgs * svg_bytes);
    let page_budget = budget * 15 / 100;
    let (script_bytes, style_bytes) = if extra == 0 {
        (budget * 60 / 100, budget * 25 / 100)
    } else {
        (
            (budget - page_budget) * 60 / 100 / scripts.max(1),
            (budget - page_budget) * 40 / 100 / stylesheets.max(1),
        )
    };
    let script = |name: &str, size: usize| {
        let mut js = String::new();
        let mut f = 0;
        while js.len() < size {
            js.push_str(&format!(
                "function {name}_{f}(rows) {{\n  const out = [];\n  for (const row of rows) {{ if (row.amount > {f}) out.push({{ id: row.id, label: `#${{row.id}}` }}); }}\n  return out;\n}}\n"
            ));
            f += 1;
        }
        js
    };
    let stylesheet = |name: &str, size: usize| {
        let mut css = String::new();
        let mut r = 0;
        while css.len() < size {
            css.push_str(&format!(".{name}-{r} {{ margin: {r}px; padding: 0 {}px; color: var(--sasha-color-text, #111); }}\n@media (min-width: {r}0px) {{ .{name}-{r} {{ display: grid; }} }}\n", r % 17));
            r += 1;
        }
        css
    };
    let mut links = String::new();
    let mut tags = String::new();
    let mut sections = String::new();
    if extra == 0 {
        let mut js = std::fs::read_to_string(dir.join("app.js")).unwrap();
        js.push_str(&script("helper", script_bytes));
        std::fs::write(dir.join("app.js"), js).unwrap();
        let mut css = std::fs::read_to_string(dir.join("styles.css")).unwrap();
        css.push('\n');
        css.push_str(&stylesheet("c", style_bytes));
        std::fs::write(dir.join("styles.css"), css).unwrap();
    }
    for i in 0..scripts {
        std::fs::write(
            dir.join(format!("lib{i:02}.js")),
            script(&format!("helper{i}"), script_bytes),
        )
        .unwrap();
        tags.push_str(&format!("  <script src=\"lib{i:02}.js\"></script>\n"));
    }
    for i in 0..stylesheets {
        std::fs::write(
            dir.join(format!("s{i:02}.css")),
            stylesheet(&format!("c{i}"), style_bytes),
        )
        .unwrap();
        links.push_str(&format!(
            "\n  <link rel=\"stylesheet\" href=\"s{i:02}.css\">"
        ));
    }
    for i in 0..svgs {
        let mut svg =
            String::from("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 100 100\">");
        let mut p = 0;
        while svg.len() < svg_bytes - 10 {
            svg.push_str(&format!(
                "<circle cx=\"{p}\" cy=\"{i}\" r=\"3\" fill=\"#1a4a8a\"/>"
            ));
            p += 1;
        }
        svg.push_str("</svg>\n");
        std::fs::write(dir.join(format!("assets/icon{i:02}.svg")), svg).unwrap();
        sections.push_str(&format!(
            "  <section><h2>Icon {i}</h2><img src=\"assets/icon{i:02}.svg\" alt=\"\" width=\"24\" height=\"24\"></section>\n"
        ));
    }
    let mut part = 0;
    while sections.len() < page_budget {
        sections.push_str(&format!(
            "  <section><h2>Part {part}</h2><p>{}</p></section>\n",
            "Hours are logged per day and project; totals follow. ".repeat(12)
        ));
        part += 1;
    }
    let index = std::fs::read_to_string(dir.join("index.html"))
        .unwrap()
        .replace(
            "<link rel=\"stylesheet\" href=\"styles.css\">",
            &format!("<link rel=\"stylesheet\" href=\"styles.css\">{links}"),
        )
        .replace("  </main>", &format!("{sections}  </main>"))
        .replace(
            "  <script src=\"app.js\"></script>",
            &format!("{tags}  <script src=\"app.js\"></script>"),
        );
    std::fs::write(dir.join("index.html"), index).unwrap();
}

/// One measured package size.
struct PackageSample {
    label: String,
    files: usize,
    bytes: usize,
    assembled: usize,
    validate_dir: Duration,
    in_memory: Duration,
}

fn measure_package(dir: &Path, label: &str, runs: usize) -> PackageSample {
    use sasha_package::validate::{validate_dir, validate_source};
    let first = validate_dir(dir);
    let package = first
        .package
        .as_ref()
        .unwrap_or_else(|| panic!("{label} is not valid: {:#?}", first.diagnostics));
    let mut diagnostics = sasha_package::Diagnostics::new();
    let source = sasha_package::source::read_package(dir, &mut diagnostics);
    let folder = dir.file_name().unwrap().to_str().unwrap().to_owned();
    let files = source.files.len();
    let bytes = source.files.values().map(String::len).sum();
    let mut on_disk = Vec::with_capacity(runs);
    let mut in_memory = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let validation = validate_dir(dir);
        on_disk.push(started.elapsed());
        assert!(validation.package.is_some());
        let copy = source.clone();
        let started = Instant::now();
        let validation = validate_source(&folder, copy);
        in_memory.push(started.elapsed());
        assert!(validation.package.is_some());
    }
    on_disk.sort();
    in_memory.sort();
    PackageSample {
        label: label.to_owned(),
        files,
        bytes,
        assembled: package.resource.html.len(),
        validate_dir: percentile(&on_disk, 0.5),
        in_memory: percentile(&in_memory, 0.5),
    }
}

fn curve_packages(quick: bool) -> Vec<PackageSample> {
    let runs = if quick { 5 } else { 21 };
    let temp = tempfile::tempdir().unwrap();
    let mut samples = Vec::new();
    for (files, bytes) in [
        (5, 8 << 10),
        (8, 32 << 10),
        (16, 128 << 10),
        (32, 256 << 10),
        (64, 512 << 10),
        (64, 960 << 10),
    ] {
        let id = format!("package-{files}-files-{}k", bytes >> 10);
        let dir = temp.path().join(&id);
        build_package(&dir, files, bytes);
        samples.push(measure_package(&dir, &id, runs));
        eprintln!("bench: curves: {id} measured");
    }
    // The Time Sheet app as bundled, for reference (a data app: schema,
    // migration and two actions).
    let dir = temp.path().join(APP);
    copy_package(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("apps").join(APP),
        &dir,
        &|_, text| text,
    );
    samples.push(measure_package(&dir, APP, runs));
    samples
}

fn packages_table(samples: &[PackageSample], runs: usize) -> String {
    let mut out = format!(
        "In process, median of {runs} runs after one unmeasured\n\n\
         | package | files | source bytes | assembled bytes | `validate_dir` (read, validate, assemble) ms | in memory (`validate_source`) ms |\n\
         |---|---|---|---|---|---|\n"
    );
    for s in samples {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.2} | {:.2} |\n",
            s.label,
            s.files,
            s.bytes,
            s.assembled,
            ms(s.validate_dir),
            ms(s.in_memory)
        ));
    }
    out
}

/// 8 KiB to 1 MiB in powers of two.
const BYTE_TICKS: [f64; 8] = [
    8192.0, 16384.0, 32768.0, 65536.0, 131072.0, 262144.0, 524288.0, 1048576.0,
];

fn packages_chart(
    samples: &[PackageSample],
    path: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let curve: Vec<&PackageSample> = samples.iter().filter(|s| s.label != APP).collect();
    let series = [
        Series {
            label: "validate_dir (read, validate, assemble)".into(),
            colour: COLOURS[0],
            dashed: false,
            points: curve
                .iter()
                .map(|s| (s.bytes as f64, ms(s.validate_dir)))
                .collect(),
        },
        Series {
            label: "validate_source (files already in memory)".into(),
            colour: COLOURS[2],
            dashed: true,
            points: curve
                .iter()
                .map(|s| (s.bytes as f64, ms(s.in_memory)))
                .collect(),
        },
    ];
    line_chart(
        path,
        "Package validation and assembly time against package size (median)",
        &Axis {
            label: "total source bytes (log scale; 5, 8, 16, 32, 64, 64 files)",
            log: true,
            format: short_bytes,
            ticks: &BYTE_TICKS,
        },
        &Axis {
            label: "ms (log scale)",
            log: true,
            format: short_number,
            ticks: &[],
        },
        &series,
    )
}

// ---------------------------------------------------------------------------
// Curve 3: resident memory idle and under load.

/// One process's resident memory.
struct Memory {
    role: &'static str,
    idle_kib: u64,
    peak_kib: u64,
    after_kib: u64,
    high_water_kib: u64,
}

struct MemoryRun {
    memory: Vec<Memory>,
    creates: usize,
    lists: usize,
    errors: usize,
    load: Duration,
    samples: usize,
}

fn curve_memory(quick: bool, runtime: &tokio::runtime::Runtime) -> MemoryRun {
    let load = Duration::from_secs(if quick { 3 } else { 10 });
    let settle = Duration::from_secs(2);
    let stack = start_stack(false, true);
    let pids: Vec<(&'static str, u32)> = stack
        .roles
        .iter()
        .map(|(role, c)| (*role, c.id()))
        .collect();
    std::thread::sleep(settle);
    let idle: Vec<u64> = pids
        .iter()
        .map(|(_, pid)| rss_kib(*pid, "VmRSS:").unwrap_or(0))
        .collect();
    let mcp = Arc::new(stack.mcp(APP));
    runtime.block_on(create_projects(&mcp));

    // Sample every 100 ms while 8 clients run.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (stop, pids) = (Arc::clone(&stop), pids.clone());
        std::thread::spawn(move || {
            let mut peaks = vec![0u64; pids.len()];
            let mut samples = 0;
            while !stop.load(Ordering::Relaxed) {
                for (peak, (_, pid)) in peaks.iter_mut().zip(&pids) {
                    *peak = (*peak).max(rss_kib(*pid, "VmRSS:").unwrap_or(0));
                }
                samples += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            (peaks, samples)
        })
    };
    let creates = Arc::new(AtomicUsize::new(0));
    let lists = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    runtime.block_on(async {
        let mut tasks = Vec::new();
        for client in 0..8u64 {
            let (mcp, creates, lists, errors) = (
                Arc::clone(&mcp),
                Arc::clone(&creates),
                Arc::clone(&lists),
                Arc::clone(&errors),
            );
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while started.elapsed() < load {
                    let key = client * 1_000_000 + n;
                    let ok = if (client + n).is_multiple_of(2) {
                        let values = json!({"date": day(DAY_0, (mix(key) % (WEEKS * 7)) as i64), "project": (key % PROJECTS as u64) + 1, "hours": 1.5, "note": "load"});
                        let ok = mcp
                            .call(true, &tool(APP, "entries__create"), json!({"values": values, "idempotencyKey": format!("memory-{key}")}))
                            .await
                            .is_some();
                        if ok {
                            creates.fetch_add(1, Ordering::Relaxed);
                        }
                        ok
                    } else {
                        let ok = mcp
                            .call(false, &tool(APP, "entries__list"), read_arguments(Read::List, key))
                            .await
                            .is_some();
                        if ok {
                            lists.fetch_add(1, Ordering::Relaxed);
                        }
                        ok
                    };
                    if !ok {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    n += 1;
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (peaks, samples) = sampler.join().unwrap();
    std::thread::sleep(settle);
    let memory = pids
        .iter()
        .enumerate()
        .map(|(i, (role, pid))| Memory {
            role,
            idle_kib: idle[i],
            peak_kib: peaks[i],
            after_kib: rss_kib(*pid, "VmRSS:").unwrap_or(0),
            high_water_kib: rss_kib(*pid, "VmHWM:").unwrap_or(0),
        })
        .collect();
    drop(stack);
    MemoryRun {
        memory,
        creates: creates.load(Ordering::Relaxed),
        lists: lists.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        load: elapsed,
        samples,
    }
}

fn memory_table(run: &MemoryRun) -> String {
    let mut out = format!(
        "VmRSS from /proc/<pid>/status: idle 2 s after readiness; peak of {} samples (every 100 ms) while 8 clients ran {:.1} s of mixed creates (Studio page) and lists (bearer token): {} creates + {} lists = {:.0} ops/s, {} errors; after load 2 s later; VmHWM is the process's own high-water mark\n\n\
         | process | idle MiB | peak under load MiB | after load MiB | VmHWM MiB |\n|---|---|---|---|---|\n",
        run.samples,
        run.load.as_secs_f64(),
        run.creates,
        run.lists,
        (run.creates + run.lists) as f64 / run.load.as_secs_f64(),
        run.errors,
    );
    for m in &run.memory {
        out.push_str(&format!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} |\n",
            m.role,
            mib(m.idle_kib),
            mib(m.peak_kib),
            mib(m.after_kib),
            mib(m.high_water_kib)
        ));
    }
    let total = |f: fn(&Memory) -> u64| mib(run.memory.iter().map(f).sum());
    out.push_str(&format!(
        "| all | {:.1} | {:.1} | {:.1} | {:.1} |\n",
        total(|m| m.idle_kib),
        total(|m| m.peak_kib),
        total(|m| m.after_kib),
        total(|m| m.high_water_kib)
    ));
    out
}

/// Grouped bars per process: idle and peak under load (MiB, linear scale).
fn memory_chart(run: &MemoryRun, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let max = run
        .memory
        .iter()
        .map(|m| mib(m.peak_kib.max(m.idle_kib)))
        .fold(1.0f64, f64::max);
    let step = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        .into_iter()
        .find(|s| max / s <= 8.0)
        .unwrap_or(200.0);
    let ceiling = (max / step).ceil() * step;
    let mut grid = Vec::new();
    let mut tick = 0.0;
    while tick <= ceiling + 1e-9 {
        grid.push((tick, format!("{tick:.0} MiB")));
        tick += step;
    }
    bar_chart(
        path,
        &BarChart {
            title: "Resident memory (VmRSS) per process: idle (grey) and peak under 8 clients of creates and lists (blue)",
            layout: BarLayout {
                margins: (80, 20, 60, 60),
                inset: 0.15,
                grid: RGBColor(225, 225, 225),
                value_label: ((4, -16), 13.0),
                group_label: (10, 15.0),
                title_at: (20, 18),
            },
            colours: &[RGBColor(160, 160, 160), RGBColor(46, 109, 180)],
            grid,
            fraction: &|value: f64| value / ceiling,
            groups: run
                .memory
                .iter()
                .map(|memory| BarGroup {
                    label: memory.role.to_owned(),
                    bars: [memory.idle_kib, memory.peak_kib]
                        .into_iter()
                        .map(|kib| Some((mib(kib), format!("{:.1}", mib(kib)))))
                        .collect(),
                })
                .collect(),
        },
    )
}

// ---------------------------------------------------------------------------

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let mode = if quick { "--quick" } else { "full" };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = common::report::results_dir("curves-");
    std::fs::create_dir_all(&dir).unwrap();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut report = format!("# Cost curves ({mode}; {cores} cores; release build)\n\n");

    eprintln!("bench: curves ({mode}): 1/3 package validation against size");
    let load_packages = load_average();
    let packages = curve_packages(quick);
    eprintln!("bench: curves ({mode}): 2/3 list and aggregate against table size");
    let calls = if quick { 20 } else { 60 };
    let load_rows = load_average();
    let (reads, seeding) = curve_rows(quick, &runtime);
    eprintln!("bench: curves ({mode}): 3/3 resident memory");
    let load_memory = load_average();
    let memory = curve_memory(quick, &runtime);
    let load_end = load_average();
    report.push_str(&format!(
        "Load average (1 min) when each part started: rows {load_rows}, packages {load_packages}, memory {load_memory}; at the end {load_end}.\n\n"
    ));

    report.push_str("## List and aggregate latency against table size\n\n");
    report.push_str(&rows_table(&reads, calls));
    report.push_str("\nSeeding (unmeasured; straight into data-worker's SQLite file, one transaction per step, then a WAL checkpoint):\n\n");
    report.push_str(&seeding);
    report.push_str("\n## Package validation and assembly against package size\n\n");
    report.push_str(&packages_table(&packages, if quick { 5 } else { 21 }));
    report.push_str("\n## Resident memory idle and under load\n\n");
    report.push_str(&memory_table(&memory));
    println!("{report}");
    std::fs::write(dir.join("results.md"), &report).unwrap();
    for (name, drawn) in [
        ("rows.png", rows_chart(&reads, &dir.join("rows.png"))),
        (
            "packages.png",
            packages_chart(&packages, &dir.join("packages.png")),
        ),
        ("memory.png", memory_chart(&memory, &dir.join("memory.png"))),
    ] {
        if let Err(error) = drawn {
            eprintln!("bench: could not draw {name}: {error}");
        }
    }
    println!("results: {}", dir.display());
}
