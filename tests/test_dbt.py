"""dbt-postgres against Headwater: `dbt seed`, `dbt run` (table, incremental, view and
materialized-view models; the incremental one twice, the second time through dbt's
CREATE TEMP TABLE ... AS and DELETE/INSERT) and `dbt test`, on the project in
tests/dbt_project.

dbt-core 1.10.x and dbt-postgres 1.9.x install from PyPI alone (the newest dbt-core
pulls a parser that downloads at install time); pyproject's `test` extra pins them, so
`make test` installs them. Table and view models end with dbt's swap, `ALTER TABLE ...
RENAME TO`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.hwserver import HeadwaterServer

PROJECT = Path(__file__).parent / "dbt_project"
DBT = Path(sys.executable).parent / "dbt"


def _dbt(cwd: Path, port: int, *args: str) -> dict[str, tuple[str, str]]:
    """Run a dbt command; the status and message of each node it ran."""
    env = {
        **os.environ,
        "DBT_HOST": "127.0.0.1",
        "DBT_PORT": str(port),
        "DBT_SCHEMA": "dbt_demo",
        "DBT_PROFILES_DIR": str(cwd),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    }
    out = subprocess.run(
        [str(DBT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    results = cwd / "target" / "run_results.json"
    if not results.exists():
        raise AssertionError(f"dbt {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    nodes = json.loads(results.read_text())["results"]
    results.unlink()
    return {n["unique_id"].split(".")[2]: (n["status"], n.get("message") or "") for n in nodes}


def test_dbt_run_and_test(hw_server: HeadwaterServer, tmp_path: Path) -> None:
    if not DBT.exists():
        pytest.skip("dbt is not installed (see this module's docstring)")
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("target", "logs"))
    port = hw_server.port
    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS dbt_demo CASCADE")

    assert _dbt(project, port, "seed") == {"people": ("success", "INSERT 4")}
    run = _dbt(project, port, "run")
    assert run["people_log"] == ("success", "SELECT 4")  # incremental, first run: CTAS
    assert run["team_counts_mv"][0] == "success"
    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO dbt_demo.people VALUES (5, 'ken', 'kernel', 88.00)")
    again = _dbt(project, port, "run", "-s", "people_log")  # CREATE TEMP TABLE ... AS
    assert again["people_log"][0] == "success"
    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        ids = conn.execute("SELECT id FROM dbt_demo.people_log ORDER BY id").fetchall()
        assert ids == [(1,), (2,), (3,), (4,), (5,)]
        members = conn.execute(
            "SELECT team, members FROM dbt_demo.team_counts_mv ORDER BY team"
        ).fetchall()
        assert members == [("core", 2), ("kernel", 2), ("lang", 1)]

    tests = _dbt(project, port, "test")
    for model in ("team_totals", "core_people"):  # table and view models: dbt's RENAME swap
        assert run[model][0] == "success", run[model]
    for name, (status, message) in tests.items():
        assert status == "pass", (name, message)
