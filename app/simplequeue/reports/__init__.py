"""Reports on what the queues did, made from the history the service keeps (spark_report: with
Spark, read through the data source; the CLI's `simplequeue spark report`)."""
