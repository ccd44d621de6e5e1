-- simplequeue schema v4 for SQLite: ids that producers chose are remembered after their items
-- finish, so that a push retried after its first attempt was processed inserts nothing.
-- An item pushed with its own id and no dedup_key is marked remember_id. While it lives, sq_items
-- holds its id; when it finishes (completed, or dead and purged) the transaction that deletes it
-- writes the id here, until the queue's dedup_window_seconds have passed; then the sweep deletes it.
-- One writer at a time (BEGIN IMMEDIATE) means no push can slip between the delete and this
-- insert, so unlike the server engines a push claims nothing: it only reads. Items pushed before
-- this version are not remembered.
ALTER TABLE sq_items ADD COLUMN remember_id INTEGER NOT NULL DEFAULT 0 CHECK (remember_id IN (0, 1));

CREATE TABLE sq_client_ids (
    id TEXT NOT NULL PRIMARY KEY,
    queue TEXT NOT NULL,
    created_at TEXT NOT NULL,  -- the item's, for the answer a retry gets
    expires_at TEXT NOT NULL
) WITHOUT ROWID;

CREATE INDEX sq_client_ids_expires ON sq_client_ids (expires_at);
