"""sqllogictest runner for any PostgreSQL-wire server (sqllogictest-rs 0.29 semantics).

    python -m tests.sqllogictest.runner --host 127.0.0.1 --port 6544 FILE...

Records: ``statement ok | error [<regex> | (<SQLSTATE>)] | count N``, ``query <types>
[nosort|rowsort|valuesort] [label]`` / ``query error ...`` with ``----`` results,
``hash-threshold``, ``skipif``/``onlyif <label>``, ``halt``, ``control sortmode``,
``connection <name>``, ``include``, ``sleep``; anything else (``system ok``, ...) is
skipped and reported, with the lines it owns.

RisingWave's e2e files (sqllogictest-rs): ``flush`` and RisingWave-only settings
(``SET RW_IMPLICIT_FLUSH``, ``SET VISIBILITY_MODE``, ...: ``RW_SETTINGS``) are skipped
with the reason they are no-ops here: a read in Headwater waits for the writes before
it, views included. ``--schema`` runs each file in a schema of its own, and
``--classify-unsupported`` counts what the server refuses with 0A000 as
``unsupported`` (with its message), apart from failures; records that fail because
such a record did not create their table, view or column say ``after line N``.

Values. Two formats, chosen per file (``result_format``):

* ``raw`` (``.slt`` files, sqllogictest-rs's ``postgres`` engine): the server's text
  output as sent; NULL -> ``NULL``, empty string -> ``(empty)``.
* ``classic`` (``.test`` files from SQLite's corpus): each value is rendered by the
  column's type letter, as SQLite's sqllogictest does (slt_sqlite.c / slt_odbc3.c):
  ``I`` -> the value as an integer truncated toward zero (numeric ``2.75`` -> ``2``),
  ``R`` -> ``printf("%.3f")``, ``T`` -> the text with every byte outside 0x20..0x7e as
  ``@``; NULL -> ``NULL`` and empty text -> ``(empty)`` whatever the letter; booleans
  as ``1``/``0`` (SQLite has no boolean type). The default hash threshold is 8.

Comparison: whitespace in values and expected lines is collapsed; ``rowsort`` sorts
rows (value by value), ``valuesort`` sorts all values; results match either row-wise
(one row a line, values joined by a space) or value-wise (one value a line, the
SQLite layout). ``N values hashing to <md5>`` is the md5 of each value followed by a
newline, after sorting; it is used when the expected result is a hash line.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Literal

import psycopg
from psycopg.pq import ExecStatus

ENGINE_LABEL = "postgresql"
CLASSIC_HASH_THRESHOLD = 8  # sqllogictest.c's DEFAULT_HASH_THRESHOLD
SORT_MODES = ("nosort", "rowsort", "valuesort")
ResultFormat = Literal["auto", "classic", "raw"]
MAX_SHOWN_LINES = 20
MAX_SHOWN_CHARS = 2000

# ---------------------------------------------------------------- records


@dataclass
class Condition:
    kind: Literal["skipif", "onlyif"]
    label: str


@dataclass
class ErrorExpect:
    """What a failing record must fail with; all empty means any error."""

    regex: str = ""
    multiline: str | None = None  # exact message under ``----`` (trimmed)

    def describe(self) -> str:
        if self.multiline is not None:
            return self.multiline
        return self.regex or "(any error)"


@dataclass
class Record:
    source: str
    line: int
    conditions: list[Condition]


@dataclass
class Statement(Record):
    sql: str
    connection: str | None = None
    error: ErrorExpect | None = None
    count: int | None = None


@dataclass
class Query(Record):
    sql: str
    connection: str | None = None
    types: str = ""
    sort_mode: str | None = None
    label: str | None = None
    expected: list[str] = field(default_factory=list)
    error: ErrorExpect | None = None


@dataclass
class Directive(Record):
    """halt, hash-threshold, control, sleep, include, and unsupported ones (``supported``)."""

    name: str
    args: list[str]
    supported: bool = True


class ParseError(Exception):
    pass


def _header(line: str) -> list[str]:
    tokens = line.split()
    for i, tok in enumerate(tokens):
        if tok.startswith("#"):  # trailing comment
            return tokens[:i]
    return tokens


def _is_blank(line: str) -> bool:
    return not line.strip()


def _read_body(lines: list[str], i: int) -> tuple[list[str], int, bool]:
    """SQL lines from ``i`` up to a blank line or ``----``; returns (body, next i, saw ----)."""
    body: list[str] = []
    while i < len(lines) and not _is_blank(lines[i]):
        if lines[i].rstrip() == "----":
            return body, i + 1, True
        if not lines[i].startswith("#"):  # comment lines are dropped, as sqllogictest.c does
            body.append(lines[i])
        i += 1
    return body, i, False


def _read_results(lines: list[str], i: int) -> tuple[list[str], int]:
    out: list[str] = []
    while i < len(lines) and not _is_blank(lines[i]):
        out.append(lines[i])
        i += 1
    return out, i


def _read_multiline_error(lines: list[str], i: int) -> tuple[str, int]:
    """Error text under ``----``, ended by two consecutive blank lines (sqllogictest-rs)."""
    out: list[str] = []
    while i < len(lines):
        if _is_blank(lines[i]) and (i + 1 >= len(lines) or _is_blank(lines[i + 1])):
            return "\n".join(out).strip(), i + 2
        out.append(lines[i])
        i += 1
    return "\n".join(out).strip(), i


def parse_script(text: str, source: str = "<script>") -> list[Record]:
    """Parse sqllogictest text into records; ``include`` is expanded relative to ``source``."""
    lines = text.splitlines()
    records: list[Record] = []
    conditions: list[Condition] = []
    connection: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        lineno = i + 1
        if line.startswith("#") or _is_blank(line):
            i += 1
            continue
        tokens = _header(line)
        if not tokens:
            i += 1
            continue
        kind = tokens[0]
        if kind in ("skipif", "onlyif") and len(tokens) >= 2:
            conditions.append(Condition(kind, tokens[1]))  # type: ignore[arg-type]
            i += 1
            continue
        if kind == "connection" and len(tokens) == 2:
            connection = None if tokens[1] == "default" else tokens[1]
            i += 1
            continue
        conds, conditions = conditions, []
        conn, connection = connection, None
        if kind == "statement":
            body, i, delim = _read_body(lines, i + 1)
            stmt = Statement(source, lineno, conds, "\n".join(body), conn)
            arg = tokens[1] if len(tokens) > 1 else ""
            if arg == "ok":
                pass
            elif arg == "error":
                stmt.error = ErrorExpect(" ".join(tokens[2:]))
            elif arg == "count" and len(tokens) == 3 and tokens[2].isdigit():
                stmt.count = int(tokens[2])
            else:
                raise ParseError(f"{source}:{lineno}: invalid statement line: {line!r}")
            if delim:
                if stmt.error is None or stmt.error.regex:
                    raise ParseError(f"{source}:{lineno}: statement cannot have results")
                stmt.error.multiline, i = _read_multiline_error(lines, i)
            records.append(stmt)
        elif kind == "query":
            body, i, delim = _read_body(lines, i + 1)
            q = Query(source, lineno, conds, "\n".join(body), conn)
            if len(tokens) > 1 and tokens[1] == "error":
                q.error = ErrorExpect(" ".join(tokens[2:]))
                if delim:
                    if q.error.regex:
                        raise ParseError(f"{source}:{lineno}: error given twice")
                    q.error.multiline, i = _read_multiline_error(lines, i)
            else:
                q.types = tokens[1] if len(tokens) > 1 else ""
                rest = tokens[2:]
                if rest and rest[0] in SORT_MODES:
                    q.sort_mode = rest.pop(0)
                if rest and rest[0] != "retry":
                    q.label = rest[0]
                if delim:
                    q.expected, i = _read_results(lines, i)
            records.append(q)
        elif kind == "include" and len(tokens) == 2:
            i += 1
            base = Path(source).parent
            matches = sorted(glob.glob(str(base / tokens[1])))
            if not matches:
                raise ParseError(f"{source}:{lineno}: include matched no file: {tokens[1]}")
            for inc in matches:
                records.extend(parse_file(inc))
        else:
            supported = kind in ("halt", "hash-threshold", "sleep", "subtest") or (
                kind == "control" and len(tokens) == 3 and tokens[1] in ("sortmode", "resultmode")
            )
            records.append(Directive(source, lineno, conds, kind, tokens[1:], supported))
            i += 1
            # An unknown directive may own following lines (e.g. ``system ok``): skip them.
            while not supported and i < len(lines) and not _is_blank(lines[i]):
                i += 1
    return records


def parse_file(path: str | os.PathLike[str]) -> list[Record]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return parse_script(f.read(), str(path))


# ---------------------------------------------------------------- values

_BOOL_OID = 16
_INT_RE = re.compile(r"-?\d+")
_ATOI_RE = re.compile(r"\s*([+-]?\d+)")
_ATOF_RE = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_HASH_RE = re.compile(r"(\d+) values hashing to ([0-9a-f]{32})")
_WS_RE = re.compile(r"\s+")


def format_raw(value: str | None) -> str:
    """sqllogictest-rs postgres engine: text as sent, NULL and empty string spelled out."""
    if value is None:
        return "NULL"
    return value if value else "(empty)"


def _classic_int(v: str) -> str:
    if _INT_RE.fullmatch(v):
        return v
    try:
        d = Decimal(v)
        return str(int(d)) if d.is_finite() else "0"  # int() truncates toward zero, like atol
    except InvalidOperation:
        m = _ATOI_RE.match(v)  # text: its leading integer, or 0 (atol / sqlite3_column_int)
        return str(int(m.group(1))) if m else "0"


def _classic_real(v: str) -> str:
    try:
        r = float(v)
    except ValueError:
        m = _ATOF_RE.match(v)
        r = float(m.group(0)) if m else 0.0
    return f"{r:.3f}"


def format_classic(value: str | None, type_char: str, type_oid: int = 0) -> str:
    """SQLite sqllogictest rendering of one value for a column of type ``I``/``R``/``T``."""
    if value is None:
        return "NULL"
    if type_oid == _BOOL_OID and value in ("t", "f"):
        value = "1" if value == "t" else "0"
    if type_char == "I":
        return _classic_int(value)
    if type_char == "R":
        return _classic_real(value)
    if not value:
        return "(empty)"
    if value.isascii() and value.isprintable():
        return value
    return bytes(b if 0x20 <= b <= 0x7E else 0x40 for b in value.encode()).decode("ascii")


def hash_values(values: Iterable[str]) -> str:
    md5 = hashlib.md5()
    for v in values:
        md5.update(v.encode())
        md5.update(b"\n")
    return md5.hexdigest()


def _norm(s: str) -> str:
    return _WS_RE.sub(" ", s.strip())


# ---------------------------------------------------------------- results


@dataclass
class Skip:
    source: str
    line: int
    reason: str


@dataclass
class Failure:
    source: str
    line: int
    kind: str  # statement | query | file
    sql: str
    message: str
    expected: str = ""
    actual: str = ""


@dataclass
class RecordOutcome:
    """One record's outcome: ``pass``, ``skip``, ``unsupported`` or ``fail``, with a reason."""

    source: str
    line: int
    status: str
    reason: str = ""


