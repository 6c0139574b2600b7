//! SCIM 2.0 provisioning's rows (migration 26): the bearer tokens an admin
//! mints for the organisation's directory, what the directory says of each
//! person it provisioned (`users.source = 'scim'`), its groups and their
//! members, and how those decide each such person's role and status.
//!
//! A provisioned person is enabled only while the directory says `active`,
//! no Studio admin holds them disabled, and one of their groups maps to a
//! role (the caller's [`RoleFor`], from `SASHA_SSO_*_GROUPS`): no mapped
//! group, no access. Their role is the highest their groups map to. Every
//! change of role or status goes through the one path people.rs uses, so a
//! deactivation ends their sessions, tokens and MCP connections in the same
//! transaction, and the last-admin rule holds ([`StoreError::LastAdmin`]).
//!
//! Every change runs in one IMMEDIATE transaction that first checks, inside
//! it, that the token acting is still live: a token revoked a moment ago acts
//! no more.
//!
//! What it must never do: touch a person the directory did not provision
//! (a password account is not the directory's to change, rename or remove),
//! give a role no group maps to, store a token's secret rather than its hash,
//! or change anything without an audit row naming the token.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::db::{DbError, OptionalExtension as _, Row, Sql, Tx};

use super::people::{TOKEN_USE_PRECISION_SECONDS, change_role, change_status, remove_in};
use super::{
    AFTER_USER, Store, StoreError, USER_COLUMNS, USERNAME_MATCHES, User, UserRole, UserSource,
    audit, secrets, user_from_row,
};

/// The audit actor of a change a SCIM token made: this prefix and the
/// token's number.
pub const SCIM_ACTOR_PREFIX: &str = "scim-token:";
/// The longest name an admin gives a SCIM token.
pub const MAX_SCIM_TOKEN_LABEL_CHARS: usize = 80;
/// The most live SCIM tokens an instance holds (one per provider, and one
/// being rotated in, is the usual need).
pub const MAX_LIVE_SCIM_TOKENS: i64 = 10;
/// The longest attribute value stored (names, e-mail, ids).
pub const MAX_SCIM_VALUE_CHARS: usize = 256;

/// Audit actions of SCIM provisioning. Role and status changes are
/// people's own (`user.role-changed`, `user.status-changed`), a created
/// person `user.provisioned` and a removed one `user.removed`.
pub mod scim_action {
    /// An admin minted a SCIM token: `after` its number.
    pub const TOKEN_MINTED: &str = "scim.token-minted";
    /// An admin revoked a SCIM token: `before` its number.
    pub const TOKEN_REVOKED: &str = "scim.token-revoked";
    /// The directory changed a person's attributes: `subject` their id,
    /// `before`/`after` their user name.
    pub const USER_CHANGED: &str = "scim.user-changed";
    /// The directory made a group: `subject` its id, `after` its name.
    pub const GROUP_CREATED: &str = "scim.group-created";
    /// The directory renamed a group: `before`/`after` its name.
    pub const GROUP_RENAMED: &str = "scim.group-renamed";
    /// The directory removed a group: `before` its name.
    pub const GROUP_REMOVED: &str = "scim.group-removed";
    /// A person joined a group: `subject` the person, `after` the group.
    pub const MEMBER_ADDED: &str = "scim.member-added";
    /// A person left a group: `subject` the person, `before` the group.
    pub const MEMBER_REMOVED: &str = "scim.member-removed";
}

/// The role a person's groups give (each group by its name, its SCIM id and
/// its external id); `None` when none maps.
pub type RoleFor<'a> = &'a dyn Fn(&[&str]) -> Option<UserRole>;

/// A SCIM token as listed: never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScimToken {
    pub id: i64,
    pub label: String,
    pub created_by: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
    /// Unix seconds of its last use, to the minute.
    pub last_used_at: Option<i64>,
}

/// What the directory says of a person.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScimAttributes {
    pub user_name: String,
    pub external_id: Option<String>,
    pub display_name: Option<String>,
    pub given_name: Option<String>,
    pub family_name: Option<String>,
    pub email: Option<String>,
    pub active: bool,
}

/// A group as a person's `groups` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScimGroupRef {
    pub id: String,
    pub display_name: String,
}

/// A provisioned person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScimPerson {
    pub user: User,
    pub attributes: ScimAttributes,
    /// Whether they cannot sign in now (inactive, held, or in no mapped group).
    pub disabled: bool,
    /// A Studio admin holds them disabled.
    pub held: bool,
    pub updated_at: i64,
    pub groups: Vec<ScimGroupRef>,
}

