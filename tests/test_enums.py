"""CREATE TYPE ... AS ENUM against PostgreSQL 15: columns of the type order, compare and
reject values as PostgreSQL's do (same rows, errors and notices); ALTER TYPE ADD VALUE
and RENAME VALUE; DROP TYPE; the system catalogs psql and ORMs read (pg_type, pg_enum,
format_type, information_schema, \\dT+); parameters through asyncpg, which looks the type
up by its oid; COPY; materialized views over enum columns; and SIGKILL.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import pytest

from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import assert_results_as_postgres, assert_same_as_postgres, psql_outputs
from tests.test_matviews_functions import text_rows

pytestmark = pytest.mark.oracle

# (enum columns' oids differ between the two servers: result types are not compared)
IGNORE = ("types", "position")


def _same(hw_server: HeadwaterServer, pg_oracle: Any, schema: str, script: list[str]) -> None:
    assert_same_as_postgres(pg_oracle.dsn, hw_server.dsn, schema, script, IGNORE)


def test_enum_columns_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    _same(
        hw_server,
        pg_oracle,
        "enum_cols",
        [
            "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
            "CREATE TYPE mood AS ENUM ('x')",
            "CREATE TABLE person (id int PRIMARY KEY, name text, m mood NOT NULL DEFAULT 'ok')",
            "INSERT INTO person VALUES (1, 'a', 'happy'), (2, 'b', 'sad'), (3, 'c', 'ok')",
            "INSERT INTO person (id, name) VALUES (4, 'd')",
            "INSERT INTO person VALUES (5, 'e', 'angry')",
            "INSERT INTO person VALUES (5, 'e', 'Happy')",
            "SELECT * FROM person ORDER BY m, id",
            "SELECT * FROM person ORDER BY m DESC, id",
            # ordered by the labels' positions, not their text
            "SELECT id FROM person WHERE m > 'sad' ORDER BY id",
            "SELECT id FROM person WHERE 'ok' >= m ORDER BY id",
            "SELECT id FROM person WHERE m BETWEEN 'ok' AND 'happy' ORDER BY id",
            "SELECT id FROM person WHERE m NOT BETWEEN 'ok' AND 'ok' ORDER BY id",
            "SELECT id FROM person WHERE m = 'happy' OR m IN ('sad') ORDER BY id",
            "SELECT max(m), min(m), count(DISTINCT m) FROM person",
            "SELECT m, count(*) FROM person GROUP BY m ORDER BY m",
            "SELECT m, lag(m) OVER (ORDER BY m, id) FROM person ORDER BY id",
            "SELECT array_agg(m ORDER BY m)::text FROM person",
            "SELECT m::text || '!', upper(m::text), length(m::text) FROM person ORDER BY id",
            "SELECT 'happy'::mood, 'ok'::mood < 'happy'::mood, 'angry'::mood",
            "SELECT pg_typeof(m)::text, pg_typeof('ok'::mood)::text FROM person LIMIT 1",
            "SELECT enum_range(NULL::mood)::text, enum_first(NULL::mood), enum_last(NULL::mood)",
            "SELECT enum_range(NULL, 'ok'::mood)::text, enum_range('ok'::mood, NULL)::text",
            "UPDATE person SET m = 'happy' WHERE id = 2",
            "UPDATE person SET m = 'furious' WHERE id = 2",
            "DELETE FROM person WHERE m = 'ok'",
            "SELECT * FROM person ORDER BY id",
            "ALTER TYPE mood RENAME TO feeling",
            "ALTER TYPE mood RENAME TO feeling",
            "INSERT INTO person VALUES (6, 'f', 'sad')",
            "SELECT m, pg_typeof(m)::text, 'ok'::feeling FROM person ORDER BY m",
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = 'person'::regclass AND attname = 'm'",
            "ALTER TYPE feeling RENAME TO mood",
            "CREATE TABLE bad (x mood(3))",
            "DROP TYPE mood",
            "DROP TYPE IF EXISTS nosuch",
            "DROP TYPE nosuch",
        ],
    )


def test_alter_type_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """ADD VALUE (at the end, BEFORE, AFTER, IF NOT EXISTS) and RENAME VALUE change the
    order and labels of the values already stored; defaults, CHECKs and views over the
    type use it by name; DROP TYPE once nothing uses it."""
    _same(
        hw_server,
        pg_oracle,
        "enum_alter",
        [
            "CREATE TYPE color AS ENUM ('red', 'green', 'blue')",
            "CREATE TABLE p (id int PRIMARY KEY, c color DEFAULT 'green'::color,"
            " CHECK (c <> 'blue'::color))",
            "INSERT INTO p VALUES (1, 'red'), (2, 'green'), (3, NULL)",
            "INSERT INTO p (id) VALUES (4)",
            "INSERT INTO p VALUES (5, 'blue')",
            "CREATE VIEW pv AS SELECT id, c, c = 'red'::color AS is_red FROM p"
            " WHERE c < 'blue'::color",
            "SELECT * FROM pv ORDER BY id",
            "ALTER TYPE color ADD VALUE 'amber' BEFORE 'green'",
            "ALTER TYPE color ADD VALUE 'black'",
            "ALTER TYPE color ADD VALUE 'pink' AFTER 'red'",
            "ALTER TYPE color ADD VALUE IF NOT EXISTS 'red'",
            "ALTER TYPE color ADD VALUE 'red'",
            "ALTER TYPE color ADD VALUE 'x' BEFORE 'nosuch'",
            "INSERT INTO p VALUES (6, 'amber'), (7, 'black'), (8, 'pink')",
            "SELECT * FROM p ORDER BY c, id",
            "SELECT enum_range(NULL::color)::text",
            "ALTER TYPE color RENAME VALUE 'pink' TO 'rose'",
            "ALTER TYPE color RENAME VALUE 'nosuch' TO 'y'",
            "ALTER TYPE color RENAME VALUE 'green' TO 'blue'",
            "SELECT * FROM p ORDER BY c, id",
            "SELECT * FROM pv ORDER BY id",
            "SELECT enumlabel FROM pg_enum WHERE enumtypid = 'color'::regtype"
            " ORDER BY enumsortorder",
            "ALTER TABLE p ADD COLUMN c2 color DEFAULT 'black'",
            "ALTER TABLE p ALTER COLUMN c2 TYPE text",
            "ALTER TABLE p ALTER COLUMN c2 TYPE color USING c2::color",
            "SELECT id, c2 FROM p ORDER BY id",
            "DROP TYPE color",
            "DROP VIEW pv",
            "ALTER TYPE color RENAME VALUE 'red' TO 'crimson'",
            "SELECT * FROM p ORDER BY c, id",
            "DROP TABLE p",
            "DROP TYPE color",
        ],
    )


def test_rename_value_named_by_a_view(hw_server: HeadwaterServer) -> None:
    """PostgreSQL's views keep an enum constant by its oid and follow RENAME VALUE;
    Headwater keeps their text: the rename (of the label, or of the type a cast names)
    is refused while one names it. Only views that can read the type count: elsewhere
    'a' is just a string."""
    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        c.execute("DROP VIEW IF EXISTS enum_rv_w, enum_rv_v, enum_rv_other")
        c.execute("DROP TABLE IF EXISTS enum_rv; DROP TYPE IF EXISTS enum_rv_t")
        c.execute("CREATE TYPE enum_rv_t AS ENUM ('a', 'b')")
        c.execute("CREATE TABLE enum_rv (x enum_rv_t)")
        c.execute("CREATE VIEW enum_rv_other AS SELECT 'a' AS s")
        c.execute("CREATE VIEW enum_rv_v AS SELECT x FROM enum_rv WHERE x = 'a'::enum_rv_t")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="view enum_rv_v names"):
            c.execute("ALTER TYPE enum_rv_t RENAME VALUE 'a' TO 'z'")
        c.execute("ALTER TYPE enum_rv_t RENAME VALUE 'b' TO 'y'")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="view enum_rv_v names"):
            c.execute("ALTER TYPE enum_rv_t RENAME TO enum_rv_u")
        c.execute("DROP VIEW enum_rv_v")
        c.execute("CREATE VIEW enum_rv_v AS SELECT x FROM enum_rv")
        c.execute("CREATE VIEW enum_rv_w AS SELECT x FROM enum_rv_v WHERE x = 'a'")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="view enum_rv_w names"):
            c.execute("ALTER TYPE enum_rv_t RENAME VALUE 'a' TO 'z'")
        c.execute("DROP VIEW enum_rv_w")
        c.execute("ALTER TYPE enum_rv_t RENAME VALUE 'a' TO 'z'")
        assert c.execute("SELECT enum_range(NULL::enum_rv_t)::text").fetchone() == ("{z,y}",)
        assert c.execute("SELECT s FROM enum_rv_other").fetchone() == ("a",)
        c.execute("DROP VIEW enum_rv_v, enum_rv_other; DROP TABLE enum_rv; DROP TYPE enum_rv_t")


def test_catalogs_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """What ORMs and migration tools read to find enums (SQLAlchemy's, Alembic's), and
    the type names psql's \\d and format_type() print."""
    _same(
        hw_server,
        pg_oracle,
        "enum_cat",
        [
            "CREATE TYPE status AS ENUM ('new', 'active', 'done')",
            "CREATE TABLE task (id int, s status)",
            "SELECT EXISTS (SELECT * FROM pg_catalog.pg_type t WHERE t.typname = 'status'"
            " AND pg_type_is_visible(t.oid))",
            "SELECT t.typname, t.typtype, t.typcategory, t.typlen, e.enumlabel, e.enumsortorder"
            " FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"
            " LEFT JOIN pg_enum e ON e.enumtypid = t.oid"
            " WHERE t.typtype = 'e' AND n.nspname = current_schema"
            " ORDER BY t.typname, e.enumsortorder",
            "SELECT a.typname, b.typname FROM pg_type a JOIN pg_type b ON b.oid = a.typarray"
            " WHERE a.typname = 'status'",
            "SELECT 'status'::regtype::text, '_status'::regtype::text,"
            " 'status'::regtype::oid = (SELECT oid FROM pg_type WHERE typname = 'status')",
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = 'task'::regclass AND attnum > 0 ORDER BY attnum",
            "SELECT column_name, data_type, udt_name, udt_schema = current_schema"
            " FROM information_schema.columns WHERE table_name = 'task'"
            " AND table_schema = current_schema"
            " ORDER BY ordinal_position",
        ],
    )


