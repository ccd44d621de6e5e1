-- Queries of the SQLite dialect. Writes run inside BEGIN IMMEDIATE: SQLite has one writer
-- per database file, so taking the write lock up front makes every claim atomic across
-- all processes that share the file, without SKIP LOCKED. Several statements of one write
-- therefore see and change the same rows with nothing in between.
-- Times are fixed-width UTC text; sq_add_seconds(text, seconds) is registered by the store.

-- name: ensure_queue
INSERT INTO sq_queues (name, created_at) VALUES (:queue, :now)
ON CONFLICT (name) DO NOTHING

-- name: insert_item
-- :rank_priority: the item's rank (domain/aging.py), from its queue's aging read by push_queues.
INSERT INTO sq_items (id, queue, payload, created_at, visible_at, priority, group_key, dedup_key, remember_id,
                      attributes, fairness_key, fair_rank, rank_priority)
VALUES (:id, :queue, :payload, :created_at, :visible_at, :priority, :group_key, :dedup_key, :remember_id,
        :attributes, :fairness_key, :fair_rank, :rank_priority)

-- name: push_queues
-- Of :queues (a JSON array), each that exists: its priority_aging_seconds, and whether it saw a
-- fairness key (domain/fairness.py). One look-up for both, as a push needs both.
SELECT q.name AS queue, q.priority_aging_seconds AS aging,
       EXISTS (SELECT 1 FROM sq_fair_keys AS f WHERE f.queue = q.name) AS fair
FROM sq_queues AS q WHERE q.name IN (SELECT value FROM json_each(:queues))

-- fragment: aged_rank
-- An item's rank (domain/aging.py) from g.priority, g.created_at and g.aging (NULL: no aging): its
-- priority less the whole periods from the epoch to its created_at, floored before the epoch too
-- (SQLite's % and / truncate toward zero). The whole seconds are those of the text cut before its
-- fraction: strftime rounds the fraction to milliseconds first (06.999999 would count as 7). The
-- push ranks in Python (domain.aging.rank_priority); this is the same rule over rows, for a re-rank
-- and a dead-letter move.
g.priority - COALESCE((CAST(strftime('%s', substr(g.created_at, 1, 19)) AS INTEGER)
                       - ((CAST(strftime('%s', substr(g.created_at, 1, 19)) AS INTEGER) % g.aging) + g.aging)
                         % g.aging) / g.aging, 0)

-- name: existing_ids
SELECT id, queue, created_at FROM sq_items WHERE id IN (SELECT value FROM json_each(:ids))

-- name: remembered_ids
-- Producers' ids of finished items whose window has not passed.
SELECT id, queue, created_at FROM sq_client_ids
WHERE id IN (SELECT value FROM json_each(:ids)) AND expires_at > :now

-- name: claim_dedup_keys
-- :claims is a JSON array of {"queue", "key", "id", "created_at"}. Returns the keys this call
-- took: new ones, and those whose window has passed. A window that runs from the send (the
-- queue's dedup_window_from) starts here; one that runs from the finish starts when the item
-- finishes (NULL until then; a queue this push creates has the default, 'finish'). Built-in date
-- functions only, no sq_add_seconds: pushes in a caller's own transaction (simplequeue.outbox) run
-- this on the caller's connection. The window is whole seconds, so :now's fraction is kept as it is.
INSERT INTO sq_dedup (queue, dedup_key, item_id, created_at, expires_at)
SELECT json_extract(c.value, '$.queue'), json_extract(c.value, '$.key'), json_extract(c.value, '$.id'),
       json_extract(c.value, '$.created_at'),
       CASE WHEN q.dedup_window_from = 'send'
            THEN strftime('%Y-%m-%dT%H:%M:%S', substr(:now, 1, 19), '+' || q.dedup_window_seconds || ' seconds')
                 || substr(:now, 20)
       END
FROM json_each(:claims) AS c
LEFT JOIN sq_queues AS q ON q.name = json_extract(c.value, '$.queue')
WHERE true
ON CONFLICT (queue, dedup_key) DO UPDATE
SET item_id = excluded.item_id, created_at = excluded.created_at, expires_at = excluded.expires_at
WHERE sq_dedup.expires_at IS NOT NULL AND sq_dedup.expires_at <= :now
RETURNING queue, dedup_key

-- name: dedup_winners
SELECT d.queue, d.dedup_key, d.item_id, d.created_at
FROM json_each(:claims) AS c
JOIN sq_dedup AS d ON d.queue = json_extract(c.value, '$.queue') AND d.dedup_key = json_extract(c.value, '$.key')

-- fragment: retained
-- The oldest created_at a pop hands out: :now less the queue's message_retention_seconds ('' for a
-- queue without one, before every time). An item past it is never handed out; the sweep deletes it.
-- Uncorrelated, so it is computed once per statement.
COALESCE((SELECT CASE WHEN r.message_retention_seconds IS NULL THEN ''
                      ELSE sq_add_seconds(:now, -r.message_retention_seconds) END
          FROM sq_queues AS r WHERE r.name = :queue), '')

-- fragment: poppable
-- The two walks of a pop, written once for pop and key_walk: ready items along sq_items_ready and
-- leases that ran out along sq_items_lapsed, each in pop order and at most :walk of them (pop
-- binds it to :max_items). Only a group's head qualifies.
SELECT * FROM (
    SELECT x.seq, x.rank_priority, x.fair_rank, x.created_at, x.fairness_key FROM sq_items AS x INDEXED BY sq_items_ready
    WHERE x.queue = :queue AND x.status = 'ready' AND x.visible_at <= :now
      AND x.created_at >= (
          -- include: retained
      )
      AND NOT EXISTS (SELECT 1 FROM sq_queues WHERE name = :queue AND paused)
      AND (x.group_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM sq_items AS e INDEXED BY sq_items_group
          WHERE e.queue = x.queue AND e.group_key = x.group_key AND e.seq < x.seq
            AND e.group_key IS NOT NULL AND e.status <> 'dead'))
    ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
    LIMIT :walk
)
UNION ALL
SELECT * FROM (
    SELECT x.seq, x.rank_priority, x.fair_rank, x.created_at, x.fairness_key FROM sq_items AS x INDEXED BY sq_items_lapsed
    WHERE x.queue = :queue AND x.status = 'leased' AND x.visible_at <= :now
      AND x.created_at >= (
          -- include: retained
      )
      AND NOT EXISTS (SELECT 1 FROM sq_queues WHERE name = :queue AND paused)
      AND x.attempts < (SELECT max_attempts FROM sq_queues WHERE name = :queue)
      AND (x.group_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM sq_items AS e INDEXED BY sq_items_group
          WHERE e.queue = x.queue AND e.group_key = x.group_key AND e.seq < x.seq
            AND e.group_key IS NOT NULL AND e.status <> 'dead'))
    ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
    LIMIT :walk
)

