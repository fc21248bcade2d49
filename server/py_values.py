"""Table values as the fast write paths keep them in Python.

The batcher (server/batcher.py) holds rows and key values as Python objects: a date as
`datetime.date`, a timestamp as `datetime.datetime`, a uuid as its canonical text. A
value Python's types cannot hold (PostgreSQL's infinite dates and timestamps, dates BC,
years past 9999) stays Arrow's integer, as `batcher.coerce` gives it for such input:
days since 1970-01-01, or microseconds. Converting those with `to_pylist()` raised
OverflowError: a general commit of an infinite date wedged the server with its write
lock held (twelfth session).
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pyarrow as pa

Row = tuple[Any, ...]
_EPOCH = dt.date(1970, 1, 1)
_EPOCH_TS = dt.datetime(1970, 1, 1)
_MIN_DAY = (dt.date.min - _EPOCH).days
_MAX_DAY = (dt.date.max - _EPOCH).days
_MIN_US = (dt.datetime.min - _EPOCH_TS) // dt.timedelta(microseconds=1)
_MAX_US = (dt.datetime.max - _EPOCH_TS) // dt.timedelta(microseconds=1)


def py_list(column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """The column's values as Python objects, those out of Python's range as integers."""
    try:
        return column.to_pylist()
    except (OverflowError, ValueError):
        pass
    t = column.type
    if pa.types.is_date32(t):
        days = column.cast(pa.int32()).to_pylist()
        return [d if d is None or not _MIN_DAY <= d <= _MAX_DAY else _day(d) for d in days]
    if pa.types.is_timestamp(t) and t.unit == "us":
        tz = dt.UTC if t.tz is not None else None
        us = column.cast(pa.int64()).to_pylist()
        return [u if u is None or not _MIN_US <= u <= _MAX_US else _micro(u, tz) for u in us]
    raise TypeError(f"values of {t} out of Python's range")


def first_row(table: pa.Table) -> Row:
    """The first row of a non-empty Arrow table, as `py_list` converts."""
    return tuple(py_list(c.slice(0, 1))[0] for c in table.columns)


def _day(d: int) -> dt.date:
    return _EPOCH + dt.timedelta(days=d)


def _micro(u: int, tz: dt.tzinfo | None) -> dt.datetime:
    out = _EPOCH_TS + dt.timedelta(microseconds=u)
    return out.replace(tzinfo=tz) if tz is not None else out


def canonical(values: Row) -> Row:
    """Key values DuckDB returned as Python objects, as the fast paths keep them (a uuid
    as its text: DuckDB's Arrow results and batcher.coerce give that)."""
    if any(isinstance(v, uuid.UUID) for v in values):
        return tuple(str(v) if isinstance(v, uuid.UUID) else v for v in values)
    return values
