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
//! [`PrivateServer`] is a server of one test's own, for tests that stop or
//! restart it, or that need it to speak TLS ([`Tls`]): a CA and a server
//! certificate for 127.0.0.1 are minted when it starts, and live, with the
//! key, only in its temporary folder.
//!
//! What it must never do: listen beyond 127.0.0.1, reuse a database between
//! tests, leave a key readable by anyone but the server's owner, or skip: a
//! machine without PostgreSQL fails the test, saying how to install it.

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

/// Whether a server speaks TLS, and whether it insists on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tls {
    /// `ssl = off`: a client asking for TLS is told the server has none.
    Off,
    /// `ssl = on`, with a certificate of the server's own CA; plain
    /// connections are still accepted.
    On,
    /// As [`Tls::On`], and `pg_hba.conf` admits TCP connections only as
    /// `hostssl`: the server itself refuses a plain one.
    Required,
}

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
    let port = create_and_start(home, false, Tls::Off);
    watchdog(home, &bin_dir(), &home.join("data"));
    port
}

/// Creates a cluster in `home` (again, if a stale one is there) and starts
/// it on a free loopback port; `durable` keeps PostgreSQL's own fsync
/// settings (for tests that stop or crash it). With TLS, the certificate and
/// key are [`tls_files`] of `home`, written before; the server also listens
/// on a Unix socket in `home`, which is how [`PrivateServer`] creates
/// databases on a server that refuses plain TCP.
fn create_and_start(home: &Path, durable: bool, tls: Tls) -> u16 {
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
    let tls_settings = match tls {
        Tls::Off => "unix_socket_directories = ''\n".to_owned(),
        Tls::On | Tls::Required => {
            let files = tls_files(home);
            format!(
                "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n\
                 unix_socket_directories = '{}'\n",
                files.certificate.display(),
                files.key.display(),
                home.display()
            )
        }
    };
    let settings = format!(
        "listen_addresses = '127.0.0.1'\nport = {port}\n{tls_settings}\
         {fast}max_connections = 400\nshared_buffers = 64MB\n"
    );
    fs::OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))
        .and_then(|mut file| file.write_all(settings.as_bytes()))
        .expect("write the test PostgreSQL settings");
    if tls == Tls::Required {
        // The socket for the test's own administration; TCP only as TLS.
        fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
        )
        .expect("write the test PostgreSQL pg_hba.conf");
    }
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
/// defaults, for tests that stop, restart or crash it, or that need TLS;
/// stopped and removed when dropped.
pub struct PrivateServer {
    home: PathBuf,
    port: u16,
    tls: Tls,
}

/// Where a TLS server's files are, in its folder.
pub struct TlsFiles {
    /// The CA that signed the server's certificate (PEM): what a client
    /// verifies the server with.
    pub ca: PathBuf,
    /// The server's certificate (PEM), for 127.0.0.1 and localhost.
    pub certificate: PathBuf,
    /// The server's private key (PEM), mode 0600, owned by the server's
    /// owner: PostgreSQL refuses to start with a key others may read.
    pub key: PathBuf,
}

/// The TLS files of the server in `home`.
fn tls_files(home: &Path) -> TlsFiles {
    let dir = home.join("tls");
    TlsFiles {
        ca: dir.join("ca.crt"),
        certificate: dir.join("server.crt"),
        key: dir.join("server.key"),
    }
}

/// A new CA: its certificate (PEM) and the issuer that signs with it.
fn mint_ca(name: &str) -> (String, rcgen::Issuer<'static, rcgen::KeyPair>) {
    let mut params =
        rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA certificate parameters");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let key = rcgen::KeyPair::generate().expect("a CA key");
    let certificate = params.self_signed(&key).expect("a CA certificate");
    (certificate.pem(), rcgen::Issuer::new(params, key))
}

/// The certificate (PEM) of a CA minted now, which signed nothing: a client
/// verifying a server with it must refuse the server.
pub fn unrelated_ca_pem() -> String {
    mint_ca("sasha test unrelated CA").0
}

