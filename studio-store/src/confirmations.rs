//! Confirmation tokens for model-invoked writes.
//!
//! A model-invoked mutation (a table tool's create/update/delete or a mutating
//! action) runs only once a person has confirmed it. The gateway asks core to
//! *issue* a token for the exact call: the user, the tool, the canonical
//! arguments and the idempotency key the write will use are fixed at that
//! moment. When the call comes back with the token, the gateway asks core to
//! *redeem* it, and core answers the idempotency key fixed at issue; the
//! gateway then runs the write under that key.
//!
//! Redemption is deliberately repeatable until the token expires: a second
//! redemption of the same token for the same call answers the same
//! idempotency key again. The write is idempotent under that key (data-worker
//! keeps its receipt), so a retried or replayed redemption replays the
//! original write's outcome instead of making a second write. A token is
//! therefore good for exactly one write, however often it is presented.
//! `redeemed_at` records the first redemption, for operators.
//!
//! A token is valid only for the user it was issued to, the same tool and
//! byte-for-byte the same `arguments_json` (callers send the canonical form:
//! object keys sorted, no insignificant whitespace). Any other answer, and an
//! unknown or expired token, is the one [`ConfirmationRefusal::NotValid`], so
//! the refusal tells nobody which of the bindings failed.
//!
//! What it must not do: store, log or return a token except as the value of
//! the call that issued it (only its sha256 is stored, and lookup is by that
//! hash, so no secret comparison happens in process), or grow without bound:
//! issuing deletes every expired row, and a user holds at most
//! [`MAX_LIVE_CONFIRMATIONS_PER_USER`] unexpired ones.

use std::fmt;

use crate::db::{OptionalExtension as _, Sql};
use sha2::{Digest as _, Sha256};

use super::{MAX_SECRET_LEN, Store, StoreError, secrets};

/// A confirmation token is redeemable for this long after it is issued.
pub const CONFIRMATION_TTL_SECONDS: i64 = 10 * 60;
/// A user may hold at most this many unexpired confirmations, redeemed or
/// not; the next issue is refused until some expire.
pub const MAX_LIVE_CONFIRMATIONS_PER_USER: i64 = 100;
/// A tool name has 1 to this many characters.
pub const MAX_CONFIRMATION_TOOL_CHARS: usize = 200;
/// The arguments' canonical JSON has at most this many bytes (1 MiB).
pub const MAX_CONFIRMATION_ARGUMENTS_BYTES: usize = 1024 * 1024;
/// An idempotency key has 1 to this many characters (the data grammar's
/// bound: the key a confirmed write will use).
pub use sasha_contract::grammar::MAX_IDEMPOTENCY_KEY_CHARS;
/// The prefix of every confirmation token. It differs from every
/// [`super::TokenKind`] prefix (`sasha_ct_` is the chat-session token's), so a
/// confirmation token is never taken for a bearer credential, and a leaked one
/// is recognisable on sight.
pub const CONFIRMATION_TOKEN_PREFIX: &str = "sasha_cf_";

/// The model-invoked write a confirmation is about.
#[derive(Debug, Clone, Copy)]
pub struct ConfirmedCall<'a> {
    /// The user the write acts for.
    pub user_id: &'a str,
    /// The MCP tool name.
    pub tool: &'a str,
    /// The canonical JSON object of the call's arguments, without any
    /// confirmation token; bound by its sha256, so compared byte for byte.
    pub arguments_json: &'a str,
}

/// A newly issued confirmation. The token exists only here: it is not
/// stored, and `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct IssuedConfirmation {
    /// `sasha_cf_` and 43 base64url characters (256 random bits).
    pub token: String,
    /// The idempotency key the confirmed write will use.
    pub idempotency_key: String,
    /// Unix seconds from which the token is refused.
    pub expires_at: i64,
}

impl fmt::Debug for IssuedConfirmation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedConfirmation")
            .field("token", &"<redacted>")
            .field("idempotency_key", &self.idempotency_key)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// What redeeming a valid token answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedeemedConfirmation {
    /// The idempotency key fixed at issue; the same on every redemption.
    pub idempotency_key: String,
    /// Unix seconds from which the token is refused.
    pub expires_at: i64,
    /// Whether this was the token's first redemption (a later one replays).
    pub first_redemption: bool,
}

