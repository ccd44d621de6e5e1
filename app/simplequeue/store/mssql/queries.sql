-- Queries of the SQL Server dialect (pyodbc through aioodbc). Parameters are written :name; loading
-- compiles each occurrence to ODBC's ? marker, and the store binds them by name (store/queries.py).
-- Each name is written once per batch (a value read twice goes through the variable the batch
-- DECLAREs for it), since every occurrence is a marker of its own and a value sent with it.
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
-- * Floats (a backoff's random draw, a retry delay, backoff settings) are bound as text too and CAST
--   to FLOAT; optional numbers are bound as '' for none, like every optional value.
-- * Seconds that may be fractional are added to a time as whole seconds plus microseconds:
--   DATEADD(MICROSECOND, n, t) with all of them in n would overflow DATEADD's INT past 2^31 us
--   (about 35.8 minutes). The store splits delays it computes itself; fail splits its backoff here.
-- * Finish stamps (died_at, history's finished_at) are kept to the microsecond: the dead-letter and
--   history pages are keyed on them, and the cursor that carries one back is a Python datetime,
--   which has no 100-nanosecond digit for SYSUTCDATETIME()'s seventh one. The batches that stamp
--   them round @now first.
-- * Item rows carry the columns simplequeue.store.rows reads by name: the item's, its queue's
--   max_attempts and the batch's clock as now.

-- name: push_batch
-- A push is dbo.sq_push_items (store/mssql/procedures.sql, where its rules and locks
-- are explained), the procedure that applications call through dbo.sq_push and dbo.sq_push_batch
-- too: one implementation. Every item of the call goes in one JSON parameter (1000 items bound one
-- value each would pass SQL Server's limit of 2100 parameters per request), built by
-- params.push_json; the procedure claims the dedup keys and remembered ids, inserts, and answers one
-- row per item, by its place n: created 1 (inserted), 0 (a duplicate: id and created_at are those of
-- the item that holds its dedup key or id), or NULL (refused: the store raises ItemExists in
-- all-or-nothing mode, which rolls the transaction back, and answers None with skip_existing).
-- The procedure gives its answers as JSON (an OUTPUT parameter, which the application procedures
-- read too); this batch turns them into rows.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @items NVARCHAR(MAX) = :items;
DECLARE @results NVARCHAR(MAX);
EXEC dbo.sq_push_items @items = @items, @now = @now, @results = @results OUTPUT;
SELECT r.n, r.id, r.created_at, r.created
FROM OPENJSON(@results) WITH (n INT, id UNIQUEIDENTIFIER, created_at DATETIME2(7), created BIT) AS r
ORDER BY r.n;

-- fragment: retained
-- The oldest created_at a pop hands out: @now less the queue's message_retention_seconds (the
-- smallest DATETIME2 for a queue without one). An item past it is never handed out; the sweep
-- deletes it. Read once, before the claim, as the queue's other settings are.
DECLARE @retained DATETIME2(7) = COALESCE(
    (SELECT DATEADD(SECOND, -message_retention_seconds, @now) FROM dbo.sq_queues WHERE name = @queue),
    CAST('0001-01-01' AS DATETIME2(7))
);

-- fragment: pop_settings
-- What pop and pop_keyed read before they claim: the clock, the queue's settings, and whether
-- this batch may claim of it.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @max_attempts INT = (SELECT max_attempts FROM dbo.sq_queues WHERE name = @queue);
-- include: retained
DECLARE @lease_seconds INT = COALESCE(
    CAST(NULLIF(:lease_seconds, N'') AS INT), (SELECT lease_seconds FROM dbo.sq_queues WHERE name = @queue)
);
-- A queue with flow limits (`limited`) is popped the careful way (store.py: _pop_within_limits, its
-- row locked and its leases counted first), which says so (:limits_checked); this batch alone
-- claims nothing of it, as of a paused queue.
DECLARE @limits_checked BIT = CAST(:limits_checked AS BIT);
DECLARE @paused BIT = COALESCE((SELECT CASE WHEN paused = 1 OR (limited = 1 AND @limits_checked = 0) THEN 1 ELSE 0 END
                                FROM dbo.sq_queues WHERE name = @queue), 0);
DECLARE @max_items INT = CAST(:max_items AS INT);

-- name: pop
-- An atomic test-and-set: the CTE picks the first poppable rows and the UPDATE leases exactly the
-- rows it picked. Poppable: due; not an expired lease on its last attempt (the sweep makes that one
-- dead); not past its queue's retention (see retained); and for a grouped item, the head of its group: no live item of the group has a smaller seq.
-- Pop order: highest rank (its priority, aged: domain/aging.py), then lowest fair rank, then oldest
-- created_at, then first pushed. Two walks claim the
-- candidates: ready items along sq_items_ready (which holds no lease, so the walk never passes over
-- the leases in flight), and leases that ran out along sq_items_lapsed (a seek to the queue's range
-- cut off at @now: only those, sorted). Each locks at most TOP rows; the CTE keeps the first TOP of
-- both in pop order, the ones one walk over every live item found, and the UPDATE leases them. The
-- few rows locked and not taken (only when leases ran out) are free again at commit, at the end of
-- this batch. Each hint on the walks is load-bearing:
-- READCOMMITTEDLOCK: under READ_COMMITTED_SNAPSHOT (the Azure SQL Database default) READ COMMITTED
--   reads row versions, and READPAST/UPDLOCK would not make a locking claim; this takes locks anyway.
-- ROWLOCK: row locks only, never page locks or escalation to the table, with which READPAST would
--   skip whole pages or concurrent poppers would serialise.
-- READPAST: skip rows that another popper has locked instead of waiting for it.
-- UPDLOCK: take an update lock as each row is read, so that no other popper can claim it between
--   this SELECT and the UPDATE (no lost update, no double lease).
-- INDEX(sq_items_ready): walk the filtered ready index in (rank_priority DESC, fair_rank, created_at, seq) order and
--   stop after TOP rows; INDEX(sq_items_lapsed): seek the queue's expired leases. A queue table's
--   size swings faster than statistics follow it; with stale ones the optimizer may scan another
--   index and sort every ready row on each pop (PostgreSQL was seen doing exactly that: see
--   PLANNER_SETTINGS in postgres/store.py).
-- The group probe (the inner NOT EXISTS) deliberately carries READCOMMITTEDLOCK but NOT READPAST.
-- With READPAST it would skip an earlier item of the group that another transaction holds (a popper
-- leasing it, a worker completing it, a push not yet committed), find no live predecessor and hand
-- out a later item while the earlier one is still in flight: two items of one group at once. Locking
-- read committed instead waits briefly for the holder and reads the committed status: still live,
-- so this item waits its turn; or gone (completed, rolled back), so this item is the head now.
-- INDEX(sq_items_group) makes the probe a seek on the group's live rows; its filter is the probe's
-- literal predicate.
-- The queue's settings are read first: its max_attempts, and its lease when the pop names none ('').
-- include: pop_settings
WITH claimable AS (
    SELECT TOP (@max_items) x.seq, x.id, x.queue, x.payload, x.created_at, x.status, x.attempts,
           x.lease_token, x.visible_at, x.first_popped_at, x.priority, x.group_key, x.attributes, x.fairness_key,
           x.fair_rank, x.rank_priority
    FROM dbo.sq_items AS x WITH (FORCESEEK, ROWLOCK)
    WHERE x.seq IN (
        SELECT r.seq FROM (
            SELECT TOP (@max_items) w.seq
            FROM dbo.sq_items AS w WITH (INDEX(sq_items_ready), READCOMMITTEDLOCK, ROWLOCK, READPAST, UPDLOCK)
            WHERE w.queue = @queue AND w.status = 'ready' AND w.visible_at <= @now AND @paused = 0
              AND w.created_at >= @retained
              AND (w.group_key IS NULL OR NOT EXISTS (
                  SELECT 1
                  FROM dbo.sq_items AS e WITH (INDEX(sq_items_group), READCOMMITTEDLOCK)
                  WHERE e.queue = w.queue AND e.group_key = w.group_key AND e.seq < w.seq
                    AND e.group_key IS NOT NULL AND e.status IN ('ready', 'leased')))
            ORDER BY w.rank_priority DESC, w.fair_rank, w.created_at, w.seq
        ) AS r
        UNION ALL
        SELECT l.seq FROM (
            SELECT TOP (@max_items) w.seq
            FROM dbo.sq_items AS w WITH (INDEX(sq_items_lapsed), READCOMMITTEDLOCK, ROWLOCK, READPAST, UPDLOCK)
            WHERE w.queue = @queue AND w.status = 'leased' AND w.visible_at <= @now AND @paused = 0
              AND w.created_at >= @retained
              AND w.attempts < @max_attempts
              AND (w.group_key IS NULL OR NOT EXISTS (
                  SELECT 1
                  FROM dbo.sq_items AS e WITH (INDEX(sq_items_group), READCOMMITTEDLOCK)
                  WHERE e.queue = w.queue AND e.group_key = w.group_key AND e.seq < w.seq
                    AND e.group_key IS NOT NULL AND e.status IN ('ready', 'leased')))
            ORDER BY w.rank_priority DESC, w.fair_rank, w.created_at, w.seq
        ) AS l
    )
    ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
)
UPDATE claimable
SET status = 'leased',
    attempts = attempts + 1,
    lease_token = CAST(:lease_token AS UNIQUEIDENTIFIER),
    visible_at = DATEADD(SECOND, @lease_seconds, @now),
    first_popped_at = COALESCE(first_popped_at, @now)
OUTPUT inserted.seq, inserted.id, inserted.queue, inserted.payload, inserted.created_at, inserted.attempts,
       inserted.lease_token, inserted.visible_at, inserted.priority, inserted.group_key, inserted.attributes,
       inserted.fairness_key, inserted.fair_rank, inserted.rank_priority;

-- name: lock_keys
-- The careful pop of a queue whose keys have limits (store.py: _pop_by_keys), its turn on the keys
-- it takes from instead of on the queue's row: the first @walk poppable items in pop order (pop's
-- two walks, reading committed rows without claiming them), then the rows of their keys (N'' for
-- unkeyed items) in the order of each key's first item, at most @max_keys of them, locked to the end
-- of the transaction: UPDLOCK, ROWLOCK, READPAST, so that a key another popper holds is passed over,
-- never waited on, and pops of one queue take different keys side by side. Then, in statements of
-- their own that read what committed before the locks were had, what the pop may take of just those
-- keys: each one's cap (its own max_leased, else the queue's max_leased_per_key; NULL: none) and
-- unexpired leases (a seek of sq_items_key_leased each; the unkeyed items', a range of
-- sq_items_lapsed), its rate (its own rate_per_second, else the queue's rate_per_key_per_second;
-- NULL: none) and its bucket as stored (rate_tokens counted at rate_at; read under the lock, so no
-- other pop takes the same tokens), and its first poppable items in pop order, read after the lock
-- too: the walk read the queue's front before the locks, and a pop that committed in between may
-- have leased the very items it saw. A key's items are read one more than its cap leaves (pick,
-- domain/keys.py, tells from the extra one that its limit cut it), at most @max_keys + 1 (the pop
-- takes @max_keys); its rate's tokens are counted by the store, which leases no more than they
-- allow. Keyed items along sq_items_key_ready and sq_items_key_leased, unkeyed along sq_items_ready
-- and sq_items_lapsed; each branch runs only for its kind of key. One row per item (seq, place in
-- pop order among all returned), or a row with no seq for a key with none, with its key's columns
-- and the batch's clock.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @max_attempts INT = (SELECT max_attempts FROM dbo.sq_queues WHERE name = @queue);
-- include: retained
DECLARE @paused BIT = COALESCE((SELECT paused FROM dbo.sq_queues WHERE name = @queue), 0);
DECLARE @walk INT = CAST(:walk AS INT);
DECLARE @max_keys INT = CAST(:max_keys AS INT);
DECLARE @walked TABLE (seq BIGINT NOT NULL PRIMARY KEY, k NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
                       place BIGINT NOT NULL);
DECLARE @locked TABLE (k NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY);
INSERT INTO @walked (seq, k, place)
SELECT TOP (@walk) c.seq, COALESCE(c.fairness_key, N''),
       ROW_NUMBER() OVER (ORDER BY c.rank_priority DESC, c.fair_rank, c.created_at, c.seq)
FROM (
    SELECT r.seq, r.rank_priority, r.fair_rank, r.created_at, r.fairness_key FROM (
        SELECT TOP (@walk) w.seq, w.rank_priority, w.fair_rank, w.created_at, w.fairness_key
        FROM dbo.sq_items AS w WITH (INDEX(sq_items_ready), READCOMMITTEDLOCK)
        WHERE w.queue = @queue AND w.status = 'ready' AND w.visible_at <= @now AND @paused = 0
          AND w.created_at >= @retained
          AND (w.group_key IS NULL OR NOT EXISTS (
              SELECT 1
              FROM dbo.sq_items AS e WITH (INDEX(sq_items_group), READCOMMITTEDLOCK)
              WHERE e.queue = w.queue AND e.group_key = w.group_key AND e.seq < w.seq
                AND e.group_key IS NOT NULL AND e.status IN ('ready', 'leased')))
        ORDER BY w.rank_priority DESC, w.fair_rank, w.created_at, w.seq
    ) AS r
    UNION ALL
    SELECT l.seq, l.rank_priority, l.fair_rank, l.created_at, l.fairness_key FROM (
        SELECT TOP (@walk) w.seq, w.rank_priority, w.fair_rank, w.created_at, w.fairness_key
        FROM dbo.sq_items AS w WITH (INDEX(sq_items_lapsed), READCOMMITTEDLOCK)
        WHERE w.queue = @queue AND w.status = 'leased' AND w.visible_at <= @now AND @paused = 0
          AND w.created_at >= @retained
          AND w.attempts < @max_attempts
          AND (w.group_key IS NULL OR NOT EXISTS (
              SELECT 1
              FROM dbo.sq_items AS e WITH (INDEX(sq_items_group), READCOMMITTEDLOCK)
              WHERE e.queue = w.queue AND e.group_key = w.group_key AND e.seq < w.seq
                AND e.group_key IS NOT NULL AND e.status IN ('ready', 'leased')))
        ORDER BY w.rank_priority DESC, w.fair_rank, w.created_at, w.seq
    ) AS l
) AS c
ORDER BY c.rank_priority DESC, c.fair_rank, c.created_at, c.seq;
INSERT INTO @locked (k)
SELECT TOP (@max_keys) f.fairness_key
FROM (SELECT k, MIN(place) AS first FROM @walked GROUP BY k) AS w
JOIN dbo.sq_fair_keys AS f WITH (UPDLOCK, ROWLOCK, READPAST, READCOMMITTEDLOCK)
    ON f.queue = @queue AND f.fairness_key = w.k
