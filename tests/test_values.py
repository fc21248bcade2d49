"""Value codecs (headwater.catalog.pgtypes) checked byte for byte against PostgreSQL 15.

For every literal in the tables below, PostgreSQL parses it and we fetch its output in
text and binary format. Then: our binary decoder reads PostgreSQL's binary bytes, our
binary encoder must give them back exactly, our text encoder must print PostgreSQL's
text, and our text decoder must parse the literal to the same value.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import struct
import uuid
import zoneinfo
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from headwater.catalog import pgtypes as V
from headwater.catalog import types as T
from headwater.catalog.pgtypes import days, floats
from headwater.catalog.types import ColumnType

from headwater.errors import SQLError

psycopg = pytest.importorskip("psycopg")
from psycopg import sql  # noqa: E402
from psycopg.adapt import Loader  # noqa: E402
from psycopg.pq import Format  # noqa: E402

C = ColumnType
NUM_10_2 = C(T.NUMERIC, T.numeric_typmod(10, 2))


# ---------------------------------------------------------------------------
# The PostgreSQL oracle.


class _RawText(Loader):
    def load(self, data: Any) -> bytes:
        return bytes(data)


class _RawBinary(Loader):
    format = Format.BINARY

    def load(self, data: Any) -> bytes:
        return bytes(data)


@pytest.fixture(scope="module")
def pg(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A psycopg connection to a throwaway PostgreSQL whose results arrive as raw bytes:
    the suite's shared `pg_oracle` cluster when conftest provides one, else our own."""
    own = None
    try:
        oracle = request.getfixturevalue("pg_oracle")  # skips if PostgreSQL is missing
    except pytest.FixtureLookupError:
        try:
            from tests.pg_oracle import ensure_postgres_installed, start_postgres
        except ImportError:
            pytest.skip("tests/pg_oracle.py is missing")
        try:
            ensure_postgres_installed()
        except RuntimeError as e:
            pytest.skip(f"PostgreSQL is not installed: {e}")
        oracle = own = start_postgres()
    conn = psycopg.connect(oracle.dsn, autocommit=True)
    for t in T.ALL_TYPES:
        conn.adapters.register_loader(t.oid, _RawText)
        conn.adapters.register_loader(t.oid, _RawBinary)
    try:
        yield conn
    finally:
        conn.close()
        if own is not None:
            own.stop()


def _set_session(conn: Any, s: V.SessionFormat) -> None:
    for name, value in (
        ("timezone", s.timezone),
        ("extra_float_digits", s.extra_float_digits),
        ("datestyle", s.datestyle),
        ("intervalstyle", s.intervalstyle),
        ("bytea_output", s.bytea_output),
    ):
        conn.execute(sql.SQL("SET {} = {}").format(sql.Identifier(name), sql.Literal(str(value))))


def _pg_rows(conn: Any, expr: str, literals: list[str]) -> list[tuple[bytes, bytes]]:
    """PostgreSQL's (text, binary) output of expr(x) for each literal x."""
    q = f"SELECT {expr.format('x')} FROM unnest(%s::text[]) WITH ORDINALITY AS u(x, n) ORDER BY n"
    text = [r[0] for r in conn.execute(q, [literals]).fetchall()]
    binary = [r[0] for r in conn.cursor(binary=True).execute(q, [literals]).fetchall()]
    return list(zip(text, binary, strict=True))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, Decimal) and isinstance(b, Decimal) and a.is_nan():
        return b.is_nan()
    return bool(a == b) and type(a) is type(b)


def _check(
    conn: Any,
    ct: ColumnType,
    expr: str,
    literals: list[str],
    session: V.SessionFormat = V.DEFAULT_SESSION,
    *,
    parse: bool = True,
) -> None:
    _set_session(conn, session)
    tenc = V.text_encoder(ct, session=session)
    benc = V.binary_encoder(ct, session=session)
    tdec = V.text_decoder(ct, session=session)
    bdec = V.binary_decoder(ct, session=session)
    failures = []
    for lit, (pg_text, pg_bin) in zip(literals, _pg_rows(conn, expr, literals), strict=True):
        try:
            v = bdec(pg_bin)
            got = (benc(v), tenc(v), tdec(lit) if parse else v)
        except Exception as e:  # report every literal, not just the first failure
            failures.append(f"{lit!r}: {type(e).__name__}: {e}")
            continue
        if got[0] != pg_bin:
            failures.append(f"{lit!r}: binary {got[0].hex()} != PostgreSQL {pg_bin.hex()}")
        if got[1] != pg_text:
            failures.append(f"{lit!r}: text {got[1]!r} != PostgreSQL {pg_text!r}")
        if not _same(got[2], v):
            failures.append(f"{lit!r}: parsed {got[2]!r} != PostgreSQL's {v!r}")
    assert not failures, f"{ct} {session}:\n" + "\n".join(failures)


# ---------------------------------------------------------------------------
# Literal tables.

_rng = random.Random(20240131)
_RANDOM_DOUBLES = [repr(_rng.uniform(-1, 1) * 10.0 ** _rng.randint(-30, 30)) for _ in range(150)]
_RANDOM_FLOATS = [
    repr(struct.unpack("f", struct.pack("f", float(x)))[0]) for x in _RANDOM_DOUBLES[:100]
]
_RANDOM_FLOATS += [repr(struct.unpack("f", _rng.randbytes(4))[0]) for _ in range(100)]
_RANDOM_FLOATS = [x for x in _RANDOM_FLOATS if "nan" not in x and "inf" not in x]

