"""DO blocks (server/plpgsql_exec.py): PL/pgSQL run a statement at a time, against
PostgreSQL 15. The idempotent-migration idioms (Drizzle's `EXCEPTION WHEN
duplicate_object`, `IF NOT EXISTS (SELECT ... FROM pg_type)`), variables, loops,
INTO, EXECUTE ... USING, RAISE at every level, GET DIAGNOSTICS, nested handlers; the
block's atomicity, its savepoints, COMMIT / ROLLBACK inside it; errors with
PostgreSQL's SQLSTATE, message and CONTEXT; psql's output; refusals that run nothing."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.hwserver import HeadwaterServer
from tests.oracle_scripts import in_schema, psql_outputs, with_context

DRIZZLE_ENUM = (
    "DO $$ BEGIN\n CREATE TYPE status AS ENUM ('draft', 'live');\n"
    "EXCEPTION\n WHEN duplicate_object THEN null;\nEND $$"
)
DRIZZLE_FK = (
    "DO $$ BEGIN\n ALTER TABLE posts ADD CONSTRAINT posts_author_fk FOREIGN KEY (author_id)"
    " REFERENCES authors(id) ON DELETE cascade ON UPDATE no action;\n"
    "EXCEPTION\n WHEN duplicate_object THEN null;\nEND $$"
)
SCRIPT = [
    # migrations run twice: the second run changes nothing and fails nothing
    DRIZZLE_ENUM,
    DRIZZLE_ENUM,
    "CREATE TABLE authors (id int PRIMARY KEY, name text NOT NULL)",
    "CREATE TABLE posts (id int PRIMARY KEY, author_id int, state status, words int)",
    DRIZZLE_FK,
    DRIZZLE_FK,
    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n"
    " ON n.oid = t.typnamespace WHERE t.typname = 'mood' AND n.nspname = current_schema())"
    " THEN CREATE TYPE mood AS ENUM ('ok'); END IF; END $$",
    "SELECT conname, contype FROM pg_constraint WHERE conrelid = 'posts'::regclass ORDER BY 1",
    # variables, loops, INTO, FOUND, ROW_COUNT, EXECUTE ... USING
    """DO $$
DECLARE
  n int := 0;
  r record;
  total bigint;
  who text;
BEGIN
  FOR i IN 1..4 LOOP
    INSERT INTO authors VALUES (i, 'author ' || i);
    INSERT INTO posts
      VALUES (i * 10, i, CASE WHEN i % 2 = 0 THEN 'live' ELSE 'draft' END::status, i * 100);
  END LOOP;
  FOR r IN SELECT a.id, a.name, count(p.id) AS posts FROM authors a
           LEFT JOIN posts p ON p.author_id = a.id GROUP BY 1, 2 ORDER BY 1 LOOP
    RAISE NOTICE 'author % (%) has % posts', r.id, r.name, r.posts;
    n := n + r.posts;
  END LOOP;
  SELECT sum(words) INTO total FROM posts WHERE state = 'live';
  RAISE NOTICE 'n=% total=% found=%', n, total, FOUND;
  UPDATE posts SET words = words + 1 WHERE author_id > 2;
  GET DIAGNOSTICS n = ROW_COUNT;
  RAISE NOTICE 'updated % rows', n;
  PERFORM 1 FROM posts WHERE id = 999;
  IF NOT FOUND THEN RAISE NOTICE 'no post 999'; END IF;
  EXECUTE format('CREATE TABLE %I (a int)', 'made_' || n);
  EXECUTE 'INSERT INTO authors VALUES ($1, $2)' USING 9, 'nine';
  EXECUTE 'SELECT name FROM authors WHERE id = $1' INTO who USING 9;
  RAISE INFO 'who=%', who;
