"""The serving path's two renderings of a SELECT give the same results.

Plain reads are rendered from the IR (planner/serving.py) when it covers the
statement, else bound by relations.Binder. For every SELECT of the sqllogictest
corpora (SLT_CORPORA; every sixth one of select2-5 unless HW_IR_ALL=1) and of
tests/test_fuzz_sql.py's grammar that the IR covers,
both SQL texts run on the same DuckDB data (in process, no server) and must give the
same column names, types and rows. `python -m tests.test_ir_serving` prints how many
SELECTs the IR covers and what makes the others fall back, most frequent first.
"""

from __future__ import annotations

import copy
import os
import random
import re
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pglast.ast as A
import pytest
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Column, View
from headwater.catalog.types import resolve_type_name
from headwater.planner import pg_compat
from headwater.planner.ddl import table_from_create
from headwater.planner.ir import PlanBuilder
from headwater.planner.naming import name_targets
from headwater.planner.relations import Binder, deparse
from headwater.planner.scope import column_types
from headwater.planner.serving import _bound_elsewhere, serving_sql
from headwater.storage.replica import quote
from pglast import parse_sql

from tests.sqllogictest.runner import Query, Statement, parse_file
from tests.test_fuzz_sql import TABLES, Gen

CORPORA = Path(
    os.environ.get("SLT_CORPORA", Path(__file__).resolve().parents[2] / "shared" / "corpora")
)
LABELS = {"postgresql"}
TIMEOUT = 10.0  # seconds a query may run in the comparison


def corpus_files(everything: bool) -> list[Path]:
    sqlite = CORPORA / "sqlite"
    files = [sqlite / f"select{i}.test" for i in range(1, 6)]
    files += sorted((sqlite / "evidence").glob("*.test"))
    if everything:
        files += sorted((sqlite / "random").glob("*/*.test"))
        files += sorted((CORPORA / "risingwave").rglob("*.slt*"))
    else:  # a sample of the random files keeps the default run short
        files += sorted((sqlite / "random").glob("*/*.test"))[::25]
    return [f for f in files if f.is_file()]


@dataclass
class Tally:
    selects: int = 0  # SELECT records parsed
    covered: int = 0  # rendered from the IR
    same: int = 0  # ... with the Binder's results
    fallback: Counter[str] = field(default_factory=Counter)  # why not covered
    diffs: list[str] = field(default_factory=list)
    slow: list[str] = field(default_factory=list)  # the IR's SQL ran out of time, not the Binder's

    def report(self) -> str:
        lines = [
            f"{self.selects} SELECTs, {self.covered} rendered from the IR "
            f"({100 * self.covered / max(self.selects, 1):.1f}%), {self.same} with identical "
            f"results, {len(self.diffs)} different, {len(self.slow)} slower than {TIMEOUT} s",
            "fall back to relations.Binder, most frequent first:",
        ]
        lines += [f"  {n:6d}  {why}" for why, n in self.fallback.most_common()]
        lines += [f"  DIFF {d}" for d in self.diffs[:20]]
        lines += [f"  SLOW {d}" for d in self.slow[:10]]
        return "\n".join(lines)


class Harness:
    """A catalog and a DuckDB database holding the same tables; each table `t` is the
    DuckDB table "t" (what both renderings scan)."""

    def __init__(self, compare: bool = True) -> None:
        self.compare = compare  # run both renderings (else only count what the IR covers)
        self.catalog = Catalog()
        self.db = duckdb.connect()
        self.db.execute("SET integer_division = true")
        self.db.execute("SET enable_progress_bar = false")
        pg_compat.install_functions(self.db)
        self.tally = Tally()

    def binder(self) -> Binder:
        return Binder(self.catalog, ("public",), lambda t: f"(SELECT * FROM {quote(t.name)})")

    # -- statements -------------------------------------------------------------------
    def statement(self, sql: str) -> None:
        """CREATE TABLE / VIEW, INSERT, DROP: into both the catalog and DuckDB."""
        try:
            stmts = [s.stmt for s in parse_sql(sql)]
        except Exception:  # noqa: BLE001 - not PostgreSQL: skipped
            return
        for stmt in stmts:
            try:
                self._statement(stmt)
            except Exception:  # noqa: BLE001 - its error is not what is compared here
                pass

    def _statement(self, stmt: Any) -> None:
        cat = self.catalog
        if isinstance(stmt, A.CreateStmt):
            table = table_from_create(stmt, cat.allocate_oid(), "public")
            cols = ", ".join(f"{quote(c.name)} {c.type.duckdb()}" for c in table.columns)
            self.db.execute(f"CREATE TABLE {quote(table.name)} ({cols})")
            cat.add_relation(table)
        elif isinstance(stmt, A.ViewStmt):
            query = deparse(stmt.query)
            self.db.execute(f"DESCRIBE {self.binder_sql(copy.deepcopy(stmt.query))}")
            names = [r[0] for r in self.db.fetchall()]
            if stmt.aliases:
                names[: len(stmt.aliases)] = [a.sval for a in stmt.aliases]
            text = resolve_type_name(["text"], [], 0)
            cols = tuple(Column(n, text) for n in names)
            cat.add_relation(View(cat.allocate_oid(), "public", stmt.view.relname, cols, query))
        elif isinstance(stmt, A.InsertStmt | A.DeleteStmt | A.UpdateStmt):
            self.db.execute(deparse(pg_compat.translate(stmt)))
        elif isinstance(stmt, A.DropStmt):
            for obj in stmt.objects:
                name = obj[-1].sval
                rel = cat.resolve(None, name, ("public",))
                if rel is not None:
                    cat.drop_relation(rel)
                    if not isinstance(rel, View):
                        self.db.execute(f"DROP TABLE IF EXISTS {quote(name)}")

    # -- queries ----------------------------------------------------------------------
    def binder_sql(self, stmt: Any) -> str:
        """The serving path's SQL without the IR (server/queries.py's fallback)."""
        name_targets(stmt)
        pg_compat.rewrite(stmt, column_types=column_types(stmt, self.catalog, ("public",)))
        return self.binder().to_sql(stmt)

    def query(self, sql: str, where: str) -> None:
        try:
            stmt = parse_sql(sql)[0].stmt
        except Exception:  # noqa: BLE001
            return
        if not isinstance(stmt, A.SelectStmt):
            return
        t = self.tally
        t.selects += 1
        tree = copy.deepcopy(stmt)
        name_targets(tree)
        ir = serving_sql(tree, self.binder())
        if ir is None:
            t.fallback[fallback_reason(self.catalog, tree)] += 1
            return
        t.covered += 1
        if not self.compare:
            return
        expected = self.run(self.binder_sql(copy.deepcopy(stmt)))
        actual = self.run(ir)
        if actual[1] == "InterruptException" and expected[0] == "rows":
            t.slow.append(f"{where}: {sql}")
            return
        if expected == actual or (expected[0] == "error" and actual[0] == "error"):
            t.same += 1
        else:
            t.diffs.append(f"{where}: {sql}\n    binder: {expected}\n    ir:     {actual}")

    def run(self, sql: str) -> tuple[str, Any]:
        timer = threading.Timer(TIMEOUT, self.db.interrupt)
        timer.start()
        try:
            cur = self.db.execute(sql)
            names = tuple(d[0] for d in cur.description)
            types = tuple(str(d[1]) for d in cur.description)
            rows = sorted(repr(r) for r in cur.fetchall())
            return "rows", (names, types, rows)
        except duckdb.Error as e:
            return "error", type(e).__name__
        finally:
            timer.cancel()


