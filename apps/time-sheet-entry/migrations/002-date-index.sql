-- Managers read every member's entries (managersReadAll): their week is a
-- date range without an owner term.
CREATE INDEX entries_by_date ON entries (date);
