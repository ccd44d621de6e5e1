-- simplequeue's functions for PostgreSQL, as they are now: every `simplequeue migrate` applies this
-- file after the pending migrations, in their transaction (store/postgres/migrate.py), so that the
-- database runs this release's code whatever version it came from. Migrations hold tables, columns
-- and data moves only; a function lives here, once. Each statement may run again: CREATE OR
-- REPLACE, a guarded CREATE TYPE, REVOKE. What CREATE OR REPLACE cannot do (change a function's
-- arguments or its result, drop a function) is a migration's: it drops the old one, and this file
-- creates the new (0007 dropped sq_push_rows' and sq_push_planned's signatures without attributes).
-- An entry point granted to applications is renamed rather than dropped, so that this file can pass
-- its grants on before it drops it (0022, sq_push_v21 at the end).
--
-- The push as SQL functions, so that a caller can push inside its own transaction (the item exists
-- if and only if the caller's transaction commits), and the service pushes through the very same
-- code (one behaviour, one conformance suite).
--
--   sq_push_rows   the push itself; the service calls it with arrays and its own clock (tests bind
--                  a fake one). Not granted to anyone: only the owner and the functions below run it.
--   sq_push_batch  sq_push_rows for callers: a JSON array of items, checked by the service's rules.
--   sq_push        one item, with named arguments.
--
-- sq_push and sq_push_batch are SECURITY DEFINER with a fixed search_path: a role that may only
-- EXECUTE them (GRANT EXECUTE ON FUNCTION sq_push(text, json, integer, double precision, text, text,
-- uuid, timestamptz, timestamptz, text), sq_push_batch(json), sq_push_limits() TO app) pushes
-- without any right on the tables. EXECUTE is revoked from PUBLIC, since PostgreSQL grants it to
-- everyone by default. CREATE OR REPLACE keeps a function's grants, so applying this file again
-- keeps an application's GRANT EXECUTE.
--
-- NOTIFY (sq_ready_token, sq_items_notify_ready and its trigger on sq_items) names no queue: see
-- store/postgres/listen.py.

-- What sq_push and sq_push_batch answer for each item: its id (the item's that holds a matching
-- dedup key or remembered id, when created is false). A type rather than RETURNS TABLE, whose
-- columns would be parameters and clash with sq_push's own `id`. A type cannot be replaced: a
-- change to it is a migration's (DROP TYPE ... CASCADE), and this file then makes it anew.
DO $$
BEGIN
    CREATE TYPE sq_pushed AS (id uuid, created boolean);
EXCEPTION WHEN duplicate_object THEN NULL;
END
$$;

-- An item's rank, the static key pops sort priorities by (domain/aging.py): its priority, less the
-- whole periods of p_aging seconds from the epoch to its created_at when its queue ages priorities
-- (p_aging not NULL). bigint: with a period of a second, that count passes int4 in 2038. A SQL
-- function, inlined where it is called.
CREATE OR REPLACE FUNCTION sq_rank_priority(p_priority integer, p_created_at timestamptz, p_aging integer)
RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN p_aging IS NULL THEN p_priority::bigint
                ELSE p_priority - floor(extract(epoch FROM p_created_at) / p_aging)::bigint END
$$;

-- A queue is registered by an INSERT only where a look-up finds none: ON CONFLICT DO NOTHING alone
-- builds and checks the whole row before it finds the conflict, about 80 us a push for a queue that
-- is there (nearly every push), five times the look-up.
-- The push, in the order every engine follows: queues registered, dedup keys claimed, ordered groups
-- locked, producers' ids claimed, items inserted; then each item's answer, in order.
--   Of items that repeat a dedup key, or a remembered id of their queue (remember[n]: the producer
--   chose the id and gave no dedup key), the first speaks for the others, which answer as its
--   duplicates. An item whose key another item holds answers with that item, created = false. An
--   item whose remembered id an item of its queue holds (live, or finished within the queue's
--   dedup window) is a retry of it. Any other item left out (its id is another queue's, or appears
--   twice) raises SQ409 (the whole call is undone), or answers a row of NULLs with skip_existing.
-- now_ is NULL except under tests; the clock is clock_timestamp(), not now(): in a long caller
-- transaction now() is the transaction's start, which would backdate items and shorten delays.
-- p_attributes: each item's message attributes (SQS's MessageAttributes, the HTTP API's
-- `attributes`) as the JSON text the service writes (domain/attributes.py), by place (NULL, or a
-- shorter array: none). sq_push_batch and sq_push push none: they call sq_push_rows by position.
-- p_fairness_keys: each item's tenant, by place (NULL: none); sq_fair_ranks ranks the items.
-- Each item's rank (sq_rank_priority) is its priority unless its queue ages priorities (one probe
-- of sq_queues answers that for the call).
CREATE OR REPLACE FUNCTION sq_push_rows(
    p_ids uuid[], p_queues text[], p_payloads text[], p_created_ats timestamptz[], p_priorities integer[],
    p_groups text[], p_dedup_keys text[], p_delays double precision[], p_not_befores timestamptz[],
    p_remember boolean[], p_skip_existing boolean, p_now timestamptz, p_attributes text[] DEFAULT NULL,
    p_fairness_keys text[] DEFAULT NULL
) RETURNS TABLE (id uuid, created_at timestamptz, created boolean)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := COALESCE(p_now, pg_catalog.clock_timestamp());
    v_keyed boolean := array_remove(p_dedup_keys, NULL) <> '{}';
    v_ids uuid[];
    v_ats timestamptz[];
    v_created boolean[];
    v_id uuid;
    v_ranks double precision[];  -- by place; NULL: no queue of the call is fair (every rank 0)
    v_rank_priorities bigint[] := p_priorities;  -- by place (sq_rank_priority)
