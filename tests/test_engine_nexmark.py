"""Nexmark q0-q22 (bench/nexmark.py: RisingWave's SQL with TUMBLE and HOP; q11's session
windows written with window functions, q12's processing time the generator's p_time) as
views over the generated person/auction/bid/side_input streams, against PostgreSQL 15 at
every epoch (windows written as plain SQL for it). Views are created before the data
(epoch 0), then advanced without Spark in batches of 1-5 epochs. HW_ENGINE_SEED=n reruns
a seed.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Column, Table
from headwater.catalog.types import ColumnType, type_named
from headwater.engine.delta import ScanInfo
from headwater.engine.engine import Engine
from headwater.engine.spool import SpoolWriter

from bench.nexmark import (
    QUERIES,
    TABLES,
    Generator,
    apply_pg,
    arrow_changes,
    create_pg_tables,
    postgres_form,
)
from tests.test_engine_support import assert_views_equal, normalize, plan_of

pytestmark = pytest.mark.oracle

OIDS = {n: 17000 + i for i, n in enumerate(TABLES)}


def _catalog() -> Catalog:
    cat = Catalog()
    for n, cols in TABLES.items():
        columns = tuple(Column(c, ColumnType(type_named(t), -1)) for c, t, _, _ in cols)  # type: ignore[arg-type]
        cat.add_relation(Table(OIDS[n], "public", n, columns))
    return cat


SCANS = {
    OIDS[n]: ScanInfo(OIDS[n], [c for c, *_ in cols], [d for _, _, d, _ in cols])
    for n, cols in TABLES.items()
}


@pytest.fixture
def pg(pg_oracle: object) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_oracle.dsn) as c:  # type: ignore[attr-defined]
        yield c


def _expect(pg: psycopg.Connection) -> list[list[tuple]]:
    out = []
    with pg.cursor() as cur:
        for sql in QUERIES.values():
            cur.execute(postgres_form(sql))
            out.append(normalize(cur.fetchall()))
    pg.commit()
    return out


def test_nexmark_views_equal_postgres_at_every_epoch(
    pg: psycopg.Connection, tmp_path: Path
) -> None:
    seed = int(os.environ.get("HW_ENGINE_SEED", random.randrange(1_000_000)))
    rng = random.Random(seed)
    gen = Generator(seed)
    with pg.cursor() as cur:
        create_pg_tables(cur)
    pg.commit()
    writer = SpoolWriter(tmp_path / "spool")
    engine = Engine(tmp_path / "state", tmp_path / "spool")
    cat = _catalog()
    names = list(QUERIES)
    for i, q in enumerate(names):
        plan = plan_of(QUERIES[q], cat)
        engine.create_view(90000 + i, plan, {o: SCANS[o] for o in plan.tables}, at_epoch=0)
    expected = {}
    epochs = int(os.environ.get("HW_NEXMARK_EPOCHS", "40"))
    for e in range(1, epochs + 1):
        rows: dict[str, list[tuple]] = {n: [] for n in TABLES}
        for name, row, w in gen.events(rng.randrange(0, 12)):
            rows[name].append((*row, w))
        with pg.cursor() as cur:
            apply_pg(cur, rows)
        pg.commit()
        writer.write_epoch(e, {OIDS[n]: t for n, t in arrow_changes(rows).items()})
        expected[e] = _expect(pg)
        if rng.random() < 0.4:
            engine.advance(e)
    engine.advance(epochs)
    assert_views_equal(engine, expected, 90000, names, seed, shown=3)
