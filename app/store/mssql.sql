-- Queries of the SQL Server dialect (pyodbc through aioodbc, ? parameters in order).
--
-- Each block is one batch, sent in one round trip. Conventions:
-- * SET NOCOUNT ON first: no "rows affected" messages, so the first result set of a batch is its
--   SELECT or OUTPUT rows. Writes also SET XACT_ABORT ON, so any error rolls the whole transaction
--   back instead of leaving the statements before it applied.
-- * @now is the batch's one clock. The store binds '' in production, so every time comes from the
--   server (SYSUTCDATETIME: one clock for every replica, and lease cutoffs live where the clock
--   lives); tests bind their fake clock as ISO-8601 text in its place.
-- * Optional values (the clock, a lease token, a queue filter) are bound as '' rather than NULL:
--   pyodbc cannot tell the type of a None and asks the server to describe the batch first, an extra
--   round trip per statement.
-- * Times are bound as ISO-8601 text and CAST to DATETIME2(7): exact to the microsecond whatever
--   precision the ODBC driver would give a Python datetime (FreeTDS and older drivers truncate).
-- * UUIDs are bound as text and CAST to UNIQUEIDENTIFIER; pyodbc returns them as (uppercase) text.

-- name: push
-- The item first: a duplicate id fails before the queue row is touched. The queue row is inserted
-- only if missing: the unlocked probe keeps pushes to an existing queue from serialising on its
-- row; UPDLOCK, HOLDLOCK (a key-range lock) makes two pushers that both found it missing insert it
-- once. @queue is wider than the column so that an overlong name fails instead of being truncated.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(?, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = ?;
INSERT INTO dbo.sq_items (id, queue, payload, created_at, visible_at)
VALUES (CAST(? AS UNIQUEIDENTIFIER), @queue, ?, CAST(? AS DATETIME2(7)), @now);
IF NOT EXISTS (SELECT 1 FROM dbo.sq_queues WHERE name = @queue)
    INSERT INTO dbo.sq_queues (name, created_at)
    SELECT @queue, @now
    WHERE NOT EXISTS (SELECT 1 FROM dbo.sq_queues WITH (UPDLOCK, HOLDLOCK) WHERE name = @queue);

-- name: pop
-- An atomic test-and-set: the CTE picks the oldest poppable rows and the UPDATE leases exactly the
-- rows it picked. Each hint on the scan is load-bearing:
-- READCOMMITTEDLOCK: under READ_COMMITTED_SNAPSHOT (the Azure SQL Database default) READ COMMITTED
--   reads row versions, and READPAST/UPDLOCK would not make a locking claim; this takes locks anyway.
-- ROWLOCK: row locks only, never page locks or escalation to the table, with which READPAST would
--   skip whole pages or concurrent poppers would serialise.
-- READPAST: skip rows that another popper has locked instead of waiting for it.
-- UPDLOCK: take an update lock as each row is read, so that no other popper can claim it between
--   this SELECT and the UPDATE (no lost update, no double lease).
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(?, N'') AS DATETIME2(7)), SYSUTCDATETIME());
WITH claimable AS (
    SELECT TOP (CAST(? AS INT)) seq, id, queue, payload, created_at, status, attempts, lease_token, visible_at
    FROM dbo.sq_items WITH (READCOMMITTEDLOCK, ROWLOCK, READPAST, UPDLOCK)
    WHERE queue = ? AND status IN ('ready', 'leased') AND visible_at <= @now
    ORDER BY created_at, seq
)
UPDATE claimable
SET status = 'leased',
    attempts = attempts + 1,
    lease_token = CAST(? AS UNIQUEIDENTIFIER),
    visible_at = DATEADD(SECOND, CAST(? AS INT), @now)
OUTPUT inserted.seq, inserted.id, inserted.queue, inserted.payload, inserted.created_at, inserted.attempts,
       inserted.lease_token, inserted.visible_at;

-- name: complete
-- OUTPUT rather than a row count: with NOCOUNT ON the driver reports no count.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @token UNIQUEIDENTIFIER = CAST(NULLIF(?, N'') AS UNIQUEIDENTIFIER);
DELETE dbo.sq_items
OUTPUT deleted.seq
WHERE id = CAST(? AS UNIQUEIDENTIFIER) AND (@token IS NULL OR lease_token = @token);

