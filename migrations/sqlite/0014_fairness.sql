-- simplequeue schema v14 for SQLite: fairness between tenants. An item may name the tenant it
-- belongs to (fairness_key); pops take a queue's ready items round-robin across its keys. A push
-- gives each item a rank, fair_rank (start-time fair queueing: the later of the queue's virtual
-- time and its key's last rank, plus one), and pops order by it after priority. A queue that never
-- saw a key keeps every rank at 0, so its pop order is that of created_at and seq, as before.
ALTER TABLE sq_items ADD COLUMN fairness_key TEXT CHECK (length(fairness_key) BETWEEN 1 AND 128);
ALTER TABLE sq_items ADD COLUMN fair_rank REAL NOT NULL DEFAULT 0;

-- Each key's last rank, by queue. Unkeyed items of a queue that has keys are one more key, ''
-- (a given key is never empty). A key's weight and limits would live on this row too.
CREATE TABLE IF NOT EXISTS sq_fair_keys (
    queue TEXT NOT NULL,
    fairness_key TEXT NOT NULL,
    last_rank REAL NOT NULL,
    PRIMARY KEY (queue, fairness_key)
) WITHOUT ROWID;

-- The queue's highest rank handed out: the virtual time a push starts from when the queue has no
-- ready item of the pushed priority (see store/sqlite/fairness.py).
CREATE INDEX IF NOT EXISTS sq_fair_keys_clock ON sq_fair_keys (queue, last_rank);

-- Pop order within a queue: priority, then fair rank, then created_at, then insertion. The ready
-- items of one priority by rank are also where a push finds the queue's virtual time.
DROP INDEX IF EXISTS sq_items_ready;
CREATE INDEX IF NOT EXISTS sq_items_ready ON sq_items (queue, priority DESC, fair_rank, created_at, seq)
    WHERE status = 'ready';
