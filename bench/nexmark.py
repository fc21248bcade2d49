"""Nexmark q0-q22 as materialized views (RisingWave's SQL, TUMBLE/HOP included), a small
deterministic generator of the person/auction/bid streams, and per-query maintenance
figures next to PostgreSQL re-running the query after each epoch (REFRESH's work).

q11's session windows and q12's processing time have no form in Headwater or PostgreSQL;
they are written in SQL both run:
q11's session windows (a bidder's bids with gaps of at most 10 s, Flink's SESSION(...,
INTERVAL '10' SECOND)) with window functions: lag() marks the bids that start a session,
a running sum() numbers the sessions, a GROUP BY counts them. q12's processing-time
windows (RisingWave's TUMBLE over `p_time AS proctime()`) read bid.p_time, an ingestion
time the generator fills deterministically instead of the clock of the machine: a
little after the bid's event time and never before the previous event's (a processing
clock), so that the view and PostgreSQL see the same times.

    .venv/bin/python -m bench.nexmark [--epochs 100] [--events 40] [--seed 1]

Each query gets its own engine (DuckDB executor, batches of one epoch) over the same
stream; the figures are the engine's time per epoch to advance the view, and
PostgreSQL's time to evaluate the query (windows as plain SQL: `postgres_form`).
q6 is RisingWave's with a PostgreSQL-valid grouping (RisingWave groups by A.id,
A.seller and selects B.date_time); tests/test_engine_nexmark.py checks every query
against PostgreSQL at each epoch.
"""

from __future__ import annotations

import argparse
import random
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

START = datetime(2026, 11, 1)

# name -> [(column, PostgreSQL type, DuckDB type, Arrow type)]
TABLES: dict[str, list[tuple[str, str, str, Any]]] = {
    "person": [
        ("id", "bigint", "BIGINT", pa.int64()),
        ("name", "varchar", "VARCHAR", pa.string()),
        ("email_address", "varchar", "VARCHAR", pa.string()),
        ("credit_card", "varchar", "VARCHAR", pa.string()),
        ("city", "varchar", "VARCHAR", pa.string()),
        ("state", "varchar", "VARCHAR", pa.string()),
        ("date_time", "timestamp", "TIMESTAMP", pa.timestamp("us")),
        ("extra", "varchar", "VARCHAR", pa.string()),
    ],
    "auction": [
        ("id", "bigint", "BIGINT", pa.int64()),
        ("item_name", "varchar", "VARCHAR", pa.string()),
        ("description", "varchar", "VARCHAR", pa.string()),
        ("initial_bid", "bigint", "BIGINT", pa.int64()),
        ("reserve", "bigint", "BIGINT", pa.int64()),
        ("date_time", "timestamp", "TIMESTAMP", pa.timestamp("us")),
        ("expires", "timestamp", "TIMESTAMP", pa.timestamp("us")),
        ("seller", "bigint", "BIGINT", pa.int64()),
        ("category", "bigint", "BIGINT", pa.int64()),
        ("extra", "varchar", "VARCHAR", pa.string()),
    ],
    "bid": [
        ("auction", "bigint", "BIGINT", pa.int64()),
        ("bidder", "bigint", "BIGINT", pa.int64()),
        ("price", "bigint", "BIGINT", pa.int64()),
        ("channel", "varchar", "VARCHAR", pa.string()),
        ("url", "varchar", "VARCHAR", pa.string()),
        ("date_time", "timestamp", "TIMESTAMP", pa.timestamp("us")),
        ("extra", "varchar", "VARCHAR", pa.string()),
        # ingestion (processing) time, q12's: filled by the generator (module docstring)
        ("p_time", "timestamp", "TIMESTAMP", pa.timestamp("us")),
    ],
    # q13's side input (Nexmark's is a file; here a table, changed now and then)
    "side_input": [
        ("key", "bigint", "BIGINT", pa.int64()),
        ("value", "varchar", "VARCHAR", pa.string()),
    ],
}