-- name: fail
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(?, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @token UNIQUEIDENTIFIER = CAST(NULLIF(?, N'') AS UNIQUEIDENTIFIER);
DECLARE @retry BIT = ?;
UPDATE dbo.sq_items
SET status = CASE WHEN @retry = 1 THEN 'ready' ELSE 'dead' END,
    visible_at = CASE WHEN @retry = 1 THEN DATEADD(SECOND, CAST(? AS INT), @now) ELSE visible_at END,
    lease_token = NULL,
    errors = JSON_MODIFY(
        errors, 'append $',
        JSON_QUERY((SELECT @now AS [at], CAST(? AS NVARCHAR(MAX)) AS [error] FOR JSON PATH, WITHOUT_ARRAY_WRAPPER))
    )
OUTPUT inserted.id, inserted.queue, inserted.payload, inserted.status, inserted.attempts, inserted.errors,
       inserted.created_at, inserted.visible_at, @now AS now
WHERE id = CAST(? AS UNIQUEIDENTIFIER) AND status <> 'dead' AND (@token IS NULL OR lease_token = @token);

-- name: get_item
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(?, N'') AS DATETIME2(7)), SYSUTCDATETIME());
SELECT id, queue, payload, status, attempts, errors, created_at, visible_at, lease_token, @now AS now
FROM dbo.sq_items
WHERE id = CAST(? AS UNIQUEIDENTIFIER);

-- name: queue_stats
-- '' for the queue filter lists every queue.
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(?, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = NULLIF(?, N'');
SELECT q.name AS name,
       SUM(CASE WHEN i.status = 'ready' OR (i.status = 'leased' AND i.visible_at <= @now) THEN 1 ELSE 0 END)
           AS ready,
       SUM(CASE WHEN i.status = 'leased' AND i.visible_at > @now THEN 1 ELSE 0 END) AS leased,
       SUM(CASE WHEN i.status = 'dead' THEN 1 ELSE 0 END) AS dead,
       MIN(CASE WHEN i.status IN ('ready', 'leased') AND i.visible_at <= @now THEN i.created_at END)
           AS oldest_ready,
       @now AS now
FROM dbo.sq_queues AS q
LEFT JOIN dbo.sq_items AS i ON i.queue = q.name
WHERE @queue IS NULL OR q.name = @queue
GROUP BY q.name
ORDER BY q.name;

-- name: lock_migrations
-- Replicas starting together: one migrates, the others wait here and then find nothing to do.
-- Owned by the session, not the transaction: in ODBC manual-commit mode Microsoft's driver runs
-- with IMPLICIT_TRANSACTIONS ON, where EXEC opens no transaction, so a transaction-owned lock taken
-- as the first statement would be refused. The store releases it once the migration has committed
-- (or closes the connection, which releases it too).
-- The result is returned, not raised: >= 0 granted, -1 timed out, below that refused.
SET NOCOUNT ON;
DECLARE @result INT;
EXEC @result = sys.sp_getapplock
    @Resource = N'simplequeue_migrate', @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = ?;
SELECT @result AS result;

-- name: unlock_migrations
EXEC sys.sp_releaseapplock @Resource = N'simplequeue_migrate', @LockOwner = N'Session';

-- name: create_version_table
IF OBJECT_ID(N'dbo.sq_schema_version', N'U') IS NULL
CREATE TABLE dbo.sq_schema_version (
    version INT NOT NULL CONSTRAINT sq_schema_version_pk PRIMARY KEY,
    name NVARCHAR(200) NOT NULL,
    applied_at DATETIME2(7) NOT NULL
);

-- name: applied_versions
SELECT version FROM dbo.sq_schema_version ORDER BY version;

-- name: record_version
INSERT INTO dbo.sq_schema_version (version, name, applied_at)
VALUES (?, ?, COALESCE(CAST(NULLIF(?, N'') AS DATETIME2(7)), SYSUTCDATETIME()));
