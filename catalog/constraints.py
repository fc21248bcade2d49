"""PostgreSQL's wording for constraint violations, shared by every write path."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from headwater.catalog.objects import Key, Table

from headwater.errors import NotNullViolation, UniqueViolation


def _shown(values: Sequence[Any]) -> str:
    return ", ".join(_text(v) for v in values)


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


def shown_row(values: Sequence[Any]) -> str:
    """A row as PostgreSQL's "Failing row contains (...)" shows it."""
    return _shown(values)


def not_null_violation(table: Table, column: str, row: Sequence[Any]) -> NotNullViolation:
    return NotNullViolation(
        f'null value in column "{column}" of relation "{table.name}" violates not-null constraint',
        detail=f"Failing row contains ({_shown(row)}).",
    )


def unique_violation(key: Key, values: Sequence[Any]) -> UniqueViolation:
    return UniqueViolation(
        f'duplicate key value violates unique constraint "{key.name}"',
        detail=f"Key ({', '.join(key.columns)})=({_shown(values)}) already exists.",
    )
