-- simplequeue schema v4 for SQL Server: no lock escalation on the items table.
-- Pops, completions and the sweep take row locks (ROWLOCK, READPAST); a statement that holds
-- about 5,000 of them on one table (a large complete batch, a redrive, a purge) would otherwise
-- be escalated to a table lock, and every pop would wait behind it or, with READPAST, find
-- nothing. ROWLOCK is a hint for the first lock, not a promise against escalation; this is.
ALTER TABLE dbo.sq_items SET (LOCK_ESCALATION = DISABLE);