-- name: pop
-- Poppable: due, not an expired lease on its last attempt (the sweep makes that one dead), not
-- past its queue's retention (see retained), and for a grouped item, the head of its group: no
-- live item of the group was pushed before it.
-- Two walks, merged in pop order: ready items along sq_items_ready (which holds no lease, so the
-- walk never passes over the leases in flight), and leases that ran out along sq_items_lapsed (a
-- range of the queue's leases cut off at now: only those, sorted). Each takes at most :max_items;
-- the first :max_items of both in pop order are the ones one walk over every live item found.
UPDATE sq_items
SET status = 'leased',
    attempts = attempts + 1,
    lease_token = :lease_token,
    visible_at = sq_add_seconds(:now, COALESCE(:lease_seconds, (SELECT lease_seconds FROM sq_queues WHERE name = :queue))),
    first_popped_at = COALESCE(first_popped_at, :now)
WHERE seq IN (
    SELECT c.seq FROM (
        -- include: poppable
    ) AS c
    ORDER BY c.rank_priority DESC, c.fair_rank, c.created_at, c.seq
    LIMIT :max_items
)
RETURNING seq, id, queue, payload, created_at, attempts, lease_token, visible_at, priority, group_key, attributes,
          fairness_key, fair_rank, rank_priority

-- name: key_walk
-- The careful pop of a queue whose keys have limits (transactions.py: pop_by_keys), its first step:
-- the first :walk poppable items in pop order (the two walks of pop), each with its key ('' for
-- unkeyed items) and its place in the walk.
WITH walked AS (
    SELECT c.seq, COALESCE(c.fairness_key, '') AS k,
           row_number() OVER (ORDER BY c.rank_priority DESC, c.fair_rank, c.created_at, c.seq) AS place
    FROM (
        -- include: poppable
    ) AS c
)
SELECT w.k AS key, w.seq, w.place FROM walked AS w WHERE w.place <= :walk ORDER BY w.place

-- name: key_rooms
-- The keys a careful pop's walk found (:keys, a JSON array), each with its cap (its own max_leased,
-- else the queue's max_leased_per_key; NULL: none), its unexpired leases when it has a cap (a seek
-- of sq_items_key_leased; the unkeyed items', a range of sq_items_lapsed), and its rate (its own
-- rate_per_second, else the queue's rate_per_key_per_second; NULL: none) and bucket. Only the keys
-- the pop may take from are counted; under the writer's lock, the counts hold until it commits.
WITH keys AS (
    SELECT y.value AS k, COALESCE(f.max_leased, q.max_leased_per_key) AS cap,
           COALESCE(f.rate_per_second, q.rate_per_key_per_second) AS rate, f.rate_tokens, f.rate_at
    FROM json_each(:keys) AS y
    JOIN sq_queues AS q ON q.name = :queue
    LEFT JOIN sq_fair_keys AS f ON f.queue = :queue AND f.fairness_key = y.value
)
SELECT z.k AS key, z.cap, z.rate, z.rate_tokens, z.rate_at,
       CASE WHEN z.cap IS NULL THEN 0
            WHEN z.k = '' THEN (
                SELECT count(*) FROM sq_items AS i INDEXED BY sq_items_lapsed
                WHERE i.queue = :queue AND i.status = 'leased' AND i.visible_at > :now AND i.fairness_key IS NULL)
            ELSE (
                SELECT count(*) FROM sq_items AS i INDEXED BY sq_items_key_leased
                WHERE i.queue = :queue AND i.status = 'leased' AND i.fairness_key = z.k AND i.visible_at > :now)
       END AS leased
FROM keys AS z

-- name: lease_keyed
-- The items a careful pop picked from key_walk (:seqs, a JSON array), leased as pop leases them;
-- in the same write transaction as the walk, so they are as it found them.
UPDATE sq_items
SET status = 'leased',
    attempts = attempts + 1,
    lease_token = :lease_token,
    visible_at = sq_add_seconds(:now, COALESCE(:lease_seconds, (SELECT lease_seconds FROM sq_queues WHERE name = :queue))),
    first_popped_at = COALESCE(first_popped_at, :now)
WHERE seq IN (SELECT value FROM json_each(:seqs)) AND queue = :queue
RETURNING seq, id, queue, payload, created_at, attempts, lease_token, visible_at, priority, group_key, attributes,
          fairness_key, fair_rank, rank_priority

-- name: extend
UPDATE sq_items SET visible_at = sq_add_seconds(:now, :lease_seconds)
WHERE id = :id AND status = 'leased' AND lease_token = :lease_token AND visible_at > :now

-- name: match_one
-- The item a completion names, if its token matches (or none was given) and it is not dead: not
-- stored dead, and not a lease that expired on its last attempt (dead for every reader already,
-- whether or not the sweep has got to it).
SELECT i.seq, i.queue, i.dedup_key, i.remember_id FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
WHERE i.id = :id AND i.status <> 'dead' AND (:lease_token IS NULL OR i.lease_token = :lease_token)
  AND NOT (i.status = 'leased' AND i.visible_at <= :now AND i.attempts >= q.max_attempts)

-- name: match_many
-- :items is a JSON array of {"id", "token"}; a null token completes whatever the lease.
SELECT i.seq, i.id, i.queue, i.dedup_key, i.remember_id
FROM json_each(:items) AS r
JOIN sq_items AS i ON i.id = json_extract(r.value, '$.id')
JOIN sq_queues AS q ON q.name = i.queue
WHERE i.status <> 'dead'
  AND (json_extract(r.value, '$.token') IS NULL OR i.lease_token = json_extract(r.value, '$.token'))
  AND NOT (i.status = 'leased' AND i.visible_at <= :now AND i.attempts >= q.max_attempts)

-- name: item_states
-- What each item is at :now: a lease that expired on its last attempt is dead already.
SELECT i.id,
       CASE WHEN i.status = 'leased' AND i.visible_at <= :now AND i.attempts >= q.max_attempts
            THEN 'dead' ELSE i.status END AS status
FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
WHERE i.id IN (SELECT value FROM json_each(:ids))

-- name: write_history
-- Called with the rows' final state: before they are deleted (completed) or once dead. A queue whose
-- retention_seconds is 0 keeps no history: its items get no record.
INSERT INTO sq_history (id, queue, outcome, attempts, created_at, first_popped_at, finished_at,
                        group_key, dedup_key, last_error, payload)
SELECT i.id, i.queue, :outcome, i.attempts, i.created_at, i.first_popped_at, :now,
       i.group_key, i.dedup_key, json_extract(i.errors, '$[#-1].error'),
       CASE WHEN q.history_payload THEN i.payload END
FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
WHERE i.seq IN (SELECT value FROM json_each(:seqs)) AND q.retention_seconds > 0

-- name: start_dedup_windows
-- Items leaving the table: their dedup keys keep matching for the queue's window. Completions run
-- it only when an item completed has a dedup_key (the common item has none: no statement at all).
UPDATE sq_dedup
SET expires_at = sq_add_seconds(:now, q.dedup_window_seconds)
FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
WHERE i.seq IN (SELECT value FROM json_each(:seqs))
  AND sq_dedup.queue = i.queue AND sq_dedup.dedup_key = i.dedup_key AND sq_dedup.item_id = i.id
  AND sq_dedup.expires_at IS NULL

-- name: remember_ids
-- Items leaving the table whose ids producers gave: their ids stay taken for the queue's window
-- (replacing the memory of an earlier item with the id, whose window had passed). Run only when
-- such an item is among them.
INSERT INTO sq_client_ids (id, queue, created_at, expires_at)
SELECT i.id, i.queue, i.created_at, sq_add_seconds(:now, q.dedup_window_seconds)
FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
WHERE i.seq IN (SELECT value FROM json_each(:seqs)) AND i.remember_id
ON CONFLICT (id) DO UPDATE SET queue = excluded.queue, created_at = excluded.created_at, expires_at = excluded.expires_at

-- name: delete_items
DELETE FROM sq_items WHERE seq IN (SELECT value FROM json_each(:seqs))

-- name: fail
-- Refused, like a completion, for an item that is dead, or whose lease expired on its last attempt.
-- Dead when the worker says so or this was the last attempt; otherwise ready after the given
-- delay or the queue's backoff: min(cap, base * factor^(attempts-1)), less up to jitter of it.
WITH f AS (
    SELECT i.seq,
           (NOT :retry OR i.attempts >= q.max_attempts) AS dies,
           COALESCE(:retry_after,
                    min(q.backoff_cap_seconds,
                        q.backoff_base_seconds * pow(q.backoff_factor, min(max(i.attempts, 1) - 1, 60)))
                    * (1 - q.backoff_jitter * :draw)) AS delay
    FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
    WHERE i.id = :id AND i.status <> 'dead' AND (:lease_token IS NULL OR i.lease_token = :lease_token)
      AND NOT (i.status = 'leased' AND i.visible_at <= :now AND i.attempts >= q.max_attempts)
)
UPDATE sq_items
SET status = CASE WHEN (SELECT dies FROM f) THEN 'dead' ELSE 'ready' END,
    visible_at = CASE WHEN (SELECT dies FROM f) THEN visible_at ELSE sq_add_seconds(:now, (SELECT delay FROM f)) END,
    died_at = CASE WHEN (SELECT dies FROM f) THEN :now END,
    lease_token = NULL,
    errors = json_insert(errors, '$[#]', json_object('at', :now, 'error', :error))
WHERE seq = (SELECT seq FROM f)
RETURNING seq, status

-- name: expired_last_attempts
SELECT i.seq, i.queue FROM sq_items AS i INDEXED BY sq_items_leased
JOIN sq_queues AS q ON q.name = i.queue
WHERE i.status = 'leased' AND i.visible_at <= :now AND i.attempts >= q.max_attempts
LIMIT :limit

-- name: expired_last_attempts_of_queue
-- expired_last_attempts of one queue, which a pop reaps: a range of sq_items_lapsed (the queue's
-- leases cut off at now), as the pop's own walk of the leases that ran out reads.
SELECT i.seq, i.queue FROM sq_items AS i INDEXED BY sq_items_lapsed
JOIN sq_queues AS q ON q.name = i.queue
WHERE i.queue = :queue AND i.status = 'leased' AND i.visible_at <= :now AND i.attempts >= q.max_attempts
LIMIT :limit

-- name: kill
UPDATE sq_items
SET status = 'dead', died_at = :now, lease_token = NULL,
    errors = json_insert(errors, '$[#]', json_object('at', :now, 'error', :error))
WHERE seq IN (SELECT value FROM json_each(:seqs))

-- fragment: dead_letter_target
-- The dead items among :seqs whose queue has a dead-letter target (its dead_letter_queue setting)
-- that exists and is another queue: t.name.
FROM sq_items AS i
JOIN sq_queues AS s ON s.name = i.queue
JOIN sq_queues AS t ON t.name = s.dead_letter_queue AND t.name <> i.queue

-- name: dead_letter_windows
-- Items about to move to their queue's dead-letter target (after their deaths' history records,
-- before dead_letter_moves): their dedup keys' claims stay in the source, whose windows start as a
-- purge's do.
UPDATE sq_dedup
SET expires_at = sq_add_seconds(:now, q.dedup_window_seconds)
-- include: dead_letter_target
JOIN sq_queues AS q ON q.name = i.queue
WHERE i.seq IN (SELECT value FROM json_each(:seqs)) AND i.status = 'dead'
  AND sq_dedup.queue = i.queue AND sq_dedup.dedup_key = i.dedup_key AND sq_dedup.item_id = i.id
  AND sq_dedup.expires_at IS NULL

