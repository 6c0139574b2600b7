-- Managers retire a project instead of deleting it: a retired project leaves
-- the picker for new hours, and every entry already logged against it keeps
-- its project (the row, its name and the reference stay). `retired_at` is the
-- day it was retired, NULL while the project is open. Its type DATE is the
-- platform's calendar-day kind: every write (the app, MCP, the recovery
-- view, imports) must be a real day written YYYY-MM-DD. (A CHECK cannot be
-- added to an existing table without rebuilding it, and `projects` is the
-- table `entries` refers to.)
ALTER TABLE projects ADD COLUMN retired_at DATE;
