"""Sequences, serial and identity columns against PostgreSQL 15: the same rows, notices
and SQLSTATEs; and no value handed out twice across a SIGKILL.

Each script runs on one fresh connection to each server, in a schema of its own; every
statement's outcome (rows, or command tag, notices, or SQLSTATE and message) must be
identical.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import assert_same_as_postgres, psql_outputs

SCRIPTS: dict[str, list[str]] = {
    "basics": [
        "CREATE SEQUENCE s",
        "SELECT nextval('s')",
        "SELECT nextval('s'::regclass), currval('s')",
        "SELECT nextval('s') FROM generate_series(1, 3)",
        "SELECT currval('s'), lastval()",
        "SELECT * FROM s",
        "SELECT last_value, is_called FROM s",
        "SELECT setval('s', 100)",
        "SELECT nextval('s')",
        "SELECT setval('s', 5, false)",
        "SELECT currval('s')",
        "SELECT nextval('s')",
        "SELECT setval('s', 7, true), nextval('s')",
        "SELECT * FROM s",
        "SELECT nextval('public.nosuch')",
        "SELECT nextval('nosuch')",
        "CREATE TABLE t (a bigint, b text)",
        "INSERT INTO t VALUES (nextval('s'), 'v1'), (nextval('s'::regclass), 'v2')",
        "INSERT INTO t SELECT nextval('s'), 'g' || g FROM generate_series(1, 3) g",
        "INSERT INTO t VALUES (currval('s') * 10, 'c') RETURNING *",
        "SELECT * FROM t ORDER BY a",
        "UPDATE t SET a = nextval('s') WHERE b = 'c' RETURNING a",
        "SELECT nextval('s'::text)",
        "SELECT nextval(b) FROM t WHERE b = 'c'",
        "SELECT nextval('s') WHERE false",
        "SELECT lastval()",
    ],
    "not_yet_defined": [
        "CREATE SEQUENCE s",
        "SELECT currval('s')",
        "SELECT lastval()",
        "SELECT * FROM s",
        "SELECT currval('nosuch')",
        "CREATE TABLE t (a int)",
        "SELECT nextval('t')",
        "SELECT setval('s', 0)",
        "SELECT setval('s', 9223372036854775807)",
    ],
    "options": [
        "CREATE SEQUENCE a INCREMENT BY 5 START WITH 10",
        "SELECT nextval('a'), nextval('a'), nextval('a')",
        "CREATE SEQUENCE b INCREMENT -1",
        "SELECT nextval('b'), nextval('b')",
        "CREATE SEQUENCE c MINVALUE 1 MAXVALUE 3 CYCLE",
        "SELECT nextval('c') FROM generate_series(1, 7)",
        "CREATE SEQUENCE d MAXVALUE 2",
        "SELECT nextval('d')",
        "SELECT nextval('d')",
        "SELECT nextval('d')",
        "CREATE SEQUENCE e INCREMENT -2 MINVALUE -3 MAXVALUE 0",
        "SELECT nextval('e'), nextval('e')",
        "SELECT nextval('e')",
        "CREATE SEQUENCE f AS smallint",
        "SELECT setval('f', 32767)",
        "SELECT nextval('f')",
        "CREATE SEQUENCE g CACHE 10",
        "SELECT nextval('g'), nextval('g')",
        "SELECT last_value, is_called FROM g",
        "CREATE SEQUENCE h AS integer START 100 NO CYCLE",
        "SELECT nextval('h')",
        "SELECT seqtypid, seqstart, seqincrement, seqmax, seqmin, seqcache, seqcycle "
        "FROM pg_sequence WHERE seqrelid IN ('a'::regclass, 'b'::regclass, "
        "'f'::regclass, 'h'::regclass) ORDER BY seqstart",
    ],
    "option_errors": [
        "CREATE SEQUENCE x INCREMENT 0",
        "CREATE SEQUENCE x MINVALUE 5 MAXVALUE 5",
        "CREATE SEQUENCE x START 0",
        "CREATE SEQUENCE x MAXVALUE 10 START 11",
        "CREATE SEQUENCE x AS smallint MAXVALUE 100000",
        "CREATE SEQUENCE x AS integer MINVALUE -3000000000",
        "CREATE SEQUENCE x CACHE 0",
        "CREATE SEQUENCE x INCREMENT 1 INCREMENT 2",
        "CREATE SEQUENCE x AS text",
        "CREATE SEQUENCE x OWNED BY nosuch.col",
        "CREATE SEQUENCE x OWNED BY col",
    ],
    "create_drop": [
        "CREATE SEQUENCE s",
        "CREATE SEQUENCE s",
        "CREATE SEQUENCE IF NOT EXISTS s",
        "CREATE TABLE s (a int)",
        "CREATE TABLE t (a int)",
        "CREATE SEQUENCE t",
        "DROP SEQUENCE t",
        "DROP TABLE s",
        "DROP SEQUENCE nosuch",
        "DROP SEQUENCE IF EXISTS nosuch",
        "DROP SEQUENCE IF EXISTS s, nosuch",
        "SELECT nextval('s')",
        "SELECT count(*) FROM pg_class WHERE relkind = 'S' AND relname = 's'",
    ],
    "alter": [
        "CREATE SEQUENCE s",
        "SELECT nextval('s'), nextval('s')",
        "ALTER SEQUENCE s RESTART",
        "SELECT nextval('s')",
        "ALTER SEQUENCE s RESTART WITH 50",
        "SELECT * FROM s",
        "SELECT nextval('s')",
        "ALTER SEQUENCE s INCREMENT BY 10",
        "SELECT nextval('s'), currval('s')",
        "ALTER SEQUENCE s MAXVALUE 20",
        "ALTER SEQUENCE s MAXVALUE 100 CYCLE",
        "SELECT nextval('s'), nextval('s'), nextval('s'), nextval('s'), nextval('s')",
        "ALTER SEQUENCE s RESTART WITH 1000",
        "ALTER SEQUENCE nosuch RESTART",
        "ALTER SEQUENCE IF EXISTS nosuch RESTART",
        "CREATE TABLE t (a int)",
        "ALTER SEQUENCE t RESTART",
        "ALTER SEQUENCE s OWNED BY t.a",
        "ALTER SEQUENCE s OWNED BY t.nosuch",
        "ALTER SEQUENCE s OWNED BY NONE",
        "ALTER SEQUENCE s AS smallint",
        "CREATE SEQUENCE d INCREMENT -1",
        "ALTER SEQUENCE d AS integer",
        "SELECT seqmax, seqmin FROM pg_sequence WHERE seqrelid = 'd'::regclass",
        "CREATE SEQUENCE m AS smallint",
        "ALTER SEQUENCE m AS bigint",
        "SELECT seqmax, seqmin FROM pg_sequence WHERE seqrelid = 'm'::regclass",
        "SELECT seqtypid::regtype::text, seqmax, seqmin, seqincrement, seqcycle FROM pg_sequence "
        "WHERE seqrelid = 's'::regclass",
        "ALTER SEQUENCE s OWNED BY t.a",
        "DROP TABLE t",
        "SELECT count(*) FROM pg_class WHERE relname = 's'",
    ],
    "serial": [
        "CREATE TABLE t (id serial PRIMARY KEY, v text)",
        "INSERT INTO t (v) VALUES ('a'), ('b')",
        "INSERT INTO t (v) SELECT 'x' || g FROM generate_series(1, 3) g",
        "INSERT INTO t VALUES (DEFAULT, 'd')",
        "INSERT INTO t (v) VALUES ('r') RETURNING id",
        "SELECT * FROM t ORDER BY id",
        "SELECT currval('t_id_seq')",
        "SELECT pg_get_serial_sequence('t', 'id')",
        "SELECT pg_get_serial_sequence('t', 'v')",
        "SELECT pg_get_serial_sequence('t', 'nosuch')",
        "SELECT column_name, column_default, is_nullable, data_type "
        "FROM information_schema.columns WHERE table_name = 't'"
        " AND table_schema = current_schema() ORDER BY ordinal_position",
        "SELECT a.attname, pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d "
        "JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum "
        "WHERE d.adrelid = 't'::regclass",
        "INSERT INTO t (id, v) VALUES (NULL, 'n')",
        "CREATE TABLE b (id bigserial, s smallserial)",
        "INSERT INTO b DEFAULT VALUES",
        "INSERT INTO b DEFAULT VALUES",
        "SELECT * FROM b",
        "SELECT sequencename, max_value, last_value FROM pg_sequences ORDER BY sequencename",
        "SELECT format_type(seqtypid, NULL), seqmax FROM pg_sequence WHERE seqrelid IN "
        "(SELECT oid FROM pg_class WHERE relnamespace = current_schema()::regnamespace) "
        "ORDER BY seqmax",
        "SELECT sequence_name, data_type, numeric_precision, start_value, minimum_value, "
        "maximum_value, increment, cycle_option FROM information_schema.sequences "
        "ORDER BY sequence_name",
        "DROP SEQUENCE t_id_seq",
        "DROP TABLE t",
        "SELECT relname FROM pg_class WHERE relkind = 'S' ORDER BY relname",
        "CREATE TABLE c (id serial, id2 serial)",
        "CREATE TABLE c_id_seq (a int)",
        "CREATE TABLE d (id serial)",
        "SELECT pg_get_serial_sequence('d', 'id')",
    ],
    "default_cascade": [
        "CREATE SCHEMA IF NOT EXISTS seqtest_other",
        "CREATE SEQUENCE seqtest_other.o",
        "CREATE TABLE u (x int DEFAULT nextval('seqtest_other.o'), y int)",
        "SELECT column_default FROM information_schema.columns WHERE table_name = 'u' "
        "AND table_schema = current_schema() ORDER BY ordinal_position",
        "INSERT INTO u (y) VALUES (1)",
        "SELECT * FROM u",
        "DROP SEQUENCE seqtest_other.o",
        "DROP SEQUENCE seqtest_other.o CASCADE",
        "DROP SCHEMA seqtest_other",
        "CREATE TABLE bad (a int DEFAULT nextval('nosuch'))",
        "CREATE SEQUENCE s",
        "CREATE TABLE t (id int DEFAULT nextval('s'), v text)",
        "INSERT INTO t (v) VALUES ('a')",
        "SELECT * FROM t",
        "DROP SEQUENCE s",
        "DROP SEQUENCE s CASCADE",
        "INSERT INTO t (v) VALUES ('b')",
        "SELECT * FROM t ORDER BY v",
    ],
    "identity": [
        "CREATE TABLE a (id int GENERATED ALWAYS AS IDENTITY, v text)",
        "INSERT INTO a (v) VALUES ('x')",
        "INSERT INTO a VALUES (10, 'y')",
        "INSERT INTO a (id, v) SELECT 11, 'z'",
        "INSERT INTO a OVERRIDING SYSTEM VALUE VALUES (10, 'y')",
        "INSERT INTO a OVERRIDING USER VALUE VALUES (99, 'u')",
        "INSERT INTO a VALUES (DEFAULT, 'd')",
        "SELECT * FROM a ORDER BY v",
        "UPDATE a SET id = 50 WHERE v = 'x'",
        "UPDATE a SET id = DEFAULT, v = 'x2' WHERE v = 'x'",
        "SELECT * FROM a ORDER BY v",
        "CREATE TABLE b (id bigint GENERATED BY DEFAULT AS IDENTITY (START WITH 100 "
        "INCREMENT BY 10) PRIMARY KEY, v text)",
        "INSERT INTO b (v) VALUES ('p'), ('q')",
        "INSERT INTO b VALUES (5, 'r')",
        "INSERT INTO b OVERRIDING USER VALUE VALUES (6, 's')",
        "SELECT * FROM b ORDER BY v",
        "SELECT attname, attidentity, attnotnull FROM pg_attribute "
        "WHERE attrelid = 'b'::regclass AND attnum > 0 ORDER BY attnum",
        "SELECT count(*) FROM pg_attrdef WHERE adrelid = 'b'::regclass",
        "SELECT column_name, column_default, is_nullable, is_identity, identity_generation, "
        "identity_start, identity_increment, identity_maximum, identity_minimum, identity_cycle "
        "FROM information_schema.columns WHERE table_schema = current_schema() "
        "ORDER BY table_name, ordinal_position",
        "SELECT pg_get_serial_sequence('b', 'id')",
        "SELECT sequencename, start_value, increment_by, last_value FROM pg_sequences ORDER BY 1",
        "DROP SEQUENCE b_id_seq",
        "CREATE TABLE c (id text GENERATED ALWAYS AS IDENTITY)",
        "DROP TABLE a, b",
        "SELECT count(*) FROM pg_class WHERE relkind = 'S'",
    ],
    "truncate": [
        "CREATE TABLE t (id serial, v text)",
        "CREATE TABLE u (id int GENERATED BY DEFAULT AS IDENTITY (START 10), v text)",
        "INSERT INTO t (v) VALUES ('a'), ('b')",
        "INSERT INTO u (v) VALUES ('a'), ('b')",
        "TRUNCATE t",
        "INSERT INTO t (v) VALUES ('c')",
        "TRUNCATE t, u RESTART IDENTITY",
        "INSERT INTO t (v) VALUES ('d')",
        "INSERT INTO u (v) VALUES ('d')",
        "SELECT * FROM t",
        "SELECT * FROM u",
        "UPDATE u SET id = 3",
        "SELECT * FROM u",
    ],
    "not_transactional": [
        "CREATE SEQUENCE s",
        "BEGIN",
        "SELECT nextval('s')",
        "ROLLBACK",
        "SELECT nextval('s')",
        "CREATE TABLE t (id int DEFAULT nextval('s'), v int)",
        "BEGIN",
        "INSERT INTO t (v) VALUES (1)",
        "ROLLBACK",
        "INSERT INTO t (v) VALUES (2)",
        "SELECT * FROM t",
        "BEGIN",
        "CREATE SEQUENCE s2",
        "SELECT nextval('s2'), nextval('s2')",
        "COMMIT",
        "SELECT nextval('s2'), lastval()",
        "BEGIN",
        "CREATE SEQUENCE s3",
        "SELECT nextval('s3')",
        "ROLLBACK",
        "SELECT nextval('s3')",
    ],
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_same_as_postgres(name: str, hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    script = SCRIPTS[name]
    # the schema is not `public`: serial defaults name it, catalog queries filter by it
    script = [
        s.replace(
            "relkind = 'S'", "relkind = 'S' AND relnamespace = current_schema()::regnamespace"
        )
        .replace("FROM pg_sequences", "FROM pg_sequences WHERE schemaname = current_schema()")
        .replace(
            "FROM information_schema.sequences",
            "FROM information_schema.sequences WHERE sequence_schema = current_schema()",
        )
        for s in script
    ]
    ignore = ("types",)  # catalog columns of type name show as text
    assert_same_as_postgres(pg_oracle.dsn, hw_server.dsn, f"seqtest_{name}", script, ignore)


PSQL_SETUP = r"""
DROP SCHEMA IF EXISTS seqpsql CASCADE;
CREATE SCHEMA seqpsql;
SET search_path = seqpsql;
CREATE SEQUENCE plain START 5 INCREMENT 2;
CREATE TABLE items (id serial PRIMARY KEY, n bigint GENERATED BY DEFAULT AS IDENTITY, v text);
"""

PSQL_SCRIPT = r"""
SET search_path = seqpsql;
\d
\ds
\ds items*
\d items
\d+ items
\d plain
\d items_id_seq
\d items_n_seq
"""


def test_psql_describe(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    outputs = psql_outputs((pg_oracle.dsn, hw_server.dsn), PSQL_SETUP, PSQL_SCRIPT)
    assert outputs[1] == outputs[0]


def test_no_value_reused_after_sigkill() -> None:
    """Values taken, the server killed with SIGKILL, restarted: nextval continues past
    every value handed out (PostgreSQL logs 32 values ahead; so does Headwater)."""
    root = Path(tempfile.mkdtemp(prefix="headwater-seq-"))
    server = HeadwaterServer(root / "data").start()
    try:
        taken: list[int] = []
        with psycopg.connect(server.dsn, autocommit=True) as c:
            c.execute("CREATE SEQUENCE s")
            c.execute("CREATE TABLE t (id serial, v int)")
            taken += [r[0] for r in c.execute("SELECT nextval('s') FROM generate_series(1, 40)")]
            c.execute("INSERT INTO t (v) SELECT g FROM generate_series(1, 5) g")
            taken += [c.execute("SELECT nextval('s')").fetchone()[0] for _ in range(3)]
            rows = c.execute("INSERT INTO t (v) VALUES (1) RETURNING id").fetchall()
            for v in range(3):  # the fast path (server/batcher.py) takes the values in Python
                c.execute("INSERT INTO t (v) VALUES (%s)", [v])
            serial_taken = [r[0] for r in rows]
            serial_taken += [r[0] for r in c.execute("SELECT id FROM t")]
            assert len(set(serial_taken)) == len(serial_taken) - 1  # the RETURNING row twice
        server.kill()
        server.start()
        with psycopg.connect(server.dsn, autocommit=True) as c:
            after = c.execute("SELECT nextval('s')").fetchone()[0]
            assert after > max(taken)
            assert taken == list(range(1, len(taken) + 1))
            row = c.execute("INSERT INTO t (v) VALUES (2) RETURNING id").fetchone()
            assert row[0] > max(serial_taken)
            # and again, without any value taken since the restart but one
            server.kill()
            server.start()
        with psycopg.connect(server.dsn, autocommit=True) as c:
            assert c.execute("SELECT nextval('s')").fetchone()[0] > after
    finally:
        server.stop()


def test_sqlalchemy_serial_and_identity(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """SQLAlchemy 2: tables with serial and identity keys, inserted primary keys, and
    their reflection (defaults, autoincrement, identity options) as from PostgreSQL."""
    sa = pytest.importorskip("sqlalchemy")
    seen = []
    for dsn in (pg_oracle.dsn, hw_server.dsn):
        params = dict(kv.split("=") for kv in dsn.split())
        url = f"postgresql+psycopg://{params['user']}@{params['host']}:{params['port']}/"
        engine = sa.create_engine(url + params["dbname"])
        with engine.begin() as c:
            c.execute(sa.text("DROP SCHEMA IF EXISTS seqsa CASCADE"))
            c.execute(sa.text("CREATE SCHEMA seqsa"))
        md = sa.MetaData(schema="seqsa")
        users = sa.Table(
            "users",
            md,
            sa.Column("id", sa.Integer, primary_key=True),
            sa.Column("name", sa.String(30)),
        )
        things = sa.Table(
            "things",
            md,
            sa.Column("id", sa.BigInteger, sa.Identity(start=5, increment=3), primary_key=True),
            sa.Column("name", sa.String(30)),
        )
        md.create_all(engine)
        with engine.begin() as c:
            keys = [
                c.execute(users.insert().values(name="a")).inserted_primary_key[0],
                c.execute(things.insert().values(name="a")).inserted_primary_key[0],
                c.execute(things.insert().values(name="b")).inserted_primary_key[0],
            ]
        insp = sa.inspect(engine)
        reflected = {
            name: [
                {k: v for k, v in col.items() if k != "type"} | {"type": str(col["type"])}
                for col in insp.get_columns(name, schema="seqsa")
            ]
            for name in ("users", "things")
        }
        engine.dispose()
        seen.append((keys, reflected))
    assert seen[1] == seen[0]


def test_a_busy_sequence_writes_its_log_ahead_rarely(tmp_path: Path) -> None:
    """nextval makes a record durable every SEQ_RESERVE values, not every 32 as
    PostgreSQL (an ORM's serial key waited for one durable write per 32 INSERTs);
    log_cnt stays PostgreSQL's, and after a restart nextval goes past the record."""
    from headwater.catalog.objects import Sequence
    from headwater.server.sequences import SEQ_RESERVE, Sequences
    from headwater.storage.sequences import SequenceLog
    from headwater.storage.slate import SlateStore

    class Counted(SequenceLog):
        writes = 0

        def write(self, oid: int, state: Any) -> None:
            Counted.writes += 1
            super().write(oid, state)

    store = SlateStore(tmp_path / "slatedb")
    store.open_sync()
    try:
        seqs = Sequences(Counted(store))
        seqs.recover()
        s = Sequence(7, "public", "s", (), max_value=3000)
        taken = [seqs.nextval(1, s) for _ in range(1000)]
        assert taken == list(range(1, 1001)) and Counted.writes == 1
        log_cnt = 0  # PostgreSQL's: 32 logged ahead, counted down, logged again at 0
        for i in range(1000):
            log_cnt = 32 if i == 0 or log_cnt == 0 else log_cnt - 1
        assert seqs.peek(s) == (1000, log_cnt, True)
        # the fast INSERT path takes as many on the event loop, with no write due
        spare = seqs.spare(1, s)
        assert spare == 1057 - 1000 - 32 - 1
        [seqs.nextval(1, s) for _ in range(spare)]
        assert Counted.writes == 1
        # PostgreSQL logs when the value 32 ahead is not covered: at 1057 and at 2113
        taken += [seqs.nextval(1, s) for _ in range(1500)]
        assert Counted.writes == 3
        near_max = [seqs.nextval(1, s) for _ in range(3000 - 2500 - spare)]  # stops at MAXVALUE
        assert near_max[-1] == 3000 and Counted.writes == 3
        again = Sequences(Counted(store))
        again.recover()
        t = Sequence(8, "public", "t", ())
        first = [again.nextval(1, t) for _ in range(5)]
        again2 = Sequences(Counted(store))  # a restart after 5 values
        again2.recover()
        assert again2.nextval(1, t) == 1 + 32 + SEQ_RESERVE + 1 > max(first)
    finally:
        store.close_sync()
