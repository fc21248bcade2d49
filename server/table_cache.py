"""What the fast paths work out once per table version (compiled CHECKs, index keys,
generated columns, the columns they read): remembered by the Table object itself, so
that DDL (a new Table) is worked out afresh."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from headwater.catalog.objects import Table

T = TypeVar("T")
LIMIT = 1024  # table versions remembered per function (then forgotten at once)


def per_table(compute: Callable[[Table], T]) -> Callable[[Table], T]:
    """`compute(table)` remembered for that Table object."""
    cache: dict[int, tuple[Table, Any]] = {}

    @functools.wraps(compute)
    def cached(table: Table) -> T:
        hit = cache.get(id(table))
        if hit is not None and hit[0] is table:
            return hit[1]  # type: ignore[no-any-return]
        out = compute(table)
        if len(cache) >= LIMIT:
            cache.clear()
        cache[id(table)] = (table, out)  # (the table is held: its id is not reused)
        return out

    return cached
