//! Governed data operations through MCP `tools/call` on mcp-gateway (the whole
//! path) and through data-worker's gRPC interface, against an in-process
//! rusqlite floor running the equivalent statements on the same schema. Run with
//! `cargo bench --bench data`; prints per-operation medians and the ratios to
//! the floor.
//!
//! Then one client's call taken apart, hop by hop, on the same running roles:
//! studio-core's `AuthorizeCall` as the gateway sends it, an empty gRPC round
//! trip (`Health`) to each of studio-core and data-worker (mTLS, HTTP/2,
//! tonic: what a hop costs before any work), data-worker's `Execute`, and
//! data-worker's engine in process (the commit with its receipt, audit entry
//! and `synchronous=FULL`, without gRPC or the grammar). The gateway's own
//! share (HTTP, rmcp, JSON) is the whole call less its two hops: for a
//! create, their sum; for a list, the longer of the two, since a read runs
//! beside its check.

mod common;

use common::fixture::{
    Staff, copy_tree, http_client, start_core, start_gateway, start_worker, stop,
};
use common::mcp::Mcp;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use sasha_contract::caller::{AppAccess, CallSource, Initiator};
use sasha_proto::convert::ToWire;
use sasha_proto::pb::{
    Actor, AuthenticateRequest, AuthorizeCallRequest, ExecuteRequest, HealthRequest,
};
use sasha_service::identity::{DevPki, Identity};
use sasha_service::{Role, grpc};
use serde_json::json;

