//! The people of an instance for its admins (migrations 12, 13 and 15): who
//! exists, with their role, last sign-in and status; inviting a person with a
//! one-time link (which may give them apps once they accept), making an
//! active person a one-time password reset link, changing their role,
//! disabling (or enabling) and removing them; and each person's own tokens
//! (made, listed with their last use, and revoked). Who may is the caller's decision (`sasha admin`, Studio's API);
//! this module records, each change audited.
//!
//! Every change of people is one IMMEDIATE transaction that reads, inside
//! it, what it decides on: the acting admin's own role (a user demoted a
//! moment ago acts no more) and, for a role change, disabling or removal,
//! how many admins who can sign in remain. So two admins demoting (or
//! disabling, or removing) each other at the same instant leave one admin,
//! never none: the second change sees the first.
//!
//! What it must never do: leave a disabled or removed person a way in (their
//! sessions and tokens go in the same transaction, and sign-in refuses
//! them), leave the instance without an admin who can sign in, let a user
//! who is no longer an admin change people, keep a one-time link usable
//! twice, after it expires or after its admin lost the power to make it,
//! store a secret rather than its hash, or change anyone silently; give through an invitation an app its admin could not
//! grant (checked when inviting, and again when it is accepted: an inviter
//! who is no longer an admin gives nothing); or leave a session, token or
//! MCP connection alive once a reset link set a new password.

use crate::db::{DbError, OptionalExtension as _, Row, Sql, Tx};
use serde::Serialize;

use std::collections::{BTreeMap, BTreeSet};

use super::{
    ACTOR_OPERATOR, AFTER_USER, AppAccess, SIGNED_UP, Scope, Store, StoreError, TokenKind,
    USER_COLUMNS, USERNAME_MATCHES, User, UserRole, UserSource, action, audit, insert_user,
    member_apps, secrets, set_grant, user_from_row, validate_password, validate_username,
};

/// An invitation link works for this long, once.
pub const INVITATION_TTL_SECONDS: i64 = 7 * 24 * 60 * 60;
/// A password reset link works for this long, once: shorter than an
/// invitation, since it opens an account that already holds things.
pub const RESET_TTL_SECONDS: i64 = 24 * 60 * 60;

/// What a one-time link is for (`invitations.purpose`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkPurpose {
    /// An invited person sets their first password (and gains the apps the
    /// invitation gives).
    Invitation,
    /// An active person sets a new password; their sessions, tokens and MCP
    /// connections end.
    Reset,
}

impl LinkPurpose {
    fn as_str(self) -> &'static str {
        match self {
            LinkPurpose::Invitation => "invitation",
            LinkPurpose::Reset => "reset",
        }
    }

    fn ttl_seconds(self) -> i64 {
        match self {
            LinkPurpose::Invitation => INVITATION_TTL_SECONDS,
            LinkPurpose::Reset => RESET_TTL_SECONDS,
        }
    }

    fn from_stored(text: &str) -> Result<LinkPurpose, DbError> {
        match text {
            "invitation" => Ok(LinkPurpose::Invitation),
            "reset" => Ok(LinkPurpose::Reset),
            other => Err(DbError::Conversion {
                index: 0,
                detail: format!("unknown link purpose {other:?}"),
            }),
        }
    }
}

/// Whether the admin who made a one-time link (`invitations i`) can still
/// make one: the operator, or an admin who still is one (enabled). A link is
/// the power of the admin who made it, so it ends with that power: an admin
/// demoted, disabled or removed cannot keep a reset link to another account,
/// or an invitation to a new admin, to use later themselves.
fn link_maker_acts() -> String {
    format!(
        "(i.created_by = '{ACTOR_OPERATOR}' OR EXISTS (SELECT 1 FROM users maker
          WHERE maker.id = i.created_by AND maker.role = '{}' AND maker.disabled_at IS NULL))",
        UserRole::Admin.as_str()
    )
}

/// The one rule of a live one-time link (`invitations i JOIN users u`),
/// with `?1` the secret's hash and `?2` now: not expired, for an enabled
/// person, and its admin [still acting](link_maker_acts).
fn live_link() -> String {
    format!(
        "i.secret_sha256 = ?1 AND i.expires_at > ?2 AND u.disabled_at IS NULL AND {}",
        link_maker_acts()
    )
}

/// A token's last use is written at most this often, so authenticating a
/// busy client is not a database write per request.
pub const TOKEN_USE_PRECISION_SECONDS: i64 = 60;
/// The longest name a person gives one of their tokens.
pub const MAX_TOKEN_LABEL_CHARS: usize = 80;

