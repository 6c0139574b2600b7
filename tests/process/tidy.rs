//! The tree's structural rules, checked on the source itself (ARCHITECTURE.md
//! states them; this module makes them fail the build):
//!
//! - no service crate (studio-core, data-worker, mcp-gateway, edge-sandbox)
//!   depends on another: they meet only over the typed gRPC contract (the
//!   one exception: mcp-gateway's tests serve real studio-core and
//!   data-worker in process, as dev-dependencies only);
//! - a SQLite file is opened only by data-worker's engine, the core store and
//!   the backup command (tests and benches may open their own files);
//! - every Rust source file starts with a `//!` header;
//! - no crate declares a dependency it does not use (`cargo machete`, which
//!   `scripts/test.sh` installs);
//! - a proto field carries JSON text only where the caller's own data is the
//!   payload (the list below, each with its reason);
//! - README.md and ARCHITECTURE.md stay within the size a newcomer reads in
//!   one sitting, and every relative link in the project's documentation
//!   resolves, to a file and, for `#fragment`, to a heading of it;
//! - every workspace crate depends only on crates of a lower layer
//!   ([`LAYERS`]), and none holds more than [`MAX_CRATE_SHARE_PERCENT`] of
//!   the production Rust;
//! - no two files of a studio crate or of `sasha-package` import each other
//!   in a circle (`use crate::…`, `crate::…`, `super::…`; see `source`);
//! - a studio crate names wire types (`pb::…`) only in its gRPC module
//!   ([`WIRE_MODULES`]).
//!
//! What it must never do: pass by skipping a check it could not run.

mod source;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::root;

const SERVICE_CRATES: [&str; 4] = ["studio-core", "data-worker", "mcp-gateway", "edge-sandbox"];

/// The service crates a service crate's own tests may build on, as
/// dev-dependencies (never a normal or build dependency): `(crate, on)`.
/// mcp-gateway's in-process tier serves the real studio-core and
/// data-worker over a temporary folder.
const TEST_ONLY_SERVICE_EDGES: [(&str, &str); 2] = [
    ("mcp-gateway", "studio-core"),
    ("mcp-gateway", "data-worker"),
];

/// The workspace crates by layer, lowest first: a crate's normal and build
/// dependencies are all on lower layers, so the graph is a DAG one can
/// draw. The four service crates share a layer and so never depend on each
/// other; the studio crates below studio-core each own one job of the
/// control plane and depend downward only. sasha-testkit (throwaway
/// engines for tests) depends on no workspace crate.
const LAYERS: [&[&str]; 10] = [
    &["sasha-contract", "sasha-testkit"],
    &["sasha-proto", "sasha-package"],
    &["sasha-service"],
    &["sasha-replica"],
    &["studio-store"],
    &["studio-uploads"],
    &["studio-identity"],
    &["studio-assistant"],
    &["studio-core", "data-worker", "mcp-gateway", "edge-sandbox"],
    &["sasha"],
];

/// The most of the workspace's production Rust one crate may hold, in
/// percent: past it a crate does several jobs, and a newcomer cannot find
/// the room for a change. Production Rust is the lines of code (neither
/// blank nor comment) of every `.rs` file below a crate's `src/`, less test
/// files and inline `#[cfg(test)]` modules (`source::production_files`).
const MAX_CRATE_SHARE_PERCENT: usize = 30;

/// The crates whose files may not import each other in a circle.
const CIRCLE_FREE_CRATES: [&str; 6] = [
    "studio-core",
    "studio-store",
    "studio-identity",
    "studio-assistant",
    "studio-uploads",
    "package",
];

/// Where a studio crate may name wire types (`pb::…`), by path prefix: the
/// gRPC modules that convert them to and from the domain's own types
/// (studio-core's `CoreService` and its `DataService` client).
/// studio-uploads' wire is the pipe to its conversion child.
const WIRE_MODULES: [(&str, &[&str]); 5] = [
    ("studio-core", &["grpc.rs", "grpc/", "data_worker.rs"]),
    ("studio-store", &[]),
    ("studio-identity", &[]),
    ("studio-assistant", &[]),
    ("studio-uploads", &["isolate.rs"]),
];

/// The files that may open a SQLite file, by path prefix.
const SQLITE_OPENERS: [&str; 4] = [
    "data-worker/src/engine",
    "studio-store/src/",
    "src/backup.rs",
    "src/restore.rs",
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
        || is_named_test_module(path)
}

