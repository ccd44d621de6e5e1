-- Queries of the PostgreSQL dialect (asyncpg, $n parameters).
-- $now is NULL in production, so every time comes from the database's clock (one clock for
-- every replica; seed 004); tests bind a fake clock in its place.

-- name: push
-- The push is sq_push_rows (store/postgres/functions.sql), the function that callers
-- pushing inside their own transactions reach through sq_push and sq_push_batch: one implementation.
-- One row per item, in order: (NULL, NULL, NULL) for an item left out with skip_existing.
SELECT id, created_at, created
FROM sq_push_rows(:ids::uuid[], :queues::text[], :payloads::text[], :created_ats::timestamptz[], :priorities::int[],
                  :groups::text[], :dedup_keys::text[], :delays::float8[], :not_befores::timestamptz[],
                  :remember::bool[], :skip_existing::bool, :now::timestamptz, :attributes::text[])

-- name: push_fair
-- push, for a call with fairness keys (sq_fair_ranks). A call without any sends push, the statement
-- it always was: a database still on the schema before fairness takes it too.
SELECT id, created_at, created
FROM sq_push_rows(:ids::uuid[], :queues::text[], :payloads::text[], :created_ats::timestamptz[], :priorities::int[],
                  :groups::text[], :dedup_keys::text[], :delays::float8[], :not_befores::timestamptz[],
                  :remember::bool[], :skip_existing::bool, :now::timestamptz, :attributes::text[],
                  :fairness_keys::text[])

-- name: lock_groups
-- A redrive rejoins ordered groups at their back, which is a push into them; pushes (sq_push_rows)
-- and redrives into one group take turns, so that a group's seq order is its commit order: a
-- pop that sees an item of a group then also sees every item pushed into it before. Sorted, so
-- that two batches never wait on each other's locks in opposite orders.
SELECT count(pg_advisory_xact_lock(hashtext(g.queue), hashtext(g.group_key)))
FROM (
    SELECT DISTINCT queue, group_key FROM unnest(:queues::text[], :groups::text[]) AS t(queue, group_key)
    ORDER BY 1, 2
) AS g

-- fragment: lease
-- A pop's lease: one token for the items one call takes, the lease from now, one more attempt.
UPDATE sq_items
SET status = 'leased',
    attempts = attempts + 1,
    lease_token = :lease_token,
    visible_at = COALESCE(:now::timestamptz, now())
        + COALESCE(:lease_seconds, (SELECT lease_seconds FROM sq_queues WHERE name = :queue)) * interval '1 second',
    first_popped_at = COALESCE(first_popped_at, COALESCE(:now::timestamptz, now()))

-- fragment: group_head
-- Ordered groups: an item x qualifies only as its group's head, with no live item of the group
-- before it (one completed by this statement, in `done`, is gone). See pop.
AND (x.group_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM sq_items AS e
    WHERE e.queue = x.queue AND e.group_key = x.group_key AND e.seq < x.seq
      AND e.group_key IS NOT NULL AND e.status <> 'dead'
      AND e.id NOT IN (SELECT id FROM done)))

-- fragment: retained
-- The oldest created_at a pop hands out: now less the queue's message_retention_seconds (-infinity
-- for a queue without one). An item past it is never handed out; the sweep deletes it. Uncorrelated,
-- so it is computed once per statement (an InitPlan).
COALESCE((SELECT COALESCE(:now::timestamptz, now()) - r.message_retention_seconds * interval '1 second'
          FROM sq_queues AS r WHERE r.name = :queue), '-infinity'::timestamptz)

-- fragment: claim
-- The items a pop takes (see pop): their seqs, in pop order, at most :max_items, none past the
-- queue's retention (see retained). Nothing of a paused queue, nor of one with flow limits
-- (`limited`) unless the pop counted them first (:limits_checked: store.py, _pop_within_limits). It reads two relations its statement defines: `requested`, the
-- ids of the items the statement completes (never handed out again by it), and `done`, those it
-- completed (gone, for the group probe): see complete_and_pop. A pop alone completes nothing
-- (nothing_completed).
SELECT c.seq FROM (
    SELECT r.seq, r.rank_priority, r.fair_rank, r.created_at FROM (
        SELECT x.seq, x.rank_priority, x.fair_rank, x.created_at FROM sq_items AS x
        WHERE x.queue = :queue AND x.status = 'ready' AND x.visible_at <= COALESCE(:now::timestamptz, now())
          AND x.id <> ALL (ARRAY(SELECT id FROM requested))
          AND x.created_at >= (
              -- include: retained
          )
          AND NOT EXISTS (SELECT 1 FROM sq_queues WHERE name = :queue AND (paused OR (limited AND NOT :limits_checked::boolean)))
          -- include: group_head
        ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
        LIMIT :max_items
        FOR UPDATE SKIP LOCKED
    ) AS r
    UNION ALL
    SELECT l.seq, l.rank_priority, l.fair_rank, l.created_at FROM (
        SELECT x.seq, x.rank_priority, x.fair_rank, x.created_at FROM sq_items AS x
        WHERE x.queue = :queue AND x.status = 'leased' AND x.visible_at <= COALESCE(:now::timestamptz, now())
          AND x.id <> ALL (ARRAY(SELECT id FROM requested))
          AND x.created_at >= (
              -- include: retained
          )
          AND NOT EXISTS (SELECT 1 FROM sq_queues WHERE name = :queue AND (paused OR (limited AND NOT :limits_checked::boolean)))
          AND x.attempts < (SELECT max_attempts FROM sq_queues WHERE name = :queue)
          -- include: group_head
        ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
        LIMIT :max_items
        FOR UPDATE SKIP LOCKED
    ) AS l
) AS c
ORDER BY c.rank_priority DESC, c.fair_rank, c.created_at, c.seq
LIMIT :max_items

-- fragment: nothing_completed
-- The claim's `requested` and `done` for a statement that completes nothing: empty. The claim
-- reads `requested` as an array, made once per statement (an init plan), so each row it walks
-- costs one comparison with an empty array; `done` is probed only behind a group's earlier item.
WITH requested AS (SELECT NULL::uuid AS id WHERE false),
     done AS (SELECT NULL::uuid AS id WHERE false)

-- name: pop
-- SKIP LOCKED: concurrent poppers pass over rows another transaction is claiming instead of
-- queueing behind it; each row goes to exactly one of them.
-- Two walks, merged in pop order: ready items along sq_items_ready (which holds no lease, so the
-- walk never passes over the leases in flight), and leases that ran out along sq_items_lapsed (a
-- range of the queue's leases cut off at now: only those, sorted). Each takes at most :max_items
-- and locks what it takes; the first :max_items of both in pop order are the ones the single walk
-- over every live item found. The few rows locked and not taken (only when leases ran out) are
-- free again at commit, at the end of this statement.
-- seq = ANY(ARRAY(...)): the claim runs once and the UPDATE finds its rows by primary key. Joined
-- to a CTE instead, the planner may hash-join against a scan of the whole table (seen: 20,000 rows
-- read to lease 100), a cost that grows with everything the table holds.
-- Ordered groups: only a group's head (no live item of the group with a smaller seq) qualifies.
-- The probe reads this statement's snapshot, which is safe because pushes into a group commit
-- in seq order (lock_groups): whatever head this snapshot shows, an earlier live item would show
-- too, and an item another popper is leasing right now still shows as live, so blocks the rest.
-- include: nothing_completed
-- include: lease
WHERE seq = ANY (ARRAY(
    -- include: claim
))
RETURNING seq, id, queue, payload::text AS payload, created_at, attempts, lease_token, visible_at,
          priority, group_key, attributes, fairness_key, fair_rank, rank_priority

-- name: lease_keyed
-- The careful pop's claim for a queue whose keys have limits (store.py: _pop_by_keys): the items
-- picked from lock_keys' walk, by seq, with the same lease as pop. The walk read them before the
-- keys' rows were locked, so each is checked again here: an item another popper leased or a
-- completion ended in between is left (the UPDATE re-reads a row changed since its snapshot). The
-- check is a CASE so that the rows are found by primary key alone: as plain conditions, the
-- generic plan read the queue's visible items along sq_items_visible too (6 ms for 50 of 20,000).
-- include: lease
WHERE seq = ANY (:seqs::bigint[])
  AND CASE status
          WHEN 'ready' THEN visible_at <= COALESCE(:now::timestamptz, now())
          WHEN 'leased' THEN visible_at <= COALESCE(:now::timestamptz, now())
                             AND attempts < (SELECT max_attempts FROM sq_queues WHERE name = :queue)
          ELSE false
      END
RETURNING seq, id, queue, payload::text AS payload, created_at, attempts, lease_token, visible_at,
          priority, group_key, attributes, fairness_key, fair_rank, rank_priority

-- name: pop_runs
-- pop, where a group's head brings the run behind it: the group's next live items in seq order, as
-- long as each is due: ready, or leased with its lease run out before its last attempt (SQS hands
-- a whole run out again when its visibility runs out); a delayed, retrying or held one ends the
-- run, and so does a lapsed last attempt, dead already, or one past the queue's retention. Up to :max_items in all.
-- Only a caller that handles a pop's items of one group in order asks for this (the SQS door's
-- FIFO receive); pop keeps one item of a group in flight at a time. The followers are read without
-- a lock and need none to be ours alone: no other popper takes an item behind a live head, and the
-- head is locked by this claim. A follower that changed since this statement's snapshot (a
-- completion by id, a fail to dead) is left by the UPDATE's own status check.
-- include: nothing_completed
-- include: lease
WHERE seq = ANY (ARRAY(
    WITH heads AS MATERIALIZED (
        SELECT h.seq, h.group_key FROM sq_items AS h
        WHERE h.seq = ANY (ARRAY(
            -- include: claim
        ))
    )
    SELECT seq FROM heads
    UNION ALL
    SELECT f.seq FROM heads AS h CROSS JOIN LATERAL (
        SELECT r.seq FROM (
            SELECT y.seq,
                   bool_and((y.status = 'ready' OR (y.status = 'leased' AND y.attempts < (
                                SELECT q.max_attempts FROM sq_queues AS q WHERE q.name = :queue)))
                            AND y.visible_at <= COALESCE(:now::timestamptz, now())
                            AND y.created_at >= (
                                -- include: retained
                            ))
                       OVER (ORDER BY y.seq) AS unbroken
            FROM sq_items AS y
            WHERE h.group_key IS NOT NULL AND y.queue = :queue AND y.group_key = h.group_key
              AND y.seq > h.seq AND y.status <> 'dead'
            ORDER BY y.seq
            LIMIT :max_items
        ) AS r
        WHERE r.unbroken
    ) AS f
    LIMIT :max_items
))
  AND status IN ('ready', 'leased')
