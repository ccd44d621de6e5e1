-- simplequeue schema v1 for PostgreSQL.

CREATE TABLE IF NOT EXISTS sq_queues (
    name text NOT NULL PRIMARY KEY CHECK (char_length(name) BETWEEN 1 AND 128),
    created_at timestamptz NOT NULL
);

-- seq is the insertion order: the tie-breaker after created_at.
-- visible_at: for 'ready', when the item may be popped (later than now after a delayed retry);
-- for 'leased', when the lease expires and the item may be popped again.
-- payload is json, not jsonb: it keeps the producer's text (key order, duplicate keys) as given.
CREATE TABLE IF NOT EXISTS sq_items (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id uuid NOT NULL,
    queue text NOT NULL,
    payload json NOT NULL,
    created_at timestamptz NOT NULL,
    status text NOT NULL DEFAULT 'ready' CONSTRAINT sq_items_status_ck CHECK (status IN ('ready', 'leased', 'dead')),
    attempts integer NOT NULL DEFAULT 0 CONSTRAINT sq_items_attempts_ck CHECK (attempts >= 0),
    visible_at timestamptz NOT NULL,
    lease_token uuid,
    errors jsonb NOT NULL DEFAULT '[]',
    CONSTRAINT sq_items_id_key UNIQUE (id),
    CONSTRAINT sq_items_lease_ck CHECK ((status = 'leased') = (lease_token IS NOT NULL))
);

-- The pop index holds only live rows, so dead rows never slow a pop down.
CREATE INDEX IF NOT EXISTS sq_items_pop ON sq_items (queue, created_at, seq)
    WHERE status IN ('ready', 'leased');

-- Dead items only, for the stats' dead count: live churn (push, pop, complete) never touches it.
CREATE INDEX IF NOT EXISTS sq_items_dead ON sq_items (queue) WHERE status = 'dead';

-- The long-poll watcher's probe: when does the next live item of a queue become poppable?
CREATE INDEX IF NOT EXISTS sq_items_visible ON sq_items (queue, visible_at)
    WHERE status IN ('ready', 'leased');

-- The trigger that wakes long-polls when items are inserted (sq_items_notify_ready), and every
-- function, are store/postgres/functions.sql's, applied after the migrations by every migrate.