ORDER BY w.first;
DECLARE @turns TABLE (k NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY, cap INT NULL,
                      leased INT NOT NULL, reach INT NOT NULL, rate FLOAT NULL, rate_tokens FLOAT NULL,
                      rate_at DATETIME2(7) NULL);
INSERT INTO @turns (k, cap, leased, reach, rate, rate_tokens, rate_at)
SELECT c.k, c.cap, c.leased,
       CASE WHEN c.cap IS NULL OR c.cap - c.leased > @max_keys THEN @max_keys
            WHEN c.cap - c.leased < 0 THEN 0
            ELSE c.cap - c.leased END + 1,
       c.rate, c.rate_tokens, c.rate_at
FROM (
    SELECT l.k, COALESCE(f.max_leased, q.max_leased_per_key) AS cap,
           CASE WHEN COALESCE(f.max_leased, q.max_leased_per_key) IS NULL THEN 0
                WHEN l.k = N'' THEN (
                    SELECT COUNT(*) FROM dbo.sq_items AS i WITH (INDEX(sq_items_lapsed), READCOMMITTEDLOCK)
                    WHERE i.queue = @queue AND i.status = 'leased' AND i.visible_at > @now AND i.fairness_key IS NULL)
                ELSE (
                    SELECT COUNT(*) FROM dbo.sq_items AS i WITH (INDEX(sq_items_key_leased), READCOMMITTEDLOCK)
                    WHERE i.queue = @queue AND i.status = 'leased' AND i.fairness_key = l.k AND i.visible_at > @now)
           END AS leased,
           COALESCE(f.rate_per_second, q.rate_per_key_per_second) AS rate, f.rate_tokens, f.rate_at
    FROM @locked AS l
    JOIN dbo.sq_fair_keys AS f ON f.queue = @queue AND f.fairness_key = l.k
    JOIN dbo.sq_queues AS q ON q.name = @queue
) AS c;
SELECT t.k AS [key], i.seq,
       ROW_NUMBER() OVER (ORDER BY i.rank_priority DESC, i.fair_rank, i.created_at, i.seq) AS place,
       t.cap, t.leased, t.rate, t.rate_tokens, t.rate_at, @now AS now
FROM @turns AS t
OUTER APPLY (
    SELECT TOP (t.reach) u.seq, u.rank_priority, u.fair_rank, u.created_at FROM (
        SELECT r.seq, r.rank_priority, r.fair_rank, r.created_at FROM (
            SELECT TOP (t.reach) x.seq, x.rank_priority, x.fair_rank, x.created_at
            FROM dbo.sq_items AS x WITH (INDEX(sq_items_key_ready), READCOMMITTEDLOCK)
            WHERE t.k <> N'' AND x.queue = @queue AND x.fairness_key = t.k AND x.fairness_key IS NOT NULL
              AND x.status = 'ready' AND x.visible_at <= @now AND @paused = 0 AND x.created_at >= @retained
              AND (x.group_key IS NULL OR NOT EXISTS (
                  SELECT 1
                  FROM dbo.sq_items AS e WITH (INDEX(sq_items_group), READCOMMITTEDLOCK)
                  WHERE e.queue = x.queue AND e.group_key = x.group_key AND e.seq < x.seq
                    AND e.group_key IS NOT NULL AND e.status IN ('ready', 'leased')))
            ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
        ) AS r
        UNION ALL
        SELECT n.seq, n.rank_priority, n.fair_rank, n.created_at FROM (
            SELECT TOP (t.reach) x.seq, x.rank_priority, x.fair_rank, x.created_at
            FROM dbo.sq_items AS x WITH (INDEX(sq_items_ready), READCOMMITTEDLOCK)
            WHERE t.k = N'' AND x.queue = @queue AND x.fairness_key IS NULL
              AND x.status = 'ready' AND x.visible_at <= @now AND @paused = 0 AND x.created_at >= @retained
              AND (x.group_key IS NULL OR NOT EXISTS (
                  SELECT 1
                  FROM dbo.sq_items AS e WITH (INDEX(sq_items_group), READCOMMITTEDLOCK)
                  WHERE e.queue = x.queue AND e.group_key = x.group_key AND e.seq < x.seq
                    AND e.group_key IS NOT NULL AND e.status IN ('ready', 'leased')))
            ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
        ) AS n
        UNION ALL
        SELECT l.seq, l.rank_priority, l.fair_rank, l.created_at FROM (
            SELECT TOP (t.reach) x.seq, x.rank_priority, x.fair_rank, x.created_at
            FROM dbo.sq_items AS x WITH (INDEX(sq_items_key_leased), READCOMMITTEDLOCK)
            WHERE t.k <> N'' AND x.queue = @queue AND x.fairness_key = t.k AND x.fairness_key IS NOT NULL
              AND x.status = 'leased' AND x.visible_at <= @now AND @paused = 0 AND x.created_at >= @retained
              AND x.attempts < @max_attempts
              AND (x.group_key IS NULL OR NOT EXISTS (
                  SELECT 1
                  FROM dbo.sq_items AS e WITH (INDEX(sq_items_group), READCOMMITTEDLOCK)
                  WHERE e.queue = x.queue AND e.group_key = x.group_key AND e.seq < x.seq
                    AND e.group_key IS NOT NULL AND e.status IN ('ready', 'leased')))
            ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
        ) AS l
        UNION ALL
        SELECT m.seq, m.rank_priority, m.fair_rank, m.created_at FROM (
            SELECT TOP (t.reach) x.seq, x.rank_priority, x.fair_rank, x.created_at
            FROM dbo.sq_items AS x WITH (INDEX(sq_items_lapsed), READCOMMITTEDLOCK)
            WHERE t.k = N'' AND x.queue = @queue AND x.fairness_key IS NULL
              AND x.status = 'leased' AND x.visible_at <= @now AND @paused = 0 AND x.created_at >= @retained
              AND x.attempts < @max_attempts
              AND (x.group_key IS NULL OR NOT EXISTS (
                  SELECT 1
                  FROM dbo.sq_items AS e WITH (INDEX(sq_items_group), READCOMMITTEDLOCK)
                  WHERE e.queue = x.queue AND e.group_key = x.group_key AND e.seq < x.seq
                    AND e.group_key IS NOT NULL AND e.status IN ('ready', 'leased')))
            ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
        ) AS m
    ) AS u
    ORDER BY u.rank_priority DESC, u.fair_rank, u.created_at, u.seq
) AS i
ORDER BY place;

-- name: wait_keys
-- lock_keys, when other poppers held every key it walked: waits for one of them instead (UPDLOCK
-- without READPAST), so that a queue of few keys is still handed out while others pop it. The pop
-- holds no key's row while it waits (lock_keys locked none), so no two pops wait on each other; it
-- then walks again (lock_keys: its own locks are not passed over).
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @first NVARCHAR(128) = (
    SELECT TOP (1) COALESCE(w.fairness_key, N'')
    FROM dbo.sq_items AS w WITH (INDEX(sq_items_ready), READCOMMITTEDLOCK)
    WHERE w.queue = @queue AND w.status = 'ready' AND w.visible_at <= @now
    ORDER BY w.rank_priority DESC, w.fair_rank, w.created_at, w.seq
);
SELECT f.fairness_key AS [key]
FROM dbo.sq_fair_keys AS f WITH (UPDLOCK, ROWLOCK, READCOMMITTEDLOCK)
WHERE f.queue = @queue AND f.fairness_key = @first;

-- name: add_keys
-- The row lock_keys finds missing: the unkeyed items' key (N'') of a queue that never saw a key
-- (every key given to a push has its row). The row makes the queue fair: its pushes are ranked from
-- then on, in push order while they have one key.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @queue NVARCHAR(4000) = :queue;
INSERT INTO dbo.sq_fair_keys (queue, fairness_key, last_rank)
SELECT q.name, N'', 0 FROM dbo.sq_queues AS q
WHERE q.name = @queue
  AND NOT EXISTS (SELECT 1 FROM dbo.sq_fair_keys AS f WITH (UPDLOCK, HOLDLOCK)
                  WHERE f.queue = @queue AND f.fairness_key = N'');
SELECT @@ROWCOUNT AS added;

-- name: lease_keyed
-- The items a careful pop picked of what lock_keys read of its keys (@seqs, a JSON array), leased
-- as pop leases them. lock_keys read them after the keys' rows were locked; each is checked again
-- here all the same (cheaply, by seq): an item no longer poppable is left.
-- include: pop_settings
DECLARE @seqs NVARCHAR(MAX) = :seqs;
UPDATE x
SET status = 'leased',
    attempts = attempts + 1,
    lease_token = CAST(:lease_token AS UNIQUEIDENTIFIER),
    visible_at = DATEADD(SECOND, @lease_seconds, @now),
    first_popped_at = COALESCE(first_popped_at, @now)
OUTPUT inserted.seq, inserted.id, inserted.queue, inserted.payload, inserted.created_at, inserted.attempts,
       inserted.lease_token, inserted.visible_at, inserted.priority, inserted.group_key, inserted.attributes,
       inserted.fairness_key, inserted.fair_rank, inserted.rank_priority
FROM dbo.sq_items AS x WITH (FORCESEEK, ROWLOCK)
WHERE x.seq IN (SELECT CAST(j.value AS BIGINT) FROM OPENJSON(@seqs) AS j)
  AND x.queue = @queue AND x.visible_at <= @now AND @paused = 0 AND @max_items > 0
  AND (x.status = 'ready' OR (x.status = 'leased' AND x.attempts < @max_attempts));

-- name: take_key_tokens
-- The keys' buckets after a careful pop (their rows locked by lock_keys, in the same transaction):
-- :buckets, a JSON array of {"key", "tokens", "at"}, each key's tokens as counted at its at, less
-- the items the pop took of it (floats and times as text, CAST here). OPENJSON's text takes the
-- database's collation: the key is compared in the column's.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @buckets NVARCHAR(MAX) = :buckets;
UPDATE f SET rate_tokens = CAST(b.tokens AS FLOAT), rate_at = CAST(b.at AS DATETIME2(7))
FROM dbo.sq_fair_keys AS f
JOIN OPENJSON(@buckets) WITH (
    k NVARCHAR(128) '$.key', tokens NVARCHAR(40) '$.tokens', at NVARCHAR(40) '$.at'
) AS b ON f.queue = @queue AND f.fairness_key = b.k COLLATE Latin1_General_100_BIN2;
SELECT @@ROWCOUNT AS changed;

-- fragment: item_row
-- An item as simplequeue.store.rows reads it (with its queue's max_attempts and the batch's clock),
-- written once so that every batch that answers with an item answers with the same columns.
SELECT i.id, i.queue, i.payload, i.attributes, i.status, i.attempts, i.errors, i.created_at, i.visible_at, i.lease_token,
       i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at, i.died_at, q.max_attempts, @now AS now
FROM dbo.sq_items AS i
JOIN dbo.sq_queues AS q ON q.name = i.queue

-- fragment: history_insert
-- Every batch that finishes items writes their history records through this one column list.
INSERT INTO dbo.sq_history (id, queue, outcome, attempts, created_at, first_popped_at, finished_at,
                            group_key, dedup_key, last_error, payload)

-- fragment: finished_columns
id UNIQUEIDENTIFIER NOT NULL,
queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
attempts INT NOT NULL,
created_at DATETIME2(7) NOT NULL,
first_popped_at DATETIME2(7) NULL,
group_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
dedup_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,

-- name: extend
-- Two result sets: the row the compare-and-set moved (none: refused), then the item as it is now,
-- from which the store says why a refusal happened.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @id UNIQUEIDENTIFIER = CAST(:id AS UNIQUEIDENTIFIER);
DECLARE @token UNIQUEIDENTIFIER = CAST(:lease_token AS UNIQUEIDENTIFIER);
UPDATE dbo.sq_items
SET visible_at = DATEADD(SECOND, CAST(:lease_seconds AS INT), @now)
OUTPUT inserted.seq
WHERE id = @id AND status = 'leased' AND lease_token = @token AND visible_at > @now;
-- include: item_row
WHERE i.id = @id;