def test_psql_describes_enums(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    setup = (
        "DROP TABLE IF EXISTS enum_psql; DROP TYPE IF EXISTS enum_lvl;"
        " CREATE TYPE enum_lvl AS ENUM ('low', 'mid', 'high');"
        " CREATE TABLE enum_psql (id int PRIMARY KEY, l enum_lvl DEFAULT 'mid');"
        " COMMENT ON TYPE enum_lvl IS 'how loud';"
    )
    script = "\\dT enum_lvl\n\\dT+ enum_lvl\n\\d enum_psql\n"
    hw, pg = psql_outputs((hw_server.dsn, pg_oracle.dsn), setup, script)
    assert hw.replace("headwater", "X") == pg.replace("headwater", "X")
    assert "low     +" in hw and "how loud" in hw


def test_parameters_through_asyncpg(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """asyncpg looks an enum up by the oid the server describes and sends its values as
    text; a parameter compared with an enum column orders as the enum."""

    async def run(dsn: str) -> list[Any]:
        kv = dict(p.split("=") for p in dsn.split())
        conn = await asyncpg.connect(
            host=kv["host"], port=int(kv["port"]), user=kv["user"], database=kv["dbname"]
        )
        out: list[Any] = []
        try:
            await conn.execute("DROP TABLE IF EXISTS enum_ev; DROP TYPE IF EXISTS enum_level")
            await conn.execute("CREATE TYPE enum_level AS ENUM ('low', 'mid', 'high')")
            await conn.execute("CREATE TABLE enum_ev (id int PRIMARY KEY, l enum_level)")
            await conn.execute("INSERT INTO enum_ev VALUES ($1, $2)", 1, "mid")
            await conn.executemany("INSERT INTO enum_ev VALUES ($1, $2)", [(2, "high"), (3, "low")])
            out.append(await conn.fetch("SELECT * FROM enum_ev ORDER BY l"))
            out.append(await conn.fetch("SELECT id FROM enum_ev WHERE l = $1", "high"))
            out.append(await conn.fetch("SELECT id FROM enum_ev WHERE l > $1 ORDER BY id", "low"))
            await conn.execute("UPDATE enum_ev SET l = $1 WHERE id = $2", "low", 2)
            out.append(await conn.fetch("SELECT l, count(*) FROM enum_ev GROUP BY l ORDER BY l"))
            with pytest.raises(asyncpg.InvalidTextRepresentationError) as e:
                await conn.execute("INSERT INTO enum_ev VALUES ($1, $2)", 9, "nope")
            out.append(str(e.value))
            out.append(await conn.fetchval("SELECT enum_range(NULL::enum_level)"))
            st = await conn.prepare("SELECT l FROM enum_ev WHERE id = $1")
            out.append([(a.name, a.type.name, a.type.kind) for a in st.get_attributes()][0])
            out.append(await st.fetchval(1))
        finally:
            await conn.close()
        return [[tuple(r) for r in x] if isinstance(x, list) and x else x for x in out]

    assert asyncio.run(run(hw_server.dsn)) == asyncio.run(run(pg_oracle.dsn))


def test_copy_into_enum_columns(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """COPY FROM STDIN: labels and NULLs; a label the type lacks (and a bad integer:
    once an internal error, the aborted transaction refusing the cleanup) is 22P02 and
    the connection goes on."""
    script = [
        "DROP TABLE IF EXISTS enum_copy",
        "DROP TYPE IF EXISTS enum_rgb",
        "CREATE TYPE enum_rgb AS ENUM ('red', 'green', 'blue')",
        "CREATE TABLE enum_copy (id int, c enum_rgb)",
        "COPY enum_copy FROM STDIN\n1\tred\n2\tgreen\n3\t\\N\n",
        "COPY enum_copy FROM STDIN\n4\tpurple\n",
        "COPY enum_copy FROM STDIN\nx\tred\n",
        "COPY enum_copy FROM STDIN (FORMAT csv)\n5,blue\n",
        "SELECT * FROM enum_copy ORDER BY c, id",
    ]
    assert_results_as_postgres(hw_server.dsn, pg_oracle.dsn, script)


@pytest.fixture
def enum_tables(hw_server: HeadwaterServer, pg_oracle: Any) -> Iterator[list[psycopg.Connection]]:
    conns = [psycopg.connect(d, autocommit=True) for d in (hw_server.dsn, pg_oracle.dsn)]
    try:
        for c in conns:
            c.execute("DROP MATERIALIZED VIEW IF EXISTS enum_mv_by, enum_mv_open")
            c.execute("DROP TABLE IF EXISTS enum_tasks")
            c.execute("DROP TYPE IF EXISTS enum_state")
            c.execute("CREATE TYPE enum_state AS ENUM ('new', 'open', 'closed')")
            c.execute("CREATE TABLE enum_tasks (id int PRIMARY KEY, s enum_state, n int)")
            c.execute(
                "INSERT INTO enum_tasks VALUES (1, 'new', 10), (2, 'open', 20),"
                " (3, 'closed', 30), (4, 'open', 5), (5, NULL, 1)"
            )
        yield conns
    finally:
        for c in conns:
            c.close()


def test_matviews_over_enum_columns(enum_tables: list[psycopg.Connection]) -> None:
    """Views grouping by and filtering on an enum column stay PostgreSQL's after writes
    and after ALTER TYPE ADD VALUE (the views are rebuilt with the new labels)."""
    hw, pg = enum_tables
    views = {
        "enum_mv_by": "SELECT s, count(*) AS c, sum(n) AS total, max(s) AS top"
        " FROM enum_tasks GROUP BY s",
        "enum_mv_open": "SELECT id, s FROM enum_tasks WHERE s >= 'open'",
    }
    for name, sql in views.items():
        hw.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    steps = [
        "UPDATE enum_tasks SET s = 'closed' WHERE id = 2",
        "INSERT INTO enum_tasks VALUES (6, 'new', 7), (7, NULL, 8)",
        "DELETE FROM enum_tasks WHERE s = 'new'",
        "ALTER TYPE enum_state ADD VALUE 'blocked' AFTER 'open'",
        "INSERT INTO enum_tasks VALUES (8, 'blocked', 9)",
        "UPDATE enum_tasks SET s = 'blocked' WHERE id = 4",
    ]
    for step in ["backfill", *steps]:
        if step != "backfill":
            for c in (hw, pg):
                c.execute(step)
        for name, sql in views.items():
            want = text_rows(pg, sql)
            assert text_rows(hw, f"SELECT * FROM {name}") == want, (name, step)
        got = hw.execute("SELECT s FROM enum_mv_by ORDER BY s").fetchall()
        assert got == pg.execute("SELECT DISTINCT s FROM enum_tasks ORDER BY s").fetchall()


def test_enums_survive_sigkill() -> None:
    """The types, the tables' values (also at older epochs, AS OF) and a view over them
    are as before after SIGKILL; RENAME VALUE's rewritten history included."""
    root = Path(tempfile.mkdtemp(prefix="headwater-enums-"))
    server = HeadwaterServer(root / "data").start()
    statements = [
        "CREATE TYPE st AS ENUM ('a', 'b', 'c')",
        "CREATE TABLE t (id int PRIMARY KEY, s st)",
        "INSERT INTO t VALUES (1, 'a'), (2, 'b')",
        "UPDATE t SET s = 'c' WHERE id = 1",
        "CREATE MATERIALIZED VIEW mv AS SELECT s, count(*) AS n FROM t GROUP BY s",
        "ALTER TYPE st ADD VALUE 'z' BEFORE 'a'",
        "INSERT INTO t VALUES (3, 'z')",
        "ALTER TYPE st RENAME VALUE 'b' TO 'bee'",
        "INSERT INTO t VALUES (4, 'bee')",
        "DELETE FROM t WHERE id = 3",
    ]
    checks = [
        "SELECT * FROM t ORDER BY s, id",
        "SELECT * FROM mv ORDER BY s",
        "SELECT enum_range(NULL::st)::text",
        "SELECT enumlabel FROM pg_enum ORDER BY enumsortorder",
    ]
    epoch_sql = "SELECT max(epoch) FROM headwater_catalog.epochs"
    try:
        with psycopg.connect(server.dsn, autocommit=True) as c:
            first = 0
            for sql in statements:
                c.execute(sql)
                if sql.startswith("INSERT"):
                    first = first or c.execute(epoch_sql).fetchone()[0]
            before = [c.execute(q).fetchall() for q in checks]
            epoch = c.execute(epoch_sql).fetchone()[0]
            history = [
                sorted(c.execute(f"SELECT id, s::text FROM t AS OF EPOCH {e}").fetchall())
                for e in range(first, epoch + 1)
            ]
        assert before[0] == [(2, "bee"), (4, "bee"), (1, "c")]
        server.kill()
        server.start()
        with psycopg.connect(server.dsn, autocommit=True) as c:
            assert [c.execute(q).fetchall() for q in checks] == before
            after = [
                sorted(c.execute(f"SELECT id, s::text FROM t AS OF EPOCH {e}").fetchall())
                for e in range(first, epoch + 1)
            ]
            assert after == history
            c.execute("INSERT INTO t VALUES (5, 'z')")
            assert c.execute("SELECT * FROM mv ORDER BY s").fetchall() == [
                ("z", 1),
                ("bee", 2),
                ("c", 1),
            ]
            with pytest.raises(psycopg.errors.InvalidTextRepresentation):
                c.execute("INSERT INTO t VALUES (6, 'b')")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_sinks_of_enum_columns(hw_server: HeadwaterServer, pg_oracle: Any, tmp_path: Path) -> None:
    """Parquet and Delta targets get the labels as strings; a PostgreSQL target's table,
    made by the sink, holds them as text (that database has no such type)."""
    import deltalake
    import pyarrow.parquet as pq

    from tests.test_sinks import _current_epoch, _wait_caught_up

    names = ["enum_sk_parquet", "enum_sk_delta", "enum_sk_pg"]
    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        c.execute("CREATE TYPE enum_sk_t AS ENUM ('b', 'a')")
        c.execute("CREATE TABLE enum_sk (id int PRIMARY KEY, v enum_sk_t)")
        c.execute("INSERT INTO enum_sk VALUES (1, 'a'), (2, 'b'), (3, NULL)")
        c.execute(f"CREATE SINK {names[0]} FROM enum_sk INTO PARQUET '{tmp_path / 'pq'}'")
        c.execute(f"CREATE SINK {names[1]} FROM enum_sk INTO DELTA '{tmp_path / 'delta'}'")
        target = pg_oracle.dsn.replace("'", "")
        c.execute(f"CREATE SINK {names[2]} FROM enum_sk INTO POSTGRES '{target}' TABLE enum_sk")
        c.execute("UPDATE enum_sk SET v = 'b' WHERE id = 1")
        _wait_caught_up(c, names, _current_epoch(c))
        for name in names:
            c.execute(f"DROP SINK {name}")
    want = [(1, "b"), (2, "b"), (3, None)]
    files = sorted((tmp_path / "pq").glob("**/*.parquet"))
    assert sorted(tuple(r.values()) for r in pq.read_table(files[-1]).to_pylist()) == want
    delta = deltalake.DeltaTable(str(tmp_path / "delta")).to_pyarrow_table().to_pylist()
    assert sorted(tuple(r.values()) for r in delta) == want
    with psycopg.connect(pg_oracle.dsn, autocommit=True) as pg:
        assert pg.execute("SELECT * FROM enum_sk ORDER BY id").fetchall() == want
        pg.execute("DROP TABLE enum_sk")
