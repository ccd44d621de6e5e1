-- simplequeue schema v7 for SQLite: an item may carry message attributes (SQS's MessageAttributes,
-- the HTTP API's `attributes`), kept as the JSON text the service writes (domain/attributes.py):
-- {"name": {"type": "String", "value": "..."}}, names sorted, Binary values in base64. NULL: none.
-- They stay with the item while it lives (dead and redriven too); history does not keep them.
ALTER TABLE sq_items ADD COLUMN attributes TEXT;
