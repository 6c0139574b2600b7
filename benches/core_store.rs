//! What the PostgreSQL core database and a second studio-core replica cost
//! (issue 46), on the real processes on loopback, in one run:
//!
//! - **SQLite, one replica** (the embedded default), **PostgreSQL, one
//!   replica**, **PostgreSQL, two replicas** (the gateway balancing over both,
//!   as `SASHA_CORE_GRPC_URL` lists them); PostgreSQL is one durable server
//!   of this run (`sasha_testkit::PrivateServer`, fsync on), a fresh database
//!   per configuration.
//! - per configuration: the Studio API (`GET /api/me` with a session, one
//!   client: p50, p99; the session is read from the core database on every
//!   request), and `categories__create` / `categories__list` of expense-log
//!   through MCP from the Studio page (every call authorised by studio-core's
//!   `AuthorizeCall` against the core database) at 1 client (p50, p99) and
//!   at 8 clients (ops/s, p50, p99).
//!
//!   cargo bench --bench core_store             # 400 c1, 8×150 c8
//!   cargo bench --bench core_store -- --quick  # 60 c1, 8×20 c8
//!
//! Needs PostgreSQL 15 (`scripts/test.sh` installs it). Nothing here is
//! asserted; it prints a Markdown report, also written to results.md under
//! `$CARGO_TARGET_DIR/bench-results/core-store-<UTC time>/`.

mod common;

use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::fixture::{Staff, copy_tree, start_gateway, stop};
use common::mcp::Mcp;
use common::report::{ms, percentile, results_dir};
use common::start_role;
use sasha_service::Role;
use sasha_service::identity::DevPki;
use serde_json::json;
use studio_store::{Store, UserRole};

const APP: &str = "expense-log";
const CREATE: &str = "app__expense_log__categories__create";
const LIST: &str = "app__expense_log__categories__list";
const WARM_UP: usize = 20;

/// One configuration's roles; dropping it stops them.
struct Stack {
    _state: tempfile::TempDir,
    roles: Vec<Child>,
    core_http: String,
    mcp: Mcp,
}

impl Drop for Stack {
    fn drop(&mut self) {
        for child in self.roles.iter_mut().rev() {
            stop(child);
        }
    }
}

fn start_stack(database: Option<&str>, replicas: usize) -> Stack {
    let state = tempfile::tempdir().unwrap();
    let (pki, _) = DevPki::ensure(&state.path().join("certs")).unwrap();
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packages/valid/expense-log"),
        &state.path().join("docs/apps").join(APP),
    );
    let staff = match database {
        None => Staff::create(state.path()),
        Some(url) => {
            let store = Store::connect(url, 2, None, Arc::new(studio_store::system_clock)).unwrap();
            let user = store
                .create_user("bench", UserRole::Staff, "correct horse battery")
                .unwrap();
            Staff { store, id: user.id }
        }
    };
    let database_env: Vec<(&str, String)> = database
        .map(|url| vec![("DATABASE_URL", url.to_owned())])
        .unwrap_or_default();
    let (worker, listeners) = start_role(Role::DataWorker, state.path(), &pki, &[]);
    let data_url = format!("https://{}", listeners["grpc"].as_str().unwrap());
    let mut roles = vec![worker];
    let mut core_urls = Vec::new();
    let mut core_http = String::new();
    for _ in 0..replicas {
        let mut environment = vec![("SASHA_DATA_GRPC_URL", data_url.clone())];
        environment.extend(database_env.iter().cloned());
        let (core, listeners) = start_role(Role::StudioCore, state.path(), &pki, &environment);
        core_urls.push(format!("https://{}", listeners["grpc"].as_str().unwrap()));
        core_http = listeners["http"].as_str().unwrap().to_owned();
        roles.push(core);
    }
    let (gateway, url) = start_gateway(state.path(), &pki, &data_url, core_urls.join(","));
    roles.push(gateway);
    let mcp = Mcp {
        http: common::fixture::http_client(),
        url,
        session: staff.session(),
        token: staff.token(),
        app: APP.to_owned(),
        origin: common::mcp::DEFAULT_ORIGIN.to_owned(),
        client: "bench-core-store",
    };
    Stack {
        _state: state,
        roles,
        core_http,
        mcp,
    }
}