-- name: dead_letter_ids
-- ... and their remembered ids' claims follow them.
UPDATE sq_client_ids
SET queue = t.name
-- include: dead_letter_target
WHERE i.seq IN (SELECT value FROM json_each(:seqs)) AND i.status = 'dead' AND i.remember_id
  AND sq_client_ids.id = i.id

-- name: dead_letter_moves
-- Dead items of a queue with a dead-letter target move there in the transaction that killed them:
-- ready now, attempts reset, keeping id, payload, attributes, created_at, group, fairness key and
-- errors. New seqs, above every other, in their old order: a moved item joins its group at the back.
-- Its fair rank was its source's: there it ranks 0, first among the target's keys' turns. Its rank
-- is the target's aging's.
UPDATE sq_items
SET seq = m.top + x.n, queue = x.target, status = 'ready', attempts = 0, first_popped_at = NULL,
    visible_at = :now, died_at = NULL, lease_token = NULL, fair_rank = 0,
    rank_priority = (
        SELECT
            -- include: aged_rank
        FROM (SELECT x.priority, x.created_at, x.aging) AS g
    )
FROM (
    SELECT i.seq AS old, t.name AS target, i.priority, i.created_at, t.priority_aging_seconds AS aging,
           row_number() OVER (ORDER BY i.seq) AS n
    -- include: dead_letter_target
    WHERE i.seq IN (SELECT value FROM json_each(:seqs)) AND i.status = 'dead'
) AS x, (SELECT max(seq) AS top FROM sq_items) AS m
WHERE sq_items.seq = x.old

-- name: get_item
SELECT i.id, i.queue, i.payload, i.attributes, i.status, i.attempts, i.errors, i.created_at, i.visible_at, i.lease_token,
       i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at, i.died_at, q.max_attempts
FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
WHERE i.id = :id

-- name: sequence_numbers
-- The insertion order of the live or dead items among :ids (an SQS FIFO send answers it).
SELECT i.id, i.seq FROM sq_items AS i WHERE i.id IN (SELECT value FROM json_each(:ids))

-- name: list_dead
SELECT i.seq, i.id, i.queue, i.payload, i.attributes, i.status, i.attempts, i.errors, i.created_at, i.visible_at, i.lease_token,
       i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at, i.died_at, q.max_attempts, :now AS now
FROM sq_items AS i INDEXED BY sq_items_dead JOIN sq_queues AS q ON q.name = i.queue
WHERE i.queue = :queue AND i.status = 'dead'
  AND (:since IS NULL OR i.died_at >= :since)
  AND (:until IS NULL OR i.died_at < :until)
  AND (:after_at IS NULL OR (i.died_at, i.seq) < (:after_at, :after_seq))
ORDER BY i.died_at DESC, i.seq DESC
LIMIT :limit

-- name: dead_to_redrive
-- Oldest dead first, so that a rate-limited redrive replays them in the order they died.
SELECT i.seq FROM sq_items AS i INDEXED BY sq_items_dead
WHERE i.queue = :queue AND i.status = 'dead'
  AND (:ids IS NULL OR i.id IN (SELECT value FROM json_each(:ids)))
ORDER BY i.died_at, i.seq
LIMIT :limit

-- name: live_to_purge
-- A batch of the queue's live items (ready, delayed, retrying, leased) for purge_live. A lease that
-- ran out on its last attempt is dead already (the sweep records it): it stays, as dead items do.
SELECT i.seq FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
WHERE i.queue = :queue AND i.status IN ('ready', 'leased')
  AND NOT (i.status = 'leased' AND i.visible_at <= :now AND i.attempts >= q.max_attempts)
ORDER BY i.seq
LIMIT :limit

-- name: live_to_expire
-- A batch of live items older than their queue's message_retention_seconds (from their push), in no
-- order (all of them go), for expire_retained; they go as purge_live's do. A lease that ran out on
-- its last attempt is dead already (the sweep records it): it stays.
SELECT i.seq
FROM sq_queues AS q INDEXED BY sq_queues_retained
JOIN sq_items AS i INDEXED BY sq_items_visible ON i.queue = q.name
WHERE q.message_retention_seconds IS NOT NULL AND i.status IN ('ready', 'leased')
  AND i.created_at < sq_add_seconds(:now, -q.message_retention_seconds)
  AND NOT (i.status = 'leased' AND i.visible_at <= :now AND i.attempts >= q.max_attempts)
