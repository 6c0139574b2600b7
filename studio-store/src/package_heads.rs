//! Package heads (`package_heads`, `package_head_files`): the current files
//! of every app package under `DOCS_ROOT/apps`, in the core database, so
//! studio-core replicas share packages without sharing a disk. Each replica's
//! `DOCS_ROOT` is its own working copy (`studio_core::package_sync`); a change
//! made on one is advanced here and materialised by the others.
//!
//! A head is the whole file set of one package (valid or not: a package a
//! person is half-way through editing is still theirs), or a tombstone once
//! the package is removed. Its `generation` rises by one on every change, and
//! a change names the generation it was made from: [`Store::advance_package_head`]
//! refuses one made from an older generation, so two replicas changing one
//! package at once never overwrite each other silently: the second learns
//! the head moved. File bytes are the revision ledger's content-addressed
//! blobs, stored once however many heads, revisions and drafts hold them.
//!
//! What it must never do: advance a head from a generation that is not its
//! current one, keep half a change (the files and the generation move in one
//! write transaction), or drop a blob a head still names.

use std::collections::BTreeMap;

use crate::db::{OptionalExtension as _, Sql as _};

use super::{Store, StoreError};

/// One package's head as a replica reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageHead {
    pub app_id: String,
    pub generation: i64,
    /// The sha256 over the file set (`sasha_package::assemble::source_digest`),
    /// as the replica that advanced it computed; empty for a tombstone.
    pub digest: String,
    /// The files by package-relative path; `None` once the package is removed.
    pub files: Option<BTreeMap<String, Vec<u8>>>,
}

/// What [`Store::advance_package_head`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advanced {
    /// The head is now at this generation.
    To(i64),
    /// Refused: the head is at this generation, not the one the change was
    /// made from; nothing was written.
    Moved(i64),
}