FLOAT_LITERALS = [
    "0",
    "-0",
    "1.1",
    "0.1",
    "1e100",
    "1e-5",
    "1.5e-5",
    "123456789012345.6",
    "1e15",
    "1e14",
    "12345678901234567",
    "3.141592653589793",
    "-2.5",
    "1.7976931348623157e308",
    "2.2250738585072014e-308",
    "NaN",
    "Infinity",
    "-Infinity",
    "inf",
    "-inf",
    "  12.5  ",
    ".5",
    "5.",
    "1E+3",
    "0.0001",
    "0.00001234",
    "100",
    "123456789",
    "1e22",
    "4.35",
    "1e6",
    "123456",
    "1234567",
    "100000",
    "0.3",
    "2e-7",
    "-1e-300",
    "9007199254740993",
]
FLOAT4_LITERALS = [
    x
    for x in FLOAT_LITERALS
    if x not in ("1e100", "1.7976931348623157e308", "2.2250738585072014e-308", "-1e-300")
]

CASES: list[tuple[str, ColumnType, str, list[str]]] = [
    (
        "bool",
        C(T.BOOL),
        "{}::bool",
        ["t", "true", "yes", "on", "1", "f", "FALSE", "no", "off", "0", " tRuE ", "y", "n", "of"],
    ),
    ("int2", C(T.INT2), "{}::int2", ["0", "1", "-1", "32767", "-32768", " 42 ", "+7", "007"]),
    ("int4", C(T.INT4), "{}::int4", ["0", "2147483647", "-2147483648", "\t12\n", "-0"]),
    ("int8", C(T.INT8), "{}::int8", ["9223372036854775807", "-9223372036854775808", "42"]),
    ("oid", C(T.OID), "{}::oid", ["0", "4294967295", "-1", "16384"]),
    (
        "float8",
        C(T.FLOAT8),
        "{}::float8",
        FLOAT_LITERALS + ["5e-324", "4.9e-324"] + _RANDOM_DOUBLES,
    ),
    (
        "float4",
        C(T.FLOAT4),
        "{}::float4",
        FLOAT4_LITERALS
        + ["3.4028235e38", "1e-45", "1.17549435e-38", "16777217", "0.2"]
        + _RANDOM_FLOATS,
    ),
    # Unconstrained numeric prints trimmed (Headwater stores it at scale 16).
    (
        "numeric",
        C(T.NUMERIC),
        "trim_scale({}::numeric)",
        [
            "0",
            "-0",
            "1.50",
            "-12345.678",
            "0.0001",
            "1e3",
            "1.5e-3",
            "NaN",
            "Infinity",
            "-Infinity",
            "123456789012345678901234567890.123456789",
            "0.000000001",
            "-0.00",
            "10000",
            "99999999",
            "1e20",
            "  7  ",
            "+3.25",
            ".5",
            "5.",
            "1E-20",
            "100.100",
            "-99990000.00009",
            "12345678.87654321",
        ],
    ),
    (
        "numeric(10,2)",
        NUM_10_2,
        "{}::numeric(10,2)",
        [
            "1.5",
            "-1.555",
            "1.005",
            "12345678.99",
            "0",
            "-0.001",
            "NaN",
            "99999999.994",
            "2.5",
            "-2.5",
            "0.125",
            "1e2",
        ],
    ),
    (
        "numeric(38,16)",
        C(T.NUMERIC, T.numeric_typmod(38, 16)),
        "{}::numeric(38,16)",
        ["1.5", "-0.0000000000000001", "1234567890123456789012.1234567890123456", "0"],
    ),
    (
        "numeric(5,0)",
        C(T.NUMERIC, T.numeric_typmod(5, 0)),
        "{}::numeric(5,0)",
        ["12345", "-0.5", "0.5", "1.49999"],
    ),
    (
        "text",
        C(T.TEXT),
        "{}::text",
        ["", "hello", "ünïcödé", "a\tb", "quote'", "back\\slash", "日本語", "🦆", " pad "],
    ),
    (
        "varchar(5)",
        C(T.VARCHAR, T.varchar_typmod(5)),
        "{}::varchar(5)",
        ["abc", "abcde", "abc   ", "ab  ", "żółwi"],
    ),
    (
        "char(5)",
        C(T.BPCHAR, T.varchar_typmod(5)),
        "{}::char(5)",
        ["a", "abcde", "", "ab  ", "abcde  ", "żó"],
    ),
    ("bpchar", C(T.BPCHAR), "{}::bpchar", ["a", "ab  ", ""]),
    ("name", C(T.NAME), "{}::name", ["abc", "x" * 70, "pg_catalog"]),
    ('"char"', C(T.CHAR), '{}::"char"', ["a", "b", "ab"]),
    (
        "bytea",
        C(T.BYTEA),
        "{}::bytea",
        [
            "\\x",
            "\\x0a0b",
            "\\xDEADBEEF",
            "abc",
            "a\\\\b",
            "\\001\\377",
            "\\x 01 02",
            "",
            "é",
            "tab\there",
        ],
    ),
    (
        "date",
        C(T.DATE),
        "{}::date",
        [
            "2024-01-31",
            "1999-01-08",
            "January 8, 1999",
            "1/8/1999",
            "08-Jan-1999",
            "19990108",
            "0044-03-15 BC",
            "0001-01-01",
            "9999-12-31",
            "10000-01-01",
            "infinity",
            "-infinity",
            "epoch",
            "2000-02-29",
            "4714-11-24 BC",
            "1999.01.08",
            "Jan-08-1999",
            "1999-Jan-08",
            "2024-01-31 BC",
            " 2024-01-31 ",
            "2024/01/31",
            "5874897-12-31",
            "Jan 8 1999",
            "1999 January 8",
            "Friday, January 8, 1999",
            "1/8/99",
            "2024-01-31 12:34:56",
            "8-23-00",
            "990108",
            "2024-01-31 +00",
            "0001-12-31 BC",
        ],
    ),
    (
        "time",
        C(T.TIME),
        "{}::time",
        [
            "00:00",
            "12:34:56",
            "12:34:56.5",
            "23:59:59.999999",
            "24:00:00",
            "04:05 PM",
            "12:00 AM",
            "12:00 PM",
            "12:00:00.0000005",
            "12:00:00.0000015",
            "allballs",
            "04:05:06 PST",
            "2003-04-12 04:05:06",
            "1:2:3",
            "04:05:06.789+05",
            "23:59:60",
            "172207",
            "165313+02",
            "1723",
            "172207.25",
        ],
    ),
    (
        "timestamp",
        C(T.TIMESTAMP),
        "{}::timestamp",
        [
            "2024-01-31 12:34:56.5",
            "2024-01-31T12:34:56",
            "2024-01-31",
            "2024-01-31 12:34:56+05",
            "0044-03-15 12:00 BC",
            "infinity",
            "-infinity",
            "epoch",
            "9999-12-31 23:59:59.999999",
            "10000-01-01 00:00",
            "294276-12-31 23:59:59.999999",
            "4714-11-24 00:00:00 BC",
            "1999-01-08 04:05:06.789",
            "January 8, 1999 04:05 PM",
            "2024-01-31 12:34:56.1234565",
            "2024-01-31 12:34:56.1234575",
            "2024-01-31T12:34:56Z",
            "2024-01-31 12:00 Europe/Paris",
            "0001-01-01 00:00:00",
            "0001-12-31 23:59:59 BC",
            "20240131 12:00",
            "2024-01-01 12:00 UTC+3",
            "Jan 11, 1543 141532",
            "2024-01-01 120000-08",
            "8.8.1762T3:43 PM+5",
            "2024-01-01 256000",
            "2024-01-31 23:59:60",
        ],
    ),
    (
        "interval",
        C(T.INTERVAL),
        "{}::interval",
        [
            "1 year 2 mons 3 days 04:05:06.5",
            "-1 days +02:00",
            "00:00:00",
            "0",
            "1 day",
            "-1 day",
            "1.5 years",
            "1.7 mons",
            "-1.5 hours",
            "P1Y2M3DT4H5M6.5S",
            "P1W",
            "PT0.5S",
            "1 2:03:04",
            "1-2",
            "3 days ago",
            "1:30.5",
            "@ 1 minute",
            "100:00:00",
            "-02:00:00",
            "1 day -02:00",
            "2 weeks",
            "1 decade",
            "1 century",
            "1 millennium",
            "1.5 days",
            "0.001 seconds",
            "1 ms",
            "1 us",
            "-1 year -2 mons +3 days -04:05:06",
            "1 mon -1 day",
            "P0001-02-03T04:05:06",
            "1 hour 30 minutes",
            "5",
            "-0.5 seconds",
            "3 mons 2.5 weeks",
            "178000000 years",
            "-178000000 years",
            "1 year -1 mon",
            "-1 year 1 mon",
            "2147483647 days",
            "2562047788:00:54.775807",
            "-2562047788:00:54.775807",
            "1.25 mons",
            "@ 1 day 2 hours ago",
            "P-1Y-2M",
            "PT36H",
            "10 secs",
            "1 hr 2 mins",
            "+1 day",
            "1 day 00:00:01",
            "0.5 mons",
            "-0.000001 s",
            "1 yr 1 mon 1 d",
            "1 week 1 day",
            "1 day 2",
            "1 day ago 2",
            "ago 1 hour",
            "1 day hour",
            "1 2 hours",
            "2 hours 30",
            "+75 sec 13-5 ago",
            "@ +14:5 -56 century 17-11 ago",
            "5 microsecondsxyz",
            "1 day!",
            "- 5 days",
            "P1Y2M3DT4H5M6S",
            "P1.5Y",
            "P00010203T040506",
            "PT1H30M",
        ],
    ),
    (
        "uuid",
        C(T.UUID),
        "{}::uuid",
        [
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11",
            "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}",
            "00000000-0000-0000-0000-000000000000",
        ],
    ),
    (
        "json",
        C(T.JSON),
        "{}::json",
        [
            '{"a":1}',
            "[1, 2 ,3]",
            ' "x" ',
            "null",
            '{"a": {"b": [true, false]}}',
            "1e5",
            '{"a":1,"a":2}',
            '"\\ud800"',
            '["\\udc00x"]',
        ],
    ),
    (
        "jsonb",
        C(T.JSONB),
        "{}::jsonb",
        [
            '{"b": [1,2], "a": 1}',
            '{"aa":1, "b":2, "a":3, "a":4}',
            "[1.0, 1e2, -0, -0.0, 1E-2, 12345678901234567890, 1.5e-7]",
            '"\\u00e9\\n\\t\\u001f\\u007f"',
            '"é"',
            "{}",
            "[]",
            "null",
            "true",
            "false",
            '{"key": {"nested": [1, {"z": null, "y": "s"}]}}',
            " 5 ",
            '"\\"quoted\\" \\\\"',
            '{"é": 1, "e": 2, "ee": 3, "f": 4}',
            "0.1",
            "-1.5e300",
            '"\\ud83d\\ude00"',
            "[[], {}, [{}]]",
            '{"a": "\\/"}',
            "1E+2",
            "-0.00",
            "1" + "0" * 5000,
            '"\\\\ud800"',
        ],
    ),
]


