//! Studio's History panel in real Chromium (issue 23, deliverable 4): starts
//! `sasha up` over an empty apps folder, creates an app as the dev admin
//! through `POST /api/apps`, changes its package on disk (a file added and
//! `styles.css` edited: a second revision, found by the catalogue), and runs
//! `tests/browser/history.mjs` (the admin opens History, sees both revisions
//! with the current one marked, reads the diff of the older one against the
//! current, views `styles.css` as it was at the older revision, confirms the
//! revert in the panel). Then checks on disk and in the core database that
//! the package is the first revision again and the revert is audited.
//! Screenshots go to `$CARGO_TARGET_DIR/browser-artifacts/history/`.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::time::Duration;

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::{UpProcess, browser_artifacts, free_port, http_client};
use serde_json::{Value, json};

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(90);
const APP: &str = "field-notes";

#[tokio::test]
async fn the_history_panel_lists_diffs_and_reverts() {
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
        .json(&json!({"app": APP, "name": "Field notes", "description": "What we saw on site"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    let first = created["status"]["revision"].as_str().unwrap().to_owned();

    // A second revision: a file added and one edited on disk, registered by
    // the catalogue (as one revision: its watcher lets a burst settle).
    // studio-core's file watcher finds it in another process, where only real
    // time passes, so this polls the API (every 200 ms, at most 20 s).
    let package = state.path().join("docs/apps").join(APP);
    let styles_first = std::fs::read_to_string(package.join("styles.css")).unwrap();
    std::fs::write(package.join("notes.txt"), "Fence post leaning at gate 3\n").unwrap();
    std::fs::write(
        package.join("styles.css"),
        format!("{styles_first}\n/* Tuned on site */\n"),
    )
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let second = loop {
        let listed: Value = http
            .get(format!("{studio}/api/apps/{APP}/revisions"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let revisions = listed["revisions"].as_array().cloned().unwrap_or_default();
        if revisions.len() == 2 && revisions[0]["current"] == true {
            break revisions[0]["revision"].as_str().unwrap().to_owned();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the catalogue never registered the second revision: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_ne!(first, second);

    let artifacts = browser_artifacts().join("history");
    let output = BrowserScript::start(
        "history",
        &[
            ("STUDIO_URL", &studio),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("FIRST", &first.as_str()),
            ("SECOND", &second.as_str()),
            ("STYLES_FIRST", &styles_first.as_str()),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;
    common::browser::screenshots(&output, 4);

    // The package is the first revision's files again, and the revert is audited.
    assert!(!package.join("notes.txt").exists());
    assert_eq!(
        std::fs::read_to_string(package.join("styles.css")).unwrap(),
        styles_first
    );
    let store = common::core_database::core_store(state.path());
    let registered = store.registered_app(APP).unwrap().unwrap();
    assert_eq!(registered.current_revision, first);
    let audit = store.audit_entries(Some(APP)).unwrap();
    assert!(
        audit
            .iter()
            .any(|entry| entry.action == "app-source.reverted"),
        "{audit:?}"
    );
}
