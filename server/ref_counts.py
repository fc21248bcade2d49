"""How many live rows of a referencing table hold each FOREIGN KEY value.

A point DELETE from a table some FOREIGN KEY references (Django deletes an object
after its dependents) took the general path: its referencing rows' actions need
DuckDB. With these counts the batcher tells in Python whether any row references the
deleted one: none, and the DELETE is a point write like any other (no action to
take); some, and it takes the general path, which raises 23503 or cascades. The
counts are read from DuckDB at the first such DELETE (under the write lock, after a
flush) and kept in step as the key sets are: by every staged row (server/batcher.py)
and by every general commit's change rows (`observe`); a referencing table whose
definition changes, or with more than MAX_VALUES distinct values, is read again or
left to the general path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import duckdb
import pyarrow as pa
from headwater.catalog.objects import ForeignKey, Table
from headwater.planner import foreign_keys as fk_plan
from headwater.server.fast_refs import comparable
from headwater.server.py_values import canonical, py_list
from headwater.storage.changelog import WEIGHT
from headwater.storage.replica import CURRENT, Replica, quote

Row = tuple[Any, ...]
Pair = tuple[Table, ForeignKey]  # a referencing table and one of its FOREIGN KEYs
MAX_VALUES = 1_000_000  # distinct values counted per FOREIGN KEY


_GRAPH: dict[int, tuple[Any, dict[int, tuple[list[Pair], list[Pair] | None]]]] = {}


def _pairs(catalog: Any, parent: Table) -> tuple[list[Pair], list[Pair] | None]:
    """All FOREIGN KEYs referencing `parent`, and the same list or None when one of
    them compares values other than integers, text or uuid; worked out once per catalog
    version and table (the write paths ask at every statement)."""
    hit = _GRAPH.get(id(catalog))
    if hit is None or hit[0] is not catalog:
        if len(_GRAPH) >= 64:
            _GRAPH.clear()
        hit = _GRAPH[id(catalog)] = (catalog, {})
    found = hit[1].get(parent.oid)
    if found is None:
        pairs = fk_plan.referencing(catalog.tables(), parent.oid)
        counted = all(comparable(t, fk.columns, parent, fk.ref_columns) for t, fk in pairs)
        found = hit[1][parent.oid] = (pairs, pairs if counted else None)
    return found


def references(catalog: Any, parent: Table) -> list[Pair]:
    """The FOREIGN KEYs that reference `parent` (and their tables)."""
    return _pairs(catalog, parent)[0]


def referencing(catalog: Any, parent: Table) -> list[Pair] | None:
    """The FOREIGN KEYs that reference `parent`, or None when one of them is not
    counted here (the general path)."""
    return _pairs(catalog, parent)[1]


class _Counts:
    __slots__ = ("table", "positions", "counts")

    def __init__(self, table: Table, fk: ForeignKey, counts: Counter[Row]) -> None:
        self.table = table  # the version counted: another one is read again
        names = [c.name for c in table.columns]
        self.positions = tuple(names.index(c) for c in fk.columns)
        self.counts = counts

    def add(self, row: Row, weight: int) -> None:
        values = tuple(row[i] for i in self.positions)
        if None in values:
            return  # references nothing
        n = self.counts[values] + weight
        if n:
            self.counts[values] = n
        else:
            del self.counts[values]


class RefCounts:
    """The batcher's counts, per (referencing table oid, FOREIGN KEY name)."""

    def __init__(self, table_of: Callable[[int], Table | None]) -> None:
        self._table_of = table_of
        self._counts: dict[int, dict[str, _Counts]] = {}  # table oid -> fk name -> counts
        self._too_big: dict[tuple[int, str], Table] = {}

    def missing(self, pairs: list[Pair]) -> list[Pair]:
        """The pairs not counted yet (and not known to be too many)."""
        out = []
        for table, fk in pairs:
            if self._current(table.oid).get(fk.name) is None:
                if self._too_big.get((table.oid, fk.name)) is not table:
                    out.append((table, fk))
        return out

    def load(self, cur: duckdb.DuckDBPyConnection, table: Table, fk: ForeignKey) -> None:
        """Count the table's live values of `fk` (blocking; under the write lock)."""
        self._current(table.oid)  # (counts of an older version of the table go)
        cols = ", ".join(quote(c) for c in fk.columns)
        present = " AND ".join(f"{quote(c)} IS NOT NULL" for c in fk.columns)
        found = cur.execute(
            f"SELECT {cols}, count(*) FROM {Replica.scan(table, CURRENT)} AS t"
            f" WHERE {present} GROUP BY ALL LIMIT {MAX_VALUES + 1}"
        ).to_arrow_table()
        if found.num_rows > MAX_VALUES:
            self._too_big[(table.oid, fk.name)] = table
            return
        rows = zip(*(py_list(c) for c in found.columns), strict=True)
        counts = Counter({canonical(tuple(r[:-1])): r[-1] for r in rows})
        self._counts.setdefault(table.oid, {})[fk.name] = _Counts(table, fk, counts)

    def referenced(self, parent: Table, row: Row, pairs: list[Pair]) -> bool | None:
        """Does any counted row reference `row` of `parent`? None when a pair is not
        counted (the caller takes the general path)."""
        names = [c.name for c in parent.columns]
        for table, fk in pairs:
            counts = self._current(table.oid).get(fk.name)
            if counts is None:
                return None
            values = tuple(row[names.index(c)] for c in fk.ref_columns)
            if None not in values and counts.counts.get(values):
                return True
        return False

    def add(self, table: Table, rows: Iterable[Row], weight: int) -> None:
        """Rows of `table` added (1) or removed (-1) by a staged write."""
        counted = self._current(table.oid)
        for counts in counted.values():
            for row in rows:
                counts.add(row, weight)

    def observe(self, oid: int, changes: pa.Table, keep: bool) -> None:
        """A general commit's change rows of table `oid` (`keep` False: too many to
        follow one by one, counted again when next needed)."""
        counted = self._current(oid)
        if not counted:
            return
        if not keep:
            del self._counts[oid]
            return
        table = next(iter(counted.values())).table
        cols = [py_list(changes.column(c.name)) for c in table.columns]
        rows = list(zip(*cols, strict=True))
        for counts in counted.values():
            for row, w in zip(rows, changes.column(WEIGHT).to_pylist(), strict=True):
                counts.add(row, w)

    def forget(self, oids: set[int] | None = None) -> None:
        if oids is None:
            self._counts.clear()
            self._too_big.clear()
            return
        for oid in oids:
            self._counts.pop(oid, None)
        for k in [k for k in self._too_big if k[0] in oids]:
            del self._too_big[k]

    def _current(self, oid: int) -> dict[str, _Counts]:
        """The counts of table `oid`, dropped if its definition changed since."""
        counted = self._counts.get(oid)
        if not counted:
            return {}
        table = next(iter(counted.values())).table
        if self._table_of(oid) is not table:
            del self._counts[oid]
            return {}
        return counted
