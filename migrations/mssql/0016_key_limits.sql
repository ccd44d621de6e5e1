-- simplequeue schema v16 for SQL Server: per-key weights and limits. A key of a fair queue may
-- weigh more than the others (weight: its items' rank step is 1/weight, so it takes that many turns
-- to another's one) and have limits of its own (max_leased, rate_per_second; the bucket's state
-- rate_tokens counted at rate_at). The queue's max_leased_per_key and rate_per_key_per_second are
-- every key's limits unless the key's own say otherwise. Every batch is guarded: running the file
-- again is harmless.
IF COL_LENGTH(N'dbo.sq_fair_keys', N'weight') IS NULL
ALTER TABLE dbo.sq_fair_keys ADD weight FLOAT NOT NULL CONSTRAINT sq_fair_keys_weight_df DEFAULT 1
    CONSTRAINT sq_fair_keys_weight_ck CHECK (weight > 0);
GO

IF COL_LENGTH(N'dbo.sq_fair_keys', N'max_leased') IS NULL
ALTER TABLE dbo.sq_fair_keys ADD max_leased INT NULL CONSTRAINT sq_fair_keys_max_leased_ck CHECK (max_leased >= 1);
GO

IF COL_LENGTH(N'dbo.sq_fair_keys', N'rate_per_second') IS NULL
ALTER TABLE dbo.sq_fair_keys ADD rate_per_second FLOAT NULL
    CONSTRAINT sq_fair_keys_rate_ck CHECK (rate_per_second > 0);
GO

IF COL_LENGTH(N'dbo.sq_fair_keys', N'rate_tokens') IS NULL
ALTER TABLE dbo.sq_fair_keys ADD rate_tokens FLOAT NULL;
GO

IF COL_LENGTH(N'dbo.sq_fair_keys', N'rate_at') IS NULL
ALTER TABLE dbo.sq_fair_keys ADD rate_at DATETIME2(7) NULL;
GO

IF COL_LENGTH(N'dbo.sq_queues', N'max_leased_per_key') IS NULL
ALTER TABLE dbo.sq_queues ADD max_leased_per_key INT NULL
    CONSTRAINT sq_queues_max_leased_per_key_ck CHECK (max_leased_per_key >= 1);
GO

IF COL_LENGTH(N'dbo.sq_queues', N'rate_per_key_per_second') IS NULL
ALTER TABLE dbo.sq_queues ADD rate_per_key_per_second FLOAT NULL
    CONSTRAINT sq_queues_rate_per_key_ck CHECK (rate_per_key_per_second > 0);
GO

-- A key's leases, counted by a pop of a queue with per-key limits and by the keys' pages. Keyed
-- items only: a pop's walk of the lapsed leases can never take it for sq_items_lapsed.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_items') AND name = N'sq_items_key_leased')
CREATE NONCLUSTERED INDEX sq_items_key_leased ON dbo.sq_items (queue, fairness_key, visible_at)
    WHERE status = 'leased' AND fairness_key IS NOT NULL;
GO
