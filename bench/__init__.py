"""simplequeue's benchmark harness: `python -m bench` (see the README). Not part of the tests."""
