//! The core database's schema as an ordered list of migrations, and the code
//! that applies them.
//!
//! A migration is appended, never edited: a database records in
//! `schema_migrations` which versions it has, and a version that has run is
//! never run again. Applying happens in one `BEGIN IMMEDIATE` transaction, so two
//! processes opening the same file at once (studio-core and the operator CLI)
//! serialise instead of both creating tables. This module must not hold
//! anything but schema.

use rusqlite::{Connection, TransactionBehavior};

use super::StoreError;

/// One schema step: its version, a short name, and the SQL it runs.
struct Migration {
    version: i64,
    name: &'static str,
    sql: &'static str,
}

/// Every migration, in order. Versions are 1, 2, 3, … without gaps.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "identity and access",
        sql: r#"
CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    username      TEXT NOT NULL UNIQUE,
    role          TEXT NOT NULL CHECK (role IN ('admin', 'staff', 'member')),
    password_hash TEXT NOT NULL,
    created_at    INTEGER NOT NULL
) STRICT;

-- Browser sessions. Only sha256(secret) is stored: a copy of the database
-- does not let anyone sign in.
CREATE TABLE sessions (
    secret_sha256 TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX sessions_by_user ON sessions(user_id);
CREATE INDEX sessions_by_expiry ON sessions(expires_at);

-- Access tokens (MCP clients), API keys (system principals) and chat-session
-- tokens. `scopes` is the space-separated scope list exactly as minted.
CREATE TABLE tokens (
    id            INTEGER PRIMARY KEY,
    kind          TEXT NOT NULL CHECK (kind IN ('access', 'api-key', 'chat-session')),
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    scopes        TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL UNIQUE,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER,
    revoked_at    INTEGER
) STRICT;
CREATE INDEX tokens_by_user ON tokens(user_id);

-- Every app id ever discovered. A row is never deleted: its presence is what
-- makes a returning app id "not a first discovery".
CREATE TABLE app_registry (
    app_id              TEXT PRIMARY KEY,
    current_revision    TEXT NOT NULL,
    schema_hash         TEXT,
    actions_json        TEXT NOT NULL,
    first_discovered_at INTEGER NOT NULL,
    last_seen_at        INTEGER NOT NULL
) STRICT;

CREATE TABLE grants (
    app_id     TEXT NOT NULL REFERENCES app_registry(app_id),
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    access     TEXT NOT NULL CHECK (access IN ('use', 'manage')),
    granted_at INTEGER NOT NULL,
    granted_by TEXT NOT NULL,
    PRIMARY KEY (app_id, user_id)
) STRICT;
CREATE INDEX grants_by_user ON grants(user_id);

-- Who changed which grant or app source, and when. Append-only: the three
-- triggers refuse UPDATE, DELETE, and an INSERT that reuses an existing id
-- (INSERT OR REPLACE would otherwise delete the old row without firing a
-- delete trigger, because SQLite fires delete triggers for REPLACE only
-- when recursive_triggers is on). AUTOINCREMENT keeps ids from ever being
-- reused.
CREATE TABLE authorization_audit_log (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    actor   TEXT NOT NULL,
    action  TEXT NOT NULL,
    app_id  TEXT,
    subject TEXT,
    before  TEXT,
    after   TEXT
) STRICT;
CREATE INDEX authorization_audit_log_by_app ON authorization_audit_log(app_id, id);
CREATE TRIGGER authorization_audit_log_no_update
    BEFORE UPDATE ON authorization_audit_log
BEGIN
    SELECT RAISE(ABORT, 'authorization_audit_log is append-only');
END;
CREATE TRIGGER authorization_audit_log_no_delete
    BEFORE DELETE ON authorization_audit_log
BEGIN
    SELECT RAISE(ABORT, 'authorization_audit_log is append-only');
END;
CREATE TRIGGER authorization_audit_log_no_replace
    BEFORE INSERT ON authorization_audit_log
    WHEN NEW.id IS NOT NULL
        AND EXISTS (SELECT 1 FROM authorization_audit_log WHERE id = NEW.id)
BEGIN
    SELECT RAISE(ABORT, 'authorization_audit_log is append-only');
END;
"#,
    },
    Migration {
        version: 2,
        name: "confirmations",
        sql: r#"
-- Confirmation tokens for model-invoked writes (see store/confirmations.rs).
-- Only sha256(token) is stored. A row binds the token to one user, one tool,
-- the sha256 of the call's canonical arguments and the idempotency key the
-- confirmed write uses; rows past expires_at are useless and are deleted
-- whenever a new one is issued.
CREATE TABLE confirmations (
    token_sha256     TEXT PRIMARY KEY,
    user_id          TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    tool             TEXT NOT NULL,
    arguments_sha256 TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    redeemed_at      INTEGER
) STRICT;
CREATE INDEX confirmations_by_user ON confirmations(user_id, expires_at);
CREATE INDEX confirmations_by_expiry ON confirmations(expires_at);
"#,
    },
    Migration {
        version: 3,
        name: "suggestions",
        sql: r#"
-- Improvement suggestions from models (the MCP tool suggestImprovement; see
-- store/suggestions.rs), read by admins with `sasha admin suggestions`. The
-- text passed the shape checks in suggestions.rs before it got here. The
-- (user_id, created_at) index serves the per-user rolling cap, the
-- created_at index the newest-first listing.
CREATE TABLE suggestions (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    kind          TEXT NOT NULL CHECK (kind IN ('bug', 'docs', 'feature', 'friction')),
    severity      TEXT NOT NULL CHECK (severity IN ('low', 'medium', 'high')),
    summary       TEXT NOT NULL,
    detail        TEXT,
    metadata_json TEXT,
    created_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX suggestions_by_user ON suggestions(user_id, created_at);
CREATE INDEX suggestions_by_time ON suggestions(created_at);
"#,
    },
    Migration {
        version: 4,
        name: "oauth",
        sql: r#"
-- OAuth 2.1 for MCP clients (see store/oauth.rs). Secrets (client secrets,
-- codes, refresh and access tokens) are stored only as sha256.
CREATE TABLE oauth_clients (
    client_id     TEXT PRIMARY KEY,
    client_name   TEXT NOT NULL,
    -- JSON array of the registered redirect URIs.
    redirect_uris TEXT NOT NULL,
    auth_method   TEXT NOT NULL
        CHECK (auth_method IN ('none', 'client_secret_post', 'client_secret_basic')),
    secret_sha256 TEXT,
    created_at    INTEGER NOT NULL,
    -- The first consent; clients nobody consented to are pruned.
    consented_at  INTEGER
) STRICT;
CREATE INDEX oauth_clients_unconsented ON oauth_clients(consented_at, created_at);

-- A connection: one person's consent to one client, bound to one resource.
-- Revoking it ends every token issued under it.
CREATE TABLE oauth_grants (
    id             TEXT PRIMARY KEY,
    client_id      TEXT NOT NULL REFERENCES oauth_clients(client_id) ON DELETE CASCADE,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    scopes         TEXT NOT NULL,
    resource       TEXT NOT NULL,
    redirect_uri   TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    connected_at   INTEGER,
    last_used_at   INTEGER,
    revoked_at     INTEGER,
    revoked_reason TEXT
) STRICT;
CREATE INDEX oauth_grants_by_user ON oauth_grants(user_id, connected_at);
CREATE INDEX oauth_grants_by_client ON oauth_grants(client_id);

CREATE TABLE oauth_codes (
    code_sha256    TEXT PRIMARY KEY,
    grant_id       TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
    code_challenge TEXT NOT NULL,
    expires_at     INTEGER NOT NULL,
    used_at        INTEGER
) STRICT;
CREATE INDEX oauth_codes_by_grant ON oauth_codes(grant_id);

-- Spent refresh tokens stay until they expire, so their reuse is detected.
CREATE TABLE oauth_refresh_tokens (
    secret_sha256 TEXT PRIMARY KEY,
    grant_id      TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
    scopes        TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    used_at       INTEGER
) STRICT;
CREATE INDEX oauth_refresh_tokens_by_grant ON oauth_refresh_tokens(grant_id);

-- Access tokens issued under a connection name it and the resource (RFC 8707
-- audience) they are for; tokens minted by the operator have neither.
ALTER TABLE tokens ADD COLUMN grant_id TEXT REFERENCES oauth_grants(id) ON DELETE CASCADE;
ALTER TABLE tokens ADD COLUMN audience TEXT;
CREATE INDEX tokens_by_grant ON tokens(grant_id);
"#,
    },
    Migration {
        version: 5,
        name: "read policy",
        sql: r#"
-- Who may read each declared table of the last valid revision, as canonical
-- JSON {table: ownerField | null}: what the source tools compare a change
-- against, so a package made invalid first cannot hide the policy it had.
ALTER TABLE app_registry ADD COLUMN read_policy TEXT;
"#,
    },
    Migration {
        version: 6,
        name: "revision ledger",
        sql: r#"
-- The revision ledger (see store/ledger.rs): every revision of an app that
-- validated, with its files and its assembled resource, kept until the
-- retention policy removes it. File bytes and resources are stored once per
-- content hash; a revision only references them.
CREATE TABLE revision_blobs (
    sha256  TEXT PRIMARY KEY,
    content BLOB NOT NULL
) STRICT;

-- The assembled resource, addressed by its revision (sha256 over the MIME
-- type, the CSP, the canonical `_meta.ui` and the HTML).
CREATE TABLE revision_resources (
    revision  TEXT PRIMARY KEY,
    mime_type TEXT NOT NULL,
    csp       TEXT NOT NULL,
    meta_json TEXT NOT NULL,
    html      TEXT NOT NULL
) STRICT;

-- One row per revision of an app, written when it is first recorded: who
-- made it (a user id, or NULL for a change found on disk), when, through
-- which surface, and a one-line summary. The id orders revisions by
-- recording.
CREATE TABLE app_revisions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    app_id      TEXT NOT NULL REFERENCES app_registry(app_id),
    revision    TEXT NOT NULL REFERENCES revision_resources(revision),
    recorded_at INTEGER NOT NULL,
    user_id     TEXT,
    surface     TEXT NOT NULL CHECK (surface IN ('mcp', 'filesystem', 'seed', 'studio')),
    summary     TEXT NOT NULL,
    UNIQUE (app_id, revision)
) STRICT;
CREATE INDEX app_revisions_by_resource ON app_revisions(revision);

-- The files of a revision: package-relative path and the content hash.
CREATE TABLE app_revision_files (
    revision_id INTEGER NOT NULL REFERENCES app_revisions(id) ON DELETE CASCADE,
    path        TEXT NOT NULL,
    sha256      TEXT NOT NULL REFERENCES revision_blobs(sha256),
    size        INTEGER NOT NULL,
    PRIMARY KEY (revision_id, path)
) STRICT;
CREATE INDEX app_revision_files_by_blob ON app_revision_files(sha256);
"#,
    },
    Migration {
        version: 7,
        name: "app lifecycle",
        sql: r#"
-- Withdrawal and deletion (see store/lifecycle.rs). A withdrawn app is left
-- out of every caller's access and catalogue while its grants, data and
-- history stay; restoring clears withdrawn_at. Deleting a withdrawn app
-- removes its package (package_deleted_at) and, confirmed twice, its data
-- file (data_deleted_at); the row itself stays, so the id is never reused.
ALTER TABLE app_registry ADD COLUMN withdrawn_at INTEGER;
ALTER TABLE app_registry ADD COLUMN withdrawn_by TEXT;
ALTER TABLE app_registry ADD COLUMN package_deleted_at INTEGER;
ALTER TABLE app_registry ADD COLUMN data_deleted_at INTEGER;
"#,
    },
    Migration {
        version: 8,
        name: "drafts",
        sql: r#"
-- Drafts (see store/drafts.rs): one copy-on-write working set per app. Its
-- files name blobs of the revision ledger, so unchanged bytes are shared.
CREATE TABLE app_drafts (
    app_id        TEXT PRIMARY KEY REFERENCES app_registry(app_id),
    preview_id    TEXT NOT NULL UNIQUE,
    base_revision TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) STRICT;

CREATE TABLE app_draft_files (
    app_id TEXT NOT NULL REFERENCES app_drafts(app_id) ON DELETE CASCADE,
    path   TEXT NOT NULL,
    sha256 TEXT NOT NULL REFERENCES revision_blobs(sha256),
    size   INTEGER NOT NULL,
    PRIMARY KEY (app_id, path)
) STRICT;
CREATE INDEX app_draft_files_by_blob ON app_draft_files(sha256);
"#,
    },
    Migration {
        version: 9,
        name: "assistant conversations",
        sql: r#"
-- The Studio assistant's conversations (see store/assistant.rs), per user.
CREATE TABLE assistant_conversations (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    title      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
CREATE INDEX assistant_conversations_by_user ON assistant_conversations(user_id, updated_at);

-- Each message as the provider takes it (role, content, tool calls), with
-- what Studio shows of a tool's result; seq orders them.
CREATE TABLE assistant_messages (
    conversation_id TEXT NOT NULL REFERENCES assistant_conversations(id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    message_json    TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, seq)
) STRICT;
"#,
    },
    Migration {
        version: 10,
        name: "automation write consent",
        sql: r#"
-- The apps an operator-minted token may write as a script, recorded at mint
-- time (see Store::consent_writes): its writes there need no model
-- confirmation and are audited with source automation. Keyed by the token's
-- hash, so the credential alone finds its consent; gone with the token.
CREATE TABLE token_write_consents (
    token_sha256 TEXT NOT NULL REFERENCES tokens(secret_sha256) ON DELETE CASCADE,
    app_id       TEXT NOT NULL REFERENCES app_registry(app_id),
    granted_by   TEXT NOT NULL,
    granted_at   INTEGER NOT NULL,
    PRIMARY KEY (token_sha256, app_id)
) STRICT;
"#,
    },
    Migration {
        version: 11,
        name: "member apps",
        sql: r#"
-- Member apps (see store/member_apps.rs): apps any member deploys. Their
-- files are the revision ledger's (never under DOCS_ROOT); this row names the
-- author and the current revision. author_id NULL: no recorded author, so
-- nobody may change the app. A deleted or promoted row stays, so the id is
-- never reused and the caps count only live member apps.
CREATE TABLE member_apps (
    app_id      TEXT PRIMARY KEY REFERENCES app_registry(app_id),
    author_id   TEXT REFERENCES users(id),
    name        TEXT NOT NULL,
    revision    TEXT NOT NULL,
    size        INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    deleted_at  INTEGER,
    promoted_at INTEGER
) STRICT;
CREATE INDEX member_apps_by_author ON member_apps(author_id);

-- Instance settings an admin changes at run time (Studio's admin controls,
-- sasha admin), each change audited.
CREATE TABLE settings (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    changed_at INTEGER NOT NULL,
    changed_by TEXT NOT NULL
) STRICT;
"#,
    },
    Migration {
        version: 12,
        name: "people",
        sql: r#"
-- When each user last signed in (a browser session began), and whether an
-- admin disabled them (see store/people.rs).
ALTER TABLE users ADD COLUMN last_sign_in_at INTEGER;
ALTER TABLE users ADD COLUMN disabled_at INTEGER;
"#,
    },
    Migration {
        version: 13,
        name: "invitations and personal tokens",
        sql: r#"
-- One-time invitation links (see store/people.rs): only sha256(secret) is
-- stored, one live link per invited user. An invited user's password_hash
-- is '' until they accept, which no password verifies.
CREATE TABLE invitations (
    secret_sha256 TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL UNIQUE REFERENCES users(id) ON DELETE CASCADE,
    created_by    TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
) STRICT;

-- A person's own name for a token they made, and when it was last used (to
-- the minute: see Store::token).
ALTER TABLE tokens ADD COLUMN label TEXT;
ALTER TABLE tokens ADD COLUMN last_used_at INTEGER;
"#,
    },
    Migration {
        version: 14,
        name: "member app shares",
        sql: r#"
-- The user names each member app's author shared it with, as typed (see
-- store/member_apps.rs): what the author sees as the app's shares whether or
-- not an account holds the name, so sharing never tells a member which names
-- exist. A name an account holds is also that account's `use` grant. The
-- shares made so far are the member apps' `use` grants.
CREATE TABLE member_app_shares (
    app_id    TEXT NOT NULL REFERENCES member_apps(app_id),
    username  TEXT NOT NULL,
    shared_at INTEGER NOT NULL,
    PRIMARY KEY (app_id, username)
) STRICT;
INSERT INTO member_app_shares (app_id, username, shared_at)
SELECT g.app_id, u.username, g.granted_at
FROM grants g
JOIN users u ON u.id = g.user_id
JOIN member_apps m ON m.app_id = g.app_id
WHERE g.access = 'use';
"#,
    },
    Migration {
        version: 15,
        name: CASE_FOLDED_NAMES,
        sql: r#"
-- User names are compared without regard to case (see validate_username):
-- two that differ only by case cannot both exist. `migrate` refuses, naming
-- them, a database that already holds such a pair, before this runs.
CREATE UNIQUE INDEX users_by_folded_name ON users(username COLLATE NOCASE);

-- A one-time link either answers an invitation or resets an active
-- person's forgotten password, which an admin makes from Studio (see
-- store/people.rs); using a reset link ends the person's sessions, tokens
-- and MCP connections.
ALTER TABLE invitations ADD COLUMN purpose TEXT NOT NULL DEFAULT 'invitation'
    CHECK (purpose IN ('invitation', 'reset'));