def fallback_reason(catalog: Catalog, stmt: Any) -> str:
    """Why the IR does not cover `stmt`: the builder's message, its specifics cut."""
    if _bound_elsewhere(stmt):
        return "a function the server binds (sequences, write fence) or an internal one"
    try:
        PlanBuilder(catalog, ("public",), serving=True).build(stmt)
    except Exception as e:  # noqa: BLE001
        msg = str(e).removesuffix(" is not supported in materialized views")
        msg = re.sub(r'"[^"]*"', '"…"', msg)
        msg = re.sub(r"'[^']*'", "'…'", msg)
        return f"{type(e).__name__}: {msg}"
    return "(covered when rebuilt)"


def run_corpora(files: list[Path], compare: bool = True, every: int = 1) -> Tally:
    """`every`: compare one SELECT in that many (the statements all run)."""
    tally = Tally()
    for path in files:
        h = Harness(compare)
        h.tally = tally
        try:
            records = parse_file(path)
        except Exception:  # noqa: BLE001
            continue
        queries = 0
        for rec in records:
            if any((c.kind == "onlyif") != (c.label in LABELS) for c in rec.conditions):
                continue
            if isinstance(rec, Statement):
                h.statement(rec.sql)
            elif isinstance(rec, Query):
                queries += 1
                if queries % every == 0:
                    h.query(rec.sql, f"{path.name}:{rec.line}")
    return tally


def run_fuzz(seed: int, statements: int) -> Tally:
    """tests/test_fuzz_sql.py's grammar, its writes applied, its SELECTs compared."""
    rng = random.Random(seed)
    gen = Gen(rng)
    h = Harness()
    for t, cols in TABLES.items():
        h.statement(f"CREATE TABLE {t} ({', '.join(cols)})")
    for _ in range(statements):
        if rng.random() < 0.3:
            h.statement(gen.write())
        else:
            h.query(gen.select(), f"seed {seed}")
    return h.tally


# select2-5 (~1,000 SELECTs each, ~1 minute each): every sixth SELECT in the default run,
# which must stay under CI's 40 minutes; all of them with HW_IR_ALL=1 (or __main__)
_SAMPLED = {f"select{i}.test" for i in range(2, 6)}


@pytest.mark.parametrize("path", corpus_files(everything=False), ids=lambda p: p.name)
def test_corpus_ir_matches_binder(path: Path) -> None:
    every = 6 if path.name in _SAMPLED and not os.environ.get("HW_IR_ALL") else 1
    tally = run_corpora([path], every=every)
    assert not tally.diffs and not tally.slow, tally.report()


def test_fuzz_ir_matches_binder() -> None:
    seed = int(os.environ.get("HW_SEED", random.randrange(1 << 30)))
    tally = run_fuzz(seed, int(os.environ.get("HW_FUZZ_STATEMENTS", "1500")))
    assert not tally.diffs, f"seed {seed}\n" + tally.report()
    assert tally.covered > tally.selects // 2, tally.report()


if __name__ == "__main__":
    everything = "--all" in sys.argv  # also the risingwave corpus
    compare = "--count" not in sys.argv  # only count what the IR covers
    print("corpora:\n" + run_corpora(corpus_files(everything), compare).report())
    print("fuzz:\n" + run_fuzz(1, 3000).report())