-- name: complete_batch
-- Completes the requested items whose token matches (or that have none given) and that are not dead:
-- deletes them, writes their history records and starts the windows of their dedup keys and
-- remembered ids, all in this batch and so in one transaction. complete() is this batch for one
-- item. Two result sets: the ids completed, then the requested items still there with their status
-- and lease (a token that did not match, a dead item), from which the store tells a mismatch from a
-- dead item; an id in neither was not found. FORCESEEK: one seek per id on the id index (and per key
-- on sq_dedup's and sq_client_ids'), never a scan that would take update locks on (and wait for)
-- other workers' rows.
-- The history record's last_error is the error of the item's last failure, if any: the errors array's
-- element with the highest index, read as NVARCHAR(MAX) (JSON_VALUE would stop at 4000 characters).
-- A lease that expired on its last attempt is dead already, for every reader, whether or not the
-- sweep has recorded it: the DELETE leaves it and the second result set calls it dead. Its cutoff is
-- reap_expired's: the expiry at or before @now.
-- Only the work an item needs: the DELETE reads each item's queue row once (FORCESEEK on its key),
-- for max_attempts, whether history keeps the payload (else the payload is not copied into @done)
-- and the dedup window; the history INSERT joins nothing, sq_dedup is sought only for items that
-- have a dedup_key, and sq_client_ids only for items whose id a producer gave (remember_id): its
-- claim's window starts, so a retry keeps finding the item for the queue's dedup window. The item is
-- locked before its claim, as a push locks them (see push_batch). A queue whose retention_seconds is
-- 0 keeps no history: @done says so (keeps_history) and its items get no record.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
SET @now = CAST(@now AS DATETIME2(6));
DECLARE @items NVARCHAR(MAX) = :items;
DECLARE @done TABLE (
    -- include: finished_columns
    remember_id BIT NOT NULL,
    errors NVARCHAR(MAX) NOT NULL,
    payload NVARCHAR(MAX) NULL,
    dedup_window_seconds INT NOT NULL,
    keeps_history BIT NOT NULL
);
DELETE i
OUTPUT deleted.id, deleted.queue, deleted.attempts, deleted.created_at, deleted.first_popped_at,
       deleted.group_key, deleted.dedup_key, deleted.remember_id, deleted.errors,
       CASE WHEN q.history_payload = 1 THEN deleted.payload END, q.dedup_window_seconds,
       IIF(q.retention_seconds > 0, 1, 0)
INTO @done
FROM dbo.sq_items AS i WITH (FORCESEEK)
JOIN OPENJSON(@items) WITH (id UNIQUEIDENTIFIER, token UNIQUEIDENTIFIER) AS j ON i.id = j.id
JOIN dbo.sq_queues AS q WITH (FORCESEEK) ON q.name = i.queue
WHERE i.status <> 'dead' AND (j.token IS NULL OR i.lease_token = j.token)
  AND NOT (i.status = 'leased' AND i.visible_at <= @now AND i.attempts >= q.max_attempts);
-- include: history_insert
SELECT d.id, d.queue, 'completed', d.attempts, d.created_at, d.first_popped_at, @now, d.group_key, d.dedup_key,
       (SELECT TOP (1) e.error
        FROM OPENJSON(d.errors) AS a
        CROSS APPLY OPENJSON(a.value) WITH (error NVARCHAR(MAX) '$.error') AS e
        ORDER BY CAST(a.[key] AS INT) DESC),
       d.payload
FROM @done AS d
WHERE d.keeps_history = 1;
UPDATE k
SET expires_at = DATEADD(SECOND, d.dedup_window_seconds, @now)
FROM dbo.sq_dedup AS k WITH (FORCESEEK)
JOIN @done AS d ON k.queue = d.queue AND k.dedup_key = d.dedup_key AND k.item_id = d.id
WHERE d.dedup_key IS NOT NULL AND k.expires_at IS NULL;
UPDATE k
SET expires_at = DATEADD(SECOND, d.dedup_window_seconds, @now)
FROM dbo.sq_client_ids AS k WITH (FORCESEEK)
JOIN @done AS d ON k.id = d.id
WHERE d.remember_id = 1;
SELECT id, queue FROM @done;
SELECT i.id,
       CASE WHEN i.status = 'leased' AND i.visible_at <= @now
                 AND i.attempts >= (SELECT q.max_attempts FROM dbo.sq_queues AS q WHERE q.name = i.queue)
            THEN 'dead' ELSE i.status END AS status,
       i.lease_token
FROM dbo.sq_items AS i WITH (FORCESEEK)
JOIN OPENJSON(@items) WITH (id UNIQUEIDENTIFIER) AS j ON i.id = j.id;

-- fragment: dead_letter_moves
-- Items this batch killed (@dead: their ids; their history records written) whose queue has a
-- dead-letter target (its dead_letter_queue setting) that exists and is another queue move there,
-- in this batch: ready now, attempts reset, keeping id, payload, attributes, created_at, group and
-- errors. An IDENTITY column cannot be updated, so the row is deleted and inserted again (revive's
-- way), taking a new seq: it joins its group at the back. The dedup key's claim stays in the source, its window starting as a purge's does; the
-- remembered id's claim follows the item.
DECLARE @moving TABLE (
    seq BIGINT NOT NULL PRIMARY KEY,
    id UNIQUEIDENTIFIER NOT NULL,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    target NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    payload NVARCHAR(MAX) NOT NULL,
    created_at DATETIME2(7) NOT NULL,
    errors NVARCHAR(MAX) NOT NULL,
    priority INT NOT NULL,
    group_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
    dedup_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
    remember_id BIT NOT NULL,
    attributes NVARCHAR(MAX) NULL,
    fairness_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
    aging INT NULL
);
DELETE i
OUTPUT deleted.seq, deleted.id, deleted.queue, t.name, deleted.payload, deleted.created_at, deleted.errors,
       deleted.priority, deleted.group_key, deleted.dedup_key, deleted.remember_id, deleted.attributes,
       deleted.fairness_key, t.priority_aging_seconds
INTO @moving
FROM dbo.sq_items AS i
JOIN @dead AS d ON d.id = i.id
JOIN dbo.sq_queues AS s ON s.name = i.queue
JOIN dbo.sq_queues AS t ON t.name = s.dead_letter_queue AND t.name <> i.queue
WHERE i.status = 'dead';
UPDATE k
SET expires_at = DATEADD(SECOND, q.dedup_window_seconds, @now)
FROM dbo.sq_dedup AS k
JOIN @moving AS m ON k.queue = m.queue AND k.dedup_key = m.dedup_key AND k.item_id = m.id
JOIN dbo.sq_queues AS q ON q.name = m.queue
WHERE k.expires_at IS NULL;
UPDATE c
SET queue = m.target
FROM dbo.sq_client_ids AS c
JOIN @moving AS m ON c.id = m.id
WHERE m.remember_id = 1;
-- The fairness key goes along; the fair rank was the source's, so the item ranks 0 in its target.
-- Its rank is the target's aging's (as in dbo.sq_push_items).
INSERT INTO dbo.sq_items (id, queue, payload, created_at, status, attempts, visible_at, errors, priority,
                          group_key, dedup_key, first_popped_at, remember_id, attributes, fairness_key, rank_priority)
SELECT m.id, m.target, m.payload, m.created_at, 'ready', 0, @now, m.errors, m.priority, m.group_key,
       m.dedup_key, NULL, m.remember_id, m.attributes, m.fairness_key,
       CASE WHEN m.aging IS NULL THEN m.priority
            ELSE m.priority - (e.s - ((e.s % m.aging) + m.aging) % m.aging) / m.aging END
FROM @moving AS m
CROSS APPLY (SELECT DATEDIFF_BIG(SECOND, CAST('1970-01-01' AS DATETIME2(7)), m.created_at) AS s) AS e
ORDER BY m.seq;

-- name: fail
-- One compare-and-set. Dead when the worker says so or this was the last attempt; otherwise ready
-- after the given delay or the queue's backoff: min(cap, base * factor^(attempts-1)), less up to
-- jitter of it (@draw is a random number in [0, 1) drawn by the store). IIF stands in for LEAST and
-- GREATEST, which arrived in SQL Server 2022. A death writes its history record in this batch, so in
-- the same transaction. Two result sets: the row changed (none: refused), then the item as it is now.
-- Refused, like a completion, for an item that is dead, or whose lease expired on its last attempt.
-- The UPDATE's join to the queue row also decides whether the history record keeps the payload
-- (@failed holds it only then), so the history INSERT reads sq_queues no second time. A death in a
-- queue with a dead-letter target then moves the item there (dead_letter_moves).
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
SET @now = CAST(@now AS DATETIME2(6));
DECLARE @id UNIQUEIDENTIFIER = CAST(:id AS UNIQUEIDENTIFIER);
DECLARE @token UNIQUEIDENTIFIER = CAST(NULLIF(:lease_token, N'') AS UNIQUEIDENTIFIER);
DECLARE @retry BIT = :retry;
DECLARE @retry_after FLOAT = CAST(NULLIF(:retry_after, N'') AS FLOAT);
DECLARE @draw FLOAT = CAST(:draw AS FLOAT);
DECLARE @error NVARCHAR(MAX) = :error;
DECLARE @failed TABLE (
    -- include: finished_columns
    status VARCHAR(6) NOT NULL,
    died_at DATETIME2(7) NULL,
    payload NVARCHAR(MAX) NULL,
    keeps_history BIT NOT NULL
);
UPDATE i
SET status = CASE WHEN f.dies = 1 THEN 'dead' ELSE 'ready' END,
    visible_at = CASE WHEN f.dies = 1 THEN i.visible_at
                      ELSE DATEADD(MICROSECOND, s.micros, DATEADD(SECOND, s.whole, @now)) END,
    died_at = CASE WHEN f.dies = 1 THEN @now END,
    lease_token = NULL,
    errors = JSON_MODIFY(
        i.errors, 'append $',
        JSON_QUERY((SELECT @now AS [at], @error AS [error] FOR JSON PATH, WITHOUT_ARRAY_WRAPPER))
    )
OUTPUT inserted.id, inserted.queue, inserted.attempts, inserted.created_at, inserted.first_popped_at,
       inserted.group_key, inserted.dedup_key, inserted.status, inserted.died_at,
       CASE WHEN q.history_payload = 1 THEN inserted.payload END, IIF(q.retention_seconds > 0, 1, 0)
INTO @failed
FROM dbo.sq_items AS i
JOIN dbo.sq_queues AS q ON q.name = i.queue
CROSS APPLY (SELECT IIF(i.attempts > 61, 60, IIF(i.attempts > 1, i.attempts - 1, 0)) AS exponent) AS e
CROSS APPLY (SELECT q.backoff_base_seconds * POWER(q.backoff_factor, e.exponent) AS backoff) AS b
CROSS APPLY (
    SELECT IIF(@retry = 0 OR i.attempts >= q.max_attempts, 1, 0) AS dies,
           COALESCE(
               @retry_after,
               IIF(b.backoff < q.backoff_cap_seconds, b.backoff, q.backoff_cap_seconds) * (1 - q.backoff_jitter * @draw)
           ) AS delay
) AS f
CROSS APPLY (
    SELECT CAST(FLOOR(f.delay) AS INT) AS whole, CAST(ROUND((f.delay - FLOOR(f.delay)) * 1000000, 0) AS INT) AS micros
) AS s
WHERE i.id = @id AND i.status <> 'dead' AND (@token IS NULL OR i.lease_token = @token)
  AND NOT (i.status = 'leased' AND i.visible_at <= @now AND i.attempts >= q.max_attempts);
-- include: history_insert
SELECT d.id, d.queue, 'dead', d.attempts, d.created_at, d.first_popped_at, d.died_at, d.group_key, d.dedup_key,
       @error, d.payload
FROM @failed AS d
WHERE d.status = 'dead' AND d.keeps_history = 1;
DECLARE @dead TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY);
INSERT INTO @dead (id) SELECT id FROM @failed WHERE status = 'dead';
-- include: dead_letter_moves
SELECT status FROM @failed;
-- include: item_row
WHERE i.id = @id;

-- name: reap_expired
-- The sweep: up to n leases that expired on their last attempt become dead, each with an error and a
-- history record written in this batch (and move to their queue's dead-letter target, if it has one). The filtered sq_items_leased holds only items in flight.
-- READPAST leaves a row that another transaction holds (a pop, a completion racing the sweep) to the
-- next sweep; UPDLOCK and ROWLOCK as in pop. DEADLOCK_PRIORITY LOW: in a deadlock with a request
-- the sweep is the victim (it runs again next interval), not the worker's pop or completion. The
-- priority is the session's, so the batch's last line puts it back for the pool's next borrower
-- (and the store does, should the batch stop before it).
-- @queue: one queue's leases only ('' for every queue's), which a pop reaps; either way the walk is
-- along sq_items_leased, the leases in flight (a pop's reap filters them to its queue).
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
SET @now = CAST(@now AS DATETIME2(6));
SET DEADLOCK_PRIORITY LOW;
DECLARE @error NVARCHAR(MAX) = :error;
DECLARE @queue NVARCHAR(4000) = NULLIF(:queue, N'');
DECLARE @killed TABLE (
    -- include: finished_columns
    payload NVARCHAR(MAX) NOT NULL
);
WITH expired AS (
    SELECT TOP (CAST(:limit AS INT)) x.status, x.died_at, x.lease_token, x.errors, x.id, x.queue, x.attempts,
           x.created_at, x.first_popped_at, x.group_key, x.dedup_key, x.payload
    FROM dbo.sq_items AS x WITH (INDEX(sq_items_leased), READCOMMITTEDLOCK, ROWLOCK, READPAST, UPDLOCK)
    WHERE x.status = 'leased' AND x.visible_at <= @now AND (@queue IS NULL OR x.queue = @queue)
      AND x.attempts >= (SELECT q.max_attempts FROM dbo.sq_queues AS q WHERE q.name = x.queue)
)
UPDATE expired
SET status = 'dead',
    died_at = @now,
    lease_token = NULL,
    errors = JSON_MODIFY(
        errors, 'append $',
        JSON_QUERY((SELECT @now AS [at], @error AS [error] FOR JSON PATH, WITHOUT_ARRAY_WRAPPER))
    )
OUTPUT inserted.id, inserted.queue, inserted.attempts, inserted.created_at, inserted.first_popped_at,
       inserted.group_key, inserted.dedup_key, inserted.payload
INTO @killed;
-- include: history_insert
SELECT k.id, k.queue, 'dead', k.attempts, k.created_at, k.first_popped_at, @now, k.group_key, k.dedup_key,
       @error, CASE WHEN q.history_payload = 1 THEN k.payload END
FROM @killed AS k
JOIN dbo.sq_queues AS q ON q.name = k.queue
WHERE q.retention_seconds > 0;
DECLARE @dead TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY);
INSERT INTO @dead (id) SELECT id FROM @killed;
-- include: dead_letter_moves
SELECT queue, COUNT(*) AS killed FROM @killed GROUP BY queue;
SET DEADLOCK_PRIORITY NORMAL;

