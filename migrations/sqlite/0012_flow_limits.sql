-- simplequeue schema v12 for SQLite: flow limits. A queue may cap the items leased at once
-- (max_leased) and the rate pops hand them out (a token bucket: rate_per_second, rate_burst; its
-- state rate_tokens counted at rate_at). `limited` says a pop must count and take tokens.
ALTER TABLE sq_queues ADD COLUMN max_leased INTEGER CHECK (max_leased >= 1);
ALTER TABLE sq_queues ADD COLUMN rate_per_second REAL CHECK (rate_per_second > 0);
ALTER TABLE sq_queues ADD COLUMN rate_burst INTEGER CHECK (rate_burst >= 1);
ALTER TABLE sq_queues ADD COLUMN rate_tokens REAL;
ALTER TABLE sq_queues ADD COLUMN rate_at TEXT;
ALTER TABLE sq_queues ADD COLUMN limited INTEGER NOT NULL DEFAULT 0 CHECK (limited IN (0, 1));