/// Mints a CA and a server certificate for loopback into `home`'s
/// [`tls_files`]; the key is written mode 0600 from the start.
fn write_tls_files(home: &Path) {
    use std::os::unix::fs::OpenOptionsExt as _;
    let files = tls_files(home);
    fs::create_dir_all(home.join("tls")).expect("create the test PostgreSQL TLS folder");
    let (ca_pem, issuer) = mint_ca("sasha test PostgreSQL CA");
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
        .expect("server certificate parameters");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "127.0.0.1");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    let key = rcgen::KeyPair::generate().expect("a server key");
    let certificate = params
        .signed_by(&key, &issuer)
        .expect("a server certificate");
    fs::write(&files.ca, ca_pem).expect("write the test CA certificate");
    fs::write(&files.certificate, certificate.pem()).expect("write the server certificate");
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&files.key)
        .and_then(|mut file| file.write_all(key.serialize_pem().as_bytes()))
        .expect("write the server key");
}

impl PrivateServer {
    /// A server without TLS.
    pub fn start() -> PrivateServer {
        PrivateServer::start_with(Tls::Off)
    }

    /// A server speaking TLS as `tls` says, with a CA and certificate of its
    /// own ([`PrivateServer::tls_files`]).
    pub fn start_with(tls: Tls) -> PrivateServer {
        let home = std::env::temp_dir().join(format!(
            "sasha-test-postgres-private-{:016x}",
            rand::random::<u64>()
        ));
        fs::create_dir_all(&home).expect("create a private PostgreSQL folder");
        if tls != Tls::Off {
            // Before the cluster is made: under root its folder, these files
            // included, is handed to the server's owner.
            write_tls_files(&home);
        }
        let port = create_and_start(&home, true, tls);
        PrivateServer { home, port, tls }
    }

    /// The CA, certificate and key of a TLS server; `None` without TLS.
    pub fn tls_files(&self) -> Option<TlsFiles> {
        (self.tls != Tls::Off).then(|| tls_files(&self.home))
    }

    /// A superuser connection to the server's `postgres` database: over the
    /// Unix socket on a TLS server (which may refuse plain TCP), else TCP.
    pub fn admin(&self) -> postgres::Client {
        let connected = if self.tls == Tls::Off {
            postgres::Client::connect(&url(self.port, "postgres"), postgres::NoTls)
        } else {
            postgres::Config::new()
                .host_path(&self.home)
                .port(self.port)
                .user(SUPERUSER)
                .dbname("postgres")
                .connect(postgres::NoTls)
        };
        connected.unwrap_or_else(|error| panic!("connect to the private PostgreSQL: {error}"))
    }

    /// A fresh database on this server, and its URL (naming no `sslmode`:
    /// a test adds the one it tries).
    pub fn database(&self) -> String {
        let name = format!("t{:016x}", rand::random::<u64>());
        self.admin()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tls_server_keeps_its_key_private_and_a_required_one_refuses_plain_tcp() {
        use std::os::unix::fs::MetadataExt as _;
        let server = PrivateServer::start_with(Tls::Required);
        let files = server.tls_files().unwrap();
        let key = fs::metadata(&files.key).unwrap();
        assert_eq!(key.mode() & 0o777, 0o600);
        // The server's owner owns it: `postgres` under root, else the user.
        let owner = if effective_uid() == 0 {
            let out = Command::new("id")
                .args(["-u", "postgres"])
                .output()
                .unwrap();
            String::from_utf8(out.stdout)
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        } else {
            effective_uid()
        };
        assert_eq!(key.uid(), owner);
        let ssl: String = server.admin().query_one("SHOW ssl", &[]).unwrap().get(0);
        assert_eq!(ssl, "on");
        // Plain TCP is refused by the server itself (pg_hba), not the client.
        let Err(error) = postgres::Client::connect(&server.database(), postgres::NoTls) else {
            panic!("a plain connection to a TLS-only server was accepted");
        };
        let refusal = error.as_db_error().unwrap().message().to_owned();
        assert!(refusal.contains("no encryption"), "{refusal}");
    }

    #[test]
    fn a_tls_server_that_does_not_require_it_still_takes_plain_tcp() {
        let server = PrivateServer::start_with(Tls::On);
        let mut client = postgres::Client::connect(&server.database(), postgres::NoTls).unwrap();
        let ssl: bool = client
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0);
        assert!(!ssl);
    }
}
