-- simplequeue schema v2 for SQLite: queue settings, retries, dead letters, delays, priorities,
-- idempotency keys, ordered groups and history.

-- Queue settings. The defaults here are the ones a queue gets on its first push; they match
-- app.domain.QueueSettings (a test holds them together).
ALTER TABLE sq_queues ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 5 CHECK (max_attempts BETWEEN 1 AND 1000);
ALTER TABLE sq_queues ADD COLUMN lease_seconds INTEGER NOT NULL DEFAULT 30 CHECK (lease_seconds BETWEEN 1 AND 43200);
ALTER TABLE sq_queues ADD COLUMN backoff_base_seconds REAL NOT NULL DEFAULT 1 CHECK (backoff_base_seconds BETWEEN 0 AND 86400);
ALTER TABLE sq_queues ADD COLUMN backoff_factor REAL NOT NULL DEFAULT 2 CHECK (backoff_factor BETWEEN 1 AND 10);
ALTER TABLE sq_queues ADD COLUMN backoff_cap_seconds REAL NOT NULL DEFAULT 3600 CHECK (backoff_cap_seconds BETWEEN 0 AND 604800);
ALTER TABLE sq_queues ADD COLUMN backoff_jitter REAL NOT NULL DEFAULT 0.1 CHECK (backoff_jitter BETWEEN 0 AND 1);
ALTER TABLE sq_queues ADD COLUMN retention_seconds INTEGER NOT NULL DEFAULT 604800 CHECK (retention_seconds BETWEEN 0 AND 31536000);
ALTER TABLE sq_queues ADD COLUMN dedup_window_seconds INTEGER NOT NULL DEFAULT 3600 CHECK (dedup_window_seconds BETWEEN 0 AND 31536000);
ALTER TABLE sq_queues ADD COLUMN history_payload INTEGER NOT NULL DEFAULT 0 CHECK (history_payload IN (0, 1));

-- Items gain columns and constraints; SQLite adds table constraints only by rebuilding the table.
CREATE TABLE sq_items_v2 (
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
    priority INTEGER NOT NULL DEFAULT 0 CHECK (priority BETWEEN -2147483648 AND 2147483647),
    group_key TEXT CHECK (length(group_key) BETWEEN 1 AND 128),
    dedup_key TEXT CHECK (length(dedup_key) BETWEEN 1 AND 128),
    first_popped_at TEXT,
    died_at TEXT,
    CHECK ((status = 'leased') = (lease_token IS NOT NULL)),
    CHECK ((status = 'dead') = (died_at IS NOT NULL))
);

-- v1 did not record when an item was first popped or died: the best figures it kept stand in.
INSERT INTO sq_items_v2 (seq, id, queue, payload, created_at, status, attempts, visible_at, lease_token, errors,
                         first_popped_at, died_at)
SELECT seq, id, queue, payload, created_at, status, attempts, visible_at, lease_token, errors,
       CASE WHEN attempts > 0 THEN created_at END, CASE WHEN status = 'dead' THEN visible_at END
FROM sq_items;

DROP TABLE sq_items;

ALTER TABLE sq_items_v2 RENAME TO sq_items;

-- Pop order: priority, then created_at, then insertion. Live rows only, so dead rows never slow a pop.
CREATE INDEX sq_items_pop ON sq_items (queue, priority DESC, created_at, seq)
    WHERE status IN ('ready', 'leased');

-- The long-poll watcher's probe: when does the next live item of a queue become poppable?
CREATE INDEX sq_items_visible ON sq_items (queue, visible_at) WHERE status IN ('ready', 'leased');

-- Ordered groups: is there a live item of this group pushed before this one? The predicate says
-- "not dead" rather than "ready or leased" on purpose: the probe says the same, so no other
-- partial index can serve it (with stale statistics PostgreSQL was seen probing sq_items_visible,
-- a walk over the whole queue for every candidate).
CREATE INDEX sq_items_group ON sq_items (queue, group_key, seq)
    WHERE group_key IS NOT NULL AND status <> 'dead';

-- The sweep: leases that ran out (only items in flight, a small set).
CREATE INDEX sq_items_leased ON sq_items (visible_at) WHERE status = 'leased';

-- Dead letters, most recently dead first; live churn never touches this index.
CREATE INDEX sq_items_dead ON sq_items (queue, died_at, seq) WHERE status = 'dead';

-- One row per finished item (completed, or dead), written in the transaction that finished it.
CREATE TABLE sq_history (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    queue TEXT NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('completed', 'dead')),
    attempts INTEGER NOT NULL CHECK (attempts >= 0),
    created_at TEXT NOT NULL,
    first_popped_at TEXT,
    finished_at TEXT NOT NULL,
    group_key TEXT,
    dedup_key TEXT,
    last_error TEXT,
    payload TEXT
);

-- Paging newest first, and retention: oldest first per queue.
CREATE INDEX sq_history_queue ON sq_history (queue, finished_at, seq);

-- Paging by outcome, and the counts per outcome in the stats.
CREATE INDEX sq_history_outcome ON sq_history (queue, outcome, finished_at, seq);

-- Idempotency keys. The primary key is the guarantee: of concurrent pushes with one key, one
-- inserts this row and the others find it. expires_at is NULL while the item exists; once it
-- finished, the key keeps matching until then.
CREATE TABLE sq_dedup (
    queue TEXT NOT NULL,
    dedup_key TEXT NOT NULL,
    item_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    PRIMARY KEY (queue, dedup_key)
) WITHOUT ROWID;

CREATE INDEX sq_dedup_expires ON sq_dedup (expires_at) WHERE expires_at IS NOT NULL;
