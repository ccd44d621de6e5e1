"""simplequeue's benchmark harness: `python -m bench` (see docs/benchmarks.md). Not part of the tests."""
