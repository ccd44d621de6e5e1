-- simplequeue schema v10 for SQL Server: two queue settings that SQS's queues need.
-- - lease_seconds may be 0 (SQS's VisibilityTimeout 0): a popped item is visible again at once,
--   and popped again by the next pop unless its worker completes it first.
-- - dedup_window_from: where a dedup key's window starts. 'finish' (the default, as before): the key
--   matches while its item lives and for dedup_window_seconds after it finished. 'send' (SQS FIFO
--   queues' deduplication interval): for dedup_window_seconds from the push that claimed it,
--   whether or not the item is still there.
--
-- Split at its GO lines and sent a batch at a time, as 0006 and 0008 are; every batch is guarded or
-- CREATE OR ALTER, so running the file again is harmless. dbo.sq_push_items is 0008's with its claim
-- of dedup keys reading the queue's dedup_window_from (the queue exists by then: the procedure
-- creates missing queues first); its locks, answers and grants are 0008's. The completions, kills
-- and purges start a key's window only when none runs yet (store/mssql/queries.sql), so a window
-- from the send is kept.
IF EXISTS (SELECT 1 FROM sys.check_constraints WHERE name = N'sq_queues_lease_seconds_ck'
           AND definition NOT LIKE N'%>=(0)%')
ALTER TABLE dbo.sq_queues DROP CONSTRAINT sq_queues_lease_seconds_ck;
GO

IF NOT EXISTS (SELECT 1 FROM sys.check_constraints WHERE name = N'sq_queues_lease_seconds_ck')
ALTER TABLE dbo.sq_queues ADD CONSTRAINT sq_queues_lease_seconds_ck CHECK (lease_seconds BETWEEN 0 AND 43200);
GO

IF COL_LENGTH(N'dbo.sq_queues', N'dedup_window_from') IS NULL
ALTER TABLE dbo.sq_queues ADD dedup_window_from VARCHAR(6) NOT NULL
    CONSTRAINT sq_queues_dedup_window_from_df DEFAULT 'finish'
    CONSTRAINT sq_queues_dedup_window_from_ck CHECK (dedup_window_from IN ('finish', 'send'));
GO

CREATE OR ALTER PROCEDURE dbo.sq_push_items
    @items NVARCHAR(MAX),
    @now DATETIME2(7),
    @results NVARCHAR(MAX) OUTPUT
AS
BEGIN
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @item TABLE (
    n INT NOT NULL PRIMARY KEY,
    id UNIQUEIDENTIFIER NOT NULL,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    created_at DATETIME2(7) NOT NULL,
    visible_at DATETIME2(7) NOT NULL,
    priority INT NOT NULL,
    group_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
    dedup_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
    remember BIT NOT NULL,
    leader INT NULL,
    key_taken BIT NULL,
    key_item_id UNIQUEIDENTIFIER NULL,
    key_created_at DATETIME2(7) NULL,
    fresh BIT NOT NULL
);
DECLARE @keys TABLE (
    n INT NOT NULL,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    dedup_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    item_id UNIQUEIDENTIFIER NOT NULL,
    created_at DATETIME2(7) NOT NULL,
    expires_at DATETIME2(7) NULL,
    PRIMARY KEY (queue, dedup_key)
);
DECLARE @keys_held TABLE (
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    dedup_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    PRIMARY KEY (queue, dedup_key)
);
DECLARE @keys_took TABLE (
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    dedup_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    PRIMARY KEY (queue, dedup_key)
);
DECLARE @grouped TABLE (queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY);
DECLARE @locked TABLE (queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL);
DECLARE @ids TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY);
DECLARE @taken TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY);
DECLARE @remember TABLE (
    id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    created_at DATETIME2(7) NOT NULL
);
DECLARE @held TABLE (
    id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    created_at DATETIME2(7) NOT NULL,
    expires_at DATETIME2(7) NULL
);
DECLARE @claimed TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY);
DECLARE @inserted TABLE (
    id UNIQUEIDENTIFIER NOT NULL,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL
);
DECLARE @holder TABLE (
    id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    created_at DATETIME2(7) NOT NULL
);
DECLARE @answer TABLE (
    n INT NOT NULL PRIMARY KEY,
    id UNIQUEIDENTIFIER NOT NULL,
    created_at DATETIME2(7) NULL,
    created BIT NULL,
    held_by NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL
);
INSERT INTO @item (n, id, queue, created_at, visible_at, priority, group_key, dedup_key, remember, fresh)
SELECT j.n, j.id, j.queue, CAST(j.created_at AS DATETIME2(7)),
       (SELECT MAX(v.at) FROM (VALUES
           (CAST(j.not_before AS DATETIME2(7))),
           (DATEADD(MICROSECOND, j.delay_micros, DATEADD(SECOND, j.delay_seconds, @now)))
       ) AS v(at)),
       j.priority, j.group_key, j.dedup_key, j.remember, 0
