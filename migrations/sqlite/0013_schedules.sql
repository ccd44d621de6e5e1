-- simplequeue schema v13 for SQLite: schedules, pushes kept in the database and fired once per slot
-- (domain/schedules.py).
--
-- One of every_seconds, cron (read in timezone) and at says when. next_run_at: the next slot,
-- NULL once an `at` has fired; firing claims it with a compare-and-set on the value read
-- (store/schedules.py), so of replicas racing one fires. payload: the item's JSON text.
-- last_item_id: the item the last firing pushed (overlap 'skip' waits while it is live).
CREATE TABLE IF NOT EXISTS sq_schedules (
    name TEXT NOT NULL PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 80),
    queue TEXT NOT NULL,
    payload TEXT NOT NULL,
    every_seconds INTEGER CHECK (every_seconds >= 1),
    cron TEXT,
    timezone TEXT NOT NULL DEFAULT 'UTC',
    at TEXT,
    priority INTEGER NOT NULL DEFAULT 0,
    group_key TEXT CHECK (length(group_key) BETWEEN 1 AND 128),
    paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    jitter_seconds INTEGER NOT NULL DEFAULT 0 CHECK (jitter_seconds >= 0),
    overlap TEXT NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip')),
    catch_up TEXT NOT NULL DEFAULT 'latest' CHECK (catch_up IN ('none', 'latest', 'all')),
    created_at TEXT NOT NULL,
    modified_at TEXT,
    next_run_at TEXT,
    last_run_at TEXT,
    last_item_id TEXT,
    CHECK ((every_seconds IS NOT NULL) + (cron IS NOT NULL) + (at IS NOT NULL) = 1)
) WITHOUT ROWID;

-- The scheduler's one statement per wake: the due schedules, and the first one after them. With
-- the name, a firing's compare-and-set (next_run_at and name) is one seek however many schedules
-- share its slot.
CREATE INDEX IF NOT EXISTS sq_schedules_due ON sq_schedules (next_run_at, name) WHERE paused = 0;
