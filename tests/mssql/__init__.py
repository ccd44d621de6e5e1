"""The SQL Server dialect, checked without a server.

These are statement and binding tests, not a substitute for SQL Server. They show that every batch
parses as T-SQL (sqlglot's tsql dialect), that the pop and the schema have the shape the design
depends on, that every statement gets exactly as many parameters as it has markers and of types
pyodbc binds without asking the server, that rows shaped like pyodbc's become domain values, and
that driver errors become domain errors. Whether SQL Server accepts, plans and locks as intended is
for the conformance suite, run with SIMPLEQUEUE_TEST_MSSQL_URL set against a real server.

No unixODBC is needed: the store under test talks to a recording fake connection through its
``_acquire`` seam, and pyodbc/aioodbc are replaced by stand-in modules where a test needs them.
"""
