"""Calls of SQL functions (CREATE FUNCTION ... LANGUAGE sql) replaced by their bodies.

PostgreSQL's planner inlines a simple SQL function where it is called; here every call
is inlined, before anything else reads the statement, so reads, writes, views on DuckDB
and on Spark all see plain SQL and need nothing of their own for functions:

    f(a, b)            ->  CAST((<the body's expression>) AS <result type>)
                           (a body with FROM: a scalar subquery, its first row)
    FROM f(a) AS x     ->  FROM LATERAL (<the body's SELECT>) AS x

with each parameter (`$1`, its name, or `f.name`) replaced by its argument cast to the
parameter's type. As in PostgreSQL, a body's column takes precedence over a parameter
of the same name. A STRICT function's call is NULL (no rows) when an argument is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from typing import Any

import pglast.ast as A
from headwater.catalog.objects import Function
from headwater.planner.ir import PER_CALL_FUNCS
from headwater.planner.pg_compat import AGGREGATES, copy_tree
from headwater.planner.syntax import nodes, replaced
from pglast import parse_sql
from pglast.enums import BoolExprType, LimitOption, NullTestType, SubLinkType

from headwater.errors import FeatureNotSupported, SQLError, UndefinedFunction, WrongObjectType

# The overloads a call's name (as written, maybe qualified) may mean; () if none
Find = Callable[[list[str]], Sequence[Function]]
# The column names of a relation a body reads (as written), or None if unknown
Columns = Callable[[list[str]], Collection[str] | None]

POLYMORPHIC = frozenset(
    ("any", "anyelement", "anyarray", "anynonarray", "anycompatible", "anycompatiblearray")
)
MAX_DEPTH = 32  # nested calls: a function that calls itself ends here (54001)


def inline(tree: Any, find: Find, columns: Columns) -> tuple[Any, frozenset[int]]:
    """`tree` with every call of a function `find` knows inlined (in place; the tree's
    replacement is returned), and the oids of the functions inlined."""
    inliner = _Inliner(find, columns)
    return inliner.tree(tree, 0), frozenset(inliner.used)


def has_calls(tree: Any, find: Find) -> bool:
    """Whether `tree` calls a function `find` knows."""
    return any(isinstance(n, A.FuncCall) and find(_names(n.funcname)) for n in nodes(tree))


@functools.lru_cache(maxsize=256)
def _parsed(body: str) -> A.SelectStmt:
    return parse_sql(body)[0].stmt


@functools.lru_cache(maxsize=256)
def _type_name(type_text: str) -> A.TypeName:
    return parse_sql(f"SELECT NULL::{type_text}")[0].stmt.targetList[0].val.typeName


def _names(funcname: Any) -> list[str]:
    return [n.sval for n in funcname if isinstance(n, A.String)]


def _cast(node: Any, type_text: str) -> Any:
    if type_text in POLYMORPHIC:
        return node
    return A.TypeCast(arg=node, typeName=copy_tree(_type_name(type_text)))


def _simple(body: A.SelectStmt) -> bool:
    """A body that is one expression: SELECT expr, nothing else."""
    return (
        len(body.targetList or ()) == 1
        and not body.fromClause
        and body.whereClause is None
        and not body.groupClause
        and body.havingClause is None
        and not body.sortClause
        and body.limitCount is None
        and not body.distinctClause
        and not body.windowClause
        and body.withClause is None
        and body.valuesLists is None
        and body.larg is None
    )


def _one_row(body: A.SelectStmt) -> bool:
    """A body that gives one row whatever the data: aggregates without GROUP BY."""
    if body.larg is not None or body.groupClause or body.valuesLists is not None:
        return False
    return any(
        isinstance(n, A.FuncCall) and _names(n.funcname)[-1].lower() in AGGREGATES
        for t in body.targetList or ()
        for n in nodes(t.val, skip=A.SubLink)
    )


class _Inliner:
    def __init__(self, find: Find, columns: Columns) -> None:
        self.find = find
        self.columns = columns
        self.apart = 0  # bodies whose arguments are computed apart: their aliases' numbers
        self.used: set[int] = set()

    def tree(self, tree: Any, depth: int) -> Any:
        self._qualify_arguments(tree)
        return replaced(tree, lambda n: self._swap(n, depth))

    def _qualify_arguments(self, tree: Any) -> None:
        """`a` -> `t.a` in the arguments of calls, where `t` is the one relation of the
        SELECT around the call with a column `a`: inlined into a body that reads
        relations of its own (renamed apart, `_renamed`), the argument still reads the
        caller's column."""
        for select in nodes(tree):
            if not isinstance(select, A.SelectStmt) or select.fromClause is None:
                continue
            scope = self._scope(select.fromClause)
            clauses = (
                select.targetList,
                select.whereClause,
                select.havingClause,
                select.groupClause,
                select.sortClause,
                select.fromClause,
            )
            for call in nodes(clauses, skip=A.SelectStmt):
                if not isinstance(call, A.FuncCall) or not self.find(_names(call.funcname)):
                    continue
                for ref in nodes(call.args, skip=A.SelectStmt):
                    if not (isinstance(ref, A.ColumnRef) and len(ref.fields) == 1):
                        continue
                    field = ref.fields[0]
                    owners = [
                        q for q, cols in scope if isinstance(field, A.String) and field.sval in cols
                    ]
                    if len(owners) == 1:
                        ref.fields = (A.String(sval=owners[0]), field)

    def _scope(self, from_clause: Any) -> list[tuple[str, Collection[str]]]:
        """(the name that qualifies it, its columns) of each relation a FROM list names."""
        out: list[tuple[str, Collection[str]]] = []
        for item in from_clause:
            if isinstance(item, A.JoinExpr):
                out += self._scope((item.larg, item.rarg))
            elif isinstance(item, A.RangeVar):
                cols = self.columns(
                    [item.schemaname, item.relname] if item.schemaname else [item.relname]
                )
                name = item.alias.aliasname if item.alias is not None else item.relname
                if item.alias is not None and item.alias.colnames:
                    cols = [c.sval for c in item.alias.colnames]
                if cols is not None:
                    out.append((name, cols))
        return out

    def _swap(self, node: A.Node, depth: int) -> Any | None:
        if isinstance(node, A.FuncCall):
            return self._call(node, depth)
        if isinstance(node, A.RangeFunction):
            return self._from(node, depth)
        return None

    # -- which function, with which arguments ----------------------------------------
    def _resolve(self, call: A.FuncCall, depth: int) -> tuple[Function, list[Any]] | None:
        names = _names(call.funcname)
        found = self.find(names)
        if not found:
            return None
        name = names[-1]
        at = call.location + 1 if call.location is not None else None
        if call.over is not None:
            raise WrongObjectType(
                f"OVER specified, but {name} is not a window function nor an aggregate function",
                position=at,
            )
        if call.agg_star or call.agg_distinct or call.agg_order or call.agg_filter is not None:
            what = "DISTINCT" if call.agg_distinct else "ORDER BY" if call.agg_order else "*"
            if call.agg_filter is not None:
                what = "FILTER"
            raise WrongObjectType(
                f"{what} specified, but {name} is not an aggregate function", position=at
            )
        if depth >= MAX_DEPTH:
            raise SQLError(
                "stack depth limit exceeded",
                "54001",
                detail=f'SQL function "{name}" calls itself {MAX_DEPTH} levels deep.',
            )
        given = [self.tree(a, depth) for a in call.args or ()]
        positional = [a for a in given if not isinstance(a, A.NamedArgExpr)]
        named = {a.name: a.arg for a in given if isinstance(a, A.NamedArgExpr)}
        if found[0].returns == "trigger":
            raise FeatureNotSupported("trigger functions can only be called as triggers")
        if found[0].prokind == "p":
            raise WrongObjectType(
                f"{'.'.join(names)}({', '.join(map(type_guess, given))}) is a procedure",
                hint="To call a procedure, use CALL.",
                position=at,
            )
        if found[0].language != "sql":
            raise FeatureNotSupported(
                f"PL/pgSQL function {name} cannot be called here",
                hint=f"Headwater runs a PL/pgSQL function called alone (SELECT {name}(...),"
                " PERFORM, an assignment), in INSERT's VALUES, in FROM, or per row of a"
                " SELECT if it is STABLE or IMMUTABLE; not in a view, GROUP BY, a subquery,"
                " UPDATE or DELETE. A LANGUAGE sql function is inlined where it is called.",
            )
        for fn in found:
            args = _bind(fn, positional, named)
            if args is not None:
                self.used.add(fn.oid)
                return fn, args
        raise UndefinedFunction(
            f"function {'.'.join(names)}({', '.join(map(type_guess, given))}) does not exist",
            hint="No function matches the given name and argument types. "
            "You might need to add explicit type casts.",
            position=at,
        )

    # -- a call in an expression -----------------------------------------------------
    def _call(self, call: A.FuncCall, depth: int) -> Any | None:
        resolved = self._resolve(call, depth)
        if resolved is None:
            return None
        fn, args = resolved
        if fn.declared and len(fn.columns) > 1:
            raise FeatureNotSupported(
                f"function {fn.name}() returns a row of several columns (OUT parameters):"
                " a composite value is not supported",
                hint=f"Call it in FROM: SELECT * FROM {fn.name}(...).",
            )
        if fn.returns_set:
            raise FeatureNotSupported(
                f"set-returning function {fn.name}() is called in FROM here",
                hint=f"Write SELECT ... FROM {fn.name}(...) instead of calling it in the"
                " select list.",
            )
        body, one_row = self._body(fn, args, depth)
        if _simple(body):
            expr = body.targetList[0].val
        else:
            if body.limitCount is None and not one_row:
                body.limitCount = A.A_Const(isnull=False, val=A.Integer(ival=1))
                body.limitOption = LimitOption.LIMIT_OPTION_COUNT
            expr = A.SubLink(subLinkType=SubLinkType.EXPR_SUBLINK, subselect=body)
        expr = _cast(expr, fn.returns)
        if fn.strict and args:
            test = _any_null(args)
            expr = A.CaseExpr(
                args=(A.CaseWhen(expr=test, result=A.A_Const(isnull=True)),), defresult=expr
            )
        return expr

    # -- a call in FROM ---------------------------------------------------------------
    def _from(self, rf: A.RangeFunction, depth: int) -> Any | None:
        if rf.is_rowsfrom or len(rf.functions) != 1:
            return None
        call = rf.functions[0][0]
        if not isinstance(call, A.FuncCall):
            return None
        resolved = self._resolve(call, depth)
        if resolved is None:
            return None
        fn, args = resolved
        if rf.ordinality:
            raise FeatureNotSupported(f"WITH ORDINALITY of SQL function {fn.name}()")
        if fn.returns_set:
            query, _ = self._body(fn, args, depth)
        elif fn.declared:  # OUT parameters: the body's first row
            query, one_row = self._body(fn, args, depth)
            if query.limitCount is None and not one_row:
                query.limitCount = A.A_Const(isnull=False, val=A.Integer(ival=1))
                query.limitOption = LimitOption.LIMIT_OPTION_COUNT
        else:
            value = self._call(A.FuncCall(funcname=call.funcname, args=tuple(args)), depth)
            query = A.SelectStmt(targetList=(A.ResTarget(name=fn.name, val=value),))
        if fn.strict and args:  # no rows when an argument is NULL
            query = A.SelectStmt(
                targetList=(A.ResTarget(val=A.ColumnRef(fields=(A.A_Star(),))),),
                fromClause=(
                    A.RangeSubselect(subquery=query, alias=A.Alias(aliasname="_hw_strict")),
                ),
                whereClause=A.BoolExpr(boolop=BoolExprType.NOT_EXPR, args=(_any_null(args),)),
            )
        alias = rf.alias
        if alias is None or not alias.colnames:
            name = alias.aliasname if alias is not None else fn.name
            names = [c for c, _ in fn.columns]
            if not names and _base_typed(fn, query):  # one column, named as the relation
                names = [name]
            colnames = tuple(A.String(sval=c) for c in names) or None
            alias = A.Alias(aliasname=name, colnames=colnames)
        lateral = rf.lateral or any(_reads_columns(a) for a in args)
        return A.RangeSubselect(lateral=lateral, subquery=query, alias=alias)

    # -- the body, its parameters replaced --------------------------------------------
    def _body(self, fn: Function, args: list[Any], depth: int) -> tuple[A.SelectStmt, bool]:
        """The body with its parameters replaced by the arguments, and whether it gives
        one row whatever the data. The body's relations are renamed apart, so that an
        argument's `t.a` is the caller's; when a column of the body could still capture
        an argument's unqualified column, or an argument computed anew at each call is
        used twice, the arguments are computed once, in a one-row relation the body
        reads laterally: `SELECT b.* FROM (SELECT arg1 AS p1, ...) AS a, LATERAL (body)
        AS b` (DuckDB runs that; a materialized view may refuse it)."""
        body = _renamed(copy_tree(_parsed(fn.body)), f"_hw_f{depth}_")
        one_row = _one_row(body)
        by_name = {p.name: i for i, p in enumerate(fn.params) if p.name}
        own = self._body_columns(body)

        def which(node: A.Node) -> int | None:
            if isinstance(node, A.ParamRef) and 1 <= node.number <= len(args):
                return node.number - 1
            if isinstance(node, A.ColumnRef) and all(isinstance(f, A.String) for f in node.fields):
                fields = [f.sval for f in node.fields]
                if (
                    len(fields) == 1
                    and fields[0] in by_name
                    and (own is None or fields[0] not in own)
                ):
                    return by_name[fields[0]]
                if len(fields) == 2 and fields[0] == fn.name and fields[1] in by_name:
                    return by_name[fields[1]]
            return None

        uses = [0] * len(args)
        for n in nodes(body):
            if (i := which(n)) is not None:
                uses[i] += 1
        captured = any(
            isinstance(n, A.ColumnRef)
            and len(n.fields) == 1
            and (own is None or not isinstance(n.fields[0], A.String) or n.fields[0].sval in own)
            for a in args
            for n in nodes(a, skip=A.SelectStmt)
        ) and any(
            isinstance(n, A.RangeVar | A.RangeSubselect | A.RangeFunction) for n in nodes(body)
        )
        apart = captured or any(uses[i] > 1 and _per_call(a) for i, a in enumerate(args))
        self.apart += apart
        values = f"_hw_fa{self.apart}"
        seen = [0] * len(args)

        def param(node: A.Node) -> Any | None:
            i = which(node)
            if i is None:
                return None
            if apart:
                return A.ColumnRef(fields=(A.String(sval=values), A.String(sval=f"p{i + 1}")))
            seen[i] += 1
            return _cast(args[i] if seen[i] == 1 else copy_tree(args[i]), fn.params[i].type)

        body = self.tree(replaced(body, param), depth + 1)
        if not apart:
            return body, one_row
        given = A.SelectStmt(
            targetList=tuple(
                A.ResTarget(name=f"p{i + 1}", val=_cast(a, fn.params[i].type))
                for i, a in enumerate(args)
            )
        )
        inner = f"_hw_fb{self.apart}"
        wrapped = A.SelectStmt(
            targetList=(A.ResTarget(val=A.ColumnRef(fields=(A.String(sval=inner), A.A_Star()))),),
            fromClause=(
                A.RangeSubselect(subquery=given, alias=A.Alias(aliasname=values)),
                A.RangeSubselect(lateral=True, subquery=body, alias=A.Alias(aliasname=inner)),
            ),
        )
        return wrapped, one_row

    def _body_columns(self, body: A.SelectStmt) -> set[str] | None:
        """The columns of the relations the body reads (they hide parameters); None if
        one is not known (a CTE's, a subquery's)."""
        out: set[str] = set()
        for n in nodes(body):
            if isinstance(n, A.RangeVar):
                cols = self.columns([n.schemaname, n.relname] if n.schemaname else [n.relname])
                if cols is None:
                    return None
                out.update(cols)
            elif isinstance(n, A.RangeSubselect | A.RangeFunction):
                return None
        return out


