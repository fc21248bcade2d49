"""SQL text to statements: pglast's parse, and Headwater's own statements where it fails.

A Query or Parse message's text becomes (statement, source text) pairs; errors get
PostgreSQL's fields (position of a syntax error, of an unknown column).
"""

from __future__ import annotations

from typing import Any

import pglast.ast as A
from headwater.planner import values_parse
from headwater.planner.extensions import parse_extended
from headwater.planner.syntax import nodes
from pglast import parse_sql
from pglast.parser import ParseError
from pglast.parser import split as pglast_split

from headwater.errors import SQLError, SyntaxErr


def locate_column(err: SQLError, stmt: Any) -> None:
    """Point an unknown-column error at the reference, as PostgreSQL's cursor does."""
    if err.sqlstate != "42703" or err.position is not None or '"' not in err.message:
        return
    name = err.message.split('"')[1]
    found = [
        n.location
        for n in nodes(stmt)
        if isinstance(n, A.ColumnRef)
        and isinstance(n.fields[-1], A.String)
        and n.fields[-1].sval == name
        and n.location is not None
    ]
    if found:
        err.position = min(found) + 1


def parse_statements(sql: str) -> list[tuple[Any, str]]:
    """pglast statements with their source text; syntax errors get PostgreSQL's fields."""
    try:
        # a long INSERT ... VALUES: the same nodes, built faster (planner/values_parse.py)
        raws = values_parse.parse(sql) or parse_sql(sql)
    except ParseError as e:
        return _parse_extended_statements(sql, e)
    out = []
    for r in raws:
        start = r.stmt_location or 0
        text = sql[start : start + r.stmt_len] if r.stmt_len else sql[start:]
        out.append((r.stmt, text))
    return out


def _parse_extended_statements(sql: str, error: ParseError) -> list[tuple[Any, str]]:
    """Statements when pglast refused the text: Headwater's own (SUBSCRIBE, AS OF, ...)
    are recognised one by one; any other statement keeps PostgreSQL's syntax error."""
    msg, loc = error.args[0], error.args[1] if len(error.args) > 1 else None
    if loc is None and msg.endswith("at end of input"):  # pglast has no index past the end
        loc = len(sql)
    refused = SyntaxErr(msg, position=(loc + 1) if isinstance(loc, int) else None)
    out: list[tuple[Any, str]] = []
    for piece in pglast_split(sql, with_parser=False):
        try:
            out.extend((r.stmt, piece) for r in parse_sql(piece))
            continue
        except ParseError:
            pass
        stmt = parse_extended(piece)
        if stmt is None:
            raise refused from None
        out.append((stmt, piece))
    if not out:  # the lexer's split finds no statement in `(1` unclosed: not an empty query
        raise refused from None
    return out
