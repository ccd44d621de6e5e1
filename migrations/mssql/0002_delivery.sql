-- simplequeue schema v2 for SQL Server: queue settings, retries, dead letters, delays, priorities,
-- idempotency keys, ordered groups and history.
--
-- Run as 0001 is: one statement at a time (each ends with ';' on its last line, no line inside one
-- does), all in one transaction under the migration lock. Every statement is guarded or idempotent,
-- so running the file again is harmless and a half-built schema is completed.

-- Queue settings. The defaults here are the ones a queue gets on its first push; they match
-- app.domain.QueueSettings (a test holds them together). FLOAT is SQL Server's double precision.
IF COL_LENGTH(N'dbo.sq_queues', N'max_attempts') IS NULL
ALTER TABLE dbo.sq_queues ADD max_attempts INT NOT NULL CONSTRAINT sq_queues_max_attempts_df DEFAULT 5
    CONSTRAINT sq_queues_max_attempts_ck CHECK (max_attempts BETWEEN 1 AND 1000);

IF COL_LENGTH(N'dbo.sq_queues', N'lease_seconds') IS NULL
ALTER TABLE dbo.sq_queues ADD lease_seconds INT NOT NULL CONSTRAINT sq_queues_lease_seconds_df DEFAULT 30
    CONSTRAINT sq_queues_lease_seconds_ck CHECK (lease_seconds BETWEEN 1 AND 43200);

IF COL_LENGTH(N'dbo.sq_queues', N'backoff_base_seconds') IS NULL
ALTER TABLE dbo.sq_queues ADD backoff_base_seconds FLOAT NOT NULL CONSTRAINT sq_queues_backoff_base_df DEFAULT 1
    CONSTRAINT sq_queues_backoff_base_ck CHECK (backoff_base_seconds BETWEEN 0 AND 86400);

IF COL_LENGTH(N'dbo.sq_queues', N'backoff_factor') IS NULL
ALTER TABLE dbo.sq_queues ADD backoff_factor FLOAT NOT NULL CONSTRAINT sq_queues_backoff_factor_df DEFAULT 2
    CONSTRAINT sq_queues_backoff_factor_ck CHECK (backoff_factor BETWEEN 1 AND 10);

IF COL_LENGTH(N'dbo.sq_queues', N'backoff_cap_seconds') IS NULL
ALTER TABLE dbo.sq_queues ADD backoff_cap_seconds FLOAT NOT NULL CONSTRAINT sq_queues_backoff_cap_df DEFAULT 3600
    CONSTRAINT sq_queues_backoff_cap_ck CHECK (backoff_cap_seconds BETWEEN 0 AND 604800);

IF COL_LENGTH(N'dbo.sq_queues', N'backoff_jitter') IS NULL
ALTER TABLE dbo.sq_queues ADD backoff_jitter FLOAT NOT NULL CONSTRAINT sq_queues_backoff_jitter_df DEFAULT 0.1
    CONSTRAINT sq_queues_backoff_jitter_ck CHECK (backoff_jitter BETWEEN 0 AND 1);

IF COL_LENGTH(N'dbo.sq_queues', N'retention_seconds') IS NULL
ALTER TABLE dbo.sq_queues ADD retention_seconds INT NOT NULL CONSTRAINT sq_queues_retention_df DEFAULT 604800
    CONSTRAINT sq_queues_retention_ck CHECK (retention_seconds BETWEEN 0 AND 31536000);

IF COL_LENGTH(N'dbo.sq_queues', N'dedup_window_seconds') IS NULL
ALTER TABLE dbo.sq_queues ADD dedup_window_seconds INT NOT NULL CONSTRAINT sq_queues_dedup_window_df DEFAULT 3600
    CONSTRAINT sq_queues_dedup_window_ck CHECK (dedup_window_seconds BETWEEN 0 AND 31536000);

IF COL_LENGTH(N'dbo.sq_queues', N'history_payload') IS NULL
ALTER TABLE dbo.sq_queues ADD history_payload BIT NOT NULL CONSTRAINT sq_queues_history_payload_df DEFAULT 0;

-- Items. Group and dedup keys compare like queue names: case-sensitive and ordinal (binary
-- collation), as in SQLite and PostgreSQL. DATALENGTH, not LEN, refuses the empty key: LEN ignores
-- trailing spaces, so it would refuse ' ' too. NVARCHAR(128) counts UTF-16 code units.
IF COL_LENGTH(N'dbo.sq_items', N'priority') IS NULL
ALTER TABLE dbo.sq_items ADD priority INT NOT NULL CONSTRAINT sq_items_priority_df DEFAULT 0;

IF COL_LENGTH(N'dbo.sq_items', N'group_key') IS NULL
ALTER TABLE dbo.sq_items ADD group_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL
    CONSTRAINT sq_items_group_key_ck CHECK (DATALENGTH(group_key) > 0);

IF COL_LENGTH(N'dbo.sq_items', N'dedup_key') IS NULL
ALTER TABLE dbo.sq_items ADD dedup_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL
    CONSTRAINT sq_items_dedup_key_ck CHECK (DATALENGTH(dedup_key) > 0);

IF COL_LENGTH(N'dbo.sq_items', N'first_popped_at') IS NULL
ALTER TABLE dbo.sq_items ADD first_popped_at DATETIME2(7) NULL;

IF COL_LENGTH(N'dbo.sq_items', N'died_at') IS NULL
ALTER TABLE dbo.sq_items ADD died_at DATETIME2(7) NULL;