-- name: get_item
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
-- include: item_row
WHERE i.id = CAST(:id AS UNIQUEIDENTIFIER);

-- name: sequence_numbers
-- The insertion order of the live or dead items among :ids (an SQS FIFO send answers it), a seek
-- by id each.
SET NOCOUNT ON;
DECLARE @ids NVARCHAR(MAX) = :ids;
SELECT i.id, i.seq
FROM OPENJSON(@ids) WITH (id UNIQUEIDENTIFIER '$') AS j
JOIN dbo.sq_items AS i WITH (FORCESEEK) ON i.id = j.id;

-- name: list_dead
-- A page of dead items, most recently dead first, after the cursor's (died_at, seq) if one is given:
-- a backward walk of the filtered sq_items_dead from the cursor, stopped after TOP rows. since and
-- until ('' for none) bound died_at, which leads the index after the queue, so they narrow the walk.
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @since DATETIME2(7) = CAST(NULLIF(:since, N'') AS DATETIME2(7));
DECLARE @until DATETIME2(7) = CAST(NULLIF(:until, N'') AS DATETIME2(7));
DECLARE @after_at DATETIME2(7) = CAST(NULLIF(:after_at, N'') AS DATETIME2(7));
DECLARE @after_seq BIGINT = CAST(NULLIF(:after_seq, N'') AS BIGINT);
SELECT TOP (CAST(:limit AS INT)) i.seq, i.id, i.queue, i.payload, i.attributes, i.status, i.attempts, i.errors, i.created_at,
       i.visible_at, i.lease_token, i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at, i.died_at,
       q.max_attempts, @now AS now
FROM dbo.sq_items AS i WITH (INDEX(sq_items_dead))
JOIN dbo.sq_queues AS q ON q.name = i.queue
WHERE i.queue = @queue AND i.status = 'dead'
  AND (@since IS NULL OR i.died_at >= @since)
  AND (@until IS NULL OR i.died_at < @until)
  AND (@after_at IS NULL OR i.died_at < @after_at OR (i.died_at = @after_at AND i.seq < @after_seq))
ORDER BY i.died_at DESC, i.seq DESC;

-- name: pick_dead
-- A redrive's next batch: the oldest dead first, so that a rate-limited redrive replays them in the
-- order they died. UPDLOCK holds them until the redrive commits; READPAST leaves those that a
-- concurrent redrive or purge holds to it. '' for the ids: all of the queue's.
SET NOCOUNT ON;
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @ids NVARCHAR(MAX) = NULLIF(:ids, N'');
SELECT TOP (CAST(:limit AS INT)) i.seq
FROM dbo.sq_items AS i WITH (INDEX(sq_items_dead), READCOMMITTEDLOCK, ROWLOCK, READPAST, UPDLOCK)
WHERE i.queue = @queue AND i.status = 'dead'
  AND (@ids IS NULL OR i.id IN (SELECT j.id FROM OPENJSON(@ids) WITH (id UNIQUEIDENTIFIER '$') AS j))
ORDER BY i.died_at, i.seq;

-- name: revive
-- Dead items made ready again with attempts reset. A redriven item rejoins its ordered group at the
-- back, so it takes a new seq; an IDENTITY column cannot be updated, so its row is deleted and
-- inserted again (same id, payload, errors and first_popped_at), in the plan's order n, in which
-- IDENTITY numbers them. remember_id goes with it: a dead item still holds its claimed id (its window
-- starts only when it is purged), and the revived item goes on holding it, its claim untouched. @plan
-- is a JSON array of {"n", "seq", "seconds", "micros"}: when each becomes poppable, from now. The
-- queue's row is locked first, as a push into its groups does (see push_batch), since rejoining a
-- group is a push into it.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @plan NVARCHAR(MAX) = :plan;
DECLARE @locked TABLE (queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL);
DECLARE @gone TABLE (
    seq BIGINT NOT NULL PRIMARY KEY,
    id UNIQUEIDENTIFIER NOT NULL,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    payload NVARCHAR(MAX) NOT NULL,
    created_at DATETIME2(7) NOT NULL,
    errors NVARCHAR(MAX) NOT NULL,
    priority INT NOT NULL,
    group_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
    dedup_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
    first_popped_at DATETIME2(7) NULL,
    remember_id BIT NOT NULL,
    attributes NVARCHAR(MAX) NULL,
    fairness_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
    fair_rank FLOAT NOT NULL,
    rank_priority BIGINT NOT NULL
);
INSERT INTO @locked (queue)
SELECT q.name FROM dbo.sq_queues AS q WITH (UPDLOCK, HOLDLOCK) WHERE q.name = @queue;
DELETE i
OUTPUT deleted.seq, deleted.id, deleted.queue, deleted.payload, deleted.created_at, deleted.errors,
       deleted.priority, deleted.group_key, deleted.dedup_key, deleted.first_popped_at, deleted.remember_id,
       deleted.attributes, deleted.fairness_key, deleted.fair_rank, deleted.rank_priority
INTO @gone
FROM dbo.sq_items AS i WITH (FORCESEEK)
JOIN OPENJSON(@plan) WITH (seq BIGINT) AS p ON i.seq = p.seq
WHERE i.queue = @queue AND i.status = 'dead';
INSERT INTO dbo.sq_items (id, queue, payload, created_at, status, attempts, visible_at, errors, priority,
                          group_key, dedup_key, first_popped_at, remember_id, attributes, fairness_key, fair_rank,
                          rank_priority)
SELECT g.id, g.queue, g.payload, g.created_at, 'ready', 0,
       DATEADD(MICROSECOND, p.micros, DATEADD(SECOND, p.seconds, @now)),
       g.errors, g.priority, g.group_key, g.dedup_key, g.first_popped_at, g.remember_id, g.attributes,
       g.fairness_key, g.fair_rank, g.rank_priority
FROM @gone AS g
JOIN OPENJSON(@plan) WITH (n INT, seq BIGINT, seconds INT, micros INT) AS p ON p.seq = g.seq
ORDER BY p.n;
SELECT COUNT(*) AS revived FROM @gone;

-- fragment: purged_table
-- What a purge deleted (purge_dead, purge_live): the columns the windows below need.
DECLARE @gone TABLE (
    id UNIQUEIDENTIFIER NOT NULL,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    dedup_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
    remember_id BIT NOT NULL
);

-- fragment: purged_windows
-- After a purge filled @gone: the windows of its items' dedup keys and remembered ids start, and
-- the batch answers how many went. Written once for purge_dead and purge_live.
UPDATE k
SET expires_at = DATEADD(SECOND, q.dedup_window_seconds, @now)
FROM dbo.sq_dedup AS k WITH (FORCESEEK)
JOIN @gone AS d ON k.queue = d.queue AND k.dedup_key = d.dedup_key AND k.item_id = d.id
JOIN dbo.sq_queues AS q ON q.name = d.queue
WHERE k.expires_at IS NULL;
UPDATE k
SET expires_at = DATEADD(SECOND, q.dedup_window_seconds, @now)
FROM dbo.sq_client_ids AS k WITH (FORCESEEK)
JOIN @gone AS d ON k.id = d.id
JOIN dbo.sq_queues AS q ON q.name = d.queue
WHERE d.remember_id = 1;
SELECT COUNT(*) AS purged FROM @gone;

-- name: purge_dead
-- A batch of the queue's dead items go, oldest first, and the windows of their dedup keys and
-- remembered ids start: a dead item holds its key, and its id, until it is purged. READPAST leaves
-- items a concurrent redrive or purge holds. sq_client_ids is sought (FORCESEEK) only for the items
-- that claimed their id, each after the item is gone, in the order pushes lock them (see push_batch).
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
-- include: purged_table
WITH doomed AS (
    SELECT TOP (CAST(:limit AS INT)) x.id, x.queue, x.dedup_key, x.remember_id
    FROM dbo.sq_items AS x WITH (INDEX(sq_items_dead), READCOMMITTEDLOCK, ROWLOCK, READPAST, UPDLOCK)
    WHERE x.queue = @queue AND x.status = 'dead'
    ORDER BY x.died_at, x.seq
)
DELETE FROM doomed
OUTPUT deleted.id, deleted.queue, deleted.dedup_key, deleted.remember_id INTO @gone;
-- include: purged_windows

-- name: purge_live
-- A batch of the queue's live items go (ready, delayed, retrying, leased; no history: a purge is
-- not a completion), and the windows of their dedup keys and remembered ids start, as purge_dead's
-- do. A lease that ran out on its last attempt is dead already (the sweep records it): it stays.
-- READPAST leaves items a concurrent pop, completion or purge holds.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @max_attempts INT = (SELECT q.max_attempts FROM dbo.sq_queues AS q WHERE q.name = @queue);
-- include: purged_table
WITH doomed AS (
    SELECT TOP (CAST(:limit AS INT)) x.id, x.queue, x.dedup_key, x.remember_id
    FROM dbo.sq_items AS x WITH (INDEX(sq_items_visible), READCOMMITTEDLOCK, ROWLOCK, READPAST, UPDLOCK)
    WHERE x.queue = @queue AND x.status IN ('ready', 'leased')
      AND NOT (x.status = 'leased' AND x.visible_at <= @now AND x.attempts >= @max_attempts)
    ORDER BY x.seq
)
DELETE FROM doomed
OUTPUT deleted.id, deleted.queue, deleted.dedup_key, deleted.remember_id INTO @gone;
-- include: purged_windows

-- name: expire_retained
-- Live items older than their queue's message_retention_seconds (from their push) go as purge_live's do (no history; the windows of their dedup keys and remembered ids
-- start), at most :limit in no order (all of them go). A lease that ran out on its last attempt is
-- dead already (the sweep records it): it stays. READPAST leaves items a concurrent pop, completion
-- or purge holds.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
-- include: purged_table
DELETE x
OUTPUT deleted.id, deleted.queue, deleted.dedup_key, deleted.remember_id INTO @gone
FROM dbo.sq_items AS x
WHERE x.seq IN (
    SELECT TOP (CAST(:limit AS INT)) i.seq
    FROM dbo.sq_queues AS q
    JOIN dbo.sq_items AS i WITH (INDEX(sq_items_visible), READCOMMITTEDLOCK, ROWLOCK, READPAST, UPDLOCK)
        ON i.queue = q.name
    WHERE q.message_retention_seconds IS NOT NULL AND i.status IN ('ready', 'leased')
      AND i.created_at < DATEADD(SECOND, -q.message_retention_seconds, @now)
      AND NOT (i.status = 'leased' AND i.visible_at <= @now AND i.attempts >= q.max_attempts)
);
-- include: purged_windows

-- name: list_history
-- A page of history records, most recently finished first, after the cursor's (finished_at, seq) if
-- one is given, with optional filters ('' for none). RECOMPILE: the plan is made for this call's
-- filters, so that an outcome filter walks sq_history_outcome and none walks sq_history_queue,
-- instead of one cached plan for whichever came first.
SET NOCOUNT ON;
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @outcome VARCHAR(9) = NULLIF(:outcome, N'');
DECLARE @since DATETIME2(7) = CAST(NULLIF(:since, N'') AS DATETIME2(7));
DECLARE @until DATETIME2(7) = CAST(NULLIF(:until, N'') AS DATETIME2(7));
DECLARE @after_at DATETIME2(7) = CAST(NULLIF(:after_at, N'') AS DATETIME2(7));
DECLARE @after_seq BIGINT = CAST(NULLIF(:after_seq, N'') AS BIGINT);
SELECT TOP (CAST(:limit AS INT)) seq, id, queue, outcome, attempts, created_at, first_popped_at, finished_at,
       group_key, dedup_key, last_error, payload
FROM dbo.sq_history
WHERE queue = @queue
  AND (@outcome IS NULL OR outcome = @outcome)
  AND (@since IS NULL OR finished_at >= @since)
  AND (@until IS NULL OR finished_at < @until)
  AND (@after_at IS NULL OR finished_at < @after_at OR (finished_at = @after_at AND seq < @after_seq))
ORDER BY finished_at DESC, seq DESC
OPTION (RECOMPILE);

-- name: purge_history
-- Per queue, its oldest records past its retention (a range at the front of sq_history_queue), then
-- dedup keys past their window (sq_dedup_expires), then remembered ids past theirs
-- (sq_client_ids_expires: claims of live items, NULL, are not in it); at most @limit of each. One
-- row: how many of each.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @limit INT = CAST(:limit AS INT);
DECLARE @history INT;
DECLARE @keys INT;
DECLARE @ids INT;
WITH old AS (
    SELECT TOP (@limit) h.seq
    FROM dbo.sq_queues AS q
    CROSS APPLY (
        SELECT TOP (@limit) x.seq
        FROM dbo.sq_history AS x WITH (INDEX(sq_history_queue))
        WHERE x.queue = q.name AND x.finished_at < DATEADD(SECOND, -q.retention_seconds, @now)
        ORDER BY x.finished_at, x.seq
    ) AS h
)
DELETE FROM dbo.sq_history WHERE seq IN (SELECT seq FROM old);
SET @history = @@ROWCOUNT;
WITH expired AS (
    SELECT TOP (@limit) expires_at
    FROM dbo.sq_dedup WITH (INDEX(sq_dedup_expires))
    WHERE expires_at IS NOT NULL AND expires_at <= @now
)
DELETE FROM expired;
SET @keys = @@ROWCOUNT;
WITH expired_ids AS (
    SELECT TOP (@limit) expires_at
    FROM dbo.sq_client_ids WITH (INDEX(sq_client_ids_expires))
    WHERE expires_at IS NOT NULL AND expires_at <= @now
)
DELETE FROM expired_ids;
SET @ids = @@ROWCOUNT;
SELECT @history AS history, @keys AS keys, @ids AS ids;

