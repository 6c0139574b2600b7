//! Studio's lifecycle controls in real Chromium: starts `sasha up` over an
//! empty apps folder, creates an app (with a table) as the dev admin through
//! `POST /api/apps`, and runs `tests/browser/lifecycle.mjs` (the admin opens
//! the app, confirms "Withdraw…" in the pane, the app leaves the sidebar and
//! is listed on Withdrawn apps; Restore brings it back; withdrawn again,
//! "Delete…" with its data keeps the Delete button disabled until the app id
//! is typed, then deletes it, naming the data backup, and no Restore is left).
//! Then checks on disk that the package folder is gone (and the backup named
//! is there), and in the core database that the app is registered but marked
//! withdrawn and deleted, with `app.withdrawn`, `app.restored` and
//! `app.deleted` audited. Screenshots go to
//! `$CARGO_TARGET_DIR/browser-artifacts/lifecycle/`.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::{UpProcess, browser_artifacts, free_port, http_client};
use serde_json::json;

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);
const APP: &str = "site-visits";

/// Every file named `name` below `dir` (any depth).
fn find_files(dir: &Path, name: &str, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            find_files(&path, name, found);
        } else if path.file_name().is_some_and(|file| file == name) {
            found.push(path);
        }
    }
}

#[tokio::test]
async fn an_admin_withdraws_restores_and_deletes_an_app() {
    browser::require();
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = UpProcess::start(state.path(), port).await;
    let studio = format!("http://localhost:{port}");
    let http = http_client();

    // Signed in as the dev admin, the app is created through the API.
    let (admin, cookie) = common::sign_in_dev_admin(state.path(), &studio).await;
    let created = http
        .post(format!("{studio}/api/apps"))
        .header("cookie", &cookie)
        .header("origin", &studio)
        .json(&json!({
            "app": APP,
            "name": "Site visits",
            "description": "Who went where",
            "withTable": true,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let package = state.path().join("docs/apps").join(APP);
    assert!(package.is_dir(), "{}", package.display());

    let artifacts = browser_artifacts().join("lifecycle");
    let output = BrowserScript::start(
        "lifecycle",
        &[
            ("STUDIO_URL", &studio),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;
    common::browser::screenshots(&output, 8);

    // The package folder is gone; a data backup the page named is on disk.
    assert!(!package.exists(), "{}", package.display());
    if let Some(backup) = output.lines().find_map(|line| line.strip_prefix("backup ")) {
        // The answer names it relative to APP_DATA_ROOT (`.deleted-app-backups/<file>`).
        let backup = backup.trim();
        let file = backup.rsplit('/').next().unwrap();
        let mut found = Vec::new();
        find_files(state.path(), file, &mut found);
        assert!(
            found.iter().any(|path| path.ends_with(backup)
                && path.to_string_lossy().contains(".deleted-app-backups")),
            "the backup {backup} the page named is not on disk: {found:?}\n{output}"
        );
    }

    // The withdrawal, the restore and the deletion are audited, in that order.
    let store = common::core_database::core_store(state.path());
    let audit = store.audit_entries(Some(APP)).unwrap();
    let actions: Vec<&str> = audit.iter().map(|entry| entry.action.as_str()).collect();
    for action in ["app.withdrawn", "app.restored", "app.deleted"] {
        assert!(
            actions.contains(&action),
            "{action} is not audited: {audit:?}"
        );
    }
    assert_eq!(
        actions
            .iter()
            .filter(|action| **action == "app.withdrawn")
            .count(),
        2,
        "withdrawn twice: {audit:?}"
    );
    assert!(
        actions.contains(&"app.data-deleted"),
        "the data deletion is audited: {audit:?}"
    );
    let state_row = store.lifecycle(APP).unwrap().expect("still registered");
    assert!(state_row.is_withdrawn());
    assert!(state_row.package_deleted_at.is_some());
    assert!(state_row.data_deleted_at.is_some());
}
