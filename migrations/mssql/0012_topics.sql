-- simplequeue schema v12 for SQL Server: topics, their subscriptions, and the key that signs what
-- they deliver (Amazon SNS's topics; domain/topics.py).
--
-- Run as 0001 is: one statement at a time, each guarded, all in one transaction under the
-- migration lock. attributes and tags: JSON objects of text, read and written whole (a change is a
-- compare-and-set on the text the caller read, store/topics.py). A subscription is one per (topic,
-- protocol, endpoint); the endpoint's key is its SHA-256, since a URL may pass an index key's 1700
-- bytes.
IF OBJECT_ID(N'dbo.sq_topics', N'U') IS NULL
CREATE TABLE dbo.sq_topics (
    name NVARCHAR(256) COLLATE Latin1_General_100_BIN2 NOT NULL,
    created_at DATETIME2(7) NOT NULL,
    modified_at DATETIME2(7) NULL,
    attributes NVARCHAR(MAX) NOT NULL CONSTRAINT sq_topics_attributes_df DEFAULT N'{}',
    tags NVARCHAR(MAX) NOT NULL CONSTRAINT sq_topics_tags_df DEFAULT N'{}',
    CONSTRAINT sq_topics_pk PRIMARY KEY CLUSTERED (name)
);

IF OBJECT_ID(N'dbo.sq_subscriptions', N'U') IS NULL
CREATE TABLE dbo.sq_subscriptions (
    id UNIQUEIDENTIFIER NOT NULL,
    topic NVARCHAR(256) COLLATE Latin1_General_100_BIN2 NOT NULL,
    protocol VARCHAR(8) NOT NULL CONSTRAINT sq_subscriptions_protocol_ck CHECK (protocol IN ('sqs', 'http', 'https')),
    endpoint NVARCHAR(2048) COLLATE Latin1_General_100_BIN2 NOT NULL,
    endpoint_hash AS CAST(HASHBYTES('SHA2_256', endpoint) AS BINARY(32)) PERSISTED,
    attributes NVARCHAR(MAX) NOT NULL CONSTRAINT sq_subscriptions_attributes_df DEFAULT N'{}',
    confirmed BIT NOT NULL,
    token NVARCHAR(256) NULL,
    created_at DATETIME2(7) NOT NULL,
    CONSTRAINT sq_subscriptions_pk PRIMARY KEY CLUSTERED (id),
    CONSTRAINT sq_subscriptions_endpoint_key UNIQUE (topic, protocol, endpoint_hash)
);

IF OBJECT_ID(N'dbo.sq_signing_keys', N'U') IS NULL
CREATE TABLE dbo.sq_signing_keys (
    name NVARCHAR(64) COLLATE Latin1_General_100_BIN2 NOT NULL,
    private_pem NVARCHAR(MAX) NOT NULL,
    certificate_pem NVARCHAR(MAX) NOT NULL,
    created_at DATETIME2(7) NOT NULL,
    CONSTRAINT sq_signing_keys_pk PRIMARY KEY CLUSTERED (name)
);
