"""boolean constants in PostgreSQL's input syntax (boolin): 'off'::bool, ' yes '::boolean,
't', '1', 'of' ... DuckDB reads only true/false/t/f/1/0; invalid input raises 22P02."""

from __future__ import annotations

from typing import Any

import pglast.ast as A
from headwater.catalog.pgtypes.integers import bool_in
from headwater.planner.functions.nodes import text_of

_BOOL_TYPES = frozenset({"bool", "boolean"})


def typed_literal(tc: A.TypeCast) -> Any | None:
    """`'off'::boolean` -> FALSE; None if `tc` is no such constant."""
    names = [n.sval.lower() for n in tc.typeName.names if isinstance(n, A.String)]
    if not names or names[-1] not in _BOOL_TYPES or tc.typeName.arrayBounds:
        return None
    text = text_of(tc.arg)
    if text is None:
        return None
    return A.A_Const(isnull=False, val=A.Boolean(boolval=bool_in(text)))
