-- Migration 21 on PostgreSQL (SQLite's is in schema.rs): app chat's
-- conversations (store/app_chat.rs), per user and app, shared by every
-- studio-core replica. Gone with the user; an app's are removed when its
-- package is deleted (its registry row stays).
CREATE TABLE app_chat_conversations (
    user_id       TEXT COLLATE "C" NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    app_id        TEXT COLLATE "C" NOT NULL REFERENCES app_registry(app_id),
    messages_json TEXT COLLATE "C" NOT NULL,
    last_used     BIGINT NOT NULL,
    used_seq      BIGINT NOT NULL UNIQUE,
    PRIMARY KEY (user_id, app_id)
);
CREATE INDEX app_chat_conversations_by_app ON app_chat_conversations(app_id);
CREATE INDEX app_chat_conversations_by_use ON app_chat_conversations(last_used);
