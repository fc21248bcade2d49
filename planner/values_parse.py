"""A long INSERT ... VALUES, or IN list, of constants parsed without pglast's per-node cost.

pglast builds its AST in Python, validating every attribute it sets (~1-3 µs a node):
a 1,000-row INSERT ... VALUES of four constants spent ~13 ms in parse_sql, most of a
statement's time in the server. Here the same C parser (libpg_query) prints the tree
as JSON, and the nodes of the statement shapes such a write uses are built from it
directly: the same classes with the same attribute values as parse_sql gives (tests/
test_values_parse.py compares them); rows of plain constants are read from the JSON
text by one regular expression. ~5.5 ms instead of ~9-13 for 1,000 rows of four
constants. UPDATE, DELETE and SELECT ... WHERE k IN (c1, c2, ...) likewise: their IN
lists of plain constants are read by that expression (~4 ms instead of ~16 for 4,000
keys). Any other statement, or a node of a kind not listed here, takes parse_sql as
before (`parse` returns None).
"""

from __future__ import annotations

import gc
import json
import re
import threading
from collections.abc import Callable
from typing import Any

import pglast.ast as A
from pglast import enums
from pglast.parser import parse_sql_json

# Statements shorter than this are parsed by parse_sql: the gain is in long VALUES lists
MIN_LENGTH = 4096

# The node kinds built here: an INSERT's target, column list and VALUES rows of constants
# (casts included); anything else makes `parse` give up
_KINDS = (
    A.InsertStmt,
    A.RangeVar,
    A.Alias,
    A.ResTarget,
    A.SelectStmt,
    A.A_Const,
    A.TypeCast,
    A.TypeName,
    A.String,
    A.Integer,
    A.Float,
    A.Boolean,
    A.OnConflictClause,  # ON CONFLICT (key) DO NOTHING / DO UPDATE SET c = excluded.c
    A.InferClause,
    A.IndexElem,
    A.ReturningClause,
    A.ColumnRef,
    A.A_Star,
    # UPDATE / DELETE / SELECT ... WHERE k IN (constants): the long list read as VALUES'
    # rows are (`_IN_LISTS`), the rest of the statement built from the JSON
    A.UpdateStmt,
    A.DeleteStmt,
    A.A_Expr,
    A.BoolExpr,
    A.CaseExpr,
    A.CaseWhen,
    A.NullTest,
    A.SortBy,
)


class _Unsupported(Exception):
    """A node this module does not build: parse_sql's turn."""


def _setter(name: str, ctype: Any) -> tuple[str, Callable[[Any], Any]]:
    """How to turn the JSON value of attribute `name` (absent: None) into pglast's."""
    ctype = ctype.c_type if isinstance(ctype, A.SlotTypeInfo) else ctype
    if ctype == "bool":
        return name, lambda v: bool(v)
    if ctype in ("int", "int32", "long"):
        return name, lambda v: 0 if v is None else v
    if ctype == "ParseLoc":
        return name, _location
    if ctype in ("char*", "char"):
        return name, lambda v: v
    if ctype == "List*":
        return name, lambda v: None if v is None else tuple(map(_item, v))
    if ctype in ("Node*", "Expr*"):  # any kind of node: JSON names it, {"Kind": {fields}}
        return name, lambda v: None if v is None else _node(v)
    if ctype.endswith("*"):  # a node of the one kind the attribute holds: just its fields
        kind = ctype[:-1]
        return name, lambda v: None if v is None else _build(kind, v)
    enum = getattr(enums, ctype, None)
    if enum is not None:
        first = next(iter(enum))
        return name, lambda v: first if v is None else enum[v]
    raise TypeError(f"no conversion for {ctype}")


class _CharIndex:
    """A byte offset in the UTF-8 text as the index of its character in `sql`, as
    pglast gives locations (libpg_query counts bytes): the characters its bytes up to
    there decode to, a character cut in two not counted (C speed, against ~1 ms of
    Python a 1,000-row INSERT's non-ASCII characters took to index)."""

    def __init__(self, sql: str) -> None:
        self.encoded = sql.encode()

    def __call__(self, offset: int) -> int:
        return len(self.encoded[:offset].decode("utf-8", "ignore"))


_text = threading.local()  # .index: the _CharIndex of the text being parsed (None: ASCII)


def _location(v: int | None) -> int | None:
    """pglast's location: 0 when JSON leaves it out, None when unknown (-1)."""
    if v is None:
        return 0
    if v == -1:
        return None
    index = _text.index
    return v if index is None else index(v)


_SPECS: dict[str, tuple[type, tuple[tuple[str, Callable[[Any], Any]], ...]]] = {
    k.__name__: (k, tuple(_setter(n, t) for n, t in k.__slots__.items()))
    for k in _KINDS
    if k is not A.A_Const
}
_new = object.__new__
_set = object.__setattr__


