//! studio-core discovers packages at boot and follows changes on disk: the
//! catalogue's counts in `GET /healthz` move as packages appear, break and heal.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{Harness, copy_dir, get};
use sasha_service::Role;

fn fixture(id: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/packages/valid")
        .join(id)
}

async fn wait_for_counts(
    core: std::net::SocketAddr,
    valid: u64,
    invalid: u64,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let health = get(core, "localhost:3007", "/healthz", "").await.json();
        if health["apps"]["valid"] == valid && health["apps"]["invalid"] == invalid {
            return health;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "expected {valid} valid and {invalid} invalid apps, have {}",
            health["apps"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn discovery_follows_the_docs_tree() {
    let harness = Harness::new();
    let apps = harness.path().join("docs/apps");
    copy_dir(&fixture("hello"), &apps.join("hello"));
    std::fs::create_dir_all(apps.join("_shared")).unwrap();
    std::fs::create_dir_all(apps.join("broken")).unwrap();
    std::fs::write(apps.join("broken/APP.md"), "not a manifest").unwrap();

    let data = harness.start(Role::DataWorker, &[]).await;
    let core = harness
        .start(
            Role::StudioCore,
            &[(
                "SASHA_DATA_GRPC_URL",
                format!("https://{}", data.listener("grpc")),
            )],
        )
        .await;
    let http = core.listener("http");
    let first = wait_for_counts(http, 1, 1).await;

    // A new package appears and is offered without a restart.
    copy_dir(&fixture("expense-log"), &apps.join("expense-log"));
    let second = wait_for_counts(http, 2, 1).await;
    assert_ne!(first["apps"]["fingerprint"], second["apps"]["fingerprint"]);

    // A broken edit withdraws it; fixing it brings it back.
    let script = apps.join("hello/app.js");
    let good = std::fs::read_to_string(&script).unwrap();
    std::fs::write(&script, format!("export {{}};\n{good}")).unwrap();
    wait_for_counts(http, 1, 2).await;
    std::fs::write(&script, good).unwrap();
    wait_for_counts(http, 2, 1).await;

    // Removing a package releases it.
    std::fs::remove_dir_all(apps.join("broken")).unwrap();
    wait_for_counts(http, 2, 0).await;
}
