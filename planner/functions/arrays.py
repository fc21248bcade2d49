"""PostgreSQL's array functions DuckDB lacks or answers differently (empty arrays, more
than one dimension): SQL macros over DuckDB's list functions, and the dimension functions
over the array's JSON form (one UDF whatever the element type)."""

from __future__ import annotations

import copy
import json as _json
from collections.abc import Callable
from typing import Any

import pglast.ast as A
from headwater.planner.functions.json import fixed_arity
from headwater.planner.functions.nodes import call, cast, column_type
from pglast.enums import BoolExprType, NullTestType

_MACROS = [
    "CREATE OR REPLACE MACRO hw_array_remove(a, x) AS"
    " list_filter(a, lambda e: e IS DISTINCT FROM x)",
    "CREATE OR REPLACE MACRO hw_array_replace(a, x, y) AS"
    " list_transform(a, lambda e: CASE WHEN e IS NOT DISTINCT FROM x THEN y ELSE e END)",
    "CREATE OR REPLACE MACRO hw_array_positions(a, x) AS CASE WHEN a IS NULL THEN NULL ELSE"
    " CAST(list_filter(range(1, len(a) + 1), lambda i: a[i] IS NOT DISTINCT FROM x)"
    " AS INTEGER[]) END",
    "CREATE OR REPLACE MACRO hw_array_position(a, x, s) AS"
    " CAST(list_position(a[s:], x) + s - 1 AS INTEGER)",
    "CREATE OR REPLACE MACRO hw_trim_array(a, n) AS a[1:len(a) - n]",
    # x LIKE ANY/ALL (patterns), PostgreSQL's backslash escape
    "CREATE OR REPLACE MACRO hw_like_any(x, a, i) AS list_bool_or(list_transform(a,"
    " lambda p: CASE WHEN i THEN ilike_escape(x, p, '\\') ELSE like_escape(x, p, '\\') END))",
    "CREATE OR REPLACE MACRO hw_like_all(x, a, i) AS list_bool_and(list_transform(a,"
    " lambda p: CASE WHEN i THEN ilike_escape(x, p, '\\') ELSE like_escape(x, p, '\\') END))",
    "CREATE OR REPLACE MACRO hw_array_to_string(a, d, n) AS array_to_string("
    "list_transform(a, lambda e: coalesce(CAST(e AS VARCHAR), n)), d)",
]


def _dims(text: str) -> list[int]:
    """The lengths of each dimension of an array given as JSON ([] for an empty one)."""
    v = _json.loads(text)
    out: list[int] = []
    while isinstance(v, list) and v:
        out.append(len(v))
        v = v[0]
    return out


def _dims_text(text: str) -> str | None:
    d = _dims(text)
    return "".join(f"[1:{n}]" for n in d) or None


def _ndims(text: str) -> int | None:
    return len(_dims(text)) or None


def _cardinality(text: str) -> int:
    n = 1
    d = _dims(text)
    for x in d:
        n *= x
    return n if d else 0


def _length(text: str, dim: int) -> int | None:
    d = _dims(text)
    return d[dim - 1] if 1 <= dim <= len(d) else None


def _lower(text: str, dim: int) -> int | None:
    return 1 if 1 <= dim <= len(_dims(text)) else None


_UDFS: dict[str, tuple[Callable[..., Any], list[str], str]] = {
    "hw_array_dims": (_dims_text, ["VARCHAR"], "VARCHAR"),
    "hw_array_ndims": (_ndims, ["VARCHAR"], "INTEGER"),
    "hw_cardinality": (_cardinality, ["VARCHAR"], "INTEGER"),
    "hw_array_length": (_length, ["VARCHAR", "INTEGER"], "INTEGER"),
    "hw_array_lower": (_lower, ["VARCHAR", "INTEGER"], "INTEGER"),
}


def install(db: Any) -> None:
    import pyarrow as pa

    types = {"VARCHAR": pa.string, "INTEGER": pa.int32}
    for sql in _MACROS:
        db.execute(sql)
    for name, (fn, params, result) in _UDFS.items():

        def udf(*cols: Any, fn: Callable[..., Any] = fn, result: str = result) -> Any:
            rows = zip(*(c.to_pylist() for c in cols), strict=True)
            out = [None if any(x is None for x in row) else fn(*row) for row in rows]
            return pa.array(out, types[result]())

        db.create_function(
            name,
            fixed_arity(udf, len(params)),
            params,
            result,
            type="arrow",
            null_handling="special",
        )


def _json_text(node: Any) -> Any:
    return cast(call("to_json", node), "text")


def _shape(name: str, n: int) -> Callable[[list[Any]], Any | None]:
    def rewrite(args: list[Any]) -> Any | None:
        if len(args) != n:
            return None
        return call(name, _json_text(args[0]), *args[1:])

    return rewrite


def _macro(name: str, *counts: int) -> Callable[[list[Any]], Any | None]:
    def rewrite(args: list[Any]) -> Any | None:
        return call(name, *args) if len(args) in counts else None

    return rewrite


def _array_position(args: list[Any]) -> Any | None:
    if len(args) == 3:
        return call("hw_array_position", *args)
    if len(args) == 2:
        return cast(call("list_position", *args), "integer")
    return None


def _array_fill(args: list[Any]) -> Any | None:
    """array_fill(v, ARRAY[d1, d2, ...]) with the dimensions written out (lower bounds
    other than 1 are not representable)."""
    if len(args) != 2 or not isinstance(args[1], A.A_ArrayExpr):
        return None
    node = args[0]
    for d in reversed(args[1].elements or ()):
        node = call("repeat", A.A_ArrayExpr(elements=(node,)), d)
    return node


