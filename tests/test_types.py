"""Every supported type round-trips through parameters and results, text and binary."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import uuid
from decimal import Decimal

import asyncpg
import psycopg
import pytest

COLUMNS = [
    ("c_smallint", "smallint", -32768),
    ("c_int", "integer", 2147483647),
    ("c_bigint", "bigint", -9223372036854775808),
    ("c_numeric", "numeric(12,3)", Decimal("-123456789.125")),
    ("c_real", "real", 1.5),
    ("c_double", "double precision", 3.141592653589793),
    ("c_text", "text", "héllo\tworld"),
    ("c_varchar", "varchar(10)", "abc"),
    ("c_char", "char(4)", "ab"),
    ("c_bool", "boolean", True),
    ("c_date", "date", dt.date(2024, 2, 29)),
    ("c_ts", "timestamp", dt.datetime(2024, 2, 29, 12, 34, 56, 500000)),
    ("c_tstz", "timestamptz", dt.datetime(2024, 2, 29, 12, 34, 56, tzinfo=dt.UTC)),
    ("c_interval", "interval", dt.timedelta(days=3, hours=4, seconds=5)),
    ("c_bytea", "bytea", b"\x00\x01\xffabc"),
    ("c_jsonb", "jsonb", {"b": [1, 2], "a": "x"}),
    ("c_uuid", "uuid", uuid.UUID("12345678-1234-5678-1234-567812345678")),
]


def _ddl(t: str) -> str:
    return (
        f"CREATE TABLE {t} (id int PRIMARY KEY, "
        + ", ".join(f"{n} {ty}" for n, ty, _ in COLUMNS)
        + ")"
    )


def _expected(name: str, value: object) -> object:
    if name == "c_char":
        return "ab  "  # char(4) is blank-padded on output
    return value


def test_asyncpg_binary_roundtrip(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        conn = await asyncpg.connect(
            host=hw_server.host, port=hw_server.port, user="headwater", database="headwater"
        )
        await conn.set_type_codec(
            "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )
        await conn.execute(_ddl(table_name))
        cols = ", ".join(n for n, _, _ in COLUMNS)
        marks = ", ".join(f"${i + 2}" for i in range(len(COLUMNS)))
        await conn.execute(
            f"INSERT INTO {table_name} (id, {cols}) VALUES ($1, {marks})",
            1,
            *[v for _, _, v in COLUMNS],
        )
        await conn.execute(f"INSERT INTO {table_name} (id) VALUES ($1)", 2)
        row = await conn.fetchrow(f"SELECT {cols} FROM {table_name} WHERE id = $1", 1)
        for name, _, value in COLUMNS:
            assert row[name] == _expected(name, value), name
        nulls = await conn.fetchrow(f"SELECT {cols} FROM {table_name} WHERE id = $1", 2)
        assert all(v is None for v in nulls.values())
        # a parameter compared with each column finds the row again
        for name, _, value in COLUMNS:
            if name in ("c_jsonb", "c_real", "c_double"):
                continue
            n = await conn.fetchval(f"SELECT count(*) FROM {table_name} WHERE {name} = $1", value)
            assert n == 1, name
        await conn.close()

    asyncio.run(run())


@pytest.mark.parametrize("binary", [False, True])
def test_psycopg_roundtrip(hw_server, table_name: str, binary: bool) -> None:  # type: ignore[no-untyped-def]
    from psycopg.types.json import Jsonb

    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        conn.execute(_ddl(table_name))
        cols = ", ".join(n for n, _, _ in COLUMNS)
        values = [Jsonb(v) if n == "c_jsonb" else v for n, _, v in COLUMNS]
        marks = ", ".join("%b" if binary else "%t" for _ in COLUMNS)
        conn.execute(f"INSERT INTO {table_name} (id, {cols}) VALUES (1, {marks})", values)
        cur = conn.cursor(binary=binary)
        row = cur.execute(f"SELECT {cols} FROM {table_name}").fetchone()
        assert row is not None
        for (name, _, value), got in zip(COLUMNS, row, strict=True):
            assert got == _expected(name, value), name


def test_infinite_and_bc_values(conn, table_name: str) -> None:  # type: ignore[no-untyped-def]
    t = table_name
    conn.execute(f"CREATE TABLE {t} (d date, ts timestamp)")
    conn.execute(
        f"INSERT INTO {t} VALUES ('infinity', '-infinity'), ('0044-03-15 BC', '2024-01-01')"
    )
    cur = conn.cursor()
    cur.execute(f"SELECT d, ts FROM {t} ORDER BY ts")
    assert cur.pgresult is not None
    texts = [[cur.pgresult.get_value(r, c) for c in range(2)] for r in range(2)]
    assert texts == [[b"infinity", b"-infinity"], [b"0044-03-15 BC", b"2024-01-01 00:00:00"]]


def test_timestamptz_parameter_uses_session_timezone(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'Europe/Paris'")
        conn.execute(f"CREATE TABLE {table_name} (ts timestamptz)")
        conn.execute(
            f"INSERT INTO {table_name} VALUES (%s::text::timestamptz)", ("2024-07-01 12:00",)
        )
        conn.execute("SET TimeZone = 'UTC'")
        got = conn.execute(f"SELECT ts::text FROM {table_name}").fetchone()
        assert got == ("2024-07-01 10:00:00+00",)


def test_session_zone_after_a_writing_transaction(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """A read after DDL casts text to timestamptz in the session's TimeZone: the read's
    new DuckDB cursor could take the closed write cursor's id, and the zone remembered
    for that id (it read in UTC: 12:00+00 for 12:00+02)."""
    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'Europe/Paris'")
        conn.execute(f"CREATE TABLE {table_name} (ts timestamptz)")
        got = conn.execute(
            "SELECT '2024-07-01 12:00'::timestamptz::text,"
            " ('2024-07-01 12:00'::timestamptz AT TIME ZONE 'UTC')::text"
        ).fetchone()
        assert got == ("2024-07-01 12:00:00+02", "2024-07-01 10:00:00")


def test_timestamptz_bind_parameter_in_session_zone(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table_name} (ts timestamptz)")
        conn.execute("SET TimeZone = 'Europe/Paris'")
        # a text parameter without a zone, decoded by the server for a timestamptz column
        cur = conn.cursor()
        cur.execute(f"INSERT INTO {table_name} VALUES (%s)", ("2024-07-01 12:00",), prepare=False)
        conn.execute("SET TimeZone = 'UTC'")
        assert conn.execute(f"SELECT ts::text FROM {table_name}").fetchone() == (
            "2024-07-01 10:00:00+00",
        )


def test_interval_field_literals(conn) -> None:  # type: ignore[no-untyped-def]
    row = conn.execute(
        "SELECT (interval '90' day)::text, (date '2024-01-01' + interval '3' month)::text, "
        "(interval '1.5' hour)::text"
    ).fetchone()
    assert row == ("90 days", "2024-04-01 00:00:00", "01:30:00")
