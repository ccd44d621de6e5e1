-- simplequeue schema v3 for PostgreSQL: a queue can be paused (it takes pushes, hands out nothing).
ALTER TABLE sq_queues ADD COLUMN IF NOT EXISTS paused boolean NOT NULL DEFAULT false;
