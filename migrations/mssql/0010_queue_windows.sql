-- simplequeue schema v10 for SQL Server: two queue settings that SQS's queues need.
-- - lease_seconds may be 0 (SQS's VisibilityTimeout 0): a popped item is visible again at once,
--   and popped again by the next pop unless its worker completes it first.
-- - dedup_window_from: where a dedup key's window starts. 'finish' (the default, as before): the key
--   matches while its item lives and for dedup_window_seconds after it finished. 'send' (SQS FIFO
--   queues' deduplication interval): for dedup_window_seconds from the push that claimed it,
--   whether or not the item is still there.
--
-- Split at its GO lines and sent a batch at a time, as 0006 and 0008 are; every batch is guarded, so
-- running the file again is harmless. dbo.sq_push_items' claim of dedup keys reads the queue's
-- dedup_window_from (store/mssql/procedures.sql; the queue exists by then: the procedure creates
-- missing queues first). The completions, kills and purges start a key's window only when none runs
-- yet (store/mssql/queries.sql), so a window from the send is kept.
IF EXISTS (SELECT 1 FROM sys.check_constraints WHERE name = N'sq_queues_lease_seconds_ck'
           AND definition NOT LIKE N'%>=(0)%')
ALTER TABLE dbo.sq_queues DROP CONSTRAINT sq_queues_lease_seconds_ck;
GO

IF NOT EXISTS (SELECT 1 FROM sys.check_constraints WHERE name = N'sq_queues_lease_seconds_ck')
ALTER TABLE dbo.sq_queues ADD CONSTRAINT sq_queues_lease_seconds_ck CHECK (lease_seconds BETWEEN 0 AND 43200);
GO

IF COL_LENGTH(N'dbo.sq_queues', N'dedup_window_from') IS NULL
ALTER TABLE dbo.sq_queues ADD dedup_window_from VARCHAR(6) NOT NULL
    CONSTRAINT sq_queues_dedup_window_from_df DEFAULT 'finish'
    CONSTRAINT sq_queues_dedup_window_from_ck CHECK (dedup_window_from IN ('finish', 'send'));
GO