FROM OPENJSON(@items) WITH (
    n INT, id UNIQUEIDENTIFIER, queue NVARCHAR(4000), created_at NVARCHAR(40), priority INT,
    group_key NVARCHAR(4000), dedup_key NVARCHAR(4000), delay_seconds INT, delay_micros INT,
    not_before NVARCHAR(40), remember BIT
) AS j;
WITH firsts AS (
    SELECT i.n, i.queue, i.dedup_key, i.remember, i.leader,
           MIN(i.n) OVER (PARTITION BY i.queue, i.dedup_key) AS first_keyed,
           MIN(i.n) OVER (PARTITION BY i.remember, i.id) AS first_remembered,
           FIRST_VALUE(i.queue) OVER (PARTITION BY i.remember, i.id ORDER BY i.n) AS first_queue
    FROM @item AS i
)
UPDATE firsts
SET leader = CASE
    WHEN dedup_key IS NOT NULL THEN first_keyed
    WHEN remember = 1 AND first_queue = queue THEN first_remembered
    ELSE n
END;
IF EXISTS (
    SELECT 1 FROM @item AS j
    WHERE NOT EXISTS (SELECT 1 FROM dbo.sq_queues AS q WHERE q.name = j.queue)
)
    INSERT INTO dbo.sq_queues (name, created_at)
    SELECT DISTINCT j.queue, @now
    FROM @item AS j
    WHERE NOT EXISTS (SELECT 1 FROM dbo.sq_queues AS q WITH (UPDLOCK, HOLDLOCK) WHERE q.name = j.queue);
INSERT INTO @keys (n, queue, dedup_key, item_id, created_at, expires_at)
SELECT i.n, i.queue, i.dedup_key, i.id, i.created_at,
       IIF(q.dedup_window_from = 'send', DATEADD(SECOND, q.dedup_window_seconds, @now), NULL)
FROM @item AS i
JOIN dbo.sq_queues AS q ON q.name = i.queue
WHERE i.dedup_key IS NOT NULL AND i.leader = i.n;
INSERT INTO @keys_held (queue, dedup_key)
SELECT d.queue, d.dedup_key
FROM @keys AS c
JOIN dbo.sq_dedup AS d WITH (UPDLOCK, HOLDLOCK, FORCESEEK) ON d.queue = c.queue AND d.dedup_key = c.dedup_key;
UPDATE d
SET item_id = c.item_id, created_at = c.created_at, expires_at = c.expires_at
OUTPUT inserted.queue, inserted.dedup_key INTO @keys_took
FROM dbo.sq_dedup AS d WITH (FORCESEEK)
JOIN @keys AS c ON d.queue = c.queue AND d.dedup_key = c.dedup_key
WHERE d.expires_at IS NOT NULL AND d.expires_at <= @now;
INSERT INTO dbo.sq_dedup (queue, dedup_key, item_id, created_at, expires_at)
OUTPUT inserted.queue, inserted.dedup_key INTO @keys_took
SELECT c.queue, c.dedup_key, c.item_id, c.created_at, c.expires_at
FROM @keys AS c
WHERE NOT EXISTS (SELECT 1 FROM @keys_held AS h WHERE h.queue = c.queue AND h.dedup_key = c.dedup_key);
UPDATE i
SET key_taken = IIF(t.queue IS NULL, 0, 1), key_item_id = d.item_id, key_created_at = d.created_at
FROM @item AS i
JOIN @keys AS c ON c.n = i.n
JOIN dbo.sq_dedup AS d ON d.queue = c.queue AND d.dedup_key = c.dedup_key
LEFT JOIN @keys_took AS t ON t.queue = c.queue AND t.dedup_key = c.dedup_key;
WITH candidates AS (
    SELECT i.n, i.fresh, MIN(i.n) OVER (PARTITION BY i.id) AS first_with_id
    FROM @item AS i
    WHERE i.leader = i.n AND (i.dedup_key IS NULL OR i.key_taken = 1)
)
UPDATE candidates
SET fresh = IIF(first_with_id = n, 1, 0);
INSERT INTO @grouped (queue)
SELECT DISTINCT i.queue
FROM @item AS i
WHERE i.fresh = 1 AND i.group_key IS NOT NULL;
INSERT INTO @locked (queue)
SELECT q.name
FROM @grouped AS g
JOIN dbo.sq_queues AS q WITH (UPDLOCK, HOLDLOCK, FORCESEEK) ON q.name = g.queue;
INSERT INTO @ids (id)
SELECT i.id
FROM @item AS i
WHERE i.fresh = 1;
INSERT INTO @taken (id)
SELECT e.id
FROM @ids AS j
JOIN dbo.sq_items AS e WITH (UPDLOCK, HOLDLOCK, FORCESEEK) ON e.id = j.id;
INSERT INTO @remember (id, queue, created_at)
SELECT i.id, i.queue, i.created_at
FROM @item AS i
WHERE i.fresh = 1 AND i.remember = 1;
INSERT INTO @held (id, queue, created_at, expires_at)
SELECT k.id, k.queue, k.created_at, k.expires_at
FROM @remember AS r
JOIN dbo.sq_client_ids AS k WITH (UPDLOCK, HOLDLOCK, FORCESEEK) ON k.id = r.id;
UPDATE k
SET queue = r.queue, created_at = r.created_at, expires_at = NULL
OUTPUT inserted.id INTO @claimed
FROM dbo.sq_client_ids AS k WITH (FORCESEEK)
JOIN @remember AS r ON k.id = r.id
WHERE k.expires_at IS NOT NULL AND k.expires_at <= @now
  AND NOT EXISTS (SELECT 1 FROM @taken AS t WHERE t.id = r.id);