/// Audit actions of people.
pub mod people_action {
    /// An admin changed a user's role: `subject` the user, `before`/`after`
    /// the roles.
    pub const USER_ROLE_CHANGED: &str = "user.role-changed";
    /// An admin disabled (`after` = `disabled`) or enabled a user.
    pub const USER_STATUS_CHANGED: &str = "user.status-changed";
    /// An operator revoked a token: `subject` its user, `before` its number.
    pub const TOKEN_REVOKED: &str = "token.revoked";
    /// An admin invited a user (`after` = their role), or made them a new
    /// link (`before` = `renewed`).
    pub const USER_INVITED: &str = "user.invited";
    /// An invited user set their password through their link.
    pub const INVITATION_ACCEPTED: &str = "user.invitation-accepted";
    /// An admin made a user a password reset link (`subject`); never the
    /// password, which only its person chooses.
    pub const PASSWORD_RESET_LINK: &str = "user.password-reset-link";
    /// A user set a new password through a reset link: their sessions,
    /// tokens and MCP connections ended.
    pub const PASSWORD_RESET: &str = "user.password-reset";
    /// An admin removed a user: `subject` their id, `before` their name.
    pub const USER_REMOVED: &str = "user.removed";
    /// A person made a token for themselves: `after` its number.
    pub const TOKEN_CREATED: &str = "token.created";
    /// The organisation's provider made a person (their first sign-in, or
    /// SCIM): `subject` their id, `before` their source, `after` their role.
    pub const USER_PROVISIONED: &str = "user.provisioned";
    /// A person signed in through the identity provider with no group that
    /// maps to a role: `subject` the user, `before` the role they had; their
    /// sessions, tokens and MCP connections ended.
    pub const SSO_NO_ROLE: &str = "user.sso-no-role";
    /// A person was bound to a subject at the identity provider (their
    /// first sign-in there): `subject` the user, `after` the issuer.
    pub const SSO_BOUND: &str = "user.sso-bound";
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
    /// The name its person gave it, if they made it themselves.
    pub label: Option<String>,
    /// Unix seconds of its last use, to [`TOKEN_USE_PRECISION_SECONDS`].
    pub last_used_at: Option<i64>,
}

/// A made one-time link, an invitation or a password reset: the secret for
/// the link (shown once, never stored).
#[derive(Debug, Clone)]
pub struct Invitation {
    pub user: User,
    pub secret: String,
    pub expires_at: i64,
    pub purpose: LinkPurpose,
}

/// What a one-time link shows before it is used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InvitationView {
    pub username: String,
    pub role: UserRole,
    pub expires_at: i64,
    pub purpose: LinkPurpose,
}

/// What removing a person took with them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Removed {
    pub user_id: String,
    /// Apps they had access to; each grant's end is audited.
    pub grants_revoked: usize,
    /// Member apps they wrote, which nobody can change from now on.
    pub member_apps_orphaned: usize,
}

/// Refuses unless `actor` may change people now, read inside `transaction`:
/// the operator (`sasha admin`, with the state folder in hand), or a user
/// who is still an enabled admin.
pub(super) fn require_acting_admin(transaction: &Tx<'_>, actor: &str) -> Result<(), StoreError> {
    if actor == ACTOR_OPERATOR {
        return Ok(());
    }
    let admin: Option<bool> = transaction
        .query_row(
            "SELECT role = ?2 AND disabled_at IS NULL FROM users WHERE id = ?1",
            (actor, UserRole::Admin),
            |row| row.get(0),
        )
        .optional()?;
    match admin {
        Some(true) => Ok(()),
        _ => Err(StoreError::NotAdmin),
    }
}

/// The admins who can act: enabled, and [signed up](SIGNED_UP) (an invited
/// admin without a password cannot sign in).
fn acting_admins(transaction: &Tx<'_>) -> Result<i64, StoreError> {
    Ok(transaction.query_row(
        &format!(
            "SELECT count(*) FROM users u WHERE u.role = ?1 AND u.disabled_at IS NULL AND {SIGNED_UP}"
        ),
        [UserRole::Admin],
        |row| row.get(0),
    )?)
}

/// Runs `change` in `transaction` and refuses it (the transaction is then
/// dropped, so rolled back) when it took away the last admin who can act.
pub(super) fn keeping_an_admin<T>(
    transaction: &Tx<'_>,
    change: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let before = acting_admins(transaction)?;
    let changed = change()?;
    if before > 0 && acting_admins(transaction)? == 0 {
        return Err(StoreError::LastAdmin);
    }
    Ok(changed)
}

const TOKEN_COLUMNS: &str = "t.id, t.kind, t.scopes, t.created_at, t.expires_at,
    t.revoked_at IS NOT NULL, t.grant_id IS NOT NULL, t.label, t.last_used_at";

