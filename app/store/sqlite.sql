-- Queries of the SQLite dialect. Writes run inside BEGIN IMMEDIATE: SQLite has one writer
-- per database file, so taking the write lock up front makes every claim atomic across
-- all processes that share the file, without SKIP LOCKED.

-- name: ensure_queue
INSERT INTO sq_queues (name, created_at) VALUES (:queue, :now)
ON CONFLICT (name) DO NOTHING

-- name: insert_item
INSERT INTO sq_items (id, queue, payload, created_at, visible_at)
VALUES (:id, :queue, :payload, :created_at, :now)

-- name: existing_ids
SELECT id FROM sq_items WHERE id IN (SELECT value FROM json_each(:ids))

-- name: complete_batch
-- :items is a JSON array of {"id", "token"}; a null token completes whatever the lease.
DELETE FROM sq_items
WHERE seq IN (
    SELECT i.seq
    FROM json_each(:items) AS r
    JOIN sq_items AS i ON i.id = json_extract(r.value, '$.id')
    WHERE json_extract(r.value, '$.token') IS NULL OR i.lease_token = json_extract(r.value, '$.token')
)
RETURNING id

-- name: next_visible_at
SELECT q.value AS queue,
       (SELECT MIN(i.visible_at) FROM sq_items AS i
        WHERE i.queue = q.value AND i.status IN ('ready', 'leased')) AS next
FROM json_each(:queues) AS q

-- name: pop
UPDATE sq_items
SET status = 'leased', attempts = attempts + 1, lease_token = :lease_token, visible_at = :lease_expires_at
WHERE seq IN (
    SELECT seq FROM sq_items INDEXED BY sq_items_pop
    WHERE queue = :queue AND status IN ('ready', 'leased') AND visible_at <= :now
    ORDER BY created_at, seq
    LIMIT :max_items
)
RETURNING seq, id, queue, payload, created_at, attempts, lease_token, visible_at

-- name: complete
DELETE FROM sq_items
WHERE id = :id AND (:lease_token IS NULL OR lease_token = :lease_token)

-- name: fail
UPDATE sq_items
SET status = CASE WHEN :retry THEN 'ready' ELSE 'dead' END,
    visible_at = CASE WHEN :retry THEN :retry_at ELSE visible_at END,
    lease_token = NULL,
    errors = json_insert(errors, '$[#]', json_object('at', :now, 'error', :error))
WHERE id = :id AND status <> 'dead' AND (:lease_token IS NULL OR lease_token = :lease_token)
RETURNING id, queue, payload, status, attempts, errors, created_at, visible_at

-- name: get_item
SELECT id, queue, payload, status, attempts, errors, created_at, visible_at, lease_token
FROM sq_items WHERE id = :id

-- name: queue_stats
-- Per queue: the live counts read sq_items_pop's rows, the dead count sq_items_dead; neither
-- walks the other kind, so a million dead items do not slow the live figures down.
SELECT q.name AS name,
       (SELECT COUNT(*) FROM sq_items AS i INDEXED BY sq_items_pop
        WHERE i.queue = q.name AND i.status IN ('ready', 'leased')
          AND (i.status = 'ready' OR i.visible_at <= :now)) AS ready,
       (SELECT COUNT(*) FROM sq_items AS i INDEXED BY sq_items_pop
        WHERE i.queue = q.name AND i.status IN ('ready', 'leased')
          AND i.status = 'leased' AND i.visible_at > :now) AS leased,
       (SELECT COUNT(*) FROM sq_items AS d INDEXED BY sq_items_dead
        WHERE d.queue = q.name AND d.status = 'dead') AS dead,
       (SELECT MIN(i.created_at) FROM sq_items AS i INDEXED BY sq_items_pop
        WHERE i.queue = q.name AND i.status IN ('ready', 'leased') AND i.visible_at <= :now) AS oldest_ready,
       :now AS now
FROM sq_queues AS q
WHERE :queue IS NULL OR q.name = :queue
ORDER BY q.name

-- name: applied_versions
SELECT version FROM sq_schema_version ORDER BY version

-- name: create_version_table
CREATE TABLE IF NOT EXISTS sq_schema_version (
    version INTEGER NOT NULL PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
)

-- name: record_version
INSERT INTO sq_schema_version (version, name, applied_at) VALUES (:version, :name, :now)
