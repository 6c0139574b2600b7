ALTER TABLE expenses ADD COLUMN note TEXT;
CREATE INDEX expenses_by_day ON expenses (created_by, spent_on);