LIMIT :limit

-- name: revive
-- A new seq: a redriven item rejoins its ordered group at the back.
UPDATE sq_items
SET seq = (SELECT max(seq) FROM sq_items) + 1, status = 'ready', attempts = 0, died_at = NULL,
    visible_at = :visible_at
WHERE seq = :seq

-- name: list_history
SELECT seq, id, queue, outcome, attempts, created_at, first_popped_at, finished_at, group_key, dedup_key,
       last_error, payload
FROM sq_history
WHERE queue = :queue
  AND (:outcome IS NULL OR outcome = :outcome)
  AND (:since IS NULL OR finished_at >= :since)
  AND (:until IS NULL OR finished_at < :until)
  AND (:after_at IS NULL OR (finished_at, seq) < (:after_at, :after_seq))
ORDER BY finished_at DESC, seq DESC
LIMIT :limit

-- name: purge_history
-- Per queue, its oldest records past its retention: a range at the front of sq_history_queue.
DELETE FROM sq_history WHERE seq IN (
    SELECT h.seq FROM sq_queues AS q
    JOIN sq_history AS h INDEXED BY sq_history_queue ON h.queue = q.name
    WHERE h.finished_at < sq_add_seconds(:now, -q.retention_seconds)
    LIMIT :limit
)

-- name: purge_dedup_keys
DELETE FROM sq_dedup WHERE (queue, dedup_key) IN (
    SELECT queue, dedup_key FROM sq_dedup INDEXED BY sq_dedup_expires
    WHERE expires_at IS NOT NULL AND expires_at <= :now
    LIMIT :limit
)

-- name: purge_client_ids
DELETE FROM sq_client_ids WHERE id IN (
    SELECT id FROM sq_client_ids INDEXED BY sq_client_ids_expires WHERE expires_at <= :now
    LIMIT :limit
)

-- name: next_visible_at
SELECT q.value AS queue,
       (SELECT MIN(i.visible_at) FROM sq_items AS i
        WHERE i.queue = q.value AND i.status IN ('ready', 'leased')) AS next
FROM json_each(:queues) AS q

-- name: queue_exists
SELECT 1 FROM sq_queues WHERE name = :queue

-- name: queue_metadata
-- The queue's times, attributes and tags, each list a JSON array of {"n": name, "v": value}.
SELECT q.created_at, q.modified_at,
       (SELECT json_group_array(json_object('n', a.name, 'v', a.value)) FROM sq_queue_attributes AS a
        WHERE a.queue = q.name) AS attributes,
       (SELECT json_group_array(json_object('n', t.key, 'v', t.value)) FROM sq_queue_tags AS t
        WHERE t.queue = q.name) AS tags
FROM sq_queues AS q WHERE q.name = :queue

-- name: queue_tag_keys
SELECT key FROM sq_queue_tags WHERE queue = :queue

-- name: set_queue_attribute
INSERT INTO sq_queue_attributes (queue, name, value) VALUES (:queue, :name, :value)
ON CONFLICT (queue, name) DO UPDATE SET value = excluded.value

-- name: unset_queue_attribute
DELETE FROM sq_queue_attributes WHERE queue = :queue AND name = :name

-- name: set_queue_tag
INSERT INTO sq_queue_tags (queue, key, value) VALUES (:queue, :name, :value)
ON CONFLICT (queue, key) DO UPDATE SET value = excluded.value

-- name: unset_queue_tag
DELETE FROM sq_queue_tags WHERE queue = :queue AND key = :name

-- name: touch_queue
UPDATE sq_queues SET modified_at = :now WHERE name = :queue

-- name: put_queue
INSERT INTO sq_queues (name, created_at, max_attempts, lease_seconds, backoff_base_seconds, backoff_factor,
                       backoff_cap_seconds, backoff_jitter, retention_seconds, dedup_window_seconds, dedup_window_from,
                       history_payload, dead_letter_queue, message_retention_seconds, max_leased,
                       rate_per_second, rate_burst, max_leased_per_key, rate_per_key_per_second, priority_aging_seconds, limited)
VALUES (:queue, :now, :max_attempts, :lease_seconds, :backoff_base_seconds, :backoff_factor,
        :backoff_cap_seconds, :backoff_jitter, :retention_seconds, :dedup_window_seconds, :dedup_window_from,
        :history_payload, :dead_letter_queue, :message_retention_seconds, :max_leased, :rate_per_second, :rate_burst, :max_leased_per_key,
        :rate_per_key_per_second, :priority_aging_seconds,
        -- A key's own limits keep the queue limited whatever its own settings.
        :limited OR EXISTS (SELECT 1 FROM sq_fair_keys AS k WHERE k.queue = :queue AND (k.max_leased IS NOT NULL OR k.rate_per_second IS NOT NULL)))
ON CONFLICT (name) DO UPDATE
SET max_attempts = excluded.max_attempts, lease_seconds = excluded.lease_seconds,
    backoff_base_seconds = excluded.backoff_base_seconds, backoff_factor = excluded.backoff_factor,
    backoff_cap_seconds = excluded.backoff_cap_seconds, backoff_jitter = excluded.backoff_jitter,
    retention_seconds = excluded.retention_seconds, dedup_window_seconds = excluded.dedup_window_seconds,
    dedup_window_from = excluded.dedup_window_from, history_payload = excluded.history_payload,
    dead_letter_queue = excluded.dead_letter_queue, message_retention_seconds = excluded.message_retention_seconds,
    max_leased = excluded.max_leased, rate_per_second = excluded.rate_per_second, rate_burst = excluded.rate_burst,
    max_leased_per_key = excluded.max_leased_per_key, rate_per_key_per_second = excluded.rate_per_key_per_second,
    priority_aging_seconds = excluded.priority_aging_seconds,
    limited = excluded.limited, modified_at = excluded.created_at

-- name: rerank_queue
-- Run before put_queue in its transaction: a change of priority_aging_seconds re-ranks every item
-- the queue holds, so that items ranked with and without aging, or with two periods, never meet
-- in one pop order; its cost grows with the queue's items. Under the writer's lock no push reads
-- the old setting meanwhile.
UPDATE sq_items
SET rank_priority = (
    SELECT
        -- include: aged_rank
    FROM (SELECT sq_items.priority AS priority, sq_items.created_at AS created_at,
                 :priority_aging_seconds AS aging) AS g
)
WHERE queue = :queue
  AND EXISTS (SELECT 1 FROM sq_queues AS q WHERE q.name = :queue
              AND q.priority_aging_seconds IS NOT :priority_aging_seconds)

-- name: set_paused
UPDATE sq_queues SET paused = :paused WHERE name = :queue

-- name: peek
-- Live items in one state at :now (as queue_stats counts them), oldest created first.
SELECT i.seq, i.id, i.queue, i.payload, i.attributes, i.status, i.attempts, i.errors, i.created_at, i.visible_at, i.lease_token,
       i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at, i.died_at, q.max_attempts, :now AS now
