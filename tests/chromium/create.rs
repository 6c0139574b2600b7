//! Studio's New app form in real Chromium: starts `sasha up` over an empty
//! apps folder (no seeding), adds a member, and runs
//! `tests/browser/create.mjs` (the dev admin creates a data app through the
//! form, which opens and stores a row through its own page; a taken id and a
//! member are refused). Then checks what the browser did on disk and in the
//! databases: the package validates, the row is the admin's and audited as
//! the app's UI, and the creation is in the authorization audit log.
//! Screenshots go to `$CARGO_TARGET_DIR/browser-artifacts/create/`.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::time::Duration;

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::{UpProcess, browser_artifacts, free_port};
use studio_store::UserRole;

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(90);
const APP: &str = "field-notes";

#[tokio::test]
async fn the_new_app_form_creates_an_app_that_opens_and_stores_rows() {
    browser::require();
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = UpProcess::start(state.path(), port).await;
    let admin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let store = common::core_database::core_store(state.path());
    let member_password = "member correct horse battery";
    let member = store
        .create_user("mia", UserRole::Member, member_password)
        .unwrap();

    let artifacts = browser_artifacts().join("create");
    let output = BrowserScript::start(
        "create",
        &[
            ("STUDIO_URL", &format!("http://localhost:{port}")),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("MEMBER_USER", &member.username),
            ("MEMBER_PASSWORD", &member_password),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;
    common::browser::screenshots(&output, 8);

    // The package the form wrote validates, and nothing else was created.
    let apps = state.path().join("docs/apps");
    let validation = sasha_package::validate::validate_dir(&apps.join(APP));
    assert!(validation.package.is_some(), "{:?}", validation.diagnostics);
    let folders: Vec<String> = std::fs::read_dir(&apps)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(folders, [APP]);

    // The row the app's page added is the admin's, audited as the app's UI.
    let admin_user = store
        .user_by_name(admin["username"].as_str().unwrap())
        .unwrap()
        .unwrap();
    let data = rusqlite::Connection::open_with_flags(
        state.path().join(format!("apps/{APP}.sqlite")),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let (id, owner): (i64, String) = data
        .query_row(
            "SELECT id, created_by FROM items WHERE title = 'Fence post leaning at gate 3'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("the row added in the browser is stored");
    assert_eq!(owner, admin_user.id);
    let source: String = data
        .query_row(
            "SELECT source FROM _sasha_audit
             WHERE table_name = 'items' AND record_id = ?1 AND operation = 'create'",
            [id.to_string()],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(source, "ui");

    // The creation is audited with its actor; the member holds nothing.
    let audit = store.audit_entries(Some(APP)).unwrap();
    let created: Vec<_> = audit
        .iter()
        .filter(|entry| entry.action == "app.created")
        .collect();
    assert_eq!(created.len(), 1, "{audit:?}");
    assert_eq!(created[0].actor, admin_user.id);
    assert_eq!(store.access(APP, &member.id).unwrap(), None);
    assert!(store.registered_app("member-app").unwrap().is_none());
}
