"""The read path's shortcuts around printing and lexing SQL give what the long way gave:
pglast's printer without its per-call setup (planner/syntax.py `deparse`), a bare
column's text (planner/ir.py `column_sql`), remembered translations (planner/pg_compat.py
`translate_sql`) and the $n a bound read names (server/reads.py `param_numbers`)."""

from __future__ import annotations

import random

import pglast.ast as A
import pytest
from headwater.planner import pg_compat
from headwater.planner.functions.literals import DATE_ORDER
from headwater.planner.ir import column_sql, pg_semantics
from headwater.planner.relations import deparse as relations_deparse  # (the keyword patch)
from headwater.planner.syntax import deparse, nodes
from headwater.server import reads
from pglast import parse_sql
from pglast.parser import scan
from pglast.stream import RawStream

STATEMENTS = [
    "SELECT a, b + 1 AS c, 'it''s' FROM t WHERE a = $1 AND b IN (1, 2, 3) ORDER BY 2 DESC",
    "SELECT count(*) FILTER (WHERE x > 0), sum(DISTINCT y) OVER (PARTITION BY z) FROM t",
    "WITH r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
    "SELECT CASE WHEN a IS NULL THEN 'x' ELSE b::text END, ARRAY[1, 2], (1, 'a')",
    'SELECT "select", "Mixed Case", at, pivot FROM "order" AS o JOIN u USING (id)',
    "SELECT date '2020-01-02' + interval '1 day', E'a\\nb', $$dollar$$, B'101'",
    "INSERT INTO t (a, b) VALUES (1, 'x') ON CONFLICT (a) DO UPDATE SET b = EXCLUDED.b",
    "UPDATE t SET a = a + 1 FROM u WHERE t.id = u.id RETURNING *",
    "SELECT x FROM generate_series(1, 3) AS g(x) WHERE EXISTS (SELECT 1 FROM t WHERE t.a = x)",
    "SELECT a LIKE 'x\\_%' ESCAPE '\\', b ~* 'y', c IS DISTINCT FROM d, NOT (e AND f)",
]


def test_deparse_prints_as_pglast() -> None:
    checked = 0
    for sql in STATEMENTS:
        try:
            tree = parse_sql(sql)
        except Exception:
            continue
        for raw in tree:
            for node in list(nodes(raw.stmt))[:60]:
                try:
                    want = str(RawStream()(node))
                except Exception as exc:
                    with pytest.raises(type(exc)):
                        deparse(node)
                    continue
                assert deparse(node) == want, sql
                checked += 1
    assert checked > 200
    assert relations_deparse is deparse


def test_column_sql_is_the_translated_column() -> None:
    names = ["a", "c17", "Abc", "select", "at", "pivot", "x y", 'q"uote', "é", "user", "now"]
    for name in names:
        for types in (None, {name: "bpchar"}, {name: "date"}):
            ref = A.ColumnRef(fields=(A.String(sval=name),))
            assert column_sql(name) == deparse(pg_semantics(ref, types)), name


def test_translate_sql_remembers_per_date_order() -> None:
    sql = "SELECT count(*) FILTER (WHERE d > '01/02/2020'::date)"
    assert "2020-01-02" in pg_compat.translate_sql(sql)
    token = DATE_ORDER.set("DMY")
    try:
        assert "2020-02-01" in pg_compat.translate_sql(sql)
    finally:
        DATE_ORDER.reset(token)
    assert "2020-01-02" in pg_compat.translate_sql(sql)


def _lexed(sql: str) -> frozenset[int] | None:
    try:
        return frozenset(int(sql[t.start + 1 : t.end + 1]) for t in scan(sql) if t.name == "PARAM")
    except Exception:
        return None


def test_param_numbers_as_the_lexer() -> None:
    cases = {
        "SELECT \"a$1\", '$2', x FROM t WHERE y = $3 AND z > $12": {3, 12},
        "SELECT a$1 FROM t WHERE b = $2": {2},  # a$1 is a name
        "SELECT 1$2": {2},  # a number, then $2
        "SELECT $1$2": {1, 2},
        "SELECT E'\\'$1' || $2": {2},
        "SELECT $$ $1 $$, $tag$ $2 $tag$, $3": {3},
        "SELECT $1 -- $2\n, /* $3 */ $4": {1, 4},
        "SELECT 'a''$1''b', \"c\"\"$2\", $3": {3},
        "SELECT 'it\"s', $1": {1},
    }
    assert reads.param_numbers("SELECT 'open $1") is None is _lexed("SELECT 'open $1")
    for sql, want in cases.items():
        assert reads.param_numbers(sql) == want == _lexed(sql), sql
    pieces = ["'", "''", '"', "$1", "$2", "$12", "$", "a", "e", "E", " ", "x'", "--", "/*"]
    pieces += ["*/", "$$", "$t$", "1", "\\", "\n", "(", ",", "::", "U&", "é", "_", ".", "1e"]
    rng = random.Random(16)
    compared = 0
    for _ in range(60_000):
        sql = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 14)))
        lexed = _lexed(sql)
        if lexed is not None:
            assert reads.param_numbers(sql) == lexed, repr(sql)
            compared += 1
    assert compared > 10_000
