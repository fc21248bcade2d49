"""UNIQUE indexes over expressions or with a WHERE (`CREATE UNIQUE INDEX ON users
(lower(email))`, `... (email) WHERE deleted_at IS NULL`: case-insensitive and soft-delete
uniqueness, as migrations create them) against PostgreSQL 15: the same rows accepted and
the same 23505 errors (message and detail) for INSERT, UPDATE, COPY and CREATE UNIQUE
INDEX over existing rows; the index follows RENAME of itself and of its columns and goes
with a dropped column; concurrent writers of colliding keys: exactly one wins.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import asyncpg
import duckdb
import pytest
from headwater.catalog.objects import Column, IndexKey, Key, Table
from headwater.catalog.pgtypes import SessionFormat
from headwater.catalog.types import INT4, TEXT, TIMESTAMP, ColumnType
from headwater.server import fast_index_keys, point_writes
from headwater.server.batcher import IndexedRows, fast_rows
from headwater.server.constraints import index_key_values
from pglast import parse_sql

from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import assert_results_as_postgres, assert_same_as_postgres

pytestmark = pytest.mark.oracle


def test_unique_expression_and_partial_indexes(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    assert_same_as_postgres(
        pg_oracle.dsn,
        hw_server.dsn,
        "uidx",
        [
            "CREATE TABLE users (id int PRIMARY KEY, email text, deleted_at timestamp, org int)",
            "INSERT INTO users VALUES (1, 'A@x.com', NULL, 1), (2, 'b@x.com', NULL, 1),"
            " (3, 'a@X.com', '2020-01-01', 2)",
            "CREATE UNIQUE INDEX users_email_lower ON users (lower(email))",
            "CREATE UNIQUE INDEX users_email_live ON users (email) WHERE deleted_at IS NULL",
            "CREATE UNIQUE INDEX users_org_email ON users (org, lower(email))"
            " WHERE deleted_at IS NULL",
            "INSERT INTO users VALUES (4, 'B@X.COM', '2021-01-01', 3)",
            "INSERT INTO users VALUES (5, 'c@x.com', NULL, 1), (6, 'C@x.com', NULL, 1)",
            "INSERT INTO users VALUES (5, 'c@x.com', NULL, 1), (6, NULL, NULL, 1),"
            " (7, NULL, NULL, 1)",
            "INSERT INTO users VALUES (8, 'b@x.com', NULL, 1)",
            "INSERT INTO users VALUES (8, 'b@x.com', now(), 1)",
            "UPDATE users SET email = 'A@x.com' WHERE id = 2",
            "UPDATE users SET deleted_at = '2022-01-01' WHERE id = 1",
            "UPDATE users SET email = 'A@x.com' WHERE id = 2",
            "UPDATE users SET org = 2 WHERE id = 2",
            "UPDATE users SET email = upper(email) WHERE id = 5",
            # general writes keep the fast INSERT path's key sets in step
            "INSERT INTO users VALUES (13, 'c@X.com', NULL, 5)",
            "DELETE FROM users WHERE id = 5",
            "INSERT INTO users VALUES (13, 'c@X.com', NULL, 5)",
            "UPDATE users SET email = 'q@x.com' WHERE id = 13",
            "INSERT INTO users VALUES (14, 'c@x.com', NULL, 5)",
            "INSERT INTO users VALUES (15, 'Q@x.com', NULL, 5)",
            "SELECT id, email, deleted_at IS NULL, org FROM users ORDER BY id",
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'users'"
            " AND schemaname = current_schema"
            " ORDER BY indexname",
            "ALTER INDEX users_email_live RENAME TO users_live_email",
            "INSERT INTO users VALUES (9, 'A@x.com', NULL, 9)",
            "ALTER TABLE users RENAME COLUMN email TO mail",
            "INSERT INTO users VALUES (10, 'c@X.com', NULL, 9)",
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'users'"
            " AND schemaname = current_schema"
            " ORDER BY indexname",
            "ALTER TABLE users DROP COLUMN deleted_at",
            "SELECT indexname FROM pg_indexes WHERE tablename = 'users'"
            " AND schemaname = current_schema ORDER BY indexname",
            "INSERT INTO users VALUES (11, 'z@x.com', 1)",
            "INSERT INTO users VALUES (12, 'Z@x.com', 1)",
            "DROP INDEX users_email_lower",
            "INSERT INTO users VALUES (12, 'Z@x.com', 1)",
            "SELECT id, mail, org FROM users ORDER BY id",
        ],
    )


def test_on_conflict_arbiters(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """ON CONFLICT DO NOTHING without a target skips a row colliding on any unique key
    or index, with the table or an earlier row of the statement (once: only the primary
    key counted, and 23505 ended the statement); ON CONFLICT ON CONSTRAINT ... DO UPDATE
    (once: 42601)."""
    assert_same_as_postgres(
        pg_oracle.dsn,
        hw_server.dsn,
        "uidx_oc",
        [
            "CREATE TABLE oc (id int PRIMARY KEY, email text UNIQUE, n int)",
            "INSERT INTO oc VALUES (1, 'a', 1), (2, 'b', 2)",
            "INSERT INTO oc VALUES (3, 'a', 3) ON CONFLICT DO NOTHING",
            "INSERT INTO oc VALUES (1, 'z', 3) ON CONFLICT DO NOTHING",
            "INSERT INTO oc VALUES (4, 'c', 4), (5, 'c', 5) ON CONFLICT DO NOTHING",
            "INSERT INTO oc VALUES (6, 'd', 4), (6, 'e', 5) ON CONFLICT DO NOTHING",
            "INSERT INTO oc VALUES (7, 'x', 1), (8, 'x', 1), (8, 'y', 1), (9, NULL, 1),"
            " (10, NULL, 1) ON CONFLICT DO NOTHING",
            "INSERT INTO oc VALUES (11, 'b', 7) ON CONFLICT (id) DO NOTHING",
            "INSERT INTO oc VALUES (12, 'b', 7) ON CONFLICT (email) DO UPDATE SET n = excluded.n",
            "INSERT INTO oc VALUES (2, 'q', 9) ON CONFLICT ON CONSTRAINT oc_pkey"
            " DO UPDATE SET n = 99",
            "INSERT INTO oc VALUES (2, 'q', 9) ON CONFLICT ON CONSTRAINT nosuch DO NOTHING",
            "CREATE UNIQUE INDEX oc_lower ON oc (lower(email))",
            "INSERT INTO oc VALUES (13, 'A', 1) ON CONFLICT DO NOTHING",
            "INSERT INTO oc VALUES (13, 'A', 1)",
            "SELECT * FROM oc ORDER BY id",
            "CREATE UNIQUE INDEX oc_live ON oc (org_id, lower(email)) WHERE n > 0",
            "ALTER TABLE oc ADD COLUMN org_id int DEFAULT 1",
            "CREATE UNIQUE INDEX oc_live ON oc (org_id, lower(email)) WHERE n > 0",
            "INSERT INTO oc VALUES (20, 'NEW', 5, 1) ON CONFLICT (lower(email), org_id)"
            " WHERE n > 0 DO UPDATE SET n = oc.n + excluded.n",
            "INSERT INTO oc VALUES (21, 'A', 5, 1) ON CONFLICT (lower(email), org_id)"
            " WHERE n > 0 DO UPDATE SET n = oc.n + excluded.n",
            "INSERT INTO oc VALUES (22, 'b', 5, 1), (23, 'B', 6, 1) ON CONFLICT"
            " (lower(email), org_id) WHERE n > 0 DO UPDATE SET n = excluded.n",
            "INSERT INTO oc VALUES (22, 'c', 5, 1), (23, 'C', 6, 1) ON CONFLICT"
            " (org_id, lower(email)) WHERE n > 0 DO NOTHING",
            "INSERT INTO oc VALUES (24, 'b', 1, 1) ON CONFLICT (lower(email), org_id) DO NOTHING",
            "INSERT INTO oc VALUES (24, 'b', 1, 1) ON CONFLICT (lower(email)) DO NOTHING",
            "SELECT * FROM oc ORDER BY id",
            "CREATE TABLE plain (v int)",
            "INSERT INTO plain VALUES (1), (1) ON CONFLICT DO NOTHING",
            "SELECT * FROM plain",
        ],
    )


def test_in_blocks_and_copy(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """A block's own rows count; a rolled-back row frees its key; COPY is checked."""
    script = [
        "DROP TABLE IF EXISTS uidx_tags",
        "CREATE TABLE uidx_tags (id int PRIMARY KEY, name text)",
        "CREATE UNIQUE INDEX uidx_tags_name ON uidx_tags (lower(name))",
        "BEGIN",
        "INSERT INTO uidx_tags VALUES (1, 'Red')",
        "INSERT INTO uidx_tags VALUES (2, 'RED')",
        "ROLLBACK",
        "BEGIN",
        "INSERT INTO uidx_tags VALUES (1, 'Red')",
        "ROLLBACK",
        "INSERT INTO uidx_tags VALUES (2, 'red')",
        "COPY uidx_tags FROM STDIN\n3\tBlue\n4\tGREEN\n",
        "COPY uidx_tags FROM STDIN\n5\tRED\n",
        "SELECT * FROM uidx_tags ORDER BY id",
    ]
    assert_results_as_postgres(hw_server.dsn, pg_oracle.dsn, script)


