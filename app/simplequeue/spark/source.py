"""The data source Spark knows as `simplequeue`."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructType

from simplequeue.client import Client
from simplequeue.spark.options import OptionError, WriteOptions, check_reachable
from simplequeue.spark.reading import HISTORY_SCHEMA, HistoryReader, ReadOptions
from simplequeue.spark.writing import QueueWriter


class SimplequeueDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "simplequeue"

    def schema(self) -> str:
        return HISTORY_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        url = (self.options.get("url") or "").rstrip("/")
        api_key = self.options.get("api_key") or None
        listed: list[str] = []
        if url and not self.options.get("queue"):
            check_reachable(url, api_key)
            with Client(url, api_key=api_key) as sq:
                listed = [q.name for q in sq.queues()]
        options = ReadOptions.of(self.options, listed)
        check_reachable(options.url, options.api_key)
        return HistoryReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = self._write_options(schema, overwrite)
        return QueueWriter(options)

    def _write_options(self, schema: StructType, overwrite: bool) -> WriteOptions:
        if overwrite:
            raise OptionError('a queue is only appended to: use .mode("append")')
        options = WriteOptions.of(self.options, schema.fieldNames())
        check_reachable(options.url, options.api_key)
        return options
