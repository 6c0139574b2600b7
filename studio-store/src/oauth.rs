//! OAuth 2.1 for MCP clients: registered clients, the consented connections
//! (grants), authorization codes, refresh tokens, and the access tokens they
//! mint into `tokens`.
//!
//! A *connection* (`oauth_grants`) is one person's consent to one client: the
//! scopes they chose, the MCP resource it is bound to, and whether it is still
//! alive. Everything issued under it — the authorization code, every access
//! token, every refresh token — names it, so revoking the connection (the
//! person in Studio, the client at `/oauth/revoke`, or reuse detection) ends
//! all of them at once: `token` refuses an access token whose connection is
//! revoked.
//!
//! Rules this module keeps:
//! - Secrets (codes, client secrets, refresh and access tokens) are stored
//!   only as sha256; each leaves the store once, in the call that made it.
//! - A code is good once. Any second use, and any failed exchange of a known
//!   code (wrong verifier, client, redirect or resource), revokes its
//!   connection: the code may have been stolen.
//! - A refresh token is good once; the exchange returns its successor. Using a
//!   spent one revokes the whole connection (RFC 9700 §4.14.2: the family).
//! - Scopes never widen: a refresh may narrow them, a connection's scopes are
//!   fixed at consent, and the user's role is applied again every time tokens
//!   are issued and every time a token is read.
//! - The table of clients cannot be filled by anonymous registration: clients
//!   nobody consented to expire after [`UNCONSENTED_CLIENT_TTL_SECONDS`] and at
//!   most [`MAX_UNCONSENTED_CLIENTS`] of them exist at once (the HTTP layer
//!   also budgets registrations per client address).

use std::collections::BTreeSet;

use crate::db::{DbError, OptionalExtension as _, Row, Sql, Tx};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::{
    AFTER_USER, MAX_SECRET_LEN, Scope, Store, StoreError, TokenKind, USER_COLUMNS, User, audit,
    scopes_from_text, scopes_to_text, secrets, user_from_row,
};

/// An OAuth access token lasts this long.
pub const OAUTH_ACCESS_TTL_SECONDS: i64 = 60 * 60;
/// A refresh token lasts this long unless it is used (and so replaced) first.
pub const OAUTH_REFRESH_TTL_SECONDS: i64 = 30 * 24 * 60 * 60;
/// An authorization code must be exchanged within this long.
pub const OAUTH_CODE_TTL_SECONDS: i64 = 5 * 60;
/// A registered client nobody has consented to is forgotten after this long.
pub const UNCONSENTED_CLIENT_TTL_SECONDS: i64 = 24 * 60 * 60;
/// At most this many registered clients nobody has consented to exist at once.
pub const MAX_UNCONSENTED_CLIENTS: i64 = 1_000;
/// At most this many clients exist at all.
pub const MAX_CLIENTS: i64 = 20_000;
/// At most this many redirect URIs of one user's connections to one client
/// are trusted for error redirects (loopback clients change port per run).
const MAX_TRUSTED_REDIRECTS: i64 = 100;
/// Prefix of refresh tokens.
pub const REFRESH_TOKEN_PREFIX: &str = "sasha_rt_";
/// Prefix of client secrets.
pub const CLIENT_SECRET_PREFIX: &str = "sasha_cs_";

/// Audit actions of OAuth connections.
pub mod oauth_action {
    /// A person consented: `subject` is the client id, `after` the scopes.
    pub const CONNECTED: &str = "oauth.connected";
    /// A connection ended: `subject` is the client id, `after` the reason.
    pub const REVOKED: &str = "oauth.revoked";
}

/// How a client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuthMethod {
    /// A public client (native apps, CLIs): PKCE is its proof.
    None,
    /// `client_secret` in the form body.
    SecretPost,
    /// HTTP Basic with the client id and secret.
    SecretBasic,
}

impl ClientAuthMethod {
    pub const ALL: [ClientAuthMethod; 3] = [
        ClientAuthMethod::None,
        ClientAuthMethod::SecretPost,
        ClientAuthMethod::SecretBasic,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuthMethod::None => "none",
            ClientAuthMethod::SecretPost => "client_secret_post",
            ClientAuthMethod::SecretBasic => "client_secret_basic",
        }
    }

    pub fn parse(text: &str) -> Option<ClientAuthMethod> {
        ClientAuthMethod::ALL
            .into_iter()
            .find(|method| method.as_str() == text)
    }
}