/// What the Users page shows of a provisioned person's directory record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScimDirectoryView {
    /// The directory's word.
    pub active: bool,
    /// A Studio admin holds them disabled.
    pub held: bool,
    /// Their groups' names.
    pub groups: Vec<String>,
}

/// A group's member as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScimMember {
    pub user_id: String,
    pub username: String,
}

/// What the directory says of a group: its members are SCIM ids of
/// provisioned people.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScimGroupAttributes {
    pub display_name: String,
    pub external_id: Option<String>,
    pub members: BTreeSet<String>,
}

/// A group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScimGroup {
    pub id: String,
    pub display_name: String,
    pub external_id: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub members: Vec<ScimMember>,
}

/// Which resources a list answers: every one, or those whose attribute
/// equals a value (the filters providers send before they create).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScimQuery {
    All,
    /// `id eq`.
    Id(String),
    /// `userName eq` (people; without regard to case, as user names are) or
    /// `displayName eq` (groups; likewise).
    Name(String),
    /// `externalId eq` (exact).
    ExternalId(String),
}

impl ScimQuery {
    /// The condition and the value bound to `?1`.
    fn condition(&self, id: &str, name: &str, external_id: &str) -> (String, String) {
        match self {
            ScimQuery::All => ("?1 = ?1".to_owned(), String::new()),
            ScimQuery::Id(value) => (format!("{id} = ?1"), value.clone()),
            ScimQuery::Name(value) => (format!("{name} = ?1 {USERNAME_MATCHES}"), value.clone()),
            ScimQuery::ExternalId(value) => (format!("{external_id} = ?1"), value.clone()),
        }
    }
}

/// One page of a list: `total` matches, `items` from `start` (0-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScimPage<T> {
    pub total: i64,
    pub items: Vec<T>,
}

/// The person columns after [`USER_COLUMNS`], for `users u JOIN scim_people p`.
const PERSON_COLUMNS: &str = "u.disabled_at IS NOT NULL, p.external_id, p.display_name,
    p.given_name, p.family_name, p.email, p.active, p.held, p.updated_at";

fn person_from_row(row: &Row<'_>) -> Result<ScimPerson, DbError> {
    let user = user_from_row(row)?;
    Ok(ScimPerson {
        attributes: ScimAttributes {
            user_name: user.username.clone(),
            external_id: row.get(AFTER_USER + 1)?,
            display_name: row.get(AFTER_USER + 2)?,
            given_name: row.get(AFTER_USER + 3)?,
            family_name: row.get(AFTER_USER + 4)?,
            email: row.get(AFTER_USER + 5)?,
            active: row.get(AFTER_USER + 6)?,
        },
        disabled: row.get(AFTER_USER)?,
        held: row.get(AFTER_USER + 7)?,
        updated_at: row.get(AFTER_USER + 8)?,
        groups: Vec::new(),
        user,
    })
}

/// Refuses an attribute value that is too long or holds control characters.
fn validate_value(what: &str, value: Option<&str>) -> Result<(), StoreError> {
    let Some(value) = value else { return Ok(()) };
    if value.chars().count() > MAX_SCIM_VALUE_CHARS || value.chars().any(char::is_control) {
        return Err(StoreError::InvalidScimValue(format!(
            "{what} must be one line of at most {MAX_SCIM_VALUE_CHARS} characters"
        )));
    }
    Ok(())
}

fn validate_attributes(attributes: &ScimAttributes) -> Result<(), StoreError> {
    super::validate_username(&attributes.user_name)?;
    validate_value("externalId", attributes.external_id.as_deref())?;
    validate_value("displayName", attributes.display_name.as_deref())?;
    validate_value("name.givenName", attributes.given_name.as_deref())?;
    validate_value("name.familyName", attributes.family_name.as_deref())?;
    validate_value("emails", attributes.email.as_deref())
}

fn validate_group(attributes: &ScimGroupAttributes) -> Result<(), StoreError> {
    if attributes.display_name.trim().is_empty() {
        return Err(StoreError::InvalidScimValue(
            "displayName must not be empty".into(),
        ));
    }
    validate_value("displayName", Some(&attributes.display_name))?;
    validate_value("externalId", attributes.external_id.as_deref())
}

/// The number of a SCIM actor (`scim-token:<n>`).
fn token_number(actor: &str) -> Option<i64> {
    actor.strip_prefix(SCIM_ACTOR_PREFIX)?.parse().ok()
}

