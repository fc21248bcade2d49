"""PostgreSQL's json/jsonb functions and operators DuckDB lacks or prints differently.

json and jsonb are both DuckDB JSON holding the text PostgreSQL prints (see
catalog/pgtypes/jsonb.py); the functions below work on that text with jsonb's semantics
(containment, key existence, paths, set/insert/delete) as Python UDFs over Arrow batches.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pglast.ast as A
from headwater.catalog.pgtypes.jsonb import jsonb_dump, jsonb_load
from headwater.planner.functions import jsonpath
from headwater.planner.functions.nodes import call, cast, column_type, const
from pglast.enums import A_Expr_Kind, BoolExprType

# -- jsonb semantics on Python values ----------


def _path(text: str) -> list[str]:
    """A text[] path: '{a,b,1}' as written, or DuckDB's '[a, b, 1]' of a list value."""
    inner = text.strip()[1:-1]
    if not inner.strip():
        return []
    return [p.strip().strip('"') for p in inner.split(",")]


def _index(container: list[Any], key: str) -> int | None:
    try:
        i = int(key)
    except ValueError:
        return None
    if i < 0:
        i += len(container)
    return i if 0 <= i < len(container) else None


def _get_path(v: Any, path: list[str]) -> Any:
    """The value at `path`, or _MISSING."""
    for key in path:
        if isinstance(v, dict):
            if key not in v:
                return _MISSING
            v = v[key]
        elif isinstance(v, list):
            i = _index(v, key)
            if i is None:
                return _MISSING
            v = v[i]
        else:
            return _MISSING
    return v


_MISSING = object()


def _as_text(v: Any) -> str | None:
    """->> and #>>: a string unquoted, JSON null as SQL NULL, anything else as jsonb text."""
    if v is _MISSING or v is None:
        return None
    return v if isinstance(v, str) else jsonb_dump(v)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return a == b
    return type(a) is type(b) and a == b


def _contains(a: Any, b: Any, top: bool = True) -> bool:
    """jsonb @>: b's structure and values appear in a."""
    if isinstance(a, dict):
        return isinstance(b, dict) and all(
            k in a and _contains(a[k], x, False) for k, x in b.items()
        )
    if isinstance(a, list):
        if isinstance(b, list):
            return all(any(_contains(e, x, False) for e in a) for x in b)
        # a top-level array contains a primitive it holds
        return top and not isinstance(b, dict) and any(_equal(e, b) for e in a)
    return not isinstance(b, dict | list) and _equal(a, b)


def _exists(v: Any, key: str) -> bool:
    """jsonb ?: a key of an object, a string element of an array, or the string itself."""
    if isinstance(v, dict):
        return key in v
    if isinstance(v, list):
        return any(isinstance(e, str) and e == key for e in v)
    return isinstance(v, str) and v == key


def _concat(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        return {**a, **b}
    left = a if isinstance(a, list) else [a]
    right = b if isinstance(b, list) else [b]
    return left + right


def _delete_key(v: Any, key: str) -> Any:
    if isinstance(v, dict):
        return {k: x for k, x in v.items() if k != key}
    if isinstance(v, list):
        return [e for e in v if not (isinstance(e, str) and e == key)]
    raise ValueError("cannot delete from scalar")


def _delete_keys(v: Any, keys: list[str]) -> Any:
    for k in keys:
        v = _delete_key(v, k)
    return v


def _delete_index(v: Any, i: int) -> Any:
    if isinstance(v, list):
        j = _index(v, str(i))
        return v if j is None else v[:j] + v[j + 1 :]
    raise ValueError(
        "cannot delete from scalar"
        if not isinstance(v, dict)
        else "cannot delete from object using integer index"
    )


def _set(v: Any, path: list[str], new: Any, create: bool, insert: int | None = None) -> Any:
    """jsonb_set (insert None) and jsonb_insert (insert 0: before, 1: after) at `path`."""
    if not path:
        return v
    key, rest = path[0], path[1:]
    if isinstance(v, dict):
        out = dict(v)
        if rest:
            if key in out:
                out[key] = _set(out[key], rest, new, create, insert)
        elif insert is not None:
            if key in out:
                raise ValueError("cannot replace existing key")
            out[key] = new
        elif key in out or create:
            out[key] = new
        return out
    if isinstance(v, list):
        out_l = list(v)
        try:
            i = int(key)
        except ValueError:
            raise ValueError(f'path element at position 1 is not an integer: "{key}"') from None
        if rest:
            j = _index(out_l, key)
            if j is not None:
                out_l[j] = _set(out_l[j], rest, new, create, insert)
            return out_l
        n = len(out_l)
        if i < 0:
            i += n
        if insert is not None:
            pos = max(0, min(n, i + insert))
            return out_l[:pos] + [new] + out_l[pos:]
        if 0 <= i < n:
            out_l[i] = new
        elif create:
            out_l = [new, *out_l] if i < 0 else [*out_l, new]
        return out_l
    raise ValueError("cannot set path in scalar")


def _delete_path(v: Any, path: list[str]) -> Any:
    if not path:
        return v
    key, rest = path[0], path[1:]
    if isinstance(v, dict):
        if key not in v:
            return v
        out = dict(v)
        if rest:
            out[key] = _delete_path(out[key], rest)
        else:
            del out[key]
        return out
    if isinstance(v, list):
        j = _index(v, key)
        if j is None:
            return v
        if rest:
            return v[:j] + [_delete_path(v[j], rest)] + v[j + 1 :]
        return v[:j] + v[j + 1 :]
    raise ValueError("cannot delete path in scalar")


def _strip_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _strip_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_strip_nulls(x) for x in v]
    return v


