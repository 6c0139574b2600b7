//! `tools/list` against the number of apps a user can use (10, 100, 1,000),
//! and how long studio-core takes to discover and validate that many packages
//! at start. Each size gets a fresh state folder with copies of the `hello`
//! fixture, a staff user who exists before the first discovery (so holds
//! `manage` on every app), and the real data-worker, studio-core and
//! mcp-gateway on loopback. Run with `cargo bench --bench catalogue`
//! (`-- --quick` for 10 and 100 only); prints a Markdown table.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::start_role;
use sasha_proto::Role;
use sasha_proto::identity::DevPki;
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

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
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
    let store = studio_core::store::Store::open(&state.path().join("core.sqlite")).unwrap();
    let user = store
        .create_user(
            "bench",
            studio_core::store::UserRole::Staff,
            "correct horse battery",
        )
        .unwrap();
    let off = ("SASHA_BUNDLED_APPS", "off".to_owned());
    let (worker, worker_listeners) = start_role(Role::DataWorker, state.path(), &pki, &[]);
    let data_url = format!("https://{}", worker_listeners["grpc"].as_str().unwrap());
    let started = Instant::now();
    let (core, core_listeners) = start_role(
        Role::StudioCore,
        state.path(),
        &pki,
        &[("SASHA_DATA_GRPC_URL", data_url.clone()), off],
    );
    let startup = started.elapsed();
    let core_url = format!("https://{}", core_listeners["grpc"].as_str().unwrap());
    let (gateway, gateway_listeners) = start_role(
        Role::McpGateway,
        state.path(),
        &pki,
        &[
            ("SASHA_DATA_GRPC_URL", data_url),
            ("SASHA_CORE_GRPC_URL", core_url),
        ],
    );
    let url = format!("http://{}/mcp", gateway_listeners["http"].as_str().unwrap());
    let scopes = [
        studio_core::store::Scope::ChatUse,
        studio_core::store::Scope::AppsInvoke,
    ]
    .into_iter()
    .collect();
    let token = store
        .mint_token(
            &user.id,
            studio_core::store::TokenKind::Access,
            &scopes,
            None,
        )
        .unwrap();
    let (tools, mut samples) = runtime.block_on(async {
        // studio-core's rustls backend for reqwest has no default provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::new();
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
        let _ = child.kill();
        let _ = child.wait();
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
    for &apps in sizes {
        let (startup, tools, samples) = measure(apps, &runtime);
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
}
