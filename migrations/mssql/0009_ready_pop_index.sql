-- simplequeue schema v9 for SQL Server: the pop walks ready items only.
-- sq_items_pop held every live item, so each claim walked past the leases in flight ahead of the
-- first ready one, and every lease changed its entry. The pop now takes ready items from
-- sq_items_ready (which a lease leaves) and leases that ran out from sq_items_lapsed, a range of
-- their queue's leases by expiry cut off at @now, and merges the two in pop order. The other
-- readers of live items (stats, purges, expiry) read sq_items_visible, whose rows are the same live
-- items and which now includes what they filter by. Every statement is guarded: running the file
-- again is harmless.
IF EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_pop')
DROP INDEX sq_items_pop ON dbo.sq_items;

-- Pop order within a queue: priority, then created_at, then insertion. Ready items only (delayed
-- and retrying ones too: ready, visible later). The filter is the ready walk's literal predicate,
-- which is what lets the optimizer use a filtered index in a parameterised statement; the included
-- columns let the walk filter candidates (not yet due, group members) without visiting the table.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_ready')
CREATE NONCLUSTERED INDEX sq_items_ready ON dbo.sq_items (queue, priority DESC, created_at, seq)
    INCLUDE (visible_at, group_key)
    WHERE status = 'ready';

-- A queue's leases by when they run out: the pop seeks the range that ran out (visible_at <= @now),
-- never the leases still in flight, and sorts those few in pop order from the included columns.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_lapsed')
CREATE NONCLUSTERED INDEX sq_items_lapsed ON dbo.sq_items (queue, visible_at)
    INCLUDE (priority, created_at, attempts, group_key)
    WHERE status = 'leased';

-- The live items' other readers: rebuilt, while it lacks them, with the columns they filter by.
IF EXISTS (
    SELECT 1 FROM sys.indexes AS i
    WHERE i.object_id = OBJECT_ID(N'dbo.sq_items') AND i.name = N'sq_items_visible'
      AND NOT EXISTS (
          SELECT 1 FROM sys.index_columns AS c
          WHERE c.object_id = i.object_id AND c.index_id = i.index_id
            AND c.column_id = COLUMNPROPERTY(i.object_id, N'attempts', 'ColumnId'))
)
DROP INDEX sq_items_visible ON dbo.sq_items;

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_visible')
CREATE NONCLUSTERED INDEX sq_items_visible ON dbo.sq_items (queue, visible_at)
    INCLUDE (status, attempts, created_at)
    WHERE status IN ('ready', 'leased');
