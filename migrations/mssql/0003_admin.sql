-- simplequeue schema v3 for SQL Server: a queue can be paused (it takes pushes, hands out nothing).
IF COL_LENGTH('dbo.sq_queues', 'paused') IS NULL
    ALTER TABLE dbo.sq_queues ADD paused BIT NOT NULL CONSTRAINT sq_queues_paused_default DEFAULT 0;
