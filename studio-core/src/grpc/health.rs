//! studio-core's health as its probes, `/healthz` and `CoreService.Health`
//! report it: this process, and with `deep` the data plane's (data-worker's
//! `Health` with one worker; with leases, how many workers hold one) and a
//! read of the core database.
//!
//! What it must never do: report ready while the core database or, with one
//! data-worker, that worker does not answer. With leases, readiness does
//! not wait for data-workers: they start after studio-core, since they
//! renew their leases with it.

use sasha_proto::pb::{self, HealthReply, HealthRequest};
use sasha_service::Role;
use sasha_service::grpc;

use crate::state::{Core, DataLayout};

/// The data plane's health: data-worker's `Health` with one worker; with
/// leases, whether any worker holds a live lease (none: no data call can
/// be served).
async fn data_plane(core: &Core) -> pb::DependencyHealth {
    match &core.data_layout {
        DataLayout::Single(client) => {
            let mut data = client.clone();
            grpc::dependency_health(Role::DataWorker, data.health(HealthRequest { deep: false }))
                .await
        }
        DataLayout::Leases { .. } => {
            let store = core.store.clone();
            let (ok, detail) = match studio_store::blocking(move || store.workers()).await {
                Ok(workers) => {
                    let live = workers.iter().filter(|w| w.lease_left.is_some()).count();
                    (
                        live > 0,
                        format!("{live} of {} data-workers hold a lease", workers.len()),
                    )
                }
                Err(error) => (
                    false,
                    format!("the data-workers' leases cannot be read ({})", error.code),
                ),
            };
            pb::DependencyHealth {
                role: "data-workers".to_owned(),
                ok,
                detail,
            }
        }
    }
}

/// This process's health; with `deep`, the data plane's too.
pub(crate) async fn health(core: &Core, deep: bool) -> HealthReply {
    let mut dependencies = Vec::new();
    if deep {
        dependencies.push(data_plane(core).await);
    }
    grpc::health_reply(Role::StudioCore, dependencies)
}

/// Whether core can serve: its database answers a read and, with one
/// data-worker, that worker answers `Health`.
pub(crate) async fn readiness(core: &Core) -> HealthReply {
    let store = core.store.clone();
    let single = matches!(core.data_layout, DataLayout::Single(_));
    let (database, mut reply) = tokio::join!(
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            tokio::task::spawn_blocking(move || store.check()),
        ),
        health(core, single),
    );
    let database_ok = matches!(database, Ok(Ok(Ok(()))));
    if let Ok(Ok(Err(error))) = &database {
        tracing::warn!(%error, "readiness: the core database does not answer");
    }
    reply.dependencies.insert(
        0,
        pb::DependencyHealth {
            role: "core-database".to_owned(),
            ok: database_ok,
            detail: if database_ok {
                String::new()
            } else {
                "the core database does not answer".to_owned()
            },
        },
    );
    grpc::health_reply(Role::StudioCore, reply.dependencies)
}

/// Every role's replication as `/healthz` and the admin page show it:
/// `{"studio-core": …, "data-worker": …}`, each present when that role
/// replicates; `None` when neither does.
pub(crate) async fn replication_json(core: &Core) -> Option<serde_json::Value> {
    let mut roles = serde_json::Map::new();
    if let Some(replication) = &core.replication {
        roles.insert(
            sasha_service::Role::StudioCore.as_str().to_owned(),
            sasha_service::grpc::replication_json(&replication.replicator.health()),
        );
    }
    // With leases, each worker's replication is its own (`sasha admin
    // workers` says which replicate).
    let DataLayout::Single(client) = &core.data_layout else {
        return (!roles.is_empty()).then_some(serde_json::Value::Object(roles));
    };
    let mut data = client.clone();
    let asked = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        data.health(sasha_proto::pb::HealthRequest { deep: false }),
    )
    .await;
    match asked {
        Ok(Ok(reply)) => {
            if let Some(replication) = reply.into_inner().replication {
                roles.insert(
                    sasha_service::Role::DataWorker.as_str().to_owned(),
                    sasha_service::grpc::replication_json(&replication),
                );
            }
        }
        _ if core.replication.is_some() => {
            roles.insert(
                sasha_service::Role::DataWorker.as_str().to_owned(),
                serde_json::json!({"ok": false, "detail": "data-worker does not answer"}),
            );
        }
        _ => {}
    }
    (!roles.is_empty()).then_some(serde_json::Value::Object(roles))
}
