-- simplequeue schema v6 for SQL Server: pushing is a stored procedure, so that an application can push
-- inside its own transaction (the item exists if and only if the application's transaction commits),
-- and the service pushes through the same procedure. The procedures (dbo.sq_push_items,
-- dbo.sq_push_batch, dbo.sq_push) and dbo.sq_utf8_bytes are store/mssql/procedures.sql's, applied
-- after the migrations by every migrate; this version adds the table they read.
--
-- Split at its GO lines (store/migrations.py, split_statements) and sent a batch at a time, in one
-- transaction under the migration lock; every batch is guarded, so running the file again is harmless.
--
-- dbo.sq_settings: the limits the database cannot see otherwise (the service's own are settings of
-- its process): max_payload_bytes (SIMPLEQUEUE_MAX_PAYLOAD_BYTES, default 262144) and
-- max_payload_depth (64). Written here with the defaults, left alone when present: a deployment with
-- another limit updates its row.
IF OBJECT_ID(N'dbo.sq_settings', N'U') IS NULL
CREATE TABLE dbo.sq_settings (
    name NVARCHAR(64) NOT NULL,
    value NVARCHAR(256) NOT NULL,
    CONSTRAINT sq_settings_pk PRIMARY KEY CLUSTERED (name)
);
GO

INSERT INTO dbo.sq_settings (name, value)
SELECT s.name, s.value
FROM (VALUES (N'max_payload_bytes', N'262144'), (N'max_payload_depth', N'64')) AS s(name, value)
WHERE NOT EXISTS (SELECT 1 FROM dbo.sq_settings AS t WHERE t.name = s.name);
GO