QUERIES: dict[str, str] = {
    "q0": "SELECT auction, bidder, price, date_time FROM bid",
    "q1": "SELECT auction, bidder, 0.908 * price AS price, date_time FROM bid",
    "q2": "SELECT auction, price FROM bid WHERE auction = 1007 OR auction = 1020"
    " OR auction = 2001 OR auction = 2019 OR auction = 2087",
    "q3": "SELECT P.name, P.city, P.state, A.id FROM auction AS A INNER JOIN person AS P"
    " ON A.seller = P.id WHERE A.category = 10"
    " AND (P.state = 'or' OR P.state = 'id' OR P.state = 'ca')",
    "q4": "SELECT Q.category, AVG(Q.final) AS avg FROM (SELECT MAX(B.price) AS final,"
    " A.category FROM auction A, bid B WHERE A.id = B.auction AND B.date_time BETWEEN"
    " A.date_time AND A.expires GROUP BY A.id, A.category) Q GROUP BY Q.category",
    "q5": "SELECT AuctionBids.auction, AuctionBids.num FROM (SELECT bid.auction, count(*) AS num,"
    " window_start AS starttime FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10'"
    " SECOND) GROUP BY window_start, bid.auction) AS AuctionBids JOIN (SELECT"
    " max(CountBids.num) AS maxn, CountBids.starttime_c FROM (SELECT count(*) AS num,"
    " window_start AS starttime_c FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10'"
    " SECOND) GROUP BY bid.auction, window_start) AS CountBids GROUP BY CountBids.starttime_c)"
    " AS MaxBids ON AuctionBids.starttime = MaxBids.starttime_c"
    " AND AuctionBids.num >= MaxBids.maxn",
    "q6": "SELECT Q.seller, AVG(Q.final) OVER (PARTITION BY Q.seller ORDER BY Q.expires, Q.id"
    " ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg FROM (SELECT A.id, A.seller,"
    " A.expires, MAX(B.price) AS final FROM auction AS A, bid AS B WHERE A.id = B.auction"
    " AND B.date_time BETWEEN A.date_time AND A.expires GROUP BY A.id, A.seller, A.expires) Q",
    "q7": "SELECT B.auction, B.price, B.bidder, B.date_time FROM bid B JOIN (SELECT MAX(price)"
    " AS maxprice, window_end AS date_time FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)"
    " GROUP BY window_end) B1 ON B.price = B1.maxprice WHERE B.date_time BETWEEN"
    " B1.date_time - INTERVAL '10' SECOND AND B1.date_time",
    "q8": "SELECT P.id, P.name, P.starttime FROM (SELECT id, name, window_start AS starttime,"
    " window_end AS endtime FROM TUMBLE(person, date_time, INTERVAL '10' SECOND) GROUP BY id,"
    " name, window_start, window_end) P JOIN (SELECT seller, window_start AS starttime,"
    " window_end AS endtime FROM TUMBLE(auction, date_time, INTERVAL '10' SECOND) GROUP BY"
    " seller, window_start, window_end) A ON P.id = A.seller AND P.starttime = A.starttime"
    " AND P.endtime = A.endtime",
    # the winning bid of each auction (top-1 per group)
    "q9": "SELECT id, item_name, description, initial_bid, reserve, date_time, expires, seller,"
    " category, auction, bidder, price, bid_date_time FROM (SELECT A.*, B.auction, B.bidder,"
    " B.price, B.date_time AS bid_date_time, ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY"
    " B.price DESC, B.date_time ASC) AS rownum FROM auction A, bid B WHERE A.id = B.auction"
    " AND B.date_time BETWEEN A.date_time AND A.expires) tmp WHERE rownum <= 1",
    # (q10 writes to a file system sink: here the view of its rows)
    "q10": "SELECT auction, bidder, price, date_time, TO_CHAR(date_time, 'YYYY-MM-DD') AS date,"
    " TO_CHAR(date_time, 'HH:MI') AS time FROM bid",
    # bids per bidder per session (a gap of more than 10 s starts one; module docstring)
    "q11": "SELECT bidder, count(*) AS bid_count, min(date_time) AS starttime,"
    " max(date_time) + INTERVAL '10' SECOND AS endtime FROM (SELECT bidder, date_time,"
    " sum(CASE WHEN prev IS NULL OR date_time - prev > INTERVAL '10' SECOND THEN 1 ELSE 0"
    " END) OVER (PARTITION BY bidder ORDER BY date_time ROWS UNBOUNDED PRECEDING) AS session"
    " FROM (SELECT bidder, date_time, lag(date_time) OVER (PARTITION BY bidder ORDER BY"
    " date_time) AS prev FROM bid) AS b) AS s GROUP BY bidder, session",
    # bids per bidder per 10 s of processing time (p_time: module docstring)
    "q12": "SELECT bidder, count(*) AS bid_count, window_start, window_end"
    " FROM TUMBLE(bid, p_time, INTERVAL '10' SECOND) GROUP BY bidder, window_start, window_end",
    # (q13: its side input as a table)
    "q13": "SELECT B.auction, B.bidder, B.price, B.date_time, S.value FROM bid B"
    " JOIN side_input S ON mod(B.auction, 10000) = S.key",
    "q14": "SELECT auction, bidder, 0.908 * price AS price, CASE WHEN"
    " extract(hour FROM date_time) >= 8 AND extract(hour FROM date_time) <= 18 THEN 'dayTime'"
    " WHEN extract(hour FROM date_time) <= 6 OR extract(hour FROM date_time) >= 20"
    " THEN 'nightTime' ELSE 'otherTime' END AS bidTimeType, date_time, extra FROM bid"
    " WHERE 0.908 * price > 100 AND 0.908 * price < 400",
    "q15": "SELECT to_char(date_time, 'yyyy-MM-dd') AS day, count(*) AS total_bids,"
    " count(*) FILTER (WHERE price < 100) AS rank1_bids,"
    " count(*) FILTER (WHERE price >= 100 AND price < 300) AS rank2_bids,"
    " count(*) FILTER (WHERE price >= 300) AS rank3_bids,"
    " count(DISTINCT bidder) AS total_bidders,"
    " count(DISTINCT bidder) FILTER (WHERE price < 100) AS rank1_bidders,"
    " count(DISTINCT bidder) FILTER (WHERE price >= 100 AND price < 300) AS rank2_bidders,"
    " count(DISTINCT bidder) FILTER (WHERE price >= 300) AS rank3_bidders,"
    " count(DISTINCT auction) AS total_auctions,"
    " count(DISTINCT auction) FILTER (WHERE price < 100) AS rank1_auctions,"
    " count(DISTINCT auction) FILTER (WHERE price >= 100 AND price < 300) AS rank2_auctions,"
    " count(DISTINCT auction) FILTER (WHERE price >= 300) AS rank3_auctions"
    " FROM bid GROUP BY to_char(date_time, 'yyyy-MM-dd')",
    "q16": "SELECT channel, to_char(date_time, 'yyyy-MM-dd') AS day,"
    " max(to_char(date_time, 'HH:mm')) AS minute, count(*) AS total_bids,"
    " count(*) FILTER (WHERE price < 100) AS rank1_bids,"
    " count(*) FILTER (WHERE price >= 300) AS rank3_bids,"
    " count(DISTINCT bidder) AS total_bidders,"
    " count(DISTINCT bidder) FILTER (WHERE price < 100) AS rank1_bidders,"
    " count(DISTINCT auction) AS total_auctions,"
    " count(DISTINCT auction) FILTER (WHERE price >= 300) AS rank3_auctions"
    " FROM bid GROUP BY channel, to_char(date_time, 'yyyy-MM-dd')",
    "q17": "SELECT auction, to_char(date_time, 'YYYY-MM-DD') AS day, count(*) AS total_bids,"
    " count(*) FILTER (WHERE price < 100) AS rank1_bids,"
    " count(*) FILTER (WHERE price >= 100 AND price < 300) AS rank2_bids,"
    " count(*) FILTER (WHERE price >= 300) AS rank3_bids, min(price) AS min_price,"
    " max(price) AS max_price, avg(price) AS avg_price, sum(price) AS sum_price"
    " FROM bid GROUP BY auction, to_char(date_time, 'YYYY-MM-DD')",
    # the last bid of each bidder on each auction (ties by event time: the generator's
    # events are 100 ms apart, and a retracted bid can come back only as itself)
    "q18": "SELECT auction, bidder, price, channel, url, date_time, extra FROM (SELECT *,"
    " ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY date_time DESC) AS rank_number"
    " FROM bid) AS b WHERE rank_number <= 1",
    # the 10 highest bids of each auction (RisingWave orders by price alone: ties broken
    # here by time, so that the rows kept are one answer, not one of several)
    "q19": "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY"
    " price DESC, date_time) AS rank_number FROM bid) AS b WHERE rank_number <= 10",
    "q20": "SELECT auction, bidder, price, channel, url, B.date_time AS date_timeB, item_name,"
    " description, initial_bid, reserve, A.date_time AS date_timeA, expires, seller, category"
    " FROM bid B INNER JOIN auction A ON B.auction = A.id WHERE A.category = 10",
    "q21": "SELECT auction, bidder, price, channel, CASE WHEN lower(channel) = 'apple' THEN '0'"
    " WHEN lower(channel) = 'google' THEN '1' WHEN lower(channel) = 'facebook' THEN '2'"
    " WHEN lower(channel) = 'baidu' THEN '3'"
    " ELSE (regexp_match(url, '(&|^)channel_id=([^&]*)'))[2] END AS channel_id FROM bid"
    " WHERE (regexp_match(url, '(&|^)channel_id=([^&]*)'))[2] IS NOT NULL"
    " OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')",
    "q22": "SELECT auction, bidder, price, channel, split_part(url, '/', 4) AS dir1,"
    " split_part(url, '/', 5) AS dir2, split_part(url, '/', 6) AS dir3 FROM bid",
}

