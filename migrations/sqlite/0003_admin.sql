-- simplequeue schema v3 for SQLite: a queue can be paused (it takes pushes, hands out nothing).
ALTER TABLE sq_queues ADD COLUMN paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1));
