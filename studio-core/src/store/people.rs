//! The people of an instance for its admins (migration 12): who exists, with
//! their role, last sign-in and whether they are disabled, and the two
//! changes an admin makes to a person: their role, and disabling (or
//! enabling) them. Who may is the caller's decision (`sasha admin`, Studio's
//! API); this module records, each change audited.
//!
//! What it must never do: leave a disabled person a way in (their sessions
//! and tokens go in the same transaction, and sign-in refuses them), or
//! change anyone silently.

use rusqlite::{OptionalExtension as _, TransactionBehavior};
use serde::Serialize;

use super::{Store, StoreError, USER_COLUMNS, User, UserRole, audit, user_from_row};

/// Audit actions of people.
pub mod people_action {
    /// An admin changed a user's role: `subject` the user, `before`/`after`
    /// the roles.
    pub const USER_ROLE_CHANGED: &str = "user.role-changed";
    /// An admin disabled (`after` = `disabled`) or enabled a user.
    pub const USER_STATUS_CHANGED: &str = "user.status-changed";
    /// An operator revoked a token: `subject` its user, `before` its number.
    pub const TOKEN_REVOKED: &str = "token.revoked";
}

/// One of a person's tokens as listed: never its secret (only its hash is
/// stored), so a token is named by its number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenEntry {
    pub id: i64,
    pub kind: String,
    pub scopes: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub revoked: bool,
    /// Minted for an MCP client's connection (OAuth) rather than by an operator.
    pub oauth: bool,
}

/// One person as the Users list shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Person {
    #[serde(flatten)]
    pub user: User,
    /// Unix seconds of their last sign-in (a browser session began).
    pub last_sign_in_at: Option<i64>,
    pub disabled: bool,
}

impl Store {
    /// Every user, by name.
    pub fn people(&self) -> Result<Vec<Person>, StoreError> {
        let connection = self.connection();
        let mut statement = connection.prepare(&format!(
            "SELECT {USER_COLUMNS}, u.last_sign_in_at, u.disabled_at IS NOT NULL
             FROM users u ORDER BY u.username"
        ))?;
        let people = statement
            .query_map([], |row| {
                Ok(Person {
                    user: user_from_row(row)?,
                    last_sign_in_at: row.get(4)?,
                    disabled: row.get(5)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(people)
    }

    /// Gives `username` the role `role`, audited; `false` when they had it.
    /// Their credentials keep their scopes, narrowed at every use to what the
    /// new role allows (see [`Store::token`]).
    pub fn set_role(
        &self,
        username: &str,
        role: UserRole,
        actor: &str,
    ) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection();
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let user: User = transaction
            .query_row(
                &format!("SELECT {USER_COLUMNS} FROM users u WHERE u.username = ?1"),
                [username],
                user_from_row,
            )
            .optional()?
            .ok_or(StoreError::UnknownUser)?;
        if user.role == role {
            return Ok(false);
        }
        transaction.execute("UPDATE users SET role = ?2 WHERE id = ?1", (&user.id, role))?;
        audit(
            &transaction,
            now,
            actor,
            people_action::USER_ROLE_CHANGED,
            None,
            Some(&user.id),
            Some(user.role.as_str()),
            Some(role.as_str()),
        )?;
        transaction.commit()?;
        Ok(true)
    }

    /// Disables (`true`) or enables `username`, audited; `false` when they
    /// already were so. Disabling ends their sessions, revokes their tokens
    /// and ends their MCP connections at once; grants stay, so enabling gives back what they had.
    pub fn set_disabled(
        &self,
        username: &str,
        disabled: bool,
        actor: &str,
    ) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection();
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found: Option<(String, bool)> = transaction
            .query_row(
                "SELECT id, disabled_at IS NOT NULL FROM users WHERE username = ?1",
                [username],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let (user_id, was) = found.ok_or(StoreError::UnknownUser)?;
        if was == disabled {
            return Ok(false);
        }
        transaction.execute(
            "UPDATE users SET disabled_at = ?2 WHERE id = ?1",
            (&user_id, disabled.then_some(now)),
        )?;
        if disabled {
            transaction.execute("DELETE FROM sessions WHERE user_id = ?1", [&user_id])?;
            transaction.execute(
                "UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?2) WHERE user_id = ?1",
                (&user_id, now),
            )?;
            // Their MCP connections end too, so no refresh mints a new token.
            transaction.execute(
                "UPDATE oauth_grants SET revoked_at = COALESCE(revoked_at, ?2),
                    revoked_reason = COALESCE(revoked_reason, 'user disabled')
                 WHERE user_id = ?1",
                (&user_id, now),
            )?;
        }
        let state = |off: bool| if off { "disabled" } else { "active" };
        audit(
            &transaction,
            now,
            actor,
            people_action::USER_STATUS_CHANGED,
            None,
            Some(&user_id),
            Some(state(was)),
            Some(state(disabled)),
        )?;
        transaction.commit()?;
        Ok(true)
    }

    /// Every token of `username` (newest first), revoked ones included.
    pub fn tokens_of(&self, username: &str) -> Result<Vec<TokenEntry>, StoreError> {
        let connection = self.connection();
        let user: Option<String> = connection
            .query_row(
                "SELECT id FROM users WHERE username = ?1",
                [username],
                |row| row.get(0),
            )
            .optional()?;
        let user = user.ok_or(StoreError::UnknownUser)?;
        let mut statement = connection.prepare(
            "SELECT id, kind, scopes, created_at, expires_at, revoked_at IS NOT NULL, grant_id IS NOT NULL
             FROM tokens WHERE user_id = ?1 ORDER BY id DESC",
        )?;
        let tokens = statement
            .query_map([user], |row| {
                Ok(TokenEntry {
                    id: row.get(0)?,
                    kind: row.get(1)?,
                    scopes: row.get(2)?,
                    created_at: row.get(3)?,
                    expires_at: row.get(4)?,
                    revoked: row.get(5)?,
                    oauth: row.get(6)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(tokens)
    }

    /// Revokes token number `id` of `username`, audited as `token.revoked`;
    /// `false` when it already was revoked. Another person's token is
    /// `UnknownToken`, as is a number that does not exist.
    pub fn revoke_token_of(
        &self,
        username: &str,
        id: i64,
        actor: &str,
    ) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection();
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found: Option<(String, bool)> = transaction
            .query_row(
                "SELECT t.user_id, t.revoked_at IS NOT NULL FROM tokens t JOIN users u ON u.id = t.user_id
                 WHERE t.id = ?1 AND u.username = ?2",
                (id, username),
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let (user_id, revoked) = found.ok_or(StoreError::UnknownToken)?;
        if revoked {
            return Ok(false);
        }
        transaction.execute("UPDATE tokens SET revoked_at = ?2 WHERE id = ?1", (id, now))?;
        audit(
            &transaction,
            now,
            actor,
            people_action::TOKEN_REVOKED,
            None,
            Some(&user_id),
            Some(&id.to_string()),
            None,
        )?;
        transaction.commit()?;
        Ok(true)
    }
}
