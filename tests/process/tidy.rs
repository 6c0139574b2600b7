//! The tree's structural rules, checked on the source itself (ARCHITECTURE.md
//! states them; this module makes them fail the build):
//!
//! - no service crate (studio-core, data-worker, mcp-gateway, edge-sandbox)
//!   depends on another: they meet only over the typed gRPC contract;
//! - a SQLite file is opened only by data-worker's engine, the core store and
//!   the backup command (tests and benches may open their own files);
//! - every Rust source file starts with a `//!` header;
//! - no crate declares a dependency it does not use (`cargo machete`, which
//!   `scripts/test.sh` installs);
//! - a proto field carries JSON text only where the caller's own data is the
//!   payload (the list below, each with its reason).
//!
//! What it must never do: pass by skipping a check it could not run.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::root;

const SERVICE_CRATES: [&str; 4] = ["studio-core", "data-worker", "mcp-gateway", "edge-sandbox"];

/// The files that may open a SQLite file, by path prefix.
const SQLITE_OPENERS: [&str; 3] = [
    "data-worker/src/engine",
    "studio-core/src/store/",
    "src/backup.rs",
];

/// The proto fields that carry JSON text: each is the caller's own data,
/// passed through unread by the services between.
const JSON_FIELDS: [(&str, &str); 5] = [
    (
        "arguments_json",
        "a tool call's arguments, as the model or app wrote them",
    ),
    (
        "suggestion_json",
        "the suggestion a person submitted, stored as they sent it",
    ),
    (
        "request_json",
        "a data request, as the caller wrote it, parsed once by data-worker",
    ),
    (
        "result_json",
        "the rows data-worker answers, passed through to the caller",
    ),
    (
        "arguments_json",
        "a confirmation's arguments, hashed and shown as given",
    ),
];

/// Every tracked file under the repository whose name ends in `suffix`.
fn tracked(suffix: &str) -> Vec<PathBuf> {
    let output = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root())
        .output()
        .expect("git ls-files");
    assert!(output.status.success(), "git ls-files failed");
    output
        .stdout
        .split(|byte| *byte == 0)
        .filter_map(|path| std::str::from_utf8(path).ok())
        .filter(|path| path.ends_with(suffix) && !path.contains("node_modules/"))
        .map(PathBuf::from)
        .collect()
}

fn is_test_or_bench(path: &Path) -> bool {
    let text = path.to_string_lossy();
    text.starts_with("tests/")
        || text.starts_with("benches/")
        || text.ends_with("/tests.rs")
        || text.contains("/tests/")
}

#[test]
fn no_service_crate_depends_on_another() {
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut checked = 0;
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        if !SERVICE_CRATES.contains(&name) {
            continue;
        }
        checked += 1;
        for dependency in package["dependencies"].as_array().unwrap() {
            let on = dependency["name"].as_str().unwrap();
            assert!(
                !SERVICE_CRATES.contains(&on),
                "{name} depends on {on}: service crates meet only over gRPC"
            );
        }
    }
    assert_eq!(
        checked,
        SERVICE_CRATES.len(),
        "every service crate was read"
    );
}

#[test]
fn only_the_engine_the_core_store_and_backup_open_sqlite_files() {
    let mut offenders = Vec::new();
    for path in tracked(".rs") {
        if is_test_or_bench(&path)
            || SQLITE_OPENERS.iter().any(|allowed| {
                path.starts_with(allowed) || path.to_string_lossy().starts_with(allowed)
            })
        {
            continue;
        }
        let text = std::fs::read_to_string(root().join(&path)).unwrap();
        // Inline test modules are tests too: only the code before them counts.
        let shipped = text.split("#[cfg(test)]").next().unwrap_or("");
        for needle in [
            "Connection::open(",
            "Connection::open_with_flags(",
            "open_with_flags_and_vfs(",
        ] {
            if shipped.contains(needle) {
                offenders.push(format!("{}: {needle}", path.display()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "SQLite files are opened only by data-worker's engine, the core store and `sasha backup`:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn every_source_file_starts_with_a_module_header() {
    let files = tracked(".rs");
    assert!(
        files.len() > 100,
        "the tree was read: {} files",
        files.len()
    );
    let missing: Vec<String> = files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(root().join(path)).unwrap();
            !text
                .lines()
                .find(|line| !line.trim().is_empty())
                .is_some_and(|line| line.starts_with("//!"))
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "each file starts with a `//!` header saying what it does and must never do:\n{}",
        missing.join("\n")
    );
}

#[test]
fn no_crate_declares_a_dependency_it_does_not_use() {
    let machete = std::env::var("CARGO_MACHETE").unwrap_or_else(|_| "cargo-machete".to_owned());
    let output = Command::new(&machete)
        .arg("--with-metadata")
        .current_dir(root())
        .output()
        .unwrap_or_else(|error| {
            panic!("{machete} is needed (scripts/test.sh installs it): {error}")
        });
    assert!(
        output.status.success(),
        "cargo machete found unused dependencies:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn proto_fields_carry_json_text_only_for_the_callers_own_data() {
    let protos = tracked(".proto");
    assert!(!protos.is_empty());
    let mut found = Vec::new();
    for path in protos {
        let text = std::fs::read_to_string(root().join(&path)).unwrap();
        let statements = text
            .lines()
            .map(|line| line.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        // A field is a statement: what follows the last `{` up to its `;`.
        for statement in statements.split(';') {
            let code = statement.rsplit(['{', '}']).next().unwrap_or("").trim();
            let mut words = code.split_whitespace();
            let (Some(kind), Some(name)) = (
                words
                    .next()
                    .filter(|word| *word != "repeated")
                    .or_else(|| words.next()),
                words.next(),
            ) else {
                continue;
            };
            if (kind == "string" || kind == "bytes") && name.to_ascii_lowercase().contains("json") {
                found.push(name.to_owned());
            }
        }
    }
    let allowed: Vec<&str> = JSON_FIELDS.iter().map(|(name, _)| *name).collect();
    for name in &found {
        assert!(
            allowed.contains(&name.as_str()),
            "proto field {name} carries JSON text; use a typed message, or add it to JSON_FIELDS with why"
        );
    }
    let mut listed = allowed.clone();
    listed.sort_unstable();
    let mut seen: Vec<&str> = found.iter().map(String::as_str).collect();
    seen.sort_unstable();
    assert_eq!(
        seen, listed,
        "JSON_FIELDS names exactly the fields that exist"
    );
}