END
$$""",
    "SELECT * FROM posts ORDER BY id",
    "SELECT id, name FROM authors ORDER BY id",
    "SELECT relname FROM pg_class WHERE relname LIKE 'made%'",
    # control flow
    "DO $$ DECLARE i int := 0; BEGIN WHILE i < 10 LOOP i := i + 1; CONTINUE WHEN i % 2 = 0;"
    " EXIT WHEN i > 6; RAISE NOTICE 'odd %', i; END LOOP; END $$",
    "DO $$ DECLARE total int := 0; BEGIN FOR i IN REVERSE 10..1 BY 3 LOOP total := total + i;"
    " END LOOP; RAISE NOTICE '%', total; END $$",
    "DO $$ BEGIN <<outer_loop>> FOR i IN 1..3 LOOP FOR j IN 1..3 LOOP EXIT outer_loop"
    " WHEN j = 2; RAISE NOTICE '% %', i, j; END LOOP; END LOOP; END $$",
    "DO $$ DECLARE a int[] := ARRAY[1, 2, 3]; s int := 0; x int; BEGIN FOREACH x IN ARRAY a"
    " LOOP s := s + x; END LOOP; RAISE NOTICE 'sum %', s; END $$",
    "DO $$ DECLARE t text := 'b'; BEGIN CASE t WHEN 'a' THEN RAISE NOTICE 'A';"
    " WHEN 'b', 'c' THEN RAISE NOTICE 'B or C'; END CASE; END $$",
    "DO $$ <<blk>> DECLARE a int := 1; BEGIN DECLARE a int := 2; BEGIN"
    " RAISE NOTICE '% %', a, blk.a; END; RAISE NOTICE '%', a; END $$",
    "DO $$ DECLARE q text := 'SELECT id FROM authors WHERE id < 3 ORDER BY id'; r record;"
    " BEGIN FOR r IN EXECUTE q LOOP RAISE NOTICE 'id %', r.id; END LOOP; END $$",
    "DO $$ DECLARE r record; BEGIN SELECT * INTO r FROM authors WHERE id = 1;"
    " RAISE NOTICE '% %', r, r.name; r.name := 'renamed'; RAISE NOTICE '%', r.name; END $$",
    "DO $$ DECLARE d date := '2024-01-31'; b boolean; BEGIN RAISE NOTICE '% % % %%',"
    " d + 1, b, d > '2024-01-01'; END $$",
    # handlers: each block's statements undone before its handler runs
    "DO $$ BEGIN INSERT INTO authors VALUES (20, 'x'); INSERT INTO authors VALUES (1, 'dup');"
    " EXCEPTION WHEN unique_violation THEN RAISE NOTICE 'caught % %', SQLSTATE, SQLERRM; END $$",
    "SELECT count(*) FROM authors WHERE id = 20",
    "DO $$ BEGIN PERFORM 1/0; EXCEPTION WHEN data_exception THEN RAISE NOTICE 'class %',"
    " SQLSTATE; END $$",
    "DO $$ DECLARE msg text; st text; hint text; BEGIN RAISE EXCEPTION 'custom' USING"
    " HINT = 'do this', ERRCODE = 'P0042'; EXCEPTION WHEN others THEN GET STACKED DIAGNOSTICS"
    " msg = MESSAGE_TEXT, st = RETURNED_SQLSTATE, hint = PG_EXCEPTION_HINT;"
    " RAISE NOTICE '% % %', st, msg, hint; END $$",
    "DO $$ BEGIN BEGIN INSERT INTO authors VALUES (21, 'inner'); PERFORM 1/0; EXCEPTION WHEN"
    " division_by_zero THEN RAISE; END; EXCEPTION WHEN others THEN RAISE NOTICE 'outer %',"
    " SQLERRM; END $$",
    "DO $$ BEGIN INSERT INTO authors VALUES (22, 'kept'); BEGIN INSERT INTO authors"
    " VALUES (23, 'undone'); RAISE EXCEPTION 'inner'; EXCEPTION WHEN raise_exception THEN"
    " NULL; END; END $$",
    "SELECT id FROM authors WHERE id > 20 ORDER BY id",
    "DO $$ BEGIN RAISE WARNING 'careful'; RAISE INFO 'info %', true; RAISE LOG 'log';"
    " RAISE DEBUG 'debug'; END $$",
    "SET client_min_messages = warning",
    "DO $$ BEGIN RAISE NOTICE 'hidden'; RAISE WARNING 'shown'; END $$",
    "RESET client_min_messages",
    # errors: SQLSTATE, message, hint and CONTEXT as PostgreSQL's; the block undone
    "DO $$ BEGIN INSERT INTO authors VALUES (30, 'gone'); RAISE EXCEPTION 'bad %', 42"
    " USING HINT = 'fix it', ERRCODE = 'check_violation'; END $$",
    "SELECT count(*) FROM authors WHERE id = 30",
    "DO $$ BEGIN INSERT INTO authors VALUES (1, 'dup'); END $$",
    "DO $$ DECLARE x int; BEGIN x := 1/0; END $$",
    "DO $$ BEGIN FOR i IN 1..3 LOOP PERFORM 1/0; END LOOP; END $$",
    "DO $$ DECLARE x int; BEGIN SELECT id INTO STRICT x FROM authors WHERE id > 100; END $$",
    "DO $$ DECLARE x int; BEGIN SELECT id INTO STRICT x FROM authors; END $$",
    "DO $$ BEGIN SELECT 1; END $$",
    "DO $$ DECLARE t text := 'z'; BEGIN CASE t WHEN 'a' THEN NULL; END CASE; END $$",
    "DO $$ BEGIN ASSERT 1 = 2, 'one is not two'; END $$",
    "DO $$ DECLARE x int NOT NULL := 1; BEGIN x := NULL; END $$",
    "DO $$ BEGIN RAISE unique_violation; END $$",
    "DO $$ BEGIN RAISE SQLSTATE '22012'; END $$",
    "DO $$ BEGIN EXECUTE NULL; END $$",
    "DO LANGUAGE sql $$ SELECT 1 $$",
    "DO LANGUAGE plpgsql $$ BEGIN RAISE NOTICE 'language given'; END $$",
    # cursors: bound, unbound, with arguments, FOR over one, FETCH directions, MOVE
    "CREATE TABLE cur_t (id int, v text)",
    "INSERT INTO cur_t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    "DO $$ DECLARE c CURSOR FOR SELECT id, v FROM cur_t ORDER BY id; r record; n int := 0;"
    " BEGIN OPEN c; LOOP FETCH c INTO r; EXIT WHEN NOT FOUND; n := n + r.id;"
    " RAISE NOTICE 'row % %', r.id, r.v; END LOOP; CLOSE c; RAISE NOTICE 'sum %', n; END $$",
    "DO $$ DECLARE c refcursor; a int; b text; BEGIN"
    " OPEN c FOR SELECT id, v FROM cur_t WHERE id > 1 ORDER BY id;"
    " FETCH c INTO a, b; RAISE NOTICE '% %', a, b;"
    " FETCH LAST FROM c INTO a, b; RAISE NOTICE 'last % %', a, b;"
    " FETCH PRIOR FROM c INTO a, b; RAISE NOTICE 'prior % % %', a, b, FOUND;"
    " FETCH ABSOLUTE 5 FROM c INTO a; RAISE NOTICE 'abs5 % %', a, FOUND;"
    " MOVE FIRST FROM c; RAISE NOTICE 'moved %', FOUND; CLOSE c;"
    " OPEN c FOR EXECUTE 'SELECT count(*) FROM cur_t WHERE id >= $1' USING 2;"
    " FETCH c INTO a; RAISE NOTICE 'dyn %', a; CLOSE c; END $$",
    "DO $$ DECLARE c CURSOR (lim int) FOR SELECT id FROM cur_t WHERE id <= lim ORDER BY id;"
    " t int := 0; BEGIN FOR r IN c(2) LOOP t := t + r.id; END LOOP; RAISE NOTICE 'total %', t;"
    " OPEN c(3); FETCH c INTO t; RAISE NOTICE 'first %', t; CLOSE c; END $$",
    "DO $$ DECLARE c refcursor; BEGIN CLOSE c; END $$",
    "DO $$ DECLARE c CURSOR FOR SELECT 1; BEGIN OPEN c; OPEN c; END $$",
    "DO $$ DECLARE c CURSOR FOR SELECT 1; BEGIN CLOSE c; END $$",
    # CALL: INOUT values back into the variables; a nested statement's notices
    "CREATE PROCEDURE do_bump(INOUT x int, step int DEFAULT 1) LANGUAGE plpgsql AS $$"
    " BEGIN x := x + step; END $$",
    "CREATE PROCEDURE do_log(msg text) LANGUAGE plpgsql AS $$"
    " BEGIN RAISE NOTICE 'log %', msg; END $$",
    "DO $$ DECLARE v int := 1; BEGIN CALL do_bump(v); CALL do_bump(v, 10);"
    " RAISE NOTICE 'v=%', v; CALL do_log('hi ' || v); END $$",
    "DO $$ BEGIN CALL do_bump(5); END $$",
    "DO $$ BEGIN DROP TABLE IF EXISTS nosuch_tbl; CREATE TABLE IF NOT EXISTS cur_t (a int); END $$",
]


# errors of PostgreSQL's PL/pgSQL compiler (pglast's): the same but for their CONTEXT's
# line number, which pglast does not give
COMPILE_ERRORS = [
    "DO $$ BEGIN RAISE NOTICE 'too few % %', 1; END $$",
    "DO $$ DECLARE c CONSTANT int := 1; BEGIN c := 2; END $$",
    "DO $$ BEGIN x := 1; END $$",
    "DO $$ BEGIN PERFORM ;; END $$",
]


def test_same_as_postgres(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    with in_schema((hw_server.dsn, pg_oracle.dsn), "do_blocks") as (hw, pg):
        got: dict[str, list[Any]] = {"hw": [], "pg": []}
        for name, conn in (("hw", hw), ("pg", pg)):
            notices: list[Any] = []
            conn.add_notice_handler(
                lambda d, n=notices: n.append((d.severity_nonlocalized, d.message_primary))
            )
            got[name] = [with_context(conn, sql, notices) for sql in SCRIPT]
        for sql, have, want in zip(SCRIPT, got["hw"], got["pg"], strict=True):
            assert have == want, f"{sql}\n  PostgreSQL: {want}\n  Headwater:  {have}"
        for sql in COMPILE_ERRORS:
            have, want = with_context(hw, sql, []), with_context(pg, sql, [])
            assert have[:3] == want[:3], f"{sql}\n  PostgreSQL: {want}\n  Headwater:  {have}"


def test_transactions(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    """A DO inside a block belongs to it; COMMIT and ROLLBACK inside a DO end its own
    transaction only when it has one (2D000 otherwise); the session goes on."""
    script = [
        "BEGIN",
        "DO $$ BEGIN INSERT INTO t VALUES (1); END $$",
        "ROLLBACK",
        "SELECT count(*) FROM t",
        "DO $$ BEGIN INSERT INTO t VALUES (2); COMMIT; INSERT INTO t VALUES (3); ROLLBACK;"
        " INSERT INTO t VALUES (4); END $$",
        "SELECT a FROM t ORDER BY a",
        "DO $$ BEGIN INSERT INTO t VALUES (5); COMMIT; INSERT INTO t VALUES (6);"
        " RAISE EXCEPTION 'after commit'; END $$",
        "SELECT a FROM t ORDER BY a",
        "BEGIN",
        "DO $$ BEGIN COMMIT; END $$",
        "SELECT 1",
        "ROLLBACK",
        "DO $$ BEGIN BEGIN COMMIT; EXCEPTION WHEN division_by_zero THEN NULL; END; END $$",
        "BEGIN",
        "DO $$ BEGIN INSERT INTO t VALUES (7); END $$",
        "SAVEPOINT s",
        "DO $$ BEGIN INSERT INTO t VALUES (8); RAISE EXCEPTION 'undo 8'; END $$",
        "ROLLBACK TO SAVEPOINT s",
        "COMMIT",
        "SELECT a FROM t ORDER BY a",
        "DO $$ BEGIN CREATE TABLE made_in_do (x int); INSERT INTO made_in_do VALUES (1);"
        " RAISE EXCEPTION 'undo the DDL too'; END $$",
        "SELECT count(*) FROM pg_class WHERE relname = 'made_in_do'",
    ]
    with in_schema((hw_server.dsn, pg_oracle.dsn), "do_txn", ["CREATE TABLE t (a int)"]) as (
        hw,
        pg,
    ):
        notices: list[Any] = []
        for sql in script:
            have, want = with_context(hw, sql, notices), with_context(pg, sql, notices)
            assert have == want, f"{sql}\n  PostgreSQL: {want}\n  Headwater:  {have}"


def test_refused_statements_run_nothing(hw_server: HeadwaterServer) -> None:
    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE do_refused (a int)")
        for body in (
            "INSERT INTO do_refused VALUES (1);"
            " FOREACH x SLICE 1 IN ARRAY ARRAY[[1]] LOOP END LOOP;",
        ):
            decl = "DECLARE c refcursor; x int[];"
            try:
                conn.execute(f"DO $$ {decl} BEGIN {body} END $$")
            except psycopg.errors.FeatureNotSupported as e:
                assert "is not supported" in str(e)
                assert e.diag.message_hint and "EXCEPTION" in e.diag.message_hint
            else:
                raise AssertionError(f"{body} ran")
        assert conn.execute("SELECT count(*) FROM do_refused").fetchone() == (0,)


def test_psql_shows_notices_and_context(hw_server: HeadwaterServer, pg_oracle: Any) -> None:
    script = (
        "DO $$ DECLARE n int; BEGIN SELECT count(*) INTO n FROM pg_class WHERE relname = 'x';"
        " RAISE NOTICE 'found % relations', n; RAISE WARNING 'careful' USING DETAIL = 'why';"
        " END $$;\n"
        "DO $$ BEGIN PERFORM 1; RAISE EXCEPTION 'stop here'; END $$;\n"
        "DO $$\nBEGIN\n  PERFORM 1;\n  PERFORM 1/0;\nEND\n$$;\n"
        "SELECT 'still usable';\n"
    )
    want, got = psql_outputs((pg_oracle.dsn, hw_server.dsn), "SELECT 1;", script)
    assert got == want