-- name: put_queue
-- Replace the queue's settings, or create it with them; created says which. UPDLOCK, HOLDLOCK on the
-- UPDATE's seek: two callers creating one queue serialise on its key (a key-range lock while it is
-- missing), so that one inserts and the other updates. The answer comes before the INSERT because
-- T-SQL's IF governs one statement.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @max_attempts INT = :max_attempts;
DECLARE @lease_seconds INT = :lease_seconds;
DECLARE @backoff_base_seconds FLOAT = CAST(:backoff_base_seconds AS FLOAT);
DECLARE @backoff_factor FLOAT = CAST(:backoff_factor AS FLOAT);
DECLARE @backoff_cap_seconds FLOAT = CAST(:backoff_cap_seconds AS FLOAT);
DECLARE @backoff_jitter FLOAT = CAST(:backoff_jitter AS FLOAT);
DECLARE @retention_seconds INT = :retention_seconds;
DECLARE @dedup_window_seconds INT = :dedup_window_seconds;
DECLARE @dedup_window_from VARCHAR(6) = :dedup_window_from;
DECLARE @history_payload BIT = :history_payload;
DECLARE @dead_letter_queue NVARCHAR(128) = NULLIF(:dead_letter_queue, N'');
DECLARE @message_retention_seconds INT = CAST(NULLIF(:message_retention_seconds, N'') AS INT);
DECLARE @max_leased INT = CAST(NULLIF(:max_leased, N'') AS INT);
DECLARE @rate_per_second FLOAT = CAST(NULLIF(:rate_per_second, N'') AS FLOAT);
DECLARE @rate_burst INT = CAST(NULLIF(:rate_burst, N'') AS INT);
DECLARE @max_leased_per_key INT = CAST(NULLIF(:max_leased_per_key, N'') AS INT);
DECLARE @rate_per_key_per_second FLOAT = CAST(NULLIF(:rate_per_key_per_second, N'') AS FLOAT);
DECLARE @priority_aging_seconds INT = CAST(NULLIF(:priority_aging_seconds, N'') AS INT);
DECLARE @limited BIT = :limited;
-- A key's own limits keep the queue limited whatever its own settings.
SET @limited = CASE WHEN @limited = 1 OR EXISTS (
                    SELECT 1 FROM dbo.sq_fair_keys AS k
                    WHERE k.queue = @queue AND (k.max_leased IS NOT NULL OR k.rate_per_second IS NOT NULL))
               THEN 1 ELSE 0 END;
DECLARE @updated TABLE (name NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL, aging INT NULL);
UPDATE dbo.sq_queues WITH (UPDLOCK, HOLDLOCK)
SET max_attempts = @max_attempts, lease_seconds = @lease_seconds, backoff_base_seconds = @backoff_base_seconds,
    backoff_factor = @backoff_factor, backoff_cap_seconds = @backoff_cap_seconds, backoff_jitter = @backoff_jitter,
    retention_seconds = @retention_seconds, dedup_window_seconds = @dedup_window_seconds,
    dedup_window_from = @dedup_window_from, history_payload = @history_payload,
    dead_letter_queue = @dead_letter_queue, message_retention_seconds = @message_retention_seconds,
    max_leased = @max_leased, rate_per_second = @rate_per_second, rate_burst = @rate_burst,
    max_leased_per_key = @max_leased_per_key, rate_per_key_per_second = @rate_per_key_per_second,
    priority_aging_seconds = @priority_aging_seconds,
    limited = @limited, modified_at = @now
OUTPUT inserted.name, deleted.priority_aging_seconds INTO @updated
WHERE name = @queue;
-- A change of priority_aging_seconds re-ranks every item the queue holds (as dbo.sq_push_items
-- ranks), in this batch, so that items ranked with and without aging, or with two periods, never
-- meet in one pop order; its cost grows with the queue's items. A queue made here has none yet.
UPDATE i
SET rank_priority = CASE WHEN @priority_aging_seconds IS NULL THEN i.priority
                         ELSE i.priority - (e.s - ((e.s % @priority_aging_seconds) + @priority_aging_seconds)
                                                  % @priority_aging_seconds) / @priority_aging_seconds END
FROM dbo.sq_items AS i
CROSS APPLY (SELECT DATEDIFF_BIG(SECOND, CAST('1970-01-01' AS DATETIME2(7)), i.created_at) AS s) AS e
WHERE i.queue = @queue
  AND EXISTS (SELECT 1 FROM @updated AS u
              WHERE u.aging <> @priority_aging_seconds OR (u.aging IS NULL AND @priority_aging_seconds IS NOT NULL)
                 OR (u.aging IS NOT NULL AND @priority_aging_seconds IS NULL));
SELECT CASE WHEN EXISTS (SELECT 1 FROM @updated) THEN 0 ELSE 1 END AS created;
IF NOT EXISTS (SELECT 1 FROM @updated)
    INSERT INTO dbo.sq_queues (name, created_at, max_attempts, lease_seconds, backoff_base_seconds, backoff_factor,
                               backoff_cap_seconds, backoff_jitter, retention_seconds, dedup_window_seconds,
                               dedup_window_from, history_payload, dead_letter_queue, message_retention_seconds,
                               max_leased, rate_per_second, rate_burst, max_leased_per_key,
                               rate_per_key_per_second, priority_aging_seconds, limited)
    VALUES (@queue, @now, @max_attempts, @lease_seconds, @backoff_base_seconds, @backoff_factor,
            @backoff_cap_seconds, @backoff_jitter, @retention_seconds, @dedup_window_seconds, @dedup_window_from,
            @history_payload, @dead_letter_queue, @message_retention_seconds,
            @max_leased, @rate_per_second, @rate_burst, @max_leased_per_key, @rate_per_key_per_second,
            @priority_aging_seconds, @limited);

-- name: next_visible_at
-- The long-poll watcher's probe for every queue it waits on: the clock, then one row per queue with
-- the earliest visible_at of its live items (NULL: none). Each MIN is one seek on sq_items_visible,
-- whose filter is this literal predicate. The clock comes first so that it is there for no queues.
-- OPENJSON's columns take the database's default collation: COLLATE where one meets sq_items.queue
-- (Latin1_General_100_BIN2), or a database with another default fails with error 468.
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queues NVARCHAR(MAX) = :queues;
SELECT @now AS now;
SELECT q.queue AS queue, n.next_visible_at AS next_visible_at
FROM OPENJSON(@queues) WITH (queue NVARCHAR(4000) '$') AS q
CROSS APPLY (
    SELECT MIN(i.visible_at) AS next_visible_at
    FROM dbo.sq_items AS i
    WHERE i.queue = q.queue COLLATE Latin1_General_100_BIN2 AND i.status IN ('ready', 'leased')
) AS n;


-- name: queue_exists
SET NOCOUNT ON;
DECLARE @queue NVARCHAR(4000) = :queue;
SELECT CASE WHEN EXISTS (SELECT 1 FROM dbo.sq_queues WHERE name = @queue) THEN 1 ELSE 0 END AS found;

-- name: queue_metadata
-- The queue's times, attributes and tags, each list a JSON array of {"n": name, "v": value} (NULL
-- when there are none).
SET NOCOUNT ON;
DECLARE @queue NVARCHAR(4000) = :queue;
SELECT q.created_at, q.modified_at,
       (SELECT a.name AS n, a.value AS v FROM dbo.sq_queue_attributes AS a WHERE a.queue = q.name
        FOR JSON PATH) AS attributes,
       (SELECT t.[key] AS n, t.value AS v FROM dbo.sq_queue_tags AS t WHERE t.queue = q.name
        FOR JSON PATH) AS tags
FROM dbo.sq_queues AS q WHERE q.name = @queue;

-- name: change_queue_metadata
-- The queue row is locked first (UPDLOCK, HOLDLOCK), so changes of one queue's metadata wait for
-- each other and the tag count below sees the previous change's. Attributes and tags named in
-- :set_* (a JSON object) are written, those in :unset_* (a JSON array of names) removed; nothing
-- changes when the tags would then number more than :max_tags. modified_at moves when :touch.
-- UPDATE then INSERT, not MERGE: the queue row's lock already serialises these writers.
-- found is 0 for a queue that does not exist. OPENJSON's values take the database's default
-- collation: COLLATE where they meet a key column (see next_visible_at).
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @set_attributes NVARCHAR(MAX) = :set_attributes;
DECLARE @unset_attributes NVARCHAR(MAX) = :unset_attributes;
DECLARE @set_tags NVARCHAR(MAX) = :set_tags;
DECLARE @unset_tags NVARCHAR(MAX) = :unset_tags;
DECLARE @max_tags INT = :max_tags;
DECLARE @touch BIT = CAST(:touch AS BIT);
DECLARE @found INT = 0;
DECLARE @tags INT = 0;
SELECT @found = COUNT(*) FROM dbo.sq_queues WITH (UPDLOCK, HOLDLOCK) WHERE name = @queue;
SELECT @tags = COUNT(*) FROM (
    SELECT t.[key] FROM dbo.sq_queue_tags AS t
    WHERE t.queue = @queue AND t.[key] NOT IN (SELECT u.value COLLATE Latin1_General_100_BIN2 FROM OPENJSON(@unset_tags) AS u)
    UNION
    SELECT g.[key] COLLATE Latin1_General_100_BIN2 FROM OPENJSON(@set_tags) AS g
) AS k;
IF @found = 1 AND @tags <= @max_tags
BEGIN
    UPDATE a SET value = g.value
    FROM dbo.sq_queue_attributes AS a
    JOIN OPENJSON(@set_attributes) AS g ON a.name = g.[key] COLLATE Latin1_General_100_BIN2
    WHERE a.queue = @queue;
    INSERT INTO dbo.sq_queue_attributes (queue, name, value)
    SELECT @queue, g.[key], g.value FROM OPENJSON(@set_attributes) AS g
    WHERE NOT EXISTS (
        SELECT 1 FROM dbo.sq_queue_attributes AS a
        WHERE a.queue = @queue AND a.name = g.[key] COLLATE Latin1_General_100_BIN2
    );
    DELETE FROM dbo.sq_queue_attributes
    WHERE queue = @queue AND name IN (SELECT u.value COLLATE Latin1_General_100_BIN2 FROM OPENJSON(@unset_attributes) AS u);
    UPDATE t SET value = g.value
    FROM dbo.sq_queue_tags AS t
    JOIN OPENJSON(@set_tags) AS g ON t.[key] = g.[key] COLLATE Latin1_General_100_BIN2
    WHERE t.queue = @queue;
    INSERT INTO dbo.sq_queue_tags (queue, [key], value)
    SELECT @queue, g.[key], g.value FROM OPENJSON(@set_tags) AS g
    WHERE NOT EXISTS (
        SELECT 1 FROM dbo.sq_queue_tags AS t
        WHERE t.queue = @queue AND t.[key] = g.[key] COLLATE Latin1_General_100_BIN2
    );
    DELETE FROM dbo.sq_queue_tags
    WHERE queue = @queue AND [key] IN (SELECT u.value COLLATE Latin1_General_100_BIN2 FROM OPENJSON(@unset_tags) AS u);
    UPDATE dbo.sq_queues SET modified_at = @now WHERE name = @queue AND @touch = 1;
END;
SELECT @found AS found, @tags AS tags;

-- name: set_paused
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @queue NVARCHAR(4000) = :queue;
UPDATE dbo.sq_queues SET paused = CAST(:paused AS BIT) WHERE name = @queue;
SELECT @@ROWCOUNT AS changed;

-- name: peek
-- Live items in one state at @now (as queue_stats counts them), oldest created first, after the
-- cursor's (created_at, seq) if one is given.
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @state NVARCHAR(16) = :state;
DECLARE @after_at DATETIME2(7) = CAST(NULLIF(:after_at, N'') AS DATETIME2(7));
DECLARE @after_seq BIGINT = CAST(NULLIF(:after_seq, N'') AS BIGINT);
SELECT TOP (CAST(:limit AS INT)) i.seq, i.id, i.queue, i.payload, i.attributes, i.status, i.attempts, i.errors, i.created_at,
       i.visible_at, i.lease_token, i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at, i.died_at,
       q.max_attempts, @now AS now
FROM dbo.sq_items AS i
JOIN dbo.sq_queues AS q ON q.name = i.queue
WHERE i.queue = @queue AND i.status IN ('ready', 'leased')
  AND ((@state = N'ready' AND i.visible_at <= @now AND (i.status = 'ready' OR i.attempts < q.max_attempts))
    OR (@state = N'leased' AND i.status = 'leased' AND i.visible_at > @now)
    OR (@state = N'delayed' AND i.status = 'ready' AND i.visible_at > @now AND i.attempts = 0)
    OR (@state = N'retrying' AND i.status = 'ready' AND i.visible_at > @now AND i.attempts > 0))
  AND (@after_at IS NULL OR i.created_at > @after_at OR (i.created_at = @after_at AND i.seq > @after_seq))
ORDER BY i.created_at, i.seq;


-- name: group_items
-- A group's live items in group order (seq, the order its items are handed out), after the cursor's
-- seq ('' for none): a range of the filtered sq_items_group, which holds no dead item.
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @group NVARCHAR(4000) = :group;
DECLARE @after_seq BIGINT = COALESCE(CAST(NULLIF(:after_seq, N'') AS BIGINT), 0);
SELECT TOP (CAST(:limit AS INT)) i.seq, i.id, i.queue, i.payload, i.attributes, i.status, i.attempts, i.errors, i.created_at,
       i.visible_at, i.lease_token, i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at, i.died_at,
       q.max_attempts, @now AS now
FROM dbo.sq_items AS i WITH (INDEX(sq_items_group))
JOIN dbo.sq_queues AS q ON q.name = i.queue
WHERE i.queue = @queue AND i.group_key = @group AND i.group_key IS NOT NULL AND i.status IN ('ready', 'leased')
  AND i.seq > @after_seq