def _pretty(v: Any, depth: int = 0) -> str:
    pad = "    " * (depth + 1)
    end = "    " * depth
    if isinstance(v, dict) and v:
        items = sorted(v.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode()))
        body = ",\n".join(f"{pad}{jsonb_dump(k)}: {_pretty(x, depth + 1)}" for k, x in items)
        return "{\n" + body + "\n" + end + "}"
    if isinstance(v, list) and v:
        body = ",\n".join(pad + _pretty(x, depth + 1) for x in v)
        return "[\n" + body + "\n" + end + "]"
    return jsonb_dump(v)


def _array_length(j: str) -> int:
    v = jsonb_load(j)
    if not isinstance(v, list):
        raise ValueError(
            "cannot get array length of a scalar"
            if not isinstance(v, dict)
            else "cannot get array length of a non-array"
        )
    return len(v)


def _compact(v: Any) -> str:
    """json's own text for a value json builds (no spaces, keys in order)."""
    if isinstance(v, dict):
        return "{" + ",".join(jsonb_dump(k) + ":" + _compact(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_compact(x) for x in v) + "]"
    return jsonb_dump(v)


def _load_ordered(text: str) -> Any:
    """json text as Python values, object keys in their written order (duplicates kept
    last), numbers as Decimal."""
    import json as _json

    return _json.loads(text, parse_float=Decimal, parse_int=Decimal)


def _json_agg_text(text: str) -> str:
    """json_agg's text: elements as json, ", " between them, "\n " before an array or object."""
    items = _load_ordered(text)
    out = []
    for i, x in enumerate(items):
        sep = "" if i == 0 else ", "
        if isinstance(x, dict | list):
            sep += "\n " if i else ""
        out.append(sep + _compact(x))
    return "[" + "".join(out) + "]"


def _json_object_agg_text(text: str) -> str:
    obj = _load_ordered(text)
    if not obj:
        return "{ }"
    return "{ " + ", ".join(f"{jsonb_dump(k)} : {_compact(x)}" for k, x in obj.items()) + " }"


def _json_build_array_text(text: str) -> str:
    return "[" + ", ".join(_compact(x) for x in _load_ordered(text)) + "]"


def _merge_objects(text: str) -> str:
    merged: dict[str, Any] = {}
    for obj in _load_ordered(text):
        merged.update(obj)
    return _compact(merged)


def _entries(j: str, text: bool) -> list[dict[str, Any]]:
    """json(b)_each's rows: key and value (as json text, or ->>'s text)."""
    v = jsonb_load(j)
    if not isinstance(v, dict):
        raise ValueError("cannot call json_each on a non-object")
    return [{"key": k, "value": _as_text(x) if text else jsonb_dump(x)} for k, x in v.items()]


_ARRAY_ITEM = re.compile(r'"((?:[^"\\]|\\.)*)"|([^{},\s][^{},]*)')


def _text_array(text: str) -> list[str | None]:
    """The items of a text[] in PostgreSQL's syntax ('{a,"b c",NULL}', nested flattened),
    or of DuckDB's list text ('[a, b]')."""
    if text.startswith("["):
        return [p.strip() for p in text[1:-1].split(",")] if text.strip("[] ") else []
    out: list[str | None] = []
    for quoted, bare in _ARRAY_ITEM.findall(text):
        if bare:
            bare = bare.strip()
            out.append(None if bare.upper() == "NULL" else bare)
        else:
            out.append(re.sub(r"\\(.)", r"\1", quoted))
    return out


def _json_object(keys: str, values: str | None, jsonb: bool) -> str:
    """json_object(text[]) of key/value pairs, or json_object(keys, values)."""
    items = _text_array(keys)
    if values is None:
        if len(items) % 2:
            raise ValueError("array must have even number of elements")
        pairs = list(zip(items[::2], items[1::2], strict=True))
    else:
        vals = _text_array(values)
        if len(vals) != len(items):
            raise ValueError("mismatched array dimensions")
        pairs = list(zip(items, vals, strict=True))
    if jsonb:
        return jsonb_dump(dict(pairs))
    body = ", ".join(f"{jsonb_dump(k)} : {jsonb_dump(v)}" for k, v in pairs)
    return "{" + body + "}"


def _path_vars(v: str | None) -> Any:
    return None if v is None else jsonb_load(v)


def _path_query(j: str, p: str, v: str | None) -> list[str] | None:
    if j is None or p is None:
        return None
    return [jsonb_dump(x) for x in jsonpath.query(jsonb_load(j), p, _path_vars(v))]


def _path_first(j: str, p: str, v: str | None) -> str | None:
    if j is None or p is None:
        return None
    items = jsonpath.query(jsonb_load(j), p, _path_vars(v))
    return jsonb_dump(items[0]) if items else None


# -- the UDFs: row functions lifted to Arrow batches ----------


def _lift(
    fn: Callable[..., Any], result: Any, strict: bool = True, arity: int = 1
) -> Callable[..., Any]:
    """`fn` over Arrow columns (DuckDB wants the UDF's exact arity in its signature)."""

    def udf(*cols: Any) -> Any:
        import pyarrow as pa

        rows = zip(*(c.to_pylist() for c in cols), strict=True)
        out = [None if strict and any(x is None for x in row) else fn(*row) for row in rows]
        return pa.array(out, result())

    return fixed_arity(udf, arity)


def fixed_arity(udf: Callable[..., Any], arity: int) -> Callable[..., Any]:
    names = ", ".join(f"c{i}" for i in range(arity))
    return eval(f"lambda {names}: udf({names})", {"udf": udf})  # noqa: S307


def _set_lax(target: Any, path: Any, new: Any, create: Any, treatment: Any) -> Any:
    if target is None or path is None:
        return None
    if new is None:
        if treatment == "raise_exception":
            raise ValueError("JSON value must not be null")
        if treatment == "return_target":
            return jsonb_dump(jsonb_load(target))
        if treatment == "delete_key":
            return jsonb_dump(_delete_path(jsonb_load(target), _path(path)))
        new = "null"
    return jsonb_dump(_set(jsonb_load(target), _path(path), jsonb_load(new), bool(create)))


def _elements(j: str, text: bool) -> list[Any]:
    v = jsonb_load(j)
    if not isinstance(v, list):
        raise ValueError(
            "cannot extract elements from an object"
            if isinstance(v, dict)
            else "cannot extract elements from a scalar"
        )
    return [_as_text(e) if text else jsonb_dump(e) for e in v]


_J = jsonb_load
_D = jsonb_dump

# name -> (row function, argument types, result type name, strict)
_UDFS: dict[str, tuple[Callable[..., Any], list[str], str, bool]] = {
    "hw_jsonb_path": (
        lambda j, p: (lambda v: None if v is _MISSING else _D(v))(_get_path(_J(j), _path(p))),
        ["VARCHAR", "VARCHAR"],
        "VARCHAR",
        True,
    ),
    "hw_jsonb_path_text": (
        lambda j, p: _as_text(_get_path(_J(j), _path(p))),
        ["VARCHAR", "VARCHAR"],
        "VARCHAR",
        True,
    ),
    "hw_jsonb_contains": (
        lambda a, b: _contains(_J(a), _J(b)),
        ["VARCHAR", "VARCHAR"],
        "BOOLEAN",
        True,
    ),
    "hw_jsonb_exists": (lambda a, k: _exists(_J(a), k), ["VARCHAR", "VARCHAR"], "BOOLEAN", True),
    "hw_jsonb_exists_any": (
        lambda a, ks: (lambda v: any(_exists(v, k) for k in ks if k is not None))(_J(a)),
        ["VARCHAR", "VARCHAR[]"],
        "BOOLEAN",
        True,
    ),
    "hw_jsonb_exists_all": (
        lambda a, ks: (lambda v: all(_exists(v, k) for k in ks if k is not None))(_J(a)),
        ["VARCHAR", "VARCHAR[]"],
        "BOOLEAN",
        True,
    ),
    "hw_jsonb_concat": (
        lambda a, b: _D(_concat(_J(a), _J(b))),
        ["VARCHAR", "VARCHAR"],
        "VARCHAR",
        True,
    ),
    "hw_jsonb_delete_key": (
        lambda a, k: _D(_delete_key(_J(a), k)),
        ["VARCHAR", "VARCHAR"],
        "VARCHAR",
        True,
    ),
    "hw_jsonb_delete_keys": (
        lambda a, ks: _D(_delete_keys(_J(a), ks)),
        ["VARCHAR", "VARCHAR[]"],
        "VARCHAR",
        True,
    ),
    "hw_jsonb_delete_index": (
        lambda a, i: _D(_delete_index(_J(a), i)),
        ["VARCHAR", "BIGINT"],
        "VARCHAR",
        True,
    ),
    "hw_jsonb_delete_path": (
        lambda a, p: _D(_delete_path(_J(a), _path(p))),
        ["VARCHAR", "VARCHAR"],
        "VARCHAR",
        True,
    ),
    "hw_jsonb_set": (
        lambda t, p, n, c: _D(_set(_J(t), _path(p), _J(n), c)),
        ["VARCHAR", "VARCHAR", "VARCHAR", "BOOLEAN"],
        "VARCHAR",
        True,
    ),
    "hw_jsonb_insert": (
        lambda t, p, n, after: _D(_set(_J(t), _path(p), _J(n), False, 1 if after else 0)),
        ["VARCHAR", "VARCHAR", "VARCHAR", "BOOLEAN"],
        "VARCHAR",
        True,
    ),
    "hw_jsonb_set_lax": (
        _set_lax,
        ["VARCHAR", "VARCHAR", "VARCHAR", "BOOLEAN", "VARCHAR"],
        "VARCHAR",
        False,
    ),
    "hw_jsonb_strip_nulls": (lambda a: _D(_strip_nulls(_J(a))), ["VARCHAR"], "VARCHAR", True),
    "hw_jsonb_pretty": (lambda a: _pretty(_J(a)), ["VARCHAR"], "VARCHAR", True),
    "hw_jsonb_array_length": (_array_length, ["VARCHAR"], "INTEGER", True),
    "hw_jsonb_eq": (lambda a, b: _J(a) == _J(b), ["VARCHAR", "VARCHAR"], "BOOLEAN", True),
    "hw_jsonb_get": (
        lambda j, k: (lambda v: None if v is _MISSING else _D(v))(_get_path(_J(j), [k])),
        ["VARCHAR", "VARCHAR"],
        "VARCHAR",
        True,
    ),
    "hw_jsonb_get_text": (
        lambda j, k: _as_text(_get_path(_J(j), [k])),
        ["VARCHAR", "VARCHAR"],
        "VARCHAR",
        True,
    ),
    "hw_json_agg_text": (_json_agg_text, ["VARCHAR"], "VARCHAR", True),
    "hw_json_object_agg_text": (_json_object_agg_text, ["VARCHAR"], "VARCHAR", True),
    "hw_json_build_array_text": (_json_build_array_text, ["VARCHAR"], "VARCHAR", True),
    "hw_json_strip_nulls": (
        lambda a: _compact(_strip_nulls(_load_ordered(a))),
        ["VARCHAR"],
        "VARCHAR",
        True,
    ),
    "hw_json_merge_objects": (_merge_objects, ["VARCHAR"], "VARCHAR", True),
    "hw_jsonb_entries": (_entries, ["VARCHAR", "BOOLEAN"], "ENTRIES", True),
    "hw_json_object": (
        lambda k, v, b: _json_object(k, v, b),
        ["VARCHAR", "VARCHAR", "BOOLEAN"],
        "VARCHAR",
        False,
    ),
    "hw_jsonb_path_query": (_path_query, ["VARCHAR"] * 3, "VARCHAR[]", False),
    "hw_jsonb_path_query_array": (
        lambda j, p, v: (
            None if j is None or p is None else "[" + ", ".join(_path_query(j, p, v) or ()) + "]"
        ),
        ["VARCHAR"] * 3,
        "VARCHAR",
        False,
    ),
    "hw_jsonb_path_query_first": (_path_first, ["VARCHAR"] * 3, "VARCHAR", False),
    "hw_jsonb_path_exists": (
        lambda j, p, v: (
            None
            if j is None or p is None
            else bool(jsonpath.query(jsonb_load(j), p, _path_vars(v)))
        ),
        ["VARCHAR"] * 3,
        "BOOLEAN",
        False,
    ),
    "hw_jsonb_path_match": (
        lambda j, p, v: (
            None if j is None or p is None else jsonpath.match(jsonb_load(j), p, _path_vars(v))
        ),
        ["VARCHAR"] * 3,
        "BOOLEAN",
        False,
    ),
    "hw_jsonb_typeof": (lambda a: jsonpath.json_type(_J(a)), ["VARCHAR"], "VARCHAR", True),
    "hw_jsonb_elements": (lambda a: _elements(a, False), ["VARCHAR"], "VARCHAR[]", True),
    "hw_jsonb_elements_text": (lambda a: _elements(a, True), ["VARCHAR"], "VARCHAR[]", True),
}


def install(db: Any) -> None:
    import pyarrow as pa

    entry = pa.struct([("key", pa.string()), ("value", pa.string())])
    types = {
        "ENTRIES": lambda: pa.list_(entry),
        "VARCHAR": pa.string,
        "BOOLEAN": pa.bool_,
        "INTEGER": pa.int32,
        "VARCHAR[]": lambda: pa.list_(pa.string()),
    }
    for name, (fn, params, result, strict) in _UDFS.items():
        db.create_function(
            name,
            _lift(fn, types[result], strict, len(params)),
            params,
            "STRUCT(key VARCHAR, value VARCHAR)[]" if result == "ENTRIES" else result,
            type="arrow",
            null_handling="special",
        )
    # json_agg of json values in a view (planner/render.py): their texts as they are
    db.execute(
        "CREATE OR REPLACE MACRO hw_json_values_agg(l) AS"
        " CAST('[' || array_to_string(l, ', ') || ']' AS JSON)"
    )


# -- rewrites of calls and operators ----------


def _array_of(node: Any, element: str) -> A.TypeCast:
    return A.TypeCast(
        arg=node,
        typeName=A.TypeName(
            names=(A.String(sval=element),), typemod=-1, arrayBounds=(A.Integer(ival=-1),)
        ),
    )


def _text(node: Any) -> Any:
    return cast(node, "text")


def _json(node: Any) -> Any:
    return cast(node, "json")


def _udf_json(name: str, *args: Any) -> Any:
    return _json(call(name, *args))


def _path_arg(node: Any) -> Any:
    """A text[] path as the VARCHAR the UDFs parse: '{a,b}' as written, else the list's text."""
    if isinstance(node, A.TypeCast) and isinstance(node.arg, A.A_Const):
        node = node.arg
    if isinstance(node, A.A_Const):
        return _text(node)
    return _text(node)


def _variadic_path(args: list[Any]) -> Any:
    """jsonb_extract_path(j, 'a', 'b'): the path '{a,b}' (or its list's text)."""
    items = tuple(_text(a) for a in args)
    return _text(A.A_ArrayExpr(elements=items))


def _is_jsonish(node: Any) -> bool:
    """Whether an operand is json/jsonb: a cast to it, a json function, or a json
    column (nodes.COLUMN_TYPES)."""
    if column_type(node) in ("json", "jsonb"):
        return True
    if isinstance(node, A.TypeCast):
        names = [n.sval for n in node.typeName.names if isinstance(n, A.String)]
        return names[-1:] in (["json"], ["jsonb"]) and not node.typeName.arrayBounds
    if isinstance(node, A.FuncCall):
        name = node.funcname[-1].sval.lower()
        return name.startswith(("json", "to_json", "row_to_json", "array_to_json"))
    if isinstance(node, A.A_Expr) and node.name:
        op = node.name[-1].sval
        return op in ("->", "#>", "||", "-", "#-") and _is_jsonish(node.lexpr)
    return False


def _is_jsonb(node: Any) -> bool:
    """Whether an operand is jsonb (json keeps its text: DuckDB's is right)."""
    if column_type(node) == "jsonb":
        return True
    if isinstance(node, A.TypeCast):
        names = [n.sval for n in node.typeName.names if isinstance(n, A.String)]
        return names[-1:] == ["jsonb"] and not node.typeName.arrayBounds
    if isinstance(node, A.FuncCall):
        return node.funcname[-1].sval.lower().startswith(("jsonb", "to_jsonb"))
    if isinstance(node, A.A_Expr) and node.name:
        return node.name[-1].sval in ("->", "#>", "||", "-", "#-") and _is_jsonb(node.lexpr)
    return False


def _is_text_constant(node: Any) -> bool:
    return isinstance(node, A.A_Const) and isinstance(node.val, A.String)


def _key_list(node: Any) -> bool:
    """Whether the right operand of jsonb - is a text[] (keys), not one key."""
    if isinstance(node, A.A_ArrayExpr):
        return True
    return isinstance(node, A.TypeCast) and bool(node.typeName.arrayBounds)


def _is_int(node: Any) -> bool:
    return isinstance(node, A.A_Const) and isinstance(node.val, A.Integer)


def rewrite_operator(op: str, left: Any, right: Any) -> Any | None:
    """jsonb's operators (@> <@ ? ?| ?& || - #- #> #>>) when an operand is json/jsonb."""
    if op in ("->", "->>") and _is_jsonb(left):
        node = call(
            "hw_jsonb_get" if op == "->" else "hw_jsonb_get_text", _text(left), _text(right)
        )
        return _json(node) if op == "->" else node
    if op in ("=", "<>", "!=") and _is_jsonb(left) and _is_jsonb(right):
        eq = call("hw_jsonb_eq", _text(left), _text(right))
        return eq if op == "=" else A.BoolExpr(boolop=BoolExprType.NOT_EXPR, args=(eq,))
    if op in ("#>", "#>>") and left is not None:
        name = "hw_jsonb_path" if op == "#>" else "hw_jsonb_path_text"
        node = call(name, _text(left), _path_arg(right))
        return _json(node) if op == "#>" else node
    if op in ("@?", "@@") and _is_jsonish(left):
        name = "hw_jsonb_path_exists" if op == "@?" else "hw_jsonb_path_match"
        return call(name, _text(left), _text(right), const(None))
    if op == "?" and _is_jsonish(left):
        return call("hw_jsonb_exists", _text(left), _text(right))
    if op in ("?|", "?&") and _is_jsonish(left):
        name = "hw_jsonb_exists_any" if op == "?|" else "hw_jsonb_exists_all"
        return call(name, _text(left), _array_of(right, "text"))
    if op in ("@>", "<@") and (_is_jsonish(left) or _is_jsonish(right)):
        a, b = (left, right) if op == "@>" else (right, left)
        return call("hw_jsonb_contains", _text(a), _text(b))
    if op == "||" and (
        (_is_jsonish(left) and (_is_jsonish(right) or _is_text_constant(right)))
        or (_is_text_constant(left) and _is_jsonish(right))
    ):  # (a constant beside json is json, as PostgreSQL resolves an unknown literal)
        return _udf_json("hw_jsonb_concat", _text(left), _text(right))
    if op == "-" and left is not None and _is_jsonish(left):
        if _is_int(right):
            return _udf_json("hw_jsonb_delete_index", _text(left), right)
        if _key_list(right):
            return _udf_json("hw_jsonb_delete_keys", _text(left), _array_of(right, "text"))
        return _udf_json("hw_jsonb_delete_key", _text(left), _text(right))
    if op == "#-" and _is_jsonish(left):
        return _udf_json("hw_jsonb_delete_path", _text(left), _path_arg(right))
    return None


def _fixed(name: str, n: int, json_out: bool = True) -> Callable[[list[Any]], Any | None]:
    def rewrite(args: list[Any]) -> Any | None:
        if len(args) != n:
            return None
        node = call(name, *(_text(a) for a in args))
        return _json(node) if json_out else node

    return rewrite


def _jsonb_set(args: list[Any]) -> Any | None:
    if len(args) not in (3, 4):
        return None
    create = args[3] if len(args) == 4 else A.A_Const(isnull=False, val=A.Boolean(boolval=True))
    return _udf_json("hw_jsonb_set", _text(args[0]), _path_arg(args[1]), _text(args[2]), create)


def _jsonb_insert(args: list[Any]) -> Any | None:
    if len(args) not in (3, 4):
        return None
    after = args[3] if len(args) == 4 else A.A_Const(isnull=False, val=A.Boolean(boolval=False))
    return _udf_json("hw_jsonb_insert", _text(args[0]), _path_arg(args[1]), _text(args[2]), after)


def _jsonb_set_lax(args: list[Any]) -> Any | None:
    if not 3 <= len(args) <= 5:
        return None
    create = args[3] if len(args) > 3 else A.A_Const(isnull=False, val=A.Boolean(boolval=True))
    treatment = args[4] if len(args) > 4 else const("use_json_null")
    return _udf_json(
        "hw_jsonb_set_lax",
        _text(args[0]),
        _path_arg(args[1]),
        _text(args[2]),
        create,
        _text(treatment),
    )


def _extract_path(text: bool) -> Callable[[list[Any]], Any | None]:
    def rewrite(args: list[Any]) -> Any | None:
        if len(args) < 2:
            return None
        name = "hw_jsonb_path_text" if text else "hw_jsonb_path"
        node = call(name, _text(args[0]), _variadic_path(args[1:]))
        return node if text else _json(node)

    return rewrite


def _elements_srf(text: bool) -> Callable[[list[Any]], Any | None]:
    def rewrite(args: list[Any]) -> Any | None:
        if len(args) != 1:
            return None
        if text:
            return call("unnest", call("hw_jsonb_elements_text", _text(args[0])))
        return call("unnest", _array_of(call("hw_jsonb_elements", _text(args[0])), "json"))

    return rewrite


def _normalized(duck_name: str) -> Callable[[list[Any]], Any | None]:
    """A DuckDB json builder whose text jsonb normalises (key order, spacing)."""

    def rewrite(args: list[Any]) -> Any | None:
        return _json(call("hw_jsonb_in", _text(call(duck_name, *args))))

    return rewrite


def _object_keys(args: list[Any]) -> Any | None:
    if len(args) != 1:
        return None
    return call("unnest", call("json_keys", _text(args[0])))


def _text_array_arg(node: Any) -> bool:
    if isinstance(node, A.A_ArrayExpr):
        return True
    if isinstance(node, A.TypeCast):
        return bool(node.typeName.arrayBounds) or _text_array_arg(node.arg)
    return (
        isinstance(node, A.A_Const)
        and isinstance(node.val, A.String)
        and (node.val.sval.lstrip().startswith("{"))
    )


def _object_from_arrays(jsonb: bool) -> Callable[[list[Any]], Any | None]:
    """json_object('{a,1,b,2}') and json_object(keys, values); not DuckDB's json_object
    (json_build_object's translation), whose first argument is a key."""

    def rewrite(args: list[Any]) -> Any | None:
        if not 1 <= len(args) <= 2 or not all(_text_array_arg(a) for a in args):
            return None
        values = _text(args[1]) if len(args) == 2 else const(None)
        flag = A.A_Const(isnull=False, val=A.Boolean(boolval=jsonb))
        return _udf_json("hw_json_object", _text(args[0]), values, flag)

    return rewrite


def _path_function(name: str, srf: bool = False, json_out: bool = True) -> Any:
    def rewrite(args: list[Any]) -> Any | None:
        if not 2 <= len(args) <= 4:
            return None
        variables = _text(args[2]) if len(args) > 2 else const(None)
        node = call(name, _text(args[0]), _text(args[1]), variables)
        if srf:
            return call("unnest", _array_of(node, "json"))
        return _json(node) if json_out else node

    return rewrite


def _to_json(args: list[Any]) -> Any | None:
    """to_json of a numeric constant keeps its scale; of a timestamp, ISO 8601's 'T'."""
    if len(args) != 1:
        return None
    arg = args[0]
    if isinstance(arg, A.A_Const) and isinstance(arg.val, A.Float):
        return _json(const(arg.val.fval))
    if isinstance(arg, A.TypeCast) and not arg.typeName.arrayBounds:
        names = [n.sval for n in arg.typeName.names if isinstance(n, A.String)]
        if names[-1:] == ["timestamp"]:
            return call("to_json", call("replace", _text(arg), const(" "), const("T")))
        if names[-1:] == ["timestamptz"]:
            iso = call("replace", _text(arg), const(" "), const("T"))
            return call(
                "to_json", call("regexp_replace", iso, const("([+-]\\d\\d)$"), const("\\1:00"))
            )
    return None


REWRITES: dict[str, Callable[[list[Any]], Any | None]] = {
    "to_json": _to_json,
    "jsonb_path_query": _path_function("hw_jsonb_path_query", srf=True),
    "jsonb_path_query_array": _path_function("hw_jsonb_path_query_array"),
    "jsonb_path_query_first": _path_function("hw_jsonb_path_query_first"),
    "jsonb_path_exists": _path_function("hw_jsonb_path_exists", json_out=False),
    "jsonb_path_match": _path_function("hw_jsonb_path_match", json_out=False),
    "json_object": _object_from_arrays(False),
    "jsonb_object": _object_from_arrays(True),
    "jsonb_set": _jsonb_set,
    "jsonb_insert": _jsonb_insert,
    "jsonb_set_lax": _jsonb_set_lax,
    "json_extract_path": _extract_path(False),
    "jsonb_extract_path": _extract_path(False),
    "json_extract_path_text": _extract_path(True),
    "jsonb_extract_path_text": _extract_path(True),
    "json_strip_nulls": _fixed("hw_json_strip_nulls", 1),
    "json_array_length": _fixed("hw_jsonb_array_length", 1, json_out=False),
    "jsonb_array_length": _fixed("hw_jsonb_array_length", 1, json_out=False),
    "json_build_array": lambda args: _json(
        call("hw_json_build_array_text", _text(call("json_array", *args)))
    ),
    "jsonb_strip_nulls": _fixed("hw_jsonb_strip_nulls", 1),
    "jsonb_pretty": _fixed("hw_jsonb_pretty", 1, json_out=False),
    "json_typeof": _fixed("hw_jsonb_typeof", 1, json_out=False),
    "jsonb_typeof": _fixed("hw_jsonb_typeof", 1, json_out=False),
    "json_array_elements": _elements_srf(False),
    "jsonb_array_elements": _elements_srf(False),
    "json_array_elements_text": _elements_srf(True),
    "jsonb_array_elements_text": _elements_srf(True),
    "json_object_keys": _object_keys,
    "jsonb_object_keys": _object_keys,
    "jsonb_build_array": _normalized("json_array"),
    "jsonb_build_object": _normalized("json_object"),
    "to_jsonb": _normalized("to_json"),
}


def _list_agg(finish: str) -> Callable[[A.FuncCall], Any]:
    """json_agg, jsonb_agg: DuckDB's list() (keeping ORDER BY and FILTER) as JSON, its text
    reformatted as PostgreSQL prints the aggregate."""

    def rewrite(fc: A.FuncCall) -> Any:
        if finish == "hw_json_agg_text" and len(fc.args or ()) == 1 and _is_jsonish(fc.args[0]):
            return _json_values_agg(fc)
        fc.funcname = (A.String(sval="list"),)
        return _json(call(finish, _text(call("to_json", fc))))

    return rewrite


def _json_values_agg(fc: A.FuncCall) -> Any:
    """json_agg of json values (json_build_object(...), a json column): each value's
    text as it is, ", " between them (json_agg_transfn; a row's or an array's would
    start a line), NULL on no rows."""
    fc.funcname = (A.String(sval="string_agg"),)
    fc.args = (A.CoalesceExpr(args=(_text(fc.args[0]), const("null"))), const(", "))

    def concat(a: Any, b: Any) -> A.A_Expr:
        return A.A_Expr(kind=A_Expr_Kind.AEXPR_OP, name=(A.String(sval="||"),), lexpr=a, rexpr=b)

    whole = concat(const("["), concat(fc, const("]")))
    return _json(whole)


def _object_agg(finish: str) -> Callable[[A.FuncCall], Any]:
    """json_object_agg(k, v): the list of one-key objects {k: v}, merged in order."""

    def rewrite(fc: A.FuncCall) -> Any:
        if len(fc.args or ()) != 2:
            return fc
        k, v = fc.args
        fc.funcname = (A.String(sval="list"),)
        fc.args = (call("json_object", _text(k), v),)
        merged = call("hw_json_merge_objects", _text(call("to_json", fc)))
        return _json(call(finish, merged))

    return rewrite


AGGREGATES: dict[str, Callable[[A.FuncCall], Any]] = {
    "json_agg": _list_agg("hw_json_agg_text"),
    "jsonb_agg": _list_agg("hw_jsonb_in"),
    "json_object_agg": _object_agg("hw_json_object_agg_text"),
    "jsonb_object_agg": _object_agg("hw_jsonb_in"),
}


# FROM json_each(j) & co.: the SELECT giving PostgreSQL's columns, {arg} the argument
_TABLE_FUNCTIONS = {
    "json_each": "SELECT e.key AS key, CAST(e.value AS json) AS value"
    " FROM (SELECT unnest(hw_jsonb_entries(CAST({arg} AS text), false)) AS e) AS _hw_e",
    "json_each_text": "SELECT e.key AS key, e.value AS value"
    " FROM (SELECT unnest(hw_jsonb_entries(CAST({arg} AS text), true)) AS e) AS _hw_e",
    "json_array_elements": "SELECT unnest(CAST(hw_jsonb_elements(CAST({arg} AS text))"
    " AS json[])) AS value",
    "json_array_elements_text": "SELECT unnest(hw_jsonb_elements_text(CAST({arg} AS text)))"
    " AS value",
}


def table_function(rf: A.RangeFunction) -> Any | None:
    """FROM json_each(j) [AS t]: a subquery with PostgreSQL's columns (key, value)."""
    from pglast import parse_sql
    from pglast.stream import RawStream

    if rf.lateral or rf.ordinality or len(rf.functions or ()) != 1:
        return None
    if rf.coldeflist:
        return _to_record(rf)
    fc, coldefs = rf.functions[0]
    if not isinstance(fc, A.FuncCall) or coldefs or len(fc.args or ()) != 1:
        return None
    name = fc.funcname[-1].sval.lower().replace("jsonb_", "json_")
    template = _TABLE_FUNCTIONS.get(name)
    if template is None:
        return None
    sql = template.format(arg=RawStream()(fc.args[0]))
    sub = parse_sql(f"SELECT * FROM ({sql}) AS _hw_t")[0].stmt.fromClause[0]
    sub.alias = rf.alias or A.Alias(aliasname=fc.funcname[-1].sval)
    return sub


def _to_record(rf: A.RangeFunction) -> Any | None:
    """FROM json_to_record(j) AS x(a int, b text) (and _recordset): each column the key
    of its name, as text cast to the column's type."""
    from pglast import parse_sql
    from pglast.stream import RawStream

    fc = rf.functions[0][0]
    if not isinstance(fc, A.FuncCall) or len(fc.args or ()) != 1:
        return None
    name = fc.funcname[-1].sval.lower().replace("jsonb_", "json_")
    if name not in ("json_to_record", "json_to_recordset"):
        return None
    defs = [c for c in rf.coldeflist if isinstance(c, A.ColumnDef)]
    if len(defs) != len(rf.coldeflist):
        return None

    def quoted(n: str) -> str:
        return '"' + n.replace('"', '""') + '"'

    columns = ", ".join(
        f"CAST(json_extract_string(_hw_r, '$.' || {quoted(c.colname)!r}) AS"
        f" {RawStream()(c.typeName)}) AS {quoted(c.colname)}"
        for c in defs
    )
    arg = RawStream()(fc.args[0])
    rows = (
        f"SELECT CAST({arg} AS json) AS _hw_r"
        if name == "json_to_record"
        else f"SELECT unnest(CAST(CAST({arg} AS json) AS json[])) AS _hw_r"
    )
    sql = f"SELECT * FROM (SELECT {columns} FROM ({rows}) AS _hw_s) AS _hw_t"
    sub = parse_sql(sql)[0].stmt.fromClause[0]
    sub.alias = rf.alias
    return sub


def jsonpath_literal(tc: A.TypeCast) -> Any | None:
    """'$.a ? (@ > 1)'::jsonpath: validated, as the text PostgreSQL prints."""
    names = [n.sval for n in tc.typeName.names if isinstance(n, A.String)]
    arg = tc.arg
    if names[-1:] != ["jsonpath"] or tc.typeName.arrayBounds:
        return None
    if not (isinstance(arg, A.A_Const) and isinstance(arg.val, A.String)):
        return _text(arg)
    try:
        return const(jsonpath.canonical(arg.val.sval))
    except jsonpath.PathError as e:
        from headwater.errors import SQLError

        code, _, message = str(e).removeprefix("[SQLSTATE ").partition("] ")
        raise SQLError(message, code) from None
