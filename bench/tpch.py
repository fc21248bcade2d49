"""TPC-H data, schema, view queries and churn, shared by bench/matviews.py and
tests/test_matviews_tpch.py.

Data comes from the PyPI package tpchgen-cli (a pinned test dependency: it generates
offline, no download). `load` sends the same DDL and COPY payloads to any server
speaking the PostgreSQL protocol; `Churn` makes deterministic INSERT/UPDATE/DELETE
statements over lineitem and orders, so applying the same statements to Headwater and
to PostgreSQL leaves the same data on both.
"""

from __future__ import annotations

import decimal
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

TABLES: dict[str, str] = {
    "region": "r_regionkey integer NOT NULL PRIMARY KEY, r_name char(25) NOT NULL,"
    " r_comment varchar(152)",
    "nation": "n_nationkey integer NOT NULL PRIMARY KEY, n_name char(25) NOT NULL,"
    " n_regionkey integer NOT NULL, n_comment varchar(152)",
    "part": "p_partkey integer NOT NULL PRIMARY KEY, p_name varchar(55) NOT NULL,"
    " p_mfgr char(25) NOT NULL, p_brand char(10) NOT NULL, p_type varchar(25) NOT NULL,"
    " p_size integer NOT NULL, p_container char(10) NOT NULL,"
    " p_retailprice numeric(15,2) NOT NULL, p_comment varchar(23) NOT NULL",
    "supplier": "s_suppkey integer NOT NULL PRIMARY KEY, s_name char(25) NOT NULL,"
    " s_address varchar(40) NOT NULL, s_nationkey integer NOT NULL,"
    " s_phone char(15) NOT NULL, s_acctbal numeric(15,2) NOT NULL,"
    " s_comment varchar(101) NOT NULL",
    "customer": "c_custkey integer NOT NULL PRIMARY KEY, c_name varchar(25) NOT NULL,"
    " c_address varchar(40) NOT NULL, c_nationkey integer NOT NULL,"
    " c_phone char(15) NOT NULL, c_acctbal numeric(15,2) NOT NULL,"
    " c_mktsegment char(10) NOT NULL, c_comment varchar(117) NOT NULL",
    "orders": "o_orderkey integer NOT NULL PRIMARY KEY, o_custkey integer NOT NULL,"
    " o_orderstatus char(1) NOT NULL, o_totalprice numeric(15,2) NOT NULL,"
    " o_orderdate date NOT NULL, o_orderpriority char(15) NOT NULL,"
    " o_clerk char(15) NOT NULL, o_shippriority integer NOT NULL,"
    " o_comment varchar(79) NOT NULL",
    "lineitem": "l_orderkey integer NOT NULL, l_partkey integer NOT NULL,"
    " l_suppkey integer NOT NULL, l_linenumber integer NOT NULL,"
    " l_quantity numeric(15,2) NOT NULL, l_extendedprice numeric(15,2) NOT NULL,"
    " l_discount numeric(15,2) NOT NULL, l_tax numeric(15,2) NOT NULL,"
    " l_returnflag char(1) NOT NULL, l_linestatus char(1) NOT NULL,"
    " l_shipdate date NOT NULL, l_commitdate date NOT NULL, l_receiptdate date NOT NULL,"
    " l_shipinstruct char(25) NOT NULL, l_shipmode char(10) NOT NULL,"
    " l_comment varchar(44) NOT NULL, PRIMARY KEY (l_orderkey, l_linenumber)",
}

