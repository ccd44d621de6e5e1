"""Liveness and readiness (the spec's tag `health`)."""
