//! The Studio's orientation and phone shell in real Chromium: starts `sasha up`
//! over an empty apps folder with a scripted model (so the assistant is set
//! up), makes one member in the core database before anyone signs in, and runs
//! `tests/browser/orientation.mjs` (the admin's first-run checklist, the one
//! Create entry and its three paths, an app with a long unbroken description
//! launched with no console error and no sideways scroll, Escape and other
//! work closing the Withdraw and Delete panels, the phone header, menu and
//! assistant at 390 px, the member's empty state and the page a member sees
//! at an admin address). Then checks that `sasha up`, its output piped as a
//! log collector would keep it, never printed the dev admin's password.
//! Screenshots go to `$CARGO_TARGET_DIR/browser-artifacts/orientation/`.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::time::Duration;

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::fake_llm::{self, FakeLlm};
use common::{browser_artifacts, free_port};
use studio_store::UserRole;

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(150);

#[tokio::test]
async fn a_first_sign_in_is_oriented_and_the_shell_works_on_a_phone() {
    browser::require();
    // The assistant is set up (no turn is sent): its message box and Send show.
    let fake = FakeLlm::start(fake_llm::script(Vec::new())).await;
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = fake.up(state.path(), port, &[]).await;
    let admin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let store = common::core_database::core_store(state.path());
    let member_password = "member correct horse battery";
    let member = store
        .create_user("mia", UserRole::Member, member_password)
        .unwrap();

    let artifacts = browser_artifacts().join("orientation");
    let output = BrowserScript::start(
        "orientation",
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
    common::browser::screenshots(&output, 12);

    // Piped (not a terminal), `sasha up` names the file that holds the
    // password and never prints the password itself.
    let password = admin["password"].as_str().unwrap();
    let (stdout, stderr) = (up.stdout_text(), up.stderr_text());
    assert!(stdout.contains("dev-admin.json"), "{stdout}");
    assert!(!stdout.contains(password), "the password is in stdout");
    assert!(!stderr.contains(password), "the password is in stderr");
}
