-- simplequeue's procedures and functions for SQL Server, as they are now: every `simplequeue migrate`
-- applies this file after the pending migrations, in their transaction under the migration lock
-- (store/mssql/migrate.py), so that the database runs this release's code whatever version it came
-- from. Migrations hold tables, columns and data moves only; a procedure lives here, once. The file
-- is split at its GO lines (store/migrations.py, split_statements) and each batch is sent whole: a
-- CREATE PROCEDURE or CREATE FUNCTION must stand alone in its batch, with the semicolons of its
-- body. CREATE OR ALTER (SQL Server 2016 SP1) makes applying it again harmless, and keeps each
-- procedure's grants. Dropping a procedure, or changing what CREATE OR ALTER cannot (a function's
-- kind), is a migration's job. `simplequeue migrate --print` writes the same batches for sqlcmd or
-- SSMS, after the migrations.
--
-- Pushing is a stored procedure, so that an application can push inside its own transaction (the
-- item exists if and only if the application's transaction commits), and the service pushes through
-- the same procedure: one implementation of a push's rules.
--
-- Objects:
-- * dbo.sq_push_items: the push itself, in the order every push takes its locks: the queues
--   registered, the dedup keys claimed, the ordered groups' turns taken, the ids claimed, the items
--   inserted. The service calls it (queries.sql, push_batch) with the JSON that params.push_json
--   builds, and its test clock as @now. Internal: not for applications.
-- * dbo.sq_push_batch @items and dbo.sq_push: for applications. They check what the service's API
--   checks (names, keys, payloads, the limits in dbo.sq_settings: migration 0006), then call
--   dbo.sq_push_items with the server's clock, inside the caller's transaction (or their own,
--   outside one).
-- * dbo.sq_utf8_bytes: a payload's size as UTF-8, which the limit counts (SQL Server 2016 has no
--   UTF-8 collation to measure it with).
--
-- Permissions. An application needs no right on any table:
--     GRANT EXECUTE ON dbo.sq_push TO app_role;
--     GRANT EXECUTE ON dbo.sq_push_batch TO app_role;
--     GRANT EXECUTE ON dbo.sq_publish TO app_role;   -- publishing to topics
-- Ownership chaining does the rest: the procedures, the function and the tables all belong to dbo
-- (the schema's owner), so SQL Server checks EXECUTE on the procedure called and nothing it touches
-- (dbo.sq_push_items, dbo.sq_settings, dbo.sq_items, ...). Call them in the queue's database: chaining
-- does not cross databases. Nothing here uses dynamic SQL, which would break the chain.
--
-- Errors (THROW, severity 16; the caller's transaction stays open and usable after these three, so
-- that it may still commit its own work; any other error rolls it back, as XACT_ABORT does):
-- * 51400: bad input, one line naming the item and field: "simplequeue: items[2].queue must be ...".
-- * 51413: a payload over max_payload_bytes.
-- * 51409: an item's id exists in another queue (or was pushed with a dedup_key): nothing of the call
--   is kept. A dedup key or a remembered id of the same queue is not an error: the item answers
--   created = 0 with the id of the item that holds it.

-- UTF-16 code units counted by what each takes in UTF-8: 1 below U+0080, 2 below U+0800, 3 for the
-- rest of the BMP, and 2 for each half of a surrogate pair (4 for the character). Positions are
-- walked in chunks of 4000, since SUBSTRING into an NVARCHAR(MAX) costs its offset; the binary
-- collation makes SUBSTRING count code units, not characters (as _SC collations would).
CREATE OR ALTER FUNCTION dbo.sq_utf8_bytes (@text NVARCHAR(MAX))
RETURNS TABLE
AS
RETURN
WITH digits AS (SELECT d.x FROM (VALUES (0), (0), (0), (0), (0), (0), (0), (0), (0), (0)) AS d(x)),
positions AS (
    SELECT TOP (4000) ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) AS k
    FROM digits AS a CROSS JOIN digits AS b CROSS JOIN digits AS c CROSS JOIN digits AS e
),
chunks AS (
    SELECT TOP ((DATALENGTH(@text) / 2 + 3999) / 4000) ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) - 1 AS chunk
    FROM digits AS a CROSS JOIN digits AS b CROSS JOIN digits AS c CROSS JOIN digits AS e
    CROSS JOIN digits AS f CROSS JOIN digits AS g
)
SELECT COALESCE(SUM(CASE
           WHEN u.code < 128 THEN 1
           WHEN u.code < 2048 OR u.code BETWEEN 55296 AND 57343 THEN 2
           ELSE 3
       END), 0) AS bytes