FROM sq_items AS i INDEXED BY sq_items_visible JOIN sq_queues AS q ON q.name = i.queue
WHERE i.queue = :queue AND i.status IN ('ready', 'leased')
  AND CASE :state
        WHEN 'ready' THEN i.visible_at <= :now AND (i.status = 'ready' OR i.attempts < q.max_attempts)
        WHEN 'leased' THEN i.status = 'leased' AND i.visible_at > :now
        WHEN 'delayed' THEN i.status = 'ready' AND i.visible_at > :now AND i.attempts = 0
        WHEN 'retrying' THEN i.status = 'ready' AND i.visible_at > :now AND i.attempts > 0
      END
  AND (:after_at IS NULL OR (i.created_at, i.seq) > (:after_at, :after_seq))
ORDER BY i.created_at, i.seq
LIMIT :limit


-- name: group_items
-- A group's live items in group order (seq, the order its items are handed out), after the cursor's
-- seq: a range of sq_items_group, which holds no dead item.
SELECT i.seq, i.id, i.queue, i.payload, i.attributes, i.status, i.attempts, i.errors, i.created_at, i.visible_at, i.lease_token,
       i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at, i.died_at, q.max_attempts, :now AS now
FROM sq_items AS i INDEXED BY sq_items_group JOIN sq_queues AS q ON q.name = i.queue
WHERE i.queue = :queue AND i.group_key = :group AND i.status <> 'dead' AND i.seq > COALESCE(:after_seq, 0)
ORDER BY i.seq
LIMIT :limit

-- name: dedup_item
-- The item (live or dead) that holds a dedup key of the queue: sq_dedup's key, then the item by id.
-- None once the item finished, though its key may still be held for the queue's dedup window.
SELECT i.id, i.queue, i.payload, i.attributes, i.status, i.attempts, i.errors, i.created_at, i.visible_at, i.lease_token,
       i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at, i.died_at, q.max_attempts
FROM sq_dedup AS d
JOIN sq_items AS i ON i.id = d.item_id AND i.queue = d.queue
JOIN sq_queues AS q ON q.name = i.queue
WHERE d.queue = :queue AND d.dedup_key = :dedup_key

-- name: live_leases
-- The queue's leases still running: a range of sq_items_lapsed.
SELECT COUNT(*) AS leased FROM sq_items AS i INDEXED BY sq_items_lapsed
WHERE i.queue = :queue AND i.status = 'leased' AND i.visible_at > :now

-- name: delete_queue_items
DELETE FROM sq_items WHERE queue = :queue

-- name: delete_queue_history
DELETE FROM sq_history WHERE queue = :queue

-- name: delete_queue_dedup
DELETE FROM sq_dedup WHERE queue = :queue

-- name: delete_queue_attributes
DELETE FROM sq_queue_attributes WHERE queue = :queue

-- name: delete_queue_tags
DELETE FROM sq_queue_tags WHERE queue = :queue

-- name: delete_queue_fair_keys
DELETE FROM sq_fair_keys WHERE queue = :queue

-- name: delete_queue
DELETE FROM sq_queues WHERE name = :queue

-- fragment: queue_counts
-- Per queue: the live counts read sq_items_visible's rows, the dead count sq_items_dead, history
-- counts sq_history_outcome; none walks the others, so a million dead or finished items do not
-- slow the live figures down. An expired lease on its last attempt counts as dead already.
SELECT q.name, q.max_attempts, q.lease_seconds, q.backoff_base_seconds, q.backoff_factor,
       q.backoff_cap_seconds, q.backoff_jitter, q.retention_seconds, q.dedup_window_seconds,
       q.dedup_window_from, q.history_payload, q.dead_letter_queue, q.message_retention_seconds, q.max_leased, q.rate_per_second, q.rate_burst, q.max_leased_per_key, q.rate_per_key_per_second, q.priority_aging_seconds, q.limited, q.paused,
       (SELECT COUNT(*) FROM sq_items AS i INDEXED BY sq_items_visible
        WHERE i.queue = q.name AND i.status IN ('ready', 'leased') AND i.visible_at <= :now
          AND (i.status = 'ready' OR i.attempts < q.max_attempts)) AS ready,
       (SELECT COUNT(*) FROM sq_items AS i INDEXED BY sq_items_visible
        WHERE i.queue = q.name AND i.status IN ('ready', 'leased')
          AND i.status = 'leased' AND i.visible_at > :now) AS leased,
       (SELECT COUNT(*) FROM sq_items AS i INDEXED BY sq_items_visible
        WHERE i.queue = q.name AND i.status IN ('ready', 'leased')
          AND i.status = 'ready' AND i.visible_at > :now AND i.attempts = 0) AS delayed,
       (SELECT COUNT(*) FROM sq_items AS i INDEXED BY sq_items_visible
        WHERE i.queue = q.name AND i.status IN ('ready', 'leased')
          AND i.status = 'ready' AND i.visible_at > :now AND i.attempts > 0) AS retrying,
       (SELECT COUNT(*) FROM sq_items AS d INDEXED BY sq_items_dead
        WHERE d.queue = q.name AND d.status = 'dead')
       + (SELECT COUNT(*) FROM sq_items AS i INDEXED BY sq_items_visible
          WHERE i.queue = q.name AND i.status IN ('ready', 'leased')
            AND i.status = 'leased' AND i.visible_at <= :now AND i.attempts >= q.max_attempts) AS dead,
       (SELECT MIN(i.created_at) FROM sq_items AS i INDEXED BY sq_items_visible
        WHERE i.queue = q.name AND i.status IN ('ready', 'leased') AND i.visible_at <= :now
          AND (i.status = 'ready' OR i.attempts < q.max_attempts)) AS oldest_ready,
       (SELECT COUNT(*) FROM sq_history AS h INDEXED BY sq_history_outcome
        WHERE h.queue = q.name AND h.outcome = 'completed') AS completed_in_history,
       (SELECT COUNT(*) FROM sq_history AS h INDEXED BY sq_history_outcome
        WHERE h.queue = q.name AND h.outcome = 'dead') AS dead_in_history,
       :now AS now
FROM sq_queues AS q

-- name: queue_stats
-- include: queue_counts
WHERE q.name = :queue

-- name: queue_page
-- A page of queues in name order after :after (NULL: from the first), of those whose names start
-- with :prefix (NULL: every queue): a range of the primary key from the later of the two (names
-- compare as bytes: every name that starts with the prefix sorts at or after it), stopped after
-- :limit rows, so a page costs its own queues' counts whatever the table holds.
-- include: queue_counts
WHERE q.name >= max(COALESCE(:after, ''), COALESCE(:prefix, '')) AND q.name IS NOT :after
  AND (:prefix IS NULL OR substr(q.name, 1, length(:prefix)) = :prefix)
ORDER BY q.name
LIMIT :limit

-- name: count_queues
SELECT COUNT(*) AS queues FROM sq_queues

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

-- name: write_setting
-- A limit of the service's, for the pushes that do not go through it (sq_settings).
UPDATE sq_settings SET value = :value WHERE name = :name

