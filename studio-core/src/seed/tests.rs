//! Every branch of the seeder, on temporary docs roots with synthetic bundles.

#[path = "../../../tests/common/tree_identity.rs"]
mod tree_identity;

use tree_identity::identities;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;

/// A small valid package `id` whose script differs per `release`.
fn package(id: &str, release: &str) -> Tree {
    Tree::new()
        .with_file(
            "APP.md",
            format!(
                "---\nid: {id}\nname: Sample {id}\ndescription: A seeding test package\nversion: {release}\n---\n# Sample\n\nA test package.\n"
            )
            .into_bytes(),
        )
        .with_file(
            "index.html",
            b"<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Sample</title>\n<link rel=\"stylesheet\" href=\"styles.css\">\n</head>\n<body>\n<p id=\"out\">Sample</p>\n<script src=\"app.js\"></script>\n</body>\n</html>\n".as_slice(),
        )
        .with_file("styles.css", b"p { margin: 1rem; }\n".as_slice())
        .with_file(
            "app.js",
            format!("\"use strict\";\ndocument.getElementById(\"out\").textContent = \"release {release}\";\n")
                .into_bytes(),
        )
        .with_file(
            "skills/notes.md",
            format!("Notes for release {release}.\n").into_bytes(),
        )
}

fn shared(release: &str) -> Tree {
    Tree::new().with_file(
        "theme.css",
        format!(":root {{ --release: \"{release}\"; }}\n").into_bytes(),
    )
}

