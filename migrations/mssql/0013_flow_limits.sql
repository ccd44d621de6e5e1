-- simplequeue schema v13 for SQL Server: flow limits. A queue may cap the items leased at once
-- (max_leased) and the rate pops hand them out (a token bucket: rate_per_second, rate_burst; its
-- state rate_tokens counted at rate_at, on the queue's row, so every replica draws on one bucket).
-- `limited` says a pop must take the queue's row lock (UPDLOCK, HOLDLOCK), count and take tokens;
-- the one-statement pop claims nothing of such a queue. Every batch is guarded.
IF COL_LENGTH(N'dbo.sq_queues', N'max_leased') IS NULL
ALTER TABLE dbo.sq_queues ADD max_leased INT NULL CONSTRAINT sq_queues_max_leased_ck CHECK (max_leased >= 1);
GO

IF COL_LENGTH(N'dbo.sq_queues', N'rate_per_second') IS NULL
ALTER TABLE dbo.sq_queues ADD rate_per_second FLOAT NULL CONSTRAINT sq_queues_rate_ck CHECK (rate_per_second > 0);
GO

IF COL_LENGTH(N'dbo.sq_queues', N'rate_burst') IS NULL
ALTER TABLE dbo.sq_queues ADD rate_burst INT NULL CONSTRAINT sq_queues_rate_burst_ck CHECK (rate_burst >= 1);
GO

IF COL_LENGTH(N'dbo.sq_queues', N'rate_tokens') IS NULL
ALTER TABLE dbo.sq_queues ADD rate_tokens FLOAT NULL;
GO

IF COL_LENGTH(N'dbo.sq_queues', N'rate_at') IS NULL
ALTER TABLE dbo.sq_queues ADD rate_at DATETIME2(7) NULL;
GO

IF COL_LENGTH(N'dbo.sq_queues', N'limited') IS NULL
ALTER TABLE dbo.sq_queues ADD limited BIT NOT NULL CONSTRAINT sq_queues_limited_default DEFAULT 0;
GO
