"""Infer the types of $n parameters from their context, as PostgreSQL's parser does.

Clients such as asyncpg encode parameters by the types the server announces in
ParameterDescription, so `WHERE id = $1` must say the type of `id`. Contexts:
an explicit cast (to an array type too), a comparison or arithmetic with a column, a
number or arithmetic on those (`id % 10 = $1`), `x op ANY/ALL ($1)` (x's array type,
as for `id = ANY($1)`), an INSERT value, an UPDATE assignment, LIMIT/OFFSET. Anything
else is text (as PostgreSQL would resolve an unknown literal).
"""

from __future__ import annotations

import copy
from typing import Any

import pglast.ast as A
from headwater.catalog.catalog import Catalog
from headwater.catalog.system_shapes import system_columns
from headwater.catalog.types import (
    ARRAY_TYPES,
    BPCHAR,
    FLOAT4,
    FLOAT8,
    INT2,
    INT4,
    INT8,
    INTERVAL,
    JSON,
    JSONB,
    NUMERIC,
    TEXT,
    ColumnType,
    PgType,
    UserTypes,
)
from headwater.planner.ddl import type_of
from headwater.planner.pg_compat import cast_to, copy_tree
from headwater.planner.scope import Item, Scope, find_relation, named_relations
from headwater.planner.syntax import nodes
from pglast import parse_sql
from pglast.enums.parsenodes import A_Expr_Kind

from headwater.errors import SQLError


def _param(node: Any) -> int | None:
    if isinstance(node, A.ParamRef):
        return node.number
    return None


# the type of a constant beside a parameter in an operator (`$1 + 1`), as PostgreSQL
# resolves the unknown parameter to the other operand's type
_LITERAL_TYPES = {A.Integer: INT4, A.Float: NUMERIC}


_ARITHMETIC = frozenset({"+", "-", "*", "/", "%"})
_NUMBER_RANK = {INT2: 0, INT4: 1, INT8: 2, NUMERIC: 3}
# functions of numbers whose type is their arguments' (promoted), or always integer
_SAME_TYPE_FUNCTIONS = frozenset(
    {"abs", "mod", "greatest", "least", "nullif", "trunc", "round", "ceil", "floor"}
)
_INTEGER_FUNCTIONS = {
    "length": INT4,
    "char_length": INT4,
    "octet_length": INT4,
    "strpos": INT4,
    "position": INT4,
    "ascii": INT4,
}


def _promoted(*types: ColumnType | None) -> ColumnType | None:
    """The numeric type arithmetic on `types` gives in PostgreSQL: the widest integer,
    numeric over integers, double precision over anything but two reals; None when
    one is unknown or not a number."""
    if not types or any(t is None for t in types):
        return None
    pgs = {t.pg for t in types if t is not None}
    if pgs == {FLOAT4}:
        return ColumnType(FLOAT4)
    if pgs <= {FLOAT4, FLOAT8, *_NUMBER_RANK}:
        if pgs & {FLOAT4, FLOAT8}:
            return ColumnType(FLOAT8)
        return ColumnType(max(pgs, key=_NUMBER_RANK.__getitem__))
    return None


def _untyped(ct: ColumnType) -> ColumnType:
    """A compared parameter's type: the operand's without its modifier. PostgreSQL
    compares `amount = $1` with 1.234 as numeric, not rounded to numeric(12,2)'s
    scale, and `name = $1` with a longer text than varchar(3)'s is just unequal. (A
    char(n)'s keeps n: its decoder drops the trailing blanks char(n) ignores.)"""
    return ColumnType(ct.pg) if ct.typmod != -1 and ct.pg is not BPCHAR else ct


def _common(types: list[ColumnType | None]) -> ColumnType | None:
    """COALESCE's, greatest's, abs's type: their arguments' if all have one, else the
    promoted number type."""
    known = [t for t in types if t is not None]
    if known and len(known) == len(types) and all(t.pg is known[0].pg for t in known):
        return known[0]
    return _promoted(*types)


