//! Throwaway engines for tests, on loopback only.
//!
//! [`postgres_database`] gives each test a fresh, empty PostgreSQL database on
//! one server that every test process of a run shares: nextest runs each test
//! in its own process, and starting a server per test would cost seconds of
//! the 2-core budget each time. The first process to need it creates and
//! starts the server under a file lock; the others find it by its port file.
//! The server stops itself after ten idle minutes (a watchdog beside it), so
//! a run leaves nothing behind for long; `scripts/test.sh` also stops it at
//! the end.
//!
//! What it must never do: listen beyond 127.0.0.1, reuse a database between
//! tests, or skip: a machine without PostgreSQL fails the test, saying how to
//! install it.

use std::fs::{self, File};
use std::io::Write as _;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's PostgreSQL binaries are, unless `SASHA_TEST_PG_BIN` says.
const DEFAULT_BIN: &str = "/usr/lib/postgresql/15/bin";

/// The superuser the test server is created with.
const SUPERUSER: &str = "postgres";

/// Idle minutes after which the shared server stops itself.
const IDLE_MINUTES: u32 = 10;

/// The PostgreSQL binaries' folder.
fn bin_dir() -> PathBuf {
    std::env::var_os("SASHA_TEST_PG_BIN").map_or_else(|| PathBuf::from(DEFAULT_BIN), PathBuf::from)
}

/// The shared server's folder: one per machine user.
fn home() -> PathBuf {
    std::env::temp_dir().join(format!("sasha-test-postgres-{}", effective_uid()))
}

fn effective_uid() -> u32 {
    // `id -u` keeps this crate free of libc bindings for one number.
    Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

/// A command run as the server's owner: PostgreSQL refuses to run as root,
/// so under root it runs as the `postgres` account Debian's package creates.
fn as_owner(program: &Path) -> Command {
    if effective_uid() == 0 {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// The shared server's port. Starts the server when none answers.
pub fn postgres_server() -> u16 {
    let home = home();
    fs::create_dir_all(&home).expect("create the test PostgreSQL folder");
    let lock = File::create(home.join("lock")).expect("create the test PostgreSQL lock file");
    lock.lock().expect("lock the test PostgreSQL folder");
    let port = match running_port(&home) {
        Some(port) => port,
        None => start(&home),
    };
    // The watchdog counts idle time from this file's last change.
    let _ = fs::write(
        home.join("used"),
        format!("{:?}", std::time::SystemTime::now()),
    );
    drop(lock);
    port
}

/// The URL of database `name` on the shared server, as its superuser.
fn url(port: u16, name: &str) -> String {
    format!("postgres://{SUPERUSER}@127.0.0.1:{port}/{name}")
}

/// A fresh, empty database on the shared server, and its URL.
pub fn postgres_database() -> String {
    let port = postgres_server();
    let name = format!("t{:016x}", rand::random::<u64>());
    let server = url(port, "postgres");
    let mut client = postgres::Client::connect(&server, postgres::NoTls)
        .unwrap_or_else(|error| panic!("connect to the test PostgreSQL at {server}: {error}"));
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap_or_else(|error| panic!("create a test database: {error}"));
    url(port, &name)
}

/// The port of a server that answers, from a previous start.
fn running_port(home: &Path) -> Option<u16> {
    let port: u16 = fs::read_to_string(home.join("port"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1))
        .ok()
        .map(|_| port)
}

/// Creates the shared cluster (again, if a stale one is there), starts it,
/// and watches it for idleness.
fn start(home: &Path) -> u16 {
    let port = create_and_start(home, false);
    watchdog(home, &bin_dir(), &home.join("data"));
    port
}

/// Creates a cluster in `home` (again, if a stale one is there) and starts
/// it on a free loopback port; `durable` keeps PostgreSQL's own fsync
/// settings (for tests that stop or crash it).
fn create_and_start(home: &Path, durable: bool) -> u16 {
    let bin = bin_dir();
    assert!(
        bin.join("postgres").exists(),
        "PostgreSQL is not installed at {} (set SASHA_TEST_PG_BIN, or install it: \
         apt-get install postgresql-15; scripts/test.sh does this)",
        bin.display()
    );
    let data = home.join("data");
    if data.exists() {
        let _ = as_owner(&bin.join("pg_ctl"))
            .args(["stop", "-m", "immediate", "-D"])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        fs::remove_dir_all(&data).expect("remove a stale test PostgreSQL cluster");
    }
    fs::create_dir_all(&data).expect("create the test PostgreSQL data folder");
    if effective_uid() == 0 {
        // The cluster's owner must own its folders; everyone may pass
        // through the parent to reach them.
        run(Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(home));
        run(Command::new("chmod").args(["0755"]).arg(home));
    }
    run(as_owner(&bin.join("initdb"))
        .args([
            "--auth=trust",
            "--username",
            SUPERUSER,
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "-D",
        ])
        .arg(&data));
    let port = free_port();
    // Durability is not what most tests measure: no fsync, so creating a
    // database per test costs milliseconds. A server of a test's own that
    // it stops or crashes keeps the defaults.
    let fast = if durable {
        ""
    } else {
        "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
    };
    let settings = format!(
        "listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = ''\n\
         {fast}max_connections = 400\nshared_buffers = 64MB\n"
    );
    fs::OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))
        .and_then(|mut file| file.write_all(settings.as_bytes()))
        .expect("write the test PostgreSQL settings");
    run(as_owner(&bin.join("pg_ctl"))
        .args(["start", "-w", "-t", "60", "-l"])
        .arg(home.join("server.log"))
        .arg("-D")
        .arg(&data));
    fs::write(home.join("port"), port.to_string()).expect("record the test PostgreSQL port");
    let started = Instant::now();
    while running_port(home).is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the test PostgreSQL did not answer on port {port}; see {}",
            home.join("server.log").display()
        );
        // The server was reported started; its listener follows at once.
        std::thread::sleep(Duration::from_millis(50));
    }
    port
}