_ORIGIN = "TIMESTAMP '1970-01-01 00:00:00'"
_TUMBLE = re.compile(r"TUMBLE\((\w+), (\w+), (INTERVAL '(\d+)' SECOND)\)")
_HOP = re.compile(r"HOP\((\w+), (\w+), (INTERVAL '(\d+)' SECOND), (INTERVAL '(\d+)' SECOND)\)")


def postgres_form(sql: str) -> str:
    """The query with TUMBLE/HOP written as plain SQL (windows from 1970-01-01)."""

    def tumble(m: re.Match[str]) -> str:
        t, col, size = m.group(1), m.group(2), m.group(3)
        start = f"date_bin({size}, {col}, {_ORIGIN})"
        return (
            f"(SELECT *, {start} AS window_start, {start} + {size} AS window_end FROM {t}) AS {t}"
        )

    def hop(m: re.Match[str]) -> str:
        t, col, slide, size = m.group(1), m.group(2), m.group(3), m.group(5)
        n = int(m.group(6)) // int(m.group(4))
        start = f"date_bin({slide}, {col}, {_ORIGIN}) - _g * {slide}"
        return (
            f"(SELECT {t}.*, {start} AS window_start, {start} + {size} AS window_end"
            f" FROM {t}, generate_series(0, {n - 1}) AS _g WHERE {col} IS NOT NULL) AS {t}"
        )

    return _HOP.sub(hop, _TUMBLE.sub(tumble, sql))