@pytest.mark.parametrize("name,ct,expr,literals", CASES, ids=[c[0] for c in CASES])
def test_matches_postgres(
    pg: Any, name: str, ct: ColumnType, expr: str, literals: list[str]
) -> None:
    _check(pg, ct, expr, literals)


def test_jsonb_normalization(pg: Any) -> None:
    literals = CASES[-1][3]
    for lit, (pg_text, _) in zip(literals, _pg_rows(pg, "{}::jsonb", literals), strict=True):
        assert V.normalize_jsonb(lit).encode() == pg_text, lit


TZ_LITERALS = [
    "2024-01-31 12:34:56.5+01",
    "2024-01-31 12:00 Z",
    "2024-01-31 12:00:00-08:00",
    "2024-01-31 12:00 America/New_York",
    "2024-07-01 12:00 Europe/Paris",
    "2024-01-31 12:34:56",
    "2024-07-01 12:00",
    "2018-11-04 01:30",
    "2018-03-11 02:30",
    "2024-03-31 02:30",
    "2024-10-27 02:30",
    "1850-01-01 00:00",
    "0044-03-15 12:00 BC",
    "infinity",
    "-infinity",
    "epoch",
    "2024-01-31 12:00 PST",
    "2024-01-31 12:00+0530",
    "1999-01-08 04:05:06 CET",
    "2024-01-31T12:34:56.123456Z",
    "2024-01-31 12:00 utc",
    "2024-01-31 12:00 europe/paris",
    "2024-01-31 23:30-05:30",
    "9999-12-31 23:00",
    "0001-01-01 00:30+00",
    "1900-01-01 12:00",
    "2024-01-31 12:00:00.5-03:30",
    "2024-01-31 12:00 EST",
    "January 8, 1999 04:05:06 PM +02",
]
SESSIONS = [
    V.SessionFormat(),
    V.SessionFormat(timezone="Europe/Paris"),
    V.SessionFormat(timezone="Asia/Kolkata"),
    V.SessionFormat(timezone="America/New_York"),
    V.SessionFormat(timezone="America/St_Johns"),
    V.SessionFormat(timezone="Australia/Lord_Howe"),
    V.SessionFormat(timezone="+5"),
    V.SessionFormat(timezone="UTC+3"),
    V.SessionFormat(timezone="europe/london"),
]


