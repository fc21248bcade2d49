"""EXPLAIN [ANALYZE] against PostgreSQL 15: the same shape (numbers aside), the same
column, options and errors; and EXPLAIN of materialized views (the incremental plan)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.hwserver import HeadwaterServer, run_psql

SETUP = [
    "CREATE TABLE ex_t (a int, b text)",
    "CREATE TABLE ex_u (a int, c text)",
    "INSERT INTO ex_t SELECT i, i::text FROM generate_series(1, 50) i",
    "INSERT INTO ex_u SELECT i, i::text FROM generate_series(1, 5) i",
]
HEAD = re.compile(r"^\S.*  \(cost=\d+\.\d\d\.\.\d+\.\d\d rows=\d+ width=\d+\)$")
CHILD = re.compile(r"^( +)->  \S")
NODE = re.compile(r"^(?: *->  )?(.*?)(?:  \(cost=.*| \(actual .*)?$")


@pytest.fixture(scope="module")
def both(hw_server: HeadwaterServer, pg_oracle: Any) -> Any:
    conns = []
    for dsn in (pg_oracle.dsn, hw_server.dsn):
        c = psycopg.connect(dsn, autocommit=True)
        for sql in SETUP:
            c.execute(sql)
        conns.append(c)
    yield conns
    for c in conns:
        c.close()


def plan(conn: psycopg.Connection, sql: str) -> tuple[list[str], int]:
    cur = conn.execute(sql)
    assert cur.description is not None and cur.description[0].name == "QUERY PLAN"
    return [r[0] for r in cur.fetchall()], cur.description[0].type_code


def nodes(lines: list[str]) -> list[str]:
    """The node names of a text plan (its first line and every `->` line)."""
    return [NODE.match(line).group(1) for line in lines[:1] + [x for x in lines if "->" in x]]


@pytest.mark.parametrize(
    "query, top",
    [
        ("SELECT * FROM ex_t WHERE a > 10", "Seq Scan on ex_t"),
        ("SELECT count(*) FROM ex_t WHERE a % 2 = 0", "Aggregate"),
        ("SELECT a FROM ex_t ORDER BY b", "Sort"),
        ("SELECT * FROM ex_t LIMIT 3", "Limit"),
        ("SELECT a FROM ex_t UNION ALL SELECT a FROM ex_u", "Append"),
        ("SELECT 1", "Result"),
        ("SELECT b, count(*) FROM ex_t GROUP BY b", "HashAggregate"),
        ("SELECT * FROM ex_t JOIN ex_u ON ex_t.a = ex_u.a", None),
    ],
)
def test_text_shape(both: Any, query: str, top: str | None) -> None:
    seen = []
    for conn in both:
        lines, oid = plan(conn, f"EXPLAIN {query}")
        assert oid == 25  # text
        assert HEAD.match(lines[0]), lines
        for line in lines[1:]:
            m = CHILD.match(line)
            if m:
                assert len(m.group(1)) % 2 == 0
        names = nodes(lines)
        if top is not None:
            assert names[0] == top, lines
        seen.append(sorted(n for n in names if n.startswith("Seq Scan on")))
    assert seen[0] == seen[1]  # the same relations scanned, named as the user names them


def test_filters_and_keys(both: Any) -> None:
    for conn in both:
        lines, _ = plan(conn, "EXPLAIN SELECT * FROM ex_t WHERE a > 10")
        assert lines[1] == "  Filter: (a > 10)"
        lines, _ = plan(conn, "EXPLAIN SELECT a FROM ex_t ORDER BY b")
        assert lines[1] == "  Sort Key: b"
        lines, _ = plan(conn, "EXPLAIN SELECT * FROM ex_t JOIN ex_u ON ex_t.a = ex_u.a")
        assert any(x.strip().endswith("Cond: (ex_t.a = ex_u.a)") for x in lines), lines


def test_analyze(both: Any) -> None:
    for conn in both:
        lines, _ = plan(conn, "EXPLAIN ANALYZE SELECT b, count(*) FROM ex_t GROUP BY b")
        assert re.search(r"\(actual time=\d+\.\d{3}\.\.\d+\.\d{3} rows=50 loops=1\)$", lines[0])
        assert re.fullmatch(r"Planning Time: \d+\.\d{3} ms", lines[-2])
        assert re.fullmatch(r"Execution Time: \d+\.\d{3} ms", lines[-1])
        lines, _ = plan(conn, "EXPLAIN (ANALYZE, TIMING OFF, COSTS OFF) SELECT * FROM ex_t")
        assert lines[0] == "Seq Scan on ex_t (actual rows=50 loops=1)"
        lines, _ = plan(conn, "EXPLAIN (ANALYZE, SUMMARY OFF) SELECT 1")
        assert len(lines) == 1
        lines, _ = plan(conn, "EXPLAIN (SUMMARY) SELECT 1")
        assert lines[-1].startswith("Planning Time: ")


def test_options(both: Any) -> None:
    for conn in both:
        lines, _ = plan(conn, "EXPLAIN (COSTS OFF) SELECT * FROM ex_t WHERE a > 10")
        assert lines == ["Seq Scan on ex_t", "  Filter: (a > 10)"]
        lines, _ = plan(conn, "EXPLAIN (VERBOSE) SELECT a FROM ex_t")
        assert lines[0].startswith("Seq Scan on public.ex_t  (cost=")
        assert lines[1] == "  Output: a"
        lines, _ = plan(conn, "EXPLAIN (BUFFERS, COSTS false) SELECT * FROM ex_t")
        assert lines[0] == "Seq Scan on ex_t"


@pytest.mark.parametrize(
    "sql, state",
    [
        ("EXPLAIN (TIMING) SELECT 1", "22023"),
        ("EXPLAIN (FORMAT bogus) SELECT 1", "22023"),
        ("EXPLAIN (bogus) SELECT 1", "42601"),
    ],
)
def test_errors(both: Any, sql: str, state: str) -> None:
    for conn in both:
        with pytest.raises(psycopg.Error) as e:
            conn.execute(sql)
        assert e.value.sqlstate == state


def test_json(both: Any) -> None:
    for conn in both:
        rows, oid = plan(conn, "EXPLAIN (FORMAT JSON) SELECT * FROM ex_t WHERE a > 10")
        assert oid == 114 and len(rows) == 1
        doc = rows[0] if isinstance(rows[0], list) else json.loads(rows[0])
        node = doc[0]["Plan"]
        assert node["Node Type"] == "Seq Scan"
        assert node["Relation Name"] == "ex_t"
        assert node["Filter"] == "(a > 10)"
        assert {"Startup Cost", "Total Cost", "Plan Rows", "Plan Width"} <= node.keys()
        rows, _ = plan(
            conn, "EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM ex_t WHERE a % 2 = 0"
        )
        doc = rows[0] if isinstance(rows[0], list) else json.loads(rows[0])
        assert doc[0]["Plan"]["Node Type"] == "Aggregate"
        assert doc[0]["Plan"]["Actual Rows"] == 1
        assert doc[0]["Plan"]["Plans"][0]["Node Type"] == "Seq Scan"
        assert {"Planning Time", "Execution Time"} <= doc[0].keys()


def test_yaml_and_xml(both: Any) -> None:
    for conn in both:
        rows, _ = plan(conn, "EXPLAIN (FORMAT YAML) SELECT * FROM ex_t")
        assert rows[0].startswith('- Plan: \n    Node Type: "Seq Scan"')
        rows, _ = plan(conn, "EXPLAIN (FORMAT XML) SELECT * FROM ex_t")
        assert rows[0].startswith('<explain xmlns="http://www.postgresql.org/2009/explain">')
        assert "<Node-Type>Seq Scan</Node-Type>" in rows[0]


def test_writes(both: Any) -> None:
    for conn in both:
        conn.execute("CREATE TABLE ex_w (a int, b text)")
        conn.execute("INSERT INTO ex_w SELECT i, 'x' FROM generate_series(1, 10) i")
        lines, _ = plan(conn, "EXPLAIN DELETE FROM ex_w WHERE a > 5")
        assert nodes(lines) == ["Delete on ex_w", "Seq Scan on ex_w"]
        assert lines[0].endswith("rows=0 width=0)")
        assert conn.execute("SELECT count(*) FROM ex_w").fetchone() == (10,)  # not run
        lines, _ = plan(conn, "EXPLAIN INSERT INTO ex_w VALUES (1, 'y')")
        assert nodes(lines) == ["Insert on ex_w", "Result"]
        lines, _ = plan(conn, "EXPLAIN UPDATE ex_w SET b = 'z' WHERE a = 1")
        assert nodes(lines) == ["Update on ex_w", "Seq Scan on ex_w"]
        # ANALYZE runs the write, inside the statement's transaction
        conn.execute("BEGIN")
        lines, _ = plan(conn, "EXPLAIN ANALYZE DELETE FROM ex_w WHERE a > 5")
        assert "actual time=" in lines[0] and lines[-1].startswith("Execution Time:")
        assert conn.execute("SELECT count(*) FROM ex_w").fetchone() == (5,)
        conn.execute("ROLLBACK")
        assert conn.execute("SELECT count(*) FROM ex_w").fetchone() == (10,)
        plan(conn, "EXPLAIN ANALYZE UPDATE ex_w SET b = 'z' WHERE a <= 2")
        assert conn.execute("SELECT count(*) FROM ex_w WHERE b = 'z'").fetchone() == (2,)
        plan(conn, "EXPLAIN (ANALYZE) INSERT INTO ex_w VALUES (11, 'n'), (12, 'n')")
        assert conn.execute("SELECT count(*) FROM ex_w").fetchone() == (12,)
        conn.execute("DROP TABLE ex_w")


def test_prepared_and_parameters(both: Any) -> None:
    for conn in both:
        cur = conn.cursor()
        cur.execute("EXPLAIN (COSTS OFF) SELECT * FROM ex_t WHERE a = %s", [3], prepare=True)
        assert cur.description[0].name == "QUERY PLAN"
        assert [r[0] for r in cur.fetchall()][0] == "Seq Scan on ex_t"


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_shows_query_plan(hw_server: HeadwaterServer, pg_oracle: Any, both: Any) -> None:
    script = (
        "EXPLAIN (COSTS OFF) SELECT * FROM ex_t WHERE a > 10;\n"
        "EXPLAIN (COSTS OFF) SELECT a FROM ex_t ORDER BY b;\n"
    )
    expected = run_psql(pg_oracle.host, pg_oracle.port, script, quiet=True)
    actual = run_psql(hw_server.host, hw_server.port, script, quiet=True)
    assert "QUERY PLAN" in actual
    assert actual.splitlines() == expected.splitlines()


# -- materialized views ----------------------------------------------------------------------
def test_explain_create_materialized_view(conn: psycopg.Connection) -> None:
    """The plan the engine would maintain, without creating the view (no Spark)."""
    conn.execute("CREATE TABLE IF NOT EXISTS ex_m (k int, v int)")
    conn.execute("CREATE TABLE IF NOT EXISTS ex_n (k int, w text)")
    lines, _ = plan(
        conn,
        "EXPLAIN CREATE MATERIALIZED VIEW ex_mv AS SELECT ex_m.k, count(*), sum(v) "
        "FROM ex_m JOIN ex_n ON ex_m.k = ex_n.k WHERE v > 0 GROUP BY ex_m.k",
    )
    text = "\n".join(lines)
    assert lines[0] == "Materialized View public.ex_mv"
    # the server runs the default --executor auto: who runs a batch depends on its size
    assert "  Executor: duckdb or spark, per batch" in lines
    reason = "  Executor Reason: --executor auto: with a local master"
    assert any(x.startswith(reason) for x in lines)
    assert "  Status: not created" in lines
    names = nodes(lines)
    assert {"Inner Join", "Aggregate", "Scan on ex_m", "Scan on ex_n"} <= set(names), text
    assert "Join Keys: ex_m.k = ex_n.k" in text
    assert "Rule: engine/rules/join.py join.join" in text
    assert "Rule: engine/rules/linear_aggregate.py linear_aggregate.linear_aggregate" in text
    assert re.search(r"State: s\{view\}_\d+_l, s\{view\}_\d+_r", text)
    with pytest.raises(psycopg.errors.UndefinedTable):
        conn.execute("SELECT * FROM ex_mv")  # not created
    rows, oid = plan(conn, "EXPLAIN (FORMAT JSON) CREATE MATERIALIZED VIEW ex_mv AS SELECT 1")
    assert oid == 114
    doc = rows[0] if isinstance(rows[0], list) else json.loads(rows[0])
    assert doc[0]["Plan"]["Node Type"] == "Materialized View"
    assert doc[0]["Plan"]["Executor"] == "duckdb or spark, per batch"
    with pytest.raises(psycopg.errors.FeatureNotSupported):
        conn.execute("EXPLAIN CREATE MATERIALIZED VIEW ex_bad AS SELECT random() FROM ex_m")
    top = conn.execute(
        "EXPLAIN CREATE MATERIALIZED VIEW ex_top AS SELECT * FROM ex_m ORDER BY 1 LIMIT 1"
    ).fetchall()
    assert "Rule: engine/rules/window.py window.window" in "\n".join(r[0] for r in top)


@pytest.mark.parametrize("executor", ["spark", "duckdb"])
def test_explain_create_materialized_view_executor(tmp_path: Path, executor: str) -> None:
    """A view not created yet: EXPLAIN says what the server's --executor would do."""
    server = HeadwaterServer(tmp_path / "data", args=["--executor", executor]).start()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as c:
            c.execute("CREATE TABLE ex_e (k int, v int)")
            lines, _ = plan(
                c, "EXPLAIN CREATE MATERIALIZED VIEW ex_ev AS SELECT k, sum(v) FROM ex_e GROUP BY k"
            )
    finally:
        server.stop()
    assert f"  Executor: {executor}" in lines
    reason = next(x for x in lines if x.startswith("  Executor Reason: "))
    assert reason.startswith(f"  Executor Reason: --executor {executor}: every batch runs "), reason
    assert ("Spark SQL jobs" if executor == "spark" else "on DuckDB") in reason


