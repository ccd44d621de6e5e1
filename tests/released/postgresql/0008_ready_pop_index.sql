-- simplequeue schema v8 for PostgreSQL: the pop walks ready items only.
-- sq_items_pop held every live item, so each claim walked past the leases in flight ahead of the
-- first ready one, and every lease wrote a new entry into it. The pop now takes ready items from
-- sq_items_ready (which a lease leaves) and leases that ran out from sq_items_lapsed, a range of
-- their queue's leases by expiry that holds only leases and is cut off at now, and merges the two
-- in pop order. The other readers of live items (stats, peek, purges) read sq_items_visible, whose
-- rows are the same live items.
DROP INDEX IF EXISTS sq_items_pop;

-- Pop order within a queue: priority, then created_at, then insertion. Ready items only; delayed
-- and retrying ones are here too (ready, visible later), as they were in sq_items_pop.
CREATE INDEX IF NOT EXISTS sq_items_ready ON sq_items (queue, priority DESC, created_at, seq)
    WHERE status = 'ready';

-- A queue's leases by when they run out: the pop reads those that ran out (visible_at <= now),
-- never the leases still in flight.
CREATE INDEX IF NOT EXISTS sq_items_lapsed ON sq_items (queue, visible_at) WHERE status = 'leased';

-- The sweep's sq_items_leased (every queue's leases by expiry) could serve the pop's range of
-- expired leases too, filtered to the queue: a walk over the expired leases of every queue (those
-- of a queue nobody pops pile up), each read in the table to learn its queue. With statistics that
-- hold few leases the planner prefers it, being the smaller. Its predicate now names lease_token,
-- which every lease has (sq_items_lease_ck) and which the sweep states and the pop does not, so that
-- the pop cannot use it.
DROP INDEX IF EXISTS sq_items_leased;
CREATE INDEX sq_items_leased ON sq_items (visible_at) WHERE status = 'leased' AND lease_token IS NOT NULL;
