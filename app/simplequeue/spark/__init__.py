"""simplequeue for Spark: a PySpark (4 or later) Python data source that talks to the service over
its HTTP API, so every engine, dedup rule and API key applies unchanged and no JDBC driver is needed.

    from simplequeue.spark import register
    register(spark)
    (df.write.format("simplequeue").option("url", "http://sq:8000").option("queue", "jobs")
        .mode("append").save())

Executors import this package and simplequeue.client only (install `simplequeue[spark]` on them).
Importing it before the session starts makes this Python the workers' when PYSPARK_PYTHON is unset
(see simplequeue.spark.interpreter).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simplequeue.spark.interpreter import check_workers, default_to_this_python

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

default_to_this_python()


def register(spark: SparkSession) -> None:
    """Register the data source under the short name `simplequeue`. A local session whose Python
    workers cannot import simplequeue is refused here, naming PYSPARK_PYTHON."""
    from simplequeue.spark.source import SimplequeueDataSource

    check_workers(spark)
    spark.dataSource.register(SimplequeueDataSource)


__all__ = ["register"]
