"""boolean and integer constants in PostgreSQL's input syntax: 'off'::bool, ' yes '::boolean,
't', '1', 'of' ... (boolin; DuckDB reads only true/false/t/f/1/0), and '12'::int, whose
input PostgreSQL reads strictly (int4in: '1.5', '1e3', '0x10', '1_000' are 22P02, DuckDB's
cast rounded or read them); invalid input raises 22P02, a value out of range 22003."""

from __future__ import annotations

from typing import Any

import pglast.ast as A
from headwater.catalog.pgtypes.codec import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from headwater.catalog.pgtypes.integers import bool_in, int_in
from headwater.planner.functions.nodes import text_of

_BOOL_TYPES = frozenset({"bool", "boolean"})
_INT_INPUTS = {
    "int2": int_in("smallint", -(2**15), 2**15 - 1),
    "int4": int_in("integer", INT32_MIN, INT32_MAX),
    "int8": int_in("bigint", INT64_MIN, INT64_MAX),
}


def typed_literal(tc: A.TypeCast) -> Any | None:
    """`'off'::boolean` -> FALSE; None if `tc` is no such constant."""
    names = [n.sval.lower() for n in tc.typeName.names if isinstance(n, A.String)]
    if not names or names[-1] not in _BOOL_TYPES or tc.typeName.arrayBounds:
        return None
    text = text_of(tc.arg)
    if text is None:
        return None
    return A.A_Const(isnull=False, val=A.Boolean(boolval=bool_in(text)))


def check_integer_literal(tc: A.TypeCast) -> None:
    """`'1.5'::int`: PostgreSQL's error for a string constant its integer input refuses
    (what it accepts, DuckDB's cast reads alike: the constant is left as it is)."""
    names = [n.sval.lower() for n in tc.typeName.names if isinstance(n, A.String)]
    read = _INT_INPUTS.get(names[-1]) if names and not tc.typeName.arrayBounds else None
    text = text_of(tc.arg) if read is not None else None
    if read is not None and text is not None:
        read(text)
