-- simplequeue schema v10 for PostgreSQL: NOTIFY names no queue. Any role that may connect to the
-- database may LISTEN on any channel, so a payload with the queue's name told it every queue's name
-- and activity. The payload's "q" is now a token: the first 16 hex digits of
-- sha256(notify_key || ':' || queue), where notify_key is a random secret in sq_settings, which only
-- the schema's owner (and the service, which reads it) may read. The service maps the tokens of
-- the queues its long-polls wait on back to their names (store/postgres/listen.py); to anyone else
-- a token is a stable pseudonym. "q" keeps its key, so that a replica of the release before, during
-- a rolling upgrade, finds no queue of that name and goes on (its waiters hear at their recheck).
INSERT INTO sq_settings (name, value)
VALUES ('notify_key', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''))
ON CONFLICT (name) DO NOTHING;

-- A queue's token. SECURITY DEFINER, so that any writer of sq_items (a bulk load by a role that may
-- not read sq_settings included) notifies; not executable by PUBLIC, or anyone could compute the
-- tokens of the names it guesses.
CREATE OR REPLACE FUNCTION sq_ready_token(queue text) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
AS $$
    SELECT left(encode(sha256(convert_to(s.value || ':' || queue, 'UTF8')), 'hex'), 16)
    FROM sq_settings AS s
    WHERE s.name = 'notify_key'
$$;

-- 0001's trigger function, with the token in place of the name.
CREATE OR REPLACE FUNCTION sq_items_notify_ready() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
AS $$
BEGIN
    PERFORM pg_notify('simplequeue_ready', json_build_object('q', sq_ready_token(queue), 'n', count(*))::text)
    FROM new_items WHERE status = 'ready' GROUP BY queue;
    RETURN NULL;
END
$$;

-- As 0005 does for its SECURITY DEFINER functions: names resolve in this schema only.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION sq_ready_token(text) SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION sq_items_notify_ready() SET search_path = %I, pg_temp', current_schema());
END
$$;
REVOKE ALL ON FUNCTION sq_ready_token(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION sq_items_notify_ready() FROM PUBLIC;
