-- simplequeue schema v14 for PostgreSQL: flow limits. A queue may cap the items leased at once
-- (max_leased) and the rate pops hand them out (a token bucket: rate_per_second, rate_burst; its
-- state rate_tokens counted at rate_at, on the queue's row, so every replica draws on one bucket).
-- `limited` says a pop must take the queue's row lock, count and take tokens; the one-statement
-- pop claims nothing of such a queue.
ALTER TABLE sq_queues ADD COLUMN IF NOT EXISTS max_leased integer CHECK (max_leased >= 1);
ALTER TABLE sq_queues ADD COLUMN IF NOT EXISTS rate_per_second double precision CHECK (rate_per_second > 0);
ALTER TABLE sq_queues ADD COLUMN IF NOT EXISTS rate_burst integer CHECK (rate_burst >= 1);
ALTER TABLE sq_queues ADD COLUMN IF NOT EXISTS rate_tokens double precision;
ALTER TABLE sq_queues ADD COLUMN IF NOT EXISTS rate_at timestamptz;
ALTER TABLE sq_queues ADD COLUMN IF NOT EXISTS limited boolean NOT NULL DEFAULT false;
