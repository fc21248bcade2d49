"""The checks a table's new row versions pass before they are written: NOT NULL,
varchar(n)/char(n) lengths, enum labels, unique keys and unique expression or partial
indexes (against each other and the table) and CHECK constraints (server/checks.py)."""

from __future__ import annotations

import functools
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from headwater.catalog.constraints import not_null_violation, unique_violation
from headwater.catalog.objects import IndexKey, Key, Table
from headwater.catalog.types import BPCHAR, VARCHAR, PgType, invalid_enum_label
from headwater.server.checks import check_rows, condition_sql
from headwater.server.duckdb_calls import fetch, rows_of_params, unregister_quietly
from headwater.server.py_values import canonical, first_row, py_list
from headwater.storage.duckdb_errors import translate
from headwater.storage.replica import CURRENT, Replica, quote

from headwater.errors import StringTooLong, UniqueViolation


def check(
    table: Table, new: pa.Table, cur: duckdb.DuckDBPyConnection, old: pa.Table | None = None
) -> pa.Table:
    """`new` if its rows satisfy the table's constraints (read on `cur`); else the error.
    `old`: the versions the statement retires (already retired on `cur`)."""
    for col in table.columns:
        arr = new.column(col.name)
        if col.not_null and arr.null_count:
            row = new.filter(pc.is_null(arr)).select([c.name for c in table.columns])
            raise not_null_violation(table, col.name, first_row(row))
        if col.type.pg.category == "E":  # (DuckDB's cast would fail the epoch's apply)
            _check_labels(col.type.pg, arr)
        n = col.type.length
        if n is not None and col.type.pg in (VARCHAR, BPCHAR):
            lengths = pc.utf8_length(arr)
            if pc.any(pc.greater(lengths, n)).as_py():
                raise StringTooLong(f"value too long for type {col.type.sql()}")
    check_rows(table, new, cur)  # as PostgreSQL: before the unique indexes see the row
    for key in table.keys:
        if not _keeps_keys(key, old, new):
            _check_unique(table, key, new, cur)
    for ikey in table.index_keys:
        _check_index_key(table, ikey, new, cur)
    return new


def index_key_text(key: IndexKey) -> str:
    """The key as PostgreSQL's messages show it: `lower(email)`, `a, b`."""
    return ", ".join(key.keys)


def index_key_rows(table: Table, key: IndexKey, source: str, carry: str = "") -> str:
    """The keys (k0, k1, ...) of the rows of `source` the index holds: its predicate's,
    without a NULL in the key; `carry`: a column of `source` to keep before them."""
    exprs = [condition_sql(k, table.columns) for k in key.keys]
    keep = [condition_sql(key.predicate, table.columns)] if key.predicate else []
    keep += [f"({e}) IS NOT NULL" for e in exprs]
    cols = ", ".join([carry] * bool(carry) + [f"{e} AS k{i}" for i, e in enumerate(exprs)])
    return f"SELECT {cols} FROM {source} AS _hw_r WHERE {' AND '.join(keep)}"


def _shown(values: Any) -> str:
    return ", ".join("null" if v is None else str(v) for v in values)


def index_key_violation(key: IndexKey, values: Any) -> UniqueViolation:
    """23505 for a unique index's key `values` (a row's, another row has them)."""
    return UniqueViolation(
        f'duplicate key value violates unique constraint "{key.name}"',
        detail=f"Key ({index_key_text(key)})=({_shown(values)}) already exists.",
    )


def index_key_values(
    table: Table, rows: list[list[Any]], cur: duckdb.DuckDBPyConnection
) -> list[list[tuple[Any, ...] | None]]:
    """Per unique index of the table (`table.index_keys`), each row's key (None for a row
    it does not hold: its predicate's, with a NULL in the key), from one DuckDB
    statement of parameters for the statement's rows: what the batcher checks the fast
    INSERT path's rows against (server/batcher.py), where Python cannot compute them
    (server/fast_index_keys.py)."""
    try:
        out = cur.execute(_index_keys_sql(table, len(rows)), [v for r in rows for v in r])
    except duckdb.Error as e:
        raise translate(e) from None
    found = out.fetchall()
    keys: list[list[tuple[Any, ...] | None]] = []
    pos = 0
    for key in table.index_keys:
        n = len(key.keys)
        keys.append([canonical(tuple(r[pos + 1 : pos + 1 + n])) if r[pos] else None for r in found])
        pos += 1 + n
    return keys


@functools.lru_cache(maxsize=64)
def _index_keys_sql(table: Table, n: int) -> str:
    """SELECT, per unique index, whether the row is in it and its key, of `n` rows given
    as parameters (every column, in order)."""
    items = []
    for key in table.index_keys:
        exprs = [condition_sql(k, table.columns) for k in key.keys]
        held = [f"({condition_sql(key.predicate, table.columns)})"] if key.predicate else []
        held += [f"({e}) IS NOT NULL" for e in exprs]
        items += [f"coalesce({' AND '.join(held)}, false)", *exprs]
    return f"SELECT {', '.join(items)} FROM {rows_of_params(table.columns, n)}"


