//! People, connected clients and the app pane on a team's second day, in
//! real Chromium at 1440 and 390 px (`tests/browser/people-day-two.mjs`,
//! which says each step): a case-variant sign-in and a refused case-variant
//! name; an invitation that gives Time Sheet Entry, opened by the invitee at
//! once; making someone an admin asked in a dialog; a password reset link
//! that ends the old session; no controls on one's own access; Share
//! suggesting only names typed before; each client's steps and the public
//! https note on Connected clients; Time Sheet Entry as tall as its content.
//! Then the store is read: what the browser did is what was recorded.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::time::Duration;

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::{UpProcess, browser_artifacts, free_port};
use studio_store::{AppAccess, UserRole, action, people_action};

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(180);

#[tokio::test]
async fn people_clients_and_the_full_height_app_on_the_second_day() {
    browser::require();
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = UpProcess::start_with(state.path(), port, &[]).await;
    let admin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
    )
    .unwrap();
    let admin_name = admin["username"].as_str().unwrap();
    let store = common::core_database::core_store(state.path());
    let member_password = "mia's own long password";
    store
        .create_user("mia", UserRole::Member, member_password)
        .unwrap();

    let artifacts = browser_artifacts().join("people-day-two");
    let output = BrowserScript::start(
        "people-day-two",
        &[
            ("STUDIO_URL", &format!("http://localhost:{port}")),
            ("ADMIN_USER", &admin_name),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("MEMBER_USER", &"mia"),
            ("MEMBER_PASSWORD", &member_password),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;
    common::browser::screenshots(&output, 18);
    let printed = |prefix: &str| -> Vec<String> {
        output
            .lines()
            .filter_map(|line| line.strip_prefix(prefix))
            .map(str::to_owned)
            .collect()
    };

    // Rosa was invited with Time Sheet Entry and holds it, granted by the
    // admin; her reset was made by the admin and used by her; her password
    // is the one she chose through the link, under her name in any case.
    let admin_user = store.user_by_name(admin_name).unwrap().unwrap();
    let rosa = store.user_by_name("ROSA").unwrap().expect("Rosa exists");
    assert_eq!(rosa.username, "Rosa", "stored as typed");
    assert_eq!(rosa.role, UserRole::Member);
    assert_eq!(
        store.access("time-sheet-entry", &rosa.id).unwrap(),
        Some(AppAccess::Use)
    );
    let entries = store.audit_entries(None).unwrap();
    let about_rosa = |what: &str| {
        entries
            .iter()
            .filter(|entry| {
                entry.action == what && entry.subject.as_deref() == Some(rosa.id.as_str())
            })
            .map(|entry| entry.actor.as_str())
            .collect::<Vec<_>>()
    };
    let time_sheet_grants: Vec<&str> = entries
        .iter()
        .filter(|entry| {
            entry.action == action::GRANT_CHANGED
                && entry.subject.as_deref() == Some(rosa.id.as_str())
                && entry.app_id.as_deref() == Some("time-sheet-entry")
        })
        .map(|entry| entry.actor.as_str())
        .collect();
    assert_eq!(
        time_sheet_grants,
        [admin_user.id.as_str()],
        "the invitation's grant is the admin's, audited once"
    );
    assert_eq!(
        about_rosa(people_action::PASSWORD_RESET_LINK),
        [admin_user.id.as_str()]
    );
    assert_eq!(
        about_rosa(people_action::PASSWORD_RESET),
        [rosa.id.as_str()]
    );
    assert_eq!(
        about_rosa(people_action::USER_ROLE_CHANGED).len(),
        2,
        "promoted once after the dialog, and back"
    );
    let password = printed("ROSA_PASSWORD ").pop().expect("a password");
    assert!(store.verify_login("rosa", &password).unwrap().is_some());

    // The frame measured in the browser is the content's, past the inline
    // 1200 px where the content is taller.
    let frames = printed("FRAME ");
    assert_eq!(frames.len(), 2, "{output}");
    for line in frames {
        let numbers: Vec<u32> = line.split(' ').map(|n| n.parse().unwrap()).collect();
        let [width, frame, content] = numbers[..] else {
            panic!("{line}")
        };
        assert!(
            frame.abs_diff(content) <= 2,
            "at {width} px the frame ({frame}) is the content's height ({content})"
        );
    }
}