BEGIN
    -- Every branch's queues first (see above: a look-up, and an INSERT only for a new one).
    INSERT INTO sq_queues (name, created_at)
    SELECT DISTINCT q, v_now FROM unnest(p_queues) AS q
    WHERE NOT EXISTS (SELECT 1 FROM sq_queues AS e WHERE e.name = q)
    ON CONFLICT (name) DO NOTHING;
    IF EXISTS (SELECT 1 FROM sq_queues AS a WHERE a.name = ANY (p_queues) AND a.priority_aging_seconds IS NOT NULL) THEN
        SELECT array_agg(sq_rank_priority(t.pr, t.c, a.priority_aging_seconds) ORDER BY t.o) INTO v_rank_priorities
        FROM unnest(p_queues, p_priorities, p_created_ats) WITH ORDINALITY AS t(q, pr, c, o)
        JOIN sq_queues AS a ON a.name = t.q;
    END IF;
    -- Fair ranks only for a call with keys, or into a queue that saw some (a probe of sq_fair_keys per
    -- queue of the call, sq_keyed_queue): every other push ranks 0 without a call.
    IF p_fairness_keys IS NOT NULL OR sq_keyed_queue(p_queues) THEN
        v_ranks := sq_fair_ranks(p_queues, p_fairness_keys, v_rank_priorities, v_now);
    END IF;
    IF cardinality(p_ids) = 1 AND p_dedup_keys[1] IS NULL AND p_groups[1] IS NULL AND p_remember[1] IS NOT TRUE THEN
        -- One plain item (an outbox's push, a push the service's coalescer found alone): the row
        -- the common case below writes, without its arrays' bookkeeping, which is about half of
        -- that statement's time for one item.
        INSERT INTO sq_items (id, queue, payload, created_at, visible_at, priority, attributes, fairness_key,
                              fair_rank, rank_priority)
        VALUES (p_ids[1], p_queues[1], p_payloads[1]::json, p_created_ats[1],
                GREATEST(p_not_befores[1], v_now + p_delays[1] * interval '1 second'), p_priorities[1],
                p_attributes[1], p_fairness_keys[1], COALESCE(v_ranks[1], 0), v_rank_priorities[1])
        ON CONFLICT (id) DO NOTHING
        RETURNING sq_items.id INTO v_id;
        v_ids := ARRAY[v_id];
        v_ats := ARRAY[CASE WHEN v_id IS NOT NULL THEN p_created_ats[1] END];
        v_created := ARRAY[CASE WHEN v_id IS NOT NULL THEN true END];
    ELSIF NOT v_keyed AND NOT true = ANY (p_remember) AND array_remove(p_groups, NULL) = '{}' THEN
        -- The common case (no dedup keys, no remembered ids, no ordered groups): one statement. An
        -- id already there, or given twice, goes in (and answers) once; the rest answer NULL.
        WITH inserted AS (
            INSERT INTO sq_items (id, queue, payload, created_at, visible_at, priority, attributes, fairness_key,
                                  fair_rank, rank_priority)
            SELECT t.i, t.q, t.p::json, t.c, GREATEST(t.nb, v_now + t.d * interval '1 second'), t.pr, p_attributes[t.o],
                   p_fairness_keys[t.o], COALESCE(v_ranks[t.o], 0), v_rank_priorities[t.o]
            FROM unnest(p_ids, p_queues, p_payloads, p_created_ats, p_priorities, p_delays, p_not_befores)
                WITH ORDINALITY AS t(i, q, p, c, pr, d, nb, o)
            ORDER BY t.o
            ON CONFLICT (id) DO NOTHING
            RETURNING id
        )
        SELECT array_agg(CASE WHEN s.went_in THEN s.i END ORDER BY s.o),
               array_agg(CASE WHEN s.went_in THEN s.c END ORDER BY s.o),
               array_agg(CASE WHEN s.went_in THEN true END ORDER BY s.o)
        INTO v_ids, v_ats, v_created
        FROM (
            SELECT t.o, t.i, t.c,
                   t.i IN (SELECT id FROM inserted) AND row_number() OVER (PARTITION BY t.i ORDER BY t.o) = 1
                       AS went_in
            FROM unnest(p_ids, p_created_ats) WITH ORDINALITY AS t(i, c, o)
        ) AS s;
    ELSE
        SELECT r.ids, r.ats, r.created INTO v_ids, v_ats, v_created
        FROM sq_push_planned(
            p_ids, p_queues, p_payloads, p_created_ats, p_priorities, p_groups, p_dedup_keys, p_delays,
            p_not_befores, p_remember, p_skip_existing, v_now, p_attributes, p_fairness_keys, v_ranks,
            v_rank_priorities
        ) AS r;
    END IF;
    IF NOT p_skip_existing AND array_position(v_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'SQ409',
            MESSAGE = format('simplequeue: item id %s is already taken by another item',
                             p_ids[array_position(v_ids, NULL)]);
    END IF;
    RETURN QUERY SELECT * FROM unnest(v_ids, v_ats, v_created);
END
$$;

-- The fair ranks of a push's items, by place (start-time fair queueing; docs/flow-control.md), or
-- NULL when no queue of the call is fair: none of its items has a key and the queue never saw one
-- (one probe of sq_fair_keys), so such a queue's items all rank 0 and pop as they always did. In a
-- fair queue, unkeyed items are one more key, ''. The items of one key of a queue take consecutive
-- ranks after the later of the key's last rank and the queue's virtual time at the priority of the
-- key's first item: one less than the lowest rank of the queue's due ready items of that priority
-- (one seek of sq_items_ready), or, with none, the highest rank the queue handed out
-- (sq_fair_keys_clock), so that a key that was idle starts level with the front of the queue, with
-- no credit saved up (domain/fairness.py).
-- The keys' rows are locked in sorted order, so that two pushes never wait on each other's locks
-- in opposite orders; a concurrent push of the same key waits, then reads the rank it left.
-- Whether some queue of `p_queues` (a push's, one entry per item) has fairness keys: one probe of
-- sq_fair_keys' primary key per distinct queue. As `f.queue = ANY (p_queues)`, a batch of 500
-- items into one queue was planned as a scan of every key of every queue (each keyed push
-- updates its keys' rows, so that table holds many row versions between vacuums): 80 ms a push.
CREATE OR REPLACE FUNCTION sq_keyed_queue(p_queues text[]) RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (
        SELECT 1 FROM (SELECT DISTINCT u.q FROM unnest(p_queues) AS u(q)) AS u
        -- (In key order, which the primary key gives: a scan that hopes to meet the queue early
        -- never looks cheaper than the seek.)
        CROSS JOIN LATERAL (
            SELECT 1 FROM sq_fair_keys AS f WHERE f.queue = u.q ORDER BY f.fairness_key LIMIT 1
        ) AS k
    )
$$;

CREATE OR REPLACE FUNCTION sq_fair_ranks(
    p_queues text[], p_fairness_keys text[], p_priorities bigint[], p_now timestamptz
) RETURNS double precision[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_queues text[];    -- the call's keys of fair queues, sorted: queue, key ('' for none),
    v_keys text[];
    v_counts bigint[];  -- how many of the call's items have it,
    v_clocks double precision[];  -- and the virtual time its items start after
    v_ranks double precision[];
BEGIN
    -- p_fairness_keys is NULL when the caller gives none (push, sq_push_rows' own default).
    IF COALESCE(array_remove(p_fairness_keys, NULL), '{}') = '{}'
       AND NOT sq_keyed_queue(p_queues) THEN
        RETURN NULL;
    END IF;
    -- A queue is fair when the call gives it a key, or it saw one before.
    SELECT array_agg(t.q ORDER BY t.q, t.k), array_agg(t.k ORDER BY t.q, t.k), array_agg(t.n ORDER BY t.q, t.k),
           array_agg(COALESCE(
               (SELECT x.fair_rank - 1 FROM sq_items AS x
                WHERE x.queue = t.q AND x.status = 'ready' AND x.rank_priority = t.pr AND x.visible_at <= p_now
                ORDER BY x.rank_priority DESC, x.fair_rank
                LIMIT 1),
               (SELECT f.last_rank FROM sq_fair_keys AS f WHERE f.queue = t.q ORDER BY f.last_rank DESC LIMIT 1),
               0) ORDER BY t.q, t.k)
    INTO v_queues, v_keys, v_counts, v_clocks
    FROM (
        SELECT u.q, COALESCE(u.k, '') AS k, u.pr,
               row_number() OVER (PARTITION BY u.q, COALESCE(u.k, '') ORDER BY u.o) AS nth,
               count(*) OVER (PARTITION BY u.q, COALESCE(u.k, '')) AS n
        FROM unnest(p_queues, p_fairness_keys, p_priorities) WITH ORDINALITY AS u(q, k, pr, o)
    ) AS t
    WHERE t.nth = 1
      AND (EXISTS (SELECT 1 FROM unnest(p_queues, p_fairness_keys) AS g(q, k) WHERE g.q = t.q AND g.k IS NOT NULL)
           OR EXISTS (SELECT 1 FROM sq_fair_keys AS f WHERE f.queue = t.q));
    INSERT INTO sq_fair_keys (queue, fairness_key, last_rank)
    SELECT c.q, c.k, 0 FROM unnest(v_queues, v_keys) AS c(q, k) ORDER BY c.q, c.k
    ON CONFLICT (queue, fairness_key) DO NOTHING;
    -- The call's keys' rows, locked in (queue, key) order, so that two pushes never wait on each
    -- other's locks in opposite orders: v_queues and v_keys are in that order, and the rows are
    -- looked up and locked one at a time in it (a subquery that locks is never merged into a join,
    -- so this is a loop over the arrays). Joined and sorted instead, with sorts discouraged (the
    -- service's sessions), the plan read every key of every queue once per key of the call.
    PERFORM count(*) FROM (
        SELECT 1 FROM unnest(v_queues, v_keys) AS c(q, k)
        CROSS JOIN LATERAL (
            SELECT 1 FROM sq_fair_keys AS f WHERE f.queue = c.q AND f.fairness_key = c.k FOR UPDATE
        ) AS f
    ) AS locked;
    -- A key's items are 1/weight apart: a key of weight 2 takes two turns to another's one.
    WITH moved AS (
        UPDATE sq_fair_keys AS f SET last_rank = GREATEST(f.last_rank, c.v) + c.n / f.weight
        FROM unnest(v_queues, v_keys, v_counts, v_clocks) AS c(q, k, n, v)
        WHERE f.queue = c.q AND f.fairness_key = c.k
        RETURNING f.queue AS q, f.fairness_key AS k, f.last_rank - c.n / f.weight AS base, f.weight AS w
    )
    SELECT array_agg(s.rank ORDER BY s.o) INTO v_ranks
    FROM (
        SELECT u.o, m.base + row_number() OVER (PARTITION BY u.q, COALESCE(u.k, '') ORDER BY u.o) / m.w AS rank
        FROM unnest(p_queues, p_fairness_keys) WITH ORDINALITY AS u(q, k, o)
        LEFT JOIN moved AS m ON m.q = u.q AND m.k = COALESCE(u.k, '')
    ) AS s;
    RETURN v_ranks;
END
$$;

-- sq_push_rows for the items that need more than one INSERT: dedup keys, remembered ids or ordered
-- groups. The answers, by place; the caller (sq_push_rows) refuses or skips what is NULL.
CREATE OR REPLACE FUNCTION sq_push_planned(
    p_ids uuid[], p_queues text[], p_payloads text[], p_created_ats timestamptz[], p_priorities integer[],
    p_groups text[], p_dedup_keys text[], p_delays double precision[], p_not_befores timestamptz[],
    p_remember boolean[], p_skip_existing boolean, v_now timestamptz, p_attributes text[],
    p_fairness_keys text[], p_ranks double precision[], p_rank_priorities bigint[],
    OUT ids uuid[], OUT ats timestamptz[], OUT created boolean[]
)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_keyed boolean := array_remove(p_dedup_keys, NULL) <> '{}';
    v_leaders bigint[];      -- by place: the place of the item that speaks for it (NULL: itself)
    v_taken boolean[];       -- by place: this call took the item's dedup key
    v_winner_ids uuid[];     -- by place: the item holding the key this item's leader lost
    v_winner_ats timestamptz[];
    v_fresh boolean[];       -- by place: to insert
    v_inserted uuid[];
    v_refused bigint;
BEGIN
    IF v_keyed OR true = ANY (p_remember) THEN
        SELECT array_agg(s.leader ORDER BY s.o) INTO v_leaders
        FROM (
            SELECT t.o,
                   CASE
                       WHEN t.k IS NOT NULL THEN min(t.o) OVER (PARTITION BY t.q, t.k)
                       WHEN t.r AND first_value(t.q) OVER w = t.q THEN first_value(t.o) OVER w
                       ELSE t.o
                   END AS leader
            FROM unnest(p_queues, p_dedup_keys, p_ids, p_remember) WITH ORDINALITY AS t(q, k, i, r, o)
            WINDOW w AS (PARTITION BY t.i, t.r ORDER BY t.o)
        ) AS s;
    END IF;

    IF v_keyed THEN
        -- A key is taken when new, or when its window has passed: a window that runs from the
        -- send (the queue's dedup_window_from) starts here, one that runs from the finish starts
        -- when its item finishes (NULL until then). A key
        -- being taken by a concurrent push makes this wait for that push's commit; the next
        -- statement (a new snapshot) then reads the winner.
        WITH taken AS (
            INSERT INTO sq_dedup (queue, dedup_key, item_id, created_at, expires_at)
            SELECT t.q, t.k, t.i, t.c,
                   CASE WHEN q.dedup_window_from = 'send'
                        THEN v_now + q.dedup_window_seconds * interval '1 second' END
            FROM unnest(p_queues, p_dedup_keys, p_ids, p_created_ats) WITH ORDINALITY AS t(q, k, i, c, o)
            JOIN sq_queues AS q ON q.name = t.q
            WHERE t.k IS NOT NULL AND v_leaders[t.o] = t.o
            ON CONFLICT (queue, dedup_key) DO UPDATE
            SET item_id = excluded.item_id, created_at = excluded.created_at, expires_at = excluded.expires_at
            WHERE sq_dedup.expires_at <= v_now
            RETURNING queue, dedup_key
        )
        SELECT array_agg((tk.queue IS NOT NULL) ORDER BY t.o) INTO v_taken
        FROM unnest(p_queues, p_dedup_keys) WITH ORDINALITY AS t(q, k, o)
        LEFT JOIN taken AS tk ON tk.queue = t.q AND tk.dedup_key = t.k AND v_leaders[t.o] = t.o;

        SELECT array_agg(d.item_id ORDER BY t.o), array_agg(d.created_at ORDER BY t.o)
        INTO v_winner_ids, v_winner_ats
        FROM unnest(p_queues, p_dedup_keys, v_taken) WITH ORDINALITY AS t(q, k, tk, o)
        LEFT JOIN sq_dedup AS d
            ON d.queue = t.q AND d.dedup_key = t.k AND v_leaders[t.o] = t.o AND NOT t.tk;
    END IF;

    -- To insert: the items that speak for themselves, except those whose key another item holds;
    -- an id that two of them share goes in once (or refuses the call, below).
    SELECT array_agg(s.nth = 1 ORDER BY s.o), count(*) FILTER (WHERE s.nth > 1)
    INTO v_fresh, v_refused
    FROM (
        SELECT t.o,
               CASE WHEN COALESCE(v_leaders[t.o], t.o) = t.o AND v_winner_ids[t.o] IS NULL
                    THEN row_number() OVER (
                        PARTITION BY t.i, COALESCE(v_leaders[t.o], t.o) = t.o AND v_winner_ids[t.o] IS NULL
                        ORDER BY t.o)
               END AS nth
        FROM unnest(p_ids) WITH ORDINALITY AS t(i, o)
    ) AS s;
    IF v_refused > 0 AND NOT p_skip_existing THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ409', MESSAGE = 'simplequeue: an item id appears twice in this push';
    END IF;

    IF array_remove(p_groups, NULL) <> '{}' THEN
        -- Pushes into one ordered group take turns, so that a group's seq order is its commit
        -- order. Sorted, so that two pushes never wait on each other's locks in opposite orders.
        PERFORM count(pg_advisory_xact_lock(hashtext(g.q), hashtext(g.g)))
        FROM (
            SELECT DISTINCT t.q, t.g
            FROM unnest(p_queues, p_groups, v_fresh) AS t(q, g, f)
            WHERE t.f AND t.g IS NOT NULL
            ORDER BY 1, 2
        ) AS g;
    END IF;

    -- A producer's id that is its item's idempotency key is claimed in sq_client_ids first: a new
    -- id, or one whose window after its item finished has passed, unless an item holds it now.
    -- Only claimed ones go in. Concurrent pushes of one id wait for each other on the claim's
    -- primary key; a completion finishing the id's item holds that row too, and the push then
    -- reads the window it set. The look-up in sq_items is a scalar subquery (a seek per id), never
    -- an anti-join that may be planned as a hash join over a scan of sq_items.
    WITH claimed AS (
        INSERT INTO sq_client_ids (id, queue, created_at)
        SELECT t.i, t.q, t.c
        FROM unnest(p_ids, p_queues, p_created_ats, p_remember, v_fresh) AS t(i, q, c, r, f)
        WHERE t.f AND t.r AND (SELECT s.seq FROM sq_items AS s WHERE s.id = t.i) IS NULL
        ON CONFLICT (id) DO UPDATE
        SET queue = excluded.queue, created_at = excluded.created_at, expires_at = NULL
        WHERE sq_client_ids.expires_at <= v_now
        RETURNING id
    ), inserted AS (
        INSERT INTO sq_items (id, queue, payload, created_at, visible_at, priority, group_key, dedup_key, remember_id,
                              attributes, fairness_key, fair_rank, rank_priority)
        SELECT t.i, t.q, t.p::json, t.c, GREATEST(t.nb, v_now + t.d * interval '1 second'), t.pr, t.g, t.k, t.r,
               p_attributes[t.o], p_fairness_keys[t.o], COALESCE(p_ranks[t.o], 0), p_rank_priorities[t.o]
        FROM unnest(p_ids, p_queues, p_payloads, p_created_ats, p_priorities, p_groups, p_dedup_keys,
                    p_delays, p_not_befores, p_remember, v_fresh) WITH ORDINALITY
            AS t(i, q, p, c, pr, g, k, d, nb, r, f, o)
        WHERE t.f AND (NOT t.r OR t.i IN (SELECT id FROM claimed))
        ORDER BY t.o
        ON CONFLICT (id) DO NOTHING
        RETURNING id
    )
    SELECT array_agg(id) INTO v_inserted FROM inserted;

    -- Each item's answer. An item that speaks for itself: the winner of its key; created, if it
    -- went in; a retry of what holds its remembered id (the item's own row first, else a claim
    -- whose window has not passed), if that is of its queue; else nothing. The others: their
    -- leader's answer, as duplicates.
    WITH t AS (
        SELECT t.*, t.wi IS NULL AND t.f AND n.i IS NOT NULL AS went_in
        FROM unnest(p_ids, p_queues, p_created_ats, p_remember, v_winner_ids, v_winner_ats, v_fresh)
            WITH ORDINALITY AS t(i, q, c, r, wi, wa, f, o)
        LEFT JOIN (SELECT DISTINCT unnest(v_inserted) AS i) AS n ON n.i = t.i
        WHERE COALESCE(v_leaders[t.o], t.o) = t.o
    ), own AS (
        SELECT t.o,
               CASE WHEN t.wi IS NOT NULL THEN t.wi WHEN t.went_in OR h.at IS NOT NULL THEN t.i END AS i,
               CASE WHEN t.wi IS NOT NULL THEN t.wa WHEN t.went_in THEN t.c ELSE h.at END AS at,
               t.went_in AS created
        FROM t
        LEFT JOIN LATERAL (
            -- '-infinity' marks a holder of another queue, so that a claim never speaks over an item.
            SELECT NULLIF(COALESCE(
                (SELECT CASE WHEN s.queue = t.q THEN s.created_at ELSE '-infinity' END
                 FROM sq_items AS s WHERE s.id = t.i),
                (SELECT CASE WHEN k.queue = t.q THEN k.created_at ELSE '-infinity' END
                 FROM sq_client_ids AS k
                 WHERE k.id = t.i AND (k.expires_at IS NULL OR k.expires_at > v_now))
            ), '-infinity') AS at
        ) AS h ON t.r AND t.wi IS NULL AND NOT t.went_in
    )
    SELECT array_agg(a.i ORDER BY p.o), array_agg(a.at ORDER BY p.o),
           array_agg(CASE WHEN a.i IS NULL THEN NULL WHEN a.o = p.o THEN a.created ELSE false END ORDER BY p.o)
    INTO ids, ats, created
    FROM generate_series(1, cardinality(p_ids)) AS p(o)
    JOIN own AS a ON a.o = COALESCE(v_leaders[p.o], p.o);
END
$$;

-- sq_push_rows for callers: a JSON array of items (each an object: queue and payload, and as they
-- wish priority, delay_seconds, not_before, group_key, dedup_key, fairness_key, id, created_at), checked by the
-- service's rules before anything is written. Refusals raise SQLSTATE SQ400 (bad input), SQ413 (a
-- payload over the limit) or SQ409 (an id held by another queue's item), each a one-line message
-- that names the item; a dedup key or remembered id that matches answers created = false and
-- never raises, since an error would abort the caller's transaction.
CREATE OR REPLACE FUNCTION sq_push_batch(items json)
RETURNS SETOF sq_pushed
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    v_max_bytes integer;
    v_max_depth integer;
    v_item json;
    v_n integer := 0;
    v_where text;
    v_payload text;
    v_key text;
    v_ids uuid[] := '{}';
    v_queues text[] := '{}';
    v_payloads text[] := '{}';
    v_created_ats timestamptz[] := '{}';
    v_priorities integer[] := '{}';
    v_groups text[] := '{}';
    v_dedup_keys text[] := '{}';
    v_delays double precision[] := '{}';
    v_not_befores timestamptz[] := '{}';
    v_remember boolean[] := '{}';
    v_fairness_keys text[] := '{}';
    v_now timestamptz := clock_timestamp();
BEGIN
    IF items IS NULL OR json_typeof(items) <> 'array' THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ400', MESSAGE = 'simplequeue: items must be a JSON array of objects';
    END IF;
    IF json_array_length(items) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ400', MESSAGE = 'simplequeue: a push takes at most 1000 items';
    END IF;
    SELECT max(value::integer) FILTER (WHERE name = 'max_payload_bytes'),
           max(value::integer) FILTER (WHERE name = 'max_payload_depth')
    INTO v_max_bytes, v_max_depth
    FROM sq_settings;

    -- One block (one subtransaction) for the call: a value that does not cast names its item and
    -- field from v_where and v_key, which the handler still sees.
    BEGIN
        FOR v_item IN SELECT e FROM json_array_elements(items) AS e LOOP
            v_where := format('items[%s]', v_n);
            IF json_typeof(v_item) IS DISTINCT FROM 'object' THEN
                RAISE EXCEPTION USING ERRCODE = 'SQ400', MESSAGE = format('simplequeue: %s must be an object', v_where);
            END IF;
            v_key := 'payload';
            IF v_item -> 'payload' IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = 'SQ400', MESSAGE = format('simplequeue: %s.payload is missing', v_where);
            END IF;
            v_payload := (v_item -> 'payload')::text;
            IF octet_length(v_payload) > v_max_bytes THEN
                RAISE EXCEPTION USING ERRCODE = 'SQ413', MESSAGE = format(
                    'simplequeue: %s.payload is %s bytes as JSON; the limit is %s',
                    v_where, octet_length(v_payload), v_max_bytes);
            END IF;
            IF strpos(v_payload, '\u0000') > 0 THEN
                RAISE EXCEPTION USING ERRCODE = 'SQ400',
                    MESSAGE = format('simplequeue: %s.payload must not contain NUL characters (\u0000)', v_where);
            END IF;
            IF strpos(v_payload, '\u') > 0 THEN
                -- An escape that is no character (a lone surrogate) fails here, named as the payload's,
                -- rather than later when a field of the item is read (->> parses the whole item).
                PERFORM v_payload::jsonb;
            END IF;
            v_key := 'queue';
            IF json_typeof(v_item -> 'queue') IS DISTINCT FROM 'string'
               OR (v_item ->> 'queue') !~ '^[A-Za-z0-9._-]{1,128}$' THEN
                RAISE EXCEPTION USING ERRCODE = 'SQ400',
                    MESSAGE = format('simplequeue: %s.queue must be 1..128 characters of [A-Za-z0-9._-]', v_where);
            END IF;
            -- Counting brackets bounds the depth from above, so most payloads skip the walk.
            IF length(v_payload) - length(translate(v_payload, '[{', '')) > v_max_depth
               AND jsonb_path_exists(v_payload::jsonb, format(
                   'strict $.**{%s} ? (@.type() == "object" || @.type() == "array")', v_max_depth)::jsonpath) THEN
                RAISE EXCEPTION USING ERRCODE = 'SQ400', MESSAGE = format(
                    'simplequeue: %s.payload nests arrays and objects deeper than %s levels', v_where, v_max_depth);
            END IF;
            v_key := 'priority';
            v_priorities := v_priorities || COALESCE(sq_checked_number(v_item -> 'priority', v_where || '.priority', true)::integer, 0);
            v_key := 'delay_seconds';
            v_delays := v_delays || COALESCE(sq_checked_number(v_item -> 'delay_seconds', v_where || '.delay_seconds', false), 0);
            IF NOT v_delays[v_n + 1] BETWEEN 0 AND 31536000 THEN
                RAISE EXCEPTION USING ERRCODE = 'SQ400',
                    MESSAGE = format('simplequeue: %s.delay_seconds must be from 0 to 31536000', v_where);
            END IF;
            v_key := 'not_before';
            v_not_befores := v_not_befores || sq_checked_time(v_item -> 'not_before', v_where || '.not_before');
            v_key := 'created_at';
            v_created_ats := v_created_ats || COALESCE(sq_checked_time(v_item -> 'created_at', v_where || '.created_at'), v_now);
            v_key := 'group_key';
            v_groups := v_groups || sq_checked_key(v_item -> 'group_key', v_where || '.group_key');
            v_key := 'dedup_key';
            v_dedup_keys := v_dedup_keys || sq_checked_key(v_item -> 'dedup_key', v_where || '.dedup_key');
            v_key := 'fairness_key';
            v_fairness_keys := v_fairness_keys || sq_checked_key(v_item -> 'fairness_key', v_where || '.fairness_key');
            v_key := 'id';
            v_ids := v_ids || COALESCE((v_item ->> 'id')::uuid, gen_random_uuid());
            -- A producer's own id is its push's idempotency key, unless a dedup_key decides.
            v_remember := v_remember || (v_item ->> 'id' IS NOT NULL AND v_dedup_keys[v_n + 1] IS NULL);
            v_queues := v_queues || (v_item ->> 'queue');
            v_payloads := v_payloads || v_payload;
            v_n := v_n + 1;
        END LOOP;
    EXCEPTION
        WHEN data_exception OR invalid_text_representation OR untranslatable_character THEN
            RAISE EXCEPTION USING ERRCODE = 'SQ400',
                MESSAGE = format('simplequeue: %s.%s: %s', v_where, v_key, SQLERRM);
    END;

    RETURN QUERY
    SELECT r.id, r.created
    FROM sq_push_rows(v_ids, v_queues, v_payloads, v_created_ats, v_priorities, v_groups, v_dedup_keys,
                      v_delays, v_not_befores, v_remember, false, NULL, NULL, v_fairness_keys) AS r;
END
$$;

-- A group or dedup key as the service takes it (domain/names.py): text, not empty, no trailing
-- space (SQL Server's = ignores it), at most 128 UTF-16 code units (SQL Server's NVARCHAR(128)).
CREATE OR REPLACE FUNCTION sq_checked_key(value json, name text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_text text;
BEGIN
    IF value IS NULL OR json_typeof(value) = 'null' THEN
        RETURN NULL;
    END IF;
    IF json_typeof(value) <> 'string' THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ400', MESSAGE = format('simplequeue: %s must be text', name);
    END IF;
    v_text := value #>> '{}';
    IF v_text = '' OR v_text LIKE '% ' THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ400',
            MESSAGE = format('simplequeue: %s must not be empty or end with a space', name);
    END IF;
    IF char_length(v_text) + char_length(regexp_replace(v_text, '[^\U00010000-\U0010FFFF]', '', 'g')) > 128 THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ400', MESSAGE = format(
            'simplequeue: %s holds at most 128 UTF-16 code units (a character beyond U+FFFF counts two)', name);
    END IF;
    RETURN v_text;
END
$$;

-- A number as JSON has it (the text "5" is not one), whole if asked; casting it to the column's type
-- checks its range.
CREATE OR REPLACE FUNCTION sq_checked_number(value json, name text, whole boolean) RETURNS double precision
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF value IS NULL OR json_typeof(value) = 'null' THEN
        RETURN NULL;
    END IF;
    IF json_typeof(value) <> 'number' OR whole AND (value #>> '{}') !~ '^-?\d+$' THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ400',
            MESSAGE = format('simplequeue: %s must be %s', name, CASE WHEN whole THEN 'a whole number' ELSE 'a number' END);
    END IF;
    RETURN (value #>> '{}')::double precision;
END
$$;

-- A moment as the service takes it: ISO 8601 with a date, a time and an offset (not 'now', 'epoch',
-- 'infinity', nor a time in the session's zone).
CREATE OR REPLACE FUNCTION sq_checked_time(value json, name text) RETURNS timestamptz
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF value IS NULL OR json_typeof(value) = 'null' THEN
        RETURN NULL;
    END IF;
    IF json_typeof(value) <> 'string'
       OR (value #>> '{}') !~ '^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|z|[+-]\d{2}(:?\d{2})?)$' THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ400',
            MESSAGE = format('simplequeue: %s must be an ISO 8601 time with an offset', name);
    END IF;
    RETURN (value #>> '{}')::timestamptz;
END
$$;

-- One item, with named arguments: SELECT * FROM sq_push('emails', '{"order": 42}', dedup_key => 'order-42').
-- fairness_key came last (migration 0022), so that calls written before it still mean the same.
CREATE OR REPLACE FUNCTION sq_push(
    queue text, payload json, priority integer DEFAULT NULL, delay_seconds double precision DEFAULT NULL,
    group_key text DEFAULT NULL, dedup_key text DEFAULT NULL, id uuid DEFAULT NULL,
    created_at timestamptz DEFAULT NULL, not_before timestamptz DEFAULT NULL, fairness_key text DEFAULT NULL
) RETURNS SETOF sq_pushed
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
BEGIN
    IF sq_push.payload IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ400',
            MESSAGE = 'simplequeue: payload must not be NULL (the JSON null is ''null''::json)';
    END IF;
    RETURN QUERY
    SELECT b.id, b.created
    FROM sq_push_batch(json_build_array(json_build_object(
        'queue', sq_push.queue, 'payload', sq_push.payload, 'priority', sq_push.priority,
        'delay_seconds', sq_push.delay_seconds, 'group_key', sq_push.group_key,
        'dedup_key', sq_push.dedup_key, 'id', sq_push.id, 'created_at', sq_push.created_at,
        'not_before', sq_push.not_before, 'fairness_key', sq_push.fairness_key
    ))) AS b;
END
$$;

-- A publish to a topic inside the caller's transaction: an item of the queue
-- simplequeue.publications (domain/publications.py), which the service's relay publishes once the
-- transaction commits, with this item's id as the message's id. Answers that id. The message is
-- JSON (a text message is to_json('text'::text)); attributes are {name: {"type", "value"}}; a FIFO
-- topic's publications form one group there, so that the relay publishes them in order. What needs
-- the topic (that it exists, its subscriptions' filters) is the relay's to find: a publication it
-- cannot publish dies there, with the reason. SELECT sq_publish('orders', '{"order": 42}').
CREATE OR REPLACE FUNCTION sq_publish(
    topic text, message json, subject text DEFAULT NULL, attributes json DEFAULT NULL,
    message_id uuid DEFAULT NULL, group_key text DEFAULT NULL, dedup_key text DEFAULT NULL
) RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    fifo boolean := sq_publish.topic ~ '\.fifo$';
    pushed uuid;
BEGIN
    IF sq_publish.topic IS NULL OR char_length(sq_publish.topic) > 256
       OR sq_publish.topic !~ '^[A-Za-z0-9_-]+(\.fifo)?$' THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ400', MESSAGE = 'simplequeue: topic is not a topic''s name';
    END IF;
    IF sq_publish.message IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ400',
            MESSAGE = 'simplequeue: message must not be NULL (the JSON null is ''null''::json)';
    END IF;
    IF fifo AND sq_publish.group_key IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ400', MESSAGE = 'simplequeue: a FIFO topic''s messages need a group_key';
    END IF;
    IF NOT fifo AND (sq_publish.group_key IS NOT NULL OR sq_publish.dedup_key IS NOT NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ400',
            MESSAGE = 'simplequeue: group_key and dedup_key are for FIFO topics (names ending in .fifo)';
    END IF;
    SELECT p.id INTO pushed
    FROM sq_push(
        'simplequeue.publications',
        -- Absent options as JSON nulls, which the relay reads as absent (json_strip_nulls would
        -- strip the message's own nulls too).
        json_build_object(
            'topic', sq_publish.topic, 'message', sq_publish.message, 'subject', sq_publish.subject,
            'attributes', sq_publish.attributes, 'group', sq_publish.group_key, 'dedup_key', sq_publish.dedup_key
        ),
        group_key => CASE WHEN NOT fifo THEN NULL
                          WHEN char_length(sq_publish.topic) <= 128 THEN sq_publish.topic
                          ELSE encode(sha256(convert_to(sq_publish.topic, 'UTF8')), 'hex') END,
        id => sq_publish.message_id
    ) AS p;
    RETURN pushed;
END
$$;

-- What a pushing application checks before it pushes (simplequeue.outbox): the schema's version and
-- the service's payload limits, readable by a role that may only EXECUTE the push functions.
CREATE OR REPLACE FUNCTION sq_push_limits()
RETURNS TABLE (schema_version integer, max_payload_bytes integer, max_payload_depth integer)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
AS $$
BEGIN
    -- PL/pgSQL, not SQL: its body is not checked at creation, when the migration runner's
    -- sq_schema_version may not exist yet (a DBA's script from `migrate --print`).
    RETURN QUERY
    SELECT (SELECT max(v.version) FROM sq_schema_version AS v),
           (SELECT s.value::integer FROM sq_settings AS s WHERE s.name = 'max_payload_bytes'),
           (SELECT s.value::integer FROM sq_settings AS s WHERE s.name = 'max_payload_depth');
END
$$;

-- A queue's token. SECURITY DEFINER, so that any writer of sq_items (a bulk load by a role that may
-- not read sq_settings included) notifies; not executable by PUBLIC, or anyone could compute the
-- tokens of the names it guesses.
CREATE OR REPLACE FUNCTION sq_ready_token(queue text) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
AS $$
    SELECT left(encode(sha256(convert_to(s.value || ':' || queue, 'UTF8')), 'hex'), 16)
    FROM sq_settings AS s
    WHERE s.name = 'notify_key'
$$;

-- Wake long-polls in every replica when items are inserted, by this service or by any other
-- writer (a bulk load straight into the table included). NOTIFY goes out at commit, one message
-- per queue and statement: {"q": <the queue's token>, "n": <items>}; repeats of one message in a
-- transaction go out once. Only for the queues that some replica's long-polls wait on (sq_waited,
-- 0012): every notifying commit takes a cluster-wide lock, which lined up every push of the
-- cluster behind one another, waited on or not.
CREATE OR REPLACE FUNCTION sq_items_notify_ready() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
AS $$
BEGIN
    PERFORM pg_notify('simplequeue_ready', json_build_object('q', sq_ready_token(r.queue), 'n', r.n)::text)
    FROM (SELECT queue, count(*) AS n FROM new_items WHERE status = 'ready' GROUP BY queue) AS r
    WHERE EXISTS (SELECT 1 FROM sq_waited AS w WHERE w.queue = r.queue AND w.expires_at > clock_timestamp());
    RETURN NULL;
END
$$;

-- Made only where it is missing: replacing a trigger locks its table against every writer (SHARE
-- ROW EXCLUSIVE) until the migration commits, and would queue every push and pop of the running
-- replicas behind any long transaction that wrote an item, on each start of a replica. A change to
-- its definition is therefore a migration's (DROP TRIGGER), and this makes it anew.
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_trigger
        WHERE tgrelid = 'sq_items'::regclass AND tgname = 'sq_items_notify_ready' AND NOT tgisinternal
    ) THEN
        CREATE TRIGGER sq_items_notify_ready AFTER INSERT ON sq_items
            REFERENCING NEW TABLE AS new_items FOR EACH STATEMENT EXECUTE FUNCTION sq_items_notify_ready();
    END IF;
END
$$;

-- Wake every replica's scheduler when a schedule is made, replaced, paused, resumed or deleted
-- (service/schedules.py), so that schedulers may sleep until their next slot. Not when a firing
-- moves a slot (it sets none of these columns): that would wake every replica per batch fired.
-- The payload is empty: a change is a reason to look, and names nothing to a role that listens.
CREATE OR REPLACE FUNCTION sq_schedules_notify_changed() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM pg_notify('simplequeue_schedules', '');
    RETURN NULL;
END
$$;

-- Made only where it is missing, as sq_items_notify_ready above.
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_trigger
        WHERE tgrelid = 'sq_schedules'::regclass AND tgname = 'sq_schedules_notify_changed' AND NOT tgisinternal
    ) THEN
        CREATE TRIGGER sq_schedules_notify_changed
            AFTER INSERT OR DELETE OR UPDATE OF paused, queue, payload, every_seconds, cron, timezone, at
            ON sq_schedules FOR EACH STATEMENT EXECUTE FUNCTION sq_schedules_notify_changed();
    END IF;
END
$$;

-- A flow-limited queue's pop (store.py: _pop_within_limits), its first step: the queue's row read,
-- and locked when it has queue-wide limits (FOR NO KEY UPDATE: pops of such a queue take turns,
-- pushes into it do not wait), then its
-- unexpired leases counted no further than max_leased. Two statements of one function, one round
-- trip: in a VOLATILE function under READ COMMITTED each statement takes a snapshot of its own, so
-- the count, made after the lock, sees every lease the pops before this one committed. The time is
-- read after the lock too: the bucket's tokens are counted from then. No row: no such queue.
CREATE OR REPLACE FUNCTION sq_flow_room(p_queue text, p_now timestamptz)
RETURNS TABLE (limited boolean, max_leased integer, rate_per_second double precision, rate_burst integer,
               max_leased_per_key integer, rate_tokens double precision, rate_at timestamptz, now timestamptz,
               leased bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_queue sq_queues%ROWTYPE;
    v_leased bigint := 0;
BEGIN
    SELECT * INTO v_queue FROM sq_queues AS q WHERE q.name = p_queue;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- Only queue-wide limits need the queue's turn: pops limited per key alone take turns on their
    -- keys' rows instead (lock_keys, queries.sql), side by side.
    IF v_queue.limited AND (v_queue.max_leased IS NOT NULL OR v_queue.rate_per_second IS NOT NULL) THEN
        SELECT * INTO v_queue FROM sq_queues AS q WHERE q.name = p_queue FOR NO KEY UPDATE;
    END IF;
    IF v_queue.limited AND v_queue.max_leased IS NOT NULL THEN
        SELECT count(*) INTO v_leased FROM (
            SELECT 1 FROM sq_items AS i
            WHERE i.queue = p_queue AND i.status = 'leased' AND i.visible_at > COALESCE(p_now, pg_catalog.now())
            LIMIT v_queue.max_leased
        ) AS l;
    END IF;
    RETURN QUERY SELECT v_queue.limited, v_queue.max_leased, v_queue.rate_per_second, v_queue.rate_burst,
                        v_queue.max_leased_per_key, v_queue.rate_tokens, v_queue.rate_at, COALESCE(p_now, pg_catalog.clock_timestamp()),
                        v_leased;
END
$$;

-- The SECURITY DEFINER functions resolve names in the schema this file runs in, and nowhere else
-- (pg_temp last, so a caller's temporary table never stands in for ours): a function whose
-- search_path the caller could change would run the caller's tables, triggers and operators with
-- the owner's rights. Set explicitly, not FROM CURRENT, so that it holds whether the script runs
-- in one transaction (`simplequeue migrate`) or a statement at a time (`psql -f`). CREATE OR
-- REPLACE clears a function's SET clauses, so this runs after every one of them, each time.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION sq_push(text, json, integer, double precision, text, text, uuid, timestamptz,'
                   ' timestamptz, text) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION sq_push_batch(json) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION sq_publish(text, json, text, json, uuid, text, text) SET search_path = %I, pg_temp',
                   current_schema());
    EXECUTE format('ALTER FUNCTION sq_push_limits() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION sq_ready_token(text) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION sq_items_notify_ready() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION sq_flow_room(text, timestamptz) SET search_path = %I, pg_temp', current_schema());
END
$$;
REVOKE ALL ON FUNCTION sq_push_rows(uuid[], text[], text[], timestamptz[], integer[], text[], text[],
    double precision[], timestamptz[], boolean[], boolean, timestamptz, text[], text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_push_planned(uuid[], text[], text[], timestamptz[], integer[], text[], text[],
    double precision[], timestamptz[], boolean[], boolean, timestamptz, text[], text[], double precision[], bigint[])
    FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_fair_ranks(text[], text[], bigint[], timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_keyed_queue(text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_rank_priority(integer, timestamptz, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_checked_key(json, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_checked_number(json, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_checked_time(json, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_push_batch(json) FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_push(text, json, integer, double precision, text, text, uuid, timestamptz, timestamptz,
    text) FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_push_limits() FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_publish(text, json, text, json, uuid, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_ready_token(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_items_notify_ready() FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_flow_room(text, timestamptz) FROM PUBLIC;

-- sq_push before fairness_key, which migration 0022 renamed rather than dropped: the roles it was
-- granted to keep their EXECUTE (and the right to grant it) on the new sq_push, then it goes.
DO $$
DECLARE
    old regprocedure := to_regprocedure(
        'sq_push_v21(text, json, integer, double precision, text, text, uuid, timestamptz, timestamptz)');
    grant_ record;
BEGIN
    IF old IS NULL THEN
        RETURN;
    END IF;
    FOR grant_ IN
        SELECT a.grantee::regrole AS grantee, a.is_grantable
        FROM pg_proc AS p, aclexplode(p.proacl) AS a
        WHERE p.oid = old AND a.privilege_type = 'EXECUTE' AND a.grantee NOT IN (0, p.proowner)
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION sq_push(text, json, integer, double precision, text, text, uuid,'
                       ' timestamptz, timestamptz, text) TO %s%s',
                       grant_.grantee, CASE WHEN grant_.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    EXECUTE format('DROP FUNCTION %s', old);
END
$$;