@pytest.mark.parametrize("session", SESSIONS, ids=[s.timezone for s in SESSIONS])
def test_timestamptz_in_session_zone(pg: Any, session: V.SessionFormat) -> None:
    _check(pg, C(T.TIMESTAMPTZ), "{}::timestamptz", TZ_LITERALS, session)
    # timestamp input ignores zones; date input in the session too
    _check(pg, C(T.TIMESTAMP), "{}::timestamp", TZ_LITERALS[:12], session)


@pytest.mark.parametrize("efd", [-15, -3, -1, 0, 2, 3])
def test_extra_float_digits(pg: Any, efd: int) -> None:
    session = V.SessionFormat(extra_float_digits=efd)
    _check(pg, C(T.FLOAT8), "{}::float8", FLOAT_LITERALS + _RANDOM_DOUBLES[:40], session)
    _check(pg, C(T.FLOAT4), "{}::float4", FLOAT4_LITERALS + _RANDOM_FLOATS[:40], session)


@pytest.mark.parametrize("style", ["iso_8601", "postgres_verbose", "sql_standard"])
def test_interval_styles(pg: Any, style: str) -> None:
    # Stored first, then read in the new style: sql_standard would parse input differently.
    literals = next(c[3] for c in CASES if c[0] == "interval")
    _set_session(pg, V.DEFAULT_SESSION)
    pg.execute("CREATE TEMP TABLE IF NOT EXISTS ivals (n int, v interval)")
    pg.execute("TRUNCATE ivals")
    pg.execute(
        "INSERT INTO ivals SELECT n, x::interval FROM unnest(%s::text[]) "
        "WITH ORDINALITY AS u(x, n)",
        [literals],
    )
    session = V.SessionFormat(intervalstyle=style)
    _set_session(pg, session)
    text = [r[0] for r in pg.execute("SELECT v FROM ivals ORDER BY n").fetchall()]
    binary = [r[0] for r in pg.cursor(binary=True).execute("SELECT v FROM ivals ORDER BY n")]
    bdec = V.binary_decoder(C(T.INTERVAL))
    tenc = V.text_encoder(C(T.INTERVAL), session=session)
    assert [tenc(bdec(b)) for b in binary] == text


def test_bytea_escape_output(pg: Any) -> None:
    lits = next(c[3] for c in CASES if c[0] == "bytea")
    _check(pg, C(T.BYTEA), "{}::bytea", lits, V.SessionFormat(bytea_output="escape"))


def test_datestyle_dmy_input(pg: Any) -> None:
    session = V.SessionFormat(datestyle="ISO, DMY")
    _check(
        pg, C(T.DATE), "{}::date", ["1/8/1999", "08/01/1999", "2024-01-31", "31.01.2024"], session
    )
    _check(pg, C(T.TIMESTAMP), "{}::timestamp", ["1/8/1999 12:00"], session)


# ---------------------------------------------------------------------------
# Python values as DuckDB hands them over, printed as PostgreSQL prints the same value.