def duplicate_index_key(cur: duckdb.DuckDBPyConnection, table: Table, key: IndexKey) -> str | None:
    """A key value two of the table's live rows share (CREATE UNIQUE INDEX), as shown."""
    rows = index_key_rows(table, key, Replica.scan(table, CURRENT))
    dup, _ = fetch(cur, f"SELECT * FROM ({rows}) GROUP BY ALL HAVING count(*) > 1 LIMIT 1")
    return _shown(dup.to_pylist()[0].values()) if dup.num_rows else None


def _check_index_key(
    table: Table, key: IndexKey, new: pa.Table, cur: duckdb.DuckDBPyConnection
) -> None:
    """23505 for a new row whose key another new row or a live row of the table has."""
    name = "_hw_check_index"
    cur.register(name, new)
    try:
        mine = index_key_rows(table, key, name)
        theirs = index_key_rows(table, key, Replica.scan(table, CURRENT))
        on = " AND ".join(f"n.k{i} = t.k{i}" for i in range(len(key.keys)))
        hit, _ = fetch(
            cur,
            f"(SELECT * FROM ({mine}) GROUP BY ALL HAVING count(*) > 1 LIMIT 1) UNION ALL"
            f" (SELECT n.* FROM ({mine}) n JOIN ({theirs}) t ON {on} LIMIT 1) LIMIT 1",
        )
    finally:
        unregister_quietly(cur, name)
    if hit.num_rows:
        raise index_key_violation(key, hit.to_pylist()[0].values())


def _check_labels(pg: PgType, arr: pa.ChunkedArray) -> None:
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(pa.string())
    known = pc.or_(pc.is_in(arr, value_set=pa.array(pg.labels, pa.string())), pc.is_null(arr))
    if not pc.all(known).as_py():
        raise invalid_enum_label(pg, arr.filter(pc.invert(known))[0].as_py())


def _keeps_keys(key: Key, old: pa.Table | None, new: pa.Table) -> bool:
    """Does each new row keep the key of the old row in its place (an UPDATE that sets no
    key column)? Then its key was unique in the table and its old row is retired: nothing
    to check, against the table or among the new rows."""
    if old is None or old.num_rows != new.num_rows:
        return False
    try:
        for c in key.columns:
            a, b = old.column(c), new.column(c)
            same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.is_null(b))
            if not pc.all(same).as_py():
                return False
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # types that do not compare
        return False
    return True


def _check_unique(table: Table, key: Key, new: pa.Table, cur: duckdb.DuckDBPyConnection) -> None:
    cols = list(key.columns)
    name = "_hw_check"
    cur.register(name, new.select(cols))
    try:
        bulk = new.num_rows >= BULK_ROWS
        dup = duplicate_mask(new, cols) if not bulk or _repeats(cur, name, cols) else None
        if dup is not None and pc.any(dup).as_py():
            row = new.filter(dup).slice(0, 1)
            raise unique_violation(key, [py_list(row.column(c))[0] for c in key.columns], table)
        on = " AND ".join(f"t.{quote(c)} = n.{quote(c)}" for c in cols)
        hit, _ = fetch(
            cur,
            f"SELECT n.* FROM {name} n JOIN {Replica.scan(table, CURRENT)} t ON {on} LIMIT 1",
        )
    finally:
        unregister_quietly(cur, name)
    if hit.num_rows:
        raise unique_violation(key, [py_list(hit.column(c))[0] for c in key.columns], table)


# From this many rows a batch's keys are checked for repeats by DuckDB (a parallel hash
# aggregate: a 1.2 M-row COPY's (l_orderkey, l_linenumber) in ~0.05 s, Arrow's
# single-threaded grouping 0.1-0.4 s); the mask that names the first repeat is computed
# only when there is one.
BULK_ROWS = 10_000


def _repeats(cur: duckdb.DuckDBPyConnection, name: str, cols: list[str]) -> bool:
    """Does a key without NULLs appear twice among the rows of `name`?"""
    keys = ", ".join(quote(c) for c in cols)
    present = " AND ".join(f"{quote(c)} IS NOT NULL" for c in cols)
    rows = cur.execute(
        f"SELECT 1 FROM {name} WHERE {present} GROUP BY {keys} HAVING count(*) > 1 LIMIT 1"
    ).fetchall()  # (to the end: DuckDB refuses other work on a half-read result)
    return bool(rows)


def duplicate_mask(t: pa.Table, cols: list[str]) -> pa.Array | None:
    """True for rows whose key (no NULLs) already appeared earlier in `t`; None when
    no key repeats (the common case, found by Arrow's hash grouping: a Python pass over
    a 6 M-row COPY's keys took seconds)."""
    if not cols or t.num_rows < 2:
        return None
    keyed = t.select(cols).drop_null()
    try:
        if keyed.group_by(cols, use_threads=False).aggregate([]).num_rows == keyed.num_rows:
            return None
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):  # keys Arrow cannot group
        pass
    seen: set[tuple[Any, ...]] = set()
    out = []
    for key in zip(*(py_list(t.column(c)) for c in cols), strict=True):
        if any(k is None for k in key):
            out.append(False)
        elif key in seen:
            out.append(True)
        else:
            seen.add(key)
            out.append(False)
    return pa.array(out, pa.bool_())