@dataclass
class FileResult:
    path: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    unsupported: int = 0  # only with Runner(classify_unsupported=True)
    seconds: float = 0.0
    skips: list[Skip] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    outcomes: list[RecordOutcome] = field(default_factory=list)  # every record, in order
    error: str | None = None  # set when the file could not be run to its end

    @property
    def skip_reasons(self) -> dict[str, int]:
        return dict(Counter(s.reason for s in self.skips))


@dataclass
class RunResult:
    files: list[FileResult]

    @property
    def passed(self) -> int:
        return sum(f.passed for f in self.files)

    @property
    def failed(self) -> int:
        return sum(f.failed for f in self.files)

    @property
    def skipped(self) -> int:
        return sum(f.skipped for f in self.files)

    @property
    def unsupported(self) -> int:
        return sum(f.unsupported for f in self.files)

    @property
    def ok(self) -> bool:
        return all(f.failed == 0 and f.error is None for f in self.files)

    def to_json(self) -> dict[str, object]:
        return {
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "unsupported": self.unsupported,
            "files": [asdict(f) | {"skip_reasons": f.skip_reasons} for f in self.files],
        }


def _trim(lines: Sequence[str]) -> str:
    shown = list(lines[:MAX_SHOWN_LINES])
    if len(lines) > MAX_SHOWN_LINES:
        shown.append(f"... ({len(lines) - MAX_SHOWN_LINES} more lines)")
    text = "\n".join(shown)
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + " ..."