ORDER BY i.seq;

-- name: dedup_item
-- The item (live or dead) that holds a dedup key of the queue: sq_dedup's key, then the item by id.
-- None once the item finished, though its key may still be held for the queue's dedup window.
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @dedup_key NVARCHAR(4000) = :dedup_key;
-- include: item_row
JOIN dbo.sq_dedup AS d ON d.item_id = i.id AND d.queue = i.queue
WHERE d.queue = @queue AND d.dedup_key = @dedup_key;

-- name: delete_queue
-- The queue row is locked first (UPDLOCK, HOLDLOCK) so that no push registers it meanwhile; live
-- leases decide, unless forced; then its items, history, dedup keys, attributes, tags, fairness keys
-- and row go, in one transaction.
-- The claims of its items' ids go with the items: sought by id (FORCESEEK) from the items deleted,
-- after them, in the order pushes lock an item and its claim (see push_batch). The ids of items that
-- finished earlier stay remembered until their windows end: sq_client_ids is keyed by id alone, not
-- by queue, as on every engine.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @force BIT = CAST(:force AS BIT);
DECLARE @found INT = 0;
DECLARE @leased INT = 0;
DECLARE @items INT = 0;
DECLARE @history INT = 0;
DECLARE @deleted INT = 0;
DECLARE @gone TABLE (id UNIQUEIDENTIFIER NOT NULL, remember_id BIT NOT NULL);
SELECT @found = COUNT(*) FROM dbo.sq_queues WITH (UPDLOCK, HOLDLOCK) WHERE name = @queue;
SELECT @leased = COUNT(*) FROM dbo.sq_items WHERE queue = @queue AND status = 'leased' AND visible_at > @now;
IF @found = 1 AND (@force = 1 OR @leased = 0)
BEGIN
    DELETE i
    OUTPUT deleted.id, deleted.remember_id INTO @gone
    FROM dbo.sq_items AS i
    WHERE i.queue = @queue;
    SET @items = @@ROWCOUNT;
    DELETE k
    FROM dbo.sq_client_ids AS k WITH (FORCESEEK)
    JOIN @gone AS g ON k.id = g.id
    WHERE g.remember_id = 1;
    DELETE FROM dbo.sq_history WHERE queue = @queue;
    SET @history = @@ROWCOUNT;
    DELETE FROM dbo.sq_dedup WHERE queue = @queue;
    DELETE FROM dbo.sq_queue_attributes WHERE queue = @queue;
    DELETE FROM dbo.sq_queue_tags WHERE queue = @queue;
    DELETE FROM dbo.sq_fair_keys WHERE queue = @queue;
    DELETE FROM dbo.sq_queues WHERE name = @queue;
    SET @deleted = 1;
END;
SELECT @found AS found, @leased AS leased, @deleted AS deleted, @items AS items, @history AS history;

-- fragment: queue_counts
-- Per queue: its settings; the live counts read the rows of sq_items_visible (filtered to live
-- items), the dead count sq_items_dead, the history counts sq_history_outcome; none walks the
-- others, so a million dead or finished items do not slow the live figures down. An expired lease
-- on its last attempt counts as dead already. SUM over no rows is NULL, hence the COALESCE where a
-- sum is added to. The SELECT's head is each statement's own (TOP for a page).
q.name AS name, q.max_attempts, q.lease_seconds, q.backoff_base_seconds, q.backoff_factor,
q.backoff_cap_seconds, q.backoff_jitter, q.retention_seconds, q.dedup_window_seconds, q.dedup_window_from,
q.history_payload, q.dead_letter_queue, q.message_retention_seconds, q.priority_aging_seconds, q.max_leased, q.rate_per_second,
q.rate_burst, q.max_leased_per_key, q.rate_per_key_per_second, q.limited, q.paused,
live.ready, live.leased, live.delayed, live.retrying, dead.dead + COALESCE(live.expired_dead, 0) AS dead,
live.oldest_ready, hist.completed_in_history, hist.dead_in_history, @now AS now
FROM dbo.sq_queues AS q
CROSS APPLY (
    SELECT SUM(CASE WHEN i.visible_at <= @now AND (i.status = 'ready' OR i.attempts < q.max_attempts)
                    THEN 1 ELSE 0 END) AS ready,
           SUM(CASE WHEN i.status = 'leased' AND i.visible_at > @now THEN 1 ELSE 0 END) AS leased,
           SUM(CASE WHEN i.status = 'ready' AND i.visible_at > @now AND i.attempts = 0 THEN 1 ELSE 0 END) AS delayed,
           SUM(CASE WHEN i.status = 'ready' AND i.visible_at > @now AND i.attempts > 0 THEN 1 ELSE 0 END) AS retrying,
           SUM(CASE WHEN i.status = 'leased' AND i.visible_at <= @now AND i.attempts >= q.max_attempts
                    THEN 1 ELSE 0 END) AS expired_dead,
           MIN(CASE WHEN i.visible_at <= @now AND (i.status = 'ready' OR i.attempts < q.max_attempts)
                    THEN i.created_at END) AS oldest_ready
    FROM dbo.sq_items AS i
    WHERE i.queue = q.name AND i.status IN ('ready', 'leased')
) AS live
CROSS APPLY (
    SELECT COUNT_BIG(*) AS dead FROM dbo.sq_items AS d WHERE d.queue = q.name AND d.status = 'dead'
) AS dead
CROSS APPLY (
    SELECT SUM(CASE WHEN h.outcome = 'completed' THEN 1 ELSE 0 END) AS completed_in_history,
           SUM(CASE WHEN h.outcome = 'dead' THEN 1 ELSE 0 END) AS dead_in_history
    FROM dbo.sq_history AS h
    WHERE h.queue = q.name
) AS hist

-- name: queue_stats
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
SELECT
    -- include: queue_counts
WHERE q.name = @queue;

-- name: queue_page
-- A page of queues in name order after :after ('' from the first), of those whose names start with
-- :prefix ('' for every queue): a seek of the clustered key from the later of the two, stopped
-- after TOP rows. Under the name's binary collation every name that starts with the prefix sorts
-- at or after it.
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @after NVARCHAR(4000) = :after;
DECLARE @prefix NVARCHAR(4000) = :prefix;
SELECT TOP (CAST(:limit AS INT))
    -- include: queue_counts
WHERE q.name > @after AND q.name >= @prefix AND LEFT(q.name, LEN(@prefix)) = @prefix
ORDER BY q.name;

-- name: count_queues
SELECT COUNT_BIG(*) AS queues FROM dbo.sq_queues;

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
    @Resource = N'simplequeue_migrate', @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = :timeout_ms;
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
VALUES (:version, :name, COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME()));

-- name: write_setting
-- A limit of the service's, for the pushes that do not go through it (sq_settings).
DECLARE @name NVARCHAR(64) = :name, @value NVARCHAR(256) = :value;
UPDATE dbo.sq_settings SET value = @value WHERE name = @name;

-- name: compatibility_level
-- OPENJSON needs 130 (SQL Server 2016); a database restored from an older server keeps its level.
SELECT compatibility_level FROM sys.databases WHERE database_id = DB_ID();

-- name: activity
-- Counts per bucket of the window [@since, @until), for one queue or ('' for none) every queue; only
-- the buckets that have any. Each part seeks a range of an index from @since on, for each queue
-- (@queues, joined first, one seek each):
--   completed, dead  sq_history_queue, by finished_at;
--   pushed           the history records' created_at, within the same range (an item created since
--                    @since finished since then), and live items' created_at from sq_items_visible
--                    (a live item's visible_at is never before it was pushed);
--   failed           each recorded error's time, of live items (sq_items_visible: visible_at moves
--                    forward with each pop and failure) and of dead items not purged (sq_items_dead:
--                    died_at is after every failure). The failures of items that completed since
--                    are not counted: history keeps their attempts and last error, not when.
-- DATEDIFF_BIG(SECOND, ...) counts second boundaries, which from a whole-second @since is the floor.
SET NOCOUNT ON;
DECLARE @queue NVARCHAR(4000) = NULLIF(:queue, N'');
DECLARE @since DATETIME2(7) = CAST(:since AS DATETIME2(7));
DECLARE @until DATETIME2(7) = CAST(:until AS DATETIME2(7));
DECLARE @bucket INT = CAST(:bucket AS INT);
DECLARE @queues TABLE (name NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY);
INSERT INTO @queues (name) SELECT name FROM dbo.sq_queues WHERE @queue IS NULL OR name = @queue;
WITH events AS (
    SELECT h.finished_at AS moment, IIF(h.outcome = 'completed', 'c', 'd') AS kind
    FROM @queues AS q
    JOIN dbo.sq_history AS h WITH (INDEX(sq_history_queue), FORCESEEK) ON h.queue = q.name
    WHERE h.finished_at >= @since AND h.finished_at < @until
    UNION ALL
    SELECT h.created_at, 'p'
    FROM @queues AS q
    JOIN dbo.sq_history AS h WITH (INDEX(sq_history_queue), FORCESEEK) ON h.queue = q.name
    WHERE h.finished_at >= @since AND h.created_at >= @since
    UNION ALL
    SELECT i.created_at, 'p'
    FROM @queues AS q
    JOIN dbo.sq_items AS i WITH (INDEX(sq_items_visible), FORCESEEK) ON i.queue = q.name
    WHERE i.status IN ('ready', 'leased') AND i.visible_at >= @since AND i.created_at >= @since
    UNION ALL
    SELECT e.moment, 'f'
    FROM @queues AS q
    JOIN dbo.sq_items AS i WITH (INDEX(sq_items_visible), FORCESEEK) ON i.queue = q.name
    CROSS APPLY OPENJSON(i.errors) WITH (moment DATETIME2(7) '$.at') AS e
    WHERE i.status IN ('ready', 'leased') AND i.visible_at >= @since AND i.attempts > 0
    UNION ALL
    SELECT e.moment, 'f'
    FROM @queues AS q
    JOIN dbo.sq_items AS i WITH (INDEX(sq_items_dead), FORCESEEK) ON i.queue = q.name
    CROSS APPLY OPENJSON(i.errors) WITH (moment DATETIME2(7) '$.at') AS e
    WHERE i.status = 'dead' AND i.died_at >= @since
)
SELECT TOP (CAST(:limit AS INT))
       CAST(DATEDIFF_BIG(SECOND, @since, moment) / @bucket AS INT) AS bucket,
       SUM(IIF(kind = 'p', 1, 0)) AS pushed, SUM(IIF(kind = 'c', 1, 0)) AS completed,
       SUM(IIF(kind = 'f', 1, 0)) AS failed, SUM(IIF(kind = 'd', 1, 0)) AS dead
FROM events
WHERE moment >= @since AND moment < @until
GROUP BY CAST(DATEDIFF_BIG(SECOND, @since, moment) / @bucket AS INT)
ORDER BY bucket
OPTION (RECOMPILE);

-- name: lease_runs
-- pop(group_runs=True)'s second batch, in the pop's transaction: the runs behind the group heads
-- the pop just leased (:heads, a JSON array of their seqs). A run is the group's next live items in
-- seq order while each is due: ready, or leased with its lease run out before its last attempt (SQS
-- hands a whole run out again when its visibility runs out); a delayed, retrying or held one ends
-- it, and so does a lapsed last attempt, dead already, or one past the queue's retention. At most
-- :room items in all, leased with the pop's token. No other popper takes an item behind a live head, so
-- these need no READPAST: UPDLOCK and ROWLOCK hold them from this read to the UPDATE.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @room INT = CAST(:room AS INT);
DECLARE @heads NVARCHAR(MAX) = :heads;
DECLARE @lease_seconds INT = COALESCE(
    CAST(NULLIF(:lease_seconds, N'') AS INT), (SELECT lease_seconds FROM dbo.sq_queues WHERE name = @queue)
);
DECLARE @max_attempts INT = (SELECT max_attempts FROM dbo.sq_queues WHERE name = @queue);
-- include: retained
WITH runs AS (
    SELECT TOP (@room) r.seq FROM (
        SELECT y.seq,
               MIN(IIF((y.status = 'ready' OR (y.status = 'leased' AND y.attempts < @max_attempts))
                       AND y.visible_at <= @now AND y.created_at >= @retained, 1, 0))
                   OVER (PARTITION BY y.group_key ORDER BY y.seq ROWS UNBOUNDED PRECEDING) AS unbroken,
               ROW_NUMBER() OVER (PARTITION BY y.group_key ORDER BY y.seq) AS n
        FROM OPENJSON(@heads) WITH (seq BIGINT '$') AS j
        JOIN dbo.sq_items AS h ON h.seq = j.seq
        JOIN dbo.sq_items AS y WITH (INDEX(sq_items_group), UPDLOCK, ROWLOCK)
          ON y.queue = h.queue AND y.group_key = h.group_key AND y.seq > h.seq
        WHERE h.queue = @queue AND h.group_key IS NOT NULL AND y.status IN ('ready', 'leased')
    ) AS r
    WHERE r.unbroken = 1 AND r.n <= @room
    ORDER BY r.seq
)
UPDATE i
SET status = 'leased',
    attempts = i.attempts + 1,
    lease_token = CAST(:lease_token AS UNIQUEIDENTIFIER),
    visible_at = DATEADD(SECOND, @lease_seconds, @now),
    first_popped_at = COALESCE(i.first_popped_at, @now)
OUTPUT inserted.seq, inserted.id, inserted.queue, inserted.payload, inserted.created_at, inserted.attempts,
       inserted.lease_token, inserted.visible_at, inserted.priority, inserted.group_key, inserted.attributes,
       inserted.fairness_key, inserted.fair_rank, inserted.rank_priority
FROM dbo.sq_items AS i
JOIN runs ON runs.seq = i.seq
WHERE i.status IN ('ready', 'leased');


