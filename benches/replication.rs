//! What replication to object storage costs and how long a restore takes
//! (issue 45), on the real processes with a real SeaweedFS S3 server and
//! Litestream sidecars on loopback (`tests/common/replica.rs`):
//!
//! 1. **Writes, in one run:** `categories__create` of expense-log through
//!    MCP from the Studio page (gateway, core, data-worker, receipt, audit),
//!    at 1 client (p50, p99) and at 8 clients (ops/s, p50, p99), with
//!    replication off, `async` and `sync`, each on a fresh state folder.
//! 2. **Restore:** one app database of each size (default 10, 100 and 1000
//!    MiB of incompressible rows), written in place, replicated (tracked in
//!    sync mode: its snapshot is in object storage when tracking returns),
//!    then restored with `sasha restore --app` into a new folder (Litestream's
//!    restore, `integrity_check`, sha256).
//!
//!   cargo bench --bench replication                       # 400 c1, 8×150 c8
//!   cargo bench --bench replication -- --quick            # 60 c1, 8×20 c8, 10 MiB
//!   cargo bench --bench replication -- --sizes 10,100     # MiB
//!
//! Needs the replication peers `scripts/test.sh` installs (SASHA_LITESTREAM,
//! SASHA_WEED). Not part of the test command: nothing here is asserted. It
//! prints a Markdown report, also written to results.md under
//! `$CARGO_TARGET_DIR/bench-results/replication-<UTC time>/`.

mod common;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use common::fixture::{Staff, copy_tree, mix, start_core, start_gateway, stop};
use common::mcp::Mcp;
use common::replica::{self, ObjectStorage, Sidecar};
use common::report::{ms, percentile, results_dir};
use common::start_role;
use sasha_replica::config::{Mode, ReplicaConfig};
use sasha_replica::url::ReplicaUrl;
use sasha_replica::{Database, Replicator};
use sasha_service::Role;
use sasha_service::identity::DevPki;
use serde_json::json;

const APP: &str = "expense-log";
const CREATE: &str = "app__expense_log__categories__create";
const WARM_UP: usize = 20;

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|arg| arg == name)
        .and_then(|at| args.get(at + 1).cloned())
}

/// One mode's measurements.
struct Writes {
    mode: &'static str,
    c1: Vec<Duration>,
    c8: Vec<Duration>,
    c8_wall: Duration,
}

/// The roles over a fresh state folder, replicating in `mode` (`None`: off)
/// through their own sidecars.
struct Stack {
    _state: tempfile::TempDir,
    roles: Vec<Child>,
    /// Kept for their lifetime: stopped (and killed) when dropped.
    _sidecars: Vec<Sidecar>,
    mcp: Mcp,
}

impl Drop for Stack {
    fn drop(&mut self) {
        for child in self.roles.iter_mut().rev() {
            stop(child);
        }
    }
}

fn start_stack(
    runtime: &tokio::runtime::Runtime,
    storage: &ObjectStorage,
    mode: Option<&'static str>,
) -> Stack {
    let state = tempfile::tempdir().unwrap();
    let (pki, _) = DevPki::ensure(&state.path().join("certs")).unwrap();
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/packages/valid/expense-log"),
        &state.path().join("docs/apps").join(APP),
    );
    let staff = Staff::create(state.path());
    let mut sidecars = Vec::new();
    let mut replication = |role: Role| -> Vec<(&'static str, String)> {
        let Some(mode) = mode else {
            return Vec::new();
        };
        let socket = state.path().join("sockets").join(format!("{role}.sock"));
        sidecars.push(runtime.block_on(Sidecar::start(&socket)));
        replica::role_env(storage, &format!("writes-{mode}"), &socket, mode)
    };
    let data_env = replication(Role::DataWorker);
    let core_env = replication(Role::StudioCore);
    let (worker, listeners) = start_role(Role::DataWorker, state.path(), &pki, &data_env);
    let data_url = format!("https://{}", listeners["grpc"].as_str().unwrap());
    let (core, core_url) = start_core(state.path(), &pki, &data_url, &core_env);
    let (gateway, url) = start_gateway(state.path(), &pki, &data_url, core_url);
    let mcp = Mcp {
        http: common::fixture::http_client(),
        url,
        session: staff.session(),
        token: staff.token(),
        app: APP.to_owned(),
        origin: common::mcp::DEFAULT_ORIGIN.to_owned(),
        client: "bench-replication",
    };
    Stack {
        _state: state,
        roles: vec![worker, core, gateway],
        _sidecars: sidecars,
        mcp,
    }
}