# ---------------------------------------------------------------- execution


@dataclass
class DbError:
    message: str  # "db error: ERROR: ...\nDETAIL: ..." as tokio-postgres prints it
    sqlstate: str | None
    connection_lost: bool = False

    def describe(self) -> str:
        return f"({self.sqlstate}) {self.message}" if self.sqlstate else self.message


@dataclass
class Outcome:
    rows: list[list[str | None]] | None = None  # None: no result set
    type_oids: list[int] = field(default_factory=list)
    rowcount: int = 0
    error: DbError | None = None


class _Watchdog:
    """Cancels a statement past its timeout, then cuts the socket if cancel did not help.

    One thread per runner, armed per statement: a thread per statement would cost
    more than the statements of the SQLite corpus themselves.
    """

    def __init__(self, grace: float = 10.0) -> None:
        self._cv = threading.Condition()
        self._conn: psycopg.Connection | None = None
        self._deadline: float | None = None
        self._stage = 0
        self._grace = grace
        self._thread: threading.Thread | None = None

    def arm(self, conn: psycopg.Connection, timeout: float) -> None:
        with self._cv:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True, name="slt-watchdog")
                self._thread.start()
            self._conn, self._deadline, self._stage = conn, time.monotonic() + timeout, 0
            self._cv.notify()

    def disarm(self) -> bool:
        """Disarm; True if the timeout fired for the statement just finished."""
        with self._cv:
            self._conn, self._deadline = None, None
            return self._stage > 0

    def _loop(self) -> None:
        while True:
            with self._cv:
                while True:
                    if self._deadline is None or self._conn is None:
                        self._cv.wait()
                        continue
                    delay = self._deadline - time.monotonic()
                    if delay > 0:
                        self._cv.wait(delay)
                        continue
                    conn, stage = self._conn, self._stage
                    self._stage += 1
                    self._deadline = time.monotonic() + self._grace if stage == 0 else None
                    break
            try:
                if stage == 0:
                    conn.cancel_safe(timeout=self._grace / 2)
                else:
                    # Shut the socket down under libpq: its blocked read fails at once.
                    s = socket.socket(fileno=os.dup(conn.pgconn.socket))
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
            except Exception:  # noqa: BLE001 - best effort; the statement reports its own error
                pass


