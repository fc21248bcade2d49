"""Result sets encoded a column at a time (catalog/pgtypes/arrow_out.py, server/results.py
`data_rows`, server/pgwire/messages.py `data_rows`): the same bytes as the per-value
encoders, and as PostgreSQL 15 sends, in text and binary format, for results large
enough to take that path (more than reads.TUPLES_UPTO rows)."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from decimal import Decimal
from typing import Any

import asyncpg
import psycopg
import pyarrow as pa
import pytest
from headwater.catalog.pgtypes import binary_encoder, text_encoder
from headwater.catalog.pgtypes.arrow_out import column_encoder
from headwater.catalog.pgtypes.session import SessionFormat
from headwater.catalog.types import (
    BOOL,
    DATE,
    FLOAT8,
    INT2,
    INT4,
    INT8,
    NUMERIC,
    TEXT,
    TIMESTAMP,
    TIMESTAMPTZ,
    VARCHAR,
    ColumnType,
    numeric_typmod,
)
from headwater.server.pgwire.messages import data_row, data_rows
from headwater.server.reads import TUPLES_UPTO

ROWS = 3 * TUPLES_UPTO + 17
UTC = dt.UTC


def _numerics(scale: int, limit: int, rng: random.Random) -> list[Decimal | None]:
    ints = [0, 1, -1, 9999, 10000, -10001, limit - 1, -(limit - 1)]
    ints += [rng.randint(-limit + 1, limit - 1) for _ in range(200)]
    ints += [rng.randint(-999, 999) * 10 ** rng.randint(0, 9) for _ in range(100)]
    return [None, *(Decimal(i).scaleb(-scale) for i in ints if abs(i) < limit)]


def _cases() -> list[tuple[str, pa.Array, ColumnType]]:
    rng = random.Random(16)
    cases = [
        ("int2", pa.array([1, None, -32768, 32767], pa.int16()), ColumnType(INT2)),
        ("tinyint as int2", pa.array([-128, None, 127], pa.int8()), ColumnType(INT2)),
        ("int4", pa.array([0, None, -(2**31), 2**31 - 1], pa.int32()), ColumnType(INT4)),
        ("int8", pa.array([None, -(2**63), 2**63 - 1, 5], pa.int64()), ColumnType(INT8)),
        ("bool", pa.array([True, None, False], pa.bool_()), ColumnType(BOOL)),
        ("text", pa.array(["", None, "ü 日本", "a\tb"], pa.string()), ColumnType(TEXT)),
        ("varchar", pa.array(["x" * 300, None], pa.large_string()), ColumnType(VARCHAR)),
        (
            "float8",
            pa.array([1.5, None, -0.0, float("inf"), 1e300], pa.float64()),
            ColumnType(FLOAT8),
        ),
        (
            "date",
            pa.array([dt.date(1, 1, 1), None, dt.date(2024, 2, 29), dt.date(9999, 12, 31)]),
            ColumnType(DATE),
        ),
        (
            "timestamp",
            pa.array(
                [dt.datetime(1, 1, 1), None, dt.datetime(2024, 1, 2, 3, 4, 5, 6)],
                pa.timestamp("us"),
            ),
            ColumnType(TIMESTAMP),
        ),
        (
            "timestamptz",
            pa.array(
                [dt.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), None],
                pa.timestamp("us", tz="UTC"),
            ),
            ColumnType(TIMESTAMPTZ),
        ),
    ]
    for prec, scale in [(12, 2), (18, 0), (38, 2), (15, 6), (20, 9), (38, 12)]:
        values = _numerics(scale, 10 ** min(prec, 15), rng)
        ct = ColumnType(NUMERIC, numeric_typmod(prec, scale))
        cases.append((f"numeric({prec},{scale})", pa.array(values, pa.decimal128(prec, scale)), ct))
    return cases


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
def test_column_encoders_give_the_value_encoders_bytes(case: Any, binary: bool) -> None:
    """Where a column encoder exists, its bytes are the registry's, NULLs kept, also
    on a slice (an Arrow offset); where it declines (None), the server encodes per value."""
    _, arr, ct = case
    s = SessionFormat()
    enc = column_encoder(arr.type, ct, binary=binary, session=s)
    if enc is None:
        return
    each = (binary_encoder if binary else text_encoder)(ct, session=s)
    for part in (arr, arr.slice(1)):
        out = enc(part)
        if out is None:
            continue
        want = [None if v is None else each(v) for v in part.to_pylist()]
        assert out.to_pylist() == want


def test_column_encoders_decline_what_arrow_writes_otherwise() -> None:
    s = SessionFormat()
    # years outside 1-9999 and infinities: PostgreSQL's own spelling, per value
    far = pa.array([2_932_897], pa.int32()).view(pa.date32())  # 10000-01-01
    assert column_encoder(far.type, ColumnType(DATE), binary=False, session=s)(far) is None  # type: ignore[misc]
    inf = pa.array([2**63 - 1], pa.int64()).view(pa.timestamp("us"))
    assert column_encoder(inf.type, ColumnType(TIMESTAMP), binary=True, session=s)(inf) is None  # type: ignore[misc]
    # Arrow spells 1E-7 with an exponent: scales beyond 6 stay with numeric.py
    ct = ColumnType(NUMERIC, numeric_typmod(20, 7))
    assert column_encoder(pa.decimal128(20, 7), ct, binary=False, session=s) is None
    # unconstrained numerics are trimmed per value; floats keep PostgreSQL's shortest text
    assert (
        column_encoder(pa.decimal128(38, 16), ColumnType(NUMERIC), binary=False, session=s) is None
    )
    assert column_encoder(pa.float64(), ColumnType(FLOAT8), binary=False, session=s) is None
    # timestamptz in a zone other than UTC: the zone's rules, per value
    paris = SessionFormat(timezone="Europe/Paris")
    tstz = pa.timestamp("us", tz="UTC")
    assert column_encoder(tstz, ColumnType(TIMESTAMPTZ), binary=False, session=paris) is None
    # another DateStyle: per value
    german = SessionFormat(datestyle="German, DMY")
    assert column_encoder(pa.date32(), ColumnType(DATE), binary=False, session=german) is None
    big = pa.array([Decimal(10**16)], pa.decimal128(38, 0))
    ct = ColumnType(NUMERIC, numeric_typmod(38, 0))
    assert column_encoder(big.type, ct, binary=True, session=s)(big) is None  # type: ignore[misc]


def test_data_rows_gives_data_row_bytes() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n, k = rng.randint(0, 40), rng.randint(1, 5)
        cols = []
        for _ in range(k):
            values = [
                None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 6))
                for _ in range(n + 3)
            ]
            arr = pa.array(values, rng.choice([pa.binary(), pa.large_binary()]))
            cols.append(arr.slice(rng.randint(0, 3), n))
        want = b"".join(data_row([c[i].as_py() for c in cols]) for i in range(n))
        assert data_rows(cols, n) == want


# -- end to end, against PostgreSQL 15 --------------------------------------------------

COLUMNS = (
    "id int PRIMARY KEY, s smallint, b bigint, price numeric(12,2), q numeric(20,6),"
    " big numeric(30,0), u numeric, t text, v varchar(20), c char(3), f boolean, d date,"
    " ts timestamp, tz timestamptz, x double precision"
)


def _trimmed(rng: random.Random) -> Decimal:
    """An unconstrained numeric without trailing zeros (Headwater stores those at a
    fixed scale and prints them trimmed; PostgreSQL keeps the input's scale)."""
    frac = str(rng.randint(0, 99999)).rstrip("0")
    return Decimal(f"{rng.randint(-(10**6), 10**6)}{'.' + frac if frac else ''}")


def _rows() -> list[tuple[Any, ...]]:
    rng = random.Random(11)
    out: list[tuple[Any, ...]] = []
    for i in range(ROWS):

        def maybe(v: Any) -> Any:
            return None if rng.random() < 0.1 else v

        out.append(
            (
                i,
                maybe(rng.randint(-32768, 32767)),
                maybe(rng.randint(-(2**63), 2**63 - 1)),
                maybe(Decimal(rng.randint(-(10**11), 10**11)).scaleb(-2)),
                maybe(Decimal(rng.randint(-(10**19), 10**19)).scaleb(-6)),
                maybe(Decimal(rng.randint(-(10**29), 10**29))),
                maybe(_trimmed(rng)),
                maybe(rng.choice(["", "plain", "ü 日本", "tab\there", "quote ' and \\"]) + str(i)),
                maybe(f"v{i}"),
                maybe(rng.choice(["a", "ab", "abc"])),
                maybe(rng.random() < 0.5),
                maybe(dt.date(2000, 1, 1) + dt.timedelta(days=rng.randint(-700_000, 2_900_000))),
                maybe(
                    dt.datetime(2000, 1, 1)
                    + dt.timedelta(microseconds=rng.randint(-(10**16), 10**16))
                ),
                maybe(
                    dt.datetime(2024, 6, 1, tzinfo=UTC)
                    + dt.timedelta(seconds=rng.randint(-(10**9), 10**9))
                ),
                maybe(rng.choice([0.1, -2.5e-7, 1e300, 3.0]) * rng.randint(1, 9)),
            )
        )
    out.append((ROWS, *([None] * 14)))
    out.append((ROWS + 1, 0, 0, Decimal(0), Decimal(0), Decimal(0), Decimal(0), "", "", "", False,
                "infinity", "-infinity", "infinity", float("nan")))  # fmt: skip
    return out


def _load(c: psycopg.Connection, table: str) -> None:
    c.execute(f"DROP TABLE IF EXISTS {table}")
    c.execute(f"CREATE TABLE {table} ({COLUMNS})")
    with c.cursor().copy(f"COPY {table} FROM STDIN") as cp:
        for row in _rows():
            cp.write_row(row)


def _raw(c: psycopg.Connection, sql: str, binary: bool) -> list[list[bytes | None]]:
    cur = c.cursor(binary=binary)
    cur.execute(sql)
    res = cur.pgresult
    assert res is not None
    return [[res.get_value(r, f) for f in range(res.nfields)] for r in range(res.ntuples)]


@pytest.fixture(scope="module")
def loaded(hw_server, pg_oracle) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    with (
        psycopg.connect(hw_server.dsn, autocommit=True) as hw,
        psycopg.connect(pg_oracle.dsn, autocommit=True) as pg,
    ):
        for c in (hw, pg):
            _load(c, "encoded")
    return hw_server.dsn, pg_oracle.dsn


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM encoded ORDER BY id",
        "SELECT id, s, b, t, f FROM encoded ORDER BY id",  # plain types: tuples, then Arrow
        "SELECT id, price * 2 AS p2, d + 1 AS d1, t || $$!$$ AS t2 FROM encoded ORDER BY id",
    ],
    ids=["all", "plain", "computed"],
)
def test_large_results_are_postgresql_bytes(
    loaded: tuple[str, str], sql: str, binary: bool
) -> None:
    """Every cell's bytes, in text and binary format, as PostgreSQL 15 sends them."""
    hw_dsn, pg_dsn = loaded
    with (
        psycopg.connect(hw_dsn, autocommit=True) as hw,
        psycopg.connect(pg_dsn, autocommit=True) as pg,
    ):
        for zone in ("UTC", "America/New_York"):
            hw.execute(f"SET TimeZone = '{zone}'")
            pg.execute(f"SET TimeZone = '{zone}'")
            got, want = _raw(hw, sql, binary), _raw(pg, sql, binary)
            assert len(got) == len(want) == ROWS + 2
            for g, w in zip(got, want, strict=True):
                assert g == w, (zone, g[0], w[0])