def test_explain_materialized_view(conn: psycopg.Connection) -> None:
    """An existing view: its operators, rules, states, executor, frontier and status;
    Materialize's `EXPLAIN [PLAN FOR] MATERIALIZED VIEW` forms; reads of it."""
    conn.execute("CREATE TABLE ex_s (k int, v int)")
    conn.execute("INSERT INTO ex_s VALUES (1, 2), (2, 3)")
    conn.execute("CREATE MATERIALIZED VIEW ex_sv AS SELECT k, max(v) AS top FROM ex_s GROUP BY k")
    for sql in (
        "EXPLAIN MATERIALIZED VIEW ex_sv",
        "EXPLAIN PLAN FOR MATERIALIZED VIEW ex_sv",
        "EXPLAIN OPTIMIZED PLAN AS TEXT FOR MATERIALIZED VIEW public.ex_sv",
    ):
        lines, _ = plan(conn, sql)
        text = "\n".join(lines)
        assert lines[0] == "Materialized View public.ex_sv", text
        assert "  Executor: duckdb" in lines
        assert re.search(r"^  Frontier: \d+$", text, re.M)
        assert "  Status: running" in lines
        assert "Rule: engine/rules/general_aggregate.py general_aggregate.general_aggregate" in text
        assert "Group Key: ex_s.k" in text and "Aggregates: max(ex_s.v)" in text
        assert "Scan on ex_s" in nodes(lines)
    rows, oid = plan(conn, "EXPLAIN OPTIMIZED PLAN AS JSON FOR MATERIALIZED VIEW ex_sv")
    doc = rows[0] if isinstance(rows[0], list) else json.loads(rows[0])
    assert oid == 114 and doc[0]["Plan"]["Status"] == "running"
    lines, _ = plan(conn, "EXPLAIN (COSTS OFF) SELECT * FROM ex_sv WHERE k = 1")
    assert lines == ["Seq Scan on ex_sv", "  Filter: (k = 1)"]
    with pytest.raises(psycopg.errors.WrongObjectType):
        conn.execute("EXPLAIN MATERIALIZED VIEW ex_s")
    with pytest.raises(psycopg.errors.UndefinedTable):
        conn.execute("EXPLAIN MATERIALIZED VIEW ex_nothing")