PARIS = zoneinfo.ZoneInfo("Europe/Paris")
NATIVE: list[tuple[ColumnType, Any, str]] = [
    (
        C(T.TIMESTAMP),
        dt.datetime(2024, 1, 31, 12, 34, 56, 500000),
        "'2024-01-31 12:34:56.5'::timestamp",
    ),
    (C(T.TIMESTAMP), dt.datetime(44, 3, 15), "'0044-03-15'::timestamp"),
    (C(T.TIMESTAMP), V.TIMESTAMP_INFINITY, "'infinity'::timestamp"),
    (
        C(T.TIMESTAMP),
        days.days_from_civil(-43, 3, 15) * 86_400_000_000,
        "'0044-03-15 BC'::timestamp",
    ),
    (
        C(T.TIMESTAMPTZ),
        dt.datetime(2024, 1, 31, 11, 34, 56, 5, tzinfo=zoneinfo.ZoneInfo("Etc/UTC")),
        "'2024-01-31 11:34:56.000005+00'::timestamptz",
    ),
    (
        C(T.TIMESTAMPTZ),
        dt.datetime(2024, 7, 1, 12, 0, tzinfo=PARIS),
        "'2024-07-01 12:00 Europe/Paris'::timestamptz",
    ),
    (
        C(T.TIMESTAMPTZ),
        dt.datetime(2024, 7, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=-7))),
        "'2024-07-01 12:00-07'::timestamptz",
    ),
    (C(T.TIMESTAMPTZ), V.TIMESTAMP_NEG_INFINITY, "'-infinity'::timestamptz"),
    (C(T.TIMESTAMPTZ), 0, "'epoch'::timestamptz"),
    (C(T.DATE), dt.date(2024, 1, 31), "'2024-01-31'::date"),
    (C(T.DATE), dt.date(1, 1, 1), "'0001-01-01'::date"),
    (C(T.DATE), V.DATE_INFINITY, "'infinity'::date"),
    (C(T.DATE), V.DATE_NEG_INFINITY, "'-infinity'::date"),
    (C(T.DATE), -735160, "'0044-03-15 BC'::date"),
    (C(T.TIME), dt.time(12, 34, 56, 500000), "'12:34:56.5'::time"),
    (C(T.TIME), dt.time(0, 0), "'00:00'::time"),
    (C(T.TIME), 86_400_000_000, "'24:00'::time"),
    (
        C(T.INTERVAL),
        pa.scalar(pa.MonthDayNano([14, 3, 14706500000000])).as_py(),
        "'1 year 2 mons 3 days 04:05:06.5'::interval",
    ),
    (C(T.INTERVAL), pa.MonthDayNano([0, -1, 7_200_000_000_000]), "'-1 days +02:00'::interval"),
    (C(T.INTERVAL), pa.MonthDayNano([0, 0, -1500]), "'-0.000001 s'::interval"),
    (C(T.INTERVAL), V.Interval(0, 0, 0), "'0'::interval"),
    (C(T.INTERVAL), dt.timedelta(hours=-2), "'-2 hours'::interval"),
    (C(T.INTERVAL), dt.timedelta(days=-1, seconds=7200), "'-22 hours'::interval"),
    (C(T.INTERVAL), dt.timedelta(days=3, microseconds=5), "'3 days 0.000005 s'::interval"),
    (C(T.NUMERIC), Decimal("1.5000000000000000"), "1.5::numeric"),
    (C(T.NUMERIC), Decimal("0E-16"), "0::numeric"),
    (C(T.NUMERIC), Decimal("-0E-16"), "0::numeric"),
    (
        C(T.NUMERIC),
        Decimal("12345678901234567890123456789012345678"),
        "12345678901234567890123456789012345678::numeric",
    ),
    (C(T.NUMERIC), 10**30, "1e30::numeric"),
    (C(T.NUMERIC), 2.5, "2.5::numeric"),
    (NUM_10_2, Decimal("1.5"), "1.50::numeric(10,2)"),
    (NUM_10_2, Decimal("-0.00"), "0::numeric(10,2)"),
    (NUM_10_2, Decimal("NaN"), "'NaN'::numeric(10,2)"),
    (C(T.NUMERIC), Decimal("Infinity"), "'Infinity'::numeric"),
    (
        C(T.UUID),
        uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid",
    ),
    (
        C(T.UUID),
        "2e385ab5-8dda-42b5-9100-5fc11a7cf744",
        "'2e385ab5-8dda-42b5-9100-5fc11a7cf744'::uuid",
    ),
    (
        C(T.UUID),
        "2E385AB5-8DDA-42B5-9100-5FC11A7CF744",
        "'2e385ab5-8dda-42b5-9100-5fc11a7cf744'::uuid",
    ),
    (C(T.BYTEA), bytearray(b"\x00\xff"), "'\\x00ff'::bytea"),
    (C(T.BYTEA), memoryview(b"ab"), "'ab'::bytea"),
    (C(T.BOOL), True, "true"),
    (C(T.BOOL), False, "false"),
    (C(T.FLOAT4), 0.10000000149011612, "0.1::float4"),
    (C(T.FLOAT8), 1e16, "1e16::float8"),
    (C(T.FLOAT8), -0.0, "'-0'::float8"),
    (C(T.INT8), -(2**63), "(-9223372036854775808)::int8"),
    (C(T.BPCHAR, T.varchar_typmod(3)), "a", "'a'::char(3)"),
    (C(T.JSONB), '{"a": 1}', "'{\"a\":1}'::jsonb"),
    (C(T.JSONB), {"b": [1, 2.5], "a": None}, '\'{"b": [1, 2.5], "a": null}\'::jsonb'),
    (C(T.TEXT), "x", "'x'::text"),
]


