//! The documents users upload for the assistant (`uploads`), converted to
//! Markdown by studio-uploads, which decides what may be stored (its limits,
//! its converters, its safe-name rule) and calls here only to keep it: one
//! row per document, keyed by its user and its name, so every studio-core
//! replica reads what any of them stored.
//!
//! What it must never do: store part of an upload (one transaction per
//! upload), replace a stored document (a name, once taken, is decided by the
//! primary key: `INSERT … ON CONFLICT DO NOTHING` moves on to the next
//! name), hand one user's document to another (every call names its user),
//! or keep a document of a removed user (the rows cascade from `users`).

use std::collections::HashSet;

use crate::db::{OptionalExtension as _, Sql as _, Tx};

use super::{Store, StoreError};

/// One converted document of an upload, and the names it may take in
/// order of preference (`brief.md`, `brief-2.md`, …; bounded by the caller).
#[derive(Debug)]
pub struct NewUpload<'a, N> {
    pub names: N,
    pub markdown: &'a str,
}

/// What storing an upload came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadOutcome {
    /// Every document, each under the name it took, in order.
    Stored(Vec<String>),
    /// The document at this index ran out of names (every one offered was
    /// taken); nothing was stored.
    NoFreeName(usize),
}

/// What importing one document came to (an existing `UPLOADS_ROOT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    Stored,
    /// The user has a document of that name already; it was kept.
    NameTaken,
    /// No such user (removed since); nothing was stored.
    UnknownUser,
}

/// Whether `user_id` is a user, inside `transaction`.
fn user_exists(transaction: &Tx<'_>, user_id: &str) -> Result<bool, StoreError> {
    Ok(transaction
        .query_row("SELECT 1 FROM users WHERE id = ?1", [user_id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Inserts `markdown` as `user_id`'s `name` unless the name is taken;
/// whether it was inserted. The primary key decides, whatever was read.
fn insert_new(
    transaction: &Tx<'_>,
    user_id: &str,
    name: &str,
    markdown: &str,
    now: i64,
) -> Result<bool, StoreError> {
    let inserted = transaction.execute(
        "INSERT INTO uploads (user_id, name, markdown, created_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id, name) DO NOTHING",
        (user_id, name, markdown, now),
    )?;
    Ok(inserted == 1)
}

impl Store {
    /// Stores every document of one upload of `user_id`, each under the
    /// first of its names that is free, all in one transaction: every
    /// document or none. An unknown user is [`StoreError::UnknownUser`].
    pub fn store_uploads<'a, N: IntoIterator<Item = String>>(
        &self,
        user_id: &str,
        documents: Vec<NewUpload<'a, N>>,
    ) -> Result<UploadOutcome, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        if !user_exists(&transaction, user_id)? {
            return Err(StoreError::UnknownUser);
        }
        // The names read here only spare statements for names known taken;
        // the INSERT's conflict is what decides.
        let mut taken: HashSet<String> = transaction
            .query_map(
                "SELECT name FROM uploads WHERE user_id = ?1",
                [user_id],
                |row| row.get(0),
            )?
            .collect::<Result<_, _>>()?;
        let mut stored = Vec::with_capacity(documents.len());
        for (index, document) in documents.into_iter().enumerate() {
            let mut chosen = None;
            for name in document.names {
                if taken.contains(&name) {
                    continue;
                }
                let inserted = insert_new(&transaction, user_id, &name, document.markdown, now)?;
                taken.insert(name.clone());
                if inserted {
                    chosen = Some(name);
                    break;
                }
            }
            match chosen {
                Some(name) => stored.push(name),
                // Dropped uncommitted: the documents before it go too.
                None => return Ok(UploadOutcome::NoFreeName(index)),
            }
        }
        transaction.commit()?;
        Ok(UploadOutcome::Stored(stored))
    }

    /// `user_id`'s document `name`, or `None` when there is none.
    pub fn upload(&self, user_id: &str, name: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .connection()?
            .query_row(
                "SELECT markdown FROM uploads WHERE user_id = ?1 AND name = ?2",
                [user_id, name],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// The names of `user_id`'s documents, sorted bytewise.
    pub fn upload_names(&self, user_id: &str) -> Result<Vec<String>, StoreError> {
        Ok(self
            .connection()?
            .query_map(
                "SELECT name FROM uploads WHERE user_id = ?1 ORDER BY name",
                [user_id],
                |row| row.get(0),
            )?
            .collect::<Result<_, _>>()?)
    }

    /// Keeps a document found in an existing upload folder under its own
    /// `name`, unless the user has one of that name already (which stays as
    /// it is) or is gone: importing again changes nothing.
    pub fn import_upload(
        &self,
        user_id: &str,
        name: &str,
        markdown: &str,
    ) -> Result<Imported, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        if !user_exists(&transaction, user_id)? {
            return Ok(Imported::UnknownUser);
        }
        let outcome = if insert_new(&transaction, user_id, name, markdown, now)? {
            Imported::Stored
        } else {
            Imported::NameTaken
        };
        transaction.commit()?;
        Ok(outcome)
    }
}