fn token_from_row(row: &Row<'_>) -> Result<TokenEntry, DbError> {
    Ok(TokenEntry {
        id: row.get(0)?,
        kind: row.get(1)?,
        scopes: row.get(2)?,
        created_at: row.get(3)?,
        expires_at: row.get(4)?,
        revoked: row.get(5)?,
        oauth: row.get(6)?,
        label: row.get(7)?,
        last_used_at: row.get(8)?,
    })
}

/// Refuses a token name that is empty, too long or has control characters.
fn validate_token_label(label: &str) -> Result<(), StoreError> {
    let chars = label.chars().count();
    if label.trim().is_empty() || chars > MAX_TOKEN_LABEL_CHARS {
        return Err(StoreError::InvalidTokenLabel(format!(
            "give it a name of 1 to {MAX_TOKEN_LABEL_CHARS} characters"
        )));
    }
    if label.chars().any(char::is_control) {
        return Err(StoreError::InvalidTokenLabel(
            "a token's name is one line of text".into(),
        ));
    }
    Ok(())
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
    /// Invited and not yet signed up: they have no password.
    pub invited: bool,
    /// When their open invitation link stops working, if they have one.
    pub invitation_expires_at: Option<i64>,
    /// When the password reset link an admin made them stops working, if
    /// one is open.
    pub reset_expires_at: Option<i64>,
    /// The apps their open invitation gives once accepted (app id →
    /// access), so every admin sees what an invitation holds, not only the
    /// one who made it.
    pub invitation_apps: BTreeMap<String, AppAccess>,
}

impl Store {
    /// Every user, by name.
    pub fn people(&self) -> Result<Vec<Person>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare(&format!(
            "SELECT {USER_COLUMNS}, u.last_sign_in_at, u.disabled_at IS NOT NULL,
                    NOT {SIGNED_UP},
                    CASE WHEN i.purpose = 'invitation' THEN i.expires_at END,
                    CASE WHEN i.purpose = 'reset' AND i.expires_at > ?1 THEN i.expires_at END
             FROM users u LEFT JOIN invitations i ON i.user_id = u.id AND {}
             ORDER BY lower(u.username)",
            link_maker_acts()
        ))?;
        let mut people = statement
            .query_map([self.now()], |row| {
                Ok(Person {
                    user: user_from_row(row)?,
                    last_sign_in_at: row.get(AFTER_USER)?,
                    disabled: row.get(AFTER_USER + 1)?,
                    invited: row.get(AFTER_USER + 2)?,
                    invitation_expires_at: row.get(AFTER_USER + 3)?,
                    reset_expires_at: row.get(AFTER_USER + 4)?,
                    invitation_apps: BTreeMap::new(),
                })
            })?
            .collect::<Result<Vec<Person>, _>>()?;
        let mut pending = connection
            .prepare("SELECT user_id, app_id, access FROM invitation_grants ORDER BY app_id")?;
        let pending = pending
            .query_map((), |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, AppAccess>(2)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        for (user_id, app_id, access) in pending {
            if let Some(person) = people.iter_mut().find(|person| person.user.id == user_id) {
                person.invitation_apps.insert(app_id, access);
            }
        }
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
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        require_acting_admin(&transaction, actor)?;
        let user: User = transaction
            .query_row(
                &format!(
                    "SELECT {USER_COLUMNS} FROM users u WHERE u.username = ?1 {USERNAME_MATCHES}"
                ),
                [username],
                user_from_row,
            )
            .optional()?
            .ok_or(StoreError::UnknownUser)?;
        if user.role == role {
            return Ok(false);
        }
        // The directory's groups decide a provisioned person's role; a role
        // set here would last only until its next change.
        if user.source == UserSource::Scim {
            return Err(StoreError::ManagedByDirectory);
        }
        change_role(&transaction, now, &user, role, actor)?;
        transaction.commit()?;
        Ok(true)
    }

