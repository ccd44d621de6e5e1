"""simplequeue: a queue service over HTTP, backed by a relational database."""

from app.main import create_app
from app.settings import Settings

__all__ = ["Settings", "create_app"]
__version__ = "0.1.0"
