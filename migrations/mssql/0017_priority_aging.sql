-- simplequeue schema v17 for SQL Server: priority aging. A queue's priority_aging_seconds (NULL:
-- off) raises a waiting item's effective priority by one per period. Each item carries a static
-- sort key, rank_priority: its priority, less the number of whole periods from the epoch to its
-- created_at when its queue ages priorities (dbo.sq_push_items, domain/aging.py), so that pops need
-- no re-sorting as time passes. BIGINT: with a period of a second, that count passes INT in 2038.
-- Items already here keep their order: their rank is their priority. Every batch is guarded:
-- running the file again is harmless.
IF COL_LENGTH(N'dbo.sq_queues', N'priority_aging_seconds') IS NULL
ALTER TABLE dbo.sq_queues ADD priority_aging_seconds INT NULL
    CONSTRAINT sq_queues_priority_aging_ck CHECK (priority_aging_seconds >= 1);
GO

IF COL_LENGTH(N'dbo.sq_items', N'rank_priority') IS NULL
ALTER TABLE dbo.sq_items ADD rank_priority BIGINT NOT NULL CONSTRAINT sq_items_rank_priority_df DEFAULT 0;
GO

UPDATE dbo.sq_items SET rank_priority = priority WHERE rank_priority <> priority;
GO

-- Pop order within a queue: rank, then fair rank, then created_at, then insertion; rebuilt while
-- it leads with priority. The filter stays the ready walk's literal predicate.
IF EXISTS (
    SELECT 1 FROM sys.indexes AS i
    WHERE i.object_id = OBJECT_ID(N'dbo.sq_items') AND i.name = N'sq_items_ready'
      AND NOT EXISTS (
          SELECT 1 FROM sys.index_columns AS c
          WHERE c.object_id = i.object_id AND c.index_id = i.index_id AND c.key_ordinal = 2
            AND c.column_id = COLUMNPROPERTY(i.object_id, N'rank_priority', 'ColumnId'))
)
DROP INDEX sq_items_ready ON dbo.sq_items;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_ready')
CREATE NONCLUSTERED INDEX sq_items_ready ON dbo.sq_items (queue, rank_priority DESC, fair_rank, created_at, seq)
    INCLUDE (visible_at, group_key)
    WHERE status = 'ready';
GO

-- Leases that ran out are sorted in pop order from the included columns: rank_priority joins them.
IF EXISTS (
    SELECT 1 FROM sys.indexes AS i
    WHERE i.object_id = OBJECT_ID(N'dbo.sq_items') AND i.name = N'sq_items_lapsed'
      AND NOT EXISTS (
          SELECT 1 FROM sys.index_columns AS c
          WHERE c.object_id = i.object_id AND c.index_id = i.index_id
            AND c.column_id = COLUMNPROPERTY(i.object_id, N'rank_priority', 'ColumnId'))
)
DROP INDEX sq_items_lapsed ON dbo.sq_items;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_lapsed')
CREATE NONCLUSTERED INDEX sq_items_lapsed ON dbo.sq_items (queue, visible_at)
    INCLUDE (priority, rank_priority, fair_rank, created_at, attempts, group_key)
    WHERE status = 'leased';
GO
