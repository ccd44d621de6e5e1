"""The behaviour every store must have, by topic (as river's riverdrivertest), run against every
reachable engine through the `store` fixture of tests/conftest.py: SQLite always, PostgreSQL, and
SQL Server when SIMPLEQUEUE_TEST_MSSQL_URL is set. Time moves only when a test moves the clock.
"""