@dataclass
class Generator:
    """Deterministic person/auction/bid events, 100 ms of event time apart; bids go to
    recent auctions, a few are retracted (deleted) to exercise the views' retractions."""

    seed: int
    clock: datetime = START
    ingested: datetime = START  # the processing clock (bid.p_time)
    next_person: int = 1000
    next_auction: int = 1000
    bids: list[tuple] = field(default_factory=list)
    side: dict[int, str] = field(default_factory=dict)
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def events(self, n: int) -> Iterator[tuple[str, tuple, int]]:
        """n events: (table, row, weight)."""
        r = self.rng
        if not self.side:  # the side input's first contents
            for key in range(1000, 1040, 3):
                self.side[key] = f"side{key}"
                yield "side_input", (key, self.side[key]), 1
        for _ in range(n):
            if r.random() < 0.03:  # a side input value changes
                key = r.choice(sorted(self.side))
                yield "side_input", (key, self.side[key]), -1
                self.side[key] = f"side{key}.{r.randrange(100)}"
                yield "side_input", (key, self.side[key]), 1
            self.clock += timedelta(milliseconds=100 * r.randrange(1, 4))
            kind = r.random()
            if kind < 0.1 or self.next_person == 1000:
                pid = self.next_person
                self.next_person += 1
                state = r.choice(["or", "id", "ca", "wa", "ny"])
                row = (pid, f"p{pid}", f"p{pid}@x", "cc", f"city{pid % 7}", state, self.clock, "")
                yield "person", row, 1
            elif kind < 0.3 or self.next_auction == 1000:
                aid = self.next_auction
                self.next_auction += 1
                seller = r.randrange(1000, self.next_person)
                expires = self.clock + timedelta(seconds=r.randrange(2, 20))
                row = (
                    aid, f"item{aid}", "", r.randrange(1, 100), r.randrange(100, 200),
                    self.clock, expires, seller, r.choice([10, 11, 12]), "",
                )  # fmt: skip
                yield "auction", row, 1
            elif kind < 0.95 or not self.bids:
                lo = max(1000, self.next_auction - 20)
                channel = r.choice(["Google", "Facebook", "Baidu", "Apple", "web", "app"])
                dirs = "/".join(f"d{r.randrange(5)}" for _ in range(r.randrange(1, 4)))
                query = f"?channel_id={r.randrange(100)}&x=1" if r.random() < 0.5 else ""
                delay = timedelta(milliseconds=r.randrange(0, 3000))
                self.ingested = max(self.ingested, self.clock + delay)
                bid = (
                    r.randrange(lo, self.next_auction), r.randrange(1000, self.next_person),
                    r.randrange(1, 500), channel, f"https://nexmark.com/{dirs}/item.htm{query}",
                    self.clock, "", self.ingested,
                )  # fmt: skip
                self.bids.append(bid)
                yield "bid", bid, 1
            else:
                yield "bid", self.bids.pop(r.randrange(len(self.bids))), -1