/// One call `name` (a create with key `key`, or a list), retried until the
/// catalogue knows the app; the time of the answered call.
async fn call(mcp: &Mcp, name: &str, key: &str) -> Duration {
    let arguments = if name == CREATE {
        json!({"values": {"name": key}, "idempotencyKey": key})
    } else {
        json!({"limit": 20})
    };
    for _ in 0..200 {
        let started = Instant::now();
        if mcp.call(true, name, arguments.clone()).await.is_some() {
            return started.elapsed();
        }
        // The roles answer in their own time at start: poll, 50 ms apart.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} {key} was never answered");
}

/// One configuration's measurements.
struct Measured {
    label: &'static str,
    me: Vec<Duration>,
    c1: Vec<Vec<Duration>>,
    c8: Vec<(Vec<Duration>, Duration)>,
}

fn measure(
    runtime: &tokio::runtime::Runtime,
    label: &'static str,
    database: Option<&str>,
    replicas: usize,
    c1: usize,
    c8_each: usize,
) -> Measured {
    let stack = start_stack(database, replicas);
    let mcp = &stack.mcp;
    let measured = runtime.block_on(async {
        for i in 0..WARM_UP {
            call(mcp, CREATE, &format!("warm-{i}")).await;
        }
        let mut me = Vec::new();
        for _ in 0..c1 {
            let started = Instant::now();
            let status = mcp
                .http
                .get(format!("http://{}/api/me", stack.core_http))
                .header("host", "localhost:3007")
                .header("cookie", format!("sasha_session={}", mcp.session))
                .send()
                .await
                .unwrap()
                .status();
            assert_eq!(status, 200);
            me.push(started.elapsed());
        }
        let mut singles = Vec::new();
        let mut eights = Vec::new();
        for name in [CREATE, LIST] {
            let mut one = Vec::new();
            for i in 0..c1 {
                one.push(call(mcp, name, &format!("c1-{name}-{i}")).await);
            }
            singles.push(one);
            let started = Instant::now();
            let clients: Vec<_> = (0..8)
                .map(|client| {
                    let mcp = Mcp {
                        http: mcp.http.clone(),
                        url: mcp.url.clone(),
                        session: mcp.session.clone(),
                        token: mcp.token.clone(),
                        app: APP.to_owned(),
                        origin: mcp.origin.clone(),
                        client: "bench-core-store",
                    };
                    tokio::spawn(async move {
                        let mut times = Vec::new();
                        for i in 0..c8_each {
                            times.push(call(&mcp, name, &format!("c8-{name}-{client}-{i}")).await);
                        }
                        times
                    })
                })
                .collect();
            let mut eight = Vec::new();
            for client in clients {
                eight.extend(client.await.unwrap());
            }
            eights.push((eight, started.elapsed()));
        }
        Measured {
            label,
            me,
            c1: singles,
            c8: eights,
        }
    });
    eprintln!("core-store bench: {label} done");
    measured
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|arg| arg == "--quick");
    let (c1, c8_each) = if quick { (60, 20) } else { (400, 150) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = sasha_testkit::PrivateServer::start();
    let mut runs = vec![measure(&runtime, "SQLite, 1 replica", None, 1, c1, c8_each)];
    for (label, replicas) in [("PostgreSQL, 1 replica", 1), ("PostgreSQL, 2 replicas", 2)] {
        let url = server.database();
        runs.push(measure(&runtime, label, Some(&url), replicas, c1, c8_each));
    }

    let mut report = format!(
        "# The core database on SQLite and PostgreSQL, one and two studio-core replicas\n\n\
         {c1} calls at 1 client, 8 × {c8_each} at 8 clients, per operation; PostgreSQL 15 with fsync on, loopback.\n\n\
         | configuration | Studio API p50 / p99 | create c1 p50 / p99 | create c8 ops/s, p50 / p99 | list c1 p50 / p99 | list c8 ops/s, p50 / p99 |\n\
         |---|---|---|---|---|---|\n"
    );
    for run in &mut runs {
        let mut row = format!("| {} |", run.label);
        run.me.sort();
        row.push_str(&format!(
            " {:.2} / {:.2} ms |",
            ms(percentile(&run.me, 0.5)),
            ms(percentile(&run.me, 0.99))
        ));
        for index in 0..2 {
            run.c1[index].sort();
            let (eight, wall) = &mut run.c8[index];
            eight.sort();
            #[allow(clippy::cast_precision_loss, reason = "a rate for a report")]
            let rate = eight.len() as f64 / wall.as_secs_f64();
            row.push_str(&format!(
                " {:.2} / {:.2} ms | {rate:.0}, {:.2} / {:.2} ms |",
                ms(percentile(&run.c1[index], 0.5)),
                ms(percentile(&run.c1[index], 0.99)),
                ms(percentile(eight, 0.5)),
                ms(percentile(eight, 0.99)),
            ));
        }
        report.push_str(&row);
        report.push('\n');
    }
    println!("{report}");
    let dir = results_dir("core-store");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("results.md"), &report).unwrap();
    eprintln!("core-store bench: written to {}", dir.display());
}