_CREATE_RE = re.compile(
    r"""\bcreate\s+(?:or\s+replace\s+)?(?:(?:global|local)\s+)?(?:temp(?:orary)?\s+|unlogged\s+)?
        (materialized\s+view|table|view)\s+(?:if\s+not\s+exists\s+)?
        ((?:"[^"]+"|[\w$]+)(?:\s*\.\s*(?:"[^"]+"|[\w$]+))?)""",
    re.IGNORECASE | re.VERBOSE,
)
_FLUSH_RE = re.compile(r"\s*flush\s*;?\s*", re.IGNORECASE)
# RisingWave-only session settings (sqllogictest files of its e2e_test/): what each one
# does there, and why it is a no-op against a server whose reads wait for their writes.
RW_SETTINGS = {
    "rw_implicit_flush": "every DML flushes; Headwater reads already wait for their writes",
    "implicit_flush": "every DML flushes; Headwater reads already wait for their writes",
    "visibility_mode": "batch reads at the checkpoint; Headwater reads one committed epoch",
    "enable_locality_backfill": "a backfill strategy; no-op",
    "locality_backfill_mode": "a backfill strategy; no-op",
    "streaming_parallelism": "streaming job parallelism; no-op",
    "background_ddl": "CREATE MATERIALIZED VIEW returning before backfill; no-op",
    "streaming_use_arrangement_backfill": "a backfill strategy; no-op",
    "streaming_use_snapshot_backfill": "a backfill strategy; no-op",
    "query_mode": "local or distributed batch queries; no-op",
}
_RW_SET_RE = re.compile(
    r"\s*set\s+(?:session\s+)?(" + "|".join(RW_SETTINGS) + r")\s*(?:to|=)\s*[^;]*;?\s*",
    re.IGNORECASE,
)
_ALTER_ADD_RE = re.compile(
    r"\s*alter\s+table\s+(?:if\s+exists\s+)?((?:\w+\.)?\w+)\s+add\s+(?:column\s+)?"
    r"(?:if\s+not\s+exists\s+)?(\w+)",
    re.IGNORECASE,
)
_INDEX_RE = re.compile(
    r"\bcreate\s+(?:unique\s+)?index\s+(?:concurrently\s+)?(?:if\s+not\s+exists\s+)?(\w+)",
    re.IGNORECASE,
)
_QUOTED_RE = re.compile(r'"([^"]+)"')
_INSERT_RE = re.compile(r"\s*insert\s+into\s+((?:\w+\.)?\w+)", re.IGNORECASE)


def created_objects(sql: str) -> list[tuple[str, str]]:
    """(kind, name) of the tables / views / materialized views ``sql`` creates."""
    if "create" not in sql.lower():
        return []
    return [(_WS_RE.sub(" ", k.upper()), n) for k, n in _CREATE_RE.findall(sql)]


@dataclass
class _FileState:
    result: FileResult
    classic: bool
    hash_threshold: int
    sort_mode: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    created: list[tuple[str, str]] = field(default_factory=list)
    conns: dict[str | None, psycopg.Connection] = field(default_factory=dict)
    halted_at: int | None = None
    # With classify_unsupported: objects (lower-case names) and columns that a failed
    # record should have created -> the outcome of the record at the root of it.
    missing: dict[str, RecordOutcome] = field(default_factory=dict)
    missing_columns: dict[str, RecordOutcome] = field(default_factory=dict)
    failed_alters: dict[str, RecordOutcome] = field(default_factory=dict)
    # connection -> the outcome of its last failed record (the cause of a 25P02)
    last_failure: dict[str | None, RecordOutcome] = field(default_factory=dict)