/// `<dir>/<name>_tests.rs` whose parent `<dir>.rs` declares it
/// `#[cfg(test)] mod <name>_tests;`: a test module under another name.
fn is_named_test_module(path: &Path) -> bool {
    let Some(name) = path
        .file_stem()
        .and_then(|stem| stem.to_str())
        .filter(|stem| stem.ends_with("_tests"))
    else {
        return false;
    };
    let parent = path.parent().map(|dir| dir.with_extension("rs"));
    parent
        .and_then(|parent| std::fs::read_to_string(root().join(parent)).ok())
        .is_some_and(|text| text.contains(&format!("#[cfg(test)]\nmod {name};")))
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
            let test_only =
                dependency["kind"] == "dev" && TEST_ONLY_SERVICE_EDGES.contains(&(name, on));
            assert!(
                !SERVICE_CRATES.contains(&on) || test_only,
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

/// One workspace member as `cargo metadata` describes it.
struct Member {
    name: String,
    /// Its folder, relative to the root.
    folder: PathBuf,
    /// Its dependencies as `(name, kind)`, kind `None` for a normal one.
    dependencies: Vec<(String, Option<String>)>,
}

/// Every workspace member.
fn workspace_members() -> Vec<Member> {
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
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            let manifest = Path::new(package["manifest_path"].as_str().unwrap());
            let folder = manifest
                .parent()
                .unwrap()
                .strip_prefix(root())
                .unwrap()
                .to_path_buf();
            let dependencies = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|dependency| {
                    (
                        dependency["name"].as_str().unwrap().to_owned(),
                        dependency["kind"].as_str().map(str::to_owned),
                    )
                })
                .collect();
            Member {
                name: package["name"].as_str().unwrap().to_owned(),
                folder,
                dependencies,
            }
        })
        .collect()
}

fn layer_of(name: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&name))
}

#[test]
fn workspace_crates_depend_downward_only() {
    let members = workspace_members();
    let names: Vec<&str> = members.iter().map(|member| member.name.as_str()).collect();
    let mut layered: Vec<&str> = LAYERS
        .iter()
        .flat_map(|layer| layer.iter().copied())
        .collect();
    layered.sort_unstable();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, layered, "LAYERS names every workspace crate once");
    let mut upward = Vec::new();
    for Member {
        name, dependencies, ..
    } in &members
    {
        let layer = layer_of(name).unwrap();
        for (on, kind) in dependencies {
            let Some(on_layer) = layer_of(on) else {
                continue;
            };
            if kind.as_deref() != Some("dev") && on_layer >= layer {
                upward.push(format!("{name} -> {on}"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "a crate depends on one of its own layer or above (see LAYERS):\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_crate_holds_more_than_its_share_of_production_rust() {
    let shares: BTreeMap<String, usize> = workspace_members()
        .into_iter()
        .map(|Member { name, folder, .. }| {
            let lines = source::production_files(&root().join(folder).join("src"))
                .values()
                .map(|code| code.lines().filter(|line| !line.trim().is_empty()).count())
                .sum();
            (name, lines)
        })
        .collect();
    let total: usize = shares.values().sum();
    assert!(total > 20_000, "the workspace was read: {total} lines");
    let over: Vec<String> = shares
        .iter()
        .filter(|(_, lines)| **lines * 100 > total * MAX_CRATE_SHARE_PERCENT)
        .map(|(name, lines)| format!("{name}: {lines} of {total} lines"))
        .collect();
    assert!(
        over.is_empty(),
        "a crate holds more than {MAX_CRATE_SHARE_PERCENT} % of the production Rust; split it along its jobs:\n{}",
        over.join("\n")
    );
}

#[test]
fn no_files_of_a_studio_crate_or_the_package_crate_import_each_other_in_a_circle() {
    let mut found = Vec::new();
    for krate in CIRCLE_FREE_CRATES {
        let files = source::production_files(&root().join(krate).join("src"));
        assert!(files.len() > 5, "{krate} was read: {} files", files.len());
        let graph = source::import_graph(&files);
        let edges: usize = graph.values().map(|targets| targets.len()).sum();
        assert!(edges > 5, "{krate}'s imports were read: {edges}");
        for circle in source::circles(&graph) {
            found.push(format!("{krate}: {}", circle.join(", ")));
        }
    }
    assert!(
        found.is_empty(),
        "files that import each other in a circle (move what both need into a module below them):\n{}",
        found.join("\n")
    );
}

#[test]
fn studio_crates_name_wire_types_only_in_their_grpc_module() {
    let mut found = Vec::new();
    for (krate, allowed) in WIRE_MODULES {
        let files = source::production_files(&root().join(krate).join("src"));
        assert!(!files.is_empty(), "{krate} was read");
        for (relative, code) in files {
            if allowed.iter().any(|prefix| relative.starts_with(prefix)) {
                continue;
            }
            if code.contains("pb::") || code.contains("sasha_proto::pb") {
                found.push(format!("{krate}/src/{relative}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "wire types stay at the wire: these files name pb::… outside their crate's gRPC module (take and return domain types; convert in the gRPC module):\n{}",
        found.join("\n")
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
        "SQLite files are opened only by data-worker's engine, the core store, `sasha backup` and `sasha restore`:\n{}",
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

/// Most lines README.md may have: what Sasha Apps is, the two commands that
/// run and test it, and where everything else is (`docs/`).
const README_MAX_LINES: usize = 400;

/// Most bytes ARCHITECTURE.md may have (as `wc -c` counts): a map read in one
/// sitting; decisions live in `docs/decisions/`, manuals in `docs/`.
const ARCHITECTURE_MAX_BYTES: usize = 40_000;

/// The Markdown whose relative links must resolve: the two root files and
/// every tracked `.md` under these folders (app packages' `APP.md` files and
/// test fixtures are app content, not documentation).
const DOCUMENTATION: [&str; 5] = [
    "docs/",
    "deploy/",
    "bench/",
    "mcp-gateway/docs/",
    "contract/docs/",
];

#[test]
fn readme_and_architecture_stay_short() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move the detail into docs/ and link it"
    );
    let architecture = std::fs::read(root().join("ARCHITECTURE.md")).unwrap();
    assert!(
        architecture.len() <= ARCHITECTURE_MAX_BYTES,
        "ARCHITECTURE.md has {} bytes, more than {ARCHITECTURE_MAX_BYTES}: move decisions into docs/decisions/ and detail into docs/ or the modules' headers",
        architecture.len()
    );
}

/// The lines of `markdown` outside fenced code blocks, with inline code spans
/// blanked, so a link or heading shown as code is not read as one.
fn prose_lines(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut prose = String::with_capacity(line.len());
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                prose.push(c);
            }
        }
        lines.push(prose);
    }
    lines
}

/// The fragment GitHub gives a heading: lower case, letters, digits, `-`
/// and `_` kept, spaces turned into `-`, everything else dropped.
fn heading_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every heading fragment of `markdown` (its code spans count as text here,
/// as they do for GitHub).
fn anchors(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let text = line.trim_start_matches('#');
        if text.starts_with(' ') {
            found.push(heading_anchor(text));
        }
    }
    found
}

/// The targets of the inline links `[text](target)` in `markdown`'s prose.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_lines(markdown) {
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].trim().to_owned());
            rest = &after[end..];
        }
    }
    targets
}

