"""simplequeue for Spark: a PySpark (4 or later) Python data source that talks to the service over
its HTTP API, so every engine, dedup rule and API key applies unchanged and no JDBC driver is needed.

    from simplequeue.spark import register
    register(spark)
    (df.write.format("simplequeue").option("url", "http://sq:8000").option("queue", "jobs")
        .mode("append").save())

Executors import this package and simplequeue.client only (install `simplequeue[spark]` on them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register the data source under the short name `simplequeue`."""
    from simplequeue.spark.source import SimplequeueDataSource

    spark.dataSource.register(SimplequeueDataSource)


__all__ = ["register"]
