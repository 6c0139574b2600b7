//! Studio's Activity panel in real Chromium (undo what went wrong): starts
//! `sasha up`, creates an app with a table as the dev admin, writes one item
//! in the app's own view (the Studio page's session) and three through a
//! token minted for a Studio assistant conversation (as the assistant's
//! connection is), then runs `tests/browser/activity.mjs`: the admin opens
//! Activity, sees the four changes with who started them, filters to the
//! conversation, previews the undo (three rows, no conflict) and undoes it.
//! Then it restores the app to an instant before every change (from the
//! copy in object storage: refused, this Studio does not replicate; from the
//! ledger: previewed, saying the ledger starts later, and applied).
//! Afterwards no item is left, and the undo and the restore are in the
//! ledger as the admin's, initiator `undo`.
//!
//! And the whole scenario a team lead fears, with a scripted model
//! (`tests/common/fake_llm.rs`): a member's assistant conversation creates
//! 30 expenses, updates 10 of hers and deletes 5, each change approved by a
//! click in the assistant pane; she then edits one of the updated rows by
//! hand (the app's own view). In her Activity panel she undoes the
//! conversation: the rows are exactly those from before it, the hand edit
//! listed as a conflict and left as she wrote it; undoing that undo brings
//! the conversation's writes back (`tests/browser/undo-conversation.mjs`).
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::time::Duration;

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::fake_llm::{self, FakeLlm, Step};
use common::mcp::{Mcp, SESSIONLESS, structured};
use common::{UpProcess, browser_artifacts, free_port, http_client, undo_scenario};
use serde_json::{Value, json};
use studio_store::{AppAccess, Scope, UserRole};

const SCENARIO_TIMEOUT: Duration = Duration::from_secs(90);
const APP: &str = "field-log";
const CREATE: &str = "app__field_log__items__create";
const CONVERSATION: &str = "conversation-42";