-- name: activity
-- Counts per bucket of the window [:since, :until), for one queue or (:queue NULL) every queue; only
-- the buckets that have any. Each part reads a range of an index from :since on, for each queue:
--   completed, dead  sq_history_queue, by finished_at;
--   pushed           the history records' created_at, within the same range (an item created since
--                    :since finished since then), and live items' created_at from sq_items_visible
--                    (a live item's visible_at is never before it was pushed);
--   failed           each recorded error's time, of live items (sq_items_visible: visible_at moves
--                    forward with each pop and failure) and of dead items not purged (sq_items_dead:
--                    died_at is after every failure). The failures of items that completed since
--                    are not counted: history keeps their attempts and last error, not when.
-- Buckets are counted in whole seconds of the fixed-width text (its first 19 characters):
-- strftime('%s') would round a time 0.9995 s past a second up into the next one.
WITH events(at, kind) AS (
    SELECT h.finished_at, CASE WHEN h.outcome = 'completed' THEN 'c' ELSE 'd' END
    FROM sq_history AS h INDEXED BY sq_history_queue
    WHERE h.queue IN (SELECT name FROM sq_queues WHERE :queue IS NULL OR name = :queue)
      AND h.finished_at >= :since AND h.finished_at < :until
    UNION ALL
    SELECT h.created_at, 'p'
    FROM sq_history AS h INDEXED BY sq_history_queue
    WHERE h.queue IN (SELECT name FROM sq_queues WHERE :queue IS NULL OR name = :queue)
      AND h.finished_at >= :since AND h.created_at >= :since
    UNION ALL
    SELECT i.created_at, 'p'
    FROM sq_items AS i INDEXED BY sq_items_visible
    WHERE i.queue IN (SELECT name FROM sq_queues WHERE :queue IS NULL OR name = :queue)
      AND i.status IN ('ready', 'leased') AND i.visible_at >= :since AND i.created_at >= :since
    UNION ALL
    SELECT json_extract(e.value, '$.at'), 'f'
    FROM sq_items AS i INDEXED BY sq_items_visible, json_each(i.errors) AS e
    WHERE i.queue IN (SELECT name FROM sq_queues WHERE :queue IS NULL OR name = :queue)
      AND i.status IN ('ready', 'leased') AND i.visible_at >= :since AND i.attempts > 0
    UNION ALL
    SELECT json_extract(e.value, '$.at'), 'f'
    FROM sq_items AS i INDEXED BY sq_items_dead, json_each(i.errors) AS e
    WHERE i.queue IN (SELECT name FROM sq_queues WHERE :queue IS NULL OR name = :queue)
      AND i.status = 'dead' AND i.died_at >= :since
)
SELECT (CAST(strftime('%s', substr(at, 1, 19)) AS INTEGER) - CAST(strftime('%s', substr(:since, 1, 19)) AS INTEGER))
           / :bucket AS bucket,
       sum(kind = 'p') AS pushed, sum(kind = 'c') AS completed, sum(kind = 'f') AS failed,
       sum(kind = 'd') AS dead
FROM events
WHERE at >= :since AND at < :until
GROUP BY 1
ORDER BY 1
LIMIT :limit

-- name: lease_runs
-- pop(group_runs=True)'s second step, in the pop's transaction: the runs behind the group heads
-- it just leased (:heads, a JSON array of their seqs). A run is the group's next live items in seq
-- order while each is due: ready, or leased with its lease run out before its last attempt (as SQS
-- hands a whole run out again when its visibility runs out); a delayed, retrying or held one ends
-- it, and so does a lapsed last attempt, dead already, or one past the queue's retention. At most
-- :room items in all, leased with the
-- pop's token. Nobody else takes them: no item behind a live head is poppable.
WITH runs AS (
    SELECT r.seq FROM (
        SELECT y.seq,
               min((y.status = 'ready' OR (y.status = 'leased' AND y.attempts < q.max_attempts))
                   AND y.visible_at <= :now AND y.created_at >= (
                       -- include: retained
                   ))
                   OVER (PARTITION BY y.group_key ORDER BY y.seq) AS unbroken,
               row_number() OVER (PARTITION BY y.group_key ORDER BY y.seq) AS n
        FROM sq_items AS h
        JOIN sq_queues AS q ON q.name = h.queue
        JOIN sq_items AS y INDEXED BY sq_items_group
          ON y.queue = h.queue AND y.group_key = h.group_key AND y.seq > h.seq AND y.status <> 'dead'
        WHERE h.seq IN (SELECT value FROM json_each(:heads)) AND h.group_key IS NOT NULL
    ) AS r
    WHERE r.unbroken AND r.n <= :room
    ORDER BY r.seq
    LIMIT :room
)
UPDATE sq_items
SET status = 'leased',
    attempts = attempts + 1,
    lease_token = :lease_token,
    visible_at = sq_add_seconds(:now, COALESCE(:lease_seconds, (SELECT lease_seconds FROM sq_queues WHERE name = :queue))),
    first_popped_at = COALESCE(first_popped_at, :now)
WHERE seq IN (SELECT seq FROM runs) AND status IN ('ready', 'leased')
RETURNING seq, id, queue, payload, created_at, attempts, lease_token, visible_at, priority, group_key, attributes,
          fairness_key, fair_rank, rank_priority

-- Topics and subscriptions (store/topics.py holds the flow; attributes and tags are JSON text).

-- name: topic_create
INSERT INTO sq_topics (name, created_at, attributes, tags) VALUES (:name, :now, :attributes, :tags)
ON CONFLICT (name) DO NOTHING
RETURNING name

-- name: topic_get
SELECT t.name, t.created_at, t.modified_at, t.attributes, t.tags,
       (SELECT count(*) FROM sq_subscriptions AS s WHERE s.topic = t.name) AS subscriptions
FROM sq_topics AS t WHERE t.name = :name

-- name: topic_page
SELECT t.name, t.created_at, t.modified_at, t.attributes, t.tags,
       (SELECT count(*) FROM sq_subscriptions AS s WHERE s.topic = t.name) AS subscriptions
FROM sq_topics AS t WHERE :after IS NULL OR t.name > :after
ORDER BY t.name LIMIT :limit

-- name: topic_update
UPDATE sq_topics SET attributes = :attributes, tags = :tags, modified_at = :now
WHERE name = :name AND attributes = :old_attributes AND tags = :old_tags
RETURNING name, created_at, modified_at, attributes, tags,
          (SELECT count(*) FROM sq_subscriptions AS s WHERE s.topic = sq_topics.name) AS subscriptions

-- name: topic_delete_subscriptions
DELETE FROM sq_subscriptions WHERE topic = :name

-- name: topic_delete
DELETE FROM sq_topics WHERE name = :name RETURNING name

-- name: subscription_create
-- Only to a topic that exists, and once per endpoint of a topic.
INSERT INTO sq_subscriptions (id, topic, protocol, endpoint, attributes, confirmed, token, created_at)
SELECT :id, t.name, :protocol, :endpoint, :attributes, :confirmed, :token, :now
FROM sq_topics AS t WHERE t.name = :topic
ON CONFLICT DO NOTHING
RETURNING id

-- name: subscription_find
SELECT s.*, EXISTS (SELECT 1 FROM sq_queues AS q WHERE s.protocol = 'sqs' AND q.name = s.endpoint) AS queue_exists
FROM sq_subscriptions AS s WHERE s.topic = :topic AND s.protocol = :protocol AND s.endpoint = :endpoint

-- name: subscription_get
SELECT s.*, EXISTS (SELECT 1 FROM sq_queues AS q WHERE s.protocol = 'sqs' AND q.name = s.endpoint) AS queue_exists
FROM sq_subscriptions AS s WHERE s.id = :id

-- name: subscription_page
SELECT s.*, EXISTS (SELECT 1 FROM sq_queues AS q WHERE s.protocol = 'sqs' AND q.name = s.endpoint) AS queue_exists
FROM sq_subscriptions AS s
WHERE (:topic IS NULL OR s.topic = :topic) AND (:after IS NULL OR s.id > :after)
ORDER BY s.id LIMIT :limit

