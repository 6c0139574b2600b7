//! The Studio end to end in real Chromium: starts the real system with
//! `sasha up` (Studio on `http://localhost:<port>`, sandbox on
//! `http://127.0.0.1:<port>`) over a state folder holding the valid fixture apps
//! and the misbehaving ones from `tests/browser/apps/`, adds a member, and runs
//! `tests/browser/studio.mjs` (playwright-core driving Debian's `chromium`
//! through the Studio UI). Then checks that the expense the browser added
//! landed in the app's database, audited as the app's UI.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::{UpProcess, browser_artifacts, copy_dir, free_port, root};
use studio_store::UserRole;

/// How long the whole browser scenario may take (it needs about 30 s, 15 of
/// which are the initialization timeout, run alongside the rest).
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

/// The apps the scenario expects in the apps folder.
const VALID_APPS: [&str; 2] = ["hello", "expense-log"];
const MISBEHAVING_APPS: [&str; 4] = ["stuck", "stubborn", "tall", "tiny"];

const MEMBER: &str = "mia";
const MEMBER_PASSWORD: &str = "correct horse battery";

fn install_apps(state: &Path) {
    let apps = state.join("docs/apps");
    for app in VALID_APPS {
        copy_dir(
            &root().join("tests/packages/valid").join(app),
            &apps.join(app),
        );
    }
    for app in MISBEHAVING_APPS {
        let source = root().join("tests/browser/apps").join(app);
        let validation = sasha_package::validate::validate_dir(&source);
        assert!(
            validation.package.is_some(),
            "the fixture app {app} must validate: {:?}",
            validation.diagnostics
        );
        copy_dir(&source, &apps.join(app));
    }
}

#[tokio::test]
async fn the_studio_works_end_to_end_in_chromium() {
    browser::require();
    let started = Instant::now();

    let state = tempfile::tempdir().unwrap();
    install_apps(state.path());
    let port = free_port();
    let up = UpProcess::start(state.path(), port).await;
    let admin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let store = common::core_database::core_store(state.path());
    let member = store
        .create_user(MEMBER, UserRole::Member, MEMBER_PASSWORD)
        .unwrap();
    let booted = started.elapsed();

    let artifacts = browser_artifacts().join("studio");
    BrowserScript::start(
        "studio",
        &[
            ("STUDIO_URL", &format!("http://localhost:{port}")),
            ("SANDBOX_ORIGIN", &format!("http://127.0.0.1:{port}")),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("MEMBER_ID", &member.id),
            ("MEMBER_USER", &MEMBER),
            ("MEMBER_PASSWORD", &MEMBER_PASSWORD),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;

    // The expense the browser added is in the app's own database, owned by the
    // admin, written by the add-expense action and audited as the app's UI.
    let data = rusqlite::Connection::open_with_flags(
        state.path().join("apps/expense-log.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let (id, amount, owner): (i64, f64, String) = data
        .query_row(
            "SELECT id, amount, created_by FROM expenses WHERE note = 'studio e2e taxi'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .expect("the expense added in the browser is stored");
    assert_eq!(amount, 12.5);
    let admin_user = store
        .user_by_name(admin["username"].as_str().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(owner, admin_user.id);
    let (source, action, actor): (String, Option<String>, String) = data
        .query_row(
            "SELECT source, action_id, actor_id FROM _sasha_audit
             WHERE table_name = 'expenses' AND record_id = ?1 AND operation = 'create'",
            [id.to_string()],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .expect("the expense's audit row");
    assert_eq!(source, "ui");
    assert_eq!(action.as_deref(), Some("add-expense"));
    assert_eq!(actor, admin_user.id);
    let category_source: String = data
        .query_row(
            "SELECT source FROM _sasha_audit WHERE table_name = 'categories'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(category_source, "ui");

    println!(
        "browser studio test took {:?} (sasha up ready after {booted:?}); screenshots in {}",
        started.elapsed(),
        artifacts.display()
    );
}
