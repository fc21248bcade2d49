"""Headwater's statements beyond PostgreSQL's grammar, recognised from scanner tokens.

    SELECT ... AS OF [EPOCH] n | AS OF TIMESTAMP '...'
    SUBSCRIBE [TO] name | (SELECT ...) [ENVELOPE UPSERT (KEY (col, ...))]
        [WITH (SNAPSHOT [= bool], PROGRESS [= bool])] [AS OF [EPOCH] n] [UP TO n]
    COPY (SUBSCRIBE ...) TO STDOUT
    DECLARE c CURSOR FOR SUBSCRIBE ... | SELECT ... AS OF ...
    FETCH [n | ALL | FORWARD n] [FROM | IN] c WITH (timeout = '1s')
    EXPLAIN [ ( option, ... ) ] [ [OPTIMIZED | PHYSICAL] PLAN [AS TEXT | JSON] FOR ]
        MATERIALIZED VIEW name                      (Materialize's form)
    EXPLAIN [ ( option, ... ) | ANALYZE | VERBOSE ] SELECT ... AS OF ...
    CREATE SINK [IF NOT EXISTS] name FROM relation
        INTO PARQUET | DELTA | ICEBERG | POSTGRES 'target' [TABLE name] [WITH (option = value, ...)]
    DROP SINK [IF EXISTS] name

pglast parses everything else. The tokens come from PostgreSQL's own scanner (so
string literals and comments are never mistaken for keywords); the embedded SELECT
is handed back to pglast, so it is bound like any other query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pglast.ast as A
from pglast import parse_sql
from pglast.parser import ParseError, scan

from headwater.errors import SyntaxErr


@dataclass(frozen=True)
class AsOf:
    epoch: int | None = None
    timestamp: str | None = None  # resolved to the newest epoch closed at or before it


@dataclass
class SelectAsOf:
    """A SELECT read at a past epoch."""

    stmt: A.SelectStmt
    as_of: AsOf


@dataclass
class Subscribe:
    relation: A.RangeVar | None  # SUBSCRIBE name
    query: A.SelectStmt | None  # SUBSCRIBE (SELECT ...)
    upsert_key: tuple[str, ...] | None = None
    snapshot: bool = True
    progress: bool = False
    as_of: AsOf | None = None
    up_to: int | None = None


@dataclass
class CopySubscribe:
    subscribe: Subscribe


@dataclass
class DeclareSubscribe:
    name: str
    subscribe: Subscribe


@dataclass
class DeclareSelectAsOf:
    """DECLARE c CURSOR FOR SELECT ... AS OF ... (psycopg's server-side cursors)."""

    name: str
    select: SelectAsOf


@dataclass
class FetchTimeout:
    """FETCH with Materialize's WITH (timeout = ...): wait at most that long."""

    name: str
    count: int | None  # None: ALL
    timeout: str  # a duration, as settings take it ('1s', '500ms')


@dataclass
class ExplainMatview:
    """EXPLAIN of an existing materialized view: its incremental plan."""

    name: A.RangeVar
    options: tuple[A.DefElem, ...] = ()


@dataclass
class ExplainSelectAsOf:
    """EXPLAIN of a SELECT read at a past epoch."""

    select: SelectAsOf
    options: tuple[A.DefElem, ...] = ()


@dataclass
class CreateSink:
    """CREATE SINK: a relation's contents or changes, continuously, into a target
    (server/sinks.py)."""

    name: A.RangeVar
    source: A.RangeVar
    kind: str  # parquet | delta | iceberg | postgres
    target: str  # a directory, a Delta table's path or URI, a PostgreSQL conninfo
    table: str | None = None  # INTO POSTGRES ... TABLE name
    options: tuple[tuple[str, str | None], ...] = ()
    if_not_exists: bool = False


@dataclass
class DropSink:
    name: A.RangeVar
    if_exists: bool = False


SINK_KINDS = ("parquet", "delta", "iceberg", "postgres")

EXTENDED = (
    SelectAsOf,
    CreateSink,
    DropSink,
    ExplainMatview,
    ExplainSelectAsOf,
    Subscribe,
    CopySubscribe,
    DeclareSubscribe,
    DeclareSelectAsOf,
    FetchTimeout,
)


class _Tokens:
    def __init__(self, sql: str) -> None:
        self.sql = sql
        try:
            self.toks = scan(sql)
        except ParseError as e:
            raise SyntaxErr(str(e.args[0])) from None
        self.i = 0

    def peek(self, k: int = 0) -> Any:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def word(self, k: int = 0) -> str:
        t = self.peek(k)
        if t is None:
            return ""
        if t.name == "IDENT":
            text = self.text(t)
            return text[1:-1].replace('""', '"') if text.startswith('"') else text.lower()
        if t.name in ("SCONST", "ICONST", "FCONST"):
            return ""
        return t.name.lower() if t.kind != "NO_KEYWORD" else self.text(t)

    def text(self, t: Any) -> str:
        return self.sql[t.start : t.end + 1]

    def at(self, *words: str) -> bool:
        return all(self.word(k) == w for k, w in enumerate(words))

    def take(self, *words: str) -> bool:
        if self.at(*words):
            self.i += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.take(*words):
            self.fail(" ".join(words).upper())

    def fail(self, wanted: str) -> None:
        t = self.peek()
        where = f'at or near "{self.text(t)}"' if t is not None else "at end of input"
        raise SyntaxErr(
            f"syntax error {where}" + (f" (expected {wanted})" if wanted else ""),
            position=(t.start + 1) if t is not None else len(self.sql) + 1,
        )

    def done(self) -> bool:
        t = self.peek()
        return t is None or (t.name == "ASCII_59" and self.peek(1) is None)

    def paren_end(self) -> int:
        """Index of the ')' matching the '(' at the cursor."""
        depth = 0
        for j in range(self.i, len(self.toks)):
            n = self.toks[j].name
            depth += n == "ASCII_40"
            depth -= n == "ASCII_41"
            if depth == 0:
                return j
        self.i = len(self.toks)
        self.fail(")")
        raise AssertionError

    def integer(self) -> int:
        t = self.peek()
        if t is None or t.name != "ICONST":
            self.fail("an integer")
        self.i += 1
        return int(self.text(t))

    def string(self) -> str:
        t = self.peek()
        if t is None or t.name != "SCONST":
            self.fail("a string")
        self.i += 1
        return str(self.text(t)[1:-1].replace("''", "'"))


def parse_extended(sql: str) -> Any | None:
    """One statement of Headwater's extended syntax, or None when it is not one (then
    pglast's error for the statement stands)."""
    tk = _Tokens(sql)
    if not tk.toks:
        return None
    first = tk.word()
    if first == "subscribe":
        return _subscribe(tk, top=True)
    if first == "copy" and tk.word(1) == "(" and tk.word(2) == "subscribe":
        tk.i = 1
        close = tk.paren_end()
        inner = _Tokens(sql[tk.toks[2].start : tk.toks[close].start])
        sub = _subscribe(inner, top=False)
        tk.i = close + 1
        tk.expect("to", "stdout")
        if not tk.done():
            tk.fail("end of COPY")
        return CopySubscribe(sub)
    if first == "declare" and (_find(tk, "subscribe") is not None or _find(tk, "of") is not None):
        tk.i += 1
        t = tk.peek()
        if t is None:
            tk.fail("a cursor name")
        name = tk.word()
        tk.i += 1
        while tk.word() in ("no", "scroll", "binary", "insensitive", "asensitive"):
            tk.i += 1
        tk.expect("cursor")
        if tk.take("with", "hold") or tk.take("without", "hold"):
            pass
        tk.expect("for")
        rest = _Tokens(sql[tk.peek().start :]) if tk.peek() is not None else None
        if rest is None:
            return None
        if rest.word() == "subscribe":
            return DeclareSubscribe(name, _subscribe(rest, top=True))
        select = _select_as_of(rest) if rest.word() in ("select", "with", "(", "values") else None
        return DeclareSelectAsOf(name, select) if select is not None else None
    if first == "create" and tk.word(1) == "sink":
        return _create_sink(tk)
    if first == "drop" and tk.word(1) == "sink":
        return _drop_sink(tk)
    if first == "fetch" and _find(tk, "timeout") is not None:
        return _fetch(tk)
    if first == "explain" and _find(tk, "materialized") is not None:
        return _explain_matview(tk)
    if first == "explain" and _find(tk, "of") is not None:
        return _explain_select_as_of(tk)
    if first in ("select", "with", "(") or first == "values":
        return _select_as_of(tk)
    return None


def _find(tk: _Tokens, word: str) -> int | None:
    for j, t in enumerate(tk.toks):
        if (t.name.lower() == word) or (t.name == "IDENT" and tk.text(t).lower() == word):
            return j
    return None


def _as_of(tk: _Tokens) -> AsOf:
    """After AS OF: [EPOCH] n | TIMESTAMP 'text'."""
    if tk.take("timestamp"):
        return AsOf(timestamp=tk.string())
    tk.take("epoch")
    return AsOf(epoch=tk.integer())


def _select_as_of(tk: _Tokens) -> SelectAsOf | None:
    """A SELECT whose last top-level clause is AS OF ..."""
    depth = 0
    cut = None
    for j, t in enumerate(tk.toks):
        depth += t.name == "ASCII_40"
        depth -= t.name == "ASCII_41"
        if depth == 0 and t.name == "AS" and j + 1 < len(tk.toks):
            nxt = tk.toks[j + 1]
            if nxt.name == "OF":
                cut = j
    if cut is None:
        return None
    tk.i = cut + 2
    as_of = _as_of(tk)
    if not tk.done():
        tk.fail("end of statement after AS OF")
    stmt = _parse_select(tk.sql[: tk.toks[cut].start])
    if stmt is None:
        return None
    return SelectAsOf(stmt, as_of)


def _parse_select(text: str) -> A.SelectStmt | None:
    try:
        raws = parse_sql(text)
    except ParseError:
        return None
    if len(raws) != 1 or not isinstance(raws[0].stmt, A.SelectStmt):
        return None
    return raws[0].stmt


def _subscribe(tk: _Tokens, top: bool) -> Subscribe:
    tk.expect("subscribe")
    tk.take("to")
    t = tk.peek()
    if t is None:
        tk.fail("a relation or (SELECT ...)")
    sub: Subscribe
    if t.name == "ASCII_40":
        close = tk.paren_end()
        inner = tk.sql[tk.toks[tk.i + 1].start : tk.toks[close].start]
        query = _parse_select(inner)
        if query is None:
            raise SyntaxErr("SUBSCRIBE (...) needs a SELECT inside the parentheses")
        tk.i = close + 1
        sub = Subscribe(None, query)
    else:
        parts = [tk.word()]
        tk.i += 1
        while tk.word() == ".":
            tk.i += 1
            parts.append(tk.word())
            tk.i += 1
        rv = A.RangeVar(
            relname=parts[-1],
            schemaname=parts[-2] if len(parts) > 1 else None,
            inh=True,
            relpersistence="p",
        )
        sub = Subscribe(rv, None)
    while not tk.done():
        if tk.take("envelope", "upsert"):
            if tk.word() != "(":
                tk.fail("(KEY (...))")
            tk.i += 1
            tk.expect("key")
            sub.upsert_key = tuple(_name_list(tk))
            tk.expect(")")
        elif tk.take("with"):
            for key, value in _options(tk):
                if key == "snapshot":
                    sub.snapshot = _bool(value, key)
                elif key == "progress":
                    sub.progress = _bool(value, key)
                else:
                    raise SyntaxErr(f'unrecognized SUBSCRIBE option "{key}"')
        elif tk.take("as", "of"):
            sub.as_of = _as_of(tk)
        elif tk.take("up", "to"):
            sub.up_to = tk.integer()
        else:
            tk.fail("ENVELOPE, WITH, AS OF or UP TO")
    return sub


def _qualified(tk: _Tokens, what: str) -> A.RangeVar:
    """[schema.]name"""
    if tk.peek() is None or tk.word() in ("", "(", ")", ",", ";"):
        tk.fail(what)
    parts = [tk.word()]
    tk.i += 1
    while tk.word() == ".":
        tk.i += 1
        if tk.peek() is None:
            tk.fail(what)
        parts.append(tk.word())
        tk.i += 1
    if len(parts) > 2:
        raise SyntaxErr(f"improper qualified name (too many dotted names): {'.'.join(parts)}")
    return A.RangeVar(
        relname=parts[-1],
        schemaname=parts[-2] if len(parts) > 1 else None,
        inh=True,
        relpersistence="p",
    )


def _create_sink(tk: _Tokens) -> CreateSink:
    tk.expect("create", "sink")
    if_not_exists = tk.take("if_p", "not", "exists")
    name = _qualified(tk, "a sink name")
    tk.expect("from")
    source = _qualified(tk, "a table or materialized view")
    tk.expect("into")
    kind = tk.word()
    if kind not in SINK_KINDS:
        tk.fail("PARQUET, DELTA, ICEBERG or POSTGRES")
    tk.i += 1
    sink = CreateSink(name, source, kind, tk.string(), if_not_exists=if_not_exists)
    if tk.take("table"):
        table = _qualified(tk, "a table name")
        sink.table = f"{table.schemaname}.{table.relname}" if table.schemaname else table.relname
    if tk.take("with"):
        sink.options = tuple(_options(tk))
    if not tk.done():
        tk.fail("TABLE, WITH or end of CREATE SINK")
    return sink


def _drop_sink(tk: _Tokens) -> DropSink:
    tk.expect("drop", "sink")
    if_exists = tk.take("if_p", "exists")
    name = _qualified(tk, "a sink name")
    if not tk.done():
        tk.fail("end of DROP SINK")
    return DropSink(name, if_exists)


def _name_list(tk: _Tokens) -> list[str]:
    if tk.word() != "(":
        tk.fail("(")
    tk.i += 1
    names = []
    while True:
        t = tk.peek()
        if t is None:
            tk.fail(")")
        names.append(tk.word())
        tk.i += 1
        if tk.word() == ",":
            tk.i += 1
            continue
        tk.expect(")")
        return names


def _options(tk: _Tokens) -> list[tuple[str, str | None]]:
    """(name [= value], ...)"""
    if tk.word() != "(":
        tk.fail("(")
    tk.i += 1
    out: list[tuple[str, str | None]] = []
    while True:
        t = tk.peek()
        if t is None:
            tk.fail(")")
        key = tk.word()
        tk.i += 1
        value: str | None = None
        if tk.word() == "=":
            tk.i += 1
            v = tk.peek()
            if v is None:
                tk.fail("a value")
            if v.name == "SCONST":
                value = tk.string()
            else:
                value = tk.text(v)
                tk.i += 1
        elif tk.word() not in (",", ")"):
            v = tk.peek()
            value = tk.text(v)
            tk.i += 1
        out.append((key, value))
        if tk.word() == ",":
            tk.i += 1
            continue
        tk.expect(")")
        return out


def _bool(value: str | None, key: str) -> bool:
    if value is None:
        return True
    v = value.lower()
    if v in ("true", "on", "1", "t", "yes"):
        return True
    if v in ("false", "off", "0", "f", "no"):
        return False
    raise SyntaxErr(f'option "{key}" requires a Boolean value')


def _fetch(tk: _Tokens) -> FetchTimeout:
    tk.expect("fetch")
    count: int | None = 1
    tk.take("forward")
    if tk.take("all"):
        count = None
    elif tk.peek() is not None and tk.peek().name == "ICONST":
        count = tk.integer()
    elif tk.take("next"):
        count = 1
    if tk.word() in ("from", "in"):
        tk.i += 1
    name = tk.word()
    tk.i += 1
    timeout = "0"
    if tk.take("with"):
        for key, value in _options(tk):
            if key != "timeout":
                raise SyntaxErr(f'unrecognized FETCH option "{key}"')
            timeout = value or "0"
    if not tk.done():
        tk.fail("end of FETCH")
    return FetchTimeout(name, count, timeout)


def replace_calls(node: Any, name: str, value: Any) -> list[tuple[Any, str, Any]]:
    """Replace every call `name()` (no arguments) under `node` by the node `value`, in
    place; returns the undo list (parent, attribute, old) for `restore`."""
    undo: list[tuple[Any, str, Any]] = []

    def is_call(n: Any) -> bool:
        return (
            isinstance(n, A.FuncCall)
            and not n.args
            and n.funcname[-1].sval == name
            and (len(n.funcname) == 1 or n.funcname[0].sval == "pg_catalog")
        )

    def walk(n: Any) -> None:
        if not isinstance(n, A.Node):
            return
        for attr in n:
            child = getattr(n, attr)
            if is_call(child):
                undo.append((n, attr, child))
                setattr(n, attr, value)
            elif isinstance(child, tuple):
                if any(is_call(c) for c in child):
                    undo.append((n, attr, child))
                    child = tuple(value if is_call(c) else c for c in child)
                    setattr(n, attr, child)
                for c in child:
                    walk(c)
            else:
                walk(child)

    walk(node)
    return undo


def restore(undo: list[tuple[Any, str, Any]]) -> None:
    while undo:
        parent, attr, old = undo.pop()
        setattr(parent, attr, old)


def _explain_options(tk: _Tokens) -> tuple[A.DefElem, ...]:
    """After EXPLAIN: `( option, ... )` (parsed by pglast on a stand-in statement) or
    the old ANALYZE / VERBOSE words."""
    if tk.word() == "(":
        start = tk.i
        close = tk.paren_end()
        text = tk.sql[tk.toks[start].start : tk.toks[close].end + 1]
        tk.i = close + 1
        try:
            stand_in = parse_sql(f"EXPLAIN {text} SELECT")[0].stmt
        except ParseError as e:
            raise SyntaxErr(str(e.args[0])) from None
        return tuple(stand_in.options or ())
    opts: tuple[A.DefElem, ...] = ()
    while tk.word() in ("analyze", "analyse", "verbose"):
        name = "analyze" if tk.word().startswith("analy") else "verbose"
        opts += (A.DefElem(defname=name),)
        tk.i += 1
    return opts


def _explain_select_as_of(tk: _Tokens) -> ExplainSelectAsOf | None:
    tk.expect("explain")
    opts = _explain_options(tk)
    t = tk.peek()
    if t is None:
        return None
    select = _select_as_of(_Tokens(tk.sql[t.start :]))
    return ExplainSelectAsOf(select, opts) if select is not None else None


_PLAN_STAGES = ("raw", "decorrelated", "locally", "optimized", "physical")


def _explain_matview(tk: _Tokens) -> ExplainMatview | None:
    """EXPLAIN [ (options) ] [ <stage> PLAN [AS TEXT|JSON] FOR ] MATERIALIZED VIEW name;
    the options are PostgreSQL's (parsed by pglast on a stand-in statement)."""
    tk.expect("explain")
    opts = _explain_options(tk)
    while tk.word() in _PLAN_STAGES:
        tk.i += 1
    if tk.take("plan"):
        if tk.take("as"):
            fmt = tk.word().removesuffix("_p")  # TEXT is the scanner's TEXT_P
            if fmt not in ("text", "json"):
                tk.fail("TEXT or JSON")
            tk.i += 1
            opts += (A.DefElem(defname="format", arg=A.String(sval=fmt)),)
        tk.expect("for")
    if not tk.take("materialized", "view"):
        return None
    t = tk.peek()
    if t is None:
        tk.fail("a materialized view's name")
    rest = tk.sql[t.start :].strip().rstrip(";")
    try:
        stmt = parse_sql(f"SELECT FROM {rest}")[0].stmt
    except ParseError:
        return None
    rels = stmt.fromClause or ()
    if len(rels) != 1 or not isinstance(rels[0], A.RangeVar) or stmt.whereClause is not None:
        return None
    return ExplainMatview(rels[0], opts)