RETURNING seq, id, queue, payload::text AS payload, created_at, attempts, lease_token, visible_at,
          priority, group_key, attributes, fairness_key, fair_rank, rank_priority

-- name: extend
-- The row is found by its id alone: a generic plan may otherwise walk sq_items_leased, every
-- live lease, looking for it.
UPDATE sq_items SET visible_at = COALESCE(:now::timestamptz, now()) + :lease_seconds * interval '1 second'
WHERE seq = (SELECT seq FROM sq_items WHERE id = :id)
  AND id = :id AND status = 'leased' AND lease_token = :lease_token AND visible_at > COALESCE(:now::timestamptz, now())

-- fragment: completion
-- The CTEs of a completion, written once for complete_batch and complete_and_pop: items go, their
-- history records are written and their dedup keys' windows start. `present` holds the requested
-- items that existed (CTEs share the statement's snapshot, so it sees them before the DELETE); of
-- those, the ones `done` did not delete were refused for their lease token or for being dead. The
-- `id = ANY(:ids)` conditions let both look
-- their rows up in sq_items_id_key rather than scan. A lease that expired on its last attempt is
-- dead already (for every reader, whether or not the sweep has recorded it): `present` says so
-- and `done` leaves it.
-- The queue's max_attempts is a scalar subquery, read only for an expired lease: a join would be
-- planned once for every case, and a generic plan may then scan sq_queues for every completion.
-- Only the work an item needs: `done` reads its queue's row once (settings), for the history
-- record and the dedup window both, sq_dedup is probed only for an item that has a dedup_key, and
-- sq_client_ids only for an item whose id a producer gave (remember_id): its window starts too.
-- A queue whose retention_seconds is 0 keeps no history: no record is written (nor for a death, in
-- fail and reap).
present AS (
    SELECT i.id,
           CASE WHEN i.status = 'leased' AND i.visible_at <= COALESCE(:now::timestamptz, now())
                     AND i.attempts >= (SELECT q.max_attempts FROM sq_queues AS q WHERE q.name = i.queue)
                THEN 'dead' ELSE i.status END AS status,
           i.lease_token
    FROM sq_items AS i
    WHERE i.id = ANY (:ids::uuid[])
), done AS (
    DELETE FROM sq_items AS i
    USING unnest(:ids::uuid[], :lease_tokens::uuid[]) AS r(id, token)
    WHERE i.id = ANY (:ids::uuid[]) AND i.id = r.id AND i.status <> 'dead'
      AND (r.token IS NULL OR i.lease_token = r.token)
      AND NOT (i.status = 'leased' AND i.visible_at <= COALESCE(:now::timestamptz, now())
               AND i.attempts >= (SELECT q.max_attempts FROM sq_queues AS q WHERE q.name = i.queue))
    RETURNING i.id, i.queue, i.attempts, i.created_at, i.first_popped_at, i.group_key, i.dedup_key,
              i.errors -> -1 ->> 'error' AS last_error, i.payload, i.remember_id,
              (SELECT q FROM sq_queues AS q WHERE q.name = i.queue) AS settings
), history AS (
    INSERT INTO sq_history (id, queue, outcome, attempts, created_at, first_popped_at, finished_at,
                            group_key, dedup_key, last_error, payload)
    SELECT d.id, d.queue, 'completed', d.attempts, d.created_at, d.first_popped_at, COALESCE(:now::timestamptz, now()),
           d.group_key, d.dedup_key, d.last_error, CASE WHEN (d.settings).history_payload THEN d.payload END
    FROM done AS d
    WHERE (d.settings).retention_seconds > 0
), windows AS (
    UPDATE sq_dedup AS k
    SET expires_at = COALESCE(:now::timestamptz, now()) + (d.settings).dedup_window_seconds * interval '1 second'
    FROM done AS d
    WHERE d.dedup_key IS NOT NULL AND k.queue = d.queue AND k.dedup_key = d.dedup_key AND k.item_id = d.id AND k.expires_at IS NULL
), ids AS (
    UPDATE sq_client_ids AS k
    SET expires_at = COALESCE(:now::timestamptz, now()) + (d.settings).dedup_window_seconds * interval '1 second'
    FROM done AS d
    WHERE d.remember_id AND k.id = d.id
)

-- name: complete_batch
-- Items go, their history records are written and the windows of their dedup keys and
-- remembered ids start: one statement, for one item (complete) or many (the completion
-- fragment above). Rows come back for the requested items that existed; those not deleted were
-- refused for their lease token or for being dead.
WITH
-- include: completion
SELECT present.id, present.status, present.lease_token, done.id IS NOT NULL AS completed, done.queue
FROM present LEFT JOIN done ON done.id = present.id

-- name: complete_and_pop
-- A worker's completions and its next pop, in one statement and one commit: complete_batch's
-- CTEs, then pop's UPDATE (its lease and claim). CTEs share one snapshot, so two rules keep the
-- pop in step with the completions: an item requested here is not handed out again here
-- (`requested`), and the group probe counts the items completed here as gone (`done`), so the
-- next item of a group whose head was just completed is its head now (as it is on the engines
-- that run these as two statements in one transaction).
WITH
-- include: completion
, requested AS (
    SELECT unnest(:ids::uuid[]) AS id
), popped AS (
    -- include: lease
    WHERE seq = ANY (ARRAY(
        -- include: claim
    ))
    RETURNING seq, id, queue, payload::text AS payload, created_at, attempts, lease_token, visible_at,
              priority, group_key, attributes, fairness_key, fair_rank, rank_priority
)
SELECT 'popped' AS kind, p.seq, p.id, p.queue, p.payload, p.created_at, p.attempts, p.lease_token,
       p.visible_at, p.priority, p.group_key, p.attributes, p.fairness_key, p.fair_rank, p.rank_priority,
       NULL AS status, NULL::boolean AS completed
FROM popped AS p
UNION ALL
SELECT 'completion', NULL, present.id, done.queue, NULL, NULL, NULL, present.lease_token, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, present.status, done.id IS NOT NULL
FROM present LEFT JOIN done ON done.id = present.id

-- name: wait_on
-- The queues this replica's long-polls wait on, listed for `seconds` (store/postgres/waited.py):
-- the trigger that wakes long-polls notifies only these. By the database's clock, which the
-- trigger reads (the service's may be a test's).
INSERT INTO sq_waited AS w (queue, expires_at)
SELECT q.queue, clock_timestamp() + :seconds::double precision * interval '1 second'
FROM unnest(:queues::text[]) AS q(queue)
ON CONFLICT (queue) DO UPDATE SET expires_at = greatest(w.expires_at, EXCLUDED.expires_at)

-- name: next_visible_at
-- A correlated min() per queue: each is one seek on sq_items_visible, however many items wait.
SELECT q.queue,
       (SELECT min(i.visible_at) FROM sq_items AS i
        WHERE i.queue = q.queue AND i.status IN ('ready', 'leased')) AS next,
       COALESCE(:now::timestamptz, now()) AS now
FROM unnest(:queues::text[]) AS q(queue)

-- fragment: dead_letter_target
-- The queue's dead-letter target (q's dead_letter_queue setting), when that queue exists and is
-- another: t.name, else NULL (the item dies in place).
    LEFT JOIN sq_queues AS t ON t.name = q.dead_letter_queue AND t.name <> i.queue

-- fragment: dead_letter_moved
-- The CTEs after a kill's `failed` (its rows carry dies, source, target, dedup_window_seconds): an
-- item moved to its queue's dead-letter target leaves its dedup key's claim in the source, whose
-- window starts as a purge's does, and takes its remembered id's claim along. The targets' long
-- polls in every replica hear of the moves at commit, as of a push (sq_items_notify_ready sees
-- inserts only, and a move is an UPDATE), by the target's token as the trigger does (0010), when
-- a replica waits on it (sq_waited, as the trigger); `woken`
-- is one row, which the statement's SELECT joins so that it runs (an unreferenced SELECT in WITH
-- would not).
, windows AS (
    UPDATE sq_dedup AS k
    SET expires_at = COALESCE(:now::timestamptz, now()) + d.dedup_window_seconds * interval '1 second'
    FROM failed AS d
    WHERE d.dies AND d.target IS NOT NULL AND d.dedup_key IS NOT NULL
      AND k.queue = d.source AND k.dedup_key = d.dedup_key AND k.item_id = d.id AND k.expires_at IS NULL
), ids AS (
    UPDATE sq_client_ids AS k
    SET queue = d.target
    FROM failed AS d
    WHERE d.dies AND d.target IS NOT NULL AND d.remember_id AND k.id = d.id
), woken AS (
    SELECT count(pg_notify('simplequeue_ready', json_build_object('q', sq_ready_token(m.target), 'n', m.n)::text))
        AS targets
    FROM (SELECT d.target, count(*) AS n FROM failed AS d WHERE d.dies AND d.target IS NOT NULL GROUP BY d.target) AS m
    WHERE EXISTS (SELECT 1 FROM sq_waited AS w WHERE w.queue = m.target AND w.expires_at > clock_timestamp())
)