const CREATES: usize = 400;
const READS: usize = 200;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// `tools/call` through mcp-gateway: the whole governed path (HTTP, session
/// authentication, grant check, catalogue, gRPC, SQLite with receipt, version
/// and audit). Writes come from the Studio page with the app open (the app's own
/// UI, which needs no confirmation round trip); reads from a bearer token.
/// Context switches so far of every thread of process `pid` (voluntary and
/// not): each is a thread going to sleep or being put off a core, so their
/// count per call is the call's wake-ups in that process.
fn switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter(|line| line.contains("ctxt_switches:"))
                .filter_map(|line| line.split_whitespace().last()?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// Context switches per call in (gateway, studio-core, data-worker) while
/// `calls` calls ran.
#[derive(Clone, Copy, Default)]
struct Wakeups([f64; 3]);

impl Wakeups {
    fn counts(pids: [u32; 3]) -> [u64; 3] {
        pids.map(switches)
    }

    fn since(before: [u64; 3], pids: [u32; 3], calls: usize) -> Wakeups {
        let after = Wakeups::counts(pids);
        Wakeups(std::array::from_fn(|i| {
            after[i].saturating_sub(before[i]) as f64 / calls as f64
        }))
    }
}

fn through_gateway(
    runtime: &tokio::runtime::Runtime,
    state: &Path,
    pki: &DevPki,
    data_url: &str,
    worker_pid: u32,
) -> (HashMap<&'static str, Duration>, [Wakeups; 2]) {
    let staff = Staff::create(state);
    let (mut core, core_url) = start_core(state, pki, data_url, &[]);
    let (mut gateway, url) = start_gateway(state, pki, data_url, core_url.clone());
    let pids = [gateway.id(), core.id(), worker_pid];
    let mut wakeups = [Wakeups::default(); 2];
    let session = staff.session();
    let token = staff.token();
    let medians = runtime.block_on(async {
        let mcp = Mcp {
            http: http_client(),
            url,
            session,
            token,
            app: "expense-log".to_owned(),
            origin: common::mcp::DEFAULT_ORIGIN.to_owned(),
            client: "bench",
        };
        let call = |ui: bool, name: &'static str, arguments: serde_json::Value| {
            let request = mcp.request(ui, name, arguments);
            async move {
                let reply: serde_json::Value =
                    request.send().await.expect("POST /mcp").json().await.expect("JSON reply");
                assert!(
                    reply["result"]["isError"] != true && reply.get("error").is_none(),
                    "{reply}"
                );
                reply
            }
        };
        call(true, "app__expense_log__categories__create", json!({"values": {"name": "Bench"}})).await;
        let mut creates = Vec::new();
        let before = Wakeups::counts(pids);
        for i in 0..CREATES {
            let start = Instant::now();
            call(true, "app__expense_log__expenses__create", json!({"values": {"spent_on": "2026-11-01", "amount": i as f64, "category_id": 1, "note": "x"}, "idempotencyKey": format!("m{i}")})).await;
            creates.push(start.elapsed());
        }
        wakeups[0] = Wakeups::since(before, pids, CREATES);
        let list = || call(false, "app__expense_log__expenses__list", json!({"limit": 50, "orderBy": [{"field": "amount", "direction": "desc"}]}));
        let mut lists = Vec::new();
        let before = Wakeups::counts(pids);
        let mut reply = serde_json::Value::Null;
        for _ in 0..READS {
            let start = Instant::now();
            reply = list().await;
            lists.push(start.elapsed());
        }
        wakeups[1] = Wakeups::since(before, pids, READS);
        let rows_json = rows_json(&reply);
        let mut aggregates = Vec::new();
        for _ in 0..READS {
            let start = Instant::now();
            call(false, "app__expense_log__expenses__aggregate", json!({"groupBy": ["category_id"], "metrics": [{"as": "total", "sum": "amount"}]})).await;
            aggregates.push(start.elapsed());
        }
        // The gateway's first hop, as it sends it for a read: the bearer
        // token, the app, the contract it already holds.
        let identity = Identity::load(&pki.files(Role::McpGateway)).unwrap();
        let core_client = grpc::core_client(&core_url, &identity).unwrap();
        let data_client = grpc::data_client(data_url, &identity).unwrap();
        let hash = sasha_package::validate::validate_dir(&state.join("docs/apps/expense-log"))
            .package
            .unwrap()
            .data
            .unwrap()
            .hash;
        let mut authorize = Vec::new();
        let mut core_trip = Vec::new();
        let mut data_trip = Vec::new();
        for _ in 0..READS {
            let request = AuthorizeCallRequest {
                credential: Some(AuthenticateRequest {
                    kind: "bearer".into(),
                    credential: mcp.token.clone(),
                    resource: String::new(),
                }),
                app_id: "expense-log".into(),
                known_contract_hash: hash.clone(),
            };
            let start = Instant::now();
            let answer = core_client.clone().authorize_call(request).await.expect("AuthorizeCall");
            authorize.push(start.elapsed());
            assert!(answer.into_inner().catalogue.is_some());
            let start = Instant::now();
            core_client.clone().health(HealthRequest { deep: false }).await.expect("core Health");
            core_trip.push(start.elapsed());
            let start = Instant::now();
            data_client.clone().health(HealthRequest { deep: false }).await.expect("worker Health");
            data_trip.push(start.elapsed());
        }
        HashMap::from([
            ("rows json", rows_json),
            ("create", median(creates)),
            ("list", median(lists)),
            ("aggregate", median(aggregates)),
            ("authorize", median(authorize)),
            ("core round trip", median(core_trip)),
            ("worker round trip", median(data_trip)),
        ])
    });
    for child in [&mut gateway, &mut core] {
        stop(child);
    }
    (medians, wakeups)
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
    let wire_contract = sasha_proto::pb::DataContract::from(&contract);
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
                epoch: 0,
                app_id: "expense-log".into(),
                contract_hash: contract.hash.clone(),
                actor: Some(Actor { user_id: "bench".into(), access: AppAccess::Use.to_wire() }),
                operation: operation.into(),
                table: table.into(),
                request_json: body.to_string(),
                contract: Some(wire_contract.clone()),
                source: CallSource::Ui.to_wire(),
                provenance: Some(sasha_proto::convert::provenance_to_wire(
                    sasha_contract::caller::Initiator::AppView,
                    None,
                )),
                app_revision: "bench".into(),
                action_id: String::new(),
                preview: String::new(),
                preview_scope: None,
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
    // The MCP path uses its own app database, so it starts from an empty table
    // like the gRPC run did.
    let gateway_state = tempfile::tempdir().unwrap();
    let apps = gateway_state.path().join("docs/apps/expense-log");
    std::fs::create_dir_all(&apps).unwrap();
    copy_tree(&fixture, &apps);
    let (mut mcp_worker, mcp_data_url) = start_worker(gateway_state.path(), &pki);
    let (mcp, wakeups) = through_gateway(
        &runtime,
        gateway_state.path(),
        &pki,
        &mcp_data_url,
        mcp_worker.id(),
    );
    for child in [&mut child, &mut mcp_worker] {
        stop(child);
    }

    let engine_create = engine_in_process(&contract);

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

    println!(
        "operation   MCP tools/call (median)   gRPC (median)   floor (in-process)   MCP/floor   gRPC/floor"
    );
    for operation in ["create", "list", "aggregate"] {
        let (m, g, f) = (mcp[operation], governed[operation], floor[operation]);
        println!(
            "{operation:<11} {:>12.3} ms          {:>8.3} ms     {:>8.3} ms         {:>6.1}x     {:>6.1}x",
            m.as_secs_f64() * 1000.0,
            g.as_secs_f64() * 1000.0,
            f.as_secs_f64() * 1000.0,
            m.as_secs_f64() / f.as_secs_f64(),
            g.as_secs_f64() / f.as_secs_f64()
        );
    }

    let ms = |duration: Duration| duration.as_secs_f64() * 1000.0;
    println!();
    println!("one client's call, hop by hop (medians, ms)   create    list");
    let row = |what: &str, create: Option<Duration>, list: Option<Duration>| {
        let cell = |value: Option<Duration>| {
            value.map_or("       —".to_owned(), |v| format!("{:>8.3}", ms(v)))
        };
        println!("{what:<45} {} {}", cell(create), cell(list));
    };
    let both = |value: Duration| (Some(value), Some(value));
    row(
        "MCP tools/call, the whole path",
        Some(mcp["create"]),
        Some(mcp["list"]),
    );
    let (a, b) = both(mcp["authorize"]);
    row("  gateway → studio-core AuthorizeCall", a, b);
    let (a, b) = both(mcp["core round trip"]);
    row("    of which one empty gRPC round trip", a, b);
    row(
        "  gateway → data-worker Execute",
        Some(governed["create"]),
        Some(governed["list"]),
    );
    let (a, b) = both(mcp["worker round trip"]);
    row("    of which one empty gRPC round trip", a, b);
    row(
        "    of which the engine's commit, in process",
        Some(engine_create),
        None,
    );
    // A change waits for its check before it is sent; a read of a
    // credential answered a moment ago is sent beside its check
    // (`mcp_gateway::speculate`), so it waits for the longer of the two.
    let own =
        |operation: &str, waited: Duration| mcp[operation].checked_sub(waited).unwrap_or_default();
    row(
        "  the gateway's own (HTTP, rmcp, JSON)",
        Some(own("create", mcp["authorize"] + governed["create"])),
        Some(own("list", mcp["authorize"].max(governed["list"]))),
    );
    let (tcp, unix, tokio_tcp) = ping_pongs();
    row("a bare 1-byte ping-pong over loopback TCP", Some(tcp), None);
    row("  the same over a Unix socket", Some(unix), None);
    row("  TCP between two tokio runtimes", Some(tokio_tcp), None);
    row(
        "the list's rows through the gateway's JSON",
        None,
        Some(mcp["rows json"]),
    );
    row(
        "an empty spawn_blocking, awaited (a store hop)",
        Some(runtime.block_on(blocking_hop())),
        None,
    );
    println!();
    println!("context switches per MCP call (all threads)  create    list");
    for (i, role) in ["mcp-gateway", "studio-core", "data-worker"]
        .iter()
        .enumerate()
    {
        println!(
            "  {role:<43} {:>8.1} {:>8.1}",
            wakeups[0].0[i], wakeups[1].0[i]
        );
    }
}