-- name: subscription_update
UPDATE sq_subscriptions SET attributes = :attributes, confirmed = :confirmed, token = :token
WHERE id = :id AND attributes = :old_attributes
RETURNING *, EXISTS (SELECT 1 FROM sq_queues AS q WHERE sq_subscriptions.protocol = 'sqs'
                     AND q.name = sq_subscriptions.endpoint) AS queue_exists

-- name: subscription_delete
DELETE FROM sq_subscriptions WHERE id = :id RETURNING id

-- name: topic_fanout
-- A publish's one read: the topic (NULL subscription columns when it has none) and each of its
-- subscriptions, with whether a queue subscription's queue exists.
SELECT t.created_at AS topic_created_at, t.modified_at AS topic_modified_at,
       t.attributes AS topic_attributes, t.tags AS topic_tags,
       s.id, s.topic, s.protocol, s.endpoint, s.attributes, s.confirmed, s.token, s.created_at,
       EXISTS (SELECT 1 FROM sq_queues AS q WHERE s.protocol = 'sqs' AND q.name = s.endpoint) AS queue_exists
FROM sq_topics AS t LEFT JOIN sq_subscriptions AS s ON s.topic = t.name
WHERE t.name = :topic
ORDER BY s.id

-- name: signing_key_insert
INSERT INTO sq_signing_keys (name, private_pem, certificate_pem, created_at)
VALUES (:name, :private_pem, :certificate_pem, :now)
ON CONFLICT (name) DO NOTHING

-- name: signing_key_get
SELECT private_pem, certificate_pem FROM sq_signing_keys WHERE name = :name

-- Flow limits (domain/limits.py): a pop of a queue whose row says `limited` counts its leases and
-- takes its bucket's tokens in its own transaction (transactions.pop), which no other writer
-- interleaves with.

-- name: queue_limits
-- keys_limited: whether some key of the queue has limits of its own (then its pops count its keys),
-- looked up only when nothing else says so (queue-wide limits, no per-key default): a queue limited
-- per key pops by its keys anyway, and reading all its keys' rows would cost every pop.
SELECT limited, max_leased, rate_per_second, rate_burst, max_leased_per_key, rate_per_key_per_second, rate_tokens,
       rate_at,
       CASE WHEN (max_leased IS NOT NULL OR rate_per_second IS NOT NULL)
                 AND max_leased_per_key IS NULL AND rate_per_key_per_second IS NULL
            THEN EXISTS (SELECT 1 FROM sq_fair_keys AS k
                         WHERE k.queue = :queue AND (k.max_leased IS NOT NULL OR k.rate_per_second IS NOT NULL))
            ELSE 0 END AS keys_limited
FROM sq_queues
WHERE name = :queue

-- name: count_leased
-- Unexpired leases, counted no further than the limit: a range of sq_items_lapsed from now on.
SELECT count(*) AS leased FROM (
    SELECT 1 FROM sq_items INDEXED BY sq_items_lapsed
    WHERE queue = :queue AND status = 'leased' AND visible_at > :now
    LIMIT :cap
)

-- name: take_tokens
-- The bucket after a pop: its tokens as counted at :at, less the items the pop took.
UPDATE sq_queues SET rate_tokens = :tokens, rate_at = :at WHERE name = :queue

