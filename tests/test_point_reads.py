"""Point reads served outside DuckDB (server/point_reads.py, storage/key_index.py): the
same bytes, RowDescription and epochs as the DuckDB path, next to PostgreSQL 15.

The DuckDB path is the same statement with `AND true` (not a point read's shape)."""

from __future__ import annotations

import asyncio
import threading
from decimal import Decimal
from typing import Any

import asyncpg
import psycopg
import pytest

from tests.oracle_scripts import in_schema

COLUMNS = (
    "k int PRIMARY KEY, a smallint, b bigint, c numeric(10,2), d numeric, e real, "
    "f double precision, g text, h varchar(5), i char(3), j boolean, l date, m timestamp, "
    "n timestamptz, o interval, p bytea, s uuid, t json, u jsonb, w time, "
    "x text UNIQUE"
)
ROWS = [
    "(1, 2, 3, 4.5, 6.7, 1.5, 2.5, 'héllo wörld ✓', 'ab', 'x', true, '2020-01-01', "
    "'2020-01-01 10:00:00.123456', '2020-01-01 10:00+02', '1 day 02:03:04', 'abc', "
    "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"a\": [1, 2]}', '{\"b\": 2, \"a\": null}', "
    "'10:00:01', 'key one')",
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(3, -32768, -9223372036854775808, -99999999.99, 123456789.123456789, 'NaN', "
    "'-Infinity', '', '', '', false, '1999-12-31', '1970-01-01 00:00:00', "
    "'2038-01-19 03:14:07+00', '-3 mons 2 days', '', '00000000-0000-0000-0000-000000000000', "
    "'[]', '[]', '23:59:59.999999', '日本語 🎉')",
    "(-2147483648, 32767, 9223372036854775807, 0.01, 0, 3.4e38, 1e-300, 'tab\there', "
    "'abcde', 'abc', true, '0001-01-01', '2000-02-29 23:59:59', '1900-06-01 12:00-05:30', "
    "'0 seconds', 'x', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '\"s\"', '\"s\"', "
    "'00:00:00', 'unique ''q''')",
]
KEYS = [1, 2, 3, -2147483648, 4, 0]


def _raw(conn: psycopg.Connection, sql: str, params: list[object], binary: bool) -> tuple:
    """(RowDescription fields, raw values) of a statement, with its parameters."""
    cur = conn.execute(sql, params, binary=binary)
    res = cur.pgresult
    assert res is not None
    desc = [
        (res.fname(i), res.ftype(i), res.fmod(i), res.fsize(i), res.fformat(i))
        for i in range(res.nfields)
    ]
    tables = [(res.ftable(i), res.ftablecol(i)) for i in range(res.nfields)]
    rows = [tuple(res.get_value(r, c) for c in range(res.nfields)) for r in range(res.ntuples)]
    return desc, tables, rows


def _setup(conn: psycopg.Connection, name: str) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    conn.execute(f"CREATE TABLE {name} ({COLUMNS})")
    for row in ROWS:
        conn.execute(f"INSERT INTO {name} VALUES {row}")


@pytest.mark.parametrize("binary", [False, True])
def test_same_bytes_as_duckdb_and_postgres(
    hw_server, pg_oracle, table_name: str, binary: bool
) -> None:  # type: ignore[no-untyped-def]
    name = f"{table_name}_pt"
    with (
        psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as hw,
        psycopg.connect(pg_oracle.dsn, autocommit=True) as pg,
    ):
        for c in (hw, pg):
            _setup(c, name)
            c.execute("SET TimeZone = 'Asia/Kolkata'")
            c.execute("SET extra_float_digits = 0")
        shapes = [
            (f"SELECT * FROM {name} WHERE k = %s", KEYS),
            (f"SELECT g, k, n, c FROM {name} WHERE k = %s", KEYS),
            (
                f"SELECT t.x AS renamed, t.u FROM {name} AS t WHERE t.x = %s",
                ["key one", "日本語 🎉", "unique 'q'", "none", ""],
            ),
            (f"SELECT o, p, s FROM {name} WHERE %s = k", KEYS),
        ]
        for sql, keys in shapes:
            for key in keys:
                for prepare in (False, True):  # unnamed statement; a prepared one (2nd run)
                    point = _raw(hw, sql, [key], binary)
                    hw.execute(sql, [key], prepare=prepare, binary=binary)
                    again = _raw(hw, sql, [key], binary)
                    duck = _raw(hw, sql + " AND true", [key], binary)
                    assert point == duck == again, (sql, key)
                if not binary:  # PostgreSQL's binary numeric/interval forms differ in detail
                    ref = _raw(pg, sql, [key], binary)
                    assert point[0] == ref[0], (sql, key)  # names, types, typmods, sizes
                    assert point[2] == ref[2], (sql, key)
        # simple protocol, constants inlined
        for key in KEYS:
            q = f"SELECT * FROM {name} WHERE k = {key}"
            got = repr(hw.execute(q, prepare=False).fetchall())  # (repr: NaN != NaN)
            assert got == repr(hw.execute(q + " AND true", prepare=False).fetchall())
            assert _raw(hw, q, [], False)[2] == _raw(pg, q, [], False)[2]
        # a NULL key and an integer out of the column's range match nothing
        for q in (
            f"SELECT k FROM {name} WHERE k = NULL",
            f"SELECT k FROM {name} WHERE k = 5000000000",
        ):
            assert hw.execute(q).fetchall() == pg.execute(q).fetchall() == []


def test_composite_and_unique_keys(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    name = f"{table_name}_ck"
    with (
        psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as hw,
        psycopg.connect(pg_oracle.dsn, autocommit=True) as pg,
    ):
        for c in (hw, pg):
            c.execute(f"DROP TABLE IF EXISTS {name}")
            c.execute(
                f"CREATE TABLE {name} (a bigint, b varchar(10), v numeric, w text, "
                "PRIMARY KEY (a, b), UNIQUE (w))"
            )
            c.execute(
                f"INSERT INTO {name} VALUES (1, 'x', 1.5, 'one'), (1, 'y', 2.5, 'two'), "
                "(2, 'x', NULL, NULL), (2, 'ü', 3, 'three')"
            )
        queries = [
            (
                f"SELECT v, w FROM {name} WHERE a = %s AND b = %s",
                [(1, "x"), (1, "y"), (2, "ü"), (3, "x"), (1, None)],
            ),
            (f"SELECT a, b FROM {name} WHERE b = %s AND a = %s", [("x", 2), ("y", 2)]),
            (f"SELECT * FROM {name} WHERE w = %s", [("one",), ("three",), ("none",), (None,)]),
        ]
        for sql, cases in queries:
            for args in cases:
                got = hw.execute(sql, args).fetchall()
                assert got == hw.execute(sql + " AND true", args).fetchall(), (sql, args)
                assert got == pg.execute(sql, args).fetchall(), (sql, args)
        # a key value of another type than the column's takes the general path
        assert hw.execute(f"SELECT w FROM {name} WHERE a = 1.0 AND b = 'x'").fetchall() == [
            ("one",)
        ]
        hw.execute(f"PREPARE {name}_p (int8, text) AS SELECT w FROM {name} WHERE a = $1 AND b = $2")
        assert hw.execute(f"EXECUTE {name}_p (2, 'ü')").fetchall() == [("three",)]


def test_reads_follow_writes_exactly(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """Every acknowledged write (single INSERTs through the batcher, UPDATE, DELETE,
    explicit blocks) is seen by the next point read of any session, never an older
    value, and a key read as missing is found once inserted."""
    name = f"{table_name}_rw"
    keys = 40

    async def run() -> None:
        kw = dict(
            host=hw_server.host,
            port=hw_server.port,
            user="headwater",
            database="headwater",
            ssl=False,
        )
        w = await asyncpg.connect(**kw)
        r = await asyncpg.connect(**kw)
        try:
            await w.execute(f"CREATE TABLE {name} (k int PRIMARY KEY, v bigint, t text)")
            read = await r.prepare(f"SELECT v, t FROM {name} WHERE k = $1")
            for k in range(keys):  # missing first: the index remembers "no row"
                assert await read.fetchrow(k) is None
            others = [await asyncpg.connect(**kw) for _ in range(4)]  # batched INSERTs
            sql = f"INSERT INTO {name} VALUES ($1, 0, 'v0')"
            await asyncio.gather(
                *(others[k % 4].execute(sql, k) for k in range(keys // 2) if k < 4)
            )
            for k in range(4, keys // 2, 4):
                await asyncio.gather(*(o.execute(sql, k + i) for i, o in enumerate(others)))
            for o in others:
                await o.close()
            for k in range(keys):
                row = await read.fetchrow(k)
                assert (tuple(row) if row else None) == ((0, "v0") if k < keys // 2 else None)
            expected = {k: 0 for k in range(keys // 2)}
            for n in range(1, 61):
                k = n % keys
                if n % 7 == 0 and k in expected:
                    await w.execute(f"DELETE FROM {name} WHERE k = $1", k)
                    del expected[k]
                elif k in expected and n % 3 == 0:
                    async with w.transaction():
                        await w.execute(f"UPDATE {name} SET v = v + 1000 WHERE k = $1", k)
                        await w.execute(
                            f"UPDATE {name} SET v = $2, t = $3 WHERE k = $1", k, n, f"v{n}"
                        )
                    expected[k] = n
                elif k in expected:
                    await w.execute(f"UPDATE {name} SET k = $2 WHERE k = $1", k, k + 1000)
                    await w.execute(
                        f"UPDATE {name} SET k = $1, v = $2, t = $3 WHERE k = $4",
                        k,
                        n,
                        f"v{n}",
                        k + 1000,
                    )
                    expected[k] = n
                else:
                    await w.execute(f"INSERT INTO {name} VALUES ($1, $2, $3)", k, n, f"v{n}")
                    expected[k] = n
                for j in (k, (k + 1) % keys):
                    row = await read.fetchrow(j)
                    want = (expected[j], f"v{expected[j]}") if j in expected else None
                    assert (tuple(row) if row else None) == want, (n, j)
        finally:
            await w.close()
            await r.close()

    asyncio.run(run())


def test_concurrent_writers_and_readers(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """Readers racing writers: each read returns a value some acknowledged write gave,
    never older than the last one acknowledged before the read began."""
    name = f"{table_name}_cc"
    with psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as c:
        c.execute(f"CREATE TABLE {name} (k int PRIMARY KEY, v int)")
        c.execute(f"INSERT INTO {name} SELECT g, 0 FROM generate_series(0, 9) g")
    acked = [0] * 10
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(slot: int) -> None:
        try:
            with psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as c:
                for n in range(1, 80):
                    c.execute(f"UPDATE {name} SET v = %s WHERE k = %s", (n, slot))
                    acked[slot] = n
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    def reader() -> None:
        try:
            with psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as c:
                seen = [0] * 10
                while not stop.is_set():
                    for k in range(10):
                        floor = acked[k]
                        (v,) = c.execute(f"SELECT v FROM {name} WHERE k = %s", (k,)).fetchone()
                        assert v >= floor and v >= seen[k], (k, v, floor, seen[k])
                        seen[k] = v
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    writers = [threading.Thread(target=writer, args=(i,)) for i in range(0, 10, 3)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors, errors


def test_ddl_temp_tables_and_writing_transactions(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    name = f"{table_name}_dd"
    with psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as c:
        c.execute(f"CREATE TABLE {name} (k int PRIMARY KEY, v int)")
        c.execute(f"INSERT INTO {name} VALUES (1, 10)")
        q = f"SELECT * FROM {name} WHERE k = %s"
        assert c.execute(q, [1]).fetchall() == [(1, 10)]
        c.execute(f"ALTER TABLE {name} ADD COLUMN w text DEFAULT 'new'")
        assert c.execute(q, [1]).fetchall() == [(1, 10, "new")]
        c.execute(f"ALTER TABLE {name} DROP COLUMN v")
        assert c.execute(q, [1]).fetchall() == [(1, "new")]
        c.execute(f"DROP TABLE {name}")
        c.execute(f"CREATE TABLE {name} (k int PRIMARY KEY, v int)")
        assert c.execute(q, [1]).fetchall() == []
        c.execute(f"INSERT INTO {name} VALUES (1, 20)")
        assert c.execute(q, [1]).fetchall() == [(1, 20)]
        with c.transaction():  # the transaction reads its own writes
            c.execute(f"UPDATE {name} SET v = 21 WHERE k = 1")
            assert c.execute(q, [1]).fetchall() == [(1, 21)]
            c.execute(f"DELETE FROM {name} WHERE k = 1")
            assert c.execute(q, [1]).fetchall() == []
        assert c.execute(q, [1]).fetchall() == []
        c.execute(f"TRUNCATE {name}")
        c.execute(f"CREATE TEMP TABLE {name}_tmp (k int PRIMARY KEY, v int)")
        tq = f"SELECT v FROM {name}_tmp WHERE k = %s"
        assert c.execute(tq, [1]).fetchall() == []
        c.execute(f"INSERT INTO {name}_tmp VALUES (1, 5)")
        assert c.execute(tq, [1]).fetchall() == [(5,)]
        c.execute(f"UPDATE {name}_tmp SET v = 6")
        assert c.execute(tq, [1]).fetchall() == [(6,)]


def test_a_table_read_at_once_serves_as_duckdb(hw_server, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """After BULK_AFTER misses the table's rows are read at once (storage/key_index.py
    `fill_all`): every read from them, and after writes, is the DuckDB path's bytes."""
    from headwater.storage.key_index import BULK_AFTER

    name = f"{table_name}_bulk"
    with psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as hw:
        _setup(hw, name)
        hw.execute(
            f"INSERT INTO {name} (k, g, n, x) SELECT g, 'r' || g, '2020-01-01 10:00+02',"
            f" 'x' || g FROM generate_series(100, {100 + BULK_AFTER + 200}) AS g"
        )
        sql = f"SELECT * FROM {name} WHERE k = %s"
        keys = [*KEYS, *range(100, 100 + BULK_AFTER + 200, 7)]
        for k in range(100, 100 + BULK_AFTER + 50):  # misses, then the bulk read
            hw.execute(sql, [k]).fetchall()
        hw.execute(f"UPDATE {name} SET g = 'changed' WHERE k IN (1, 107, 114)")
        hw.execute(f"DELETE FROM {name} WHERE k = 121")
        hw.execute(f"INSERT INTO {name} (k, g) VALUES (99, 'new')")
        for binary in (False, True):
            for key in [*keys, 99]:
                point = _raw(hw, sql, [key], binary)
                assert point == _raw(hw, sql + " AND true", [key], binary), key


def test_key_index_bulk_fill() -> None:
    """`missed` asks for the bulk read once BULK_AFTER misses came; `fill_all` keeps the
    rows until a change names their key, skips a read older than a change, and gives up
    on a table too large for MAX_KEYS."""
    import pyarrow as pa
    from headwater.catalog.objects import Column, Table
    from headwater.catalog.types import INT4, ColumnType
    from headwater.storage import key_index
    from headwater.storage.changelog import EpochRecord

    table = Table(1, "public", "t", (Column("k", ColumnType(INT4)), Column("v", ColumnType(INT4))))
    idx = key_index.KeyIndex()
    asks = [idx.missed(table, ("k",)) for _ in range(key_index.BULK_AFTER)]
    assert asks == [False] * (key_index.BULK_AFTER - 1) + [True]
    idx.fill_all(table, ("k",), 5, {(1,): (3, [(1, 10)]), (2,): (4, [(2, 20)])})
    assert idx.rows(table, ("k",), (1,), 5) == [(1, 10)]
    assert idx.rows(table, ("k",), (2,), 3) is None  # before the version began
    idx.observe(EpochRecord(6, {1: pa.table({"k": [2], "v": [21], "_hw_w": [1]})}))
    assert idx.rows(table, ("k",), (2,), 6) is None and idx.rows(table, ("k",), (1,), 6)
    idx.forget()
    idx.observe(EpochRecord(7, {1: pa.table({"k": [3], "v": [30], "_hw_w": [1]})}))
    idx.fill_all(table, ("k",), 6, {(1,): (3, [(1, 10)])})  # read before epoch 7
    assert idx.rows(table, ("k",), (1,), 7) is None
    big = {(i,): (1, [(i, i)]) for i in range(key_index.MAX_KEYS + 1)}
    idx.fill_all(table, ("k",), 8, big)
    assert idx.rows(table, ("k",), (5,), 8) is None
    assert not any(idx.missed(table, ("k",)) for _ in range(10 * key_index.BULK_AFTER))


def test_point_reads_sent_as_text_by_shape(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """Simple-protocol point reads with their keys inlined (psycopg2, pgbench) run as the
    remembered tree of their text's shape (server/literal_shapes.py): each answer is the
    DuckDB path's and PostgreSQL's, also for quoted strings, keys of the wrong kind,
    after DDL, another search_path and inside a writing transaction."""
    name = f"{table_name}_lit"
    setup = [
        f"CREATE TABLE {name} (k int PRIMARY KEY, t text UNIQUE, v bigint)",
        f"INSERT INTO {name} SELECT g, 'it''s ' || g, g * 10 FROM generate_series(1, 50) AS g",
    ]
    with in_schema((hw_server.dsn, pg_oracle.dsn), name, setup) as (hw, pg):
        texts = [
            *(f"SELECT v, t FROM {name} WHERE k = {k}" for k in (1, 2, 3, 77, 2147483648)),
            *(f"SELECT k FROM {name} WHERE t = 'it''s {k}'" for k in (4, 5, 99)),
            f"SELECT k FROM {name} WHERE t = E'it\\'s 6'",  # not a plain string: parsed
            f"SELECT v FROM {name} WHERE k = '7'",  # a string for an integer key
            f"SELECT v FROM {name} WHERE k = -8",
            f"SELECT v FROM {name} WHERE k = 8 AND v = 80",  # not a point read
            f"SELECT v FROM {name} WHERE k = 9; SELECT v FROM {name} WHERE k = 10",
        ]

        def results(c: psycopg.Connection, sql: str) -> list:
            out = []
            with c.cursor() as cur:
                cur.execute(sql.encode(), prepare=False)  # bytes: psycopg sends no params
                while True:
                    out.append((cur.statusmessage, cur.fetchall() if cur.description else None))
                    if not cur.nextset():
                        return out

        for _ in range(2):  # the second time, shapes are known
            for sql in texts:
                assert results(hw, sql) == results(pg, sql), sql
        duck = f"SELECT v, t FROM {name} WHERE k = 3 AND true"
        assert results(hw, f"SELECT v, t FROM {name} WHERE k = 3") == results(hw, duck)
        hw.execute("BEGIN")
        hw.execute(f"UPDATE {name} SET v = -1 WHERE k = 11")
        assert results(hw, f"SELECT v FROM {name} WHERE k = 11") == [("SELECT 1", [(-1,)])]
        hw.execute("ROLLBACK")
        hw.execute(f"ALTER TABLE {name} RENAME COLUMN v TO w")
        with pytest.raises(psycopg.errors.UndefinedColumn):
            results(hw, f"SELECT v FROM {name} WHERE k = 12")
        hw.execute("CREATE SCHEMA IF NOT EXISTS lit_other")
        hw.execute(f"CREATE TABLE IF NOT EXISTS lit_other.{name} (k int PRIMARY KEY, w int)")
        hw.execute(f"INSERT INTO lit_other.{name} VALUES (13, 1313)")
        hw.execute(f"SET search_path = lit_other, {name}")
        assert results(hw, f"SELECT w FROM {name} WHERE k = 13") == [("SELECT 1", [(1313,)])]
        hw.execute(f"SET search_path = {name}")
        assert results(hw, f"SELECT w FROM {name} WHERE k = 13") == [("SELECT 1", [(130,)])]
        hw.execute("DROP SCHEMA lit_other CASCADE")


def test_text_shapes() -> None:
    """A text's shape: its plain integer, decimal and string literals as $n, with their
    kinds and values; anything else (E'' strings, parameters, huge numbers, exponents)
    has none."""
    from headwater.server.literal_shapes import _shape

    assert _shape("SELECT v FROM t WHERE k = 42 AND s = 'it''s'") == (
        "SELECT v FROM t WHERE k = $1 AND s = $2",
        ("i", "s"),
        [42, "it's"],
    )
    assert _shape("SELECT v FROM t WHERE k = 1.5") == (
        "SELECT v FROM t WHERE k = $1",
        ("f",),
        [Decimal("1.5")],
    )
    assert _shape("SELECT v FROM t WHERE k = 1e5") is None
    assert _shape("SELECT v FROM t WHERE s = E'a\\'b'") is None
    assert _shape("SELECT v FROM t WHERE k = $1") is None
    assert _shape("SELECT v FROM t WHERE k = 1234567890123456789012") is None
    assert _shape("SELECT v FROM t") is None


def test_writes_sent_as_text_by_shape(hw_server, pg_oracle, table_name: str) -> None:  # type: ignore[no-untyped-def]
    """Simple-protocol INSERTs, UPDATEs and DELETEs with their values inlined (psycopg2,
    pgbench), once a fast path took their text's shape, run as its remembered tree with
    the literals as parameters (server/literal_shapes.py, Executor.fast_write): results,
    tags, rows and errors are PostgreSQL's (a data error: the text runs as usual), in
    blocks, after a rollback and after DDL too."""
    name = f"{table_name}_litw"
    setup = [f"CREATE TABLE {name} (id int PRIMARY KEY, s text, a numeric(8,2), n int DEFAULT 0)"]
    texts = [
        *(f"INSERT INTO {name} (id, s, a) VALUES ({i}, 'it''s {i}', {i}.25)" for i in range(1, 6)),
        f"INSERT INTO {name} (id, s, a) VALUES (6, 'six', -1.5) RETURNING id, a, n",
        f"INSERT INTO {name} (id, s, a) VALUES (8, 'eight', 123456789.5)",
        f"INSERT INTO {name} (id, s, a) VALUES (1, 'dup', 1.5)",
        *(f"UPDATE {name} SET a = {i}.5, n = n + {i} WHERE id = {i}" for i in range(1, 4)),
        f"UPDATE {name} SET a = 9.5, n = n + -7 WHERE id = 4 RETURNING n",
        f"UPDATE {name} SET a = 2.5, n = n + 1 WHERE id = 99",
        *(f"DELETE FROM {name} WHERE id = {i}" for i in (5, 5, 6)),
        "BEGIN",
        f"INSERT INTO {name} (id, s, a) VALUES (20, 'block', 2.25)",
        f"UPDATE {name} SET a = 3.5, n = n + 2 WHERE id = 20",
        "ROLLBACK",
        "BEGIN",
        f"INSERT INTO {name} (id, s, a) VALUES (21, 'kept', 2.25)",
        f"UPDATE {name} SET a = 4.5, n = n + 3 WHERE id = 21",
        "COMMIT",
        f"ALTER TABLE {name} ALTER COLUMN a TYPE numeric(4,1)",
        f"INSERT INTO {name} (id, s, a) VALUES (30, 'after', 3.25)",
        f"INSERT INTO {name} (id, s, a) VALUES (31, 'after', 12345.5)",
        f"SELECT * FROM {name} ORDER BY id",
    ]

    def results(c: psycopg.Connection, sql: str) -> object:
        try:
            with c.cursor() as cur:
                cur.execute(sql.encode(), prepare=False)  # bytes: the simple protocol
                return cur.statusmessage, cur.fetchall() if cur.description else None
        except psycopg.Error as e:
            d = e.diag
            return e.sqlstate, d.message_primary, d.statement_position

    with in_schema((hw_server.dsn, pg_oracle.dsn), name, setup) as (hw, pg):
        for sql in texts:
            assert results(hw, sql) == results(pg, sql), sql


def test_write_shapes_are_remembered_after_a_fast_path() -> None:
    """The shape of a write a fast path took is remembered for the session's catalog and
    search_path; another catalog or search_path does not find it."""
    from types import SimpleNamespace

    from headwater.server.literal_shapes import LiteralShapes

    catalog = object()
    s: Any = SimpleNamespace(
        write=None,
        catalog=catalog,
        settings=SimpleNamespace(values={"search_path": "p"}),
        temp_schema=None,
    )
    shapes = LiteralShapes()
    shapes.learn_write(s, "UPDATE t SET a = 1.5, n = n + 2 WHERE id = 7")
    known = shapes.lookup(s, "UPDATE t SET a = 2.25, n = n + 3 WHERE id = 8")
    assert known is not None and known[1] == [Decimal("2.25"), 3, 8]
    assert type(known[0]).__name__ == "UpdateStmt"
    s.settings.values["search_path"] = "q"
    assert shapes.lookup(s, "UPDATE t SET a = 2.25, n = n + 3 WHERE id = 8") is None
