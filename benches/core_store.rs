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
//! - per configuration, `AuthorizeCall` on its own (the per-call
//!   authorisation a gateway asks for: a bearer access token and one app),
//!   through studio-core's gRPC service with the gateway's mTLS identity, and
//!   in the store tier (the three reads its one blocking hop makes:
//!   `token`, `access`, `write_consent`, on a handle of the bench's own) at
//!   1 client (p50, p99) and 8 (calls/s, p50, p99).
//!
//!   cargo bench --bench core_store             # 400 c1, 8×150 c8; AuthorizeCall 2000 c1, 8×500 c8
//!   cargo bench --bench core_store -- --quick  # 60 c1, 8×20 c8; AuthorizeCall 200 c1, 8×50 c8
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
use sasha_proto::pb;
use sasha_service::identity::{DevPki, Identity};
use sasha_service::{Role, grpc};
use serde_json::json;
use studio_store::{Store, UserRole};

const APP: &str = "expense-log";
const CREATE: &str = "app__expense_log__categories__create";
const LIST: &str = "app__expense_log__categories__list";
const WARM_UP: usize = 20;

/// One configuration's roles; dropping it stops them.
struct Stack {
    state: tempfile::TempDir,
    roles: Vec<Child>,
    core_http: String,
    /// Every studio-core replica's gRPC URL.
    core_grpc: Vec<String>,
    /// The gateway's mTLS identity, which `CoreService` admits.
    gateway_identity: Identity,
    /// The PostgreSQL URL, or `None` for the SQLite file in `state`.
    database: Option<String>,
    /// The staff user the MCP client's credentials are of.
    user_id: String,
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
    let gateway_identity = Identity::load(&pki.files(Role::McpGateway)).unwrap();
    Stack {
        state,
        roles,
        core_http,
        core_grpc: core_urls,
        gateway_identity,
        database: database.map(ToOwned::to_owned),
        user_id: staff.id,
        mcp,
    }
}

/// Latencies at one client, and at eight with the wall time they took.
struct Concurrency {
    c1: Vec<Duration>,
    c8: (Vec<Duration>, Duration),
}

/// `AuthorizeCall` through studio-core's gRPC service, as the gateway calls
/// it for a `tools/call` with a bearer token (the contract hash it already
/// holds passed back, so the answer does not carry the contract).
async fn authorize_over_grpc(stack: &Stack, c1: usize, c8_each: usize) -> Concurrency {
    let client = grpc::core_replicas_client(&stack.core_grpc, &stack.gateway_identity).unwrap();
    let request = |known: &str| pb::AuthorizeCallRequest {
        credential: Some(pb::AuthenticateRequest {
            kind: "bearer".into(),
            credential: stack.mcp.token.clone(),
            resource: String::new(),
        }),
        app_id: APP.into(),
        known_contract_hash: known.to_owned(),
    };
    let first = client.clone().authorize_call(request("")).await.unwrap();
    let apps = first.into_inner().catalogue.unwrap().apps;
    assert_eq!(apps.len(), 1, "the bench user is not granted {APP}");
    let known = apps[0].contract.as_ref().map(|c| c.hash.clone()).unwrap();
    let time = |mut client: grpc::CoreClient, request: pb::AuthorizeCallRequest, n: usize| async move {
        let mut times = Vec::with_capacity(n);
        for _ in 0..(WARM_UP + n) {
            let started = Instant::now();
            let reply = client.authorize_call(request.clone()).await.unwrap();
            times.push(started.elapsed());
            assert_eq!(reply.into_inner().catalogue.unwrap().apps.len(), 1);
        }
        times.split_off(WARM_UP)
    };
    let c1 = time(client.clone(), request(&known), c1).await;
    let started = Instant::now();
    let clients: Vec<_> = (0..8)
        .map(|_| tokio::spawn(time(client.clone(), request(&known), c8_each)))
        .collect();
    let mut eight = Vec::new();
    for client in clients {
        eight.extend(client.await.unwrap());
    }
    Concurrency {
        c1,
        c8: (eight, started.elapsed()),
    }
}

