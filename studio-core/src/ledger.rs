//! Where revisions enter the revision ledger (`studio_store::ledger`) and where old
//! ones are served from it.
//!
//! Recording: after every catalogue refresh each valid package is recorded
//! with the files the snapshot kept for it ([`crate::catalogue::Snapshot::source`]),
//! as found on disk (`filesystem`), or as `seed` on the first registration
//! after the seeder installed or refreshed it. A source tool records its own
//! change afterwards as `mcp` with the user ([`record_authored`]); when the
//! refresh got there first, that recording takes over the row's attribution
//! (the ledger's rule). Recording never fails a request: a failure is logged.
//!
//! Serving: [`resource`] answers from the live catalogue (the current
//! revision and the process-local history) and otherwise from the ledger,
//! so an old `ui://` revision reads the same on every replica and after a
//! restart; `APP_REVISION_UNAVAILABLE` is left for revisions the retention
//! policy removed (or that were never recorded).
//!
//! What it must never do: record a package that does not validate, or
//! rebuild an old revision from current source (a revision names exact
//! bytes).

use std::collections::BTreeSet;
use std::sync::Arc;

use sasha_package::assemble::Resource;
use sasha_package::source::PackageSource;
use sasha_package::validate::Package;
use sasha_proto::{AppError, ErrorCode};

use crate::catalogue::{AppEntry, Snapshot};
use crate::state::Core;
use studio_store::blocking;
use studio_store::{Recorded, RevisionContent, RevisionOrigin, Store, StoreError};

/// What the ledger stores of one valid package: its resource and every file.
fn content<'a>(package: &'a Package, source: &'a PackageSource) -> RevisionContent<'a> {
    RevisionContent {
        resource: &package.resource,
        // Text and binary files alike, as the source digest covers them.
        files: source.entries(),
    }
}

/// Records `package` (blocking), logging the outcome.
fn record(
    store: &Store,
    package: &Package,
    source: &PackageSource,
    origin: &RevisionOrigin,
    retention: usize,
) {
    let app_id = &package.resource.app_id;
    let revision = &package.resource.revision;
    match store.record_revision(&content(package, source), origin, retention) {
        Ok(Recorded::New { pruned }) => tracing::debug!(
            app_id = %app_id,
            revision = %revision,
            surface = %origin.surface,
            pruned,
            "revision recorded in the ledger"
        ),
        Ok(Recorded::Attributed) => tracing::debug!(
            app_id = %app_id,
            revision = %revision,
            surface = %origin.surface,
            "revision attributed in the ledger"
        ),
        Ok(Recorded::Unchanged) => {}
        Err(error) => {
            tracing::error!(app_id = %app_id, revision = %revision, %error, "cannot record the revision")
        }
    }
}

/// Records every valid package of `snapshot` that has its files (blocking),
/// right after it was registered: `seed` for the ids in `seeded`, found on
/// disk for the rest.
pub(crate) fn record_snapshot(
    store: &Store,
    snapshot: &Snapshot,
    retention: usize,
    seeded: &BTreeSet<String>,
) {
    for (id, package) in snapshot.valid() {
        let Some(source) = snapshot.source(id) else {
            tracing::debug!(app_id = %id, "package files changed before they were kept; not recorded now");
            continue;
        };
        let origin = if seeded.contains(id) {
            RevisionOrigin::seeded()
        } else {
            RevisionOrigin::found_on_disk()
        };
        record(store, package, source, &origin, retention);
    }
}

/// Records `app_id`'s current valid revision as made by `origin` (a source
/// tool's change, after its refresh). Nothing when the package is not valid.
pub(crate) async fn record_authored(core: &Core, app_id: &str, origin: RevisionOrigin) {
    let snapshot = core.catalogue.current();
    let (Some(AppEntry::Valid(package)), Some(source)) =
        (snapshot.apps.get(app_id), snapshot.source(app_id))
    else {
        return;
    };
    let (store, package, source) = (core.store.clone(), package.clone(), source.clone());
    let retention = core.revision_retention;
    let recorded =
        tokio::task::spawn_blocking(move || record(&store, &package, &source, &origin, retention))
            .await;
    if let Err(error) = recorded {
        tracing::error!(app_id = %app_id, %error, "revision recording failed");
    }
}