/// Why a confirmation was not issued or not redeemed. Messages are safe to
/// show to the caller (and the model).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfirmationRefusal {
    /// A field of the call is out of bounds.
    #[error("{field} {reason}")]
    InvalidInput {
        /// The wire name of the refused field.
        field: &'static str,
        reason: String,
    },
    /// Unknown, expired, or issued for another user, tool or arguments: one
    /// answer for all of them.
    #[error("the confirmation token is not valid for this call; ask the person again")]
    NotValid,
    /// The user already holds [`MAX_LIVE_CONFIRMATIONS_PER_USER`] unexpired
    /// confirmations.
    #[error(
        "too many pending confirmations (at most {limit}); they expire {ttl_minutes} minutes after they are issued"
    )]
    TooManyPending { limit: i64, ttl_minutes: i64 },
    /// The principal's user no longer exists.
    #[error("no such user")]
    UnknownUser,
}

/// A refusal inside a successful store call; the outer error is a fault.
pub type ConfirmationResult<T> = Result<Result<T, ConfirmationRefusal>, StoreError>;

/// The stored form of the arguments: lowercase hex sha256 of their bytes.
fn arguments_sha256(arguments_json: &str) -> String {
    hex::encode(Sha256::digest(arguments_json.as_bytes()))
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ConfirmationRefusal {
    ConfirmationRefusal::InvalidInput {
        field,
        reason: reason.into(),
    }
}

/// Checks the tool name and the arguments, which both issue and redeem bind.
fn check_call(call: &ConfirmedCall<'_>) -> Result<(), ConfirmationRefusal> {
    if !(1..=MAX_CONFIRMATION_TOOL_CHARS).contains(&call.tool.chars().count()) {
        return Err(invalid(
            "tool",
            format!("must have 1 to {MAX_CONFIRMATION_TOOL_CHARS} characters"),
        ));
    }
    if call.arguments_json.len() > MAX_CONFIRMATION_ARGUMENTS_BYTES {
        return Err(invalid(
            "arguments_json",
            format!("must have at most {MAX_CONFIRMATION_ARGUMENTS_BYTES} bytes"),
        ));
    }
    if serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(call.arguments_json)
        .is_err()
    {
        return Err(invalid("arguments_json", "must be a JSON object"));
    }
    Ok(())
}

fn check_idempotency_key(key: &str) -> Result<(), ConfirmationRefusal> {
    if !(1..=MAX_IDEMPOTENCY_KEY_CHARS).contains(&key.chars().count()) {
        return Err(invalid(
            "idempotency_key",
            format!("must have 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters"),
        ));
    }
    Ok(())
}

impl Store {
    /// Issues a confirmation token for `call`, fixing `idempotency_key` as
    /// the key the confirmed write will use; it lasts
    /// [`CONFIRMATION_TTL_SECONDS`]. Deletes every expired confirmation first,
    /// then refuses the call if the user already holds
    /// [`MAX_LIVE_CONFIRMATIONS_PER_USER`] unexpired ones.
    pub fn issue_confirmation(
        &self,
        call: &ConfirmedCall<'_>,
        idempotency_key: &str,
    ) -> ConfirmationResult<IssuedConfirmation> {
        if let Err(refusal) = check_call(call).and_then(|()| check_idempotency_key(idempotency_key))
        {
            return Ok(Err(refusal));
        }
        let now = self.now();
        let token = format!("{CONFIRMATION_TOKEN_PREFIX}{}", secrets::random_secret());
        let expires_at = now.saturating_add(CONFIRMATION_TTL_SECONDS);
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let user_known = transaction
            .query_row("SELECT 1 FROM users WHERE id = ?1", [call.user_id], |_| {
                Ok(())
            })
            .optional()?
            .is_some();
        if !user_known {
            return Ok(Err(ConfirmationRefusal::UnknownUser));
        }
        // Housekeeping: an expired confirmation can never be redeemed again.
        transaction.execute("DELETE FROM confirmations WHERE expires_at <= ?1", [now])?;
        let live: i64 = transaction.query_row(
            "SELECT count(*) FROM confirmations WHERE user_id = ?1",
            [call.user_id],
            |row| row.get(0),
        )?;
        if live >= MAX_LIVE_CONFIRMATIONS_PER_USER {
            // Keep the housekeeping; refuse the new row.
            transaction.commit()?;
            return Ok(Err(ConfirmationRefusal::TooManyPending {
                limit: MAX_LIVE_CONFIRMATIONS_PER_USER,
                ttl_minutes: CONFIRMATION_TTL_SECONDS / 60,
            }));
        }
        transaction.execute(
            "INSERT INTO confirmations
             (token_sha256, user_id, tool, arguments_sha256, idempotency_key, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            (
                secrets::secret_sha256(&token),
                call.user_id,
                call.tool,
                arguments_sha256(call.arguments_json),
                idempotency_key,
                now,
                expires_at,
            ),
        )?;
        transaction.commit()?;
        Ok(Ok(IssuedConfirmation {
            token,
            idempotency_key: idempotency_key.to_owned(),
            expires_at,
        }))
    }

    /// Redeems `token` for `call`: it must have been issued to the same user
    /// for the same tool and byte-identical arguments, and not have expired.
    /// Answers the idempotency key fixed at issue, on the first redemption
    /// and on every later one (see the module documentation for why).
    /// Voids `token` for `call`: the person declined, and a decline is final
    /// (its row expires now, so it never redeems, however it is presented
    /// later). The same bindings as [`Store::redeem_confirmation`] apply.
    pub fn decline_confirmation(
        &self,
        call: &ConfirmedCall<'_>,
        token: &str,
    ) -> ConfirmationResult<()> {
        if let Err(refusal) = check_call(call) {
            return Ok(Err(refusal));
        }
        if token.len() > MAX_SECRET_LEN || !token.starts_with(CONFIRMATION_TOKEN_PREFIX) {
            return Ok(Err(ConfirmationRefusal::NotValid));
        }
        let now = self.now();
        let connection = self.connection()?;
        let voided = connection.execute(
            "UPDATE confirmations SET expires_at = ?5
             WHERE token_sha256 = ?1 AND user_id = ?2 AND tool = ?3
               AND arguments_sha256 = ?4 AND expires_at > ?5",
            (
                secrets::secret_sha256(token),
                call.user_id,
                call.tool,
                arguments_sha256(call.arguments_json),
                now,
            ),
        )?;
        Ok(if voided == 1 {
            Ok(())
        } else {
            Err(ConfirmationRefusal::NotValid)
        })
    }

    pub fn redeem_confirmation(
        &self,
        call: &ConfirmedCall<'_>,
        token: &str,
    ) -> ConfirmationResult<RedeemedConfirmation> {
        if let Err(refusal) = check_call(call) {
            return Ok(Err(refusal));
        }
        if token.len() > MAX_SECRET_LEN || !token.starts_with(CONFIRMATION_TOKEN_PREFIX) {
            return Ok(Err(ConfirmationRefusal::NotValid));
        }
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let token_sha256 = secrets::secret_sha256(token);
        let found: Option<(String, i64, Option<i64>)> = transaction
            .query_row(
                "SELECT idempotency_key, expires_at, redeemed_at FROM confirmations
                 WHERE token_sha256 = ?1 AND user_id = ?2 AND tool = ?3
                   AND arguments_sha256 = ?4 AND expires_at > ?5",
                (
                    &token_sha256,
                    call.user_id,
                    call.tool,
                    arguments_sha256(call.arguments_json),
                    now,
                ),
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()?;
        let Some((idempotency_key, expires_at, redeemed_at)) = found else {
            return Ok(Err(ConfirmationRefusal::NotValid));
        };
        let first_redemption = redeemed_at.is_none();
        if first_redemption {
            transaction.execute(
                "UPDATE confirmations SET redeemed_at = ?2
                 WHERE token_sha256 = ?1 AND redeemed_at IS NULL",
                (&token_sha256, now),
            )?;
        }
        transaction.commit()?;
        Ok(Ok(RedeemedConfirmation {
            idempotency_key,
            expires_at,
            first_redemption,
        }))
    }
}