    /// Disables (`true`) or enables `username`, audited; `false` when they
    /// already were so. Disabling ends their sessions, revokes their tokens
    /// and ends their MCP connections at once; grants stay, so enabling gives
    /// back what they had. An invited person's invitation goes, with the apps
    /// it would have given.
    pub fn set_disabled(
        &self,
        username: &str,
        disabled: bool,
        actor: &str,
    ) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        require_acting_admin(&transaction, actor)?;
        let found: Option<(String, bool)> = transaction
            .query_row(
                &format!(
                    "SELECT id, disabled_at IS NOT NULL FROM users WHERE username = ?1 {USERNAME_MATCHES}"
                ),
                [username],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let (user_id, was) = found.ok_or(StoreError::UnknownUser)?;
        if was == disabled {
            return Ok(false);
        }
        // A provisioned person is enabled by the directory's word and their
        // groups, which Store::scim_hold weighs; disabling one here holds them
        // disabled whatever the directory says next.
        let provisioned = transaction
            .query_row(
                "SELECT 1 FROM scim_people WHERE user_id = ?1",
                [&user_id],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if provisioned {
            if !disabled {
                return Err(StoreError::ManagedByDirectory);
            }
            transaction.execute(
                "UPDATE scim_people SET held = ?2 WHERE user_id = ?1",
                (&user_id, true),
            )?;
        }
        change_status(&transaction, now, &user_id, was, disabled, actor)?;
        transaction.commit()?;
        Ok(true)
    }

    /// Every token of `username` (newest first), revoked ones included.
    pub fn tokens_of(&self, username: &str) -> Result<Vec<TokenEntry>, StoreError> {
        let connection = self.connection()?;
        let user: Option<String> = connection
            .query_row(
                &format!("SELECT id FROM users WHERE username = ?1 {USERNAME_MATCHES}"),
                [username],
                |row| row.get(0),
            )
            .optional()?;
        let user = user.ok_or(StoreError::UnknownUser)?;
        let mut statement = connection.prepare(&format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens t WHERE t.user_id = ?1 ORDER BY t.id DESC"
        ))?;
        let tokens = statement
            .query_map([user], token_from_row)?
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
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let found: Option<(String, bool)> = transaction
            .query_row(
                &format!(
                    "SELECT t.user_id, t.revoked_at IS NOT NULL FROM tokens t JOIN users u ON u.id = t.user_id
                     WHERE t.id = ?1 AND u.username = ?2 {USERNAME_MATCHES}"
                ),
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

    /// Adds `username` with `role` and no password, and makes their one-time
    /// invitation link, audited as `user.invited`. They sign in for the
    /// first time by setting a password through it.
    pub fn invite_user(
        &self,
        username: &str,
        role: UserRole,
        actor: &str,
    ) -> Result<Invitation, StoreError> {
        self.invite_user_with_apps(username, role, &BTreeMap::new(), actor)
    }

    /// [`Store::invite_user`], and the invitation gives `apps` (app id →
    /// access) once it is accepted: granted then by `actor`, each audited as
    /// a grant change. Every app must be one `actor` may grant now (a
    /// registered catalogue app, not withdrawn; a member app is its author's
    /// to share), or nothing is made (`InvitationGrant`).
    pub fn invite_user_with_apps(
        &self,
        username: &str,
        role: UserRole,
        apps: &BTreeMap<String, AppAccess>,
        actor: &str,
    ) -> Result<Invitation, StoreError> {
        validate_username(username)?;
        let now = self.now();
        let user = User {
            id: uuid::Uuid::now_v7().to_string(),
            username: username.to_owned(),
            role,
            created_at: now,
            source: UserSource::Password,
        };
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        require_acting_admin(&transaction, actor)?;
        insert_user(&transaction, &user, "")?;
        for (app_id, access) in apps {
            grantable_by_invitation(&transaction, app_id)?;
            transaction.execute(
                "INSERT INTO invitation_grants (user_id, app_id, access, granted_by)
                 VALUES (?1, ?2, ?3, ?4)",
                (&user.id, app_id, access, actor),
            )?;
        }
        let purpose = LinkPurpose::Invitation;
        let (secret, expires_at) = insert_invitation(&transaction, now, &user.id, actor, purpose)?;
        audit(
            &transaction,
            now,
            actor,
            people_action::USER_INVITED,
            None,
            Some(&user.id),
            None,
            Some(role.as_str()),
        )?;
        transaction.commit()?;
        Ok(Invitation {
            user,
            secret,
            expires_at,
            purpose,
        })
    }

    /// A new link for `username`, who has not accepted yet; the old link
    /// stops working. `NotInvited` once they have a password.
    pub fn renew_invitation(&self, username: &str, actor: &str) -> Result<Invitation, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        require_acting_admin(&transaction, actor)?;
        let found: Option<(User, bool, bool)> = transaction
            .query_row(
                &format!(
                    "SELECT {USER_COLUMNS}, NOT {SIGNED_UP}, u.disabled_at IS NOT NULL
                     FROM users u WHERE u.username = ?1 {USERNAME_MATCHES}"
                ),
                [username],
                |row| {
                    Ok((
                        user_from_row(row)?,
                        row.get(AFTER_USER)?,
                        row.get(AFTER_USER + 1)?,
                    ))
                },
            )
            .optional()?;
        let (user, invited, disabled) = found.ok_or(StoreError::UnknownUser)?;
        if !invited {
            return Err(StoreError::NotInvited);
        }
        if disabled {
            return Err(StoreError::UserDisabled);
        }
        transaction.execute("DELETE FROM invitations WHERE user_id = ?1", [&user.id])?;
        let purpose = LinkPurpose::Invitation;
        let (secret, expires_at) = insert_invitation(&transaction, now, &user.id, actor, purpose)?;
        audit(
            &transaction,
            now,
            actor,
            people_action::USER_INVITED,
            None,
            Some(&user.id),
            Some("renewed"),
            Some(user.role.as_str()),
        )?;
        transaction.commit()?;
        Ok(Invitation {
            user,
            secret,
            expires_at,
            purpose,
        })
    }

    /// A one-time link with which `username`, an active person who forgot
    /// their password, chooses a new one, audited as
    /// `user.password-reset-link`; it replaces any link they had and works
    /// for [`RESET_TTL_SECONDS`]. Nothing changes until it is used. An
    /// invited person (no password yet) is `StillInvited`: they need a new
    /// invitation link; a disabled one `UserDisabled`.
    pub fn password_reset_link(
        &self,
        username: &str,
        actor: &str,
    ) -> Result<Invitation, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        require_acting_admin(&transaction, actor)?;
        let found: Option<(User, bool, bool)> = transaction
            .query_row(
                &format!(
                    "SELECT {USER_COLUMNS}, NOT {SIGNED_UP}, u.disabled_at IS NOT NULL
                     FROM users u WHERE u.username = ?1 {USERNAME_MATCHES}"
                ),
                [username],
                |row| {
                    Ok((
                        user_from_row(row)?,
                        row.get(AFTER_USER)?,
                        row.get(AFTER_USER + 1)?,
                    ))
                },
            )
            .optional()?;
        let (user, invited, disabled) = found.ok_or(StoreError::UnknownUser)?;
        if disabled {
            return Err(StoreError::UserDisabled);
        }
        if user.source != UserSource::Password {
            return Err(StoreError::SignsInElsewhere);
        }
        if invited {
            return Err(StoreError::StillInvited);
        }
        transaction.execute("DELETE FROM invitations WHERE user_id = ?1", [&user.id])?;
        let purpose = LinkPurpose::Reset;
        let (secret, expires_at) = insert_invitation(&transaction, now, &user.id, actor, purpose)?;
        audit(
            &transaction,
            now,
            actor,
            people_action::PASSWORD_RESET_LINK,
            None,
            Some(&user.id),
            None,
            None,
        )?;
        transaction.commit()?;
        Ok(Invitation {
            user,
            secret,
            expires_at,
            purpose,
        })
    }

