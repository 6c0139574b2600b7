//! The revision ledger across processes: a change made through the source
//! tools is recorded as its user's, and the revision it replaced is read
//! through MCP `resources/read` with exactly the bytes it had, by a new
//! studio-core and a new gateway on the same core database (nothing of the
//! old processes' memory left). A lowered retention prunes it at the next
//! boot, and then it is `APP_REVISION_UNAVAILABLE` while the current
//! revision is still served.

use crate::common;

use std::collections::BTreeSet;

use common::mcp::{Exchange, Mcp, McpWorld, structured};
use common::{Harness, RoleProcess};
use sasha_service::Role;
use serde_json::{Value, json};
use studio_store::{RevisionSurface, Scope, TokenKind};

fn ui_uri(app: &str, revision: &str) -> String {
    format!("ui://sasha/apps/{app}/revisions/{revision}")
}

fn contents(exchange: &Exchange) -> Value {
    exchange.result()["contents"][0].clone()
}

/// A new studio-core (on the state folder's core database) and a gateway
/// wired to it and to `data`.
async fn restart(
    harness: &Harness,
    data: &RoleProcess,
    core_env: &[(&str, String)],
) -> (RoleProcess, RoleProcess) {
    let data_url = format!("https://{}", data.listener("grpc"));
    let mut env = vec![("SASHA_DATA_GRPC_URL", data_url.clone())];
    env.extend(core_env.iter().cloned());
    let core = harness.start(Role::StudioCore, &env).await;
    let gateway = harness
        .start(
            Role::McpGateway,
            &[
                ("SASHA_DATA_GRPC_URL", data_url),
                (
                    "SASHA_CORE_GRPC_URL",
                    format!("https://{}", core.listener("grpc")),
                ),
            ],
        )
        .await;
    (core, gateway)
}

fn client(gateway: &RoleProcess, token: &str) -> Mcp {
    Mcp::sessionless(&format!("http://{}/mcp", gateway.listener("http")), token)
}

#[tokio::test]
async fn an_old_revision_is_served_from_the_ledger_after_a_restart() {
    let McpWorld {
        harness,
        backends,
        store,
        staff,
        ..
    } = McpWorld::start().await;
    let scopes: BTreeSet<Scope> = [Scope::ChatUse, Scope::AppsInvoke, Scope::AppsWrite]
        .into_iter()
        .collect();
    let writer = store
        .mint_token(&staff.id, TokenKind::Access, &scopes, None)
        .unwrap();
    let mut model = client(&backends.gateway, &writer);

    // The live revision, as served before any change.
    let checked = model.call("checkApp", json!({"app": "hello"})).await;
    let old = structured(&checked)["status"]["revision"]
        .as_str()
        .unwrap()
        .to_owned();
    let old_uri = ui_uri("hello", &old);
    let served = contents(
        &model
            .request("resources/read", json!({"uri": old_uri}))
            .await,
    );
    assert!(
        served["text"]
            .as_str()
            .unwrap()
            .to_ascii_lowercase()
            .starts_with("<!doctype html>"),
        "{served}"
    );

    // A change through the source tools makes a new revision.
    let read = model
        .call("readAppFile", json!({"app": "hello", "path": "styles.css"}))
        .await;
    let version = structured(&read)["version"].as_str().unwrap().to_owned();
    let styles = structured(&read)["content"].as_str().unwrap().to_owned();
    let written = model
        .call(
            "writeAppFile",
            json!({
                "app": "hello",
                "path": "styles.css",
                "content": format!("{styles}\n/* a new revision */\n"),
                "expectedVersion": version,
            }),
        )
        .await;
    let status = &structured(&written)["status"];
    assert_eq!(status["ok"], true, "{status}");
    let new = status["revision"].as_str().unwrap().to_owned();
    assert_ne!(new, old);

    // The ledger holds both, the new one as the staff user's source tool change.
    let entries = store.revisions("hello").unwrap();
    assert_eq!(
        entries
            .iter()
            .map(|entry| entry.revision.as_str())
            .collect::<Vec<_>>(),
        [new.as_str(), old.as_str()]
    );
    assert_eq!(entries[0].surface, RevisionSurface::Mcp);
    assert_eq!(entries[0].user_id.as_deref(), Some(staff.id.as_str()));
    assert_eq!(entries[0].summary, "writeAppFile styles.css");
    assert!(entries[0].current);
    assert_eq!(entries[1].surface, RevisionSurface::Filesystem);
    assert_eq!(entries[1].user_id, None);
    assert_eq!(entries[1].summary, "found on disk");
    // Its files are the ones written.
    let stored = store
        .revision_file("hello", &new, "styles.css")
        .unwrap()
        .unwrap();
    assert_eq!(
        String::from_utf8(stored).unwrap(),
        format!("{styles}\n/* a new revision */\n")
    );

    // Restart studio-core and the gateway: no process remembers the old
    // revision, the ledger serves its exact bytes.
    let backends = {
        let common::Backends {
            data,
            core,
            gateway,
        } = backends;
        gateway.stop().await;
        core.stop().await;
        let (core, gateway) = restart(&harness, &data, &[]).await;
        common::Backends {
            data,
            core,
            gateway,
        }
    };
    let mut model = client(&backends.gateway, &writer);
    let again = model
        .request("resources/read", json!({"uri": old_uri}))
        .await;
    assert_eq!(contents(&again), served);
    let current = model
        .request("resources/read", json!({"uri": ui_uri("hello", &new)}))
        .await;
    assert_eq!(contents(&current)["uri"], ui_uri("hello", &new));

    // A retention of zero prunes every revision but the current one at boot:
    // the old revision is then unavailable, the current one still served.
    let common::Backends {
        data,
        core,
        gateway,
    } = backends;
    gateway.stop().await;
    core.stop().await;
    let (_core, gateway) = restart(
        &harness,
        &data,
        &[("SASHA_REVISION_RETENTION", "0".to_owned())],
    )
    .await;
    let mut model = client(&gateway, &writer);
    let pruned = model
        .request("resources/read", json!({"uri": old_uri}))
        .await;
    assert_eq!(
        pruned.error()["data"]["error"]["code"],
        "APP_REVISION_UNAVAILABLE",
        "{}",
        pruned.body
    );
    let current_again = model
        .request("resources/read", json!({"uri": ui_uri("hello", &new)}))
        .await;
    assert_eq!(contents(&current_again), contents(&current));
    assert_eq!(
        store
            .revisions("hello")
            .unwrap()
            .iter()
            .map(|entry| entry.revision.clone())
            .collect::<Vec<_>>(),
        [new]
    );
}