def _renamed(body: A.SelectStmt, prefix: str) -> A.SelectStmt:
    """The body with each relation it reads under a name of its own (`FROM t` ->
    `FROM t AS _hw_f0_t`, `t.a` -> `_hw_f0_t.a`), which no argument names."""
    names: dict[str, str] = {}
    for n in nodes(body):
        if isinstance(n, A.RangeVar | A.RangeSubselect | A.RangeFunction):
            alias = n.alias
            old = alias.aliasname if alias is not None else getattr(n, "relname", None)
            if old is None:
                continue
            new = names.setdefault(old, prefix + old)
            if alias is None:
                n.alias = A.Alias(aliasname=new)
            else:
                alias.aliasname = new
    for n in nodes(body):
        if isinstance(n, A.ColumnRef) and len(n.fields) >= 2:
            qualifier = n.fields[-2] if isinstance(n.fields[-1], A.String | A.A_Star) else None
            if isinstance(qualifier, A.String) and qualifier.sval in names:
                n.fields = (A.String(sval=names[qualifier.sval]), n.fields[-1])
    return body


def _bind(fn: Function, positional: list[Any], named: dict[str, Any]) -> list[Any] | None:
    """The call's arguments in parameter order (defaults filled in), or None if they do
    not fit `fn`."""
    params = fn.params
    if len(positional) + len(named) > len(params):
        return None
    args: list[Any] = []
    for i, p in enumerate(params):
        if i < len(positional):
            if p.name in named:
                return None
            args.append(positional[i])
        elif p.name and p.name in named:
            args.append(named[p.name])
        elif p.default is not None:
            args.append(parse_sql(f"SELECT {p.default}")[0].stmt.targetList[0].val)
        else:
            return None
    if set(named) - {p.name for p in params[len(positional) :]}:
        return None
    return args