-- name: fail
-- Dead when the worker says so or this was the last attempt (then its history record is written
-- in this statement); otherwise ready after the given delay or the queue's backoff:
-- min(cap, base * factor^(attempts-1)), less up to jitter of it (:draw is a random draw in [0, 1)).
-- The UPDATE repeats the compare-and-set conditions: they are re-checked on the row's latest
-- version if a concurrent pop or completion changed it after this statement's snapshot.
-- Refused, like a completion, for an item that is dead, or whose lease expired on its last attempt.
-- The queue's row is read once (f), and its settings carried to the history record and the answer.
-- An item that dies in a queue with a dead-letter target moves there instead of staying dead: its
-- history record still says it died here, its dedup key's window starts here (as a purge's does)
-- and its remembered id's claim follows it.
WITH f AS (
    SELECT i.seq, i.queue AS source, i.attempts AS source_attempts, i.first_popped_at AS source_first_popped_at,
           q.max_attempts, q.history_payload, q.dedup_window_seconds, q.retention_seconds,
           (NOT :retry OR i.attempts >= q.max_attempts) AS dies, t.name AS target,
           COALESCE(t.max_attempts, q.max_attempts) AS answer_max_attempts,
           COALESCE(:retry_after, LEAST(q.backoff_cap_seconds,
                              q.backoff_base_seconds * power(q.backoff_factor, LEAST(GREATEST(i.attempts, 1) - 1, 60)))
                        * (1 - q.backoff_jitter * :draw)) AS delay
    FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
-- include: dead_letter_target
    WHERE i.id = :id
), failed AS (
    UPDATE sq_items AS i
    SET seq = CASE WHEN f.dies AND f.target IS NOT NULL THEN nextval(pg_get_serial_sequence('sq_items', 'seq'))
                   ELSE i.seq END,
        queue = CASE WHEN f.dies AND f.target IS NOT NULL THEN f.target ELSE i.queue END,
        -- A fair rank is its queue's: a moved item ranks 0 in its target (as on every engine).
        fair_rank = CASE WHEN f.dies AND f.target IS NOT NULL THEN 0 ELSE i.fair_rank END,
        -- So is a rank: a moved item ranks by its target's aging.
        rank_priority = CASE WHEN f.dies AND f.target IS NOT NULL
                             THEN sq_rank_priority(i.priority, i.created_at,
                                                   (SELECT a.priority_aging_seconds FROM sq_queues AS a
                                                    WHERE a.name = f.target))
                             ELSE i.rank_priority END,
        status = CASE WHEN f.dies AND f.target IS NULL THEN 'dead' ELSE 'ready' END,
        attempts = CASE WHEN f.dies AND f.target IS NOT NULL THEN 0 ELSE i.attempts END,
        first_popped_at = CASE WHEN f.dies AND f.target IS NOT NULL THEN NULL ELSE i.first_popped_at END,
        visible_at = CASE WHEN f.dies AND f.target IS NULL THEN i.visible_at
                          WHEN f.dies THEN COALESCE(:now::timestamptz, now())
                          ELSE COALESCE(:now::timestamptz, now()) + f.delay * interval '1 second' END,
        died_at = CASE WHEN f.dies AND f.target IS NULL THEN COALESCE(:now::timestamptz, now()) END,
        lease_token = NULL,
        errors = i.errors || jsonb_build_array(jsonb_build_object('at', COALESCE(:now::timestamptz, now()), 'error', :error::text))
    FROM f
    WHERE i.seq = f.seq AND i.id = :id AND i.status <> 'dead' AND (:lease_token::uuid IS NULL OR i.lease_token = :lease_token)
      AND NOT (i.status = 'leased' AND i.visible_at <= COALESCE(:now::timestamptz, now())
               AND i.attempts >= f.max_attempts)
    RETURNING i.*, f.answer_max_attempts, f.history_payload, f.dies, f.source, f.target, f.source_attempts,
              f.source_first_popped_at, f.dedup_window_seconds, f.retention_seconds
), history AS (
    INSERT INTO sq_history (id, queue, outcome, attempts, created_at, first_popped_at, finished_at,
                            group_key, dedup_key, last_error, payload)
    SELECT d.id, d.source, 'dead', d.source_attempts, d.created_at, d.source_first_popped_at,
           COALESCE(:now::timestamptz, now()),
           d.group_key, d.dedup_key, :error::text, CASE WHEN d.history_payload THEN d.payload END
    FROM failed AS d
    WHERE d.dies AND d.retention_seconds > 0
)
-- include: dead_letter_moved
SELECT d.id, d.queue, d.payload::text AS payload, d.attributes, d.status, d.attempts, d.errors::text AS errors, d.created_at,
       d.visible_at, d.lease_token, d.priority, d.group_key, d.dedup_key, d.fairness_key, d.first_popped_at, d.died_at,
       d.answer_max_attempts AS max_attempts, COALESCE(:now::timestamptz, now()) AS now
FROM failed AS d CROSS JOIN woken

-- fragment: reaped
-- reap's and reap_queue's CTEs after their `expired` rows: the kills or moves, their history
-- records, the moves' windows and claims, and the answer: per source queue, how many.
), failed AS (
    UPDATE sq_items AS i
    SET seq = CASE WHEN e.target IS NOT NULL THEN nextval(pg_get_serial_sequence('sq_items', 'seq')) ELSE i.seq END,
        queue = COALESCE(e.target, i.queue),
        fair_rank = CASE WHEN e.target IS NULL THEN i.fair_rank ELSE 0 END,
        rank_priority = CASE WHEN e.target IS NULL THEN i.rank_priority
                             ELSE sq_rank_priority(i.priority, i.created_at,
                                                   (SELECT a.priority_aging_seconds FROM sq_queues AS a
                                                    WHERE a.name = e.target)) END,
        status = CASE WHEN e.target IS NULL THEN 'dead' ELSE 'ready' END,
        attempts = CASE WHEN e.target IS NULL THEN i.attempts ELSE 0 END,
        first_popped_at = CASE WHEN e.target IS NULL THEN i.first_popped_at END,
        visible_at = CASE WHEN e.target IS NULL THEN i.visible_at ELSE COALESCE(:now::timestamptz, now()) END,
        died_at = CASE WHEN e.target IS NULL THEN COALESCE(:now::timestamptz, now()) END,
        lease_token = NULL,
        errors = i.errors || jsonb_build_array(jsonb_build_object('at', COALESCE(:now::timestamptz, now()), 'error', :error::text))
    FROM expired AS e
    WHERE i.seq = e.seq AND i.status = 'leased' AND i.visible_at <= COALESCE(:now::timestamptz, now())
    RETURNING i.*, e.history_payload, e.dies, e.source, e.target, e.source_attempts, e.source_first_popped_at,
              e.dedup_window_seconds, e.retention_seconds
), history AS (
    INSERT INTO sq_history (id, queue, outcome, attempts, created_at, first_popped_at, finished_at,
                            group_key, dedup_key, last_error, payload)
    SELECT d.id, d.source, 'dead', d.source_attempts, d.created_at, d.source_first_popped_at,
           COALESCE(:now::timestamptz, now()),
           d.group_key, d.dedup_key, :error::text, CASE WHEN d.history_payload THEN d.payload END
    FROM failed AS d
    WHERE d.retention_seconds > 0
)
-- include: dead_letter_moved
SELECT source AS queue, count(*) AS killed FROM failed CROSS JOIN woken GROUP BY source

