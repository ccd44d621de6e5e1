-- simplequeue schema v5 for SQL Server: ids that producers chose are remembered after their items
-- finish, so that a push retried after its first attempt was processed inserts nothing.
--
-- Run as 0001 is: one statement at a time (each ends with ';' on its last line, no line inside one
-- does), all in one transaction under the migration lock. Every statement is guarded, so running the
-- file again is harmless and a half-built schema is completed.
--
-- An item pushed with its own id and no dedup_key claims the id here (remember_id on the item says
-- so); the claim holds while the item lives (expires_at NULL) and for its queue's
-- dedup_window_seconds after it finished (completed, or dead and purged), then the sweep deletes it.
-- Items pushed before this version claimed nothing: the default says so.
IF COL_LENGTH(N'dbo.sq_items', N'remember_id') IS NULL
ALTER TABLE dbo.sq_items ADD remember_id BIT NOT NULL CONSTRAINT sq_items_remember_id_df DEFAULT 0;

-- The primary key is the id alone, as sq_items' id index is: concurrent pushes of one id wait for each
-- other here (push_batch locks the key, a key-range lock while it is missing), whatever queue they
-- name. queue and created_at are the item's, for the answer a retry gets once the item is gone.
IF OBJECT_ID(N'dbo.sq_client_ids', N'U') IS NULL
CREATE TABLE dbo.sq_client_ids (
    id UNIQUEIDENTIFIER NOT NULL,
    queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    created_at DATETIME2(7) NOT NULL,
    expires_at DATETIME2(7) NULL,
    CONSTRAINT sq_client_ids_pk PRIMARY KEY CLUSTERED (id)
);

-- The sweep's walk over claims whose window has passed; claims of live items (NULL) are not in it.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'dbo.sq_client_ids') AND name = N'sq_client_ids_expires')
CREATE NONCLUSTERED INDEX sq_client_ids_expires ON dbo.sq_client_ids (expires_at) WHERE expires_at IS NOT NULL;