@pytest.mark.parametrize(
    "session", [V.DEFAULT_SESSION, V.SessionFormat(timezone="Asia/Kolkata")], ids=["utc", "kolkata"]
)
def test_python_values(pg: Any, session: V.SessionFormat) -> None:
    _set_session(pg, session)
    exprs = ", ".join(e for _, _, e in NATIVE)
    text = pg.execute(f"SELECT {exprs}").fetchone()
    binary = pg.cursor(binary=True).execute(f"SELECT {exprs}").fetchone()
    failures = []
    for (ct, value, expr), t, b in zip(NATIVE, text, binary, strict=True):
        got_t = V.text_encoder(ct, session=session)(value)
        got_b = V.binary_encoder(ct, session=session)(value)
        if got_t != t:
            failures.append(f"{expr}: text {got_t!r} != {t!r}")
        if got_b != b:
            failures.append(f"{expr}: binary {got_b.hex()} != {b.hex()}")
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------------
# Errors: same SQLSTATE and message as PostgreSQL for the same input.

ERRORS: list[tuple[str, ColumnType, list[str]]] = [
    ("int4", C(T.INT4), ["abc", "99999999999", "", " ", "1.5", "1_000", "12a", "٣"]),
    ("int2", C(T.INT2), ["32768", "-32769"]),
    ("int8", C(T.INT8), ["9223372036854775808", "0x10"]),
    ("bool", C(T.BOOL), ["x", "tru e", "", "o", "2"]),
    ("float8", C(T.FLOAT8), ["abc", "1e400", "1e-400", "", "1.5.5", "infinityx", "1_0"]),
    ("float4", C(T.FLOAT4), ["1e40", "1e-50", "x", "-3.5e38"]),
    ("numeric", C(T.NUMERIC), ["abc", "1.2.3", "", "e5", "1e", "--1", "Infinityx"]),
    ("numeric(4,2)", C(T.NUMERIC, T.numeric_typmod(4, 2)), ["123.456", "Infinity", "99.995"]),
    ("numeric(2,2)", C(T.NUMERIC, T.numeric_typmod(2, 2)), ["1", "0.995"]),
    ("varchar(3)", C(T.VARCHAR, T.varchar_typmod(3)), ["abcd", "ab d"]),
    ("char(3)", C(T.BPCHAR, T.varchar_typmod(3)), ["abcd"]),
    ("bytea", C(T.BYTEA), ["\\xg0", "\\x0", "\\q", "\\x0g", "a\\", "\\400"]),
    (
        "uuid",
        C(T.UUID),
        [
            "x",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1",
            "urn:uuid:a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-",
            " a0eebc999c0b4ef8bb6d6bb9bd380a11",
        ],
    ),
    ("json", C(T.JSON), ['{"a":}', "{", "NaN", "[1,]", "'a'"]),
    ("jsonb", C(T.JSONB), ['"\\u0000"', '{"a":}', "", '{"\\ud83dx": 1}']),
    (
        "date",
        C(T.DATE),
        [
            "x",
            "2024-02-30",
            "0000-01-01",
            "13/01/2024",
            "5874898-01-01",
            "",
            "2024-01-32",
            "4714-11-23 BC",
            "2023-02-29",
        ],
    ),
    ("time", C(T.TIME), ["x", "25:00", "12:60", "24:00:01", "13:00 PM", "243900"]),
    (
        "timestamp",
        C(T.TIMESTAMP),
        [
            "x",
            "300000-01-01",
            "2024-13-01 00:00",
            "2024-01-01 12:00 x y",
            "3-19-35 220726-12:45",
            "Jan-13-885T16:31:41",
        ],
    ),
    ("timestamptz", C(T.TIMESTAMPTZ), ["x", "2024-01-01 12:00 Nowhere/Zone"]),
    (
        "interval",
        C(T.INTERVAL),
        [
            "x",
            "1 fortnight",
            "2147483648 days",
            "10000000000 hours",
            "",
            "ago",
            "day",
            "1 ago",
            "97 minutes +05:28",
            "+30 hours +.39 w",
            "-515130 millennium 82 usec",
            "1 qtr",
            "P1Y2",
            " P1Y",
        ],
    ),
    ("oid", C(T.OID), ["x", "4294967296"]),
]