def _unnest(args: list[Any]) -> Any | None:
    """unnest(ARRAY[[...], [...]]): every element, as PostgreSQL unnests any dimensions."""
    if len(args) != 1 or not isinstance(args[0], A.A_ArrayExpr):
        return None
    node, depth = args[0], 1
    while node.elements and all(isinstance(e, A.A_ArrayExpr) for e in node.elements):
        node, depth = node.elements[0], depth + 1
    if depth == 1:
        return None
    flat = args[0]
    for _ in range(depth - 1):
        flat = call("flatten", flat)
    return call("unnest", flat)


REWRITES: dict[str, Callable[[list[Any]], Any | None]] = {
    "unnest": _unnest,
    "array_remove": _macro("hw_array_remove", 2),
    "array_replace": _macro("hw_array_replace", 3),
    "array_positions": _macro("hw_array_positions", 2),
    "array_position": _array_position,
    "trim_array": _macro("hw_trim_array", 2),
    "array_to_string": _macro("hw_array_to_string", 3),
    "array_fill": _array_fill,
    "array_dims": _shape("hw_array_dims", 1),
    "array_ndims": _shape("hw_array_ndims", 1),
    "cardinality": _shape("hw_cardinality", 1),
    "array_length": _shape("hw_array_length", 2),
    "array_upper": _shape("hw_array_length", 2),
    "array_lower": _shape("hw_array_lower", 2),
}


def _arrayish(node: Any) -> bool:
    """Whether an operand is syntactically an array: ARRAY[...], a cast to x[], a slice."""
    if isinstance(node, A.A_ArrayExpr):
        return True
    if isinstance(node, A.TypeCast):
        return bool(node.typeName.arrayBounds)
    if isinstance(node, A.A_Indirection):
        slices = [i for i in node.indirection or () if isinstance(i, A.A_Indices)]
        return bool(slices) and all(i.is_slice for i in slices) and _arrayish(node.arg)
    return False


def _number(node: Any) -> bool:
    return isinstance(node, A.A_Const) and isinstance(node.val, A.Integer | A.Float)


def _operand(node: Any) -> str:
    """What an operand of || is: "array", "element" (a number, a cast to a type that is
    not an array, a column of such a type), "string" (a constant: PostgreSQL reads it
    as an array beside one), "null" or "unknown" (a parameter, an expression)."""
    if _arrayish(node):
        return "array"
    if isinstance(node, A.A_Const):
        if node.isnull:
            return "null"
        return "string" if isinstance(node.val, A.String) else "element"
    if isinstance(node, A.TypeCast):
        return "element"  # (arrayBounds: _arrayish)
    kind = column_type(node)
    if kind is not None:
        return "array" if kind.startswith("_") else "element"
    return "unknown"


def _as_array_of(node: Any, array: Any) -> Any | None:
    """A '{...}' constant as an array of `array`'s type, when that type is known."""
    kind = column_type(array)
    if kind is None and isinstance(array, A.TypeCast):
        return A.TypeCast(arg=node, typeName=array.typeName)
    if kind is None or not kind.startswith("_"):
        return None
    name = A.TypeName(
        names=(A.String(sval=kind[1:]),), typemod=-1, arrayBounds=(A.Integer(ival=-1),)
    )
    return A.TypeCast(arg=node, typeName=name)


def rewrite_operator(op: str, left: Any, right: Any) -> Any | None:
    """array || element, element || array, array || array (a NULL array, a '{...}'
    constant: arrays too) as PostgreSQL's array operators; text || text stays."""
    if op != "||" or left is None:
        return None
    kinds = (_operand(left), _operand(right))
    if "array" not in kinds:
        return None
    if kinds == ("array", "array"):  # NULL only if both are (DuckDB's list_concat: [])
        nulls = [
            A.NullTest(arg=copy.deepcopy(x), nulltesttype=NullTestType.IS_NULL)
            for x in (left, right)
        ]
        both_null = A.BoolExpr(boolop=BoolExprType.AND_EXPR, args=tuple(nulls))
        return A.CaseExpr(
            args=(A.CaseWhen(expr=both_null, result=A.A_Const(isnull=True)),),
            defresult=call("list_concat", left, right),
        )
    if kinds == ("array", "element"):
        return call("list_append", left, right)
    if kinds == ("element", "array"):
        return call("list_prepend", left, right)
    if kinds == ("array", "null"):  # (an untyped NULL is an array: nothing to add)
        return left
    if kinds == ("null", "array"):
        return right
    if kinds == ("array", "string") and (arr := _as_array_of(right, left)) is not None:
        return call("list_concat", left, arr)
    if kinds == ("string", "array") and (arr := _as_array_of(left, right)) is not None:
        return call("list_concat", arr, right)
    return None


_LIKE = {"~~": (False, False), "~~*": (True, False), "!~~": (False, True), "!~~*": (True, True)}


def rewrite_like_any(op: str, is_any: bool, left: Any, right: Any) -> Any | None:
    """x [NOT] [I]LIKE ANY/ALL (array of patterns); NOT LIKE ANY is NOT (LIKE ALL)."""
    if op not in _LIKE or not _arrayish(right):
        return None
    insensitive, negated = _LIKE[op]
    flag = A.A_Const(isnull=False, val=A.Boolean(boolval=insensitive))
    # x NOT LIKE ANY(a) = NOT (x LIKE ALL(a)); x NOT LIKE ALL(a) = NOT (x LIKE ANY(a))
    name = "hw_like_any" if is_any != negated else "hw_like_all"
    node = call(name, left, right, flag)
    return A.BoolExpr(boolop=BoolExprType.NOT_EXPR, args=(node,)) if negated else node
