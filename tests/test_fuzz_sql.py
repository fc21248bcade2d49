"""Differential SQL fuzzing against PostgreSQL 15.

Random statements from a small grammar over a fixed schema run on Headwater and on
PostgreSQL with the same data. Headwater must never crash or hang, every error must
carry a SQLSTATE, and when PostgreSQL answers, Headwater must give the same rows
(compared as the text both servers send, sorted) or a 0A000 naming what it lacks.
When PostgreSQL refuses a statement, Headwater must refuse it too. Writes are
applied to both and compared through the next reads. The seed is printed on
failure: HW_SEED=<seed> reproduces a run.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import psycopg
import pytest

STATEMENTS = int(os.environ.get("HW_FUZZ_STATEMENTS", "1500"))

TABLES = {
    "fa": ["a int", "b int", "s text"],
    "fb": ["a int", "c int", "t text"],
}
INT_COLS = {"fa": ["a", "b"], "fb": ["a", "c"]}
TEXT_COLS = {"fa": ["s"], "fb": ["t"]}
WORDS = ["x", "y", "ab", "b", "", "zz"]


class Gen:
    def __init__(self, rng: random.Random) -> None:
        self.r = rng

    def pick(self, xs: list[str]) -> str:
        return self.r.choice(xs)

    def int_expr(self, t: str, depth: int = 0) -> str:
        r = self.r.random()
        if depth > 2 or r < 0.35:
            return self.pick(INT_COLS[t])
        if r < 0.5:
            return str(self.r.randint(-5, 20))
        if r < 0.7:
            op = self.pick(["+", "-", "*"])
            return f"({self.int_expr(t, depth + 1)} {op} {self.int_expr(t, depth + 1)})"
        if r < 0.78:
            return f"({self.int_expr(t, depth + 1)} / {self.pick(['2', '3', '-4'])})"
        if r < 0.85:
            return f"coalesce({self.int_expr(t, depth + 1)}, {self.r.randint(0, 9)})"
        if r < 0.92:
            return f"abs({self.int_expr(t, depth + 1)})"
        return (
            f"CASE WHEN {self.pred(t, depth + 1)} THEN {self.int_expr(t, depth + 1)} "
            f"ELSE {self.int_expr(t, depth + 1)} END"
        )

    def text_expr(self, t: str) -> str:
        r = self.r.random()
        if r < 0.5:
            return self.pick(TEXT_COLS[t])
        if r < 0.7:
            return f"'{self.pick(WORDS)}'"
        if r < 0.85:
            return f"upper({self.pick(TEXT_COLS[t])})"
        return f"({self.pick(TEXT_COLS[t])} || '{self.pick(WORDS)}')"

    def pred(self, t: str, depth: int = 0) -> str:
        r = self.r.random()
        if depth > 2 or r < 0.4:
            op = self.pick(["=", "<>", "<", ">=", "IS DISTINCT FROM"])
            return f"{self.int_expr(t, depth + 1)} {op} {self.int_expr(t, depth + 1)}"
        if r < 0.5:
            return f"{self.text_expr(t)} {self.pick(['=', '<', 'LIKE'])} '{self.pick(WORDS)}%'"
        if r < 0.6:
            return f"{self.pick(INT_COLS[t] + TEXT_COLS[t])} IS {self.pick(['', 'NOT '])}NULL"
        if r < 0.7:
            return f"NOT ({self.pred(t, depth + 1)})"
        if r < 0.8:
            other = "fb" if t == "fa" else "fa"
            return (
                f"{self.pick(INT_COLS[t])} {self.pick(['IN', 'NOT IN'])} "
                f"(SELECT {self.pick(INT_COLS[other])} FROM {other} "
                f"WHERE {self.pick(INT_COLS[other])} IS NOT NULL)"
            )
        if r < 0.85:
            other = "fb" if t == "fa" else "fa"
            return f"EXISTS (SELECT 1 FROM {other} o WHERE o.a = {t}.a)"
        return f"({self.pred(t, depth + 1)} {self.pick(['AND', 'OR'])} {self.pred(t, depth + 1)})"

    def select(self) -> str:
        t = self.pick(list(TABLES))
        r = self.r.random()
        if r < 0.35:
            cols = ", ".join(self.int_expr(t) for _ in range(self.r.randint(1, 3)))
            distinct = "DISTINCT " if self.r.random() < 0.2 else ""
            return f"SELECT {distinct}{cols}, {self.text_expr(t)} FROM {t} WHERE {self.pred(t)}"
        if r < 0.6:
            g = self.pick(INT_COLS[t] + TEXT_COLS[t])
            agg = self.pick(
                [
                    "count(*)",
                    f"sum({self.int_expr(t)})",
                    f"min({self.int_expr(t)})",
                    f"max({self.text_expr(t)})",
                    f"count({self.pick(INT_COLS[t])})",
                    f"count(DISTINCT {self.pick(INT_COLS[t])})",
                    f"bool_and({self.pred(t)})",
                ]
            )
            having = f" HAVING count(*) > {self.r.randint(0, 2)}" if self.r.random() < 0.3 else ""
            return f"SELECT {g}, {agg} FROM {t} WHERE {self.pred(t)} GROUP BY {g}{having}"
        if r < 0.7:
            agg = self.pick(["count(*)", "sum(a)", "max(a)", "min(a)"])
            return f"SELECT {agg} FROM {t} WHERE {self.pred(t)}"
        if r < 0.85:
            kind = self.pick(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"])
            return (
                f"SELECT fa.a, fa.b, fb.c, fb.t FROM fa {kind} fb ON fa.a = fb.a "
                f"WHERE {self.pick(['true', 'fa.b IS NULL OR fa.b > 2', 'fb.c IS NOT NULL'])}"
            )
        op = self.pick(["UNION", "UNION ALL", "INTERSECT", "EXCEPT", "EXCEPT ALL"])
        left, right = self.pred("fa"), self.pred("fb")
        return f"SELECT a FROM fa WHERE {left} {op} SELECT a FROM fb WHERE {right}"

    def write(self) -> str:
        t = self.pick(list(TABLES))
        r = self.r.random()
        if r < 0.5:
            rows = []
            for _ in range(self.r.randint(1, 3)):
                a = self.pick(["NULL", str(self.r.randint(0, 12))])
                b = self.pick(["NULL", str(self.r.randint(-3, 9))])
                s = self.pick(["NULL"] + [f"'{w}'" for w in WORDS])
                rows.append(f"({a}, {b}, {s})")
            return f"INSERT INTO {t} VALUES {', '.join(rows)}"
        if r < 0.8:
            col = self.pick(INT_COLS[t])
            return f"UPDATE {t} SET {col} = {self.int_expr(t)} WHERE {self.pred(t)}"
        return f"DELETE FROM {t} WHERE {self.pred(t)}"


def _run(conn: psycopg.Connection, sql: str) -> tuple[str, object]:
    try:
        cur = conn.execute(sql)
        if cur.description is None:
            return "ok", cur.statusmessage
        rows = cur.pgresult
        assert rows is not None
        out = sorted(
            tuple(_cell(rows.get_value(i, j)) for j in range(rows.nfields))
            for i in range(rows.ntuples)
        )
        return "rows", out
    except psycopg.Error as e:
        code = e.sqlstate
        assert code, f"error without SQLSTATE for {sql!r}: {e}"
        return "error", code


def _cell(v: bytes | None) -> str:
    return "NULL" if v is None else "v:" + v.decode()


def _raw_conn(dsn: str) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.adapters.register_loader("numeric", psycopg.types.string.TextLoader)  # compare text
    return conn


def test_sql_fuzz_matches_postgres(hw_server, pg_oracle) -> None:  # type: ignore[no-untyped-def]
    seed = int(os.environ.get("HW_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    gen = Gen(rng)
    hw, pg = _raw_conn(hw_server.dsn), _raw_conn(pg_oracle.dsn)
    for conn in (hw, pg):
        for t, cols in TABLES.items():
            conn.execute(f"DROP TABLE IF EXISTS {t}")
            conn.execute(f"CREATE TABLE {t} ({', '.join(cols)})")
    tried = unsupported = 0
    step: Callable[[], str]
    for i in range(STATEMENTS):
        step = gen.write if rng.random() < 0.3 else gen.select
        sql = step()
        tried += 1
        expected, actual = _run(pg, sql), _run(hw, sql)
        if actual == ("error", "0A000") and expected[0] != "error":
            unsupported += 1
            continue
        if expected[0] == "error":
            assert actual[0] == "error", (
                f"seed {seed}, statement {i}: PostgreSQL refused ({expected[1]}) "
                f"but Headwater answered: {sql}"
            )
            continue
        assert actual == expected, (
            f"seed {seed}, statement {i}: {sql}\nPostgreSQL: {expected}\nHeadwater:  {actual}"
        )
    print(f"sql fuzz: seed {seed}, {tried} statements, {unsupported} answered 0A000")
    hw.close()
    pg.close()


@pytest.fixture(autouse=True)
def _cleanup(hw_server):  # type: ignore[no-untyped-def]
    yield
    with psycopg.connect(hw_server.dsn, autocommit=True) as conn:
        for t in TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {t}")