#[test]
fn every_relative_link_in_the_documentation_resolves() {
    let mut files: Vec<PathBuf> =
        vec![PathBuf::from("README.md"), PathBuf::from("ARCHITECTURE.md")];
    files.extend(tracked(".md").into_iter().filter(|path| {
        DOCUMENTATION
            .iter()
            .any(|folder| path.to_string_lossy().starts_with(folder))
    }));
    assert!(
        files.len() > 20,
        "the documentation was read: {} files",
        files.len()
    );
    let mut checked = 0;
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        let folder = file.parent().unwrap_or(Path::new(""));
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = match target.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                folder.join(path)
            };
            let on_disk = root().join(&resolved);
            if !on_disk.exists() {
                broken.push(format!(
                    "{}: {target} (no {})",
                    file.display(),
                    resolved.display()
                ));
                continue;
            }
            let Some(fragment) = fragment else { continue };
            let linked = std::fs::read_to_string(&on_disk).unwrap_or_default();
            if !on_disk.is_file() || !anchors(&linked).iter().any(|anchor| anchor == fragment) {
                broken.push(format!(
                    "{}: {target} (no heading #{fragment})",
                    file.display()
                ));
            }
        }
    }
    assert!(checked > 50, "links were found: {checked}");
    assert!(
        broken.is_empty(),
        "relative links that lead nowhere:\n{}",
        broken.join("\n")
    );
}

#[test]
fn headings_become_the_fragments_github_links_to() {
    for (heading, anchor) in [
        (" What `sasha up` gives you", "what-sasha-up-gives-you"),
        (
            " TLS, cookies and the one trusted hop",
            "tls-cookies-and-the-one-trusted-hop",
        ),
        (" Stopping: SIGTERM drains", "stopping-sigterm-drains"),
        (" A script's token", "a-scripts-token"),
        (
            " Realm lockdown (catalogue B9)",
            "realm-lockdown-catalogue-b9",
        ),
    ] {
        assert_eq!(heading_anchor(heading), anchor, "{heading}");
    }
    let text = "# Title\n\n```sh\n# not a heading\n```\nSee [one](a.md#x) and `[code](b.md)`.\n";
    assert_eq!(anchors(text), ["title"]);
    assert_eq!(link_targets(text), ["a.md#x"]);
}
