//! `sasha audit verify [--app ID]` and `sasha audit export --app ID`: each
//! app's audit ledger checked against its hash chain
//! (`data_worker::engine::ledger`), read straight from `APP_DATA_ROOT` as
//! `sasha backup` reads it, while the stack runs.
//!
//! Each ledger is read inside one read transaction (one committed state; WAL
//! readers never block data-worker). `verify` prints one line per app and
//! exits 1 when any ledger does not verify, naming its first bad entry;
//! `export` writes the verified entries as JSON Lines that a third party
//! re-hashes with the procedure in docs/audit.md, and fails at the first
//! entry that does not verify.
//!
//! What it must never do: write to an app's database, or report a ledger as
//! verified when any entry of it was not re-hashed.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, anyhow, bail};
use clap::Subcommand;
use data_worker::engine::ledger::{self, Break, ExportLine, Verification};

#[derive(Debug, Subcommand)]
pub(crate) enum AuditCommand {
    /// Check every app's audit ledger (or one app's) against its hash chain.
    ///
    /// Prints one line per app: `ok APP ENTRIES HEAD` (HEAD is the last
    /// entry's hash, which commits to the whole ledger: record it to detect a
    /// later truncation), or `failed APP: entry N …` naming the first entry
    /// that does not verify. Exits 1 when any ledger fails, 2 when the
    /// command line or the folder must change.
    Verify {
        /// Only this app's ledger.
        #[arg(long, value_name = "ID")]
        app: Option<String>,
        /// The state folder; APP_DATA_ROOT overrides it as it does for the
        /// services [env: SASHA_STATE_DIR] [default: ./.sasha]
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// Write one app's audit ledger as JSON Lines (one entry a line, with
    /// its `prev` and `hash`), verified as it is written; see docs/audit.md
    /// for how to check it without Sasha.
    Export {
        #[arg(long, value_name = "ID")]
        app: String,
        /// The file to write (new); standard output without it.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
}

/// A refusal of the command line or of the folder (exit 2).
#[derive(Debug)]
struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

pub(crate) fn main(command: AuditCommand) -> ExitCode {
    let result = match command {
        AuditCommand::Verify { app, state_dir } => verify_all(app.as_deref(), state_dir.as_deref()),
        AuditCommand::Export {
            app,
            out,
            state_dir,
        } => export(&app, out.as_deref(), state_dir.as_deref()).map(|()| true),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            let message = format!("{error:#}").replace(['\n', '\r'], " ");
            eprintln!("sasha audit: {message}");
            if error.downcast_ref::<Usage>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// The app databases to read: every one, or `app`'s (which must exist).
fn databases(
    app: Option<&str>,
    state_dir: Option<&Path>,
) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let storage = crate::admin::storage_paths(state_dir)?;
    let all = crate::backup::app_databases(&storage.app_data_root)
        .map_err(|error| anyhow!(Usage(format!("{error:#}"))))?;
    match app {
        None => Ok(all),
        Some(app) => {
            let found: Vec<_> = all.into_iter().filter(|(id, _)| id == app).collect();
            if found.is_empty() {
                bail!(Usage(format!(
                    "no data for app {app:?} in {}: check the app id and --state-dir (or APP_DATA_ROOT)",
                    storage.app_data_root.display()
                )));
            }
            Ok(found)
        }
    }
}

fn describe(id: i64, why: Break) -> String {
    match why {
        Break::Altered => format!(
            "entry {id} does not match its hash: it, or the entry before it, was changed after it was written"
        ),
        Break::Missing => format!("entry {id} is missing: it was removed from the ledger"),
        Break::Unchained => format!(
            "entry {id} has no hash: data-worker chains this ledger when it next opens the app"
        ),
    }
}

fn verify_all(app: Option<&str>, state_dir: Option<&Path>) -> anyhow::Result<bool> {
    let mut all_ok = true;
    let mut out = std::io::stdout().lock();
    for (id, path) in databases(app, state_dir)? {
        let found: Verification =
            ledger::verify_file(&path, |_, _, _| Ok(())).with_context(|| format!("app {id}"))?;
        match found.first_break {
            Some((entry, why)) => {
                all_ok = false;
                writeln!(out, "failed {id}: {}", describe(entry, why))?;
            }
            None => {
                let start = found
                    .chained_from
                    .map(|start| {
                        format!(
                            " (entries up to {} were chained as they stood at {})",
                            start.through, start.chained_at
                        )
                    })
                    .unwrap_or_default();
                writeln!(
                    out,
                    "ok {id} {} {}{start}",
                    found.entries,
                    found.head.as_deref().unwrap_or(ledger::GENESIS)
                )?;
            }
        }
    }
    Ok(all_ok)
}

fn export(app: &str, out: Option<&Path>, state_dir: Option<&Path>) -> anyhow::Result<()> {
    let (_, path) = databases(Some(app), state_dir)?
        .pop()
        .ok_or_else(|| anyhow!("no data for app {app:?}"))?;
    let mut writer: Box<dyn std::io::Write> = match out {
        Some(file) => Box::new(std::io::BufWriter::new(
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(file)
                .with_context(|| format!("cannot create {}", file.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let found = ledger::verify_file(&path, |entry, prev, hash| {
        serde_json::to_writer(&mut writer, &ExportLine { entry, prev, hash })?;
        writer.write_all(b"\n")
    })?;
    writer.flush()?;
    if let Some((entry, why)) = found.first_break {
        bail!(
            "app {app}: {}; the export stops before it",
            describe(entry, why)
        );
    }
    eprintln!(
        "sasha audit: exported {} entries of {app}; head {}",
        found.entries,
        found.head.as_deref().unwrap_or(ledger::GENESIS)
    );
    Ok(())
}