-- v1 did not record when an item was first popped or died: the best figures it kept stand in.
UPDATE dbo.sq_items SET died_at = visible_at WHERE status = 'dead' AND died_at IS NULL;

UPDATE dbo.sq_items SET first_popped_at = created_at WHERE attempts > 0 AND first_popped_at IS NULL;

IF OBJECT_ID(N'dbo.sq_items_died_ck', N'C') IS NULL
ALTER TABLE dbo.sq_items ADD CONSTRAINT sq_items_died_ck CHECK (
    (status = 'dead' AND died_at IS NOT NULL) OR (status <> 'dead' AND died_at IS NULL)
);

-- Pop order: priority, then created_at, then insertion. v1's pop index (without priority) is
-- dropped and rebuilt; the filter is still pop's literal predicate, and the included columns let
-- the claim filter candidates (expired last attempts, group members) without visiting the table.
IF EXISTS (
    SELECT 1 FROM sys.indexes AS i
    WHERE i.object_id = OBJECT_ID(N'dbo.sq_items') AND i.name = N'sq_items_pop'
      AND NOT EXISTS (
          SELECT 1 FROM sys.index_columns AS c
          WHERE c.object_id = i.object_id AND c.index_id = i.index_id
            AND c.column_id = COLUMNPROPERTY(i.object_id, N'priority', 'ColumnId'))
)
DROP INDEX sq_items_pop ON dbo.sq_items;

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_pop')
CREATE NONCLUSTERED INDEX sq_items_pop ON dbo.sq_items (queue, priority DESC, created_at, seq)
    INCLUDE (visible_at, status, attempts, group_key)
    WHERE status IN ('ready', 'leased');

-- Ordered groups: is there a live item of this group pushed before this one? The filter is the
-- group probe's literal predicate (pop's inner NOT EXISTS), so that the probe can seek here.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_group')
CREATE NONCLUSTERED INDEX sq_items_group ON dbo.sq_items (queue, group_key, seq)
    WHERE group_key IS NOT NULL AND status IN ('ready', 'leased');

-- The sweep: leases that ran out (only items in flight, a small set).
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_leased')
CREATE NONCLUSTERED INDEX sq_items_leased ON dbo.sq_items (visible_at) INCLUDE (queue, attempts)
    WHERE status = 'leased';

-- Dead letters, most recently dead first; live churn never touches this index. v1's (queue only)
-- is dropped and rebuilt.
IF EXISTS (
    SELECT 1 FROM sys.indexes AS i
    WHERE i.object_id = OBJECT_ID(N'dbo.sq_items') AND i.name = N'sq_items_dead'
      AND NOT EXISTS (
          SELECT 1 FROM sys.index_columns AS c
          WHERE c.object_id = i.object_id AND c.index_id = i.index_id
            AND c.column_id = COLUMNPROPERTY(i.object_id, N'died_at', 'ColumnId'))
)
DROP INDEX sq_items_dead ON dbo.sq_items;

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_dead')
CREATE NONCLUSTERED INDEX sq_items_dead ON dbo.sq_items (queue, died_at, seq)
    WHERE status = 'dead';

-- One row per finished item (completed, or dead), written in the transaction that finished it.
-- Clustered on an ever-increasing seq, as sq_items is: history only ever appends.
IF OBJECT_ID(N'dbo.sq_history', N'U') IS NULL
CREATE TABLE dbo.sq_history (
    seq BIGINT IDENTITY(1, 1) NOT NULL,
    id UNIQUEIDENTIFIER NOT NULL,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    outcome VARCHAR(9) NOT NULL,
    attempts INT NOT NULL,
    created_at DATETIME2(7) NOT NULL,
    first_popped_at DATETIME2(7) NULL,
    finished_at DATETIME2(7) NOT NULL,
    group_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
    dedup_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
    last_error NVARCHAR(MAX) NULL,
    payload NVARCHAR(MAX) NULL,
    CONSTRAINT sq_history_pk PRIMARY KEY CLUSTERED (seq),
    CONSTRAINT sq_history_outcome_ck CHECK (outcome IN ('completed', 'dead')),
    CONSTRAINT sq_history_attempts_ck CHECK (attempts >= 0)
);

-- Paging newest first, and retention: oldest first per queue.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_history') AND name = N'sq_history_queue')
CREATE NONCLUSTERED INDEX sq_history_queue ON dbo.sq_history (queue, finished_at, seq);

-- Paging by outcome, and the counts per outcome in the stats.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_history') AND name = N'sq_history_outcome')
CREATE NONCLUSTERED INDEX sq_history_outcome ON dbo.sq_history (queue, outcome, finished_at, seq);

-- Idempotency keys. The primary key is the guarantee: of concurrent pushes with one key, one
-- inserts this row and the others wait for its key-range lock and then find it. expires_at is NULL
-- while the item exists; once it finished, the key keeps matching until then.
IF OBJECT_ID(N'dbo.sq_dedup', N'U') IS NULL
CREATE TABLE dbo.sq_dedup (
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    dedup_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    item_id UNIQUEIDENTIFIER NOT NULL,
    created_at DATETIME2(7) NOT NULL,
    expires_at DATETIME2(7) NULL,
    CONSTRAINT sq_dedup_pk PRIMARY KEY CLUSTERED (queue, dedup_key)
);

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_dedup') AND name = N'sq_dedup_expires')
CREATE NONCLUSTERED INDEX sq_dedup_expires ON dbo.sq_dedup (expires_at) WHERE expires_at IS NOT NULL;
