//! Signing in through the organisation's OpenID provider, as the core
//! database keeps it: the sign-in attempts a browser started
//! (`sso_attempts`: the state's and the browser cookie's hashes, the nonce,
//! the PKCE verifier, where to go back to), and whom each provider subject
//! is (`sso_identities`: issuer and subject → user). Any studio-core replica
//! over this database finishes an attempt another one started.
//!
//! What it must never do: hand out an attempt twice, past its expiry or to
//! another browser; store the state or the browser's secret itself; bind a
//! provider subject to a person who signs in with a password (whoever
//! controls a name at the provider would take over the local account); make
//! a person the provider gives no mapped group; or sign in a disabled one.

use crate::db::{OptionalExtension as _, Sql as _, Tx};

use super::people::{change_role, end_every_credential, people_action};
use super::{
    AFTER_USER, Store, StoreError, USER_COLUMNS, USERNAME_MATCHES, User, UserRole, UserSource,
    audit, secrets, user_from_row,
};

/// How long a started sign-in may be finished (the provider's page in
/// between): ten minutes.
pub const SSO_ATTEMPT_TTL_SECONDS: i64 = 600;
/// Finished and expired attempts are kept this long, so that a replayed
/// callback is told apart from a made-up one, then deleted.
const SSO_ATTEMPT_KEPT_SECONDS: i64 = 3600;
/// Unfinished attempts waiting at once; past it a new one is refused
/// (retryable) rather than letting anonymous requests fill the table.
pub const MAX_SSO_ATTEMPTS: i64 = 10_000;
/// The audit actor of changes the identity provider's answer makes (a role
/// following the person's groups, their credentials ended).
pub const ACTOR_IDENTITY_PROVIDER: &str = "identity-provider";

/// What a started sign-in remembers until the provider sends the browser
/// back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SsoAttempt {
    /// The ID token's expected `nonce`.
    pub nonce: String,
    /// The PKCE code verifier, sent with the code.
    pub pkce_verifier: String,
    /// The same-origin path the browser goes to once signed in.
    pub return_to: String,
}

/// The answer to a callback's `state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakenAttempt {
    /// The attempt, now used.
    Taken(SsoAttempt),
    /// No attempt has this state (made up, or long gone).
    Unknown,
    /// Started more than [`SSO_ATTEMPT_TTL_SECONDS`] ago.
    Expired,
    /// Already finished once: a replayed callback.
    Used,
    /// Started in another browser, or this one has no attempt cookie: left
    /// waiting for its own browser.
    OtherBrowser,
}

/// The person the provider vouched for, as a sign-in is decided.
#[derive(Debug, Clone, Copy)]
pub struct SsoPerson<'a> {
    pub issuer: &'a str,
    pub subject: &'a str,
    /// The Sasha user name taken from the configured claim.
    pub username: &'a str,
    /// The role the person's groups map to; `None` when none does.
    pub role: Option<UserRole>,
}

/// How a sign-in through the provider was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SsoSignIn {
    /// The person (made now when `created`), with the role their groups map
    /// to; `changed_from` is their role before when it changed.
    SignedIn {
        user: User,
        created: bool,
        changed_from: Option<UserRole>,
    },
    /// No group of theirs maps to a role: nobody was made; a person who had
    /// an account (`existing`) had every session, token and MCP connection
    /// ended, audited, and keeps the account and its grants.
    NoRole { existing: bool },
    /// The person is disabled here.
    Disabled,
    /// The name belongs to a person who signs in with a password.
    PasswordAccount,
    /// The name belongs to a person bound to another provider subject.
    NameBound,
    /// Their groups would take away the last admin who can act: nothing
    /// changed.
    LastAdmin,
}

/// A user row with what deciding a sign-in needs.
struct Found {
    user: User,
    disabled: bool,
}

fn found_columns() -> String {
    format!("{USER_COLUMNS}, u.disabled_at IS NOT NULL")
}

fn found_from_row(row: &crate::db::Row<'_>) -> Result<(User, bool), crate::db::DbError> {
    Ok((user_from_row(row)?, row.get(AFTER_USER)?))
}

