-- simplequeue schema v5 for PostgreSQL: the push as SQL functions, so that a caller can push inside
-- its own transaction (the item exists if and only if the caller's transaction commits), and the
-- service pushes through the very same code. The functions (sq_push_rows, sq_push_planned,
-- sq_push_batch, sq_push, sq_push_limits and their checks) and their type sq_pushed are
-- store/postgres/functions.sql's, applied after the migrations by every migrate; this version adds
-- the table they read.

-- Limits that only the service knows (its settings); `simplequeue migrate` and the service's start
-- write the service's values here, and the SQL entry points and simplequeue.outbox read them.
CREATE TABLE IF NOT EXISTS sq_settings (
    name text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO sq_settings (name, value) VALUES ('max_payload_bytes', '262144'), ('max_payload_depth', '64')
ON CONFLICT (name) DO NOTHING;