#[tokio::test]
async fn the_activity_panel_undoes_one_conversations_changes() {
    browser::require();
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = UpProcess::start(state.path(), port).await;
    let studio = format!("http://localhost:{port}");
    let (admin, cookie) = common::sign_in_dev_admin(state.path(), &studio).await;
    let created = http_client()
        .post(format!("{studio}/api/apps"))
        .header("cookie", &cookie)
        .header("origin", &studio)
        .json(&json!({"app": APP, "name": "Field log", "description": "What we saw", "withTable": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);

    let mcp = format!("{studio}/mcp");
    let mut page = Mcp::new(
        &mcp,
        vec![
            ("cookie".into(), cookie.clone()),
            ("origin".into(), studio.clone()),
            ("sasha-app".into(), APP.into()),
        ],
        SESSIONLESS,
    );
    structured(
        &page
            .call(CREATE, json!({"values": {"title": "Gate 3 fixed"}}))
            .await,
    );
    let store = common::core_database::core_store(state.path());
    let admin_user = store
        .user_by_name(admin["username"].as_str().unwrap())
        .unwrap()
        .unwrap();
    let scopes = [Scope::ChatUse, Scope::AppsInvoke].into_iter().collect();
    let token = store
        .mint_conversation_token(&admin_user.id, &scopes, 600, CONVERSATION)
        .unwrap();
    let mut assistant = Mcp::new(
        &mcp,
        vec![("authorization".into(), format!("Bearer {token}"))],
        SESSIONLESS,
    )
    .eliciting(|_| json!({}));
    for title in ["Fence down", "Fence down again", "Fence down (typo)"] {
        common::mcp::confirmed_create(&mut assistant, CREATE, json!({"values": {"title": title}}))
            .await;
    }

    let artifacts = browser_artifacts().join("activity");
    BrowserScript::start(
        "activity",
        &[
            ("STUDIO_URL", &studio.as_str()),
            ("ADMIN_USER", &admin["username"].as_str().unwrap()),
            ("ADMIN_PASSWORD", &admin["password"].as_str().unwrap()),
            ("CONVERSATION", &CONVERSATION),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(SCENARIO_TIMEOUT, up_stderr_tail(&up))
    .await;

    let listed = page.call("app__field_log__items__list", json!({})).await;
    let titles: Vec<Value> = structured(&listed)["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["title"].clone())
        .collect();
    assert_eq!(
        titles,
        Vec::<Value>::new(),
        "restored to before every change"
    );
    let activity = page
        .call("listAppActivity", json!({"app": APP, "initiator": "undo"}))
        .await;
    let undone = structured(&activity)["entries"].as_array().unwrap().clone();
    assert_eq!(
        undone.len(),
        4,
        "the undo's three and the restore's one: {undone:?}"
    );
    assert!(
        undone
            .iter()
            .all(|entry| entry["actor"] == json!(admin_user.id) && entry["operation"] == "delete")
    );
}

const EXPENSES: &str = "expense-log";
const PASSWORD: &str = "correct horse battery";
/// 45 approvals one after another, or an undo of 45 rows and its own undo.
const CONVERSATION_TIMEOUT: Duration = Duration::from_secs(240);

/// One phase of `tests/browser/undo-conversation.mjs`, signed in as Mia.
async fn phase(name: &str, studio: &str, artifacts: &std::path::Path, up: &UpProcess) -> String {
    BrowserScript::start(
        "undo-conversation",
        &[
            ("PHASE", &name),
            ("STUDIO_URL", &studio),
            ("MEMBER_USER", &"mia"),
            ("MEMBER_PASSWORD", &PASSWORD),
            ("ARTIFACTS", &artifacts),
        ],
    )
    .finish(CONVERSATION_TIMEOUT, up_stderr_tail(up))
    .await
}

#[tokio::test]
async fn a_members_conversation_is_undone_and_the_undo_undone_in_chromium() {
    browser::require();
    let calls = undo_scenario::conversation_calls();
    let fake = FakeLlm::start(fake_llm::script(vec![
        Step::Calls(calls),
        Step::Text("Done: 30 added, 10 changed, 5 removed.".into()),
    ]))
    .await;
    let state = tempfile::tempdir().unwrap();
    common::copy_dir(
        &common::mcp::fixture(EXPENSES),
        &state.path().join("docs/apps").join(EXPENSES),
    );
    let port = free_port();
    let up = fake.up(state.path(), port, &[]).await;
    let studio = format!("http://localhost:{port}");
    let store = common::core_database::core_store(state.path());
    let mia = store
        .create_user("mia", UserRole::Member, PASSWORD)
        .unwrap();
    store
        .grant(EXPENSES, &mia.id, AppAccess::Manage, None)
        .unwrap();
    let mut page = Mcp::new(
        &format!("{studio}/mcp"),
        vec![
            (
                "cookie".into(),
                format!("sasha_session={}", store.create_session(&mia.id).unwrap()),
            ),
            ("origin".into(), studio.clone()),
            ("sasha-app".into(), EXPENSES.into()),
        ],
        SESSIONLESS,
    );
    undo_scenario::seed(&mut page).await;
    let mut before = undo_scenario::expenses(&mut page).await;

    let artifacts = browser_artifacts().join("undo-conversation");
    phase("converse", &studio, &artifacts, &up).await;
    let during = undo_scenario::expenses(&mut page).await;
    assert_eq!(during.as_array().unwrap().len(), 40, "{during}");

    // Mia edits one of the rows the assistant rewrote, in the app's view.
    before[0] = undo_scenario::edit_by_hand(&mut page).await;
    let after = undo_scenario::expenses(&mut page).await;

    let output = phase("undo", &studio, &artifacts, &up).await;
    common::browser::screenshots(&output, 2);
    assert_eq!(
        undo_scenario::expenses(&mut page).await,
        before,
        "the rows from before the conversation, with the hand edit kept"
    );
    phase("redo", &studio, &artifacts, &up).await;
    assert_eq!(
        undo_scenario::expenses(&mut page).await,
        after,
        "undoing the undo brings the conversation's writes back"
    );
    // Every change of the conversation, and of each undo, is Mia's.
    let activity = page
        .call("listAppActivity", json!({"app": EXPENSES, "limit": 200}))
        .await;
    let entries = structured(&activity)["entries"].as_array().unwrap().clone();
    let count = |initiator: &str| {
        entries
            .iter()
            .filter(|entry| entry["initiator"] == initiator && entry["actor"] == json!(mia.id))
            .count()
    };
    assert_eq!(
        (count("assistant"), count("undo"), count("app-view")),
        (45, 44 + 44, 17),
        "{entries:?}"
    );
}