/// The store calls of `AuthorizeCall`'s one blocking hop (see
/// `authorize_call` in studio-core's `grpc.rs`), on a handle of the bench's
/// own: the SQLite file's one connection, or a pool of 8 (studio-core's
/// default), from 1 and 8 threads.
fn authorize_in_store(stack: &Stack, c1: usize, c8_each: usize) -> Concurrency {
    let store = match &stack.database {
        None => Store::open(&stack.state.path().join("core.sqlite")).unwrap(),
        Some(url) => Store::connect(url, 8, None, Arc::new(studio_store::system_clock)).unwrap(),
    };
    let token = stack.mcp.token.as_str();
    let user_id = stack.user_id.as_str();
    let time = |n: usize| {
        let mut times = Vec::with_capacity(n);
        for _ in 0..(WARM_UP + n) {
            let started = Instant::now();
            let principal = store.token(token).unwrap().unwrap();
            let access = store.access(APP, &principal.user.id).unwrap();
            assert!(access.is_some() && principal.user.id == user_id);
            store.write_consent(token, APP).unwrap();
            times.push(started.elapsed());
        }
        times.split_off(WARM_UP)
    };
    let c1 = time(c1);
    let started = Instant::now();
    let eight: Vec<Duration> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..8).map(|_| scope.spawn(|| time(c8_each))).collect();
        threads
            .into_iter()
            .flat_map(|thread| thread.join().unwrap())
            .collect()
    });
    Concurrency {
        c1,
        c8: (eight, started.elapsed()),
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
    mcp.timed_call(name, arguments).await
}

/// One configuration's measurements.
struct Measured {
    label: &'static str,
    me: Vec<Duration>,
    c1: Vec<Vec<Duration>>,
    c8: Vec<(Vec<Duration>, Duration)>,
    /// `AuthorizeCall` through gRPC, and its store calls alone.
    authorize: [Concurrency; 2],
}

/// How many `AuthorizeCall`s at one client and per client at eight.
struct Counts {
    c1: usize,
    c8_each: usize,
    authorize_c1: usize,
    authorize_c8_each: usize,
}

fn measure(
    runtime: &tokio::runtime::Runtime,
    label: &'static str,
    database: Option<&str>,
    replicas: usize,
    counts: &Counts,
) -> Measured {
    let (c1, c8_each) = (counts.c1, counts.c8_each);
    let stack = start_stack(database, replicas);
    let mcp = &stack.mcp;
    let (me, c1_times, c8_times, over_grpc) = runtime.block_on(async {
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
                    let mcp = mcp.clone();
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
        let over_grpc =
            authorize_over_grpc(&stack, counts.authorize_c1, counts.authorize_c8_each).await;
        (me, singles, eights, over_grpc)
    });
    let in_store = authorize_in_store(&stack, counts.authorize_c1, counts.authorize_c8_each);
    eprintln!("core-store bench: {label} done");
    Measured {
        label,
        me,
        c1: c1_times,
        c8: c8_times,
        authorize: [over_grpc, in_store],
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|arg| arg == "--quick");
    let counts = if quick {
        Counts {
            c1: 60,
            c8_each: 20,
            authorize_c1: 200,
            authorize_c8_each: 50,
        }
    } else {
        Counts {
            c1: 400,
            c8_each: 150,
            authorize_c1: 2000,
            authorize_c8_each: 500,
        }
    };
    let (c1, c8_each) = (counts.c1, counts.c8_each);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = sasha_testkit::PrivateServer::start();
    let mut runs = vec![measure(&runtime, "SQLite, 1 replica", None, 1, &counts)];
    for (label, replicas) in [("PostgreSQL, 1 replica", 1), ("PostgreSQL, 2 replicas", 2)] {
        let url = server.database();
        runs.push(measure(&runtime, label, Some(&url), replicas, &counts));
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
    report.push_str(&format!(
        "\n## AuthorizeCall on its own\n\n\
         A bearer access token and one app; {} calls at 1 client, 8 × {} at 8 clients. \
         gRPC: studio-core's service over mTLS, as the gateway calls it (two replicas: \
         balanced over both). Store: its three reads (token, access, write consent) in \
         process, on a handle of the bench's own.\n\n\
         | configuration | gRPC c1 p50 / p99 | gRPC c8 calls/s, p50 / p99 | store c1 p50 / p99 | store c8 calls/s, p50 / p99 |\n\
         |---|---|---|---|---|\n",
        counts.authorize_c1, counts.authorize_c8_each
    ));
    for run in &mut runs {
        let mut row = format!("| {} |", run.label);
        for tier in &mut run.authorize {
            tier.c1.sort();
            let (eight, wall) = &mut tier.c8;
            eight.sort();
            #[allow(clippy::cast_precision_loss, reason = "a rate for a report")]
            let rate = eight.len() as f64 / wall.as_secs_f64();
            row.push_str(&format!(
                " {:.3} / {:.3} ms | {rate:.0}, {:.3} / {:.3} ms |",
                ms(percentile(&tier.c1, 0.5)),
                ms(percentile(&tier.c1, 0.99)),
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