FROM chunks AS h
CROSS APPLY (
    SELECT CAST(SUBSTRING(@text COLLATE Latin1_General_100_BIN2, h.chunk * 4000 + 1, 4000) AS NVARCHAR(4000)) AS part
) AS p
JOIN positions AS t ON t.k <= DATALENGTH(p.part) / 2
CROSS APPLY (SELECT UNICODE(SUBSTRING(p.part, t.k, 1)) AS code) AS u;
GO

-- The push. @items is a JSON array with one element per item of the call, in any order:
-- {"n", "id", "queue", "payload", "created_at", "priority", "group_key", "dedup_key", "delay_seconds",
-- "delay_micros", "not_before", "remember", "attributes"} (params.push_json): n the item's place in
-- the call, payload a JSON string holding the payload's text (so that the text arrives exactly),
-- times naive UTC text, the delay as whole seconds and microseconds (one DATEADD(MICROSECOND) of all
-- of it would overflow its INT past 35.8 minutes), remember 1 when the id is the item's idempotency
-- key (a producer's id without a dedup_key), attributes a JSON string holding the item's message
-- attributes as the service writes them (domain/attributes.py), or null, inserted as they are. @now
-- is the push's one clock: SYSUTCDATETIME() unless a test binds its own. @results: one element per
-- item, by n: {"n", "id", "created_at", "created",
-- "held_by"}: created 1 (inserted), 0 (a duplicate: id and created_at are the item's that holds the
-- dedup key or the remembered id), or null (refused: its id is held by an item of another queue,
-- held_by, or by one pushed with a dedup_key, or it repeats an id of the call). Refusing is the
-- caller's: all or nothing rolls the transaction back, skip_existing answers none for that item.
--
-- Rules (docs/concepts.md, Idempotency; store/pushes.py says them for the other engines): of items
-- that repeat a dedup key, or a remembered id of their queue, the first speaks for the others,
-- which answer its answer as duplicates. An item whose key another item holds is that item's
-- duplicate. Of the others, each id is inserted once (its first item); an item whose id exists is
-- not inserted, nor is one whose remembered id it could not claim; such an item is a retry of what
-- holds the id if that is of its queue (and its id remembered), else refused.
--
-- Locks, in the order every writer takes them (each step says why):
-- 1. The queues, registered before any item is locked: every writer takes a queue's row before its
--    items (delete_queue does). The unlocked probe keeps pushes to existing queues from serialising
--    on their rows; UPDLOCK, HOLDLOCK makes two pushers that both found a queue missing insert it
--    once. A refused push rolls its new queues back with it.
-- 2. The dedup keys, read into a table keyed like sq_dedup and in its collation, so that the seeks
--    follow the key's order and concurrent pushes lock their keys in one order. UPDLOCK, HOLDLOCK,
--    FORCESEEK locks every claimed key, present or not, until commit (a key-range lock where it is
--    missing): of concurrent pushes with one key, one inserts it and the others wait, then find its
--    row. A key whose window has passed is taken over. A window that runs from the send (the queue's
--    dedup_window_from) starts at the claim; one that runs from the finish starts when its item
--    finishes (NULL until then). No MERGE: its upsert needs the same HOLDLOCK, and it has a history
--    of bugs with filtered indexes on the target.
-- 3. Ordered groups: pushes into a queue's groups take turns on the queue's row (UPDLOCK, HOLDLOCK
--    until commit), as a redrive does, so that a group's seq order is its commit order: an item's
--    IDENTITY seq is drawn before its row reaches sq_items_group, and without the turn a pop could
--    find a later item of a group the head while an earlier one, already numbered, was not yet
--    there to block it. @grouped has the binary collation ("Orders" is not "orders") and a key, so
--    that pushes lock their queues in one order.
-- 4. The ids that exist, found and locked: UPDLOCK, HOLDLOCK takes a key-range lock on every probed
--    id of the unique id index, present or not, until commit, so that no other transaction inserts a
--    missing id meanwhile (it waits, then finds it here) and none deletes an existing one. FORCESEEK
--    keeps it to one seek per id (a scan under HOLDLOCK would range-lock the whole index); @ids is
--    keyed by id, so the seeks follow the index's order and concurrent pushes lock in one order
--    rather than deadlock. The id index's key only: purge_dead, revive and delete_queue take the row
--    before that key, and a push that locked the key and then waited for the row would deadlock
--    with them. IGNORE_DUP_KEY would take the same locks for every writer and hide duplicates.
-- 5. The remembered ids, claimed in sq_client_ids so that a retry after the item finished still finds
--    it: held by an item that has the id (@taken), or by a claim whose window has not passed
--    (expires_at NULL or later than @now); an id nothing holds is claimed (inserted, or a passed
--    claim taken over). Locked as the ids were, and always after the ids in sq_items: completions,
--    purge_dead and delete_queue lock an item before its claim too.
-- 6. Fair ranks (domain/fairness.py), only when an item has a fairness key or its queue saw one
--    (one seek of sq_fair_keys): each fair queue's keys of the call ('' for its unkeyed items) are
--    locked in sq_fair_keys as the dedup keys are (UPDLOCK, HOLDLOCK, FORCESEEK; @fair is keyed
--    like the table), so that concurrent pushes of a key take turns; a key's items take
--    consecutive ranks after the later of its last rank and the queue's virtual time at the
--    priority of its first item (one less than the lowest rank of the queue's due ready items of
--    that priority; with none, the highest rank the queue handed out).
-- 7. The items, in the call's order: INSERT ... SELECT ... ORDER BY fixes the order in which
--    IDENTITY numbers them, and seq breaks pop's ties on created_at. An item is visible at the later
--    of not_before and @now plus its delay (MAX over VALUES is GREATEST before SQL Server 2022, and
--    skips a NULL). The payloads are read from @items as they are inserted, never copied into a
--    table variable; FORCE ORDER keeps OPENJSON the outer input, read once.
-- Then what holds each remembered id not inserted: the item that has it, else the claim. While an
-- item that claimed its id lives its claim mirrors it, so a retry is answered from the claim, read
-- under the lock already held; an item that has the id without a claim of its own (a dedup_key, an
-- id the service made, or pushed before v5) is read from sq_items by seek, without hints.
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
    fairness_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
    fair_rank FLOAT NOT NULL DEFAULT 0,
    rank_priority BIGINT NULL,  -- NULL: its priority (its queue does not age priorities)
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
DECLARE @fair TABLE (
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    fairness_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    items INT NOT NULL,
    priority BIGINT NOT NULL,  -- the rank of the key's first item in the call
    start FLOAT NULL,
    weight FLOAT NOT NULL DEFAULT 1,
    PRIMARY KEY (queue, fairness_key)
);
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
INSERT INTO @item (n, id, queue, created_at, visible_at, priority, group_key, dedup_key, fairness_key, remember,
                   fresh)
SELECT j.n, j.id, j.queue, CAST(j.created_at AS DATETIME2(7)),
       (SELECT MAX(v.at) FROM (VALUES
           (CAST(j.not_before AS DATETIME2(7))),
           (DATEADD(MICROSECOND, j.delay_micros, DATEADD(SECOND, j.delay_seconds, @now)))
       ) AS v(at)),
       j.priority, j.group_key, j.dedup_key, j.fairness_key, j.remember, 0
FROM OPENJSON(@items) WITH (
    n INT, id UNIQUEIDENTIFIER, queue NVARCHAR(4000), created_at NVARCHAR(40), priority INT,
    group_key NVARCHAR(4000), dedup_key NVARCHAR(4000), fairness_key NVARCHAR(4000), delay_seconds INT,
    delay_micros INT, not_before NVARCHAR(40), remember BIT
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
-- An item's rank (domain/aging.py): its priority, less the whole periods of its queue's
-- priority_aging_seconds from the epoch to its created_at (floored before the epoch too: T-SQL's %
-- and / truncate toward zero). A seek of each item's queue; nothing changes when none ages priorities.
UPDATE i
SET rank_priority = i.priority - (e.s - ((e.s % q.priority_aging_seconds) + q.priority_aging_seconds)
                                      % q.priority_aging_seconds) / q.priority_aging_seconds
FROM @item AS i
JOIN dbo.sq_queues AS q ON q.name = i.queue
CROSS APPLY (SELECT DATEDIFF_BIG(SECOND, CAST('1970-01-01' AS DATETIME2(7)), i.created_at) AS s) AS e
WHERE q.priority_aging_seconds IS NOT NULL;
IF EXISTS (SELECT 1 FROM @item AS i WHERE i.fairness_key IS NOT NULL)
   OR EXISTS (SELECT 1 FROM @item AS i WHERE EXISTS (SELECT 1 FROM dbo.sq_fair_keys AS f WHERE f.queue = i.queue))
BEGIN
    INSERT INTO @fair (queue, fairness_key, items, priority)
    SELECT s.queue, s.fairness_key, s.items, s.priority
    FROM (
        SELECT i.queue, COALESCE(i.fairness_key, N'') AS fairness_key, COALESCE(i.rank_priority, i.priority) AS priority,
               ROW_NUMBER() OVER (PARTITION BY i.queue, COALESCE(i.fairness_key, N'') ORDER BY i.n) AS nth,
               COUNT(*) OVER (PARTITION BY i.queue, COALESCE(i.fairness_key, N'')) AS items
        FROM @item AS i
    ) AS s
    WHERE s.nth = 1
      AND (EXISTS (SELECT 1 FROM @item AS g WHERE g.queue = s.queue AND g.fairness_key IS NOT NULL)
           OR EXISTS (SELECT 1 FROM dbo.sq_fair_keys AS f WHERE f.queue = s.queue));
    INSERT INTO dbo.sq_fair_keys (queue, fairness_key, last_rank)
    SELECT c.queue, c.fairness_key, 0
    FROM @fair AS c
    WHERE NOT EXISTS (
        SELECT 1 FROM dbo.sq_fair_keys AS f WITH (UPDLOCK, HOLDLOCK, FORCESEEK)
        WHERE f.queue = c.queue AND f.fairness_key = c.fairness_key
    );
    UPDATE c
    SET start = (SELECT MAX(v.r) FROM (VALUES (f.last_rank), (COALESCE(
        (SELECT TOP (1) x.fair_rank - 1 FROM dbo.sq_items AS x
         WHERE x.queue = c.queue AND x.status = 'ready' AND x.rank_priority = c.priority AND x.visible_at <= @now
         ORDER BY x.rank_priority DESC, x.fair_rank),
        (SELECT MAX(k.last_rank) FROM dbo.sq_fair_keys AS k WHERE k.queue = c.queue),
        0))) AS v(r)),
        weight = f.weight
    FROM @fair AS c
    JOIN dbo.sq_fair_keys AS f WITH (UPDLOCK, HOLDLOCK, FORCESEEK)
        ON f.queue = c.queue AND f.fairness_key = c.fairness_key;
    -- A key's items are 1/weight apart: a key of weight 2 takes two turns to another's one.
    UPDATE f
    SET last_rank = c.start + c.items / f.weight
    FROM dbo.sq_fair_keys AS f WITH (FORCESEEK)
    JOIN @fair AS c ON f.queue = c.queue AND f.fairness_key = c.fairness_key;
    WITH ranked AS (
        SELECT i.fair_rank, c.start + ROW_NUMBER() OVER (
                   PARTITION BY i.queue, COALESCE(i.fairness_key, N'') ORDER BY i.n) / c.weight AS rank
        FROM @item AS i
        JOIN @fair AS c ON c.queue = i.queue AND c.fairness_key = COALESCE(i.fairness_key, N'')
    )
    UPDATE ranked SET fair_rank = rank;
END;
INSERT INTO dbo.sq_items (id, queue, payload, created_at, visible_at, priority, group_key, dedup_key, remember_id,
                          attributes, fairness_key, fair_rank, rank_priority)
OUTPUT inserted.id, inserted.queue INTO @inserted
SELECT i.id, i.queue, j.payload, i.created_at, i.visible_at, i.priority, i.group_key, i.dedup_key, i.remember,
       j.attributes, i.fairness_key, i.fair_rank, COALESCE(i.rank_priority, i.priority)
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

-- Push items from an application, inside its transaction: @items is a JSON array of objects, each
-- {"queue" (required), "payload" (required: any JSON value), "priority", "delay_seconds",
-- "not_before", "group_key", "dedup_key", "fairness_key", "id", "created_at"} (times ISO 8601 with a zone: "Z" or
-- "+01:00"). One result set: (id UNIQUEIDENTIFIER, created BIT), one row per element, in order;
-- created = 0 for a duplicate (its dedup_key, or its id with no dedup_key, is held by an item of its
-- queue, whose id it answers). All or nothing: 51409 if any item is refused.
-- The checks are the service's (domain/names.py, domain/payloads.py), done before anything is
-- written: the first problem, by place, is the error. Numbers and texts are read from the JSON
-- leniently ("5" is a priority of 5). A string payload is stored re-escaped by STRING_ESCAPE (the
-- same JSON value: "a/b" may read "a\/b"); other payloads as written.
-- Inside a transaction the push runs under a savepoint, so that a refusal (514xx) undoes only the
-- push and leaves the caller's transaction usable (XACT_ABORT OFF just for the THROW); outside one
-- it runs in its own.
CREATE OR ALTER PROCEDURE dbo.sq_push_batch
    @items NVARCHAR(MAX)
AS
BEGIN
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = SYSUTCDATETIME();
DECLARE @max_bytes BIGINT = COALESCE(
    (SELECT TRY_CAST(s.value AS BIGINT) FROM dbo.sq_settings AS s WHERE s.name = N'max_payload_bytes'), 262144
);
DECLARE @max_depth INT = COALESCE(
    (SELECT TRY_CAST(s.value AS INT) FROM dbo.sq_settings AS s WHERE s.name = N'max_payload_depth'), 64
);
DECLARE @code INT = 51400;
DECLARE @problem NVARCHAR(2048);
DECLARE @push NVARCHAR(MAX);
DECLARE @results NVARCHAR(MAX);
DECLARE @own BIT = 0;
DECLARE @in TABLE (
    n INT NOT NULL PRIMARY KEY,
    element_type TINYINT NOT NULL,
    queue NVARCHAR(4000) NULL,
    payload NVARCHAR(MAX) NULL,
    payload_type TINYINT NULL,
    priority NVARCHAR(4000) NULL,
    delay_seconds NVARCHAR(4000) NULL,
    not_before NVARCHAR(4000) NULL,
    group_key NVARCHAR(4000) NULL,
    dedup_key NVARCHAR(4000) NULL,
    fairness_key NVARCHAR(4000) NULL,
    id NVARCHAR(4000) NULL,
    created_at NVARCHAR(4000) NULL,
    payload_bytes BIGINT NULL,
    payload_depth INT NULL
);
IF @items IS NULL OR ISJSON(@items) = 0
   OR SUBSTRING(@items, PATINDEX(N'%[^ ' + NCHAR(9) + NCHAR(10) + NCHAR(13) + N']%', @items), 1) <> N'['
BEGIN
    SET XACT_ABORT OFF;
    THROW 51400, N'simplequeue: @items must be a JSON array of items', 1;
END;
INSERT INTO @in (
    n, element_type, queue, payload, payload_type, priority, delay_seconds, not_before, group_key,
    dedup_key, fairness_key, id, created_at
)
SELECT CAST(e.[key] AS INT), e.[type], f.queue,
       CASE p.[type]
           WHEN 0 THEN N'null'
           WHEN 1 THEN N'"' + STRING_ESCAPE(p.value, 'json') + N'"'
           ELSE p.value
       END,
       p.[type], f.priority, f.delay_seconds, f.not_before, f.group_key, f.dedup_key, f.fairness_key, f.id,
       f.created_at
FROM OPENJSON(@items) AS e
OUTER APPLY OPENJSON(IIF(e.[type] = 5, e.value, NULL)) WITH (
    queue NVARCHAR(4000) '$.queue',
    priority NVARCHAR(4000) '$.priority',
    delay_seconds NVARCHAR(4000) '$.delay_seconds',
    not_before NVARCHAR(4000) '$.not_before',
    group_key NVARCHAR(4000) '$.group_key',
    dedup_key NVARCHAR(4000) '$.dedup_key',
    fairness_key NVARCHAR(4000) '$.fairness_key',
    id NVARCHAR(4000) '$.id',
    created_at NVARCHAR(4000) '$.created_at'
) AS f
OUTER APPLY (
    SELECT TOP (1) v.value, v.[type]
    FROM OPENJSON(IIF(e.[type] = 5, e.value, NULL)) AS v
    WHERE v.[key] = N'payload' COLLATE Latin1_General_100_BIN2
) AS p;
UPDATE i
SET payload_bytes = CASE
    WHEN DATALENGTH(i.payload) / 2 * 3 <= @max_bytes THEN 0 -- under the limit whatever its characters
    WHEN DATALENGTH(i.payload) / 2 > @max_bytes THEN DATALENGTH(i.payload) / 2
    ELSE (SELECT u.bytes FROM dbo.sq_utf8_bytes(i.payload) AS u)
END
FROM @in AS i
WHERE i.payload IS NOT NULL;
WITH nest (n, depth, node) AS (
    SELECT i.n, 1, CAST(i.payload AS NVARCHAR(MAX)) COLLATE Latin1_General_100_BIN2
    FROM @in AS i
    WHERE i.payload_type IN (4, 5)
      AND (DATALENGTH(i.payload)
           - DATALENGTH(REPLACE(REPLACE(i.payload COLLATE Latin1_General_100_BIN2, N'[', N''), N'{', N''))) / 2 > @max_depth
    UNION ALL
    SELECT nest.n, nest.depth + 1, CAST(c.value AS NVARCHAR(MAX)) COLLATE Latin1_General_100_BIN2
    FROM nest
    CROSS APPLY OPENJSON(nest.node) AS c
    WHERE c.[type] IN (4, 5) AND nest.depth <= @max_depth
)
UPDATE i
SET payload_depth = d.depth
FROM @in AS i
JOIN (SELECT nest.n, MAX(nest.depth) AS depth FROM nest GROUP BY nest.n) AS d ON d.n = i.n
OPTION (MAXRECURSION 0);
SELECT TOP (1) @problem = CONCAT(N'simplequeue: items[', v.n, N']', v.problem)
FROM (
    SELECT i.n, CASE
        WHEN i.element_type <> 5 THEN N' must be a JSON object'
        WHEN i.queue IS NULL THEN N'.queue is required'
        WHEN DATALENGTH(i.queue) NOT BETWEEN 2 AND 256 OR DATALENGTH(i.queue) <> DATALENGTH(RTRIM(i.queue))
             OR i.queue COLLATE Latin1_General_100_BIN2 LIKE N'%[^A-Za-z0-9._-]%'
            THEN N'.queue must be 1..128 characters of [A-Za-z0-9._-]'
        WHEN i.payload_type IS NULL THEN N'.payload is required'
        WHEN CHARINDEX(N'\u0000' COLLATE Latin1_General_100_BIN2, i.payload COLLATE Latin1_General_100_BIN2) > 0
            THEN N'.payload must not contain NUL characters (\u0000)'
        WHEN i.payload_bytes > @max_bytes
            THEN CONCAT(N'.payload is larger than the limit of ', @max_bytes, N' bytes as JSON')
        WHEN i.payload_depth > @max_depth
            THEN CONCAT(N'.payload nests arrays and objects deeper than ', @max_depth, N' levels')
        WHEN i.priority IS NOT NULL AND TRY_CAST(i.priority AS INT) IS NULL
            THEN N'.priority must be a 32-bit integer'
        WHEN i.delay_seconds IS NOT NULL AND (TRY_CAST(i.delay_seconds AS FLOAT) IS NULL
             OR TRY_CAST(i.delay_seconds AS FLOAT) NOT BETWEEN 0 AND 31536000)
            THEN N'.delay_seconds must be from 0 to 31536000'
        WHEN i.not_before IS NOT NULL AND (TRY_CAST(i.not_before AS DATETIMEOFFSET(7)) IS NULL
             OR (i.not_before COLLATE Latin1_General_100_BIN2 NOT LIKE N'%Z'
                 AND i.not_before COLLATE Latin1_General_100_BIN2 NOT LIKE N'%[+-][0-9][0-9]:[0-9][0-9]'))
            THEN N'.not_before must be an ISO 8601 time with a zone (Z or +hh:mm)'
        WHEN i.created_at IS NOT NULL AND (TRY_CAST(i.created_at AS DATETIMEOFFSET(7)) IS NULL
             OR (i.created_at COLLATE Latin1_General_100_BIN2 NOT LIKE N'%Z'
                 AND i.created_at COLLATE Latin1_General_100_BIN2 NOT LIKE N'%[+-][0-9][0-9]:[0-9][0-9]'))
            THEN N'.created_at must be an ISO 8601 time with a zone (Z or +hh:mm)'
        WHEN i.id IS NOT NULL AND TRY_CONVERT(UNIQUEIDENTIFIER, i.id) IS NULL
            THEN N'.id must be a UUID'
        WHEN i.group_key IS NOT NULL AND (DATALENGTH(i.group_key) NOT BETWEEN 2 AND 256
             OR DATALENGTH(i.group_key) <> DATALENGTH(RTRIM(i.group_key))
             OR CHARINDEX(NCHAR(0) COLLATE Latin1_General_100_BIN2, i.group_key COLLATE Latin1_General_100_BIN2) > 0)
            THEN N'.group_key must be 1..128 UTF-16 code units, without NUL characters or a trailing space'
        WHEN i.dedup_key IS NOT NULL AND (DATALENGTH(i.dedup_key) NOT BETWEEN 2 AND 256
             OR DATALENGTH(i.dedup_key) <> DATALENGTH(RTRIM(i.dedup_key))
             OR CHARINDEX(NCHAR(0) COLLATE Latin1_General_100_BIN2, i.dedup_key COLLATE Latin1_General_100_BIN2) > 0)
            THEN N'.dedup_key must be 1..128 UTF-16 code units, without NUL characters or a trailing space'
        WHEN i.fairness_key IS NOT NULL AND (DATALENGTH(i.fairness_key) NOT BETWEEN 2 AND 256
             OR DATALENGTH(i.fairness_key) <> DATALENGTH(RTRIM(i.fairness_key))
             OR CHARINDEX(NCHAR(0) COLLATE Latin1_General_100_BIN2, i.fairness_key COLLATE Latin1_General_100_BIN2) > 0)
            THEN N'.fairness_key must be 1..128 UTF-16 code units, without NUL characters or a trailing space'
    END AS problem
    FROM @in AS i
) AS v
WHERE v.problem IS NOT NULL
ORDER BY v.n;
IF @problem IS NOT NULL
BEGIN
    IF @problem LIKE N'%.payload is larger than the limit%' SET @code = 51413;
    SET XACT_ABORT OFF;
    THROW @code, @problem, 1;
END;
SET @push = (
    SELECT i.n,
           COALESCE(TRY_CONVERT(UNIQUEIDENTIFIER, i.id), NEWID()) AS id,
           i.queue,
           i.payload,
           CONVERT(NVARCHAR(40), COALESCE(
               CAST(SWITCHOFFSET(TRY_CAST(i.created_at AS DATETIMEOFFSET(7)), N'+00:00') AS DATETIME2(7)), @now
           ), 126) AS created_at,
           COALESCE(TRY_CAST(i.priority AS INT), 0) AS priority,
           i.group_key,
           i.dedup_key,
           i.fairness_key,
           CAST(COALESCE(ROUND(TRY_CAST(i.delay_seconds AS FLOAT) * 1000000, 0), 0) AS BIGINT) / 1000000 AS delay_seconds,
           CAST(COALESCE(ROUND(TRY_CAST(i.delay_seconds AS FLOAT) * 1000000, 0), 0) AS BIGINT) % 1000000 AS delay_micros,
           CONVERT(NVARCHAR(40),
               CAST(SWITCHOFFSET(TRY_CAST(i.not_before AS DATETIMEOFFSET(7)), N'+00:00') AS DATETIME2(7)), 126
           ) AS not_before,
           IIF(i.id IS NOT NULL AND i.dedup_key IS NULL, 1, 0) AS remember
    FROM @in AS i
    ORDER BY i.n
    FOR JSON PATH, INCLUDE_NULL_VALUES
);
IF @@TRANCOUNT = 0
BEGIN
    SET @own = 1;
    BEGIN TRANSACTION;
END
ELSE
    SAVE TRANSACTION sq_push_batch;
EXEC dbo.sq_push_items @items = @push, @now = @now, @results = @results OUTPUT;
SELECT TOP (1) @problem = CONCAT(
    N'simplequeue: item id ', LOWER(CONVERT(NVARCHAR(36), r.id)),
    IIF(r.held_by IS NULL, N' already exists', CONCAT(N' exists in another queue (', r.held_by, N')'))
)
FROM OPENJSON(@results) WITH (n INT, id UNIQUEIDENTIFIER, created BIT, held_by NVARCHAR(128)) AS r
WHERE r.created IS NULL
ORDER BY r.n;
IF @problem IS NOT NULL
BEGIN
    IF @own = 1 ROLLBACK TRANSACTION;
    ELSE ROLLBACK TRANSACTION sq_push_batch;
    SET XACT_ABORT OFF;
    THROW 51409, @problem, 1;
END;
IF @own = 1 COMMIT TRANSACTION;
SELECT r.id, r.created
FROM OPENJSON(@results) WITH (n INT, id UNIQUEIDENTIFIER, created BIT) AS r
ORDER BY r.n;
END
GO

-- Push one item from an application: dbo.sq_push_batch with one element, so the same checks,
-- savepoint and errors; one row (id, created). @payload is JSON text (N'{"order": 42}', N'"text"',
-- N'null'). The names and keys are declared wider than they may be, so that an overlong one is refused
-- (51400) rather than cut short, as a procedure's parameter silently would be. @fairness_key came
-- last, so that calls by position written before it still mean the same (and altering a procedure
-- keeps its grants).
CREATE OR ALTER PROCEDURE dbo.sq_push
    @queue NVARCHAR(4000),
    @payload NVARCHAR(MAX),
    @priority INT = NULL,
    @delay_seconds FLOAT = NULL,
    @group_key NVARCHAR(4000) = NULL,
    @dedup_key NVARCHAR(4000) = NULL,
    @id UNIQUEIDENTIFIER = NULL,
    @created_at DATETIMEOFFSET = NULL,
    @not_before DATETIMEOFFSET = NULL,
    @fairness_key NVARCHAR(4000) = NULL
AS
BEGIN
SET NOCOUNT ON;
DECLARE @item NVARCHAR(MAX);
DECLARE @items NVARCHAR(MAX);
IF @queue IS NULL
BEGIN
    SET XACT_ABORT OFF;
    THROW 51400, N'simplequeue: @queue is required', 1;
END;
IF @payload IS NULL OR ISJSON(N'[' + @payload + N']') = 0
   OR (SELECT COUNT(*) FROM OPENJSON(N'[' + @payload + N']')) <> 1
BEGIN
    SET XACT_ABORT OFF;
    THROW 51400, N'simplequeue: @payload must be one JSON value (N''null'' for null)', 1;
END;
SET @item = (
    SELECT @queue AS queue, @priority AS priority, @delay_seconds AS delay_seconds, @not_before AS not_before,
           @group_key AS group_key, @dedup_key AS dedup_key, @id AS id, @created_at AS created_at,
           @fairness_key AS fairness_key
    FOR JSON PATH, WITHOUT_ARRAY_WRAPPER
);
SET @items = N'[' + STUFF(@item, LEN(@item), 1, N',"payload":' + @payload + N'}') + N']';
EXEC dbo.sq_push_batch @items = @items;
END
GO

-- Publish to a topic from an application, inside its transaction: an item of the queue
-- simplequeue.publications (domain/publications.py), pushed by dbo.sq_push, which the service's relay
-- publishes once the transaction commits, with this item's id as the message's id; one row (id,
-- created). @message is JSON text (N'{"order": 42}', N'"text"'); @attributes JSON text of
-- {name: {"type", "value"}}. A FIFO topic's publications form one group there, so that the relay
-- publishes them in order. What needs the topic (that it exists, its subscriptions' filters) is the
-- relay's to find: a publication it cannot publish dies there, with the reason.
CREATE OR ALTER PROCEDURE dbo.sq_publish
    @topic NVARCHAR(4000),
    @message NVARCHAR(MAX),
    @subject NVARCHAR(4000) = NULL,
    @attributes NVARCHAR(MAX) = NULL,
    @message_id UNIQUEIDENTIFIER = NULL,
    @group_key NVARCHAR(4000) = NULL,
    @dedup_key NVARCHAR(4000) = NULL
AS
BEGIN
SET NOCOUNT ON;
DECLARE @fifo BIT = CASE WHEN @topic LIKE N'%.fifo' THEN 1 ELSE 0 END;
DECLARE @payload NVARCHAR(MAX);
DECLARE @relay_group NVARCHAR(4000);
IF @topic IS NULL OR LEN(@topic) NOT BETWEEN 1 AND 256
   OR LEFT(@topic, LEN(@topic) - 5 * @fifo) COLLATE Latin1_General_100_BIN2 LIKE N'%[^A-Za-z0-9_-]%'
BEGIN
    SET XACT_ABORT OFF;
    THROW 51400, N'simplequeue: @topic is not a topic''s name', 1;
END;
IF @message IS NULL OR ISJSON(N'[' + @message + N']') = 0
   OR (SELECT COUNT(*) FROM OPENJSON(N'[' + @message + N']')) <> 1
BEGIN
    SET XACT_ABORT OFF;
    THROW 51400, N'simplequeue: @message must be one JSON value (N''"text"'' for text)', 1;
END;
IF (@fifo = 1 AND @group_key IS NULL) OR (@fifo = 0 AND (@group_key IS NOT NULL OR @dedup_key IS NOT NULL))
BEGIN
    SET XACT_ABORT OFF;
    THROW 51400, N'simplequeue: a FIFO topic needs @group_key; another takes neither @group_key nor @dedup_key', 1;
END;
SET @payload = (
    SELECT @topic AS topic, @subject AS subject, JSON_QUERY(@attributes) AS attributes,
           @group_key AS [group], @dedup_key AS dedup_key
    FOR JSON PATH, WITHOUT_ARRAY_WRAPPER, INCLUDE_NULL_VALUES
);
-- The message goes in as the raw JSON it is (FOR JSON would quote a scalar's text), as sq_push's
-- payload does.
SET @payload = STUFF(@payload, LEN(@payload), 1, N',"message":' + @message + N'}');
SET @relay_group = CASE WHEN @fifo = 0 THEN NULL
                        WHEN LEN(@topic) <= 128 THEN @topic
                        ELSE LOWER(CONVERT(NVARCHAR(64), HASHBYTES('SHA2_256', CAST(@topic AS VARCHAR(4000))), 2)) END;
EXEC dbo.sq_push @queue = N'simplequeue.publications', @payload = @payload, @group_key = @relay_group,
    @id = @message_id;
END
GO