/// The resource of `app_id` at `revision`: the live catalogue's (current or
/// still in its history), else the ledger's exact bytes. A revision neither
/// holds is `APP_REVISION_UNAVAILABLE` for a registered app; for an app the
/// store never registered, the catalogue's answer stands.
pub(crate) async fn resource(
    core: &Core,
    app_id: &str,
    revision: &str,
) -> Result<Arc<Resource>, AppError> {
    let missed = match core.catalogue.resource(app_id, revision) {
        Ok(resource) => return Ok(resource),
        Err(error) => error,
    };
    let (store, app, wanted) = (core.store.clone(), app_id.to_owned(), revision.to_owned());
    match blocking(move || match store.revision_resource(&app, &wanted) {
        Err(StoreError::UnknownApp) => Ok(Err(())),
        other => other.map(Ok),
    })
    .await?
    {
        Ok(Some(resource)) => Ok(Arc::new(resource)),
        Ok(None) => Err(AppError::from_code(ErrorCode::RevisionUnavailable)),
        Err(()) => Err(missed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Catalogue;
    use studio_store::RevisionSurface;

    fn register(store: &Store, snapshot: &Snapshot) {
        for (id, package) in snapshot.valid() {
            store
                .register_app(
                    id,
                    &package.resource.revision,
                    None,
                    "[]",
                    &Default::default(),
                )
                .unwrap();
        }
    }

    /// A refreshed catalogue's packages enter the ledger with every file as
    /// on disk, seeded or found on disk, and an old revision's resource comes
    /// back byte for byte.
    #[test]
    fn snapshots_are_recorded_with_their_files() {
        let docs = tempfile::tempdir().unwrap();
        for id in ["hello", "expense-log"] {
            crate::test_world::copy_fixture(id, &docs.path().join("apps").join(id));
        }
        let store = Store::open(&docs.path().join("core.sqlite")).unwrap();
        let catalogue = Catalogue::new(docs.path(), 4);
        let first = catalogue.refresh();
        register(&store, &first);
        let seeded: BTreeSet<String> = ["expense-log".to_owned()].into();
        record_snapshot(&store, &first, 50, &seeded);

        let old = match first.apps.get("hello") {
            Some(AppEntry::Valid(package)) => package.resource.clone(),
            other => panic!("{other:?}"),
        };
        let entries = store.revisions("hello").unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].surface, RevisionSurface::Filesystem);
        assert_eq!(
            store.revisions("expense-log").unwrap()[0].surface,
            RevisionSurface::Seed
        );
        let files = store
            .revision_files("hello", &old.revision)
            .unwrap()
            .unwrap();
        let on_disk: Vec<String> = first.source("hello").unwrap().paths().into_iter().collect();
        assert_eq!(
            files
                .iter()
                .map(|file| file.path.clone())
                .collect::<Vec<_>>(),
            on_disk
        );
        for file in &files {
            let bytes = std::fs::read(docs.path().join("apps/hello").join(&file.path)).unwrap();
            assert_eq!(
                store
                    .revision_file("hello", &old.revision, &file.path)
                    .unwrap(),
                Some(bytes)
            );
        }

        // A change on disk is a second revision; the first stays readable.
        let styles = docs.path().join("apps/hello/styles.css");
        let text = std::fs::read_to_string(&styles).unwrap();
        std::fs::write(&styles, format!("{text}\n/* changed */\n")).unwrap();
        let second = catalogue.refresh();
        register(&store, &second);
        record_snapshot(&store, &second, 50, &BTreeSet::new());
        // Recording an unchanged snapshot again adds nothing.
        record_snapshot(&store, &second, 50, &BTreeSet::new());
        let entries = store.revisions("hello").unwrap();
        assert_eq!(entries.len(), 2);
        assert!(entries[0].current && !entries[1].current);
        assert_eq!(entries[1].revision, old.revision);
        assert_eq!(
            store.revision_resource("hello", &old.revision).unwrap(),
            Some(old)
        );
    }
}