/// What the gateway does with a list's rows as JSON, timed on the reply of
/// the last list (the median of `READS`): data-worker's text parsed into a
/// value, the value written as `structuredContent`, and the text written
/// again as an escaped string for the text content.
fn rows_json(reply: &serde_json::Value) -> Duration {
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .expect("a list's text content")
        .to_owned();
    let mut samples = Vec::new();
    for _ in 0..READS {
        let start = Instant::now();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let structured = serde_json::to_vec(&value).unwrap();
        let escaped = serde_json::to_vec(&text).unwrap();
        samples.push(start.elapsed());
        assert!(structured.len() + escaped.len() > text.len());
    }
    median(samples)
}

/// The median of `READS` empty `spawn_blocking` calls awaited from an
/// async task: what studio-core's and data-worker's move of store work off
/// the async threads costs before any work.
async fn blocking_hop() -> Duration {
    let mut samples = Vec::new();
    for _ in 0..READS * 5 {
        let start = Instant::now();
        tokio::task::spawn_blocking(|| ()).await.unwrap();
        samples.push(start.elapsed());
    }
    median(samples)
}

/// What a hop costs below gRPC: the median of `READS` 1-byte round trips
/// between two threads over loopback TCP and over a Unix socket (blocking
/// sockets: the kernel's transport and one wake-up each way), and over TCP
/// between two tokio runtimes (the roles' runtime: their wake-ups too).
fn ping_pongs() -> (Duration, Duration, Duration) {
    use std::io::{Read, Write};
    fn pong<S: Read + Write>(mut stream: S) {
        let mut byte = [0u8; 1];
        while stream.read_exact(&mut byte).is_ok() {
            if stream.write_all(&byte).is_err() {
                break;
            }
        }
    }
    fn ping<S: Read + Write>(stream: &mut S) -> Duration {
        let mut samples = Vec::new();
        let mut byte = [7u8; 1];
        for _ in 0..READS * 5 {
            let start = Instant::now();
            stream.write_all(&byte).unwrap();
            stream.read_exact(&mut byte).unwrap();
            samples.push(start.elapsed());
        }
        median(samples)
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || pong(listener.accept().unwrap().0));
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_nodelay(true).unwrap();
    let tcp = ping(&mut stream);
    drop(stream);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ping.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || pong(listener.accept().unwrap().0));
    let mut stream = std::os::unix::net::UnixStream::connect(&path).unwrap();
    let unix = ping(&mut stream);
    drop(stream);

    let server = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = server
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    server.spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut stream, _) = listener.accept().await.unwrap();
        stream.set_nodelay(true).unwrap();
        let mut byte = [0u8; 1];
        while stream.read_exact(&mut byte).await.is_ok() {
            if stream.write_all(&byte).await.is_err() {
                break;
            }
        }
    });
    let tokio_tcp = client.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let mut samples = Vec::new();
        let mut byte = [7u8; 1];
        for _ in 0..READS * 5 {
            let start = Instant::now();
            stream.write_all(&byte).await.unwrap();
            stream.read_exact(&mut byte).await.unwrap();
            samples.push(start.elapsed());
        }
        median(samples)
    });
    server.shutdown_background();
    (tcp, unix, tokio_tcp)
}

