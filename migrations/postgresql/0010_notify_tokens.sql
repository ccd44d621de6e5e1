-- simplequeue schema v10 for PostgreSQL: NOTIFY names no queue. Any role that may connect to the
-- database may LISTEN on any channel, so a payload with the queue's name told it every queue's name
-- and activity. The payload's "q" is now a token: the first 16 hex digits of
-- sha256(notify_key || ':' || queue), where notify_key is a random secret in sq_settings, which only
-- the schema's owner (and the service, which reads it) may read. The service maps the tokens of
-- the queues its long-polls wait on back to their names (store/postgres/listen.py); to anyone else
-- a token is a stable pseudonym. sq_ready_token makes it, and sq_items_notify_ready sends it
-- (store/postgres/functions.sql). "q" keeps its key, so that a replica of the release before, during
-- a rolling upgrade, finds no queue of that name and goes on (its waiters hear at their recheck).
INSERT INTO sq_settings (name, value)
VALUES ('notify_key', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''))
ON CONFLICT (name) DO NOTHING;
