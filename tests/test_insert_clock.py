"""now(), CURRENT_TIMESTAMP, LOCALTIMESTAMP and CURRENT_DATE in autocommitted INSERTs,
as values and as column defaults (server/batcher.py `_Clock`).

They take the batched fast path: an autocommitted INSERT is a transaction of its own,
so the clock is the time the statement is taken (before, every such INSERT ran its own
writing transaction: ~170 INSERTs per second against ~2,000 with 4 clients). The rows
must be PostgreSQL's: one instant per statement, a timestamp and a date are its wall
time in the session's TimeZone."""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest
from headwater.catalog.objects import Column, Table
from headwater.catalog.pgtypes import SessionFormat
from headwater.catalog.types import DATE, INT4, TEXT, TIMESTAMP, TIMESTAMPTZ, ColumnType
from headwater.server.batcher import fast_rows
from pglast import parse_sql

ZONE = "Asia/Kathmandu"  # +05:45: a wrong zone or offset shows in every column
COLUMNS = (
    "id int, a timestamptz, b timestamp, c date, d timestamp,"
    " da timestamptz DEFAULT now(), db timestamp DEFAULT CURRENT_TIMESTAMP,"
    " dc date DEFAULT CURRENT_DATE, dd timestamp DEFAULT LOCALTIMESTAMP"
)
STATEMENTS = [  # each fills a, b, c, d (and the defaults)
    "INSERT INTO {t} (id, a, b, c, d) VALUES ({i}, now(), now(), now(), now())",
    "INSERT INTO {t} (id, a, b, c, d) VALUES"
    " ({i}, CURRENT_TIMESTAMP, LOCALTIMESTAMP, CURRENT_DATE, pg_catalog.now())",
    # (not statement_timestamp(): PostgreSQL takes it from the Execute message and the
    # transaction's start from Bind, microseconds apart in the extended protocol)
    "INSERT INTO {t} (id, a, b, c, d) VALUES"
    " ({i}, transaction_timestamp(), now(), LOCALTIMESTAMP, CURRENT_TIMESTAMP),"
    " ({i} + 1, now(), now(), now(), now())",
]
# true for every row on PostgreSQL: one instant per statement, in the session's zone
CHECKS = (
    "b = a AT TIME ZONE current_setting('TimeZone')",
    "d = b",
    "c = b::date",
    "da = a",
    "db = b",
    "dc = c",
    "dd = b",
)


def _table(*cols: tuple[str, object, str | None]) -> Table:
    return Table(1, "public", "t", tuple(Column(n, ColumnType(t), False, d) for n, t, d in cols))


def test_clock_calls_take_the_fast_path() -> None:
    """The batcher takes the rows, with the session's wall time where the column wants
    one; a clock value it cannot assign in Python (text) leaves it to the general path."""
    table = _table(
        ("a", TIMESTAMPTZ, None),
        ("b", TIMESTAMP, None),
        ("c", DATE, None),
        ("n", INT4, None),
        ("da", TIMESTAMPTZ, "now()"),
        ("dc", DATE, "CURRENT_DATE"),
    )
    fmt = SessionFormat(timezone=ZONE)
    stmt = parse_sql("INSERT INTO t (a, b, c, n) VALUES (now(), CURRENT_TIMESTAMP, now(), $1)")
    before = dt.datetime.now(dt.timezone.utc)
    rows = fast_rows(stmt[0].stmt, table, [7], fmt)
    after = dt.datetime.now(dt.timezone.utc)
    assert rows is not None and len(rows) == 1
    a, b, c, n, da, dc = rows[0]
    assert before <= a <= after and da == a and n == 7
    assert b == a.astimezone(fmt.tzinfo).replace(tzinfo=None)
    assert c == dc == b.date()
    text = _table(("s", TEXT, None))
    assert fast_rows(parse_sql("INSERT INTO t VALUES (now())")[0].stmt, text, [], fmt) is None
    # a function of that name in another schema is not the clock
    other = parse_sql("INSERT INTO t (a) VALUES (myschema.now())")[0].stmt
    assert fast_rows(other, table, [], fmt) is None


def _rows(conn: psycopg.Connection, table: str) -> list[tuple]:
    checks = ", ".join(CHECKS)
    return conn.execute(f"SELECT id, {checks} FROM {table} ORDER BY id").fetchall()


@pytest.mark.parametrize("prepared", [False, True])
def test_clock_values_as_postgres(hw_server, pg_oracle, table_name: str, prepared: bool) -> None:  # type: ignore[no-untyped-def]
    """The same INSERTs on both servers, literal and prepared (psycopg prepares a
    statement it runs 5 times): every check holds on both, each statement's instant
    lies between the client's clock before and after it, and statements differ."""
    table = f"{table_name}_{int(prepared)}"
    with (
        psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as hw,
        psycopg.connect(pg_oracle.dsn, autocommit=True) as pg,
    ):
        for c in (hw, pg):
            c.execute(f"SET TimeZone = '{ZONE}'")
            c.execute(f"DROP TABLE IF EXISTS {table}")
            c.execute(f"CREATE TABLE {table} ({COLUMNS})")
        windows = {}
        for c, side in ((hw, "hw"), (pg, "pg")):
            i = 0
            for sql in STATEMENTS:
                for _ in range(6 if prepared else 1):
                    before = dt.datetime.now(dt.timezone.utc)
                    if prepared:
                        args = (i,) * sql.count("{i}")
                        c.execute(sql.format(t=table, i="%s"), args, prepare=True)
                    else:
                        c.execute(sql.format(t=table, i=i))
                    windows[side, i] = (before, dt.datetime.now(dt.timezone.utc))
                    i += 2
        got, want = _rows(hw, table), _rows(pg, table)
        assert got == want
        assert all(all(r[1:]) for r in got), got
        for c, side in ((hw, "hw"), (pg, "pg")):
            stamps = c.execute(f"SELECT DISTINCT id - id % 2, a FROM {table}").fetchall()
            assert len({a for _, a in stamps}) == len(stamps)  # one instant per statement
            slack = dt.timedelta(milliseconds=5)  # the two machines' clocks are one
            for i, a in stamps:
                lo, hi = windows[side, i]
                assert lo - slack <= a <= hi + slack, (side, i, a, lo, hi)
        for c in (hw, pg):
            c.execute(f"DROP TABLE {table}")
