"""Simple-protocol point reads and fast writes by the shape of their text.

A statement sent as text with its values inlined (`SELECT abalance FROM accounts WHERE
aid = 48213`, `INSERT INTO t VALUES (7, 'x', 1.5)`: psycopg2, pgbench, psql) is a new
text for every value, so each one was parsed by pglast (~35-65 µs) and, for a write,
worked out again by the fast path (the template a prepared statement keeps: ~40% of
its Python work). Here a connection remembers, per text shape (the text with each
literal replaced by `$n`, and the literals' kinds), the tree of that shape with
parameters; a text of a known shape is scanned only (~4-10 µs, libpg_query's C
scanner) and runs as that tree with its literals as parameters.

Remembered are shapes whose literals mean what their parameters mean, for the catalog,
search_path and temporary schema they were recognised under:
- point reads whose every literal is a key value of the column's kind (integers for
  integer keys, plain '...' strings for text keys): server/point_reads.py serves them
  as it serves the extended protocol's `WHERE aid = $1`;
- INSERTs, UPDATEs and DELETEs a fast path took (server/executor.py `fast_write`): the
  batcher's paths read a literal and a parameter alike (server/batcher.py `constant`).
  Run again, such a shape must be taken by a fast path again, else (and on any error,
  for PostgreSQL's message with the literal's position) the text runs as usual.
Anything else is parsed as before.
"""

from __future__ import annotations

import decimal
import re
from collections import OrderedDict
from typing import Any

import pglast.ast as A
from headwater.server import point_reads
from headwater.server.session import Session
from pglast import parse_sql
from pglast.parser import scan

SHAPES = 64  # text shapes a connection remembers
MAX_CHARS = 2000  # longer texts are not point reads worth scanning (a long INSERT ...)
_INT = re.compile(r"\d{1,18}")  # (longer: maybe beyond bigint; parsed as before)
_DECIMAL = re.compile(r"\d{0,30}\.\d{1,30}")  # (with an exponent: parsed as before)
_STR = re.compile(r"'(?:[^'\\]|'')*'")  # a plain string: no E'', no backslash


class LiteralShapes:
    def __init__(self) -> None:
        # (shape text, literal kinds) -> (tree with $n, catalog, search_path, temp schema)
        self._shapes: OrderedDict[tuple[str, tuple[str, ...]], tuple[Any, Any, str, Any]] = (
            OrderedDict()
        )

    def lookup(self, s: Session, sql: str) -> tuple[Any, list[Any]] | None:
        """(the tree of the text's shape, its literals as parameters) when the shape is
        known under the session's catalog and search path; else None. A SELECT's is a
        point read; a write's runs through `Executor.fast_write`."""
        if not self._shapes or s.write is not None:
            return None
        shape = _shape(sql)
        if shape is None:
            return None
        text, kinds, values = shape
        hit = self._shapes.get((text, kinds))
        if hit is None:
            return None
        tree, catalog, path, temp = hit
        if (
            catalog is not s.catalog
            or path != s.settings.values["search_path"]
            or temp != s.temp_schema
        ):
            return None
        self._shapes.move_to_end((text, kinds))
        return tree, values

    def learn_write(self, s: Session, sql: str) -> None:
        """Remember the shape of `sql`, a write a fast path just took."""
        shape = _shape(sql)
        if shape is None or (shape[0], shape[1]) in self._shapes:
            return
        try:
            (raw,) = parse_sql(shape[0])
        except Exception:
            return
        if not isinstance(raw.stmt, A.InsertStmt | A.UpdateStmt | A.DeleteStmt):
            return
        self._remember(s, shape[0], shape[1], raw.stmt)

    def _remember(self, s: Session, text: str, kinds: tuple[str, ...], tree: Any) -> None:
        self._shapes[(text, kinds)] = (
            tree,
            s.catalog,
            s.settings.values["search_path"],
            s.temp_schema,
        )
        while len(self._shapes) > SHAPES:
            self._shapes.popitem(last=False)

    def learn(self, s: Session, sql: str, stmt: Any) -> None:
        """Remember the shape of `sql` (parsed as `stmt`) if it is a point read whose
        literals are all its key values."""
        if not isinstance(stmt, A.SelectStmt) or s.write is not None:
            return
        spec = point_reads.point_read(s, stmt)
        if spec is None or any(is_param for is_param, _ in spec.sources):
            return
        shape = _shape(sql)
        if shape is None or len(shape[2]) != len(spec.sources):
            return
        text, kinds, values = shape
        # each literal must be a key value of its column's kind (in any order)
        wanted = sorted(
            (repr(v), "i" if bounds is not None else "s")
            for (_, v), bounds in zip(spec.sources, spec.ranges, strict=True)
        )
        if sorted(zip(map(repr, values), kinds, strict=True)) != wanted:
            return
        try:
            (raw,) = parse_sql(text)
        except Exception:
            return
        tree = raw.stmt
        typed = point_reads.recognise(tree, s.catalog, s.search_path())
        if typed is None or not all(is_param for is_param, _ in typed.sources):
            return
        self._remember(s, text, kinds, tree)


def _shape(sql: str) -> tuple[str, tuple[str, ...], list[Any]] | None:
    """(the text with its literals as $1, $2, ..., their kinds, their values), or None
    when a literal is not a plain integer, decimal or string, or the text has
    parameters."""
    if len(sql) > MAX_CHARS:
        return None
    try:
        tokens = scan(sql)
    except Exception:
        return None
    parts: list[str] = []
    kinds: list[str] = []
    values: list[Any] = []
    pos = 0
    for tok in tokens:
        name = tok.name
        if name == "PARAM":
            return None
        if name not in ("ICONST", "SCONST", "FCONST"):
            continue
        lit = sql[tok.start : tok.end + 1]
        if name == "ICONST" and _INT.fullmatch(lit):
            values.append(int(lit))
            kinds.append("i")
        elif name == "FCONST" and _DECIMAL.fullmatch(lit):  # numeric, as PostgreSQL reads it
            values.append(decimal.Decimal(lit))
            kinds.append("f")
        elif name == "SCONST" and _STR.fullmatch(lit):
            values.append(lit[1:-1].replace("''", "'"))
            kinds.append("s")
        else:
            return None
        parts.append(sql[pos : tok.start])
        parts.append(f"${len(values)}")
        pos = tok.end + 1
    if not values:
        return None
    parts.append(sql[pos:])
    return "".join(parts), tuple(kinds), values
