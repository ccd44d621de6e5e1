"""Migration files as the runners and a DBA read them: statements, batch separators, scripts."""

from __future__ import annotations

import os
import subprocess

from simplequeue.store.migrations import as_script, load_migrations, script, split_statements

from tests.test_e2e import simplequeue_command

PROCEDURE = """-- a procedure must stand alone in its batch
IF OBJECT_ID(N'dbo.sq_demo') IS NULL EXEC(N'CREATE PROCEDURE dbo.sq_demo AS SELECT 1');
GO
-- its body keeps its semicolons
ALTER PROCEDURE dbo.sq_demo @n INT AS
BEGIN
    SET NOCOUNT ON;
    SELECT @n;
END
go
-- nothing but comments: no batch
GO
"""


def test_batch_separators_split_a_file_into_whole_batches() -> None:
    batches = split_statements(PROCEDURE)
    assert len(batches) == 2
    assert batches[1].count(";") == 2, "the procedure's body is sent whole"
    assert batches[1].rstrip().endswith("END")


def test_files_without_separators_split_at_each_statement() -> None:
    sql = "CREATE TABLE a (x int);\n-- why\nCREATE INDEX a_x ON a (x);\n"
    assert split_statements(sql) == ["CREATE TABLE a (x int)", "CREATE INDEX a_x ON a (x)"]


def test_a_sql_server_script_ends_each_statement_with_go_and_others_stay_as_written() -> None:
    for migration in load_migrations("mssql"):
        script = as_script(migration.sql, "mssql")
        assert script.count("\nGO\n") == len(split_statements(migration.sql)), migration.name
    sqlite = load_migrations("sqlite")[0]
    assert as_script(sqlite.sql, "sqlite") == sqlite.sql


def test_migrate_print_gives_a_dba_a_script_without_touching_a_server() -> None:
    env = {
        **os.environ,
        # Nothing listens there: printing must not connect.
        "SIMPLEQUEUE_DATABASE_URL": "mssql+odbc://sa:secret@127.0.0.1:9/queue?TrustServerCertificate=yes",
    }
    printed = subprocess.run(
        [*simplequeue_command(), "migrate", "--print"], capture_output=True, text=True, timeout=60, env=env
    )
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.count("-- migration ") == len(load_migrations("mssql"))
    assert "\nGO\n" in printed.stdout
    assert "-- routines (store/mssql/procedures.sql)" in printed.stdout


def test_migrate_print_gives_postgresql_the_migrations_then_the_functions() -> None:
    env = {**os.environ, "SIMPLEQUEUE_DATABASE_URL": "postgresql://nobody@127.0.0.1:9/queue"}
    printed = subprocess.run(
        [*simplequeue_command(), "migrate", "--print"], capture_output=True, text=True, timeout=60, env=env
    )
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == script("postgresql") + "\n"
    functions = printed.stdout.index("-- routines (store/postgres/functions.sql)")
    assert printed.stdout.rindex("-- migration ") < functions
    assert printed.stdout[functions:].count("CREATE OR REPLACE FUNCTION sq_push_rows(") == 1