-- The apps an invitation gives once it is accepted, each granted then by
-- the inviting admin and audited like any grant.
CREATE TABLE invitation_grants (
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    app_id     TEXT NOT NULL REFERENCES app_registry(app_id),
    access     TEXT NOT NULL CHECK (access IN ('use', 'manage')),
    granted_by TEXT NOT NULL,
    PRIMARY KEY (user_id, app_id)
) STRICT;
"#,
    },
    Migration {
        version: 16,
        name: "assistant approvals",
        sql: r#"
-- The Studio assistant's approvals (see store/approvals.rs): each change a
-- turn asks the person to approve, with the card the page shows, until it is
-- decided, lapses, is cancelled, or expires because Studio restarted. The id
-- is random and only ever decided by its own user, for its own conversation,
-- once (outcome goes from NULL to one value).
CREATE TABLE assistant_approvals (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    conversation_id TEXT NOT NULL REFERENCES assistant_conversations(id) ON DELETE CASCADE,
    call_id         TEXT NOT NULL,
    tool            TEXT NOT NULL,
    card_json       TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    decided_at      INTEGER,
    outcome         TEXT CHECK (outcome IN ('approved', 'declined', 'lapsed', 'cancelled', 'expired')),
    CHECK ((decided_at IS NULL) = (outcome IS NULL))
) STRICT;
CREATE INDEX assistant_approvals_waiting ON assistant_approvals(user_id, decided_at);
"#,
    },
    Migration {
        version: 17,
        name: "parked oauth requests",
        sql: r#"
-- OAuth authorization requests waiting for the person's Allow or Deny (see
-- store/oauth_requests.rs), in the database so that any studio-core replica
-- serves the consent page and its decision. The id is the consent page's
-- capability: only its sha256 is kept; taking a request deletes it.
CREATE TABLE oauth_requests (
    id_sha256      TEXT PRIMARY KEY,
    client_id      TEXT NOT NULL,
    client_name    TEXT NOT NULL,
    redirect_uri   TEXT NOT NULL,
    state          TEXT,
    code_challenge TEXT NOT NULL,
    scopes         TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL
) STRICT;
CREATE INDEX oauth_requests_by_expiry ON oauth_requests(expires_at);
"#,
    },
    Migration {
        version: 18,
        name: "studio-core replicas",
        sql: REPLICAS_SQLITE,
    },
    Migration {
        version: 19,
        name: "throttle cells",
        sql: r#"
-- The sign-in, registration and deploy throttles' cells (store/throttles.rs),
-- in the database so every studio-core replica spends one budget per key:
-- the sha256 of the key and its theoretical arrival time in milliseconds.
CREATE TABLE throttle_cells (
    key_sha256 TEXT PRIMARY KEY,
    tat_ms     INTEGER NOT NULL
) STRICT;
CREATE INDEX throttle_cells_by_arrival ON throttle_cells(tat_ms);
"#,
    },
    Migration {
        version: 20,
        name: "uploaded documents",
        sql: r#"
-- The documents users upload for the assistant, converted to Markdown
-- (store/uploads.rs; at most 5 MiB each, bounded by studio-uploads), in the
-- database so every studio-core replica reads what any of them stored, with
-- no shared disk. The primary key decides a name: of two uploads racing for
-- `brief.md`, one stores it and the other moves on to `brief-2.md`. A user's
-- documents go with the user.
CREATE TABLE uploads (
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    markdown   TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, name)
) STRICT;
"#,
    },
    Migration {
        version: 21,
        name: "app chat conversations",
        sql: r#"
-- App chat's conversations (store/app_chat.rs), in the database so a chat
-- continues on whichever studio-core replica its next turn lands: per user
-- and app, the kept messages as a JSON array of {role, content}. used_seq
-- orders every use (the least recently used goes first); last_used (unix
-- seconds) expires an idle one. Gone with the user; an app's are removed
-- when its package is deleted (its registry row stays).
CREATE TABLE app_chat_conversations (
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    app_id        TEXT NOT NULL REFERENCES app_registry(app_id),
    messages_json TEXT NOT NULL,
    last_used     INTEGER NOT NULL,
    used_seq      INTEGER NOT NULL UNIQUE,
    PRIMARY KEY (user_id, app_id)
) STRICT;
CREATE INDEX app_chat_conversations_by_app ON app_chat_conversations(app_id);
CREATE INDEX app_chat_conversations_by_use ON app_chat_conversations(last_used);
"#,
    },
    Migration {
        version: 22,
        name: "package heads",
        sql: r#"
-- The current files of every package under DOCS_ROOT/apps (store/package_heads.rs),
-- so studio-core replicas share packages without sharing a disk: a generation
-- that rises on every change, the digest of the file set ('' once removed),
-- and the files as the revision ledger's blobs.
CREATE TABLE package_heads (
    app_id     TEXT PRIMARY KEY,
    generation INTEGER NOT NULL CHECK (generation > 0),
    digest     TEXT NOT NULL,
    deleted    INTEGER NOT NULL CHECK (deleted IN (0, 1)),
    changed_at INTEGER NOT NULL
) STRICT;
CREATE TABLE package_head_files (
    app_id TEXT NOT NULL REFERENCES package_heads(app_id) ON DELETE CASCADE,
    path   TEXT NOT NULL,
    sha256 TEXT NOT NULL REFERENCES revision_blobs(sha256),
    size   INTEGER NOT NULL,
    PRIMARY KEY (app_id, path)
) STRICT;
CREATE INDEX package_head_files_by_blob ON package_head_files(sha256);
"#,
    },
    Migration {
        version: 23,
        name: "data-worker placement",
        sql: r#"
-- Where each app's data is served when several data-workers share the data
-- plane (store/placement.rs). Every time here is the database's own clock in
-- unix milliseconds, read inside the transaction that writes it.
--
-- A worker's lease: it may serve until lease_until_ms; past it, its apps may
-- be handed to another worker (only if it replicates to object storage).
CREATE TABLE data_workers (
    worker_id      TEXT PRIMARY KEY,
    url            TEXT NOT NULL,
    replicated     INTEGER NOT NULL CHECK (replicated IN (0, 1)),
    lease_until_ms INTEGER NOT NULL,
    renewed_at_ms  INTEGER NOT NULL,
    draining       INTEGER NOT NULL DEFAULT 0 CHECK (draining IN (0, 1))
) STRICT;

-- Each app's one owner and its epoch, the fencing token every data call
-- carries: it rises by one on every change of owner and never goes down
-- (the triggers refuse an update that lowers it or changes the owner
-- without raising it, and a delete or replace that would let it start
-- again). move_to is a planned move the owner is handing over for
-- (move_reason: an operator's move or a drain).
CREATE TABLE app_placements (
    app_id        TEXT PRIMARY KEY,
    worker_id     TEXT NOT NULL REFERENCES data_workers(worker_id),
    epoch         INTEGER NOT NULL CHECK (epoch > 0),
    move_to       TEXT REFERENCES data_workers(worker_id),
    move_reason   TEXT CHECK (move_reason IN ('move', 'drain')),
    changed_at_ms INTEGER NOT NULL,
    CHECK ((move_to IS NULL) = (move_reason IS NULL)),
    CHECK (move_to IS NULL OR move_to <> worker_id)
) STRICT;
CREATE INDEX app_placements_by_worker ON app_placements(worker_id, app_id);
CREATE INDEX app_placements_by_move ON app_placements(move_to);
CREATE TRIGGER app_placements_epoch_rises
    BEFORE UPDATE ON app_placements
    WHEN NEW.app_id <> OLD.app_id
        OR NEW.epoch < OLD.epoch
        OR (NEW.worker_id <> OLD.worker_id AND NEW.epoch <= OLD.epoch)
BEGIN
    SELECT RAISE(ABORT, 'an app''s epoch only rises, and rises with every change of owner');
END;
CREATE TRIGGER app_placements_no_delete
    BEFORE DELETE ON app_placements
BEGIN
    SELECT RAISE(ABORT, 'an app''s placement is never removed, so its epoch never starts again');
END;
CREATE TRIGGER app_placements_no_replace
    BEFORE INSERT ON app_placements
    WHEN EXISTS (SELECT 1 FROM app_placements WHERE app_id = NEW.app_id)
BEGIN
    SELECT RAISE(ABORT, 'an app''s placement is never removed, so its epoch never starts again');
END;

-- Every change of owner, append-only like authorization_audit_log (the
-- same three triggers). One row per (app, epoch): no epoch is given twice.
CREATE TABLE placement_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    app_id      TEXT NOT NULL,
    epoch       INTEGER NOT NULL CHECK (epoch > 0),
    from_worker TEXT,
    to_worker   TEXT NOT NULL,
    reason      TEXT NOT NULL CHECK (reason IN ('placed', 'failover', 'move', 'drain')),
    at_ms       INTEGER NOT NULL,
    UNIQUE (app_id, epoch)
) STRICT;
CREATE TRIGGER placement_events_no_update
    BEFORE UPDATE ON placement_events
BEGIN
    SELECT RAISE(ABORT, 'placement_events is append-only');
END;
CREATE TRIGGER placement_events_no_delete
    BEFORE DELETE ON placement_events
BEGIN
    SELECT RAISE(ABORT, 'placement_events is append-only');
END;
CREATE TRIGGER placement_events_no_replace
    BEFORE INSERT ON placement_events
    WHEN NEW.id IS NOT NULL
        AND EXISTS (SELECT 1 FROM placement_events WHERE id = NEW.id)
BEGIN
    SELECT RAISE(ABORT, 'placement_events is append-only');
END;
"#,
    },
    Migration {
        version: 24,
        name: "user sources",
        sql: r#"
-- Where each account comes from (store/lib.rs UserSource): made here with a
-- password ('password'), at a first sign-in through the organisation's
-- OpenID provider ('oidc'), or by its directory over SCIM ('scim'). Only a
-- 'password' account ever has a password; an empty password_hash means
-- "invited" only for those.
ALTER TABLE users ADD COLUMN source TEXT NOT NULL DEFAULT 'password'
    CHECK (source IN ('password', 'oidc', 'scim'));
"#,
    },
    Migration {
        version: 25,
        name: "sign-in through an OpenID provider",
        sql: r#"
-- A started sign-in through the organisation's OpenID provider
-- (store/sso.rs), until the provider sends the browser back: only the hashes
-- of the state and of the browser's attempt cookie are kept; used once
-- (used_at), for ten minutes.
CREATE TABLE sso_attempts (
    state_sha256   TEXT PRIMARY KEY,
    browser_sha256 TEXT NOT NULL,
    nonce          TEXT NOT NULL,
    pkce_verifier  TEXT NOT NULL,
    return_to      TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    used_at        INTEGER
) STRICT;
CREATE INDEX sso_attempts_by_creation ON sso_attempts(created_at);

-- Whom each provider subject is: one subject per person, removed with them.
CREATE TABLE sso_identities (
    issuer     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    user_id    TEXT NOT NULL UNIQUE REFERENCES users(id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (issuer, subject)
) STRICT;
"#,
    },
    Migration {
        version: 26,
        name: "SCIM provisioning",
        sql: r#"
-- SCIM 2.0 provisioning (store/scim.rs): the organisation's directory
-- creates, changes, deactivates and removes people (users.source = 'scim')
-- and the groups whose memberships give them their role.
--
-- The bearer tokens an admin mints for the provider. Only sha256 of the
-- secret is stored; a revoked token stays listed (revoked_at), and its
-- number names it in the audit log (actor 'scim-token:<id>').
CREATE TABLE scim_tokens (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    secret_sha256 TEXT NOT NULL UNIQUE,
    label         TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    revoked_at    INTEGER,
    last_used_at  INTEGER
) STRICT;

-- What the provider says of each person it provisioned; their SCIM id is
-- users.id. `active` is the provider's word; `held` is a Studio admin's
-- disable of the person, which the provider's changes never undo. A person
-- is enabled only while active, not held, and in a group that maps to a role.
CREATE TABLE scim_people (
    user_id      TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    external_id  TEXT UNIQUE,
    display_name TEXT,
    given_name   TEXT,
    family_name  TEXT,
    email        TEXT,
    active       INTEGER NOT NULL CHECK (active IN (0, 1)),
    held         INTEGER NOT NULL DEFAULT 0 CHECK (held IN (0, 1)),
    updated_at   INTEGER NOT NULL
) STRICT;

-- The provider's groups and who is in them. Names are unique whatever their
-- case, as user names are.
CREATE TABLE scim_groups (
    id           TEXT PRIMARY KEY,
    display_name TEXT NOT NULL,
    external_id  TEXT UNIQUE,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX scim_groups_by_folded_name ON scim_groups(display_name COLLATE NOCASE);
CREATE TABLE scim_members (
    group_id TEXT NOT NULL REFERENCES scim_groups(id) ON DELETE CASCADE,
    user_id  TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    PRIMARY KEY (group_id, user_id)
) STRICT;
CREATE INDEX scim_members_by_user ON scim_members(user_id);
"#,
    },
    Migration {
        version: 27,
        name: "token origins",
        sql: r#"
-- The Studio assistant's conversation an access token was minted for: the
-- data changes made through it are recorded as that conversation's, so they
-- can be found and undone together.
ALTER TABLE tokens ADD COLUMN conversation_id TEXT;
"#,
    },
];

/// Migration 18 on SQLite (see `schema/postgres_18.sql` for PostgreSQL's).
/// Each running studio-core records itself and says it is alive every few
/// seconds; a waiting approval names the replica whose turn waits for it, so
/// a click on any replica reaches that turn, and only a replica that stopped
/// answering has its cards ended.
const REPLICAS_SQLITE: &str = r#"
CREATE TABLE core_replicas (
    id         TEXT PRIMARY KEY,
    started_at INTEGER NOT NULL,
    seen_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX core_replicas_by_seen ON core_replicas(seen_at);
ALTER TABLE assistant_approvals ADD COLUMN holder TEXT;
"#;

/// The name of the migration that makes user names case-insensitive, before
/// which [`refuse_case_variant_names`] runs.
const CASE_FOLDED_NAMES: &str = "case-insensitive user names, reset links and invitation grants";

/// Refuses to go on while two user names differ only by case (a build
/// before migration 15 compared names as typed): the operator chooses which
/// account stays, so the message names every such group.
fn refuse_case_variant_names(transaction: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    let groups: Vec<String> = transaction
        .prepare(
            "SELECT group_concat(username, ' and ') FROM
                (SELECT username FROM users ORDER BY username)
             GROUP BY username COLLATE NOCASE HAVING count(*) > 1
             ORDER BY 1",
        )?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    if groups.is_empty() {
        return Ok(());
    }
    Err(StoreError::Database(format!(
        "the core database holds user names that differ only by case ({}); user names are now \
         the same whatever their case, so remove all but one of each (the previous build's \
         Users page), then start this one again",
        groups.join("; ")
    )))
}

/// The newest schema version this build knows.
pub(super) fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |migration| migration.version)
}