/// Creates the category `name`, retrying until the catalogue knows the app;
/// the time of the acknowledged call.
async fn create(mcp: &Mcp, name: &str) -> Duration {
    mcp.timed_call(
        CREATE,
        json!({"values": {"name": name}, "idempotencyKey": name}),
    )
    .await
}

fn measure_writes(
    runtime: &tokio::runtime::Runtime,
    storage: &ObjectStorage,
    mode: Option<&'static str>,
    c1: usize,
    c8_each: usize,
) -> Writes {
    let label = mode.unwrap_or("off");
    let stack = start_stack(runtime, storage, mode);
    let mcp = &stack.mcp;
    let (c1, c8, c8_wall) = runtime.block_on(async {
        for i in 0..WARM_UP {
            create(mcp, &format!("warm-{i}")).await;
        }
        let mut one = Vec::new();
        for i in 0..c1 {
            one.push(create(mcp, &format!("c1-{i}")).await);
        }
        let started = Instant::now();
        let clients: Vec<_> = (0..8)
            .map(|client| {
                let mcp = mcp.clone();
                tokio::spawn(async move {
                    let mut times = Vec::new();
                    for i in 0..c8_each {
                        times.push(create(&mcp, &format!("c8-{client}-{i}")).await);
                    }
                    times
                })
            })
            .collect();
        let mut eight = Vec::new();
        for client in clients {
            eight.extend(client.await.unwrap());
        }
        (one, eight, started.elapsed())
    });
    eprintln!("replication bench: writes with replication {label} done");
    drop(stack);
    Writes {
        mode: label,
        c1,
        c8,
        c8_wall,
    }
}

/// One restore measurement.
struct Restore {
    mib: u64,
    bytes: u64,
    written: Duration,
    replicated: Duration,
    restored: Duration,
}

/// The bytes of one row's blob.
const ROW: usize = 16 * 1024;

/// How many rows a database of `mib` MiB holds.
fn rows_of(mib: u64) -> u64 {
    mib * 1024 * 1024 / ROW as u64
}

/// Writes an app database of about `mib` MiB of incompressible rows.
fn write_database(path: &Path, mib: u64) -> u64 {
    let connection = rusqlite::Connection::open(path).unwrap();
    connection
        .pragma_update(None, "journal_mode", "WAL")
        .unwrap();
    connection
        .execute_batch("CREATE TABLE rows (id INTEGER PRIMARY KEY, data BLOB NOT NULL);")
        .unwrap();
    let rows = rows_of(mib) as usize;
    let mut seed = 1u64;
    for batch in 0..rows.div_ceil(256) {
        let transaction = connection.unchecked_transaction().unwrap();
        {
            let mut insert = transaction
                .prepare_cached("INSERT INTO rows (data) VALUES (?1)")
                .unwrap();
            for _ in 0..256.min(rows - batch * 256) {
                let mut data = Vec::with_capacity(ROW);
                while data.len() < ROW {
                    seed = mix(seed);
                    data.extend_from_slice(&seed.to_le_bytes());
                }
                insert.execute([data]).unwrap();
            }
        }
        transaction.commit().unwrap();
    }
    connection
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    drop(connection);
    std::fs::metadata(path).unwrap().len()
}

