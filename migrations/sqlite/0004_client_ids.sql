-- simplequeue schema v4 for SQLite: ids that producers chose are remembered after their items
-- finish (see the PostgreSQL migration of the same number for the design).
ALTER TABLE sq_items ADD COLUMN remember_id INTEGER NOT NULL DEFAULT 0 CHECK (remember_id IN (0, 1));

CREATE TABLE sq_client_ids (
    id TEXT NOT NULL PRIMARY KEY,
    queue TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT
) WITHOUT ROWID;

CREATE INDEX sq_client_ids_expires ON sq_client_ids (expires_at) WHERE expires_at IS NOT NULL;
