"""simplequeue: a queue service over HTTP, backed by a relational database."""

from importlib.metadata import version

__version__ = version("simplequeue")  # one source: pyproject.toml, through the package's metadata
