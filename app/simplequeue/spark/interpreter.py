"""Which Python Spark runs its Python workers with (the data source's tasks run there).

Spark starts them with `spark.pyspark.python`, else PYSPARK_PYTHON as the JVM saw it when it
started, else `python3` from PATH: rarely the virtualenv that has simplequeue, so a script run with
the venv's python failed inside the JVM with `ModuleNotFoundError: simplequeue`. Importing
simplequeue.spark before the session starts sets PYSPARK_PYTHON to this Python when nothing set
it; register() finds a local session whose workers cannot import simplequeue anyway (the session
started first) and says how to fix it, before any job runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Importing simplequeue is quick (no server, no PySpark): the check costs a fraction of a second.
CHECK_SECONDS = 60


class WorkersCannotImport(RuntimeError):
    """A local session's Python workers would fail on the first task."""


def default_to_this_python() -> None:
    """PYSPARK_PYTHON is this Python unless it is set, or Spark already runs in this process (its
    JVM read the environment when it started: a change now would not reach it)."""
    if "PYSPARK_PYTHON" not in os.environ and not spark_running():
        os.environ["PYSPARK_PYTHON"] = sys.executable


def spark_running() -> bool:
    if sys.modules.get("pyspark") is None:  # not imported (or made unimportable): no Spark yet
        return False
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def check_workers(spark: SparkSession) -> None:
    """On a local session, that its workers' Python imports simplequeue (a cluster's executors are
    elsewhere, with the Python their owner set up)."""
    try:
        context = spark.sparkContext
    except AttributeError:  # Spark Connect: no SparkContext here; its server runs the workers
        return
    if not (context.master or "").startswith("local"):
        return
    python = context.getConf().get("spark.pyspark.python") or context.pythonExec
    if not imports_simplequeue(python):
        raise WorkersCannotImport(
            f"Spark's Python workers run {python}, which cannot import simplequeue: set "
            f"PYSPARK_PYTHON={sys.executable} before the Spark session starts (importing "
            "simplequeue.spark before building the session does that)"
        )


def imports_simplequeue(python: str) -> bool:
    try:
        done = subprocess.run(
            [python, "-c", "import simplequeue"], capture_output=True, timeout=CHECK_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