fn measure_restore(
    runtime: &tokio::runtime::Runtime,
    storage: &ObjectStorage,
    mib: u64,
) -> Restore {
    let dir = tempfile::tempdir().unwrap();
    let app = format!("size-{mib}");
    let apps = dir.path().join("apps");
    std::fs::create_dir_all(&apps).unwrap();
    let file = apps.join(format!("{app}.sqlite"));
    let began = Instant::now();
    let bytes = write_database(&file, mib);
    let written = began.elapsed();
    let prefix = format!("restore-{mib}");
    let url = storage.url(&prefix);
    let socket = dir.path().join("replica.sock");
    let (replicated, sidecar) = runtime.block_on(async {
        let sidecar = Sidecar::start(&socket).await;
        let config = ReplicaConfig {
            url: ReplicaUrl::parse(&url).unwrap(),
            mode: Mode::Sync,
            socket: socket.clone(),
            sync_timeout: Duration::from_secs(1800),
            max_lag: Duration::from_secs(10),
            boot_wait: Duration::from_secs(30),
            litestream: replica::litestream(),
            credentials: replica::credentials(),
        };
        let replicator = Replicator::connect(config).await.unwrap();
        let began = Instant::now();
        replicator
            .track(&Database::App(app.clone()), &file)
            .await
            .unwrap();
        (began.elapsed(), sidecar)
    });
    runtime.block_on(sidecar.stop());
    // The original goes before the restore: the disk holds one copy at a time.
    drop(dir);
    let out = tempfile::tempdir().unwrap();
    let state = out.path().join("state");
    let began = Instant::now();
    let (code, stdout, stderr) = runtime.block_on(replica::restore(&[
        "--from",
        &url,
        "--state-dir",
        &state.display().to_string(),
        "--app",
        &app,
    ]));
    let took = began.elapsed();
    assert_eq!(code, Some(0), "sasha restore: {stdout}{stderr}");
    // Every row is back (the file also holds Litestream's two small tables).
    let restored = rusqlite::Connection::open(state.join(format!("apps/{app}.sqlite"))).unwrap();
    let rows: i64 = restored
        .query_row("SELECT count(*) FROM rows", [], |row| row.get(0))
        .unwrap();
    assert_eq!(rows as u64, rows_of(mib), "every row is restored");
    drop(restored);
    runtime
        .block_on(storage.store(&prefix).delete_below(""))
        .unwrap();
    eprintln!("replication bench: {mib} MiB restored in {took:?}");
    Restore {
        mib,
        bytes,
        written,
        replicated,
        restored: took,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|arg| arg == "--quick");
    let (c1, c8_each) = if quick { (60, 20) } else { (400, 150) };
    let sizes: Vec<u64> = flag(&args, "--sizes")
        .map(|text| {
            text.split(',')
                .map(|size| size.trim().parse().expect("--sizes: MiB, comma-separated"))
                .collect()
        })
        .unwrap_or_else(|| if quick { vec![10] } else { vec![10, 100, 1000] });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let storage = runtime.block_on(ObjectStorage::start());

    let writes: Vec<Writes> = [None, Some("async"), Some("sync")]
        .into_iter()
        .map(|mode| measure_writes(&runtime, &storage, mode, c1, c8_each))
        .collect();
    let restores: Vec<Restore> = sizes
        .iter()
        .map(|mib| measure_restore(&runtime, &storage, *mib))
        .collect();

    let mut report = String::new();
    let mut line = |text: String| {
        println!("{text}");
        report.push_str(&text);
        report.push('\n');
    };
    line(format!(
        "## Replication: writes (create through MCP, {c1} at 1 client, 8 × {c8_each} at 8 clients)\n"
    ));
    line("| replication | c1 p50 | c1 p99 | c8 ops/s | c8 p50 | c8 p99 |".to_owned());
    line("|---|---|---|---|---|---|".to_owned());
    for mut run in writes {
        run.c1.sort();
        run.c8.sort();
        line(format!(
            "| {} | {:.2} ms | {:.2} ms | {:.0} | {:.2} ms | {:.2} ms |",
            run.mode,
            ms(percentile(&run.c1, 0.5)),
            ms(percentile(&run.c1, 0.99)),
            run.c8.len() as f64 / run.c8_wall.as_secs_f64(),
            ms(percentile(&run.c8, 0.5)),
            ms(percentile(&run.c8, 0.99)),
        ));
    }
    line(String::new());
    line("## Replication: restore of one app database\n".to_owned());
    line(
        "| size | file | written | replicated (first sync) | `sasha restore --app` | restore MiB/s |"
            .to_owned(),
    );
    line("|---|---|---|---|---|---|".to_owned());
    for restore in &restores {
        line(format!(
            "| {} MiB | {:.1} MB | {:.1} s | {:.1} s | {:.1} s | {:.0} |",
            restore.mib,
            restore.bytes as f64 / 1e6,
            restore.written.as_secs_f64(),
            restore.replicated.as_secs_f64(),
            restore.restored.as_secs_f64(),
            restore.bytes as f64 / (1024.0 * 1024.0) / restore.restored.as_secs_f64(),
        ));
    }
    let folder = results_dir("replication-");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("results.md"), &report).unwrap();
    eprintln!("replication bench: {}", folder.join("results.md").display());
}
