-- simplequeue schema v20 for SQL Server: a key's ready items in pop order. A pop of a queue limited
-- per key reads the items of the keys it took the turns of after it took them (lock_keys): each
-- key's first few, by this index, rather than those its walk of the queue's front saw before the
-- turns were taken (which pops that committed in between may have leased). Keyed items only, so a
-- queue without fairness keys pays nothing for it; a queue's unkeyed items are read along
-- sq_items_ready. The filter is the read's literal predicate; visible_at and group_key are included
-- as sq_items_ready includes them. Guarded: running the file again is harmless.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_key_ready')
CREATE NONCLUSTERED INDEX sq_items_key_ready ON dbo.sq_items (queue, fairness_key, rank_priority DESC, fair_rank, created_at, seq)
    INCLUDE (visible_at, group_key)
    WHERE status = 'ready' AND fairness_key IS NOT NULL;
GO
