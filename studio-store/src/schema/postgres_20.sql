-- Migration 20 on PostgreSQL (SQLite's is in schema.rs, which says why): the
-- documents users upload, converted to Markdown; the primary key decides a
-- name, so two replicas storing `brief.md` at once cannot both take it.
CREATE TABLE uploads (
    user_id    TEXT COLLATE "C" NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name       TEXT COLLATE "C" NOT NULL,
    markdown   TEXT COLLATE "C" NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, name)
);