    /// The apps an open invitation of `username` gives once accepted (app id
    /// → access), by id.
    pub fn invitation_apps(
        &self,
        username: &str,
    ) -> Result<BTreeMap<String, AppAccess>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare(&format!(
            "SELECT g.app_id, g.access FROM invitation_grants g JOIN users u ON u.id = g.user_id
             WHERE u.username = ?1 {USERNAME_MATCHES} ORDER BY g.app_id"
        ))?;
        let apps = statement
            .query_map([username], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        Ok(apps)
    }

    /// Who a live invitation or reset link is for; `None` when it is
    /// unknown, expired or used.
    pub fn invitation(&self, secret: &str) -> Result<Option<InvitationView>, StoreError> {
        if secret.is_empty() || secret.len() > super::MAX_SECRET_LEN {
            return Ok(None);
        }
        let connection = self.connection()?;
        let found = connection
            .query_row(
                &format!(
                    "SELECT u.username, u.role, i.expires_at, i.purpose FROM invitations i
                     JOIN users u ON u.id = i.user_id WHERE {}",
                    live_link()
                ),
                (secrets::secret_sha256(secret), self.now()),
                |row| {
                    Ok(InvitationView {
                        username: row.get(0)?,
                        role: row.get(1)?,
                        expires_at: row.get(2)?,
                        purpose: LinkPurpose::from_stored(&row.get::<_, String>(3)?)?,
                    })
                },
            )
            .optional()?;
        Ok(found)
    }

