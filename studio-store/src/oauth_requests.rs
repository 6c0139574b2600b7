//! OAuth authorization requests parked while the person decides: a validated
//! `/oauth/authorize` request waits here for the consent page's Allow or
//! Deny, which any studio-core replica over this database may serve. The
//! request id is the page's capability, so only its sha256 is stored.
//!
//! What it must never do: hand out a request past its expiry, hand one out
//! to be decided twice (taking deletes it in the same statement that reads
//! it), park without bound, or store the id itself.

use std::collections::BTreeSet;

use crate::db::{DbError, OptionalExtension as _, Row, Sql};

use super::{Scope, Store, StoreError, scopes_from_text, scopes_to_text, secrets};

/// A validated authorization request waiting for the person's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedRequest {
    pub client_id: String,
    pub client_name: String,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub code_challenge: String,
    pub requested: BTreeSet<Scope>,
    /// Unix seconds after which nobody may decide it (set when parked).
    pub expires_at: i64,
}

const COLUMNS: &str =
    "client_id, client_name, redirect_uri, state, code_challenge, scopes, expires_at";

fn from_row(row: &Row<'_>) -> Result<(ParkedRequest, String), DbError> {
    Ok((
        ParkedRequest {
            client_id: row.get(0)?,
            client_name: row.get(1)?,
            redirect_uri: row.get(2)?,
            state: row.get(3)?,
            code_challenge: row.get(4)?,
            requested: BTreeSet::new(),
            expires_at: row.get(6)?,
        },
        row.get(5)?,
    ))
}

fn with_scopes(
    (mut request, scopes): (ParkedRequest, String),
) -> Result<ParkedRequest, StoreError> {
    request.requested = scopes_from_text(&scopes)?;
    Ok(request)
}

impl Store {
    /// Parks `request` for `ttl_seconds` (its `expires_at` is set from the
    /// store's clock) and answers its new random id, or `None` when `max`
    /// unexpired requests already wait (expired ones are deleted first).
    pub fn park_oauth_request(
        &self,
        request: &ParkedRequest,
        ttl_seconds: i64,
        max: usize,
    ) -> Result<Option<String>, StoreError> {
        let now = self.now();
        let expires_at = now.saturating_add(ttl_seconds);
        let id = secrets::random_secret();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        transaction.execute("DELETE FROM oauth_requests WHERE expires_at <= ?1", [now])?;
        let waiting: i64 =
            transaction.query_row("SELECT count(*) FROM oauth_requests", (), |row| row.get(0))?;
        if usize::try_from(waiting).unwrap_or(usize::MAX) >= max {
            return Ok(None);
        }
        transaction.execute(
            "INSERT INTO oauth_requests
                 (id_sha256, client_id, client_name, redirect_uri, state, code_challenge, scopes, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            (
                secrets::secret_sha256(&id),
                &request.client_id,
                &request.client_name,
                &request.redirect_uri,
                &request.state,
                &request.code_challenge,
                scopes_to_text(&request.requested),
                now,
                expires_at,
            ),
        )?;
        transaction.commit()?;
        Ok(Some(id))
    }

    /// The unexpired request `id`, left waiting (the consent page reads it).
    pub fn peek_oauth_request(&self, id: &str) -> Result<Option<ParkedRequest>, StoreError> {
        let now = self.now();
        let found = self
            .connection()?
            .query_row(
                &format!(
                    "SELECT {COLUMNS} FROM oauth_requests WHERE id_sha256 = ?1 AND expires_at > ?2"
                ),
                (secrets::secret_sha256(id), now),
                from_row,
            )
            .optional()?;
        found.map(with_scopes).transpose()
    }

    /// Takes the unexpired request `id` for a decision: whoever takes it
    /// first has it, and it is gone for everyone else.
    pub fn take_oauth_request(&self, id: &str) -> Result<Option<ParkedRequest>, StoreError> {
        let now = self.now();
        let found = self
            .connection()?
            .query_row(
                &format!(
                    "DELETE FROM oauth_requests WHERE id_sha256 = ?1 AND expires_at > ?2
                     RETURNING {COLUMNS}"
                ),
                (secrets::secret_sha256(id), now),
                from_row,
            )
            .optional()?;
        found.map(with_scopes).transpose()
    }
}
