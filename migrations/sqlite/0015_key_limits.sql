-- simplequeue schema v15 for SQLite: per-key weights and limits. A key of a fair queue may weigh
-- more than the others (weight: its items' rank step is 1/weight, so it takes that many turns to
-- another's one) and have limits of its own (max_leased, rate_per_second; the bucket's state
-- rate_tokens counted at rate_at). The queue's max_leased_per_key and rate_per_key_per_second are
-- every key's limits unless the key's own say otherwise.
ALTER TABLE sq_fair_keys ADD COLUMN weight REAL NOT NULL DEFAULT 1 CHECK (weight > 0);
ALTER TABLE sq_fair_keys ADD COLUMN max_leased INTEGER CHECK (max_leased >= 1);
ALTER TABLE sq_fair_keys ADD COLUMN rate_per_second REAL CHECK (rate_per_second > 0);
ALTER TABLE sq_fair_keys ADD COLUMN rate_tokens REAL;
ALTER TABLE sq_fair_keys ADD COLUMN rate_at TEXT;
ALTER TABLE sq_queues ADD COLUMN max_leased_per_key INTEGER CHECK (max_leased_per_key >= 1);
ALTER TABLE sq_queues ADD COLUMN rate_per_key_per_second REAL CHECK (rate_per_key_per_second > 0);

-- A key's leases, counted by a pop of a queue with per-key limits and by the keys' pages. Keyed
-- items only: a pop's walk of the lapsed leases (queue, status 'leased') can never take it for
-- sq_items_lapsed. Unkeyed items' leases are counted along sq_items_lapsed.
CREATE INDEX IF NOT EXISTS sq_items_key_leased ON sq_items (queue, fairness_key, visible_at)
    WHERE status = 'leased' AND fairness_key IS NOT NULL;
