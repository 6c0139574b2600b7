-- Migration 22 on PostgreSQL (SQLite's is in schema.rs): the current files
-- of every package under DOCS_ROOT/apps, shared by every studio-core replica.
CREATE TABLE package_heads (
    app_id     TEXT COLLATE "C" PRIMARY KEY,
    generation BIGINT NOT NULL CHECK (generation > 0),
    digest     TEXT COLLATE "C" NOT NULL,
    deleted    BOOLEAN NOT NULL,
    changed_at BIGINT NOT NULL
);
CREATE TABLE package_head_files (
    app_id TEXT COLLATE "C" NOT NULL REFERENCES package_heads(app_id) ON DELETE CASCADE,
    path   TEXT COLLATE "C" NOT NULL,
    sha256 TEXT COLLATE "C" NOT NULL REFERENCES revision_blobs(sha256),
    size   BIGINT NOT NULL,
    PRIMARY KEY (app_id, path)
);
CREATE INDEX package_head_files_by_blob ON package_head_files(sha256);
