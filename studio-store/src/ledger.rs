//! The revision ledger: every revision of an app that validated, durable in
//! the core database, so an old `ui://sasha/apps/<id>/revisions/<sha256>` is
//! served with its exact bytes on any replica and after any restart, and the
//! files of any kept revision can be read back.
//!
//! Storage is content-addressed: a file's bytes are stored once per sha256
//! (`revision_blobs`), however many revisions (of however many apps) hold
//! them, and an assembled resource once per revision (`revision_resources`;
//! the revision is the sha256 of the resource). `app_revisions` has one row
//! per (app, revision), written when the revision is first recorded, with who
//! made it (a user id, or none for a change found on disk), when, through
//! which surface and a one-line summary; `app_revision_files` lists its files.
//!
//! Recording is idempotent: recording a revision the ledger holds changes
//! nothing, with one exception. The catalogue's refresh records every new
//! revision as found on disk, and may get there before the source tool that
//! made the change; an authored recording (a surface that knows its user)
//! whose change began at or before the row was written takes over that row's
//! attribution. Older rows are never re-attributed.
//!
//! Retention: after each new revision, only the newest `retention` revisions
//! of the app (by first recording) are kept, plus the app's current revision
//! (`app_registry.current_revision`) and the revision just recorded, which are
//! never pruned. Pruning removes the revision's rows and then every blob and
//! resource no other revision references, in the same transaction.
//!
//! What it must not do: serve bytes that do not match their address. A
//! resource is checked against its revision, and a file against its sha256,
//! both when recorded and when read.

use std::fmt;
use std::str::FromStr;

use crate::db::{OptionalExtension as _, Sql, Tx};
use sasha_package::assemble::{Resource, resource_uri, revision_of};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::{ParseEnumError, Store, StoreError};

/// Revisions kept per app when `SASHA_REVISION_RETENTION` is unset.
pub const DEFAULT_REVISION_RETENTION: usize = 50;
/// A summary is cut to this many characters.
pub const MAX_REVISION_SUMMARY_CHARS: usize = 200;
/// The summary of a revision the catalogue found on disk.
pub const SUMMARY_FOUND_ON_DISK: &str = "found on disk";
/// The summary of a revision seeded from the bundled apps.
pub const SUMMARY_SEEDED: &str = "seeded bundled app";

wire_enum! {
    /// Through which surface a revision was made.
    RevisionSurface, "revision surface", "mcp, filesystem, seed or studio" {
        /// The MCP source tools (`writeAppFile`, `editAppFile`, `deleteAppFile`).
        Mcp => "mcp",
        /// A change the catalogue found on disk (its watcher or a refresh).
        Filesystem => "filesystem",
        /// The bundled apps, installed at startup.
        Seed => "seed",
        /// The Studio web app.
        Studio => "studio",
    }
}

/// Who made a revision, how, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionOrigin {
    pub surface: RevisionSurface,
    /// The user who made it; `None` when nobody is known (found on disk, seeded).
    pub user_id: Option<String>,
    /// One line, e.g. `writeAppFile app.js`; cut to
    /// [`MAX_REVISION_SUMMARY_CHARS`], control characters become spaces.
    pub summary: String,
    /// For an authored change: when it began (unix seconds, [`Store::timestamp`]).
    /// A row of the same revision recorded as found on disk at or after this
    /// moment is attributed to this origin instead.
    pub since: Option<i64>,
}

impl RevisionOrigin {
    /// A change the catalogue found on disk.
    pub fn found_on_disk() -> RevisionOrigin {
        RevisionOrigin {
            surface: RevisionSurface::Filesystem,
            user_id: None,
            summary: SUMMARY_FOUND_ON_DISK.to_owned(),
            since: None,
        }
    }

    /// A bundled app installed or refreshed by the seeder.
    pub fn seeded() -> RevisionOrigin {
        RevisionOrigin {
            surface: RevisionSurface::Seed,
            user_id: None,
            summary: SUMMARY_SEEDED.to_owned(),
            since: None,
        }
    }

    /// A change `user_id` made through `surface`, which began at `since`.
    pub fn authored(
        surface: RevisionSurface,
        user_id: &str,
        summary: impl Into<String>,
        since: i64,
    ) -> RevisionOrigin {
        RevisionOrigin {
            surface,
            user_id: Some(user_id.to_owned()),
            summary: summary.into(),
            since: Some(since),
        }
    }
}

