-- simplequeue schema v8 for SQLite: the pop walks ready items only.
-- sq_items_pop held every live item, so each claim walked past the leases in flight ahead of the
-- first ready one, and every lease changed its entry. The pop now takes ready items from
-- sq_items_ready (which a lease leaves) and leases that ran out from sq_items_lapsed, a range of
-- their queue's leases by expiry cut off at now, and merges the two in pop order. The other
-- readers of live items (stats, peek, expiry) read sq_items_visible, whose rows are the same.
DROP INDEX IF EXISTS sq_items_pop;

-- Pop order within a queue: priority, then created_at, then insertion. Ready items only; delayed
-- and retrying ones are here too (ready, visible later), as they were in sq_items_pop.
CREATE INDEX IF NOT EXISTS sq_items_ready ON sq_items (queue, priority DESC, created_at, seq)
    WHERE status = 'ready';

-- A queue's leases by when they run out: the pop reads those that ran out (visible_at <= now),
-- never the leases still in flight.
CREATE INDEX IF NOT EXISTS sq_items_lapsed ON sq_items (queue, visible_at) WHERE status = 'leased';
