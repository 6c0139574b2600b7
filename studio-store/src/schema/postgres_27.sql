-- Migration 27 on PostgreSQL (SQLite's is in schema.rs): the Studio
-- assistant's conversation an access token was minted for, so the data
-- changes made through it are recorded as that conversation's.
ALTER TABLE tokens ADD COLUMN conversation_id TEXT COLLATE "C";
