-- Queries of the PostgreSQL dialect (asyncpg, $n parameters).
-- $now is NULL in production, so every time comes from the database's clock (one clock for
-- every replica; seed 004); tests bind a fake clock in its place.

-- name: push_batch
-- One statement: queues registered, items inserted in the order given. Existing ids are left out
-- (the caller learns which from RETURNING). The statement trigger NOTIFYs each queue at commit.
WITH new_queues AS (
    INSERT INTO sq_queues (name, created_at)
    SELECT DISTINCT q, COALESCE($5::timestamptz, now()) FROM unnest($2::text[]) AS q
    ON CONFLICT (name) DO NOTHING
)
INSERT INTO sq_items (id, queue, payload, created_at, visible_at)
SELECT t.id, t.queue, t.payload::json, t.created_at, COALESCE($5::timestamptz, now())
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[]) WITH ORDINALITY
    AS t(id, queue, payload, created_at, ord)
ORDER BY t.ord
ON CONFLICT (id) DO NOTHING
RETURNING id

-- name: pop
-- SKIP LOCKED: concurrent poppers pass over rows another transaction is claiming instead of
-- queueing behind it; each row goes to exactly one of them.
-- seq = ANY(ARRAY(...)): the claim runs once and the UPDATE finds its rows by primary key. Joined
-- to a CTE instead, the planner may hash-join against a scan of the whole table (seen: 20,000 rows
-- read to lease 100), a cost that grows with everything the table holds.
UPDATE sq_items
SET status = 'leased',
    attempts = attempts + 1,
    lease_token = $4,
    visible_at = COALESCE($2::timestamptz, now()) + $5 * interval '1 second'
WHERE seq = ANY (ARRAY(
    SELECT seq FROM sq_items
    WHERE queue = $1 AND status IN ('ready', 'leased') AND visible_at <= COALESCE($2::timestamptz, now())
    ORDER BY created_at, seq
    LIMIT $3
    FOR UPDATE SKIP LOCKED
))
RETURNING seq, id, queue, payload::text AS payload, created_at, attempts, lease_token, visible_at

-- name: complete
DELETE FROM sq_items WHERE id = $1 AND ($2::uuid IS NULL OR lease_token = $2)

-- name: complete_batch
-- Rows come back for the requested items that existed (CTEs share the statement's snapshot, so
-- `present` sees them before the DELETE); those not deleted were refused for their lease token.
-- The `id = ANY($1)` conditions let both look their rows up in sq_items_id_key rather than scan.
WITH present AS (
    SELECT id FROM sq_items WHERE id = ANY ($1::uuid[])
), done AS (
    DELETE FROM sq_items AS i
    USING unnest($1::uuid[], $2::uuid[]) AS r(id, token)
    WHERE i.id = ANY ($1::uuid[]) AND i.id = r.id AND (r.token IS NULL OR i.lease_token = r.token)
    RETURNING i.id
)
SELECT present.id, done.id IS NOT NULL AS completed
FROM present LEFT JOIN done ON done.id = present.id

-- name: next_visible_at
-- A correlated min() per queue: each is one seek on sq_items_visible, however many items wait.
SELECT q.queue,
       (SELECT min(i.visible_at) FROM sq_items AS i
        WHERE i.queue = q.queue AND i.status IN ('ready', 'leased')) AS next,
       COALESCE($2::timestamptz, now()) AS now
FROM unnest($1::text[]) AS q(queue)

-- name: fail
UPDATE sq_items
SET status = CASE WHEN $3 THEN 'ready' ELSE 'dead' END,
    visible_at = CASE WHEN $3 THEN COALESCE($5::timestamptz, now()) + $4 * interval '1 second' ELSE visible_at END,
    lease_token = NULL,
    errors = errors || jsonb_build_array(jsonb_build_object('at', COALESCE($5::timestamptz, now()), 'error', $6::text))
WHERE id = $1 AND status <> 'dead' AND ($2::uuid IS NULL OR lease_token = $2)
RETURNING id, queue, payload::text AS payload, status, attempts, errors::text AS errors, created_at, visible_at,
          COALESCE($5::timestamptz, now()) AS now

-- name: get_item
SELECT id, queue, payload::text AS payload, status, attempts, errors::text AS errors, created_at, visible_at,
       lease_token, COALESCE($2::timestamptz, now()) AS now
FROM sq_items WHERE id = $1

-- name: queue_stats
-- Per queue: the live counts read sq_items_pop's rows, the dead count sq_items_dead; neither
-- walks the other kind, so a million dead items do not slow the live figures down.
SELECT q.name, live.ready, live.leased, dead.dead, live.oldest_ready, c.now
FROM (SELECT COALESCE($1::timestamptz, now()) AS now) AS c
CROSS JOIN sq_queues AS q
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE i.status = 'ready' OR i.visible_at <= c.now) AS ready,
           count(*) FILTER (WHERE i.status = 'leased' AND i.visible_at > c.now) AS leased,
           min(i.created_at) FILTER (WHERE i.visible_at <= c.now) AS oldest_ready
    FROM sq_items AS i WHERE i.queue = q.name AND i.status IN ('ready', 'leased')
) AS live
CROSS JOIN LATERAL (
    SELECT count(*) AS dead FROM sq_items AS d WHERE d.queue = q.name AND d.status = 'dead'
) AS dead
WHERE $2::text IS NULL OR q.name = $2
ORDER BY q.name

-- name: lock_migrations
-- Replicas starting together: one migrates, the others wait here and then find nothing to do.
SELECT pg_advisory_xact_lock(hashtext('simplequeue_migrate'))

-- name: create_version_table
CREATE TABLE IF NOT EXISTS sq_schema_version (
    version integer NOT NULL PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: applied_versions
SELECT version FROM sq_schema_version ORDER BY version

-- name: record_version
INSERT INTO sq_schema_version (version, name) VALUES ($1, $2)
