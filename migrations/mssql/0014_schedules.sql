-- simplequeue schema v14 for SQL Server: schedules, pushes kept in the database and fired once per
-- slot (domain/schedules.py).
--
-- Run as 0001 is: one statement at a time, each guarded, all in one transaction under the
-- migration lock. One of every_seconds, cron (read in timezone) and at says when. next_run_at:
-- the next slot, NULL once an `at` has fired; firing claims it with a compare-and-set on the value
-- read (store/schedules.py), so of replicas racing one fires. payload: the item's JSON text.
-- last_item_id: the item the last firing pushed (overlap 'skip' waits while it is live).
IF OBJECT_ID(N'dbo.sq_schedules', N'U') IS NULL
CREATE TABLE dbo.sq_schedules (
    name NVARCHAR(80) COLLATE Latin1_General_100_BIN2 NOT NULL,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    payload NVARCHAR(MAX) NOT NULL,
    every_seconds INT NULL CONSTRAINT sq_schedules_every_ck CHECK (every_seconds >= 1),
    cron NVARCHAR(256) NULL,
    timezone NVARCHAR(64) NOT NULL CONSTRAINT sq_schedules_timezone_df DEFAULT N'UTC',
    at DATETIME2(7) NULL,
    priority INT NOT NULL CONSTRAINT sq_schedules_priority_df DEFAULT 0,
    group_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL,
    paused BIT NOT NULL CONSTRAINT sq_schedules_paused_df DEFAULT 0,
    jitter_seconds INT NOT NULL CONSTRAINT sq_schedules_jitter_df DEFAULT 0
        CONSTRAINT sq_schedules_jitter_ck CHECK (jitter_seconds >= 0),
    overlap VARCHAR(8) NOT NULL CONSTRAINT sq_schedules_overlap_df DEFAULT 'allow'
        CONSTRAINT sq_schedules_overlap_ck CHECK (overlap IN ('allow', 'skip')),
    catch_up VARCHAR(8) NOT NULL CONSTRAINT sq_schedules_catch_up_df DEFAULT 'latest'
        CONSTRAINT sq_schedules_catch_up_ck CHECK (catch_up IN ('none', 'latest', 'all')),
    created_at DATETIME2(7) NOT NULL,
    modified_at DATETIME2(7) NULL,
    next_run_at DATETIME2(7) NULL,
    last_run_at DATETIME2(7) NULL,
    last_item_id UNIQUEIDENTIFIER NULL,
    CONSTRAINT sq_schedules_pk PRIMARY KEY CLUSTERED (name),
    CONSTRAINT sq_schedules_timing_ck CHECK (
        CASE WHEN every_seconds IS NULL THEN 0 ELSE 1 END + CASE WHEN cron IS NULL THEN 0 ELSE 1 END
        + CASE WHEN at IS NULL THEN 0 ELSE 1 END = 1
    )
);

-- The scheduler's one statement per wake: the due schedules, and the first one after them. With
-- the name, a firing's compare-and-set (next_run_at and name) is one seek however many schedules
-- share its slot.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_schedules') AND name = N'sq_schedules_due')
CREATE INDEX sq_schedules_due ON dbo.sq_schedules (next_run_at, name) WHERE paused = 0;