class Runner:
    """Runs sqllogictest files against one PostgreSQL-wire server.

    ``labels``: names that ``onlyif``/``skipif`` match (the engine name is ``postgresql``).
    ``skip_sql``: (regex, reason) pairs; a record whose SQL fully matches is skipped.
    ``cleanup``: drop the tables/views a file creates (before it runs, and after).
    ``schema``: run every file in this schema (created, first in ``search_path`` of every
    connection, dropped with CASCADE before and after): files of a shared server that
    use the same names do not meet.
    ``init_sql``: statements run on every new connection (session settings).
    ``classify_unsupported``: a record refused with SQLSTATE 0A000 (feature not supported)
    is counted as ``unsupported`` with the server's message instead of ``failed``; a
    record that fails only because an earlier one failed to create a table, view, index
    or column it names (42P01, 42704, 42703) takes that earlier record's status, with
    the reason ``after line N: ...``.
    Always skipped, with the reason: ``flush`` and the RisingWave-only settings of
    ``RW_SETTINGS`` (no-ops: reads in Headwater wait for the writes before them).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 6544,
        user: str = "headwater",
        dbname: str | None = None,
        password: str | None = None,
        *,
        labels: Iterable[str] = (ENGINE_LABEL,),
        result_format: ResultFormat = "auto",
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        skip_sql: Iterable[tuple[str, str]] = (),
        skip_records: dict[tuple[str, int], str] | None = None,
        cleanup: bool = True,
        schema: str | None = None,
        classify_unsupported: bool = False,
        init_sql: Iterable[str] = (),
    ) -> None:
        self.conninfo: dict[str, str | int] = {
            "host": host,
            "port": port,
            "user": user,
            "dbname": dbname or user,
            "connect_timeout": max(1, int(connect_timeout)),
        }
        if password is not None:
            self.conninfo["password"] = password
        self.labels = set(labels)
        self.result_format = result_format
        self.timeout = timeout
        self.skip_sql = [(re.compile(p, re.IGNORECASE | re.DOTALL), r) for p, r in skip_sql]
        self.skip_sql.append((_FLUSH_RE, "risingwave-only: FLUSH (no-op)"))
        # (file name, line) -> reason: records known not to run on PostgreSQL 15 either
        self.skip_records = skip_records or {}
        self.cleanup = cleanup
        self.schema = schema
        self.classify_unsupported = classify_unsupported
        self.init_sql = list(init_sql)
        self._watchdog = _Watchdog()

    # -- connections

    def _connect(self) -> psycopg.Connection:
        conn = psycopg.connect(autocommit=True, **self.conninfo)  # type: ignore[arg-type]
        init = list(self.init_sql)
        if self.schema is not None:
            init.append(f"SET search_path TO {_ident(self.schema)}")
        try:
            for sql in init:
                conn.execute(sql.encode())
        except psycopg.Error:
            conn.close()
            raise
        return conn

    def _reset_schema(self) -> None:
        """DROP SCHEMA ... CASCADE if it exists, then CREATE SCHEMA."""
        assert self.schema is not None
        q = _ident(self.schema)
        with psycopg.connect(autocommit=True, **self.conninfo) as conn:  # type: ignore[arg-type]
            conn.execute(f"DROP SCHEMA IF EXISTS {q} CASCADE".encode())
            conn.execute(f"CREATE SCHEMA {q}".encode())

    def _drop_schema(self) -> bool:
        """DROP SCHEMA ... CASCADE; False if it failed (the objects are dropped by name)."""
        assert self.schema is not None
        try:
            with psycopg.connect(autocommit=True, **self.conninfo) as conn:  # type: ignore[arg-type]
                out = self.execute(conn, f"DROP SCHEMA IF EXISTS {_ident(self.schema)} CASCADE")
        except psycopg.Error:
            return False
        return out.error is None

    def _conn(self, st: _FileState, name: str | None) -> psycopg.Connection:
        conn = st.conns.get(name)
        if conn is None or conn.closed:
            conn = st.conns[name] = self._connect()
        return conn

    def execute(self, conn: psycopg.Connection, sql: str) -> Outcome:
        """Run ``sql`` over the simple query protocol; values come back as raw text."""
        cur = conn.cursor()
        self._watchdog.arm(conn, self.timeout)
        try:
            cur.execute(sql.encode())  # bytes: sent verbatim, no placeholder processing
        except psycopg.Error as e:
            timed_out = self._watchdog.disarm()
            lost = conn.closed or conn.broken or timed_out
            if lost:
                conn.close()
            return Outcome(error=_db_error(e, timed_out, self.timeout, lost))
        self._watchdog.disarm()
        res = cur.pgresult
        if res is None or res.status != ExecStatus.TUPLES_OK:
            return Outcome(rowcount=max(cur.rowcount, 0))
        enc = conn.info.encoding
        nf = res.nfields
        rows: list[list[str | None]] = []
        for r in range(res.ntuples):
            row: list[str | None] = []
            for c in range(nf):
                v = res.get_value(r, c)
                row.append(None if v is None else bytes(v).decode(enc, "replace"))
            rows.append(row)
        return Outcome(rows, [res.ftype(c) for c in range(nf)], res.ntuples)

    # -- files

    def run_files(self, paths: Iterable[str | os.PathLike[str]]) -> RunResult:
        return RunResult([self.run_file(p) for p in paths])

    def run_file(self, path: str | os.PathLike[str]) -> FileResult:
        started = time.monotonic()
        path = str(path)
        fr = FileResult(path)
        try:
            records = parse_file(path)
        except (OSError, ParseError) as e:
            fr.error = f"cannot parse: {e}"
            fr.failed = 1
            fr.failures.append(Failure(path, 0, "file", "", fr.error))
            return fr
        classic = self.result_format == "classic" or (
            self.result_format == "auto" and path.endswith(".test")
        )
        st = _FileState(fr, classic, CLASSIC_HASH_THRESHOLD if classic else 0)
        try:
            if self.schema is not None:
                try:
                    self._reset_schema()
                except psycopg.Error as e:
                    fr.error = f"cannot create schema {self.schema}: {e}"
                    fr.failed += 1
                    fr.failures.append(Failure(path, 0, "file", "", fr.error))
                    return fr
            elif self.cleanup:
                self._drop_objects(_all_created(records))
            self._run_records(st, records)
        finally:
            for conn in st.conns.values():
                conn.close()
            if self.cleanup and not (self.schema is not None and self._drop_schema()):
                self._drop_objects(st.created)
            fr.seconds = round(time.monotonic() - started, 3)
        return fr

    def _run_records(self, st: _FileState, records: list[Record]) -> None:
        fr = st.result
        for idx, rec in enumerate(records):
            is_test = isinstance(rec, Statement | Query) or (
                isinstance(rec, Directive) and not rec.supported
            )
            reason = self._skip_reason(rec)
            if reason is not None:
                if is_test:
                    fr.skipped += 1
                    fr.skips.append(Skip(rec.source, rec.line, reason))
                    fr.outcomes.append(RecordOutcome(rec.source, rec.line, "skip", reason))
                continue
            if isinstance(rec, Directive):
                if self._directive(st, rec):
                    st.halted_at = rec.line
                    for later in records[idx + 1 :]:
                        if isinstance(later, Statement | Query):
                            why = f"after halt (line {rec.line})"
                            fr.skipped += 1
                            fr.skips.append(Skip(later.source, later.line, why))
                            fr.outcomes.append(RecordOutcome(later.source, later.line, "skip", why))
                    return
                continue
            assert isinstance(rec, Statement | Query)
            try:
                conn = self._conn(st, rec.connection)
            except psycopg.Error as e:
                remaining = [r for r in records[idx:] if isinstance(r, Statement | Query)]
                fr.error = f"cannot connect: {e}"
                fr.failed += len(remaining)
                fr.outcomes.extend(
                    RecordOutcome(r.source, r.line, "fail", fr.error) for r in remaining
                )
                fr.failures.append(
                    Failure(
                        rec.source,
                        rec.line,
                        "file",
                        rec.sql,
                        f"{len(remaining)} records not run: {fr.error}",
                    )
                )
                return
            out = self.execute(conn, rec.sql)
            if out.error is None:
                st.created.extend(created_objects(rec.sql))
            failure = (
                _check_statement(rec, out)
                if isinstance(rec, Statement)
                else _check_query(st, rec, out)
            )
            if failure is None:
                fr.passed += 1
                fr.outcomes.append(RecordOutcome(rec.source, rec.line, "pass"))
                if self.classify_unsupported:
                    self._forget_missing(st, rec.sql)
                continue
            if out.error is not None and out.error.sqlstate == "25P02":
                failure.message += " (the transaction failed earlier)"
            verdict = RecordOutcome(rec.source, rec.line, "fail", _fail_reason(failure))
            if self.classify_unsupported:
                verdict = self._classify(st, rec, out, verdict)
            fr.outcomes.append(verdict)
            if verdict.status == "unsupported":
                fr.unsupported += 1
            else:
                fr.failed += 1
                fr.failures.append(failure)

    # -- classification (classify_unsupported)

    def _classify(
        self, st: _FileState, rec: Statement | Query, out: Outcome, verdict: RecordOutcome
    ) -> RecordOutcome:
        """``unsupported`` for 0A000; an earlier failure's status for what it caused; and
        remember what this failing record did not create."""
        err = out.error
        root: RecordOutcome | None = None
        if err is not None:
            root = self._blocked_by(st, rec, err)
            if root is None and err.sqlstate == "25P02":  # in a transaction that failed
                root = st.last_failure.get(rec.connection)
            if root is not None:
                verdict = RecordOutcome(
                    rec.source, rec.line, root.status, f"after line {root.line}: {root.reason}"
                )
            elif err.sqlstate == "0A000":
                verdict = RecordOutcome(
                    rec.source, rec.line, "unsupported", f"unsupported: {_primary(err)}"
                )
        # What a record did not create is missing for later ones; chains keep the root.
        cause = root or verdict
        if err is not None:
            st.last_failure[rec.connection] = cause
        if rec.error is None:
            for _, name in created_objects(rec.sql):
                st.missing[_bare(name)] = cause
            for name in _INDEX_RE.findall(rec.sql):
                st.missing[name.lower()] = cause
            m = _ALTER_ADD_RE.match(rec.sql)
            if m:
                st.missing_columns[m.group(2).lower()] = cause
                st.failed_alters[_bare(m.group(1))] = cause
        return verdict

    @staticmethod
    def _blocked_by(st: _FileState, rec: Statement | Query, err: DbError) -> RecordOutcome | None:
        names = [n.lower() for n in _QUOTED_RE.findall(err.message.split("\n")[0])]
        if err.sqlstate in ("42P01", "42704"):
            for n in names:
                if n.split(".")[-1] in st.missing:
                    return st.missing[n.split(".")[-1]]
        if err.sqlstate == "42703":
            for n in names:
                if n in st.missing_columns:
                    return st.missing_columns[n]
        if err.sqlstate == "42601" and "INSERT has more expressions" in err.message:
            m = _INSERT_RE.match(rec.sql)
            if m and _bare(m.group(1)) in st.failed_alters:
                return st.failed_alters[_bare(m.group(1))]
        return None

    @staticmethod
    def _forget_missing(st: _FileState, sql: str) -> None:
        for _, name in created_objects(sql):
            st.missing.pop(_bare(name), None)
        for name in _INDEX_RE.findall(sql):
            st.missing.pop(name.lower(), None)
        m = _ALTER_ADD_RE.match(sql)
        if m:
            st.missing_columns.pop(m.group(2).lower(), None)

    def _skip_reason(self, rec: Record) -> str | None:
        for c in rec.conditions:
            if c.kind == "onlyif" and c.label not in self.labels:
                return f"onlyif {c.label}"
            if c.kind == "skipif" and c.label in self.labels:
                return f"skipif {c.label}"
        if isinstance(rec, Directive) and not rec.supported:
            return f"unsupported directive: {' '.join([rec.name, *rec.args][:2])}"
        why_record = self.skip_records.get((os.path.basename(rec.source), rec.line))
        if why_record is not None:
            return why_record
        if isinstance(rec, Statement | Query):
            for rx, why in self.skip_sql:
                if rx.fullmatch(rec.sql):
                    return why
            m = _RW_SET_RE.fullmatch(rec.sql)
            if m:
                name = m.group(1).lower()
                return f"risingwave-only: SET {name.upper()} ({RW_SETTINGS[name]})"
        return None

    def _directive(self, st: _FileState, d: Directive) -> bool:
        """Apply a supported directive; True means halt."""
        if d.name == "halt":
            return True
        if d.name == "hash-threshold" and d.args and d.args[0].isdigit():
            st.hash_threshold = int(d.args[0])
        elif d.name == "control" and d.args[0] == "sortmode":
            st.sort_mode = d.args[1]
        elif d.name == "sleep" and d.args:
            time.sleep(_duration(d.args[0]))
        return False

    def _drop_objects(self, objects: list[tuple[str, str]]) -> None:
        if not objects:
            return
        seen: set[tuple[str, str]] = set()
        todo = []
        for kind, name in reversed(objects):  # dependents were created after what they use
            key = (kind, name if name.startswith('"') else name.lower())
            if key not in seen:
                seen.add(key)
                todo.append((kind, name))
        try:
            conn = self._connect()
        except psycopg.Error:
            return
        with conn:
            retry = []
            for kind, name in todo:
                out = self.execute(conn, f"DROP {kind} IF EXISTS {name}")
                if out.error is not None:
                    if out.error.connection_lost:
                        return
                    retry.append((kind, name))
            for kind, name in retry:  # e.g. a view we did not track depends on it
                self.execute(conn, f"DROP {kind} IF EXISTS {name} CASCADE")


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _bare(name: str) -> str:
    """A relation name as the server reports it: last part, unquoted, folded if unquoted."""
    last = re.split(r"\s*\.\s*", name)[-1]
    return last[1:-1] if last.startswith('"') else last.lower()


def _primary(err: DbError) -> str:
    return err.message.split("\n")[0].removeprefix("db error: ").removeprefix("ERROR: ")


def _fail_reason(f: Failure) -> str:
    actual = f.actual.split("\n")[0]
    if f.message in ("query result mismatch", "statement is expected to fail, but succeeded"):
        return f.message
    return f"{f.message}: {actual}" if actual else f.message


def _duration(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|m)?", text)
    if not m:
        return 0.0
    n = float(m.group(1))
    return n / 1000 if m.group(2) == "ms" else n * 60 if m.group(2) == "m" else n


def _all_created(records: list[Record]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for r in records:
        if isinstance(r, Statement | Query):
            out.extend(created_objects(r.sql))
    return out


def _db_error(e: psycopg.Error, timed_out: bool, timeout: float, lost: bool) -> DbError:
    diag = e.diag
    if e.sqlstate and diag.message_primary:
        msg = f"db error: {diag.severity or 'ERROR'}: {diag.message_primary}"
        if diag.message_detail:
            msg += f"\nDETAIL: {diag.message_detail}"
        if diag.message_hint:
            msg += f"\nHINT: {diag.message_hint}"
    else:
        msg = str(e).strip() or type(e).__name__
    if timed_out:
        msg = f"timed out after {timeout:g}s: {msg}"
    return DbError(msg, e.sqlstate, lost)


def _error_matches(exp: ErrorExpect, err: DbError) -> bool:
    if exp.multiline is not None:
        return exp.multiline.strip() == err.message.strip()
    if not exp.regex:
        return True
    m = re.fullmatch(r"\(([0-9A-Z]{5})\)", exp.regex)
    if m and err.sqlstate == m.group(1):
        return True
    try:
        return re.search(exp.regex, err.message) is not None
    except re.error:
        return exp.regex in err.message


def _check_error(rec: Statement | Query, kind: str, out: Outcome) -> Failure | None:
    assert rec.error is not None
    if out.error is None:
        return Failure(
            rec.source,
            rec.line,
            kind,
            rec.sql,
            f"{kind} is expected to fail, but succeeded",
            rec.error.describe(),
            "(success)",
        )
    if not _error_matches(rec.error, out.error):
        return Failure(
            rec.source,
            rec.line,
            kind,
            rec.sql,
            f"{kind} failed with another error",
            rec.error.describe(),
            out.error.describe(),
        )
    return None


def _check_statement(rec: Statement, out: Outcome) -> Failure | None:
    if rec.error is not None:
        return _check_error(rec, "statement", out)
    if out.error is not None:
        return Failure(
            rec.source,
            rec.line,
            "statement",
            rec.sql,
            "statement failed",
            "ok",
            out.error.describe(),
        )
    if rec.count is not None and out.rowcount != rec.count:
        return Failure(
            rec.source,
            rec.line,
            "statement",
            rec.sql,
            "wrong affected-row count",
            f"count {rec.count}",
            f"count {out.rowcount}",
        )
    return None


def _check_query(st: _FileState, rec: Query, out: Outcome) -> Failure | None:
    if rec.error is not None:
        return _check_error(rec, "query", out)
    if out.error is not None:
        return Failure(
            rec.source,
            rec.line,
            "query",
            rec.sql,
            "query failed",
            _trim(rec.expected),
            out.error.describe(),
        )
    raw = out.rows or []
    if st.classic and out.rows is not None and rec.types and len(out.type_oids) != len(rec.types):
        return Failure(
            rec.source,
            rec.line,
            "query",
            rec.sql,
            "wrong number of result columns",
            f"{len(rec.types)} columns ({rec.types})",
            f"{len(out.type_oids)} columns",
        )
    if st.classic:
        types, oids = rec.types, out.type_oids
        rows = [
            [
                format_classic(v, types[c] if c < len(types) else "T", oids[c])
                for c, v in enumerate(r)
            ]
            for r in raw
        ]
    else:
        rows = [[format_raw(v) for v in r] for r in raw]
    mode = rec.sort_mode or st.sort_mode
    if mode == "rowsort":
        rows.sort()
    elif mode == "valuesort":
        rows = [[v] for v in sorted(v for r in rows for v in r)]
    values = [v for r in rows for v in r]
    digest = hash_values(values)
    hash_line = f"{len(values)} values hashing to {digest}"

    if rec.label:
        prior = st.labels.setdefault(rec.label, digest)
        if prior != digest:
            return Failure(
                rec.source,
                rec.line,
                "query",
                rec.sql,
                f"labeled result [{rec.label}] does not agree with previous values",
                f"hash {prior}",
                f"hash {digest}",
            )
    expected = rec.expected
    if len(expected) == 1 and _HASH_RE.fullmatch(expected[0].strip()):
        if _norm(expected[0]) == hash_line:
            return None
        shown = hash_line
        if len(values) <= MAX_SHOWN_LINES:
            shown += "\n" + "\n".join(values)
        return Failure(
            rec.source,
            rec.line,
            "query",
            rec.sql,
            "query result mismatch",
            expected[0].strip(),
            shown,
        )
    exp = [_norm(x) for x in expected]
    rowwise = [" ".join(_norm(v) for v in r) for r in rows]
    if rowwise == exp:
        return None
    valuewise = [_norm(v) for v in values]
    if valuewise == exp:
        return None
    # Show the actual values in the layout the file uses (one value a line, or rows).
    ncols = len(rows[0]) if rows else 0
    actual = valuewise if ncols > 1 and len(exp) != len(rowwise) else rowwise
    if st.hash_threshold and len(values) > st.hash_threshold:
        actual = [hash_line, *actual]
    return Failure(
        rec.source,
        rec.line,
        "query",
        rec.sql,
        "query result mismatch",
        _trim(expected),
        _trim(actual),
    )


# ---------------------------------------------------------------- CLI


def _rel(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def format_report(result: RunResult, show_failures: int = 5, show_skips: bool = True) -> str:
    """Per-file summary table, then skip reasons and the first failures of each file."""
    names = [_rel(f.path) for f in result.files]
    w = max([len(n) for n in names] + [4])
    unsup = result.unsupported > 0
    u_head = f"  {'unsupp.':>7}" if unsup else ""
    out = [f"{'file':<{w}}  {'passed':>7}  {'failed':>7}  {'skipped':>7}{u_head}  {'time':>8}"]
    for n, f in zip(names, result.files, strict=True):
        flag = "  ERROR: " + f.error if f.error else ""
        u = f"  {f.unsupported:>7}" if unsup else ""
        out.append(
            f"{n:<{w}}  {f.passed:>7}  {f.failed:>7}  {f.skipped:>7}{u}  {f.seconds:>7.1f}s{flag}"
        )
    total_s = sum(f.seconds for f in result.files)
    r = result
    u = f"  {r.unsupported:>7}" if unsup else ""
    out.append(f"{'TOTAL':<{w}}  {r.passed:>7}  {r.failed:>7}  {r.skipped:>7}{u}  {total_s:>7.1f}s")
    for n, f in zip(names, result.files, strict=True):
        if show_skips and f.skips:
            reasons = ", ".join(f"{r}: {c}" for r, c in sorted(f.skip_reasons.items()))
            out.append(f"\n{n}: skipped {f.skipped} ({reasons})")
        if f.unsupported:
            why = Counter(o.reason for o in f.outcomes if o.status == "unsupported")
            out.append(f"\n{n}: unsupported {f.unsupported}")
            out.extend(f"  {c:>3} x {r}" for r, c in why.most_common())
        for fail in f.failures[:show_failures]:
            out.append(f"\nFAIL {_rel(fail.source)}:{fail.line} [{fail.kind}] {fail.message}")
            out.append("  SQL: " + _trim(fail.sql.splitlines()).replace("\n", "\n       "))
            if fail.expected or fail.actual:
                out.append("  expected: " + fail.expected.replace("\n", "\n            "))
                out.append("  actual:   " + fail.actual.replace("\n", "\n            "))
        if 0 < show_failures < len(f.failures):
            out.append(f"\n... {len(f.failures) - show_failures} more failures in {n}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tests.sqllogictest.runner",
        description="Run sqllogictest files against a PostgreSQL-wire server.",
    )
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--host", default=os.environ.get("PGHOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("PGPORT", "6544")))
    p.add_argument("--user", default=os.environ.get("PGUSER", "headwater"))
    p.add_argument("--dbname", default=os.environ.get("PGDATABASE"), help="default: the user name")
    p.add_argument("--password", default=os.environ.get("PGPASSWORD"))
    p.add_argument(
        "--label",
        action="append",
        default=[],
        help=f"extra onlyif/skipif label (always: {ENGINE_LABEL})",
    )
    p.add_argument(
        "--format",
        dest="result_format",
        choices=["auto", "classic", "raw"],
        default="auto",
        help="value format; auto: classic for .test, raw otherwise",
    )
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per record")
    p.add_argument(
        "--skip-sql",
        action="append",
        default=[],
        metavar="REGEX",
        help="skip records whose SQL fully matches REGEX (case-insensitive)",
    )
    p.add_argument(
        "--no-cleanup", action="store_true", help="keep the tables/views the files create"
    )
    p.add_argument(
        "--schema", help="run each file in this schema (dropped and created around each file)"
    )
    p.add_argument(
        "--classify-unsupported",
        action="store_true",
        help="count 0A000 refusals (and what they cause) as unsupported, not failed",
    )
    p.add_argument("--show-failures", type=int, default=5, help="failures shown per file")
    p.add_argument("--json", metavar="PATH", help="also write the structured result here")
    a = p.parse_args(argv)
    runner = Runner(
        a.host,
        a.port,
        a.user,
        a.dbname,
        a.password,
        labels=[ENGINE_LABEL, *a.label],
        result_format=a.result_format,
        timeout=a.timeout,
        skip_sql=[(rx, f"skip-sql: {rx}") for rx in a.skip_sql],
        cleanup=not a.no_cleanup,
        schema=a.schema,
        classify_unsupported=a.classify_unsupported,
    )
    result = runner.run_files(a.files)
    print(format_report(result, a.show_failures))
    if a.json:
        Path(a.json).write_text(json.dumps(result.to_json(), indent=1))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