fn shipped(entries: &[(&str, &[&Tree])]) -> ShippedHashes {
    ShippedHashes::new(
        entries
            .iter()
            .map(|(id, trees)| ((*id).to_owned(), trees.iter().map(|t| t.hash()).collect()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn docs_root() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn outcome(report: &SeedReport, id: &str) -> Outcome {
    report
        .app(id)
        .unwrap_or_else(|| panic!("no entry for {id}: {report:#?}"))
        .outcome
}

fn warning(report: &SeedReport, id: &str) -> String {
    report
        .app(id)
        .and_then(|app| app.warning.clone())
        .unwrap_or_else(|| panic!("no warning for {id}: {report:#?}"))
}

/// Writes `tree` at `dir` as a test would find it on disk.
fn put(dir: &Path, tree: &Tree) {
    std::fs::create_dir_all(dir).unwrap();
    for (path, entry) in &tree.entries {
        match entry {
            None => std::fs::create_dir_all(dir.join(path)).unwrap(),
            Some(bytes) => std::fs::write(dir.join(path), bytes).unwrap(),
        }
    }
}

fn assert_matches(dir: &Path, tree: &Tree) {
    assert_eq!(
        disk_tree(dir),
        DiskTree::Hashed {
            hash: tree.hash(),
            empty: tree.entries.is_empty()
        },
        "{} does not hold the expected tree",
        dir.display()
    );
}

fn staging_leftovers(root: &Path) -> Vec<String> {
    match std::fs::read_dir(root.join(STAGING_DIR)) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn the_tree_hash_format_is_pinned_and_equal_on_disk_and_in_memory() {
    let tree = Tree::new().with_file("a/b.txt", b"hi".as_slice());
    let mut expected = Sha256::new();
    expected.update(b"dir a\0file a/b.txt\x002\0hi");
    assert_eq!(tree.hash(), hex::encode(expected.finalize()));

    let root = docs_root();
    let release = package("alpha", "1.0.0");
    put(&root.path().join("alpha"), &release);
    assert_matches(&root.path().join("alpha"), &release);
    // An empty folder is a tree too, and is marked empty.
    std::fs::create_dir(root.path().join("empty")).unwrap();
    assert_eq!(
        disk_tree(&root.path().join("empty")),
        DiskTree::Hashed {
            hash: Tree::new().hash(),
            empty: true
        }
    );
    assert_eq!(disk_tree(&root.path().join("nothing")), DiskTree::Absent);
    // A FIFO is suspicious, and hashing it never blocks.
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.path().join("alpha/pipe"),
        rustix::fs::FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    assert!(matches!(
        disk_tree(&root.path().join("alpha")),
        DiskTree::Suspicious(why) if why.contains("pipe")
    ));
}

#[test]
fn an_absent_package_and_shared_are_installed() {
    let root = docs_root();
    let release = package("alpha", "1.0.0");
    let bundle = Bundle::new()
        .with_tree("alpha", release.clone())
        .with_tree(SHARED, shared("1"));
    let report = seed(root.path(), &bundle, &shipped(&[("alpha", &[&release])])).unwrap();
    assert_eq!(outcome(&report, "alpha"), Outcome::Installed);
    assert_eq!(outcome(&report, SHARED), Outcome::Installed);
    assert_eq!(
        report.app("alpha").unwrap().tree_hash.as_deref(),
        Some(release.hash().as_str())
    );
    assert!(report.healed.is_empty());
    assert!(!report.failed());
    assert_matches(&root.path().join("apps/alpha"), &release);
    assert_matches(&root.path().join("apps/_shared"), &shared("1"));
    assert!(staging_leftovers(root.path()).is_empty());
    // The JSON the CLI prints.
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["apps"][1]["id"], "alpha");
    assert_eq!(json["apps"][1]["outcome"], "installed");
    assert_eq!(json["apps"][1]["treeHash"], release.hash());
    assert!(json["apps"][1]["warning"].is_null());
    assert!(json["apps"][1].get("movedTo").is_none());
    assert_eq!(json["healed"], serde_json::json!([]));
    for outcome in [
        Outcome::Installed,
        Outcome::UpToDate,
        Outcome::Replaced,
        Outcome::Preserved,
        Outcome::Retired,
        Outcome::Error,
    ] {
        assert_eq!(serde_json::to_value(outcome).unwrap(), outcome.as_str());
    }
}

#[test]
fn an_up_to_date_package_is_not_touched() {
    let root = docs_root();
    let release = package("alpha", "1.0.0");
    let bundle = Bundle::new()
        .with_tree("alpha", release.clone())
        .with_tree(SHARED, shared("1"));
    let shipped = shipped(&[("alpha", &[&release])]);
    seed(root.path(), &bundle, &shipped).unwrap();
    let before = identities(&root.path().join("apps"));
    let report = seed(root.path(), &bundle, &shipped).unwrap();
    assert_eq!(outcome(&report, "alpha"), Outcome::UpToDate);
    assert_eq!(outcome(&report, SHARED), Outcome::UpToDate);
    assert_eq!(identities(&root.path().join("apps")), before);
}

#[test]
fn an_untouched_old_release_is_replaced() {
    let root = docs_root();
    let (old, new) = (package("alpha", "1.0.0"), package("alpha", "1.1.0"));
    let shipped = shipped(&[("alpha", &[&old, &new])]);
    seed(
        root.path(),
        &Bundle::new().with_tree("alpha", old.clone()),
        &shipped,
    )
    .unwrap();
    let report = seed(
        root.path(),
        &Bundle::new().with_tree("alpha", new.clone()),
        &shipped,
    )
    .unwrap();
    assert_eq!(outcome(&report, "alpha"), Outcome::Replaced);
    assert_eq!(
        report.app("alpha").unwrap().tree_hash.as_deref(),
        Some(new.hash().as_str())
    );
    assert_matches(&root.path().join("apps/alpha"), &new);
    assert!(staging_leftovers(root.path()).is_empty());
    // A release older still, also shipped, is replaced the same way.
    let newest = package("alpha", "1.2.0");
    let shipped_all = self::shipped(&[("alpha", &[&old, &new, &newest])]);
    let report = seed(
        root.path(),
        &Bundle::new().with_tree("alpha", newest.clone()),
        &shipped_all,
    )
    .unwrap();
    assert_eq!(outcome(&report, "alpha"), Outcome::Replaced);
    assert_matches(&root.path().join("apps/alpha"), &newest);
}

#[test]
fn an_edited_package_is_preserved_with_a_warning() {
    let root = docs_root();
    let (old, new) = (package("alpha", "1.0.0"), package("alpha", "1.1.0"));
    let shipped = shipped(&[("alpha", &[&old, &new])]);
    seed(
        root.path(),
        &Bundle::new().with_tree("alpha", old.clone()),
        &shipped,
    )
    .unwrap();
    let script = root.path().join("apps/alpha/app.js");
    std::fs::write(&script, "\"use strict\";\n// my change\n").unwrap();
    let before = identities(&root.path().join("apps"));
    let bundle = Bundle::new().with_tree("alpha", new);
    let report = seed(root.path(), &bundle, &shipped).unwrap();
    assert_eq!(outcome(&report, "alpha"), Outcome::Preserved);
    assert!(warning(&report, "alpha").contains("edited since release"));
    assert!(report.app("alpha").unwrap().tree_hash.is_some());
    assert_eq!(identities(&root.path().join("apps")), before);
    // An added file (even a dot-file the validator ignores) is an edit too.
    std::fs::write(&script, old.file("app.js").unwrap()).unwrap();
    std::fs::write(root.path().join("apps/alpha/.notes"), "mine").unwrap();
    let report = seed(root.path(), &bundle, &shipped).unwrap();
    assert_eq!(outcome(&report, "alpha"), Outcome::Preserved);
    std::fs::remove_file(root.path().join("apps/alpha/.notes")).unwrap();
    let report = seed(root.path(), &bundle, &shipped).unwrap();
    assert_eq!(
        outcome(&report, "alpha"),
        Outcome::Replaced,
        "restored, it is the old release again"
    );
}

#[test]
fn an_empty_folder_is_preserved() {
    let root = docs_root();
    std::fs::create_dir_all(root.path().join("apps/alpha")).unwrap();
    let release = package("alpha", "1.0.0");
    let report = seed(
        root.path(),
        &Bundle::new().with_tree("alpha", release.clone()),
        // Even if an empty tree had been "shipped", it is never refreshed by
        // accident: only an exact shipped hash is.
        &shipped(&[("alpha", &[&release])]),
    )
    .unwrap();
    assert_eq!(outcome(&report, "alpha"), Outcome::Preserved);
    assert!(warning(&report, "alpha").contains("empty folder"));
    assert_eq!(
        std::fs::read_dir(root.path().join("apps/alpha"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn a_folder_holding_a_symlink_is_preserved_even_if_it_otherwise_matches() {
    let root = docs_root();
    let (old, new) = (package("alpha", "1.0.0"), package("alpha", "1.1.0"));
    let shipped = shipped(&[("alpha", &[&old, &new])]);
    put(&root.path().join("apps/alpha"), &old);
    std::os::unix::fs::symlink("/etc/passwd", root.path().join("apps/alpha/skills/link.md"))
        .unwrap();
    let report = seed(
        root.path(),
        &Bundle::new().with_tree("alpha", new),
        &shipped,
    )
    .unwrap();
    assert_eq!(outcome(&report, "alpha"), Outcome::Preserved);
    assert!(warning(&report, "alpha").contains("skills/link.md is a symlink"));
    assert!(report.app("alpha").unwrap().tree_hash.is_none());
    assert!(root.path().join("apps/alpha/skills/link.md").is_symlink());
    // The package folder itself being a symlink is suspicious too.
    let elsewhere = docs_root();
    put(elsewhere.path(), &old);
    std::fs::remove_dir_all(root.path().join("apps/alpha")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), root.path().join("apps/alpha")).unwrap();
    let report = seed(
        root.path(),
        &Bundle::new().with_tree("alpha", package("alpha", "1.1.0")),
        &self::shipped(&[("alpha", &[&old])]),
    )
    .unwrap();
    assert_eq!(outcome(&report, "alpha"), Outcome::Preserved);
    assert!(warning(&report, "alpha").contains("symlink"));
    assert_matches(elsewhere.path(), &old);
}

#[test]
fn retired_samples_move_when_untouched_and_stay_when_edited() {
    let root = docs_root();
    let (gone, other) = (package("gone", "2.0.0"), package("other", "1.0.0"));
    let shipped = shipped(&[
        ("gone", &[&package("gone", "1.0.0"), &gone]),
        ("other", &[&other]),
        ("absent", &[&package("absent", "1.0.0")]),
    ]);
    let bundle = Bundle::new();
    put(&root.path().join("apps/gone"), &gone);
    let report = seed(root.path(), &bundle, &shipped).unwrap();
    assert_eq!(outcome(&report, "gone"), Outcome::Retired);
    assert_eq!(
        report.app("gone").unwrap().moved_to.as_deref(),
        Some(".retired-bundled-apps/apps/gone")
    );
    assert!(
        report.app("absent").is_none(),
        "nothing on disk, nothing reported"
    );
    assert!(!root.path().join("apps/gone").exists());
    assert_matches(&root.path().join(".retired-bundled-apps/apps/gone"), &gone);
    // Again: the next free number.
    for n in [2, 3] {
        put(&root.path().join("apps/gone"), &gone);
        let report = seed(root.path(), &bundle, &shipped).unwrap();
        assert_eq!(
            report.app("gone").unwrap().moved_to.as_deref(),
            Some(format!(".retired-bundled-apps/apps/gone-{n}").as_str())
        );
        assert_matches(
            &root
                .path()
                .join(format!(".retired-bundled-apps/apps/gone-{n}")),
            &gone,
        );
    }
    // Edited: stays where it is, with a warning.
    put(&root.path().join("apps/other"), &other);
    std::fs::write(
        root.path().join("apps/other/styles.css"),
        "p { color: red; }\n",
    )
    .unwrap();
    let before = identities(&root.path().join("apps"));
    let report = seed(root.path(), &bundle, &shipped).unwrap();
    assert_eq!(outcome(&report, "other"), Outcome::Preserved);
    assert!(warning(&report, "other").contains("retired sample edited"));
    assert_eq!(identities(&root.path().join("apps")), before);
}

#[test]
fn shared_is_installed_when_absent_and_never_refreshed() {
    let root = docs_root();
    let (first, second) = (shared("1"), shared("2"));
    // Even a "shipped" _shared hash never makes it refreshable.
    let shipped = shipped(&[(SHARED, &[&first, &second])]);
    seed(
        root.path(),
        &Bundle::new().with_tree(SHARED, first.clone()),
        &shipped,
    )
    .unwrap();
    let before = identities(&root.path().join("apps"));
    let report = seed(
        root.path(),
        &Bundle::new().with_tree(SHARED, second),
        &shipped,
    )
    .unwrap();
    assert_eq!(outcome(&report, SHARED), Outcome::Preserved);
    assert!(warning(&report, SHARED).contains("never refreshed"));
    assert_eq!(identities(&root.path().join("apps")), before);
    assert_matches(&root.path().join("apps/_shared"), &first);
}

#[test]
fn an_invalid_bundled_package_is_not_installed_or_used_to_replace() {
    let root = docs_root();
    let broken = Tree::new().with_file("APP.md", b"---\nid: alpha\n---\n".as_slice());
    let old = package("alpha", "1.0.0");
    let report = seed(
        root.path(),
        &Bundle::new().with_tree("alpha", broken.clone()),
        &shipped(&[("alpha", &[&broken])]),
    )
    .unwrap();
    assert_eq!(outcome(&report, "alpha"), Outcome::Error);
    assert!(warning(&report, "alpha").contains("invalid"), "{report:#?}");
    assert!(report.failed());
    assert!(!root.path().join("apps/alpha").exists());
    assert!(staging_leftovers(root.path()).is_empty());
    // An old release stays when its replacement is invalid.
    put(&root.path().join("apps/alpha"), &old);
    let report = seed(
        root.path(),
        &Bundle::new().with_tree("alpha", broken.clone()),
        &shipped(&[("alpha", &[&old, &broken])]),
    )
    .unwrap();
    assert_eq!(outcome(&report, "alpha"), Outcome::Error);
    assert_matches(&root.path().join("apps/alpha"), &old);
}

#[test]
fn an_interrupted_replacement_heals_on_the_next_run() {
    let root = docs_root();
    let (old, new) = (package("alpha", "1.0.0"), package("alpha", "1.1.0"));
    let shipped = shipped(&[("alpha", &[&old, &new])]);
    // The state a crash between the two renames leaves: the old tree moved
    // into a staging slot, the new one staged (half written), the
    // destination absent.
    let slot = root.path().join(STAGING_DIR).join("alpha-00000000deadbeef");
    put(&slot.join(PREVIOUS), &old);
    put(
        &slot.join("alpha"),
        &Tree::new().with_file("APP.md", b"---\nid: al".as_slice()),
    );
    std::fs::create_dir_all(root.path().join("apps")).unwrap();
    let report = seed(
        root.path(),
        &Bundle::new().with_tree("alpha", new.clone()),
        &shipped,
    )
    .unwrap();
    assert_eq!(
        report.healed,
        vec![format!("{STAGING_DIR}/alpha-00000000deadbeef")]
    );
    assert_eq!(outcome(&report, "alpha"), Outcome::Installed);
    assert_matches(&root.path().join("apps/alpha"), &new);
    assert!(staging_leftovers(root.path()).is_empty());
    // The spec's own crash window (old tree removed, new one not renamed)
    // looks the same to the next run.
    std::fs::remove_dir_all(root.path().join("apps/alpha")).unwrap();
    put(&root.path().join(STAGING_DIR).join("alpha-1/alpha"), &new);
    let report = seed(
        root.path(),
        &Bundle::new().with_tree("alpha", new.clone()),
        &shipped,
    )
    .unwrap();
    assert_eq!(report.healed, vec![format!("{STAGING_DIR}/alpha-1")]);
    assert_eq!(outcome(&report, "alpha"), Outcome::Installed);
}

#[test]
fn an_abandoned_standalone_lock_fails_closed() {
    let root = docs_root();
    let lock = root.path().join(STANDALONE_LOCK);
    {
        let held = StandaloneLock::acquire(root.path()).unwrap();
        let text = std::fs::read_to_string(&lock).unwrap();
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        // A second seeder, while the first runs, fails closed too.
        assert!(matches!(
            StandaloneLock::acquire(root.path()),
            Err(SeedError::AbandonedLock { .. })
        ));
        drop(held);
    }
    assert!(!lock.exists(), "a finished run removes its lock");
    // A killed seeder leaves it behind.
    std::fs::write(&lock, "pid 999999\n").unwrap();
    let error = seed_standalone(root.path()).unwrap_err();
    assert!(matches!(error, SeedError::AbandonedLock { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains(&lock.display().to_string()), "{message}");
    assert!(message.contains("remove"), "{message}");
    assert!(lock.exists(), "the lock is never removed automatically");
    assert!(!root.path().join("apps").exists(), "nothing was seeded");
    // Removing it by hand lets the next run through, which cleans up after itself.
    std::fs::remove_file(&lock).unwrap();
    let report = seed_standalone(root.path()).unwrap();
    assert!(!report.failed(), "{report:#?}");
    assert!(!lock.exists());
}

#[test]
fn the_knowledge_flock_excludes_a_second_holder() {
    let root = docs_root();
    let held = KnowledgeLock::acquire(root.path(), Duration::ZERO).unwrap();
    // flock conflicts between open file descriptions, even in one process.
    let error = KnowledgeLock::acquire(root.path(), Duration::from_millis(100)).unwrap_err();
    assert!(matches!(error, SeedError::LockBusy { .. }), "{error}");
    drop(held);
    KnowledgeLock::acquire(root.path(), Duration::ZERO).unwrap();
}

/// Makes a folder unwritable for this test even when it runs as root: mode
/// 0555, and if root can still write, the immutable attribute. Undone on drop.
struct ReadOnly {
    dir: PathBuf,
    immutable: bool,
}

impl ReadOnly {
    fn new(dir: &Path) -> ReadOnly {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        let probe = dir.join("probe");
        let mut guard = ReadOnly {
            dir: dir.to_owned(),
            immutable: false,
        };
        if std::fs::write(&probe, "").is_ok() {
            std::fs::remove_file(&probe).unwrap();
            let file = File::open(dir).unwrap();
            let flags = rustix::fs::ioctl_getflags(&file).unwrap();
            rustix::fs::ioctl_setflags(&file, flags | rustix::fs::IFlags::IMMUTABLE).expect(
                "running as root, this test needs the immutable attribute (CAP_LINUX_IMMUTABLE) to make a folder read-only",
            );
            guard.immutable = true;
            assert!(
                std::fs::write(&probe, "").is_err(),
                "the folder is still writable"
            );
        }
        guard
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt as _;
        if self.immutable
            && let Ok(file) = File::open(&self.dir)
            && let Ok(flags) = rustix::fs::ioctl_getflags(&file)
        {
            let _ = rustix::fs::ioctl_setflags(&file, flags - rustix::fs::IFlags::IMMUTABLE);
        }
        let _ = std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o755));
    }
}

#[test]
fn a_read_only_docs_root_is_a_clear_error() {
    let root = docs_root();
    let bundle = Bundle::new().with_tree("alpha", package("alpha", "1.0.0"));
    let shipped = ShippedHashes::default();
    let _read_only = ReadOnly::new(root.path());
    for error in [
        seed(root.path(), &bundle, &shipped).unwrap_err(),
        StandaloneLock::acquire(root.path()).unwrap_err(),
        KnowledgeLock::acquire(root.path(), Duration::ZERO).unwrap_err(),
    ] {
        assert!(matches!(error, SeedError::ReadOnly { .. }), "{error:?}");
        assert!(error.to_string().contains("read-only"), "{error}");
    }
}

#[test]
fn the_embedded_bundle_is_a_shipped_release_and_valid() {
    let bundle = Bundle::embedded();
    let shipped = ShippedHashes::embedded().unwrap();
    assert!(bundle.tree(SHARED).is_some(), "apps/_shared is bundled");
    let ids: Vec<&str> = bundle.app_ids().collect();
    assert!(ids.contains(&"time-sheet-entry"), "{ids:?}");
    for id in &ids {
        let hash = bundle.tree(id).unwrap().hash();
        assert!(
            shipped.contains(id, &hash),
            "apps/{id} changed: append its tree hash {hash} to the \"{id}\" array in \
             scripts/bundled-app-shipped-hashes.json (keep the older hashes: they are how the \
             seeder recognises untouched old releases to refresh)"
        );
    }
    for retired in ["email-drafter", "candidate-comparison", "report-builder"] {
        assert!(shipped.ids().any(|id| id == retired), "{retired} is listed");
        assert!(bundle.tree(retired).is_none(), "{retired} is not bundled");
    }
    // Seeding a fresh root installs every bundled folder: each package passed
    // the validator on its staged copy.
    let root = docs_root();
    let report = seed(root.path(), &bundle, &shipped).unwrap();
    for app in &report.apps {
        assert_eq!(app.outcome, Outcome::Installed, "{app:#?}");
    }
    assert_eq!(report.apps.len(), ids.len() + 1);
}

#[test]
fn shipped_hashes_refuse_odd_ids_and_hashes() {
    assert!(ShippedHashes::from_json(r#"{"../etc": []}"#).is_err());
    // Not app ids, which the seeder's own rule once let through.
    for id in ["a--b", "trailing-", ""] {
        let text = format!(r#"{{"{id}": []}}"#);
        assert!(ShippedHashes::from_json(&text).is_err(), "{id}");
    }
    assert!(ShippedHashes::from_json(r#"{"a": ["xyz"]}"#).is_err());
    assert!(ShippedHashes::from_json("[]").is_err());
    let hash = "0".repeat(64);
    let parsed = ShippedHashes::from_json(&format!(r#"{{"a-1": ["{hash}"]}}"#)).unwrap();
    assert!(parsed.contains("a-1", &hash));
}

#[test]
fn bundled_apps_setting() {
    let env = |value: &str| -> std::collections::HashMap<String, String> {
        [("SASHA_BUNDLED_APPS".to_owned(), value.to_owned())].into()
    };
    assert_eq!(BundledApps::from_env(&env("")).unwrap(), BundledApps::Seed);
    assert_eq!(
        BundledApps::from_env(&env("seed")).unwrap(),
        BundledApps::Seed
    );
    assert_eq!(
        BundledApps::from_env(&env("off")).unwrap(),
        BundledApps::Off
    );
    let error = BundledApps::from_env(&env("yes")).unwrap_err();
    assert_eq!(error.var, "SASHA_BUNDLED_APPS");
}