/// What a revision consists of: its assembled resource and every file of
/// the package it was assembled from.
#[derive(Debug, Clone)]
pub struct RevisionContent<'a> {
    /// The app and revision are the resource's.
    pub resource: &'a Resource,
    /// `(package-relative path, bytes)` of every file.
    pub files: Vec<(&'a str, &'a [u8])>,
}

/// What [`Store::record_revision`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// A new row; `pruned` older revisions were removed by retention.
    New { pruned: usize },
    /// The row existed as found on disk and now names its author.
    Attributed,
    /// The ledger already held the revision.
    Unchanged,
}

/// One revision of an app, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionEntry {
    pub app_id: String,
    pub revision: String,
    /// `ui://sasha/apps/<id>/revisions/<revision>`.
    pub uri: String,
    /// Unix seconds of the first recording.
    pub recorded_at: i64,
    pub user_id: Option<String>,
    pub surface: RevisionSurface,
    pub summary: String,
    /// How many files, and how many bytes in all.
    pub files: i64,
    pub bytes: i64,
    /// Whether it is the app's current revision.
    pub current: bool,
}

/// One file of a revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionFile {
    pub path: String,
    /// sha256 hex of the bytes: the file's content address (and the source
    /// tools' `version` of it).
    pub sha256: String,
    pub size: i64,
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The summary as stored: one line, bounded.
fn one_line(summary: &str) -> String {
    let line: String = summary
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_REVISION_SUMMARY_CHARS)
        .collect();
    let line = line.trim();
    if line.is_empty() {
        "(no summary)".to_owned()
    } else {
        line.to_owned()
    }
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Database(format!("the revision ledger is corrupt: {what}"))
}