-- name: topic_create
-- Topics and subscriptions: store/topics.py holds the flow, written once for every dialect;
-- attributes and tags are JSON text. Each write takes the key's range lock (UPDLOCK, HOLDLOCK)
-- before it looks, so that of two racing creates one inserts and the other reads its row.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @name NVARCHAR(256) = :name;
DECLARE @attributes NVARCHAR(MAX) = :attributes, @tags NVARCHAR(MAX) = :tags;
INSERT INTO dbo.sq_topics (name, created_at, attributes, tags)
OUTPUT inserted.name
SELECT @name, @now, @attributes, @tags
WHERE NOT EXISTS (SELECT 1 FROM dbo.sq_topics WITH (UPDLOCK, HOLDLOCK) WHERE name = @name);

-- name: topic_get
SET NOCOUNT ON;
DECLARE @name NVARCHAR(256) = :name;
SELECT t.name, t.created_at, t.modified_at, t.attributes, t.tags,
       (SELECT COUNT(*) FROM dbo.sq_subscriptions AS s WHERE s.topic = t.name) AS subscriptions
FROM dbo.sq_topics AS t WHERE t.name = @name;

-- name: topic_page
SET NOCOUNT ON;
DECLARE @after NVARCHAR(256) = :after;
SELECT TOP (:limit) t.name, t.created_at, t.modified_at, t.attributes, t.tags,
       (SELECT COUNT(*) FROM dbo.sq_subscriptions AS s WHERE s.topic = t.name) AS subscriptions
FROM dbo.sq_topics AS t WHERE @after = '' OR t.name > @after
ORDER BY t.name;

-- name: topic_update
-- A compare-and-set on the text the caller read: no row when another change came first.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @name NVARCHAR(256) = :name;
DECLARE @attributes NVARCHAR(MAX) = :attributes, @tags NVARCHAR(MAX) = :tags;
DECLARE @old_attributes NVARCHAR(MAX) = :old_attributes, @old_tags NVARCHAR(MAX) = :old_tags;
UPDATE t SET attributes = @attributes, tags = @tags, modified_at = @now
OUTPUT inserted.name, inserted.created_at, inserted.modified_at, inserted.attributes, inserted.tags,
       (SELECT COUNT(*) FROM dbo.sq_subscriptions AS s WHERE s.topic = inserted.name) AS subscriptions
FROM dbo.sq_topics AS t
WHERE t.name = @name AND t.attributes = @old_attributes AND t.tags = @old_tags;

-- name: topic_delete_subscriptions
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @name NVARCHAR(256) = :name;
DELETE s FROM dbo.sq_subscriptions AS s WHERE s.topic = @name;

-- name: topic_delete
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @name NVARCHAR(256) = :name;
DELETE t OUTPUT deleted.name FROM dbo.sq_topics AS t WHERE t.name = @name;

-- name: subscription_create
-- Only to a topic that exists (read under a shared lock held to the end, so that a delete of the
-- topic waits for this transaction and takes this subscription with it), once per endpoint.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @id NVARCHAR(36) = :id, @topic NVARCHAR(256) = :topic, @protocol VARCHAR(8) = :protocol;
DECLARE @endpoint NVARCHAR(2048) = :endpoint, @attributes NVARCHAR(MAX) = :attributes;
DECLARE @confirmed INT = :confirmed, @token NVARCHAR(256) = :token;
INSERT INTO dbo.sq_subscriptions (id, topic, protocol, endpoint, attributes, confirmed, token, created_at)
OUTPUT inserted.id
SELECT CAST(@id AS UNIQUEIDENTIFIER), t.name, @protocol, @endpoint, @attributes, @confirmed,
       NULLIF(@token, ''), @now
FROM dbo.sq_topics AS t WITH (HOLDLOCK)
WHERE t.name = @topic
  AND NOT EXISTS (SELECT 1 FROM dbo.sq_subscriptions AS s WITH (UPDLOCK, HOLDLOCK)
                  WHERE s.topic = @topic AND s.protocol = @protocol
                    AND s.endpoint_hash = CAST(HASHBYTES('SHA2_256', @endpoint) AS BINARY(32)));

-- name: subscription_find
SET NOCOUNT ON;
DECLARE @topic NVARCHAR(256) = :topic, @protocol VARCHAR(8) = :protocol, @endpoint NVARCHAR(2048) = :endpoint;
SELECT s.id, s.topic, s.protocol, s.endpoint, s.attributes, s.confirmed, s.token, s.created_at,
       CASE WHEN s.protocol = 'sqs' AND EXISTS (SELECT 1 FROM dbo.sq_queues AS q WHERE q.name = s.endpoint)
            THEN 1 ELSE 0 END AS queue_exists
FROM dbo.sq_subscriptions AS s
WHERE s.topic = @topic AND s.protocol = @protocol
  AND s.endpoint_hash = CAST(HASHBYTES('SHA2_256', @endpoint) AS BINARY(32)) AND s.endpoint = @endpoint;

-- name: subscription_get
SET NOCOUNT ON;
DECLARE @id NVARCHAR(36) = :id;
SELECT s.id, s.topic, s.protocol, s.endpoint, s.attributes, s.confirmed, s.token, s.created_at,
       CASE WHEN s.protocol = 'sqs' AND EXISTS (SELECT 1 FROM dbo.sq_queues AS q WHERE q.name = s.endpoint)
            THEN 1 ELSE 0 END AS queue_exists
FROM dbo.sq_subscriptions AS s WHERE s.id = CAST(@id AS UNIQUEIDENTIFIER);

-- name: subscription_page
-- In UNIQUEIDENTIFIER's own order: the cursor is the last id of the page, whatever order that is.
SET NOCOUNT ON;
DECLARE @topic NVARCHAR(256) = :topic, @after NVARCHAR(36) = :after;
SELECT TOP (:limit) s.id, s.topic, s.protocol, s.endpoint, s.attributes, s.confirmed, s.token, s.created_at,
       CASE WHEN s.protocol = 'sqs' AND EXISTS (SELECT 1 FROM dbo.sq_queues AS q WHERE q.name = s.endpoint)
            THEN 1 ELSE 0 END AS queue_exists
FROM dbo.sq_subscriptions AS s
WHERE (@topic = '' OR s.topic = @topic) AND (@after = '' OR s.id > CAST(@after AS UNIQUEIDENTIFIER))
ORDER BY s.id;

-- name: subscription_update
-- A compare-and-set on the attributes' text the caller read.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @id NVARCHAR(36) = :id, @attributes NVARCHAR(MAX) = :attributes;
DECLARE @old_attributes NVARCHAR(MAX) = :old_attributes, @confirmed INT = :confirmed, @token NVARCHAR(256) = :token;
UPDATE s SET attributes = @attributes, confirmed = @confirmed, token = NULLIF(@token, '')
OUTPUT inserted.id, inserted.topic, inserted.protocol, inserted.endpoint, inserted.attributes,
       inserted.confirmed, inserted.token, inserted.created_at,
       CASE WHEN inserted.protocol = 'sqs'
             AND EXISTS (SELECT 1 FROM dbo.sq_queues AS q WHERE q.name = inserted.endpoint)
            THEN 1 ELSE 0 END AS queue_exists
FROM dbo.sq_subscriptions AS s
WHERE s.id = CAST(@id AS UNIQUEIDENTIFIER) AND s.attributes = @old_attributes;

-- name: subscription_delete
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @id NVARCHAR(36) = :id;
DELETE s OUTPUT deleted.id FROM dbo.sq_subscriptions AS s WHERE s.id = CAST(@id AS UNIQUEIDENTIFIER);

-- name: topic_fanout
-- A publish's one read: the topic (NULL subscription columns when it has none) and each of its
-- subscriptions, with whether a queue subscription's queue exists.
SET NOCOUNT ON;
DECLARE @topic NVARCHAR(256) = :topic;
SELECT t.created_at AS topic_created_at, t.modified_at AS topic_modified_at,
       t.attributes AS topic_attributes, t.tags AS topic_tags,
       s.id, s.topic, s.protocol, s.endpoint, s.attributes, s.confirmed, s.token, s.created_at,
       CASE WHEN s.protocol = 'sqs' AND EXISTS (SELECT 1 FROM dbo.sq_queues AS q WHERE q.name = s.endpoint)
            THEN 1 ELSE 0 END AS queue_exists
FROM dbo.sq_topics AS t LEFT JOIN dbo.sq_subscriptions AS s ON s.topic = t.name
WHERE t.name = @topic
ORDER BY s.id;

-- name: signing_key_insert
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @name NVARCHAR(64) = :name, @private_pem NVARCHAR(MAX) = :private_pem;
DECLARE @certificate_pem NVARCHAR(MAX) = :certificate_pem;
INSERT INTO dbo.sq_signing_keys (name, private_pem, certificate_pem, created_at)
SELECT @name, @private_pem, @certificate_pem, @now
WHERE NOT EXISTS (SELECT 1 FROM dbo.sq_signing_keys WITH (UPDLOCK, HOLDLOCK) WHERE name = @name);

-- name: signing_key_get
SET NOCOUNT ON;
DECLARE @name NVARCHAR(64) = :name;
SELECT private_pem, certificate_pem FROM dbo.sq_signing_keys WHERE name = @name;

-- Flow limits (domain/limits.py, store.py: _pop). A pop of a queue whose row says `limited`
-- locks that row first (UPDLOCK, HOLDLOCK: held to the end of the pop's transaction), so that such
-- pops of the queue take turns on every replica; then, in a statement of its own, counts the
-- leases (READCOMMITTEDLOCK: committed rows, not row versions, under READ_COMMITTED_SNAPSHOT); then
-- claims what the limits allow and takes the tokens.

-- name: queue_limits
-- A careful pop's first look at the queue's limits, without a lock: pops limited per key alone take
-- turns on their keys' rows (lock_keys), side by side; a queue with queue-wide limits (max_leased,
-- rate_per_second) is read again under its lock (lock_limits). keys_limited: whether some key of the
-- queue has limits of its own (then its pops take the keys' turns), looked up only when nothing
-- else says so (queue-wide limits, no per-key default): a queue limited per key pops by its keys
-- anyway, and reading all its keys' rows would cost every pop.
SET NOCOUNT ON;
DECLARE @queue NVARCHAR(4000) = :queue;
SELECT q.limited, q.max_leased, q.rate_per_second, q.rate_burst, q.max_leased_per_key, q.rate_per_key_per_second,
       q.rate_tokens, q.rate_at, COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME()) AS now,
       CASE WHEN (q.max_leased IS NOT NULL OR q.rate_per_second IS NOT NULL)
                 AND q.max_leased_per_key IS NULL AND q.rate_per_key_per_second IS NULL
                 AND EXISTS (SELECT 1 FROM dbo.sq_fair_keys AS k
                             WHERE k.queue = @queue AND (k.max_leased IS NOT NULL OR k.rate_per_second IS NOT NULL))
            THEN 1 ELSE 0 END AS keys_limited
FROM dbo.sq_queues AS q
WHERE q.name = @queue;

-- name: lock_limits
-- queue_limits, for a queue with queue-wide limits: its row locked to the end of the pop's
-- transaction. SYSUTCDATETIME() is read after the lock is had: the bucket's time is then, not when
-- the pop began.
SET NOCOUNT ON;
DECLARE @queue NVARCHAR(4000) = :queue;
SELECT limited, max_leased, rate_per_second, rate_burst, max_leased_per_key, rate_per_key_per_second, rate_tokens, rate_at,
       COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME()) AS now
FROM dbo.sq_queues WITH (UPDLOCK, HOLDLOCK, ROWLOCK)
WHERE name = @queue;

-- name: count_leased
-- Unexpired leases, counted no further than the limit: a range of sq_items_lapsed from now on.
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @cap INT = CAST(:cap AS INT);
SELECT COUNT(*) AS leased FROM (
    SELECT TOP (@cap) i.seq
    FROM dbo.sq_items AS i WITH (INDEX(sq_items_lapsed), READCOMMITTEDLOCK)
    WHERE i.queue = @queue AND i.status = 'leased' AND i.visible_at > @now
) AS leases;

-- name: take_tokens
-- The bucket after a pop: its tokens as counted at :at, less the items the pop took.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @queue NVARCHAR(4000) = :queue;
DECLARE @tokens FLOAT = CAST(:tokens AS FLOAT);
DECLARE @at DATETIME2(7) = CAST(:at AS DATETIME2(7));
UPDATE dbo.sq_queues SET rate_tokens = @tokens, rate_at = @at WHERE name = @queue;
SELECT @@ROWCOUNT AS changed;

-- fragment: schedule_columns
-- Schedules (store/schedules.py holds the flow, written once for every dialect). previous_live:
-- whether the item the last firing pushed is still live, read for overlap 'skip' only.
s.name, s.queue, s.payload, s.every_seconds, s.cron, s.timezone, s.at, s.priority, s.group_key,
s.paused, s.jitter_seconds, s.overlap, s.catch_up, s.created_at, s.modified_at, s.next_run_at,
s.last_run_at, s.last_item_id, s.description, s.aws,
CASE WHEN s.overlap = 'skip' AND s.last_item_id IS NOT NULL
          AND EXISTS (SELECT 1 FROM dbo.sq_items AS i WHERE i.id = s.last_item_id AND i.status <> 'dead')
     THEN 1 ELSE 0 END AS previous_live

