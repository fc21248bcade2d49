"""TPC-H shaped views (queries 1, 6, 12, 14: the ones without LIMIT) under random
churn of lineitem, orders and part, equal to PostgreSQL 15 at every epoch."""

from __future__ import annotations

import datetime
import decimal
import random
from pathlib import Path

import psycopg
import pyarrow as pa
import pytest
from headwater.catalog.catalog import Catalog
from headwater.catalog.objects import Column, Table
from headwater.catalog.types import DATE, INT4, NUMERIC, TEXT, ColumnType, numeric_typmod
from headwater.engine.delta import ScanInfo
from headwater.engine.engine import Engine
from headwater.engine.spool import SpoolWriter

from tests.test_engine_support import arrow_rows, normalize, plan_of

pytestmark = pytest.mark.oracle

NUM = ColumnType(NUMERIC, numeric_typmod(15, 2))
TABLES = {
    1: (
        "lineitem",
        [
            ("l_orderkey", INT4),
            ("l_partkey", INT4),
            ("l_quantity", NUM),
            ("l_extendedprice", NUM),
            ("l_discount", NUM),
            ("l_tax", NUM),
            ("l_returnflag", TEXT),
            ("l_linestatus", TEXT),
            ("l_shipdate", DATE),
            ("l_commitdate", DATE),
            ("l_receiptdate", DATE),
            ("l_shipmode", TEXT),
        ],
    ),
    2: (
        "orders",
        [
            ("o_orderkey", INT4),
            ("o_custkey", INT4),
            ("o_orderdate", DATE),
            ("o_orderpriority", TEXT),
        ],
    ),
    3: ("part", [("p_partkey", INT4), ("p_type", TEXT)]),
}
QUERIES = {
    "q1": "select l_returnflag, l_linestatus, sum(l_quantity) as sum_qty,"
    " sum(l_extendedprice) as sum_base_price,"
    " sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,"
    " sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,"
    " avg(l_quantity) as avg_qty, avg(l_extendedprice) as avg_price,"
    " avg(l_discount) as avg_disc, count(*) as count_order from lineitem"
    " where l_shipdate <= date '1998-12-01' - interval '90' day"
    " group by l_returnflag, l_linestatus order by l_returnflag, l_linestatus",
    "q6": "select sum(l_extendedprice * l_discount) as revenue from lineitem"
    " where l_shipdate >= date '1994-01-01' and l_shipdate < date '1994-01-01' + interval '1' year"
    " and l_discount between 0.06 - 0.01 and 0.06 + 0.01 and l_quantity < 24",
    "q12": "select l_shipmode, sum(case when o_orderpriority = '1-URGENT'"
    " or o_orderpriority = '2-HIGH' then 1 else 0 end) as high_line_count,"
    " sum(case when o_orderpriority <> '1-URGENT' and o_orderpriority <> '2-HIGH'"
    " then 1 else 0 end) as low_line_count from orders, lineitem"
    " where o_orderkey = l_orderkey and l_shipmode in ('MAIL', 'SHIP')"
    " and l_commitdate < l_receiptdate and l_shipdate < l_commitdate"
    " and l_receiptdate >= date '1994-01-01'"
    " and l_receiptdate < date '1994-01-01' + interval '1' year group by l_shipmode",
    "q14": "select 100.00 * sum(case when p_type like 'PROMO%'"
    " then l_extendedprice * (1 - l_discount) else 0 end)"
    " / sum(l_extendedprice * (1 - l_discount)) as promo_revenue from lineitem, part"
    " where l_partkey = p_partkey and l_shipdate >= date '1995-09-01'"
    " and l_shipdate < date '1995-09-01' + interval '1' month",
}
ARROW = {"INTEGER": pa.int32(), "VARCHAR": pa.string(), "DATE": pa.date32()}


def _catalog() -> Catalog:
    c = Catalog()
    for oid, (name, cols) in TABLES.items():
        c.add_relation(
            Table(
                oid,
                "public",
                name,
                tuple(
                    Column(n, t if isinstance(t, ColumnType) else ColumnType(t, -1))
                    for n, t in cols
                ),
            )
        )
    return c


