-- Migration 25 on PostgreSQL (SQLite's is in schema.rs): signing in through
-- the organisation's OpenID provider (store/sso.rs), shared by every
-- studio-core replica.
--
-- A started sign-in, until the provider sends the browser back: only the
-- hashes of the state and of the browser's attempt cookie are kept; used
-- once (used_at), for ten minutes.
CREATE TABLE sso_attempts (
    state_sha256   TEXT COLLATE "C" PRIMARY KEY,
    browser_sha256 TEXT COLLATE "C" NOT NULL,
    nonce          TEXT COLLATE "C" NOT NULL,
    pkce_verifier  TEXT COLLATE "C" NOT NULL,
    return_to      TEXT COLLATE "C" NOT NULL,
    created_at     BIGINT NOT NULL,
    used_at        BIGINT
);
CREATE INDEX sso_attempts_by_creation ON sso_attempts(created_at);

-- Whom each provider subject is: one subject per person, removed with them.
CREATE TABLE sso_identities (
    issuer     TEXT COLLATE "C" NOT NULL,
    subject    TEXT COLLATE "C" NOT NULL,
    user_id    TEXT COLLATE "C" NOT NULL UNIQUE REFERENCES users(id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (issuer, subject)
);