/// Refuses unless `actor` is a SCIM token still live, read inside
/// `transaction` (or the system resettling everyone at start).
fn require_live_token(transaction: &Tx<'_>, actor: &str) -> Result<(), StoreError> {
    if actor == super::ACTOR_SYSTEM {
        return Ok(());
    }
    let Some(id) = token_number(actor) else {
        return Err(StoreError::NotAdmin);
    };
    let live = transaction
        .query_row(
            "SELECT 1 FROM scim_tokens WHERE id = ?1 AND revoked_at IS NULL",
            [id],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if live {
        Ok(())
    } else {
        Err(StoreError::NotAdmin)
    }
}

/// The provisioned person `user_id` inside `transaction`, with their groups.
fn person_in(transaction: &impl Sql, user_id: &str) -> Result<Option<ScimPerson>, StoreError> {
    let person = transaction
        .query_row(
            &format!(
                "SELECT {USER_COLUMNS}, {PERSON_COLUMNS}
                 FROM users u JOIN scim_people p ON p.user_id = u.id WHERE u.id = ?1"
            ),
            [user_id],
            person_from_row,
        )
        .optional()?;
    let Some(mut person) = person else {
        return Ok(None);
    };
    person.groups = transaction
        .query_map(
            "SELECT g.id, g.display_name FROM scim_members m JOIN scim_groups g ON g.id = m.group_id
             WHERE m.user_id = ?1 ORDER BY g.display_name",
            [user_id],
            |row| {
                Ok(ScimGroupRef {
                    id: row.get(0)?,
                    display_name: row.get(1)?,
                })
            },
        )?
        .collect::<Result<_, _>>()?;
    Ok(Some(person))
}

fn group_in(transaction: &impl Sql, group_id: &str) -> Result<Option<ScimGroup>, StoreError> {
    let group = transaction
        .query_row(
            "SELECT id, display_name, external_id, created_at, updated_at FROM scim_groups
             WHERE id = ?1",
            [group_id],
            |row| {
                Ok(ScimGroup {
                    id: row.get(0)?,
                    display_name: row.get(1)?,
                    external_id: row.get(2)?,
                    created_at: row.get(3)?,
                    updated_at: row.get(4)?,
                    members: Vec::new(),
                })
            },
        )
        .optional()?;
    let Some(mut group) = group else {
        return Ok(None);
    };
    group.members = transaction
        .query_map(
            "SELECT u.id, u.username FROM scim_members m JOIN users u ON u.id = m.user_id
             WHERE m.group_id = ?1 ORDER BY lower(u.username)",
            [group_id],
            |row| {
                Ok(ScimMember {
                    user_id: row.get(0)?,
                    username: row.get(1)?,
                })
            },
        )?
        .collect::<Result<_, _>>()?;
    Ok(Some(group))
}

/// Gives the provisioned person `user_id` the role and status the directory
/// and their groups decide, through people's own paths (audited as `actor`):
/// enabled only while active, not held and in a mapped group.
fn settle(
    transaction: &Tx<'_>,
    now: i64,
    user_id: &str,
    actor: &str,
    role_for: RoleFor<'_>,
) -> Result<(), StoreError> {
    let Some(person) = person_in(transaction, user_id)? else {
        return Ok(());
    };
    let external: Vec<Option<String>> = transaction
        .query_map(
            "SELECT g.external_id FROM scim_members m JOIN scim_groups g ON g.id = m.group_id
             WHERE m.user_id = ?1",
            [user_id],
            |row| row.get(0),
        )?
        .collect::<Result<_, _>>()?;
    let names: Vec<&str> = person
        .groups
        .iter()
        .flat_map(|group| [group.display_name.as_str(), group.id.as_str()])
        .chain(external.iter().flatten().map(String::as_str))
        .collect();
    let mapped = role_for(&names);
    if let Some(role) = mapped
        && role != person.user.role
    {
        change_role(transaction, now, &person.user, role, actor)?;
    }
    let disable = !person.attributes.active || person.held || mapped.is_none();
    if disable != person.disabled {
        change_status(transaction, now, user_id, person.disabled, disable, actor)?;
    }
    Ok(())
}

/// Refuses `externalId` already another person's (or group's).
fn external_id_free(
    transaction: &Tx<'_>,
    table: &str,
    key: &str,
    external_id: Option<&str>,
    except: &str,
) -> Result<(), StoreError> {
    let Some(external_id) = external_id else {
        return Ok(());
    };
    let taken = transaction
        .query_row(
            &format!("SELECT 1 FROM {table} WHERE external_id = ?1 AND {key} <> ?2"),
            (external_id, except),
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if taken {
        return Err(StoreError::ScimTaken("externalId"));
    }
    Ok(())
}

/// Records `attributes` of the provisioned person `user_id`.
fn write_attributes(
    transaction: &Tx<'_>,
    now: i64,
    user_id: &str,
    attributes: &ScimAttributes,
) -> Result<(), StoreError> {
    transaction.execute(
        "INSERT INTO scim_people (user_id, external_id, display_name, given_name, family_name,
             email, active, held, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (user_id) DO UPDATE SET external_id = excluded.external_id,
             display_name = excluded.display_name, given_name = excluded.given_name,
             family_name = excluded.family_name, email = excluded.email,
             active = excluded.active, updated_at = excluded.updated_at",
        (
            user_id,
            attributes.external_id.as_deref(),
            attributes.display_name.as_deref(),
            attributes.given_name.as_deref(),
            attributes.family_name.as_deref(),
            attributes.email.as_deref(),
            attributes.active,
            false,
            now,
        ),
    )?;
    Ok(())
}

/// The ids of the provisioned people among `user_ids`; refuses any other.
fn provisioned(transaction: &Tx<'_>, user_ids: &BTreeSet<String>) -> Result<(), StoreError> {
    for user_id in user_ids {
        let known = transaction
            .query_row(
                "SELECT 1 FROM scim_people WHERE user_id = ?1",
                [user_id],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if !known {
            return Err(StoreError::InvalidScimValue(format!(
                "member {user_id:?} is not a person this directory provisioned"
            )));
        }
    }
    Ok(())
}

impl Store {
    /// Mints a SCIM token named `label`, audited: the token (its secret,
    /// shown once) and its entry.
    pub fn mint_scim_token(
        &self,
        label: &str,
        actor: &str,
    ) -> Result<(String, ScimToken), StoreError> {
        let label = label.trim();
        if label.is_empty()
            || label.chars().count() > MAX_SCIM_TOKEN_LABEL_CHARS
            || label.chars().any(char::is_control)
        {
            return Err(StoreError::InvalidTokenLabel(format!(
                "give it a name of 1 to {MAX_SCIM_TOKEN_LABEL_CHARS} characters on one line"
            )));
        }
        let now = self.now();
        let secret = format!("sasha_scim_{}", secrets::random_secret());
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        super::people::require_acting_admin(&transaction, actor)?;
        let live: i64 = transaction.query_row(
            "SELECT count(*) FROM scim_tokens WHERE revoked_at IS NULL",
            (),
            |row| row.get(0),
        )?;
        if live >= MAX_LIVE_SCIM_TOKENS {
            return Err(StoreError::InvalidTokenLabel(format!(
                "an instance holds at most {MAX_LIVE_SCIM_TOKENS} live SCIM tokens; revoke one first"
            )));
        }
        let id: i64 = transaction.query_row(
            "INSERT INTO scim_tokens (secret_sha256, label, created_by, created_at)
             VALUES (?1, ?2, ?3, ?4) RETURNING id",
            (secrets::secret_sha256(&secret), label, actor, now),
            |row| row.get(0),
        )?;
        audit(
            &transaction,
            now,
            actor,
            scim_action::TOKEN_MINTED,
            None,
            None,
            None,
            Some(&id.to_string()),
        )?;
        transaction.commit()?;
        let token = ScimToken {
            id,
            label: label.to_owned(),
            created_by: actor.to_owned(),
            created_at: now,
            revoked_at: None,
            last_used_at: None,
        };
        Ok((secret, token))
    }

    /// Every SCIM token, newest first.
    pub fn scim_tokens(&self) -> Result<Vec<ScimToken>, StoreError> {
        let connection = self.connection()?;
        let tokens = connection
            .query_map(
                "SELECT id, label, created_by, created_at, revoked_at, last_used_at
                 FROM scim_tokens ORDER BY id DESC",
                (),
                |row| {
                    Ok(ScimToken {
                        id: row.get(0)?,
                        label: row.get(1)?,
                        created_by: row.get(2)?,
                        created_at: row.get(3)?,
                        revoked_at: row.get(4)?,
                        last_used_at: row.get(5)?,
                    })
                },
            )?
            .collect::<Result<_, _>>()?;
        Ok(tokens)
    }

    /// Revokes SCIM token `id`, audited; `false` when it already was.
    pub fn revoke_scim_token(&self, id: i64, actor: &str) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        super::people::require_acting_admin(&transaction, actor)?;
        let revoked: Option<bool> = transaction
            .query_row(
                "SELECT revoked_at IS NOT NULL FROM scim_tokens WHERE id = ?1",
                [id],
                |row| row.get(0),
            )
            .optional()?;
        match revoked {
            None => return Err(StoreError::UnknownToken),
            Some(true) => return Ok(false),
            Some(false) => {}
        }
        transaction.execute(
            "UPDATE scim_tokens SET revoked_at = ?2 WHERE id = ?1",
            (id, now),
        )?;
        audit(
            &transaction,
            now,
            actor,
            scim_action::TOKEN_REVOKED,
            None,
            None,
            Some(&id.to_string()),
            None,
        )?;
        transaction.commit()?;
        Ok(true)
    }

    /// The audit actor of a live SCIM token `secret`, or `None` (unknown,
    /// revoked, or too long to be one). Its last use is written at most
    /// once a minute.
    pub fn scim_token_actor(&self, secret: &str) -> Result<Option<String>, StoreError> {
        if secret.len() > super::MAX_SECRET_LEN {
            return Ok(None);
        }
        let now = self.now();
        let found: Option<(i64, Option<i64>)> = {
            let connection = self.connection()?;
            connection
                .query_row(
                    "SELECT id, last_used_at FROM scim_tokens
                     WHERE secret_sha256 = ?1 AND revoked_at IS NULL",
                    [secrets::secret_sha256(secret)],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()?
        };
        let Some((id, last_used_at)) = found else {
            return Ok(None);
        };
        if last_used_at.is_none_or(|at| now - at >= TOKEN_USE_PRECISION_SECONDS) {
            let mut connection = self.connection()?;
            let transaction = connection.write_transaction()?;
            transaction.execute(
                "UPDATE scim_tokens SET last_used_at = ?2 WHERE id = ?1",
                (id, now),
            )?;
            transaction.commit()?;
        }
        Ok(Some(format!("{SCIM_ACTOR_PREFIX}{id}")))
    }

    /// Every provisioned person's directory record, by user id.
    pub fn scim_directory(&self) -> Result<BTreeMap<String, ScimDirectoryView>, StoreError> {
        let connection = self.connection()?;
        let mut people: BTreeMap<String, ScimDirectoryView> = connection
            .query_map("SELECT user_id, active, held FROM scim_people", (), |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    ScimDirectoryView {
                        active: row.get(1)?,
                        held: row.get(2)?,
                        groups: Vec::new(),
                    },
                ))
            })?
            .collect::<Result<_, _>>()?;
        let memberships: Vec<(String, String)> = connection
            .query_map(
                "SELECT m.user_id, g.display_name FROM scim_members m
                 JOIN scim_groups g ON g.id = m.group_id ORDER BY g.display_name",
                (),
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?
            .collect::<Result<_, _>>()?;
        for (user_id, group) in memberships {
            if let Some(person) = people.get_mut(&user_id) {
                person.groups.push(group);
            }
        }
        Ok(people)
    }

    // --- people ------------------------------------------------------------

    /// Provisions a person, audited as `user.provisioned` by `actor`, with
    /// the role and status their (so far absent) groups give.
    pub fn scim_create_user(
        &self,
        attributes: &ScimAttributes,
        actor: &str,
        role_for: RoleFor<'_>,
    ) -> Result<ScimPerson, StoreError> {
        validate_attributes(attributes)?;
        let user = self.create_user_from_then(
            UserSource::Scim,
            &attributes.user_name,
            UserRole::Member,
            actor,
            &|transaction, user, now| {
                require_live_token(transaction, actor)?;
                external_id_free(
                    transaction,
                    "scim_people",
                    "user_id",
                    attributes.external_id.as_deref(),
                    &user.id,
                )?;
                write_attributes(transaction, now, &user.id, attributes)?;
                settle(transaction, now, &user.id, actor, role_for)
            },
        )?;
        self.scim_user(&user.id)?.ok_or(StoreError::UnknownUser)
    }

    /// The provisioned person with SCIM id `id`.
    pub fn scim_user(&self, id: &str) -> Result<Option<ScimPerson>, StoreError> {
        let connection = self.connection()?;
        person_in(&connection, id)
    }

    /// The provisioned people `query` matches, `count` from `start` (0-based),
    /// oldest first.
    pub fn scim_users(
        &self,
        query: &ScimQuery,
        start: i64,
        count: i64,
    ) -> Result<ScimPage<ScimPerson>, StoreError> {
        let connection = self.connection()?;
        let (condition, value) = query.condition("u.id", "u.username", "p.external_id");
        let total: i64 = connection.query_row(
            &format!(
                "SELECT count(*) FROM users u JOIN scim_people p ON p.user_id = u.id
                 WHERE {condition}"
            ),
            [&value],
            |row| row.get(0),
        )?;
        let ids: Vec<String> = connection
            .query_map(
                &format!(
                    "SELECT u.id FROM users u JOIN scim_people p ON p.user_id = u.id
                     WHERE {condition} ORDER BY u.created_at, u.id LIMIT ?2 OFFSET ?3"
                ),
                (&value, count, start),
                |row| row.get(0),
            )?
            .collect::<Result<_, _>>()?;
        let mut items = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(person) = person_in(&connection, &id)? {
                items.push(person);
            }
        }
        Ok(ScimPage { total, items })
    }

    /// Replaces what the directory says of person `id` with what `change`
    /// makes of what it said (a PUT ignores it; a PATCH applies its
    /// operations to it), then settles their role and status; a new user
    /// name renames them. Audited. `change` runs inside the transaction, so
    /// two PATCHes at once each see the other's change.
    pub fn scim_update_user<E: From<StoreError>>(
        &self,
        id: &str,
        actor: &str,
        role_for: RoleFor<'_>,
        change: impl FnOnce(&ScimPerson) -> Result<ScimAttributes, E>,
    ) -> Result<ScimPerson, E> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction().map_err(StoreError::from)?;
        require_live_token(&transaction, actor)?;
        let before = person_in(&transaction, id)?.ok_or(StoreError::UnknownUser)?;
        let attributes = change(&before)?;
        replace_person(&transaction, now, &before, &attributes, actor, role_for)?;
        let after = person_in(&transaction, id)?.ok_or(StoreError::UnknownUser)?;
        transaction.commit().map_err(StoreError::from)?;
        Ok(after)
    }

    /// Removes person `id` through people's removal (their grants,
    /// sessions, tokens and MCP connections go with them), audited.
    pub fn scim_delete_user(&self, id: &str, actor: &str) -> Result<(), StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        require_live_token(&transaction, actor)?;
        let person = person_in(&transaction, id)?.ok_or(StoreError::UnknownUser)?;
        remove_in(&transaction, now, id, &person.user.username, actor)?;
        transaction.commit()?;
        Ok(())
    }

    /// A Studio admin holds provisioned person `username` disabled (`true`)
    /// or lets the directory decide again (`false`), audited as a status
    /// change when it changes one. The directory's changes never undo a hold.
    pub fn scim_hold(
        &self,
        username: &str,
        held: bool,
        actor: &str,
        role_for: RoleFor<'_>,
    ) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        super::people::require_acting_admin(&transaction, actor)?;
        let found: Option<(String, bool)> = transaction
            .query_row(
                &format!(
                    "SELECT u.id, p.held FROM users u JOIN scim_people p ON p.user_id = u.id
                     WHERE u.username = ?1 {USERNAME_MATCHES}"
                ),
                [username],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let (user_id, was) = found.ok_or(StoreError::UnknownUser)?;
        if was == held {
            return Ok(false);
        }
        transaction.execute(
            "UPDATE scim_people SET held = ?2 WHERE user_id = ?1",
            (&user_id, held),
        )?;
        settle(&transaction, now, &user_id, actor, role_for)?;
        transaction.commit()?;
        Ok(true)
    }

    /// Settles every provisioned person again (at start, since the group
    /// mapping may have changed), audited as `system`.
    pub fn scim_settle_everyone(&self, role_for: RoleFor<'_>) -> Result<(), StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let ids: Vec<String> = transaction
            .query_map(
                "SELECT user_id FROM scim_people ORDER BY user_id",
                (),
                |row| row.get(0),
            )?
            .collect::<Result<_, _>>()?;
        for id in ids {
            settle(&transaction, now, &id, super::ACTOR_SYSTEM, role_for)?;
        }
        transaction.commit()?;
        Ok(())
    }

    // --- groups ------------------------------------------------------------

    /// Makes a group with its members, audited; each member's role and status
    /// follow.
    pub fn scim_create_group(
        &self,
        attributes: &ScimGroupAttributes,
        actor: &str,
        role_for: RoleFor<'_>,
    ) -> Result<ScimGroup, StoreError> {
        validate_group(attributes)?;
        let now = self.now();
        let id = uuid::Uuid::now_v7().to_string();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        require_live_token(&transaction, actor)?;
        group_name_free(&transaction, &attributes.display_name, &id)?;
        external_id_free(
            &transaction,
            "scim_groups",
            "id",
            attributes.external_id.as_deref(),
            &id,
        )?;
        provisioned(&transaction, &attributes.members)?;
        transaction.execute(
            "INSERT INTO scim_groups (id, display_name, external_id, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?4)",
            (
                &id,
                &attributes.display_name,
                attributes.external_id.as_deref(),
                now,
            ),
        )?;
        audit(
            &transaction,
            now,
            actor,
            scim_action::GROUP_CREATED,
            None,
            Some(&id),
            None,
            Some(&attributes.display_name),
        )?;
        set_members(&transaction, now, &id, &attributes.members, actor, role_for)?;
        let group = group_in(&transaction, &id)?.ok_or(StoreError::UnknownScimGroup)?;
        transaction.commit()?;
        Ok(group)
    }

    /// The group with SCIM id `id`.
    pub fn scim_group(&self, id: &str) -> Result<Option<ScimGroup>, StoreError> {
        let connection = self.connection()?;
        group_in(&connection, id)
    }

    /// The groups `query` matches, `count` from `start` (0-based), oldest
    /// first.
    pub fn scim_groups(
        &self,
        query: &ScimQuery,
        start: i64,
        count: i64,
    ) -> Result<ScimPage<ScimGroup>, StoreError> {
        let connection = self.connection()?;
        let (condition, value) = query.condition("id", "display_name", "external_id");
        let total: i64 = connection.query_row(
            &format!("SELECT count(*) FROM scim_groups WHERE {condition}"),
            [&value],
            |row| row.get(0),
        )?;
        let ids: Vec<String> = connection
            .query_map(
                &format!(
                    "SELECT id FROM scim_groups WHERE {condition}
                     ORDER BY created_at, id LIMIT ?2 OFFSET ?3"
                ),
                (&value, count, start),
                |row| row.get(0),
            )?
            .collect::<Result<_, _>>()?;
        let mut items = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(group) = group_in(&connection, &id)? {
                items.push(group);
            }
        }
        Ok(ScimPage { total, items })
    }

    /// Replaces group `id`'s name, external id and members with what
    /// `change` makes of them (a PUT ignores them; a PATCH applies its
    /// operations), audited; the role and status of everyone who joined or
    /// left follow. `change` runs inside the transaction, so two member
    /// PATCHes at once both land.
    pub fn scim_update_group<E: From<StoreError>>(
        &self,
        id: &str,
        actor: &str,
        role_for: RoleFor<'_>,
        change: impl FnOnce(&ScimGroup) -> Result<ScimGroupAttributes, E>,
    ) -> Result<ScimGroup, E> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction().map_err(StoreError::from)?;
        require_live_token(&transaction, actor)?;
        let before = group_in(&transaction, id)?.ok_or(StoreError::UnknownScimGroup)?;
        let attributes = change(&before)?;
        replace_group(&transaction, now, &before, &attributes, actor, role_for)?;
        let group = group_in(&transaction, id)?.ok_or(StoreError::UnknownScimGroup)?;
        transaction.commit().map_err(StoreError::from)?;
        Ok(group)
    }

    /// Removes group `id`, audited; its members' roles and status follow.
    pub fn scim_delete_group(
        &self,
        id: &str,
        actor: &str,
        role_for: RoleFor<'_>,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        require_live_token(&transaction, actor)?;
        let group = group_in(&transaction, id)?.ok_or(StoreError::UnknownScimGroup)?;
        set_members(&transaction, now, id, &BTreeSet::new(), actor, role_for)?;
        transaction.execute("DELETE FROM scim_groups WHERE id = ?1", [id])?;
        audit(
            &transaction,
            now,
            actor,
            scim_action::GROUP_REMOVED,
            None,
            Some(id),
            Some(&group.display_name),
            None,
        )?;
        transaction.commit()?;
        Ok(())
    }
}