impl Store {
    /// Records a sign-in started in the browser whose attempt cookie is
    /// `browser`, under `state`; `false` when [`MAX_SSO_ATTEMPTS`] wait
    /// already (attempts past [`SSO_ATTEMPT_KEPT_SECONDS`] are deleted
    /// first).
    pub fn begin_sso_attempt(
        &self,
        state: &str,
        browser: &str,
        attempt: &SsoAttempt,
    ) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        transaction.execute(
            "DELETE FROM sso_attempts WHERE created_at <= ?1",
            [now.saturating_sub(SSO_ATTEMPT_KEPT_SECONDS)],
        )?;
        let waiting: i64 = transaction.query_row(
            "SELECT count(*) FROM sso_attempts WHERE used_at IS NULL AND created_at > ?1",
            [now.saturating_sub(SSO_ATTEMPT_TTL_SECONDS)],
            |row| row.get(0),
        )?;
        if waiting >= MAX_SSO_ATTEMPTS {
            return Ok(false);
        }
        transaction.execute(
            "INSERT INTO sso_attempts
                 (state_sha256, browser_sha256, nonce, pkce_verifier, return_to, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            (
                secrets::secret_sha256(state),
                secrets::secret_sha256(browser),
                &attempt.nonce,
                &attempt.pkce_verifier,
                &attempt.return_to,
                now,
            ),
        )?;
        transaction.commit()?;
        Ok(true)
    }

    /// Takes the attempt of `state` for the browser whose attempt cookie is
    /// `browser`: whoever takes it first has it, and it is used for
    /// everyone after. An attempt of another browser stays waiting.
    pub fn take_sso_attempt(
        &self,
        state: &str,
        browser: Option<&str>,
    ) -> Result<TakenAttempt, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let found: Option<(String, String, String, String, i64, Option<i64>)> = transaction
            .query_row(
                "SELECT browser_sha256, nonce, pkce_verifier, return_to, created_at, used_at
                 FROM sso_attempts WHERE state_sha256 = ?1",
                [secrets::secret_sha256(state)],
                |row| {
                    Ok((
                        row.get(0)?,
                        row.get(1)?,
                        row.get(2)?,
                        row.get(3)?,
                        row.get(4)?,
                        row.get(5)?,
                    ))
                },
            )
            .optional()?;
        let Some((browser_sha256, nonce, pkce_verifier, return_to, created_at, used_at)) = found
        else {
            return Ok(TakenAttempt::Unknown);
        };
        if used_at.is_some() {
            return Ok(TakenAttempt::Used);
        }
        if created_at <= now.saturating_sub(SSO_ATTEMPT_TTL_SECONDS) {
            return Ok(TakenAttempt::Expired);
        }
        if browser.map(secrets::secret_sha256).as_deref() != Some(browser_sha256.as_str()) {
            return Ok(TakenAttempt::OtherBrowser);
        }
        let taken = transaction.execute(
            "UPDATE sso_attempts SET used_at = ?2 WHERE state_sha256 = ?1 AND used_at IS NULL",
            (secrets::secret_sha256(state), now),
        )?;
        transaction.commit()?;
        Ok(if taken == 1 {
            TakenAttempt::Taken(SsoAttempt {
                nonce,
                pkce_verifier,
                return_to,
            })
        } else {
            TakenAttempt::Used
        })
    }

    /// Decides a sign-in of `person`, whom the provider vouched for: the
    /// person bound to the issuer and subject; failing that, the `oidc` or
    /// `scim` person of that user name not yet bound to a subject (bound
    /// now); failing that, a new `oidc` person with the mapped role. A
    /// known person's role follows their groups, audited.
    pub fn sso_sign_in(&self, person: &SsoPerson<'_>) -> Result<SsoSignIn, StoreError> {
        // A first sign-in makes the person outside the deciding transaction
        // (through `create_user_from`, with its rules), then decides again,
        // finding them by name; two replicas making the same person at once
        // meet on the name, and the loser finds the winner's.
        let mut created = false;
        for _ in 0..3 {
            let decided = match self.decide_sso_sign_in(person) {
                Err(StoreError::LastAdmin) => return Ok(SsoSignIn::LastAdmin),
                other => other?,
            };
            match decided {
                Decided::Done(SsoSignIn::SignedIn {
                    user, changed_from, ..
                }) => {
                    return Ok(SsoSignIn::SignedIn {
                        user,
                        created,
                        changed_from: changed_from.filter(|_| !created),
                    });
                }
                Decided::Done(outcome) => return Ok(outcome),
                Decided::Create(role) => match self.create_user_from(
                    UserSource::Oidc,
                    person.username,
                    role,
                    ACTOR_IDENTITY_PROVIDER,
                ) {
                    Ok(_) => created = true,
                    Err(StoreError::UsernameTaken) => {}
                    Err(error) => return Err(error),
                },
            }
        }
        Err(StoreError::Busy)
    }

    fn decide_sso_sign_in(&self, person: &SsoPerson<'_>) -> Result<Decided, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let bound = transaction
            .query_row(
                &format!(
                    "SELECT {} FROM sso_identities i JOIN users u ON u.id = i.user_id
                     WHERE i.issuer = ?1 AND i.subject = ?2",
                    found_columns()
                ),
                (person.issuer, person.subject),
                found_from_row,
            )
            .optional()?
            .map(|(user, disabled)| Found { user, disabled });
        let found = match bound {
            Some(found) => found,
            None => {
                let named = transaction
                    .query_row(
                        &format!(
                            "SELECT {},
                                 EXISTS (SELECT 1 FROM sso_identities i WHERE i.user_id = u.id)
                             FROM users u WHERE u.username = ?1 {USERNAME_MATCHES}",
                            found_columns()
                        ),
                        [person.username],
                        |row| Ok((found_from_row(row)?, row.get::<_, bool>(AFTER_USER + 1)?)),
                    )
                    .optional()?;
                let Some(((user, disabled), has_subject)) = named else {
                    return Ok(match person.role {
                        Some(role) => Decided::Create(role),
                        None => Decided::Done(SsoSignIn::NoRole { existing: false }),
                    });
                };
                if user.source == UserSource::Password {
                    return Ok(Decided::Done(SsoSignIn::PasswordAccount));
                }
                if has_subject {
                    return Ok(Decided::Done(SsoSignIn::NameBound));
                }
                if disabled {
                    return Ok(Decided::Done(SsoSignIn::Disabled));
                }
                transaction.execute(
                    "INSERT INTO sso_identities (issuer, subject, user_id, created_at)
                     VALUES (?1, ?2, ?3, ?4)",
                    (person.issuer, person.subject, &user.id, now),
                )?;
                audit(
                    &transaction,
                    now,
                    ACTOR_IDENTITY_PROVIDER,
                    people_action::SSO_BOUND,
                    None,
                    Some(&user.id),
                    None,
                    Some(person.issuer),
                )?;
                Found { user, disabled }
            }
        };
        if found.disabled {
            return Ok(Decided::Done(SsoSignIn::Disabled));
        }
        let outcome = follow_groups(&transaction, now, found.user, person.role)?;
        transaction.commit()?;
        Ok(Decided::Done(outcome))
    }
}

