"""Rows by key, outside DuckDB, each exact from the epoch it began: the point-read cache.

A point read (`SELECT cols FROM t WHERE key = $1`, server/point_reads.py) costs
~0.35 ms of CPU in DuckDB, five times PostgreSQL's whole read. This index keeps, per
table and per PRIMARY KEY or UNIQUE key, key values -> the rows holding them (a list:
empty when none does) and the epoch from which that answer holds. It is filled by
the reads themselves (a miss reads the key's rows in DuckDB with their `_hw_from`:
`Replica.key_lookup`)
and kept exact by `observe`, which every epoch's change record passes through once
the epoch is visible: each key a change row names is forgotten, so an entry present
is the answer at every epoch from its own up to the newest visible one.

Why a cache filled by reads and not a copy of every table: no build at start or at
the first read, memory bounded by what is read (MAX_KEYS per key), and the upkeep is
order-free (a change forgets its keys, whatever the order of an epoch's retractions
and insertions). Tables without change records (temporary tables) must not be read
through it; an ALTER (a rewrite or a catalog change) forgets the whole table.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from headwater.catalog.objects import Table
from headwater.storage.changelog import EpochRecord

MAX_KEYS = 1 << 17  # entries per table key; beyond it the key's entries are dropped
WHOLESALE = 4096  # change rows in one epoch beyond which a table's entries are dropped
# Misses on one table key after which its table's live rows are read at once (`missed`,
# `fill_all`): reads of many keys once each (pgbench -S over 100 k accounts) otherwise
# pay a DuckDB read per key, ~0.5-1 ms against ~1-2 µs a row read in bulk. Once read,
# the next bulk read waits for as many misses as 1/64 of the rows it got.
BULK_AFTER = 256

Row = tuple[Any, ...]


class _TableEntries:
    def __init__(self, table: Table) -> None:
        self.table = table  # the catalog object the rows are shaped by
        self.keys: dict[tuple[str, ...], dict[Row, tuple[int, list[Row]]]] = {}


class KeyIndex:
    def __init__(self) -> None:
        self._tables: dict[int, _TableEntries] = {}
        self._changed: dict[int, int] = {}  # table oid -> newest visible epoch changing it
        # (table oid, key) -> (misses, misses that make a bulk read)
        self._misses: dict[tuple[int, tuple[str, ...]], tuple[int, int]] = {}

    def rows(self, table: Table, key: tuple[str, ...], values: Row, epoch: int) -> list[Row] | None:
        """The rows whose `key` columns equal `values` at `epoch` (a visible epoch), or
        None when the index cannot tell (then read DuckDB and `fill`)."""
        t = self._tables.get(table.oid)
        if t is None or t.table is not table:
            return None
        entries = t.keys.get(key)
        if entries is None:
            return None
        entry = entries.get(values)
        if entry is None or entry[0] > epoch:
            return None
        return entry[1]

    def fill(
        self,
        table: Table,
        key: tuple[str, ...],
        values: Row,
        epoch: int,
        since: int,
        rows: list[Row],
    ) -> None:
        """Remember `rows`, what DuckDB holds for `values` at `epoch`, valid from epoch
        `since` (their newest version's `_hw_from`, or `epoch` if none). Skipped when an
        epoch after `epoch` changed the table meanwhile (the read ran off the loop)."""
        entries = self._entries(table, key, epoch, 1)
        if entries is not None:
            entries[values] = (since, rows)

    def missed(self, table: Table, key: tuple[str, ...]) -> bool:
        """Count a miss; True when it is time to read the table's live rows at once
        (then `fill_all`)."""
        k = (table.oid, key)
        n, due = self._misses.get(k, (0, BULK_AFTER))
        self._misses[k] = (n + 1, due)
        return n + 1 == due

    def fill_all(
        self,
        table: Table,
        key: tuple[str, ...],
        epoch: int,
        found: dict[Row, tuple[int, list[Row]]],
    ) -> None:
        """Remember every key value's rows at `epoch` (values -> (since, rows), as `fill`
        takes them); too many for MAX_KEYS: nothing (and no bulk read again)."""
        self._misses[(table.oid, key)] = (0, max(BULK_AFTER, len(found) // 64))
        if len(found) > MAX_KEYS:
            self._misses[(table.oid, key)] = (0, 0)  # never reached again
            return
        entries = self._entries(table, key, epoch, len(found))
        if entries is not None:
            entries.update(found)

    def _entries(
        self, table: Table, key: tuple[str, ...], epoch: int, adding: int
    ) -> dict[Row, tuple[int, list[Row]]] | None:
        """The key's entries, with room for `adding` more (else emptied first); None when
        an epoch after `epoch` changed the table (what was read at `epoch` is stale)."""
        if self._changed.get(table.oid, 0) > epoch:
            return None
        t = self._tables.get(table.oid)
        if t is None or t.table is not table:
            t = self._tables[table.oid] = _TableEntries(table)
        entries = t.keys.get(key)
        if entries is None or len(entries) + adding > MAX_KEYS:
            entries = t.keys[key] = {}
        return entries

    def observe(self, rec: EpochRecord) -> None:
        """An epoch became visible (Committer.on_durable): forget what it changed."""
        epoch = rec.epoch
        for oid in (*rec.rewrites, *rec.catalog):
            self._changed[oid] = epoch
            self._tables.pop(oid, None)
        for oid, changes in rec.changes.items():
            if not changes.num_rows:
                continue
            self._changed[oid] = epoch
            t = self._tables.get(oid)
            if t is None:
                continue
            if changes.num_rows > WHOLESALE:
                del self._tables[oid]
                continue
            try:
                for key, entries in t.keys.items():
                    for values in _key_values(changes, key):
                        entries.pop(values, None)
            except Exception:  # (a change record of another shape): forget the table
                del self._tables[oid]

    def forget(self) -> None:
        """Drop every entry (storage failure undo, tests)."""
        self._tables.clear()
        self._misses.clear()


def _key_values(changes: pa.Table, key: tuple[str, ...]) -> list[Row]:
    cols = [changes.column(c).to_pylist() for c in key]
    if len(cols) == 1:
        return [(v,) for v in cols[0]]
    return list(zip(*cols, strict=True))
