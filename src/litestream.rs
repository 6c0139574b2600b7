//! `sasha litestream --socket PATH` (hidden): one Litestream replicator as
//! a child `sasha up` can rely on, and the replication sidecar of
//! studio-core and data-worker in Compose and Kubernetes. It writes the daemon's configuration
//! (the control socket only; the role registers its databases at runtime),
//! runs `litestream replicate` with the object storage credentials and
//! without `AWS_CA_BUNDLE`, and stops it (SIGTERM: Litestream's final sync,
//! then SIGKILL after a grace) when stdin closes or a signal arrives, so a
//! supervisor killed outright leaves no replicator behind. It exits with
//! Litestream's failure when Litestream stops by itself.
//!
//! What it must never do: put a credential on a command line or in the
//! configuration file.

use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use sasha_replica::config::{
    ACCESS_KEY_ID, Credentials, LITESTREAM, SECRET_ACCESS_KEY, SESSION_TOKEN,
};
use sasha_service::config::{Env, ProcessEnv};
use tokio::io::AsyncReadExt as _;

/// How long Litestream may take for its final sync after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(15);

pub(crate) fn main(socket: PathBuf) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("sasha litestream: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(socket));
    // The read of stdin that watches the supervisor is a blocking thread
    // which a runtime's drop would wait for (the pipe stays open): leave it.
    runtime.shutdown_background();
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("sasha litestream: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(socket: PathBuf) -> Result<ExitCode, String> {
    let env = ProcessEnv;
    // Without credentials it still serves its socket: a sidecar deployed
    // while replication is off (SASHA_REPLICA_URL unset) is never asked to
    // replicate anything, and must not stop its pod from starting.
    let credentials = match (env.var(ACCESS_KEY_ID), env.var(SECRET_ACCESS_KEY)) {
        (Some(access_key_id), Some(secret_access_key)) => Some(Credentials {
            access_key_id,
            secret_access_key,
            session_token: env.var(SESSION_TOKEN),
        }),
        (None, None) => None,
        (Some(_), None) => {
            return Err(format!(
                "{SECRET_ACCESS_KEY}: must be set with {ACCESS_KEY_ID}"
            ));
        }
        (None, Some(_)) => {
            return Err(format!(
                "{ACCESS_KEY_ID}: must be set with {SECRET_ACCESS_KEY}"
            ));
        }
    };
    let bin = env
        .var(LITESTREAM)
        .map_or_else(|| PathBuf::from("litestream"), PathBuf::from);
    let config = sasha_replica::litestream::daemon_config_path(&socket);
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        if let Some(folder) = config.parent() {
            std::fs::create_dir_all(folder)
                .map_err(|error| format!("cannot create {}: {error}", folder.display()))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&config)
            .map_err(|error| format!("cannot write {}: {error}", config.display()))?;
        file.write_all(sasha_replica::litestream::daemon_config(&socket).as_bytes())
            .map_err(|error| format!("cannot write {}: {error}", config.display()))?;
    }
    let mut child = sasha_replica::litestream::command(&bin, credentials.as_ref())
        .arg("replicate")
        .arg("-config")
        .arg(&config)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| {
            format!(
                "cannot run {} ({error}); install litestream 0.5 or set {LITESTREAM}",
                bin.display()
            )
        })?;
    let pid = child.id();
    let stdin_closed = async {
        if std::env::var_os(sasha_service::process::EXIT_ON_STDIN_EOF).is_none() {
            return std::future::pending::<()>().await;
        }
        let mut stdin = tokio::io::stdin();
        let mut buffer = [0u8; 64];
        while matches!(stdin.read(&mut buffer).await, Ok(read) if read > 0) {}
    };
    tokio::select! {
        status = child.wait() => {
            let status = status.map_err(|error| error.to_string())?;
            return Err(format!("litestream stopped by itself ({status})"));
        }
        () = sasha_service::process::wait_for_signal() => {}
        () = stdin_closed => {}
    }
    if let Some(pid) = pid {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
    }
    match tokio::time::timeout(STOP_GRACE, child.wait()).await {
        Ok(_) => {}
        Err(_) => {
            let _ = child.kill().await;
        }
    }
    Ok(ExitCode::SUCCESS)
}