/// Brings the database up to [`latest_version`]. Idempotent; safe against a
/// concurrent opener. Refuses a database written by a newer build.
pub(super) fn migrate(connection: &mut Connection, now: i64) -> Result<(), StoreError> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    transaction.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    INTEGER PRIMARY KEY,
            name       TEXT NOT NULL,
            applied_at INTEGER NOT NULL
        ) STRICT;",
    )?;
    let current: i64 = transaction.query_row(
        "SELECT coalesce(max(version), 0) FROM schema_migrations",
        [],
        |row| row.get(0),
    )?;
    if current > latest_version() {
        return Err(StoreError::Database(format!(
            "the core database has schema version {current}, newer than this build's {}",
            latest_version()
        )));
    }
    for migration in MIGRATIONS.iter().filter(|m| m.version > current) {
        if migration.name == CASE_FOLDED_NAMES {
            refuse_case_variant_names(&transaction)?;
        }
        transaction.execute_batch(migration.sql)?;
        transaction.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
            (migration.version, migration.name, now),
        )?;
    }
    transaction.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database as a build that knew the first `known` migrations left it:
    /// each applied and recorded with `applied_at` = its version.
    fn database_at(known: usize) -> Connection {
        let connection = Connection::open_in_memory().unwrap();
        connection
            .pragma_update(None, "foreign_keys", "ON")
            .unwrap();
        connection
            .execute_batch(
                "CREATE TABLE schema_migrations (
                    version    INTEGER PRIMARY KEY,
                    name       TEXT NOT NULL,
                    applied_at INTEGER NOT NULL
                ) STRICT;",
            )
            .unwrap();
        for migration in &MIGRATIONS[..known] {
            connection.execute_batch(migration.sql).unwrap();
            connection
                .execute(
                    "INSERT INTO schema_migrations VALUES (?1, ?2, ?1)",
                    (migration.version, migration.name),
                )
                .unwrap();
        }
        connection
    }

    /// A database written by a build that knew only migration 1 gains the
    /// confirmations table and keeps its rows.
    #[test]
    fn a_version_one_database_is_upgraded_in_place() {
        let mut connection = database_at(1);
        connection
            .execute_batch("INSERT INTO users VALUES ('u1', 'alice', 'member', 'hash', 1);")
            .unwrap();
        migrate(&mut connection, 2).unwrap();
        let versions: Vec<(i64, i64)> = connection
            .prepare("SELECT version, applied_at FROM schema_migrations ORDER BY version")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            versions,
            [
                (1, 1),
                (2, 2),
                (3, 2),
                (4, 2),
                (5, 2),
                (6, 2),
                (7, 2),
                (8, 2),
                (9, 2),
                (10, 2),
                (11, 2),
                (12, 2),
                (13, 2),
                (14, 2),
                (15, 2),
                (16, 2),
                (17, 2),
                (18, 2),
                (19, 2),
                (20, 2),
                (21, 2),
                (22, 2),
                (23, 2),
                (24, 2),
                (25, 2),
                (26, 2),
                (27, 2)
            ]
        );
        let users: i64 = connection
            .query_row("SELECT count(*) FROM users", [], |row| row.get(0))
            .unwrap();
        assert_eq!(users, 1);
        connection
            .execute(
                "INSERT INTO confirmations
                 (token_sha256, user_id, tool, arguments_sha256, idempotency_key, created_at, expires_at)
                 VALUES ('t', 'u1', 'tool', 'a', 'k', 1, 2)",
                [],
            )
            .unwrap();
        migrate(&mut connection, 3).unwrap();
        assert_eq!(latest_version(), 27);
    }

    /// A database written by a build that knew migrations 1 and 2 gains the
    /// suggestions table (with its constraints and indexes) and keeps its rows.
    #[test]
    fn a_version_two_database_is_upgraded_in_place() {
        let mut connection = database_at(2);
        connection
            .execute_batch(
                "INSERT INTO users VALUES ('u1', 'alice', 'member', 'hash', 1);
                 INSERT INTO confirmations
                 (token_sha256, user_id, tool, arguments_sha256, idempotency_key, created_at, expires_at)
                 VALUES ('t', 'u1', 'tool', 'a', 'k', 1, 2);",
            )
            .unwrap();
        migrate(&mut connection, 3).unwrap();
        let versions: Vec<(i64, String, i64)> = connection
            .prepare("SELECT version, name, applied_at FROM schema_migrations ORDER BY version")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            versions,
            [
                (1, "identity and access".to_owned(), 1),
                (2, "confirmations".to_owned(), 2),
                (3, "suggestions".to_owned(), 3),
                (4, "oauth".to_owned(), 3),
                (5, "read policy".to_owned(), 3),
                (6, "revision ledger".to_owned(), 3),
                (7, "app lifecycle".to_owned(), 3),
                (8, "drafts".to_owned(), 3),
                (9, "assistant conversations".to_owned(), 3),
                (10, "automation write consent".to_owned(), 3),
                (11, "member apps".to_owned(), 3),
                (12, "people".to_owned(), 3),
                (13, "invitations and personal tokens".to_owned(), 3),
                (14, "member app shares".to_owned(), 3),
                (15, CASE_FOLDED_NAMES.to_owned(), 3),
                (16, "assistant approvals".to_owned(), 3),
                (17, "parked oauth requests".to_owned(), 3),
                (18, "studio-core replicas".to_owned(), 3),
                (19, "throttle cells".to_owned(), 3),
                (20, "uploaded documents".to_owned(), 3),
                (21, "app chat conversations".to_owned(), 3),
                (22, "package heads".to_owned(), 3),
                (23, "data-worker placement".to_owned(), 3),
                (24, "user sources".to_owned(), 3),
                (25, "sign-in through an OpenID provider".to_owned(), 3),
                (26, "SCIM provisioning".to_owned(), 3),
                (27, "token origins".to_owned(), 3),
            ]
        );
        let kept: (i64, i64) = connection
            .query_row(
                "SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM confirmations)",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .unwrap();
        assert_eq!(kept, (1, 1));

        let insert = "INSERT INTO suggestions
             (id, user_id, kind, severity, summary, detail, metadata_json, created_at)
             VALUES (?1, ?2, ?3, ?4, 'a summary', NULL, NULL, 3)";
        connection
            .execute(insert, ("s1", "u1", "bug", "high"))
            .unwrap();
        // The closed vocabularies and the user reference are enforced.
        for (case, row) in [
            ("kind", ("s2", "u1", "rant", "high")),
            ("severity", ("s3", "u1", "bug", "urgent")),
            ("user", ("s4", "nobody", "bug", "high")),
        ] {
            assert!(connection.execute(insert, row).is_err(), "{case}");
        }
        let indexes: Vec<String> = connection
            .prepare(
                "SELECT name FROM sqlite_master
                 WHERE type = 'index' AND tbl_name = 'suggestions' AND sql IS NOT NULL
                 ORDER BY name",
            )
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(indexes, ["suggestions_by_time", "suggestions_by_user"]);
        // A user's suggestions go with the user.
        connection
            .execute("DELETE FROM users WHERE id = 'u1'", [])
            .unwrap();
        let left: i64 = connection
            .query_row("SELECT count(*) FROM suggestions", [], |row| row.get(0))
            .unwrap();
        assert_eq!(left, 0);
        // Migrating again changes nothing.
        migrate(&mut connection, 4).unwrap();
        let newest: i64 = connection
            .query_row("SELECT max(version) FROM schema_migrations", [], |row| {
                row.get(0)
            })
            .unwrap();
        assert_eq!(newest, latest_version());
    }

    /// A database at version 3 gains the OAuth tables; its tokens keep
    /// working and have no connection and no audience.
    #[test]
    fn a_version_three_database_gains_oauth_in_place() {
        let mut connection = database_at(3);
        connection
            .execute_batch(
                "INSERT INTO users VALUES ('u1', 'alice', 'member', 'hash', 1);
                 INSERT INTO tokens (kind, user_id, scopes, secret_sha256, created_at)
                 VALUES ('access', 'u1', 'apps:invoke', 'h', 1);",
            )
            .unwrap();
        migrate(&mut connection, 4).unwrap();
        let token: (Option<String>, Option<String>) = connection
            .query_row("SELECT grant_id, audience FROM tokens", [], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .unwrap();
        assert_eq!(token, (None, None));
        // A token may only name an existing connection.
        let dangling = connection.execute(
            "INSERT INTO tokens (kind, user_id, scopes, secret_sha256, created_at, grant_id)
             VALUES ('access', 'u1', 'apps:invoke', 'h2', 1, 'nope')",
            [],
        );
        assert!(dangling.is_err());
    }

    /// A database at version 5 gains the revision ledger; its registry rows
    /// stay, and the ledger only references registered apps and stored
    /// content.
    #[test]
    fn a_version_five_database_gains_the_revision_ledger_in_place() {
        let mut connection = database_at(5);
        connection
            .execute_batch(
                "INSERT INTO app_registry
                 (app_id, current_revision, schema_hash, actions_json, first_discovered_at, last_seen_at)
                 VALUES ('hello', 'r1', NULL, '[]', 1, 1);",
            )
            .unwrap();
        migrate(&mut connection, 6).unwrap();
        let apps: i64 = connection
            .query_row("SELECT count(*) FROM app_registry", [], |row| row.get(0))
            .unwrap();
        assert_eq!(apps, 1);
        connection
            .execute_batch(
                "INSERT INTO revision_resources VALUES ('r1', 'text/html', 'csp', '{}', '<p>');
                 INSERT INTO revision_blobs VALUES ('b1', x'41');
                 INSERT INTO app_revisions (app_id, revision, recorded_at, user_id, surface, summary)
                 VALUES ('hello', 'r1', 1, NULL, 'filesystem', 'found on disk');
                 INSERT INTO app_revision_files VALUES (1, 'app.js', 'b1', 1);",
            )
            .unwrap();
        for (case, sql) in [
            (
                "unregistered app",
                "INSERT INTO app_revisions (app_id, revision, recorded_at, surface, summary)
                 VALUES ('nope', 'r1', 1, 'filesystem', 's')",
            ),
            (
                "unstored resource",
                "INSERT INTO app_revisions (app_id, revision, recorded_at, surface, summary)
                 VALUES ('hello', 'r2', 1, 'filesystem', 's')",
            ),
            (
                "unknown surface",
                "INSERT INTO app_revisions (app_id, revision, recorded_at, surface, summary)
                 VALUES ('hello', 'r1', 1, 'ftp', 's')",
            ),
            (
                "same revision twice",
                "INSERT INTO app_revisions (app_id, revision, recorded_at, surface, summary)
                 VALUES ('hello', 'r1', 2, 'mcp', 's')",
            ),
            (
                "unstored blob",
                "INSERT INTO app_revision_files VALUES (1, 'styles.css', 'b2', 1)",
            ),
            (
                "a referenced blob",
                "DELETE FROM revision_blobs WHERE sha256 = 'b1'",
            ),
        ] {
            assert!(connection.execute(sql, []).is_err(), "{case}");
        }
        // A revision's files go with it.
        connection
            .execute("DELETE FROM app_revisions WHERE id = 1", [])
            .unwrap();
        let files: i64 = connection
            .query_row("SELECT count(*) FROM app_revision_files", [], |row| {
                row.get(0)
            })
            .unwrap();
        assert_eq!(files, 0);
    }

    /// A database at version 6 gains the lifecycle columns; its apps are
    /// live (not withdrawn, nothing deleted).
    #[test]
    fn a_version_six_database_gains_the_lifecycle_in_place() {
        let mut connection = database_at(6);
        connection
            .execute_batch(
                "INSERT INTO app_registry
                 (app_id, current_revision, schema_hash, actions_json, first_discovered_at, last_seen_at)
                 VALUES ('hello', 'r1', NULL, '[]', 1, 1);",
            )
            .unwrap();
        migrate(&mut connection, 7).unwrap();
        let state: (Option<i64>, Option<String>, Option<i64>, Option<i64>) = connection
            .query_row(
                "SELECT withdrawn_at, withdrawn_by, package_deleted_at, data_deleted_at
                 FROM app_registry WHERE app_id = 'hello'",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )
            .unwrap();
        assert_eq!(state, (None, None, None, None));
    }

    /// A database at version 13 keeps every member app share as the name it
    /// was shared with; a catalogue app's `use` grant is no share.
    #[test]
    fn a_version_thirteen_database_names_its_member_app_shares() {
        let mut connection = database_at(13);
        connection
            .execute_batch(
                "INSERT INTO users (id, username, role, password_hash, created_at)
                 VALUES ('u1', 'mia', 'member', 'h', 1), ('u2', 'ola', 'member', 'h', 1);
                 INSERT INTO app_registry
                 (app_id, current_revision, schema_hash, actions_json, first_discovered_at, last_seen_at)
                 VALUES ('habits', 'r1', NULL, '[]', 1, 1), ('notes', 'r2', NULL, '[]', 1, 1);
                 INSERT INTO member_apps (app_id, author_id, name, revision, size, created_at, updated_at)
                 VALUES ('habits', 'u1', 'Habits', 'r1', 1, 1, 1);
                 INSERT INTO grants VALUES
                     ('habits', 'u1', 'manage', 1, 'system'),
                     ('habits', 'u2', 'use', 7, 'u1'),
                     ('notes', 'u2', 'use', 8, 'system');",
            )
            .unwrap();
        migrate(&mut connection, 14).unwrap();
        let shares: Vec<(String, String, i64)> = connection
            .prepare("SELECT app_id, username, shared_at FROM member_app_shares")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(shares, [("habits".to_owned(), "ola".to_owned(), 7)]);
    }

    /// A database whose names differ only by case is refused, naming them,
    /// and left as it was; once one is renamed, the names become
    /// case-insensitive and a case variant can no longer be added.
    #[test]
    fn names_differing_only_by_case_are_refused_before_they_fold() {
        let mut connection = database_at(14);
        connection
            .execute_batch(
                "INSERT INTO users (id, username, role, password_hash, created_at)
                 VALUES ('u1', 'Mia', 'member', 'h', 1), ('u2', 'mia', 'member', 'h', 1),
                        ('u3', 'ola', 'member', 'h', 1);",
            )
            .unwrap();
        let refused = migrate(&mut connection, 15).unwrap_err().to_string();
        assert!(refused.contains("Mia and mia"), "{refused}");
        assert!(!refused.contains("ola"), "{refused}");
        let newest: i64 = connection
            .query_row("SELECT max(version) FROM schema_migrations", [], |row| {
                row.get(0)
            })
            .unwrap();
        assert_eq!(newest, 14, "nothing was applied");

        connection
            .execute("UPDATE users SET username = 'mia.b' WHERE id = 'u2'", [])
            .unwrap();
        migrate(&mut connection, 16).unwrap();
        let variant = connection.execute(
            "INSERT INTO users (id, username, role, password_hash, created_at)
             VALUES ('u4', 'OLA', 'member', 'h', 1)",
            [],
        );
        assert!(variant.is_err(), "the folded name is unique");
        let purpose: String = connection
            .query_row(
                "SELECT dflt_value FROM pragma_table_info('invitations') WHERE name = 'purpose'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(purpose, "'invitation'", "existing links stay invitations");
    }

    #[test]
    fn versions_are_consecutive_from_one() {
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version, index as i64 + 1, "{}", migration.name);
        }
    }
}
