-- simplequeue schema v13 for PostgreSQL: topics, their subscriptions, and the key that signs what
-- they deliver (Amazon SNS's topics; domain/topics.py).
--
-- attributes and tags: JSON objects of text, read and written whole (a change is a compare-and-set
-- on the text the caller read, store/topics.py), so text rather than jsonb: compared as written.
-- A subscription is one per (topic, protocol, endpoint), as SNS has it: subscribing again answers
-- the one there is. endpoint: the queue's name for protocol 'sqs', the URL for 'http' and 'https'.
CREATE TABLE IF NOT EXISTS sq_topics (
    name text PRIMARY KEY CONSTRAINT sq_topics_name_ck CHECK (char_length(name) BETWEEN 1 AND 256),
    created_at timestamptz NOT NULL,
    modified_at timestamptz,
    attributes text NOT NULL DEFAULT '{}',
    tags text NOT NULL DEFAULT '{}'
);

CREATE TABLE IF NOT EXISTS sq_subscriptions (
    id uuid PRIMARY KEY,
    topic text NOT NULL,
    protocol text NOT NULL CONSTRAINT sq_subscriptions_protocol_ck CHECK (protocol IN ('sqs', 'http', 'https')),
    endpoint text NOT NULL,
    attributes text NOT NULL DEFAULT '{}',
    confirmed boolean NOT NULL,
    token text,
    created_at timestamptz NOT NULL,
    CONSTRAINT sq_subscriptions_endpoint_key UNIQUE (topic, protocol, endpoint)
);

-- One signing key for every replica, made by the first that needs it (private: never logged).
CREATE TABLE IF NOT EXISTS sq_signing_keys (
    name text PRIMARY KEY,
    private_pem text NOT NULL,
    certificate_pem text NOT NULL,
    created_at timestamptz NOT NULL
);
