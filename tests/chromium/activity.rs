//! Studio's Activity panel in real Chromium (undo what went wrong): starts
//! `sasha up`, creates an app with a table as the dev admin, writes one item
//! in the app's own view (the Studio page's session) and three through a
//! token minted for a Studio assistant conversation (as the assistant's
//! connection is), then runs `tests/browser/activity.mjs`: the admin opens
//! Activity, sees the four changes with who started them, filters to the
//! conversation, previews the undo (three rows, no conflict) and undoes it.
//! Afterwards the item written by hand is the only one left, and the undo is
//! in the ledger as the admin's, initiator `undo`.
//!
//! `scripts/test.sh` installs Chromium and the npm packages; without them this
//! test fails rather than skipping.

use crate::common;

use std::time::Duration;

use common::browser::{self, BrowserScript, up_stderr_tail};
use common::mcp::{Mcp, SESSIONLESS, structured};
use common::{UpProcess, browser_artifacts, free_port, http_client};
use serde_json::{Value, json};
use studio_store::Scope;

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
    assert_eq!(titles, [json!("Gate 3 fixed")]);
    let activity = page
        .call("listAppActivity", json!({"app": APP, "initiator": "undo"}))
        .await;
    let undone = structured(&activity)["entries"].as_array().unwrap().clone();
    assert_eq!(undone.len(), 3, "{undone:?}");
    assert!(
        undone
            .iter()
            .all(|entry| entry["actor"] == json!(admin_user.id) && entry["operation"] == "delete")
    );
}
