//! Users, their passwords and browser sessions: creating a user, setting a
//! password (which signs them out everywhere), looking users up, checking a
//! sign-in, and starting, reading and ending a session.
//!
//! What it must never do: store a password other than as its argon2id hash,
//! or a session other than as the sha256 of its secret; let a disabled or
//! invited user sign in; or answer an unknown user name faster than a wrong
//! password, which would tell which names exist.

use crate::db::{OptionalExtension as _, Sql};

use super::people::people_action;
use super::{
    ACTOR_SYSTEM, AFTER_USER, AppAccess, MAX_SECRET_LEN, Principal, PrincipalKind,
    SESSION_TTL_SECONDS, Store, StoreError, USER_COLUMNS, USERNAME_MATCHES, User, UserRole,
    UserSource, audit, insert_user, secrets, set_grant, user_from_row, validate_password,
    validate_username,
};

/// What a caller does inside the transaction that made a user.
pub(super) type AfterInsert<'a> =
    &'a dyn Fn(&crate::db::Tx<'_>, &User, i64) -> Result<(), StoreError>;

impl Store {
    // --- users -----------------------------------------------------------

    /// Creates a user who signs in with `password`. The password is hashed
    /// before the database is locked.
    pub fn create_user(
        &self,
        username: &str,
        role: UserRole,
        password: &str,
    ) -> Result<User, StoreError> {
        validate_username(username)?;
        validate_password(password)?;
        let hash = secrets::hash_password(password).map_err(StoreError::Database)?;
        self.add_user(username, role, UserSource::Password, &hash, None, None)
    }

    /// Creates a user from the organisation's identity provider (`source`
    /// `Oidc` or `Scim`), audited as `user.provisioned` by `actor`. They
    /// have no password: password sign-in never admits them, and no link or
    /// operator can give them one ([`StoreError::SignsInElsewhere`]).
    pub fn create_user_from(
        &self,
        source: UserSource,
        username: &str,
        role: UserRole,
        actor: &str,
    ) -> Result<User, StoreError> {
        validate_username(username)?;
        if source == UserSource::Password {
            return Err(StoreError::SignsInElsewhere);
        }
        self.add_user(username, role, source, "", Some(actor), None)
    }

    /// [`Store::create_user_from`], then `then` in the same transaction
    /// (with the new user and now): SCIM records what the directory says of
    /// them and settles their role and status, or nothing is made.
    pub(super) fn create_user_from_then(
        &self,
        source: UserSource,
        username: &str,
        role: UserRole,
        actor: &str,
        then: AfterInsert<'_>,
    ) -> Result<User, StoreError> {
        validate_username(username)?;
        if source == UserSource::Password {
            return Err(StoreError::SignsInElsewhere);
        }
        self.add_user(username, role, source, "", Some(actor), Some(then))
    }

    /// Every new user goes through here. An admin or staff user receives
    /// `manage` on every app no one manages (audited as `system`): apps
    /// discovered before any admin or staff existed, as an installation's
    /// bundled apps are when its first administrator is made after it
    /// started, would otherwise have no manager at all.
    fn add_user(
        &self,
        username: &str,
        role: UserRole,
        source: UserSource,
        hash: &str,
        provisioned_by: Option<&str>,
        then: Option<AfterInsert<'_>>,
    ) -> Result<User, StoreError> {
        let user = User {
            id: uuid::Uuid::now_v7().to_string(),
            username: username.to_owned(),
            role,
            created_at: self.now(),
            source,
        };
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        insert_user(&transaction, &user, hash)?;
        if let Some(actor) = provisioned_by {
            audit(
                &transaction,
                user.created_at,
                actor,
                people_action::USER_PROVISIONED,
                None,
                Some(&user.id),
                Some(source.as_str()),
                Some(role.as_str()),
            )?;
        }
        if matches!(role, UserRole::Admin | UserRole::Staff) {
            let unmanaged: Vec<String> = transaction
                .prepare(
                    "SELECT app_id FROM app_registry r WHERE NOT EXISTS
                       (SELECT 1 FROM grants g WHERE g.app_id = r.app_id AND g.access = ?1)
                     ORDER BY app_id",
                )?
                .query_map([AppAccess::Manage], |row| row.get(0))?
                .collect::<Result<_, _>>()?;
            for app_id in &unmanaged {
                set_grant(
                    &transaction,
                    user.created_at,
                    ACTOR_SYSTEM,
                    app_id,
                    &user.id,
                    AppAccess::Manage,
                )?;
            }
        }
        if let Some(then) = then {
            then(&transaction, &user, user.created_at)?;
        }
        transaction.commit()?;
        Ok(user)
    }