/// Whether `app_id` has a registry row (the ledger only holds registered apps).
fn registered(connection: &impl Sql, app_id: &str) -> Result<bool, StoreError> {
    Ok(connection
        .query_row(
            "SELECT 1 FROM app_registry WHERE app_id = ?1",
            [app_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// The existing row of `(app_id, revision)`: `(recorded_at, user_id, surface)`.
type ExistingRow = (i64, Option<String>, RevisionSurface);

fn existing(
    connection: &impl Sql,
    app_id: &str,
    revision: &str,
) -> Result<Option<ExistingRow>, StoreError> {
    Ok(connection
        .query_row(
            "SELECT recorded_at, user_id, surface FROM app_revisions
             WHERE app_id = ?1 AND revision = ?2",
            [app_id, revision],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?)
}

/// Whether `origin` takes over the attribution of the row `row`.
fn claims(origin: &RevisionOrigin, row: &ExistingRow) -> bool {
    let (recorded_at, user_id, surface) = row;
    origin.user_id.is_some()
        && user_id.is_none()
        && *surface == RevisionSurface::Filesystem
        && origin.since.is_some_and(|since| *recorded_at >= since)
}

/// Removes `app_id`'s revisions beyond the newest `retention`, never its
/// current revision nor `keep`, then every blob and resource left without a
/// reference. Returns how many revisions went.
fn prune_app(
    transaction: &Tx<'_>,
    app_id: &str,
    retention: usize,
    keep: Option<&str>,
) -> Result<usize, StoreError> {
    let retention = i64::try_from(retention).unwrap_or(i64::MAX);
    let doomed: Vec<(i64, String)> = {
        let mut statement = transaction.prepare_cached(
            "SELECT r.id, r.revision FROM app_revisions r
             WHERE r.app_id = ?1
               AND r.revision IS DISTINCT FROM ?3
               AND r.revision IS DISTINCT FROM (SELECT current_revision FROM app_registry WHERE app_id = ?1)
               AND r.id NOT IN (SELECT id FROM app_revisions WHERE app_id = ?1 ORDER BY id DESC LIMIT ?2)
             ORDER BY r.id",
        )?;
        statement
            .query_map((app_id, retention, keep), |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?
            .collect::<Result<_, _>>()?
    };
    for (id, revision) in &doomed {
        let blobs: Vec<String> = {
            let mut statement = transaction
                .prepare_cached("SELECT sha256 FROM app_revision_files WHERE revision_id = ?1")?;
            statement
                .query_map([id], |row| row.get(0))?
                .collect::<Result<_, _>>()?
        };
        // The files go with the revision (ON DELETE CASCADE).
        transaction.execute("DELETE FROM app_revisions WHERE id = ?1", [id])?;
        // A blob a draft still holds stays.
        super::drafts::drop_unreferenced_blobs(transaction, &blobs)?;
        transaction.execute(
            "DELETE FROM revision_resources WHERE revision = ?1
             AND NOT EXISTS (SELECT 1 FROM app_revisions WHERE revision = ?1)",
            [revision],
        )?;
    }
    Ok(doomed.len())
}

impl Store {
    /// The store's clock in unix seconds: what [`RevisionOrigin::since`] is
    /// compared with.
    pub fn timestamp(&self) -> i64 {
        self.now()
    }

    /// Records one revision of a registered app (the resource's), with its
    /// files, then applies `retention` to the app. Idempotent (see the module
    /// comment for the one re-attribution). Refuses an app that was never
    /// registered (`UnknownApp`), and a resource whose bytes do not hash to
    /// its revision.
    pub fn record_revision(
        &self,
        content: &RevisionContent<'_>,
        origin: &RevisionOrigin,
        retention: usize,
    ) -> Result<Recorded, StoreError> {
        let resource = content.resource;
        let (app_id, revision) = (resource.app_id.as_str(), resource.revision.as_str());
        // The common case, on every refresh of an unchanged app: a read, no
        // write lock, no hashing.
        {
            let connection = self.connection()?;
            if let Some(row) = existing(&connection, app_id, revision)?
                && !claims(origin, &row)
            {
                return Ok(Recorded::Unchanged);
            }
        }
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        if !registered(&transaction, app_id)? {
            return Err(StoreError::UnknownApp);
        }
        let recorded = insert_revision(&transaction, self.now(), content, origin, retention)?;
        transaction.commit()?;
        Ok(recorded)
    }

    /// Applies `retention` to every app in the ledger (at boot, so a lowered
    /// `SASHA_REVISION_RETENTION` takes effect without waiting for a change).
    /// Returns how many revisions went.
    pub fn prune_revisions(&self, retention: usize) -> Result<usize, StoreError> {
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let apps: Vec<String> = {
            let mut statement =
                transaction.prepare("SELECT DISTINCT app_id FROM app_revisions ORDER BY app_id")?;
            statement
                .query_map((), |row| row.get(0))?
                .collect::<Result<_, _>>()?
        };
        let mut pruned = 0;
        for app_id in &apps {
            pruned += prune_app(&transaction, app_id, retention, None)?;
        }
        transaction.commit()?;
        Ok(pruned)
    }

    /// `app_id`'s revisions in the ledger, newest first. `UnknownApp` for an
    /// app never registered.
    pub fn revisions(&self, app_id: &str) -> Result<Vec<RevisionEntry>, StoreError> {
        let connection = self.connection()?;
        if !registered(&connection, app_id)? {
            return Err(StoreError::UnknownApp);
        }
        let mut statement = connection.prepare_cached(
            "SELECT r.revision, r.recorded_at, r.user_id, r.surface, r.summary,
                    count(f.path), CAST(coalesce(sum(f.size), 0) AS BIGINT),
                    r.revision = g.current_revision
             FROM app_revisions r
             JOIN app_registry g ON g.app_id = r.app_id
             LEFT JOIN app_revision_files f ON f.revision_id = r.id
             WHERE r.app_id = ?1
             GROUP BY r.id, g.current_revision
             ORDER BY r.id DESC",
        )?;
        let entries = statement
            .query_map([app_id], |row| {
                let revision: String = row.get(0)?;
                Ok(RevisionEntry {
                    app_id: app_id.to_owned(),
                    uri: resource_uri(app_id, &revision),
                    revision,
                    recorded_at: row.get(1)?,
                    user_id: row.get(2)?,
                    surface: row.get(3)?,
                    summary: row.get(4)?,
                    files: row.get(5)?,
                    bytes: row.get(6)?,
                    current: row.get(7)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(entries)
    }

    /// The files of `app_id` at `revision`, by path; `None` when the ledger
    /// does not hold that revision (never recorded, or pruned).
    pub fn revision_files(
        &self,
        app_id: &str,
        revision: &str,
    ) -> Result<Option<Vec<RevisionFile>>, StoreError> {
        let connection = self.connection()?;
        if !registered(&connection, app_id)? {
            return Err(StoreError::UnknownApp);
        }
        let id: Option<i64> = connection
            .query_row(
                "SELECT id FROM app_revisions WHERE app_id = ?1 AND revision = ?2",
                [app_id, revision],
                |row| row.get(0),
            )
            .optional()?;
        let Some(id) = id else {
            return Ok(None);
        };
        let mut statement = connection.prepare_cached(
            "SELECT path, sha256, size FROM app_revision_files WHERE revision_id = ?1 ORDER BY path",
        )?;
        let files = statement
            .query_map([id], |row| {
                Ok(RevisionFile {
                    path: row.get(0)?,
                    sha256: row.get(1)?,
                    size: row.get(2)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(Some(files))
    }

    /// The bytes of `path` in `app_id` at `revision`; `None` when the ledger
    /// does not hold that revision or the revision has no such file.
    pub fn revision_file(
        &self,
        app_id: &str,
        revision: &str,
        path: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let connection = self.connection()?;
        if !registered(&connection, app_id)? {
            return Err(StoreError::UnknownApp);
        }
        let found: Option<(String, Vec<u8>)> = connection
            .query_row(
                "SELECT b.sha256, b.content
                 FROM app_revisions r
                 JOIN app_revision_files f ON f.revision_id = r.id
                 JOIN revision_blobs b ON b.sha256 = f.sha256
                 WHERE r.app_id = ?1 AND r.revision = ?2 AND f.path = ?3",
                [app_id, revision, path],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        match found {
            Some((sha256, bytes)) if sha256_hex(&bytes) == sha256 => Ok(Some(bytes)),
            Some(_) => Err(corrupt("a file's bytes do not match their sha256")),
            None => Ok(None),
        }
    }

    /// The assembled resource of `app_id` at `revision`, exactly as it was
    /// served; `None` when the ledger does not hold that revision.
    pub fn revision_resource(
        &self,
        app_id: &str,
        revision: &str,
    ) -> Result<Option<Resource>, StoreError> {
        let connection = self.connection()?;
        if !registered(&connection, app_id)? {
            return Err(StoreError::UnknownApp);
        }
        let found: Option<(String, String, String, String)> = connection
            .query_row(
                "SELECT s.mime_type, s.csp, s.meta_json, s.html
                 FROM app_revisions r
                 JOIN revision_resources s ON s.revision = r.revision
                 WHERE r.app_id = ?1 AND r.revision = ?2",
                [app_id, revision],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )
            .optional()?;
        drop(connection);
        let Some((mime_type, csp, meta_json, html)) = found else {
            return Ok(None);
        };
        let meta: serde_json::Value = serde_json::from_str(&meta_json)
            .map_err(|_| corrupt("a resource's meta is not JSON"))?;
        if revision_of(&mime_type, &csp, &meta, &html) != revision {
            return Err(corrupt("a resource does not hash to its revision"));
        }
        Ok(Some(Resource {
            app_id: app_id.to_owned(),
            revision: revision.to_owned(),
            uri: resource_uri(app_id, revision),
            mime_type,
            html,
            csp,
            meta,
        }))
    }
}

/// A resource of `app_id` with `html` whose revision is its hash, as the
/// ledger's and the drafts' store tests record it.
/// Records one revision of a registered app inside `transaction` (the
/// caller's, so a member app's deploy records its revision in the same
/// transaction as its caps), then applies `retention` to the app. The
/// resource's bytes are hashed here, under the write lock: at most 1 MiB of
/// package, hashed in well under a millisecond.
pub(super) fn insert_revision(
    transaction: &Tx<'_>,
    now: i64,
    content: &RevisionContent<'_>,
    origin: &RevisionOrigin,
    retention: usize,
) -> Result<Recorded, StoreError> {
    let resource = content.resource;
    let (app_id, revision) = (resource.app_id.as_str(), resource.revision.as_str());
    let meta_json = resource.meta.to_string();
    if revision_of(
        &resource.mime_type,
        &resource.csp,
        &resource.meta,
        &resource.html,
    ) != revision
    {
        return Err(StoreError::Database(format!(
            "the resource of {app_id} does not hash to its revision {revision}"
        )));
    }
    let files: Vec<(&str, &[u8], String)> = content
        .files
        .iter()
        .map(|(path, bytes)| (*path, *bytes, sha256_hex(bytes)))
        .collect();
    let summary = one_line(&origin.summary);
    if let Some(row) = existing(transaction, app_id, revision)? {
        if !claims(origin, &row) {
            return Ok(Recorded::Unchanged);
        }
        transaction.execute(
            "UPDATE app_revisions SET user_id = ?3, surface = ?4, summary = ?5
             WHERE app_id = ?1 AND revision = ?2",
            (app_id, revision, &origin.user_id, origin.surface, &summary),
        )?;
        return Ok(Recorded::Attributed);
    }
    transaction.execute(
        "INSERT INTO revision_resources (revision, mime_type, csp, meta_json, html)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (revision) DO NOTHING",
        (
            revision,
            &resource.mime_type,
            &resource.csp,
            &meta_json,
            &resource.html,
        ),
    )?;
    let revision_id: i64 = transaction.query_row(
        "INSERT INTO app_revisions (app_id, revision, recorded_at, user_id, surface, summary)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
        (
            app_id,
            revision,
            now,
            &origin.user_id,
            origin.surface,
            &summary,
        ),
        |row| row.get(0),
    )?;
    for (path, bytes, sha256) in &files {
        transaction.execute(
            "INSERT INTO revision_blobs (sha256, content) VALUES (?1, ?2)
             ON CONFLICT (sha256) DO NOTHING",
            (sha256, bytes),
        )?;
        transaction.execute(
            "INSERT INTO app_revision_files (revision_id, path, sha256, size)
             VALUES (?1, ?2, ?3, ?4)",
            (
                revision_id,
                path,
                sha256,
                i64::try_from(bytes.len()).unwrap_or(i64::MAX),
            ),
        )?;
    }
    let pruned = prune_app(transaction, app_id, retention, Some(revision))?;
    Ok(Recorded::New { pruned })
}

#[cfg(test)]
pub(crate) fn test_resource(app_id: &str, html: &str) -> Resource {
    const MIME: &str = "text/html;profile=mcp-app";
    let meta = serde_json::json!({
        "csp": {"connectDomains": []},
        "prefersBorder": false,
        "sasha": {"sourceDigest": sha256_hex(html.as_bytes())},
    });
    let csp = "default-src 'none'".to_owned();
    let revision = revision_of(MIME, &csp, &meta, html);
    Resource {
        app_id: app_id.to_owned(),
        uri: resource_uri(app_id, &revision),
        revision,
        mime_type: MIME.to_owned(),
        html: html.to_owned(),
        csp,
        meta,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::test_resource as resource;
    use crate::tests::{START, on_both};

    /// The crate's fixture, on the backend of the running test.
    struct Fixture {
        shared: crate::tests::Fixture,
        store: Store,
    }

    impl Fixture {
        fn new() -> Fixture {
            let shared = crate::tests::Fixture::new();
            let store = shared.store.clone();
            Fixture { shared, store }
        }

        fn advance(&self, seconds: i64) {
            self.shared.advance(seconds);
        }

        /// Registers `app_id` with `revision` as its current one.
        fn current(&self, app_id: &str, revision: &str) {
            self.store
                .register_app(app_id, revision, None, "[]", &Default::default())
                .unwrap();
        }

        fn count(&self, table: &str) -> i64 {
            self.shared
                .raw()
                .query_row(&format!("SELECT count(*) FROM {table}"), (), |row| {
                    row.get(0)
                })
                .unwrap()
        }

        /// Records `resource` with `files`, found on disk.
        fn record(
            &self,
            resource: &Resource,
            files: &[(&str, &str)],
            retention: usize,
        ) -> Recorded {
            self.record_as(resource, files, &RevisionOrigin::found_on_disk(), retention)
        }

        fn record_as(
            &self,
            resource: &Resource,
            files: &[(&str, &str)],
            origin: &RevisionOrigin,
            retention: usize,
        ) -> Recorded {
            let content = RevisionContent {
                resource,
                files: files
                    .iter()
                    .map(|(path, text)| (*path, text.as_bytes()))
                    .collect(),
            };
            self.store
                .record_revision(&content, origin, retention)
                .unwrap()
        }

        fn listed(&self, app_id: &str) -> Vec<String> {
            self.store
                .revisions(app_id)
                .unwrap()
                .into_iter()
                .map(|entry| entry.revision)
                .collect()
        }
    }

    on_both! {
    fn revisions_sharing_a_file_store_its_bytes_once() {
        let fixture = Fixture::new();
        let (one, two) = (resource("hello", "<p>1</p>"), resource("hello", "<p>2</p>"));
        fixture.current("hello", &one.revision);
        let shared = "body { color: red }";
        assert_eq!(
            fixture.record(&one, &[("styles.css", shared), ("app.js", "one()")], 50),
            Recorded::New { pruned: 0 }
        );
        fixture.current("hello", &two.revision);
        assert_eq!(
            fixture.record(&two, &[("styles.css", shared), ("app.js", "two()")], 50),
            Recorded::New { pruned: 0 }
        );
        // Three distinct contents, four file rows, two resources.
        assert_eq!(fixture.count("revision_blobs"), 3);
        assert_eq!(fixture.count("app_revision_files"), 4);
        assert_eq!(fixture.count("revision_resources"), 2);
        // Another app holding the same bytes adds no blob either.
        let other = resource("other", "<p>o</p>");
        fixture.current("other", &other.revision);
        fixture.record(&other, &[("styles.css", shared)], 50);
        assert_eq!(fixture.count("revision_blobs"), 3);

        let files = fixture
            .store
            .revision_files("hello", &one.revision)
            .unwrap()
            .unwrap();
        assert_eq!(
            files,
            [
                RevisionFile {
                    path: "app.js".into(),
                    sha256: sha256_hex(b"one()"),
                    size: 5,
                },
                RevisionFile {
                    path: "styles.css".into(),
                    sha256: sha256_hex(shared.as_bytes()),
                    size: shared.len() as i64,
                },
            ]
        );
        for (revision, script) in [(&one.revision, "one()"), (&two.revision, "two()")] {
            let store = &fixture.store;
            assert_eq!(
                store.revision_file("hello", revision, "app.js").unwrap(),
                Some(script.as_bytes().to_vec())
            );
            assert_eq!(
                store
                    .revision_file("hello", revision, "styles.css")
                    .unwrap(),
                Some(shared.as_bytes().to_vec())
            );
        }
        // The resource comes back exactly.
        assert_eq!(
            fixture
                .store
                .revision_resource("hello", &one.revision)
                .unwrap(),
            Some(one)
        );
    }
    }

    on_both! {
    fn recording_is_idempotent() {
        let fixture = Fixture::new();
        let one = resource("hello", "<p>1</p>");
        fixture.current("hello", &one.revision);
        let files = [("app.js", "one()")];
        assert_eq!(
            fixture.record(&one, &files, 50),
            Recorded::New { pruned: 0 }
        );
        fixture.advance(60);
        // Again, and again by an author long after: nothing changes.
        assert_eq!(fixture.record(&one, &files, 50), Recorded::Unchanged);
        let later = RevisionOrigin::authored(
            RevisionSurface::Mcp,
            "u1",
            "writeAppFile app.js",
            fixture.store.timestamp(),
        );
        assert_eq!(
            fixture.record_as(&one, &files, &later, 50),
            Recorded::Unchanged
        );
        let entries = fixture.store.revisions("hello").unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].recorded_at, START);
        assert_eq!(entries[0].surface, RevisionSurface::Filesystem);
        assert_eq!(entries[0].user_id, None);
        assert_eq!(entries[0].summary, SUMMARY_FOUND_ON_DISK);
        for (table, rows) in [
            ("app_revisions", 1),
            ("app_revision_files", 1),
            ("revision_blobs", 1),
            ("revision_resources", 1),
        ] {
            assert_eq!(fixture.count(table), rows, "{table}");
        }
    }
    }

    on_both! {
    fn an_authored_change_takes_over_only_its_own_found_on_disk_row() {
        let fixture = Fixture::new();
        let (one, two) = (resource("hello", "<p>1</p>"), resource("hello", "<p>2</p>"));
        fixture.current("hello", &one.revision);
        fixture.record(&one, &[("app.js", "one()")], 50);
        fixture.advance(10);
        // A source tool's change begins; the refresh records it as found on
        // disk before the tool records it as its user's.
        let since = fixture.store.timestamp();
        fixture.current("hello", &two.revision);
        fixture.record(&two, &[("app.js", "two()")], 50);
        let origin =
            RevisionOrigin::authored(RevisionSurface::Mcp, "u1", "writeAppFile\napp.js", since);
        assert_eq!(
            fixture.record_as(&two, &[("app.js", "two()")], &origin, 50),
            Recorded::Attributed
        );
        // The older row keeps its attribution.
        assert_eq!(
            fixture.record_as(&one, &[("app.js", "one()")], &origin, 50),
            Recorded::Unchanged
        );
        let entries = fixture.store.revisions("hello").unwrap();
        assert_eq!(entries[0].revision, two.revision);
        assert_eq!(entries[0].user_id.as_deref(), Some("u1"));
        assert_eq!(entries[0].surface, RevisionSurface::Mcp);
        // One line.
        assert_eq!(entries[0].summary, "writeAppFile app.js");
        assert_eq!(entries[1].surface, RevisionSurface::Filesystem);
        assert_eq!(entries[1].user_id, None);
        // A new revision recorded by its author directly.
        let three = resource("hello", "<p>3</p>");
        fixture.current("hello", &three.revision);
        let seeded = fixture.record_as(&three, &[], &RevisionOrigin::seeded(), 50);
        assert_eq!(seeded, Recorded::New { pruned: 0 });
        assert_eq!(
            fixture.store.revisions("hello").unwrap()[0].surface,
            RevisionSurface::Seed
        );
    }
    }

    on_both! {
    fn revisions_are_listed_newest_first() {
        let fixture = Fixture::new();
        let revisions: Vec<Resource> = (1..=3)
            .map(|n| resource("hello", &format!("<p>{n}</p>")))
            .collect();
        for (n, revision) in revisions.iter().enumerate() {
            fixture.current("hello", &revision.revision);
            fixture.record(revision, &[("app.js", &format!("{n}"))], 50);
            fixture.advance(1);
        }
        let entries = fixture.store.revisions("hello").unwrap();
        let listed: Vec<&str> = entries.iter().map(|e| e.revision.as_str()).collect();
        let expected: Vec<&str> = revisions
            .iter()
            .rev()
            .map(|r| r.revision.as_str())
            .collect();
        assert_eq!(listed, expected);
        assert_eq!(
            entries.iter().map(|e| e.recorded_at).collect::<Vec<_>>(),
            [START + 2, START + 1, START]
        );
        assert_eq!(
            entries.iter().map(|e| e.current).collect::<Vec<_>>(),
            [true, false, false]
        );
        assert_eq!(entries[0].uri, revisions[2].uri);
        assert_eq!((entries[0].files, entries[0].bytes), (1, 1));
    }
    }

    on_both! {
    fn retention_prunes_old_revisions_and_their_files_but_never_the_current() {
        let fixture = Fixture::new();
        let revisions: Vec<Resource> = (1..=5)
            .map(|n| resource("hello", &format!("<p>{n}</p>")))
            .collect();
        // The app's current revision stays the first one (say, every later
        // revision was recorded by another replica that then reverted).
        fixture.current("hello", &revisions[0].revision);
        let mut pruned = Vec::new();
        for (n, revision) in revisions.iter().enumerate() {
            let unique = format!("unique {n}");
            let files = [("shared.css", "shared"), ("app.js", unique.as_str())];
            match fixture.record(revision, &files, 2) {
                Recorded::New { pruned: count } => pruned.push(count),
                other => panic!("{other:?}"),
            }
        }
        // Each recording beyond the newest two and the current prunes one.
        assert_eq!(pruned, [0, 0, 0, 1, 1]);
        let kept = fixture.listed("hello");
        assert_eq!(
            kept,
            [
                revisions[4].revision.clone(),
                revisions[3].revision.clone(),
                revisions[0].revision.clone(),
            ]
        );
        // Pruned revisions are gone entirely: rows, files, resource, blobs
        // only they held; shared bytes stay.
        for gone in &revisions[1..3] {
            let store = &fixture.store;
            assert_eq!(
                store.revision_resource("hello", &gone.revision).unwrap(),
                None
            );
            assert_eq!(store.revision_files("hello", &gone.revision).unwrap(), None);
            assert_eq!(
                store
                    .revision_file("hello", &gone.revision, "shared.css")
                    .unwrap(),
                None
            );
        }
        assert_eq!(fixture.count("revision_resources"), 3);
        assert_eq!(fixture.count("app_revision_files"), 6);
        // "shared" once, plus unique 0, 3 and 4.
        assert_eq!(fixture.count("revision_blobs"), 4);
        assert_eq!(
            fixture
                .store
                .revision_file("hello", &revisions[0].revision, "shared.css")
                .unwrap(),
            Some(b"shared".to_vec())
        );

        // A lowered retention, applied at boot: only the current is left,
        // and even a retention of zero never removes it.
        assert_eq!(fixture.store.prune_revisions(0).unwrap(), 2);
        assert_eq!(fixture.listed("hello"), [revisions[0].revision.clone()]);
        assert_eq!(fixture.store.prune_revisions(0).unwrap(), 0);
        assert_eq!(fixture.count("revision_resources"), 1);
        assert_eq!(fixture.count("revision_blobs"), 2);
        assert!(
            fixture
                .store
                .revision_resource("hello", &revisions[0].revision)
                .unwrap()
                .is_some()
        );
        // Recording with retention zero keeps the current and the new one.
        let six = resource("hello", "<p>6</p>");
        assert_eq!(
            fixture.record(&six, &[("app.js", "six")], 0),
            Recorded::New { pruned: 0 }
        );
        assert_eq!(fixture.listed("hello").len(), 2);
    }
    }

    on_both! {
    fn unknown_apps_revisions_and_bad_content_are_refused() {
        let fixture = Fixture::new();
        let one = resource("hello", "<p>1</p>");
        let store = &fixture.store;
        // Never registered: nothing is recorded or answered.
        let content = RevisionContent {
            resource: &one,
            files: vec![("app.js", b"x".as_slice())],
        };
        let origin = RevisionOrigin::found_on_disk();
        assert!(matches!(
            store.record_revision(&content, &origin, 50),
            Err(StoreError::UnknownApp)
        ));
        assert!(matches!(
            store.revisions("hello"),
            Err(StoreError::UnknownApp)
        ));
        assert!(matches!(
            store.revision_resource("hello", &one.revision),
            Err(StoreError::UnknownApp)
        ));
        assert!(matches!(
            store.revision_files("hello", &one.revision),
            Err(StoreError::UnknownApp)
        ));
        assert!(matches!(
            store.revision_file("hello", &one.revision, "app.js"),
            Err(StoreError::UnknownApp)
        ));
        assert_eq!(fixture.count("revision_blobs"), 0);

        // Registered: an unknown revision or path is absent, not an error.
        fixture.current("hello", &one.revision);
        assert_eq!(store.revisions("hello").unwrap(), []);
        let unknown = "0".repeat(64);
        assert_eq!(store.revision_resource("hello", &unknown).unwrap(), None);
        assert_eq!(store.revision_files("hello", &unknown).unwrap(), None);
        store.record_revision(&content, &origin, 50).unwrap();
        assert_eq!(
            store
                .revision_file("hello", &one.revision, "nope.js")
                .unwrap(),
            None
        );
        // Another app's revision is not this app's.
        fixture.current("other", &unknown);
        assert_eq!(
            store.revision_resource("other", &one.revision).unwrap(),
            None
        );

        // A resource that does not hash to its revision is never stored.
        let mut forged = resource("hello", "<p>2</p>");
        forged.html.push_str("<script>evil()</script>");
        let content = RevisionContent {
            resource: &forged,
            files: Vec::new(),
        };
        assert!(matches!(
            store.record_revision(&content, &origin, 50),
            Err(StoreError::Database(_))
        ));
        assert_eq!(
            store.revision_resource("hello", &forged.revision).unwrap(),
            None
        );

        // Bytes changed behind the ledger's back are refused, never served.
        store
            .connection()
            .unwrap()
            .execute("UPDATE revision_blobs SET content = ?1", [vec![0_u8]])
            .unwrap();
        assert!(matches!(
            store.revision_file("hello", &one.revision, "app.js"),
            Err(StoreError::Database(_))
        ));
        store
            .connection()
            .unwrap()
            .execute("UPDATE revision_resources SET html = 'other'", ())
            .unwrap();
        assert!(matches!(
            store.revision_resource("hello", &one.revision),
            Err(StoreError::Database(_))
        ));
    }
    }

    #[test]
    fn summaries_are_one_bounded_line() {
        assert_eq!(one_line("  writeAppFile\tapp.js\n"), "writeAppFile app.js");
        assert_eq!(one_line("\n"), "(no summary)");
        let long = "é".repeat(MAX_REVISION_SUMMARY_CHARS + 10);
        assert_eq!(one_line(&long).chars().count(), MAX_REVISION_SUMMARY_CHARS);
    }
}