-- name: reap
-- Expired leases on their last attempt become dead, with an error and a history record; or, in a
-- queue with a dead-letter target, move there (see dead_letter_target).
WITH expired AS (
    SELECT i.seq, i.queue AS source, i.attempts AS source_attempts, i.first_popped_at AS source_first_popped_at,
           q.history_payload, q.dedup_window_seconds, q.retention_seconds, true AS dies, t.name AS target
    FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
-- include: dead_letter_target
    WHERE i.status = 'leased' AND i.visible_at <= COALESCE(:now::timestamptz, now()) AND i.attempts >= q.max_attempts
      AND i.lease_token IS NOT NULL  -- true of every lease; sq_items_leased's predicate says it
    LIMIT :limit
    FOR UPDATE OF i SKIP LOCKED
-- include: reaped

-- name: reap_queue
-- reap, of one queue's leases only, which a pop runs: the range of sq_items_lapsed cut off at now
-- (the queue's leases that ran out), as the pop's own walk of them reads.
-- Expired leases on their last attempt become dead, with an error and a history record; or, in a
-- queue with a dead-letter target, move there (see dead_letter_target).
WITH expired AS (
    SELECT i.seq, i.queue AS source, i.attempts AS source_attempts, i.first_popped_at AS source_first_popped_at,
           q.history_payload, q.dedup_window_seconds, q.retention_seconds, true AS dies, t.name AS target
    FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
-- include: dead_letter_target
    WHERE i.queue = :queue AND i.status = 'leased' AND i.visible_at <= COALESCE(:now::timestamptz, now())
      AND i.attempts >= q.max_attempts
    LIMIT :limit
    FOR UPDATE OF i SKIP LOCKED
-- include: reaped

-- name: get_item
SELECT i.id, i.queue, i.payload::text AS payload, i.attributes, i.status, i.attempts, i.errors::text AS errors, i.created_at,
       i.visible_at, i.lease_token, i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at, i.died_at,
       q.max_attempts, COALESCE(:now::timestamptz, now()) AS now
FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
WHERE i.id = :id

-- name: sequence_numbers
-- The insertion order of the live or dead items among :ids (an SQS FIFO send answers it).
SELECT i.id, i.seq FROM sq_items AS i WHERE i.id = ANY (:ids::uuid[])

-- name: list_dead
SELECT i.seq, i.id, i.queue, i.payload::text AS payload, i.attributes, i.status, i.attempts, i.errors::text AS errors,
       i.created_at, i.visible_at, i.lease_token, i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at,
       i.died_at, q.max_attempts, COALESCE(:now::timestamptz, now()) AS now
FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
WHERE i.queue = :queue AND i.status = 'dead'
  AND (:since::timestamptz IS NULL OR i.died_at >= :since)
  AND (:until::timestamptz IS NULL OR i.died_at < :until)
  AND (:after_at::timestamptz IS NULL OR (i.died_at, i.seq) < (:after_at, :after_seq))
ORDER BY i.died_at DESC, i.seq DESC
LIMIT :limit

-- name: pick_dead
-- Oldest dead first, so that a rate-limited redrive replays them in the order they died.
SELECT seq, group_key FROM sq_items
WHERE queue = :queue AND status = 'dead' AND (:ids::uuid[] IS NULL OR id = ANY (:ids))
ORDER BY died_at, seq
LIMIT :limit
FOR UPDATE SKIP LOCKED

-- name: revive
-- New seqs, taken in the given order: a redriven item rejoins its ordered group at the back.
UPDATE sq_items AS i
SET seq = r.new_seq, status = 'ready', attempts = 0, died_at = NULL,
    visible_at = COALESCE(:now::timestamptz, now()) + r.delay * interval '1 second'
FROM (
    SELECT t.seq, t.delay, nextval(pg_get_serial_sequence('sq_items', 'seq')) AS new_seq
    FROM unnest(:seqs::bigint[], :delays::float8[]) WITH ORDINALITY AS t(seq, delay, ord)
    ORDER BY t.ord
) AS r
WHERE i.seq = r.seq

-- fragment: purged_windows
-- The CTEs after a purge's `gone` (id, queue, dedup_key, remember_id), written once for purge_dead and
-- purge_live: the windows of the purged items' dedup keys and remembered ids start.
, windows AS (
    UPDATE sq_dedup AS k
    SET expires_at = COALESCE(:now::timestamptz, now()) + q.dedup_window_seconds * interval '1 second'
    FROM gone AS d JOIN sq_queues AS q ON q.name = d.queue
    WHERE d.dedup_key IS NOT NULL AND k.queue = d.queue AND k.dedup_key = d.dedup_key AND k.item_id = d.id AND k.expires_at IS NULL
), ids AS (
    UPDATE sq_client_ids AS k
    SET expires_at = COALESCE(:now::timestamptz, now()) + q.dedup_window_seconds * interval '1 second'
    FROM gone AS d JOIN sq_queues AS q ON q.name = d.queue
    WHERE d.remember_id AND k.id = d.id
)

-- name: purge_dead
-- A batch of the queue's dead items go; the windows of their dedup keys and remembered ids start.
WITH gone AS (
    DELETE FROM sq_items WHERE seq = ANY (ARRAY(
        SELECT seq FROM sq_items WHERE queue = :queue AND status = 'dead' ORDER BY died_at, seq LIMIT :limit
        FOR UPDATE SKIP LOCKED
    ))
    RETURNING id, queue, dedup_key, remember_id
)
-- include: purged_windows
SELECT count(*) FROM gone

-- name: purge_live
-- A batch of the queue's live items go (ready, delayed, retrying, leased; no history: a purge is
-- not a completion); the windows of their dedup keys and remembered ids start, as purge_dead's do.
-- A lease that ran out on its last attempt is dead already (the sweep records it): it stays.
WITH gone AS (
    DELETE FROM sq_items WHERE seq = ANY (ARRAY(
        SELECT i.seq FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
        WHERE i.queue = :queue AND i.status IN ('ready', 'leased')
          AND NOT (i.status = 'leased' AND i.visible_at <= COALESCE(:now::timestamptz, now())
                   AND i.attempts >= q.max_attempts)
        ORDER BY i.seq LIMIT :limit
        FOR UPDATE OF i SKIP LOCKED
    ))
    RETURNING id, queue, dedup_key, remember_id
)
-- include: purged_windows
SELECT count(*) FROM gone

-- name: expire_retained
-- Live items older than their queue's message_retention_seconds (from their push) go as purge_live's
-- do: no history, and the windows of their dedup keys and remembered ids start. At most :limit, in
-- no order (all of them go): each queue that sets it is read along its live items' range of an index
-- (no index orders a queue's items by created_at alone), so a sweep costs in proportion to those
-- queues' live items.
-- A lease that ran out on its last attempt is dead already (the sweep records it): it stays.
WITH gone AS (
    DELETE FROM sq_items WHERE seq = ANY (ARRAY(
        SELECT old.seq
        FROM sq_queues AS q
        CROSS JOIN LATERAL (
            SELECT i.seq FROM sq_items AS i
            WHERE i.queue = q.name AND i.status IN ('ready', 'leased')
              AND i.created_at < COALESCE(:now::timestamptz, now()) - q.message_retention_seconds * interval '1 second'
              AND NOT (i.status = 'leased' AND i.visible_at <= COALESCE(:now::timestamptz, now())
                       AND i.attempts >= q.max_attempts)
            LIMIT :limit
            FOR UPDATE OF i SKIP LOCKED
        ) AS old
        WHERE q.message_retention_seconds IS NOT NULL
        LIMIT :limit
    ))
    RETURNING id, queue, dedup_key, remember_id
)
-- include: purged_windows
SELECT count(*) FROM gone

-- name: list_history
SELECT seq, id, queue, outcome, attempts, created_at, first_popped_at, finished_at, group_key, dedup_key,
       last_error, payload::text AS payload
FROM sq_history
WHERE queue = :queue
  AND (:outcome::text IS NULL OR outcome = :outcome)
  AND (:since::timestamptz IS NULL OR finished_at >= :since)
  AND (:until::timestamptz IS NULL OR finished_at < :until)
  AND (:after_at::timestamptz IS NULL OR (finished_at, seq) < (:after_at, :after_seq))
ORDER BY finished_at DESC, seq DESC
LIMIT :limit

-- name: purge_history
-- Per queue, its oldest records past its retention (a range at the front of sq_history_queue),
-- and dedup keys and remembered ids past their window; at most :limit of each.
WITH old AS (
    DELETE FROM sq_history WHERE seq = ANY (ARRAY(
        SELECT h.seq FROM sq_queues AS q
        CROSS JOIN LATERAL (
            SELECT seq FROM sq_history AS h
            WHERE h.queue = q.name
              AND h.finished_at < COALESCE(:now::timestamptz, now()) - q.retention_seconds * interval '1 second'
            LIMIT :limit
        ) AS h
        LIMIT :limit
    ))
    RETURNING 1
), keys AS (
    DELETE FROM sq_dedup WHERE (queue, dedup_key) IN (
        SELECT queue, dedup_key FROM sq_dedup
        WHERE expires_at IS NOT NULL AND expires_at <= COALESCE(:now::timestamptz, now())
        LIMIT :limit
    )
    RETURNING 1
), ids AS (
    DELETE FROM sq_client_ids WHERE id IN (
        SELECT id FROM sq_client_ids
        WHERE expires_at IS NOT NULL AND expires_at <= COALESCE(:now::timestamptz, now())
        LIMIT :limit
    )
    RETURNING 1
)
SELECT (SELECT count(*) FROM old) AS history, (SELECT count(*) FROM keys) AS keys,
       (SELECT count(*) FROM ids) AS ids

-- name: put_queue
-- A change of priority_aging_seconds re-ranks every item the queue holds (sq_rank_priority), in this
-- statement, so that items ranked with and without aging, or with two periods, never meet in one
-- pop order; its cost grows with the queue's items. A push in flight (its rank computed, not yet
-- committed) keeps the rank of the setting it read.
WITH previous AS (
    SELECT q.priority_aging_seconds AS aging FROM sq_queues AS q WHERE q.name = :queue
), reranked AS (
    UPDATE sq_items AS i SET rank_priority = sq_rank_priority(i.priority, i.created_at, :priority_aging_seconds::integer)
    WHERE i.queue = :queue
      AND EXISTS (SELECT 1 FROM previous AS p WHERE p.aging IS DISTINCT FROM :priority_aging_seconds::integer)
), put AS (
INSERT INTO sq_queues (name, created_at, max_attempts, lease_seconds, backoff_base_seconds, backoff_factor,
                       backoff_cap_seconds, backoff_jitter, retention_seconds, dedup_window_seconds, dedup_window_from,
                       history_payload, dead_letter_queue, message_retention_seconds, max_leased,
                       rate_per_second, rate_burst, max_leased_per_key, rate_per_key_per_second, priority_aging_seconds, limited)
VALUES (:queue, COALESCE(:now::timestamptz, now()), :max_attempts, :lease_seconds, :backoff_base_seconds, :backoff_factor, :backoff_cap_seconds, :backoff_jitter, :retention_seconds, :dedup_window_seconds, :dedup_window_from, :history_payload,
        :dead_letter_queue, :message_retention_seconds, :max_leased, :rate_per_second, :rate_burst, :max_leased_per_key,
        :rate_per_key_per_second, :priority_aging_seconds::integer,
        -- A key's own limits keep the queue limited whatever its own settings.
        :limited::boolean OR EXISTS (SELECT 1 FROM sq_fair_keys AS k WHERE k.queue = :queue AND (k.max_leased IS NOT NULL OR k.rate_per_second IS NOT NULL)))
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
RETURNING xmax = 0 AS created
)
SELECT created FROM put

-- name: queue_exists
SELECT EXISTS (SELECT 1 FROM sq_queues WHERE name = :queue)

-- name: queue_metadata
-- The queue's times, attributes and tags, each list a JSON array of {"n": name, "v": value}.
SELECT q.created_at, q.modified_at,
       (SELECT json_agg(json_build_object('n', a.name, 'v', a.value)) FROM sq_queue_attributes AS a
        WHERE a.queue = q.name)::text AS attributes,
       (SELECT json_agg(json_build_object('n', t.key, 'v', t.value)) FROM sq_queue_tags AS t
        WHERE t.queue = q.name)::text AS tags
FROM sq_queues AS q WHERE q.name = :queue

-- name: lock_queue
-- Changes of one queue's metadata wait for each other here, so that the next statement (a snapshot
-- of its own, under READ COMMITTED) counts the tags the previous change left.
SELECT 1 FROM sq_queues WHERE name = :queue FOR UPDATE

-- name: change_queue_metadata
-- Under lock_queue in the same transaction. Attributes and tags named in :set_* (a JSON object) are
-- written, those in :unset_* (a JSON array of names) removed; nothing changes when the tags would
-- then number more than :max_tags. modified_at moves when :touch (an attribute was given).
WITH tags_after AS (
    SELECT count(*) AS n FROM (
        SELECT t.key FROM sq_queue_tags AS t
        WHERE t.queue = :queue AND t.key NOT IN (SELECT json_array_elements_text(:unset_tags::json))
        UNION
        SELECT key FROM json_each_text(:set_tags::json)
    ) AS k
), allowed AS (
    SELECT 1 AS ok FROM tags_after WHERE n <= :max_tags
), set_attributes AS (
    INSERT INTO sq_queue_attributes (queue, name, value)
    SELECT :queue, g.key, g.value FROM json_each_text(:set_attributes::json) AS g, allowed
    ON CONFLICT (queue, name) DO UPDATE SET value = excluded.value
), unset_attributes AS (
    DELETE FROM sq_queue_attributes AS a USING allowed
    WHERE a.queue = :queue AND a.name IN (SELECT json_array_elements_text(:unset_attributes::json))
), set_tags AS (
    INSERT INTO sq_queue_tags (queue, key, value)
    SELECT :queue, g.key, g.value FROM json_each_text(:set_tags::json) AS g, allowed
    ON CONFLICT (queue, key) DO UPDATE SET value = excluded.value
), unset_tags AS (
    DELETE FROM sq_queue_tags AS t USING allowed
    WHERE t.queue = :queue AND t.key IN (SELECT json_array_elements_text(:unset_tags::json))
), touched AS (
    UPDATE sq_queues AS q SET modified_at = COALESCE(:now::timestamptz, now()) FROM allowed
    WHERE q.name = :queue AND :touch::boolean
)
SELECT n AS tags FROM tags_after

-- name: set_paused
UPDATE sq_queues SET paused = :paused WHERE name = :queue

-- name: peek
-- Live items in one state at :now (as queue_stats counts them), oldest created first.
SELECT i.seq, i.id, i.queue, i.payload::text AS payload, i.attributes, i.status, i.attempts, i.errors::text AS errors,
       i.created_at, i.visible_at, i.lease_token, i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at,
       i.died_at, q.max_attempts, c.now
FROM (SELECT COALESCE(:now::timestamptz, now()) AS now) AS c
CROSS JOIN sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
WHERE i.queue = :queue AND i.status IN ('ready', 'leased')
  AND CASE :state::text
        WHEN 'ready' THEN i.visible_at <= c.now AND (i.status = 'ready' OR i.attempts < q.max_attempts)
        WHEN 'leased' THEN i.status = 'leased' AND i.visible_at > c.now
        WHEN 'delayed' THEN i.status = 'ready' AND i.visible_at > c.now AND i.attempts = 0
        WHEN 'retrying' THEN i.status = 'ready' AND i.visible_at > c.now AND i.attempts > 0
      END
  AND (:after_at::timestamptz IS NULL OR (i.created_at, i.seq) > (:after_at, :after_seq))
ORDER BY i.created_at, i.seq
LIMIT :limit


-- name: group_items
-- A group's live items in group order (seq, the order its items are handed out), after the cursor's
-- seq: a range of sq_items_group, which holds no dead item.
SELECT i.seq, i.id, i.queue, i.payload::text AS payload, i.attributes, i.status, i.attempts, i.errors::text AS errors,
       i.created_at, i.visible_at, i.lease_token, i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at,
       i.died_at, q.max_attempts, COALESCE(:now::timestamptz, now()) AS now
FROM sq_items AS i JOIN sq_queues AS q ON q.name = i.queue
WHERE i.queue = :queue AND i.group_key = :group AND i.status <> 'dead'
  AND i.seq > COALESCE(:after_seq::bigint, 0)
ORDER BY i.seq
LIMIT :limit

-- name: dedup_item
-- The item (live or dead) that holds a dedup key of the queue: sq_dedup's key, then the item by id.
-- None once the item finished, though its key may still be held for the queue's dedup window.
SELECT i.id, i.queue, i.payload::text AS payload, i.attributes, i.status, i.attempts, i.errors::text AS errors, i.created_at,
       i.visible_at, i.lease_token, i.priority, i.group_key, i.dedup_key, i.fairness_key, i.first_popped_at, i.died_at,
       q.max_attempts, COALESCE(:now::timestamptz, now()) AS now
FROM sq_dedup AS d
JOIN sq_items AS i ON i.id = d.item_id AND i.queue = d.queue
JOIN sq_queues AS q ON q.name = i.queue
WHERE d.queue = :queue AND d.dedup_key = :dedup_key

-- name: delete_queue
-- One statement, so one snapshot: the queue row is locked first (FOR UPDATE), so pushes that
-- would register it again wait; live leases decide, unless forced; then everything goes, its
-- attributes, tags and fairness keys too. The claims of its items' ids go with them (sought by id);
-- the ids of items that finished earlier stay remembered until their windows end (sq_client_ids is
-- keyed by id alone, not by queue).
WITH q AS (
    SELECT name FROM sq_queues WHERE name = :queue FOR UPDATE
), busy AS (
    SELECT count(*) AS leased FROM sq_items AS i, q
    WHERE i.queue = q.name AND i.status = 'leased' AND i.visible_at > COALESCE(:now::timestamptz, now())
), allowed AS (
    SELECT q.name FROM q, busy WHERE :force OR busy.leased = 0
), items AS (
    DELETE FROM sq_items AS i USING allowed WHERE i.queue = allowed.name RETURNING i.id, i.remember_id
), ids AS (
    DELETE FROM sq_client_ids AS k USING items WHERE items.remember_id AND k.id = items.id
), history AS (
    DELETE FROM sq_history AS h USING allowed WHERE h.queue = allowed.name RETURNING 1
), dedup AS (
    DELETE FROM sq_dedup AS d USING allowed WHERE d.queue = allowed.name RETURNING 1
), attributes AS (
    DELETE FROM sq_queue_attributes AS a USING allowed WHERE a.queue = allowed.name
), tags AS (
    DELETE FROM sq_queue_tags AS t USING allowed WHERE t.queue = allowed.name
), fair_keys AS (
    DELETE FROM sq_fair_keys AS f USING allowed WHERE f.queue = allowed.name
), gone AS (
    DELETE FROM sq_queues AS g USING allowed WHERE g.name = allowed.name RETURNING 1
)
SELECT (SELECT count(*) FROM q) AS found, (SELECT leased FROM busy) AS leased,
       (SELECT count(*) FROM gone) AS deleted, (SELECT count(*) FROM items) AS items,
       (SELECT count(*) FROM history) AS history, (SELECT count(*) FROM dedup) AS dedup_keys

-- fragment: queue_counts
-- Per queue: the live counts read sq_items_visible's rows, the dead count sq_items_dead, history
-- counts sq_history_outcome; none walks the others, so a million dead or finished items do not
-- slow the live figures down. An expired lease on its last attempt counts as dead already.
SELECT q.name, q.max_attempts, q.lease_seconds, q.backoff_base_seconds, q.backoff_factor, q.backoff_cap_seconds,
       q.backoff_jitter, q.retention_seconds, q.dedup_window_seconds, q.dedup_window_from, q.history_payload,
       q.dead_letter_queue, q.message_retention_seconds, q.max_leased, q.rate_per_second, q.rate_burst, q.max_leased_per_key, q.rate_per_key_per_second, q.priority_aging_seconds, q.limited, q.paused, live.ready, live.leased, live.delayed, live.retrying, dead.dead + live.expired_dead AS dead,
       live.oldest_ready, hist.completed_in_history, hist.dead_in_history, c.now
FROM (SELECT COALESCE(:now::timestamptz, now()) AS now) AS c
CROSS JOIN sq_queues AS q
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE i.visible_at <= c.now
                              AND (i.status = 'ready' OR i.attempts < q.max_attempts)) AS ready,
           count(*) FILTER (WHERE i.status = 'leased' AND i.visible_at > c.now) AS leased,
           count(*) FILTER (WHERE i.status = 'ready' AND i.visible_at > c.now AND i.attempts = 0) AS delayed,
           count(*) FILTER (WHERE i.status = 'ready' AND i.visible_at > c.now AND i.attempts > 0) AS retrying,
           count(*) FILTER (WHERE i.status = 'leased' AND i.visible_at <= c.now
                              AND i.attempts >= q.max_attempts) AS expired_dead,
           min(i.created_at) FILTER (WHERE i.visible_at <= c.now
                                       AND (i.status = 'ready' OR i.attempts < q.max_attempts)) AS oldest_ready
    FROM sq_items AS i WHERE i.queue = q.name AND i.status IN ('ready', 'leased')
) AS live
CROSS JOIN LATERAL (
    SELECT count(*) AS dead FROM sq_items AS d WHERE d.queue = q.name AND d.status = 'dead'
) AS dead
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE h.outcome = 'completed') AS completed_in_history,
           count(*) FILTER (WHERE h.outcome = 'dead') AS dead_in_history
    FROM sq_history AS h WHERE h.queue = q.name
) AS hist

