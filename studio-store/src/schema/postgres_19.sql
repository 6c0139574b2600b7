-- Migration 19 on PostgreSQL (SQLite's is in schema.rs): the throttles'
-- cells, shared by every studio-core replica.
CREATE TABLE throttle_cells (
    key_sha256 TEXT COLLATE "C" PRIMARY KEY,
    tat_ms     BIGINT NOT NULL
);
CREATE INDEX throttle_cells_by_arrival ON throttle_cells(tat_ms);
