"""ALTER TABLE, ALTER ... RENAME / SET SCHEMA, CHECK constraints and COMMENT ON against
PostgreSQL 15: the same statements on both, with the same results, command tags,
notices and errors (SQLSTATE, message, detail, hint); psql's \\d+ and \\dt+ output
the same. Then durability: every kind of ALTER survives SIGKILL (the change log of an
altered table is replayed in its new shape), and a materialized view over an altered
table stays exact under further writes.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.hwserver import HeadwaterServer, run_psql
from tests.oracle_scripts import script_comparer


@pytest.fixture(scope="module")
def both(hw_server: HeadwaterServer, pg_oracle: Any) -> Iterator[Any]:
    with script_comparer(hw_server.dsn, pg_oracle.dsn, "alt") as compare:
        yield compare


def test_add_column(both: Any) -> None:
    both(
        [
            "CREATE TABLE t (id int PRIMARY KEY, a text)",
            "INSERT INTO t VALUES (1, 'x'), (2, 'y')",
            "ALTER TABLE t ADD COLUMN b int",
            "ALTER TABLE t ADD COLUMN c numeric(6,2) DEFAULT 1.5",
            "ALTER TABLE t ADD COLUMN d text NOT NULL DEFAULT 'dd'",
            "ALTER TABLE t ADD COLUMN IF NOT EXISTS b int",
            "ALTER TABLE t ADD COLUMN b int",
            "ALTER TABLE t ADD COLUMN e int NOT NULL",
            "ALTER TABLE t ADD e int UNIQUE",
            "ALTER TABLE t ADD COLUMN f int CHECK (f > 0)",
            "ALTER TABLE t ADD COLUMN g int DEFAULT 0 CHECK (g > 0)",
            "INSERT INTO t (id, a) VALUES (3, 'z')",
            "INSERT INTO t VALUES (4, 'w')",
            "SELECT * FROM t ORDER BY id",
            "ALTER TABLE nosuch ADD COLUMN x int",
            "ALTER TABLE IF EXISTS nosuch ADD COLUMN x int",
            "ALTER TABLE t ADD COLUMN h int, ADD COLUMN i text DEFAULT 'i', ADD COLUMN h int",
            "ALTER TABLE t ADD COLUMN h int, ADD COLUMN i text DEFAULT 'i'",
            "SELECT * FROM t ORDER BY id",
        ]
    )


def test_default_expressions_as_postgres_prints_them(both: Any) -> None:
    """pg_get_expr() of defaults and generation expressions: operators in parentheses
    and typed constants as 'x'::type (Alembic compares server defaults by this text),
    or with (..., true) only the parentheses precedence needs (psql's \\d)."""
    both(
        [
            "CREATE TABLE dx (a int, b int DEFAULT 1 + 2, c timestamptz DEFAULT now() +"
            " interval '1 day', d text DEFAULT 'x' || 'y', e date DEFAULT CURRENT_DATE + 7,"
            " f text DEFAULT upper(lower('Ab')), g int GENERATED ALWAYS AS ((a * 2) + 1) STORED,"
            " h boolean DEFAULT true, i text DEFAULT NULL, j int DEFAULT -1)",
            "SELECT a.attname, pg_get_expr(d.adbin, d.adrelid),"
            " pg_get_expr(d.adbin, d.adrelid, true) FROM pg_attribute a JOIN pg_attrdef d"
            " ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
            " WHERE a.attrelid = 'dx'::regclass ORDER BY 1",
            "SELECT column_name, column_default, generation_expression"
            " FROM information_schema.columns WHERE table_name = 'dx' ORDER BY 1",
        ]
    )


def test_drop_and_rename_column(both: Any) -> None:
    both(
        [
            "CREATE TABLE t (a int, b text, c int, UNIQUE (c))",
            "INSERT INTO t VALUES (1, 'x', 10), (2, 'y', 20)",
            "ALTER TABLE t DROP COLUMN zz",
            "ALTER TABLE t DROP COLUMN IF EXISTS zz",
            "ALTER TABLE t DROP COLUMN c",
            "INSERT INTO t VALUES (3, 'z')",
            "SELECT * FROM t ORDER BY a",
            "ALTER TABLE t RENAME COLUMN zz TO y",
            "ALTER TABLE t RENAME COLUMN a TO b",
            "ALTER TABLE t RENAME COLUMN a TO aa",
            "ALTER TABLE t RENAME b TO bb",
            "SELECT aa, bb FROM t ORDER BY aa",
            "ALTER TABLE t ADD COLUMN e int DEFAULT 5, DROP COLUMN e",
            "SELECT * FROM t ORDER BY aa",
        ]
    )


def test_defaults_and_not_null(both: Any) -> None:
    both(
        [
            "CREATE TABLE t (a int, b text)",
            "INSERT INTO t VALUES (1, 'x'), (NULL, 'y')",
            "ALTER TABLE t ALTER COLUMN b SET DEFAULT 'dflt'",
            "INSERT INTO t (a) VALUES (2)",
            "ALTER TABLE t ALTER COLUMN b DROP DEFAULT",
            "INSERT INTO t (a) VALUES (3)",
            "ALTER TABLE t ALTER COLUMN zz SET DEFAULT 1",
            "ALTER TABLE t ALTER COLUMN a SET NOT NULL",
            "DELETE FROM t WHERE a IS NULL",
            "ALTER TABLE t ALTER COLUMN a SET NOT NULL",
            "INSERT INTO t VALUES (NULL, 'n')",
            "ALTER TABLE t ALTER COLUMN a DROP NOT NULL",
            "INSERT INTO t VALUES (NULL, 'n')",
            "SELECT * FROM t ORDER BY a, b",
            "ALTER TABLE t ADD PRIMARY KEY (a)",
            "DELETE FROM t WHERE a IS NULL",
            "ALTER TABLE t ADD PRIMARY KEY (a)",
            "ALTER TABLE t ALTER COLUMN a DROP NOT NULL",
            "SELECT column_name, is_nullable, column_default FROM information_schema.columns "
            "WHERE table_name = 't' AND table_schema = current_schema() ORDER BY ordinal_position",
        ]
    )


def test_constraints(both: Any) -> None:
    both(
        [
            "CREATE TABLE t (a int, b text)",
            "INSERT INTO t VALUES (1, 'x'), (2, 'x'), (-1, 'y')",
            "ALTER TABLE t ADD UNIQUE (b)",
            "ALTER TABLE t ADD CONSTRAINT pos CHECK (a > 0)",
            "DELETE FROM t WHERE a < 0 OR a = 2",
            "ALTER TABLE t ADD UNIQUE (b)",
            "ALTER TABLE t ADD UNIQUE (b)",
            "ALTER TABLE t ADD CONSTRAINT pos CHECK (a > 0)",
            "ALTER TABLE t ADD CONSTRAINT pos CHECK (a < 100)",
            "ALTER TABLE t ADD CHECK (length(b) < 3)",
            "ALTER TABLE t ADD PRIMARY KEY (a)",
            "ALTER TABLE t ADD PRIMARY KEY (b)",
            "INSERT INTO t VALUES (1, 'z')",
            "INSERT INTO t VALUES (5, 'x')",
            "INSERT INTO t VALUES (0, 'q')",
            "INSERT INTO t VALUES (7, 'long')",
            "UPDATE t SET a = -a",
            "SELECT conname, contype, pg_get_constraintdef(oid), pg_get_constraintdef(oid, true) "
            "FROM pg_constraint WHERE conrelid = 't'::regclass ORDER BY conname",
            "ALTER TABLE t DROP CONSTRAINT nope",
            "ALTER TABLE t DROP CONSTRAINT IF EXISTS nope",
            "ALTER TABLE t DROP CONSTRAINT pos",
            "ALTER TABLE t DROP CONSTRAINT t_b_key1, DROP CONSTRAINT t_pkey",
            "INSERT INTO t VALUES (-5, 'x')",
            "INSERT INTO t VALUES (-6, 'm')",
            "SELECT * FROM t ORDER BY a",
            "SELECT conname FROM pg_constraint WHERE conrelid = 't'::regclass ORDER BY 1",
        ]
    )


def test_not_valid_and_defaults(both: Any) -> None:
    both(
        [
            "CREATE TABLE t (a int, q int, r int)",
            "INSERT INTO t VALUES (1, 5, 1), (2, 1, 2)",
            "ALTER TABLE t ADD CONSTRAINT qr CHECK (q < r) NOT VALID",
            "INSERT INTO t VALUES (3, 5, 1)",
            "INSERT INTO t VALUES (3, 1, 5)",
            "SELECT conname, convalidated, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 't'::regclass",
            "ALTER TABLE t VALIDATE CONSTRAINT qr",
            "ALTER TABLE t VALIDATE CONSTRAINT nope",
            "UPDATE t SET r = 10",
            "ALTER TABLE t VALIDATE CONSTRAINT qr",
            "SELECT conname, convalidated, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 't'::regclass",
            "ALTER TABLE t ALTER COLUMN a SET DEFAULT 'x'",
            "ALTER TABLE t ALTER COLUMN a SET DEFAULT 1 + 1",
            "ALTER TABLE t ADD COLUMN z int DEFAULT (1 / 0)",
            "INSERT INTO t (q, r) VALUES (0, 1) RETURNING *",
        ]
    )


def test_check_in_create_table(both: Any) -> None:
    both(
        [
            "CREATE TABLE t (a int CHECK (a > 0), b int, c text CHECK (c <> 'bad'), "
            "CHECK (b > a), CONSTRAINT small CHECK (a < 10 AND b < 100), CHECK (1 > 0))",
            "CREATE TABLE t2 (a int CHECK (z > 0))",
            "CREATE TABLE t3 (a int CHECK (a > 0), CONSTRAINT t3_a_check CHECK (a < 10))",
            "INSERT INTO t VALUES (1, 2, 'ok')",
            "INSERT INTO t VALUES (0, 2, 'ok')",
            "INSERT INTO t VALUES (1, 0, 'ok')",
            "INSERT INTO t VALUES (1, 2, 'bad')",
            "INSERT INTO t VALUES (11, 200, 'ok')",
            "INSERT INTO t VALUES (NULL, NULL, NULL)",
            "UPDATE t SET b = 1000 WHERE a = 1",
            "INSERT INTO t SELECT 5, 6, 'sel'",
            "SELECT * FROM t ORDER BY a",
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 't'::regclass ORDER BY conname",
            "SELECT constraint_name, constraint_type, enforced "
            "FROM information_schema.table_constraints "
            "WHERE table_name = 't' AND constraint_schema = current_schema() "
            "AND constraint_name NOT LIKE '%not_null' ORDER BY 1",
            "SELECT constraint_name, check_clause FROM information_schema.check_constraints "
            "WHERE constraint_schema = current_schema() "
            "AND constraint_name NOT LIKE '%not_null' ORDER BY 1",
            "SELECT column_name, constraint_name FROM information_schema.constraint_column_usage "
            "WHERE table_name = 't' AND table_schema = current_schema() ORDER BY 1, 2",
        ]
    )


def test_check_on_copy(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """COPY FROM STDIN checks CHECK constraints: the same error, and no row kept."""
    outcomes = []
    for dsn in (hw_server.dsn, pg_oracle.dsn):
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("DROP TABLE IF EXISTS alter_copy_check")
            c.execute("CREATE TABLE alter_copy_check (a int CHECK (a > 0), b text)")
            with c.cursor() as cur:
                with cur.copy("COPY alter_copy_check FROM STDIN") as cp:
                    cp.write("1\tx\n2\ty\n")
                try:
                    with cur.copy("COPY alter_copy_check FROM STDIN") as cp:
                        cp.write("3\tx\n-1\ty\n")
                    error = None
                except psycopg.Error as e:
                    error = (e.diag.sqlstate, e.diag.message_primary, e.diag.message_detail)
            rows = c.execute("SELECT * FROM alter_copy_check ORDER BY a").fetchall()
            outcomes.append((error, rows))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] is not None and outcomes[0][0][0] == "23514"


def test_alter_column_type(both: Any) -> None:
    both(
        [
            "CREATE TABLE t (a int, b text, c numeric(8,3), d varchar(10), e date)",
            "INSERT INTO t VALUES (1, '10', 1.25, 'abc', '2024-01-02'), "
            "(2, '20', 2.5, 'abcdefgh', '2024-03-04')",
            "ALTER TABLE t ALTER COLUMN a TYPE bigint",
            "ALTER TABLE t ALTER COLUMN b TYPE int",
            "ALTER TABLE t ALTER COLUMN b TYPE int USING b::int",
            "ALTER TABLE t ALTER COLUMN a TYPE boolean",
            "ALTER TABLE t ALTER COLUMN a TYPE text",
            "ALTER TABLE t ALTER COLUMN c TYPE numeric(10,1)",
            "ALTER TABLE t ALTER COLUMN d TYPE varchar(5)",
            "ALTER TABLE t ALTER COLUMN d TYPE varchar(20)",
            "ALTER TABLE t ALTER COLUMN e TYPE timestamp",
            "ALTER TABLE t ALTER COLUMN zz TYPE int",
            "ALTER TABLE t ALTER COLUMN b TYPE bigint, ALTER COLUMN c SET DEFAULT 0",
            "INSERT INTO t (a, b, d) VALUES ('3', 30, 'x')",
            "SELECT * FROM t ORDER BY b",
            "SELECT column_name, data_type, numeric_precision, numeric_scale, "
            "character_maximum_length FROM information_schema.columns "
            "WHERE table_name = 't' AND table_schema = current_schema() ORDER BY ordinal_position",
        ]
    )


def test_views_follow_and_block(both: Any) -> None:
    both(
        [
            "CREATE TABLE t (a int, b text, c int)",
            "INSERT INTO t VALUES (1, 'x', 10), (2, 'y', 20)",
            "CREATE VIEW v AS SELECT a, b FROM t WHERE a > 0",
            "CREATE VIEW vall AS SELECT * FROM t",
            "CREATE VIEW vv AS SELECT a FROM v",
            "ALTER TABLE t DROP COLUMN b",
            "ALTER TABLE t ALTER COLUMN a TYPE bigint",
            "ALTER TABLE t RENAME COLUMN a TO aa",
            "SELECT pg_get_viewdef('v')",
            "SELECT * FROM v ORDER BY a",
            "SELECT * FROM vv ORDER BY a",
            "ALTER TABLE t ADD COLUMN d int DEFAULT 4",
            "SELECT * FROM vall ORDER BY a",
            "ALTER TABLE t DROP COLUMN d",
            "ALTER TABLE t RENAME TO t2",
            "SELECT pg_get_viewdef('v')",
            "SELECT * FROM v ORDER BY a",
            "ALTER TABLE t2 DROP COLUMN b CASCADE",
            "SELECT table_name FROM information_schema.views "
            "WHERE table_schema = current_schema() ORDER BY 1",
            "SELECT * FROM t2 ORDER BY aa",
        ]
    )


def test_rename_relations(both: Any) -> None:
    both(
        [
            "CREATE TABLE r (a int, b text)",
            "INSERT INTO r VALUES (1, 'x')",
            "CREATE VIEW rv AS SELECT * FROM r",
            "ALTER TABLE rv ADD COLUMN c int",
            "ALTER VIEW r RENAME TO r2",
            "ALTER MATERIALIZED VIEW rv RENAME TO r2",
            "ALTER TABLE r RENAME TO rv",
            "ALTER TABLE nosuch RENAME TO x",
            "ALTER TABLE IF EXISTS nosuch RENAME TO x",
            "ALTER VIEW rv RENAME TO rv2",
            "ALTER TABLE r RENAME TO r3",
            "SELECT * FROM rv2",
            "SELECT pg_get_viewdef('rv2')",
            "ALTER TABLE r3 RENAME CONSTRAINT nope TO x",
            "CREATE SCHEMA IF NOT EXISTS alt_other",
            "ALTER TABLE r3 SET SCHEMA nosuch",
            "ALTER TABLE r3 SET SCHEMA alt_other",
            "SELECT * FROM rv2",
            "SELECT * FROM alt_other.r3",
            "DROP VIEW rv2",
            "DROP TABLE alt_other.r3",
            "DROP SCHEMA alt_other",
            "CREATE TABLE ki (a int PRIMARY KEY, b int UNIQUE)",
            "ALTER INDEX ki_pkey RENAME TO ki_pk2",
            "ALTER INDEX ki_b_key RENAME TO ki_pk2",
            "ALTER INDEX nosuch RENAME TO x",
            "ALTER INDEX IF EXISTS nosuch RENAME TO x",
            "SELECT conname FROM pg_constraint WHERE conrelid = 'ki'::regclass ORDER BY 1",
        ]
    )


def test_view_columns_and_owner(both: Any) -> None:
    both(
        [
            "CREATE TABLE t (a int, b text)",
            "INSERT INTO t VALUES (1, 'x')",
            "CREATE VIEW v AS SELECT * FROM t",
            "CREATE VIEW w AS SELECT a, b FROM v WHERE a > 0",
            "ALTER VIEW v RENAME COLUMN a TO aa",
            "ALTER TABLE v RENAME COLUMN b TO bb",
            "SELECT * FROM v",
            "SELECT * FROM w",
            "SELECT pg_get_viewdef('v'), pg_get_viewdef('w')",
            "ALTER VIEW v RENAME COLUMN zz TO y",
            "ALTER VIEW v RENAME COLUMN aa TO bb",
            "ALTER TABLE t OWNER TO nosuch",
            "ALTER TABLE t OWNER TO CURRENT_USER",
            "ALTER VIEW v OWNER TO headwater",
            "SELECT tableowner FROM pg_tables WHERE tablename = 't' "
            "AND schemaname = current_schema()",
        ]
    )


def test_tuning_accepted(both: Any) -> None:
    both(
        [
            "CREATE TABLE t (a int PRIMARY KEY, b text)",
            "ALTER TABLE t ALTER COLUMN b SET STATISTICS 100",
            "ALTER TABLE t ALTER COLUMN zz SET STATISTICS 100",
            "ALTER TABLE t ALTER COLUMN b SET STORAGE EXTERNAL",
            "ALTER TABLE t SET (fillfactor = 70)",
            "ALTER TABLE t RESET (fillfactor)",
            "ALTER TABLE t CLUSTER ON t_pkey",
            "ALTER TABLE t CLUSTER ON nope",
            "ALTER TABLE t SET WITHOUT CLUSTER",
            "ALTER TABLE t SET UNLOGGED",
            "ALTER TABLE t SET LOGGED",
            "ALTER TABLE t REPLICA IDENTITY FULL",
        ]
    )


def test_transaction_and_several_actions(both: Any) -> None:
    both(
        [
            "CREATE TABLE t (a int, b text)",
            "INSERT INTO t VALUES (1, 'x')",
            "BEGIN",
            "INSERT INTO t VALUES (2, 'y')",
            "ALTER TABLE t ADD COLUMN c int DEFAULT 3, ALTER COLUMN b SET NOT NULL, "
            "ADD CONSTRAINT ck CHECK (c > 0)",
            "INSERT INTO t VALUES (3, 'z', 4)",
            "UPDATE t SET c = c + 1 WHERE a = 1",
            "COMMIT",
            "SELECT * FROM t ORDER BY a",
            "BEGIN",
            "ALTER TABLE t DROP COLUMN c",
            "ROLLBACK",
            "SELECT * FROM t ORDER BY a",
        ]
    )


def test_comments(both: Any) -> None:
    both(
        [
            "CREATE TABLE t (a int, b text)",
            "CREATE VIEW v AS SELECT a FROM t",
            "CREATE INDEX t_a_idx ON t (a)",
            "COMMENT ON TABLE t IS 'the table'",
            "COMMENT ON COLUMN t.a IS 'column a'",
            "COMMENT ON VIEW v IS 'a view'",
            "COMMENT ON INDEX t_a_idx IS 'an index'",
            "COMMENT ON TABLE v IS 'x'",
            "COMMENT ON VIEW t IS 'x'",
            "COMMENT ON TABLE nosuch IS 'x'",
            "COMMENT ON COLUMN t.zz IS 'x'",
            "SELECT obj_description('t'::regclass), obj_description('t'::regclass, 'pg_class'), "
            "col_description('t'::regclass, 1), col_description('t'::regclass, 2), "
            "obj_description('v'::regclass, 'pg_class'), obj_description('t_a_idx'::regclass)",
            "ALTER TABLE t RENAME COLUMN a TO aa",
            "ALTER TABLE t RENAME TO t2",
            "SELECT col_description('t2'::regclass, 1), obj_description('t2'::regclass)",
            "COMMENT ON TABLE t2 IS NULL",
            "COMMENT ON COLUMN t2.aa IS ''",
            "SELECT obj_description('t2'::regclass), col_description('t2'::regclass, 1)",
            "SELECT count(*) FROM pg_description WHERE objoid = 't2'::regclass",
        ]
    )


def test_comments_on_sequences_domains_and_procedures(both: Any) -> None:
    both(
        [
            "CREATE SEQUENCE cs",
            "CREATE DOMAIN cd AS int CHECK (VALUE > 0)",
            "CREATE PROCEDURE cp() LANGUAGE sql AS 'SELECT 1'",
            "CREATE FUNCTION cf() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "COMMENT ON SEQUENCE cs IS 'a sequence'",
            "COMMENT ON DOMAIN cd IS 'a domain'",
            "COMMENT ON PROCEDURE cp() IS 'a procedure'",
            "COMMENT ON ROUTINE cf() IS 'a routine'",
            "COMMENT ON SEQUENCE cd IS 'x'",
            "COMMENT ON DOMAIN nosuch IS 'x'",
            "SELECT obj_description('cs'::regclass, 'pg_class'),"
            " obj_description('cd'::regtype, 'pg_type')",
            "SELECT p.proname, d.description FROM pg_proc p JOIN pg_description d"
            " ON d.objoid = p.oid WHERE p.proname IN ('cp', 'cf') ORDER BY 1",
        ]
    )


def test_comment_on_schema(both: Any) -> None:
    both(
        [
            "CREATE SCHEMA alt_commented",
            "COMMENT ON SCHEMA alt_commented IS 'a schema'",
            "COMMENT ON SCHEMA nosuch IS 'x'",
            "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace "
            "WHERE nspname = 'alt_commented'",
            "DROP SCHEMA alt_commented",
        ]
    )


PSQL_SETUP = """
DROP SCHEMA IF EXISTS altpsql CASCADE;
CREATE SCHEMA altpsql;
SET search_path = altpsql;
CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int CHECK (qty >= 0));
ALTER TABLE items ADD COLUMN price numeric(8,2) DEFAULT 0;
ALTER TABLE items ADD CONSTRAINT price_pos CHECK (price >= 0 AND price < 1000000);
ALTER TABLE items RENAME COLUMN name TO title;
COMMENT ON TABLE items IS 'what we sell';
COMMENT ON COLUMN items.title IS 'shown to customers';
CREATE VIEW cheap AS SELECT id, title FROM items WHERE price < 10;
COMMENT ON VIEW cheap IS 'under ten';
"""

PSQL_SCRIPT = """
SET search_path = altpsql;
\\d+ items
\\d+ cheap
"""
LIST_SCRIPT = "\\dt+ altpsql.*\n\\dv+ altpsql.*\n"


def _cells(text: str) -> list[list[str]]:
    """The rows of psql's tables, cell by cell, without the Size column (PostgreSQL's
    pages, Headwater's 0 bytes) and so without the widths it sets."""
    rows = []
    for line in text.splitlines():
        if "|" in line:
            cells = [c.strip() for c in line.split("|")]
            rows.append(cells[:6] + cells[7:])
    return rows


def test_psql_describe(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    if shutil.which("psql") is None:
        pytest.skip("psql is not installed")
    for host, port in ((hw_server.host, hw_server.port), (pg_oracle.host, pg_oracle.port)):
        run_psql(host, port, PSQL_SETUP, quiet=True)
    got = run_psql(hw_server.host, hw_server.port, PSQL_SCRIPT)
    want = run_psql(pg_oracle.host, pg_oracle.port, PSQL_SCRIPT)
    assert "Check constraints:" in want and "shown to customers" in want
    assert got == want
    got = run_psql(hw_server.host, hw_server.port, LIST_SCRIPT)
    want = run_psql(pg_oracle.host, pg_oracle.port, LIST_SCRIPT)
    assert "what we sell" in want and "under ten" in want
    assert _cells(got) == _cells(want)


# -- durability ------------------------------------------------------------------------------
def test_alter_survives_sigkill() -> None:
    """Every epoch before an ALTER holds rows in the table's old shape; after SIGKILL
    the replica is rebuilt from the log and shows exactly what it showed before, at
    the current epoch and at older ones (AS OF)."""
    root = Path(tempfile.mkdtemp(prefix="headwater-alter-"))
    server = HeadwaterServer(root / "data").start()
    statements = [
        "CREATE TABLE d (id int PRIMARY KEY, a int, b text)",
        "INSERT INTO d VALUES (1, 10, 'one')",
        "INSERT INTO d VALUES (2, 20, 'two')",
        "CREATE UNIQUE INDEX d_lower_b ON d (lower(b)) WHERE id < 100",
        "UPDATE d SET a = 11 WHERE id = 1",
        "ALTER TABLE d ADD COLUMN c numeric(6,2) DEFAULT 1.5",
        "INSERT INTO d VALUES (3, 30, 'three', 3.25)",
        "ALTER TABLE d RENAME COLUMN b TO bb",
        "DELETE FROM d WHERE id = 2",
        "ALTER TABLE d DROP COLUMN a",
        "ALTER TABLE d ALTER COLUMN c TYPE text",
        "ALTER TABLE d ADD CONSTRAINT short CHECK (length(c) < 10)",
        "COMMENT ON COLUMN d.bb IS 'name'",
        "BEGIN",
        "INSERT INTO d VALUES (4, 'four', 'x')",
        "ALTER TABLE d ADD COLUMN e int DEFAULT 9",
        "INSERT INTO d VALUES (5, 'five', 'y', 55)",
        "COMMIT",
        "ALTER TABLE d RENAME TO dd",
        "INSERT INTO dd VALUES (6, 'six', 'z', 66)",
    ]
    checks = [
        "SELECT * FROM dd ORDER BY id",
        "SELECT col_description('dd'::regclass, 2)",
        "SELECT conname FROM pg_constraint WHERE conrelid = 'dd'::regclass ORDER BY 1",
    ]
    try:
        epoch_sql = "SELECT max(epoch) FROM headwater_catalog.epochs"
        with psycopg.connect(server.dsn, autocommit=True) as c:
            first = 0
            for sql in statements:
                c.execute(sql)
                first = first or c.execute(epoch_sql).fetchone()[0]
            before = [c.execute(q).fetchall() for q in checks]
            epoch = c.execute(epoch_sql).fetchone()[0]
            history = [
                sorted(c.execute(f"SELECT * FROM dd AS OF EPOCH {e}").fetchall())
                for e in range(first, epoch + 1)
            ]
        server.kill()
        server.start()
        with psycopg.connect(server.dsn, autocommit=True) as c:
            assert [c.execute(q).fetchall() for q in checks] == before
            assert before[0] == [
                (1, "one", "1.50", 9),
                (3, "three", "3.25", 9),
                (4, "four", "x", 9),
                (5, "five", "y", 55),
                (6, "six", "z", 66),
            ]
            after = [
                sorted(c.execute(f"SELECT * FROM dd AS OF EPOCH {e}").fetchall())
                for e in range(first, epoch + 1)
            ]
            assert after == history
            c.execute("INSERT INTO dd VALUES (7, 'seven', 'w', 77)")
            with pytest.raises(psycopg.errors.CheckViolation):
                c.execute("INSERT INTO dd VALUES (8, 'eight', 'much too long', 88)")
            assert len(c.execute("SELECT * FROM dd").fetchall()) == 6
            with pytest.raises(psycopg.errors.UniqueViolation, match="d_lower_b"):
                c.execute("INSERT INTO dd VALUES (9, 'ONE', 'v', 1)")  # (b renamed bb)
            c.execute("INSERT INTO dd VALUES (109, 'ONE', 'v', 1)")  # (outside its WHERE)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_matview_over_altered_table(hw_server: HeadwaterServer, table_name: str) -> None:
    """ADD COLUMN (and a rename) on a table under an aggregate view: the view is rebuilt
    from the new shape and stays exact under further writes."""
    t = table_name
    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        c.execute("SET headwater.freshness_timeout = '600s'")  # Spark starts slowly when loaded
        c.execute(f"CREATE TABLE {t} (k int, v int)")
        c.execute(f"INSERT INTO {t} VALUES (1, 10), (2, 20), (1, 5)")
        c.execute(
            f"CREATE MATERIALIZED VIEW {t}_mv AS "
            f"SELECT k, sum(v) AS s, count(*) AS n FROM {t} GROUP BY k"
        )
        expected = f"SELECT k, sum(v) AS s, count(*) AS n FROM {t} GROUP BY k ORDER BY k"
        view = f"SELECT * FROM {t}_mv ORDER BY k"
        assert c.execute(view).fetchall() == c.execute(expected).fetchall()
        c.execute(f"ALTER TABLE {t} ADD COLUMN w int DEFAULT 100")
        for i in range(5):
            c.execute(f"INSERT INTO {t} VALUES ({i % 3}, {i}, {i * 7})")
            c.execute(f"UPDATE {t} SET v = v + 1 WHERE k = {i % 2}")
            assert c.execute(view).fetchall() == c.execute(expected).fetchall()
        c.execute(f"ALTER TABLE {t} RENAME COLUMN v TO vv")
        c.execute(f"INSERT INTO {t} VALUES (4, 40, 0)")
        expected = expected.replace("sum(v)", "sum(vv)")
        assert c.execute(view).fetchall() == c.execute(expected).fetchall()
        with pytest.raises(psycopg.errors.DependentObjectsStillExist):
            c.execute(f"ALTER TABLE {t} DROP COLUMN vv")
        c.execute(f"ALTER TABLE {t} DROP COLUMN w")
        c.execute(f"DELETE FROM {t} WHERE k = 1")
        assert c.execute(view).fetchall() == c.execute(expected).fetchall()


def test_matview_over_altered_table_survives_sigkill() -> None:
    """A view rebuilt after an ALTER, then SIGKILL: recovery replays the rewritten
    log and the view goes on exactly."""
    root = Path(tempfile.mkdtemp(prefix="headwater-alter-mv-"))
    server = HeadwaterServer(root / "data").start()
    expected = "SELECT k, sum(v) AS s, count(*) AS n FROM mk GROUP BY k ORDER BY k"
    view = "SELECT * FROM mkv ORDER BY k"
    try:
        with psycopg.connect(server.dsn, autocommit=True) as c:
            c.execute("SET headwater.freshness_timeout = '600s'")
            c.execute("CREATE TABLE mk (k int, v int)")
            c.execute("INSERT INTO mk VALUES (1, 10), (2, 20), (1, 5)")
            c.execute(
                "CREATE MATERIALIZED VIEW mkv AS "
                "SELECT k, sum(v) AS s, count(*) AS n FROM mk GROUP BY k"
            )
            c.execute("ALTER TABLE mk ADD COLUMN w int DEFAULT 100")
            c.execute("INSERT INTO mk VALUES (1, 1, 7), (3, 3, 8)")
            assert c.execute(view).fetchall() == c.execute(expected).fetchall()
        server.kill()
        server.start()
        with psycopg.connect(server.dsn, autocommit=True) as c:
            c.execute("SET headwater.freshness_timeout = '600s'")
            assert c.execute(view).fetchall() == c.execute(expected).fetchall()
            assert c.execute("SELECT sum(w) FROM mk").fetchone()[0] == 315
            c.execute("INSERT INTO mk VALUES (2, 2, 2)")
            c.execute("UPDATE mk SET v = v * 2 WHERE k = 1")
            assert c.execute(view).fetchall() == c.execute(expected).fetchall()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_add_serial_and_identity_column(both: Any) -> None:
    both(
        [
            "CREATE TABLE t (a text)",
            "INSERT INTO t VALUES ('x'), ('y'), ('z')",
            "UPDATE t SET a = 'yy' WHERE a = 'y'",
            "ALTER TABLE t ADD COLUMN id serial",
            "SELECT * FROM t ORDER BY id",
            "INSERT INTO t (a) VALUES ('w')",
            "SELECT * FROM t ORDER BY id",
            "ALTER TABLE t ADD COLUMN big bigserial PRIMARY KEY",
            "ALTER TABLE t ADD COLUMN ident int GENERATED ALWAYS AS IDENTITY",
            "ALTER TABLE t ADD COLUMN byd bigint GENERATED BY DEFAULT AS IDENTITY (START 100)",
            "INSERT INTO t (a) VALUES ('v')",
            "SELECT * FROM t ORDER BY id",
            "INSERT INTO t (a, ident) VALUES ('u', 5)",
            "ALTER TABLE t ADD COLUMN s2 serial DEFAULT 3",
            "SELECT column_name, column_default, is_nullable, is_identity"
            " FROM information_schema.columns WHERE table_name = 't'"
            " AND table_schema = current_schema() ORDER BY ordinal_position",
            "SELECT relname FROM pg_class WHERE relkind = 'S'"
            " AND relnamespace = current_schema()::regnamespace ORDER BY 1",
            "ALTER TABLE t DROP COLUMN id",
            "SELECT relname FROM pg_class WHERE relkind = 'S'"
            " AND relnamespace = current_schema()::regnamespace ORDER BY 1",
        ]
    )
