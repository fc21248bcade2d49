"""A transaction's change rows consolidated (storage/changelog.py): the pairwise form an
UPDATE's old and new versions take gives what grouping every column gives."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from headwater.server.transactions import consolidate
from headwater.storage.changelog import (
    RID,
    WEIGHT,
    consolidate_in_python,
    consolidate_pair,
    consolidate_rows,
)

SCHEMA = pa.schema(
    [
        (RID, pa.int64()),
        ("i", pa.int32()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("d", pa.decimal128(15, 2)),
        ("day", pa.date32()),
        ("b", pa.bool_()),
        (WEIGHT, pa.int64()),
    ]
)
FLOATS = [0.0, -0.0, 1.5, float("nan"), float("inf"), None]


def _value(rng: random.Random, name: str) -> Any:
    pick = {
        "i": lambda: rng.choice([1, 2, None]),
        "f": lambda: rng.choice(FLOATS),
        "s": lambda: rng.choice(["a", "b", "", None]),
        "d": lambda: rng.choice([Decimal("1.00"), Decimal("-2.50"), None]),
        "day": lambda: rng.choice([dt.date(2020, 1, 1), dt.date(1999, 12, 31), None]),
        "b": lambda: rng.choice([True, False, None]),
    }
    return pick[name]()


def _rows(t: pa.Table) -> list[tuple[Any, ...]]:
    """Rows in a comparable order (NaN made comparable; -0.0 kept apart from 0.0)."""

    def key(v: Any) -> Any:
        if isinstance(v, float):
            return ("float", repr(v))
        return (type(v).__name__, v)

    return sorted(tuple(key(v) for v in row.values()) for row in t.to_pylist())


def test_pairs_consolidate_as_grouping_does() -> None:
    rng = random.Random(16)
    cols = [f.name for f in SCHEMA if f.name not in (RID, WEIGHT)]
    for _ in range(300):
        n = rng.randrange(1, 30)
        rids = rng.sample(range(1000), n)
        old = {c: [_value(rng, c) for _ in range(n)] for c in cols}
        # each new row: the old one unchanged (it cancels), or some columns changed
        new = {c: list(v) for c, v in old.items()}
        for r in range(n):
            for c in rng.sample(cols, rng.choice([0, 0, 1, 2])):
                new[c][r] = _value(rng, c)
        wa, wb = rng.choice([(-1, 1), (1, -1), (-1, 2)])
        a = pa.table({RID: rids, **old, WEIGHT: [wa] * n}, schema=SCHEMA)
        b = pa.table({RID: rids, **new, WEIGHT: [wb] * n}, schema=SCHEMA)
        pair = consolidate_pair(a, b)
        assert pair is not None
        assert _rows(pair) == _rows(consolidate_rows(pa.concat_tables([a, b])))
        assert pair.column(RID).to_pylist() == sorted(pair.column(RID).to_pylist())


def test_pairs_of_floats_by_their_bits() -> None:
    """0.0 -> -0.0 is a change (PostgreSQL prints -0); NaN -> NaN is none."""
    a = pa.table({RID: [1, 2, 3], "f": [0.0, float("nan"), None], WEIGHT: [-1, -1, -1]})
    b = pa.table({RID: [1, 2, 3], "f": [-0.0, float("nan"), None], WEIGHT: [1, 1, 1]})
    pair = consolidate_pair(a, b)
    assert pair is not None
    assert [(r[RID], repr(r["f"]), r[WEIGHT]) for r in pair.to_pylist()] == [
        (1, "0.0", -1),
        (1, "-0.0", 1),
    ]


def test_not_a_pair() -> None:
    a = pa.table({RID: [1, 2], "x": [1, 2], WEIGHT: [-1, -1]})
    assert consolidate_pair(a, a.slice(0, 1)) is None  # other row counts
    moved = pa.table({RID: [2, 1], "x": [1, 2], WEIGHT: [1, 1]})
    assert consolidate_pair(a, moved) is None  # other row ids
    twice = pa.table({RID: [1, 1], "x": [1, 2], WEIGHT: [-1, -1]})
    assert consolidate_pair(twice, twice) is None  # a row id twice in one part
    listed = pa.table({RID: [1], "x": [[1]], WEIGHT: [-1]})
    assert consolidate_pair(listed, listed) is None  # a type Arrow cannot compare


def test_python_consolidation_keeps_signed_zeros_apart() -> None:
    """The fallback for types Arrow cannot group (a list column here) compares floats
    as the grouping does: 0.0 -> -0.0 stays a change, NaN -> NaN is none."""
    a = pa.table({RID: [1, 2], "f": [0.0, float("nan")], "l": [[1], [2]], WEIGHT: [-1, -1]})
    b = pa.table({RID: [1, 2], "f": [-0.0, float("nan")], "l": [[1], [2]], WEIGHT: [1, 1]})
    got = consolidate_in_python(pa.concat_tables([a, b]))
    assert [(r[RID], repr(r["f"]), r[WEIGHT]) for r in got.to_pylist()] == [
        (1, "0.0", -1),
        (1, "-0.0", 1),
    ]


@pytest.mark.filterwarnings("ignore:Arrow output on a DB-API result")  # (as the server)
def test_duckdb_consolidation_keeps_signed_zeros_apart() -> None:
    """The general path's fallback (DuckDB, for lists and intervals) likewise."""
    a = pa.table({RID: [1, 2], "f": [0.0, 1.5], "l": [[1], [2]], WEIGHT: [-1, -1]})
    b = pa.table({RID: [1, 2], "f": [-0.0, 1.5], "l": [[1], [2]], WEIGHT: [1, 1]})
    got = consolidate(duckdb.connect(), [a, b])
    assert sorted((r[RID], repr(r["f"]), r[WEIGHT]) for r in got.to_pylist()) == [
        (1, "-0.0", 1),
        (1, "0.0", -1),
    ]