@pytest.mark.parametrize("name,ct,literals", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_postgres(pg: Any, name: str, ct: ColumnType, literals: list[str]) -> None:
    _set_session(pg, V.DEFAULT_SESSION)
    dec = V.text_decoder(ct)
    table = sql.Identifier("err_" + "".join(c for c in name if c.isalnum()))
    pg.execute(sql.SQL("CREATE TEMP TABLE IF NOT EXISTS {} (v {})").format(table, sql.SQL(name)))
    failures = []
    for lit in literals:
        # INSERT, not a cast: assignment is what raises 22001 for varchar(n)
        try:
            pg.execute(sql.SQL("INSERT INTO {} VALUES ({})").format(table, sql.Literal(lit)))
            failures.append(f"{lit!r}: PostgreSQL accepts it")
            continue
        except psycopg.Error as e:
            want = (e.sqlstate, e.diag.message_primary)
        try:
            dec(lit)
            failures.append(f"{lit!r}: accepted, PostgreSQL says {want}")
        except SQLError as e:
            if (e.sqlstate, e.message) != want:
                failures.append(f"{lit!r}: {(e.sqlstate, e.message)} != {want}")
    assert not failures, "\n".join(failures)


def test_numeric_overflow_detail() -> None:
    with pytest.raises(SQLError) as info:
        V.text_decoder(C(T.NUMERIC, T.numeric_typmod(4, 2)))("123.456")
    assert info.value.sqlstate == "22003"
    assert info.value.detail == (
        "A field with precision 4, scale 2 must round to an absolute value less than 10^2."
    )


# ---------------------------------------------------------------------------
# Seeded random input strings: PostgreSQL and our decoders must agree on every one,
# value (compared through the binary send format) or error (SQLSTATE and message).

_TRY_IN = """
CREATE OR REPLACE FUNCTION pg_temp.try_in(t text, typ text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE format('SELECT encode(%s_send(%L::%s), ''hex'')', typ, t, typ) INTO r;
  RETURN 'ok:' || r;
EXCEPTION WHEN OTHERS THEN
  RETURN 'err:' || SQLSTATE || ':' || SQLERRM;
END $$"""


def _fuzz_strings(kind: str, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    months = ["Jan", "January", "feb", "MAR", "Sept", "dec"]

    def rdate() -> str:
        y, m, d = rng.randint(1, 2100), rng.randint(1, 12), rng.randint(1, 31)
        mon = rng.choice(months)
        return rng.choice(
            [
                f"{y:04d}-{m:02d}-{d:02d}",
                f"{m}/{d}/{y}",
                f"{y}{m:02d}{d:02d}",
                f"{d}-{mon}-{y}",
                f"{mon} {d}, {y}",
                f"{y:04d}-{m}-{d} BC",
                f"{y}/{m}/{d}",
                f"{d}.{m}.{y}",
                f"{m}-{d}-{y % 100:02d}",
                f"{mon}-{d}-{y}",
                f"{y % 100}/{m}/{d}",
            ]
        )

    def rtime() -> str:
        h, mi, sec = rng.randint(0, 24), rng.randint(0, 60), rng.randint(0, 60)
        frac = f".{rng.randint(0, 10 ** rng.randint(1, 9))}" if rng.random() < 0.4 else ""
        return rng.choice(
            [
                f"{h:02d}:{mi:02d}",
                f"{h}:{mi:02d}:{sec:02d}{frac}",
                f"{h % 13}:{mi:02d} {rng.choice(['AM', 'PM', 'am'])}",
                f"{h:02d}{mi:02d}{sec:02d}",
                f"{h:02d}:{mi:02d}:{sec:02d}{frac}",
                f"{h}:{mi}",
            ]
        )

    def rzone() -> str:
        return rng.choice(
            [
                "",
                "",
                "Z",
                "+01",
                "-08:00",
                "+0530",
                " UTC",
                " America/New_York",
                " Europe/Paris",
                " PST",
                " CEST",
                "+14",
                "-12:45",
                " EST5EDT",
                " Etc/GMT+5",
                "+5",
                " GMT",
                " UTC+3",
                "PM+5",
                " Nowhere/Zone",
            ]
        )

    def rnum() -> str:
        body = rng.choice(
            [
                str(rng.randint(0, 100)),
                str(rng.randint(0, 10**7)),
                f"{rng.randint(0, 50)}.{rng.randint(0, 10 ** rng.randint(1, 7))}",
                f".{rng.randint(1, 99)}",
                str(rng.randint(0, 10**12)),
            ]
        )
        return rng.choice(["", "", "-", "+", "- "]) + body

    units = [
        "year",
        "years",
        "mon",
        "mons",
        "month",
        "day",
        "days",
        "hour",
        "hours",
        "min",
        "minutes",
        "sec",
        "seconds",
        "s",
        "ms",
        "us",
        "week",
        "decade",
        "century",
        "millennium",
        "h",
        "m",
        "d",
        "y",
        "w",
        "yr",
        "hrs",
        "microseconds",
        "qtr",
        "x",
    ]

    def rinterval() -> str:
        parts = []
        for _ in range(rng.randint(1, 4)):
            k = rng.random()
            if k < 0.6:
                parts.append(f"{rnum()}{rng.choice([' ', ''])}{rng.choice(units)}")
            elif k < 0.85:
                parts.append(rng.choice(["", "-", "+"]) + rtime().split()[0])
            else:
                parts.append(f"{rng.choice(['', '-'])}{rng.randint(0, 20)}-{rng.randint(0, 13)}")
        text = rng.choice([" ", ", ", "  "]).join(parts)
        if rng.random() < 0.1:
            text = "@ " + text
        if rng.random() < 0.15:
            text += " ago"
        return text

    def riso() -> str:
        text = "P"
        for u in "YMWD":
            if rng.random() < 0.4:
                text += rnum().lstrip("+ ") + u
        if rng.random() < 0.6:
            text += "T"
            for u in "HMS":
                if rng.random() < 0.5:
                    text += rnum().lstrip("+ ") + u
        return rng.choice([text, text, "P0001-02-03T04:05:06", "P00010203T040506", "PT36H"])

    if kind == "interval":
        return [rinterval() if rng.random() < 0.8 else riso() for _ in range(n)]
    if kind == "time":
        return [rtime() + rng.choice(["", "", "+02", " PST"]) for _ in range(n)]
    if kind == "date":
        return [rdate() for _ in range(n)]
    out = []
    for _ in range(n):
        d = rdate()
        sep = " " if d.endswith("BC") else rng.choice([" ", "T"])
        out.append(d + sep + rtime() + rzone() if rng.random() < 0.85 else d)
    return out


@pytest.mark.parametrize(
    "typ,ct,tz",
    [
        ("interval", C(T.INTERVAL), "UTC"),
        ("date", C(T.DATE), "UTC"),
        ("time", C(T.TIME), "UTC"),
        ("timestamp", C(T.TIMESTAMP), "UTC"),
        ("timestamptz", C(T.TIMESTAMPTZ), "America/New_York"),
    ],
)
def test_fuzzed_input_matches_postgres(pg: Any, typ: str, ct: ColumnType, tz: str) -> None:
    session = V.SessionFormat(timezone=tz)
    _set_session(pg, session)
    pg.execute(_TRY_IN)
    strings = _fuzz_strings(typ, 600, seed=len(typ))
    results = [
        r[0]
        for r in pg.execute(
            "SELECT pg_temp.try_in(x, %s) FROM unnest(%s::text[]) WITH ORDINALITY AS u(x, n) "
            "ORDER BY n",
            [typ, strings],
        ).fetchall()
    ]
    dec = V.text_decoder(ct, session=session)
    enc = V.binary_encoder(ct, session=session)
    failures = []
    for text, want in zip(strings, results, strict=True):
        want = want.decode()
        try:
            got = "ok:" + enc(dec(text)).hex()
        except SQLError as e:
            got = f"err:{e.sqlstate}:{e.message}"
        if got != want:
            failures.append(f"{text!r}: ours {got} != PostgreSQL {want}")
    assert not failures, f"{len(failures)} of {len(strings)}:\n" + "\n".join(failures[:30])


# ---------------------------------------------------------------------------
# Pure unit checks (no PostgreSQL needed).


def test_numeric_input_keeps_scale() -> None:
    dec = V.text_decoder(C(T.NUMERIC))
    assert str(dec("1.50")) == "1.50"
    assert str(dec("1e3")) == "1000"
    assert str(dec("-0.00")) == "0.00"
    assert str(V.text_decoder(NUM_10_2)("1.005")) == "1.01"  # half away from zero


def test_char_n_is_stored_trimmed() -> None:
    ct = C(T.BPCHAR, T.varchar_typmod(4))
    assert V.text_decoder(ct)("ab  ") == "ab"
    assert V.text_encoder(ct)("ab") == b"ab  "
    assert V.binary_encoder(ct)("ab") == b"ab  "


def test_decoders_accept_bytes() -> None:
    assert V.text_decoder(C(T.INT4))(b" 42 ") == 42
    assert V.text_decoder(C(T.TEXT))(b"\xc3\xa9") == "é"
    with pytest.raises(SQLError) as info:
        V.text_decoder(C(T.TEXT))(b"\xff")
    assert info.value.sqlstate == "22021"


def test_binary_decoder_rejects_bad_lengths() -> None:
    for t in (T.INT4, T.INT8, T.FLOAT8, T.DATE, T.TIMESTAMP, T.UUID, T.INTERVAL, T.BOOL):
        with pytest.raises(SQLError) as info:
            V.binary_decoder(C(t))(b"\x00\x01\x02")
        assert info.value.sqlstate == "22P03"


def test_float4_without_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    # numpy only speeds float4 output up; the pure-Python search must print the same.
    rng = random.Random(9)
    values = [struct.unpack("f", rng.randbytes(4))[0] for _ in range(3000)]
    values = [v for v in values if math.isfinite(v)] + [92046784.0, 1e6, 0.1]
    values = [struct.unpack("f", struct.pack("f", v))[0] for v in values]
    with_numpy = [floats._float4_shortest(v) for v in values]
    monkeypatch.setattr(floats, "_np_shortest", None)
    assert [floats._float4_shortest(v) for v in values] == with_numpy


def test_resolve_timezone() -> None:
    assert V.resolve_timezone("europe/PARIS") == zoneinfo.ZoneInfo("Europe/Paris")
    assert V.resolve_timezone("+5").utcoffset(None) == dt.timedelta(hours=5)
    assert V.resolve_timezone("UTC+3").utcoffset(None) == dt.timedelta(hours=-3)
    with pytest.raises(SQLError) as info:
        V.resolve_timezone("Mars/Olympus")
    assert info.value.sqlstate == "22023"


def test_parse_literal_and_interval_forms() -> None:
    assert V.parse_literal(C(T.INTERVAL), "1 day 02:00") == V.Interval(0, 1, 7_200_000_000)
    assert V.parse_literal(C(T.INTERVAL), "P1Y2M") == V.Interval(14, 0, 0)
    assert V.parse_literal(C(T.DATE), "0044-03-15 BC") == -735160  # beyond datetime.date
    tz = V.parse_literal(
        C(T.TIMESTAMPTZ), "2024-01-31 12:00", session=V.SessionFormat(timezone="Europe/Paris")
    )
    assert tz == dt.datetime(2024, 1, 31, 11, 0, tzinfo=dt.UTC)


def test_numeric_division_scale(pg: Any) -> None:
    """numeric_div_scale is PostgreSQL's select_div_scale: the scale of a / b's text."""
    rng = random.Random(7)
    pairs = []
    for _ in range(400):
        a = Decimal(rng.randint(-(10 ** rng.randint(0, 12)), 10 ** rng.randint(0, 12)))
        b = Decimal(rng.randint(1, 10 ** rng.randint(0, 9)))
        pairs.append((a.scaleb(-rng.randint(0, 6)), b.scaleb(-rng.randint(0, 6))))
    _set_session(pg, V.DEFAULT_SESSION)
    rows = pg.execute(
        "SELECT (a / b)::text FROM unnest(%s::numeric[], %s::numeric[]) WITH ORDINALITY "
        "AS u(a, b, n) ORDER BY n",
        [[str(a) for a, _ in pairs], [str(b) for _, b in pairs]],
    ).fetchall()
    failures = []
    for (a, b), (text,) in zip(pairs, rows, strict=True):
        text = text.decode()
        want = len(text.partition(".")[2])
        got = V.numeric_div_scale(
            a, b, max(0, -a.as_tuple().exponent), max(0, -b.as_tuple().exponent)
        )
        if got != want:
            failures.append(f"{a} / {b}: scale {got}, PostgreSQL {text}")
    assert not failures, "\n".join(failures[:20])
