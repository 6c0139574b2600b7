CREATE TABLE projects (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE
);

CREATE TABLE entries (
  id INTEGER PRIMARY KEY,
  date TEXT NOT NULL,
  project INTEGER NOT NULL REFERENCES projects(id),
  hours REAL NOT NULL,
  note TEXT,
  created_by TEXT NOT NULL
);

CREATE INDEX entries_by_owner_date ON entries (created_by, date);

CREATE INDEX entries_by_date ON entries (date);
