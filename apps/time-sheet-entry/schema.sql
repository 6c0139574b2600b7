CREATE TABLE projects (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  retired_at DATE
);

CREATE TABLE entries (
  id INTEGER PRIMARY KEY,
  date DATE NOT NULL
    CONSTRAINT "date must be a calendar date written YYYY-MM-DD" CHECK (date IS date(date)),
  project INTEGER NOT NULL REFERENCES projects(id),
  hours REAL NOT NULL
    CONSTRAINT "hours must be between 0 and 24" CHECK (hours >= 0 AND hours <= 24),
  note TEXT,
  created_by TEXT NOT NULL
);

CREATE INDEX entries_by_owner_date ON entries (created_by, date);

CREATE INDEX entries_by_date ON entries (date);