def _build(kind: str, fields: dict[str, Any]) -> A.Node:
    spec = _SPECS.get(kind)
    if spec is None:
        raise _Unsupported(kind)
    cls, setters = spec
    if len(fields) > len(setters) or not fields.keys() <= cls.__slots__.keys():
        raise _Unsupported(kind)
    node = _new(cls)
    for name, conv in setters:
        _set(node, name, conv(fields.get(name)))
    return node


def _constant(fields: dict[str, Any]) -> A.A_Const:
    """An A_Const from its JSON fields. JSON leaves out empty values: {"sval": {}} is '',
    {"ival": {}} 0, {"boolval": {}} false."""
    if fields.get("isnull"):
        return _const(None, None)
    for kind, empty in (("sval", ""), ("ival", 0), ("fval", ""), ("boolval", False)):
        if (inner := fields.get(kind)) is not None:
            return _const(kind, inner.get(kind, empty))
    raise _Unsupported("A_Const")  # a bit string, or a kind of constant not listed


def _node(wrapped: dict[str, Any] | str) -> Any:
    if isinstance(wrapped, str):  # an IN list `_decoded` read already
        return _text.lists[wrapped]
    if (fields := wrapped.get("A_Const")) is not None:
        return _constant(fields)
    if (inner := wrapped.get("List")) is not None:  # an IN list of other nodes
        return tuple(map(_item, inner.get("items", ())))
    if len(wrapped) != 1:
        raise _Unsupported(str(list(wrapped)))
    for kind, fields in wrapped.items():
        return _build(kind, fields)
    raise _Unsupported("empty")  # (not reached)


def _item(wrapped: dict[str, Any]) -> Any:
    """A list element: a node, or a nested list (VALUES rows) as a tuple."""
    if (fields := wrapped.get("A_Const")) is not None:
        return _constant(fields)
    if (inner := wrapped.get("List")) is not None:
        return tuple(map(_item, inner.get("items", ())))
    return _node(wrapped)


# The VALUES rows of constants as libpg_query prints them, read by regular expressions
# rather than json.loads and _build (3.5 + 4.5 ms of a 1,000-row INSERT's ~11): one
# row {"List":{"items":[c, ...]}}, each constant {"A_Const":{"<kind>":{"<kind>":v}}}
# (an empty {} for 0, false), or {"A_Const":{"isnull":true,...}}.
_CONST = (
    r'\{"A_Const":\{(?:"(ival|fval|sval|boolval)":\{(?:"[a-z]+":'
    r'(-?[0-9]+|"[^"\\]*(?:\\.[^"\\]*)*"|true))?\}|"isnull":true),"location":[0-9]+\}\}'
)
_PLAIN_CONST = re.sub(r"\((?!\?)", "(?:", _CONST)  # the same, capturing nothing
_ROW = r'\{"List":\{"items":\[(' + _PLAIN_CONST + "(?:," + _PLAIN_CONST + r")*)\]\}\}"
_PLAIN_ROW = re.sub(r"\((?!\?)", "(?:", _ROW)
_VALUES = re.compile(r'"valuesLists":\[(' + _PLAIN_ROW + "(?:," + _PLAIN_ROW + r")*)\]")
_IN_LISTS = re.compile(
    r'"rexpr":\{"List":\{"items":\[(' + _PLAIN_CONST + "(?:," + _PLAIN_CONST + r")*)\]\}\}"
)
_ROW_CONSTS = re.compile(r'(\{"List":\{"items":\[)?' + _CONST)  # (a row's first?, kind, v)
_const_new = A.A_Const.__new__
# slot descriptors: set without pglast's validating __setattr__ (~15 times faster)
_isnull = A.A_Const.__dict__["isnull"].__set__
_val = A.A_Const.__dict__["val"].__set__
_VALUE_KINDS = {
    kind: (cls, cls.__dict__[kind].__set__)
    for kind, cls in (
        ("ival", A.Integer),
        ("fval", A.Float),
        ("sval", A.String),
        ("boolval", A.Boolean),
    )
}


def _const(kind: str | None, value: Any) -> A.A_Const:
    """An A_Const as parse_sql makes it: NULL (kind None) or a value of `kind`."""
    c = _const_new(A.A_Const)
    _isnull(c, kind is None)
    if kind is None:
        _val(c, None)
        return c
    cls, set_value = _VALUE_KINDS[kind]
    val = _new(cls)
    set_value(val, value)
    _val(c, val)
    return c


def _rows(text: str) -> tuple[tuple[A.A_Const, ...], ...]:
    """The VALUES rows of `_VALUES`'s group, as _build would make them."""
    found = _ROW_CONSTS.findall(text)
    consts = _consts(found)
    starts = [i for i, (start, _, _) in enumerate(found) if start]
    ends = [*starts[1:], len(consts)]
    return tuple(tuple(consts[a:b]) for a, b in zip(starts, ends, strict=True))


