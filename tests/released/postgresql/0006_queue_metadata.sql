-- simplequeue schema v6 for PostgreSQL: what a queue carries beyond its settings.
--
-- modified_at: when the queue's settings or attributes last changed (NULL: never since created).
-- sq_queue_attributes: named values kept for the callers that set them, such as the SQS door's
-- Policy or DelaySeconds; the service's own settings stay columns of sq_queues.
-- sq_queue_tags: a queue's tags (SQS TagQueue). Both go with their queue (delete_queue).
ALTER TABLE sq_queues ADD COLUMN IF NOT EXISTS modified_at timestamptz;

CREATE TABLE IF NOT EXISTS sq_queue_attributes (
    queue text NOT NULL,
    name text NOT NULL,
    value text NOT NULL,
    PRIMARY KEY (queue, name)
);

CREATE TABLE IF NOT EXISTS sq_queue_tags (
    queue text NOT NULL,
    key text NOT NULL,
    value text NOT NULL,
    PRIMARY KEY (queue, key)
);