def _any_null(args: list[Any]) -> Any:
    tests = [A.NullTest(arg=copy_tree(a), nulltesttype=NullTestType.IS_NULL) for a in args]
    return (
        tests[0] if len(tests) == 1 else A.BoolExpr(boolop=BoolExprType.OR_EXPR, args=tuple(tests))
    )


def type_guess(arg: Any) -> str:
    """An argument's type as PostgreSQL's error message names it, where it shows."""
    if isinstance(arg, A.NamedArgExpr):
        return f"{arg.name} => {type_guess(arg.arg)}"
    if isinstance(arg, A.TypeCast):
        return ".".join(n.sval for n in arg.typeName.names if isinstance(n, A.String))
    if isinstance(arg, A.A_Const) and not arg.isnull:
        kind = type(arg.val).__name__
        return {"Integer": "integer", "Float": "numeric", "Boolean": "boolean"}.get(kind, "unknown")
    return "unknown"


def _reads_columns(arg: Any) -> bool:
    return any(isinstance(n, A.ColumnRef) for n in nodes(arg))


def _per_call(arg: Any) -> bool:
    return any(
        isinstance(n, A.FuncCall) and _names(n.funcname)[-1].lower() in PER_CALL_FUNCS
        for n in nodes(arg)
    )


def _base_typed(fn: Function, query: A.SelectStmt) -> bool:
    """A function of a base type (scalar, or SETOF one): its one column takes the name of
    the function, or of the alias it is given in FROM."""
    if fn.columns or fn.returns == "record":
        return False
    if not fn.returns_set:
        return True
    targets = query.targetList or ()
    return len(targets) == 1 and not (
        isinstance(targets[0].val, A.ColumnRef) and isinstance(targets[0].val.fields[-1], A.A_Star)
    )
