-- Migration 24 on PostgreSQL (SQLite's is in schema.rs): where each account
-- comes from (store/lib.rs UserSource). Only a 'password' account ever has a
-- password; an empty password_hash means "invited" only for those.
ALTER TABLE users ADD COLUMN source TEXT COLLATE "C" NOT NULL DEFAULT 'password'
    CHECK (source IN ('password', 'oidc', 'scim'));
