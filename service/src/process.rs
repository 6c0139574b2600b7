//! The shared `main` of every role: one Tokio runtime, telemetry, shutdown on
//! SIGINT/SIGTERM (or on stdin closing, when a supervisor asks for it), a
//! readiness line on stdout, and one clear line on stderr when it fails.
//!
//! A role's library exposes `serve_from_env(env, shutdown)`; both the role's own
//! binary and `sasha serve <role>` hand it to [`run_role`].
//!
//! Stopping is a drain: the first signal cancels `shutdown`, on which every
//! server stops accepting connections (its listener is closed), readiness
//! turns 503, and requests, calls and streams already running go on to
//! completion. The role exits 0 once they are done, or when
//! `SASHA_SHUTDOWN_GRACE_SECS` have passed or a second signal arrives, cutting
//! whatever still runs.

use std::future::Future;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::Role;
use crate::config::{ConfigError, Env, ProcessEnv, TelemetryConfig};

/// When this variable is `1`, the process also shuts down when its stdin reaches
/// end of file. `sasha up` sets it and holds the other end of a pipe, so its
/// children stop even if the supervisor itself is killed.
pub const EXIT_ON_STDIN_EOF: &str = "SASHA_EXIT_ON_STDIN_EOF";

/// Exit status for a configuration refused at boot.
pub const EXIT_CONFIG: u8 = 2;

/// The variable bounding the drain after SIGTERM, in seconds.
pub const SHUTDOWN_GRACE: &str = "SASHA_SHUTDOWN_GRACE_SECS";

/// How long in-flight work may run after shutdown begins, unless configured.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// `SASHA_SHUTDOWN_GRACE_SECS`: 0 to 3600 seconds, default 20.
pub fn shutdown_grace(env: &dyn Env) -> Result<Duration, ConfigError> {
    let seconds = crate::config::count(
        env,
        SHUTDOWN_GRACE,
        DEFAULT_SHUTDOWN_GRACE.as_secs() as usize,
        3600,
    )?;
    Ok(Duration::from_secs(seconds as u64))
}

/// Why a role stopped.
#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    /// A configuration value is unusable; the process never started serving.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// Start-up failed after configuration (a port taken, a file not writable).
    #[error("cannot start: {0}")]
    Startup(String),
    /// A server failed while running.
    #[error("failed: {0}")]
    Runtime(String),
}

/// Prints the readiness line a supervisor or test harness waits for:
/// `{"event":"ready","role":"…","listeners":{"http":"127.0.0.1:…"}}`.
pub fn announce_ready(role: Role, listeners: &[(&str, SocketAddr)]) {
    announce_ready_with(role, listeners, "");
}

/// [`announce_ready`], with the role's one start-up `summary` (what it found
/// and did) on the same log line: start-up is one line per role.
pub fn announce_ready_with(role: Role, listeners: &[(&str, SocketAddr)], summary: &str) {
    use std::io::Write;
    let listeners: serde_json::Map<String, serde_json::Value> = listeners
        .iter()
        .map(|(name, addr)| ((*name).to_owned(), addr.to_string().into()))
        .collect();
    let line = serde_json::json!({"event": "ready", "role": role.as_str(), "listeners": listeners});
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
    if summary.is_empty() {
        tracing::info!(role = role.as_str(), %line, "ready");
    } else {
        tracing::info!(role = role.as_str(), %line, summary, "ready");
    }
}

/// Binds a TCP listener, naming the variable when the address cannot be used.
pub async fn bind(
    var: &'static str,
    addr: SocketAddr,
) -> Result<tokio::net::TcpListener, RoleError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| RoleError::Startup(format!("{var}: cannot listen on {addr}: {error}")))
}

/// Runs one role to completion and turns the outcome into an exit code.
pub fn run_role<F, Fut>(role: Role, serve: F) -> ExitCode
where
    F: FnOnce(ProcessEnv, CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), RoleError>>,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("sasha {role}: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async move {
        let env = ProcessEnv;
        let telemetry = match TelemetryConfig::from_env(&env) {
            Ok(telemetry) => telemetry,
            Err(error) => return fail(role, RoleError::Config(error)),
        };
        let grace = match shutdown_grace(&env) {
            Ok(grace) => grace,
            Err(error) => return fail(role, RoleError::Config(error)),
        };
        let guard = match crate::telemetry::init(
            role,
            telemetry.rust_log.as_deref(),
            telemetry.otlp_endpoint.as_deref(),
        ) {
            Ok(guard) => guard,
            Err(error) => {
                eprintln!("sasha {role}: invalid configuration: {error}");
                return ExitCode::from(EXIT_CONFIG);
            }
        };
        let shutdown = CancellationToken::new();
        let cut = CancellationToken::new();
        spawn_shutdown_watchers(&env, shutdown.clone(), cut.clone(), grace);
        let serving = serve(env, shutdown.clone());
        let outcome = tokio::select! {
            outcome = serving => outcome,
            () = drain_deadline(&shutdown, &cut, grace) => {
                tracing::warn!(
                    grace_secs = grace.as_secs(),
                    "in-flight requests did not finish in time; cutting them"
                );
                Ok(())
            }
        };
        guard.shutdown();
        match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => fail(role, error),
        }
    });
    // The stdin watcher blocks a thread in read(2) until the supervisor closes
    // the pipe; do not wait for it (a plain drop of the runtime would).
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    code
}

fn fail(role: Role, error: RoleError) -> ExitCode {
    eprintln!("sasha {role}: {error}");
    match error {
        RoleError::Config(_) => ExitCode::from(EXIT_CONFIG),
        _ => ExitCode::FAILURE,
    }
}

/// Resolves `grace` after shutdown begins, or at once when `cut` is
/// cancelled (a second signal).
async fn drain_deadline(shutdown: &CancellationToken, cut: &CancellationToken, grace: Duration) {
    tokio::select! {
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(grace).await;
        } => {}
        () = cut.cancelled() => {}
    }
}

fn spawn_shutdown_watchers(
    env: &dyn Env,
    shutdown: CancellationToken,
    cut: CancellationToken,
    grace: Duration,
) {
    let signals = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!(
            grace_secs = grace.as_secs(),
            "shutting down: no new connections; in-flight requests may finish"
        );
        signals.cancel();
        wait_for_signal().await;
        tracing::warn!("second signal: stopping now");
        cut.cancel();
    });
    if env.var(EXIT_ON_STDIN_EOF).as_deref() == Some("1") {
        tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut stdin = tokio::io::stdin();
            let mut buffer = [0u8; 64];
            while matches!(stdin.read(&mut buffer).await, Ok(n) if n > 0) {}
            tracing::info!("supervisor went away; shutting down");
            shutdown.cancel();
        });
    }
}

/// Resolves on the first SIGINT or SIGTERM.
pub async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut interrupt), Ok(mut terminate)) => {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