def test_portals_and_cursors_page_a_large_result(loaded: tuple[str, str]) -> None:
    """asyncpg's cursor (Execute with a row limit: portal suspended) and psycopg's
    server-side cursor (DECLARE / FETCH) read the rows in pages, as PostgreSQL does."""
    hw_dsn, pg_dsn = loaded
    sql = f"SELECT id, price, d, t FROM encoded WHERE id < {ROWS} ORDER BY id"  # (no infinity)

    async def pages(dsn: str) -> list[list[tuple[Any, ...]]]:
        kv = dict(part.split("=", 1) for part in dsn.split())
        c = await asyncpg.connect(
            host=kv["host"], port=int(kv["port"]), user=kv["user"], database=kv["dbname"]
        )
        try:
            out = []
            async with c.transaction():
                cur = await c.cursor(sql)
                size = 10  # pages below and above results.COLUMNWISE_ROWS
                while rows := await cur.fetch(size):
                    out.append([tuple(r) for r in rows])
                    size = 110 - size
            out.append([tuple(r) for r in await c.fetch(sql)])
            return out
        finally:
            await c.close()

    assert asyncio.run(pages(hw_dsn)) == asyncio.run(pages(pg_dsn))

    def named(dsn: str) -> list[list[tuple[Any, ...]]]:
        with psycopg.connect(dsn) as c, c.cursor(name="paged") as cur:
            cur.execute(sql)
            out = []
            while rows := cur.fetchmany(300):
                out.append(rows)
            return out

    assert named(hw_dsn) == named(pg_dsn)