_ANY_ALL = (A_Expr_Kind.AEXPR_OP_ANY, A_Expr_Kind.AEXPR_OP_ALL)
# json/jsonb operators whose right operand is a key or a path, and its type
_TEXT_ARRAY = ARRAY_TYPES[TEXT.name]
_JSON_KEY_OPS = {
    "->": TEXT,
    "->>": TEXT,
    "#>": _TEXT_ARRAY,
    "#>>": _TEXT_ARRAY,
    "#-": _TEXT_ARRAY,
    "?": TEXT,
    "?|": _TEXT_ARRAY,
    "?&": _TEXT_ARRAY,
    "-": TEXT,
}
# LIKE, ILIKE and regular expression matches: PostgreSQL's operators take a text pattern
# for name, varchar and char operands alike
_PATTERN_OPS = frozenset({"~~", "~~*", "!~~", "!~~*", "~", "~*", "!~", "!~*"})


def _op_name(node: A.A_Expr) -> str | None:
    last = node.name[-1] if node.name else None
    return last.sval if isinstance(last, A.String) else None


def cast_type(tn: A.TypeName, user: UserTypes | None = None) -> ColumnType:
    """The type a cast names, `int[]` and `int[][]` (one array type) included; `user`
    finds the database's enums."""
    if not tn.arrayBounds:
        return type_of(tn, user)
    elem = type_of(A.TypeName(names=tn.names, typmods=tn.typmods))
    arr = ARRAY_TYPES.get(elem.pg.name)
    if arr is None:
        raise SQLError(f"type {elem.pg.sql_name}[] is not supported", "0A000")
    return ColumnType(arr)