/// Stops the server after [`IDLE_MINUTES`] without a test asking for it.
fn watchdog(home: &Path, bin: &Path, data: &Path) {
    let script = format!(
        "while sleep 30; do \
           if [ -n \"$(find '{used}' -mmin +{IDLE_MINUTES} 2>/dev/null)\" ] || [ ! -e '{used}' ]; then \
             {owner} '{pg_ctl}' stop -m fast -D '{data}' >/dev/null 2>&1; exit 0; \
           fi; \
         done",
        used = home.join("used").display(),
        owner = if effective_uid() == 0 {
            "runuser -u postgres --"
        } else {
            ""
        },
        pg_ctl = bin.join("pg_ctl").display(),
        data = data.display(),
    );
    let _ = File::create(home.join("used"));
    // Detached on purpose: it outlives this test process and stops the
    // server; init reaps it.
    #[allow(
        clippy::zombie_processes,
        reason = "the watchdog outlives this process"
    )]
    Command::new("setsid")
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the test PostgreSQL watchdog");
}

fn run(command: &mut Command) {
    let output = command.output().expect("run a PostgreSQL tool");
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("find a free loopback port")
}

/// A PostgreSQL server of one test's own, with PostgreSQL's durable
/// defaults, for tests that stop, restart or crash it; stopped and removed
/// when dropped.
pub struct PrivateServer {
    home: PathBuf,
    port: u16,
}

impl PrivateServer {
    pub fn start() -> PrivateServer {
        let home = std::env::temp_dir().join(format!(
            "sasha-test-postgres-private-{:016x}",
            rand::random::<u64>()
        ));
        fs::create_dir_all(&home).expect("create a private PostgreSQL folder");
        let port = create_and_start(&home, true);
        PrivateServer { home, port }
    }

    /// A fresh database on this server, and its URL.
    pub fn database(&self) -> String {
        let name = format!("t{:016x}", rand::random::<u64>());
        let server = url(self.port, "postgres");
        let mut client = postgres::Client::connect(&server, postgres::NoTls)
            .unwrap_or_else(|error| panic!("connect to the private PostgreSQL: {error}"));
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|error| panic!("create a test database: {error}"));
        url(self.port, &name)
    }

    /// Stops the server (`fast`: sessions are ended, as in a restart).
    pub fn stop(&self) {
        run(as_owner(&bin_dir().join("pg_ctl"))
            .args(["stop", "-m", "fast", "-w", "-D"])
            .arg(self.home.join("data")));
    }

    /// Starts it again on the same port.
    pub fn start_again(&self) {
        run(as_owner(&bin_dir().join("pg_ctl"))
            .args(["start", "-w", "-t", "60", "-l"])
            .arg(self.home.join("server.log"))
            .arg("-D")
            .arg(self.home.join("data")));
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = as_owner(&bin_dir().join("pg_ctl"))
            .args(["stop", "-m", "immediate", "-D"])
            .arg(self.home.join("data"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = fs::remove_dir_all(&self.home);
    }
}
