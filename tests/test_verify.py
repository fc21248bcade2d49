"""`headwater verify VIEW [--epoch N]` (headwater/verify.py) against a real server.

Intact views verify (exit 0), also at an older epoch and with duplicate rows; a
difference planted for real in the view's maintained output (the engine's DuckDB
state, edited while the server is stopped) is found after a restart (exit 1, the
rows printed); an unknown view or epoch is an error (exit 2) that names it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import duckdb
import psycopg
import pytest
from headwater.storage.replica import LIVE

from tests.hwserver import REPO, HeadwaterServer

WAIT = 240.0  # a JVM start takes 6-90 s on this machine, depending on its load


@pytest.fixture(scope="module")
def hw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeadwaterServer]:
    server = HeadwaterServer(tmp_path_factory.mktemp("verify") / "data").start()
    yield server
    server.stop()


def verify(hw: HeadwaterServer, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "headwater.cli", "verify", *args, "--port", str(hw.port)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)


def _caught_up(c: psycopg.Connection[Any], names: list[str]) -> int:
    deadline = time.monotonic() + WAIT
    while True:
        cur = c.execute("SELECT name, status, lag_epochs, frontier FROM headwater_catalog.views")
        rows = [r for r in cur.fetchall() if r[0] in names]
        if len(rows) == len(names) and all(r[1] == "running" and r[2] == 0 for r in rows):
            return min(r[3] for r in rows)
        if time.monotonic() >= deadline:  # a hang guard, not a speed check
            pytest.fail(f"views not caught up: {rows}")
        time.sleep(0.2)


def output_table(
    db: duckdb.DuckDBPyConnection, oid: int, columns: list[str]
) -> tuple[str, dict[str, str], str]:
    """Where the engine keeps a view's output versions (engine/engine.py): table o{oid}
    for a view in no family, else view o{oid} selecting them from its family's table;
    their columns are named by position. Returns that table, its column for each of the
    view's, and the filter to the view's rows."""
    sql = db.execute("SELECT sql FROM duckdb_views() WHERE view_name = ?", [f"o{oid}"]).fetchone()
    if sql is None:
        physical = [r[0] for r in db.execute(f"DESCRIBE o{oid}").fetchall()][: len(columns)]
        return f"o{oid}", dict(zip(columns, physical, strict=True)), "true"
    m = re.fullmatch(
        r"CREATE VIEW \w+ AS SELECT (.*), _n, _from, _to FROM (\w+) WHERE (.*);", sql[0]
    )
    assert m is not None, sql
    physical = [c.strip() for c in m.group(1).split(",")]
    return m.group(2), dict(zip(columns, physical, strict=True)), m.group(3)


def test_verify(hw: HeadwaterServer) -> None:
    with psycopg.connect(hw.dsn, autocommit=True) as c:
        c.execute("CREATE TABLE vf_orders (id int, cust text, amount numeric(10,2), w float8)")
        c.execute("CREATE TABLE vf_cust (cust text, region text)")
        c.execute("INSERT INTO vf_cust VALUES ('a', 'north'), ('b', 'south'), ('c', 'north')")
        c.execute(
            "INSERT INTO vf_orders SELECT g, CASE g % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b'"
            " ELSE 'c' END, g * 1.25, g / 7.0 FROM generate_series(1, 60) AS s(g)"
        )
        c.execute(
            "CREATE MATERIALIZED VIEW vf_by_region AS SELECT region, count(*) AS n,"
            " sum(amount) AS total, sum(w) AS w FROM vf_orders JOIN vf_cust USING (cust)"
            " GROUP BY region"
        )
        c.execute("CREATE MATERIALIZED VIEW vf_custs AS SELECT cust FROM vf_orders WHERE id > 50")
        # in another schema, a name to quote, over a table of public named unqualified
        c.execute('CREATE SCHEMA "Vf Schema"')
        c.execute(
            'CREATE MATERIALIZED VIEW "Vf Schema"."Odd ""View""" AS'
            " SELECT cust, count(*) AS n FROM vf_orders GROUP BY cust"
        )
        old = _caught_up(c, ["vf_by_region", "vf_custs", 'Odd "View"'])
        c.execute("UPDATE vf_orders SET amount = amount + 1 WHERE id % 4 = 0")
        c.execute("DELETE FROM vf_orders WHERE id % 9 = 0")
        c.execute("INSERT INTO vf_orders VALUES (61, 'b', 3.5, 0.1), (62, 'b', 3.5, 0.1)")
        front = _caught_up(c, ["vf_by_region", "vf_custs"])
        assert front > old
        oids = dict(c.execute("SELECT name, oid FROM headwater_catalog.views").fetchall())
        oid, custs = oids["vf_by_region"], oids["vf_custs"]

    # intact: at the frontier, at an older epoch, a view with duplicate rows
    r = verify(hw, "vf_by_region")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"public.vf_by_region at epoch {front}: OK, 2 rows" in r.stdout
    r = verify(hw, "public.vf_by_region", "--epoch", str(old))
    assert r.returncode == 0 and f"at epoch {old}: OK" in r.stdout, r.stdout + r.stderr
    r = verify(hw, 'Vf Schema.Odd "View"')
    assert r.returncode == 0 and "OK, 3 rows" in r.stdout, r.stdout + r.stderr
    r = verify(hw, "vf_custs")
    assert r.returncode == 0 and "OK, 11 rows" in r.stdout, r.stdout + r.stderr

    # errors name what is wrong
    r = verify(hw, "vf_nope")
    assert r.returncode == 2 and 'materialized view "vf_nope" does not exist' in r.stderr, r
    r = verify(hw, "vf_custs", "--epoch", str(front + 10**6))
    assert r.returncode == 2 and "vf_custs" in r.stderr, r

    # plant a difference in the maintained output while the server is stopped: the
    # north row's total is off by 1000, and one row of vf_custs is doubled
    hw.stop()
    db = duckdb.connect(str(hw.data_dir / "engine" / "engine.duckdb"))
    try:
        table, col, where = output_table(db, oid, ["region", "n", "total", "w"])
        live = f"{where} AND _to = {LIVE}"  # the view's current rows
        region, n, total = col["region"], col["n"], col["total"]
        before = db.execute(
            f"SELECT {n}, {total} FROM {table} WHERE {live} AND {region} = 'north'"
        ).fetchone()
        db.execute(
            f"UPDATE {table} SET {total} = {total} + 1000 WHERE {live} AND {region} = 'north'"
        )
        table, col, where = output_table(db, custs, ["cust"])
        db.execute(
            f"UPDATE {table} SET _n = _n + 1 WHERE rowid = (SELECT min(rowid) FROM {table}"
            f" WHERE {where} AND _to = {LIVE} AND {col['cust']} = 'b')"
        )
    finally:
        db.close()
    hw.start()
    with psycopg.connect(hw.dsn, autocommit=True) as c:
        _caught_up(c, ["vf_by_region", "vf_custs"])

    r = verify(hw, "vf_by_region")
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout
    print(f"\n$ headwater verify vf_by_region  # exit {r.returncode}\n{out}")
    assert "public.vf_by_region at epoch" in out and "DIFFERENT: 2 rows differ" in out, out
    n, total = before
    assert f"- (north, {n}, {total}," in out, out
    assert f"+ (north, {n}, {total + 1000}," in out, out
    assert "south" not in out, out
    # at the epoch before the planted version, the view is still right
    r = verify(hw, "vf_by_region", "--epoch", str(old))
    assert r.returncode == 0, r.stdout + r.stderr

    r = verify(hw, "vf_custs", "--limit", "1")
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert "DIFFERENT" in lines[0] and lines[1].startswith("+ (b)"), r.stdout


def test_multiset_diff() -> None:
    """Rows compare as multisets: a copy more or less is a difference; doubles to 12
    significant digits (an incremental sum adds in another order); NaN equals NaN."""
    from headwater.verify import diff, rows_of

    a = rows_of([(1, 0.1 + 0.2), (2, float("nan")), (3, "x"), (3, "x")])
    b = rows_of([(1, 0.3), (2, float("nan")), (3, "x")])
    assert diff(a, b) == [("-", (3, "x"))]
    assert diff(b, a) == [("+", (3, "x"))]
    assert diff(a, a) == []
    assert diff(rows_of([(1, [1, 2])]), rows_of([(1, [2, 1])])) == [
        ("-", (1, (1, 2))),
        ("+", (1, (2, 1))),
    ]