/// A registered client, without its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthClient {
    pub client_id: String,
    pub client_name: String,
    pub redirect_uris: Vec<String>,
    pub auth_method: ClientAuthMethod,
    /// Unix seconds.
    pub created_at: i64,
}

/// A client just registered, with the secret shown this once (confidential
/// clients only).
#[derive(Debug, Clone)]
pub struct RegisteredClient {
    pub client: OAuthClient,
    pub client_secret: Option<String>,
}

/// A consented authorization request, for [`Store::oauth_consent`].
#[derive(Debug, Clone)]
pub struct Consent<'a> {
    pub client_id: &'a str,
    pub user_id: &'a str,
    pub scopes: &'a BTreeSet<Scope>,
    /// The MCP resource the tokens are for.
    pub resource: &'a str,
    /// The redirect URI of the request, exactly as sent.
    pub redirect_uri: &'a str,
    /// The S256 code challenge.
    pub code_challenge: &'a str,
}

/// The proof a client brings to exchange a code.
#[derive(Debug, Clone)]
pub struct CodeExchange<'a> {
    pub client_id: &'a str,
    pub code: &'a str,
    pub redirect_uri: &'a str,
    pub code_verifier: &'a str,
    /// The `resource` parameter, when sent.
    pub resource: Option<&'a str>,
}

/// Tokens issued by an exchange or a refresh.
#[derive(Debug, Clone)]
pub struct IssuedTokens {
    pub access_token: String,
    pub refresh_token: String,
    pub scopes: BTreeSet<Scope>,
    pub expires_in: i64,
}

/// Why the token endpoint refuses, in OAuth's own terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OAuthRefusal {
    /// The code or refresh token is unknown, expired, spent, revoked, or was
    /// not issued to this client for this redirect with this verifier.
    InvalidGrant(&'static str),
    /// A scope outside what the grant holds (never widened).
    InvalidScope(String),
    /// The `resource` is not the one the grant is bound to.
    InvalidTarget,
    /// Registration refused: too many clients.
    TooManyClients,
}

/// One of a user's connected clients, for Studio.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    pub id: String,
    pub client_id: String,
    pub client_name: String,
    /// The redirect URI consent was given for.
    pub redirect_uri: String,
    pub scopes: Vec<String>,
    pub resource: String,
    /// Unix seconds of the first code exchange.
    pub connected_at: i64,
    /// Unix seconds of the latest token issue (exchange or refresh).
    pub last_used_at: i64,
}

/// Whether `verifier` is an RFC 7636 code verifier whose S256 challenge is
/// `challenge`.
pub fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    well_formed && URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) == challenge
}

