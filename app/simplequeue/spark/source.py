"""The data source Spark knows as `simplequeue`."""

from __future__ import annotations

import uuid

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from simplequeue.client import Client
from simplequeue.spark.options import OptionError, WriteOptions, check_service
from simplequeue.spark.reading import HISTORY_SCHEMA, HistoryReader, ReadOptions
from simplequeue.spark.streaming import (
    STREAM_SCHEMA,
    QueueStreamReader,
    QueueStreamWriter,
    RefusedStream,
    StreamOptions,
)
from simplequeue.spark.writing import QueueWriter


class SimplequeueDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "simplequeue"

    def schema(self) -> str:
        # Spark asks before it says whether it reads a batch or a stream (the options are the same
        # either way): `source` tells. So a stream cannot read the queue by default; without
        # .option("source", "queue") its columns are the history's and streamReader refuses it.
        return STREAM_SCHEMA if self.options.get("source") == "queue" else HISTORY_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        url = (self.options.get("url") or "").rstrip("/")
        api_key = self.options.get("api_key") or None
        listed: list[str] = []
        if url and not self.options.get("queue"):
            check_service(url, api_key, None, to="read history")
            with Client(url, api_key=api_key) as sq:
                listed = [q.name for q in sq.queues()]
        options = ReadOptions.of(self.options, listed)
        if self.options.get("queue"):
            check_service(options.url, options.api_key, options.queues[0], to="read history")
        return HistoryReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return QueueWriter(self._write_options(schema, overwrite, '.mode("append")'))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = self._write_options(schema, overwrite, '.outputMode("append")')
        return QueueStreamWriter(options, fallback_id=uuid.uuid4().hex)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        # PySpark (4.3 still) hides an exception raised here behind its own
        # "UnboundLocalError: ... 'reader'": the refusal is raised by the reader's first call instead.
        try:
            options = StreamOptions.of(self.options)
            check_service(options.url, options.api_key, options.queue, to="pop")
        except OptionError as refusal:
            return RefusedStream(str(refusal))
        return QueueStreamReader(options)

    def _write_options(self, schema: StructType, overwrite: bool, append: str) -> WriteOptions:
        if overwrite:
            raise OptionError(f"a queue is only appended to: use {append}")
        options = WriteOptions.of(self.options, schema.fieldNames())
        check_service(options.url, options.api_key, options.queue, to="push")
        return options
