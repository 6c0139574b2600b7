//! Seeding the bundled apps: `sasha seed` (the standalone lock) and
//! studio-core's startup (the knowledge flock), on real state folders.
//!
//! The bundle is the repository's `apps/` as embedded in the binary; the
//! retired samples are `tests/fixtures/retired-apps/`, whose tree hashes
//! `scripts/bundled-app-shipped-hashes.json` lists.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, ExitStatus};

use common::tree_identity::identities;
use common::{Harness, copy_dir, get, root, sasha_bin};
use sasha_service::Role;

const APP: &str = "time-sheet-entry";
const RETIRED: [&str; 3] = ["email-drafter", "candidate-comparison", "report-builder"];

/// Runs `sasha seed --state-dir STATE`; returns its status, its stdout as JSON
/// (`null` when it is not JSON) and its stderr.
fn seed(state: &Path) -> (ExitStatus, serde_json::Value, String) {
    let output = Command::new(sasha_bin())
        .args(["seed", "--state-dir"])
        .arg(state)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .expect("run sasha seed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    (
        output.status,
        serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `sasha seed` that must succeed; returns the report.
fn seed_ok(state: &Path) -> serde_json::Value {
    let (status, report, stderr) = seed(state);
    assert!(
        status.success(),
        "sasha seed failed ({status}): {stderr}\n{report}"
    );
    report
}

/// The report's entry for `id`.
fn entry<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["apps"]
        .as_array()
        .expect("apps")
        .iter()
        .find(|app| app["id"] == id)
        .unwrap_or_else(|| panic!("no entry for {id} in {report:#}"))
}

/// Every folder (`None`) and file (`Some(bytes)`) below `dir`; a symlink fails.
fn tree(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            let path = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let kind = entry.file_type().unwrap();
            assert!(!kind.is_symlink(), "{path} is a symlink");
            if kind.is_dir() {
                out.insert(path.clone(), None);
                walk(&entry.path(), &path, out);
            } else {
                out.insert(path, Some(std::fs::read(entry.path()).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, "", &mut out);
    out
}

fn assert_bundled(docs: &Path, folder: &str) {
    assert!(
        tree(&docs.join("apps").join(folder)) == tree(&root().join("apps").join(folder)),
        "docs/apps/{folder} differs from the repository's apps/{folder} (rebuild if apps/ changed since)"
    );
}

#[test]
fn seeds_an_empty_docs_root_and_then_leaves_it_alone() {
    let state = tempfile::tempdir().unwrap();
    let docs = state.path().join("docs");
    let report = seed_ok(state.path());
    for id in [APP, "_shared"] {
        assert_eq!(entry(&report, id)["outcome"], "installed", "{report:#}");
        assert!(entry(&report, id)["warning"].is_null());
        assert_bundled(&docs, id);
    }
    assert_eq!(
        entry(&report, APP)["treeHash"],
        match studio_core::seed::disk_tree(&root().join("apps").join(APP)) {
            studio_core::seed::DiskTree::Hashed { hash, .. } => hash,
            other => panic!("{other:?}"),
        }
    );
    assert_eq!(report["healed"], serde_json::json!([]));
    assert!(!docs.join(".bundled-apps-staging").exists());
    assert!(
        !docs.join(".bundled-apps.lock").exists(),
        "the lock is removed when done"
    );

    // The second run finds everything up to date and touches nothing.
    let before = identities(&docs.join("apps"));
    let report = seed_ok(state.path());
    for id in [APP, "_shared"] {
        assert_eq!(entry(&report, id)["outcome"], "upToDate", "{report:#}");
    }
    assert_eq!(identities(&docs.join("apps")), before);
}

#[test]
fn an_edited_package_is_preserved_with_a_warning() {
    let state = tempfile::tempdir().unwrap();
    seed_ok(state.path());
    let styles = state.path().join("docs/apps").join(APP).join("styles.css");
    let edited = format!(
        "{}\n.mine {{ color: teal; }}\n",
        std::fs::read_to_string(&styles).unwrap()
    );
    std::fs::write(&styles, &edited).unwrap();
    let report = seed_ok(state.path());
    let app = entry(&report, APP);
    assert_eq!(app["outcome"], "preserved", "{report:#}");
    assert!(
        app["warning"]
            .as_str()
            .is_some_and(|warning| warning.contains("edited")),
        "{report:#}"
    );
    assert_eq!(std::fs::read_to_string(&styles).unwrap(), edited);
}

#[test]
fn untouched_retired_samples_are_archived_and_edited_ones_stay() {
    let state = tempfile::tempdir().unwrap();
    let docs = state.path().join("docs");
    let fixtures = root().join("tests/fixtures/retired-apps");
    for id in RETIRED {
        let validation = sasha_package::validate::validate_dir(&fixtures.join(id));
        assert!(
            validation.package.is_some(),
            "{id}: {:?}",
            validation.diagnostics
        );
        copy_dir(&fixtures.join(id), &docs.join("apps").join(id));
    }
    let report = seed_ok(state.path());
    assert_eq!(entry(&report, APP)["outcome"], "installed");
    for id in RETIRED {
        let app = entry(&report, id);
        assert_eq!(
            app["outcome"], "retired",
            "{id}: its fixture's tree hash must be in scripts/bundled-app-shipped-hashes.json: {report:#}"
        );
        assert_eq!(app["movedTo"], format!(".retired-bundled-apps/apps/{id}"));
        assert!(!docs.join("apps").join(id).exists());
        assert!(
            tree(&docs.join(".retired-bundled-apps/apps").join(id)) == tree(&fixtures.join(id))
        );
    }

    // An edited sample stays where it is; another untouched copy is numbered.
    copy_dir(
        &fixtures.join("email-drafter"),
        &docs.join("apps/email-drafter"),
    );
    std::fs::write(
        docs.join("apps/email-drafter/app.js"),
        "\"use strict\";\n// mine now\n",
    )
    .unwrap();
    copy_dir(
        &fixtures.join("report-builder"),
        &docs.join("apps/report-builder"),
    );
    let report = seed_ok(state.path());
    let edited = entry(&report, "email-drafter");
    assert_eq!(edited["outcome"], "preserved", "{report:#}");
    assert!(
        edited["warning"]
            .as_str()
            .is_some_and(|w| w.contains("edited"))
    );
    assert!(docs.join("apps/email-drafter/app.js").exists());
    assert_eq!(
        entry(&report, "report-builder")["movedTo"],
        ".retired-bundled-apps/apps/report-builder-2"
    );
    assert!(
        report["apps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|app| app["id"] != "candidate-comparison")
    );
}

#[test]
fn an_abandoned_lock_fails_closed_and_changes_nothing() {
    let state = tempfile::tempdir().unwrap();
    let docs = state.path().join("docs");
    std::fs::create_dir_all(docs.join("apps")).unwrap();
    let lock = docs.join(".bundled-apps.lock");
    std::fs::write(&lock, "pid 4194304\nstarted 1700000000 (unix seconds)\n").unwrap();
    let before = identities(&docs);
    let (status, stdout, stderr) = seed(state.path());
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stdout.is_null(), "no report: {stdout}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&lock.display().to_string()), "{stderr}");
    assert!(stderr.contains("remove"), "{stderr}");
    assert_eq!(identities(&docs), before);
    // After the operator removes it, seeding works.
    std::fs::remove_file(&lock).unwrap();
    assert_eq!(entry(&seed_ok(state.path()), APP)["outcome"], "installed");
}

/// Starts data-worker and studio-core (seeding as configured by `seeding`).
async fn start_core(
    harness: &Harness,
    seeding: &str,
) -> (common::RoleProcess, common::RoleProcess) {
    let data = harness.start(Role::DataWorker, &[]).await;
    let core = harness
        .start(
            Role::StudioCore,
            &[
                (
                    "SASHA_DATA_GRPC_URL",
                    format!("https://{}", data.listener("grpc")),
                ),
                ("SASHA_BUNDLED_APPS", seeding.to_owned()),
            ],
        )
        .await;
    (data, core)
}

async fn app_counts(core: &common::RoleProcess) -> serde_json::Value {
    get(core.listener("http"), "localhost:3007", "/healthz", "")
        .await
        .json()["apps"]
        .clone()
}

#[tokio::test]
async fn studio_core_seeds_a_fresh_docs_root_before_it_is_ready() {
    let harness = Harness::new();
    let (_data, core) = start_core(&harness, "seed").await;
    // Seeding runs before the first discovery, and both before readiness.
    let counts = app_counts(&core).await;
    assert_eq!(counts["valid"], 1, "{counts}\n{}", core.stderr());
    assert_eq!(counts["invalid"], 0, "{counts}");
    let docs = harness.path().join("docs");
    assert_bundled(&docs, APP);
    assert_bundled(&docs, "_shared");
    let stderr = core.stderr();
    // Start-up's one summary line names what seeding installed.
    let summary = stderr
        .lines()
        .find_map(|line| line.split_once("bundled apps installed or refreshed: "))
        .map(|(_, seeded)| seeded.to_owned())
        .unwrap_or_else(|| panic!("no start-up summary: {stderr}"));
    assert!(summary.contains(APP), "{summary}");

    // Off: an existing docs root is left as it is.
    assert!(core.stop().await.success());
    std::fs::remove_dir_all(docs.join("apps").join(APP)).unwrap();
    let (_data, core) = start_core(&harness, "off").await;
    assert_eq!(app_counts(&core).await["valid"], 0);
    assert!(!docs.join("apps").join(APP).exists());
}

#[tokio::test]
async fn an_interrupted_replacement_heals_on_the_next_start() {
    let harness = Harness::new();
    let docs = harness.path().join("docs");
    // What a studio-core SIGKILLed between the two renames of a replacement
    // leaves: the app's folder absent, the old tree and a half-written new one
    // in a staging slot, and the knowledge lock file (its flock died with the
    // process).
    std::fs::create_dir_all(docs.join("apps")).unwrap();
    copy_dir(&root().join("apps/_shared"), &docs.join("apps/_shared"));
    let slot = docs
        .join(".bundled-apps-staging")
        .join(format!("{APP}-00000000deadbeef"));
    copy_dir(&root().join("apps").join(APP), &slot.join(".previous"));
    std::fs::create_dir_all(slot.join(APP)).unwrap();
    std::fs::write(slot.join(APP).join("APP.md"), "---\nid: time-sh").unwrap();
    std::fs::write(docs.join(".knowledge.lock"), "").unwrap();

    // Empty counts as unset: the default is to seed.
    let (_data, core) = start_core(&harness, "").await;
    let counts = app_counts(&core).await;
    assert_eq!(counts["valid"], 1, "{counts}\n{}", core.stderr());
    assert_bundled(&docs, APP);
    assert!(!docs.join(".bundled-apps-staging").exists());
    let stderr = core.stderr();
    assert!(stderr.contains("leftover"), "{stderr}");
}