# TPC-H queries with the specification's validation parameters. Materialized views
# refuse ORDER BY ... LIMIT (0A000: a view is a set, LIMIT is not incremental here), so
# 3 and 10 are their queries without `ORDER BY revenue desc, ... LIMIT 10/20`: every
# group, not the top ones. The others are as written.
QUERIES: dict[str, str] = {
    "q1": "select l_returnflag, l_linestatus, sum(l_quantity) as sum_qty,"
    " sum(l_extendedprice) as sum_base_price,"
    " sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,"
    " sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,"
    " avg(l_quantity) as avg_qty, avg(l_extendedprice) as avg_price,"
    " avg(l_discount) as avg_disc, count(*) as count_order from lineitem"
    " where l_shipdate <= date '1998-12-01' - interval '90' day"
    " group by l_returnflag, l_linestatus order by l_returnflag, l_linestatus",
    "q3": "select l_orderkey, sum(l_extendedprice * (1 - l_discount)) as revenue,"
    " o_orderdate, o_shippriority from customer, orders, lineitem"
    " where c_mktsegment = 'BUILDING' and c_custkey = o_custkey and l_orderkey = o_orderkey"
    " and o_orderdate < date '1995-03-15' and l_shipdate > date '1995-03-15'"
    " group by l_orderkey, o_orderdate, o_shippriority",
    "q5": "select n_name, sum(l_extendedprice * (1 - l_discount)) as revenue"
    " from customer, orders, lineitem, supplier, nation, region"
    " where c_custkey = o_custkey and l_orderkey = o_orderkey and l_suppkey = s_suppkey"
    " and c_nationkey = s_nationkey and s_nationkey = n_nationkey"
    " and n_regionkey = r_regionkey and r_name = 'ASIA'"
    " and o_orderdate >= date '1994-01-01'"
    " and o_orderdate < date '1994-01-01' + interval '1' year"
    " group by n_name order by revenue desc",
    "q6": "select sum(l_extendedprice * l_discount) as revenue from lineitem"
    " where l_shipdate >= date '1994-01-01'"
    " and l_shipdate < date '1994-01-01' + interval '1' year"
    " and l_discount between 0.06 - 0.01 and 0.06 + 0.01 and l_quantity < 24",
    "q10": "select c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) as revenue,"
    " c_acctbal, n_name, c_address, c_phone, c_comment"
    " from customer, orders, lineitem, nation"
    " where c_custkey = o_custkey and l_orderkey = o_orderkey"
    " and o_orderdate >= date '1993-10-01'"
    " and o_orderdate < date '1993-10-01' + interval '3' month"
    " and l_returnflag = 'R' and c_nationkey = n_nationkey"
    " group by c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment",
    "q12": "select l_shipmode, sum(case when o_orderpriority = '1-URGENT'"
    " or o_orderpriority = '2-HIGH' then 1 else 0 end) as high_line_count,"
    " sum(case when o_orderpriority <> '1-URGENT' and o_orderpriority <> '2-HIGH'"
    " then 1 else 0 end) as low_line_count from orders, lineitem"
    " where o_orderkey = l_orderkey and l_shipmode in ('MAIL', 'SHIP')"
    " and l_commitdate < l_receiptdate and l_shipdate < l_commitdate"
    " and l_receiptdate >= date '1994-01-01'"
    " and l_receiptdate < date '1994-01-01' + interval '1' year"
    " group by l_shipmode order by l_shipmode",
    "q14": "select 100.00 * sum(case when p_type like 'PROMO%'"
    " then l_extendedprice * (1 - l_discount) else 0 end)"
    " / sum(l_extendedprice * (1 - l_discount)) as promo_revenue from lineitem, part"
    " where l_partkey = p_partkey and l_shipdate >= date '1995-09-01'"
    " and l_shipdate < date '1995-09-01' + interval '1' month",
}
# The original ORDER BY ... LIMIT of 3 and 10 (CREATE MATERIALIZED VIEW refuses them).
TOP_N = {
    "q3": " order by revenue desc, o_orderdate limit 10",
    "q10": " order by revenue desc limit 20",
}
# Each view's group key (its rows are unique on it); the other columns are measures.
KEYS: dict[str, tuple[str, ...]] = {
    "q1": ("l_returnflag", "l_linestatus"),
    "q3": ("l_orderkey", "o_orderdate", "o_shippriority"),
    "q5": ("n_name",),
    "q6": (),
    "q10": ("c_custkey", "c_name", "c_acctbal", "c_phone", "n_name", "c_address", "c_comment"),
    "q12": ("l_shipmode",),
    "q14": (),
}
# A change to lineitem and its removal, leaving the data as it was: benches run it after
# creating views, so that Headwater's stage starts before anything is measured.
PRIME = (
    "INSERT INTO lineitem VALUES (1, 1, 1, 99, 1, 1000.00, 0.05, 0.01, 'N', 'O',"
    " date '1996-01-01', date '1996-01-01', date '1996-01-02', 'NONE', 'MAIL', 'prime')",
    "DELETE FROM lineitem WHERE l_orderkey = 1 AND l_linenumber = 99",
)
LOAD_ORDER = ("region", "nation", "part", "supplier", "customer", "orders", "lineitem")


def tpchgen_exe() -> str:
    """tpchgen-cli from the venv this Python runs in (scripts/setup.sh installs it)."""
    for cand in (Path(sys.executable).parent / "tpchgen-cli", shutil.which("tpchgen-cli")):
        if cand and Path(cand).exists():
            return str(cand)
    raise FileNotFoundError(
        "tpchgen-cli not found: it is a test dependency (scripts/setup.sh installs it; "
        "or .venv/bin/pip install tpchgen-cli)"
    )