impl Store {
    /// Every head's generation, by app id (tombstones included): what a
    /// replica compares with its working copy to see what others changed.
    pub fn package_head_generations(&self) -> Result<BTreeMap<String, i64>, StoreError> {
        let connection = self.connection()?;
        let mut statement =
            connection.prepare_cached("SELECT app_id, generation FROM package_heads")?;
        let rows = statement
            .query_map((), |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
            })?
            .collect::<Result<BTreeMap<_, _>, _>>()?;
        Ok(rows)
    }

    /// The generation of `app_id`'s head, `0` when no replica has advanced
    /// one: what a replica reads again before it calls the head moved.
    pub fn package_head_generation(&self, app_id: &str) -> Result<i64, StoreError> {
        Ok(self
            .connection()?
            .query_row(
                "SELECT generation FROM package_heads WHERE app_id = ?1",
                [app_id],
                |row| row.get(0),
            )
            .optional()?
            .unwrap_or(0))
    }

    /// The head of `app_id` with its files, or `None` when no replica has
    /// advanced one.
    pub fn package_head(&self, app_id: &str) -> Result<Option<PackageHead>, StoreError> {
        let mut connection = self.connection()?;
        let transaction = connection.read_transaction()?;
        let Some((generation, digest, deleted)) = transaction
            .query_row(
                "SELECT generation, digest, deleted FROM package_heads WHERE app_id = ?1",
                [app_id],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, bool>(2)?,
                    ))
                },
            )
            .optional()?
        else {
            return Ok(None);
        };
        let files = if deleted {
            None
        } else {
            let mut statement = transaction.prepare_cached(
                "SELECT f.path, f.sha256, b.content FROM package_head_files f
                 JOIN revision_blobs b ON b.sha256 = f.sha256
                 WHERE f.app_id = ?1 ORDER BY f.path",
            )?;
            let rows: Vec<(String, String, Vec<u8>)> = statement
                .query_map([app_id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
                .collect::<Result<_, _>>()?;
            let mut files = BTreeMap::new();
            for (path, sha256, content) in rows {
                if super::drafts::sha256_hex(&content) != sha256 {
                    return Err(StoreError::Database(format!(
                        "the package head of {app_id} names a file ({path}) whose stored bytes do not match their sha256"
                    )));
                }
                files.insert(path, content);
            }
            Some(files)
        };
        Ok(Some(PackageHead {
            app_id: app_id.to_owned(),
            generation,
            digest,
            files,
        }))
    }

    /// Makes `files` (or, with `None`, a tombstone) the head of `app_id`,
    /// provided the head is still at generation `from` (`0`: no head yet).
    /// One write transaction: the blobs, the file list and the generation.
    pub fn advance_package_head(
        &self,
        app_id: &str,
        from: i64,
        digest: &str,
        files: Option<&BTreeMap<String, Vec<u8>>>,
    ) -> Result<Advanced, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let current: i64 = transaction
            .query_row(
                "SELECT generation FROM package_heads WHERE app_id = ?1",
                [app_id],
                |row| row.get(0),
            )
            .optional()?
            .unwrap_or(0);
        if current != from {
            return Ok(Advanced::Moved(current));
        }
        let released: Vec<String> = {
            let mut statement = transaction
                .prepare_cached("SELECT sha256 FROM package_head_files WHERE app_id = ?1")?;
            statement
                .query_map([app_id], |row| row.get(0))?
                .collect::<Result<_, _>>()?
        };
        transaction.execute("DELETE FROM package_head_files WHERE app_id = ?1", [app_id])?;
        let next = current + 1;
        transaction.execute(
            "INSERT INTO package_heads (app_id, generation, digest, deleted, changed_at)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (app_id) DO UPDATE SET generation = excluded.generation,
                 digest = excluded.digest, deleted = excluded.deleted,
                 changed_at = excluded.changed_at",
            (
                app_id,
                next,
                if files.is_some() { digest } else { "" },
                files.is_none(),
                now,
            ),
        )?;
        for (path, bytes) in files.into_iter().flatten() {
            let sha256 = super::drafts::put_blob(&transaction, bytes)?;
            transaction.execute(
                "INSERT INTO package_head_files (app_id, path, sha256, size) VALUES (?1, ?2, ?3, ?4)",
                (app_id, path, &sha256, i64::try_from(bytes.len()).unwrap_or(i64::MAX)),
            )?;
        }
        super::drafts::drop_unreferenced_blobs(&transaction, &released)?;
        transaction.commit()?;
        Ok(Advanced::To(next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{Fixture, RACERS, handles, on_both, race};

    fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(path, text)| ((*path).to_owned(), text.as_bytes().to_vec()))
            .collect()
    }

    fn count(fixture: &Fixture, table: &str) -> i64 {
        fixture
            .raw()
            .query_row(&format!("SELECT count(*) FROM {table}"), (), |row| {
                row.get(0)
            })
            .unwrap()
    }

    on_both! {
        fn a_head_advances_one_generation_at_a_time_and_reads_back_exactly() {
            let fixture = Fixture::new();
            let store = &fixture.store;
            assert_eq!(store.package_head("notes").unwrap(), None);
            let first = files(&[("APP.md", "a"), ("ui/index.html", "<p>")]);
            assert_eq!(store.advance_package_head("notes", 0, "d1", Some(&first)).unwrap(), Advanced::To(1));
            let head = store.package_head("notes").unwrap().unwrap();
            assert_eq!((head.generation, head.digest.as_str(), head.files.as_ref()), (1, "d1", Some(&first)));
            let second = files(&[("APP.md", "b")]);
            assert_eq!(store.advance_package_head("notes", 1, "d2", Some(&second)).unwrap(), Advanced::To(2));
            assert_eq!(store.package_head("notes").unwrap().unwrap().files, Some(second));
            // The blobs of files no head, revision or draft names are gone.
            assert_eq!(count(&fixture, "revision_blobs"), 1);
            assert_eq!(store.package_head_generations().unwrap(), BTreeMap::from([("notes".to_owned(), 2)]));
            assert_eq!((store.package_head_generation("notes").unwrap(), store.package_head_generation("other").unwrap()), (2, 0));
        }
    }

    on_both! {
        fn a_change_made_from_an_old_generation_is_refused_and_writes_nothing() {
            let fixture = Fixture::new();
            let store = &fixture.store;
            let first = files(&[("APP.md", "a")]);
            store.advance_package_head("notes", 0, "d1", Some(&first)).unwrap();
            store.advance_package_head("notes", 1, "d2", Some(&files(&[("APP.md", "b")]))).unwrap();
            assert_eq!(
                store.advance_package_head("notes", 1, "d3", Some(&files(&[("APP.md", "c")]))).unwrap(),
                Advanced::Moved(2)
            );
            // "No head yet" is a generation too.
            assert_eq!(store.advance_package_head("notes", 0, "d3", Some(&first)).unwrap(), Advanced::Moved(2));
            let head = store.package_head("notes").unwrap().unwrap();
            assert_eq!((head.generation, head.files), (2, Some(files(&[("APP.md", "b")]))));
            assert_eq!(count(&fixture, "revision_blobs"), 1);
        }
    }

    on_both! {
        fn a_tombstone_keeps_the_generation_and_drops_the_files() {
            let fixture = Fixture::new();
            let store = &fixture.store;
            store.advance_package_head("notes", 0, "d1", Some(&files(&[("APP.md", "a")]))).unwrap();
            assert_eq!(store.advance_package_head("notes", 1, "ignored", None).unwrap(), Advanced::To(2));
            let head = store.package_head("notes").unwrap().unwrap();
            assert_eq!((head.generation, head.digest.as_str(), head.files), (2, "", None));
            assert_eq!(count(&fixture, "package_head_files"), 0);
            assert_eq!(count(&fixture, "revision_blobs"), 0);
            // A package made again under the same id continues the count.
            assert_eq!(store.advance_package_head("notes", 2, "d3", Some(&files(&[("APP.md", "z")]))).unwrap(), Advanced::To(3));
        }
    }

    on_both! {
        fn racing_replicas_advance_one_head_exactly_once_per_generation() {
            let fixture = Fixture::new();
            fixture.store.advance_package_head("notes", 0, "d0", Some(&files(&[("APP.md", "0")]))).unwrap();
            let stores = handles(&fixture, RACERS);
            let outcomes = race(&stores, |n, store| {
                let text = format!("writer {n}");
                store.advance_package_head("notes", 1, &format!("d{n}"), Some(&files(&[("APP.md", &text)]))).unwrap()
            });
            let won: Vec<usize> = outcomes.iter().enumerate().filter(|(_, outcome)| **outcome == Advanced::To(2)).map(|(n, _)| n).collect();
            assert_eq!(won.len(), 1, "{outcomes:?}");
            assert_eq!(outcomes.iter().filter(|outcome| **outcome == Advanced::Moved(2)).count(), RACERS - 1);
            let head = fixture.store.package_head("notes").unwrap().unwrap();
            assert_eq!(head.files, Some(files(&[("APP.md", &format!("writer {}", won[0]))])));
        }
    }

    on_both! {
        fn pruning_the_ledger_keeps_the_blobs_a_head_names() {
            let fixture = Fixture::new();
            let store = &fixture.store;
            store.advance_package_head("notes", 0, "d1", Some(&files(&[("APP.md", "shared")]))).unwrap();
            {
                let mut connection = store.connection().unwrap();
                let transaction = connection.write_transaction().unwrap();
                let blob = crate::drafts::sha256_hex(b"shared");
                crate::drafts::drop_unreferenced_blobs(&transaction, std::slice::from_ref(&blob)).unwrap();
                transaction.commit().unwrap();
            }
            assert_eq!(count(&fixture, "revision_blobs"), 1);
            assert!(store.package_head("notes").unwrap().unwrap().files.is_some());
        }
    }
}
