-- simplequeue schema v11 for SQLite: topics, their subscriptions, and the key that signs what they
-- deliver (Amazon SNS's topics; domain/topics.py).
--
-- attributes and tags: JSON objects of text, read and written whole (a change is a compare-and-set
-- on the text the caller read, store/topics.py). A subscription is one per (topic, protocol,
-- endpoint), as SNS has it: subscribing again answers the one there is. endpoint: the queue's name
-- for protocol 'sqs', the URL for 'http' and 'https'.
CREATE TABLE sq_topics (
    name TEXT NOT NULL PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 256),
    created_at TEXT NOT NULL,
    modified_at TEXT,
    attributes TEXT NOT NULL DEFAULT '{}',
    tags TEXT NOT NULL DEFAULT '{}'
) WITHOUT ROWID;

CREATE TABLE sq_subscriptions (
    id TEXT NOT NULL PRIMARY KEY,
    topic TEXT NOT NULL,
    protocol TEXT NOT NULL CHECK (protocol IN ('sqs', 'http', 'https')),
    endpoint TEXT NOT NULL,
    attributes TEXT NOT NULL DEFAULT '{}',
    confirmed INTEGER NOT NULL,
    token TEXT,
    created_at TEXT NOT NULL,
    UNIQUE (topic, protocol, endpoint)
) WITHOUT ROWID;

-- One signing key for every replica, made by the first that needs it (private: never logged).
CREATE TABLE sq_signing_keys (
    name TEXT NOT NULL PRIMARY KEY,
    private_pem TEXT NOT NULL,
    certificate_pem TEXT NOT NULL,
    created_at TEXT NOT NULL
) WITHOUT ROWID;
