"""FOREIGN KEY checks of the fast write paths, as set lookups in the batcher's key sets.

An ORM's table nearly always holds a FOREIGN KEY (a comment's post_id), and Django's
save() sets every column, the FOREIGN KEY's too. Such an INSERT, or a point UPDATE of
the key's columns, took the general path: a writing transaction of its own, ~100 per
second. Here each new row's key is looked up in the referenced table's key set, which
the batcher keeps exact under the write lock (server/batcher.py `_keys`); 23503 as
PostgreSQL's RI trigger says it otherwise. What changes a referenced key (a DELETE
from the referenced table, an UPDATE of its key) keeps the general path, whose checks
and actions run in DuckDB after the batcher's staged rows are there.

Taken when the key's columns are integers, text or uuid on both sides (compared exactly
in Python, as they compare in PostgreSQL); anything else takes the general path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from headwater.catalog.objects import ForeignKey, Relation, Table
from headwater.catalog.types import INT2, INT4, INT8, TEXT, UUID, VARCHAR
from headwater.server.foreign_keys import missing_key, mixed_nulls

from headwater.errors import SQLError

Row = tuple[Any, ...]
_INTS = frozenset({INT2, INT4, INT8})
_TEXTS = frozenset({TEXT, VARCHAR})


@dataclass(frozen=True)
class RefCheck:
    """One FOREIGN KEY as a lookup: the referencing row's values at `positions` (in the
    order of the referenced key's columns) must be in the key set of `ref`'s `key`."""

    fk: ForeignKey
    ref: Table
    key: str  # the name of the referenced table's PRIMARY KEY or UNIQUE constraint
    positions: tuple[int, ...]
    shown: tuple[int, ...]  # the row's positions of fk.columns, for the DETAIL

    def values(self, row: Row) -> Row:
        return tuple(row[i] for i in self.positions)


def comparable(
    table: Table, columns: Sequence[str], ref: Table, ref_columns: Sequence[str]
) -> bool:
    """Do the two tables' columns pair off as integers, text or uuid on both sides (so
    that Python compares their values as PostgreSQL does)?"""
    for mine, theirs in zip(columns, ref_columns, strict=True):
        a, b = table.column(mine), ref.column(theirs)
        if a is None or b is None:
            return False
        kinds = {a.type.pg, b.type.pg}
        if not (kinds <= _INTS or kinds <= _TEXTS or kinds == {UUID}):
            return False
    return True


def ref_checks(table: Table, by_oid: Callable[[int], Relation | None]) -> list[RefCheck] | None:
    """The table's FOREIGN KEYs as lookups, in creation order; None when one of them
    cannot be checked so."""
    out = []
    names = [c.name for c in table.columns]
    for fk in table.foreign_keys:
        ref = by_oid(fk.ref_table)
        if not isinstance(ref, Table):
            return None
        key = next((k for k in ref.keys if sorted(k.columns) == sorted(fk.ref_columns)), None)
        if key is None:
            return None
        mine = [fk.columns[fk.ref_columns.index(c)] for c in key.columns]
        if not comparable(table, mine, ref, key.columns):
            return None
        positions = tuple(names.index(c) for c in mine)
        shown = tuple(names.index(c) for c in fk.columns)
        out.append(RefCheck(fk, ref, key.name, positions, shown))
    return out


def refs_error(
    table: Table,
    checks: list[RefCheck],
    row: Row,
    present: Callable[[RefCheck, Row], bool],
    before: Row | None = None,
) -> SQLError | None:
    """PostgreSQL's 23503 for `row` if one of its keys is missing (`present` says what
    is there); with `before` (an UPDATE's old row), only the keys the UPDATE changed."""
    for c in checks:
        values = c.values(row)
        if before is not None and c.values(before) == values:
            continue  # PostgreSQL's RI trigger skips an unchanged key too
        if None in values:
            if c.fk.match == "f" and any(v is not None for v in values):
                return mixed_nulls(table, c.fk)
            continue
        if not present(c, values):
            return missing_key(table, c.fk, c.ref, tuple(row[i] for i in c.shown))
    return None


def sets_reference(table: Table, columns: set[str]) -> bool:
    """Does a SET of `columns` change one of the table's FOREIGN KEYs?"""
    return any(c in columns for fk in table.foreign_keys for c in fk.columns)
