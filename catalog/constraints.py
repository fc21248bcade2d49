"""PostgreSQL's wording for constraint violations, shared by every write path."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from headwater.catalog.objects import Key, Table
from headwater.catalog.pgtypes import text_encoder

from headwater.errors import NotNullViolation, UniqueViolation


def _text(v: Any) -> str:
    """A value as PostgreSQL's text output shows it (timestamptz in UTC: the row's
    session zone is not known here)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, bytes):
        return "\\x" + v.hex()
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC)
        text = v.replace(tzinfo=None).isoformat(sep=" ")
        text = text.rstrip("0") if v.microsecond else text
        return text + ("+00" if v.tzinfo is not None else "")
    return str(v)


def not_null_violation(table: Table, column: str, row: Sequence[Any]) -> NotNullViolation:
    shown = typed_text(table, [c.name for c in table.columns], row)
    return NotNullViolation(
        f'null value in column "{column}" of relation "{table.name}" violates not-null constraint',
        detail=f"Failing row contains ({shown}).",
    )


def unique_violation(key: Key, values: Sequence[Any], table: Table) -> UniqueViolation:
    shown = typed_text(table, key.columns, values)
    return UniqueViolation(
        f'duplicate key value violates unique constraint "{key.name}"',
        detail=f"Key ({', '.join(key.columns)})=({shown}) already exists.",
    )


def typed_text(table: Table, columns: Sequence[str], values: Sequence[Any]) -> str:
    """Values of `table`'s `columns` as PostgreSQL prints them (NULL as null), each by
    its column's output function (an infinite date, kept as Arrow's day number, prints
    `infinity`)."""
    out = []
    for name, v in zip(columns, values, strict=True):
        col = table.column(name)
        if v is None:
            out.append("null")
            continue
        try:
            assert col is not None
            out.append(text_encoder(col.type)(v).decode())
        except Exception:  # a value the codec does not take as is: Python's text
            out.append(_text(v))
    return ", ".join(out)