# -- rendering alone (planner/explain.py over DuckDB's own plans) ---------------------------
def test_render_duckdb_plan_as_postgres() -> None:
    import duckdb
    from headwater.planner.explain import Options, from_duckdb, render

    db = duckdb.connect()
    db.execute("CREATE SCHEMA hw")
    db.execute("CREATE TABLE hw.t7 (a INT, b TEXT, _hw_from BIGINT, _hw_to BIGINT)")
    db.execute("CREATE TABLE hw.t8 (a INT, c TEXT, _hw_from BIGINT, _hw_to BIGINT)")
    db.execute("INSERT INTO hw.t7 SELECT i, i::TEXT, i % 7, 1000 FROM range(100) r(i)")
    db.execute("INSERT INTO hw.t8 SELECT i, i::TEXT, i % 7, 1000 FROM range(10) r(i)")
    names = {"hw.t7": ("public", "t"), "hw.t8": ("public", "u")}

    def relation(table: str) -> tuple[str, str] | None:
        return next((v for k, v in names.items() if table.endswith(k)), None)

    sql = (
        "SELECT t.b, count(*) FROM (SELECT a, b FROM hw.t7 WHERE _hw_from <= 3 AND _hw_to > 3)"
        " t JOIN (SELECT a, c FROM hw.t8 WHERE _hw_from <= 3 AND _hw_to > 3) u ON t.a = u.a"
        " WHERE t.a > 1 GROUP BY t.b ORDER BY 2 DESC"
    )
    doc = json.loads(db.execute("EXPLAIN (FORMAT JSON) " + sql).fetchall()[0][1])
    lines = render(from_duckdb(doc[0], relation), Options(costs=False))
    assert lines[0] == "Sort"
    assert lines[1] == "  Sort Key: count(*) DESC"
    assert "  ->  HashAggregate" in lines
    assert "        Group Key: b" in lines
    assert any(x.strip() == "Hash Cond: (t.a = u.a)" for x in lines), lines
    assert any(x.strip() == "->  Seq Scan on t" for x in lines), lines
    assert not any("_hw_" in x for x in lines), lines  # the replica's version terms
    prof = db.execute("EXPLAIN ANALYZE (FORMAT JSON) " + sql).fetchall()[0][1]
    root = from_duckdb(json.loads(prof)["operator"][0], relation)
    lines = render(root, Options(analyze=True), planning_ms=0.5, execution_ms=1.5)
    assert re.search(r"\(actual time=[\d.]+\.\.[\d.]+ rows=\d+ loops=1\)$", lines[0])
    assert lines[-2:] == ["Planning Time: 0.500 ms", "Execution Time: 1.500 ms"]


def test_explain_as_of(conn: psycopg.Connection) -> None:
    """Headwater's AS OF reads explain like any read, at that epoch."""
    conn.execute("CREATE TABLE ex_h (a int)")
    conn.execute("INSERT INTO ex_h SELECT generate_series(1, 10)")
    (epoch,) = conn.execute("SELECT max(epoch) FROM headwater_catalog.epochs").fetchone()
    conn.execute("INSERT INTO ex_h VALUES (11)")
    lines, _ = plan(conn, f"EXPLAIN (COSTS OFF) SELECT * FROM ex_h WHERE a > 3 AS OF {epoch}")
    assert lines == ["Seq Scan on ex_h", "  Filter: (a > 3)"]
    lines, _ = plan(conn, f"EXPLAIN ANALYZE SELECT * FROM ex_h AS OF EPOCH {epoch}")
    assert re.search(r" rows=10 loops=1\)$", lines[0]), lines
