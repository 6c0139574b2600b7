//! Bearer tokens (`tokens`): minting access tokens, API keys and chat-session
//! tokens with their scopes and lifetimes, reading the principal of a
//! presented secret, and revoking one.
//!
//! What it must never do: store a secret other than as its sha256, return it
//! anywhere but from the call that minted it, mint a scope the user's role
//! may not hold, or let a token carry more than it was minted with (a scope
//! the role lost is dropped; nothing is ever added).

use std::collections::BTreeSet;

use crate::db::{OptionalExtension as _, Sql};

use super::{
    ACCESS_TOKEN_DEFAULT_TTL_SECONDS, AFTER_USER, CHAT_SESSION_TTL_SECONDS, MAX_SECRET_LEN,
    Principal, Scope, Store, StoreError, TOKEN_MAX_TTL_SECONDS, TokenKind, TokenOrigin,
    USER_COLUMNS, scopes_from_text, scopes_to_text, seconds_i64, secrets, user_from_row,
};

impl Store {
    /// Mints a token for `user_id` with exactly `scopes`. Returns the secret
    /// (`sasha_at_…`, `sasha_ak_…` or `sasha_ct_…`); only its sha256 is stored.
    ///
    /// Lifetimes: an access token lasts `ttl_seconds` (default 30 days, at most
    /// 365); a chat-session token always lasts 2 hours (a `ttl_seconds` is
    /// refused); an API key never expires without a `ttl_seconds` (at most 365
    /// days with one). `apps:write` needs an admin or staff user.
    pub fn mint_token(
        &self,
        user_id: &str,
        kind: TokenKind,
        scopes: &BTreeSet<Scope>,
        ttl_seconds: Option<u64>,
    ) -> Result<String, StoreError> {
        self.mint_token_as(user_id, kind, scopes, ttl_seconds, None, None)
            .map(|(secret, _)| secret)
    }

    /// An access token for one turn of the Studio assistant's
    /// `conversation`: the data changes made through it are recorded as that
    /// conversation's ([`TokenOrigin::Conversation`]).
    pub fn mint_conversation_token(
        &self,
        user_id: &str,
        scopes: &BTreeSet<Scope>,
        ttl_seconds: u64,
        conversation: &str,
    ) -> Result<String, StoreError> {
        self.mint_token_as(
            user_id,
            TokenKind::Access,
            scopes,
            Some(ttl_seconds),
            None,
            Some(conversation),
        )
        .map(|(secret, _)| secret)
    }

    /// [`Store::mint_token`] with the person's own `label` for it and the
    /// assistant conversation it is for; also returns the token's number.
    pub(super) fn mint_token_as(
        &self,
        user_id: &str,
        kind: TokenKind,
        scopes: &BTreeSet<Scope>,
        ttl_seconds: Option<u64>,
        label: Option<&str>,
        conversation: Option<&str>,
    ) -> Result<(String, i64), StoreError> {
        if scopes.is_empty() {
            return Err(StoreError::NoScopes);
        }
        let user = self.user(user_id)?.ok_or(StoreError::UnknownUser)?;
        if let Some(scope) = scopes.iter().find(|scope| !user.role.allows(**scope)) {
            return Err(StoreError::ScopeNotAllowed {
                scope: *scope,
                role: user.role,
            });
        }
        let ttl = match (kind, ttl_seconds) {
            (_, Some(0)) => return Err(StoreError::InvalidTtl("it must be positive".into())),
            (TokenKind::ChatSession, Some(_)) => {
                return Err(StoreError::InvalidTtl(
                    "a chat-session token always lasts 2 hours".into(),
                ));
            }
            (_, Some(ttl)) if ttl > TOKEN_MAX_TTL_SECONDS => {
                return Err(StoreError::InvalidTtl("it must be at most 365 days".into()));
            }
            (TokenKind::ChatSession, None) => Some(CHAT_SESSION_TTL_SECONDS),
            (TokenKind::Access, None) => Some(ACCESS_TOKEN_DEFAULT_TTL_SECONDS),
            (TokenKind::ApiKey, None) => None,
            (_, Some(ttl)) => Some(ttl),
        };
        let now = self.now();
        let expires_at = ttl.map(|ttl| now.saturating_add(seconds_i64(ttl)));
        let secret = format!("{}{}", kind.prefix(), secrets::random_secret());
        let id: i64 = self.connection()?.query_row(
            "INSERT INTO tokens (kind, user_id, scopes, secret_sha256, created_at, expires_at, label,
                                 conversation_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id",
            (
                kind,
                user_id,
                scopes_to_text(scopes),
                secrets::secret_sha256(&secret),
                now,
                expires_at,
                label,
                conversation,
            ),
            |row| row.get(0),
        )?;
        Ok((secret, id))
    }

