-- simplequeue schema v1 for SQLite.
-- Times are fixed-width ISO-8601 UTC text ('YYYY-MM-DDTHH:MM:SS.ffffffZ'), so text order is time order.

CREATE TABLE IF NOT EXISTS sq_queues (
    name TEXT NOT NULL PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 128),
    created_at TEXT NOT NULL
) WITHOUT ROWID;

-- seq (the rowid) is the insertion order: the tie-breaker after created_at.
-- visible_at: for 'ready', when the item may be popped (later than now after a delayed retry);
-- for 'leased', when the lease expires and the item may be popped again.
CREATE TABLE IF NOT EXISTS sq_items (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    queue TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'ready' CHECK (status IN ('ready', 'leased', 'dead')),
    attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    visible_at TEXT NOT NULL,
    lease_token TEXT,
    errors TEXT NOT NULL DEFAULT '[]',
    CHECK ((status = 'leased') = (lease_token IS NOT NULL))
);

-- The pop index holds only live rows, so dead rows never slow a pop down.
CREATE INDEX IF NOT EXISTS sq_items_pop ON sq_items (queue, created_at, seq)
    WHERE status IN ('ready', 'leased');

-- Dead items only, for the stats' dead count: live churn (push, pop, complete) never touches it.
CREATE INDEX IF NOT EXISTS sq_items_dead ON sq_items (queue) WHERE status = 'dead';

-- The long-poll watcher's probe: when does the next live item of a queue become poppable?
CREATE INDEX IF NOT EXISTS sq_items_visible ON sq_items (queue, visible_at)
    WHERE status IN ('ready', 'leased');