    /// Sets the password of the person a live invitation or reset link is
    /// for and spends the link, audited; `None` when the link is unknown,
    /// expired or used (a weak password is refused before the link is looked
    /// at). An invitation then gives the apps it holds, granted by its admin
    /// if they still are one (each audited; an app that can no longer be
    /// granted so is left out and logged). A reset ends every session,
    /// token and MCP connection the person had, in the same transaction.
    pub fn accept_invitation(
        &self,
        secret: &str,
        password: &str,
    ) -> Result<Option<User>, StoreError> {
        validate_password(password)?;
        // A dead link costs no argon2 work: the endpoint is anonymous and
        // not throttled (the secret cannot be guessed), so hashing first
        // would let anyone spend the server's CPU with made-up links. The
        // transaction below looks again, so a link spent meanwhile is `None`.
        if self.invitation(secret)?.is_none() {
            return Ok(None);
        }
        let hash = secrets::hash_password(password).map_err(StoreError::Database)?;
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let found: Option<(User, String)> = transaction
            .query_row(
                &format!(
                    "SELECT {USER_COLUMNS}, i.purpose FROM invitations i JOIN users u ON u.id = i.user_id
                     WHERE {}",
                    live_link()
                ),
                (secrets::secret_sha256(secret), now),
                |row| Ok((user_from_row(row)?, row.get(AFTER_USER)?)),
            )
            .optional()?;
        let Some((user, purpose)) = found else {
            return Ok(None);
        };
        let purpose = LinkPurpose::from_stored(&purpose)?;
        transaction.execute(
            "UPDATE users SET password_hash = ?2 WHERE id = ?1",
            (&user.id, &hash),
        )?;
        transaction.execute("DELETE FROM invitations WHERE user_id = ?1", [&user.id])?;
        match purpose {
            LinkPurpose::Invitation => {
                grant_invitation_apps(&transaction, now, &user.id)?;
                audit(
                    &transaction,
                    now,
                    &user.id,
                    people_action::INVITATION_ACCEPTED,
                    None,
                    Some(&user.id),
                    None,
                    None,
                )?;
            }
            LinkPurpose::Reset => {
                end_every_credential(&transaction, now, &user.id, "password reset")?;
                audit(
                    &transaction,
                    now,
                    &user.id,
                    people_action::PASSWORD_RESET,
                    None,
                    Some(&user.id),
                    None,
                    None,
                )?;
            }
        }
        transaction.commit()?;
        Ok(Some(user))
    }

    /// Removes `username`, audited: every grant they held ends (one
    /// `grant.changed` row each), their sessions, tokens, MCP connections,
    /// invitation, conversations and uploaded documents go with them, and
    /// the member apps they wrote keep running with no author, so nobody can
    /// change them.
    pub fn remove_user(&self, username: &str, actor: &str) -> Result<Removed, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        require_acting_admin(&transaction, actor)?;
        let user_id: String = transaction
            .query_row(
                &format!("SELECT id FROM users WHERE username = ?1 {USERNAME_MATCHES}"),
                [username],
                |row| row.get(0),
            )
            .optional()?
            .ok_or(StoreError::UnknownUser)?;
        let removed = remove_in(&transaction, now, &user_id, username, actor)?;
        transaction.commit()?;
        Ok(removed)
    }

    /// The live tokens `user_id` made for themselves or an operator minted
    /// for them (not an MCP client's OAuth tokens, not the assistant's),
    /// newest first.
    pub fn personal_tokens(&self, user_id: &str) -> Result<Vec<TokenEntry>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare(&format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens t
             WHERE t.user_id = ?1 AND t.kind = ?2 AND t.grant_id IS NULL AND t.revoked_at IS NULL
               AND (t.expires_at IS NULL OR t.expires_at > ?3)
             ORDER BY t.id DESC"
        ))?;
        let tokens = statement
            .query_map((user_id, TokenKind::Access, self.now()), token_from_row)?
            .collect::<Result<_, _>>()?;
        Ok(tokens)
    }

    /// Makes an access token `user_id` names `label`, audited as
    /// `token.created`: the secret (shown once) and its entry.
    pub fn create_personal_token(
        &self,
        user_id: &str,
        label: &str,
        scopes: &BTreeSet<Scope>,
        ttl_seconds: Option<u64>,
    ) -> Result<(String, TokenEntry), StoreError> {
        validate_token_label(label)?;
        let (secret, id) = self.mint_token_as(
            user_id,
            TokenKind::Access,
            scopes,
            ttl_seconds,
            Some(label),
            None,
        )?;
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        audit(
            &transaction,
            now,
            user_id,
            people_action::TOKEN_CREATED,
            None,
            Some(user_id),
            None,
            Some(&id.to_string()),
        )?;
        let entry = transaction.query_row(
            &format!("SELECT {TOKEN_COLUMNS} FROM tokens t WHERE t.id = ?1"),
            [id],
            token_from_row,
        )?;
        transaction.commit()?;
        Ok((secret, entry))
    }

    /// Records that token `id` (of OAuth connection `grant_id`, if any) was
    /// used at `now`, when its last record is older than
    /// [`TOKEN_USE_PRECISION_SECONDS`]. A failure here never refuses the
    /// request: it is logged and the next use tries again.
    pub(super) fn note_token_use(
        &self,
        now: i64,
        id: i64,
        last_used_at: Option<i64>,
        grant_id: Option<&str>,
    ) {
        if last_used_at.is_some_and(|at| now - at < TOKEN_USE_PRECISION_SECONDS) {
            return;
        }
        let noted = self.connection().and_then(|connection| {
            connection
                .execute(
                    "UPDATE tokens SET last_used_at = ?2 WHERE id = ?1",
                    (id, now),
                )
                .and_then(|_| match grant_id {
                    Some(grant) => connection.execute(
                        "UPDATE oauth_grants SET last_used_at = ?2 WHERE id = ?1",
                        (grant, now),
                    ),
                    None => Ok(0),
                })
                .map_err(StoreError::from)
        });
        if let Err(error) = noted {
            tracing::debug!(%error, token = id, "a token's last use was not recorded");
        }
    }
}

