"""The sqllogictest runner against real PostgreSQL 15 (the oracle).

select1.test must pass entirely: it proves the parser, the SQLite value formatting
(I/R/T, hashing, rowsort) and statement handling. A file with wrong expectations
must fail where it is wrong, so that passing means something.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg_oracle import PgOracle, start_postgres
from tests.sqllogictest.runner import Runner, RunResult, format_report

pytestmark = pytest.mark.oracle

CORPORA = Path(
    os.environ.get("SLT_CORPORA", Path(__file__).resolve().parents[2] / "shared" / "corpora")
)


@pytest.fixture(scope="module")
def pg() -> Iterator[PgOracle]:
    with start_postgres() as server:
        yield server


@pytest.fixture
def runner(pg: PgOracle) -> Runner:
    return Runner(pg.host, pg.port, pg.user, pg.dbname, timeout=60)


def test_select1_passes_on_postgres(runner: Runner) -> None:
    path = CORPORA / "sqlite" / "select1.test"
    if not path.is_file():
        pytest.skip(f"corpus not found: {path} (set SLT_CORPORA)")
    result = runner.run_file(path)
    report = format_report(RunResult([result]), show_failures=10)
    assert result.error is None, report
    assert result.failed == 0, report
    assert result.skipped == 0 and result.passed > 1000, report  # every record ran


BAD_FILE = """\
statement ok
CREATE TABLE tb(a INTEGER, b TEXT)

statement ok
INSERT INTO tb VALUES(1,'x'),(2,''),(3,NULL)

# right: I truncates numerics, R is %.3f, T spells out empty and NULL
query IRT rowsort
SELECT a + 0.5, a, b FROM tb
----
1
1.000
x
2
2.000
(empty)
3
3.000
NULL

# right: 9 values, over the default threshold of 8, are hashed
query I rowsort
SELECT a FROM tb, (VALUES (1),(2),(3)) v(x)
----
9 values hashing to 245313dc4e9fc19df7ee93651efe9bf2

query I rowsort
SELECT a + 1 FROM tb, (VALUES (1),(2),(3)) v(x)
----
9 values hashing to 245313dc4e9fc19df7ee93651efe9bf2

query I nosort
SELECT a FROM tb ORDER BY a
----
1
2
4

statement error
SELECT 1

statement count 2
UPDATE tb SET a = a

statement error (42P01)
SELECT * FROM nope

onlyif mysql
statement ok
SELECT nonsense
"""


def test_runner_detects_wrong_results(runner: Runner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.test"
    bad.write_text(BAD_FILE)
    result = runner.run_file(bad)
    report = format_report(RunResult([result]), show_failures=10)
    assert [f.sql.split()[-1] for f in result.failures] == ["v(x)", "a", "1", "a"], report
    assert (result.passed, result.failed, result.skipped) == (5, 4, 1), report
    assert result.skips[0].reason == "onlyif mysql"
