-- simplequeue schema v9 for PostgreSQL: two queue settings that SQS's queues need.
-- - lease_seconds may be 0 (SQS's VisibilityTimeout 0): a popped item is visible again at once,
--   and popped again by the next pop unless its worker completes it first.
-- - dedup_window_from: where a dedup key's window starts. 'finish' (the default, as before): the key
--   matches while its item lives and for dedup_window_seconds after it finished. 'send' (SQS FIFO
--   queues' deduplication interval): for dedup_window_seconds from the push that claimed it,
--   whether or not the item is still there.
-- sq_push_planned's claim of dedup keys reads the queue's dedup_window_from
-- (store/postgres/functions.sql). The completions, kills and purges start a key's window only
-- when none runs yet (store/postgres/queries.sql), so a window from the send is kept.
ALTER TABLE sq_queues DROP CONSTRAINT IF EXISTS sq_queues_lease_seconds_ck;
ALTER TABLE sq_queues ADD CONSTRAINT sq_queues_lease_seconds_ck CHECK (lease_seconds BETWEEN 0 AND 43200);
ALTER TABLE sq_queues ADD COLUMN IF NOT EXISTS dedup_window_from text NOT NULL DEFAULT 'finish'
    CONSTRAINT sq_queues_dedup_window_from_ck CHECK (dedup_window_from IN ('finish', 'send'));
