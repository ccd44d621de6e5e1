-- simplequeue schema v1 for SQL Server 2016 SP1 or later, Azure SQL Database and Managed Instance.
-- The database must be at compatibility level 130 or later (the store reads batches with OPENJSON);
-- MssqlStore.migrate() checks that before it runs this file.
--
-- MssqlStore.migrate() runs this file one statement at a time (split_statements cuts at every ';'
-- that ends a line), all in one transaction under an application lock. So each statement ends with
-- ';' on its last line and no line inside a statement does. There is no GO: that is a sqlcmd/SSMS
-- batch separator, not T-SQL. Every CREATE is guarded, so running the file again is harmless and a
-- half-built schema (say, a table a DBA created by hand) is completed rather than rejected.
--
-- Queue names use a binary collation: case-sensitive and ordinal, as in SQLite and PostgreSQL. The
-- database default (usually *_CI_AS) would make "Orders" and "orders" one queue.

IF OBJECT_ID(N'dbo.sq_queues', N'U') IS NULL
CREATE TABLE dbo.sq_queues (
    name NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    created_at DATETIME2(7) NOT NULL,
    CONSTRAINT sq_queues_pk PRIMARY KEY CLUSTERED (name),
    CONSTRAINT sq_queues_name_ck CHECK (LEN(name) >= 1)
);

-- seq, an ever-increasing BIGINT, is the clustered key: inserts append at the end of the B-tree
-- instead of splitting pages as a random UNIQUEIDENTIFIER key would; it is also the tie-breaker after
-- created_at. Do not replace it with a clustered columnstore: pop's ROWLOCK/READPAST need row locks.
-- visible_at: for 'ready', when the item may be popped (later than now after a delayed retry);
-- for 'leased', when the lease expires and the item may be popped again.
-- NVARCHAR, not VARCHAR, for text: pyodbc binds Python str as NVARCHAR, and comparing a VARCHAR
-- column with an NVARCHAR parameter converts the column, which turns index seeks into scans.
IF OBJECT_ID(N'dbo.sq_items', N'U') IS NULL
CREATE TABLE dbo.sq_items (
    seq BIGINT IDENTITY(1, 1) NOT NULL,
    id UNIQUEIDENTIFIER NOT NULL,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    payload NVARCHAR(MAX) NOT NULL,
    created_at DATETIME2(7) NOT NULL,
    status VARCHAR(6) NOT NULL CONSTRAINT sq_items_status_df DEFAULT 'ready',
    attempts INT NOT NULL CONSTRAINT sq_items_attempts_df DEFAULT 0,
    visible_at DATETIME2(7) NOT NULL,
    lease_token UNIQUEIDENTIFIER NULL,
    errors NVARCHAR(MAX) NOT NULL CONSTRAINT sq_items_errors_df DEFAULT N'[]',
    CONSTRAINT sq_items_pk PRIMARY KEY CLUSTERED (seq),
    CONSTRAINT sq_items_status_ck CHECK (status IN ('ready', 'leased', 'dead')),
    CONSTRAINT sq_items_attempts_ck CHECK (attempts >= 0),
    CONSTRAINT sq_items_lease_ck CHECK (
        (status = 'leased' AND lease_token IS NOT NULL) OR (status <> 'leased' AND lease_token IS NULL)
    )
);

-- MssqlStore reports a duplicate key on this index (errors 2601/2627 naming it) as ItemExists.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_id_key')
CREATE UNIQUE NONCLUSTERED INDEX sq_items_id_key ON dbo.sq_items (id);

-- The pop index holds only live rows, so dead rows never slow a pop down. Its filter is pop's literal
-- predicate, which is what lets the optimizer use a filtered index in a parameterised statement;
-- visible_at is included so that the claim filters without visiting the table.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_pop')
CREATE NONCLUSTERED INDEX sq_items_pop ON dbo.sq_items (queue, created_at, seq) INCLUDE (visible_at)
    WHERE status IN ('ready', 'leased');

-- Dead items only, for the stats' dead count: live churn (push, pop, complete) never touches it.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_dead')
CREATE NONCLUSTERED INDEX sq_items_dead ON dbo.sq_items (queue) WHERE status = 'dead';

-- The long-poll watcher's probe (when does a queue's next live item become poppable?): one seek for
-- MIN(visible_at). Filtered like the pop index, by the probe's literal predicate.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_visible')
CREATE NONCLUSTERED INDEX sq_items_visible ON dbo.sq_items (queue, visible_at)
    WHERE status IN ('ready', 'leased');
