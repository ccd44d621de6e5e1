-- simplequeue schema v12 for PostgreSQL: the queues that long-polls wait on. A NOTIFY serializes
-- the commits of every transaction that sends one (PostgreSQL takes one lock, cluster-wide, at each
-- notifying commit), so a push that nobody waits for should send none: the trigger that wakes
-- long-polls (sq_items_notify_ready, store/postgres/functions.sql) now notifies only the queues
-- listed here until their expires_at. Each replica lists the queues its long-polls wait on, from
-- its probe, for a minute at a time (store/postgres/waited.py); a waiter that a missed NOTIFY
-- leaves asleep finds its items at the probe's recheck. UNLOGGED: a crash empties it, no standby
-- holds it, and the replicas list their queues again within a minute (at once when they
-- reconnect); nothing else is lost, since it only saves NOTIFYs.
CREATE UNLOGGED TABLE IF NOT EXISTS sq_waited (
    queue text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