def test_point_writes_of_tables_with_computed_values(
    hw_server: HeadwaterServer, pg_oracle: Any
) -> None:
    """UPDATEs and DELETEs by key of a table with a unique expression index and a
    generated column are point writes (server/point_writes.py) when they set none of
    the columns those are computed from: a DELETE frees its row's index keys (also one
    the batcher needs DuckDB for: not ASCII) for the INSERTs after it."""
    script = [
        "DROP TABLE IF EXISTS uidx_pw",
        "CREATE TABLE uidx_pw (id int PRIMARY KEY, email text, deleted_at timestamp,"
        " name text, visits int DEFAULT 0,"
        " slug text GENERATED ALWAYS AS (lower(name)) STORED)",
        "CREATE UNIQUE INDEX uidx_pw_email ON uidx_pw (lower(email)) WHERE deleted_at IS NULL",
        "INSERT INTO uidx_pw (id, email, name) VALUES (1, 'A@x.com', 'Ann'),"
        " (2, 'B@x.com', 'Bob'), (3, 'Ünï@x.com', 'Uni')",
        "UPDATE uidx_pw SET visits = visits + 1 WHERE id = 1",
        "UPDATE uidx_pw SET visits = 5, email = 'C@x.com' WHERE id = 2",
        "UPDATE uidx_pw SET name = 'Annie' WHERE id = 1",
        "SELECT * FROM uidx_pw ORDER BY id",
        "DELETE FROM uidx_pw WHERE id = 1",
        "INSERT INTO uidx_pw (id, email, name) VALUES (4, 'a@X.com', 'Again')",
        "INSERT INTO uidx_pw (id, email, name) VALUES (5, 'c@x.com', 'Dup')",
        "DELETE FROM uidx_pw WHERE id = 3",
        "INSERT INTO uidx_pw (id, email, name) VALUES (6, 'Ünï@x.com', 'Uni2')",
        "BEGIN",
        "UPDATE uidx_pw SET visits = 9 WHERE id = 4",
        "DELETE FROM uidx_pw WHERE id = 2",
        "INSERT INTO uidx_pw (id, email, name) VALUES (7, 'c@x.com', 'Cee')",
        "COMMIT",
        "UPDATE uidx_pw SET deleted_at = '2020-01-01' WHERE id = 4",
        "INSERT INTO uidx_pw (id, email, name) VALUES (8, 'A@x.com', 'Third')",
        "UPDATE uidx_pw SET visits = 1 WHERE id IN (4, 6, 7)",
        "SELECT * FROM uidx_pw ORDER BY id",
    ]
    assert_results_as_postgres(hw_server.dsn, pg_oracle.dsn, script)
    table = Table(
        16405,
        "public",
        "t",
        (
            Column("id", ColumnType(INT4), True),
            Column("email", ColumnType(TEXT)),
            Column("n", ColumnType(INT4)),
            Column("e2", ColumnType(TEXT), generated="email || '!'"),
            Column("v", ColumnType(INT4)),
        ),
        (Key("t_pkey", ("id",), primary=True),),
        index_keys=(IndexKey("t_lower", ("lower(email)",), "n > 0"),),
    )
    assert point_writes.eligible(table)
    assert point_writes.computed_inputs(table) == {"email", "n", "e2"}

    def writes(sql: str) -> Any:
        stmt = parse_sql(sql)[0].stmt
        return point_writes.point_writes(stmt, table, [], SessionFormat())  # type: ignore[arg-type]

    assert writes("UPDATE t SET id = id WHERE id = 1") is None  # (a key: never)
    assert writes("DELETE FROM t WHERE id = 1") is not None
    assert writes("UPDATE t SET v = v + 1 WHERE id = 1") is not None
    for taken in ("email = 'x'", "n = 1"):
        assert writes(f"UPDATE t SET {taken} WHERE id = 1") is None


