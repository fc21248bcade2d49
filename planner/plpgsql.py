"""PL/pgSQL trigger functions of the form migrations write, as SQL expressions.

`BEFORE INSERT OR UPDATE ... FOR EACH ROW` triggers whose function sets fields of NEW
and returns it (`NEW.updated_at := now(); RETURN NEW;`, with IF / ELSIF / ELSE over
NEW, OLD and TG_OP) change each new row version by expressions over the row itself:
the body is executed symbolically into one expression per assigned column, over the
row's values as the statement made them (`col`) and, for an UPDATE, the old version's
(`_hw_old_col`). server/triggers.py evaluates them over a write's new rows. Anything
else in a body (variables, queries, RAISE, loops, RETURN NULL or OLD) is refused when
the function is created, naming the statement.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import pglast.ast as A
from headwater.catalog.identifiers import quote_ident
from headwater.planner.pg_compat import copy_tree
from headwater.planner.relations import deparse
from headwater.planner.syntax import replaced
from pglast import parse_plpgsql, parse_sql
from pglast.enums import BoolExprType, CoercionForm
from pglast.parser import ParseError

from headwater.errors import FeatureNotSupported, SQLError, SyntaxErr

OLD_PREFIX = "_hw_old_"  # an UPDATE's old version's columns, beside the new one's
_STANDARD = frozenset(
    """new old tg_name tg_when tg_level tg_op tg_relid tg_relname tg_table_name
    tg_table_schema tg_nargs tg_argv found""".split()
)
_ASSIGN = re.compile(r'^\s*\w+\s*\.\s*(?:"(?:[^"]|"")+"|[\w$]+)\s*:?=\s*(.*)$', re.S)
_RETURN = re.compile(r"\breturn\b\s*([^;\s]*)", re.I)
_HINT = (
    "Headwater runs BEFORE INSERT / UPDATE row triggers whose function assigns NEW's"
    " fields (IF / ELSIF / ELSE over NEW, OLD and TG_OP) and ends with RETURN NEW."
)


@dataclass(frozen=True)
class Program:
    """What a trigger function does to a row, per event ('INSERT', 'UPDATE'): the
    columns it assigns, each with its SQL expression (PostgreSQL's syntax)."""

    assigns: dict[str, tuple[tuple[str, str], ...]]


def source_text(
    body: str,
    returns: str = "trigger",
    params: tuple[tuple[str, ...], ...] = (),
    procedure: bool = False,
) -> str:
    """A CREATE FUNCTION (or PROCEDURE) around a plpgsql body, for pglast's PL/pgSQL
    parser; `params` (name, type as format_type() prints it[, mode: IN, OUT, INOUT])
    declare its parameters."""
    tag = "$hw_body$"
    args = ", ".join(
        " ".join(p[2:] + ((quote_ident(p[0]),) if p[0] else ()) + (p[1],)) for p in params
    )
    head = f"PROCEDURE f({args})" if procedure else f"FUNCTION f({args}) RETURNS {returns}"
    return f"CREATE {head} LANGUAGE plpgsql AS {tag}{body}{tag}"


def parse_function(
    body: str,
    name: str | None,
    returns: str,
    params: tuple[tuple[str, ...], ...] = (),
    procedure: bool = False,
) -> dict[str, Any]:
    """pglast's PL/pgSQL tree of a body (`PLpgSQL_function`); PostgreSQL's error (42601
    but for an assignment to a CONSTANT), naming `name` if given."""
    try:
        text = source_text(body, returns, params, procedure)
        tree = parse_plpgsql(text)[0]["PLpgSQL_function"]
    except ParseError as e:
        message = e.args[0] if name is None else f"{e.args[0]} in the body of {name}"
        code = "22005" if e.args[0].endswith("is declared CONSTANT") else "42601"
        if re.match(
            r"cannot use RETURN (NEXT|QUERY)|RETURN cannot have a parameter in f", e.args[0]
        ):
            code = "42804"
        raise SQLError(message, code) from None
    if returns != "trigger":  # (a trigger's RETURN NEW / OLD: compile_trigger reads them)
        for kind, texts in _return_texts(body).items():
            _fill_returns(tree["action"], kind, iter(texts))
    return tree


def _return_texts(body: str) -> dict[str, list[str]]:
    """The expression of each RETURN and each RETURN NEXT in `body`, in order ('' for
    none), by the statement's key in pglast's tree."""
    blank = re.sub(
        r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/", lambda m: " " * len(m.group()), body, flags=re.S
    )
    out: dict[str, list[str]] = {"PLpgSQL_stmt_return": [], "PLpgSQL_stmt_return_next": []}
    for m in re.finditer(r"\breturn\b(\s+(?:next|query)\b)?([^;]*)", blank, re.I):
        word = (m.group(1) or "").strip().lower()
        if word != "query":
            key = "PLpgSQL_stmt_return_next" if word else "PLpgSQL_stmt_return"
            out[key].append(body[m.start(2) : m.end(2)].strip())
    return out


def _fill_returns(node: Any, kind: str, texts: Any) -> None:
    """pglast's tree leaves out what a RETURN [NEXT] of a variable returns (PostgreSQL's
    retvarno): its text, from the source, in the tree's order (the source's)."""
    if isinstance(node, list):
        for n in node:
            _fill_returns(n, kind, texts)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == kind:
                text = next(texts, "")
                if "expr" not in value and text:
                    value["expr"] = {"PLpgSQL_expr": {"query": text}}
            _fill_returns(value, kind, texts)


@functools.lru_cache(maxsize=128)
def compile_trigger(name: str, body: str) -> Program:
    """The function's body as a Program; 0A000 naming what is not supported."""
    parsed = parse_function(body, f"function {name}", "trigger")
    datums = parsed["datums"]
    for d in datums:
        var = d.get("PLpgSQL_var") or d.get("PLpgSQL_rec")
        if var is not None and var["refname"] not in _STANDARD:
            _refuse(name, f"variable {var['refname']}")
    block = parsed["action"]["PLpgSQL_stmt_block"]
    if block.get("exceptions"):
        _refuse(name, "EXCEPTION")
    stripped = re.sub(r"'(?:[^']|'')*'", "''", body)
    for m in _RETURN.finditer(stripped):
        if m.group(1).lower() != "new":
            _refuse(name, f"RETURN {m.group(1) or ''}".strip())
    stmts = block.get("body", [])
    if not stmts or "PLpgSQL_stmt_return" not in stmts[-1]:
        _refuse(name, "a body that does not end with RETURN NEW")
    assigns = {}
    for event in ("INSERT", "UPDATE"):
        state: dict[str, Any] = {}
        _run(name, stmts, state, None, datums, event)
        assigns[event] = tuple((col, deparse(expr)) for col, expr in state.items())
    return Program(assigns)


def _refuse(name: str, what: str) -> None:
    raise FeatureNotSupported(f"{what} in trigger function {name} is not supported", hint=_HINT)


def _run(
    name: str,
    stmts: list[dict[str, Any]],
    state: dict[str, Any],
    guard: Any,
    datums: list[dict[str, Any]],
    event: str,
) -> Any:
    """Execute `stmts` symbolically on rows where `guard` holds (None: all rows):
    `state` maps each assigned column to its value over the original row. Returns the
    guard of the rows that go on past them (False: none)."""
    for st in stmts:
        if guard is False:
            break
        kind, body = next(iter(st.items()))
        if kind == "PLpgSQL_stmt_assign":
            target = datums[body.get("varno", 0)].get("PLpgSQL_recfield")
            m = _ASSIGN.match(body["expr"]["PLpgSQL_expr"]["query"])
            if target is None or target.get("recparentno", 0) != 0 or m is None:
                _refuse(name, f"the assignment {body['expr']['PLpgSQL_expr']['query']!r}")
            col = target["fieldname"]
            value = _expr(name, m.group(1), state, event)
            state[col] = value if guard is None else _case(guard, value, _current(state, col))
        elif kind == "PLpgSQL_stmt_if":
            branches = [(body["cond"], body.get("then_body", []))]
            branches += [
                (e["PLpgSQL_if_elsif"]["cond"], e["PLpgSQL_if_elsif"].get("stmts", []))
                for e in body.get("elsif_list", [])
            ]
            rest, entered, going = guard, [], []
            for cond, then in branches:
                c = _true(_expr(name, cond["PLpgSQL_expr"]["query"], state, event))
                entered.append(_and(rest, c))
                going.append(_run(name, then, state, entered[-1], datums, event))
                rest = _and(rest, _not(c))
            entered.append(rest)
            going.append(_run(name, body.get("else_body", []), state, rest, datums, event))
            if any(g is not e for g, e in zip(going, entered, strict=True)):  # one returned
                guard = _or(going)
        elif kind == "PLpgSQL_stmt_return":
            guard = False
        else:
            _refuse(name, kind.removeprefix("PLpgSQL_stmt_").upper().replace("EXECSQL", "SQL"))
    return guard


def _current(state: dict[str, Any], col: str) -> Any:
    return copy_tree(state[col]) if col in state else A.ColumnRef(fields=(A.String(sval=col),))


def _expr(name: str, text: str, state: dict[str, Any], event: str) -> Any:
    """A PL/pgSQL expression over the original row: NEW.x as the value assigned so
    far, OLD.x as the old version's (NULL for an INSERT), TG_OP as the event."""
    try:
        node = parse_sql(f"SELECT {text}")[0].stmt.targetList[0].val
    except ParseError as e:
        raise SyntaxErr(f"{e.args[0]} in trigger function {name}") from None

    def swap(n: A.Node) -> Any | None:
        if not isinstance(n, A.ColumnRef):
            if isinstance(n, A.SubLink | A.RangeVar):
                _refuse(name, f"a query in {text!r}")
            return None
        fields = [f.sval if isinstance(f, A.String) else "*" for f in n.fields]
        if len(fields) == 1 and fields[0] == "tg_op":
            return A.A_Const(isnull=False, val=A.String(sval=event))
        if len(fields) != 2 or fields[0] not in ("new", "old"):
            _refuse(name, f"the reference {'.'.join(fields)}")
        record, col = fields
        if col == "*":
            _refuse(name, f"{record.upper()}.* in {text!r}")
        if record == "new":
            return _current(state, col)
        if event == "INSERT":
            return A.A_Const(isnull=True)
        return A.ColumnRef(fields=(A.String(sval=OLD_PREFIX + col),))

    return replaced(node, swap)


def when_condition(text: str, columns: list[str]) -> str:
    """CREATE TRIGGER's WHEN (...) as SQL over the row: `NEW.x` as `x`, `OLD.x` as the
    old version's, `NEW.*` / `OLD.*` as rows of the table's `columns`."""
    node = parse_sql(f"SELECT ({text})")[0].stmt.targetList[0].val

    def swap(n: A.Node) -> Any | None:
        if not isinstance(n, A.ColumnRef) or len(n.fields) != 2:
            return None
        record = n.fields[0].sval if isinstance(n.fields[0], A.String) else ""
        prefix = {"new": "", "old": OLD_PREFIX}.get(record)
        if prefix is None:
            return None
        if isinstance(n.fields[1], A.A_Star):
            return A.RowExpr(
                args=tuple(A.ColumnRef(fields=(A.String(sval=prefix + c),)) for c in columns),
                row_format=CoercionForm.COERCE_IMPLICIT_CAST,
            )
        return A.ColumnRef(fields=(A.String(sval=prefix + n.fields[1].sval),))

    return deparse(replaced(node, swap))


def _true(c: Any) -> Any:
    """IF's condition: NULL is false."""
    return A.CoalesceExpr(args=(c, A.A_Const(isnull=False, val=A.Boolean(boolval=False))))


def _and(a: Any, b: Any) -> Any:
    if a is False or b is False:
        return False
    if a is None:
        return b
    return A.BoolExpr(boolop=BoolExprType.AND_EXPR, args=(copy_tree(a), b))


def _not(c: Any) -> Any:
    return A.BoolExpr(boolop=BoolExprType.NOT_EXPR, args=(copy_tree(c),))


def _or(guards: list[Any]) -> Any:
    live = [g for g in guards if g is not False]
    if not live:
        return False
    if any(g is None for g in live):
        return None
    return live[0] if len(live) == 1 else A.BoolExpr(boolop=BoolExprType.OR_EXPR, args=tuple(live))


def _case(guard: Any, value: Any, otherwise: Any) -> Any:
    return A.CaseExpr(args=(A.CaseWhen(expr=copy_tree(guard), result=value),), defresult=otherwise)