-- name: queue_stats
-- include: queue_counts
WHERE q.name = :queue

-- name: queue_page
-- A page of queues in name order after :after (NULL: from the first), of those whose names start
-- with :prefix (NULL: every queue): a range of the primary key from :after on, in its collation,
-- stopped after :limit rows, so a page costs its own queues' counts whatever the table holds.
-- include: queue_counts
WHERE q.name > COALESCE(:after::text, '')
  AND (:prefix::text IS NULL OR starts_with(q.name, :prefix))
ORDER BY q.name
LIMIT :limit

-- name: count_queues
SELECT count(*) AS queues FROM sq_queues

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
INSERT INTO sq_schema_version (version, name) VALUES (:version, :name)

-- name: write_setting
-- A limit of the service's, for the pushes that do not go through it (sq_settings).
UPDATE sq_settings SET value = :value WHERE name = :name

-- name: activity
-- Counts per bucket of the window [:since, :until), for one queue or (:queue NULL) every queue; only
-- the buckets that have any. Each part reads a range of an index from :since on, for each queue
-- (queue = ANY of an array: one range per queue, never a scan of the table):
--   completed, dead  sq_history_queue, by finished_at;
--   pushed           the history records' created_at, within the same range (an item created since
--                    :since finished since then), and live items' created_at from sq_items_visible
--                    (a live item's visible_at is never before it was pushed);
--   failed           each recorded error's time, of live items (sq_items_visible: visible_at moves
--                    forward with each pop and failure) and of dead items not purged (sq_items_dead:
--                    died_at is after every failure). The failures of items that completed since
--                    are not counted: history keeps their attempts and last error, not when.
-- A dead item is counted pushed once (by its history record, not its row); a redriven item once
-- more while it lives, and again when it finishes.
WITH events AS (
    SELECT h.finished_at AS at, CASE WHEN h.outcome = 'completed' THEN 'c' ELSE 'd' END AS kind
    FROM sq_history AS h
    WHERE h.queue = ANY (ARRAY(SELECT name FROM sq_queues WHERE :queue::text IS NULL OR name = :queue))
      AND h.finished_at >= :since::timestamptz AND h.finished_at < :until::timestamptz
    UNION ALL
    SELECT h.created_at, 'p'
    FROM sq_history AS h
    WHERE h.queue = ANY (ARRAY(SELECT name FROM sq_queues WHERE :queue::text IS NULL OR name = :queue))
      AND h.finished_at >= :since::timestamptz AND h.created_at >= :since::timestamptz
    UNION ALL
    SELECT i.created_at, 'p'
    FROM sq_items AS i
    WHERE i.queue = ANY (ARRAY(SELECT name FROM sq_queues WHERE :queue::text IS NULL OR name = :queue))
      AND i.status IN ('ready', 'leased') AND i.visible_at >= :since::timestamptz
      AND i.created_at >= :since::timestamptz
    UNION ALL
    SELECT (e.value ->> 'at')::timestamptz, 'f'
    FROM sq_items AS i CROSS JOIN LATERAL jsonb_array_elements(i.errors) AS e
    WHERE i.queue = ANY (ARRAY(SELECT name FROM sq_queues WHERE :queue::text IS NULL OR name = :queue))
      AND i.status IN ('ready', 'leased') AND i.visible_at >= :since::timestamptz AND i.attempts > 0
    UNION ALL
    SELECT (e.value ->> 'at')::timestamptz, 'f'
    FROM sq_items AS i CROSS JOIN LATERAL jsonb_array_elements(i.errors) AS e
    WHERE i.queue = ANY (ARRAY(SELECT name FROM sq_queues WHERE :queue::text IS NULL OR name = :queue))
      AND i.status = 'dead' AND i.died_at >= :since::timestamptz
)
SELECT floor(extract(epoch FROM e.at - :since::timestamptz) / :bucket::int)::int AS bucket,
       count(*) FILTER (WHERE e.kind = 'p') AS pushed,
       count(*) FILTER (WHERE e.kind = 'c') AS completed,
       count(*) FILTER (WHERE e.kind = 'f') AS failed,
       count(*) FILTER (WHERE e.kind = 'd') AS dead
