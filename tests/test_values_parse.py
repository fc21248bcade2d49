"""A long INSERT ... VALUES, or a statement with long IN lists, is parsed by
planner/values_parse.py: the very nodes
pglast's parse_sql gives, or None (then parse_sql runs); through the server, the same
rows and errors as PostgreSQL."""

from __future__ import annotations

from typing import Any

import pglast.ast as A
import psycopg
import pytest
from headwater.planner import values_parse
from pglast import parse_sql
from pglast.parser import ParseError, parse_sql_json

from tests.test_insert_values import CASES, COLUMNS, DEFAULTS, FAST_CASES

PAD = ", ".join(["(1, 'x')"] * 600)  # past values_parse.MIN_LENGTH

# constants only: the rows are read from the JSON text (values_parse._VALUES)
PLAIN = (
    "INSERT INTO t (a, b) VALUES (0, ''), (false, true), ('\"q\"', E'\\\\'), (E'a\\nb', E'\\x01'),"
    " (-1, -1.5), (9223372036854775808, NULL), ('ü 😀', 'x'), ('}]}},{', '\"}}'), " + PAD
)
SAME = [
    "INSERT INTO s.t AS x (a, b) VALUES (1, ''), (-2.5, NULL), (true, false), (0, -0),"
    " (E'a\\n\\\\', 12345678901234), (-9223372036854775808, 9223372036854775807),"
    " (2147483648, -2147483648), (1e5, .5), ($$dollar$$, 'it''s'), ('ü😀', U&'\\0041'),"
    " (- 1, 0.0), ('2020-01-01'::timestamp, CAST('1.5' AS numeric(12, 2))),"
    " ('{1}'::int[], 'x'::varchar(10)), (interval '1' day, 'a'\n'b'), " + PAD,
    "insert into t values (1, 2), " + PAD + "; INSERT INTO u (a) VALUES (3), (4)",
    PLAIN,
    "INSERT INTO t (a, b) OVERRIDING SYSTEM VALUE VALUES " + PAD,
    "INSERT INTO t (a, b) VALUES " + PAD + " ON CONFLICT (a) DO UPDATE SET b = excluded.b",
    "INSERT INTO t (a, b) VALUES " + PAD + " ON CONFLICT ON CONSTRAINT k DO NOTHING RETURNING *",
    "INSERT INTO t (a, b) VALUES " + PAD + " RETURNING a, b /* c */ -- d\n",
    "INSERT INTO t (a, b) SELECT 1, 'ü' UNION ALL VALUES " + PAD,
    "INSERT INTO ü (a) VALUES ('€'), ('x'); INSERT INTO t (b) VALUES ('ü'), " + PAD,
]
KEYS = ", ".join(str(k) for k in range(-5, 1200))  # an IN list past MIN_LENGTH
TEXTS = ", ".join(f"'k{k}'" for k in range(900))
SAME += [  # IN lists of constants (values_parse._IN_LISTS), and the nodes around them
    f"DELETE FROM lineitem WHERE l_linenumber = 2 AND l_orderkey IN ({KEYS})",
    "UPDATE s.t SET q = q + 1, d = CASE WHEN d >= 0.10 THEN 0.00 ELSE d + 0.01 END,"
    " f = CASE f WHEN 'R' THEN 'A' END, n = NULL"
    f" WHERE l = 1 AND k IN ({KEYS}) RETURNING k",
    f"UPDATE t SET a = 'ü' WHERE b NOT IN ({TEXTS}, 'it''s', E'\\x', NULL, -1.5, true)",
    f"DELETE FROM t WHERE (a IN ({KEYS}) OR b IN ({TEXTS})) AND c IS NOT NULL AND NOT d",
    f"SELECT a, b FROM t WHERE k IN ({KEYS}) AND b IS NULL ORDER BY a DESC NULLS LAST, b",
    f"SELECT * FROM ü WHERE k IN ('€', {TEXTS})",
    f"DELETE FROM t WHERE k IN ({KEYS}, 1 + 1, (2))",  # not all constants: the JSON path
]
OTHERS = [  # nodes values_parse does not build, statements not INSERT, or too short
    "INSERT INTO t (a, b) VALUES (1, now()), " + PAD,
    "INSERT INTO t (a, b) VALUES (1, DEFAULT), " + PAD,
    "INSERT INTO t (a, b) VALUES (B'101', +1), " + PAD,
    "INSERT INTO t (a, b) VALUES " + PAD + "; SELECT 1",
    f"SELECT count(*) FROM t WHERE k IN ({KEYS})",  # a function call
    f"DELETE FROM t WHERE k IN (SELECT a FROM u) AND j IN ({KEYS})",  # a subquery
    "SELECT * FROM (VALUES " + PAD + ") AS v",
    "SELECT * FROM t WHERE k IN (1, 2)",
    "INSERT INTO t VALUES (1, 2)",
]