INSERT INTO dbo.sq_client_ids (id, queue, created_at, expires_at)
OUTPUT inserted.id INTO @claimed
SELECT r.id, r.queue, r.created_at, NULL
FROM @remember AS r
WHERE NOT EXISTS (SELECT 1 FROM @held AS h WHERE h.id = r.id)
  AND NOT EXISTS (SELECT 1 FROM @taken AS t WHERE t.id = r.id);
INSERT INTO dbo.sq_items (id, queue, payload, created_at, visible_at, priority, group_key, dedup_key, remember_id,
                          attributes)
OUTPUT inserted.id, inserted.queue INTO @inserted
SELECT i.id, i.queue, j.payload, i.created_at, i.visible_at, i.priority, i.group_key, i.dedup_key, i.remember,
       j.attributes
FROM OPENJSON(@items) WITH (n INT, payload NVARCHAR(MAX), attributes NVARCHAR(MAX)) AS j
JOIN @item AS i ON i.n = j.n
WHERE i.fresh = 1
  AND NOT EXISTS (SELECT 1 FROM @taken AS t WHERE t.id = i.id)
  AND (i.remember = 0 OR EXISTS (SELECT 1 FROM @claimed AS c WHERE c.id = i.id))
ORDER BY i.n
OPTION (FORCE ORDER);
INSERT INTO @holder (id, queue, created_at)
SELECT h.id, h.queue, h.created_at
FROM @held AS h
WHERE NOT EXISTS (SELECT 1 FROM @claimed AS c WHERE c.id = h.id)
  AND (h.expires_at IS NULL OR NOT EXISTS (SELECT 1 FROM @taken AS t WHERE t.id = h.id))
UNION ALL
SELECT x.id, x.queue, x.created_at
FROM @remember AS r
JOIN @taken AS t ON t.id = r.id
JOIN dbo.sq_items AS x WITH (FORCESEEK) ON x.id = r.id
WHERE NOT EXISTS (SELECT 1 FROM @held AS h WHERE h.id = r.id AND h.expires_at IS NULL);
INSERT INTO @answer (n, id, created_at, created, held_by)
SELECT i.n,
       IIF(i.key_taken = 0, i.key_item_id, i.id),
       CASE
           WHEN i.key_taken = 0 THEN i.key_created_at
           WHEN i.fresh = 1 AND s.id IS NOT NULL THEN i.created_at
           WHEN i.remember = 1 AND h.queue = i.queue THEN h.created_at
       END,
       CASE
           WHEN i.key_taken = 0 THEN 0
           WHEN i.fresh = 1 AND s.id IS NOT NULL THEN 1
           WHEN i.remember = 1 AND h.queue = i.queue THEN 0
       END,
       h.queue
FROM @item AS i
LEFT JOIN @inserted AS s ON s.id = i.id
LEFT JOIN @holder AS h ON h.id = i.id
WHERE i.leader = i.n;
INSERT INTO @answer (n, id, created_at, created, held_by)
SELECT i.n, a.id, a.created_at, IIF(a.created IS NULL, NULL, 0), a.held_by
FROM @item AS i
JOIN @answer AS a ON a.n = i.leader
WHERE i.leader <> i.n;
SET @results = (
    SELECT a.n, a.id, a.created_at, a.created, a.held_by
    FROM @answer AS a
    ORDER BY a.n
    FOR JSON PATH, INCLUDE_NULL_VALUES
);
END
GO