/// data-worker's engine in process: one create through `Engine::mutate`
/// (admission, receipt lookup, the insert, the chained audit entry, the
/// receipt, the commit at `synchronous=FULL`), without gRPC, the grammar
/// or JSON parsing; the median of `CREATES`.
fn engine_in_process(contract: &sasha_contract::data::DataContract) -> Duration {
    use data_worker::engine::{
        AuditMeta, AuditOperation, AuditRecord, Engine, MutationOutcome, ReceiptKey,
    };
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::new(dir.path());
    let meta = || AuditMeta {
        source: CallSource::Ui,
        initiator: Initiator::AppView,
        initiator_id: None,
        app_revision: "bench".into(),
        action_id: None,
    };
    let write = |key: String, sql: &'static str, table: &'static str| {
        let receipt = ReceiptKey {
            actor: "bench".into(),
            operation: "create".into(),
            input_hash: key.clone(),
            key,
        };
        engine
            .mutate("expense-log", contract, receipt, meta(), move |conn| {
                let id = conn
                    .query_row(sql, [], |row| row.get::<_, i64>(0))
                    .map_err(data_worker::engine::sql_error)?;
                let row = json!({"id": id});
                Ok(MutationOutcome {
                    result: row.clone(),
                    audit: vec![AuditRecord {
                        table: table.into(),
                        record_id: id.to_string(),
                        operation: AuditOperation::Create,
                        before: None,
                        after: Some(row),
                    }],
                })
            })
            .expect("engine create")
    };
    write(
        "category".into(),
        "INSERT INTO categories (name) VALUES ('Bench') RETURNING id",
        "categories",
    );
    let mut creates = Vec::new();
    for i in 0..CREATES {
        let start = Instant::now();
        write(
            format!("e{i}"),
            "INSERT INTO expenses (spent_on, amount, category_id, note, created_by) \
             VALUES ('2026-11-01', 1.0, 1, 'x', 'bench') RETURNING id",
            "expenses",
        );
        creates.push(start.elapsed());
    }
    median(creates)
}