def _row(rng: random.Random, oid: int) -> tuple:
    day = datetime.date(1994, 1, 1)

    def date() -> datetime.date:
        return day + datetime.timedelta(days=rng.randrange(0, 1800))

    def money(lo: int, hi: int) -> decimal.Decimal:
        return decimal.Decimal(rng.randrange(lo, hi)) / 100

    if oid == 1:
        return (
            rng.randrange(1, 30),
            rng.randrange(1, 10),
            money(100, 5000),
            money(100, 10000),
            money(0, 11),
            money(0, 9),
            rng.choice("RAN"),
            rng.choice("OF"),
            date(),
            date(),
            date(),
            rng.choice(["MAIL", "SHIP", "AIR", "RAIL"]),
        )
    if oid == 2:
        return (
            rng.randrange(1, 30),
            rng.randrange(1, 10),
            date(),
            rng.choice(["1-URGENT", "2-HIGH", "3-MEDIUM", "5-LOW"]),
        )
    return (rng.randrange(1, 10), rng.choice(["PROMO BRUSHED", "STANDARD X", "PROMO Y", "ECO"]))


def test_tpch_views_equal_postgres(pg_oracle: object, tmp_path: Path) -> None:
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    cat = _catalog()
    pg = psycopg.connect(pg_oracle.dsn)  # type: ignore[attr-defined]
    with pg.cursor() as cur:
        for oid, (name, _) in TABLES.items():
            t = cat.by_oid(oid)
            cur.execute(f"DROP TABLE IF EXISTS {name}")
            cols = ", ".join(f"{c.name} {c.type.sql()}" for c in t.columns)  # type: ignore[union-attr]
            cur.execute(f"CREATE TABLE {name} (hw_id int PRIMARY KEY, {cols})")
    pg.commit()
    writer = SpoolWriter(tmp_path / "spool")
    engine = Engine(tmp_path / "state", tmp_path / "spool")
    scans = {}
    for oid in TABLES:
        t = cat.by_oid(oid)
        scans[oid] = ScanInfo(
            oid, [c.name for c in t.columns], [c.type.duckdb() for c in t.columns]
        )  # type: ignore[union-attr]
    vids = {}
    for i, (name, sql) in enumerate(QUERIES.items()):
        plan = plan_of(sql, cat)
        engine.create_view(
            60000 + i, plan, {o: scans[o] for o in plan.tables}, name=name, at_epoch=0
        )
        vids[name] = 60000 + i
    live: dict[int, dict[int, tuple]] = {oid: {} for oid in TABLES}
    next_id = 1
    expected: dict[int, dict[str, list[tuple]]] = {}
    for epoch in range(1, 61):
        changes = {}
        with pg.cursor() as cur:
            for oid, (name, cols) in TABLES.items():
                rows = []
                for _ in range(rng.randrange(0, 8 if oid == 1 else 3)):
                    if live[oid] and rng.random() < 0.35:  # delete or update
                        rid = rng.choice(list(live[oid]))
                        old = live[oid].pop(rid)
                        rows.append((*old, -1))
                        cur.execute(f"DELETE FROM {name} WHERE hw_id = %s", (rid,))
                        if rng.random() < 0.5:
                            continue
                    rid, next_id = next_id, next_id + 1
                    new = _row(rng, oid)
                    live[oid][rid] = new
                    rows.append((*new, 1))
                    cur.execute(
                        f"INSERT INTO {name} VALUES (%s, {', '.join(['%s'] * len(new))})",
                        (rid, *new),
                    )
                if rows:
                    data = list(zip(*rows, strict=True))
                    arrays = {}
                    for j, (c, t) in enumerate(cols):
                        dt = (t if isinstance(t, ColumnType) else ColumnType(t, -1)).duckdb()
                        arrays[c] = pa.array(data[j], ARROW.get(dt, pa.decimal128(15, 2)))
                    arrays["_hw_w"] = pa.array(data[-1], pa.int32())
                    changes[oid] = pa.table(arrays)
            pg.commit()
            for name, sql in QUERIES.items():
                cur.execute(sql)
                expected.setdefault(epoch, {})[name] = normalize(cur.fetchall())
            pg.commit()
        writer.write_epoch(epoch, changes)
        if rng.random() < 0.3:
            engine.advance(epoch)
    engine.advance(60)
    bad = []
    for epoch, per_view in expected.items():
        for name, rows in per_view.items():
            got = normalize(arrow_rows(engine.read(vids[name], epoch)))
            if got != rows:
                bad.append((name, epoch, rows[:3], got[:3]))
    failed = [(s.name, s.error) for s in engine.status() if s.status != "running"]
    engine.close()
    with pg.cursor() as cur:  # the oracle is shared by the whole test session
        for name, _ in TABLES.values():
            cur.execute(f"DROP TABLE IF EXISTS {name}")
    pg.commit()
    pg.close()
    assert not failed, f"seed {seed}: {failed}"
    assert not bad, f"seed {seed}: {len(bad)} mismatches, first: {bad[0]}"
