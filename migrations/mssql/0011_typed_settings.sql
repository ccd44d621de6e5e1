-- simplequeue schema v11 for SQL Server: the settings core SQL reads are columns of dbo.sq_queues,
-- not SQS attribute strings. A queue's dead-letter target and its live items' retention were kept as
-- attributes (dbo.sq_queue_attributes 'dead_letter_queue', 'MessageRetentionPeriod', set by the SQS
-- door) that fail, reap and the sweep joined by name; now they are settings like any other, which the
-- REST API sets too. The values move here; RedrivePolicy, which the SQS door now answers from the
-- target and max_attempts, goes with them.
--
-- Split at its GO lines and sent a batch at a time: a batch that names a column is compiled before
-- it runs, so the columns are added in batches of their own before the batch that fills them. Every
-- batch is guarded, or finds nothing left to move, so running the file again is harmless.
IF COL_LENGTH(N'dbo.sq_queues', N'dead_letter_queue') IS NULL
ALTER TABLE dbo.sq_queues ADD dead_letter_queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL;
GO

IF COL_LENGTH(N'dbo.sq_queues', N'message_retention_seconds') IS NULL
ALTER TABLE dbo.sq_queues ADD message_retention_seconds INT NULL
    CONSTRAINT sq_queues_message_retention_seconds_ck CHECK (message_retention_seconds BETWEEN 60 AND 1209600);
GO

UPDATE q SET dead_letter_queue = a.value
FROM dbo.sq_queues AS q
JOIN dbo.sq_queue_attributes AS a ON a.queue = q.name AND a.name = N'dead_letter_queue';
GO

UPDATE q SET message_retention_seconds = CAST(a.value AS INT)
FROM dbo.sq_queues AS q
JOIN dbo.sq_queue_attributes AS a ON a.queue = q.name AND a.name = N'MessageRetentionPeriod';
GO

DELETE FROM dbo.sq_queue_attributes
WHERE name IN (N'dead_letter_queue', N'MessageRetentionPeriod', N'RedrivePolicy');
GO

-- The sweep's expire_retained starts from the queues that keep their items for a time: few.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'sq_queues_retained'
               AND object_id = OBJECT_ID(N'dbo.sq_queues'))
CREATE NONCLUSTERED INDEX sq_queues_retained ON dbo.sq_queues (name) WHERE message_retention_seconds IS NOT NULL;
