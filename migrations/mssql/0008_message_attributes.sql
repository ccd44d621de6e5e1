-- simplequeue schema v8 for SQL Server: an item may carry message attributes (SQS's MessageAttributes,
-- the HTTP API's `attributes`), kept as the JSON text the service writes (domain/attributes.py):
-- {"name": {"type": "String", "value": "..."}}, names sorted, Binary values in base64. NULL: none.
-- They stay with the item while it lives (dead and redriven too); history does not keep them.
--
-- Split at its GO lines and sent a batch at a time, as 0006 is, in one transaction under the lock
-- that migrations take; every batch is guarded, so running the file again is harmless.
--
-- dbo.sq_push_items (store/mssql/procedures.sql) reads each item's "attributes" from @items
-- (params.push_json: a JSON string holding the attributes' text, or null) and inserts it as it is.
-- dbo.sq_push_batch and dbo.sq_push push no attributes: their @items carry none, so the column
-- stays NULL.
IF COL_LENGTH(N'dbo.sq_items', N'attributes') IS NULL
ALTER TABLE dbo.sq_items ADD attributes NVARCHAR(MAX) NULL;
GO
