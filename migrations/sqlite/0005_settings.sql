-- simplequeue schema v5 for SQLite: limits that only the service knows (its settings), kept where
-- a push inside the caller's own transaction (simplequeue.outbox) can read them. `simplequeue
-- migrate` and the service's start write the service's values.
CREATE TABLE sq_settings (
    name TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);

INSERT INTO sq_settings (name, value) VALUES ('max_payload_bytes', '262144'), ('max_payload_depth', '64');
