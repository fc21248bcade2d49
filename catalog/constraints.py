"""PostgreSQL's wording for constraint violations, shared by every write path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from headwater.catalog.objects import Key, Table

from headwater.errors import NotNullViolation, UniqueViolation


def _shown(values: Sequence[Any]) -> str:
    return ", ".join("null" if v is None else str(v) for v in values)


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