/// Removes `user_id` (named `username`) inside `transaction`, audited as
/// `actor`: every grant they held ends (one `grant.changed` row each), their
/// sessions, tokens, MCP connections, invitation, conversations and uploaded
/// documents go with them, and the member apps they wrote keep running with
/// no author. Refused ([`StoreError::LastAdmin`]) when it takes away the last
/// admin who can act. The one removal Studio, the operator and SCIM share.
pub(super) fn remove_in(
    transaction: &Tx<'_>,
    now: i64,
    user_id: &str,
    username: &str,
    actor: &str,
) -> Result<Removed, StoreError> {
    let grants: Vec<(String, AppAccess)> = transaction
        .prepare("SELECT app_id, access FROM grants WHERE user_id = ?1 ORDER BY app_id")?
        .query_map([user_id], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (app_id, access) in &grants {
        audit(
            transaction,
            now,
            actor,
            action::GRANT_CHANGED,
            Some(app_id),
            Some(user_id),
            Some(access.as_str()),
            None,
        )?;
    }
    let orphaned = transaction.execute(
        "UPDATE member_apps SET author_id = NULL WHERE author_id = ?1",
        [user_id],
    )?;
    // Everything else of theirs cascades from the row.
    keeping_an_admin(transaction, || {
        transaction.execute("DELETE FROM users WHERE id = ?1", [user_id])?;
        Ok(())
    })?;
    audit(
        transaction,
        now,
        actor,
        people_action::USER_REMOVED,
        None,
        Some(user_id),
        Some(username),
        None,
    )?;
    Ok(Removed {
        user_id: user_id.to_owned(),
        grants_revoked: grants.len(),
        member_apps_orphaned: orphaned,
    })
}

/// Gives `user` the role `role` inside `transaction`, audited as `actor`;
/// refused ([`StoreError::LastAdmin`]) when it takes away the last admin who
/// can act. The one role change Studio, the operator and SCIM share.
pub(super) fn change_role(
    transaction: &Tx<'_>,
    now: i64,
    user: &User,
    role: UserRole,
    actor: &str,
) -> Result<(), StoreError> {
    keeping_an_admin(transaction, || {
        transaction.execute("UPDATE users SET role = ?2 WHERE id = ?1", (&user.id, role))?;
        Ok(())
    })?;
    audit(
        transaction,
        now,
        actor,
        people_action::USER_ROLE_CHANGED,
        None,
        Some(&user.id),
        Some(user.role.as_str()),
        Some(role.as_str()),
    )
}

/// Disables (`true`) or enables `user_id`, who was `was`, inside
/// `transaction`, audited as `actor`. Disabling ends their sessions, revokes
/// their tokens and ends their MCP connections in the same transaction, and
/// withdraws an open invitation; refused ([`StoreError::LastAdmin`]) when it
/// takes away the last admin who can act. The one status change Studio, the
/// operator and SCIM share.
pub(super) fn change_status(
    transaction: &Tx<'_>,
    now: i64,
    user_id: &str,
    was: bool,
    disabled: bool,
    actor: &str,
) -> Result<(), StoreError> {
    keeping_an_admin(transaction, || {
        transaction.execute(
            "UPDATE users SET disabled_at = ?2 WHERE id = ?1",
            (user_id, disabled.then_some(now)),
        )?;
        Ok(())
    })?;
    if disabled {
        transaction.execute("DELETE FROM invitations WHERE user_id = ?1", [user_id])?;
        // Disabling an invited person withdraws their invitation, apps
        // and all: a new link after enabling them gives no app the
        // withdrawn one chose (nobody sees those choices any more).
        transaction.execute(
            "DELETE FROM invitation_grants WHERE user_id = ?1",
            [user_id],
        )?;
        end_every_credential(transaction, now, user_id, "user disabled")?;
    }
    let state = |off: bool| if off { "disabled" } else { "active" };
    audit(
        transaction,
        now,
        actor,
        people_action::USER_STATUS_CHANGED,
        None,
        Some(user_id),
        Some(state(was)),
        Some(state(disabled)),
    )
}

/// Stores a new one-time link for `user_id` inside `transaction`: the
/// secret for the link and when it expires.
fn insert_invitation(
    transaction: &Tx<'_>,
    now: i64,
    user_id: &str,
    actor: &str,
    purpose: LinkPurpose,
) -> Result<(String, i64), StoreError> {
    let secret = secrets::random_secret();
    let expires_at = now.saturating_add(purpose.ttl_seconds());
    transaction.execute(
        "INSERT INTO invitations (secret_sha256, user_id, created_by, created_at, expires_at, purpose)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        (
            secrets::secret_sha256(&secret),
            user_id,
            actor,
            now,
            expires_at,
            purpose.as_str(),
        ),
    )?;
    Ok((secret, expires_at))
}

