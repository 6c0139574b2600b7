//! `sasha`: one binary for every role of Sasha Apps.
//!
//! - `sasha up` runs the whole system locally: the four roles as child processes
//!   plus a development ingress on one port that routes like the production proxy.
//! - `sasha serve <role>` runs one role; this is what a container runs.
//! - `sasha admin …` manages users, tokens and app grants in a core database.
//! - `sasha seed` installs the bundled apps into a state folder's docs tree.
//! - `sasha certs` writes the internal PKI of a deployment.
//! - `sasha backup` copies the core and app databases of a running stack.
//! - `sasha audit` verifies and exports the apps' hash-chained audit ledgers.
//! - `sasha restore` rebuilds a state folder from object storage.

mod admin;
mod audit;
mod backup;
mod certs;
mod ingress;
mod litestream;
mod restore;
mod seed;
mod up;

use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: a governed call allocates and frees
/// thousands of small JSON, HTTP/2 and SQLite buffers across threads, where
/// glibc's arenas spent a fifth of each role's CPU time (profiled under the
/// load benchmark; bench/README.md). Built with `no_thp`: transparent huge
/// pages would round each role's small heaps up to 2 MiB pages.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand, ValueEnum};
use sasha_service::Role;
use sasha_service::process::run_role;

/// Sasha Apps: build-free HTML/CSS/JS apps next to an AI assistant, sandboxed,
/// with governed data and an MCP surface.
#[derive(Debug, Parser)]
#[command(name = "sasha", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the whole system locally: all four roles plus a development ingress.
    ///
    /// Studio is served at http://localhost:PORT and the app sandbox at
    /// http://127.0.0.1:PORT (two hostnames, so cookies stay apart). State
    /// (documents, databases, development certificates, the dev admin's
    /// credentials) lives in the state folder. Stops every role on Ctrl-C or
    /// SIGTERM; if a role dies, says which and exits non-zero.
    Up {
        /// The state folder [env: SASHA_STATE_DIR] [default: ./.sasha]
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// The ingress port on 127.0.0.1 (and ::1 when available).
        #[arg(long, value_name = "N", default_value_t = 3007)]
        port: u16,
        /// How many studio-core replicas to run behind the ingress (1 to 8);
        /// more than one needs DATABASE_URL (a PostgreSQL core database).
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=i64::from(up::MAX_CORE_REPLICAS)))]
        core_replicas: u8,
        /// How many data-workers to run (1 to 8); more than one hold leases
        /// from studio-core and share the apps, and need SASHA_REPLICA_URL
        /// (a worker taking over a lost one's apps restores them from object
        /// storage).
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=i64::from(up::MAX_DATA_WORKERS)))]
        workers: u8,
    },
    /// Work with app packages.
    App {
        #[command(subcommand)]
        command: AppCommand,
    },
    /// Run one role in the foreground, configured from the environment.
    ///
    /// Prints one JSON readiness line on stdout once it listens
    /// ({"event":"ready","role":…,"listeners":{…}}). On SIGINT or SIGTERM it
    /// drains: it stops accepting connections, /readyz turns 503, and requests
    /// and streams in flight finish (up to SASHA_SHUTDOWN_GRACE_SECS, or until
    /// a second signal); then it exits 0.
    /// A configuration it cannot use stops it at boot with exit status 2 and one
    /// line naming the variable.
    #[command(after_long_help = sasha_service::config::variables_help())]
    Serve {
        /// The role to run.
        role: RoleArg,
    },
    /// Manage users, access tokens and app grants in a state folder's core
    /// database; safe while the stack runs.
    ///
    /// Exits 2 when the command line or an input is refused, 1 on any other
    /// failure, with one line on stderr.
    Admin {
        #[command(subcommand)]
        command: admin::AdminCommand,
    },
    /// Install the bundled apps into a state folder's docs tree (DOCS_ROOT),
    /// as studio-core does at startup, and print the report as JSON.
    ///
    /// An absent app (or _shared) is installed; one matching the bundle is left
    /// untouched; an untouched older release is replaced; anything edited is
    /// preserved with a warning; untouched retired samples move to
    /// DOCS_ROOT/.retired-bundled-apps/apps/. Holds DOCS_ROOT/.bundled-apps.lock
    /// while it runs; if that file exists (a killed run leaves it), it fails
    /// closed: make sure no seeder runs, then remove the file. Do not run it
    /// while studio-core starts against the same docs root. Exits 1 on failure,
    /// with one line on stderr.
    Seed {
        /// The state folder; the docs tree is its docs/ unless DOCS_ROOT names
        /// another [env: SASHA_STATE_DIR] [default: ./.sasha]
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// Write the internal PKI of a deployment: one CA and, for studio-core,
    /// data-worker and mcp-gateway, a certificate (SAN <role>.sasha.internal,
    /// server and client auth) and its key, as PEM files.
    ///
    /// Layout: DIR/ca.pem, DIR/<role>/cert.pem, DIR/<role>/key.pem (keys mode
    /// 0600; run it as the user the roles run as). The CA's key is never
    /// written. When DIR already holds the whole set it is kept and the command
    /// succeeds, so it can run on every start; a partial set is refused.
    /// Exits 1 on failure, with one line on stderr.
    Certs {
        /// The folder to write the set into (created if needed).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Mint a new CA and certificates even if DIR holds a set (restart
        /// every role afterwards).
        #[arg(long)]
        force: bool,
    },
    /// Copy the core database (DB_PATH) and every app database in
    /// APP_DATA_ROOT into DIR/<timestamp>/, consistently, while the stack runs.
    ///
    /// Uses SQLite's online backup API (each copy is one committed state of its
    /// database), checks every copy with PRAGMA integrity_check and writes
    /// manifest.json with each file's size and sha256. The folder appears
    /// complete or not at all; its path is printed. Uploaded documents are in
    /// the core database's copy; DOCS_ROOT and UPLOADS_ROOT (an earlier
    /// build's upload folder) are plain files and are not copied. Exits 1 on
    /// failure, with one line on stderr.
    Backup {
        /// The folder backups go into (created if needed).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The state folder whose databases to copy; DB_PATH and APP_DATA_ROOT
        /// override it as they do for the services [env: SASHA_STATE_DIR]
        /// [default: ./.sasha]
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// Verify or export the apps' hash-chained audit ledgers (APP_DATA_ROOT),
    /// while the stack runs.
    Audit {
        #[command(subcommand)]
        command: audit::AuditCommand,
    },
    /// Rebuild a state folder from object storage: the core database and
    /// every app database (or one), latest or as they were at an instant.
    ///
    /// Each database comes from its newest generation that began at or
    /// before --at, restored with litestream (SASHA_LITESTREAM, default
    /// `litestream` on PATH) using AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY, and passes PRAGMA integrity_check. DOCS_ROOT is
    /// rebuilt from the revision ledger in the restored core database, which
    /// holds the uploaded documents; those an earlier build mirrored to
    /// object storage are imported into it. DIR must be new
    /// or empty (with --app,
    /// only that app's file must not exist); everything appears at once, with
    /// restore-manifest.json saying what came from where. Exits 2 when an
    /// argument, a variable or the folder must change, 1 on a failure, with
    /// one line on stderr.
    Restore {
        /// The replica location, as SASHA_REPLICA_URL
        /// (s3://BUCKET/PREFIX?endpoint=…&region=…).
        #[arg(long, value_name = "URL")]
        from: String,
        /// The state folder to create.
        #[arg(long, value_name = "DIR")]
        state_dir: PathBuf,
        /// Restore the state as it was at this instant (RFC 3339, e.g.
        /// 2026-12-06T03:00:00Z) instead of the latest.
        #[arg(long, value_name = "TIME")]
        at: Option<String>,
        /// Restore only this app's database, into DIR's app data folder.
        #[arg(long, value_name = "ID")]
        app: Option<String>,
    },
    /// studio-core's document-conversion child: one file in on stdin, its
    /// Markdown out on stdout, confined (studio_uploads::isolate).
    #[command(hide = true)]
    ConvertDocument,
    /// `sasha up`'s replicator of one role: Litestream with only a control
    /// socket, stopped when stdin closes.
    #[command(hide = true)]
    Litestream {
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum AppCommand {
    /// Validate the package in DIR with the same validator Studio uses, and print
    /// `{ok, revision, diagnostics}` as JSON. Exits 0 when the package is valid,
    /// 1 when it is not. The folder's name is the app id the manifest must carry.
    Check {
        /// The package folder, e.g. docs/apps/time-sheet
        dir: PathBuf,
    },
}

/// The roles `sasha serve` can run.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum RoleArg {
    /// The sandbox origin: GET /app-sandbox and its proxy script.
    EdgeSandbox,
    /// Users, catalogue, grants, the Studio UI and /api.
    StudioCore,
    /// The governed per-app SQLite data service.
    DataWorker,
    /// The MCP endpoint /mcp.
    McpGateway,
}

impl From<RoleArg> for Role {
    fn from(role: RoleArg) -> Role {
        match role {
            RoleArg::EdgeSandbox => Role::EdgeSandbox,
            RoleArg::StudioCore => Role::StudioCore,
            RoleArg::DataWorker => Role::DataWorker,
            RoleArg::McpGateway => Role::McpGateway,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Up {
            state_dir,
            port,
            core_replicas,
            workers,
        } => up::main(
            state_dir,
            port,
            up::Copies {
                core_replicas,
                workers,
            },
        ),
        Command::App {
            command: AppCommand::Check { dir },
        } => app_check(&dir),
        Command::Serve { role } => match Role::from(role) {
            role @ Role::EdgeSandbox => run_role(role, edge_sandbox::serve_from_env),
            role @ Role::StudioCore => run_role(role, studio_core::serve_from_env),
            role @ Role::DataWorker => run_role(role, data_worker::serve_from_env),
            role @ Role::McpGateway => run_role(role, mcp_gateway::serve_from_env),
        },
        Command::Admin { command } => admin::main(command),
        Command::Seed { state_dir } => seed::main(state_dir.as_deref()),
        Command::Certs { out, force } => certs::main(&out, force),
        Command::Backup { out, state_dir } => backup::main(&out, state_dir.as_deref()),
        Command::Audit { command } => audit::main(command),
        Command::Restore {
            from,
            state_dir,
            at,
            app,
        } => restore::main(restore::Request {
            from,
            state_dir,
            at,
            app,
        }),
        Command::ConvertDocument => studio_uploads::isolate::run_child(),
        Command::Litestream { socket } => litestream::main(socket),
    }
}

/// `sasha app check DIR`.
fn app_check(dir: &std::path::Path) -> ExitCode {
    let validation = sasha_package::validate::validate_dir(dir);
    let status = validation.status();
    match serde_json::to_string_pretty(&status) {
        Ok(json) => println!("{json}"),
        Err(error) => {
            eprintln!("sasha app check: cannot render the result: {error}");
            return ExitCode::FAILURE;
        }
    }
    if status.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
