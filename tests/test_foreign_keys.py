"""FOREIGN KEY constraints against PostgreSQL 15: the same statements on both, with the
same results, command tags, notices and errors (SQLSTATE, message, detail, hint) — on
INSERT, UPDATE, DELETE, COPY and TRUNCATE, the ON DELETE / ON UPDATE actions, ALTER
TABLE ADD / DROP / VALIDATE CONSTRAINT, DROP TABLE, renames, and the catalog rows
(pg_constraint, pg_get_constraintdef, information_schema) tools reflect.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import script_comparer


@pytest.fixture(scope="module")
def both(hw_server: HeadwaterServer, pg_oracle: Any) -> Iterator[Any]:
    with script_comparer(hw_server.dsn, pg_oracle.dsn, "fk") as compare:
        yield compare


def test_insert_update_delete(both: Any) -> None:
    both(
        [
            "CREATE TABLE parent (id int PRIMARY KEY, name text)",
            "CREATE TABLE child (id int PRIMARY KEY, pid int REFERENCES parent, note text)",
            "INSERT INTO parent VALUES (1, 'a'), (2, 'b')",
            "INSERT INTO child VALUES (10, 1, 'x'), (11, NULL, 'null key passes')",
            "INSERT INTO child VALUES (12, 3, 'no parent')",
            "INSERT INTO child VALUES (13, 2, 'ok'), (14, 7, 'no parent')",
            "UPDATE child SET pid = 9 WHERE id = 10",
            "UPDATE child SET pid = 2 WHERE id = 10",
            "DELETE FROM parent WHERE id = 2",
            "UPDATE parent SET id = 5 WHERE id = 2",
            "UPDATE parent SET name = 'bb' WHERE id = 2",
            "DELETE FROM parent WHERE id = 1",
            "SELECT * FROM parent ORDER BY id",
            "SELECT * FROM child ORDER BY id",
            "DELETE FROM child WHERE pid = 2",
            "DELETE FROM parent",
            "SELECT count(*) FROM parent",
            "COPY child (id, pid, note) FROM STDIN\n20\t\\N\tnull\n21\t4\tbad\n",
            "SELECT count(*) FROM child",
        ]
    )


def test_actions(both: Any) -> None:
    both(
        [
            "CREATE TABLE p (id int PRIMARY KEY, code text UNIQUE)",
            "CREATE TABLE c1 (id int, pid int REFERENCES p ON DELETE CASCADE ON UPDATE CASCADE)",
            "CREATE TABLE c2 (id int, pid int REFERENCES p (id) ON DELETE SET NULL)",
            "CREATE TABLE c3 (id int, code text, FOREIGN KEY (code) REFERENCES p (code)"
            " ON DELETE RESTRICT ON UPDATE CASCADE)",
            "CREATE TABLE gc (id int, c1 int)",
            "INSERT INTO p VALUES (1, 'a'), (2, 'b'), (3, 'c')",
            "INSERT INTO c1 VALUES (1, 1), (2, 2), (3, 2)",
            "INSERT INTO c2 VALUES (1, 1), (2, 3)",
            "INSERT INTO c3 VALUES (1, 'c')",
            "DELETE FROM p WHERE id = 1",
            "SELECT * FROM c1 ORDER BY id",
            "SELECT * FROM c2 ORDER BY id",
            "UPDATE p SET id = 20 WHERE id = 2",
            "SELECT * FROM c1 ORDER BY id",
            "UPDATE p SET code = 'cc' WHERE id = 3",
            "SELECT * FROM c3 ORDER BY id",
            "DELETE FROM p WHERE id = 3",
            "DELETE FROM c3",
            "DELETE FROM p WHERE id = 3",
            "SELECT * FROM c2 ORDER BY id",
            "SELECT * FROM p ORDER BY id",
        ]
    )


def test_self_reference_and_multi_column(both: Any) -> None:
    both(
        [
            "CREATE TABLE emp (id int PRIMARY KEY, boss int REFERENCES emp ON DELETE CASCADE)",
            "INSERT INTO emp VALUES (1, NULL), (2, 1), (3, 2)",
            "INSERT INTO emp VALUES (4, 5), (5, 4)",
            "INSERT INTO emp VALUES (6, 9)",
            "DELETE FROM emp WHERE id = 1",
            "SELECT count(*) FROM emp",
            "CREATE TABLE k (a int, b int, PRIMARY KEY (a, b))",
            "CREATE TABLE r (x int, y int, FOREIGN KEY (x, y) REFERENCES k)",
            "CREATE TABLE rf (x int, y int, FOREIGN KEY (x, y) REFERENCES k MATCH FULL)",
            "INSERT INTO k VALUES (1, 2)",
            "INSERT INTO r VALUES (1, 2), (1, NULL), (NULL, 9)",
            "INSERT INTO r VALUES (1, 3)",
            "INSERT INTO rf VALUES (1, NULL)",
            "INSERT INTO rf VALUES (NULL, NULL), (1, 2)",
            "DELETE FROM k",
        ]
    )


def test_ddl_errors_and_names(both: Any) -> None:
    both(
        [
            "CREATE TABLE p (id int PRIMARY KEY, u int UNIQUE, v int)",
            "CREATE TABLE c (a int REFERENCES nosuch)",
            "CREATE TABLE c (a int REFERENCES p (v))",
            "CREATE TABLE c (a int, b int, FOREIGN KEY (a, b) REFERENCES p (id))",
            "CREATE TABLE c (a int, FOREIGN KEY (zz) REFERENCES p)",
            "CREATE TABLE c (a int REFERENCES p (zz))",
            "CREATE TABLE c (a text REFERENCES p)",
            "CREATE TABLE np (id int)",
            "CREATE TABLE c (a int REFERENCES np)",
            "CREATE TABLE c (a int REFERENCES p, b int REFERENCES p (u), a2 bigint REFERENCES p,"
            " CONSTRAINT named FOREIGN KEY (b) REFERENCES p (u))",
            "CREATE TABLE c2 (a int REFERENCES p)",
            "SELECT conname, contype, confupdtype, confdeltype, confmatchtype, conkey, confkey,"
            " confrelid::regclass::text, pg_get_constraintdef(oid),"
            " pg_get_constraintdef(oid, true)"
            " FROM pg_constraint WHERE conrelid IN ('c'::regclass, 'c2'::regclass)"
            " ORDER BY conname",
            "INSERT INTO c VALUES (1, 1, 1)",
            "ALTER TABLE c DROP CONSTRAINT c_a_fkey",
            "ALTER TABLE c DROP CONSTRAINT c_a_fkey",
            "INSERT INTO c VALUES (1, NULL, NULL)",
            "SELECT count(*) FROM c",
        ]
    )


def test_alter_table(both: Any) -> None:
    both(
        [
            "CREATE TABLE p (id int PRIMARY KEY)",
            "CREATE TABLE c (id int, pid int)",
            "INSERT INTO p VALUES (1)",
            "INSERT INTO c VALUES (1, 1), (2, 2)",
            "ALTER TABLE c ADD CONSTRAINT c_p FOREIGN KEY (pid) REFERENCES p (id)",
            "ALTER TABLE c ADD FOREIGN KEY (pid) REFERENCES p NOT VALID",
            "INSERT INTO c VALUES (3, 3)",
            "ALTER TABLE c VALIDATE CONSTRAINT c_pid_fkey",
            "DELETE FROM c WHERE id = 2",
            "ALTER TABLE c VALIDATE CONSTRAINT c_pid_fkey",
            "ALTER TABLE c ADD FOREIGN KEY (pid) REFERENCES p",
            "ALTER TABLE c ADD COLUMN q int REFERENCES p ON DELETE SET NULL",
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = 'c'::regclass ORDER BY conname",
            "ALTER TABLE c RENAME CONSTRAINT c_pid_fkey1 TO second",
            "ALTER TABLE p RENAME COLUMN id TO ident",
            "ALTER TABLE c RENAME COLUMN pid TO parent_id",
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = 'c'::regclass ORDER BY conname",
            "INSERT INTO c VALUES (4, 4)",
            "ALTER TABLE p DROP CONSTRAINT p_pkey",
            "DROP TABLE p",
            "TRUNCATE p",
            "TRUNCATE p CASCADE",
            "SELECT count(*) FROM c",
            "DROP TABLE p CASCADE",
            "SELECT conname FROM pg_constraint WHERE conrelid = 'c'::regclass ORDER BY conname",
            "INSERT INTO c VALUES (5, 5, 5)",
        ]
    )


def test_drop_together_and_in_transaction(both: Any) -> None:
    both(
        [
            "CREATE TABLE p (id int PRIMARY KEY)",
            "CREATE TABLE c (pid int REFERENCES p)",
            "BEGIN",
            "INSERT INTO p VALUES (1)",
            "INSERT INTO c VALUES (1)",
            "COMMIT",
            "BEGIN",
            "INSERT INTO c VALUES (2)",
            "ROLLBACK",
            "SELECT * FROM c",
            "DROP TABLE p, c",
        ]
    )


def test_information_schema(both: Any) -> None:
    both(
        [
            "CREATE TABLE p (id int PRIMARY KEY, code text UNIQUE)",
            "CREATE TABLE c (id serial PRIMARY KEY, pid int NOT NULL REFERENCES p,"
            " code text REFERENCES p (code) ON UPDATE CASCADE ON DELETE SET NULL)",
            "SELECT constraint_name, table_name, constraint_type FROM"
            " information_schema.table_constraints WHERE table_schema = current_schema()"
            " AND constraint_type <> 'CHECK' ORDER BY 1",
            "SELECT constraint_name, unique_constraint_name, match_option, update_rule,"
            " delete_rule FROM information_schema.referential_constraints"
            " WHERE constraint_schema = current_schema() ORDER BY 1",
            "SELECT constraint_name, table_name, column_name, ordinal_position,"
            " position_in_unique_constraint FROM information_schema.key_column_usage"
            " WHERE table_schema = current_schema() ORDER BY 1, 4",
            "SELECT constraint_name, table_name, column_name FROM"
            " information_schema.constraint_column_usage WHERE constraint_schema ="
            " current_schema() ORDER BY 1, 3",
        ]
    )


def test_more_shapes(both: Any) -> None:
    both(
        [
            "CREATE TABLE k (a int, b text, PRIMARY KEY (a, b))",
            "CREATE TABLE r (id int PRIMARY KEY, x int, y text,"
            " FOREIGN KEY (x, y) REFERENCES k ON UPDATE CASCADE ON DELETE SET NULL)",
            "INSERT INTO k VALUES (1, 'a'), (2, 'b')",
            "INSERT INTO r VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 1, 'a')",
            "UPDATE k SET a = a + 10",
            "SELECT * FROM r ORDER BY id",
            "DELETE FROM k WHERE b = 'a'",
            "SELECT * FROM r ORDER BY id",
            "INSERT INTO r VALUES (2, 12, 'b') ON CONFLICT (id) DO UPDATE SET y = 'zz'",
            "INSERT INTO r VALUES (2, 12, 'b') ON CONFLICT (id) DO UPDATE SET x = 12, y = 'b'",
            "INSERT INTO r VALUES (4, 99, 'q') ON CONFLICT DO NOTHING",
            "CREATE TABLE tree (id int PRIMARY KEY, up int REFERENCES tree ON UPDATE CASCADE)",
            "INSERT INTO tree VALUES (1, NULL), (2, 1), (3, 1), (4, 2)",
            "UPDATE tree SET id = 100 WHERE id = 1",
            "SELECT * FROM tree ORDER BY id",
            "DELETE FROM tree WHERE id = 2",
            "CREATE SCHEMA IF NOT EXISTS fk_other",
            "CREATE TABLE fk_other.p (id int PRIMARY KEY)",
            "CREATE TABLE c (pid int REFERENCES fk_other.p)",
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = 'c'::regclass",
            "DROP SCHEMA fk_other",
            "DROP SCHEMA fk_other CASCADE",
            "SELECT count(*) FROM pg_constraint WHERE conrelid = 'c'::regclass",
            "CREATE TABLE n (id int PRIMARY KEY)",
            "CREATE TABLE m (nid int NOT NULL REFERENCES n ON DELETE SET NULL)",
            "INSERT INTO n VALUES (1)",
            "INSERT INTO m VALUES (1)",
            "DELETE FROM n",
            "CREATE TABLE long_table_name_to_see_how_postgres_truncates_constraint_names"
            " (id int PRIMARY KEY, another_rather_long_column_name_for_the_key int"
            " REFERENCES n, second int REFERENCES n, third int REFERENCES n)",
            "SELECT conname FROM pg_constraint WHERE conrelid ="
            " 'long_table_name_to_see_how_postgres_truncates_constraint_names'::regclass"
            " ORDER BY conname",
            "CREATE TABLE dup (a int REFERENCES n, CONSTRAINT dup_a_fkey CHECK (a > 0))",
            "CREATE TABLE dup2 (a int, b int REFERENCES n, CONSTRAINT dup2_a_fkey CHECK (a > 0),"
            " FOREIGN KEY (a) REFERENCES n)",
            "SELECT conname FROM pg_constraint WHERE conrelid = 'dup2'::regclass ORDER BY 1",
        ]
    )


def test_fast_paths(both: Any) -> None:
    """INSERTs and point UPDATEs of a FOREIGN KEY's columns through the batcher
    (server/fast_refs.py): autocommitted and in blocks (a parent and its child in one
    block, savepoints, a failing child), two FOREIGN KEYs (integer and varchar/text,
    one to a UNIQUE key), RETURNING; point DELETEs of referenced rows and of rows
    nothing references (CASCADE, SET NULL, NO ACTION; in blocks)."""
    both(
        [
            "CREATE TABLE fp (id int PRIMARY KEY, code varchar(5) UNIQUE)",
            "CREATE TABLE fc (id int PRIMARY KEY, pid bigint REFERENCES fp,"
            " code text REFERENCES fp (code), n int)",
            "INSERT INTO fp VALUES (1, 'a'), (2, 'b')",
            "INSERT INTO fc VALUES (1, 1, 'a', 0), (2, 2, NULL, 0)",
            "INSERT INTO fc VALUES (3, 9, 'zz', 0)",  # both fail: the first one's error
            "INSERT INTO fc VALUES (3, 1, 'zz', 0)",
            "INSERT INTO fc VALUES (3, 1, 'b', 0), (4, 5, 'b', 0)",
            "UPDATE fc SET pid = 2, n = n + 1 WHERE id = 1",
            "UPDATE fc SET code = 'q' WHERE id = 1",
            "UPDATE fc SET code = 'q' WHERE id = 99",
            "UPDATE fc SET n = n + 1 WHERE id = 2",
            "UPDATE fc SET pid = NULL, code = 'b' WHERE id = 2 RETURNING *",
            "BEGIN",
            "INSERT INTO fp VALUES (3, 'c')",
            "UPDATE fc SET pid = 3, code = 'c' WHERE id = 2",  # a parent the block staged
            "INSERT INTO fc VALUES (4, 3, 'c', 0)",
            "INSERT INTO fc VALUES (5, 4, NULL, 0)",
            "COMMIT",
            "SELECT * FROM fc ORDER BY id",
            "BEGIN",
            "SAVEPOINT s",
            "UPDATE fc SET pid = 8 WHERE id = 1",
            "ROLLBACK TO SAVEPOINT s",
            "INSERT INTO fp VALUES (3, 'c')",
            "UPDATE fc SET pid = 3, code = 'c' WHERE id = 2",
            "INSERT INTO fc VALUES (4, 3, 'c', 0), (5, NULL, 'b', 0)",
            "COMMIT",
            "SELECT * FROM fc ORDER BY id",
            "DELETE FROM fp WHERE id = 3",
            "DELETE FROM fc WHERE id = 4",
            "UPDATE fc SET pid = 1 WHERE id = 2 RETURNING id, pid, code",
            "DELETE FROM fp WHERE id = 3",
            "SELECT * FROM fp ORDER BY id",
            "SELECT * FROM fc ORDER BY id",
            # DELETEs from a referenced table (server/ref_counts.py): a point write when
            # nothing references the row, else the general path and its action
            "CREATE TABLE gp (id int PRIMARY KEY, u text UNIQUE)",
            "CREATE TABLE gc1 (id int PRIMARY KEY, pid int REFERENCES gp ON DELETE CASCADE)",
            "CREATE TABLE gc2 (id int PRIMARY KEY, u text REFERENCES gp (u) ON DELETE SET NULL)",
            "CREATE TABLE gc3 (id int PRIMARY KEY, pid int REFERENCES gp)",
            "INSERT INTO gp SELECT g, chr(96 + g) FROM generate_series(1, 9) AS g",
            "INSERT INTO gc1 VALUES (1, 1)",
            "INSERT INTO gc2 VALUES (1, 'b')",
            "INSERT INTO gc3 VALUES (1, 3), (2, 6)",
            "DELETE FROM gp WHERE id = 5 RETURNING *",
            "DELETE FROM gp WHERE id IN (1)",
            "DELETE FROM gp WHERE id = 2",
            "DELETE FROM gp WHERE id = 3",
            "SELECT * FROM gc1",
            "SELECT * FROM gc2 ORDER BY id",
            "UPDATE gc3 SET pid = 4 WHERE id = 1",
            "DELETE FROM gp WHERE id = 3",
            "DELETE FROM gp WHERE id = 4",
            "BEGIN",
            "DELETE FROM gp WHERE id = 7",
            "INSERT INTO gc3 VALUES (3, 7)",
            "COMMIT",
            "BEGIN",
            "INSERT INTO gc3 VALUES (3, 8)",
            "DELETE FROM gp WHERE id = 8",
            "COMMIT",
            "BEGIN",
            "DELETE FROM gc3 WHERE id = 1",
            "DELETE FROM gp WHERE id = 4",
            "DELETE FROM gp WHERE id = 9",
            "COMMIT",
            "DELETE FROM gc3 WHERE id = 2",
            "DELETE FROM gp WHERE id = 6",
            "SELECT * FROM gp ORDER BY id",
            "SELECT * FROM gc3 ORDER BY id",
        ]
    )


def test_children_racing_a_parent_delete(hw_server: HeadwaterServer) -> None:
    """Children inserted while their parent is deleted, all starting at once (both
    through the batcher while no child is in; NO ACTION): either the DELETE fails or
    the INSERTs do; no child outlives its parent."""
    import threading

    with psycopg.connect(hw_server.dsn, autocommit=True) as c:
        c.execute("CREATE TABLE race_p (id int PRIMARY KEY)")
        c.execute("CREATE TABLE race_c (id int PRIMARY KEY, pid int REFERENCES race_p)")
        conns = [psycopg.connect(hw_server.dsn, autocommit=True) for _ in range(4)]
        try:
            for rnd in range(10):
                c.execute("INSERT INTO race_p VALUES (%s)", (rnd,))
                go = threading.Barrier(len(conns) + 1)
                stop = threading.Event()

                def children(k: int, rnd: int = rnd, go: Any = go, stop: Any = stop) -> None:
                    go.wait()
                    for i in range(200):
                        if stop.is_set() and i > 5:
                            return
                        try:
                            conns[k].execute(
                                "INSERT INTO race_c VALUES (%s, %s)",
                                (rnd * 10**6 + k * 10**4 + i, rnd),
                            )
                        except psycopg.errors.ForeignKeyViolation:
                            return

                threads = [threading.Thread(target=children, args=(k,)) for k in range(4)]
                for t in threads:
                    t.start()
                go.wait()
                try:
                    c.execute("DELETE FROM race_p WHERE id = %s", (rnd,))
                except psycopg.errors.ForeignKeyViolation:
                    pass
                stop.set()
                for t in threads:
                    t.join()
                orphans = c.execute(
                    "SELECT count(*) FROM race_c WHERE pid NOT IN (SELECT id FROM race_p)"
                ).fetchone()
                assert orphans == (0,), rnd
        finally:
            for k in conns:
                k.close()


def test_temporary_tables(both: Any) -> None:
    both(
        [
            "CREATE TABLE perm (id int PRIMARY KEY)",
            "CREATE TEMP TABLE tmp_p (id int PRIMARY KEY)",
            "CREATE TABLE perm_c (pid int REFERENCES tmp_p)",
            "CREATE TEMP TABLE tmp_c (pid int REFERENCES perm)",
            "CREATE TEMP TABLE tmp_c (pid int REFERENCES tmp_p ON DELETE CASCADE)",
            "INSERT INTO tmp_p VALUES (1)",
            "INSERT INTO tmp_c VALUES (1), (1)",
            "INSERT INTO tmp_c VALUES (2)",
            "DELETE FROM tmp_p",
            "SELECT count(*) FROM tmp_c",
            "DROP TABLE tmp_c, tmp_p",
        ]
    )


def test_catalog_round_trip() -> None:
    """A table's foreign keys survive the catalog's JSON (what restart reads)."""
    from headwater.catalog.objects import ForeignKey, Table, from_json, to_json

    t = Table(
        20000,
        "public",
        "c",
        (),
        foreign_keys=(ForeignKey("c_a_fkey", ("a", "b"), 19999, ("x", "y"), "c", "n", "f"),),
    )
    assert from_json(to_json(t)) == t


def test_survives_sigkill(tmp_path: Any) -> None:
    """Foreign keys are catalog state: after SIGKILL they are still there and enforced,
    and a cascade's deletions were made durable with the statement."""
    server = HeadwaterServer(tmp_path / "data").start()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as c:
            c.execute("CREATE TABLE p (id int PRIMARY KEY)")
            c.execute("CREATE TABLE c (id int, pid int REFERENCES p ON DELETE CASCADE)")
            c.execute("INSERT INTO p VALUES (1), (2)")
            c.execute("INSERT INTO c VALUES (1, 1), (2, 2), (3, 2)")
            c.execute("DELETE FROM p WHERE id = 2")
        server.kill()
        server.start()
        with psycopg.connect(server.dsn, autocommit=True) as c:
            assert c.execute("SELECT * FROM c ORDER BY id").fetchall() == [(1, 1)]
            with pytest.raises(psycopg.errors.ForeignKeyViolation):
                c.execute("INSERT INTO c VALUES (4, 3)")
            c.execute("DELETE FROM p")
            assert c.execute("SELECT count(*) FROM c").fetchone() == (0,)
            defs = c.execute(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'f'"
            ).fetchall()
            assert defs == [("FOREIGN KEY (pid) REFERENCES p(id) ON DELETE CASCADE",)]
    finally:
        server.stop()
