-- simplequeue schema v18 for PostgreSQL: priority aging. A queue's priority_aging_seconds (NULL:
-- off) raises a waiting item's effective priority by one per period. Each item carries a static
-- sort key, rank_priority: its priority, less the number of whole periods from the epoch to its
-- created_at when its queue ages priorities (sq_rank_priority, domain/aging.py), so that pops need
-- no re-sorting as time passes. bigint: with a period of a second, that count passes int4 in 2038.
-- Items already here keep their order: their rank is their priority.
ALTER TABLE sq_queues ADD COLUMN IF NOT EXISTS priority_aging_seconds integer CHECK (priority_aging_seconds >= 1);
ALTER TABLE sq_items ADD COLUMN IF NOT EXISTS rank_priority bigint NOT NULL DEFAULT 0;
UPDATE sq_items SET rank_priority = priority WHERE rank_priority <> priority;

-- Pop order within a queue: rank, then fair rank, then created_at, then insertion. The ready items
-- of one rank by fair rank are also where a push finds the queue's virtual time.
DROP INDEX IF EXISTS sq_items_ready;
CREATE INDEX IF NOT EXISTS sq_items_ready ON sq_items (queue, rank_priority DESC, fair_rank, created_at, seq)
    WHERE status = 'ready';

-- The fair ranks take the items' ranks rather than their priorities, and the planned push takes
-- the ranks: their old signatures go, functions.sql makes the new ones.
DROP FUNCTION IF EXISTS sq_fair_ranks(text[], text[], integer[], timestamptz);
DROP FUNCTION IF EXISTS sq_push_planned(uuid[], text[], text[], timestamptz[], integer[], text[], text[],
                                        double precision[], timestamptz[], boolean[], boolean, timestamptz, text[],
                                        text[], double precision[]);
