-- simplequeue schema v15 for SQL Server: fairness between tenants. An item may name the tenant it
-- belongs to (fairness_key); pops take a queue's ready items round-robin across its keys. A push
-- gives each item a rank, fair_rank (start-time fair queueing: the later of the queue's virtual
-- time and its key's last rank, plus one), and pops order by it after priority. A queue that never
-- saw a key keeps every rank at 0, so its pop order is that of created_at and seq, as before.
-- Every batch is guarded: running the file again is harmless.
IF COL_LENGTH(N'dbo.sq_items', N'fairness_key') IS NULL
ALTER TABLE dbo.sq_items ADD fairness_key NVARCHAR(128) NULL;
GO

IF COL_LENGTH(N'dbo.sq_items', N'fair_rank') IS NULL
ALTER TABLE dbo.sq_items ADD fair_rank FLOAT NOT NULL CONSTRAINT sq_items_fair_rank_df DEFAULT 0;
GO

-- Each key's last rank, by queue. Unkeyed items of a queue that has keys are one more key, N''
-- (a given key is never empty). A key's weight and limits would live on this row too.
IF OBJECT_ID(N'dbo.sq_fair_keys', N'U') IS NULL
CREATE TABLE dbo.sq_fair_keys (
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    fairness_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    last_rank FLOAT NOT NULL,
    CONSTRAINT sq_fair_keys_pk PRIMARY KEY CLUSTERED (queue, fairness_key)
);
GO

-- The queue's highest rank handed out: the virtual time a push starts from when the queue has no
-- ready item of the pushed priority (dbo.sq_push_items, store/mssql/procedures.sql).
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_fair_keys') AND name = N'sq_fair_keys_clock')
CREATE NONCLUSTERED INDEX sq_fair_keys_clock ON dbo.sq_fair_keys (queue, last_rank);
GO

-- Pop order within a queue: priority, then fair rank, then created_at, then insertion; rebuilt
-- while it lacks fair_rank. The filter stays the ready walk's literal predicate.
IF EXISTS (
    SELECT 1 FROM sys.indexes AS i
    WHERE i.object_id = OBJECT_ID(N'dbo.sq_items') AND i.name = N'sq_items_ready'
      AND NOT EXISTS (
          SELECT 1 FROM sys.index_columns AS c
          WHERE c.object_id = i.object_id AND c.index_id = i.index_id
            AND c.column_id = COLUMNPROPERTY(i.object_id, N'fair_rank', 'ColumnId'))
)
DROP INDEX sq_items_ready ON dbo.sq_items;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_ready')
CREATE NONCLUSTERED INDEX sq_items_ready ON dbo.sq_items (queue, priority DESC, fair_rank, created_at, seq)
    INCLUDE (visible_at, group_key)
    WHERE status = 'ready';
GO

-- Leases that ran out are sorted in pop order from the included columns: fair_rank joins them.
IF EXISTS (
    SELECT 1 FROM sys.indexes AS i
    WHERE i.object_id = OBJECT_ID(N'dbo.sq_items') AND i.name = N'sq_items_lapsed'
      AND NOT EXISTS (
          SELECT 1 FROM sys.index_columns AS c
          WHERE c.object_id = i.object_id AND c.index_id = i.index_id
            AND c.column_id = COLUMNPROPERTY(i.object_id, N'fair_rank', 'ColumnId'))
)
DROP INDEX sq_items_lapsed ON dbo.sq_items;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_lapsed')
CREATE NONCLUSTERED INDEX sq_items_lapsed ON dbo.sq_items (queue, visible_at)
    INCLUDE (priority, fair_rank, created_at, attempts, group_key)
    WHERE status = 'leased';
GO
