//! `sasha up` over a fresh state folder holding the valid fixture apps
//! `hello` and `expense-log`, with the development admin's credentials and a
//! member who may use expense-log: the whole system as a user meets it.

use std::time::{Duration, Instant};

use studio_store::{AppAccess, UserRole};

use super::core_database::{CoreStore, core_store};
use super::{UpProcess, copy_dir, free_port, root};

/// The member's password.
pub const MEMBER_PASSWORD: &str = "correct horse battery";

pub struct UpStack {
    /// Kept for its lifetime: the state folder is deleted on drop.
    pub state: tempfile::TempDir,
    pub up: UpProcess,
    pub port: u16,
    /// The core database, opened beside the running studio-core.
    pub store: CoreStore,
    pub admin_name: String,
    pub admin_password: String,
    pub member_id: String,
}

impl UpStack {
    /// Starts the system and creates `member` with `use` on expense-log.
    pub async fn start(member: &str) -> UpStack {
        let state = tempfile::tempdir().unwrap();
        for app in ["hello", "expense-log"] {
            copy_dir(
                &root().join("tests/packages/valid").join(app),
                &state.path().join("docs/apps").join(app),
            );
        }
        let port = free_port();
        let up = UpProcess::start(state.path(), port).await;
        let admin: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(state.path().join("dev-admin.json")).unwrap(),
        )
        .unwrap();
        let store = core_store(state.path());
        let admin_name = admin["username"].as_str().unwrap().to_owned();
        let admin_id = store.user_by_name(&admin_name).unwrap().unwrap().id;
        let member = store
            .create_user(member, UserRole::Member, MEMBER_PASSWORD)
            .unwrap();
        // The catalogue registers the apps on its first refresh; only a
        // registered app can be granted.
        let deadline = Instant::now() + Duration::from_secs(30);
        while store.registered_app("expense-log").unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "studio-core did not register expense-log"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        store
            .grant("expense-log", &member.id, AppAccess::Use, Some(&admin_id))
            .unwrap();
        UpStack {
            state,
            up,
            port,
            store,
            admin_name,
            admin_password: admin["password"].as_str().unwrap().to_owned(),
            member_id: member.id,
        }
    }

    /// `http://localhost:<port>`: the Studio origin (and the MCP origin).
    pub fn origin(&self) -> String {
        format!("http://localhost:{}", self.port)
    }
}