/// Refuses a group name another group has, whatever its case.
fn group_name_free(transaction: &Tx<'_>, name: &str, except: &str) -> Result<(), StoreError> {
    let taken = transaction
        .query_row(
            &format!(
                "SELECT 1 FROM scim_groups WHERE display_name = ?1 {USERNAME_MATCHES} AND id <> ?2"
            ),
            (name, except),
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if taken {
        return Err(StoreError::ScimTaken("displayName"));
    }
    Ok(())
}

/// Makes `members` exactly group `group_id`'s members, each join and leave
/// audited, and settles everyone who joined or left.
fn set_members(
    transaction: &Tx<'_>,
    now: i64,
    group_id: &str,
    members: &BTreeSet<String>,
    actor: &str,
    role_for: RoleFor<'_>,
) -> Result<(), StoreError> {
    let current: BTreeSet<String> = transaction
        .query_map(
            "SELECT user_id FROM scim_members WHERE group_id = ?1",
            [group_id],
            |row| row.get(0),
        )?
        .collect::<Result<_, _>>()?;
    for joined in members.difference(&current) {
        transaction.execute(
            "INSERT INTO scim_members (group_id, user_id) VALUES (?1, ?2)",
            (group_id, joined),
        )?;
        audit(
            transaction,
            now,
            actor,
            scim_action::MEMBER_ADDED,
            None,
            Some(joined),
            None,
            Some(group_id),
        )?;
    }
    for left in current.difference(members) {
        transaction.execute(
            "DELETE FROM scim_members WHERE group_id = ?1 AND user_id = ?2",
            (group_id, left),
        )?;
        audit(
            transaction,
            now,
            actor,
            scim_action::MEMBER_REMOVED,
            None,
            Some(left),
            Some(group_id),
            None,
        )?;
    }
    if members != &current {
        transaction.execute(
            "UPDATE scim_groups SET updated_at = ?2 WHERE id = ?1",
            (group_id, now),
        )?;
    }
    for changed in members.symmetric_difference(&current) {
        settle(transaction, now, changed, actor, role_for)?;
    }
    Ok(())
}

/// Records `attributes` as what the directory says of `before`, renaming
/// them if the user name changed, and settles them. Audited.
fn replace_person(
    transaction: &Tx<'_>,
    now: i64,
    before: &ScimPerson,
    attributes: &ScimAttributes,
    actor: &str,
    role_for: RoleFor<'_>,
) -> Result<(), StoreError> {
    validate_attributes(attributes)?;
    let id = before.user.id.as_str();
    external_id_free(
        transaction,
        "scim_people",
        "user_id",
        attributes.external_id.as_deref(),
        id,
    )?;
    if before.user.username != attributes.user_name {
        let taken = transaction
            .query_row(
                &format!("SELECT 1 FROM users WHERE username = ?1 {USERNAME_MATCHES} AND id <> ?2"),
                (&attributes.user_name, id),
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if taken {
            return Err(StoreError::UsernameTaken);
        }
        transaction.execute(
            "UPDATE users SET username = ?2 WHERE id = ?1",
            (id, &attributes.user_name),
        )?;
    }
    if before.attributes != *attributes {
        write_attributes(transaction, now, id, attributes)?;
        audit(
            transaction,
            now,
            actor,
            scim_action::USER_CHANGED,
            None,
            Some(id),
            Some(&before.user.username),
            Some(&attributes.user_name),
        )?;
    }
    settle(transaction, now, id, actor, role_for)
}

/// Records `attributes` as group `before`'s, audited, and settles everyone
/// whose groups changed.
fn replace_group(
    transaction: &Tx<'_>,
    now: i64,
    before: &ScimGroup,
    attributes: &ScimGroupAttributes,
    actor: &str,
    role_for: RoleFor<'_>,
) -> Result<(), StoreError> {
    validate_group(attributes)?;
    let id = before.id.as_str();
    group_name_free(transaction, &attributes.display_name, id)?;
    external_id_free(
        transaction,
        "scim_groups",
        "id",
        attributes.external_id.as_deref(),
        id,
    )?;
    provisioned(transaction, &attributes.members)?;
    let renamed = before.display_name != attributes.display_name;
    if renamed || before.external_id != attributes.external_id {
        transaction.execute(
            "UPDATE scim_groups SET display_name = ?2, external_id = ?3, updated_at = ?4
                 WHERE id = ?1",
            (
                id,
                &attributes.display_name,
                attributes.external_id.as_deref(),
                now,
            ),
        )?;
    }
    if renamed {
        audit(
            transaction,
            now,
            actor,
            scim_action::GROUP_RENAMED,
            None,
            Some(id),
            Some(&before.display_name),
            Some(&attributes.display_name),
        )?;
    }
    set_members(transaction, now, id, &attributes.members, actor, role_for)?;
    if renamed || before.external_id != attributes.external_id {
        // A new name or id may map differently: everyone in it settles.
        for member in &attributes.members {
            settle(transaction, now, member, actor, role_for)?;
        }
    }
    Ok(())
}
