-- simplequeue schema v22 for PostgreSQL: sq_push takes a fairness_key, as sq_push_batch does. A
-- function's arguments cannot be changed in place, and a second sq_push beside the old would make
-- every call that leaves fairness_key out ambiguous: the old signature goes, functions.sql makes
-- the new one. Dropped, it would take with it the EXECUTE an application's role was given on it
-- (docs/outbox.md), and that role could push no more after the upgrade; renamed, it keeps them
-- until functions.sql has given them to the new sq_push and dropped it.
DO $$
DECLARE
    old regprocedure := to_regprocedure(
        'sq_push(text, json, integer, double precision, text, text, uuid, timestamptz, timestamptz)');
BEGIN
    IF old IS NOT NULL THEN
        EXECUTE format('ALTER FUNCTION %s RENAME TO sq_push_v21', old);
    END IF;
END
$$;