/// Whether `challenge` has the shape of an S256 code challenge (43 base64url
/// characters).
pub fn valid_code_challenge(challenge: &str) -> bool {
    challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

fn redirect_uris_from_text(text: &str) -> Result<Vec<String>, StoreError> {
    serde_json::from_str(text)
        .map_err(|error| StoreError::Database(format!("stored redirect URIs: {error}")))
}

fn client_from_row(row: &Row<'_>) -> Result<(OAuthClient, String), DbError> {
    let method: String = row.get(3)?;
    Ok((
        OAuthClient {
            client_id: row.get(0)?,
            client_name: row.get(1)?,
            redirect_uris: Vec::new(),
            auth_method: ClientAuthMethod::parse(&method).unwrap_or(ClientAuthMethod::None),
            created_at: row.get(4)?,
        },
        row.get(2)?,
    ))
}

/// A presented code or refresh token, with the connection it belongs to.
struct Presented {
    grant_id: String,
    /// The code challenge of a code, the scopes of a refresh token.
    detail: String,
    expires_at: i64,
    used_at: Option<i64>,
    client_id: String,
    redirect_uri: String,
    resource: String,
    user_id: String,
}

/// Looks up a presented secret with `sql`, which selects the columns of
/// [`Presented`] in order for the secret's sha256 (`?1`).
fn presented(
    transaction: &Tx<'_>,
    sql: &str,
    secret: &str,
) -> Result<Option<Presented>, StoreError> {
    let found = transaction
        .query_row(sql, [secrets::secret_sha256(secret)], |row| {
            Ok(Presented {
                grant_id: row.get(0)?,
                detail: row.get(1)?,
                expires_at: row.get(2)?,
                used_at: row.get(3)?,
                client_id: row.get(4)?,
                redirect_uri: row.get(5)?,
                resource: row.get(6)?,
                user_id: row.get(7)?,
            })
        })
        .optional()?;
    Ok(found)
}

/// Revokes a connection inside the caller's transaction, with its audit row.
/// `false` when it was already revoked.
fn revoke_grant(
    transaction: &Tx<'_>,
    now: i64,
    grant_id: &str,
    actor: &str,
    reason: &str,
) -> Result<bool, StoreError> {
    let client: Option<String> = transaction
        .query_row(
            "UPDATE oauth_grants SET revoked_at = ?1, revoked_reason = ?2
             WHERE id = ?3 AND revoked_at IS NULL RETURNING client_id",
            (now, reason, grant_id),
            |row| row.get(0),
        )
        .optional()?;
    let Some(client) = client else {
        return Ok(false);
    };
    // The access tokens die with the connection through `token`'s join; the
    // refresh tokens are deleted so a spent one cannot be told from a revoked
    // one by timing.
    transaction.execute(
        "DELETE FROM oauth_refresh_tokens WHERE grant_id = ?1",
        [grant_id],
    )?;
    transaction.execute("DELETE FROM oauth_codes WHERE grant_id = ?1", [grant_id])?;
    audit(
        transaction,
        now,
        actor,
        oauth_action::REVOKED,
        None,
        Some(&client),
        None,
        Some(reason),
    )?;
    Ok(true)
}

impl Store {
    /// Registers a client. Forgets clients nobody consented to within a day,
    /// and refuses when too many unconsented (or any) clients exist.
    pub fn oauth_register_client(
        &self,
        client_name: &str,
        redirect_uris: &[String],
        auth_method: ClientAuthMethod,
    ) -> Result<Result<RegisteredClient, OAuthRefusal>, StoreError> {
        let now = self.now();
        let redirect_text = serde_json::to_string(redirect_uris)
            .map_err(|error| StoreError::Database(error.to_string()))?;
        let secret = (auth_method != ClientAuthMethod::None)
            .then(|| format!("{CLIENT_SECRET_PREFIX}{}", secrets::random_secret()));
        let client = OAuthClient {
            client_id: format!("sasha_client_{}", secrets::random_secret()),
            client_name: client_name.to_owned(),
            redirect_uris: redirect_uris.to_vec(),
            auth_method,
            created_at: now,
        };
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        transaction.execute(
            "DELETE FROM oauth_clients WHERE consented_at IS NULL AND created_at <= ?1",
            [now.saturating_sub(UNCONSENTED_CLIENT_TTL_SECONDS)],
        )?;
        let (unconsented, total): (i64, i64) = transaction.query_row(
            "SELECT count(*) FILTER (WHERE consented_at IS NULL), count(*) FROM oauth_clients",
            (),
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        if unconsented >= MAX_UNCONSENTED_CLIENTS || total >= MAX_CLIENTS {
            return Ok(Err(OAuthRefusal::TooManyClients));
        }
        transaction.execute(
            "INSERT INTO oauth_clients
                 (client_id, client_name, redirect_uris, auth_method, secret_sha256, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            (
                &client.client_id,
                &client.client_name,
                &redirect_text,
                auth_method.as_str(),
                secret.as_deref().map(secrets::secret_sha256),
                now,
            ),
        )?;
        transaction.commit()?;
        Ok(Ok(RegisteredClient {
            client,
            client_secret: secret,
        }))
    }

    /// The registered client `client_id`.
    pub fn oauth_client(&self, client_id: &str) -> Result<Option<OAuthClient>, StoreError> {
        if client_id.len() > MAX_SECRET_LEN {
            return Ok(None);
        }
        let connection = self.connection()?;
        let found = connection
            .query_row(
                "SELECT client_id, client_name, redirect_uris, auth_method, created_at
                 FROM oauth_clients WHERE client_id = ?1",
                [client_id],
                client_from_row,
            )
            .optional()?;
        found
            .map(|(mut client, uris)| {
                client.redirect_uris = redirect_uris_from_text(&uris)?;
                Ok(client)
            })
            .transpose()
    }

    /// Whether `secret` is the client secret of `client_id`. A public client
    /// has none, so this is `false` for it.
    pub fn oauth_client_secret_matches(
        &self,
        client_id: &str,
        secret: &str,
    ) -> Result<bool, StoreError> {
        if secret.len() > MAX_SECRET_LEN {
            return Ok(false);
        }
        let connection = self.connection()?;
        let found: Option<()> = connection
            .query_row(
                "SELECT 1 FROM oauth_clients WHERE client_id = ?1 AND secret_sha256 = ?2",
                (client_id, secrets::secret_sha256(secret)),
                |_| Ok(()),
            )
            .optional()?;
        Ok(found.is_some())
    }

    /// Records a person's consent: a new connection and its authorization
    /// code (returned; only its sha256 is stored). The user's role must allow
    /// every scope.
    pub fn oauth_consent(&self, consent: &Consent<'_>) -> Result<String, StoreError> {
        if consent.scopes.is_empty() {
            return Err(StoreError::NoScopes);
        }
        let user = self.user(consent.user_id)?.ok_or(StoreError::UnknownUser)?;
        if let Some(scope) = consent.scopes.iter().find(|s| !user.role.allows(**s)) {
            return Err(StoreError::ScopeNotAllowed {
                scope: *scope,
                role: user.role,
            });
        }
        let now = self.now();
        let code = secrets::random_secret();
        let grant_id = uuid::Uuid::now_v7().to_string();
        let scopes = scopes_to_text(consent.scopes);
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        // Housekeeping: consents whose code was never exchanged, and spent or
        // expired codes.
        transaction.execute(
            "DELETE FROM oauth_grants WHERE connected_at IS NULL AND created_at <= ?1",
            [now.saturating_sub(OAUTH_CODE_TTL_SECONDS)],
        )?;
        transaction.execute("DELETE FROM oauth_codes WHERE expires_at <= ?1", [now])?;
        transaction.execute(
            "DELETE FROM oauth_refresh_tokens WHERE expires_at <= ?1",
            [now],
        )?;
        transaction.execute(
            "DELETE FROM tokens WHERE grant_id IS NOT NULL AND expires_at <= ?1",
            [now],
        )?;
        let client_exists = transaction.execute(
            "UPDATE oauth_clients SET consented_at = coalesce(consented_at, ?1)
                 WHERE client_id = ?2",
            (now, consent.client_id),
        )? > 0;
        if !client_exists {
            return Err(StoreError::Database("the client is gone".into()));
        }
        transaction.execute(
            "INSERT INTO oauth_grants (id, client_id, user_id, scopes, resource, redirect_uri, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            (
                &grant_id,
                consent.client_id,
                consent.user_id,
                &scopes,
                consent.resource,
                consent.redirect_uri,
                now,
            ),
        )?;
        transaction.execute(
            "INSERT INTO oauth_codes (code_sha256, grant_id, code_challenge, expires_at)
             VALUES (?1, ?2, ?3, ?4)",
            (
                secrets::secret_sha256(&code),
                &grant_id,
                consent.code_challenge,
                now.saturating_add(OAUTH_CODE_TTL_SECONDS),
            ),
        )?;
        audit(
            &transaction,
            now,
            consent.user_id,
            oauth_action::CONNECTED,
            None,
            Some(consent.client_id),
            None,
            Some(&scopes),
        )?;
        transaction.commit()?;
        Ok(code)
    }

    /// Exchanges an authorization code for the first tokens of its
    /// connection. A code is spent by its first exchange attempt; a failed or
    /// repeated one revokes the connection.
    pub fn oauth_exchange_code(
        &self,
        exchange: &CodeExchange<'_>,
    ) -> Result<Result<IssuedTokens, OAuthRefusal>, StoreError> {
        if exchange.code.len() > MAX_SECRET_LEN {
            return Ok(Err(OAuthRefusal::InvalidGrant("the code is not valid")));
        }
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let found = presented(
            &transaction,
            "SELECT c.grant_id, c.code_challenge, c.expires_at, c.used_at,
                    g.client_id, g.redirect_uri, g.resource, g.user_id
             FROM oauth_codes c JOIN oauth_grants g ON g.id = c.grant_id
             WHERE c.code_sha256 = ?1 AND g.revoked_at IS NULL",
            exchange.code,
        )?;
        let Some(Presented {
            grant_id,
            detail: challenge,
            expires_at,
            used_at,
            client_id,
            redirect_uri: redirect,
            resource,
            user_id,
        }) = found
        else {
            return Ok(Err(OAuthRefusal::InvalidGrant("the code is not valid")));
        };
        let refusal = if used_at.is_some() {
            Some(OAuthRefusal::InvalidGrant(
                "the code was already used; the connection is revoked",
            ))
        } else if expires_at <= now {
            Some(OAuthRefusal::InvalidGrant("the code has expired"))
        } else if client_id != exchange.client_id {
            Some(OAuthRefusal::InvalidGrant(
                "the code was issued to another client",
            ))
        } else if redirect != exchange.redirect_uri {
            Some(OAuthRefusal::InvalidGrant(
                "redirect_uri differs from the authorization request",
            ))
        } else if !pkce_matches(exchange.code_verifier, &challenge) {
            Some(OAuthRefusal::InvalidGrant(
                "code_verifier does not match the code challenge",
            ))
        } else if exchange.resource.is_some_and(|sent| sent != resource) {
            Some(OAuthRefusal::InvalidTarget)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            let reason = match &refusal {
                OAuthRefusal::InvalidGrant(reason) => *reason,
                _ => "the code was presented for another resource",
            };
            revoke_grant(&transaction, now, &grant_id, &user_id, reason)?;
            transaction.commit()?;
            return Ok(Err(refusal));
        }
        transaction.execute(
            "UPDATE oauth_codes SET used_at = ?1 WHERE code_sha256 = ?2",
            (now, secrets::secret_sha256(exchange.code)),
        )?;
        let issued = issue_tokens(&transaction, now, &grant_id, None)?;
        transaction.commit()?;
        Ok(issued)
    }

    /// Exchanges a refresh token for a new pair. `scope` may narrow the
    /// scopes, never widen them; a spent token revokes the connection.
    pub fn oauth_refresh(
        &self,
        client_id: &str,
        refresh_token: &str,
        scope: Option<&BTreeSet<Scope>>,
        resource: Option<&str>,
    ) -> Result<Result<IssuedTokens, OAuthRefusal>, StoreError> {
        let invalid = || {
            Ok(Err(OAuthRefusal::InvalidGrant(
                "the refresh token is not valid",
            )))
        };
        if refresh_token.len() > MAX_SECRET_LEN || !refresh_token.starts_with(REFRESH_TOKEN_PREFIX)
        {
            return invalid();
        }
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let found = presented(
            &transaction,
            "SELECT r.grant_id, r.scopes, r.expires_at, r.used_at,
                    g.client_id, g.redirect_uri, g.resource, g.user_id
             FROM oauth_refresh_tokens r JOIN oauth_grants g ON g.id = r.grant_id
             WHERE r.secret_sha256 = ?1 AND g.revoked_at IS NULL",
            refresh_token,
        )?;
        let Some(Presented {
            grant_id,
            detail: held,
            expires_at,
            used_at,
            client_id: owner,
            resource: bound_resource,
            user_id,
            ..
        }) = found
        else {
            return invalid();
        };
        if used_at.is_some() || owner != client_id {
            let reason = if used_at.is_some() {
                "a spent refresh token was presented again"
            } else {
                "the refresh token was presented by another client"
            };
            revoke_grant(&transaction, now, &grant_id, &user_id, reason)?;
            transaction.commit()?;
            return Ok(Err(OAuthRefusal::InvalidGrant(
                "the refresh token was already used; the connection is revoked",
            )));
        }
        if expires_at <= now {
            return invalid();
        }
        if resource.is_some_and(|sent| sent != bound_resource) {
            return Ok(Err(OAuthRefusal::InvalidTarget));
        }
        let held = scopes_from_text(&held)?;
        if let Some(asked) = scope
            && let Some(extra) = asked.iter().find(|s| !held.contains(s))
        {
            return Ok(Err(OAuthRefusal::InvalidScope(format!(
                "{extra} was not granted to this connection; a new consent is needed to add it"
            ))));
        }
        transaction.execute(
            "UPDATE oauth_refresh_tokens SET used_at = ?1 WHERE secret_sha256 = ?2",
            (now, secrets::secret_sha256(refresh_token)),
        )?;
        let issued = issue_tokens(&transaction, now, &grant_id, Some(scope.unwrap_or(&held)))?;
        transaction.commit()?;
        Ok(issued)
    }

    /// RFC 7009 revocation by the client: a refresh token ends its whole
    /// connection, an access token only itself. Tokens of other clients, and
    /// unknown ones, are ignored (the endpoint answers 200 either way).
    pub fn oauth_revoke_token(&self, client_id: &str, token: &str) -> Result<(), StoreError> {
        if token.len() > MAX_SECRET_LEN {
            return Ok(());
        }
        let now = self.now();
        let hash = secrets::secret_sha256(token);
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let refresh_grant: Option<(String, String)> = transaction
            .query_row(
                "SELECT g.id, g.user_id FROM oauth_refresh_tokens r
                 JOIN oauth_grants g ON g.id = r.grant_id
                 WHERE r.secret_sha256 = ?1 AND g.client_id = ?2",
                (&hash, client_id),
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        if let Some((grant_id, user_id)) = refresh_grant {
            revoke_grant(
                &transaction,
                now,
                &grant_id,
                &user_id,
                "the client revoked its refresh token",
            )?;
        } else {
            transaction.execute(
                "UPDATE tokens SET revoked_at = ?1
                 WHERE secret_sha256 = ?2 AND revoked_at IS NULL AND grant_id IN
                     (SELECT id FROM oauth_grants WHERE client_id = ?3)",
                (now, &hash, client_id),
            )?;
        }
        transaction.commit()?;
        Ok(())
    }

    /// The user's live connections, newest first.
    pub fn oauth_connections(&self, user_id: &str) -> Result<Vec<Connection>, StoreError> {
        let connection = self.connection()?;
        let mut statement = connection.prepare(
            "SELECT g.id, g.client_id, c.client_name, g.redirect_uri, g.scopes, g.resource,
                    g.connected_at, g.last_used_at
             FROM oauth_grants g JOIN oauth_clients c ON c.client_id = g.client_id
             WHERE g.user_id = ?1 AND g.revoked_at IS NULL AND g.connected_at IS NOT NULL
             ORDER BY g.connected_at DESC, g.id DESC",
        )?;
        let rows = statement.query_map([user_id], |row| {
            Ok((
                Connection {
                    id: row.get(0)?,
                    client_id: row.get(1)?,
                    client_name: row.get(2)?,
                    redirect_uri: row.get(3)?,
                    scopes: Vec::new(),
                    resource: row.get(5)?,
                    connected_at: row.get(6)?,
                    last_used_at: row.get(7)?,
                },
                row.get::<_, String>(4)?,
            ))
        })?;
        rows.map(|row| {
            let (mut connection, scopes) = row?;
            connection.scopes = scopes_from_text(&scopes)?
                .iter()
                .map(|scope| scope.as_str().to_owned())
                .collect();
            Ok(connection)
        })
        .collect()
    }

    /// The redirect URIs of the user's live connections to `client_id`
    /// (consented, code exchanged, not revoked: what the connections page
    /// lists), at most 100 of them, newest first. The
    /// authorization endpoint sends this user's errors back automatically only
    /// to these (RFC 9700 §4.11.2).
    pub fn oauth_connected_redirect_uris(
        &self,
        user_id: &str,
        client_id: &str,
    ) -> Result<Vec<String>, StoreError> {
        if client_id.len() > MAX_SECRET_LEN {
            return Ok(Vec::new());
        }
        let connection = self.connection()?;
        let mut statement = connection.prepare(
            "SELECT redirect_uri FROM oauth_grants
             WHERE user_id = ?1 AND client_id = ?2
               AND revoked_at IS NULL AND connected_at IS NOT NULL
             GROUP BY redirect_uri ORDER BY max(connected_at) DESC LIMIT ?3",
        )?;
        let rows = statement.query_map((user_id, client_id, MAX_TRUSTED_REDIRECTS), |row| {
            row.get::<_, String>(0)
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Revokes one of the user's connections, audited as `actor` (the user in
    /// Studio, or the operator); `false` when it is not theirs, unknown or
    /// already revoked.
    pub fn oauth_revoke_connection(
        &self,
        user_id: &str,
        id: &str,
        actor: &str,
    ) -> Result<bool, StoreError> {
        let now = self.now();
        let mut connection = self.connection()?;
        let transaction = connection.write_transaction()?;
        let owned = transaction
            .query_row(
                "SELECT 1 FROM oauth_grants WHERE id = ?1 AND user_id = ?2",
                (id, user_id),
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        let reason = if actor == user_id {
            "revoked in Studio"
        } else {
            "revoked by the operator"
        };
        let revoked = owned && revoke_grant(&transaction, now, id, actor, reason)?;
        transaction.commit()?;
        Ok(revoked)
    }
}

/// Mints an access token and a refresh token for a live connection, inside
/// the caller's transaction. `scopes` (already checked to be within the
/// connection's) defaults to the connection's; the user's role is applied
/// again, so a demoted user's new tokens lose what the role no longer allows.
fn issue_tokens(
    transaction: &Tx<'_>,
    now: i64,
    grant_id: &str,
    scopes: Option<&BTreeSet<Scope>>,
) -> Result<Result<IssuedTokens, OAuthRefusal>, StoreError> {
    let (user, granted, resource): (User, String, String) = transaction.query_row(
        &format!(
            "SELECT {USER_COLUMNS}, g.scopes, g.resource FROM oauth_grants g
             JOIN users u ON u.id = g.user_id WHERE g.id = ?1"
        ),
        [grant_id],
        |row| {
            Ok((
                user_from_row(row)?,
                row.get(AFTER_USER)?,
                row.get(AFTER_USER + 1)?,
            ))
        },
    )?;
    let mut scopes = match scopes {
        Some(scopes) => scopes.clone(),
        None => scopes_from_text(&granted)?,
    };
    scopes.retain(|scope| user.role.allows(*scope));
    if scopes.is_empty() {
        return Ok(Err(OAuthRefusal::InvalidScope(
            "no scope of this connection is allowed for the user's role any more".into(),
        )));
    }
    let text = scopes_to_text(&scopes);
    let access = format!("{}{}", TokenKind::Access.prefix(), secrets::random_secret());
    let refresh = format!("{REFRESH_TOKEN_PREFIX}{}", secrets::random_secret());
    transaction.execute(
        "INSERT INTO tokens (kind, user_id, scopes, secret_sha256, created_at, expires_at, grant_id, audience)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        (
            TokenKind::Access,
            &user.id,
            &text,
            secrets::secret_sha256(&access),
            now,
            now.saturating_add(OAUTH_ACCESS_TTL_SECONDS),
            grant_id,
            &resource,
        ),
    )?;
    transaction.execute(
        "INSERT INTO oauth_refresh_tokens (secret_sha256, grant_id, scopes, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        (
            secrets::secret_sha256(&refresh),
            grant_id,
            &text,
            now,
            now.saturating_add(OAUTH_REFRESH_TTL_SECONDS),
        ),
    )?;
    // Expired access tokens of OAuth connections are useless: drop them.
    transaction.execute(
        "DELETE FROM tokens WHERE grant_id = ?1 AND expires_at <= ?2",
        (grant_id, now),
    )?;
    transaction.execute(
        "UPDATE oauth_grants SET connected_at = coalesce(connected_at, ?1), last_used_at = ?1
         WHERE id = ?2",
        (now, grant_id),
    )?;
    Ok(Ok(IssuedTokens {
        access_token: access,
        refresh_token: refresh,
        scopes,
        expires_in: OAUTH_ACCESS_TTL_SECONDS,
    }))
}
