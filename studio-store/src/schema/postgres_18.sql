-- Migration 18 on PostgreSQL (SQLite's is REPLICAS_SQLITE in schema.rs): each
-- running studio-core records itself and says it is alive every few seconds;
-- a waiting approval names the replica whose turn waits for it.
CREATE TABLE core_replicas (
    id         TEXT COLLATE "C" PRIMARY KEY,
    started_at BIGINT NOT NULL,
    seen_at    BIGINT NOT NULL
);
CREATE INDEX core_replicas_by_seen ON core_replicas(seen_at);
ALTER TABLE assistant_approvals ADD COLUMN holder TEXT COLLATE "C";
