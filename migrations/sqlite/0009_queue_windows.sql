-- simplequeue schema v9 for SQLite: two queue settings that SQS's queues need.
-- - lease_seconds may be 0 (SQS's VisibilityTimeout 0): a popped item is visible again at once,
--   and popped again by the next pop unless its worker completes it first.
-- - dedup_window_from: where a dedup key's window starts. 'finish' (the default, as before): the key
--   matches while its item lives and for dedup_window_seconds after it finished. 'send' (SQS FIFO
--   queues' deduplication interval): for dedup_window_seconds from the push that claimed it,
--   whether or not the item is still there.
-- SQLite cannot change a column's CHECK in place, so sq_queues is rebuilt as SQLite's ALTER TABLE
-- documentation describes (new table, copy, drop, rename), in the migration's transaction. No
-- index, trigger, view or foreign key refers to it.
CREATE TABLE sq_queues_v9 (
    name TEXT NOT NULL PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 128),
    created_at TEXT NOT NULL,
    max_attempts INTEGER NOT NULL DEFAULT 5 CHECK (max_attempts BETWEEN 1 AND 1000),
    lease_seconds INTEGER NOT NULL DEFAULT 30 CHECK (lease_seconds BETWEEN 0 AND 43200),
    backoff_base_seconds REAL NOT NULL DEFAULT 1 CHECK (backoff_base_seconds BETWEEN 0 AND 86400),
    backoff_factor REAL NOT NULL DEFAULT 2 CHECK (backoff_factor BETWEEN 1 AND 10),
    backoff_cap_seconds REAL NOT NULL DEFAULT 3600 CHECK (backoff_cap_seconds BETWEEN 0 AND 604800),
    backoff_jitter REAL NOT NULL DEFAULT 0.1 CHECK (backoff_jitter BETWEEN 0 AND 1),
    retention_seconds INTEGER NOT NULL DEFAULT 604800 CHECK (retention_seconds BETWEEN 0 AND 31536000),
    dedup_window_seconds INTEGER NOT NULL DEFAULT 3600 CHECK (dedup_window_seconds BETWEEN 0 AND 31536000),
    dedup_window_from TEXT NOT NULL DEFAULT 'finish' CHECK (dedup_window_from IN ('finish', 'send')),
    history_payload INTEGER NOT NULL DEFAULT 0 CHECK (history_payload IN (0, 1)),
    paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    modified_at TEXT
) WITHOUT ROWID;

INSERT INTO sq_queues_v9 (name, created_at, max_attempts, lease_seconds, backoff_base_seconds, backoff_factor,
                          backoff_cap_seconds, backoff_jitter, retention_seconds, dedup_window_seconds,
                          history_payload, paused, modified_at)
SELECT name, created_at, max_attempts, lease_seconds, backoff_base_seconds, backoff_factor, backoff_cap_seconds,
       backoff_jitter, retention_seconds, dedup_window_seconds, history_payload, paused, modified_at
FROM sq_queues;

DROP TABLE sq_queues;

ALTER TABLE sq_queues_v9 RENAME TO sq_queues;