FROM events AS e
WHERE e.at >= :since::timestamptz AND e.at < :until::timestamptz
GROUP BY 1
ORDER BY 1
LIMIT :limit

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
FROM sq_topics AS t WHERE :after::text IS NULL OR t.name > :after
ORDER BY t.name LIMIT :limit

-- name: topic_update
UPDATE sq_topics AS t SET attributes = :attributes, tags = :tags, modified_at = :now
WHERE t.name = :name AND t.attributes = :old_attributes AND t.tags = :old_tags
RETURNING t.name, t.created_at, t.modified_at, t.attributes, t.tags,
          (SELECT count(*) FROM sq_subscriptions AS s WHERE s.topic = t.name) AS subscriptions

-- name: topic_delete_subscriptions
DELETE FROM sq_subscriptions WHERE topic = :name

-- name: topic_delete
DELETE FROM sq_topics WHERE name = :name RETURNING name

-- name: subscription_create
-- Only to a topic that exists (read under a share lock, so that a delete of the topic waits for
-- this transaction and takes this subscription with it), and once per endpoint of a topic.
INSERT INTO sq_subscriptions (id, topic, protocol, endpoint, attributes, confirmed, token, created_at)
SELECT :id, t.name, :protocol, :endpoint, :attributes, :confirmed, :token, :now
FROM sq_topics AS t WHERE t.name = :topic
FOR SHARE
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
WHERE (:topic::text IS NULL OR s.topic = :topic) AND (:after::uuid IS NULL OR s.id > :after)
ORDER BY s.id LIMIT :limit

-- name: subscription_update
UPDATE sq_subscriptions AS s SET attributes = :attributes, confirmed = :confirmed, token = :token
WHERE s.id = :id AND s.attributes = :old_attributes
RETURNING s.*, EXISTS (SELECT 1 FROM sq_queues AS q WHERE s.protocol = 'sqs' AND q.name = s.endpoint) AS queue_exists

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

-- Flow limits (domain/limits.py, store.py: _pop_within_limits). A pop of a queue whose row says
-- `limited` locks that row and counts its leases (sq_flow_room, functions.sql: one round trip),
-- then claims what the limits allow and takes the tokens, before the lock goes at commit.