class _Inferrer:
    def __init__(self, catalog: Catalog, search_path: tuple[str, ...], declared: list[int]) -> None:
        self.catalog = catalog
        self.search_path = search_path
        self.types: dict[int, ColumnType] = {}
        # Every relation the statement names, as one flat scope: a column's name alone
        # picks its type (the first relation that has such a column)
        self.scope: Scope[ColumnType] = Scope([])
        self.declared = declared

    def user_type(self, names: list[str]) -> PgType | None:
        return self.catalog.type_named(names, self.search_path)

    def note(self, n: int, ct: ColumnType) -> None:
        self.types.setdefault(n, ct)

    def relation(self, rv: A.RangeVar) -> None:
        # a system relation first (pg_catalog precedes the search path)
        cols = system_columns(rv.schemaname, rv.relname)
        if cols is None:
            rel = find_relation(self.catalog, rv, self.search_path)
            cols = [(c.name, c.type) for c in rel.columns] if rel is not None else None
        if cols is not None:
            self.scope.items.append(Item(rv.relname, cols))

    def derived(self, rs: A.RangeSubselect) -> None:
        """A subquery in FROM: its output columns' types where they are plain (a
        column, a cast, a number, ...), named as its alias says (`WHERE x > $1` over
        `(SELECT 1 AS x) s` or `(VALUES (...)) AS s(x)`)."""
        if rs.alias is None:
            return
        cols = self.output_columns(rs.subquery)
        given = [c.sval for c in rs.alias.colnames or ()]
        named = [(given[i] if i < len(given) else n, t) for i, (n, t) in enumerate(cols)]
        self.scope.items.append(Item(rs.alias.aliasname, [(n, t) for n, t in named if t]))

    def output_columns(self, q: Any) -> list[tuple[str, ColumnType | None]]:
        if not isinstance(q, A.SelectStmt):
            return []
        if q.larg is not None:  # UNION ...: its first branch names and types them
            return self.output_columns(q.larg)
        if q.valuesLists:
            return [
                (f"column{i + 1}", self.operand_type(v)) for i, v in enumerate(q.valuesLists[0])
            ]
        out: list[tuple[str, ColumnType | None]] = []
        for rt in q.targetList or ():
            val = rt.val
            if isinstance(val, A.ColumnRef) and isinstance(val.fields[-1], A.A_Star):
                alias = val.fields[0].sval if len(val.fields) == 2 else None
                out += [c for i in self.scope.items if alias in (None, i.alias) for c in i.cols]
                continue
            name = rt.name
            if (
                name is None
                and isinstance(val, A.ColumnRef)
                and isinstance(val.fields[-1], A.String)
            ):
                name = val.fields[-1].sval
            out.append((name or "?column?", self.operand_type(val)))
        return out

    def column_type(self, ref: A.ColumnRef) -> ColumnType | None:
        last = ref.fields[-1]
        if not isinstance(last, A.String):
            return None
        hits = self.scope.candidates([last.sval])
        return hits[0] if hits else None

    def operand_type(self, node: Any) -> ColumnType | None:
        """The type of an expression beside a parameter, where it is plain: a column, a
        number, a cast, arithmetic on those (`id % 10 = $1` is bigint, as PostgreSQL
        resolves it) and functions whose type follows their arguments'; else None."""
        if isinstance(node, A.ColumnRef):
            return self.column_type(node)
        if isinstance(node, A.A_Const) and not node.isnull:
            literal = _LITERAL_TYPES.get(type(node.val))
            return ColumnType(literal) if literal is not None else None
        if isinstance(node, A.TypeCast):
            try:
                return cast_type(node.typeName, self.user_type)
            except SQLError:
                return None
        if isinstance(node, A.A_Expr) and node.kind == A_Expr_Kind.AEXPR_OP:
            op = _op_name(node)
            if op not in _ARITHMETIC:
                return None
            if node.lexpr is None:  # -x
                return self.operand_type(node.rexpr)
            return _promoted(self.operand_type(node.lexpr), self.operand_type(node.rexpr))
        if isinstance(node, A.CoalesceExpr | A.MinMaxExpr):
            return _common([self.operand_type(a) for a in node.args])
        if isinstance(node, A.FuncCall) and node.args:
            name = node.funcname[-1].sval.lower()
            if name in _INTEGER_FUNCTIONS:
                return ColumnType(_INTEGER_FUNCTIONS[name])
            if name in ("extract", "date_part"):  # (PostgreSQL 14+: numeric; date_part:
                return ColumnType(NUMERIC if name == "extract" else FLOAT8)  # double)
            if name == "date_trunc" and len(node.args) >= 2:
                return self.operand_type(node.args[1])
            if name == "round" and len(node.args) == 2:
                return ColumnType(NUMERIC)
            if name in _SAME_TYPE_FUNCTIONS:
                return _common([self.operand_type(a) for a in node.args])
        return None

    def json_key(self, node: A.A_Expr) -> ColumnType | None:
        """The right operand's type of a json/jsonb operator that takes a key or a path
        (`j -> $1`, `j #> $1`, `j ? $1`, `j - $1`): text or text[], as PostgreSQL
        resolves it, not the json operand's type."""
        op = _op_name(node)
        key = _JSON_KEY_OPS.get(op or "")
        if key is None:
            return None
        if op == "-":  # jsonb - key, not arithmetic
            left = self.operand_type(node.lexpr)
            if left is None or left.pg not in (JSON, JSONB):
                return None
        return ColumnType(key)

    def walk(self, node: Any) -> None:
        if isinstance(node, tuple | list):
            for n in node:
                self.walk(n)
            return
        if not isinstance(node, A.Node):
            return
        if isinstance(node, A.TypeCast) and (n := _param(node.arg)) is not None:
            try:
                self.note(n, cast_type(node.typeName, self.user_type))
            except SQLError:
                pass
        elif isinstance(node, A.A_Expr) and node.kind in _ANY_ALL:
            n = _param(node.rexpr)
            elem = self.operand_type(node.lexpr)
            # an operand of unknown type (a system catalog's column): text[], which
            # DuckDB compares with any element; a scalar parameter could not be unnested
            arr = ARRAY_TYPES.get(elem.pg.name if elem is not None else TEXT.name)
            if n is not None and arr is not None:
                self.note(n, ColumnType(arr))
        elif isinstance(node, A.A_Expr):
            if _op_name(node) in _PATTERN_OPS and (n := _param(node.rexpr)) is not None:
                self.note(n, ColumnType(TEXT))  # a pattern is text, whatever it matches
            if (n := _param(node.rexpr)) is not None and (key := self.json_key(node)) is not None:
                self.note(n, key)
            scaling = _op_name(node) in ("*", "/")
            for a, b in ((node.lexpr, node.rexpr), (node.rexpr, node.lexpr)):
                n = _param(a)
                if n is not None and (ct := self.operand_type(b)) is not None:
                    if scaling and ct.pg is INTERVAL:  # $1 * interval '1 second'
                        ct = ColumnType(FLOAT8)
                    self.note(n, _untyped(ct))  # (`$1 + 1`: integer)
            if isinstance(node.rexpr, tuple | list):  # IN (...), BETWEEN
                ct = self.operand_type(node.lexpr)
                for item in node.rexpr:
                    if (n := _param(item)) is not None and ct is not None:
                        self.note(n, _untyped(ct))
            if isinstance(node.lexpr, A.RowExpr) and isinstance(node.rexpr, A.RowExpr):
                for a, b in zip(node.lexpr.args or (), node.rexpr.args or (), strict=False):
                    for x, y in ((a, b), (b, a)):  # (a, b) = ($1, $2)
                        if (n := _param(x)) is not None and (ct := self.operand_type(y)):
                            self.note(n, _untyped(ct))
        elif isinstance(node, A.CoalesceExpr | A.MinMaxExpr):  # coalesce(n, $1): n's type
            known = _common([self.operand_type(a) for a in node.args if _param(a) is None])
            for a in node.args:
                if (n := _param(a)) is not None and known is not None:
                    self.note(n, _untyped(known))
        elif isinstance(node, A.FuncCall) and _is_series(node):
            # generate_series(1, $1): PostgreSQL picks its integer overload
            known = [self.operand_type(a) for a in node.args if _param(a) is None]
            if known and all(t is not None and t.pg in (INT2, INT4) for t in known):
                for a in node.args:
                    if (n := _param(a)) is not None:
                        self.note(n, ColumnType(INT4))
        elif isinstance(node, A.SelectStmt):
            for item in (node.limitCount, node.limitOffset):
                if (n := _param(item)) is not None:
                    self.note(n, ColumnType(INT8))
        for name in node:
            self.walk(getattr(node, name))


