-- simplequeue schema v15 for PostgreSQL: schedules, pushes kept in the database and fired once
-- per slot (domain/schedules.py).
--
-- One of every_seconds, cron (read in timezone) and at says when. next_run_at: the next slot,
-- NULL once an `at` has fired; firing claims it with a compare-and-set on the value read
-- (store/schedules.py), so of replicas racing one fires. payload: the item's JSON text, as pushed.
-- last_item_id: the item the last firing pushed (overlap 'skip' waits while it is live).
CREATE TABLE IF NOT EXISTS sq_schedules (
    name text PRIMARY KEY CONSTRAINT sq_schedules_name_ck CHECK (char_length(name) BETWEEN 1 AND 80),
    queue text NOT NULL,
    payload text NOT NULL,
    every_seconds integer CONSTRAINT sq_schedules_every_ck CHECK (every_seconds >= 1),
    cron text,
    timezone text NOT NULL DEFAULT 'UTC',
    at timestamptz,
    priority integer NOT NULL DEFAULT 0,
    group_key text CONSTRAINT sq_schedules_group_ck CHECK (char_length(group_key) BETWEEN 1 AND 128),
    paused boolean NOT NULL DEFAULT false,
    jitter_seconds integer NOT NULL DEFAULT 0 CONSTRAINT sq_schedules_jitter_ck CHECK (jitter_seconds >= 0),
    overlap text NOT NULL DEFAULT 'allow' CONSTRAINT sq_schedules_overlap_ck CHECK (overlap IN ('allow', 'skip')),
    catch_up text NOT NULL DEFAULT 'latest'
        CONSTRAINT sq_schedules_catch_up_ck CHECK (catch_up IN ('none', 'latest', 'all')),
    created_at timestamptz NOT NULL,
    modified_at timestamptz,
    next_run_at timestamptz,
    last_run_at timestamptz,
    last_item_id uuid,
    CONSTRAINT sq_schedules_timing_ck
        CHECK ((every_seconds IS NOT NULL)::int + (cron IS NOT NULL)::int + (at IS NOT NULL)::int = 1)
);

-- The scheduler's one statement per wake: the due schedules, and the first one after them. With
-- the name, a firing's compare-and-set (next_run_at and name) is one seek however many schedules
-- share its slot.
CREATE INDEX IF NOT EXISTS sq_schedules_due ON sq_schedules (next_run_at, name) WHERE NOT paused;