-- name: flow_room
-- With what the function does not return, read beside it: the queue's rate_per_key_per_second, and
-- whether some key of it has limits of its own (keys_limited: then its pops take the keys' turns),
-- looked up only when nothing else says so (queue-wide limits, no per-key default): a queue limited
-- per key pops by its keys anyway, and reading all its keys' rows would cost every pop.
SELECT r.*, q.rate_per_key_per_second, q.keys_limited
FROM sq_flow_room(:queue, :now::timestamptz) AS r
CROSS JOIN LATERAL (
    SELECT s.rate_per_key_per_second,
           CASE WHEN (s.max_leased IS NOT NULL OR s.rate_per_second IS NOT NULL)
                     AND s.max_leased_per_key IS NULL AND s.rate_per_key_per_second IS NULL
                THEN EXISTS (SELECT 1 FROM sq_fair_keys AS k
                             WHERE k.queue = :queue AND (k.max_leased IS NOT NULL OR k.rate_per_second IS NOT NULL))
                ELSE false END AS keys_limited
    FROM sq_queues AS s WHERE s.name = :queue
) AS q

-- name: take_tokens
-- The bucket after a pop: its tokens as counted at :at, less the items the pop took.
UPDATE sq_queues SET rate_tokens = :tokens, rate_at = :at WHERE name = :queue

-- name: take_key_tokens
-- The keys' buckets after a pop (rows it locked: lock_keys): each key's tokens as counted at its
-- :ats, less the items the pop took of it.
UPDATE sq_fair_keys AS f SET rate_tokens = t.tokens, rate_at = t.at
FROM unnest(:keys::text[], :tokens::float8[], :ats::timestamptz[]) AS t(key, tokens, at)
WHERE f.queue = :queue AND f.fairness_key = t.key

-- fragment: schedule_columns
-- Schedules (store/schedules.py holds the flow, written once for every dialect). previous_live:
-- whether the item the last firing pushed is still live, read for overlap 'skip' only, through
-- schedule_previous.
s.name, s.queue, s.payload, s.every_seconds, s.cron, s.timezone, s.at, s.priority, s.group_key,
s.paused, s.jitter_seconds, s.overlap, s.catch_up, s.created_at, s.modified_at, s.next_run_at,
s.last_run_at, s.last_item_id, s.description, s.aws, coalesce(p.live, false) AS previous_live

-- fragment: schedule_previous
-- A seek of sq_items' id per schedule read, in a LATERAL join: as an EXISTS, the planner hashed
-- every item's id once per wake (a scan of sq_items) to answer 100 schedules.
LEFT JOIN LATERAL (
    SELECT true AS live FROM sq_items AS i
    WHERE s.overlap = 'skip' AND i.id = s.last_item_id AND i.status <> 'dead'
    LIMIT 1
) AS p ON true

-- name: schedule_put
-- :must says what the name must be: 'new' (CreateSchedule: an existing one is left as it is),
-- 'existing' (UpdateSchedule: none is made), 'any' (the REST API's PUT). Returns the name when
-- it made or replaced the schedule: of two racing creates, the one whose insert waited on the
-- other's returns nothing (its DO UPDATE's WHERE is false), whatever either read before.
INSERT INTO sq_schedules (name, queue, payload, every_seconds, cron, timezone, at, priority, group_key,
                          paused, jitter_seconds, overlap, catch_up, created_at, next_run_at,
                          description, aws)
SELECT :name::text, :queue::text, :payload::text, :every_seconds::integer, :cron::text, :timezone::text,
       :at::timestamptz, :priority::integer, :group_key::text, :paused::boolean, :jitter_seconds::integer,
       :overlap::text, :catch_up::text, :now::timestamptz, :next_run_at::timestamptz, :description::text,
       :aws::text
WHERE :must::text <> 'existing' OR EXISTS (SELECT 1 FROM sq_schedules WHERE name = :name)
ON CONFLICT (name) DO UPDATE SET
    queue = excluded.queue, payload = excluded.payload, every_seconds = excluded.every_seconds,
    cron = excluded.cron, timezone = excluded.timezone, at = excluded.at, priority = excluded.priority,
    group_key = excluded.group_key, paused = excluded.paused, jitter_seconds = excluded.jitter_seconds,
    overlap = excluded.overlap, catch_up = excluded.catch_up, modified_at = excluded.created_at,
    next_run_at = excluded.next_run_at, description = excluded.description, aws = excluded.aws
WHERE :must::text <> 'new'
RETURNING name

-- name: schedule_get
SELECT
    -- include: schedule_columns
FROM sq_schedules AS s
-- include: schedule_previous
WHERE s.name = :name

-- name: schedule_page
SELECT
    -- include: schedule_columns
FROM sq_schedules AS s
-- include: schedule_previous
WHERE :after::text IS NULL OR s.name > :after
ORDER BY s.name LIMIT :limit

-- name: schedule_delete
DELETE FROM sq_schedules WHERE name = :name RETURNING name

-- name: schedule_pause
UPDATE sq_schedules SET paused = true, modified_at = :now WHERE name = :name RETURNING name

-- name: schedule_resume
-- The next slot from now: the slots of a pause are not caught up.
UPDATE sq_schedules SET paused = false, modified_at = :now,
                        next_run_at = CASE WHEN paused THEN :next_run_at::timestamptz ELSE next_run_at END
WHERE name = :name RETURNING name

-- name: schedules_due
-- A scheduler's one statement per wake: the due schedules, oldest slot first, and the first
-- schedule due after them (when to wake next). Both are ranges of sq_schedules_due.
(SELECT
    -- include: schedule_columns
 FROM sq_schedules AS s
 -- include: schedule_previous
 WHERE NOT s.paused AND s.next_run_at <= :now
 ORDER BY s.next_run_at LIMIT :limit)
UNION ALL
(SELECT
    -- include: schedule_columns
 FROM sq_schedules AS s
 -- include: schedule_previous
 WHERE NOT s.paused AND s.next_run_at > :now
 ORDER BY s.next_run_at LIMIT 1)

-- name: schedules_next
-- A scheduler's one statement per wake when nothing is due: the earliest slot of any unpaused
-- schedule (the first entry of sq_schedules_due).
SELECT min(next_run_at) AS next_run_at FROM sq_schedules WHERE NOT paused

-- name: schedules_due_locked
-- Firing in batches: the due schedules no other replica is firing, locked until this transaction
-- has moved their slots and pushed their items. SKIP LOCKED splits a slot's schedules between the
-- replicas, which never wait for each other; a row another replica fired meanwhile is re-read and
-- left out (its next_run_at is no longer due).
SELECT
    -- include: schedule_columns
FROM sq_schedules AS s
-- include: schedule_previous
WHERE NOT s.paused AND s.next_run_at <= :now
ORDER BY s.next_run_at LIMIT :limit
FOR NO KEY UPDATE OF s SKIP LOCKED

-- name: schedules_claimed
-- The locked batch's new slots, one statement for the batch: each of the claims' fields comes as
-- an array (store.py: _lock_and_push). The compare-and-set on next_run_at is kept although the
-- rows are locked: a claim stays true to what was read.
UPDATE sq_schedules AS s
SET next_run_at = c.following, last_run_at = coalesce(c.last_run_at, s.last_run_at),
    last_item_id = coalesce(c.last_item_id, s.last_item_id)
FROM unnest(:name::text[], :claimed::timestamptz[], :following::timestamptz[], :last_run_at::timestamptz[],
            :last_item_id::uuid[]) AS c(name, claimed, following, last_run_at, last_item_id)
WHERE s.name = c.name AND s.next_run_at = c.claimed AND NOT s.paused
RETURNING s.name

-- name: schedule_claim
-- Firing: the compare-and-set on the slot read. Of replicas racing, one changes the row (the
-- others wait for its lock, then find another next_run_at) and pushes in the same transaction.
UPDATE sq_schedules
SET next_run_at = :following, last_run_at = coalesce(:last_run_at::timestamptz, last_run_at),
    last_item_id = coalesce(:last_item_id::uuid, last_item_id)
WHERE name = :name AND next_run_at = :claimed AND NOT paused
RETURNING name

-- name: schedule_triggered
UPDATE sq_schedules SET last_run_at = :now, last_item_id = :last_item_id WHERE name = :name RETURNING name

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
    WHERE k.queue = :queue AND k.fairness_key > COALESCE(:after::text, '')
      AND (:key::text IS NULL OR k.fairness_key = :key)
    ORDER BY k.fairness_key
    LIMIT :limit
)
SELECT p.fairness_key, p.weight, p.max_leased, p.rate_per_second,
       (SELECT count(*) FROM sq_items AS i
        WHERE i.queue = :queue AND i.fairness_key = p.fairness_key AND i.status = 'ready') AS ready,
       (SELECT count(*) FROM sq_items AS i
        WHERE i.queue = :queue AND i.fairness_key = p.fairness_key AND i.status = 'leased'
          AND i.fairness_key IS NOT NULL) AS leased
FROM page AS p
ORDER BY p.fairness_key