-- name: take_key_tokens
-- The keys' buckets after a pop: :buckets, a JSON array of {"key", "tokens", "at"} (each key's
-- tokens as counted at its at, less the items the pop took of it). A key with no row yet (the
-- unkeyed items' of a queue that never saw a key) gets one.
INSERT INTO sq_fair_keys (queue, fairness_key, last_rank, rate_tokens, rate_at)
SELECT :queue, json_extract(b.value, '$.key'), 0, json_extract(b.value, '$.tokens'), json_extract(b.value, '$.at')
FROM json_each(:buckets) AS b WHERE true
ON CONFLICT (queue, fairness_key) DO UPDATE SET rate_tokens = excluded.rate_tokens, rate_at = excluded.rate_at

-- fragment: schedule_columns
-- Schedules (store/schedules.py holds the flow, written once for every dialect). previous_live:
-- whether the item the last firing pushed is still live, read for overlap 'skip' only.
s.name, s.queue, s.payload, s.every_seconds, s.cron, s.timezone, s.at, s.priority, s.group_key,
s.paused, s.jitter_seconds, s.overlap, s.catch_up, s.created_at, s.modified_at, s.next_run_at,
s.last_run_at, s.last_item_id, s.description, s.aws,
CASE WHEN s.overlap = 'skip' AND s.last_item_id IS NOT NULL
     THEN EXISTS (SELECT 1 FROM sq_items AS i WHERE i.id = s.last_item_id AND i.status <> 'dead')
     ELSE 0 END AS previous_live

-- name: schedule_put
-- :must says what the name must be: 'new' (CreateSchedule: an existing one is left as it is),
-- 'existing' (UpdateSchedule: none is made), 'any' (the REST API's PUT). Returns the name when
-- it made or replaced the schedule, so that a caller tells a refusal from a change by this one
-- statement, not by a read before it.
INSERT INTO sq_schedules (name, queue, payload, every_seconds, cron, timezone, at, priority, group_key,
                          paused, jitter_seconds, overlap, catch_up, created_at, next_run_at,
                          description, aws)
SELECT :name, :queue, :payload, :every_seconds, :cron, :timezone, :at, :priority, :group_key,
       :paused, :jitter_seconds, :overlap, :catch_up, :now, :next_run_at, :description, :aws
WHERE :must <> 'existing' OR EXISTS (SELECT 1 FROM sq_schedules WHERE name = :name)
ON CONFLICT (name) DO UPDATE SET
    queue = excluded.queue, payload = excluded.payload, every_seconds = excluded.every_seconds,
    cron = excluded.cron, timezone = excluded.timezone, at = excluded.at, priority = excluded.priority,
    group_key = excluded.group_key, paused = excluded.paused, jitter_seconds = excluded.jitter_seconds,
    overlap = excluded.overlap, catch_up = excluded.catch_up, modified_at = :now,
    next_run_at = excluded.next_run_at, description = excluded.description, aws = excluded.aws
WHERE :must <> 'new'
RETURNING name

-- name: schedule_get
SELECT
    -- include: schedule_columns
FROM sq_schedules AS s WHERE s.name = :name

-- name: schedule_page
SELECT
    -- include: schedule_columns
FROM sq_schedules AS s WHERE :after IS NULL OR s.name > :after
ORDER BY s.name LIMIT :limit

-- name: schedule_delete
DELETE FROM sq_schedules WHERE name = :name RETURNING name

-- name: schedule_pause
UPDATE sq_schedules SET paused = 1, modified_at = :now WHERE name = :name RETURNING name

-- name: schedule_resume
-- The next slot from now: the slots of a pause are not caught up.
UPDATE sq_schedules SET paused = 0, modified_at = :now,
                        next_run_at = CASE WHEN paused = 1 THEN :next_run_at ELSE next_run_at END
WHERE name = :name RETURNING name

-- name: schedules_due
-- A scheduler's one statement per wake: the due schedules, oldest slot first, and the first
-- schedule due after them (when to wake next). Both are ranges of sq_schedules_due.
SELECT * FROM (
    SELECT
        -- include: schedule_columns
    FROM sq_schedules AS s WHERE s.paused = 0 AND s.next_run_at <= :now
    ORDER BY s.next_run_at LIMIT :limit
)
UNION ALL
SELECT * FROM (
    SELECT
        -- include: schedule_columns
    FROM sq_schedules AS s WHERE s.paused = 0 AND s.next_run_at > :now
    ORDER BY s.next_run_at LIMIT 1
)

-- name: schedules_next
-- A scheduler's one statement per wake when nothing is due: the earliest slot of any unpaused
-- schedule (the first entry of sq_schedules_due).
SELECT min(next_run_at) AS next_run_at FROM sq_schedules WHERE paused = 0

-- name: schedules_due_locked
-- Firing in batches: the due schedules, read inside the write transaction that fires them (which
-- holds SQLite's one writer lock, so no other process fires them meanwhile).
SELECT
    -- include: schedule_columns
FROM sq_schedules AS s WHERE s.paused = 0 AND s.next_run_at <= :now
ORDER BY s.next_run_at LIMIT :limit

-- name: schedules_claimed
-- The batch's new slots, one statement for the batch (:claims is a JSON array of objects).
UPDATE sq_schedules AS s
SET next_run_at = c.following, last_run_at = coalesce(c.last_run_at, s.last_run_at),
    last_item_id = coalesce(c.last_item_id, s.last_item_id)
FROM (
    SELECT value ->> 'name' AS name, value ->> 'claimed' AS claimed, value ->> 'following' AS following,
           value ->> 'last_run_at' AS last_run_at, value ->> 'last_item_id' AS last_item_id
    FROM json_each(:claims)
) AS c
WHERE s.name = c.name AND s.next_run_at = c.claimed AND s.paused = 0
RETURNING name

-- name: schedule_claim
-- Firing: the compare-and-set on the slot read. Of replicas racing, one changes the row; the
-- others find another next_run_at and push nothing (the push is in this transaction).
UPDATE sq_schedules
SET next_run_at = :following, last_run_at = coalesce(:last_run_at, last_run_at),
    last_item_id = coalesce(:last_item_id, last_item_id)
WHERE name = :name AND next_run_at = :claimed AND paused = 0
RETURNING name

-- name: schedule_triggered
UPDATE sq_schedules SET last_run_at = :now, last_item_id = :last_item_id WHERE name = :name RETURNING name

-- name: fair_start
-- Where a key's items of a push start ranking after: the later of its last rank and the queue's
-- virtual time at :priority, a rank (one less than the lowest fair rank of its due ready items of
-- that rank, a seek of sq_items_ready; with none, the highest rank the queue handed out, a seek of
-- sq_fair_keys_clock). With the key's weight (1 for a new key). See domain/fairness.py.
SELECT max(
    COALESCE((SELECT last_rank FROM sq_fair_keys WHERE queue = :queue AND fairness_key = :key), 0),
    COALESCE(
        (SELECT x.fair_rank - 1 FROM sq_items AS x INDEXED BY sq_items_ready
         WHERE x.queue = :queue AND x.status = 'ready' AND x.rank_priority = :priority AND x.visible_at <= :now
         ORDER BY x.rank_priority DESC, x.fair_rank
         LIMIT 1),
        (SELECT max(f.last_rank) FROM sq_fair_keys AS f WHERE f.queue = :queue),
        0)
) AS start,
COALESCE((SELECT weight FROM sq_fair_keys WHERE queue = :queue AND fairness_key = :key), 1) AS weight

-- name: set_fair_rank
INSERT INTO sq_fair_keys (queue, fairness_key, last_rank) VALUES (:queue, :key, :last_rank)
ON CONFLICT (queue, fairness_key) DO UPDATE SET last_rank = excluded.last_rank

-- name: put_key
-- A key's own settings (store/keys.py), making its row for a key not seen yet (its last rank 0:
-- its first push starts from the queue's virtual time); no row when the queue does not exist. New
-- rate settings start from a full bucket.
INSERT INTO sq_fair_keys (queue, fairness_key, last_rank, weight, max_leased, rate_per_second)
SELECT q.name, :key, 0, :weight, :max_leased, :rate_per_second FROM sq_queues AS q WHERE q.name = :queue
ON CONFLICT (queue, fairness_key) DO UPDATE
SET weight = excluded.weight, max_leased = excluded.max_leased, rate_per_second = excluded.rate_per_second,
    rate_tokens = NULL, rate_at = NULL
RETURNING fairness_key

-- name: reset_key
-- A key back to the queue's defaults; its last rank stays, so it keeps its turn.
UPDATE sq_fair_keys SET weight = 1, max_leased = NULL, rate_per_second = NULL, rate_tokens = NULL, rate_at = NULL
WHERE queue = :queue AND fairness_key = :key

-- name: key_page
-- A page of a queue's keys in key order after :after (NULL: from the first), or the one key :key,
-- with their settings and live counts (leases a seek of sq_items_key_leased each). The unkeyed
-- items' '' is not a key here.
WITH page AS (
    SELECT k.fairness_key, k.weight, k.max_leased, k.rate_per_second FROM sq_fair_keys AS k
    WHERE k.queue = :queue AND k.fairness_key > COALESCE(:after, '') AND (:key IS NULL OR k.fairness_key = :key)
    ORDER BY k.fairness_key
    LIMIT :limit
)
SELECT p.fairness_key, p.weight, p.max_leased, p.rate_per_second,
       (SELECT count(*) FROM sq_items AS i
        WHERE i.queue = :queue AND i.fairness_key = p.fairness_key AND i.status = 'ready') AS ready,
       (SELECT count(*) FROM sq_items AS i INDEXED BY sq_items_key_leased
        WHERE i.queue = :queue AND i.fairness_key = p.fairness_key AND i.status = 'leased'
          AND i.fairness_key IS NOT NULL) AS leased
FROM page AS p
ORDER BY p.fairness_key

-- name: top_keys
-- The queue's busiest keys: the most ready items first, then the most leased, at most :limit, each
-- with its unexpired leases (as a pop counts them) and its cap (its own max_leased, else the
-- queue's max_leased_per_key). Unkeyed items are the NULL key. One walk of the queue's range of
-- sq_items_visible, as the queue's own counts walk it; for a queue that never saw a key (no
-- sq_fair_keys row), no walk at all.
WITH counts AS (
    SELECT i.fairness_key,
           SUM(i.visible_at <= :now AND (i.status = 'ready' OR i.attempts < q.max_attempts)) AS ready,
           SUM(i.status = 'leased' AND i.visible_at > :now) AS leased
    FROM sq_queues AS q
    JOIN sq_items AS i INDEXED BY sq_items_visible ON i.queue = q.name AND i.status IN ('ready', 'leased')
    WHERE q.name = :queue AND EXISTS (SELECT 1 FROM sq_fair_keys AS f WHERE f.queue = :queue)
    GROUP BY i.fairness_key
)
SELECT c.fairness_key, c.ready, c.leased, COALESCE(k.max_leased, q.max_leased_per_key) AS max_leased
FROM counts AS c
JOIN sq_queues AS q ON q.name = :queue
LEFT JOIN sq_fair_keys AS k ON k.queue = :queue AND k.fairness_key = c.fairness_key
WHERE c.ready > 0 OR c.leased > 0
ORDER BY c.ready DESC, c.leased DESC, c.fairness_key IS NULL, c.fairness_key
LIMIT :limit

-- name: key_limited
-- The queue's `limited` after its keys' settings changed: a key's own limits make its pops careful.
UPDATE sq_queues
SET limited = (max_leased IS NOT NULL OR rate_per_second IS NOT NULL OR max_leased_per_key IS NOT NULL
               OR rate_per_key_per_second IS NOT NULL
               OR EXISTS (SELECT 1 FROM sq_fair_keys AS k
                          WHERE k.queue = :queue AND (k.max_leased IS NOT NULL OR k.rate_per_second IS NOT NULL)))
WHERE name = :queue
