"""Unique index keys computed in Python, for the fast INSERT path.

`CREATE UNIQUE INDEX ON users (lower(email))` and `... (email) WHERE deleted_at IS
NULL` are what migrations create for case-insensitive and soft-delete uniqueness. An
INSERT of constants into such a table takes the batcher's fast path, which checks the
rows' keys of each index against the index's live keys (server/batcher.py). The keys
of the common shapes are computed here, per row, without DuckDB: a column, or lower()
or upper() of a text column whose value is ASCII (other characters' case mappings are
DuckDB's: a non-ASCII value, or any other expression, has DuckDB compute the
statement's keys: server/constraints.py `index_key_values`, ~0.5-1 ms a statement);
the WHERE of a partial index as server/fast_checks.py compiles CHECKs.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import pglast.ast as A
from headwater.catalog.objects import IndexKey, Table
from headwater.catalog.types import BOOL, INT2, INT4, INT8, TEXT, UUID, VARCHAR
from headwater.server.fast_checks import column_position, condition
from headwater.server.table_cache import per_table
from pglast import parse_sql

Row = tuple[Any, ...]
_CASES: dict[str, Callable[[str], str]] = {"lower": str.lower, "upper": str.upper}
_PLAIN = frozenset({INT2, INT4, INT8, TEXT, VARCHAR, BOOL, UUID})


class NotAscii(Exception):
    """A value whose case mapping is left to DuckDB."""


@per_table
def compiled(table: Table) -> list[Callable[[Row], Row | None]] | None:
    """Per unique index of the table (`index_keys` order) a function giving a row's key
    (None: the index does not hold the row); None when one index is of another shape.
    Worked out once per table version."""
    fns = [_index(key, table) for key in table.index_keys]
    return None if None in fns else fns  # type: ignore[return-value]


def key_values(table: Table, rows: list[Any]) -> list[list[Row | None]] | None:
    """Each row's key of each unique index (None: the index does not hold the row), as
    server/constraints.py `index_key_values` gives them; None when DuckDB must compute
    them (an index of another shape, a value that is not ASCII)."""
    fns = compiled(table)
    if fns is None:
        return None
    try:
        return [[fn(tuple(r)) for r in rows] for fn in fns]
    except NotAscii:
        return None


def _index(key: IndexKey, table: Table) -> Callable[[Row], Row | None] | None:
    parts = [_part(k, table) for k in key.keys]
    if any(p is None for p in parts):
        return None
    held = condition(key.predicate, table) if key.predicate else None
    if key.predicate and held is None:
        return None
    getters: list[Callable[[Row], Any]] = [p for p in parts if p is not None]

    def key_of(row: Row) -> Row | None:
        if held is not None and held(row) is not True:
            return None
        values = tuple(g(row) for g in getters)
        return None if None in values else values

    return key_of


def _part(text: str, table: Table) -> Callable[[Row], Any] | None:
    """A function of a row giving one key expression's value, or None."""
    try:
        node = parse_sql(f"SELECT {text}")[0].stmt.targetList[0].val  # type: ignore[union-attr]
    except Exception:
        return None
    at = column_position(node, table)
    if at is not None:  # (types whose Python values are DuckDB's, as the batcher keeps them)
        return operator.itemgetter(at) if table.columns[at].type.pg in _PLAIN else None
    if (
        isinstance(node, A.FuncCall)
        and len(node.funcname) == 1
        and node.funcname[0].sval in _CASES
        and node.args is not None
        and len(node.args) == 1
        and not (node.agg_star or node.agg_distinct or node.over or node.agg_filter)
    ):
        i = column_position(node.args[0], table)
        if i is None or table.columns[i].type.pg not in (TEXT, VARCHAR):
            return None
        case = _CASES[node.funcname[0].sval]

        def cased(row: Row) -> Any:
            v = row[i]
            if v is None:
                return None
            if not v.isascii():
                raise NotAscii
            return case(v)

        return cased
    return None