-- name: top_keys
-- The queue's busiest keys: the most ready items first, then the most leased, at most :limit, each
-- with its unexpired leases (as a pop counts them) and its cap (its own max_leased, else the
-- queue's max_leased_per_key). Unkeyed items are the NULL key. One walk of the queue's live items,
-- by its range of sq_items_visible as the queue's own counts walk them, whatever other queues hold;
-- for a queue that never saw a key (no sq_fair_keys row), no walk at all.
SELECT c.fairness_key, c.ready, c.leased, COALESCE(k.max_leased, q.max_leased_per_key) AS max_leased
FROM (SELECT COALESCE(:now::timestamptz, now()) AS now) AS n
CROSS JOIN sq_queues AS q
CROSS JOIN LATERAL (
    SELECT i.fairness_key,
           count(*) FILTER (WHERE i.visible_at <= n.now
                              AND (i.status = 'ready' OR i.attempts < q.max_attempts)) AS ready,
           count(*) FILTER (WHERE i.status = 'leased' AND i.visible_at > n.now) AS leased
    FROM sq_items AS i
    WHERE i.queue = q.name AND i.status IN ('ready', 'leased')
    GROUP BY i.fairness_key
) AS c
LEFT JOIN sq_fair_keys AS k ON k.queue = q.name AND k.fairness_key = c.fairness_key
WHERE q.name = :queue AND EXISTS (SELECT 1 FROM sq_fair_keys AS f WHERE f.queue = :queue)
  AND (c.ready > 0 OR c.leased > 0)
ORDER BY c.ready DESC, c.leased DESC, c.fairness_key NULLS LAST
LIMIT :limit

-- name: key_limited
-- The queue's `limited` after its keys' settings changed: a key's own limits make its pops careful.
UPDATE sq_queues
SET limited = (max_leased IS NOT NULL OR rate_per_second IS NOT NULL OR max_leased_per_key IS NOT NULL
               OR rate_per_key_per_second IS NOT NULL
               OR EXISTS (SELECT 1 FROM sq_fair_keys AS k
                          WHERE k.queue = :queue AND (k.max_leased IS NOT NULL OR k.rate_per_second IS NOT NULL)))
WHERE name = :queue

-- fragment: key_walk
-- The first :walk poppable items of the queue in pop order (ready along sq_items_ready, leases that
-- ran out along sq_items_lapsed; neither locked nor counted as taken), by key ('' for unkeyed
-- items): `keys`, each key with the place of its first item in the walk.
WITH done AS (SELECT NULL::uuid AS id WHERE false),  -- for group_head: nothing completed here
walked AS (
    SELECT u.seq, COALESCE(u.fairness_key, '') AS k,
           row_number() OVER (ORDER BY u.rank_priority DESC, u.fair_rank, u.created_at, u.seq) AS place
    FROM (
        SELECT r.* FROM (
            SELECT x.seq, x.rank_priority, x.fair_rank, x.created_at, x.fairness_key FROM sq_items AS x
            WHERE x.queue = :queue AND x.status = 'ready' AND x.visible_at <= COALESCE(:now::timestamptz, now())
              AND x.created_at >= (
                  -- include: retained
              )
              AND NOT EXISTS (SELECT 1 FROM sq_queues WHERE name = :queue AND paused)
              -- include: group_head
            ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
            LIMIT :walk
        ) AS r
        UNION ALL
        SELECT l.* FROM (
            SELECT x.seq, x.rank_priority, x.fair_rank, x.created_at, x.fairness_key FROM sq_items AS x
            WHERE x.queue = :queue AND x.status = 'leased' AND x.visible_at <= COALESCE(:now::timestamptz, now())
              AND x.created_at >= (
                  -- include: retained
              )
              AND NOT EXISTS (SELECT 1 FROM sq_queues WHERE name = :queue AND paused)
              AND x.attempts < (SELECT max_attempts FROM sq_queues WHERE name = :queue)
              -- include: group_head
            ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
            LIMIT :walk
        ) AS l
    ) AS u
),
keys AS (
    SELECT w.k, min(w.place) AS first FROM walked AS w WHERE w.place <= :walk GROUP BY w.k
)

-- name: lock_keys
-- A careful pop's turn on the keys it takes from (store.py: _pop_by_keys), instead of a turn on
-- the queue: the rows of the keys of its first items (key_walk), in the order of each key's first
-- item, at most :max_keys of them, locked. SKIP LOCKED: a key another popper holds is passed over,
-- never waited on, so poppers of one queue take different keys side by side, and never wait on
-- one another in a cycle. A key with no row yet is passed over too (add_keys makes it). Each key
-- comes with its cap (its own max_leased, else the queue's max_leased_per_key; NULL: none), its rate
-- (its own rate_per_second, else the queue's rate_per_key_per_second; NULL: none) and bucket (as
-- locked: the latest). Which of their items the pop takes, key_items reads after the locks.
-- include: key_walk
-- The keys are put in order, then each one's row is looked up and locked in turn (a subquery that
-- locks is never merged into a join, so this is a loop over the keys in order) until :max_keys
-- rows are locked: the rows of keys beyond are never read, where a join then sort would look every
-- walked key up first (200 lookups for 50 rows).
, ordered AS MATERIALIZED (
    SELECT k.k FROM keys AS k ORDER BY k.first
)
SELECT f.fairness_key AS key,
       COALESCE(f.max_leased, (SELECT q.max_leased_per_key FROM sq_queues AS q WHERE q.name = :queue)) AS cap,
       COALESCE(f.rate_per_second, (SELECT q.rate_per_key_per_second FROM sq_queues AS q WHERE q.name = :queue))
           AS rate,
       f.rate_tokens, f.rate_at
FROM ordered AS k
CROSS JOIN LATERAL (
    SELECT r.fairness_key, r.max_leased, r.rate_per_second, r.rate_tokens, r.rate_at FROM sq_fair_keys AS r
    WHERE r.queue = :queue AND r.fairness_key = k.k
    FOR UPDATE SKIP LOCKED
) AS f
LIMIT :max_keys

-- name: wait_keys
-- lock_keys, when other poppers held every key it walked: waits for one of them instead, so that a
-- queue of few keys is still handed out while others pop it. The pop holds no key's row while it
-- waits (lock_keys locked none), so no two pops wait on each other. It then walks again
-- (lock_keys, which does not pass over its own locks) to see what the pops before it left.
-- include: key_walk
SELECT f.fairness_key AS key FROM keys AS k
JOIN sq_fair_keys AS f ON f.queue = :queue AND f.fairness_key = k.k
ORDER BY f.fairness_key
LIMIT 1
FOR UPDATE OF f

-- name: add_keys
-- The row lock_keys finds missing: the unkeyed items' key ('') of a queue that never saw a key
-- (every key given to a push has its row: sq_fair_ranks). The row makes the queue fair: its pushes
-- are ranked from then on, in push order while they have one key.
INSERT INTO sq_fair_keys (queue, fairness_key, last_rank)
SELECT q.name, '', 0 FROM sq_queues AS q WHERE q.name = :queue
ON CONFLICT (queue, fairness_key) DO NOTHING

-- fragment: due_now
-- An item x that time lets a pop hand out now: visible, and not past its queue's retention.
AND x.visible_at <= COALESCE(:now::timestamptz, now())
AND x.created_at >= (
    -- include: retained
)

-- name: key_items
-- What a careful pop may take of the keys it holds the turns of (lock_keys locked their rows), read
-- after it took them, in a snapshot of its own: so it sees every lease the pops of those keys
-- before it committed, and none of the items they leased. (lock_keys' walk read the queue's front
-- before the locks: a pop that committed in between may have leased the very items it saw.)
-- For each key (:keys, '' for unkeyed items, with its :caps and the whole :tokens its bucket holds,
-- NULL: none): its unexpired leases, and its first poppable items in pop order, one more than its
-- room (domain/keys.py: pick tells from the extra one that its limit cut it), at most :take + 1;
-- a row with no seq for a key with none. place: the item's place in pop order among all returned.
-- Keyed items along sq_items_key_ready and sq_items_key_leased, unkeyed along sq_items_ready and
-- sq_items_lapsed; each branch runs only for its kind of key (a one-time filter on the key).
WITH done AS (SELECT NULL::uuid AS id WHERE false),  -- for group_head: nothing completed here
turns AS (
    SELECT t.key, t.cap, t.tokens
    FROM unnest(:keys::text[], :caps::integer[], :tokens::integer[]) AS t(key, cap, tokens)
),
-- All the keys' leases in one pass, as its own step (MATERIALIZED: counted once, not again for
-- each branch below that reads the count): a seek of sq_items_key_leased per key, the unkeyed
-- items' a range of sq_items_lapsed.
leases AS MATERIALIZED (
    SELECT i.fairness_key AS key, count(*) AS leased FROM sq_items AS i
    WHERE i.queue = :queue AND i.status = 'leased' AND i.fairness_key IS NOT NULL
      AND i.fairness_key = ANY (:keys::text[]) AND i.visible_at > COALESCE(:now::timestamptz, now())
    GROUP BY i.fairness_key
    UNION ALL
    SELECT '' AS key, count(*) AS leased FROM sq_items AS i
    WHERE '' = ANY (:keys::text[]) AND i.queue = :queue AND i.status = 'leased' AND i.fairness_key IS NULL
      AND i.visible_at > COALESCE(:now::timestamptz, now())
),
counted AS MATERIALIZED (
    SELECT t.key, COALESCE(l.leased, 0) AS leased,
           LEAST(GREATEST(COALESCE(t.cap - COALESCE(l.leased, 0), :take), 0), COALESCE(t.tokens, :take), :take) + 1
               AS reach
    FROM turns AS t LEFT JOIN leases AS l ON l.key = t.key
)
SELECT c.key, c.leased, w.seq,
       row_number() OVER (ORDER BY w.rank_priority DESC NULLS LAST, w.fair_rank, w.created_at, w.seq) AS place
FROM counted AS c
LEFT JOIN LATERAL (
    SELECT u.* FROM (
        (SELECT x.seq, x.rank_priority, x.fair_rank, x.created_at FROM sq_items AS x
         WHERE c.key <> '' AND x.queue = :queue AND x.fairness_key = c.key AND x.status = 'ready'
           -- include: due_now
           -- include: group_head
         ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
         LIMIT c.reach)
        UNION ALL
        (SELECT x.seq, x.rank_priority, x.fair_rank, x.created_at FROM sq_items AS x
         WHERE c.key = '' AND x.queue = :queue AND x.fairness_key IS NULL AND x.status = 'ready'
           -- include: due_now
           -- include: group_head
         ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
         LIMIT c.reach)
        UNION ALL
        (SELECT x.seq, x.rank_priority, x.fair_rank, x.created_at FROM sq_items AS x
         WHERE c.key <> '' AND x.queue = :queue AND x.fairness_key = c.key AND x.status = 'leased'
           -- include: due_now
           AND x.attempts < (SELECT max_attempts FROM sq_queues WHERE name = :queue)
           -- include: group_head
         ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
         LIMIT c.reach)
        UNION ALL
        (SELECT x.seq, x.rank_priority, x.fair_rank, x.created_at FROM sq_items AS x
         WHERE c.key = '' AND x.queue = :queue AND x.fairness_key IS NULL AND x.status = 'leased'
           -- include: due_now
           AND x.attempts < (SELECT max_attempts FROM sq_queues WHERE name = :queue)
           -- include: group_head
         ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq
         LIMIT c.reach)
    ) AS u
    WHERE NOT EXISTS (SELECT 1 FROM sq_queues WHERE name = :queue AND paused)
    ORDER BY u.rank_priority DESC, u.fair_rank, u.created_at, u.seq
    LIMIT c.reach
) AS w ON true
ORDER BY place
