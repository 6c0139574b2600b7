//! studio-core's own data calls in the `leases` layout, on each core
//! database: they go to the app's owner with its epoch (the stand-in
//! data-worker of `crate::test_data_worker` records it), ask the core
//! database again and try once more when the owner says the app moved, and
//! answer `APP_NOT_READY` when no worker holds a lease. On PostgreSQL this
//! also shows the store is called off the async threads (its blocking
//! client panics on them).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use sasha_contract::AppId;
use sasha_proto::ErrorCode;
use studio_store::{Moved, WorkerId, WorkerUrl};

use crate::data_worker;
use crate::test_data_worker::FakeData;
use crate::test_world::{World, off_runtime, on_both_databases};

const LONG: Duration = Duration::from_secs(600);

/// The stand-in data-worker, served on the world's PKI; its URL.
async fn serve_fake(world: &World, fake: &Arc<FakeData>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    crate::test_data_worker::serve(fake.clone(), listener, &world.dir.path().join("pki"));
    url
}

/// `worker` renews its lease at `url`, releasing `released` (app, epoch).
fn renew(world: &World, worker: &str, url: &str, released: &[(&str, u64)]) {
    let released: Vec<studio_store::Released> = released
        .iter()
        .map(|(app_id, epoch)| studio_store::Released {
            app_id: (*app_id).to_owned(),
            epoch: *epoch,
        })
        .collect();
    off_runtime(|| {
        world
            .store()
            .renew(
                &WorkerId::parse(worker).unwrap(),
                &WorkerUrl::parse(url).unwrap(),
                true,
                &released,
                LONG,
            )
            .unwrap()
    });
}

async fn rows(world: &World) -> Result<BTreeSet<String>, sasha_proto::AppError> {
    data_worker::tables_with_rows(
        &world.core.data,
        "notes",
        BTreeSet::from(["entries".to_owned()]),
    )
    .await
}

on_both_databases! {
    /// No worker: a data call answers that none holds a lease. Then the
    /// call goes to the owner with epoch 1; once the app moved (epoch 2),
    /// the stale route is refused, the core database asked again, and the
    /// call made once more with the new epoch.
    #[tokio::test]
    async fn core_sends_each_data_call_to_the_owner_with_its_epoch(database) {
        let world = World::with_leases(database, LONG);
        let refused = rows(&world).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::NotReady);
        assert_eq!(refused.message, "no data-worker holds a lease");

        let fake = Arc::new(FakeData::default());
        fake.put_rows("notes", "entries");
        let url = serve_fake(&world, &fake).await;
        renew(&world, "w1", &url, &[]);
        fake.own_at(1);
        assert_eq!(rows(&world).await.unwrap(), BTreeSet::from(["entries".to_owned()]));
        assert_eq!(fake.epochs(), [1]);

        // The app moves to w2 (the same stand-in, at the same URL): epoch 2.
        renew(&world, "w2", &url, &[]);
        let notes = AppId::parse("notes").unwrap();
        let moved = off_runtime(|| {
            world
                .store()
                .request_move(&notes, &WorkerId::parse("w2").unwrap())
                .unwrap()
        });
        assert_eq!(moved, Ok(Moved::HandingOver));
        renew(&world, "w1", &url, &[("notes", 1)]);
        fake.own_at(2);
        assert_eq!(rows(&world).await.unwrap(), BTreeSet::from(["entries".to_owned()]));
        assert_eq!(fake.epochs(), [1, 1, 2], "refused at the old epoch, then the new one");
        assert_eq!(rows(&world).await.unwrap().len(), 1);
        assert_eq!(fake.epochs(), [1, 1, 2, 2], "the new route is kept");
    }
}

#[test]
fn the_lease_is_read_from_the_environment_within_its_bounds() {
    use crate::DataPlaneConfig;
    let env = |pairs: &[(&str, &str)]| -> std::collections::HashMap<String, String> {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    };
    let leases = |secs: Option<&str>| {
        let mut pairs = vec![
            ("SASHA_DATA_PLACEMENT", "leases"),
            // Not read with leases.
            ("SASHA_DATA_GRPC_URL", "not a url"),
        ];
        pairs.extend(secs.map(|secs| ("SASHA_DATA_LEASE_SECS", secs)));
        DataPlaneConfig::from_env(&env(&pairs))
    };
    assert_eq!(
        leases(None).unwrap(),
        DataPlaneConfig::Leases {
            lease: Duration::from_secs(10)
        }
    );
    for (secs, expected) in [("2", 2), ("300", 300), ("45", 45)] {
        assert_eq!(
            leases(Some(secs)).unwrap(),
            DataPlaneConfig::Leases {
                lease: Duration::from_secs(expected)
            }
        );
    }
    for bad in ["1", "0", "301", "ten", "-5", "2.5"] {
        let error = leases(Some(bad)).unwrap_err().to_string();
        assert!(error.contains("SASHA_DATA_LEASE_SECS"), "{bad}: {error}");
        assert!(error.contains("from 2 to 300"), "{bad}: {error}");
    }
    assert_eq!(
        DataPlaneConfig::from_env(&env(&[("SASHA_DATA_GRPC_URL", "https://dw:3013")])).unwrap(),
        DataPlaneConfig::Single {
            url: "https://dw:3013".into()
        }
    );
    let error = DataPlaneConfig::from_env(&env(&[("SASHA_DATA_PLACEMENT", "many")]))
        .unwrap_err()
        .to_string();
    assert!(error.contains("SASHA_DATA_PLACEMENT"), "{error}");
}
