"""../shared/corpora/risingwave (RisingWave's e2e_test files) through the project's runner,
against Headwater.

Each file runs in its own schema on the session's server. Every record must pass, be
skipped by the runner for a stated reason (``flush`` and RisingWave-only settings are
no-ops here), or be listed in sqllogictest/risingwave_expected.tsv with the status it
gets now:

* ``unsupported``: Headwater refused it with 0A000, or it fails only because an
  earlier unsupported record did not create what it uses (``after line N``);
* ``fail``: anything else: RisingWave-only SQL or output (``risingwave-only:``), a
  Headwater limitation or bug (``headwater:``), an engine bug (``engine bug:``), or a
  consequence of an earlier failure (``after line N``).

A pass that turns into a failure fails the test, and so does a listed record that
now passes (update the list: ``python -m tests.test_sqllogictest_risingwave --write``
runs the corpus on a fresh server and rewrites the list, keeping the reasons given to
records whose status did not change).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from tests.sqllogictest.runner import FileResult, Runner, RunResult, format_report

CORPORA = Path(
    os.environ.get("SLT_CORPORA", Path(__file__).resolve().parents[2] / "shared" / "corpora")
)
RISINGWAVE = CORPORA / "risingwave"
FILES = sorted(p for p in RISINGWAVE.rglob("*") if p.name.endswith((".slt", ".slt.part")))
EXPECTED = Path(__file__).parent / "sqllogictest" / "risingwave_expected.tsv"
# Reads of a view wait for it (read-your-writes); the first ones wait for the Spark
# stage to start, which takes a minute on a loaded machine.
SESSION_SQL = ("SET headwater.freshness_timeout = '120s'",)


def schema_for(path: Path) -> str:
    rel = str(path.relative_to(RISINGWAVE))
    return ("rw_" + re.sub(r"[^a-z0-9]+", "_", rel.lower().removesuffix(".part")))[:63]


def load_expected(path: Path = EXPECTED) -> dict[tuple[str, int], tuple[str, str]]:
    out: dict[tuple[str, int], tuple[str, str]] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, lineno, status, reason = line.split("\t", 3)
            out[(name, int(lineno))] = (status, reason)
    return out


def make_runner(host: str, port: int, path: Path) -> Runner:
    return Runner(
        host,
        port,
        "headwater",
        "headwater",
        timeout=150,
        schema=schema_for(path),
        classify_unsupported=True,
        init_sql=SESSION_SQL,
    )


def compare(
    name: str, result: FileResult, expected: dict[tuple[str, int], tuple[str, str]]
) -> list[str]:
    """Differences between a file's outcomes and its listed expectations."""
    problems = []
    seen = set()
    for o in result.outcomes:
        key = (name, o.line)
        seen.add(key)
        want = expected.get(key)
        if o.status in ("pass", "skip"):
            if want is not None:
                problems.append(f"{name}:{o.line}: listed as {want[0]} ({want[1]}), now {o.status}")
        elif want is None:
            problems.append(f"{name}:{o.line}: {o.status}, not listed: {o.reason}")
        elif want[0] != o.status:
            problems.append(f"{name}:{o.line}: listed as {want[0]}, now {o.status}: {o.reason}")
    for key, (status, _) in expected.items():
        if key[0] == name and key not in seen:
            problems.append(f"{name}:{key[1]}: listed as {status}, but no record there")
    if result.error:
        problems.append(f"{name}: {result.error}")
    return problems


def warm_up(dsn: str) -> None:
    """Create a materialized view and wait until it follows a write: the Spark stage
    is running before the files read their views."""
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DROP SCHEMA IF EXISTS rw_warmup CASCADE")
        c.execute("CREATE SCHEMA rw_warmup")
        c.execute("CREATE TABLE rw_warmup.t (x int)")
        c.execute("CREATE MATERIALIZED VIEW rw_warmup.v AS SELECT count(*) AS n FROM rw_warmup.t")
        c.execute("INSERT INTO rw_warmup.t VALUES (1)")
        c.execute("SET headwater.freshness_timeout = '300s'")
        deadline = time.monotonic() + 300
        while True:
            try:
                row = c.execute("SELECT n FROM rw_warmup.v").fetchone()
                if row == (1,):
                    break
            except psycopg.errors.QueryCanceled:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("the materialized view did not follow a write in 300 s")
        c.execute("DROP SCHEMA rw_warmup CASCADE")


