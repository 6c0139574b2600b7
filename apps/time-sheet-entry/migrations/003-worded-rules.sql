-- The rules the app's own form always kept, declared so every surface (MCP,
-- the recovery view, actions, imports) keeps them too: a DATE column takes
-- only calendar days, and hours stay within one day. SQLite adds a CHECK to
-- an existing column only by rebuilding the table: copy every row, unchanged,
-- into the new definition, drop the old table, take its name.
CREATE TABLE entries_new (
  id INTEGER PRIMARY KEY,
  date DATE NOT NULL
    CONSTRAINT "date must be a calendar date written YYYY-MM-DD" CHECK (date IS date(date)),
  project INTEGER NOT NULL REFERENCES projects(id),
  hours REAL NOT NULL
    CONSTRAINT "hours must be between 0 and 24" CHECK (hours >= 0 AND hours <= 24),
  note TEXT,
  created_by TEXT NOT NULL
);

INSERT INTO entries_new (id, date, project, hours, note, created_by)
  SELECT id, date, project, hours, note, created_by FROM entries;

DROP TABLE entries;

ALTER TABLE entries_new RENAME TO entries;

CREATE INDEX entries_by_owner_date ON entries (created_by, date);

CREATE INDEX entries_by_date ON entries (date);