def test_concurrent_writers_of_one_key(hw_server: HeadwaterServer) -> None:
    """16 clients insert spellings of the same few emails at once: one row per
    lower-case email survives, every other INSERT gets 23505."""

    async def run() -> tuple[int, int, list[Any]]:
        async def connect() -> asyncpg.Connection:
            return await asyncpg.connect(
                host=hw_server.host, port=hw_server.port, user="headwater", database="headwater"
            )

        admin = await connect()
        await admin.execute("DROP TABLE IF EXISTS uidx_race")
        await admin.execute("CREATE TABLE uidx_race (id int PRIMARY KEY, email text)")
        await admin.execute("CREATE UNIQUE INDEX uidx_race_email ON uidx_race (lower(email))")
        clients = [await connect() for _ in range(16)]
        won = lost = 0

        async def insert(c: asyncpg.Connection, i: int) -> None:
            nonlocal won, lost
            email = f"user{i % 4}@x.com"
            try:
                await c.execute(
                    "INSERT INTO uidx_race VALUES ($1, $2)", i, email.upper() if i % 2 else email
                )
                won += 1
            except asyncpg.UniqueViolationError:
                lost += 1

        async def client(n: int) -> None:
            for i in range(n, 64, 16):
                await insert(clients[n], i)

        await asyncio.gather(*(client(n) for n in range(16)))
        rows = await admin.fetch(
            "SELECT lower(email), count(*) FROM uidx_race GROUP BY 1 ORDER BY 1"
        )
        for c in [admin, *clients]:
            await c.close()
        return won, lost, [tuple(r) for r in rows]

    won, lost, rows = asyncio.run(run())
    assert (won, lost) == (4, 60)
    assert rows == [(f"user{i}@x.com", 1) for i in range(4)]


