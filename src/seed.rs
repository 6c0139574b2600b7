//! `sasha seed`: installs the bundled apps (and `_shared`) into a state
//! folder's docs tree, the way studio-core does at startup, but under the
//! standalone lock `<DOCS_ROOT>/.bundled-apps.lock` instead of the knowledge
//! flock (see `studio_core::seed`).
//!
//! Prints the report as pretty JSON on stdout. Exit status: 0 when every app
//! was installed, up to date, replaced, preserved or retired; 1 when seeding
//! could not run (an abandoned lock, a read-only docs root) or an app ended in
//! `error`, with one line on stderr.

use std::path::Path;
use std::process::ExitCode;

use studio_core::seed;

use crate::admin;

/// Runs `sasha seed` on the docs tree of `state_dir` (else `SASHA_STATE_DIR`,
/// else `./.sasha`; `DOCS_ROOT` overrides), resolved as `sasha admin` does.
pub(crate) fn main(state_dir: Option<&Path>) -> ExitCode {
    let paths = match admin::storage_paths(state_dir) {
        Ok(paths) => paths,
        Err(error) => {
            eprintln!("sasha seed: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    let report = match seed::seed_standalone(&paths.docs_root) {
        Ok(report) => report,
        Err(error) => {
            eprintln!("sasha seed: {error}");
            return ExitCode::FAILURE;
        }
    };
    match serde_json::to_string_pretty(&report) {
        Ok(json) => println!("{json}"),
        Err(error) => {
            eprintln!("sasha seed: cannot render the report: {error}");
            return ExitCode::FAILURE;
        }
    }
    let failed: Vec<&str> = report
        .apps
        .iter()
        .filter(|app| app.outcome == seed::Outcome::Error)
        .map(|app| app.id.as_str())
        .collect();
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "sasha seed: not seeded: {} (see each entry's warning)",
            failed.join(", ")
        );
        ExitCode::FAILURE
    }
}
