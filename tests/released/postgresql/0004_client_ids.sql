-- simplequeue schema v4 for PostgreSQL: ids that producers chose are remembered after their items
-- finish, so that a push retried after its first attempt was processed inserts nothing.
-- An item pushed with its own id and no dedup_key claims the id here (remember_id on the item says
-- so); the claim holds while the item lives (expires_at NULL) and for its queue's
-- dedup_window_seconds after it finished (completed, or dead and purged), then the sweep deletes it.
-- The primary key is the id alone, as sq_items' is: concurrent pushes of one id wait for each other
-- here, whatever queue they name. Items pushed before this version claimed nothing.
ALTER TABLE sq_items ADD COLUMN IF NOT EXISTS remember_id boolean NOT NULL DEFAULT false;

CREATE TABLE IF NOT EXISTS sq_client_ids (
    id uuid PRIMARY KEY,
    queue text NOT NULL,
    created_at timestamptz NOT NULL,  -- the item's, for the answer a retry gets
    expires_at timestamptz            -- NULL while the item lives
);

-- The sweep's walk over claims whose window has passed.
CREATE INDEX IF NOT EXISTS sq_client_ids_expires ON sq_client_ids (expires_at) WHERE expires_at IS NOT NULL;
