"""What a queue carries beyond its settings: attributes kept for the callers that set them, tags,
and when it last changed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True, slots=True)
class QueueMetadata:
    created_at: datetime
    modified_at: datetime | None  # settings or attributes last written; None: not since created
    attributes: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def last_modified(self) -> datetime:
        return self.modified_at or self.created_at


@dataclass(frozen=True, slots=True)
class MetadataChange:
    """Values to write (name -> value) and names to remove, of attributes and of tags. The change
    is made whole, or not at all when the queue would then have more than `max_tags` tags."""

    set_attributes: Mapping[str, str] = field(default_factory=dict)
    unset_attributes: frozenset[str] = frozenset()
    set_tags: Mapping[str, str] = field(default_factory=dict)
    unset_tags: frozenset[str] = frozenset()
    max_tags: int = 50

    @property
    def touches(self) -> bool:
        """An attribute changes: the queue's modified time moves (tags alone do not move it)."""
        return bool(self.set_attributes or self.unset_attributes)
