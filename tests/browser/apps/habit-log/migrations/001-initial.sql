CREATE TABLE habits (
  id INTEGER PRIMARY KEY,
  title TEXT NOT NULL,
  created_by TEXT NOT NULL
);
