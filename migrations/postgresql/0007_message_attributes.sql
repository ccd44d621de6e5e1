-- simplequeue schema v7 for PostgreSQL: an item may carry message attributes (SQS's MessageAttributes,
-- the HTTP API's `attributes`), kept as the JSON text the service writes (domain/attributes.py):
-- {"name": {"type": "String", "value": "..."}}, names sorted, Binary values in base64. NULL: none.
-- They stay with the item while it lives (dead and redriven too); history does not keep them.
--
-- sq_push_rows and sq_push_planned take them as one more array, p_attributes
-- (store/postgres/functions.sql). A function's arguments are its identity, and CREATE OR REPLACE
-- cannot change them: the signatures without p_attributes (v5's) are dropped here rather than left
-- beside the new ones, which functions.sql then creates. Neither was granted to anyone, so no grant
-- is lost with them.
ALTER TABLE sq_items ADD COLUMN IF NOT EXISTS attributes text;

DROP FUNCTION IF EXISTS sq_push_rows(uuid[], text[], text[], timestamptz[], integer[], text[], text[],
    double precision[], timestamptz[], boolean[], boolean, timestamptz);
DROP FUNCTION IF EXISTS sq_push_planned(uuid[], text[], text[], timestamptz[], integer[], text[], text[],
    double precision[], timestamptz[], boolean[], boolean, timestamptz);
