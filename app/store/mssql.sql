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
-- * A batch of items is one JSON text parameter, built with json.dumps and read with OPENJSON ... WITH:
--   one marker whatever the batch size. OPENJSON needs database compatibility level 130 or later,
--   which migrate() checks before it applies anything.

-- name: push_batch
-- Every item from one JSON parameter: 1000 items bound one value each would pass SQL Server's limit
-- of 2100 parameters per request. The payload travels as a JSON string and is read back as
-- NVARCHAR(MAX), so its text arrives exactly as sent.
-- First the ids that exist, found and locked: UPDLOCK, HOLDLOCK takes a key-range lock on every
-- probed id of the unique id index, present or not, until commit. So no other transaction can insert
-- a missing id meanwhile (it waits, then finds it here), and none can delete an existing one; the
-- INSERT that follows needs no probe of its own. FORCESEEK keeps the locks to one seek per item: a
-- scan under HOLDLOCK would range-lock the whole index. The store sends the array in the index's
-- order, so that concurrent batches, whose seeks follow it, lock their ranges in the same order
-- rather than deadlock (a deadlock victim would surface as DatabaseUnavailable, which clients retry).
-- IGNORE_DUP_KEY on the index would take the same range locks, for every writer of the table, and
-- hide duplicates from all of them.
-- Then the other items, in the order given: INSERT ... SELECT ... ORDER BY fixes the order in which
-- IDENTITY numbers them, and seq breaks pop's ties on created_at. OUTPUT says which ids went in; the
-- store refuses the whole batch (all or nothing) when that is fewer than it sent.
-- The queues of the inserted items are registered last, because T-SQL's IF governs one statement.
-- The unlocked probe keeps pushes to existing queues from serialising on their rows; UPDLOCK,
-- HOLDLOCK makes two pushers that both found a queue missing insert it once. @inserted.queue has the
-- column's binary collation, so that DISTINCT and the probe tell "Orders" from "orders". queue is
-- read wider than the column so that an overlong name fails instead of being truncated.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(?, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @items NVARCHAR(MAX) = ?;
DECLARE @taken TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY);
DECLARE @inserted TABLE (
    id UNIQUEIDENTIFIER NOT NULL,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL
);
INSERT INTO @taken (id)
SELECT e.id
FROM OPENJSON(@items) WITH (id UNIQUEIDENTIFIER) AS j
JOIN dbo.sq_items AS e WITH (UPDLOCK, HOLDLOCK, FORCESEEK) ON e.id = j.id;
INSERT INTO dbo.sq_items (id, queue, payload, created_at, visible_at)
OUTPUT inserted.id, inserted.queue INTO @inserted
SELECT j.id, j.queue, j.payload, CAST(j.created_at AS DATETIME2(7)), @now
FROM OPENJSON(@items) WITH (
    n INT, id UNIQUEIDENTIFIER, queue NVARCHAR(4000), payload NVARCHAR(MAX), created_at NVARCHAR(40)
) AS j
WHERE NOT EXISTS (SELECT 1 FROM @taken AS t WHERE t.id = j.id)
ORDER BY j.n;
SELECT id FROM @inserted;
IF EXISTS (SELECT 1 FROM @inserted AS i WHERE NOT EXISTS (SELECT 1 FROM dbo.sq_queues AS q WHERE q.name = i.queue))
    INSERT INTO dbo.sq_queues (name, created_at)
    SELECT DISTINCT i.queue, @now
    FROM @inserted AS i
    WHERE NOT EXISTS (SELECT 1 FROM dbo.sq_queues AS q WITH (UPDLOCK, HOLDLOCK) WHERE q.name = i.queue);

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
-- INDEX(sq_items_pop): walk the filtered pop index in (created_at, seq) order and stop after TOP
--   rows. A queue table's size swings faster than statistics follow it; with stale ones the
--   optimizer may scan another index and sort every ready row on each pop (PostgreSQL was seen
--   doing exactly that: see PLANNER_SETTINGS in postgres.py).
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(?, N'') AS DATETIME2(7)), SYSUTCDATETIME());
WITH claimable AS (
    SELECT TOP (CAST(? AS INT)) seq, id, queue, payload, created_at, status, attempts, lease_token, visible_at
    FROM dbo.sq_items WITH (INDEX(sq_items_pop), READCOMMITTEDLOCK, ROWLOCK, READPAST, UPDLOCK)
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

-- name: complete_batch
-- Two result sets: the ids deleted, then those of the requested ids that are still there (a token
-- that did not match, a dead item with a token given). An id in neither was not found. A null token
-- deletes whatever the item's state, as complete does. FORCESEEK: one seek per id on the id index,
-- never a scan that would take update locks on (and wait for) other workers' rows.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @items NVARCHAR(MAX) = ?;
DELETE i
OUTPUT deleted.id
FROM dbo.sq_items AS i WITH (FORCESEEK)
JOIN OPENJSON(@items) WITH (id UNIQUEIDENTIFIER, token UNIQUEIDENTIFIER) AS j ON i.id = j.id
WHERE j.token IS NULL OR i.lease_token = j.token;
SELECT i.id
FROM dbo.sq_items AS i WITH (FORCESEEK)
JOIN OPENJSON(@items) WITH (id UNIQUEIDENTIFIER) AS j ON i.id = j.id;

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

-- name: next_visible_at
-- The long-poll watcher's probe for every queue it waits on: the clock, then one row per queue with
-- the earliest visible_at of its live items (NULL: none). Each MIN is one seek on sq_items_visible,
-- whose filter is this literal predicate. The clock comes first so that it is there for no queues.
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(?, N'') AS DATETIME2(7)), SYSUTCDATETIME());
SELECT @now AS now;
SELECT q.queue AS queue, n.next_visible_at AS next_visible_at
FROM OPENJSON(?) WITH (queue NVARCHAR(4000) '$') AS q
CROSS APPLY (
    SELECT MIN(i.visible_at) AS next_visible_at
    FROM dbo.sq_items AS i
    WHERE i.queue = q.queue AND i.status IN ('ready', 'leased')
) AS n;

-- name: queue_stats
-- '' for the queue filter lists every queue. Per queue: the live counts read the filtered pop
-- index's rows, the dead count sq_items_dead; neither walks the other kind, so a million dead
-- items do not slow the live figures down.
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(?, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = NULLIF(?, N'');
SELECT q.name AS name, live.ready, live.leased, dead.dead, live.oldest_ready, @now AS now
FROM dbo.sq_queues AS q
CROSS APPLY (
    SELECT SUM(CASE WHEN i.status = 'ready' OR i.visible_at <= @now THEN 1 ELSE 0 END) AS ready,
           SUM(CASE WHEN i.status = 'leased' AND i.visible_at > @now THEN 1 ELSE 0 END) AS leased,
           MIN(CASE WHEN i.visible_at <= @now THEN i.created_at END) AS oldest_ready
    FROM dbo.sq_items AS i
    WHERE i.queue = q.name AND i.status IN ('ready', 'leased')
) AS live
CROSS APPLY (
    SELECT COUNT_BIG(*) AS dead FROM dbo.sq_items AS d WHERE d.queue = q.name AND d.status = 'dead'
) AS dead
WHERE @queue IS NULL OR q.name = @queue
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

-- name: compatibility_level
-- OPENJSON needs 130 (SQL Server 2016); a database restored from an older server keeps its level.
SELECT compatibility_level FROM sys.databases WHERE database_id = DB_ID();
