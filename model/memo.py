"""Bounded memo tables of the step model's pure functions (layer costs, memory terms): a long
sweep must not grow memory without end, so a table that fills up starts again."""

from __future__ import annotations

CACHE_LIMIT = 65536


def remember(cache: dict, key: tuple, value):
    """Store `value` under `key` (emptying a full table first) and return it."""
    if len(cache) >= CACHE_LIMIT:
        cache.clear()
    cache[key] = value
    return value