/// A sign-in decided, or a person to make first.
enum Decided {
    Done(SsoSignIn),
    Create(UserRole),
}

/// Gives a known, enabled `user` the role their groups map to (audited when
/// it changes), or, when none does, ends their credentials (audited). A
/// person the directory provisioned keeps the role and status SCIM settled
/// (the directory owns them, decision 0046): the ID token's groups, which
/// some providers do not send at all, neither raise nor end them.
fn follow_groups(
    transaction: &Tx<'_>,
    now: i64,
    mut user: User,
    role: Option<UserRole>,
) -> Result<SsoSignIn, StoreError> {
    if user.source == UserSource::Scim {
        return Ok(SsoSignIn::SignedIn {
            user,
            created: false,
            changed_from: None,
        });
    }
    let Some(role) = role else {
        end_every_credential(transaction, now, &user.id, "no group maps to a role")?;
        audit(
            transaction,
            now,
            ACTOR_IDENTITY_PROVIDER,
            people_action::SSO_NO_ROLE,
            None,
            Some(&user.id),
            Some(user.role.as_str()),
            None,
        )?;
        return Ok(SsoSignIn::NoRole { existing: true });
    };
    let before = user.role;
    if before == role {
        return Ok(SsoSignIn::SignedIn {
            user,
            created: false,
            changed_from: None,
        });
    }
    change_role(transaction, now, &user, role, ACTOR_IDENTITY_PROVIDER)?;
    user.role = role;
    Ok(SsoSignIn::SignedIn {
        user,
        created: false,
        changed_from: Some(before),
    })
}