@pytest.fixture(scope="module")
def warm_server(hw_server):  # type: ignore[no-untyped-def]
    if RISINGWAVE.is_dir():
        warm_up(hw_server.dsn)
    return hw_server


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(RISINGWAVE)))
def test_risingwave_corpus(warm_server, path: Path) -> None:  # type: ignore[no-untyped-def]
    name = str(path.relative_to(RISINGWAVE))
    result = make_runner(warm_server.host, warm_server.port, path).run_file(path)
    problems = compare(name, result, load_expected())
    report = format_report(RunResult([result]), show_failures=10)
    hint = (
        f"\n\nA listed record that passes now, or a new failure to accept: update {EXPECTED.name}"
        " (python -m tests.test_sqllogictest_risingwave --write)\n\n"
    )
    assert not problems, "\n".join(problems) + hint + report


def test_corpus_present() -> None:
    if not RISINGWAVE.is_dir():
        pytest.skip(f"corpus not found: {RISINGWAVE} (set SLT_CORPORA)")
    assert len(FILES) == 30, [str(p) for p in FILES]


# ---------------------------------------------------------------- the list


def expected_rows(
    results: list[FileResult], old: dict[tuple[str, int], tuple[str, str]]
) -> list[tuple[str, int, str, str]]:
    """The list for these results: a record keeps its reason while its status stays;
    ``after line N`` reasons name line N's reason."""
    rows: dict[tuple[str, int], tuple[str, str]] = {}
    for r in results:
        name = str(Path(r.path).relative_to(RISINGWAVE))
        for o in r.outcomes:
            if o.status not in ("unsupported", "fail"):
                continue
            prior = old.get((name, o.line))
            reason = o.reason
            m = re.match(r"after line (\d+): ", reason)
            root = rows.get((name, int(m.group(1)))) if m else None
            if m and root is not None:
                root_reason = re.sub(r"^after line \d+: ", "", root[1])
                reason = f"after line {m.group(1)}: {root_reason}"
            elif prior is not None and prior[0] == o.status:
                reason = prior[1]
            rows[(name, o.line)] = (o.status, reason)
    return [(n, line, s, why) for (n, line), (s, why) in rows.items()]


HEADER = """\
# RisingWave e2e_test records (../shared/corpora/risingwave) that do not pass on
# Headwater: file, record line, status (unsupported: refused with 0A000, or caused by
# such a refusal; fail: anything else), reason. Reasons: "unsupported: <message>" is
# the server's; "risingwave-only:" RisingWave's own SQL or output (PostgreSQL 15 does
# not accept it or answers otherwise); "headwater:" a Headwater limitation or bug;
# "engine bug:"; "after line N:" fails because record N did. Checked by
# tests/test_sqllogictest_risingwave.py; regenerate with
# python -m tests.test_sqllogictest_risingwave --write
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.test_sqllogictest_risingwave")
    p.add_argument("--port", type=int, help="a running server (default: start one)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--write", action="store_true", help=f"rewrite {EXPECTED.name}")
    a = p.parse_args(argv)
    server = None
    if a.port is None:
        from tests.hwserver import start_temp_server

        server = start_temp_server()
        host, port = server.host, server.port
    else:
        host, port = a.host, a.port
    try:
        warm_up(f"host={host} port={port} user=headwater dbname=headwater")
        results = [make_runner(host, port, f).run_file(f) for f in FILES]
    finally:
        if server is not None:
            server.stop()
    old = load_expected() if EXPECTED.exists() else {}
    print(format_report(RunResult(results), show_failures=0, show_skips=False))
    problems = [
        x for r in results for x in compare(str(Path(r.path).relative_to(RISINGWAVE)), r, old)
    ]
    print("\n".join(problems) or "no differences from the list")
    counts = Counter(o.status for r in results for o in r.outcomes)
    print(dict(counts))
    if a.write:
        rows = expected_rows(results, old)
        text = HEADER + "".join(f"{n}\t{line}\t{s}\t{why}\n" for n, line, s, why in rows)
        EXPECTED.write_text(text)
        print(f"wrote {len(rows)} records to {EXPECTED}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