    /// Replaces a user's password and signs them out of every browser
    /// session; `SignsInElsewhere` for a person from the organisation's
    /// provider. Tokens stay valid (they have their own expiry and revocation).
    pub fn set_password(&self, username: &str, password: &str) -> Result<(), StoreError> {
        validate_password(password)?;
        let hash = secrets::hash_password(password).map_err(StoreError::Database)?;
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let found: Option<(String, String)> = transaction
            .query_row(
                &format!("SELECT id, source FROM users WHERE username = ?1 {USERNAME_MATCHES}"),
                [username],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let (user_id, source) = found.ok_or(StoreError::UnknownUser)?;
        // A second way in beside the provider would outlive the directory's
        // removal of the person.
        if source != UserSource::Password.as_str() {
            return Err(StoreError::SignsInElsewhere);
        }
        transaction.execute(
            "UPDATE users SET password_hash = ?1 WHERE id = ?2",
            (&hash, &user_id),
        )?;
        transaction.execute("DELETE FROM sessions WHERE user_id = ?1", [&user_id])?;
        // A password set by the operator answers an open invitation too,
        // giving the apps it holds.
        transaction.execute("DELETE FROM invitations WHERE user_id = ?1", [&user_id])?;
        super::people::grant_invitation_apps(&transaction, self.now(), &user_id)?;
        transaction.commit()?;
        Ok(())
    }

    /// The user called `username`, whatever its case.
    pub fn user_by_name(&self, username: &str) -> Result<Option<User>, StoreError> {
        let connection = self.connection()?;
        let user = connection
            .query_row(
                &format!(
                    "SELECT {USER_COLUMNS} FROM users u WHERE u.username = ?1 {USERNAME_MATCHES}"
                ),
                [username],
                user_from_row,
            )
            .optional()?;
        Ok(user)
    }

    /// The user with id `id`.
    pub fn user(&self, id: &str) -> Result<Option<User>, StoreError> {
        let connection = self.connection()?;
        let user = connection
            .query_row(
                &format!("SELECT {USER_COLUMNS} FROM users u WHERE u.id = ?1"),
                [id],
                user_from_row,
            )
            .optional()?;
        Ok(user)
    }

    /// Every user, by username.
    pub fn users(&self) -> Result<Vec<User>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare(&format!(
            "SELECT {USER_COLUMNS} FROM users u ORDER BY u.username"
        ))?;
        let users = statement
            .query_map((), user_from_row)?
            .collect::<Result<_, _>>()?;
        Ok(users)
    }

    /// The user whose password this is, or `None`. An unknown username costs
    /// one argon2 verification like a wrong password does, so the answer's
    /// timing does not tell which usernames exist.
    pub fn verify_login(&self, username: &str, password: &str) -> Result<Option<User>, StoreError> {
        let found = {
            let connection = self.connection()?;
            connection
                .query_row(
                    &format!(
                        "SELECT {USER_COLUMNS}, u.password_hash, u.disabled_at IS NOT NULL
                         FROM users u WHERE u.username = ?1 {USERNAME_MATCHES}"
                    ),
                    [username],
                    |row| {
                        Ok((
                            user_from_row(row)?,
                            row.get::<_, String>(AFTER_USER)?,
                            row.get::<_, bool>(AFTER_USER + 1)?,
                        ))
                    },
                )
                .optional()?
        };
        // A disabled user's right password is refused like a wrong one.
        Ok(match found {
            Some((user, hash, disabled))
                if !hash.is_empty() && secrets::verify_password(password, &hash) && !disabled =>
            {
                Some(user)
            }
            // An invited user has no password yet ('' verifies nothing):
            // the same work as a wrong one.
            Some((_, hash, _)) if hash.is_empty() => {
                secrets::verify_dummy(password);
                None
            }
            Some(_) => None,
            None => {
                secrets::verify_dummy(password);
                None
            }
        })
    }

    // --- browser sessions --------------------------------------------------

    /// Starts a browser session for `user_id`, valid for 12 hours. Returns the
    /// secret for the cookie; only its sha256 is stored.
    pub fn create_session(&self, user_id: &str) -> Result<String, StoreError> {
        let now = self.now();
        let secret = secrets::random_secret();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let exists = transaction
            .query_row(
                "SELECT 1 FROM users WHERE id = ?1 AND disabled_at IS NULL",
                [user_id],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if !exists {
            return Err(StoreError::UnknownUser);
        }
        // A session is a sign-in: the Users page shows the last one.
        transaction.execute(
            "UPDATE users SET last_sign_in_at = ?2 WHERE id = ?1",
            (user_id, now),
        )?;
        // Housekeeping: expired sessions can never be used again.
        transaction.execute("DELETE FROM sessions WHERE expires_at <= ?1", [now])?;
        transaction.execute(
            "INSERT INTO sessions (secret_sha256, user_id, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4)",
            (
                secrets::secret_sha256(&secret),
                user_id,
                now,
                now.saturating_add(SESSION_TTL_SECONDS),
            ),
        )?;
        transaction.commit()?;
        Ok(secret)
    }

    /// The principal of a browser session, or `None` when the secret is
    /// unknown or the session has expired. Scopes follow the user's role now.
    pub fn session(&self, secret: &str) -> Result<Option<Principal>, StoreError> {
        if secret.is_empty() || secret.len() > MAX_SECRET_LEN {
            return Ok(None);
        }
        let now = self.now();
        let connection = self.connection()?;
        // Asked on every authenticated request: prepared once per connection.
        let found = connection
            .prepare_cached(&format!(
                "SELECT {USER_COLUMNS}, s.expires_at FROM sessions s
                 JOIN users u ON u.id = s.user_id
                 WHERE s.secret_sha256 = ?1 AND s.expires_at > ?2"
            ))?
            .query_row((secrets::secret_sha256(secret), now), |row| {
                Ok((user_from_row(row)?, row.get::<_, i64>(AFTER_USER)?))
            })
            .optional()?;
        Ok(found.map(|(user, expires_at)| Principal {
            scopes: user.role.session_scopes(),
            user,
            kind: PrincipalKind::Session,
            expires_at,
            audience: None,
            origin: None,
        }))
    }

    /// Ends a browser session (sign-out). Unknown secrets are ignored.
    pub fn delete_session(&self, secret: &str) -> Result<(), StoreError> {
        let connection = self.connection()?;
        connection.execute(
            "DELETE FROM sessions WHERE secret_sha256 = ?1",
            [secrets::secret_sha256(secret)],
        )?;
        Ok(())
    }
}