    /// The principal of a bearer token, or `None` when it is unknown, expired
    /// or revoked, or is an OAuth token whose connection is revoked. Scopes
    /// are the minted ones; one the user's role no longer allows is dropped,
    /// and nothing is ever added. The audience check is the caller's: see
    /// [`Principal::audience`].
    pub fn token(&self, secret: &str) -> Result<Option<Principal>, StoreError> {
        if secret.len() > MAX_SECRET_LEN {
            return Ok(None);
        }
        let Some(claimed) = TokenKind::of_secret(secret) else {
            return Ok(None);
        };
        let now = self.now();
        let found = {
            let connection = self.connection()?;
            connection
                .prepare_cached(&format!(
                    "SELECT {USER_COLUMNS}, t.kind, t.scopes, t.expires_at, t.audience,
                            t.id, t.last_used_at, t.grant_id, g.client_id, t.conversation_id
                     FROM tokens t
                     JOIN users u ON u.id = t.user_id
                     LEFT JOIN oauth_grants g ON g.id = t.grant_id
                     WHERE t.secret_sha256 = ?1 AND t.revoked_at IS NULL
                       AND (t.expires_at IS NULL OR t.expires_at > ?2)
                       AND (t.grant_id IS NULL OR g.revoked_at IS NULL)"
                ))?
                .query_row((secrets::secret_sha256(secret), now), |row| {
                    Ok((
                        user_from_row(row)?,
                        row.get::<_, TokenKind>(AFTER_USER)?,
                        row.get::<_, String>(AFTER_USER + 1)?,
                        row.get::<_, Option<i64>>(AFTER_USER + 2)?,
                        row.get::<_, Option<String>>(AFTER_USER + 3)?,
                        row.get::<_, i64>(AFTER_USER + 4)?,
                        row.get::<_, Option<i64>>(AFTER_USER + 5)?,
                        row.get::<_, Option<String>>(AFTER_USER + 6)?,
                        row.get::<_, Option<String>>(AFTER_USER + 7)?,
                        row.get::<_, Option<String>>(AFTER_USER + 8)?,
                    ))
                })
                .optional()?
        };
        let Some((
            user,
            kind,
            scopes,
            expires_at,
            audience,
            id,
            last_used_at,
            grant_id,
            client_id,
            conversation,
        )) = found
        else {
            return Ok(None);
        };
        if kind != claimed {
            return Ok(None);
        }
        self.note_token_use(now, id, last_used_at, grant_id.as_deref());
        let mut scopes = scopes_from_text(&scopes)?;
        scopes.retain(|scope| user.role.allows(*scope));
        Ok(Some(Principal {
            user,
            kind: kind.into(),
            scopes,
            expires_at: expires_at.unwrap_or(i64::MAX),
            audience,
            origin: Some(match (conversation, client_id) {
                (Some(conversation), _) => TokenOrigin::Conversation(conversation),
                (None, Some(client)) => TokenOrigin::OAuthClient(client),
                (None, None) => TokenOrigin::Token(id),
            }),
        }))
    }

    /// Revokes a token; `false` when it was unknown or already revoked.
    pub fn revoke_token(&self, secret: &str) -> Result<bool, StoreError> {
        let now = self.now();
        let connection = self.connection()?;
        let changed = connection.execute(
            "UPDATE tokens SET revoked_at = ?1 WHERE secret_sha256 = ?2 AND revoked_at IS NULL",
            (now, secrets::secret_sha256(secret)),
        )?;
        Ok(changed > 0)
    }
}
