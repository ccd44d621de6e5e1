-- simplequeue schema v7 for SQL Server: what a queue carries beyond its settings.
--
-- Run as 0001 is: one statement at a time, each guarded, all in one transaction under the
-- migration lock.
--
-- modified_at: when the queue's settings or attributes last changed (NULL: never since created).
-- sq_queue_attributes: named values kept for the callers that set them, such as the SQS door's
-- Policy or DelaySeconds; the service's own settings stay columns of sq_queues.
-- sq_queue_tags: a queue's tags (SQS TagQueue). Both go with their queue (delete_queue).
IF COL_LENGTH(N'dbo.sq_queues', N'modified_at') IS NULL
ALTER TABLE dbo.sq_queues ADD modified_at DATETIME2(7) NULL;

IF OBJECT_ID(N'dbo.sq_queue_attributes', N'U') IS NULL
CREATE TABLE dbo.sq_queue_attributes (
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    name NVARCHAR(256) COLLATE Latin1_General_100_BIN2 NOT NULL,
    value NVARCHAR(MAX) NOT NULL,
    CONSTRAINT sq_queue_attributes_pk PRIMARY KEY CLUSTERED (queue, name)
);

IF OBJECT_ID(N'dbo.sq_queue_tags', N'U') IS NULL
CREATE TABLE dbo.sq_queue_tags (
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [key] NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    value NVARCHAR(256) NOT NULL,
    CONSTRAINT sq_queue_tags_pk PRIMARY KEY CLUSTERED (queue, [key])
);
