-- simplequeue schema v6 for SQLite: what a queue carries beyond its settings.
--
-- modified_at: when the queue's settings or attributes last changed (NULL: never since created).
-- sq_queue_attributes: named values kept for the callers that set them, such as the SQS door's
-- Policy or DelaySeconds; the service's own settings stay columns of sq_queues.
-- sq_queue_tags: a queue's tags (SQS TagQueue). Both go with their queue (delete_queue).
ALTER TABLE sq_queues ADD COLUMN modified_at TEXT;

CREATE TABLE sq_queue_attributes (
    queue TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (queue, name)
) WITHOUT ROWID;

CREATE TABLE sq_queue_tags (
    queue TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (queue, key)
) WITHOUT ROWID;