def test_an_insert_of_constants_takes_the_fast_path_with_its_index_keys() -> None:
    """An INSERT of constants into a table with unique expression or partial indexes is
    taken by the batcher (server/batcher.py `fast_rows`): DuckDB computes the rows' keys
    of each index (server/constraints.py `index_key_values`, one statement for the
    statement's rows) and the batcher checks them against the index's live keys, as it
    checks a primary key's. Before, each such INSERT was a writing transaction that
    scanned the whole table for the index's keys (write_throughput --form orm-unique:
    62 INSERTs/s, 17.9 ms of server CPU each, growing with the table)."""
    table = Table(
        16402,
        "public",
        "users",
        (
            Column("id", ColumnType(INT4), True),
            Column("email", ColumnType(TEXT)),
            Column("deleted_at", ColumnType(TIMESTAMP)),
        ),
        (Key("users_pkey", ("id",), primary=True),),
        index_keys=(
            IndexKey("users_lower", ("lower(email)",), "deleted_at IS NULL"),
            IndexKey("users_id_email", ("id", "email")),
        ),
    )
    cur = duckdb.connect()
    sql = (
        "INSERT INTO users VALUES (1, 'A@x.com', NULL), (2, 'b@x.com', '2020-01-01'),"
        " (3, NULL, NULL)"
    )
    stmt = parse_sql(sql)[0].stmt
    assert fast_rows(stmt, table, [], SessionFormat()) is None  # (no DuckDB to ask)
    fast = fast_rows(
        stmt, table, [], SessionFormat(), generate=lambda t, r: index_key_values(t, r, cur)
    )
    assert fast is not None and isinstance(fast.rows, IndexedRows)
    # the deleted row and the NULL email are in neither index's set of the first
    assert fast.rows.index_keys == [
        [("a@x.com",), None, None],
        [(1, "A@x.com"), (2, "b@x.com"), None],
    ]


def test_common_index_keys_are_computed_in_python() -> None:
    """lower()/upper() of a text column and plain columns, with a partial index's WHERE
    as CHECKs are compiled (server/fast_index_keys.py): the same keys DuckDB computes,
    without a DuckDB statement per INSERT; a value that is not ASCII, or a key of another
    shape, is left to DuckDB."""
    cols = (
        Column("id", ColumnType(INT4), True),
        Column("email", ColumnType(TEXT)),
        Column("deleted_at", ColumnType(TIMESTAMP)),
    )
    lower = IndexKey("t_lower", ("lower(email)",), "deleted_at IS NULL")
    both = IndexKey("t_both", ("upper(email)", "id"), "id > 1")
    table = Table(16403, "public", "t", cols, index_keys=(lower, both))
    day = dt.datetime(2020, 1, 1)
    rows = [[1, "A@x.com", None], [2, "b@X.com", None], [3, None, None], [4, "c", day]]
    keys = fast_index_keys.key_values(table, rows)
    assert keys == index_key_values(table, rows, duckdb.connect())
    assert keys == [
        [("a@x.com",), ("b@x.com",), None, None],
        [None, ("B@X.COM", 2), None, ("C", 4)],
    ]
    assert fast_index_keys.key_values(table, [[5, "Ünï", None]]) is None  # DuckDB's case
    other = IndexKey("t_other", ("(email || 'x')",))
    assert fast_index_keys.compiled(Table(16404, "public", "t", cols, index_keys=(other,))) is None