def _consts(found: list[tuple[str, str, str]]) -> list[A.A_Const]:
    """The constants `_ROW_CONSTS` matched (a row's first?, kind (empty: NULL), JSON
    value), as _build would make them; `_const` written out in one loop (two calls
    fewer per constant: ~1.5 ms less for 1,000 rows of four)."""
    out: list[A.A_Const] = []
    new, const, kinds, loads = _const_new, A.A_Const, _VALUE_KINDS, json.loads
    isnull, set_val = _isnull, _val
    for _, kind, v in found:
        c = new(const)
        if not kind:
            isnull(c, True)
            set_val(c, None)
        else:
            if kind == "sval":  # a JSON string: decoded only if it has escapes
                value: Any = "" if not v else loads(v) if "\\" in v else v[1:-1]
            elif kind == "ival":
                value = int(v) if v else 0
            elif kind == "fval":
                value = v[1:-1]
            else:
                value = v == "true"
            cls, set_value = kinds[kind]
            val = new(cls)
            set_value(val, value)
            isnull(c, False)
            set_val(c, val)
        out.append(c)
    return out


def _decoded(js: str) -> dict[str, Any]:
    """json.loads(js), but a statement's single VALUES list of plain constants (the
    bulk of a long INSERT) read by `_rows` and stored under VALUES_KEY, and each IN
    list of plain constants read by `_consts` (the JSON holds a key to it)."""
    lists: dict[str, tuple[A.A_Const, ...]] = {}

    def listed(m: re.Match[str]) -> str:
        key = f"_hw_in{len(lists)}"
        lists[key] = tuple(_consts(_ROW_CONSTS.findall(m.group(1))))
        return f'"rexpr":"{key}"'

    _text.lists = lists
    if '"AEXPR_IN"' in js:
        js = _IN_LISTS.sub(listed, js)
    m = _VALUES.search(js)
    if (
        m is None
        or not js.endswith(_INSERTED, 0, m.start())  # an INSERT's VALUES, not a UNION's
        or js.count('"valuesLists":', m.end())
        or js.count('"valuesLists":', 0, m.start())
    ):
        whole: dict[str, Any] = json.loads(js)
        return whole
    doc: dict[str, Any] = json.loads(js[: m.start(1)] + js[m.end(1) :])
    doc[VALUES_KEY] = _rows(m.group(1))
    return doc


VALUES_KEY = "_hw_values"
_INSERTED = '"selectStmt":{"SelectStmt":{'


def _statement(fields: dict[str, Any]) -> A.RawStmt:
    raw = _new(A.RawStmt)
    _set(raw, "stmt", _node(fields["stmt"]))
    start = fields.get("stmt_location", 0)
    length = fields.get("stmt_len", 0)  # 0: to the end of the text
    _set(raw, "stmt_location", _location(start))
    _set(raw, "stmt_len", length and (_location(start + length) or 0) - (_location(start) or 0))
    return raw


def parse(sql: str) -> tuple[A.RawStmt, ...] | None:
    """parse_sql(sql)'s statements when `sql` is a long INSERT, or an UPDATE, DELETE or
    SELECT with IN lists, of the node kinds built here; None otherwise (and for a
    syntax error, which parse_sql then reports)."""
    if len(sql) < MIN_LENGTH:
        return None
    verb = sql.lstrip()[:6].lower()
    if verb != "insert" and (verb not in _STATEMENTS or not _IN_WORD.search(sql)):
        return None  # (a long query without IN lists: nothing to gain here)
    # Tens of thousands of dicts and nodes, none in a cycle: the collector's passes over
    # the server's every object meanwhile cost as much as the parse (json.loads of a
    # 1,000-row INSERT took 3 ms without them, 5-14 ms with them)
    collecting = gc.isenabled()
    gc.disable()
    try:
        _text.index = None if sql.isascii() else _CharIndex(sql)
        doc = _decoded(parse_sql_json(sql))
        stmts = tuple(map(_statement, doc.get("stmts", ())))
        rows = doc.get(VALUES_KEY)
        if rows is not None:  # the one statement's VALUES: put in its place
            select = stmts[0].stmt.selectStmt if len(stmts) == 1 else None
            if not isinstance(select, A.SelectStmt) or select.valuesLists != ():
                return None
            _set(select, "valuesLists", rows)
    except Exception:  # noqa: BLE001 (a node not built here, a syntax error): parse_sql's turn
        return None
    finally:
        if collecting:
            gc.enable()
    if not stmts or not all(isinstance(s.stmt, _BUILT) for s in stmts):
        return None
    return stmts


_STATEMENTS = ("update", "delete", "select")
_IN_WORD = re.compile(r"\bin\s*\(", re.IGNORECASE)
_BUILT = (A.InsertStmt, A.UpdateStmt, A.DeleteStmt, A.SelectStmt)
