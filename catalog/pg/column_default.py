"""A column default as pg_get_expr() prints it: PostgreSQL shows the casts it inferred
('abc'::text, 'x'::character varying, NULL::integer), Headwater stores the text given."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pglast.ast as A
from headwater.catalog.identifiers import quote_ident
from headwater.catalog.objects import Column, Relation
from headwater.catalog.pg.expressions import expression_text
from headwater.catalog.types import BPCHAR, type_display
from pglast import parse_sql

_NEXTVAL = re.compile(r"nextval\('(\d+)'::regclass\)")


def expr_display(
    col: Column,
    search_path: tuple[str, ...] = (),
    relation: Callable[[int], tuple[str, str] | None] | None = None,
) -> str | None:
    """A column default as pg_get_expr() shows it (PostgreSQL adds the casts it inferred;
    `nextval('<oid>'::regclass)` names its sequence, with its schema only when the search
    path does not reach it; `relation(oid)` gives (schema, name))."""
    if col.default is None or col.identity:  # an identity column shows no default
        return None
    if relation is not None and "nextval('" in col.default:
        return _NEXTVAL.sub(lambda m: _nextval_display(m, search_path, relation), col.default)
    try:
        node = parse_sql(f"SELECT {col.default}")[0].stmt.targetList[0].val
    except Exception:  # noqa: BLE001 - keep what was stored
        return col.default
    ct = col.type
    base = type_display(ct.pg, search_path) if ct.pg is not BPCHAR else "bpchar"
    if isinstance(node, A.A_Const) and not node.isnull:
        v = node.val
        if isinstance(v, A.String):
            if ct.pg.name == "bool":
                low = v.sval.strip().lower()
                if low in ("t", "true", "yes", "y", "on", "1"):
                    return "true"
                if low in ("f", "false", "no", "n", "off", "0"):
                    return "false"
            if ct.pg.category == "N" and _is_number(v.sval):
                return (
                    v.sval.strip()
                    if not v.sval.strip().startswith("-")
                    else (f"'{v.sval.strip()}'::{base}")
                )
            return "'" + v.sval.replace("'", "''") + f"'::{base}"
        if isinstance(v, A.Integer | A.Float):
            text = str(v.ival) if isinstance(v, A.Integer) else v.fval
            if text.startswith("-"):
                return f"'{text}'::{base}"
            if ct.pg.category == "N":
                return text
            return f"'{text}'::{base}"
        if isinstance(v, A.Boolean):
            return "true" if v.boolval else "false"
    if isinstance(node, A.A_Const) and node.isnull:  # PostgreSQL stores no NULL default
        return None
    if isinstance(node, A.TypeCast) and isinstance(node.arg, A.A_Const) and node.arg.isnull:
        return None
    if isinstance(node, A.TypeCast) and isinstance(node.arg, A.A_Const):
        inner = Column(col.name, ct, col.not_null, _deparse(node.arg))
        return expr_display(inner, search_path)
    if isinstance(node, A.A_Expr | A.FuncCall | A.BoolExpr):
        return expression_text(node, Relation(0, "", "", (col,)), False, None)
    return col.default


def _nextval_display(
    m: re.Match[str],
    search_path: tuple[str, ...],
    relation: Callable[[int], tuple[str, str] | None],
) -> str:
    found = relation(int(m.group(1)))
    if found is None:
        return m.group(0)
    schema, name = found
    shown = (
        quote_ident(name) if schema in search_path else f"{quote_ident(schema)}.{quote_ident(name)}"
    )
    return "nextval('" + shown.replace("'", "''") + "'::regclass)"


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _deparse(node: Any) -> str:
    from pglast.stream import RawStream

    return str(RawStream()(node))
