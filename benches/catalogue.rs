//! `tools/list` against the number of apps a user can use (10, 100, 1,000),
//! and how long studio-core takes to discover and validate that many packages
//! at start. Each size gets a fresh state folder with copies of the `hello`
//! fixture, a staff user who exists before the first discovery (so holds
//! `manage` on every app), and the real data-worker, studio-core and
//! mcp-gateway on loopback. Run with `cargo bench --bench catalogue`
//! (`-- --quick` for 10 and 100 only); prints a Markdown table and writes it,
//! with `tools-list.png` (p50 and p99 against the number of apps), to
//! `$CARGO_TARGET_DIR/bench-results/catalogue-<UTC timestamp>/`.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::fixture::{Staff, http_client, start_core, start_gateway, start_worker, stop};
use common::report::{Axis, COLOURS, Series, line_chart, ms, percentile, short_number};
use sasha_service::identity::DevPki;
use serde_json::{Value, json};

/// `tools/list` requests measured per size, after five to warm up.
const LISTS: usize = 40;

fn copy_package(from: &Path, to: &Path, id: &str) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_package(&entry.path(), &target, id);
        } else if entry.file_name() == "APP.md" {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            std::fs::write(target, text.replacen("id: hello", &format!("id: {id}"), 1)).unwrap();
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// One size: `(startup until ready, tools listed, sorted tools/list latencies)`.
fn measure(apps: usize, runtime: &tokio::runtime::Runtime) -> (Duration, usize, Vec<Duration>) {
    let state = tempfile::tempdir().unwrap();
    let (pki, _) = DevPki::ensure(&state.path().join("certs")).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packages/valid/hello");
    for n in 0..apps {
        let id = format!("app-{n:04}");
        copy_package(&fixture, &state.path().join("docs/apps").join(&id), &id);
    }
    let staff = Staff::create(state.path());
    let off = ("SASHA_BUNDLED_APPS", "off".to_owned());
    let (worker, data_url) = start_worker(state.path(), &pki);
    let started = Instant::now();
    let (core, core_url) = start_core(state.path(), &pki, &data_url, &[off]);
    let startup = started.elapsed();
    let (gateway, url) = start_gateway(state.path(), &pki, &data_url, core_url);
    let token = staff.token();
    let (tools, mut samples) = runtime.block_on(async {
        let http = http_client();
        let list = || async {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            }}});
            let started = Instant::now();
            let response = http
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/list")
                .bearer_auth(&token)
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            let reply: Value = response.json().await.unwrap();
            (
                started.elapsed(),
                reply["result"]["tools"].as_array().map_or(0, Vec::len),
            )
        };
        let mut tools = 0;
        for _ in 0..5 {
            tools = list().await.1;
        }
        let mut samples = Vec::with_capacity(LISTS);
        for _ in 0..LISTS {
            samples.push(list().await.0);
        }
        (tools, samples)
    });
    for mut child in [worker, core, gateway] {
        stop(&mut child);
    }
    samples.sort();
    (startup, tools, samples)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: &[usize] = if quick { &[10, 100] } else { &[10, 100, 1000] };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut table = String::from(
        "| apps | studio-core ready after | tools listed | tools/list p50 | p99 | max |\n|---|---|---|---|---|---|\n",
    );
    let mut p50 = Vec::new();
    let mut p99 = Vec::new();
    for &apps in sizes {
        let (startup, tools, samples) = measure(apps, &runtime);
        p50.push((apps as f64, ms(percentile(&samples, 0.5))));
        p99.push((apps as f64, ms(percentile(&samples, 0.99))));
        table.push_str(&format!(
            "| {apps} | {:.0} ms | {tools} | {:.2} ms | {:.2} ms | {:.2} ms |\n",
            ms(startup),
            ms(percentile(&samples, 0.5)),
            ms(percentile(&samples, 0.99)),
            ms(*samples.last().unwrap()),
        ));
        eprintln!("bench: catalogue: {apps} apps done");
    }
    println!("{table}");
    let dir = common::report::results_dir("catalogue-");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("results.md"), &table).unwrap();
    let series = [
        Series {
            label: "p50".into(),
            colour: COLOURS[0],
            dashed: false,
            points: p50,
        },
        Series {
            label: "p99".into(),
            colour: COLOURS[1],
            dashed: true,
            points: p99,
        },
    ];
    let chart = dir.join("tools-list.png");
    if let Err(error) = line_chart(
        &chart,
        "tools/list latency against the number of apps (one client)",
        &Axis {
            label: "apps the user can use (log scale)",
            log: true,
            format: short_number,
            ticks: &[],
        },
        &Axis {
            label: "ms",
            log: false,
            format: short_number,
            ticks: &[],
        },
        &series,
    ) {
        eprintln!("bench: could not draw {}: {error}", chart.display());
    }
    println!("results: {}", dir.display());
}