def arrow_changes(rows: dict[str, list[tuple]]) -> dict[str, pa.Table]:
    """Each table's change rows (weight last) as the spool holds them."""
    out = {}
    for name, changes in rows.items():
        if not changes:
            continue
        cols = TABLES[name]
        data = list(zip(*changes, strict=True))
        arrays = {c: pa.array(data[i], a) for i, (c, _, _, a) in enumerate(cols)}
        arrays["_hw_w"] = pa.array(data[-1], pa.int32())
        out[name] = pa.table(arrays)
    return out


def apply_pg(cur: Any, rows: dict[str, list[tuple]]) -> None:
    """The same changes in PostgreSQL (a deleted row: one copy of it)."""
    for name, changes in rows.items():
        cols = TABLES[name]
        for *row, w in changes:
            if w > 0:
                marks = ", ".join(["%s"] * len(row))
                cur.execute(f"INSERT INTO {name} VALUES ({marks})", row)
            else:
                cond = " AND ".join(f"{c} = %s" for c, *_ in cols)
                cur.execute(
                    f"DELETE FROM {name} WHERE ctid = (SELECT ctid FROM {name} WHERE {cond}"
                    " LIMIT 1)",
                    row,
                )


def create_pg_tables(cur: Any) -> None:
    for name, cols in TABLES.items():
        cur.execute(f"DROP TABLE IF EXISTS {name} CASCADE")
        cur.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t, _, _ in cols)})")


def main() -> None:  # pragma: no cover (a benchmark)
    import os

    import psycopg
    from headwater.catalog.catalog import Catalog
    from headwater.catalog.objects import Column, Table
    from headwater.catalog.types import ColumnType, type_named
    from headwater.engine.delta import ScanInfo
    from headwater.engine.engine import Engine
    from headwater.engine.spool import SpoolWriter
    from headwater.planner.ir import PlanBuilder
    from pglast import parse_sql

    from tests.pg_oracle import ensure_postgres_installed, start_postgres

    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--events", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    ensure_postgres_installed()
    with tempfile.TemporaryDirectory() as tmp:
        pg_server = start_postgres()
        try:
            cat = Catalog()
            oids = {n: 17000 + i for i, n in enumerate(TABLES)}
            for n, cols in TABLES.items():
                columns = tuple(Column(c, ColumnType(type_named(t), -1)) for c, t, _, _ in cols)
                cat.add_relation(Table(oids[n], "public", n, columns))
            scans = {
                oids[n]: ScanInfo(oids[n], [c for c, *_ in cols], [d for _, _, d, _ in cols])
                for n, cols in TABLES.items()
            }
            gen = Generator(args.seed)
            batches = []
            for _ in range(args.epochs):
                rows: dict[str, list[tuple]] = {n: [] for n in TABLES}
                for name, row, w in gen.events(args.events):
                    rows[name].append((*row, w))
                batches.append(rows)
            print(
                f"Nexmark, {args.epochs} epochs of {args.events} events, load average"
                f" {os.getloadavg()[0]:.1f}"
            )
            print("| query | engine ms/epoch (p50) | PostgreSQL re-run ms/epoch (p50) | rows |")
            print("|---|---|---|---|")
            with psycopg.connect(pg_server.dsn, autocommit=True) as pg:
                for q, sql in QUERIES.items():
                    with pg.cursor() as cur:
                        create_pg_tables(cur)
                    spool, state = Path(tmp) / f"spool_{q}", Path(tmp) / f"state_{q}"
                    writer = SpoolWriter(spool)
                    engine = Engine(state, spool)
                    plan = PlanBuilder(cat, ("public",)).build(parse_sql(sql)[0].stmt)
                    engine.create_view(1, plan, {o: scans[o] for o in plan.tables}, at_epoch=0)
                    ours, theirs = [], []
                    for e, rows in enumerate(batches, start=1):
                        changes = arrow_changes(rows)
                        writer.write_epoch(e, {oids[n]: t for n, t in changes.items()})
                        t0 = time.perf_counter()
                        engine.advance(e)
                        ours.append(time.perf_counter() - t0)
                        with pg.cursor() as cur:
                            apply_pg(cur, rows)
                            t0 = time.perf_counter()
                            cur.execute(postgres_form(sql))
                            n = len(cur.fetchall())
                            theirs.append(time.perf_counter() - t0)
                    engine.close()
                    ours.sort()
                    theirs.sort()
                    print(
                        f"| {q} | {1000 * ours[len(ours) // 2]:.1f} |"
                        f" {1000 * theirs[len(theirs) // 2]:.1f} | {n} |"
                    )
        finally:
            pg_server.stop()


if __name__ == "__main__":
    main()
