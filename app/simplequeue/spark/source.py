"""The data source Spark knows as `simplequeue`."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceWriter
from pyspark.sql.types import StructType

from simplequeue.spark.options import OptionError, WriteOptions, check_reachable
from simplequeue.spark.writing import QueueWriter


class SimplequeueDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "simplequeue"

    def schema(self) -> str:
        raise OptionError("reading from simplequeue is not available yet; writes are")

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = self._write_options(schema, overwrite)
        return QueueWriter(options)

    def _write_options(self, schema: StructType, overwrite: bool) -> WriteOptions:
        if overwrite:
            raise OptionError('a queue is only appended to: use .mode("append")')
        options = WriteOptions.of(self.options, schema.fieldNames())
        check_reachable(options.url, options.api_key)
        return options
