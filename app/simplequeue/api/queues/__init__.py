"""Queues: their settings and counts, dead items, history (the spec's tag `queues`)."""