def infer_param_types(
    stmt: Any, catalog: Catalog, search_path: tuple[str, ...], declared: list[int], count: int
) -> list[ColumnType | None]:
    """One entry per parameter: the inferred type, or None where a declared OID rules."""
    inf = _Inferrer(catalog, search_path, declared)
    # Relations first, so that column references in any clause can be typed.
    for rv in named_relations(stmt):
        inf.relation(rv)
    # then subqueries in FROM, innermost first (their columns may be an inner one's)
    for rs in reversed([n for n in nodes(stmt) if isinstance(n, A.RangeSubselect)]):
        inf.derived(rs)
    if isinstance(stmt, A.InsertStmt):
        rel = find_relation(catalog, stmt.relation, search_path)
        if rel is not None:
            cols = [rel.column(rt.name) for rt in stmt.cols] if stmt.cols else list(rel.columns)
            src = stmt.selectStmt
            if isinstance(src, A.SelectStmt) and src.valuesLists:
                for row in src.valuesLists:
                    for v, col in zip(row, cols, strict=False):
                        if (n := _param(v)) is not None and col is not None:
                            inf.note(n, col.type)
            elif isinstance(src, A.SelectStmt) and src.targetList and not src.op:
                # INSERT ... SELECT $1: PostgreSQL leaves the SELECT's own items of unknown
                # type to the columns' assignment (not those of a VALUES or set operation)
                for rt, col in zip(src.targetList, cols, strict=False):
                    if (n := _param(rt.val)) is not None and col is not None:
                        inf.note(n, col.type)
    if isinstance(stmt, A.UpdateStmt):
        rel = find_relation(catalog, stmt.relation, search_path)
        if rel is not None:
            for rt in stmt.targetList:
                col = rel.column(rt.name)
                if (n := _param(rt.val)) is not None and col is not None:
                    inf.note(n, col.type)
    inf.walk(stmt)
    out: list[ColumnType | None] = []
    for i in range(1, count + 1):
        if i <= len(declared) and declared[i - 1]:
            out.append(None)
        else:
            out.append(inf.types.get(i, ColumnType(TEXT)))
    return out


