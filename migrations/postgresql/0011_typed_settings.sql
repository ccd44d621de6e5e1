-- simplequeue schema v11 for PostgreSQL: the settings core SQL reads are columns of sq_queues, not
-- SQS attribute strings. A queue's dead-letter target and its live items' retention were kept as
-- attributes (sq_queue_attributes 'dead_letter_queue', 'MessageRetentionPeriod', set by the SQS door)
-- that fail, reap and the sweep joined by name; now they are settings like any other, which the REST
-- API sets too. The values move here; RedrivePolicy, which the SQS door now answers from the target
-- and max_attempts, goes with them.
ALTER TABLE sq_queues
    ADD COLUMN IF NOT EXISTS dead_letter_queue text,
    ADD COLUMN IF NOT EXISTS message_retention_seconds integer
        CONSTRAINT sq_queues_message_retention_seconds_check CHECK (message_retention_seconds BETWEEN 60 AND 1209600);

UPDATE sq_queues AS q SET dead_letter_queue = a.value
FROM sq_queue_attributes AS a
WHERE a.queue = q.name AND a.name = 'dead_letter_queue';

UPDATE sq_queues AS q SET message_retention_seconds = a.value::integer
FROM sq_queue_attributes AS a
WHERE a.queue = q.name AND a.name = 'MessageRetentionPeriod';

DELETE FROM sq_queue_attributes WHERE name IN ('dead_letter_queue', 'MessageRetentionPeriod', 'RedrivePolicy');

-- The sweep's expire_retained starts from the queues that keep their items for a time: few.
CREATE INDEX IF NOT EXISTS sq_queues_retained ON sq_queues (name) WHERE message_retention_seconds IS NOT NULL;