def _strict(n: Any) -> Any:
    """Every attribute with its type: Node.__eq__ leaves out locations."""
    if isinstance(n, A.Node):
        return (type(n).__name__, tuple((k, _strict(getattr(n, k))) for k in n.__slots__))
    if isinstance(n, tuple):
        return ("tuple", *map(_strict, n))
    return (type(n).__name__, n)


@pytest.mark.parametrize("sql", SAME)
def test_same_nodes_as_parse_sql(sql: str) -> None:
    fast = values_parse.parse(sql)
    assert fast is not None
    assert _strict(fast) == _strict(parse_sql(sql))


def test_plain_rows_read_from_the_text() -> None:
    assert values_parse._VALUES.search(parse_sql_json(PLAIN)) is not None


@pytest.mark.parametrize("sql", OTHERS)
def test_other_statements_left_to_parse_sql(sql: str) -> None:
    assert values_parse.parse(sql) is None


def test_syntax_error_left_to_parse_sql() -> None:
    sql = "INSERT INTO t (a, b) VALUES " + PAD + ","
    assert values_parse.parse(sql) is None
    with pytest.raises(ParseError):
        parse_sql(sql)


def _outcome(c: psycopg.Connection, sql: str, block: bool) -> str | None:
    try:
        if block:
            with c.transaction():
                c.execute(sql)
        else:
            c.execute(sql)
    except psycopg.Error as e:
        return e.sqlstate
    return None


@pytest.mark.parametrize("block", [False, True], ids=["autocommit", "in-transaction"])
def test_long_values_as_postgres(hw_server, pg_oracle, table_name: str, block: bool) -> None:  # type: ignore[no-untyped-def]
    """test_insert_values' cases as long statements (values_parse's): PostgreSQL's rows
    and SQLSTATEs, the syntax error's position too."""
    cols = "a, b, c, d, e::text, f::text, g, h, i, j::text, k"
    with (
        psycopg.connect(hw_server.dsn, autocommit=True, sslmode="disable") as hw,
        psycopg.connect(pg_oracle.dsn, autocommit=True) as pg,
    ):
        paths = [(p, CASES + (FAST_CASES if p == "fast" else [])) for p in DEFAULTS]
        for case, (path, (targets, rows)) in enumerate((p, c) for p, cs in paths for c in cs):
            name = f"{table_name}_{case}"
            for c in (hw, pg):
                c.execute(f"DROP TABLE IF EXISTS {name}")
                c.execute(f"CREATE TABLE {name} ({COLUMNS.format(k=DEFAULTS[path])})")
            many = rows * (values_parse.MIN_LENGTH // len(", ".join(rows)) + 1)
            sql = f"INSERT INTO {name} ({targets}) VALUES {', '.join(many)}"
            # (mixed kinds, DEFAULT items: parse_sql's)
            assert values_parse.parse(sql) is not None or "2.5" in sql or "DEFAULT" in sql
            assert _outcome(hw, sql, block) == _outcome(pg, sql, block), sql[:200]
            query = f"SELECT {cols} FROM {name} ORDER BY {cols}"
            assert hw.execute(query).fetchall() == pg.execute(query).fetchall()
        bad = f"INSERT INTO {table_name}_0 (a) VALUES " + ", ".join(["(1)"] * 2000) + ", (1"
        errors = []
        for c in (hw, pg):
            with pytest.raises(psycopg.errors.SyntaxError) as info:
                c.execute(bad)
            errors.append((info.value.diag.message_primary, info.value.diag.statement_position))
        assert errors[0] == errors[1]