def _is_series(call: A.FuncCall) -> bool:
    last = call.funcname[-1]
    return isinstance(last, A.String) and last.sval.lower() == "generate_series" and bool(call.args)


_SMALL_INTS = (INT2, INT4)
# Statements with more parameters are bulk DML (a multi-row VALUES with a parameter per
# value): walking their tree costs ~1 µs a parameter at every Parse, for function
# arguments they hardly have
CAST_PARAMS_UPTO = 64


def cast_function_params(stmt: Any, types: list[ColumnType]) -> Any:
    """`f($1)` where $1 is smallint or integer: `f(CAST($1 AS ...))`, so the function sees
    the parameter's type as in PostgreSQL (`generate_series(1, $1)` is integer,
    `pg_typeof($1)` smallint) instead of the type DuckDB gives the bound value. Only
    function arguments: elsewhere the value's own type serves, and casts there would
    hide `col = $1` from the point-read and fast-insert paths. Not for statements of
    more than CAST_PARAMS_UPTO parameters."""
    if len(types) > CAST_PARAMS_UPTO:
        return stmt
    numbers = {i + 1 for i, t in enumerate(types) if t.pg in _SMALL_INTS}

    def calls(tree: Any) -> list[A.FuncCall]:
        return [
            n
            for n in nodes(tree)
            if isinstance(n, A.FuncCall) and any(_param(a) in numbers for a in n.args or ())
        ]

    if not numbers or not calls(stmt):
        return stmt
    stmt = copy.deepcopy(stmt)  # the parsed tree may be cached and shared
    for call in calls(stmt):
        call.args = tuple(
            cast_to(a, types[a.number - 1].pg.name) if _param(a) in numbers else a
            for a in call.args
        )
    return stmt


def with_param_types(stmt: Any, types: list[ColumnType]) -> Any:
    """A copy of `stmt` whose $n are cast to the types announced for them: described
    over no rows with NULLs for values (Describe), `n * $1` then has the type it has
    with the value the client sends by that type (numeric, not NULL's text)."""
    tree = copy_tree(stmt)

    def typed(p: Any) -> Any:
        if not isinstance(p, A.ParamRef) or not 0 < p.number <= len(types):
            return p
        return A.TypeCast(arg=p, typeName=type_name(types[p.number - 1]))

    for n in nodes(tree, skip=A.TypeCast):  # a cast parameter has its type already
        for attr in n:
            v = getattr(n, attr)
            if isinstance(v, A.ParamRef):
                setattr(n, attr, typed(v))
            elif isinstance(v, tuple) and any(isinstance(x, A.ParamRef) for x in v):
                setattr(n, attr, tuple(typed(x) for x in v))
    return tree


def type_name(ct: ColumnType) -> A.TypeName:
    """The TypeName node of a cast to `ct` (char without a length is bpchar, not char(1))."""
    sql = "bpchar" if ct.pg is BPCHAR and ct.length is None else ct.sql()
    return parse_sql(f"SELECT NULL::{sql}")[0].stmt.targetList[0].val.typeName


def count_params(stmt: Any) -> int:
    return max((n.number for n in nodes(stmt) if isinstance(n, A.ParamRef)), default=0)


def epoch_parameter(stmt: Any) -> int:
    """The number of the DuckDB parameter that carries a read's epoch: the one after
    the client's (3 for `... WHERE a = $2`), so the epoch is bound like a value and is
    never spliced into SQL text."""
    return count_params(stmt) + 1