def generate(out_dir: Path, scale: float, tables: tuple[str, ...] = LOAD_ORDER) -> Path:
    """TPC-H .tbl files (pipe-separated, a trailing '|') for `scale` in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            tpchgen_exe(),
            "-s",
            str(scale),
            "--tables",
            ",".join(tables),
            "--output-dir",
            str(out_dir),
            "--overwrite",
        ],
        check=True,
        capture_output=True,
    )
    return out_dir


def copy_payload(path: Path) -> bytes:
    """A .tbl file as COPY text with '|' as delimiter (TPC-H text has no backslash)."""
    data = path.read_bytes()
    assert b"\\" not in data
    return data.replace(b"|\n", b"\n")


@dataclass
class Loaded:
    rows: dict[str, int] = field(default_factory=dict)
    max_orderkey: int = 0


def load(
    conn: psycopg.Connection,
    data_dir: Path,
    tables: tuple[str, ...] = LOAD_ORDER,
    schema: dict[str, str] = TABLES,
) -> Loaded:
    """CREATE the tables (columns from `schema`) in the connection's search_path and
    COPY the data in."""
    out = Loaded()
    for name in tables:
        conn.execute(f"CREATE TABLE {name} ({schema[name]})")
        payload = copy_payload(data_dir / f"{name}.tbl")
        with conn.cursor() as cur, cur.copy(f"COPY {name} FROM STDIN WITH (DELIMITER '|')") as cp:
            cp.write(payload)
        out.rows[name] = payload.count(b"\n")
    if "orders" in tables:
        row = conn.execute("SELECT max(o_orderkey) FROM orders").fetchone()
        out.max_orderkey = int(row[0]) if row and row[0] is not None else 0
    return out


def _date(rng: random.Random) -> str:
    y, m, d = rng.randrange(1992, 1999), rng.randrange(1, 13), rng.randrange(1, 29)
    return f"{y:04d}-{m:02d}-{d:02d}"


@dataclass
class Churn:
    """Deterministic churn of lineitem and orders.

    Each `batch()` is a list of statements (text only, no parameters: the same bytes go
    to both servers). New orders take keys above the loaded ones; UPDATEs and DELETEs
    pick rows by key arithmetic, so every statement means the same on any server
    holding the same data. Lineitems of deleted orders are deleted with them, and
    UPDATEs move rows across the queries' date, discount and flag boundaries.
    """

    seed: int
    next_orderkey: int
    customers: int = 1500
    parts: int = 2000
    suppliers: int = 100
    rng: random.Random = field(init=False)
    live_new: list[int] = field(default_factory=list)  # orderkeys this churn inserted

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def insert_orders(self, n: int) -> list[str]:
        rng = self.rng
        orders, lines = [], []
        for _ in range(n):
            k = self.next_orderkey
            self.next_orderkey += 1
            self.live_new.append(k)
            cust = rng.randrange(1, self.customers + 1)
            prio = rng.choice(["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"])
            odate = _date(rng)
            orders.append(
                f"({k}, {cust}, '{rng.choice('OFP')}', {rng.randrange(100000, 50000000) / 100:.2f},"
                f" date '{odate}', '{prio}', 'Clerk#{rng.randrange(1000):09d}', 0, 'churn {k}')"
            )
            for ln in range(1, rng.randrange(2, 8)):
                ship = _date(rng)
                lines.append(
                    f"({k}, {rng.randrange(1, self.parts + 1)},"
                    f" {rng.randrange(1, self.suppliers + 1)}, {ln}, {rng.randrange(1, 51)},"
                    f" {rng.randrange(90000, 10500000) / 100:.2f}, 0.{rng.randrange(0, 11):02d},"
                    f" 0.{rng.randrange(0, 9):02d}, '{rng.choice('RAN')}', '{rng.choice('OF')}',"
                    f" date '{ship}', date '{ship}' + {rng.randrange(-60, 60)},"
                    f" date '{ship}' + {rng.randrange(1, 31)}, 'NONE',"
                    f" '{rng.choice(['MAIL', 'SHIP', 'AIR', 'RAIL', 'TRUCK', 'FOB', 'REG AIR'])}',"
                    f" 'churn line {k}.{ln}')"
                )
        return [
            "INSERT INTO orders VALUES " + ", ".join(orders),
            "INSERT INTO lineitem VALUES " + ", ".join(lines),
        ]

    def batch(self, size: int = 1) -> list[str]:
        """One batch of statements; `size` scales how many rows they touch (size 1:
        roughly 1/100 of lineitem)."""
        rng = self.rng
        m = max(2, 400 // max(size, 1))  # key modulus: a statement touches ~1/m of the rows
        stmts = self.insert_orders(rng.randrange(5, 15) * size)
        k = rng.randrange(m)
        stmts.append(
            "UPDATE lineitem SET l_discount = CASE WHEN l_discount >= 0.10 THEN 0.00"
            " ELSE l_discount + 0.01 END, l_quantity = l_quantity + 1"
            f" WHERE l_orderkey % {m} = {k}"
        )
        k = rng.randrange(m)
        shift = rng.choice([-90, -30, 30, 90])
        stmts.append(
            f"UPDATE lineitem SET l_shipdate = l_shipdate + {shift},"
            f" l_returnflag = CASE WHEN l_returnflag = 'R' THEN 'A' ELSE 'R' END"
            f" WHERE l_orderkey % {m} = {k} AND l_linenumber <= 2"
        )
        k = rng.randrange(m)
        stmts.append(f"DELETE FROM lineitem WHERE l_orderkey % {m} = {k} AND l_linenumber = 3")
        k = rng.randrange(m)
        stmts.append(
            f"UPDATE orders SET o_orderdate = o_orderdate - {rng.choice([45, 120, 400])},"
            " o_orderpriority = CASE WHEN o_orderpriority = '1-URGENT' THEN '5-LOW'"
            " ELSE '1-URGENT' END"
            f" WHERE o_orderkey % {m} = {k}"
        )
        k = rng.randrange(m * 2)
        stmts.append(f"DELETE FROM lineitem WHERE l_orderkey % {m * 2} = {k}")
        stmts.append(f"DELETE FROM orders WHERE o_orderkey % {m * 2} = {k}")
        if self.live_new and rng.random() < 0.7:  # some of this churn's own orders go
            gone = rng.sample(self.live_new, min(len(self.live_new), 3))
            keys = ", ".join(map(str, gone))
            self.live_new = [x for x in self.live_new if x not in gone]
            stmts.append(f"DELETE FROM lineitem WHERE l_orderkey IN ({keys})")
            stmts.append(f"DELETE FROM orders WHERE o_orderkey IN ({keys})")
        return stmts


# --- comparing a view with PostgreSQL's answer ----------------------------------------


def _same(pg: Any, hw: Any) -> bool:
    """Exact for PostgreSQL numerics of scale <= 6 (sums of numeric(15,2) products) and
    everything else; within 1e-9 relative for AVG and division (PostgreSQL computes 16+
    digits, the view's type may hold fewer)."""
    if isinstance(pg, decimal.Decimal) and hw is not None:
        exp = pg.as_tuple().exponent
        if isinstance(exp, int) and exp >= -6:
            return decimal.Decimal(str(hw)) == pg
        return abs(float(hw) - float(pg)) <= 1e-9 * max(1.0, abs(float(pg)))
    return bool(pg == hw)


def _keyed(
    keys: tuple[str, ...], cols: list[str], rows: list[tuple[Any, ...]]
) -> dict[tuple[Any, ...], list[tuple[Any, ...]]]:
    idx = [cols.index(k) for k in keys]
    out: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for r in rows:
        out.setdefault(tuple(r[i] for i in idx), []).append(r)
    return out


def compare(
    name: str,
    pg: tuple[list[str], list[tuple[Any, ...]]],
    hw: tuple[list[str], list[tuple[Any, ...]]],
    keys: tuple[str, ...] | None = None,
) -> list[str]:
    """Differences between PostgreSQL's rows and the view's (empty: equal); `keys`: the
    view's group key (default KEYS[name])."""
    keys = KEYS[name] if keys is None else keys
    (pcols, prows), (hcols, hrows) = pg, hw
    if pcols != hcols:
        return [f"{name}: columns {hcols}, PostgreSQL has {pcols}"]
    if len(prows) != len(hrows):
        return [f"{name}: {len(hrows)} rows, PostgreSQL has {len(prows)}"]
    pk, hk = _keyed(keys, pcols, prows), _keyed(keys, hcols, hrows)
    bad = []
    for key, prs in pk.items():
        hrs = hk.get(key)
        if hrs is None or len(hrs) != len(prs):
            bad.append(f"{name}: group {key}: PostgreSQL {prs}, view {hrs}")
            continue
        for pr, hr in zip(prs, hrs, strict=True):
            if not all(_same(p, h) for p, h in zip(pr, hr, strict=True)):
                bad.append(f"{name}: group {key}: PostgreSQL {pr}, view {hr}")
    bad += [f"{name}: group {k} only in the view: {v}" for k, v in hk.items() if k not in pk]
    return bad