-- name: schedule_put
-- Optional values come as '' (params.bound); the key's range lock (UPDLOCK, HOLDLOCK) makes two
-- racing puts of one name take turns. @must says what the name must be: 'new' (CreateSchedule:
-- an existing one is left as it is), 'existing' (UpdateSchedule: none is made), 'any' (the REST
-- API's PUT). Returns the name when it made or replaced the schedule.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @name NVARCHAR(80) = :name, @queue NVARCHAR(128) = :queue, @payload NVARCHAR(MAX) = :payload;
DECLARE @every_seconds INT = CAST(NULLIF(CAST(:every_seconds AS NVARCHAR(20)), N'') AS INT);
DECLARE @cron NVARCHAR(256) = NULLIF(:cron, N''), @timezone NVARCHAR(64) = :timezone;
DECLARE @at DATETIME2(7) = CAST(NULLIF(:at, N'') AS DATETIME2(7));
DECLARE @priority INT = :priority, @group_key NVARCHAR(128) = NULLIF(:group_key, N''), @paused INT = :paused;
DECLARE @jitter_seconds INT = :jitter_seconds, @overlap VARCHAR(8) = :overlap, @catch_up VARCHAR(8) = :catch_up;
DECLARE @next_run_at DATETIME2(7) = CAST(NULLIF(:next_run_at, N'') AS DATETIME2(7));
DECLARE @description NVARCHAR(512) = NULLIF(:description, N''), @aws NVARCHAR(MAX) = NULLIF(:aws, N'');
DECLARE @must VARCHAR(8) = :must, @found INT = 0, @changed INT = 0;
SELECT @found = 1 FROM dbo.sq_schedules AS s WITH (UPDLOCK, HOLDLOCK) WHERE s.name = @name;
UPDATE s SET queue = @queue, payload = @payload, every_seconds = @every_seconds, cron = @cron, timezone = @timezone,
             at = @at, priority = @priority, group_key = @group_key, paused = @paused, jitter_seconds = @jitter_seconds,
             overlap = @overlap, catch_up = @catch_up, modified_at = @now, next_run_at = @next_run_at,
             description = @description, aws = @aws
FROM dbo.sq_schedules AS s WHERE s.name = @name AND @found = 1 AND @must <> 'new';
SET @changed = @@ROWCOUNT;
INSERT INTO dbo.sq_schedules (name, queue, payload, every_seconds, cron, timezone, at, priority, group_key,
                              paused, jitter_seconds, overlap, catch_up, created_at, next_run_at, description, aws)
SELECT @name, @queue, @payload, @every_seconds, @cron, @timezone, @at, @priority, @group_key,
       @paused, @jitter_seconds, @overlap, @catch_up, @now, @next_run_at, @description, @aws
WHERE @found = 0 AND @must <> 'existing';
SET @changed = @changed + @@ROWCOUNT;
SELECT @name AS name WHERE @changed = 1;

-- name: schedule_get
SET NOCOUNT ON;
DECLARE @name NVARCHAR(80) = :name;
SELECT
    -- include: schedule_columns
FROM dbo.sq_schedules AS s WHERE s.name = @name;

-- name: schedule_page
SET NOCOUNT ON;
DECLARE @after NVARCHAR(80) = :after;
SELECT TOP (:limit)
    -- include: schedule_columns
FROM dbo.sq_schedules AS s WHERE @after = '' OR s.name > @after
ORDER BY s.name;

-- name: schedule_delete
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @name NVARCHAR(80) = :name;
DELETE s OUTPUT deleted.name FROM dbo.sq_schedules AS s WHERE s.name = @name;

-- name: schedule_pause
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @name NVARCHAR(80) = :name;
UPDATE s SET paused = 1, modified_at = @now OUTPUT inserted.name
FROM dbo.sq_schedules AS s WHERE s.name = @name;

-- name: schedule_resume
-- The next slot from now: the slots of a pause are not caught up.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @name NVARCHAR(80) = :name;
DECLARE @next_run_at DATETIME2(7) = CAST(NULLIF(:next_run_at, N'') AS DATETIME2(7));
UPDATE s SET paused = 0, modified_at = @now,
             next_run_at = CASE WHEN s.paused = 1 THEN @next_run_at ELSE s.next_run_at END
OUTPUT inserted.name
FROM dbo.sq_schedules AS s WHERE s.name = @name;

-- name: schedules_due
-- A scheduler's one statement per wake: the due schedules, oldest slot first, and the first
-- schedule due after them (when to wake next). Both are ranges of sq_schedules_due.
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
SELECT d.* FROM (
    SELECT TOP (:limit)
        -- include: schedule_columns
    FROM dbo.sq_schedules AS s WHERE s.paused = 0 AND s.next_run_at <= @now
    ORDER BY s.next_run_at
) AS d
UNION ALL
SELECT n.* FROM (
    SELECT TOP (1)
        -- include: schedule_columns
    FROM dbo.sq_schedules AS s WHERE s.paused = 0 AND s.next_run_at > @now
    ORDER BY s.next_run_at
) AS n;

-- name: schedules_next
-- A scheduler's one statement per wake when nothing is due: the earliest slot of any unpaused
-- schedule (the first entry of sq_schedules_due).
SET NOCOUNT ON;
SELECT MIN(next_run_at) AS next_run_at FROM dbo.sq_schedules WHERE paused = 0;

-- name: schedules_due_locked
-- Firing in batches: the due schedules no other replica is firing, locked (UPDLOCK) until this
-- transaction has moved their slots and pushed their items; READPAST skips those another replica
-- holds, so that the replicas split a slot's schedules rather than wait for each other.
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
SELECT TOP (:limit)
    -- include: schedule_columns
FROM dbo.sq_schedules AS s WITH (UPDLOCK, READPAST, ROWLOCK)
WHERE s.paused = 0 AND s.next_run_at <= @now
ORDER BY s.next_run_at;

-- name: schedules_claimed
-- The locked batch's new slots, one statement for the batch: :claims is a JSON array of objects,
-- optional values as '' (params.bound). OPENJSON's text takes the database's collation: the name is
-- compared in the column's.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @claims NVARCHAR(MAX) = :claims;
UPDATE s SET next_run_at = CAST(NULLIF(c.following, N'') AS DATETIME2(7)),
             last_run_at = COALESCE(CAST(NULLIF(c.last_run_at, N'') AS DATETIME2(7)), s.last_run_at),
             last_item_id = COALESCE(CAST(NULLIF(c.last_item_id, N'') AS UNIQUEIDENTIFIER), s.last_item_id)
OUTPUT inserted.name
FROM dbo.sq_schedules AS s
JOIN OPENJSON(@claims) WITH (
    name NVARCHAR(80) '$.name', claimed NVARCHAR(40) '$.claimed', following NVARCHAR(40) '$.following',
    last_run_at NVARCHAR(40) '$.last_run_at', last_item_id NVARCHAR(36) '$.last_item_id'
) AS c ON s.name = c.name COLLATE Latin1_General_100_BIN2 AND s.next_run_at = CAST(c.claimed AS DATETIME2(7))
WHERE s.paused = 0;

-- name: schedule_claim
-- Firing: the compare-and-set on the slot read. Of replicas racing, one changes the row (the
-- others wait for its lock, then find another next_run_at) and pushes in the same transaction.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @name NVARCHAR(80) = :name, @claimed DATETIME2(7) = CAST(:claimed AS DATETIME2(7));
DECLARE @following DATETIME2(7) = CAST(NULLIF(:following, N'') AS DATETIME2(7));
DECLARE @last_run_at DATETIME2(7) = CAST(NULLIF(:last_run_at, N'') AS DATETIME2(7));
DECLARE @last_item_id NVARCHAR(36) = NULLIF(:last_item_id, N'');
UPDATE s SET next_run_at = @following, last_run_at = COALESCE(@last_run_at, s.last_run_at),
             last_item_id = COALESCE(CAST(@last_item_id AS UNIQUEIDENTIFIER), s.last_item_id)
OUTPUT inserted.name
FROM dbo.sq_schedules AS s WHERE s.name = @name AND s.next_run_at = @claimed AND s.paused = 0;

-- name: schedule_triggered
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @name NVARCHAR(80) = :name;
DECLARE @last_item_id NVARCHAR(36) = :last_item_id;
UPDATE s SET last_run_at = @now, last_item_id = CAST(@last_item_id AS UNIQUEIDENTIFIER)
OUTPUT inserted.name
FROM dbo.sq_schedules AS s WHERE s.name = @name;

-- name: put_key
-- A key's own settings (store/keys.py), making its row for a key not seen yet (its last rank 0:
-- its first push starts from the queue's virtual time); no row when the queue does not exist. New
-- rate settings start from a full bucket. UPDLOCK, HOLDLOCK: two callers making one key serialise
-- on it, so that one inserts and the other updates.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @queue NVARCHAR(128) = :queue, @key NVARCHAR(128) = :key;
DECLARE @weight FLOAT = CAST(:weight AS FLOAT);
DECLARE @max_leased INT = CAST(NULLIF(:max_leased, N'') AS INT);
DECLARE @rate_per_second FLOAT = CAST(NULLIF(:rate_per_second, N'') AS FLOAT);
UPDATE f SET weight = @weight, max_leased = @max_leased, rate_per_second = @rate_per_second, rate_tokens = NULL, rate_at = NULL
FROM dbo.sq_fair_keys AS f WITH (UPDLOCK, HOLDLOCK)
WHERE f.queue = @queue AND f.fairness_key = @key;
IF @@ROWCOUNT = 0
    INSERT INTO dbo.sq_fair_keys (queue, fairness_key, last_rank, weight, max_leased, rate_per_second)
    SELECT q.name, @key, 0, @weight, @max_leased, @rate_per_second FROM dbo.sq_queues AS q WHERE q.name = @queue;
-- The queue's `limited` after its keys' settings changed: a key's own limits make its pops careful.
UPDATE dbo.sq_queues
SET limited = CASE WHEN max_leased IS NOT NULL OR rate_per_second IS NOT NULL OR max_leased_per_key IS NOT NULL
                        OR rate_per_key_per_second IS NOT NULL
                        OR EXISTS (SELECT 1 FROM dbo.sq_fair_keys AS k
                                   WHERE k.queue = @queue AND (k.max_leased IS NOT NULL OR k.rate_per_second IS NOT NULL))
                   THEN 1 ELSE 0 END
WHERE name = @queue;
SELECT f.fairness_key FROM dbo.sq_fair_keys AS f WHERE f.queue = @queue AND f.fairness_key = @key;

-- name: reset_key
-- A key back to the queue's defaults; its last rank stays, so it keeps its turn.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @queue NVARCHAR(128) = :queue, @key NVARCHAR(128) = :key;
UPDATE dbo.sq_fair_keys
SET weight = 1, max_leased = NULL, rate_per_second = NULL, rate_tokens = NULL, rate_at = NULL
WHERE queue = @queue AND fairness_key = @key;
-- The queue's `limited` after its keys' settings changed: a key's own limits make its pops careful.
UPDATE dbo.sq_queues
SET limited = CASE WHEN max_leased IS NOT NULL OR rate_per_second IS NOT NULL OR max_leased_per_key IS NOT NULL
                        OR rate_per_key_per_second IS NOT NULL
                        OR EXISTS (SELECT 1 FROM dbo.sq_fair_keys AS k
                                   WHERE k.queue = @queue AND (k.max_leased IS NOT NULL OR k.rate_per_second IS NOT NULL))
                   THEN 1 ELSE 0 END
WHERE name = @queue;

-- name: key_page
-- A page of a queue's keys in key order after :after ('': from the first), or the one key :key,
-- with their settings and live counts (leases a seek of sq_items_key_leased each). The unkeyed
-- items' N'' is not a key here.
SET NOCOUNT ON;
DECLARE @queue NVARCHAR(128) = :queue, @after NVARCHAR(128) = :after, @key NVARCHAR(128) = :key;
SELECT TOP (:limit) k.fairness_key, k.weight, k.max_leased, k.rate_per_second,
       (SELECT COUNT(*) FROM dbo.sq_items AS i
        WHERE i.queue = @queue AND i.fairness_key = k.fairness_key AND i.status = 'ready') AS ready,
       (SELECT COUNT(*) FROM dbo.sq_items AS i
        WHERE i.queue = @queue AND i.fairness_key = k.fairness_key AND i.status = 'leased') AS leased
FROM dbo.sq_fair_keys AS k
WHERE k.queue = @queue AND k.fairness_key > @after AND (@key = N'' OR k.fairness_key = @key)
ORDER BY k.fairness_key;

-- name: top_keys
-- The queue's busiest keys: the most ready items first, then the most leased, at most :limit, each
-- with its unexpired leases (as a pop counts them) and its cap (its own max_leased, else the
-- queue's max_leased_per_key). Unkeyed items are the NULL key. One walk of the queue's range of
-- sq_items_visible, as the queue's own counts walk it; for a queue that never saw a key (no
-- sq_fair_keys row), no walk at all.
SET NOCOUNT ON;
DECLARE @now DATETIME2(7) = COALESCE(CAST(NULLIF(:now, N'') AS DATETIME2(7)), SYSUTCDATETIME());
DECLARE @queue NVARCHAR(128) = :queue;
SELECT TOP (:limit) c.fairness_key, c.ready, c.leased, COALESCE(k.max_leased, q.max_leased_per_key) AS max_leased
FROM dbo.sq_queues AS q
CROSS APPLY (
    SELECT i.fairness_key,
           SUM(CASE WHEN i.visible_at <= @now AND (i.status = 'ready' OR i.attempts < q.max_attempts)
                    THEN 1 ELSE 0 END) AS ready,
           SUM(CASE WHEN i.status = 'leased' AND i.visible_at > @now THEN 1 ELSE 0 END) AS leased
    FROM dbo.sq_items AS i
    WHERE i.queue = q.name AND i.status IN ('ready', 'leased')
    GROUP BY i.fairness_key
) AS c
LEFT JOIN dbo.sq_fair_keys AS k ON k.queue = q.name AND k.fairness_key = c.fairness_key
WHERE q.name = @queue AND EXISTS (SELECT 1 FROM dbo.sq_fair_keys AS f WHERE f.queue = @queue)
  AND (c.ready > 0 OR c.leased > 0)
ORDER BY c.ready DESC, c.leased DESC, CASE WHEN c.fairness_key IS NULL THEN 1 ELSE 0 END, c.fairness_key;
