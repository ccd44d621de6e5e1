-- simplequeue schema v21 for PostgreSQL: a key's ready items in pop order. A pop of a queue limited
-- per key reads the items of the keys it took the turns of after it took them (key_items): each
-- key's first few, by this index, rather than those its walk of the queue's front saw before the
-- turns were taken (which pops that committed in between may have leased). Keyed items only, so a
-- queue without fairness keys pays nothing for it; a queue's unkeyed items are read along
-- sq_items_ready.
CREATE INDEX IF NOT EXISTS sq_items_key_ready ON sq_items (queue, fairness_key, rank_priority DESC, fair_rank, created_at, seq)
    WHERE status = 'ready' AND fairness_key IS NOT NULL;