/// Ends every way `user_id` is signed in, inside `transaction`: browser
/// sessions, tokens, and MCP connections (so no refresh mints a new token),
/// the connections recording `reason`.
pub(super) fn end_every_credential(
    transaction: &Tx<'_>,
    now: i64,
    user_id: &str,
    reason: &str,
) -> Result<(), StoreError> {
    transaction.execute("DELETE FROM sessions WHERE user_id = ?1", [user_id])?;
    transaction.execute(
        "UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?2) WHERE user_id = ?1",
        (user_id, now),
    )?;
    transaction.execute(
        "UPDATE oauth_grants SET revoked_at = COALESCE(revoked_at, ?2),
            revoked_reason = COALESCE(revoked_reason, ?3)
         WHERE user_id = ?1",
        (user_id, now, reason),
    )?;
    Ok(())
}

/// Refuses an app an admin cannot give with an invitation: one never
/// registered, one withdrawn, or a member app (its author shares it).
fn grantable_by_invitation(transaction: &Tx<'_>, app_id: &str) -> Result<(), StoreError> {
    let refuse = |reason| {
        Err(StoreError::InvitationGrant {
            app_id: app_id.to_owned(),
            reason,
        })
    };
    let withdrawn: Option<bool> = transaction
        .query_row(
            "SELECT withdrawn_at IS NOT NULL OR package_deleted_at IS NOT NULL
             FROM app_registry WHERE app_id = ?1",
            [app_id],
            |row| row.get(0),
        )
        .optional()?;
    match withdrawn {
        None => return refuse("there is no such app"),
        Some(true) => return refuse("it is withdrawn or deleted"),
        Some(false) => {}
    }
    let member_app = transaction
        .query_row(
            "SELECT 1 FROM member_apps WHERE app_id = ?1 AND deleted_at IS NULL AND promoted_at IS NULL",
            [app_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if member_app {
        return refuse("it is a member app, which only its author shares");
    }
    Ok(())
}

/// Gives `user_id` the apps their accepted invitation holds, inside
/// `transaction`, each granted by the admin who invited them and audited;
/// none when that admin can no longer change people. The pending rows go.
pub(super) fn grant_invitation_apps(
    transaction: &Tx<'_>,
    now: i64,
    user_id: &str,
) -> Result<(), StoreError> {
    let pending: Vec<(String, AppAccess, String)> = transaction
        .prepare(
            "SELECT app_id, access, granted_by FROM invitation_grants WHERE user_id = ?1
             ORDER BY app_id",
        )?
        .query_map([user_id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
        .collect::<Result<_, _>>()?;
    transaction.execute(
        "DELETE FROM invitation_grants WHERE user_id = ?1",
        [user_id],
    )?;
    for (app_id, access, granted_by) in pending {
        match require_acting_admin(transaction, &granted_by) {
            Ok(()) => {}
            Err(StoreError::NotAdmin) => {
                tracing::warn!(%app_id, user = user_id, inviter = %granted_by,
                    "an invitation's app was not granted: its admin is no longer one");
                continue;
            }
            Err(other) => return Err(other),
        }
        match grantable_by_invitation(transaction, &app_id) {
            Ok(()) => {}
            Err(StoreError::InvitationGrant { reason, .. }) => {
                tracing::warn!(%app_id, user = user_id, reason,
                    "an invitation's app was not granted: it can no longer be");
                continue;
            }
            Err(other) => return Err(other),
        }
        member_apps::check_member_grant(transaction, &app_id, user_id, Some(access), &granted_by)??;
        set_grant(transaction, now, &granted_by, &app_id, user_id, access)?;
    }
    Ok(())
}
