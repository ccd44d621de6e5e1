-- simplequeue schema v7 for PostgreSQL: an item may carry message attributes (SQS's MessageAttributes,
-- the HTTP API's `attributes`), kept as the JSON text the service writes (domain/attributes.py):
-- {"name": {"type": "String", "value": "..."}}, names sorted, Binary values in base64. NULL: none.
-- They stay with the item while it lives (dead and redriven too); history does not keep them.
--
-- sq_push_rows and sq_push_planned (0005) take them as one more array, p_attributes, by place
-- (NULL, or a shorter array: none). Everything else of 0005 is unchanged: these are 0005's bodies
-- with the attributes added to their INSERTs. A function's arguments are its identity, so the old
-- signatures are dropped rather than left beside the new ones; sq_push_batch and sq_push (0005,
-- unchanged: callers pushing in their own transactions push no attributes) call sq_push_rows by
-- position and reach the new one, whose p_attributes defaults to NULL. Neither is granted to
-- anyone, as in 0005: only the owner and the SECURITY DEFINER functions run them.
ALTER TABLE sq_items ADD COLUMN IF NOT EXISTS attributes text;

DROP FUNCTION IF EXISTS sq_push_rows(uuid[], text[], text[], timestamptz[], integer[], text[], text[],
    double precision[], timestamptz[], boolean[], boolean, timestamptz);
DROP FUNCTION IF EXISTS sq_push_planned(uuid[], text[], text[], timestamptz[], integer[], text[], text[],
    double precision[], timestamptz[], boolean[], boolean, timestamptz);

CREATE OR REPLACE FUNCTION sq_push_rows(
    p_ids uuid[], p_queues text[], p_payloads text[], p_created_ats timestamptz[], p_priorities integer[],
    p_groups text[], p_dedup_keys text[], p_delays double precision[], p_not_befores timestamptz[],
    p_remember boolean[], p_skip_existing boolean, p_now timestamptz, p_attributes text[] DEFAULT NULL
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
BEGIN
    IF NOT v_keyed AND NOT true = ANY (p_remember) AND array_remove(p_groups, NULL) = '{}' THEN
        -- The common case (no dedup keys, no remembered ids, no ordered groups): one statement. An
        -- id already there, or given twice, goes in (and answers) once; the rest answer NULL.
        WITH new_queues AS (
            INSERT INTO sq_queues (name, created_at)
            SELECT DISTINCT q, v_now FROM unnest(p_queues) AS q
            ON CONFLICT (name) DO NOTHING
        ), inserted AS (
            INSERT INTO sq_items (id, queue, payload, created_at, visible_at, priority, attributes)
            SELECT t.i, t.q, t.p::json, t.c, GREATEST(t.nb, v_now + t.d * interval '1 second'), t.pr, p_attributes[t.o]
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
        INSERT INTO sq_queues (name, created_at)
        SELECT DISTINCT q, v_now FROM unnest(p_queues) AS q
        ON CONFLICT (name) DO NOTHING;
        SELECT r.ids, r.ats, r.created INTO v_ids, v_ats, v_created
        FROM sq_push_planned(
            p_ids, p_queues, p_payloads, p_created_ats, p_priorities, p_groups, p_dedup_keys, p_delays,
            p_not_befores, p_remember, p_skip_existing, v_now, p_attributes
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

-- sq_push_rows for the items that need more than one INSERT: dedup keys, remembered ids or ordered
-- groups. The answers, by place; the caller (sq_push_rows) refuses or skips what is NULL.
CREATE OR REPLACE FUNCTION sq_push_planned(
    p_ids uuid[], p_queues text[], p_payloads text[], p_created_ats timestamptz[], p_priorities integer[],
    p_groups text[], p_dedup_keys text[], p_delays double precision[], p_not_befores timestamptz[],
    p_remember boolean[], p_skip_existing boolean, v_now timestamptz, p_attributes text[],
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
        -- A key is taken when new, or when its window after its item finished has passed. A key
        -- being taken by a concurrent push makes this wait for that push's commit; the next
        -- statement (a new snapshot) then reads the winner.
        WITH taken AS (
            INSERT INTO sq_dedup (queue, dedup_key, item_id, created_at)
            SELECT t.q, t.k, t.i, t.c
            FROM unnest(p_queues, p_dedup_keys, p_ids, p_created_ats) WITH ORDINALITY AS t(q, k, i, c, o)
            WHERE t.k IS NOT NULL AND v_leaders[t.o] = t.o
            ON CONFLICT (queue, dedup_key) DO UPDATE
            SET item_id = excluded.item_id, created_at = excluded.created_at, expires_at = NULL
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
                              attributes)
        SELECT t.i, t.q, t.p::json, t.c, GREATEST(t.nb, v_now + t.d * interval '1 second'), t.pr, t.g, t.k, t.r,
               p_attributes[t.o]
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

REVOKE ALL ON FUNCTION sq_push_rows(uuid[], text[], text[], timestamptz[], integer[], text[], text[],
    double precision[], timestamptz[], boolean[], boolean, timestamptz, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_push_planned(uuid[], text[], text[], timestamptz[], integer[], text[], text[],
    double precision[], timestamptz[], boolean[], boolean, timestamptz, text[]) FROM PUBLIC;
